//! The aten dialect's training step, as `graphbug functionalize`, `joint`, `partition` and
//! `draw --partition` take it: a joint's shapes inferred by libtorch where it lacks them,
//! its forward outputs told apart from its gradients, the cut functorch's partitioners (or
//! a memory budget) make, and the values a partitioned step is measured on.

use std::collections::HashMap;
use std::path::Path;

use anyhow::{anyhow, bail, Context, Result};
use graphbug_aten::io::{order_tensors, random_tensors, read_tensors};
use graphbug_aten::memory::ObservedAliases;
use graphbug_aten::meta::infer_meta;
use graphbug_ir::{Graph, Meta, TensorMeta};
use graphbug_partition::{
    choose_by_peak, default::effect_tokens, default_partition_with,
    min_cut_rematerialization_partition, peak_frontier, BudgetChoice, MinCutOptions, MinCutProblem,
    Partition, PeakBudget, PeakPoint, PEAK_FRONTIER_STEPS,
};
use tch::Tensor;

use crate::inputs::constant_metas;

/// Whether some call node lacks an annotation (so libtorch must infer it).
pub fn needs_inference(graph: &Graph) -> bool {
    graph
        .nodes
        .iter()
        .any(|n| n.is_call_function() && matches!(n.meta, Meta::Unknown))
}

/// `graph` with every node's meta filled in by libtorch when any is missing.
pub fn with_metas(graph: Graph) -> Result<Graph> {
    if needs_inference(&graph) {
        Ok(infer_meta(&graph).context("inferring shapes on the meta device")?)
    } else {
        Ok(graph)
    }
}

/// Forward outputs of an AOTAutograd-style joint: it returns the forward outputs, then
/// one gradient (or None) per `primals_*` input.
pub fn infer_num_fwd_outputs(joint: &Graph) -> Result<usize> {
    let primal_ids: Vec<_> = joint
        .placeholders()
        .into_iter()
        .filter(|&i| joint.node(i).name.starts_with("primals_"))
        .collect();
    // Effect tokens get no gradient.
    let primals = primal_ids.len() - effect_tokens(joint, &primal_ids);
    let outputs = joint.outputs().len();
    if primals == 0 || primals > outputs {
        bail!(
            "cannot tell forward outputs from gradients ({primals} `primals_*` inputs, {outputs} outputs): pass --num-fwd-outputs"
        );
    }
    Ok(outputs - primals)
}

/// Whether a partitioner's name is the min-cut one's (false: functorch's default).
pub fn is_min_cut(name: &str) -> Result<bool> {
    Ok(match name {
        "default" => false,
        "min-cut" | "mincut" | "min_cut" => true,
        other => bail!("unknown partitioner `{other}` (known: default, min-cut)"),
    })
}

/// The joint partitioned by the partitioner named `partitioner` (the runtime-optimal
/// min-cut, or the one fitting `memory_budget`), with the default options of `graphbug
/// partition`; shapes a joint lacks are inferred by libtorch.
pub fn partition_joint(
    joint: &Graph,
    partitioner: &str,
    memory_budget: Option<&str>,
) -> Result<Partition> {
    let min_cut = is_min_cut(partitioner)?;
    if memory_budget.is_some() && !min_cut {
        bail!("--memory-budget needs the min-cut partitioner");
    }
    let joint = with_metas(joint.clone())?;
    let num_fwd_outputs = infer_num_fwd_outputs(&joint)?;
    let options = MinCutOptions::default();
    Ok(cut(
        &joint,
        num_fwd_outputs,
        min_cut,
        None,
        memory_budget,
        &options,
    )?
    .partition)
}

/// The frontier point a `--memory-budget` chose, the peak bound it stood for, and the
/// frontier.
type PeakChoice = (PeakPoint, u64, Vec<PeakPoint>);

/// A partition of a joint and how its budget chose it.
pub struct Cut {
    /// The forward, the backward and their report.
    pub partition: Partition,
    /// With `--saved-budget`: the knapsack's choice.
    pub budget: Option<BudgetChoice>,
    /// With `--memory-budget`: the frontier's choice.
    pub peak_choice: Option<PeakChoice>,
}

