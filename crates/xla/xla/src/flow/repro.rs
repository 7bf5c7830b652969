//! XLA programs in `graphbug repro` (see [`graphbug_flow::repro`]): the first run on a
//! PJRT plugin under a repro level, an XLA repro directory written when it fails (see
//! [`crate::repro`]), and `run`, `minify` and `analyze` of such a directory, a capture by
//! `graphbug_capture.jax.dump` included. Nothing here needs libtorch.

use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{anyhow, bail, Context, Result};
use graphbug_accuracy::AccuracyMode;
use graphbug_files::HostTensor;
use graphbug_flow::dump::Disagreement;
use graphbug_flow::minify::{search_options, MinifyRequest};
use graphbug_flow::repro::{DirMinified, FirstRun, ReproRequest, Reproducible};
use graphbug_ir::Graph;
use graphbug_minifier::progress::{fnv, MinifyDir, WriteBest};
use graphbug_minifier::{
    minify_parallel, BugIdentity, Check, CheckKind, Minified, MinifyOptions, Original, Signature,
    Verdict,
};
use graphbug_run::scratch::Scratch;

use super::{
    backend_of, backend_under_test, inside_called_computations, program_inputs, read,
    reference_backend, start_checkers, Runs, XlaCheck, ELIDE_AT,
};
use crate::execute::XlaBackend;
use crate::minify::{elide_constants, Printer, Recorded, XlaChecker};
use crate::program::{sniff, Constants, Kind, Program};
use crate::repro::{fill_dir, program_bytes, read_dir, XlaCase, XlaManifest};

/// The check a failure's signature calls for: its stage's (`compile error` → compile).
fn check_of(sig: &Signature) -> CheckKind {
    sig.failure_kind()
        .map_or(CheckKind::Runtime, |(stage, _)| CheckKind::finding(stage))
}

/// XLA programs in `graphbug repro` (see [`graphbug_flow::repro`]), with the plugin whose
/// run records the reference values: `--reference-backend`, else a directory's manifest's,
/// else pjrt:cpu.
pub struct XlaRepro {
    /// `--reference-backend`.
    pub reference_backend: Option<String>,
    /// What the last minification of a directory left for the strategies after it.
    minified: Option<DirState>,
    /// Why the last first run's fault named no node of its program (one of many).
    unfaulted: Option<String>,
    /// What kind of disagreement the last first run's failure is.
    disagreement: Option<Disagreement>,
}

/// A directory's minification, for [`inside_called_computations`] after it.
struct DirState {
    printer: Arc<Printer>,
    recorded: Arc<Recorded>,
    reference: String,
    backend: String,
}

impl XlaRepro {
    /// `graphbug repro` of XLA programs, their reference values recorded on
    /// `reference_backend` (default: a directory's manifest's, else pjrt:cpu).
    pub fn new(reference_backend: Option<String>) -> XlaRepro {
        XlaRepro {
            reference_backend,
            minified: None,
            unfaulted: None,
            disagreement: None,
        }
    }

    /// The reference plugin of a directory's action: `--reference-backend`, else the
    /// manifest's.
    pub(super) fn case_reference(&self, case: &XlaCase) -> Result<XlaBackend> {
        reference_backend(Some(
            self.reference_backend
                .as_deref()
                .unwrap_or(&case.manifest.reference_backend),
        ))
    }
}

/// What compilers say when they refuse an op they do not implement (IREE: an op of a
/// dialect it lacks, or one it cannot legalize, custom calls included; XLA: `UNIMPLEMENTED`
/// and unregistered custom-call targets).
const REFUSALS: [&str; 6] = [
    "failed to legalize operation",
    "not found for custom op",
    "UNIMPLEMENTED",
    "No registered implementation for",
    "not supported",
    "unsupported op",
];

/// The kind of disagreement `sig` (a failure of the program `graph`) is: by its stage and
/// symptom, a compile error that refuses an op told apart (see [`REFUSALS`]), and a wrong
/// result by what it is: NaN or infinity where the reference is finite (an infinite or NaN
/// margin), a first divergence at a float-to-integer convert (implementation-defined out of
/// range, so neither side is wrong), or a numeric difference.
pub(super) fn disagreement(sig: &Signature, graph: &Graph) -> Option<Disagreement> {
    let class = Disagreement::of_kind(&sig.kind)?;
    Some(match class {
        Disagreement::CompileFailure if REFUSALS.iter().any(|r| sig.message.contains(r)) => {
            Disagreement::RefusedOp
        }
        Disagreement::Numeric if sig.margin.is_some_and(|m| !m.is_finite()) => {
            Disagreement::NonFinite
        }
        Disagreement::Numeric if sig.culprits.iter().any(|c| float_to_int(graph, c)) => {
            Disagreement::ImplementationDefined
        }
        other => other,
    })
}

