//! The peak memory of a partitioned training step: the forward, then the backward, node by
//! node in the order the graphs run, with every storage alive from the node that allocates
//! it to the last node that reads it (or to the end of its graph, for what the graph
//! returns).
//!
//! functorch's `activation_memory_budget` bounds a proxy, the bytes saved for the backward;
//! what runs out is the peak, which also holds the temporaries of the forward, the tangents
//! and gradients, and the recomputed values of the backward. This model counts them all:
//!
//! - A call allocates one storage per tensor it returns, of the size its annotation gives,
//!   unless the result shares another value's storage (a view, an in-place result), which
//!   allocates nothing and keeps that storage alive. Which results share is asked of an
//!   [`Aliases`]: the schemas' declarations ([`SchemaAliases`]), or what libtorch's kernels
//!   do on the meta device (graphbug-aten's `ObservedAliases`).
//! - The primals (parameters and inputs) are resident for the whole step.
//! - The forward's outputs live to its end; then its user outputs go, and the saved values
//!   live on into the backward until its last read of them. The backward's tangents live
//!   from its start, its gradients to its end.
//!
//! A result whose sharing is unknown allocates a fresh storage (the model errs high); a
//! value without a static size counts as none and is reported.

use std::collections::HashSet;

use graphbug_ir::schema::Schemas;
use graphbug_ir::{Graph, Meta, NodeId, NodeKind, Value};
use serde::{Deserialize, Serialize};

use crate::budget::{BudgetSearch, CutFamily};
use crate::default::PartitionError;
use crate::mincut::{CutObjective, MinCutProblem};

/// What [`model_peak`] found, in bytes.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PeakModel {
    /// The primals, resident through the step.
    pub resident: u64,
    /// The storages the forward hands the backward (besides the primals').
    pub saved: u64,
    /// The most bytes alive during the forward.
    pub forward_peak: u64,
    /// The most bytes alive during the backward (the primals and saved values included).
    pub backward_peak: u64,
    /// The larger of the two: the step's peak.
    pub peak: u64,
    /// Values without a static size, counted as none.
    pub sizeless: usize,
}

/// For each node of a graph and each of its results, the node and result whose storage it
/// holds (a view, an in-place result), if any.
pub type Shares = Vec<Vec<Option<(NodeId, usize)>>>;

/// What a run of a graph shows of its results' memory, for [`model_peak`].
#[derive(Clone, Debug, Default)]
pub struct Observation {
    /// Which results share another's storage.
    pub shares: Shares,
    /// Each node's results as a run makes them, where known (a multi-output node's results
    /// nothing reads carry no annotation, yet take memory); `None`: the graph's annotations
    /// are all there is.
    pub metas: Option<Vec<Meta>>,
    /// Per node and result, where a run on the device showed it: the bytes of the storage
    /// its kernel allocated, when more than the result holds (CPU `mse_loss` returns a 0-d
    /// view of its elementwise buffer); `None`: the result's own bytes.
    pub allocated: Option<Vec<Vec<Option<u64>>>>,
}

/// Which values share another value's storage.
pub trait Aliases {
    /// The [`Shares`] of `graph`.
    fn shares(&self, graph: &Graph) -> Shares;

    /// The shares and what else a run shows (see [`Observation`]); by default the shares
    /// alone.
    fn observe(&self, graph: &Graph) -> Observation {
        Observation {
            shares: self.shares(graph),
            ..Observation::default()
        }
    }
}

/// Aliasing as the op schemas declare it (`Tensor(a) self -> Tensor(a)`, `Tensor(a)[]`).
pub struct SchemaAliases<'s>(pub &'s dyn Schemas);

