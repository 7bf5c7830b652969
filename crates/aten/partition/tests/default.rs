//! The default partitioner on PyTorch's own joint graphs, against functorch's partitions.

mod common;

use common::{fixture, info};

use graphbug_ir::{parse_graph, print_graph, Graph};
use graphbug_partition::default_partition;

/// The graph text without its class line, for comparing graphs named differently.
fn body(g: &Graph) -> String {
    print_graph(g).split_once('\n').unwrap().1.to_string()
}

#[test]
fn saves_exactly_what_functorch_saves() {
    for model in ["mlp", "cnn", "gpt4"] {
        let joint = parse_graph(&fixture(model, "joint.py")).unwrap();
        let info = info(model);
        let n = info["num_fwd_outputs"].as_u64().unwrap() as usize;
        let p = default_partition(&joint, n).unwrap();
        let (want, want_bytes) = common::functorch_saved(&info, "default");
        assert_eq!(p.report.saved, want, "{model}");
        assert_eq!(p.report.saved_bytes, want_bytes, "{model}");
        assert_eq!(
            p.report.fw_ops as u64,
            info["default"]["fw_ops"].as_u64().unwrap(),
            "{model}"
        );
        assert_eq!(
            p.report.bw_ops as u64,
            info["default"]["bw_ops"].as_u64().unwrap(),
            "{model}"
        );
        // And the graphs themselves are functorch's, node for node.
        assert_eq!(
            body(&p.forward),
            body(&parse_graph(&fixture(model, "fw_default.py")).unwrap()),
            "{model} forward"
        );
        assert_eq!(
            body(&p.backward),
            body(&parse_graph(&fixture(model, "bw_default.py")).unwrap()),
            "{model} backward"
        );
    }
}

