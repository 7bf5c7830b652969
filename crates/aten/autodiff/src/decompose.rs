//! Decompositions of composite aten ops into primitive pointwise, reduction and matmul
//! ops, as PyTorch's `aot_eager_decomp_partition` backend applies them.
//!
//! That backend traces with inductor's decomposition table (`select_decomp_table()`), so
//! `gelu`, `_softmax`, `native_layer_norm_backward` and the like reach the partitioner as
//! the aten calls their Python decompositions (`torch/_decomp/decompositions.py`,
//! `torch/_refs`) make. [`decompose`] rewrites a graph the same way in Rust. Each
//! decomposition emits PyTorch's ops in PyTorch's order with PyTorch's arguments, so the
//! printed graph reads like a traced one: Python scalars stay scalars (`mul.Tensor(x, 0.5)`),
//! `1 - t` is `rsub` (itself decomposed to `sub.Tensor(1, t)`), `1 / t` is `reciprocal`
//! times 1, `t.to(dtype)` is `_to_copy`, `torch.where(c, 0.0, t)` is a `scalar_tensor` and
//! `where.self`, and trailing arguments equal to their defaults are left out, as
//! `__torch_dispatch__` leaves them out. Half-precision inputs are computed in float32
//! where PyTorch's `pw_cast_for_opmath` / type-promotion wrappers do so.
//!
//! Ops a decomposition emits are decomposed in turn when they are in the set (tracing
//! re-dispatches them). Untouched nodes keep their names and arguments; new nodes get FX
//! names that avoid every existing name, and new nodes nothing reads are dropped, as
//! AOTAutograd's dead-code elimination drops them (their names stay used, as in FX).
//! Getitems of a decomposed multi-output op (`native_layer_norm`, `native_dropout`,
//! `native_layer_norm_backward`) disappear: their readers read the replacement values.

use std::collections::BTreeSet;
use std::f64::consts::{FRAC_1_SQRT_2, FRAC_2_SQRT_PI, SQRT_2};

use graphbug_ir::{
    Device, Dtype, Graph, Layout, MemoryFormat, Meta, Namespace, Node, NodeId, NodeKind, NodeName,
    OpName, TensorMeta, Value,
};

use crate::error::AutodiffError;

type Result<R> = std::result::Result<R, AutodiffError>;

// ------------------------------------------------------------------ the set

/// One decomposition graphbug has.
struct Entry {
    name: &'static str,
    overload: &'static str,
    /// In `DecompositionSet::default()`.
    default: bool,
    /// In `DecompositionSet::inductor()`.
    inductor: bool,
}

const fn entry(name: &'static str, overload: &'static str, default: bool, inductor: bool) -> Entry {
    Entry {
        name,
        overload,
        default,
        inductor,
    }
}

/// Every decomposition, sorted by op name.
const TABLE: [Entry; 21] = [
    entry("_log_softmax", "default", true, true),
    entry("_log_softmax_backward_data", "default", true, true),
    entry("_softmax", "default", true, true),
    entry("_softmax_backward_data", "default", true, false),
    entry("addmm", "default", true, false),
    entry("gelu", "default", true, true),
    entry("gelu_backward", "default", true, true),
    entry("mse_loss", "default", true, true),
    entry("mse_loss_backward", "default", true, true),
    entry("native_dropout", "default", true, true),
    entry("native_dropout_backward", "default", true, true),
    entry("native_layer_norm", "default", true, true),
    entry("native_layer_norm_backward", "default", true, true),
    entry("rsub", "Scalar", true, true),
    entry("rsub", "Tensor", true, true),
    entry("sigmoid_backward", "default", true, true),
    entry("silu", "default", true, true),
    entry("silu_backward", "default", true, true),
    entry("tanh_backward", "default", true, true),
    entry("threshold_backward", "default", true, true),
    entry("var_mean", "correction", false, false),
];

/// Which op overloads [`decompose`] replaces.
///
/// The default set is every decomposition except `var_mean.correction`, which inductor
/// keeps (the `native_layer_norm` decomposition emits it); [`DecompositionSet::all`] adds
/// it. Ops are named as in [`DecompositionSet::with`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DecompositionSet {
    ops: BTreeSet<OpName>,
}

impl Default for DecompositionSet {
    /// Every decomposition except `var_mean.correction`.
    fn default() -> Self {
        Self::from_table(|e| e.default)
    }
}

impl DecompositionSet {
    fn from_table(pick: impl Fn(&Entry) -> bool) -> Self {
        DecompositionSet {
            ops: TABLE
                .iter()
                .filter(|e| pick(e))
                .map(|e| OpName::aten(e.name, e.overload))
                .collect(),
        }
    }

    /// Every decomposition graphbug has.
    pub fn all() -> Self {
        Self::from_table(|_| true)
    }

    /// No decomposition: [`decompose`] returns an equal graph.
    pub fn none() -> Self {
        DecompositionSet {
            ops: BTreeSet::new(),
        }
    }

    /// What inductor's own table decomposes of these: the default set without
    /// `_softmax_backward_data` and `addmm`, which inductor excludes or lowers directly.
    pub fn inductor() -> Self {
        Self::from_table(|e| e.inductor)
    }

    /// Every op overload graphbug can decompose, sorted.
    pub fn supported() -> Vec<OpName> {
        Self::all().ops()
    }

    /// The op overloads in this set, sorted.
    pub fn ops(&self) -> Vec<OpName> {
        self.ops.iter().cloned().collect()
    }

    /// True when the set holds no op.
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }

    /// The set of exactly the named ops (each spelled as for [`DecompositionSet::with`]).
    pub fn select<I, S>(names: I) -> Result<Self>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        names
            .into_iter()
            .try_fold(Self::none(), |set, name| set.with(name.as_ref()))
    }

    /// This set plus the named ops: an overload (`aten::rsub.Scalar`, `aten.gelu.default`,
    /// `torch.ops.aten.gelu.default`, `gelu.default`) or every overload of a name (`gelu`,
    /// `aten::rsub`, `aten.rsub`). Unknown names are an
    /// [`AutodiffError::UnknownDecomposition`].
    pub fn with(mut self, name: &str) -> Result<Self> {
        self.ops.extend(resolve(name)?);
        Ok(self)
    }

    /// This set without the named ops (spelled as for [`DecompositionSet::with`]).
    pub fn without(mut self, name: &str) -> Result<Self> {
        for op in resolve(name)? {
            self.ops.remove(&op);
        }
        Ok(self)
    }

    /// True when [`decompose`] replaces calls of `op`.
    pub fn decomposes(&self, op: &OpName) -> bool {
        self.ops.contains(op)
    }
}

/// The supported overloads a user-given name stands for.
fn resolve(name: &str) -> Result<Vec<OpName>> {
    let unknown = || AutodiffError::UnknownDecomposition {
        name: name.to_string(),
        known: TABLE
            .iter()
            .map(|e| format!("aten::{}.{}", e.name, e.overload))
            .collect::<Vec<_>>()
            .join(", "),
    };
    let text = name.trim();
    let text = text.strip_prefix("torch.ops.").unwrap_or(text);
    let (packet, overload) = match text.split_once("::") {
        Some((ns, rest)) => {
            if ns != "aten" {
                return Err(unknown());
            }
            match rest.split_once('.') {
                Some((p, o)) => (p, Some(o)),
                None => (rest, None),
            }
        }
        None => match text.split('.').collect::<Vec<_>>().as_slice() {
            [p] | ["aten", p] => (*p, None),
            ["aten", p, o] | [p, o] => (*p, Some(*o)),
            _ => return Err(unknown()),
        },
    };
    let found: Vec<OpName> = TABLE
        .iter()
        .filter(|e| e.name == packet && overload.is_none_or(|o| o == e.overload))
        .map(|e| OpName::aten(e.name, e.overload))
        .collect();
    if found.is_empty() {
        return Err(unknown());
    }
    Ok(found)
}

// ------------------------------------------------------------------ the pass

/// Replaces every call of an op in `set` by the primitive aten ops PyTorch's decomposition
/// emits, filling each new node's meta; see the module documentation.
///
/// Placeholders, outputs and every other node stay as they are. Fails, naming the node
/// and op, when a decomposed node lacks the metas of its inputs, has arguments its op does
/// not accept, or is annotated with a meta its decomposition does not produce.
pub fn decompose(graph: &Graph, set: &DecompositionSet) -> Result<Graph> {
    decompose_with(graph, set, &mut |_| true)
}

/// [`decompose`], asking `allow` before decomposing each node of `graph` (in graph order):
/// a node it refuses stays as it is (`graphbug bisect` limits the decompositions so).
pub fn decompose_with(
    graph: &Graph,
    set: &DecompositionSet,
    allow: &mut dyn FnMut(&Node) -> bool,
) -> Result<Graph> {
    graph.verify()?;
    let mut rw = Rewriter {
        set,
        nodes: Vec::with_capacity(graph.nodes.len() * 2),
        created: Vec::with_capacity(graph.nodes.len() * 2),
        names: Namespace::new(),
        device: graph_device(graph),
        depth: 0,
    };
    for node in &graph.nodes {
        rw.names.reserve(&node.name);
    }
    let mut map: Vec<Mapped> = Vec::with_capacity(graph.nodes.len());
    for node in &graph.nodes {
        let mapped = match &node.kind {
            NodeKind::GetItem { source, index } => match &map[source.index()] {
                Mapped::Items(items) => match items.get(*index) {
                    Some(Some(id)) => Mapped::Node(*id),
                    _ => {
                        let src = graph.node(*source);
                        return Err(AutodiffError::Unsupported {
                            node: node.name.to_string(),
                            op: src.op().map_or_else(String::new, OpName::to_string),
                            message: format!(
                                "reads output {index} of `{}`, which its decomposition leaves undefined",
                                src.name
                            ),
                        });
                    }
                },
                Mapped::Node(src) => Mapped::Node(rw.push(
                    node.name.clone(),
                    NodeKind::GetItem {
                        source: *src,
                        index: *index,
                    },
                    node.meta.clone(),
                    false,
                )),
            },
            NodeKind::Call { op, args, kwargs } if set.decomposes(op) && allow(node) => {
                let args = args
                    .iter()
                    .map(|v| remap(graph, &map, v, &node.name))
                    .collect::<Result<Vec<_>>>()?;
                let kwargs = kwargs
                    .iter()
                    .map(|(k, v)| Ok((k.clone(), remap(graph, &map, v, &node.name)?)))
                    .collect::<Result<Vec<_>>>()?;
                let site = Site {
                    node: &node.name,
                    op,
                    args: &args,
                    kwargs: &kwargs,
                    annotated: Some(&node.meta),
                };
                let out = rw.dispatch(&site)?;
                check_annotation(&site, &node.meta, &out)?;
                match out {
                    Out::One(v) => Mapped::Node(v.id),
                    Out::Many(items) => {
                        Mapped::Items(items.into_iter().map(|v| v.map(|v| v.id)).collect())
                    }
                }
            }
            _ => {
                let mut failed = None;
                let kind = node.try_remap_kind(&mut |src| match &map[src.index()] {
                    Mapped::Node(id) => Ok(*id),
                    Mapped::Items(_) => {
                        failed = Some(whole_multi_read(graph, src, &node.name));
                        Err(())
                    }
                });
                let kind = match (kind, failed) {
                    (Ok(kind), _) => kind,
                    (Err(()), Some(e)) => return Err(e),
                    (Err(()), None) => unreachable!("the remap closure records every failure"),
                };
                Mapped::Node(rw.push(node.name.clone(), kind, node.meta.clone(), false))
            }
        };
        map.push(mapped);
    }
    let output = match &graph.output {
        Some(values) => Some(
            values
                .iter()
                .map(|v| remap(graph, &map, v, "output"))
                .collect::<Result<Vec<_>>>()?,
        ),
        None => None,
    };

    // Dead-code elimination of what the decompositions created; random ops stay, as FX
    // keeps nondeterministic-seeded ops.
    let mut keep: Vec<bool> = rw
        .created
        .iter()
        .zip(&rw.nodes)
        .map(|(&created, n)| !created || n.op().is_some_and(OpName::is_random))
        .collect();
    for v in output.iter().flatten() {
        v.for_each_node(&mut |id| keep[id.index()] = true);
    }
    for i in (0..rw.nodes.len()).rev() {
        if keep[i] {
            rw.nodes[i].for_each_input(|src| keep[src.index()] = true);
        }
    }
    let out = Graph {
        dialect: graphbug_ir::Dialect::Aten,
        param_names: Default::default(),
        name: graph.name.clone(),
        nodes: rw.nodes,
        output,
    }
    .retain(&keep)?;
    out.verify()?;
    Ok(out)
}

/// What a node of the input graph became.
enum Mapped {
    /// One node of the output graph.
    Node(NodeId),
    /// A decomposed multi-output node: the value of each output (`None` where undefined).
    Items(Vec<Option<NodeId>>),
}

fn whole_multi_read(graph: &Graph, src: NodeId, user: &str) -> AutodiffError {
    let node = graph.node(src);
    AutodiffError::Unsupported {
        node: user.to_string(),
        op: node.op().map_or_else(String::new, OpName::to_string),
        message: format!(
            "reads the multi-output node `{}` as a whole; after its decomposition only its getitems can be read",
            node.name
        ),
    }
}

