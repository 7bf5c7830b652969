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
    /// Told by a run on the graph's inputs (a shape that depends on their values), not by
    /// meta inference.
    pub on_data: bool,
}

impl fmt::Display for MetaMismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let inferred = match &self.inferred {
            Meta::Tensor(t) => t.to_string(),
            Meta::Multi(_) => "several outputs".into(),
            Meta::SymTensor(_) | Meta::Sym(_) => self.inferred.annotation().unwrap_or_default(),
            Meta::Unknown => "no tensor".into(),
        };
        let source = if self.on_data {
            "libtorch gives on the inputs"
        } else {
            "libtorch infers"
        };
        write!(
            f,
            "node `{}`: annotated {}, {source} {inferred}",
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
    /// Nodes meta inference could not check that a run on the given inputs checked, and
    /// why it had to (their mismatches, if any, are among `mismatches`).
    pub checked_on_data: Vec<(String, String)>,
    /// Views the meta device made as copies, which a real device may refuse, and why.
    pub doubtful_views: Vec<(String, String)>,
}

/// Compares every annotation of `graph` with what libtorch infers.
pub fn check_meta(graph: &Graph) -> Result<MetaCheck> {
    check_meta_with(graph, None)
}

/// A graph's inputs (in placeholder order) and constants (by attribute name), with data.
#[derive(Clone, Copy)]
pub struct GraphData<'a> {
    /// The inputs.
    pub inputs: &'a [Tensor],
    /// The constants.
    pub constants: &'a HashMap<String, Tensor>,
}

/// [`check_meta`]; with `data` (the graph's inputs and constants, on CPU), the nodes meta
/// inference cannot check (an output shape that depends on the input values, as
/// `masked_select`'s and `nonzero`'s do, or stand-ins the kernel rejects) are checked on
/// the data: the graph runs on CPU up to the last of them, when the values it makes fit in
/// a quarter of the memory available (the bound meta inference's CPU stand-ins keep), and
/// each result is compared with its annotation like any other node's.
pub fn check_meta_with(graph: &Graph, data: Option<GraphData<'_>>) -> Result<MetaCheck> {
    let inferred = infer_meta_assuming(graph)?;
    let mut mismatches: Vec<MetaMismatch> = graph
        .nodes
        .iter()
        .zip(&inferred.graph.nodes)
        .filter_map(|(given, got)| match &given.meta {
            Meta::Tensor(annotated) if got.meta.tensor() != Some(annotated) => Some(MetaMismatch {
                node: given.name.to_string(),
                annotated: annotated.clone(),
                inferred: got.meta.clone(),
                on_data: false,
            }),
            _ => None,
        })
        .collect();
    let mut unchecked = inferred.assumed;
    let mut checked_on_data = Vec::new();
    if let (Some(data), false) = (data, unchecked.is_empty()) {
        let ids: Vec<usize> = unchecked
            .iter()
            .filter_map(|(name, _)| graph.nodes.iter().position(|n| n.name == *name))
            .collect();
        // A value drawn at random is not the one the annotation was traced with.
        let random = random_sources(graph);
        let (ids, drawn): (Vec<usize>, Vec<usize>) =
            ids.into_iter().partition(|&id| random[id].is_none());
        let (observed, failure) = observe_on_data(graph, &inferred.graph, &ids, data);
        let users = graph.users();
        let mut still = Vec::new();
        for (name, why) in std::mem::take(&mut unchecked) {
            let Some(id) = graph.nodes.iter().position(|n| n.name == name) else {
                continue;
            };
            if let Some(r) = drawn.contains(&id).then_some(random[id]).flatten() {
                still.push((
                    name,
                    format!(
                        "{why}; on the given inputs neither: it reads numbers `{}` drew at random, which no run draws again",
                        graph.nodes[r].name
                    ),
                ));
                continue;
            }
            // The node itself where it is one tensor, else its getitems.
            let mut compared: Vec<usize> = vec![id];
            compared.extend(
                users.nodes[id]
                    .iter()
                    .map(|u| u.index())
                    .filter(|&u| matches!(graph.nodes[u].kind, NodeKind::GetItem { .. })),
            );
            if !compared.iter().all(|c| observed.contains_key(c)) {
                let reason = failure.as_deref().unwrap_or("the run did not reach it");
                still.push((name, format!("{why}; on the given inputs: {reason}")));
                continue;
            }
            for c in compared {
                let node = &graph.nodes[c];
                if let Meta::Tensor(annotated) = &node.meta {
                    let got = &observed[&c];
                    if got.tensor() != Some(annotated) {
                        mismatches.retain(|m| m.node != node.name.as_str());
                        mismatches.push(MetaMismatch {
                            node: node.name.to_string(),
                            annotated: annotated.clone(),
                            inferred: got.clone(),
                            on_data: true,
                        });
                    }
                }
            }
            checked_on_data.push((name, why));
        }
        unchecked = still;
        let order = |name: &str| graph.nodes.iter().position(|n| n.name == name);
        mismatches.sort_by_key(|m| order(&m.node));
    }
    Ok(MetaCheck {
        mismatches,
        unchecked,
        checked_on_data,
        doubtful_views: inferred.doubtful_views,
    })
}

