//! Functionalization: a graph without mutation that computes the same values.
//!
//! Follows PyTorch's functionalization pass. Every tensor value belongs to a *storage*
//! (a graph input, a module constant, or a fresh op result); views are recorded as a
//! chain of view ops from their storage. Then:
//! - an op that writes an argument (per its schema, `Tensor(a!)`) becomes its out-of-place
//!   form (`relu_` → `relu`, `copy_` → `copy`, `add.out` → `add.Tensor`,
//!   `_native_batch_norm_legit` → `_native_batch_norm_legit_functional`), and its result
//!   becomes the storage's new value;
//! - a write into a view is applied to its storage by the view's inverse
//!   (`select_scatter`, `slice_scatter`, `diagonal_scatter`, `as_strided_scatter`, or
//!   the inverse view for `t`, `transpose`, `permute`, `unsqueeze`, `squeeze`, `view`);
//! - later readers of a storage or of any of its views read the new value, views being
//!   regenerated from the new storage value by replaying their view chain;
//! - the new values of mutated graph inputs become the first graph outputs, in input
//!   order, as AOTAutograd returns them for the caller to write back.
//!
//! `native_batch_norm` with `training=True` updates its running statistics although its
//! schema does not say so; it becomes `_native_batch_norm_legit_functional`, as
//! AOTAutograd traces it.
//!
//! In-place ops are matched to their out-of-place forms by schema, whatever the overload
//! is named (`bernoulli_.float` → `bernoulli.p`, `normal_` → `normal_functional`). An op
//! that changes only its input's metadata (`transpose_`, `unsqueeze_`, `t_`, `as_strided_`)
//! makes the tensor a view of itself, as in PyTorch: later readers read
//! `transpose(x, 0, 1)`. `resize_` of a tensor the graph made becomes `resize`.
//!
//! Refused with [`AutodiffError::Unsupported`] naming the node: mutation of a module
//! constant, an in-place op with no out-of-place form, ops changing a graph input's size,
//! storage or metadata (`resize_`, `set_`, `t_`, `unsqueeze_`, ...), writes through views with no
//! inverse (`expand`, `unfold`, `chunk` items, ...), and ops with no schema. A `reshape`
//! is taken to alias its input when that input is reached from its storage through
//! contiguity-keeping views only, and to copy it otherwise. Dead nodes stay: a graph
//! without mutation comes back unchanged.

use std::collections::HashMap;
use std::sync::Arc;

use graphbug_ir::schema::{verify_calls, Argument, Schema, Schemas};
use graphbug_ir::{Graph, Meta, Namespace, Node, NodeId, NodeKind, OpName, TensorMeta, Value};

use crate::error::AutodiffError;

/// A graph without mutation, and which of its inputs the original mutated.
#[derive(Clone, Debug, PartialEq)]
pub struct Functionalized {
    /// The functional graph: outputs are the new values of the mutated inputs (in input order), then the original outputs.
    pub graph: Graph,
    /// Placeholder positions (indices among the inputs) of the mutated inputs, ascending.
    pub mutated_inputs: Vec<usize>,
}

/// Removes mutation from `graph` using op schemas (not a list of names).
pub fn functionalize(
    graph: &Graph,
    schemas: &dyn Schemas,
) -> Result<Functionalized, AutodiffError> {
    graph.verify()?;
    let rebound = rebind_metadata_mutations(graph, schemas)?;
    let graph = rebound.as_ref().unwrap_or(graph);
    let mut f = Functionalizer::new(graph, schemas);
    for id in graph.ids() {
        f.visit(id)?;
    }
    f.finish()
}

/// The view op an in-place op that changes only its input's metadata (`transpose_`,
/// `unsqueeze_`, `as_strided_`, ...) stands for: the out-of-place form, found by name and
/// arguments, that returns a view of `self`. `None` for every other op.
fn metadata_view(op: &OpName, schema: &Schema, schemas: &dyn Schemas) -> Option<OpName> {
    if schema.mutated_arguments() != [0] || RESIZES.contains(&op.name.as_str()) {
        return None;
    }
    let base = op.name.strip_suffix('_').filter(|b| !b.is_empty())?;
    let want: Vec<(&str, &str)> = schema
        .arguments
        .iter()
        .map(|a| (a.name.as_str(), a.ty.as_str()))
        .collect();
    let mut overloads = vec![op.overload.clone()];
    overloads.extend(schemas.overloads(&op.namespace, base));
    overloads.into_iter().find_map(|o| {
        let cand = OpName::new(&op.namespace, base, &o);
        let fs = schemas.schema(&cand)?;
        let args: Vec<(&str, &str)> = fs
            .arguments
            .iter()
            .map(|a| (a.name.as_str(), a.ty.as_str()))
            .collect();
        let returns_view = !fs.is_mutable
            && fs.returns.len() == 1
            && fs.returns[0].alias_set == fs.arguments[0].alias_set
            && !fs.returns[0].alias_set.is_empty();
        (args == want && returns_view).then_some(cand)
    })
}

/// PyTorch's functionalization treats `x.transpose_(0, 1)` as `x = x.transpose(0, 1)`:
/// the tensor keeps its data and becomes a view with new metadata. This rewrites every
/// such op into its view form and makes later readers of `x` (and of in-place returns that
/// are `x`) read the view. `None` when the graph has no such op.
fn rebind_metadata_mutations(
    graph: &Graph,
    schemas: &dyn Schemas,
) -> Result<Option<Graph>, AutodiffError> {
    let views: Vec<Option<OpName>> = graph
        .nodes
        .iter()
        .map(|n| {
            let op = n.op().filter(|op| op.name.ends_with('_'))?;
            let schema = schemas.schema(op).filter(|s| s.is_mutable)?;
            metadata_view(op, &schema, schemas)
        })
        .collect();
    if views.iter().all(Option::is_none) {
        return Ok(None);
    }
    let mut g = graph.clone();
    // Each node's tensor identity: in-place ops return their first argument.
    let mut ident: Vec<NodeId> = graph.ids().collect();
    // Identity → the node that now holds it.
    let mut holder: HashMap<NodeId, NodeId> = HashMap::new();
    for id in graph.ids() {
        let node = graph.node(id);
        let read = |src: NodeId| holder.get(&ident[src.index()]).copied().unwrap_or(src);
        g.nodes[id.index()].kind = node
            .try_remap_kind::<()>(&mut |src| Ok(read(src)))
            .expect("remapping node ids cannot fail");
        let NodeKind::Call { op, args, .. } = &node.kind else {
            continue;
        };
        let Some(x) = args.first().and_then(Value::as_node) else {
            continue;
        };
        let returns_self = schemas.schema(op).is_some_and(|s| {
            s.arguments.first().is_some_and(|a| a.is_write)
                && s.returns.len() == 1
                && s.returns[0].alias_set == s.arguments[0].alias_set
        });
        if !returns_self {
            continue;
        }
        let key = ident[x.index()];
        ident[id.index()] = key;
        if let Some(view) = &views[id.index()] {
            if graph.node(key).is_placeholder() {
                return Err(AutodiffError::Unsupported {
                    node: node.name.to_string(),
                    op: op.to_string(),
                    message: format!(
                        "changes the metadata of graph input `{}` in place, which functionalization cannot express",
                        graph.node(key).name
                    ),
                });
            }
            let unsupported = |message: String| AutodiffError::Unsupported {
                node: node.name.to_string(),
                op: op.to_string(),
                message,
            };
            let (Some(from), Some(to)) = (schemas.schema(op), schemas.schema(view)) else {
                return Err(unsupported(format!("no schema for `{op}` or `{view}`")));
            };
            if let NodeKind::Call { op, args, kwargs } = &mut g.nodes[id.index()].kind {
                // Bound by name, defaults the view op does not share written out.
                let (a, k) = from
                    .rebind_call(&to, args, kwargs, &[])
                    .map_err(|m| unsupported(format!("as `{view}`: {m}")))?;
                (*op, *args, *kwargs) = (view.clone(), a, k);
            }
            holder.insert(key, id);
        }
    }
    if let Some(outputs) = g.output.take() {
        g.output = Some(
            outputs
                .iter()
                .map(|v| {
                    v.map_nodes(&mut |src| {
                        Value::Node(holder.get(&ident[src.index()]).copied().unwrap_or(src))
                    })
                })
                .collect(),
        );
    }
    Ok(Some(g))
}