/// An argument with its node references moved to the output graph.
fn remap(graph: &Graph, map: &[Mapped], v: &Value, user: &str) -> Result<Value> {
    let mut failed = None;
    let out = v.try_remap(&mut |src| match &map[src.index()] {
        Mapped::Node(id) => Ok(*id),
        Mapped::Items(_) => {
            failed = Some(whole_multi_read(graph, src, user));
            Err(())
        }
    });
    match (out, failed) {
        (Ok(v), _) => Ok(v),
        (Err(()), Some(e)) => Err(e),
        (Err(()), None) => unreachable!("the remap closure records every failure"),
    }
}

/// The device factory calls name: the first device the graph mentions, else the CPU (the
/// interpreter runs every device argument on its own device anyway).
fn graph_device(graph: &Graph) -> Device {
    fn find(v: &Value) -> Option<Device> {
        match v {
            Value::Device(d) => Some(d.clone()),
            Value::List(items) | Value::Tuple(items) => items.iter().find_map(find),
            _ => None,
        }
    }
    graph
        .nodes
        .iter()
        .find_map(|n| match &n.kind {
            NodeKind::Call { args, kwargs, .. } => args
                .iter()
                .chain(kwargs.iter().map(|(_, v)| v))
                .find_map(find),
            _ => None,
        })
        .unwrap_or_else(Device::cpu)
}

/// Fails when a decomposition's result contradicts the decomposed node's annotation.
fn check_annotation(s: &Site<'_>, meta: &Meta, out: &Out) -> Result<()> {
    let differ = |what: String, want: &TensorMeta, got: &TensorMeta| {
        s.error(format!(
            "its decomposition gives {what}{got}, but the node is annotated {want}"
        ))
    };
    match (meta, out) {
        (Meta::Tensor(want), Out::One(v)) if *want != v.meta => {
            Err(differ(String::new(), want, &v.meta))
        }
        (Meta::Multi(want), Out::Many(items)) => {
            for (k, (w, v)) in want.iter().zip(items).enumerate() {
                if let (Some(w), Some(v)) = (w, v) {
                    if *w != v.meta {
                        return Err(differ(format!("output {k} as "), w, &v.meta));
                    }
                }
            }
            Ok(())
        }
        (Meta::Tensor(_), Out::Many(_)) => {
            Err(s.error("annotated as one tensor, but its decomposition gives several outputs"))
        }
        (Meta::Multi(_), Out::One(_)) => {
            Err(s.error("annotated with several outputs, but its decomposition gives one tensor"))
        }
        _ => Ok(()),
    }
}

// ------------------------------------------------------------------ values and types

/// A tensor of the output graph and its meta.
#[derive(Clone, Debug, PartialEq)]
struct Val {
    id: NodeId,
    meta: TensorMeta,
}

impl Val {
    fn value(&self) -> Value {
        Value::Node(self.id)
    }

    fn shape(&self) -> &[i64] {
        &self.meta.shape
    }

    fn dtype(&self) -> Dtype {
        self.meta.dtype
    }
}

/// What a decomposition returns.
enum Out {
    /// One tensor.
    One(Val),
    /// Several outputs (`None` where PyTorch returns None).
    Many(Vec<Option<Val>>),
}

/// An operand of a pointwise op: a tensor or a Python scalar.
#[derive(Clone, Debug)]
enum Operand {
    Tensor(Val),
    Scalar(Value),
}

impl Operand {
    fn value(&self) -> Value {
        match self {
            Operand::Tensor(v) => v.value(),
            Operand::Scalar(s) => s.clone(),
        }
    }

    fn shape(&self) -> &[i64] {
        match self {
            Operand::Tensor(v) => v.shape(),
            Operand::Scalar(_) => &[],
        }
    }
}

impl From<&Val> for Operand {
    fn from(v: &Val) -> Self {
        Operand::Tensor(v.clone())
    }
}

impl From<f64> for Operand {
    fn from(f: f64) -> Self {
        Operand::Scalar(Value::Float(f))
    }
}

impl From<i64> for Operand {
    fn from(i: i64) -> Self {
        Operand::Scalar(Value::Int(i))
    }
}

impl From<i32> for Operand {
    fn from(i: i32) -> Self {
        Operand::Scalar(Value::Int(i64::from(i)))
    }
}

/// bool < integers < floating point < complex, as PyTorch's type categories.
fn category(d: Dtype) -> u8 {
    if d == Dtype::Bool {
        0
    } else if d.is_complex() {
        3
    } else if d.is_floating_point() {
        2
    } else {
        1
    }
}

/// `torch.promote_types`.
fn promote_types(a: Dtype, b: Dtype) -> Dtype {
    use Dtype::*;
    if a == b {
        return a;
    }
    let (ca, cb) = (category(a), category(b));
    if ca != cb {
        let (hi, lo) = if ca > cb { (a, b) } else { (b, a) };
        return if hi == Complex64 && lo == Float64 {
            Complex128
        } else {
            hi
        };
    }
    match (a, b) {
        (Float16, BFloat16) | (BFloat16, Float16) => Float32,
        (UInt8, Int8) | (Int8, UInt8) => Int16,
        (UInt8, x) | (x, UInt8) => x,
        _ if a.itemsize() >= b.itemsize() => a,
        _ => b,
    }
}

/// c10's `combine_categories`: the higher-priority result unless a lower-priority operand
/// is of a higher category.
fn combine(higher: Option<Dtype>, lower: Option<Dtype>) -> Option<Dtype> {
    let (Some(h), Some(l)) = (higher, lower) else {
        return higher.or(lower);
    };
    if h.is_complex() {
        Some(h)
    } else if l.is_complex() {
        Some(promote_types(h, l))
    } else if h.is_floating_point() {
        Some(h)
    } else if h == Dtype::Bool || l.is_floating_point() {
        Some(promote_types(h, l))
    } else {
        Some(h)
    }
}

/// `torch.result_type` of pointwise operands: dimensioned tensors before 0-d tensors before
/// Python scalars (a float scalar counting as the default dtype, float32).
fn result_type<'o>(operands: impl IntoIterator<Item = &'o Operand>) -> Dtype {
    let (mut dim, mut zero, mut wrapped): (Option<Dtype>, Option<Dtype>, Option<Dtype>) =
        (None, None, None);
    let fold = |acc: &mut Option<Dtype>, d: Dtype| {
        *acc = Some(acc.map_or(d, |a| promote_types(a, d)));
    };
    for op in operands {
        match op {
            Operand::Tensor(v) if !v.shape().is_empty() => fold(&mut dim, v.dtype()),
            Operand::Tensor(v) => fold(&mut zero, v.dtype()),
            Operand::Scalar(Value::Bool(_)) => fold(&mut wrapped, Dtype::Bool),
            Operand::Scalar(Value::Int(_)) => fold(&mut wrapped, Dtype::Int64),
            Operand::Scalar(_) => fold(&mut wrapped, Dtype::Float32),
        }
    }
    combine(dim, combine(zero, wrapped)).unwrap_or(Dtype::Float32)
}

/// The dtype PyTorch computes in (`get_computation_dtype`): float32 for half precision.
fn opmath(d: Dtype) -> Dtype {
    match d {
        Dtype::Float16 | Dtype::BFloat16 => Dtype::Float32,
        other => other,
    }
}

/// `dim` wrapped into `0..ndim` (a 0-d tensor takes 0 and -1).
fn wrap_dim(dim: i64, ndim: usize) -> Option<usize> {
    let n = ndim.max(1) as i64;
    let d = if dim < 0 { dim + n } else { dim };
    (0..n).contains(&d).then_some(d as usize)
}

fn ints(v: &[i64]) -> Value {
    Value::List(v.iter().map(|&i| Value::Int(i)).collect())
}

/// Number of elements, saturating on absurd shapes.
fn numel(shape: &[i64]) -> i64 {
    shape.iter().fold(1i64, |n, &d| n.saturating_mul(d))
}

// ------------------------------------------------------------------ call sites

/// Position of keyword-only arguments in [`Site::arg`].
const KW: usize = usize::MAX;

/// A call being decomposed, its arguments already in the output graph.
struct Site<'s> {
    /// The input-graph node the call comes from (for errors).
    node: &'s str,
    op: &'s OpName,
    args: &'s [Value],
    kwargs: &'s [(String, Value)],
    /// The node's own annotation (none for calls a decomposition emitted).
    annotated: Option<&'s Meta>,
}

impl Site<'_> {
    fn error(&self, message: impl Into<String>) -> AutodiffError {
        AutodiffError::Unsupported {
            node: self.node.to_string(),
            op: self.op.to_string(),
            message: message.into(),
        }
    }

    /// Argument `pos`, or keyword `name`.
    fn arg(&self, pos: usize, name: &str) -> Option<&Value> {
        self.args
            .get(pos)
            .or_else(|| self.kwargs.iter().find(|(k, _)| k == name).map(|(_, v)| v))
    }

    fn tensor(&self, rw: &Rewriter<'_>, pos: usize, name: &str) -> Result<Val> {
        match self.arg(pos, name) {
            Some(Value::Node(id)) => rw.val(*id).ok_or_else(|| AutodiffError::MissingMeta {
                node: self.node.to_string(),
                message: format!(
                    "its `{name}` (`{}`) has no dtype and shape, which decomposing {} needs",
                    rw.nodes[id.index()].name,
                    self.op
                ),
            }),
            Some(v) => Err(self.error(format!("argument `{name}` is not a tensor: {v:?}"))),
            None => Err(self.error(format!("argument `{name}` is missing"))),
        }
    }

    fn opt_tensor(&self, rw: &Rewriter<'_>, pos: usize, name: &str) -> Result<Option<Val>> {
        match self.arg(pos, name) {
            None | Some(Value::None) => Ok(None),
            Some(_) => self.tensor(rw, pos, name).map(Some),
        }
    }

    fn operand(&self, rw: &Rewriter<'_>, pos: usize, name: &str) -> Result<Operand> {
        match self.arg(pos, name) {
            Some(Value::Node(_)) => self.tensor(rw, pos, name).map(Operand::Tensor),
            Some(v @ (Value::Int(_) | Value::Float(_) | Value::Bool(_))) => {
                Ok(Operand::Scalar(v.clone()))
            }
            Some(v) => Err(self.error(format!(
                "argument `{name}` is neither a tensor nor a number: {v:?}"
            ))),
            None => Err(self.error(format!("argument `{name}` is missing"))),
        }
    }

    /// A number argument, as given (`default` when absent or None).
    fn scalar(&self, pos: usize, name: &str, default: Value) -> Result<Value> {
        match self.arg(pos, name) {
            None | Some(Value::None) => Ok(default),
            Some(v @ (Value::Int(_) | Value::Float(_) | Value::Bool(_))) => Ok(v.clone()),
            Some(v) => Err(self.error(format!("argument `{name}` is not a number: {v:?}"))),
        }
    }

    fn int(&self, pos: usize, name: &str, default: Option<i64>) -> Result<i64> {
        match self.arg(pos, name) {
            None | Some(Value::None) => {
                default.ok_or_else(|| self.error(format!("argument `{name}` is missing")))
            }
            Some(Value::Int(i)) => Ok(*i),
            Some(Value::Bool(b)) => Ok(i64::from(*b)),
            Some(v) => Err(self.error(format!("argument `{name}` is not an int: {v:?}"))),
        }
    }

    fn float(&self, pos: usize, name: &str, default: Option<f64>) -> Result<f64> {
        match self.arg(pos, name) {
            None | Some(Value::None) => {
                default.ok_or_else(|| self.error(format!("argument `{name}` is missing")))
            }
            Some(Value::Float(f)) => Ok(*f),
            Some(Value::Int(i)) => Ok(*i as f64),
            Some(v) => Err(self.error(format!("argument `{name}` is not a number: {v:?}"))),
        }
    }

    fn opt_flag(&self, pos: usize, name: &str) -> Result<Option<bool>> {
        match self.arg(pos, name) {
            None | Some(Value::None) => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(v) => Err(self.error(format!("argument `{name}` is not a bool: {v:?}"))),
        }
    }

    fn flag(&self, pos: usize, name: &str, default: Option<bool>) -> Result<bool> {
        self.opt_flag(pos, name)?
            .or(default)
            .ok_or_else(|| self.error(format!("argument `{name}` is missing")))
    }

    fn opt_ints(&self, pos: usize, name: &str) -> Result<Option<Vec<i64>>> {
        match self.arg(pos, name) {
            None | Some(Value::None) => Ok(None),
            Some(Value::Int(i)) => Ok(Some(vec![*i])),
            Some(Value::List(items) | Value::Tuple(items)) => items
                .iter()
                .map(|v| match v {
                    Value::Int(i) => Ok(*i),
                    _ => Err(self.error(format!("argument `{name}` is not an int list"))),
                })
                .collect::<Result<Vec<_>>>()
                .map(Some),
            Some(v) => Err(self.error(format!("argument `{name}` is not an int list: {v:?}"))),
        }
    }

    fn ints(&self, pos: usize, name: &str) -> Result<Vec<i64>> {
        self.opt_ints(pos, name)?
            .ok_or_else(|| self.error(format!("argument `{name}` is missing")))
    }

    fn flags(&self, pos: usize, name: &str) -> Result<Vec<bool>> {
        match self.arg(pos, name) {
            Some(Value::List(items) | Value::Tuple(items)) => items
                .iter()
                .map(|v| match v {
                    Value::Bool(b) => Ok(*b),
                    _ => Err(self.error(format!("argument `{name}` is not a bool list"))),
                })
                .collect(),
            Some(v) => Err(self.error(format!("argument `{name}` is not a bool list: {v:?}"))),
            None => Err(self.error(format!("argument `{name}` is missing"))),
        }
    }

    fn string(&self, pos: usize, name: &str, default: &str) -> Result<String> {
        match self.arg(pos, name) {
            None | Some(Value::None) => Ok(default.to_string()),
            Some(Value::Str(s)) => Ok(s.clone()),
            Some(v) => Err(self.error(format!("argument `{name}` is not a string: {v:?}"))),
        }
    }

    fn dtype(&self, pos: usize, name: &str) -> Result<Dtype> {
        match self.arg(pos, name) {
            Some(Value::Dtype(d)) => Ok(*d),
            Some(v) => Err(self.error(format!("argument `{name}` is not a dtype: {v:?}"))),
            None => Err(self.error(format!("argument `{name}` is missing"))),
        }
    }

    fn wrap(&self, dim: i64, ndim: usize) -> Result<usize> {
        wrap_dim(dim, ndim).ok_or_else(|| {
            self.error(format!(
                "dimension {dim} is out of range for a {ndim}-d tensor"
            ))
        })
    }

    /// Fails unless `v` has a floating-point dtype, naming the argument.
    fn floating(&self, v: &Val, name: &str) -> Result<()> {
        if v.dtype().is_floating_point() {
            Ok(())
        } else {
            Err(self.error(format!(
                "`{name}` is {}, but the decomposition handles floating-point tensors only",
                v.meta
            )))
        }
    }

    fn broadcast(&self, a: &[i64], b: &[i64]) -> Result<Vec<i64>> {
        let n = a.len().max(b.len());
        let at = |s: &[i64], i: usize| {
            if i + s.len() >= n {
                s[i + s.len() - n]
            } else {
                1
            }
        };
        (0..n)
            .map(|i| {
                let (x, y) = (at(a, i), at(b, i));
                if x == y || y == 1 {
                    Ok(x)
                } else if x == 1 {
                    Ok(y)
                } else {
                    Err(self.error(format!("shapes {a:?} and {b:?} do not broadcast")))
                }
            })
            .collect()
    }

    /// The shape of a reduction over `dims` (all of them when empty).
    fn reduced(&self, shape: &[i64], dims: &[i64], keepdim: bool) -> Result<Vec<i64>> {
        let mut reduce = vec![dims.is_empty(); shape.len()];
        for &d in dims {
            let w = self.wrap(d, shape.len())?;
            if let Some(r) = reduce.get_mut(w) {
                *r = true;
            }
        }
        Ok(shape
            .iter()
            .zip(&reduce)
            .filter_map(|(&size, &r)| match (r, keepdim) {
                (false, _) => Some(size),
                (true, true) => Some(1),
                (true, false) => None,
            })
            .collect())
    }
}

