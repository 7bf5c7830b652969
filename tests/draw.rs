//! `graphbug draw` through the binary: aten graphs and XLA programs in every format,
//! partitions and divergences marked, large graphs folded, bad input named; the pages in a
//! real headless Chromium. They need no libtorch and run in a build without it (`cargo
//! test -p graphbug --no-default-features --test draw`); the pictures that need libtorch
//! (partitions, traces) are in `tests/draw_aten.rs`.

mod common;

#[path = "common/browser.rs"]
mod browser;

#[path = "common/draw.rs"]
mod draw;

use common::{fixture, run_in_tmp as graphbug, said as text};
use draw::{draw, s};

#[test]
fn an_aten_graph_draws_in_every_format() {
    let tmp = tempfile::tempdir().unwrap();
    let mlp = fixture("mlp/forward.py");
    let svg = draw(&[s(&mlp)], &tmp.path().join("mlp.svg"), tmp.path());
    assert!(svg.starts_with("<?xml") && svg.contains("<svg"), "{svg}");
    // Every node is a box named PART:NODE; the graph's output is said.
    let graph = std::fs::read_to_string(&mlp).unwrap();
    for line in graph.lines().filter(|l| l.contains(" = torch.ops.")) {
        let name = line.trim().split([':', ' ']).next().unwrap();
        assert!(
            svg.contains(&format!("id=\"graph:{name}\"")),
            "{name} not drawn"
        );
    }
    assert!(svg.contains("→ output 0"), "{svg}");
    let dot = draw(&[s(&mlp)], &tmp.path().join("mlp.dot"), tmp.path());
    assert!(dot.starts_with("digraph \"graph\""), "{dot}");
    let json = draw(&[s(&mlp)], &tmp.path().join("mlp.json"), tmp.path());
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["graphs"][0]["id"], "graph");
    assert!(v["graphs"][0]["nodes"].as_array().unwrap().len() > 5);
    let html = draw(&[s(&mlp)], &tmp.path().join("mlp.html"), tmp.path());
    assert!(html.starts_with("<!DOCTYPE html>") && html.contains("<svg"));
    // Same input, same bytes.
    assert_eq!(
        svg,
        draw(&[s(&mlp)], &tmp.path().join("again.svg"), tmp.path())
    );
    // Culprits are marked; a culprit the graph lacks is named.
    let marked = draw(
        &[s(&mlp), "--culprit", "relu"],
        &tmp.path().join("culprit.dot"),
        tmp.path(),
    );
    assert!(marked.contains("penwidth=3"), "{marked}");
    let o = graphbug(
        &["draw", s(&mlp), "--culprit", "nope", "--format", "dot"],
        tmp.path(),
    );
    assert!(!o.status.success());
    assert!(text(&o).contains("no node `nope`"), "{}", text(&o));
}

#[test]
fn an_xla_program_draws_folded_and_around_a_node() {
    let tmp = tempfile::tempdir().unwrap();
    let hlo = fixture("xla/bart/decoder.hlo");
    let svg = draw(
        &[s(&hlo), "--culprit", "mul.68"],
        &tmp.path().join("bart.svg"),
        tmp.path(),
    );
    assert!(svg.contains("id=\"graph:mul.68\""), "the culprit is drawn");
    // One decoder layer: nothing repeats, every instruction and parameter is drawn.
    let dot = draw(&[s(&hlo)], &tmp.path().join("bart.dot"), tmp.path());
    assert!(!dot.contains("shape=box3d"), "{dot}");
    assert_eq!(dot.matches(" [id=").count(), 443);
    let around = draw(
        &[s(&hlo), "--around", "mul.68", "--depth", "1"],
        &tmp.path().join("around.dot"),
        tmp.path(),
    );
    let boxes = around.matches(" [id=").count();
    assert!(
        (2..20).contains(&boxes),
        "{boxes} boxes around mul.68 of 410: {around}"
    );
    let mlir = fixture("xla/bart/decoder.mlir");
    let json = draw(&[s(&mlir)], &tmp.path().join("mlir.json"), tmp.path());
    assert!(json.contains("\"incomingEdges\""));
}

#[test]
fn a_reader_that_stops_early_ends_graphbug_quietly() {
    use std::io::Read;
    let tmp = tempfile::tempdir().unwrap();
    let hlo = fixture("xla/bart/decoder.hlo");
    // Far more than a pipe holds, read 100 bytes of, then the pipe closed (`| head`).
    let mut child = common::graphbug()
        .args(["draw", s(&hlo), "--format", "model-explorer"])
        .env("TMPDIR", tmp.path())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut head = [0u8; 100];
    child.stdout.take().unwrap().read_exact(&mut head).unwrap();
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    let status = child.wait().unwrap();
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(status.code(), Some(141), "{stderr}");
}

#[test]
fn bad_input_is_named() {
    let tmp = tempfile::tempdir().unwrap();
    let mlp = fixture("mlp/forward.py");
    let hlo = fixture("xla/bart/decoder.hlo");
    let bad = tmp.path().join("bad.py");
    std::fs::write(&bad, "class M(torch.nn.Module):\n    def forward(self, x):\n        y = torch.ops.aten.nope.default(\n").unwrap();
    let out = s(&tmp.path().join("x.png")).to_string();
    for (args, said) in [
        (vec!["draw", s(&mlp), "-o", &out], "extension"),
        (vec!["draw", s(&mlp), "--around", "nope"], "`nope`"),
        (
            vec!["draw", s(&hlo), "--partition", "min-cut"],
            "XLA program",
        ),
        (vec!["draw", "/nonexistent.py"], "/nonexistent.py"),
        (vec!["draw", s(&bad)], "bad.py"),
    ] {
        let o = graphbug(&args, tmp.path());
        assert_eq!(o.status.code(), Some(1), "{args:?}: {}", text(&o));
        assert!(text(&o).contains(said), "{args:?}: {}", text(&o));
    }
}

#[test]
fn a_broken_page_fails_the_browser_check() {
    let tmp = tempfile::tempdir().unwrap();
    let page = tmp.path().join("broken.html");
    std::fs::write(
        &page,
        "<html><body><p id=\"p\">x</p><script>throw new Error('boom')</script></body></html>",
    )
    .unwrap();
    let loaded = browser::load(&page, tmp.path());
    assert!(!loaded.errors.is_empty(), "the uncaught error is seen");
    assert_eq!(loaded.load_ms, None, "the page records no load time");
    assert!(browser::element(&loaded.dom, "p", 20).is_some());
    assert!(browser::element(&loaded.dom, "missing", 20).is_none());
}
