//! The interpreter: runs a graph node by node through libtorch's boxed dispatcher.
//!
//! Each call node is prepared once into a [`Plan`] (schema lookup, argument conversion,
//! defaults, device rewriting); running then only fills tensor holes and calls the op.
//! Values are freed right after their last use, as FX's generated code does.

use std::collections::HashMap;
use std::sync::Arc;

use graphbug_ir::{Device, Graph, Meta, Node, NodeKind, OpName, Value};
use tch::Tensor;
use torch_sys::C_tensor;

use crate::device::{ensure_device, same_device};
use crate::dtype::{c10_layout, c10_memory_format, c10_scalar_type, describe, meta_of};
use crate::error::{AtenError, Result};
use crate::memory::LiveBytes;
use crate::schema::{ArgType, Argument, Elem};
use crate::shim::{tensor_device, tensor_to, zeros_like_on, Op, Plan, Stack, StackValue};
use crate::trace::{op_label, TraceSink};

/// A value produced while running a graph.
#[derive(Debug)]
pub enum RtValue {
    /// `None`, or an undefined tensor.
    None,
    /// A tensor.
    Tensor(Tensor),
    /// A `Tensor[]` result, e.g. of `split`.
    List(Vec<Tensor>),
    /// Several results of one op, e.g. `native_layer_norm`'s three.
    Tuple(Vec<RtValue>),
    /// An int result.
    Int(i64),
    /// A float result.
    Float(f64),
    /// A bool result.
    Bool(bool),
}

impl RtValue {
    /// A copy sharing tensor storage (tensors are reference-counted handles).
    pub fn share(&self) -> RtValue {
        match self {
            RtValue::None => RtValue::None,
            RtValue::Tensor(t) => RtValue::Tensor(t.shallow_clone()),
            RtValue::List(ts) => RtValue::List(ts.iter().map(Tensor::shallow_clone).collect()),
            RtValue::Tuple(vs) => RtValue::Tuple(vs.iter().map(RtValue::share).collect()),
            RtValue::Int(i) => RtValue::Int(*i),
            RtValue::Float(f) => RtValue::Float(*f),
            RtValue::Bool(b) => RtValue::Bool(*b),
        }
    }

    /// Calls `f` on every tensor of the value.
    pub fn for_each_tensor(&self, f: &mut dyn FnMut(&Tensor)) {
        match self {
            RtValue::Tensor(t) => f(t),
            RtValue::List(ts) => ts.iter().for_each(&mut *f),
            RtValue::Tuple(vs) => vs.iter().for_each(|v| v.for_each_tensor(f)),
            RtValue::None | RtValue::Int(_) | RtValue::Float(_) | RtValue::Bool(_) => {}
        }
    }

    /// The tensor, if this is one.
    pub fn as_tensor(&self) -> Option<&Tensor> {
        match self {
            RtValue::Tensor(t) => Some(t),
            _ => None,
        }
    }

    /// Item `index` of a tuple or list value.
    pub fn item(&self, index: usize) -> Option<RtValue> {
        match self {
            RtValue::Tuple(vs) => vs.get(index).map(RtValue::share),
            RtValue::List(ts) => ts.get(index).map(|t| RtValue::Tensor(t.shallow_clone())),
            _ => None,
        }
    }

    /// What kind of value this is, for messages.
    pub fn kind(&self) -> &'static str {
        match self {
            RtValue::None => "None",
            RtValue::Tensor(_) => "a tensor",
            RtValue::List(_) => "a tensor list",
            RtValue::Tuple(_) => "a tuple",
            RtValue::Int(_) => "an int",
            RtValue::Float(_) => "a float",
            RtValue::Bool(_) => "a bool",
        }
    }

    /// Shape and dtype metadata of this value, as the IR records it.
    pub fn meta(&self) -> Meta {
        match self {
            RtValue::Tensor(t) => meta_of(t).map_or(Meta::Unknown, Meta::Tensor),
            RtValue::List(ts) => Meta::Multi(ts.iter().map(meta_of).collect()),
            RtValue::Tuple(vs) => {
                Meta::Multi(vs.iter().map(|v| v.meta().tensor().cloned()).collect())
            }
            _ => Meta::Unknown,
        }
    }
}

/// Watches (and may alter) a run node by node; see [`Interpreter::run_with_hook`].
pub trait RunHook {
    /// Called before call node `node` runs, with its tensor arguments in order.
    fn before_call(&mut self, _node: usize, _args: &[&Tensor]) -> Result<()> {
        Ok(())
    }

    /// Called after node `node` (placeholders included) produced `value`, which the hook
    /// may replace. An error stops the run.
    fn after_node(&mut self, _node: usize, _value: &mut RtValue) -> Result<()> {
        Ok(())
    }

