//! graphbug-autodiff: what AOTAutograd does before partitioning, over graphbug's IR.
//!
//! [`functionalize()`] removes mutation: in-place ops become their out-of-place forms, writes
//! into views become scatters into their bases, and mutated graph inputs become extra
//! outputs. [`joint_graph`] builds the joint forward/backward graph AOTAutograd traces,
//! with derivative rules written in Rust after PyTorch's derivatives.yaml, and for every other
//! op the backward a [`Derivatives`] provider gives (graphbug-aten records libtorch's). Pure Rust: op
//! schemas come through [`graphbug_ir::schema::Schemas`]. [`decompose()`] turns composite
//! aten ops into primitive ones, as PyTorch's `aot_eager_decomp_partition` does before
//! partitioning.

pub mod decompose;
pub mod derivatives;
pub mod error;
pub mod functionalize;
pub mod joint;
mod rules;

pub use decompose::{decompose, decompose_with, DecompositionSet};
pub use derivatives::{Backward, Derivatives, ForwardCall, RulesOnly, Source};
pub use error::AutodiffError;
pub use functionalize::{functionalize, Functionalized};
pub use joint::{floating_inputs, gpt_joint, joint_graph, joint_graph_with, Joint};
