//! functorch's `min_cut_rematerialization_partition`: choose the values the forward saves
//! for the backward by a minimum cut, so that the backward recomputes cheap forward ops
//! (pointwise ops, views) instead of saving their results.
//!
//! Each joint node `v` becomes two flow nodes `v_in → v_out` joined by an edge whose
//! capacity is the cost of saving `v` (its bytes, weighted towards values used near the
//! backward); `u_out → v_in` edges of infinite capacity follow the data flow. The source
//! feeds every node that may not be recomputed (primals, and forward nodes banned by the
//! heuristics below); every node the backward requires (the tangents and their transitive
//! users, and the gradients) drains into the sink. A minimum cut then separates what the
//! forward computes from what the backward computes, and the cut nodes are the saved
//! values.
//!
//! [`MinCutProblem`] keeps the analysis of one joint graph; [`MinCutProblem::solve`] runs the
//! cut for a given set of banned nodes, so a memory-budget search can call it repeatedly
//! with different bans.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::fmt;
use std::sync::Arc;

use graphbug_ir::passes::{
    backward_side_effects, default_side_effects, eliminate_common_subexpressions, without_dead_code,
};
use graphbug_ir::{Graph, Meta, Node, NodeId, NodeKind, Users, Value};
use petgraph::algo::dinics;
use petgraph::visit::EdgeRef;
use petgraph::Direction;

use crate::default::{
    default_partition_with, effect_tokens, extract_fwd_bwd, joint_inputs, order_saved_sizes,
    split_outputs, Partition, PartitionError, PartitionReport,
};
use crate::knapsack::KnapsackSolver;
use crate::ops::{class, OpClasses, OpTypes};
use crate::reorder::reorder_like_autograd;

/// A per-node policy (selective activation checkpointing): true for the nodes it selects.
pub type NodePolicy = Arc<dyn Fn(&Node) -> bool + Send + Sync>;

/// Capacity of edges that must never be cut. Saving weights stay far below it (bytes times
/// at most 2 · 1.1¹⁰⁰), and sums of up to 2²⁷ of them fit in a `u128`.
pub const INFINITE: u128 = 1 << 100;

/// `dist_from_bw` of forward nodes from which no backward node can be reached.
pub const UNREACHABLE_FROM_BW: u32 = 1_000_000_000;

/// functorch's `ban_recompute_*` heuristics, each on or off.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct BanHeuristics {
    /// Ban fusible users of a value that run after an unfusible use of it in the forward.
    pub used_far_apart: bool,
    /// Break fusible chains longer than 100 forward nodes.
    pub long_fusible_chains: bool,
    /// Ban nodes an unfusible backward node reads (they are materialized anyway).
    pub materialized_backward: bool,
    /// Ban ops outside the recomputable set (off: ban only random and compute-intensive ops).
    pub not_in_allowlist: bool,
    /// Ban nodes whose output is more than 4x smaller than their tensor inputs.
    pub reduction: bool,
}

impl Default for BanHeuristics {
    /// All on, as functorch's config has them.
    fn default() -> Self {
        BanHeuristics {
            used_far_apart: true,
            long_fusible_chains: true,
            materialized_backward: true,
            not_in_allowlist: true,
            reduction: true,
        }
    }
}

impl BanHeuristics {
    /// functorch's `aggressive_recomputation`: every heuristic off except `reduction`.
    pub fn aggressive(self) -> Self {
        BanHeuristics {
            used_far_apart: false,
            long_fusible_chains: false,
            materialized_backward: false,
            not_in_allowlist: false,
            ..self
        }
    }
}

/// Options of [`min_cut_rematerialization_partition`], after functorch's config knobs.
#[derive(Clone)]
pub struct MinCutOptions {
    /// Which op classes to use (functorch's `compiler=`).
    pub op_classes: OpClasses,
    /// Replaces the recomputable op set (names such as `aten.gelu` or `gelu`).
    pub recomputable_ops: Option<Vec<String>>,
    /// Ops never recomputed, besides the heuristics' choices (names such as `relu`).
    pub banned_ops: Vec<String>,
    /// Never save views: always recompute them from their base (`recompute_views`).
    pub recompute_views: bool,
    /// Turn off every ban heuristic except the reduction one (`aggressive_recomputation`).
    pub aggressive_recomputation: bool,
    /// With [`OpClasses::Inductor`], ban forward nodes more than this many uses away from the
    /// backward (`max_dist_from_bw`).
    pub max_dist_from_bw: usize,
    /// The ban heuristics (`ban_recompute_*`).
    pub bans: BanHeuristics,
    /// Merge common subexpressions of the joint graph first (`cse`).
    pub cse: bool,
    /// Nodes the backward must recompute (`CheckpointPolicy.MUST_RECOMPUTE`); ignored for
    /// placeholders.
    pub must_recompute: Option<NodePolicy>,
    /// Nodes the backward must not recompute (`CheckpointPolicy.MUST_SAVE`): the forward
    /// computes them, and saves them or what the backward needs from them.
    pub must_save: Option<NodePolicy>,
    /// Fraction (0..=1) of the runtime-optimal activation memory to save at most
    /// (`activation_memory_budget`); only its range is checked for now.
    pub activation_memory_budget: f64,
    /// Solver for the memory-budget knapsack (`activation_memory_budget_solver`).
    pub knapsack_solver: KnapsackSolver,
    /// Size hints of a dynamic-shape joint (each symbol's value): the cut weighs tensors at
    /// these sizes, as functorch weighs them at its size hints.
    pub hints: graphbug_ir::Bindings,
}

