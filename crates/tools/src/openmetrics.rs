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

/// The exposition of `sample` (`None`: nothing sampled yet) for `tool` on `target`.
pub fn render(tool: &str, target: &str, sample: Option<&Value>) -> String {
    let mut out = String::new();
    let rows: Vec<Value> = sample
        .and_then(|s| s["rows"].as_array())
        .map(|rows| {
            rows.iter()
                .map(|r| {
                    let mut r = r.clone();
                    // Virtual time is derived: wall minus off-CPU.
                    if let (Some(w), Some(o)) = (r["wall_ns"].as_f64(), r["off_cpu_ns"].as_f64()) {
                        r["virtual_ns"] = Value::from((w - o).max(0.0));
                    }
                    r
                })
                .collect()
        })
        .unwrap_or_default();
    let what = match tool {
        "count" => "point",
        "sum" => "line",
        _ => "function",
    };
    for f in &FAMILIES {
        let present: Vec<(&str, f64)> =
            rows.iter().filter_map(|r| Some((r["name"].as_str()?, r[f.key].as_f64()?))).collect();
        if present.is_empty() {
            continue;
        }
        let gauge = f.key == "sum";
        let _ = writeln!(out, "# TYPE {} {}", f.name, if gauge { "gauge" } else { "counter" });
        if let Some(u) = f.unit {
            let _ = writeln!(out, "# UNIT {} {u}", f.name);
        }
        let _ = writeln!(out, "# HELP {} {}", f.name, f.help);
        for (name, v) in present {
            let _ = writeln!(
                out,
                "{}{}{{tool=\"{}\",target=\"{}\",{what}=\"{}\"}} {}",
                f.name,
                if gauge { "" } else { "_total" },
                escape(tool),
                escape(target),
                escape(name),
                v * f.scale
            );
        }
    }
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
    }
}
