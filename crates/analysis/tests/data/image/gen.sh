#!/bin/sh
# Regenerates the ELF fixtures of tests/image.rs from plt.c (Debian 12: gcc 12, binutils 2.40).
# plt_ibt: PIE (ET_DYN) with IBT PLTs: lazy .plt without GOT jumps, .plt.sec and a 16-byte
#          .plt.got (puts is called and its address taken).
# plt_nopie: ET_EXEC with a classic lazy .plt and no .plt.got.
# maps_*.txt were captured with `cat /proc/self/maps` and a python3 that imported ssl/ctypes.
set -eu
cd "$(dirname "$0")"
gcc -O1 -fcf-protection=full -Wl,-z,ibtplt -Wl,--build-id -o plt_ibt plt.c
gcc -O1 -no-pie -Wl,--build-id -o plt_nopie plt.c
