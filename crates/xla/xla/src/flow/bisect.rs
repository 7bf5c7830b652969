//! `graphbug bisect` of XLA programs: which of the plugin's HLO passes makes a failure.
//!
//! The first trial compiles the program with every pass dumped ([`crate::passes`]): the
//! passes the plugin runs on it, each invocation in order, with the module before and after
//! each. Then the smallest set of passes whose turning off (XLA's `xla_disable_hlo_passes`,
//! sent as a compile option override) makes the failure go away while the program still
//! compiles and runs ([`smallest_off_set`]), and the passes that, on with it and every other
//! pass off, still show it ([`smallest_on_set`]). Every trial is a bounded child (see
//! [`graphbug_flow::bisect`]): a pass set that aborts, crashes or hangs the compiler says
//! "a pass turned off is needed here", never ends the bisection. The workaround is checked
//! by one more run, through `XLA_FLAGS` as a user would set it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use anyhow::{anyhow, bail, Context, Result};
use graphbug_flow::bisect::{
    run_case, run_graphbug, steps, write_case, BisectRequest, CaseRun, Ran, SUMMARY_FILE,
};
use graphbug_minifier::bisect::{smallest_off_set, smallest_on_set, Outcome, SetSearchError};
use graphbug_minifier::{Check, CheckKind, Contains};
use graphbug_run::limits::TimeLimit;
use graphbug_run::progress::Progress;
use graphbug_run::scratch::Scratch;
use serde::Serialize;

use crate::execute::XlaBackend;
use crate::passes::{dump_options, module_diff, Invocation, PassRuns};
use crate::program::{Kind, Program};
use crate::repro::read_dir;

/// XLA's option that turns passes off by name.
pub const DISABLE_OPTION: &str = "xla_disable_hlo_passes";

/// XLA's option that runs only the passes it names (never sent with [`DISABLE_OPTION`]:
/// XLA aborts on both).
pub const ENABLE_ONLY_OPTION: &str = "xla_enable_hlo_passes_only";

/// What the failure is, and how a trial is judged.
enum Judge {
    /// The failure a repro directory records reproduces (`repro CASE run`).
    Case(PathBuf),
    /// `--list-passes`: the program compiles and runs (`run PROGRAM`).
    Compiles {
        program: PathBuf,
        inputs: Option<PathBuf>,
    },
    /// The program the plugin optimized calls every op listed (`run PROGRAM`, dumped).
    Contains {
        contains: Contains,
        program: PathBuf,
        inputs: Option<PathBuf>,
    },
}

/// The trials of one bisection: each a bounded child, remembered by the passes it turned off.
struct Trials<'a> {
    /// The request, its `--timeout` each trial's bound (derived from the first trial's
    /// time where the user gave none).
    req: BisectRequest,
    /// The backend under test, as given (its own options, its fault).
    base: XlaBackend,
    /// Passes the backend turns off itself (its own `xla_disable_hlo_passes`).
    preset: Vec<String>,
    /// The plugin a repro directory's reference runs on (where it is one).
    reference: Option<XlaBackend>,
    judge: Judge,
    scratch: &'a Scratch,
    progress: &'a Progress,
    made: AtomicUsize,
    known: Mutex<BTreeMap<Vec<String>, Outcome>>,
}

