//! `graphbug joint` and `graphbug partition`.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{anyhow, bail, Context, Result};
use clap::Args;
use graphbug::aten::meta::infer_meta;
use graphbug::aten::LibtorchSchemas;
use graphbug::autodiff::{functionalize, joint_graph};
use graphbug::ir::{print_graph, Graph, Meta};
use graphbug::partition::default_partition;

use super::load_graph;

/// Arguments of `graphbug joint`.
#[derive(Args)]
pub struct JointArgs {
    /// Forward graph file.
    file: PathBuf,
    /// Inputs that require grad: a comma-separated list of input indices or names
    /// (default: every floating input).
    #[arg(long)]
    requires_grad: Option<String>,
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
    /// default (min-cut arrives with its own issue).
    #[arg(long, default_value = "default")]
    partitioner: String,
    /// Print one JSON object instead of the two graphs.
    #[arg(long)]
    json: bool,
}

/// `graph` with every node's meta filled in by libtorch when any is missing.
fn with_metas(graph: Graph) -> Result<Graph> {
    let missing = graph
        .nodes
        .iter()
        .any(|n| n.is_call_function() && matches!(n.meta, Meta::Unknown));
    if missing {
        Ok(infer_meta(&graph).context("inferring shapes on the meta device")?)
    } else {
        Ok(graph)
    }
}

/// Which inputs require grad, from a SPEC of indices or names (default: floating inputs).
fn requires_grad(graph: &Graph, spec: Option<&str>) -> Result<Vec<bool>> {
    let inputs: Vec<&graphbug::ir::Node> = graph
        .placeholders()
        .iter()
        .map(|&i| graph.node(i))
        .collect();
    let Some(spec) = spec else {
        return Ok(inputs
            .iter()
            .map(|n| n.meta.tensor().is_some_and(|t| t.dtype.is_floating_point()))
            .collect());
    };
    let mut out = vec![false; inputs.len()];
    for item in spec.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let k = match item.parse::<usize>() {
            Ok(k) if k < inputs.len() => k,
            Ok(k) => bail!(
                "--requires-grad: input {k} does not exist ({} inputs)",
                inputs.len()
            ),
            Err(_) => inputs
                .iter()
                .position(|n| n.name == item)
                .ok_or_else(|| anyhow!("--requires-grad: no input named `{item}`"))?,
        };
        out[k] = true;
    }
    Ok(out)
}

/// `graphbug joint`: functionalize, differentiate, print.
pub fn joint(args: &JointArgs) -> Result<ExitCode> {
    let graph = with_metas(load_graph(&args.file)?)?;
    let rg = requires_grad(&graph, args.requires_grad.as_deref())?;
    let functional = functionalize(&graph, &LibtorchSchemas)?;
    let fg = with_metas(functional.graph)?;
    let joint = joint_graph(&fg, &rg)?;
    let annotated = infer_meta(&joint.graph).context("inferring the joint graph's shapes")?;
    print!("{}", print_graph(&annotated));
    eprintln!(
        "num_fwd_outputs = {} ({} mutated inputs)",
        joint.num_fwd_outputs,
        functional.mutated_inputs.len()
    );
    Ok(ExitCode::SUCCESS)
}

/// Forward outputs of an AOTAutograd-style joint: it returns the forward outputs, then
/// one gradient (or None) per `primals_*` input.
fn infer_num_fwd_outputs(joint: &Graph) -> Result<usize> {
    let primals = joint
        .placeholders()
        .iter()
        .filter(|&&i| joint.node(i).name.starts_with("primals_"))
        .count();
    let outputs = joint.outputs().len();
    if primals == 0 || primals > outputs {
        bail!(
            "cannot tell forward outputs from gradients ({primals} `primals_*` inputs, {outputs} outputs): pass --num-fwd-outputs"
        );
    }
    Ok(outputs - primals)
}

/// `graphbug partition`.
pub fn partition(args: &PartitionArgs) -> Result<ExitCode> {
    let joint = with_metas(load_graph(&args.file)?)?;
    let num_fwd_outputs = match args.num_fwd_outputs {
        Some(n) => n,
        None => infer_num_fwd_outputs(&joint)?,
    };
    let started = Instant::now();
    let p = match args.partitioner.as_str() {
        "default" => default_partition(&joint, num_fwd_outputs)?,
        other => bail!("unknown partitioner `{other}` (known: default)"),
    };
    let seconds = started.elapsed().as_secs_f64();
    if args.json {
        // The report is deterministic; the timing rides along only here.
        let mut json = serde_json::to_value(&p.report)?;
        json["seconds"] = seconds.into();
        println!("{json}");
    } else {
        print!("{}", print_graph(&p.forward));
        print!("{}", print_graph(&p.backward));
        let r = &p.report;
        println!(
            "# saved {} values, {} bytes: {}; forward {} ops, backward {} ops",
            r.saved.len(),
            r.saved_bytes,
            r.saved.join(", "),
            r.fw_ops,
            r.bw_ops
        );
    }
    Ok(ExitCode::SUCCESS)
}
