//! The tracer's generated code and its data: the IR program of one probe (stream flag, captures,
//! filter, then one record into the thread's ring of the probe's stream), the layout of the
//! tracer's area in each data heap, and how a record's words decode back into captured values.
//!
//! Area (offsets from its start, `n` streams; in reach of the code, which addresses it
//! rip-relative):
//! ```text
//! +64*s               stream s's flag: 0 off, else on (kerf writes it while the target runs)
//! +64*(n+s)           stream s's filtered count (events a filter rejected; locked add)
//! ```
//! Ring area (`count` rings per stream: one per thread table slot in a process, one per CPU in
//! the kernel, whose tasks outnumber any thread table; anywhere in the target, as the code
//! loads its address as a 64-bit immediate, so that a process's rings may take gigabytes of
//! address space, of which only the pages written cost memory):
//! ```text
//! +start(s)           stream s's rings (codegen::ring, "Per-thread rings", "Per-CPU rings"),
//!                     ring::rings_len(count, shape(s)) bytes
//! ```
//! Every ring has the same slot count; a stream's slots are the shortest that hold the longest
//! record of its probes (`ring::Shape::fitting`), so that a stream of two captures moves one
//! cache line an event, not two. The tracer learns the lengths by building the programs once
//! with the longest slots ([`AreaLayout::long`]), then builds them for the real layout.
//! A record's words: the thread id (when the target has one kerf can read), then each register
//! capture, then the address of each memory capture, then per memory capture its status word
//! (bytes read, or -errno) and its bytes (codegen's `MemRead`).

use super::event::Value;
use super::probe::{Cmp, Expr, Filter, MemKind, Operand, ProbeLine, RegValue};
use kerf_codegen::ir::{
    Addr, Cond, Label, MemRead, Op, Program, ReadKind, Rings, Src, VReg, Width,
};
use kerf_codegen::ring;
use std::collections::HashMap;

/// Where a stream's flag and filtered count are in the area, and its rings in the ring area.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AreaLayout {
    /// Per thread or per CPU.
    pub per: Rings,
    /// Slots of every ring.
    pub slots: u32,
    /// Per stream: bytes a slot of its rings.
    slot_lens: Vec<u32>,
    /// Per stream, and one past the last: where its rings start in the ring area.
    starts: Vec<u64>,
}

impl AreaLayout {
    /// Streams whose slots are `slot_lens[s]` bytes, rings of `slots` slots.
    pub fn new(per: Rings, slots: u32, slot_lens: Vec<u32>) -> AreaLayout {
        let mut starts = vec![0];
        for &slot_len in &slot_lens {
            let len = ring::rings_len(per.count(), ring::Shape { slots, slot_len });
            starts.push(starts.last().copied().unwrap_or(0) + len);
        }
        AreaLayout { per, slots, slot_lens, starts }
    }
    /// `streams` streams of the longest slots.
    pub fn long(per: Rings, slots: u32, streams: u32) -> AreaLayout {
        AreaLayout::new(per, slots, vec![ring::MAX_SLOT_LEN; streams as usize])
    }
    pub fn streams(&self) -> u32 {
        self.slot_lens.len() as u32
    }
    /// The shape of stream `s`'s rings.
    pub fn shape(&self, s: u32) -> ring::Shape {
        ring::Shape { slots: self.slots, slot_len: self.slot_lens[s as usize] }
    }
    pub fn flag(&self, s: u32) -> u64 {
        64 * s as u64
    }
    pub fn filtered(&self, s: u32) -> u64 {
        64 * (self.streams() + s) as u64
    }
    /// Stream `s`'s rings, in the ring area.
    pub fn rings(&self, s: u32) -> u64 {
        self.starts[s as usize]
    }
    /// Bytes of the area.
    pub fn bytes(&self) -> u64 {
        128 * self.streams() as u64
    }
    /// Bytes of the ring area.
    pub fn ring_bytes(&self) -> u64 {
        self.rings(self.streams())
    }
}

