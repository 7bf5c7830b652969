//! graphbug-partition: split a joint forward/backward graph into a forward graph (which
//! also returns the values the backward needs) and a backward graph, as AOTAutograd's
//! partitioners do. Pure Rust.

pub mod default;

pub use default::{
    default_partition, default_partition_with, Partition, PartitionError, PartitionReport,
};
