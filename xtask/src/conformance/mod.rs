//! The conformance runner: every case PyTorch produced (see `xtask/conformance/gen_cases.py`)
//! and every XLA program JAX lowered (`xtask/conformance/gen_xla_cases.py`) goes through
//! graphbug's stages for its source, each bounded by a timeout and run only when the stages
//! it needs passed; the report counts passed / reached per stage. HLO modules as XLA's
//! developers write them (the `xla-text` source: [`xla_text`]) are made into cases here.

pub mod dump;
pub mod report;
pub mod safetensors;
pub mod xla;
pub mod xla_text;

use std::collections::BTreeMap;
use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use graphbug_run::progress::Progress;
use regex::Regex;
use serde_json::Value;

pub use report::Report;

/// The stages of PyTorch's cases (opinfo, zoo, capture), in order. Where graphbug has no
/// `functionalize` command, the joint stage (which functionalizes first) covers that one.
pub const STAGES: [Stage; 10] = [
    Stage::Parse,
    Stage::Meta,
    Stage::Values,
    Stage::Functionalize,
    Stage::Joint,
    Stage::PartitionDefault,
    Stage::PartitionMinCut,
    Stage::Peak,
    Stage::AotEager,
    Stage::Minify,
];

/// The stages of XLA programs (the `xla` source), in order.
pub const XLA_STAGES: [Stage; 7] = [
    Stage::Fmt,
    Stage::Proto,
    Stage::Check,
    Stage::RunHlo,
    Stage::RunStableHlo,
    Stage::MinifyHlo,
    Stage::BisectHlo,
];

/// The stages of HLO modules as XLA's developers write them (the `xla-text` source).
pub const XLA_TEXT_STAGES: [Stage; 2] = [Stage::TextFmt, Stage::TextCheck];

/// The stages of XLA dump directories (the `xla-dump` source: [`dump`]).
pub const DUMP_STAGES: [Stage; 2] = [Stage::DumpCheck, Stage::DumpMinify];

/// The stages a case of `source` goes through: PyTorch/XLA's modules (`torch_xla`) go
/// through JAX's programs' stages.
pub fn stages_of(source: &str) -> &'static [Stage] {
    match source {
        "xla" | "torch_xla" => &XLA_STAGES,
        "xla-text" => &XLA_TEXT_STAGES,
        "xla-dump" => &DUMP_STAGES,
        _ => &STAGES,
    }
}

/// Who made a source's cases (and skipped those it could not make).
pub fn producer_of(source: &str) -> &'static str {
    match source {
        "xla" => "JAX",
        "torch_xla" => "PyTorch/XLA",
        "xla-text" => "XLA's parser",
        "xla-dump" => "the framework",
        _ => "PyTorch",
    }
}

/// One stage of the suite.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Stage {
    /// `graphbug fmt forward.py` re-prints the file byte for byte (comment lines aside).
    Parse,
    /// `graphbug check --meta`: every annotation agrees with libtorch's meta kernels.
    Meta,
    /// `graphbug run --compare`: eager values match PyTorch's.
    Values,
    /// `graphbug functionalize`: the functional graph returns the mutated inputs' new
    /// values and the outputs PyTorch computed (without the command: part of the joint).
    Functionalize,
    /// `graphbug joint`, run on primals and tangents: gradients match `torch.autograd.grad`.
    Joint,
    /// graphbug's default partition of PyTorch's joint saves as many bytes as functorch's.
    PartitionDefault,
    /// graphbug's min-cut partition of PyTorch's joint saves at most functorch's bytes.
    PartitionMinCut,
    /// The modelled peak memory of that partition's training step equals the peak
    /// measured by running it (`graphbug partition --measure-peak`).
    Peak,
    /// An aot_eager training step (`graphbug run --backend aot_eager --backward`): outputs
    /// and gradients against PyTorch's, when graphbug has the flag.
    AotEager,
    /// A captured graph (`capture` cases) as a repro directory, minified under a
    /// `fault:runtime@OP` backend: one node is left, it calls OP, and the minified
    /// directory reproduces the fault.
    Minify,
    /// (XLA) `graphbug fmt` prints each program text as written: HLO in JAX's style and in
    /// XLA's `%` style byte for byte, StableHLO text as written, StableHLO bytecode as JAX
    /// reads it.
    Fmt,
    /// (XLA) `graphbug fmt X.pb` prints an HloModuleProto (XLA's parse of the text, and JAX's
    /// own) as XLA prints it.
    Proto,
    /// (XLA) `graphbug check`: the parameters and outputs it counts are JAX's flattened
    /// arguments and outputs.
    Check,
    /// (XLA) `graphbug run` of the HLO text on `pjrt:cpu` gives JAX's outputs.
    RunHlo,
    /// (XLA) `graphbug run` of the StableHLO (text, and bytecode) on `pjrt:cpu` gives JAX's
    /// outputs.
    RunStableHlo,
    /// (XLA) `graphbug minify` of the HLO text under a runtime fault pinned to an
    /// instruction in the middle of the entry computation ends at that instruction alone.
    MinifyHlo,
    /// (XLA) `graphbug bisect` of the HLO text for `contains:fusion` (the plugin's optimized
    /// program has a fusion): the passes turned off that make the fusions go away, with the
    /// workaround checked, or the passes the program needs that make them.
    BisectHlo,
    /// (XLA text) `graphbug fmt` prints a module XLA's parser reads byte for byte.
    TextFmt,
    /// (XLA text) `graphbug check` passes what XLA's parser reads and refuses what it
    /// refuses (or what XLA's verifier refuses).
    TextCheck,
    /// (XLA dump) `graphbug repro DUMP` on the CPU plugin passes every module it checks.
    DumpCheck,
    /// (XLA dump) a fault at one instruction of one module fails that module alone, which
    /// is minified to that instruction.
    DumpMinify,
}

impl Stage {
    /// The stage's name in tables and JSON.
    pub fn name(self) -> &'static str {
        match self {
            Stage::Parse => "parse",
            Stage::Meta => "meta",
            Stage::Values => "values",
            Stage::Functionalize => "functionalize",
            Stage::Joint => "joint",
            Stage::PartitionDefault => "partition-default",
            Stage::PartitionMinCut => "partition-mincut",
            Stage::Peak => "peak",
            Stage::AotEager => "aot-eager",
            Stage::Minify => "minify",
            Stage::Fmt => "fmt",
            Stage::Proto => "proto",
            Stage::Check => "check",
            Stage::RunHlo => "run-hlo",
            Stage::RunStableHlo => "run-stablehlo",
            Stage::MinifyHlo => "minify-hlo",
            Stage::BisectHlo => "bisect-hlo",
            Stage::TextFmt => "text-fmt",
            Stage::TextCheck => "text-check",
            Stage::DumpCheck => "dump-check",
            Stage::DumpMinify => "dump-minify",
        }
    }
}

/// What one stage did for one case.
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    /// Ran and matched PyTorch.
    Passed,
    /// Ran and did not match (or graphbug failed): the first error line.
    Failed(String),
    /// Not run because a stage it needs did not pass.
    NotReached(Stage),
    /// Nothing to check for this case (random values, nothing requires grad, ...).
    NotApplicable(String),
    /// graphbug has no command for this stage.
    NotAvailable(String),
}

impl Outcome {
    /// Whether the stage ran (passed or failed).
    pub fn reached(&self) -> bool {
        matches!(self, Outcome::Passed | Outcome::Failed(_))
    }

