//! Aten graphs in the flow's minify ([`graphbug_flow::minify`]): candidates are cut from
//! the graph as written (symbolic sizes and dynamo-level calls kept) and run in its
//! runnable form; a fault pinned to a node stays on it; the checkers run the backend in
//! workers (or in this process), a command on repro directories, or a `contains:` check;
//! the reference values come from one eager run in this process, after a worker survived
//! the same run.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{anyhow, Context, Result};
use graphbug_accuracy::AccuracyMode;
use graphbug_aten::dtype::tch_device;
use graphbug_backends::lookup;
use graphbug_flow::minify::{Checkers, Minifiable, MinifyCheck, MinifyRequest};
use graphbug_ir::{Bindings, Device, Graph};
use graphbug_minifier::progress::{MinifyDir, RunKey};
use graphbug_minifier::{Checker, Minified, MinifyOptions};
use graphbug_run::limits::TimeLimit;
use graphbug_run::scratch::Scratch;
use tch::Tensor;

use crate::actions::{start_isolated_checkers, validate_backend};
use crate::checkers::AsRunnable;
use crate::command::{write_graphs, CommandChecker};
use crate::inputs::{device, eager_in_worker, graph_inputs, worker_exe};
use crate::isolate::{WorkerCheck, WorkerSpec};
use crate::progress::{inputs_fingerprint, out_dir};
use crate::{BackendChecker, ReferenceValues};

/// An aten graph's own options of a minification.
#[derive(Clone, Debug, Default)]
pub struct AtenOptions {
    /// The device it runs on (`cpu`, `cuda:N`).
    pub device: String,
    /// Keep the reference values on disk and load them on demand.
    pub offload_to_disk: bool,
    /// Plugin libraries whose backends the workers load.
    pub plugins: Vec<PathBuf>,
}

/// The graph, its inputs and reference values, once the checkers started.
struct Started {
    inputs: Vec<Tensor>,
    values: ReferenceValues,
}

/// An aten graph being minified: what the flow's minify needs of it.
pub struct AtenMinify {
    /// The graph as written: candidates are cut from it.
    graph: Graph,
    options: AtenOptions,
    started: Option<Started>,
}

impl AtenMinify {
    /// The aten graph `bytes` (read from `file`) hold; errors name the file, with the line
    /// and column of bad text.
    pub fn read(file: &Path, bytes: Vec<u8>, options: AtenOptions) -> Result<AtenMinify> {
        Ok(AtenMinify {
            graph: graphbug_ir::read_graph_file(file, bytes)?,
            options,
            started: None,
        })
    }

    /// What [`Minifiable::start`] recorded.
    fn started(&self) -> Result<&Started> {
        self.started
            .as_ref()
            .ok_or_else(|| anyhow!("the reference run has not been recorded yet"))
    }

    /// Where `--offload-to-disk` keeps the reference values of this process.
    fn offload(&self, scratch: &Scratch) -> Option<PathBuf> {
        self.options
            .offload_to_disk
            .then(|| scratch.path().join("values"))
    }
}

impl Minifiable for AtenMinify {
    fn graph(&self) -> &Graph {
        &self.graph
    }

    fn backend_hint(&self) -> String {
        "NAME".into()
    }

    /// A dynamo-level or symbolic graph is checked in its aten, runnable form.
    fn checks_as_written(&self) -> bool {
        !graphbug_aten::dynamic::needs_runnable_form(&self.graph)
    }

    fn start(
        &mut self,
        req: &MinifyRequest,
        check: &MinifyCheck,
        scratch: &Scratch,
    ) -> Result<Checkers> {
        let graph = &self.graph;
        let mut run_graph = graph.clone();
        let device = device(Some(&self.options.device))?;
        let (inputs, constants) = graph_inputs(
            &mut run_graph,
            req.inputs.as_ref(),
            &[],
            req.seed,
            tch_device(&device)?,
        )?;
        let bindings =
            graphbug_aten::dynamic::bind_positional(graph, &inputs).map_err(|e| anyhow!(e))?;
        if let Ok(spec) = std::env::var(graphbug_backends::registry::INJECT_FAULT_ENV) {
            if let Some((pinned, node)) = graphbug_backends::fault::pin_env_spec(&spec, &run_graph)
            {
                eprintln!("GRAPHBUG_INJECT_FAULT: the fault is pinned to node `{node}`: {pinned}");
                std::env::set_var(graphbug_backends::registry::INJECT_FAULT_ENV, pinned);
            }
        }
        let run = Run {
            req,
            graph,
            run_graph: &run_graph,
            bindings: &bindings,
            inputs: &inputs,
            constants: &constants,
            device: &device,
            scratch,
            offload: self.offload(scratch),
        };
        let (checkers, recorded) = run.checkers(check, &self.options)?;
        // Workers make the runnable form of their candidates themselves; a command is
        // given repro directories, which hold the graph as written.
        let checkers = match check {
            MinifyCheck::Command(_) => checkers,
            MinifyCheck::Backend(..) if !req.in_process => checkers,
            _ => checkers
                .into_iter()
                .map(|c| AsRunnable::wrap_for(graph, c, &bindings))
                .collect(),
        };
        // The values saved repros are made of: from one eager run in this process (after a
        // worker survived the same run), the one the checkers hold if they needed it.
        let values = match recorded {
            Some(values) => values,
            None => run
                .record()
                .context("eager reference run of the original graph")?,
        };
        self.started = Some(Started { inputs, values });
        Ok(checkers)
    }

