//! `kerf cover`: basic-block coverage of a live process, a command or the kernel, with probes
//! that take themselves out once hit; writes the summary (table or JSON), an lcov tracefile and
//! a drcov file, and merges earlier runs' JSON. The tool itself is `kerf_tools::cover`.

use crate::live::{run_tool_then, LiveArgs, Output};
use kerf_tools::cover::{self, Cover, Coverage};
use std::path::{Path, PathBuf};

#[derive(clap::Args)]
pub struct Args {
    /// What to cover: MODULE (every block of the module) or MODULE:FUNCTION (a name or a
    /// glob: every block of each function it names). Default: every block of the program
    /// and its libraries (with --kernel: of the kernel and its loaded modules).
    scopes: Vec<String>,
    /// Write the coverage as an lcov tracefile (source lines from DWARF: the module's own,
    /// or its separate debug file, found by build-id under /usr/lib/debug) for genhtml.
    #[arg(long, value_name = "FILE")]
    lcov: Option<PathBuf>,
    /// Write the covered blocks in drcov format (Lighthouse and other coverage viewers).
    #[arg(long, value_name = "FILE")]
    drcov: Option<PathBuf>,
    /// Merge the coverage of an earlier run (its --json summary) into this one's; with no
    /// target, only merge (and convert) the files given.
    #[arg(long = "add", value_name = "JSON")]
    add: Vec<PathBuf>,
    #[command(flatten)]
    live: LiveArgs,
}

pub fn run_cover(args: Args) -> Result<(), crate::Error> {
    let tool = Cover::new(&args.scopes, args.live.interval)?;
    let earlier = args.add.iter().map(|p| read_coverage(p)).collect::<Result<Vec<_>, _>>()?;
    let no_target = args.live.pid.is_none() && !args.live.kernel && args.live.command.is_empty();
    if no_target {
        if earlier.is_empty() {
            let why = "kerf cover needs a target (-p PID, --kernel or -- COMMAND), or --add FILE to merge";
            return Err(kerf_tools::ToolError::Usage(why.into()).into());
        }
        let c = cover::merge(&earlier);
        let mut out = Output::open(&args.live, "cover")?;
        write_files(&args, &c)?;
        let json = serde_json::json!({ "coverage": c, "merged": args.add.len() });
        summary(&mut out, &args.live, &tool, &json);
        return Ok(());
    }
    run_tool_then(&tool, "cover", &args.live, |report| {
        let Ok(this) = serde_json::from_value::<Coverage>(report.json["coverage"].clone()) else {
            return Ok(());
        };
        let merged = !earlier.is_empty();
        let mut runs = earlier;
        runs.push(this);
        let c = if merged { cover::merge(&runs) } else { runs.pop().expect("one run") };
        if merged {
            report.json["coverage"] = serde_json::json!(c);
            report.json["merged"] = serde_json::json!(args.add.len());
        }
        write_files(&args, &c)
    })
}

/// The summary: the JSON object, or the table.
fn summary(out: &mut Output, live: &LiveArgs, tool: &Cover, json: &serde_json::Value) {
    use kerf_tools::live::LiveTool;
    if live.json {
        out.summary(&format!("{json}\n"));
    } else {
        out.summary(&tool.final_table(json));
    }
}

/// The coverage of an earlier run's `--json` summary (or of a merge).
fn read_coverage(path: &Path) -> Result<Coverage, crate::Error> {
    let bad = |what: String| crate::Error::Input { path: path.to_path_buf(), what };
    let text = std::fs::read_to_string(path).map_err(|e| bad(e.to_string()))?;
    // The summary may follow kerf's other lines (a launched command's stderr).
    let line = text.lines().rev().find(|l| l.starts_with('{')).unwrap_or(&text);
    let v: serde_json::Value =
        serde_json::from_str(line).map_err(|e| bad(format!("not a kerf cover summary: {e}")))?;
    serde_json::from_value(v["coverage"].clone())
        .map_err(|e| bad(format!("no coverage in it (not `kerf cover --json`?): {e}")))
}

/// `--lcov` and `--drcov`.
fn write_files(args: &Args, c: &Coverage) -> Result<(), crate::Error> {
    let write = |path: &PathBuf, bytes: &[u8]| {
        std::fs::write(path, bytes)
            .map_err(|source| crate::Error::Output { path: path.clone(), source })
    };
    if let Some(p) = &args.drcov {
        write(p, &cover::drcov(c))?;
    }
    if let Some(p) = &args.lcov {
        let lines = |m: &cover::ModuleCoverage| match cover::module_lines(m) {
            Ok(l) => Some(l),
            Err(why) => {
                err_line!("kerf: warning: {}: no source lines for lcov ({why})", m.path);
                None
            }
        };
        write(p, cover::lcov(c, &lines).as_bytes())?;
    }
    Ok(())
}
