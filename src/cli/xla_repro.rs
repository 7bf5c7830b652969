//! `graphbug repro` of XLA programs: run a program on a PJRT plugin under a repro level,
//! write an XLA repro directory when it fails (see [`graphbug::xla::repro`]) and minify it;
//! run, minify and analyze such a directory, a capture by `graphbug_capture.jax.dump`
//! included. Nothing here needs libtorch.

use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{anyhow, bail, Context, Result};
use graphbug::files::HostTensor;
use graphbug::flow::{Dialect, DirAction};
use graphbug::minifier::progress::{fnv, MinifyDir, WriteBest};
use graphbug::minifier::{
    minify_parallel, BugIdentity, Check, CheckKind, Minified, MinifyOptions, Original, Signature,
    Verdict,
};
use graphbug::run::scratch::Scratch;
use graphbug::xla::execute::XlaBackend;
use graphbug::xla::minify::{elide_constants, Printer, Recorded, XlaChecker};
use graphbug::xla::program::{Constants, Kind, Program};
use graphbug::xla::repro::{fill_dir, program_bytes, read_dir, XlaCase, XlaManifest};

use super::args::{Bound, ReproArgs};
use graphbug::flow::minify::{search_options, MinifyRequest};
use graphbug::xla::flow::{
    backend_under_test, inside_called_computations, program_inputs, read, reference_backend,
    start_checkers, Runs, XlaCheck, ELIDE_AT,
};

/// The environment variable that sets the repro level, as TorchDynamo's.
const REPRO_LEVEL_ENV: &str = "GRAPHBUG_REPRO_LEVEL";

/// The check a failure's signature calls for: its stage's (`compile error` → compile).
fn check_of(sig: &Signature) -> CheckKind {
    sig.failure_kind()
        .map_or(CheckKind::Runtime, |(stage, _)| CheckKind::finding(stage))
}

/// The reference plugin of a directory's action: `--reference-backend`, else the
/// manifest's.
fn case_reference(case: &XlaCase, args: &ReproArgs) -> Result<XlaBackend> {
    reference_backend(Some(
        args.reference_backend
            .as_deref()
            .unwrap_or(&case.manifest.reference_backend),
    ))
}

/// The program of a case, as the plugin under test and the minifier read it.
struct Loaded {
    program: Program,
    printer: Arc<Printer>,
    text: String,
}

fn load(program: Program, what: &str) -> Result<Loaded> {
    program.check().with_context(|| what.to_string())?;
    let printer = Arc::new(Printer::new(&program).with_context(|| what.to_string())?);
    let text = program.text().with_context(|| what.to_string())?;
    Ok(Loaded {
        program,
        printer,
        text,
    })
}

/// One check of the whole program in an isolated worker (a crash or a hang is a
/// verdict), and the values the reference recorded.
fn check_once(
    loaded: &Loaded,
    backend: &XlaBackend,
    kind: CheckKind,
    (inputs, reference): (&[HostTensor], &XlaBackend),
    args: &ReproArgs,
) -> Result<(Verdict, Arc<Recorded>)> {
    let scratch = Scratch::new("repro")?;
    let runs = Runs {
        workers: Default::default(),
        timeout: args.timeout,
        in_process: args.no_isolate,
        accuracy: graphbug::accuracy::AccuracyMode::strict_if(args.strict_accuracy),
    };
    let (mut checkers, recorded) = start_checkers(
        XlaCheck::Backend(Box::new(backend.clone()), kind),
        &runs,
        (&loaded.printer, loaded.text.clone()),
        inputs,
        reference,
        &scratch,
    )?;
    let original = Original::borrowing(loaded.printer.graph());
    let verdict = checkers[0].check(&original.as_given());
    Ok((verdict, recorded))
}

