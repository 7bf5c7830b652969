//! Failures of backends: what `graphbug-run` classifies (stage, symptom), and the failure a
//! libtorch error makes.

use graphbug_aten::AtenError;

pub use graphbug_run::failure::{Failure, Stage, Symptom};

/// Failures made from libtorch errors.
pub trait FromAten {
    /// An error from libtorch at `stage`, keeping its node and op.
    fn from_aten(backend: &str, stage: Stage, err: &AtenError) -> Self;
}

impl FromAten for Failure {
    fn from_aten(backend: &str, stage: Stage, err: &AtenError) -> Self {
        Failure {
            node: err.node().map(str::to_string),
            op: err.op().map(str::to_string),
            ..Failure::new(backend, stage, Symptom::Error, err.detail())
        }
    }
}
