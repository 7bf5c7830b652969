//! The error type of the repro crate.

use graphbug_aten::AtenError;
use graphbug_backends::{Failure, RegistryError};
use graphbug_ir::IrError;

/// Everything that can go wrong while checking, isolating or saving repros.
#[derive(Debug, thiserror::Error)]
pub enum ReproError {
    /// A libtorch-side error.
    #[error(transparent)]
    Aten(#[from] AtenError),
    /// A graph error.
    #[error(transparent)]
    Ir(#[from] IrError),
    /// A backend name that does not resolve.
    #[error(transparent)]
    Registry(#[from] RegistryError),
    /// A backend failure where none was expected (e.g. in a reference run).
    #[error(transparent)]
    Failure(#[from] Failure),
    /// A file that cannot be read or written.
    #[error("{path}: {message}")]
    Io {
        /// The file or directory.
        path: String,
        /// What went wrong.
        message: String,
    },
    /// Anything else, explained.
    #[error("{0}")]
    Other(String),
}

impl From<graphbug_run::scratch::ScratchError> for ReproError {
    fn from(e: graphbug_run::scratch::ScratchError) -> Self {
        ReproError::Io {
            path: e.path,
            message: e.message,
        }
    }
}

impl ReproError {
    /// An I/O error about `path`.
    pub fn io(path: &std::path::Path, err: impl std::fmt::Display) -> Self {
        ReproError::Io {
            path: path.display().to_string(),
            message: err.to_string(),
        }
    }
}

/// Result alias for the repro crate.
pub type Result<T, E = ReproError> = std::result::Result<T, E>;