impl Trials<'_> {
    /// The backend with `off` turned off besides its own, and `extra` options.
    fn backend(&self, off: &[String], extra: Vec<(String, String)>) -> Result<XlaBackend> {
        let mut all: Vec<String> = self.preset.clone();
        all.extend(off.iter().filter(|p| !self.preset.contains(p)).cloned());
        let mut options = extra;
        if !all.is_empty() {
            options.insert(0, (DISABLE_OPTION.to_string(), all.join(",")));
        }
        self.base.with_options(&options).map_err(|e| anyhow!(e))
    }

    /// A fresh directory for the next trial.
    fn dir(&self) -> Result<PathBuf> {
        let k = self.made.fetch_add(1, Ordering::Relaxed);
        let dir = self.scratch.path().join(format!("trial{k}"));
        std::fs::create_dir_all(&dir).with_context(|| format!("{}", dir.display()))?;
        Ok(dir)
    }

    /// Runs `backend` (with `env`) in a child of its own in `dir`, and judges it.
    fn judge(&self, dir: &Path, backend: &XlaBackend, env: &[(String, String)]) -> Result<Outcome> {
        let outcome = match &self.judge {
            Judge::Case(case) => {
                match run_case(&self.req, dir, "trial", case, backend.name(), env)? {
                    CaseRun::Reproduced(_) => Outcome::Shows,
                    run if run.same_wrong_result() => Outcome::Shows,
                    CaseRun::NoFailure(_) => Outcome::Gone,
                    CaseRun::Differently(said) | CaseRun::NoVerdict(said) => Outcome::Invalid(said),
                }
            }
            Judge::Compiles { program, inputs }
            | Judge::Contains {
                program, inputs, ..
            } => {
                let ran = run_graphbug(&self.req, dir, "trial", env, |cmd| {
                    cmd.arg("run")
                        .arg(program)
                        .arg("--backend")
                        .arg(backend.name())
                        .arg("--seed")
                        .arg(self.req.seed.to_string());
                    if let Some(i) = inputs {
                        cmd.arg("--inputs").arg(i);
                    }
                })?;
                match &self.judge {
                    _ if !ran_ok(&ran) => {
                        Outcome::Invalid(format!("{}: {}", ran.how(), ran.last_error()))
                    }
                    Judge::Contains { contains, .. } => {
                        if optimized_contains(&dir.join("dump"), contains)? {
                            Outcome::Shows
                        } else {
                            Outcome::Gone
                        }
                    }
                    _ => Outcome::Shows,
                }
            }
        };
        self.progress.inc(1);
        Ok(match outcome {
            // The trial's long name says only what the set of passes says.
            Outcome::Invalid(said) if backend.name() != self.base.name() => {
                Outcome::Invalid(said.replace(backend.name(), &format!("{}?...", self.base.name())))
            }
            o => o,
        })
    }

    /// The outcome with `off` turned off (remembered: no set runs twice).
    fn outcome(&self, off: &[String]) -> Result<Outcome> {
        let mut key = off.to_vec();
        key.sort();
        if let Some(o) = self.lock().get(&key) {
            return Ok(o.clone());
        }
        let dir = self.dir()?;
        let extra = self.judged_options(&dir);
        let backend = self.backend(off, extra)?;
        let o = self.judge(&dir, &backend, &[])?;
        self.lock().insert(key, o.clone());
        Ok(o)
    }

    /// The options a trial in `dir` needs for its judge: a `contains:` check reads the
    /// optimized module the plugin dumps there.
    fn judged_options(&self, dir: &Path) -> Vec<(String, String)> {
        match self.judge {
            Judge::Contains { .. } => dump_options(&dir.join("dump"), false),
            Judge::Case(_) | Judge::Compiles { .. } => Vec::new(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<Vec<String>, Outcome>> {
        self.known.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// [`Self::outcome`] of several sets side by side.
    fn outcomes(&self, sets: &[Vec<String>]) -> Result<Vec<Outcome>> {
        std::thread::scope(|s| {
            let running: Vec<_> = sets
                .iter()
                .map(|o| s.spawn(move || self.outcome(o)))
                .collect();
            running
                .into_iter()
                .map(|h| {
                    h.join()
                        .unwrap_or_else(|_| Err(anyhow!("a trial thread panicked")))
                })
                .collect()
        })
    }
}

/// Whether a child `graphbug run` compiled and ran the program.
fn ran_ok(ran: &Ran) -> bool {
    matches!(&ran.ended, graphbug_run::process::Ended::Exited(s) if s.success())
}

/// Whether the module the plugin optimized, dumped in `dump`, calls every op `contains`
/// lists (in any of its computations).
fn optimized_contains(dump: &Path, contains: &Contains) -> Result<bool> {
    let file = optimized_file(dump)?;
    let text = std::fs::read(&file).with_context(|| format!("{}", file.display()))?;
    let program = Program::read(&text, Kind::HloText).map_err(|e| {
        anyhow!(
            "{}: the optimized module does not read: {e}",
            file.display()
        )
    })?;
    let Program::Hlo { module, .. } = &program else {
        bail!("{}: not an HLO module", file.display());
    };
    let ops: Vec<graphbug_ir::OpName> = module
        .computations
        .iter()
        .flat_map(|c| &c.instructions)
        .map(|i| crate::hlo::graph::op_of(&i.opcode))
        .collect();
    Ok(contains.present(ops.iter()))
}

/// The optimized module a plugin dumped into `dump` (`*after_optimizations.txt`).
fn optimized_file(dump: &Path) -> Result<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(dump)
        .with_context(|| format!("{}: the plugin dumped nothing", dump.display()))?
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().ends_with("after_optimizations.txt"))
        })
        .collect();
    found.sort();
    found.into_iter().next().ok_or_else(|| {
        anyhow!(
            "{}: the plugin dumped no optimized module (asked with xla_dump_to and xla_dump_hlo_as_text): it is not XLA-based, or it ignores XLA's debug options",
            dump.display()
        )
    })
}