    /// On the meta device, when call node `node` cannot be inferred (`why`: no meta kernel,
    /// and the CPU stand-in would not fit in memory): whether its annotation may stand in
    /// for the result. The default says no, and the run stops with `why`. Also told (its
    /// answer unused) when an annotation stands in for a data-dependent output shape.
    fn assume_annotation(&mut self, _node: usize, _why: &str) -> Result<bool> {
        Ok(false)
    }
}

/// A hook that only watches each node's value.
struct Observer<'f>(&'f mut dyn FnMut(usize, &RtValue) -> Result<()>);

impl RunHook for Observer<'_> {
    fn after_node(&mut self, node: usize, value: &mut RtValue) -> Result<()> {
        (self.0)(node, value)
    }
}

/// How a call node's tensor arguments map to its schema.
#[derive(Clone)]
pub struct CallInfo<'a> {
    /// The op called.
    pub op: &'a Arc<Op>,
    /// For each tensor the call takes (in `before_call` order), its schema argument index.
    pub tensor_args: &'a [usize],
}

enum StepKind {
    Call {
        plan: Plan,
        /// On the meta device: the same call on CPU, for ops without a meta kernel in
        /// libtorch (PyTorch registers many of those from Python).
        cpu_fallback: Option<Plan>,
        /// Nodes whose tensors fill the plan's holes, in order.
        sources: Vec<usize>,
        /// The schema argument index of each hole.
        hole_args: Vec<usize>,
        /// Number of values the op returns.
        n_returns: usize,
        /// For `with_effects(token, op, *args)`: the token's node, returned first, ahead
        /// of the op's results.
        token: Option<usize>,
    },
    GetItem {
        source: usize,
        index: usize,
    },
    Constant(Tensor),
}

struct Step {
    node: usize,
    kind: StepKind,
    /// Values whose last use is this step.
    free: Vec<usize>,
}

/// A graph prepared to run on one device.
pub struct Interpreter {
    graph: Arc<Graph>,
    device: Device,
    steps: Vec<Step>,
    /// For each node, its step (placeholders have none).
    step_of: Vec<Option<usize>>,
    inputs: Vec<usize>,
    /// Record libtorch's autograd graph while running.
    autograd: bool,
    /// On the meta device, run ops without a meta kernel on CPU stand-ins.
    stand_ins: bool,
    /// Where every node's value goes, if anywhere (`graphbug run --trace`).
    trace: Option<TraceSink>,
}

impl std::fmt::Debug for Interpreter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Interpreter")
            .field("graph", &self.graph.name)
            .field("device", &self.device)
            .field("steps", &self.steps.len())
            .finish()
    }
}

