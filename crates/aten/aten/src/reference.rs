//! Reference runs: the same graph in float64, as TorchDynamo's accuracy checks build it.

use std::collections::HashMap;

use graphbug_ir::{Device, Dtype, Graph, Meta, NodeKind, Value};
use tch::{Kind, Tensor};

use crate::error::Result;
use crate::interp::Interpreter;

/// `graph` with float inputs and constants declared float64, floating dtype arguments
/// (`dtype = torch.float32`, `convert_element_type(x, torch.float16)`) made float64 as
/// TorchDynamo's `cast_dtype_args_to_fp64` does, and other metas dropped.
pub fn fp64_graph(graph: &Graph) -> Graph {
    let mut g = graph.clone();
    let widen = |v: &Value| -> Value {
        match v {
            Value::Dtype(d) if d.is_floating_point() => Value::Dtype(Dtype::Float64),
            other => other.clone(),
        }
    };
    for node in &mut g.nodes {
        if let NodeKind::Call { op, args, kwargs } = &mut node.kind {
            // A dtype view reinterprets bytes: its dtype is not a precision.
            if !(op.name == "view" && op.overload == "dtype") {
                for a in args.iter_mut() {
                    *a = widen(a);
                }
                for (_, v) in kwargs.iter_mut() {
                    *v = widen(v);
                }
            }
        }
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

/// A run's outputs and one gradient per input.
pub type OutputsAndGradients = (Vec<Option<Tensor>>, Vec<Option<Tensor>>);

/// Autograd leaves for `inputs`: detached copies, requiring grad where `requires_grad`
/// says (inputs past its end do not).
pub fn autograd_leaves(inputs: &[Tensor], requires_grad: &[bool]) -> Vec<Tensor> {
    inputs
        .iter()
        .zip(requires_grad.iter().chain(std::iter::repeat(&false)))
        .map(|(t, &rg)| {
            let c = t.detach().copy();
            if rg {
                c.set_requires_grad(true)
            } else {
                c
            }
        })
        .collect()
}

/// Gradients by libtorch's own autograd: runs `graph` recording autograd on copies of
/// `inputs` (those with `requires_grad` set track gradients), then back-propagates
/// `grad_outputs` (one per output; `None` skips an output). Returns the forward outputs
/// and one gradient per input (`None` where it has none).
pub fn autograd_gradients(
    graph: &Graph,
    inputs: &[Tensor],
    requires_grad: &[bool],
    grad_outputs: &[Option<Tensor>],
    device: &Device,
) -> Result<OutputsAndGradients> {
    let leaves = autograd_leaves(inputs, requires_grad);
    let outputs = Interpreter::new(graph, device, &HashMap::new())?
        .with_autograd(true)
        .run(&leaves)?;
    let mut outs = Vec::new();
    let mut grads = Vec::new();
    for (o, g) in outputs.iter().zip(grad_outputs) {
        if let (Some(o), Some(g)) = (o, g) {
            if o.requires_grad() {
                outs.push(o.shallow_clone());
                grads.push(g.shallow_clone());
            }
        }
    }
    let wanted: Vec<&Tensor> = leaves
        .iter()
        .zip(requires_grad)
        .filter(|(_, &rg)| rg)
        .map(|(t, _)| t)
        .collect();
    let computed = if outs.is_empty() || wanted.is_empty() {
        Vec::new()
    } else {
        // The vector-Jacobian product for all outputs: back-propagate sum(output * grad).
        let mut loss: Option<Tensor> = None;
        for (o, g) in outs.iter().zip(&grads) {
            let term = (o * g).sum(o.kind());
            loss = Some(match loss {
                Some(l) => l + term,
                None => term,
            });
        }
        let loss = loss.expect("at least one output");
        Tensor::f_run_backward(&[loss], &wanted, false, false)?
    };
    let mut computed = computed.into_iter();
    let input_grads = requires_grad
        .iter()
        .map(|&rg| {
            if !rg {
                return None;
            }
            computed.next().filter(Tensor::defined)
        })
        .collect();
    Ok((
        outputs.into_iter().map(|o| o.map(|t| t.detach())).collect(),
        input_grads,
    ))
}
