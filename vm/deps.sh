#!/usr/bin/env bash
#! vm/deps.sh — installs the host tools that vm/run and driver/build need (qemu under TCG, cpio,
#! gzip, make, gcc) from Debian packages, and fails loudly when one cannot be had. Sourced.
#! The guest kernel itself is never installed: vm/fetch only downloads and extracts it.

kerf_vm_deps() {
  local -a need=()
  command -v qemu-system-x86_64 >/dev/null 2>&1 || need+=(qemu-system-x86)
  command -v cpio >/dev/null 2>&1 || need+=(cpio)
  command -v gzip >/dev/null 2>&1 || need+=(gzip)
  command -v make >/dev/null 2>&1 || need+=(make)
  # The stock kernel's kbuild calls gcc-12 by name (CC in the headers' .kernelvariables).
  command -v gcc-12 >/dev/null 2>&1 || need+=(gcc-12)
  command -v ldd >/dev/null 2>&1 || need+=(libc-bin)
  # pahole gives kerf.ko its BTF (driver/build), which BPF fentry programs on its functions
  # need (the kernel benchmarks' peers); xz unpacks the kernel image pahole reads the base from.
  command -v pahole >/dev/null 2>&1 || need+=(pahole)
  command -v xz >/dev/null 2>&1 || need+=(xz-utils)
  [ ${#need[@]} -eq 0 ] && return 0
  if [ "$(id -u)" -ne 0 ]; then
    echo "vm: need root to install ${need[*]} (or install them first)" >&2
    return 1
  fi
  echo "vm: installing Debian packages: ${need[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null 2>&1 || {
    apt-get update -qq >/dev/null 2>&1 || { echo "vm: apt-get update failed" >&2; return 1; }
    apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null || {
      echo "vm: apt-get install ${need[*]} failed" >&2
      return 1
    }
  }
}
