//! The flow every dialect shares, without libtorch. Today: what a repro directory holds,
//! read the same way for aten graphs and XLA programs ([`dir`]: which dialect wrote it, a
//! typed view of its manifest), and the `report.html` written from it ([`report`]). The
//! rest of the flow (detect, dump, minify, repro, analyze, generic over a dialect) is to
//! move here from `graphbug-repro` and the CLI (ARCHITECTURE.md).

pub mod dir;
pub mod report;
pub mod search;

use std::path::{Path, PathBuf};

use graphbug_ir::Graph;
use graphbug_xla::program::{sniff, Kind, Program};

pub use dir::{next_commands, Dialect, DirAction, DirFailure, DirManifest};

/// Why a step of the flow could not be done; each names its file.
#[derive(Debug, thiserror::Error)]
pub enum FlowError {
    /// A file could not be read or written.
    #[error("{}: {message}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        message: String,
    },
    /// A file's content is not what graphbug wrote or reads.
    #[error("{}: {message}", path.display())]
    Bad {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        message: String,
    },
    /// What was asked cannot be done as asked; the message says what to do.
    #[error("{0}")]
    Usage(String),
    /// A search could not run, or its progress could not be kept.
    #[error("{0}")]
    Search(String),
    /// A picture could not be made.
    #[error(transparent)]
    Draw(#[from] graphbug_draw::DrawError),
}

impl FlowError {
    /// An I/O error of `path`.
    pub fn io(path: &Path, e: impl std::fmt::Display) -> FlowError {
        FlowError::Io {
            path: path.to_path_buf(),
            message: e.to_string(),
        }
    }

    /// Bad content in `path`.
    pub fn bad(path: &Path, e: impl std::fmt::Display) -> FlowError {
        FlowError::Bad {
            path: path.to_path_buf(),
            message: e.to_string(),
        }
    }
}

/// What a file holds, told by its content once: an XLA program (its form) or an aten graph.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    /// An XLA program: HLO text or proto, StableHLO text or bytecode.
    Xla(Kind),
    /// An aten graph's text (anything that is not an XLA program).
    Aten,
}

impl Source {
    /// The source `bytes` (read from `path`) are.
    pub fn of(path: &Path, bytes: &[u8]) -> Source {
        sniff(bytes, path).map_or(Source::Aten, Source::Xla)
    }

    /// Its dialect.
    pub fn dialect(self) -> Dialect {
        match self {
            Source::Xla(_) => Dialect::Xla,
            Source::Aten => Dialect::Aten,
        }
    }
}

/// The graph a file's `bytes` hold: an XLA program's (HLO's entry computation, StableHLO's
/// main function), told by content, or an aten graph's; with the program's form. Errors
/// name the file, with the line and column of bad text.
pub fn read_any_graph(path: &Path, bytes: Vec<u8>) -> Result<(Graph, Option<Kind>), FlowError> {
    match Source::of(path, &bytes) {
        Source::Xla(kind) => {
            let graph = Program::read(&bytes, kind)
                .and_then(|p| p.graph())
                .map_err(|e| FlowError::bad(path, e))?;
            Ok((graph, Some(kind)))
        }
        Source::Aten => {
            let text =
                String::from_utf8(bytes).map_err(|_| FlowError::bad(path, "not UTF-8 text"))?;
            let graph = graphbug_ir::parse_graph(&text).map_err(|e| FlowError::bad(path, e))?;
            Ok((graph, None))
        }
    }
}
