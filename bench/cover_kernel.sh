#!/bin/bash
# bench/cover_kernel.sh [SAMPLES] [SCOPE...]: issue 13's kernel bench. In one boot of the stock
# Debian kernel (qemu TCG, 6 GiB), a system-call workload (stress-ng: open, dup, fstat and pipe
# stressors, one instance each, in runs of STEP=2 seconds) runs SAMPLES times (default 20)
# alone, then under `kerf cover --kernel` of every block of SCOPE (default: core text,
# `vmlinux`), then alone again. Prints each run's bogo ops over the mean of the runs alone,
# kerf's time to go live, its memory, its live table (blocks covered, probes still in), and
# the entry blocks of 300 functions spread over core text checked against kprobes on them.
# Under TCG only ratios within the one boot mean anything. Needs stress-ng on the host (its
# binary and libraries are copied into the guest); installs it with apt-get if missing.
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-20}
shift || true
SCOPE=${*:-vmlinux}
say() { echo "bench: $*" >&2; }
command -v stress-ng >/dev/null || { say "installing stress-ng"; DEBIAN_FRONTEND=noninteractive apt-get install -y -q stress-ng >/dev/null; }
cargo build --release -p kerf >/dev/null 2>&1 || { say "cargo build failed"; exit 1; }
OUT=$(driver/build | tail -1)
W=$(mktemp -d /tmp/kerf-cover-kernel.XXXXXX)
trap 'rm -rf "$W"' EXIT
say "booting the guest (analysis of the kernel and going live take minutes under TCG)"
vm/run --timeout 5400 --memory 6G \
  --file target/release/kerf:/kerf/kerf --file "$OUT/kerf.ko:/kerf/kerf.ko" \
  --file "$(command -v stress-ng):/kerf/stress-ng" \
  --file bench/cover/kernel_guest.sh:/kerf/bench.sh \
  --file tests/fixtures/kprobe_sample.sh:/kerf/kprobe_sample.sh \
  -- "N=$N SCOPE='$SCOPE' sh /kerf/bench.sh" > "$W/out" 2> "$W/err" || true
grep -q '^DONE' "$W/out" || { cat "$W/out"; tail -20 "$W/err"; say "guest run failed"; exit 1; }
echo "# bench/cover_kernel.sh $N $SCOPE, $(date -u '+%F %H:%M') UTC, host $(nproc) CPUs, guest: Debian's stock kernel under qemu TCG, 2 vCPUs, 6 GiB"
grep '^RESULT' "$W/out" | sed 's/^RESULT /# /'
grep -E '^(DISAGREE|KERNEL) ' "$W/out" | head -30 | sed 's/^/# /' || true
python3 - "$W/out" <<'PY'
import re, statistics, sys
runs = {}
for m in re.finditer(r"^SAMPLE (\S+) (\d+) (\d+)$", open(sys.argv[1]).read(), re.M):
    runs.setdefault(m.group(1), []).append(int(m.group(3)))
alone = runs.get("alone0", []) + runs.get("alone1", [])
ref = statistics.mean(alone)
print(f"# alone: mean {ref:.0f} bogo ops a run (before {statistics.mean(runs['alone0']):.0f}, "
      f"after {statistics.mean(runs['alone1']):.0f}); each run below over that mean")
for name in ("alone0", "cover", "alone1"):
    print(f"{name:7} " + " ".join(f"{v / ref:.2f}" for v in runs.get(name, [])))
cov = runs.get("cover", [])
if cov:
    k = next((i for i in range(len(cov)) if all(v / ref >= 0.98 for v in cov[i:])), None)
    print(f"# under kerf cover: first run {cov[0] / ref:.2f}, last five {statistics.mean(cov[-5:]) / ref:.2f}; "
          + (f"at 0.98 or above from run {k + 1} on" if k is not None else "never at 0.98 or above for good"))
PY
echo "# kerf's live table: [seconds since live, blocks covered, probes still in]"
grep '^LIVE' "$W/out" | sed 's/^LIVE /  /' || echo "  (none)"
