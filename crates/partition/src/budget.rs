//! The activation memory budget of the min-cut partitioner (functorch's
//! `activation_memory_budget`, `choose_saved_values_set`): between saving only the inputs
//! (budget 0) and the runtime-optimal cut (budget 1), recompute more to save less.
//!
//! The budget maps to a byte limit `inputs + budget · (runtime_optimal − inputs)`. The
//! search tries cheaper cuts in order: the runtime-optimal one, one with functorch's
//! "more aggressive" bans off, one with every ban heuristic off; then a knapsack chooses
//! which of the still-banned (expensive but recomputable) forward nodes to keep banned,
//! by memory and estimated runtime, and the cut is solved again with the others allowed,
//! now least bytes first (functorch's weights only break ties): its distance-weighted
//! capacities can prefer saving more bytes near the backward over an input, so a cut by
//! them alone might never reach a budget that saving the inputs meets.
//! Unlike functorch, the result is checked: a cut over the limit shrinks the knapsack's
//! capacity (a bisection) until the cut fits, so a reachable budget is never overshot.
//! Random ops and must-save nodes are never recomputed; a budget only reachable by
//! recomputing them is reported as unreachable.

use graphbug_ir::NodeId;
use serde::{Deserialize, Serialize};

use crate::cost::CostModel;
use crate::default::{Partition, PartitionError};
use crate::knapsack::{self, KnapsackItem};
use crate::mincut::{BanHeuristics, CutObjective, MinCutProblem};
use crate::ops::class;

/// Bisection steps on the knapsack capacity when a cut overshoots the limit.
const MAX_BISECTIONS: usize = 24;

/// Which step of the budget search produced the saved values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BudgetStage {
    /// The runtime-optimal cut already fits (or activations are no bigger than the inputs).
    RuntimeOptimal,
    /// The cut with the far-apart, long-chain and materialized-backward bans off.
    MoreAggressive,
    /// The cut with every ban heuristic off.
    Aggressive,
    /// A knapsack over the still-banned recomputable nodes.
    Knapsack,
}

/// What the budget search chose and the figures it used.
#[derive(Clone, Debug, PartialEq)]
pub struct BudgetChoice {
    /// The values to save (ids of [`MinCutProblem::graph`]), in graph order.
    pub saved: Vec<NodeId>,
    /// Bytes of the values saved (those the backward reads).
    pub saved_bytes: u64,
    /// Bytes of all primals: the budget-0 end of the scale.
    pub inputs_bytes: u64,
    /// Bytes of the runtime-optimal cut: the budget-1 end of the scale.
    pub runtime_optimal_bytes: u64,
    /// The byte limit the budget allows.
    pub limit_bytes: u64,
    /// The step that produced the saved values.
    pub stage: BudgetStage,
}

impl MinCutProblem {
    /// Bytes of the values in `saved` that the backward actually reads.
    pub fn effective_saved_bytes(&self, saved: &[NodeId]) -> u64 {
        let reads = self.backward_reads(saved);
        saved
            .iter()
            .filter(|s| reads[s.index()])
            .map(|&s| self.size_of(s).unwrap_or(0))
            .sum()
    }