/// `graphbug repro PROGRAM --backend B [--level N]`: runs the program, writes a repro
/// directory when it fails (levels 1-3: compile and runtime failures, crashes and hangs;
/// level 4, the default: wrong results against the reference plugin too), and minifies it.
pub fn flow(file: &Path, bytes: &[u8], kind: Kind, args: &ReproArgs) -> Result<ExitCode> {
    let started = Instant::now();
    let what = file.display().to_string();
    if let Some(a) = &args.action {
        bail!("{what} is not a repro directory, so `{a}` does not apply; give a program alone to run the whole flow");
    }
    if args.check.is_some() {
        bail!("--check says what `repro DIR minify` looks for; the whole flow on a program detects the failure by --level (or use `graphbug minify {what} --check ...`)");
    }
    let loaded = load(read(file, bytes, kind)?, &what)?;
    let level = match (args.level, std::env::var(REPRO_LEVEL_ENV)) {
        (Some(l), _) => l,
        (None, Ok(v)) => v
            .trim()
            .parse()
            .ok()
            .filter(|l| *l <= 4)
            .ok_or_else(|| anyhow!("{REPRO_LEVEL_ENV}={v}: expected 0 to 4"))?,
        (None, Err(_)) => 4,
    };
    let name = args
        .backend
        .as_deref()
        .ok_or_else(|| anyhow!("--backend pjrt:<plugin> is needed to compile {what}"))?;
    let backend = backend_under_test(name, &loaded.printer)?;
    let reference = reference_backend(args.reference_backend.as_deref())?;
    let inputs = program_inputs(&loaded.program, args.inputs.as_deref(), args.seed)?;
    let kind_checked = if level >= 4 {
        CheckKind::Accuracy
    } else {
        CheckKind::Runtime
    };
    println!(
        "running {what} ({} instructions) on `{}` at repro level {level}",
        loaded.printer.graph().num_call_function_nodes(),
        backend.name()
    );
    let (verdict, recorded) =
        check_once(&loaded, &backend, kind_checked, (&inputs, &reference), args)?;
    let sig = match verdict {
        Verdict::Passes => {
            println!(
                "no failure: `{}` compiled and ran the program{}",
                backend.name(),
                if level >= 4 {
                    format!("; its outputs match {}'s", reference.name())
                } else {
                    String::new()
                }
            );
            return Ok(ExitCode::SUCCESS);
        }
        Verdict::Unresolved(e) => bail!("the program could not be judged: {e}"),
        Verdict::Fails(sig) => sig,
    };
    println!("detected: {}: {}", sig.kind, sig.message);
    if level == 0 {
        println!("no repro written (level 0)");
        return Ok(ExitCode::FAILURE);
    }
    let mut manifest = XlaManifest::new(kind, &backend, &reference);
    manifest.check = Some(check_of(&sig));
    manifest.failure = Some(sig);
    manifest.level = Some(level);
    manifest.accuracy = graphbug::accuracy::AccuracyMode::strict_if(args.strict_accuracy);
    let program_file = match kind {
        Kind::StableHloBytecode => program_bytes(&loaded.program, kind).map_err(|e| anyhow!(e))?,
        _ => bytes.to_vec(),
    };
    let outputs = recorded
        .outputs(loaded.printer.graph())
        .map_err(|e| anyhow!(e))?;
    let dir = &args.out;
    graphbug::files::replace_dir_atomically(
        dir,
        |d| {
            fill_dir(
                d,
                &manifest,
                (&program_file, &loaded.program),
                &backend,
                &inputs,
                Some(&outputs),
                dir,
            )
        },
        |p, e| format!("{}: {e}", p.display()),
    )
    .map_err(|e| anyhow!(e))?;
    let shown = std::path::absolute(dir).unwrap_or_else(|_| dir.clone());
    println!("repro written to {}", shown.display());
    if args.no_minify {
        super::report_to(dir);
        return Ok(ExitCode::SUCCESS);
    }
    let case = read_dir(dir).map_err(|e| anyhow!(e))?;
    minify_dir(&case, args, started)
}

/// The backend a directory's action runs: `--backend`, else the manifest's; a positional
/// fault pinned to its instruction.
fn case_backend(case: &XlaCase, args: &ReproArgs, printer: &Printer) -> Result<XlaBackend> {
    let name = args.backend.as_deref().unwrap_or(&case.manifest.backend);
    backend_under_test(name, printer)
}

/// `graphbug repro DIR run|minify|analyze` on an XLA repro directory.
pub fn on_dir(dir: &Path, args: &ReproArgs) -> Result<ExitCode> {
    let started = Instant::now();
    let action = DirAction::asked(dir, args.action.as_deref(), args.check.is_some())?;
    let case = read_dir(dir).map_err(|e| anyhow!(e))?;
    match action {
        DirAction::Run => run_dir(&case, args),
        DirAction::Minify => minify_dir(&case, args, started),
        DirAction::Analyze => analyze_dir(&case, args),
    }
}

