//! Isolated workers for aten graphs: what a worker loads (the graph, its inputs and
//! constants, the backend and check: [`WorkerSpec`]) and its main loop. The client, the
//! query protocol and launchers are every family's: see [`graphbug_minifier::isolate`].

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use graphbug_aten::accuracy::AccuracyMode;
use graphbug_aten::io::{order_tensors, read_tensors, write_tensors};
use graphbug_backends::lookup;
use graphbug_backends::plugin::load_plugin;
use graphbug_ir::{parse_graph, Device, Graph};
use graphbug_minifier::isolate::{end_with_input, serve, worker_cpus, Stages};
pub use graphbug_minifier::isolate::{
    worker_spec_text, IsolatedChecker, Launcher, DEFAULT_WORKER_STARTUP,
};
use graphbug_minifier::Original;
use serde::{Deserialize, Serialize};
use tch::Tensor;

use crate::case::{named, write_constants};
use crate::checkers::{BackendChecker, CheckKind};
use crate::error::{ReproError, Result};
use crate::values::ReferenceValues;

/// What a worker needs to answer queries, written as JSON for it to read.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct WorkerSpec {
    /// The original graph's text.
    pub graph: String,
    /// Its inputs, keyed by placeholder name.
    pub inputs: PathBuf,
    /// Its constants (`self.<attr>` tensors), if any.
    pub constants: Option<PathBuf>,
    /// The device to run on.
    pub device: String,
    /// The backend to check.
    pub backend: String,
    /// Which failure to look for.
    pub check: CheckKind,
    /// How accuracy is compared.
    #[serde(default)]
    pub accuracy: AccuracyMode,
    /// Plugin libraries to load first.
    pub plugins: Vec<PathBuf>,
    /// Where to spill reference values, if anywhere.
    pub offload: Option<PathBuf>,
    /// Threads libtorch may use in the worker (default: its own choice, one per core).
    #[serde(default)]
    pub threads: Option<usize>,
    /// Candidates run as training steps (see [`crate::manifest::Manifest::training`]).
    #[serde(default)]
    pub training: bool,
    /// The size symbols' values, for a graph whose candidates run in a runnable form
    /// (symbolic sizes, dynamo-level calls: see [`AsRunnable`]).
    #[serde(default)]
    pub bindings: graphbug_ir::Bindings,
}

/// What a worker checks, besides the graph and its values.
#[derive(Clone, Debug)]
pub struct WorkerCheck {
    /// The backend to check.
    pub backend: String,
    /// Which failure to look for.
    pub check: CheckKind,
    /// How accuracy is compared.
    pub accuracy: AccuracyMode,
    /// Plugin libraries to load first.
    pub plugins: Vec<PathBuf>,
    /// Where to spill reference values, if anywhere.
    pub offload: Option<PathBuf>,
    /// Threads libtorch may use in each worker (see [`crate::actions::Workers::threads_each`]).
    pub threads: Option<usize>,
    /// Candidates run as training steps (see [`crate::manifest::Manifest::training`]).
    pub training: bool,
    /// The size symbols' values (see [`WorkerSpec::bindings`]).
    pub bindings: graphbug_ir::Bindings,
}

impl WorkerCheck {
    /// A check of `check` failures of `backend`, non-strict, with no plugins.
    pub fn new(backend: &str, check: CheckKind) -> Self {
        WorkerCheck {
            backend: backend.to_string(),
            check,
            accuracy: AccuracyMode::default(),
            plugins: Vec::new(),
            offload: None,
            threads: None,
            training: false,
            bindings: Default::default(),
        }
    }
}

impl WorkerSpec {
    /// Writes the spec of a worker making `check` on `graph`, with its inputs and
    /// constants, into `dir`; returns the spec file to start workers with.
    pub fn write(
        dir: &Path,
        graph: &Graph,
        inputs: &[Tensor],
        constants: &HashMap<String, Tensor>,
        device: &Device,
        check: WorkerCheck,
    ) -> Result<PathBuf> {
        let inputs_file = dir.join("inputs.safetensors");
        write_tensors(&inputs_file, &named(graph, inputs))?;
        let constants_file = if constants.is_empty() {
            None
        } else {
            let file = dir.join("constants.safetensors");
            write_constants(&file, constants)?;
            Some(file)
        };
        let spec = WorkerSpec {
            graph: graphbug_ir::print_graph(graph),
            inputs: inputs_file,
            constants: constants_file,
            device: device.to_string(),
            backend: check.backend,
            check: check.check,
            accuracy: check.accuracy,
            plugins: check.plugins,
            offload: check.offload,
            threads: check.threads,
            training: check.training,
            bindings: check.bindings,
        };
        let spec_file = dir.join("worker.json");
        std::fs::write(
            &spec_file,
            serde_json::to_string(&spec).expect("specs serialize"),
        )
        .map_err(|e| ReproError::io(&spec_file, e))?;
        Ok(spec_file)
    }
}

/// Runs the original graph eagerly once in a worker process and returns how long it
/// took: graphbug runs a graph in its own process only after a worker survived it (a
/// graph whose shapes contradict its ops can crash libtorch itself). Files go to `dir`,
/// which is created.
pub fn preflight_eager(
    exe: PathBuf,
    dir: &Path,
    graph: &Graph,
    inputs: &[Tensor],
    constants: &HashMap<String, Tensor>,
    device: &Device,
) -> Result<Duration> {
    std::fs::create_dir_all(dir).map_err(|e| ReproError::io(dir, e))?;
    let spec = WorkerSpec::write(
        dir,
        graph,
        inputs,
        constants,
        device,
        WorkerCheck::new("eager", CheckKind::Runtime),
    )?;
    IsolatedChecker::new(exe, spec, "the eager run".into(), None)
        .start_now()
        .map_err(ReproError::Other)
}

