//! functorch's `default_partition`: the forward computes what the forward outputs need;
//! every forward value the backward reads is saved.

use std::collections::BTreeMap;

use rustc_hash::FxHashSet;

use graphbug_ir::passes::{backward_side_effects, default_side_effects, extract_subgraph};
use graphbug_ir::{Bindings, Graph, IrError, Meta, Node, NodeId, NodeKind, TensorMeta, Value};
use serde::{Deserialize, Serialize};

use crate::cost::{node_flops, CostModel};

/// Why a joint graph cannot be partitioned.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PartitionError {
    /// The joint graph does not have the expected shape.
    #[error("bad joint graph: {0}")]
    BadJoint(String),
    /// A saved value has no shape, so its size is unknown.
    #[error("saved value `{0}` has no shape annotation")]
    MissingMeta(String),
    /// A value's size needs a symbol's value (a size hint) that was not given.
    #[error("value `{0}` is {1}: its size needs a hint for {2} (give the symbols' values: --bind {2}=N)")]
    NoHint(String, String, String),
    /// An option is out of range.
    #[error("bad option: {0}")]
    BadOption(String),
    /// No partition saves as little as the memory budget allows.
    #[error(
        "activation memory budget {budget} is unreachable: the least the forward can save is \
         {min_bytes} bytes (budget {min_budget:.4}), because values that are never recomputed \
         (random ops, must-save nodes) have to be saved"
    )]
    BudgetUnreachable {
        /// The requested budget.
        budget: f64,
        /// The smallest budget that can be met.
        min_budget: f64,
        /// The bytes saved at that budget.
        min_bytes: u64,
    },
    /// No partition's modelled peak fits the peak budget.
    #[error(
        "peak budget {limit} bytes is below the least peak of graphbug's cuts (at saved-bytes \
         budgets from 0 to 1, and the peak search's): {least} bytes (the primals alone hold {resident})"
    )]
    PeakUnreachable {
        /// The byte limit asked for.
        limit: u64,
        /// The least modelled peak of the cuts tried.
        least: u64,
        /// Bytes of the primals, which any step holds.
        resident: u64,
    },
    /// The memory-budget knapsack failed (for example, too many items for `exact`).
    #[error("memory budget: {0}")]
    Knapsack(#[from] crate::knapsack::KnapsackError),
    /// A graph error.
    #[error(transparent)]
    Ir(#[from] IrError),
}

/// What a partition saves and computes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PartitionReport {
    /// Names of the saved values, in the order the forward returns them (tensors, then
    /// the sizes of a dynamic-shape joint, as functorch orders them).
    pub saved: Vec<String>,
    /// Their total size in bytes (of a dynamic-shape joint: at the size hints given; a
    /// saved size counts 0, it lives on the autograd context, not in device memory).
    pub saved_bytes: u64,
    /// Of a dynamic-shape joint: the saved bytes as an expression of the size symbols.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub saved_bytes_expr: Option<String>,
    /// call_function nodes of the forward graph.
    pub fw_ops: usize,
    /// call_function nodes of the backward graph.
    pub bw_ops: usize,
    /// Forward ops the backward recomputes, counted by op (`aten.relu`).
    #[serde(default)]
    pub recomputed: BTreeMap<String, usize>,
    /// FLOPs of those recomputed ops.
    #[serde(default)]
    pub recompute_flops: u64,
    /// Their estimated runtime in seconds on [`CostModel::default`]'s nominal machine.
    #[serde(default)]
    pub recompute_seconds: f64,
}

