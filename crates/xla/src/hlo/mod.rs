//! HLO: XLA's own program text.

pub mod shape;
pub mod text;