impl Default for MinCutOptions {
    /// functorch's defaults.
    fn default() -> Self {
        MinCutOptions {
            op_classes: OpClasses::Inductor,
            recomputable_ops: None,
            banned_ops: Vec::new(),
            recompute_views: false,
            aggressive_recomputation: false,
            max_dist_from_bw: 1000,
            bans: BanHeuristics::default(),
            cse: true,
            must_recompute: None,
            must_save: None,
            activation_memory_budget: 1.0,
            knapsack_solver: KnapsackSolver::default(),
            hints: graphbug_ir::Bindings::new(),
        }
    }
}

impl fmt::Debug for MinCutOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let policy = |p: &Option<NodePolicy>| if p.is_some() { "Some(<fn>)" } else { "None" };
        f.debug_struct("MinCutOptions")
            .field("op_classes", &self.op_classes)
            .field("recomputable_ops", &self.recomputable_ops)
            .field("banned_ops", &self.banned_ops)
            .field("recompute_views", &self.recompute_views)
            .field("aggressive_recomputation", &self.aggressive_recomputation)
            .field("max_dist_from_bw", &self.max_dist_from_bw)
            .field("bans", &self.bans)
            .field("cse", &self.cse)
            .field("must_recompute", &policy(&self.must_recompute))
            .field("must_save", &policy(&self.must_save))
            .field("activation_memory_budget", &self.activation_memory_budget)
            .field("knapsack_solver", &self.knapsack_solver)
            .finish()
    }
}

impl MinCutOptions {
    /// The ban heuristics in effect: [`Self::bans`], relaxed by `aggressive_recomputation`.
    pub fn effective_bans(&self) -> BanHeuristics {
        if self.aggressive_recomputation {
            self.bans.aggressive()
        } else {
            self.bans
        }
    }
}

/// functorch's node classes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum NodeClass {
    /// Needed by the forward outputs (computed from the primals; primals included).
    RequiredForward,
    /// A tangent, a transitive user of one, or a gradient output.
    RequiredBackward,
    /// Neither: may go to either side.
    Unclaimed,
}

/// The analysis of one joint graph for min-cut partitioning.
pub struct MinCutProblem {
    graph: Graph,
    num_fwd_outputs: usize,
    options: MinCutOptions,
    users: Users,
    tangents: Vec<NodeId>,
    fw: Vec<bool>,
    bw: Vec<bool>,
    primal: Vec<bool>,
    op_class: Vec<u8>,
    dist: Vec<u32>,
    fw_order: Vec<u32>,
    must_recompute: Vec<bool>,
    must_save: Vec<bool>,
    non_tensor: Vec<bool>,
    /// Of a dynamic-shape joint: each node's symbolic meta by name (the cut runs on the
    /// sizes at the hints; the partition is written with the symbols).
    symbolic: Option<HashMap<String, Meta>>,
}

impl fmt::Debug for MinCutProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MinCutProblem")
            .field("graph", &self.graph.name)
            .field("nodes", &self.graph.nodes.len())
            .field("num_fwd_outputs", &self.num_fwd_outputs)
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

/// What the capacities of a cut measure.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CutObjective {
    /// functorch's weights ([`MinCutProblem::weight`]): the runtime-optimal cut.
    Heuristic,
    /// The cut that saves the least bytes; among those, the one functorch's weights prefer.
    Bytes,
}

/// A minimum cut: the saved values and what it cost.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MinCut {
    /// The saved values (ids of [`MinCutProblem::graph`]), in graph order.
    pub saved: Vec<NodeId>,
    /// The cut's total weight.
    pub weight: u128,
}

/// functorch's `min_cut_rematerialization_partition`: partitions `joint` (whose first
/// `num_fwd_outputs` outputs are the forward's) so that the forward saves a minimum-weight
/// set of values and the backward recomputes the rest.
pub fn min_cut_rematerialization_partition(
    joint: &Graph,
    num_fwd_outputs: usize,
    options: &MinCutOptions,
) -> Result<Partition, PartitionError> {
    let problem = MinCutProblem::new(joint, num_fwd_outputs, options)?;
    if !problem.has_backward() {
        return problem.partition_without_backward(joint);
    }
    problem.partition(&problem.saved_values()?)
}

