//! Laying out a translation's instructions at their cache address: each branch target and
//! RIP-relative operand that names an instruction's `ip` (a label) is linked to where that
//! instruction lands, every other one kept as the absolute address it names, and each
//! branch takes the shortest form that reaches.
//!
//! iced's `BlockEncoder` did this before: it encoded every instruction two or three times
//! (its size, then each pass) and boxed each one, which was two fifths of translating
//! sqlite3's libraries. Here an instruction whose bytes do not depend on where it lands is
//! encoded once; a RIP-relative one is encoded once and its 32-bit displacement rewritten
//! where it lands; the branches a translation is made of (`jmp`, `jcc`, `call`, `jrcxz`,
//! `loop`) are written from their opcodes. Anything else with a position-dependent encoding
//! (a branch with prefixes, `xbegin`, a target beyond a rel32) goes to iced's encoder, whose
//! result is equivalent (`tests/translate.rs` compares the two on whole modules).
//!
//! One pseudo-instruction: [`store_label`], `mov qword [rsp], imm32` whose immediate is the
//! address a label lands at (which iced's instructions cannot say: an immediate holds a
//! value, not a label), for a cache below 2 GiB.

use iced_x86::{
    BlockEncoder, BlockEncoderOptions, Code, ConditionCode, Encoder, Instruction, InstructionBlock,
    OpKind, Register,
};
use std::sync::atomic::{AtomicUsize, Ordering};

/// A translation laid out: its bytes, and per instruction its offset in them.
#[derive(Debug)]
pub struct Laid {
    pub code: Vec<u8>,
    pub offsets: Vec<u32>,
}

/// Why a sequence cannot be laid out (iced's words where its encoder refused).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EncodeError {
    /// Two instructions carry the same label: a branch to it would be ambiguous.
    SameLabel(u64),
    /// A [`store_label`] of a label that lands at or above 2 GiB (at this address), or of
    /// no label of the sequence.
    FarLabel(u64),
    /// iced's encoder refused an instruction.
    Iced(String),
}

impl std::fmt::Display for EncodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            EncodeError::SameLabel(ip) => write!(f, "two instructions are labelled {ip:#x}"),
            EncodeError::FarLabel(a) => {
                write!(f, "a label's address as a 32-bit immediate, but it is {a:#x}")
            }
            EncodeError::Iced(s) => f.write_str(s),
        }
    }
}

/// `mov qword [rsp], imm32` of the address where the instruction labelled `label` lands:
/// written into the return slot, where the sequence lies below 2 GiB (a `ret` then leaves
/// for that label with one store, where a `lea` of it into a register and a store of the
/// register took two, and the store waited for the `lea`). Until laid out it is held as a
/// store to `[rsp*1 + label]`, a memory operand no decoded instruction has (`rsp` cannot be
/// an index), which [`lay_out_from`] and [`lay_out_iced`] turn into the real one.
pub fn store_label(label: u64) -> Instruction {
    let m = iced_x86::MemoryOperand::new(
        Register::None,
        Register::RSP,
        1,
        label as i64,
        8,
        false,
        Register::None,
    );
    Instruction::with2(Code::Mov_rm64_imm32, m, 0).expect("a store of an immediate")
}

/// The label of a [`store_label`], and the real store it stands for (its immediate 0 until
/// laid out).
fn label_store(i: &Instruction) -> Option<(u64, Instruction)> {
    let marked = i.code() == Code::Mov_rm64_imm32
        && i.memory_index() == Register::RSP
        && i.memory_base() == Register::None;
    marked.then(|| {
        // (No displacement byte: `48 c7 04 24` and the immediate, eight bytes.)
        let at = iced_x86::MemoryOperand::new(
            Register::RSP,
            Register::None,
            1,
            0,
            0,
            false,
            Register::None,
        );
        let store = Instruction::with2(Code::Mov_rm64_imm32, at, 0).expect("a store");
        (i.memory_displacement64(), store)
    })
}

