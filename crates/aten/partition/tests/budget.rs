//! The activation memory budget: every reachable budget is met, budget 1 is the
//! runtime-optimal cut, less memory costs more recomputation, random ops are never
//! recomputed (an impossible budget is reported), and every knapsack solver keeps to the
//! limit.

mod common;

use common::joint;

use graphbug_ir::parse_graph;
use graphbug_partition::knapsack::KnapsackSolver;
use graphbug_partition::{
    min_cut_rematerialization_partition, pareto_curve, BudgetStage, MinCutOptions, MinCutProblem,
    PartitionError,
};

const BUDGETS: [f64; 8] = [0.0, 0.05, 0.1, 0.25, 0.5, 0.75, 0.9, 1.0];

#[test]
fn every_budget_is_met_on_the_reference_joints() {
    for model in ["mlp", "cnn", "gpt4"] {
        let (g, n) = joint(model);
        let problem = MinCutProblem::new(&g, n, &MinCutOptions::default()).unwrap();
        let optimal = min_cut_rematerialization_partition(&g, n, &MinCutOptions::default())
            .unwrap()
            .report;
        let mut last_flops = 0u64;
        for solver in KnapsackSolver::ALL {
            for &budget in BUDGETS.iter().rev() {
                let options = MinCutOptions {
                    activation_memory_budget: budget,
                    knapsack_solver: solver,
                    ..Default::default()
                };
                let p = MinCutProblem::new(&g, n, &options).unwrap();
                let (part, choice) = p.partition_with_budget(budget).unwrap();
                assert!(
                    part.report.saved_bytes <= choice.limit_bytes,
                    "{model} {solver} budget {budget}: {} bytes over the limit {}",
                    part.report.saved_bytes,
                    choice.limit_bytes
                );
                assert_eq!(part.report.saved_bytes, choice.saved_bytes, "{model}");
                if budget == 1.0 {
                    assert_eq!(part.report, optimal, "{model}: budget 1 is the optimal cut");
                    assert_eq!(choice.stage, BudgetStage::RuntimeOptimal);
                }
                // The public entry point takes the same decision.
                let direct = min_cut_rematerialization_partition(&g, n, &options).unwrap();
                assert_eq!(direct.report, part.report, "{model} {solver} {budget}");
                if solver == KnapsackSolver::DynamicProgramming {
                    // Less memory is paid for with recomputation.
                    assert!(
                        part.report.recompute_flops >= last_flops,
                        "{model} budget {budget}: {} recomputed FLOPs, fewer than at a larger budget ({last_flops})",
                        part.report.recompute_flops
                    );
                    last_flops = part.report.recompute_flops;
                }
            }
        }
        // Budget 0 saves no more than the inputs.
        let (part, choice) = problem.partition_with_budget(0.0).unwrap();
        assert!(part.report.saved_bytes <= choice.inputs_bytes, "{model}");
        println!(
            "{model}: inputs {} B, optimal {} B, budget 0 saves {} B recomputing {:?}",
            choice.inputs_bytes,
            choice.runtime_optimal_bytes,
            part.report.saved_bytes,
            part.report.recomputed
        );
    }
}

#[test]
fn the_pareto_curve_runs_from_inputs_to_the_optimal_cut() {
    let (g, n) = joint("gpt4");
    let problem = MinCutProblem::new(&g, n, &MinCutOptions::default()).unwrap();
    let curve = pareto_curve(&problem, 10, None).unwrap();
    assert_eq!(curve.len(), 11);
    assert_eq!(curve[0].budget, 0.0);
    assert_eq!(curve[10].budget, 1.0);
    let bytes: Vec<u64> = curve.iter().map(|p| p.saved_bytes.unwrap()).collect();
    assert!(bytes.windows(2).all(|w| w[0] <= w[1]), "{bytes:?}");
    assert!(bytes[0] < bytes[10], "{bytes:?}");
    assert!(curve[0].recompute_flops > curve[10].recompute_flops);
}

/// x → dropout → mul by a weight; the mask and the dropped value feed the backward.
const DROPOUT: &str = r#"
class Joint(torch.nn.Module):
    def forward(self, primals_1: "f32[64, 64]", primals_2: "f32[64, 64]", tangents_1: "f32[64, 64]"):
        mm: "f32[64, 64]" = torch.ops.aten.mm.default(primals_1, primals_2)
        native_dropout = torch.ops.aten.native_dropout.default(mm, 0.5, True)
        getitem: "f32[64, 64]" = native_dropout[0]
        getitem_1: "b8[64, 64]" = native_dropout[1];  native_dropout = None
        relu: "f32[64, 64]" = torch.ops.aten.relu.default(getitem)
        sin: "f32[64, 64]" = torch.ops.aten.sin.default(relu)
        cos: "f32[64, 64]" = torch.ops.aten.cos.default(relu)
        mul: "f32[64, 64]" = torch.ops.aten.mul.Tensor(tangents_1, cos)
        threshold_backward: "f32[64, 64]" = torch.ops.aten.threshold_backward.default(mul, relu, 0)
        native_dropout_backward: "f32[64, 64]" = torch.ops.aten.native_dropout_backward.default(threshold_backward, getitem_1, 2.0)
        t: "f32[64, 64]" = torch.ops.aten.t.default(primals_1)
        mm_1: "f32[64, 64]" = torch.ops.aten.mm.default(t, native_dropout_backward)
        return (sin, None, mm_1)