/// Ops that mutate what a tensor *is* (its size or storage), not its values.
const METADATA_MUTATIONS: [&str; 4] = [
    "set_",
    "resize_as_sparse_",
    "_resize_output_",
    "sparse_resize_",
];

/// Resizes that become their functional form (`resize`, `resize_as`) when they resize a
/// tensor the graph made (not a view of one): its new value is the resized tensor.
const RESIZES: [&str; 2] = ["resize_", "resize_as_"];

/// View ops whose replay and inverse keep a contiguous tensor contiguous: a `reshape` of
/// a value reached from its storage through these only is a view, not a copy.
const CONTIGUOUS_VIEWS: [&str; 9] = [
    "view",
    "_unsafe_view",
    "reshape",
    "_reshape_alias",
    "view_as",
    "alias",
    "detach",
    "unsqueeze",
    "squeeze",
];

/// Where a storage comes from.
#[derive(Clone, Debug, PartialEq)]
enum Origin {
    /// Graph input at this placeholder position.
    Input(usize),
    /// A module constant (`self.<target>`).
    Constant(String),
    /// A value the graph computes.
    Intermediate,
}

/// The memory a tensor lives in, and its current (functional) value.
#[derive(Clone, Debug)]
struct Storage {
    /// The node in the new graph holding the storage's current value.
    value: NodeId,
    /// Bumped at every write.
    version: u32,
    origin: Origin,
    /// The old node that created it (for messages).
    root: NodeId,
}

/// How a view is computed from its parent.
#[derive(Clone, Copy, Debug)]
enum Step {
    /// The same tensor (an in-place op's return, a duplicate getitem).
    Identity,
    /// Old call node `node`, a view op reading its parent as argument `arg`.
    View { node: NodeId, arg: usize },
    /// Item `index` of old node `list`, a view op returning `Tensor(a)[]` (split, unbind).
    Item { list: NodeId, index: usize },
}

/// A view's parent (an old node) and the step from it.
#[derive(Clone, Copy, Debug)]
struct Link {
    parent: NodeId,
    step: Step,
}

/// How a getitem of a multi-output node resolves.
#[derive(Clone, Copy, Debug)]
enum Item {
    /// Output `index` of the new node; `tensor` when it is a tensor.
    Fresh { index: usize, tensor: bool },
    /// The same tensor as this old node (an output aliasing a written argument).
    Alias(NodeId),
}

/// What is known about an old node's value.
#[derive(Clone, Debug)]
enum Info {
    /// Not visited yet.
    Pending,
    /// Not a tracked tensor (a non-tensor result): read through `new_id`.
    Other,
    /// A tensor in `storage`; `link` is set for views.
    Tensor { storage: usize, link: Option<Link> },
    /// A multi-output node; getitems resolve through `items`, or, for a fresh `Tensor[]`
    /// result (`list`), each item is a fresh tensor.
    Multi { items: Vec<Item>, list: bool },
    /// A view op returning a list of views of its argument `arg` (read from `parent`).
    ListView { parent: NodeId, arg: usize },
}

/// How a mutating op becomes functional.
struct Plan {
    /// The out-of-place op.
    target: OpName,
    /// Schema indices of the written arguments, in order.
    written: Vec<usize>,
    /// For each written argument, the functional op's output holding its new value.
    slots: Vec<usize>,
    /// For each return of the original op, the written argument (position in `written`)
    /// it aliases.
    ret_alias: Vec<Option<usize>>,
    /// Keyword arguments to drop (`out=`).
    drop_kwargs: Vec<String>,
    /// The out-of-place op's schema.
    schema: Arc<Schema>,
}

struct Functionalizer<'a> {
    old: &'a Graph,
    schemas: &'a dyn Schemas,
    nodes: Vec<Node>,
    names: Namespace,
    /// Old node → its counterpart in the new graph, where it has one.
    new_id: Vec<Option<NodeId>>,
    info: Vec<Info>,
    storages: Vec<Storage>,
    /// For views and list views: their value in the new graph at a storage version.
    cache: Vec<Option<(NodeId, u32)>>,
    /// First getitem of each (source, index), so duplicates alias it.
    first_item: HashMap<(NodeId, usize), NodeId>,
    inputs_seen: usize,
    /// Writes of the last mutating op, carried out before the next node that is not one
    /// of its getitems.
    pending: Option<Pending>,
}

/// The writes of a mutating op, waiting for its getitems to be placed.
struct Pending {
    /// The old mutating node.
    source: NodeId,
    /// Its out-of-place replacement.
    func: NodeId,
    /// Each written old tensor, and the output of `func` (with meta) holding its new
    /// value, or `None` when `func` itself is the new value.
    writes: Vec<(NodeId, Option<(usize, Meta)>)>,
    ctx: Ctx,
}

/// Where an error happens: the node and its op.
#[derive(Clone)]
struct Ctx {
    node: String,
    op: String,
}

impl Ctx {
    fn unsupported(&self, message: impl Into<String>) -> AutodiffError {
        AutodiffError::Unsupported {
            node: self.node.clone(),
            op: self.op.clone(),
            message: message.into(),
        }
    }
}

impl<'a> Functionalizer<'a> {
    fn new(old: &'a Graph, schemas: &'a dyn Schemas) -> Self {
        let mut names = Namespace::new();
        for n in &old.nodes {
            names.reserve(&n.name);
        }
        let n = old.nodes.len();
        Functionalizer {
            old,
            schemas,
            nodes: Vec::with_capacity(n),
            names,
            new_id: vec![None; n],
            info: vec![Info::Pending; n],
            storages: Vec::new(),
            cache: vec![None; n],
            first_item: HashMap::new(),
            inputs_seen: 0,
            pending: None,
        }
    }

    fn ctx(&self, id: NodeId) -> Ctx {
        let node = self.old.node(id);
        let op = match &node.kind {
            NodeKind::Call { op, .. } => op.to_string(),
            NodeKind::Placeholder => "placeholder".into(),
            NodeKind::GetItem { .. } => "getitem".into(),
            NodeKind::GetAttr { target } => format!("get_attr self.{target}"),
        };
        Ctx {
            node: node.name.to_string(),
            op,
        }
    }

    fn push(&mut self, node: Node) -> NodeId {
        let id = NodeId(self.nodes.len() as u32);
        self.nodes.push(node);
        id
    }

    /// Adds a node named after `hint` the FX way.
    fn push_named(&mut self, hint: &str, kind: NodeKind, meta: Meta) -> NodeId {
        let name = self.names.create_name(hint);
        self.push(Node {
            name: name.into(),
            kind,
            meta,
        })
    }

    fn new_storage(&mut self, root: NodeId, value: NodeId, origin: Origin) -> usize {
        self.storages.push(Storage {
            value,
            version: 0,
            origin,
            root,
        });
        self.storages.len() - 1
    }

    fn old_meta(&self, id: NodeId) -> Option<TensorMeta> {
        self.old.node(id).meta.tensor().cloned()
    }

    fn schema(&self, op: &OpName, ctx: &Ctx) -> Result<Arc<Schema>, AutodiffError> {
        self.schemas.schema(op).ok_or_else(|| {
            ctx.unsupported(format!(
                "no schema for op `{op}`, so whether it mutates or aliases is unknown"
            ))
        })
    }

    /// Checks through the schemas that an op the pass emits exists.
    fn require(&self, op: &OpName, ctx: &Ctx) -> Result<Arc<Schema>, AutodiffError> {
        self.schemas.schema(op).ok_or_else(|| {
            ctx.unsupported(format!(
                "functionalizing it needs `{op}`, which is not a known op"
            ))
        })
    }

    // ------------------------------------------------------------------ visiting