/// A label's address as the immediate of a [`store_label`]: below 2 GiB (the immediate is
/// sign-extended).
fn label_imm(to: u64) -> Result<[u8; 4], EncodeError> {
    i32::try_from(to)
        .ok()
        .filter(|v| *v >= 0)
        .map(i32::to_le_bytes)
        .ok_or(EncodeError::FarLabel(to))
}

/// Where a branch or RIP-relative operand goes: an instruction of the sequence (by index),
/// or an address outside it (by its index in a list beside the items: kept out of each item,
/// an item is 20 bytes rather than 32, for each of the 610 k instructions of python3.11's
/// translation ahead, in memory whose first touch is most of what it costs).
#[derive(Clone, Copy, Debug)]
enum Target {
    Insn(u32),
    Abs(u32),
}

/// The branches written from their opcodes.
#[derive(Clone, Copy, Debug)]
enum Op {
    Jmp,
    /// The condition's number (`jcc rel8` is `0x70 + cc`).
    Jcc(u8),
    Call,
    /// `loopne`, `loope`, `loop`, `jrcxz` (opcodes 0xE0-0xE3): rel8 only, so a far target
    /// takes `op +2; jmp +5; jmp rel32`.
    Rcx(u8),
}

impl Op {
    /// Bytes of the short form and of the near one.
    fn sizes(self) -> (u32, u32) {
        match self {
            Op::Jmp => (2, 5),
            Op::Jcc(_) => (2, 6),
            Op::Call => (5, 5),
            Op::Rcx(_) => (2, 9),
        }
    }
}

#[derive(Clone, Copy, Debug)]
enum Kind {
    /// Bytes that do not depend on where they land: `pre[from..from + len]`.
    Plain,
    /// Encoded once at a provisional address: its rel32 at `disp` is rewritten.
    RipRel {
        disp: u8,
        target: Target,
    },
    Branch {
        op: Op,
        target: Target,
        short: bool,
    },
    /// A [`store_label`], encoded once: its last four bytes become the address of
    /// instruction `target`.
    LabelImm {
        target: u32,
    },
}

#[derive(Clone, Copy, Debug)]
struct Item {
    kind: Kind,
    from: u32,
    len: u32,
}
const _: () = assert!(std::mem::size_of::<Item>() <= 20);

/// What only iced's encoder handles.
struct Unhandled;

/// Sequences this process laid out with iced's encoder because kerf's could not (see
/// [`iced_fallbacks`]).
static FALLBACKS: AtomicUsize = AtomicUsize::new(0);

/// How many sequences [`lay_out`] has left to iced's encoder in this process: none of a real
/// module's translations should need it (the tests check).
pub fn iced_fallbacks() -> usize {
    FALLBACKS.load(Ordering::Relaxed)
}

/// Lay out `insns` at `at`, linking labels (see the module comment).
pub fn lay_out(insns: &[Instruction], at: u64) -> Result<Laid, EncodeError> {
    lay_out_from(insns, at, &|_| None)
}

/// [`lay_out`], where `original(k)` gives the bytes instruction `k` was decoded from when it
/// is an unchanged copy: one that names no address relative to itself takes those bytes as
/// they are instead of being encoded again (most of a translation's instructions; encoding
/// them was an eighth of translating python3.11's).
pub fn lay_out_from<'a>(
    insns: &[Instruction],
    at: u64,
    original: &dyn Fn(usize) -> Option<&'a [u8]>,
) -> Result<Laid, EncodeError> {
    match lay_out_own(insns, at, original)? {
        Ok(l) => Ok(l),
        Err(Unhandled) => {
            FALLBACKS.fetch_add(1, Ordering::Relaxed);
            lay_out_iced(insns, at)
        }
    }
}