"#;

#[test]
fn random_ops_are_never_recomputed_and_an_impossible_budget_is_reported() {
    let g = parse_graph(DROPOUT).unwrap();
    for &budget in &BUDGETS {
        let options = MinCutOptions {
            activation_memory_budget: budget,
            ..Default::default()
        };
        match min_cut_rematerialization_partition(&g, 1, &options) {
            Ok(p) => {
                assert!(
                    !p.report.recomputed.contains_key("aten.native_dropout"),
                    "budget {budget}: {:?}",
                    p.report.recomputed
                );
                assert!(
                    !p.backward
                        .nodes
                        .iter()
                        .any(|n| n.op().is_some_and(|o| o.name == "native_dropout")),
                    "budget {budget}: the backward draws new random numbers"
                );
            }
            Err(PartitionError::BudgetUnreachable {
                min_budget,
                min_bytes,
                ..
            }) => {
                assert!(min_budget > budget, "{budget} vs {min_budget}");
                // The mask (4 KiB of bools) at least must be saved.
                assert!(min_bytes >= 64 * 64, "{min_bytes}");
            }
            Err(e) => panic!("budget {budget}: {e}"),
        }
    }
    // Budget 0 (inputs only) cannot be met: the dropout's outputs must be saved.
    let options = MinCutOptions {
        activation_memory_budget: 0.0,
        ..Default::default()
    };
    let err = min_cut_rematerialization_partition(&g, 1, &options).unwrap_err();
    assert!(
        matches!(err, PartitionError::BudgetUnreachable { .. }),
        "{err}"
    );
    assert!(err.to_string().contains("unreachable"), "{err}");
}

#[test]
fn budgets_outside_zero_to_one_are_errors() {
    let (g, n) = joint("mlp");
    for budget in [-0.1, 1.5, f64::NAN] {
        let options = MinCutOptions {
            activation_memory_budget: budget,
            ..Default::default()
        };
        let err = min_cut_rematerialization_partition(&g, n, &options).unwrap_err();
        assert!(err.to_string().contains("outside 0..=1"), "{err}");
    }
}

/// Found by the gradient property test: functorch's weights make saving `exp` and `relu`
/// (112 bytes, near the backward) cheaper than saving the input (96 bytes, three uses
/// away), so a search by those weights never meets budget 0.5 (104 bytes). The knapsack
/// stage cuts by bytes and saves the input.
const INPUT_CHEAPER_IN_BYTES: &str = r#"
class Joint(torch.nn.Module):
    def forward(self, primals_1: "f32[4, 6]", tangents_1: "f32[4, 1]", tangents_2: "f32[6, 4]"):
        sum_1: "f32[4, 1]" = torch.ops.aten.sum.dim_IntList(primals_1, [1], True)
        sum_2: "f32[4, 1]" = torch.ops.aten.sum.dim_IntList(sum_1, [1], True);  sum_1 = None
        view: "f32[6, 4]" = torch.ops.aten.view.default(primals_1, [6, 4]);  primals_1 = None
        exp: "f32[6, 4]" = torch.ops.aten.exp.default(view);  view = None
        detach: "f32[6, 4]" = torch.ops.aten.detach.default(exp)
        relu: "f32[4, 1]" = torch.ops.aten.relu.default(sum_2);  sum_2 = None
        detach_3: "f32[4, 1]" = torch.ops.aten.detach.default(relu)
        detach_4: "f32[4, 1]" = torch.ops.aten.detach.default(detach_3);  detach_3 = None
        threshold_backward: "f32[4, 1]" = torch.ops.aten.threshold_backward.default(tangents_1, detach_4, 0);  tangents_1 = detach_4 = None
        detach_5: "f32[6, 4]" = torch.ops.aten.detach.default(detach);  detach = None
        mul: "f32[6, 4]" = torch.ops.aten.mul.Tensor(tangents_2, detach_5);  tangents_2 = detach_5 = None
        view_2: "f32[4, 6]" = torch.ops.aten.view.default(mul, [4, 6]);  mul = None
        expand: "f32[4, 1]" = torch.ops.aten.expand.default(threshold_backward, [4, 1]);  threshold_backward = None
        expand_1: "f32[4, 6]" = torch.ops.aten.expand.default(expand, [4, 6]);  expand = None
        add: "f32[4, 6]" = torch.ops.aten.add.Tensor(view_2, expand_1);  view_2 = expand_1 = None
        return (relu, exp, add)

"#;

#[test]
fn a_budget_that_saving_the_inputs_meets_is_met() {
    let g = parse_graph(INPUT_CHEAPER_IN_BYTES).unwrap();
    let problem = MinCutProblem::new(&g, 2, &MinCutOptions::default()).unwrap();
    let choice = problem.choose_saved_values(0.5).unwrap();
    assert_eq!(
        (
            choice.inputs_bytes,
            choice.runtime_optimal_bytes,
            choice.limit_bytes
        ),
        (96, 112, 104)
    );
    assert_eq!(choice.saved_bytes, 96);
    let saved: Vec<&str> = choice
        .saved
        .iter()
        .map(|&i| problem.graph().node(i).name.as_str())
        .collect();
    assert_eq!(saved, ["primals_1"]);
}