/// One invocation of a guilty pass, as the report shows it.
#[derive(Debug, Serialize)]
struct GuiltyRun {
    seq: u32,
    pipeline: String,
    occurrence: usize,
    changed: bool,
    before: String,
    after: String,
    diff: Option<String>,
}

/// A guilty pass: how often it ran, and the invocations written.
#[derive(Debug, Serialize)]
struct GuiltyPass {
    pass: String,
    ran: usize,
    written: Vec<GuiltyRun>,
}

/// What a bisection found, written to `OUT/bisect.json`.
#[derive(Debug, Serialize)]
struct Report {
    program: String,
    backend: String,
    check: String,
    module: String,
    invocations: usize,
    passes: usize,
    pipelines: usize,
    searched: Vec<String>,
    /// The smallest set whose turning off makes the failure go away.
    guilty: Vec<String>,
    /// The passes that, on with the guilty ones and every other searched pass off, show it.
    with: Vec<String>,
    /// Passes the program needs: turning them off broke it (with what it gave).
    needed: Vec<(String, String)>,
    /// The failure shows with every searched pass off but the needed ones.
    in_no_searched_pass: bool,
    workaround: Option<Workaround>,
    runs: Vec<GuiltyPass>,
    /// Whether the plugin turns off one invocation of a pass (`pass:N`).
    invocation_filter: bool,
    /// The invocation found guilty, where the plugin can turn off one.
    invocation: Option<String>,
    compiles: usize,
    speculative: usize,
}

/// The workaround and how its check went.
#[derive(Debug, Serialize)]
struct Workaround {
    xla_flags: String,
    backend: String,
    jax: String,
    /// How it was checked: `XLA_FLAGS`, or the compile option.
    route: String,
    /// What one more run with it gave: `gone` when it works.
    checked: String,
}

