//! `graphbug repro`, written once for every dialect: on a program, the first run under a
//! repro level detects the failure and writes a repro directory, which is then minified
//! into `DIR/minified`, reported (`report.html`) and followed by the commands that go on;
//! on a repro directory, `run`, `minify`, `analyze` or `share`. A dialect supplies the steps that
//! run its programs ([`Reproducible`]); what is said, in which order, and the exit codes
//! are the flow's.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Result};
use graphbug_minifier::isolate::Workers;
use graphbug_minifier::{Check, Minified};

use crate::dialect::{next_commands, Dialect};
use crate::dir::{graphbug_command, DirAction};
use crate::report::report_to;

/// The environment variable that sets the repro level, as TorchDynamo's.
pub const REPRO_LEVEL_ENV: &str = "GRAPHBUG_REPRO_LEVEL";

/// What a `graphbug repro` is asked to do, whatever the dialect. A dialect's own options
/// (an aten graph's device, an XLA program's reference plugin) are the dialect's.
#[derive(Clone, Debug, Default)]
pub struct ReproRequest {
    /// The backend (for a program: required; for a directory: overrides its manifest's).
    pub backend: Option<String>,
    /// The repro level (default: [`REPRO_LEVEL_ENV`], else 4).
    pub level: Option<u8>,
    /// The program's inputs; without it, seeded random inputs.
    pub inputs: Option<PathBuf>,
    /// Seed of the random inputs.
    pub seed: u64,
    /// Where a program's repro directory goes.
    pub out: PathBuf,
    /// Run the backend in this process (`--no-isolate`).
    pub in_process: bool,
    /// How long a backend run may take (`--timeout`).
    pub timeout: Option<Duration>,
    /// Regex the failure message must match (`--check-str`).
    pub check_str: Option<String>,
    /// Count every output of a wrong result (`--strict-accuracy`).
    pub strict_accuracy: bool,
    /// For a flaky failure: how many runs judge it.
    pub repeat: Option<u32>,
    /// Write the repro directory and stop.
    pub no_minify: bool,
    /// For `minify` of a directory: what counts as failing.
    pub check: Option<Check>,
    /// The minifier's workers.
    pub workers: Workers,
    /// The program is one of many (a dump's modules): a testing fault that names no node
    /// of it leaves it alone (see [`Reproducible::unfaulted`]).
    pub one_of_many: bool,
    /// After the repro (and its minification): which of the backend's passes makes the
    /// failure, bisected on the minified program into `DIR/bisect` (`--bisect`).
    pub bisect: bool,
}

impl ReproRequest {
    /// The repro level: as asked, else [`REPRO_LEVEL_ENV`]'s, else 4.
    pub fn level(&self) -> Result<u8> {
        match (self.level, std::env::var(REPRO_LEVEL_ENV)) {
            (Some(l), _) => Ok(l),
            (None, Ok(v)) => v
                .trim()
                .parse()
                .ok()
                .filter(|l| *l <= 4)
                .ok_or_else(|| anyhow!("{REPRO_LEVEL_ENV}={v}: expected 0 to 4")),
            (None, Err(_)) => Ok(4),
        }
    }
}

/// What the first run of a program found.
pub enum FirstRun {
    /// It ran without failure: what was checked, as said to the user.
    Passes(String),
    /// It failed: what was detected, and the repro directory written for it, or why none
    /// was (level 0, or a failure that could not be recorded).
    Fails {
        /// The failure, as said to the user.
        detected: String,
        /// The repro directory, or why there is none.
        dir: Result<PathBuf, String>,
    },
    /// This process is the supervised child that makes the first run: it handed its
    /// result to its parent, and says nothing more.
    Handed,
}

/// A repro directory's minification, as the flow says it.
pub struct DirMinified {
    /// The result.
    pub minified: Minified,
    /// The minified program, as the user reads it.
    pub text: String,
    /// How many workers answered queries.
    pub jobs: usize,
    /// A note on how the search judged failures, said before the result.
    pub note: Option<String>,
}

/// What a dialect supplies for `graphbug repro`.
pub trait Reproducible {
    /// How a backend is named, for the error that asks for one (`NAME`).
    fn backend_hint(&self) -> &'static str;