/// The first input line of a launched worker of `spec`: the spec and its files.
pub fn bundle_line(spec: &Path) -> Result<Arc<String>> {
    Bundle::line(spec).map(Arc::new)
}

/// A worker spec with the contents of the files it names, sent as the first line to a
/// worker started by a launcher (which may not see this machine's files).
#[derive(Serialize, Deserialize)]
struct Bundle {
    spec: WorkerSpec,
    /// The inputs file's bytes, base64.
    inputs: String,
    /// The constants file's bytes, base64.
    constants: Option<String>,
}

impl Bundle {
    /// The bundle of the spec in `spec_file`, as one line of JSON.
    fn line(spec_file: &Path) -> Result<String> {
        use base64::Engine;
        let text = std::fs::read_to_string(spec_file).map_err(|e| ReproError::io(spec_file, e))?;
        let spec: WorkerSpec =
            serde_json::from_str(&text).map_err(|e| ReproError::io(spec_file, e))?;
        let read = |p: &Path| -> Result<String> {
            let bytes = std::fs::read(p).map_err(|e| ReproError::io(p, e))?;
            Ok(base64::engine::general_purpose::STANDARD.encode(bytes))
        };
        let bundle = Bundle {
            inputs: read(&spec.inputs)?,
            constants: spec.constants.as_deref().map(read).transpose()?,
            spec,
        };
        Ok(serde_json::to_string(&bundle).expect("bundles serialize"))
    }

    /// The spec, its files written into `dir` and its paths pointing there.
    fn unpack(self, dir: &Path) -> Result<WorkerSpec> {
        use base64::Engine;
        let write = |name: &str, data: &str| -> Result<PathBuf> {
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(data)
                .map_err(|e| ReproError::Other(format!("bad {name} in the worker bundle: {e}")))?;
            let path = dir.join(name);
            std::fs::write(&path, bytes).map_err(|e| ReproError::io(&path, e))?;
            Ok(path)
        };
        let mut spec = self.spec;
        spec.inputs = write("inputs.safetensors", &self.inputs)?;
        spec.constants = self
            .constants
            .map(|c| write("constants.safetensors", &c))
            .transpose()?;
        spec.offload = spec.offload.map(|_| dir.join("values"));
        Ok(spec)
    }
}

/// Runs the worker loop of an aten graph on standard input and output until input ends:
/// `text` is its spec, read by [`worker_spec_text`] (with `bundled`, the first line of
/// standard input: the spec and its files, see [`Launcher`]).
pub fn worker_main(text: &str, bundled: bool) -> Result<()> {
    // Files a bundle brought live as long as the worker.
    let mut _unpacked = None;
    let spec: WorkerSpec = if bundled {
        let bundle: Bundle = serde_json::from_str(text)
            .map_err(|e| ReproError::Other(format!("bad worker bundle on standard input: {e}")))?;
        let scratch = crate::scratch::Scratch::new("worker")?;
        let spec = bundle.unpack(scratch.path())?;
        _unpacked = Some(scratch);
        spec
    } else {
        serde_json::from_str(text)
            .map_err(|e| ReproError::Other(format!("bad worker spec: {e}")))?
    };
    let queries = end_with_input(_unpacked.as_ref().map(|s| s.path().to_path_buf()))
        .map_err(ReproError::Other)?;
    // Workers side by side on one machine share its cores; a worker in a Slurm job uses
    // the CPUs its job was given (libtorch would otherwise take every core of the node).
    if let Some(n) = spec.threads.or_else(worker_cpus) {
        tch::set_num_threads(i32::try_from(n.max(1)).unwrap_or(1));
    }
    for p in &spec.plugins {
        load_plugin(p).map_err(|e| ReproError::Other(e.to_string()))?;
    }
    let graph = parse_graph(&spec.graph)?;
    let names: Vec<String> = graph.placeholder_names();
    let device: Device = spec.device.parse().map_err(ReproError::Other)?;
    let tdev = graphbug_aten::dtype::tch_device(&device)?;
    let inputs: Vec<tch::Tensor> = order_tensors(read_tensors(&spec.inputs)?, &names, "inputs")?
        .into_iter()
        .map(|t| t.to_device(tdev))
        .collect();
    let constants = match &spec.constants {
        Some(p) => read_tensors(p)?
            .into_iter()
            .map(|(k, t)| (k, t.to_device(tdev)))
            .collect(),
        None => Default::default(),
    };
    let eager_started = Instant::now();
    let values = ReferenceValues::record(
        &graph,
        &inputs,
        &constants,
        &device,
        spec.offload.as_deref(),
    )?;
    let original = Original::borrowing(&graph);
    let runnable_form = graphbug_aten::dynamic::needs_runnable_form(&graph);
    let runnable = |g: Graph| -> std::result::Result<Graph, String> {
        if runnable_form {
            graphbug_aten::dynamic::runnable(&g, &spec.bindings)
                .map_err(|e| format!("making the candidate runnable: {e}"))
        } else {
            Ok(g)
        }
    };
    let mut checker = BackendChecker::new(lookup(&spec.backend)?, spec.check, values)
        .with_accuracy(spec.accuracy)
        .with_training(spec.training);
    let stages = Stages::start();
    checker.on_stage(stages.hook());
    // The eager run's time tells the parent how long the graph takes.
    serve(
        queries,
        &original,
        &runnable,
        &mut checker,
        &stages,
        eager_started.elapsed(),
    )
    .map_err(ReproError::Other)
}
