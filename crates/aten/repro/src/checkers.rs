//! Checkers that compile and run candidates with a backend, on the reference values.

use std::sync::Arc;

use graphbug_aten::accuracy::{same, AccuracyMode, SameOptions};
use graphbug_aten::reference::fp64_reference;
use graphbug_aten::Interpreter;
use graphbug_backends::{Backend, CompileContext, Failure};
use graphbug_ir::Graph;
pub use graphbug_minifier::checker::{
    describe_check, signature_of, CheckKind, StageHook, ACCURACY_MESSAGE,
};
use graphbug_minifier::localize::widen;
use graphbug_minifier::{Candidate, Checker, Signature, Verdict};
use tch::Tensor;

use crate::values::ReferenceValues;

/// Compiles and runs candidates with a backend, on the original run's values.
pub struct BackendChecker {
    backend: Arc<dyn Backend>,
    kind: CheckKind,
    values: ReferenceValues,
    same: SameOptions,
    on_stage: Option<StageHook>,
    training: bool,
}

impl BackendChecker {
    /// A checker for `kind` failures of `backend`.
    pub fn new(backend: Arc<dyn Backend>, kind: CheckKind, values: ReferenceValues) -> Self {
        BackendChecker {
            backend,
            kind,
            values,
            same: AccuracyMode::default().options(),
            on_stage: None,
            training: false,
        }
    }

    /// Runs candidates as training steps: floating inputs require grad, and the backward
    /// runs after the forward (see [`crate::manifest::Manifest::training`]).
    pub fn with_training(mut self, training: bool) -> Self {
        self.training = training;
        self
    }

    /// Compares accuracy in `mode` (the default is TorchDynamo's `accuracy`, which ignores
    /// non-floating outputs).
    pub fn with_accuracy(mut self, mode: AccuracyMode) -> Self {
        self.same = mode.options();
        self
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
        let examples =
            crate::case::examples_for(&inputs, &crate::case::requires_grad(&inputs, self.training));
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
        crate::case::seed_random_ops();
        crate::case::run_step(compiled.as_mut(), &inputs, self.training).map(Some)
    }

    /// Judges the backend's `result` against eager (and float64) runs of the candidate;
    /// a wrong result is localized (see [`BackendChecker::culprits`]).
    fn accuracy(&mut self, candidate: &Candidate, result: Vec<Option<Tensor>>) -> Verdict {
        let (wide, extras) = widen(&candidate.graph);
        let n = candidate.graph.outputs().len();
        type Outputs = Vec<Option<Tensor>>;
        let reference = || -> crate::error::Result<(Outputs, Outputs)> {
            let (inputs, constants) = self.values.candidate_inputs(candidate)?;
            let device = self.values.device();
            let fp64 = fp64_reference(&wide, &inputs, device, &constants)?;
            crate::case::seed_random_ops();
            let eager = Interpreter::new(&wide, device, &constants)?.run(&inputs)?;
            Ok((eager, fp64))
        };
        let (eager, fp64) = match reference() {
            Ok(r) => r,
            Err(e) => return Verdict::Unresolved(format!("eager reference run failed: {e}")),
        };
        let flat = |v: &[Option<Tensor>]| -> Vec<Tensor> {
            v.iter().flatten().map(Tensor::shallow_clone).collect()
        };
        let report = same(
            &flat(&eager[..n]),
            &flat(&result),
            Some(&flat(&fp64[..n])),
            &self.same,
        );
        if report.passed() {
            return Verdict::Passes;
        }
        let culprits = self.culprits(candidate, &wide, &extras, &eager[n..], &fp64[n..]);
        Verdict::Fails(Signature {
            kind: "accuracy wrong result".into(),
            op: None,
            message: ACCURACY_MESSAGE.into(),
            culprits,
            margin: report.failure_margin(),
        })
    }

    /// Where a wrong result starts: the backend runs `wide` (the candidate with every
    /// single-tensor node, `extras`, as an extra output); a node diverges when its value
    /// fails the accuracy rules against eager; the culprits are the diverging nodes whose
    /// divergence reaches a differing output through diverging nodes only, and that no
    /// such node feeds. A fault masked downstream (a perturbed value only compared, in
    /// the accuracy mode, through a boolean) reaches nothing and is not a culprit. Empty
    /// when the wide graph does not run.
    fn culprits(
        &mut self,
        candidate: &Candidate,
        wide: &Graph,
        extras: &[usize],
        eager: &[Option<Tensor>],
        fp64: &[Option<Tensor>],
    ) -> Vec<String> {
        let Ok((inputs, constants)) = self.values.candidate_inputs(candidate) else {
            return Vec::new();
        };
        let wide_candidate = Candidate {
            graph: wide.clone(),
            ..candidate.clone()
        };
        let Ok(Some(got)) = self.run_backend(&wide_candidate, inputs, constants) else {
            return Vec::new();
        };
        let n = candidate.graph.outputs().len();
        let g = &candidate.graph;
        let mut diverging = vec![false; g.nodes.len()];
        for (k, &node) in extras.iter().enumerate() {
            if let (Some(Some(res)), Some(Some(e)), Some(f)) =
                (got.get(n + k), eager.get(k), fp64.get(k))
            {
                let fp: Vec<Tensor> = f.iter().map(Tensor::shallow_clone).collect();
                diverging[node] = !same(
                    &[e.shallow_clone()],
                    &[res.shallow_clone()],
                    Some(&fp),
                    &self.same,
                )
                .passed();
            }
        }
        graphbug_minifier::localize::culprits(g, diverging)
    }
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

/// A checker of candidates cut from a graph with symbolic sizes or dynamo-level calls:
/// each candidate is checked in its runnable form (see
/// [`graphbug_aten::dynamic::runnable`]), with the symbols bound as in the original run,
/// while the minifier keeps cutting (and saving) the graph as written.
pub struct AsRunnable {
    inner: Box<dyn Checker + Send>,
    bindings: graphbug_ir::Bindings,
}

impl AsRunnable {
    /// `inner`, given runnable candidates made with `bindings`.
    pub fn new(inner: Box<dyn Checker + Send>, bindings: graphbug_ir::Bindings) -> Self {
        AsRunnable { inner, bindings }
    }

    /// `inner` wrapped when candidates of `graph` need a runnable form, as it is otherwise.
    pub fn wrap_for(
        graph: &Graph,
        inner: Box<dyn Checker + Send>,
        bindings: &graphbug_ir::Bindings,
    ) -> Box<dyn Checker + Send> {
        if graphbug_aten::dynamic::needs_runnable_form(graph) {
            Box::new(AsRunnable::new(inner, bindings.clone()))
        } else {
            inner
        }
    }
}

impl Checker for AsRunnable {
    fn describe(&self) -> String {
        self.inner.describe()
    }

    fn check(&mut self, candidate: &Candidate) -> Verdict {
        match graphbug_aten::dynamic::runnable(&candidate.graph, &self.bindings) {
            Ok(graph) => self.inner.check(&Candidate {
                graph,
                ..candidate.clone()
            }),
            Err(e) => Verdict::Unresolved(format!("making the candidate runnable: {e}")),
        }
    }
}
