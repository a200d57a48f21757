//! Instrumentation point specs as users write them, and their resolution against analysed
//! modules: `[MODULE:]SYMBOL[+OFF]`, `MODULE:0xADDR`, globs such as `libc:*open*`, and
//! `FUNC@blocks` (every basic block of a function), `FUNC@exits` (every return and tail call).

use kerf_analysis::cfg::{FuncId, Terminator};
use kerf_analysis::Analysis;
use kerf_arch::x86_64::Scanner;
use kerf_arch::ImageAddr;
use std::fmt;

/// One parsed spec.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Spec {
    pub text: String,
    /// Module name prefix (`libc` matches `libc.so.6`); `None` searches every module.
    pub module: Option<String>,
    pub what: SpecWhat,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SpecWhat {
    /// A symbol or glob, at an offset from its entry.
    Symbol { pattern: String, offset: u64, blocks: bool, exits: bool },
    /// An image address inside a module.
    Addr(u64),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SpecError {
    Syntax {
        spec: String,
        detail: String,
    },
    NoModule {
        spec: String,
        module: String,
        modules: Vec<String>,
    },
    NoSymbol {
        spec: String,
        close: Vec<String>,
    },
    NotBoundary {
        spec: String,
        addr: u64,
        before: u64,
        after: u64,
    },
    NotInFunction {
        spec: String,
        addr: u64,
    },
    /// The address is in code no splice may touch (a signal trampoline, ...).
    NeverSpliced {
        spec: String,
        why: String,
    },
}

impl fmt::Display for SpecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SpecError::Syntax { spec, detail } => write!(f, "bad spec '{spec}': {detail}"),
            SpecError::NoModule { spec, module, modules } => write!(
                f,
                "{spec}: no module named '{module}' is loaded (modules: {})",
                modules.join(", ")
            ),
            SpecError::NoSymbol { spec, close } if close.is_empty() => {
                write!(f, "{spec}: no such function")
            }
            SpecError::NoSymbol { spec, close } => {
                write!(f, "{spec}: no such function; close: {}", close.join(", "))
            }
            SpecError::NotBoundary { spec, addr, before, after } => write!(
                f,
                "{spec}: {addr:#x} is not an instruction boundary (nearest: {before:#x}, {after:#x})"
            ),
            SpecError::NotInFunction { spec, addr } => {
                write!(f, "{spec}: {addr:#x} is not in any analysed function's code")
            }
            SpecError::NeverSpliced { spec, why } => write!(f, "{spec}: {why}"),
        }
    }
}

impl std::error::Error for SpecError {}

fn parse_num(s: &str) -> Option<u64> {
    match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(h) => u64::from_str_radix(h, 16).ok(),
        None => s.parse().ok(),
    }
}

/// Parse one spec.
pub fn parse(text: &str) -> Result<Spec, SpecError> {
    let bad = |detail: &str| SpecError::Syntax { spec: text.to_string(), detail: detail.into() };
    let (module, rest) = match text.split_once(':') {
        Some((m, r)) if !m.is_empty() => (Some(m.to_string()), r),
        Some(_) => return Err(bad("empty module name before ':'")),
        None => (None, text),
    };
    if rest.is_empty() {
        return Err(bad("nothing after the module name"));
    }
    if rest.starts_with("0x") {
        let a = parse_num(rest).ok_or_else(|| bad("bad address"))?;
        if module.is_none() {
            return Err(bad("an address needs a module: MODULE:0xADDR"));
        }
        return Ok(Spec { text: text.to_string(), module, what: SpecWhat::Addr(a) });
    }
    let (rest, blocks, exits) = match (rest.strip_suffix("@blocks"), rest.strip_suffix("@exits")) {
        (Some(r), _) => (r, true, false),
        (_, Some(r)) => (r, false, true),
        _ => (rest, false, false),
    };
    let (pattern, offset) = match rest.rsplit_once('+') {
        Some((p, o)) => (p, parse_num(o).ok_or_else(|| bad("bad offset after '+'"))?),
        None => (rest, 0),
    };
    if pattern.is_empty() {
        return Err(bad("empty symbol"));
    }
    if (blocks || exits) && offset != 0 {
        return Err(bad("@blocks and @exits take a function, not an offset"));
    }
    Ok(Spec {
        text: text.to_string(),
        module,
        what: SpecWhat::Symbol { pattern: pattern.to_string(), offset, blocks, exits },
    })
}