// ------------------------------------------------------------------ the rewriter

/// The output graph under construction.
struct Rewriter<'a> {
    set: &'a DecompositionSet,
    nodes: Vec<Node>,
    /// Whether each node was made by a decomposition (and may be dropped when dead).
    created: Vec<bool>,
    names: Namespace,
    device: Device,
    /// Nesting of decompositions inside decompositions.
    depth: usize,
}

/// How deep decompositions may nest (ours nest once: `native_layer_norm` → `var_mean`).
const MAX_DEPTH: usize = 8;

impl Rewriter<'_> {
    /// The tensor a node holds, with its meta (a getitem's from its source if need be).
    fn val(&self, id: NodeId) -> Option<Val> {
        let node = self.nodes.get(id.index())?;
        let meta = match (&node.meta, &node.kind) {
            (Meta::Tensor(t), _) => t.clone(),
            (Meta::Unknown, NodeKind::GetItem { source, index }) => {
                self.nodes.get(source.index())?.meta.item(*index)?.clone()
            }
            _ => return None,
        };
        Some(Val { id, meta })
    }

    fn push(&mut self, name: NodeName, kind: NodeKind, meta: Meta, created: bool) -> NodeId {
        let id = NodeId(self.nodes.len() as u32);
        self.nodes.push(Node { name, kind, meta });
        self.created.push(created);
        id
    }

    fn emit(&mut self, base: &str, kind: NodeKind, meta: Meta) -> NodeId {
        let name = self.names.create_name(base);
        self.push(name.into(), kind, meta, true)
    }

    /// Runs the decomposition of `s.op`.
    fn dispatch(&mut self, s: &Site<'_>) -> Result<Out> {
        let one = |r: Result<Val>| r.map(Out::One);
        match (s.op.name.as_str(), s.op.overload.as_str()) {
            ("gelu", "default") => one(gelu(self, s)),
            ("gelu_backward", "default") => one(gelu_backward(self, s)),
            ("silu", "default") => one(silu(self, s)),
            ("silu_backward", "default") => one(silu_backward(self, s)),
            ("sigmoid_backward", "default") => one(sigmoid_backward(self, s)),
            ("tanh_backward", "default") => one(tanh_backward(self, s)),
            ("threshold_backward", "default") => one(threshold_backward(self, s)),
            ("_softmax", "default") => one(softmax(self, s, false)),
            ("_log_softmax", "default") => one(softmax(self, s, true)),
            ("_softmax_backward_data", "default") => one(softmax_backward(self, s, false)),
            ("_log_softmax_backward_data", "default") => one(softmax_backward(self, s, true)),
            ("native_layer_norm", "default") => native_layer_norm(self, s),
            ("native_layer_norm_backward", "default") => native_layer_norm_backward(self, s),
            ("addmm", "default") => one(addmm(self, s)),
            ("native_dropout", "default") => native_dropout(self, s),
            ("native_dropout_backward", "default") => one(native_dropout_backward(self, s)),
            ("mse_loss", "default") => one(mse_loss(self, s)),
            ("mse_loss_backward", "default") => one(mse_loss_backward(self, s)),
            ("rsub", "Tensor" | "Scalar") => one(rsub(self, s)),
            ("var_mean", "correction") => var_mean(self, s),
            _ => Err(s.error("graphbug has no decomposition for this op")),
        }
    }

    /// Decomposes a call a decomposition emits, as tracing re-dispatches it.
    fn nested(
        &mut self,
        s: &Site<'_>,
        op: &OpName,
        args: &[Value],
        kwargs: &[(String, Value)],
    ) -> Result<Out> {
        if self.depth >= MAX_DEPTH {
            return Err(s.error(format!(
                "decompositions nest more than {MAX_DEPTH} deep at {op}"
            )));
        }
        self.depth += 1;
        let inner = Site {
            node: s.node,
            op,
            args,
            kwargs,
            annotated: None,
        };
        let out = self.dispatch(&inner);
        self.depth -= 1;
        out
    }

    /// Emits `aten.<name>.<overload>(args, kwargs)` returning one tensor with `meta` (or
    /// its decomposition, when the set holds the op).
    fn call(
        &mut self,
        s: &Site<'_>,
        name: &str,
        overload: &str,
        args: Vec<Value>,
        kwargs: Vec<(&str, Value)>,
        meta: TensorMeta,
    ) -> Result<Val> {
        let op = OpName::aten(name, overload);
        let kwargs: Vec<(String, Value)> = kwargs
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect();
        if self.set.decomposes(&op) {
            return match self.nested(s, &op, &args, &kwargs)? {
                Out::One(v) if v.meta == meta => Ok(v),
                Out::One(v) => Err(s.error(format!(
                    "the decomposition of {op} gives {}, not the {meta} expected",
                    v.meta
                ))),
                Out::Many(_) => Err(s.error(format!(
                    "the decomposition of {op} gives several outputs where one is expected"
                ))),
            };
        }
        let id = self.emit(
            name,
            NodeKind::Call { op, args, kwargs },
            Meta::Tensor(meta.clone()),
        );
        Ok(Val { id, meta })
    }

    /// Emits a call returning several tensors, and a getitem for each.
    fn call_multi(
        &mut self,
        s: &Site<'_>,
        name: &str,
        overload: &str,
        args: Vec<Value>,
        kwargs: Vec<(&str, Value)>,
        metas: Vec<TensorMeta>,
    ) -> Result<Vec<Val>> {
        let op = OpName::aten(name, overload);
        let kwargs: Vec<(String, Value)> = kwargs
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect();
        if self.set.decomposes(&op) {
            let Out::Many(items) = self.nested(s, &op, &args, &kwargs)? else {
                return Err(s.error(format!(
                    "the decomposition of {op} gives one tensor where several are expected"
                )));
            };
            return items
                .into_iter()
                .zip(&metas)
                .map(|(v, want)| match v {
                    Some(v) if v.meta == *want => Ok(v),
                    _ => Err(s.error(format!(
                        "the decomposition of {op} does not give the {want} expected"
                    ))),
                })
                .collect();
        }
        let source = self.emit(
            name,
            NodeKind::Call { op, args, kwargs },
            Meta::Multi(metas.iter().cloned().map(Some).collect()),
        );
        Ok(metas
            .into_iter()
            .enumerate()
            .map(|(index, meta)| {
                let id = self.emit(
                    "getitem",
                    NodeKind::GetItem { source, index },
                    Meta::Tensor(meta.clone()),
                );
                Val { id, meta }
            })
            .collect())
    }

    /// `torch.<name>(x)` for an elementwise op keeping dtype and shape.
    fn unary(&mut self, s: &Site<'_>, name: &str, x: &Val) -> Result<Val> {
        self.call(s, name, "default", vec![x.value()], vec![], x.meta.clone())
    }

    /// `aten.<name>.Tensor(a, b)` with broadcasting and type promotion (`div` is true
    /// division).
    fn binary(
        &mut self,
        s: &Site<'_>,
        name: &str,
        a: impl Into<Operand>,
        b: impl Into<Operand>,
    ) -> Result<Val> {
        let (a, b) = (a.into(), b.into());
        let shape = s.broadcast(a.shape(), b.shape())?;
        let mut dtype = result_type([&a, &b]);
        if name == "div" && category(dtype) < 2 {
            dtype = Dtype::Float32;
        }
        self.call(
            s,
            name,
            "Tensor",
            vec![a.value(), b.value()],
            vec![],
            TensorMeta::new(dtype, shape),
        )
    }

    /// `other - x` for a Python number `other`: `rsub.Scalar(x, other)`, which the default
    /// set turns into `sub.Tensor(other, x)`.
    fn rsub_scalar(&mut self, s: &Site<'_>, other: impl Into<Operand>, x: &Val) -> Result<Val> {
        let other = other.into();
        let dtype = result_type([&Operand::Tensor(x.clone()), &other]);
        self.call(
            s,
            "rsub",
            "Scalar",
            vec![x.value(), other.value()],
            vec![],
            TensorMeta::new(dtype, x.shape()),
        )
    }

    /// A comparison with a number (`le.Scalar`, `gt.Scalar`).
    fn compare(&mut self, s: &Site<'_>, name: &str, x: &Val, other: Value) -> Result<Val> {
        self.call(
            s,
            name,
            "Scalar",
            vec![x.value(), other],
            vec![],
            TensorMeta::new(Dtype::Bool, x.shape()),
        )
    }

    /// `torch.sum(x, dims, keepdim)` (`sum.dim_IntList`).
    fn sum_dims(&mut self, s: &Site<'_>, x: &Val, dims: &[i64], keepdim: bool) -> Result<Val> {
        let shape = s.reduced(x.shape(), dims, keepdim)?;
        self.reduction(s, "sum", "dim_IntList", x, dims, keepdim, shape)
    }

    /// `torch.amax(x, dims, keepdim)`.
    fn amax(&mut self, s: &Site<'_>, x: &Val, dims: &[i64], keepdim: bool) -> Result<Val> {
        let shape = s.reduced(x.shape(), dims, keepdim)?;
        self.reduction(s, "amax", "default", x, dims, keepdim, shape)
    }

    /// `torch.mean(x, dims, keepdim)` (`mean.dim`).
    fn mean_dims(&mut self, s: &Site<'_>, x: &Val, dims: &[i64], keepdim: bool) -> Result<Val> {
        let shape = s.reduced(x.shape(), dims, keepdim)?;
        self.reduction(s, "mean", "dim", x, dims, keepdim, shape)
    }

    #[allow(clippy::too_many_arguments)]
    fn reduction(
        &mut self,
        s: &Site<'_>,
        name: &str,
        overload: &str,
        x: &Val,
        dims: &[i64],
        keepdim: bool,
        shape: Vec<i64>,
    ) -> Result<Val> {
        let mut args = vec![x.value(), ints(dims)];
        // `keepdim=False` is a trailing default, which traced graphs leave out.
        if keepdim {
            args.push(Value::Bool(true));
        }
        self.call(
            s,
            name,
            overload,
            args,
            vec![],
            TensorMeta::new(x.dtype(), shape),
        )
    }

    /// `x.to(dtype)`: `x` itself when it already has that dtype, else `_to_copy`.
    fn cast(&mut self, s: &Site<'_>, x: &Val, dtype: Dtype) -> Result<Val> {
        if x.dtype() == dtype {
            return Ok(x.clone());
        }
        self.call(
            s,
            "_to_copy",
            "default",
            vec![x.value()],
            vec![("dtype", Value::Dtype(dtype))],
            TensorMeta::new(dtype, x.shape()),
        )
    }

    /// PyTorch's `pw_cast_for_opmath`: the tensors in the computation dtype of their
    /// promoted type (float32 for half precision), and the dtype the result returns to.
    fn opmath_cast(&mut self, s: &Site<'_>, tensors: &[&Val]) -> Result<(Vec<Val>, Dtype)> {
        let operands: Vec<Operand> = tensors.iter().map(|t| Operand::from(*t)).collect();
        let result = result_type(&operands);
        let compute = opmath(result);
        let cast = tensors
            .iter()
            .map(|t| self.cast(s, t, compute))
            .collect::<Result<Vec<_>>>()?;
        Ok((cast, result))
    }

    /// `torch.full(shape, fill, dtype=.., layout=torch.strided, device=..)`, as inductor's
    /// `full_like` (behind `zeros_like` / `ones_like` / `new_zeros`) traces.
    fn full(&mut self, s: &Site<'_>, shape: &[i64], fill: Value, dtype: Dtype) -> Result<Val> {
        let device = Value::Device(self.device.clone());
        self.call(
            s,
            "full",
            "default",
            vec![ints(shape), fill],
            vec![
                ("dtype", Value::Dtype(dtype)),
                ("layout", Value::Layout(Layout::Strided)),
                ("device", device),
                ("pin_memory", Value::Bool(false)),
            ],
            TensorMeta::new(dtype, shape),
        )
    }

    /// Zeros shaped and typed as given (`zeros_like` / `new_zeros`).
    fn zeros(&mut self, s: &Site<'_>, shape: &[i64], dtype: Dtype) -> Result<Val> {
        let fill = if dtype == Dtype::Bool {
            Value::Bool(false)
        } else {
            Value::Int(0)
        };
        self.full(s, shape, fill, dtype)
    }
}