    /// The status word in the JSON report.
    pub fn status(&self) -> &'static str {
        match self {
            Outcome::Passed => "passed",
            Outcome::Failed(_) => "failed",
            Outcome::NotReached(_) => "not reached",
            Outcome::NotApplicable(_) => "n/a",
            Outcome::NotAvailable(_) => "not available",
        }
    }
}

/// One generated case: its directory and case.json.
#[derive(Clone, Debug)]
pub struct Case {
    /// The case id (`opinfo/acos/f32/0`, `zoo/resnet18/train`).
    pub id: String,
    /// The case directory.
    pub dir: PathBuf,
    /// case.json.
    pub json: Value,
}

impl Case {
    /// `opinfo`, `zoo`, `capture` or `xla`.
    pub fn source(&self) -> &str {
        self.json["source"].as_str().unwrap_or("?")
    }

    /// The op (OpInfo) or model (zoo) name.
    pub fn op(&self) -> &str {
        self.json["op"].as_str().unwrap_or("?")
    }

    /// Why the case has nothing to run: PyTorch or JAX could not produce it (`skipped`) or
    /// the case files cannot hold its tensors (`unsupported`); None for a runnable case.
    pub fn not_run(&self) -> Option<Skipped> {
        let status = self.json["status"].as_str().unwrap_or("no status");
        (status != "ok").then(|| Skipped {
            id: self.id.clone(),
            source: self.source().to_string(),
            by_pytorch: status != "unsupported",
            reason: self.json["reason"]
                .as_str()
                .unwrap_or("no reason given")
                .to_string(),
        })
    }
}

/// A generated case with nothing to run.
#[derive(Clone, Debug, PartialEq)]
pub struct Skipped {
    /// The case id.
    pub id: String,
    /// `opinfo` or `zoo`.
    pub source: String,
    /// Its producer (PyTorch, or JAX for `xla`) could not trace, lower or run it (else: the
    /// case files cannot hold it).
    pub by_pytorch: bool,
    /// Why.
    pub reason: String,
}

/// Finds every case.json under `root`, sorted by case id. A directory holding case
/// files but no case.json is an error naming it.
pub fn discover(root: &Path) -> Result<Vec<Case>> {
    if !root.is_dir() {
        bail!("cases directory {} does not exist", root.display());
    }
    let mut cases = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let mut has_files = false;
        let mut has_case = false;
        let mut subdirs = Vec::new();
        for entry in fs::read_dir(&dir).with_context(|| format!("cannot list {}", dir.display()))? {
            let path = entry?.path();
            if path.is_dir() {
                subdirs.push(path);
            } else if path.file_name().is_some_and(|n| n == "case.json") {
                has_case = true;
            } else {
                has_files = true;
            }
        }
        // A case's own folders (an XLA dump) are its files, not cases.
        if !has_case {
            stack.extend(subdirs);
        }
        if has_case {
            let path = dir.join("case.json");
            let text = fs::read_to_string(&path)
                .with_context(|| format!("cannot read {}", path.display()))?;
            let json: Value = serde_json::from_str(&text)
                .with_context(|| format!("{} is not valid JSON", path.display()))?;
            let id = json["id"]
                .as_str()
                .with_context(|| format!("{} has no \"id\"", path.display()))?
                .to_string();
            cases.push(Case { id, dir, json });
        } else if has_files {
            bail!(
                "case directory {} has files but no case.json (regenerate the cases)",
                dir.display()
            );
        }
    }
    cases.sort_by(|a, b| a.id.cmp(&b.id));
    Ok(cases)
}

/// How to run the suite.
#[derive(Clone, Debug)]
pub struct Options {
    /// The graphbug binary.
    pub graphbug: PathBuf,
    /// Where the cases are.
    pub cases: PathBuf,
    /// Scratch directory for graphbug's files (one subdirectory per case).
    pub work: PathBuf,
    /// Parallel cases.
    pub jobs: usize,
    /// Only case ids this matches.
    pub filter: Option<Regex>,
    /// Time limit of one graphbug command.
    pub timeout: Duration,
    /// Print progress on stderr: a bar over the cases on a terminal (see
    /// [`graphbug_run::progress`]), else a line every 5%; a line per failing case.
    pub progress: bool,
    /// More environment of every graphbug command (`GRAPHBUG_CPU_OBSERVATION_BYTES=0`).
    pub env: Vec<(String, String)>,
    /// Stages run only on the cases whose id matches (the others' outcome: n/a), where a
    /// stage costs more than a run of the suite may spend on every case.
    pub stage_cases: Vec<(Stage, Regex)>,
}

/// The result of one case.
#[derive(Clone, Debug)]
pub struct CaseResult {
    /// The case id.
    pub id: String,
    /// `opinfo` or `zoo`.
    pub source: String,
    /// The op or model.
    pub op: String,
    /// Outcome per stage of its source, in [`stages_of`] order.
    pub stages: Vec<(Stage, Outcome)>,
    /// Wall time of the case.
    pub seconds: f64,
    /// What a reader should know of how a stage passed (gradients judged by finite
    /// differences where PyTorch's own are known wrong).
    pub notes: Vec<String>,
}

impl CaseResult {
    /// The outcome of `stage`.
    pub fn outcome(&self, stage: Stage) -> &Outcome {
        &self
            .stages
            .iter()
            .find(|(s, _)| *s == stage)
            .expect("invariant: a case result holds every stage of its source")
            .1
    }

    /// Whether every stage the case reached passed.
    pub fn passed(&self) -> bool {
        self.stages
            .iter()
            .all(|(_, o)| !matches!(o, Outcome::Failed(_)))
    }
}

/// What graphbug offers beyond the basic commands (probed once from its `--help`).
#[derive(Clone, Debug, Default)]
pub struct Capabilities {
    /// `graphbug run --backward` exists.
    pub run_backward: bool,
    /// `graphbug functionalize` exists.
    pub functionalize: bool,
}

impl Capabilities {
    /// Asks the binary's help texts.
    pub fn probe(graphbug: &Path) -> Result<Capabilities> {
        let help = |args: &[&str]| -> Result<String> {
            let out = Command::new(graphbug)
                .args(args)
                .output()
                .with_context(|| format!("cannot run {}", graphbug.display()))?;
            if !out.status.success() {
                bail!(
                    "`{} {}` failed: {}",
                    graphbug.display(),
                    args.join(" "),
                    first_error_line(&String::from_utf8_lossy(&out.stderr), "")
                );
            }
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        };
        let top = help(&["--help"])?;
        let run = help(&["run", "--help"])?;
        Ok(Capabilities {
            run_backward: run.contains("--backward"),
            functionalize: top
                .lines()
                .any(|l| l.trim_start().starts_with("functionalize ")),
        })
    }
}