impl Interpreter {
    /// Prepares `graph` to run on `device`. Device arguments in the graph are rewritten to
    /// `device`, so a graph traced on CUDA replays on CPU and vice versa; `constants` hold
    /// the tensors of `self.<name>` nodes.
    pub fn new(
        graph: &Graph,
        device: &Device,
        constants: &HashMap<String, Tensor>,
    ) -> Result<Interpreter> {
        graph.verify()?;
        ensure_device(device)?;
        let mut steps = Vec::with_capacity(graph.nodes.len());
        let mut inputs = Vec::new();
        for (i, node) in graph.nodes.iter().enumerate() {
            let kind = match &node.kind {
                NodeKind::Placeholder => {
                    inputs.push(i);
                    continue;
                }
                NodeKind::Call { op, args, kwargs } => {
                    // `with_effects(token, op, *args)` runs `op(*args)` and returns the
                    // token ahead of its results.
                    let (op, args, token) = match (op.is_effectful(), args.first(), args.get(1)) {
                        (false, _, _) => (op, &args[..], None),
                        (true, Some(Value::Node(t)), Some(Value::Op(inner))) => {
                            (inner, &args[2..], Some(t.index()))
                        }
                        (true, _, _) => {
                            return Err(AtenError::BadArguments {
                                node: node.name.to_string(),
                                op: op.to_string(),
                                message: "expected `with_effects(token, torch.ops.<op>, *args)`"
                                    .into(),
                            })
                        }
                    };
                    if op.is_python() {
                        return Err(AtenError::UnknownOp {
                            op: op.to_string(),
                            node: Some(node.name.to_string()),
                            message:
                                "a Python-level call (a dynamo-level or dynamic-shape graph): \
                                      the interpreter runs aten-level graphs; lower it first \
                                      (`graphbug_ir::lower::lower_to_aten`, as the graphbug \
                                      commands do) and make a dynamic graph static \
                                      (`graphbug specialize`)"
                                    .into(),
                        });
                    }
                    let lowered = prims_as_aten(op, args, kwargs);
                    let (op, args, kwargs) = match &lowered {
                        Some((op, args, kwargs)) => (op, &args[..], &kwargs[..]),
                        None => (op, args, &kwargs[..]),
                    };
                    let op = Op::find(op).map_err(|e| match e {
                        AtenError::UnknownOp { op, message, .. } => AtenError::UnknownOp {
                            op,
                            node: Some(node.name.to_string()),
                            message,
                        },
                        other => other,
                    })?;
                    let (plan, sources, hole_args) =
                        build_plan(graph, node, op.clone(), args, kwargs, device)?;
                    let cpu_fallback = if device.kind == "meta" {
                        Some(build_plan(graph, node, op.clone(), args, kwargs, &Device::cpu())?.0)
                    } else {
                        None
                    };
                    StepKind::Call {
                        plan,
                        cpu_fallback,
                        sources,
                        hole_args,
                        n_returns: op.schema.returns.len(),
                        token,
                    }
                }
                NodeKind::GetItem { source, index } => StepKind::GetItem {
                    source: source.index(),
                    index: *index,
                },
                NodeKind::GetAttr { target } => match constants.get(target) {
                    Some(t) => StepKind::Constant(t.shallow_clone()),
                    None => {
                        return Err(AtenError::BadInputs(format!(
                            "node `{}` reads constant `self.{target}`, which was not provided",
                            node.name
                        )))
                    }
                },
            };
            steps.push(Step {
                node: i,
                kind,
                free: Vec::new(),
            });
        }
        // Free each value after the step that reads it last; outputs are kept.
        let n = graph.nodes.len();
        let mut last_step: Vec<Option<usize>> = vec![None; n];
        for (s, step) in steps.iter().enumerate() {
            last_step[step.node] = Some(s);
            graph.nodes[step.node].for_each_input(|src| last_step[src.index()] = Some(s));
        }
        let mut pinned = vec![false; n];
        for v in graph.outputs() {
            v.for_each_node(&mut |id| pinned[id.index()] = true);
        }
        for (node, last) in last_step.iter().enumerate() {
            if let (Some(s), false) = (last, pinned[node]) {
                steps[*s].free.push(node);
            }
        }
        let mut step_of = vec![None; n];
        for (s, step) in steps.iter().enumerate() {
            step_of[step.node] = Some(s);
        }
        Ok(Interpreter {
            graph: Arc::new(graph.clone()),
            device: device.clone(),
            steps,
            step_of,
            inputs,
            autograd: false,
            stand_ins: true,
            trace: None,
        })
    }

    /// On the meta device, lets an op without a meta kernel fail instead of running on CPU
    /// stand-ins (whose results carry no autograd history).
    pub fn without_stand_ins(mut self) -> Self {
        self.stand_ins = false;
        self
    }

    /// Makes runs record libtorch's own autograd graph (for checking graphbug's gradients
    /// against libtorch autograd); by default that layer is skipped.
    pub fn with_autograd(mut self, on: bool) -> Self {
        self.autograd = on;
        self
    }

    /// Records every node's value (inputs included) into `trace` on each run.
    pub fn with_trace(mut self, trace: Option<TraceSink>) -> Self {
        self.trace = trace;
        self
    }

    /// Records node `node`'s value into the trace, if there is one.
    #[inline(always)]
    fn trace(&self, node: usize, value: &RtValue) {
        if let Some(sink) = &self.trace {
            self.record(sink, node, value);
        }
    }

    /// [`Self::trace`]'s work, kept out of the run loop (tracing is the rare case).
    #[cold]
    #[inline(never)]
    fn record(&self, sink: &TraceSink, node: usize, value: &RtValue) {
        let node = &self.graph.nodes[node];
        let mut inputs = Vec::new();
        node.for_each_input(|s| inputs.push(self.graph.nodes[s.index()].name.as_str()));
        sink.record(&node.name, &op_label(node), &inputs, value);
    }

    /// The graph this interpreter runs.
    pub fn graph(&self) -> &Graph {
        &self.graph
    }

    /// The device it runs on.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// For each step (node name, in order), the values dropped right after it.
    pub fn free_schedule(&self) -> Vec<(String, Vec<String>)> {
        let name = |i: usize| self.graph.nodes[i].name.to_string();
        self.steps
            .iter()
            .map(|s| (name(s.node), s.free.iter().map(|&f| name(f)).collect()))
            .collect()
    }

    /// Runs the graph and returns its outputs (`None` where the graph returns None).
    ///
    /// Inputs are used in place, as PyTorch does: an in-place op on an input (say a
    /// batch-norm running mean) changes the caller's tensor.
    pub fn run(&self, inputs: &[Tensor]) -> Result<Vec<Option<Tensor>>> {
        self.run_observed(inputs, &mut |_, _| Ok(()))
    }