/// The same with iced's `BlockEncoder` (for comparison, and for what kerf's own encoder
/// leaves to it). A [`store_label`] goes in as the real store with immediate 0, and its
/// immediate is written once the label's place is known.
pub fn lay_out_iced(insns: &[Instruction], at: u64) -> Result<Laid, EncodeError> {
    let stores: Vec<(usize, u64)> = (insns.iter().enumerate())
        .filter_map(|(k, i)| label_store(i).map(|(label, _)| (k, label)))
        .collect();
    let real: Option<Vec<Instruction>> = (!stores.is_empty()).then(|| {
        let real = |i: &Instruction| {
            let (_, mut store) = label_store(i)?;
            store.set_ip(i.ip());
            Some(store)
        };
        insns.iter().map(|i| real(i).unwrap_or(*i)).collect()
    });
    let block = InstructionBlock::new(real.as_deref().unwrap_or(insns), at);
    let r = BlockEncoder::encode(64, block, BlockEncoderOptions::RETURN_NEW_INSTRUCTION_OFFSETS)
        .map_err(|e| EncodeError::Iced(e.to_string()))?;
    let (mut code, offsets) = (r.code_buffer, r.new_instruction_offsets);
    if !stores.is_empty() {
        let labels: std::collections::HashMap<u64, usize> = (insns.iter().enumerate())
            .filter(|(_, i)| i.ip() != 0)
            .map(|(k, i)| (i.ip(), k))
            .collect();
        for (k, label) in stores {
            let j = *labels.get(&label).ok_or(EncodeError::FarLabel(label))?;
            let imm = label_imm(at + offsets[j] as u64)?;
            // (The immediate is the last four of the store's eight bytes.)
            let end = offsets[k] as usize + 8;
            code[end - 4..end].copy_from_slice(&imm);
        }
    }
    Ok(Laid { code, offsets })
}

/// A branch written from its opcode: the iced codes of 64-bit near branches with a relative
/// target and no prefix (a decoded one with a prefix is longer than its form).
fn branch_op(i: &Instruction) -> Option<Op> {
    if i.op0_kind() != OpKind::NearBranch64 {
        return None;
    }
    let code = i.code();
    let (op, form) = match code {
        Code::Jmp_rel8_64 => (Op::Jmp, 2),
        Code::Jmp_rel32_64 => (Op::Jmp, 5),
        Code::Call_rel32_64 => (Op::Call, 5),
        Code::Loopne_rel8_64_RCX => (Op::Rcx(0xe0), 2),
        Code::Loope_rel8_64_RCX => (Op::Rcx(0xe1), 2),
        Code::Loop_rel8_64_RCX => (Op::Rcx(0xe2), 2),
        Code::Jrcxz_rel8_64 => (Op::Rcx(0xe3), 2),
        _ if code.is_jcc_short_or_near() => {
            let cc = i.condition_code();
            if cc == ConditionCode::None {
                return None;
            }
            let near = code.as_near_branch() == code;
            (Op::Jcc(cc as u8 - 1), if near { 6 } else { 2 })
        }
        _ => return None,
    };
    let prefixed = i.has_rep_prefix()
        || i.has_repne_prefix()
        || i.has_lock_prefix()
        || i.segment_prefix() != Register::None
        || (i.len() != 0 && i.len() != form);
    (!prefixed).then_some(op)
}