    /// The Python that runs this dialect's `repro.py` in the commands that go on.
    fn python(&self) -> String;

    /// The first run of `file` (holding `bytes`) through `backend` at `level` under the
    /// repro machinery, bounded in a child unless `req.in_process`; a failure writes the
    /// repro directory `req.out` (levels 1 and up). Says what it runs first.
    fn first_run(
        &mut self,
        file: (&Path, Vec<u8>),
        backend: &str,
        level: u8,
        req: &ReproRequest,
    ) -> Result<FirstRun>;

    /// Why the testing fault of the last [`Reproducible::first_run`]'s backend named no
    /// node of its program, which then ran without it ([`ReproRequest::one_of_many`]);
    /// `None` when it named one, or there is no fault.
    fn unfaulted(&self) -> Option<String> {
        None
    }

    /// What kind of disagreement the failure of the last [`Reproducible::first_run`] is
    /// (a refused op, a NaN where the reference is finite; see
    /// [`crate::dump::Disagreement::of_kind`] for the class its stage and symptom give);
    /// `None` where the dialect does not classify its failures.
    fn disagreement(&self) -> Option<crate::dump::Disagreement> {
        None
    }

    /// `repro DIR run`: says whether the recorded failure reproduces; exit 1 when it does.
    fn run_dir(&self, dir: &Path, req: &ReproRequest) -> Result<ExitCode>;

    /// `repro DIR minify`: minifies the directory's program for `req.check`, else the
    /// failure it records, into `DIR/minified`, a complete repro directory.
    fn minify_dir(&mut self, dir: &Path, req: &ReproRequest) -> Result<DirMinified>;

    /// The dialect's own strategies from a directory's minified result on.
    fn after_minify(&self, _dir: &Path, _req: &ReproRequest, _m: &Minified) -> Result<()> {
        Ok(())
    }

    /// `repro DIR analyze`: where the failure starts; exit 1 when a node diverges.
    fn analyze_dir(&self, dir: &Path, req: &ReproRequest) -> Result<ExitCode>;

    /// `graphbug bisect` of a repro directory this dialect wrote (`req.file`): which of
    /// the backend's passes makes its failure.
    fn bisect(&mut self, req: &crate::bisect::BisectRequest) -> Result<ExitCode> {
        bail!(
            "{}: bisecting the passes of this dialect's backends is not done from `repro --bisect`; run `graphbug bisect` on the program",
            req.file.display()
        )
    }

    /// `repro DIR share`: writes `DIR/shared`, the repro with nothing of its author's the
    /// failure does not need (names, metadata, values), which still reproduces, with
    /// `shared.json` saying what of the original remains; returns it.
    fn share_dir(&mut self, dir: &Path, req: &ReproRequest) -> Result<PathBuf>;
}

/// `graphbug repro FILE` (holding `bytes`) of `dialect`, whose steps are `steps`: the
/// first run, the repro directory, its minification. `action` is the directory action
/// given with a file (refused).
pub fn repro_file(
    (file, bytes): (&Path, Vec<u8>),
    action: Option<&str>,
    req: &ReproRequest,
    (dialect, steps): (&dyn Dialect, &mut dyn Reproducible),
) -> Result<ExitCode> {
    let started = Instant::now();
    let (shown, noun) = (file.display(), dialect.file_noun());
    if let Some(a) = action {
        bail!("{shown} is not a repro directory, so `{a}` does not apply; give a {noun} alone to run the whole flow");
    }
    if req.check.is_some() {
        bail!("--check says what `repro DIR minify` looks for; the whole flow on a {noun} detects the failure by --level (or use `graphbug minify {shown} --check ...`)");
    }
    let backend = req.backend.as_deref().ok_or_else(|| {
        anyhow!(
            "--backend {} is needed to compile {shown}",
            steps.backend_hint()
        )
    })?;
    let level = req.level()?;
    let (detected, dir) = match steps.first_run((file, bytes), backend, level, req)? {
        FirstRun::Handed => return Ok(ExitCode::SUCCESS),
        FirstRun::Passes(said) => {
            println!("{said}");
            return Ok(ExitCode::SUCCESS);
        }
        FirstRun::Fails { detected, dir } => (detected, dir),
    };
    println!("detected: {detected}");
    let dir = match dir {
        Ok(dir) => dir,
        Err(why) => {
            println!("no repro written{why}");
            return Ok(ExitCode::FAILURE);
        }
    };
    println!("repro written to {}", absolute(&dir).display());
    if req.no_minify {
        if req.bisect {
            bisect_into(&dir, &dir, req, steps)?;
        }
        report_to(&dir, dialect);
        return Ok(ExitCode::SUCCESS);
    }
    // The manifest names the backend that failed (after AOT, the inner compiler, not the
    // pipeline that was compiled).
    let req = ReproRequest {
        backend: None,
        ..req.clone()
    };
    minify_and_say(&dir, &req, (dialect, steps), started)?;
    Ok(ExitCode::SUCCESS)
}

