//! graphbug-autodiff: what AOTAutograd does before partitioning, over graphbug's IR.
//!
//! [`functionalize`] removes mutation: in-place ops become their out-of-place forms, writes
//! into views become scatters into their bases, and mutated graph inputs become extra
//! outputs. [`joint_graph`] builds the joint forward/backward graph AOTAutograd traces,
//! with derivative rules written in Rust after PyTorch's derivatives.yaml. Pure Rust: op
//! schemas come through [`graphbug_ir::schema::Schemas`].

pub mod error;
pub mod functionalize;
pub mod joint;
mod rules;

pub use error::AutodiffError;
pub use functionalize::{functionalize, Functionalized};
pub use joint::{joint_graph, Joint};
