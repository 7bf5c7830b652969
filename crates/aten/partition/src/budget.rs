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
//!
//! The knapsack stage makes cuts of a [`CutFamily`]: it prices recomputation by the
//! roofline or by FLOPs alone (functorch's default), and solves the cut for least bytes or
//! by functorch's weights. One [`BudgetSearch`] answers every budget and family of a
//! problem, solving the cuts no budget changes once.

use std::cell::OnceCell;

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
    /// The bans the cut was solved under (flags over [`MinCutProblem::graph`]'s nodes).
    pub bans: Vec<bool>,
    /// What the cut minimized.
    pub objective: CutObjective,
}

/// How the knapsack stage prices the recomputation of a node.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RuntimeEstimate {
    /// The larger of its compute and memory time on a nominal machine ([`CostModel`]).
    #[default]
    Roofline,
    /// Its FLOPs alone, functorch's default estimator: memory-bound ops recompute for free.
    Flops,
}

impl RuntimeEstimate {
    fn model(self) -> CostModel {
        match self {
            RuntimeEstimate::Roofline => CostModel::default(),
            RuntimeEstimate::Flops => CostModel {
                bandwidth: f64::INFINITY,
                launch_overhead: 0.0,
                ..CostModel::default()
            },
        }
    }
}

/// One family of cuts the budget search makes: how its knapsack prices recomputation, and
/// what the cut then minimizes. Families differ in which values they save for the same
/// bytes, so in the peak those values make.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct CutFamily {
    /// The knapsack's price of a recomputation.
    pub runtime: RuntimeEstimate,
    /// What the knapsack stage's cuts minimize.
    pub objective: CutObjective,
}

impl Default for CutFamily {
    fn default() -> Self {
        CutFamily {
            runtime: RuntimeEstimate::Roofline,
            objective: CutObjective::Bytes,
        }
    }
}

impl std::fmt::Display for CutFamily {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let prices = match self.runtime {
            RuntimeEstimate::Roofline => "roofline prices",
            RuntimeEstimate::Flops => "FLOP prices",
        };
        let cut = match self.objective {
            CutObjective::Bytes => "least bytes",
            CutObjective::Heuristic => "functorch's weights",
        };
        write!(f, "{prices}, {cut}")
    }
}

impl CutFamily {
    /// Every family, the default first.
    pub const ALL: [CutFamily; 4] = [
        CutFamily {
            runtime: RuntimeEstimate::Roofline,
            objective: CutObjective::Bytes,
        },
        CutFamily {
            runtime: RuntimeEstimate::Flops,
            objective: CutObjective::Bytes,
        },
        CutFamily {
            runtime: RuntimeEstimate::Roofline,
            objective: CutObjective::Heuristic,
        },
        CutFamily {
            runtime: RuntimeEstimate::Flops,
            objective: CutObjective::Heuristic,
        },
    ];
}

/// A cut and the bytes it saves.
type Cut = (Vec<NodeId>, u64);

/// A cut, the bytes it saves, the bans it was solved under and what it minimized.
#[derive(Clone)]
struct Solved {
    saved: Vec<NodeId>,
    bytes: u64,
    bans: Vec<bool>,
    objective: CutObjective,
}

/// The budget search of one problem: the cuts no budget changes are solved once, when first
/// needed, for every budget and family asked of it.
pub struct BudgetSearch<'p> {
    problem: &'p MinCutProblem,
    inputs_bytes: u64,
    optimal: Solved,
    more_aggressive: OnceCell<Solved>,
    aggressive: OnceCell<Solved>,
    candidates: OnceCell<Vec<NodeId>>,
    /// The least each family's cuts can save (of [`CutFamily::ALL`]): everything
    /// recomputable recomputed.
    floors: [OnceCell<Solved>; 4],
}

/// The value in `cell`, made by `make` if it is not there yet.
fn cached<T>(
    cell: &OnceCell<T>,
    make: impl FnOnce() -> Result<T, PartitionError>,
) -> Result<&T, PartitionError> {
    if let Some(v) = cell.get() {
        return Ok(v);
    }
    let v = make()?;
    Ok(cell.get_or_init(|| v))
}

/// functorch's "more aggressive" bans off.
fn more_aggressive(bans: BanHeuristics) -> BanHeuristics {
    BanHeuristics {
        used_far_apart: false,
        long_fusible_chains: false,
        materialized_backward: false,
        ..bans
    }
}

