//! The error type of the aten crate.

use graphbug_ir::IrError;

/// Everything that can go wrong while running graphs through libtorch.
#[derive(Debug, thiserror::Error)]
pub enum AtenError {
    /// The op is not registered with libtorch's dispatcher.
    #[error("unknown op `{op}`{}: {message}", node.as_ref().map(|n| format!(" (node `{n}`)")).unwrap_or_default())]
    UnknownOp {
        /// The op as written, e.g. `aten::relu.default`.
        op: String,
        /// The node calling it, when known.
        node: Option<String>,
        /// libtorch's explanation.
        message: String,
    },
    /// A node's arguments do not fit its op's schema.
    #[error("node `{node}` ({op}): {message}")]
    BadArguments {
        /// The node at fault.
        node: String,
        /// Its op.
        op: String,
        /// What does not fit.
        message: String,
    },
    /// libtorch raised an error while running a node.
    #[error("node `{node}` ({op}) failed on inputs {inputs}: {message}")]
    OpFailed {
        /// The node that failed.
        node: String,
        /// Its op.
        op: String,
        /// Shapes and dtypes of its tensor arguments, e.g. `[f32[2, 3], i64[]]`.
        inputs: String,
        /// libtorch's message.
        message: String,
    },
    /// A node ran but broke a rule a checking run enforces (schema, shapes).
    #[error("node `{node}` ({op}) failed a check: {message}")]
    Check {
        /// The node.
        node: String,
        /// Its op.
        op: String,
        /// Which rule, and how it was broken.
        message: String,
    },
    /// Graph inputs that do not match the graph's placeholders.
    #[error("bad graph inputs: {0}")]
    BadInputs(String),
    /// A tensor file that cannot be read or written.
    #[error("tensor file {path}: {message}")]
    TensorFile {
        /// The file.
        path: String,
        /// What went wrong.
        message: String,
    },
    /// A device that is unknown or not available.
    #[error("device: {0}")]
    Device(String),
    /// An error from the graph IR.
    #[error(transparent)]
    Ir(#[from] IrError),
    /// An error reported by tch outside any node.
    #[error("libtorch: {0}")]
    Torch(#[from] tch::TchError),
    /// A numeric trace that cannot be written, read or made (the message names the file).
    #[error("{0}")]
    Trace(String),
}

impl AtenError {
    /// The node the error is about, if any.
    pub fn node(&self) -> Option<&str> {
        match self {
            AtenError::UnknownOp { node, .. } => node.as_deref(),
            AtenError::BadArguments { node, .. }
            | AtenError::OpFailed { node, .. }
            | AtenError::Check { node, .. } => Some(node),
            _ => None,
        }
    }

    /// The message without the node and op it is about (for reports that name them apart).
    pub fn detail(&self) -> String {
        match self {
            AtenError::UnknownOp { message, .. } => format!("unknown op: {message}"),
            AtenError::BadArguments { message, .. } | AtenError::Check { message, .. } => {
                message.clone()
            }
            AtenError::OpFailed {
                inputs, message, ..
            } => format!("failed on inputs {inputs}: {message}"),
            other => other.to_string(),
        }
    }

    /// The op the error is about, if any.
    pub fn op(&self) -> Option<&str> {
        match self {
            AtenError::UnknownOp { op, .. }
            | AtenError::BadArguments { op, .. }
            | AtenError::OpFailed { op, .. }
            | AtenError::Check { op, .. } => Some(op),
            _ => None,
        }
    }
}

/// Result alias for the aten crate.
pub type Result<T, E = AtenError> = std::result::Result<T, E>;