impl PartitionReport {
    /// The report of a forward/backward pair saving `saved` (ids of `joint`); `hints`
    /// gives the size symbols' values of a dynamic-shape joint.
    pub fn new(
        joint: &Graph,
        saved: &[NodeId],
        forward: &Graph,
        backward: &Graph,
        hints: &Bindings,
    ) -> Result<PartitionReport, PartitionError> {
        let recomputed = recomputed_nodes(forward, backward);
        let model = CostModel::default();
        let mut counts = BTreeMap::new();
        let (mut flops, mut seconds) = (0u64, 0.0);
        for &id in &recomputed {
            let op = backward.node(id).op().expect("recomputed nodes are calls");
            *counts
                .entry(format!("{}.{}", op.namespace, op.name))
                .or_insert(0) += 1;
            flops = flops.saturating_add(node_flops(backward, id));
            seconds += model.estimate_runtime(backward, id);
        }
        Ok(PartitionReport {
            saved: saved
                .iter()
                .map(|&s| joint.node(s).name.to_string())
                .collect(),
            saved_bytes: saved_bytes(joint, saved, hints)?,
            saved_bytes_expr: saved_bytes_expr(joint, saved),
            fw_ops: forward.num_call_function_nodes(),
            bw_ops: backward.num_call_function_nodes(),
            recomputed: counts,
            recompute_flops: flops,
            recompute_seconds: seconds,
        })
    }
}

/// A joint graph split in two.
#[derive(Clone, Debug, PartialEq)]
pub struct Partition {
    /// Takes the primals; returns the forward outputs, then the saved values.
    pub forward: Graph,
    /// Takes the saved values, then the tangents; returns one gradient per primal.
    pub backward: Graph,
    /// Sizes and counts.
    pub report: PartitionReport,
}

/// The joint's primals and tangents (by AOTAutograd's placeholder names).
pub fn joint_inputs(joint: &Graph) -> Result<(Vec<NodeId>, Vec<NodeId>), PartitionError> {
    let mut primals = Vec::new();
    let mut tangents = Vec::new();
    for id in joint.placeholders() {
        let name = &joint.node(id).name;
        if name.starts_with("tangents") {
            tangents.push(id);
        } else if name.starts_with("primals") {
            primals.push(id);
        } else {
            return Err(PartitionError::BadJoint(format!(
                "input `{name}` is neither a primal (primals_N) nor a tangent (tangents_N)"
            )));
        }
    }
    Ok((primals, tangents))
}

/// How many primals are effect tokens (the first argument of a `with_effects`): AOTAutograd
/// returns no gradient for them.
pub fn effect_tokens(joint: &Graph, primals: &[NodeId]) -> usize {
    // One pass over the graph, not one per primal.
    let tokens: FxHashSet<NodeId> = joint
        .nodes
        .iter()
        .filter_map(|n| match &n.kind {
            NodeKind::Call { op, args, .. } if op.is_effectful() => args.first()?.as_node(),
            _ => None,
        })
        .collect();
    primals.iter().filter(|p| tokens.contains(p)).count()
}

/// Splits the joint outputs into (forward outputs, gradients).
pub fn split_outputs(
    joint: &Graph,
    num_fwd_outputs: usize,
) -> Result<(Vec<Value>, Vec<Value>), PartitionError> {
    let outs = joint.outputs();
    if num_fwd_outputs > outs.len() {
        return Err(PartitionError::BadJoint(format!(
            "--num-fwd-outputs {num_fwd_outputs}, but the joint graph returns {} values",
            outs.len()
        )));
    }
    Ok((
        outs[..num_fwd_outputs].to_vec(),
        outs[num_fwd_outputs..].to_vec(),
    ))
}

/// Total bytes of the saved values, by their metas; symbolic sizes at `hints` (a saved
/// size counts 0 bytes).
pub fn saved_bytes(
    joint: &Graph,
    saved: &[NodeId],
    hints: &Bindings,
) -> Result<u64, PartitionError> {
    saved
        .iter()
        .map(|&id| {
            let node = joint.node(id);
            match &node.meta {
                Meta::Tensor(t) => Ok(t.nbytes()),
                Meta::Sym(_) => Ok(0),
                Meta::SymTensor(_) => at_hints(node, hints).map(|m| m.nbytes()),
                _ => Err(PartitionError::MissingMeta(node.name.to_string())),
            }
        })
        .sum()
}

