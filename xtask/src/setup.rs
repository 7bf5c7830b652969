//! The set-up each `cargo xtask` command runs first: only what that command needs.
//!
//! The main job (`cargo xtask repro`: `graphbug repro` of an aten graph) needs the venv with
//! torch (libtorch, linked at `.libtorch`) and Graphviz's `dot`, which lays out the pictures
//! of its report.html; it runs no Python (the repro.py it writes needs only torch). The
//! Python packages of the conformance suite and the XLA side, `python/` (graphbug_capture),
//! mdBook, the launcher tests' engines (Slurm, munge, sshd) and Chromium are for the tests,
//! the docs check, the conformance suite and the benchmarks, which install them as each
//! needs; `cargo xtask setup` installs everything. [`plan`] says what each command installs;
//! every install says what it installs, and why, before it starts.

use std::ffi::OsStr;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, ensure, Context, Result};
use graphbug_run::process::find_in_path;

use crate::docs;

/// The PyTorch version tch 0.26 is built against.
pub const TORCH_VERSION: &str = "2.13.0";

/// The torchvision release that matches torch 2.13.0 (the conformance zoo needs it).
pub const TORCHVISION_VERSION: &str = "0.28.0";

/// The JAX release (and its jaxlib) that graphbug's XLA side is checked against: the newest
/// for Python 3.11. It lowers the conformance suite's `xla` cases, makes the HLO corpus and
/// reads StableHLO bytecode for `graphbug fmt` and `check`.
pub const JAX_VERSION: &str = "0.10.2";

/// The XLA CPU PJRT plugin (by the OpenXLA authors) that `--backend pjrt:cpu` loads.
pub const XLA_CPU_PJRT_VERSION: &str = "0.0.1";

/// The PyTorch/XLA release `graphbug_capture.torch_xla` is tested with; it pins torch
/// [`TORCH_XLA_TORCH_VERSION`].
pub const TORCH_XLA_VERSION: &str = "2.9.0";

/// The torch release PyTorch/XLA 2.9.0 pins (not libtorch's [`TORCH_VERSION`]: hence an
/// environment of its own).
pub const TORCH_XLA_TORCH_VERSION: &str = "2.9.0";

/// The second environment, PyTorch/XLA's, relative to the workspace.
pub const TORCH_XLA_VENV: &str = ".venv-torch-xla";

/// The version of `python/` (graphbug_capture), as its pyproject.toml gives it.
const CAPTURE_VERSION: &str = "0.1.0";

/// A Python package set-up pip-installs into the venv beside torch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Package {
    /// Its pip name.
    pub name: &'static str,
    /// The pinned version, if any.
    pub version: Option<&'static str>,
    /// What needs it.
    pub why: &'static str,
}

/// numpy: OpInfo's `op_db` and the XLA side's JAX scripts import it.
pub const NUMPY: Package = Package {
    name: "numpy",
    version: None,
    why: "OpInfo's op_db (the conformance suite's opinfo cases) and the XLA side's JAX scripts import it",
};

/// expecttest: OpInfo's `op_db` imports it.
pub const EXPECTTEST: Package = Package {
    name: "expecttest",
    version: None,
    why: "OpInfo's op_db (the conformance suite's opinfo cases) imports it",
};

/// torchvision: the model zoo.
pub const TORCHVISION: Package = Package {
    name: "torchvision",
    version: Some(TORCHVISION_VERSION),
    why: "the model zoo of the conformance suite and of the peak-memory benchmark",
};

/// JAX: the XLA side's reference.
pub const JAX: Package = Package {
    name: "jax",
    version: Some(JAX_VERSION),
    why: "the XLA side's reference: the conformance suite's xla cases, the HLO corpus, \
          StableHLO bytecode reading, the XLA tests and benchmarks",
};

/// jaxlib, JAX's compiled half.
pub const JAXLIB: Package = Package {
    name: "jaxlib",
    version: Some(JAX_VERSION),
    why: "JAX's compiled half; the XLA benchmark also times its HLO parser",
};

/// The XLA CPU PJRT plugin.
pub const XLA_CPU_PJRT: Package = Package {
    name: "xla-cpu-pjrt",
    version: Some(XLA_CPU_PJRT_VERSION),
    why: "the XLA CPU PJRT plugin `--backend pjrt:cpu` loads (XLA tests, conformance, \
          benchmarks, the GPU bundle's reference outputs)",
};