/// How the target tells its threads' ids to generated code.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TidSource {
    /// A 32-bit id at this offset from the thread pointer (glibc's `struct pthread.tid`; the
    /// kernel's `task_struct.pid`).
    At(u32),
    /// The thread id and, in the next 32 bits, its process's id (the kernel's
    /// `task_struct.pid` and `.tgid`, side by side): one 64-bit load.
    Pair(u32),
    /// None known: events carry no thread id (the reader shows the thread's ring instead).
    Unknown,
}

/// How to decode one probe's records.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decode {
    pub tid: bool,
    /// The thread id's word holds the process id in its upper half.
    pub pair: bool,
    /// Per capture, in the probe's order.
    pub captures: Vec<Slot>,
    /// Memory captures, in record order: (capture index, bytes read).
    pub reads: Vec<(usize, u16)>,
}

/// Where a capture's value is in a record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Slot {
    /// Word `k` of the values.
    Word(usize),
    /// The CPU in the record's header (no register spent on it).
    Cpu,
    /// Memory capture number `r` (its address is word `addr`), read as `kind`, `disp` past
    /// its base.
    Read { r: usize, addr: usize, disp: i32, kind: MemKind },
}

/// What the program of a probe cannot do in this target.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BuildError(pub String);

/// The program of `line` as probe `probe` of stream `s` (its records carry `probe` as their
/// stream id), and how to decode its records. `only`: in the kernel, run only for the tasks
/// of one process (the 32-bit id at this offset of the task is this pid); others are not
/// counted at all.
pub fn build(
    line: &ProbeLine,
    probe: u32,
    s: u32,
    area: &AreaLayout,
    tid: TidSource,
    kernel: bool,
    only: Option<(u32, u32)>,
) -> Result<(Program, Decode), BuildError> {
    let mut p = Program::new();
    let end = p.label("end");
    let filtered = p.label("filtered");
    // One scratch register for the flag, then the thread pointer, then the thread id.
    let tmp = p.vreg("tmp");
    if let Some((off, pid)) = only {
        p.push(Op::Thread { dst: tmp });
        let addr = Addr::Based { base: tmp, disp: off as i32 };
        p.push(Op::Load { dst: tmp, width: Width::W32, addr });
        p.push(Op::Branch { cond: Cond::Ne, a: tmp, b: Src::Imm(u64::from(pid)), target: end });
    }
    p.push(Op::Load { dst: tmp, width: Width::W64, addr: Addr::Abs(area.flag(s)) });
    p.push(Op::Branch { cond: Cond::Eq, a: tmp, b: Src::Imm(0), target: end });
    let mut regs: HashMap<RegValue, VReg> = HashMap::new();
    let tid_reg = match tid {
        TidSource::At(off) | TidSource::Pair(off) => {
            let width = if matches!(tid, TidSource::Pair(_)) { Width::W64 } else { Width::W32 };
            p.push(Op::Thread { dst: tmp });
            // A process's thread made by a bare `clone` has no thread pointer (fs base 0):
            // its id reads as 0 rather than from address `off`, which would fault.
            let no_tcb = (!kernel).then(|| p.label("no_tcb"));
            if let Some(l) = no_tcb {
                p.push(Op::Branch { cond: Cond::Eq, a: tmp, b: Src::Imm(0), target: l });
            }
            let addr = Addr::Based { base: tmp, disp: off as i32 };
            p.push(Op::Load { dst: tmp, width, addr });
            if let Some(l) = no_tcb {
                p.push(Op::Label(l));
            }
            // A pair holds the process id too: a filter on the thread id loads it alone.
            if width == Width::W32 {
                regs.insert(RegValue::Tid, tmp);
            }
            Some(tmp)
        }
        TidSource::Unknown => None,
    };
    let mut value = |p: &mut Program, r: RegValue| -> Result<VReg, BuildError> {
        if let Some(v) = regs.get(&r) {
            return Ok(*v);
        }
        let v = match r {
            RegValue::Reg(g) => {
                let v = p.vreg(g.name());
                p.push(Op::Reg { dst: v, reg: g });
                v
            }
            RegValue::Cpu => {
                let v = p.vreg("cpu");
                p.push(Op::Cpu { dst: v });
                v
            }
            RegValue::Tid => match tid {
                TidSource::Pair(off) => {
                    let v = p.vreg("tid");
                    p.push(Op::Thread { dst: v });
                    let addr = Addr::Based { base: v, disp: off as i32 };
                    p.push(Op::Load { dst: v, width: Width::W32, addr });
                    v
                }
                _ => {
                    return Err(BuildError(
                        "this target's thread ids are not known to generated code".into(),
                    ))
                }
            },
        };
        regs.insert(r, v);
        Ok(v)
    };
    // The filter first: a rejected event reads nothing more.
    if let Some(f) = &line.filter {
        branch(&mut p, f, false, filtered, &mut value)?;
    }
    let mut values: Vec<VReg> = tid_reg.into_iter().collect();
    let pair = matches!(tid, TidSource::Pair(_));
    let mut decode =
        Decode { tid: tid_reg.is_some(), pair, captures: Vec::new(), reads: Vec::new() };
    let mut mem = Vec::new();
    for (k, c) in line.captures.iter().enumerate() {
        match c.expr {
            Expr::Reg(RegValue::Cpu) => decode.captures.push(Slot::Cpu),
            Expr::Reg(r) => {
                let v = value(&mut p, r)?;
                let at = values.iter().position(|x| *x == v).unwrap_or_else(|| {
                    values.push(v);
                    values.len() - 1
                });
                decode.captures.push(Slot::Word(at));
            }
            Expr::Mem { base, disp, kind } => {
                if let (false, MemKind::Str { user: true, .. }) = (kernel, kind) {
                    return Err(BuildError(format!(
                        "capture '{}': ustr reads user memory from the kernel; in a process \
                         use str",
                        c.name
                    )));
                }
                mem.push((k, base, disp, kind));
                decode.captures.push(Slot::Word(usize::MAX));
            }
        }
    }
    let mut reads = Vec::new();
    for (r, &(k, base, disp, kind)) in mem.iter().enumerate() {
        let v = value(&mut p, RegValue::Reg(base))?;
        let addr = values.iter().position(|x| *x == v).unwrap_or_else(|| {
            values.push(v);
            values.len() - 1
        });
        let len = match kind {
            MemKind::Int { bytes, .. } => u16::from(bytes),
            MemKind::Str { max, .. } => max,
        };
        decode.captures[k] = Slot::Read { r, addr, disp, kind };
        decode.reads.push((k, len));
        let kind = match kind {
            MemKind::Int { .. } => ReadKind::Bytes,
            MemKind::Str { user: false, .. } => ReadKind::Str,
            MemKind::Str { user: true, .. } => ReadKind::UserStr,
        };
        reads.push(MemRead { base: v, disp, len, kind });
    }
    p.push(Op::EmitThread {
        rings: area.rings(s),
        per: area.per,
        shape: area.shape(s),
        stream: probe,
        values,
        reads,
        timed: true,
    });
    p.push(Op::Jump { target: end });
    p.push(Op::Label(filtered));
    p.push(Op::AddMem { addr: Addr::Abs(area.filtered(s)), src: Src::Imm(1), atomic: true });
    p.push(Op::Label(end));
    p.check().map_err(|(op, what)| BuildError(format!("op {op}: {what}")))?;
    Ok((p, decode))
}