// ------------------------------------------------------------------ pointwise activations

/// `torch._refs.nn.functional.gelu`, computed in float32 for half precision.
fn gelu(rw: &mut Rewriter<'_>, s: &Site<'_>) -> Result<Val> {
    let x = s.tensor(rw, 0, "self")?;
    let approximate = s.string(KW, "approximate", "none")?;
    s.floating(&x, "self")?;
    let (cast, result) = rw.opmath_cast(s, &[&x])?;
    let a = &cast[0];
    let out = match approximate.as_str() {
        "none" => {
            // a * 0.5 * (1 + erf(a * M_SQRT1_2))
            let half = rw.binary(s, "mul", a, 0.5)?;
            let scaled = rw.binary(s, "mul", a, FRAC_1_SQRT_2)?;
            let erf = rw.unary(s, "erf", &scaled)?;
            let one_plus = rw.binary(s, "add", &erf, 1)?;
            rw.binary(s, "mul", &half, &one_plus)?
        }
        "tanh" => {
            // 0.5 * a * (1 + tanh(kBeta * (a + kKappa * a^3)))
            let (_, inner) = gelu_tanh_inner(rw, s, a)?;
            let half = rw.binary(s, "mul", a, 0.5)?;
            let tanh = rw.unary(s, "tanh", &inner)?;
            let one_plus = rw.binary(s, "add", &tanh, 1)?;
            rw.binary(s, "mul", &half, &one_plus)?
        }
        other => return Err(bad_approximate(s, other)),
    };
    rw.cast(s, &out, result)
}

/// kKappa of gelu's tanh approximation.
const GELU_KAPPA: f64 = 0.044715;
/// kBeta of gelu's tanh approximation, sqrt(2 / pi).
const GELU_BETA: f64 = SQRT_2 * FRAC_2_SQRT_PI * 0.5;

/// `(x², kBeta * (x + kKappa * x³))`: the part gelu's tanh approximation and its backward
/// share.
fn gelu_tanh_inner(rw: &mut Rewriter<'_>, s: &Site<'_>, x: &Val) -> Result<(Val, Val)> {
    let square = rw.binary(s, "mul", x, x)?;
    let cube = rw.binary(s, "mul", &square, x)?;
    let kappa_cube = rw.binary(s, "mul", &cube, GELU_KAPPA)?;
    let sum = rw.binary(s, "add", x, &kappa_cube)?;
    let inner = rw.binary(s, "mul", &sum, GELU_BETA)?;
    Ok((square, inner))
}

fn bad_approximate(s: &Site<'_>, other: &str) -> AutodiffError {
    s.error(format!(
        "approximate must be 'none' or 'tanh', not '{other}'"
    ))
}

/// `gelu_backward` of `torch/_decomp/decompositions.py`.
fn gelu_backward(rw: &mut Rewriter<'_>, s: &Site<'_>) -> Result<Val> {
    let grad = s.tensor(rw, 0, "grad_output")?;
    let x = s.tensor(rw, 1, "self")?;
    let approximate = s.string(KW, "approximate", "none")?;
    s.floating(&x, "self")?;
    let (cast, result) = rw.opmath_cast(s, &[&grad, &x])?;
    let (grad, x) = (&cast[0], &cast[1]);
    let out = match approximate.as_str() {
        "none" => {
            let k_beta = FRAC_2_SQRT_PI * FRAC_1_SQRT_2 * 0.5;
            // cdf = 0.5 * (1 + erf(x * kAlpha))
            let scaled = rw.binary(s, "mul", x, FRAC_1_SQRT_2)?;
            let erf = rw.unary(s, "erf", &scaled)?;
            let one_plus = rw.binary(s, "add", &erf, 1)?;
            let cdf = rw.binary(s, "mul", &one_plus, 0.5)?;
            // pdf = kBeta * exp(x * x * -0.5)
            let square = rw.binary(s, "mul", x, x)?;
            let neg_half = rw.binary(s, "mul", &square, -0.5)?;
            let exp = rw.unary(s, "exp", &neg_half)?;
            let pdf = rw.binary(s, "mul", &exp, k_beta)?;
            // grad * (cdf + x * pdf)
            let x_pdf = rw.binary(s, "mul", x, &pdf)?;
            let sum = rw.binary(s, "add", &cdf, &x_pdf)?;
            rw.binary(s, "mul", grad, &sum)?
        }
        "tanh" => {
            let (x_sq, inner) = gelu_tanh_inner(rw, s, x)?;
            let tanh_inner = rw.unary(s, "tanh", &inner)?;
            let left = rw.binary(s, "mul", x, 0.5)?;
            let right = rw.binary(s, "add", &tanh_inner, 1)?;
            let left_derivative = rw.binary(s, "mul", &right, 0.5)?;
            let tanh_sq = rw.binary(s, "mul", &tanh_inner, &tanh_inner)?;
            let tanh_derivative = rw.rsub_scalar(s, 1, &tanh_sq)?;
            let kappa_sq = rw.binary(s, "mul", &x_sq, 3.0 * GELU_KAPPA)?;
            let one_plus = rw.binary(s, "add", &kappa_sq, 1)?;
            let inner_derivative = rw.binary(s, "mul", &one_plus, GELU_BETA)?;
            let left_tanh = rw.binary(s, "mul", &left, &tanh_derivative)?;
            let right_derivative = rw.binary(s, "mul", &left_tanh, &inner_derivative)?;
            let total = rw.binary(s, "add", &left_derivative, &right_derivative)?;
            rw.binary(s, "mul", grad, &total)?
        }
        other => return Err(bad_approximate(s, other)),
    };
    rw.cast(s, &out, result)
}

/// `self * sigmoid(self)`.
fn silu(rw: &mut Rewriter<'_>, s: &Site<'_>) -> Result<Val> {
    let x = s.tensor(rw, 0, "self")?;
    s.floating(&x, "self")?;
    let (cast, result) = rw.opmath_cast(s, &[&x])?;
    let sigmoid = rw.unary(s, "sigmoid", &cast[0])?;
    let out = rw.binary(s, "mul", &cast[0], &sigmoid)?;
    rw.cast(s, &out, result)
}

/// `grad * sigmoid * (1 + self * (1 - sigmoid))` with `sigmoid = 1 / (1 + exp(-self))`.
fn silu_backward(rw: &mut Rewriter<'_>, s: &Site<'_>) -> Result<Val> {
    let grad = s.tensor(rw, 0, "grad_output")?;
    let x = s.tensor(rw, 1, "self")?;
    s.floating(&x, "self")?;
    let (cast, result) = rw.opmath_cast(s, &[&grad, &x])?;
    let (grad, x) = (&cast[0], &cast[1]);
    let neg = rw.unary(s, "neg", x)?;
    let exp = rw.unary(s, "exp", &neg)?;
    let one_plus = rw.binary(s, "add", &exp, 1)?;
    // `1 / t` is `t.reciprocal() * 1` (Tensor.__rdiv__).
    let reciprocal = rw.unary(s, "reciprocal", &one_plus)?;
    let sigmoid = rw.binary(s, "mul", &reciprocal, 1)?;
    let grad_sigmoid = rw.binary(s, "mul", grad, &sigmoid)?;
    let one_minus = rw.rsub_scalar(s, 1, &sigmoid)?;
    let x_one_minus = rw.binary(s, "mul", x, &one_minus)?;
    let one_plus_2 = rw.binary(s, "add", &x_one_minus, 1)?;
    let out = rw.binary(s, "mul", &grad_sigmoid, &one_plus_2)?;
    rw.cast(s, &out, result)
}

/// `grad * (y * (1 - y))`.
fn sigmoid_backward(rw: &mut Rewriter<'_>, s: &Site<'_>) -> Result<Val> {
    let grad = s.tensor(rw, 0, "grad_output")?;
    let y = s.tensor(rw, 1, "output")?;
    s.floating(&y, "output")?;
    let (cast, result) = rw.opmath_cast(s, &[&grad, &y])?;
    let (grad, y) = (&cast[0], &cast[1]);
    let one_minus = rw.rsub_scalar(s, 1, y)?;
    let product = rw.binary(s, "mul", y, &one_minus)?;
    let out = rw.binary(s, "mul", grad, &product)?;
    rw.cast(s, &out, result)
}

/// `grad * (1 - y * y)`.
fn tanh_backward(rw: &mut Rewriter<'_>, s: &Site<'_>) -> Result<Val> {
    let grad = s.tensor(rw, 0, "grad_output")?;
    let y = s.tensor(rw, 1, "output")?;
    s.floating(&y, "output")?;
    let (cast, result) = rw.opmath_cast(s, &[&grad, &y])?;
    let (grad, y) = (&cast[0], &cast[1]);
    let square = rw.binary(s, "mul", y, y)?;
    let one_minus = rw.rsub_scalar(s, 1, &square)?;
    let out = rw.binary(s, "mul", grad, &one_minus)?;
    rw.cast(s, &out, result)
}

/// `torch.where(self <= threshold, 0.0, grad)`; the scalar becomes a `scalar_tensor` with
/// `grad`'s dtype, as `where.ScalarSelf` builds it.
fn threshold_backward(rw: &mut Rewriter<'_>, s: &Site<'_>) -> Result<Val> {
    let grad = s.tensor(rw, 0, "grad_output")?;
    let x = s.tensor(rw, 1, "self")?;
    let threshold = s.scalar(2, "threshold", Value::None)?;
    if threshold == Value::None {
        return Err(s.error("argument `threshold` is missing"));
    }
    let le = rw.compare(s, "le", &x, threshold)?;
    let dtype = result_type([&Operand::from(&grad), &Operand::from(0.0)]);
    let grad = rw.cast(s, &grad, dtype)?;
    let zero = rw.call(
        s,
        "scalar_tensor",
        "default",
        vec![Value::Float(0.0)],
        vec![
            ("dtype", Value::Dtype(dtype)),
            ("layout", Value::Layout(Layout::Strided)),
            ("device", Value::Device(rw.device.clone())),
        ],
        TensorMeta::new(dtype, Vec::<i64>::new()),
    )?;
    let shape = s.broadcast(le.shape(), grad.shape())?;
    rw.call(
        s,
        "where",
        "self",
        vec![le.value(), zero.value(), grad.value()],
        vec![],
        TensorMeta::new(dtype, shape),
    )
}

// ------------------------------------------------------------------ softmax

/// `_softmax` / `_log_softmax`: `exp(x - amax) / sum` and `(x - amax) - log(sum(exp))`,
/// computed in float32 for half precision and cast back unless `half_to_float`.
fn softmax(rw: &mut Rewriter<'_>, s: &Site<'_>, log: bool) -> Result<Val> {
    let x = s.tensor(rw, 0, "self")?;
    let dim = s.int(1, "dim", None)?;
    let half_to_float = s.flag(2, "half_to_float", None)?;
    s.floating(&x, "self")?;
    if half_to_float && x.dtype() != Dtype::Float16 {
        return Err(s.error(format!(
            "half_to_float needs a float16 input, not {}",
            x.meta
        )));
    }
    s.wrap(dim, x.shape().len())?;
    let dims = [dim];
    let compute = opmath(x.dtype());
    let xc = rw.cast(s, &x, compute)?;
    let empty = numel(x.shape()) == 0;
    let shifted = if empty {
        xc
    } else {
        let max = rw.amax(s, &xc, &dims, true)?;
        rw.binary(s, "sub", &xc, &max)?
    };
    let result = if log {
        let exp = rw.unary(s, "exp", &shifted)?;
        let sum = rw.sum_dims(s, &exp, &dims, true)?;
        let logsum = rw.unary(s, "log", &sum)?;
        rw.binary(s, "sub", &shifted, &logsum)?
    } else {
        let unnormalized = rw.unary(s, "exp", &shifted)?;
        let sum = rw.sum_dims(s, &unnormalized, &dims, true)?;
        rw.binary(s, "div", &unnormalized, &sum)?
    };
    if half_to_float {
        Ok(result)
    } else {
        rw.cast(s, &result, x.dtype())
    }
}

