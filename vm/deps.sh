#!/usr/bin/env bash
#! vm/deps.sh — installs the host tools that vm/run and driver/build need (qemu under TCG, cpio,
#! gzip, make, gcc) from Debian packages, and fails loudly when one cannot be had. Sourced.
#! The guest kernel itself is never installed: vm/fetch only downloads and extracts it.

# kerf_vm_missing: the packages of the tools not found, one per line.
kerf_vm_missing() {
  command -v qemu-system-x86_64 >/dev/null 2>&1 || echo qemu-system-x86
  command -v cpio >/dev/null 2>&1 || echo cpio
  command -v gzip >/dev/null 2>&1 || echo gzip
  command -v make >/dev/null 2>&1 || echo make
  # The stock kernel's kbuild calls gcc-12 by name (CC in the headers' .kernelvariables).
  command -v gcc-12 >/dev/null 2>&1 || echo gcc-12
  command -v ldd >/dev/null 2>&1 || echo libc-bin
  # pahole gives kerf.ko its BTF (driver/build), which BPF fentry programs on its functions
  # need (the kernel benchmarks' peers); xz unpacks the kernel image pahole reads the base from.
  command -v pahole >/dev/null 2>&1 || echo pahole
  command -v xz >/dev/null 2>&1 || echo xz-utils
}

kerf_vm_deps() {
  local -a need
  mapfile -t need < <(kerf_vm_missing)
  [ ${#need[@]} -eq 0 ] && return 0
  if [ "$(id -u)" -ne 0 ]; then
    echo "vm: need root to install ${need[*]} (or install them first)" >&2
    return 1
  fi
  # The VM tests run side by side and each asks for the tools: one installs, the others wait
  # for it (in a subshell, so the lock goes with it) and find nothing left to install. apt's
  # own lock is waited for too, in case something else on the machine holds it.
  (
    flock 7
    mapfile -t need < <(kerf_vm_missing)
    [ ${#need[@]} -eq 0 ] && exit 0
    echo "vm: installing Debian packages: ${need[*]}" >&2
    export DEBIAN_FRONTEND=noninteractive
    local -a apt=(apt-get -o DPkg::Lock::Timeout=600)
    "${apt[@]}" install -y -qq --no-install-recommends "${need[@]}" >/dev/null 2>&1 || {
      "${apt[@]}" update -qq >/dev/null 2>&1 || { echo "vm: apt-get update failed" >&2; exit 1; }
      "${apt[@]}" install -y -qq --no-install-recommends "${need[@]}" >/dev/null || {
        echo "vm: apt-get install ${need[*]} failed" >&2
        exit 1
      }
    }
  ) 7>/var/lock/kerf-vm-deps.lock
}
