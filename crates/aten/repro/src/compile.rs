//! `compile(graph, backend, options)`: the analogue of `torch.compile(backend=...)` with
//! TorchDynamo's repro machinery around it (`TORCHDYNAMO_REPRO_AFTER`/`_LEVEL`).
//!
//! | level | what is dumped |
//! |---|---|
//! | 0 | nothing |
//! | 1 | a repro directory on a compile or runtime failure |
//! | 2 | the repro directory plus a minifier launcher, on failure |
//! | 3 | the launcher before compiling (a crash that kills the process still leaves it), then as 2 |
//! | 4 | as 2, and outputs are checked against eager (float64 `same()` rules): an accuracy failure is dumped too |

use std::collections::HashMap;
use std::fmt;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use graphbug_aten::accuracy::{mode_for, AccuracyMode};
use graphbug_aten::dtype::meta_of;
use graphbug_backends::{
    lookup, Backend, CompileContext, CompiledFn, ExampleInput, Failure, InnerEvent, InnerHook,
};
use graphbug_ir::{Bindings, Device, Graph};
use tch::Tensor;

use crate::actions::accuracy_check;
use crate::case::{write_repro_dir, ReproCase};
use crate::error::{ReproError, Result};
use crate::manifest::{FailureRecord, InputsRecord, Manifest, ReproAfter};

/// Environment variable choosing where repros are taken: `dynamo` or `aot`.
pub const REPRO_AFTER_ENV: &str = "GRAPHBUG_REPRO_AFTER";
/// Environment variable choosing the repro level, 0 to 4.
pub const REPRO_LEVEL_ENV: &str = "GRAPHBUG_REPRO_LEVEL";

/// How `compile` dumps repros.
#[derive(Clone, Debug)]
pub struct ReproOptions {
    /// Where repros are taken.
    pub after: ReproAfter,
    /// 0 to 4 (see the module docs).
    pub level: u8,
    /// The repro directory to write (a symlink swapped atomically).
    pub dir: PathBuf,
    /// Keep only shapes and this seed instead of the real inputs.
    pub random_inputs: Option<u64>,
    /// The device to run on.
    pub device: Device,
    /// Plugin libraries the backend comes from (recorded in the manifest).
    pub plugins: Vec<PathBuf>,
    /// Which inputs require grad (for training pipelines such as aot_eager); none when empty.
    pub requires_grad: Vec<bool>,
    /// How the minifier of an accuracy failure compares outputs (recorded in the
    /// manifest; `strict_accuracy` is recorded anyway when only non-floating outputs show
    /// the failure).
    pub accuracy: AccuracyMode,
    /// The graph as written, with its symbols' values, when `compile` is given its
    /// runnable form (it has symbolic sizes or dynamo-level calls): repros after dynamo
    /// keep it.
    pub written: Option<(Graph, Bindings)>,
}

impl ReproOptions {
    /// Defaults (after dynamo, level 2, CPU) with `GRAPHBUG_REPRO_AFTER` and
    /// `GRAPHBUG_REPRO_LEVEL` applied; a bad value is an error naming the variable.
    pub fn from_env(dir: PathBuf) -> Result<Self> {
        let mut opts = ReproOptions {
            after: ReproAfter::Dynamo,
            level: 2,
            dir,
            random_inputs: None,
            device: Device::cpu(),
            plugins: Vec::new(),
            requires_grad: Vec::new(),
            accuracy: AccuracyMode::default(),
            written: None,
        };
        if let Ok(v) = std::env::var(REPRO_AFTER_ENV) {
            opts.after = v
                .parse()
                .map_err(|e| ReproError::Other(format!("{REPRO_AFTER_ENV}={e}")))?;
        }
        if let Ok(v) = std::env::var(REPRO_LEVEL_ENV) {
            opts.level = v
                .trim()
                .parse::<u8>()
                .ok()
                .filter(|l| *l <= 4)
                .ok_or_else(|| {
                    ReproError::Other(format!("{REPRO_LEVEL_ENV}={v}: expected 0 to 4"))
                })?;
        }
        Ok(opts)
    }
}

/// A failure `compile` or a run met, and the repro written for it.
#[derive(Debug)]
pub struct ReproFailure {
    /// The classified failure.
    pub failure: Box<Failure>,
    /// The repro directory, when one was written.
    pub repro: Option<PathBuf>,
}

