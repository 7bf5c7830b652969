//! `cargo xtask`: project automation (libtorch setup, tests, benchmarks).

use std::ffi::OsStr;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use anyhow::{bail, ensure, Context, Result};
use clap::{Parser, Subcommand};
use graphbug_run::process::find_in_path;
use xtask::conformance;

mod docs;

/// The PyTorch version tch 0.26 is built against.
const TORCH_VERSION: &str = "2.13.0";

/// The torchvision release that matches torch 2.13.0 (the conformance zoo needs it).
const TORCHVISION_VERSION: &str = "0.28.0";

/// The JAX release (and its jaxlib) that graphbug's XLA side is checked against: the newest
/// for Python 3.11. It lowers the conformance suite's `xla` cases, makes the HLO corpus and
/// reads StableHLO bytecode for `graphbug fmt` and `check`.
const JAX_VERSION: &str = "0.10.2";

/// The XLA CPU PJRT plugin (by the OpenXLA authors) that `--backend pjrt:cpu` loads.
const XLA_CPU_PJRT_VERSION: &str = "0.0.1";

/// Python packages setup pip-installs beside torch: (pip name, pinned version). The
/// conformance suite (also in `cargo test`) needs OpInfo's op_db, which imports expecttest
/// and numpy; the zoo (the conformance suite's and the peak-memory bench's) needs
/// torchvision; the `xla` source needs JAX, jaxlib, the plugin, and absl-py, which JAX's
/// primitive harnesses import.
const PYTHON_PACKAGES: [(&str, Option<&str>); 7] = [
    ("numpy", None),
    ("expecttest", None),
    ("torchvision", Some(TORCHVISION_VERSION)),
    ("jax", Some(JAX_VERSION)),
    ("jaxlib", Some(JAX_VERSION)),
    ("xla-cpu-pjrt", Some(XLA_CPU_PJRT_VERSION)),
    ("absl-py", None),
];

/// The conformance suite's case sources: PyTorch's (gen_cases.py) and JAX's (gen_xla_cases.py).
const TORCH_SOURCES: [&str; 3] = ["opinfo", "zoo", "capture"];

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
    /// Create .venv with torch 2.13.0 (and torchvision, JAX 0.10.2, the XLA CPU PJRT plugin)
    /// and the .libtorch symlink, and install mdbook (idempotent).
    Setup,
    /// Run setup, then `cargo test --workspace [ARGS]`, then every example in examples/, then
    /// (without ARGS) tests/xla.rs on a graphbug built without libtorch and the docs check
    /// (`docs`).
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
    /// Run setup, then the main job: `graphbug repro [ARGS]` (no arguments: the demo).
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
}

/// Arguments of `cargo xtask conformance`.
#[derive(clap::Args)]
struct ConformanceArgs {
    /// `ci`: about 30 hand-picked OpInfo ops and four small modules, and about 50 XLA programs
    /// (one JAX harness of every third group, two back-compat modules, five models); `full`:
    /// every op_db op, the whole zoo, every JAX harness that runs on CPU.
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
    /// the HLO corpus's models).
    #[arg(long, default_value = "opinfo,zoo,capture")]
    sources: String,
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
        Cmd::Setup => setup(&root).map(|()| ExitCode::SUCCESS),
        Cmd::Test { args } => {
            let code = cargo_after_setup(&root, "test", &args)?;
            if code != ExitCode::SUCCESS {
                return Ok(code);
            }
            let code = run_examples(&root)?;
            if code != ExitCode::SUCCESS || !args.is_empty() {
                return Ok(code);
            }
            let code = test_without_libtorch(&root)?;
            if code != ExitCode::SUCCESS {
                return Ok(code);
            }
            check_docs(&root, Vec::new(), 300)
        }
        Cmd::Docs { files, timeout } => check_docs(&root, files, timeout),
        Cmd::Bench { args } => bench(&root, &args),
        Cmd::GpuBundle { out, binary } => {
            setup(&root)?;
            let binary = match binary {
                Some(b) => b,
                None => xtask::bundle::build_xla_binary(&root)?,
            };
            let size = xtask::bundle::make_bundle(&root, &binary, &root.join(out))?;
            let max = xtask::bundle::MAX_BUNDLE_BYTES;
            ensure!(
                size <= max,
                "the bundle weighs {:.1} MiB, over the {} MiB a GPU machine takes",
                size as f64 / (1 << 20) as f64,
                max >> 20
            );
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Fuzz { seconds, seed } => fuzz(&root, seconds, seed),
        Cmd::Repro { args } => repro(&root, &args),
        Cmd::Conformance(args) => run_conformance(&root, &args),
    }
}