impl MinCutProblem {
    /// Analyses `joint`: dead-code elimination and CSE, node classes, distances to the
    /// backward, op classes, policies. Fails on a malformed joint graph or options.
    pub fn new(
        joint: &Graph,
        num_fwd_outputs: usize,
        options: &MinCutOptions,
    ) -> Result<MinCutProblem, PartitionError> {
        let budget = options.activation_memory_budget;
        if !(0.0..=1.0).contains(&budget) {
            return Err(PartitionError::BadOption(format!(
                "activation memory budget {budget} is outside 0..=1"
            )));
        }
        joint.verify()?;
        joint_inputs(joint)?;
        split_outputs(joint, num_fwd_outputs)?;
        let (hinted, symbolic) = joint_at_hints(joint, &options.hints)?;
        let joint = hinted.as_ref().unwrap_or(joint);
        // (The joint is copied once: by CSE, or as it is when nothing is dead.)
        let live = without_dead_code(joint, &default_side_effects);
        let graph = if options.cse {
            eliminate_common_subexpressions(&live, &default_side_effects)
        } else {
            live.into_owned()
        };
        let (primals, tangents) = joint_inputs(&graph)?;
        let (fwd_outputs, bwd_outputs) = split_outputs(&graph, num_fwd_outputs)?;
        // AOTAutograd returns no gradient for effect tokens; graphbug's joints return None.
        let tokens = effect_tokens(&graph, &primals);
        if bwd_outputs.len() != primals.len() && bwd_outputs.len() != primals.len() - tokens {
            return Err(PartitionError::BadJoint(format!(
                "the joint graph returns {} values after the {num_fwd_outputs} forward outputs, \
                 but has {} primals, {tokens} of them effect tokens (one gradient per primal, \
                 or per primal but the tokens, expected); check --num-fwd-outputs",
                bwd_outputs.len(),
                primals.len()
            )));
        }
        let n = graph.nodes.len();
        let users = graph.users();
        let mut primal = vec![false; n];
        for &p in &primals {
            primal[p.index()] = true;
        }

        // Required backward: tangents and their transitive users, then the gradients.
        let mut bw = vec![false; n];
        for &t in &tangents {
            bw[t.index()] = true;
        }
        for id in graph.ids() {
            if !bw[id.index()] {
                let mut reads = false;
                graph.node(id).for_each_input(|s| reads |= bw[s.index()]);
                bw[id.index()] = reads;
            }
        }
        // Which nodes the primals alone can compute.
        let mut computable = vec![false; n];
        for id in graph.ids() {
            let node = graph.node(id);
            computable[id.index()] = if node.is_placeholder() {
                primal[id.index()]
            } else {
                let mut ok = true;
                node.for_each_input(|s| ok &= computable[s.index()]);
                ok
            };
        }
        for v in &bwd_outputs {
            v.for_each_node(&mut |id| bw[id.index()] = true);
        }
        // Required forward: what the forward-only graph keeps (inputs, what the forward
        // outputs need, side-effecting ops), as `extract_subgraph` would extract it.
        let mut live = vec![false; n];
        for v in &fwd_outputs {
            v.for_each_node(&mut |id| live[id.index()] = true);
        }
        let mut fw = vec![false; n];
        for id in graph.ids().rev() {
            let node = graph.node(id);
            let effect = node.op().is_some_and(default_side_effects);
            if !computable[id.index()] {
                if live[id.index()] {
                    return Err(PartitionError::BadJoint(format!(
                        "the forward outputs need `{}`, which reads a tangent",
                        node.name
                    )));
                }
                continue;
            }
            if live[id.index()] || primal[id.index()] || effect {
                fw[id.index()] = true;
                node.for_each_input(|s| live[s.index()] = true);
            }
        }
        let mut dist = vec![0u32; n];
        for id in graph.ids().rev() {
            let i = id.index();
            if fw[i] {
                dist[i] = users.nodes[i]
                    .iter()
                    .map(|u| dist[u.index()].saturating_add(1))
                    .min()
                    .unwrap_or(UNREACHABLE_FROM_BW)
                    .min(UNREACHABLE_FROM_BW);
            }
        }
        let mut fw_order = vec![u32::MAX; n];
        let mut k = 0;
        for (i, f) in fw.iter().enumerate() {
            if *f {
                fw_order[i] = k;
                k += 1;
            }
        }
        let types = OpTypes::new(
            options.op_classes,
            options.recomputable_ops.as_deref(),
            &options.banned_ops,
        );
        let op_class: Vec<u8> = graph.nodes.iter().map(|n| types.of_node(n)).collect();
        let apply = |p: &Option<NodePolicy>| -> Vec<bool> {
            match p {
                Some(p) => graph
                    .nodes
                    .iter()
                    .map(|n| !n.is_placeholder() && p(n))
                    .collect(),
                None => vec![false; n],
            }
        };
        let must_recompute = apply(&options.must_recompute);
        let must_save = apply(&options.must_save);
        // Multi-output nodes, and whatever a getitem reads.
        let mut non_tensor: Vec<bool> = graph
            .nodes
            .iter()
            .map(|n| matches!(n.meta, Meta::Multi(_)))
            .collect();
        for node in &graph.nodes {
            if let NodeKind::GetItem { source, .. } = node.kind {
                non_tensor[source.index()] = true;
            }
        }
        Ok(MinCutProblem {
            graph,
            num_fwd_outputs,
            options: options.clone(),
            users,
            tangents,
            fw,
            bw,
            primal,
            op_class,
            dist,
            fw_order,
            must_recompute,
            must_save,
            non_tensor,
            symbolic,
        })
    }

    /// The values functorch's partitioner saves under the problem's options: the cut
    /// within the activation memory budget, or the heuristic (runtime-optimal) cut.
    pub fn saved_values(&self) -> Result<Vec<NodeId>, PartitionError> {
        let budget = self.options.activation_memory_budget;
        if budget < 1.0 {
            Ok(self.choose_saved_values(budget)?.saved)
        } else {
            let banned = self.heuristic_bans(self.options.effective_bans(), None);
            Ok(self.solve(&banned)?.saved)
        }
    }

    /// The partition of a joint with nothing to cut (no backward; `joint` is the graph the
    /// problem was made from): functorch hands such graphs to the default partitioner.
    pub fn partition_without_backward(&self, joint: &Graph) -> Result<Partition, PartitionError> {
        let policy = self.options.must_recompute.clone();
        let recompute = move |n: &Node| policy.as_ref().is_some_and(|p| p(n));
        // (A dynamic-shape joint: the problem's graph holds sizes at the hints.)
        let graph = if self.symbolic.is_some() {
            joint
        } else {
            self.graph()
        };
        default_partition_with(graph, self.num_fwd_outputs, &recompute, &self.options.hints)
    }

    /// How many of the joint's outputs are the forward's.
    pub fn num_fwd_outputs(&self) -> usize {
        self.num_fwd_outputs
    }

    /// The joint graph after dead-code elimination and CSE; node ids refer to it.
    pub fn graph(&self) -> &Graph {
        &self.graph
    }