    fn visit(&mut self, id: NodeId) -> Result<(), AutodiffError> {
        let node = self.old.node(id);
        let own_getitem = matches!(
            (&node.kind, &self.pending),
            (NodeKind::GetItem { source, .. }, Some(p)) if *source == p.source
        );
        if !own_getitem {
            self.flush()?;
        }
        match &node.kind {
            NodeKind::Placeholder => {
                let new = self.push(node.clone());
                self.new_id[id.index()] = Some(new);
                let s = self.new_storage(id, new, Origin::Input(self.inputs_seen));
                self.inputs_seen += 1;
                self.info[id.index()] = Info::Tensor {
                    storage: s,
                    link: None,
                };
            }
            NodeKind::GetAttr { target } => {
                let new = self.push(node.clone());
                self.new_id[id.index()] = Some(new);
                let s = self.new_storage(id, new, Origin::Constant(target.clone()));
                self.info[id.index()] = Info::Tensor {
                    storage: s,
                    link: None,
                };
            }
            NodeKind::GetItem { source, index } => self.visit_getitem(id, *source, *index)?,
            NodeKind::Call { op, args, kwargs } => self.visit_call(id, op, args, kwargs)?,
        }
        Ok(())
    }

    fn visit_getitem(
        &mut self,
        id: NodeId,
        source: NodeId,
        index: usize,
    ) -> Result<(), AutodiffError> {
        let node = self.old.node(id);
        match self.info[source.index()].clone() {
            Info::Multi { items, list } => {
                match items.get(index).copied().or(list.then_some(Item::Fresh {
                    index,
                    tensor: true,
                })) {
                    Some(Item::Fresh { index: k, tensor }) => {
                        let src = self.mapped(source)?;
                        let new = self.push(Node {
                            name: node.name.clone(),
                            kind: NodeKind::GetItem {
                                source: src,
                                index: k,
                            },
                            meta: node.meta.clone(),
                        });
                        self.new_id[id.index()] = Some(new);
                        let first = self.first_item.get(&(source, index)).copied();
                        self.info[id.index()] = match (tensor, first) {
                            (false, _) => Info::Other,
                            (true, None) => {
                                self.first_item.insert((source, index), id);
                                let s = self.new_storage(id, new, Origin::Intermediate);
                                Info::Tensor {
                                    storage: s,
                                    link: None,
                                }
                            }
                            // A second getitem of the same output is the same tensor; its
                            // copy holds the value only while that was never written.
                            (true, Some(first)) => {
                                let storage = self.storage_of(first, &self.ctx(id))?;
                                if self.storages[storage].version == 0 {
                                    self.cache[id.index()] = Some((new, 0));
                                }
                                Info::Tensor {
                                    storage,
                                    link: Some(Link {
                                        parent: first,
                                        step: Step::Identity,
                                    }),
                                }
                            }
                        };
                    }
                    Some(Item::Alias(arg)) => {
                        let storage = self.storage_of(arg, &self.ctx(id))?;
                        self.info[id.index()] = Info::Tensor {
                            storage,
                            link: Some(Link {
                                parent: self.unalias(arg),
                                step: Step::Identity,
                            }),
                        };
                    }
                    None => {
                        return Err(self.ctx(id).unsupported(format!(
                            "reads output {index} of `{}`, which has {} outputs",
                            self.old.node(source).name,
                            items.len()
                        )))
                    }
                }
            }
            Info::ListView { parent, .. } => {
                let storage = self.storage_of(parent, &self.ctx(id))?;
                let list = self.list_value(source)?;
                let new = self.push(Node {
                    name: node.name.clone(),
                    kind: NodeKind::GetItem {
                        source: list,
                        index,
                    },
                    meta: node.meta.clone(),
                });
                self.new_id[id.index()] = Some(new);
                self.cache[id.index()] = Some((new, self.storages[storage].version));
                self.info[id.index()] = Info::Tensor {
                    storage,
                    link: Some(Link {
                        parent,
                        step: Step::Item {
                            list: source,
                            index,
                        },
                    }),
                };
            }
            _ => {
                let src = self.mapped(source)?;
                let new = self.push(Node {
                    name: node.name.clone(),
                    kind: NodeKind::GetItem { source: src, index },
                    meta: node.meta.clone(),
                });
                self.new_id[id.index()] = Some(new);
                self.info[id.index()] = Info::Other;
            }
        }
        Ok(())
    }

    fn visit_call(
        &mut self,
        id: NodeId,
        op: &OpName,
        args: &[Value],
        kwargs: &[(String, Value)],
    ) -> Result<(), AutodiffError> {
        let ctx = self.ctx(id);
        let schema = if op.is_effectful() {
            self.effects_schema(args, &ctx)?
        } else {
            self.schema(op, &ctx)?
        };
        if let Some(plan) = self.plan(op, &schema, args, kwargs, &ctx)? {
            return self.visit_mutation(id, &schema, plan, args, kwargs, &ctx);
        }
        // A functional op: copy it, reading the current values of its inputs.
        let node = self.old.node(id);
        let kind = self.remap_kind(&node.kind)?;
        let new = self.push(Node {
            name: node.name.clone(),
            kind,
            meta: node.meta.clone(),
        });
        self.new_id[id.index()] = Some(new);
        self.info[id.index()] = match view_arg(op, &schema) {
            Some((arg, false)) => {
                match bound(&schema, args, kwargs, arg).and_then(Value::as_node) {
                    Some(parent) if self.is_tensor(parent) && self.aliases(op, parent) => {
                        let storage = self.storage_of(parent, &ctx)?;
                        self.cache[id.index()] = Some((new, self.storages[storage].version));
                        Info::Tensor {
                            storage,
                            link: Some(Link {
                                parent,
                                step: Step::View { node: id, arg },
                            }),
                        }
                    }
                    _ => self.fresh_info(id, new, &schema),
                }
            }
            Some((arg, true)) => match bound(&schema, args, kwargs, arg).and_then(Value::as_node) {
                Some(parent) if self.is_tensor(parent) => {
                    let storage = self.storage_of(parent, &ctx)?;
                    self.cache[id.index()] = Some((new, self.storages[storage].version));
                    Info::ListView { parent, arg }
                }
                _ => self.fresh_info(id, new, &schema),
            },
            None => self.fresh_info(id, new, &schema),
        };
        Ok(())
    }

    /// The schema `with_effects(token, op, *args)` has for `op`: the token, then `op`'s
    /// results. An op that writes its arguments is refused: the token orders it, but its
    /// writes would still need functionalizing.
    fn effects_schema(&self, args: &[Value], ctx: &Ctx) -> Result<Arc<Schema>, AutodiffError> {
        let Some(Value::Op(inner)) = args.get(1) else {
            return Err(ctx.unsupported("expected `with_effects(token, torch.ops.<op>, *args)`"));
        };
        let inner_schema = self.schema(inner, ctx)?;
        if inner_schema.is_mutable {
            return Err(ctx.unsupported(format!(
                "orders `{inner}`, which writes its arguments; functionalizing that is not supported"
            )));
        }
        let token = Argument {
            ty: "Tensor".into(),
            ..Argument::default()
        };
        let mut returns = vec![token];
        returns.extend(inner_schema.returns.iter().cloned());
        Ok(Arc::new(Schema {
            name: "higher_order::with_effects".into(),
            returns,
            ..Schema::default()
        }))
    }

    /// The info of a call node producing new values.
    fn fresh_info(&mut self, id: NodeId, new: NodeId, schema: &Schema) -> Info {
        match schema.returns.as_slice() {
            [r] if is_tensor_type(&r.ty) => {
                let s = self.new_storage(id, new, Origin::Intermediate);
                Info::Tensor {
                    storage: s,
                    link: None,
                }
            }
            [r] if is_tensor_list_type(&r.ty) => Info::Multi {
                items: Vec::new(),
                list: true,
            },
            rets if rets.len() > 1 => Info::Multi {
                items: rets
                    .iter()
                    .enumerate()
                    .map(|(j, r)| Item::Fresh {
                        index: j,
                        tensor: is_tensor_type(&r.ty),
                    })
                    .collect(),
                list: false,
            },
            _ => Info::Other,
        }
    }

