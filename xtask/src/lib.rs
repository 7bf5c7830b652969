//! Library side of `cargo xtask`: the conformance runner, shared with the integration test
//! that runs the CI subset (`tests/conformance.rs`), the benchmark summary, the reading of
//! `cargo test`'s output for `cargo xtask test`'s summary, the GPU bundle of XLA fixtures,
//! guarded child processes, and the examples of the commands' help.

pub mod aten_bundle;
pub mod bench;
pub mod bundle;
pub mod cargo_test;
pub mod conformance;
pub mod help;
pub mod process;
