//! XLA programs in graphbug's flow: reading a program and its inputs, the backend under
//! test with its fault pinned, the reference plugin's values, the checkers (in this
//! process, in workers, a command, a structural check), the `--out` directory, and the
//! strategy of XLA's own that minifies inside called computations and loop iterations;
//! [`XlaMinify`] is what the flow's minify needs of an XLA program (see
//! [`graphbug_flow::minify`]). Nothing here needs libtorch.

pub mod bisect;
pub mod corpus;
pub mod dialect;
pub mod dump;
pub mod repro;
pub mod run;
pub mod share;

pub use dialect::XLA;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use anyhow::{anyhow, bail, Context, Result};
use graphbug_accuracy::AccuracyMode;
use graphbug_files::HostTensor;
use graphbug_flow::minify::{Checkers, Minifiable, MinifyCheck, MinifyRequest};
use graphbug_ir::{Graph, TensorMeta};
use graphbug_minifier::checker::describe_check;
use graphbug_minifier::command::CommandChecker;
use graphbug_minifier::isolate::{IsolatedChecker, Workers};
use graphbug_minifier::progress::{fnv, MinifyDir, RunKey, WriteBest};
use graphbug_minifier::{Candidate, CheckKind, Checker, Contains, Minified, MinifyOptions};
use graphbug_run::limits::TimeLimit;
use graphbug_run::memory::Available;
use graphbug_run::process::own_exe;
use graphbug_run::scratch::Scratch;

use crate::execute::{XlaBackend, DEFAULT_BACKEND};
use crate::minify::{
    called_values, elide_constants, file_name, Printer, Recorded, WorkerSpec, XlaChecker,
    REFERENCE_RUN,
};
use crate::program::{Constants, Kind, Program};
use crate::repro::{write_numbered, INPUTS};

/// Reads the XLA program `bytes` of `file` hold; errors name the file.
pub fn read(file: &Path, bytes: &[u8], kind: Kind) -> Result<Program> {
    Program::read(bytes, kind).with_context(|| format!("{}", file.display()))
}

/// The program `bytes` (of form `kind`, read from `file`) as the backend `backend` compiles
/// it: as given, except for IREE, which reads StableHLO alone (see
/// [`crate::iree::importable`]): an HLO program is converted, and MHLO ops IREE does not read
/// become their CHLO equivalents, each change said on standard error. A backend name that
/// does not parse is left for its own error, where it is used.
pub fn as_backend_reads(
    backend: Option<&str>,
    file: &Path,
    bytes: Vec<u8>,
    kind: Kind,
) -> Result<(Vec<u8>, Kind)> {
    let Some(iree) = backend
        .and_then(|name| XlaBackend::parse(name).ok())
        .filter(XlaBackend::is_iree)
    else {
        return Ok((bytes, kind));
    };
    // A target IREE lacks, or tools not found, before any conversion.
    iree.ensure_present().map_err(|e| anyhow!(e))?;
    let program = read(file, &bytes, kind)?;
    let imported = crate::iree::importable(&program)
        .map_err(|e| anyhow!(e))
        .with_context(|| format!("{}", file.display()))?;
    let Some(imported) = imported else {
        return Ok((bytes, kind));
    };
    // A supervised run's child converts again, silently: its starter said what changed.
    if !graphbug_run::process::is_supervised() {
        for said in imported.describe() {
            eprintln!("note: {}: {said}", file.display());
        }
    }
    Ok((imported.text.into_bytes(), Kind::StableHloText))
}