/// `_softmax_backward_data`: `g * y - y * sum(g * y)`; `_log_softmax_backward_data`:
/// `g - exp(y) * sum(g)`; computed in float32 for half precision, then cast to
/// `input_dtype` when that differs.
fn softmax_backward(rw: &mut Rewriter<'_>, s: &Site<'_>, log: bool) -> Result<Val> {
    let grad = s.tensor(rw, 0, "grad_output")?;
    let output = s.tensor(rw, 1, "output")?;
    let dim = s.int(2, "dim", None)?;
    let input_dtype = s.dtype(3, "input_dtype")?;
    s.floating(&grad, "grad_output")?;
    s.wrap(dim, output.shape().len())?;
    let dims = [dim];
    let compute = opmath(result_type([
        &Operand::from(&grad),
        &Operand::from(&output),
    ]));
    let grad = rw.cast(s, &grad, compute)?;
    let output = rw.cast(s, &output, compute)?;
    let result = if log {
        let exp = rw.unary(s, "exp", &output)?;
        let sum = rw.sum_dims(s, &grad, &dims, true)?;
        let scaled = rw.binary(s, "mul", &exp, &sum)?;
        rw.binary(s, "sub", &grad, &scaled)?
    } else {
        let new_grad = rw.binary(s, "mul", &grad, &output)?;
        let sum = rw.sum_dims(s, &new_grad, &dims, true)?;
        let scaled = rw.binary(s, "mul", &output, &sum)?;
        rw.binary(s, "sub", &new_grad, &scaled)?
    };
    rw.cast(s, &result, input_dtype)
}

// ------------------------------------------------------------------ layer norm

/// `torch._refs.native_layer_norm`: `var_mean` over the normalized dims, then
/// `(x - mean) * rsqrt(var + eps)`, times weight plus bias. Statistics are computed in
/// float32 for half precision; on the CPU mean and rstd go back to the input dtype.
fn native_layer_norm(rw: &mut Rewriter<'_>, s: &Site<'_>) -> Result<Out> {
    let x = s.tensor(rw, 0, "input")?;
    let normalized = s.ints(1, "normalized_shape")?;
    let weight = s.opt_tensor(rw, 2, "weight")?;
    let bias = s.opt_tensor(rw, 3, "bias")?;
    let eps = s.float(4, "eps", None)?;
    s.floating(&x, "input")?;
    let ndim = x.shape().len();
    if normalized.is_empty()
        || normalized.len() > ndim
        || x.shape()[ndim - normalized.len()..] != normalized[..]
    {
        return Err(s.error(format!(
            "normalized_shape {normalized:?} is not a non-empty suffix of the input shape {:?}",
            x.shape()
        )));
    }
    let axis = ndim - normalized.len();
    let dims: Vec<i64> = (axis as i64..ndim as i64).collect();
    let compute = opmath(x.dtype());
    let acc = rw.cast(s, &x, compute)?;
    let stat_shape = s.reduced(x.shape(), &dims, true)?;
    let stat = TensorMeta::new(compute, stat_shape);
    let var_mean = rw.call_multi(
        s,
        "var_mean",
        "correction",
        vec![acc.value(), ints(&dims)],
        vec![
            ("correction", Value::Int(0)),
            ("keepdim", Value::Bool(true)),
        ],
        vec![stat.clone(), stat],
    )?;
    let (var, mean) = (&var_mean[0], &var_mean[1]);
    let var_eps = rw.binary(s, "add", var, eps)?;
    let rstd = rw.unary(s, "rsqrt", &var_eps)?;
    let centered = rw.binary(s, "sub", &x, mean)?;
    let mut out = rw.binary(s, "mul", &centered, &rstd)?;
    match (&weight, &bias) {
        (None, Some(b)) => out = rw.binary(s, "add", &out, b)?,
        (Some(w), None) => out = rw.binary(s, "mul", &out, w)?,
        (Some(w), Some(b)) => {
            let scaled = rw.binary(s, "mul", &out, w)?;
            out = rw.binary(s, "add", &scaled, b)?;
        }
        (None, None) => {}
    }
    let out = rw.cast(s, &out, x.dtype())?;
    // The CPU kernel returns mean and rstd in the input dtype, CUDA keeps float32; an
    // annotation says which one the graph was traced with.
    let stat_dtype = s
        .annotated
        .and_then(|m| m.item(1))
        .map(|t| t.dtype)
        .unwrap_or(if rw.device.is_cuda() {
            compute
        } else {
            x.dtype()
        });
    let mean = rw.cast(s, mean, stat_dtype)?;
    let rstd = rw.cast(s, &rstd, stat_dtype)?;
    Ok(Out::Many(vec![Some(out), Some(mean), Some(rstd)]))
}

/// `native_layer_norm_backward` of `torch/_decomp/decompositions.py`, honouring
/// `output_mask` and absent weight / bias (whose gradients are then None).
fn native_layer_norm_backward(rw: &mut Rewriter<'_>, s: &Site<'_>) -> Result<Out> {
    let grad_out = s.tensor(rw, 0, "grad_out")?;
    let x = s.tensor(rw, 1, "input")?;
    let normalized = s.ints(2, "normalized_shape")?;
    let mean = s.tensor(rw, 3, "mean")?;
    let rstd = s.tensor(rw, 4, "rstd")?;
    let weight = s.opt_tensor(rw, 5, "weight")?;
    let bias = s.opt_tensor(rw, 6, "bias")?;
    let mask = s.flags(7, "output_mask")?;
    s.floating(&x, "input")?;
    let [mask_input, mask_weight, mask_bias] = mask[..] else {
        return Err(s.error(format!("output_mask has {} entries, not 3", mask.len())));
    };
    let ndim = x.shape().len();
    if normalized.len() > ndim || x.shape()[ndim - normalized.len()..] != normalized[..] {
        return Err(s.error(format!(
            "normalized_shape {normalized:?} is not a suffix of the input shape {:?}",
            x.shape()
        )));
    }
    let axis = ndim - normalized.len();
    let inner_dims: Vec<i64> = (axis as i64..ndim as i64).collect();
    let outer_dims: Vec<i64> = (0..axis as i64).collect();
    let inner_shape = x.shape()[axis..].to_vec();
    let n = numel(&inner_shape);
    let m = numel(&x.shape()[..axis]);
    let input_dtype = x.dtype();
    let compute = opmath(input_dtype);
    let grad_cast = rw.cast(s, &grad_out, compute)?;
    let input_cast = rw.cast(s, &x, compute)?;
    let weight_cast = match &weight {
        Some(w) => Some(rw.cast(s, w, compute)?),
        None => None,
    };
    let bias_cast = match &bias {
        Some(b) => Some(rw.cast(s, b, compute)?),
        None => None,
    };
    if m <= 0 || n <= 0 {
        let d_input = match mask_input {
            true => Some(rw.zeros(s, x.shape(), input_dtype)?),
            false => None,
        };
        let d_weight = match mask_weight {
            true => Some(rw.zeros(s, &inner_shape, input_dtype)?),
            false => None,
        };
        let d_bias = match mask_bias {
            true => Some(rw.zeros(s, &inner_shape, input_dtype)?),
            false => None,
        };
        return Ok(Out::Many(vec![d_input, d_weight, d_bias]));
    }
    let centered = rw.binary(s, "sub", &input_cast, &mean)?;
    let x_hat = rw.binary(s, "mul", &centered, &rstd)?;
    let grad_x_hat = match &weight_cast {
        Some(w) => rw.binary(s, "mul", &grad_cast, w)?,
        None => grad_cast.clone(),
    };
    let a = rw.binary(s, "mul", &grad_x_hat, n)?;
    let b = rw.sum_dims(s, &grad_x_hat, &inner_dims, true)?;
    let c1 = rw.binary(s, "mul", &grad_x_hat, &x_hat)?;
    let c2 = rw.sum_dims(s, &c1, &inner_dims, true)?;
    let c3 = rw.binary(s, "mul", &x_hat, &c2)?;
    let a_b = rw.binary(s, "sub", &a, &b)?;
    let inner = rw.binary(s, "sub", &a_b, &c3)?;
    let d_input = if mask_input {
        let scale = rw.binary(s, "div", &rstd, n)?;
        Some(rw.binary(s, "mul", &scale, &inner)?)
    } else {
        None
    };
    let d_weight = match (mask_weight, &weight_cast) {
        (true, Some(_)) => {
            let product = rw.binary(s, "mul", &grad_cast, &x_hat)?;
            Some(if outer_dims.is_empty() {
                product
            } else {
                rw.sum_dims(s, &product, &outer_dims, false)?
            })
        }
        _ => None,
    };
    let d_bias = match (mask_bias, &bias_cast) {
        (true, Some(_)) => Some(if outer_dims.is_empty() {
            rw.unary(s, "clone", &grad_cast)?
        } else {
            rw.sum_dims(s, &grad_cast, &outer_dims, false)?
        }),
        _ => None,
    };
    let mut outs = Vec::with_capacity(3);
    for d in [d_input, d_weight, d_bias] {
        outs.push(match d {
            Some(d) => Some(rw.cast(s, &d, input_dtype)?),
            None => None,
        });
    }
    Ok(Out::Many(outs))
}

/// `var_mean.correction` (not decomposed by inductor): `mean(x, dims, keepdim=True)`,
/// then `sum((x - mean)^2, dims) / max(N - correction, 0)`, and the mean.
fn var_mean(rw: &mut Rewriter<'_>, s: &Site<'_>) -> Result<Out> {
    let x = s.tensor(rw, 0, "self")?;
    let dims = s.opt_ints(1, "dim")?;
    let correction = s.scalar(KW, "correction", Value::Int(1))?;
    let keepdim = s.flag(KW, "keepdim", Some(false))?;
    s.floating(&x, "self")?;
    let ndim = x.shape().len();
    let dims = match dims {
        Some(d) if !d.is_empty() => d,
        _ => (0..ndim.max(1) as i64).collect(),
    };
    let mut counted = vec![false; ndim];
    for &d in &dims {
        let w = s.wrap(d, ndim)?;
        if let Some(c) = counted.get_mut(w) {
            *c = true;
        }
    }
    let n: i64 = x
        .shape()
        .iter()
        .zip(&counted)
        .filter(|(_, c)| **c)
        .map(|(d, _)| *d)
        .product();
    let divisor = match correction {
        Value::Int(c) => Value::Int((n - c).max(0)),
        Value::Bool(c) => Value::Int((n - i64::from(c)).max(0)),
        Value::Float(c) => Value::Float((n as f64 - c).max(0.0)),
        _ => return Err(s.error("argument `correction` is not a number")),
    };
    let mean_kept = rw.mean_dims(s, &x, &dims, true)?;
    let centered = rw.binary(s, "sub", &x, &mean_kept)?;
    let square = rw.binary(s, "mul", &centered, &centered)?;
    let total = rw.sum_dims(s, &square, &dims, keepdim)?;
    let divisor = match divisor {
        Value::Float(f) => Operand::from(f),
        Value::Int(i) => Operand::from(i),
        _ => unreachable!("the divisor is an int or a float"),
    };
    let var = rw.binary(s, "div", &total, divisor)?;
    let mean = if keepdim {
        mean_kept
    } else {
        rw.mean_dims(s, &x, &dims, false)?
    };
    Ok(Out::Many(vec![Some(var), Some(mean)]))
}

// ------------------------------------------------------------------ matmul, dropout, losses

/// `alpha * mm(mat1, mat2) + beta * self`, leaving out the multiplications by 1.
fn addmm(rw: &mut Rewriter<'_>, s: &Site<'_>) -> Result<Val> {
    let input = s.tensor(rw, 0, "self")?;
    let mat1 = s.tensor(rw, 1, "mat1")?;
    let mat2 = s.tensor(rw, 2, "mat2")?;
    let mut beta = s.scalar(KW, "beta", Value::Int(1))?;
    let mut alpha = s.scalar(KW, "alpha", Value::Int(1))?;
    let (cast, result) = rw.opmath_cast(s, &[&input, &mat1, &mat2])?;
    let (input, mat1, mat2) = (&cast[0], &cast[1], &cast[2]);
    if !(result.is_floating_point() || result.is_complex()) {
        // Integer addmm truncates beta and alpha to ints.
        for v in [&mut beta, &mut alpha] {
            if let Value::Float(f) = *v {
                *v = Value::Int(f as i64);
            }
        }
    }
    let (&[n, k1], &[k2, p]) = (mat1.shape(), mat2.shape()) else {
        return Err(s.error(format!(
            "mat1 {} and mat2 {} are not matrices",
            mat1.meta, mat2.meta
        )));
    };
    if k1 != k2 {
        return Err(s.error(format!(
            "mat1 {} and mat2 {} cannot be multiplied",
            mat1.meta, mat2.meta
        )));
    }
    let mm_dtype = result_type([&Operand::from(mat1), &Operand::from(mat2)]);
    let mm = rw.call(
        s,
        "mm",
        "default",
        vec![mat1.value(), mat2.value()],
        vec![],
        TensorMeta::new(mm_dtype, vec![n, p]),
    )?;
    let is_one =
        |v: &Value| matches!(v, Value::Int(1)) || matches!(v, Value::Float(f) if *f == 1.0);
    let is_zero =
        |v: &Value| matches!(v, Value::Int(0)) || matches!(v, Value::Float(f) if *f == 0.0);
    let out = if is_one(&alpha) {
        mm
    } else {
        rw.binary(s, "mul", &mm, Operand::Scalar(alpha))?
    };
    if is_zero(&beta) {
        return rw.cast(s, &out, result);
    }
    let scaled = if is_one(&beta) {
        input.clone()
    } else {
        rw.binary(s, "mul", input, Operand::Scalar(beta))?
    };
    let sum = rw.binary(s, "add", &out, &scaled)?;
    if sum.shape() != [n, p] {
        return Err(s.error(format!(
            "self {} does not broadcast to the product's shape [{n}, {p}]",
            input.meta
        )));
    }
    rw.cast(s, &sum, result)
}