/// Every ban heuristic off.
fn aggressive(bans: BanHeuristics) -> BanHeuristics {
    BanHeuristics {
        not_in_allowlist: false,
        ..more_aggressive(bans)
    }
}

impl<'p> BudgetSearch<'p> {
    /// The search of `problem`, with its runtime-optimal cut solved.
    pub fn new(problem: &'p MinCutProblem) -> Result<Self, PartitionError> {
        let inputs_bytes: u64 = problem
            .graph()
            .ids()
            .filter(|&id| problem.is_primal(id))
            .map(|id| problem.size_of(id).unwrap_or(0))
            .sum();
        let bans = problem.options().effective_bans();
        Ok(BudgetSearch {
            problem,
            inputs_bytes,
            optimal: problem.solved(problem.heuristic_bans(bans, None), CutObjective::Heuristic)?,
            more_aggressive: OnceCell::new(),
            aggressive: OnceCell::new(),
            candidates: OnceCell::new(),
            floors: Default::default(),
        })
    }

    /// Chooses the values to save under `budget` (0..=1; see the module docs), the
    /// knapsack stage making cuts of `family`.
    pub fn choose(&self, budget: f64, family: CutFamily) -> Result<BudgetChoice, PartitionError> {
        if !(0.0..=1.0).contains(&budget) {
            return Err(PartitionError::BadOption(format!(
                "activation memory budget {budget} is outside 0..=1"
            )));
        }
        let problem = self.problem;
        let graph = problem.graph();
        let inputs_bytes = self.inputs_bytes;
        let optimal_bytes = self.optimal.bytes;
        let choice = |cut: &Solved, limit: u64, stage| BudgetChoice {
            saved_bytes: problem.effective_saved_bytes(&cut.saved),
            saved: cut.saved.clone(),
            inputs_bytes,
            runtime_optimal_bytes: optimal_bytes,
            limit_bytes: limit,
            stage,
            bans: cut.bans.clone(),
            objective: cut.objective,
        };
        if budget >= 1.0 || optimal_bytes <= inputs_bytes {
            return Ok(choice(
                &self.optimal,
                optimal_bytes,
                BudgetStage::RuntimeOptimal,
            ));
        }
        let span = (optimal_bytes - inputs_bytes) as f64;
        let limit = inputs_bytes + (budget * span).floor() as u64;
        if optimal_bytes <= limit {
            return Ok(choice(&self.optimal, limit, BudgetStage::RuntimeOptimal));
        }
        let bans = problem.options().effective_bans();
        let cut = cached(&self.more_aggressive, || {
            problem.solved(
                problem.heuristic_bans(more_aggressive(bans), None),
                CutObjective::Heuristic,
            )
        })?;
        if cut.bytes <= limit {
            return Ok(choice(cut, limit, BudgetStage::MoreAggressive));
        }
        let cut = self.aggressive()?;
        if cut.bytes <= limit {
            return Ok(choice(cut, limit, BudgetStage::Aggressive));
        }
        let candidates = self.candidates()?;
        let model = family.runtime.model();
        let items: Vec<KnapsackItem> = candidates
            .iter()
            .map(|&id| KnapsackItem {
                memory: problem.size_of(id).unwrap_or(0),
                runtime: model.estimate_runtime(graph, id),
            })
            .collect();
        let solver = problem.options().knapsack_solver;
        // The cut when the knapsack keeps `capacity` bytes of candidates banned.
        let cut_for = |capacity: u64| -> Result<Solved, PartitionError> {
            let solution = knapsack::solve(solver, &items, capacity)?;
            let mut dont_ban = vec![false; graph.nodes.len()];
            for &k in &solution.recomputed {
                dont_ban[candidates[k].index()] = true;
            }
            let bans = problem.heuristic_bans(aggressive(bans), Some(&dont_ban));
            problem.solved(bans, family.objective)
        };
        // Everything recomputable recomputed: the least the forward can save.
        let k = CutFamily::ALL
            .iter()
            .position(|f| *f == family)
            .unwrap_or(0);
        let floor = cached(&self.floors[k], || cut_for(0))?;
        if floor.bytes > limit {
            return Err(PartitionError::BudgetUnreachable {
                budget,
                min_budget: (floor.bytes.saturating_sub(inputs_bytes)) as f64 / span,
                min_bytes: floor.bytes,
            });
        }
        let capacity = limit - inputs_bytes.min(limit);
        let cut = cut_for(capacity)?;
        if cut.bytes <= limit {
            return Ok(choice(&cut, limit, BudgetStage::Knapsack));
        }
        // The knapsack's estimate overshot (the cut saves other values than the banned
        // ones it priced): bisect on the capacity for the largest one whose cut fits.
        let (mut lo, mut hi) = (0u64, capacity);
        let mut best = floor.clone();
        for _ in 0..MAX_BISECTIONS {
            if hi - lo <= 1 {
                break;
            }
            let mid = lo + (hi - lo) / 2;
            let cut = cut_for(mid)?;
            if cut.bytes <= limit {
                lo = mid;
                best = cut;
            } else {
                hi = mid;
            }
        }
        Ok(choice(&best, limit, BudgetStage::Knapsack))
    }

