//! The machine's memory (see `graphbug_run::memory`), and the interpreter's own tally of
//! what a graph's values hold.

use crate::error::{AtenError, Result};

pub use graphbug_run::memory::{available_bytes, human};

/// The memory available at one moment: many sizes are checked against one reading.
#[derive(Clone, Copy, Debug)]
pub struct Available(graphbug_run::memory::Available);

impl Available {
    /// What is available now.
    pub fn now() -> Available {
        Available(graphbug_run::memory::Available::now())
    }

    /// An error unless `bytes` (for `what`, e.g. "input `x` (f32[1000000000000])") fit
    /// in the memory available; `None` bytes means the size overflows 64 bits.
    pub fn ensure_fits(&self, what: &str, bytes: Option<u64>) -> Result<()> {
        self.0
            .ensure_fits(what, bytes)
            .map_err(AtenError::BadInputs)
    }
}

/// The interpreter's own tally of live memory: the bytes of the distinct storages its
/// values hold (views share their base's), step by step, and the most seen. On CPU, where
/// no caching allocator counts, this measures a training step's peak.
#[derive(Debug, Default)]
pub struct LiveBytes {
    /// Per storage: its bytes, its slack (see [`Self::slack`]) and its holders.
    held: std::collections::HashMap<usize, (u64, u64, u32)>,
    /// The slack of storages handed from one graph to the next ([`Self::hand_over`]).
    handed: std::collections::HashMap<usize, u64>,
    /// Bytes held now.
    pub bytes: u64,
    /// The most bytes held since the tally started (or [`Self::restart_peak`]).
    pub peak: u64,
    /// Of the bytes held now, those a kernel allocated beyond the result that first held
    /// its storage (`mse_loss` on CPU returns a 0-d view of its elementwise buffer;
    /// `_embedding_bag` allocates `offset2bag` one element long): memory a model of the
    /// results' sizes cannot see.
    pub slack: u64,
    /// [`Self::slack`] when [`Self::peak`] was reached.
    pub peak_slack: u64,
    /// The most bytes held less their slack: the peak of the results themselves, which is
    /// what a model of the results' sizes predicts (reached where slack is, perhaps, not).
    pub results_peak: u64,
}

impl LiveBytes {
    /// One more holder of `t`'s storage (an input: a storage it brings is whole, as it was
    /// handed over, with no slack).
    pub fn hold(&mut self, t: &tch::Tensor) {
        self.hold_with(t, false)
    }

    /// [`Self::hold`] for a node's result: a storage it brings is its kernel's allocation,
    /// and the bytes beyond the result are slack ([`Self::slack`]).
    pub fn hold_result(&mut self, t: &tch::Tensor) {
        self.hold_with(t, true)
    }

    fn hold_with(&mut self, t: &tch::Tensor, result: bool) {
        let key = crate::shim::storage_ptr(t);
        if key == 0 {
            return;
        }
        let handed = self.handed.remove(&key);
        let entry = self.held.entry(key).or_insert_with(|| {
            let bytes = crate::shim::storage_nbytes(t) as u64;
            let used = match t.f_kind() {
                Ok(k) if result => (t.numel() * k.elt_size_in_bytes()) as u64,
                _ => bytes,
            };
            (bytes, handed.unwrap_or(bytes.saturating_sub(used)), 0)
        });
        if entry.2 == 0 {
            self.bytes += entry.0;
            self.slack += entry.1;
            if self.bytes > self.peak {
                self.peak = self.bytes;
                self.peak_slack = self.slack;
            }
            self.results_peak = self.results_peak.max(self.bytes - self.slack);
        }
        entry.2 += 1;
    }

    /// One holder of `t`'s storage fewer; the storage goes with its last holder.
    pub fn release(&mut self, t: &tch::Tensor) {
        let key = crate::shim::storage_ptr(t);
        if let Some(entry) = self.held.get_mut(&key) {
            entry.2 -= 1;
            if entry.2 == 0 {
                self.bytes -= entry.0;
                self.slack -= entry.1;
                self.held.remove(&key);
            }
        }
    }

    /// [`Self::release`] of a storage the next graph takes as an input (a saved value): its
    /// slack, measured when its kernel made it, is kept for that input.
    pub fn hand_over(&mut self, t: &tch::Tensor) {
        let key = crate::shim::storage_ptr(t);
        if let Some(&(_, slack, _)) = self.held.get(&key) {
            self.handed.insert(key, slack);
        }
        self.release(t);
    }

    /// [`Self::hold`] for every tensor of a value.
    pub fn hold_value(&mut self, v: &crate::interp::RtValue) {
        v.for_each_tensor(&mut |t| self.hold(t));
    }

