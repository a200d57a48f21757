//! What the data-driven patch tests share: code at `BASE` (the point is its first byte) in a
//! function that is all of it, with one block at the point, planned as a case asks.

use kerf_patch::{plan_jump2, plan_jump5, plan_trap, Displaced, FunctionView, Refusal};

pub const BASE: u64 = 0x40_1000;
pub const PATCH: u64 = 0x50_0000;

/// Plan a `kind` splice (`jump5`, `jump2` or `trap`) at `BASE` in `code`.
pub fn plan(code: &[u8], kind: &str) -> Result<Displaced, Refusal> {
    let starts = [BASE];
    let view = FunctionView {
        name: "f",
        extent: BASE..BASE + code.len() as u64,
        block_starts: &starts,
        has_unanalysable_jump: false,
    };
    match kind {
        "jump5" => plan_jump5(code, BASE, BASE, &view),
        "jump2" => plan_jump2(code, BASE, BASE, &view),
        "trap" => plan_trap(code, BASE, BASE),
        other => panic!("unknown splice kind {other}"),
    }
}
