//! `graphbug joint` and `graphbug partition`.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{anyhow, bail, Context, Result};
use clap::Args;
use graphbug::aten::memory::{measure_step_peak, ObservedAliases};
use graphbug::aten::meta::infer_meta;
use graphbug::aten::{LibtorchDerivatives, LibtorchSchemas};
use graphbug::autodiff::{functionalize, joint_graph_with};
use graphbug::ir::{print_graph, Graph};
use graphbug::partition::knapsack::KnapsackSolver;
use graphbug::partition::{model_peak, pareto_curve, MinCutOptions, MinCutProblem, OpClasses};

use graphbug::repro::training::{
    cut, infer_num_fwd_outputs, is_min_cut, needs_inference, step_values, with_metas, Cut,
};

use super::{load_graph, lost_in_libtorch, lower_graph, requires_grad, static_only, supervise};

/// Arguments of `graphbug joint`.
#[derive(Args)]
pub struct JointArgs {
    /// Forward graph file.
    file: PathBuf,
    /// Inputs that require grad: a comma-separated list of input indices or names
    /// (default: every floating input).
    #[arg(long)]
    requires_grad: Option<String>,
    #[command(flatten)]
    bound: super::args::Bound,
}

/// Arguments of `graphbug functionalize`.
#[derive(Args)]
pub struct FunctionalizeArgs {
    /// Graph file.
    file: PathBuf,
    #[command(flatten)]
    bound: super::args::Bound,
}

/// Arguments of `graphbug partition`.
#[derive(Args)]
pub struct PartitionArgs {
    /// Joint graph file (graphbug's or PyTorch's joint.py).
    file: PathBuf,
    /// How many of the joint's outputs are forward outputs (default: the outputs left
    /// after one gradient per `primals_*` input, AOTAutograd's joint layout).
    #[arg(long)]
    num_fwd_outputs: Option<usize>,
    /// `default` (functorch's default_partition) or `min-cut`
    /// (min_cut_rematerialization_partition).
    #[arg(long, default_value = "default")]
    partitioner: String,
    /// Min-cut: functorch's activation memory budget, a bound on the bytes saved for the
    /// backward (a proxy of the peak): 0 (save only the inputs) to 1 (the runtime-optimal
    /// cut). Cuts as functorch's `activation_memory_budget` does.
    #[arg(long)]
    saved_budget: Option<f64>,
    /// Min-cut: a bound on the step's modelled peak memory (the forward, then the
    /// backward, with every temporary, saved, recomputed and gradient value alive as long as
    /// it is read): bytes (`512MB`, `2GiB`, `1000000`) or a fraction between the least peak
    /// of any cut (0.0) and the runtime-optimal cut's (1.0). The cut with the least
    /// recomputation that fits is taken.
    #[arg(long, conflicts_with = "saved_budget")]
    memory_budget: Option<String>,
    /// Also run the partitioned step (the forward, then the backward, on random primals and
    /// tangents of ones) and measure its peak in the interpreter's tally of live storages,
    /// beside the modelled one.
    #[arg(long)]
    measure_peak: bool,
    /// With --measure-peak: the primals' values (.safetensors or .npz, keyed by the
    /// forward's placeholder names or arg0..argN); without it, seeded random values.
    #[arg(long, requires = "measure_peak")]
    inputs: Option<PathBuf>,
    /// With --measure-peak: the device the step runs on: cpu (default), cuda, cuda:N.
    #[arg(long, requires = "measure_peak", default_value = "cpu")]
    device: String,
    /// Min-cut: the knapsack solver of the memory budget (greedy, dp, exact).
    #[arg(long, default_value = "dp")]
    solver: KnapsackSolver,
    /// Min-cut: op classes, `inductor` (functorch's default) or `base`.
    #[arg(long, default_value = "inductor")]
    op_classes: String,
    /// Min-cut: print the memory/recompute curve over budgets 0 to 1 in STEPS steps.
    #[arg(long, num_args = 0..=1, default_missing_value = "10")]
    pareto: Option<usize>,
    /// Print JSON instead of the two graphs.
    #[arg(long)]
    json: bool,
    /// Value (size hint) of a size symbol of a dynamic-shape joint (`--bind s0=8`,
    /// repeatable): its saved bytes, and the sizes the min-cut weighs.
    #[arg(long = "bind", value_name = "SYMBOL=N", value_parser = graphbug::aten_dialect::parse_binding)]
    binds: Vec<(String, i64)>,
    #[command(flatten)]
    bound: super::args::Bound,
}