/// The static meta of `node`, whose sizes are symbolic, at `hints`; a symbol without a
/// hint is an error naming it.
pub(crate) fn at_hints(node: &Node, hints: &Bindings) -> Result<TensorMeta, PartitionError> {
    let Meta::SymTensor(t) = &node.meta else {
        return Err(PartitionError::MissingMeta(node.name.to_string()));
    };
    t.bind(hints).map_err(|_| {
        let missing = node
            .meta
            .symbols()
            .find(|s| !hints.contains_key(*s))
            .unwrap_or_default();
        PartitionError::NoHint(node.name.to_string(), t.to_string(), missing.to_string())
    })
}

/// The saved bytes as an expression of the size symbols (`4*s52 + 4*(2*s97) + 96`), when
/// any saved tensor has symbolic sizes.
pub fn saved_bytes_expr(joint: &Graph, saved: &[NodeId]) -> Option<String> {
    // Equal terms (a layer's saved values) are counted, not repeated.
    let mut terms: Vec<(String, u64)> = Vec::new();
    let mut constant = 0u64;
    for &id in saved {
        match &joint.node(id).meta {
            Meta::Tensor(t) => constant += t.nbytes(),
            Meta::SymTensor(t) => {
                let mut term = t.dtype.itemsize().to_string();
                for size in &t.sizes {
                    match size.as_int() {
                        Some(1) => {}
                        Some(k) => term.push_str(&format!("*{k}")),
                        None if size.as_symbol().is_some() => term.push_str(&format!("*{size}")),
                        None => term.push_str(&format!("*({size})")),
                    }
                }
                match terms.iter_mut().find(|(t, _)| *t == term) {
                    Some((_, count)) => *count += 1,
                    None => terms.push((term, 1)),
                }
            }
            _ => {}
        }
    }
    if terms.is_empty() {
        return None;
    }
    let mut out: Vec<String> = terms
        .into_iter()
        .map(|(t, k)| if k == 1 { t } else { format!("{k}*{t}") })
        .collect();
    if constant > 0 {
        out.push(constant.to_string());
    }
    Some(out.join(" + "))
}

/// The calls of `backward` that `forward` computes too (by node name): the forward ops
/// the backward recomputes, in backward order.
pub fn recomputed_nodes(forward: &Graph, backward: &Graph) -> Vec<NodeId> {
    let in_forward: FxHashSet<&str> = forward
        .nodes
        .iter()
        .filter(|n| n.op().is_some())
        .map(|n| n.name.as_str())
        .collect();
    backward
        .ids()
        .filter(|&id| {
            let node = backward.node(id);
            node.op().is_some() && in_forward.contains(node.name.as_str())
        })
        .collect()
}

/// Extracts the forward and backward graphs for a given set of saved values.
pub fn extract_fwd_bwd(
    joint: &Graph,
    num_fwd_outputs: usize,
    saved: &[NodeId],
) -> Result<(Graph, Graph), PartitionError> {
    let (primals, tangents) = joint_inputs(joint)?;
    let (fwd_outputs, bwd_outputs) = split_outputs(joint, num_fwd_outputs)?;
    // The backward takes the saved sizes first, then the saved tensors (functorch's
    // order: symints are stashed on the autograd context, apart from the tensors).
    let is_size = |id: &&NodeId| matches!(joint.node(**id).meta, Meta::Sym(_));
    let mut bw_inputs: Vec<NodeId> = saved.iter().filter(is_size).copied().collect();
    bw_inputs.extend(saved.iter().filter(|id| !is_size(id)));
    bw_inputs.extend(&tangents);
    let backward = extract_subgraph(joint, &bw_inputs, &bwd_outputs, &backward_side_effects)?;
    let mut fw_out = fwd_outputs;
    fw_out.extend(saved.iter().map(|&s| Value::Node(s)));
    let forward = extract_subgraph(joint, &primals, &fw_out, &default_side_effects)?;
    Ok((forward, backward))
}

