//! `graphbug minify`, written once for every dialect: what fails is told once
//! ([`MinifyCheck`]), a check that reads only the program searches with nothing run, and
//! otherwise the dialect starts its checkers and records its reference values
//! ([`Minifiable::start`]), the search runs with `--out` and `--resume`, and the dialect's
//! own strategies go on from the result ([`Minifiable::after`]). A dialect supplies the
//! [`Minifiable`] parts; the request ([`MinifyRequest`]) is the flow's, not the CLI's.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Result};
use graphbug_ir::Graph;
use graphbug_minifier::isolate::Workers;
use graphbug_minifier::progress::{MinifyDir, RunKey};
use graphbug_minifier::{Check, CheckKind, Checker, Contains, Minified, MinifyOptions, Origin};
use graphbug_run::scratch::Scratch;

use crate::search::{search, search_structurally, SearchRun};

/// One checker per worker.
pub type Checkers = Vec<Box<dyn Checker + Send>>;

/// Fingerprints of the values a search's candidates read (see
/// [`MinifyOptions::value_keys`]).
pub type ValueKeys = std::collections::HashMap<Origin, u64>;

/// What a minification is asked to do, whatever the dialect: the program, what fails, how
/// candidates run, and where the search keeps its progress. A dialect's own options (an
/// aten graph's device, an XLA program's reference plugin) are the dialect's.
#[derive(Clone, Debug, Default)]
pub struct MinifyRequest {
    /// The program or graph file.
    pub file: PathBuf,
    /// Its inputs (.safetensors or .npz); without it, seeded random inputs.
    pub inputs: Option<PathBuf>,
    /// Seed of the random inputs.
    pub seed: u64,
    /// The backend whose failure is minified (with a backend check).
    pub backend: Option<String>,
    /// What counts as failing (`--check`).
    pub check: Option<Check>,
    /// A command run on each candidate's directory instead (`--check-command`).
    pub check_command: Option<String>,
    /// Regex the failure message must match (`--check-str`).
    pub check_str: Option<String>,
    /// Count every output of a wrong result (`--strict-accuracy`).
    pub strict_accuracy: bool,
    /// Run the backend in this process (`--no-isolate`).
    pub in_process: bool,
    /// How long a backend run or check command may take (`--timeout`).
    pub timeout: Option<Duration>,
    /// Where progress is kept (`--out`).
    pub out: Option<PathBuf>,
    /// Continue from the state `out` holds (`--resume`).
    pub resume: bool,
    /// Stop after this many queries.
    pub max_queries: Option<usize>,
    /// Run the original this many times, for a flaky bug.
    pub repeat: Option<u32>,
    /// End with a JSON line of counts.
    pub json: bool,
    /// The workers (`-j`, a launcher).
    pub workers: Workers,
}

impl MinifyRequest {
    /// The search's options: `--check-str`, `--repeat`, `--max-queries`, and `value_keys`;
    /// verbose, with progress.
    pub fn options(&self, value_keys: Option<ValueKeys>) -> MinifyOptions {
        search_options(
            self.check_str.clone(),
            self.repeat.map(|k| k as usize),
            self.max_queries,
            value_keys,
        )
    }

    /// What makes this search the one `--resume` continues: the check, the backend,
    /// `--check-str`, and `inputs` (a fingerprint of the inputs' values).
    pub fn run_key(&self, inputs: String) -> RunKey {
        RunKey {
            check: match (&self.check, &self.check_command) {
                (_, Some(cmd)) => format!("command:{cmd}"),
                (Some(check), None) => check.to_string(),
                (None, None) => String::new(),
            },
            backend: self.backend.clone(),
            check_str: self.check_str.clone(),
            inputs,
        }
    }

    /// How the search runs and ends.
    pub fn search_run(&self) -> SearchRun {
        SearchRun {
            out: self.out.clone(),
            resume: self.resume,
            json: self.json,
        }
    }

    /// The same request on another program `file` with its `inputs`, for a failure whose
    /// message matches `check_str`, its progress kept in `out` (a dialect's strategy that
    /// minifies a part of the program on its own).
    pub fn on_part(
        &self,
        file: PathBuf,
        inputs: PathBuf,
        check_str: String,
        out: Option<PathBuf>,
    ) -> MinifyRequest {
        MinifyRequest {
            file,
            inputs: Some(inputs),
            check_str: Some(check_str),
            out,
            resume: false,
            ..self.clone()
        }
    }
}

/// The search's options: `check_str`, `repeat`, `max_queries`, and `value_keys`; verbose,
/// with progress.
pub fn search_options(
    check_str: Option<String>,
    repeat: Option<usize>,
    max_queries: Option<usize>,
    value_keys: Option<ValueKeys>,
) -> MinifyOptions {
    MinifyOptions {
        value_keys,
        check_str,
        verbose: true,
        progress: true,
        max_queries,
        repeat,
        ..MinifyOptions::default()
    }
}

