//! graphbug-repro: what it takes to reproduce a failure outside the model.
//!
//! [`compile`] wraps a backend with TorchDynamo-style repro levels; a failure becomes a
//! repro directory ([`case`]: graph, inputs, manifest, a standalone Rust program and a
//! PyTorch script from [`codegen`]) that [`actions`] can run, minify and analyze.
//! Minification uses reference values of the original run ([`values`]), checkers that
//! compile and run candidates with a backend ([`checkers`]) or an external command
//! ([`command`]), and worker processes that survive crashes and hangs ([`isolate`]).
//! Every wait on a backend is bounded ([`limits`]); every child process dies with its
//! parent ([`process`]) and every scratch directory is cleaned up, even after a kill
//! ([`scratch`]).

pub mod actions;
pub mod bisect;
pub mod case;
pub mod checkers;
pub mod codegen;
pub mod command;
pub mod compile;
pub mod error;
pub mod flow;
pub mod inputs;
pub mod isolate;
pub use graphbug_run::limits;
pub mod manifest;
pub mod meta;
pub mod minify;
pub use graphbug_run::process;
pub mod progress;
pub mod run;
pub mod save;
pub mod training;
pub use graphbug_run::scratch;
pub mod values;

pub use checkers::{BackendChecker, CheckKind};
pub use error::{ReproError, Result};
pub use values::ReferenceValues;
