//! Arguments of commands every build of graphbug has (with libtorch or without: see the
//! `torch` feature).

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use graphbug::minifier::Check;
use graphbug::run::limits::parse_timeout;

/// Arguments of `graphbug run`.
#[derive(Args)]
pub struct RunArgs {
    /// Graph text file, or an XLA program (HLO text or proto, StableHLO text or bytecode).
    pub file: PathBuf,
    /// Backend to compile with (see `graphbug backends --all`); default: eager for aten
    /// graphs, pjrt:cpu for XLA programs.
    #[arg(long)]
    pub backend: Option<String>,
    /// Inputs (.safetensors or .npz; keys are the placeholder names or arg0..argN; keys
    /// naming `self.<attr>` constants provide them; an XLA program's parameter names or
    /// arg0..argN). Without it, inputs are random.
    #[arg(long)]
    pub inputs: Option<PathBuf>,
    /// Seed of the random inputs.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Write the outputs (out0..outN) to this .safetensors or .npz file.
    #[arg(long)]
    pub save_outputs: Option<PathBuf>,
    /// Compare the outputs (and with --backward the gradients, `grad<i>` for input i) with
    /// this file by TorchDynamo's accuracy rules; exit 1 on mismatch.
    #[arg(long)]
    pub compare: Option<PathBuf>,
    #[command(flatten)]
    pub bound: Bound,
}

/// How a command that runs libtorch is kept from hanging or dying with it.
#[derive(Args)]
pub struct Bound {
    /// Seconds the command may take before it counts as hanging (default 300).
    #[arg(long, value_parser = parse_timeout)]
    pub timeout: Option<Duration>,
    /// Run in this process: a crash inside libtorch ends graphbug, and nothing bounds a
    /// hang.
    #[arg(long, conflicts_with = "timeout")]
    pub no_isolate: bool,
}

/// How many workers minify, and how they start (`graphbug minify`, `graphbug repro`).
#[derive(clap::Args, Clone, Debug)]
pub struct WorkerArgs {
    /// Workers querying candidates side by side: the ones the search tries next are
    /// answered ahead of it, and it takes their verdicts in its own order, so the result,
    /// the queries counted and every file written are the same for any number.
    #[arg(short = 'j', long = "jobs", default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=256))]
    pub jobs: u16,
    /// Start each worker through this command, e.g. `srun -N1 --gres=gpu:1 {cmd}` (Slurm),
    /// `kubectl exec -i POD -- graphbug {args}` or `ssh HOST {cmd}`: `{cmd}` is the worker
    /// command (this binary and its arguments), `{args}` its arguments alone. Workers take
    /// their graph and inputs on standard input; one lost mid-query is relaunched and asked
    /// once more.
    #[arg(long, value_name = "TEMPLATE")]
    pub worker_launcher: Option<String>,
    /// Seconds a worker may take to be started before it is given up (default 600): a
    /// worker whose job waits in an engine's queue holds up no query meanwhile (the others
    /// go on; it joins when it starts), and the run fails only when the first cannot start.
    #[arg(long, value_name = "SECS", value_parser = graphbug::run::limits::parse_timeout)]
    pub worker_startup: Option<std::time::Duration>,
}

impl WorkerArgs {
    /// The workers these arguments ask for.
    pub fn workers(&self) -> anyhow::Result<graphbug::minifier::isolate::Workers> {
        Ok(graphbug::minifier::isolate::Workers {
            jobs: usize::from(self.jobs),
            launcher: self
                .worker_launcher
                .as_deref()
                .map(graphbug::minifier::isolate::Launcher::new)
                .transpose()
                .map_err(|e| anyhow::anyhow!(e))?,
            startup: self.worker_startup,
        })
    }
}

