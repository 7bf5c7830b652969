//! AOT pipelines: `aot_eager` and its variants, as PyTorch's `aot_autograd(fw_compiler=,
//! bw_compiler=, partition_fn=, decompositions=)` builds them. The graph is functionalized,
//! differentiated into a joint forward/backward graph, optionally decomposed, and
//! partitioned; inner compilers (any registered backend, eager by default) compile the
//! forward and backward graphs, each when first needed, so the real inputs of each are
//! known for repros taken after AOT.
//!
//! Names: `aot_eager` (min-cut rematerialization partition, as PyTorch's),
//! `aot_eager_default_partitioner` (functorch's default partition),
//! `aot_eager_decomp_partition` (inductor's decompositions, then min-cut), and
//! `aot_eager:fw=NAME,bw=NAME,recompute=OP|OP,partitioner=default|min-cut,budget=F,
//! decompose=...` for other inner compilers (a testing backend or a `fault:` spec in either
//! graph), a selective recompute policy, a memory budget or decompositions.

use crate::failure::FromAten;
use std::sync::Arc;

use graphbug_aten::accuracy::detect;
use graphbug_aten::dtype::meta_of;
use graphbug_aten::memory::ObservedAliases;
use graphbug_aten::meta::infer_meta;
use graphbug_aten::reference::fp64_reference;
use graphbug_aten::{Interpreter, LibtorchDerivatives, LibtorchSchemas};
use graphbug_autodiff::{
    decompose_with, functionalize, joint_graph_with, AutodiffError, DecompositionSet,
};
use graphbug_ir::{Graph, NodeId};
use graphbug_partition::{
    choose_by_peak, default_partition_with, min_cut_rematerialization_partition, peak_frontier,
    MinCutOptions, MinCutProblem, NodeClass, NodePolicy, OpClasses, Partition, PartitionError,
    PeakBudget, PEAK_FRONTIER_STEPS,
};
use tch::Tensor;

use crate::backend::{
    with_example_metas, AotPart, Backend, CompileContext, CompiledFn, ExampleInput, InnerEvent,
};
use crate::failure::{Failure, Stage, Symptom};
use crate::fault::{FaultSpec, OpPattern};
use crate::registry::{lookup, resolve, INJECT_FAULT_ENV};

/// Which partitioner an AOT pipeline uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AotPartitioner {
    /// functorch's `default_partition`: save every forward value the backward reads.
    Default,
    /// `min_cut_rematerialization_partition`: recompute cheap forward ops in the backward.
    MinCut,
}

/// How an AOT pipeline is put together.
#[derive(Clone, Debug, PartialEq)]
pub struct AotConfig {
    /// Inner compiler of the forward graph.
    pub fw: String,
    /// Inner compiler of the backward graph.
    pub bw: String,
    /// Forward ops to recompute in the backward instead of saving (selective
    /// activation checkpointing).
    pub recompute: Vec<OpPattern>,
    /// The partitioner.
    pub partitioner: AotPartitioner,
    /// The min-cut partitioner's activation memory budget (0..=1): functorch's bound on
    /// the bytes saved.
    pub memory_budget: f64,
    /// A bound on the step's modelled peak instead ([`graphbug_partition::peak`]).
    pub peak_budget: Option<PeakBudget>,
    /// Decompositions applied to the joint graph before partitioning, if any.
    pub decompositions: Option<DecompositionSet>,
    /// The min-cut partitioner's op classes.
    pub op_classes: OpClasses,
}

impl Default for AotConfig {
    /// `aot_eager`: eager inner compilers and the min-cut partitioner, as PyTorch's.
    fn default() -> Self {
        AotConfig {
            fw: "eager".into(),
            bw: "eager".into(),
            recompute: Vec::new(),
            partitioner: AotPartitioner::MinCut,
            memory_budget: 1.0,
            peak_budget: None,
            decompositions: None,
            op_classes: OpClasses::Inductor,
        }
    }
}

const AOT_KEYS: &str = "fw, bw, recompute, partitioner, budget, peak, decompose";

impl AotConfig {
    /// `aot_eager_default_partitioner`: functorch's default partition.
    pub fn default_partitioner() -> Self {
        AotConfig {
            partitioner: AotPartitioner::Default,
            ..AotConfig::default()
        }
    }

    /// `aot_eager_decomp_partition`: inductor's decompositions, then min-cut with the
    /// inductor op classes.
    pub fn decomp_partition() -> Self {
        AotConfig {
            decompositions: Some(DecompositionSet::inductor()),
            ..AotConfig::default()
        }
    }

