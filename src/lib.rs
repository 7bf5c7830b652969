//! graphbug: debug backends for ML graph compilers.
//!
//! This facade re-exports the workspace crates; the `graphbug` binary is its CLI. Without
//! the `torch` feature (on by default) it has none of the crates that need libtorch.

pub use graphbug_accuracy as accuracy;
#[cfg(feature = "torch")]
pub use graphbug_aten as aten;
pub use graphbug_aten_dialect as aten_dialect;
pub use graphbug_autodiff as autodiff;
#[cfg(feature = "torch")]
pub use graphbug_backends as backends;
pub use graphbug_draw as draw;
pub use graphbug_files as files;
pub use graphbug_flow as flow;
pub use graphbug_ir as ir;
pub use graphbug_minifier as minifier;
pub use graphbug_partition as partition;
pub use graphbug_pjrt as pjrt;
#[cfg(feature = "torch")]
pub use graphbug_repro as repro;
pub use graphbug_run as run;
pub use graphbug_xla as xla;

/// The Rust blocks of the documentation, as doctests (`cargo test --doc`); `cargo xtask docs`
/// runs the other blocks and checks that every file with a Rust block is listed here.
#[cfg(doctest)]
pub mod docs {
    #[doc = include_str!("../docs/src/graph-format.md")]
    pub struct GraphFormat;
    // Its example registers a backend that runs through libtorch.
    #[cfg(feature = "torch")]
    #[doc = include_str!("../docs/src/backends.md")]
    pub struct Backends;
}