    /// [`Self::hold_result`] for every tensor of a node's value.
    pub fn hold_result_value(&mut self, v: &crate::interp::RtValue) {
        v.for_each_tensor(&mut |t| self.hold_result(t));
    }

    /// [`Self::release`] for every tensor of a value.
    pub fn release_value(&mut self, v: &crate::interp::RtValue) {
        v.for_each_tensor(&mut |t| self.release(t));
    }

    /// Starts a new peak from what is held now.
    pub fn restart_peak(&mut self) {
        self.peak = self.bytes;
        self.peak_slack = self.slack;
        self.results_peak = self.bytes - self.slack;
    }
}

/// The peaks of a training step in the interpreter's tally ([`LiveBytes`]), in bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct MeasuredPeak {
    /// The most held during the forward (the primals included).
    pub forward_peak: u64,
    /// The most held during the backward (the primals and saved values included).
    pub backward_peak: u64,
    /// The larger of the two.
    pub peak: u64,
    /// Of [`Self::peak`], the bytes kernels allocated beyond their results (see
    /// [`LiveBytes::slack`]).
    pub kernel_slack: u64,
    /// The peak of the results themselves, less what kernels allocated beyond them (see
    /// [`LiveBytes::results_peak`]), over the forward and the backward.
    pub results_peak: u64,
}

/// Runs a partition's `forward` on `primals`, drops its user outputs (the first
/// `num_fwd_outputs`), then runs `backward` on the saved values and tangents of ones, and
/// measures the peaks in the interpreter's tally; the primals are held throughout, as a
/// training step holds its parameters and inputs. (The tangents are made before the peak of
/// the backward is started, so they count in it.) `constants` are the tensors the graphs'
/// `self.<attr>` nodes read, by attribute name.
pub fn measure_step_peak(
    forward: &graphbug_ir::Graph,
    backward: &graphbug_ir::Graph,
    num_fwd_outputs: usize,
    primals: &[tch::Tensor],
    constants: &std::collections::HashMap<String, tch::Tensor>,
    device: &graphbug_ir::Device,
) -> Result<MeasuredPeak> {
    let mut tally = LiveBytes::default();
    for p in primals {
        tally.hold(p);
    }
    tally.restart_peak();
    let fw = crate::Interpreter::new(forward, device, constants)?;
    let mut outs = fw.run_tallied(primals, &mut tally)?;
    let (forward_peak, forward_slack, forward_results) =
        (tally.peak, tally.peak_slack, tally.results_peak);
    let saved = outs.split_off(num_fwd_outputs.min(outs.len()));
    let mut inputs: Vec<tch::Tensor> = Vec::new();
    let tangents = backward.placeholders().len().saturating_sub(saved.len());
    // Each tangent is laid out like the output it is the gradient of, as AOTAutograd
    // coerces tangents to their outputs' memory format: a backward may view it so.
    let mut next_output = 0;
    for (k, &id) in backward.placeholders().iter().enumerate() {
        match saved.get(k) {
            Some(Some(t)) => inputs.push(t.shallow_clone()),
            Some(None) => {
                return Err(AtenError::BadInputs(format!(
                    "saved value {k} (`{}`) is not a tensor",
                    backward.node(id).name
                )))
            }
            None => {
                let graphbug_ir::Meta::Tensor(m) = &backward.node(id).meta else {
                    return Err(AtenError::BadInputs(format!(
                        "tangent `{}` has no shape annotation",
                        backward.node(id).name
                    )));
                };
                let like = |o: &tch::Tensor| crate::dtype::meta_of(o).as_ref() == Some(m);
                // One tangent per output, or else the next output of its shape and dtype.
                let output = if tangents == outs.len() {
                    outs.get(k - saved.len()).and_then(Option::as_ref)
                } else {
                    let found = outs[next_output.min(outs.len())..]
                        .iter()
                        .position(|o| o.as_ref().is_some_and(like));
                    found.and_then(|i| {
                        next_output += i + 1;
                        outs[next_output - 1].as_ref()
                    })
                };
                let mut tangent = match output {
                    Some(o) if like(o) => o.empty_like(),
                    _ => crate::meta::empty(m, device)?,
                };
                inputs.push(tangent.fill_(1.0));
            }
        }
    }
    for o in outs.iter().flatten() {
        tally.release(o);
    }
    drop(outs);
    tally.restart_peak();
    // The backward takes the saved values over, and lets each go after its last use, as
    // autograd frees saved tensors.
    for t in saved.iter().flatten() {
        tally.hand_over(t);
    }
    let grads =
        crate::Interpreter::new(backward, device, constants)?.run_tallied(&inputs, &mut tally)?;
    drop(grads);
    let backward_peak = tally.peak;
    Ok(MeasuredPeak {
        forward_peak,
        backward_peak,
        peak: forward_peak.max(backward_peak),
        kernel_slack: if forward_peak >= backward_peak {
            forward_slack
        } else {
            tally.peak_slack
        },
        results_peak: forward_results.max(tally.results_peak),
    })
}

