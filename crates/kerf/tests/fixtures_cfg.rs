//! CFG tests on the C fixtures in tests/fixtures: each is compiled by gcc and clang at -O0 and
//! -O2 during the run, and `kerf analyze` is checked against ground truth that does not come
//! from kerf (the compilers' own assembly, objdump, readelf) and against golden files in
//! tests/golden (rewritten, never hand-edited, with `KERF_BLESS=1`).
//!
//! Needs gcc, clang and binutils (objdump, readelf, nm). A missing tool fails the test with the
//! Debian package to install; nothing here passes without checking.

use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

const KERF: &str = env!("CARGO_BIN_EXE_kerf");
const BLESS_CMD: &str = "KERF_BLESS=1 cargo test --release -p kerf --test fixtures_cfg";

/// One fixture source and what it must print when run without arguments.
struct Fixture {
    /// File stem in tests/fixtures.
    source: &'static str,
    expected_stdout: &'static str,
    expected_status: i32,
}

const FIXTURES: &[Fixture] = &[
    Fixture {
        source: "switch",
        expected_stdout: "dense 4766\nholes 1072\nchar 35002\nforty-seven\nlarge 5490003\n\
                          sparse 280\nloop 2200\nflags 1923\nbyte 228\n",
        expected_status: 0,
    },
    Fixture {
        source: "tailcall",
        expected_stdout: "even 0 odd 1\nsum 3353\ndone\n",
        expected_status: 0,
    },
    Fixture { source: "noreturn", expected_stdout: "result 260\n", expected_status: 0 },
    Fixture {
        source: "computed_goto",
        expected_stdout: "10\n9\n8\n7\n6\n5\n4\n3\n2\n1\nfactorial 3628800\n42\nsum 42\n",
        expected_status: 0,
    },
];

const COMPILERS: &[(&str, &str)] = &[("gcc", "gcc"), ("clang", "clang")];
const OPTS: &[&str] = &["O0", "O2"];

/// One compiled binary: `<variant>-<cc>-<opt>`, where the variant is the fixture's name or
/// `switch-nopie` (switch.c built without PIE, so its tables hold absolute 8-byte addresses).
struct Binary {
    name: String,
    path: PathBuf,
    fixture: &'static Fixture,
    cc: &'static str,
    cc_version: String,
    flags: Vec<String>,
    asm: Asm,
    /// For every function the assembly defines: kerf's JSON object and text CFG.
    kerf: BTreeMap<String, (Value, String)>,
}

fn repo_root() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    root.canonicalize().unwrap_or(root)
}

fn binaries() -> &'static [Binary] {
    static BUILT: OnceLock<Vec<Binary>> = OnceLock::new();
    BUILT.get_or_init(build_all)
}

/// Runs a tool that must exist, failing with the Debian package that provides it.
fn require_tool(tool: &str, package: &str) -> String {
    match Command::new(tool).arg("--version").output() {
        Ok(o) if o.status.success() => {
            String::from_utf8_lossy(&o.stdout).lines().next().unwrap_or("").trim().to_string()
        }
        Ok(o) => panic!(
            "`{tool} --version` failed ({}): install the Debian package `{package}` \
             (apt-get install -y {package}); these tests need it and do not skip",
            o.status
        ),
        Err(e) => panic!(
            "{tool} is not installed ({e}): install the Debian package `{package}` \
             (apt-get install -y {package}); these tests need it and do not skip"
        ),
    }
}

