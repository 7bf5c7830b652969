//! Derivatives of every op libtorch can differentiate, recorded from libtorch's own autograd.
//!
//! For a forward call without a Rust rule, [`LibtorchDerivatives`] runs the call once on
//! meta tensors (no data) with `requires_grad` inputs, then back-propagates the output
//! gradients through libtorch's autograd engine while the shim records every aten call
//! the engine makes (see `Recorder` in `cpp/shim.cpp`). The recorded calls, with tensors
//! traced back to the call's inputs, outputs and output gradients, are the backward graph:
//! PyTorch's own formula from derivatives.yaml, decomposed as AOTAutograd decomposes it.
//! Recordings are cached by call signature, so a model's repeated layers record once.

use std::collections::{HashMap, HashSet};

use graphbug_autodiff::{functionalize, Backward, Derivatives, ForwardCall, Source};
use graphbug_ir::schema::{ArgType, Elem};
use graphbug_ir::{
    Device, Dtype, Graph, Layout, MemoryFormat, Meta, Node, NodeId, NodeKind, OpName, TensorMeta,
    Value,
};
use parking_lot::Mutex;
use serde_json::Value as Json;
use tch::Tensor;

use crate::dtype::{bits_kind, c10_layout, c10_memory_format, c10_scalar_type, to_dtype};
use crate::interp::Interpreter;
use crate::meta::{empty, meta_device};
use crate::shim::{Op, Recorder};
use crate::LibtorchSchemas;

/// Derivatives recorded from libtorch's autograd engine, cached per call signature.
#[derive(Default)]
pub struct LibtorchDerivatives {
    cache: Mutex<HashMap<String, Result<Backward, String>>>,
    outputs: Mutex<HashMap<String, Option<Vec<bool>>>>,
}

impl LibtorchDerivatives {
    /// A provider with an empty cache.
    pub fn new() -> Self {
        Self::default()
    }
}

/// Where a call runs while libtorch's autograd is recorded: on meta tensors (no data) when
/// the op has meta kernels, else on CPU stand-ins that the op's value checks accept.
#[derive(Clone, Copy, Debug)]
enum Stand {
    Meta,
    /// Floats ones, integers zeros.
    Ones,
    /// Floats identity matrices in the last two dimensions (positive definite, full rank),
    /// integers ones (valid LU pivots).
    Eye,
}

const STANDS: [Stand; 3] = [Stand::Meta, Stand::Ones, Stand::Eye];

impl Stand {
    fn device(self) -> Device {
        match self {
            Stand::Meta => meta_device(),
            Stand::Ones | Stand::Eye => Device::cpu(),
        }
    }
}

/// Runs `f` on each stand-in in turn until one works; the error of the first CPU attempt
/// (libtorch's own words) leads the message.
fn first_working<T>(mut f: impl FnMut(Stand) -> Result<T, String>) -> Result<T, String> {
    let mut errors: Vec<String> = Vec::new();
    for stand in STANDS {
        match f(stand) {
            Ok(v) => return Ok(v),
            Err(e) => {
                if !errors.contains(&e) {
                    errors.push(e);
                }
            }
        }
    }
    let lead = errors
        .get(1)
        .or(errors.first())
        .cloned()
        .unwrap_or_default();
    match errors.first() {
        Some(meta) if *meta != lead => Err(format!("{lead} (on meta tensors: {meta})")),
        _ => Err(lead),
    }
}

fn key(call: &ForwardCall<'_>) -> String {
    format!(
        "{}|{:?}|{:?}|{:?}|{:?}|{:?}|{:?}",
        call.op, call.args, call.kwargs, call.inputs, call.outputs, call.grads, call.device
    )
}

impl Derivatives for LibtorchDerivatives {
    fn backward(&self, call: &ForwardCall<'_>) -> Result<Backward, String> {
        let key = key(call);
        if let Some(hit) = self.cache.lock().get(&key) {
            return hit.clone();
        }
        let recorded = first_working(|stand| record(call, stand))
            .map_err(|e| format!("libtorch's autograd cannot differentiate it: {e}"));
        self.cache.lock().insert(key, recorded.clone());
        recorded
    }