impl Aliases for SchemaAliases<'_> {
    fn shares(&self, graph: &Graph) -> Shares {
        graph
            .nodes
            .iter()
            .map(|node| {
                let NodeKind::Call { op, args, .. } = &node.kind else {
                    return Vec::new();
                };
                let Some(schema) = self.0.schema(op) else {
                    return Vec::new();
                };
                let items = match &node.meta {
                    Meta::Multi(items) => items.len(),
                    _ => 1,
                };
                // One list return (`Tensor(a)[]`) covers every item.
                let list = schema.returns.len() == 1 && items > 1;
                (0..items)
                    .map(|k| {
                        let ret = schema.returns.get(if list { 0 } else { k })?;
                        let sets: Vec<&String> = ret
                            .alias_set
                            .iter()
                            .chain(&ret.contained_alias_set)
                            .collect();
                        if sets.is_empty() {
                            return None;
                        }
                        let j = schema
                            .arguments
                            .iter()
                            .position(|a| a.alias_set.iter().any(|x| sets.contains(&x)))?;
                        match args.get(j)? {
                            Value::Node(src) => Some((*src, 0)),
                            _ => None,
                        }
                    })
                    .collect()
            })
            .collect()
    }
}

/// Aliasing observed once on a joint graph, for the graphs partitioned from it: their nodes
/// keep the joint's names, ops and inputs, so each call's results share what they shared in
/// the joint, re-rooted at the inputs the graph has (a saved value is the backward's own
/// placeholder). Pricing a cut so needs no run of its graphs. A graph with a node the joint
/// does not have, or a joint whose run found no metas, is asked of the underlying
/// [`Aliases`] as it is.
pub struct JointAliases<'a> {
    joint: &'a Graph,
    names: std::collections::HashMap<&'a str, NodeId>,
    shares: Shares,
    metas: Option<Vec<Meta>>,
    allocated: Option<Vec<Vec<Option<u64>>>>,
    underlying: &'a dyn Aliases,
}

impl<'a> JointAliases<'a> {
    /// Observes `joint` once through `underlying`.
    pub fn new(joint: &'a Graph, underlying: &'a dyn Aliases) -> Self {
        let Observation {
            shares,
            metas,
            allocated,
        } = underlying.observe(joint);
        JointAliases {
            joint,
            names: joint.name_map(),
            shares,
            metas,
            allocated,
            underlying,
        }
    }

    /// The joint's storage root of `(node, item)`: the first holder of its storage.
    fn root(&self, j: NodeId, item: usize) -> (NodeId, usize) {
        self.shares
            .get(j.index())
            .and_then(|items| items.get(item).copied().flatten())
            .unwrap_or((j, item))
    }

    /// `graph`'s observation from the joint's, or `None` where it does not carry over.
    fn carry(&self, graph: &Graph) -> Option<Observation> {
        let metas = self.metas.as_ref()?;
        let mut shares: Shares = Vec::with_capacity(graph.nodes.len());
        let mut out_metas = Vec::with_capacity(graph.nodes.len());
        let mut allocated = Vec::with_capacity(graph.nodes.len());
        // The joint node of each of `graph`'s nodes.
        let mut joint_of = Vec::with_capacity(graph.nodes.len());
        for node in &graph.nodes {
            let j = *self.names.get(node.name.as_str())?;
            joint_of.push(j);
            let NodeKind::Call { op, .. } = &node.kind else {
                shares.push(Vec::new());
                out_metas.push(Meta::Unknown);
                allocated.push(Vec::new());
                continue;
            };
            if self.joint.node(j).op() != Some(op) {
                return None;
            }
            let items = self.shares.get(j.index()).map_or(0, Vec::len);
            let mut mine = Vec::with_capacity(items);
            for k in 0..items {
                let Some(root) = self.shares[j.index()][k] else {
                    mine.push(None);
                    continue;
                };
                // The input holding the same storage, and its own holder in `graph`.
                let mut held = None;
                node.for_each_input(|p| {
                    if held.is_some() {
                        return;
                    }
                    let jp = joint_of[p.index()];
                    let width = self.shares.get(jp.index()).map_or(1, |v| v.len().max(1));
                    if let Some(item) = (0..width).find(|&t| self.root(jp, t) == root) {
                        let own = shares
                            .get(p.index())
                            .and_then(|v: &Vec<Option<(NodeId, usize)>>| v.get(item).copied())
                            .flatten();
                        held = Some(own.unwrap_or((p, item)));
                    }
                });
                mine.push(Some(held?));
            }
            shares.push(mine);
            out_metas.push(metas.get(j.index()).cloned().unwrap_or(Meta::Unknown));
            if let Some(a) = &self.allocated {
                allocated.push(a.get(j.index()).cloned().unwrap_or_default());
            }
        }
        Some(Observation {
            shares,
            metas: Some(out_metas),
            allocated: self.allocated.as_ref().map(|_| allocated),
        })
    }
}

