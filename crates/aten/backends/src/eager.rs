//! `eager`: runs the graph op by op in libtorch, as PyTorch's eager backend does.

use crate::failure::FromAten;
use graphbug_aten::Interpreter;
use graphbug_ir::Graph;
use tch::Tensor;

use crate::backend::{Backend, CompileContext, CompiledFn, ExampleInput};
use crate::failure::{Failure, Stage};

/// The `eager` backend: no compilation, every op through libtorch's dispatcher.
pub struct Eager;

/// An eager-compiled graph: the interpreter, reporting failures as the named backend.
pub struct EagerFn {
    backend: String,
    interp: Interpreter,
}

impl EagerFn {
    /// Prepares `graph` for eager runs, reporting failures as `backend`.
    pub fn new(backend: &str, graph: &Graph, ctx: &CompileContext) -> Result<EagerFn, Failure> {
        let interp = Interpreter::new(graph, &ctx.device, &ctx.constants)
            .map_err(|e| Failure::from_aten(backend, Stage::Compile, &e))?
            .with_trace(ctx.trace.clone());
        Ok(EagerFn {
            backend: backend.to_string(),
            interp,
        })
    }
}

impl CompiledFn for EagerFn {
    fn run(&mut self, inputs: &[Tensor]) -> Result<Vec<Option<Tensor>>, Failure> {
        self.interp
            .run(inputs)
            .map_err(|e| Failure::from_aten(&self.backend, Stage::Runtime, &e))
    }
}

impl Backend for Eager {
    fn name(&self) -> &str {
        "eager"
    }

    fn description(&self) -> &str {
        "runs every op eagerly through libtorch (the reference)"
    }

    fn compile(
        &self,
        graph: &Graph,
        _example_inputs: &[ExampleInput],
        ctx: &CompileContext,
    ) -> Result<Box<dyn CompiledFn>, Failure> {
        Ok(Box::new(EagerFn::new(self.name(), graph, ctx)?))
    }
}
