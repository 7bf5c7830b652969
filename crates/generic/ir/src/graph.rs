//! The graph data model: nodes in program order, referring to earlier nodes by id.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, HashMap};

use serde::{Deserialize, Serialize};
use std::hash::BuildHasher as _;

use crate::error::IrError;
use crate::naming::is_valid_name;
use crate::types::{Meta, OpName};
use crate::value::Value;
/// A node's name: a string kept inline up to 24 bytes, so most names allocate nothing.
pub use compact_str::CompactString as NodeName;

/// Index of a node in its graph's `nodes`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct NodeId(pub u32);

impl NodeId {
    /// The position in `Graph::nodes`.
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// What a node does, mirroring FX's node ops.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum NodeKind {
    /// A graph input (`forward` parameter).
    Placeholder,
    /// A call of an operator overload, e.g. `torch.ops.aten.mm.default(a, b)`.
    Call {
        /// The op called.
        op: OpName,
        /// Positional arguments.
        args: Vec<Value>,
        /// Keyword arguments, in source order.
        kwargs: Vec<(String, Value)>,
    },
    /// `source[index]`: one output of a multi-output node.
    GetItem {
        /// The multi-output node.
        source: NodeId,
        /// Which output.
        index: usize,
    },
    /// `self.<target>`: a constant tensor held by the module.
    GetAttr {
        /// Attribute path after `self.`.
        target: String,
    },
}

/// One node of a graph.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Node {
    /// Unique name, also the Python variable name (kept inline up to 24 bytes).
    pub name: NodeName,
    /// What the node does.
    pub kind: NodeKind,
    /// Shapes and dtypes of what it produces.
    pub meta: Meta,
}

impl Node {
    /// The op of a call node.
    pub fn op(&self) -> Option<&OpName> {
        match &self.kind {
            NodeKind::Call { op, .. } => Some(op),
            _ => None,
        }
    }

    /// True for placeholders.
    pub fn is_placeholder(&self) -> bool {
        matches!(self.kind, NodeKind::Placeholder)
    }

    /// True for call and getitem nodes, the nodes FX counts as `call_function`.
    pub fn is_call_function(&self) -> bool {
        matches!(self.kind, NodeKind::Call { .. } | NodeKind::GetItem { .. })
    }

    /// Calls `f` on each node this node reads, in argument order (args, then kwargs).
    pub fn for_each_input(&self, mut f: impl FnMut(NodeId)) {
        match &self.kind {
            NodeKind::Call { args, kwargs, .. } => {
                args.iter().for_each(|a| a.for_each_node(&mut f));
                kwargs.iter().for_each(|(_, v)| v.for_each_node(&mut f));
            }
            NodeKind::GetItem { source, .. } => f(*source),
            NodeKind::Placeholder | NodeKind::GetAttr { .. } => {}
        }
    }

    /// The nodes this node reads, in argument order, each once.
    pub fn inputs(&self) -> Vec<NodeId> {
        let mut out = Vec::new();
        self.for_each_input(|n| {
            if !out.contains(&n) {
                out.push(n)
            }
        });
        out
    }

    /// A copy of the node kind with every node reference renumbered by `f`.
    pub fn try_remap_kind<E>(
        &self,
        f: &mut impl FnMut(NodeId) -> Result<NodeId, E>,
    ) -> Result<NodeKind, E> {
        Ok(match &self.kind {
            NodeKind::Call { op, args, kwargs } => NodeKind::Call {
                op: op.clone(),
                args: args
                    .iter()
                    .map(|a| a.try_remap(f))
                    .collect::<Result<_, _>>()?,
                kwargs: kwargs
                    .iter()
                    .map(|(k, v)| Ok((k.clone(), v.try_remap(f)?)))
                    .collect::<Result<_, _>>()?,
            },
            NodeKind::GetItem { source, index } => NodeKind::GetItem {
                source: f(*source)?,
                index: *index,
            },
            other => other.clone(),
        })
    }
}

/// Who reads a node: other nodes, the graph output, or both.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Users {
    /// For each node, the nodes that read it, in graph order, each once.
    pub nodes: Readers,
    /// For each node, whether the graph output returns it.
    pub by_output: Vec<bool>,
}

impl Users {
    /// True when nothing reads node `id`.
    pub fn is_unused(&self, id: NodeId) -> bool {
        self.nodes[id.index()].is_empty() && !self.by_output[id.index()]
    }

