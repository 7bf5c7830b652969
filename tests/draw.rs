//! `graphbug draw` through the binary: aten graphs and XLA programs in every format,
//! partitions and divergences marked, large graphs folded, bad input named; the pages in a
//! real headless Chromium. The tests that need libtorch (partitions, traces) are skipped
//! in a build without it (`cargo test -p graphbug --no-default-features --test draw`).

mod common;

#[path = "common/browser.rs"]
mod browser;

use common::{run_in_tmp as graphbug, said as text};
use std::path::{Path, PathBuf};

fn fixture(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(rel)
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// Draws `args` into `out` and returns what was written.
fn draw(args: &[&str], out: &Path, tmp: &Path) -> String {
    let mut all = vec!["draw"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["-o", s(out)]);
    let o = graphbug(&all, tmp);
    assert!(o.status.success(), "{}", text(&o));
    std::fs::read_to_string(out).unwrap()
}

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

#[cfg(feature = "torch")]
#[test]
fn a_partition_draws_saved_and_recomputed_values_in_a_browser() {
    let tmp = tempfile::tempdir().unwrap();
    let joint = fixture("gpt4/joint.py");
    let page = tmp.path().join("gpt4.html");
    let html = draw(&[s(&joint), "--partition", "min-cut"], &page, tmp.path());
    // The saved values are the partition's: as many marked in the forward as it saves.
    let o = graphbug(
        &["partition", s(&joint), "--partitioner", "min-cut", "--json"],
        tmp.path(),
    );
    assert!(o.status.success(), "{}", text(&o));
    let json = String::from_utf8_lossy(&o.stdout);
    let report: serde_json::Value = serde_json::from_str(json.lines().last().unwrap()).unwrap();
    let saved = report["saved"].as_array().unwrap();
    assert!(!saved.is_empty());
    assert!(
        html.contains(&format!("saves {} values", saved.len())),
        "{html:.2000}"
    );
    let loaded = browser::load(&page, tmp.path());
    assert!(loaded.errors.is_empty(), "{:?}", loaded.errors);
    assert!(loaded.load_ms.is_some(), "the page's script ran");
    // Each saved value's box in the forward is filled as saved.
    for name in saved.iter().filter_map(|v| v.as_str()).take(5) {
        let g = browser::element(&loaded.dom, &format!("forward:{name}"), 600)
            .unwrap_or_else(|| panic!("forward:{name} is not in the page"));
        assert!(g.contains("#ffd8a8"), "{name}: {g}");
    }
    assert!(
        loaded.dom.contains("id=\"backward:"),
        "the backward is drawn"
    );
    // A node of one half only: that half is drawn around it, the other left out.
    let around = draw(
        &[
            s(&joint),
            "--partition",
            "min-cut",
            "--around",
            "tangents_1",
            "--format",
            "dot",
        ],
        &tmp.path().join("around.dot"),
        tmp.path(),
    );
    assert!(around.contains("digraph \"backward\"") && !around.contains("digraph \"forward\""));
    let png = browser::screenshot(&page, tmp.path(), (1200, 900));
    assert!(
        std::fs::metadata(png).unwrap().len() > 20_000,
        "a blank screenshot"
    );
}

#[cfg(feature = "torch")]
#[test]
fn two_traces_mark_the_first_divergence_and_its_inputs() {
    let tmp = tempfile::tempdir().unwrap();
    let gpt4 = fixture("gpt4/forward.py");
    let a = tmp.path().join("a.jsonl");
    let b = tmp.path().join("b.jsonl");
    for (backend, trace) in [("eager", &a), ("fault:accuracy=0.5@node:gelu_2", &b)] {
        let o = graphbug(
            &["run", s(&gpt4), "--backend", backend, "--trace", s(trace)],
            tmp.path(),
        );
        assert!(o.status.success(), "{}", text(&o));
    }
    let dot = draw(
        &[
            s(&gpt4),
            "--trace",
            s(&a),
            "--against",
            s(&b),
            "--format",
            "dot",
        ],
        &tmp.path().join("d.dot"),
        tmp.path(),
    );
    let line = |name: &str| {
        dot.lines()
            .find(|l| l.contains(&format!("id=\"graph:{name}\"")))
            .unwrap_or_else(|| panic!("{name} not drawn: {dot}"))
            .to_string()
    };
    assert!(
        line("gelu_2").contains("first divergence"),
        "{}",
        line("gelu_2")
    );
    assert!(line("view_36").contains("input of the first divergence"));
    // The same trace twice: nothing is marked.
    let same = draw(
        &[
            s(&gpt4),
            "--trace",
            s(&a),
            "--against",
            s(&a),
            "--format",
            "dot",
        ],
        &tmp.path().join("same.dot"),
        tmp.path(),
    );
    assert!(!same.contains("first divergence"));
}
