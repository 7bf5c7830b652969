//! Building graphs from Rust with typed handles and FX-style naming.

use crate::error::IrError;
use crate::graph::{Graph, Node, NodeId, NodeKind};
use crate::naming::Namespace;
use crate::types::{Meta, OpName, TensorMeta};
use crate::value::Value;

/// Inputs get provisional ids with this bit set, so they can be added at any time and
/// still come first in the finished graph.
const INPUT_TAG: u32 = 1 << 31;

/// Handle to a single-tensor value in a [`GraphBuilder`]; converts into a [`Value`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TensorRef(NodeId);

/// Handle to a multi-output node in a [`GraphBuilder`]; read it with [`GraphBuilder::getitem`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MultiRef(NodeId);

impl From<TensorRef> for Value {
    fn from(t: TensorRef) -> Value {
        Value::Node(t.0)
    }
}

impl From<&TensorRef> for Value {
    fn from(t: &TensorRef) -> Value {
        Value::Node(t.0)
    }
}

impl From<Vec<TensorRef>> for Value {
    /// A `Tensor[]` argument.
    fn from(ts: Vec<TensorRef>) -> Value {
        Value::List(ts.into_iter().map(Value::from).collect())
    }
}

/// Builds a [`Graph`] node by node, naming nodes as FX does (`mm`, `mm_1`, `sum_1`).
///
/// Handles belong to the builder that made them; inputs may be added at any point and
/// still become the graph's first nodes.
#[derive(Debug)]
pub struct GraphBuilder {
    name: String,
    inputs: Vec<Node>,
    body: Vec<Node>,
    names: Namespace,
    output: Option<Vec<Value>>,
}

impl GraphBuilder {
    /// A builder for a graph with the given class name.
    pub fn new(name: &str) -> Self {
        GraphBuilder {
            name: name.to_string(),
            inputs: Vec::new(),
            body: Vec::new(),
            names: Namespace::new(),
            output: None,
        }
    }

    /// Adds a graph input (placeholder) with its shape and dtype.
    pub fn input(&mut self, name: &str, meta: TensorMeta) -> TensorRef {
        let name = self.names.create_name(name);
        let id = NodeId(INPUT_TAG | self.inputs.len() as u32);
        self.inputs.push(Node {
            name: name.into(),
            kind: NodeKind::Placeholder,
            meta: Meta::Tensor(meta),
        });
        TensorRef(id)
    }

    fn push(&mut self, name: &str, kind: NodeKind, meta: Meta) -> NodeId {
        let name = self.names.create_name(name);
        let id = NodeId(self.body.len() as u32);
        self.body.push(Node {
            name: name.into(),
            kind,
            meta,
        });
        id
    }

    /// Calls an op that returns one tensor.
    pub fn call(&mut self, op: OpName, args: impl IntoIterator<Item = Value>) -> TensorRef {
        self.call_kw(op, args, [])
    }

    /// Calls an op that returns one tensor, with keyword arguments.
    pub fn call_kw<'k>(
        &mut self,
        op: OpName,
        args: impl IntoIterator<Item = Value>,
        kwargs: impl IntoIterator<Item = (&'k str, Value)>,
    ) -> TensorRef {
        TensorRef(self.push_call(op, args, kwargs))
    }

    /// Calls an op that returns several tensors (a tuple or a list).
    pub fn call_multi<'k>(
        &mut self,
        op: OpName,
        args: impl IntoIterator<Item = Value>,
        kwargs: impl IntoIterator<Item = (&'k str, Value)>,
    ) -> MultiRef {
        MultiRef(self.push_call(op, args, kwargs))
    }

    fn push_call<'k>(
        &mut self,
        op: OpName,
        args: impl IntoIterator<Item = Value>,
        kwargs: impl IntoIterator<Item = (&'k str, Value)>,
    ) -> NodeId {
        let name = op.name.clone();
        let kind = NodeKind::Call {
            op,
            args: args.into_iter().collect(),
            kwargs: kwargs
                .into_iter()
                .map(|(k, v)| (k.to_string(), v))
                .collect(),
        };
        self.push(&name, kind, Meta::Unknown)
    }

    /// Reads output `index` of a multi-output node.
    pub fn getitem(&mut self, source: MultiRef, index: usize) -> TensorRef {
        TensorRef(self.push(
            "getitem",
            NodeKind::GetItem {
                source: source.0,
                index,
            },
            Meta::Unknown,
        ))
    }

    /// Adds a module constant `self.<target>` (a get_attr node).
    pub fn constant(&mut self, target: &str, meta: TensorMeta) -> TensorRef {
        TensorRef(self.push(
            target,
            NodeKind::GetAttr {
                target: target.to_string(),
            },
            Meta::Tensor(meta),
        ))
    }

    /// Sets the shape and dtype of a single-tensor value.
    pub fn set_meta(&mut self, t: TensorRef, meta: TensorMeta) {
        if let Some(node) = self.node_mut(t.0) {
            node.meta = Meta::Tensor(meta);
        }
    }

    /// Sets the per-output metas of a multi-output node.
    pub fn set_multi_meta(&mut self, m: MultiRef, metas: Vec<Option<TensorMeta>>) {
        if let Some(node) = self.node_mut(m.0) {
            node.meta = Meta::Multi(metas);
        }
    }

    /// The name given to a handle's node.
    pub fn name_of(&self, t: TensorRef) -> &str {
        self.node(t.0).map_or("", |n| n.name.as_str())
    }

    fn node(&self, id: NodeId) -> Option<&Node> {
        if id.0 & INPUT_TAG != 0 {
            self.inputs.get((id.0 & !INPUT_TAG) as usize)
        } else {
            self.body.get(id.index())
        }
    }

    fn node_mut(&mut self, id: NodeId) -> Option<&mut Node> {
        if id.0 & INPUT_TAG != 0 {
            self.inputs.get_mut((id.0 & !INPUT_TAG) as usize)
        } else {
            self.body.get_mut(id.index())
        }
    }

    /// Sets the values the graph returns.
    pub fn output(&mut self, values: impl IntoIterator<Item = Value>) {
        self.output = Some(values.into_iter().collect());
    }

    /// Finishes the graph (inputs first, then the body in call order) and verifies it.
    pub fn finish(self) -> Result<Graph, IrError> {
        let n_inputs = self.inputs.len() as u32;
        let total = n_inputs as usize + self.body.len();
        let fix = |id: NodeId| -> Result<NodeId, IrError> {
            let new = if id.0 & INPUT_TAG != 0 {
                id.0 & !INPUT_TAG
            } else {
                id.0 + n_inputs
            };
            if (new as usize) < total {
                Ok(NodeId(new))
            } else {
                Err(IrError::UnknownNode {
                    node: "a builder argument".into(),
                    id: id.0,
                })
            }
        };
        let mut nodes = self.inputs;
        for node in self.body {
            let kind = node.try_remap_kind(&mut |id| fix(id))?;
            nodes.push(Node { kind, ..node });
        }
        let output = match self.output {
            Some(vals) => Some(
                vals.iter()
                    .map(|v| v.try_remap(&mut |id| fix(id)))
                    .collect::<Result<_, _>>()?,
            ),
            None => None,
        };
        let graph = Graph {
            dialect: crate::graph::Dialect::Aten,
            param_names: Default::default(),
            name: self.name,
            nodes,
            output,
        };
        graph.verify()?;
        Ok(graph)
    }
}