/// `repro DIR run`: exit 1 when the recorded failure reproduces (or, in a capture, when
/// the backend fails at all), 0 when the program works.
fn run_dir(case: &XlaCase, args: &ReproArgs) -> Result<ExitCode> {
    let what = case.dir.display().to_string();
    let loaded = load(case.program.clone(), &what)?;
    let backend = case_backend(case, args, &loaded.printer)?;
    let reference = case_reference(case, args)?;
    let kind = case.manifest.check.unwrap_or(CheckKind::Accuracy);
    let (verdict, _) = check_once(&loaded, &backend, kind, (&case.inputs, &reference), args)?;
    let recorded = case.manifest.failure.clone();
    match (verdict, recorded) {
        (Verdict::Passes, _) => {
            println!(
                "no failure: `{}` ran {what} as {} does",
                backend.name(),
                reference.name()
            );
            Ok(ExitCode::SUCCESS)
        }
        (Verdict::Unresolved(e), _) => bail!("{what} could not be judged: {e}"),
        (Verdict::Fails(sig), Some(original)) => {
            let identity = BugIdentity::new(original.clone(), args.check_str.as_deref())
                .map_err(|e| anyhow!("--check-str: {e}"))?;
            if identity.matches(&sig) {
                println!("reproduced: {}: {}", sig.kind, sig.message);
            } else {
                println!(
                    "fails differently: {}: {} (recorded: {}: {})",
                    sig.kind, sig.message, original.kind, original.message
                );
            }
            Ok(ExitCode::FAILURE)
        }
        (Verdict::Fails(sig), None) => {
            println!("fails: {}: {}", sig.kind, sig.message);
            Ok(ExitCode::FAILURE)
        }
    }
}

/// `repro DIR minify`: minifies for `--check`, else the recorded failure's check, else (a
/// capture) any failure of the backend, wrong results included; the result goes to
/// `DIR/minified` as a complete repro directory.
fn minify_dir(case: &XlaCase, args: &ReproArgs, started: Instant) -> Result<ExitCode> {
    let what = case.dir.display().to_string();
    let loaded = load(case.program.clone(), &what)?;
    let graph = loaded.printer.graph();
    let backend = case_backend(case, args, &loaded.printer)?;
    let reference = case_reference(case, args)?;
    let check = match &args.check {
        Some(Check::Contains(contains)) => XlaCheck::Contains(contains.clone()),
        Some(Check::Backend(kind)) => XlaCheck::Backend(Box::new(backend.clone()), *kind),
        None => XlaCheck::Backend(
            Box::new(backend.clone()),
            case.manifest.check.unwrap_or(CheckKind::Accuracy),
        ),
    };
    let runs = Runs {
        workers: args.workers.workers()?,
        timeout: args.timeout,
        in_process: args.no_isolate,
        accuracy: if args.strict_accuracy {
            graphbug::accuracy::AccuracyMode::StrictAccuracy
        } else {
            case.manifest.accuracy
        },
    };
    let scratch = Scratch::new("minify")?;
    let (mut checkers, recorded) = start_checkers(
        check,
        &runs,
        (&loaded.printer, loaded.text.clone()),
        &case.inputs,
        &reference,
        &scratch,
    )?;
    let options = MinifyOptions {
        constants: true,
        ..search_options(
            args.check_str.clone(),
            args.repeat.map(|k| k as usize),
            None,
            Some(recorded.value_keys(graph)),
        )
    };
    let link = case.dir.join("minified");
    let printer = loaded.printer.clone();
    let rec = recorded.clone();
    let manifest = case.manifest.clone();
    let backend_name = backend.name().to_string();
    let write: WriteBest<'_> = Box::new(move |best, signature, _, d| {
        let constants = rec.constants(best)?;
        let program = printer.program(&best.graph, &constants)?;
        let bytes = printer.file_bytes(&best.graph, &constants)?;
        let inputs = rec.candidate_inputs(best)?;
        let outputs = rec.outputs(&best.graph).ok();
        let m = XlaManifest {
            failure: manifest.failure.clone().or_else(|| Some(signature.clone())),
            check: manifest.check.or(Some(check_of(signature))),
            ..manifest.clone()
        };
        fill_dir(
            d,
            &m,
            (&bytes, &program),
            &backend,
            &inputs,
            outputs.as_deref(),
            &link,
        )
    });
    let mut sink = MinifyDir::in_place(
        &case.dir,
        ("program", fnv(case.bytes.iter().copied())),
        write,
    );
    let m = minify_parallel(graph, &mut checkers, &options, &mut sink).map_err(|e| anyhow!(e))?;
    sink.finish(&m).map_err(|e| anyhow!(e))?;
    super::report_to(&case.dir);
    report_minified(
        &m,
        (&loaded.printer, &recorded),
        &case.dir,
        started,
        checkers.len(),
    );
    drop(checkers);
    // Inside the computations the result calls, as `graphbug minify` goes: DIR/inside-NAME.
    let check = args
        .check
        .clone()
        .unwrap_or_else(|| Check::Backend(check_of(&m.signature)));
    let inside = MinifyRequest {
        file: case.dir.join(loaded.printer.file_name()),
        seed: args.seed,
        backend: Some(backend_name),
        check: Some(check),
        strict_accuracy: args.strict_accuracy,
        in_process: args.no_isolate,
        timeout: args.timeout,
        out: Some(case.dir.clone()),
        repeat: args.repeat,
        workers: args.workers.workers()?,
        ..MinifyRequest::default()
    };
    inside_called_computations(
        &inside,
        Some(reference.name()),
        &loaded.printer,
        Some(&recorded),
        &m,
    )?;
    Ok(ExitCode::SUCCESS)
}

