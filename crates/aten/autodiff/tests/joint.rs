//! Joint graphs of the reference models against PyTorch 2.13's own
//! (`tests/fixtures/<model>/joint.py`), and the joint builder's rules on small graphs.

use std::collections::BTreeMap;
use std::path::PathBuf;

use graphbug_autodiff::{joint_graph, AutodiffError, Joint};
use graphbug_ir::passes::{default_side_effects, extract_subgraph};
use graphbug_ir::{
    parse_graph, print_graph, Dtype, Graph, GraphBuilder, Meta, NodeId, NodeKind, OpName,
    TensorMeta, Value,
};

fn fixture(model: &str, file: &str) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../../tests/fixtures")
        .join(model)
        .join(file);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

/// `num_fwd_outputs` of the model's partition.json.
fn num_fwd_outputs(model: &str) -> usize {
    let text = fixture(model, "partition.json");
    let key = "\"num_fwd_outputs\":";
    let at = text.find(key).expect("partition.json has num_fwd_outputs") + key.len();
    let digits: String = text[at..]
        .trim_start()
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().expect("num_fwd_outputs is a number")
}

/// PyTorch's joint graph of a model and what we differentiate to compare with it.
struct Reference {
    joint: Graph,
    num_fwd: usize,
    /// The joint's forward part, extracted from its primals to its forward outputs.
    joint_forward: Graph,
    /// Which primals PyTorch differentiates: those with a gradient in joint.py.
    requires_grad: Vec<bool>,
}

fn reference(model: &str) -> Reference {
    let joint = parse_graph(&fixture(model, "joint.py")).expect("joint.py parses");
    let num_fwd = num_fwd_outputs(model);
    let primals: Vec<NodeId> = joint
        .placeholders()
        .into_iter()
        .filter(|&p| joint.node(p).name.starts_with("primals_"))
        .collect();
    let outputs = joint.outputs()[..num_fwd].to_vec();
    let joint_forward = extract_subgraph(&joint, &primals, &outputs, &default_side_effects)
        .expect("the forward part extracts");
    let grads = &joint.outputs()[num_fwd..];
    assert_eq!(
        grads.len(),
        primals.len(),
        "{model}: one gradient per primal"
    );
    let requires_grad = grads.iter().map(|g| *g != Value::None).collect();
    Reference {
        joint,
        num_fwd,
        joint_forward,
        requires_grad,
    }
}

fn forward_py(model: &str) -> Graph {
    parse_graph(&fixture(model, "forward.py")).expect("forward.py parses")
}

/// How many times each op (and getitem) is called.
fn op_counts(g: &Graph) -> BTreeMap<String, i64> {
    let mut counts = BTreeMap::new();
    for node in &g.nodes {
        let key = match &node.kind {
            NodeKind::Call { op, .. } => op.qualified(),
            NodeKind::GetItem { .. } => "getitem".into(),
            _ => continue,
        };
        *counts.entry(key).or_insert(0) += 1;
    }
    counts
}

/// Ours minus PyTorch's, per op, where they differ.
fn op_diff(ours: &Graph, theirs: &Graph) -> BTreeMap<String, i64> {
    let (a, b) = (op_counts(ours), op_counts(theirs));
    let mut d = BTreeMap::new();
    for k in a.keys().chain(b.keys()) {
        let n = a.get(k).copied().unwrap_or(0) - b.get(k).copied().unwrap_or(0);
        if n != 0 {
            d.insert(k.clone(), n);
        }
    }
    d
}

fn placeholders(g: &Graph) -> Vec<(String, Meta)> {
    g.placeholders()
        .into_iter()
        .map(|p| (g.node(p).name.to_string(), g.node(p).meta.clone()))
        .collect()
}

/// Printed without the class line (ours keeps the forward's class name).
fn body(g: &Graph) -> String {
    let text = print_graph(g);
    text.split_once('\n')
        .map_or(text.clone(), |(_, b)| b.to_string())
}

