//! Dynamo-level graphs lowered to aten: every torch function, Tensor method and Python
//! operator becomes the aten overload its arguments bind to.
//!
//! Overloads come from the op schemas (libtorch's, through [`Schemas`]), not from a table:
//! `torch.cat`, `x.view(12, -1)` and `x.sum(-1, keepdim = True)` find `aten::cat`,
//! `aten::view` and `aten::sum.dim_IntList` by binding their arguments to each overload of
//! the same name, as PyTorch's Python argument parser does (a lone int fills an `int[N]`,
//! a method's trailing ints fill its one size list, a number fills a `Tensor`, `input=`
//! names `self`). `torch.nn.functional` functions written in Python are bound by their own
//! Python signature first, then passed to their aten op by aten's names (see
//! [`functional`]); only what no shared rule covers is spelled out there. A call nothing
//! binds to is an error naming it.

mod functional;

use std::collections::HashMap;

use crate::graph::{Graph, Node, NodeId, NodeKind};
use crate::naming::Namespace;
use crate::schema::{ArgType, Argument, Elem, Schema, Schemas};
use crate::types::{Meta, OpName};
use crate::value::Value;

/// True when the graph has a call that only [`lower_to_aten`] can run (a torch function, a
/// Tensor method or a Python operator on tensors).
pub fn needs_lowering(graph: &Graph) -> bool {
    graph
        .nodes
        .iter()
        .any(|n| matches!(&n.kind, NodeKind::Call { op, .. } if op.is_python()))
}

/// `graph` with every Python-level call replaced by aten calls (see the module docs).
pub fn lower_to_aten(graph: &Graph, schemas: &dyn Schemas) -> Result<Graph, String> {
    let mut names = Namespace::new();
    for n in &graph.nodes {
        names.reserve(&n.name);
    }
    let mut out = Graph::new(&graph.name);
    out.param_names = graph.param_names.clone();
    let mut new_id: Vec<NodeId> = Vec::with_capacity(graph.nodes.len());
    // Python functions that return a tuple of values computed by separate aten nodes:
    // the node (its output 0) and the values of its other outputs.
    let mut tuples: HashMap<NodeId, Vec<Option<Value>>> = HashMap::new();
    let users = graph.users();
    for (i, node) in graph.nodes.iter().enumerate() {
        // A query no node reads (`x.size()` whose items specialization made constants,
        // usage logging) has no aten op to become: it is left out (returned, it is None).
        if users.nodes[i].is_empty() && is_unread_query(&node.kind) {
            new_id.push(LEFT_OUT);
            continue;
        }
        let kind = node
            .try_remap_kind::<()>(&mut |id| Ok(new_id[id.index()]))
            .expect("remapping to earlier nodes cannot fail");
        let kind = match kind {
            NodeKind::Call { op, args, kwargs } if op.is_python() => {
                let mut lowering = Lowering {
                    out: &mut out,
                    names: &mut names,
                    node: &node.name,
                    schemas,
                    rest: None,
                };
                let kind = lowering
                    .lower(&op, args, kwargs)
                    .map_err(|e| format!("node `{}` ({op}): {e}", node.name))?;
                if let Some(rest) = lowering.rest.take() {
                    tuples.insert(NodeId(out.nodes.len() as u32), rest);
                }
                kind
            }
            // An output of such a tuple: the value itself.
            NodeKind::GetItem { source, index } if tuples.contains_key(&source) => {
                let value = match index {
                    0 => Some(Value::Node(source)),
                    k => tuples[&source].get(k - 1).cloned().flatten(),
                };
                let value = value.ok_or_else(|| {
                    format!("node `{}`: output {index} of its source is None", node.name)
                })?;
                NodeKind::Call {
                    op: OpName::aten("alias", "default"),
                    args: vec![value],
                    kwargs: Vec::new(),
                }
            }
            other => other,
        };
        out.nodes.push(Node {
            name: node.name.clone(),
            kind,
            meta: node.meta.clone(),
        });
        new_id.push(NodeId((out.nodes.len() - 1) as u32));
    }
    out.output = graph.output.as_ref().map(|vals| {
        vals.iter()
            .map(|v| {
                v.map_nodes(&mut |id| match new_id[id.index()] {
                    LEFT_OUT => Value::None,
                    new => Value::Node(new),
                })
            })
            .collect()
    });
    Ok(out)
}