    /// The class of a node. A value the forward outputs need that is also returned as a
    /// gradient counts as required backward, except a primal (which only the forward has).
    pub fn class(&self, id: NodeId) -> NodeClass {
        let i = id.index();
        if self.bw[i] && !self.primal[i] {
            NodeClass::RequiredBackward
        } else if self.fw[i] {
            NodeClass::RequiredForward
        } else {
            NodeClass::Unclaimed
        }
    }

    /// True when some node needs a tangent or is a gradient, so there is something to cut.
    pub fn has_backward(&self) -> bool {
        self.bw.contains(&true)
    }

    /// Uses between a required forward node and the nearest node outside the forward
    /// (0 for other nodes, [`UNREACHABLE_FROM_BW`] when there is none).
    pub fn dist_from_bw(&self, id: NodeId) -> u32 {
        self.dist[id.index()]
    }

    /// The op-class bits of a node (see [`crate::ops::class`]).
    pub fn op_class(&self, id: NodeId) -> u8 {
        self.op_class[id.index()]
    }

    /// Bytes of a node's value: its tensor, or the sum of a multi-output node's tensors.
    pub fn size_of(&self, id: NodeId) -> Option<u64> {
        match &self.graph.node(id).meta {
            Meta::Tensor(t) => Some(t.nbytes()),
            Meta::Multi(items) => Some(items.iter().flatten().map(|t| t.nbytes()).sum()),
            Meta::Unknown | Meta::SymTensor(_) | Meta::Sym(_) => None,
        }
    }

    /// A required forward node.
    pub(crate) fn is_fw(&self, id: NodeId) -> bool {
        self.fw[id.index()]
    }

    /// A primal.
    pub(crate) fn is_primal(&self, id: NodeId) -> bool {
        self.primal[id.index()]
    }

