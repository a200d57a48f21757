#!/usr/bin/env python3
"""Attach time of `kerf jit -p` with a 50 MB library in the region (issue 14's last goal).

bench/jit_attach_time.py [ROUNDS] [--old PATH] [--whole-runs]

Debian's llc-14 compiles a generated LLVM module of 10,000 functions (about 8 s natively);
1.5 s into the run kerf attaches with root libLLVM-14's
`SelectionDAGISel::runOnMachineFunction` (`--plugin none`, 0.2 s live), and the time from
kerf's exec to its "live" line on stderr is taken. With --old, another kerf binary (an
earlier commit's build) alternates with this one, round by round. With --whole-runs, kerf
stays attached until llc ends instead, and the whole run's time and the output's identity
with a native run's are reported (a native run alternates too). Warm analysis cache (one
attach first, per binary). Installs llvm-14 (apt) if llc-14 is missing.
"""
import json, os, random, shutil, statistics, subprocess, sys, tempfile, time

ROOT = "libLLVM-14.so.1:_ZN4llvm16SelectionDAGISel20runOnMachineFunctionERNS_15MachineFunctionE"


def module(path, n=10000, ops=30):
    rnd = random.Random(1)
    out = ['target triple = "x86_64-pc-linux-gnu"']
    for i in range(n):
        out.append(f"define i64 @f{i}(i64 %a) {{\nentry:")
        prev = "%a"
        for k in range(ops):
            op = rnd.choice(["add", "sub", "mul", "xor"])
            out.append(f"  %t{k} = {op} i64 {prev}, {rnd.randint(1, 999)}")
            prev = f"%t{k}"
        out.append(f"  %c = icmp sgt i64 {prev}, 100\n  br i1 %c, label %x, label %y\nx:")
        out.append(f"  %r = call i64 @f{i // 2}(i64 {prev})\n  ret i64 %r\ny:\n  ret i64 {prev}\n}}")
    open(path, "w").write("\n".join(out) + "\n")


def main():
    args = sys.argv[1:]
    rounds = int(args[0]) if args and args[0].isdigit() else 5
    old = args[args.index("--old") + 1] if "--old" in args else None
    whole = "--whole-runs" in args
    if not shutil.which("llc-14"):
        subprocess.run(["apt-get", "install", "-y", "-q", "llvm-14"], check=True)
    here = os.path.dirname(os.path.abspath(__file__))
    subprocess.run(["cargo", "build", "--release", "-p", "kerf"], cwd=os.path.join(here, ".."),
                   check=True, capture_output=True)
    kerf = os.path.join(here, "..", "target", "release", "kerf")
    w = tempfile.mkdtemp(prefix="kerf-attach-")
    env = dict(os.environ, KERF_CACHE_DIR=os.path.join(w, "cache"))
    ll = os.path.join(w, "m.ll")
    module(ll)
    ref = os.path.join(w, "ref.s")
    subprocess.run(["llc-14", "-O2", ll, "-o", ref], check=True)
    bins = [("after", kerf)] + ([("before", old)] if old else [])
    print(f"# bench/jit_attach_time.py {' '.join(args)}, {time.strftime('%F %H:%M', time.gmtime())} UTC, "
          f"{os.cpu_count()} CPUs")

    def attach(path, until_end):
        out = os.path.join(w, "out.s")
        t0 = time.monotonic()
        llc = subprocess.Popen(["llc-14", "-O2", ll, "-o", out])
        if path is None:
            llc.wait()
            return time.monotonic() - t0, None, open(out).read() == open(ref).read()
        time.sleep(1.5)
        cmd = [path, "jit", "-p", str(llc.pid), ROOT, "--plugin", "none", "--json", "-o",
               os.path.join(w, "summary.json")] + ([] if until_end else ["--duration", "0.2"])
        t1 = time.monotonic()
        k = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True, env=env)
        live = None
        for line in k.stderr:
            if live is None and "translated in" in line and "live" in line:
                live = time.monotonic() - t1
        k.wait()
        if not until_end:
            llc.kill()
        llc.wait()
        j = json.load(open(os.path.join(w, "summary.json")))["jit"]
        same = until_end and open(out).read() == open(ref).read()
        return time.monotonic() - t0, (live, j["escapes"], j.get("table_lost")), same

    for _, path in bins:
        attach(path, False)  # the analysis cache, filled
    times = {}
    runs = bins + ([("native", None)] if whole else [])
    for r in range(rounds):
        for name, path in runs:
            total, stats, same = attach(path, whole)
            key = total if whole else stats[0]
            times.setdefault(name, []).append(key)
            extra = "" if stats is None else f", escapes {stats[1]}, lost {stats[2]}"
            if whole and stats is not None:
                extra = f", live after {stats[0]:.2f} s" + extra
            print(f"{name} round {r + 1}: {'whole run' if whole else 'attach'} {key:.2f} s{extra}"
                  + (f", output {'identical' if same else 'DIFFERENT'}" if whole else ""), flush=True)
    for name, v in times.items():
        what = "whole run" if whole else "kerf start to live"
        print(f"{name}: {what} median {statistics.median(v):.2f} s, min {min(v):.2f}, max {max(v):.2f}")
    shutil.rmtree(w)


if __name__ == "__main__":
    main()
