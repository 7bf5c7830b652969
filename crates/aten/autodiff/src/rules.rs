//! Derivative rules, written after PyTorch's `tools/autograd/derivatives.yaml` and
//! `FunctionsManual.cpp`, emitting the aten ops PyTorch's joint graphs contain.
//!
//! Within one node, PyTorch's generated backward evaluates its formulas in the sorted order
//! of their input names (`mat1` before `mat2` before `self`, `other` before `self`); the
//! rules follow that order so node names come out as in AOTAutograd's joint graphs. Each
//! rule returns the gradient of every input that requires grad, in input order; reducing a
//! gradient to its input's shape (`sum_to`) is done by the caller, as the autograd engine's
//! `validate_outputs` does.
//!
//! This module also models strides (which values are contiguous), because two formulas
//! depend on them: `reshape` is a `view` when the strides allow it and a
//! `clone` + `_unsafe_view` otherwise, and `mm`'s backward transposes differently for a
//! column-major operand.

use graphbug_ir::{Dtype, Layout, MemoryFormat, NodeId, OpName, TensorMeta, Value};

use crate::error::AutodiffError;
use crate::joint::{Ctx, Site, Val};

/// Gradients of a node's inputs: (forward input node, its gradient), in input order.
pub(crate) type Grads = Vec<(NodeId, Val)>;

/// A backward formula.
pub(crate) type Backward = fn(&mut Ctx<'_>, &Site<'_>) -> Result<Grads, AutodiffError>;

/// Which outputs of an op carry gradients.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Outputs {
    /// Every output (`grads[i]` formulas, e.g. `split`).
    All,
    /// Only the first (formulas that read `grad`, e.g. `native_layer_norm`).
    First,
}

/// The derivative of one op.
#[derive(Clone, Copy)]
pub(crate) struct Rule {
    /// Which outputs are differentiable.
    pub(crate) outputs: Outputs,
    /// The backward reads the op's own (differentiable) result, which PyTorch saves
    /// detached: a `detach` in the forward and another when the backward unpacks it.
    pub(crate) saves_result: bool,
    /// Outputs of a multi-output op the backward reads (through getitems).
    pub(crate) saved_items: &'static [usize],
    /// The formula.
    pub(crate) backward: Backward,
}

/// What is known about an op's derivative.
pub(crate) enum Lookup {
    /// A rule.
    Rule(Rule),
    /// The op's outputs never require grad (comparisons, factories, `detach`, ...).
    NonDifferentiable,
    /// No rule: fine as long as no gradient has to flow through it.
    Unknown,
}

fn rule(backward: Backward) -> Lookup {
    Lookup::Rule(Rule {
        outputs: Outputs::All,
        saves_result: false,
        saved_items: &[],
        backward,
    })
}

fn with_result(backward: Backward) -> Lookup {
    Lookup::Rule(Rule {
        outputs: Outputs::All,
        saves_result: true,
        saved_items: &[],
        backward,
    })
}

fn first_output(saved_items: &'static [usize], backward: Backward) -> Lookup {
    Lookup::Rule(Rule {
        outputs: Outputs::First,
        saves_result: false,
        saved_items,
        backward,
    })
}

/// Ops whose outputs never require grad.
const NON_DIFFERENTIABLE: [&str; 52] = [
    "eq",
    "ne",
    "lt",
    "le",
    "gt",
    "ge",
    "logical_and",
    "logical_or",
    "logical_not",
    "logical_xor",
    "bitwise_and",
    "bitwise_or",
    "bitwise_not",
    "bitwise_xor",
    "isnan",
    "isinf",
    "isfinite",
    "isposinf",
    "isneginf",
    "argmax",
    "argmin",
    "ones",
    "zeros",
    "full",
    "empty",
    "empty_strided",
    "empty_like",
    "arange",
    "scalar_tensor",
    "ones_like",
    "zeros_like",
    "full_like",
    "rand",
    "randn",
    "randint",
    "randperm",
    "rand_like",
    "randn_like",
    "randint_like",
    "new_zeros",
    "new_ones",
    "new_empty",
    "new_full",
    "new_empty_strided",
    "detach",
    "_assert_async",
    "_assert_scalar",
    "sym_size",
    "sym_numel",
    "sym_stride",
    "lift_fresh",
    "_local_scalar_dense",
];

/// The derivative rule of `op`.
pub(crate) fn lookup(op: &OpName) -> Lookup {
    // An effect token orders side effects; no gradient flows through it (AOTAutograd gives
    // tokens none).
    if op.is_effectful() {
        return Lookup::NonDifferentiable;
    }
    if op.namespace != "aten" {
        return Lookup::Unknown;
    }
    let name = op.name.as_str();
    if NON_DIFFERENTIABLE.contains(&name) {
        return Lookup::NonDifferentiable;
    }
    match (name, op.overload.as_str()) {
        ("add", "Tensor") => rule(add_tensor),
        ("sub", "Tensor") => rule(sub_tensor),
        ("rsub", "Tensor") => rule(rsub_tensor),
        ("add", "Scalar") | ("sub", "Scalar") => rule(identity),
        ("rsub", "Scalar") => rule(rsub_scalar),
        ("mul", "Tensor") => rule(mul_tensor),
        ("mul", "Scalar") => rule(mul_scalar),
        ("div", "Tensor") => rule(div_tensor),
        ("div", "Scalar") => rule(div_scalar),
        ("neg", "default") => rule(neg),
        ("exp", "default") => with_result(exp),
        ("log", "default") => rule(log),
        ("sqrt", "default") => with_result(sqrt),
        ("rsqrt", "default") => with_result(rsqrt),
        ("pow", "Tensor_Scalar") => rule(pow_tensor_scalar),
        ("tanh", "default") => with_result(tanh),
        ("sigmoid", "default") => with_result(sigmoid),
        ("silu", "default") => rule(silu),
        ("gelu", "default") => rule(gelu),
        ("relu", "default") => with_result(relu),
        ("abs", "default") => rule(abs),
        ("sin", "default") => rule(sin),
        ("cos", "default") => rule(cos),
        ("sign" | "sgn" | "floor" | "ceil" | "round" | "trunc", "default") => rule(zero),
        ("_softmax", "default") => with_result(softmax),
        ("_log_softmax", "default") => with_result(log_softmax),
        ("native_dropout", "default") => first_output(&[1], native_dropout),
        ("masked_fill", "Scalar") => rule(masked_fill_scalar),
        ("masked_fill", "Tensor") => rule(masked_fill_tensor),
        ("where", "self") => rule(where_self),
        ("clone" | "alias" | "lift_fresh_copy", "default") => rule(identity),
        ("copy", "default") => rule(copy_rule),
        ("_to_copy", "default") => rule(to_copy),
        ("t", "default") => rule(t_rule),
        ("transpose", "int") => rule(transpose_rule),
        ("permute", "default") => rule(permute_rule),
        ("view" | "_unsafe_view" | "reshape", "default") => rule(view_rule),
        ("expand", "default") => rule(expand_rule),
        ("unsqueeze", "default") => rule(unsqueeze_rule),
        ("squeeze", "dim" | "dims" | "default") => rule(squeeze_rule),
        ("slice", "Tensor") => rule(slice_rule),
        ("select", "int") => rule(select_rule),
        (
            "select_scatter" | "slice_scatter" | "diagonal_scatter" | "as_strided_scatter",
            "default",
        ) => rule(scatter_rule),
        ("split", "Tensor") | ("split_with_sizes", "default") => rule(split_rule),
        ("unbind", "int") => rule(unbind_rule),
        ("cat", "default") => rule(cat_rule),
        ("sum", "default") => rule(sum_default),
        ("sum", "dim_IntList") => rule(sum_dim),
        ("mean", "default") => rule(mean_default),
        ("mean", "dim") => rule(mean_dim),
        ("tril" | "triu", "default") => rule(tril_triu),
        ("mm", "default") => rule(mm_rule),
        ("addmm", "default") => rule(addmm_rule),
        ("bmm", "default") => rule(bmm_rule),
        ("embedding", "default") => rule(embedding_rule),
        ("native_layer_norm", "default") => first_output(&[1, 2], layer_norm_rule),
        ("convolution", "default") => rule(convolution_rule),
        ("max_pool2d_with_indices", "default") => first_output(&[1], max_pool2d_rule),
        ("native_batch_norm", "default") | ("_native_batch_norm_legit", "default") => {
            first_output(&[1, 2], batch_norm_rule)
        }
        ("_native_batch_norm_legit_functional", "default") => {
            first_output(&[1, 2, 3, 4], batch_norm_rule)
        }
        ("_native_batch_norm_legit", "no_stats") => first_output(&[1, 2], batch_norm_rule),
        ("_native_batch_norm_legit_no_training", "default") => {
            first_output(&[1, 2], batch_norm_rule)
        }
        _ => Lookup::Unknown,
    }
}

// ------------------------------------------------------------------ argument helpers

fn as_int(v: &Value) -> Option<i64> {
    match v {
        Value::Int(i) => Some(*i),
        Value::Bool(b) => Some(i64::from(*b)),
        _ => None,
    }
}

fn as_f64(v: &Value) -> Option<f64> {
    match v {
        Value::Int(i) => Some(*i as f64),
        Value::Float(f) => Some(*f),
        Value::Bool(b) => Some(f64::from(u8::from(*b))),
        _ => None,
    }
}

fn as_ints(v: &Value) -> Option<Vec<i64>> {
    match v {
        Value::List(items) | Value::Tuple(items) => items.iter().map(as_int).collect(),
        Value::Int(i) => Some(vec![*i]),
        _ => None,
    }
}

/// Number of elements, saturating instead of overflowing on absurd shapes.
fn numel(shape: &[i64]) -> i64 {
    shape.iter().fold(1i64, |n, &d| n.saturating_mul(d))
}

/// Most outputs a split or unbind may have (more means a corrupt shape).
const MAX_PIECES: i64 = 1 << 20;

fn ints(v: &[i64]) -> Value {
    Value::List(v.iter().map(|&i| Value::Int(i)).collect())
}

/// `dim` wrapped into `0..ndim` (PyTorch's `maybe_wrap_dim`; a 0-d tensor takes 0 and -1).
fn wrap_dim(dim: i64, ndim: usize) -> Option<usize> {
    let n = ndim.max(1) as i64;
    let d = if dim < 0 { dim + n } else { dim };
    (0..n).contains(&d).then_some(d as usize)
}

