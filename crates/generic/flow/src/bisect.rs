//! `graphbug bisect` for every dialect: the request, and what each dialect's bisection
//! shares. The failure is first written as a repro directory by a child
//! `graphbug repro FILE --no-minify` ([`write_case`]); every trial is then a child
//! `graphbug repro CASE run --backend B` bounded in time ([`run_case`]), so that a compiler
//! that aborts, crashes or hangs on a trial gives a verdict, never the bisector's end.
//! What is searched (aten's pass applications, XLA's passes turned off) is the dialect's.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::{Context, Result};

use crate::DirManifest;
use graphbug_minifier::{Check, CheckKind};
use graphbug_run::failure::Stage;
use graphbug_run::limits::RUN_DEFAULT;
use graphbug_run::process::{describe_status, own_exe, spawn, wait_bounded, Ended};

/// Where `repro --bisect` writes its bisection, in the repro directory.
pub const BISECT_DIR: &str = "bisect";

/// The bisection's summary, as it was printed, in its output directory (the report shows it).
pub const SUMMARY_FILE: &str = "summary.txt";

/// What a bisection is asked to do, whatever the dialect.
#[derive(Clone, Debug)]
pub struct BisectRequest {
    /// The program or graph file.
    pub file: PathBuf,
    /// The backend whose failure to bisect.
    pub backend: String,
    /// What counts as failing.
    pub check: Check,
    /// Inputs (.safetensors or .npz); without it, seeded random inputs.
    pub inputs: Option<PathBuf>,
    /// Seed of the random inputs.
    pub seed: u64,
    /// Where the bisection's directories and report go.
    pub out: PathBuf,
    /// How long a backend run may take before it counts as a hang (default 300 s).
    pub timeout: Option<Duration>,
    /// Trials run side by side.
    pub jobs: u16,
    /// `--passes`: search only these of the passes the compiler runs (empty: all).
    pub passes: Vec<String>,
    /// `--list-passes`: list the passes the compiler runs on the program, and stop.
    pub list_passes: bool,
    /// Arguments every child `graphbug` gets before its command (aten's `--plugin`).
    pub child_args: Vec<OsString>,
    /// The dialect's own arguments of the `repro FILE` that writes the failure's directory
    /// (XLA's `--reference-backend`).
    pub case_args: Vec<OsString>,
}

impl BisectRequest {
    /// The bisection of the repro directory `dir` into `out`: its backend, the check its
    /// failure was found by, its inputs.
    pub fn for_dir(dir: &Path, out: PathBuf, timeout: Option<Duration>) -> Result<BisectRequest> {
        let manifest = DirManifest::read(dir)?;
        Ok(BisectRequest {
            file: dir.to_path_buf(),
            backend: manifest.backend.clone(),
            check: Check::Backend(recorded_check(&manifest)),
            inputs: None,
            seed: 0,
            out,
            timeout,
            jobs: 1,
            passes: Vec::new(),
            list_passes: false,
            child_args: Vec::new(),
            case_args: Vec::new(),
        })
    }
}

/// The check a repro directory's failure was found by: the one it records, else its
/// failure's stage (accuracy where it records none).
pub fn recorded_check(m: &DirManifest) -> CheckKind {
    m.check
        .unwrap_or(match m.failure.as_ref().and_then(|f| f.stage_symptom()) {
            Some((Stage::Compile, _)) => CheckKind::Compile,
            Some((Stage::Runtime, _)) => CheckKind::Runtime,
            Some((Stage::Accuracy, _)) | None => CheckKind::Accuracy,
        })
}

/// What a bounded child `graphbug` printed, and how it ended.
#[derive(Debug)]
pub struct Ran {
    /// Its standard output.
    pub stdout: String,
    /// Its standard error.
    pub stderr: String,
    /// How it ended.
    pub ended: Ended,
    /// The bound it ran under.
    pub limit: Duration,
}

impl Ran {
    /// How it ended, in words: `exit code 1`, `did not end within 660 s`.
    pub fn how(&self) -> String {
        match &self.ended {
            Ended::TimedOut => format!("did not end within {} s", self.limit.as_secs()),
            Ended::Exited(s) => describe_status(s),
        }
    }