/// The inputs of a run of `program`: read from `file` (keys `arg<i>` or the parameters'
/// names; each parameter once, with its dtype and shape) or random from `seed`, after
/// checking they fit in memory.
pub fn program_inputs(
    program: &Program,
    file: Option<&Path>,
    seed: u64,
) -> Result<Vec<HostTensor>> {
    let params = program.parameters()?;
    let Some(file) = file else {
        let available = Available::now();
        for (name, meta) in &params {
            let bytes = meta
                .shape
                .iter()
                .try_fold(meta.dtype.itemsize() as u64, |acc, &d| {
                    acc.checked_mul(u64::try_from(d).ok()?)
                });
            available
                .ensure_fits(&format!("parameter `{name}` ({meta})"), bytes)
                .map_err(|e| anyhow!(e))?;
        }
        let metas: Vec<TensorMeta> = params.iter().map(|(_, m)| m.clone()).collect();
        return graphbug_files::random_tensors(&metas, seed).map_err(|e| anyhow!(e));
    };
    let mut given: Vec<(String, HostTensor)> = graphbug_files::read(file)?;
    let mut inputs = Vec::with_capacity(params.len());
    for (i, (name, meta)) in params.iter().enumerate() {
        let keys = [format!("arg{i}"), name.clone()];
        let found: Vec<usize> = given
            .iter()
            .enumerate()
            .filter(|(_, (k, _))| keys.contains(k))
            .map(|(j, _)| j)
            .collect();
        let tensor = match found[..] {
            [j] => given.remove(j).1,
            [] => bail!(
                "{}: no input for parameter {i} `{name}` ({meta}): expected a key `arg{i}` or `{name}`",
                file.display()
            ),
            _ => bail!(
                "{}: parameter {i} is given twice, as `arg{i}` and as `{name}`",
                file.display()
            ),
        };
        let dims: Vec<i64> = tensor.shape.iter().map(|&d| d as i64).collect();
        if tensor.dtype != meta.dtype || dims != meta.shape.as_slice() {
            bail!(
                "{}: input for parameter {i} `{name}` is {}{:?}, the program takes {meta}",
                file.display(),
                tensor.dtype.short_name(),
                tensor.shape
            );
        }
        inputs.push(tensor);
    }
    if let Some((extra, _)) = given.first() {
        bail!(
            "{}: `{extra}` is no parameter of the program (it takes {}: arg0..arg{} or {})",
            file.display(),
            params.len(),
            params.len().saturating_sub(1),
            params
                .iter()
                .map(|(n, _)| format!("`{n}`"))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    Ok(inputs)
}

/// Writes `inputs` into `dir` as `inputs.safetensors` (`.npz` when one is complex), keyed
/// `arg0`... (what `--inputs` reads); returns the file.
pub fn write_inputs(dir: &Path, inputs: &[HostTensor]) -> Result<PathBuf, String> {
    write_numbered(dir, INPUTS, "arg", inputs)
}

/// The backend under test: `--backend` with `GRAPHBUG_INJECT_FAULT`'s fault, a fault on
/// the k-th instruction of a kind pinned to that instruction (so it stays on it while
/// others are removed), its plugin found and its fault's target present.
pub fn backend_under_test(name: &str, printer: &Printer) -> Result<XlaBackend> {
    backend_of(name, printer, false).map(|(backend, _)| backend)
}

/// The backend `name` for `printer`'s program, as [`backend_under_test`]; for a program
/// that is one of many (a dump's modules), a testing fault that names no node of it leaves
/// it alone: the plugin it wraps runs it, and why is returned beside it.
pub fn backend_of(
    name: &str,
    printer: &Printer,
    one_of_many: bool,
) -> Result<(XlaBackend, Option<String>)> {
    let mut backend = XlaBackend::parse(name)
        .and_then(XlaBackend::with_env_fault)
        .map_err(|e| anyhow!(e))?;
    let graph = match &backend.fault {
        Some(spec) => printer.fault_graph(spec),
        None => std::borrow::Cow::Borrowed(printer.graph()),
    };
    let mut unfaulted = None;
    match backend.validate(&graph) {
        Ok(()) => {
            if let Some(pinned) = backend.pinned(&graph) {
                eprintln!("the fault is pinned to one instruction: {}", pinned.name());
                backend = pinned;
            }
        }
        Err(why) if one_of_many && backend.fault.is_some() => {
            backend = backend.unfaulted();
            unfaulted = Some(why);
        }
        Err(why) => bail!(why),
    }
    backend.ensure_present().map_err(|e| anyhow!(e))?;
    Ok((backend, unfaulted))
}

/// What counts as failing in a minification of an XLA program.
pub enum XlaCheck {
    /// A command run on each candidate's directory (`--check-command`).
    Command(String),
    /// A structural check (`contains:`), with `--out`: nothing runs but the reference.
    Contains(Contains),
    /// A failure of this kind of the backend.
    Backend(Box<XlaBackend>, CheckKind),
}

/// How candidates run: workers, time limit, isolation, accuracy mode.
pub struct Runs {
    /// The workers (`-j`, a launcher).
    pub workers: Workers,
    /// `--timeout`.
    pub timeout: Option<std::time::Duration>,
    /// `--no-isolate`: the backend runs in this process.
    pub in_process: bool,
    /// How wrong results are judged.
    pub accuracy: AccuracyMode,
}

/// The checkers of `check` (one per worker) on candidates of `printer`'s program (`text`,
/// as read) with `inputs`, and the values the reference plugin recorded for them: in this
/// process, after a worker survived the same run where one runs.
pub fn start_checkers(
    check: XlaCheck,
    runs: &Runs,
    (printer, text): (&Arc<Printer>, String),
    inputs: &[HostTensor],
    reference: &XlaBackend,
    scratch: &Scratch,
) -> Result<(Checkers, Arc<Recorded>)> {
    let inputs_file = write_inputs(scratch.path(), inputs).map_err(|e| anyhow!(e))?;
    let workers = &runs.workers;
    // Float64 values only where this process judges wrong results itself.
    let fp64 = matches!(check, XlaCheck::Backend(_, CheckKind::Accuracy)) && runs.in_process;
    let record = || -> Result<Arc<Recorded>> {
        let took = Instant::now();
        let r = Recorded::record(printer, inputs.to_vec(), reference, fp64)
            .map_err(|e| anyhow!("{REFERENCE_RUN} on {}: {e}", reference.name()))?;
        if fp64 && !r.has_fp64() {
            eprintln!("note: the program did not run in float64 on {}; wrong results are judged by allclose against the reference alone", reference.name());
        }
        eprintln!(
            "{REFERENCE_RUN} on {} took {:.3} s",
            reference.name(),
            took.elapsed().as_secs_f64()
        );
        Ok(Arc::new(r))
    };
    if workers.launcher.is_some() && !matches!(check, XlaCheck::Backend(..)) {
        bail!("--worker-launcher starts workers that run a backend; with --check-command the command itself can start its work elsewhere (e.g. `srun ... my-check`), and a contains: check runs no backend");
    }
    Ok(match check {
        XlaCheck::Command(cmd) => {
            let took = Instant::now();
            let recorded = record()?;
            let limit = TimeLimit::new(runs.timeout, took.elapsed());
            eprintln!("{}", limit.describe_from("the reference run"));
            let checkers = (0..workers.count())
                .map(|k| {
                    let dir = scratch.path().join(format!("command-{k}"));
                    let (printer, recorded) = (printer.clone(), recorded.clone());
                    let write = Box::new(move |c: &Candidate, d: &Path| {
                        write_candidate(&printer, &recorded, c, d)
                    });
                    Box::new(CommandChecker::new(&cmd, write, dir, limit))
                        as Box<dyn Checker + Send>
                })
                .collect();
            (checkers, recorded)
        }
        XlaCheck::Contains(contains) => (contains.checkers(workers.count()), record()?),
        XlaCheck::Backend(backend, kind) if runs.in_process => {
            workers.allow_in_process().map_err(|e| anyhow!(e))?;
            let recorded = record()?;
            let checker = XlaChecker::new(
                *backend,
                kind,
                printer.clone(),
                recorded.clone(),
                runs.accuracy,
            );
            (vec![Box::new(checker) as Box<dyn Checker + Send>], recorded)
        }
        XlaCheck::Backend(backend, kind) => {
            let mut spec =
                WorkerSpec::new(text, inputs_file, &backend, reference, kind, runs.accuracy);
            let exe = own_exe().context("locating the graphbug binary")?;
            let checker = |spec_file: PathBuf| {
                IsolatedChecker::new(
                    exe.clone(),
                    spec_file,
                    describe_check(kind, backend.name()),
                    runs.timeout,
                )
                .with_startup_run(&format!("{REFERENCE_RUN} on {}", reference.name()))
            };
            let boxed = |started: Vec<IsolatedChecker>| -> Checkers {
                started
                    .into_iter()
                    .map(|c| Box::new(c) as Box<dyn Checker + Send>)
                    .collect()
            };
            if workers.launcher.is_some() {
                // Workers elsewhere each record the values (they may share no files).
                let spec_file = spec
                    .write(scratch.path(), "xla-worker.json")
                    .map_err(|e| anyhow!(e))?;
                let bundle = Arc::new(spec.bundle().map_err(|e| anyhow!(e))?);
                let started = workers
                    .start(checker(spec_file), Some(bundle))
                    .map_err(|e| anyhow!(e))?;
                return Ok((boxed(started), record()?));
            }
            // The first worker's reference run records the values once: this process and
            // the other workers read them from its file.
            let values = scratch.path().join("values.npz");
            spec.save_values = Some(values.clone());
            let first_spec = spec
                .write(scratch.path(), "xla-worker.json")
                .map_err(|e| anyhow!(e))?;
            let started = workers
                .start_then(checker(first_spec), || {
                    spec.save_values = None;
                    spec.values = values.exists().then(|| values.clone());
                    spec.write(scratch.path(), "xla-worker-rest.json")
                        .map(&checker)
                })
                .map_err(|e| anyhow!(e))?;
            let recorded = match Recorded::load(printer.graph(), inputs.to_vec(), &values) {
                Ok(r) => Arc::new(r),
                Err(_) => record()?,
            };
            (boxed(started), recorded)
        }
    })
}

/// The reference backend: `name` (default pjrt:cpu), a plugin without a fault.
pub fn reference_backend(name: Option<&str>) -> Result<XlaBackend> {
    let reference = XlaBackend::parse(name.unwrap_or(DEFAULT_BACKEND))
        .map_err(|e| anyhow!("--reference-backend: {e}"))?;
    if reference.fault.is_some() {
        bail!(
            "--reference-backend: the reference runs without faults; name a plugin (pjrt:<plugin>)"
        );
    }
    reference.ensure_present().map_err(|e| match name {
        Some(_) => anyhow!("--reference-backend: {e}"),
        None => anyhow!("the reference plugin: {e}; the reference is XLA's CPU plugin unless --reference-backend names another (`pip install xla-cpu-pjrt` installs it; JAX's own CPU backend is no plugin library)"),
    })?;
    Ok(reference)
}

/// An XLA program being minified: what the flow's minify needs of it (see
/// [`graphbug_flow::minify::Minifiable`]).
pub struct XlaMinify {
    /// The file it was read from, as errors name it.
    file: String,
    /// The program as given.
    bytes: Vec<u8>,
    program: Program,
    printer: Arc<Printer>,
    /// `--reference-backend`: the plugin whose run records the reference values.
    reference_backend: Option<String>,
    /// The reference run's values, once the checkers started.
    recorded: Option<Arc<Recorded>>,
}

impl XlaMinify {
    /// The XLA program of form `kind` that `bytes` (read from `file`) hold, checked, with
    /// the plugin its reference values are recorded on (default pjrt:cpu).
    pub fn read(
        file: &Path,
        bytes: Vec<u8>,
        kind: Kind,
        reference_backend: Option<String>,
    ) -> Result<XlaMinify> {
        let shown = file.display().to_string();
        let program = read(file, &bytes, kind)?;
        program.check().with_context(|| shown.clone())?;
        let printer = Arc::new(Printer::new(&program).with_context(|| shown.clone())?);
        Ok(XlaMinify {
            file: shown,
            bytes,
            program,
            printer,
            reference_backend,
            recorded: None,
        })
    }

    /// The values of the reference run, once [`Minifiable::start`] recorded them.
    fn recorded(&self) -> Result<&Arc<Recorded>> {
        self.recorded
            .as_ref()
            .ok_or_else(|| anyhow!("the reference run has not been recorded yet"))
    }
}

impl Minifiable for XlaMinify {
    fn graph(&self) -> &Graph {
        self.printer.graph()
    }

    fn backend_hint(&self) -> String {
        format!("pjrt:<plugin> or iree:<target> (e.g. {DEFAULT_BACKEND}, iree:llvm-cpu, or fault:<spec>+{DEFAULT_BACKEND})")
    }

    fn start(
        &mut self,
        req: &MinifyRequest,
        check: &MinifyCheck,
        scratch: &Scratch,
    ) -> Result<Checkers> {
        let reference = reference_backend(self.reference_backend.as_deref())?;
        let check = match check {
            MinifyCheck::Command(cmd) => XlaCheck::Command(cmd.clone()),
            MinifyCheck::Contains(contains) => XlaCheck::Contains(contains.clone()),
            MinifyCheck::Backend(name, kind) => {
                XlaCheck::Backend(Box::new(backend_under_test(name, &self.printer)?), *kind)
            }
        };
        let inputs = program_inputs(&self.program, req.inputs.as_deref(), req.seed)?;
        let runs = Runs {
            workers: req.workers.clone(),
            timeout: req.timeout,
            in_process: req.in_process,
            accuracy: AccuracyMode::strict_if(req.strict_accuracy),
        };
        let text = self.program.text().with_context(|| self.file.clone())?;
        let (checkers, recorded) = start_checkers(
            check,
            &runs,
            (&self.printer, text),
            &inputs,
            &reference,
            scratch,
        )?;
        self.recorded = Some(recorded);
        Ok(checkers)
    }

    fn options(&self, options: MinifyOptions) -> MinifyOptions {
        MinifyOptions {
            constants: true,
            value_keys: self
                .recorded
                .as_ref()
                .map(|r| r.value_keys(self.printer.graph())),
            ..options
        }
    }

    fn inputs_key(&self) -> String {
        self.recorded
            .as_ref()
            .map_or_else(String::new, |r| inputs_key(r))
    }

    fn out_dir(&self, out: &Path, run: RunKey, resume: bool) -> Result<MinifyDir<'_>> {
        out_dir(
            out,
            &self.printer,
            &self.bytes,
            self.recorded()?,
            run,
            resume,
        )
    }

    /// The result as text, with the constants it holds (recorded values, where they are).
    fn text(&self, m: &Minified) -> String {
        self.recorded
            .as_ref()
            .map_or_else(|| Ok(Constants::new()), |r| r.constants(&m.candidate))
            .and_then(|constants| self.printer.text(m.graph(), &constants))
            .map(|t| elide_constants(&t, ELIDE_AT))
            .unwrap_or_else(|e| format!("(graphbug cannot print the result: {e})\n"))
    }

    fn after(&self, req: &MinifyRequest, m: &Minified) -> Result<()> {
        inside_called_computations(
            req,
            self.reference_backend.as_deref(),
            &self.printer,
            self.recorded.as_deref(),
            m,
        )
    }
}

/// `graphbug minify` of the XLA program of form `kind` held in `bytes`, its reference
/// values recorded on `reference_backend` (default pjrt:cpu).
pub fn minify(
    req: &MinifyRequest,
    bytes: Vec<u8>,
    kind: Kind,
    reference_backend: Option<String>,
) -> Result<Minified> {
    let started = Instant::now();
    let mut program = XlaMinify::read(&req.file, bytes, kind, reference_backend)?;
    graphbug_flow::minify::minify(req, &mut program, started)
}

/// Where the result keeps instructions that call computations (a `while`'s body, a
/// reducer, a `call`, a StableHLO `func.call` or `stablehlo.while`), tries each computation
/// alone, as a program of its own (see [`Printer::outline`]), on the values it received in
/// the reference run (seeded random ones where none was recorded, as for a reducer's
/// scalars); the first that fails with the same message is minified in turn (`graphbug
/// minify` again, its `--out` under `OUT/inside-NAME`), and its result is the answer. A
/// structural check (`recorded` `None`) runs nothing: any values do.
pub fn inside_called_computations(
    args: &MinifyRequest,
    reference_backend: Option<&str>,
    printer: &Printer,
    recorded: Option<&Recorded>,
    m: &Minified,
) -> Result<()> {
    let scratch = Scratch::new("inside")?;
    let mut tried = std::collections::BTreeSet::new();
    for node in m.graph().nodes.iter().filter(|n| !n.is_placeholder()) {
        for comp in printer.called_by(&node.name) {
            if !tried.insert(comp.clone()) {
                continue;
            }
            let caller = &node.name;
            let outlined = match printer.outline(&comp) {
                Ok(o) => o,
                Err(e) => {
                    eprintln!("Strategy: Inside `{comp}` (called by `{caller}`)\nSKIPPED: {e}");
                    continue;
                }
            };
            let kind = printer.text_kind();
            let program = Program::read(outlined.text.as_bytes(), kind).map_err(|e| {
                anyhow!("graphbug outlined `{comp}` as a program it cannot read: {e}")
            })?;
            let metas: Vec<_> = program
                .parameters()
                .map_err(|e| anyhow!("`{comp}` alone: {e}"))?
                .into_iter()
                .map(|(_, meta)| meta)
                .collect();
            let mut inputs =
                graphbug_files::random_tensors(&metas, args.seed).map_err(|e| anyhow!(e))?;
            let received = match recorded {
                Some(r) => called_values(printer, r, caller, &comp, &outlined),
                None => vec![None; inputs.len()],
            };
            let mut random = 0;
            for (input, value) in inputs.iter_mut().zip(received) {
                match value {
                    Some(v) if v.dtype == input.dtype && v.shape == input.shape => *input = v,
                    _ => random += 1,
                }
            }
            eprintln!(
                "Strategy: Inside `{comp}` (called by `{caller}`): the computation alone, on the values it received{}",
                if random > 0 {
                    format!(" ({random} of {} random: the run recorded none)", inputs.len())
                } else {
                    String::new()
                }
            );
            let inside = Inside {
                args,
                reference_backend,
                signature: &m.signature,
                comp: &comp,
                text: &outlined.text,
                program: &program,
                kind,
                dir: scratch.path().join(comp.replace(['/', '\\'], "_")),
            };
            if inside.minify_on(&inputs, true)? {
                return Ok(());
            }
            // A loop body: the bug may show in a later iteration only.
            if let (Some(cond), Some(recorded)) = (printer.loop_condition(caller, &comp), recorded)
            {
                let states = LoopStates {
                    printer,
                    recorded,
                    caller,
                    cond: &cond,
                };
                if later_iterations(&inside, &states, inputs)? {
                    return Ok(());
                }
            }
        }
    }
    Ok(())
}

/// A called computation taken out as a program of its own, to be minified on given inputs
/// (see [`inside_called_computations`]).
struct Inside<'a> {
    args: &'a MinifyRequest,
    /// The plugin the reference values are recorded on.
    reference_backend: Option<&'a str>,
    signature: &'a graphbug_minifier::Signature,
    comp: &'a str,
    text: &'a str,
    program: &'a Program,
    kind: Kind,
    /// Scratch for its program and inputs files.
    dir: PathBuf,
}

