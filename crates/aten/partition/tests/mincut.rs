//! The min-cut rematerialization partitioner: PyTorch's own joint graphs against functorch's
//! partitions, validity of the split, random graphs against the default partitioner, and
//! one test per option.

mod common;

use common::{fixture, info, joint};

use std::collections::HashSet;
use std::sync::Arc;

use graphbug_ir::models::{random_forward, random_step};
use graphbug_ir::passes::{default_side_effects, extract_subgraph};
use graphbug_ir::{
    parse_graph, Dtype, Graph, GraphBuilder, Meta, NodeId, NodeKind, OpName, TensorMeta, Value,
};
use graphbug_partition::default::extract_fwd_bwd;
use graphbug_partition::ops::{self, class};
use graphbug_partition::{
    default_partition, min_cut_rematerialization_partition, BanHeuristics, MinCutOptions,
    MinCutProblem, OpClasses, Partition, PartitionReport,
};
use proptest::prelude::*;

fn names(v: &serde_json::Value) -> Vec<String> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap().to_string())
        .collect()
}

fn mincut(model: &str, opts: &MinCutOptions) -> Partition {
    let (g, n) = joint(model);
    partition_with(&g, n, opts)
}

/// Partitions and checks the result against the joint as the partitioner sees it (after
/// CSE, which may merge forward outputs).
fn partition_with(g: &Graph, n: usize, opts: &MinCutOptions) -> Partition {
    let p = min_cut_rematerialization_partition(g, n, opts).unwrap();
    let problem = MinCutProblem::new(g, n, opts).unwrap();
    check_valid(problem.graph(), n, &p);
    p
}

/// Options with functorch's base (pre-inductor) op classes.
fn base_classes() -> MinCutOptions {
    MinCutOptions {
        op_classes: OpClasses::Base,
        ..Default::default()
    }
}

fn inductor() -> MinCutOptions {
    MinCutOptions {
        op_classes: OpClasses::Inductor,
        ..Default::default()
    }
}

fn recomputed_total(r: &PartitionReport) -> usize {
    r.recomputed.values().sum()
}

/// The checks every partition must pass, with `joint` the graph it was made from.
fn check_valid(joint: &Graph, num_fwd_outputs: usize, p: &Partition) {
    let (fw, bw) = (&p.forward, &p.backward);
    fw.verify().unwrap();
    bw.verify().unwrap();
    let name = |g: &Graph, id: NodeId| g.node(id).name.to_string();
    let primals: Vec<String> = joint
        .placeholders()
        .into_iter()
        .map(|i| name(joint, i))
        .filter(|s| s.starts_with("primals"))
        .collect();
    let tangents: Vec<String> = joint
        .placeholders()
        .into_iter()
        .map(|i| name(joint, i))
        .filter(|s| s.starts_with("tangents"))
        .collect();
    // The forward takes the primals and returns the forward outputs, then the saved values.
    let fw_inputs: Vec<String> = fw.placeholders().into_iter().map(|i| name(fw, i)).collect();
    assert_eq!(fw_inputs, primals);
    let out_name = |g: &Graph, v: &Value| v.as_node().map(|i| name(g, i));
    let fw_outs: Vec<Option<String>> = fw.outputs().iter().map(|v| out_name(fw, v)).collect();
    assert_eq!(fw_outs.len(), num_fwd_outputs + p.report.saved.len());
    let saved: Vec<Option<String>> = p.report.saved.iter().cloned().map(Some).collect();
    assert_eq!(fw_outs[num_fwd_outputs..], saved[..]);
    let joint_fw_outs: Vec<Option<String>> = joint.outputs()[..num_fwd_outputs]
        .iter()
        .map(|v| out_name(joint, v))
        .collect();
    assert_eq!(fw_outs[..num_fwd_outputs], joint_fw_outs[..]);
    // The backward takes the saved values, then the tangents, and returns one gradient per
    // primal; each saved value is read.
    let bw_inputs: Vec<String> = bw.placeholders().into_iter().map(|i| name(bw, i)).collect();
    let mut want = p.report.saved.clone();
    want.extend(tangents);
    assert_eq!(bw_inputs, want);
    assert_eq!(bw.outputs().len(), primals.len());
    let users = bw.users();
    for i in bw.placeholders() {
        if !name(bw, i).starts_with("tangents") {
            assert!(!users.is_unused(i), "saved `{}` is never read", name(bw, i));
        }
    }
    // No forward node reads a backward-only value (one that needs a tangent).
    let mut needs_tangent: HashSet<String> = HashSet::new();
    for node in &joint.nodes {
        let mut r = node.is_placeholder() && node.name.starts_with("tangents");
        node.for_each_input(|s| r |= needs_tangent.contains(joint.node(s).name.as_str()));
        if r {
            needs_tangent.insert(node.name.to_string());
        }
    }
    for node in &fw.nodes {
        assert!(
            !needs_tangent.contains(node.name.as_str()),
            "forward node `{}` needs a tangent",
            node.name
        );
    }
    assert_eq!(p.report.fw_ops, fw.num_call_function_nodes());
    assert_eq!(p.report.bw_ops, bw.num_call_function_nodes());
}

