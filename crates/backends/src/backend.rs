//! The backend interface: compile a graph into a function that runs it.

use std::collections::HashMap;

use graphbug_ir::{Device, Graph, TensorMeta};
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

/// Everything a backend gets besides the graph and its example inputs.
#[derive(Debug, Default)]
pub struct CompileContext {
    /// Where the compiled function runs.
    pub device: Device,
    /// Tensors of the graph's `self.<name>` constants.
    pub constants: HashMap<String, Tensor>,
}

/// A compiled graph, ready to run.
pub trait CompiledFn: Send {
    /// Runs on inputs (on the compile device) and returns the graph's outputs.
    fn run(&mut self, inputs: &[Tensor]) -> Result<Vec<Option<Tensor>>, Failure>;
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

    /// Compiles `graph` for inputs like `example_inputs`.
    fn compile(
        &self,
        graph: &Graph,
        example_inputs: &[ExampleInput],
        ctx: &CompileContext,
    ) -> Result<Box<dyn CompiledFn>, Failure>;
}