    /// The op and tensor-argument mapping of call node `node` (an index into the graph).
    pub fn call_info(&self, node: usize) -> Option<CallInfo<'_>> {
        let step = &self.steps[(*self.step_of.get(node)?)?];
        match &step.kind {
            StepKind::Call {
                plan, hole_args, ..
            } => Some(CallInfo {
                op: plan.op(),
                tensor_args: hole_args,
            }),
            _ => None,
        }
    }

    /// Runs the graph, calling `observe(node_index, value)` after every node.
    pub fn run_observed(
        &self,
        inputs: &[Tensor],
        observe: &mut dyn FnMut(usize, &RtValue) -> Result<()>,
    ) -> Result<Vec<Option<Tensor>>> {
        self.run_with_hook(inputs, &mut Observer(observe))
    }

    /// Runs the graph with `hook` called around every node.
    pub fn run_with_hook(
        &self,
        inputs: &[Tensor],
        hook: &mut dyn RunHook,
    ) -> Result<Vec<Option<Tensor>>> {
        self.run_inner(inputs, hook, None)
    }

    /// Runs the graph, counting in `tally` the storages its values hold as it goes (the
    /// inputs from the start, each value from its node to its last use); the outputs stay
    /// counted, held by the caller.
    pub fn run_tallied(
        &self,
        inputs: &[Tensor],
        tally: &mut LiveBytes,
    ) -> Result<Vec<Option<Tensor>>> {
        self.run_inner(inputs, &mut Observer(&mut |_, _| Ok(())), Some(tally))
    }

    fn run_inner(
        &self,
        inputs: &[Tensor],
        hook: &mut dyn RunHook,
        mut tally: Option<&mut LiveBytes>,
    ) -> Result<Vec<Option<Tensor>>> {
        self.check_inputs(inputs)?;
        let graph = &*self.graph;
        let mut values: Vec<Option<RtValue>> = Vec::with_capacity(graph.nodes.len());
        values.resize_with(graph.nodes.len(), || None);
        for (k, &i) in self.inputs.iter().enumerate() {
            let mut v = RtValue::Tensor(inputs[k].shallow_clone());
            hook.after_node(i, &mut v)?;
            self.trace(i, &v);
            if let Some(t) = tally.as_deref_mut() {
                t.hold_value(&v);
            }
            values[i] = Some(v);
        }
        let mut stack = Stack::new();
        let mut ptrs: Vec<*const C_tensor> = Vec::new();
        let mut spare_args: Vec<&'static Tensor> = Vec::new();
        for step in &self.steps {
            let node = &graph.nodes[step.node];
            let mut value = match &step.kind {
                StepKind::Call {
                    plan,
                    cpu_fallback,
                    sources,
                    n_returns,
                    ..
                } => {
                    ptrs.clear();
                    for &s in sources {
                        match &values[s] {
                            Some(RtValue::Tensor(t)) => ptrs.push(t.as_ptr()),
                            other => {
                                return Err(AtenError::BadArguments {
                                    node: node.name.to_string(),
                                    op: plan.op().name.to_string(),
                                    message: format!(
                                        "argument `{}` is {}, not a tensor",
                                        graph.nodes[s].name,
                                        other.as_ref().map_or("missing", RtValue::kind)
                                    ),
                                })
                            }
                        }
                    }
                    {
                        // The arguments' list reuses one allocation for every node (an
                        // empty Vec of references collects into itself).
                        let mut args: Vec<&Tensor> =
                            std::mem::take(&mut spare_args).into_iter().collect();
                        args.extend(
                            sources
                                .iter()
                                .filter_map(|&s| values[s].as_ref().and_then(RtValue::as_tensor)),
                        );
                        let told = hook.before_call(step.node, &args);
                        args.clear();
                        spare_args = args.into_iter().map(|_| unreachable!()).collect();
                        told?;
                    }
                    let failed = |message: String| AtenError::OpFailed {
                        node: node.name.to_string(),
                        op: plan.op().name.to_string(),
                        inputs: describe_sources(&values, sources),
                        message,
                    };
                    match (plan.call(&ptrs, &mut stack, self.autograd), cpu_fallback) {
                        (Ok(()), _) => collect_results(&stack, *n_returns).map_err(failed)?,
                        (Err(_), Some(cpu)) if self.stand_ins => {
                            match cpu_fallback_refused(&values, sources) {
                                None => {
                                    crate::stage::report_stage(&format!(
                                        "meta inference of node `{}` ({}) on CPU stand-ins",
                                        node.name,
                                        plan.op().name
                                    ));
                                    let mut run = |fill| {
                                        run_on_cpu_stand_ins(
                                            cpu, &values, sources, &mut stack, *n_returns, fill,
                                        )
                                    };
                                    // Two fills tell a data-dependent output shape (masked_select);
                                    // a third serves ops that reject both (cholesky).
                                    match (run(Fill::Zeros), run(Fill::Ones)) {
                                        (Ok(a), Ok(b)) if a.meta() == b.meta() => a,
                                        (Ok(a), Ok(b)) => {
                                            let why = format!(
                                            "its output shape depends on the input values ({} on zeros, {} on ones), so only a run with data can tell it",
                                            describe_meta(&a.meta()),
                                            describe_meta(&b.meta())
                                        );
                                            // The graph's annotation is what a run with its
                                            // data gave: take it, and say so where asked.
                                            match annotated_value(&node.meta) {
                                                Some(v) => {
                                                    hook.assume_annotation(step.node, &why)?;
                                                    v
                                                }
                                                None => return Err(failed(why)),
                                            }
                                        }
                                        (Err(_), Ok(v)) | (Ok(v), Err(_)) => v,
                                        (Err(m), Err(_)) => match run(Fill::Eye) {
                                            Ok(v) => v,
                                            // Stand-ins the kernel rejects (segment_reduce's
                                            // lengths must sum to the data's size): only a run
                                            // with data can tell; take the annotation where
                                            // asked, as for a data-dependent shape.
                                            Err(_) => {
                                                let why = format!(
                                                    "{m} (run on CPU stand-ins: the op has no meta kernel, and its kernel rejects zeros, ones and the identity)"
                                                );
                                                match annotated_value(&node.meta) {
                                                    Some(v)
                                                        if hook.assume_annotation(
                                                            step.node, &why,
                                                        )? =>
                                                    {
                                                        v
                                                    }
                                                    _ => return Err(failed(why)),
                                                }
                                            }
                                        },
                                    }
                                }
                                Some(why) => match annotated_value(&node.meta) {
                                    Some(v) if hook.assume_annotation(step.node, &why)? => v,
                                    _ => return Err(failed(why)),
                                },
                            }
                        }
                        (Err(message), _) => return Err(failed(message)),
                    }
                }
                StepKind::GetItem { source, index } => values[*source]
                    .as_ref()
                    .and_then(|v| v.item(*index))
                    .ok_or_else(|| AtenError::BadArguments {
                        node: node.name.to_string(),
                        op: "getitem".into(),
                        message: format!("`{}` has no item {index}", graph.nodes[*source].name),
                    })?,
                StepKind::Constant(t) => RtValue::Tensor(t.shallow_clone()),
            };
            if let StepKind::Call { token: Some(t), .. } = &step.kind {
                let token = values[*t].as_ref().map_or(RtValue::None, RtValue::share);
                let mut items = vec![token];
                match value {
                    RtValue::None => {}
                    RtValue::Tuple(results) => items.extend(results),
                    other => items.push(other),
                }
                value = RtValue::Tuple(items);
            }
            hook.after_node(step.node, &mut value)?;
            self.trace(step.node, &value);
            if let Some(t) = tally.as_deref_mut() {
                t.hold_result_value(&value);
            }
            values[step.node] = Some(value);
            for &f in &step.free {
                if let (Some(v), Some(t)) = (values[f].take(), tally.as_deref_mut()) {
                    t.release_value(&v);
                }
            }
        }
        let outputs: Vec<Option<Tensor>> = graph
            .outputs()
            .iter()
            .enumerate()
            .map(|(i, v)| match v {
                Value::None => Ok(None),
                Value::Node(id) => match &values[id.index()] {
                    Some(RtValue::Tensor(t)) => Ok(Some(t.shallow_clone())),
                    Some(RtValue::None) => Ok(None),
                    other => Err(AtenError::BadArguments {
                        node: "output".into(),
                        op: "return".into(),
                        message: format!(
                            "output {i} (`{}`) is {}, not a tensor",
                            graph.node(*id).name,
                            other.as_ref().map_or("missing", RtValue::kind)
                        ),
                    }),
                },
                other => Err(AtenError::BadArguments {
                    node: "output".into(),
                    op: "return".into(),
                    message: format!("output {i} is the constant {other:?}, not a tensor"),
                }),
            })
            .collect::<Result<_>>()?;
        if let Some(t) = tally {
            // The values go with this run; the outputs stay, held by the caller.
            for o in outputs.iter().flatten() {
                t.hold(o);
            }
            for v in values.iter().flatten() {
                t.release_value(v);
            }
        }
        Ok(outputs)
    }

    fn check_inputs(&self, inputs: &[Tensor]) -> Result<()> {
        let graph = &*self.graph;
        if inputs.len() != self.inputs.len() {
            return Err(AtenError::BadInputs(format!(
                "graph `{}` takes {} inputs, got {}",
                graph.name,
                self.inputs.len(),
                inputs.len()
            )));
        }
        for (k, (&i, t)) in self.inputs.iter().zip(inputs).enumerate() {
            let node = &graph.nodes[i];
            if !t.defined() {
                return Err(AtenError::BadInputs(format!(
                    "input {k} (`{}`) is an undefined tensor",
                    node.name
                )));
            }
            if let Meta::Tensor(want) = &node.meta {
                if meta_of(t).as_ref() != Some(want) {
                    return Err(AtenError::BadInputs(format!(
                        "input {k} (`{}`) should be {want} but is {}",
                        node.name,
                        describe(t)
                    )));
                }
            }
            let dev = tensor_device(t);
            if !same_device(&dev, &self.device) {
                return Err(AtenError::BadInputs(format!(
                    "input {k} (`{}`) is on {dev} but the graph runs on {}",
                    node.name, self.device
                )));
            }
        }
        Ok(())
    }
}