    /// Whether a `reshape` of `parent` aliases it: only when `parent` is reached from its
    /// storage through views that keep a contiguous tensor contiguous. Other view ops
    /// always alias.
    fn aliases(&self, op: &OpName, parent: NodeId) -> bool {
        if op.name != "reshape" {
            return true;
        }
        let mut cur = parent;
        loop {
            match &self.info[cur.index()] {
                Info::Tensor {
                    link: Some(link), ..
                } => {
                    match link.step {
                        Step::Identity => {}
                        Step::View { node, .. } => {
                            let name = self.old.node(node).op().map(|o| o.name.as_str());
                            if !name.is_some_and(|n| CONTIGUOUS_VIEWS.contains(&n)) {
                                return false;
                            }
                        }
                        Step::Item { .. } => return false,
                    }
                    cur = link.parent;
                }
                _ => return true,
            }
        }
    }

    /// `t`, or the tensor it is another name of, so alias chains stay one link long
    /// (a long run of in-place ops on each other's results never nests).
    fn unalias(&self, mut t: NodeId) -> NodeId {
        while let Info::Tensor {
            link:
                Some(Link {
                    parent,
                    step: Step::Identity,
                }),
            ..
        } = self.info[t.index()]
        {
            t = parent;
        }
        t
    }

    fn is_tensor(&self, id: NodeId) -> bool {
        matches!(self.info[id.index()], Info::Tensor { .. })
    }

    fn storage_of(&self, id: NodeId, ctx: &Ctx) -> Result<usize, AutodiffError> {
        match self.info[id.index()] {
            Info::Tensor { storage, .. } => Ok(storage),
            _ => Err(ctx.unsupported(format!(
                "`{}` is not a single tensor",
                self.old.node(id).name
            ))),
        }
    }

    /// The new node of an old node with a direct counterpart (multi-output nodes, non-tensors).
    fn mapped(&self, id: NodeId) -> Result<NodeId, AutodiffError> {
        self.new_id[id.index()].ok_or_else(|| {
            let node = &self.old.node(id).name;
            AutodiffError::Unsupported {
                node: node.to_string(),
                op: "getitem".into(),
                message: format!("`{node}` has no functional counterpart to read"),
            }
        })
    }

    /// A copy of `kind` reading the current values of its inputs.
    fn remap_kind(&mut self, kind: &NodeKind) -> Result<NodeKind, AutodiffError> {
        let probe = Node {
            name: Default::default(),
            kind: kind.clone(),
            meta: Meta::Unknown,
        };
        let mut map = Vec::new();
        for src in probe.inputs() {
            let new = self.read(src)?;
            map.push((src, new));
        }
        probe.try_remap_kind::<AutodiffError>(&mut |src| {
            Ok(map
                .iter()
                .find(|(o, _)| *o == src)
                .map(|(_, n)| *n)
                .expect("every input was read just above"))
        })
    }

    /// A copy of `v` reading current values.
    fn remap_value(&mut self, v: &Value) -> Result<Value, AutodiffError> {
        let mut srcs = Vec::new();
        v.for_each_node(&mut |n| srcs.push(n));
        let mut map = Vec::with_capacity(srcs.len());
        for s in srcs {
            let new = self.read(s)?;
            map.push((s, new));
        }
        Ok(v.map_nodes(&mut |n| {
            Value::Node(
                map.iter()
                    .find(|(o, _)| *o == n)
                    .map(|(_, x)| *x)
                    .expect("every node of the value was read just above"),
            )
        }))
    }

    // ------------------------------------------------------------------ reading

    /// The current value of old node `id` in the new graph, regenerating views of storages
    /// written since they were computed.
    fn read(&mut self, id: NodeId) -> Result<NodeId, AutodiffError> {
        let storage = match self.info[id.index()] {
            Info::Tensor { storage, .. } => storage,
            Info::ListView { .. } => return self.list_value(id),
            Info::Multi { .. } | Info::Other => return self.mapped(id),
            Info::Pending => return Err(self.ctx(id).unsupported("is read before it is computed")),
        };
        // Up the view chain to the storage or to a view still current (iteratively, so
        // deep chains cannot exhaust the stack), then replay the views down from there.
        let version = self.storages[storage].version;
        let mut stale: Vec<(NodeId, Link)> = Vec::new();
        let mut cur = id;
        let mut value = loop {
            match self.info[cur.index()] {
                Info::Tensor {
                    storage,
                    link: None,
                } => break self.storages[storage].value,
                Info::Tensor {
                    link: Some(link), ..
                } => {
                    if let Some((v, ver)) = self.cache[cur.index()] {
                        if ver == version {
                            break v;
                        }
                    }
                    stale.push((cur, link));
                    cur = link.parent;
                }
                _ => return self.mapped(cur),
            }
        };
        while let Some((node, link)) = stale.pop() {
            value = match link.step {
                Step::Identity => value,
                Step::View { node: view, arg } => self.replay(view, arg, value)?,
                Step::Item { list, index } => {
                    let lv = self.list_value(list)?;
                    self.push_named(
                        "getitem",
                        NodeKind::GetItem { source: lv, index },
                        self.old.node(node).meta.clone(),
                    )
                }
            };
            self.cache[node.index()] = Some((value, version));
        }
        Ok(value)
    }

    /// The current value of a list view (a `split` node), replayed when stale.
    fn list_value(&mut self, list: NodeId) -> Result<NodeId, AutodiffError> {
        let Info::ListView { parent, arg } = self.info[list.index()] else {
            return self.mapped(list);
        };
        let storage = self.storage_of(parent, &self.ctx(list))?;
        let version = self.storages[storage].version;
        if let Some((v, ver)) = self.cache[list.index()] {
            if ver == version {
                return Ok(v);
            }
        }
        let p = self.read(parent)?;
        let v = self.replay(list, arg, p)?;
        self.cache[list.index()] = Some((v, version));
        Ok(v)
    }

    /// Emits old view node `view` again, reading `parent` as its argument `arg`.
    fn replay(
        &mut self,
        view: NodeId,
        arg: usize,
        parent: NodeId,
    ) -> Result<NodeId, AutodiffError> {
        let node = self.old.node(view);
        let NodeKind::Call { op, args, kwargs } = &node.kind else {
            return self.mapped(view);
        };
        let ctx = self.ctx(view);
        let schema = self.schema(op, &ctx)?;
        let mut new_args = Vec::with_capacity(args.len());
        for (i, a) in args.iter().enumerate() {
            new_args.push(if i == arg {
                Value::Node(parent)
            } else {
                self.remap_value(a)?
            });
        }
        let mut new_kwargs = Vec::with_capacity(kwargs.len());
        for (k, v) in kwargs {
            let is_arg = schema.arguments.get(arg).is_some_and(|a| &a.name == k);
            new_kwargs.push((
                k.clone(),
                if is_arg {
                    Value::Node(parent)
                } else {
                    self.remap_value(v)?
                },
            ));
        }
        Ok(self.push_named(
            &op.name,
            NodeKind::Call {
                op: op.clone(),
                args: new_args,
                kwargs: new_kwargs,
            },
            node.meta.clone(),
        ))
    }

    // ------------------------------------------------------------------ mutation