fn run(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    if !out.status.success() {
        panic!(
            "{cmd:?} failed ({}):\n{}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    String::from_utf8(out.stdout).unwrap_or_else(|e| panic!("{cmd:?}: output not UTF-8: {e}"))
}

fn build_all() -> Vec<Binary> {
    let versions: BTreeMap<&str, String> =
        COMPILERS.iter().map(|(cc, pkg)| (*cc, require_tool(cc, pkg))).collect();
    for tool in ["objdump", "readelf", "nm"] {
        require_tool(tool, "binutils");
    }
    let out_dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("fixtures_cfg");
    std::fs::create_dir_all(&out_dir).expect("create the temp dir for fixture binaries");
    let src_dir = repo_root().join("tests/fixtures");
    let mut bins = Vec::new();
    for fixture in FIXTURES {
        let src = src_dir.join(format!("{}.c", fixture.source));
        let mut variants: Vec<(String, Vec<&str>)> = vec![(fixture.source.to_string(), vec![])];
        if fixture.source == "switch" {
            variants.push(("switch-nopie".to_string(), vec!["-fno-pie", "-no-pie"]));
        }
        for (variant, extra) in &variants {
            for (cc, _) in COMPILERS {
                for opt in OPTS {
                    let name = format!("{variant}-{cc}-{opt}");
                    let path = out_dir.join(&name);
                    let mut flags = vec![format!("-{opt}")];
                    flags.extend(extra.iter().map(|s| s.to_string()));
                    run(Command::new(cc).args(&flags).arg("-o").arg(&path).arg(&src));
                    let asm_path = out_dir.join(format!("{name}.s"));
                    // -S with the same flags: the same code generation as the binary (the
                    // link flag -no-pie is irrelevant to it and accepted).
                    run(Command::new(cc).args(&flags).arg("-S").arg("-o").arg(&asm_path).arg(&src));
                    let asm_text = std::fs::read_to_string(&asm_path)
                        .unwrap_or_else(|e| panic!("{}: {e}", asm_path.display()));
                    let asm = parse_asm(&asm_text);
                    assert!(
                        !asm.functions.is_empty(),
                        "{}: no functions found in the assembly",
                        asm_path.display()
                    );
                    let mut kerf = BTreeMap::new();
                    for f in asm.functions.keys() {
                        kerf.insert(f.clone(), kerf_function(&path, f));
                    }
                    bins.push(Binary {
                        name,
                        path,
                        fixture,
                        cc,
                        cc_version: versions[cc].clone(),
                        flags,
                        asm,
                        kerf,
                    });
                }
            }
        }
    }
    bins
}

/// kerf's JSON object and text CFG for one function. The text names the binary by its file
/// name only, so it does not depend on the temp directory.
fn kerf_function(bin: &Path, func: &str) -> (Value, String) {
    let json = run(Command::new(KERF).args(["analyze"]).arg(bin).args([
        "--no-cache",
        "--json",
        "--function",
        func,
    ]));
    let v: Value = serde_json::from_str(&json)
        .unwrap_or_else(|e| panic!("kerf --json for {func} in {}: {e}", bin.display()));
    let all = v["function"].as_array().cloned().unwrap_or_default();
    let mine: Vec<Value> = all.into_iter().filter(|f| f["name"] == func).collect();
    assert_eq!(
        mine.len(),
        1,
        "kerf reports {} functions named {func} in {}",
        mine.len(),
        bin.display()
    );
    let text =
        run(Command::new(KERF).args(["analyze"]).arg(bin).args(["--no-cache", "--function", func]));
    (mine.into_iter().next().unwrap(), text)
}

// ---------------------------------------------------------------------------------------------
// Ground truth from the compiler's assembly (AT&T syntax, gcc and clang).

#[derive(Default, Debug)]
struct AsmFunc {
    /// Entry counts and formats of the switch jump tables the function references, sorted: a
    /// local label (`.L4:` for gcc, `.LJTI0_0:` for clang) followed by `.long .LX-.LT` lines
    /// (kerf's "relative32") or `.quad .LX` lines ("absolute64").
    tables: Vec<(usize, String)>,
    /// Computed-goto label arrays it references: a named data object (`labels.0`,
    /// `run.labels`) whose initialiser is `.quad .LX` lines. Name and entry count.
    label_arrays: Vec<(String, usize)>,
    /// `jmp *reg` / `jmp *mem` other than through a fixed rip-relative slot.
    indirect_jumps: usize,
    /// Direct jumps (conditional or not) that leave the function: to a symbol (a tail call), or
    /// to a local label of another function (gcc's jumps between a function and its `.cold`
    /// part), keyed by the function jumped to.
    tail_calls: BTreeMap<String, usize>,
    /// Direct call targets and how often each is called.
    calls: BTreeMap<String, usize>,
}

#[derive(Debug)]
struct Asm {
    functions: BTreeMap<String, AsmFunc>,
    /// Tables and label arrays no function references: the parser missed a reference.
    unattributed: Vec<String>,
}

/// `foo@PLT` and kerf's `foo@plt` both become `foo`.
/// A symbol as both sides name it: no PLT suffix, and a jump into the middle of another
/// function (`X+0x36` in kerf's output, a local label of `X` in the assembly) counts as `X`.
fn normalise(sym: &str) -> String {
    let s = sym.trim();
    let s = s.strip_suffix("@PLT").or_else(|| s.strip_suffix("@plt")).unwrap_or(s);
    match s.rsplit_once("+0x") {
        Some((name, off)) if !name.is_empty() && u64::from_str_radix(off, 16).is_ok() => name,
        _ => s,
    }
    .to_string()
}

fn strip_comment(line: &str) -> &str {
    match line.find('#') {
        Some(i) => &line[..i],
        None => line,
    }
}

/// `NAME:` at the start of a line (a label definition), without trailing comment.
fn label_of(line: &str) -> Option<&str> {
    if line.starts_with(char::is_whitespace) {
        return None;
    }
    let l = strip_comment(line).trim_end();
    let name = l.strip_suffix(':')?;
    (!name.is_empty() && !name.contains(char::is_whitespace)).then_some(name)
}

/// If `line` is a table entry: the `.LX` label it points at and the table format kerf would
/// name for it.
fn table_entry(line: &str) -> Option<(&str, &'static str)> {
    let l = strip_comment(line).trim();
    let (dir, arg) = l.split_once(char::is_whitespace)?;
    let arg = arg.trim();
    let (target, format) = match dir {
        ".long" => (arg.split_once('-')?.0.trim(), "relative32"),
        ".quad" => (arg, "absolute64"),
        _ => return None,
    };
    target.starts_with(".L").then_some((target, format))
}

/// Symbols and labels in an AT&T operand list (`$` is the immediate prefix, as in
/// `addq $.L20, %rax`, so it separates).
fn idents(s: &str) -> impl Iterator<Item = &str> {
    s.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '.'))
        .filter(|t| !t.is_empty())
}