    /// Parses `fw=NAME,bw=NAME,recompute=OP|OP,partitioner=default|min-cut,budget=F,
    /// decompose=inductor|all|OP|OP` over [`AotConfig::default`].
    pub fn parse(spec: &str) -> Result<AotConfig, String> {
        let mut c = AotConfig::default();
        for item in spec.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let (k, v) = item
                .split_once('=')
                .ok_or_else(|| format!("`{item}` is not KEY=VALUE (keys: {AOT_KEYS})"))?;
            match k {
                "fw" => c.fw = v.to_string(),
                "bw" => c.bw = v.to_string(),
                "recompute" => {
                    for op in v.split('|') {
                        let spec = crate::fault::FaultSpec::parse(&format!("runtime@{op}"))
                            .map_err(|_| format!("bad op `{op}` in recompute"))?;
                        c.recompute.push(spec.op);
                    }
                }
                "partitioner" => {
                    c.partitioner = match v {
                        "default" => AotPartitioner::Default,
                        "min-cut" | "mincut" | "min_cut" => AotPartitioner::MinCut,
                        _ => {
                            return Err(format!(
                                "unknown partitioner `{v}` (known: default, min-cut)"
                            ))
                        }
                    }
                }
                "budget" => {
                    c.memory_budget = v
                        .parse::<f64>()
                        .ok()
                        .filter(|b| (0.0..=1.0).contains(b))
                        .ok_or_else(|| format!("budget `{v}`: expected a number in 0..=1"))?
                }
                "peak" => {
                    c.peak_budget = Some(v.parse::<PeakBudget>().map_err(|e| format!("peak: {e}"))?)
                }
                "decompose" => {
                    c.decompositions = Some(match v {
                        "inductor" => DecompositionSet::inductor(),
                        "all" => DecompositionSet::all(),
                        "none" => DecompositionSet::none(),
                        ops => DecompositionSet::select(ops.split('|'))
                            .map_err(|e| format!("decompose: {e}"))?,
                    })
                }
                other => return Err(format!("unknown key `{other}` (keys: {AOT_KEYS})")),
            }
        }
        if c.memory_budget < 1.0 && c.partitioner != AotPartitioner::MinCut {
            return Err("budget needs the min-cut partitioner".into());
        }
        if c.peak_budget.is_some() && c.partitioner != AotPartitioner::MinCut {
            return Err("peak needs the min-cut partitioner".into());
        }
        if c.peak_budget.is_some() && c.memory_budget < 1.0 {
            return Err(
                "budget= (the bytes saved) and peak= (the modelled peak) both bound memory; give one"
                    .into(),
            );
        }
        Ok(c)
    }
}

/// An AOT pipeline with eager inner compilers by default.
pub struct AotEager {
    name: String,
    config: AotConfig,
}

impl AotEager {
    /// A pipeline registered as `name`.
    pub fn new(name: &str, config: AotConfig) -> Self {
        AotEager {
            name: name.to_string(),
            config,
        }
    }

    /// Builds the backend for a name after `aot_eager:`.
    pub fn from_name(rest: &str) -> Result<Arc<dyn Backend>, String> {
        let config = AotConfig::parse(rest)?;
        for inner in [&config.fw, &config.bw] {
            crate::registry::resolve(inner).map_err(|e| format!("inner compiler: {e}"))?;
        }
        Ok(Arc::new(AotEager::new(
            &format!("aot_eager:{rest}"),
            config,
        )))
    }

    fn failure(&self, stage: Stage, message: String) -> Failure {
        Failure::new(&self.name, stage, Symptom::Error, message)
    }

