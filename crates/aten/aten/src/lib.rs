//! graphbug-aten: the only crate that touches libtorch.
//!
//! It runs any graph of aten ops on CPU or CUDA through libtorch's boxed dispatcher (a
//! small C++ shim; no hand-written op table), infers shapes of any op on the meta device,
//! reads and writes tensors, and compares results the way TorchDynamo's `same()` does.

pub mod accuracy;
pub mod derivatives;
pub mod device;
pub mod dtype;
pub mod dynamic;
pub mod error;
pub mod interp;
pub mod io;
pub mod memory;
pub mod meta;
pub mod reference;
pub mod shim;
/// Where a supervised process is (now `graphbug-run`'s).
pub use graphbug_run::stage;
pub mod trace;

pub use derivatives::LibtorchDerivatives;
pub use error::{AtenError, Result};
pub use graphbug_ir::schema;

/// Side effects by schema, for the IR's passes: true when the op mutates an argument (its
/// schema says so), draws random numbers, or is unknown to libtorch (kept to be safe).
pub fn schema_side_effects(op: &graphbug_ir::OpName) -> bool {
    op.is_random() || shim::Op::find(op).map_or(true, |o| o.schema.is_mutable)
}
pub use interp::{Interpreter, RtValue};

/// Op schemas from libtorch's dispatcher, for pure-Rust passes.
pub struct LibtorchSchemas;

impl schema::Schemas for LibtorchSchemas {
    fn schema(&self, op: &graphbug_ir::OpName) -> Option<std::sync::Arc<schema::Schema>> {
        shim::Op::find(op).ok().map(|o| o.schema.clone())
    }

    fn overloads(&self, namespace: &str, name: &str) -> Vec<String> {
        shim::overloads(namespace, name)
    }
}
