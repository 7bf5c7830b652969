//! The minifier on the reference graphs with structural checkers, against functorch's
//! figures in tests/fixtures/REFERENCE.md.

use graphbug_ir::parse_graph;
use graphbug_minifier::{minify, Contains, Minified, MinifyOptions, NoSink};

fn fixture(model: &str, file: &str) -> graphbug_ir::Graph {
    let path = format!(
        "{}/../../../tests/fixtures/{model}/{file}",
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

/// Every size symbol a graph mentions is bound by one of its inputs, so the graph runs
/// from its inputs alone.
fn assert_self_binding(g: &graphbug_ir::Graph, what: &str) {
    let unbound = graphbug_ir::specialize::unbound_symbols(g);
    assert!(
        unbound.is_empty(),
        "{what}: no input binds {unbound:?} (node, symbol):\n{}",
        graphbug_ir::print_graph(g)
    );
}

#[test]
fn dynamic_shape_candidates_keep_an_input_binding_every_symbol() {
    use graphbug_minifier::Original;
    for (dir, file) in [
        ("dynamic/reshape", "fw.py"),
        ("dynamic/attention", "bw.py"),
        ("dynamo", "tensor_code_dynamic.py"),
    ] {
        let graph = fixture(dir, file);
        let original = Original::new(graph.clone());
        let all = original.all();
        // Every single node kept alone, and every window of 3.
        for k in 0..all.len() {
            let c = original.candidate(&all[k..(k + 3).min(all.len())]);
            assert_self_binding(&c.graph, &format!("{dir}/{file} from {k}"));
            let c = original.candidate(&all[k..=k]);
            assert_self_binding(&c.graph, &format!("{dir}/{file} node {k}"));
        }
    }
    // Minified: the sum alone, reading a placeholder sized `[2*s97, (s98//2)]`, keeps the
    // `Sym` inputs that bind s97 and s98.
    let graph = fixture("dynamic/reshape", "fw.py");
    let mut checker = Contains::parse("aten.sum.dim_IntList").unwrap();
    let m = minify(&graph, &mut checker, &MinifyOptions::default(), &mut NoSink).unwrap();
    let text = graphbug_ir::print_graph(m.graph());
    assert_eq!(m.stats.end_nodes, 1, "{text}");
    assert!(
        text.contains(
            r#"primals_1: "Sym(s97)", primals_2: "Sym(s98)", add_3: "f32[2*s97, (s98//2)]""#
        ),
        "{text}"
    );
    assert_self_binding(m.graph(), "minified");
}
