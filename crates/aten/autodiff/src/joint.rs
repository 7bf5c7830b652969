//! AOTAutograd's joint forward/backward graph, built by reverse-mode accumulation.
//!
//! The joint graph takes `primals_1..N` (the forward inputs) and `tangents_1..M` (one per
//! forward output that requires grad), runs the forward, then the backward, and returns the
//! forward outputs followed by one gradient per primal (`None` where there is none), as
//! AOTAutograd traces it. The backward visits the forward nodes in reverse program order,
//! which is the order PyTorch's autograd engine runs their backward nodes in (highest
//! sequence number first); each node's derivative rule (see `rules.rs`) emits the aten ops
//! PyTorch's formula emits, gradients are reduced to their input's shape as the engine's
//! `validate_outputs` does, and several contributions to one value are summed with
//! `aten.add.Tensor` as they arrive. Outputs PyTorch saves for backward get the `detach`
//! pair PyTorch's saved variables leave in traced graphs. Dead nodes are removed, as
//! AOTAutograd does before partitioning.

use std::collections::HashMap;

use graphbug_ir::passes::{default_side_effects, eliminate_dead_code};
use graphbug_ir::{
    Device, Graph, Meta, Namespace, Node, NodeId, NodeKind, OpName, TensorMeta, Value,
};

use crate::derivatives::{Derivatives, ForwardCall, RulesOnly, Source};
use crate::error::AutodiffError;
use crate::rules::{self, Grads, Lookup, Outputs};

/// A joint forward/backward graph and how many of its outputs are forward outputs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Joint {
    /// The graph: primals, tangents, forward nodes, then backward nodes.
    pub graph: Graph,
    /// How many leading outputs are the forward's outputs; one gradient per primal follows.
    pub num_fwd_outputs: usize,
    /// For each tangent (`tangents_1..M`, in order), the index of the forward output it is
    /// the gradient of.
    pub tangent_outputs: Vec<usize>,
}

/// For each input of `forward`, whether it requires grad by default: the floating-point
/// tensors (parameters and activations; integer ids and masks do not).
pub fn floating_inputs(forward: &Graph) -> Vec<bool> {
    forward
        .placeholders()
        .iter()
        .map(|&p| {
            forward
                .node(p)
                .meta
                .tensor()
                .is_some_and(|t| t.dtype.is_floating_point())
        })
        .collect()
}

/// Builds the joint graph of a functional forward graph (no in-place ops; every node annotated with metas) for the inputs with `requires_grad[i]` set, with the Rust rules only.
pub fn joint_graph(forward: &Graph, requires_grad: &[bool]) -> Result<Joint, AutodiffError> {
    joint_graph_with(forward, requires_grad, &RulesOnly)
}

/// The joint graph of an N-layer GPT made of gpt4's blocks
/// ([`graphbug_ir::models::GptConfig::gpt4_layers`]), its floating-point inputs requiring
/// grad: the model the benchmarks scale.
pub fn gpt_joint(layers: usize) -> Result<Joint, AutodiffError> {
    let forward =
        graphbug_ir::models::gpt_forward(&graphbug_ir::models::GptConfig::gpt4_layers(layers));
    joint_graph(&forward, &floating_inputs(&forward))
}

