//! The error type of the IR crate.

use std::fmt;

/// Everything that can go wrong in the IR crate.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum IrError {
    /// Graph text that cannot be read.
    #[error(transparent)]
    Parse(#[from] ParseError),
    /// A graph file that cannot be read: the file, and why (with the line and column of
    /// bad text).
    #[error("{path}: {message}")]
    File {
        /// The file.
        path: String,
        /// Why it cannot be read.
        message: String,
    },
    /// A node refers to a value defined after it.
    #[error("node `{node}` uses `{input}` before its definition")]
    UseBeforeDefinition {
        /// The node whose argument is the problem.
        node: String,
        /// The name of the value used too early.
        input: String,
    },
    /// A node refers to a node id that does not exist.
    #[error("node `{node}` refers to unknown node #{id}")]
    UnknownNode {
        /// The node (or `output`) whose argument is the problem.
        node: String,
        /// The dangling id.
        id: u32,
    },
    /// Two nodes share a name.
    #[error("duplicate node name `{name}`")]
    DuplicateName {
        /// The shared name.
        name: String,
    },
    /// A node name that is not a Python identifier, or one the printed code relies on.
    #[error(
        "`{name}` cannot name a node of a {dialect:?} graph (an aten graph's names are Python identifiers its printed code does not use)"
    )]
    InvalidName {
        /// The offending name.
        name: String,
        /// The graph's dialect, whose names it breaks.
        dialect: crate::graph::Dialect,
    },
    /// The graph has no output.
    #[error("graph `{graph}` has no output")]
    MissingOutput {
        /// The graph's class name.
        graph: String,
    },
    /// Any other structural problem, naming the node.
    #[error("node `{node}`: {message}")]
    InvalidNode {
        /// The node at fault.
        node: String,
        /// What is wrong with it.
        message: String,
    },
    /// The nodes cannot be ordered because they depend on each other.
    #[error("the graph has a cycle through node `{node}`")]
    Cycle {
        /// A node on the cycle.
        node: String,
    },
    /// A subgraph cannot be extracted from the given inputs.
    #[error("cannot extract subgraph: {0}")]
    Extract(String),
    /// A graph could not be serialized or deserialized as JSON.
    #[error("graph JSON: {0}")]
    Json(String),
}

/// A syntax or resolution error in graph text, with its position and the offending line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    /// 1-based line number.
    pub line: usize,
    /// 1-based column, counted in characters.
    pub column: usize,
    /// What went wrong, naming the offending text.
    pub message: String,
    /// The source line the error is on.
    pub source_line: String,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}: {}", self.line, self.column, self.message)?;
        if !self.source_line.is_empty() {
            // Show a window of the line around the column, so long lines stay readable.
            let col0 = self.column.saturating_sub(1);
            let start = col0.saturating_sub(60);
            let prefix = if start > 0 { "..." } else { "" };
            let shown: String = self.source_line.chars().skip(start).take(120).collect();
            let caret = prefix.len() + (col0 - start).min(shown.chars().count());
            write!(f, "\n  | {prefix}{shown}\n  | {}^", " ".repeat(caret))?;
        }
        Ok(())
    }
}

impl std::error::Error for ParseError {}