/// absl-py: JAX's primitive harnesses import it.
pub const ABSL: Package = Package {
    name: "absl-py",
    version: None,
    why: "JAX's primitive harnesses (the conformance suite's xla cases) import it",
};

/// The IREE release `--backend iree:<target>` is checked against.
pub const IREE_VERSION: &str = "3.13.0";

/// IREE's compiler (`iree-compile`, and its Python API, which repro.py uses).
pub const IREE_COMPILER: Package = Package {
    name: "iree-base-compiler",
    version: Some(IREE_VERSION),
    why: "IREE's compiler, which `--backend iree:<target>` runs (the IREE tests and benchmark)",
};

/// IREE's runtime (`iree-run-module`, and its Python API, which repro.py uses).
pub const IREE_RUNTIME: Package = Package {
    name: "iree-base-runtime",
    version: Some(IREE_VERSION),
    why: "IREE's runtime, which runs what `--backend iree:<target>` compiles",
};

/// Every Python package set-up knows, in the order `cargo xtask setup` installs them.
pub const PYTHON_PACKAGES: [&Package; 9] = [
    &NUMPY,
    &EXPECTTEST,
    &TORCHVISION,
    &JAX,
    &JAXLIB,
    &XLA_CPU_PJRT,
    &ABSL,
    &IREE_COMPILER,
    &IREE_RUNTIME,
];

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

/// Graphviz: `dot` lays out the pictures of `graphbug draw` and of report.html.
const GRAPHVIZ_PROGRAMS: [(&str, &str); 1] = [("dot", "graphviz")];

/// Chromium: the browser tests (`tests/draw.rs`, `tests/xla_repro.rs`) and the draw
/// benchmark load pages in it.
const CHROMIUM_PROGRAMS: [(&str, &str); 1] = [("chromium", "chromium")];

/// One thing set-up installs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Item {
    /// `.venv`, made with `python3 -m venv`.
    Venv,
    /// torch 2.13.0 in the venv (libtorch), with the `.libtorch` link and
    /// `.cargo/libtorch.toml` (the doctests' RUNPATH) written beside it.
    Torch,
    /// A pip package in the venv.
    Python(&'static Package),
    /// `python/` (graphbug_capture), editable, in the venv.
    Capture,
    /// [`TORCH_XLA_VENV`]: PyTorch/XLA with the torch it pins, numpy and `python/`.
    TorchXla,
    /// Debian's graphviz, as root with apt.
    Graphviz,
    /// Debian's chromium, as root with apt.
    Chromium,
    /// Debian's Slurm, munge and OpenSSH packages, as root with apt.
    Engines,
    /// mdBook, with `cargo install`.
    Mdbook,
}

/// The conformance suite's case sources a run asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Sources {
    /// OpInfo samples (gen_cases.py, op_db).
    pub opinfo: bool,
    /// The model zoo (torchvision).
    pub zoo: bool,
    /// The zoo compiled by torch.compile through graphbug_capture.
    pub capture: bool,
    /// XLA programs lowered by JAX, run on `pjrt:cpu` (and read by JAX: XLA dumps too).
    pub xla: bool,
    /// HLO modules PyTorch/XLA compiled (gen_torch_xla_cases.py, in its own environment).
    pub torch_xla: bool,
}

impl Sources {
    /// Every source.
    pub const ALL: Sources = Sources {
        opinfo: true,
        zoo: true,
        capture: true,
        xla: true,
        torch_xla: true,
    };
}

/// The command whose set-up runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Job {
    /// `cargo xtask setup`: everything any command needs.
    Everything,
    /// `cargo xtask repro`, the main job: `graphbug repro` of an aten graph.
    Repro,
    /// `cargo xtask test`: every test, example and the docs check.
    Test,
    /// `cargo xtask docs`: the book and the documentation's code blocks.
    Docs,
    /// `cargo xtask conformance` with these sources.
    Conformance(Sources),
    /// `cargo xtask bench`.
    Bench,
    /// `cargo xtask fuzz`.
    Fuzz,
    /// `cargo xtask gpu-bundle`.
    GpuBundle,
    /// `cargo xtask aten-gpu-bundle`.
    AtenGpuBundle,
}

