//! Benchmark: minify a 48-layer version of gpt4's forward graph (2,987 nodes, built with
//! GraphBuilder) with the predicate "contains aten.gelu.default", against functorch's
//! minifier on the same graph and predicate in the same run (when the venv has torch).
//! Target: under 0.7 s, 10x faster than functorch's 7.0 s in tests/fixtures/REFERENCE.md.

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use graphbug_ir::bench::Targets;
use graphbug_ir::models::{gpt_forward, GptConfig};
use graphbug_ir::print_graph;
use graphbug_minifier::{minify, Candidate, Checker, Contains, MinifyOptions, NoSink, Verdict};

const TARGET: Duration = Duration::from_millis(700);

/// The structural checker, timed, so graph handling can be told apart from checking.
struct Timed {
    inner: Contains,
    spent: Duration,
}

impl Checker for Timed {
    fn describe(&self) -> String {
        self.inner.describe()
    }
    fn check(&mut self, c: &Candidate) -> Verdict {
        let t = Instant::now();
        let v = self.inner.check(c);
        self.spent += t.elapsed();
        v
    }
}

fn functorch(graph_text: &str, ops: &str) -> Result<String, String> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../..");
    let python = root.join(".venv/bin/python");
    if !python.exists() {
        return Err("no .venv (run `cargo xtask setup`)".into());
    }
    let file =
        std::env::temp_dir().join(format!("graphbug-minify-bench-{}.py", std::process::id()));
    std::fs::write(&file, graph_text).map_err(|e| e.to_string())?;
    let out = Command::new(python)
        .arg(root.join("crates/generic/minifier/python/functorch_minify.py"))
        .arg(&file)
        .args(["--ops", ops])
        .output()
        .map_err(|e| e.to_string())?;
    let _ = std::fs::remove_file(&file);
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn main() {
    if let Some(filter) = std::env::args().skip(1).find(|a| !a.starts_with('-')) {
        if !"minifier".contains(&filter) {
            return;
        }
    }
    let graph = gpt_forward(&GptConfig::gpt4_layers(48));
    let ops = "aten.gelu.default";
    let mut best = None;
    for _ in 0..3 {
        let mut checker = Timed {
            inner: Contains::parse(ops).expect("valid op list"),
            spent: Duration::ZERO,
        };
        let t = Instant::now();
        let m =
            minify(&graph, &mut checker, &MinifyOptions::default(), &mut NoSink).expect("minifies");
        let total = t.elapsed();
        if best
            .as_ref()
            .is_none_or(|(b, _, _): &(Duration, _, _)| total < *b)
        {
            best = Some((total, checker.spent, m));
        }
    }
    let (total, checking, m) = best.expect("three runs");
    let per_query = (total - checking).as_secs_f64() / m.stats.queries as f64;
    println!(
        "minifier: 48-layer gpt4 forward ({} nodes), contains {ops}",
        graph.num_call_function_nodes()
    );
    println!(
        "  graphbug   {:>8.3} s, {} queries ({} cache hits), ends at {} node(s); {:.2} ms of graph handling per query",
        total.as_secs_f64(),
        m.stats.queries,
        m.stats.cache_hits,
        m.stats.end_nodes,
        per_query * 1e3
    );
    match functorch(&print_graph(&graph), ops) {
        Ok(json) => {
            let secs: f64 = json
                .split("\"seconds\": ")
                .nth(1)
                .and_then(|s| s.split(',').next())
                .and_then(|s| s.parse().ok())
                .unwrap_or(f64::NAN);
            println!(
                "  functorch  {secs:>8.3} s {json}; graphbug takes {:.4}x of it",
                total.as_secs_f64() / secs
            );
        }
        Err(e) => println!("  functorch reference unavailable: {e}"),
    }
    let mut targets = Targets::new("minifier");
    targets.at_most(
        "48-layer gpt4 minify",
        total.as_secs_f64() * 1e3,
        TARGET.as_secs_f64() * 1e3,
        " ms",
    );
    targets.finish();
}
