//! Data-driven liveness tests: each line of data/liveness.txt is a tiny program, the
//! functions in it, and the registers and flags that must be live at the first one's entry.

use kerf_analysis::image::Image;
use kerf_analysis::{analyze, Quiet};
use kerf_arch::x86_64::{Flag, FlagSet, Gpr, RegSet};
use kerf_arch::ImageAddr;

const BASE: u64 = 0x1000;

fn regs(s: &str) -> RegSet {
    let mut r = RegSet::EMPTY;
    for n in s.split(',').map(str::trim).filter(|n| *n != "-") {
        r.insert(Gpr::from_name(n).unwrap_or_else(|| panic!("bad register {n}")));
    }
    r
}

fn flags(s: &str) -> FlagSet {
    let mut out = FlagSet::EMPTY;
    for n in s.split(',').map(str::trim).filter(|n| *n != "-") {
        let f = Flag::ALL.iter().find(|f| f.name() == n).unwrap_or_else(|| panic!("bad flag {n}"));
        out = out.union(FlagSet(1 << *f as u8));
    }
    out
}

/// One case of a fixture file: its line number, its bytes placed at [`BASE`] with its
/// symbols, the first function's name, and the registers and flags wanted.
struct Case {
    line: usize,
    bytes: String,
    cfg: kerf_analysis::cfg::Cfg,
    first: kerf_analysis::cfg::FuncId,
    want: (RegSet, FlagSet),
}

/// The cases of a fixture file: `bytes | functions (name@offset) | registers | flags`.
fn cases(text: &str) -> Vec<Case> {
    let mut out = Vec::new();
    for (no, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let cols: Vec<&str> = line.split('|').map(str::trim).collect();
        assert_eq!(cols.len(), 4, "line {}: want 4 columns", no + 1);
        let bytes: Vec<u8> =
            cols[0].split_whitespace().map(|b| u8::from_str_radix(b, 16).expect("hex")).collect();
        let mut symfile = String::new();
        let mut first = None;
        for f in cols[1].split(',') {
            let (name, off) = f.trim().split_once('@').expect("name@offset");
            let off: u64 = off.parse().expect("offset");
            symfile.push_str(&format!("{:016x} T {name}\n", BASE + off));
            first.get_or_insert(name.to_string());
        }
        let mut image = Image::raw("case", &bytes, ImageAddr(BASE));
        image.add_symbol_file(&symfile).expect("symbols");
        let a = analyze(&image, &Quiet);
        let name = first.expect("a function");
        let f = a.cfg.functions_named(&name).next().expect("function analysed");
        out.push(Case {
            line: no + 1,
            bytes: cols[0].to_string(),
            cfg: a.cfg,
            first: f,
            want: (regs(cols[2]), flags(cols[3])),
        });
    }
    out
}

/// Each case's failure, if its result is not what it wants.
fn check(cases: &[Case], got: impl Fn(&Case) -> (RegSet, FlagSet)) -> Vec<String> {
    cases
        .iter()
        .filter_map(|c| {
            let g = got(c);
            (g != c.want).then(|| {
                format!(
                    "line {}: {}: got {} | {}, want {} | {}",
                    c.line, c.bytes, g.0, g.1, c.want.0, c.want.1
                )
            })
        })
        .collect()
}

#[test]
fn liveness_fixture() {
    let cases = cases(include_str!("data/liveness.txt"));
    let failures = check(&cases, |c| {
        let fun = c.cfg.function(c.first);
        (fun.live_in, fun.flags_live_in)
    });
    assert!(cases.len() >= 15, "only {} cases", cases.len());
    let n = cases.len();
    assert!(failures.is_empty(), "{} of {n} failed:\n{}", failures.len(), failures.join("\n"));
}

/// What is live where a function's returns land (the JIT's frameless returns ask it).
#[test]
fn continuations_fixture() {
    let cases = cases(include_str!("data/continuations.txt"));
    let failures = check(&cases, |c| {
        let cont = kerf_analysis::liveness::at_continuations(&c.cfg)[c.first.0 as usize];
        (cont.regs, cont.flags)
    });
    assert!(cases.len() >= 7, "only {} cases", cases.len());
    let n = cases.len();
    assert!(failures.is_empty(), "{} of {n} failed:\n{}", failures.len(), failures.join("\n"));
}