    /// Splits the joint graph with the configured partitioner. Under pass limits
    /// (`ctx.passes`), recomputing each forward value in the backward is one application
    /// of the `recompute` pass; a value refused is saved instead.
    fn partition(
        &self,
        joint: &Graph,
        num_fwd_outputs: usize,
        ctx: Option<&CompileContext>,
    ) -> Result<Partition, PartitionError> {
        let patterns = self.config.recompute.clone();
        let policy = move |n: &graphbug_ir::Node| {
            n.op()
                .is_some_and(|op| patterns.iter().any(|p| p.matches(op)))
        };
        match self.config.partitioner {
            AotPartitioner::Default => {
                default_partition_with(joint, num_fwd_outputs, &policy, &Default::default())
            }
            AotPartitioner::MinCut => {
                let options = MinCutOptions {
                    op_classes: self.config.op_classes,
                    activation_memory_budget: self.config.memory_budget,
                    must_recompute: (!self.config.recompute.is_empty())
                        .then(|| Arc::new(policy) as NodePolicy),
                    ..Default::default()
                };
                let limited = ctx.filter(|c| c.passes.is_some());
                if limited.is_none() && self.config.peak_budget.is_none() {
                    return min_cut_rematerialization_partition(joint, num_fwd_outputs, &options);
                }
                let problem = MinCutProblem::new(joint, num_fwd_outputs, &options)?;
                if !problem.has_backward() {
                    return problem.partition_without_backward(joint);
                }
                let mut saved = match self.config.peak_budget {
                    // The cut that recomputes least within the modelled peak.
                    Some(budget) => {
                        let mut frontier =
                            peak_frontier(&problem, &ObservedAliases, PEAK_FRONTIER_STEPS)?;
                        let (k, _) = choose_by_peak(&frontier, budget)?;
                        frontier.swap_remove(k).saved
                    }
                    None => problem.saved_values()?,
                };
                let split = problem.partition(&saved)?;
                let Some(ctx) = limited else {
                    return Ok(split);
                };
                let g = problem.graph();
                let refused: Vec<NodeId> = split
                    .backward
                    .nodes
                    .iter()
                    .filter(|n| !n.is_placeholder())
                    .filter_map(|n| g.find(&n.name))
                    .filter(|&id| problem.class(id) != NodeClass::RequiredBackward)
                    .filter(|&id| !ctx.allow("recompute", &g.node(id).name))
                    .collect();
                if refused.is_empty() {
                    return Ok(split);
                }
                saved.extend(refused);
                saved.sort();
                saved.dedup();
                problem.partition(&saved)
            }
        }
    }

    fn autodiff_failure(&self, what: &str, e: AutodiffError) -> Failure {
        let f = self.failure(Stage::Compile, format!("{what}: {e}"));
        match e {
            AutodiffError::Unsupported { node, op, .. } => f.at(&node, &op),
            _ => f,
        }
    }
}

impl Backend for AotEager {
    fn name(&self) -> &str {
        &self.name
    }

    fn description(&self) -> &str {
        match (&self.config.decompositions, self.config.partitioner) {
            (Some(_), _) => "functionalize, build the joint graph, decompose composite ops (inductor's table), min-cut partition, run both halves eagerly",
            (None, AotPartitioner::Default) => "functionalize, build the joint forward/backward graph, default partition, run both halves eagerly",
            (None, AotPartitioner::MinCut) => "functionalize, build the joint forward/backward graph, min-cut rematerialization partition, run both halves eagerly",
        }
    }

    fn tags(&self) -> &[&str] {
        &["debug"]
    }

    fn delegates_faults(&self) -> bool {
        true
    }

    fn passes(&self) -> Vec<String> {
        let mut own = Vec::new();
        if self.config.decompositions.is_some() {
            own.push("decompose");
        }
        if self.config.partitioner == AotPartitioner::MinCut {
            own.push("recompute");
        }
        let inner: Vec<Arc<dyn Backend>> = [&self.config.fw, &self.config.bw]
            .into_iter()
            .filter_map(|name| lookup(name).ok())
            .collect();
        let inner: Vec<&dyn Backend> = inner.iter().map(|b| b.as_ref()).collect();
        crate::passes::with_passes(&own, &inner)
    }

