//! Library side of `cargo xtask`: the conformance runner, shared with the integration test
//! that runs the CI subset (`tests/conformance.rs`), the benchmark summary, the GPU bundle
//! of XLA fixtures, and guarded child processes.

pub mod bench;
pub mod bundle;
pub mod conformance;
pub mod process;
