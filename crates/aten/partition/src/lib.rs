//! graphbug-partition: split a joint forward/backward graph into a forward graph (which
//! also returns the values the backward needs) and a backward graph, as AOTAutograd's
//! partitioners do. Pure Rust.

pub mod budget;
pub mod cost;
pub mod default;
pub mod knapsack;
pub mod mincut;
pub mod ops;
pub mod peak;
pub mod reorder;

pub use budget::{
    pareto_curve, BudgetChoice, BudgetSearch, BudgetStage, CutFamily, ParetoPoint, RuntimeEstimate,
};
pub use default::{
    default_partition, default_partition_with, Partition, PartitionError, PartitionReport,
};
pub use mincut::{
    min_cut_rematerialization_partition, BanHeuristics, CutObjective, MinCut, MinCutOptions,
    MinCutProblem, NodeClass, NodePolicy,
};
pub use ops::OpClasses;
pub use peak::{
    choose_by_peak, model_peak, peak_frontier, Aliases, JointAliases, Observation, PeakBudget,
    PeakModel, PeakPoint, SchemaAliases, Shares, PEAK_FRONTIER_STEPS,
};
