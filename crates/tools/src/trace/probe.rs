//! The probe lines of `kerf trace`: a point, what to capture there, an optional filter and an
//! optional stream, parsed before anything is done to a target.
//!
//! ```text
//! PROBE    := POINT [ '{' CAPTURE (',' CAPTURE)* '}' ] [ 'if' FILTER ] [ 'stream=' NAME ]
//! CAPTURE  := [NAME '='] EXPR
//! EXPR     := REG | argN | ret | tid | cpu
//!           | u8|u16|u32|u64|i8|i16|i32|i64 '(' ADDR ')'       memory at ADDR
//!           | str '(' ADDR [',' LEN] ')' | ustr '(' ADDR [',' LEN] ')'
//! ADDR     := (REG | argN) [('+'|'-') INT]
//! FILTER   := OR;  OR := AND ('||' AND)*;  AND := NOT ('&&' NOT)*
//! NOT      := '!' NOT | '(' FILTER ')' | OPERAND CMP OPERAND
//! CMP      := == | != | < | <= | > | >=
//! OPERAND  := a capture's NAME | REG | argN | ret | tid | cpu | INT
//! ```
//! POINT is any spec `kerf count` takes (`libc:open`, `f+0x12`, `f@exits`, `f@blocks`). A
//! filter compares values held in registers (registers, arguments, the return value, the
//! thread, the CPU), never memory: it runs before anything is read or written. Comparisons
//! are unsigned unless a negative number takes part.

use kerf_arch::x86_64::Gpr;
use std::fmt;

/// The longest string a capture reads (bytes, its NUL included).
pub const MAX_STR: u16 = 64;
/// A string capture's length when none is given.
pub const DEFAULT_STR: u16 = 32;
/// Argument registers of the x86-64 C calling convention (user space and the kernel alike).
pub const ARGS: [Gpr; 6] = [Gpr::Rdi, Gpr::Rsi, Gpr::Rdx, Gpr::Rcx, Gpr::R8, Gpr::R9];

/// A value held in a register at the point.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RegValue {
    /// A general register (`arg0`..`arg5` and `ret` resolve to one).
    Reg(Gpr),
    /// The thread's id.
    Tid,
    /// The CPU the event ran on.
    Cpu,
}

/// How memory at an address is read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MemKind {
    /// An integer of `bytes` bytes (1, 2, 4, 8), signed or not.
    Int { bytes: u8, signed: bool },
    /// A NUL-terminated string of at most `max` bytes; `user`: a user address read from the
    /// kernel (`ustr`).
    Str { max: u16, user: bool },
}

/// What one capture takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Expr {
    Reg(RegValue),
    /// Memory at `base + disp`.
    Mem {
        base: Gpr,
        disp: i32,
        kind: MemKind,
    },
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Capture {
    pub name: String,
    pub expr: Expr,
    /// Whether it came from `ret` (only at exits).
    pub ret: bool,
    /// Whether it names a register itself (`rdi`, not `arg0`): shown in hex, as an address.
    pub hex: bool,
}

/// A comparison.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cmp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

/// One side of a comparison.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operand {
    Reg(RegValue),
    Int(i64),
}

/// A filter.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Filter {
    Cmp(Operand, Cmp, Operand),
    And(Box<Filter>, Box<Filter>),
    Or(Box<Filter>, Box<Filter>),
    Not(Box<Filter>),
}

/// One parsed probe line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProbeLine {
    pub text: String,
    /// The point, as `kerf count` takes it.
    pub point: String,
    pub captures: Vec<Capture>,
    pub filter: Option<Filter>,
    /// The stream (`None`: the module of the point, or `kernel`).
    pub stream: Option<String>,
    /// Whether `ret` was used (the point must be `@exits`).
    pub uses_ret: bool,
}

/// What is wrong with a probe line, and where.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProbeError {
    pub text: String,
    pub at: usize,
    pub what: String,
}

impl fmt::Display for ProbeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "probe '{}': {} (at column {})", self.text, self.what, self.at + 1)
    }
}

impl std::error::Error for ProbeError {}

/// Parse one probe line.
pub fn parse(text: &str) -> Result<ProbeLine, ProbeError> {
    let mut p = Parser { s: text, at: 0 };
    p.line()
}

struct Parser<'a> {
    s: &'a str,
    at: usize,
}

impl<'a> Parser<'a> {
    fn err<T>(&self, what: impl Into<String>) -> Result<T, ProbeError> {
        Err(ProbeError { text: self.s.to_string(), at: self.at, what: what.into() })
    }