/// Aliasing as libtorch's kernels do it, for [`graphbug_partition::model_peak`]: the graph
/// runs on the meta device and each result's storage is compared with the earlier values'
/// (so `_unsafe_view` shares its input's storage, as it does, though its schema says it
/// does not; `reshape` of a non-contiguous tensor copies). A graph the meta device cannot
/// run falls back to the schemas' declarations. Where the graph's values are small enough,
/// one more run on the CPU shows the storages its kernels allocate beyond their results
/// (see [`allocated_on_cpu`]).
pub struct ObservedAliases;

impl graphbug_partition::Aliases for ObservedAliases {
    fn shares(&self, graph: &graphbug_ir::Graph) -> graphbug_partition::Shares {
        self.observe(graph).shares
    }

    fn observe(&self, graph: &graphbug_ir::Graph) -> graphbug_partition::Observation {
        match observed(graph) {
            Ok((shares, metas)) => graphbug_partition::Observation {
                allocated: allocated_on_cpu(graph, &metas),
                shares,
                metas: Some(metas),
            },
            Err(_) => graphbug_partition::Observation {
                shares: graphbug_partition::SchemaAliases(&crate::LibtorchSchemas).shares(graph),
                ..Default::default()
            },
        }
    }
}

/// The most bytes of a graph's values [`allocated_on_cpu`] holds at once (every value is
/// kept to the end of its run), unless [`CPU_OBSERVATION_ENV`] says otherwise.
pub const CPU_OBSERVATION_BYTES: u64 = 256 << 20;

/// Environment variable replacing [`CPU_OBSERVATION_BYTES`]: a byte count; `0` models the
/// results' own bytes only, as the meta device shows them.
pub const CPU_OBSERVATION_ENV: &str = "GRAPHBUG_CPU_OBSERVATION_BYTES";

/// [`CPU_OBSERVATION_BYTES`] or what [`CPU_OBSERVATION_ENV`] sets (a value that is no byte
/// count is said once on stderr, and the default taken).
fn cpu_observation_bytes() -> u64 {
    static LIMIT: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *LIMIT.get_or_init(|| match std::env::var(CPU_OBSERVATION_ENV) {
        Err(_) => CPU_OBSERVATION_BYTES,
        Ok(v) => v.trim().parse().unwrap_or_else(|_| {
            eprintln!(
                "warning: {CPU_OBSERVATION_ENV}=`{v}` is not a byte count; using {}",
                human(CPU_OBSERVATION_BYTES)
            );
            CPU_OBSERVATION_BYTES
        }),
    })
}

