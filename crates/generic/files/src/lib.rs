//! The files graphbug reads and writes, without libtorch, for every dialect it handles:
//!
//! - tensor files, `.safetensors` and `.npz`, read into and written from [`HostTensor`]s
//!   (a dtype, a shape and little-endian C-order bytes): libtorch's tensors, PJRT's
//!   buffers and the conformance suite's cases all go through them;
//! - durable atomic writes ([`write_file_atomically`]): a file appears whole or not at all,
//!   and survives a power cut once written (synced, then renamed, then its directory
//!   synced);
//! - the sweep of what a killed writer left next to its target ([`sweep_stale_siblings`]),
//!   telling a live writer from a dead one by its process ([`alive_since`]).

mod atomic;
mod random;
mod tensors;

pub use atomic::{
    alive_since, replace_dir_atomically, sibling, sweep_stale_siblings, sync_dir,
    write_file_atomically,
};
pub use random::random_tensors;
pub use tensors::{name_list, read, write, Format, HostTensor, TensorFileError, STRIDES_METADATA};
