//! Debug backends: `eager_noexcept` and `eager_debug` (schema checking while running).

use crate::failure::FromAten;
use graphbug_aten::dtype::meta_of;
use graphbug_aten::interp::{RtValue, RunHook};
use graphbug_aten::meta::infer_meta;
use graphbug_aten::schema::Schema;
use graphbug_aten::shim::storage_ptr;
use graphbug_aten::{AtenError, Interpreter};
use graphbug_ir::{Graph, Meta, NodeKind, Value};
use tch::Tensor;

use crate::backend::{with_example_metas, Backend, CompileContext, CompiledFn, ExampleInput};
use crate::eager::EagerFn;
use crate::failure::{Failure, Stage, Symptom};

/// `eager_noexcept`: eager, with any runtime error reported as an unexpected exception.
pub struct EagerNoexcept;

struct NoexceptFn(EagerFn);

impl CompiledFn for NoexceptFn {
    fn run(&mut self, inputs: &[Tensor]) -> Result<Vec<Option<Tensor>>, Failure> {
        self.0.run(inputs).map_err(|mut f| {
            f.message = format!(
                "unexpected exception when running the compiled graph: {}",
                f.message
            );
            f
        })
    }
}

impl Backend for EagerNoexcept {
    fn name(&self) -> &str {
        "eager_noexcept"
    }
    fn description(&self) -> &str {
        "eager; a runtime error is an unexpected exception (cause kept)"
    }
    fn tags(&self) -> &[&str] {
        &["debug"]
    }
    fn compile(
        &self,
        graph: &Graph,
        _: &[ExampleInput],
        ctx: &CompileContext,
    ) -> Result<Box<dyn CompiledFn>, Failure> {
        Ok(Box::new(NoexceptFn(EagerFn::new(self.name(), graph, ctx)?)))
    }
}

/// `eager_debug`: eager, checking every op against its schema as it runs: outputs must
/// have the shapes and dtypes meta inference gives, arguments the schema does not mark
/// mutable must not change, and outputs may alias arguments only as the schema declares.
pub struct EagerDebug;

struct DebugFn {
    interp: Interpreter,
    expected: Vec<Meta>,
}

/// One tensor argument as it was before the call.
struct Before {
    arg: usize,
    storage: usize,
    tensor: Tensor,
    /// A copy to compare with after the call, for arguments not declared mutable.
    copy: Option<Tensor>,
}

struct SchemaCheck<'a> {
    interp: &'a Interpreter,
    expected: &'a [Meta],
    before: Vec<Before>,
}

/// Ops whose schemas do not declare that, in training, they update running statistics;
/// PyTorch's `SchemaInfo` special-cases them the same way: (op, flag, mutated arguments).
const TRAINING_OPS: [(&str, &str, &[&str]); 7] = [
    (
        "aten::batch_norm",
        "training",
        &["running_mean", "running_var"],
    ),
    (
        "aten::native_batch_norm",
        "training",
        &["running_mean", "running_var"],
    ),
    (
        "aten::_batch_norm_impl_index",
        "training",
        &["running_mean", "running_var"],
    ),
    (
        "aten::cudnn_batch_norm",
        "training",
        &["running_mean", "running_var"],
    ),
    (
        "aten::miopen_batch_norm",
        "training",
        &["running_mean", "running_var"],
    ),
    (
        "aten::instance_norm",
        "use_input_stats",
        &["running_mean", "running_var"],
    ),
    ("aten::rrelu_with_noise", "training", &["noise"]),
];

/// Ops meant to alias without saying so (hence "unsafe"); PyTorch exempts them too.
const UNSAFE_ALIAS_OPS: [&str; 2] = ["aten::_unsafe_view", "aten::unsafe_split"];

/// Whether schema argument `arg` of the call at `node` may be mutated: declared `(a!)`, or a
/// running statistic of a training-mode normalization.
fn may_mutate(graph: &Graph, node: usize, schema: &Schema, arg: usize) -> bool {
    if schema.arguments[arg].is_write {
        return true;
    }
    let Some((_, flag, mutated)) = TRAINING_OPS.iter().find(|(op, _, _)| *op == schema.name) else {
        return false;
    };
    if !mutated.contains(&schema.arguments[arg].name.as_str()) {
        return false;
    }
    let NodeKind::Call { args, kwargs, .. } = &graph.nodes[node].kind else {
        return false;
    };
    let Some(i) = schema.arguments.iter().position(|a| a.name == *flag) else {
        return false;
    };
    let value = args
        .get(i)
        .or_else(|| kwargs.iter().find(|(k, _)| k == flag).map(|(_, v)| v));
    matches!(value, Some(Value::Bool(true)))
}