impl Site<'_> {
    /// Argument `pos`, or keyword `name`.
    pub(crate) fn arg(&self, pos: usize, name: &str) -> Option<&Value> {
        self.args
            .get(pos)
            .or_else(|| self.kwargs.iter().find(|(k, _)| k == name).map(|(_, v)| v))
    }

    /// The node a tensor argument reads (`None` for a constant or an absent argument).
    pub(crate) fn input(&self, pos: usize, name: &str) -> Option<NodeId> {
        self.arg(pos, name).and_then(Value::as_node)
    }

    /// The node a tensor argument reads, or an error when it is not a tensor.
    fn tensor_input(&self, pos: usize, name: &str) -> Result<NodeId, AutodiffError> {
        self.input(pos, name)
            .ok_or_else(|| self.error(format!("`{name}` is not a tensor")))
    }

    /// An error naming this node and its op.
    pub(crate) fn error(&self, message: impl Into<String>) -> AutodiffError {
        AutodiffError::Unsupported {
            node: self.name.to_string(),
            op: self.op.to_string(),
            message: message.into(),
        }
    }

    /// The gradient of the (first) output.
    pub(crate) fn grad(&self) -> Result<Val, AutodiffError> {
        self.grads
            .first()
            .cloned()
            .flatten()
            .ok_or_else(|| self.error("no gradient reaches its first output"))
    }

    fn required(&self, pos: usize, name: &str) -> Result<&Value, AutodiffError> {
        self.arg(pos, name)
            .ok_or_else(|| self.error(format!("argument `{name}` is missing")))
    }

    fn int(&self, pos: usize, name: &str, default: Option<i64>) -> Result<i64, AutodiffError> {
        match self.arg(pos, name) {
            None | Some(Value::None) => {
                default.ok_or_else(|| self.error(format!("argument `{name}` is missing")))
            }
            Some(v) => as_int(v)
                .ok_or_else(|| self.error(format!("argument `{name}` is not an int: {v:?}"))),
        }
    }

    fn ints(&self, pos: usize, name: &str) -> Result<Vec<i64>, AutodiffError> {
        let v = self.required(pos, name)?;
        as_ints(v).ok_or_else(|| self.error(format!("argument `{name}` is not an int list")))
    }

    fn float(&self, pos: usize, name: &str, default: f64) -> Result<f64, AutodiffError> {
        match self.arg(pos, name) {
            None | Some(Value::None) => Ok(default),
            Some(v) => {
                as_f64(v).ok_or_else(|| self.error(format!("argument `{name}` is not a number")))
            }
        }
    }

    fn flag(&self, pos: usize, name: &str, default: bool) -> Result<bool, AutodiffError> {
        match self.arg(pos, name) {
            None | Some(Value::None) => Ok(default),
            Some(Value::Bool(b)) => Ok(*b),
            Some(v) => Err(self.error(format!("argument `{name}` is not a bool: {v:?}"))),
        }
    }

    fn wrap(&self, dim: i64, ndim: usize) -> Result<usize, AutodiffError> {
        wrap_dim(dim, ndim).ok_or_else(|| {
            self.error(format!(
                "dimension {dim} is out of range for a {ndim}-d tensor"
            ))
        })
    }
}

/// `input` when it requires grad.
fn wanted(ctx: &Ctx<'_>, input: Option<NodeId>) -> Option<NodeId> {
    input.filter(|&i| ctx.requires_grad(i))
}

// ------------------------------------------------------------------ emitters

fn emit(ctx: &mut Ctx<'_>, name: &str, overload: &str, args: Vec<Value>, meta: TensorMeta) -> Val {
    ctx.call(OpName::aten(name, overload), args, Vec::new(), meta)
}

fn emit_kw(
    ctx: &mut Ctx<'_>,
    name: &str,
    overload: &str,
    args: Vec<Value>,
    kwargs: Vec<(String, Value)>,
    meta: TensorMeta,
) -> Val {
    ctx.call(OpName::aten(name, overload), args, kwargs, meta)
}

fn like(v: &Val, shape: impl AsRef<[i64]>) -> TensorMeta {
    TensorMeta::new(v.meta.dtype, shape)
}

fn broadcast(a: &[i64], b: &[i64]) -> Vec<i64> {
    let n = a.len().max(b.len());
    (0..n)
        .map(|i| {
            let x = if i + a.len() >= n {
                a[i + a.len() - n]
            } else {
                1
            };
            let y = if i + b.len() >= n {
                b[i + b.len() - n]
            } else {
                1
            };
            if x == 1 {
                y
            } else {
                x
            }
        })
        .collect()
}

fn t(ctx: &mut Ctx<'_>, x: &Val) -> Val {
    let mut shape = x.meta.shape.clone();
    shape.reverse();
    emit(ctx, "t", "default", vec![x.value()], like(x, shape))
}

fn transpose(ctx: &mut Ctx<'_>, x: &Val, d0: i64, d1: i64) -> Val {
    let mut shape = x.meta.shape.clone();
    if let (Some(a), Some(b)) = (wrap_dim(d0, shape.len()), wrap_dim(d1, shape.len())) {
        if a < shape.len() && b < shape.len() {
            shape.swap(a, b);
        }
    }
    let args = vec![x.value(), Value::Int(d0), Value::Int(d1)];
    emit(ctx, "transpose", "int", args, like(x, shape))
}

fn mm(ctx: &mut Ctx<'_>, a: &Val, b: &Val) -> Val {
    let shape = vec![
        a.meta.shape.first().copied().unwrap_or(1),
        b.meta.shape.get(1).copied().unwrap_or(1),
    ];
    emit(
        ctx,
        "mm",
        "default",
        vec![a.value(), b.value()],
        like(a, shape),
    )
}

fn bmm(ctx: &mut Ctx<'_>, a: &Val, b: &Val) -> Val {
    let s = |v: &Val, i: usize| v.meta.shape.get(i).copied().unwrap_or(1);
    let shape = vec![s(a, 0), s(a, 1), s(b, 2)];
    emit(
        ctx,
        "bmm",
        "default",
        vec![a.value(), b.value()],
        like(a, shape),
    )
}

fn view(ctx: &mut Ctx<'_>, x: &Val, shape: &[i64]) -> Val {
    emit(
        ctx,
        "view",
        "default",
        vec![x.value(), ints(shape)],
        like(x, shape),
    )
}

/// `x.clone(memory_format=torch.contiguous_format)`.
fn contiguous_clone(ctx: &mut Ctx<'_>, x: &Val) -> Val {
    let kwargs = vec![(
        "memory_format".to_string(),
        Value::MemoryFormat(MemoryFormat::ContiguousFormat),
    )];
    emit_kw(
        ctx,
        "clone",
        "default",
        vec![x.value()],
        kwargs,
        x.meta.clone(),
    )
}

/// `x.reshape(shape)`: a `view` when the strides allow one, else a contiguous `clone`
/// and `_unsafe_view`, as ATen's composite `reshape` decomposes under tracing.
fn reshape(ctx: &mut Ctx<'_>, x: &Val, shape: &[i64]) -> Val {
    let viewable = ctx
        .strides(x.id)
        .is_some_and(|s| view_strides(&x.meta.shape, s, shape).is_some());
    if viewable {
        return view(ctx, x, shape);
    }
    let c = contiguous_clone(ctx, x);
    emit(
        ctx,
        "_unsafe_view",
        "default",
        vec![c.value(), ints(shape)],
        like(x, shape),
    )
}

fn expand(ctx: &mut Ctx<'_>, x: &Val, shape: &[i64]) -> Val {
    emit(
        ctx,
        "expand",
        "default",
        vec![x.value(), ints(shape)],
        like(x, shape),
    )
}

fn unsqueeze(ctx: &mut Ctx<'_>, x: &Val, dim: i64) -> Val {
    let mut shape = x.meta.shape.clone();
    let n = shape.len() as i64 + 1;
    let d = if dim < 0 { dim + n } else { dim };
    if (0..n).contains(&d) {
        shape.insert(d as usize, 1);
    }
    emit(
        ctx,
        "unsqueeze",
        "default",
        vec![x.value(), Value::Int(dim)],
        like(x, shape),
    )
}

fn sum_dims(ctx: &mut Ctx<'_>, x: &Val, dims: &[usize], keepdim: bool) -> Val {
    let shape: Vec<i64> = x
        .meta
        .shape
        .iter()
        .enumerate()
        .filter_map(|(i, &s)| {
            if !dims.contains(&i) {
                Some(s)
            } else if keepdim {
                Some(1)
            } else {
                None
            }
        })
        .collect();
    let dims: Vec<i64> = dims.iter().map(|&d| d as i64).collect();
    let mut args = vec![x.value(), ints(&dims)];
    if keepdim {
        args.push(Value::Bool(true));
    }
    emit(ctx, "sum", "dim_IntList", args, like(x, shape))
}

/// `at::sum_to(g, shape)`: sums the broadcast dimensions away (`sum.dim_IntList` with
/// keepdim) and views the leading ones away. `None` when `g` cannot broadcast from `shape`.
pub(crate) fn sum_to(ctx: &mut Ctx<'_>, g: &Val, shape: &[i64]) -> Option<Val> {
    if g.meta.shape[..] == shape[..] {
        return Some(g.clone());
    }
    let sizes = g.meta.shape.clone();
    if shape.len() > sizes.len() {
        return None;
    }
    let leading = sizes.len() - shape.len();
    for (i, &s) in shape.iter().enumerate() {
        if s != 1 && s != sizes[leading + i] {
            return None;
        }
    }
    if shape.is_empty() {
        return Some(emit(
            ctx,
            "sum",
            "default",
            vec![g.value()],
            like(g, Vec::new()),
        ));
    }
    let mut reduce: Vec<usize> = (0..leading).collect();
    reduce.extend((leading..sizes.len()).filter(|&i| shape[i - leading] == 1 && sizes[i] != 1));
    let mut out = g.clone();
    if !reduce.is_empty() {
        out = sum_dims(ctx, &out, &reduce, true);
    }
    if leading > 0 {
        out = view(ctx, &out, shape);
    }
    Some(out)
}

/// `maybe_multiply(t, s)`: `t` when `s` is absent or one, else `t * s` (`mul.Scalar`).
fn maybe_multiply(ctx: &mut Ctx<'_>, t: &Val, s: Option<&Value>) -> Val {
    match s {
        Some(v) if as_f64(v).is_some_and(|f| f != 1.0) => emit(
            ctx,
            "mul",
            "Scalar",
            vec![t.value(), v.clone()],
            t.meta.clone(),
        ),
        _ => t.clone(),
    }
}

fn unary(ctx: &mut Ctx<'_>, name: &str, x: &Val) -> Val {
    emit(ctx, name, "default", vec![x.value()], x.meta.clone())
}

fn mul(ctx: &mut Ctx<'_>, a: &Val, b: Value, shape: impl AsRef<[i64]>) -> Val {
    emit(ctx, "mul", "Tensor", vec![a.value(), b], like(a, shape))
}

fn shape_of(ctx: &Ctx<'_>, v: &Value) -> Vec<i64> {
    v.as_node()
        .and_then(|id| ctx.meta(id))
        .map_or_else(Vec::new, |m| m.shape.to_vec())
}