fn parse_asm(text: &str) -> Asm {
    let lines: Vec<&str> = text.lines().collect();
    let mut names = BTreeSet::new();
    for l in &lines {
        let t = strip_comment(l).trim();
        if let Some(rest) = t.strip_prefix(".type") {
            if let Some((name, kind)) = rest.split_once(',') {
                if kind.trim() == "@function" {
                    names.insert(name.trim().to_string());
                }
            }
        }
    }
    // Data labels followed by label-address entries.
    let mut tables: BTreeMap<&str, (usize, String)> = BTreeMap::new();
    let mut arrays: BTreeMap<&str, usize> = BTreeMap::new();
    for (i, l) in lines.iter().enumerate() {
        let Some(label) = label_of(l) else { continue };
        let formats: BTreeSet<&str> =
            lines[i + 1..].iter().map_while(|x| table_entry(x)).map(|(_, f)| f).collect();
        let n = lines[i + 1..].iter().take_while(|x| table_entry(x).is_some()).count();
        if n == 0 {
            continue;
        }
        if label.starts_with(".L") {
            let format = if formats.len() == 1 { formats.first().unwrap() } else { "mixed" };
            tables.insert(label, (n, format.to_string()));
        } else {
            arrays.insert(label, n);
        }
    }
    // Which function each instruction and each code label belongs to. gcc emits a `.cold`
    // part inside its parent's `.size` range, after its own label, so the current function is
    // the last function label seen until its own `.size`.
    let mut label_owner: BTreeMap<&str, String> = BTreeMap::new();
    let mut insns: Vec<(String, &str, String)> = Vec::new(); // (function, mnemonic, operands)
    let mut current: Option<String> = None;
    for l in &lines {
        if let Some(label) = label_of(l) {
            if names.contains(label) {
                current = Some(label.to_string());
            } else if let Some(c) = &current {
                label_owner.insert(label, c.clone());
            }
            continue;
        }
        let t = strip_comment(l).trim();
        if let Some(rest) = t.strip_prefix(".size") {
            let sized = rest.split(',').next().unwrap_or("").trim();
            if current.as_deref() == Some(sized) {
                current = None;
            }
            continue;
        }
        let Some(cur) = current.as_ref() else { continue };
        if t.is_empty() || t.starts_with('.') {
            continue;
        }
        let mut words = t.split_whitespace();
        let mut mnemonic = words.next().unwrap_or("");
        if matches!(mnemonic, "notrack" | "bnd") {
            mnemonic = words.next().unwrap_or("");
        }
        insns.push((cur.clone(), mnemonic, words.collect::<Vec<_>>().join(" ")));
    }
    let mut functions: BTreeMap<String, AsmFunc> =
        names.iter().map(|n| (n.clone(), AsmFunc::default())).collect();
    let mut refs: BTreeMap<String, BTreeSet<&str>> = BTreeMap::new();
    for (cur, mnemonic, operands) in &insns {
        for id in idents(operands) {
            let known = tables.get_key_value(id).map(|(k, _)| k);
            if let Some(k) = known.or_else(|| arrays.get_key_value(id).map(|(k, _)| k)) {
                refs.entry(cur.clone()).or_default().insert(k);
            }
        }
        let f = functions.get_mut(cur).unwrap();
        let op = operands.trim();
        // A direct jump leaves the function when it goes to a symbol, or to a local label
        // of another function (between a function and its gcc `.cold` part).
        let jump_target = || -> Option<String> {
            if op.starts_with('*') {
                return None;
            }
            if op.starts_with(".L") {
                return label_owner.get(op).filter(|o| *o != cur).cloned();
            }
            Some(normalise(op))
        };
        match *mnemonic {
            "jmp" | "jmpq" => {
                if let Some(ind) = op.strip_prefix('*') {
                    if !ind.contains("(%rip)") {
                        f.indirect_jumps += 1;
                    }
                } else if let Some(t) = jump_target() {
                    *f.tail_calls.entry(t).or_default() += 1;
                }
            }
            "call" | "callq" if !op.starts_with('*') => {
                *f.calls.entry(normalise(op)).or_default() += 1;
            }
            m if m.starts_with('j') => {
                if let Some(t) = jump_target() {
                    *f.tail_calls.entry(t).or_default() += 1;
                }
            }
            _ => {}
        }
    }
    let referenced: BTreeSet<&str> = refs.values().flatten().copied().collect();
    let unattributed = tables
        .keys()
        .chain(arrays.keys())
        .filter(|l| !referenced.contains(*l))
        .map(|l| l.to_string())
        .collect();
    for (func, labels) in refs {
        let f = functions.get_mut(&func).unwrap();
        for label in labels {
            if let Some(t) = tables.get(label) {
                f.tables.push(t.clone());
            } else {
                f.label_arrays.push((label.to_string(), arrays[label]));
            }
        }
        f.tables.sort_unstable();
    }
    Asm { functions, unattributed }
}