impl fmt::Display for ReproFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.failure)?;
        if let Some(dir) = &self.repro {
            write!(f, "\nrepro written to {}", dir.display())?;
        }
        Ok(())
    }
}

impl std::error::Error for ReproFailure {}

/// A graph compiled under the repro machinery.
pub struct Compiled {
    graph: Graph,
    backend: Arc<dyn Backend>,
    inner: Box<dyn CompiledFn>,
    constants: HashMap<String, Tensor>,
    options: ReproOptions,
    /// After AOT: where the inner-compiler hook wrote its last repro.
    aot_repro: Option<Arc<Mutex<Option<PathBuf>>>>,
    /// In a training step, copies of the last run's inputs, taken before it ran (what a
    /// repro of its backward's failure is written with).
    last_inputs: Vec<Tensor>,
}

/// The case of `graph`, or of the graph as `written` when given (see
/// [`ReproOptions::written`]).
fn case(
    graph: &Graph,
    inputs: &[Tensor],
    constants: &HashMap<String, Tensor>,
    manifest: Manifest,
    written: Option<&(Graph, Bindings)>,
) -> ReproCase {
    let inputs = || inputs.iter().map(Tensor::copy).collect();
    let constants = || {
        constants
            .iter()
            .map(|(k, t)| (k.clone(), t.copy()))
            .collect()
    };
    if let Some((source, bindings)) = written {
        if let Ok(c) = ReproCase::new(
            source.clone(),
            bindings,
            inputs(),
            constants(),
            manifest.clone(),
        ) {
            return c;
        }
    }
    ReproCase {
        graph: graph.clone(),
        source: None,
        inputs: inputs(),
        constants: constants(),
        manifest,
    }
}

fn manifest_for(backend: &str, options: &ReproOptions, failure: Option<&Failure>) -> Manifest {
    let mut m = Manifest::new(
        backend,
        options.after,
        options.level,
        &options.device.to_string(),
    );
    m.plugins = options.plugins.clone();
    if let Some(seed) = options.random_inputs {
        m.inputs = InputsRecord::Random { seed };
    }
    m.failure = failure.map(FailureRecord::from);
    m.accuracy = match failure {
        Some(f) if f.stage == graphbug_backends::Stage::Accuracy => {
            mode_for(&f.message, options.accuracy)
        }
        _ => options.accuracy,
    };
    m
}

/// Writes the repro for `failure` (levels 1 and up; `training`: of a training step's
/// backward, see [`Manifest::training`]) and wraps it.
fn dump(
    graph: &Graph,
    backend: &str,
    inputs: &[Tensor],
    constants: &HashMap<String, Tensor>,
    options: &ReproOptions,
    (failure, training): (Failure, bool),
) -> ReproFailure {
    if options.level == 0 {
        return ReproFailure {
            failure: Box::new(failure),
            repro: None,
        };
    }
    let c = case(
        graph,
        inputs,
        constants,
        Manifest {
            training,
            ..manifest_for(backend, options, Some(&failure))
        },
        options.written.as_ref(),
    );
    match write_repro_dir(&options.dir, &c) {
        Ok(()) => ReproFailure {
            failure: Box::new(failure),
            repro: Some(options.dir.clone()),
        },
        Err(e) => {
            let mut failure = failure;
            failure
                .message
                .push_str(&format!(" (and writing the repro failed: {e})"));
            ReproFailure {
                failure: Box::new(failure),
                repro: None,
            }
        }
    }
}