    /// The nodes of `backward` (a graph partitioned from this joint) that compute one of
    /// the joint's random ops again (`native_dropout`, `rand_like`): such a backward draws
    /// new random values, so its gradients are not the step's.
    pub fn recomputed_random_ops<'b>(&self, backward: &'b Graph) -> Vec<&'b str> {
        let random: std::collections::HashSet<&str> = self
            .graph
            .ids()
            .filter(|&id| self.has(id, class::RANDOM))
            .map(|id| self.graph.node(id).name.as_str())
            .collect();
        backward
            .nodes
            .iter()
            .filter(|n| !n.is_placeholder() && random.contains(n.name.as_str()))
            .map(|n| n.name.as_str())
            .collect()
    }

    /// Selected by the `must_recompute` policy.
    pub(crate) fn is_must_recompute(&self, id: NodeId) -> bool {
        self.must_recompute[id.index()]
    }

    /// Selected by the `must_save` policy.
    pub(crate) fn is_must_save(&self, id: NodeId) -> bool {
        self.must_save[id.index()]
    }

    /// The options the problem was analysed with.
    pub(crate) fn options(&self) -> &MinCutOptions {
        &self.options
    }

    fn has(&self, id: NodeId, bits: u8) -> bool {
        self.op_class[id.index()] & bits != 0
    }

    /// functorch's `is_fusible(a, b)`: both fusible, or `b` is a `cat`.
    fn fusible(&self, a: NodeId, b: NodeId) -> bool {
        self.has(b, class::CAT) || (self.has(a, class::FUSIBLE) && self.has(b, class::FUSIBLE))
    }

    /// Some reader cannot fuse with the node, so its value exists in memory anyway.
    fn is_materialized(&self, id: NodeId) -> bool {
        self.graph.node(id).is_placeholder()
            || self.users.by_output[id.index()]
            || self.users.nodes[id.index()]
                .iter()
                .any(|&u| !self.fusible(id, u))
    }

    /// A node outside the forward reads the value (through views) and cannot fuse with it.
    fn is_materialized_backwards(&self, id: NodeId) -> bool {
        if self.has(id, class::VIEW) {
            return false;
        }
        let mut stack = vec![id];
        while let Some(cur) = stack.pop() {
            if self.users.by_output[cur.index()] {
                return true;
            }
            for &u in &self.users.nodes[cur.index()] {
                if !self.is_fw(u) && !self.fusible(cur, u) {
                    return true;
                }
                if self.has(u, class::VIEW) {
                    stack.push(u);
                }
            }
        }
        false
    }

    /// functorch's `should_ban_recomputation` for a required forward node.
    fn should_ban(&self, id: NodeId, bans: BanHeuristics) -> bool {
        let node = self.graph.node(id);
        let NodeKind::Call { args, .. } = &node.kind else {
            return false;
        };
        if self.must_save[id.index()] {
            return true;
        }
        if self.options.recompute_views && self.has(id, class::VIEW) {
            return false;
        }
        if self.has(id, class::LIFT_FRESH) {
            return false;
        }
        if self.has(id, class::BANNED | class::RANDOM) {
            return true;
        }
        if bans.not_in_allowlist {
            if !self.has(id, class::RECOMPUTABLE) {
                return true;
            }
        } else if self.has(id, class::COMPUTE_INTENSIVE) {
            return true;
        }
        if bans.materialized_backward && self.is_materialized_backwards(id) {
            return true;
        }
        let dist = self.dist[id.index()];
        if self.options.op_classes == OpClasses::Inductor
            && dist != UNREACHABLE_FROM_BW
            && dist as usize > self.options.max_dist_from_bw
        {
            return true;
        }
        if bans.reduction {
            let inputs: u64 = args
                .iter()
                .filter_map(Value::as_node)
                .map(|s| self.size_of(s).unwrap_or(0))
                .sum();
            let output = self.size_of(id).unwrap_or(0);
            return output.saturating_mul(4) < inputs;
        }
        false
    }

    /// The nodes the heuristics ban from recomputation: primals, forward nodes
    /// `should_ban_recomputation` rejects, then the far-apart-uses and long-fusible-chain
    /// heuristics. Views, must-recompute nodes and `dont_ban` nodes are never banned.
    pub fn heuristic_bans(&self, bans: BanHeuristics, dont_ban: Option<&[bool]>) -> Vec<bool> {
        let n = self.graph.nodes.len();
        let mut banned = vec![false; n];
        let allowed = |id: NodeId| -> bool {
            let i = id.index();
            let view = self.has(id, class::VIEW) && !self.must_save[i];
            let spared = dont_ban.is_some_and(|d| d.get(i).copied().unwrap_or(false));
            !view && !spared && !self.must_recompute[i]
        };
        for id in self.graph.ids() {
            let i = id.index();
            if (self.bw[i] && !self.primal[i]) || self.must_recompute[i] {
                continue;
            }
            // `must_save` also pins forward-computable nodes the forward outputs do not need.
            let ban = self.primal[i]
                || self.must_save[i]
                || (self.is_fw(id) && self.should_ban(id, bans));
            if ban && allowed(id) {
                banned[i] = true;
            }
        }
        if bans.used_far_apart {
            self.ban_used_far_apart(&mut banned, &allowed);
        }
        if bans.long_fusible_chains {
            self.ban_long_fusible_chains(&mut banned, &allowed);
        }
        banned
    }

    /// Bans fusible forward users of a value that run after the first unfusible node
    /// reachable (through fusible uses) from its forward users.
    fn ban_used_far_apart(&self, banned: &mut [bool], allowed: &dyn Fn(NodeId) -> bool) {
        let n = self.graph.nodes.len();
        let mut seen = [vec![0u32; n], vec![0u32; n]];
        let mut epoch = 0u32;
        let mut heap: BinaryHeap<Reverse<(u32, u32, bool)>> = BinaryHeap::new();
        for used in self.graph.ids().filter(|&i| self.is_fw(i)) {
            let fw_users: Vec<NodeId> = self.users.nodes[used.index()]
                .iter()
                .copied()
                .filter(|&u| self.is_fw(u))
                .collect();
            let Some(max_range) = fw_users.iter().map(|u| self.fw_order[u.index()]).max() else {
                continue;
            };
            epoch += 1;
            heap.clear();
            let mut push = |heap: &mut BinaryHeap<_>, u: NodeId, f: bool| {
                let s = &mut seen[usize::from(f)][u.index()];
                if *s != epoch {
                    *s = epoch;
                    heap.push(Reverse((self.fw_order[u.index()], u.0, f)));
                }
            };
            for &u in &fw_users {
                push(&mut heap, u, true);
            }
            let mut first_unfusible = max_range;
            while let Some(Reverse((order, node, fusible))) = heap.pop() {
                if !fusible {
                    first_unfusible = order;
                    break;
                }
                let node = NodeId(node);
                for &u in &self.users.nodes[node.index()] {
                    if self.is_fw(u) && self.fw_order[u.index()] <= max_range {
                        push(&mut heap, u, self.fusible(node, u));
                    }
                }
            }
            for &u in &fw_users {
                if self.fw_order[u.index()] > first_unfusible
                    && self.fusible(used, u)
                    && !banned[u.index()]
                    && allowed(u)
                {
                    banned[u.index()] = true;
                }
            }
        }
    }

    /// Bans the node ending a fusible chain that spans more than 100 forward nodes.
    fn ban_long_fusible_chains(&self, banned: &mut [bool], allowed: &dyn Fn(NodeId) -> bool) {
        let n = self.graph.nodes.len();
        let mut visited = vec![false; n];
        let mut heap: BinaryHeap<Reverse<(u32, u32)>> = BinaryHeap::new();
        for start in self.graph.ids().filter(|&i| self.is_fw(i)) {
            let start_order = self.fw_order[start.index()];
            heap.clear();
            heap.push(Reverse((start_order, start.0)));
            while let Some(Reverse((order, cur))) = heap.pop() {
                let cur = NodeId(cur);
                if std::mem::replace(&mut visited[cur.index()], true) {
                    continue;
                }
                if order > start_order.saturating_add(100) && heap.is_empty() {
                    if allowed(cur) {
                        banned[cur.index()] = true;
                    }
                    break;
                }
                for &u in &self.users.nodes[cur.index()] {
                    if self.is_fw(u) && self.fusible(cur, u) && !banned[u.index()] {
                        heap.push(Reverse((self.fw_order[u.index()], u.0)));
                    }
                }
            }
        }
    }

    /// The capacity of a node's `in → out` edge: the cost of saving it.
    ///
    /// Bytes × 1.1^clamp(dist_from_bw, 1, 100), doubled when every reader could fuse with
    /// the node (saving it then costs a write it would not otherwise need); infinite for
    /// values that are not single tensors, and for views under `recompute_views`.
    pub fn weight(&self, id: NodeId) -> Result<u128, PartitionError> {
        let i = id.index();
        let node = self.graph.node(id);
        if self.non_tensor[i]
            || (self.options.recompute_views && self.has(id, class::VIEW) && !self.must_save[i])
        {
            return Ok(INFINITE);
        }
        let bytes = match (&node.meta, &node.kind) {
            (Meta::Tensor(t), _) => t.nbytes(),
            // A size: functorch weighs a SymInt 1.
            (Meta::Sym(_), _) => 1,
            (_, NodeKind::GetAttr { .. }) => 0,
            _ => {
                return Err(PartitionError::BadJoint(format!(
                    "node `{}` has no shape annotation; the min-cut partitioner needs the size of \
                     every value it may save",
                    node.name
                )))
            }
        };
        let exponent = self.dist[i].clamp(1, 100) as i32;
        let weighted = (bytes as f64 * 1.1f64.powi(exponent)) as u128;
        Ok(if self.is_materialized(id) {
            weighted
        } else {
            weighted * 2
        })
    }

    /// Solves the minimum cut with `banned` nodes (indexed by node id) fed by the source.
    ///
    /// The flow network holds the nodes on some source-to-sink path. Edges into a banned
    /// node are left out: its `in` side is always on the source side, so they never cross a
    /// finite cut, and without them the network falls apart into small independent parts
    /// (per layer, roughly). Each part gets Dinic's max-flow; its source side is what the
    /// source reaches in the residual graph (the cut nearest to the forward). The saved
    /// values are the nodes whose `in → out` edge crosses the cut, in graph order.
    pub fn solve(&self, banned: &[bool]) -> Result<MinCut, PartitionError> {
        self.solve_for(banned, CutObjective::Heuristic)
    }

    /// [`Self::solve`] with the edge capacities `objective` gives.
    pub fn solve_for(
        &self,
        banned: &[bool],
        objective: CutObjective,
    ) -> Result<MinCut, PartitionError> {
        let n = self.graph.nodes.len();
        if banned.len() != n {
            return Err(PartitionError::BadJoint(format!(
                "{} ban flags for a graph of {n} nodes",
                banned.len()
            )));
        }
        // Nodes whose `in` side is the sink: required backward nodes (except primals, which
        // nobody computes), and nodes that must be recomputed.
        let sinkish: Vec<bool> = (0..n)
            .map(|i| (self.bw[i] || self.must_recompute[i]) && !self.primal[i])
            .collect();
        // A primal returned as a gradient as it is drains into the sink from its `out` side.
        let drains = |i: usize| self.bw[i] && self.primal[i];
        // Data edges `u_out → v_in` kept in the network: into non-banned, non-sink nodes.
        let edge_into = |v: usize| !sinkish[v] && !banned[v];
        let mut from_source = vec![false; n];
        for id in self.graph.ids() {
            let i = id.index();
            if sinkish[i] {
                continue;
            }
            let mut r = banned[i];
            self.graph
                .node(id)
                .for_each_input(|s| r |= from_source[s.index()]);
            from_source[i] = r;
        }
        let mut to_sink = vec![false; n];
        for id in self.graph.ids().rev() {
            let i = id.index();
            if sinkish[i] {
                continue;
            }
            to_sink[i] = drains(i)
                || self.users.nodes[i]
                    .iter()
                    .any(|u| sinkish[u.index()] || (edge_into(u.index()) && to_sink[u.index()]));
        }
        let keep: Vec<bool> = (0..n).map(|i| from_source[i] && to_sink[i]).collect();

        // Independent parts: union-find over the kept data edges.
        let mut parent: Vec<u32> = (0..n as u32).collect();
        fn root(parent: &mut [u32], mut x: u32) -> u32 {
            while parent[x as usize] != x {
                let up = parent[parent[x as usize] as usize];
                parent[x as usize] = up;
                x = up;
            }
            x
        }
        for (i, readers) in self.users.nodes.iter().enumerate() {
            if !keep[i] {
                continue;
            }
            for &u in readers {
                let j = u.index();
                if keep[j] && edge_into(j) {
                    let (a, b) = (root(&mut parent, i as u32), root(&mut parent, j as u32));
                    if a != b {
                        parent[a.max(b) as usize] = a.min(b);
                    }
                }
            }
        }
        // Bucket the kept nodes by part, each bucket in graph order.
        let mut parts: Vec<Vec<NodeId>> = Vec::new();
        let mut part_index: Vec<u32> = vec![u32::MAX; n];
        let mut weight = vec![0u128; n];
        for (i, _) in keep.iter().enumerate().filter(|&(_, &k)| k) {
            let r = root(&mut parent, i as u32) as usize;
            if part_index[r] == u32::MAX {
                part_index[r] = parts.len() as u32;
                parts.push(Vec::new());
            }
            parts[part_index[r] as usize].push(NodeId(i as u32));
            weight[i] = self.weight(NodeId(i as u32))?;
        }
        // Among cuts of the same weight, the heuristic objective takes one saving the
        // fewest bytes (functorch leaves that tie to networkx: it may save `x` and `y`
        // where one `x / y` of the same weight would do).
        let tie_scale = match objective {
            CutObjective::Bytes => {
                self.lexicographic(&keep, &mut weight, true);
                None
            }
            CutObjective::Heuristic => self.lexicographic(&keep, &mut weight, false),
        };
        let mut local = vec![0u32; n];
        let mut saved = Vec::new();
        let mut total: u128 = 0;
        for nodes in &parts {
            let m = nodes.len();
            let mut net: petgraph::Graph<(), u128> =
                petgraph::Graph::with_capacity(2 * m + 2, 4 * m + 2);
            let source = net.add_node(());
            let sink = net.add_node(());
            for (k, id) in nodes.iter().enumerate() {
                local[id.index()] = 2 + 2 * k as u32;
                net.add_node(());
                net.add_node(());
            }
            let fin = |i: usize| petgraph::graph::NodeIndex::new(local[i] as usize);
            let fout = |i: usize| petgraph::graph::NodeIndex::new(local[i] as usize + 1);
            for id in nodes {
                let i = id.index();
                net.add_edge(fin(i), fout(i), weight[i]);
                if banned[i] {
                    net.add_edge(source, fin(i), INFINITE);
                }
                let mut drained = false;
                if drains(i) {
                    net.add_edge(fout(i), sink, INFINITE);
                    drained = true;
                }
                for &u in &self.users.nodes[i] {
                    let j = u.index();
                    if sinkish[j] {
                        if !drained {
                            net.add_edge(fout(i), sink, INFINITE);
                            drained = true;
                        }
                    } else if keep[j] && edge_into(j) {
                        net.add_edge(fout(i), fin(j), INFINITE);
                    }
                }
            }
            let (max_flow, flows) = dinics(&net, source, sink);
            // The source side: what the source reaches in the residual graph.
            let mut reached = vec![false; net.node_count()];
            reached[source.index()] = true;
            let mut stack = vec![source];
            while let Some(x) = stack.pop() {
                for e in net.edges_directed(x, Direction::Outgoing) {
                    let t = e.target();
                    if !reached[t.index()] && flows[e.id().index()] < *e.weight() {
                        reached[t.index()] = true;
                        stack.push(t);
                    }
                }
                for e in net.edges_directed(x, Direction::Incoming) {
                    let s = e.source();
                    if !reached[s.index()] && flows[e.id().index()] > 0 {
                        reached[s.index()] = true;
                        stack.push(s);
                    }
                }
            }
            let crosses = |i: usize| reached[fin(i).index()] && !reached[fout(i).index()];
            if max_flow >= INFINITE {
                let culprit = nodes
                    .iter()
                    .find(|id| crosses(id.index()) && weight[id.index()] >= INFINITE)
                    .or_else(|| nodes.iter().find(|id| reached[fout(id.index()).index()]))
                    .map_or("?", |id| self.graph.node(*id).name.as_str());
                return Err(PartitionError::BadJoint(format!(
                    "no finite cut: `{culprit}` would have to be saved but cannot be (it is not \
                     a single tensor, or it is a view under recompute_views); check the \
                     must_recompute / must_save policies"
                )));
            }
            total += max_flow;
            saved.extend(nodes.iter().copied().filter(|id| crosses(id.index())));
        }
        saved.sort_unstable();
        Ok(MinCut {
            saved,
            weight: tie_scale.map_or(total, |scale| total / scale),
        })
    }

    /// Makes the `keep` nodes' finite capacities lexicographic, `major · scale + minor` with
    /// `scale` above the sum of all minors, so a cut minimises the major quantity first:
    /// bytes then weight when `bytes_major`, else weight then bytes. Returns `scale`; when
    /// that would not fit below [`INFINITE`], the capacities are the major quantity alone
    /// and the result is `None`.
    fn lexicographic(&self, keep: &[bool], weight: &mut [u128], bytes_major: bool) -> Option<u128> {
        let finite: Vec<usize> = (0..weight.len())
            .filter(|&i| keep[i] && weight[i] < INFINITE)
            .collect();
        let bytes = |i: usize| u128::from(self.size_of(NodeId(i as u32)).unwrap_or(0));
        let split = |i: usize, w: u128| {
            if bytes_major {
                (bytes(i), w)
            } else {
                (w, bytes(i))
            }
        };
        let (total_major, total_minor) = finite.iter().fold((0u128, 0u128), |(a, b), &i| {
            let (major, minor) = split(i, weight[i]);
            (a + major, b + minor)
        });
        let scale = total_minor + 1;
        let fits = total_major
            .checked_mul(scale)
            .and_then(|m| m.checked_add(total_minor))
            .is_some_and(|t| t < INFINITE);
        for i in finite {
            let (major, minor) = split(i, weight[i]);
            weight[i] = if fits { major * scale + minor } else { major };
        }
        fits.then_some(scale)
    }

    /// Which of the `saved` values the backward graph extracted for them would read, as
    /// `extract_subgraph` (with its dead-code elimination) would build it; indexed by id.
    pub(crate) fn backward_reads(&self, saved: &[NodeId]) -> Vec<bool> {
        let graph = &self.graph;
        let n = graph.nodes.len();
        let mut input = vec![false; n];
        for id in saved.iter().chain(&self.tangents) {
            if let Some(x) = input.get_mut(id.index()) {
                *x = true;
            }
        }
        let mut avail = vec![false; n];
        for id in graph.ids() {
            let i = id.index();
            let node = graph.node(id);
            avail[i] = input[i]
                || (!node.is_placeholder() && {
                    let mut ok = true;
                    node.for_each_input(|s| ok &= avail[s.index()]);
                    ok
                });
        }
        let mut live = vec![false; n];
        for v in &graph.outputs()[self.num_fwd_outputs..] {
            v.for_each_node(&mut |id| live[id.index()] = true);
        }
        let mut reads = vec![false; n];
        for id in graph.ids().rev() {
            let i = id.index();
            if input[i] {
                reads[i] = live[i];
                continue;
            }
            let node = graph.node(id);
            if avail[i] && (live[i] || node.op().is_some_and(backward_side_effects)) {
                node.for_each_input(|s| live[s.index()] = true);
            }
        }
        reads
    }

    /// Splits the graph for `saved` (ids of [`Self::graph`]): saved values the backward does
    /// not read are dropped, the backward is reordered to recompute forward values just
    /// before their first use, and the report is filled in.
    pub fn partition(&self, saved: &[NodeId]) -> Result<Partition, PartitionError> {
        let graph = &self.graph;
        let reads = self.backward_reads(saved);
        let saved: Vec<NodeId> = saved
            .iter()
            .copied()
            .filter(|s| reads.get(s.index()).copied().unwrap_or(false))
            .collect();
        // A dynamic-shape joint is written with its symbols, its sizes saved as functorch
        // saves them.
        let symbolic = self.symbolic.as_ref().map(|metas| {
            let mut g = graph.clone();
            for node in &mut g.nodes {
                if let Some(m) = metas.get(node.name.as_str()) {
                    node.meta = m.clone();
                }
            }
            g
        });
        let (graph, saved) = match &symbolic {
            Some(g) => (g, order_saved_sizes(g, saved, &self.tangents)),
            None => (graph, saved),
        };
        let (forward, backward) = extract_fwd_bwd(graph, self.num_fwd_outputs, &saved)?;
        // Both are verified: `extract_subgraph` checks the forward, the reordering the
        // backward.
        let backward = reorder_like_autograd(backward)?;
        let report = PartitionReport::new(graph, &saved, &forward, &backward, &self.options.hints)?;
        Ok(Partition {
            forward,
            backward,
            report,
        })
    }
}

