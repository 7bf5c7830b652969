//! Benchmark: gpt4's forward graph (259 nodes) run by our interpreter (the `eager`
//! backend) against PyTorch running the same graph as a torch.fx.GraphModule, both on one
//! CPU thread, in interleaved rounds (PyTorch serves rounds from a process kept alive):
//! the median ratio and its spread. Target: at most 0.5x PyTorch's time.
//!
//! Also measured: the interpreter's per-node overhead over direct libtorch calls, from a
//! chain of 2,000 scalar adds run by the interpreter and by tch's unboxed `add` directly;
//! and what a dynamic-shape graph costs to run (bind its symbols from the inputs, make it
//! static, compile, run) against the same graph with static shapes (compile, run): target
//! at most 1.10x.

use std::collections::HashMap;
use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use graphbug_aten::dynamic::specialize_with_inputs;
use graphbug_aten::io::{order_tensors, read_tensors, write_tensors};
use graphbug_aten::Interpreter;
use graphbug_ir::bench::{median_time, Ratio, Targets};
use graphbug_ir::{parse_graph, Device, Dtype, GraphBuilder, OpName, TensorMeta};
use tch::{Kind, Tensor};

const TARGET_RATIO: f64 = 0.5;
const CHAIN: usize = 2000;

/// Median wall time of `f` over `runs` runs, after a warm-up.
fn median(runs: usize, f: impl FnMut()) -> Duration {
    median_time(runs, runs / 10 + 2, f)
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../..")
}

/// PyTorch running the graph as a GraphModule on one thread, in a process kept alive to
/// time rounds on demand (`torch_graph.py --serve`).
struct PyTorchGraph {
    child: std::process::Child,
    input: std::process::ChildStdin,
    answers: std::io::Lines<std::io::BufReader<std::process::ChildStdout>>,
}