/// What counts as failing, told once from `--check` and `--check-command`.
#[derive(Clone, Debug)]
pub enum MinifyCheck {
    /// A command run on each candidate's directory.
    Command(String),
    /// The candidate calls every op listed.
    Contains(Contains),
    /// A failure of this kind of the backend named.
    Backend(String, CheckKind),
}

impl MinifyCheck {
    /// The check `req` asks for; `backend_hint` says how the dialect names a backend, for
    /// a backend check without one.
    pub fn of(req: &MinifyRequest, backend_hint: &str) -> Result<MinifyCheck> {
        Ok(match (&req.check_command, &req.check) {
            (Some(cmd), _) => MinifyCheck::Command(cmd.clone()),
            (None, Some(Check::Contains(contains))) => MinifyCheck::Contains(contains.clone()),
            (None, Some(check @ Check::Backend(kind))) => {
                let name = req
                    .backend
                    .clone()
                    .ok_or_else(|| anyhow!("--check {check} needs --backend {backend_hint}"))?;
                MinifyCheck::Backend(name, *kind)
            }
            (None, None) => bail!(
                "say what fails: --check compile|runtime|accuracy|contains:OPS or --check-command CMD"
            ),
        })
    }
}

/// What a dialect supplies for a minification of one of its programs.
pub trait Minifiable {
    /// The graph candidates are cut from.
    fn graph(&self) -> &Graph;

    /// How a backend is named, for the error that asks for one (`NAME`).
    fn backend_hint(&self) -> String;

    /// Whether a `contains:` check reads the program as written, so that nothing needs
    /// to run (a dialect whose candidates run in another form says no).
    fn checks_as_written(&self) -> bool {
        true
    }

    /// Starts `check`'s checkers (one per worker) with `scratch` for their files, and
    /// records what the search and `--out` need of the original's run (its inputs, its
    /// reference values).
    fn start(
        &mut self,
        req: &MinifyRequest,
        check: &MinifyCheck,
        scratch: &Scratch,
    ) -> Result<Checkers>;

    /// The search's options for this program, from the request's.
    fn options(&self, options: MinifyOptions) -> MinifyOptions;

    /// A fingerprint of the inputs' values (after [`Minifiable::start`]), for `--resume`
    /// to tell searches apart.
    fn inputs_key(&self) -> String;

    /// The `--out` directory `out` (after [`Minifiable::start`]): the original and the
    /// smallest failing candidate so far, in the dialect's files.
    fn out_dir(&self, out: &Path, run: RunKey, resume: bool) -> Result<MinifyDir<'_>>;

    /// The result as the user reads it.
    fn text(&self, m: &Minified) -> String;

    /// The dialect's own strategies, from the search's result on.
    fn after(&self, _req: &MinifyRequest, _m: &Minified) -> Result<()> {
        Ok(())
    }
}

/// `graphbug minify` of `program`, read from `req.file` since `started`.
pub fn minify(
    req: &MinifyRequest,
    program: &mut dyn Minifiable,
    started: Instant,
) -> Result<Minified> {
    let contains = req.check.as_ref().and_then(Check::contains);
    if let (Some(contains), None, true) = (contains, &req.out, program.checks_as_written()) {
        let m = minify_structurally(req, program.graph(), contains.clone(), started, &|m| {
            program.text(m)
        })?;
        program.after(req, &m)?;
        return Ok(m);
    }
    let check = MinifyCheck::of(req, &program.backend_hint())?;
    if req.workers.launcher.is_some() && !matches!(check, MinifyCheck::Backend(..)) {
        bail!("--worker-launcher starts workers that run a backend; with --check-command the command itself can start its work elsewhere (e.g. `srun ... my-check`), and a contains: check runs no backend");
    }
    let scratch = Scratch::new("minify")?;
    let mut checkers = program.start(req, &check, &scratch)?;
    let program: &dyn Minifiable = program;
    let options = program.options(req.options(None));
    let run = req.run_key(program.inputs_key());
    let dir = match &req.out {
        Some(out) => Some(program.out_dir(out, run, req.resume)?),
        None => None,
    };
    let m = search(
        &req.search_run(),
        program.graph(),
        &mut checkers,
        options,
        dir,
        started,
        &|m| program.text(m),
    )?;
    // The workers end before any of the dialect's own strategies start theirs.
    drop(checkers);
    program.after(req, &m)?;
    Ok(m)
}