/// Shell-style glob with `*` and `?`.
pub fn glob(pat: &str, s: &str) -> bool {
    let (p, t): (Vec<char>, Vec<char>) = (pat.chars().collect(), s.chars().collect());
    let (mut pi, mut ti, mut star, mut mark) = (0, 0, None, 0);
    while ti < t.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == t[ti]) {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some(pi);
            mark = ti;
            pi += 1;
        } else if let Some(sp) = star {
            pi = sp + 1;
            mark += 1;
            ti = mark;
        } else {
            return false;
        }
    }
    while pi < p.len() && p[pi] == '*' {
        pi += 1;
    }
    pi == p.len()
}

/// Whether a glob takes function `name`. A PLT stub (`name@plt`) only jumps to its function,
/// so counting it repeats that function's count: globs leave stubs out unless the pattern
/// itself asks for them (`*@plt`); an exact name still names one.
fn glob_hit(pattern: &str, name: &str) -> bool {
    glob(pattern, name) && (!name.ends_with("@plt") || pattern.ends_with("@plt"))
}

/// A resolved instrumentation point.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Point {
    /// The spec it came from, and a label for this point (`FUNC+0x12`).
    pub spec: String,
    pub label: String,
    /// Index of the module in the slice given to [`resolve`].
    pub module: usize,
    pub func: FuncId,
    pub addr: ImageAddr,
    /// The last instruction of a return or tail-call block (`FUNC@exits`): its probe may be
    /// placed at an earlier instruction of the same block, where a jump fits, since the block
    /// runs straight through to the exit.
    pub at_exit: bool,
}

/// The file name of a module path.
pub fn module_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// The name a spec uses for the main executable of a process, whatever its file is called.
pub const EXE_ALIAS: &str = "exe";

/// Whether the module part of a spec, `name`, names the module at `path` that also answers
/// to `aliases`: a prefix of its file name (`libc` for `libc.so.6`), its path, or one of its
/// aliases exactly. `canonical` is `name` with its symlinks resolved when it is a path (a
/// program run through a symlink is mapped under its target's name).
/// Whether `spec` names module `path` (a library the process maps), as resolving it would
/// find it there; false for a spec with no module.
pub fn names_module(spec: &Spec, path: &str) -> bool {
    let Some(m) = &spec.module else { return false };
    let canonical = (m.contains('/'))
        .then(|| std::fs::canonicalize(m).ok())
        .flatten()
        .and_then(|p| p.to_str().map(str::to_string));
    module_matches(m, canonical.as_deref(), path, &[])
}

fn module_matches(name: &str, canonical: Option<&str>, path: &str, aliases: &[String]) -> bool {
    if name == EXE_ALIAS {
        // Only ever the main executable, even if a library's name starts with "exe".
        return aliases.iter().any(|a| a == name);
    }
    module_name(path).starts_with(name)
        || path == name
        || canonical == Some(path)
        || aliases.iter().any(|a| a == name)
}

/// Resolve specs against analysed modules (in order: the main executable first). Each spec
/// yields one or more points; duplicates (same module and address) are kept once.
pub fn resolve(
    specs: &[Spec],
    modules: &[(&str, &Analysis)],
    code: &dyn Fn(usize, ImageAddr) -> Option<(ImageAddr, Vec<u8>)>,
) -> Result<Vec<Point>, SpecError> {
    resolve_with_aliases(specs, modules, &[], code)
}

