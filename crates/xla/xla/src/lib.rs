//! XLA programs as graphbug reads them: HLO text (and protos) and StableHLO, printed back
//! as written, checked, and mapped onto graphbug's graph model so that the minifier, the
//! checks and the repro layout serve them as they serve aten graphs. Nothing here needs
//! libtorch: JAX and TensorFlow users have none.

pub mod execute;
pub mod flow;
pub mod hlo;
pub mod iree;
pub mod minify;
pub mod passes;
pub mod program;
pub mod repro;
pub mod rewrite;
pub mod share;
pub mod stablehlo;
