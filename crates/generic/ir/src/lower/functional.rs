//! `torch.nn.functional` calls, lowered through the function's own Python signature.
//!
//! Functions torch.nn.functional writes in Python (`F.embedding`, `F.dropout`, the losses)
//! take other parameters than the aten op they call: other names (`training` for aten's
//! `train`), another order (`F.embedding(input, weight)` and `aten::embedding(weight,
//! indices)`), other defaults (`padding_idx=None` for aten's -1) and parameters aten does
//! not have (`inplace`, `size_average`, `return_indices`, `max_norm`). A call is first bound
//! to the function's Python signature, as PyTorch declares it (`functional_signatures.txt`,
//! generated from PyTorch and checked against it by `tests/functionals.rs`), so every
//! argument has its Python name and a value (given or Python's default). Then each is
//! passed to the aten op of the function's name by aten's name for it (`input` is `self`
//! where aten has no `input`, as PyTorch's argument parser names it), with the rules every
//! function shares:
//! - `inplace=True` picks the in-place op (`relu_`); `_stacklevel` only places a warning;
//! - the legacy `size_average` / `reduce` give `reduction`, as `_Reduction.legacy_get_string`
//!   does, and `reduction` strings are aten's numbers;
//! - `return_indices=True` picks the `_with_indices` op where aten has one; where aten's op
//!   always returns the indices too (`adaptive_max_pool2d`), the call is its output 0
//!   unless they are asked for;
//! - `None` for an aten parameter that takes no None but has a default is that default
//!   (`F.max_pool2d(stride=None)` is aten's `stride=[]`);
//! - a Python-only parameter left at its default is dropped; one given another value is
//!   an error naming it.
//!
//! What no rule covers is spelled out below, each with the Python code it follows: an aten
//! op of another name or parameters named otherwise ([`adapter`]), and functions that are
//! several aten ops (`F.embedding` with `max_norm`, `F.softmin`, `F.normalize`, ...). A
//! function that is neither an aten op nor spelled out is an error naming it.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use super::{Kwargs, Lowering};
use crate::graph::{NodeId, NodeKind};
use crate::schema::ArgType;
use crate::types::{Device, Dtype, OpName};
use crate::value::Value;

/// The Python signatures, one a line (`tests/pytorch/functionals.py signatures` writes them).
const SIGNATURES: &str = include_str!("functional_signatures.txt");

/// A parameter's default in a Python signature.
#[derive(Clone, Debug, PartialEq)]
pub enum Default {
    /// No default: the argument is required.
    Required,
    /// A literal graphbug can hold (None, a bool, an int, a float, a string).
    Value(Value),
    /// Another object (a dtype, a tuple of them), as the table spells it: `<dtype>`.
    Opaque(String),
}

/// One parameter of a Python signature.
#[derive(Clone, Debug, PartialEq)]
pub struct Param {
    pub name: String,
    pub default: Default,
    /// Declared after `*`.
    pub keyword_only: bool,
}

/// A `torch.nn.functional` function's Python signature.
#[derive(Clone, Debug, PartialEq)]
pub struct Signature {
    pub name: String,
    pub params: Vec<Param>,
}

impl Signature {
    /// Parses one line of the table: `embedding(input, weight, padding_idx=None, ...)`,
    /// with `*` before keyword-only parameters (`*args` counts as `*`, `**kwargs` is left
    /// out).
    pub fn parse(line: &str) -> Result<Signature, String> {
        let bad = |why: &str| format!("bad signature `{line}`: {why}");
        let (name, rest) = line.split_once('(').ok_or_else(|| bad("no `(`"))?;
        let inner = rest
            .strip_suffix(')')
            .ok_or_else(|| bad("no closing `)`"))?;
        let mut params = Vec::new();
        let mut keyword_only = false;
        for part in inner.split(", ").filter(|p| !p.is_empty()) {
            if part.starts_with("**") {
                continue;
            }
            if part.starts_with('*') {
                keyword_only = true;
                continue;
            }
            let (pname, default) = match part.split_once('=') {
                Some((n, d)) => (n, literal(d)),
                None => (part, Default::Required),
            };
            if !pname.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                return Err(bad(&format!("parameter `{pname}`")));
            }
            params.push(Param {
                name: pname.to_string(),
                default,
                keyword_only,
            });
        }
        Ok(Signature {
            name: name.to_string(),
            params,
        })
    }
}

/// A default as the table writes it: a Python literal, or `<type>` for another object.
fn literal(text: &str) -> Default {
    let value = match text {
        "None" => Value::None,
        "True" => Value::Bool(true),
        "False" => Value::Bool(false),
        "inf" => Value::Float(f64::INFINITY),
        "-inf" => Value::Float(f64::NEG_INFINITY),
        t if t.len() >= 2 && t.starts_with('\'') && t.ends_with('\'') => {
            Value::Str(t[1..t.len() - 1].to_string())
        }
        t => match (t.parse::<i64>(), t.parse::<f64>()) {
            (Ok(i), _) => Value::Int(i),
            (_, Ok(f)) => Value::Float(f),
            _ => return Default::Opaque(t.to_string()),
        },
    };
    Default::Value(value)
}

fn table() -> &'static BTreeMap<String, Signature> {
    static TABLE: OnceLock<BTreeMap<String, Signature>> = OnceLock::new();
    TABLE.get_or_init(|| {
        SIGNATURES
            .lines()
            .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
            .map(|l| {
                // The table is compiled in, and a unit test parses every line of it.
                let sig = Signature::parse(l).expect("functional_signatures.txt parses");
                (sig.name.clone(), sig)
            })
            .collect()
    })
}

/// The Python signature of `torch.nn.functional.<name>`, when the function is written in
/// Python (a builtin such as `F.linear` is an aten op and has none here).
pub fn signature(name: &str) -> Option<&'static Signature> {
    table().get(name)
}

/// Every signature of the table, by name.
#[cfg(test)]
pub fn signatures() -> impl Iterator<Item = &'static Signature> {
    table().values()
}

/// A call's arguments bound to its function's Python parameters: each has a value, given
/// or the default, and is taken once.
pub(super) struct Args {
    sig: &'static Signature,
    values: Vec<Option<Value>>,
    given: Vec<bool>,
}

impl Args {
    /// Binds `args` and `kwargs` as Python binds them to `sig`: too many positional
    /// arguments, an unknown keyword, one given twice or a missing required one is an error.
    fn bind(sig: &'static Signature, args: Vec<Value>, kwargs: Kwargs) -> Result<Args, String> {
        let positional = sig.params.iter().filter(|p| !p.keyword_only).count();
        if args.len() > positional {
            return Err(format!(
                "{} positional arguments, at most {positional}",
                args.len()
            ));
        }
        let n = sig.params.len();
        let mut values: Vec<Option<Value>> = vec![None; n];
        let mut given = vec![false; n];
        for (k, v) in args.into_iter().enumerate() {
            values[k] = Some(v);
            given[k] = true;
        }
        for (key, v) in kwargs {
            let k = sig
                .params
                .iter()
                .position(|p| p.name == key)
                .ok_or_else(|| format!("unknown argument `{key}`"))?;
            if given[k] {
                return Err(format!("argument `{key}` given twice"));
            }
            values[k] = Some(v);
            given[k] = true;
        }
        for (k, p) in sig.params.iter().enumerate() {
            if given[k] {
                continue;
            }
            values[k] = Some(match &p.default {
                Default::Value(v) => v.clone(),
                Default::Required => return Err(format!("missing argument `{}`", p.name)),
                Default::Opaque(d) => {
                    return Err(format!(
                        "`{}` is not given, and its default ({d}) is not a value graphbug holds",
                        p.name
                    ))
                }
            });
        }
        Ok(Args { sig, values, given })
    }

