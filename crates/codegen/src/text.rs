//! The IR's text form: one op per line, `NAME:` lines for labels, `#` comments, operands
//! separated by commas. [`parse`] and [`print()`] round-trip (`parse(print(p)) == p`, and
//! `print(parse(t))` is `t` in canonical form: comments and blank lines dropped).
//!
//! ```text
//! # a coverage flag: set once, the first time the point runs
//!     load8 %f, [0x7000]
//!     br.ne %f, 0, done
//!     store8 [0x7000], 1
//! done:
//! ```
//! Operands: `%name` (a virtual register), a number (decimal, `0x` hex, or negative
//! decimal), `[0x7000]` or `[0x7000+8]` (an absolute address), `[%v]`, `[%v+16]`, `[%v-8]`,
//! a register name of the point (`rdi`), a label name, `key=value` where an op names its
//! operands, and `read(%p+16, 8)` (a memory read of an `emit.thread`: base, displacement,
//! bytes; the comma inside the parentheses does not separate operands).
//! The ops and their forms are listed on [`crate::ir::Op`].

use crate::ir::{
    Addr, Clock, Cond, Label, MemRead, Op, Program, ReadKind, Rings, Src, TimerOp, VReg, Width,
};
use crate::ring;
use crate::{SpAt, SpBase};
use kerf_arch::x86_64::Gpr;
use std::fmt::{self, Write as _};

/// A line of IR text that does not parse, or a program that does not check.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseError {
    /// 1-based line number.
    pub line: usize,
    pub kind: ParseErrorKind,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ParseErrorKind {
    UnknownOp(String),
    /// The op takes other operands: what it takes, and what was given.
    Operands {
        op: String,
        want: &'static str,
        got: String,
    },
    /// An operand that is none of the operand forms.
    BadOperand(String),
    /// The program as a whole is wrong here (see [`Program::check`]).
    Check(String),
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: ", self.line)?;
        match &self.kind {
            ParseErrorKind::UnknownOp(op) => write!(f, "unknown op {op:?}"),
            ParseErrorKind::Operands { op, want, got } => {
                write!(f, "{op} takes {want}, not {got:?}")
            }
            ParseErrorKind::BadOperand(s) => write!(f, "bad operand {s:?}"),
            ParseErrorKind::Check(s) => f.write_str(s),
        }
    }
}

impl std::error::Error for ParseError {}

/// Parse a program, then [`Program::check`] it (a failed check names the op's line).
pub fn parse(text: &str) -> Result<Program, ParseError> {
    let mut p = Program::new();
    let mut lines = Vec::new();
    for (no, raw) in text.lines().enumerate() {
        let line = raw.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let err = |kind| ParseError { line: no + 1, kind };
        let op = parse_line(&mut p, line).map_err(err)?;
        p.push(op);
        lines.push(no + 1);
    }
    p.check()
        .map_err(|(k, msg)| ParseError { line: lines[k], kind: ParseErrorKind::Check(msg) })?;
    Ok(p)
}