/// A minification with a check that reads only the program (`contains:`): nothing runs
/// (no worker, no inputs, no reference run), only the search.
pub fn minify_structurally(
    req: &MinifyRequest,
    graph: &Graph,
    contains: Contains,
    started: Instant,
    text: &dyn Fn(&Minified) -> String,
) -> Result<Minified> {
    if req.workers.launcher.is_some() {
        bail!("--worker-launcher starts workers that run a backend; a contains: check runs no backend");
    }
    let options = search_options(req.check_str.clone(), None, req.max_queries, None);
    Ok(search_structurally(
        &req.search_run(),
        graph,
        contains,
        req.workers.count(),
        &options,
        started,
        text,
    )?)
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use graphbug_minifier::{Candidate, Signature, Verdict};

    use super::*;

    /// A third dialect, as small as one can be: its programs are aten text, its "backend"
    /// fails at runtime on any program that calls `relu`, and it prints a result as its
    /// node count. It supplies the [`Minifiable`] parts and nothing else.
    struct Toy {
        graph: Graph,
        started: bool,
        after: Cell<bool>,
    }

    /// The toy backend: a runtime error wherever `relu` is called.
    struct FailsOnRelu;

    impl Checker for FailsOnRelu {
        fn describe(&self) -> String {
            "runtime error of the toy backend".into()
        }

        fn check(&mut self, c: &Candidate) -> Verdict {
            match c
                .graph
                .nodes
                .iter()
                .any(|n| n.op().is_some_and(|o| o.to_string().contains("relu")))
            {
                true => Verdict::Fails(Signature {
                    kind: "runtime error".into(),
                    message: "the toy backend cannot run relu".into(),
                    ..Signature::default()
                }),
                false => Verdict::Passes,
            }
        }
    }

    impl Minifiable for Toy {
        fn graph(&self) -> &Graph {
            &self.graph
        }

        fn backend_hint(&self) -> String {
            "toy".into()
        }

        fn start(
            &mut self,
            req: &MinifyRequest,
            check: &MinifyCheck,
            _scratch: &Scratch,
        ) -> Result<Checkers> {
            self.started = true;
            match check {
                MinifyCheck::Backend(name, CheckKind::Runtime) if name == "toy" => {
                    Ok((0..req.workers.count())
                        .map(|_| Box::new(FailsOnRelu) as Box<dyn Checker + Send>)
                        .collect())
                }
                MinifyCheck::Contains(c) => Ok(c.checkers(req.workers.count())),
                other => bail!("the toy dialect has no check {other:?}"),
            }
        }

        fn options(&self, options: MinifyOptions) -> MinifyOptions {
            MinifyOptions {
                verbose: false,
                progress: false,
                ..options
            }
        }

        fn inputs_key(&self) -> String {
            "toy".into()
        }

        fn out_dir(&self, out: &Path, _run: RunKey, _resume: bool) -> Result<MinifyDir<'_>> {
            bail!("the toy dialect keeps no directory ({})", out.display())
        }

        fn text(&self, m: &Minified) -> String {
            format!("{} nodes\n", m.graph().nodes.len())
        }

        fn after(&self, _req: &MinifyRequest, _m: &Minified) -> Result<()> {
            self.after.set(true);
            Ok(())
        }
    }

    fn toy() -> Toy {
        let text = std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../../../tests/fixtures/repro-dirs/aten/graph.py"),
        )
        .unwrap();
        Toy {
            graph: graphbug_ir::parse_graph(&text).unwrap(),
            started: false,
            after: Cell::new(false),
        }
    }

    fn request(check: &str) -> MinifyRequest {
        MinifyRequest {
            file: "toy.py".into(),
            check: Some(check.parse().unwrap()),
            ..MinifyRequest::default()
        }
    }

    /// The flow minifies a dialect it has never heard of, from its trait alone: its checker
    /// starts, the search ends at the one node that fails, and its own strategies run after.
    #[test]
    fn a_third_dialect_minifies_through_its_trait_alone() {
        let mut program = toy();
        let req = MinifyRequest {
            backend: Some("toy".into()),
            ..request("runtime")
        };
        let m = minify(&req, &mut program, Instant::now()).unwrap();
        assert!(program.started && program.after.get());
        let ops: Vec<String> = m
            .graph()
            .nodes
            .iter()
            .filter_map(|n| n.op())
            .map(|o| o.to_string())
            .collect();
        assert!(
            ops.len() == 1 && ops[0].contains("relu"),
            "{ops:?}: {}",
            program.text(&m)
        );
        assert_eq!(m.signature.message, "the toy backend cannot run relu");
    }

    /// A check that reads only the program searches with nothing started; one that needs a
    /// backend without one, or no check at all, is refused naming what to give.
    #[test]
    fn what_fails_is_told_once_and_bad_requests_are_refused() {
        let mut program = toy();
        let m = minify(&request("contains:aten.gelu"), &mut program, Instant::now()).unwrap();
        assert!(!program.started && program.after.get());
        assert_eq!(
            m.graph().nodes.iter().filter(|n| n.op().is_some()).count(),
            1
        );
        let e = minify(&request("runtime"), &mut toy(), Instant::now()).unwrap_err();
        assert_eq!(e.to_string(), "--check runtime needs --backend toy");
        let bare = MinifyRequest::default();
        let e = minify(&bare, &mut toy(), Instant::now()).unwrap_err();
        assert!(e.to_string().starts_with("say what fails"), "{e}");
        // A --out the dialect cannot keep is its error, after its checkers started.
        let out = MinifyRequest {
            backend: Some("toy".into()),
            out: Some("toy-out".into()),
            ..request("runtime")
        };
        let e = minify(&out, &mut toy(), Instant::now()).unwrap_err();
        assert!(e.to_string().contains("keeps no directory"), "{e}");
    }
}
