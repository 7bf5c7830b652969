//! Derivatives from outside this crate, for ops the Rust rules do not cover.
//!
//! The joint graph asks a [`Derivatives`] provider for the backward of every call whose op
//! has no rule in `rules.rs`. graphbug's provider (in `graphbug-aten`) records what
//! libtorch's autograd engine runs for the call, so every op libtorch can differentiate
//! differentiates here with PyTorch's own formula; this crate stays free of libtorch.

use graphbug_ir::schema::Schemas;
use graphbug_ir::{Device, Graph, Meta, OpName, TensorMeta, Value};

/// One forward call to differentiate, as a provider sees it.
#[derive(Clone, Debug, PartialEq)]
pub struct ForwardCall<'a> {
    /// The forward node's name, for messages.
    pub node: &'a str,
    /// Its op.
    pub op: &'a OpName,
    /// Its positional arguments; tensor arguments are `Value::Node(NodeId(k))`, `k`
    /// indexing `inputs`.
    pub args: Vec<Value>,
    /// Its keyword arguments, tensors numbered as in `args`.
    pub kwargs: Vec<(String, Value)>,
    /// Each distinct tensor argument: its dtype and shape, and whether it requires grad.
    pub inputs: Vec<(TensorMeta, bool)>,
    /// The call's outputs (one tensor, or several).
    pub outputs: Meta,
    /// Per output: a gradient arrives for it.
    pub grads: Vec<bool>,
    /// The device the joint graph's factory calls name.
    pub device: Device,
}

/// Where a placeholder of a [`Backward`] graph takes its value from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Source {
    /// The forward call's tensor input `k` (as numbered in [`ForwardCall::inputs`]).
    Input(usize),
    /// The forward call's output `k`.
    Output(usize),
    /// The gradient of the forward call's output `k`.
    Grad(usize),
}

/// The backward of one forward call: a graph over [`Source`] values that returns one
/// gradient (or `None`) per forward input.
#[derive(Clone, Debug, PartialEq)]
pub struct Backward {
    /// The backward's calls; its placeholders are `sources`, in order.
    pub graph: Graph,
    /// What each placeholder stands for.
    pub sources: Vec<Source>,
}

/// A source of derivatives for ops without a Rust rule.
pub trait Derivatives {
    /// The backward of `call`, or why there is none (the message names what is missing).
    fn backward(&self, call: &ForwardCall<'_>) -> Result<Backward, String>;

    /// Which outputs of `call` carry gradients when its inputs require grad; `None` when
    /// the provider cannot tell (every floating output is then taken to).
    fn differentiable_outputs(&self, _call: &ForwardCall<'_>) -> Option<Vec<bool>> {
        None
    }

    /// The op schemas the provider's graphs are checked against: the joint graph's calls
    /// must bind to them ([`graphbug_ir::schema::verify_calls`]) before it is returned.
    /// `None` (the default): no check.
    fn schemas(&self) -> Option<&dyn Schemas> {
        None
    }
}

/// No derivatives beyond the Rust rules: an op without one fails when a gradient has to
/// flow through it.
pub struct RulesOnly;

impl Derivatives for RulesOnly {
    fn backward(&self, _call: &ForwardCall<'_>) -> Result<Backward, String> {
        Err("no derivative rule, and a gradient has to flow through it".into())
    }
}
