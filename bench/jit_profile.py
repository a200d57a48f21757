#!/usr/bin/env python3
"""bench/jit_profile.py DUMP_DIR PERF_DATA COMM: where a program's time goes under `kerf jit`.

Run the program as `KERF_JIT_DUMP=DUMP_DIR perf record -e cpu-clock -F 5000 -o PERF_DATA --
kerf jit ROOT --plugin none -- PROGRAM...`, then this with the process name COMM (as perf
shows it). Each sample of COMM in a code cache (the `cache-ADDR.bin` files kerf dumped) is
counted as a copied instruction when it sits on a clean point (`cache-ADDR.clean`: every
copied instruction has one), else as glue after the clean point before it (a `ret`'s lookup
after the `mov` that starts it, a frame's `lea rsp`, ...), or as out of line past the last
clean point (the last function's call stubs, shared probes, exits, miss paths). Since
session 40 each function's call stubs follow its own blocks, so they count as glue after
that function's last clean instruction (a profile from before then put them out of line). Samples outside every cache are
the program's own native code, libraries the region left untranslated, and the kernel.
Prints the shares, then the busiest glue instructions. Needs perf and objdump.
"""
import bisect
import collections
import os
import re
import subprocess
import sys


def caches(d):
    """(base, size, bin path, {cache address: original address}) of each dumped cache."""
    out = []
    for f in os.listdir(d):
        m = re.fullmatch(r'cache-([0-9a-f]+)\.bin', f)
        if not m:
            continue
        clean = {}
        with open(os.path.join(d, f'cache-{m.group(1)}.clean')) as c:
            for line in c:
                a, o = line.split()
                clean[int(a, 16)] = int(o, 16)
        path = os.path.join(d, f)
        out.append((int(m.group(1), 16), os.path.getsize(path), path, clean))
    return out


def disassemble(path, base):
    """{address: instruction text} of a raw cache dump."""
    text = subprocess.run(['objdump', '-D', '-b', 'binary', '-m', 'i386:x86-64', '-M', 'intel',
                           f'--adjust-vma={base:#x}', path],
                          capture_output=True, text=True, check=True).stdout
    ins = {}
    for line in text.splitlines():
        m = re.match(r'\s*([0-9a-f]+):\s+(?:[0-9a-f]{2} )+\s*(.*)', line)
        if m:
            ins[int(m.group(1), 16)] = m.group(2).strip()
    return ins


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__.splitlines()[0])
    d, data, comm = sys.argv[1:]
    script = subprocess.run(['perf', 'script', '-i', data, '-F', 'comm,ip'],
                            capture_output=True, text=True, check=True).stdout
    samples = collections.Counter()
    for line in script.splitlines():
        f = line.split()
        if len(f) == 2 and f[0] == comm:
            samples[int(f[1], 16)] += 1
    total = sum(samples.values())
    if total == 0:
        sys.exit(f'no samples of {comm} in {data}')
    share, glue = collections.Counter(), collections.Counter()
    for base, size, path, clean in caches(d):
        here = {ip: n for ip, n in samples.items() if base <= ip < base + size}
        if not here:
            continue
        ins = disassemble(path, base)
        keys = sorted(clean)
        last = keys[-1] if keys else base
        for ip, n in here.items():
            samples.pop(ip)
            if ip in clean:
                share['copied instructions'] += n
                continue
            text = ins.get(ip, '?')
            if ip > last:
                share['out of line'] += n
                glue['out of line: ' + text.split()[0]] += n
                continue
            k = bisect.bisect_right(keys, ip) - 1
            before = ins.get(keys[k], '?').split()[0] if k >= 0 else '?'
            share[f'glue after {before}'] += n
            glue[f'after {before}: {text}'] += n
    share['outside the caches'] = sum(samples.values())
    print(f'{total} samples of {comm}')
    for k, n in share.most_common():
        print(f'{n:8d} {100 * n / total:5.1f} %  {k}')
    print('busiest glue:')
    for k, n in glue.most_common(25):
        print(f'{n:8d} {100 * n / total:5.1f} %  {k}')


if __name__ == '__main__':
    main()
