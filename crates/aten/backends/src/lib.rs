//! graphbug-backends: backends registered and looked up by name.
//!
//! A [`Backend`] compiles a graph into a [`CompiledFn`]; failures are classified by stage
//! and symptom ([`Failure`]). The global [`registry`] holds the built-in backends (the
//! aten-level analogues of TorchDynamo's `backends/debugging.py`), aliases, parameterised
//! names (`fault:...`, `explain:...`) and backends loaded from [`plugin`]s.

pub mod aot;
pub mod backend;
pub mod debug;
pub mod eager;
pub mod explain;
pub mod failure;
pub mod fault;
pub mod passes;
pub mod plugin;
pub mod registry;
pub mod testing;

use std::sync::Arc;

pub use backend::{
    AotPart, Backend, CompileContext, CompiledFn, ExampleInput, InnerEvent, InnerHook,
};
pub use failure::{Failure, FromAten, Stage, Symptom};
pub use registry::{list, lookup, register, register_alias, resolve, BackendInfo, RegistryError};

/// The backends every registry starts with.
fn builtin_backends() -> Vec<Arc<dyn Backend>> {
    vec![
        Arc::new(eager::Eager),
        Arc::new(debug::EagerNoexcept),
        Arc::new(debug::EagerDebug),
        Arc::new(testing::ReluCompileError),
        Arc::new(testing::ReluRuntimeError),
        Arc::new(testing::ReluAccuracyError),
        Arc::new(testing::NonLeafCompileError),
        Arc::new(aot::AotEager::new("aot_eager", aot::AotConfig::default())),
        Arc::new(aot::AotEager::new(
            "aot_eager_default_partitioner",
            aot::AotConfig::default_partitioner(),
        )),
        Arc::new(aot::AotEager::new(
            "aot_eager_decomp_partition",
            aot::AotConfig::decomp_partition(),
        )),
    ]
}

/// Parameterised name families every registry starts with.
fn builtin_factories() -> Vec<registry::FactoryEntry> {
    vec![
        registry::FactoryEntry {
            prefix: "fault:",
            build: fault::FaultBackend::from_name,
            usage: "fault:<kind>[=<amount>]@<op>[#<k>][%<percent>][+<inner>]",
            description: "injects a fault (compile, runtime, accuracy, nan, crash, hang) at an op",
            tags: &["testing"],
        },
        registry::FactoryEntry {
            prefix: "aot_eager:",
            build: aot::AotEager::from_name,
            usage: "aot_eager:<key>=<value>,...",
            description: "aot_eager with fw=/bw=<backend> (inner compilers), recompute=<op>|<op>, partitioner=default|min-cut, budget=<0..1> (bytes saved), peak=<0..1>|<bytes> (modelled peak), decompose=inductor|all|<op>|<op>",
            tags: &["debug"],
        },
        registry::FactoryEntry {
            prefix: "explain:",
            build: explain::Explain::from_name,
            usage: "explain:<inner>",
            description: "records each graph compiled (ops, histogram), then compiles with <inner>",
            tags: &["debug"],
        },
        registry::FactoryEntry {
            prefix: "limit:",
            build: passes::Limit::from_name,
            usage: "limit:<pass>=<n>,...+<inner>",
            description: "compiles with <inner>, each pass named applied at most <n> times (graphbug bisect's probe)",
            tags: &["debug"],
        },
        registry::FactoryEntry {
            prefix: "slow:",
            build: testing::Slow::from_name,
            usage: "slow:<ms>[+<inner>]",
            description: "waits <ms> milliseconds, then compiles with <inner> (default eager): an expensive compiler, for testing tools",
            tags: &["testing"],
        },
    ]
}