/// The checks every model shares: placeholders, forward-output count, gradients present
/// for exactly the primals PyTorch differentiates, verification and a print/parse round trip.
fn check_shape(model: &str, ours: &Joint, r: &Reference) {
    assert_eq!(
        placeholders(&ours.graph),
        placeholders(&r.joint),
        "{model}: placeholders"
    );
    assert_eq!(ours.num_fwd_outputs, r.num_fwd, "{model}: forward outputs");
    let grads = &ours.graph.outputs()[ours.num_fwd_outputs..];
    let present: Vec<bool> = grads.iter().map(|g| *g != Value::None).collect();
    assert_eq!(
        present, r.requires_grad,
        "{model}: which primals get gradients"
    );
    ours.graph.verify().expect("the joint graph verifies");
    let text = print_graph(&ours.graph);
    let back = parse_graph(&text).expect("the printed joint graph parses");
    assert_eq!(print_graph(&back), text, "{model}: print/parse round trip");
}

#[test]
fn mlp_joint_is_pytorchs() {
    let r = reference("mlp");
    let ours = joint_graph(&forward_py("mlp"), &r.requires_grad).expect("mlp joint graph");
    check_shape("mlp", &ours, &r);
    assert_eq!(ours.tangent_outputs, [0]);
    assert_eq!(op_diff(&ours.graph, &r.joint), BTreeMap::new());
    // Same nodes, names, arguments, annotations and order: byte for byte.
    assert_eq!(body(&ours.graph), body(&r.joint));
}

#[test]
fn cnn_joint_is_pytorchs() {
    let r = reference("cnn");
    // forward.py mutates the batch-norm buffers; the functional forward is the joint's own.
    let ours = joint_graph(&r.joint_forward, &r.requires_grad).expect("cnn joint graph");
    check_shape("cnn", &ours, &r);
    assert_eq!(op_diff(&ours.graph, &r.joint), BTreeMap::new());
    assert_eq!(body(&ours.graph), body(&r.joint));
    // Only addmm gets a tangent: not the running statistics nor the i64 counter.
    assert_eq!(ours.tangent_outputs, [3]);
    // The running statistics and the counter get no gradient, the input image neither.
    let grads = &ours.graph.outputs()[ours.num_fwd_outputs..];
    assert!(grads[8..].iter().all(|g| *g == Value::None));
}

#[test]
fn gpt4_joint_from_forward_py() {
    let r = reference("gpt4");
    let ours = joint_graph(&forward_py("gpt4"), &r.requires_grad).expect("gpt4 joint graph");
    check_shape("gpt4", &ours, &r);
    // forward.py was traced under no_grad, where matmul folds its bmm result back with
    // `_unsafe_view` (the training trace uses `view`) and the attention dropout leaves no
    // `clone`. Those forward nodes are the only differences: their backward is the same.
    let expected: BTreeMap<String, i64> = [
        ("aten._unsafe_view.default", 8),
        ("aten.view.default", -8),
        ("aten.clone.default", -4),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    assert_eq!(op_diff(&ours.graph, &r.joint), expected);
    assert_eq!(
        op_diff(&forward_py("gpt4"), &r.joint_forward)["aten.clone.default"],
        -4
    );
}

#[test]
fn gpt4_joint_from_its_training_forward_is_pytorchs() {
    let r = reference("gpt4");
    let ours = joint_graph(&r.joint_forward, &r.requires_grad).expect("gpt4 joint graph");
    check_shape("gpt4", &ours, &r);
    assert_eq!(op_diff(&ours.graph, &r.joint), BTreeMap::new());
    assert_eq!(body(&ours.graph), body(&r.joint));
}

// ------------------------------------------------------------------ small graphs

fn f32(shape: &[i64]) -> TensorMeta {
    TensorMeta::new(Dtype::Float32, shape)
}

fn call(b: &mut GraphBuilder, op: &str, args: Vec<Value>, meta: TensorMeta) -> Value {
    let op = OpName::parse(op).expect("op name");
    let t = b.call(op, args);
    b.set_meta(t, meta);
    t.into()
}

fn node_of<'g>(g: &'g Graph, v: &Value) -> &'g graphbug_ir::Node {
    g.node(v.as_node().expect("a node"))
}

fn calls<'g>(g: &'g Graph, op: &str) -> Vec<&'g graphbug_ir::Node> {
    g.nodes
        .iter()
        .filter(|n| n.op().is_some_and(|o| o.qualified() == op))
        .collect()
}

