//! graphbug: debug backends for ML graph compilers.
//!
//! This facade re-exports the workspace crates; the `graphbug` binary is its CLI.

pub use graphbug_ir as ir;
