//! Shape inference on the meta device: run every op without data and read off the metas.

use std::collections::HashMap;
use std::fmt;

use graphbug_ir::{Device, Graph, GraphBuilder, Meta, NodeKind, OpName, TensorMeta, Value};
use tch::Tensor;

use crate::error::{AtenError, Result};
use crate::interp::{Interpreter, RtValue, RunHook};

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
        [Value::from(meta.shape.to_vec())],
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
    Ok(infer(graph, false)?.graph)
}

/// What [`infer_meta_assuming`] inferred, and where it took the graph's word instead.
pub struct Inferred {
    /// The graph with inferred metas.
    pub graph: Graph,
    /// Nodes whose annotation stood in for inference, and why.
    pub assumed: Vec<(String, String)>,
    /// Views the meta device made as copies (see [`doubtful_view`]), and why that matters.
    pub doubtful_views: Vec<(String, String)>,
}

/// [`infer_meta`], except that a node libtorch cannot infer without more memory than the
/// machine has (an op with no meta kernel on huge inputs) keeps its annotation, and is
/// listed as assumed instead of ending the inference.
pub fn infer_meta_assuming(graph: &Graph) -> Result<Inferred> {
    infer(graph, true)
}

struct Recorder<'g> {
    graph: &'g Graph,
    metas: Vec<Meta>,
    assume: bool,
    assumed: Vec<(String, String)>,
    /// Which results the schemas declare aliases of which inputs.
    declared: graphbug_partition::Shares,
    /// Each node's results' storages (0: none).
    storages: Vec<Vec<usize>>,
    doubtful_views: Vec<(String, String)>,
}

/// The storages of a value's tensors, one per result (0 for a result that is no tensor).
pub(crate) fn storages_of(value: &RtValue) -> Vec<usize> {
    match value {
        RtValue::Tuple(vs) => vs
            .iter()
            .map(|v| v.as_tensor().map_or(0, crate::shim::storage_ptr))
            .collect(),
        RtValue::List(ts) => ts.iter().map(crate::shim::storage_ptr).collect(),
        other => vec![other.as_tensor().map_or(0, crate::shim::storage_ptr)],
    }
}

/// Why result `k` of `node` is a doubtful view, if it is: its schema declares it an alias of
/// an input, the op has kernels of its own (it is no composite that may copy, as `reshape`
/// is), yet on the meta device it has a storage of its own. libtorch's meta kernels then made
/// a copy where a real device makes a view or fails (`view` of a tensor no view can give):
/// which, only the real device's layouts tell (a meta kernel may lay its result out
/// otherwise than the CPU kernel does).
fn doubtful_view(rec: &Recorder<'_>, node: usize, k: usize, storage: usize) -> Option<String> {
    let (src, item) = guaranteed_alias(rec.graph, &rec.declared, node, k)?;
    let source = *rec.storages.get(src.index())?.get(item)?;
    if storage == 0 || source == 0 || storage == source {
        return None;
    }
    let input = &rec.graph.nodes[src.index()];
    let op = crate::trace::op_label(&rec.graph.nodes[node]);
    Some(format!(
        "`{op}` is a view of `{}`, but libtorch's meta kernels made it a copy: with the layout they give `{}` no view has this shape, so on a real device it fails unless that device lays `{}` out otherwise",
        input.name, input.name, input.name
    ))
}

/// The value whose storage result `k` of `node` shares on every device: the alias its
/// schema declares (`declared`, see [`graphbug_partition::SchemaAliases`]), unless the op is
/// a composite that may copy instead (`reshape`); `None` when it declares none.
pub(crate) fn guaranteed_alias(
    graph: &Graph,
    declared: &graphbug_partition::Shares,
    node: usize,
    k: usize,
) -> Option<(graphbug_ir::NodeId, usize)> {
    let alias = declared.get(node)?.get(k).copied().flatten()?;
    let NodeKind::Call { op, .. } = &graph.nodes[node].kind else {
        return None;
    };
    crate::shim::Op::find(op)
        .is_ok_and(|o| !o.is_composite())
        .then_some(alias)
}