    fn differentiable_outputs(&self, call: &ForwardCall<'_>) -> Option<Vec<bool>> {
        let key = key(call);
        if let Some(hit) = self.outputs.lock().get(&key) {
            return hit.clone();
        }
        // When the call cannot run at all, the backward says why later.
        let outputs = first_working(|stand| {
            let (_, outputs, _) = run_forward(call, stand)?;
            Ok(outputs
                .iter()
                .map(|o| o.as_ref().is_some_and(Tensor::requires_grad))
                .collect())
        })
        .ok();
        self.outputs.lock().insert(key, outputs.clone());
        outputs
    }

    fn schemas(&self) -> Option<&dyn graphbug_ir::schema::Schemas> {
        Some(&LibtorchSchemas)
    }
}

/// The forward call alone, as a graph over its tensor inputs `x0..`.
fn call_graph(call: &ForwardCall<'_>) -> Graph {
    let mut nodes: Vec<Node> = call
        .inputs
        .iter()
        .enumerate()
        .map(|(k, (meta, _))| Node {
            name: format!("x{k}").into(),
            kind: NodeKind::Placeholder,
            meta: Meta::Tensor(meta.clone()),
        })
        .collect();
    let source = NodeId(nodes.len() as u32);
    // The forward node's name, so libtorch's errors name it.
    let name = if nodes.iter().any(|n| n.name == call.node) {
        "y".to_string()
    } else {
        call.node.to_string()
    };
    nodes.push(Node {
        name: name.into(),
        kind: NodeKind::Call {
            op: call.op.clone(),
            args: call.args.clone(),
            kwargs: call.kwargs.clone(),
        },
        meta: call.outputs.clone(),
    });
    let output = match &call.outputs {
        Meta::Multi(items) => items
            .iter()
            .enumerate()
            .map(|(index, meta)| {
                let id = NodeId(nodes.len() as u32);
                nodes.push(Node {
                    name: format!("{}_{index}", nodes[source.index()].name).into(),
                    kind: NodeKind::GetItem { source, index },
                    meta: meta.clone().map_or(Meta::Unknown, Meta::Tensor),
                });
                Value::Node(id)
            })
            .collect(),
        _ => vec![Value::Node(source)],
    };
    Graph {
        dialect: graphbug_ir::Dialect::Aten,
        param_names: Default::default(),
        name: "Call".into(),
        nodes,
        output: Some(output),
    }
}

/// A stand-in input for `stand`.
fn stand_in(meta: &TensorMeta, stand: Stand) -> Result<Tensor, String> {
    // uint16/32/64 (no tch kind) are made in the signed kind of their width, then converted.
    let options = (bits_kind(meta.dtype), tch::Device::Cpu);
    let float = meta.dtype.is_floating_point() || meta.dtype.is_complex();
    let shape = meta.shape.as_slice();
    let t = match stand {
        Stand::Meta => return empty(meta, &meta_device()).map_err(|e| e.to_string()),
        Stand::Ones if float => Tensor::ones(shape, options),
        Stand::Ones => Tensor::zeros(shape, options),
        Stand::Eye if float && shape.len() >= 2 => {
            let t = Tensor::zeros(shape, options);
            let _ = t.diagonal(0, -2, -1).fill_(1);
            t
        }
        Stand::Eye => Tensor::ones(shape, options),
    };
    to_dtype(&t, meta.dtype)
}

/// A forward run under a recorder: the input leaves, the outputs, the recorder.
type Forward = (Vec<Tensor>, Vec<Option<Tensor>>, Recorder);

/// Runs the call alone with autograd on `stand`'s inputs (those that require grad are
/// leaves), under a new recorder (phase 0) that names the inputs `in:k`.
fn run_forward(call: &ForwardCall<'_>, stand: Stand) -> Result<Forward, String> {
    let graph = call_graph(call);
    let interp = Interpreter::new(&graph, &stand.device(), &HashMap::new())
        .map_err(|e| e.to_string())?
        .with_autograd(true)
        .without_stand_ins();
    let mut leaves = Vec::with_capacity(call.inputs.len());
    for (meta, rg) in &call.inputs {
        let t = stand_in(meta, stand)?;
        leaves.push(if *rg { t.set_requires_grad(true) } else { t });
    }
    let mut rec = Recorder::new()?;
    for (k, t) in leaves.iter().enumerate() {
        rec.label(t, &format!("in:{k}"))?;
    }
    let outputs = rec
        .record(0, || interp.run(&leaves))
        .map_err(|e| e.to_string())?;
    Ok((leaves, outputs, rec))
}