#[test]
fn saves_no_more_than_functorch() {
    for opts in [base_classes(), inductor()] {
        for model in ["mlp", "cnn", "gpt4"] {
            let p = mincut(model, &opts);
            let info = info(model);
            let theirs = names(&info["mincut"]["saved"]);
            let ours = &p.report.saved;
            let only_ours: Vec<&String> = ours.iter().filter(|s| !theirs.contains(s)).collect();
            let only_theirs: Vec<&String> = theirs.iter().filter(|s| !ours.contains(s)).collect();
            let bound = info["mincut"]["saved_bytes"].as_u64().unwrap();
            println!(
                "{:?} {model}: we save {} bytes ({} fw / {} bw ops), functorch {bound} ({} / {}); \
                 only we save {only_ours:?}; only functorch saves {only_theirs:?}; we recompute {:?}",
                opts.op_classes,
                p.report.saved_bytes,
                p.report.fw_ops,
                p.report.bw_ops,
                info["mincut"]["fw_ops"],
                info["mincut"]["bw_ops"],
                p.report.recomputed,
            );
            assert!(
                p.report.saved_bytes <= bound,
                "{model}: {} > {bound}",
                p.report.saved_bytes
            );
            let default_bytes = info["default"]["saved_bytes"].as_u64().unwrap();
            assert!(p.report.saved_bytes <= default_bytes, "{model}");
        }
    }
}

#[test]
fn mlp_matches_functorch_up_to_equal_weight_choices() {
    // functorch saves `t_3` = t(t_2) and `t_7` = t(t_1), transposes computed for the
    // backward; we save `t_2` / `t_1`, which the forward has anyway: same bytes, two fewer
    // forward ops.
    let p = mincut("mlp", &MinCutOptions::default());
    assert_eq!(
        p.report.saved,
        [
            "primals_3",
            "primals_4",
            "primals_9",
            "addmm",
            "gelu",
            "getitem",
            "getitem_1",
            "getitem_2",
            "t_1",
            "relu",
            "t_2"
        ]
    );
    assert_eq!(p.report.saved_bytes, 28736);
}

#[test]
fn reports_are_deterministic_and_read_old_json() {
    let a = mincut("gpt4", &inductor()).report;
    let b = mincut("gpt4", &inductor()).report;
    assert_eq!(a, b);
    assert_eq!(
        serde_json::to_string(&a).unwrap(),
        serde_json::to_string(&b).unwrap()
    );
    assert_eq!(
        a.recomputed.get("aten.tril"),
        Some(&1),
        "{:?}",
        a.recomputed
    );
    // Reports written before `recomputed` existed still load.
    let old = r#"{"saved": ["x"], "saved_bytes": 4, "fw_ops": 1, "bw_ops": 2}"#;
    let r: PartitionReport = serde_json::from_str(old).unwrap();
    assert!(r.recomputed.is_empty());
}

#[test]
fn the_default_partitioner_reports_recomputation_too() {
    let (g, n) = joint("mlp");
    let relu = |node: &graphbug_ir::Node| node.op().is_some_and(|o| o.name == "relu");
    let p = graphbug_partition::default_partition_with(&g, n, &relu, &Default::default()).unwrap();
    assert_eq!(p.report.recomputed.get("aten.relu"), Some(&1));
    assert!(default_partition(&g, n)
        .unwrap()
        .report
        .recomputed
        .is_empty());
}