fn parse_line(p: &mut Program, line: &str) -> Result<Op, ParseErrorKind> {
    if let Some(name) = line.strip_suffix(':') {
        if is_ident(name) {
            return Ok(Op::Label(p.label(name)));
        }
        return Err(ParseErrorKind::BadOperand(name.to_string()));
    }
    let (mut op, rest) = line.split_once(char::is_whitespace).unwrap_or((line, ""));
    let mut rest = rest.trim();
    let atomic = op == "atomic";
    if atomic {
        (op, rest) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
        if op != "add" {
            return Err(ParseErrorKind::UnknownOp(format!("atomic {op}")));
        }
    }
    let args = operands(rest);
    let bad = |want: &'static str| ParseErrorKind::Operands {
        op: op.to_string(),
        want,
        got: rest.to_string(),
    };
    let width = |s: &str| match s {
        "8" => Some(Width::W8),
        "16" => Some(Width::W16),
        "32" => Some(Width::W32),
        "64" => Some(Width::W64),
        _ => None,
    };
    if let Some(w) = op.strip_prefix("load").and_then(width) {
        let [d, a] = args[..] else { return Err(bad("%dst, [addr]")) };
        return Ok(Op::Load { dst: vreg(p, d)?, width: w, addr: addr(p, a)? });
    }
    if let Some(w) = op.strip_prefix("store").and_then(width) {
        let [a, s] = args[..] else { return Err(bad("[addr], src")) };
        return Ok(Op::Store { width: w, addr: addr(p, a)?, src: src(p, s)? });
    }
    if let Some(c) = op.strip_prefix("br.") {
        let cond = Cond::ALL.into_iter().find(|k| k.name() == c);
        let cond = cond.ok_or_else(|| ParseErrorKind::UnknownOp(op.to_string()))?;
        let [a, b, l] = args[..] else { return Err(bad("%a, src, label")) };
        return Ok(Op::Branch { cond, a: vreg(p, a)?, b: src(p, b)?, target: label(p, l)? });
    }
    Ok(match op {
        "thread" => {
            let [d] = args[..] else { return Err(bad("%dst")) };
            Op::Thread { dst: vreg(p, d)? }
        }
        "tid" => {
            let [d] = args[..] else { return Err(bad("%dst")) };
            Op::Tid { dst: vreg(p, d)? }
        }
        "reg" => {
            let [d, r] = args[..] else { return Err(bad("%dst, register")) };
            let reg = Gpr::from_name(r).ok_or(ParseErrorKind::BadOperand(r.to_string()))?;
            Op::Reg { dst: vreg(p, d)?, reg }
        }
        "mov" => {
            let [d, s] = args[..] else { return Err(bad("%dst, src")) };
            Op::Mov { dst: vreg(p, d)?, src: src(p, s)? }
        }
        "add" => {
            let [d, s] = args[..] else { return Err(bad("%dst or [addr], src")) };
            if d.starts_with('[') {
                Op::AddMem { addr: addr(p, d)?, src: src(p, s)?, atomic }
            } else if atomic {
                return Err(bad("[addr], src"));
            } else {
                Op::Add { dst: vreg(p, d)?, src: src(p, s)? }
            }
        }
        "rdtsc" => {
            let [d] = args[..] else { return Err(bad("%dst")) };
            Op::Rdtsc { dst: vreg(p, d)? }
        }
        "cpu" => {
            let [d] = args[..] else { return Err(bad("%dst")) };
            Op::Cpu { dst: vreg(p, d)? }
        }
        "jmp" => {
            let [l] = args[..] else { return Err(bad("label")) };
            Op::Jump { target: label(p, l)? }
        }
        "cold" => {
            let [] = args[..] else { return Err(bad("nothing")) };
            Op::Cold
        }
        "emit" | "emit.thread" | "emit.cpu" | "emit.thread.untimed" | "emit.cpu.untimed" => {
            let timed = !op.ends_with(".untimed");
            let op = op.trim_end_matches(".untimed");
            let (key, want) = match op {
                "emit" => ("ring", "ring=ADDR, slots=N, [slot=B,] stream=S, %value..."),
                "emit.cpu" => (
                    "rings",
                    "rings=ADDR, cpus=N, slots=N, [slot=B,] stream=S, %value..., \
                     read(%p+D, LEN)...",
                ),
                _ => (
                    "rings",
                    "rings=ADDR, slots=N, [slot=B,] stream=S, %value..., read(%p+D, LEN)...",
                ),
            };
            // emit.cpu has one more key, the number of rings; `slot=B` (bytes a slot) may
            // follow `slots=N`, and is the longest slot if not.
            let mut first = usize::from(op == "emit.cpu");
            if args.len() < 3 + first {
                return Err(bad(want));
            }
            let ring = keyed(args[0], key).ok_or_else(|| bad(want))?;
            let per = match op {
                "emit.cpu" => {
                    let n = keyed(args[1], "cpus").ok_or_else(|| bad(want))?;
                    Rings::Cpu(u32::try_from(n).map_err(|_| bad(want))?)
                }
                _ => Rings::Thread,
            };
            let slots = keyed(args[1 + first], "slots").ok_or_else(|| bad(want))?;
            let slot_len = match keyed(args[2 + first], "slot") {
                Some(b) if args.len() > 3 + first => {
                    first += 1;
                    b
                }
                Some(_) => return Err(bad(want)),
                None => u64::from(ring::MAX_SLOT_LEN),
            };
            let stream = keyed(args[2 + first], "stream").ok_or_else(|| bad(want))?;
            let (Ok(slots), Ok(slot_len), Ok(stream)) =
                (u32::try_from(slots), u32::try_from(slot_len), u32::try_from(stream))
            else {
                return Err(bad(want));
            };
            let shape = ring::Shape { slots, slot_len };
            // The values, then the reads (the order of the record).
            let rest = &args[3 + first..];
            let nvalues = rest.iter().take_while(|a| a.starts_with('%')).count();
            let (values, reads) = rest.split_at(nvalues);
            let values = values.iter().map(|v| vreg(p, v)).collect::<Result<_, _>>()?;
            if op == "emit" {
                if !reads.is_empty() {
                    return Err(bad(want));
                }
                Op::Emit { ring, shape, stream, values }
            } else {
                let reads = reads.iter().map(|r| mem_read(p, r)).collect::<Result<_, _>>()?;
                Op::EmitThread { rings: ring, per, shape, stream, values, reads, timed }
            }
        }
        "call" => {
            const WANT: &str = "[%ret,] ADDR, src...";
            let (ret, args) = match args.first() {
                Some(a) if a.starts_with('%') => (Some(vreg(p, a)?), &args[1..]),
                _ => (None, &args[..]),
            };
            let Some(t) = args.first() else { return Err(bad(WANT)) };
            let target = number(t).ok_or_else(|| bad(WANT))?;
            let args = args[1..].iter().map(|s| src(p, s)).collect::<Result<_, _>>()?;
            Op::Call { target, args, ret }
        }
        "timer.start" | "timer.stop" => {
            const WANT: &str = "ADDR[, offcpu=ADDR, tid=N]";
            let (t, clock) = match args[..] {
                [t] => (t, Clock::Cycles),
                [t, table, tid] => (t, offcpu_clock(table, tid).ok_or_else(|| bad(WANT))?),
                _ => return Err(bad(WANT)),
            };
            let timer = number(t).ok_or(ParseErrorKind::BadOperand(t.to_string()))?;
            Op::Timer(if op == "timer.start" {
                TimerOp::Start { timer, clock }
            } else {
                TimerOp::Stop { timer, clock }
            })
        }
        "timer.tailcall" => {
            const WANT: &str = "ADDR[, offcpu=ADDR, tid=N], tails=ADDR, sp=rsp|rbp[+-N]";
            let (t, clock, tails, sp) = match args[..] {
                [t, tails, sp] => (t, Some(Clock::Cycles), tails, sp),
                [t, table, tid, tails, sp] => (t, offcpu_clock(table, tid), tails, sp),
                _ => return Err(bad(WANT)),
            };
            let clock = clock.ok_or_else(|| bad(WANT))?;
            let timer = number(t).ok_or_else(|| bad(WANT))?;
            let tails = keyed(tails, "tails").ok_or_else(|| bad(WANT))?;
            let stack = sp_at(sp).ok_or_else(|| bad(WANT))?;
            Op::Timer(TimerOp::TailCall { timer, clock, tails, stack })
        }
        "timer.switch" => {
            const WANT: &str = "out=ADDR, offcpu=ADDR, pid=N";
            let [out, table, pid] = args[..] else { return Err(bad(WANT)) };
            let out = keyed(out, "out").ok_or_else(|| bad(WANT))?;
            let table = keyed(table, "offcpu").ok_or_else(|| bad(WANT))?;
            let pid =
                keyed(pid, "pid").and_then(|p| u32::try_from(p).ok()).ok_or_else(|| bad(WANT))?;
            Op::Timer(TimerOp::Switch { out, table, pid })
        }
        "timer.tailreturn" => {
            const WANT: &str = "tails=ADDR, sp=rsp|rbp[+-N]";
            let [tails, sp] = args[..] else { return Err(bad(WANT)) };
            let tails = keyed(tails, "tails").ok_or_else(|| bad(WANT))?;
            let stack = sp_at(sp).ok_or_else(|| bad(WANT))?;
            Op::Timer(TimerOp::TailReturn { tails, stack })
        }
        other => return Err(ParseErrorKind::UnknownOp(other.to_string())),
    })
}