impl Aliases for JointAliases<'_> {
    fn shares(&self, graph: &Graph) -> Shares {
        self.observe(graph).shares
    }

    fn observe(&self, graph: &Graph) -> Observation {
        self.carry(graph)
            .unwrap_or_else(|| self.underlying.observe(graph))
    }
}

/// The storages a run of one graph tracks.
struct Storages {
    bytes: Vec<u64>,
    /// Never freed (the primals).
    pinned: HashSet<usize>,
    sizeless: usize,
}

impl Storages {
    fn fresh(&mut self, meta: Option<&graphbug_ir::TensorMeta>) -> usize {
        self.allocate(meta, None)
    }

    /// A new storage for a result of `meta` whose kernel allocated `allocated` bytes for it
    /// (more than the result holds), if a run showed that.
    fn allocate(
        &mut self,
        meta: Option<&graphbug_ir::TensorMeta>,
        allocated: Option<u64>,
    ) -> usize {
        match meta.and_then(|m| m.checked_nbytes()) {
            Some(b) => self.bytes.push(allocated.map_or(b, |a| a.max(b))),
            None => {
                self.sizeless += 1;
                self.bytes.push(0);
            }
        }
        self.bytes.len() - 1
    }
}

/// The peak of `forward` then `backward` (a partition's graphs; the forward returns its
/// `num_fwd_outputs` user outputs, then the values saved for the backward, which takes
/// them first, then the tangents).
pub fn model_peak(
    forward: &Graph,
    backward: &Graph,
    num_fwd_outputs: usize,
    aliases: &dyn Aliases,
) -> PeakModel {
    let mut st = Storages {
        bytes: Vec::new(),
        pinned: HashSet::new(),
        sizeless: 0,
    };
    let primals: Vec<Option<usize>> = forward
        .placeholders()
        .iter()
        .map(|&id| match &forward.node(id).meta {
            Meta::Tensor(m) => {
                let s = st.fresh(Some(m));
                st.pinned.insert(s);
                Some(s)
            }
            _ => None,
        })
        .collect();
    let resident: u64 = st.pinned.iter().map(|&s| st.bytes[s]).sum();
    let (forward_peak, fw_out) = run(forward, &primals, resident, &mut st, aliases);
    // The backward's inputs: the saved values, then fresh tangents.
    let saved: Vec<Option<usize>> = fw_out.iter().skip(num_fwd_outputs).cloned().collect();
    let mut inputs = Vec::new();
    for (k, &id) in backward.placeholders().iter().enumerate() {
        inputs.push(match saved.get(k) {
            Some(s) => *s,
            None => match &backward.node(id).meta {
                Meta::Tensor(m) => Some(st.fresh(Some(m))),
                _ => None,
            },
        });
    }
    let carried: HashSet<usize> = saved
        .iter()
        .flatten()
        .copied()
        .filter(|s| !st.pinned.contains(s))
        .collect();
    let saved_bytes = carried.iter().map(|&s| st.bytes[s]).sum();
    let (backward_peak, _) = run(backward, &inputs, resident, &mut st, aliases);
    PeakModel {
        resident,
        saved: saved_bytes,
        forward_peak,
        backward_peak,
        peak: forward_peak.max(backward_peak),
        sizeless: st.sizeless,
    }
}