    fn validate(&self, graph: &Graph, example_inputs: &[ExampleInput]) -> Result<(), String> {
        let split = self
            .split(graph, example_inputs, None)
            .map_err(|f| f.to_string())?;
        for (part, name, g) in [
            (AotPart::Forward, &self.config.fw, &split.partition.forward),
            (
                AotPart::Backward,
                &self.config.bw,
                &split.partition.backward,
            ),
        ] {
            // The part's own compiler checks its own parameters; the fault of
            // GRAPHBUG_INJECT_FAULT is checked below, over both halves.
            let inner = resolve(name).map_err(|e| e.to_string())?;
            // Without an input that requires grad the backward graph is empty.
            let no_backward =
                part == AotPart::Backward && !example_inputs.iter().any(|e| e.requires_grad);
            // The inner compiler gets the part's own inputs; their metas are annotated.
            inner.validate(g, &[]).map_err(|e| {
                let why = if no_backward {
                    format!(
                        " (no input requires grad, so `{name}` gets an empty backward; `graphbug run --backward` runs one)"
                    )
                } else {
                    String::new()
                };
                format!("in the {part} graph of `{}`{why}: {e}", self.name)
            })?;
        }
        // The fault goes to both inner compilers; a half it names no node of runs as it
        // is, so the fault must name a node of one half or the other.
        if let Some(text) = std::env::var(INJECT_FAULT_ENV)
            .ok()
            .filter(|t| !t.trim().is_empty())
        {
            let source = format!("{INJECT_FAULT_ENV}={text}");
            let spec = FaultSpec::parse_env(&text).map_err(|e| format!("{source}: {e}"))?;
            let training = example_inputs.iter().any(|e| e.requires_grad);
            let halves: Vec<(AotPart, &Graph)> = [
                (AotPart::Forward, &split.partition.forward),
                (AotPart::Backward, &split.partition.backward),
            ]
            .into_iter()
            .filter(|(part, _)| training || *part == AotPart::Forward)
            .collect();
            let whys: Vec<String> = halves
                .iter()
                .filter_map(|(part, g)| {
                    spec.why_no_target(g, &source)
                        .map(|why| format!("in the {part} graph of `{}`: {why}", self.name))
                })
                .collect();
            if whys.len() == halves.len() {
                return Err(whys.join("\n"));
            }
        }
        Ok(())
    }

    fn compile(
        &self,
        graph: &Graph,
        example_inputs: &[ExampleInput],
        ctx: &CompileContext,
    ) -> Result<Box<dyn CompiledFn>, Failure> {
        let split = self.split(graph, example_inputs, Some(ctx))?;
        let fw_backend =
            lookup(&self.config.fw).map_err(|e| self.failure(Stage::Compile, e.to_string()))?;
        let bw_backend =
            lookup(&self.config.bw).map_err(|e| self.failure(Stage::Compile, e.to_string()))?;
        Ok(Box::new(AotCompiled {
            name: self.name.clone(),
            forward: Inner::new(AotPart::Forward, split.partition.forward, fw_backend),
            backward: Inner::new(AotPart::Backward, split.partition.backward, bw_backend),
            ctx: ctx.share(),
            num_fwd_outputs: split.num_fwd_outputs,
            mutated_inputs: split.mutated_inputs,
            tangent_outputs: split.tangent_outputs,
            saved: None,
        }))
    }
}

/// The pipeline up to its inner compilers.
struct Split {
    partition: Partition,
    num_fwd_outputs: usize,
    mutated_inputs: Vec<usize>,
    tangent_outputs: Vec<usize>,
}

impl AotEager {
    /// Functionalizes, builds the joint graph, decomposes and partitions it; under the
    /// pass limits of `ctx`, each decomposed node is one application of `decompose`, and
    /// the graph each pass leaves is recorded.
    fn split(
        &self,
        graph: &Graph,
        example_inputs: &[ExampleInput],
        ctx: Option<&CompileContext>,
    ) -> Result<Split, Failure> {
        let inputs = graph.placeholders().len();
        if example_inputs.len() != inputs {
            return Err(self.failure(
                Stage::Compile,
                format!(
                    "the graph has {inputs} inputs but {} example inputs were given",
                    example_inputs.len()
                ),
            ));
        }
        let g = with_example_metas(graph, example_inputs);
        let functional = functionalize(&g, &LibtorchSchemas)
            .map_err(|e| self.autodiff_failure("functionalization", e))?;
        let fg = infer_meta(&functional.graph)
            .map_err(|e| Failure::from_aten(&self.name, Stage::Compile, &e))?;
        let requires_grad: Vec<bool> = example_inputs.iter().map(|e| e.requires_grad).collect();
        let joint = joint_graph_with(&fg, &requires_grad, &LibtorchDerivatives::new())
            .map_err(|e| self.autodiff_failure("joint graph", e))?;
        let jg = infer_meta(&joint.graph)
            .map_err(|e| Failure::from_aten(&self.name, Stage::Compile, &e))?;
        let limits = ctx.and_then(|c| c.passes.as_ref());
        let jg = match &self.config.decompositions {
            Some(set) => {
                let mut allow =
                    |n: &graphbug_ir::Node| ctx.is_none_or(|c| c.allow("decompose", &n.name));
                let g = decompose_with(&jg, set, &mut allow)
                    .map_err(|e| self.autodiff_failure("decomposition", e))?;
                if let Some(l) = limits {
                    l.dump_graph("decompose", &g);
                }
                g
            }
            None => jg,
        };
        let partition = self
            .partition(&jg, joint.num_fwd_outputs, ctx)
            .map_err(|e| self.failure(Stage::Compile, format!("partition: {e}")))?;
        if let (Some(l), AotPartitioner::MinCut) = (limits, self.config.partitioner) {
            l.dump_graph("recompute_forward", &partition.forward);
            l.dump_graph("recompute_backward", &partition.backward);
        }
        Ok(Split {
            partition,
            num_fwd_outputs: joint.num_fwd_outputs,
            mutated_inputs: functional.mutated_inputs,
            tangent_outputs: joint.tangent_outputs,
        })
    }
}