impl Inside<'_> {
    /// Minifies the computation alone on `inputs` for the outer failure's message (its
    /// `--out` under `OUT/inside-NAME`); `false` (and no directory left behind) where it
    /// does not fail so. With `say`, why it does not is printed.
    fn minify_on(&self, inputs: &[HostTensor], say: bool) -> Result<bool> {
        std::fs::create_dir_all(&self.dir)?;
        let file = self.dir.join(file_name(self.kind));
        std::fs::write(&file, self.text)?;
        let inputs_file = write_inputs(&self.dir, inputs).map_err(|e| anyhow!(e))?;
        // A computation whose outputs are all non-floating (a while's condition, a
        // comparator) shows a wrong result only where they count.
        let strict_accuracy = self.args.strict_accuracy
            || self.program.graph().is_ok_and(|g| {
                g.outputs().iter().all(|v| {
                    let mut floating = false;
                    v.for_each_node(&mut |id| {
                        floating |=
                            g.node(id).meta.tensor().is_some_and(|t| {
                                t.dtype.is_floating_point() || t.dtype.is_complex()
                            })
                    });
                    !floating
                })
            });
        let inside = MinifyRequest {
            strict_accuracy,
            ..self.args.on_part(
                file,
                inputs_file,
                regex::escape(&self.signature.message),
                self.args
                    .out
                    .as_ref()
                    .map(|o| o.join(format!("inside-{}", self.comp))),
            )
        };
        let fresh = inside.out.as_ref().filter(|o| !o.exists()).cloned();
        let reference = self.reference_backend.map(str::to_string);
        match minify(&inside, self.text.as_bytes().to_vec(), self.kind, reference) {
            Ok(_) => Ok(true),
            Err(e) => {
                if say {
                    let why = format!("{e:#}");
                    eprintln!("FAIL: {}", why.lines().next().unwrap_or_default());
                }
                // Not where the bug is: no directory of it is left behind.
                if let Some(o) = fresh {
                    let _ = std::fs::remove_dir_all(o);
                }
                Ok(false)
            }
        }
    }
}