/// `Err(Unhandled)` inside: only iced's encoder can lay these out.
fn lay_out_own<'a>(
    insns: &[Instruction],
    at: u64,
    original: &dyn Fn(usize) -> Option<&'a [u8]>,
) -> Result<Result<Laid, Unhandled>, EncodeError> {
    // 1. The labels: every instruction with a nonzero `ip`.
    // (Counted first: grown a doubling at a time, the list left its old copies in memory
    // touched for nothing.)
    let mut labels: Vec<(u64, u32)> =
        Vec::with_capacity(insns.iter().filter(|i| i.ip() != 0).count());
    labels.extend(
        (insns.iter().enumerate()).filter(|(_, i)| i.ip() != 0).map(|(k, i)| (i.ip(), k as u32)),
    );
    labels.sort_unstable_by_key(|l| l.0);
    if let Some(w) = labels.windows(2).find(|w| w[0].0 == w[1].0) {
        return Err(EncodeError::SameLabel(w[0].0));
    }
    // Label ids, which the translator counts up from one base in the non-canonical hole,
    // index a vector; other addresses (block starts) are searched. With a million labels in
    // a module the search alone was a quarter of laying it out.
    let ids = labels.partition_point(|l| l.0 < 1 << 63);
    let dense: Vec<u32> = match (labels.get(ids), labels.last()) {
        (Some(&(lo, _)), Some(&(hi, _))) if hi - lo < 2 * (labels.len() - ids) as u64 + 64 => {
            let mut v = vec![u32::MAX; (hi - lo + 1) as usize];
            for &(ip, k) in &labels[ids..] {
                v[(ip - lo) as usize] = k;
            }
            v
        }
        _ => Vec::new(),
    };
    let base = labels.get(ids).map_or(0, |l| l.0);
    // The addresses outside the sequence that items name (see `Target`).
    let mut abs: Vec<u64> = Vec::new();
    let mut target = |a: u64| {
        let at = a.wrapping_sub(base) as usize;
        let outside = |abs: &mut Vec<u64>| {
            abs.push(a);
            Target::Abs(abs.len() as u32 - 1)
        };
        match dense.get(at) {
            Some(&k) if a >= base && k != u32::MAX => Target::Insn(k),
            Some(_) if a >= base => outside(&mut abs),
            _ => match labels.binary_search_by_key(&a, |l| l.0) {
                Ok(k) if a != 0 => Target::Insn(labels[k].1),
                _ => outside(&mut abs),
            },
        }
    };

    // 2. Each instruction once: plain ones for good, RIP-relative ones at `at` (a rel32
    //    reaches from anywhere in the cache if it reaches from its start), branches sized
    //    near first.
    let mut enc = Encoder::try_with_capacity(64, insns.len() * 5)
        .map_err(|e| EncodeError::Iced(e.to_string()))?;
    let mut items = Vec::with_capacity(insns.len());
    let mut from = 0u32;
    for (k, i) in insns.iter().enumerate() {
        if let Some(op) = branch_op(i) {
            let kind = Kind::Branch { op, target: target(i.near_branch_target()), short: false };
            items.push(Item { kind, from, len: op.sizes().1 });
        } else if let Some((label, store)) = label_store(i) {
            let len = enc.encode(&store, 0).map_err(|e| EncodeError::Iced(e.to_string()))?;
            let t = match target(label) {
                Target::Insn(j) => j,
                Target::Abs(_) => return Err(EncodeError::FarLabel(label)),
            };
            items.push(Item { kind: Kind::LabelImm { target: t }, from, len: len as u32 });
            from += len as u32;
        } else if i.is_ip_rel_memory_operand() {
            if i.memory_base() != Register::RIP {
                return Ok(Err(Unhandled));
            }
            let t = target(i.ip_rel_memory_address());
            let mut c = *i;
            c.set_memory_displacement64(at);
            let Ok(len) = enc.encode(&c, at) else { return Ok(Err(Unhandled)) };
            let offs = enc.get_constant_offsets();
            if offs.displacement_size() != 4 {
                return Ok(Err(Unhandled));
            }
            items.push(Item {
                kind: Kind::RipRel { disp: offs.displacement_offset() as u8, target: t },
                from,
                len: len as u32,
            });
            from += len as u32;
            continue;
        } else if matches!(i.op0_kind(), OpKind::NearBranch64 | OpKind::NearBranch32)
            || i.code() == Code::Xbegin_rel32
        {
            return Ok(Err(Unhandled));
        } else {
            // (Not position-dependent: no operand names an address relative to it.)
            let len = match original(k).filter(|b| b.len() == i.len()) {
                Some(b) => {
                    let mut buf = enc.take_buffer();
                    buf.extend_from_slice(b);
                    enc.set_buffer(buf);
                    b.len()
                }
                None => enc.encode(i, 0).map_err(|e| EncodeError::Iced(format!("{e}: {i:?}")))?,
            };
            items.push(Item { kind: Kind::Plain, from, len: len as u32 });
            from += len as u32;
        }
    }
    let pre = enc.take_buffer();

    // 3. Branches shrink to their short form where it reaches, until none does: sizes only
    //    shrink, so no distance grows and a branch once short stays in reach. Each pass
    //    looks only at the branches still long that have a short form, and drops those that
    //    cannot reach however much the still-long branches between their ends shrink
    //    (`slack`: what those branches could give up, counted over the items before each):
    //    after the first pass most that stay long are far, and six passes over them were
    //    most of laying out a module.
    let mut offsets = vec![0u32; insns.len()];
    let mut slack = vec![0u32; insns.len() + 1];
    let mut long: Vec<u32> = (items.iter().enumerate())
        .filter(|(_, it)| matches!(it.kind, Kind::Branch { op, .. } if op.sizes().0 < it.len))
        .map(|(k, _)| k as u32)
        .collect();
    let mut listed = vec![false; insns.len()];
    for &k in &long {
        listed[k as usize] = true;
    }
    loop {
        let (mut o, mut give) = (0u32, 0u32);
        for (k, it) in items.iter().enumerate() {
            offsets[k] = o;
            slack[k] = give;
            o += it.len;
            if listed[k] {
                let Kind::Branch { op, .. } = it.kind else { unreachable!("a listed branch") };
                give += it.len - op.sizes().0;
            }
        }
        slack[items.len()] = give;
        let mut shrunk = false;
        long.retain(|&k| {
            let k = k as usize;
            let it = &mut items[k];
            let Kind::Branch { op, target: t, ref mut short } = it.kind else {
                unreachable!("only branches are listed")
            };
            let (s, _) = op.sizes();
            let to = match t {
                Target::Insn(j) => at + offsets[j as usize] as u64,
                Target::Abs(a) => abs[a as usize],
            };
            let from_end = at + offsets[k] as u64 + s as u64;
            let d = to.wrapping_sub(from_end) as i64;
            if i8::try_from(d).is_ok() {
                *short = true;
                it.len = s;
                shrunk = true;
                listed[k] = false;
                return false;
            }
            // What the still-long branches strictly between its end and its target may give
            // up (an absolute target: not bounded here, it stays listed).
            let Target::Insn(j) = t else { return true };
            let j = j as usize;
            let between = match j > k {
                true => slack[j] - slack[k + 1],
                false => slack[k] - slack[j],
            } as i64;
            let never =
                if d > 0 { d - between > i8::MAX as i64 } else { d + between < i8::MIN as i64 };
            if never {
                listed[k] = false;
            }
            !never
        });
        if !shrunk {
            break;
        }
    }
    let total: u32 = items.iter().map(|it| it.len).sum();

    // 4. The bytes where they land.
    let mut code = Vec::with_capacity(total as usize);
    let place = |t: Target| match t {
        Target::Insn(j) => at + offsets[j as usize] as u64,
        Target::Abs(a) => abs[a as usize],
    };
    let rel32 = |to: u64, end: u64| i32::try_from(to.wrapping_sub(end) as i64).ok();
    for (k, it) in items.iter().enumerate() {
        let here = at + offsets[k] as u64;
        let end = here + it.len as u64;
        match it.kind {
            Kind::Plain => {
                code.extend_from_slice(&pre[it.from as usize..(it.from + it.len) as usize])
            }
            Kind::LabelImm { target: j } => {
                code.extend_from_slice(&pre[it.from as usize..(it.from + it.len) as usize]);
                let imm = label_imm(place(Target::Insn(j)))?;
                let n = code.len();
                code[n - 4..].copy_from_slice(&imm);
            }
            Kind::RipRel { disp, target: t } => {
                let Some(d) = rel32(place(t), end) else { return Ok(Err(Unhandled)) };
                let start = code.len();
                code.extend_from_slice(&pre[it.from as usize..(it.from + it.len) as usize]);
                let at_disp = start + disp as usize;
                code[at_disp..at_disp + 4].copy_from_slice(&d.to_le_bytes());
            }
            Kind::Branch { op, target: t, short } => {
                let to = place(t);
                if short {
                    let d = to.wrapping_sub(end) as i8 as u8;
                    code.extend_from_slice(&match op {
                        Op::Jmp => [0xeb, d],
                        Op::Jcc(cc) => [0x70 + cc, d],
                        Op::Rcx(o) => [o, d],
                        Op::Call => unreachable!("a call has no short form"),
                    });
                    continue;
                }
                let Some(d) = rel32(to, end) else { return Ok(Err(Unhandled)) };
                match op {
                    Op::Jmp => code.push(0xe9),
                    Op::Call => code.push(0xe8),
                    Op::Jcc(cc) => code.extend_from_slice(&[0x0f, 0x80 + cc]),
                    // On the condition, over the short jump that skips the near one.
                    Op::Rcx(o) => code.extend_from_slice(&[o, 0x02, 0xeb, 0x05, 0xe9]),
                }
                code.extend_from_slice(&d.to_le_bytes());
            }
        }
    }
    debug_assert_eq!(code.len(), total as usize);
    Ok(Ok(Laid { code, offsets }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use iced_x86::{Decoder, DecoderOptions, Mnemonic};

    const AT: u64 = 0x1000_0000;
    const A: u64 = 0x5000_0001;
    const B: u64 = 0x5000_0002;

    fn labelled(mut i: Instruction, ip: u64) -> Instruction {
        i.set_ip(ip);
        i
    }

    fn branch(code: Code, to: u64) -> Instruction {
        Instruction::with_branch(code, to).unwrap()
    }

    #[test]
    fn branches_take_the_shortest_form_that_reaches() {
        // A `jrcxz` 200 bytes short of its target (its long form), a `jmp` back (short), a
        // `jne` to the end (near), a `lea` of the end (RIP-relative, to a label).
        let mut v = vec![labelled(Instruction::with(Code::Nopd), A)];
        v.push(branch(Code::Jrcxz_rel8_64, B));
        v.push(branch(Code::Jmp_rel32_64, A));
        v.push(branch(Code::Jne_rel8_64, B));
        let lea = iced_x86::MemoryOperand::with_base_displ(Register::RIP, B as i64);
        v.push(Instruction::with2(Code::Lea_r64_m, Register::RAX, lea).unwrap());
        v.extend(vec![Instruction::with(Code::Nopd); 200]);
        v.push(labelled(Instruction::with(Code::Retnq), B));
        let own = lay_out(&v, AT).unwrap();
        let d: Vec<Instruction> =
            Decoder::with_ip(64, &own.code, AT, DecoderOptions::NONE).iter().collect();
        use Mnemonic::*;
        let m: Vec<Mnemonic> = d.iter().take(7).map(|i| i.mnemonic()).collect();
        assert_eq!(m, [Nop, Jrcxz, Jmp, Jmp, Jmp, Jne, Lea]);
        let ret = d.last().unwrap().ip();
        // jrcxz +2 to the near jump, a short jump over it.
        assert_eq!(d[1].near_branch_target(), d[3].ip());
        assert_eq!(d[2].near_branch_target(), d[4].ip());
        assert_eq!((d[3].len(), d[3].near_branch_target()), (5, ret));
        assert_eq!((d[4].len(), d[4].near_branch_target()), (2, AT));
        assert_eq!((d[5].len(), d[5].near_branch_target()), (6, ret));
        assert_eq!(d[6].ip_rel_memory_address(), ret);
        let at = |k: usize| AT + own.offsets[k] as u64;
        assert_eq!(
            [at(1), at(2), at(3), at(4), at(205)],
            [d[1].ip(), d[4].ip(), d[5].ip(), d[6].ip(), ret]
        );
        // The same bytes as iced's encoder, which gives the rewritten `jrcxz` no offset.
        let iced = lay_out_iced(&v, AT).unwrap();
        assert_eq!(own.code, iced.code);
        assert_eq!(iced.offsets[1], u32::MAX);
    }

    #[test]
    fn what_kerf_cannot_lay_out_goes_to_iced_and_a_label_is_one_instruction() {
        // A call beyond a rel32: iced's `call [rip+word]`.
        let v = [branch(Code::Call_rel32_64, 0x7fff_0000_0000), Instruction::with(Code::Retnq)];
        let before = iced_fallbacks();
        let laid = lay_out(&v, AT).unwrap();
        assert_eq!(iced_fallbacks(), before + 1);
        assert_eq!(laid.code, lay_out_iced(&v, AT).unwrap().code);
        let twice = [
            labelled(Instruction::with(Code::Nopd), A),
            labelled(Instruction::with(Code::Retnq), A),
        ];
        assert_eq!(lay_out(&twice, AT).unwrap_err(), EncodeError::SameLabel(A));
    }
}