/// Runs every case (in parallel) and returns the report, in case-id order.
pub fn run(opts: &Options) -> Result<Report> {
    if !opts.graphbug.is_file() {
        bail!(
            "graphbug binary {} not found (build it with `cargo build -p graphbug`)",
            opts.graphbug.display()
        );
    }
    let caps = Capabilities::probe(&opts.graphbug)?;
    let all = discover(&opts.cases)?;
    let cases: Vec<Case> = all
        .into_iter()
        .filter(|c| opts.filter.as_ref().is_none_or(|r| r.is_match(&c.id)))
        .collect();
    let (skipped, runnable): (Vec<Case>, Vec<Case>) =
        cases.into_iter().partition(|c| c.not_run().is_some());
    let skipped: Vec<Skipped> = skipped.iter().filter_map(Case::not_run).collect();
    fs::create_dir_all(&opts.work)
        .with_context(|| format!("cannot create {}", opts.work.display()))?;
    let total = runnable.len();
    let next = AtomicUsize::new(0);
    let done = AtomicUsize::new(0);
    let failed = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<CaseResult>>> = Mutex::new(vec![None; total]);
    let started = Instant::now();
    let bar = if opts.progress {
        Progress::bar("conformance", total as u64)
    } else {
        Progress::hidden()
    };
    bar.set_message("cases, 0 failing");
    std::thread::scope(|scope| {
        for _ in 0..opts.jobs.max(1) {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::SeqCst);
                let Some(case) = runnable.get(i) else { break };
                let result = run_case(opts, &caps, case);
                let k = done.fetch_add(1, Ordering::SeqCst) + 1;
                if !result.passed() {
                    failed.fetch_add(1, Ordering::SeqCst);
                }
                if opts.progress {
                    let failed = failed.load(Ordering::SeqCst);
                    progress(&bar, &result, (k, total, failed), started);
                }
                results
                    .lock()
                    .expect("invariant: no worker panics while holding the lock")[i] = Some(result);
            });
        }
    });
    bar.finish();
    let results = results
        .into_inner()
        .expect("invariant: no worker panicked")
        .into_iter()
        .map(|r| r.expect("invariant: every case ran"))
        .collect();
    Ok(Report {
        results,
        skipped,
        seconds: started.elapsed().as_secs_f64(),
    })
}

/// One progress line per failing case (through `bar`), and the bar moved on to `k` of
/// `total` cases with the `failed` count; without a terminal, a count every 5% instead.
fn progress(
    bar: &Progress,
    result: &CaseResult,
    (k, total, failed): (usize, usize, usize),
    started: Instant,
) {
    for (stage, o) in &result.stages {
        if let Outcome::Failed(line) = o {
            bar.println(format!(
                "conformance: FAIL {} [{}] {line}",
                result.id,
                stage.name()
            ));
        }
    }
    bar.inc(1);
    bar.set_message(format!("cases, {failed} failing"));
    let step = (total / 20).max(1);
    if !bar.on_terminal() && (k.is_multiple_of(step) || k == total) {
        eprintln!(
            "conformance: {k}/{total} cases ({:.0}%), {failed} failing, {:.0} s",
            100.0 * k as f64 / total.max(1) as f64,
            started.elapsed().as_secs_f64()
        );
    }
}

/// Runs the stages of one case.
pub fn run_case(opts: &Options, caps: &Capabilities, case: &Case) -> CaseResult {
    let started = Instant::now();
    let work = opts.work.join(&case.id);
    let mut stages: Vec<(Stage, Outcome)> = Vec::new();
    let prepared = fs::remove_dir_all(&work)
        .or_else(|e| {
            if e.kind() == std::io::ErrorKind::NotFound {
                Ok(())
            } else {
                Err(e)
            }
        })
        .and_then(|()| fs::create_dir_all(&work));
    let runner = Runner {
        opts,
        case,
        work: &work,
        notes: std::cell::RefCell::new(Vec::new()),
    };
    for &stage in stages_of(case.source()) {
        let outcome = match &prepared {
            Err(e) => Outcome::Failed(format!(
                "cannot prepare work directory {}: {e}",
                work.display()
            )),
            Ok(()) => {
                let needs: &[Stage] = match stage {
                    Stage::Meta
                    | Stage::Values
                    | Stage::Functionalize
                    | Stage::Joint
                    | Stage::AotEager => &[Stage::Parse],
                    Stage::Minify => &[Stage::Parse, Stage::Values],
                    // Needs graphbug's min-cut partition, not functorch's figures.
                    Stage::Peak => &[Stage::Parse],
                    // Reads the modules dump-check found.
                    Stage::DumpMinify => &[Stage::DumpCheck],
                    _ => &[],
                };
                let selected = opts
                    .stage_cases
                    .iter()
                    .all(|(s, r)| *s != stage || r.is_match(&case.id));
                match needs
                    .iter()
                    .find(|n| stages.iter().any(|(s, o)| s == *n && *o != Outcome::Passed))
                {
                    Some(&missing) => Outcome::NotReached(missing),
                    None if !selected => {
                        Outcome::NotApplicable("not among this run's cases for the stage".into())
                    }
                    None => runner.stage(stage, caps),
                }
            }
        };
        stages.push((stage, outcome));
    }
    CaseResult {
        id: case.id.clone(),
        source: case.source().to_string(),
        op: case.op().to_string(),
        stages,
        seconds: started.elapsed().as_secs_f64(),
        notes: runner.notes.into_inner(),
    }
}

/// Runs graphbug for one case.
struct Runner<'a> {
    opts: &'a Options,
    case: &'a Case,
    work: &'a Path,
    /// See [`CaseResult::notes`].
    notes: std::cell::RefCell<Vec<String>>,
}

/// A finished (or killed) graphbug command.
struct Exec {
    /// Exit code; None when killed by a signal or the time limit.
    code: Option<i32>,
    timed_out: bool,
    stdout: String,
    stderr: String,
}

impl Exec {
    /// Passed when the command exited 0, else failed with [`Self::error_line`].
    fn outcome(&self, what: &str) -> Outcome {
        if self.code == Some(0) {
            Outcome::Passed
        } else {
            Outcome::Failed(self.error_line(what))
        }
    }

    /// The first line that explains a failure.
    fn error_line(&self, what: &str) -> String {
        if self.timed_out {
            return format!("{what}: timed out");
        }
        let line = first_error_line(&self.stderr, &self.stdout);
        match self.code {
            Some(code) => format!("{what} (exit {code}): {line}"),
            None => format!("{what} crashed (killed by a signal): {line}"),
        }
    }
}

/// `XLA_FLAGS` for graphbug's XLA runs: the caller's, with JAX's CPU client's min/max.
fn xla_flags() -> String {
    let mine = std::env::var("XLA_FLAGS").unwrap_or_default();
    format!("{mine} --xla_cpu_enable_fast_min_max=false")
        .trim()
        .to_string()
}

/// The first line of `stderr` that looks like an error, else its first line, else the
/// first line of `stdout` that reports a mismatch, else its first line.
pub fn first_error_line(stderr: &str, stdout: &str) -> String {
    let nonempty = |s: &str| -> Vec<String> {
        s.lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .map(str::to_string)
            .collect()
    };
    let err = nonempty(stderr);
    let out = nonempty(stdout);
    let is_note = |l: &&String| l.starts_with("note:") || l.starts_with("warning:");
    let line = err
        .iter()
        .find(|l| l.to_lowercase().contains("error"))
        .or_else(|| out.iter().find(|l| l.contains(": FAIL")))
        .or_else(|| {
            out.iter().find(|l| {
                let l = l.to_lowercase();
                l.contains("fail") || l.contains("mismatch") || l.contains("differ")
            })
        })
        .or_else(|| err.iter().find(|l| !is_note(l)))
        .or_else(|| out.first())
        .cloned()
        .unwrap_or_else(|| "(no output)".to_string());
    line.chars().take(300).collect()
}