/// `graphbug functionalize`: print the graph without mutation. Its outputs are the new
/// values of the inputs it mutated (in input order), then the original outputs, as
/// AOTAutograd returns them; stderr names the mutated inputs.
pub fn functionalize_graph(args: &FunctionalizeArgs) -> Result<ExitCode> {
    let mut graph = load_graph(&args.file)?;
    static_only(&graph, "functionalize")?;
    lower_graph(&mut graph)?;
    // Schemas come from libtorch; meta inference runs kernels on stand-ins.
    if let Some(code) = supervise(&args.bound, |run, limit| {
        lost_in_libtorch("functionalizing the graph", run, limit)
    })? {
        return Ok(code);
    }
    let functional = functionalize(&graph, &LibtorchSchemas)?;
    let annotated = with_metas(functional.graph)?;
    print!("{}", print_graph(&annotated));
    let names = graph.placeholder_names();
    let mutated: Vec<&str> = functional
        .mutated_inputs
        .iter()
        .filter_map(|&k| names.get(k).map(String::as_str))
        .collect();
    eprintln!(
        "mutated inputs: {} ({})",
        mutated.len(),
        if mutated.is_empty() {
            "none".to_string()
        } else {
            mutated.join(", ")
        }
    );
    Ok(ExitCode::SUCCESS)
}

/// `graphbug joint`: functionalize, differentiate, print.
pub fn joint(args: &JointArgs) -> Result<ExitCode> {
    let mut graph = load_graph(&args.file)?;
    static_only(&graph, "joint")?;
    lower_graph(&mut graph)?;
    // Meta inference runs kernels on stand-ins: bounded, in a child.
    if let Some(code) = supervise(&args.bound, |run, limit| {
        lost_in_libtorch("building the joint graph", run, limit)
    })? {
        return Ok(code);
    }
    let graph = with_metas(graph)?;
    let rg = requires_grad(&graph, args.requires_grad.as_deref())?;
    let functional = functionalize(&graph, &LibtorchSchemas)?;
    let fg = with_metas(functional.graph)?;
    let joint = joint_graph_with(&fg, &rg, &LibtorchDerivatives::new())?;
    let annotated = infer_meta(&joint.graph).context("inferring the joint graph's shapes")?;
    print!("{}", print_graph(&annotated));
    eprintln!(
        "num_fwd_outputs = {} ({} mutated inputs)",
        joint.num_fwd_outputs,
        functional.mutated_inputs.len()
    );
    Ok(ExitCode::SUCCESS)
}

