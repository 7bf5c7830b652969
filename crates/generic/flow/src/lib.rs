//! The flow every dialect shares, without libtorch and without any dialect's crate: what
//! a dialect supplies ([`dialect`], with [`minify::Minifiable`] and
//! [`repro::Reproducible`]), `minify`, `repro` and `run` written once over it, a repro
//! directory read alike whichever dialect wrote it ([`dir`]), a compiler's dump directory
//! checked module by module ([`dump`]), and the `report.html` written from it
//! ([`report`]).

pub mod bisect;
pub mod dialect;
pub mod dir;
pub mod dump;
pub mod minify;
pub mod report;
pub mod repro;
pub mod run;
pub mod search;

use std::path::{Path, PathBuf};

pub use dialect::{next_commands, Dialect, DialectCommands};
pub use dir::{DirAction, DirFailure, DirManifest, MANIFEST_FILE};

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
    /// A dialect could not read a file; the message names it.
    #[error("{0}")]
    Read(String),
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

/// Re-runs this command in a child process bounded by `timeout` (default
/// [`graphbug_run::limits::RUN_DEFAULT`]), unless this is that child or `in_process`:
/// `Some(exit code)` in the parent. A child that crashes (a libtorch abort or segfault) or
/// hangs is reported with `lost(run, limit)`; otherwise its exit code is passed on.
pub fn supervise(
    timeout: Option<std::time::Duration>,
    in_process: bool,
    lost: impl FnOnce(&graphbug_run::process::Supervised, std::time::Duration) -> String,
) -> anyhow::Result<Option<std::process::ExitCode>> {
    if graphbug_run::process::is_supervised() || in_process {
        return Ok(None);
    }
    let limit = timeout.unwrap_or(graphbug_run::limits::RUN_DEFAULT);
    let scratch = graphbug_run::scratch::Scratch::new("supervise")?;
    rerun_bounded(&scratch, limit, |run| {
        eprintln!("{}", lost(run, limit));
        Ok(std::process::ExitCode::FAILURE)
    })
    .map(Some)
}

/// Re-runs this command in a child bounded by `limit` (its stage file in `scratch`): the
/// child's exit code is passed on; a child that crashed or hung has none, and `lost`
/// answers for it.
pub fn rerun_bounded(
    scratch: &graphbug_run::scratch::Scratch,
    limit: std::time::Duration,
    lost: impl FnOnce(&graphbug_run::process::Supervised) -> anyhow::Result<std::process::ExitCode>,
) -> anyhow::Result<std::process::ExitCode> {
    let run = graphbug_run::process::rerun_self(&[], limit, scratch.path())?;
    if let graphbug_run::process::Ended::Exited(status) = run.ended {
        if let Some(code) = status.code() {
            return Ok(std::process::ExitCode::from(code.clamp(0, 255) as u8));
        }
    }
    lost(&run)
}