    /// Number of distinct readers of `id`, the output counting as one.
    pub fn count(&self, id: NodeId) -> usize {
        self.nodes[id.index()].len() + usize::from(self.by_output[id.index()])
    }
}

/// The readers of every node, in one array (`readers[i]` is node `i`'s, a slice): one
/// allocation for the graph rather than one per node.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Readers {
    /// Where each node's readers start in `all`, and, last, `all.len()`.
    start: Vec<u32>,
    /// Every node's readers, node by node.
    all: Vec<NodeId>,
}

impl Readers {
    /// Number of nodes.
    pub fn len(&self) -> usize {
        self.start.len().saturating_sub(1)
    }

    /// True for a graph of no nodes.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Each node's readers, in node order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = &[NodeId]> + '_ {
        self.start
            .windows(2)
            .map(|w| &self.all[w[0] as usize..w[1] as usize])
    }
}

impl std::ops::Index<usize> for Readers {
    type Output = [NodeId];

    fn index(&self, i: usize) -> &[NodeId] {
        &self.all[self.start[i] as usize..self.start[i + 1] as usize]
    }
}

/// The text a graph is written in: it decides how node names are spelled and which
/// printer writes the graph. The minifier, the checks and the repro layout work the same on
/// every dialect; only reading, printing and running differ.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Dialect {
    /// aten graphs in PyTorch's `print_readable()` text: names are Python identifiers.
    #[default]
    Aten,
    /// An HLO computation: names as XLA writes them (`add.13`, `get-tuple-element.4`).
    Hlo,
    /// A StableHLO function: SSA value names without `%` (`0`, `cst`, `arg0`; `1#2` for
    /// one result of several, `1:4` for the op that makes them).
    StableHlo,
}

impl Dialect {
    /// Whether `name` is a node name in this dialect.
    pub fn is_valid_name(self, name: &str) -> bool {
        match self {
            Dialect::Aten => is_valid_name(name),
            Dialect::Hlo => {
                let mut chars = name.chars();
                chars
                    .next()
                    .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                    && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
            }
            Dialect::StableHlo => {
                !name.is_empty()
                    && name.chars().all(|c| {
                        c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '$' | '-' | '#' | ':')
                    })
            }
        }
    }
}

/// An FX-like graph of aten ops: nodes in program order, then the output values.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Graph {
    /// The class name printed in `class <name>(torch.nn.Module):`.
    pub name: String,
    /// Nodes in program order; placeholders first.
    pub nodes: Vec<Node>,
    /// The returned values, or `None` for a graph still missing its output.
    pub output: Option<Vec<Value>>,
    /// `forward`'s parameter names that differ from their placeholder's name, by placeholder
    /// name: dynamo names a placeholder `l_x_` for the parameter `L_x_` and prints
    /// `l_x_ = L_x_` first.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub param_names: BTreeMap<String, String>,
    /// The text the graph is written in.
    #[serde(default)]
    pub dialect: Dialect,
}

impl Graph {
    /// An empty graph with the given class name.
    pub fn new(name: &str) -> Self {
        Graph::new_in(name, Dialect::Aten)
    }

    /// An empty graph written in `dialect`.
    pub fn new_in(name: &str, dialect: Dialect) -> Self {
        Graph {
            dialect,
            param_names: Default::default(),
            name: name.to_string(),
            nodes: Vec::new(),
            output: None,
        }
    }

    /// The node with the given id.
    pub fn node(&self, id: NodeId) -> &Node {
        &self.nodes[id.index()]
    }

    /// All node ids in program order.
    pub fn ids(&self) -> impl DoubleEndedIterator<Item = NodeId> + ExactSizeIterator {
        (0..self.nodes.len() as u32).map(NodeId)
    }

    /// The returned values (empty while the output is missing).
    pub fn outputs(&self) -> &[Value] {
        self.output.as_deref().unwrap_or(&[])
    }

    /// The placeholder ids, in order.
    pub fn placeholders(&self) -> Vec<NodeId> {
        self.ids()
            .filter(|&i| self.node(i).is_placeholder())
            .collect()
    }

    /// The placeholders' names, in order (the keys of an inputs file).
    pub fn placeholder_names(&self) -> Vec<String> {
        self.nodes
            .iter()
            .filter(|n| n.is_placeholder())
            .map(|n| n.name.to_string())
            .collect()
    }