/// Runs the call and its backward on `stand` under the recorder; builds the backward graph.
fn record(call: &ForwardCall<'_>, stand: Stand) -> Result<Backward, String> {
    let (leaves, outputs, mut rec) = run_forward(call, stand)?;
    let mut outs = Vec::new();
    let mut grads = Vec::new();
    for (k, out) in outputs.iter().enumerate() {
        let Some(out) = out.as_ref().filter(|t| t.defined()) else {
            continue;
        };
        rec.label(out, &format!("out:{k}"))?;
        // An output libtorch does not make require grad is not differentiable: as in
        // PyTorch, no gradient flows back through it.
        if call.grads.get(k).copied().unwrap_or(false) && out.requires_grad() {
            let meta = crate::dtype::meta_of(out)
                .ok_or_else(|| format!("output {k} has a dtype graphbug does not know"))?;
            let g = stand_in(&meta, stand)?;
            rec.label(&g, &format!("grad:{k}"))?;
            outs.push(out.shallow_clone());
            grads.push(g);
        }
    }
    let wanted: Vec<&Tensor> = leaves
        .iter()
        .zip(&call.inputs)
        .filter(|(_, (_, rg))| *rg)
        .map(|(t, _)| t)
        .collect();
    if !outs.is_empty() && !wanted.is_empty() {
        let outs: Vec<&Tensor> = outs.iter().collect();
        let grads: Vec<&Tensor> = grads.iter().collect();
        rec.grad(&outs, &grads, &wanted)?;
    }
    let json: Json = serde_json::from_str(&rec.json()?)
        .map_err(|e| format!("the recording is not valid JSON: {e}"))?;
    // The gradient of each input, in input order (inputs that need none get None).
    let mut results = json["results"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter();
    let mut per_input = Vec::with_capacity(call.inputs.len());
    for (_, rg) in &call.inputs {
        per_input.push(if *rg {
            results.next().and_then(|r| r.as_i64()).unwrap_or(-1)
        } else {
            -1
        });
    }
    Build::new(call, &json)?.finish(&per_input)
}

/// One recorded call.
struct Call {
    op: OpName,
    /// The op writes into an argument (in place or out=).
    mutates: bool,
    args: Vec<Json>,
    defaults: Vec<bool>,
    results: Vec<Json>,
}

/// Turns a recording into a backward graph.
struct Build<'a> {
    call: &'a ForwardCall<'a>,
    calls: Vec<Call>,
    /// Recorded id → what it stands for.
    labels: HashMap<i64, Source>,
    /// Recorded id → the call that made it.
    made_by: HashMap<i64, usize>,
    nodes: Vec<Node>,
    sources: Vec<Source>,
    /// Recorded id → graph value.
    values: HashMap<i64, NodeId>,
}

fn tensor_ids(v: &Json, out: &mut Vec<i64>) {
    match v {
        Json::Array(items) => items.iter().for_each(|i| tensor_ids(i, out)),
        Json::Object(o) => {
            if let Some(id) = o.get("t").and_then(Json::as_i64) {
                out.push(id);
            }
        }
        _ => {}
    }
}