/// Peak bytes of live values while running `g` in order (inputs live throughout).
fn peak_bytes(g: &Graph) -> u64 {
    let users = g.users();
    let mut last_use = vec![0usize; g.nodes.len()];
    for id in g.ids() {
        g.node(id)
            .for_each_input(|s| last_use[s.index()] = last_use[s.index()].max(id.index()));
    }
    let size = |id: NodeId| match &g.node(id).meta {
        Meta::Tensor(t) => t.nbytes(),
        Meta::Multi(items) => items.iter().flatten().map(|t| t.nbytes()).sum(),
        Meta::Unknown | Meta::SymTensor(_) | Meta::Sym(_) => 0,
    };
    let (mut live, mut peak) = (0u64, 0u64);
    let mut frees: Vec<Vec<NodeId>> = vec![Vec::new(); g.nodes.len()];
    for id in g.ids() {
        if !g.node(id).is_placeholder() && !users.by_output[id.index()] {
            frees[last_use[id.index()].max(id.index())].push(id);
        }
    }
    for id in g.ids() {
        live += size(id);
        peak = peak.max(live);
        for &f in &frees[id.index()] {
            live -= size(f);
        }
    }
    peak
}

#[test]
fn the_backward_recomputes_just_in_time() {
    for model in ["mlp", "cnn", "gpt4"] {
        let (g, n) = joint(model);
        let opts = MinCutOptions {
            aggressive_recomputation: true,
            ..inductor()
        };
        let problem = MinCutProblem::new(&g, n, &opts).unwrap();
        let cut = problem
            .solve(&problem.heuristic_bans(opts.effective_bans(), None))
            .unwrap();
        let p = problem.partition(&cut.saved).unwrap();
        assert!(recomputed_total(&p.report) > 0, "{model}");
        let saved: Vec<NodeId> = p
            .report
            .saved
            .iter()
            .map(|s| problem.graph().find(s).unwrap())
            .collect();
        let (_, unordered) = extract_fwd_bwd(problem.graph(), n, &saved).unwrap();
        let (before, after) = (peak_bytes(&unordered), peak_bytes(&p.backward));
        println!("{model}: backward peak {before} bytes in joint order, {after} reordered");
        if model == "gpt4" {
            assert!(after <= before, "{model}: {after} > {before}");
        } else {
            assert!(after < before, "{model}: {after} >= {before}");
        }
        if model == "mlp" {
            // The recomputed `gelu` runs right before its only reader.
            let pos = |name: &str| p.backward.find(name).unwrap().index();
            assert_eq!(pos("gelu") + 1, pos("native_layer_norm_backward"));
        }
    }
}

#[test]
fn bad_input_is_named() {
    let (g, _) = joint("mlp");
    let opts = MinCutOptions::default();
    let err = |g: &Graph, n: usize, o: &MinCutOptions| {
        min_cut_rematerialization_partition(g, n, o)
            .unwrap_err()
            .to_string()
    };
    let e = err(&g, 99, &opts);
    assert!(
        e.contains("--num-fwd-outputs 99, but the joint graph returns 10 values"),
        "{e}"
    );
    let e = err(&g, 2, &opts);
    assert!(e.contains("one gradient per primal"), "{e}");
    let fwd = parse_graph(&fixture("mlp", "forward.py")).unwrap();
    let e = err(&fwd, 1, &opts);
    assert!(e.contains("input `arg0_1` is neither a primal"), "{e}");
    // A value the cut may save without a shape.
    let mut no_meta = g.clone();
    let gelu = no_meta.find("gelu").unwrap();
    no_meta.nodes[gelu.index()].meta = Meta::Unknown;
    let e = err(&no_meta, 1, &opts);
    assert!(e.contains("`gelu` has no shape annotation"), "{e}");
    // A node reading a later node.
    let mut broken = g.clone();
    let relu = broken.find("relu").unwrap();
    if let NodeKind::Call { args, .. } = &mut broken.nodes[relu.index()].kind {
        args[0] = Value::Node(NodeId(relu.0 + 5));
    }
    let e = err(&broken, 1, &opts);
    assert!(e.contains("relu"), "{e}");
    // Budgets outside 0..=1.
    for budget in [-0.1, 1.5, f64::NAN] {
        let o = MinCutOptions {
            activation_memory_budget: budget,
            ..Default::default()
        };
        assert!(err(&g, 1, &o).contains("outside 0..=1"));
    }
    let o = MinCutOptions {
        activation_memory_budget: 0.5,
        ..Default::default()
    };
    assert!(min_cut_rematerialization_partition(&g, 1, &o).is_ok());
    // A policy that asks for the impossible: recompute a getitem of a layer norm, which can
    // only be saved whole.
    let o = MinCutOptions {
        must_recompute: Some(Arc::new(|n: &graphbug_ir::Node| n.name == "getitem_1")),
        ..Default::default()
    };
    let e = err(&g, 1, &o);
    assert!(e.contains("no finite cut"), "{e}");
}