/// Runs `graph` whose placeholders hold `inputs` (storages; `None` for non-tensors), with
/// `resident` bytes of pinned storages alive throughout: the most bytes alive, and the
/// storage of each output (of its first tensor).
fn run(
    graph: &Graph,
    inputs: &[Option<usize>],
    resident: u64,
    st: &mut Storages,
    aliases: &dyn Aliases,
) -> (u64, Vec<Option<usize>>) {
    let n = graph.nodes.len();
    let Observation {
        shares,
        metas: observed,
        allocated,
    } = aliases.observe(graph);
    // Each node's storages: one per item (several for a multi-output node; `None` for an
    // item that is no tensor).
    let mut of: Vec<Vec<Option<usize>>> = Vec::with_capacity(n);
    let mut created: Vec<Vec<usize>> = vec![Vec::new(); n];
    let mut placeholder = 0;
    for (i, node) in graph.nodes.iter().enumerate() {
        let storages = match &node.kind {
            NodeKind::Placeholder => {
                let s = inputs.get(placeholder).copied().flatten();
                placeholder += 1;
                vec![s]
            }
            NodeKind::GetItem { source, index } => {
                vec![of[source.index()].get(*index).copied().flatten()]
            }
            NodeKind::GetAttr { .. } => {
                let s = st.fresh(node.meta.tensor());
                created[i].push(s);
                vec![Some(s)]
            }
            NodeKind::Call { .. } => {
                let meta = observed
                    .as_ref()
                    .and_then(|m| m.get(i))
                    .filter(|m| !matches!(m, Meta::Unknown))
                    .unwrap_or(&node.meta);
                let items: Vec<Option<&graphbug_ir::TensorMeta>> = match meta {
                    Meta::Tensor(m) => vec![Some(m)],
                    Meta::Multi(items) => items.iter().map(Option::as_ref).collect(),
                    Meta::Unknown => {
                        st.sizeless += 1;
                        Vec::new()
                    }
                    Meta::SymTensor(_) => {
                        st.sizeless += 1;
                        vec![None]
                    }
                    Meta::Sym(_) => Vec::new(),
                };
                let mut out = Vec::new();
                for (k, meta) in items.into_iter().enumerate() {
                    let Some(meta) = meta else {
                        out.push(None);
                        continue;
                    };
                    // Shares another value's storage (a view, an in-place result).
                    let aliased = shares
                        .get(i)
                        .and_then(|items| items.get(k).copied().flatten())
                        .and_then(|(src, item)| of[src.index()].get(item).copied().flatten());
                    out.push(Some(match aliased {
                        Some(s) => s,
                        None => {
                            let bytes = allocated
                                .as_ref()
                                .and_then(|a| a.get(i)?.get(k).copied().flatten());
                            let s = st.allocate(Some(meta), bytes);
                            created[i].push(s);
                            s
                        }
                    }));
                }
                out
            }
        };
        of.push(storages);
    }
    // The last node reading each storage; what the graph returns lives to its end.
    let end = n;
    let mut last: Vec<Option<usize>> = vec![None; st.bytes.len()];
    for (i, node) in graph.nodes.iter().enumerate() {
        // A value lives at least through the node making it; an input, until it is read.
        if !node.is_placeholder() {
            for &s in of[i].iter().flatten() {
                last[s] = Some(last[s].map_or(i, |l: usize| l.max(i)));
            }
        }
        node.for_each_input(|src| {
            for &s in of[src.index()].iter().flatten() {
                last[s] = Some(last[s].map_or(i, |l: usize| l.max(i)));
            }
        });
    }
    let mut outputs = Vec::new();
    for v in graph.outputs() {
        let mut first = None;
        v.for_each_node(&mut |id| {
            for &s in of[id.index()].iter().flatten() {
                last[s] = Some(end);
                first.get_or_insert(s);
            }
        });
        outputs.push(first);
    }
    // Storages alive at the start: the inputs (not the pinned, counted in `resident`).
    let starting: HashSet<usize> = inputs
        .iter()
        .flatten()
        .copied()
        .filter(|s| !st.pinned.contains(s))
        .collect();
    let mut live: u64 = resident + starting.iter().map(|&s| st.bytes[s]).sum::<u64>();
    let mut frees: Vec<Vec<usize>> = vec![Vec::new(); n + 1];
    for (s, l) in last.iter().enumerate() {
        if st.pinned.contains(&s) {
            continue;
        }
        // An input nothing reads stays, held by the caller, to the graph's end.
        if let Some(l) = l {
            frees[*l].push(s);
        }
    }
    let mut peak = live;
    for i in 0..n {
        live += created[i]
            .iter()
            .filter(|s| !st.pinned.contains(s))
            .map(|&s| st.bytes[s])
            .sum::<u64>();
        peak = peak.max(live);
        for &s in &frees[i] {
            live -= st.bytes[s];
        }
    }
    (peak, outputs)
}

/// How many saved-bytes budgets (0, 1/N, ..., 1) the peak budgets' frontier is drawn from.
pub const PEAK_FRONTIER_STEPS: usize = 20;