/// The id of a node lowering leaves out (see [`is_unread_query`]).
const LEFT_OUT: NodeId = NodeId(u32::MAX);

/// The aten steps of `x[index]`, each applied to the previous one's result (the first
/// to `x`, of rank `rank`): select for ints, slice for slices, unsqueeze for None, `...`
/// over the dimensions the rest does not index. Their arguments after the tensor.
fn index_steps(index: Value, rank: Option<usize>) -> Result<Vec<(OpName, Vec<Value>)>, String> {
    let items = match index {
        Value::Tuple(items) => items,
        one => vec![one],
    };
    let single = items.len() == 1;
    // `...` spans the dimensions the other items do not index.
    let indexed = items
        .iter()
        .filter(|v| !matches!(v, Value::None | Value::Ellipsis))
        .count();
    let mut steps: Vec<(OpName, Vec<Value>)> = Vec::new();
    let mut dim = 0i64;
    for item in items {
        match item {
            Value::Int(i) => {
                steps.push((
                    OpName::aten("select", "int"),
                    vec![Value::Int(dim), Value::Int(i)],
                ));
            }
            Value::Slice(parts) => {
                let [start, stop, step] = <[Value; 3]>::try_from(parts).map_err(|_| "bad slice")?;
                let step = if step == Value::None {
                    Value::Int(1)
                } else {
                    step
                };
                steps.push((
                    OpName::aten("slice", "Tensor"),
                    vec![Value::Int(dim), start, stop, step],
                ));
                dim += 1;
            }
            Value::None => {
                steps.push((OpName::aten("unsqueeze", "default"), vec![Value::Int(dim)]));
                dim += 1;
            }
            Value::Ellipsis => {
                let rank = rank.ok_or("`...` needs the tensor's shape annotation")?;
                dim += rank.checked_sub(indexed).ok_or("too many indices")? as i64;
            }
            // A tensor index, alone: advanced indexing of the first dimension.
            Value::Node(n) if dim == 0 && steps.is_empty() && single => {
                steps.push((
                    OpName::aten("index", "Tensor"),
                    vec![Value::List(vec![Value::Node(n)])],
                ));
            }
            other => {
                return Err(format!(
                    "indexing with {other:?} is not lowered yet (ints, slices, None and one tensor are)"
                ))
            }
        }
    }
    Ok(steps)
}

/// Whether keyword `given` names parameter `param` of `schema` as PyTorch's argument parser
/// reads it: `input` is `self` (`torch.relu(input=x)`) where the schema has no `input`.
fn is_input_alias(schema: &Schema, given: &str, param: &str) -> bool {
    given == "input" && param == "self" && !schema.arguments.iter().any(|a| a.name == "input")
}

/// A Python-level call without effects or an aten op, which lowering leaves out when
/// nothing reads it: a Tensor method reading metadata, or PyTorch's usage logging.
fn is_unread_query(kind: &NodeKind) -> bool {
    matches!(kind, NodeKind::Call { op, .. }
        if (op.is_method()
            && matches!(op.name.as_str(), "size" | "stride" | "dim" | "numel" | "storage_offset"))
            || (op.namespace == "torch._C" && op.name == "_log_api_usage_once"))
}

/// Keyword arguments in source order.
type Kwargs = Vec<(String, Value)>;