    /// Chooses the values to save under `budget` (0..=1; see the module docs).
    pub fn choose_saved_values(&self, budget: f64) -> Result<BudgetChoice, PartitionError> {
        if !(0.0..=1.0).contains(&budget) {
            return Err(PartitionError::BadOption(format!(
                "activation memory budget {budget} is outside 0..=1"
            )));
        }
        let graph = self.graph();
        let inputs_bytes: u64 = graph
            .ids()
            .filter(|&id| self.is_primal(id))
            .map(|id| self.size_of(id).unwrap_or(0))
            .sum();
        let bans = self.options().effective_bans();
        let optimal = self.solve(&self.heuristic_bans(bans, None))?.saved;
        let optimal_bytes = self.effective_saved_bytes(&optimal);
        let choice = |saved: Vec<NodeId>, limit: u64, stage| BudgetChoice {
            saved_bytes: self.effective_saved_bytes(&saved),
            saved,
            inputs_bytes,
            runtime_optimal_bytes: optimal_bytes,
            limit_bytes: limit,
            stage,
        };
        if budget >= 1.0 || optimal_bytes <= inputs_bytes {
            return Ok(choice(optimal, optimal_bytes, BudgetStage::RuntimeOptimal));
        }
        let span = (optimal_bytes - inputs_bytes) as f64;
        let limit = inputs_bytes + (budget * span).floor() as u64;
        if optimal_bytes <= limit {
            return Ok(choice(optimal, limit, BudgetStage::RuntimeOptimal));
        }
        let more_aggressive = BanHeuristics {
            used_far_apart: false,
            long_fusible_chains: false,
            materialized_backward: false,
            ..bans
        };
        let cut = self
            .solve(&self.heuristic_bans(more_aggressive, None))?
            .saved;
        if self.effective_saved_bytes(&cut) <= limit {
            return Ok(choice(cut, limit, BudgetStage::MoreAggressive));
        }
        let aggressive = BanHeuristics {
            not_in_allowlist: false,
            ..more_aggressive
        };
        let banned = self.heuristic_bans(aggressive, None);
        let cut = self.solve(&banned)?.saved;
        if self.effective_saved_bytes(&cut) <= limit {
            return Ok(choice(cut, limit, BudgetStage::Aggressive));
        }

        // The still-banned nodes that could be recomputed: forward nodes on the way to the
        // backward, neither inputs, random, nor pinned by `must_save`.
        let candidates: Vec<NodeId> = graph
            .ids()
            .filter(|&id| {
                banned[id.index()]
                    && self.is_fw(id)
                    && !self.is_primal(id)
                    && !self.is_must_save(id)
                    && self.op_class(id) & class::RANDOM == 0
                    && self.dist_from_bw(id) != crate::mincut::UNREACHABLE_FROM_BW
            })
            .collect();
        let model = CostModel::default();
        let items: Vec<KnapsackItem> = candidates
            .iter()
            .map(|&id| KnapsackItem {
                memory: self.size_of(id).unwrap_or(0),
                runtime: model.estimate_runtime(graph, id),
            })
            .collect();
        let solver = self.options().knapsack_solver;
        // The cut when the knapsack keeps `capacity` bytes of candidates banned.
        let cut_for = |capacity: u64| -> Result<(Vec<NodeId>, u64), PartitionError> {
            let solution = knapsack::solve(solver, &items, capacity)?;
            let mut dont_ban = vec![false; graph.nodes.len()];
            for &k in &solution.recomputed {
                dont_ban[candidates[k].index()] = true;
            }
            let bans = self.heuristic_bans(aggressive, Some(&dont_ban));
            let saved = self.solve_for(&bans, CutObjective::Bytes)?.saved;
            let bytes = self.effective_saved_bytes(&saved);
            Ok((saved, bytes))
        };
        // Everything recomputable recomputed: the least the forward can save.
        let (floor, floor_bytes) = cut_for(0)?;
        if floor_bytes > limit {
            return Err(PartitionError::BudgetUnreachable {
                budget,
                min_budget: (floor_bytes.saturating_sub(inputs_bytes)) as f64 / span,
                min_bytes: floor_bytes,
            });
        }
        let capacity = limit - inputs_bytes.min(limit);
        let (saved, bytes) = cut_for(capacity)?;
        if bytes <= limit {
            return Ok(choice(saved, limit, BudgetStage::Knapsack));
        }
        // The knapsack's estimate overshot (the cut saves other values than the banned
        // ones it priced): bisect on the capacity for the largest one whose cut fits.
        let (mut lo, mut hi) = (0u64, capacity);
        let mut best = floor;
        for _ in 0..MAX_BISECTIONS {
            if hi - lo <= 1 {
                break;
            }
            let mid = lo + (hi - lo) / 2;
            let (saved, bytes) = cut_for(mid)?;
            if bytes <= limit {
                lo = mid;
                best = saved;
            } else {
                hi = mid;
            }
        }
        Ok(choice(best, limit, BudgetStage::Knapsack))
    }

    /// The partition for a memory budget, with the choice that led to it.
    pub fn partition_with_budget(
        &self,
        budget: f64,
    ) -> Result<(Partition, BudgetChoice), PartitionError> {
        let choice = self.choose_saved_values(budget)?;
        Ok((self.partition(&choice.saved)?, choice))
    }
}

/// One point of the memory/recompute curve.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ParetoPoint {
    /// The budget asked for.
    pub budget: f64,
    /// Bytes saved, or `None` when the budget is unreachable.
    pub saved_bytes: Option<u64>,
    /// FLOPs recomputed by the backward.
    pub recompute_flops: u64,
    /// Estimated seconds of recomputation (nominal machine).
    pub recompute_seconds: f64,
    /// Forward ops the backward recomputes.
    pub recomputed_ops: usize,
    /// The search step that chose the saved values.
    pub stage: Option<BudgetStage>,
    /// The step's modelled peak in bytes ([`crate::peak::model_peak`]), when aliases were
    /// given and the budget is reachable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak_bytes: Option<u64>,
}

/// Partitions for `steps + 1` budgets evenly spaced over 0..=1: the memory saved against
/// the recomputation paid, from budget 0 to budget 1, with each step's modelled peak when
/// `aliases` are given.
pub fn pareto_curve(
    problem: &MinCutProblem,
    steps: usize,
    aliases: Option<&dyn crate::peak::Aliases>,
) -> Result<Vec<ParetoPoint>, PartitionError> {
    let steps = steps.max(1);
    let mut points = Vec::with_capacity(steps + 1);
    for k in 0..=steps {
        let budget = k as f64 / steps as f64;
        match problem.partition_with_budget(budget) {
            Ok((p, choice)) => points.push(ParetoPoint {
                budget,
                saved_bytes: Some(p.report.saved_bytes),
                recompute_flops: p.report.recompute_flops,
                recompute_seconds: p.report.recompute_seconds,
                recomputed_ops: p.report.recomputed.values().sum(),
                stage: Some(choice.stage),
                peak_bytes: aliases.map(|s| {
                    crate::peak::model_peak(&p.forward, &p.backward, problem.num_fwd_outputs(), s)
                        .peak
                }),
            }),
            Err(PartitionError::BudgetUnreachable { .. }) => points.push(ParetoPoint {
                budget,
                saved_bytes: None,
                recompute_flops: 0,
                recompute_seconds: 0.0,
                recomputed_ops: 0,
                stage: None,
                peak_bytes: None,
            }),
            Err(e) => return Err(e),
        }
    }
    Ok(points)
}