/// Go to `target` if `f` is `sense`; fall through otherwise.
fn branch(
    p: &mut Program,
    f: &Filter,
    sense: bool,
    target: Label,
    value: &mut impl FnMut(&mut Program, RegValue) -> Result<VReg, BuildError>,
) -> Result<(), BuildError> {
    match f {
        Filter::Not(x) => branch(p, x, !sense, target, value),
        Filter::And(a, b) | Filter::Or(a, b) => {
            // And: false if either is false; Or: true if either is true.
            let short = matches!(f, Filter::Or(..));
            if sense == short {
                branch(p, a, sense, target, value)?;
                branch(p, b, sense, target, value)
            } else {
                let skip = p.label(&format!("skip{}", p.labels.len()));
                branch(p, a, !sense, skip, value)?;
                branch(p, b, sense, target, value)?;
                p.push(Op::Label(skip));
                Ok(())
            }
        }
        Filter::Cmp(a, cmp, b) => {
            let signed = [a, b].iter().any(|o| matches!(o, Operand::Int(i) if *i < 0));
            let (a, cmp, b) = match (a, b) {
                (Operand::Int(x), Operand::Int(y)) => {
                    // Both constant: decided now.
                    if holds(*x, *cmp, *y, signed) == sense {
                        p.push(Op::Jump { target });
                    }
                    return Ok(());
                }
                (Operand::Int(_), Operand::Reg(_)) => (b, flip(*cmp), a),
                _ => (a, *cmp, b),
            };
            let Operand::Reg(ra) = a else { unreachable!("a register on the left") };
            let va = value(p, *ra)?;
            let vb = match b {
                Operand::Int(i) => Src::Imm(*i as u64),
                Operand::Reg(r) => Src::Reg(value(p, *r)?),
            };
            let cmp = if sense { cmp } else { negate(cmp) };
            p.push(Op::Branch { cond: cond(cmp, signed), a: va, b: vb, target });
            Ok(())
        }
    }
}