    fn index(&self, name: &str) -> Result<usize, String> {
        self.sig
            .params
            .iter()
            .position(|p| p.name == name)
            .ok_or_else(|| {
                format!(
                    "torch.nn.functional.{} has no parameter `{name}` (regenerate \
                     functional_signatures.txt for this PyTorch?)",
                    self.sig.name
                )
            })
    }

    /// The value of parameter `name`, which no later step sees.
    pub(super) fn take(&mut self, name: &str) -> Result<Value, String> {
        let k = self.index(name)?;
        self.values[k]
            .take()
            .ok_or_else(|| format!("parameter `{name}` is read twice"))
    }

    /// The value of parameter `name` when the function has it (taken, as by `take`).
    pub(super) fn take_if_any(&mut self, name: &str) -> Option<Value> {
        let k = self.sig.params.iter().position(|p| p.name == name)?;
        self.values[k].take()
    }

    /// The value of parameter `name`, left for later steps.
    pub(super) fn get(&self, name: &str) -> Result<Value, String> {
        let k = self.index(name)?;
        self.values[k]
            .clone()
            .ok_or_else(|| format!("parameter `{name}` was already read"))
    }

    /// Replaces the value of parameter `name` (a value Python computes before its call).
    pub(super) fn set(&mut self, name: &str, v: Value) -> Result<(), String> {
        let k = self.index(name)?;
        self.values[k] = Some(v);
        Ok(())
    }

    /// The parameters not taken yet, in order: name, value, and whether the value is
    /// Python's default (not given, or given as the default).
    pub(super) fn rest(&mut self) -> Vec<(&'static str, Value, bool)> {
        let sig = self.sig;
        let mut out = Vec::new();
        for (k, p) in sig.params.iter().enumerate() {
            if let Some(v) = self.values[k].take() {
                let at_default = !self.given[k] || p.default == Default::Value(v.clone());
                out.push((p.name.as_str(), v, at_default));
            }
        }
        out
    }
}

/// An aten op a function calls under another name, parameters it names otherwise, and
/// values it passes that the Python signature has no parameter for.
struct Adapter<'a> {
    aten: &'a str,
    renames: &'static [(&'static str, &'static str)],
    extra: Vec<(&'static str, Value)>,
}

/// The spelled-out differences between a function and its aten op (each from the Python
/// function's body); the function's own name, names and nothing extra otherwise.
fn adapter(name: &str) -> Adapter<'_> {
    let mut a = Adapter {
        aten: name,
        renames: &[],
        extra: Vec::new(),
    };
    match name {
        // `_VF.dropout(input, p, training)`: aten names it `train`.
        "dropout" | "alpha_dropout" | "feature_alpha_dropout" => {
            a.renames = &[("training", "train")];
        }
        // `torch.batch_norm(..., torch.backends.cudnn.enabled)`: cudnn is on unless a
        // program turns it off, which a graph does not record.
        "batch_norm" | "instance_norm" => {
            a.extra = vec![("cudnn_enabled", Value::Bool(true))];
        }
        // `torch._C._nn.cross_entropy_loss(input, target, weight, reduction, ...)`.
        "cross_entropy" => a.aten = "cross_entropy_loss",
        // `torch._C._nn.nll_loss_nd`: aten::nll_loss takes 1-d and 2-d inputs only.
        "nll_loss" => a.aten = "nll_loss_nd",
        // `torch.embedding(weight, input, ...)`: aten's `indices`.
        "embedding" => a.renames = &[("input", "indices")],
        // `torch._C._nn.im2col` and `col2im`; aten::unfold is Tensor.unfold.
        "unfold" => a.aten = "im2col",
        "fold" => a.aten = "col2im",
        _ => {}
    }
    a
}

/// `reduction` as aten's number.
fn reduction_code(v: Value) -> Result<Value, String> {
    match v {
        Value::Str(s) => Ok(Value::Int(match s.as_str() {
            "none" => 0,
            "mean" => 1,
            "sum" => 2,
            other => return Err(format!("unknown reduction `{other}`")),
        })),
        other => Ok(other),
    }
}

/// The reduction the legacy `size_average` and `reduce` ask for, when either is given
/// (`_Reduction.legacy_get_string`: None counts as True).
fn legacy_reduction(args: &mut Args) -> Result<Option<Value>, String> {
    let size_average = args.take_if_any("size_average");
    let reduce = args.take_if_any("reduce");
    let flag = |v: Option<Value>, name: &str| match v {
        None | Some(Value::None) => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(b)),
        Some(other) => Err(format!("`{name}` {other:?} is not a bool")),
    };
    let (size_average, reduce) = (flag(size_average, "size_average")?, flag(reduce, "reduce")?);
    if size_average.is_none() && reduce.is_none() {
        return Ok(None);
    }
    let (size_average, reduce) = (size_average.unwrap_or(true), reduce.unwrap_or(true));
    let r = if size_average && reduce {
        "mean"
    } else if reduce {
        "sum"
    } else {
        "none"
    };
    Ok(Some(Value::Str(r.to_string())))
}

/// An int or a list of `n` ints (PyTorch's `_single`, `_pair`, `_triple`).
fn ints(v: &Value, n: usize, what: &str) -> Result<Vec<i64>, String> {
    match v {
        Value::Int(i) => Ok(vec![*i; n]),
        Value::List(items) | Value::Tuple(items) if items.len() == n => items
            .iter()
            .map(|i| match i {
                Value::Int(i) => Ok(*i),
                other => Err(format!("{what} {other:?} is not an int")),
            })
            .collect(),
        other => Err(format!("{what} {other:?} is not an int or {n} ints")),
    }
}

/// A number or a list of `n` numbers, as floats.
fn floats(v: &Value, n: usize, what: &str) -> Result<Vec<f64>, String> {
    let one = |v: &Value| match v {
        Value::Int(i) => Ok(*i as f64),
        Value::Float(f) => Ok(*f),
        other => Err(format!("{what} {other:?} is not a number")),
    };
    match v {
        Value::List(items) | Value::Tuple(items) if items.len() == n => {
            items.iter().map(one).collect()
        }
        v => Ok(vec![one(v)?; n]),
    }
}

fn int_list(v: impl IntoIterator<Item = i64>) -> Value {
    Value::List(v.into_iter().map(Value::Int).collect())
}