/// `graphbug bisect` of an XLA program or repro directory.
pub fn bisect(req: &BisectRequest) -> Result<ExitCode> {
    let base = XlaBackend::parse(&req.backend).map_err(|e| anyhow!(e))?;
    if base.is_iree() {
        bail!(
            "`{}` is IREE, not an XLA plugin: graphbug bisect turns off XLA's HLO passes (xla_disable_hlo_passes), which IREE's compiler does not have; bisect on pjrt:<plugin>",
            req.backend
        );
    }
    base.with_options(&[]).map_err(|e| anyhow!(e))?;
    base.ensure_present().map_err(|e| anyhow!(e))?;
    let preset: Vec<String> = base
        .option(DISABLE_OPTION)
        .map(|v| {
            v.split(',')
                .filter(|s| !s.is_empty())
                .map(String::from)
                .collect()
        })
        .unwrap_or_default();
    let scratch = Scratch::new("bisect")?;
    std::fs::create_dir_all(&req.out).with_context(|| format!("creating {}", req.out.display()))?;
    let progress = Progress::bar("bisect", 2);
    // What is said is kept too: the summary the report shows.
    let said = std::cell::RefCell::new(Vec::<String>::new());
    let say = |line: String| {
        progress.suspend(|| println!("{line}"));
        said.borrow_mut().push(line);
    };
    let judge = match &req.check {
        _ if req.list_passes => {
            let (program, inputs) = program_of(req)?;
            Judge::Compiles { program, inputs }
        }
        Check::Contains(contains) => {
            let (program, inputs) = program_of(req)?;
            say(format!(
                "bisecting `{}` on {}: the optimized program {}",
                req.backend,
                req.file.display(),
                graphbug_minifier::Checker::describe(contains)
            ));
            Judge::Contains {
                contains: contains.clone(),
                program,
                inputs,
            }
        }
        Check::Backend(kind) => {
            let case = if req.file.is_dir() {
                req.file.clone()
            } else {
                progress.set_message("writing the repro of the failure");
                let case = req.out.join("case");
                write_case(req, &case, scratch.path())?;
                case
            };
            let recorded = read_dir(&case).map_err(|e| anyhow!(e))?;
            let failure = recorded
                .manifest
                .failure
                .clone()
                .ok_or_else(|| anyhow!("{}: no failure was recorded", case.display()))?;
            // As minify's checks: a runtime check takes a compile failure too.
            let stage = failure.kind.split_whitespace().next().unwrap_or_default();
            let wanted = match kind {
                CheckKind::Compile => stage == "compile",
                CheckKind::Runtime => stage == "compile" || stage == "runtime",
                CheckKind::Accuracy => stage == "accuracy",
            };
            if !wanted && !req.file.is_dir() {
                bail!(
                    "`{}` fails with {}: {}, not the failure --check {kind} asks for",
                    req.backend,
                    failure.kind,
                    failure.message.lines().next().unwrap_or_default()
                );
            }
            say(format!(
                "bisecting `{}` on {}: {}: {}",
                req.backend,
                req.file.display(),
                failure.kind,
                failure.message.lines().next().unwrap_or_default()
            ));
            Judge::Case(case)
        }
    };
    let mut trials = Trials {
        req: req.clone(),
        base: base.clone(),
        preset,
        reference: match &judge {
            Judge::Case(case) => XlaBackend::parse(
                &read_dir(case)
                    .map_err(|e| anyhow!(e))?
                    .manifest
                    .reference_backend,
            )
            .ok(),
            _ => None,
        },
        judge,
        scratch: &scratch,
        progress: &progress,
        made: AtomicUsize::new(0),
        known: Mutex::new(BTreeMap::new()),
    };
    // The first trial: every pass on, each dumped.
    progress.set_message("every pass on, each dumped");
    let dir = trials.dir()?;
    let first_backend = trials.backend(&[], dump_options(&dir.join("dump"), true))?;
    let started = std::time::Instant::now();
    let first = trials.judge(&dir, &first_backend, &[])?;
    // Later trials are bounded by what the first took: a set of passes that makes the
    // program hang (XLA CPU without `copy-insertion` on a loop) is a verdict in seconds.
    let limit = TimeLimit::new(req.timeout, started.elapsed());
    trials.req.timeout = Some(limit.later(Some(started.elapsed())));
    match &first {
        Outcome::Shows => {}
        Outcome::Gone => bail!(
            "the failure does not show again with `{}`{}",
            first_backend.name(),
            match trials.judge {
                Judge::Case(_) => " (a flaky failure? see `graphbug minify --repeat`)",
                Judge::Contains { .. } =>
                    ": the optimized program does not call what --check lists",
                Judge::Compiles { .. } => "",
            }
        ),
        Outcome::Invalid(why) => {
            bail!("the first run, every pass on and dumped, gave no verdict: {why}")
        }
    }
    trials.lock().insert(Vec::new(), first);
    let runs = PassRuns::read(&dir.join("dump")).map_err(|e| anyhow!(e))?;
    let names = runs.names();
    std::fs::write(req.out.join("passes.txt"), runs.listing())
        .with_context(|| format!("{}", req.out.display()))?;
    let bound = trials.req.timeout.unwrap_or_default().as_secs_f64();
    progress.suspend(|| match limit {
        TimeLimit::Fixed(_) => eprintln!("each trial's run may take {bound:.0} s (--timeout)"),
        TimeLimit::Derived { eager } => eprintln!(
            "each trial's run may take {bound:.0} s ({}x the first trial's {:.1} s, at least {} s; --timeout S sets one limit)",
            graphbug_run::limits::LATER_FACTOR,
            eager.as_secs_f64(),
            graphbug_run::limits::LATER_FLOOR.as_secs()
        ),
    });
    say(format!(
        "`{}` runs {} pass invocations of {} passes in {} pipelines on {} (each in {}; * changed the module)",
        base.name(),
        runs.invocations.len(),
        names.len(),
        runs.pipelines.len(),
        runs.module,
        req.out.join("passes.txt").display()
    ));
    if req.list_passes {
        progress.finish();
        print!("{}", runs.listing());
        return Ok(ExitCode::SUCCESS);
    }
    let searched: Vec<String> = if req.passes.is_empty() {
        names.clone()
    } else {
        if let Some(bad) = req.passes.iter().find(|p| !names.contains(p)) {
            bail!(
                "--passes: `{bad}` is no pass `{}` runs on this program (XLA ignores names it does not know); it runs: {}",
                base.name(),
                names.join(", ")
            );
        }
        names
            .iter()
            .filter(|n| req.passes.contains(n))
            .cloned()
            .collect()
    };
    let jobs = usize::from(req.jobs);
    progress.set_length(progress.position() + 2 + steps(searched.len()));
    let error: std::cell::RefCell<Option<anyhow::Error>> = std::cell::RefCell::new(None);
    let mut probe = |sets: &[Vec<usize>]| -> Vec<Outcome> {
        if error.borrow().is_some() {
            return vec![Outcome::Gone; sets.len()];
        }
        let named: Vec<Vec<String>> = sets
            .iter()
            .map(|s| s.iter().map(|&i| searched[i].clone()).collect())
            .collect();
        if let Some(first) = named.first() {
            progress.set_message(format!("{} of {} passes off", first.len(), searched.len()));
        }
        match trials.outcomes(&named) {
            Ok(o) => o,
            Err(e) => {
                *error.borrow_mut() = Some(e);
                vec![Outcome::Gone; sets.len()]
            }
        }
    };
    let found = smallest_off_set(searched.len(), &[], jobs, &mut probe);
    if let Some(e) = error.borrow_mut().take() {
        return Err(e);
    }
    let named =
        |set: &[usize]| -> Vec<String> { set.iter().map(|&i| searched[i].clone()).collect() };
    let mut report = Report {
        program: req.file.display().to_string(),
        backend: base.name().to_string(),
        check: req.check.to_string(),
        module: runs.module.clone(),
        invocations: runs.invocations.len(),
        passes: names.len(),
        pipelines: runs.pipelines.len(),
        searched: searched.clone(),
        guilty: Vec::new(),
        with: Vec::new(),
        needed: Vec::new(),
        in_no_searched_pass: false,
        workaround: None,
        runs: Vec::new(),
        invocation_filter: false,
        invocation: None,
        compiles: 0,
        speculative: 0,
    };
    let found = match found {
        Err(SetSearchError::ShowsWithAllOff { needed }) => {
            report.needed = needed
                .iter()
                .map(|(i, w)| (searched[*i].clone(), w.clone()))
                .collect();
            report.in_no_searched_pass = true;
            say(format!(
                "the failure shows with every {}pass off{}: it is in no pass that can be turned off; look at the passes the program needs, at code generation (LLVM: xla_backend_extra_options=-opt-bisect-limit) or at the runtime",
                if req.passes.is_empty() { "" } else { "searched " },
                needed_text(&report.needed)
            ));
            progress.finish();
            finish(req, &trials, &mut report, 0, said.take())?;
            return Ok(ExitCode::SUCCESS);
        }
        Ok(found) => found,
    };
    report.guilty = named(&found.set);
    report.needed = found
        .needed
        .iter()
        .map(|(i, w)| (searched[*i].clone(), w.clone()))
        .collect();
    let mut speculative = found.speculative;
    if let Outcome::Invalid(why) = &found.alone {
        say(format!(
            "turning off {} makes the failure go away only with other passes off: alone it gives {why}",
            quoted(&report.guilty)
        ));
    }
    // The passes that cause it with the guilty ones: on with them (and the needed ones),
    // every other searched pass off.
    progress.set_message("the guilty passes on alone");
    let mut on: Vec<usize> = found.set.clone();
    on.extend(found.needed.iter().map(|(i, _)| *i));
    let cause = smallest_on_set(searched.len(), &on, jobs, &mut probe);
    if let Some(e) = error.borrow_mut().take() {
        return Err(e);
    }
    speculative += cause.speculative;
    report.with = named(&cause.set);
    // The workaround, checked by one more run as the user would apply it.
    progress.set_message("checking the workaround");
    let workaround = workaround(&base, &report.guilty, &trials)?;
    // Finer control: one invocation of a pass.
    report.invocation_filter = invocation_filter(req, &base, &scratch)?;
    let guilty_dir = req.out.join("guilty");
    if guilty_dir.exists() {
        std::fs::remove_dir_all(&guilty_dir)
            .with_context(|| format!("{}", guilty_dir.display()))?;
    }
    std::fs::create_dir_all(&guilty_dir).with_context(|| format!("{}", guilty_dir.display()))?;
    for pass in &report.guilty {
        let written = write_runs(&guilty_dir, &runs, pass)?;
        report.runs.push(GuiltyPass {
            pass: pass.clone(),
            ran: runs.of(pass).count(),
            written,
        });
    }
    if report.invocation_filter {
        report.invocation = guilty_invocation(&trials, &runs, &report.guilty, jobs)?;
    }
    report.workaround = Some(workaround);
    progress.finish();
    for line in report_lines(req, &report, &cause.alone) {
        say(line);
    }
    finish(req, &trials, &mut report, speculative, said.take())?;
    Ok(ExitCode::SUCCESS)
}