fn holds(x: i64, c: Cmp, y: i64, signed: bool) -> bool {
    let (ux, uy) = (x as u64, y as u64);
    match c {
        Cmp::Eq => x == y,
        Cmp::Ne => x != y,
        Cmp::Lt if signed => x < y,
        Cmp::Le if signed => x <= y,
        Cmp::Gt if signed => x > y,
        Cmp::Ge if signed => x >= y,
        Cmp::Lt => ux < uy,
        Cmp::Le => ux <= uy,
        Cmp::Gt => ux > uy,
        Cmp::Ge => ux >= uy,
    }
}

/// `a c b` as `b flip(c) a`.
fn flip(c: Cmp) -> Cmp {
    match c {
        Cmp::Lt => Cmp::Gt,
        Cmp::Le => Cmp::Ge,
        Cmp::Gt => Cmp::Lt,
        Cmp::Ge => Cmp::Le,
        c => c,
    }
}

fn negate(c: Cmp) -> Cmp {
    match c {
        Cmp::Eq => Cmp::Ne,
        Cmp::Ne => Cmp::Eq,
        Cmp::Lt => Cmp::Ge,
        Cmp::Le => Cmp::Gt,
        Cmp::Gt => Cmp::Le,
        Cmp::Ge => Cmp::Lt,
    }
}

fn cond(c: Cmp, signed: bool) -> Cond {
    match (c, signed) {
        (Cmp::Eq, _) => Cond::Eq,
        (Cmp::Ne, _) => Cond::Ne,
        (Cmp::Lt, true) => Cond::Lt,
        (Cmp::Le, true) => Cond::Le,
        (Cmp::Gt, true) => Cond::Gt,
        (Cmp::Ge, true) => Cond::Ge,
        (Cmp::Lt, false) => Cond::Ltu,
        (Cmp::Le, false) => Cond::Leu,
        (Cmp::Gt, false) => Cond::Gtu,
        (Cmp::Ge, false) => Cond::Geu,
    }
}

impl Decode {
    /// The thread id of a record's words (0 when the target gives none).
    pub fn tid(&self, words: &[u64]) -> u32 {
        if self.tid {
            words.first().copied().unwrap_or(0) as u32
        } else {
            0
        }
    }

    /// The process id a record carries with its thread id (`None`: it carries none).
    pub fn pid(&self, words: &[u64]) -> Option<u32> {
        (self.tid && self.pair).then(|| (words.first().copied().unwrap_or(0) >> 32) as u32)
    }

    /// The captured values of a record's words (and its header's CPU), in the probe's order.
    /// A record too short for its probe (never written by kerf's code) gives faults at
    /// address 0.
    pub fn values(&self, words: &[u64], cpu: u16) -> Vec<Value> {
        let reads_at = self.words_before_reads();
        let mut starts = Vec::with_capacity(self.reads.len());
        let mut at = reads_at;
        for &(_, len) in &self.reads {
            starts.push(at);
            at += 1 + (len as usize).div_ceil(8);
        }
        self.captures
            .iter()
            .map(|slot| match *slot {
                Slot::Word(k) => Value::Unsigned(words.get(k).copied().unwrap_or(0)),
                Slot::Cpu => Value::Unsigned(u64::from(cpu)),
                Slot::Read { r, addr, disp, kind } => {
                    let base = words.get(addr).copied().unwrap_or(0);
                    let from = base.wrapping_add(disp as i64 as u64);
                    let start = starts[r];
                    let status = words.get(start).copied().unwrap_or(u64::MAX) as i64;
                    let len = self.reads[r].1 as usize;
                    let bytes: Vec<u8> = (0..len.div_ceil(8))
                        .flat_map(|w| words.get(start + 1 + w).copied().unwrap_or(0).to_le_bytes())
                        .take(len)
                        .collect();
                    mem_value(kind, status, &bytes, from)
                }
            })
            .collect()
    }