// ------------------------------------------------------------------ pointwise rules

fn identity(ctx: &mut Ctx<'_>, s: &Site<'_>) -> Result<Grads, AutodiffError> {
    let g = s.grad()?;
    Ok(wanted(ctx, s.input(0, "self"))
        .map(|x| (x, g))
        .into_iter()
        .collect())
}

fn add_tensor(ctx: &mut Ctx<'_>, s: &Site<'_>) -> Result<Grads, AutodiffError> {
    let g = s.grad()?;
    let other =
        wanted(ctx, s.input(1, "other")).map(|o| (o, maybe_multiply(ctx, &g, s.arg(2, "alpha"))));
    let mut out: Grads = wanted(ctx, s.input(0, "self"))
        .map(|x| (x, g))
        .into_iter()
        .collect();
    out.extend(other);
    Ok(out)
}

fn sub_tensor(ctx: &mut Ctx<'_>, s: &Site<'_>) -> Result<Grads, AutodiffError> {
    let g = s.grad()?;
    let other = match wanted(ctx, s.input(1, "other")) {
        Some(o) => {
            let n = unary(ctx, "neg", &g);
            Some((o, maybe_multiply(ctx, &n, s.arg(2, "alpha"))))
        }
        None => None,
    };
    let mut out: Grads = wanted(ctx, s.input(0, "self"))
        .map(|x| (x, g))
        .into_iter()
        .collect();
    out.extend(other);
    Ok(out)
}

fn rsub_tensor(ctx: &mut Ctx<'_>, s: &Site<'_>) -> Result<Grads, AutodiffError> {
    let g = s.grad()?;
    let other = wanted(ctx, s.input(1, "other")).map(|o| (o, g.clone()));
    let mut out = Grads::new();
    if let Some(x) = wanted(ctx, s.input(0, "self")) {
        let n = unary(ctx, "neg", &g);
        out.push((x, maybe_multiply(ctx, &n, s.arg(2, "alpha"))));
    }
    out.extend(other);
    Ok(out)
}

fn rsub_scalar(ctx: &mut Ctx<'_>, s: &Site<'_>) -> Result<Grads, AutodiffError> {
    let g = s.grad()?;
    let mut out = Grads::new();
    if let Some(x) = wanted(ctx, s.input(0, "self")) {
        let n = unary(ctx, "neg", &g);
        out.push((x, maybe_multiply(ctx, &n, s.arg(2, "alpha"))));
    }
    Ok(out)
}

fn mul_tensor(ctx: &mut Ctx<'_>, s: &Site<'_>) -> Result<Grads, AutodiffError> {
    let g = s.grad()?;
    let this = s.required(0, "self")?.clone();
    let other = s.required(1, "other")?.clone();
    let shape = g.meta.shape.clone();
    let other_grad = wanted(ctx, other.as_node()).map(|o| {
        let v = ctx.fwd_value(&this);
        (o, mul(ctx, &g, v, &shape))
    });
    let mut out = Grads::new();
    if let Some(x) = wanted(ctx, this.as_node()) {
        let v = ctx.fwd_value(&other);
        out.push((x, mul(ctx, &g, v, shape)));
    }
    out.extend(other_grad);
    Ok(out)
}

fn mul_scalar(ctx: &mut Ctx<'_>, s: &Site<'_>) -> Result<Grads, AutodiffError> {
    scalar_backward(ctx, s, "mul")
}

/// `op.Scalar(grad, other)`: the backward of `mul.Scalar` / `div.Scalar`.
fn scalar_backward(ctx: &mut Ctx<'_>, s: &Site<'_>, op: &str) -> Result<Grads, AutodiffError> {
    let other = s.required(1, "other")?.clone();
    self_only(ctx, s, |ctx, g| {
        Ok(emit(
            ctx,
            op,
            "Scalar",
            vec![g.value(), other],
            g.meta.clone(),
        ))
    })
}

fn div_tensor(ctx: &mut Ctx<'_>, s: &Site<'_>) -> Result<Grads, AutodiffError> {
    let g = s.grad()?;
    let this = s.required(0, "self")?.clone();
    let other = s.required(1, "other")?.clone();
    let (this_j, other_j) = (ctx.fwd_value(&this), ctx.fwd_value(&other));
    let other_grad = match wanted(ctx, other.as_node()) {
        Some(o) => {
            // -grad * ((self / other) / other)
            let n = unary(ctx, "neg", &g);
            let q_shape = broadcast(&shape_of(ctx, &this_j), &shape_of(ctx, &other_j));
            let q = emit(
                ctx,
                "div",
                "Tensor",
                vec![this_j.clone(), other_j.clone()],
                like(&g, q_shape.clone()),
            );
            let q2 = emit(
                ctx,
                "div",
                "Tensor",
                vec![q.value(), other_j.clone()],
                like(&g, q_shape),
            );
            let shape = g.meta.shape.clone();
            Some((o, mul(ctx, &n, q2.value(), shape)))
        }
        None => None,
    };
    let mut out = Grads::new();
    if let Some(x) = wanted(ctx, this.as_node()) {
        let m = g.meta.clone();
        out.push((x, emit(ctx, "div", "Tensor", vec![g.value(), other_j], m)));
    }
    out.extend(other_grad);
    Ok(out)
}

fn div_scalar(ctx: &mut Ctx<'_>, s: &Site<'_>) -> Result<Grads, AutodiffError> {
    scalar_backward(ctx, s, "div")
}