/// Records `failure` of a run the process did not survive (a crash or a hang, seen by a
/// supervisor) as `options.level` says: in the repro directory that run left at
/// `options.dir` before compiling when `left` is true (its level-3 launcher), else in a
/// new repro directory of `graph`; `training`: the run was lost in a training step's
/// backward (see [`Manifest::training`]).
pub fn record_lost_run(
    graph: &Graph,
    backend: &str,
    inputs: &[Tensor],
    constants: &HashMap<String, Tensor>,
    options: &ReproOptions,
    (failure, training): (Failure, bool),
    left: bool,
) -> ReproFailure {
    if left && options.level > 0 {
        let path = options.dir.join(crate::manifest::MANIFEST_FILE);
        let patched = std::fs::read_to_string(&path)
            .map_err(|e| ReproError::io(&path, e))
            .and_then(|t| {
                serde_json::from_str::<Manifest>(&t).map_err(|e| ReproError::io(&path, e))
            })
            .and_then(|mut m| {
                m.failure = Some(FailureRecord::from(&failure));
                m.training = training;
                crate::save::write_file_atomically(&path, m.to_json().as_bytes())
            });
        if patched.is_ok() {
            return ReproFailure {
                failure: Box::new(failure),
                repro: Some(options.dir.clone()),
            };
        }
    }
    dump(
        graph,
        backend,
        inputs,
        constants,
        options,
        (failure, training),
    )
}

/// Compiles `graph` with the named backend, dumping repros as `options.level` says.
/// `example_inputs` are real tensors: they are what a compile-time repro records.
pub fn compile(
    graph: &Graph,
    backend: &str,
    example_inputs: &[Tensor],
    constants: &HashMap<String, Tensor>,
    options: ReproOptions,
) -> std::result::Result<Compiled, ReproFailure> {
    let other = |message: String| ReproFailure {
        failure: Box::new(Failure::new(
            backend,
            graphbug_backends::Stage::Compile,
            graphbug_backends::Symptom::Error,
            message,
        )),
        repro: None,
    };
    let b = lookup(backend).map_err(|e| other(e.to_string()))?;
    let aot = options.after == ReproAfter::Aot;
    if aot && !b.delegates_faults() {
        return Err(other(format!(
            "{REPRO_AFTER_ENV}=aot takes repros of the forward and backward graphs an AOT pipeline (such as aot_eager) hands to its inner compilers; `{backend}` compiles the graph whole: use dynamo"
        )));
    }
    if options.level >= 3 && !aot {
        let c = case(
            graph,
            example_inputs,
            constants,
            manifest_for(backend, &options, None),
            options.written.as_ref(),
        );
        write_repro_dir(&options.dir, &c)
            .map_err(|e| other(format!("writing the launcher: {e}")))?;
    }
    let examples: Vec<ExampleInput> = example_inputs
        .iter()
        .enumerate()
        .filter_map(|(i, t)| {
            meta_of(t).map(|m| ExampleInput {
                requires_grad: options.requires_grad.get(i).copied().unwrap_or(false),
                ..ExampleInput::new(m)
            })
        })
        .collect();
    let aot_repro = aot.then(|| Arc::new(Mutex::new(None)));
    let ctx = CompileContext {
        device: options.device.clone(),
        constants: constants
            .iter()
            .map(|(k, t)| (k.clone(), t.shallow_clone()))
            .collect(),
        inner_hook: aot_repro
            .as_ref()
            .map(|written| aot_hook(options.clone(), written.clone(), constants)),
        check_inner_accuracy: aot && options.level >= 4,
        trace: None,
        passes: None,
    };
    crate::process::report_stage("compile");
    match b.compile(graph, &examples, &ctx) {
        Ok(inner) => Ok(Compiled {
            graph: graph.clone(),
            backend: b,
            inner,
            constants: constants
                .iter()
                .map(|(k, t)| (k.clone(), t.shallow_clone()))
                .collect(),
            options,
            aot_repro,
            last_inputs: Vec::new(),
        }),
        Err(f) => match &aot_repro {
            Some(written) => Err(aot_failure(f, written)),
            None => Err(dump(
                graph,
                backend,
                example_inputs,
                constants,
                &options,
                (f, false),
            )),
        },
    }
}

