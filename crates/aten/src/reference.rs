//! Reference runs: the same graph in float64, as TorchDynamo's accuracy checks build it.

use std::collections::HashMap;

use graphbug_ir::{Device, Dtype, Graph, Meta, NodeKind};
use tch::{Kind, Tensor};

use crate::error::Result;
use crate::interp::Interpreter;

/// `graph` with float inputs and constants declared float64 and other metas dropped.
pub fn fp64_graph(graph: &Graph) -> Graph {
    let mut g = graph.clone();
    for node in &mut g.nodes {
        match (&node.kind, &mut node.meta) {
            (NodeKind::Placeholder | NodeKind::GetAttr { .. }, Meta::Tensor(t)) => {
                if t.dtype.is_floating_point() {
                    t.dtype = Dtype::Float64;
                }
            }
            (NodeKind::Placeholder | NodeKind::GetAttr { .. }, _) => {}
            (_, meta) => *meta = Meta::Unknown,
        }
    }
    g
}

/// A new tensor: float64 for a floating tensor, else the same dtype (always a copy, so an
/// in-place op in the reference run never reaches the original).
pub fn fp64_copy(t: &Tensor) -> Tensor {
    if t.is_floating_point() && t.kind() != Kind::Double {
        t.to_kind(Kind::Double)
    } else {
        t.copy()
    }
}

/// Runs `graph` eagerly with floating inputs and constants cast to float64 (copies, so the
/// caller's tensors are never mutated).
pub fn fp64_reference(
    graph: &Graph,
    inputs: &[Tensor],
    device: &Device,
    constants: &HashMap<String, Tensor>,
) -> Result<Vec<Option<Tensor>>> {
    let g = fp64_graph(graph);
    let consts: HashMap<String, Tensor> = constants
        .iter()
        .map(|(k, t)| (k.clone(), fp64_copy(t)))
        .collect();
    let inputs: Vec<Tensor> = inputs.iter().map(fp64_copy).collect();
    Interpreter::new(&g, device, &consts)?.run(&inputs)
}