/// A bound on the modelled peak of a training step.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum PeakBudget {
    /// At most this many bytes.
    Bytes(u64),
    /// A fraction between the least peak of graphbug's cuts (0) and the runtime-optimal cut's (1).
    Fraction(f64),
}

impl std::str::FromStr for PeakBudget {
    type Err = String;

    /// `0.3` (a fraction), `512MB`, `2GiB`, `1000000` (bytes).
    fn from_str(text: &str) -> Result<PeakBudget, String> {
        let t = text.trim();
        let split = t
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(t.len());
        let (num, unit) = t.split_at(split);
        let x: f64 = num
            .parse()
            .map_err(|_| format!("`{text}` is not a peak budget (0.3, 512MB, 2GiB, bytes)"))?;
        let scale: f64 = match unit.trim().to_ascii_lowercase().as_str() {
            "" if t.contains('.') => {
                return if (0.0..=1.0).contains(&x) {
                    Ok(PeakBudget::Fraction(x))
                } else {
                    Err(format!("fraction {x} is outside 0..=1"))
                }
            }
            "" | "b" => 1.0,
            "kb" => 1e3,
            "mb" => 1e6,
            "gb" => 1e9,
            "kib" => 1024.0,
            "mib" => 1024.0 * 1024.0,
            "gib" => 1024.0 * 1024.0 * 1024.0,
            other => {
                return Err(format!(
                    "unknown unit `{other}` (B, KB, MB, GB, KiB, MiB, GiB)"
                ))
            }
        };
        Ok(PeakBudget::Bytes((x * scale).round() as u64))
    }
}

/// One cut: the saved-bytes budget (functorch's) and family that produced it, and what it
/// costs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PeakPoint {
    /// functorch's activation memory budget that produced the cut (or the cut the peak
    /// search started from).
    pub saved_budget: f64,
    /// The family of cuts the budget search made it in.
    #[serde(default)]
    pub family: CutFamily,
    /// Bans the peak search toggled, from the budget's cut to this one (0: the budget's
    /// cut as it is).
    #[serde(default)]
    pub moves: usize,
    /// The values saved (ids of [`MinCutProblem::graph`]).
    #[serde(skip)]
    pub saved: Vec<NodeId>,
    /// Bytes the forward saves for the backward.
    pub saved_bytes: u64,
    /// The step's modelled peak.
    pub peak: PeakModel,
    /// Estimated seconds of recomputation.
    pub recompute_seconds: f64,
    /// FLOPs recomputed.
    pub recompute_flops: u64,
}

/// Cuts the peak search solves at most: a bound on its time that no graph lifts.
pub const MAX_PEAK_SEARCH_CUTS: usize = 1024;

/// The cuts priced so far, each once.
struct Priced<'a> {
    problem: &'a MinCutProblem,
    aliases: JointAliases<'a>,
    seen: HashSet<Vec<NodeId>>,
    points: Vec<PeakPoint>,
}

impl Priced<'_> {
    /// Prices the cut saving `saved`, unless it was priced before: its index in `points`.
    fn price(
        &mut self,
        saved: Vec<NodeId>,
        saved_budget: f64,
        family: CutFamily,
        moves: usize,
    ) -> Result<Option<usize>, PartitionError> {
        if !self.seen.insert(saved.clone()) {
            return Ok(None);
        }
        let problem = self.problem;
        let p = problem.partition(&saved)?;
        let peak = model_peak(
            &p.forward,
            &p.backward,
            problem.num_fwd_outputs(),
            &self.aliases,
        );
        self.points.push(PeakPoint {
            saved_budget,
            family,
            moves,
            saved,
            saved_bytes: p.report.saved_bytes,
            peak,
            recompute_seconds: p.report.recompute_seconds,
            recompute_flops: p.report.recompute_flops,
        });
        Ok(Some(self.points.len() - 1))
    }
}