    /// How op node `id` becomes functional, or `None` when it mutates nothing.
    fn plan(
        &self,
        op: &OpName,
        schema: &Arc<Schema>,
        args: &[Value],
        kwargs: &[(String, Value)],
        ctx: &Ctx,
    ) -> Result<Option<Plan>, AutodiffError> {
        if op.namespace == "aten" && op.name == "native_batch_norm" && op.overload == "default" {
            return self.plan_batch_norm(schema, args, kwargs, ctx);
        }
        let written = schema.mutated_arguments();
        if written.is_empty() {
            return Ok(None);
        }
        if METADATA_MUTATIONS.contains(&op.name.as_str()) {
            return Err(ctx.unsupported(
                "changes the size or storage of a tensor in place, which functionalization cannot express",
            ));
        }
        if RESIZES.contains(&op.name.as_str()) {
            let fresh = args.first().and_then(Value::as_node).is_some_and(|x| {
                matches!(&self.info[x.index()], Info::Tensor { storage, link: None }
                    if matches!(self.storages[*storage].origin, Origin::Intermediate))
            });
            if !fresh {
                return Err(ctx.unsupported(
                    "changes the size or storage of a graph input or of a view in place, which functionalization cannot express",
                ));
            }
        }
        let is_out = written.iter().all(|&i| schema.arguments[i].kwarg_only);
        let candidates: Vec<OpName> = if is_out {
            out_overload_candidates(&op.overload)
                .into_iter()
                .map(|o| OpName::new(&op.namespace, &op.name, &o))
                .collect()
        } else if let Some(base) = op
            .name
            .strip_suffix('_')
            .filter(|b| !b.is_empty() && !op.name.starts_with("__"))
        {
            let mut c = vec![
                OpName::new(&op.namespace, base, &op.overload),
                OpName::new(&op.namespace, &format!("{base}_functional"), &op.overload),
            ];
            if op.overload != "default" {
                // `floor_divide_.Tensor` → `floor_divide.default`, checked by argument names.
                c.push(OpName::new(&op.namespace, base, "default"));
            }
            // Any other overload with the same arguments, whatever it is named
            // (`bernoulli_.float` → `bernoulli.p`).
            for o in self.schemas.overloads(&op.namespace, base) {
                let cand = OpName::new(&op.namespace, base, &o);
                if !c.contains(&cand) {
                    c.push(cand);
                }
            }
            c
        } else {
            vec![OpName::new(
                &op.namespace,
                &format!("{}_functional", op.name),
                &op.overload,
            )]
        };
        // Names and types: `bernoulli.Tensor` and `bernoulli.p` both take `(self, p)`.
        let expected_args: Vec<(&str, &str)> = schema
            .arguments
            .iter()
            .enumerate()
            .filter(|(i, _)| !(is_out && written.contains(i)))
            .map(|(_, a)| (a.name.as_str(), a.ty.as_str()))
            .collect();
        let ret_alias: Vec<Option<usize>> = schema
            .returns
            .iter()
            .map(|r| {
                written
                    .iter()
                    .position(|&w| shares_alias_set(r, &schema.arguments[w]))
            })
            .collect();
        let mut tried = Vec::new();
        for cand in candidates {
            let Some(fs) = self.schemas.schema(&cand) else {
                tried.push(format!("`{cand}`"));
                continue;
            };
            let names: Vec<(&str, &str)> = fs
                .arguments
                .iter()
                .map(|a| (a.name.as_str(), a.ty.as_str()))
                .collect();
            if names != expected_args {
                tried.push(format!("`{cand}` (other arguments)"));
                continue;
            }
            if fs.is_mutable
                || fs
                    .returns
                    .iter()
                    .any(|r| !r.alias_set.is_empty() || !r.contained_alias_set.is_empty())
            {
                return Err(ctx.unsupported(format!(
                    "its out-of-place form `{cand}` returns a view: the op changes the metadata of its input in place, which functionalization cannot express"
                )));
            }
            let mut slots = Vec::with_capacity(written.len());
            let mut next = schema.returns.len();
            for k in 0..written.len() {
                match ret_alias.iter().position(|a| *a == Some(k)) {
                    Some(j) => slots.push(j),
                    None => {
                        slots.push(next);
                        next += 1;
                    }
                }
            }
            if fs.returns.len() != next {
                tried.push(format!(
                    "`{cand}` ({} outputs, {next} needed)",
                    fs.returns.len()
                ));
                continue;
            }
            let lists = written
                .iter()
                .filter(|&&w| is_tensor_list_type(&schema.arguments[w].ty))
                .count();
            if lists > 0
                && !(written.len() == 1
                    && fs.returns.len() == 1
                    && is_tensor_list_type(&fs.returns[0].ty))
            {
                return Err(ctx.unsupported(format!(
                    "writes a tensor list; only a single written list whose out-of-place form `{cand}` returns one list is supported"
                )));
            }
            let mut drop_kwargs = Vec::new();
            if is_out {
                for &w in &written {
                    if w < args.len() {
                        return Err(ctx.unsupported(format!(
                            "passes its output `{}` positionally",
                            schema.arguments[w].name
                        )));
                    }
                    drop_kwargs.push(schema.arguments[w].name.clone());
                }
            }
            return Ok(Some(Plan {
                target: cand,
                written,
                slots,
                ret_alias,
                drop_kwargs,
                schema: fs,
            }));
        }
        Err(ctx.unsupported(format!(
            "mutates its input{} but has no out-of-place form: tried {}",
            if written.len() > 1 { "s" } else { "" },
            tried.join(", ")
        )))
    }

    /// `native_batch_norm(input, w, b, running_mean, running_var, training, momentum, eps)`
    /// updates the running statistics in training mode although its schema does not say
    /// so; AOTAutograd traces it as `_native_batch_norm_legit_functional`.
    fn plan_batch_norm(
        &self,
        schema: &Arc<Schema>,
        args: &[Value],
        kwargs: &[(String, Value)],
        ctx: &Ctx,
    ) -> Result<Option<Plan>, AutodiffError> {
        let arg = |name: &str| {
            schema
                .arguments
                .iter()
                .position(|a| a.name == name)
                .and_then(|i| bound(schema, args, kwargs, i).map(|v| (i, v)))
        };
        let training = match arg("training") {
            Some((_, Value::Bool(b))) => *b,
            _ => {
                return Err(ctx.unsupported(
                    "`training` must be a literal bool to tell whether the running statistics are updated",
                ))
            }
        };
        let mean = arg("running_mean").filter(|(_, v)| !matches!(v, Value::None));
        let var = arg("running_var").filter(|(_, v)| !matches!(v, Value::None));
        if !training {
            return Ok(None);
        }
        let (mean, var) = match (mean, var) {
            (None, None) => return Ok(None),
            (Some(m), Some(v)) => (m.0, v.0),
            _ => return Err(ctx.unsupported(
                "updates only one of running_mean and running_var; both or neither are supported",
            )),
        };
        let target = OpName::aten("_native_batch_norm_legit_functional", "default");
        let fs = self.require(&target, ctx)?;
        let n = schema.returns.len();
        if fs.returns.len() != n + 2 {
            return Err(ctx.unsupported(format!(
                "`{target}` has {} outputs, {} expected",
                fs.returns.len(),
                n + 2
            )));
        }
        Ok(Some(Plan {
            target,
            written: vec![mean, var],
            slots: vec![n, n + 1],
            ret_alias: vec![None; n],
            drop_kwargs: Vec::new(),
            schema: fs,
        }))
    }