    fn options(&self, options: MinifyOptions) -> MinifyOptions {
        MinifyOptions {
            value_keys: self.started.as_ref().map(|s| s.values.value_keys().clone()),
            ..options
        }
    }

    fn inputs_key(&self) -> String {
        self.started
            .as_ref()
            .map_or_else(String::new, |s| inputs_fingerprint(&self.graph, &s.values))
    }

    fn out_dir(&self, out: &Path, run: RunKey, resume: bool) -> Result<MinifyDir<'_>> {
        let s = self.started()?;
        Ok(out_dir(
            out,
            &self.graph,
            &s.inputs,
            &s.values,
            run,
            resume,
        )?)
    }

    fn text(&self, m: &Minified) -> String {
        crate::save::repro_text(m.graph())
    }
}

/// How the original runs, for the checkers' start-up.
struct Run<'a> {
    req: &'a MinifyRequest,
    /// The graph as written.
    graph: &'a Graph,
    /// Its runnable form.
    run_graph: &'a Graph,
    bindings: &'a Bindings,
    inputs: &'a [Tensor],
    constants: &'a HashMap<String, Tensor>,
    device: &'a Device,
    scratch: &'a Scratch,
    offload: Option<PathBuf>,
}

impl Run<'_> {
    /// The eager run's values in this process.
    fn record(&self) -> Result<ReferenceValues> {
        Ok(ReferenceValues::record(
            self.graph,
            self.inputs,
            self.constants,
            self.device,
            self.offload.as_deref(),
        )?)
    }

    /// How long the eager run takes in a worker: a graph that crashes libtorch ends here.
    fn eager_in_worker(&self) -> Result<std::time::Duration> {
        eager_in_worker(
            self.run_graph,
            self.inputs,
            self.constants,
            self.device,
            self.scratch,
        )
    }

    /// The checkers of `check` (one per worker), and the reference values they hold if
    /// they needed them. Checkers that run the backend in a worker start the first here:
    /// its start-up is the eager run that makes a preflight unnecessary.
    fn checkers(
        &self,
        check: &MinifyCheck,
        options: &AtenOptions,
    ) -> Result<(Checkers, Option<ReferenceValues>)> {
        let req = self.req;
        let workers = &req.workers;
        if req.in_process {
            workers.allow_in_process().map_err(|e| anyhow!(e))?;
        }
        let accuracy = AccuracyMode::strict_if(req.strict_accuracy);
        let (name, kind) = match check {
            MinifyCheck::Command(cmd) => {
                let started = Instant::now();
                // Only a graph that did not crash libtorch in a worker runs in this process.
                let eager = match req.in_process {
                    true => None,
                    false => Some(self.eager_in_worker()?),
                };
                let values = self.record()?;
                let limit = TimeLimit::new(req.timeout, eager.unwrap_or_else(|| started.elapsed()));
                eprintln!("{}", limit.describe());
                // Each worker writes its candidates into a directory of its own.
                let checkers = (0..workers.count())
                    .map(|k| {
                        let dir = match k {
                            0 => self.scratch.path().join("command"),
                            k => self.scratch.path().join(format!("command-{k}")),
                        };
                        Box::new(CommandChecker::new(
                            cmd,
                            write_graphs(values.shallow_clone()),
                            dir,
                            limit,
                        )) as Box<dyn Checker + Send>
                    })
                    .collect();
                return Ok((checkers, Some(values)));
            }
            MinifyCheck::Contains(contains) => {
                if !req.in_process {
                    self.eager_in_worker()?;
                }
                return Ok((contains.checkers(workers.count()), None));
            }
            MinifyCheck::Backend(name, kind) => (name, *kind),
        };
        // A fault naming a node by position (`@gelu#17`) is pinned to that node, so it
        // stays on it while the minifier removes others.
        let backend = match graphbug_backends::fault::pin_backend_name(name, self.run_graph) {
            Some((pinned, node)) => {
                eprintln!("the fault is pinned to node `{node}`: {pinned}");
                pinned
            }
            None => name.clone(),
        };
        let resolved = lookup(&backend)?;
        if req.in_process {
            validate_backend(resolved.as_ref(), self.run_graph, self.inputs, &[])?;
            let values = self.record()?;
            let checker =
                BackendChecker::new(resolved, kind, values.shallow_clone()).with_accuracy(accuracy);
            return Ok((vec![Box::new(checker)], Some(values)));
        }
        let spec = WorkerSpec::write(
            self.scratch.path(),
            self.graph,
            self.inputs,
            self.constants,
            self.device,
            WorkerCheck {
                accuracy,
                plugins: options.plugins.clone(),
                threads: workers.threads_each(),
                offload: options
                    .offload_to_disk
                    .then(|| self.scratch.path().join("values-worker")),
                bindings: self.bindings.clone(),
                ..WorkerCheck::new(&backend, kind)
            },
        )?;
        let checkers = start_isolated_checkers(
            worker_exe()?,
            spec,
            resolved.as_ref(),
            kind,
            req.timeout,
            (self.run_graph, self.inputs, &[]),
            workers,
        )?;
        Ok((checkers, None))
    }
}

/// `graphbug minify` of the aten graph `bytes` hold (read from `req.file`).
pub fn minify(req: &MinifyRequest, bytes: Vec<u8>, options: AtenOptions) -> Result<Minified> {
    let started = Instant::now();
    let mut graph = AtenMinify::read(&req.file, bytes, options)?;
    graphbug_flow::minify::minify(req, &mut graph, started)
}