#[test]
fn broadcast_gradients_are_summed_to_the_input_shape() {
    let mut b = GraphBuilder::new("Broadcast");
    let x = b.input("x", f32(&[4, 8]));
    let bias = b.input("bias", f32(&[8]));
    let scale = b.input("scale", f32(&[1, 8]));
    let y = call(
        &mut b,
        "aten.add.Tensor",
        vec![x.into(), bias.into()],
        f32(&[4, 8]),
    );
    let z = call(
        &mut b,
        "aten.mul.Tensor",
        vec![y, scale.into()],
        f32(&[4, 8]),
    );
    b.output([z]);
    let g = b.finish().unwrap();
    let joint = joint_graph(&g, &[true, true, true]).unwrap();
    let j = &joint.graph;
    assert_eq!(joint.num_fwd_outputs, 1);
    let grads = &j.outputs()[1..];
    let metas: Vec<Meta> = grads.iter().map(|v| node_of(j, v).meta.clone()).collect();
    assert_eq!(
        metas,
        vec![
            Meta::Tensor(f32(&[4, 8])),
            Meta::Tensor(f32(&[8])),
            Meta::Tensor(f32(&[1, 8]))
        ]
    );
    // scale [1, 8]: sum over dim 0, kept; bias [8]: summed, then the leading dim viewed away.
    let scale_grad = node_of(j, &grads[2]);
    assert_eq!(scale_grad.op().unwrap().qualified(), "aten.sum.dim_IntList");
    let NodeKind::Call { args, .. } = &scale_grad.kind else {
        unreachable!()
    };
    assert_eq!(args[1..], [Value::from(vec![0i64]), Value::Bool(true)]);
    let bias_grad = node_of(j, &grads[1]);
    assert_eq!(bias_grad.op().unwrap().qualified(), "aten.view.default");
    assert_eq!(calls(j, "aten.sum.dim_IntList").len(), 2);
    // x's gradient is mul(tangent, scale), and nothing else is emitted.
    assert_eq!(
        node_of(j, &grads[0]).op().unwrap().qualified(),
        "aten.mul.Tensor"
    );
    assert_eq!(calls(j, "aten.mul.Tensor").len(), 3);
}

#[test]
fn gradient_contributions_are_accumulated_with_add() {
    let mut b = GraphBuilder::new("Accumulate");
    let x = b.input("x", f32(&[5]));
    let sq = call(
        &mut b,
        "aten.mul.Tensor",
        vec![x.into(), x.into()],
        f32(&[5]),
    );
    let out = call(&mut b, "aten.add.Tensor", vec![sq, x.into()], f32(&[5]));
    b.output([out]);
    let g = b.finish().unwrap();
    let joint = joint_graph(&g, &[true]).unwrap();
    let j = &joint.graph;
    // Forward add, then two accumulations into x: tangent + mul_2, then + mul_1.
    let adds = calls(j, "aten.add.Tensor");
    assert_eq!(adds.len(), 3);
    let grad = node_of(j, &j.outputs()[1]);
    assert_eq!(grad.name, "add_2");
    let NodeKind::Call { args, .. } = &grad.kind else {
        unreachable!()
    };
    assert_eq!(node_of(j, &args[0]).name, "add_1");
    // mul's formulas run `other` (mul_1) before `self` (mul_2); the gradients arrive in
    // input order: self's first.
    assert_eq!(node_of(j, &args[1]).name, "mul_1");
    let first = node_of(j, &args[0]);
    let NodeKind::Call { args, .. } = &first.kind else {
        unreachable!()
    };
    assert_eq!(node_of(j, &args[0]).name, "tangents_1");
    assert_eq!(node_of(j, &args[1]).name, "mul_2");
}

#[test]
fn split_with_an_unused_chunk_gets_zeros_in_the_cat() {
    let mut b = GraphBuilder::new("Split");
    let x = b.input("x", f32(&[4, 6]));
    let s = b.call_multi(
        OpName::aten("split", "Tensor"),
        [x.into(), 2.into(), 1.into()],
        [],
    );
    b.set_multi_meta(s, vec![Some(f32(&[4, 2])); 3]);
    let first = b.getitem(s, 0);
    b.set_meta(first, f32(&[4, 2]));
    let last = b.getitem(s, 2);
    b.set_meta(last, f32(&[4, 2]));
    b.output([first.into(), last.into()]);
    let g = b.finish().unwrap();
    let joint = joint_graph(&g, &[true]).unwrap();
    let j = &joint.graph;
    assert_eq!(calls(j, "aten.zeros.default").len(), 1);
    let cat = node_of(j, &j.outputs()[2]);
    assert_eq!(cat.op().unwrap().qualified(), "aten.cat.default");
    assert_eq!(cat.meta, Meta::Tensor(f32(&[4, 6])));
}