    fn visit_mutation(
        &mut self,
        id: NodeId,
        schema: &Arc<Schema>,
        plan: Plan,
        args: &[Value],
        kwargs: &[(String, Value)],
        ctx: &Ctx,
    ) -> Result<(), AutodiffError> {
        let node = self.old.node(id);
        // The old tensors each written argument names.
        let mut targets: Vec<Vec<NodeId>> = Vec::with_capacity(plan.written.len());
        for &w in &plan.written {
            let a = &schema.arguments[w];
            let mut ids = Vec::new();
            match bound(schema, args, kwargs, w) {
                None | Some(Value::None) => {}
                Some(Value::Node(n)) => ids.push(*n),
                Some(Value::List(items)) | Some(Value::Tuple(items)) => {
                    for it in items {
                        match it {
                            Value::Node(n) => ids.push(*n),
                            Value::None => {}
                            other => {
                                return Err(ctx.unsupported(format!(
                                    "writes argument `{}`, which holds the constant {other:?}",
                                    a.name
                                )))
                            }
                        }
                    }
                }
                Some(other) => {
                    return Err(ctx.unsupported(format!(
                        "writes argument `{}`, which is the constant {other:?}, not a tensor",
                        a.name
                    )))
                }
            }
            for &t in &ids {
                let storage = self.storage_of(t, ctx)?;
                if let Origin::Constant(target) = &self.storages[storage].origin {
                    let via = if self.storages[storage].root == t {
                        String::new()
                    } else {
                        format!(" (through `{}`)", self.old.node(t).name)
                    };
                    return Err(ctx.unsupported(format!(
                        "mutates the module constant `self.{target}`{via}; only graph inputs and computed values can be mutated"
                    )));
                }
                self.check_invertible(t, ctx)?;
            }
            targets.push(ids);
        }
        // An in-place op must not change the shape or dtype of what it writes (but for the
        // resizes `plan` allowed).
        let resize = node
            .op()
            .is_some_and(|op| RESIZES.contains(&op.name.as_str()));
        if let (Some(Some(k)), Some(m), false) =
            (plan.ret_alias.first(), node.meta.tensor(), resize)
        {
            if let Some(&t) = targets.get(*k).and_then(|ids| ids.first()) {
                if let Some(tm) = self.old_meta(t) {
                    if &tm != m {
                        return Err(ctx.unsupported(format!(
                            "changes `{}` from {tm} to {m} in place, which functionalization cannot express",
                            self.old.node(t).name
                        )));
                    }
                }
            }
        }
        // The out-of-place call, reading current values.
        let mut new_args = Vec::with_capacity(args.len());
        for a in args {
            new_args.push(self.remap_value(a)?);
        }
        let mut new_kwargs = Vec::with_capacity(kwargs.len());
        for (k, v) in kwargs {
            let v = if plan.drop_kwargs.contains(k) {
                // Dropped below; only bound.
                v.clone()
            } else {
                self.remap_value(v)?
            };
            new_kwargs.push((k.clone(), v));
        }
        // Bound by name to the out-of-place op, defaults it does not share written out.
        let (new_args, new_kwargs) = schema
            .rebind_call(&plan.schema, &new_args, &new_kwargs, &plan.drop_kwargs)
            .map_err(|m| ctx.unsupported(format!("as `{}`: {m}", plan.target)))?;
        let n_out = plan.schema.returns.len();
        let single = n_out == 1 && is_tensor_type(&plan.schema.returns[0].ty);
        let list_out = n_out == 1 && is_tensor_list_type(&plan.schema.returns[0].ty);
        let written_meta = |this: &Self, k: usize| -> Option<TensorMeta> {
            targets
                .get(k)
                .and_then(|ids| ids.first())
                .and_then(|&t| this.old_meta(t))
        };
        let meta = if single {
            match node.meta.tensor() {
                Some(m) => Meta::Tensor(m.clone()),
                None => written_meta(self, 0).map_or(Meta::Unknown, Meta::Tensor),
            }
        } else if list_out {
            Meta::Multi(
                targets
                    .first()
                    .map(|ids| ids.iter().map(|&t| self.old_meta(t)).collect())
                    .unwrap_or_default(),
            )
        } else {
            Meta::Multi(
                (0..n_out)
                    .map(|j| match plan.slots.iter().position(|&s| s == j) {
                        Some(k) => written_meta(self, k),
                        None => item_meta(&node.meta, j),
                    })
                    .collect(),
            )
        };
        let func = self.push_named(
            &plan.target.name,
            NodeKind::Call {
                op: plan.target.clone(),
                args: new_args,
                kwargs: new_kwargs,
            },
            meta,
        );
        // The new value of each written tensor, written once the old node's getitems are
        // placed, so the new node's outputs come in order.
        let mut writes: Vec<(NodeId, Option<(usize, Meta)>)> = Vec::new();
        for (k, ids) in targets.iter().enumerate() {
            if list_out {
                for (e, &t) in ids.iter().enumerate() {
                    let m = self.old_meta(t).map_or(Meta::Unknown, Meta::Tensor);
                    writes.push((t, Some((e, m))));
                }
            } else if let Some(&t) = ids.first() {
                if single {
                    writes.push((t, None));
                } else {
                    let m = self.old_meta(t).map_or(Meta::Unknown, Meta::Tensor);
                    writes.push((t, Some((plan.slots[k], m))));
                }
            }
        }
        self.pending = Some(Pending {
            source: id,
            func,
            writes,
            ctx: ctx.clone(),
        });
        // What the old node's own outputs become.
        let alias_target = |k: usize| targets.get(k).and_then(|ids| ids.first()).copied();
        let n_ret = schema.returns.len();
        if n_ret == 1 && is_tensor_type(&schema.returns[0].ty) {
            match plan.ret_alias[0].and_then(alias_target) {
                Some(t) => {
                    let storage = self.storage_of(t, ctx)?;
                    self.info[id.index()] = Info::Tensor {
                        storage,
                        link: Some(Link {
                            parent: self.unalias(t),
                            step: Step::Identity,
                        }),
                    };
                }
                None => {
                    let value = if single {
                        func
                    } else {
                        self.push_named(
                            "getitem",
                            NodeKind::GetItem {
                                source: func,
                                index: 0,
                            },
                            node.meta.clone(),
                        )
                    };
                    self.new_id[id.index()] = Some(value);
                    let s = self.new_storage(id, value, Origin::Intermediate);
                    self.info[id.index()] = Info::Tensor {
                        storage: s,
                        link: None,
                    };
                }
            }
        } else if n_ret == 0 {
            self.new_id[id.index()] = Some(func);
            self.info[id.index()] = Info::Other;
        } else {
            let mut items = Vec::with_capacity(n_ret);
            for (j, r) in schema.returns.iter().enumerate() {
                items.push(match plan.ret_alias[j].and_then(alias_target) {
                    Some(t) if is_tensor_type(&r.ty) => Item::Alias(t),
                    _ => Item::Fresh {
                        index: j,
                        tensor: is_tensor_type(&r.ty),
                    },
                });
            }
            self.new_id[id.index()] = Some(func);
            self.info[id.index()] = Info::Multi { items, list: false };
        }
        Ok(())
    }

    /// Fails, naming the view, when a write into `t` cannot be carried back to its storage.
    fn check_invertible(&self, t: NodeId, ctx: &Ctx) -> Result<(), AutodiffError> {
        let mut cur = t;
        while let Info::Tensor {
            link: Some(link), ..
        } = &self.info[cur.index()]
        {
            let (view, how) = match link.step {
                Step::Identity => (None, None),
                Step::View { node, .. } => (Some(node), self.old.node(node).op().cloned()),
                Step::Item { list, .. } => (Some(list), self.old.node(list).op().cloned()),
            };
            if let (Some(view), Some(op)) = (view, how) {
                if inverse_kind(&op, matches!(link.step, Step::Item { .. })).is_none() {
                    return Err(ctx.unsupported(format!(
                        "writes into `{}`, a view made by `{op}`, which cannot be written through{}",
                        self.old.node(view).name,
                        if matches!(op.name.as_str(), "expand" | "expand_as") {
                            " (an expanded tensor repeats elements: a write would store each several times)"
                        } else {
                            " (no inverse is known for this view op)"
                        }
                    )));
                }
            }
            cur = link.parent;
        }
        Ok(())
    }

    /// Makes `value` the new value of old tensor `t`, carrying it back to `t`'s storage
    /// through the inverses of `t`'s view chain.
    fn write(&mut self, t: NodeId, value: NodeId, ctx: &Ctx) -> Result<(), AutodiffError> {
        let storage = self.storage_of(t, ctx)?;
        let mut chain: Vec<(NodeId, NodeId)> = vec![(t, value)];
        let mut cur = t;
        let mut new = value;
        while let Info::Tensor {
            link: Some(link), ..
        } = self.info[cur.index()].clone()
        {
            new = match link.step {
                Step::Identity => new,
                Step::View { node, arg } => {
                    let base = self.read(link.parent)?;
                    self.inverse_view(node, arg, link.parent, base, new, ctx)?
                }
                Step::Item { list, index } => {
                    let base = self.read(link.parent)?;
                    self.inverse_item(list, index, link.parent, base, new, ctx)?
                }
            };
            chain.push((link.parent, new));
            cur = link.parent;
        }
        let s = &mut self.storages[storage];
        s.value = new;
        s.version += 1;
        let version = s.version;
        for (old, v) in chain {
            if matches!(self.info[old.index()], Info::Tensor { link: Some(_), .. }) {
                self.cache[old.index()] = Some((v, version));
            }
        }
        Ok(())
    }