impl PyTorchGraph {
    /// Starts PyTorch on `graph` with `inputs` and waits until it has run it once.
    fn start(graph: &Path, inputs: &[Tensor]) -> Result<PyTorchGraph, String> {
        use std::io::BufRead;
        let python = root().join(".venv/bin/python");
        if !python.exists() {
            return Err("no .venv (run `cargo xtask setup`)".into());
        }
        let dir = std::env::temp_dir().join(format!("graphbug-bench-{}", std::process::id()));
        std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
        let file = dir.join("inputs.safetensors");
        let named: Vec<(String, Tensor)> = inputs
            .iter()
            .enumerate()
            .map(|(i, t)| (format!("arg{i}"), t.shallow_clone()))
            .collect();
        write_tensors(&file, &named).map_err(|e| e.to_string())?;
        let mut child = Command::new(python)
            .arg(root().join("crates/aten/aten/python/torch_graph.py"))
            .arg(graph)
            .arg("--inputs")
            .arg(&file)
            .args(["--threads", "1", "--serve"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .map_err(|e| e.to_string())?;
        let input = child.stdin.take().expect("piped");
        let mut answers = std::io::BufReader::new(child.stdout.take().expect("piped")).lines();
        let ready = answers.next();
        let _ = std::fs::remove_dir_all(&dir);
        match ready {
            Some(Ok(l)) if l == "ready" => Ok(PyTorchGraph {
                child,
                input,
                answers,
            }),
            other => Err(format!("PyTorch did not start: {other:?}")),
        }
    }

    /// PyTorch's median seconds per call over `calls` calls.
    fn seconds(&mut self, calls: usize) -> f64 {
        use std::io::Write;
        writeln!(self.input, "{calls}").expect("PyTorch takes its round");
        self.answers
            .next()
            .and_then(|l| l.ok())
            .and_then(|l| l.trim().parse().ok())
            .expect("PyTorch answers its round")
    }
}

impl Drop for PyTorchGraph {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Rounds of the side-by-side timings, and calls per side in each.
const ROUNDS: usize = 9;
const CALLS: usize = 40;

/// (interpreter, direct tch) seconds for a chain of CHAIN scalar adds.
fn per_node_overhead() -> (f64, f64) {
    let meta = TensorMeta::new(Dtype::Float32, vec![1]);
    let mut b = GraphBuilder::new("Chain");
    let x = b.input("x", meta.clone());
    let one = b.input("one", meta);
    let mut last = x;
    for _ in 0..CHAIN {
        last = b.call(OpName::aten("add", "Tensor"), [last.into(), one.into()]);
    }
    b.output([last.into()]);
    let graph = b.finish().expect("the chain graph is valid");
    let interp = Interpreter::new(&graph, &Device::cpu(), &HashMap::new()).expect("chain compiles");
    let x = Tensor::zeros([1], (Kind::Float, tch::Device::Cpu));
    let one = Tensor::ones([1], (Kind::Float, tch::Device::Cpu));
    let inputs = [x.shallow_clone(), one.shallow_clone()];
    let ours = median(30, || {
        let _ = black_box(interp.run(&inputs).unwrap());
    });
    let direct = median(30, || {
        let mut v = x.shallow_clone();
        for _ in 0..CHAIN {
            v = v.f_add(&one).unwrap();
        }
        let _ = black_box(v);
    });
    (ours.as_secs_f64(), direct.as_secs_f64())
}

fn main() {
    if let Some(filter) = std::env::args().skip(1).find(|a| !a.starts_with('-')) {
        if !"aten_eager".contains(&filter) {
            return;
        }
    }
    tch::set_num_threads(1);
    let dir = root().join("tests/fixtures/gpt4");
    let graph_file = dir.join("forward.py");
    let graph =
        parse_graph(&std::fs::read_to_string(&graph_file).expect("fixture")).expect("parses");
    let names: Vec<String> = (0..graph.placeholders().len())
        .map(|i| format!("arg{i}"))
        .collect();
    let inputs = order_tensors(
        read_tensors(&dir.join("inputs.npz")).expect("inputs"),
        &names,
        "inputs",
    )
    .expect("ordered inputs");
    let interp = Interpreter::new(&graph, &Device::cpu(), &HashMap::new()).expect("compiles");
    let ours = median(300, || {
        let _ = black_box(interp.run(&inputs).unwrap());
    })
    .as_secs_f64();
    let nodes = graph.num_call_function_nodes();
    println!("aten_eager: gpt4 forward.py ({nodes} nodes), 1 CPU thread");
    println!(
        "  graphbug eager   {:>8.3} ms per call ({:.2} us per node)",
        ours * 1e3,
        ours * 1e6 / nodes as f64
    );

    let (chain_ours, chain_direct) = per_node_overhead();
    println!(
        "  per-node overhead over direct libtorch calls: {:.2} us (chain of {CHAIN} adds: interpreter {:.3} ms, tch direct {:.3} ms)",
        (chain_ours - chain_direct) * 1e6 / CHAIN as f64,
        chain_ours * 1e3,
        chain_direct * 1e3
    );

    let dynamic_ratio = dynamic_overhead();

    let mut targets = Targets::new("aten_eager");
    match PyTorchGraph::start(&graph_file, &inputs) {
        Ok(mut py) => {
            let ratio = Ratio::measure(
                ROUNDS,
                || {
                    median(CALLS, || {
                        let _ = black_box(interp.run(&inputs).unwrap());
                    })
                    .as_secs_f64()
                },
                || py.seconds(CALLS),
            );
            println!(
                "  PyTorch GraphModule {:>6.3} ms per call; graphbug takes {ratio} of it (target <= {TARGET_RATIO}x)",
                py.seconds(CALLS) * 1e3
            );
            targets.ratio_at_most("gpt4 eager run, of PyTorch's", &ratio, TARGET_RATIO);
        }
        Err(e) => {
            println!("  PyTorch reference unavailable: {e}");
            targets.at_most(
                "gpt4 eager run, of PyTorch's (not measured)",
                f64::INFINITY,
                TARGET_RATIO,
                "x",
            );
        }
    }
    targets.ratio_at_most(
        "dynamic-shape run, of the static run",
        &dynamic_ratio,
        DYNAMIC_TARGET,
    );
    targets.finish();
}

/// A dynamic-shape run may cost at most this much more than the same graph's static run.
const DYNAMIC_TARGET: f64 = 1.10;

/// AOTAutograd's dynamic attention forward on PyTorch's inputs, as `graphbug run` takes it:
/// parse, bind the symbols and specialize, compile, run; against parse, compile, run of
/// the same graph with static shapes, in interleaved rounds. Prints and returns the ratio.
fn dynamic_overhead() -> Ratio {
    let dir = root().join("tests/fixtures/dynamic/attention");
    let dynamic_text = std::fs::read_to_string(dir.join("fw.py")).expect("fixture");
    let named = read_tensors(&dir.join("fw_inputs.safetensors")).expect("inputs");
    let copy = |named: &[(String, Tensor)]| -> Vec<(String, Tensor)> {
        named
            .iter()
            .map(|(k, t)| (k.clone(), t.shallow_clone()))
            .collect()
    };
    let mut fixed = parse_graph(&dynamic_text).expect("parses");
    let mut fixed_named = copy(&named);
    specialize_with_inputs(&mut fixed, Some(&mut fixed_named), &[]).expect("binds");
    let static_text = graphbug_ir::print_graph(&fixed);
    let cpu = Device::cpu();
    let load_and_run = |text: &str, dynamic: bool| {
        let mut graph = parse_graph(text).unwrap();
        let mut inputs = copy(if dynamic { &named } else { &fixed_named });
        if dynamic {
            specialize_with_inputs(&mut graph, Some(&mut inputs), &[]).unwrap();
        }
        let ordered = order_tensors(inputs, &graph.placeholder_names(), "inputs").unwrap();
        let interp = Interpreter::new(&graph, &cpu, &HashMap::new()).unwrap();
        black_box(interp.run(&ordered).unwrap());
    };
    let run_dynamic = || load_and_run(&dynamic_text, true);
    let run_static = || load_and_run(&static_text, false);
    let ratio = Ratio::measure(
        ROUNDS,
        || median(60, run_dynamic).as_secs_f64(),
        || median(60, run_static).as_secs_f64(),
    );
    println!(
        "  dynamic shapes: attention fw.py parsed, bound, specialized and run, against static parsed and run: {ratio} (target <= {DYNAMIC_TARGET}x)"
    );
    ratio
}