#[test]
fn an_op_without_a_rule_on_the_gradient_path_is_named() {
    let mut b = GraphBuilder::new("NoRule");
    let x = b.input("x", f32(&[3, 4]));
    let c = call(
        &mut b,
        "aten.cumsum.default",
        vec![x.into(), 0.into()],
        f32(&[3, 4]),
    );
    let r = call(&mut b, "aten.relu.default", vec![c], f32(&[3, 4]));
    b.output([r]);
    let g = b.finish().unwrap();
    let err = joint_graph(&g, &[true]).unwrap_err();
    match &err {
        AutodiffError::Unsupported { node, op, .. } => {
            assert_eq!(node, "cumsum");
            assert_eq!(op, "aten::cumsum.default");
        }
        other => panic!("expected Unsupported, got {other:?}"),
    }
    assert!(err.to_string().contains("cumsum"));
    // Off the gradient path the op is fine.
    assert!(joint_graph(&g, &[false]).is_ok());
}

#[test]
fn a_missing_meta_is_named() {
    let mut b = GraphBuilder::new("NoMeta");
    let x = b.input("x", f32(&[3]));
    let r = b.call(OpName::aten("relu", "default"), [x.into()]);
    b.output([r.into()]);
    let g = b.finish().unwrap();
    match joint_graph(&g, &[true]) {
        Err(AutodiffError::MissingMeta { node, .. }) => assert_eq!(node, "relu"),
        other => panic!("expected MissingMeta, got {other:?}"),
    }
}

#[test]
fn bad_inputs_are_errors_not_panics() {
    let mut b = GraphBuilder::new("Bad");
    let x = b.input("x", f32(&[3]));
    let i = b.input("i", TensorMeta::new(Dtype::Int64, vec![3]));
    let r = call(&mut b, "aten.relu_.default", vec![x.into()], f32(&[3]));
    b.output([r, i.into()]);
    let g = b.finish().unwrap();
    assert!(matches!(
        joint_graph(&g, &[true]),
        Err(AutodiffError::Unsupported { .. })
    ));
    match joint_graph(&g, &[true, false]) {
        Err(AutodiffError::Unsupported { node, op, .. }) => {
            assert_eq!(
                (node.as_str(), op.as_str()),
                ("relu_", "aten::relu_.default")
            )
        }
        other => panic!("expected Unsupported, got {other:?}"),
    }
    let mut b = GraphBuilder::new("IntGrad");
    let i = b.input("i", TensorMeta::new(Dtype::Int64, vec![3]));
    b.output([i.into()]);
    let g = b.finish().unwrap();
    assert!(matches!(
        joint_graph(&g, &[true]),
        Err(AutodiffError::Unsupported { .. })
    ));
}

#[test]
fn non_differentiable_ops_and_integer_outputs_get_no_tangent() {
    let mut b = GraphBuilder::new("Mixed");
    let x = b.input("x", f32(&[4]));
    let pos = call(
        &mut b,
        "aten.gt.Scalar",
        vec![x.into(), 0.into()],
        TensorMeta::new(Dtype::Bool, vec![4]),
    );
    let y = call(
        &mut b,
        "aten.masked_fill.Scalar",
        vec![x.into(), pos.clone(), 0.0.into()],
        f32(&[4]),
    );
    b.output([y, pos]);
    let g = b.finish().unwrap();
    let joint = joint_graph(&g, &[true]).unwrap();
    let tangents: Vec<String> = placeholders(&joint.graph)
        .into_iter()
        .map(|(n, _)| n)
        .filter(|n| n.starts_with("tangents_"))
        .collect();
    assert_eq!(tangents, ["tangents_1"]);
    assert_eq!(joint.num_fwd_outputs, 2);
    // masked_fill's backward fills the masked gradient with 0.
    let grad = node_of(&joint.graph, &joint.graph.outputs()[2]);
    assert_eq!(grad.op().unwrap().qualified(), "aten.masked_fill.Scalar");
}