/// The levelled (callees-first, by strongly connected component) solver gives exactly the
/// fixpoint of plain parallel rounds, block by block, on a real library.
#[test]
fn levelled_solver_equals_round_fixpoint_on_libc() {
    let path = "/usr/lib/x86_64-linux-gnu/libc.so.6";
    let data = std::fs::read(path).expect("libc (Debian package libc6)");
    let image = Image::from_elf(path, &data).expect("parse libc");
    let a = analyze(&image, &Quiet);
    let mut reference = a.cfg.clone();
    kerf_analysis::liveness::solve_by_rounds(&mut reference, &a.call_graph);
    let mut differ = 0;
    for (x, y) in a.cfg.blocks.iter().zip(&reference.blocks) {
        if (x.live_in, x.flags_live_in) != (y.live_in, y.flags_live_in) {
            differ += 1;
        }
    }
    for (x, y) in a.cfg.functions.iter().zip(&reference.functions) {
        assert_eq!((x.live_in, x.flags_live_in), (y.live_in, y.flags_live_in), "{}", x.name);
    }
    assert_eq!(differ, 0, "{differ} of {} blocks differ", a.cfg.blocks.len());
    assert!(a.cfg.blocks.len() > 50_000);
}

/// Liveness at one instruction, computed on demand, agrees with the block's stored live-in at
/// its first instruction, and moves across an instruction by that instruction's facts.
#[test]
fn per_instruction_liveness() {
    // f: add rdi, rsi; mov rax, rdi; ret
    let bytes = [0x48, 0x01, 0xf7, 0x48, 0x89, 0xf8, 0xc3];
    let mut image = Image::raw("case", &bytes, ImageAddr(BASE));
    image.add_symbol_file("0000000000001000 T f\n").unwrap();
    let a = analyze(&image, &Quiet);
    let f = a.cfg.functions_named("f").next().unwrap();
    let live = |off: u64| {
        kerf_analysis::liveness::live_at(&a.cfg, &image, f, ImageAddr(BASE + off)).unwrap()
    };
    // Before ret: what the caller needs, all but rdi, which f writes on every path and is not
    // the caller's (rax is: a return value).
    let ret = regs("rax,rcx,rdx,rbx,rsp,rbp,rsi,r8,r9,r10,r11,r12,r13,r14,r15");
    assert_eq!(live(6).0.regs, ret);
    // Before mov rax, rdi: rax dead, rdi live.
    let no_rax = regs("rcx,rdx,rbx,rsp,rbp,rsi,rdi,r8,r9,r10,r11,r12,r13,r14,r15");
    assert_eq!(live(3).0.regs, no_rax);
    // After mov rax, rdi is before ret.
    assert_eq!(live(3).1.regs, ret);
    // Before add rdi, rsi: both read; flags it writes are dead before it.
    assert_eq!(live(0).0.regs, no_rax);
    assert_eq!(live(0).0.flags, FlagSet::EMPTY);
    assert_eq!(live(0).0.regs, a.cfg.function(f).live_in);
}

/// Whether a function's `ret`s leave through the slot their caller pushed (a frameless JIT
/// return relies on it): data/returns.txt.
#[test]
fn returns_through_callers_slot_fixture() {
    let mut failures = Vec::new();
    let mut cases = 0;
    for (no, line) in include_str!("data/returns.txt").lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        cases += 1;
        let fields: Vec<&str> = line.split('|').collect();
        let (bytes, part, want) = match fields[..] {
            [b, w] => (b, None, w),
            [b, p, w] => {
                let off = p.trim().strip_prefix("part@").expect("part@OFFSET");
                (b, Some(u64::from_str_radix(off, 16).expect("hex offset")), w)
            }
            _ => panic!("line {}: want bytes | [part@OFFSET |] yes or no", no + 1),
        };
        let code: Vec<u8> =
            bytes.split_whitespace().map(|b| u8::from_str_radix(b, 16).expect("hex")).collect();
        let mut image = Image::raw("case", &code, ImageAddr(BASE));
        let mut syms = format!("{BASE:016x} T f\n");
        if let Some(off) = part {
            syms += &format!("{:016x} T part\n", BASE + off);
        }
        image.add_symbol_file(&syms).expect("symbols");
        let a = analyze(&image, &Quiet);
        let name = if part.is_some() { "part" } else { "f" };
        let f = a.cfg.functions_named(name).next().expect("function analysed");
        // What the analysis keeps, and, for a function alone, what its code says by itself.
        let got = a.cfg.function(f).ret_through_slot;
        if part.is_none() && got != a.cfg.returns_through_callers_slot(&image, f) {
            failures.push(format!("line {}: kept and worked out again differ", no + 1));
        }
        let want = match want.trim() {
            "yes" => true,
            "no" => false,
            w => panic!("line {}: {w}: want yes or no", no + 1),
        };
        if got != want {
            failures.push(format!("line {}: {}: got {got}, want {want}", no + 1, bytes.trim()));
        }
    }
    assert!(cases >= 18, "only {cases} cases");
    assert!(failures.is_empty(), "{} of {cases} failed:\n{}", failures.len(), failures.join("\n"));
}

