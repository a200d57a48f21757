# bench/jit/counter_placement.py RUN.json MODULE TOP [KERF]: how many counter executions block
# counting would need with counters placed off a spanning tree (Knuth 1973; Ball and Larus
# 1994) instead of one in every block, for the TOP functions of MODULE with the most block
# executions. RUN.json is `kerf jit ROOT --plugin blocks,branches --json -o RUN.json -- CMD`:
# its block counts and both sides of every conditional branch give each function's edge
# frequencies (a call's return site gets its block's count: longjmp and exceptions ignored);
# each function's flow graph is closed by a virtual node (entry, `ret`, indirect jumps and
# their targets); counters on the edges outside a maximum-weight spanning tree are the fewest
# executions from which every block count follows by flow conservation. That is a bound
# with the frequencies known in advance (a hint from an earlier run); not built in kerf.
# KERF (default target/release/kerf) gives each function's blocks (`kerf analyze --function`).
# LEAK=1: each block with a call also has an edge to the virtual node (the call may not
# return: longjmp, an exception, exit), which no counter can stand on: such edges are put
# in the tree first, and the rest of the edges placed around them (session 69: 0.16 -> 0.23).
import json, os, subprocess, sys, collections
LEAK = os.environ.get('LEAK')
v = json.load(open(sys.argv[1])); lib = sys.argv[2]; topn = int(sys.argv[3])
K = sys.argv[4] if len(sys.argv) > 4 else "target/release/kerf"
mine = lambda x: x['module'].endswith('/' + lib.split('/')[-1])
cnt = collections.defaultdict(dict); tot = collections.Counter()
for b in v['blocks']:
    if mine(b):
        f, off = b['point'].rsplit('+', 1); cnt[f][int(off, 16)] = b['count']; tot[f] += b['count']
brs = collections.defaultdict(list)
for b in v['branches']:
    if mine(b):
        f, off = b['point'].rsplit('+', 1); brs[f].append((int(off, 16), b['taken'], b['not_taken']))
allb = sum(b['count'] for b in v['blocks']); modb = sum(tot.values())
blk_sum = edge_sum = 0
for f, n in tot.most_common(topn):
    out = subprocess.run([K, 'analyze', lib, '--function', f, '--json'], capture_output=True, text=True).stdout
    try: fn = json.loads(out)['function'][0]
    except Exception: continue
    blocks = fn['blocks']; entry = int(blocks[0]['start'], 16)
    # (blocks[0] is the entry: offsets relative to it)
    E = []  # (u, v, w)
    inflow = collections.Counter()
    for b in blocks:
        s = int(b['start'], 16) - entry; c = cnt[f].get(s, 0); end = s + b['len']
        br = [x for x in brs[f] if s <= x[0] < end]
        outs = [e for e in b['edges'] if e['target'].startswith('+') and e['kind'] != 'call']
        rel = lambda e: int(e['target'][1:], 16)
        if b['terminator'] == 'condjump' and br and len(outs) == 2:
            _, tk, nt = br[0]
            for e in outs:
                w = tk if e['kind'] == 'branch' else nt
                E.append((s, rel(e), w)); inflow[rel(e)] += w
        elif len(outs) == 1:
            E.append((s, rel(outs[0]), c)); inflow[rel(outs[0])] += c
        else:
            E.append((s, 'V', c))
        b['_s'], b['_c'] = s, c
        if LEAK and any(e['kind'] == 'call' for e in b['edges']) and (s, 'V', -1) not in E:
            E.append((s, 'V', -1))  # weight -1: a leak edge, in the tree before any other
    for b in blocks:
        extra = b['_c'] - inflow[b['_s']]
        if extra > 0 or b['_s'] == 0: E.append(('V', b['_s'], max(extra, 0)))
    # maximum-weight spanning tree (Kruskal)
    parent = {}
    def find(x):
        while parent.get(x, x) != x: x = parent[x]
        return x
    non_tree = 0
    for u, w_, wt in sorted(E, key=lambda e: (e[2] != -1, -e[2])):
        a, b2 = find(u), find(w_)
        if a == b2: non_tree += max(wt, 0)  # (leak edges all meet at V: none closes a cycle)
        else: parent[a] = b2
    blk_sum += n; edge_sum += non_tree
    print(f"{f:40s} blocks {n:>12} edges-outside-tree {non_tree:>12} ({non_tree/max(n,1):.2f})")
print(f"top {topn} of {lib}: {blk_sum/modb*100:.0f}% of its block executions, {modb/allb*100:.0f}% of all")
print(f"block counters {blk_sum}, edge counters off a max spanning tree {edge_sum}: {edge_sum/blk_sum:.2f}")
