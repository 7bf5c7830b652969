//! A client of the PJRT C API, the interface every XLA-family compiler ships as a plugin (a
//! shared library exporting `GetPjrtApi`: XLA CPU and GPU, Neuron, IREE, vendor chips).
//!
//! No libtorch and no build-time tools: the plugin is opened with `libloading`, and the C
//! structs are written once in Rust (the `sys` module, from the 0.81 header). Every call first checks
//! that the plugin's function table reaches it, so plugins older and newer than the header
//! both work, and a call an older plugin lacks is an [`Error::MissingCall`], not a crash.
//!
//! ```no_run
//! # use graphbug_pjrt::*;
//! let plugin = Plugin::load(resolve("cpu", Some(std::path::Path::new(".")))?)?;
//! let client = Client::new(&plugin)?;
//! let exe = client.compile(b"module { ... }", Format::Mlir)?;
//! let outputs = exe.execute(&[/* HostTensors */])?;
//! # Ok::<(), Error>(())
//! ```
//!
//! A plugin that aborts takes the process with it: callers that compile untrusted or
//! minimized programs run this client in a child process.

#![warn(missing_docs)]

mod client;
mod discover;
mod plugin;
mod proto;
pub mod sharding;
mod sys;

use std::fmt;
use std::path::PathBuf;

use graphbug_ir::Dtype;

pub use client::{Client, Device, Executable, Format, GlobalRun};
pub use discover::{discover, resolve, site_packages, Found, Origin, PLUGINS_VAR};
pub use graphbug_files::HostTensor;
pub use plugin::{Attribute, Plugin};
pub use sharding::{CompileOptions, OptionOverride, Partitioning, Sharding};

/// The PJRT C API version of the header the bindings follow.
pub const HEADER_VERSION: ApiVersion = ApiVersion {
    major: sys::PJRT_API_MAJOR,
    minor: sys::PJRT_API_MINOR,
};

/// A PJRT C API version: the major must match the bindings', the minor may differ.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct ApiVersion {
    /// Incremented on ABI-incompatible changes.
    pub major: i32,
    /// Incremented when calls or fields are added.
    pub minor: i32,
}

impl fmt::Display for ApiVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

/// Everything that can go wrong; each message names the plugin file and the call.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The file could not be opened as a shared library.
    #[error("{}: cannot load as a shared library: {message}", .path.display())]
    Load {
        /// The file.
        path: PathBuf,
        /// The loader's reason.
        message: String,
    },
    /// The library is not a PJRT plugin (no `GetPjrtApi`, or it returned no usable table).
    #[error("{}: not a PJRT plugin: {message}", .path.display())]
    NotAPlugin {
        /// The file.
        path: PathBuf,
        /// What is missing.
        message: String,
    },
    /// The plugin's PJRT API major version differs from the bindings'.
    #[error("{}: PJRT API {plugin} cannot be used with graphbug's bindings for PJRT API {bindings}: the major versions differ", .path.display())]
    Version {
        /// The file.
        path: PathBuf,
        /// The plugin's version.
        plugin: ApiVersion,
        /// The bindings' version.
        bindings: ApiVersion,
    },
    /// A call the plugin's table does not reach (an older plugin) or leaves null.
    #[error("{}: {call} is missing from this plugin (PJRT API {plugin}, a function table of {table_size} bytes; the call is at byte {offset} of the table in graphbug's PJRT API {bindings} bindings)", .path.display())]
    MissingCall {
        /// The file.
        path: PathBuf,
        /// The C API call.
        call: &'static str,
        /// The plugin's version.
        plugin: ApiVersion,
        /// The bindings' version.
        bindings: ApiVersion,
        /// How many bytes of the plugin's table can be read.
        table_size: usize,
        /// Where the call's function pointer sits in the table.
        offset: usize,
    },
    /// A call returned a `PJRT_Error`: its code and message.
    #[error("{}: {call} failed ({code}): {message}", .path.display())]
    Pjrt {
        /// The file.
        path: PathBuf,
        /// The C API call (and what it was part of).
        call: String,
        /// The error's code.
        code: ErrorCode,
        /// The plugin's message.
        message: String,
    },
    /// An element type graphbug's host tensors cannot hold.
    #[error("{}: {call}: {what} has element type {element_type}, which graphbug's host tensors cannot hold", .path.display())]
    UnsupportedType {
        /// The file.
        path: PathBuf,
        /// The call that met it.
        call: &'static str,
        /// Which value (e.g. `output 1`).
        what: String,
        /// The element type.
        element_type: ElementType,
    },
    /// Inputs that do not fit the executable, found before calling the plugin.
    #[error("{}: {call}: {message}", .path.display())]
    BadInput {
        /// The file.
        path: PathBuf,
        /// The call that was not made.
        call: &'static str,
        /// What does not fit.
        message: String,
    },
    /// A plugin answer this client cannot use.
    #[error("{}: {call}: {message}", .path.display())]
    Unexpected {
        /// The file.
        path: PathBuf,
        /// The call that answered.
        call: &'static str,
        /// What is wrong with the answer.
        message: String,
    },
    /// No plugin of that name: lists the plugins that were found.
    #[error("no PJRT plugin named `{name}` (set {PLUGINS_VAR}=NAME:PATH, or give a path); found: {}", list_found(.found))]
    UnknownPlugin {
        /// The name asked for.
        name: String,
        /// What discovery found.
        found: Vec<Found>,
    },
}

fn list_found(found: &[Found]) -> String {
    if found.is_empty() {
        return "none".into();
    }
    let names: Vec<String> = found
        .iter()
        .map(|f| format!("{} ({})", f.name, f.path.display()))
        .collect();
    names.join(", ")
}

/// A `PJRT_Error_Code` (the absl status codes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ErrorCode(pub i32);