/// `graphbug repro DIR [run|minify|analyze|share]` of a directory `dialect` wrote (its steps:
/// `steps`).
pub fn on_dir(
    dir: &Path,
    action: Option<&str>,
    req: &ReproRequest,
    (dialect, steps): (&dyn Dialect, &mut dyn Reproducible),
) -> Result<ExitCode> {
    let started = Instant::now();
    match DirAction::asked(dir, action, req.check.is_some())? {
        DirAction::Run => steps.run_dir(dir, req),
        DirAction::Minify => {
            minify_and_say(dir, req, (dialect, steps), started)?;
            Ok(ExitCode::SUCCESS)
        }
        DirAction::Analyze => steps.analyze_dir(dir, req),
        // (No report.html: its paths would name the original's directory.)
        DirAction::Share => {
            steps.share_dir(dir, req)?;
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// Minifies `dir` and says so: the counts, the failure, the program, the report, the
/// commands that go on; then the dialect's own strategies. Returns the nodes before and
/// after.
pub(crate) fn minify_and_say(
    dir: &Path,
    req: &ReproRequest,
    (dialect, steps): (&dyn Dialect, &mut dyn Reproducible),
    started: Instant,
) -> Result<(usize, usize, usize)> {
    let d = steps.minify_dir(dir, req)?;
    let m = &d.minified;
    if let Some(note) = &d.note {
        println!("{note}");
    }
    let minified = absolute(dir).join("minified");
    let unit = dialect.node_word();
    println!(
        "minified {} {unit}s to {} in {} queries ({} cache hits, {} worker{}): {}",
        m.stats.start_nodes,
        m.stats.end_nodes,
        m.stats.queries,
        m.stats.cache_hits,
        d.jobs,
        if d.jobs == 1 { "" } else { "s" },
        minified.display()
    );
    println!("failure: {}: {}", m.signature.kind, m.signature.message);
    print!("{}", d.text);
    if req.bisect {
        // Each compile of the minified program is cheap: the passes are bisected on it.
        let target = if minified.join(crate::MANIFEST_FILE).is_file() {
            minified.clone()
        } else {
            dir.to_path_buf()
        };
        bisect_into(dir, &target, req, steps)?;
    }
    report_to(dir, dialect);
    println!("done in {:.1} s. Next:", started.elapsed().as_secs_f64());
    for line in next_commands(
        dialect,
        &minified.display().to_string(),
        &graphbug_command(),
        &steps.python(),
    ) {
        println!("  {line}");
    }
    steps.after_minify(dir, req, m)?;
    Ok((m.stats.start_nodes, m.stats.end_nodes, m.stats.queries))
}

/// Bisects the backend's passes on the repro directory `target` into `dir/bisect` (where
/// `dir`'s report finds it), with `req`'s bounds.
fn bisect_into(
    dir: &Path,
    target: &Path,
    req: &ReproRequest,
    steps: &mut dyn Reproducible,
) -> Result<()> {
    let out = dir.join(crate::bisect::BISECT_DIR);
    println!("bisecting the passes on {}:", absolute(target).display());
    let breq = crate::bisect::BisectRequest::for_dir(target, out, req.timeout)?;
    steps.bisect(&breq)?;
    Ok(())
}

/// `path` made absolute, as the user is told it.
pub fn absolute(path: &Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf())
}
