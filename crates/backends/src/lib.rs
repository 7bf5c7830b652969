//! graphbug-backends: backends registered and looked up by name.
//!
//! A [`Backend`] compiles a graph into a [`CompiledFn`]; failures are classified by stage
//! and symptom ([`Failure`]). The global [`registry`] starts with the built-in backends.

pub mod backend;
pub mod eager;
pub mod failure;
pub mod registry;

use std::sync::Arc;

pub use backend::{Backend, CompileContext, CompiledFn, ExampleInput};
pub use failure::{Failure, Stage, Symptom};
pub use registry::{list, lookup, register, RegistryError};

/// The backends every registry starts with.
fn builtin_backends() -> Vec<Arc<dyn Backend>> {
    vec![Arc::new(eager::Eager)]
}