    /// The last non-empty line it wrote to standard error (where its error is).
    pub fn last_error(&self) -> &str {
        self.stderr
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .unwrap_or_default()
            .trim()
    }
}

/// Runs this binary in a child process that dies with this one (its own process group:
/// what it starts dies with it), with `req`'s child arguments, `env` set, its arguments set
/// by `command` and `--timeout` after them; its output goes to `dir/<tag>.out|.err`. The
/// child bounds its backend's run itself; this wait bounds its start and bookkeeping too.
pub fn run_graphbug(
    req: &BisectRequest,
    dir: &Path,
    tag: &str,
    env: &[(String, String)],
    command: impl FnOnce(&mut Command),
) -> Result<Ran> {
    let mut cmd = Command::new(own_exe().context("locating the graphbug binary")?);
    cmd.args(&req.child_args);
    command(&mut cmd);
    if let Some(t) = req.timeout {
        cmd.arg("--timeout").arg(t.as_secs_f64().to_string());
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    let (out, err) = (
        dir.join(format!("{tag}.out")),
        dir.join(format!("{tag}.err")),
    );
    let file = |p: &Path| std::fs::File::create(p).with_context(|| format!("{}", p.display()));
    cmd.stdin(Stdio::null())
        .stdout(file(&out)?)
        .stderr(file(&err)?);
    let mut child = spawn(cmd, true).with_context(|| format!("starting the {tag} run"))?;
    let limit = req.timeout.unwrap_or(RUN_DEFAULT) * 2 + Duration::from_secs(60);
    let ended = wait_bounded(&mut child, limit, true)?;
    Ok(Ran {
        stdout: std::fs::read_to_string(&out).unwrap_or_default(),
        stderr: std::fs::read_to_string(&err).unwrap_or_default(),
        ended,
        limit,
    })
}

/// Writes the repro directory of `req`'s failure to `case` (`graphbug repro FILE --level 4
/// --no-minify` in a child, `dir` holding its output); an error says when the backend does
/// not fail, or no directory was written.
pub fn write_case(req: &BisectRequest, case: &Path, dir: &Path) -> Result<()> {
    let ran = run_graphbug(req, dir, "case", &[], |cmd| {
        cmd.arg("repro")
            .arg(&req.file)
            .arg("--backend")
            .arg(&req.backend)
            .arg("--level")
            .arg("4")
            .arg("--out")
            .arg(case)
            .arg("--seed")
            .arg(req.seed.to_string())
            .arg("--no-minify");
        if let Some(i) = &req.inputs {
            cmd.arg("--inputs").arg(i);
        }
        cmd.args(&req.case_args);
    })?;
    if ran.stdout.contains("repro written to") {
        return Ok(());
    }
    if ran.stdout.contains("no failure") {
        anyhow::bail!(
            "`{}` does not fail on {}: nothing to bisect",
            req.backend,
            req.file.display()
        );
    }
    anyhow::bail!(
        "the first run wrote no repro ({}): {}{}",
        ran.how(),
        ran.stdout.trim(),
        ran.stderr.trim()
    )
}

/// What `graphbug repro CASE run` said of a repro directory's failure.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CaseRun {
    /// The recorded failure shows (its line).
    Reproduced(String),
    /// The backend compiled and ran the program without failing.
    NoFailure(String),
    /// It failed in another way than recorded.
    Differently(String),
    /// No verdict: the child crashed, hung or could not judge (how, and its last error).
    NoVerdict(String),
}

impl CaseRun {
    /// Whether it failed in another way than recorded only by where or how much: a wrong
    /// result both times (a pass turned off moves where a wrong result starts, or by how
    /// far it misses). A compile or runtime failure with another message is another failure.
    pub fn same_wrong_result(&self) -> bool {
        let CaseRun::Differently(line) = self else {
            return false;
        };
        let kind = |s: &str| s.split(':').next().unwrap_or_default().trim().to_string();
        let Some((now, recorded)) = line
            .strip_prefix("fails differently:")
            .and_then(|r| r.rsplit_once("(recorded:"))
        else {
            return false;
        };
        let (now, recorded) = (kind(now), kind(recorded));
        now == recorded && now.starts_with("accuracy")
    }
}

