//! HLO: XLA's own program text.

pub mod check;
pub mod graph;
pub mod proto;
pub mod shape;
pub mod text;