/// [`joint_graph`], asking `derivatives` for the backward of every op without a Rust rule.
pub fn joint_graph_with(
    forward: &Graph,
    requires_grad: &[bool],
    derivatives: &dyn Derivatives,
) -> Result<Joint, AutodiffError> {
    forward.verify()?;
    let placeholders = forward.placeholders();
    if requires_grad.len() != placeholders.len() {
        return Err(AutodiffError::Unsupported {
            node: forward.name.clone(),
            op: "joint_graph".into(),
            message: format!(
                "requires_grad has {} entries but the graph has {} inputs",
                requires_grad.len(),
                placeholders.len()
            ),
        });
    }
    for node in &forward.nodes {
        if let Some(op) = node.op().filter(|op| op.is_inplace_by_name()) {
            return Err(AutodiffError::Unsupported {
                node: node.name.to_string(),
                op: op.to_string(),
                message: "in-place op in the forward graph; functionalize it first".into(),
            });
        }
    }
    let analysis = analyze(forward, &placeholders, requires_grad, derivatives)?;
    let tangent_outputs = analysis.tangents.iter().map(|&(k, _)| k).collect();
    let mut ctx = Ctx::layout(forward, &placeholders, analysis, derivatives);
    let grads = ctx.backward()?;

    let mut output: Vec<Value> = forward.outputs().iter().map(|v| ctx.fwd_value(v)).collect();
    let num_fwd_outputs = output.len();
    for (k, &p) in placeholders.iter().enumerate() {
        let g = grads[p.index()].first().copied().flatten();
        output.push(match g {
            Some(g) if requires_grad[k] => Value::Node(g),
            _ => Value::None,
        });
    }
    let graph = Graph {
        dialect: graphbug_ir::Dialect::Aten,
        param_names: Default::default(),
        name: forward.name.clone(),
        nodes: ctx.nodes,
        output: Some(output),
    };
    let graph = eliminate_dead_code(&graph, &default_side_effects);
    graph.verify()?;
    if let Some(schemas) = derivatives.schemas() {
        graphbug_ir::schema::verify_calls(&graph, schemas)?;
    }
    Ok(Joint {
        graph,
        num_fwd_outputs,
        tangent_outputs,
    })
}

/// A joint-graph tensor value and its meta.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Val {
    /// The joint node.
    pub(crate) id: NodeId,
    /// Its dtype and shape.
    pub(crate) meta: TensorMeta,
}

impl Val {
    /// As an argument.
    pub(crate) fn value(&self) -> Value {
        Value::Node(self.id)
    }
}

/// A forward call node being differentiated.
pub(crate) struct Site<'a> {
    /// The forward node.
    pub(crate) id: NodeId,
    /// Its name.
    pub(crate) name: &'a str,
    /// Its op.
    pub(crate) op: &'a OpName,
    /// Its positional arguments (forward ids).
    pub(crate) args: &'a [Value],
    /// Its keyword arguments (forward ids).
    pub(crate) kwargs: &'a [(String, Value)],
    /// The gradient of each output, where one arrived.
    pub(crate) grads: Vec<Option<Val>>,
}

/// What the forward pass tells: which values require grad, which tangents and extra
/// forward nodes (saved-result detaches, missing getitems) the joint graph needs.
struct Analysis {
    /// Per forward node, per output: requires grad.
    rg: Vec<Vec<bool>>,
    /// Forward outputs that get a tangent: (output index, node), in output order.
    tangents: Vec<(usize, NodeId)>,
    /// Single-output nodes whose result the backward reads (a `detach` follows them).
    detach: Vec<bool>,
    /// Extra getitems `(source, index)`, keyed by the forward node they follow.
    extra_items: Vec<Vec<(NodeId, usize)>>,
    /// The existing getitem reading `(source, index)`.
    items: HashMap<(NodeId, usize), NodeId>,
}

fn missing_meta(node: &Node, why: &str) -> AutodiffError {
    AutodiffError::MissingMeta {
        node: node.name.to_string(),
        message: why.to_string(),
    }
}

/// Number of outputs of a call node, as far as its meta tells.
fn output_count(node: &Node) -> usize {
    match &node.meta {
        Meta::Multi(items) => items.len(),
        _ => 1,
    }
}

/// The meta of output `index` of a forward node.
fn output_meta(node: &Node, index: usize) -> Option<&TensorMeta> {
    match &node.meta {
        Meta::Tensor(t) if index == 0 => Some(t),
        Meta::Multi(items) => items.get(index).and_then(Option::as_ref),
        _ => None,
    }
}