impl<'a> Build<'a> {
    fn new(call: &'a ForwardCall<'a>, json: &Json) -> Result<Build<'a>, String> {
        let mut labels = HashMap::new();
        for l in json["labels"].as_array().into_iter().flatten() {
            let (Some(label), Some(id)) = (l[0].as_str(), l[1].as_i64()) else {
                continue;
            };
            let (kind, k) = label
                .split_once(':')
                .and_then(|(kind, k)| Some((kind, k.parse::<usize>().ok()?)))
                .ok_or_else(|| format!("bad recording label `{label}`"))?;
            let source = match kind {
                "in" => Source::Input(k),
                "out" => Source::Output(k),
                _ => Source::Grad(k),
            };
            labels.entry(id).or_insert(source);
        }
        let mut calls = Vec::new();
        let mut made_by = HashMap::new();
        for c in json["calls"].as_array().into_iter().flatten() {
            let qualified = c["op"].as_str().unwrap_or_default();
            let (namespace, name) = qualified.split_once("::").unwrap_or(("aten", qualified));
            let overload = match c["overload"].as_str().unwrap_or_default() {
                "" => "default",
                o => o,
            };
            let results: Vec<Json> = c["results"].as_array().cloned().unwrap_or_default();
            let mut ids = Vec::new();
            results.iter().for_each(|r| tensor_ids(r, &mut ids));
            for id in ids {
                made_by.entry(id).or_insert(calls.len());
            }
            calls.push(Call {
                op: OpName::new(namespace, name, overload),
                mutates: c["mutates"].as_bool().unwrap_or(false),
                args: c["args"].as_array().cloned().unwrap_or_default(),
                defaults: c["defaults"]
                    .as_array()
                    .map(|d| d.iter().map(|b| b.as_bool().unwrap_or(false)).collect())
                    .unwrap_or_default(),
                results,
            });
        }
        Ok(Build {
            call,
            calls,
            labels,
            made_by,
            nodes: Vec::new(),
            sources: Vec::new(),
            values: HashMap::new(),
        })
    }

    /// The calls the gradients need, in recorded order: those making what they read, and
    /// every call that writes into a tensor (functionalization sorts out which writes
    /// matter, through views included).
    fn needed(&self, per_input: &[i64]) -> Vec<usize> {
        let mut wanted: HashSet<i64> = per_input.iter().copied().filter(|&id| id >= 0).collect();
        let mut keep = vec![false; self.calls.len()];
        for (i, c) in self.calls.iter().enumerate().rev() {
            let mut made = Vec::new();
            c.results.iter().for_each(|r| tensor_ids(r, &mut made));
            if !c.mutates
                && !made
                    .iter()
                    .any(|id| wanted.contains(id) && !self.labels.contains_key(id))
            {
                continue;
            }
            keep[i] = true;
            let mut read = Vec::new();
            c.args.iter().for_each(|a| tensor_ids(a, &mut read));
            wanted.extend(read);
        }
        (0..self.calls.len()).filter(|&i| keep[i]).collect()
    }

    fn push(&mut self, name: String, kind: NodeKind, meta: Meta) -> NodeId {
        let id = NodeId(self.nodes.len() as u32);
        self.nodes.push(Node {
            name: name.into(),
            kind,
            meta,
        });
        id
    }

    /// The graph value of recorded tensor `id`.
    fn tensor(&mut self, id: i64) -> Result<Value, String> {
        if let Some(&v) = self.values.get(&id) {
            return Ok(Value::Node(v));
        }
        let Some(&source) = self.labels.get(&id) else {
            return Err(match self.made_by.get(&id) {
                Some(&c) => format!(
                    "the backward reads a value of `{}` out of order",
                    self.calls[c].op
                ),
                None => "the backward reads a tensor the recording did not see made".into(),
            });
        };
        let v = self.push(
            format!("s{}", self.sources.len()),
            NodeKind::Placeholder,
            Meta::Unknown,
        );
        self.sources.push(source);
        self.values.insert(id, v);
        Ok(Value::Node(v))
    }

    /// A recorded argument as a graph value of type `ty`.
    fn value(&mut self, v: &Json, ty: &ArgType, op: &OpName) -> Result<Value, String> {
        Ok(match v {
            Json::Null => Value::None,
            Json::Bool(b) => Value::Bool(*b),
            Json::Number(n) => {
                let i = n
                    .as_i64()
                    .ok_or_else(|| format!("`{op}` got the number {n}"))?;
                match ty.elem {
                    Elem::ScalarType => Value::Dtype(
                        Dtype::ALL
                            .into_iter()
                            .find(|&d| c10_scalar_type(d) == i)
                            .ok_or_else(|| {
                                format!("`{op}` uses scalar type {i}, which graphbug does not know")
                            })?,
                    ),
                    Elem::Layout => Value::Layout(
                        Layout::ALL
                            .into_iter()
                            .find(|&l| c10_layout(l) == i)
                            .ok_or_else(|| format!("`{op}` uses layout {i}"))?,
                    ),
                    Elem::MemoryFormat => Value::MemoryFormat(
                        MemoryFormat::ALL
                            .into_iter()
                            .find(|&m| c10_memory_format(m) == i)
                            .ok_or_else(|| format!("`{op}` uses memory format {i}"))?,
                    ),
                    _ => Value::Int(i),
                }
            }
            Json::Array(items) => Value::List(
                items
                    .iter()
                    .map(|i| self.value(i, ty, op))
                    .collect::<Result<_, _>>()?,
            ),
            Json::Object(o) => {
                if let Some(id) = o.get("t").and_then(Json::as_i64) {
                    self.tensor(id)?
                } else if let Some(f) = o.get("f").and_then(Json::as_str) {
                    Value::Float(
                        f.parse::<f64>()
                            .map_err(|_| format!("`{op}` got the float `{f}`"))?,
                    )
                } else if let Some(c) = o.get("c").and_then(Json::as_array) {
                    let part = |k: usize| {
                        c.get(k)
                            .and_then(|p| p["f"].as_str())
                            .and_then(|f| f.parse::<f64>().ok())
                            .ok_or_else(|| format!("`{op}` got the complex number {c:?}"))
                    };
                    Value::Complex(part(0)?, part(1)?)
                } else if let Some(n) = o.get("n") {
                    self.value(n, &ArgType::parse("Scalar"), op)?
                } else if let Some(s) = o.get("s").and_then(Json::as_str) {
                    Value::Str(s.to_string())
                } else if o.contains_key("d") {
                    Value::Device(self.call.device.clone())
                } else {
                    let what = o.get("u").and_then(Json::as_str).unwrap_or("an argument");
                    return Err(format!("the backward calls `{op}` with {what}"));
                }
            }
            Json::String(s) => Value::Str(s.clone()),
        })
    }

    /// Emits recorded call `i`.
    fn emit(&mut self, i: usize) -> Result<(), String> {
        let op = self.calls[i].op.clone();
        let schema = Op::find(&op).map_err(|e| e.to_string())?.schema.clone();
        let args = std::mem::take(&mut self.calls[i].args);
        if args.len() != schema.arguments.len() {
            return Err(format!(
                "`{op}` was recorded with {} arguments, its schema has {}",
                args.len(),
                schema.arguments.len()
            ));
        }
        let mut positional = Vec::new();
        let mut kwargs = Vec::new();
        for (k, (formal, v)) in schema.arguments.iter().zip(&args).enumerate() {
            let is_default = self.calls[i].defaults.get(k).copied().unwrap_or(false);
            let value = self.value(v, &formal.arg_type(), &op)?;
            if formal.kwarg_only {
                if !is_default {
                    kwargs.push((formal.name.clone(), value));
                }
            } else {
                positional.push((value, is_default));
            }
        }
        // Trailing positional arguments equal to their defaults are left out, as PyTorch's
        // tracer leaves them out.
        while positional.last().is_some_and(|(_, d)| *d) {
            positional.pop();
        }
        let positional: Vec<Value> = positional.into_iter().map(|(v, _)| v).collect();
        let results = std::mem::take(&mut self.calls[i].results);
        let result_meta = |r: &Json| -> Result<Option<TensorMeta>, String> {
            if r.is_null() {
                return Ok(None);
            }
            let code = r["dtype"].as_i64().unwrap_or(-1);
            let dtype = Dtype::ALL
                .into_iter()
                .find(|&d| c10_scalar_type(d) == code)
                .ok_or_else(|| {
                    format!("`{op}` returns scalar type {code}, which graphbug does not know")
                })?;
            let shape = r["shape"]
                .as_array()
                .map(|s| s.iter().filter_map(Json::as_i64).collect())
                .unwrap_or_default();
            Ok(Some(TensorMeta { dtype, shape }))
        };
        // One tensor, or several (a tuple or a list) read through getitems.
        let single = results.len() == 1 && results[0].is_object();
        let items: Vec<&Json> = if single {
            vec![&results[0]]
        } else if results.len() == 1 && results[0].is_array() {
            results[0]
                .as_array()
                .map(|a| a.iter().collect())
                .unwrap_or_default()
        } else {
            results.iter().collect()
        };
        let metas = items
            .iter()
            .map(|r| result_meta(r))
            .collect::<Result<Vec<_>, _>>()?;
        let kind = NodeKind::Call {
            op: op.clone(),
            args: positional,
            kwargs,
        };
        let name = format!("c{i}");
        if single {
            let meta = metas[0].clone().map_or(Meta::Unknown, Meta::Tensor);
            let id = self.push(name, kind, meta);
            if let Some(t) = results[0]["t"].as_i64() {
                // An in-place op's result is its argument, which keeps its node.
                self.values.entry(t).or_insert(id);
            }
        } else {
            let source = self.push(name, kind, Meta::Multi(metas.clone()));
            for (index, (r, meta)) in items.iter().zip(metas).enumerate() {
                let Some(t) = r["t"].as_i64() else { continue };
                let g = self.push(
                    format!("c{i}_{index}"),
                    NodeKind::GetItem { source, index },
                    meta.map_or(Meta::Unknown, Meta::Tensor),
                );
                self.values.entry(t).or_insert(g);
            }
        }
        Ok(())
    }

    /// The backward graph returning `per_input`'s recorded gradients (-1: none).
    fn finish(mut self, per_input: &[i64]) -> Result<Backward, String> {
        for i in self.needed(per_input) {
            self.emit(i)?;
        }
        let mut output = Vec::with_capacity(per_input.len());
        for &id in per_input {
            output.push(match id {
                -1 => Value::None,
                id if id < 0 => {
                    return Err(
                        "libtorch returned a gradient the recording did not see made".into(),
                    )
                }
                id => self.tensor(id)?,
            });
        }
        // Placeholders first, as graphs have them.
        let mut order: Vec<usize> = (0..self.nodes.len()).collect();
        order.sort_by_key(|&i| !self.nodes[i].is_placeholder());
        let mut new_id = vec![NodeId(0); self.nodes.len()];
        for (new, &old) in order.iter().enumerate() {
            new_id[old] = NodeId(new as u32);
        }
        let mut old: Vec<Option<Node>> = self.nodes.into_iter().map(Some).collect();
        let mut nodes = Vec::with_capacity(old.len());
        for &i in &order {
            let node = old[i].take().expect("each node is moved once");
            let kind = node
                .try_remap_kind::<()>(&mut |src| Ok(new_id[src.index()]))
                .expect("every node id is remapped");
            nodes.push(Node { kind, ..node });
        }
        let output = output
            .into_iter()
            .map(|v| v.map_nodes(&mut |id| Value::Node(new_id[id.index()])))
            .collect();
        let graph = Graph {
            dialect: graphbug_ir::Dialect::Aten,
            param_names: Default::default(),
            name: "Backward".into(),
            nodes,
            output: Some(output),
        };
        graph.verify().map_err(|e| e.to_string())?;
        let mutates = graph.nodes.iter().any(|n| match &n.kind {
            NodeKind::Call { op, .. } => Op::find(op).is_ok_and(|o| o.schema.is_mutable),
            _ => false,
        });
        let graph = if mutates {
            let f = functionalize(&graph, &LibtorchSchemas).map_err(|e| e.to_string())?;
            if !f.mutated_inputs.is_empty() {
                return Err("the recorded backward writes into its inputs".into());
            }
            f.graph
        } else {
            graph
        };
        Ok(Backward {
            graph,
            sources: self.sources,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn polar_call<'a>(op: &'a OpName, shape: &[i64]) -> ForwardCall<'a> {
        let input = TensorMeta::new(Dtype::Float32, shape);
        ForwardCall {
            node: "polar",
            op,
            args: vec![Value::Node(NodeId(0)), Value::Node(NodeId(1))],
            kwargs: Vec::new(),
            inputs: vec![(input.clone(), true), (input, true)],
            outputs: Meta::Tensor(TensorMeta::new(Dtype::Complex64, shape)),
            grads: vec![true],
            device: Device::cpu(),
        }
    }

    /// `polar` runs on meta tensors through its composite kernel, which calls `polar.out`,
    /// an op without a meta kernel: recorded on meta tensors, that call runs on CPU
    /// stand-ins below autograd (the `polar` autograd node above it is kept), bounded as
    /// meta inference's stand-ins are.
    #[test]
    fn ops_without_meta_kernels_record_on_cpu_stand_ins() {
        let op = OpName::aten("polar", "default");
        let backward =
            record(&polar_call(&op, &[3, 2]), Stand::Meta).unwrap_or_else(|e| panic!("{e}"));
        let text = backward.graph.to_string();
        assert!(text.contains("torch.ops.aten.mul.Scalar(s1, 1j)"), "{text}");
        assert_eq!(backward.graph.outputs().len(), 2, "{text}");
        // 4 TiB of stand-ins is refused, saying why.
        let err = record(&polar_call(&op, &[1 << 20, 1 << 20]), Stand::Meta).unwrap_err();
        assert!(
            err.contains("aten::polar.out has no meta kernel, and running it on CPU stand-ins"),
            "{err}"
        );
    }
}