/// A rule for `self` only, computing its gradient with `f(ctx, grad)`.
fn self_only(
    ctx: &mut Ctx<'_>,
    s: &Site<'_>,
    f: impl FnOnce(&mut Ctx<'_>, &Val) -> Result<Val, AutodiffError>,
) -> Result<Grads, AutodiffError> {
    let g = s.grad()?;
    match wanted(ctx, s.input(0, "self")) {
        Some(x) => Ok(vec![(x, f(ctx, &g)?)]),
        None => Ok(Vec::new()),
    }
}

fn neg(ctx: &mut Ctx<'_>, s: &Site<'_>) -> Result<Grads, AutodiffError> {
    self_only(ctx, s, |ctx, g| Ok(unary(ctx, "neg", g)))
}

fn exp(ctx: &mut Ctx<'_>, s: &Site<'_>) -> Result<Grads, AutodiffError> {
    self_only(ctx, s, |ctx, g| {
        let r = ctx.saved_result(s)?;
        Ok(mul(ctx, g, r.value(), &g.meta.shape))
    })
}

fn log(ctx: &mut Ctx<'_>, s: &Site<'_>) -> Result<Grads, AutodiffError> {
    input_backward(ctx, s, "div", "Tensor")
}

/// `op(grad, self)`: a backward that reads the forward's input.
fn input_backward(
    ctx: &mut Ctx<'_>,
    s: &Site<'_>,
    op: &str,
    overload: &str,
) -> Result<Grads, AutodiffError> {
    self_only(ctx, s, |ctx, g| {
        let x = ctx.fwd_value(s.required(0, "self")?);
        Ok(emit(ctx, op, overload, vec![g.value(), x], g.meta.clone()))
    })
}

fn sqrt(ctx: &mut Ctx<'_>, s: &Site<'_>) -> Result<Grads, AutodiffError> {
    self_only(ctx, s, |ctx, g| {
        // grad / (2 * result)
        let r = ctx.saved_result(s)?;
        let m = r.meta.clone();
        let two = emit(ctx, "mul", "Scalar", vec![r.value(), Value::Int(2)], m);
        Ok(emit(
            ctx,
            "div",
            "Tensor",
            vec![g.value(), two.value()],
            g.meta.clone(),
        ))
    })
}

fn rsqrt(ctx: &mut Ctx<'_>, s: &Site<'_>) -> Result<Grads, AutodiffError> {
    self_only(ctx, s, |ctx, g| {
        // -0.5 * grad * result.pow(3)
        let r = ctx.saved_result(s)?;
        let a = emit(
            ctx,
            "mul",
            "Scalar",
            vec![g.value(), Value::Float(-0.5)],
            g.meta.clone(),
        );
        let m = r.meta.clone();
        let p = emit(
            ctx,
            "pow",
            "Tensor_Scalar",
            vec![r.value(), Value::Int(3)],
            m,
        );
        Ok(mul(ctx, &a, p.value(), &g.meta.shape))
    })
}

fn pow_tensor_scalar(ctx: &mut Ctx<'_>, s: &Site<'_>) -> Result<Grads, AutodiffError> {
    let exponent = s.float(1, "exponent", f64::NAN)?;
    if exponent.is_nan() {
        return Err(s.error("the exponent is not a number"));
    }
    self_only(ctx, s, |ctx, g| {
        let x = ctx.fwd_val(s.tensor_input(0, "self")?)?;
        if exponent == 0.0 {
            let kwargs = vec![(
                "memory_format".to_string(),
                Value::MemoryFormat(MemoryFormat::ContiguousFormat),
            )];
            return Ok(emit_kw(
                ctx,
                "zeros_like",
                "default",
                vec![x.value()],
                kwargs,
                g.meta.clone(),
            ));
        }
        // grad * (exponent * self.pow(exponent - 1))
        let p = emit(
            ctx,
            "pow",
            "Tensor_Scalar",
            vec![x.value(), Value::Float(exponent - 1.0)],
            x.meta.clone(),
        );
        let m = p.meta.clone();
        let e = emit(
            ctx,
            "mul",
            "Scalar",
            vec![p.value(), Value::Float(exponent)],
            m,
        );
        Ok(mul(ctx, g, e.value(), &g.meta.shape))
    })
}

/// `op(grad, saved_result)` for tanh and sigmoid.
fn result_backward(ctx: &mut Ctx<'_>, s: &Site<'_>, op: &str) -> Result<Grads, AutodiffError> {
    self_only(ctx, s, |ctx, g| {
        let r = ctx.saved_result(s)?;
        Ok(emit(
            ctx,
            op,
            "default",
            vec![g.value(), r.value()],
            g.meta.clone(),
        ))
    })
}

fn tanh(ctx: &mut Ctx<'_>, s: &Site<'_>) -> Result<Grads, AutodiffError> {
    result_backward(ctx, s, "tanh_backward")
}

fn sigmoid(ctx: &mut Ctx<'_>, s: &Site<'_>) -> Result<Grads, AutodiffError> {
    result_backward(ctx, s, "sigmoid_backward")
}

fn silu(ctx: &mut Ctx<'_>, s: &Site<'_>) -> Result<Grads, AutodiffError> {
    input_backward(ctx, s, "silu_backward", "default")
}

fn gelu(ctx: &mut Ctx<'_>, s: &Site<'_>) -> Result<Grads, AutodiffError> {
    self_only(ctx, s, |ctx, g| {
        let x = ctx.fwd_value(s.required(0, "self")?);
        let kwargs = match s.arg(1, "approximate") {
            Some(Value::Str(a)) if a != "none" => {
                vec![("approximate".to_string(), Value::Str(a.clone()))]
            }
            _ => Vec::new(),
        };
        Ok(emit_kw(
            ctx,
            "gelu_backward",
            "default",
            vec![g.value(), x],
            kwargs,
            g.meta.clone(),
        ))
    })
}

fn relu(ctx: &mut Ctx<'_>, s: &Site<'_>) -> Result<Grads, AutodiffError> {
    self_only(ctx, s, |ctx, g| {
        let r = ctx.saved_result(s)?;
        let args = vec![g.value(), r.value(), Value::Int(0)];
        Ok(emit(
            ctx,
            "threshold_backward",
            "default",
            args,
            g.meta.clone(),
        ))
    })
}

fn abs(ctx: &mut Ctx<'_>, s: &Site<'_>) -> Result<Grads, AutodiffError> {
    self_only(ctx, s, |ctx, g| {
        let x = ctx.fwd_val(s.tensor_input(0, "self")?)?;
        let sg = unary(ctx, "sgn", &x);
        Ok(mul(ctx, g, sg.value(), &g.meta.shape))
    })
}

fn sin(ctx: &mut Ctx<'_>, s: &Site<'_>) -> Result<Grads, AutodiffError> {
    self_only(ctx, s, |ctx, g| {
        let x = ctx.fwd_val(s.tensor_input(0, "self")?)?;
        let c = unary(ctx, "cos", &x);
        Ok(mul(ctx, g, c.value(), &g.meta.shape))
    })
}

fn cos(ctx: &mut Ctx<'_>, s: &Site<'_>) -> Result<Grads, AutodiffError> {
    self_only(ctx, s, |ctx, g| {
        let x = ctx.fwd_val(s.tensor_input(0, "self")?)?;
        let sn = unary(ctx, "sin", &x);
        let n = unary(ctx, "neg", &sn);
        Ok(mul(ctx, g, n.value(), &g.meta.shape))
    })
}

fn zero(ctx: &mut Ctx<'_>, s: &Site<'_>) -> Result<Grads, AutodiffError> {
    self_only(ctx, s, |ctx, g| Ok(unary(ctx, "zeros_like", g)))
}

/// `op(grad, saved_result, dim, input_dtype)` for the softmax family.
fn softmax_family(ctx: &mut Ctx<'_>, s: &Site<'_>, op: &str) -> Result<Grads, AutodiffError> {
    let dim = s.int(1, "dim", None)?;
    let x = s.tensor_input(0, "self")?;
    let dtype = ctx.fwd_meta(x)?.dtype;
    self_only(ctx, s, |ctx, g| {
        let r = ctx.saved_result(s)?;
        let args = vec![g.value(), r.value(), Value::Int(dim), Value::Dtype(dtype)];
        Ok(emit(ctx, op, "default", args, g.meta.clone()))
    })
}

fn softmax(ctx: &mut Ctx<'_>, s: &Site<'_>) -> Result<Grads, AutodiffError> {
    softmax_family(ctx, s, "_softmax_backward_data")
}

fn log_softmax(ctx: &mut Ctx<'_>, s: &Site<'_>) -> Result<Grads, AutodiffError> {
    softmax_family(ctx, s, "_log_softmax_backward_data")
}

fn native_dropout(ctx: &mut Ctx<'_>, s: &Site<'_>) -> Result<Grads, AutodiffError> {
    let p = s.float(1, "p", 0.0)?;
    let train = match s.arg(2, "train") {
        Some(Value::Bool(b)) => Some(*b),
        _ => None,
    };
    let scale = match train {
        Some(true) if p == 1.0 => 0.0,
        Some(true) => 1.0 / (1.0 - p),
        _ => 1.0,
    };
    self_only(ctx, s, |ctx, g| {
        let mask = ctx.saved_item(s, 1)?;
        let args = vec![g.value(), mask.value(), Value::Float(scale)];
        Ok(emit(
            ctx,
            "native_dropout_backward",
            "default",
            args,
            g.meta.clone(),
        ))
    })
}

fn masked_fill_scalar(ctx: &mut Ctx<'_>, s: &Site<'_>) -> Result<Grads, AutodiffError> {
    let mask = ctx.fwd_value(s.required(1, "mask")?);
    self_only(ctx, s, |ctx, g| {
        let args = vec![g.value(), mask, Value::Int(0)];
        Ok(emit(ctx, "masked_fill", "Scalar", args, g.meta.clone()))
    })
}

fn masked_fill_tensor(ctx: &mut Ctx<'_>, s: &Site<'_>) -> Result<Grads, AutodiffError> {
    let g = s.grad()?;
    let mask = ctx.fwd_value(s.required(1, "mask")?);
    let mut out = Grads::new();
    if let Some(x) = wanted(ctx, s.input(0, "self")) {
        let args = vec![g.value(), mask.clone(), Value::Int(0)];
        out.push((x, emit(ctx, "masked_fill", "Scalar", args, g.meta.clone())));
    }
    if let Some(v) = wanted(ctx, s.input(2, "value")) {
        // The sum of the gradient where the mask is set.
        let args = vec![mask, g.value(), Value::Int(0)];
        let w = emit(ctx, "where", "ScalarOther", args, g.meta.clone());
        out.push((
            v,
            emit(ctx, "sum", "default", vec![w.value()], like(&g, Vec::new())),
        ));
    }
    Ok(out)
}

fn where_self(ctx: &mut Ctx<'_>, s: &Site<'_>) -> Result<Grads, AutodiffError> {
    let g = s.grad()?;
    let cond = ctx.fwd_value(s.required(0, "condition")?);
    let other = wanted(ctx, s.input(2, "other")).map(|o| {
        let args = vec![cond.clone(), Value::Int(0), g.value()];
        (o, emit(ctx, "where", "ScalarSelf", args, g.meta.clone()))
    });
    let mut out = Grads::new();
    if let Some(x) = wanted(ctx, s.input(1, "self")) {
        let args = vec![cond, g.value(), Value::Int(0)];
        out.push((x, emit(ctx, "where", "ScalarOther", args, g.meta.clone())));
    }
    out.extend(other);
    Ok(out)
}

/// `copy(self, src)`, functionalization's `self.copy_(src)`: `self` is overwritten (a zero
/// gradient), `src` gets the gradient, reduced to its shape and dtype by the caller.
fn copy_rule(ctx: &mut Ctx<'_>, s: &Site<'_>) -> Result<Grads, AutodiffError> {
    let g = s.grad()?;
    let mut out = Grads::new();
    if let Some(x) = wanted(ctx, s.input(0, "self")) {
        out.push((x, unary(ctx, "zeros_like", &g)));
    }
    if let Some(src) = wanted(ctx, s.input(1, "src")) {
        out.push((src, g));
    }
    Ok(out)
}

fn to_copy(ctx: &mut Ctx<'_>, s: &Site<'_>) -> Result<Grads, AutodiffError> {
    let x = s.tensor_input(0, "self")?;
    let dtype = ctx.fwd_meta(x)?.dtype;
    self_only(ctx, s, |ctx, g| {
        if g.meta.dtype == dtype {
            return Ok(g.clone());
        }
        let kwargs = vec![("dtype".to_string(), Value::Dtype(dtype))];
        let meta = TensorMeta::new(dtype, g.meta.shape.clone());
        Ok(emit_kw(
            ctx,
            "_to_copy",
            "default",
            vec![g.value()],
            kwargs,
            meta,
        ))
    })
}

fn tril_triu(ctx: &mut Ctx<'_>, s: &Site<'_>) -> Result<Grads, AutodiffError> {
    let diagonal = s.int(1, "diagonal", Some(0))?;
    let name = s.op.name.clone();
    self_only(ctx, s, |ctx, g| {
        let mut args = vec![g.value()];
        if diagonal != 0 {
            args.push(Value::Int(diagonal));
        }
        Ok(emit(ctx, &name, "default", args, g.meta.clone()))
    })
}

// ------------------------------------------------------------------ view rules

fn t_rule(ctx: &mut Ctx<'_>, s: &Site<'_>) -> Result<Grads, AutodiffError> {
    self_only(ctx, s, |ctx, g| Ok(t(ctx, g)))
}

fn transpose_rule(ctx: &mut Ctx<'_>, s: &Site<'_>) -> Result<Grads, AutodiffError> {
    let d0 = s.int(1, "dim0", None)?;
    let d1 = s.int(2, "dim1", None)?;
    self_only(ctx, s, |ctx, g| Ok(transpose(ctx, g, d0, d1)))
}

fn permute_rule(ctx: &mut Ctx<'_>, s: &Site<'_>) -> Result<Grads, AutodiffError> {
    let dims = s.ints(1, "dims")?;
    let n = dims.len();
    let mut inverse = vec![0i64; n];
    let mut seen = vec![false; n];
    for (i, &d) in dims.iter().enumerate() {
        let w = s.wrap(d, n)?;
        if std::mem::replace(&mut seen[w], true) {
            return Err(s.error(format!("dims {dims:?} are not a permutation")));
        }
        inverse[w] = i as i64;
    }
    self_only(ctx, s, |ctx, g| {
        let shape: Vec<i64> = inverse
            .iter()
            .map(|&i| g.meta.shape.get(i as usize).copied().unwrap_or(1))
            .collect();
        Ok(emit(
            ctx,
            "permute",
            "default",
            vec![g.value(), ints(&inverse)],
            like(g, shape),
        ))
    })
}

fn view_rule(ctx: &mut Ctx<'_>, s: &Site<'_>) -> Result<Grads, AutodiffError> {
    let x = s.tensor_input(0, "self")?;
    let shape = ctx.fwd_meta(x)?.shape;
    self_only(ctx, s, |ctx, g| Ok(reshape(ctx, g, &shape)))
}

fn expand_rule(ctx: &mut Ctx<'_>, s: &Site<'_>) -> Result<Grads, AutodiffError> {
    let x = s.tensor_input(0, "self")?;
    let shape = ctx.fwd_meta(x)?.shape;
    self_only(ctx, s, |ctx, g| {
        sum_to(ctx, g, &shape).ok_or_else(|| {
            s.error(format!(
                "gradient of shape {:?} does not reduce to {shape:?}",
                g.meta.shape
            ))
        })
    })
}

fn unsqueeze_rule(ctx: &mut Ctx<'_>, s: &Site<'_>) -> Result<Grads, AutodiffError> {
    let dim = s.int(1, "dim", None)?;
    self_only(ctx, s, |ctx, g| {
        let mut shape = g.meta.shape.clone();
        if let Some(d) = wrap_dim(dim, shape.len()) {
            if d < shape.len() {
                shape.remove(d);
            }
        }
        Ok(emit(
            ctx,
            "squeeze",
            "dim",
            vec![g.value(), Value::Int(dim)],
            like(g, shape),
        ))
    })
}

fn squeeze_rule(ctx: &mut Ctx<'_>, s: &Site<'_>) -> Result<Grads, AutodiffError> {
    let x = s.tensor_input(0, "self")?;
    let sizes = ctx.fwd_meta(x)?.shape;
    let n = sizes.len();
    let dims: Vec<usize> = match s.op.overload.as_str() {
        "dim" => vec![s.wrap(s.int(1, "dim", None)?, n)?],
        "dims" => s
            .ints(1, "dim")?
            .into_iter()
            .map(|d| s.wrap(d, n))
            .collect::<Result<_, _>>()?,
        _ => (0..n).collect(),
    };
    self_only(ctx, s, |ctx, g| {
        // unsqueeze_to: put back every squeezed dimension of size one, in order.
        let mut out = g.clone();
        for (d, &size) in sizes.iter().enumerate() {
            if dims.contains(&d) && size == 1 {
                out = unsqueeze(ctx, &out, d as i64);
            }
        }
        Ok(out)
    })
}

fn slice_rule(ctx: &mut Ctx<'_>, s: &Site<'_>) -> Result<Grads, AutodiffError> {
    let x = s.tensor_input(0, "self")?;
    let sizes = ctx.fwd_meta(x)?.shape;
    let dim = s.int(1, "dim", Some(0))?;
    let start = s.int(2, "start", Some(0))?;
    let end = s.int(3, "end", Some(i64::MAX))?;
    let step = s.int(4, "step", Some(1))?;
    self_only(ctx, s, |ctx, g| {
        let args = vec![
            g.value(),
            ints(&sizes),
            Value::Int(dim),
            Value::Int(start),
            Value::Int(end),
            Value::Int(step),
        ];
        Ok(emit(ctx, "slice_backward", "default", args, like(g, sizes)))
    })
}

fn select_rule(ctx: &mut Ctx<'_>, s: &Site<'_>) -> Result<Grads, AutodiffError> {
    let x = s.tensor_input(0, "self")?;
    let sizes = ctx.fwd_meta(x)?.shape;
    let dim = s.int(1, "dim", None)?;
    let index = s.int(2, "index", None)?;
    self_only(ctx, s, |ctx, g| {
        let args = vec![g.value(), ints(&sizes), Value::Int(dim), Value::Int(index)];
        Ok(emit(
            ctx,
            "select_backward",
            "default",
            args,
            like(g, sizes),
        ))
    })
}

/// `<view>_scatter(self, src, view args…)`, as functionalization writes a mutation through
/// a view: `src` gets the gradient's window (the view with the same arguments), `self` the
/// gradient with that window zeroed (a scatter of zeros), per derivatives.yaml.
fn scatter_rule(ctx: &mut Ctx<'_>, s: &Site<'_>) -> Result<Grads, AutodiffError> {
    let g = s.grad()?;
    let src = s.tensor_input(1, "src")?;
    let src_meta = ctx.fwd_meta(src)?;
    let (view, overload, params): (&str, &str, &[(&str, Value)]) = match s.op.name.as_str() {
        "select_scatter" => (
            "select",
            "int",
            &[("dim", Value::None), ("index", Value::None)],
        ),
        "slice_scatter" => (
            "slice",
            "Tensor",
            &[
                ("dim", Value::Int(0)),
                ("start", Value::None),
                ("end", Value::None),
                ("step", Value::Int(1)),
            ],
        ),
        "diagonal_scatter" => (
            "diagonal",
            "default",
            &[
                ("offset", Value::Int(0)),
                ("dim1", Value::Int(0)),
                ("dim2", Value::Int(1)),
            ],
        ),
        _ => (
            "as_strided",
            "default",
            &[
                ("size", Value::None),
                ("stride", Value::None),
                ("storage_offset", Value::None),
            ],
        ),
    };
    let mut view_args = Vec::with_capacity(params.len());
    for (k, (name, default)) in params.iter().enumerate() {
        let v = match (s.arg(k + 2, name), default) {
            (Some(v), _) => v.clone(),
            (None, Value::None) if *name != "storage_offset" => {
                return Err(s.error(format!("missing argument `{name}`")))
            }
            (None, d) => d.clone(),
        };
        view_args.push(v);
    }
    // as_strided addresses storage: the gradient must have the base's contiguous layout.
    let mut g = g;
    if view == "as_strided" {
        let base = s.tensor_input(0, "self")?;
        let base_id = ctx.fwd(base);
        if ctx.strides(base_id) != Some(contiguous(&g.meta.shape).as_slice()) {
            return Err(s.error(
                "as_strided_scatter into a base that is not known to be contiguous: its gradient would depend on the base's memory layout",
            ));
        }
        g = contiguous_clone(ctx, &g);
    }
    let mut out = Grads::new();
    if let Some(x) = wanted(ctx, s.input(0, "self")) {
        let zeros = zeros(ctx, TensorMeta::new(g.meta.dtype, src_meta.shape.clone()));
        let mut args = vec![g.value(), zeros.value()];
        args.extend(view_args.iter().cloned());
        let name = s.op.name.clone();
        out.push((x, emit(ctx, &name, "default", args, g.meta.clone())));
    }
    if ctx.requires_grad(src) {
        let mut args = vec![g.value()];
        args.extend(view_args);
        out.push((
            src,
            emit(ctx, view, overload, args, like(&g, src_meta.shape)),
        ));
    }
    Ok(out)
}

/// `at::zeros(shape, options)` as a traced call prints it.
fn zeros(ctx: &mut Ctx<'_>, meta: TensorMeta) -> Val {
    let kwargs = vec![
        ("dtype".to_string(), Value::Dtype(meta.dtype)),
        ("layout".to_string(), Value::Layout(Layout::Strided)),
        ("device".to_string(), Value::Device(ctx.device())),
    ];
    emit_kw(
        ctx,
        "zeros",
        "default",
        vec![ints(&meta.shape)],
        kwargs,
        meta,
    )
}

fn split_rule(ctx: &mut Ctx<'_>, s: &Site<'_>) -> Result<Grads, AutodiffError> {
    let x = s.tensor_input(0, "self")?;
    let xm = ctx.fwd_meta(x)?;
    let dim = s.wrap(s.int(2, "dim", Some(0))?, xm.shape.len())?;
    let dim_size = xm.shape.get(dim).copied().unwrap_or(1);
    let sizes: Vec<i64> = if s.op.name == "split" {
        let split = s.int(1, "split_size", None)?;
        if split <= 0 {
            return Err(s.error(format!("split size {split} is not positive")));
        }
        let n = (dim_size.saturating_add(split - 1) / split).max(1);
        if n > MAX_PIECES {
            return Err(s.error(format!(
                "{dim_size} split in pieces of {split} is too many pieces"
            )));
        }
        let mut v = vec![split; n as usize];
        if let Some(last) = v.last_mut() {
            *last = split - (split * n - dim_size);
        }
        v
    } else {
        s.ints(1, "split_sizes")?
    };
    if sizes.len() as i64 > MAX_PIECES {
        return Err(s.error("too many split sizes"));
    }
    if wanted(ctx, Some(x)).is_none() {
        return Ok(Vec::new());
    }
    // split_with_sizes_backward: zeros for outputs without a gradient, then cat.
    let mut parts = Vec::with_capacity(sizes.len());
    for (i, &len) in sizes.iter().enumerate() {
        match s.grads.get(i).cloned().flatten() {
            Some(g) => parts.push(g),
            None => {
                let mut shape = xm.shape.clone();
                shape[dim] = len;
                parts.push(zeros(ctx, TensorMeta::new(xm.dtype, shape)));
            }
        }
    }
    let list = Value::List(parts.iter().map(Val::value).collect());
    let meta = TensorMeta::new(xm.dtype, xm.shape.clone());
    Ok(vec![(
        x,
        emit(
            ctx,
            "cat",
            "default",
            vec![list, Value::Int(dim as i64)],
            meta,
        ),
    )])
}

fn unbind_rule(ctx: &mut Ctx<'_>, s: &Site<'_>) -> Result<Grads, AutodiffError> {
    let x = s.tensor_input(0, "self")?;
    let xm = ctx.fwd_meta(x)?;
    let dim = s.int(1, "dim", Some(0))?;
    let d = s.wrap(dim, xm.shape.len())?;
    if wanted(ctx, Some(x)).is_none() {
        return Ok(Vec::new());
    }
    let n = xm.shape.get(d).copied().unwrap_or(0).clamp(0, MAX_PIECES) as usize;
    let mut item_shape = xm.shape.clone();
    if d < item_shape.len() {
        item_shape.remove(d);
    }
    let mut parts = Vec::with_capacity(n);
    for i in 0..n {
        match s.grads.get(i).cloned().flatten() {
            Some(g) => parts.push(g),
            None => {
                let z = zeros(ctx, TensorMeta::new(xm.dtype, Vec::new()));
                parts.push(expand(ctx, &z, &item_shape));
            }
        }
    }
    let list = Value::List(parts.iter().map(Val::value).collect());
    let mut args = vec![list];
    if dim != 0 {
        args.push(Value::Int(dim));
    }
    Ok(vec![(x, emit(ctx, "stack", "default", args, xm))])
}

fn cat_rule(ctx: &mut Ctx<'_>, s: &Site<'_>) -> Result<Grads, AutodiffError> {
    let g = s.grad()?;
    let tensors: Vec<NodeId> = match s.required(0, "tensors")? {
        Value::List(items) | Value::Tuple(items) => items
            .iter()
            .map(|v| {
                v.as_node()
                    .ok_or_else(|| s.error("a `tensors` element is not a tensor"))
            })
            .collect::<Result<_, _>>()?,
        _ => return Err(s.error("argument `tensors` is not a list")),
    };
    let metas: Vec<TensorMeta> = tensors
        .iter()
        .map(|&t| ctx.fwd_meta(t))
        .collect::<Result<_, _>>()?;
    let dim = s.int(1, "dim", Some(0))?;
    // legacy_cat_wrap_dim: 1-d empty tensors do not decide the rank.
    let skip = |m: &TensorMeta| m.shape[..] == [0];
    let ndim = metas.iter().find(|m| !skip(m)).map_or(1, |m| m.shape.len());
    let d = s.wrap(dim, ndim)?;
    let mut out = Grads::new();
    let mut offset = 0i64;
    for (&t, m) in tensors.iter().zip(&metas) {
        if skip(m) {
            continue;
        }
        let len = m.shape.get(d).copied().unwrap_or(0);
        let mut shape = g.meta.shape.clone();
        if d < shape.len() {
            shape[d] = len;
        }
        let args = vec![
            g.value(),
            Value::Int(d as i64),
            Value::Int(offset),
            Value::Int(offset + len),
        ];
        let sl = emit(ctx, "slice", "Tensor", args, like(&g, shape));
        offset += len;
        if ctx.requires_grad(t) {
            out.push((t, sl));
        }
    }
    Ok(out)
}

// ------------------------------------------------------------------ reductions

/// `sum_backward`: unsqueeze the reduced dimensions back (when not kept), then expand.
fn sum_backward(
    ctx: &mut Ctx<'_>,
    s: &Site<'_>,
    g: &Val,
    sizes: &[i64],
    dims: Option<&[i64]>,
    keepdim: bool,
) -> Result<Val, AutodiffError> {
    let mut res = g.clone();
    if !keepdim && !sizes.is_empty() {
        match dims {
            Some([d]) => res = unsqueeze(ctx, &res, *d),
            Some(ds) if !ds.is_empty() => {
                let wrapped: Vec<usize> = ds
                    .iter()
                    .map(|&d| s.wrap(d, sizes.len()))
                    .collect::<Result<_, _>>()?;
                for i in 0..sizes.len() {
                    if wrapped.contains(&i) {
                        res = unsqueeze(ctx, &res, i as i64);
                    }
                }
            }
            _ => {}
        }
    }
    Ok(expand(ctx, &res, sizes))
}

/// The `dim` list of a reduction (`None` or `[]` reduces everything).
fn reduce_dims(s: &Site<'_>) -> Result<Option<Vec<i64>>, AutodiffError> {
    match s.arg(1, "dim") {
        None | Some(Value::None) => Ok(None),
        Some(v) => as_ints(v)
            .map(Some)
            .ok_or_else(|| s.error("argument `dim` is not an int list")),
    }
}

fn sum_default(ctx: &mut Ctx<'_>, s: &Site<'_>) -> Result<Grads, AutodiffError> {
    let x = s.tensor_input(0, "self")?;
    let sizes = ctx.fwd_meta(x)?.shape;
    self_only(ctx, s, |ctx, g| Ok(expand(ctx, g, &sizes)))
}

fn sum_dim(ctx: &mut Ctx<'_>, s: &Site<'_>) -> Result<Grads, AutodiffError> {
    let x = s.tensor_input(0, "self")?;
    let sizes = ctx.fwd_meta(x)?.shape;
    let dims = reduce_dims(s)?;
    let keepdim = s.flag(2, "keepdim", false)?;
    self_only(ctx, s, |ctx, g| {
        sum_backward(ctx, s, g, &sizes, dims.as_deref(), keepdim)
    })
}

fn mean_default(ctx: &mut Ctx<'_>, s: &Site<'_>) -> Result<Grads, AutodiffError> {
    let x = s.tensor_input(0, "self")?;
    let xm = ctx.fwd_meta(x)?;
    self_only(ctx, s, |ctx, g| {
        let e = expand(ctx, g, &xm.shape);
        let m = e.meta.clone();
        Ok(emit(
            ctx,
            "div",
            "Scalar",
            vec![e.value(), Value::Int(numel(&xm.shape))],
            m,
        ))
    })
}

fn mean_dim(ctx: &mut Ctx<'_>, s: &Site<'_>) -> Result<Grads, AutodiffError> {
    let x = s.tensor_input(0, "self")?;
    let xm = ctx.fwd_meta(x)?;
    let dims = reduce_dims(s)?;
    let keepdim = s.flag(2, "keepdim", false)?;
    let n = match dims.as_deref() {
        None | Some([]) => numel(&xm.shape),
        Some(ds) => {
            let mut n = 1;
            for &d in ds {
                let size = xm.shape.get(s.wrap(d, xm.shape.len())?).copied();
                n = size.unwrap_or(1).saturating_mul(n);
            }
            n
        }
    };
    self_only(ctx, s, |ctx, g| {
        let e = sum_backward(ctx, s, g, &xm.shape, dims.as_deref(), keepdim)?;
        let m = e.meta.clone();
        Ok(emit(
            ctx,
            "div",
            "Scalar",
            vec![e.value(), Value::Int(n)],
            m,
        ))
    })
}

// ------------------------------------------------------------------ matmuls

/// True for a 2-d operand stored column-major (e.g. `t(weight)`).
fn column_major(ctx: &Ctx<'_>, v: &Val) -> bool {
    match (ctx.strides(v.id), v.meta.shape.as_slice()) {
        (Some([s0, s1]), [n0, _]) => *s0 == 1 && s1 == n0,
        _ => false,
    }
}

/// `mm_mat1_backward(grad, mat2, mat1, alpha)`.
fn mm_mat1_backward(
    ctx: &mut Ctx<'_>,
    g: &Val,
    mat2: &Val,
    mat1: &Val,
    alpha: Option<&Value>,
) -> Val {
    let r = if column_major(ctx, mat1) {
        // mat2.mm(grad.t()).t()
        let gt = t(ctx, g);
        let p = mm(ctx, mat2, &gt);
        t(ctx, &p)
    } else {
        let m2t = t(ctx, mat2);
        mm(ctx, g, &m2t)
    };
    maybe_multiply(ctx, &r, alpha)
}

/// `mm_mat2_backward(grad, mat1, mat2, alpha)`.
fn mm_mat2_backward(
    ctx: &mut Ctx<'_>,
    g: &Val,
    mat1: &Val,
    mat2: &Val,
    alpha: Option<&Value>,
) -> Val {
    let r = if column_major(ctx, mat2) {
        // grad.t().mm(mat1).t()
        let gt = t(ctx, g);
        let p = mm(ctx, &gt, mat1);
        t(ctx, &p)
    } else {
        let m1t = t(ctx, mat1);
        mm(ctx, &m1t, g)
    };
    maybe_multiply(ctx, &r, alpha)
}

fn tensor_arg(
    ctx: &Ctx<'_>,
    s: &Site<'_>,
    pos: usize,
    name: &str,
) -> Result<(NodeId, Val), AutodiffError> {
    let id = s.tensor_input(pos, name)?;
    Ok((id, ctx.fwd_val(id)?))
}

fn mm_rule(ctx: &mut Ctx<'_>, s: &Site<'_>) -> Result<Grads, AutodiffError> {
    let g = s.grad()?;
    let (a, av) = tensor_arg(ctx, s, 0, "self")?;
    let (b, bv) = tensor_arg(ctx, s, 1, "mat2")?;
    let gb = ctx
        .requires_grad(b)
        .then(|| mm_mat2_backward(ctx, &g, &av, &bv, None));
    let mut out = Grads::new();
    if ctx.requires_grad(a) {
        out.push((a, mm_mat1_backward(ctx, &g, &bv, &av, None)));
    }
    out.extend(gb.map(|v| (b, v)));
    Ok(out)
}

fn addmm_rule(ctx: &mut Ctx<'_>, s: &Site<'_>) -> Result<Grads, AutodiffError> {
    let g = s.grad()?;
    let bias = s.input(0, "self");
    let (a, av) = tensor_arg(ctx, s, 1, "mat1")?;
    let (b, bv) = tensor_arg(ctx, s, 2, "mat2")?;
    let beta = s.arg(3, "beta");
    let alpha = s.arg(4, "alpha");
    let ga = ctx
        .requires_grad(a)
        .then(|| mm_mat1_backward(ctx, &g, &bv, &av, alpha));
    let gb = ctx
        .requires_grad(b)
        .then(|| mm_mat2_backward(ctx, &g, &av, &bv, alpha));
    let mut out = Grads::new();
    if let Some(c) = wanted(ctx, bias) {
        out.push((c, maybe_multiply(ctx, &g, beta)));
    }
    out.extend(ga.map(|v| (a, v)));
    out.extend(gb.map(|v| (b, v)));
    Ok(out)
}

fn bmm_rule(ctx: &mut Ctx<'_>, s: &Site<'_>) -> Result<Grads, AutodiffError> {
    let g = s.grad()?;
    let (a, av) = tensor_arg(ctx, s, 0, "self")?;
    let (b, bv) = tensor_arg(ctx, s, 1, "mat2")?;
    let gb = if ctx.requires_grad(b) {
        let at = transpose(ctx, &av, 1, 2);
        Some((b, bmm(ctx, &at, &g)))
    } else {
        None
    };
    let mut out = Grads::new();
    if ctx.requires_grad(a) {
        let bt = transpose(ctx, &bv, 1, 2);
        out.push((a, bmm(ctx, &g, &bt)));
    }
    out.extend(gb);
    Ok(out)
}

// ------------------------------------------------------------------ nn ops

fn embedding_rule(ctx: &mut Ctx<'_>, s: &Site<'_>) -> Result<Grads, AutodiffError> {
    let g = s.grad()?;
    let (w, wv) = tensor_arg(ctx, s, 0, "weight")?;
    let indices = ctx.fwd_value(s.required(1, "indices")?);
    let padding_idx = s.int(2, "padding_idx", Some(-1))?;
    let scale = s.flag(3, "scale_grad_by_freq", false)?;
    if s.flag(4, "sparse", false)? {
        return Err(s.error("sparse embedding gradients are not supported"));
    }
    if !ctx.requires_grad(w) {
        return Ok(Vec::new());
    }
    let num_weights = wv.meta.shape.first().copied().unwrap_or(0);
    let args = vec![
        g.value(),
        indices,
        Value::Int(num_weights),
        Value::Int(padding_idx),
        Value::Bool(scale),
    ];
    let meta = TensorMeta::new(g.meta.dtype, wv.meta.shape.clone());
    Ok(vec![(
        w,
        emit(ctx, "embedding_dense_backward", "default", args, meta),
    )])
}

/// A multi-output backward op with an output mask; returns the getitems of the wanted
/// inputs, in order.
fn masked_backward(
    ctx: &mut Ctx<'_>,
    name: &str,
    args: Vec<Value>,
    inputs: [Option<NodeId>; 3],
    metas: [Option<TensorMeta>; 3],
) -> Grads {
    let items = ctx.call_multi(OpName::aten(name, "default"), args, metas.to_vec());
    inputs
        .into_iter()
        .zip(items)
        .filter_map(|(i, v)| Some((i?, v?)))
        .collect()
}

fn layer_norm_rule(ctx: &mut Ctx<'_>, s: &Site<'_>) -> Result<Grads, AutodiffError> {
    let g = s.grad()?;
    let (x, xv) = tensor_arg(ctx, s, 0, "input")?;
    let normalized_shape = ctx.fwd_value(s.required(1, "normalized_shape")?);
    let weight = s.input(2, "weight");
    let bias = s.input(3, "bias");
    let mask = [
        ctx.requires_grad(x),
        weight.is_some_and(|w| ctx.requires_grad(w)),
        bias.is_some_and(|b| ctx.requires_grad(b)),
    ];
    let mean = ctx.saved_item(s, 1)?;
    let rstd = ctx.saved_item(s, 2)?;
    let meta_of = |ctx: &Ctx<'_>,
                   id: Option<NodeId>,
                   on: bool|
     -> Result<Option<TensorMeta>, AutodiffError> {
        match (id, on) {
            (Some(i), true) => Ok(Some(ctx.fwd_meta(i)?)),
            _ => Ok(None),
        }
    };
    let metas = [
        mask[0].then(|| xv.meta.clone()),
        meta_of(ctx, weight, mask[1])?,
        meta_of(ctx, bias, mask[2])?,
    ];
    let opt =
        |ctx: &Ctx<'_>, id: Option<NodeId>| id.map_or(Value::None, |i| Value::Node(ctx.fwd(i)));
    let args = vec![
        g.value(),
        xv.value(),
        normalized_shape,
        mean.value(),
        rstd.value(),
        opt(ctx, weight),
        opt(ctx, bias),
        Value::List(mask.iter().map(|&b| Value::Bool(b)).collect()),
    ];
    let inputs = [Some(x), weight, bias];
    let inputs = [0, 1, 2].map(|i| inputs[i].filter(|_| mask[i]));
    Ok(masked_backward(
        ctx,
        "native_layer_norm_backward",
        args,
        inputs,
        metas,
    ))
}

fn convolution_rule(ctx: &mut Ctx<'_>, s: &Site<'_>) -> Result<Grads, AutodiffError> {
    let g = s.grad()?;
    let (x, xv) = tensor_arg(ctx, s, 0, "input")?;
    let (w, wv) = tensor_arg(ctx, s, 1, "weight")?;
    let bias = s.input(2, "bias");
    let bias_meta = bias.map(|b| ctx.fwd_meta(b)).transpose()?;
    let mask = [
        ctx.requires_grad(x),
        ctx.requires_grad(w),
        bias.is_some_and(|b| ctx.requires_grad(b)),
    ];
    let names = [
        "stride",
        "padding",
        "dilation",
        "transposed",
        "output_padding",
        "groups",
    ];
    let mut args = vec![
        g.value(),
        xv.value(),
        wv.value(),
        bias_meta.as_ref().map_or(Value::None, |m| ints(&m.shape)),
    ];
    for (i, name) in names.iter().enumerate() {
        args.push(ctx.fwd_value(s.required(3 + i, name)?));
    }
    args.push(Value::List(mask.iter().map(|&b| Value::Bool(b)).collect()));
    let metas = [
        mask[0].then(|| xv.meta.clone()),
        mask[1].then(|| wv.meta.clone()),
        bias_meta.filter(|_| mask[2]),
    ];
    let inputs = [Some(x), Some(w), bias];
    let inputs = [0, 1, 2].map(|i| inputs[i].filter(|_| mask[i]));
    Ok(masked_backward(
        ctx,
        "convolution_backward",
        args,
        inputs,
        metas,
    ))
}

fn max_pool2d_rule(ctx: &mut Ctx<'_>, s: &Site<'_>) -> Result<Grads, AutodiffError> {
    let (_, xv) = tensor_arg(ctx, s, 0, "self")?;
    let pair = |v: Option<&Value>, default: i64| -> Result<Value, AutodiffError> {
        match v {
            None | Some(Value::None) => Ok(ints(&[default, default])),
            Some(Value::Int(i)) => Ok(ints(&[*i, *i])),
            Some(v) => as_ints(v)
                .map(|l| ints(&l))
                .ok_or_else(|| s.error("a pooling size is not an int list")),
        }
    };
    let kernel = ints(&s.ints(1, "kernel_size")?);
    let stride = match s.arg(2, "stride") {
        None | Some(Value::None) => Value::List(Vec::new()),
        Some(v) => ints(&as_ints(v).ok_or_else(|| s.error("`stride` is not an int list"))?),
    };
    let padding = pair(s.arg(3, "padding"), 0)?;
    let dilation = pair(s.arg(4, "dilation"), 1)?;
    let ceil_mode = s.flag(5, "ceil_mode", false)?;
    self_only(ctx, s, |ctx, g| {
        let indices = ctx.saved_item(s, 1)?;
        let args = vec![
            g.value(),
            xv.value(),
            kernel,
            stride,
            padding,
            dilation,
            Value::Bool(ceil_mode),
            indices.value(),
        ];
        Ok(emit(
            ctx,
            "max_pool2d_with_indices_backward",
            "default",
            args,
            xv.meta.clone(),
        ))
    })
}

fn batch_norm_rule(ctx: &mut Ctx<'_>, s: &Site<'_>) -> Result<Grads, AutodiffError> {
    let g = s.grad()?;
    let (x, xv) = tensor_arg(ctx, s, 0, "input")?;
    let weight = s.input(1, "weight");
    let bias = s.input(2, "bias");
    let (running, training, eps_pos) = match (s.op.name.as_str(), s.op.overload.as_str()) {
        ("_native_batch_norm_legit", "no_stats") => {
            ([Value::None, Value::None], s.flag(3, "training", true)?, 5)
        }
        ("_native_batch_norm_legit_no_training", _) => {
            let r = [
                ctx.fwd_value(s.required(3, "running_mean")?),
                ctx.fwd_value(s.required(4, "running_var")?),
            ];
            (r, false, 6)
        }
        ("_native_batch_norm_legit_functional", _) => {
            // The backward reads the running statistics after the update: outputs 3 and 4.
            let r = [ctx.saved_item(s, 3)?.value(), ctx.saved_item(s, 4)?.value()];
            (r, s.flag(5, "training", true)?, 7)
        }
        _ => {
            let r = [
                s.arg(3, "running_mean")
                    .map_or(Value::None, |v| ctx.fwd_value(v)),
                s.arg(4, "running_var")
                    .map_or(Value::None, |v| ctx.fwd_value(v)),
            ];
            (r, s.flag(5, "training", true)?, 7)
        }
    };
    let eps = s.float(eps_pos, "eps", f64::NAN)?;
    if eps.is_nan() {
        return Err(s.error("argument `eps` is missing"));
    }
    let mask = [
        ctx.requires_grad(x),
        weight.is_some_and(|w| ctx.requires_grad(w)),
        bias.is_some_and(|b| ctx.requires_grad(b)),
    ];
    let save_mean = ctx.saved_item(s, 1)?;
    let save_invstd = ctx.saved_item(s, 2)?;
    let channels = xv.meta.shape.get(1).copied().unwrap_or(1);
    let param = TensorMeta::new(xv.meta.dtype, vec![channels]);
    let metas = [
        mask[0].then(|| xv.meta.clone()),
        mask[1].then(|| param.clone()),
        mask[2].then(|| param.clone()),
    ];
    let [running_mean, running_var] = running;
    let args = vec![
        g.value(),
        xv.value(),
        weight.map_or(Value::None, |w| Value::Node(ctx.fwd(w))),
        running_mean,
        running_var,
        save_mean.value(),
        save_invstd.value(),
        Value::Bool(training),
        Value::Float(eps),
        Value::List(mask.iter().map(|&b| Value::Bool(b)).collect()),
    ];
    let inputs = [Some(x), weight, bias];
    let inputs = [0, 1, 2].map(|i| inputs[i].filter(|_| mask[i]));
    Ok(masked_backward(
        ctx,
        "native_batch_norm_backward",
        args,
        inputs,
        metas,
    ))
}

// ------------------------------------------------------------------ strides

/// Contiguous strides of `shape`.
pub(crate) fn contiguous(shape: &[i64]) -> Vec<i64> {
    let mut strides = vec![1i64; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        strides[i] = strides[i + 1].saturating_mul(shape[i + 1].max(1));
    }
    strides
}

/// The strides TensorIterator gives the output of a pointwise op whose tensor inputs
/// (shape, strides, in argument order) broadcast to `shape`: dense, with the dimensions
/// ordered as the first input with a strict stride order for each pair says
/// (ATen's `reorder_dimensions`; broadcast dimensions are ambiguous, and equal strides
/// put the smaller size inside).
fn pointwise_strides(shape: &[i64], inputs: &[(Vec<i64>, Vec<i64>)]) -> Vec<i64> {
    let n = shape.len();
    // Input strides aligned with the output's dimensions, 0 where broadcast.
    let aligned: Vec<Vec<i64>> = inputs
        .iter()
        .map(|(sh, st)| {
            let lead = n.saturating_sub(sh.len());
            (0..n)
                .map(|d| {
                    if d < lead {
                        return 0;
                    }
                    let k = d - lead;
                    match (sh.get(k), st.get(k)) {
                        (Some(&size), Some(&stride)) if !(size == 1 && shape[d] != 1) => stride,
                        _ => 0,
                    }
                })
                .collect()
        })
        .collect();
    // 1: `a` goes outside `b`; -1: inside; 0: no input decides.
    let should_swap = |a: usize, b: usize| -> i32 {
        for st in &aligned {
            let (sa, sb) = (st[a], st[b]);
            if sa == 0 || sb == 0 {
                continue;
            }
            if sa < sb {
                return -1;
            }
            if sa > sb {
                return 1;
            }
            if shape[a] > shape[b] {
                return 1;
            }
        }
        0
    };
    // Innermost first, starting from the last dimension; insertion sort that stops at the
    // first decided comparison.
    let mut perm: Vec<usize> = (0..n).rev().collect();
    for i in 1..n {
        let mut d1 = i;
        for d0 in (0..i).rev() {
            match should_swap(perm[d0], perm[d1]) {
                c if c > 0 => {
                    perm.swap(d0, d1);
                    d1 = d0;
                }
                c if c < 0 => break,
                _ => {}
            }
        }
    }
    let mut strides = vec![0i64; n];
    let mut next = 1i64;
    for &d in &perm {
        strides[d] = next;
        next = next.saturating_mul(shape[d].max(1));
    }
    strides
}

fn is_contiguous(shape: &[i64], strides: &[i64]) -> bool {
    let mut expected = 1;
    for (&size, &stride) in shape.iter().zip(strides).rev() {
        if size != 1 && stride != expected {
            return false;
        }
        expected = expected.saturating_mul(size);
    }
    true
}

/// Dimensions ordered from outermost to innermost by stride (ties keep their order).
fn stride_order(shape: &[i64], strides: &[i64]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..shape.len()).collect();
    order.sort_by(|&a, &b| strides[b].cmp(&strides[a]));
    order
}