/// Prints a repro directory's minification: the counts, the program, the commands to go on.
fn report_minified(
    m: &Minified,
    (printer, recorded): (&Printer, &Recorded),
    dir: &Path,
    started: Instant,
    jobs: usize,
) {
    let shown = std::path::absolute(dir).unwrap_or_else(|_| dir.to_path_buf());
    let minified = shown.join("minified");
    println!(
        "minified {} instructions to {} in {} queries ({} cache hits, {jobs} worker{}): {}",
        m.stats.start_nodes,
        m.stats.end_nodes,
        m.stats.queries,
        m.stats.cache_hits,
        if jobs == 1 { "" } else { "s" },
        minified.display()
    );
    println!("failure: {}: {}", m.signature.kind, m.signature.message);
    print!(
        "{}",
        recorded
            .constants(&m.candidate)
            .and_then(|constants| printer.text(m.graph(), &constants))
            .map(|t| elide_constants(&t, ELIDE_AT))
            .unwrap_or_else(|e| format!("(graphbug cannot print the result: {e})\n"))
    );
    println!("done in {:.1} s. Next:", started.elapsed().as_secs_f64());
    for line in graphbug::flow::next_commands(
        Dialect::Xla,
        &minified.display().to_string(),
        &super::graphbug_command(),
        "python",
    ) {
        println!("  {line}");
    }
}

/// `repro DIR analyze`: in a bounded child, the first instruction whose value diverges
/// from the reference and float64, and where the divergence starts.
fn analyze_dir(case: &XlaCase, args: &ReproArgs) -> Result<ExitCode> {
    let bound = Bound {
        timeout: args.timeout,
        no_isolate: args.no_isolate,
    };
    if let Some(code) = super::supervise(&bound, |run, limit| {
        run.lost(limit)
            .map(|l| format!("the analysis was lost: {l}"))
            .unwrap_or_default()
    })? {
        return Ok(code);
    }
    let what = case.dir.display().to_string();
    let loaded = load(case.program.clone(), &what)?;
    let backend = case_backend(case, args, &loaded.printer)?;
    let reference = case_reference(case, args)?;
    let recorded = Recorded::record(&loaded.printer, case.inputs.clone(), &reference, true)
        .map_err(|e| anyhow!("the reference run on {}: {e}", reference.name()))?;
    if !recorded.has_fp64() {
        println!(
            "note: the program did not run in float64 on {}: values are judged against it alone",
            reference.name()
        );
    }
    let a = XlaChecker::new(
        backend.clone(),
        CheckKind::Accuracy,
        loaded.printer.clone(),
        Arc::new(recorded),
        case.manifest.accuracy,
    )
    .analyze()
    .map_err(|e| anyhow!(e))?;
    println!(
        "compared {} arrays of `{}` with {} and float64: {} diverge",
        a.checked,
        backend.name(),
        reference.name(),
        a.diverging
    );
    match &a.first {
        None => {
            println!("no instruction diverges");
            Ok(ExitCode::SUCCESS)
        }
        Some((name, detail)) => {
            let line = loaded
                .printer
                .text(
                    &Original::borrowing(loaded.printer.graph()).as_given().graph,
                    &Constants::new(),
                )
                .ok()
                .and_then(|t| {
                    t.lines()
                        .find(|l| {
                            let l = l.trim_start().trim_start_matches("ROOT ");
                            l.starts_with(&format!("{name} "))
                                || l.starts_with(&format!("%{name} "))
                        })
                        .map(|l| l.trim().to_string())
                });
            println!("first diverging instruction: `{name}`");
            if let Some(l) = line {
                println!("  {l}");
            }
            for d in detail.lines() {
                println!("  {d}");
            }
            if !a.culprits.is_empty() {
                println!(
                    "the divergence that reaches the outputs starts at: {}",
                    a.culprits
                        .iter()
                        .map(|c| format!("`{c}`"))
                        .collect::<Vec<_>>()
                        .join(", ")
                );
            }
            Ok(ExitCode::FAILURE)
        }
    }
}
