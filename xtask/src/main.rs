//! `cargo xtask`: project automation (set-up, tests, benchmarks).

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use anyhow::{bail, ensure, Context, Result};
use clap::{Parser, Subcommand};
use setup::{Job, Sources};
use xtask::conformance;

mod docs;
mod setup;
mod stages;

/// The conformance suite's case sources made by PyTorch (gen_cases.py).
const TORCH_SOURCES: [&str; 3] = ["opinfo", "zoo", "capture"];

/// The sources of XLA programs: JAX's (gen_xla_cases.py), PyTorch/XLA's
/// (gen_torch_xla_cases.py), XLA dump directories (the committed ones, and PyTorch/XLA's)
/// and HLO text as XLA's developers write it.
const XLA_SOURCES: [&str; 4] = ["xla", "torch_xla", "xla-dump", "xla-text"];

/// Command line of `cargo xtask`.
#[derive(Parser)]
#[command(about = "graphbug project automation")]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

/// The xtask subcommands.
#[derive(Subcommand)]
enum Cmd {
    /// Install what every command needs (idempotent; each install says what and why
    /// first): .venv with torch 2.13.0 (the .libtorch symlink), torchvision, JAX 0.10.2, the
    /// XLA CPU PJRT plugin and python/; Graphviz; and for the tests mdbook, Chromium and, as
    /// root with apt, Slurm, munge and OpenSSH. With --for, only what one command needs
    /// (each command installs its own first).
    Setup {
        /// Only what this command needs: `repro` (the main job) installs torch and
        /// Graphviz, nothing of the tests.
        #[arg(long = "for", value_enum, value_name = "COMMAND")]
        for_command: Option<SetupFor>,
    },
    /// Run setup, then `cargo test --workspace --no-fail-fast` (with ARGS: `cargo test
    /// --workspace ARGS`), then every example in examples/, then (without ARGS) tests/xla.rs
    /// on a graphbug built without libtorch and the docs check (`docs`). Every stage runs
    /// whatever failed before it; the end lists each stage and every failing test; exit 1
    /// if anything failed.
    Test {
        /// Extra arguments passed to `cargo test`.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Run setup, build the book (docs/, mdBook) into target/book, and run the code blocks of
    /// README.md, ARCHITECTURE.md and docs/src (sh and python blocks run; see
    /// docs/src/contributing.md); exit 1 if the book, a link or a block fails.
    #[command(after_help = "Examples:
  # The book into target/book, then every code block of README.md, ARCHITECTURE.md, docs/src
  cargo xtask docs
  # Only the blocks of two files (the book is built all the same)
  cargo xtask docs README.md docs/src/xla.md")]
    Docs {
        /// Only these markdown files (paths from the repository root).
        files: Vec<PathBuf>,
        /// Seconds the blocks of one file may take together.
        #[arg(long, default_value_t = 300)]
        timeout: u64,
    },
    /// Install what the main job needs (the venv with torch, .libtorch, Graphviz; nothing of
    /// the tests), then run it: `graphbug repro [ARGS]` (no arguments: the demo).
    Repro {
        /// Arguments passed to `graphbug repro`.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Run setup, then the fuzz run of the parser, `check --meta` and `run` over mutated
    /// fixtures for SECONDS (CI runs 30).
    Fuzz {
        /// How long to fuzz.
        #[arg(default_value_t = 600)]
        seconds: u64,
        /// Seed of the mutations.
        #[arg(long, default_value_t = 2026)]
        seed: u64,
    },
    /// Run setup, then every benchmark (`cargo bench --workspace --no-fail-fast [ARGS]`),
    /// and print every figure against its target; exit 1 if any target was missed.
    Bench {
        /// Extra arguments passed to `cargo bench`.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Measure graphbug against PyTorch and JAX: generate OpInfo and model-zoo cases with
    /// PyTorch and XLA programs with JAX, run each through graphbug's stages, print the table,
    /// write target/conformance/report.json; exit 1 under the targets.
    Conformance(ConformanceArgs),
    /// Pack the stripped libtorch-free graphbug, the XLA fixtures (inputs, and outputs
    /// recorded on pjrt:cpu) and run.sh, which runs them on a GPU's CUDA PJRT plugin and
    /// prints the figures: at most 64 MiB, for a GPU machine without Rust or network.
    GpuBundle {
        /// Where the bundle goes (emptied first).
        #[arg(long, default_value = "target/gpu-bundle")]
        out: PathBuf,
        /// A graphbug binary to pack instead of building the stripped release one.
        #[arg(long)]
        binary: Option<PathBuf>,
    },
    /// Pack a stripped graphbug linked against torch 2.11's libtorch, the reference models'
    /// graphs and run.sh, which runs graphbug's aten checks on `cuda` (run, compare, a
    /// training step, minify, the peak memory against the CUDA allocator's) with the GPU
    /// machine's own PyTorch 2.11: at most 64 MiB, for a GPU machine without Rust.
    AtenGpuBundle {
        /// Where the bundle goes (emptied first).
        #[arg(long, default_value = "target/aten-gpu-bundle")]
        out: PathBuf,
    },
}

/// The commands `cargo xtask setup --for` installs for.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
enum SetupFor {
    /// The main job: torch and Graphviz.
    Repro,
    /// Everything (as plain `setup`).
    Test,
    /// mdbook and what the documentation's blocks run.
    Docs,
    /// torch and the Python packages of every source.
    Conformance,
    /// What the benchmarks compare with and start.
    Bench,
    /// torch.
    Fuzz,
    /// The XLA CPU plugin.
    GpuBundle,
    /// torch (its CUDA libraries link the bundle's graphbug).
    AtenGpuBundle,
}

impl SetupFor {
    /// The command's set-up.
    fn job(self) -> Job {
        match self {
            SetupFor::Repro => Job::Repro,
            SetupFor::Test => Job::Test,
            SetupFor::Docs => Job::Docs,
            SetupFor::Conformance => Job::Conformance(Sources::ALL),
            SetupFor::Bench => Job::Bench,
            SetupFor::Fuzz => Job::Fuzz,
            SetupFor::GpuBundle => Job::GpuBundle,
            SetupFor::AtenGpuBundle => Job::AtenGpuBundle,
        }
    }
}

/// Arguments of `cargo xtask conformance`.
#[derive(clap::Args)]
struct ConformanceArgs {
    /// `ci`: about 30 hand-picked OpInfo ops and four small modules, about 50 XLA programs
    /// (one JAX harness of every third group, two back-compat modules, five models), an
    /// MLP under PyTorch/XLA and two committed dumps; `full`: every op_db op, the whole zoo,
    /// every JAX harness that runs on CPU, every PyTorch/XLA model and committed dump.
    #[arg(long, default_value = "full", value_parser = ["ci", "full"])]
    subset: String,
    /// Only cases whose id (`opinfo/acos/f32/0`, `zoo/resnet18/train`,
    /// `xla/harness/cumsum/...`) matches this regex.
    #[arg(long)]
    filter: Option<String>,
    /// Cases run in parallel (default: the number of cores).
    #[arg(short = 'j', long)]
    jobs: Option<usize>,
    /// Only report: exit 0 even under the targets.
    #[arg(long)]
    no_targets: bool,
    /// OpInfo samples per op (default: 1 for ci, 3 for full); for the xla source, at most
    /// this many JAX harnesses of each group (default: every harness).
    #[arg(long)]
    samples: Option<usize>,
    /// OpInfo dtypes, comma-separated (default: float32 for ci; float32,float64,bfloat16
    /// for full, float64 and bfloat16 with one sample per op).
    #[arg(long)]
    dtypes: Option<String>,
    /// Case sources, comma-separated: opinfo, zoo, capture (the zoo compiled by
    /// torch.compile through the graphbug_capture backend, static and dynamic), xla (XLA
    /// programs lowered by JAX: its primitive harnesses, its export back-compat modules and
    /// the HLO corpus's models), torch_xla (the HLO modules PyTorch/XLA compiles for small
    /// models' evaluation and training step), xla-dump (XLA dump directories: the committed
    /// ones of JAX, TensorFlow and PyTorch/XLA, and each torch_xla model's), xla-text (HLO
    /// modules as XLA's developers write them, read by XLA's parser: those under
    /// --xla-text-dir; with --subset ci, tests/fixtures/xla/hlo-xla-style).
    #[arg(long, default_value = "opinfo,zoo,capture")]
    sources: String,
    /// For --sources xla-text: a folder of `.hlo` files (searched recursively), such as a
    /// checkout of XLA's tests (`xla/tools/hlo_opt/tests`, `xla/service/gpu/tests`).
    #[arg(long)]
    xla_text_dir: Option<PathBuf>,
    /// Seconds one graphbug command may take.
    #[arg(long, default_value_t = 300)]
    timeout: u64,
    /// Run the cases already in the cases directory instead of generating them.
    #[arg(long)]
    reuse_cases: bool,
    /// The cases directory (default target/conformance/cases; cleared before generating).
    #[arg(long)]
    cases: Option<PathBuf>,
}

/// Runs the chosen subcommand; errors print with their context chain and exit 1.
fn main() -> ExitCode {
    let cli = xtask::help::with_examples(<Cli as clap::CommandFactory>::command()).get_matches();
    let cli = <Cli as clap::FromArgMatches>::from_arg_matches(&cli).unwrap_or_else(|e| e.exit());
    match run(cli) {
        Ok(code) => code,
        Err(err) => {
            eprintln!("xtask: error: {err:#}");
            ExitCode::FAILURE
        }
    }
}

/// Dispatches one subcommand and returns the process exit code.
fn run(cli: Cli) -> Result<ExitCode> {
    let root = workspace_root()?;
    match cli.command {
        Cmd::Setup { for_command } => {
            setup::ensure(&root, for_command.map_or(Job::Everything, SetupFor::job))
                .map(|()| ExitCode::SUCCESS)
        }
        Cmd::Test { args } => stages::test(&root, &args),
        Cmd::Docs { files, timeout } => check_docs(&root, files, timeout),
        Cmd::Bench { args } => bench(&root, &args),
        Cmd::GpuBundle { out, binary } => {
            setup::ensure(&root, Job::GpuBundle)?;
            let binary = match binary {
                Some(b) => b,
                None => xtask::bundle::build_xla_binary(&root)?,
            };
            let size = xtask::bundle::make_bundle(&root, &binary, &root.join(out))?;
            xtask::bundle::within_limit(size)?;
            Ok(ExitCode::SUCCESS)
        }
        Cmd::AtenGpuBundle { out } => {
            setup::ensure(&root, Job::AtenGpuBundle)?;
            let (binary, libs) = xtask::aten_bundle::build_aten_binary(&root)?;
            let size =
                xtask::aten_bundle::make_aten_bundle(&root, &binary, &libs, &root.join(out))?;
            xtask::bundle::within_limit(size)?;
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Fuzz { seconds, seed } => fuzz(&root, seconds, seed),
        Cmd::Repro { args } => repro(&root, &args),
        Cmd::Conformance(args) => run_conformance(&root, &args),
    }
}

/// The workspace root: the parent of this package's manifest directory.
fn workspace_root() -> Result<PathBuf> {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest
        .parent()
        .map(Path::to_path_buf)
        .with_context(|| format!("xtask manifest dir {} has no parent", manifest.display()))
}

/// `cargo xtask docs`: setup, `cargo build --bin graphbug` (the blocks run it), then the
/// book and the blocks of `files` (every documentation file when empty).
fn check_docs(root: &Path, files: Vec<PathBuf>, timeout: u64) -> Result<ExitCode> {
    setup::ensure(root, Job::Docs)?;
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let status = xtask::process::die_with_parent(&mut Command::new(&cargo))
        .args(["build", "--bin", "graphbug"])
        .current_dir(root)
        .status()
        .context("cannot run `cargo build --bin graphbug`")?;
    ensure!(
        status.success(),
        "`cargo build --bin graphbug` failed ({status})"
    );
    let opts = docs::Options {
        root: root.to_path_buf(),
        files,
        timeout: std::time::Duration::from_secs(timeout),
        mdbook: docs::ensure_mdbook()?,
    };
    Ok(if docs::check(&opts)? {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// Runs setup, then every benchmark to the end (one missing its target does not stop the
/// others), passing their output through (on a terminal, under a spinner naming the
/// benchmark that runs); then the `target:` line of every figure, and exit 1 if a target
/// was missed or a benchmark failed.
fn bench(root: &Path, args: &[String]) -> Result<ExitCode> {
    use std::io::{BufRead, BufReader, Write};
    setup::ensure(root, Job::Bench)?;
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let spinner = graphbug_run::progress::Progress::spinner("bench");
    spinner.set_message("starting `cargo bench`");
    let mut cmd = Command::new(&cargo);
    xtask::process::die_with_parent(&mut cmd)
        .args(["bench", "--workspace", "--no-fail-fast"])
        .args(args)
        .current_dir(root)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    // Cargo's standard error is read here (for the spinner): it keeps the colours it has
    // on a terminal.
    if spinner.on_terminal() && std::env::var_os("CARGO_TERM_COLOR").is_none() {
        cmd.env("CARGO_TERM_COLOR", "always");
    }
    let mut child = cmd.spawn().context("cannot run `cargo bench`")?;
    let mut figures = Vec::new();
    let stdout = child.stdout.take().expect("stdout is piped");
    let stderr = child.stderr.take().expect("stderr is piped");
    std::thread::scope(|scope| -> Result<()> {
        // Cargo's lines (and the benchmarks' own standard error) pass through unchanged;
        // `Running` and `Compiling` lines name what runs.
        scope.spawn(|| {
            for line in BufReader::new(stderr).lines().map_while(|l| l.ok()) {
                if let Some(status) = xtask::bench::status(&line) {
                    spinner.set_message(status);
                }
                spinner.println(&line);
            }
        });
        for line in BufReader::new(stdout).lines() {
            let line = line.context("reading the benchmarks' output")?;
            spinner.suspend(|| {
                println!("{line}");
                let _ = std::io::stdout().flush();
            });
            if let Some(figure) = xtask::bench::figure(&line) {
                figures.push(figure.to_string());
            }
        }
        Ok(())
    })?;
    spinner.finish();
    let status = child.wait().context("waiting for `cargo bench`")?;
    println!("\n== benchmark targets ==");
    for f in &figures {
        println!("{f}");
    }
    let missed = xtask::bench::missed(&figures);
    println!(
        "{} figures, {missed} target(s) missed{}",
        figures.len(),
        if status.success() {
            ""
        } else {
            "; a benchmark failed (see above)"
        }
    );
    Ok(if missed == 0 && status.success() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// Runs setup, then the fuzz test (`tests/fuzz.rs`) for `seconds` with `seed`.
fn fuzz(root: &Path, seconds: u64, seed: u64) -> Result<ExitCode> {
    setup::ensure(root, Job::Fuzz)?;
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let status = Command::new(&cargo)
        .args([
            "test",
            "-p",
            "graphbug",
            "--test",
            "fuzz",
            "--",
            "--nocapture",
        ])
        .env("GRAPHBUG_FUZZ_SECONDS", seconds.to_string())
        .env("GRAPHBUG_FUZZ_SEED", seed.to_string())
        .current_dir(root)
        .status()
        .context("cannot run the fuzz test")?;
    Ok(if status.success() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// Runs setup, then `graphbug repro ARGS` in the caller's directory.
fn repro(root: &Path, args: &[String]) -> Result<ExitCode> {
    setup::ensure(root, Job::Repro)?;
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let status = Command::new(&cargo)
        .arg("run")
        .arg("--quiet")
        .arg("--manifest-path")
        .arg(root.join("Cargo.toml"))
        .args(["--bin", "graphbug", "--", "repro"])
        .args(args)
        .status()
        .context("cannot run `graphbug repro`")?;
    Ok(match status.code() {
        Some(0) => ExitCode::SUCCESS,
        Some(code) => ExitCode::from(u8::try_from(code).unwrap_or(1)),
        None => ExitCode::FAILURE,
    })
}

/// `cargo xtask conformance`: setup, Python packages, build, generate, run, report.
fn run_conformance(root: &Path, args: &ConformanceArgs) -> Result<ExitCode> {
    let sources: Vec<&str> = args
        .sources
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect();
    if let Some(unknown) = sources
        .iter()
        .find(|s| !TORCH_SOURCES.contains(s) && !XLA_SOURCES.contains(s))
    {
        bail!(
            "unknown --sources `{unknown}` (known: {}, {})",
            TORCH_SOURCES.join(", "),
            XLA_SOURCES.join(", ")
        );
    }
    // PyTorch/XLA's modules, and its dumps (with the committed ones).
    let torch_xla_sources: Vec<&str> = sources
        .iter()
        .copied()
        .filter(|s| ["torch_xla", "xla-dump"].contains(s))
        .collect();
    let xla_text_dir = match (&args.xla_text_dir, args.subset.as_str()) {
        _ if !sources.contains(&"xla-text") => None,
        (Some(dir), _) => Some(dir.clone()),
        (None, "ci") => Some(root.join(conformance::xla_text::CI_DIR)),
        (None, _) => bail!(
            "--sources xla-text needs --xla-text-dir DIR (a folder of .hlo files, such as a checkout of XLA's tests); --subset ci runs over {}",
            conformance::xla_text::CI_DIR
        ),
    };
    setup::ensure(
        root,
        Job::Conformance(Sources {
            opinfo: sources.contains(&"opinfo"),
            zoo: sources.contains(&"zoo"),
            capture: sources.contains(&"capture"),
            xla: sources.contains(&"xla")
                || xla_text_dir.is_some()
                || !torch_xla_sources.is_empty(),
            torch_xla: !torch_xla_sources.is_empty(),
        }),
    )?;
    let venv = root.join(".venv");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let status = Command::new(&cargo)
        .args(["build", "-p", "graphbug"])
        .current_dir(root)
        .status()
        .context("cannot run `cargo build -p graphbug`")?;
    ensure!(
        status.success(),
        "`cargo build -p graphbug` failed ({status})"
    );
    let jobs = args.jobs.unwrap_or_else(|| {
        std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)
    });
    let filter = args
        .filter
        .as_deref()
        .map(regex::Regex::new)
        .transpose()
        .context("--filter is not a valid regex")?;
    let out = root.join("target/conformance");
    let cases = args.cases.clone().unwrap_or_else(|| out.join("cases"));
    let torch_sources: Vec<&str> = sources
        .iter()
        .copied()
        .filter(|s| TORCH_SOURCES.contains(s))
        .collect();
    if !args.reuse_cases {
        if cases.exists() {
            fs::remove_dir_all(&cases)
                .with_context(|| format!("cannot clear {}", cases.display()))?;
        }
        let started = std::time::Instant::now();
        let python = venv.join("bin/python");
        let common: Vec<String> = [
            "--out".into(),
            cases.display().to_string(),
            "--subset".into(),
            args.subset.clone(),
            "-j".into(),
            jobs.to_string(),
        ]
        .into_iter()
        .chain(
            args.filter
                .iter()
                .flat_map(|f| ["--filter".into(), f.clone()]),
        )
        .collect();
        let samples: Vec<String> = args
            .samples
            .iter()
            .flat_map(|k| ["--samples".into(), k.to_string()])
            .collect();
        if !torch_sources.is_empty() {
            let mut more = vec!["--sources".to_string(), torch_sources.join(",")];
            more.extend(samples.iter().cloned());
            more.extend(
                args.dtypes
                    .iter()
                    .flat_map(|d| ["--dtypes".into(), d.clone()]),
            );
            run_generator(root, &python, "gen_cases.py", &[&common, &more], &[])?;
        }
        if sources.contains(&"xla") {
            run_generator(root, &python, "gen_xla_cases.py", &[&common, &samples], &[])?;
        }
        if !torch_xla_sources.is_empty() {
            let more = ["--sources".to_string(), torch_xla_sources.join(",")];
            let torch_xla_python = root.join(setup::TORCH_XLA_VENV).join("bin/python");
            run_generator(
                root,
                &torch_xla_python,
                "gen_torch_xla_cases.py",
                &[&common, &more],
                &[("PJRT_DEVICE", "CPU")],
            )?;
            // XLA's print of each module's proto, by JAX (PyTorch/XLA has no printer).
            if sources.contains(&"torch_xla") {
                let print = ["--print-protos".to_string(), cases.display().to_string()];
                run_generator(root, &python, "gen_torch_xla_cases.py", &[&print], &[])?;
            }
        }
        if sources.contains(&"xla-dump") {
            let n =
                conformance::dump::generate_fixtures(root, &cases, &args.subset, filter.as_ref())?;
            eprintln!(
                "conformance: {n} xla-dump cases from {}",
                conformance::dump::FIXTURE_DIR
            );
        }
        if let Some(dir) = &xla_text_dir {
            let n = conformance::xla_text::generate(dir, &cases, &venv.join("bin/python"))?;
            eprintln!(
                "conformance: {n} xla-text cases from {} (read by XLA's parser)",
                dir.display()
            );
        }
        eprintln!(
            "conformance: cases generated in {:.0} s",
            started.elapsed().as_secs_f64()
        );
    }
    let opts = conformance::Options {
        graphbug: root.join("target/debug/graphbug"),
        cases,
        work: out.join("work"),
        jobs,
        filter,
        timeout: std::time::Duration::from_secs(args.timeout),
        progress: true,
        // StableHLO bytecode is read through JAX's MLIR: the venv's Python has JAX.
        env: vec![(
            "GRAPHBUG_PYTHON".to_string(),
            venv.join("bin/python").to_string_lossy().into_owned(),
        )],
        stage_cases: Vec::new(),
    };
    let report = conformance::run(&opts)?;
    print!("{}", report.table());
    let path = out.join("report.json");
    let json = serde_json::to_string_pretty(&report.to_json())?;
    fs::write(&path, json + "\n").with_context(|| format!("cannot write {}", path.display()))?;
    println!("report: {}", path.display());
    let unmet: Vec<String> = report
        .targets()
        .iter()
        .filter(|t| !t.met())
        .map(|t| format!("{} {:.1}% < {}%", t.source, t.percent(), t.target))
        .collect();
    if unmet.is_empty() || args.no_targets {
        return Ok(ExitCode::SUCCESS);
    }
    eprintln!("conformance: under the targets: {}", unmet.join(", "));
    Ok(ExitCode::FAILURE)
}

/// Runs the case generator `xtask/conformance/SCRIPT` with `python`, the arguments
/// `args` (in groups) and more environment `env`, in the workspace root, dying with xtask;
/// an error naming the script where it fails.
fn run_generator(
    root: &Path,
    python: &Path,
    script: &str,
    args: &[&[String]],
    env: &[(&str, &str)],
) -> Result<()> {
    let mut gen = Command::new(python);
    xtask::process::die_with_parent(&mut gen)
        .arg(root.join("xtask/conformance").join(script))
        .args(args.iter().flat_map(|a| a.iter()))
        .envs(env.iter().copied())
        .current_dir(root);
    let status = gen
        .status()
        .with_context(|| format!("cannot run {script} with {}", python.display()))?;
    ensure!(status.success(), "{script} failed ({status})");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_command_says_what_it_does_with_examples_that_parse() {
        use clap::CommandFactory;
        let cli = xtask::help::with_examples(Cli::command());
        cli.clone().debug_assert();
        let visible: Vec<&clap::Command> =
            cli.get_subcommands().filter(|c| !c.is_hide_set()).collect();
        assert!(visible.len() >= 5, "{}", visible.len());
        for cmd in visible {
            let name = cmd.get_name();
            let about = cmd.get_about().map(|a| a.to_string()).unwrap_or_default();
            assert!(
                about.len() > 20,
                "`cargo xtask {name}` says too little: `{about}`"
            );
            let help = cmd
                .get_after_help()
                .map(|h| h.to_string())
                .unwrap_or_default();
            let examples = xtask::help::examples(&help);
            assert!(
                examples.iter().any(|e| e.first().map(String::as_str) == Some(name)),
                "`cargo xtask {name} --help` has no example of it (add one to xtask/src/help.rs):\n{help}"
            );
            for example in examples {
                let args = std::iter::once("xtask".to_string()).chain(example.iter().cloned());
                if let Err(e) = cli.clone().try_get_matches_from(args) {
                    panic!(
                        "`cargo xtask {name} --help`: the example `{}` does not parse: {e}",
                        example.join(" ")
                    );
                }
            }
        }
    }
}