/// True when the tensor covers its memory exactly once (some permutation is contiguous).
fn is_dense(shape: &[i64], strides: &[i64]) -> bool {
    let mut expected = 1;
    for &d in stride_order(shape, strides).iter().rev() {
        if shape[d] != 1 && strides[d] != expected {
            return false;
        }
        expected = expected.saturating_mul(shape[d]);
    }
    true
}

/// The strides `view(new_shape)` gives, or `None` when the view is impossible
/// (ATen's `computeStride`).
pub(crate) fn view_strides(
    old_shape: &[i64],
    old_strides: &[i64],
    new_shape: &[i64],
) -> Option<Vec<i64>> {
    if old_shape.len() != old_strides.len() {
        return None;
    }
    if old_shape.is_empty() {
        return Some(vec![1; new_shape.len()]);
    }
    let count = |shape: &[i64]| {
        shape
            .iter()
            .try_fold(1i64, |n, &d| if d < 0 { None } else { n.checked_mul(d) })
    };
    let numel = count(old_shape)?;
    if Some(numel) != count(new_shape) {
        return None;
    }
    if numel == 0 {
        return Some(contiguous(new_shape));
    }
    let mut new_strides = vec![0i64; new_shape.len()];
    let mut view_d = new_shape.len() as i64 - 1;
    let mut chunk_base_stride = *old_strides.last()?;
    let mut tensor_numel = 1i64;
    let mut view_numel = 1i64;
    for tensor_d in (0..old_shape.len()).rev() {
        tensor_numel *= old_shape[tensor_d];
        if tensor_d == 0
            || (old_shape[tensor_d - 1] != 1
                && old_strides[tensor_d - 1] != tensor_numel * chunk_base_stride)
        {
            while view_d >= 0 && (view_numel < tensor_numel || new_shape[view_d as usize] == 1) {
                new_strides[view_d as usize] = view_numel * chunk_base_stride;
                view_numel *= new_shape[view_d as usize];
                view_d -= 1;
            }
            if view_numel != tensor_numel {
                return None;
            }
            if tensor_d > 0 {
                chunk_base_stride = old_strides[tensor_d - 1];
                tensor_numel = 1;
                view_numel = 1;
            }
        }
    }
    (view_d == -1).then_some(new_strides)
}