    /// Number of call_function nodes (calls and getitems), as `graphbug check` counts them.
    pub fn num_call_function_nodes(&self) -> usize {
        self.nodes.iter().filter(|n| n.is_call_function()).count()
    }

    /// The id of the node with the given name.
    pub fn find(&self, name: &str) -> Option<NodeId> {
        self.ids().find(|&i| self.node(i).name == name)
    }

    /// A map from node name to id.
    pub fn name_map(&self) -> HashMap<&str, NodeId> {
        self.ids()
            .map(|i| (self.node(i).name.as_str(), i))
            .collect()
    }

    /// Who reads each node.
    pub fn users(&self) -> Users {
        let n = self.nodes.len();
        // Each reader once per input, however often it reads it (its inputs come in
        // argument order, so a repeat may come later: `last` marks who counted last).
        let mut last = vec![u32::MAX; n];
        let mut start = vec![0u32; n + 1];
        for id in self.ids() {
            self.node(id).for_each_input(|src| {
                if src.index() < n && last[src.index()] != id.0 {
                    last[src.index()] = id.0;
                    start[src.index() + 1] += 1;
                }
            });
        }
        for i in 0..n {
            start[i + 1] += start[i];
        }
        let mut fill: Vec<u32> = start[..n].to_vec();
        let mut all = vec![NodeId(0); start[n] as usize];
        last.fill(u32::MAX);
        for id in self.ids() {
            self.node(id).for_each_input(|src| {
                if src.index() < n && last[src.index()] != id.0 {
                    last[src.index()] = id.0;
                    all[fill[src.index()] as usize] = id;
                    fill[src.index()] += 1;
                }
            });
        }
        let mut by_output = vec![false; n];
        for v in self.outputs() {
            v.for_each_node(&mut |src| {
                if let Some(flag) = by_output.get_mut(src.index()) {
                    *flag = true;
                }
            });
        }
        Users {
            nodes: Readers { start, all },
            by_output,
        }
    }

    /// Checks the graph is well formed: names unique and valid, every reference to an
    /// earlier node, placeholders first, getitems on multi-output nodes, an output present.
    pub fn verify(&self) -> Result<(), IrError> {
        // Names by hash (ids into `nodes`: a small table for a big graph).
        let mut hashes: Vec<u64> = Vec::with_capacity(self.nodes.len());
        let mut seen: hashbrown::HashTable<u32> =
            hashbrown::HashTable::with_capacity(self.nodes.len());
        let mut body_started: Option<usize> = None;
        for (i, node) in self.nodes.iter().enumerate() {
            if !self.dialect.is_valid_name(&node.name) {
                return Err(IrError::InvalidName {
                    name: node.name.to_string(),
                    dialect: self.dialect,
                });
            }
            let hash = rustc_hash::FxBuildHasher.hash_one(node.name.as_str());
            hashes.push(hash);
            let same =
                |&j: &u32| hashes[j as usize] == hash && self.nodes[j as usize].name == node.name;
            match seen.entry(hash, same, |&j| hashes[j as usize]) {
                hashbrown::hash_table::Entry::Occupied(_) => {
                    return Err(IrError::DuplicateName {
                        name: node.name.to_string(),
                    })
                }
                hashbrown::hash_table::Entry::Vacant(slot) => {
                    slot.insert(i as u32);
                }
            }
            match (&node.kind, body_started) {
                (NodeKind::Placeholder, Some(first)) => {
                    return Err(IrError::InvalidNode {
                        node: node.name.to_string(),
                        message: format!(
                            "placeholder comes after node `{}`; placeholders must come first",
                            self.nodes[first].name
                        ),
                    })
                }
                (NodeKind::Placeholder, None) => {}
                _ => body_started = body_started.or(Some(i)),
            }
            let mut bad = None;
            node.for_each_input(|src| {
                if bad.is_none() && src.index() >= i {
                    bad = Some(src);
                }
            });
            if let Some(src) = bad {
                return Err(match self.nodes.get(src.index()) {
                    Some(n) => IrError::UseBeforeDefinition {
                        node: node.name.to_string(),
                        input: n.name.to_string(),
                    },
                    None => IrError::UnknownNode {
                        node: node.name.to_string(),
                        id: src.0,
                    },
                });
            }
            if let NodeKind::GetItem { source, .. } = &node.kind {
                let src = self.node(*source);
                if matches!(src.kind, NodeKind::Placeholder) || matches!(src.meta, Meta::Tensor(_))
                {
                    return Err(IrError::InvalidNode {
                        node: node.name.to_string(),
                        message: format!(
                            "getitem reads `{}`, which is a single tensor, not a multi-output node",
                            src.name
                        ),
                    });
                }
            }
        }
        let Some(outputs) = &self.output else {
            return Err(IrError::MissingOutput {
                graph: self.name.clone(),
            });
        };
        let mut bad = None;
        for v in outputs {
            v.for_each_node(&mut |src| {
                if bad.is_none() && src.index() >= self.nodes.len() {
                    bad = Some(src);
                }
            });
        }
        if let Some(src) = bad {
            return Err(IrError::UnknownNode {
                node: "output".into(),
                id: src.0,
            });
        }
        Ok(())
    }