/// The program file and inputs a `contains:` bisection runs: the file, or a repro
/// directory's program and inputs.
fn program_of(req: &BisectRequest) -> Result<(PathBuf, Option<PathBuf>)> {
    if !req.file.is_dir() {
        return Ok((req.file.clone(), req.inputs.clone()));
    }
    let case = read_dir(&req.file).map_err(|e| anyhow!(e))?;
    let inputs = ["safetensors", "npz"]
        .iter()
        .map(|ext| req.file.join(format!("{}.{ext}", crate::repro::INPUTS)))
        .find(|p| p.exists());
    Ok((
        req.file.join(&case.manifest.program),
        req.inputs.clone().or(inputs),
    ))
}

/// `a`, `b` and `c`, each quoted.
fn quoted(names: &[String]) -> String {
    let q: Vec<String> = names.iter().map(|n| format!("`{n}`")).collect();
    match q.len() {
        0 => "no pass".into(),
        1 => q[0].clone(),
        n => format!("{} and {}", q[..n - 1].join(", "), q[n - 1]),
    }
}

fn needed_text(needed: &[(String, String)]) -> String {
    if needed.is_empty() {
        return String::new();
    }
    let list: Vec<String> = needed.iter().map(|(p, w)| format!("`{p}` ({w})")).collect();
    format!(" but those the program needs: {}", list.join("; "))
}

