//! Checkers that compile and run candidates with a backend, on the reference values.

use std::sync::Arc;

use graphbug_aten::accuracy::{same, SameOptions};
use graphbug_aten::dtype::meta_of;
use graphbug_aten::reference::fp64_reference;
use graphbug_aten::Interpreter;
use graphbug_backends::{Backend, CompileContext, ExampleInput, Failure};
use graphbug_minifier::{Candidate, Checker, Signature, Verdict};
use serde::{Deserialize, Serialize};
use tch::Tensor;

use crate::values::ReferenceValues;

/// Which failure of a backend a checker looks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CheckKind {
    /// Compiling fails (the candidate is not run).
    Compile,
    /// Compiling or running fails.
    Runtime,
    /// The outputs differ from eager's beyond TorchDynamo's `same()` tolerance.
    Accuracy,
}

impl std::str::FromStr for CheckKind {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "compile" => Ok(CheckKind::Compile),
            "runtime" => Ok(CheckKind::Runtime),
            "accuracy" => Ok(CheckKind::Accuracy),
            other => Err(format!(
                "unknown check `{other}`: expected compile, runtime, accuracy, contains:OPS"
            )),
        }
    }
}

/// The message of every accuracy failure, so candidates of one accuracy bug match.
pub const ACCURACY_MESSAGE: &str = "outputs differ from eager beyond the same() tolerance";

/// The signature of a backend failure: stage and symptom, op, message.
pub fn signature_of(f: &Failure) -> Signature {
    Signature {
        kind: format!("{} {}", f.stage, f.symptom),
        op: f.op.clone(),
        message: f.message.clone(),
    }
}

/// Told the stage a check enters (`compile`, `runtime`).
pub type StageHook = Box<dyn FnMut(&str)>;

/// Compiles and runs candidates with a backend, on the original run's values.
pub struct BackendChecker {
    backend: Arc<dyn Backend>,
    kind: CheckKind,
    values: ReferenceValues,
    same: SameOptions,
    on_stage: Option<StageHook>,
}

impl BackendChecker {
    /// A checker for `kind` failures of `backend`.
    pub fn new(backend: Arc<dyn Backend>, kind: CheckKind, values: ReferenceValues) -> Self {
        BackendChecker {
            backend,
            kind,
            values,
            same: SameOptions::repro(),
            on_stage: None,
        }
    }

    /// Calls `f("compile")` before compiling and `f("runtime")` before running, so an
    /// isolating parent can tell which stage a crash happened in.
    pub fn on_stage(&mut self, f: StageHook) {
        self.on_stage = Some(f);
    }

    fn stage(&mut self, name: &str) {
        if let Some(f) = &mut self.on_stage {
            f(name);
        }
    }

    /// The reference values it runs candidates on.
    pub fn values(&self) -> &ReferenceValues {
        &self.values
    }

    /// Compiles `candidate` with the backend and (unless only compiling) runs it.
    fn run_backend(
        &mut self,
        candidate: &Candidate,
        inputs: Vec<Tensor>,
        constants: std::collections::HashMap<String, Tensor>,
    ) -> Result<Option<Vec<Option<Tensor>>>, Failure> {
        let examples: Vec<ExampleInput> = inputs
            .iter()
            .filter_map(|t| meta_of(t).map(ExampleInput::new))
            .collect();
        let ctx = CompileContext {
            device: self.values.device().clone(),
            constants,
            ..CompileContext::default()
        };
        self.stage("compile");
        let mut compiled = self.backend.compile(&candidate.graph, &examples, &ctx)?;
        if self.kind == CheckKind::Compile {
            return Ok(None);
        }
        self.stage("runtime");
        compiled.run(&inputs).map(Some)
    }

    fn accuracy(&self, candidate: &Candidate, result: Vec<Option<Tensor>>) -> Verdict {
        let reference = || -> crate::error::Result<(Vec<Tensor>, Vec<Tensor>)> {
            let (inputs, constants) = self.values.candidate_inputs(candidate)?;
            let device = self.values.device();
            let fp64 = fp64_reference(&candidate.graph, &inputs, device, &constants)?;
            let eager = Interpreter::new(&candidate.graph, device, &constants)?.run(&inputs)?;
            Ok((
                eager.into_iter().flatten().collect(),
                fp64.into_iter().flatten().collect(),
            ))
        };
        let (eager, fp64) = match reference() {
            Ok(r) => r,
            Err(e) => return Verdict::Unresolved(format!("eager reference run failed: {e}")),
        };
        let result: Vec<Tensor> = result.into_iter().flatten().collect();
        let report = same(&eager, &result, Some(&fp64), &self.same);
        if report.passed() {
            Verdict::Passes
        } else {
            Verdict::Fails(Signature {
                kind: "accuracy wrong result".into(),
                op: None,
                message: ACCURACY_MESSAGE.into(),
            })
        }
    }
}

/// What a backend check looks for, for logs: e.g. `accuracy errors of backend eager`.
pub fn describe_check(kind: CheckKind, backend: &str) -> String {
    let kind = match kind {
        CheckKind::Compile => "compile errors",
        CheckKind::Runtime => "compile or runtime errors",
        CheckKind::Accuracy => "accuracy errors",
    };
    format!("{kind} of backend {backend}")
}

impl Checker for BackendChecker {
    fn describe(&self) -> String {
        describe_check(self.kind, self.backend.name())
    }

    fn check(&mut self, candidate: &Candidate) -> Verdict {
        let (inputs, constants) = match self.values.candidate_inputs(candidate) {
            Ok(v) => v,
            Err(e) => return Verdict::Unresolved(e.to_string()),
        };
        match self.run_backend(candidate, inputs, constants) {
            Err(f) => Verdict::Fails(signature_of(&f)),
            Ok(None) => Verdict::Passes,
            Ok(Some(outputs)) => match self.kind {
                CheckKind::Accuracy => self.accuracy(candidate, outputs),
                _ => Verdict::Passes,
            },
        }
    }
}