/// Per node and result, the bytes of the storage a CPU kernel allocated for it where that
/// is more than the result holds (`mse_loss` returns a 0-d view of its elementwise buffer,
/// `_embedding_bag` an empty `offset2bag` with a one-element storage): what no meta kernel
/// shows. From one run on zero-filled stand-ins of the inputs, every value kept to the end
/// (so no storage's address is reused), libtorch's CPU generator put back after it. Only
/// where a result's shape and dtype are those the meta run gave (`metas`): a size that
/// depends on the zeros says nothing. `None` when the values would take more than
/// [`CPU_OBSERVATION_BYTES`] (or what [`CPU_OBSERVATION_ENV`] sets) or a quarter of the
/// memory available, or the run fails (a kernel that rejects zeros): the results' own bytes
/// are then all the model counts.
pub fn allocated_on_cpu(
    graph: &graphbug_ir::Graph,
    metas: &[graphbug_ir::Meta],
) -> Option<Vec<Vec<Option<u64>>>> {
    use graphbug_ir::{Meta, NodeKind};
    let bytes = |m: &Meta| -> Option<u64> {
        match m {
            Meta::Tensor(t) => t.checked_nbytes(),
            Meta::Multi(items) => items
                .iter()
                .flatten()
                .try_fold(0u64, |a, t| a.checked_add(t.checked_nbytes()?)),
            _ => Some(0),
        }
    };
    let mut total = 0u64;
    for (node, meta) in graph.nodes.iter().zip(metas) {
        let m = match node.kind {
            NodeKind::Placeholder | NodeKind::GetAttr { .. } => &node.meta,
            _ => meta,
        };
        total = total.checked_add(bytes(m)?)?;
    }
    let limit = cpu_observation_bytes();
    let limit = available_bytes().map_or(limit, |a| (a / 4).min(limit));
    if total > limit || limit == 0 {
        return None;
    }
    let cpu = graphbug_ir::Device::cpu();
    let (inputs, constants) =
        crate::meta::annotated_inputs(graph, |m| Ok(crate::meta::empty(m, &cpu)?.f_zero_()?))
            .ok()?;
    let interp = crate::Interpreter::new(graph, &cpu, &constants).ok()?;
    // Random ops (dropout) run on the stand-ins: a later run draws what it would have.
    let _rng = crate::shim::CpuRngGuard::new().ok()?;
    let mut seen: std::collections::HashSet<usize> = inputs
        .iter()
        .chain(constants.values())
        .map(crate::shim::storage_ptr)
        .collect();
    let mut allocated = vec![Vec::new(); graph.nodes.len()];
    let mut kept: Vec<crate::RtValue> = Vec::with_capacity(graph.nodes.len());
    interp
        .run_observed(&inputs, &mut |i, value| {
            kept.push(value.share());
            let expected: Vec<Option<&graphbug_ir::TensorMeta>> = match &metas[i] {
                Meta::Tensor(m) => vec![Some(m)],
                Meta::Multi(items) => items.iter().map(Option::as_ref).collect(),
                _ => Vec::new(),
            };
            let tensors: Vec<Option<&tch::Tensor>> = match value {
                crate::RtValue::Tuple(vs) => vs.iter().map(crate::RtValue::as_tensor).collect(),
                crate::RtValue::List(ts) => ts.iter().map(Some).collect(),
                other => vec![other.as_tensor()],
            };
            allocated[i] = tensors
                .iter()
                .enumerate()
                .map(|(k, t)| {
                    let t = (*t)?;
                    let key = crate::shim::storage_ptr(t);
                    if key == 0 || !seen.insert(key) {
                        return None;
                    }
                    let meta = crate::dtype::meta_of(t)?;
                    if expected.get(k).copied().flatten() != Some(&meta) {
                        return None;
                    }
                    let storage = crate::shim::storage_nbytes(t) as u64;
                    (storage > meta.checked_nbytes()?).then_some(storage)
                })
                .collect();
            Ok(())
        })
        .ok()?;
    Some(allocated)
}

/// The shares of `graph`'s values and the metas of its nodes' results, from a run on the
/// meta device.
fn observed(
    graph: &graphbug_ir::Graph,
) -> Result<(graphbug_partition::Shares, Vec<graphbug_ir::Meta>)> {
    let (interp, inputs) = crate::meta::on_meta(graph)?;
    // Each storage's first holder: the node and result that made it.
    let mut first: std::collections::HashMap<usize, (graphbug_ir::NodeId, usize)> =
        std::collections::HashMap::new();
    let mut shares = vec![Vec::new(); graph.nodes.len()];
    let mut metas = vec![graphbug_ir::Meta::Unknown; graph.nodes.len()];
    // Every value is kept until the end, so no storage is freed and its address reused by a
    // later value (meta tensors hold no data: this costs nothing).
    let mut kept: Vec<crate::RtValue> = Vec::with_capacity(graph.nodes.len());
    interp.run_observed(&inputs, &mut |i, value| {
        kept.push(value.share());
        metas[i] = value.meta();
        shares[i] = crate::meta::storages_of(value)
            .into_iter()
            .enumerate()
            .map(|(k, key)| {
                if key == 0 {
                    return None;
                }
                match first.get(&key) {
                    Some(&(src, item)) if src.index() != i => Some((src, item)),
                    Some(_) => None,
                    None => {
                        first.insert(key, (graphbug_ir::NodeId(i as u32), k));
                        None
                    }
                }
            })
            .collect();
        Ok(())
    })?;
    // The meta device is not the device the graph runs on: its kernels may lay a result out
    // otherwise (the C++ meta kernel of CPU flash attention returns a contiguous output, the
    // CPU kernel a permuted one), and there a `view` no real tensor allows makes a fresh
    // storage instead of failing. A result the schema declares an alias of its input is one
    // on any device unless the op is a composite that may copy (`reshape`).
    let declared = graphbug_partition::Aliases::shares(
        &graphbug_partition::SchemaAliases(&crate::LibtorchSchemas),
        graph,
    );
    for (i, items) in shares.iter_mut().enumerate() {
        for (k, item) in items.iter_mut().enumerate() {
            if item.is_none() {
                *item = crate::meta::guaranteed_alias(graph, &declared, i, k);
            }
        }
    }
    Ok((shares, metas))
}