/// [`resolve`], with further names per module (`aliases[i]` for module `i`; missing entries
/// are none): for a process's main executable, the name it was run as and [`EXE_ALIAS`].
pub fn resolve_with_aliases(
    specs: &[Spec],
    modules: &[(&str, &Analysis)],
    aliases: &[Vec<String>],
    code: &dyn Fn(usize, ImageAddr) -> Option<(ImageAddr, Vec<u8>)>,
) -> Result<Vec<Point>, SpecError> {
    let aliases_of = |i: usize| aliases.get(i).map_or(&[][..], Vec::as_slice);
    let mut out: Vec<Point> = Vec::new();
    for spec in specs {
        let mods: Vec<usize> = match &spec.module {
            Some(m) => {
                let canonical = m
                    .contains('/')
                    .then(|| std::fs::canonicalize(m).ok())
                    .flatten()
                    .and_then(|p| p.to_str().map(str::to_string));
                let v: Vec<usize> = (0..modules.len())
                    .filter(|&i| {
                        module_matches(m, canonical.as_deref(), modules[i].0, aliases_of(i))
                    })
                    .collect();
                if v.is_empty() {
                    let names = |i: usize| {
                        let name = module_name(modules[i].0).to_string();
                        match aliases_of(i) {
                            [] => name,
                            a => format!("{name} (also {})", a.join(", ")),
                        }
                    };
                    return Err(SpecError::NoModule {
                        spec: spec.text.clone(),
                        module: m.clone(),
                        modules: (0..modules.len()).map(names).collect(),
                    });
                }
                v
            }
            None => (0..modules.len()).collect(),
        };
        let before = out.len();
        match &spec.what {
            SpecWhat::Addr(a) => {
                let m = mods[0];
                let cfg = &modules[m].1.cfg;
                let f =
                    function_containing(modules[m].1, ImageAddr(*a)).ok_or_else(|| {
                        match cfg.no_splice_in(*a, *a + 1) {
                            Some(n) => SpecError::NeverSpliced {
                                spec: spec.text.clone(),
                                why: n.to_string(),
                            },
                            None => SpecError::NotInFunction { spec: spec.text.clone(), addr: *a },
                        }
                    })?;
                check_boundary(spec, cfg, f, ImageAddr(*a), &|a| code(m, a))?;
                let fun = cfg.function(f);
                out.push(Point {
                    spec: spec.text.clone(),
                    label: format!("{}+{:#x}", fun.name, a - fun.entry.0),
                    module: m,
                    func: f,
                    addr: ImageAddr(*a),
                    at_exit: false,
                });
            }
            SpecWhat::Symbol { pattern, offset, blocks, exits } => {
                let is_glob = pattern.contains(['*', '?']);
                for &m in &mods {
                    let cfg = &modules[m].1.cfg;
                    for (i, fun) in cfg.functions.iter().enumerate() {
                        let hit = if is_glob {
                            glob_hit(pattern, &fun.name)
                        } else {
                            fun.name == *pattern || fun.aliases.iter().any(|a| a == pattern)
                        };
                        if !hit {
                            continue;
                        }
                        let f = FuncId(i as u32);
                        if *exits {
                            for b in cfg.blocks_of(f) {
                                if !matches!(
                                    b.term,
                                    Terminator::Return
                                        | Terminator::TailCall
                                        | Terminator::IndirectTailCall
                                ) {
                                    continue;
                                }
                                let Some(a) = last_instruction(b, &|x| code(m, x)) else {
                                    continue;
                                };
                                out.push(Point {
                                    spec: spec.text.clone(),
                                    label: format!("{}+{:#x}", fun.name, a.0 - fun.entry.0),
                                    module: m,
                                    func: f,
                                    addr: a,
                                    at_exit: true,
                                });
                            }
                        } else if *blocks {
                            for b in cfg.blocks_of(f) {
                                out.push(Point {
                                    spec: spec.text.clone(),
                                    label: format!("{}+{:#x}", fun.name, b.start.0 - fun.entry.0),
                                    module: m,
                                    func: f,
                                    addr: b.start,
                                    at_exit: false,
                                });
                            }
                        } else {
                            let a = ImageAddr(fun.entry.0 + offset);
                            if *offset != 0 {
                                check_boundary(spec, cfg, f, a, &|x| code(m, x))?;
                            }
                            out.push(Point {
                                spec: spec.text.clone(),
                                label: if *offset == 0 {
                                    fun.name.clone()
                                } else {
                                    format!("{}+{offset:#x}", fun.name)
                                },
                                module: m,
                                func: f,
                                addr: a,
                                at_exit: false,
                            });
                        }
                    }
                    // Without a module, a plain name means the first module that has it.
                    if spec.module.is_none() && !is_glob && out.len() > before {
                        break;
                    }
                }
            }
        }
        if out.len() == before {
            let pattern = match &spec.what {
                SpecWhat::Symbol { pattern, .. } => pattern.as_str(),
                SpecWhat::Addr(_) => "",
            };
            return Err(SpecError::NoSymbol {
                spec: spec.text.clone(),
                close: close_names(pattern, mods.iter().map(|m| modules[*m].1)),
            });
        }
    }
    let mut seen = std::collections::HashSet::new();
    out.retain(|p| seen.insert((p.module, p.addr)));
    Ok(out)
}

/// The address of a block's last instruction (its exit).
fn last_instruction(
    b: &kerf_analysis::cfg::Block,
    code: &dyn Fn(ImageAddr) -> Option<(ImageAddr, Vec<u8>)>,
) -> Option<ImageAddr> {
    let (base, bytes) = code(b.start)?;
    let mut sc = Scanner::new(&bytes, base);
    let mut a = b.start;
    loop {
        let next = ImageAddr(sc.decode(a)?.next_ip());
        if next >= b.end() {
            return Some(a);
        }
        a = next;
    }
}

fn function_containing(a: &Analysis, addr: ImageAddr) -> Option<FuncId> {
    a.cfg
        .functions
        .iter()
        .enumerate()
        .find(|(i, _)| a.cfg.block_containing(FuncId(*i as u32), addr).is_some())
        .map(|(i, _)| FuncId(i as u32))
}