/// The operands of a line: split at commas outside parentheses, trimmed.
fn operands(rest: &str) -> Vec<&str> {
    if rest.is_empty() {
        return Vec::new();
    }
    let mut out = Vec::new();
    let (mut depth, mut start) = (0i32, 0);
    for (k, c) in rest.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(rest[start..k].trim());
                start = k + 1;
            }
            _ => {}
        }
    }
    out.push(rest[start..].trim());
    out
}

/// `read(%p, LEN)`, `read(%p+D, LEN)` or `read(%p-D, LEN)`, or the same with `str`, `uread`
/// or `ustr` (see [`ReadKind`]).
fn mem_read(p: &mut Program, s: &str) -> Result<MemRead, ParseErrorKind> {
    let bad = || ParseErrorKind::BadOperand(s.to_string());
    let (kind, rest) = ReadKind::ALL
        .iter()
        .find_map(|k| Some((*k, s.strip_prefix(k.name())?.strip_prefix('(')?)))
        .ok_or_else(bad)?;
    let inner = rest.strip_suffix(')').ok_or_else(bad)?;
    let (at, len) = inner.split_once(',').ok_or_else(bad)?;
    let len = number(len.trim()).and_then(|n| u16::try_from(n).ok()).ok_or_else(bad)?;
    // The address is written as a memory operand's inside: `%p+16`.
    match addr(p, &format!("[{}]", at.trim())).map_err(|_| bad())? {
        Addr::Based { base, disp } => Ok(MemRead { base, disp, len, kind }),
        Addr::Abs(_) | Addr::PerThread(_) => Err(bad()),
    }
}

