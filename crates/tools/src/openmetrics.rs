//! A live tool's metrics in the OpenMetrics text format (what Prometheus scrapes), from the
//! tool's latest sample (`LiveTool::sample`): `kerf count`'s counts, `kerf sum`'s sums and
//! events, `kerf time`'s calls,
//! outermost calls, wall time and, with virtual time, off-CPU and virtual time, each a counter
//! (a sum a gauge: signed values may take it down) per function, point or line, with the tool
//! and the target as labels. Rates are Prometheus's to
//! take: `rate(kerf_wall_seconds_total[1m])` is a function's concurrency (threads inside),
//! `rate(kerf_virtual_seconds_total[1m])` the threads running inside.

use serde_json::Value;
use std::fmt::Write;

/// The content type of [`render`]'s text.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// A label value with `\`, `"` and newlines escaped.
fn escape(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

/// One family: its name (a counter's without `_total`), help, unit, the sample key it reads
/// and a factor to its unit. Counters, but a sum, which may go down (signed values): a gauge.
struct Family {
    name: &'static str,
    help: &'static str,
    unit: Option<&'static str>,
    key: &'static str,
    scale: f64,
}

const FAMILIES: [Family; 8] = [
    Family {
        name: "kerf_sum",
        help: "The line's value summed at its points.",
        unit: None,
        key: "sum",
        scale: 1.0,
    },
    Family {
        name: "kerf_events",
        help: "Events the line's sum took.",
        unit: None,
        key: "events",
        scale: 1.0,
    },
    Family {
        name: "kerf_count",
        help: "Times the point ran.",
        unit: None,
        key: "count",
        scale: 1.0,
    },
    Family {
        name: "kerf_calls",
        help: "Calls of the function, recursive ones included.",
        unit: None,
        key: "calls",
        scale: 1.0,
    },
    Family {
        name: "kerf_outermost_calls",
        help: "Calls of the function that no call of it encloses.",
        unit: None,
        key: "outer",
        scale: 1.0,
    },
    Family {
        name: "kerf_wall_seconds",
        help: "Wall-clock time threads spent inside the function (its rate: threads inside).",
        unit: Some("seconds"),
        key: "wall_ns",
        scale: 1e-9,
    },
    Family {
        name: "kerf_off_cpu_seconds",
        help: "Time threads inside the function spent off the CPU.",
        unit: Some("seconds"),
        key: "off_cpu_ns",
        scale: 1e-9,
    },
    Family {
        name: "kerf_virtual_seconds",
        help: "Time threads ran inside the function (wall minus off-CPU time).",
        unit: Some("seconds"),
        key: "virtual_ns",
        scale: 1e-9,
    },
];

/// `r` with its virtual time, which is derived: wall minus off-CPU.
fn with_virtual(r: &Value) -> Value {
    let mut r = r.clone();
    if let (Some(w), Some(o)) = (r["wall_ns"].as_f64(), r["off_cpu_ns"].as_f64()) {
        r["virtual_ns"] = Value::from((w - o).max(0.0));
    }
    r
}

/// The families of `families` that `rows` have (each row with its labels after the tool's
/// and the target's), named `kerf_` + `prefix` + the family's own name after `kerf_`.
fn families(out: &mut String, families: &[&Family], prefix: &str, rows: &[(String, Value)]) {
    for f in families {
        let present: Vec<(&str, f64)> =
            rows.iter().filter_map(|(l, r)| Some((l.as_str(), r[f.key].as_f64()?))).collect();
        if present.is_empty() {
            continue;
        }
        let name = format!("kerf_{prefix}{}", f.name.trim_start_matches("kerf_"));
        let gauge = f.key == "sum";
        let _ = writeln!(out, "# TYPE {name} {}", if gauge { "gauge" } else { "counter" });
        if let Some(u) = f.unit {
            let _ = writeln!(out, "# UNIT {name} {u}");
        }
        let _ = writeln!(out, "# HELP {name} {}", f.help);
        for (labels, v) in present {
            let total = if gauge { "" } else { "_total" };
            let _ = writeln!(out, "{name}{total}{{{labels}}} {}", v * f.scale);
        }
    }
}

/// The exposition of `sample` (`None`: nothing sampled yet) for `tool` on `target`. Rows
/// broken down by thread (`kerf time --threads`) add `kerf_thread_*` families of the
/// outermost calls and times, with a `thread` label (the thread id, or `slot N` where the
/// target's thread ids are not known) and the process's `pid`.
pub fn render(tool: &str, target: &str, sample: Option<&Value>) -> String {
    let mut out = String::new();
    let rows: &[Value] = sample.and_then(|s| s["rows"].as_array()).map_or(&[], Vec::as_slice);
    let what = match tool {
        "count" => "point",
        "sum" => "line",
        _ => "function",
    };
    let base = format!("tool=\"{}\",target=\"{}\"", escape(tool), escape(target));
    let labelled: Vec<(String, Value)> = rows
        .iter()
        .filter_map(|r| {
            let name = r["name"].as_str()?;
            Some((format!("{base},{what}=\"{}\"", escape(name)), with_virtual(r)))
        })
        .collect();
    families(&mut out, &FAMILIES.iter().collect::<Vec<_>>(), "", &labelled);
    let base = base.as_str();
    let per_thread: Vec<(String, Value)> = rows
        .iter()
        .flat_map(|r| {
            let name = r["name"].as_str().unwrap_or("");
            r["threads"].as_array().into_iter().flatten().map(move |t| {
                let thread = match t["tid"].as_u64() {
                    Some(tid) => tid.to_string(),
                    None => format!("slot {}", t["slot"]),
                };
                let pid = t["pid"].as_u64().map_or(String::new(), |p| format!(",pid=\"{p}\""));
                let labels = format!("{base},{what}=\"{}\",thread=\"{thread}\"{pid}", escape(name));
                (labels, with_virtual(t))
            })
        })
        .collect();
    let thread_keys = ["outer", "wall_ns", "off_cpu_ns", "virtual_ns"];
    let thread_families: Vec<&Family> =
        FAMILIES.iter().filter(|f| thread_keys.contains(&f.key)).collect();
    families(&mut out, &thread_families, "thread_", &per_thread);
    out.push_str("# EOF\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn counters_per_function_with_units_and_an_end() {
        let s = json!({"t": 1.0, "rows": [
            {"name": "work", "calls": 40, "outer": 40, "wall_ns": 800000000u64, "off_cpu_ns": 600000000u64},
            {"name": "a\"b", "calls": 1, "outer": 1, "wall_ns": 5, "off_cpu_ns": 0}]});
        let text = render("time", "process 7", Some(&s));
        assert!(text.contains("# TYPE kerf_calls counter\n"), "{text}");
        assert!(text.contains(
            "kerf_calls_total{tool=\"time\",target=\"process 7\",function=\"work\"} 40\n"
        ));
        assert!(text.contains("# UNIT kerf_wall_seconds seconds\n"));
        assert!(text.contains(
            "kerf_wall_seconds_total{tool=\"time\",target=\"process 7\",function=\"work\"} 0.8\n"
        ));
        assert!(text.contains(
            "kerf_virtual_seconds_total{tool=\"time\",target=\"process 7\",function=\"work\"} 0.2"
        ));
        assert!(text.contains("function=\"a\\\"b\""), "{text}");
        assert!(!text.contains("kerf_count_total"));
        assert!(text.ends_with("# EOF\n"));
        assert_eq!(render("count", "x", None), "# EOF\n");
        let s = json!({"rows": [{"name": "vfs_read@exits ret", "sum": -5, "events": 2}]});
        let text = render("sum", "the kernel", Some(&s));
        assert!(
            text.contains(
                "kerf_sum{tool=\"sum\",target=\"the kernel\",line=\"vfs_read@exits ret\"} -5\n"
            ),
            "{text}"
        );
        assert!(text.contains("kerf_events_total{"), "{text}");
        assert!(!text.contains("kerf_thread_"), "{text}");
    }

    #[test]
    fn threads_get_families_of_their_own() {
        let s = json!({"t": 1.0, "rows": [
            {"name": "work", "calls": 40, "outer": 40, "wall_ns": 800000000u64, "off_cpu_ns": 600000000u64,
             "threads": [
                {"slot": 3, "tid": 71, "pid": 70, "outer": 30, "wall_ns": 500000000u64, "off_cpu_ns": 400000000u64},
                {"slot": 5, "tid": null, "pid": null, "outer": 10, "wall_ns": 300000000u64, "off_cpu_ns": 200000000u64}]}]});
        let text = render("time", "process 70", Some(&s));
        let l = "tool=\"time\",target=\"process 70\",function=\"work\"";
        assert!(text.contains("# TYPE kerf_thread_outermost_calls counter\n"), "{text}");
        assert!(text.contains(&format!(
            "kerf_thread_outermost_calls_total{{{l},thread=\"71\",pid=\"70\"}} 30\n"
        )));
        assert!(text.contains(&format!(
            "kerf_thread_virtual_seconds_total{{{l},thread=\"slot 5\"}} 0.1\n"
        )));
        assert!(text.contains("# UNIT kerf_thread_wall_seconds seconds\n"), "{text}");
        // The function's own families are still there, once.
        assert_eq!(text.matches("# TYPE kerf_calls counter").count(), 1, "{text}");
        assert!(!text.contains("kerf_thread_calls"), "{text}");
        assert!(text.ends_with("# EOF\n"));
    }
}