// ---------------------------------------------------------------------------------------------
// Reading kerf's JSON.

fn hex(s: &str) -> u64 {
    u64::from_str_radix(s.trim_start_matches("0x"), 16)
        .unwrap_or_else(|e| panic!("not a hex address: {s:?}: {e}"))
}

fn kerf_tables(f: &Value) -> Vec<(usize, String)> {
    let mut v: Vec<(usize, String)> = f["jump_tables"]
        .as_array()
        .expect("jump_tables array")
        .iter()
        .map(|t| {
            let n = t["entries"].as_u64().expect("entries") as usize;
            (n, t["format"].as_str().expect("format").to_string())
        })
        .collect();
    v.sort_unstable();
    v
}

fn blocks(f: &Value) -> &Vec<Value> {
    f["blocks"].as_array().expect("blocks array")
}

fn block_starts(f: &Value) -> BTreeSet<u64> {
    blocks(f).iter().map(|b| hex(b["start"].as_str().expect("start"))).collect()
}

fn edges(b: &Value) -> Vec<(String, String)> {
    b["edges"]
        .as_array()
        .expect("edges array")
        .iter()
        .map(|e| {
            (e["kind"].as_str().unwrap().to_string(), e["target"].as_str().unwrap().to_string())
        })
        .collect()
}

/// A line on the real stderr, which the test harness does not capture (`eprintln!` output of
/// a passing test would be swallowed).
fn note(msg: &str) {
    use std::io::Write as _;
    let _ = writeln!(std::io::stderr(), "fixtures_cfg: {msg}");
}

fn fail_if_any(what: &str, problems: &[String]) {
    if !problems.is_empty() {
        panic!("{what}: {} problem(s):\n  {}", problems.len(), problems.join("\n  "));
    }
}

// ---------------------------------------------------------------------------------------------
// The tests.

/// Every compiled fixture runs, exits as expected and prints the same known output whatever
/// the compiler and optimisation level.
#[test]
fn fixtures_run_with_expected_output() {
    let mut problems = Vec::new();
    for b in binaries() {
        let out = Command::new(&b.path)
            .output()
            .unwrap_or_else(|e| panic!("cannot run {}: {e}", b.path.display()));
        let stdout = String::from_utf8_lossy(&out.stdout);
        if out.status.code() != Some(b.fixture.expected_status) {
            problems.push(format!(
                "{}: exit status {} (expected {})",
                b.name, out.status, b.fixture.expected_status
            ));
        }
        if stdout != b.fixture.expected_stdout {
            problems.push(format!(
                "{}: stdout {:?} (expected {:?})",
                b.name, stdout, b.fixture.expected_stdout
            ));
        }
    }
    fail_if_any("fixture runs", &problems);
}

