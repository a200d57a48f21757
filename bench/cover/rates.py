"""bench/cover/rates.py: rounds per second from bench/cover/load.c's output ("MILLISECONDS
ROUNDS" lines, every 100 ms from the program's start), for bench/cover.sh and
bench/cover_paired.sh."""


def per_second(path, secs):
    """Rounds finished in each whole second of the program's own time, up to `secs`."""
    pts = [tuple(map(float, line.split())) for line in open(path) if line.strip()]
    out, last = [], 0.0
    for s in range(1, secs + 1):
        upto = [n for ms, n in pts if ms <= s * 1000]
        if not upto:
            break
        out.append(upto[-1] - last)
        last = upto[-1]
    return out
