//! `graphbug repro DIR` on a directory a compiler dumped its programs into (XLA's
//! `--xla_dump_to`, whichever framework drove it), or on a corpus of programs (differential
//! testing: the backend against the reference over every program): every module checked
//! through the backend with the arguments the dump recorded (seeded random ones where it
//! recorded none, said), each failing one classified ([`Disagreement`]), written and
//! minified into its own repro directory, and one summary over all modules, with the count
//! of each class: in the terminal, in `summary.json` and in `report.html`. A dialect reads
//! its compiler's dumps and corpora ([`Dialect::dump`]); the rest is written here once,
//! over [`Reproducible`].

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{anyhow, bail, Result};
use graphbug_draw::html::{self, Section};
use graphbug_files::write_file_atomically;
use serde::Serialize;

use crate::dialect::Dialect;
use crate::report::REPORT_FILE;
use crate::repro::{absolute, minify_and_say, FirstRun, ReproRequest, Reproducible};
use crate::FlowError;

/// The summary's file name in the output directory of a dump's check.
pub const SUMMARY_FILE: &str = "summary.json";

/// A compiler's dump directory, as its dialect reads it.
#[derive(Clone, Debug)]
pub struct Dump {
    /// What wrote it, as the user is told: `an XLA dump (--xla_dump_to)`.
    pub what: String,
    /// Its modules, in the dump's order.
    pub modules: Vec<DumpModule>,
}

/// What kind of disagreement between the backend and the reference a failure is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Disagreement {
    /// The backend's compiler refuses an op it does not implement (an unknown dialect, an
    /// op it cannot legalize, a custom call it has no target for).
    RefusedOp,
    /// Any other error of the backend's compiler.
    CompileFailure,
    /// The backend's compiler or runtime died (a signal).
    Crash,
    /// It did not finish within the limit.
    Hang,
    /// An error of the compiled program's run.
    RuntimeFailure,
    /// NaN or infinity in the backend's outputs where the reference's are finite.
    NonFinite,
    /// The outputs differ first where the result is implementation-defined (an
    /// out-of-range float-to-integer conversion): neither side is wrong.
    ImplementationDefined,
    /// Finite outputs that differ beyond the float64 rule.
    Numeric,
}

impl Disagreement {
    /// The class of a failure of this stage and symptom (see
    /// [`graphbug_run::parse_kind`]), without a dialect's finer look: compile errors are
    /// compile failures and wrong results numeric differences. `None` for another kind (a
    /// check command's).
    pub fn of_kind(kind: &str) -> Option<Disagreement> {
        use graphbug_run::{Stage, Symptom};
        let (stage, symptom) = graphbug_run::parse_kind(kind)?;
        Some(match (stage, symptom) {
            (_, Symptom::Crash) => Disagreement::Crash,
            (_, Symptom::Timeout) => Disagreement::Hang,
            (_, Symptom::WrongResult) | (Stage::Accuracy, _) => Disagreement::Numeric,
            (Stage::Compile, Symptom::Error) => Disagreement::CompileFailure,
            (Stage::Runtime, Symptom::Error) => Disagreement::RuntimeFailure,
        })
    }

    /// How the user is told it.
    pub fn describe(self) -> &'static str {
        match self {
            Disagreement::RefusedOp => "refused op",
            Disagreement::CompileFailure => "compile failure",
            Disagreement::Crash => "crash",
            Disagreement::Hang => "hang",
            Disagreement::RuntimeFailure => "runtime failure",
            Disagreement::NonFinite => "NaN or infinity where the reference is finite",
            Disagreement::ImplementationDefined => "implementation-defined behaviour",
            Disagreement::Numeric => "numeric difference beyond the float64 rule",
        }
    }
}

/// One module of a dump.
#[derive(Clone, Debug)]
pub struct DumpModule {
    /// Its name in the dump (`module_0006.jit_step`), which names its repro directory.
    pub name: String,
    /// Its program as the framework built it, or why the dump holds none to check.
    pub program: Result<PathBuf, String>,
    /// The files of its recorded executions, the first of which gives its arguments (read
    /// by [`Dialect::recorded_inputs`]).
    pub recorded: Vec<PathBuf>,
}

/// What became of one module.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "snake_case", tag = "result")]
enum Outcome {
    /// The backend compiled and ran it, as the level checks.
    Passes,
    /// It fails: the failure, its repro directory (relative to the output directory) or
    /// why none was written, and the minification.
    Fails {
        failure: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        class: Option<Disagreement>,
        repro: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        not_written: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        minified: Option<Minification>,
    },
    /// The dump holds nothing to check it with.
    NotChecked { why: String },
    /// It could not be judged (a program that does not read, arguments that do not fit).
    Error { error: String },
}