/// The workaround for `guilty`: the backend without them must not fail. Checked by one more
/// run with `XLA_FLAGS`, as a user sets it; where the flag would reach more than the
/// backend's own compile (the backend or a reference in the same process turns passes off
/// or on itself: its option replaces the flag, or with the flag aborts XLA), through the
/// compile option instead.
fn workaround(base: &XlaBackend, guilty: &[String], trials: &Trials<'_>) -> Result<Workaround> {
    let list = guilty.join(",");
    let xla_flags = format!("--{DISABLE_OPTION}={list}");
    let backend = trials.backend(guilty, Vec::new())?;
    let dir = trials.dir()?;
    let extra = trials.judged_options(&dir);
    let sets_passes = |b: &XlaBackend| {
        b.option(DISABLE_OPTION).is_some() || b.option(ENABLE_ONLY_OPTION).is_some()
    };
    let flags_reach_only_it =
        trials.preset.is_empty() && !trials.reference.as_ref().is_some_and(sets_passes);
    let (route, outcome) = if flags_reach_only_it {
        let flags = match std::env::var("XLA_FLAGS") {
            Ok(v) if !v.trim().is_empty() => format!("{v} {xla_flags}"),
            _ => xla_flags.clone(),
        };
        let plain = base.with_options(&extra).map_err(|e| anyhow!(e))?;
        let env = [("XLA_FLAGS".to_string(), flags)];
        ("XLA_FLAGS", trials.judge(&dir, &plain, &env)?)
    } else {
        let with_option = trials.backend(guilty, extra)?;
        ("the compile option", trials.judge(&dir, &with_option, &[])?)
    };
    Ok(Workaround {
        xla_flags: format!("XLA_FLAGS={xla_flags}"),
        backend: backend.name().to_string(),
        jax: format!(
            "jax.jit(f).lower(*args).compile(compiler_options={{'{DISABLE_OPTION}': '{list}'}})"
        ),
        route: route.to_string(),
        checked: match outcome {
            Outcome::Gone => "gone".into(),
            Outcome::Shows => "the failure still shows".into(),
            Outcome::Invalid(why) => why,
        },
    })
}

/// Whether the plugin turns off one invocation of a pass (XLA's HloPassFilter:
/// `algsimp:2`, `@42`): a malformed entry (`name:`) is an error where it does, and ignored
/// by plugins older than it. Asked on a one-instruction program.
fn invocation_filter(req: &BisectRequest, base: &XlaBackend, scratch: &Scratch) -> Result<bool> {
    let dir = scratch.path().join("filter");
    std::fs::create_dir_all(&dir)?;
    let program = dir.join("probe.hlo");
    std::fs::write(
        &program,
        "HloModule probe\n\nENTRY main {\n  ROOT p = f32[2] parameter(0)\n}\n",
    )?;
    let backend = base
        .unfaulted()
        .with_options(&[(DISABLE_OPTION.into(), "graphbug-probe:".into())])
        .map_err(|e| anyhow!(e))?;
    let ran = run_graphbug(req, &dir, "filter", &[], |cmd| {
        cmd.arg("run")
            .arg(&program)
            .arg("--backend")
            .arg(backend.name());
    })?;
    Ok(!ran_ok(&ran) && ran.stderr.contains("graphbug-probe"))
}