    /// Emits `op(args)` (checking the op exists) with the meta of old node `like`.
    fn emit(
        &mut self,
        op: OpName,
        args: Vec<Value>,
        kwargs: Vec<(String, Value)>,
        like: NodeId,
        ctx: &Ctx,
    ) -> Result<NodeId, AutodiffError> {
        self.require(&op, ctx)?;
        let meta = self.old.node(like).meta.clone();
        Ok(self.push_named(&op.name.clone(), NodeKind::Call { op, args, kwargs }, meta))
    }

    fn base_meta(&self, parent: NodeId, view: NodeId) -> Result<TensorMeta, AutodiffError> {
        self.old_meta(parent)
            .ok_or_else(|| AutodiffError::MissingMeta {
                node: self.old.node(parent).name.to_string(),
                message: format!(
                    "writing through the view `{}` needs the shape of its base",
                    self.old.node(view).name
                ),
            })
    }

    /// The new value of a view's parent after `src` was written into the view (old node
    /// `view`, reading its parent `parent`, currently `base`, as argument `arg`).
    fn inverse_view(
        &mut self,
        view: NodeId,
        arg: usize,
        parent: NodeId,
        base: NodeId,
        src: NodeId,
        ctx: &Ctx,
    ) -> Result<NodeId, AutodiffError> {
        let vnode = self.old.node(view);
        let NodeKind::Call { op, args, kwargs } = &vnode.kind else {
            return Err(ctx.unsupported(format!(
                "writes through `{}`, which is not an op call",
                vnode.name
            )));
        };
        let vschema = self.schema(op, ctx)?;
        let get = |i: usize| bound(&vschema, args, kwargs, i).cloned();
        let aten = |name: &str, overload: &str| OpName::aten(name, overload);
        let s = Value::Node(src);
        match inverse_kind(op, false) {
            Some(Inverse::Scatter) => {
                let target = OpName::new(&op.namespace, &format!("{}_scatter", op.name), "default");
                let tschema = self.require(&target, ctx)?;
                if tschema.arguments.len() != vschema.arguments.len() + 1 || arg != 0 {
                    return Err(ctx.unsupported(format!(
                        "`{target}` does not take the arguments of `{op}` plus `src`"
                    )));
                }
                let mut new_args = vec![Value::Node(base), s];
                for a in args.iter().skip(1) {
                    new_args.push(self.remap_value(a)?);
                }
                let mut new_kwargs = Vec::new();
                for (k, v) in kwargs {
                    new_kwargs.push((k.clone(), self.remap_value(v)?));
                }
                self.emit(target, new_args, new_kwargs, parent, ctx)
            }
            Some(Inverse::Involution) => {
                let mut new_args = vec![s];
                for a in args.iter().skip(1) {
                    new_args.push(self.remap_value(a)?);
                }
                self.emit(op.clone(), new_args, Vec::new(), parent, ctx)
            }
            Some(Inverse::Permute) => {
                let dims = int_list(get(1).as_ref()).ok_or_else(|| {
                    ctx.unsupported(format!(
                        "writes through `{}`, whose permutation is not a literal int list",
                        vnode.name
                    ))
                })?;
                let rank = dims.len() as i64;
                let mut inv = vec![0i64; dims.len()];
                for (i, &d) in dims.iter().enumerate() {
                    let d = if d < 0 { d + rank } else { d };
                    if !(0..rank).contains(&d) {
                        return Err(ctx.unsupported(format!(
                            "writes through `{}`, whose permutation {dims:?} is invalid",
                            vnode.name
                        )));
                    }
                    inv[d as usize] = i as i64;
                }
                self.emit(
                    aten("permute", "default"),
                    vec![s, Value::from(inv)],
                    Vec::new(),
                    parent,
                    ctx,
                )
            }
            Some(Inverse::Unsqueeze) => {
                let dim = get(1).unwrap_or(Value::Int(0));
                self.emit(
                    aten("squeeze", "dim"),
                    vec![s, dim],
                    Vec::new(),
                    parent,
                    ctx,
                )
            }
            Some(Inverse::Squeeze) => {
                let bm = self.base_meta(parent, view)?;
                let rank = bm.shape.len() as i64;
                let norm = |d: i64| if d < 0 { d + rank.max(1) } else { d };
                let dims: Vec<i64> = match op.overload.as_str() {
                    "dim" => vec![norm(get(1).and_then(|v| int_of(&v)).ok_or_else(|| {
                        ctx.unsupported(format!(
                            "writes through `{}`, whose dim is not a literal int",
                            vnode.name
                        ))
                    })?)],
                    "dims" => int_list(get(1).as_ref())
                        .ok_or_else(|| {
                            ctx.unsupported(format!(
                                "writes through `{}`, whose dims are not a literal int list",
                                vnode.name
                            ))
                        })?
                        .into_iter()
                        .map(norm)
                        .collect(),
                    _ => (0..rank).collect(),
                };
                let mut squeezed: Vec<i64> = dims
                    .into_iter()
                    .filter(|&d| bm.shape.get(d as usize) == Some(&1))
                    .collect();
                squeezed.sort_unstable();
                squeezed.dedup();
                let mut cur = src;
                for d in squeezed {
                    cur = self.emit(
                        aten("unsqueeze", "default"),
                        vec![Value::Node(cur), Value::Int(d)],
                        Vec::new(),
                        parent,
                        ctx,
                    )?;
                }
                Ok(cur)
            }
            Some(Inverse::Reshape) => {
                let bm = self.base_meta(parent, view)?;
                let target = match op.name.as_str() {
                    "_unsafe_view" => aten("_unsafe_view", "default"),
                    "reshape" => aten("reshape", "default"),
                    _ => aten("view", "default"),
                };
                self.emit(
                    target,
                    vec![s, Value::from(bm.shape.to_vec())],
                    Vec::new(),
                    parent,
                    ctx,
                )
            }
            Some(Inverse::ViewDtype) => {
                let bm = self.base_meta(parent, view)?;
                self.emit(
                    aten("view", "dtype"),
                    vec![s, Value::Dtype(bm.dtype)],
                    Vec::new(),
                    parent,
                    ctx,
                )
            }
            Some(Inverse::Identity) => Ok(src),
            Some(Inverse::Split) | None => Err(ctx.unsupported(format!(
                "writes through `{}` ({op}), a view that cannot be written through",
                vnode.name
            ))),
        }
    }

    /// The new value of a list view's parent after `src` was written into item `index`.
    fn inverse_item(
        &mut self,
        list: NodeId,
        index: usize,
        parent: NodeId,
        base: NodeId,
        src: NodeId,
        ctx: &Ctx,
    ) -> Result<NodeId, AutodiffError> {
        let lnode = self.old.node(list);
        let NodeKind::Call { op, args, kwargs } = &lnode.kind else {
            return Err(ctx.unsupported(format!(
                "writes through `{}`, which is not an op call",
                lnode.name
            )));
        };
        let lschema = self.schema(op, ctx)?;
        let get = |name: &str| {
            lschema
                .arguments
                .iter()
                .position(|a| a.name == name)
                .and_then(|i| bound(&lschema, args, kwargs, i).cloned())
        };
        let dim = get("dim").and_then(|v| int_of(&v)).unwrap_or(0);
        let literal = |what: &str| {
            ctx.unsupported(format!(
                "writes through `{}`, whose {what} is not a literal",
                lnode.name
            ))
        };
        let i = index as i64;
        let (target, extra) = match op.name.as_str() {
            "split" => {
                let size = get("split_size")
                    .and_then(|v| int_of(&v))
                    .ok_or_else(|| literal("split size"))?;
                (
                    OpName::aten("slice_scatter", "default"),
                    vec![dim, i * size, (i + 1) * size, 1],
                )
            }
            "split_with_sizes" => {
                let sizes =
                    int_list(get("split_sizes").as_ref()).ok_or_else(|| literal("split sizes"))?;
                let start: i64 = sizes.iter().take(index).sum();
                let len = *sizes.get(index).ok_or_else(|| literal("split sizes"))?;
                (
                    OpName::aten("slice_scatter", "default"),
                    vec![dim, start, start + len, 1],
                )
            }
            "unbind" => (OpName::aten("select_scatter", "default"), vec![dim, i]),
            _ => {
                return Err(ctx.unsupported(format!(
                    "writes through `{}` ({op}), a view that cannot be written through",
                    lnode.name
                )))
            }
        };
        let mut new_args = vec![Value::Node(base), Value::Node(src)];
        new_args.extend(extra.into_iter().map(Value::Int));
        self.emit(target, new_args, Vec::new(), parent, ctx)
    }

