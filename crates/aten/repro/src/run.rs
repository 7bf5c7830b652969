//! `graphbug run` of aten graphs: compiled by a backend and run (a training step with
//! `--backward`), every node traced on request, the outputs printed, saved and compared
//! with a file by TorchDynamo's accuracy rules against a float64 reference; and `graphbug
//! explain`.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{anyhow, bail, Context, Result};
use graphbug_aten::accuracy::to_host;
use graphbug_aten::dtype::{describe, meta_of, tch_device};
use graphbug_aten::io::read_tensors;
use graphbug_aten::reference::{autograd_gradients, fp64_copy, fp64_graph, fp64_reference};
use graphbug_aten::trace::{TraceHeader, TraceSink};
use graphbug_backends::explain::Explain;
use graphbug_backends::{lookup, Backend, CompileContext, ExampleInput};
use graphbug_flow::run::{finish_run, supervise_run, RunRequest};
use graphbug_ir::{Device, Graph};
use graphbug_run::process::report_stage;
use tch::Tensor;

use crate::actions::validate_backend;
use crate::inputs::{device, graph_inputs, requires_grad};

/// An aten graph's own options of a run.
#[derive(Clone, Debug, Default)]
pub struct AtenRunOptions {
    /// The device (default cpu).
    pub device: Option<String>,
    /// The `self.<attr>` constants, by attribute name; they override the inputs file's.
    pub constants: Option<PathBuf>,
    /// Inputs that require grad (indices or names; default with `backward`: every
    /// floating input).
    pub requires_grad: Option<String>,
    /// Run a training step: the forward, then the backward.
    pub backward: bool,
    /// The outputs' gradients for the backward (`tangent<j>`).
    pub tangents: Option<PathBuf>,
    /// Values of size symbols.
    pub binds: Vec<(String, i64)>,
    /// Record every node's value to this file.
    pub trace: Option<PathBuf>,
}

