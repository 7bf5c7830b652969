//! Benchmark: parallel minification against a slow backend. A 48-layer gpt4 forward graph
//! (2,987 nodes) whose middle gelu is a relu is minified through the CLI for the runtime
//! error a backend raises at relu (`relu_runtime_error_TESTING_ONLY`, whose error names no
//! node, so the search cannot start at a node the failure names), compiled by a backend
//! that takes 200 ms per query (`slow:200`), with one worker and with four. Both runs must end at the same graph after the same counted queries;
//! the four-worker run's wall time is measured against the one-worker run's in
//! interleaved rounds (target: a median of at most 0.35x), with the queries it ran that
//! the search did not need.
//!
//! Then the same search with two workers, locally and through `srun` on a single-node
//! Slurm cluster brought up for the run (`tests/common/engines.rs`): the srun run may be
//! slower than the local one by at most the launcher's start-up (`srun true`, the median of
//! three), so a cluster costs a search nothing but starting its jobs.

#[path = "../tests/common/engines.rs"]
mod engines;

use std::process::Command;
use std::time::{Duration, Instant};

use graphbug::ir::bench::{Ratio, Targets};
use graphbug::ir::models::{gpt_forward, GptConfig};

/// One minification with `jobs` workers (started through `launcher`, with `env`, if
/// given): (seconds, printed graph, JSON counts).
fn run(
    graph: &std::path::Path,
    jobs: usize,
    launcher: Option<(&str, (&str, &str))>,
) -> (f64, String, serde_json::Value) {
    let started = Instant::now();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_graphbug"));
    cmd.arg("minify")
        .arg(graph)
        .args([
            "--backend",
            "slow:200+relu_runtime_error_TESTING_ONLY",
            "--check",
            "runtime",
            "--json",
            "-j",
        ])
        .arg(jobs.to_string());
    if let Some((template, (k, v))) = launcher {
        cmd.args(["--worker-launcher", template]).env(k, v);
    }
    let out = cmd.output().expect("graphbug runs");
    let seconds = started.elapsed().as_secs_f64();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "-j {jobs} failed: {}\n{stdout}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json = stdout.lines().last().expect("a JSON line");
    let counts: serde_json::Value = serde_json::from_str(json).expect("JSON counts");
    let graph_text = stdout
        .lines()
        .take_while(|l| !l.starts_with("minified "))
        .collect::<Vec<_>>()
        .join("\n");
    (seconds, graph_text, counts)
}

fn main() {
    if let Some(filter) = std::env::args().skip(1).find(|a| !a.starts_with('-')) {
        if !"parallel_minify".contains(&filter) {
            return;
        }
    }
    // Gone with this process, even after kill -9 (the next graphbug run sweeps it).
    let dir = graphbug::repro::scratch::Scratch::new("parallel-minify-bench")
        .expect("a scratch directory");
    let file = dir.path().join("gpt48.py");
    let graph = gpt_forward(&GptConfig::gpt4_layers(48));
    // The middle gelu a relu: the one op the backend fails on.
    let text: String = graphbug::ir::print_graph(&graph)
        .lines()
        .map(|l| {
            let l = if l.trim_start().starts_with("gelu_24: ") {
                l.replace("aten.gelu.default", "aten.relu.default")
            } else {
                l.to_string()
            };
            l + "\n"
        })
        .collect();
    assert_eq!(text.matches("aten.relu.default").count(), 1);
    std::fs::write(&file, text).expect("graph written");

    let (_, g1, c1) = run(&file, 1, None);
    assert_eq!(c1["end_nodes"], 1);
    let mut speculative = serde_json::Value::Null;
    let ratio = Ratio::measure(
        ROUNDS,
        || {
            let (t4, g4, c4) = run(&file, 4, None);
            assert_eq!(g1, g4, "-j 4 ended at another graph than -j 1");
            assert_eq!(c1["queries"], c4["queries"], "-j 4 counted other queries");
            speculative = c4["speculative"].clone();
            t4
        },
        || run(&file, 1, None).0,
    );
    println!(
        "parallel minify, gpt48 ({} nodes), a relu's runtime error at gelu_24, 200 ms per query: -j 4 / -j 1 {ratio}, {} queries each; -j 4 ran {speculative} speculative queries not needed",
        c1["start_nodes"], c1["queries"]
    );
    let mut targets = Targets::new("parallel_minify");
    targets.ratio_at_most("wall time at -j 4 / -j 1", &ratio, 0.35);
    let beyond = match through_srun(&file, &g1, &c1) {
        Ok(figure) => figure,
        Err(e) => {
            println!("srun: not measured: {e}");
            f64::INFINITY
        }
    };
    // Gone before `finish` exits.
    drop(dir);
    targets.at_most(
        "-j 2 through srun, beyond local -j 2, of the launcher's start-up",
        beyond,
        1.0,
        "x",
    );
    targets.finish();
}

