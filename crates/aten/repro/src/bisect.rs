//! `graphbug bisect` of aten graphs: the pass of a backend at which a failure first
//! appears, and the least number of its applications that still fails, as PyTorch's
//! CompilerBisector and LLVM's `-opt-bisect-limit` find them.
//!
//! Every probe is `graphbug repro CASE run --backend 'limit:<pass>=<n>,...+<backend>'` in a
//! child process bounded in time (a crash or a hang is a verdict like any other), where
//! CASE is the repro directory of the original failure; the probe's pass log says which
//! applications it made.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicUsize, Ordering};

use anyhow::{anyhow, bail, Context, Result};
use graphbug_backends::passes::{Application, PassLimits, PASS_GRAPHS_ENV, PASS_LOG_ENV};
use graphbug_backends::{lookup, Stage};
use graphbug_flow::bisect::{run_case, steps, write_case, BisectRequest, CaseRun};
use graphbug_minifier::bisect::least_failing;
use graphbug_minifier::{Check, CheckKind};
use graphbug_run::progress::Progress;
use graphbug_run::scratch::Scratch;
use serde::Serialize;

use crate::case::{read_repro_dir, write_repro_dir};

/// What a bisection found, written to `guilty/bisect.json`.
#[derive(Debug, Serialize)]
struct Report {
    backend: String,
    passes: Vec<(String, usize)>,
    pass: String,
    application: usize,
    applications: usize,
    node: String,
    probes: usize,
    speculative: usize,
}

/// One probe's verdict and the applications it made.
#[derive(Clone)]
struct Probe {
    fails: bool,
    applications: Vec<Application>,
    /// Where its pass graphs were written.
    graphs: PathBuf,
}

/// Runs probes: the repro directory of the failure, the backend, and the probes made.
struct Prober<'a> {
    args: &'a BisectRequest,
    /// The backend probed (the one the repro recorded).
    backend: String,
    case: PathBuf,
    scratch: &'a Scratch,
    /// The bar over the probes.
    progress: &'a Progress,
    made: AtomicUsize,
    cache: std::sync::Mutex<BTreeMap<String, Probe>>,
}

impl Prober<'_> {
    /// Whether the backend with `limits` still shows the failure (cached by limits).
    fn probe(&self, limits: &BTreeMap<String, usize>) -> Result<Probe> {
        let key = PassLimits::format(limits);
        if let Some(p) = self
            .cache
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&key)
        {
            return Ok(p.clone());
        }
        let k = self.made.fetch_add(1, Ordering::Relaxed);
        let dir = self.scratch.path().join(format!("probe{k}"));
        std::fs::create_dir_all(&dir)?;
        let backend = format!("limit:{key}+{}", self.backend);
        let log = dir.join("passes.jsonl");
        let graphs = dir.join("graphs");
        let env = [
            (PASS_LOG_ENV.to_string(), log.display().to_string()),
            (PASS_GRAPHS_ENV.to_string(), graphs.display().to_string()),
        ];
        let fails = match run_case(self.args, &dir, "probe", &self.case, &backend, &env)? {
            CaseRun::Reproduced(_) => true,
            CaseRun::NoFailure(_) => false,
            CaseRun::Differently(said) | CaseRun::NoVerdict(said) => {
                bail!("the probe with `{backend}` gave no verdict: {said}")
            }
        };
        self.progress.inc(1);
        let probe = Probe {
            fails,
            applications: PassLimits::read_log(&log).map_err(|e| anyhow!(e))?,
            graphs,
        };
        self.cache
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(key, probe.clone());
        Ok(probe)
    }

    /// [`Self::probe`] for several limits side by side.
    fn probe_all(&self, all: &[BTreeMap<String, usize>]) -> Result<Vec<Probe>> {
        std::thread::scope(|s| {
            let running: Vec<_> = all.iter().map(|l| s.spawn(move || self.probe(l))).collect();
            running
                .into_iter()
                .map(|h| {
                    h.join()
                        .unwrap_or_else(|_| Err(anyhow!("a probe thread panicked")))
                })
                .collect()
        })
    }
}

/// How many times each pass applied in a probe.
fn counts(applications: &[Application]) -> BTreeMap<String, usize> {
    let mut c = BTreeMap::new();
    for a in applications {
        let n = c.entry(a.pass.clone()).or_insert(0);
        *n = (*n).max(a.index);
    }
    c
}

