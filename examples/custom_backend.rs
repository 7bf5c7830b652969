//! A custom backend in ten lines: implement `Backend`, register it, use it by name.
//!
//! `cargo run --example custom_backend`

use std::sync::Arc;

use graphbug::aten::io::random_tensors;
use graphbug::backends::eager::EagerFn;
use graphbug::backends::{
    lookup, register, Backend, CompileContext, CompiledFn, ExampleInput, Failure,
};
use graphbug::ir::{parse_graph, Graph};

/// Prints the size of each graph it compiles, then runs it eagerly.
struct LoggingEager;

#[rustfmt::skip]
impl Backend for LoggingEager {
    fn name(&self) -> &str { "logging_eager" }
    fn description(&self) -> &str { "prints each graph's size, then runs it eagerly" }
    fn compile(&self, g: &Graph, _: &[ExampleInput], ctx: &CompileContext) -> Result<Box<dyn CompiledFn>, Failure> {
        println!("{}: compiling a graph of {} nodes and {} inputs", self.name(), g.num_call_function_nodes(), g.placeholders().len());
        Ok(Box::new(EagerFn::new(self.name(), g, ctx)?))
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    register(Arc::new(LoggingEager))?;

    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/mlp/forward.py");
    let graph = parse_graph(&std::fs::read_to_string(path)?)?;
    let metas: Vec<_> = graph
        .placeholders()
        .iter()
        .filter_map(|&i| graph.node(i).meta.tensor().cloned())
        .collect();
    let inputs = random_tensors(&metas, 0, tch::Device::Cpu)?;
    let examples: Vec<ExampleInput> = metas.into_iter().map(ExampleInput::new).collect();

    let backend = lookup("logging_eager")?;
    let outputs = backend
        .compile(&graph, &examples, &CompileContext::default())?
        .run(&inputs)?;
    println!(
        "{} output(s), the first of shape {:?}",
        outputs.len(),
        outputs[0].as_ref().map(|t| t.size())
    );
    Ok(())
}