/// How many iterations of a loop [`later_iterations`] follows at most.
pub const MAX_LOOP_ITERATIONS: usize = 100;

/// The loop whose body [`later_iterations`] follows: the program's printer and recorded
/// values, the `while` that runs it, its condition.
struct LoopStates<'a> {
    printer: &'a Printer,
    recorded: &'a Recorded,
    caller: &'a str,
    cond: &'a str,
}

/// A loop body that does not fail alone on the loop's first state, on the states the loop
/// goes through: the body and the loop's condition, each a program of its own, run on the
/// reference plugin in this process (as the reference run is), one state kept at a time;
/// at each iteration the body is minified on the state the loop then holds, until one
/// fails as the whole program did (`true`), the loop ends, or [`MAX_LOOP_ITERATIONS`]
/// pass. The body's results are the loop-carried values, the first of its parameters; the
/// values a StableHLO region reads from main (its other parameters, and the condition's)
/// keep what they received.
fn later_iterations(
    inside: &Inside<'_>,
    states: &LoopStates<'_>,
    first: Vec<HostTensor>,
) -> Result<bool> {
    let (comp, cond) = (inside.comp, states.cond);
    let reference = reference_backend(inside.reference_backend)?;
    let outlined = states
        .printer
        .outline(cond)
        .map_err(|e| anyhow!("the loop's condition `{cond}`: {e}"))?;
    let condition = Program::read(outlined.text.as_bytes(), inside.kind)
        .map_err(|e| anyhow!("graphbug outlined `{cond}` as a program it cannot read: {e}"))?;
    // The condition's own parameters: the loop-carried values, then what it reads of main.
    let cond_first: Vec<Option<HostTensor>> = called_values(
        states.printer,
        states.recorded,
        states.caller,
        cond,
        &outlined,
    );
    let on_reference = |what: &str, program: &Program| {
        reference
            .compile(program)
            .map_err(|f| anyhow!("`{what}` on {}: {f}", reference.name()))
    };
    let body = on_reference(comp, inside.program)?;
    let condition = on_reference(cond, &condition)?;
    eprintln!(
        "Strategy: Inside `{comp}` at later iterations: the states the loop goes through on {} (at most {MAX_LOOP_ITERATIONS} iterations)",
        reference.name()
    );
    let mut state = first;
    for k in 1..=MAX_LOOP_ITERATIONS {
        let carried = body
            .execute(&state)
            .map_err(|f| anyhow!("iteration {k} of `{comp}` on {}: {f}", reference.name()))?;
        let n = carried.len();
        let same_form = n <= state.len()
            && carried
                .iter()
                .zip(&state)
                .all(|(a, b)| a.dtype == b.dtype && a.shape == b.shape);
        let cond_inputs: Option<Vec<HostTensor>> = carried
            .iter()
            .cloned()
            .map(Some)
            .chain(cond_first.iter().skip(n).cloned())
            .collect();
        let (true, Some(cond_inputs)) = (same_form, cond_inputs) else {
            eprintln!("SKIPPED: `{comp}`'s results are not the loop's state in its parameters' form, or the condition's inputs were not recorded");
            return Ok(false);
        };
        let go = condition.execute(&cond_inputs).map_err(|f| {
            anyhow!(
                "the condition after iteration {k} on {}: {f}",
                reference.name()
            )
        })?;
        let goes_on = go
            .first()
            .is_some_and(|p| p.data.first().is_some_and(|b| *b != 0));
        if !goes_on {
            eprintln!("FAIL: the loop ends after {k} iterations; the body fails alone on none of its states");
            return Ok(false);
        }
        state.splice(..n, carried);
        eprintln!("Strategy: Inside `{comp}` at iteration {k}: the body alone, on the state the loop then held");
        if inside.minify_on(&state, false)? {
            return Ok(true);
        }
    }
    eprintln!(
        "FAIL: the body fails alone on none of the loop's first {MAX_LOOP_ITERATIONS} states"
    );
    Ok(false)
}