fn describe_sources(values: &[Option<RtValue>], sources: &[usize]) -> String {
    let parts: Vec<String> = sources
        .iter()
        .map(|&s| match &values[s] {
            Some(RtValue::Tensor(t)) => describe(t),
            Some(other) => other.kind().to_string(),
            None => "freed".into(),
        })
        .collect();
    format!("[{}]", parts.join(", "))
}

/// Why the CPU stand-in for an op without a meta kernel must not run: its zero-filled
/// inputs would take more than a quarter of the memory available (`None`: it may run).
fn cpu_fallback_refused(values: &[Option<RtValue>], sources: &[usize]) -> Option<String> {
    let bytes = sources
        .iter()
        .filter_map(|&s| values[s].as_ref().and_then(RtValue::as_tensor))
        .map(|t| {
            let elem = t.f_kind().map_or(8, |k| k.elt_size_in_bytes()) as u64;
            (t.numel() as u64).saturating_mul(elem)
        })
        .fold(0u64, u64::saturating_add);
    let budget = crate::memory::available_bytes().unwrap_or(8 << 30) / 4;
    (bytes > budget).then(|| {
        format!(
            "the op has no meta kernel, and running it on zero-filled CPU inputs instead would take {} (graphbug allows a quarter of the {} available)",
            crate::memory::human(bytes),
            crate::memory::human(budget * 4)
        )
    })
}