/// kerf finds exactly the switch tables the compiler emitted, with the compiler's entry
/// counts and formats, in every function of every fixture binary; and every other indirect jump is
/// reported unanalysable.
///
/// Computed-goto label arrays (`static void *labels[] = {&&op_add, ...}`) are not switch
/// tables: the dispatch `jmp *labels[*pc++]` has no bounds check, so kerf cannot know how many
/// entries the array has and (by design, see cfg/jumptable.rs) reports each dispatch jump as
/// unanalysable instead of guessing; the handlers are still found, as blocks of the function,
/// by gap traversal. That is what is asserted exactly here: no table, one unanalysable jump per
/// `jmp *` the compiler emitted (gcc -O2 and clang -O2 duplicate the dispatch into every
/// handler), and every address in the array (read from its R_X86_64_RELATIVE relocations) is a
/// block start. tailcall.c's `jump_through_register` and `jump_through_stack_slot` are such
/// dispatches in functions without a frame (`jmp *%rax` after an indexed load, `jmp
/// *-8(%rsp)`): the stack pointer is at its entry value, yet they must stay unanalysable.
///
/// The indirect jumps of [`INDIRECT_TAIL_CALLS`] (their C has no switch and no computed goto)
/// are tail calls: taken with the frame torn down, through a function pointer. kerf must
/// classify each as one (`indtailcall`), and no other indirect jump of the fixtures.
#[test]
fn jump_tables_match_compiler_assembly() {
    let mut problems = Vec::new();
    let (mut n_funcs, mut n_tables, mut n_entries, mut n_arrays) = (0, 0, 0, 0);
    for b in binaries() {
        for label in &b.asm.unattributed {
            problems.push(format!(
                "{}: table {label} in the assembly is referenced by no function (test's parser)",
                b.name
            ));
        }
        for (name, af) in &b.asm.functions {
            n_funcs += 1;
            let kf = &b.kerf[name].0;
            let got = kerf_tables(kf);
            n_tables += af.tables.len();
            n_entries += af.tables.iter().map(|t| t.0).sum::<usize>();
            let unanalysable = kf["unanalysable_jumps"].as_u64().expect("unanalysable_jumps");
            let tail = blocks(kf).iter().filter(|b| b["terminator"] == "indtailcall").count();
            let others = af.indirect_jumps.saturating_sub(af.tables.len());
            let (expected_unanalysable, expected_tail) =
                if INDIRECT_TAIL_CALLS.contains(&name.as_str()) {
                    (0, others)
                } else {
                    (others, 0)
                };
            if got != af.tables
                || unanalysable != expected_unanalysable as u64
                || tail != expected_tail
            {
                problems.push(format!(
                    "{} {name}: assembly has jump tables (entries, format) {:?} and {} \
                     indirect jump(s); kerf reports tables {:?}, {} unanalysable jump(s) \
                     (expected {}) and {tail} indirect tail call(s) (expected {expected_tail})",
                    b.name, af.tables, af.indirect_jumps, got, unanalysable, expected_unanalysable
                ));
            }
            let kf_blocks = block_starts(kf);
            for t in kf["jump_tables"].as_array().unwrap() {
                for target in t["targets"].as_array().unwrap() {
                    let a = hex(target.as_str().unwrap());
                    if !kf_blocks.contains(&a) {
                        problems.push(format!(
                            "{} {name}: table {} target {a:#x} is not a block start",
                            b.name, t["table"]
                        ));
                    }
                }
            }
            for (array, entries) in &af.label_arrays {
                n_arrays += 1;
                let targets = label_array_targets(&b.path, array, *entries);
                if targets.len() != *entries {
                    problems.push(format!(
                        "{} {name}: label array {array} has {entries} entries in the assembly \
                         but {} relocations in the binary",
                        b.name,
                        targets.len()
                    ));
                }
                for a in targets {
                    if !kf_blocks.contains(&a) {
                        problems.push(format!(
                            "{} {name}: computed-goto target {a:#x} (from {array}) is not a \
                             block start",
                            b.name
                        ));
                    }
                }
            }
        }
    }
    // The fixtures must actually exercise tables and label arrays: guard against the ground
    // truth parser silently finding nothing.
    assert!(n_tables >= 40, "only {n_tables} jump tables found in the fixtures' assembly");
    assert!(n_arrays >= 4, "only {n_arrays} computed-goto label arrays found in the assembly");
    note(&format!(
        "checked {} binaries, {n_funcs} functions, {n_tables} jump tables ({n_entries} entries), \
         {n_arrays} computed-goto label arrays",
        binaries().len()
    ));
    fail_if_any("jump tables differ from the compilers' assembly", &problems);
}