const ERROR_CODES: [&str; 17] = [
    "OK",
    "CANCELLED",
    "UNKNOWN",
    "INVALID_ARGUMENT",
    "DEADLINE_EXCEEDED",
    "NOT_FOUND",
    "ALREADY_EXISTS",
    "PERMISSION_DENIED",
    "RESOURCE_EXHAUSTED",
    "FAILED_PRECONDITION",
    "ABORTED",
    "OUT_OF_RANGE",
    "UNIMPLEMENTED",
    "INTERNAL",
    "UNAVAILABLE",
    "DATA_LOSS",
    "UNAUTHENTICATED",
];

impl ErrorCode {
    /// The code's name, e.g. `INVALID_ARGUMENT`.
    pub fn name(self) -> Option<&'static str> {
        usize::try_from(self.0)
            .ok()
            .and_then(|i| ERROR_CODES.get(i).copied())
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(name) => f.write_str(name),
            None => write!(f, "error code {}", self.0),
        }
    }
}

/// A `PJRT_Buffer_Type`: the element type of a PJRT buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ElementType(pub i32);

/// Every `PJRT_Buffer_Type` of the 0.81 header: its value, the matching
/// `xla::PrimitiveType` (xla_data.proto, a different numbering), XLA's short name, and the
/// graphbug dtype that holds it.
const ELEMENT_TYPES: [(i32, i32, &str, Option<Dtype>); 29] = [
    (1, 1, "pred", Some(Dtype::Bool)),
    (2, 2, "s8", Some(Dtype::Int8)),
    (3, 3, "s16", Some(Dtype::Int16)),
    (4, 4, "s32", Some(Dtype::Int32)),
    (5, 5, "s64", Some(Dtype::Int64)),
    (6, 6, "u8", Some(Dtype::UInt8)),
    (7, 7, "u16", Some(Dtype::UInt16)),
    (8, 8, "u32", Some(Dtype::UInt32)),
    (9, 9, "u64", Some(Dtype::UInt64)),
    (10, 10, "f16", Some(Dtype::Float16)),
    (11, 11, "f32", Some(Dtype::Float32)),
    (12, 12, "f64", Some(Dtype::Float64)),
    (13, 16, "bf16", Some(Dtype::BFloat16)),
    (14, 15, "c64", Some(Dtype::Complex64)),
    (15, 18, "c128", Some(Dtype::Complex128)),
    (16, 19, "f8e5m2", None),
    (17, 20, "f8e4m3fn", None),
    (18, 23, "f8e4m3b11fnuz", None),
    (19, 24, "f8e5m2fnuz", None),
    (20, 25, "f8e4m3fnuz", None),
    (21, 21, "s4", None),
    (22, 22, "u4", None),
    (23, 17, "token", None),
    (24, 26, "s2", None),
    (25, 27, "u2", None),
    (26, 28, "f8e4m3", None),
    (27, 29, "f8e3m4", None),
    (28, 33, "f8e8m0fnu", None),
    (29, 32, "f4e2m1fn", None),
];

impl ElementType {
    fn entry(self) -> Option<&'static (i32, i32, &'static str, Option<Dtype>)> {
        ELEMENT_TYPES.iter().find(|e| e.0 == self.0)
    }

    /// XLA's short name (`f32`, `pred`, `bf16`, ...), if the 0.81 header knows the type.
    pub fn name(self) -> Option<&'static str> {
        self.entry().map(|e| e.2)
    }

    /// The graphbug dtype that holds this type, if any.
    pub fn dtype(self) -> Option<Dtype> {
        self.entry().and_then(|e| e.3)
    }

    /// The element type of an `xla::PrimitiveType` (as in an `HloModuleProto`).
    pub(crate) fn from_xla_primitive(primitive: i64) -> Option<ElementType> {
        ELEMENT_TYPES
            .iter()
            .find(|e| i64::from(e.1) == primitive)
            .map(|e| ElementType(e.0))
    }
}

impl From<Dtype> for ElementType {
    fn from(dtype: Dtype) -> ElementType {
        let entry = ELEMENT_TYPES.iter().find(|e| e.3 == Some(dtype));
        // Every graphbug dtype is in the table.
        ElementType(entry.map_or(0, |e| e.0))
    }
}

impl fmt::Display for ElementType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(name) => f.write_str(name),
            None => write!(f, "PJRT_Buffer_Type {}", self.0),
        }
    }
}

/// The element type and dimensions of an executable's input or output.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorSpec {
    /// The element type.
    pub element_type: ElementType,
    /// The dimensions (upper bounds where dynamic).
    pub dims: Vec<i64>,
}

impl TensorSpec {
    /// The spec of a host tensor.
    pub fn of(tensor: &HostTensor) -> TensorSpec {
        TensorSpec {
            element_type: tensor.dtype.into(),
            dims: tensor.shape.iter().map(|&d| d as i64).collect(),
        }
    }
}

impl fmt::Display for TensorSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let dims: Vec<String> = self.dims.iter().map(i64::to_string).collect();
        write!(f, "{}[{}]", self.element_type, dims.join(","))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_dtype_has_an_element_type_and_back() {
        for dtype in Dtype::ALL {
            let t = ElementType::from(dtype);
            assert_ne!(t.0, 0, "{dtype:?}");
            assert_eq!(t.dtype(), Some(dtype));
        }
        assert_eq!(ElementType(17).to_string(), "f8e4m3fn");
        assert_eq!(ElementType(17).dtype(), None);
        assert_eq!(ElementType(99).to_string(), "PJRT_Buffer_Type 99");
        assert_eq!(ElementType::from_xla_primitive(16), Some(ElementType(13)));
        assert_eq!(ErrorCode(3).to_string(), "INVALID_ARGUMENT");
    }
}