/// In training with `0 < p < 1`: `mask = rand_like(x) > p` and `mask * x * (1 / (1 - p))`,
/// `rand_like` traced as inductor's `rand`; `p == 1` gives zeros and an all-false mask,
/// otherwise `x` itself and an all-true mask.
fn native_dropout(rw: &mut Rewriter<'_>, s: &Site<'_>) -> Result<Out> {
    let x = s.tensor(rw, 0, "input")?;
    let p = s.float(1, "p", None)?;
    // ATen trains when `train` is None; PyTorch's decomposition (`if train and p != 0`)
    // would not, and change the numbers, so None counts as true here.
    let train = s.opt_flag(2, "train")?.unwrap_or(true);
    let shape = x.shape().to_vec();
    if train && p != 0.0 {
        if p == 1.0 {
            let zeros = rw.zeros(s, &shape, x.dtype())?;
            let mask = rw.zeros(s, &shape, Dtype::Bool)?;
            return Ok(Out::Many(vec![Some(zeros), Some(mask)]));
        }
        s.floating(&x, "input")?;
        let rand = rw.call(
            s,
            "rand",
            "default",
            vec![ints(&shape)],
            vec![
                ("dtype", Value::Dtype(x.dtype())),
                ("device", Value::Device(rw.device.clone())),
                ("pin_memory", Value::Bool(false)),
            ],
            x.meta.clone(),
        )?;
        let mask = rw.compare(s, "gt", &rand, Value::Float(p))?;
        let kept = rw.binary(s, "mul", &mask, &x)?;
        let out = rw.binary(s, "mul", &kept, 1.0 / (1.0 - p))?;
        Ok(Out::Many(vec![Some(out), Some(mask)]))
    } else {
        let mask = rw.full(s, &shape, Value::Bool(true), Dtype::Bool)?;
        Ok(Out::Many(vec![Some(x), Some(mask)]))
    }
}

/// `(grad * (mask.type_as(grad) * scale)).clone(memory_format=torch.contiguous_format)`.
fn native_dropout_backward(rw: &mut Rewriter<'_>, s: &Site<'_>) -> Result<Val> {
    let grad = s.tensor(rw, 0, "grad_output")?;
    let mask = s.tensor(rw, 1, "mask")?;
    let scale = s.float(2, "scale", None)?;
    let mask = rw.cast(s, &mask, grad.dtype())?;
    let scaled = rw.binary(s, "mul", &mask, scale)?;
    let product = rw.binary(s, "mul", &grad, &scaled)?;
    rw.call(
        s,
        "clone",
        "default",
        vec![product.value()],
        vec![(
            "memory_format",
            Value::MemoryFormat(MemoryFormat::ContiguousFormat),
        )],
        product.meta.clone(),
    )
}

/// `(self - target) ** 2`, then `mean` (reduction 1), `sum` (2) or nothing (0).
fn mse_loss(rw: &mut Rewriter<'_>, s: &Site<'_>) -> Result<Val> {
    let input = s.tensor(rw, 0, "self")?;
    let target = s.tensor(rw, 1, "target")?;
    let reduction = s.int(2, "reduction", Some(1))?;
    s.floating(&input, "self")?;
    let (cast, result) = rw.opmath_cast(s, &[&input, &target])?;
    let diff = rw.binary(s, "sub", &cast[0], &cast[1])?;
    let square = rw.call(
        s,
        "pow",
        "Tensor_Scalar",
        vec![diff.value(), Value::Int(2)],
        vec![],
        diff.meta.clone(),
    )?;
    let scalar = TensorMeta::new(square.dtype(), Vec::<i64>::new());
    let loss = match reduction {
        0 => square,
        1 => rw.call(s, "mean", "default", vec![square.value()], vec![], scalar)?,
        2 => rw.call(s, "sum", "default", vec![square.value()], vec![], scalar)?,
        other => return Err(s.error(format!("reduction {other} is not 0, 1 or 2"))),
    };
    rw.cast(s, &loss, result)
}

/// `norm * (input - target) * grad`, `norm` being `2 / numel` for the mean, else 2.
fn mse_loss_backward(rw: &mut Rewriter<'_>, s: &Site<'_>) -> Result<Val> {
    let grad = s.tensor(rw, 0, "grad_output")?;
    let input = s.tensor(rw, 1, "self")?;
    let target = s.tensor(rw, 2, "target")?;
    let reduction = s.int(3, "reduction", None)?;
    s.floating(&input, "self")?;
    let norm = match reduction {
        1 => 2.0 / numel(input.shape()) as f64,
        0 | 2 => 2.0,
        other => return Err(s.error(format!("reduction {other} is not 0, 1 or 2"))),
    };
    let (cast, result) = rw.opmath_cast(s, &[&grad, &input, &target])?;
    let diff = rw.binary(s, "sub", &cast[1], &cast[2])?;
    let scaled = rw.binary(s, "mul", &diff, norm)?;
    let out = rw.binary(s, "mul", &scaled, &cast[0])?;
    rw.cast(s, &out, result)
}

/// `rsub(self, other, alpha)` is `sub(other, self, alpha=alpha)`.
fn rsub(rw: &mut Rewriter<'_>, s: &Site<'_>) -> Result<Val> {
    let x = s.tensor(rw, 0, "self")?;
    let other = s.operand(rw, 1, "other")?;
    let alpha = s.scalar(2, "alpha", Value::Int(1))?;
    let shape = s.broadcast(other.shape(), x.shape())?;
    let x = Operand::from(&x);
    let dtype = result_type([&other, &x]);
    let kwargs = match alpha {
        Value::Int(1) => vec![],
        Value::Float(1.0) => vec![],
        a => vec![("alpha", a)],
    };
    rw.call(
        s,
        "sub",
        "Tensor",
        vec![other.value(), x.value()],
        kwargs,
        TensorMeta::new(dtype, shape),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use graphbug_ir::{parse_graph, print_graph};

    /// The ops of the call nodes, as `name.overload`, in order.
    fn ops(g: &Graph) -> Vec<String> {
        g.nodes
            .iter()
            .filter_map(|n| n.op().map(|op| format!("{}.{}", op.name, op.overload)))
            .collect()
    }

    /// Asserts the ops of the call nodes, given as space-separated groups.
    fn expect_ops(g: &Graph, groups: &[&str]) {
        let want: Vec<&str> = groups.iter().flat_map(|g| g.split_whitespace()).collect();
        assert_eq!(ops(g), want, "\n{}", print_graph(g));
    }

    fn names(g: &Graph) -> Vec<&str> {
        g.nodes.iter().map(|n| n.name.as_str()).collect()
    }

    fn line<'g>(text: &'g str, name: &str) -> &'g str {
        let prefix = format!("{name}: ");
        let prefix_multi = format!("{name} = ");
        text.lines()
            .map(str::trim)
            .find(|l| l.starts_with(&prefix) || l.starts_with(&prefix_multi))
            .unwrap_or_else(|| panic!("no line for `{name}` in\n{text}"))
    }

    /// Every node annotated, the graph verifies, and decomposing is deterministic.
    fn decomposed(text: &str, set: &DecompositionSet) -> Graph {
        let g = parse_graph(text).expect("graph parses");
        let d = decompose(&g, set).expect("decomposes");
        d.verify().expect("verifies");
        for n in &d.nodes {
            if n.op()
                .is_some_and(|op| ["var_mean", "split"].contains(&op.name.as_str()))
            {
                assert!(matches!(n.meta, Meta::Multi(_)), "{}: multi meta", n.name);
            } else {
                assert!(
                    matches!(n.meta, Meta::Tensor(_)),
                    "{} has no tensor meta: {:?}",
                    n.name,
                    n.meta
                );
            }
        }
        let again = decompose(&g, set).expect("decomposes again");
        assert_eq!(print_graph(&d), print_graph(&again), "deterministic");
        let reread = parse_graph(&print_graph(&d)).expect("the printed graph parses");
        assert_eq!(reread, d, "the printed graph reads back");
        d
    }

    const GELU: &str = r#"
class G(torch.nn.Module):
    def forward(self, x: "f32[4, 8]", g: "f32[4, 8]"):
        gelu: "f32[4, 8]" = torch.ops.aten.gelu.default(x)
        gelu_1: "f32[4, 8]" = torch.ops.aten.gelu.default(x, approximate = 'tanh')
        gelu_backward: "f32[4, 8]" = torch.ops.aten.gelu_backward.default(g, x)
        gelu_backward_1: "f32[4, 8]" = torch.ops.aten.gelu_backward.default(g, x, approximate = 'tanh')
        return (gelu, gelu_1, gelu_backward, gelu_backward_1)
"#;

    #[test]
    fn gelu_follows_the_reference_formulas() {
        let d = decomposed(GELU, &DecompositionSet::default());
        expect_ops(
            &d,
            &[
                // gelu, none
                "mul.Tensor mul.Tensor erf.default add.Tensor mul.Tensor",
                // gelu, tanh
                "mul.Tensor mul.Tensor mul.Tensor add.Tensor mul.Tensor mul.Tensor tanh.default add.Tensor mul.Tensor",
                // gelu_backward, none
                "mul.Tensor erf.default add.Tensor mul.Tensor mul.Tensor mul.Tensor exp.default mul.Tensor mul.Tensor add.Tensor mul.Tensor",
                // gelu_backward, tanh
                "mul.Tensor mul.Tensor mul.Tensor add.Tensor mul.Tensor tanh.default mul.Tensor add.Tensor mul.Tensor mul.Tensor sub.Tensor mul.Tensor add.Tensor mul.Tensor mul.Tensor mul.Tensor add.Tensor mul.Tensor",
            ],
        );
        let text = print_graph(&d);
        assert_eq!(
            line(&text, "mul_1"),
            r#"mul_1: "f32[4, 8]" = torch.ops.aten.mul.Tensor(x, 0.7071067811865476)"#
        );
        assert_eq!(
            line(&text, "add"),
            r#"add: "f32[4, 8]" = torch.ops.aten.add.Tensor(erf, 1);  erf = None"#
        );
        assert_eq!(
            line(&text, "mul_6"),
            r#"mul_6: "f32[4, 8]" = torch.ops.aten.mul.Tensor(add_1, 0.7978845608028654);  add_1 = None"#
        );
        assert!(text.contains("torch.ops.aten.mul.Tensor(exp, 0.3989422804014327)"));
        assert!(text.contains("torch.ops.aten.sub.Tensor(1, mul_"), "{text}");
        // The outputs are the last multiplications.
        let out: Vec<String> = d
            .outputs()
            .iter()
            .map(|v| d.node(v.as_node().unwrap()).name.to_string())
            .collect();
        assert_eq!(out, ["mul_2", "mul_8", "mul_15", "mul_27"]);
    }

    #[test]
    fn rsub_stays_when_not_selected() {
        let set = DecompositionSet::default().without("rsub").unwrap();
        let d = decomposed(GELU, &set);
        assert!(ops(&d).contains(&"rsub.Scalar".to_string()));
        assert!(!ops(&d).contains(&"sub.Tensor".to_string()));
    }

    #[test]
    fn half_precision_computes_in_float32() {
        let d = decomposed(
            r#"
class G(torch.nn.Module):
    def forward(self, x: "f16[4, 8]"):
        gelu: "f16[4, 8]" = torch.ops.aten.gelu.default(x)
        _softmax: "f16[4, 8]" = torch.ops.aten._softmax.default(x, 1, False)
        _softmax_1: "f32[4, 8]" = torch.ops.aten._softmax.default(x, 1, True)
        return (gelu, _softmax, _softmax_1)
"#,
            &DecompositionSet::default(),
        );
        let text = print_graph(&d);
        assert!(text.contains(
            r#"_to_copy: "f32[4, 8]" = torch.ops.aten._to_copy.default(x, dtype = torch.float32)"#
        ));
        let casts_back = d
            .nodes
            .iter()
            .filter(|n| n.op().is_some_and(|o| o.name == "_to_copy"))
            .filter(|n| n.meta.tensor().unwrap().dtype == Dtype::Float16)
            .count();
        // gelu and the first softmax go back to float16; half_to_float does not.
        assert_eq!(casts_back, 2);
    }

    #[test]
    fn softmax_family_follows_the_reference_formulas() {
        let d = decomposed(
            r#"
class S(torch.nn.Module):
    def forward(self, x: "f32[2, 3, 5]", g: "f32[2, 3, 5]"):
        _softmax: "f32[2, 3, 5]" = torch.ops.aten._softmax.default(x, -1, False)
        _log_softmax: "f32[2, 3, 5]" = torch.ops.aten._log_softmax.default(x, 1, False)
        _softmax_backward_data: "f32[2, 3, 5]" = torch.ops.aten._softmax_backward_data.default(g, _softmax, -1, torch.float32)
        _log_softmax_backward_data: "f32[2, 3, 5]" = torch.ops.aten._log_softmax_backward_data.default(g, _log_softmax, 1, torch.float32)
        return (_softmax_backward_data, _log_softmax_backward_data)
"#,
            &DecompositionSet::default(),
        );
        expect_ops(
            &d,
            &[
                "amax.default sub.Tensor exp.default sum.dim_IntList div.Tensor",
                "amax.default sub.Tensor exp.default sum.dim_IntList log.default",
                "sub.Tensor mul.Tensor sum.dim_IntList mul.Tensor sub.Tensor",
                "exp.default sum.dim_IntList mul.Tensor sub.Tensor",
            ],
        );
        let text = print_graph(&d);
        assert_eq!(
            line(&text, "amax"),
            r#"amax: "f32[2, 3, 1]" = torch.ops.aten.amax.default(x, [-1], True)"#
        );
        assert_eq!(
            line(&text, "sum_1"),
            r#"sum_1: "f32[2, 3, 1]" = torch.ops.aten.sum.dim_IntList(exp, [-1], True)"#
        );
        assert!(text.contains(
            r#"sum_2: "f32[2, 1, 5]" = torch.ops.aten.sum.dim_IntList(exp_1, [1], True)"#
        ));
    }

    const LAYER_NORM: &str = r#"