/// The hook an AOT pipeline calls around its inner compilers: repros of the forward or
/// backward graph with its real inputs (launchers before compiling at level 3).
fn aot_hook(
    options: ReproOptions,
    written: Arc<Mutex<Option<PathBuf>>>,
    constants: &HashMap<String, Tensor>,
) -> InnerHook {
    // Tensors are not Sync; the hook is shared, so its constants sit behind a lock.
    let constants: Mutex<HashMap<String, Tensor>> = Mutex::new(
        constants
            .iter()
            .map(|(k, t)| (k.clone(), t.copy()))
            .collect(),
    );
    Arc::new(move |e: &InnerEvent<'_>| {
        let wanted = match e.failure {
            None => options.level >= 3,
            Some(_) => options.level >= 1,
        };
        if !wanted {
            return;
        }
        let constants = constants
            .lock()
            .expect("the constants lock is never poisoned");
        let used: HashMap<String, Tensor> = e
            .graph
            .nodes
            .iter()
            .filter_map(|n| match &n.kind {
                graphbug_ir::NodeKind::GetAttr { target } => {
                    constants.get(target).map(|t| (target.clone(), t.copy()))
                }
                _ => None,
            })
            .collect();
        let c = case(
            e.graph,
            e.inputs,
            &used,
            manifest_for(e.backend, &options, e.failure),
            None,
        );
        if write_repro_dir(&options.dir, &c).is_ok() {
            *written
                .lock()
                .expect("the repro path lock is never poisoned") = Some(options.dir.clone());
        }
    })
}

/// A failure of an AOT pipeline, with the repro its hook wrote (if any).
fn aot_failure(f: Failure, written: &Arc<Mutex<Option<PathBuf>>>) -> ReproFailure {
    ReproFailure {
        failure: Box::new(f),
        repro: written
            .lock()
            .expect("the repro path lock is never poisoned")
            .clone(),
    }
}

impl Compiled {
    /// Runs the compiled graph; at level 4 also checks its outputs against eager.
    pub fn run(
        &mut self,
        inputs: &[Tensor],
    ) -> std::result::Result<Vec<Option<Tensor>>, ReproFailure> {
        let name = self.backend.name().to_string();
        // Copies taken first: the run may change its inputs in place.
        let saved: Vec<Tensor> = inputs.iter().map(Tensor::copy).collect();
        if self.options.requires_grad.contains(&true) {
            // A training step: its backward's failure is written with these inputs.
            self.last_inputs = saved.iter().map(Tensor::shallow_clone).collect();
        }
        let dump_failure = |f| {
            dump(
                &self.graph,
                &name,
                &saved,
                &self.constants,
                &self.options,
                (f, false),
            )
        };
        crate::process::report_stage("runtime");
        let outputs = match self.inner.run(inputs) {
            Ok(o) => o,
            Err(f) if self.aot_repro.is_some() => {
                return Err(aot_failure(f, self.aot_repro.as_ref().expect("checked")))
            }
            Err(f) => return Err(dump_failure(f)),
        };
        if self.options.level >= 4 && self.aot_repro.is_none() {
            let c = case(
                &self.graph,
                &saved,
                &self.constants,
                manifest_for(&name, &self.options, None),
                self.options.written.as_ref(),
            );
            let shared: Vec<Option<Tensor>> = outputs
                .iter()
                .map(|o| o.as_ref().map(Tensor::shallow_clone))
                .collect();
            match accuracy_check(&name, &c, shared) {
                Ok(Some(f)) => return Err(dump_failure(f)),
                Ok(None) => {}
                Err(e) => {
                    return Err(ReproFailure {
                        failure: Box::new(Failure::new(
                            &name,
                            graphbug_backends::Stage::Accuracy,
                            graphbug_backends::Symptom::Error,
                            format!("the eager reference failed: {e}"),
                        )),
                        repro: None,
                    })
                }
            }
        }
        Ok(outputs)
    }

    /// The backward of the last run (training pipelines): one gradient per input. After
    /// AOT, a failure of the backward graph's compiler is written as a repro of that graph;
    /// after dynamo, as a repro of the graph given that runs a training step (see
    /// [`Manifest::training`]).
    pub fn backward(
        &mut self,
        grad_outputs: &[Option<Tensor>],
    ) -> std::result::Result<Vec<Option<Tensor>>, ReproFailure> {
        crate::process::report_stage("backward");
        self.inner
            .backward(grad_outputs)
            .map_err(|f| match &self.aot_repro {
                Some(written) => aot_failure(f, written),
                // Not run as a training step (no input requires grad): no inputs were kept.
                None if self.last_inputs.len() != self.graph.placeholders().len() => ReproFailure {
                    failure: Box::new(f),
                    repro: None,
                },
                None => dump(
                    &self.graph,
                    self.backend.name(),
                    &self.last_inputs,
                    &self.constants,
                    &self.options,
                    (f, true),
                ),
            })
    }
}
