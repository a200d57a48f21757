//! System call sites: every `syscall` instruction of an image's functions, with the system
//! call number when the instructions before it in its block set eax to a constant. A process
//! with trap splices needs a guard on every site that may change a signal mask (see
//! `kerf_codegen::sigguard`); a site whose number is unknown (glibc's `syscall(2)`, a number
//! loaded from memory or set in another block) must be guarded too.

use crate::cfg::{Cfg, FuncId};
use crate::memory::CodeMemory;
use iced_x86::{Code, Mnemonic, OpKind, Register};
use kerf_arch::x86_64::{Flow, Gpr, Scanner};
use kerf_arch::ImageAddr;

/// One `syscall` instruction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SyscallSite {
    pub func: FuncId,
    pub addr: ImageAddr,
    /// The system call number, when eax is a known constant there.
    pub nr: Option<u32>,
}

/// Whether `code` holds the bytes of a `syscall` (`0f 05`) anywhere: code without them has
/// none, and is not decoded to look (a vectorised search: a byte-by-byte one over the text of
/// every module was most of the time finding a process's guards took).
pub fn holds_syscall_bytes(code: &[u8]) -> bool {
    memchr::memmem::find(code, &[0x0f, 0x05]).is_some()
}

/// Every `syscall` instruction in the blocks of `cfg`'s functions, in address order.
pub fn syscall_sites(cfg: &Cfg, mem: &dyn CodeMemory) -> Vec<SyscallSite> {
    let mut out = Vec::new();
    for b in &cfg.blocks {
        let Some((base, bytes)) = mem.code_region(b.start) else { continue };
        // A `syscall` is the bytes `0f 05` (after any prefixes): a block without them has
        // none, and most blocks are skipped without decoding (a whole-image decode was most
        // of the time an installation with trap splices took to find its guards).
        let lo = usize::try_from(b.start.0 - base.0).unwrap_or(usize::MAX);
        let own = bytes.get(lo..).map(|r| &r[..r.len().min(b.len as usize)]);
        if own.is_some_and(|r| !holds_syscall_bytes(r)) {
            continue;
        }
        let mut sc = Scanner::new(bytes, base);
        let end = b.start.0 + b.len as u64;
        let mut a = b.start.0;
        // eax as a constant, from the last instruction in this block that wrote rax.
        let mut eax: Option<u32> = None;
        while a < end {
            let Some(i) = sc.decode(ImageAddr(a)) else { break };
            if i.mnemonic() == Mnemonic::Syscall {
                out.push(SyscallSite { func: b.func, addr: ImageAddr(a), nr: eax });
                // The kernel returns its result in rax.
                eax = None;
            } else {
                let f = sc.facts(&i);
                if matches!(f.flow, Flow::Call(_) | Flow::IndirectCall) {
                    // A callee returns whatever it likes in rax.
                    eax = None;
                } else if f.clobbers.contains(Gpr::Rax) {
                    eax = constant_eax(&i);
                }
            }
            a = i.next_ip();
        }
    }
    out.sort_unstable_by_key(|s| s.addr);
    out
}

/// The value an instruction that writes rax leaves in eax, when it is a constant.
fn constant_eax(i: &iced_x86::Instruction) -> Option<u32> {
    let to_rax = i.op0_kind() == OpKind::Register
        && matches!(i.op0_register(), Register::EAX | Register::RAX);
    if !to_rax {
        return None;
    }
    match i.code() {
        Code::Mov_r32_imm32 => Some(i.immediate32()),
        Code::Mov_rm32_imm32 => Some(i.immediate32()),
        Code::Mov_rm64_imm32 | Code::Mov_r64_imm64 => u32::try_from(i.immediate64()).ok(),
        Code::Xor_r32_rm32 | Code::Xor_rm32_r32 | Code::Sub_r32_rm32 | Code::Sub_rm32_r32
            if i.op1_kind() == OpKind::Register && i.op1_register() == i.op0_register() =>
        {
            Some(0)
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use iced_x86::{Decoder, DecoderOptions};

    fn first(bytes: &[u8]) -> iced_x86::Instruction {
        Decoder::with_ip(64, bytes, 0x1000, DecoderOptions::NONE).decode()
    }

    #[test]
    fn constants_in_eax() {
        // mov eax, 0xe
        assert_eq!(constant_eax(&first(&[0xb8, 0x0e, 0, 0, 0])), Some(14));
        // mov rax, 0xd (c7 c0 imm32, sign-extended)
        assert_eq!(constant_eax(&first(&[0x48, 0xc7, 0xc0, 0x0d, 0, 0, 0])), Some(13));
        // xor eax, eax
        assert_eq!(constant_eax(&first(&[0x31, 0xc0])), Some(0));
        // mov eax, edi: unknown
        assert_eq!(constant_eax(&first(&[0x89, 0xf8])), None);
        // mov al, 1 writes only part of rax: unknown
        assert_eq!(constant_eax(&first(&[0xb0, 0x01])), None);
        // mov ecx, 14: not eax
        assert_eq!(constant_eax(&first(&[0xb9, 0x0e, 0, 0, 0])), None);
    }
}