/// functorch's `default_partition`: the forward graph computes the forward outputs; each
/// forward value the backward reads is saved (multi-output nodes through their getitems).
///
/// A dynamic-shape joint is partitioned as functorch partitions it: saved sizes are
/// returned after the saved tensors, a tensor whose sizes are all the backward reads is
/// not saved (the sizes are), and every symbol the backward's inputs mention is bound by a
/// saved input size. Its saved bytes need the symbols' values: see
/// [`default_partition_with`].
pub fn default_partition(
    joint: &Graph,
    num_fwd_outputs: usize,
) -> Result<Partition, PartitionError> {
    default_partition_with(joint, num_fwd_outputs, &|_| false, &Bindings::new())
}

/// `default_partition` with a selective activation-checkpointing policy: forward nodes for
/// which `recompute` is true are not saved; the backward recomputes them from what is saved
/// (as PyTorch does for nodes tagged `MUST_RECOMPUTE`). `hints` gives the size symbols'
/// values of a dynamic-shape joint, for its saved bytes.
pub fn default_partition_with(
    joint: &Graph,
    num_fwd_outputs: usize,
    recompute: &dyn Fn(&graphbug_ir::Node) -> bool,
    hints: &Bindings,
) -> Result<Partition, PartitionError> {
    let (primals, tangents) = joint_inputs(joint)?;
    let (fwd_outputs, bwd_outputs) = split_outputs(joint, num_fwd_outputs)?;
    // The forward region, as PyTorch 2.13 takes it: every node before the last one the
    // forward outputs need, in the joint's (trace) order, that does not read a tangent.
    let forward_only = extract_subgraph(joint, &primals, &fwd_outputs, &default_side_effects)?;
    let needed: FxHashSet<&str> = forward_only.nodes.iter().map(|n| n.name.as_str()).collect();
    let mut last_forward = joint
        .ids()
        .filter(|&i| needed.contains(joint.node(i).name.as_str()))
        .max()
        .unwrap_or(NodeId(0));
    let mut reads_tangent = vec![false; joint.nodes.len()];
    for &t in &tangents {
        reads_tangent[t.index()] = true;
    }
    for id in joint.ids() {
        let mut r = reads_tangent[id.index()];
        joint
            .node(id)
            .for_each_input(|src| r |= reads_tangent[src.index()]);
        reads_tangent[id.index()] = r;
    }
    // The forward's tail that the forward outputs do not need is still forward, as the
    // trace's tags would say: the getitems of a forward op's other outputs (a norm's mean
    // and rstd, topk's indices) and the `detach` autograd leaves where it saves a result.
    // The backward begins at the first node that is neither, such as the `detach` of a
    // `detach` that unpacks a saved result.
    let is_detach = |id: NodeId| {
        joint
            .node(id)
            .op()
            .is_some_and(|op| op.namespace == "aten" && op.name == "detach")
    };
    for id in joint.ids().skip(last_forward.index() + 1) {
        let node = joint.node(id);
        let tail = !reads_tangent[id.index()]
            && match &node.kind {
                NodeKind::GetItem { source, .. } => *source <= last_forward,
                NodeKind::Call { args, .. } if is_detach(id) => matches!(
                    args.first(),
                    Some(Value::Node(src)) if *src <= last_forward && !is_detach(*src)
                ),
                _ => false,
            };
        if !tail {
            break;
        }
        last_forward = id;
    }
    let users = joint.users();
    // Every forward tensor is a candidate; multi-output nodes are saved through their
    // getitems, which are forward nodes of their own.
    let mut candidates: Vec<NodeId> = Vec::new();
    for id in joint.ids() {
        if id > last_forward || reads_tangent[id.index()] {
            continue;
        }
        let node = joint.node(id);
        let multi = matches!(node.meta, Meta::Multi(_))
            || users.nodes[id.index()]
                .iter()
                .any(|u| matches!(joint.node(*u).kind, NodeKind::GetItem { .. }));
        let recomputed = recompute(node) && !node.is_placeholder();
        if multi || recomputed {
            continue;
        }
        // A tensor whose sizes are all the backward reads: those sizes are saved instead.
        let bw_users: Vec<NodeId> = users.nodes[id.index()]
            .iter()
            .copied()
            .filter(|&u| u > last_forward || reads_tangent[u.index()])
            .collect();
        let sizes_only = !matches!(node.meta, Meta::Sym(_))
            && !bw_users.is_empty()
            && bw_users
                .iter()
                .all(|&u| matches!(joint.node(u).meta, Meta::Sym(_)));
        if sizes_only {
            candidates.extend(bw_users);
        } else {
            candidates.push(id);
        }
    }
    let mut seen = FxHashSet::default();
    candidates.retain(|c| seen.insert(*c));
    // Keep only the candidates the backward actually reads.
    let mut bw_inputs = candidates.clone();
    bw_inputs.extend(&tangents);
    let probe = extract_subgraph(joint, &bw_inputs, &bwd_outputs, &backward_side_effects)?;
    let probe_users = probe.users();
    let used: FxHashSet<&str> = probe
        .placeholders()
        .into_iter()
        .filter(|&p| !probe_users.is_unused(p))
        .map(|p| probe.node(p).name.as_str())
        .collect();
    let saved: Vec<NodeId> = candidates
        .into_iter()
        .filter(|&c| used.contains(joint.node(c).name.as_str()))
        .collect();
    let saved = order_saved_sizes(joint, saved, &tangents);
    let (forward, backward) = extract_fwd_bwd(joint, num_fwd_outputs, &saved)?;
    let report = PartitionReport::new(joint, &saved, &forward, &backward, hints)?;
    Ok(Partition {
        forward,
        backward,
        report,
    })
}