/// For each node, a random op (libtorch's `nondeterministic_seeded`) whose draw it reads,
/// if any: itself, or one of the nodes it is computed from.
fn random_sources(graph: &Graph) -> Vec<Option<usize>> {
    let mut random: Vec<Option<usize>> = vec![None; graph.nodes.len()];
    for (i, node) in graph.nodes.iter().enumerate() {
        let own = match &node.kind {
            NodeKind::Call { op, .. } => crate::shim::Op::find(op).is_ok_and(|o| o.is_random()),
            _ => false,
        };
        let mut from = own.then_some(i);
        node.for_each_input(|src| from = from.or(random[src.index()]));
        random[i] = from;
    }
    random
}

/// The metas of nodes `ids` (and of their getitems) from a CPU run of `graph` on `data`,
/// stopped after the last of them; why the run could not give them all, if it could not.
/// `inferred` (the graph with what meta inference found) sizes the values beforehand.
fn observe_on_data(
    graph: &Graph,
    inferred: &Graph,
    ids: &[usize],
    data: GraphData<'_>,
) -> (HashMap<usize, Meta>, Option<String>) {
    let mut observed = HashMap::new();
    let Some(&last) = ids.iter().max() else {
        return (observed, None);
    };
    // Every value up to the last node, held at once at worst: a quarter of what is
    // available, as the stand-ins of ops without a meta kernel are bounded.
    let bytes: Option<u64> = inferred.nodes[..=last]
        .iter()
        .filter(|n| !matches!(n.kind, NodeKind::Placeholder | NodeKind::GetAttr { .. }))
        .try_fold(0u64, |total, n| {
            let b = match &n.meta {
                Meta::Tensor(t) => t.checked_nbytes()?,
                Meta::Multi(items) => items
                    .iter()
                    .flatten()
                    .try_fold(0u64, |a, t| a.checked_add(t.checked_nbytes()?))?,
                _ => 0,
            };
            total.checked_add(b)
        });
    let budget = crate::memory::available_bytes().unwrap_or(8 << 30) / 4;
    match bytes {
        Some(b) if b <= budget => {}
        _ => {
            return (
                observed,
                Some(format!(
                    "running the graph up to it would take {} (graphbug allows a quarter of the {} available)",
                    bytes.map_or("more than 16 EiB".into(), crate::memory::human),
                    crate::memory::human(budget * 4)
                )),
            )
        }
    }
    let wanted: std::collections::HashSet<usize> = graph
        .nodes
        .iter()
        .enumerate()
        .filter(|(i, n)| {
            ids.contains(i)
                || matches!(n.kind, NodeKind::GetItem { source, .. } if ids.contains(&source.index()))
        })
        .map(|(i, _)| i)
        .collect();
    let last = wanted.iter().copied().max().unwrap_or(last);
    let mut run = || -> Result<()> {
        let interp = Interpreter::new(graph, &Device::cpu(), data.constants)?;
        // Random ops draw from libtorch's generator; put it back as it was.
        let _rng = crate::shim::CpuRngGuard::new().map_err(AtenError::BadInputs)?;
        // Copies: in-place ops must not change the caller's tensors.
        let inputs: Vec<Tensor> = data.inputs.iter().map(Tensor::copy).collect();
        interp.run_observed(&inputs, &mut |i, value| {
            if wanted.contains(&i) {
                observed.insert(i, value.meta());
            }
            if i == last {
                return Err(AtenError::BadInputs(STOP.into()));
            }
            Ok(())
        })?;
        Ok(())
    };
    let failure = match run() {
        Ok(()) => None,
        Err(AtenError::BadInputs(m)) if m == STOP => None,
        Err(e) => Some(format!("the run failed: {e}")),
    };
    (observed, failure)
}

/// Ends [`observe_on_data`]'s run once it has what it wants.
const STOP: &str = "graphbug: observed every node it wanted";
