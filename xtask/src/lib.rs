//! Library side of `cargo xtask`: the conformance runner, shared with the integration test
//! that runs the CI subset (`tests/conformance.rs`).

pub mod conformance;