/// Ops whose output is a fresh contiguous tensor whatever their inputs' strides.
const CONTIGUOUS_OUTPUT: [&str; 19] = [
    "mm",
    "addmm",
    "bmm",
    "sum",
    "mean",
    "native_layer_norm",
    "native_layer_norm_backward",
    "embedding",
    "embedding_dense_backward",
    "slice_backward",
    "select_backward",
    "zeros",
    "ones",
    "full",
    "empty",
    "arange",
    "scalar_tensor",
    "stack",
    "masked_select",
];

/// Ops libtorch does not tag `pointwise` whose output still takes the layout of its
/// full-size inputs, as a pointwise op's does (TensorIterator's rule: `empty_like` of the
/// input, or an elementwise kernel behind a wrapper).
const LAYOUT_OF_INPUTS: [&str; 11] = [
    "zeros_like",
    "ones_like",
    "full_like",
    "_to_copy",
    "_softmax",
    "_log_softmax",
    "_softmax_backward_data",
    "_log_softmax_backward_data",
    "tril",
    "triu",
    "native_dropout",
];
/// The strides of a call's (single) output, as far as the model knows them.
pub(crate) fn call_strides(
    ctx: &Ctx<'_>,
    op: &OpName,
    args: &[Value],
    kwargs: &[(String, Value)],
    shape: &[i64],
) -> Option<Vec<i64>> {
    let input = |i: usize| -> Option<(Vec<i64>, Vec<i64>)> {
        let id = args.get(i)?.as_node()?;
        Some((ctx.meta(id)?.shape.to_vec(), ctx.strides(id)?.to_vec()))
    };
    let int = |i: usize| args.get(i).and_then(as_int);
    let name = op.name.as_str();
    match name {
        "t" => {
            let (_, mut st) = input(0)?;
            st.reverse();
            Some(st)
        }
        "transpose" => {
            let (sh, mut st) = input(0)?;
            let a = wrap_dim(int(1)?, sh.len())?;
            let b = wrap_dim(int(2)?, sh.len())?;
            if a < st.len() && b < st.len() {
                st.swap(a, b);
            }
            Some(st)
        }
        "permute" => {
            let (sh, st) = input(0)?;
            let dims = as_ints(args.get(1)?)?;
            dims.iter()
                .map(|&d| st.get(wrap_dim(d, sh.len())?).copied())
                .collect()
        }
        "expand" => {
            let (sh, st) = input(0)?;
            let lead = shape.len().checked_sub(sh.len())?;
            Some(
                (0..shape.len())
                    .map(|i| {
                        if i < lead || (sh[i - lead] == 1 && shape[i] != 1) {
                            0
                        } else {
                            st[i - lead]
                        }
                    })
                    .collect(),
            )
        }
        "view" | "_unsafe_view" | "reshape" | "alias" | "detach" | "lift_fresh" => {
            let (sh, st) = input(0)?;
            view_strides(&sh, &st, shape)
        }
        "slice" => {
            let (sh, mut st) = input(0)?;
            let d = wrap_dim(int(1).unwrap_or(0), sh.len())?;
            let step = int(4).unwrap_or(1);
            *st.get_mut(d)? *= step;
            Some(st)
        }
        "select" => {
            let (sh, mut st) = input(0)?;
            let d = wrap_dim(int(1)?, sh.len())?;
            (d < st.len()).then(|| st.remove(d));
            Some(st)
        }
        "unsqueeze" => {
            let (sh, mut st) = input(0)?;
            let n = sh.len() as i64 + 1;
            let d = int(1)?;
            let d = if d < 0 { d + n } else { d } as usize;
            let s = if d >= sh.len() { 1 } else { sh[d] * st[d] };
            (d <= st.len()).then(|| st.insert(d, s));
            Some(st)
        }
        "squeeze" => {
            let (sh, st) = input(0)?;
            let dims: Vec<usize> = match args.get(1) {
                None => (0..sh.len()).collect(),
                Some(v) => as_ints(v)?
                    .into_iter()
                    .map(|d| wrap_dim(d, sh.len()))
                    .collect::<Option<_>>()?,
            };
            Some(
                (0..sh.len())
                    .filter(|&d| !(dims.contains(&d) && sh[d] == 1))
                    .map(|d| st[d])
                    .collect(),
            )
        }
        "clone" | "_to_copy" => {
            let contiguous_format = kwargs.iter().any(|(k, v)| {
                k == "memory_format" && *v == Value::MemoryFormat(MemoryFormat::ContiguousFormat)
            });
            if contiguous_format {
                return Some(contiguous(shape));
            }
            let (sh, st) = input(0)?;
            Some(if is_dense(&sh, &st) {
                st
            } else {
                contiguous(shape)
            })
        }
        _ if CONTIGUOUS_OUTPUT.contains(&name) => Some(contiguous(shape)),
        // cat keeps a channels-last layout its inputs share; below 4-d there is none.
        "cat" if shape.len() < 4 => Some(contiguous(shape)),
        _ => {
            // Pointwise: TensorIterator's output layout; other ops: contiguous when every
            // tensor input is.
            let mut tensors = Vec::new();
            for v in args.iter().chain(kwargs.iter().map(|(_, v)| v)) {
                v.for_each_node(&mut |id| tensors.push(id));
            }
            let mut layouts = Vec::with_capacity(tensors.len());
            for id in tensors {
                layouts.push((ctx.meta(id)?.shape.to_vec(), ctx.strides(id)?.to_vec()));
            }
            if op.is_pointwise() || LAYOUT_OF_INPUTS.contains(&name) {
                Some(pointwise_strides(shape, &layouts))
            } else {
                layouts
                    .iter()
                    .all(|(sh, st)| is_contiguous(sh, st))
                    .then(|| contiguous(shape))
            }
        }
    }
}