    /// A copy with only the nodes where `keep` is true, ids renumbered.
    ///
    /// Fails, naming both nodes, if a kept node or the output reads a dropped node.
    pub fn retain(&self, keep: &[bool]) -> Result<Graph, IrError> {
        let order: Vec<NodeId> = self.ids().filter(|i| keep[i.index()]).collect();
        self.reordered(&order)
    }

    /// A copy whose nodes are `order` (a subset of ids, each at most once), renumbered.
    fn reordered(&self, order: &[NodeId]) -> Result<Graph, IrError> {
        let new_id = self.renumbering(order);
        let nodes = order
            .iter()
            .map(|&id| {
                let node = self.node(id);
                Ok(Node {
                    name: node.name.clone(),
                    kind: self.renumbered_kind(id, &new_id)?,
                    meta: node.meta.clone(),
                })
            })
            .collect::<Result<_, IrError>>()?;
        Ok(Graph {
            dialect: self.dialect,
            param_names: self.param_names.clone(),
            name: self.name.clone(),
            output: self.renumbered_output(&new_id)?,
            nodes,
        })
    }

    /// This graph with its nodes in `order` (a subset of ids, each at most once),
    /// renumbered: [`Graph::retain`]'s reordering, moving the nodes instead of copying
    /// them. Fails, naming both nodes, if a node or the output reads one left out.
    pub fn into_reordered(self, order: &[NodeId]) -> Result<Graph, IrError> {
        let new_id = self.renumbering(order);
        let output = self.renumbered_output(&new_id)?;
        let kinds = order
            .iter()
            .map(|&id| self.renumbered_kind(id, &new_id))
            .collect::<Result<Vec<_>, _>>()?;
        let mut slots: Vec<Option<Node>> = self.nodes.into_iter().map(Some).collect();
        let nodes = order
            .iter()
            .zip(kinds)
            .map(|(&id, kind)| {
                let node = slots[id.index()]
                    .take()
                    .ok_or_else(|| IrError::InvalidNode {
                        node: format!("#{}", id.0),
                        message: "is ordered twice".into(),
                    })?;
                Ok(Node { kind, ..node })
            })
            .collect::<Result<_, IrError>>()?;
        Ok(Graph {
            dialect: self.dialect,
            param_names: self.param_names,
            name: self.name,
            nodes,
            output,
        })
    }

    /// Each node's id once the nodes are `order` (`None`: left out).
    fn renumbering(&self, order: &[NodeId]) -> Vec<Option<NodeId>> {
        let mut new_id = vec![None; self.nodes.len()];
        for (pos, id) in order.iter().enumerate() {
            new_id[id.index()] = Some(NodeId(pos as u32));
        }
        new_id
    }

    /// Node `id`'s kind reading the renumbered nodes.
    fn renumbered_kind(&self, id: NodeId, new_id: &[Option<NodeId>]) -> Result<NodeKind, IrError> {
        let node = self.node(id);
        node.try_remap_kind(&mut |src| {
            new_id
                .get(src.index())
                .copied()
                .flatten()
                .ok_or_else(|| self.dropped_input(&node.name, src))
        })
    }

    /// The output reading the renumbered nodes.
    fn renumbered_output(&self, new_id: &[Option<NodeId>]) -> Result<Option<Vec<Value>>, IrError> {
        self.output
            .as_ref()
            .map(|vals| {
                vals.iter()
                    .map(|v| {
                        v.try_remap(&mut |src| {
                            new_id
                                .get(src.index())
                                .copied()
                                .flatten()
                                .ok_or_else(|| self.dropped_input("output", src))
                        })
                    })
                    .collect()
            })
            .transpose()
    }

