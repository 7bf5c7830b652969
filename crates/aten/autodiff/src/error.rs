//! The error type of the autodiff crate.

use graphbug_ir::schema::BadCall;
use graphbug_ir::IrError;

/// Why a graph cannot be functionalized or differentiated.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum AutodiffError {
    /// A node does something graphbug cannot handle (a mutation it cannot remove, an op
    /// with no derivative rule), named with its op.
    #[error("node `{node}` ({op}): {message}")]
    Unsupported {
        /// The node.
        node: String,
        /// Its op.
        op: String,
        /// What is not supported.
        message: String,
    },
    /// A node lacks the shape/dtype annotation a pass needs.
    #[error("node `{node}` has no shape annotation: {message}")]
    MissingMeta {
        /// The node.
        node: String,
        /// Why it is needed.
        message: String,
    },
    /// A decomposition was asked for by a name graphbug has no decomposition for.
    #[error("no decomposition for `{name}` (known: {known})")]
    UnknownDecomposition {
        /// The name as given.
        name: String,
        /// The ops graphbug can decompose.
        known: String,
    },
    /// A graph error.
    #[error(transparent)]
    Ir(#[from] IrError),
    /// graphbug built a call its op's schema rejects (a bug in graphbug, caught before the
    /// graph goes anywhere).
    #[error("graphbug built an invalid call: {0} (a bug in graphbug)")]
    BadCall(BadCall),
}

// Not `#[from]`, which would make the call its source and print it twice.
impl From<BadCall> for AutodiffError {
    fn from(e: BadCall) -> Self {
        AutodiffError::BadCall(e)
    }
}