impl Job {
    /// The command, as a user types it.
    pub fn command(self) -> &'static str {
        match self {
            Job::Everything => "cargo xtask setup",
            Job::Repro => "cargo xtask repro",
            Job::Test => "cargo xtask test",
            Job::Docs => "cargo xtask docs",
            Job::Conformance(_) => "cargo xtask conformance",
            Job::Bench => "cargo xtask bench",
            Job::Fuzz => "cargo xtask fuzz",
            Job::GpuBundle => "cargo xtask gpu-bundle",
            Job::AtenGpuBundle => "cargo xtask aten-gpu-bundle",
        }
    }
}

/// What `job` installs, in order (the venv first).
///
/// - repro: torch and Graphviz (the report's pictures); `graphbug repro` of an aten graph
///   runs no Python, and the repro.py it writes imports only torch.
/// - fuzz: torch (`tests/fuzz.rs` runs the parser, `check --meta` and `run`).
/// - aten-gpu-bundle: torch (pip, and the CUDA libraries its wheel brought, which link the
///   bundle's graphbug against torch 2.11's libtorch).
/// - gpu-bundle: the XLA CPU plugin only (the bundle's graphbug is built without libtorch,
///   and records its reference outputs on `pjrt:cpu`).
/// - conformance: torch and the packages of the sources asked for (opinfo: numpy and
///   expecttest; zoo: torchvision; capture: torchvision and graphbug_capture; xla, and
///   xla-dump: JAX, jaxlib, absl-py and the XLA CPU plugin; torch_xla: those and
///   [`TORCH_XLA_VENV`]).
/// - docs: mdBook, and what the documentation's blocks run: torch, Graphviz, JAX, the
///   XLA CPU plugin and IREE, graphbug_capture, and a `cargo xtask conformance --sources xla`.
/// - bench: torch, torchvision (the peak-memory zoo), JAX, jaxlib and the XLA CPU plugin
///   (the XLA benchmarks), IREE's compiler and runtime (its overhead), Graphviz and Chromium (the draw benchmark), the engines (the
///   parallel-minify benchmark through srun).
/// - test (which runs every test, the docs check and, through `tests/conformance.rs`, the
///   conformance suite) and setup: everything.
pub fn plan(job: Job) -> Vec<Item> {
    use Item::{Capture, Chromium, Engines, Graphviz, Mdbook, Python, Torch, TorchXla, Venv};
    let everything = {
        let mut all = vec![Torch];
        all.extend(PYTHON_PACKAGES.iter().map(|&p| Python(p)));
        all.extend([Capture, Graphviz, Mdbook, Engines, Chromium, TorchXla]);
        all
    };
    let rest: Vec<Item> = match job {
        Job::Everything | Job::Test => everything,
        Job::Repro => vec![Torch, Graphviz],
        Job::Fuzz => vec![Torch],
        Job::GpuBundle => vec![Python(&XLA_CPU_PJRT)],
        Job::AtenGpuBundle => vec![Torch],
        Job::Docs => vec![
            Torch,
            Python(&NUMPY),
            Python(&JAX),
            Python(&JAXLIB),
            Python(&XLA_CPU_PJRT),
            Python(&ABSL),
            Python(&IREE_COMPILER),
            Python(&IREE_RUNTIME),
            Capture,
            Graphviz,
            Mdbook,
        ],
        Job::Bench => vec![
            Torch,
            Python(&NUMPY),
            Python(&TORCHVISION),
            Python(&JAX),
            Python(&JAXLIB),
            Python(&XLA_CPU_PJRT),
            Python(&IREE_COMPILER),
            Python(&IREE_RUNTIME),
            Graphviz,
            Engines,
            Chromium,
        ],
        Job::Conformance(s) => {
            let mut items = vec![Torch];
            if s.opinfo {
                items.extend([Python(&NUMPY), Python(&EXPECTTEST)]);
            }
            if s.zoo || s.capture {
                items.push(Python(&TORCHVISION));
            }
            if s.xla {
                items.extend([
                    Python(&NUMPY),
                    Python(&JAX),
                    Python(&JAXLIB),
                    Python(&XLA_CPU_PJRT),
                    Python(&ABSL),
                ]);
            }
            if s.capture {
                items.push(Capture);
            }
            if s.torch_xla {
                items.push(TorchXla);
            }
            items
        }
    };
    let mut items = vec![Venv];
    for item in rest {
        if !items.contains(&item) {
            items.push(item);
        }
    }
    items
}