fn aten(name: &str, overload: &str) -> OpName {
    OpName::aten(name, overload)
}

impl Lowering<'_> {
    /// `torch.nn.functional.<name>(args, kwargs)`: see the module docs.
    pub(super) fn functional(
        &mut self,
        name: &str,
        args: Vec<Value>,
        kwargs: Kwargs,
    ) -> Result<NodeKind, String> {
        let Some(sig) = signature(name) else {
            // A builtin (`F.linear` is `torch._C._nn.linear`): the aten op itself.
            return self.bind(name, args, kwargs, false);
        };
        let mut call = Args::bind(sig, args, kwargs)?;
        match name {
            "embedding" => self.embedding(call),
            "embedding_bag" => self.embedding_bag(call),
            "multi_head_attention_forward" => self.multi_head_attention(call),
            "interpolate" | "upsample" | "upsample_nearest" | "upsample_bilinear" => {
                self.interpolate(name, call)
            }
            "softmax" | "log_softmax" | "softmin" => self.softmax(name, call),
            "dropout1d" | "dropout2d" | "dropout3d" => self.feature_dropout(name, call),
            "max_unpool1d" | "max_unpool2d" | "max_unpool3d" => self.max_unpool(name, call),
            "fractional_max_pool2d"
            | "fractional_max_pool3d"
            | "fractional_max_pool2d_with_indices"
            | "fractional_max_pool3d_with_indices" => self.fractional_max_pool(name, call),
            "grid_sample" => self.grid_sample(call),
            "affine_grid" => self.affine_grid(call),
            "lp_pool1d" | "lp_pool2d" | "lp_pool3d" => self.lp_pool(name, call),
            "gumbel_softmax" => self.gumbel_softmax(call),
            "kl_div" => self.kl_div(call),
            "softsign" | "tanhshrink" => self.shrink(name, call),
            "normalize" => self.normalize(call),
            "local_response_norm" => self.local_response_norm(call),
            "multilabel_soft_margin_loss" => self.multilabel_soft_margin_loss(call),
            _ => {
                if name.starts_with("adaptive_") {
                    self.sizes_with_default(&mut call)?;
                }
                let a = adapter(name);
                // `adaptive_max_pool2d_with_indices` calls aten::adaptive_max_pool2d, which
                // returns the indices anyway.
                let aten_name = match name.strip_suffix("_with_indices") {
                    Some(base)
                        if a.aten == name && self.schemas.overloads("aten", name).is_empty() =>
                    {
                        base
                    }
                    _ => a.aten,
                };
                self.aten_call(&mut call, aten_name, a.renames, a.extra)
            }
        }
    }

    /// The call as aten op `name` by the shared rules (see the module docs): each Python
    /// parameter not taken yet passed by its aten name (`renames` gives those that
    /// differ), and `extra` values besides.
    fn aten_call(
        &mut self,
        call: &mut Args,
        name: &str,
        renames: &[(&str, &str)],
        extra: Vec<(&'static str, Value)>,
    ) -> Result<NodeKind, String> {
        let function = call.sig.name.as_str();
        let inplace = match call.take_if_any("inplace") {
            None | Some(Value::Bool(false)) => false,
            Some(Value::Bool(true)) => true,
            Some(other) => return Err(format!("`inplace` {other:?} is not a bool")),
        };
        // `_stacklevel` only says where a deprecation warning points.
        call.take_if_any("_stacklevel");
        let legacy = legacy_reduction(call)?;
        let has_return_indices = call.sig.params.iter().any(|p| p.name == "return_indices");
        let asked = match call.take_if_any("return_indices") {
            None | Some(Value::Bool(false)) => false,
            Some(Value::Bool(true)) => true,
            Some(other) => return Err(format!("`return_indices` {other:?} is not a bool")),
        };
        // `max_pool2d_with_indices` returns the indices whatever `return_indices` says.
        let with_indices = asked || function.ends_with("_with_indices");
        let mut op = name.to_string();
        if with_indices
            && !op.ends_with("_with_indices")
            && !self
                .schemas
                .overloads("aten", &format!("{op}_with_indices"))
                .is_empty()
        {
            op.push_str("_with_indices");
        }
        if inplace {
            op.push('_');
        }
        let mut params: Vec<(&str, String, Value, bool)> = Vec::new();
        for (py, v, at_default) in call.rest() {
            let v = match (py, &legacy) {
                ("reduction", Some(l)) => reduction_code(l.clone())?,
                ("reduction", None) => reduction_code(v)?,
                _ => v,
            };
            let aten_name = renames
                .iter()
                .find(|(p, _)| *p == py)
                .map_or(py, |(_, a)| *a);
            params.push((py, aten_name.to_string(), v, at_default));
        }
        for (k, v) in extra {
            params.push((k, k.to_string(), v, false));
        }
        let overloads = self.schemas.overloads("aten", &op);
        if overloads.is_empty() {
            return Err(format!("no aten op `{op}`"));
        }
        let mut best: Option<(u32, NodeKind, usize)> = None;
        let mut python_only: Option<&str> = None;
        'overloads: for overload in &overloads {
            let opname = OpName::aten(&op, overload);
            let Some(schema) = self.schemas.schema(&opname) else {
                continue;
            };
            let has = |n: &str| schema.arguments.iter().any(|a| a.name == n);
            let mut kwargs: Kwargs = Vec::new();
            for (py, aten_name, v, at_default) in &params {
                let aten_name = if aten_name == "input" && !has("input") && has("self") {
                    "self"
                } else {
                    aten_name.as_str()
                };
                match schema.arguments.iter().find(|a| a.name == aten_name) {
                    Some(a) => {
                        let ty = ArgType::parse(&a.ty);
                        // Python's None where aten takes none but has a default: that
                        // default (F.embedding's padding_idx, F.max_pool2d's stride).
                        if *v == Value::None
                            && !(ty.list_optional || ty.elem_optional)
                            && a.default.is_some()
                        {
                            continue;
                        }
                        kwargs.push((aten_name.to_string(), v.clone()));
                    }
                    // A Python-only parameter at its default changes nothing.
                    None if *at_default => {}
                    None => {
                        python_only = Some(py);
                        continue 'overloads;
                    }
                }
            }
            if let Some((score, _, kwargs)) = self.try_bind(&schema, &[], &kwargs, false) {
                if best.as_ref().is_none_or(|(s, _, _)| score > *s) {
                    // Leading arguments by position, as a call is printed.
                    let mut args = Vec::new();
                    let mut kwargs = kwargs;
                    for p in schema.arguments.iter().filter(|a| !a.kwarg_only) {
                        match kwargs.iter().position(|(k, _)| *k == p.name) {
                            Some(i) => args.push(kwargs.remove(i).1),
                            None => break,
                        }
                    }
                    let kind = NodeKind::Call {
                        op: opname,
                        args,
                        kwargs,
                    };
                    best = Some((score, kind, schema.returns.len()));
                }
            }
        }
        let Some((_, kind, returns)) = best else {
            return Err(match python_only {
                Some(p) => format!(
                    "`{p}` (a parameter of torch.nn.functional.{function} that aten::{op} \
                     does not have) is not lowered yet"
                ),
                None => format!(
                    "no overload of aten::{op} ({}) takes these arguments",
                    overloads.join(", ")
                ),
            });
        };
        // aten::adaptive_max_pool2d returns the indices too; F.adaptive_max_pool2d only
        // when asked.
        if has_return_indices && !with_indices && returns > 1 {
            return Ok(self.first_output(kind));
        }
        Ok(kind)
    }

    /// The adaptive poolings' `_list_with_default(output_size, input.size())`: a None item
    /// of `output_size` is the input's size in that dimension.
    fn sizes_with_default(&self, call: &mut Args) -> Result<(), String> {
        let (Value::List(items) | Value::Tuple(items)) = call.get("output_size")? else {
            return Ok(());
        };
        if !items.contains(&Value::None) {
            return Ok(());
        }
        let shape = self.static_shape(&call.get("input")?, "an output_size item None")?;
        let tail = &shape[shape.len().saturating_sub(items.len())..];
        let filled = items
            .iter()
            .zip(tail)
            .map(|(v, &d)| match v {
                Value::None => Value::Int(d),
                v => v.clone(),
            })
            .collect();
        call.set("output_size", Value::List(filled))
    }

    /// A node computing `kind` before this one, and this one its output 0.
    fn first_output(&mut self, kind: NodeKind) -> NodeKind {
        let Value::Node(source) = self.emit_kind("out", kind) else {
            unreachable!("emit gives a node")
        };
        NodeKind::GetItem { source, index: 0 }
    }

    /// The static shape of a tensor argument, or an error saying what needs it.
    fn static_shape(&self, v: &Value, what: &str) -> Result<Vec<i64>, String> {
        self.shape(v)
            .ok_or_else(|| format!("{what} needs the static shape annotation of its input"))
    }

    /// The dtype of a tensor argument, from its annotation.
    fn dtype(&self, v: &Value) -> Option<Dtype> {
        v.as_node()
            .and_then(|id: NodeId| self.out.node(id).meta.tensor().map(|t| t.dtype))
    }

    /// `F.embedding(input, weight, padding_idx, max_norm, norm_type, scale_grad_by_freq,
    /// sparse)`: a negative `padding_idx` counts from the end of the weight's rows (None is
    /// aten's -1, no padding row), and `max_norm` first renormalizes the rows the input
    /// reads, in place (`torch.embedding_renorm_`, as F.embedding does under no_grad);
    /// then `aten::embedding(weight, indices, ...)`.
    fn embedding(&mut self, mut call: Args) -> Result<NodeKind, String> {
        let weight = call.get("weight")?;
        let padding = match call.take("padding_idx")? {
            Value::None => Value::Int(-1),
            Value::Int(i) if i < 0 => {
                let rows = self.static_shape(&weight, "a negative padding_idx")?[0];
                Value::Int(rows + i)
            }
            other => other,
        };
        call.set("padding_idx", padding)?;
        let max_norm = call.take("max_norm")?;
        let norm_type = call.take("norm_type")?;
        if max_norm != Value::None {
            let input = call.get("input")?;
            self.emit(
                "renorm",
                aten("embedding_renorm_", "default"),
                vec![weight, input, max_norm, norm_type],
            );
        }
        let a = adapter("embedding");
        self.aten_call(&mut call, a.aten, a.renames, a.extra)
    }

    /// `F.embedding_bag(input, weight, offsets, max_norm, norm_type, scale_grad_by_freq,
    /// mode, sparse, per_sample_weights, include_last_offset, padding_idx)`: output 0 of
    /// `aten::embedding_bag(weight, input, offsets, ...)`, its mode as aten's number. A 2-d
    /// input is bags of its rows (offsets every row, input and per-sample weights
    /// flattened); `max_norm` renormalizes the rows read first, as in [`Self::embedding`].
    fn embedding_bag(&mut self, mut call: Args) -> Result<NodeKind, String> {
        let mut input = call.take("input")?;
        let weight = call.take("weight")?;
        let mut offsets = call.take("offsets")?;
        let max_norm = call.take("max_norm")?;
        let norm_type = call.take("norm_type")?;
        let scale = call.take("scale_grad_by_freq")?;
        let mode = match call.take("mode")? {
            Value::Str(m) => match m.as_str() {
                "sum" => 0,
                "mean" => 1,
                "max" => 2,
                other => return Err(format!("unknown mode `{other}`")),
            },
            other => return Err(format!("mode {other:?} is not a string")),
        };
        let sparse = call.take("sparse")?;
        let mut per_sample = call.take("per_sample_weights")?;
        let mut last = call.take("include_last_offset")?;
        let padding = call.take("padding_idx")?;
        match self.rank(&input) {
            Some(1) if offsets != Value::None => {}
            Some(2) if offsets == Value::None => {
                let shape = self.static_shape(&input, "a 2-d input")?;
                let dtype = self.dtype(&input).unwrap_or(Dtype::Int64);
                offsets = self.emit_kind(
                    "offsets",
                    NodeKind::Call {
                        op: aten("arange", "start_step"),
                        args: vec![
                            Value::Int(0),
                            Value::Int(shape[0] * shape[1]),
                            Value::Int(shape[1]),
                        ],
                        kwargs: vec![
                            ("dtype".into(), Value::Dtype(dtype)),
                            ("device".into(), Value::Device(Device::cpu())),
                        ],
                    },
                );
                let flat = |this: &mut Self, v: Value| {
                    this.emit("flat", aten("reshape", "default"), vec![v, int_list([-1])])
                };
                input = flat(self, input);
                if per_sample != Value::None {
                    per_sample = flat(self, per_sample);
                }
                last = Value::Bool(false);
            }
            Some(1) => return Err("a 1-d input needs offsets".into()),
            Some(2) => return Err("a 2-d input takes no offsets".into()),
            _ => return Err("the input needs a 1-d or 2-d shape annotation".into()),
        }
        if max_norm != Value::None {
            self.emit(
                "renorm",
                aten("embedding_renorm_", "default"),
                vec![weight.clone(), input.clone(), max_norm, norm_type],
            );
        }
        let call = self.bind(
            "embedding_bag",
            vec![
                weight,
                input,
                offsets,
                scale,
                Value::Int(mode),
                sparse,
                per_sample,
                last,
                padding,
            ],
            Vec::new(),
            false,
        )?;
        Ok(self.first_output(call))
    }

    /// `F.softmax(input, dim, _stacklevel, dtype)`, `F.log_softmax`, and `F.softmin`
    /// (`(-input).softmax(dim)`). Without `dim`, the legacy choice of
    /// `_get_softmax_dim`: 0 for 0-, 1- and 3-d inputs, else 1.
    fn softmax(&mut self, name: &str, mut call: Args) -> Result<NodeKind, String> {
        if call.get("dim")? == Value::None {
            let rank = self
                .rank(&call.get("input")?)
                .ok_or("an implicit `dim` needs the input's shape annotation")?;
            call.set(
                "dim",
                Value::Int(if matches!(rank, 0 | 1 | 3) { 0 } else { 1 }),
            )?;
        }
        let name = if name == "softmin" {
            let neg = self.emit("neg", aten("neg", "default"), vec![call.get("input")?]);
            call.set("input", neg)?;
            "softmax"
        } else {
            name
        };
        self.aten_call(&mut call, name, &[], Vec::new())
    }

    /// `F.dropout1d/2d/3d(input, p, training, inplace)`: `_VF.feature_dropout` (or
    /// `feature_dropout_`), on the input with a batch dimension added when it has none
    /// (dropout1d: 2-d, dropout3d: 4-d; dropout2d takes any input as batched).
    fn feature_dropout(&mut self, name: &str, mut call: Args) -> Result<NodeKind, String> {
        let input = call.take("input")?;
        let p = call.take("p")?;
        let train = call.take("training")?;
        let inplace = call.take("inplace")? == Value::Bool(true);
        let rank = self.rank(&input);
        let unbatched = match name {
            "dropout1d" => match rank {
                Some(2) => true,
                Some(3) => false,
                _ => return Err("dropout1d takes a 2-d or 3-d input (annotated)".into()),
            },
            "dropout3d" => rank.ok_or("the input needs a shape annotation")? != 5,
            _ => false,
        };
        let input = if unbatched {
            self.emit(
                "batched",
                aten("unsqueeze", "default"),
                vec![input, Value::Int(0)],
            )
        } else {
            input
        };
        let op = if inplace {
            "feature_dropout_"
        } else {
            "feature_dropout"
        };
        let kind = NodeKind::Call {
            op: aten(op, "default"),
            args: vec![input, p, train],
            kwargs: Vec::new(),
        };
        if !unbatched {
            return Ok(kind);
        }
        let out = self.emit_kind("dropout", kind);
        Ok(NodeKind::Call {
            op: aten("squeeze", "dim"),
            args: vec![out, Value::Int(0)],
            kwargs: Vec::new(),
        })
    }

    /// `F.max_unpool1d/2d/3d(input, indices, kernel_size, stride, padding, output_size)`:
    /// the output size `_unpool_output_size` computes (`(in - 1) * stride + kernel - 2 *
    /// padding` when not given; stride defaults to the kernel), then aten::max_unpool2d
    /// (1-d through a trailing unit dimension) or max_unpool3d.
    fn max_unpool(&mut self, name: &str, mut call: Args) -> Result<NodeKind, String> {
        let n = match name {
            "max_unpool1d" => 1,
            "max_unpool2d" => 2,
            _ => 3,
        };
        let input = call.take("input")?;
        let indices = call.take("indices")?;
        let kernel = ints(&call.take("kernel_size")?, n, "kernel_size")?;
        let stride = match call.take("stride")? {
            Value::None => kernel.clone(),
            s => ints(&s, n, "stride")?,
        };
        let padding = ints(&call.take("padding")?, n, "padding")?;
        let output_size = match call.take("output_size")? {
            Value::None => {
                let shape = self.static_shape(&input, "max_unpool")?;
                let spatial = &shape[shape.len().checked_sub(n).ok_or("input rank")?..];
                (0..n)
                    .map(|d| (spatial[d] - 1) * stride[d] + kernel[d] - 2 * padding[d])
                    .collect::<Vec<_>>()
            }
            Value::List(items) | Value::Tuple(items) if items.len() == n + 2 => {
                ints(&Value::List(items[2..].to_vec()), n, "output_size")?
            }
            v => ints(&v, n, "output_size")?,
        };
        match n {
            1 => {
                let unit = |this: &mut Self, v: Value| {
                    this.emit(
                        "unit",
                        aten("unsqueeze", "default"),
                        vec![v, Value::Int(-1)],
                    )
                };
                let (input, indices) = (unit(self, input), unit(self, indices));
                let out = self.emit(
                    "unpool",
                    aten("max_unpool2d", "default"),
                    vec![input, indices, int_list(output_size.into_iter().chain([1]))],
                );
                Ok(NodeKind::Call {
                    op: aten("squeeze", "dim"),
                    args: vec![out, Value::Int(-1)],
                    kwargs: Vec::new(),
                })
            }
            2 => Ok(NodeKind::Call {
                op: aten("max_unpool2d", "default"),
                args: vec![input, indices, int_list(output_size)],
                kwargs: Vec::new(),
            }),
            _ => Ok(NodeKind::Call {
                op: aten("max_unpool3d", "default"),
                args: vec![
                    input,
                    indices,
                    int_list(output_size),
                    int_list(stride),
                    int_list(padding),
                ],
                kwargs: Vec::new(),
            }),
        }
    }

    /// `F.fractional_max_pool2d/3d(input, kernel_size, output_size, output_ratio,
    /// return_indices, _random_samples)`: the output size from the ratio
    /// (`int(in * ratio)`), random samples `torch.rand(batch, channels, 2 or 3)` in the
    /// input's dtype when not given, then aten's op, which returns the indices too.
    fn fractional_max_pool(&mut self, name: &str, mut call: Args) -> Result<NodeKind, String> {
        let n = if name.starts_with("fractional_max_pool2d") {
            2
        } else {
            3
        };
        let input = call.get("input")?;
        let shape = self.static_shape(&input, name)?;
        if shape.len() < n + 1 {
            return Err(format!("a {}-d input is too small", shape.len()));
        }
        let output_size = match (call.take("output_size")?, call.take("output_ratio")?) {
            (Value::None, Value::None) => {
                return Err("either output_size or output_ratio is needed".into())
            }
            (Value::None, ratio) => {
                let ratio = floats(&ratio, n, "output_ratio")?;
                let spatial = &shape[shape.len() - n..];
                int_list((0..n).map(|d| (spatial[d] as f64 * ratio[d]) as i64))
            }
            (size, _) => size,
        };
        let samples = match call.take("_random_samples")? {
            Value::None => {
                let batch = if shape.len() == n + 1 { 1 } else { shape[0] };
                let channels = shape[shape.len() - n - 1];
                let dtype = self.dtype(&input).unwrap_or(Dtype::Float32);
                self.emit_kind(
                    "samples",
                    NodeKind::Call {
                        op: aten("rand", "default"),
                        args: vec![int_list([batch, channels, n as i64])],
                        kwargs: vec![
                            ("dtype".into(), Value::Dtype(dtype)),
                            ("device".into(), Value::Device(Device::cpu())),
                        ],
                    },
                )
            }
            s => s,
        };
        call.set("output_size", output_size)?;
        let op = format!("fractional_max_pool{n}d");
        let kind = self.bind(
            &op,
            vec![
                call.take("input")?,
                call.take("kernel_size")?,
                call.take("output_size")?,
                samples,
            ],
            Vec::new(),
            false,
        )?;
        let with_indices =
            name.ends_with("_with_indices") || call.take("return_indices")? == Value::Bool(true);
        Ok(if with_indices {
            kind
        } else {
            self.first_output(kind)
        })
    }

    /// `F.grid_sample(input, grid, mode, padding_mode, align_corners)`:
    /// `torch.grid_sampler` with the modes as its numbers and `align_corners` None as False.
    fn grid_sample(&mut self, mut call: Args) -> Result<NodeKind, String> {
        let code = |v: Value, names: &[&str], what: &str| -> Result<Value, String> {
            match v {
                Value::Str(s) => names
                    .iter()
                    .position(|n| *n == s)
                    .map(|i| Value::Int(i as i64))
                    .ok_or_else(|| format!("unknown {what} `{s}`")),
                other => Err(format!("{what} {other:?} is not a string")),
            }
        };
        let mode = code(
            call.take("mode")?,
            &["bilinear", "nearest", "bicubic"],
            "mode",
        )?;
        let padding = code(
            call.take("padding_mode")?,
            &["zeros", "border", "reflection"],
            "padding_mode",
        )?;
        let align = match call.take("align_corners")? {
            Value::None => Value::Bool(false),
            v => v,
        };
        Ok(NodeKind::Call {
            op: aten("grid_sampler", "default"),
            args: vec![
                call.take("input")?,
                call.take("grid")?,
                mode,
                padding,
                align,
            ],
            kwargs: Vec::new(),
        })
    }

    /// `F.affine_grid(theta, size, align_corners)`: `torch.affine_grid_generator`, with
    /// `align_corners` None as False.
    fn affine_grid(&mut self, mut call: Args) -> Result<NodeKind, String> {
        let align = match call.take("align_corners")? {
            Value::None => Value::Bool(false),
            v => v,
        };
        Ok(NodeKind::Call {
            op: aten("affine_grid_generator", "default"),
            args: vec![call.take("theta")?, call.take("size")?, align],
            kwargs: Vec::new(),
        })
    }

    /// `F.lp_pool1d/2d/3d(input, norm_type, kernel_size, stride, ceil_mode)`:
    /// `avg_pool(input ** p)`, then `(sign(out) * relu(abs(out)) * kernel volume) ** (1 /
    /// p)`; an infinite `p` is the max pool of `abs(input)` (negated twice for `-inf`).
    fn lp_pool(&mut self, name: &str, mut call: Args) -> Result<NodeKind, String> {
        let n = match name {
            "lp_pool1d" => 1,
            "lp_pool2d" => 2,
            _ => 3,
        };
        let input = call.take("input")?;
        let p = call.take("norm_type")?;
        let kernel = ints(&call.take("kernel_size")?, n, "kernel_size")?;
        let stride = match call.take("stride")? {
            Value::None => Value::List(Vec::new()),
            s => int_list(ints(&s, n, "stride")?),
        };
        let ceil = call.take("ceil_mode")?;
        let zeros = int_list(vec![0; n]);
        let pool = format!("{n}d");
        if let Value::Float(f) = p {
            if f.is_infinite() {
                let abs = self.emit("abs", aten("abs", "default"), vec![input]);
                let x = if f > 0.0 {
                    abs
                } else {
                    self.emit("neg", aten("neg", "default"), vec![abs])
                };
                let args = vec![
                    x,
                    int_list(kernel),
                    stride,
                    zeros,
                    int_list(vec![1; n]),
                    ceil,
                ];
                let op = aten(&format!("max_pool{pool}"), "default");
                if f > 0.0 {
                    return Ok(NodeKind::Call {
                        op,
                        args,
                        kwargs: Vec::new(),
                    });
                }
                let max = self.emit("max", op, args);
                return Ok(NodeKind::Call {
                    op: aten("neg", "default"),
                    args: vec![max],
                    kwargs: Vec::new(),
                });
            }
        }
        let inverse = match p {
            Value::Int(i) => 1.0 / i as f64,
            Value::Float(f) => 1.0 / f,
            other => return Err(format!("norm_type {other:?} is not a number")),
        };
        let pow = self.emit("pow", aten("pow", "Tensor_Scalar"), vec![input, p]);
        let volume: i64 = kernel.iter().product();
        let out = self.emit(
            "avg",
            aten(&format!("avg_pool{pool}"), "default"),
            vec![pow, int_list(kernel), stride, zeros, ceil],
        );
        let sign = self.emit("sign", aten("sign", "default"), vec![out.clone()]);
        let abs = self.emit("abs", aten("abs", "default"), vec![out]);
        let relu = self.emit("relu", aten("relu", "default"), vec![abs]);
        let x = self.emit("norm", aten("mul", "Tensor"), vec![sign, relu]);
        let x = self.emit("norm", aten("mul", "Scalar"), vec![x, Value::Int(volume)]);
        Ok(NodeKind::Call {
            op: aten("pow", "Tensor_Scalar"),
            args: vec![x, Value::Float(inverse)],
            kwargs: Vec::new(),
        })
    }

    /// `F.gumbel_softmax(logits, tau, hard, eps, dim)`: softmax of `(logits + g) / tau`
    /// with Gumbel noise `g = -log(Exp(1))` (`empty_like(logits).exponential_()`); `hard`
    /// makes it the one-hot of its argmax plus `y - y.detach()`. `eps` has no effect.
    fn gumbel_softmax(&mut self, mut call: Args) -> Result<NodeKind, String> {
        let logits = call.take("logits")?;
        let (tau, hard, dim) = (call.take("tau")?, call.take("hard")?, call.take("dim")?);
        let e = self.emit("noise", aten("empty_like", "default"), vec![logits.clone()]);
        let e = self.emit("noise", aten("exponential_", "default"), vec![e]);
        let e = self.emit("noise", aten("log", "default"), vec![e]);
        let g = self.emit("noise", aten("neg", "default"), vec![e]);
        let x = self.emit("gumbels", aten("add", "Tensor"), vec![logits.clone(), g]);
        let x = self.emit("gumbels", aten("div", "Scalar"), vec![x, tau]);
        let soft = NodeKind::Call {
            op: aten("softmax", "int"),
            args: vec![x, dim.clone(), Value::None],
            kwargs: Vec::new(),
        };
        if hard != Value::Bool(true) {
            return Ok(soft);
        }
        let y = self.emit_kind("soft", soft);
        let max = self.emit(
            "max",
            aten("max", "dim"),
            vec![y.clone(), dim.clone(), Value::Bool(true)],
        );
        let Value::Node(max) = max else {
            unreachable!("emit gives a node")
        };
        let index = self.emit_kind(
            "index",
            NodeKind::GetItem {
                source: max,
                index: 1,
            },
        );
        let zeros = self.emit("hard", aten("zeros_like", "default"), vec![logits]);
        let y_hard = self.emit(
            "hard",
            aten("scatter_", "value"),
            vec![zeros, dim, index, Value::Float(1.0)],
        );
        let detached = self.emit("detach", aten("detach", "default"), vec![y.clone()]);
        let d = self.emit("hard", aten("sub", "Tensor"), vec![y_hard, detached]);
        Ok(NodeKind::Call {
            op: aten("add", "Tensor"),
            args: vec![d, y],
            kwargs: Vec::new(),
        })
    }

    /// `F.kl_div`: aten::kl_div; `reduction='batchmean'` is the sum over the batch size.
    fn kl_div(&mut self, mut call: Args) -> Result<NodeKind, String> {
        let batchmean = call.get("reduction")? == Value::Str("batchmean".into());
        let input = call.get("input")?;
        if batchmean {
            call.set("reduction", Value::Str("sum".into()))?;
        }
        let kind = self.aten_call(&mut call, "kl_div", &[], Vec::new())?;
        let rank = self.rank(&input);
        if !batchmean || rank == Some(0) {
            return Ok(kind);
        }
        let batch = self.static_shape(&input, "reduction `batchmean`")?[0];
        let sum = self.emit_kind("sum", kind);
        Ok(NodeKind::Call {
            op: aten("div", "Scalar"),
            args: vec![sum, Value::Int(batch)],
            kwargs: Vec::new(),
        })
    }

    /// `F.softsign(input)`: `input / (input.abs() + 1)`; `F.tanhshrink(input)`:
    /// `input - input.tanh()`.
    fn shrink(&mut self, name: &str, mut call: Args) -> Result<NodeKind, String> {
        let input = call.take("input")?;
        let (op, other) = if name == "softsign" {
            let abs = self.emit("abs", aten("abs", "default"), vec![input.clone()]);
            let denom = self.emit("denom", aten("add", "Scalar"), vec![abs, Value::Int(1)]);
            ("div", denom)
        } else {
            let tanh = self.emit("tanh", aten("tanh", "default"), vec![input.clone()]);
            ("sub", tanh)
        };
        Ok(NodeKind::Call {
            op: aten(op, "Tensor"),
            args: vec![input, other],
            kwargs: Vec::new(),
        })
    }

    /// `F.normalize(input, p, dim, eps, out)`:
    /// `input / input.norm(p, dim, keepdim=True).clamp_min(eps).expand_as(input)`.
    fn normalize(&mut self, mut call: Args) -> Result<NodeKind, String> {
        if call.take("out")? != Value::None {
            return Err("`out` is not lowered yet".into());
        }
        let input = call.take("input")?;
        let dim = match call.take("dim")? {
            Value::Int(d) => int_list([d]),
            other => other,
        };
        let norm = self.emit_kind(
            "norm",
            NodeKind::Call {
                op: aten("norm", "ScalarOpt_dim"),
                args: vec![input.clone(), call.take("p")?, dim, Value::Bool(true)],
                kwargs: Vec::new(),
            },
        );
        let denom = self.emit(
            "denom",
            aten("clamp_min", "default"),
            vec![norm, call.take("eps")?],
        );
        let denom = self.emit(
            "denom",
            aten("expand_as", "default"),
            vec![denom, input.clone()],
        );
        Ok(NodeKind::Call {
            op: aten("div", "Tensor"),
            args: vec![input, denom],
            kwargs: Vec::new(),
        })
    }

    /// `F.local_response_norm(input, size, alpha, beta, k)`: the squares averaged over
    /// `size` neighbouring channels (zero-padded; avg_pool2d for 3-d inputs, avg_pool3d
    /// over a view of 5 dims otherwise), then `input / (avg * alpha + k) ** beta`.
    fn local_response_norm(&mut self, mut call: Args) -> Result<NodeKind, String> {
        let input = call.take("input")?;
        let Value::Int(size) = call.take("size")? else {
            return Err("`size` is not an int".into());
        };
        let shape = self.static_shape(&input, "local_response_norm")?;
        if shape.len() < 3 {
            return Err(format!("a {}-d input (3-d or more expected)", shape.len()));
        }
        if shape.iter().product::<i64>() == 0 {
            return Ok(NodeKind::Call {
                op: aten("alias", "default"),
                args: vec![input],
                kwargs: Vec::new(),
            });
        }
        let (before, after) = (size / 2, (size - 1) / 2);
        let sq = self.emit(
            "sq",
            aten("mul", "Tensor"),
            vec![input.clone(), input.clone()],
        );
        let div = if shape.len() == 3 {
            let d = self.emit("div", aten("unsqueeze", "default"), vec![sq, Value::Int(1)]);
            let d = self.emit(
                "div",
                aten("constant_pad_nd", "default"),
                vec![d, int_list([0, 0, before, after])],
            );
            let d = self.emit(
                "div",
                aten("avg_pool2d", "default"),
                vec![d, int_list([size, 1]), int_list([1, 1])],
            );
            self.emit("div", aten("squeeze", "dim"), vec![d, Value::Int(1)])
        } else {
            let d = self.emit(
                "div",
                aten("view", "default"),
                vec![sq, int_list([shape[0], 1, shape[1], shape[2], -1])],
            );
            let d = self.emit(
                "div",
                aten("constant_pad_nd", "default"),
                vec![d, int_list([0, 0, 0, 0, before, after])],
            );
            let d = self.emit(
                "div",
                aten("avg_pool3d", "default"),
                vec![d, int_list([size, 1, 1]), int_list([1, 1, 1])],
            );
            let d = self.emit("div", aten("squeeze", "dim"), vec![d, Value::Int(1)]);
            self.emit("div", aten("view", "default"), vec![d, int_list(shape)])
        };
        let d = self.emit("div", aten("mul", "Scalar"), vec![div, call.take("alpha")?]);
        let d = self.emit("div", aten("add", "Scalar"), vec![d, call.take("k")?]);
        let d = self.emit(
            "div",
            aten("pow", "Tensor_Scalar"),
            vec![d, call.take("beta")?],
        );
        Ok(NodeKind::Call {
            op: aten("div", "Tensor"),
            args: vec![input, d],
            kwargs: Vec::new(),
        })
    }

    /// `F.multilabel_soft_margin_loss(input, target, weight, size_average, reduce,
    /// reduction)`: `-(target * logsigmoid(input) + (1 - target) * logsigmoid(-input))`,
    /// times the weight, summed over the last dimension and divided by its size, then
    /// reduced.
    fn multilabel_soft_margin_loss(&mut self, mut call: Args) -> Result<NodeKind, String> {
        let input = call.take("input")?;
        let target = call.take("target")?;
        let weight = call.take("weight")?;
        let legacy = legacy_reduction(&mut call)?;
        let reduction = legacy.unwrap_or(call.take("reduction")?);
        let shape = self.static_shape(&input, "multilabel_soft_margin_loss")?;
        let class_dim = shape.len() as i64 - 1;
        let classes = *shape.last().ok_or("a 0-d input")?;
        let ls = self.emit("pos", aten("log_sigmoid", "default"), vec![input.clone()]);
        let pos = self.emit("pos", aten("mul", "Tensor"), vec![target.clone(), ls]);
        let neg_in = self.emit("neg", aten("neg", "default"), vec![input]);
        let ls = self.emit("neg", aten("log_sigmoid", "default"), vec![neg_in]);
        let rest = self.emit("neg", aten("rsub", "Scalar"), vec![target, Value::Int(1)]);
        let neg = self.emit("neg", aten("mul", "Tensor"), vec![rest, ls]);
        let sum = self.emit("loss", aten("add", "Tensor"), vec![pos, neg]);
        let mut loss = self.emit("loss", aten("neg", "default"), vec![sum]);
        if weight != Value::None {
            loss = self.emit("loss", aten("mul", "Tensor"), vec![loss, weight]);
        }
        let loss = self.emit(
            "loss",
            aten("sum", "dim_IntList"),
            vec![loss, int_list([class_dim])],
        );
        let per_sample = NodeKind::Call {
            op: aten("div", "Scalar"),
            args: vec![loss, Value::Int(classes)],
            kwargs: Vec::new(),
        };
        let reduce = match reduction {
            Value::Str(r) if r == "none" => return Ok(per_sample),
            Value::Str(r) if r == "mean" => "mean",
            Value::Str(r) if r == "sum" => "sum",
            other => return Err(format!("unknown reduction {other:?}")),
        };
        let loss = self.emit_kind("loss", per_sample);
        Ok(NodeKind::Call {
            op: aten(reduce, "default"),
            args: vec![loss],
            kwargs: Vec::new(),
        })
    }

    /// `F.interpolate(input, size, scale_factor, mode, align_corners,
    /// recompute_scale_factor, antialias)`, and the deprecated `F.upsample` (the same),
    /// `F.upsample_nearest` (mode `nearest`) and `F.upsample_bilinear` (mode `bilinear`,
    /// align_corners=True): the upsampling op of the mode and the input's rank, with
    /// `output_size` or `scale_factors` as F.interpolate passes them; mode `area` is
    /// `adaptive_avg_pool{1,2,3}d` to the output size.
    fn interpolate(&mut self, name: &str, mut call: Args) -> Result<NodeKind, String> {
        let input = call.take("input")?;
        let (size, scale) = (call.take("size")?, call.take("scale_factor")?);
        let (mode, align, recompute, antialias) = match name {
            "upsample_nearest" => (Value::Str("nearest".into()), Value::None, false, false),
            "upsample_bilinear" => (
                Value::Str("bilinear".into()),
                Value::Bool(true),
                false,
                false,
            ),
            "upsample" => (
                call.take("mode")?,
                call.take("align_corners")?,
                false,
                false,
            ),
            _ => (
                call.take("mode")?,
                call.take("align_corners")?,
                call.take("recompute_scale_factor")? == Value::Bool(true),
                call.take("antialias")? == Value::Bool(true),
            ),
        };
        let mode = match mode {
            Value::Str(m) => m,
            other => return Err(format!("mode {other:?} is not a string")),
        };
        // "area" mode always requires an explicit size (F.interpolate).
        let recompute = recompute || mode == "area";
        let shape = self
            .shape(&input)
            .filter(|s| (3..=5).contains(&s.len()))
            .ok_or("the input needs a static 3-d to 5-d shape annotation")?;
        let dims = shape.len() - 2;
        let repeat = |v: Value, what: &str| -> Result<Vec<Value>, String> {
            match v {
                Value::List(items) | Value::Tuple(items) if items.len() == dims => Ok(items),
                one @ (Value::Int(_) | Value::Float(_)) => Ok(vec![one; dims]),
                other => Err(format!("{what} {other:?} does not fit {dims} spatial dims")),
            }
        };
        let (output_size, scales) = match (size, scale) {
            (Value::None, Value::None) => {
                return Err("either size or scale_factor is needed".into())
            }
            (size, Value::None) => (Value::List(repeat(size, "size")?), Value::None),
            (Value::None, scale) => {
                let factors: Vec<f64> = repeat(scale, "scale_factor")?
                    .into_iter()
                    .map(|v| match v {
                        Value::Float(f) => Ok(f),
                        Value::Int(i) => Ok(i as f64),
                        other => Err(format!("scale factor {other:?} is not a number")),
                    })
                    .collect::<Result<_, _>>()?;
                if recompute {
                    let sizes = shape[2..]
                        .iter()
                        .zip(&factors)
                        .map(|(&n, f)| Value::Int((n as f64 * f).floor() as i64))
                        .collect();
                    (Value::List(sizes), Value::None)
                } else {
                    (
                        Value::None,
                        Value::List(factors.into_iter().map(Value::Float).collect()),
                    )
                }
            }
            _ => return Err("only one of size and scale_factor may be given".into()),
        };
        let suffix = ["1d", "2d", "3d"][dims - 1];
        let align = if align == Value::None {
            Value::Bool(false)
        } else {
            align
        };
        let (op, with_align) = match (mode.as_str(), dims, antialias) {
            ("nearest", _, false) => (format!("upsample_nearest{suffix}"), false),
            ("nearest-exact", _, false) => (format!("_upsample_nearest_exact{suffix}"), false),
            ("linear", 1, false) => ("upsample_linear1d".to_string(), true),
            ("bilinear", 2, false) => ("upsample_bilinear2d".to_string(), true),
            ("bilinear", 2, true) => ("_upsample_bilinear2d_aa".to_string(), true),
            ("bicubic", 2, false) => ("upsample_bicubic2d".to_string(), true),
            ("bicubic", 2, true) => ("_upsample_bicubic2d_aa".to_string(), true),
            ("trilinear", 3, false) => ("upsample_trilinear3d".to_string(), true),
            ("area", _, false) => {
                return self.bind(
                    &format!("adaptive_avg_pool{suffix}"),
                    vec![input, output_size],
                    Vec::new(),
                    false,
                )
            }
            (mode, _, aa) => {
                return Err(format!(
                    "mode `{mode}` on a {}-d input{} is not lowered yet",
                    dims + 2,
                    if aa { " with antialias" } else { "" }
                ))
            }
        };
        let args = if with_align {
            vec![input, output_size, align, scales]
        } else {
            vec![input, output_size, scales]
        };
        self.bind(&op, args, Vec::new(), false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_line_of_the_table_parses() {
        assert!(signatures().count() > 50);
        let e = signature("embedding").unwrap();
        let names: Vec<&str> = e.params.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "input",
                "weight",
                "padding_idx",
                "max_norm",
                "norm_type",
                "scale_grad_by_freq",
                "sparse"
            ]
        );
        assert_eq!(e.params[2].default, Default::Value(Value::None));
        assert_eq!(e.params[4].default, Default::Value(Value::Float(2.0)));
        assert_eq!(e.params[0].default, Default::Required);
        let g = signature("grouped_mm").unwrap();
        assert!(g.params[2].keyword_only && !g.params[1].keyword_only);
        let s = signature("scaled_mm").unwrap();
        assert!(s
            .params
            .iter()
            .any(|p| matches!(&p.default, Default::Opaque(t) if t == "<dtype>")));
        assert_eq!(
            signature("cross_entropy").unwrap().params[6].default,
            Default::Value(Value::Str("mean".into()))
        );
    }

    #[test]
    fn bad_lines_are_errors() {
        assert!(Signature::parse("embedding(input").is_err());
        assert!(Signature::parse("embedding input").is_err());
        assert!(Signature::parse("f(a b)").is_err());
    }
}