/// The cuts of `steps + 1` saved-bytes budgets from 0 to 1, in every [`CutFamily`], and
/// those a search for a lower peak finds next to the least-peak one, with their modelled
/// peaks, less those another cut beats on both peak and recomputation: ordered by peak,
/// each costs less recomputation than the one before. A lower peak budget can so never end
/// at a higher peak. Aliasing is observed once, on the joint ([`JointAliases`]).
///
/// The search starts at the least-peak cut of the budgets and toggles the ban of one
/// movable node at a time ([`BudgetSearch::movable`]: may the backward recompute it, or
/// not), solving the cut again and keeping a toggle that lowers the modelled peak, until a
/// pass over the nodes keeps none or [`MAX_PEAK_SEARCH_CUTS`] cuts were solved. The
/// budgets' cuts bound a proxy (saved bytes); the search reads the peak itself.
pub fn peak_frontier(
    problem: &MinCutProblem,
    aliases: &dyn Aliases,
    steps: usize,
) -> Result<Vec<PeakPoint>, PartitionError> {
    let steps = steps.max(1);
    let search = BudgetSearch::new(problem)?;
    let mut priced = Priced {
        problem,
        aliases: JointAliases::new(problem.graph(), aliases),
        seen: HashSet::new(),
        points: Vec::new(),
    };
    // The cut of least peak, and the bans and objective it was solved with.
    let mut start: Option<(usize, Vec<bool>, CutObjective)> = None;
    for family in CutFamily::ALL {
        for k in 0..=steps {
            let budget = k as f64 / steps as f64;
            let choice = match search.choose(budget, family) {
                Ok(c) => c,
                Err(PartitionError::BudgetUnreachable { .. }) => continue,
                Err(e) => return Err(e),
            };
            let Some(i) = priced.price(choice.saved, budget, family, 0)? else {
                continue;
            };
            let peak = priced.points[i].peak.peak;
            if start
                .as_ref()
                .is_none_or(|(s, _, _)| peak < priced.points[*s].peak.peak)
            {
                start = Some((i, choice.bans, choice.objective));
            }
        }
    }
    if let Some((mut best, mut bans, objective)) = start {
        let (budget, family) = (priced.points[best].saved_budget, priced.points[best].family);
        let movable = search.movable();
        let (mut moves, mut solves) = (0, 0);
        let mut improved = true;
        while improved {
            improved = false;
            for &m in &movable {
                if solves >= MAX_PEAK_SEARCH_CUTS {
                    break;
                }
                bans[m.index()] = !bans[m.index()];
                solves += 1;
                let saved = problem.solve_for(&bans, objective)?.saved;
                let better = match priced.price(saved, budget, family, moves + 1)? {
                    Some(i) if priced.points[i].peak.peak < priced.points[best].peak.peak => {
                        best = i;
                        true
                    }
                    _ => false,
                };
                if better {
                    moves += 1;
                    improved = true;
                } else {
                    bans[m.index()] = !bans[m.index()];
                }
            }
        }
    }
    let mut points = priced.points;
    points.sort_by(|a, b| {
        a.peak
            .peak
            .cmp(&b.peak.peak)
            .then(a.recompute_seconds.total_cmp(&b.recompute_seconds))
            .then(b.saved_budget.total_cmp(&a.saved_budget))
    });
    let mut frontier: Vec<PeakPoint> = Vec::new();
    for p in points {
        if frontier
            .last()
            .is_none_or(|last| p.recompute_seconds < last.recompute_seconds)
        {
            frontier.push(p);
        }
    }
    Ok(frontier)
}

