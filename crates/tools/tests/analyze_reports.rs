//! `analyze`'s reports on a fixture analysed offline: one function's CFG, a function that is
//! not there (with close names), a splice plan whose totals add up, the function list.

mod common;

use kerf_tools::analyze::{load, Report, Request, Source};
use kerf_tools::ToolError;

fn loaded() -> kerf_tools::analyze::Loaded {
    let path = common::build_fixture("tailcall", "-O2");
    let opts = kerf_session::LoadOptions { no_cache: true, ..Default::default() };
    load(Source::File(&path), &opts, &kerf_tools::Quiet).expect("the fixture analyses")
}

#[test]
fn a_function_is_rendered_with_its_blocks_and_named_by_its_image() {
    let l = loaded();
    let req = Request { function: Some("tail_plain".into()), ..Request::default() };
    let r = Report::new(&l, &req, 0.0).expect("tail_plain exists");
    let text = r.text();
    let first = text.lines().next().unwrap();
    assert!(first.starts_with("function tail_plain in tailcall-O2-tools-"), "{first}");
    assert!(text.lines().any(|l| l.starts_with("  block +0x0 ")), "{text}");
    assert!(text.contains("    tailcall leaf_mix"), "{text}");
    let v = r.json();
    assert_eq!(v["function"][0]["name"], "tail_plain");
    assert_eq!(v["images"], 1);
}

#[test]
fn a_missing_function_is_an_error_naming_close_ones() {
    let l = loaded();
    let req = Request { function: Some("tail_plian".into()), ..Request::default() };
    let e = Report::new(&l, &req, 0.0).err().expect("no such function");
    assert!(
        matches!(&e, ToolError::NoFunction { close, .. } if close.iter().any(|c| c == "tail_plain"))
    );
    assert!(e.to_string().starts_with("no function named 'tail_plian'; close: "), "{e}");
    let req = Request { function: Some("zzzzzzzzzzzz".into()), ..Request::default() };
    let e = Report::new(&l, &req, 0.0).err().expect("no such function");
    assert_eq!(e.to_string(), "no function named 'zzzzzzzzzzzz'");
}

#[test]
fn a_plan_counts_every_site_once_by_kind() {
    let l = loaded();
    let req = Request { plan: vec!["*".into()], ..Request::default() };
    let r = Report::new(&l, &req, 0.0).expect("plans");
    let p = &r.json()["plan"];
    let kinds: u64 =
        ["jump5", "jump2", "trap", "refused"].iter().map(|k| p[k].as_u64().unwrap()).sum();
    assert_eq!(kinds, p["sites"].as_u64().unwrap());
    assert_eq!(p["points"].as_array().unwrap().len() as u64, kinds);
    let text = r.text();
    assert!(
        text.starts_with(&format!("kerf analyze: splice plan of {kinds} sites (offline")),
        "{text}"
    );
}

#[test]
fn the_function_list_has_every_function_with_its_entry_splice() {
    let l = loaded();
    let req = Request { functions: true, ..Request::default() };
    let r = Report::new(&l, &req, 0.0).expect("lists");
    let list = r.json()["function_list"].as_array().unwrap().clone();
    assert_eq!(list.len(), l.images[0].analysis.cfg.functions.len());
    let plain = list.iter().find(|f| f["name"] == "tail_plain").expect("tail_plain listed");
    assert_ne!(plain["entry_splice"], "-", "its entry was planned");
    // Text: a header and a line per function.
    assert_eq!(r.text().lines().count(), list.len() + 1);
}
