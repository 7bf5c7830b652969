//! Partitions compute what the joint graph computes: the forward graph (primals → forward
//! outputs + saved values) followed by the backward graph (saved values + tangents →
//! gradients), run by the interpreter, give bit for bit the joint graph's outputs. On
//! PyTorch's own joint graphs for every partitioner, memory budget and solver, on the
//! decomposed joints, and on random joint graphs (proptest).

use std::collections::HashMap;

use graphbug_aten::io::random_tensors;
use graphbug_aten::Interpreter;
use graphbug_autodiff::{decompose, joint_graph, DecompositionSet};
use graphbug_ir::models::{random_forward, random_step};
use graphbug_ir::{print_graph, Device, Graph};
use graphbug_partition::knapsack::KnapsackSolver;
use graphbug_partition::{
    default_partition, min_cut_rematerialization_partition, MinCutOptions, OpClasses, Partition,
};
use graphbug_tests::{joint_inputs, placeholder_metas, reference_joint, relative_error};
use proptest::prelude::*;
use tch::Tensor;

fn run(label: &str, g: &Graph, inputs: &[Tensor]) -> Vec<Option<Tensor>> {
    let inputs: Vec<Tensor> = inputs.iter().map(Tensor::shallow_clone).collect();
    Interpreter::new(g, &Device::cpu(), &HashMap::new())
        .unwrap_or_else(|e| panic!("{label}: {e}"))
        .run(&inputs)
        .unwrap_or_else(|e| panic!("{label}: {e}\n{}", print_graph(g)))
}

/// Runs the forward then the backward of `p` and compares with the joint's outputs.
fn check_split(
    label: &str,
    p: &Partition,
    num_fwd: usize,
    inputs: &[Tensor],
    want: &[Option<Tensor>],
) {
    let primals = p.forward.placeholders().len();
    let fw = run(&format!("{label} forward"), &p.forward, &inputs[..primals]);
    assert_eq!(
        fw.len(),
        num_fwd + p.report.saved.len(),
        "{label}: forward outputs"
    );
    let bw_inputs: Vec<Tensor> = fw[num_fwd..]
        .iter()
        .map(|t| {
            t.as_ref()
                .expect("saved values are tensors")
                .shallow_clone()
        })
        .chain(inputs[primals..].iter().map(Tensor::shallow_clone))
        .collect();
    let grads = run(&format!("{label} backward"), &p.backward, &bw_inputs);
    let got: Vec<&Option<Tensor>> = fw[..num_fwd].iter().chain(&grads).collect();
    assert_eq!(got.len(), want.len(), "{label}: outputs");
    for (k, (g, w)) in got.iter().zip(want).enumerate() {
        match (g, w) {
            // Bit for bit, NaN where the joint has NaN (random graphs overflow `exp`
            // chains): no tolerance, NaNs equal.
            (Some(g), Some(w)) => assert!(
                g.allclose(w, 0.0, 0.0, true),
                "{label}: output {k} differs (relative error {:e})",
                relative_error(g, w)
            ),
            (None, None) => {}
            _ => panic!("{label}: output {k} is None on one side only"),
        }
    }
}

/// The partitions to check: default, min-cut with both op-class families, and memory
/// budgets with every knapsack solver.
fn partitions(g: &Graph, n: usize) -> Vec<(String, Partition)> {
    let mut out = vec![(
        "default".to_string(),
        default_partition(g, n).expect("default partition"),
    )];
    for classes in [OpClasses::Inductor, OpClasses::Base] {
        let options = MinCutOptions {
            op_classes: classes,
            ..Default::default()
        };
        let p = min_cut_rematerialization_partition(g, n, &options).expect("min-cut");
        out.push((format!("min-cut {classes:?}"), p));
    }
    for solver in KnapsackSolver::ALL {
        for budget in [0.0, 0.3, 0.7] {
            let options = MinCutOptions {
                activation_memory_budget: budget,
                knapsack_solver: solver,
                ..Default::default()
            };
            let p = min_cut_rematerialization_partition(g, n, &options)
                .unwrap_or_else(|e| panic!("budget {budget} {solver}: {e}"));
            out.push((format!("min-cut budget {budget} {solver}"), p));
        }
    }
    out
}

#[test]
fn partitions_of_pytorchs_joints_compute_the_joint() {
    for model in ["mlp", "cnn", "gpt4"] {
        let (g, n) = reference_joint(model);
        let inputs = joint_inputs(model, &g, 5);
        let want = run(model, &g, &inputs);
        for (label, p) in partitions(&g, n) {
            check_split(&format!("{model} {label}"), &p, n, &inputs, &want);
        }
        // aot_eager_decomp_partition's path: decompose, then min-cut.
        let d = decompose(&g, &DecompositionSet::inductor()).expect("decomposes");
        let want_d = run(&format!("{model} decomposed"), &d, &inputs);
        let p = min_cut_rematerialization_partition(&d, n, &MinCutOptions::default())
            .expect("min-cut of the decomposed joint");
        check_split(
            &format!("{model} decomposed min-cut"),
            &p,
            n,
            &inputs,
            &want_d,
        );
        for (a, b) in want_d.iter().zip(&want) {
            if let (Some(a), Some(b)) = (a, b) {
                assert!(relative_error(a, b) <= 1e-5, "{model}: decomposed joint");
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]

    #[test]
    fn random_joints_keep_their_gradients(
        steps in prop::collection::vec(random_step(), 1..14),
        budget in prop_oneof![Just(1.0), Just(0.5), Just(0.0)],
        inductor_classes in any::<bool>(),
        seed in 0u64..1000,
    ) {
        let forward = random_forward(&steps);
        let requires_grad = vec![true; forward.placeholders().len()];
        let joint = joint_graph(&forward, &requires_grad).expect("joint graph");
        let (g, n) = (&joint.graph, joint.num_fwd_outputs);
        let inputs = random_tensors(&placeholder_metas(g), seed, tch::Device::Cpu).unwrap();
        let want = run("joint", g, &inputs);
        let options = MinCutOptions {
            op_classes: if inductor_classes { OpClasses::Inductor } else { OpClasses::Base },
            activation_memory_budget: budget,
            ..Default::default()
        };
        let p = min_cut_rematerialization_partition(g, n, &options)
            .unwrap_or_else(|e| panic!("{e}\n{}", print_graph(g)));
        check_split("min-cut", &p, n, &inputs, &want);
        check_split("default", &default_partition(g, n).unwrap(), n, &inputs, &want);
    }
}