/// Functions of the fixtures whose every indirect jump is a tail call through a function
/// pointer, by construction of their C (tailcall.c): taken with the frame torn down.
const INDIRECT_TAIL_CALLS: &[&str] = &["tail_indirect", "tail_after_frame"];

/// Addresses stored in a label array of a PIE: the addends of the R_X86_64_RELATIVE
/// relocations that fill its slots.
fn label_array_targets(bin: &Path, array: &str, entries: usize) -> Vec<u64> {
    let nm = run(Command::new("nm").arg(bin));
    let addr = nm
        .lines()
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            let (a, _, n) = (w.next()?, w.next()?, w.next()?);
            (n == array).then(|| hex(a))
        })
        .next()
        .unwrap_or_else(|| panic!("{}: no symbol {array}", bin.display()));
    let relocs = run(Command::new("readelf").args(["-rW"]).arg(bin));
    let mut slots: BTreeMap<u64, u64> = BTreeMap::new();
    for l in relocs.lines() {
        let w: Vec<&str> = l.split_whitespace().collect();
        if w.len() == 4 && w[2] == "R_X86_64_RELATIVE" {
            let off = hex(w[0]);
            if off >= addr && off < addr + 8 * entries as u64 {
                slots.insert(off, hex(w[3]));
            }
        }
    }
    slots.into_values().collect()
}

/// Block starts fall on instruction boundaries as objdump decodes them, and every direct
/// branch target inside a function (and the instruction after each conditional branch) starts
/// a block.
#[test]
fn blocks_start_on_objdump_instructions_and_branch_targets() {
    let mut problems = Vec::new();
    for b in binaries() {
        let dis = run(Command::new("objdump").args(["-d", "--no-show-raw-insn"]).arg(&b.path));
        let funcs = parse_objdump(&dis);
        for (name, (kf, _)) in &b.kerf {
            let Some(od) = funcs.get(name) else {
                problems.push(format!("{} {name}: not in objdump's output", b.name));
                continue;
            };
            let starts = block_starts(kf);
            for s in &starts {
                if !od.insns.contains(s) {
                    problems.push(format!(
                        "{} {name}: kerf block at {s:#x} is not an instruction start in objdump",
                        b.name
                    ));
                }
            }
            for t in &od.must_start {
                if !starts.contains(t) {
                    problems.push(format!(
                        "{} {name}: objdump shows a branch to (or after a conditional branch \
                         at) {t:#x}, but kerf has no block starting there",
                        b.name
                    ));
                }
            }
        }
    }
    fail_if_any("block starts disagree with objdump", &problems);
}

#[derive(Default)]
struct ObjdumpFunc {
    insns: BTreeSet<u64>,
    /// Direct branch targets within the function and fall-through addresses of conditional
    /// branches.
    must_start: BTreeSet<u64>,
}

/// A branch in objdump's listing: its address, whether it is conditional, and its direct
/// target if any.
type Branch = (u64, bool, Option<u64>);

