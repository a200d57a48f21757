//! The call graph: callers and callees of each function, from direct call and tail-call edges.

use crate::cfg::{Cfg, EdgeKind, EdgeTarget, FuncId};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

/// Callers and callees of every function, as compressed adjacency lists (sorted, unique).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct CallGraph {
    callee_start: Vec<u32>,
    callees: Vec<FuncId>,
    caller_start: Vec<u32>,
    callers: Vec<FuncId>,
}

impl CallGraph {
    pub fn build(cfg: &Cfg) -> CallGraph {
        let n = cfg.functions.len();
        // Each function's callees (sorted, unique), in parallel: this walks every edge.
        let mine: Vec<Vec<FuncId>> = (0..n)
            .into_par_iter()
            .map(|i| {
                let mut mine: Vec<FuncId> = Vec::new();
                for b in cfg.blocks_of(FuncId(i as u32)) {
                    for e in cfg.edges_of(b) {
                        if let (EdgeKind::Call | EdgeKind::TailCall, EdgeTarget::Function(t)) =
                            (e.kind, e.target)
                        {
                            mine.push(t);
                        }
                    }
                }
                mine.sort_unstable();
                mine.dedup();
                mine
            })
            .collect();
        let pairs: Vec<(FuncId, FuncId)> = mine
            .iter()
            .enumerate()
            .flat_map(|(i, ts)| ts.iter().map(move |t| (FuncId(i as u32), *t)))
            .collect();
        let (callee_start, callees) = csr(n, pairs.iter().map(|(a, b)| (*a, *b)));
        let mut rev: Vec<(FuncId, FuncId)> = pairs.iter().map(|(a, b)| (*b, *a)).collect();
        rev.sort_unstable();
        let (caller_start, callers) = csr(n, rev.into_iter());
        CallGraph { callee_start, callees, caller_start, callers }
    }

    pub fn callees(&self, f: FuncId) -> &[FuncId] {
        let i = f.0 as usize;
        &self.callees[self.callee_start[i] as usize..self.callee_start[i + 1] as usize]
    }

    pub fn callers(&self, f: FuncId) -> &[FuncId] {
        let i = f.0 as usize;
        &self.callers[self.caller_start[i] as usize..self.caller_start[i + 1] as usize]
    }

    pub fn edge_count(&self) -> usize {
        self.callees.len()
    }

    /// Whether the lists fit `n` functions: every row a range of its list, every id below `n`
    /// (so that [`CallGraph::callers`] and [`CallGraph::callees`] cannot go out of bounds on
    /// a graph read back from the cache; which edges it has is not checked here).
    pub(crate) fn fits(&self, n: usize) -> bool {
        let rows = |start: &[u32], vals: &[FuncId]| {
            start.len() == n + 1
                && start.first() == Some(&0)
                && start.windows(2).all(|w| w[0] <= w[1])
                && start.last().is_some_and(|l| *l as usize == vals.len())
                && vals.iter().all(|v| (v.0 as usize) < n)
        };
        rows(&self.callee_start, &self.callees) && rows(&self.caller_start, &self.callers)
    }
}

/// Compressed rows from `(row, value)` pairs sorted by row.
fn csr(n: usize, pairs: impl Iterator<Item = (FuncId, FuncId)>) -> (Vec<u32>, Vec<FuncId>) {
    let mut start = vec![0u32; n + 1];
    let mut vals = Vec::new();
    let mut row = 0usize;
    for (a, b) in pairs {
        while row < a.0 as usize {
            row += 1;
            start[row] = vals.len() as u32;
        }
        vals.push(b);
    }
    while row < n {
        row += 1;
        start[row] = vals.len() as u32;
    }
    (start, vals)
}