/// A failing module's minification.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "snake_case", tag = "result")]
enum Minification {
    /// From `start` to `end` nodes, in `queries` queries.
    Done {
        start: usize,
        end: usize,
        queries: usize,
    },
    /// It could not be minified.
    Error { error: String },
}

/// One row of the summary.
#[derive(Clone, Debug, Serialize)]
struct Row {
    module: String,
    /// The program file checked, relative to the dump.
    #[serde(skip_serializing_if = "Option::is_none")]
    program: Option<String>,
    /// Where its arguments came from.
    inputs: String,
    /// Why the backend's testing fault names no node of it, which then ran without it.
    #[serde(skip_serializing_if = "Option::is_none")]
    unfaulted: Option<String>,
    #[serde(flatten)]
    outcome: Outcome,
}

/// The summary of a dump's check, as `summary.json` holds it.
#[derive(Clone, Debug, Serialize)]
struct Summary {
    dump: String,
    what: String,
    backend: String,
    level: u8,
    /// How many failing modules of each class.
    classes: std::collections::BTreeMap<Disagreement, usize>,
    modules: Vec<Row>,
}

impl Row {
    /// The row's result in a word or two, for the terminal and the report.
    fn result(&self) -> String {
        match &self.outcome {
            Outcome::Passes if self.unfaulted.is_some() => {
                "passes (run without the fault, which names no node of it)".into()
            }
            Outcome::Passes => "passes".into(),
            Outcome::Fails {
                failure,
                minified,
                class,
                ..
            } => match minified {
                Some(Minification::Done {
                    start,
                    end,
                    queries,
                }) => {
                    let class = class.map(|c| format!("{}: ", c.describe()));
                    format!(
                        "FAILS ({}{}); minified {start} to {end} in {queries} queries",
                        class.unwrap_or_default(),
                        first_line(failure)
                    )
                }
                Some(Minification::Error { error }) => {
                    format!("FAILS ({}); not minified: {error}", first_line(failure))
                }
                None => format!("FAILS ({})", first_line(failure)),
            },
            Outcome::NotChecked { why } => format!("not checked: {why}"),
            Outcome::Error { error } => format!("could not be judged: {error}"),
        }
    }
}