/// Whether the node `name` of `graph` converts a float to an integer (HLO's `convert`,
/// StableHLO's `stablehlo.convert`).
fn float_to_int(graph: &Graph, name: &str) -> bool {
    let Some(node) = graph.nodes.iter().find(|n| n.name.as_str() == name) else {
        return false;
    };
    let converts = node.op().is_some_and(|op| op.name == "convert");
    let dtype = |n: &graphbug_ir::Node| n.meta.tensor().map(|t| t.dtype);
    let integer = dtype(node).is_some_and(|d| {
        !(d.is_floating_point() || d.is_complex() || d == graphbug_ir::Dtype::Bool)
    });
    let from_float = node
        .inputs()
        .first()
        .and_then(|&id| dtype(graph.node(id)))
        .is_some_and(|d| d.is_floating_point());
    converts && integer && from_float
}

/// The program of a case, as the plugin under test and the minifier read it.
pub(super) struct Loaded {
    pub(super) program: Program,
    pub(super) printer: Arc<Printer>,
    pub(super) text: String,
}

/// `program` checked and read for the plugin and the minifier; errors say `what` it is.
pub(super) fn load(program: Program, what: &str) -> Result<Loaded> {
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
pub(super) fn check_once(
    loaded: &Loaded,
    backend: &XlaBackend,
    kind: CheckKind,
    (inputs, reference): (&[HostTensor], &XlaBackend),
    req: &ReproRequest,
) -> Result<(Verdict, Arc<Recorded>)> {
    let scratch = Scratch::new("repro")?;
    let runs = Runs {
        workers: Default::default(),
        timeout: req.timeout,
        in_process: req.in_process,
        accuracy: AccuracyMode::strict_if(req.strict_accuracy),
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

impl Reproducible for XlaRepro {
    fn backend_hint(&self) -> &'static str {
        "pjrt:<plugin> or iree:<target>"
    }

    fn python(&self) -> String {
        "python".into()
    }

    fn unfaulted(&self) -> Option<String> {
        self.unfaulted.clone()
    }

    fn disagreement(&self) -> Option<Disagreement> {
        self.disagreement
    }

    /// Runs the program; a failure writes a repro directory (levels 1-3: compile and
    /// runtime failures, crashes and hangs; level 4, the default: wrong results against
    /// the reference plugin too).
    fn first_run(
        &mut self,
        (file, bytes): (&Path, Vec<u8>),
        backend: &str,
        level: u8,
        req: &ReproRequest,
    ) -> Result<FirstRun> {
        self.unfaulted = None;
        self.disagreement = None;
        let what = file.display().to_string();
        let kind = sniff(&bytes, file).ok_or_else(|| anyhow!("{what}: not an XLA program"))?;
        let (bytes, kind) = super::as_backend_reads(Some(backend), file, bytes, kind)?;
        let loaded = load(read(file, &bytes, kind)?, &what)?;
        let (backend, unfaulted) = backend_of(backend, &loaded.printer, req.one_of_many)?;
        if let Some(why) = &unfaulted {
            println!("runs without the fault: {why}");
        }
        self.unfaulted = unfaulted;
        let reference = reference_backend(self.reference_backend.as_deref())?;
        let inputs = program_inputs(&loaded.program, req.inputs.as_deref(), req.seed)?;
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
            check_once(&loaded, &backend, kind_checked, (&inputs, &reference), req)?;
        let sig = match verdict {
            Verdict::Passes => {
                return Ok(FirstRun::Passes(format!(
                    "no failure: `{}` compiled and ran the program{}",
                    backend.name(),
                    if level >= 4 {
                        format!("; its outputs match {}'s", reference.name())
                    } else {
                        String::new()
                    }
                )))
            }
            Verdict::Unresolved(e) => bail!("the program could not be judged: {e}"),
            Verdict::Fails(sig) => sig,
        };
        self.disagreement = disagreement(&sig, loaded.printer.graph());
        let detected = format!("{}: {}", sig.kind, sig.message);
        if level == 0 {
            return Ok(FirstRun::Fails {
                detected,
                dir: Err(" (level 0)".into()),
            });
        }
        let mut manifest = XlaManifest::new(kind, &backend, &reference);
        manifest.check = Some(check_of(&sig));
        manifest.failure = Some(sig);
        manifest.level = Some(level);
        manifest.accuracy = AccuracyMode::strict_if(req.strict_accuracy);
        let program_file = match kind {
            Kind::StableHloBytecode => {
                program_bytes(&loaded.program, kind).map_err(|e| anyhow!(e))?
            }
            _ => bytes.clone(),
        };
        let outputs = recorded
            .outputs(loaded.printer.graph())
            .map_err(|e| anyhow!(e))?;
        let dir = &req.out;
        graphbug_files::replace_dir_atomically(
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
        Ok(FirstRun::Fails {
            detected,
            dir: Ok(dir.clone()),
        })
    }

    /// Exit 1 when the recorded failure reproduces (or, in a capture, when the backend
    /// fails at all), 0 when the program works.
    fn run_dir(&self, dir: &Path, req: &ReproRequest) -> Result<ExitCode> {
        let case = read_dir(dir).map_err(|e| anyhow!(e))?;
        let what = case.dir.display().to_string();
        let loaded = load(case.program.clone(), &what)?;
        let backend = case_backend(&case, req, &loaded.printer)?;
        let reference = self.case_reference(&case)?;
        let kind = case.manifest.check.unwrap_or(CheckKind::Accuracy);
        let (verdict, _) = check_once(&loaded, &backend, kind, (&case.inputs, &reference), req)?;
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
                let identity = BugIdentity::new(original.clone(), req.check_str.as_deref())
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

    /// Minifies for `--check`, else the recorded failure's check, else (a capture) any
    /// failure of the backend, wrong results included.
    fn minify_dir(&mut self, dir: &Path, req: &ReproRequest) -> Result<DirMinified> {
        let case = read_dir(dir).map_err(|e| anyhow!(e))?;
        let what = case.dir.display().to_string();
        let loaded = load(case.program.clone(), &what)?;
        let graph = loaded.printer.graph();
        let backend = case_backend(&case, req, &loaded.printer)?;
        let reference = self.case_reference(&case)?;
        let check = match &req.check {
            Some(Check::Contains(contains)) => XlaCheck::Contains(contains.clone()),
            Some(Check::Backend(kind)) => XlaCheck::Backend(Box::new(backend.clone()), *kind),
            None => XlaCheck::Backend(
                Box::new(backend.clone()),
                case.manifest.check.unwrap_or(CheckKind::Accuracy),
            ),
        };
        let runs = Runs {
            workers: req.workers.clone(),
            timeout: req.timeout,
            in_process: req.in_process,
            accuracy: if req.strict_accuracy {
                AccuracyMode::StrictAccuracy
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
                req.check_str.clone(),
                req.repeat.map(|k| k as usize),
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
        let m =
            minify_parallel(graph, &mut checkers, &options, &mut sink).map_err(|e| anyhow!(e))?;
        sink.finish(&m).map_err(|e| anyhow!(e))?;
        let text = recorded
            .constants(&m.candidate)
            .and_then(|constants| loaded.printer.text(m.graph(), &constants))
            .map(|t| elide_constants(&t, ELIDE_AT))
            .unwrap_or_else(|e| format!("(graphbug cannot print the result: {e})\n"));
        self.minified = Some(DirState {
            printer: loaded.printer.clone(),
            recorded,
            reference: reference.name().to_string(),
            backend: backend_name,
        });
        Ok(DirMinified {
            minified: m,
            text,
            jobs: checkers.len(),
            note: None,
        })
    }

    /// Inside the computations the result calls, as `graphbug minify` goes:
    /// DIR/inside-NAME.
    fn after_minify(&self, dir: &Path, req: &ReproRequest, m: &Minified) -> Result<()> {
        let Some(state) = &self.minified else {
            return Ok(());
        };
        let check = req
            .check
            .clone()
            .unwrap_or_else(|| Check::Backend(check_of(&m.signature)));
        let inside = MinifyRequest {
            file: dir.join(state.printer.file_name()),
            seed: req.seed,
            backend: Some(state.backend.clone()),
            check: Some(check),
            strict_accuracy: req.strict_accuracy,
            in_process: req.in_process,
            timeout: req.timeout,
            out: Some(dir.to_path_buf()),
            repeat: req.repeat,
            workers: req.workers.clone(),
            ..MinifyRequest::default()
        };
        inside_called_computations(
            &inside,
            Some(&state.reference),
            &state.printer,
            Some(&state.recorded),
            m,
        )
    }

    /// In a bounded child, the first instruction whose value diverges from the reference
    /// and float64, and where the divergence starts.
    fn analyze_dir(&self, dir: &Path, req: &ReproRequest) -> Result<ExitCode> {
        let case = read_dir(dir).map_err(|e| anyhow!(e))?;
        self.analyze_case(&case, req)
    }

    /// `DIR/shared` (see [`super::share`]).
    fn bisect(&mut self, req: &graphbug_flow::bisect::BisectRequest) -> Result<ExitCode> {
        super::bisect::bisect(req)
    }

    fn share_dir(&mut self, dir: &Path, req: &ReproRequest) -> Result<std::path::PathBuf> {
        super::share::share(self, dir, req)
    }
}

/// The backend a directory's action runs: `--backend`, else the manifest's; a positional
/// fault pinned to its instruction.
fn case_backend(case: &XlaCase, req: &ReproRequest, printer: &Printer) -> Result<XlaBackend> {
    let name = req.backend.as_deref().unwrap_or(&case.manifest.backend);
    backend_under_test(name, printer)
}

impl XlaRepro {
    /// `repro DIR analyze`: in a bounded child, the first instruction whose value diverges
    /// from the reference and float64, and where the divergence starts.
    fn analyze_case(&self, case: &XlaCase, req: &ReproRequest) -> Result<ExitCode> {
        if let Some(code) = graphbug_flow::supervise(req.timeout, req.in_process, |run, limit| {
            run.lost(limit)
                .map(|l| format!("the analysis was lost: {l}"))
                .unwrap_or_default()
        })? {
            return Ok(code);
        }
        let what = case.dir.display().to_string();
        let loaded = load(case.program.clone(), &what)?;
        let backend = case_backend(case, req, &loaded.printer)?;
        let reference = self.case_reference(case)?;
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
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each class is told from a failure, and a wrong look at one is not taken for another:
    /// a compile error without a refusal's words, a finite margin, a divergence at a float
    /// to float convert.
    #[test]
    fn failures_are_classified_by_what_they_are() {
        let text = "module @m {\n  func.func public @main(%arg0: tensor<4xf32>) -> (tensor<4xi32>, tensor<4xf64>) {\n    %0 = stablehlo.convert %arg0 : (tensor<4xf32>) -> tensor<4xi32>\n    %1 = stablehlo.convert %arg0 : (tensor<4xf32>) -> tensor<4xf64>\n    return %0, %1 : tensor<4xi32>, tensor<4xf64>\n  }\n}\n";
        let program = Program::read(text.as_bytes(), Kind::StableHloText).unwrap();
        let graph = program.graph().unwrap();
        let sig = |kind: &str, message: &str, margin: Option<f64>, culprit: &str| Signature {
            kind: kind.into(),
            message: message.into(),
            margin,
            culprits: vec![culprit.into()],
            ..Signature::default()
        };
        let wrong = "accuracy wrong result";
        for (s, want) in [
            (
                sig(
                    "compile error",
                    "error: failed to legalize operation 'stablehlo.fft'",
                    None,
                    "",
                ),
                Disagreement::RefusedOp,
            ),
            (
                sig(
                    "compile error",
                    "iree-lld: error: undefined symbol: sin",
                    None,
                    "",
                ),
                Disagreement::CompileFailure,
            ),
            (
                sig("compile crash", "SIGSEGV", None, ""),
                Disagreement::Crash,
            ),
            (sig("runtime timeout", "", None, ""), Disagreement::Hang),
            (
                sig("runtime error", "bad", None, ""),
                Disagreement::RuntimeFailure,
            ),
            (sig(wrong, "", Some(f64::NAN), "1"), Disagreement::NonFinite),
            (
                sig(wrong, "", Some(f64::INFINITY), "1"),
                Disagreement::NonFinite,
            ),
            (
                sig(wrong, "", Some(3.0), "0"),
                Disagreement::ImplementationDefined,
            ),
            (sig(wrong, "", Some(3.0), "1"), Disagreement::Numeric),
        ] {
            assert_eq!(disagreement(&s, &graph), Some(want), "{s:?}");
        }
        assert_eq!(disagreement(&sig("command", "", None, ""), &graph), None);
    }
}