    /// Words of a record before the first memory capture's status.
    fn words_before_reads(&self) -> usize {
        let mut n = usize::from(self.tid);
        for s in &self.captures {
            match *s {
                Slot::Word(k) => n = n.max(k + 1),
                Slot::Cpu => {}
                Slot::Read { addr, .. } => n = n.max(addr + 1),
            }
        }
        n
    }
}

/// The value of a memory capture that read `status` bytes (or failed: -errno) from `from`.
fn mem_value(kind: MemKind, status: i64, bytes: &[u8], from: u64) -> Value {
    match kind {
        MemKind::Int { bytes: n, signed } => {
            if status != i64::from(n) {
                return Value::Fault { addr: from };
            }
            let mut b = [0u8; 8];
            b[..n as usize].copy_from_slice(&bytes[..n as usize]);
            let v = u64::from_le_bytes(b);
            if signed {
                let shift = 64 - 8 * u32::from(n);
                Value::Signed(((v << shift) as i64) >> shift)
            } else {
                Value::Unsigned(v)
            }
        }
        MemKind::Str { max, .. } => {
            if status <= 0 {
                return Value::Fault { addr: from };
            }
            let got = &bytes[..(status as usize).min(bytes.len())];
            match got.iter().position(|&b| b == 0) {
                Some(n) => Value::Bytes { data: got[..n].to_vec(), truncated: false },
                // No NUL in what could be read: cut at the length, or at unreadable memory.
                None => Value::Bytes {
                    data: got.to_vec(),
                    truncated: got.len() == max as usize || got.len() < max as usize,
                },
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::probe::parse;

    fn area() -> AreaLayout {
        AreaLayout::long(Rings::Thread, 16, 2)
    }

    #[test]
    fn area_layout_keeps_streams_apart() {
        let a = area();
        assert_eq!((a.flag(1), a.filtered(0), a.filtered(1)), (64, 128, 192));
        assert_eq!(a.bytes(), 256);
        // The rings in the ring area.
        let long = ring::Shape::long(16);
        assert_eq!(a.rings(0), 0);
        assert_eq!(a.rings(1), ring::thread_rings_len(long));
        assert_eq!(a.ring_bytes(), 2 * ring::thread_rings_len(long));
        // Per CPU: as many rings as CPUs, the same header.
        let cpus = AreaLayout::long(Rings::Cpu(4), 16, 2);
        assert_eq!(cpus.rings(1), ring::RINGS + 4 * ring::ring_len(long));
        // Slots of their own length per stream: each stream's rings after the last's.
        let mixed = AreaLayout::new(Rings::Thread, 16, vec![32, 128, 64]);
        let shape = |slot_len| ring::Shape { slots: 16, slot_len };
        assert_eq!(mixed.shape(2), shape(64));
        assert_eq!(mixed.rings(1), ring::thread_rings_len(shape(32)));
        assert_eq!(mixed.rings(2), mixed.rings(1) + ring::thread_rings_len(shape(128)));
        assert_eq!(mixed.ring_bytes(), mixed.rings(2) + ring::thread_rings_len(shape(64)));
    }

    /// In the kernel the record goes into the CPU's ring: `emit.cpu` with the area's count.
    #[test]
    fn a_kernel_probe_writes_its_cpus_ring() {
        let line = parse("f {a=arg0, v=u64(arg0)}").unwrap();
        let area = AreaLayout::long(Rings::Cpu(2), 16, 2);
        let (p, _) = build(&line, 0, 0, &area, TidSource::Pair(0x5c8), true, None).unwrap();
        let text = kerf_codegen::text::print(&p);
        assert!(text.contains("emit.cpu rings=0x0, cpus=2, slots=16, slot=128"), "{text}");
    }

    #[test]
    fn a_probe_checks_its_stream_then_its_filter_then_emits() {
        let line = parse("f {a=arg0, s=str(arg1, 20), n=i16(rsp+8)} if a != 0 && cpu < 4").unwrap();
        let (p, d) = build(&line, 7, 1, &area(), TidSource::At(0x2d0), false, None).unwrap();
        let text = kerf_codegen::text::print(&p);
        assert!(text.contains("load64 %tmp, [0x40]"), "{text}");
        // The thread id is read only where there is a thread pointer to read it through.
        let guard = text.find("br.eq %tmp, 0, no_tcb").expect(&text);
        assert!(guard < text.find("load32 %tmp, [%tmp+0x2d0]").expect(&text), "{text}");
        assert!(text.contains("emit.thread"), "{text}");
        assert!(text.contains("str(%rsi, 20)"), "{text}");
        // tid, arg0, then the reads' bases: arg1, rsp.
        assert_eq!(d.captures[0], Slot::Word(1));
        assert!(matches!(d.captures[1], Slot::Read { r: 0, addr: 2, .. }));
        assert!(matches!(d.captures[2], Slot::Read { r: 1, addr: 3, disp: 8, .. }));
        // A record: tid, a, base of s, base of n, then s's status and 3 words, n's status
        // and 1 word.
        let mut w = vec![42, 5, 0x1000, 0x2000];
        w.push(6);
        w.extend([u64::from_le_bytes(*b"hello\0xx"), 0, 0]);
        w.push(-14i64 as u64);
        w.push(0);
        assert_eq!(d.tid(&w), 42);
        assert_eq!(
            d.values(&w, 0),
            vec![
                Value::Unsigned(5),
                Value::Bytes { data: b"hello".to_vec(), truncated: false },
                Value::Fault { addr: 0x2008 },
            ]
        );
    }

    #[test]
    fn memory_values_decode_by_kind() {
        let i16s = MemKind::Int { bytes: 2, signed: true };
        assert_eq!(mem_value(i16s, 2, &[0xfe, 0xff], 0), Value::Signed(-2));
        assert_eq!(mem_value(i16s, 1, &[0xfe, 0xff], 9), Value::Fault { addr: 9 });
        let s = MemKind::Str { max: 4, user: false };
        assert_eq!(
            mem_value(s, 4, b"abcd", 0),
            Value::Bytes { data: b"abcd".to_vec(), truncated: true }
        );
        assert_eq!(mem_value(s, -14, b"", 5), Value::Fault { addr: 5 });
    }

    /// With the kernel's pid and tgid in one load, a filter on the thread id compares the
    /// 32-bit id alone, not the pair.
    #[test]
    fn a_thread_filter_on_a_pair_loads_the_thread_id_alone() {
        let line = parse("f {a=arg0} if tid == 1234").unwrap();
        let (p, d) = build(&line, 0, 0, &area(), TidSource::Pair(0x5c8), true, None).unwrap();
        let text = kerf_codegen::text::print(&p);
        assert!(text.contains("load64 %tmp, [%tmp+0x5c8]"), "{text}");
        assert!(text.contains("load32 %tid, [%tid+0x5c8]"), "{text}");
        assert!(text.contains("br.ne %tid, 1234") || text.contains("br.ne %tid, 0x4d2"), "{text}");
        assert_eq!((d.tid(&[(77 << 32) | 1234]), d.pid(&[(77 << 32) | 1234])), (1234, Some(77)));
    }

    #[test]
    fn constant_filters_are_decided_when_built() {
        let line = parse("f if 1 == 2").unwrap();
        let (p, _) = build(&line, 0, 0, &area(), TidSource::Unknown, false, None).unwrap();
        assert!(p.ops.iter().any(|o| matches!(o, Op::Jump { .. })));
        let line = parse("f {tid}").unwrap();
        let e = build(&line, 0, 0, &area(), TidSource::Unknown, false, None).unwrap_err();
        assert!(e.0.contains("thread ids"), "{e:?}");
    }
}