/// `graphbug repro DIR` on the dump `dump` of `dialect` (its steps: `steps`) read from
/// `dir`: checks every module, writes a repro directory under `req.out` for each failing
/// one and minifies it, then says and writes the summary. Exit 1 when a module could not
/// be judged or a failing one could not be written or minified.
pub fn repro_dump(
    (dir, dump): (&Path, Dump),
    action: Option<&str>,
    req: &ReproRequest,
    (dialect, steps): (&dyn Dialect, &mut dyn Reproducible),
) -> Result<ExitCode> {
    let started = Instant::now();
    let shown = dir.display();
    if let Some(a) = action {
        bail!("{shown} is {}, not a repro directory, so `{a}` does not apply; give the dump alone to check every module", dump.what);
    }
    if req.check.is_some() {
        bail!("--check says what `repro DIR minify` looks for; a dump's modules are checked by --level");
    }
    if req.inputs.is_some() {
        bail!("--inputs gives one program's inputs; a dump's modules take the arguments it recorded (seeded random ones where it recorded none)");
    }
    let backend = req.backend.as_deref().ok_or_else(|| {
        anyhow!(
            "--backend {} is needed to compile the modules of {shown}",
            steps.backend_hint()
        )
    })?;
    let level = req.level()?;
    if dump.modules.is_empty() {
        bail!("{shown}: {} without a module", dump.what);
    }
    std::fs::create_dir_all(&req.out).map_err(|e| FlowError::io(&req.out, e))?;
    let scratch = graphbug_run::scratch::Scratch::new("dump")?;
    println!(
        "{}: {} ({})",
        absolute(dir).display(),
        dump.what,
        modules(dump.modules.len())
    );
    let mut rows = Vec::with_capacity(dump.modules.len());
    for module in &dump.modules {
        println!("== {}", module.name);
        let row = match check_module(
            module,
            dir,
            (backend, level),
            req,
            &scratch,
            (dialect, &mut *steps),
        )? {
            Some(row) => row,
            None => return Ok(ExitCode::SUCCESS),
        };
        if let Outcome::NotChecked { why } | Outcome::Error { error: why } = &row.outcome {
            println!("{}: {why}", module.name);
        }
        rows.push(row);
    }
    let checked: Vec<&Row> = rows
        .iter()
        .filter(|r| {
            !matches!(
                r.outcome,
                Outcome::NotChecked { .. } | Outcome::Error { .. }
            )
        })
        .collect();
    if !checked.is_empty() && checked.iter().all(|r| r.unfaulted.is_some()) {
        let whys: Vec<String> = checked
            .iter()
            .map(|r| {
                format!(
                    "{}: {}",
                    r.module,
                    r.unfaulted.as_deref().unwrap_or_default()
                )
            })
            .collect();
        bail!(
            "the backend's fault names no node in any module of {shown}:\n{}",
            whys.join("\n")
        );
    }
    if !req.no_minify {
        let req = ReproRequest {
            backend: None,
            ..req.clone()
        };
        for row in &mut rows {
            if let Outcome::Fails {
                repro: Some(repro),
                minified,
                ..
            } = &mut row.outcome
            {
                println!("== minifying {}", row.module);
                let at = req.out.join(&*repro);
                *minified = Some(
                    match minify_and_say(&at, &req, (dialect, &mut *steps), Instant::now()) {
                        Ok((start, end, queries)) => Minification::Done {
                            start,
                            end,
                            queries,
                        },
                        Err(e) => {
                            println!("{}: not minified: {e:#}", row.module);
                            Minification::Error {
                                error: format!("{e:#}"),
                            }
                        }
                    },
                );
            }
        }
    }
    let mut classes = std::collections::BTreeMap::new();
    for row in &rows {
        if let Outcome::Fails { class: Some(c), .. } = &row.outcome {
            *classes.entry(*c).or_insert(0) += 1;
        }
    }
    let summary = Summary {
        dump: absolute(dir).display().to_string(),
        what: dump.what.clone(),
        backend: backend.to_string(),
        level,
        classes,
        modules: rows,
    };
    say(&summary, &req.out, started);
    write_summary(&summary, &req.out)?;
    let judged = summary.modules.iter().all(|r| match &r.outcome {
        Outcome::Passes | Outcome::NotChecked { .. } => true,
        Outcome::Error { .. } => false,
        Outcome::Fails {
            repro, minified, ..
        } => repro.is_some() && !matches!(minified, Some(Minification::Error { .. })),
    });
    Ok(if judged {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// The first run of one module with its recorded (else seeded random) arguments; `None`
/// in the supervised child that handed its result on.
fn check_module(
    module: &DumpModule,
    dir: &Path,
    (backend, level): (&str, u8),
    req: &ReproRequest,
    scratch: &graphbug_run::scratch::Scratch,
    (dialect, steps): (&dyn Dialect, &mut dyn Reproducible),
) -> Result<Option<Row>> {
    let relative = |p: &Path| p.strip_prefix(dir).unwrap_or(p).display().to_string();
    let mut row = Row {
        module: module.name.clone(),
        program: module.program.as_ref().ok().map(|p| relative(p)),
        inputs: format!("seeded random (seed {})", req.seed),
        unfaulted: None,
        outcome: Outcome::Passes,
    };
    let program = match &module.program {
        Ok(p) => p,
        Err(why) => {
            row.outcome = Outcome::NotChecked { why: why.clone() };
            return Ok(Some(row));
        }
    };
    let mut inputs = None;
    if let Some(first) = module.recorded.first() {
        row.inputs = format!(
            "recorded: {}{}",
            relative(first),
            match module.recorded.len() {
                1 => String::new(),
                n => format!(" (1 of {n} executions)"),
            }
        );
        let tensors = match dialect.recorded_inputs(first) {
            Ok(t) => t,
            Err(e) => {
                row.outcome = Outcome::Error {
                    error: e.to_string(),
                };
                return Ok(Some(row));
            }
        };
        // npz holds every dtype (safetensors no complex one); a corpus's module names are
        // paths.
        let file = scratch
            .path()
            .join(format!("{}.npz", module.name.replace(['/', '\\'], "__")));
        let named: Vec<(String, graphbug_files::HostTensor)> = tensors
            .into_iter()
            .enumerate()
            .map(|(i, t)| (format!("arg{i}"), t))
            .collect();
        if let Err(e) = graphbug_files::write(&file, &named) {
            row.outcome = Outcome::Error {
                error: e.to_string(),
            };
            return Ok(Some(row));
        }
        inputs = Some(file);
    }
    println!("arguments: {}", row.inputs);
    let bytes = match std::fs::read(program) {
        Ok(b) => b,
        Err(e) => {
            row.outcome = Outcome::Error {
                error: FlowError::io(program, e).to_string(),
            };
            return Ok(Some(row));
        }
    };
    let sub = ReproRequest {
        out: req.out.join(&module.name),
        inputs,
        no_minify: true,
        one_of_many: true,
        ..req.clone()
    };
    // A corpus's module names are paths: their folders first.
    if let Some(parent) = sub.out.parent() {
        std::fs::create_dir_all(parent).map_err(|e| FlowError::io(parent, e))?;
    }
    let first = steps.first_run((program, bytes), backend, level, &sub);
    row.unfaulted = steps.unfaulted();
    row.outcome = match first {
        Err(e) => Outcome::Error {
            error: format!("{e:#}"),
        },
        Ok(FirstRun::Handed) => return Ok(None),
        Ok(FirstRun::Passes(said)) => {
            println!("{said}");
            Outcome::Passes
        }
        Ok(FirstRun::Fails { detected, dir }) => {
            let class = steps.disagreement();
            match class {
                Some(c) => println!("detected: {detected} ({})", c.describe()),
                None => println!("detected: {detected}"),
            }
            let (repro, not_written) = match dir {
                Ok(_) => (Some(module.name.clone()), None),
                Err(why) => (None, Some(format!("no repro written{why}"))),
            };
            Outcome::Fails {
                failure: detected,
                class,
                repro,
                not_written,
                minified: None,
            }
        }
    };
    Ok(Some(row))
}

/// `n modules`, `1 module`.
fn modules(n: usize) -> String {
    format!("{n} module{}", if n == 1 { "" } else { "s" })
}

/// Says the summary: one line a module, then where it is written.
fn say(summary: &Summary, out: &Path, started: Instant) {
    let width = summary
        .modules
        .iter()
        .map(|r| r.module.len())
        .max()
        .unwrap_or(0);
    let count = |f: fn(&Outcome) -> bool| summary.modules.iter().filter(|r| f(&r.outcome)).count();
    println!(
        "summary: {} on `{}` at level {}: {} pass, {} fail, {} not checked, {} could not be judged",
        modules(summary.modules.len()),
        summary.backend,
        summary.level,
        count(|o| matches!(o, Outcome::Passes)),
        count(|o| matches!(o, Outcome::Fails { .. })),
        count(|o| matches!(o, Outcome::NotChecked { .. })),
        count(|o| matches!(o, Outcome::Error { .. })),
    );
    for row in &summary.modules {
        println!("  {:width$}  {}", row.module, row.result());
    }
    if !summary.classes.is_empty() {
        println!("failures by class: {}", classes_line(&summary.classes));
    }
    let out = absolute(out);
    println!(
        "summary written to {} and {} in {:.1} s",
        out.join(SUMMARY_FILE).display(),
        out.join(REPORT_FILE).display(),
        started.elapsed().as_secs_f64()
    );
}

/// The first line of a failure's message (the summary's rows are one line each; the whole
/// message is in `summary.json` and the module's repro directory).
fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or_default()
}

/// `refused op 2, numeric difference beyond the float64 rule 1`.
fn classes_line(classes: &std::collections::BTreeMap<Disagreement, usize>) -> String {
    classes
        .iter()
        .map(|(c, n)| format!("{} {n}", c.describe()))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Writes `summary.json` and `report.html` (a table of the modules, linking each failing
/// one's repro directory and report) into `out`.
fn write_summary(summary: &Summary, out: &Path) -> Result<(), FlowError> {
    let path = out.join(SUMMARY_FILE);
    let json = serde_json::to_string_pretty(summary).expect("a summary serializes") + "\n";
    write_file_atomically(&path, json.as_bytes()).map_err(|e| FlowError::io(&path, e))?;
    let mut table = String::from(
        "<table id=\"modules\"><tr><th>module</th><th>arguments</th><th>result</th><th>repro</th></tr>\n",
    );
    for row in &summary.modules {
        let repro = match &row.outcome {
            Outcome::Fails {
                repro: Some(r),
                minified,
                ..
            } => {
                let mut links = format!("<a href=\"{0}/{REPORT_FILE}\">{0}</a>", html::escape(r));
                if matches!(minified, Some(Minification::Done { .. })) {
                    links.push_str(&format!(
                        " (<a href=\"{}/minified/{REPORT_FILE}\">minified</a>)",
                        html::escape(r)
                    ));
                }
                links
            }
            _ => String::new(),
        };
        table.push_str(&format!(
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{repro}</td></tr>\n",
            html::escape(&row.module),
            html::escape(&row.inputs),
            html::escape(&row.result()),
        ));
    }
    table.push_str("</table>\n");
    let mut facts = vec![
        format!("dump: {} ({})", summary.dump, summary.what),
        format!("backend: {}", summary.backend),
        format!("level: {}", summary.level),
    ];
    if !summary.classes.is_empty() {
        facts.push(format!(
            "failures by class: {}",
            classes_line(&summary.classes)
        ));
    }
    let sections = [
        Section::new("dump", "The dump", html::list(&facts)),
        Section::new("modules", "Its modules", table),
    ];
    let page = html::page(&format!("graphbug repro: {}", summary.dump), &sections);
    let path = out.join(REPORT_FILE);
    write_file_atomically(&path, page.as_bytes()).map_err(|e| FlowError::io(&path, e))
}