impl Item {
    /// What it is, as the announcements name it.
    pub fn label(self) -> String {
        match self {
            Item::Venv => ".venv (python3 -m venv)".to_string(),
            Item::Torch => format!("torch=={TORCH_VERSION}"),
            Item::Python(p) => match p.version {
                Some(v) => format!("{}=={v}", p.name),
                None => p.name.to_string(),
            },
            Item::Capture => "python/ (graphbug_capture)".to_string(),
            Item::TorchXla => format!(
                "{TORCH_XLA_VENV} (torch_xla=={TORCH_XLA_VERSION}, torch=={TORCH_XLA_TORCH_VERSION})"
            ),
            Item::Graphviz => "Graphviz (dot)".to_string(),
            Item::Chromium => "Chromium".to_string(),
            Item::Engines => "Slurm, munge and OpenSSH".to_string(),
            Item::Mdbook => format!("mdbook {}", docs::MDBOOK_VERSION),
        }
    }

    /// Why it is installed.
    pub fn why(self) -> &'static str {
        match self {
            Item::Venv => "the project's Python environment, which holds torch and the other packages",
            Item::Torch => "libtorch, which graphbug compiles and runs aten graphs with; about 5 GB, a few minutes",
            Item::Python(p) => p.why,
            Item::Capture => "the graphbug_capture torch.compile backend: the conformance suite's capture cases, tests/capture.rs, the docs' capture examples",
            Item::TorchXla => "PyTorch/XLA for the trainer-script tests (tests/torch_xla.rs): it pins a torch that .venv's libtorch cannot share, so it has an environment of its own; about 7 GB, a few minutes",
            Item::Graphviz => "its `dot` lays out the pictures of report.html and graphbug draw",
            Item::Chromium => "the browser tests (tests/draw.rs, tests/xla_repro.rs) and the draw benchmark load pages in headless Chromium",
            Item::Engines => "the launcher tests (tests/cluster.rs) and the parallel-minify benchmark start a private single-node Slurm cluster and an sshd on localhost from them",
            Item::Mdbook => "it builds the book (docs/ into target/book); cargo install, about 90 s, once",
        }
    }

    /// The Debian packages it is made of, by the programs that show them installed.
    fn debian_programs(self) -> &'static [(&'static str, &'static str)] {
        match self {
            Item::Graphviz => &GRAPHVIZ_PROGRAMS,
            Item::Chromium => &CHROMIUM_PROGRAMS,
            Item::Engines => &ENGINE_PROGRAMS,
            _ => &[],
        }
    }

    /// Whether it is already there (cheap: files and `PATH`, nothing is started but
    /// `mdbook --version`).
    pub fn present(self, root: &Path) -> Result<bool> {
        let venv = root.join(".venv");
        Ok(match self {
            Item::Venv => venv.join("bin/python").exists(),
            Item::Torch => installed_torch(&venv)?.is_some(),
            Item::Python(p) => python_package_present(&venv, p.name, p.version)?,
            Item::Capture => capture_package_present(&venv),
            Item::TorchXla => torch_xla_present(&root.join(TORCH_XLA_VENV))?,
            Item::Graphviz | Item::Chromium | Item::Engines => {
                missing_debian_packages(self.debian_programs()).is_empty()
            }
            Item::Mdbook => docs::find_mdbook().is_some(),
        })
    }

    /// Installs it unless it is there, saying what and why first. The Debian packages are
    /// never an error: without root or apt it says what to install and what will not work.
    fn ensure(self, root: &Path) -> Result<()> {
        let venv = root.join(".venv");
        match self {
            Item::Venv => {
                if !venv.join("bin/python").exists() {
                    create_venv(&venv, self)?;
                }
            }
            Item::Torch => {
                let torch = match installed_torch(&venv)? {
                    Some(torch) => torch,
                    None => {
                        pip_install_torch(&venv.join("bin/python"), self)?;
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
            }
            Item::Python(p) => ensure_python_package(&venv, p, self)?,
            Item::Capture => ensure_capture_package(root, &venv, self)?,
            Item::TorchXla => ensure_torch_xla(root, self)?,
            Item::Graphviz => ensure_debian_packages(
                self,
                "graphbug draw and report.html cannot lay out pictures (they say so in the page), and the tests of pictures fail",
            ),
            Item::Chromium => {
                ensure_debian_packages(self, "the browser tests and the draw benchmark fail")
            }
            Item::Engines => ensure_debian_packages(
                self,
                "the Slurm and ssh launcher tests will be skipped",
            ),
            Item::Mdbook => {
                docs::ensure_mdbook()?;
            }
        }
        Ok(())
    }
}

/// The line that announces an install of `item`, before it starts.
fn announce(item: Item, detail: &str) {
    eprintln!("setup: installing {}{detail}: {}", item.label(), item.why());
}

/// Installs what `job` needs (see [`plan`]): first one line naming what is missing, then
/// each install, announced with why before it starts. Idempotent.
pub fn ensure(root: &Path, job: Job) -> Result<()> {
    let items = plan(job);
    let mut missing = Vec::new();
    for &item in &items {
        if !item.present(root)? {
            missing.push(item.label());
        }
    }
    if !missing.is_empty() {
        eprintln!(
            "setup: `{}` needs what is not installed yet: {}",
            job.command(),
            missing.join(", ")
        );
    }
    for &item in &items {
        item.ensure(root)?;
    }
    if items.contains(&Item::Torch) {
        println!("setup: libtorch {TORCH_VERSION} ready at .libtorch");
    }
    Ok(())
}

/// The Debian packages of `programs` (program, package) whose program is not installed.
fn missing_debian_packages(programs: &[(&str, &'static str)]) -> Vec<&'static str> {
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
}

/// Installs the Debian packages of `item` that are missing, as root with apt-get
/// (refreshing stale package lists once); otherwise says `without` and the command to run.
fn ensure_debian_packages(item: Item, without: &str) {
    let programs = item.debian_programs();
    let packages = missing_debian_packages(programs);
    if packages.is_empty() {
        return;
    }
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    if !root || find_in_path("apt-get").is_none() {
        eprintln!(
            "setup: {} not installed ({}): {without}; run `apt-get install {}` as root",
            item.label(),
            packages.join(", "),
            packages.join(" ")
        );
        return;
    }
    announce(
        item,
        &format!(" (apt-get install {}, as root)", packages.join(" ")),
    );
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
    let still = missing_debian_packages(programs);
    if !installed || !still.is_empty() {
        eprintln!("setup: could not install {}; {without}", still.join(", "));
    }
}

/// Whether `python/` (graphbug_capture) is installed in the venv.
fn capture_package_present(venv: &Path) -> bool {
    let marker = format!("graphbug_capture-{CAPTURE_VERSION}.dist-info");
    fs::read_dir(venv.join("lib")).is_ok_and(|entries| {
        entries
            .flatten()
            .any(|e| e.path().join("site-packages").join(&marker).is_dir())
    })
}

/// Installs `python/` (the graphbug_capture torch.compile backends) into the venv, editable,
/// so the tests and `torch.compile(backend="graphbug_capture")` use the working tree.
fn ensure_capture_package(root: &Path, venv: &Path, item: Item) -> Result<()> {
    if capture_package_present(venv) {
        return Ok(());
    }
    announce(item, &format!(" into {}, editable", venv.display()));
    let python = venv.join("bin/python");
    let package = root.join("python");
    let status = pip_install(
        &python,
        [
            OsStr::new("--no-deps"),
            OsStr::new("-e"),
            package.as_os_str(),
        ],
    )?;
    ensure!(
        status.success(),
        "`pip install -e python/` failed ({status}); pip fetches setuptools to build it, so \
         the package registry must be reachable"
    );
    Ok(())
}

/// Runs a venv's pip, quietly: `PYTHON -m pip install ARGS`.
fn pip_install<I>(python: &Path, args: I) -> Result<std::process::ExitStatus>
where
    I: IntoIterator,
    I::Item: AsRef<OsStr>,
{
    Command::new(python)
        .args([
            "-m",
            "pip",
            "install",
            "--disable-pip-version-check",
            "--quiet",
        ])
        .args(args)
        .status()
        .with_context(|| format!("cannot run {}", python.display()))
}

/// Whether `venv` holds PyTorch/XLA, the torch it pins and `python/`.
fn torch_xla_present(venv: &Path) -> Result<bool> {
    Ok(venv.join("bin/python").exists()
        && python_package_present(venv, "torch_xla", Some(TORCH_XLA_VERSION))?
        && python_package_present(venv, "torch", Some(TORCH_XLA_TORCH_VERSION))?
        && python_package_present(venv, "numpy", None)?
        && capture_package_present(venv))
}

/// Makes [`TORCH_XLA_VENV`]: a venv, PyTorch/XLA with its torch and numpy (one pip call, so
/// that pip resolves them together), and `python/` editable.
fn ensure_torch_xla(root: &Path, item: Item) -> Result<()> {
    let venv = root.join(TORCH_XLA_VENV);
    if torch_xla_present(&venv)? {
        return Ok(());
    }
    if !venv.join("bin/python").exists() {
        create_venv(&venv, item)?;
    }
    let specs = [
        format!("torch_xla=={TORCH_XLA_VERSION}"),
        format!("torch=={TORCH_XLA_TORCH_VERSION}"),
        "numpy".to_string(),
    ];
    announce(item, &format!(": pip install {}", specs.join(" ")));
    let python = venv.join("bin/python");
    let status = pip_install(&python, &specs)?;
    ensure!(
        status.success(),
        "`{} -m pip install {}` failed ({status}); the package registry must be reachable",
        python.display(),
        specs.join(" ")
    );
    ensure_capture_package(root, &venv, Item::Capture)?;
    ensure!(
        torch_xla_present(&venv)?,
        "pip finished but {} is not complete",
        item.label()
    );
    Ok(())
}

/// Creates the virtualenv with `python3 -m venv`, explaining what is missing on failure.
fn create_venv(venv: &Path, item: Item) -> Result<()> {
    let python3 = find_in_path("python3").context(
        "python3 not found in PATH; install Python 3 (e.g. `apt-get install python3 python3-venv python3-pip`)",
    )?;
    announce(item, &format!(" at {}", venv.display()));
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
fn pip_install_torch(python: &Path, item: Item) -> Result<()> {
    announce(item, " into .venv");
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

/// Pip-installs `package` (at its version, if pinned) into the venv unless pip's record of
/// it (its `.dist-info`, of that version) is already there.
fn ensure_python_package(venv: &Path, package: &Package, item: Item) -> Result<()> {
    if python_package_present(venv, package.name, package.version)? {
        return Ok(());
    }
    let spec = item.label();
    announce(item, &format!(" into {}", venv.display()));
    let python = venv.join("bin/python");
    let status = pip_install(&python, [&spec])?;
    ensure!(
        status.success(),
        "`{} -m pip install {spec}` failed ({status}); the package registry must be reachable",
        python.display()
    );
    ensure!(
        python_package_present(venv, package.name, package.version)?,
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

    /// Every command's plan, with the command's name.
    fn every_job() -> Vec<Job> {
        vec![
            Job::Everything,
            Job::Repro,
            Job::Test,
            Job::Docs,
            Job::Conformance(Sources::ALL),
            Job::Conformance(Sources::default()),
            Job::Bench,
            Job::Fuzz,
            Job::GpuBundle,
            Job::AtenGpuBundle,
        ]
    }

    #[test]
    fn the_main_job_installs_libtorch_and_graphviz_and_nothing_of_the_tests() {
        let main = plan(Job::Repro);
        assert_eq!(main, vec![Item::Venv, Item::Torch, Item::Graphviz]);
        let tests_only = [
            Item::Engines,
            Item::Chromium,
            Item::Mdbook,
            Item::Capture,
            Item::TorchXla,
        ];
        for item in tests_only {
            assert!(!main.contains(&item), "{item:?} in {main:?}");
        }
        assert!(
            !main.iter().any(|i| matches!(i, Item::Python(_))),
            "the main job runs no Python but torch: {main:?}"
        );
        // The check can fail: the full set-up has each of them.
        let all = plan(Job::Everything);
        for item in tests_only {
            assert!(all.contains(&item), "{item:?} not in {all:?}");
        }
    }

    #[test]
    fn setup_and_test_install_everything_and_every_other_plan_is_a_part_of_it() {
        let all = plan(Job::Everything);
        assert_eq!(plan(Job::Test), all);
        assert_eq!(all.len(), 1 + 1 + PYTHON_PACKAGES.len() + 6, "{all:?}");
        for job in every_job() {
            let items = plan(job);
            assert_eq!(items.first(), Some(&Item::Venv), "{job:?}");
            for (i, item) in items.iter().enumerate() {
                assert!(all.contains(item), "{job:?}: {item:?}");
                assert!(!items[..i].contains(item), "{job:?}: {item:?} twice");
            }
            // Labels and reasons are for people: each says something.
            for item in items {
                assert!(
                    !item.label().is_empty() && item.why().len() > 20,
                    "{item:?}"
                );
            }
        }
    }

    #[test]
    fn each_command_gets_what_it_runs() {
        use Item::Python;
        let has = |job, item| plan(job).contains(&item);
        // The conformance suite's sources pick their packages.
        let xla = Job::Conformance(Sources {
            xla: true,
            ..Sources::default()
        });
        assert!(has(xla, Python(&JAX)) && has(xla, Python(&XLA_CPU_PJRT)));
        assert!(!has(xla, Python(&TORCHVISION)) && !has(xla, Item::Capture));
        let opinfo = Job::Conformance(Sources {
            opinfo: true,
            ..Sources::default()
        });
        assert!(has(opinfo, Python(&EXPECTTEST)) && !has(opinfo, Python(&JAX)));
        let capture = Job::Conformance(Sources {
            capture: true,
            ..Sources::default()
        });
        assert!(has(capture, Item::Capture) && has(capture, Python(&TORCHVISION)));
        let torch_xla = Job::Conformance(Sources {
            torch_xla: true,
            xla: true,
            ..Sources::default()
        });
        assert!(has(torch_xla, Item::TorchXla) && has(torch_xla, Python(&JAX)));
        assert!(!has(xla, Item::TorchXla));
        // Nothing of the tests' machinery in the conformance suite or the GPU bundle.
        for job in [Job::Conformance(Sources::ALL), Job::GpuBundle, Job::Fuzz] {
            for item in [Item::Engines, Item::Chromium, Item::Mdbook] {
                assert!(!has(job, item), "{job:?}: {item:?}");
            }
        }
        // The bundle is libtorch-free; the benchmarks start Slurm and Chromium.
        assert!(!has(Job::GpuBundle, Item::Torch));
        assert!(has(Job::GpuBundle, Python(&XLA_CPU_PJRT)));
        assert!(has(Job::Bench, Item::Engines) && has(Job::Bench, Item::Chromium));
        assert!(has(Job::Bench, Python(&TORCHVISION)) && has(Job::Bench, Python(&JAX)));
        assert!(has(Job::Docs, Item::Mdbook) && !has(Job::Docs, Item::Engines));
    }

    #[test]
    fn presence_is_read_from_the_venv() {
        let dir = scratch("present");
        assert!(!Item::Venv.present(&dir).unwrap());
        assert!(!Item::Torch.present(&dir).unwrap());
        assert!(!Item::Capture.present(&dir).unwrap());
        let venv = dir.join(".venv");
        fs::create_dir_all(venv.join("bin")).unwrap();
        fs::write(venv.join("bin/python"), b"").unwrap();
        fake_torch(&venv, "__version__ = '2.13.0'");
        let site = venv.join("lib/python3.11/site-packages");
        fs::create_dir_all(site.join("graphbug_capture-0.1.0.dist-info")).unwrap();
        fs::create_dir_all(site.join("jax-0.10.2.dist-info")).unwrap();
        assert!(Item::Venv.present(&dir).unwrap());
        assert!(Item::Torch.present(&dir).unwrap());
        assert!(Item::Capture.present(&dir).unwrap());
        assert!(Item::Python(&JAX).present(&dir).unwrap());
        assert!(!Item::Python(&JAXLIB).present(&dir).unwrap());
        fs::remove_dir_all(&dir).unwrap();
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
}