/// `graphbug partition`.
pub fn partition(args: &PartitionArgs) -> Result<ExitCode> {
    if args.measure_peak {
        // Before any libtorch work: a shape inference (a convolution's, on the meta device)
        // that asks libtorch about CUDA before libtorch_cuda is loaded leaves it saying there
        // is none for the rest of the process.
        let device: graphbug::ir::Device = args.device.parse().map_err(|e: String| anyhow!(e))?;
        graphbug::aten::device::ensure_device(&device)?;
    }
    let joint = load_graph(&args.file)?;
    if let Some(code) = supervise_inference(&joint, &args.bound)? {
        return Ok(code);
    }
    let joint = with_metas(joint)?;
    let num_fwd_outputs = match args.num_fwd_outputs {
        Some(n) => n,
        None => infer_num_fwd_outputs(&joint)?,
    };
    let min_cut = is_min_cut(&args.partitioner)?;
    if !min_cut
        && (args.memory_budget.is_some() || args.pareto.is_some() || args.saved_budget.is_some())
    {
        bail!("--memory-budget, --saved-budget and --pareto need --partitioner min-cut");
    }
    let options = MinCutOptions {
        op_classes: match args.op_classes.as_str() {
            "inductor" => OpClasses::Inductor,
            "base" => OpClasses::Base,
            other => bail!("unknown op classes `{other}` (known: inductor, base)"),
        },
        activation_memory_budget: args.saved_budget.unwrap_or(1.0),
        knapsack_solver: args.solver,
        hints: args.binds.iter().cloned().collect(),
        ..Default::default()
    };
    if let Some(steps) = args.pareto {
        return pareto(&joint, num_fwd_outputs, &options, steps, args.json);
    }
    let started = Instant::now();
    let Cut {
        partition: p,
        budget,
        peak_choice,
    } = cut(
        &joint,
        num_fwd_outputs,
        min_cut,
        args.saved_budget,
        args.memory_budget.as_deref(),
        &options,
    )?;
    let seconds = started.elapsed().as_secs_f64();
    let r = &p.report;
    let modelled = model_peak(&p.forward, &p.backward, num_fwd_outputs, &ObservedAliases);
    let measured = if args.measure_peak {
        static_only(&p.forward, "partition --measure-peak")?;
        let (primals, constants) =
            step_values(&p.forward, &joint, args.inputs.as_deref(), &args.device)?;
        let device: graphbug::ir::Device = args.device.parse().map_err(|e: String| anyhow!(e))?;
        Some(measure_step_peak(
            &p.forward,
            &p.backward,
            num_fwd_outputs,
            &primals,
            &constants,
            &device,
        )?)
    } else {
        None
    };
    if args.json {
        // The report is deterministic; the timing rides along only here.
        let mut json = serde_json::to_value(r)?;
        json["seconds"] = seconds.into();
        json["modelled_peak"] = serde_json::to_value(&modelled)?;
        if let Some(m) = &measured {
            json["measured_peak"] = serde_json::to_value(m)?;
        }
        if let Some((point, limit, frontier)) = &peak_choice {
            json["memory_budget"] = serde_json::json!({
                "limit_bytes": limit,
                "least_peak": frontier.first().map(|p| p.peak.peak),
                "runtime_optimal_peak": frontier.last().map(|p| p.peak.peak),
                "saved_budget": point.saved_budget,
                "family": point.family,
                "peak_search_moves": point.moves,
            });
        }
        if let Some(c) = budget.as_ref().filter(|_| args.saved_budget.is_some()) {
            json["saved_budget"] = serde_json::json!({
                "budget": args.saved_budget,
                "limit_bytes": c.limit_bytes,
                "inputs_bytes": c.inputs_bytes,
                "runtime_optimal_bytes": c.runtime_optimal_bytes,
                "stage": c.stage,
            });
        }
        println!("{json}");
        return Ok(ExitCode::SUCCESS);
    }
    print!("{}", print_graph(&p.forward));
    print!("{}", print_graph(&p.backward));
    let bytes = match &r.saved_bytes_expr {
        Some(expr) => format!("{expr} = {} bytes at the size hints", r.saved_bytes),
        None => format!("{} bytes", r.saved_bytes),
    };
    println!(
        "# saved {} values, {bytes}: {}; forward {} ops, backward {} ops",
        r.saved.len(),
        r.saved.join(", "),
        r.fw_ops,
        r.bw_ops
    );
    println!(
        "# recomputed in the backward: {} ({} FLOPs, about {:.3e} s on the nominal machine)",
        recomputed_text(&r.recomputed),
        r.recompute_flops,
        r.recompute_seconds
    );
    println!(
        "# modelled peak of the step: {} bytes (forward {}, backward {}; primals {}, saved {})",
        modelled.peak,
        modelled.forward_peak,
        modelled.backward_peak,
        modelled.resident,
        modelled.saved
    );
    if let Some(m) = &measured {
        println!(
            "# measured peak of the step: {} bytes (forward {}, backward {}){}",
            m.peak,
            m.forward_peak,
            m.backward_peak,
            if m.peak == modelled.peak {
                ", as modelled"
            } else {
                ", NOT as modelled"
            }
        );
    }
    if let Some((point, limit, frontier)) = &peak_choice {
        println!(
            "# memory budget: modelled peak {} bytes of at most {limit} (least of any cut {}, runtime-optimal cut {}); the cut of functorch's budget {:.3} ({}){}",
            point.peak.peak,
            frontier.first().map_or(0, |p| p.peak.peak),
            frontier.last().map_or(0, |p| p.peak.peak),
            point.saved_budget,
            point.family,
            match point.moves {
                0 => String::new(),
                m => format!(", then {m} moves of the peak search"),
            }
        );
    }
    if let (Some(c), Some(b)) = (&budget, args.saved_budget) {
        println!(
            "# saved budget {b}: saved {} bytes of at most {} (inputs {} bytes, runtime-optimal cut {} bytes), chosen by the {:?} step",
            c.saved_bytes, c.limit_bytes, c.inputs_bytes, c.runtime_optimal_bytes, c.stage
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// `recomputed` as `aten.relu x2, aten.view`, or `nothing`.
fn recomputed_text(recomputed: &std::collections::BTreeMap<String, usize>) -> String {
    if recomputed.is_empty() {
        return "nothing".into();
    }
    recomputed
        .iter()
        .map(|(op, &k)| {
            if k == 1 {
                op.clone()
            } else {
                format!("{op} x{k}")
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// When a joint lacks shapes, which libtorch infers: the command re-run in a bounded
/// child (its exit code), so a crash or hang in libtorch is reported, not suffered.
pub fn supervise_inference(joint: &Graph, bound: &super::args::Bound) -> Result<Option<ExitCode>> {
    if !needs_inference(joint) {
        return Ok(None);
    }
    supervise(bound, |run, limit| {
        lost_in_libtorch("inferring the joint graph's shapes", run, limit)
    })
}

/// `graphbug partition --pareto`: saved bytes against recomputation over budgets 0..=1.
fn pareto(
    joint: &Graph,
    num_fwd_outputs: usize,
    options: &MinCutOptions,
    steps: usize,
    json: bool,
) -> Result<ExitCode> {
    let problem = MinCutProblem::new(joint, num_fwd_outputs, options)?;
    let curve = pareto_curve(&problem, steps, Some(&ObservedAliases))?;
    if json {
        println!("{}", serde_json::to_string(&curve)?);
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "budget  saved bytes  modelled peak  recomputed ops  recompute FLOPs  est. seconds  step"
    );
    for p in &curve {
        match p.saved_bytes {
            Some(bytes) => println!(
                "{:>6.3}  {bytes:>11}  {:>13}  {:>14}  {:>15}  {:>12.3e}  {:?}",
                p.budget,
                p.peak_bytes.unwrap_or(0),
                p.recomputed_ops,
                p.recompute_flops,
                p.recompute_seconds,
                p.stage.expect("reachable points have a stage")
            ),
            None => println!(
                "{:>6.3}  unreachable (random or must-save values)",
                p.budget
            ),
        }
    }
    Ok(ExitCode::SUCCESS)
}