/// Of a dynamic-shape joint, `saved` in functorch's order: the tensors, then the sizes:
/// first those that bind a symbol (an input size that is a bare symbol), then the ones
/// computed from symbols. Every symbol that a computed size, a saved tensor or a tangent
/// mentions gets an input binding it (the first in the joint, by symbol name), so the
/// backward binds each of its symbols from its inputs. A static joint is left alone.
pub(crate) fn order_saved_sizes(
    joint: &Graph,
    saved: Vec<NodeId>,
    tangents: &[NodeId],
) -> Vec<NodeId> {
    let is_size = |id: NodeId| matches!(joint.node(id).meta, Meta::Sym(_));
    if !saved
        .iter()
        .any(|&id| is_size(id) || joint.node(id).meta.is_symbolic())
    {
        return saved;
    }
    // The symbol an input size binds (a `Sym` input that is a bare symbol).
    let binds = |id: NodeId| -> Option<&str> {
        let node = joint.node(id);
        match &node.meta {
            Meta::Sym(e) if node.is_placeholder() => e.as_symbol(),
            _ => None,
        }
    };
    // The input that binds each symbol, first occurrence first.
    let mut binding: BTreeMap<&str, NodeId> = BTreeMap::new();
    for id in joint.placeholders() {
        if let Some(s) = binds(id) {
            binding.entry(s).or_insert(id);
        }
    }
    let (sizes, tensors): (Vec<NodeId>, Vec<NodeId>) =
        saved.into_iter().partition(|&id| is_size(id));
    let mut bound: FxHashSet<&str> = FxHashSet::default();
    let mut binders = Vec::new();
    let mut derived = Vec::new();
    for id in sizes {
        match binds(id) {
            Some(s) => {
                bound.insert(s);
                binders.push(id);
            }
            None => derived.push(id),
        }
    }
    for &id in derived.iter().chain(&tensors).chain(tangents) {
        let mut new: Vec<&str> = joint
            .node(id)
            .meta
            .symbols()
            .filter(|s| !bound.contains(s))
            .collect();
        new.sort_unstable();
        new.dedup();
        for s in new {
            if let Some(&b) = binding.get(s) {
                if !binders.contains(&b) {
                    binders.push(b);
                }
            }
            bound.insert(s);
        }
    }
    let mut out = tensors;
    out.extend(binders);
    out.extend(derived);
    out
}
