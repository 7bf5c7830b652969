//! graphbug-ir: an FX-like graph of aten ops, with PyTorch's `print_readable()` text format.
//!
//! A [`Graph`] holds nodes in program order (placeholders, op calls, getitems, constants)
//! and the values it returns. [`parse_graph`] reads the text PyTorch prints (flat and
//! pytree forms) and [`print_graph`] writes it back byte for byte, liveness tails included.
//! [`GraphBuilder`] builds graphs from Rust; [`passes`] holds DCE, CSE and subgraph
//! extraction. Nothing here needs libtorch.

pub mod bench;
pub mod builder;
pub mod error;
pub mod fault;
pub mod graph;
pub mod lower;
pub mod models;
pub mod naming;
pub mod op_tags;
pub mod passes;
pub mod schema;
pub mod specialize;
pub mod sym;
pub mod text;
pub mod types;
pub mod value;

pub use builder::{GraphBuilder, MultiRef, TensorRef};
pub use error::{IrError, ParseError};
pub use graph::{Dialect, Graph, Node, NodeId, NodeKind, NodeName, Users};
pub use naming::Namespace;
pub use sym::{Bindings, SymExpr};
pub use text::{parse_graph, print_graph, print_graph_as, read_graph_file};
pub use types::{Device, Dtype, Layout, MemoryFormat, Meta, OpName, OpNameParts, Tag, TensorMeta};
pub use value::Value;

impl std::str::FromStr for Graph {
    type Err = IrError;

    /// Parses graph text; see [`parse_graph`].
    fn from_str(s: &str) -> Result<Graph, IrError> {
        parse_graph(s)
    }
}

impl std::fmt::Display for Graph {
    /// Prints the canonical text; see [`print_graph`].
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&print_graph(self))
    }
}