fn same_values(a: &Tensor, b: &Tensor) -> bool {
    use graphbug_aten::dtype::tensor_dtype;
    if a.size() != b.size() || tensor_dtype(a) != tensor_dtype(b) {
        return false;
    }
    if a.is_floating_point() || a.is_complex() {
        let both_nan = a.isnan().logical_and(&b.isnan());
        a.eq_tensor(b).logical_or(&both_nan).all().int64_value(&[]) == 1
    } else {
        a.equal(b)
    }
}

impl RunHook for SchemaCheck<'_> {
    fn before_call(&mut self, node: usize, args: &[&Tensor]) -> graphbug_aten::Result<()> {
        self.before.clear();
        let Some(info) = self.interp.call_info(node) else {
            return Ok(());
        };
        let graph = self.interp.graph();
        for (t, &arg) in args.iter().zip(info.tensor_args) {
            let mutable = may_mutate(graph, node, &info.op.schema, arg);
            self.before.push(Before {
                arg,
                storage: storage_ptr(t),
                tensor: t.shallow_clone(),
                copy: (!mutable).then(|| t.copy()),
            });
        }
        Ok(())
    }

    fn after_node(&mut self, node: usize, value: &mut RtValue) -> graphbug_aten::Result<()> {
        let graph = self.interp.graph();
        let Some(info) = self.interp.call_info(node) else {
            return Ok(());
        };
        let schema = &info.op.schema;
        let violation = |message: String| AtenError::Check {
            node: graph.nodes[node].name.to_string(),
            op: info.op.name.to_string(),
            message,
        };
        for b in &self.before {
            if let Some(copy) = &b.copy {
                if !same_values(&b.tensor, copy) {
                    return Err(violation(format!(
                        "argument `{}` was mutated, but the schema does not declare it mutable: {}",
                        schema.arguments[b.arg].name, schema.text
                    )));
                }
            }
        }
        // (return index, tensor) for every output tensor.
        let outputs: Vec<(usize, &Tensor)> = match &*value {
            RtValue::Tensor(t) => vec![(0, t)],
            RtValue::List(ts) => ts.iter().map(|t| (0, t)).collect(),
            RtValue::Tuple(vs) => vs
                .iter()
                .enumerate()
                .filter_map(|(r, v)| v.as_tensor().map(|t| (r, t)))
                .collect(),
            _ => Vec::new(),
        };
        let exempt = UNSAFE_ALIAS_OPS.contains(&schema.name.as_str());
        for (k, &(r, out)) in outputs.iter().enumerate() {
            let ret = &schema.returns[r.min(schema.returns.len().saturating_sub(1))];
            let ptr = storage_ptr(out);
            let declared = |arg: usize| {
                let sets = &schema.arguments[arg].alias_set;
                ret.alias_set
                    .iter()
                    .chain(&ret.contained_alias_set)
                    .any(|s| sets.contains(s))
            };
            for b in &self.before {
                if !exempt && ptr != 0 && ptr == b.storage && !declared(b.arg) {
                    return Err(violation(format!(
                        "output {r} aliases argument `{}`, but the schema does not declare it: {}",
                        schema.arguments[b.arg].name, schema.text
                    )));
                }
            }
            // Outputs may alias each other only through a shared alias set.
            for &(r2, other) in &outputs[k + 1..] {
                let ret2 = &schema.returns[r2.min(schema.returns.len().saturating_sub(1))];
                let shared = ret
                    .alias_set
                    .iter()
                    .chain(&ret.contained_alias_set)
                    .any(|s| ret2.alias_set.contains(s) || ret2.contained_alias_set.contains(s));
                if !exempt && r != r2 && ptr != 0 && ptr == storage_ptr(other) && !shared {
                    return Err(violation(format!(
                        "outputs {r} and {r2} alias unexpectedly"
                    )));
                }
            }
            if ret.is_write {
                let writers: Vec<&Before> =
                    self.before.iter().filter(|b| declared(b.arg)).collect();
                if !writers.is_empty() && !writers.iter().any(|b| b.storage == ptr) {
                    return Err(violation(format!(
                        "output {r} must alias argument `{}` (declared `{}(a!)`), but is a new tensor",
                        schema.arguments[writers[0].arg].name, ret.ty
                    )));
                }
            }
        }
        let got = value.meta();
        let expected = &self.expected[node];
        let agree = match (expected, &got) {
            (Meta::Tensor(e), Meta::Tensor(g)) => e == g,
            (Meta::Multi(e), Meta::Multi(g)) => {
                e.len() == g.len()
                    && e.iter()
                        .zip(g)
                        .all(|(a, b)| a.is_none() || b.is_none() || a == b)
            }
            (Meta::Unknown, _) | (_, Meta::Unknown) => true,
            _ => false,
        };
        if !agree {
            return Err(violation(format!(
                "produced {}, but meta inference gives {}",
                describe_meta(&got),
                describe_meta(expected)
            )));
        }
        Ok(())
    }
}