fn is_ident(s: &str) -> bool {
    !s.is_empty()
        && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.')
        && !s.starts_with(|c: char| c.is_ascii_digit())
}

fn number(s: &str) -> Option<u64> {
    if let Some(h) = s.strip_prefix("0x") {
        u64::from_str_radix(&h.replace('_', ""), 16).ok()
    } else if let Some(n) = s.strip_prefix('-') {
        n.parse::<u64>().ok().filter(|v| *v <= 1 << 63).map(|v| v.wrapping_neg())
    } else {
        s.parse().ok()
    }
}

/// `offcpu=ADDR, tid=N`: an off-CPU clock.
fn offcpu_clock(table: &str, tid: &str) -> Option<Clock> {
    let table = keyed(table, "offcpu")?;
    let tid = u32::try_from(keyed(tid, "tid")?).ok()?;
    Some(Clock::OffCpu { table, tid })
}

/// A timer op's clock as text: nothing for cycles.
fn clock_text(c: Clock) -> String {
    match c {
        Clock::Cycles => String::new(),
        Clock::OffCpu { table, tid } => format!(", offcpu={table:#x}, tid={tid:#x}"),
    }
}

fn keyed(s: &str, key: &str) -> Option<u64> {
    let (k, v) = s.split_once('=')?;
    if k.trim() != key {
        return None;
    }
    number(v.trim())
}

fn vreg(p: &mut Program, s: &str) -> Result<VReg, ParseErrorKind> {
    match s.strip_prefix('%') {
        Some(n) if is_ident(n) => Ok(p.vreg(n)),
        _ => Err(ParseErrorKind::BadOperand(s.to_string())),
    }
}

fn label(p: &mut Program, s: &str) -> Result<Label, ParseErrorKind> {
    if is_ident(s) && Gpr::from_name(s).is_none() {
        Ok(p.label(s))
    } else {
        Err(ParseErrorKind::BadOperand(s.to_string()))
    }
}

fn src(p: &mut Program, s: &str) -> Result<Src, ParseErrorKind> {
    if s.starts_with('%') {
        return Ok(Src::Reg(vreg(p, s)?));
    }
    number(s).map(Src::Imm).ok_or(ParseErrorKind::BadOperand(s.to_string()))
}

fn addr(p: &mut Program, s: &str) -> Result<Addr, ParseErrorKind> {
    let bad = || ParseErrorKind::BadOperand(s.to_string());
    let inner = s.strip_prefix('[').and_then(|r| r.strip_suffix(']')).ok_or_else(bad)?.trim();
    // The running thread's own word: `[gs:16]`.
    if let Some(d) = inner.strip_prefix("gs:") {
        let d = number(d.trim()).and_then(|n| i32::try_from(n as i64).ok()).ok_or_else(bad)?;
        return Ok(Addr::PerThread(d));
    }
    let (base, disp) = match inner.find(['+', '-']) {
        Some(k) => {
            let d = inner[k + 1..].trim();
            let d = i64::try_from(number(d).ok_or_else(bad)?).map_err(|_| bad())?;
            let d = if inner.as_bytes()[k] == b'-' { -d } else { d };
            (inner[..k].trim(), i32::try_from(d).map_err(|_| bad())?)
        }
        None => (inner, 0),
    };
    if !base.starts_with('%') {
        // An absolute address, perhaps written as a base and an offset (`[0x7000+8]`).
        let at = number(base).ok_or_else(bad)?;
        return Ok(Addr::Abs(at.wrapping_add(disp as i64 as u64)));
    }
    Ok(Addr::Based { base: vreg(p, base)?, disp })
}