/// `graphbug run` of the aten graph `bytes` (read from `args.file`) hold.
pub fn run(args: &RunRequest, aten: &AtenRunOptions, bytes: Vec<u8>) -> Result<ExitCode> {
    let mut graph = graphbug_ir::read_graph_file(&args.file, bytes)?;
    let device = device(aten.device.as_deref())?;
    let tdev = tch_device(&device)?;
    let backend = lookup(args.backend.as_deref().unwrap_or("eager"))?;
    let (backend, note) = training_backend(backend, aten.backward)?;
    // The rest (inputs included) happens once, in the bounded child.
    if let Some(code) = supervise_run(args, backend.name())? {
        return Ok(code);
    }
    if let Some(note) = note {
        eprintln!("{note}");
    }
    let (inputs, mut constants) = graph_inputs(
        &mut graph,
        args.inputs.as_ref(),
        &aten.binds,
        args.seed,
        tdev,
    )?;
    if let Some(file) = &aten.constants {
        for (name, t) in read_tensors(file)? {
            constants.insert(name, t.to_device(tdev));
        }
    }
    let rg = match (&aten.requires_grad, aten.backward) {
        (None, false) => vec![false; inputs.len()],
        (spec, _) => requires_grad(&graph, spec.as_deref())?,
    };
    // In the child: checking an AOT pipeline's inner compilers runs meta inference (its
    // backward's too when inputs require grad).
    validate_backend(backend.as_ref(), &graph, &inputs, &rg)?;
    let trace = match &aten.trace {
        Some(path) => {
            let sink = TraceSink::create(
                path,
                TraceHeader {
                    graph: args.file.display().to_string(),
                    backend: backend.name().to_string(),
                    device: device.to_string(),
                    graphbug: env!("CARGO_PKG_VERSION").to_string(),
                    ..TraceHeader::default()
                },
            )?;
            let given = sink.part("inputs");
            for (name, t) in graph.placeholder_names().iter().zip(&inputs) {
                given.record_tensor(name, Some(t));
            }
            Some(sink)
        }
        None => None,
    };

    // The float64 reference runs first, on copies, before the backend can mutate inputs.
    // Without it the file can only be matched by allclose, which is said.
    let fp64 = match &args.compare {
        Some(_) => match fp64_reference(&graph, &inputs, &device, &constants) {
            Ok(f) => Some(f),
            Err(e) => {
                eprintln!("note: the float64 reference run failed ({e}); outputs are compared with the file by allclose only");
                Some(Vec::new())
            }
        },
        None => None,
    };
    let mut examples = example_inputs(&inputs)?;
    for (e, &r) in examples.iter_mut().zip(&rg) {
        e.requires_grad = r;
    }
    // The training step's reference gradients, in float64, from libtorch's autograd.
    let tangents = match &aten.tangents {
        Some(path) => Some(read_tangents(path, &graph)?),
        None => None,
    };
    let ctx = CompileContext {
        device: device.clone(),
        constants,
        trace: trace.clone(),
        ..CompileContext::default()
    };
    report_stage("compile");
    let mut grads: Vec<Option<Tensor>> = Vec::new();
    let outputs = backend.compile(&graph, &examples, &ctx).and_then(|mut f| {
        report_stage("runtime");
        if !aten.backward {
            return f.run(&inputs);
        }
        let outputs = f.forward(&inputs)?;
        let grad_outputs = output_gradients(&outputs, tangents.as_deref());
        grads = f.backward(&grad_outputs)?;
        Ok(outputs)
    });
    let outputs = match outputs {
        Ok(o) => o,
        Err(failure) => {
            eprintln!("{failure}");
            if let Some(sink) = &trace {
                sink.finish(&format!("failed: {failure}"))?;
            }
            return Ok(ExitCode::FAILURE);
        }
    };
    if let Some(sink) = &trace {
        let produced = sink.part("outputs");
        for (i, o) in outputs.iter().enumerate() {
            produced.record_tensor(&format!("out{i}"), o.as_ref());
        }
        for (i, g) in grads.iter().enumerate() {
            if rg.get(i).copied().unwrap_or(false) {
                produced.record_tensor(&format!("grad{i}"), g.as_ref());
            }
        }
        if sink.recorded_nodes() == 0 {
            eprintln!(
                "note: `{}` does not run the graph node by node through graphbug, so the trace holds only its inputs and outputs",
                backend.name()
            );
        }
        sink.finish("completed")?;
        if let Some(path) = &aten.trace {
            println!("traced to {}", path.display());
        }
    }
    // By name, as the run gives them: the outputs, and a training step's gradients of the
    // inputs that require grad; the float64 reference of each present one, in order.
    let mut named: Vec<(String, Option<Tensor>)> = outputs
        .iter()
        .enumerate()
        .map(|(i, o)| (format!("out{i}"), o.as_ref().map(Tensor::shallow_clone)))
        .collect();
    let mut fp64 = fp64.map(|f| f.into_iter().flatten().collect::<Vec<Tensor>>());
    if aten.backward {
        let wanted = |i: usize| rg.get(i).copied().unwrap_or(false);
        named.extend(grads.iter().enumerate().map(|(i, g)| {
            let g = g.as_ref().filter(|_| wanted(i)).map(Tensor::shallow_clone);
            (format!("grad{i}"), g)
        }));
        if let Some(f) = fp64.as_mut() {
            let want: Vec<usize> = (0..grads.len())
                .filter(|&i| wanted(i) && grads[i].is_some())
                .collect();
            let tangents = output_gradients(&outputs, tangents.as_deref());
            match autograd_gradients(
                &fp64_graph(&graph),
                &inputs.iter().map(fp64_copy).collect::<Vec<_>>(),
                &rg,
                &tangents.iter().map(|t| t.as_ref().map(fp64_copy)).collect::<Vec<_>>(),
                &device,
            ) {
                Ok((_, g64)) => {
                    let g64: Option<Vec<Tensor>> = want
                        .iter()
                        .map(|&i| g64.get(i)?.as_ref().map(Tensor::shallow_clone))
                        .collect();
                    let present = named.iter().filter(|(_, t)| t.is_some()).count();
                    if let Some(g64) = g64.filter(|g| f.len() + g.len() == present) {
                        f.extend(g64);
                    }
                }
                Err(e) => eprintln!(
                    "note: the float64 reference gradients failed ({e}); gradients are compared with the file by allclose only"
                ),
            }
        }
    }
    let on_host = |name: &str, t: &Tensor| to_host(t, name).map_err(|e| anyhow!("{e}"));
    let named = named
        .into_iter()
        .map(|(name, t)| {
            let host = t.map(|t| on_host(&name, &t)).transpose()?;
            Ok((name, host))
        })
        .collect::<Result<Vec<_>>>()?;
    let fp64 = fp64
        .filter(|f| !f.is_empty())
        .map(|f| {
            f.iter()
                .map(|t| on_host("float64 reference", t).map(Some))
                .collect::<Result<Vec<_>>>()
        })
        .transpose()?;
    finish_run(args, "graph", named, fp64)
}