/// Runs the repro directory `case` with `backend` (and `env`) in a bounded child
/// ([`run_graphbug`], output in `dir/<tag>.*`), and reads its verdict.
pub fn run_case(
    req: &BisectRequest,
    dir: &Path,
    tag: &str,
    case: &Path,
    backend: &str,
    env: &[(String, String)],
) -> Result<CaseRun> {
    let ran = run_graphbug(req, dir, tag, env, |cmd| {
        cmd.arg("repro")
            .arg(case)
            .arg("run")
            .arg("--backend")
            .arg(backend);
    })?;
    Ok(case_verdict(&ran))
}

/// The verdict `ran` (a `graphbug repro CASE run`) printed, of either dialect.
pub fn case_verdict(ran: &Ran) -> CaseRun {
    let line = ran
        .stdout
        .lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or_default()
        .trim()
        .to_string();
    if line.starts_with("reproduced") {
        CaseRun::Reproduced(line)
    } else if line.starts_with("no failure") || line.starts_with("does not reproduce") {
        CaseRun::NoFailure(line)
    } else if line.starts_with("fails") {
        CaseRun::Differently(line)
    } else {
        let error = ran.last_error();
        CaseRun::NoVerdict(if error.is_empty() {
            ran.how()
        } else {
            format!("{}: {error}", ran.how())
        })
    }
}

/// How many trials a binary search over `n` items asks at most (`ceil(log2(n))`).
pub fn steps(n: usize) -> u64 {
    if n <= 1 {
        0
    } else {
        u64::from(usize::BITS - (n - 1).leading_zeros())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ran(stdout: &str, stderr: &str, code: i32) -> Ran {
        use std::os::unix::process::ExitStatusExt;
        Ran {
            stdout: stdout.into(),
            stderr: stderr.into(),
            ended: Ended::Exited(std::process::ExitStatus::from_raw(code << 8)),
            limit: Duration::from_secs(660),
        }
    }

    /// Both dialects' `repro DIR run` lines read alike; anything else is no verdict, with
    /// how the child ended and its last error.
    #[test]
    fn verdicts_of_either_dialect_read_alike() {
        for (out, want) in [
            ("reproduced: accuracy wrong result: x", "Reproduced"),
            (
                "no failure: `pjrt:cpu` ran case as pjrt:cpu does",
                "NoFailure",
            ),
            ("does not reproduce: it ran", "NoFailure"),
            (
                "fails differently: compile error: y (recorded: ...)",
                "Differently",
            ),
        ] {
            let v = case_verdict(&ran(&format!("\n{out}\n"), "", 1));
            assert!(format!("{v:?}").starts_with(want), "{out}: {v:?}");
        }
        // A wrong result both times is the same failure; another compile error is not.
        let v = case_verdict(&ran("fails differently: accuracy wrong result: outputs differ (recorded: accuracy wrong result: outputs differ)", "", 1));
        assert!(v.same_wrong_result(), "{v:?}");
        let v = case_verdict(&ran(
            "fails differently: compile error: LHS batch dims (recorded: compile error: other)",
            "",
            1,
        ));
        assert!(!v.same_wrong_result(), "{v:?}");
        let v = case_verdict(&ran(
            "fails differently: runtime error: x (recorded: accuracy wrong result: y)",
            "",
            1,
        ));
        assert!(!v.same_wrong_result());
        assert!(!CaseRun::Reproduced("reproduced: accuracy".into()).same_wrong_result());
        let v = case_verdict(&ran("", "note: x\nerror: the plugin aborted\n\n", 134));
        assert_eq!(
            v,
            CaseRun::NoVerdict("exit code 134: error: the plugin aborted".into())
        );
        let mut hung = ran("", "", 0);
        hung.ended = Ended::TimedOut;
        assert_eq!(
            case_verdict(&hung),
            CaseRun::NoVerdict("did not end within 660 s".into())
        );
    }

    #[test]
    fn steps_are_ceil_log2() {
        let got: Vec<u64> = [0, 1, 2, 3, 4, 5, 86, 178].map(steps).to_vec();
        assert_eq!(got, [0, 0, 1, 2, 2, 3, 7, 8]);
    }
}