/// `graphbug bisect`.
pub fn bisect(args: &BisectRequest) -> Result<ExitCode> {
    let check = match &args.check {
        Check::Backend(kind) => *kind,
        Check::Contains(_) => bail!(
            "bisecting aten graphs looks for a failure of the backend (--check compile, runtime or accuracy); a contains: check reads what the compiler made, which only XLA's plugins dump"
        ),
    };
    if args.list_passes || !args.passes.is_empty() {
        bail!(
            "--list-passes and --passes name the passes of XLA's plugins; an aten backend's passes are searched in its own order, each by its applications"
        );
    }
    lookup(&args.backend)?;
    let scratch = Scratch::new("bisect")?;
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("creating {}", args.out.display()))?;
    // A repro directory is the case itself; a graph's failure is written as one first.
    let case = if args.file.is_dir() {
        args.file.clone()
    } else {
        args.out.join("case")
    };
    // A bar over the probes the serial search makes: the first run, every pass on and
    // off; its length grows as the passes and the applications become known.
    let progress = Progress::bar("bisect", 3);
    let say = |line: String| progress.suspend(|| println!("{line}"));
    progress.set_message("writing the repro of the failure");
    if !args.file.is_dir() {
        write_case(args, &case, scratch.path())?;
    }
    progress.inc(1);
    let recorded = read_repro_dir(&case)?;
    if recorded.manifest.training {
        say("the failure is in the backward: every probe runs a training step".to_string());
    }
    let probed = recorded.manifest.backend.clone();
    let declared = lookup(&probed)?.passes();
    let failure = recorded
        .manifest
        .failure
        .clone()
        .ok_or_else(|| anyhow!("{}: no failure was recorded", case.display()))?;
    let wanted = match check {
        CheckKind::Compile => matches!(failure.stage, Stage::Compile),
        CheckKind::Runtime => matches!(failure.stage, Stage::Compile | Stage::Runtime),
        CheckKind::Accuracy => matches!(failure.stage, Stage::Accuracy),
    };
    if !wanted {
        bail!(
            "`{}` fails with a {} {} ({}), not the {} failure --check asks for",
            args.backend,
            failure.stage,
            failure.symptom,
            failure.message.lines().next().unwrap_or_default(),
            match check {
                CheckKind::Compile => "compile",
                CheckKind::Runtime => "compile or runtime",
                CheckKind::Accuracy => "accuracy",
            }
        );
    }
    say(format!(
        "bisecting `{}` on {}: {} {}: {}",
        args.backend,
        args.file.display(),
        failure.stage,
        failure.symptom,
        failure.message.lines().next().unwrap_or_default()
    ));
    let prober = Prober {
        args,
        backend: probed.clone(),
        case: case.clone(),
        scratch: &scratch,
        progress: &progress,
        made: AtomicUsize::new(0),
        cache: std::sync::Mutex::new(BTreeMap::new()),
    };
    progress.set_message("every pass on");
    let all = prober.probe(&BTreeMap::new())?;
    if !all.fails {
        bail!(
            "the failure does not show again through {} (a flaky failure? see `graphbug minify --repeat`)",
            case.display()
        );
    }
    let applied = counts(&all.applications);
    let passes: Vec<(String, usize)> = declared
        .iter()
        .filter_map(|p| applied.get(p).map(|&n| (p.clone(), n)))
        .collect();
    let listed: Vec<String> = declared
        .iter()
        .map(|p| {
            format!(
                "{p} ({} applications)",
                applied.get(p).copied().unwrap_or(0)
            )
        })
        .collect();
    if passes.is_empty() {
        say(format!(
            "`{}` {}: it is bisected as one stage, and the failure is in it",
            args.backend,
            if declared.is_empty() {
                "declares no passes".to_string()
            } else {
                format!("applied none of its passes ({})", listed.join(", "))
            }
        ));
        say(format!("repro of the failure: {}", case.display()));
        return Ok(ExitCode::SUCCESS);
    }
    say(format!("passes, in order: {}", listed.join(", ")));
    // Every pass off, the search over the passes, the first failing pass's applications
    // counted (the search over them is added once they are known).
    progress.set_length(progress.position() + 2 + steps(passes.len()));
    let off = |from: usize| -> BTreeMap<String, usize> {
        passes[from..].iter().map(|(p, _)| (p.clone(), 0)).collect()
    };
    progress.set_message("every pass off");
    let none = prober.probe(&off(0))?;
    if none.fails {
        say(format!(
            "the failure shows with every pass off: it is in `{}`'s pipeline itself (functionalization, the joint graph, its inner compilers), not in one of its passes",
            args.backend
        ));
        say(format!("repro of the failure: {}", case.display()));
        return Ok(ExitCode::SUCCESS);
    }
    let jobs = usize::from(args.jobs);
    let mut error = None;
    // The first pass whose applications (with those before it) show the failure.
    let stage = least_failing(0, passes.len(), jobs, &mut |ks| {
        if let Some(&k) = ks.first() {
            progress.set_message(format!(
                "passes: through `{}` ({k} of {})",
                passes[k - 1].0,
                passes.len()
            ));
        }
        answer(&prober, ks.iter().map(|&k| off(k)).collect(), &mut error)
    });
    if let Some(e) = error.take() {
        return Err(e);
    }
    let (pass, _) = passes[stage.least - 1].clone();
    progress.set_message(format!("passes: through `{pass}`"));
    let at_stage = prober.probe(&off(stage.least))?;
    let total = counts(&at_stage.applications)
        .get(&pass)
        .copied()
        .unwrap_or(0);
    if total == 0 {
        bail!(
            "enabling `{pass}` shows the failure, yet it made no application: the passes are not independent of each other, so no single application is to blame"
        );
    }
    say(format!(
        "first failing pass: `{pass}` ({total} applications; the passes before it do not fail)"
    ));
    // The search over the applications, then the guilty one and the one before.
    progress.set_length(progress.position() + 2 + steps(total));
    let limited = |n: usize| -> BTreeMap<String, usize> {
        let mut l = off(stage.least);
        l.insert(pass.clone(), n);
        l
    };
    let apps = least_failing(0, total, jobs, &mut |ns| {
        if let Some(&n) = ns.first() {
            progress.set_message(format!("applications of `{pass}`: {n} of {total}"));
        }
        answer(
            &prober,
            ns.iter().map(|&n| limited(n)).collect(),
            &mut error,
        )
    });
    if let Some(e) = error.take() {
        return Err(e);
    }
    let n = apps.least;
    progress.set_message(format!("applications of `{pass}`: {n} and {}", n - 1));
    let guilty = prober.probe(&limited(n))?;
    let before = prober.probe(&limited(n - 1))?;
    let node = guilty
        .applications
        .iter()
        .find(|a| a.pass == pass && a.index == n)
        .map(|a| a.node.clone())
        .unwrap_or_default();
    progress.set_message("writing the guilty repro");
    say(format!(
        "guilty: application {n} of {total} of `{pass}`, on node `{node}` (with {n} the failure shows, with {} it does not)",
        n - 1
    ));
    // The guilty repro: the failure with the guilty application the last one made.
    let mut repro = recorded;
    let limits = limited(n);
    repro.manifest.backend = format!("limit:{}+{probed}", PassLimits::format(&limits));
    let out = args.out.join("guilty");
    write_repro_dir(&out, &repro)?;
    for (name, probe) in [("before", &before), ("after", &guilty)] {
        copy_graphs(&probe.graphs, &out.join(name))?;
    }
    let probes = prober.made.load(Ordering::Relaxed);
    let report = Report {
        backend: probed.clone(),
        passes: passes.clone(),
        pass: pass.clone(),
        application: n,
        applications: total,
        node,
        probes,
        speculative: stage.speculative + apps.speculative,
    };
    std::fs::write(
        out.join("bisect.json"),
        serde_json::to_string_pretty(&report)? + "\n",
    )?;
    progress.finish();
    println!(
        "repro: {} (`graphbug repro {} run`; before/ and after/ hold the graphs each pass left, with {} and {n} applications)",
        out.display(),
        out.display(),
        n - 1
    );
    println!(
        "{probes} probes{}",
        if jobs > 1 {
            format!(
                ", {} of them run ahead of the search and not needed",
                report.speculative
            )
        } else {
            String::new()
        }
    );
    Ok(ExitCode::SUCCESS)
}

/// Probes `limits` side by side; an error is kept in `error` (and the search told the
/// limits fail, which ends it at once without a wrong answer standing).
fn answer(
    prober: &Prober<'_>,
    limits: Vec<BTreeMap<String, usize>>,
    error: &mut Option<anyhow::Error>,
) -> Vec<bool> {
    if error.is_some() {
        return vec![true; limits.len()];
    }
    match prober.probe_all(&limits) {
        Ok(probes) => probes.iter().map(|p| p.fails).collect(),
        Err(e) => {
            *error = Some(e);
            vec![true; limits.len()]
        }
    }
}

/// Copies the pass graphs a probe wrote (if any) to `to`.
fn copy_graphs(from: &Path, to: &Path) -> Result<()> {
    std::fs::create_dir_all(to)?;
    let Ok(entries) = std::fs::read_dir(from) else {
        return Ok(());
    };
    for e in entries.flatten() {
        std::fs::copy(e.path(), to.join(e.file_name()))?;
    }
    Ok(())
}
