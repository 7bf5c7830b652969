//! Benchmark: the peak memory of a training step, modelled and measured, for functorch's
//! partitions and graphbug's at the same activation memory budgets, on the reference models
//! (PyTorch's own joint graphs of the mlp, cnn and gpt4).
//!
//! For each budget the table shows functorch's cut (its partitions exported by
//! `crates/partition/python/functorch_partition.py`, run by the project's PyTorch), the cut
//! of graphbug's `--memory-budget` (the same proxy, saved bytes) and the cut of graphbug's
//! `--memory-budget` (the modelled peak, as a fraction between the least and the
//! runtime-optimal peak): saved bytes, the modelled peak, and the peak measured by running
//! the step in the interpreter (its tally of live storages).
//!
//! Targets: the model equals the measurement on every cut (largest relative difference 0),
//! `--memory-budget` is monotonic (no lower budget ends at a higher measured peak), and its
//! least peak is no higher than the least of functorch's cuts at these budgets.
//!
//! `cargo bench --bench peak_memory`

use std::path::PathBuf;
use std::process::Command;

use graphbug::aten::memory::measure_step_peak;
use graphbug::aten::memory::ObservedAliases;
use graphbug::ir::bench::Targets;
use graphbug::ir::{parse_graph, print_graph, Device, Graph};
use graphbug::partition::{
    choose_by_peak, model_peak, peak_frontier, MinCutOptions, MinCutProblem, PeakBudget,
    PEAK_FRONTIER_STEPS,
};

const BUDGETS: [&str; 6] = ["0.05", "0.1", "0.15", "0.2", "0.35", "1.0"];

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The modelled and measured peaks of a forward/backward pair.
fn peaks(fw: &Graph, bw: &Graph, n: usize) -> (u64, u64) {
    let modelled = model_peak(fw, bw, n, &ObservedAliases).peak;
    let metas: Vec<_> = fw
        .placeholders()
        .iter()
        .map(|&id| fw.node(id).meta.tensor().expect("annotated primal").clone())
        .collect();
    let primals = graphbug::aten::io::random_tensors(&metas, 0, tch::Device::Cpu).expect("primals");
    let measured = measure_step_peak(fw, bw, n, &primals, &Device::cpu())
        .expect("the step runs")
        .peak;
    (modelled, measured)
}

/// functorch's partitions of `joint` at [`BUDGETS`], exported to `dir`.
fn functorch(joint: &Graph, n: usize, dir: &std::path::Path) -> Result<(), String> {
    let python = root().join(".venv/bin/python");
    if !python.exists() {
        return Err("no .venv (run `cargo xtask setup`)".into());
    }
    let file = dir.join("joint.py");
    std::fs::write(&file, print_graph(joint)).map_err(|e| e.to_string())?;
    let out = Command::new(python)
        .arg(root().join("crates/partition/python/functorch_partition.py"))
        .arg(&file)
        .args(["--num-fwd-outputs", &n.to_string(), "--repeat", "1"])
        .args(["--budgets", &BUDGETS.join(","), "--export"])
        .arg(dir)
        .output()
        .map_err(|e| e.to_string())?;
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    Ok(())
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let Some(filter) = args.iter().find(|a| !a.starts_with('-')) {
        if !"peak_memory".contains(filter.as_str()) {
            return;
        }
    }
    let mut worst_gap: f64 = 0.0;
    let mut not_monotonic = 0usize;
    // The least measured peak of functorch's cuts and of graphbug's peak budget, per model.
    let mut least_ratio: f64 = 0.0;
    println!("peak memory of a training step (bytes): saved / modelled peak / measured peak");
    for model in ["mlp", "cnn", "gpt4"] {
        let dir = root().join("tests/fixtures").join(model);
        let joint = parse_graph(&std::fs::read_to_string(dir.join("joint.py")).unwrap()).unwrap();
        let info: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("partition.json")).unwrap())
                .unwrap();
        let n = info["num_fwd_outputs"].as_u64().unwrap() as usize;
        let scratch = tempfile::tempdir().unwrap();
        let reference = functorch(&joint, n, scratch.path());
        if let Err(e) = &reference {
            println!("  {model}: functorch's partitions unavailable: {e}");
        }
        let problem = MinCutProblem::new(&joint, n, &MinCutOptions::default()).unwrap();
        let frontier = peak_frontier(&problem, &ObservedAliases, PEAK_FRONTIER_STEPS).unwrap();
        println!("  {model}:");
        println!(
            "    budget   functorch (saved/model/measured)     graphbug --saved-budget           graphbug --memory-budget"
        );
        let mut last_peak = 0u64;
        let (mut functorch_least, mut ours_least) = (u64::MAX, u64::MAX);
        for b in BUDGETS {
            let budget: f64 = b.parse().unwrap();
            let mut cells = Vec::new();
            // functorch's cut at this budget.
            if reference.is_ok() {
                let read = |p: &str| {
                    parse_graph(
                        &std::fs::read_to_string(scratch.path().join(format!("{p}_{b}.py")))
                            .unwrap(),
                    )
                    .unwrap()
                };
                let (fw, bw) = (read("fw"), read("bw"));
                let (m, meas) = peaks(&fw, &bw, n);
                worst_gap = worst_gap.max(m.abs_diff(meas) as f64 / meas as f64);
                let saved = model_peak(&fw, &bw, n, &ObservedAliases).saved;
                functorch_least = functorch_least.min(meas);
                cells.push(format!("{saved:>8} {m:>9} {meas:>9}"));
            } else {
                cells.push(format!("{:>28}", "-"));
            }
            // graphbug's cut of the same proxy.
            match problem.partition_with_budget(budget) {
                Ok((p, _)) => {
                    let (m, meas) = peaks(&p.forward, &p.backward, n);
                    worst_gap = worst_gap.max(m.abs_diff(meas) as f64 / meas as f64);
                    let saved = model_peak(&p.forward, &p.backward, n, &ObservedAliases).saved;
                    cells.push(format!("{saved:>8} {m:>9} {meas:>9}"));
                }
                Err(e) => cells.push(format!("{:>28}", format!("unreachable ({e})"))),
            }
            // graphbug's cut of the peak.
            let (k, _) = choose_by_peak(&frontier, PeakBudget::Fraction(budget)).unwrap();
            let (p, _) = problem
                .partition_with_budget(frontier[k].saved_budget)
                .unwrap();
            let (m, meas) = peaks(&p.forward, &p.backward, n);
            worst_gap = worst_gap.max(m.abs_diff(meas) as f64 / meas as f64);
            if meas < last_peak {
                not_monotonic += 1;
            }
            last_peak = meas;
            ours_least = ours_least.min(meas);
            cells.push(format!("{:>8} {m:>9} {meas:>9}", frontier[k].peak.saved));
            println!("    {b:>6}   {}", cells.join("     "));
        }
        if functorch_least != u64::MAX {
            let ratio = ours_least as f64 / functorch_least as f64;
            println!(
                "    least measured peak: graphbug --memory-budget {ours_least}, functorch {functorch_least} ({ratio:.3}x)"
            );
            least_ratio = least_ratio.max(ratio);
        }
    }
    let mut targets = Targets::new("peak_memory");
    targets.at_most(
        "modelled against measured peak, largest relative difference over every cut",
        worst_gap,
        0.0,
        "",
    );
    targets.at_most(
        "budgets at which --memory-budget measures a lower peak than the budget below",
        not_monotonic as f64,
        0.0,
        "",
    );
    targets.at_most(
        "least peak of --memory-budget over functorch's least peak at its budgets (worst model)",
        least_ratio,
        1.0,
        "x",
    );
    targets.finish();
}