/// Lines longer than this show their constants elided on the terminal.
pub const ELIDE_AT: usize = 300;

/// A fingerprint of the inputs' values, for `--resume` to tell searches apart.
pub fn inputs_key(recorded: &Recorded) -> String {
    fnv(recorded.inputs.iter().flat_map(|t| t.data.iter().copied()))
}

/// Writes candidate `c` into `d`: the program in the input's form and its inputs.
pub fn write_candidate(
    printer: &Printer,
    recorded: &Recorded,
    c: &Candidate,
    d: &Path,
) -> Result<(), String> {
    let bytes = printer.file_bytes(&c.graph, &recorded.constants(c)?)?;
    let path = d.join(printer.file_name());
    graphbug_files::write_file_atomically(&path, &bytes)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    write_inputs(d, &recorded.candidate_inputs(c)?).map(|_| ())
}

/// The output directory (`--out`) of an XLA program's minification: the original as
/// given (`bytes`) and the smallest failing program in the input's form, each with its
/// inputs.
fn out_dir<'a>(
    out: &Path,
    printer: &'a Printer,
    bytes: &'a [u8],
    recorded: &'a Recorded,
    run: graphbug_minifier::progress::RunKey,
    resume: bool,
) -> Result<MinifyDir<'a>> {
    let name = printer.file_name();
    // What a directory holds: a program of any form, or something else (refused).
    let held = |original: &Path| {
        if !original.exists() {
            return None;
        }
        let forms = [Kind::HloText, Kind::HloProto, Kind::StableHloText];
        Some(
            forms
                .iter()
                .find_map(|&k| std::fs::read(original.join(file_name(k))).ok())
                .map(fnv),
        )
    };
    let write_original = |d: &Path| {
        let path = d.join(name);
        graphbug_files::write_file_atomically(&path, bytes)
            .map_err(|e| format!("{}: {e}", path.display()))?;
        write_inputs(d, &recorded.inputs).map(|_| ())
    };
    let write: WriteBest<'a> =
        Box::new(move |best, _, _, d| write_candidate(printer, recorded, best, d));
    MinifyDir::create(
        out,
        ("program", fnv(bytes.iter().copied())),
        held,
        write_original,
        write,
        run,
        resume,
    )
    .map_err(|e| anyhow!(e))
}