    fn rest(&self) -> &'a str {
        &self.s[self.at..]
    }

    fn skip_ws(&mut self) {
        let r = self.rest();
        self.at += r.len() - r.trim_start().len();
    }

    fn eat(&mut self, tok: &str) -> bool {
        self.skip_ws();
        if self.rest().starts_with(tok) {
            self.at += tok.len();
            true
        } else {
            false
        }
    }

    fn expect(&mut self, tok: &str) -> Result<(), ProbeError> {
        if self.eat(tok) {
            Ok(())
        } else {
            self.err(format!("expected '{tok}'"))
        }
    }

    /// A word: letters, digits, `_`.
    fn word(&mut self) -> Option<&'a str> {
        self.skip_ws();
        let r = self.rest();
        let n = r.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(r.len());
        if n == 0 {
            return None;
        }
        self.at += n;
        Some(&r[..n])
    }

    fn int(&mut self) -> Result<i64, ProbeError> {
        self.skip_ws();
        let r = self.rest();
        let neg = r.starts_with('-');
        let body = if neg { &r[1..] } else { r };
        let n = body.find(|c: char| !(c.is_ascii_alphanumeric())).unwrap_or(body.len());
        let digits = &body[..n];
        let v = if let Some(h) = digits.strip_prefix("0x") {
            u64::from_str_radix(h, 16).ok()
        } else {
            digits.parse::<u64>().ok()
        };
        let Some(v) = v else { return self.err("expected a number") };
        self.at += n + usize::from(neg);
        Ok(if neg { (v as i64).wrapping_neg() } else { v as i64 })
    }

    fn line(&mut self) -> Result<ProbeLine, ProbeError> {
        // The point runs to the first space or '{'.
        self.skip_ws();
        let r = self.rest();
        let n = r.find(|c: char| c.is_whitespace() || c == '{').unwrap_or(r.len());
        if n == 0 {
            return self.err("expected a point (FUNC, MODULE:FUNC, FUNC@exits, ...)");
        }
        let point = r[..n].to_string();
        self.at += n;
        let exits = point.ends_with("@exits");
        let mut line = ProbeLine {
            text: self.s.to_string(),
            point,
            captures: Vec::new(),
            filter: None,
            stream: None,
            uses_ret: false,
        };
        if self.eat("{") && !self.eat("}") {
            loop {
                let c = self.capture(line.captures.len())?;
                if line.captures.iter().any(|o| o.name == c.name) {
                    return self.err(format!("two captures are called '{}'", c.name));
                }
                line.captures.push(c);
                if self.eat("}") {
                    break;
                }
                self.expect(",")?;
            }
        }
        loop {
            self.skip_ws();
            if self.rest().is_empty() {
                break;
            }
            if self.rest().starts_with("stream=") {
                self.at += "stream=".len();
                let Some(w) = self.word() else { return self.err("expected a stream name") };
                line.stream = Some(w.to_string());
            } else if self.rest().starts_with("if ") || self.rest().starts_with("if(") {
                if line.filter.is_some() {
                    return self.err("a probe takes one filter (combine with && and ||)");
                }
                self.at += 2;
                line.filter = Some(self.or(&line.captures)?);
            } else {
                return self.err("expected 'if FILTER', 'stream=NAME' or the end");
            }
        }
        line.uses_ret = line.captures.iter().any(|c| c.ret) || uses_ret(line.filter.as_ref());
        if line.uses_ret && !exits {
            return self.err("'ret' is the return value: only at FUNC@exits");
        }
        Ok(line)
    }

    fn capture(&mut self, k: usize) -> Result<Capture, ProbeError> {
        self.skip_ws();
        let start = self.at;
        // NAME '=' EXPR, or EXPR (named after its text).
        let mut name = None;
        if let Some(w) = self.word() {
            if self.eat("=") && !self.rest().starts_with('=') {
                name = Some(w.to_string());
            } else {
                self.at = start;
            }
        }
        let e_start = self.at;
        let (expr, ret) = self.expr()?;
        let text = self.s[e_start..self.at].trim().to_string();
        let hex = Gpr::from_name(&text).is_some();
        let name = name.unwrap_or(if text.is_empty() { format!("v{k}") } else { text });
        Ok(Capture { name, expr, ret, hex })
    }

    /// A register value: REG, argN, ret, tid, cpu; with whether it was `ret`.
    fn reg_value(&mut self, w: &str) -> Result<Option<(RegValue, bool)>, ProbeError> {
        Ok(Some(match w {
            "ret" => (RegValue::Reg(Gpr::Rax), true),
            "tid" => (RegValue::Tid, false),
            "cpu" => (RegValue::Cpu, false),
            _ => {
                if let Some(n) = w.strip_prefix("arg") {
                    match n.parse::<usize>().ok().and_then(|n| ARGS.get(n)) {
                        Some(r) => (RegValue::Reg(*r), false),
                        None => return self.err(format!("no {w}: arguments are arg0 to arg5")),
                    }
                } else if let Some(r) = Gpr::from_name(w) {
                    (RegValue::Reg(r), false)
                } else {
                    return Ok(None);
                }
            }
        }))
    }

    fn expr(&mut self) -> Result<(Expr, bool), ProbeError> {
        let Some(w) = self.word() else { return self.err("expected a capture") };
        let int = |bytes, signed| MemKind::Int { bytes, signed };
        let kind = match w {
            "u8" => int(1, false),
            "u16" => int(2, false),
            "u32" => int(4, false),
            "u64" => int(8, false),
            "i8" => int(1, true),
            "i16" => int(2, true),
            "i32" => int(4, true),
            "i64" => int(8, true),
            "str" => MemKind::Str { max: DEFAULT_STR, user: false },
            "ustr" => MemKind::Str { max: DEFAULT_STR, user: true },
            _ => {
                return match self.reg_value(w)? {
                    Some((r, ret)) => Ok((Expr::Reg(r), ret)),
                    None => self.err(format!("unknown capture '{w}'")),
                }
            }
        };
        self.expect("(")?;
        let Some(b) = self.word() else { return self.err("expected a register or argN") };
        let (base, ret) = match self.reg_value(b)? {
            Some((RegValue::Reg(r), ret)) => (r, ret),
            _ => return self.err(format!("'{b}' is not a register or argument")),
        };
        let mut disp = 0i64;
        if self.eat("+") {
            disp = self.int()?;
        } else if self.eat("-") {
            disp = -self.int()?;
        }
        let Ok(disp) = i32::try_from(disp) else { return self.err("offset out of range") };
        let mut kind = kind;
        if let MemKind::Str { user, .. } = kind {
            if self.eat(",") {
                let n = self.int()?;
                if !(1..=i64::from(MAX_STR)).contains(&n) {
                    return self.err(format!("a string capture reads 1 to {MAX_STR} bytes"));
                }
                kind = MemKind::Str { max: n as u16, user };
            }
        }
        self.expect(")")?;
        Ok((Expr::Mem { base, disp, kind }, ret))
    }

    fn or(&mut self, caps: &[Capture]) -> Result<Filter, ProbeError> {
        let mut f = self.and(caps)?;
        while self.eat("||") {
            f = Filter::Or(Box::new(f), Box::new(self.and(caps)?));
        }
        Ok(f)
    }

    fn and(&mut self, caps: &[Capture]) -> Result<Filter, ProbeError> {
        let mut f = self.not(caps)?;
        while self.eat("&&") {
            f = Filter::And(Box::new(f), Box::new(self.not(caps)?));
        }
        Ok(f)
    }

    fn not(&mut self, caps: &[Capture]) -> Result<Filter, ProbeError> {
        if self.eat("!") && !self.rest().starts_with('=') {
            return Ok(Filter::Not(Box::new(self.not(caps)?)));
        }
        if self.eat("(") {
            let f = self.or(caps)?;
            self.expect(")")?;
            return Ok(f);
        }
        let a = self.operand(caps)?;
        let cmp = if self.eat("==") {
            Cmp::Eq
        } else if self.eat("!=") {
            Cmp::Ne
        } else if self.eat("<=") {
            Cmp::Le
        } else if self.eat(">=") {
            Cmp::Ge
        } else if self.eat("<") {
            Cmp::Lt
        } else if self.eat(">") {
            Cmp::Gt
        } else {
            return self.err("expected a comparison (==, !=, <, <=, >, >=)");
        };
        let b = self.operand(caps)?;
        Ok(Filter::Cmp(a, cmp, b))
    }

    fn operand(&mut self, caps: &[Capture]) -> Result<Operand, ProbeError> {
        self.skip_ws();
        if self.rest().starts_with(|c: char| c.is_ascii_digit() || c == '-') {
            return Ok(Operand::Int(self.int()?));
        }
        let Some(w) = self.word() else { return self.err("expected a value to compare") };
        if let Some(c) = caps.iter().find(|c| c.name == w) {
            return match c.expr {
                Expr::Reg(r) => Ok(Operand::Reg(r)),
                Expr::Mem { .. } => self.err(format!(
                    "'{w}' is read from memory: filters compare values in registers only"
                )),
            };
        }
        match self.reg_value(w)? {
            Some((r, _)) => Ok(Operand::Reg(r)),
            None => self.err(format!("unknown value '{w}'")),
        }
    }
}