/// A forward call as a derivatives provider sees it (no output gradients yet, CPU factory
/// device), and the forward nodes its numbered tensor inputs are.
fn forward_call<'g>(
    forward: &'g Graph,
    id: NodeId,
    requires_grad: &dyn Fn(NodeId) -> bool,
) -> Result<(ForwardCall<'g>, Vec<NodeId>), AutodiffError> {
    let node = forward.node(id);
    let NodeKind::Call { op, args, kwargs } = &node.kind else {
        return Err(missing_meta(node, "only calls are differentiated"));
    };
    // Number the distinct tensor arguments.
    let mut inputs: Vec<NodeId> = Vec::new();
    let mut number = |v: &Value| {
        v.map_nodes(&mut |src| {
            let k = inputs.iter().position(|&i| i == src).unwrap_or_else(|| {
                inputs.push(src);
                inputs.len() - 1
            });
            Value::Node(NodeId(k as u32))
        })
    };
    let args: Vec<Value> = args.iter().map(&mut number).collect();
    let kwargs: Vec<(String, Value)> = kwargs.iter().map(|(k, v)| (k.clone(), number(v))).collect();
    let mut metas = Vec::with_capacity(inputs.len());
    for &i in &inputs {
        let input = forward.node(i);
        let meta = input.meta.tensor().cloned().ok_or_else(|| {
            missing_meta(
                input,
                "a derivative from libtorch needs the shape of this value",
            )
        })?;
        metas.push((meta, requires_grad(i)));
    }
    let call = ForwardCall {
        node: &node.name,
        op,
        args,
        kwargs,
        inputs: metas,
        outputs: node.meta.clone(),
        grads: Vec::new(),
        device: Device::cpu(),
    };
    Ok((call, inputs))
}

fn analyze(
    forward: &Graph,
    placeholders: &[NodeId],
    requires_grad: &[bool],
    derivatives: &dyn Derivatives,
) -> Result<Analysis, AutodiffError> {
    let n = forward.nodes.len();
    let mut rg: Vec<Vec<bool>> = vec![Vec::new(); n];
    let mut items: HashMap<(NodeId, usize), NodeId> = HashMap::new();
    let mut getitems: Vec<Vec<(usize, NodeId)>> = vec![Vec::new(); n];
    let mut input_index: Vec<usize> = vec![0; n];
    for (k, p) in placeholders.iter().enumerate() {
        input_index[p.index()] = k;
    }
    for id in forward.ids() {
        let node = forward.node(id);
        rg[id.index()] = match &node.kind {
            NodeKind::Placeholder => {
                let k = input_index[id.index()];
                let want = requires_grad.get(k).copied().unwrap_or(false);
                if want {
                    let meta = node.meta.tensor().ok_or_else(|| {
                        missing_meta(
                            node,
                            "an input that requires grad needs its dtype and shape",
                        )
                    })?;
                    if !rules::differentiable_dtype(meta.dtype) {
                        return Err(AutodiffError::Unsupported {
                            node: node.name.to_string(),
                            op: "placeholder".into(),
                            message: format!(
                                "only floating-point inputs can require grad, this one is {}",
                                meta.dtype
                            ),
                        });
                    }
                }
                vec![want]
            }
            NodeKind::GetAttr { .. } => vec![false],
            NodeKind::GetItem { source, index } => {
                items.entry((*source, *index)).or_insert(id);
                getitems[source.index()].push((*index, id));
                let src = forward.node(*source);
                let candidate = rg[source.index()].get(*index).copied().unwrap_or(false);
                if candidate && output_meta(src, *index).is_none() && node.meta.tensor().is_none() {
                    return Err(missing_meta(
                        node,
                        "an output that may require grad needs its dtype and shape",
                    ));
                }
                let dtype_ok = output_meta(src, *index)
                    .or(node.meta.tensor())
                    .is_some_and(|m| rules::differentiable_dtype(m.dtype));
                vec![candidate && dtype_ok]
            }
            NodeKind::Call { op, .. } => {
                let mut any = false;
                node.for_each_input(|src| {
                    any |= rg[src.index()].iter().any(|&b| b);
                });
                let lookup = rules::lookup(op);
                if matches!(lookup, Lookup::NonDifferentiable) || !any {
                    vec![false; output_count(node)]
                } else {
                    if node.meta == Meta::Unknown {
                        return Err(missing_meta(
                            node,
                            &format!("{op} reads a value that requires grad, so its dtype and shape are needed"),
                        ));
                    }
                    let first_only =
                        matches!(&lookup, Lookup::Rule(r) if r.outputs == Outputs::First);
                    // Without a Rust rule, libtorch tells which outputs are differentiable
                    // (linalg_lu's permutation is not, although it is a float tensor).
                    let libtorch = match lookup {
                        Lookup::Unknown => {
                            let (call, _) = forward_call(forward, id, &|i: NodeId| {
                                rg[i.index()].iter().any(|&b| b)
                            })?;
                            derivatives.differentiable_outputs(&call)
                        }
                        _ => None,
                    };
                    (0..output_count(node))
                        .map(|k| {
                            if first_only && k > 0 {
                                return false;
                            }
                            if libtorch
                                .as_ref()
                                .is_some_and(|d| !d.get(k).copied().unwrap_or(true))
                            {
                                return false;
                            }
                            // A multi-output entry without meta stays a candidate: its
                            // getitem decides (or reports the missing meta).
                            match &node.meta {
                                Meta::Multi(m) if m.get(k).is_some_and(Option::is_none) => true,
                                _ => output_meta(node, k)
                                    .is_some_and(|m| rules::differentiable_dtype(m.dtype)),
                            }
                        })
                        .collect()
                }
            }
        };
    }

    let tangents: Vec<(usize, NodeId)> = forward
        .outputs()
        .iter()
        .enumerate()
        .filter_map(|(k, v)| Some((k, v.as_node()?)))
        .filter(|(_, id)| {
            matches!(forward.node(*id).meta, Meta::Tensor(_))
                && rg[id.index()].first().copied().unwrap_or(false)
        })
        .collect();

    // Saved values: what each rule reads of its own outputs.
    let mut detach = vec![false; n];
    let mut extra_items: Vec<Vec<(NodeId, usize)>> = vec![Vec::new(); n];
    for id in forward.ids() {
        let node = forward.node(id);
        let NodeKind::Call { op, .. } = &node.kind else {
            continue;
        };
        let Lookup::Rule(rule) = rules::lookup(op) else {
            continue;
        };
        let mut any = false;
        node.for_each_input(|src| any |= rg[src.index()].iter().any(|&b| b));
        if !any {
            continue;
        }
        if rule.saves_result && rg[id.index()].first().copied().unwrap_or(false) {
            detach[id.index()] = true;
        }
        for &index in rule.saved_items {
            if !items.contains_key(&(id, index)) {
                // After the getitems of lower outputs, where a trace would have made it.
                let anchor = getitems[id.index()]
                    .iter()
                    .filter(|(i, _)| *i < index)
                    .map(|&(_, g)| g)
                    .max()
                    .unwrap_or(id);
                extra_items[anchor.index()].push((id, index));
            }
        }
    }
    Ok(Analysis {
        rg,
        tangents,
        detach,
        extra_items,
        items,
    })
}