impl Runner<'_> {
    fn file(&self, name: &str) -> PathBuf {
        self.case.dir.join(name)
    }

    /// Runs graphbug with `args` under the time limit; stdout and stderr go to
    /// `<work>/<tag>.stdout|.stderr`.
    fn graphbug(&self, tag: &str, args: &[&std::ffi::OsStr]) -> Result<Exec> {
        let out_path = self.work.join(format!("{tag}.stdout"));
        let err_path = self.work.join(format!("{tag}.stderr"));
        let out = File::create(&out_path)
            .with_context(|| format!("cannot create {}", out_path.display()))?;
        let err = File::create(&err_path)
            .with_context(|| format!("cannot create {}", err_path.display()))?;
        let mut cmd = Command::new(&self.opts.graphbug);
        let mut child = crate::process::die_with_parent(&mut cmd)
            .args(args)
            // PyTorch made the references on one thread (gen_cases.py): a reduction split
            // across threads sums in another order, which deep train-mode networks
            // (densenet121's first conv weight gradient) amplify past the tolerance.
            .env("OMP_NUM_THREADS", "1")
            // JAX's CPU client compiles with XLA's IEEE min/max (NaN wins); the
            // xla-cpu-pjrt plugin's default is fast min/max (max(inf, NaN) = inf). The XLA
            // runs compile as JAX's references were made.
            .env("XLA_FLAGS", xla_flags())
            .envs(self.opts.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .with_context(|| format!("cannot run {}", self.opts.graphbug.display()))?;
        let deadline = Instant::now() + self.opts.timeout;
        let mut timed_out = false;
        let status = loop {
            if let Some(status) = child.try_wait()? {
                break status;
            }
            if Instant::now() >= deadline {
                timed_out = true;
                let _ = child.kill();
                break child.wait()?;
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        Ok(Exec {
            code: if timed_out { None } else { status.code() },
            timed_out,
            stdout: fs::read_to_string(&out_path).unwrap_or_default(),
            stderr: fs::read_to_string(&err_path).unwrap_or_default(),
        })
    }

    fn stage(&self, stage: Stage, caps: &Capabilities) -> Outcome {
        let captured = self.case.source() == "capture";
        let result = match stage {
            Stage::Minify if captured => self.minify(),
            Stage::Minify => Ok(Outcome::NotApplicable(
                "only captured graphs are minified".into(),
            )),
            // A captured graph (symbolic sizes, dynamo-level calls) is checked by parse,
            // values (the symbols bind from the inputs' sizes) and minify.
            _ if captured && !matches!(stage, Stage::Parse | Stage::Values) => {
                Ok(Outcome::NotApplicable(
                    "a captured graph is checked by parse, values and minify".into(),
                ))
            }
            Stage::Parse => self.parse(),
            Stage::Meta => self.meta(),
            Stage::Values => self.values(),
            Stage::Functionalize if caps.functionalize => self.functionalize(),
            Stage::Functionalize => Ok(Outcome::NotAvailable(
                "no functionalize command: the joint stage functionalizes first".into(),
            )),
            Stage::Joint => self.joint(),
            Stage::PartitionDefault => self.partition(false),
            Stage::PartitionMinCut => self.partition(true),
            Stage::Peak => self.peak(),
            Stage::AotEager if caps.run_backward => self.aot_eager(),
            Stage::AotEager => Ok(Outcome::NotAvailable(
                "graphbug run has no --backward (aot_eager training step)".into(),
            )),
            Stage::Fmt => self.xla_fmt(),
            Stage::Proto => self.xla_proto(),
            Stage::Check => self.xla_check(),
            Stage::RunHlo => self.xla_run("run_hlo"),
            Stage::RunStableHlo => self.xla_run("run_stablehlo"),
            Stage::MinifyHlo => self.xla_minify(),
            Stage::BisectHlo => self.xla_bisect(),
            Stage::TextFmt => self.text_fmt(),
            Stage::TextCheck => self.text_check(),
            Stage::DumpCheck => self.dump_check(),
            Stage::DumpMinify => self.dump_minify(),
        };
        result.unwrap_or_else(|e| Outcome::Failed(format!("runner error: {e:#}")))
    }

    /// Byte-exact round trip: `graphbug fmt` prints forward.py again (less comment and
    /// blank lines, which the printer does not keep).
    fn parse(&self) -> Result<Outcome> {
        let path = self.file("forward.py");
        let original =
            fs::read_to_string(&path).with_context(|| format!("cannot read {}", path.display()))?;
        let exec = self.graphbug("fmt", &[os("fmt"), path.as_os_str()])?;
        if exec.code != Some(0) {
            return Ok(Outcome::Failed(exec.error_line("fmt")));
        }
        // Comments and the blank lines PyTorch puts between their groups are not kept.
        let expected: String = original
            .lines()
            .filter(|l| !l.trim_start().starts_with('#') && !l.trim().is_empty())
            .map(|l| format!("{l}\n"))
            .collect();
        if exec.stdout == expected {
            return Ok(Outcome::Passed);
        }
        let got: Vec<&str> = exec.stdout.lines().collect();
        let want: Vec<&str> = expected.lines().collect();
        let k = (0..want.len().max(got.len()))
            .find(|&i| want.get(i) != got.get(i))
            .unwrap_or(0);
        Ok(Outcome::Failed(format!(
            "fmt re-prints line {} differently: PyTorch `{}`, graphbug `{}`",
            k + 1,
            want.get(k).map_or("<end>", |l| l.trim()),
            got.get(k).map_or("<end>", |l| l.trim())
        )))
    }

    /// `graph` as graphbug runs it on `inputs`: `graphbug specialize --aten`.
    fn lowered(&self, tag: &str, graph: &Path, inputs: &Path) -> Result<Exec> {
        self.graphbug(
            tag,
            &[
                os("specialize"),
                graph.as_os_str(),
                os("--inputs"),
                inputs.as_os_str(),
                os("--aten"),
            ],
        )
    }

    /// The captured graph as a repro directory, minified under a fault injected at the
    /// middle aten call graphbug runs: the minified graph must be one node calling that
    /// op, and reproduce the fault.
    fn minify(&self) -> Result<Outcome> {
        let graph = self.file("forward.py");
        let inputs = self.file("inputs.safetensors");
        let lowered = self.lowered("lower", &graph, &inputs)?;
        if lowered.code != Some(0) {
            return Ok(Outcome::Failed(lowered.error_line("specialize --aten")));
        }
        let ops = aten_calls(&lowered.stdout);
        let Some(op) = ops.get(ops.len() / 2) else {
            return Ok(Outcome::NotApplicable("the graph calls no aten op".into()));
        };
        let dir = self.work.join("repro");
        fs::create_dir_all(&dir)?;
        for (from, to) in [
            ("forward.py", "graph.py"),
            ("inputs.safetensors", "inputs.safetensors"),
            ("manifest.json", "manifest.json"),
            ("constants.safetensors", "constants.safetensors"),
        ] {
            if from == "constants.safetensors" && !self.file(from).is_file() {
                continue;
            }
            fs::copy(self.file(from), dir.join(to))
                .with_context(|| format!("copying {from} to {}", dir.display()))?;
        }
        let backend = format!("fault:runtime@{op}");
        let min = self.graphbug(
            "minify",
            &[
                os("repro"),
                dir.as_os_str(),
                os("minify"),
                os("--backend"),
                os(&backend),
            ],
        )?;
        if min.code != Some(0) {
            return Ok(Outcome::Failed(
                min.error_line(&format!("repro minify --backend {backend}")),
            ));
        }
        let minified = dir.join("minified");
        let mgraph = minified.join("graph.py");
        let text = fs::read_to_string(&mgraph)
            .with_context(|| format!("cannot read {}", mgraph.display()))?;
        let calls = call_lines(&text);
        if calls.len() != 1 {
            return Ok(Outcome::Failed(format!(
                "minified under {backend} to {} calls, not 1: {}",
                calls.len(),
                calls.join("; ")
            )));
        }
        let mlowered = self.lowered(
            "minified-lower",
            &mgraph,
            &minified.join("inputs.safetensors"),
        )?;
        if !aten_calls(&mlowered.stdout).contains(op) {
            return Ok(Outcome::Failed(format!(
                "minified under {backend} to a node that does not call {op}: {}",
                mlowered.error_line("specialize --aten")
            )));
        }
        let again = self.graphbug(
            "minified-run",
            &[os("repro"), minified.as_os_str(), os("run")],
        )?;
        Ok(
            if again.code == Some(1) && again.stdout.starts_with("reproduced: ") {
                Outcome::Passed
            } else {
                Outcome::Failed(again.error_line("repro minified run"))
            },
        )
    }

    fn meta(&self) -> Result<Outcome> {
        let path = self.file("forward.py");
        let inputs = self.file("inputs.safetensors");
        let mut args = vec![
            os("check"),
            path.as_os_str(),
            os("--meta"),
            os("--no-isolate"),
        ];
        // With the inputs, shapes that depend on their values are checked on them too.
        if inputs.is_file() {
            args.extend([os("--inputs"), inputs.as_os_str()]);
        }
        let exec = self.graphbug("meta", &args)?;
        Ok(exec.outcome("check --meta"))
    }

    fn random(&self) -> Option<Outcome> {
        self.case.json["random"]
            .as_bool()
            .unwrap_or(false)
            .then(|| {
                Outcome::NotApplicable(
                    "random or uninitialized ops: PyTorch's values cannot be reproduced".into(),
                )
            })
    }

    fn values(&self) -> Result<Outcome> {
        if let Some(na) = self.random() {
            return Ok(na);
        }
        // A captured graph's `self.<attr>` constants come in a file of their own.
        let constants = self.file("constants.safetensors");
        let extra: Vec<&std::ffi::OsStr> = if constants.is_file() {
            vec![os("--constants"), constants.as_os_str()]
        } else {
            Vec::new()
        };
        let exec = self.run_compare(
            "values",
            &self.file("forward.py"),
            &self.file("inputs.safetensors"),
            &self.file("outputs.safetensors"),
            &extra,
        )?;
        Ok(exec.outcome("run --compare"))
    }

    /// `graphbug functionalize`: the mutated inputs PyTorch's eager run changed, and the
    /// functional graph's outputs (mutated inputs' new values, then the outputs) against
    /// PyTorch's values.
    fn functionalize(&self) -> Result<Outcome> {
        if let Some(na) = self.random() {
            return Ok(na);
        }
        let exec = self.graphbug(
            "functionalize",
            &[
                os("functionalize"),
                self.file("forward.py").as_os_str(),
                os("--no-isolate"),
            ],
        )?;
        if exec.code != Some(0) {
            return Ok(Outcome::Failed(exec.error_line("functionalize")));
        }
        let functional = self.work.join("functional.py");
        fs::write(&functional, &exec.stdout)?;
        let Some(ours) = parse_mutated_inputs(&exec.stderr) else {
            return Ok(Outcome::Failed(
                "functionalize printed no `mutated inputs: N (names)` line".into(),
            ));
        };
        let theirs = string_list(&self.case.json["mutated_inputs"]);
        let (mut a, mut b) = (ours.clone(), theirs.clone());
        a.sort();
        b.sort();
        if a != b {
            return Ok(Outcome::Failed(format!(
                "functionalize finds {} mutated inputs, PyTorch's eager run mutated {} (only graphbug: {}; only PyTorch: {})",
                ours.len(),
                theirs.len(),
                only_in(&ours, &theirs),
                only_in(&theirs, &ours)
            )));
        }
        let mut expected = BTreeMap::new();
        if !ours.is_empty() {
            let values = safetensors::read(&self.file("mutated.safetensors"))?;
            for (k, name) in ours.iter().enumerate() {
                let t = values
                    .get(name)
                    .with_context(|| format!("mutated.safetensors has no `{name}`"))?;
                expected.insert(format!("out{k}"), t.clone());
            }
        }
        let num_outputs = self.case.json["num_outputs"].as_u64().unwrap_or(0) as usize;
        let outputs = safetensors::read(&self.file("outputs.safetensors"))?;
        for i in 0..num_outputs {
            let t = outputs
                .get(&format!("out{i}"))
                .with_context(|| format!("outputs.safetensors has no `out{i}`"))?;
            expected.insert(format!("out{}", ours.len() + i), t.clone());
        }
        let expected_path = self.work.join("functional_expected.safetensors");
        safetensors::write(&expected_path, &expected)?;
        let exec = self.run_compare(
            "functional_run",
            &functional,
            &self.file("inputs.safetensors"),
            &expected_path,
            &[],
        )?;
        Ok(exec.outcome("run functional --compare"))
    }

    /// Why the gradient stages have nothing to check, if they have not: PyTorch gave no
    /// gradients, its float32 gradients are ill-conditioned, or the values are random.
    fn gradients_na(&self) -> Option<Outcome> {
        let grads = &self.case.json["grads"];
        if let Some(reason) = grads["skip"].as_str() {
            return Some(Outcome::NotApplicable(reason.to_string()));
        }
        if let Some(why) = grads["ill_conditioned"].as_str() {
            return Some(Outcome::NotApplicable(format!(
                "ill-conditioned gradients: {why}"
            )));
        }
        self.random()
    }

    /// `graphbug run GRAPH --inputs INPUTS [EXTRA] --compare EXPECTED`, in this process.
    fn run_compare(
        &self,
        tag: &str,
        graph: &Path,
        inputs: &Path,
        expected: &Path,
        extra: &[&std::ffi::OsStr],
    ) -> Result<Exec> {
        let mut args = vec![
            os("run"),
            graph.as_os_str(),
            os("--inputs"),
            inputs.as_os_str(),
        ];
        args.extend_from_slice(extra);
        args.extend([os("--compare"), expected.as_os_str(), os("--no-isolate")]);
        self.graphbug(tag, &args)
    }

    /// Builds graphbug's joint graph, runs it on the primals and PyTorch's tangents and
    /// compares the forward outputs, mutated inputs and gradients with PyTorch's.
    fn joint(&self) -> Result<Outcome> {
        if let Some(na) = self.gradients_na() {
            return Ok(na);
        }
        let names = string_list(&self.case.json["inputs"]);
        let spec = self.requires_grad_spec();
        let exec = self.graphbug(
            "joint",
            &[
                os("joint"),
                self.file("forward.py").as_os_str(),
                os("--requires-grad"),
                os(&spec),
                os("--no-isolate"),
            ],
        )?;
        if exec.code != Some(0) {
            return Ok(Outcome::Failed(exec.error_line("joint")));
        }
        let joint_path = self.work.join("joint.py");
        fs::write(&joint_path, &exec.stdout)?;
        let Some((num_fwd, num_mutated)) = parse_num_fwd_outputs(&exec.stderr) else {
            return Ok(Outcome::Failed(
                "joint printed no `num_fwd_outputs = N (M mutated inputs)` line".into(),
            ));
        };
        let mutated = string_list(&self.case.json["mutated_inputs"]);
        let num_outputs = self.case.json["num_outputs"].as_u64().unwrap_or(0) as usize;
        if num_mutated != mutated.len() || num_fwd != num_mutated + num_outputs {
            return Ok(Outcome::Failed(format!(
                "joint has {num_fwd} forward outputs with {num_mutated} mutated inputs; PyTorch: {num_outputs} outputs, {} mutated inputs ({})",
                mutated.len(),
                mutated.join(", ")
            )));
        }
        // Inputs: primals_K = the forward's K-th input, constants as they are, tangents.
        let inputs = safetensors::read(&self.file("inputs.safetensors"))?;
        let mut joint_inputs = BTreeMap::new();
        for (key, t) in &inputs {
            match names.iter().position(|n| n == key) {
                Some(k) => joint_inputs.insert(format!("primals_{}", k + 1), t.clone()),
                None => joint_inputs.insert(key.clone(), t.clone()),
            };
        }
        joint_inputs.extend(safetensors::read(&self.file("tangents.safetensors"))?);
        let joint_inputs_path = self.work.join("joint_inputs.safetensors");
        safetensors::write(&joint_inputs_path, &joint_inputs)?;
        // Expected: out0.. = mutated inputs' new values, then outputs, then gradients at
        // num_fwd + input index (None gradients are absent, as `run` skips them).
        let mut expected = BTreeMap::new();
        if !mutated.is_empty() {
            let values = safetensors::read(&self.file("mutated.safetensors"))?;
            for (k, name) in mutated.iter().enumerate() {
                let t = values
                    .get(name)
                    .with_context(|| format!("mutated.safetensors has no `{name}`"))?;
                expected.insert(format!("out{k}"), t.clone());
            }
        }
        let outputs = safetensors::read(&self.file("outputs.safetensors"))?;
        for i in 0..num_outputs {
            let t = outputs
                .get(&format!("out{i}"))
                .with_context(|| format!("outputs.safetensors has no `out{i}`"))?;
            expected.insert(format!("out{}", num_mutated + i), t.clone());
        }
        let expected_path = self.work.join("joint_expected.safetensors");
        self.judge_gradients(|grads_file| {
            let mut expected = expected.clone();
            for (k, t) in self.grads_by_input(grads_file)? {
                expected.insert(format!("out{}", num_fwd + k), t);
            }
            safetensors::write(&expected_path, &expected)?;
            let exec = self.run_compare(
                "joint_run",
                &joint_path,
                &joint_inputs_path,
                &expected_path,
                &[],
            )?;
            Ok(match exec.outcome("run joint --compare") {
                Outcome::Failed(line) => {
                    Outcome::Failed(name_joint_output(line, num_fwd, num_mutated, &names))
                }
                passed => passed,
            })
        })
    }

    /// The gradients of a case file (`grads.safetensors`), by the index of their input.
    fn grads_by_input(&self, file: &str) -> Result<Vec<(usize, safetensors::RawTensor)>> {
        let names = string_list(&self.case.json["inputs"]);
        safetensors::read(&self.file(file))?
            .into_iter()
            .map(|(name, t)| {
                let k = names
                    .iter()
                    .position(|n| *n == name)
                    .with_context(|| format!("{file} has `{name}`, not an input"))?;
                Ok((k, t))
            })
            .collect()
    }

    /// Adds `note` to the case's notes, once.
    fn note(&self, note: String) {
        let mut notes = self.notes.borrow_mut();
        if !notes.contains(&note) {
            notes.push(note);
        }
    }

    /// A gradient stage's outcome: `check` against PyTorch's gradients; where that fails
    /// and PyTorch's own gradients are known wrong (OpInfo expects its gradcheck to fail,
    /// and they differ from float64 central differences: `grads_numeric.safetensors`),
    /// graphbug's pass when they match the finite differences instead.
    fn judge_gradients(&self, check: impl Fn(&str) -> Result<Outcome>) -> Result<Outcome> {
        let against_pytorch = check("grads.safetensors")?;
        let Outcome::Failed(line) = &against_pytorch else {
            return Ok(against_pytorch);
        };
        let Some(why) = self.case.json["grads"]["finite_differences"].as_str() else {
            return Ok(against_pytorch);
        };
        Ok(match check("grads_numeric.safetensors")? {
            Outcome::Passed => {
                self.note(format!(
                    "gradients judged by float64 finite differences: {why}"
                ));
                Outcome::Passed
            }
            Outcome::Failed(numeric) => {
                Outcome::Failed(format!("{line}; {why}, and against those: {numeric}"))
            }
            other => other,
        })
    }

    /// An aot_eager training step (`graphbug run --backend aot_eager --backward`) with
    /// PyTorch's tangents: outputs and gradients against PyTorch's.
    fn aot_eager(&self) -> Result<Outcome> {
        let grads = &self.case.json["grads"];
        if let Some(na) = self.gradients_na() {
            return Ok(na);
        }
        // `run --backward` names tangents by output index and gradients by input index.
        let outputs_with_tangents: Vec<u64> = grads["tangent_outputs"]
            .as_array()
            .map(|a| a.iter().filter_map(Value::as_u64).collect())
            .unwrap_or_default();
        let tangents = safetensors::read(&self.file("tangents.safetensors"))?;
        let mut renamed = BTreeMap::new();
        for (k, j) in outputs_with_tangents.iter().enumerate() {
            let key = format!("tangents_{}", k + 1);
            let t = tangents
                .get(&key)
                .with_context(|| format!("tangents.safetensors has no `{key}`"))?;
            renamed.insert(format!("tangent{j}"), t.clone());
        }
        let tangents_path = self.work.join("aot_eager_tangents.safetensors");
        safetensors::write(&tangents_path, &renamed)?;
        let outputs = safetensors::read(&self.file("outputs.safetensors"))?;
        let expected_path = self.work.join("aot_eager_expected.safetensors");
        let spec = self.requires_grad_spec();
        self.judge_gradients(|grads_file| {
            let mut expected = outputs.clone();
            for (i, t) in self.grads_by_input(grads_file)? {
                expected.insert(format!("grad{i}"), t);
            }
            safetensors::write(&expected_path, &expected)?;
            let exec = self.run_compare(
                "aot_eager",
                &self.file("forward.py"),
                &self.file("inputs.safetensors"),
                &expected_path,
                &[
                    os("--backend"),
                    os("aot_eager"),
                    os("--backward"),
                    os("--requires-grad"),
                    os(&spec),
                    os("--tangents"),
                    tangents_path.as_os_str(),
                ],
            )?;
            Ok(exec.outcome("run --backend aot_eager --backward --compare"))
        })
    }

    /// `--requires-grad` of the case: the indices of the inputs that require grad.
    fn requires_grad_spec(&self) -> String {
        self.case.json["requires_grad"]
            .as_array()
            .map(|a| {
                a.iter()
                    .enumerate()
                    .filter(|(_, v)| v.as_bool().unwrap_or(false))
                    .map(|(i, _)| i.to_string())
                    .collect::<Vec<_>>()
                    .join(",")
            })
            .unwrap_or_default()
    }

    /// The modelled peak of graphbug's min-cut partition of PyTorch's joint against the
    /// peak measured by running its step: equal, forward and backward.
    fn peak(&self) -> Result<Outcome> {
        let aot = &self.case.json["aot"];
        if aot.is_null() {
            return Ok(Outcome::NotApplicable("no AOTAutograd joint".into()));
        }
        if let Some(reason) = aot["skip"].as_str() {
            return Ok(Outcome::NotApplicable(reason.to_string()));
        }
        let joint = self.file(aot["joint"].as_str().unwrap_or("joint.py"));
        let Some(num_fwd) = aot["num_fwd_outputs"].as_u64() else {
            bail!("case.json has no aot.num_fwd_outputs");
        };
        let num_fwd = num_fwd.to_string();
        // The case's own inputs (ops such as lu_unpack, bernoulli or cholesky reject random
        // values) as the joint's primals. AOTAutograd puts effect tokens (empty tensors the
        // forward does not have) first: primals_{T+K} is the forward's K-th input, after T
        // tokens, which run as empty tensors.
        let text = fs::read_to_string(&joint)?;
        let joint_primals = (1..)
            .take_while(|k| text.contains(&format!("primals_{k}:")))
            .count();
        let names = string_list(&self.case.json["inputs"]);
        let Some(tokens) = joint_primals.checked_sub(names.len()) else {
            return Ok(Outcome::Failed(format!(
                "the joint has {joint_primals} primals, fewer than the forward's {} inputs",
                names.len()
            )));
        };
        let mut primals = BTreeMap::new();
        for t in 1..=tokens {
            let empty =
                safetensors::RawTensor::new(graphbug_ir::Dtype::Float32, vec![0], Vec::new())
                    .map_err(anyhow::Error::msg)?;
            primals.insert(format!("primals_{t}"), empty);
        }
        for (key, t) in safetensors::read(&self.file("inputs.safetensors"))? {
            match names.iter().position(|n| *n == key) {
                Some(k) => primals.insert(format!("primals_{}", tokens + k + 1), t),
                // A constant (`self.<attr>`), under its attribute name.
                None => primals.insert(key, t),
            };
        }
        let inputs = self.work.join("peak_inputs.safetensors");
        safetensors::write(&inputs, &primals)?;
        let args = vec![
            os("partition"),
            joint.as_os_str(),
            os("--json"),
            os("--num-fwd-outputs"),
            os(&num_fwd),
            os("--partitioner"),
            os("min-cut"),
            os("--measure-peak"),
            os("--no-isolate"),
            os("--inputs"),
            inputs.as_os_str(),
        ];
        let ours = match self.partition_json("peak", &args, "partition --measure-peak")? {
            Ok(v) => v,
            Err(failed) => return Ok(failed),
        };
        let figures = |v: &Value| ["forward_peak", "backward_peak", "peak"].map(|k| v[k].as_u64());
        let (modelled, measured) = (
            figures(&ours["modelled_peak"]),
            figures(&ours["measured_peak"]),
        );
        if modelled.iter().any(Option::is_none) || measured.iter().any(Option::is_none) {
            return Ok(Outcome::Failed(
                "partition --json has no modelled_peak or measured_peak".into(),
            ));
        }
        if modelled == measured {
            return Ok(Outcome::Passed);
        }
        let show = |f: [Option<u64>; 3]| {
            format!(
                "{} B (forward {}, backward {})",
                f[2].unwrap_or(0),
                f[0].unwrap_or(0),
                f[1].unwrap_or(0)
            )
        };
        let measured_peak = &ours["measured_peak"];
        let slack = match (
            measured_peak["kernel_slack"].as_u64(),
            measured_peak["results_peak"].as_u64(),
        ) {
            (Some(b), Some(results)) if b > 0 => format!(
                ", of which {b} B kernels allocated beyond the results they returned (the results alone peak at {results} B)"
            ),
            _ => String::new(),
        };
        Ok(Outcome::Failed(format!(
            "modelled peak {}, measured {}{slack}",
            show(modelled),
            show(measured)
        )))
    }

    /// Runs `graphbug partition ... --json` (`what` names it in a failure) and reads its
    /// report; a failed run or bad JSON is the stage's failure.
    fn partition_json(
        &self,
        tag: &str,
        args: &[&std::ffi::OsStr],
        what: &str,
    ) -> Result<std::result::Result<Value, Outcome>> {
        let exec = self.graphbug(tag, args)?;
        if exec.code != Some(0) {
            return Ok(Err(Outcome::Failed(exec.error_line(what))));
        }
        Ok(serde_json::from_str(exec.stdout.trim())
            .map_err(|e| Outcome::Failed(format!("partition --json printed bad JSON: {e}"))))
    }

    /// graphbug's partition of PyTorch's joint against functorch's saved bytes: equal for
    /// the default partitioner, at most functorch's for min-cut.
    fn partition(&self, min_cut: bool) -> Result<Outcome> {
        let aot = &self.case.json["aot"];
        if aot.is_null() {
            let why = match self.case.json["grads"]["skip"].as_str() {
                Some(reason) => format!("no AOTAutograd joint: {reason}"),
                None => "no AOTAutograd joint".to_string(),
            };
            return Ok(Outcome::NotApplicable(why));
        }
        if let Some(reason) = aot["skip"].as_str() {
            return Ok(Outcome::NotApplicable(reason.to_string()));
        }
        let key = if min_cut { "mincut" } else { "default" };
        let theirs = &aot[key];
        if let Some(e) = theirs["error"].as_str() {
            return Ok(Outcome::NotApplicable(format!(
                "functorch's {key} partition fails: {e}"
            )));
        }
        let Some(their_bytes) = theirs["saved_bytes"].as_u64() else {
            bail!("case.json has no aot.{key}.saved_bytes");
        };
        let joint = self.file(aot["joint"].as_str().unwrap_or("joint.py"));
        let Some(num_fwd) = aot["num_fwd_outputs"].as_u64() else {
            bail!("case.json has no aot.num_fwd_outputs");
        };
        let num_fwd = num_fwd.to_string();
        let mut args = vec![
            os("partition"),
            joint.as_os_str(),
            os("--json"),
            os("--num-fwd-outputs"),
            os(&num_fwd),
        ];
        if min_cut {
            args.extend([os("--partitioner"), os("min-cut")]);
        }
        args.push(os("--no-isolate"));
        let tag = if min_cut { "mincut" } else { "default" };
        let ours = match self.partition_json(tag, &args, "partition")? {
            Ok(v) => v,
            Err(failed) => return Ok(failed),
        };
        let Some(our_bytes) = ours["saved_bytes"].as_u64() else {
            return Ok(Outcome::Failed(
                "partition --json has no saved_bytes".into(),
            ));
        };
        let ok = if min_cut {
            our_bytes <= their_bytes
        } else {
            our_bytes == their_bytes
        };
        if ok {
            return Ok(Outcome::Passed);
        }
        let our_saved = string_list(&ours["saved"]);
        let their_saved = string_list(&theirs["saved"]);
        Ok(Outcome::Failed(format!(
            "{key} partition saves {our_bytes} bytes, functorch {their_bytes} (only graphbug saves: {}; only functorch: {})",
            only_in(&our_saved, &their_saved),
            only_in(&their_saved, &our_saved)
        )))
    }
}

/// The calls of a graph text (`name = <call>`), without getitems (`x[0]`,
/// `operator.getitem`), constants (`self._tensor_constant0`) and dynamo's input aliases
/// (`l_x_ = L_x_`): what a graph that is one op, with its multiple outputs unpacked, has
/// one of.
fn call_lines(text: &str) -> Vec<String> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.starts_with('#') && !l.starts_with("return") && !l.starts_with("def "))
        .filter_map(|l| {
            // An augmented assignment (`y += x;  y_1 = y`) is a call of its own.
            let first = l.split(";  ").next().unwrap_or(l);
            let op = first.split(' ').nth(1).unwrap_or("");
            if op.len() >= 2 && op.ends_with('=') && !matches!(op, "==" | "!=" | "<=" | ">=") {
                return Some(first.to_string());
            }
            let rhs = l.split_once(" = ")?.1;
            let rhs = rhs.split(";  ").next().unwrap_or(rhs).trim();
            let ident =
                |s: &str| !s.is_empty() && s.chars().all(|c| c.is_alphanumeric() || c == '_');
            let getitem = rhs.starts_with("operator.getitem(")
                || rhs
                    .strip_suffix(']')
                    .and_then(|r| r.split_once('['))
                    .is_some_and(|(base, index)| {
                        ident(base) && index.chars().all(|c| c.is_ascii_digit())
                    });
            // A constant (`self._tensor_constant0`) is read, not called.
            let constant = rhs.strip_prefix("self.").is_some_and(|path| {
                path.chars()
                    .all(|c| c.is_alphanumeric() || c == '_' || c == '.')
            });
            (!ident(rhs) && !getitem && !constant).then(|| rhs.to_string())
        })
        .collect()
}