/// `joint` with its symbolic tensor sizes at `hints` (sizes stay symbolic), and each
/// node's symbolic meta by name; `(None, None)` for a static joint. A symbol without a hint
/// is an error naming it.
#[allow(clippy::type_complexity)]
fn joint_at_hints(
    joint: &Graph,
    hints: &graphbug_ir::Bindings,
) -> Result<(Option<Graph>, Option<HashMap<String, Meta>>), PartitionError> {
    if !joint.nodes.iter().any(|n| n.meta.is_symbolic()) {
        return Ok((None, None));
    }
    let mut hinted = joint.clone();
    let mut metas = HashMap::new();
    for node in &mut hinted.nodes {
        if let Meta::SymTensor(_) = &node.meta {
            let bound = crate::default::at_hints(node, hints)?;
            metas.insert(
                node.name.to_string(),
                std::mem::replace(&mut node.meta, Meta::Tensor(bound)),
            );
        }
    }
    Ok((Some(hinted), Some(metas)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use graphbug_ir::parse_graph;

    /// `sin(exp(x))` with gradient `tangent * exp(x)` (not a real derivative; the shape of
    /// the problem is what matters).
    fn tiny() -> Graph {
        parse_graph(
            r#"
class Joint(torch.nn.Module):
    def forward(self, primals_1: "f32[4]", tangents_1: "f32[4]"):
        exp: "f32[4]" = torch.ops.aten.exp.default(primals_1)
        sin: "f32[4]" = torch.ops.aten.sin.default(exp)
        mul: "f32[4]" = torch.ops.aten.mul.Tensor(tangents_1, exp)
        return (sin, mul)
"#,
        )
        .unwrap()
    }

    #[test]
    fn classes_distances_and_weights() {
        let g = tiny();
        let p = MinCutProblem::new(&g, 1, &MinCutOptions::default()).unwrap();
        let id = |name: &str| p.graph().find(name).unwrap();
        assert_eq!(p.class(id("primals_1")), NodeClass::RequiredForward);
        assert_eq!(p.class(id("exp")), NodeClass::RequiredForward);
        assert_eq!(p.class(id("mul")), NodeClass::RequiredBackward);
        assert_eq!(p.class(id("tangents_1")), NodeClass::RequiredBackward);
        assert_eq!(p.dist_from_bw(id("exp")), 1);
        assert_eq!(p.dist_from_bw(id("primals_1")), 2);
        assert_eq!(p.dist_from_bw(id("sin")), UNREACHABLE_FROM_BW);
        // 16 bytes · 1.1² (placeholders are materialized).
        assert_eq!(p.weight(id("primals_1")).unwrap(), 19);
        // 16 bytes · 1.1, doubled: both readers could fuse with it.
        assert_eq!(p.weight(id("exp")).unwrap(), 34);
        let bans = p.heuristic_bans(BanHeuristics::default(), None);
        assert!(bans[id("primals_1").index()] && !bans[id("exp").index()]);
        let cut = p.solve(&bans).unwrap();
        assert_eq!(cut.saved, [id("primals_1")]);
        assert_eq!(cut.weight, 19);
        let part = p.partition(&cut.saved).unwrap();
        assert_eq!(part.report.recomputed.get("aten.exp"), Some(&1));
        // Banning `exp` makes it the cheapest cut.
        let mut bans = bans;
        bans[id("exp").index()] = true;
        assert_eq!(p.solve(&bans).unwrap().saved, [id("exp")]);
    }

    #[test]
    fn options_debug_and_defaults() {
        let o = MinCutOptions {
            must_save: Some(Arc::new(|_| true)),
            ..Default::default()
        };
        let text = format!("{o:?}");
        assert!(text.contains("must_save: \"Some(<fn>)\""), "{text}");
        assert_eq!(o.max_dist_from_bw, 1000);
        assert_eq!(o.effective_bans(), BanHeuristics::default());
        let aggressive = MinCutOptions {
            aggressive_recomputation: true,
            ..Default::default()
        };
        assert!(!aggressive.effective_bans().not_in_allowlist);
        assert!(aggressive.effective_bans().reduction);
    }

    #[test]
    fn without_a_backward_the_default_partitioner_runs() {
        let g = parse_graph(
            r#"
class Joint(torch.nn.Module):
    def forward(self, primals_1: "f32[4]"):
        exp: "f32[4]" = torch.ops.aten.exp.default(primals_1)
        return (exp, None)
"#,
        )
        .unwrap();
        let p = min_cut_rematerialization_partition(&g, 1, &MinCutOptions::default()).unwrap();
        assert!(p.report.saved.is_empty());
        assert_eq!(p.backward.outputs(), [Value::None]);
    }
}