    fn dropped_input(&self, user: &str, src: NodeId) -> IrError {
        match self.nodes.get(src.index()) {
            Some(n) => IrError::InvalidNode {
                node: user.to_string(),
                message: format!("reads `{}`, which was removed", n.name),
            },
            None => IrError::UnknownNode {
                node: user.to_string(),
                id: src.0,
            },
        }
    }

    /// A copy with `node` inserted right after `after` (ids of later nodes shift by one).
    /// `node` may read `after` and anything before it. With `redirect`, every later reader
    /// of `after`, and the output, read the new node instead. Returns the copy and the new
    /// node's id.
    pub fn insert_after(&self, after: NodeId, node: Node, redirect: bool) -> (Graph, NodeId) {
        let new = NodeId(after.0 + 1);
        let shift = |id: NodeId| {
            if id.0 > after.0 {
                NodeId(id.0 + 1)
            } else if redirect && id == after {
                new
            } else {
                id
            }
        };
        let mut nodes = Vec::with_capacity(self.nodes.len() + 1);
        for (i, n) in self.nodes.iter().enumerate() {
            let kind = if i as u32 > after.0 {
                n.try_remap_kind::<()>(&mut |id| Ok(shift(id)))
                    .expect("remapping with a total function cannot fail")
            } else {
                n.kind.clone()
            };
            nodes.push(Node {
                name: n.name.clone(),
                kind,
                meta: n.meta.clone(),
            });
            if i as u32 == after.0 {
                nodes.push(node.clone());
            }
        }
        let output = self.output.as_ref().map(|vals| {
            vals.iter()
                .map(|v| v.map_nodes(&mut |id| Value::Node(shift(id))))
                .collect()
        });
        (
            Graph {
                dialect: self.dialect,
                param_names: self.param_names.clone(),
                name: self.name.clone(),
                nodes,
                output,
            },
            new,
        )
    }

    /// A stable topological order: placeholders first, then every node as early as its
    /// inputs allow, ties broken by the current position. Fails on a cycle.
    pub fn topological_order(&self) -> Result<Vec<NodeId>, IrError> {
        let n = self.nodes.len();
        let mut pending = vec![0usize; n];
        let mut readers: Vec<Vec<NodeId>> = vec![Vec::new(); n];
        for id in self.ids() {
            for src in self.node(id).inputs() {
                if src.index() >= n {
                    return Err(IrError::UnknownNode {
                        node: self.node(id).name.to_string(),
                        id: src.0,
                    });
                }
                pending[id.index()] += 1;
                readers[src.index()].push(id);
            }
        }
        // Placeholders sort before everything else; then by position.
        let key = |id: NodeId| (!self.node(id).is_placeholder(), id);
        let mut ready: BinaryHeap<Reverse<(bool, NodeId)>> = self
            .ids()
            .filter(|i| pending[i.index()] == 0)
            .map(|i| Reverse(key(i)))
            .collect();
        let mut order = Vec::with_capacity(n);
        while let Some(Reverse((_, id))) = ready.pop() {
            order.push(id);
            for &r in &readers[id.index()] {
                pending[r.index()] -= 1;
                if pending[r.index()] == 0 {
                    ready.push(Reverse(key(r)));
                }
            }
        }
        if order.len() < n {
            let stuck = self
                .ids()
                .find(|i| pending[i.index()] > 0)
                .expect("fewer ordered nodes than nodes implies one still pending");
            return Err(IrError::Cycle {
                node: self.node(stuck).name.to_string(),
            });
        }
        Ok(order)
    }

    /// Reorders the nodes into `topological_order`, renumbering ids.
    pub fn sort_topologically(&mut self) -> Result<(), IrError> {
        let order = self.topological_order()?;
        *self = self.reordered(&order)?;
        Ok(())
    }

    /// Serializes the graph as JSON.
    pub fn to_json(&self) -> Result<String, IrError> {
        serde_json::to_string_pretty(self).map_err(|e| IrError::Json(e.to_string()))
    }

    /// Reads a graph from JSON and verifies it.
    pub fn from_json(text: &str) -> Result<Graph, IrError> {
        let g: Graph = serde_json::from_str(text).map_err(|e| IrError::Json(e.to_string()))?;
        g.verify()?;
        Ok(g)
    }
}
