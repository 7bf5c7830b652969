//! functorch's `reordering_to_mimic_autograd_engine`: a backward graph extracted from a
//! joint graph lists every recomputed forward node before the first backward node, so the
//! recomputed values would all be alive at once. Reordering walks the backward nodes in
//! order and pulls in, just before each one, the not-yet-computed nodes it needs (depth
//! first, emitted in their original order), as the autograd engine computes them.

use graphbug_ir::{Graph, NodeId};

use crate::default::PartitionError;

/// The backward graph with each recomputed node moved down to just before its first use.
///
/// Placeholders stay first; the walk starts at the first reader of a tangent
/// (`tangents_N`). A graph without one is returned as it is.
pub fn reorder_like_autograd(bw: Graph) -> Result<Graph, PartitionError> {
    let n = bw.nodes.len();
    let mut reads_tangent = vec![false; n];
    let mut first = None;
    for id in bw.ids() {
        let node = bw.node(id);
        if node.is_placeholder() {
            reads_tangent[id.index()] = node.name.starts_with("tangents");
            continue;
        }
        let mut r = false;
        node.for_each_input(|s| {
            r |= s.index() < n && reads_tangent[s.index()] && bw.node(s).is_placeholder()
        });
        if r {
            first = Some(id);
            break;
        }
    }
    let Some(first) = first else {
        return Ok(bw);
    };
    let mut emitted = vec![false; n];
    let mut order: Vec<NodeId> = Vec::with_capacity(n);
    for id in bw.ids().filter(|&i| bw.node(i).is_placeholder()) {
        emitted[id.index()] = true;
        order.push(id);
    }
    let mut stack: Vec<NodeId> = Vec::new();
    let mut batch: Vec<NodeId> = Vec::new();
    let mut pull = |id: NodeId, order: &mut Vec<NodeId>, emitted: &mut Vec<bool>| {
        if id.index() >= n || emitted[id.index()] {
            return;
        }
        // Collect the node and its not-yet-emitted ancestors, then emit them in order.
        stack.push(id);
        emitted[id.index()] = true;
        while let Some(cur) = stack.pop() {
            batch.push(cur);
            bw.node(cur).for_each_input(|s| {
                if s.index() < n && !emitted[s.index()] {
                    emitted[s.index()] = true;
                    stack.push(s);
                }
            });
        }
        batch.sort_unstable();
        order.append(&mut batch);
    };
    for id in bw.ids().skip(first.index()) {
        pull(id, &mut order, &mut emitted);
    }
    for v in bw.outputs() {
        v.for_each_node(&mut |id| pull(id, &mut order, &mut emitted));
    }
    for id in bw.ids() {
        pull(id, &mut order, &mut emitted);
    }
    let out = bw.into_reordered(&order)?;
    out.verify()?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use graphbug_ir::parse_graph;

    #[test]
    fn recomputed_nodes_move_next_to_their_use() {
        let bw = parse_graph(
            r#"
class Bw(torch.nn.Module):
    def forward(self, primals_1: "f32[4]", tangents_1: "f32[4]"):
        relu: "f32[4]" = torch.ops.aten.relu.default(primals_1)
        exp: "f32[4]" = torch.ops.aten.exp.default(primals_1)
        mul: "f32[4]" = torch.ops.aten.mul.Tensor(tangents_1, 2)
        mul_1: "f32[4]" = torch.ops.aten.mul.Tensor(mul, relu)
        mul_2: "f32[4]" = torch.ops.aten.mul.Tensor(mul_1, exp)
        return (mul_2,)
"#,
        )
        .unwrap();
        let r = reorder_like_autograd(bw.clone()).unwrap();
        let names: Vec<&str> = r.nodes.iter().map(|n| n.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "primals_1",
                "tangents_1",
                "mul",
                "relu",
                "mul_1",
                "exp",
                "mul_2"
            ]
        );
    }
}
