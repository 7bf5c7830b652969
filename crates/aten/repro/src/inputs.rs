//! An aten graph's inputs and constants, loaded from a file or made up from its
//! annotations, on the device it runs on (a dynamic-shape graph specialized and lowered to
//! its runnable form first), and the eager run that tells a graph libtorch survives.

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{anyhow, Context, Result};
use graphbug_aten::io::{order_tensors, random_tensors, read_tensors};
use graphbug_aten::memory::Available;
use graphbug_ir::{Graph, Meta, NodeKind, TensorMeta};
use graphbug_run::scratch::Scratch;
use tch::Tensor;

use crate::isolate::preflight_eager;

/// The device `spec` names (`cpu` without one: `cuda`, `cuda:N`), checked to be there.
pub fn device(spec: Option<&str>) -> Result<graphbug_ir::Device> {
    let device: graphbug_ir::Device = spec
        .unwrap_or("cpu")
        .parse()
        .map_err(|e: String| anyhow!(e))?;
    graphbug_aten::device::ensure_device(&device)?;
    Ok(device)
}

/// Makes a dynamic-shape graph static in place (see
/// [`graphbug_aten::dynamic::specialize_with_inputs`]); returns its `Sym` inputs' values.
pub fn specialize_graph(
    graph: &mut Graph,
    named: Option<&mut Vec<(String, Tensor)>>,
    binds: &[(String, i64)],
) -> Result<HashMap<String, i64>> {
    graphbug_aten::dynamic::specialize_with_inputs(graph, named, binds)
        .map(|bound| bound.sym_inputs)
        .map_err(|e| anyhow!(e))
}

/// Lowers a dynamo-level graph to aten in place (see
/// [`graphbug_aten::dynamic::lower_in_place`]); an aten graph is left alone.
pub fn lower_graph(graph: &mut Graph) -> Result<()> {
    graphbug_aten::dynamic::lower_in_place(graph).map_err(|e| anyhow!(e))
}

/// The constants (`self.<attr>`) `graph` reads: each attribute name and its annotation.
pub fn constant_metas(graph: &Graph) -> Vec<(String, Option<TensorMeta>)> {
    graph
        .nodes
        .iter()
        .filter_map(|n| match &n.kind {
            NodeKind::GetAttr { target } => Some((target.clone(), n.meta.tensor().cloned())),
            _ => None,
        })
        .collect()
}

/// The graph's inputs and constants, loaded or made up, on `device`.
///
/// A dynamic-shape graph is specialized in place first: its size symbols are bound from
/// `binds` (`--bind s0=8`) and the sizes of the tensors in the inputs file, and its `Sym`
/// inputs become 0-d int64 tensors holding their values (see
/// [`graphbug_ir::specialize`]).
pub fn graph_inputs(
    graph: &mut Graph,
    inputs_file: Option<&PathBuf>,
    binds: &[(String, i64)],
    seed: u64,
    device: tch::Device,
) -> Result<(Vec<Tensor>, HashMap<String, Tensor>)> {
    let mut named = inputs_file.map(|path| read_tensors(path)).transpose()?;
    let sym_inputs = specialize_graph(graph, named.as_mut(), binds)?;
    lower_graph(graph)?;
    let graph: &Graph = graph;
    let placeholders = graph.placeholder_names();
    let constant_metas = constant_metas(graph);
    let (inputs, constants) = match inputs_file {
        Some(path) => {
            let named = named.unwrap_or_default();
            let (consts, rest): (Vec<_>, Vec<_>) = named
                .into_iter()
                .partition(|(k, _)| constant_metas.iter().any(|(c, _)| c == k));
            let inputs = order_tensors(rest, &placeholders, "inputs")
                .with_context(|| format!("{}", path.display()))?;
            (inputs, consts.into_iter().collect::<HashMap<_, _>>())
        }
        None => {
            let mut metas = Vec::new();
            let available = Available::now();
            let mut total: Option<u64> = Some(0);
            for &id in &graph.placeholders() {
                let node = graph.node(id);
                let Meta::Tensor(m) = &node.meta else {
                    return Err(anyhow!(
                        "input `{}` has no shape annotation; give its value with --inputs",
                        node.name
                    ));
                };
                available
                    .ensure_fits(&format!("input `{}` ({m})", node.name), m.checked_nbytes())?;
                total = total
                    .zip(m.checked_nbytes())
                    .and_then(|(t, b)| t.checked_add(b));
                metas.push(m.clone());
            }
            available.ensure_fits(&format!("the graph's {} inputs", metas.len()), total)?;
            let mut const_names = Vec::new();
            for (target, meta) in &constant_metas {
                let m = meta.clone().ok_or_else(|| {
                    anyhow!(
                        "constant `self.{target}` has no shape annotation; give it with --inputs"
                    )
                })?;
                metas.push(m);
                const_names.push(target.clone());
            }
            let mut all = random_tensors(&metas, seed, tch::Device::Cpu)?;
            let consts = all.split_off(placeholders.len());
            for (t, name) in all.iter_mut().zip(&placeholders) {
                if let Some(value) = sym_inputs.get(name) {
                    *t = Tensor::from(*value);
                }
            }
            (all, const_names.into_iter().zip(consts).collect())
        }
    };
    let to = |t: Tensor| t.to_device(device);
    Ok((
        inputs.into_iter().map(to).collect(),
        constants.into_iter().map(|(k, t)| (k, to(t))).collect(),
    ))
}

/// How long the graph's eager run takes, measured in a worker process (files under
/// `scratch`): a graph that crashes libtorch even in eager mode ends in an error here,
/// before this process runs it.
pub fn eager_in_worker(
    graph: &Graph,
    inputs: &[Tensor],
    constants: &HashMap<String, Tensor>,
    device: &graphbug_ir::Device,
    scratch: &Scratch,
) -> Result<Duration> {
    Ok(preflight_eager(
        worker_exe()?,
        &scratch.path().join("preflight"),
        graph,
        inputs,
        constants,
        device,
    )?)
}

/// The graphbug binary, to start worker processes with.
pub fn worker_exe() -> Result<PathBuf> {
    graphbug_run::process::own_exe().context("locating the graphbug binary")
}

/// Refuses a dynamic-shape graph in a command that does not handle one yet, naming a
/// symbolic node and the way out.
pub fn static_only(graph: &Graph, command: &str) -> Result<()> {
    if let Some(node) = graph.nodes.iter().find(|n| n.meta.is_symbolic()) {
        anyhow::bail!(
            "`graphbug {command}` does not handle dynamic-shape graphs yet (`{}` is \"{}\"); \
             make it static first: `graphbug specialize FILE --bind s0=N` or `--inputs FILE`",
            node.name,
            node.meta.annotation().unwrap_or_default()
        );
    }
    Ok(())
}

/// Which inputs require grad, from a SPEC of indices or names (default: floating inputs).
pub fn requires_grad(graph: &Graph, spec: Option<&str>) -> Result<Vec<bool>> {
    let inputs: Vec<&graphbug_ir::Node> = graph
        .placeholders()
        .iter()
        .map(|&i| graph.node(i))
        .collect();
    let Some(spec) = spec else {
        return Ok(graphbug_autodiff::floating_inputs(graph));
    };
    let mut out = vec![false; inputs.len()];
    for item in spec.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let k = match item.parse::<usize>() {
            Ok(k) if k < inputs.len() => k,
            Ok(k) => anyhow::bail!(
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