/// One half of the pipeline and its inner compiler.
struct Inner {
    part: AotPart,
    graph: Graph,
    backend: Arc<dyn Backend>,
    compiled: Option<Box<dyn CompiledFn>>,
}

impl Inner {
    fn new(part: AotPart, graph: Graph, backend: Arc<dyn Backend>) -> Self {
        Inner {
            part,
            graph,
            backend,
            compiled: None,
        }
    }
}

/// The compiled pipeline: forward now, backward later.
struct AotCompiled {
    name: String,
    forward: Inner,
    backward: Inner,
    /// The pipeline's context: device, constants, hook, trace and pass limits.
    ctx: CompileContext,
    num_fwd_outputs: usize,
    mutated_inputs: Vec<usize>,
    tangent_outputs: Vec<usize>,
    saved: Option<Vec<Tensor>>,
}

impl AotCompiled {
    /// Runs one half: compiles it on first use, tells the hook, checks accuracy if asked,
    /// and reports failures as the pipeline's, naming the half.
    fn run_inner(
        &mut self,
        which: AotPart,
        inputs: &[Tensor],
    ) -> Result<Vec<Option<Tensor>>, Failure> {
        let inner = match which {
            AotPart::Forward => &mut self.forward,
            AotPart::Backward => &mut self.backward,
        };
        let hook = self.ctx.inner_hook.clone();
        let tell = |inner: &Inner, failure: Option<&Failure>| {
            if let Some(h) = &hook {
                h(&InnerEvent {
                    part: inner.part,
                    graph: &inner.graph,
                    inputs,
                    backend: inner.backend.name(),
                    failure,
                });
            }
        };
        let name = self.name.clone();
        let relabel = |inner: &Inner, mut f: Failure| {
            f.message = format!(
                "in the {} graph (compiled by `{}`): {}",
                inner.part,
                inner.backend.name(),
                f.message
            );
            f.backend = name.clone();
            f
        };
        // Copies first: the inner run may change its inputs in place.
        let saved_inputs: Vec<Tensor> = inputs.iter().map(Tensor::copy).collect();
        if inner.compiled.is_none() {
            tell(inner, None);
            let examples: Vec<ExampleInput> = inputs
                .iter()
                .filter_map(|t| meta_of(t).map(ExampleInput::new))
                .collect();
            // The inner compiler gets the device, constants and pass limits; each half
            // records into its own part of the trace.
            let ctx = CompileContext {
                inner_hook: None,
                check_inner_accuracy: false,
                trace: self
                    .ctx
                    .trace
                    .as_ref()
                    .map(|t| t.part(&inner.part.to_string())),
                ..self.ctx.share()
            };
            match inner.backend.compile(&inner.graph, &examples, &ctx) {
                Ok(c) => inner.compiled = Some(c),
                Err(f) => {
                    tell(inner, Some(&f));
                    return Err(relabel(inner, f));
                }
            }
        }
        let outputs = match inner.compiled.as_mut().expect("compiled above").run(inputs) {
            Ok(o) => o,
            Err(f) => {
                tell(inner, Some(&f));
                return Err(relabel(inner, f));
            }
        };
        if self.ctx.check_inner_accuracy {
            if let Some(f) = inner_accuracy(
                inner,
                &saved_inputs,
                &outputs,
                &self.ctx.device,
                &self.ctx.constants,
            ) {
                tell(inner, Some(&f));
                return Err(relabel(inner, f));
            }
        }
        Ok(outputs)
    }
}

