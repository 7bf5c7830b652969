//! The minifier on the reference graphs with structural checkers, against functorch's
//! figures in tests/fixtures/REFERENCE.md.

use graphbug_ir::parse_graph;
use graphbug_minifier::{minify, Contains, Minified, MinifyOptions, NoSink};

fn fixture(model: &str, file: &str) -> graphbug_ir::Graph {
    let path = format!(
        "{}/../../tests/fixtures/{model}/{file}",
        env!("CARGO_MANIFEST_DIR")
    );
    parse_graph(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn run(model: &str, ops: &str) -> Minified {
    let graph = fixture(model, "forward.py");
    let mut checker = Contains::parse(ops).unwrap();
    minify(&graph, &mut checker, &MinifyOptions::default(), &mut NoSink).unwrap()
}

#[test]
fn gpt4_softmax_and_layer_norm_beats_functorch() {
    let m = run(
        "gpt4",
        "aten._softmax.default,aten.native_layer_norm.default",
    );
    // functorch: 18 nodes in 273 queries; a 1-minimal answer has 2.
    assert!(m.stats.end_nodes <= 3, "{} nodes", m.stats.end_nodes);
    assert!(m.stats.queries <= 273, "{} queries", m.stats.queries);
    // The original as given first, then the canonical candidate (PyTorch's unused
    // getitems become outputs) as a preprocessing step of its own.
    assert!(m.log[1].starts_with("Preprocessing: "), "{}", m.log[1]);
    assert!(
        m.log[2].starts_with("Strategy: Eliminate dead code (259 nodes, 55 inputs)"),
        "{}",
        m.log[2]
    );
}

#[test]
fn gpt4_gelu_ends_at_one_node() {
    let m = run("gpt4", "aten.gelu.default");
    // functorch: 1 node in 50 queries.
    assert_eq!(m.stats.end_nodes, 1);
    assert!(m.stats.queries <= 50, "{} queries", m.stats.queries);
}