/// Lowers one Python-level call of node `node`, emitting the aten nodes that compute its
/// arguments into `out` before it.
struct Lowering<'a> {
    out: &'a mut Graph,
    names: &'a mut Namespace,
    node: &'a str,
    schemas: &'a dyn Schemas,
    /// For a call returning a tuple: the values of its outputs after the first.
    rest: Option<Vec<Option<Value>>>,
}

/// `operator` functions and the aten op each one is.
const OPERATORS: [(&str, &str); 18] = [
    ("add", "add"),
    ("sub", "sub"),
    ("mul", "mul"),
    ("truediv", "div"),
    ("floordiv", "floor_divide"),
    ("mod", "remainder"),
    ("pow", "pow"),
    ("matmul", "matmul"),
    ("eq", "eq"),
    ("ne", "ne"),
    ("lt", "lt"),
    ("le", "le"),
    ("gt", "gt"),
    ("ge", "ge"),
    ("and_", "bitwise_and"),
    ("or_", "bitwise_or"),
    ("xor", "bitwise_xor"),
    ("neg", "neg"),
];

impl Lowering<'_> {
    fn lower(
        &mut self,
        op: &OpName,
        args: Vec<Value>,
        kwargs: Vec<(String, Value)>,
    ) -> Result<NodeKind, String> {
        let ns = op.namespace.as_str();
        if ns == "operator" && op.name == "getitem" {
            return self.index(args);
        }
        if ns == "operator" && op.name == "setitem" {
            return self.set_item(args);
        }
        if ns == "torch" && op.name == "tensor" {
            return self.tensor(args, kwargs);
        }
        let (name, args, kwargs) = match ns {
            "operator" => {
                // In-place operators (`a += b`) are the in-place aten ops.
                if let Some(base) = op.augmented().and(op.name.strip_prefix('i')) {
                    let name = OPERATORS
                        .iter()
                        .find(|(o, _)| *o == base)
                        .map(|(_, a)| format!("{a}_"))
                        .ok_or_else(|| format!("no aten op for `operator.{}`", op.name))?;
                    return self.bind(&name, args, kwargs, false);
                }
                let name = match op.name.as_str() {
                    "invert" => "bitwise_not",
                    n => OPERATORS
                        .iter()
                        .find(|(o, _)| *o == n)
                        .map(|(_, a)| *a)
                        .ok_or_else(|| format!("no aten op for `operator.{n}`"))?,
                };
                (name.to_string(), args, kwargs)
            }
            "torch.nn.functional" => return self.functional(&op.name, args, kwargs),
            "torch._C._special" => (format!("special_{}", op.name), args, kwargs),
            "torch._C._linalg" | "torch.linalg" => (format!("linalg_{}", op.name), args, kwargs),
            "torch._C._fft" | "torch.fft" => (format!("fft_{}", op.name), args, kwargs),
            _ => (op.name.clone(), args, kwargs),
        };
        self.bind(&name, args, kwargs, op.is_method())
    }

    /// `x[index]`: select for ints, slice for slices, unsqueeze for None, each step
    /// reading the previous one; the last step is the node itself.
    fn index(&mut self, args: Vec<Value>) -> Result<NodeKind, String> {
        let [base, index] =
            <[Value; 2]>::try_from(args).map_err(|_| "getitem takes two arguments")?;
        let mut steps = index_steps(index, self.rank(&base))?;
        let (last_op, last_args) = steps
            .pop()
            .unwrap_or((OpName::aten("alias", "default"), Vec::new()));
        let prev = self.emit_steps(base, steps);
        Ok(NodeKind::Call {
            op: last_op,
            args: [vec![prev], last_args].concat(),
            kwargs: Vec::new(),
        })
    }

    /// `x[index] = value` (FX's `operator.setitem`): the indexed view of `x` filled with
    /// the number or copied from the tensor; the node is `x`, changed in place.
    fn set_item(&mut self, args: Vec<Value>) -> Result<NodeKind, String> {
        let [base, index, value] =
            <[Value; 3]>::try_from(args).map_err(|_| "setitem takes three arguments")?;
        let steps = index_steps(index, self.rank(&base))?;
        let view = self.emit_steps(base.clone(), steps);
        let op = match &value {
            Value::Node(_) => OpName::aten("copy_", "default"),
            Value::Int(_) | Value::Float(_) | Value::Bool(_) => OpName::aten("fill_", "Scalar"),
            other => return Err(format!("assigning {other:?} is not lowered yet")),
        };
        self.emit("set", op, vec![view, value]);
        Ok(NodeKind::Call {
            op: OpName::aten("alias", "default"),
            args: vec![base],
            kwargs: Vec::new(),
        })
    }

    /// `torch.tensor(data, dtype=None, ...)` of numbers: scalar tensors stacked along each
    /// nesting level, in the dtype given or the one PyTorch infers (float32 for floats,
    /// bool for bools, else int64).
    fn tensor(
        &mut self,
        args: Vec<Value>,
        kwargs: Vec<(String, Value)>,
    ) -> Result<NodeKind, String> {
        let data = args.into_iter().next().ok_or("torch.tensor needs data")?;
        let mut dtype = None;
        for (k, v) in kwargs {
            match (k.as_str(), v) {
                ("dtype", Value::Dtype(d)) => dtype = Some(d),
                ("dtype" | "device" | "requires_grad" | "pin_memory", _) => {}
                (other, _) => return Err(format!("unknown argument `{other}`")),
            }
        }
        fn leaves(v: &Value, out: &mut Vec<Value>) {
            match v {
                Value::List(items) | Value::Tuple(items) => {
                    items.iter().for_each(|i| leaves(i, out))
                }
                other => out.push(other.clone()),
            }
        }
        let mut all = Vec::new();
        leaves(&data, &mut all);
        let dtype = dtype.unwrap_or(if all.iter().any(|v| matches!(v, Value::Float(_))) {
            crate::types::Dtype::Float32
        } else if !all.is_empty() && all.iter().all(|v| matches!(v, Value::Bool(_))) {
            crate::types::Dtype::Bool
        } else {
            crate::types::Dtype::Int64
        });
        if let Some(bad) = all
            .iter()
            .find(|v| !matches!(v, Value::Int(_) | Value::Float(_) | Value::Bool(_)))
        {
            return Err(format!("data {bad:?} is not a number"));
        }
        let kw = vec![("dtype".to_string(), Value::Dtype(dtype))];
        // The value of one nesting level: a scalar tensor, or its items stacked.
        fn level(
            this: &mut Lowering<'_>,
            v: Value,
            kw: &[(String, Value)],
        ) -> Result<NodeKind, String> {
            match v {
                Value::List(items) | Value::Tuple(items) if items.is_empty() => {
                    Ok(NodeKind::Call {
                        op: OpName::aten("empty", "memory_format"),
                        args: vec![Value::List(vec![Value::Int(0)])],
                        kwargs: kw.to_vec(),
                    })
                }
                Value::List(items) | Value::Tuple(items) => {
                    let mut parts = Vec::with_capacity(items.len());
                    for item in items {
                        let kind = level(this, item, kw)?;
                        parts.push(this.emit_kind("tensor", kind));
                    }
                    Ok(NodeKind::Call {
                        op: OpName::aten("stack", "default"),
                        args: vec![Value::List(parts)],
                        kwargs: Vec::new(),
                    })
                }
                number => Ok(NodeKind::Call {
                    op: OpName::aten("scalar_tensor", "default"),
                    args: vec![number],
                    kwargs: kw.to_vec(),
                }),
            }
        }
        level(self, data, &kw)
    }

    /// The static shape of a tensor value, from its annotation.
    fn shape(&self, v: &Value) -> Option<Vec<i64>> {
        v.as_node()
            .and_then(|id| self.out.node(id).meta.tensor().map(|t| t.shape.to_vec()))
    }

    /// The rank of a tensor value, from its annotation.
    fn rank(&self, v: &Value) -> Option<usize> {
        self.shape(v).map(|s| s.len())
    }

    /// Emits `steps` (see [`index_steps`]) one after another from `base`; the last value.
    fn emit_steps(&mut self, base: Value, steps: Vec<(OpName, Vec<Value>)>) -> Value {
        let mut prev = base;
        for (op, rest) in steps {
            prev = self.emit("index", op, [vec![prev], rest].concat());
        }
        prev
    }

    /// `F.multi_head_attention_forward` (a Python function; nn.MultiheadAttention calls
    /// it) as the aten ops it runs: packed or separate input projections, heads split,
    /// attention through `bmm` and `softmax` (with weights) or
    /// `scaled_dot_product_attention` (without), the output projection. The node is the
    /// attention output; its second output, the weights (head-averaged or not), when asked
    /// for. Masks, bias_k/v, zero attention, separate projection weights and static k/v
    /// are not lowered yet: an error names the one given.
    fn multi_head_attention(&mut self, mut call: functional::Args) -> Result<NodeKind, String> {
        let mut arg = |name: &str| call.take(name);
        let [query, key, value] = [arg("query")?, arg("key")?, arg("value")?];
        let embed = arg("embed_dim_to_check")?;
        let heads = arg("num_heads")?;
        let (w_in, b_in) = (arg("in_proj_weight")?, arg("in_proj_bias")?);
        let (w_out, b_out) = (arg("out_proj_weight")?, arg("out_proj_bias")?);
        let dropout = arg("dropout_p")?;
        let training = arg("training")?;
        let need_weights = arg("need_weights")? == Value::Bool(true);
        let average = arg("average_attn_weights")? == Value::Bool(true);
        let is_causal = arg("is_causal")?;
        for (name, unsupported) in [
            ("bias_k", Value::None),
            ("bias_v", Value::None),
            ("add_zero_attn", Value::Bool(false)),
            ("key_padding_mask", Value::None),
            ("attn_mask", Value::None),
            ("use_separate_proj_weight", Value::Bool(false)),
            ("static_k", Value::None),
            ("static_v", Value::None),
        ] {
            if arg(name)? != unsupported {
                return Err(format!("`{name}` is not lowered yet"));
            }
        }
        let (Value::Int(e), Value::Int(h)) = (&embed, &heads) else {
            return Err("embed_dim_to_check and num_heads must be integers".into());
        };
        let (e, h) = (*e, *h);
        if h <= 0 || e % h != 0 {
            return Err(format!("embed_dim {e} is not divisible by num_heads {h}"));
        }
        let hd = e / h;
        let p = match (&training, &dropout) {
            (Value::Bool(false), _) => 0.0,
            (_, Value::Float(p)) => *p,
            (_, Value::Int(p)) => *p as f64,
            (_, other) => return Err(format!("dropout_p {other:?} is not a number")),
        };
        let shape = |v: &Value, what: &str| -> Result<Vec<i64>, String> {
            self.shape(v).filter(|s| s.len() == 3).ok_or_else(|| {
                format!("the {what} needs a static 3-d shape annotation (batched input)")
            })
        };
        let (qs, ks) = (shape(&query, "query")?, shape(&key, "key")?);
        let (l, n, s) = (qs[0], qs[1], ks[0]);
        let aten = |name: &str, overload: &str| OpName::aten(name, overload);
        let int = Value::Int;
        let list = |v: Vec<i64>| Value::List(v.into_iter().map(Value::Int).collect());
        // Input projections, as _in_projection_packed computes them.
        let packed = |this: &mut Self, x: Value, w: Value, b: Value, k: i64, what: &str| {
            let rows = this.shape(&x).map_or(l, |s| s[0]);
            let proj = this.emit(what, aten("linear", "default"), vec![x, w, b]);
            let proj = this.emit(
                what,
                aten("view", "default"),
                vec![proj, list(vec![rows, n, k, e])],
            );
            let proj = this.emit(
                what,
                aten("permute", "default"),
                vec![proj, list(vec![2, 0, 1, 3])],
            );
            let proj = this.emit(what, aten("contiguous", "default"), vec![proj]);
            (0..k)
                .map(|i| {
                    this.emit(
                        what,
                        aten("select", "int"),
                        vec![proj.clone(), int(0), int(i)],
                    )
                })
                .collect::<Vec<_>>()
        };
        let part = |this: &mut Self, v: &Value, from: i64, to: i64, what: &str| -> Value {
            match v {
                Value::None => Value::None,
                v => this.emit(
                    what,
                    aten("slice", "Tensor"),
                    vec![v.clone(), int(0), int(from), int(to), int(1)],
                ),
            }
        };
        let (q, k, v) = if query == key && key == value {
            let qkv = packed(self, query, w_in, b_in, 3, "in_proj");
            (qkv[0].clone(), qkv[1].clone(), qkv[2].clone())
        } else if key == value {
            let (wq, bq) = (
                part(self, &w_in, 0, e, "w_q"),
                part(self, &b_in, 0, e, "b_q"),
            );
            let (wkv, bkv) = (
                part(self, &w_in, e, 3 * e, "w_kv"),
                part(self, &b_in, e, 3 * e, "b_kv"),
            );
            let q = self.emit("q_proj", aten("linear", "default"), vec![query, wq, bq]);
            let kv = packed(self, key, wkv, bkv, 2, "kv_proj");
            (q, kv[0].clone(), kv[1].clone())
        } else {
            let mut proj = Vec::new();
            for (i, x) in [query, key, value].into_iter().enumerate() {
                let (from, to) = (i as i64 * e, (i as i64 + 1) * e);
                let w = part(self, &w_in, from, to, "w_in");
                let b = part(self, &b_in, from, to, "b_in");
                proj.push(self.emit("in_proj", aten("linear", "default"), vec![x, w, b]));
            }
            (proj[0].clone(), proj[1].clone(), proj[2].clone())
        };
        // Heads: (len, N*H, hd) transposed to (N*H, len, hd).
        let heads_of = |this: &mut Self, x: Value, len: i64| {
            let x = this.emit(
                "heads",
                aten("view", "default"),
                vec![x, list(vec![len, n * h, hd])],
            );
            this.emit("heads", aten("transpose", "int"), vec![x, int(0), int(1)])
        };
        let (q, k, v) = (
            heads_of(self, q, l),
            heads_of(self, k, s),
            heads_of(self, v, s),
        );
        let (attn, weights) = if need_weights {
            let scaled = self.emit(
                "q_scaled",
                aten("mul", "Scalar"),
                vec![q, Value::Float((1.0 / hd as f64).sqrt())],
            );
            let kt = self.emit("k_t", aten("transpose", "int"), vec![k, int(-2), int(-1)]);
            let w = self.emit("scores", aten("bmm", "default"), vec![scaled, kt]);
            let mut w = self.emit(
                "weights",
                aten("softmax", "int"),
                vec![w, int(-1), Value::None],
            );
            if p > 0.0 {
                w = self.emit(
                    "dropout",
                    aten("dropout", "default"),
                    vec![w, Value::Float(p), Value::Bool(true)],
                );
            }
            let out = self.emit("attn", aten("bmm", "default"), vec![w.clone(), v]);
            let out = self.emit("attn", aten("transpose", "int"), vec![out, int(0), int(1)]);
            let out = self.emit(
                "attn",
                aten("reshape", "default"),
                vec![out, list(vec![l * n, e])],
            );
            let mut weights = self.emit(
                "weights",
                aten("view", "default"),
                vec![w, list(vec![n, h, l, s])],
            );
            if average {
                weights = self.emit("weights", aten("mean", "dim"), vec![weights, list(vec![1])]);
            }
            (out, Some(weights))
        } else {
            let view4 = |this: &mut Self, x: Value, len: i64| {
                this.emit(
                    "heads",
                    aten("view", "default"),
                    vec![x, list(vec![n, h, len, hd])],
                )
            };
            let (q, k, v) = (view4(self, q, l), view4(self, k, s), view4(self, v, s));
            let out = self.emit(
                "attn",
                aten("scaled_dot_product_attention", "default"),
                vec![q, k, v, Value::None, Value::Float(p), is_causal],
            );
            let out = self.emit(
                "attn",
                aten("permute", "default"),
                vec![out, list(vec![2, 0, 1, 3])],
            );
            let out = self.emit(
                "attn",
                aten("reshape", "default"),
                vec![out, list(vec![n * l, e])],
            );
            (out, None)
        };
        let out = self.emit(
            "out_proj",
            aten("linear", "default"),
            vec![attn, w_out, b_out],
        );
        self.rest = Some(vec![weights]);
        Ok(NodeKind::Call {
            op: aten("view", "default"),
            args: vec![out, list(vec![l, n, e])],
            kwargs: Vec::new(),
        })
    }

    /// Adds the call `op(args)` before the node, named after it (`<node>_<what>`).
    fn emit(&mut self, what: &str, op: OpName, args: Vec<Value>) -> Value {
        self.emit_kind(
            what,
            NodeKind::Call {
                op,
                args,
                kwargs: Vec::new(),
            },
        )
    }

    /// Adds a node of `kind` before the node, named after it (`<node>_<what>`).
    fn emit_kind(&mut self, what: &str, kind: NodeKind) -> Value {
        let name = self.names.create_name(&format!("{}_{what}", self.node));
        self.out.nodes.push(Node {
            name: name.into(),
            kind,
            meta: Meta::Unknown,
        });
        Value::Node(NodeId((self.out.nodes.len() - 1) as u32))
    }

    /// The first overload of `aten::name` (by how exactly it matches) that the arguments bind to.
    fn bind(
        &self,
        name: &str,
        args: Vec<Value>,
        kwargs: Vec<(String, Value)>,
        method: bool,
    ) -> Result<NodeKind, String> {
        let overloads = self.schemas.overloads("aten", name);
        if overloads.is_empty() {
            return Err(format!("no aten op `{name}`"));
        }
        let mut best: Option<(u32, NodeKind)> = None;
        for overload in &overloads {
            let op = OpName::aten(name, overload);
            let Some(schema) = self.schemas.schema(&op) else {
                continue;
            };
            if let Some((score, args, kwargs)) = self.try_bind(&schema, &args, &kwargs, method) {
                let better = best.as_ref().is_none_or(|(s, _)| score > *s);
                if better {
                    best = Some((score, NodeKind::Call { op, args, kwargs }));
                }
            }
        }
        best.map(|(_, k)| k).ok_or_else(|| {
            format!(
                "no overload of aten::{name} ({}) takes these arguments",
                overloads.join(", ")
            )
        })
    }

    /// Binds the call to `schema`: the positional and keyword values in schema order, with
    /// a score (exact type matches count more than conversions), or `None`.
    fn try_bind(
        &self,
        schema: &Schema,
        args: &[Value],
        kwargs: &[(String, Value)],
        method: bool,
    ) -> Option<(u32, Vec<Value>, Kwargs)> {
        let params = &schema.arguments;
        let positional: Vec<&Argument> = params.iter().filter(|a| !a.kwarg_only).collect();
        let mut args = args.to_vec();
        // A function's leading ints fill its first size list: torch.zeros(4, 5).
        if !method
            && args.len() > positional.len()
            && positional
                .first()
                .is_some_and(|p| ArgType::parse(&p.ty).list)
            && args
                .iter()
                .all(|v| matches!(v, Value::Int(_) | Value::Node(_)))
            && positional.len() == 1
        {
            args = vec![Value::List(args)];
        }
        // A method's trailing ints fill its one size list: x.view(12, -1), x.permute(1, 0).
        if method && args.len() > positional.len() && positional.len() >= 2 {
            let last = positional.len() - 1;
            if ArgType::parse(&positional[last].ty).list
                && args[last..]
                    .iter()
                    .all(|v| matches!(v, Value::Int(_) | Value::Node(_)))
            {
                let rest = args.split_off(last);
                args.push(Value::List(rest));
            }
        }
        if args.len() > positional.len() {
            return None;
        }
        let mut score = 0;
        let mut out_args = Vec::new();
        let mut out_kwargs = Vec::new();
        for (k, p) in params.iter().enumerate() {
            // Given by position (the leading arguments), else by keyword, kept by keyword.
            let by_position = !p.kwarg_only && k < args.len();
            let given = if by_position {
                Some(args[k].clone())
            } else {
                kwargs
                    .iter()
                    .find(|(n, _)| *n == p.name || is_input_alias(schema, n, &p.name))
                    .map(|(_, v)| v.clone())
            };
            match given {
                Some(v) => {
                    let (s, v) = self.accepts(p, v)?;
                    score += s;
                    if by_position {
                        out_args.push(v);
                    } else {
                        out_kwargs.push((p.name.clone(), v));
                    }
                }
                None if p.default.is_some() => {}
                None => return None,
            }
        }
        // Every keyword must name a parameter.
        if kwargs.iter().any(|(n, _)| {
            !params
                .iter()
                .any(|p| p.name == *n || is_input_alias(schema, n, &p.name))
        }) {
            return None;
        }
        Some((score, out_args, out_kwargs))
    }

    /// Whether `v` can be `p`'s value: a score (2 exact, 1 converted) and the value to pass.
    fn accepts(&self, p: &Argument, v: Value) -> Option<(u32, Value)> {
        let ty = ArgType::parse(&p.ty);
        if v == Value::None {
            return (ty.list_optional || ty.elem_optional).then_some((2, v));
        }
        if ty.list {
            let items = match v {
                Value::List(items) | Value::Tuple(items) => items,
                // A lone int fills an `int[N]` (stride=1, output_size=1, dim=-1).
                Value::Int(i) if ty.elem == Elem::Int => {
                    let n = p.n.unwrap_or(1);
                    return Some((1, Value::List(vec![Value::Int(i); n])));
                }
                _ => return None,
            };
            for item in &items {
                if *item == Value::None && ty.elem_optional {
                    continue;
                }
                self.elem_score(&ty.elem, item)?;
            }
            return Some((2, Value::List(items)));
        }
        self.elem_score(&ty.elem, &v).map(|s| (s, v))
    }

    fn elem_score(&self, elem: &Elem, v: &Value) -> Option<u32> {
        let tensor_node = |id: &NodeId| {
            matches!(
                self.out.node(*id).meta,
                Meta::Tensor(_) | Meta::SymTensor(_) | Meta::Unknown | Meta::Multi(_)
            )
        };
        let number = matches!(v, Value::Int(_) | Value::Float(_) | Value::Bool(_));
        match (elem, v) {
            (Elem::Tensor, Value::Node(id)) if tensor_node(id) => Some(2),
            (Elem::Tensor, _) if number => Some(1),
            (Elem::Scalar, _) if number => Some(2),
            (Elem::Int, Value::Int(_)) => Some(2),
            (Elem::Float, Value::Float(_)) => Some(2),
            (Elem::Float, Value::Int(_)) => Some(1),
            (Elem::Bool, Value::Bool(_)) => Some(2),
            (Elem::Str, Value::Str(_)) => Some(2),
            (Elem::ScalarType, Value::Dtype(_)) => Some(2),
            (Elem::Layout, Value::Layout(_)) => Some(2),
            (Elem::MemoryFormat, Value::MemoryFormat(_)) => Some(2),
            (Elem::Device, Value::Device(_)) => Some(2),
            _ => None,
        }
    }
}