    // ------------------------------------------------------------------ output

    /// Carries out the pending writes of the last mutating op.
    fn flush(&mut self) -> Result<(), AutodiffError> {
        let Some(p) = self.pending.take() else {
            return Ok(());
        };
        for (t, item) in p.writes {
            let value = match item {
                None => p.func,
                Some((index, meta)) => self.push_named(
                    "getitem",
                    NodeKind::GetItem {
                        source: p.func,
                        index,
                    },
                    meta,
                ),
            };
            self.write(t, value, &p.ctx)?;
        }
        Ok(())
    }

    fn finish(mut self) -> Result<Functionalized, AutodiffError> {
        self.flush()?;
        let outputs = self.old.outputs().to_vec();
        let mut srcs = Vec::new();
        for v in &outputs {
            v.for_each_node(&mut |n| {
                if !srcs.contains(&n) {
                    srcs.push(n)
                }
            });
        }
        let mut map = Vec::with_capacity(srcs.len());
        for s in srcs {
            let new = self.read(s)?;
            map.push((s, new));
        }
        let mut mutated: Vec<(usize, NodeId)> = self
            .storages
            .iter()
            .filter_map(|s| match s.origin {
                Origin::Input(pos) if s.version > 0 => Some((pos, s.value)),
                _ => None,
            })
            .collect();
        mutated.sort_by_key(|(pos, _)| *pos);
        let mut new_outputs: Vec<Value> = mutated.iter().map(|(_, v)| Value::Node(*v)).collect();
        for v in &outputs {
            new_outputs.push(v.map_nodes(&mut |n| {
                Value::Node(
                    map.iter()
                        .find(|(o, _)| *o == n)
                        .map(|(_, x)| *x)
                        .expect("every output node was read just above"),
                )
            }));
        }
        let graph = Graph {
            dialect: graphbug_ir::Dialect::Aten,
            param_names: Default::default(),
            name: self.old.name.clone(),
            nodes: self.nodes,
            output: Some(new_outputs),
        };
        graph.verify()?;
        verify_calls(&graph, self.schemas)?;
        Ok(Functionalized {
            graph,
            mutated_inputs: mutated.into_iter().map(|(p, _)| p).collect(),
        })
    }
}

/// How a write through a view op is carried back to its base.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Inverse {
    /// `<op>_scatter(base, src, <op's other args>)`: slice, select, diagonal, as_strided.
    Scatter,
    /// The op itself undoes it: `t`, `transpose`.
    Involution,
    /// `permute` by the inverse permutation.
    Permute,
    /// `squeeze.dim(src, dim)`.
    Unsqueeze,
    /// `unsqueeze` the dims the squeeze removed (needs the base's shape).
    Squeeze,
    /// `view(src, base_shape)` (needs the base's shape).
    Reshape,
    /// `view.dtype(src, base_dtype)`.
    ViewDtype,
    /// The view is the base itself (`alias`, `detach`).
    Identity,
    /// An item of `split`, `split_with_sizes`, `unbind`: a scatter of the item.
    Split,
}

/// The inverse of view op `op` (`item`: for an item of a list-returning view), or `None`
/// when writes through it are not supported.
fn inverse_kind(op: &OpName, item: bool) -> Option<Inverse> {
    if op.namespace != "aten" {
        return None;
    }
    if item {
        return matches!(op.name.as_str(), "split" | "split_with_sizes" | "unbind")
            .then_some(Inverse::Split);
    }
    Some(match (op.name.as_str(), op.overload.as_str()) {
        ("slice" | "select" | "diagonal" | "as_strided", _) => Inverse::Scatter,
        ("t", _) | ("transpose", "int") => Inverse::Involution,
        ("permute", _) => Inverse::Permute,
        ("unsqueeze", _) => Inverse::Unsqueeze,
        ("squeeze", _) => Inverse::Squeeze,
        ("view", "dtype") => Inverse::ViewDtype,
        ("view" | "_unsafe_view" | "reshape" | "_reshape_alias" | "view_as", _) => Inverse::Reshape,
        ("alias" | "detach" | "lift_fresh", _) => Inverse::Identity,
        _ => return None,
    })
}

/// For a view op: the argument its result aliases, and whether it returns a list of views.
/// Views come from schemas (a non-written return sharing an alias set with an argument);
/// `_unsafe_view` is a view although its schema does not say so, as in PyTorch.
fn view_arg(op: &OpName, schema: &Schema) -> Option<(usize, bool)> {
    if op.namespace == "aten" && op.name == "_unsafe_view" {
        return Some((0, false));
    }
    let [ret] = schema.returns.as_slice() else {
        return None;
    };
    if ret.is_write {
        return None;
    }
    let (sets, list) = if !ret.alias_set.is_empty() {
        (&ret.alias_set, false)
    } else if !ret.contained_alias_set.is_empty() {
        (&ret.contained_alias_set, true)
    } else {
        return None;
    };
    schema
        .arguments
        .iter()
        .position(|a| {
            !a.is_write
                && is_tensor_type(&a.ty)
                && a.alias_set.iter().any(|s| s != "*" && sets.contains(s))
        })
        .map(|i| (i, list))
}

/// True when `r` (a return) aliases written argument `a`.
fn shares_alias_set(r: &Argument, a: &Argument) -> bool {
    r.alias_set
        .iter()
        .chain(&r.contained_alias_set)
        .any(|s| s != "*" && a.alias_set.contains(s))
}

/// The value bound to schema argument `i`: positional, else by keyword.
fn bound<'v>(
    schema: &Schema,
    args: &'v [Value],
    kwargs: &'v [(String, Value)],
    i: usize,
) -> Option<&'v Value> {
    if i < args.len() {
        return args.get(i);
    }
    let name = &schema.arguments.get(i)?.name;
    kwargs.iter().find(|(k, _)| k == name).map(|(_, v)| v)
}

fn is_tensor_type(ty: &str) -> bool {
    ty == "Tensor" || ty == "Tensor?"
}

fn is_tensor_list_type(ty: &str) -> bool {
    ty.starts_with("Tensor") && ty.contains("[]")
}

fn int_of(v: &Value) -> Option<i64> {
    match v {
        Value::Int(i) => Some(*i),
        _ => None,
    }
}

fn int_list(v: Option<&Value>) -> Option<Vec<i64>> {
    match v? {
        Value::List(items) | Value::Tuple(items) => items.iter().map(int_of).collect(),
        Value::Int(i) => Some(vec![*i]),
        _ => None,
    }
}

/// The meta of output `j` of a node with meta `meta`.
fn item_meta(meta: &Meta, j: usize) -> Option<TensorMeta> {
    match meta {
        Meta::Multi(_) => meta.item(j).cloned(),
        Meta::Tensor(t) if j == 0 => Some(t.clone()),
        _ => None,
    }
}

/// Out-of-place overloads an `out=` overload may correspond to (checked by schema).
fn out_overload_candidates(overload: &str) -> Vec<String> {
    let mut c: Vec<String> = Vec::new();
    if overload == "out" {
        for o in ["default", "Tensor", "Scalar", "int", "dim", "self"] {
            c.push(o.into());
        }
    }
    if let Some(p) = overload.strip_suffix("_out") {
        c.push(p.into());
    }
    if let Some((p, _)) = overload.rsplit_once('_') {
        c.push(p.into());
    }
    c.push("default".into());
    let mut out: Vec<String> = Vec::new();
    for o in c {
        if !o.is_empty() && !out.contains(&o) {
            out.push(o);
        }
    }
    out
}