    /// The cut with every ban heuristic off.
    fn aggressive(&self) -> Result<&Solved, PartitionError> {
        let problem = self.problem;
        cached(&self.aggressive, || {
            let bans = aggressive(problem.options().effective_bans());
            problem.solved(problem.heuristic_bans(bans, None), CutObjective::Heuristic)
        })
    }

    /// The nodes the knapsack stage chooses among: the movable ones ([`Self::movable`])
    /// still banned with every ban heuristic off.
    fn candidates(&self) -> Result<&[NodeId], PartitionError> {
        let banned = &self.aggressive()?.bans;
        cached(&self.candidates, || {
            let mut movable = self.movable();
            movable.retain(|id| banned[id.index()]);
            Ok(movable)
        })
        .map(Vec::as_slice)
    }

    /// The nodes whose ban a search may toggle: forward nodes on the way to the backward,
    /// neither inputs, views, random, nor pinned by a policy (a ban never holds a view or a
    /// `must_recompute` node, so the banned ones are all the knapsack's candidates).
    pub fn movable(&self) -> Vec<NodeId> {
        let problem = self.problem;
        problem
            .graph()
            .ids()
            .filter(|&id| {
                problem.is_fw(id)
                    && !problem.is_primal(id)
                    && !problem.is_must_save(id)
                    && !problem.is_must_recompute(id)
                    && problem.op_class(id) & (class::RANDOM | class::VIEW) == 0
                    && problem.dist_from_bw(id) != crate::mincut::UNREACHABLE_FROM_BW
            })
            .collect()
    }

    /// The partition for a memory budget and family, with the choice that led to it.
    pub fn partition(
        &self,
        budget: f64,
        family: CutFamily,
    ) -> Result<(Partition, BudgetChoice), PartitionError> {
        let choice = self.choose(budget, family)?;
        Ok((self.problem.partition(&choice.saved)?, choice))
    }
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

    /// The cut under `bans` for `objective`, with what it was solved under.
    fn solved(&self, bans: Vec<bool>, objective: CutObjective) -> Result<Solved, PartitionError> {
        let (saved, bytes) = self.cut(&bans, objective)?;
        Ok(Solved {
            saved,
            bytes,
            bans,
            objective,
        })
    }

    /// The cut under `banned` for `objective`, and the bytes it saves.
    fn cut(&self, banned: &[bool], objective: CutObjective) -> Result<Cut, PartitionError> {
        let saved = self.solve_for(banned, objective)?.saved;
        let bytes = self.effective_saved_bytes(&saved);
        Ok((saved, bytes))
    }

    /// Chooses the values to save under `budget` (0..=1; see the module docs).
    pub fn choose_saved_values(&self, budget: f64) -> Result<BudgetChoice, PartitionError> {
        BudgetSearch::new(self)?.choose(budget, CutFamily::default())
    }

    /// The partition for a memory budget, with the choice that led to it.
    pub fn partition_with_budget(
        &self,
        budget: f64,
    ) -> Result<(Partition, BudgetChoice), PartitionError> {
        BudgetSearch::new(self)?.partition(budget, CutFamily::default())
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
    let search = BudgetSearch::new(problem)?;
    // Aliasing observed once, on the joint.
    let aliases = aliases.map(|a| crate::peak::JointAliases::new(problem.graph(), a));
    let mut points = Vec::with_capacity(steps + 1);
    for k in 0..=steps {
        let budget = k as f64 / steps as f64;
        match search.partition(budget, CutFamily::default()) {
            Ok((p, choice)) => points.push(ParetoPoint {
                budget,
                saved_bytes: Some(p.report.saved_bytes),
                recompute_flops: p.report.recompute_flops,
                recompute_seconds: p.report.recompute_seconds,
                recomputed_ops: p.report.recomputed.values().sum(),
                stage: Some(choice.stage),
                peak_bytes: aliases.as_ref().map(|s| {
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