/// Whether a filter reads the return value.
fn uses_ret(f: Option<&Filter>) -> bool {
    let Some(f) = f else { return false };
    match f {
        Filter::Cmp(a, _, b) => [a, b].iter().any(|o| **o == Operand::Reg(RegValue::Reg(Gpr::Rax))),
        Filter::And(a, b) | Filter::Or(a, b) => uses_ret(Some(a)) || uses_ret(Some(b)),
        Filter::Not(a) => uses_ret(Some(a)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reg(r: Gpr) -> Expr {
        Expr::Reg(RegValue::Reg(r))
    }

    #[test]
    fn the_issue_examples_parse() {
        let p = parse("libc:open {path=str(arg0), flags=arg1}").unwrap();
        assert_eq!(p.point, "libc:open");
        assert_eq!(p.captures.len(), 2);
        assert_eq!(p.captures[0].name, "path");
        assert_eq!(
            p.captures[0].expr,
            Expr::Mem {
                base: Gpr::Rdi,
                disp: 0,
                kind: MemKind::Str { max: DEFAULT_STR, user: false }
            }
        );
        assert_eq!(p.captures[1].expr, reg(Gpr::Rsi));
        let p = parse("libc:open@exits {ret}").unwrap();
        assert_eq!((p.captures[0].name.as_str(), p.uses_ret), ("ret", true));
        let p = parse("do_sys_openat2 {dfd=arg0, name=ustr(arg1)} if tid == 1234").unwrap();
        assert_eq!(
            p.filter,
            Some(Filter::Cmp(Operand::Reg(RegValue::Tid), Cmp::Eq, Operand::Int(1234)))
        );
        let p = parse("vfs_read+0x3c {rcx, u64(rdi+0x10)} stream=vfs").unwrap();
        assert_eq!(p.stream.as_deref(), Some("vfs"));
        assert_eq!(p.captures[1].name, "u64(rdi+0x10)");
        assert_eq!(
            p.captures[1].expr,
            Expr::Mem { base: Gpr::Rdi, disp: 16, kind: MemKind::Int { bytes: 8, signed: false } }
        );
        let p = parse("app:parse@blocks").unwrap();
        assert!(p.captures.is_empty() && p.filter.is_none());
    }

    #[test]
    fn filters_combine_with_precedence() {
        let p = parse("f {a=arg0, b=arg1} if a > 3 && !(b == 0) || cpu == 1").unwrap();
        let a = Operand::Reg(RegValue::Reg(Gpr::Rdi));
        let b = Operand::Reg(RegValue::Reg(Gpr::Rsi));
        let want = Filter::Or(
            Box::new(Filter::And(
                Box::new(Filter::Cmp(a, Cmp::Gt, Operand::Int(3))),
                Box::new(Filter::Not(Box::new(Filter::Cmp(b, Cmp::Eq, Operand::Int(0))))),
            )),
            Box::new(Filter::Cmp(Operand::Reg(RegValue::Cpu), Cmp::Eq, Operand::Int(1))),
        );
        assert_eq!(p.filter, Some(want));
        let p = parse("f if arg2 >= -1").unwrap();
        assert_eq!(
            p.filter,
            Some(Filter::Cmp(Operand::Reg(RegValue::Reg(Gpr::Rdx)), Cmp::Ge, Operand::Int(-1)))
        );
    }

    #[test]
    fn bad_lines_say_what_and_where() {
        for (line, what) in [
            ("", "expected a point"),
            ("f {arg6}", "arguments are arg0 to arg5"),
            ("f {ret}", "only at FUNC@exits"),
            ("f {x=u32(arg0)} if x == 1", "filters compare values in registers only"),
            ("f {bogus}", "unknown capture 'bogus'"),
            ("f {str(arg0, 500)}", "1 to 64 bytes"),
            ("f {a=arg0, a=arg1}", "two captures are called 'a'"),
            ("f if arg0 =< 1", "expected a comparison"),
            ("f junk", "expected 'if FILTER'"),
            ("f {u8(rip)}", "not a register"),
        ] {
            let e = parse(line).expect_err(line);
            assert!(e.to_string().contains(what), "{line}: {e}");
        }
    }
}