class L(torch.nn.Module):
    def forward(self, x: "f32[2, 3, 4]", w: "f32[4]", b: "f32[4]", g: "f32[2, 3, 4]"):
        native_layer_norm = torch.ops.aten.native_layer_norm.default(x, [4], w, b, 1e-05)
        getitem: "f32[2, 3, 4]" = native_layer_norm[0]
        getitem_1: "f32[2, 3, 1]" = native_layer_norm[1]
        getitem_2: "f32[2, 3, 1]" = native_layer_norm[2]
        native_layer_norm_backward = torch.ops.aten.native_layer_norm_backward.default(g, x, [4], getitem_1, getitem_2, w, b, [True, True, True])
        getitem_3: "f32[2, 3, 4]" = native_layer_norm_backward[0]
        getitem_4: "f32[4]" = native_layer_norm_backward[1]
        getitem_5: "f32[4]" = native_layer_norm_backward[2]
        return (getitem, getitem_3, getitem_4, getitem_5)
"#;

    #[test]
    fn layer_norm_and_its_backward_follow_the_reference_formulas() {
        let d = decomposed(LAYER_NORM, &DecompositionSet::default());
        let text = print_graph(&d);
        expect_ops(
            &d,
            &[
                "var_mean.correction add.Tensor rsqrt.default sub.Tensor mul.Tensor",
                "mul.Tensor add.Tensor sub.Tensor mul.Tensor mul.Tensor",
                "mul.Tensor sum.dim_IntList mul.Tensor sum.dim_IntList mul.Tensor",
                "sub.Tensor sub.Tensor div.Tensor mul.Tensor mul.Tensor",
                "sum.dim_IntList sum.dim_IntList",
            ],
        );
        // The getitems of var_mean are new; the old ones are gone, their names used up.
        assert_eq!(
            line(&text, "var_mean"),
            "var_mean = torch.ops.aten.var_mean.correction(x, [2], correction = 0, keepdim = True)"
        );
        assert!(
            text.contains(r#"getitem_6: "f32[2, 3, 1]" = var_mean[0]"#),
            "{text}"
        );
        assert!(
            text.contains(r#"getitem_7: "f32[2, 3, 1]" = var_mean[1]"#),
            "{text}"
        );
        assert!(!names(&d).contains(&"getitem_3"));
        assert!(text.contains("torch.ops.aten.add.Tensor(getitem_6, 1e-05)"));
        assert!(text.contains("torch.ops.aten.sub.Tensor(x, getitem_7)"));
        assert!(
            text.contains("torch.ops.aten.mul.Tensor(mul_3, 4)"),
            "{text}"
        );
        assert!(
            text.contains("torch.ops.aten.div.Tensor(rsqrt, 4)"),
            "{text}"
        );
        assert!(
            text.contains(r#"sum_3: "f32[4]" = torch.ops.aten.sum.dim_IntList(mul_8, [0, 1])"#),
            "{text}"
        );
        assert!(
            text.contains(r#"sum_4: "f32[4]" = torch.ops.aten.sum.dim_IntList(g, [0, 1])"#),
            "{text}"
        );
        assert!(
            text.contains("return (add_1, mul_7, sum_3, sum_4)"),
            "{text}"
        );
    }

    #[test]
    fn layer_norm_honours_missing_weight_bias_and_output_mask() {
        let d = decomposed(
            r#"
class L(torch.nn.Module):
    def forward(self, x: "f32[3, 4]", b: "f32[4]", g: "f32[3, 4]", w: "f32[4]"):
        native_layer_norm = torch.ops.aten.native_layer_norm.default(x, [4], None, b, 1e-05)
        getitem: "f32[3, 4]" = native_layer_norm[0]
        getitem_1: "f32[3, 1]" = native_layer_norm[1]
        getitem_2: "f32[3, 1]" = native_layer_norm[2]
        native_layer_norm_1 = torch.ops.aten.native_layer_norm.default(x, [4], None, None, 1e-05)
        getitem_3: "f32[3, 4]" = native_layer_norm_1[0]
        native_layer_norm_backward = torch.ops.aten.native_layer_norm_backward.default(g, x, [4], getitem_1, getitem_2, w, None, [False, True, False])
        getitem_4: "f32[4]" = native_layer_norm_backward[1]
        return (getitem, getitem_3, getitem_4)
"#,
            &DecompositionSet::default(),
        );
        let text = print_graph(&d);
        // None weight, bias: out + bias; neither: no affine op at all.
        assert!(text.contains("torch.ops.aten.add.Tensor(mul, b)"), "{text}");
        // Only the weight gradient: no grad_input computation survives (its names stay
        // used, as FX's dead-code elimination leaves them).
        assert!(!ops(&d).contains(&"div.Tensor".to_string()), "{text}");
        assert!(
            text.contains(r#"mul_7: "f32[3, 4]" = torch.ops.aten.mul.Tensor(g, mul_2)"#),
            "{text}"
        );
        assert!(
            text.contains(r#"sum_3: "f32[4]" = torch.ops.aten.sum.dim_IntList(mul_7, [0])"#),
            "{text}"
        );
        let last = d.node(d.outputs()[1].as_node().unwrap());
        assert_eq!(last.op(), Some(&OpName::aten("mul", "Tensor")));
        assert_eq!(
            print_graph(&d),
            print_graph(
                &decompose(&parse_graph(&text).unwrap(), &DecompositionSet::default()).unwrap()
            )
        );
    }

    #[test]
    fn a_getitem_of_an_undefined_output_is_an_error() {
        let g = parse_graph(
            r#"
class L(torch.nn.Module):
    def forward(self, x: "f32[3, 4]", m: "f32[3, 1]", r: "f32[3, 1]", g: "f32[3, 4]"):
        native_layer_norm_backward = torch.ops.aten.native_layer_norm_backward.default(g, x, [4], m, r, None, None, [True, True, True])
        getitem: "f32[3, 4]" = native_layer_norm_backward[0]
        getitem_1: "f32[4]" = native_layer_norm_backward[1]
        return (getitem, getitem_1)
"#,
        )
        .unwrap();
        match decompose(&g, &DecompositionSet::default()) {
            Err(AutodiffError::Unsupported { node, op, message }) => {
                assert_eq!(node, "getitem_1");
                assert_eq!(op, "aten::native_layer_norm_backward.default");
                assert!(message.contains("undefined"), "{message}");
            }
            other => panic!("expected an error, got {other:?}"),
        }
    }

    #[test]
    fn var_mean_decomposes_when_selected() {
        let d = decomposed(LAYER_NORM, &DecompositionSet::all());
        let text = print_graph(&d);
        assert!(!ops(&d).contains(&"var_mean.correction".to_string()));
        assert!(
            text.contains(r#"mean: "f32[2, 3, 1]" = torch.ops.aten.mean.dim(x, [2], True)"#),
            "{text}"
        );
        assert!(
            text.contains("torch.ops.aten.div.Tensor(sum_1, 4)"),
            "{text}"
        );
        let d = decomposed(
            r#"
class V(torch.nn.Module):
    def forward(self, x: "f64[3, 4, 5]"):
        var_mean = torch.ops.aten.var_mean.correction(x, [0, 2])
        getitem: "f64[4]" = var_mean[0]
        getitem_1: "f64[4]" = var_mean[1]
        return (getitem, getitem_1)
"#,
            &DecompositionSet::all(),
        );
        let text = print_graph(&d);
        assert!(
            text.contains("torch.ops.aten.div.Tensor(sum_1, 14)"),
            "{text}"
        );
        assert!(
            text.contains(r#"mean_1: "f64[4]" = torch.ops.aten.mean.dim(x, [0, 2])"#),
            "{text}"
        );
    }

    #[test]
    fn addmm_becomes_mm_and_add() {
        let d = decomposed(
            r#"
class A(torch.nn.Module):
    def forward(self, b: "f32[5]", x: "f32[3, 4]", w: "f32[5, 4]"):
        t: "f32[4, 5]" = torch.ops.aten.t.default(w)
        addmm: "f32[3, 5]" = torch.ops.aten.addmm.default(b, x, t)
        addmm_1: "f32[3, 5]" = torch.ops.aten.addmm.default(b, x, t, beta = 0.5, alpha = 2)
        addmm_2: "f32[3, 5]" = torch.ops.aten.addmm.default(b, x, t, beta = 0)
        return (addmm, addmm_1, addmm_2)
"#,
            &DecompositionSet::default(),
        );
        let text = print_graph(&d);
        expect_ops(
            &d,
            &[
                "t.default mm.default add.Tensor mm.default mul.Tensor",
                "mul.Tensor add.Tensor mm.default",
            ],
        );
        assert!(text.contains(r#"mm: "f32[3, 5]" = torch.ops.aten.mm.default(x, t)"#));
        assert!(text.contains(r#"add: "f32[3, 5]" = torch.ops.aten.add.Tensor(mm, b)"#));
        assert!(text.contains("torch.ops.aten.mul.Tensor(mm_1, 2)"));
        assert!(text.contains("torch.ops.aten.mul.Tensor(b, 0.5)"));
        assert!(text.contains("return (add, add_1, mm_2)"), "{text}");
    }

    #[test]
    fn pointwise_backwards_follow_the_reference_formulas() {
        let d = decomposed(
            r#"
class P(torch.nn.Module):
    def forward(self, g: "f32[6]", y: "f32[6]"):
        sigmoid_backward: "f32[6]" = torch.ops.aten.sigmoid_backward.default(g, y)
        tanh_backward: "f32[6]" = torch.ops.aten.tanh_backward.default(g, y)
        threshold_backward: "f32[6]" = torch.ops.aten.threshold_backward.default(g, y, 0)
        silu: "f32[6]" = torch.ops.aten.silu.default(y)
        silu_backward: "f32[6]" = torch.ops.aten.silu_backward.default(g, y)
        rsub: "f32[6]" = torch.ops.aten.rsub.Scalar(y, 2, 3)
        rsub_1: "f32[6]" = torch.ops.aten.rsub.Tensor(y, g)
        return (sigmoid_backward, tanh_backward, threshold_backward, silu, silu_backward, rsub, rsub_1)
"#,
            &DecompositionSet::default(),
        );
        let text = print_graph(&d);
        expect_ops(
            &d,
            &[
                "sub.Tensor mul.Tensor mul.Tensor mul.Tensor sub.Tensor",
                "mul.Tensor le.Scalar scalar_tensor.default where.self sigmoid.default",
                "mul.Tensor neg.default exp.default add.Tensor reciprocal.default",
                "mul.Tensor mul.Tensor sub.Tensor mul.Tensor add.Tensor",
                "mul.Tensor sub.Tensor sub.Tensor",
            ],
        );
        assert!(text.contains(r#"sub: "f32[6]" = torch.ops.aten.sub.Tensor(1, y)"#));
        assert!(text.contains(r#"le: "b8[6]" = torch.ops.aten.le.Scalar(y, 0)"#));
        assert!(text.contains(r#"scalar_tensor: "f32[]" = torch.ops.aten.scalar_tensor.default(0.0, dtype = torch.float32, layout = torch.strided, device = device(type='cpu'))"#), "{text}");
        assert!(text.contains("torch.ops.aten.where.self(le, scalar_tensor, g)"));
        assert!(text.contains("torch.ops.aten.mul.Tensor(reciprocal, 1)"));
        assert!(
            text.contains("torch.ops.aten.sub.Tensor(2, y, alpha = 3)"),
            "{text}"
        );
        assert!(text.contains("torch.ops.aten.sub.Tensor(g, y)"), "{text}");
    }

    #[test]
    fn dropout_follows_the_reference_formulas() {
        let d = decomposed(
            r#"
class D(torch.nn.Module):
    def forward(self, x: "f32[4, 8]", g: "f32[4, 8]"):
        native_dropout = torch.ops.aten.native_dropout.default(x, 0.1, True)
        getitem: "f32[4, 8]" = native_dropout[0]
        getitem_1: "b8[4, 8]" = native_dropout[1]
        native_dropout_backward: "f32[4, 8]" = torch.ops.aten.native_dropout_backward.default(g, getitem_1, 1.1111111111111112)
        native_dropout_1 = torch.ops.aten.native_dropout.default(x, 0.5, False)
        getitem_2: "f32[4, 8]" = native_dropout_1[0]
        getitem_3: "b8[4, 8]" = native_dropout_1[1]
        native_dropout_2 = torch.ops.aten.native_dropout.default(x, 1.0, True)
        getitem_4: "f32[4, 8]" = native_dropout_2[0]
        getitem_5: "b8[4, 8]" = native_dropout_2[1]
        return (getitem, native_dropout_backward, getitem_2, getitem_3, getitem_4, getitem_5)
"#,
            &DecompositionSet::default(),
        );
        let text = print_graph(&d);
        assert!(text.contains(r#"rand: "f32[4, 8]" = torch.ops.aten.rand.default([4, 8], dtype = torch.float32, device = device(type='cpu'), pin_memory = False)"#), "{text}");
        assert!(text.contains(r#"gt: "b8[4, 8]" = torch.ops.aten.gt.Scalar(rand, 0.1)"#));
        assert!(text.contains(r#"mul: "f32[4, 8]" = torch.ops.aten.mul.Tensor(gt, x)"#));
        assert!(text.contains("torch.ops.aten.mul.Tensor(mul, 1.1111111111111112)"));
        assert!(text.contains(
            r#"_to_copy: "f32[4, 8]" = torch.ops.aten._to_copy.default(gt, dtype = torch.float32)"#
        ));
        assert!(
            text.contains(
                "torch.ops.aten.clone.default(mul_3, memory_format = torch.contiguous_format)"
            ),
            "{text}"
        );
        assert!(text.contains(r#"full: "b8[4, 8]" = torch.ops.aten.full.default([4, 8], True, dtype = torch.bool, layout = torch.strided, device = device(type='cpu'), pin_memory = False)"#), "{text}");
        assert!(
            text.contains("torch.ops.aten.full.default([4, 8], 0, dtype = torch.float32"),
            "{text}"
        );
        assert!(
            text.contains("torch.ops.aten.full.default([4, 8], False, dtype = torch.bool"),
            "{text}"
        );
        // Eval mode returns the input itself.
        assert!(
            text.contains("return (mul_1, clone, x, full, full_1, full_2)"),
            "{text}"
        );
    }

    #[test]
    fn dropout_trains_without_a_train_flag_and_dead_draws_stay() {
        let d = decomposed(
            r#"
class D(torch.nn.Module):
    def forward(self, x: "f32[4, 8]"):
        native_dropout = torch.ops.aten.native_dropout.default(x, 0.5, None)
        getitem: "f32[4, 8]" = native_dropout[0]
        native_dropout_1 = torch.ops.aten.native_dropout.default(x, 0.25, True)
        getitem_1: "f32[4, 8]" = native_dropout_1[0]
        return (getitem,)
"#,
            &DecompositionSet::default(),
        );
        // The second dropout is dead: only its random draw stays, as FX keeps it.
        expect_ops(
            &d,
            &[
                "rand.default gt.Scalar mul.Tensor mul.Tensor",
                "rand.default",
            ],
        );
        assert!(print_graph(&d).contains("torch.ops.aten.mul.Tensor(mul, 2.0)"));
    }

    #[test]
    fn mse_loss_follows_the_reference_formulas() {
        let d = decomposed(
            r#"
class M(torch.nn.Module):
    def forward(self, x: "f32[3, 4]", y: "f32[3, 4]", g: "f32[]"):
        mse_loss: "f32[]" = torch.ops.aten.mse_loss.default(x, y)
        mse_loss_1: "f32[3, 4]" = torch.ops.aten.mse_loss.default(x, y, 0)
        mse_loss_2: "f32[]" = torch.ops.aten.mse_loss.default(x, y, 2)
        mse_loss_backward: "f32[3, 4]" = torch.ops.aten.mse_loss_backward.default(g, x, y, 1)
        return (mse_loss, mse_loss_1, mse_loss_2, mse_loss_backward)
"#,
            &DecompositionSet::default(),
        );
        let text = print_graph(&d);
        assert!(
            text.contains(r#"pow_1: "f32[3, 4]" = torch.ops.aten.pow.Tensor_Scalar(sub, 2)"#),
            "{text}"
        );
        assert!(
            text.contains(r#"mean: "f32[]" = torch.ops.aten.mean.default(pow_1)"#),
            "{text}"
        );
        assert!(
            text.contains(r#"sum_1: "f32[]" = torch.ops.aten.sum.default(pow_3)"#),
            "{text}"
        );
        assert!(
            text.contains("torch.ops.aten.mul.Tensor(sub_3, 0.16666666666666666)"),
            "{text}"
        );
    }

    #[test]
    fn untouched_ops_and_names_stay() {
        let text = r#"
class U(torch.nn.Module):
    def forward(self, x: "f32[4, 8]", w: "f32[8, 8]"):
        t: "f32[8, 8]" = torch.ops.aten.t.default(w)
        mm: "f32[4, 8]" = torch.ops.aten.mm.default(x, t)
        mul: "f32[4, 8]" = torch.ops.aten.mul.Tensor(mm, 2)
        split = torch.ops.aten.split.Tensor(mul, 4, 1)
        getitem: "f32[4, 4]" = split[0]
        getitem_1: "f32[4, 4]" = split[1]
        gelu: "f32[4, 4]" = torch.ops.aten.gelu.default(getitem)
        relu: "f32[4, 4]" = torch.ops.aten.relu.default(getitem_1)
        return (gelu, relu, mm)
"#;
        let g = parse_graph(text).unwrap();
        assert_eq!(decompose(&g, &DecompositionSet::none()).unwrap(), g);
        let d = decomposed(text, &DecompositionSet::default());
        assert_eq!(
            names(&d),
            [
                "x",
                "w",
                "t",
                "mm",
                "mul",
                "split",
                "getitem",
                "getitem_1",
                "mul_1",
                "mul_2",
                "erf",
                "add",
                "mul_3",
                "relu"
            ]
        );
        for name in ["t", "mm", "mul", "split", "getitem", "relu"] {
            let (a, b) = (g.find(name).unwrap(), d.find(name).unwrap());
            assert_eq!(g.node(a).meta, d.node(b).meta, "{name}");
            assert_eq!(g.node(a).op(), d.node(b).op(), "{name}");
        }
        assert_eq!(d.outputs()[2], Value::Node(d.find("mm").unwrap()));
    }

    #[test]
    fn missing_metas_are_errors_naming_the_node() {
        let g = parse_graph(
            r#"
class U(torch.nn.Module):
    def forward(self, x: "f32[4, 8]"):
        relu = torch.ops.aten.relu.default(x)
        gelu = torch.ops.aten.gelu.default(relu)
        return (gelu,)
"#,
        )
        .unwrap();
        match decompose(&g, &DecompositionSet::default()) {
            Err(AutodiffError::MissingMeta { node, message }) => {
                assert_eq!(node, "gelu");
                assert!(
                    message.contains("`relu`") && message.contains("aten::gelu.default"),
                    "{message}"
                );
            }
            other => panic!("expected MissingMeta, got {other:?}"),
        }
    }

    #[test]
    fn bad_arguments_and_wrong_annotations_are_errors() {
        let cases = [
            (
                r#"gelu: "f32[4]" = torch.ops.aten.gelu.default(x, approximate = 'erf')"#,
                "approximate",
            ),
            (
                r#"gelu: "f32[5]" = torch.ops.aten.gelu.default(x)"#,
                "annotated f32[5]",
            ),
            (
                r#"_softmax: "f32[4]" = torch.ops.aten._softmax.default(x, 3, False)"#,
                "out of range",
            ),
        ];
        for (body, want) in cases {
            let text = format!(
                "class E(torch.nn.Module):\n    def forward(self, x: \"f32[4]\"):\n        {body}\n        return ({},)\n",
                body.split(':').next().unwrap()
            );
            let g = parse_graph(&text).unwrap();
            match decompose(&g, &DecompositionSet::default()) {
                Err(AutodiffError::Unsupported { node, message, .. }) => {
                    assert_eq!(node, body.split(':').next().unwrap());
                    assert!(message.contains(want), "{message}");
                }
                other => panic!("{body}: expected an error, got {other:?}"),
            }
        }
    }

    #[test]
    fn sets_select_ops_by_name() {
        let all = DecompositionSet::all();
        let default = DecompositionSet::default();
        assert_eq!(all.ops().len(), TABLE.len());
        assert!(!default.decomposes(&OpName::aten("var_mean", "correction")));
        assert!(all.decomposes(&OpName::aten("var_mean", "correction")));
        assert!(DecompositionSet::none().is_empty());
        assert!(!DecompositionSet::inductor().decomposes(&OpName::aten("addmm", "default")));
        assert_eq!(DecompositionSet::supported(), all.ops());
        let rsub = DecompositionSet::select(["rsub"]).unwrap();
        assert_eq!(
            rsub.ops(),
            [
                OpName::aten("rsub", "Scalar"),
                OpName::aten("rsub", "Tensor")
            ]
        );
        for name in [
            "aten::rsub.Scalar",
            "aten.rsub.Scalar",
            "torch.ops.aten.rsub.Scalar",
            "rsub.Scalar",
        ] {
            assert_eq!(
                DecompositionSet::select([name]).unwrap().ops(),
                [OpName::aten("rsub", "Scalar")],
                "{name}"
            );
        }
        assert_eq!(
            DecompositionSet::select(["aten::gelu", "aten.silu"])
                .unwrap()
                .ops()
                .len(),
            2
        );
        let no_gelu = default.clone().without("gelu").unwrap();
        assert!(!no_gelu.decomposes(&OpName::aten("gelu", "default")));
        assert!(no_gelu.decomposes(&OpName::aten("gelu_backward", "default")));
        for bad in ["relu", "aten::gelu.tanh", "prims::gelu", "a.b.c.d"] {
            match DecompositionSet::select([bad]) {
                Err(AutodiffError::UnknownDecomposition { name, known }) => {
                    assert_eq!(name, bad);
                    assert!(known.contains("aten::gelu.default"), "{known}");
                }
                other => panic!("{bad}: expected an error, got {other:?}"),
            }
        }
    }

    #[test]
    fn type_promotion_follows_pytorch() {
        let t = |d: Dtype, shape: &[i64]| {
            Operand::Tensor(Val {
                id: NodeId(0),
                meta: TensorMeta::new(d, shape),
            })
        };
        assert_eq!(
            result_type([&t(Dtype::Float16, &[2]), &Operand::from(0.5)]),
            Dtype::Float16
        );
        assert_eq!(
            result_type([&t(Dtype::Int64, &[2]), &Operand::from(0.5)]),
            Dtype::Float32
        );
        assert_eq!(
            result_type([&t(Dtype::Bool, &[2]), &t(Dtype::Float64, &[2])]),
            Dtype::Float64
        );
        assert_eq!(
            result_type([&t(Dtype::Bool, &[2]), &Operand::from(1)]),
            Dtype::Int64
        );
        assert_eq!(
            result_type([&t(Dtype::Float32, &[2]), &t(Dtype::Float64, &[])]),
            Dtype::Float32
        );
        assert_eq!(
            result_type([&t(Dtype::Int32, &[2]), &t(Dtype::Float64, &[])]),
            Dtype::Float64
        );
        assert_eq!(
            promote_types(Dtype::Float16, Dtype::BFloat16),
            Dtype::Float32
        );
        assert_eq!(promote_types(Dtype::UInt8, Dtype::Int8), Dtype::Int16);
    }

    fn fixture(model: &str) -> Graph {
        let path = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../../../tests/fixtures")
            .join(model)
            .join("joint.py");
        let text = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
        parse_graph(&text).expect("joint.py parses")
    }

    #[test]
    fn reference_joint_graphs_decompose() {
        for model in ["mlp", "cnn", "gpt4"] {
            let g = fixture(model);
            let d = decompose(&g, &DecompositionSet::default())
                .unwrap_or_else(|e| panic!("{model}: {e}"));
            d.verify().unwrap();
            let set = DecompositionSet::default();
            assert!(
                d.nodes
                    .iter()
                    .all(|n| n.op().is_none_or(|op| !set.decomposes(op))),
                "{model}: decomposed ops remain"
            );
            assert!(
                d.nodes.iter().all(|n| n.meta != Meta::Unknown),
                "{model}: metas"
            );
            assert_eq!(d.placeholders().len(), g.placeholders().len());
            for (a, b) in g.placeholders().into_iter().zip(d.placeholders()) {
                assert_eq!(g.node(a), d.node(b), "{model}: placeholders");
            }
            assert_eq!(d.outputs().len(), g.outputs().len());
            let again = decompose(&g, &DecompositionSet::default()).unwrap();
            assert_eq!(
                print_graph(&d),
                print_graph(&again),
                "{model}: deterministic"
            );
            // The printed graph reads back as the same graph.
            let text = print_graph(&d);
            let reread = parse_graph(&text).expect("the decomposed graph parses");
            assert_eq!(print_graph(&reread), text, "{model}: round trip");
        }
        // mlp: gelu, layer norm, threshold_backward and addmm all went.
        let d = decompose(&fixture("mlp"), &DecompositionSet::default()).unwrap();
        let ops = ops(&d);
        for gone in [
            "gelu.default",
            "native_layer_norm.default",
            "threshold_backward.default",
            "addmm.default",
        ] {
            assert!(!ops.contains(&gone.to_string()), "{gone}");
        }
        assert!(ops.contains(&"var_mean.correction".to_string()));
        assert!(ops.contains(&"where.self".to_string()));
    }
}