/// Where the plugin can turn off one invocation of a pass: the invocation of the (last)
/// guilty pass whose turning off, with the other guilty passes off, makes the failure go
/// away.
fn guilty_invocation(
    trials: &Trials<'_>,
    runs: &PassRuns,
    guilty: &[String],
    jobs: usize,
) -> Result<Option<String>> {
    let Some(pass) = guilty.last() else {
        return Ok(None);
    };
    let count = runs.of(pass).count();
    if count < 2 {
        return Ok(None);
    }
    let others: Vec<String> = guilty[..guilty.len() - 1].to_vec();
    let mut error = None;
    let found = smallest_off_set(count, &[], jobs, &mut |sets| {
        let named: Vec<Vec<String>> = sets
            .iter()
            .map(|s| {
                let mut off = others.clone();
                off.extend(s.iter().map(|i| format!("{pass}:{i}")));
                off
            })
            .collect();
        trials.outcomes(&named).unwrap_or_else(|e| {
            error = Some(e);
            vec![Outcome::Gone; sets.len()]
        })
    });
    if let Some(e) = error {
        return Err(e);
    }
    Ok(found.ok().filter(|f| f.alone == Outcome::Gone).map(|f| {
        let list: Vec<String> = f.set.iter().map(|i| format!("{pass}:{i}")).collect();
        list.join(",")
    }))
}

/// Writes the module before and after each invocation of `pass` that changed it (every
/// invocation, where none did) into `dir`, with the diff between them.
fn write_runs(dir: &Path, runs: &PassRuns, pass: &str) -> Result<Vec<GuiltyRun>> {
    let all: Vec<&Invocation> = runs.of(pass).collect();
    let changed: Vec<&Invocation> = all.iter().copied().filter(|i| i.changed).collect();
    let shown = if changed.is_empty() { all } else { changed };
    let mut written = Vec::new();
    for i in shown {
        let stem = format!("{}.{:04}", pass, i.seq);
        let read =
            |p: &Path| std::fs::read_to_string(p).with_context(|| format!("{}", p.display()));
        let (before, after) = (read(&i.before)?, read(&i.file)?);
        let (b, a) = (format!("{stem}.before.hlo"), format!("{stem}.after.hlo"));
        std::fs::write(dir.join(&b), &before)?;
        std::fs::write(dir.join(&a), &after)?;
        let diff = i.changed.then(|| module_diff(&before, &after, (&b, &a)));
        let d = format!("{stem}.diff");
        if let Some(text) = &diff {
            std::fs::write(dir.join(&d), text)?;
        }
        written.push(GuiltyRun {
            seq: i.seq,
            pipeline: i.pipeline.clone(),
            occurrence: i.occurrence,
            changed: i.changed,
            before: b,
            after: a,
            diff: diff.map(|_| d),
        });
    }
    Ok(written)
}

