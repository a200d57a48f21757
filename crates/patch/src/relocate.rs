//! Code patch layout: the snippet, then the displaced instructions relocated to the patch's
//! address (RIP-relative operands and relative branches re-encoded, short branches and
//! `jrcxz`/`loop` widened or rewritten by iced's block encoder), then the jump back.

use crate::plan::Displaced;
use iced_x86::{BlockEncoder, BlockEncoderOptions, Code, Instruction, InstructionBlock};
use kerf_arch::x86_64::{flow, Flow};
use kerf_codegen::templates;
use std::fmt;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PatchError {
    /// The encoder could not place an instruction at the patch address (typically a
    /// RIP-relative operand more than 2 GiB away).
    Encode { patch: u64, detail: String },
}

impl fmt::Display for PatchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PatchError::Encode { patch, detail } => {
                write!(f, "cannot encode code patch at {patch:#x}: {detail}")
            }
        }
    }
}

/// How the snippet and the displaced instructions make up a code patch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    /// The snippet runs, then every displaced instruction.
    Before,
    /// The snippet stands in for the first displaced instruction (it does that
    /// instruction's work itself, as the signal-mask guard runs the `syscall` it replaces),
    /// then the other displaced instructions run.
    ReplacesFirst,
}

/// The instructions of a code patch, before encoding. How control leaves each displaced
/// instruction is arch's [`flow`] (planning refused what cannot move): only a near call is
/// emulated, and only a jump or a return ends the patch without a jump back.
pub fn patch_instructions(
    snippet: &[Instruction],
    d: &Displaced,
    layout: Layout,
) -> Vec<Instruction> {
    let mut v: Vec<Instruction> = snippet.to_vec();
    let last = d.insns.len().saturating_sub(1);
    let mut falls_through = true;
    let skip = usize::from(layout == Layout::ReplacesFirst);
    for (k, i) in d.insns.iter().enumerate().skip(skip) {
        match flow(i) {
            Flow::Call(target) if k == last => {
                // Return to the original code after the call, not into this patch.
                v.extend(templates::emulated_call_prefix(i.next_ip()));
                v.push(templates::jmp(target.0));
                falls_through = false;
            }
            Flow::IndirectCall if k == last => {
                v.extend(templates::emulated_call_prefix(i.next_ip()));
                // The same operand as a jump: `call rax` -> `jmp rax`, `call [m]` -> `jmp [m]`.
                let mut j = *i;
                j.set_code(Code::Jmp_rm64);
                v.push(j);
                falls_through = false;
            }
            Flow::Jump(_) | Flow::IndirectJump | Flow::Return => {
                v.push(*i);
                falls_through = false;
            }
            _ => v.push(*i),
        }
    }
    if falls_through {
        v.push(templates::jmp(d.resume()));
    }
    v
}

/// Encode the code patch for `snippet` and the displaced instructions `d` at address `patch`.
pub fn build_patch(
    patch: u64,
    snippet: &[Instruction],
    d: &Displaced,
) -> Result<Vec<u8>, PatchError> {
    build_patch_with(patch, snippet, d, Layout::Before)
}

