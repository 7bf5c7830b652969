//! Benchmark: the XLA side, against XLA itself, in one run.
//!
//! - `fmt` of HLO text (parse + print) against XLA's own parser and printer on the same
//!   module (jaxlib's `hlo_module_from_text` + `to_string`), at about 300 and 30,000
//!   instructions (modules JAX lowers here): target no slower (ratio <= 1).
//! - `graphbug run` of every XLA fixture that runs on the CPU plugin against the plugin's own
//!   work for it: a process that loads the plugin, creates its client, compiles the same
//!   program and executes it on the same inputs: target at most 10% more (ratio <= 1.1).
//! - A query on IREE (`iree:llvm-cpu`: graphbug's compile and run of a candidate, as a
//!   checker makes them) against IREE's own tools doing the same work (`iree-compile` and
//!   `iree-run-module` on the same program, flags and inputs), over HLO fixtures converted
//!   once: target at most 10% more (ratio <= 1.1).
//! - The stripped libtorch-free release binary (`cargo xtask gpu-bundle` packs it): under
//!   30 MB.
//!
//! Ratios are medians of interleaved rounds (see `graphbug::ir::bench::Ratio`). Needs the
//! venv (JAX, the XLA CPU plugin): `cargo xtask setup`. `GRAPHBUG_XLA_BIN=PATH` measures that
//! binary instead of building the stripped one.
//!
//! `cargo bench --bench xla`

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::Instant;

use graphbug::files::HostTensor;
use graphbug::ir::bench::{median_time, Ratio, Targets};
use graphbug::pjrt::{Client, Format, Plugin};
use graphbug::xla::execute::pjrt_code;
use graphbug::xla::program::{Kind, Program};

/// The env var that makes this binary the reference run of one program (see [`reference`]).
const REFERENCE_VAR: &str = "GRAPHBUG_BENCH_PJRT_REFERENCE";

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn python() -> PathBuf {
    root().join(".venv/bin/python")
}

