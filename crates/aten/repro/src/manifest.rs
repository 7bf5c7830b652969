//! `manifest.json`: everything needed to reproduce a failure besides the graph and inputs.

use std::path::PathBuf;

use graphbug_aten::accuracy::AccuracyMode;
use graphbug_backends::{Failure, Stage, Symptom};
use graphbug_ir::Bindings;
use graphbug_minifier::Reliability;
use serde::{Deserialize, Serialize};

/// The manifest's file name.
pub const MANIFEST_FILE: &str = "manifest.json";

/// Where the repro was taken: before AOTAutograd (the graph as given) or after it (a
/// forward or backward graph), as `TORCHDYNAMO_REPRO_AFTER` says.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ReproAfter {
    /// The graph handed to the backend.
    Dynamo,
    /// A forward or backward graph an AOT pipeline handed to an inner compiler.
    Aot,
}

impl std::str::FromStr for ReproAfter {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim() {
            "dynamo" | "" => Ok(ReproAfter::Dynamo),
            "aot" => Ok(ReproAfter::Aot),
            other => Err(format!("`{other}`: expected `dynamo` or `aot`")),
        }
    }
}

/// How the inputs are stored.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum InputsRecord {
    /// The real inputs, in `inputs.safetensors`.
    Real,
    /// Only shapes and dtypes (the graph's annotations) and a seed for random values.
    Random {
        /// The seed of `graphbug_aten::io::random_tensors`.
        seed: u64,
    },
}

/// A recorded failure.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FailureRecord {
    /// compile, runtime or accuracy.
    pub stage: Stage,
    /// error, crash, timeout or wrong result.
    pub symptom: Symptom,
    /// The message.
    pub message: String,
    /// The node, when known.
    pub node: Option<String>,
    /// Its op, when known.
    pub op: Option<String>,
}

impl From<&Failure> for FailureRecord {
    fn from(f: &Failure) -> Self {
        FailureRecord {
            stage: f.stage,
            symptom: f.symptom,
            message: f.message.clone(),
            node: f.node.clone(),
            op: f.op.clone(),
        }
    }
}

impl FailureRecord {
    /// The failure a checker's signature describes (its kind is `<stage> <symptom>`, as
    /// [`crate::checkers::signature_of`] makes it); `None` for other kinds (`contains`).
    pub fn from_signature(sig: &graphbug_minifier::Signature) -> Option<Self> {
        let (stage, symptom) = sig.failure_kind()?;
        Some(FailureRecord {
            stage,
            symptom,
            message: sig.message.clone(),
            node: sig.culprits.first().cloned(),
            op: sig.op.clone(),
        })
    }

    /// The failure as the backend would report it.
    pub fn to_failure(&self, backend: &str) -> Failure {
        Failure {
            backend: backend.to_string(),
            stage: self.stage,
            symptom: self.symptom,
            node: self.node.clone(),
            op: self.op.clone(),
            message: self.message.clone(),
        }
    }
}

/// The manifest of a repro directory.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    /// The graphbug version that wrote it.
    pub graphbug_version: String,
    /// The libtorch version it ran on.
    pub libtorch_version: String,
    /// The backend that failed.
    pub backend: String,
    /// Where the graph was taken.
    pub after: ReproAfter,
    /// The repro level it was written at.
    pub level: u8,
    /// The device it ran on.
    pub device: String,
    /// How the inputs are stored.
    pub inputs: InputsRecord,
    /// The fault spec active through `GRAPHBUG_INJECT_FAULT`, if any.
    pub fault_spec: Option<String>,
    /// Plugin libraries the backend came from.
    pub plugins: Vec<PathBuf>,
    /// The failure, or `None` for a launcher dumped before compiling (level 3).
    pub failure: Option<FailureRecord>,
    /// How the minifier compares accuracy for this failure (`accuracy` unless only
    /// non-floating outputs showed it).
    #[serde(default)]
    pub accuracy: AccuracyMode,
    /// The size symbols of a dynamic-shape graph and the values it ran with (the inputs
    /// bind them again; with random inputs, these give the sizes).
    #[serde(default, skip_serializing_if = "Bindings::is_empty")]
    pub bindings: Bindings,
    /// For a flaky failure: in how many of how many runs it showed when minified;
    /// `repro DIR run` runs it as many times and checks it fails at least as often.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reliability: Option<Reliability>,
    /// The failure is in a training step's backward: the repro runs the graph with its
    /// floating inputs requiring grad, then the backward with ones as every output's
    /// gradient (as `out.sum().backward()` seeds it), as TorchDynamo's repros of training
    /// graphs run forward and backward.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub training: bool,
}

impl Manifest {
    /// A manifest for `backend` on `device`, with this build's versions.
    pub fn new(backend: &str, after: ReproAfter, level: u8, device: &str) -> Self {
        Manifest {
            graphbug_version: env!("CARGO_PKG_VERSION").to_string(),
            libtorch_version: graphbug_aten::shim::torch_version(),
            backend: backend.to_string(),
            after,
            level,
            device: device.to_string(),
            inputs: InputsRecord::Real,
            fault_spec: std::env::var(graphbug_backends::registry::INJECT_FAULT_ENV)
                .ok()
                .filter(|s| !s.trim().is_empty()),
            plugins: Vec::new(),
            failure: None,
            accuracy: AccuracyMode::default(),
            bindings: Bindings::new(),
            reliability: None,
            training: false,
        }
    }

    /// The manifest as pretty JSON (deterministic: fields in declaration order).
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("manifests serialize") + "\n"
    }
}
