//! The backend interface: compile a graph into a function that runs it.

use std::collections::HashMap;

use std::sync::Arc;

use graphbug_aten::trace::TraceSink;

use crate::passes::PassLimits;
use graphbug_ir::{Device, Graph, Meta, TensorMeta};
use tch::Tensor;

use crate::failure::Failure;

/// What a backend is told about one example input.
#[derive(Clone, Debug, PartialEq)]
pub struct ExampleInput {
    /// Shape and dtype.
    pub meta: TensorMeta,
    /// Whether it requires grad.
    pub requires_grad: bool,
    /// Whether it is a leaf (not produced by an autograd-recorded op).
    pub is_leaf: bool,
}

impl ExampleInput {
    /// A leaf input that does not require grad.
    pub fn new(meta: TensorMeta) -> Self {
        ExampleInput {
            meta,
            requires_grad: false,
            is_leaf: true,
        }
    }
}

/// `graph` with its placeholders annotated from the example inputs (when they match one
/// to one), so meta inference starts from what will really run.
pub(crate) fn with_example_metas(graph: &Graph, example_inputs: &[ExampleInput]) -> Graph {
    let mut g = graph.clone();
    let placeholders = g.placeholders();
    if placeholders.len() == example_inputs.len() {
        for (id, ex) in placeholders.iter().zip(example_inputs) {
            g.nodes[id.index()].meta = Meta::Tensor(ex.meta.clone());
        }
    }
    g
}

/// Which graph of an AOT pipeline an inner compiler is handling.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AotPart {
    /// The forward graph.
    Forward,
    /// The backward graph.
    Backward,
}

impl std::fmt::Display for AotPart {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            AotPart::Forward => "forward",
            AotPart::Backward => "backward",
        })
    }
}

/// What an AOT pipeline tells its hook about an inner compiler (after-AOT repros).
pub struct InnerEvent<'a> {
    /// Forward or backward.
    pub part: AotPart,
    /// The graph the inner compiler gets.
    pub graph: &'a Graph,
    /// Its real inputs (primals; or saved values then tangents).
    pub inputs: &'a [Tensor],
    /// The inner compiler's name.
    pub backend: &'a str,
    /// The failure, or `None` just before compiling.
    pub failure: Option<&'a Failure>,
}

/// Called by AOT pipelines before each inner compile and on each inner failure.
pub type InnerHook = std::sync::Arc<dyn Fn(&InnerEvent<'_>) + Send + Sync>;

/// Everything a backend gets besides the graph and its example inputs.
#[derive(Default)]
pub struct CompileContext {
    /// Where the compiled function runs.
    pub device: Device,
    /// Tensors of the graph's `self.<name>` constants.
    pub constants: HashMap<String, Tensor>,
    /// For AOT pipelines: told about inner compilers (repros after AOT).
    pub inner_hook: Option<InnerHook>,
    /// For AOT pipelines: check each inner graph's outputs against eager (float64
    /// `same()` rules); a mismatch is an accuracy failure of that graph.
    pub check_inner_accuracy: bool,
    /// Where backends that run graphs node by node record each node's value (`graphbug
    /// run --trace`); pipelines pass it on to their inner compilers, one part per graph.
    pub trace: Option<TraceSink>,
    /// Limits on the applications of the backend's passes (`limit:`, `graphbug bisect`);
    /// pipelines pass them on to their inner compilers.
    pub passes: Option<Arc<PassLimits>>,
}

impl CompileContext {
    /// A context like this one, sharing its constants (not copying them).
    pub fn share(&self) -> CompileContext {
        CompileContext {
            device: self.device.clone(),
            constants: self
                .constants
                .iter()
                .map(|(k, t)| (k.clone(), t.shallow_clone()))
                .collect(),
            inner_hook: self.inner_hook.clone(),
            check_inner_accuracy: self.check_inner_accuracy,
            trace: self.trace.clone(),
            passes: self.passes.clone(),
        }
    }

    /// True when pass `pass` may apply to `node` (always, without limits); counts the
    /// application.
    pub fn allow(&self, pass: &str, node: &str) -> bool {
        self.passes.as_ref().is_none_or(|p| p.allow(pass, node))
    }
}

impl std::fmt::Debug for CompileContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CompileContext")
            .field("device", &self.device)
            .field("constants", &self.constants.keys().collect::<Vec<_>>())
            .field("inner_hook", &self.inner_hook.is_some())
            .field("check_inner_accuracy", &self.check_inner_accuracy)
            .field("trace", &self.trace)
            .field("passes", &self.passes)
            .finish()
    }
}