/// [`build_patch`] with the snippet placed as `layout` says.
pub fn build_patch_with(
    patch: u64,
    snippet: &[Instruction],
    d: &Displaced,
    layout: Layout,
) -> Result<Vec<u8>, PatchError> {
    let mut insns = patch_instructions(snippet, d, layout);
    // The block encoder links a branch to an instruction of the same block by address. The
    // snippet's own branches name their targets by label id (small numbers, kept); every
    // other instruction gets address 0, which no branch names, so that a displaced branch
    // back to the point leaves the patch (and re-runs the splice) instead of skipping the
    // snippet.
    for i in insns.iter_mut().skip(snippet.len()) {
        i.set_ip(0);
    }
    // Label ids are small; no mapping (so no displaced branch target) is below 64 KiB.
    debug_assert!(d
        .insns
        .iter()
        .all(|i| i.near_branch_target() >= 0x1_0000 || i.near_branch_target() == 0));
    let block = InstructionBlock::new(&insns, patch);
    BlockEncoder::encode(64, block, BlockEncoderOptions::NONE)
        .map(|r| r.code_buffer)
        .map_err(|e| PatchError::Encode { patch, detail: e.to_string() })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{plan_jump5, FunctionView};
    use iced_x86::{Decoder, DecoderOptions, Formatter, IntelFormatter};

    const BASE: u64 = 0x40_1000;
    const PATCH: u64 = 0x50_0000;

    fn disasm(bytes: &[u8], ip: u64) -> Vec<String> {
        let mut d = Decoder::with_ip(64, bytes, ip, DecoderOptions::NONE);
        let mut f = IntelFormatter::new();
        let mut out = Vec::new();
        while d.can_decode() {
            let i = d.decode();
            let mut s = String::new();
            f.format(&i, &mut s);
            out.push(s);
        }
        out
    }

    fn plan(code: &[u8]) -> Displaced {
        let starts = [BASE];
        let v = FunctionView {
            name: "f",
            extent: BASE..BASE + code.len() as u64,
            block_starts: &starts,
            has_unanalysable_jump: false,
        };
        plan_jump5(code, BASE, BASE, &v).unwrap()
    }

    #[test]
    fn rip_relative_and_jump_back_are_relocated() {
        // mov rax, [rip+0x100]; ret
        let code = [0x48, 0x8b, 0x05, 0x00, 0x01, 0x00, 0x00, 0xc3];
        let d = plan(&code);
        let snippet = vec![kerf_codegen::templates::atomic_inc(0x50_8000)];
        let b = build_patch(PATCH, &snippet, &d).unwrap();
        assert_eq!(
            disasm(&b, PATCH),
            [
                "lock inc qword ptr [508000h]",
                // The original operand pointed at BASE+7+0x100.
                "mov rax,[401107h]",
                "jmp 0000000000401007h",
            ]
        );
    }

    #[test]
    fn short_conditional_branch_is_widened() {
        // test edi,edi; je +0x10; ...
        let code = [0x85, 0xff, 0x74, 0x10, 0x90, 0x90, 0xc3];
        let d = plan(&code);
        let b = build_patch(PATCH, &[], &d).unwrap();
        let text = disasm(&b, PATCH);
        assert_eq!(text[0], "test edi,edi");
        assert_eq!(text[1], "je 0000000000401014h");
        assert_eq!(text[2], "nop");
        assert_eq!(text[3], "jmp 0000000000401005h");
        // je rel8 became je rel32: 2 + 6 + 1 + 5 bytes.
        assert_eq!(b.len(), 14);
    }

    #[test]
    fn jrcxz_is_rewritten_to_reach() {
        // jrcxz +0x20; nop; nop; nop
        let code = [0xe3, 0x20, 0x90, 0x90, 0x90, 0xc3];
        let d = plan(&code);
        let b = build_patch(PATCH, &[], &d).unwrap();
        let text = disasm(&b, PATCH);
        assert!(text[0].starts_with("jrcxz"), "{text:?}");
        assert!(text.iter().any(|l| l.contains("401022h")), "{text:?}");
        assert!(text.last().unwrap().contains("401005h"), "{text:?}");
    }

    #[test]
    fn last_call_is_emulated_to_return_to_original_code() {
        // nop; call +0x100
        let code = [0x90, 0xe8, 0x00, 0x01, 0x00, 0x00, 0xc3];
        let d = plan(&code);
        let b = build_patch(PATCH, &[], &d).unwrap();
        assert_eq!(
            disasm(&b, PATCH),
            [
                "nop",
                "lea rsp,[rsp-8]",
                "mov dword ptr [rsp],401006h",
                "mov dword ptr [rsp+4],0",
                "jmp 0000000000401106h",
            ]
        );
    }

    #[test]
    fn branch_back_to_the_point_leaves_the_patch() {
        // loop: dec ecx (2 bytes); jne loop (2 bytes); nop -> the jne targets the point.
        let code = [0xff, 0xc9, 0x75, 0xfc, 0x90, 0xc3];
        let d = plan(&code);
        let b = build_patch(PATCH, &[], &d).unwrap();
        let text = disasm(&b, PATCH);
        assert_eq!(text[1], "jne 0000000000401000h", "{text:?}");
    }

    #[test]
    fn far_rip_relative_target_is_an_error() {
        // Code high in the address space, where no absolute 32-bit address can stand in.
        let high = 0x7f00_0000_1000u64;
        let code = [0x48, 0x8b, 0x05, 0x00, 0x01, 0x00, 0x00, 0xc3];
        let starts = [high];
        let v = FunctionView {
            name: "f",
            extent: high..high + 8,
            block_starts: &starts,
            has_unanalysable_jump: false,
        };
        let d = plan_jump5(&code, high, high, &v).unwrap();
        assert!(build_patch(high + (1 << 30), &[], &d).is_ok());
        assert!(build_patch(high + (3 << 30), &[], &d).is_err());
    }
}
