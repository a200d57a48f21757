//! `--record` and `kerf plot` on a real run: tests/fixtures/virtual.c timed with `kerf time
//! --virtual --record`, the record's last totals checked against kerf's own summary, and the
//! PNG looked at as a picture: its size is the layout's for the panels the record has, and
//! every panel's plotting area holds both functions' curves (pixels of their colours). The
//! program's output is what it prints alone.

mod common;

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn kerf(args: &[&std::ffi::OsStr]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kerf"))
        .args(args)
        .env("KERF_CACHE_DIR", Path::new(env!("CARGO_TARGET_TMPDIR")).join("plot-cache"))
        .output()
        .unwrap()
}

fn os<S: AsRef<std::ffi::OsStr> + ?Sized>(s: &S) -> &std::ffi::OsStr {
    s.as_ref()
}

/// The PNG's size and its pixels as RGBA.
fn decode(path: &Path) -> (u32, u32, Vec<u8>) {
    let d = png::Decoder::new(std::fs::File::open(path).unwrap());
    let mut r = d.read_info().unwrap();
    let mut buf = vec![0; r.output_buffer_size()];
    let info = r.next_frame(&mut buf).unwrap();
    assert_eq!(info.color_type, png::ColorType::Rgba, "resvg writes RGBA");
    buf.truncate(info.buffer_size());
    (info.width, info.height, buf)
}

fn rgb(hex: &str) -> [u8; 3] {
    let v = u32::from_str_radix(hex.trim_start_matches('#'), 16).unwrap();
    [(v >> 16) as u8, (v >> 8) as u8, v as u8]
}

#[test]
fn a_recorded_run_plots_a_panel_per_metric_with_every_curve() {
    let bin = common::build_fixture("virtual", "-O2", "plot");
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("plot");
    std::fs::create_dir_all(&dir).unwrap();
    let (record, summary) = (dir.join("run.jsonl"), dir.join("summary.json"));
    let plain = Command::new(&bin).args(["2", "30"]).output().unwrap();
    let o = kerf(&[
        os("time"),
        os("--virtual"),
        os("--interval"),
        os("0.1"),
        os("--record"),
        record.as_os_str(),
        os("--json"),
        os("-o"),
        summary.as_os_str(),
        os("work"),
        os("busy"),
        os("--"),
        bin.as_os_str(),
        os("2"),
        os("30"),
    ]);
    assert!(o.status.success(), "kerf failed: {}", String::from_utf8_lossy(&o.stderr));
    let last = |b: &[u8]| String::from_utf8_lossy(b).lines().last().unwrap_or("").to_string();
    assert_eq!(last(&o.stdout), last(&plain.stdout), "instrumented output differs");

    // The record: a header, a sample an interval, the last one's totals kerf's summary's.
    let text = std::fs::read_to_string(&record).unwrap();
    let lines: Vec<Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines[0]["kerf_record"], 1);
    assert_eq!(lines[0]["tool"], "time");
    assert!(lines.len() >= 6, "a run of about a second at 0.1 s: {} lines", lines.len());
    let ts: Vec<f64> = lines[1..].iter().map(|s| s["t"].as_f64().unwrap()).collect();
    assert!(ts.windows(2).all(|w| w[0] < w[1]), "{ts:?}");
    let v: Value = serde_json::from_slice(&std::fs::read(&summary).unwrap()).unwrap();
    let end = lines.last().unwrap();
    for f in v["functions"].as_array().unwrap() {
        let name = f["function"].as_str().unwrap();
        let row = end["rows"].as_array().unwrap().iter().find(|r| r["name"] == name).unwrap();
        assert_eq!(row["calls"], f["calls"], "{name}");
        assert_eq!(row["calls"].as_u64(), Some(60), "{name}");
        // The summary is read a moment after the last sample: the same intervals.
        let (a, b) = (row["wall_ns"].as_f64().unwrap(), f["total_ns"].as_f64().unwrap());
        assert!((a - b).abs() <= 0.01 * b, "{name}: record {a}, summary {b}");
        assert!(row["off_cpu_ns"].as_u64().unwrap() > 0, "{name}");
    }

    // The picture.
    let (png, svg) = (dir.join("run.png"), dir.join("run.svg"));
    for out in [&png, &svg] {
        let o = kerf(&[os("plot"), record.as_os_str(), os("-o"), out.as_os_str()]);
        assert!(o.status.success(), "kerf plot: {}", String::from_utf8_lossy(&o.stderr));
    }
    let svg_text = std::fs::read_to_string(&svg).unwrap();
    let titles = [
        "calls per second",
        "wall time per call",
        "CPU (virtual) time per call",
        "threads inside (concurrency)",
        "threads running inside",
    ];
    for t in titles {
        assert!(svg_text.contains(t), "no panel {t}");
    }
    let lay = kerf_tools::plot::layout(titles.len());
    let (w, h, px) = decode(&png);
    assert_eq!((w, h), (lay.width, lay.height));
    let colours = [rgb(kerf_tools::plot::COLOURS[0]), rgb(kerf_tools::plot::COLOURS[1])];
    for (k, &(x, y, pw, ph)) in lay.plots.iter().enumerate() {
        for c in colours {
            let n = (y..y + ph)
                .flat_map(|yy| (x..x + pw).map(move |xx| (xx, yy)))
                .filter(|&(xx, yy)| {
                    let i = 4 * (yy * w + xx) as usize;
                    px[i..i + 3] == c
                })
                .count();
            assert!(n >= 20, "panel {} ({}): {n} pixels of {c:?}", k, titles[k]);
        }
    }
}

#[test]
fn plot_refuses_what_it_cannot_draw() {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("plot-bad");
    std::fs::create_dir_all(&dir).unwrap();
    let not_a_record = dir.join("x.jsonl");
    std::fs::write(&not_a_record, "{\"a\": 1}\n").unwrap();
    let out = dir.join("x.png");
    let e = kerf(&[os("plot"), not_a_record.as_os_str(), os("-o"), out.as_os_str()]);
    assert!(!e.status.success());
    let msg = String::from_utf8_lossy(&e.stderr);
    assert!(msg.contains("line 1") && msg.contains("not a kerf --record file"), "{msg}");
    let header_only = dir.join("h.jsonl");
    std::fs::write(&header_only, "{\"kerf_record\": 1, \"tool\": \"time\"}\n").unwrap();
    let e = kerf(&[os("plot"), header_only.as_os_str(), os("-o"), out.as_os_str()]);
    assert!(String::from_utf8_lossy(&e.stderr).contains("no curves"), "{e:?}");
    let jpg = dir.join("x.jpg");
    let e = kerf(&[os("plot"), header_only.as_os_str(), os("-o"), jpg.as_os_str()]);
    assert!(String::from_utf8_lossy(&e.stderr).contains(".svg or .png"), "{e:?}");
    assert!(!out.exists() && !jpg.exists());
}