/// The strides of an output of a multi-output call.
pub(crate) fn item_strides(ctx: &Ctx<'_>, source: NodeId, shape: &[i64]) -> Option<Vec<i64>> {
    let node = ctx.node(source);
    let graphbug_ir::NodeKind::Call { op, args, .. } = &node.kind else {
        return None;
    };
    let input = || -> Option<(Vec<i64>, Vec<i64>)> {
        let id = args.first()?.as_node()?;
        Some((ctx.meta(id)?.shape.to_vec(), ctx.strides(id)?.to_vec()))
    };
    match op.name.as_str() {
        "split" | "split_with_sizes" => input().map(|(_, st)| st),
        "unbind" => {
            let (sh, mut st) = input()?;
            let d = wrap_dim(args.get(1).and_then(as_int).unwrap_or(0), sh.len())?;
            (d < st.len()).then(|| st.remove(d));
            Some(st)
        }
        _ => {
            let all_contiguous = args.iter().all(|v| {
                let mut ok = true;
                v.for_each_node(&mut |id| {
                    ok &= match (ctx.meta(id), ctx.strides(id)) {
                        (Some(m), Some(st)) => is_contiguous(&m.shape, st),
                        _ => false,
                    }
                });
                ok
            });
            all_contiguous.then(|| contiguous(shape))
        }
    }
}

