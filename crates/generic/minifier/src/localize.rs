//! Where a wrong result starts: a candidate widened so that every value it computes is an
//! output, and the culprits found from which of those values diverge. Every family's
//! accuracy checker localizes this way (aten graphs against eager, XLA programs against
//! the reference plugin), so a wrong result's identity means the same for all.

use graphbug_ir::{Graph, Meta, NodeId, NodeKind, Value};

/// `graph` returning, after its own outputs, every single-tensor call node (getitems
/// included, multi-output nodes not); and the node index of each extra output.
pub fn widen(graph: &Graph) -> (Graph, Vec<usize>) {
    let users = graph.users();
    let extras: Vec<usize> = (0..graph.nodes.len())
        .filter(|&i| {
            let n = &graph.nodes[i];
            n.is_call_function()
                && !matches!(n.meta, Meta::Multi(_))
                && !users.nodes[i]
                    .iter()
                    .any(|u| matches!(graph.nodes[u.index()].kind, NodeKind::GetItem { .. }))
        })
        .collect();
    let mut wide = graph.clone();
    let mut outputs = graph.outputs().to_vec();
    outputs.extend(extras.iter().map(|&i| Value::Node(NodeId(i as u32))));
    wide.output = Some(outputs);
    (wide, extras)
}

/// The culprits of a wrong result in `g`, given which nodes' values diverge (by node
/// index): the diverging nodes whose divergence reaches an output of `g` through diverging
/// nodes only, and that no such node feeds. A multi-output node diverges when one of its
/// items does. A fault masked downstream reaches nothing and is not a culprit.
pub fn culprits(g: &Graph, mut diverging: Vec<bool>) -> Vec<String> {
    for (i, node) in g.nodes.iter().enumerate() {
        if let NodeKind::GetItem { source, .. } = node.kind {
            if diverging[i] {
                diverging[source.index()] = true;
            }
        }
    }
    let mut is_output = vec![false; g.nodes.len()];
    for v in g.outputs() {
        v.for_each_node(&mut |id| is_output[id.index()] = true);
    }
    let users = g.users();
    let mut reach = vec![false; g.nodes.len()];
    for i in (0..g.nodes.len()).rev() {
        reach[i] =
            diverging[i] && (is_output[i] || users.nodes[i].iter().any(|u| reach[u.index()]));
    }
    (0..g.nodes.len())
        .filter(|&i| {
            let mut fed = false;
            g.nodes[i].for_each_input(|src| fed |= reach[src.index()]);
            reach[i] && !fed
        })
        .map(|i| g.nodes[i].name.to_string())
        .collect()
}