/// The partition `graphbug partition` makes: functorch's default partition, or the min-cut
/// one (under a saved-bytes budget, or the least-recompute cut within a peak-memory
/// budget); `draw --partition` draws the same.
pub fn cut(
    joint: &Graph,
    num_fwd_outputs: usize,
    min_cut: bool,
    saved_budget: Option<f64>,
    memory_budget: Option<&str>,
    options: &MinCutOptions,
) -> Result<Cut> {
    let mut peak_choice = None;
    let (p, budget) = if !min_cut {
        let p = default_partition_with(joint, num_fwd_outputs, &|_| false, &options.hints)?;
        (p, None)
    } else if let Some(b) = saved_budget {
        let problem = MinCutProblem::new(joint, num_fwd_outputs, options)?;
        let (p, choice) = problem.partition_with_budget(b)?;
        (p, Some(choice))
    } else if let Some(text) = memory_budget {
        let b: PeakBudget = text
            .parse()
            .map_err(|e: String| anyhow!("--memory-budget: {e}"))?;
        let problem = MinCutProblem::new(joint, num_fwd_outputs, options)?;
        let frontier = peak_frontier(&problem, &ObservedAliases, PEAK_FRONTIER_STEPS)?;
        let (k, limit) = choose_by_peak(&frontier, b)?;
        let point = frontier[k].clone();
        let p = problem.partition(&point.saved)?;
        peak_choice = Some((point, limit, frontier));
        (p, None)
    } else {
        (
            min_cut_rematerialization_partition(joint, num_fwd_outputs, options)?,
            None,
        )
    };
    Ok(Cut {
        partition: p,
        budget,
        peak_choice,
    })
}

/// The values a partitioned step runs on, on `device`: its primals (from `inputs`, keyed
/// by the forward's placeholder names or arg0..argN, else seeded random values of their
/// annotations) and the constants (`self.<attr>`) `joint` reads (from `inputs` by
/// attribute name, else seeded random values).
pub fn step_values(
    forward: &Graph,
    joint: &Graph,
    inputs: Option<&Path>,
    device: &str,
) -> Result<(Vec<Tensor>, HashMap<String, Tensor>)> {
    let metas_of_primals: Vec<_> = forward
        .placeholders()
        .iter()
        .map(|&id| {
            forward.node(id).meta.tensor().cloned().with_context(|| {
                format!("primal `{}` has no shape annotation", forward.node(id).name)
            })
        })
        .collect::<Result<_>>()?;
    // The constants (`self.<attr>`) either graph reads: from the inputs file by
    // attribute name, or seeded random values of their annotations.
    let constant_metas = constant_metas(joint);
    let (primals, constants): (
        Vec<tch::Tensor>,
        std::collections::HashMap<String, tch::Tensor>,
    ) = match &inputs {
        Some(path) => {
            let (constants, rest): (Vec<_>, Vec<_>) = read_tensors(path)?
                .into_iter()
                .partition(|(k, _)| constant_metas.iter().any(|(c, _)| c == k));
            let primals = order_tensors(rest, &forward.placeholder_names(), "inputs")
                .with_context(|| format!("{}", path.display()))?;
            (primals, constants.into_iter().collect())
        }
        None => {
            let metas: Vec<TensorMeta> = constant_metas
                .iter()
                .map(|(target, m)| {
                    m.clone().with_context(|| {
                        format!("constant `self.{target}` has no shape annotation; give it with --inputs")
                    })
                })
                .collect::<Result<_>>()?;
            let constants = random_tensors(&metas, 1, tch::Device::Cpu)?;
            (
                random_tensors(&metas_of_primals, 0, tch::Device::Cpu)?,
                constant_metas
                    .iter()
                    .map(|(k, _)| k.clone())
                    .zip(constants)
                    .collect(),
            )
        }
    };
    let device = crate::inputs::device(Some(device))?;
    let on = graphbug_aten::dtype::tch_device(&device)?;
    let primals: Vec<_> = primals.iter().map(|t| t.to_device(on)).collect();
    let constants = constants
        .into_iter()
        .map(|(k, t)| (k, t.to_device(on)))
        .collect();
    Ok((primals, constants))
}