/// Solving a recursive component's members again from their last solution (the warm start
/// of `at_continuations`) gives what solving them from nothing gives, on libc and on
/// python3.11, whose interpreter is one component of 1,342 functions.
#[test]
fn continuations_warm_start_equals_cold() {
    for (path, package) in
        [("/usr/lib/x86_64-linux-gnu/libc.so.6", "libc6"), ("/usr/bin/python3.11", "python3.11")]
    {
        let data = std::fs::read(path).unwrap_or_else(|e| panic!("{path} ({package}): {e}"));
        let image = Image::from_elf(path, &data).expect("parse");
        let a = analyze(&image, &Quiet);
        let warm = kerf_analysis::liveness::at_continuations(&a.cfg);
        let cold = kerf_analysis::liveness::at_continuations_cold(&a.cfg);
        let differ = warm.iter().zip(&cold).filter(|(w, c)| w != c).count();
        assert_eq!(differ, 0, "{path}: {differ} of {} functions differ", cold.len());
        assert_eq!(warm.len(), a.cfg.functions.len());
        assert!(warm.len() > 3000, "{path}: {} functions", warm.len());
    }
}

/// The return facts a JIT keeps beside the cache (what a later start checks instead of
/// solving) pass their check on libc and python3.11 and give what solving gives; one
/// register taken out of a function's landing set, or out of what a function reads, fails
/// it (any assignment below the least solution is no pre-fixpoint); so do facts for another
/// number of functions.
#[test]
fn kept_return_facts_pass_their_check_and_a_smaller_set_fails_it() {
    use kerf_analysis::liveness::{at_continuations, check_return_facts, return_facts};
    for (path, package) in
        [("/usr/lib/x86_64-linux-gnu/libc.so.6", "libc6"), ("/usr/bin/python3.11", "python3.11")]
    {
        let data = std::fs::read(path).unwrap_or_else(|e| panic!("{path} ({package}): {e}"));
        let image = Image::from_elf(path, &data).expect("parse");
        let a = analyze(&image, &Quiet);
        let facts = return_facts(&a.cfg);
        let checked = check_return_facts(&a.cfg, &facts).unwrap_or_else(|e| panic!("{path}: {e}"));
        assert_eq!(checked, at_continuations(&a.cfg), "{path}: the facts are not the solution");

        // A register a caller keeps across its call (beyond the SysV set), taken out.
        let sysv = RegSet::SYSV_LIVE_AT_RETURN;
        let (f, r) = (facts.iter().enumerate())
            .find_map(|(i, f)| Some((i, f.lands.regs.minus(sysv).iter().next()?)))
            .unwrap_or_else(|| panic!("{path}: no function's returns land where more is live"));
        let mut lie = facts.clone();
        lie[f].lands.regs = lie[f].lands.regs.minus(RegSet::of(&[r]));
        let name = &a.cfg.functions[f].name;
        assert!(check_return_facts(&a.cfg, &lie).is_err(), "{path}: {r:?} out of {name}'s lands");

        // A register a function reads whatever its returns lead to, taken out.
        let (f, r) = (facts.iter().enumerate())
            .find_map(|(i, f)| Some((i, f.reads.regs.iter().next()?)))
            .unwrap_or_else(|| panic!("{path}: no function reads a register"));
        let mut lie = facts.clone();
        lie[f].reads.regs = lie[f].reads.regs.minus(RegSet::of(&[r]));
        let name = &a.cfg.functions[f].name;
        assert!(check_return_facts(&a.cfg, &lie).is_err(), "{path}: {r:?} out of {name}'s reads");

        assert!(check_return_facts(&a.cfg, &facts[1..]).is_err(), "{path}: one fact short");
    }
}
