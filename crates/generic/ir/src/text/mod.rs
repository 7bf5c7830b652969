//! PyTorch's `print_readable()` text format: parser and printer.

mod lexer;
mod parser;
mod printer;

pub use parser::{parse_graph, read_graph_file};
pub use printer::{print_graph, print_graph_as};
