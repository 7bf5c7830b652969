//! Helpers the partition tests share: the reference fixtures in `<workspace>/tests/fixtures`.

#![allow(dead_code)] // each test file uses its own subset

use graphbug_ir::{parse_graph, Graph};

/// A fixture file's text.
pub fn fixture(model: &str, file: &str) -> String {
    let path = format!(
        "{}/../../tests/fixtures/{model}/{file}",
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
