//! Graph passes that need no libtorch: dead-code elimination, CSE and subgraph extraction.
//!
//! Passes take a `side_effects` predicate: ops for which it returns true are never
//! dropped as dead nor merged. [`default_side_effects`] decides by naming convention;
//! crates with libtorch schemas at hand pass a schema-based one.

use std::borrow::Cow;
use std::hash::{Hash, Hasher};

use rustc_hash::FxHasher;

use crate::error::IrError;
use crate::graph::{Graph, Node, NodeId, NodeKind};
use crate::types::{Meta, OpName};
use crate::value::Value;

/// The naming-convention side-effect test: in-place (`add_`, `out=`) and random ops.
pub fn default_side_effects(op: &OpName) -> bool {
    op.has_side_effects_by_name()
}

/// Side effects a backward graph must keep when it is cut out of a joint graph: in-place
/// ops only. A random op runs once, in the forward; the backward never draws it again.
pub fn backward_side_effects(op: &OpName) -> bool {
    op.is_inplace_by_name()
}

/// Removes nodes whose values nothing reads, transitively. Placeholders stay, and so do
/// calls for which `side_effects` is true.
pub fn eliminate_dead_code(graph: &Graph, side_effects: &dyn Fn(&OpName) -> bool) -> Graph {
    without_dead_code(graph, side_effects).into_owned()
}

/// [`eliminate_dead_code`] that borrows `graph` back when nothing in it is dead (no copy).
pub fn without_dead_code<'g>(
    graph: &'g Graph,
    side_effects: &dyn Fn(&OpName) -> bool,
) -> Cow<'g, Graph> {
    let mut live = vec![false; graph.nodes.len()];
    for v in graph.outputs() {
        v.for_each_node(&mut |id| {
            if let Some(l) = live.get_mut(id.index()) {
                *l = true
            }
        });
    }
    for id in graph.ids().rev() {
        let node = graph.node(id);
        let keep = live[id.index()] || node.is_placeholder() || node.op().is_some_and(side_effects);
        if keep {
            live[id.index()] = true;
            node.for_each_input(|src| {
                if let Some(l) = live.get_mut(src.index()) {
                    *l = true
                }
            });
        }
    }
    if live.iter().all(|&l| l) {
        return Cow::Borrowed(graph);
    }
    Cow::Owned(
        graph
            .retain(&live)
            .expect("every input of a live node is marked live before it is reached"),
    )
}

/// Merges nodes that compute the same thing from the same inputs (common subexpression
/// elimination). Placeholders and ops with side effects are never merged.
pub fn eliminate_common_subexpressions(
    graph: &Graph,
    side_effects: &dyn Fn(&OpName) -> bool,
) -> Graph {
    let mut new_id: Vec<NodeId> = Vec::with_capacity(graph.nodes.len());
    let mut nodes: Vec<Node> = Vec::with_capacity(graph.nodes.len());
    // Returned values are separate tensors in eager mode: as functorch's `fx_graph_cse`,
    // they are neither merged nor merged into.
    let mut returned = vec![false; graph.nodes.len()];
    for v in graph.outputs() {
        v.for_each_node(&mut |id| {
            if let Some(r) = returned.get_mut(id.index()) {
                *r = true;
            }
        });
    }
    // Kept mergeable nodes by the hash of their kind (`hashes[k]` for kept node `k`; kinds
    // are compared in full): ids only, a small table for a big graph.
    let mut seen: hashbrown::HashTable<u32> =
        hashbrown::HashTable::with_capacity(graph.nodes.len());
    let mut hashes: Vec<u64> = Vec::with_capacity(graph.nodes.len());
    for (i, node) in graph.nodes.iter().enumerate() {
        let kind = node
            .try_remap_kind::<()>(&mut |src| Ok(new_id[src.index()]))
            .expect("CSE remaps only earlier nodes, which are all mapped");
        let mergeable = !returned[i]
            && match &kind {
                NodeKind::Placeholder => false,
                NodeKind::Call { op, .. } => !side_effects(op),
                NodeKind::GetItem { .. } | NodeKind::GetAttr { .. } => true,
            };
        let id = NodeId(nodes.len() as u32);
        let hash = if mergeable {
            let mut hasher = FxHasher::default();
            kind.hash(&mut hasher);
            let hash = hasher.finish();
            let same = |&k: &u32| hashes[k as usize] == hash && nodes[k as usize].kind == kind;
            match seen.entry(hash, same, |&k| hashes[k as usize]) {
                hashbrown::hash_table::Entry::Occupied(existing) => {
                    new_id.push(NodeId(*existing.get()));
                    continue;
                }
                hashbrown::hash_table::Entry::Vacant(slot) => {
                    slot.insert(id.0);
                }
            }
            hash
        } else {
            0
        };
        hashes.push(hash);
        nodes.push(Node {
            name: node.name.clone(),
            kind,
            meta: node.meta.clone(),
        });
        new_id.push(id);
    }
    let output = graph.output.as_ref().map(|vals| {
        vals.iter()
            .map(|v| v.map_nodes(&mut |src| Value::Node(new_id[src.index()])))
            .collect()
    });
    Graph {
        dialect: graph.dialect,
        param_names: graph.param_names.clone(),
        name: graph.name.clone(),
        nodes,
        output,
    }
}