/// Lowers, with JAX, a stack of layers (matmul, tanh, softmax, residual) deep enough for
/// at least `n` instructions; the HLO text's path.
fn lowered_module(dir: &Path, n: usize) -> PathBuf {
    const SCRIPT: &str = r#"
import sys, jax, jax.numpy as jnp
n, path = int(sys.argv[1]), sys.argv[2]
x, w = jnp.ones((8, 16)), jnp.ones((16, 16))
def model(layers):
    def f(x, w):
        for i in range(layers):
            h = jnp.tanh(x @ w + i)
            x = x + jax.nn.softmax(h, axis=-1) * 0.5
        return x
    return f
def text(layers):
    return jax.jit(model(layers)).lower(x, w).as_text(dialect="hlo")
def count(t):
    return sum(1 for l in t.splitlines() if " = " in l and not l.startswith("HloModule"))
one, two = count(text(1)), count(text(2))
layers = max(1, -(-(n - one) // (two - one)) + 1)
with open(path, "w") as f:
    f.write(text(layers))
"#;
    let path = dir.join(format!("module_{n}.hlo"));
    let out = Command::new(python())
        .args(["-c", SCRIPT, &n.to_string()])
        .arg(&path)
        .output()
        .expect("the venv's python runs (cargo xtask setup makes it)");
    assert!(
        out.status.success(),
        "JAX could not lower the module: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    path
}

/// jaxlib's parser and printer in a Python process that times them on request.
struct Jaxlib {
    child: Child,
    input: ChildStdin,
    output: BufReader<ChildStdout>,
}

impl Jaxlib {
    fn start() -> Jaxlib {
        const SCRIPT: &str = r#"
import sys, time
from jaxlib import _hlo
for line in sys.stdin:
    path, reps = line.split()
    text = open(path).read()
    times = []
    for _ in range(int(reps)):
        t = time.perf_counter()
        _hlo.hlo_module_from_text(text).to_string()
        times.append(time.perf_counter() - t)
    times.sort()
    print(times[len(times) // 2], flush=True)
"#;
        let mut child = Command::new(python())
            .args(["-c", SCRIPT])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("the venv's python runs");
        let input = child.stdin.take().expect("piped");
        let output = BufReader::new(child.stdout.take().expect("piped"));
        Jaxlib {
            child,
            input,
            output,
        }
    }

    /// jaxlib's median seconds for parse + print of `path` over `reps` runs.
    fn time(&mut self, path: &Path, reps: usize) -> f64 {
        writeln!(self.input, "{} {reps}", path.display()).expect("jaxlib's process reads");
        let mut line = String::new();
        self.output
            .read_line(&mut line)
            .expect("jaxlib's process answers");
        line.trim()
            .parse()
            .unwrap_or_else(|_| panic!("jaxlib's process said `{line}`"))
    }
}

impl Drop for Jaxlib {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// graphbug's median seconds for `fmt` of `text` (read as HLO, printed) over `reps` runs.
fn graphbug_fmt(text: &str, reps: usize) -> f64 {
    median_time(reps, 0, || {
        let program = Program::read(text.as_bytes(), Kind::HloText).expect("HLO reads");
        std::hint::black_box(program.text().expect("prints"));
    })
    .as_secs_f64()
}

/// A fixture ready to run: its program, its inputs file, and what the reference compiles.
struct Prepared {
    name: String,
    program: PathBuf,
    inputs: PathBuf,
    code: PathBuf,
    format: Format,
}

/// The XLA fixtures with their inputs written apart and the code PJRT compiles.
fn prepare(dir: &Path) -> Vec<Prepared> {
    let mut out = Vec::new();
    for f in xtask::bundle::fixtures(&root()).expect("the XLA fixtures are listed") {
        let bytes = std::fs::read(&f.program).unwrap();
        let kind = graphbug::xla::program::sniff(&bytes, &f.program).expect("a known form");
        let program = Program::read(&bytes, kind).expect("the fixture reads");
        let (code, format) = pjrt_code(&program).expect("the fixture converts");
        let (inputs, _) = xtask::bundle::split_io(&f.io).unwrap();
        let input_file = dir.join(format!("{}.in.npz", f.name));
        graphbug::files::write(&input_file, &inputs).unwrap();
        let code_file = dir.join(format!("{}.code", f.name));
        std::fs::write(&code_file, code).unwrap();
        out.push(Prepared {
            name: f.name,
            program: f.program,
            inputs: input_file,
            code: code_file,
            format,
        });
    }
    out
}

/// The plugin's own work for one program, in this process: load, client, compile, execute.
fn reference(args: &[String]) {
    let [plugin, code, format, inputs] = args else {
        panic!("{REFERENCE_VAR}: plugin code format inputs, got {args:?}");
    };
    let plugin = Plugin::load(plugin).expect("the plugin loads");
    let client = Client::new(&plugin).expect("a client");
    let format = if format == Format::Hlo.as_str() {
        Format::Hlo
    } else {
        Format::Mlir
    };
    let executable = client
        .compile(&std::fs::read(code).unwrap(), format)
        .expect("compiles");
    let tensors: Vec<HostTensor> = graphbug::files::read(Path::new(inputs))
        .unwrap()
        .into_iter()
        .map(|(_, t)| t)
        .collect();
    std::hint::black_box(executable.execute(&tensors).expect("runs"));
}

/// Seconds for `command` to run to success.
fn wall(command: &mut Command) -> f64 {
    let t = Instant::now();
    let out = command.output().expect("starts");
    assert!(
        out.status.success(),
        "{command:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    t.elapsed().as_secs_f64()
}

fn main() {
    if std::env::var_os(REFERENCE_VAR).is_some() {
        let args: Vec<String> = std::env::args().skip(1).collect();
        reference(&args);
        return;
    }
    let root = root();
    let mut targets = Targets::new("xla");
    let binary = match std::env::var_os("GRAPHBUG_XLA_BIN") {
        Some(b) => PathBuf::from(b),
        None => xtask::bundle::build_xla_binary(&root).expect("the stripped binary builds"),
    };
    let size = std::fs::metadata(&binary).expect("the binary exists").len();
    targets.at_most(
        &format!("size of the libtorch-free graphbug ({})", binary.display()),
        size as f64 / 1e6,
        30.0,
        " MB",
    );

    let dir = tempfile::tempdir().unwrap();
    let mut jaxlib = Jaxlib::start();
    for (n, reps, rounds) in [(300, 40, 5), (30_000, 3, 3)] {
        let path = lowered_module(dir.path(), n);
        let text = std::fs::read_to_string(&path).unwrap();
        let count = Program::read(text.as_bytes(), Kind::HloText)
            .and_then(|p| p.check())
            .expect("the lowered module checks")
            .0;
        let ratio = Ratio::measure(
            rounds,
            || graphbug_fmt(&text, reps),
            || jaxlib.time(&path, reps),
        );
        targets.ratio_at_most(
            &format!("fmt of HLO text, {count} instructions: graphbug parse+print / jaxlib hlo_module_from_text+to_string"),
            &ratio,
            1.0,
        );
    }
    drop(jaxlib);

    let plugin =
        graphbug::pjrt::resolve("cpu", Some(&root)).expect("the CPU plugin (cargo xtask setup)");
    let fixtures: Vec<Prepared> = prepare(dir.path())
        .into_iter()
        .filter(|f| {
            // What the CPU plugin cannot compile (LAPACK custom calls) has no run to time.
            let ok = Command::new(&binary)
                .args(["run"])
                .arg(&f.program)
                .arg("--inputs")
                .arg(&f.inputs)
                .output()
                .is_ok_and(|o| o.status.success());
            if !ok {
                println!("xla: {} left out: it does not run on pjrt:cpu", f.name);
            }
            ok
        })
        .collect();
    let me = std::env::current_exe().unwrap();
    let ratio = Ratio::measure(
        3,
        || {
            fixtures
                .iter()
                .map(|f| {
                    wall(
                        Command::new(&binary)
                            .args(["run"])
                            .arg(&f.program)
                            .args(["--backend", "pjrt:cpu", "--inputs"])
                            .arg(&f.inputs),
                    )
                })
                .sum()
        },
        || {
            fixtures
                .iter()
                .map(|f| {
                    wall(
                        Command::new(&me)
                            .env(REFERENCE_VAR, "1")
                            .arg(&plugin)
                            .arg(&f.code)
                            .arg(f.format.as_str())
                            .arg(&f.inputs),
                    )
                })
                .sum()
        },
    );
    targets.ratio_at_most(
        &format!(
            "graphbug run of {} XLA fixtures / the plugin's own load+compile+execute of them",
            fixtures.len()
        ),
        &ratio,
        1.1,
    );
    iree_overhead(&mut targets, dir.path());
    targets.finish();
}

/// A query's work on IREE through graphbug against IREE's tools alone (see the notes).
fn iree_overhead(targets: &mut Targets, dir: &Path) {
    use graphbug::xla::execute::XlaBackend;
    use graphbug::xla::iree;
    let tools = iree::Tools::find().expect("IREE's tools (cargo xtask setup)");
    let backend = XlaBackend::parse("iree:llvm-cpu").unwrap();
    // Each program converted once (as graphbug does before a search), its inputs written as
    // the runtime reads them.
    let cases: Vec<(Program, Vec<HostTensor>, Vec<String>, PathBuf)> =
        ["transformer", "train_step", "convnet", "cumsum"]
            .iter()
            .map(|name| {
                let hlo = root().join(format!("tests/fixtures/xla/hlo/{name}.hlo"));
                let program = Program::read(&std::fs::read(&hlo).unwrap(), Kind::HloText).unwrap();
                let text = iree::importable(&program)
                    .unwrap()
                    .expect("HLO is converted")
                    .text;
                let io = root().join(format!("tests/fixtures/xla/hlo/{name}.io.npz"));
                let (args, _) = xtask::bundle::split_io(&io).unwrap();
                let inputs: Vec<HostTensor> = args.into_iter().map(|(_, t)| t).collect();
                let mlir = dir.join(format!("{name}.mlir"));
                std::fs::write(&mlir, &text).unwrap();
                // Each case's inputs in a folder of its own (their files are in0.bin...).
                let at = dir.join(format!("{name}.inputs"));
                std::fs::create_dir_all(&at).unwrap();
                let mut flags = iree::write_inputs(&at, &inputs).unwrap();
                let program = Program::read(text.as_bytes(), Kind::StableHloText).unwrap();
                let results = match &program {
                    Program::StableHlo(m) => m.main().expect("a main function").results.len(),
                    _ => unreachable!("read as StableHLO text"),
                };
                flags.push("--function=main".into());
                flags.extend((0..results).map(|k| {
                    format!(
                        "--output=@{}",
                        dir.join(format!("{name}.out{k}.bin")).display()
                    )
                }));
                (program, inputs, flags, mlir)
            })
            .collect();
    let ratio = Ratio::measure(
        3,
        || {
            let started = Instant::now();
            for (program, inputs, _, _) in &cases {
                let compiled = backend.compile(program).expect("IREE compiles the fixture");
                compiled.execute(inputs).expect("IREE runs the fixture");
            }
            started.elapsed().as_secs_f64()
        },
        || {
            cases
                .iter()
                .map(|(_, _, flags, mlir)| {
                    let vmfb = mlir.with_extension("vmfb");
                    let compile = wall(
                        Command::new(&tools.compile)
                            .arg(mlir)
                            .args(iree::compile_flags("llvm-cpu"))
                            .arg("-o")
                            .arg(&vmfb),
                    );
                    let run = wall(
                        Command::new(&tools.run_module)
                            .arg(format!("--module={}", vmfb.display()))
                            .args(flags),
                    );
                    compile + run
                })
                .sum()
        },
    );
    targets.ratio_at_most(
        &format!(
            "a query on iree:llvm-cpu through graphbug (compile and run of {} fixtures) / iree-compile and iree-run-module alone",
            cases.len()
        ),
        &ratio,
        1.1,
    );
}