/// The joint graph under construction, and what rules need to know about the forward.
pub(crate) struct Ctx<'g> {
    forward: &'g Graph,
    nodes: Vec<Node>,
    strides: Vec<Option<Vec<i64>>>,
    names: Namespace,
    /// Forward id → joint id.
    fwd_map: Vec<NodeId>,
    rg: Vec<Vec<bool>>,
    /// Forward id → its joint `detach`, for saved results.
    fwd_detach: HashMap<NodeId, NodeId>,
    /// (forward source, index) → joint getitem.
    fwd_items: HashMap<(NodeId, usize), NodeId>,
    /// Joint ids of the tangents, with the forward node each belongs to.
    tangents: Vec<(NodeId, NodeId)>,
    device: Device,
    derivatives: &'g dyn Derivatives,
}

impl<'g> Ctx<'g> {
    /// Lays out primals, tangents and the forward nodes (with their extra detaches and
    /// getitems), and names them.
    fn layout(
        forward: &'g Graph,
        placeholders: &[NodeId],
        a: Analysis,
        derivatives: &'g dyn Derivatives,
    ) -> Ctx<'g> {
        let mut names = Namespace::new();
        let primal_names: Vec<String> = (1..=placeholders.len())
            .map(|k| format!("primals_{k}"))
            .collect();
        let tangent_names: Vec<String> = (1..=a.tangents.len())
            .map(|k| format!("tangents_{k}"))
            .collect();
        for name in primal_names.iter().chain(&tangent_names) {
            names.reserve(name);
        }
        let mut body_names: Vec<Option<String>> = vec![None; forward.nodes.len()];
        for id in forward.ids() {
            let node = forward.node(id);
            if node.is_placeholder() {
                continue;
            }
            body_names[id.index()] = Some(if names.contains(&node.name) {
                names.create_name(&node.name)
            } else {
                names.reserve(&node.name);
                node.name.to_string()
            });
        }
        let device = forward
            .nodes
            .iter()
            .find_map(|n| {
                let NodeKind::Call { args, kwargs, .. } = &n.kind else {
                    return None;
                };
                args.iter()
                    .chain(kwargs.iter().map(|(_, v)| v))
                    .find_map(|v| match v {
                        Value::Device(d) => Some(d.clone()),
                        _ => None,
                    })
            })
            .unwrap_or_else(Device::cpu);