fn sp_at(s: &str) -> Option<SpAt> {
    let (k, v) = s.split_once('=')?;
    if k.trim() != "sp" {
        return None;
    }
    let v = v.trim();
    let (base, rest) = if let Some(r) = v.strip_prefix("rsp") {
        (SpBase::Rsp, r)
    } else {
        (SpBase::Rbp, v.strip_prefix("rbp")?)
    };
    let disp = if rest.is_empty() {
        0
    } else if let Some(n) = rest.strip_prefix('+') {
        i32::try_from(number(n)?).ok()?
    } else {
        -i32::try_from(number(rest.strip_prefix('-')?)?).ok()?
    };
    Some(SpAt { base, disp })
}

/// The canonical text of a program: labels flush left, ops indented by four spaces.
pub fn print(p: &Program) -> String {
    let mut out = String::new();
    for op in &p.ops {
        if let Op::Label(l) = op {
            let _ = writeln!(out, "{}:", p.labels[l.0 as usize]);
        } else {
            let _ = writeln!(out, "    {}", op_text(p, op));
        }
    }
    out
}

fn imm(v: u64) -> String {
    let s = v as i64;
    if (0..10).contains(&s) {
        s.to_string()
    } else if (-0x1000..0).contains(&s) {
        format!("-{}", s.unsigned_abs())
    } else {
        format!("{v:#x}")
    }
}

