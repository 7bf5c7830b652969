//! Running what may crash or hang, for every dialect graphbug handles and without
//! libtorch: child processes that die with graphbug and end as their engines expect
//! ([`process`]), supervised re-runs of graphbug's own command line, scratch directories
//! no killed run leaves behind ([`scratch`]), the time limits every wait is bounded by
//! ([`limits`]), the stage a supervised child reports ([`stage`]), how a failure is
//! classified ([`failure`]: stage and symptom), the progress display of long work
//! ([`progress`]), and how a test that cannot run here says so ([`not_run`]).

pub mod failure;
pub mod limits;
pub mod memory;
pub mod not_run;
pub mod process;
pub mod progress;
pub mod scratch;
pub mod stage;

pub use failure::{kind_text, parse_kind, Failure, Stage, Symptom};
pub use not_run::not_run_here;

/// The graphbug workspace this build comes from: where `cargo xtask setup` put the
/// virtualenv (`.venv`, with JAX and the CPU PJRT plugin) and libtorch.
pub fn workspace_root() -> std::path::PathBuf {
    // This crate is crates/process/run.
    let here = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    here.ancestors()
        .nth(3)
        .map_or_else(|| here.to_path_buf(), std::path::Path::to_path_buf)
}