/// The aten ops a graph text calls, in node order (`aten.relu.default`).
fn aten_calls(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| {
            let call = l.split_once(" = torch.ops.aten.")?.1;
            let op = call.split('(').next()?;
            Some(format!("aten.{op}"))
        })
        .collect()
}

fn os(s: &str) -> &std::ffi::OsStr {
    std::ffi::OsStr::new(s)
}

fn string_list(v: &Value) -> Vec<String> {
    v.as_array()
        .map(|a| {
            a.iter()
                .filter_map(|x| x.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// Adds what joint output K of an `output K ...` line is: a mutated input, a forward
/// output or the gradient of an input.
fn name_joint_output(
    line: String,
    num_fwd: usize,
    num_mutated: usize,
    inputs: &[String],
) -> String {
    let Some(k) = line
        .split_once("output ")
        .and_then(|(_, rest)| rest.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|d| d.parse::<usize>().ok())
    else {
        return line;
    };
    let what = if k < num_mutated {
        "a mutated input's new value".to_string()
    } else if k < num_fwd {
        format!("forward output {}", k - num_mutated)
    } else {
        match inputs.get(k - num_fwd) {
            Some(name) => format!("the gradient of input `{name}`"),
            None => return line,
        }
    };
    format!("{line} [joint output {k} is {what}]")
}

/// The names in `a` that `b` lacks, comma-separated (`-` for none).
fn only_in(a: &[String], b: &[String]) -> String {
    let v: Vec<&str> = a
        .iter()
        .filter(|x| !b.contains(x))
        .map(String::as_str)
        .collect();
    if v.is_empty() {
        "-".into()
    } else {
        v.join(", ")
    }
}

/// Parses `mutated inputs: N (a, b)` / `mutated inputs: 0 (none)` from `graphbug
/// functionalize`'s stderr.
fn parse_mutated_inputs(stderr: &str) -> Option<Vec<String>> {
    let line = stderr
        .lines()
        .find_map(|l| l.trim().strip_prefix("mutated inputs: "))?;
    let (n, rest) = line.split_once(' ')?;
    let n: usize = n.parse().ok()?;
    let names = rest.strip_prefix('(')?.strip_suffix(')')?;
    let names: Vec<String> = if n == 0 {
        Vec::new()
    } else {
        names.split(", ").map(str::to_string).collect()
    };
    (names.len() == n).then_some(names)
}

/// Parses `num_fwd_outputs = N (M mutated inputs)` from `graphbug joint`'s stderr.
fn parse_num_fwd_outputs(stderr: &str) -> Option<(usize, usize)> {
    let line = stderr
        .lines()
        .find_map(|l| l.trim().strip_prefix("num_fwd_outputs = "))?;
    let (n, rest) = line.split_once(' ')?;
    let m = rest.strip_prefix('(')?.split_once(' ')?.0;
    Some((n.parse().ok()?, m.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn call_lines_leave_out_getitems_and_aliases() {
        let text = "class GraphModule(torch.nn.Module):
    def forward(self, L_x_: \"f32[2]\", w: \"f32[2]\"):
        l_x_ = L_x_
        ln = torch.ops.aten.native_layer_norm.default(l_x_, [2], w, None, 1e-05);  l_x_ = None
        getitem: \"f32[2]\" = ln[0]
        getitem_1 = operator.getitem(ln, 1);  ln = None
        return (getitem, getitem_1)
";
        assert_eq!(
            call_lines(text),
            ["torch.ops.aten.native_layer_norm.default(l_x_, [2], w, None, 1e-05)"]
        );
        let two = text.replace(
            "getitem: \"f32[2]\" = ln[0]",
            "getitem: \"f32[2]\" = torch.relu(ln)",
        );
        assert_eq!(call_lines(&two).len(), 2);
        let augmented =
            "        y += x;  y_1: \"f32[2]\" = y;  y = x = None\n        z >>= x;  z_1 = z\n";
        assert_eq!(call_lines(augmented), ["y += x", "z >>= x"]);
        let constant = "        c = self._tensor_constant0\n        d = torch.ops.aten.lift_fresh_copy.default(c)\n";
        assert_eq!(
            call_lines(constant),
            ["torch.ops.aten.lift_fresh_copy.default(c)"]
        );
    }

    #[test]
    fn num_fwd_outputs_line() {
        assert_eq!(
            parse_num_fwd_outputs("x\nnum_fwd_outputs = 3 (1 mutated inputs)\n"),
            Some((3, 1))
        );
        assert_eq!(parse_num_fwd_outputs("nothing"), None);
        assert_eq!(
            parse_mutated_inputs("mutated inputs: 2 (a, b_1)\n"),
            Some(vec!["a".to_string(), "b_1".to_string()])
        );
        assert_eq!(
            parse_mutated_inputs("mutated inputs: 0 (none)"),
            Some(vec![])
        );
        assert_eq!(parse_mutated_inputs("mutated inputs: 2 (a)"), None);
    }

    #[test]
    fn error_lines() {
        assert_eq!(
            first_error_line("note: x\nerror: node `acos` failed\n", ""),
            "error: node `acos` failed"
        );
        assert_eq!(
            first_error_line("outputs do not match f\n", "out0 failed: max diff 3\n"),
            "out0 failed: max diff 3"
        );
        assert_eq!(first_error_line("", ""), "(no output)");
        assert_eq!(
            first_error_line(
                "outputs do not match f\n",
                "accuracy: 1 of 2 outputs differ\n  output 1 f32[2]: FAIL: not allclose\n"
            ),
            "output 1 f32[2]: FAIL: not allclose"
        );
        let names = ["a".to_string(), "b".to_string()];
        assert_eq!(
            name_joint_output("x: output 3 f32[2]: FAIL".into(), 2, 0, &names),
            "x: output 3 f32[2]: FAIL [joint output 3 is the gradient of input `b`]"
        );
    }

    #[test]
    fn a_case_dir_without_case_json_is_named() {
        let dir = std::env::temp_dir().join(format!("xtask-disc-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(dir.join("a/b")).unwrap();
        fs::write(dir.join("a/b/forward.py"), "x").unwrap();
        let err = discover(&dir).unwrap_err().to_string();
        assert!(err.contains("a/b") && err.contains("no case.json"), "{err}");
        fs::remove_dir_all(&dir).unwrap();
    }
}