#[test]
fn every_fixture_op_has_a_class() {
    let known = ops::known_ops();
    for model in ["mlp", "cnn", "gpt4"] {
        let (g, _) = joint(model);
        for node in &g.nodes {
            if let Some(op) = node.op() {
                let q = format!("{}.{}", op.namespace, op.name);
                assert!(known.contains(q.as_str()), "{model}: {q}");
            }
        }
    }
}

// ---- Options ----

/// x → mul(x, w1) → relu → mul(·, w2): the backward needs x, w1 and w2 anyway, so
/// recomputing `mul` and `relu` from them is free.
fn relu_graph() -> (Graph, usize) {
    let f32 = |s: &[i64]| TensorMeta::new(Dtype::Float32, s);
    let mut b = GraphBuilder::new("Relu");
    let x = b.input("x", f32(&[8, 16]));
    let w1 = b.input("w1", f32(&[8, 16]));
    let w2 = b.input("w2", f32(&[8, 16]));
    let a = b.call(OpName::aten("mul", "Tensor"), [x.into(), w1.into()]);
    b.set_meta(a, f32(&[8, 16]));
    let r = b.call(OpName::aten("relu", "default"), [a.into()]);
    b.set_meta(r, f32(&[8, 16]));
    let o = b.call(OpName::aten("mul", "Tensor"), [r.into(), w2.into()]);
    b.set_meta(o, f32(&[8, 16]));
    b.output([o.into()]);
    let fwd = b.finish().unwrap();
    let j = graphbug_autodiff::joint_graph(&fwd, &[true, true, true]).unwrap();
    (j.graph, j.num_fwd_outputs)
}

#[test]
fn banning_an_op_makes_it_saved() {
    let (g, n) = relu_graph();
    let p = partition_with(&g, n, &MinCutOptions::default());
    assert_eq!(p.report.saved, ["primals_1", "primals_2", "primals_3"]);
    assert_eq!(p.report.recomputed.get("aten.relu"), Some(&1));
    for name in ["relu", "aten.relu", "aten::relu", "aten.relu.default"] {
        let opts = MinCutOptions {
            banned_ops: vec![name.to_string()],
            ..Default::default()
        };
        let p = partition_with(&g, n, &opts);
        assert!(
            p.report.saved.contains(&"relu".to_string()),
            "{name}: {p:?}"
        );
        assert_eq!(p.report.recomputed.get("aten.relu"), None);
    }
}

#[test]
fn must_save_and_must_recompute_policies() {
    let (g, n) = relu_graph();
    let opts = MinCutOptions {
        must_save: Some(Arc::new(|n: &graphbug_ir::Node| n.name == "mul")),
        ..Default::default()
    };
    // `mul` is not recomputed: the backward gets `relu` (or `mul`) from the forward.
    let p = partition_with(&g, n, &opts);
    assert!(p.report.recomputed.is_empty(), "{:?}", p.report);
    assert!(
        p.report.saved.contains(&"relu".to_string()),
        "{:?}",
        p.report
    );
    // mlp saves `gelu`; a policy can make the backward recompute it from `addmm`.
    let opts = MinCutOptions {
        must_recompute: Some(Arc::new(|n: &graphbug_ir::Node| {
            n.op().is_some_and(|o| o.name == "gelu")
        })),
        ..Default::default()
    };
    let p = mincut("mlp", &opts);
    assert!(!p.report.saved.contains(&"gelu".to_string()));
    assert!(p.report.saved.contains(&"addmm".to_string()));
    assert_eq!(p.report.recomputed.get("aten.gelu"), Some(&1));
}

