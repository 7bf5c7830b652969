//! Shape inference on the meta device: run every op without data and read off the metas.

use std::collections::HashMap;
use std::fmt;

use graphbug_ir::{Device, Graph, GraphBuilder, Meta, NodeKind, OpName, TensorMeta, Value};
use tch::Tensor;

use crate::error::{AtenError, Result};
use crate::interp::Interpreter;

/// The meta device.
pub fn meta_device() -> Device {
    Device {
        kind: "meta".into(),
        index: None,
    }
}

/// An uninitialised tensor with `meta`'s shape and dtype on `device` (meta included).
pub fn empty(meta: &TensorMeta, device: &Device) -> Result<Tensor> {
    let mut b = GraphBuilder::new("Empty");
    let t = b.call_kw(
        OpName::aten("empty", "memory_format"),
        [Value::from(meta.shape.clone())],
        [
            ("dtype", Value::Dtype(meta.dtype)),
            ("device", Value::Device(device.clone())),
        ],
    );
    b.output([t.into()]);
    let graph = b.finish()?;
    let out = Interpreter::new(&graph, device, &HashMap::new())?.run(&[])?;
    out.into_iter()
        .next()
        .flatten()
        .ok_or_else(|| AtenError::BadInputs("aten::empty returned nothing".into()))
}

/// A copy of `graph` whose every node carries the meta libtorch infers for it.
///
/// Placeholders and constants must be annotated: their annotations are the inputs.
pub fn infer_meta(graph: &Graph) -> Result<Graph> {
    let device = meta_device();
    let mut inputs = Vec::new();
    let mut constants = HashMap::new();
    for node in &graph.nodes {
        if !matches!(node.kind, NodeKind::Placeholder | NodeKind::GetAttr { .. }) {
            continue;
        }
        let Meta::Tensor(m) = &node.meta else {
            return Err(AtenError::BadInputs(format!(
                "`{}` has no shape annotation; meta inference needs one for every input and constant",
                node.name
            )));
        };
        let t = empty(m, &device)?;
        match &node.kind {
            NodeKind::GetAttr { target } => {
                constants.insert(target.clone(), t);
            }
            _ => inputs.push(t),
        }
    }
    let interp = Interpreter::new(graph, &device, &constants)?;
    let mut metas: Vec<Meta> = vec![Meta::Unknown; graph.nodes.len()];
    interp.run_observed(&inputs, &mut |i, v| {
        metas[i] = v.meta();
        Ok(())
    })?;
    let mut out = graph.clone();
    for (node, meta) in out.nodes.iter_mut().zip(metas) {
        node.meta = meta;
    }
    Ok(out)
}

/// An annotation that disagrees with what libtorch infers.
#[derive(Clone, Debug, PartialEq)]
pub struct MetaMismatch {
    /// The node.
    pub node: String,
    /// What the graph text says.
    pub annotated: TensorMeta,
    /// What libtorch infers (Unknown where it infers no tensor).
    pub inferred: Meta,
}

impl fmt::Display for MetaMismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let inferred = match &self.inferred {
            Meta::Tensor(t) => t.to_string(),
            Meta::Multi(_) => "several outputs".into(),
            Meta::Unknown => "no tensor".into(),
        };
        write!(
            f,
            "node `{}`: annotated {}, libtorch infers {inferred}",
            self.node, self.annotated
        )
    }
}

/// Every single-tensor annotation in `graph` that meta inference contradicts, in graph order.
pub fn check_meta(graph: &Graph) -> Result<Vec<MetaMismatch>> {
    let inferred = infer_meta(graph)?;
    Ok(graph
        .nodes
        .iter()
        .zip(&inferred.nodes)
        .filter_map(|(given, got)| match &given.meta {
            Meta::Tensor(annotated) if got.meta.tensor() != Some(annotated) => Some(MetaMismatch {
                node: given.name.clone(),
                annotated: annotated.clone(),
                inferred: got.meta.clone(),
            }),
            _ => None,
        })
        .collect())
}
