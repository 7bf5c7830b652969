//! `graphbug draw` of what needs libtorch: a partition's saved and recomputed values (in a
//! real headless Chromium) and the first divergence between two traces.

mod common;

#[path = "common/browser.rs"]
mod browser;

#[path = "common/draw.rs"]
mod draw;

use common::{fixture, run_in_tmp as graphbug, said as text};
use draw::{draw, s};

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