/// Arguments of `graphbug repro`.
#[derive(Args)]
pub struct ReproArgs {
    /// A graph file or an XLA program (run the whole flow on it), a repro directory (with
    /// an action), or a compiler's dump directory (XLA_FLAGS=--xla_dump_to=DIR: every
    /// module checked, each failing one minified into --out/MODULE).
    /// Without it: the bundled demo.
    pub target: Option<PathBuf>,
    /// For a repro directory: run, minify, analyze or share (DIR/shared: the repro without
    /// its author's names, metadata and values, for a compiler's vendor).
    pub action: Option<String>,
    /// Backend (for a graph file: required; for a repro: overrides the manifest's).
    #[arg(long)]
    pub backend: Option<String>,
    /// Repro level 0-4 (default: GRAPHBUG_REPRO_LEVEL, else 4 for a graph file).
    #[arg(long, value_parser = clap::value_parser!(u8).range(0..=4))]
    pub level: Option<u8>,
    /// Inputs for a graph file (.safetensors/.npz); without it, seeded random inputs.
    #[arg(long)]
    pub inputs: Option<PathBuf>,
    /// Seed of random inputs.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Where a graph file's repro goes (for a dump: a repro directory a failing module,
    /// and the summary).
    #[arg(long, default_value = "repro_out")]
    pub out: PathBuf,
    /// Run the backend in worker processes, so crashes and hangs become verdicts (the
    /// default; kept for compatibility).
    #[arg(long, conflicts_with = "no_isolate")]
    pub isolate: bool,
    /// Run the backend in this process: a crash ends the run and nothing bounds a hang.
    #[arg(long, conflicts_with = "timeout")]
    pub no_isolate: bool,
    /// Seconds a backend run may take before it counts as a hang. Default: derived from
    /// the graph's eager run (printed).
    #[arg(long, value_parser = parse_timeout)]
    pub timeout: Option<Duration>,
    /// Regex the failure message must match.
    #[arg(long)]
    pub check_str: Option<String>,
    /// Minify accuracy failures counting every output (TorchDynamo's strict_accuracy);
    /// recorded in the repro directory. By default non-floating outputs are ignored
    /// (unless only they show the failure).
    #[arg(long)]
    pub strict_accuracy: bool,
    /// For a flaky failure: `minify` runs the original K times and holds candidates to
    /// its failure rate; `run` re-checks a recorded rate over K runs (default: as many as
    /// it was measured over).
    #[arg(long, value_name = "K", value_parser = clap::value_parser!(u32).range(2..=1000))]
    pub repeat: Option<u32>,
    /// For a graph file: write the repro directory and stop, without minifying.
    #[arg(long)]
    pub no_minify: bool,
    /// After the repro and its minification: bisect the backend's passes on the minified
    /// program (XLA: which of the plugin's HLO passes makes the failure, with a
    /// workaround), into DIR/bisect; the report shows both answers.
    #[arg(long)]
    pub bisect: bool,
    /// For `minify` of a repro directory: what counts as failing, as `graphbug minify`
    /// takes it (compile, runtime, accuracy, contains:OP[,OP...]). Default: the failure
    /// the directory records; for one that records none (a captured graph), any failure
    /// of the backend, wrong results included (compared with eager, as level 4 does).
    #[arg(long)]
    pub check: Option<Check>,
    #[command(flatten)]
    pub workers: WorkerArgs,
}

impl ReproArgs {
    /// The flow's request these arguments make (the dialect's own options aside).
    pub fn request(&self) -> anyhow::Result<graphbug::flow::repro::ReproRequest> {
        Ok(graphbug::flow::repro::ReproRequest {
            backend: self.backend.clone(),
            level: self.level,
            inputs: self.inputs.clone(),
            seed: self.seed,
            out: self.out.clone(),
            in_process: self.no_isolate,
            timeout: self.timeout,
            check_str: self.check_str.clone(),
            strict_accuracy: self.strict_accuracy,
            repeat: self.repeat,
            no_minify: self.no_minify,
            check: self.check.clone(),
            workers: self.workers.workers()?,
            one_of_many: false,
            bisect: self.bisect,
        })
    }
}

impl RunArgs {
    /// The flow's request these arguments make (the dialect's own options aside).
    pub fn request(&self) -> graphbug::flow::run::RunRequest {
        graphbug::flow::run::RunRequest {
            file: self.file.clone(),
            backend: self.backend.clone(),
            inputs: self.inputs.clone(),
            seed: self.seed,
            save_outputs: self.save_outputs.clone(),
            compare: self.compare.clone(),
            timeout: self.bound.timeout,
            in_process: self.bound.no_isolate,
        }
    }
}