fn parse_objdump(text: &str) -> BTreeMap<String, ObjdumpFunc> {
    let mut out: BTreeMap<String, ObjdumpFunc> = BTreeMap::new();
    let mut cur: Option<String> = None;
    let mut pending: Vec<Branch> = Vec::new();
    let mut order: Vec<(String, Vec<Branch>)> = Vec::new();
    for l in text.lines() {
        // "0000000000001149 <dense_switch>:"
        if let Some((addr, rest)) = l.split_once(" <") {
            if let Some(name) = rest.strip_suffix(">:") {
                if u64::from_str_radix(addr, 16).is_ok() {
                    if let Some(c) = cur.take() {
                        order.push((c, std::mem::take(&mut pending)));
                    }
                    cur = Some(name.to_string());
                    continue;
                }
            }
        }
        let Some(c) = &cur else { continue };
        // "    1157:\tja     121e <dense_switch+0xd5>"
        let Some((a, insn)) = l.trim_start().split_once(":\t") else { continue };
        let Ok(addr) = u64::from_str_radix(a, 16) else { continue };
        out.entry(c.clone()).or_default().insns.insert(addr);
        let mut w = insn.split_whitespace();
        let mut m = w.next().unwrap_or("");
        if matches!(m, "notrack" | "bnd") {
            m = w.next().unwrap_or("");
        }
        if m.starts_with('j') {
            let target = w.next().and_then(|t| u64::from_str_radix(t, 16).ok());
            pending.push((addr, !m.starts_with("jmp"), target));
        }
    }
    if let Some(c) = cur.take() {
        order.push((c, pending));
    }
    for (name, branches) in order {
        let f = out.entry(name).or_default();
        let (lo, hi) = match (f.insns.first(), f.insns.last()) {
            (Some(l), Some(h)) => (*l, *h),
            _ => continue,
        };
        for (addr, conditional, target) in branches {
            if let Some(t) = target.filter(|t| (lo..=hi).contains(t)) {
                f.must_start.insert(t);
            }
            if conditional {
                if let Some(next) = f.insns.range(addr + 1..).next() {
                    f.must_start.insert(*next);
                }
            }
        }
    }
    out
}

/// Direct jumps that leave a function in the compiler's assembly are exactly kerf's
/// tail-call edges, to the same functions. kerf models gcc's `.cold` part as a function of its
/// own, so the jump into it is a tail call to `X.cold`; the jump from `X.cold` back into `X`
/// must then be a tail-call edge to `X` (it enters `X` in the middle, which is no new
/// function).
#[test]
fn tail_calls_match_compiler_assembly() {
    let mut problems = Vec::new();
    let mut n = 0;
    for b in binaries() {
        for (name, af) in &b.asm.functions {
            let kf = &b.kerf[name].0;
            let mut got: BTreeMap<String, usize> = BTreeMap::new();
            for blk in blocks(kf) {
                for (kind, target) in edges(blk) {
                    if kind == "tailcall" {
                        *got.entry(normalise(&target)).or_default() += 1;
                    }
                }
            }
            n += af.tail_calls.values().sum::<usize>();
            if got != af.tail_calls {
                problems.push(format!(
                    "{} {name}: assembly tail-calls {:?}, kerf has tail-call edges {:?}",
                    b.name, af.tail_calls, got
                ));
            }
        }
    }
    assert!(n >= 14, "only {n} tail calls found in the fixtures' assembly");
    note(&format!("checked {n} tail calls (jumps leaving a function) from the assembly"));
    fail_if_any("tail calls differ from the compilers' assembly", &problems);
}

/// In noreturn.c: `fatal` and `finish` never return (nor does `main`, which ends in
/// `finish`), the `check_*` functions do; and each block ending in a call to exit, abort,
/// fatal or finish has the call edge only, no fall-through. The number of such blocks per
/// function equals the number of such calls in the compiler's assembly.
#[test]
fn noreturn_calls_do_not_fall_through() {
    const NORETURN_CALLEES: &[&str] = &["exit", "abort", "fatal", "finish"];
    let expect_noreturn: &[(&str, bool)] = &[
        ("fatal", true),
        ("finish", true),
        ("main", true),
        ("check_exit", false),
        ("check_abort", false),
        ("check_fatal", false),
        ("classify", false),
        ("halve_even", false),
    ];
    let mut problems = Vec::new();
    let mut n_calls = 0;
    let mut seen = 0;
    for b in binaries().iter().filter(|b| b.fixture.source == "noreturn") {
        seen += 1;
        for (name, want) in expect_noreturn {
            match b.kerf.get(*name) {
                None => problems.push(format!("{}: no function {name}", b.name)),
                Some((kf, _)) => {
                    if kf["noreturn"].as_bool() != Some(*want) {
                        problems.push(format!(
                            "{} {name}: kerf says noreturn {}, expected {want}",
                            b.name, kf["noreturn"]
                        ));
                    }
                }
            }
        }
        for (name, af) in &b.asm.functions {
            let asm_calls: usize =
                NORETURN_CALLEES.iter().map(|c| af.calls.get(*c).copied().unwrap_or(0)).sum();
            n_calls += asm_calls;
            let kf = &b.kerf[name].0;
            let mut kerf_calls = 0;
            for blk in blocks(kf) {
                let e = edges(blk);
                let to_noreturn = e
                    .iter()
                    .any(|(k, t)| k == "call" && NORETURN_CALLEES.contains(&normalise(t).as_str()));
                if !to_noreturn {
                    continue;
                }
                kerf_calls += 1;
                if e.len() != 1 {
                    problems.push(format!(
                        "{} {name}: block {} calls a noreturn function but has edges {:?}",
                        b.name, blk["start"], e
                    ));
                }
            }
            if kerf_calls != asm_calls {
                problems.push(format!(
                    "{} {name}: {asm_calls} call(s) to noreturn functions in the assembly, {} \
                     block(s) ending in one in kerf's CFG",
                    b.name, kerf_calls
                ));
            }
        }
    }
    assert_eq!(seen, 4, "noreturn.c binaries");
    assert!(n_calls >= 20, "only {n_calls} noreturn calls found in the assembly");
    note(&format!("checked {n_calls} calls to noreturn functions in {seen} binaries"));
    fail_if_any("noreturn calls", &problems);
}

