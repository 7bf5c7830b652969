//! graphbug-repro: what it takes to reproduce a failure outside the model.
//!
//! Reference values of the original run ([`values`]), checkers that compile and run
//! candidates with a backend ([`checkers`]) or an external command ([`command`]), worker
//! processes that survive crashes and hangs ([`isolate`]), and repro directories written
//! atomically ([`save`]).

pub mod checkers;
pub mod command;
pub mod error;
pub mod isolate;
pub mod progress;
pub mod save;
pub mod values;

pub use checkers::{BackendChecker, CheckKind};
pub use error::{ReproError, Result};
pub use values::ReferenceValues;