/// The node's annotation as meta tensors, when it annotates every output.
fn annotated_value(meta: &Meta) -> Option<RtValue> {
    let device = crate::meta::meta_device();
    match meta {
        Meta::Tensor(m) => crate::meta::empty(m, &device).ok().map(RtValue::Tensor),
        Meta::Multi(items) if !items.is_empty() => items
            .iter()
            .map(|m| {
                m.as_ref()
                    .and_then(|m| crate::meta::empty(m, &device).ok())
                    .map(RtValue::Tensor)
            })
            .collect::<Option<Vec<_>>>()
            .map(RtValue::Tuple),
        _ => None,
    }
}

/// The values CPU stand-ins for meta tensors are filled with.
#[derive(Clone, Copy)]
enum Fill {
    Zeros,
    Ones,
    /// Identity matrices in the last two dimensions where they are square, else ones
    /// (positive definite for cholesky, a valid distribution for multinomial).
    Eye,
}

/// An op call rewritten to another op: the op, positional and keyword arguments.
type Lowered = (OpName, Vec<Value>, Vec<(String, Value)>);

/// The aten call that runs a `prims` op libtorch's C++ dispatcher does not know (prims
/// are defined in Python; AOTAutograd's graphs call them): `convert_element_type(a, dtype)`
/// is `_to_copy(a, dtype=dtype)`, any other prim the aten op of the same name. `None` for
/// other ops, and for prims libtorch registers itself.
fn prims_as_aten(op: &OpName, args: &[Value], kwargs: &[(String, Value)]) -> Option<Lowered> {
    if op.namespace != "prims" || Op::find(op).is_ok() {
        return None;
    }
    if op.name == "convert_element_type" {
        if let [a, dtype] = args {
            let mut kw = kwargs.to_vec();
            kw.push(("dtype".into(), dtype.clone()));
            return Some((OpName::aten("_to_copy", "default"), vec![a.clone()], kw));
        }
    }
    let aten = OpName::aten(&op.name, &op.overload);
    Op::find(&aten)
        .is_ok()
        .then(|| (aten, args.to_vec(), kwargs.to_vec()))
}

/// A meta for messages.
fn describe_meta(m: &Meta) -> String {
    match m {
        Meta::Tensor(t) => t.to_string(),
        Meta::Multi(items) => items
            .iter()
            .map(|t| t.as_ref().map_or("None".into(), ToString::to_string))
            .collect::<Vec<_>>()
            .join(", "),
        Meta::SymTensor(_) | Meta::Sym(_) => m.annotation().unwrap_or_default(),
        Meta::Unknown => "no tensor".into(),
    }
}