impl RunHook for Recorder<'_> {
    fn after_node(&mut self, node: usize, value: &mut RtValue) -> Result<()> {
        self.metas[node] = value.meta();
        let storages = storages_of(value);
        for (k, &s) in storages.iter().enumerate() {
            if let Some(why) = doubtful_view(self, node, k, s) {
                self.doubtful_views
                    .push((self.graph.nodes[node].name.to_string(), why));
            }
        }
        self.storages[node] = storages;
        Ok(())
    }

    fn assume_annotation(&mut self, node: usize, why: &str) -> Result<bool> {
        if self.assume {
            self.assumed
                .push((self.graph.nodes[node].name.to_string(), why.to_string()));
        }
        Ok(self.assume)
    }
}

/// The graph on the meta device: an interpreter, and meta tensors for its inputs from their
/// annotations (constants included); an input without one is an error naming it.
pub(crate) fn on_meta(graph: &Graph) -> Result<(Interpreter, Vec<Tensor>)> {
    let device = meta_device();
    let (inputs, constants) = annotated_inputs(graph, |m| empty(m, &device))?;
    Ok((Interpreter::new(graph, &device, &constants)?, inputs))
}

/// Tensors `make` builds from the annotations of `graph`'s inputs (in placeholder order) and
/// constants (by attribute name); an input or constant without one is an error naming it.
pub(crate) fn annotated_inputs(
    graph: &Graph,
    make: impl Fn(&TensorMeta) -> Result<Tensor>,
) -> Result<(Vec<Tensor>, HashMap<String, Tensor>)> {
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
        let t = make(m)?;
        match &node.kind {
            NodeKind::GetAttr { target } => {
                constants.insert(target.clone(), t);
            }
            _ => inputs.push(t),
        }
    }
    Ok((inputs, constants))
}

fn infer(graph: &Graph, assume: bool) -> Result<Inferred> {
    let (interp, inputs) = on_meta(graph)?;
    let mut recorder = Recorder {
        graph,
        metas: vec![Meta::Unknown; graph.nodes.len()],
        assume,
        assumed: Vec::new(),
        declared: graphbug_partition::Aliases::shares(
            &graphbug_partition::SchemaAliases(&crate::LibtorchSchemas),
            graph,
        ),
        storages: vec![Vec::new(); graph.nodes.len()],
        doubtful_views: Vec::new(),
    };
    interp.run_with_hook(&inputs, &mut recorder)?;
    let mut out = graph.clone();
    for (node, meta) in out.nodes.iter_mut().zip(recorder.metas) {
        node.meta = meta;
    }
    Ok(Inferred {
        graph: out,
        assumed: recorder.assumed,
        doubtful_views: recorder.doubtful_views,
    })
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
            Meta::SymTensor(_) | Meta::Sym(_) => self.inferred.annotation().unwrap_or_default(),
            Meta::Unknown => "no tensor".into(),
        };
        write!(
            f,
            "node `{}`: annotated {}, libtorch infers {inferred}",
            self.node, self.annotated
        )
    }
}

/// What [`check_meta`] found.
pub struct MetaCheck {
    /// Every single-tensor annotation that meta inference contradicts, in graph order.
    pub mismatches: Vec<MetaMismatch>,
    /// Nodes that could not be checked (their annotation was taken as given), and why.
    pub unchecked: Vec<(String, String)>,
    /// Views the meta device made as copies, which a real device may refuse, and why.
    pub doubtful_views: Vec<(String, String)>,
}

/// Compares every annotation of `graph` with what libtorch infers.
pub fn check_meta(graph: &Graph) -> Result<MetaCheck> {
    let inferred = infer_meta_assuming(graph)?;
    let mismatches = graph
        .nodes
        .iter()
        .zip(&inferred.graph.nodes)
        .filter_map(|(given, got)| match &given.meta {
            Meta::Tensor(annotated) if got.meta.tensor() != Some(annotated) => Some(MetaMismatch {
                node: given.name.to_string(),
                annotated: annotated.clone(),
                inferred: got.meta.clone(),
            }),
            _ => None,
        })
        .collect();
    Ok(MetaCheck {
        mismatches,
        unchecked: inferred.assumed,
        doubtful_views: inferred.doubtful_views,
    })
}