#[test]
fn joint_graphs_are_deterministic() {
    let r = reference("gpt4");
    let a = joint_graph(&forward_py("gpt4"), &r.requires_grad).unwrap();
    let b = joint_graph(&forward_py("gpt4"), &r.requires_grad).unwrap();
    assert_eq!(print_graph(&a.graph), print_graph(&b.graph));
}

#[test]
fn dropout_backward_scales_by_the_kept_fraction() {
    let mut b = GraphBuilder::new("Dropout");
    let x = b.input("x", f32(&[4, 4]));
    let d = b.call_multi(
        OpName::aten("native_dropout", "default"),
        [x.into(), 0.2.into(), true.into()],
        [],
    );
    let mask_meta = TensorMeta::new(Dtype::Bool, vec![4, 4]);
    b.set_multi_meta(d, vec![Some(f32(&[4, 4])), Some(mask_meta.clone())]);
    let out = b.getitem(d, 0);
    b.set_meta(out, f32(&[4, 4]));
    let mask = b.getitem(d, 1);
    b.set_meta(mask, mask_meta);
    b.output([out.into()]);
    let g = b.finish().unwrap();
    let joint = joint_graph(&g, &[true]).unwrap();
    let j = &joint.graph;
    let grad = node_of(j, &j.outputs()[1]);
    assert_eq!(
        grad.op().unwrap().qualified(),
        "aten.native_dropout_backward.default"
    );
    let NodeKind::Call { args, .. } = &grad.kind else {
        unreachable!()
    };
    assert_eq!(node_of(j, &args[1]).name, "getitem_1");
    assert_eq!(args[2], Value::Float(1.0 / (1.0 - 0.2)));
    // The random op stays in the forward; the mask is not differentiable: one tangent.
    assert_eq!(calls(j, "aten.native_dropout.default").len(), 1);
    assert_eq!(joint.tangent_outputs, [0]);
}

#[test]
fn a_saved_output_without_meta_names_its_node() {
    // A layer norm whose mean and rstd were never annotated (no getitems read them).
    let mut b = GraphBuilder::new("Norm");
    let x = b.input("x", f32(&[2, 8]));
    let ln = b.call_multi(
        OpName::aten("native_layer_norm", "default"),
        [
            x.into(),
            vec![8i64].into(),
            Value::None,
            Value::None,
            1e-5.into(),
        ],
        [],
    );
    b.set_multi_meta(ln, vec![Some(f32(&[2, 8]))]);
    let y = b.getitem(ln, 0);
    b.set_meta(y, f32(&[2, 8]));
    b.output([y.into()]);
    let g = b.finish().unwrap();
    match joint_graph(&g, &[true]) {
        Err(AutodiffError::MissingMeta { node, message }) => {
            assert_eq!(node, "native_layer_norm");
            assert!(message.contains("output 1"), "{message}");
        }
        other => panic!("expected MissingMeta, got {other:?}"),
    }
    // With the metas, the missing getitems are added to the forward and the rule runs.
    let mut g = g;
    g.nodes[1].meta = Meta::Multi(vec![
        Some(f32(&[2, 8])),
        Some(f32(&[2, 1])),
        Some(f32(&[2, 1])),
    ]);
    let joint = joint_graph(&g, &[true]).unwrap();
    assert_eq!(
        calls(&joint.graph, "aten.native_layer_norm_backward.default").len(),
        1
    );
    assert_eq!(
        joint
            .graph
            .nodes
            .iter()
            .filter(|n| matches!(n.kind, NodeKind::GetItem { .. }))
            .count(),
        4
    );
}

#[test]
fn gpt_joints_grow_by_the_same_nodes_per_layer() {
    let sizes: Vec<usize> = [2, 4, 6]
        .iter()
        .map(|&l| {
            let j = graphbug_autodiff::gpt_joint(l).expect("a GPT joint");
            j.graph.verify().unwrap();
            j.graph.nodes.len()
        })
        .collect();
    assert!(sizes[1] > sizes[0]);
    assert_eq!(sizes[2] - sizes[1], sizes[1] - sizes[0], "{sizes:?}");
}
