//! graphbug: debug backends for ML graph compilers.
//!
//! This facade re-exports the workspace crates; the `graphbug` binary is its CLI.

pub use graphbug_aten as aten;
pub use graphbug_autodiff as autodiff;
pub use graphbug_backends as backends;
pub use graphbug_ir as ir;
pub use graphbug_minifier as minifier;
pub use graphbug_partition as partition;
pub use graphbug_repro as repro;