#[test]
fn a_recomputable_op_override_replaces_the_set() {
    let (g, n) = relu_graph();
    let opts = MinCutOptions {
        recomputable_ops: Some(vec!["aten.mul".into()]),
        ..Default::default()
    };
    let p = partition_with(&g, n, &opts);
    assert!(
        p.report.saved.contains(&"relu".to_string()),
        "{:?}",
        p.report
    );
    let opts = MinCutOptions {
        recomputable_ops: Some(Vec::new()),
        ..Default::default()
    };
    let p = partition_with(&g, n, &opts);
    assert!(p.report.recomputed.is_empty(), "{:?}", p.report);
}

#[test]
fn aggressive_recomputation_recomputes_more() {
    for model in ["cnn", "gpt4"] {
        let base = mincut(model, &inductor());
        let opts = MinCutOptions {
            aggressive_recomputation: true,
            ..inductor()
        };
        let aggressive = mincut(model, &opts);
        println!(
            "{model}: {} -> {} bytes, recomputing {:?} -> {:?}",
            base.report.saved_bytes,
            aggressive.report.saved_bytes,
            base.report.recomputed,
            aggressive.report.recomputed
        );
        assert!(recomputed_total(&aggressive.report) > recomputed_total(&base.report));
        assert!(
            aggressive.report.saved_bytes < base.report.saved_bytes,
            "{model}"
        );
    }
    let bans = BanHeuristics::default().aggressive();
    assert!(bans.reduction && !bans.not_in_allowlist && !bans.materialized_backward);
}

#[test]
fn recompute_views_saves_no_views() {
    let (g, _) = joint("gpt4");
    let views = ops::OpTypes::new(OpClasses::Inductor, None, &[]);
    let is_view = |name: &str| {
        let id = g.find(name).unwrap();
        views.of_node(g.node(id)) & class::VIEW != 0
    };
    let base = mincut("gpt4", &inductor());
    assert!(base.report.saved.iter().any(|s| is_view(s)));
    let opts = MinCutOptions {
        recompute_views: true,
        ..inductor()
    };
    let p = mincut("gpt4", &opts);
    let saved_views: Vec<&String> = p.report.saved.iter().filter(|s| is_view(s)).collect();
    assert!(saved_views.is_empty(), "{saved_views:?}");
    assert!(recomputed_total(&p.report) > recomputed_total(&base.report));
}

#[test]
fn max_dist_from_bw_bans_distant_nodes() {
    let base = mincut("gpt4", &inductor());
    assert!(recomputed_total(&base.report) > 0);
    let opts = MinCutOptions {
        max_dist_from_bw: 0,
        ..inductor()
    };
    let near = mincut("gpt4", &opts);
    assert!(
        recomputed_total(&near.report) < recomputed_total(&base.report),
        "{:?} vs {:?}",
        near.report.recomputed,
        base.report.recomputed
    );
    // Only inductor classes apply it.
    let opts = MinCutOptions {
        max_dist_from_bw: 0,
        ..base_classes()
    };
    assert_eq!(
        mincut("gpt4", &opts).report,
        mincut("gpt4", &base_classes()).report
    );
}

#[test]
fn cse_merges_the_per_layer_masks() {
    let with = mincut("gpt4", &base_classes());
    let opts = MinCutOptions {
        cse: false,
        ..base_classes()
    };
    let without = mincut("gpt4", &opts);
    let trils = |p: &Partition| {
        p.report
            .saved
            .iter()
            .filter(|s| s.starts_with("tril"))
            .count()
    };
    assert_eq!((trils(&with), trils(&without)), (1, 4));
    assert!(with.report.saved_bytes < without.report.saved_bytes);
}

