//! Hosts graphbug's cross-crate integration tests (in `tests/`) and their shared helpers.

use std::path::PathBuf;

use graphbug_aten::io::{order_tensors, random_tensors, read_tensors};
use graphbug_ir::{parse_graph, Graph, Meta, TensorMeta};
use tch::{Kind, Tensor};

/// The directory holding test data: `<workspace>/tests/fixtures`.
pub fn fixtures_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures")
}

/// max|a - b| / max(max|b|, tiny), computed in float64 (0 for empty tensors).
pub fn relative_error(a: &Tensor, b: &Tensor) -> f64 {
    assert_eq!(a.size(), b.size(), "shapes differ");
    if b.numel() == 0 {
        return 0.0;
    }
    let a = a.to_kind(Kind::Double);
    let b = b.to_kind(Kind::Double);
    let diff = (&a - &b).abs().max().double_value(&[]);
    let scale = b.abs().max().double_value(&[]).max(f64::MIN_POSITIVE);
    diff / scale
}

/// The tensor metas of a graph's placeholders, in order (panics on a missing meta).
pub fn placeholder_metas(g: &Graph) -> Vec<TensorMeta> {
    g.placeholders()
        .into_iter()
        .map(|p| match &g.node(p).meta {
            Meta::Tensor(t) => t.clone(),
            other => panic!("placeholder `{}` has no meta: {other:?}", g.node(p).name),
        })
        .collect()
}

/// PyTorch's joint graph of a reference model (`tests/fixtures/<model>/joint.py`) and its
/// number of forward outputs (from `partition.json`).
pub fn reference_joint(model: &str) -> (Graph, usize) {
    let dir = fixtures_dir().join(model);
    let text = std::fs::read_to_string(dir.join("joint.py")).expect("joint.py");
    let info: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.join("partition.json")).expect("partition.json"),
    )
    .expect("partition.json parses");
    let n = info["num_fwd_outputs"]
        .as_u64()
        .expect("partition.json has num_fwd_outputs") as usize;
    (parse_graph(&text).expect("joint.py parses"), n)
}

/// The inputs of a reference joint graph: the primals from the fixture's `inputs.npz`
/// (the parameters PyTorch initialised and the model input, in forward order), and random
/// tangents with a fixed seed.
pub fn joint_inputs(model: &str, g: &Graph, seed: u64) -> Vec<Tensor> {
    let metas = placeholder_metas(g);
    let primals = g
        .placeholders()
        .into_iter()
        .filter(|&p| g.node(p).name.starts_with("primals_"))
        .count();
    let names: Vec<String> = (0..primals).map(|i| format!("arg{i}")).collect();
    let mut inputs = order_tensors(
        read_tensors(&fixtures_dir().join(model).join("inputs.npz")).expect("inputs.npz"),
        &names,
        "inputs",
    )
    .expect("inputs in order");
    for (t, m) in inputs.iter().zip(&metas) {
        assert_eq!(
            t.size(),
            m.shape.to_vec(),
            "{model}: inputs.npz matches the joint's primals"
        );
    }
    inputs.extend(random_tensors(&metas[primals..], seed, tch::Device::Cpu).expect("tangents"));
    inputs
}