/// Whether a dtype can carry gradients.
pub(crate) fn differentiable_dtype(dtype: Dtype) -> bool {
    dtype.is_floating_point() || dtype.is_complex()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn view_strides_follow_aten() {
        // A transposed [2, 16, 4, 16] (dims 2 and 3 swapped in memory) merges 2 and 3.
        let st = [1024, 1, 256, 16];
        assert_eq!(
            view_strides(&[2, 16, 4, 16], &st, &[2, 16, 64]),
            Some(vec![1024, 1, 16])
        );
        // Dims 2 and 3 not adjacent in memory: no view.
        assert_eq!(
            view_strides(&[2, 16, 4, 16], &[1024, 16, 256, 1], &[2, 16, 64]),
            None
        );
        assert_eq!(
            view_strides(&[4, 6], &[6, 1], &[2, 2, 6]),
            Some(vec![12, 6, 1])
        );
        assert_eq!(view_strides(&[], &[], &[1, 1]), Some(vec![1, 1]));
        assert_eq!(view_strides(&[4, 6], &[1, 4], &[24]), None);
    }

    #[test]
    fn layouts() {
        assert_eq!(contiguous(&[2, 3, 4]), vec![12, 4, 1]);
        assert!(is_contiguous(&[2, 1, 4], &[4, 99, 1]));
        assert!(is_dense(&[3, 4], &[1, 3]));
        assert!(!is_dense(&[3, 4], &[0, 1]));
        assert_eq!(broadcast(&[4, 8], &[8]), vec![4, 8]);
        assert_eq!(broadcast(&[1, 8], &[4, 1]), vec![4, 8]);
        assert_eq!(wrap_dim(-1, 3), Some(2));
        assert_eq!(wrap_dim(3, 3), None);
        assert_eq!(wrap_dim(-1, 0), Some(0));
    }
}