/// Runs an op without a meta kernel on CPU stand-ins of its meta arguments; the results
/// go back to the meta device.
fn run_on_cpu_stand_ins(
    cpu: &Plan,
    values: &[Option<RtValue>],
    sources: &[usize],
    stack: &mut Stack,
    n_returns: usize,
    fill: Fill,
) -> std::result::Result<RtValue, String> {
    let zeros = sources
        .iter()
        .map(|&s| {
            let z = match &values[s] {
                Some(RtValue::Tensor(t)) => zeros_like_on(t, "cpu")?,
                _ => return Err("a source is not a tensor".to_string()),
            };
            let size = z.size();
            let square = size.len() >= 2 && size[size.len() - 1] == size[size.len() - 2];
            Ok(match fill {
                Fill::Zeros => z,
                Fill::Eye if square => {
                    let _ = z.diagonal(0, -2, -1).fill_(1);
                    z
                }
                Fill::Ones | Fill::Eye => z.ones_like(),
            })
        })
        .collect::<std::result::Result<Vec<_>, _>>()?;
    let ptrs: Vec<*const C_tensor> = zeros.iter().map(Tensor::as_ptr).collect();
    cpu.call(&ptrs, stack, false)?;
    to_meta(collect_results(stack, n_returns)?)
}

/// The same value with every tensor moved to the meta device.
fn to_meta(v: RtValue) -> std::result::Result<RtValue, String> {
    Ok(match v {
        RtValue::Tensor(t) => RtValue::Tensor(tensor_to(&t, "meta")?),
        RtValue::List(ts) => RtValue::List(
            ts.iter()
                .map(|t| tensor_to(t, "meta"))
                .collect::<std::result::Result<_, _>>()?,
        ),
        RtValue::Tuple(vs) => RtValue::Tuple(
            vs.into_iter()
                .map(to_meta)
                .collect::<std::result::Result<_, _>>()?,
        ),
        other => other,
    })
}

fn collect_results(stack: &Stack, n_returns: usize) -> std::result::Result<RtValue, String> {
    let got = stack.len();
    if got != n_returns {
        return Err(format!(
            "op left {got} results, its schema declares {n_returns}"
        ));
    }
    let item = |i| {
        Ok(match stack.get(i)? {
            StackValue::None => RtValue::None,
            StackValue::Tensor(t) => RtValue::Tensor(t),
            StackValue::TensorList(ts) => RtValue::List(ts),
            StackValue::Int(v) => RtValue::Int(v),
            StackValue::Double(v) => RtValue::Float(v),
            StackValue::Bool(v) => RtValue::Bool(v),
        })
    };
    match got {
        0 => Ok(RtValue::None),
        1 => item(0),
        _ => (0..got)
            .map(item)
            .collect::<Result<_, String>>()
            .map(RtValue::Tuple),
    }
}

/// Binds a call's arguments to its op's schema and prepares the plan.
fn build_plan(
    graph: &Graph,
    node: &Node,
    op: Arc<Op>,
    args: &[Value],
    kwargs: &[(String, Value)],
    device: &Device,
) -> Result<(Plan, Vec<usize>, Vec<usize>)> {
    let schema = &op.schema;
    let bad = |message: String| AtenError::BadArguments {
        node: node.name.to_string(),
        op: op.name.to_string(),
        message,
    };
    let bound = schema.bind(args, kwargs).map_err(bad)?;
    let mut plan = Plan::new(op.clone());
    let mut sources = Vec::new();
    let mut hole_args = Vec::new();
    let name_of = |id: graphbug_ir::NodeId| {
        graph
            .nodes
            .get(id.index())
            .map_or_else(|| format!("#{}", id.0), |n| n.name.to_string())
    };
    for (i, (arg, value)) in schema.arguments.iter().zip(&bound).enumerate() {
        let ty = arg.arg_type();
        let rewrite_device = ty.elem == Elem::Device && device.kind != "cpu";
        match value {
            Some(Value::None) | None if rewrite_device => plan
                .push_device(&device.to_string())
                .map_err(|m| bad(format!("argument `{}`: {m}", arg.name)))?,
            Some(v) => push_value(&mut plan, arg, &ty, v, device, &mut sources).map_err(|m| {
                let mut shown = String::new();
                let _ = v.write_python(&mut shown, &name_of);
                bad(format!(
                    "argument `{}` ({}) cannot take `{shown}`: {m}",
                    arg.name,
                    arg.declared_type()
                ))
            })?,
            None if arg.default.is_some() => plan
                .push_default(i)
                .map_err(|m| bad(format!("argument `{}`: {m}", arg.name)))?,
            None if ty.accepts_none() => plan.push_none(),
            None => {
                return Err(bad(format!(
                    "missing required argument `{}`; schema: {}",
                    arg.name, schema.text
                )))
            }
        }
        hole_args.resize(sources.len(), i);
    }
    Ok((plan, sources, hole_args))
}