        let mut ctx = Ctx {
            forward,
            nodes: Vec::with_capacity(forward.nodes.len() * 3),
            strides: Vec::with_capacity(forward.nodes.len() * 3),
            names,
            fwd_map: vec![NodeId(0); forward.nodes.len()],
            rg: a.rg,
            fwd_detach: HashMap::new(),
            fwd_items: HashMap::new(),
            tangents: Vec::new(),
            device,
            derivatives,
        };
        for (k, &p) in placeholders.iter().enumerate() {
            let meta = forward.node(p).meta.clone();
            let id = ctx.push_raw(primal_names[k].clone(), NodeKind::Placeholder, meta);
            ctx.fwd_map[p.index()] = id;
        }
        for (j, &(_, t)) in a.tangents.iter().enumerate() {
            let meta = forward.node(t).meta.clone();
            let id = ctx.push_raw(tangent_names[j].clone(), NodeKind::Placeholder, meta);
            ctx.tangents.push((t, id));
        }
        for id in forward.ids() {
            let node = forward.node(id);
            if node.is_placeholder() {
                continue;
            }
            let map = &ctx.fwd_map;
            let kind = node
                .try_remap_kind::<()>(&mut |src| Ok(map[src.index()]))
                .expect("a verified graph reads only earlier nodes, which are all mapped");
            let name = body_names[id.index()].clone().unwrap_or_default();
            let new = ctx.push_raw(name, kind, node.meta.clone());
            ctx.fwd_map[id.index()] = new;
            if let NodeKind::GetItem { source, index } = node.kind {
                if a.items.get(&(source, index)) == Some(&id) {
                    ctx.fwd_items.insert((source, index), new);
                }
            }
            if a.detach[id.index()] {
                let name = ctx.names.create_name("detach");
                let kind = NodeKind::Call {
                    op: OpName::aten("detach", "default"),
                    args: vec![Value::Node(new)],
                    kwargs: Vec::new(),
                };
                let d = ctx.push_raw(name, kind, node.meta.clone());
                ctx.fwd_detach.insert(id, d);
            }
            for &(source, index) in &a.extra_items[id.index()] {
                let meta = output_meta(forward.node(source), index)
                    .cloned()
                    .map_or(Meta::Unknown, Meta::Tensor);
                let name = ctx.names.create_name("getitem");
                let kind = NodeKind::GetItem {
                    source: ctx.fwd_map[source.index()],
                    index,
                };
                let g = ctx.push_raw(name, kind, meta);
                ctx.fwd_items.insert((source, index), g);
            }
        }
        ctx
    }

    /// Appends a node, inferring its strides.
    fn push_raw(&mut self, name: String, kind: NodeKind, meta: Meta) -> NodeId {
        let id = NodeId(self.nodes.len() as u32);
        let strides = match (&kind, &meta) {
            (NodeKind::Placeholder | NodeKind::GetAttr { .. }, Meta::Tensor(t)) => {
                Some(rules::contiguous(&t.shape))
            }
            (NodeKind::Call { op, args, kwargs }, Meta::Tensor(t)) => {
                rules::call_strides(self, op, args, kwargs, &t.shape)
            }
            (NodeKind::GetItem { source, .. }, Meta::Tensor(t)) => {
                rules::item_strides(self, *source, &t.shape)
            }
            _ => None,
        };
        // Consumers index strides by the node's own dimensions.
        let strides = strides.filter(|st| meta.tensor().is_some_and(|t| t.shape.len() == st.len()));
        self.nodes.push(Node {
            name: name.into(),
            kind,
            meta,
        });
        self.strides.push(strides);
        id
    }

    /// Runs the backward; returns the gradient of each forward node's outputs.
    fn backward(&mut self) -> Result<Vec<Vec<Option<NodeId>>>, AutodiffError> {
        let forward = self.forward;
        let mut grads: Vec<Vec<Option<NodeId>>> = forward
            .nodes
            .iter()
            .map(|n| vec![None; output_count(n)])
            .collect();
        for (t, id) in self.tangents.clone() {
            self.accumulate(&mut grads, t, 0, id);
        }
        for id in forward.ids().rev() {
            let node = forward.node(id);
            match &node.kind {
                NodeKind::GetItem { source, index } => {
                    if let Some(g) = grads[id.index()].first().copied().flatten() {
                        self.accumulate(&mut grads, *source, *index, g);
                    }
                }
                NodeKind::Call { op, args, kwargs } => {
                    if grads[id.index()].iter().all(Option::is_none) {
                        continue;
                    }
                    let mut any = false;
                    node.for_each_input(|src| any |= self.requires_grad(src));
                    if !any {
                        continue;
                    }
                    let site = Site {
                        id,
                        name: &node.name,
                        op,
                        args,
                        kwargs,
                        grads: grads[id.index()]
                            .iter()
                            .map(|g| g.and_then(|g| self.val(g)))
                            .collect(),
                    };
                    // The Rust rules are written for real dtypes; complex calls take
                    // libtorch's formulas.
                    let mut complex = false;
                    node.for_each_input(|src| {
                        complex |= self.fwd_meta(src).is_ok_and(|m| m.dtype.is_complex());
                    });
                    let input_grads = match rules::lookup(op) {
                        Lookup::Rule(_) if complex => {
                            self.derived_backward(&site, &grads[id.index()])?
                        }
                        Lookup::Rule(rule) => (rule.backward)(self, &site)?,
                        Lookup::NonDifferentiable => continue,
                        Lookup::Unknown => self.derived_backward(&site, &grads[id.index()])?,
                    };
                    // validate_outputs: reduce to the input's shape, cast to its dtype.
                    let mut ready = Vec::with_capacity(input_grads.len());
                    for (input, g) in input_grads {
                        if !self.requires_grad(input) {
                            continue;
                        }
                        let want = self.fwd_meta(input)?;
                        let mut g = rules::sum_to(self, &g, &want.shape).ok_or_else(|| {
                            site.error(format!(
                                "the gradient of `{}` has shape {:?}, which does not reduce to its shape {:?}",
                                forward.node(input).name,
                                g.meta.shape,
                                want.shape
                            ))
                        })?;
                        if g.meta.dtype != want.dtype {
                            let kwargs = vec![("dtype".to_string(), Value::Dtype(want.dtype))];
                            g = self.call(
                                OpName::aten("_to_copy", "default"),
                                vec![g.value()],
                                kwargs,
                                want.clone(),
                            );
                        }
                        ready.push((input, g.id));
                    }
                    for (input, g) in ready {
                        self.accumulate(&mut grads, input, 0, g);
                    }
                }
                NodeKind::Placeholder | NodeKind::GetAttr { .. } => {}
            }
        }
        Ok(grads)
    }

    /// The backward of a call without a Rust rule, from the derivatives provider, inlined
    /// into the joint graph.
    fn derived_backward(
        &mut self,
        site: &Site<'_>,
        out_grads: &[Option<NodeId>],
    ) -> Result<Grads, AutodiffError> {
        let (mut call, inputs) = forward_call(self.forward, site.id, &|i| self.requires_grad(i))?;
        call.grads = out_grads.iter().map(Option::is_some).collect();
        call.device = self.device();
        let backward = self
            .derivatives
            .backward(&call)
            .map_err(|message| site.error(message))?;
        let bw = &backward.graph;
        let mut map: Vec<NodeId> = Vec::with_capacity(bw.nodes.len());
        let mut sources = backward.sources.iter();
        for node in &bw.nodes {
            let id = match &node.kind {
                NodeKind::Placeholder => {
                    let source = sources.next().ok_or_else(|| {
                        site.error("the recorded backward has more inputs than sources")
                    })?;
                    match *source {
                        Source::Input(k) => self.fwd(*inputs.get(k).ok_or_else(|| {
                            site.error(format!("the recorded backward reads input {k}, which the call does not have"))
                        })?),
                        Source::Output(k) => self.fwd_output(site, k)?,
                        Source::Grad(k) => out_grads.get(k).copied().flatten().ok_or_else(|| {
                            site.error(format!("the recorded backward reads the gradient of output {k}, which gets none"))
                        })?,
                    }
                }
                _ => {
                    let kind = node
                        .try_remap_kind::<()>(&mut |src| Ok(map[src.index()]))
                        .expect("a verified graph reads only earlier nodes, which are all mapped");
                    let base = match &kind {
                        NodeKind::Call { op, .. } => op.name.as_str(),
                        _ => "getitem",
                    };
                    let name = self.names.create_name(base);
                    self.push_raw(name, kind, node.meta.clone())
                }
            };
            map.push(id);
        }
        let outputs = bw.outputs();
        if outputs.len() != inputs.len() {
            return Err(site.error(format!(
                "the recorded backward returns {} gradients for {} inputs",
                outputs.len(),
                inputs.len()
            )));
        }
        let mut grads = Vec::new();
        for (k, out) in outputs.iter().enumerate() {
            let Some(g) = out.as_node() else { continue };
            let g = map[g.index()];
            let meta = self.meta(g).cloned().ok_or_else(|| {
                site.error(format!(
                    "the recorded gradient of input {k} has no dtype and shape"
                ))
            })?;
            grads.push((inputs[k], Val { id: g, meta }));
        }
        Ok(grads)
    }

    /// The joint node holding output `k` of a forward call (its getitem for several
    /// outputs; one is added where the forward has none).
    fn fwd_output(&mut self, site: &Site<'_>, k: usize) -> Result<NodeId, AutodiffError> {
        let node = self.forward.node(site.id);
        if !matches!(node.meta, Meta::Multi(_)) {
            return Ok(self.fwd(site.id));
        }
        if let Some(&g) = self.fwd_items.get(&(site.id, k)) {
            return Ok(g);
        }
        let meta = output_meta(node, k).cloned().ok_or_else(|| {
            site.error(format!(
                "the backward reads output {k}, which has no dtype and shape"
            ))
        })?;
        let name = self.names.create_name("getitem");
        let kind = NodeKind::GetItem {
            source: self.fwd(site.id),
            index: k,
        };
        let g = self.push_raw(name, kind, Meta::Tensor(meta));
        self.fwd_items.insert((site.id, k), g);
        Ok(g)
    }

    /// Adds gradient `g` to output `index` of forward node `target`.
    fn accumulate(
        &mut self,
        grads: &mut [Vec<Option<NodeId>>],
        target: NodeId,
        index: usize,
        g: NodeId,
    ) {
        let slot = &mut grads[target.index()];
        if slot.len() <= index {
            slot.resize(index + 1, None);
        }
        let new = match slot[index] {
            None => g,
            Some(old) => {
                let meta = self.meta(old).cloned().or_else(|| self.meta(g).cloned());
                let kind = NodeKind::Call {
                    op: OpName::aten("add", "Tensor"),
                    args: vec![Value::Node(old), Value::Node(g)],
                    kwargs: Vec::new(),
                };
                let name = self.names.create_name("add");
                self.push_raw(name, kind, meta.map_or(Meta::Unknown, Meta::Tensor))
            }
        };
        grads[target.index()][index] = Some(new);
    }

    /// The joint node of a forward node.
    pub(crate) fn fwd(&self, id: NodeId) -> NodeId {
        self.fwd_map[id.index()]
    }

    /// A forward argument with its node references moved into the joint graph.
    pub(crate) fn fwd_value(&self, v: &Value) -> Value {
        v.map_nodes(&mut |id| Value::Node(self.fwd(id)))
    }

    /// The shape and dtype of a (single-tensor) forward node.
    pub(crate) fn fwd_meta(&self, id: NodeId) -> Result<TensorMeta, AutodiffError> {
        let node = self.forward.node(id);
        node.meta
            .tensor()
            .cloned()
            .ok_or_else(|| missing_meta(node, "a derivative rule needs the shape of this value"))
    }

    /// A forward tensor as a joint value.
    pub(crate) fn fwd_val(&self, id: NodeId) -> Result<Val, AutodiffError> {
        Ok(Val {
            id: self.fwd(id),
            meta: self.fwd_meta(id)?,
        })
    }

    /// True when a forward value requires grad.
    pub(crate) fn requires_grad(&self, id: NodeId) -> bool {
        self.rg
            .get(id.index())
            .is_some_and(|r| r.iter().any(|&b| b))
    }

    /// A joint node.
    pub(crate) fn node(&self, id: NodeId) -> &Node {
        &self.nodes[id.index()]
    }

    /// The meta of a single-tensor joint node.
    pub(crate) fn meta(&self, id: NodeId) -> Option<&TensorMeta> {
        self.nodes.get(id.index()).and_then(|n| n.meta.tensor())
    }

    /// The strides of a joint node, when the model knows them.
    pub(crate) fn strides(&self, id: NodeId) -> Option<&[i64]> {
        self.strides.get(id.index()).and_then(|s| s.as_deref())
    }

    fn val(&self, id: NodeId) -> Option<Val> {
        Some(Val {
            id,
            meta: self.meta(id)?.clone(),
        })
    }

    /// The device factory calls use (the forward's, else CPU).
    pub(crate) fn device(&self) -> Device {
        self.device.clone()
    }

    /// Emits a call returning one tensor.
    pub(crate) fn call(
        &mut self,
        op: OpName,
        args: Vec<Value>,
        kwargs: Vec<(String, Value)>,
        meta: TensorMeta,
    ) -> Val {
        let name = self.names.create_name(&op.name);
        let kind = NodeKind::Call { op, args, kwargs };
        let id = self.push_raw(name, kind, Meta::Tensor(meta.clone()));
        Val { id, meta }
    }

    /// Emits a call returning several tensors and a getitem for each output with a meta
    /// (the others are undefined, as for a masked-out gradient; their names are used up
    /// as FX uses them before removing the dead getitems).
    pub(crate) fn call_multi(
        &mut self,
        op: OpName,
        args: Vec<Value>,
        metas: Vec<Option<TensorMeta>>,
    ) -> Vec<Option<Val>> {
        let name = self.names.create_name(&op.name);
        let kind = NodeKind::Call {
            op,
            args,
            kwargs: Vec::new(),
        };
        let source = self.push_raw(name, kind, Meta::Multi(metas.clone()));
        metas
            .into_iter()
            .enumerate()
            .map(|(index, meta)| {
                let name = self.names.create_name("getitem");
                let meta = meta?;
                let id = self.push_raw(
                    name,
                    NodeKind::GetItem { source, index },
                    Meta::Tensor(meta.clone()),
                );
                Some(Val { id, meta })
            })
            .collect()
    }

    /// The saved result of `site` as the backward unpacks it: `detach` of the forward's
    /// `detach`.
    pub(crate) fn saved_result(&mut self, site: &Site<'_>) -> Result<Val, AutodiffError> {
        let saved = match self.fwd_detach.get(&site.id) {
            Some(&d) => d,
            None => self.fwd(site.id),
        };
        let meta = self.fwd_meta(site.id)?;
        Ok(self.call(
            OpName::aten("detach", "default"),
            vec![Value::Node(saved)],
            Vec::new(),
            meta,
        ))
    }

    /// Saved output `index` of a multi-output `site` (its getitem in the forward).
    pub(crate) fn saved_item(&self, site: &Site<'_>, index: usize) -> Result<Val, AutodiffError> {
        let id = *self
            .fwd_items
            .get(&(site.id, index))
            .ok_or_else(|| site.error(format!("output {index} was not saved for backward")))?;
        self.val(id).ok_or_else(|| AutodiffError::MissingMeta {
            node: site.name.to_string(),
            message: format!(
                "its output {index} has no shape annotation, and the derivative of {} reads it",
                site.op
            ),
        })
    }
}