/// What was found, a line each.
fn report_lines(req: &BisectRequest, report: &Report, cause_alone: &Outcome) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    let guilty = quoted(&report.guilty);
    let plural = report.guilty.len() > 1;
    lines.push(format!(
        "guilty: {guilty} (turning {} off makes the failure go away{})",
        if plural { "them" } else { "it" },
        if plural {
            "; each of them alone does not"
        } else {
            ""
        }
    ));
    match (report.with.is_empty(), cause_alone) {
        (true, Outcome::Shows) => lines.push(format!(
            "  on alone, with every other {}pass off, {} the failure",
            if report.needed.is_empty() {
                ""
            } else {
                "optional "
            },
            if plural { "they show" } else { "it shows" }
        )),
        (false, Outcome::Shows) => lines.push(format!(
            "  {} the failure only together with {}: on with {}, every other pass off, it shows",
            if plural { "they cause" } else { "it causes" },
            quoted(&report.with),
            if report.with.len() > 1 { "them" } else { "it" }
        )),
        _ => lines.push(
            "  with every other pass off it does not show: the passes interact beyond a set"
                .to_string(),
        ),
    }
    if !report.needed.is_empty() {
        lines.push(format!(
            "  needed by the program{}",
            needed_text(&report.needed).replacen(" but those the program needs", "", 1)
        ));
    }
    let out = req.out.join("guilty");
    for GuiltyPass { pass, written, .. } in &report.runs {
        let changed = written.iter().filter(|w| w.changed).count();
        let total = written.len();
        if changed == 0 {
            lines.push(format!("  `{pass}` changed nothing in the module with every pass on ({total} invocations written)"));
        } else {
            let seqs: Vec<String> = written
                .iter()
                .map(|w| format!("{:04} ({})", w.seq, w.pipeline))
                .collect();
            lines.push(format!(
                "  `{pass}` changed the module at {changed} invocation{}: {}",
                if changed > 1 { "s" } else { "" },
                seqs.join(", ")
            ));
        }
        if let Some(w) = written.first() {
            lines.push(format!("    before: {}", out.join(&w.before).display()));
            lines.push(format!("    after:  {}", out.join(&w.after).display()));
            if let Some(d) = &w.diff {
                let text = std::fs::read_to_string(out.join(d)).unwrap_or_default();
                let (plus, minus) = text.lines().fold((0, 0), |(p, m), l| {
                    if l.starts_with('+') && !l.starts_with("+++") {
                        (p + 1, m)
                    } else if l.starts_with('-') && !l.starts_with("---") {
                        (p, m + 1)
                    } else {
                        (p, m)
                    }
                });
                lines.push(format!(
                    "    diff:   {} (+{plus} -{minus} lines)",
                    out.join(d).display()
                ));
                for line in text.lines().take(40) {
                    lines.push(format!("      {line}"));
                }
                if text.lines().count() > 40 {
                    lines.push("      ...".to_string());
                }
            }
        }
    }
    if let Some(w) = &report.workaround {
        lines.push(format!(
            "workaround ({}):",
            if w.checked == "gone" {
                format!(
                    "checked by one more run through {}: the failure is gone",
                    w.route
                )
            } else {
                format!("one more run with it gave: {}", w.checked)
            }
        ));
        lines.push(format!("  {}", w.xla_flags));
        lines.push(format!("  graphbug: --backend '{}'", w.backend));
        lines.push(format!("  JAX: {}", w.jax));
    }
    match (&report.invocation, report.invocation_filter) {
        (Some(inv), _) => lines.push(format!(
            "invocation: turning off `{inv}` alone is enough (XLA's HloPassFilter)"
        )),
        (None, true) => {}
        (None, false) => {
            let many: Vec<String> = report
                .runs
                .iter()
                .filter(|g| g.ran > 1)
                .map(|g| format!("`{}` runs {} times", g.pass, g.ran))
                .collect();
            if !many.is_empty() {
                lines.push(format!(
                    "invocations: {}; this plugin cannot turn off one invocation (XLA's HloPassFilter, `{}:N`, is newer than it), so the name covers them all; the dumps above show which changed the module",
                    many.join(", "),
                    report.runs[0].pass
                ));
            }
        }
    }
    lines
}

/// Writes `OUT/bisect.json`, and `OUT/summary.txt`: `said`, then the trials' count (said too).
fn finish(
    req: &BisectRequest,
    trials: &Trials<'_>,
    report: &mut Report,
    speculative: usize,
    said: Vec<String>,
) -> Result<()> {
    report.compiles = trials.made.load(Ordering::Relaxed);
    report.speculative = speculative;
    let path = req.out.join("bisect.json");
    std::fs::write(&path, serde_json::to_string_pretty(&report)? + "\n")
        .with_context(|| format!("{}", path.display()))?;
    let last = format!(
        "{} compiles of the program for {} pass invocations (log2: {:.1}){}; report: {}",
        report.compiles,
        report.invocations,
        (report.invocations.max(1) as f64).log2(),
        if speculative > 0 {
            format!(", {speculative} of them run ahead of the search and not needed")
        } else {
            String::new()
        },
        path.display()
    );
    println!("{last}");
    let mut summary = said.join("\n");
    summary.push('\n');
    summary.push_str(&last);
    summary.push('\n');
    let path = req.out.join(SUMMARY_FILE);
    std::fs::write(&path, summary).with_context(|| format!("{}", path.display()))?;
    Ok(())
}
