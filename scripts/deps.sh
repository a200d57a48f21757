#!/usr/bin/env bash
# Installs what kerf's build, tests and benchmarks need on a fresh Debian 12 machine, and
# fails loudly when something cannot be had. Sourced by scripts/demo and scripts/test.
set -euo pipefail

# Debian packages: compilers for the fixture programs, binutils (objdump, readelf, nm) that
# tests compare against, the libraries analysed in tests and benchmarks, util-linux's setpriv,
# Debian's python3.11 (a real program to instrument) and perf (uprobes as ground truth);
# libc6-dbg (libc's separate debug file, found by build-id), debuginfod (a local server for
# the debuginfod tests, with elfutils' client) and iproute2 (loopback in the test's private
# network namespace; the two namespaces and veth pair of the trace collection test); xz-utils
# (xz -T2, whose worker threads block every signal, in the trap tests) and sqlite3 (the
# all-of-libsqlite3 benchmark); prometheus (the server that scrapes `--serve` in its test),
# fonts-dejavu-core (the text of `kerf plot`'s PNG), tmux (the terminal `kerf top`'s test
# types into) and lcov (genhtml renders `kerf cover --lcov` in its test).
KERF_DEBS=(build-essential gcc clang binutils libllvm14 libstdc++6 util-linux python3 python3.11 linux-perf
  libc6-dbg debuginfod iproute2 xz-utils sqlite3 libsqlite3-0 prometheus fonts-dejavu-core tmux lcov)
# Go's toolchain builds the Go fixture (a runtime that resumes code where no call leads):
# Debian's golang-go, unless a Go is already installed (Go's own tarball in /usr/local/go).
if ! command -v go >/dev/null 2>&1 && [ ! -x /usr/local/go/bin/go ]; then
  KERF_DEBS+=(golang-go)
fi

missing=()
for p in "${KERF_DEBS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "kerf: installing Debian packages: ${missing[*]}" >&2
  if [ "$(id -u)" -ne 0 ]; then
    echo "kerf: need root to install ${missing[*]} (run as root or install them first)" >&2
    exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq || { echo "kerf: apt-get update failed" >&2; exit 1; }
  apt-get install -y -qq "${missing[@]}" >/dev/null || {
    echo "kerf: apt-get install ${missing[*]} failed" >&2
    exit 1
  }
fi

# Python packages: Perfetto's own trace schema (the `perfetto` package ships
# perfetto_trace_pb2; `protobuf` parses with it), which the trace output tests check
# .perfetto-trace files against (crates/tools/tests/trace/perfetto_check.py). Pinned; installed
# for the python3 the tests run (KERF_PYTHON overrides it).
KERF_PIPS=(perfetto==0.59.1 protobuf==7.36.2)
kerf_python="${KERF_PYTHON:-python3}"
if ! "$kerf_python" -c 'from perfetto.protos.perfetto.trace import perfetto_trace_pb2' >/dev/null 2>&1; then
  echo "kerf: installing Python packages: ${KERF_PIPS[*]}" >&2
  if ! "$kerf_python" -m pip --version >/dev/null 2>&1; then
    # Debian's own python3 comes without pip.
    if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-pip >/dev/null || true
    fi
  fi
  # Debian's python3 is "externally managed" (PEP 668): pip then needs to be told.
  "$kerf_python" -m pip install -q "${KERF_PIPS[@]}" >&2 ||
    "$kerf_python" -m pip install -q --break-system-packages "${KERF_PIPS[@]}" >&2 || {
    echo "kerf: $kerf_python -m pip install ${KERF_PIPS[*]} failed" >&2
    exit 1
  }
  "$kerf_python" -c 'from perfetto.protos.perfetto.trace import perfetto_trace_pb2' || {
    echo "kerf: perfetto's trace schema still does not import after installing ${KERF_PIPS[*]}" >&2
    exit 1
  }
fi

if ! command -v cargo >/dev/null 2>&1; then
  for c in "$HOME/.cargo/bin/cargo" /root/.cargo/bin/cargo /usr/local/cargo/bin/cargo; do
    if [ -x "$c" ]; then export PATH="$(dirname "$c"):$PATH"; break; fi
  done
fi
command -v cargo >/dev/null 2>&1 || {
  echo "kerf: cargo (Rust 1.80 or newer) is not installed; install Rust with rustup first" >&2
  exit 1
}

# The test command lints with clippy; rustup installs it if this toolchain lacks it.
if [ "${KERF_NEED_CLIPPY:-0}" = 1 ] && ! cargo clippy --version >/dev/null 2>&1; then
  command -v rustup >/dev/null 2>&1 && rustup component add clippy >&2
  cargo clippy --version >/dev/null 2>&1 || {
    echo "kerf: cargo clippy is not available and rustup could not add it" >&2
    exit 1
  }
fi
