//! An example graphbug plugin: a shared library that registers a backend by name.
//!
//! `plugin_cse_eager` merges common subexpressions and drops dead code (ops that mutate
//! or draw random numbers are kept, as their schemas say), then runs the graph eagerly.
//! Build it with `cargo build -p graphbug-plugin-example` and load it with
//! `graphbug --plugin target/debug/libgraphbug_plugin_example.so run G.py --backend plugin_cse_eager`.

use std::sync::Arc;

use graphbug_aten::schema_side_effects;
use graphbug_backends::eager::EagerFn;
use graphbug_backends::{
    export_plugin, Backend, CompileContext, CompiledFn, ExampleInput, Failure,
};
use graphbug_ir::passes::{eliminate_common_subexpressions, eliminate_dead_code};
use graphbug_ir::Graph;

/// Eager after common-subexpression and dead-code elimination.
struct CseEager;

impl Backend for CseEager {
    fn name(&self) -> &str {
        "plugin_cse_eager"
    }

    fn description(&self) -> &str {
        "(plugin) CSE + dead-code elimination, then eager"
    }

    fn compile(
        &self,
        graph: &Graph,
        _: &[ExampleInput],
        ctx: &CompileContext,
    ) -> Result<Box<dyn CompiledFn>, Failure> {
        let cleaned = eliminate_dead_code(
            &eliminate_common_subexpressions(graph, &schema_side_effects),
            &schema_side_effects,
        );
        Ok(Box::new(EagerFn::new(self.name(), &cleaned, ctx)?))
    }
}

export_plugin!(|registrar| registrar.add(Arc::new(CseEager)));
