//! Dynamo-level graphs lowered to aten: every torch function, Tensor method and Python
//! operator becomes the aten overload its arguments bind to.
//!
//! Overloads come from the op schemas (libtorch's, through [`Schemas`]), not from a table:
//! `torch.cat`, `x.view(12, -1)` and `x.sum(-1, keepdim = True)` find `aten::cat`,
//! `aten::view` and `aten::sum.dim_IntList` by binding their arguments to each overload of
//! the same name, as PyTorch's Python argument parser does (a lone int fills an `int[N]`,
//! a method's trailing ints fill its one size list, a number fills a `Tensor`). Only the
//! Python-level functions that are not aten ops (`torch.nn.functional.*` whose signature
//! differs from its aten op's) are spelled out below. A call nothing binds to is an error
//! naming it.

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
    for node in &graph.nodes {
        let kind = node
            .try_remap_kind::<()>(&mut |id| Ok(new_id[id.index()]))
            .expect("remapping to earlier nodes cannot fail");
        let kind = match kind {
            NodeKind::Call { op, args, kwargs } if op.is_python() => {
                let lowered = Lowering {
                    graph: &out,
                    schemas,
                }
                .lower(&op, args, kwargs)
                .map_err(|e| format!("node `{}` ({op}): {e}", node.name))?;
                match lowered {
                    Lowered::Call(kind) => kind,
                    Lowered::Chain(mut steps) => {
                        // Indexing: each step reads the previous one; the last is the node.
                        let (op, mut args) = steps.pop().expect("a chain has a step");
                        let mut prev: Option<NodeId> = None;
                        for (step_op, mut step_args) in steps {
                            if let Some(p) = prev {
                                step_args[0] = Value::Node(p);
                            }
                            out.nodes.push(Node {
                                name: names.create_name(&format!("{}_index", node.name)),
                                kind: NodeKind::Call {
                                    op: step_op,
                                    args: step_args,
                                    kwargs: Vec::new(),
                                },
                                meta: Meta::Unknown,
                            });
                            prev = Some(NodeId((out.nodes.len() - 1) as u32));
                        }
                        if let Some(p) = prev {
                            args[0] = Value::Node(p);
                        }
                        NodeKind::Call {
                            op,
                            args,
                            kwargs: Vec::new(),
                        }
                    }
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
            .map(|v| v.map_nodes(&mut |id| Value::Node(new_id[id.index()])))
            .collect()
    });
    Ok(out)
}

/// Keyword arguments in source order.
type Kwargs = Vec<(String, Value)>;

/// An aten op's name with its positional and keyword arguments, before overload binding.
type AtenCall = (String, Vec<Value>, Kwargs);

enum Lowered {
    Call(NodeKind),
    /// Calls applied one after another to the first argument (tensor indexing).
    Chain(Vec<(OpName, Vec<Value>)>),
}

struct Lowering<'a> {
    graph: &'a Graph,
    schemas: &'a dyn Schemas,
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
        &self,
        op: &OpName,
        args: Vec<Value>,
        kwargs: Vec<(String, Value)>,
    ) -> Result<Lowered, String> {
        let ns = op.namespace.as_str();
        if ns == "operator" && op.name == "getitem" {
            return self.index(args);
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
                    return self.bind(&name, args, kwargs, false).map(Lowered::Call);
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
            "torch.nn.functional" => self.functional(&op.name, args, kwargs)?,
            "torch._C._special" => (format!("special_{}", op.name), args, kwargs),
            "torch._C._linalg" | "torch.linalg" => (format!("linalg_{}", op.name), args, kwargs),
            "torch._C._fft" | "torch.fft" => (format!("fft_{}", op.name), args, kwargs),
            _ => (op.name.clone(), args, kwargs),
        };
        self.bind(&name, args, kwargs, op.is_method())
            .map(Lowered::Call)
    }

    /// `torch.nn.functional` functions whose signature is not their aten op's.
    fn functional(
        &self,
        name: &str,
        mut args: Vec<Value>,
        mut kwargs: Vec<(String, Value)>,
    ) -> Result<AtenCall, String> {
        let mut take = |key: &str, pos: usize, args: &mut Vec<Value>| -> Option<Value> {
            if let Some(i) = kwargs.iter().position(|(k, _)| k == key) {
                return Some(kwargs.remove(i).1);
            }
            (pos < args.len()).then(|| std::mem::replace(&mut args[pos], Value::None))
        };
        Ok(match name {
            // dropout(input, p=0.5, training=True, inplace=False)
            "dropout" => {
                let p = take("p", 1, &mut args).unwrap_or(Value::Float(0.5));
                let train = take("training", 2, &mut args).unwrap_or(Value::Bool(true));
                let inplace = take("inplace", 3, &mut args) == Some(Value::Bool(true));
                args.truncate(1);
                args.extend([p, train]);
                let name = if inplace { "dropout_" } else { "dropout" };
                (name.to_string(), args, Vec::new())
            }
            // relu(input, inplace=False), and the other activations with `inplace`.
            "relu" | "relu6" | "hardtanh" | "elu" | "selu" | "celu" | "leaky_relu"
            | "hardsigmoid" | "hardswish" | "silu" | "mish" | "threshold" => {
                // Where `inplace` sits when given by position.
                let at = match name {
                    "hardtanh" | "threshold" => 3,
                    "leaky_relu" | "elu" | "celu" => 2,
                    _ => 1,
                };
                let inplace = if args.len() > at {
                    args.remove(at)
                } else {
                    take("inplace", usize::MAX, &mut args).unwrap_or(Value::Bool(false))
                };
                let name = if inplace == Value::Bool(true) {
                    format!("{name}_")
                } else {
                    name.to_string()
                };
                (name, args, kwargs)
            }
            // softmax(input, dim=None, _stacklevel=3, dtype=None)
            "softmax" | "log_softmax" => {
                let dim = take("dim", 1, &mut args).unwrap_or(Value::None);
                let dtype = take("dtype", 3, &mut args).unwrap_or(Value::None);
                args.truncate(1);
                args.extend([dim, dtype]);
                (name.to_string(), args, Vec::new())
            }
            // batch_norm(input, running_mean, running_var, weight=None, bias=None,
            //            training=False, momentum=0.1, eps=1e-05)
            "batch_norm" => {
                let rm = take("running_mean", 1, &mut args).unwrap_or(Value::None);
                let rv = take("running_var", 2, &mut args).unwrap_or(Value::None);
                let w = take("weight", 3, &mut args).unwrap_or(Value::None);
                let b = take("bias", 4, &mut args).unwrap_or(Value::None);
                let training = take("training", 5, &mut args).unwrap_or(Value::Bool(false));
                let momentum = take("momentum", 6, &mut args).unwrap_or(Value::Float(0.1));
                let eps = take("eps", 7, &mut args).unwrap_or(Value::Float(1e-5));
                let input = args.first().cloned().unwrap_or(Value::None);
                let args = vec![
                    input,
                    w,
                    b,
                    rm,
                    rv,
                    training,
                    momentum,
                    eps,
                    Value::Bool(true),
                ];
                ("batch_norm".to_string(), args, Vec::new())
            }
            // cross_entropy(input, target, weight=None, size_average=None, ignore_index=-100,
            //               reduce=None, reduction='mean', label_smoothing=0.0)
            "cross_entropy" | "nll_loss" => {
                let weight = take("weight", 2, &mut args).unwrap_or(Value::None);
                let ignore = take("ignore_index", 4, &mut args).unwrap_or(Value::Int(-100));
                let reduction = match take("reduction", 6, &mut args) {
                    None | Some(Value::None) => Value::Int(1),
                    Some(Value::Str(s)) => Value::Int(match s.as_str() {
                        "none" => 0,
                        "mean" => 1,
                        "sum" => 2,
                        other => return Err(format!("unknown reduction `{other}`")),
                    }),
                    Some(other) => other,
                };
                let smoothing = take("label_smoothing", 7, &mut args).unwrap_or(Value::Float(0.0));
                args.truncate(2);
                let aten = if name == "cross_entropy" {
                    args.extend([weight, reduction, ignore, smoothing]);
                    "cross_entropy_loss"
                } else {
                    args.extend([weight, reduction, ignore]);
                    "nll_loss"
                };
                (aten.to_string(), args, Vec::new())
            }
            // max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1,
            //            ceil_mode=False, return_indices=False), and the other poolings:
            // `return_indices` picks the `_with_indices` op.
            _ if name.contains("max_pool") => {
                let indices = take("return_indices", usize::MAX, &mut args);
                let name = match indices {
                    Some(Value::Bool(true)) => format!("{name}_with_indices"),
                    _ => name.to_string(),
                };
                (name, args, kwargs)
            }
            _ => (name.to_string(), args, kwargs),
        })
    }

    /// `x[index]`: select for ints, slice for slices, unsqueeze for None.
    fn index(&self, args: Vec<Value>) -> Result<Lowered, String> {
        let [base, index] =
            <[Value; 2]>::try_from(args).map_err(|_| "getitem takes two arguments")?;
        let items = match index {
            Value::Tuple(items) => items,
            one => vec![one],
        };
        let mut steps: Vec<(OpName, Vec<Value>)> = Vec::new();
        let mut dim = 0i64;
        for item in items {
            match item {
                Value::Int(i) => {
                    steps.push((
                        OpName::aten("select", "int"),
                        vec![base.clone(), Value::Int(dim), Value::Int(i)],
                    ));
                }
                Value::Slice(parts) => {
                    let [start, stop, step] =
                        <[Value; 3]>::try_from(parts).map_err(|_| "bad slice")?;
                    let step = if step == Value::None {
                        Value::Int(1)
                    } else {
                        step
                    };
                    steps.push((
                        OpName::aten("slice", "Tensor"),
                        vec![base.clone(), Value::Int(dim), start, stop, step],
                    ));
                    dim += 1;
                }
                Value::None => {
                    steps.push((
                        OpName::aten("unsqueeze", "default"),
                        vec![base.clone(), Value::Int(dim)],
                    ));
                    dim += 1;
                }
                other => {
                    return Err(format!(
                        "indexing with {other:?} is not lowered yet (ints, slices and None are)"
                    ))
                }
            }
        }
        if steps.is_empty() {
            steps.push((OpName::aten("alias", "default"), vec![base]));
        }
        Ok(Lowered::Chain(steps))
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
                    .find(|(n, _)| *n == p.name)
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
        if kwargs
            .iter()
            .any(|(n, _)| !params.iter().any(|p| p.name == *n))
        {
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
                self.graph.node(*id).meta,
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