/// The cut with the least recomputation whose modelled peak fits `budget`, and the byte
/// limit the budget meant: the frontier point ([`peak_frontier`]) with the highest peak
/// within the limit. A limit below every cut's peak is an error saying the least peak.
pub fn choose_by_peak(
    frontier: &[PeakPoint],
    budget: PeakBudget,
) -> Result<(usize, u64), PartitionError> {
    let least = frontier.first().map_or(0, |p| p.peak.peak);
    // The runtime-optimal cut recomputes least: the frontier's last point.
    let optimal = frontier.last().map_or(0, |p| p.peak.peak);
    let limit = match budget {
        PeakBudget::Bytes(b) => b,
        PeakBudget::Fraction(f) => least + (f * (optimal - least) as f64).floor() as u64,
    };
    frontier
        .iter()
        .rposition(|p| p.peak.peak <= limit)
        .map(|k| (k, limit))
        .ok_or(PartitionError::PeakUnreachable {
            limit,
            least,
            resident: frontier.first().map_or(0, |p| p.peak.resident),
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use graphbug_ir::schema::Schema;
    use graphbug_ir::{parse_graph, OpName};

    /// `view` aliases its input; the other ops allocate.
    struct Table;

    impl Schemas for Table {
        fn schema(&self, op: &OpName) -> Option<std::sync::Arc<Schema>> {
            let text = match op.name.as_str() {
                "view" => "aten::view(Tensor(a) self, SymInt[] size) -> Tensor(a)",
                "mm" => "aten::mm(Tensor self, Tensor mat2) -> Tensor",
                "relu" => "aten::relu(Tensor self) -> Tensor",
                "mul" => "aten::mul.Tensor(Tensor self, Tensor other) -> Tensor",
                _ => return None,
            };
            Some(std::sync::Arc::new(Schema::parse(text).unwrap()))
        }
    }

    const FW: &str = r#"class Fw(torch.nn.Module):
    def forward(self, primals_1: "f32[4, 4]"):
        mm: "f32[4, 4]" = torch.ops.aten.mm.default(primals_1, primals_1)
        view: "f32[16]" = torch.ops.aten.view.default(mm, [16])
        relu: "f32[16]" = torch.ops.aten.relu.default(view)
        return (relu, view)
"#;

    const BW: &str = r#"class Bw(torch.nn.Module):
    def forward(self, view: "f32[16]", tangents_1: "f32[16]"):
        mul: "f32[16]" = torch.ops.aten.mul.Tensor(tangents_1, view)
        return (mul,)
"#;

    #[test]
    fn every_storage_counts_from_its_allocation_to_its_last_read() {
        let (fw, bw) = (parse_graph(FW).unwrap(), parse_graph(BW).unwrap());
        let m = model_peak(&fw, &bw, 1, &SchemaAliases(&Table));
        // 64 B each: the primal; mm (viewed, saved); relu. Backward: the primal, the saved
        // storage, the tangent, then mul.
        assert_eq!(
            m,
            PeakModel {
                resident: 64,
                saved: 64,
                forward_peak: 192,
                backward_peak: 256,
                peak: 256,
                sizeless: 0,
            }
        );
    }

    #[test]
    fn an_input_nothing_reads_stays_to_the_end() {
        // The gradient needs only the saved value: the tangent is never read, yet the caller
        // holds it through the backward.
        let fw = parse_graph(FW).unwrap();
        let bw = parse_graph(
            r#"class Bw(torch.nn.Module):
    def forward(self, view: "f32[16]", tangents_1: "f32[16]"):
        relu: "f32[16]" = torch.ops.aten.relu.default(view)
        return (relu,)
"#,
        )
        .unwrap();
        // The primal, the saved storage, the tangent, then relu: 64 B each.
        assert_eq!(
            model_peak(&fw, &bw, 1, &SchemaAliases(&Table)).backward_peak,
            256
        );
    }

    #[test]
    fn a_choice_is_the_highest_frontier_point_within_the_limit() {
        let point = |peak: u64, secs: f64| PeakPoint {
            saved_budget: 0.0,
            family: CutFamily::default(),
            moves: 0,
            saved: Vec::new(),
            saved_bytes: 0,
            peak: PeakModel {
                peak,
                resident: 10,
                ..PeakModel::default()
            },
            recompute_seconds: secs,
            recompute_flops: 0,
        };
        let frontier = [point(100, 3.0), point(150, 2.0), point(200, 1.0)];
        let pick =
            |b| choose_by_peak(&frontier, b).map(|(k, limit)| (frontier[k].peak.peak, limit));
        assert_eq!(pick(PeakBudget::Fraction(0.0)).unwrap(), (100, 100));
        assert_eq!(pick(PeakBudget::Fraction(0.5)).unwrap(), (150, 150));
        assert_eq!(pick(PeakBudget::Fraction(0.49)).unwrap(), (100, 149));
        assert_eq!(pick(PeakBudget::Bytes(1000)).unwrap(), (200, 1000));
        let err = pick(PeakBudget::Bytes(99)).unwrap_err();
        assert!(
            matches!(
                err,
                PartitionError::PeakUnreachable {
                    least: 100,
                    resident: 10,
                    limit: 99
                }
            ),
            "{err}"
        );
    }
}
