//! Benchmark: parallel minification against a slow backend. A 48-layer gpt4 forward graph
//! (2,987 nodes) is minified through the CLI for a runtime fault pinned to its middle
//! gelu, compiled by a backend that takes 200 ms per query (`slow:200`), with one worker
//! and with four. Both runs must end at the same graph after the same counted queries;
//! the four-worker run's wall time is measured against the one-worker run's in the same
//! process (target: at most 0.35x), with the queries it ran that the search did not need.

use std::process::Command;
use std::time::Instant;

use graphbug::ir::bench::Targets;
use graphbug::ir::models::{gpt_forward, GptConfig};

/// One minification with `jobs` workers: (seconds, printed graph, JSON counts).
fn run(graph: &std::path::Path, jobs: usize) -> (f64, String, serde_json::Value) {
    let started = Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_graphbug"))
        .arg("minify")
        .arg(graph)
        .args([
            "--backend",
            "fault:runtime@node:gelu_24+slow:200",
            "--check",
            "runtime",
            "--json",
            "-j",
        ])
        .arg(jobs.to_string())
        .output()
        .expect("graphbug runs");
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
    std::fs::write(&file, graphbug::ir::print_graph(&graph)).expect("graph written");

    let (t1, g1, c1) = run(&file, 1);
    let (t4, g4, c4) = run(&file, 4);
    assert_eq!(g1, g4, "-j 4 ended at another graph than -j 1");
    assert_eq!(c1["queries"], c4["queries"], "-j 4 counted other queries");
    assert_eq!(c1["end_nodes"], 1);
    println!(
        "parallel minify, gpt48 ({} nodes), fault at gelu_24, 200 ms per query: -j 1 {t1:.2} s, -j 4 {t4:.2} s, {} queries each; -j 4 ran {} speculative queries not needed",
        c1["start_nodes"], c1["queries"], c4["speculative"]
    );
    let mut targets = Targets::new("parallel_minify");
    targets.at_most("wall time at -j 4 / -j 1", t4 / t1, 0.35, "x");
    targets.finish();
}