#[test]
fn inductor_classes_recompute_more_than_base_ones() {
    let d = mincut("gpt4", &base_classes());
    let i = mincut("gpt4", &inductor());
    assert!(i.report.saved_bytes < d.report.saved_bytes);
    assert!(recomputed_total(&i.report) > recomputed_total(&d.report));
}

#[test]
fn ban_heuristics_can_be_turned_off_one_by_one() {
    // Relaxing one heuristic after the other never bans more, and each step bans less on
    // some reference joint.
    let mut steps = vec![BanHeuristics::default()];
    let relax: [fn(&mut BanHeuristics); 5] = [
        |b| b.used_far_apart = false,
        |b| b.long_fusible_chains = false,
        |b| b.materialized_backward = false,
        |b| b.not_in_allowlist = false,
        |b| b.reduction = false,
    ];
    for f in relax {
        let mut b = *steps.last().unwrap();
        f(&mut b);
        steps.push(b);
    }
    let mut fewer = vec![false; steps.len() - 1];
    for model in ["mlp", "cnn", "gpt4"] {
        let (g, n) = joint(model);
        let problem = MinCutProblem::new(&g, n, &inductor()).unwrap();
        let count = |b: &BanHeuristics| {
            problem
                .heuristic_bans(*b, None)
                .iter()
                .filter(|&&x| x)
                .count()
        };
        let counts: Vec<usize> = steps.iter().map(count).collect();
        for k in 1..steps.len() {
            assert!(counts[k] <= counts[k - 1], "{model}: {:?}", steps[k]);
            fewer[k - 1] |= counts[k] < counts[k - 1];
        }
        // `dont_ban` lifts bans, and the cut can only get cheaper.
        let bans = problem.heuristic_bans(BanHeuristics::default(), None);
        let lifted = problem.heuristic_bans(BanHeuristics::default(), Some(&bans));
        assert!(lifted.iter().enumerate().all(|(i, &b)| !b || !bans[i]));
        assert!(lifted.iter().all(|&b| !b), "{model}");
        let (a, b) = (
            problem.solve(&bans).unwrap(),
            problem.solve(&lifted).unwrap(),
        );
        assert!(b.weight <= a.weight, "{model}");
    }
    assert_eq!(fewer, [true; 5]);
}

// ---- Random graphs ----

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn random_joints_partition_validly_and_save_no_more_than_default(
        steps in prop::collection::vec(random_step(), 1..14),
        inductor_classes in any::<bool>(),
    ) {
        let fwd = random_forward(&steps);
        let requires_grad = vec![true; fwd.placeholders().len()];
        let j = graphbug_autodiff::joint_graph(&fwd, &requires_grad)
            .unwrap_or_else(|e| panic!("{e}\n{fwd}"));
        let (g, n) = (&j.graph, j.num_fwd_outputs);
        let opts = MinCutOptions {
            op_classes: if inductor_classes { OpClasses::Inductor } else { OpClasses::Base },
            ..Default::default()
        };
        let p = min_cut_rematerialization_partition(g, n, &opts)
            .unwrap_or_else(|e| panic!("{e}\n{g}"));
        let problem = MinCutProblem::new(g, n, &opts).unwrap();
        check_valid(problem.graph(), n, &p);
        // On the cost model the cut minimises, it saves no more than the default partition.
        let d = default_partition(problem.graph(), n).unwrap();
        let weight = |saved: &[String]| -> u128 {
            saved
                .iter()
                .map(|s| problem.weight(problem.graph().find(s).unwrap()).unwrap())
                .sum()
        };
        prop_assert!(
            weight(&p.report.saved) <= weight(&d.report.saved),
            "min-cut {:?} ({} bytes) vs default {:?} ({} bytes)\n{g}",
            p.report.saved, p.report.saved_bytes, d.report.saved, d.report.saved_bytes
        );
    }
}

