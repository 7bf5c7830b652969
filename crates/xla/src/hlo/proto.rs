//! HLO text ⇄ `xla.HloModuleProto`, the form PJRT plugins take HLO in (program format
//! `hlo`) and XLA dumps and torch_xla hand out (`*.hlo.pb`).

mod literal;
pub mod schema;
mod shapes;
pub mod wire;