/// The XLA side as JAX and TensorFlow users build it: `tests/xla.rs`,
/// `tests/xla_minify.rs`, `tests/xla_repro.rs` and `tests/draw.rs` on a graphbug built
/// without libtorch (`--no-default-features`; the test checks that nothing links it). The
/// dependencies' artifacts are shared with the default build; the default binary is put
/// back afterwards.
fn test_without_libtorch(root: &Path) -> Result<ExitCode> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let status = xtask::process::die_with_parent(&mut Command::new(&cargo))
        .args([
            "test",
            "-p",
            "graphbug",
            "--no-default-features",
            "--test",
            "xla",
            "--test",
            "xla_minify",
            "--test",
            "xla_repro",
            "--test",
            "draw",
        ])
        .current_dir(root)
        .status()
        .context("cannot run cargo test")?;
    let restored = xtask::process::die_with_parent(&mut Command::new(&cargo))
        .args(["build", "-p", "graphbug", "--bin", "graphbug"])
        .current_dir(root)
        .status()
        .context("cannot run cargo build")?;
    ensure!(
        restored.success(),
        "the default graphbug build failed ({restored})"
    );
    Ok(if status.success() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// The workspace root: the parent of this package's manifest directory.
fn workspace_root() -> Result<PathBuf> {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest
        .parent()
        .map(Path::to_path_buf)
        .with_context(|| format!("xtask manifest dir {} has no parent", manifest.display()))
}

/// Ensures `.venv` holds torch 2.13.0 and `.libtorch` points at its torch package.
fn setup(root: &Path) -> Result<()> {
    let venv = root.join(".venv");
    let python = venv.join("bin/python");
    if !python.exists() {
        create_venv(&venv)?;
    }
    let torch = match installed_torch(&venv)? {
        Some(torch) => torch,
        None => {
            pip_install_torch(&python)?;
            installed_torch(&venv)?.with_context(|| {
                format!(
                    "pip finished but torch {TORCH_VERSION} is not in {}",
                    venv.display()
                )
            })?
        }
    };
    link_libtorch(root, &torch)?;
    write_doctest_config(root)?;
    for (package, version) in PYTHON_PACKAGES {
        ensure_python_package(&venv, package, version)?;
    }
    ensure_capture_package(root, &venv)?;
    docs::ensure_mdbook()?;
    ensure_engines();
    ensure_drawing();
    println!("setup: libtorch {TORCH_VERSION} ready at .libtorch");
    Ok(())
}

/// `cargo xtask docs`: setup, `cargo build --bin graphbug` (the blocks run it), then the
/// book and the blocks of `files` (every documentation file when empty).
fn check_docs(root: &Path, files: Vec<PathBuf>, timeout: u64) -> Result<ExitCode> {
    setup(root)?;
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

/// Programs of the engines the worker-launcher tests start (`tests/cluster.rs`): a
/// single-node Slurm and an sshd on localhost, with the Debian packages that carry them.
const ENGINE_PROGRAMS: [(&str, &str); 7] = [
    ("munged", "munge"),
    ("slurmctld", "slurmctld"),
    ("slurmd", "slurmd"),
    ("srun", "slurm-client"),
    ("sshd", "openssh-server"),
    ("ssh", "openssh-client"),
    ("ssh-keygen", "openssh-client"),
];

/// Programs `graphbug draw` and its tests need: Graphviz lays pictures out, Chromium loads
/// the pages in the browser tests (`tests/draw.rs`, `tests/xla_repro.rs`).
const DRAWING_PROGRAMS: [(&str, &str); 2] = [("dot", "graphviz"), ("chromium", "chromium")];

/// Installs the engines' Debian packages where they are missing and this is a Debian
/// machine where setup runs as root (CI's); elsewhere it says what the tests will skip.
/// Never an error: the tests skip an engine that is not installed, with a notice.
fn ensure_engines() {
    ensure_debian_packages(
        &ENGINE_PROGRAMS,
        "the launcher tests' engines",
        "the Slurm and ssh launcher tests will be skipped",
    );
}

/// Installs Graphviz and Chromium where they are missing (as [`ensure_engines`] does);
/// without them `graphbug draw` writes only DOT and Model Explorer JSON, and the tests of
/// pictures and pages fail, naming what to install.
fn ensure_drawing() {
    ensure_debian_packages(
        &DRAWING_PROGRAMS,
        "Graphviz and Chromium, for graphbug draw and its browser tests",
        "graphbug draw cannot lay out pictures and the browser tests fail",
    );
}

/// Installs the Debian packages of `programs` (program, package) that are missing, as
/// root with apt-get (refreshing stale package lists once); otherwise says `without` and
/// the command to run.
fn ensure_debian_packages(programs: &[(&str, &'static str)], what: &str, without: &str) {
    let missing = |programs: &[(&str, &'static str)]| -> Vec<&'static str> {
        let mut packages: Vec<&'static str> = programs
            .iter()
            .filter(|(program, _)| {
                find_in_path(program).is_none()
                    && !["/usr/sbin", "/sbin"]
                        .iter()
                        .any(|d| Path::new(d).join(program).is_file())
            })
            .map(|&(_, package)| package)
            .collect();
        packages.dedup();
        packages
    };
    let packages = missing(programs);
    if packages.is_empty() {
        return;
    }
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    if !root || find_in_path("apt-get").is_none() {
        eprintln!(
            "setup: {without}: {} not installed (run `apt-get install {}` as root)",
            packages.join(", "),
            packages.join(" ")
        );
        return;
    }
    eprintln!("setup: installing {} ({what})", packages.join(" "));
    let install = || {
        Command::new("apt-get")
            .args(["install", "-y", "-q", "--no-install-recommends"])
            .args(&packages)
            .env("DEBIAN_FRONTEND", "noninteractive")
            .stdout(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    // Stale package lists are refreshed once.
    let installed = install()
        || (Command::new("apt-get")
            .args(["update", "-q"])
            .stdout(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
            && install());
    let still = missing(programs);
    if !installed || !still.is_empty() {
        eprintln!("setup: could not install {}; {without}", still.join(", "));
    }
}

/// The version of `python/` (graphbug_capture), as its pyproject.toml gives it.
const CAPTURE_VERSION: &str = "0.1.0";

/// Installs `python/` (the graphbug_capture torch.compile backends) into the venv, editable,
/// so the tests and `torch.compile(backend="graphbug_capture")` use the working tree.
fn ensure_capture_package(root: &Path, venv: &Path) -> Result<()> {
    let marker = format!("graphbug_capture-{CAPTURE_VERSION}.dist-info");
    let lib = venv.join("lib");
    let installed = fs::read_dir(&lib).is_ok_and(|entries| {
        entries
            .flatten()
            .any(|e| e.path().join("site-packages").join(&marker).is_dir())
    });
    if installed {
        return Ok(());
    }
    eprintln!(
        "setup: installing python/ (graphbug_capture) into {}",
        venv.display()
    );
    let python = venv.join("bin/python");
    let status = Command::new(&python)
        .args([
            "-m",
            "pip",
            "install",
            "--disable-pip-version-check",
            "--quiet",
        ])
        .args(["--no-deps", "-e"])
        .arg(root.join("python"))
        .status()
        .with_context(|| format!("cannot run {}", python.display()))?;
    ensure!(
        status.success(),
        "`pip install -e python/` failed ({status}); pip fetches setuptools to build it, so \
         the package registry must be reachable"
    );
    Ok(())
}

/// Creates the virtualenv with `python3 -m venv`, explaining what is missing on failure.
fn create_venv(venv: &Path) -> Result<()> {
    let python3 = find_in_path("python3").context(
        "python3 not found in PATH; install Python 3 (e.g. `apt-get install python3 python3-venv python3-pip`)",
    )?;
    eprintln!("setup: creating {}", venv.display());
    let status = Command::new(&python3)
        .args([OsStr::new("-m"), OsStr::new("venv"), venv.as_os_str()])
        .status()
        .with_context(|| format!("cannot run {}", python3.display()))?;
    ensure!(
        status.success(),
        "`python3 -m venv {}` failed ({status}); the venv module or ensurepip is probably \
         missing: install it (e.g. `apt-get install python3-venv python3-pip`) and remove the \
         partial .venv",
        venv.display()
    );
    Ok(())
}

/// Installs torch into the virtualenv with its own pip.
fn pip_install_torch(python: &Path) -> Result<()> {
    eprintln!("setup: installing torch=={TORCH_VERSION} (about 5 GB, takes a few minutes)");
    let status = Command::new(python)
        .args(["-m", "pip", "install", "--disable-pip-version-check"])
        .arg(format!("torch=={TORCH_VERSION}"))
        .status()
        .with_context(|| format!("cannot run {}", python.display()))?;
    ensure!(
        status.success(),
        "`{} -m pip install torch=={TORCH_VERSION}` failed ({status}); if pip is missing, \
         install it (e.g. `apt-get install python3-pip`) and remove .venv",
        python.display()
    );
    Ok(())
}

/// Returns the venv's torch package directory if it holds torch 2.13.0 and libtorch_cpu.so.
///
/// Reads `torch/version.py` instead of starting Python, so the check is cheap.
fn installed_torch(venv: &Path) -> Result<Option<PathBuf>> {
    let lib = venv.join("lib");
    let entries = match fs::read_dir(&lib) {
        Ok(entries) => entries,
        Err(_) => return Ok(None),
    };
    let mut candidates = Vec::new();
    for entry in entries {
        let entry = entry.with_context(|| format!("cannot list {}", lib.display()))?;
        if entry.file_name().to_string_lossy().starts_with("python3") {
            candidates.push(entry.path().join("site-packages/torch"));
        }
    }
    candidates.sort();
    Ok(candidates.into_iter().find(|torch| is_torch_ready(torch)))
}

/// Whether `torch` is a torch 2.13.0 package directory with its C++ libraries.
fn is_torch_ready(torch: &Path) -> bool {
    // version.py has e.g. `__version__ = '2.13.0+cu130'` (local suffix optional).
    let version_ok = fs::read_to_string(torch.join("version.py")).is_ok_and(|text| {
        text.lines().any(|line| {
            line.strip_prefix("__version__ = '")
                .and_then(|rest| rest.strip_prefix(TORCH_VERSION))
                .is_some_and(|rest| rest.starts_with('\'') || rest.starts_with('+'))
        })
    });
    version_ok && torch.join("lib/libtorch_cpu.so").is_file()
}

/// Points `<root>/.libtorch` at `torch` with a relative symlink, replacing a stale one.
fn link_libtorch(root: &Path, torch: &Path) -> Result<()> {
    let link = root.join(".libtorch");
    let target = torch.strip_prefix(root).unwrap_or(torch);
    match fs::symlink_metadata(&link) {
        Ok(meta) if meta.file_type().is_symlink() => {
            if fs::read_link(&link).is_ok_and(|current| current == target) {
                return Ok(());
            }
            fs::remove_file(&link)
                .with_context(|| format!("cannot remove stale symlink {}", link.display()))?;
        }
        Ok(_) => bail!(
            "{} exists and is not a symlink; remove it and rerun `cargo xtask setup`",
            link.display()
        ),
        Err(_) => {}
    }
    std::os::unix::fs::symlink(target, &link).with_context(|| {
        format!(
            "cannot create symlink {} -> {}",
            link.display(),
            target.display()
        )
    })
}

/// Writes `.cargo/libtorch.toml` (included by `.cargo/config.toml`) when its content changes.
///
/// Doctest binaries run from a temporary directory, so `$ORIGIN` cannot find libtorch;
/// they get an absolute RUNPATH to this checkout's `.libtorch/lib` instead.
fn write_doctest_config(root: &Path) -> Result<()> {
    let lib = root.join(".libtorch/lib");
    let lib = lib
        .to_str()
        .with_context(|| format!("workspace path {} is not UTF-8", root.display()))?
        .replace('\\', "\\\\")
        .replace('"', "\\\"");
    let content = format!(
        "# Written by `cargo xtask setup`; do not edit or commit.\n\
         [build]\n\
         rustdocflags = [\"-C\", \"link-arg=-Wl,-rpath,{lib}\"]\n"
    );
    let path = root.join(".cargo/libtorch.toml");
    if fs::read_to_string(&path).is_ok_and(|old| old == content) {
        return Ok(());
    }
    fs::write(&path, content).with_context(|| format!("cannot write {}", path.display()))
}

/// Runs setup, then `cargo <subcommand> --workspace <args>` in the root, passing its exit code.
fn cargo_after_setup(root: &Path, subcommand: &str, args: &[String]) -> Result<ExitCode> {
    setup(root)?;
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let status = Command::new(&cargo)
        .arg(subcommand)
        .arg("--workspace")
        .args(args)
        .current_dir(root)
        .status()
        .with_context(|| format!("cannot run `cargo {subcommand}`"))?;
    Ok(match status.code() {
        Some(0) => ExitCode::SUCCESS,
        Some(code) => ExitCode::from(u8::try_from(code).unwrap_or(1)),
        None => ExitCode::FAILURE,
    })
}

/// Runs setup, then every benchmark to the end (one missing its target does not stop the
/// others), passing their output through (on a terminal, under a spinner naming the
/// benchmark that runs); then the `target:` line of every figure, and exit 1 if a target
/// was missed or a benchmark failed.
fn bench(root: &Path, args: &[String]) -> Result<ExitCode> {
    use std::io::{BufRead, BufReader, Write};
    setup(root)?;
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
    setup(root)?;
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
    setup(root)?;
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

/// Runs each `examples/*.rs` with `cargo run --example`, so examples stay working.
fn run_examples(root: &Path) -> Result<ExitCode> {
    let mut names: Vec<String> = fs::read_dir(root.join("examples"))
        .context("cannot list examples/")?
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            name.strip_suffix(".rs").map(str::to_string)
        })
        .collect();
    names.sort();
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    for name in names {
        eprintln!("xtask: running example {name}");
        let status = Command::new(&cargo)
            .args(["run", "--quiet", "--example", &name])
            .current_dir(root)
            .status()
            .with_context(|| format!("cannot run example {name}"))?;
        if !status.success() {
            eprintln!("xtask: example {name} failed ({status})");
            return Ok(ExitCode::FAILURE);
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Pip-installs `package` (at `version`, if given) into the venv unless pip's record of
/// it (its `.dist-info`, of that version) is already there.
fn ensure_python_package(venv: &Path, package: &str, version: Option<&str>) -> Result<()> {
    if python_package_present(venv, package, version)? {
        return Ok(());
    }
    let spec = match version {
        Some(v) => format!("{package}=={v}"),
        None => package.to_string(),
    };
    eprintln!("setup: installing {spec} into {}", venv.display());
    let python = venv.join("bin/python");
    let status = Command::new(&python)
        .args([
            "-m",
            "pip",
            "install",
            "--disable-pip-version-check",
            "--quiet",
        ])
        .arg(&spec)
        .status()
        .with_context(|| format!("cannot run {}", python.display()))?;
    ensure!(
        status.success(),
        "`{} -m pip install {spec}` failed ({status}); the package registry must be reachable",
        python.display()
    );
    ensure!(
        python_package_present(venv, package, version)?,
        "pip finished but {spec} is not in {}",
        venv.display()
    );
    Ok(())
}

/// Whether pip installed distribution `package` (at `version`, if given) into the venv:
/// `site-packages/<name>-<version>.dist-info`, the name normalized as pip writes it
/// (`xla-cpu-pjrt` is `xla_cpu_pjrt`).
fn python_package_present(venv: &Path, package: &str, version: Option<&str>) -> Result<bool> {
    let lib = venv.join("lib");
    let Ok(entries) = fs::read_dir(&lib) else {
        return Ok(false);
    };
    let name = package.replace(['-', '.'], "_").to_lowercase();
    for entry in entries {
        let entry = entry.with_context(|| format!("cannot list {}", lib.display()))?;
        let site = entry.path().join("site-packages");
        let Ok(dists) = fs::read_dir(&site) else {
            continue;
        };
        for dist in dists {
            let dist = dist.with_context(|| format!("cannot list {}", site.display()))?;
            let file = dist.file_name();
            let Some(stem) = file
                .to_string_lossy()
                .strip_suffix(".dist-info")
                .map(str::to_string)
            else {
                continue;
            };
            let Some((dist_name, dist_version)) = stem.split_once('-') else {
                continue;
            };
            if dist_name.to_lowercase() == name
                && version.is_none_or(|v| dist_version == v)
                && dist.path().is_dir()
            {
                return Ok(true);
            }
        }
    }
    Ok(false)
}

/// `cargo xtask conformance`: setup, Python packages, build, generate, run, report.
fn run_conformance(root: &Path, args: &ConformanceArgs) -> Result<ExitCode> {
    setup(root)?;
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
    let sources: Vec<&str> = args
        .sources
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect();
    if let Some(unknown) = sources
        .iter()
        .find(|s| !TORCH_SOURCES.contains(s) && **s != "xla")
    {
        bail!("unknown --sources `{unknown}` (known: opinfo, zoo, capture, xla)");
    }
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
        if !torch_sources.is_empty() {
            let mut gen = Command::new(venv.join("bin/python"));
            xtask::process::die_with_parent(&mut gen)
                .arg(root.join("xtask/conformance/gen_cases.py"))
                .arg("--out")
                .arg(&cases)
                .args([
                    "--subset",
                    &args.subset,
                    "--sources",
                    &torch_sources.join(","),
                ])
                .args(["-j", &jobs.to_string()]);
            if let Some(k) = args.samples {
                gen.args(["--samples", &k.to_string()]);
            }
            if let Some(d) = &args.dtypes {
                gen.args(["--dtypes", d]);
            }
            if let Some(f) = &args.filter {
                gen.args(["--filter", f]);
            }
            let status = gen
                .current_dir(root)
                .status()
                .context("cannot run gen_cases.py")?;
            ensure!(status.success(), "gen_cases.py failed ({status})");
        }
        if sources.contains(&"xla") {
            let mut gen = Command::new(venv.join("bin/python"));
            xtask::process::die_with_parent(&mut gen)
                .arg(root.join("xtask/conformance/gen_xla_cases.py"))
                .arg("--out")
                .arg(&cases)
                .args(["--subset", &args.subset])
                .args(["-j", &jobs.to_string()]);
            if let Some(f) = &args.filter {
                gen.args(["--filter", f]);
            }
            if let Some(k) = args.samples {
                gen.args(["--samples", &k.to_string()]);
            }
            let status = gen
                .current_dir(root)
                .status()
                .context("cannot run gen_xla_cases.py")?;
            ensure!(status.success(), "gen_xla_cases.py failed ({status})");
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A fresh scratch directory under the system temp dir.
    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("xtask-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn fake_torch(venv: &Path, version_line: &str) -> PathBuf {
        let torch = venv.join("lib/python3.11/site-packages/torch");
        fs::create_dir_all(torch.join("lib")).unwrap();
        fs::write(
            torch.join("version.py"),
            format!("{version_line}\ngit_version = 'x'\n"),
        )
        .unwrap();
        fs::write(torch.join("lib/libtorch_cpu.so"), b"").unwrap();
        torch
    }

    #[test]
    fn torch_version_is_read_from_version_py() {
        let dir = scratch("version");
        let venv = dir.join(".venv");
        assert_eq!(installed_torch(&venv).unwrap(), None, "no venv yet");
        let torch = fake_torch(&venv, "__version__ = '2.13.0+cu130'");
        assert_eq!(installed_torch(&venv).unwrap(), Some(torch.clone()));
        fs::write(torch.join("version.py"), "__version__ = '2.13.0'\n").unwrap();
        assert!(is_torch_ready(&torch));
        for wrong in ["__version__ = '2.12.0'", "__version__ = '2.13.01'"] {
            fs::write(torch.join("version.py"), wrong).unwrap();
            assert!(!is_torch_ready(&torch), "{wrong}");
        }
        fs::write(torch.join("version.py"), "__version__ = '2.13.0'\n").unwrap();
        fs::remove_file(torch.join("lib/libtorch_cpu.so")).unwrap();
        assert!(!is_torch_ready(&torch), "libtorch_cpu.so is required");
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn libtorch_link_is_relative_and_refreshed() {
        let dir = scratch("link");
        let torch = fake_torch(&dir.join(".venv"), "__version__ = '2.13.0'");
        link_libtorch(&dir, &torch).unwrap();
        let link = dir.join(".libtorch");
        assert_eq!(
            fs::read_link(&link).unwrap(),
            PathBuf::from(".venv/lib/python3.11/site-packages/torch")
        );
        assert!(link.join("lib/libtorch_cpu.so").is_file());
        // Idempotent, and a stale link is replaced.
        link_libtorch(&dir, &torch).unwrap();
        fs::remove_file(&link).unwrap();
        std::os::unix::fs::symlink("elsewhere", &link).unwrap();
        link_libtorch(&dir, &torch).unwrap();
        assert!(link.join("version.py").is_file());
        // A real directory in the way is an error, not silently replaced.
        fs::remove_file(&link).unwrap();
        fs::create_dir(&link).unwrap();
        let err = link_libtorch(&dir, &torch).unwrap_err().to_string();
        assert!(err.contains("is not a symlink"), "{err}");
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn doctest_config_is_written_once() {
        let dir = scratch("doctest");
        fs::create_dir_all(dir.join(".cargo")).unwrap();
        write_doctest_config(&dir).unwrap();
        let path = dir.join(".cargo/libtorch.toml");
        let first = fs::read_to_string(&path).unwrap();
        assert!(first.contains(&format!("-rpath,{}/.libtorch/lib", dir.display())));
        let mtime = fs::metadata(&path).unwrap().modified().unwrap();
        write_doctest_config(&dir).unwrap();
        assert_eq!(fs::metadata(&path).unwrap().modified().unwrap(), mtime);
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn python_packages_are_found_by_their_dist_info() {
        let dir = scratch("dist-info");
        let venv = dir.join(".venv");
        assert!(!python_package_present(&venv, "jax", Some("0.10.2")).unwrap());
        let site = venv.join("lib/python3.11/site-packages");
        for dist in [
            "jax-0.10.2",
            "xla_cpu_pjrt-0.0.1",
            "absl_py-2.5.1",
            "torchvision-0.27.0",
        ] {
            fs::create_dir_all(site.join(format!("{dist}.dist-info"))).unwrap();
        }
        assert!(python_package_present(&venv, "jax", Some("0.10.2")).unwrap());
        assert!(!python_package_present(&venv, "jax", Some("0.10.1")).unwrap());
        assert!(!python_package_present(&venv, "jaxlib", Some("0.10.2")).unwrap());
        assert!(python_package_present(&venv, "xla-cpu-pjrt", Some("0.0.1")).unwrap());
        assert!(python_package_present(&venv, "absl-py", None).unwrap());
        assert!(!python_package_present(&venv, "torchvision", Some(TORCHVISION_VERSION)).unwrap());
        fs::remove_dir_all(&dir).unwrap();
    }

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