#[test]
fn extracted_graphs_match_extract_subgraph() {
    // The backward's saved inputs are exactly those `extract_subgraph` would keep.
    let (g, n) = joint("cnn");
    let problem = MinCutProblem::new(&g, n, &MinCutOptions::default()).unwrap();
    let cut = problem
        .solve(&problem.heuristic_bans(BanHeuristics::default(), None))
        .unwrap();
    let p = problem.partition(&cut.saved).unwrap();
    let graph = problem.graph();
    let tangents: Vec<NodeId> = graph
        .placeholders()
        .into_iter()
        .filter(|&i| graph.node(i).name.starts_with("tangents"))
        .collect();
    let mut inputs = cut.saved.clone();
    inputs.extend(&tangents);
    let probe =
        extract_subgraph(graph, &inputs, &graph.outputs()[n..], &default_side_effects).unwrap();
    let users = probe.users();
    let read: Vec<String> = (0..cut.saved.len())
        .filter(|&k| !users.is_unused(NodeId(k as u32)))
        .map(|k| probe.nodes[k].name.to_string())
        .collect();
    assert_eq!(p.report.saved, read);
}

/// Min-cut never recomputes a random op, and saves no more than functorch's min-cut on a
/// joint graph with dropout.
#[test]
fn random_ops_are_never_recomputed() {
    let (joint, n) = common::joint("dropout_block");
    let info = common::info("dropout_block");
    let p = min_cut_rematerialization_partition(&joint, n, &MinCutOptions::default()).unwrap();
    assert!(
        p.report.saved_bytes <= info["mincut"]["saved_bytes"].as_u64().unwrap(),
        "{} bytes",
        p.report.saved_bytes
    );
    for node in &p.backward.nodes {
        assert!(
            !node.op().is_some_and(|op| op.is_random()),
            "the backward runs `{}`",
            node.name
        );
    }
}

/// Where two cuts weigh the same, the one saving fewer bytes (fmod: one `div`, not both
/// inputs), and a returned value is not merged with its twin the backward recomputes
/// (softsign's `div`): both save exactly what functorch saves (OpInfo joints from the
/// conformance suite).
#[test]
fn ties_save_fewer_bytes_and_returned_values_stay_apart() {
    for model in ["mincut_fmod", "mincut_softsign"] {
        let (joint, n) = common::joint(model);
        let info = common::info(model);
        let p = min_cut_rematerialization_partition(&joint, n, &MinCutOptions::default()).unwrap();
        let (want, want_bytes) = common::functorch_saved(&info, "mincut");
        assert_eq!(p.report.saved, want, "{model}");
        assert_eq!(p.report.saved_bytes, want_bytes, "{model}");
    }
}

/// PyTorch's dynamic-shape joints: the min-cut weighs tensors at the size hints (as
/// functorch does) and saves exactly functorch's bytes there; the split is written with
/// the symbols, and the backward binds every symbol it mentions from its inputs.
#[test]
fn dynamic_shape_joints_save_functorchs_bytes_at_the_hints() {
    for model in ["mlp", "reshape", "conv", "attention", "interpolate"] {
        let (joint, n, hints) = common::dynamic_joint(model);
        let options = MinCutOptions {
            hints: hints.clone(),
            ..MinCutOptions::default()
        };
        let p = min_cut_rematerialization_partition(&joint, n, &options)
            .unwrap_or_else(|e| panic!("{model}: {e}"));
        let functorch = parse_graph(&fixture(&format!("dynamic/{model}"), "fw_mincut.py")).unwrap();
        let want = common::saved_tensor_bytes(&functorch, n, &hints);
        assert_eq!(p.report.saved_bytes, want, "{model}: {:?}", p.report.saved);
        assert_eq!(
            common::saved_tensor_bytes(&p.forward, n, &hints),
            want,
            "{model}"
        );
        assert!(
            p.forward.nodes.iter().any(|n| n.meta.is_symbolic()),
            "{model}: the forward keeps its symbols"
        );
        common::assert_self_binding(&p.backward, &format!("{model} backward"));
        common::assert_bytes_expression(&p.report, &hints, model);
    }
    // Without a hint, the cut cannot weigh the tensors: the symbol is named.
    let (joint, n, _) = common::dynamic_joint("mlp");
    let err = min_cut_rematerialization_partition(&joint, n, &MinCutOptions::default())
        .unwrap_err()
        .to_string();
    assert!(err.contains("its size needs a hint for s33"), "{err}");
}
