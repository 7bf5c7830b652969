//! Helpers the partition tests share: the reference fixtures in `<workspace>/tests/fixtures`.

#![allow(dead_code)] // each test file uses its own subset

use graphbug_ir::{parse_graph, Graph};

/// A fixture file's text.
pub fn fixture(model: &str, file: &str) -> String {
    let path = format!(
        "{}/../../../tests/fixtures/{model}/{file}",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// A model's `partition.json` (functorch's partitions of its joint graph).
pub fn info(model: &str) -> serde_json::Value {
    serde_json::from_str(&fixture(model, "partition.json")).unwrap()
}

/// PyTorch's joint graph of a model and its number of forward outputs.
pub fn joint(model: &str) -> (Graph, usize) {
    let g = parse_graph(&fixture(model, "joint.py")).unwrap();
    let n = info(model)["num_fwd_outputs"].as_u64().unwrap() as usize;
    (g, n)
}

/// functorch's saved values and bytes for `partitioner` (`default`, `mincut`) in a
/// model's `partition.json`.
pub fn functorch_saved(info: &serde_json::Value, partitioner: &str) -> (Vec<String>, u64) {
    let saved = info[partitioner]["saved"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect();
    (saved, info[partitioner]["saved_bytes"].as_u64().unwrap())
}

/// A dynamic-shape model's joint graph from `tests/fixtures/dynamic/<model>`, its number
/// of forward outputs and its size hints.
pub fn dynamic_joint(model: &str) -> (Graph, usize, graphbug_ir::Bindings) {
    let dir = format!("dynamic/{model}");
    let g = parse_graph(&fixture(&dir, "joint.py")).unwrap();
    let info: serde_json::Value = serde_json::from_str(&fixture(&dir, "joint.json")).unwrap();
    let n = info["num_fwd_outputs"].as_u64().unwrap() as usize;
    let hints = info["hints"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.clone(), v.as_i64().unwrap()))
        .collect();
    (g, n, hints)
}

/// The bytes of the tensors a forward graph returns after its first `n` outputs (the
/// saved values), at `hints`; saved sizes count 0.
pub fn saved_tensor_bytes(forward: &Graph, n: usize, hints: &graphbug_ir::Bindings) -> u64 {
    forward.outputs()[n..]
        .iter()
        .filter_map(|v| v.as_node())
        .filter_map(|id| match &forward.node(id).meta {
            graphbug_ir::Meta::SymTensor(t) => Some(t.bind(hints).unwrap().nbytes()),
            graphbug_ir::Meta::Tensor(t) => Some(t.nbytes()),
            _ => None,
        })
        .sum()
}

/// Every size symbol `g` mentions is bound by one of its inputs.
pub fn assert_self_binding(g: &Graph, what: &str) {
    let unbound = graphbug_ir::specialize::unbound_symbols(g);
    assert!(
        unbound.is_empty(),
        "{what}: no input binds {unbound:?} (node, symbol)"
    );
}

/// The saved bytes a partition of a dynamic-shape joint reports, as an expression of the
/// symbols, evaluate at `hints` to its saved bytes.
pub fn assert_bytes_expression(
    report: &graphbug_partition::PartitionReport,
    hints: &graphbug_ir::Bindings,
    what: &str,
) {
    let expr = report
        .saved_bytes_expr
        .clone()
        .expect("symbolic saved tensors");
    let value = graphbug_ir::SymExpr::parse(&expr)
        .unwrap_or_else(|e| panic!("{what}: `{expr}`: {e}"))
        .eval(hints)
        .unwrap();
    assert_eq!(value as u64, report.saved_bytes, "{what}: {expr}");
}