/// Converts one IR value to the argument's declared type and pushes it.
fn push_value(
    plan: &mut Plan,
    arg: &Argument,
    ty: &ArgType,
    v: &Value,
    device: &Device,
    sources: &mut Vec<usize>,
) -> std::result::Result<(), String> {
    if let Value::None = v {
        if ty.accepts_none() || ty.elem == Elem::Generator {
            plan.push_none();
            return Ok(());
        }
        return Err("None is not allowed here".into());
    }
    if ty.list {
        let items: Vec<&Value> = match v {
            Value::List(items) | Value::Tuple(items) => items.iter().collect(),
            // A single int stands for a list, as `kernel_size=2` does for `int[2]`.
            Value::Int(_) if ty.elem == Elem::Int => {
                vec![v; arg.n.unwrap_or(1)]
            }
            _ => return Err("expected a list".into()),
        };
        return match ty.elem {
            Elem::Tensor => {
                let mut present = Vec::with_capacity(items.len());
                for item in items {
                    match item {
                        Value::Node(n) => {
                            sources.push(n.index());
                            present.push(true);
                        }
                        Value::None if ty.elem_optional => present.push(false),
                        _ => return Err("list elements must be nodes".into()),
                    }
                }
                plan.push_list_hole(&present, ty.elem_optional);
                Ok(())
            }
            Elem::Int => {
                let ints = items
                    .iter()
                    .map(|i| match i {
                        Value::Int(x) => Ok(*x),
                        Value::Bool(b) => Ok(i64::from(*b)),
                        _ => Err("list elements must be ints".to_string()),
                    })
                    .collect::<std::result::Result<Vec<_>, _>>()?;
                plan.push_int_list(&ints);
                Ok(())
            }
            Elem::Float => {
                let floats = items
                    .iter()
                    .map(|i| match i {
                        Value::Float(x) => Ok(*x),
                        Value::Int(x) => Ok(*x as f64),
                        _ => Err("list elements must be numbers".to_string()),
                    })
                    .collect::<std::result::Result<Vec<_>, _>>()?;
                plan.push_double_list(&floats);
                Ok(())
            }
            Elem::Bool => {
                let bools = items
                    .iter()
                    .map(|i| match i {
                        Value::Bool(x) => Ok(*x),
                        _ => Err("list elements must be bools".to_string()),
                    })
                    .collect::<std::result::Result<Vec<_>, _>>()?;
                plan.push_bool_list(&bools);
                Ok(())
            }
            ref other => Err(format!("lists of {other:?} are not supported")),
        };
    }
    match (&ty.elem, v) {
        (Elem::Tensor, Value::Node(n)) => {
            sources.push(n.index());
            plan.push_tensor_hole();
        }
        (_, Value::Node(_)) => {
            return Err("only tensor arguments can come from nodes".into());
        }
        (Elem::Tensor, Value::Int(_) | Value::Float(_) | Value::Bool(_)) => {
            plan.push_scalar_tensor(v)?
        }
        (Elem::Int, Value::Int(i)) => plan.push_int(*i),
        (Elem::Int, Value::Bool(b)) => plan.push_int(i64::from(*b)),
        (Elem::Float, Value::Float(f)) => plan.push_double(*f),
        (Elem::Float, Value::Int(i)) => plan.push_double(*i as f64),
        (Elem::Bool, Value::Bool(b)) => plan.push_bool(*b),
        (Elem::Scalar, Value::Int(i)) => plan.push_int(*i),
        (Elem::Scalar, Value::Float(f)) => plan.push_double(*f),
        (Elem::Scalar, Value::Bool(b)) => plan.push_bool(*b),
        (Elem::Scalar, Value::Complex(re, im)) => plan.push_complex(*re, *im),
        (Elem::ScalarType, Value::Dtype(d)) => plan.push_int(c10_scalar_type(*d)),
        (Elem::ScalarType, Value::Int(i)) => plan.push_int(*i),
        (Elem::Layout, Value::Layout(l)) => plan.push_int(c10_layout(*l)),
        (Elem::Layout, Value::Int(i)) => plan.push_int(*i),
        (Elem::MemoryFormat, Value::MemoryFormat(m)) => plan.push_int(c10_memory_format(*m)),
        (Elem::MemoryFormat, Value::Int(i)) => plan.push_int(*i),
        // Every device in the graph becomes the device it runs on.
        (Elem::Device, Value::Device(_)) => plan.push_device(&device.to_string())?,
        (Elem::Device, Value::Str(s)) => {
            s.parse::<Device>()?;
            plan.push_device(&device.to_string())?
        }
        (Elem::Str, Value::Str(s)) => plan.push_str(s)?,
        (Elem::Other(t), _) => return Err(format!("arguments of type {t} are not supported")),
        _ => return Err(format!("expected {}", arg.declared_type())),
    }
    Ok(())
}