/// A compiled graph, ready to run.
pub trait CompiledFn: Send {
    /// Runs on inputs (on the compile device) and returns the graph's outputs. For a
    /// training pipeline this is the forward, which keeps what the backward needs.
    fn run(&mut self, inputs: &[Tensor]) -> Result<Vec<Option<Tensor>>, Failure>;

    /// The forward of a training pipeline (AOTAutograd's name for `run`): outputs, with
    /// the saved values kept for `backward`.
    fn forward(&mut self, inputs: &[Tensor]) -> Result<Vec<Option<Tensor>>, Failure> {
        self.run(inputs)
    }

    /// The backward of the last `run`: gradients of the outputs in, one gradient per input
    /// out (`None` where an input gets none). Only training pipelines have one.
    fn backward(
        &mut self,
        _grad_outputs: &[Option<Tensor>],
    ) -> Result<Vec<Option<Tensor>>, Failure> {
        Err(Failure::new(
            "backward",
            crate::failure::Stage::Runtime,
            crate::failure::Symptom::Error,
            "this compiled function has no backward (compile with an AOT pipeline such as aot_eager)",
        ))
    }
}

/// A compiler of graphs, registered by name.
pub trait Backend: Send + Sync {
    /// The registry name.
    fn name(&self) -> &str;

    /// A one-line description.
    fn description(&self) -> &str;

    /// Tags such as `debug` or `testing`; tagged backends are hidden from default listings.
    fn tags(&self) -> &[&str] {
        &[]
    }

    /// The backend this one wraps (`explain:`, `fault:`, `slow:`, `limit:` around another),
    /// if it is a wrapper. Whatever a wrapper does not override of `delegates_faults`,
    /// `passes` and `validate` is its inner backend's: a wrapper changes what it says it
    /// changes and forwards the rest, with no forwarding written by hand.
    fn inner(&self) -> Option<&dyn Backend> {
        None
    }

    /// True for pipelines that compile their graphs with inner backends (AOT), and for
    /// wrappers around one: a fault from `GRAPHBUG_INJECT_FAULT` then goes to those inner
    /// compilers, not around the pipeline, and a repro of the graph is a training step.
    fn delegates_faults(&self) -> bool {
        self.inner().is_some_and(|b| b.delegates_faults())
    }

    /// The passes this backend can limit for `graphbug bisect`, in the order they run;
    /// each asks [`CompileContext::allow`] before every application. The default: a
    /// wrapper's inner backend's, otherwise none (the backend is bisected as one stage).
    fn passes(&self) -> Vec<String> {
        self.inner().map(|b| b.passes()).unwrap_or_default()
    }

    /// Checks, before any work starts, that the backend's own parameters make sense for
    /// `graph` (a fault spec must name one of its nodes); wrappers check their inner
    /// backends too. The error says what is wrong and what the graph has instead. The
    /// default accepts every graph a wrapper's inner backend accepts.
    fn validate(&self, graph: &Graph, example_inputs: &[ExampleInput]) -> Result<(), String> {
        match self.inner() {
            Some(b) => b.validate(graph, example_inputs),
            None => Ok(()),
        }
    }

    /// Compiles `graph` for inputs like `example_inputs`.
    fn compile(
        &self,
        graph: &Graph,
        example_inputs: &[ExampleInput],
        ctx: &CompileContext,
    ) -> Result<Box<dyn CompiledFn>, Failure>;
}