/// An address inside a function must start an instruction of the block that contains it.
fn check_boundary(
    spec: &Spec,
    cfg: &kerf_analysis::cfg::Cfg,
    f: FuncId,
    addr: ImageAddr,
    code: &dyn Fn(ImageAddr) -> Option<(ImageAddr, Vec<u8>)>,
) -> Result<(), SpecError> {
    let not_in = || SpecError::NotInFunction { spec: spec.text.clone(), addr: addr.0 };
    let b = cfg.block(cfg.block_containing(f, addr).ok_or_else(not_in)?);
    let (base, bytes) = code(b.start).ok_or_else(not_in)?;
    let mut sc = Scanner::new(&bytes, base);
    let mut a = b.start.0;
    let mut prev = a;
    while a < addr.0 {
        prev = a;
        a = sc.decode(ImageAddr(a)).ok_or_else(not_in)?.next_ip();
    }
    if a == addr.0 {
        Ok(())
    } else {
        Err(SpecError::NotBoundary {
            spec: spec.text.clone(),
            addr: addr.0,
            before: prev,
            after: a,
        })
    }
}

/// Up to five function names close to `name` (containing it, or within two edits).
pub fn close_names<'a>(name: &str, analyses: impl Iterator<Item = &'a Analysis>) -> Vec<String> {
    let mut close: Vec<(usize, String)> = Vec::new();
    let plain = name.trim_matches('*');
    for a in analyses {
        for f in &a.cfg.functions {
            let d = if !plain.is_empty() && f.name.contains(plain) {
                1
            } else {
                edit_distance(&f.name, name)
            };
            if d <= 2 {
                close.push((d, f.name.clone()));
            }
        }
    }
    close.sort();
    close.dedup();
    close.into_iter().take(5).map(|(_, n)| n).collect()
}

/// Levenshtein distance, giving up (3) past a length difference of two.
pub fn edit_distance(a: &str, b: &str) -> usize {
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    if a.len().abs_diff(b.len()) > 2 {
        return 3;
    }
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.iter().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            cur[j + 1] = (prev[j] + (ca != cb) as usize).min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spec_forms() {
        let s = parse("libc:malloc").unwrap();
        assert_eq!(s.module.as_deref(), Some("libc"));
        assert_eq!(
            s.what,
            SpecWhat::Symbol { pattern: "malloc".into(), offset: 0, blocks: false, exits: false }
        );
        let s = parse("work+0x12").unwrap();
        assert_eq!(s.module, None);
        assert_eq!(
            s.what,
            SpecWhat::Symbol { pattern: "work".into(), offset: 0x12, blocks: false, exits: false }
        );
        assert_eq!(parse("app:0x1130").unwrap().what, SpecWhat::Addr(0x1130));
        assert_eq!(
            parse("libc:*open*").unwrap().what,
            SpecWhat::Symbol { pattern: "*open*".into(), offset: 0, blocks: false, exits: false }
        );
        assert_eq!(
            parse("loop@blocks").unwrap().what,
            SpecWhat::Symbol { pattern: "loop".into(), offset: 0, blocks: true, exits: false }
        );
        assert_eq!(
            parse("f@exits").unwrap().what,
            SpecWhat::Symbol { pattern: "f".into(), offset: 0, blocks: false, exits: true }
        );
        assert!(parse(":x").is_err());
        assert!(parse("x+zz").is_err());
        assert!(parse("0x1234").is_err());
        assert!(parse("f+4@blocks").is_err());
    }

    #[test]
    fn module_names() {
        let path = "/usr/bin/redis-check-rdb";
        let aliases = vec!["redis-server".to_string(), EXE_ALIAS.to_string()];
        assert!(module_matches("redis-check", None, path, &aliases));
        assert!(module_matches("redis-server", None, path, &aliases));
        assert!(module_matches("exe", None, path, &aliases));
        assert!(module_matches(path, None, path, &[]));
        assert!(module_matches("/usr/bin/redis-server", Some(path), path, &[]));
        assert!(!module_matches("redis-serv", None, path, &aliases));
        assert!(!module_matches("exe", None, "/usr/lib/libc.so.6", &[]));
        assert!(!module_matches("exe", None, "/usr/lib/exempi.so", &[]));
        assert!(!module_matches("/usr/bin/redis-server", None, path, &[]));
    }

    #[test]
    fn globs() {
        assert!(glob("*open*", "fopen64"));
        assert!(glob("open", "open"));
        assert!(!glob("open", "fopen"));
        assert!(glob("f?o*", "fooooo"));
        assert!(!glob("*open", "opener"));
        assert!(glob_hit("*open*", "fopen64"));
        assert!(!glob_hit("*open*", "fopen@plt"));
        assert!(!glob_hit("*", "malloc@plt"));
        assert!(glob_hit("*@plt", "malloc@plt"));
        assert!(glob_hit("malloc*@plt", "malloc@plt"));
    }
}