fn op_text(p: &Program, op: &Op) -> String {
    let v = |r: &VReg| format!("%{}", p.vregs[r.0 as usize]);
    let s = |x: &Src| match x {
        Src::Reg(r) => v(r),
        Src::Imm(i) => imm(*i),
    };
    let a = |x: &Addr| match *x {
        Addr::Abs(at) => format!("[{at:#x}]"),
        Addr::PerThread(d) => format!("[gs:{d}]"),
        Addr::Based { base, disp: 0 } => format!("[{}]", v(&base)),
        Addr::Based { base, disp } if disp < 0 => format!("[{}-{}]", v(&base), disp.unsigned_abs()),
        Addr::Based { base, disp } => format!("[{}+{}]", v(&base), imm(disp as u64)),
    };
    let l = |x: &Label| p.labels[x.0 as usize].clone();
    let sp = |at: &SpAt| {
        let base = if at.base == SpBase::Rsp { "rsp" } else { "rbp" };
        match at.disp {
            0 => format!("sp={base}"),
            d if d < 0 => format!("sp={base}-{}", d.unsigned_abs()),
            d => format!("sp={base}+{d}"),
        }
    };
    match op {
        Op::Label(x) => format!("{}:", l(x)),
        Op::Thread { dst } => format!("thread {}", v(dst)),
        Op::Tid { dst } => format!("tid {}", v(dst)),
        Op::Reg { dst, reg } => format!("reg {}, {}", v(dst), reg.name()),
        Op::Mov { dst, src } => format!("mov {}, {}", v(dst), s(src)),
        Op::Load { dst, width, addr } => format!("load{} {}, {}", width.bits(), v(dst), a(addr)),
        Op::Store { width, addr, src } => format!("store{} {}, {}", width.bits(), a(addr), s(src)),
        Op::Add { dst, src } => format!("add {}, {}", v(dst), s(src)),
        Op::AddMem { addr, src, atomic } => {
            format!("{}add {}, {}", if *atomic { "atomic " } else { "" }, a(addr), s(src))
        }
        Op::Rdtsc { dst } => format!("rdtsc {}", v(dst)),
        Op::Cpu { dst } => format!("cpu {}", v(dst)),
        Op::Branch { cond, a: x, b, target } => {
            format!("br.{} {}, {}, {}", cond.name(), v(x), s(b), l(target))
        }
        Op::Jump { target } => format!("jmp {}", l(target)),
        Op::Cold => "cold".to_string(),
        Op::Emit { ring, shape, stream, values }
        | Op::EmitThread { rings: ring, shape, stream, values, .. } => {
            let (name, key, per) = match op {
                Op::EmitThread { per: Rings::Cpu(n), timed: true, .. } => {
                    ("emit.cpu", "rings", format!(", cpus={n}"))
                }
                Op::EmitThread { per: Rings::Cpu(n), timed: false, .. } => {
                    ("emit.cpu.untimed", "rings", format!(", cpus={n}"))
                }
                Op::EmitThread { timed: true, .. } => ("emit.thread", "rings", String::new()),
                Op::EmitThread { timed: false, .. } => {
                    ("emit.thread.untimed", "rings", String::new())
                }
                _ => ("emit", "ring", String::new()),
            };
            let (slots, slot) = (shape.slots, shape.slot_len);
            let mut t =
                format!("{name} {key}={ring:#x}{per}, slots={slots}, slot={slot}, stream={stream}");
            for x in values {
                let _ = write!(t, ", {}", v(x));
            }
            if let Op::EmitThread { reads, .. } = op {
                for r in reads {
                    // Displacement and length in decimal: offsets into a structure.
                    let at = match r.disp {
                        0 => v(&r.base),
                        d if d < 0 => format!("{}-{}", v(&r.base), d.unsigned_abs()),
                        d => format!("{}+{d}", v(&r.base)),
                    };
                    let _ = write!(t, ", {}({at}, {})", r.kind.name(), r.len);
                }
            }
            t
        }
        Op::Call { target, args, ret } => {
            let mut t = String::from("call ");
            if let Some(r) = ret {
                let _ = write!(t, "{}, ", v(r));
            }
            let _ = write!(t, "{target:#x}");
            for x in args {
                let _ = write!(t, ", {}", s(x));
            }
            t
        }
        Op::Timer(TimerOp::Start { timer, clock }) => {
            format!("timer.start {timer:#x}{}", clock_text(*clock))
        }
        Op::Timer(TimerOp::Stop { timer, clock }) => {
            format!("timer.stop {timer:#x}{}", clock_text(*clock))
        }
        Op::Timer(TimerOp::TailCall { timer, clock, tails, stack }) => {
            format!(
                "timer.tailcall {timer:#x}{}, tails={tails:#x}, {}",
                clock_text(*clock),
                sp(stack)
            )
        }
        Op::Timer(TimerOp::TailReturn { tails, stack }) => {
            format!("timer.tailreturn tails={tails:#x}, {}", sp(stack))
        }
        Op::Timer(TimerOp::Switch { out, table, pid }) => {
            format!("timer.switch out={out:#x}, offcpu={table:#x}, pid={pid:#x}")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const EVERY_OP: &str = "    thread %t
    br.ne %t, 0x7f0012345000, out
    reg %fd, rdi
    reg %sp, rsp
    mov %n, 0x10
    mov %m, %n
    load8 %f, [0x7000]
    load16 %g, [%t+0x2f0]
    load32 %h, [%t-8]
    load64 %i, [%t]
    store8 [0x7000], 1
    store64 [%t+0x10], %fd
    add %n, -8
    add [0x7008], %n
    atomic add [0x7010], 1
    rdtsc %now
    cpu %c
    br.geu %fd, 3, out
    br.lt %n, %m, out
    jmp out
    emit ring=0x90000, slots=256, slot=32, stream=7, %fd
    emit.thread rings=0xc0000, slots=64, slot=64, stream=8, %now, %fd
    emit.thread rings=0xc0000, slots=64, slot=128, stream=9, %c, read(%t+16, 8), read(%fd, 56), read(%t-8, 1)
    emit.cpu rings=0xd0000, cpus=8, slots=256, slot=128, stream=10, %c, %fd, ustr(%t+16, 32)
    call %r, 0x5000, %fd, 7
    call 0x5008
    timer.start 0x8000
    timer.stop 0x8000
    timer.tailcall 0x8000, tails=0xa000, sp=rsp+8
    timer.tailreturn tails=0xa000, sp=rbp-16
out:
";

    #[test]
    fn every_op_round_trips() {
        let p = parse(EVERY_OP).unwrap();
        assert_eq!(p.ops.len(), 31);
        let text = print(&p);
        assert_eq!(text, EVERY_OP);
        assert_eq!(parse(&text).unwrap(), p);
    }

    #[test]
    fn comments_and_blank_lines_are_dropped() {
        let p = parse("# a counter\n\n  atomic add [0x7000+8], 1   # the count\n").unwrap();
        assert_eq!(print(&p), "    atomic add [0x7008], 1\n");
    }

    #[test]
    fn errors_name_their_line() {
        let cases = [
            ("mov %a, 1\nfrob %a\n", 2, "unknown op \"frob\""),
            ("mov %a, 1\n\nload8 %a\n", 3, "load8 takes %dst, [addr], not \"%a\""),
            ("reg %a, xmm0\n", 1, "bad operand \"xmm0\""),
            ("mov %a, 1\nbr.ne %a, 0, nowhere\n", 2, "label nowhere is never placed"),
            ("x:\nmov %a, 1\nx:\n", 3, "label x placed twice"),
            ("# c\nadd %a, 1\n", 2, "%a is read before it is written"),
            ("mov %a, 1\nemit ring=0x9000, slots=3, stream=1, %a\n", 2, "not a power of two"),
            ("mov %a, 1\nemit ring=0x9000, slots=0x80000000, stream=1, %a\n", 2, "up to"),
            ("mov %a, 1\nemit.thread rings=0x9000, slots=6, stream=1, %a\n", 2, "power of two"),
            ("mov %a, 1\nemit.thread rings=0x9000, slots=0x100000, stream=1, %a\n", 2, "exceed"),
            (
                "mov %a, 1\nemit.cpu rings=0x9000, cpus=1, slots=0x2000000, stream=1, %a\n",
                2,
                "2 GiB",
            ),
            ("emit.thread ring=0x9000, slots=4, stream=1\n", 1, "takes rings=ADDR"),
            ("mov %a, 1\nemit ring=0x9000, slots=4, stream=1, read(%a, 8)\n", 2, "emit takes"),
            ("emit.thread rings=0x9000, slots=4, stream=1, read(0x10, 8)\n", 1, "bad operand"),
            ("emit.cpu rings=0x9000, slots=4, stream=1\n", 1, "cpus=N"),
            (
                "mov %a, 1\nemit.cpu rings=0x9000, cpus=3, slots=4, stream=1, %a\n",
                2,
                "power of two",
            ),
            ("emit.thread rings=0x9000, slots=4, stream=1, read(%a, 8\n", 1, "bad operand"),
            ("mov %a, 1\nemit.thread rings=0x9000, slots=4, stream=1, read(%a, 0)\n", 2, "1 to 64"),
            ("mov %a, 1\nemit.thread rings=0x9000, slots=4, stream=1, read(%a, 65)\n", 2, "1 to"),
            (
                "mov %a, 1\nemit.thread rings=0x9000, slots=4, stream=1, %a, %a, \
                 read(%a+8, 64), read(%a, 9)\n",
                2,
                "emit of 14 words",
            ),
            ("emit.thread rings=0x9000, slots=4, stream=1, read(%a, 8)\n", 1, "%a is read before"),
            ("mov %a, 1\nemit.thread rings=0x9000, slots=4, stream=1, read(%a, 8), %a\n", 2, "bad"),
            ("mov %a, 1\nemit ring=0x9000, slots=4, slot=48, stream=1, %a\n", 2, "slot length 48"),
            ("mov %a, 1\nemit ring=0x9000, slots=4, slot=16, stream=1, %a\n", 2, "from 32 to 128"),
            (
                "mov %a, 1\nemit.thread rings=0x9000, slots=4, slot=256, stream=1\n",
                2,
                "slot length",
            ),
            (
                "mov %a, 1\nemit.thread rings=0x9000, slots=4, slot=32, stream=1, %a, %a\n",
                2,
                "emit of 2 words (a slot of 32 bytes holds 1",
            ),
            ("emit.thread rings=0x9000, slots=4, slot=64\n", 1, "[slot=B,] stream=S"),
            ("mov %a, 1\nemit ring=0x9000, slots=4, slot=8, stream=1, %a\n", 2, "compact slots"),
            (
                "mov %a, 1\nemit.thread rings=0x9000, slots=4, slot=8, stream=1, %a\n",
                2,
                "untimed, in the thread's ring",
            ),
            (
                "mov %a, 1\nemit.thread.untimed rings=0x9000, slots=4, slot=8, stream=1, %a, %a\n",
                2,
                "take one value",
            ),
            (
                "mov %a, 1\nemit.thread.untimed rings=0x9000, slots=4, slot=8, stream=2147483648, \
                 %a\n",
                2,
                "below 2^31",
            ),
            (
                "mov %a, 1\nemit.cpu.untimed rings=0x9000, cpus=2, slots=4, slot=8, stream=1, %a\n",
                2,
                "compact slots",
            ),
            ("atomic mov %a, 1\n", 1, "unknown op \"atomic mov\""),
            ("store8 [%a+zz], 1\n", 1, "bad operand \"[%a+zz]\""),
        ];
        for (text, line, what) in cases {
            let e = parse(text).unwrap_err();
            assert_eq!(e.line, line, "{text:?}: {e}");
            assert!(e.to_string().contains(what), "{text:?}: {e}");
        }
    }

    /// Random programs of every op and operand form print and parse back to themselves.
    #[test]
    fn random_programs_round_trip() {
        use crate::ir::{Addr, Cond, MemRead, Op, Src, TimerOp, Width, MAX_READ};
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move |n: u64| {
            // xorshift64*: deterministic, good enough to pick among choices.
            seed ^= seed >> 12;
            seed ^= seed << 25;
            seed ^= seed >> 27;
            seed.wrapping_mul(0x2545_f491_4f6c_dd1d) % n
        };
        let imms = [0u64, 1, 9, 10, 0x7f, 0xffff_ffff, u64::MAX, (-4096i64) as u64, 1 << 63];
        for _ in 0..200 {
            let mut p = Program::new();
            let v: Vec<VReg> = (0..4).map(|k| p.vreg(&format!("v{k}"))).collect();
            // Labels are made where first used, as the parser numbers them.
            let names = ["l0", "l1", "l2"];
            for r in &v {
                p.push(Op::Mov { dst: *r, src: Src::Imm(imms[next(9) as usize]) });
            }
            for _ in 0..12 {
                let r = v[next(4) as usize];
                let src = if next(2) == 0 { Src::Reg(r) } else { Src::Imm(imms[next(9) as usize]) };
                let addr = if next(2) == 0 {
                    Addr::Abs(imms[next(9) as usize])
                } else if next(8) == 0 {
                    Addr::PerThread(next(4096) as i32 * 8)
                } else {
                    Addr::Based { base: r, disp: next(8192) as i32 - 4096 }
                };
                let width = [Width::W8, Width::W16, Width::W32, Width::W64][next(4) as usize];
                let sp = SpAt {
                    base: if next(2) == 0 { SpBase::Rsp } else { SpBase::Rbp },
                    disp: next(512) as i32 - 256,
                };
                let op = match next(12) {
                    0 if next(2) == 0 => Op::Thread { dst: r },
                    0 => Op::Cpu { dst: r },
                    1 => Op::Reg { dst: r, reg: Gpr::ALL[next(16) as usize] },
                    2 => Op::Load { dst: r, width, addr },
                    3 => Op::Store { width, addr, src },
                    4 => Op::Add { dst: r, src },
                    5 => Op::AddMem { addr, src, atomic: next(2) == 0 },
                    6 => Op::Rdtsc { dst: r },
                    7 => Op::Branch {
                        cond: Cond::ALL[next(10) as usize],
                        a: r,
                        b: src,
                        target: p.label(names[next(3) as usize]),
                    },
                    8 => Op::Jump { target: p.label(names[next(3) as usize]) },
                    9 if next(2) == 0 => Op::Emit {
                        ring: imms[next(9) as usize],
                        shape: ring::Shape { slots: 1 << next(20), slot_len: 64 << next(2) },
                        stream: next(1 << 32) as u32,
                        values: v[..next(5) as usize].to_vec(),
                    },
                    9 => Op::EmitThread {
                        rings: imms[next(9) as usize],
                        per: if next(2) == 0 { Rings::Thread } else { Rings::Cpu(1 << next(6)) },
                        shape: ring::Shape { slots: 1 << next(12), slot_len: 128 },
                        stream: next(1 << 32) as u32,
                        values: v[..next(5) as usize].to_vec(),
                        // Up to three reads of a word or less (2 words each): 4 + 6 fit.
                        reads: (0..next(4))
                            .map(|_| MemRead {
                                base: v[next(4) as usize],
                                disp: next(8192) as i32 - 4096,
                                len: [1, 8, MAX_READ / 8][next(3) as usize],
                                kind: ReadKind::ALL[next(4) as usize],
                            })
                            .collect(),
                        timed: next(2) == 0,
                    },
                    10 => Op::Call {
                        target: imms[next(9) as usize],
                        args: vec![src; next(7) as usize],
                        ret: (next(2) == 0).then_some(r),
                    },
                    _ => Op::Timer({
                        let clock = match next(2) {
                            0 => Clock::Cycles,
                            _ => Clock::OffCpu { table: 0x7d00_0000_0000, tid: next(4096) as u32 },
                        };
                        match next(5) {
                            4 => TimerOp::Switch {
                                out: 0x7d00_0000_0000,
                                table: 0x7d00_0010_0000,
                                pid: next(4096) as u32,
                            },
                            0 => TimerOp::Start { timer: imms[next(9) as usize], clock },
                            1 => TimerOp::Stop { timer: imms[next(9) as usize], clock },
                            2 => {
                                TimerOp::TailCall { timer: 0x8000, clock, tails: 0xa000, stack: sp }
                            }
                            _ => TimerOp::TailReturn { tails: 0xa000, stack: sp },
                        }
                    }),
                };
                p.push(op);
            }
            for n in names {
                let x = p.label(n);
                p.push(Op::Label(x));
            }
            assert_eq!(p.check(), Ok(()));
            let text = print(&p);
            assert_eq!(parse(&text).as_ref(), Ok(&p), "{text}");
        }
    }
}