/// The backend a run uses: with `--backward`, a backend without a backward of its own
/// becomes the forward and backward compiler of aot_eager.
/// Returns it with a note saying so.
fn training_backend(
    backend: Arc<dyn Backend>,
    backward: bool,
) -> Result<(Arc<dyn Backend>, Option<String>)> {
    // A pipeline with inner compilers (aot_eager and its variants, or one wrapped by
    // `limit:`) has a backward of its own.
    if !backward || backend.delegates_faults() {
        return Ok((backend, None));
    }
    let name = backend.name();
    let wrapped = format!("aot_eager:fw={name},bw={name}");
    let aot = lookup(&wrapped).with_context(|| {
        format!("--backward: `{name}` has no backward, and `{wrapped}` cannot be made")
    })?;
    let note = format!("note: --backward runs `{name}` as aot_eager's inner compilers: {wrapped}");
    Ok((aot, Some(note)))
}

/// The gradients of the outputs for a backward: the given tangents, else ones for every
/// floating output.
fn output_gradients(
    outputs: &[Option<Tensor>],
    tangents: Option<&[Option<Tensor>]>,
) -> Vec<Option<Tensor>> {
    outputs
        .iter()
        .enumerate()
        .map(|(j, o)| match tangents {
            Some(t) => t.get(j).and_then(|t| t.as_ref().map(Tensor::shallow_clone)),
            None => o
                .as_ref()
                .filter(|o| o.is_floating_point())
                .map(Tensor::ones_like),
        })
        .collect()
}

/// `--tangents`: `tangent<j>` for output j of `graph`, in output order.
fn read_tangents(path: &std::path::Path, graph: &Graph) -> Result<Vec<Option<Tensor>>> {
    let mut file: std::collections::HashMap<String, Tensor> =
        read_tensors(path)?.into_iter().collect();
    let n = graph.outputs().len();
    let mut out = Vec::with_capacity(n);
    for j in 0..n {
        out.push(file.remove(&format!("tangent{j}")));
    }
    if let Some(extra) = file.keys().min() {
        bail!(
            "{}: `{extra}` is not a tangent of this graph (expected tangent0..tangent{})",
            path.display(),
            n.saturating_sub(1)
        );
    }
    Ok(out)
}

/// Example-input descriptions of concrete inputs.
fn example_inputs(inputs: &[Tensor]) -> Result<Vec<ExampleInput>> {
    inputs
        .iter()
        .map(|t| {
            meta_of(t)
                .map(ExampleInput::new)
                .ok_or_else(|| anyhow!("input of unsupported dtype {}", describe(t)))
        })
        .collect()
}

/// `graphbug explain`: compile and run through `explain:<backend>`, print the record.
pub fn explain(
    file: &std::path::Path,
    backend: &str,
    seed: u64,
    req: &RunRequest,
) -> Result<ExitCode> {
    let bytes = std::fs::read(file).with_context(|| format!("cannot read {}", file.display()))?;
    let mut graph = graphbug_ir::read_graph_file(file, bytes)?;
    let explain = Explain::new(lookup(backend)?);
    if let Some(code) = supervise_run(req, explain.name())? {
        return Ok(code);
    }
    let (inputs, constants) = graph_inputs(&mut graph, None, &[], seed, tch::Device::Cpu)?;
    validate_backend(&explain, &graph, &inputs, &[])?;
    let ctx = CompileContext {
        device: Device::cpu(),
        constants,
        ..CompileContext::default()
    };
    report_stage("compile");
    let result = explain
        .compile(&graph, &example_inputs(&inputs)?, &ctx)
        .and_then(|mut f| {
            report_stage("runtime");
            f.run(&inputs)
        });
    print!("{}", explain.output());
    match result {
        Ok(_) => Ok(ExitCode::SUCCESS),
        Err(failure) => {
            eprintln!("{failure}");
            Ok(ExitCode::FAILURE)
        }
    }
}