#[test]
fn bad_joints_are_named() {
    let joint = parse_graph(&fixture("mlp", "joint.py")).unwrap();
    let err = default_partition(&joint, 99).unwrap_err().to_string();
    assert!(
        err.contains("--num-fwd-outputs 99, but the joint graph returns 10 values"),
        "{err}"
    );
    let fwd = parse_graph(&fixture("mlp", "forward.py")).unwrap();
    let err = default_partition(&fwd, 1).unwrap_err().to_string();
    assert!(err.contains("input `arg0_1` is neither a primal"), "{err}");
    // A dynamic-shape joint: the default partitioner needs the symbols' values for its
    // saved bytes, and names the one missing.
    let dynamic = parse_graph(
        "class joint_helper(torch.nn.Module):
    def forward(self, primals_1: \"Sym(s0)\", primals_2: \"f32[s0, 4]\", tangents_1: \"f32[s0, 4]\"):
        relu: \"f32[s0, 4]\" = torch.ops.aten.relu.default(primals_2);  primals_2 = None
        threshold_backward: \"f32[s0, 4]\" = torch.ops.aten.threshold_backward.default(tangents_1, relu, 0);  tangents_1 = None
        return (relu, None, threshold_backward)
",
    )
    .unwrap();
    let err = default_partition(&dynamic, 1).unwrap_err().to_string();
    assert!(
        err.contains("value `relu` is f32[s0, 4]: its size needs a hint for s0"),
        "{err}"
    );
}

/// A forward tensor whose sizes are all the backward reads is not saved: its sizes are
/// (computed in the forward), after the input size that binds their symbol.
#[test]
fn a_tensor_only_measured_by_the_backward_saves_its_sizes() {
    let joint = parse_graph(
        "class joint_helper(torch.nn.Module):
    def forward(self, primals_1: \"Sym(s0)\", primals_2: \"f32[s0, 4]\", tangents_1: \"f32[s0, 4]\"):
        relu: \"f32[s0, 4]\" = torch.ops.aten.relu.default(primals_2);  primals_2 = None
        mul: \"f32[s0, 4]\" = torch.ops.aten.mul.Tensor(tangents_1, 2);  tangents_1 = None
        sym_size_int: \"Sym(s0)\" = torch.ops.aten.sym_size.int(relu, 0)
        view: \"f32[s0, 4]\" = torch.ops.aten.view.default(mul, [sym_size_int, 4]);  mul = sym_size_int = None
        return (relu, None, view)
",
    )
    .unwrap();
    let hints: graphbug_ir::Bindings = [("s0".to_string(), 3)].into_iter().collect();
    let p = graphbug_partition::default_partition_with(&joint, 1, &|_| false, &hints).unwrap();
    assert_eq!(p.report.saved, ["primals_1", "sym_size_int"]);
    assert_eq!(p.report.saved_bytes, 0);
    let fw = print_graph(&p.forward);
    assert!(
        fw.contains("return (relu, primals_1, sym_size_int)"),
        "{fw}"
    );
    let bw = print_graph(&p.backward);
    assert!(
        bw.contains(r#"forward(self, primals_1: "Sym(s0)", sym_size_int: "Sym(s0)", tangents_1: "f32[s0, 4]")"#),
        "{bw}"
    );
}

/// PyTorch's dynamic-shape joints (torch.compile(dynamic=True)), split as functorch's
/// default partitioner split them: the same forward and backward, node for node, saving
/// the same tensors and sizes in the same order.
#[test]
fn dynamic_shape_joints_save_exactly_what_functorch_saves() {
    for model in ["mlp", "reshape", "conv", "attention", "interpolate"] {
        let dir = format!("dynamic/{model}");
        let (joint, n, hints) = common::dynamic_joint(model);
        let p = graphbug_partition::default_partition_with(&joint, n, &|_| false, &hints)
            .unwrap_or_else(|e| panic!("{model}: {e}"));
        let want_fw = parse_graph(&fixture(&dir, "fw.py")).unwrap();
        let want_bw = parse_graph(&fixture(&dir, "bw.py")).unwrap();
        assert_eq!(body(&p.forward), body(&want_fw), "{model} forward");
        assert_eq!(body(&p.backward), body(&want_bw), "{model} backward");
        // The saved bytes at the hints, and as an expression that evaluates to them.
        common::assert_bytes_expression(&p.report, &hints, model);
        // functorch's saved tensors (its sizes live on the autograd context) at the hints.
        let want_bytes = common::saved_tensor_bytes(&want_fw, n, &hints);
        assert_eq!(p.report.saved_bytes, want_bytes, "{model}");
    }
}

#[test]
fn a_recompute_policy_moves_ops_to_the_backward() {
    let joint = parse_graph(&fixture("mlp", "joint.py")).unwrap();
    let relu = |n: &graphbug_ir::Node| n.op().is_some_and(|o| o.name == "relu");
    let p =
        graphbug_partition::default_partition_with(&joint, 1, &relu, &Default::default()).unwrap();
    assert!(
        !p.report.saved.contains(&"relu".to_string()),
        "{:?}",
        p.report.saved
    );
    assert!(
        p.report.saved.contains(&"addmm_1".to_string()),
        "{:?}",
        p.report.saved
    );
    let relus = |g: &Graph| g.nodes.iter().filter(|n| relu(n)).count();
    assert_eq!((relus(&p.forward), relus(&p.backward)), (1, 1));
    p.forward.verify().unwrap();
    p.backward.verify().unwrap();
}

/// Random ops run once, in the forward: their masks are saved, the backward never draws
/// them again, and nothing is saved to recompute them (functorch saves the same values).
#[test]
fn random_ops_stay_in_the_forward() {
    let (joint, n) = common::joint("dropout_block");
    let info = info("dropout_block");
    let p = default_partition(&joint, n).unwrap();
    let (want, want_bytes) = common::functorch_saved(&info, "default");
    assert_eq!(p.report.saved, want);
    assert_eq!(p.report.saved_bytes, want_bytes);
    let random_in_backward: Vec<&str> = p
        .backward
        .nodes
        .iter()
        .filter(|n| n.op().is_some_and(|op| op.is_random()))
        .map(|n| n.name.as_str())
        .collect();
    assert!(random_in_backward.is_empty(), "{random_in_backward:?}");
    assert!(p.report.recomputed.is_empty(), "{:?}", p.report.recomputed);
}

/// Forward outputs that the forward's outputs do not need (a group norm's mean and rstd,
/// topk's indices) and the `detach`es autograd leaves where it saves them are still
/// forward: they are saved, not recomputed by the backward (PyTorch's joints from the
/// conformance zoo, with functorch's figures).
#[test]
fn the_forward_tail_is_saved_as_functorch_saves_it() {
    for model in ["tail_group_norm", "tail_sort_topk"] {
        let (joint, n) = common::joint(model);
        let info = info(model);
        let p = default_partition(&joint, n).unwrap();
        let (want, want_bytes) = common::functorch_saved(&info, "default");
        assert_eq!(p.report.saved, want, "{model}");
        assert_eq!(p.report.saved_bytes, want_bytes, "{model}");
        assert!(
            p.report.recomputed.is_empty(),
            "{model}: {:?}",
            p.report.recomputed
        );
    }
}

/// Joints with effect tokens (`with_effects`), laid out as AOTAutograd lays them out (the
/// token returned first, no gradient for it), partition as functorch partitions them.
#[test]
fn effect_tokens_partition_as_functorch_partitions_them() {
    let (joint, n) = common::joint("effects_linalg_inv");
    let info = info("effects_linalg_inv");
    let p = default_partition(&joint, n).unwrap();
    let (want, want_bytes) = common::functorch_saved(&info, "default");
    assert_eq!(p.report.saved, want);
    assert_eq!(p.report.saved_bytes, want_bytes);
    // The effect stays in the forward, once.
    let effects = |g: &graphbug_ir::Graph| {
        g.nodes
            .iter()
            .filter(|n| n.op().is_some_and(|op| op.is_effectful()))
            .count()
    };
    assert_eq!((effects(&p.forward), effects(&p.backward)), (1, 0));
    let options = graphbug_partition::MinCutOptions::default();
    let m = graphbug_partition::min_cut_rematerialization_partition(&joint, n, &options).unwrap();
    let (_, mincut_bytes) = common::functorch_saved(&info, "mincut");
    assert!(m.report.saved_bytes <= mincut_bytes);
    assert_eq!((effects(&m.forward), effects(&m.backward)), (1, 0));
}