/// Local `-j 2` against `-j 2` through `srun` on a single-node Slurm cluster with two
/// CPUs, in interleaved rounds (local, srun, local, srun, ...): the median of how much
/// slower srun is, as a share of the launcher's start-up (the median time srun takes to
/// start a job step and hand it a worker's first line: its graph and inputs, which a
/// worker elsewhere takes on its input).
fn through_srun(
    file: &std::path::Path,
    graph: &str,
    counts: &serde_json::Value,
) -> Result<f64, String> {
    if let Some(why) = engines::missing_programs(&engines::Slurm::PROGRAMS) {
        return Err(why);
    }
    let slurm = engines::Slurm::start(2)?;
    let (k, v) = slurm.env();
    let bundle = bundle_size(graph_of(file)?);
    let mut startups = Vec::new();
    for _ in 0..ROUNDS {
        startups.push(start_through(&slurm, bundle)?);
    }
    let startup = median(&mut startups);
    let (mut local, mut srun, mut beyond) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        let (l, g_local, c_local) = run(file, 2, None);
        let (s, g_srun, c_srun) = run(
            file,
            2,
            Some(("srun -N1 -n1 --quiet {cmd}", (k, v.as_str()))),
        );
        for (g, c, what) in [(&g_local, &c_local, "local"), (&g_srun, &c_srun, "srun")] {
            if g != graph || c["queries"] != counts["queries"] {
                return Err(format!("-j 2 {what} ended elsewhere than -j 1"));
            }
        }
        slurm
            .wait_empty(Duration::from_secs(5))
            .map_err(|jobs| format!("jobs left after the run: {jobs:?}"))?;
        beyond.push(s - l);
        local.push(l);
        srun.push(s);
    }
    let beyond = Ratio::of(&mut beyond);
    println!(
        "parallel minify through srun (single-node Slurm, 2 CPUs), {ROUNDS} interleaved rounds: -j 2 local {:.2} s, through srun {:.2} s (medians); srun slower by {:.3} s (from {:.3} to {:.3} s); srun's start-up of a worker (a job step and its {:.1} MB first line) {startup:.3} s",
        median(&mut local),
        median(&mut srun),
        beyond.median,
        beyond.lo,
        beyond.hi,
        bundle as f64 / 1e6
    );
    Ok((beyond.median / startup).max(0.0))
}

/// Rounds of the srun comparison.
const ROUNDS: usize = 3;

/// The median of `values` (sorted in place).
fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// The graph in `file`.
fn graph_of(file: &std::path::Path) -> Result<graphbug::ir::Graph, String> {
    let text = std::fs::read_to_string(file).map_err(|e| e.to_string())?;
    graphbug::ir::parse_graph(&text).map_err(|e| e.to_string())
}

/// About the size of a launched worker's first line: the graph's text and its inputs'
/// bytes in base64.
fn bundle_size(graph: graphbug::ir::Graph) -> usize {
    let inputs: u64 = graph
        .placeholders()
        .iter()
        .filter_map(|&id| match &graph.node(id).meta {
            graphbug::ir::Meta::Tensor(t) => Some(t.nbytes()),
            _ => None,
        })
        .sum();
    graphbug::ir::print_graph(&graph).len() + (inputs as usize).div_ceil(3) * 4
}

/// How long srun takes to start a job step and hand it a line of `bytes` bytes.
fn start_through(slurm: &engines::Slurm, bytes: usize) -> Result<f64, String> {
    use std::io::Write;
    let line = vec![b'x'; bytes];
    let started = Instant::now();
    let mut child = slurm
        .client("srun")
        .args(["-N1", "-n1", "--quiet", "head", "-n1"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .spawn()
        .map_err(|e| format!("srun: {e}"))?;
    let mut input = child.stdin.take().expect("piped");
    input
        .write_all(&line)
        .and_then(|()| input.write_all(b"\n"))
        .map_err(|e| format!("writing to srun: {e}"))?;
    drop(input);
    let status = child.wait().map_err(|e| e.to_string())?;
    if !status.success() {
        return Err(format!("`srun head -n1` failed: {status}"));
    }
    Ok(started.elapsed().as_secs_f64())
}
