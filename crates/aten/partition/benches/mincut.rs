//! Benchmark: min-cut rematerialization partition of generated transformer joint graphs
//! (4, 12, 48 and 96 layers of gpt4's block, built with GraphBuilder and differentiated by
//! graphbug-autodiff), against functorch's `min_cut_rematerialization_partition` on the
//! same joint graphs in the same run (when the venv has torch).
//! Target: 48 layers in at most 54 ms, 100x faster than functorch's 5.4 s in
//! tests/fixtures/REFERENCE.md, growing close to linearly with the layer count.
//!
//! `cargo bench -p graphbug-partition --bench mincut [-- --no-functorch]`

use std::path::PathBuf;
use std::process::Command;
use std::time::Instant;

use graphbug_autodiff::Joint;
use graphbug_ir::bench::Targets;
use graphbug_ir::print_graph;
use graphbug_partition::{
    default_partition, min_cut_rematerialization_partition, MinCutOptions, Partition,
};

const LAYERS: [usize; 4] = [4, 12, 48, 96];
const TARGET_48_MS: f64 = 54.0;

/// The joint graph of an N-layer GPT; the parameters require grad, the token ids do not.
fn gpt_joint(layers: usize) -> Joint {
    graphbug_autodiff::gpt_joint(layers).expect("the GPT joint graph builds")
}

/// Best of `runs` in milliseconds, and the last result.
fn best_ms(runs: usize, f: impl Fn() -> Partition) -> (f64, Partition) {
    let mut out = f();
    let mut fastest = f64::INFINITY;
    for _ in 0..runs {
        let t = Instant::now();
        out = f();
        fastest = fastest.min(t.elapsed().as_secs_f64() * 1e3);
    }
    (fastest, out)
}

/// functorch's min-cut on the same joint: {"mincut": {"seconds", "saved_bytes", ...}}.
fn functorch(joint: &Joint, repeat: usize) -> Result<(f64, u64), String> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../..");
    let python = root.join(".venv/bin/python");
    if !python.exists() {
        return Err("no .venv (run `cargo xtask setup`)".into());
    }
    let file = std::env::temp_dir().join(format!(
        "graphbug-partition-bench-{}-{}.py",
        std::process::id(),
        joint.graph.nodes.len()
    ));
    std::fs::write(&file, print_graph(&joint.graph)).map_err(|e| e.to_string())?;
    let out = Command::new(python)
        .arg(root.join("crates/aten/partition/python/functorch_partition.py"))
        .arg(&file)
        .args(["--num-fwd-outputs", &joint.num_fwd_outputs.to_string()])
        .args(["--repeat", &repeat.to_string()])
        .output()
        .map_err(|e| e.to_string())?;
    let _ = std::fs::remove_file(&file);
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    let json: serde_json::Value =
        serde_json::from_slice(&out.stdout).map_err(|e| format!("functorch output: {e}"))?;
    let seconds = json["mincut"]["seconds"].as_f64().ok_or("no seconds")?;
    let bytes = json["mincut"]["saved_bytes"].as_u64().ok_or("no bytes")?;
    Ok((seconds, bytes))
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let Some(filter) = args.iter().find(|a| !a.starts_with('-')) {
        if !"mincut partition".contains(filter.as_str()) {
            return;
        }
    }
    let with_functorch = !args.iter().any(|a| a == "--no-functorch");
    println!("min-cut partition of GPT joint graphs (gpt4 blocks), best of 5");
    let mut ms_48 = f64::NAN;
    let mut first: Option<(usize, f64)> = None;
    for layers in LAYERS {
        let joint = gpt_joint(layers);
        let (graph, n) = (&joint.graph, joint.num_fwd_outputs);
        let (ms, p) = best_ms(5, || {
            min_cut_rematerialization_partition(graph, n, &MinCutOptions::default())
                .expect("min-cut partition")
        });
        let (default_ms, d) = best_ms(5, || {
            default_partition(graph, n).expect("default partition")
        });
        if layers == 48 {
            ms_48 = ms;
        }
        let (l0, ms0) = *first.get_or_insert((layers, ms));
        println!(
            "  {layers:>3} layers, joint {:>6} nodes: min-cut {ms:>7.2} ms ({:.3} ms/layer, {:.2}x the {l0}-layer time for {:.0}x the layers), saves {} B (default partition {default_ms:.2} ms, {} B)",
            graph.nodes.len(),
            ms / layers as f64,
            ms / ms0,
            layers as f64 / l0 as f64,
            p.report.saved_bytes,
            d.report.saved_bytes,
        );
        if with_functorch {
            // functorch takes seconds per run on the big graphs: fewer repeats there.
            let repeat = if layers >= 48 { 1 } else { 3 };
            match functorch(&joint, repeat) {
                Ok((secs, bytes)) => println!(
                    "       functorch min-cut {:>9.2} ms, saves {bytes} B; graphbug takes {:.4}x of it ({:.0}x faster)",
                    secs * 1e3,
                    ms / (secs * 1e3),
                    secs * 1e3 / ms
                ),
                Err(e) => println!("       functorch reference unavailable: {e}"),
            }
        }
    }
    println!(
        "  (tests/fixtures/REFERENCE.md: functorch takes 5.4 s on its 48-layer joint, 7,037 nodes)"
    );
    let mut targets = Targets::new("mincut");
    targets.at_most("48-layer min-cut", ms_48, TARGET_48_MS, " ms");
    targets.finish();
}