/// An accuracy failure of an inner graph's outputs against eager, if any.
fn inner_accuracy(
    inner: &Inner,
    inputs: &[Tensor],
    outputs: &[Option<Tensor>],
    device: &graphbug_ir::Device,
    constants: &std::collections::HashMap<String, Tensor>,
) -> Option<Failure> {
    let copies = || inputs.iter().map(Tensor::copy).collect::<Vec<_>>();
    // Without an eager reference nothing can be said to be right: that is a failure too.
    let eager =
        match Interpreter::new(&inner.graph, device, constants).and_then(|i| i.run(&copies())) {
            Ok(e) => e,
            Err(e) => {
                return Some(Failure::new(
                    inner.backend.name(),
                    Stage::Accuracy,
                    Symptom::Error,
                    format!("cannot check the outputs: the eager reference run failed: {e}"),
                ))
            }
        };
    // Without a float64 run, the float64 rule cannot excuse anything (allclose only).
    let fp64 = fp64_reference(&inner.graph, &copies(), device, constants).unwrap_or_default();
    let present = |v: &[Option<Tensor>]| {
        v.iter()
            .flatten()
            .map(Tensor::shallow_clone)
            .collect::<Vec<_>>()
    };
    detect(&present(&eager), &present(outputs), Some(&present(&fp64))).map(|report| {
        Failure::new(
            inner.backend.name(),
            Stage::Accuracy,
            Symptom::WrongResult,
            report,
        )
    })
}

impl CompiledFn for AotCompiled {
    fn run(&mut self, inputs: &[Tensor]) -> Result<Vec<Option<Tensor>>, Failure> {
        let outs = self.run_inner(AotPart::Forward, inputs)?;
        if outs.len() < self.num_fwd_outputs {
            return Err(Failure::new(
                &self.name,
                Stage::Runtime,
                Symptom::Error,
                format!(
                    "the forward graph returned {} values, expected at least {}",
                    outs.len(),
                    self.num_fwd_outputs
                ),
            ));
        }
        let (fwd, saved) = outs.split_at(self.num_fwd_outputs);
        // Mutated inputs: write the new values back into the caller's tensors.
        for (k, &idx) in self.mutated_inputs.iter().enumerate() {
            if let (Some(new), Some(dst)) = (&fwd[k], inputs.get(idx)) {
                dst.shallow_clone().f_copy_(new).map_err(|e| {
                    Failure::new(
                        &self.name,
                        Stage::Runtime,
                        Symptom::Error,
                        format!("writing back mutated input {idx}: {e}"),
                    )
                })?;
            }
        }
        let saved: Option<Vec<Tensor>> = saved
            .iter()
            .map(|s| s.as_ref().map(Tensor::shallow_clone))
            .collect();
        self.saved = Some(saved.ok_or_else(|| {
            Failure::new(
                &self.name,
                Stage::Runtime,
                Symptom::Error,
                "the forward graph returned None for a saved value",
            )
        })?);
        Ok(fwd[self.mutated_inputs.len()..]
            .iter()
            .map(|o| o.as_ref().map(Tensor::shallow_clone))
            .collect())
    }

    fn backward(
        &mut self,
        grad_outputs: &[Option<Tensor>],
    ) -> Result<Vec<Option<Tensor>>, Failure> {
        let Some(saved) = self.saved.take() else {
            return Err(Failure::new(
                &self.name,
                Stage::Runtime,
                Symptom::Error,
                "backward called before forward, or twice for one forward",
            ));
        };
        let n_mut = self.mutated_inputs.len();
        let mut inputs = saved;
        for &out in &self.tangent_outputs {
            let user = out.checked_sub(n_mut);
            let grad = user
                .and_then(|u| grad_outputs.get(u))
                .and_then(Option::as_ref);
            let tangent = match grad {
                Some(g) => g.shallow_clone(),
                None => {
                    // No gradient given for this output: zeros of its shape.
                    let meta = self
                        .backward
                        .graph
                        .placeholders()
                        .get(inputs.len())
                        .and_then(|&p| self.backward.graph.node(p).meta.tensor().cloned());
                    match meta {
                        Some(m) => graphbug_aten::meta::empty(&m, &self.ctx.device)
                            .map(|mut t| t.zero_())
                            .map_err(|e| {
                                Failure::new(
                                    &self.name,
                                    Stage::Runtime,
                                    Symptom::Error,
                                    e.to_string(),
                                )
                            })?,
                        None => {
                            return Err(Failure::new(
                                &self.name,
                                Stage::Runtime,
                                Symptom::Error,
                                format!("no gradient for output {out} and no shape to make zeros"),
                            ))
                        }
                    }
                }
            };
            inputs.push(tangent);
        }
        self.run_inner(AotPart::Backward, &inputs)
    }
}