/// The text CFG of every fixture function equals tests/golden/<binary>/<function>.txt. With
/// KERF_BLESS=1 the golden files are rewritten instead (stale ones removed).
#[test]
fn cfg_golden_files() {
    let bless = std::env::var("KERF_BLESS").map(|v| v == "1").unwrap_or(false);
    let root = repo_root().join("tests/golden");
    let mut problems = Vec::new();
    let mut written = 0;
    let mut compared = 0;
    for b in binaries() {
        let dir = root.join(&b.name);
        if bless {
            if dir.exists() {
                for e in std::fs::read_dir(&dir).unwrap() {
                    let p = e.unwrap().path();
                    if p.extension().is_some_and(|x| x == "txt") {
                        std::fs::remove_file(&p).unwrap();
                    }
                }
            }
            std::fs::create_dir_all(&dir).unwrap();
        }
        for (name, (_, text)) in &b.kerf {
            let header = format!(
                "# GENERATED by crates/kerf/tests/fixtures_cfg.rs, do not edit: `kerf analyze {} \
                 --no-cache --function {name}`, {} built by {} ({}) with {}; regenerate with \
                 `{BLESS_CMD}`\n",
                b.name,
                b.name,
                b.cc,
                b.cc_version,
                b.flags.join(" "),
            );
            let want = format!("{header}{text}");
            let path = dir.join(format!("{name}.txt"));
            if bless {
                std::fs::write(&path, &want).unwrap();
                written += 1;
                continue;
            }
            compared += 1;
            match std::fs::read_to_string(&path) {
                Err(e) => problems.push(format!("{}: {e}", path.display())),
                Ok(have) if have != want => {
                    let mut msg = format!("{} differs:", path.display());
                    for (i, (h, w)) in have.lines().zip(want.lines()).enumerate() {
                        if h != w {
                            let _ = write!(
                                msg,
                                "\n    line {}: golden {h:?}\n    line {}: now    {w:?}",
                                i + 1,
                                i + 1
                            );
                            break;
                        }
                    }
                    if have.lines().count() != want.lines().count() {
                        let _ = write!(
                            msg,
                            "\n    golden has {} lines, now {}",
                            have.lines().count(),
                            want.lines().count()
                        );
                    }
                    problems.push(msg);
                }
                Ok(_) => {}
            }
        }
        if !bless && dir.exists() {
            for e in std::fs::read_dir(&dir).unwrap() {
                let p = e.unwrap().path();
                let stem = p.file_stem().unwrap().to_string_lossy().to_string();
                if p.extension().is_some_and(|x| x == "txt") && !b.kerf.contains_key(&stem) {
                    problems.push(format!(
                        "{}: stale golden file (no function {stem} in {})",
                        p.display(),
                        b.name
                    ));
                }
            }
        }
    }
    if bless {
        note(&format!("KERF_BLESS=1: wrote {written} golden files under {}", root.display()));
        return;
    }
    let mut all = problems;
    if !all.is_empty() {
        all.push(format!(
            "if the change is intended (or the compilers differ from those in the golden files' \
             first lines), regenerate with `{BLESS_CMD}` and review the diff"
        ));
    }
    note(&format!("compared {compared} golden files"));
    fail_if_any("CFG golden files", &all);
}