/// The subgraph that computes `outputs` from `inputs`, as functorch's
/// `_extract_graph_with_inputs_outputs` builds it: each input becomes a placeholder (same
/// name and meta, in the given order), nodes computable from the inputs are copied in
/// program order, and dead code is removed. Fails, naming the culprit, when an output needs
/// a placeholder that is not among the inputs.
pub fn extract_subgraph(
    graph: &Graph,
    inputs: &[NodeId],
    outputs: &[Value],
    side_effects: &dyn Fn(&OpName) -> bool,
) -> Result<Graph, IrError> {
    let n = graph.nodes.len();
    let check = |id: NodeId, what: &str| {
        if id.index() >= n {
            Err(IrError::Extract(format!(
                "{what} refers to unknown node #{}",
                id.0
            )))
        } else {
            Ok(())
        }
    };
    // For each node: None if computable from the inputs, else the placeholder it lacks.
    let mut missing: Vec<Option<NodeId>> = vec![None; n];
    let mut is_input = vec![false; n];
    for &i in inputs {
        check(i, "an input")?;
        if std::mem::replace(&mut is_input[i.index()], true) {
            return Err(IrError::Extract(format!(
                "input `{}` is given twice",
                graph.node(i).name
            )));
        }
        if let Meta::Multi(_) = graph.node(i).meta {
            return Err(IrError::Extract(format!(
                "input `{}` is a multi-output node; pass its getitems instead",
                graph.node(i).name
            )));
        }
    }
    for id in graph.ids() {
        if is_input[id.index()] {
            continue;
        }
        let node = graph.node(id);
        if node.is_placeholder() {
            missing[id.index()] = Some(id);
            continue;
        }
        let mut lack = None;
        node.for_each_input(|src| {
            if lack.is_none() {
                lack = missing.get(src.index()).copied().flatten();
            }
        });
        missing[id.index()] = lack;
    }
    for v in outputs {
        let mut err = Ok(());
        v.for_each_node(&mut |id| {
            if err.is_ok() {
                err = check(id, "an output").and_then(|_| match missing[id.index()] {
                    Some(p) => Err(IrError::Extract(format!(
                        "output `{}` needs `{}`, which is not among the inputs",
                        graph.node(id).name,
                        graph.node(p).name
                    ))),
                    None => Ok(()),
                });
            }
        });
        err?;
    }
    // Dead-code elimination before copying: the computable nodes the outputs need, and
    // computable calls with side effects (with what they read).
    let mut live = vec![false; n];
    for v in outputs {
        v.for_each_node(&mut |id| live[id.index()] = true);
    }
    for id in graph.ids().rev() {
        let i = id.index();
        if is_input[i] || missing[i].is_some() {
            continue;
        }
        let node = graph.node(id);
        if live[i] || node.op().is_some_and(side_effects) {
            live[i] = true;
            node.for_each_input(|src| live[src.index()] = true);
        }
    }
    // Placeholders in the order given, then the live computable nodes in program order.
    let mut order: Vec<NodeId> = inputs.to_vec();
    order.extend(
        graph
            .ids()
            .filter(|i| !is_input[i.index()] && missing[i.index()].is_none() && live[i.index()]),
    );
    let mut new_id: Vec<Option<NodeId>> = vec![None; n];
    for (pos, id) in order.iter().enumerate() {
        new_id[id.index()] = Some(NodeId(pos as u32));
    }
    let remap = |src: NodeId| -> Result<NodeId, ()> { new_id[src.index()].ok_or(()) };
    let mut nodes = Vec::with_capacity(order.len());
    for &id in &order {
        let node = graph.node(id);
        let kind = if is_input[id.index()] {
            NodeKind::Placeholder
        } else {
            node.try_remap_kind(&mut |s| remap(s))
                .expect("computable nodes read only inputs and computable nodes")
        };
        nodes.push(Node {
            name: node.name.clone(),
            kind,
            meta: node.meta.clone(),
        });
    }
    let output = outputs
        .iter()
        .map(|v| {
            v.try_remap(&mut |s| remap(s))
                .expect("outputs were checked to be computable")
        })
        .collect();
    let extracted = Graph {
        dialect: graph.dialect,
        param_names: graph.param_names.clone(),
        name: graph.name.clone(),
        nodes,
        output: Some(output),
    };
    extracted.verify()?;
    Ok(extracted)
}