fn describe_meta(m: &Meta) -> String {
    match m {
        Meta::Tensor(t) => t.to_string(),
        Meta::Multi(items) => {
            let parts: Vec<String> = items
                .iter()
                .map(|i| i.as_ref().map_or("?".into(), ToString::to_string))
                .collect();
            format!("({})", parts.join(", "))
        }
        Meta::SymTensor(_) | Meta::Sym(_) => m.annotation().unwrap_or_default(),
        Meta::Unknown => "an unknown value".into(),
    }
}

impl CompiledFn for DebugFn {
    fn run(&mut self, inputs: &[Tensor]) -> Result<Vec<Option<Tensor>>, Failure> {
        let mut hook = SchemaCheck {
            interp: &self.interp,
            expected: &self.expected,
            before: Vec::new(),
        };
        self.interp
            .run_with_hook(inputs, &mut hook)
            .map_err(|e| Failure::from_aten("eager_debug", Stage::Runtime, &e))
    }
}

/// Each annotated placeholder must be what its example input is: a graph whose inputs
/// contradict its own signature is a bug in whatever produced one or the other.
fn check_placeholders(graph: &Graph, example_inputs: &[ExampleInput]) -> Result<(), Failure> {
    let placeholders = graph.placeholders();
    if example_inputs.is_empty() {
        return Ok(());
    }
    let fail = |message: String| {
        Err(Failure::new(
            "eager_debug",
            Stage::Compile,
            Symptom::Error,
            message,
        ))
    };
    if placeholders.len() != example_inputs.len() {
        return fail(format!(
            "the graph has {} placeholders but {} example inputs were given",
            placeholders.len(),
            example_inputs.len()
        ));
    }
    for (k, (id, ex)) in placeholders.iter().zip(example_inputs).enumerate() {
        let node = graph.node(*id);
        if let Meta::Tensor(annotated) = &node.meta {
            if *annotated != ex.meta {
                let what = if annotated.dtype != ex.meta.dtype {
                    "dtype"
                } else {
                    "shape"
                };
                return Err(Failure::new(
                    "eager_debug",
                    Stage::Compile,
                    Symptom::Error,
                    format!(
                        "placeholder {k} `{}` is annotated {annotated} but its example input is {} (the {what} differs)",
                        node.name, ex.meta
                    ),
                )
                .at(&node.name, "placeholder"));
            }
        }
    }
    Ok(())
}

impl Backend for EagerDebug {
    fn name(&self) -> &str {
        "eager_debug"
    }
    fn description(&self) -> &str {
        "eager, checking every op against its schema (shapes, mutation, aliasing) as it runs"
    }
    fn tags(&self) -> &[&str] {
        &["debug"]
    }
    fn compile(
        &self,
        graph: &Graph,
        example_inputs: &[ExampleInput],
        ctx: &CompileContext,
    ) -> Result<Box<dyn CompiledFn>, Failure> {
        check_placeholders(graph, example_inputs)?;
        // Shapes to expect, inferred from the example inputs.
        let mut g = with_example_metas(graph, example_inputs);
        for node in &mut g.nodes {
            if let NodeKind::GetAttr { target } = &node.kind {
                if let Some(m) = ctx.constants.get(target).and_then(meta_of) {
                    node.meta = Meta::Tensor(m);
                }
            }
        }
        let expected = infer_meta(&g)
            .map_err(|e| Failure::from_aten(self.name(), Stage::Compile, &e))?
            .nodes
            .into_iter()
            .map(|n| n.meta)
            .collect();
        let interp = Interpreter::new(graph, &ctx.device, &ctx.constants)
            .map_err(|e| Failure::from_aten(self.name(), Stage::Compile, &e))?
            .with_trace(ctx.trace.clone());
        Ok(Box::new(DebugFn { interp, expected }))
    }
}
