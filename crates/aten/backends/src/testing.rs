//! The testing-only backends of TorchDynamo's `backends/debugging.py`, at the aten level:
//! they fail on purpose on graphs that call relu (`aten.relu` or `aten.relu_`, any
//! overload), so repro and minifier machinery can be tested.

use graphbug_ir::{Graph, Meta, NodeKind, OpName, Value};

use crate::backend::{Backend, CompileContext, CompiledFn, ExampleInput};
use crate::eager::EagerFn;
use crate::failure::{Failure, Stage, Symptom};

/// True for `aten.relu` and `aten.relu_`, any overload.
pub fn is_relu(op: &OpName) -> bool {
    op.namespace == "aten" && (op.name == "relu" || op.name == "relu_")
}

/// The first relu node of `graph`, if any.
fn first_relu(graph: &Graph) -> Option<(String, String)> {
    graph.nodes.iter().find_map(|n| match n.op() {
        Some(op) if is_relu(op) => Some((n.name.to_string(), op.to_string())),
        _ => None,
    })
}

/// `graph` with every relu call replaced by `replace(op, input)`.
fn rewrite_relus(graph: &Graph, replace: impl Fn(&OpName, &Value) -> NodeKind) -> Graph {
    let mut g = graph.clone();
    for node in &mut g.nodes {
        if let NodeKind::Call { op, args, .. } = &node.kind {
            if is_relu(op) {
                let input = args.first().cloned().unwrap_or(Value::None);
                node.kind = replace(op, &input);
                node.meta = Meta::Unknown;
            }
        }
    }
    g
}

macro_rules! testing_backend {
    ($ty:ident, $name:literal, $desc:literal) => {
        #[doc = $desc]
        pub struct $ty;

        impl $ty {
            /// The registry name.
            pub const NAME: &'static str = $name;
            /// The one-line description.
            pub const DESCRIPTION: &'static str = $desc;
        }
    };
}

testing_backend!(
    ReluCompileError,
    "relu_compile_error_TESTING_ONLY",
    "compile error (ReluCompileError) when the graph calls relu"
);
testing_backend!(
    ReluRuntimeError,
    "relu_runtime_error_TESTING_ONLY",
    "relu becomes a failing assertion: ReluRuntimeError when run"
);
testing_backend!(
    ReluAccuracyError,
    "relu_accuracy_error_TESTING_ONLY",
    "relu(x) becomes x + 1: wrong results"
);
testing_backend!(
    NonLeafCompileError,
    "non_leaf_compile_error_TESTING_ONLY",
    "compile error when an example input is not a leaf and the graph calls anything"
);

impl Backend for ReluCompileError {
    fn name(&self) -> &str {
        Self::NAME
    }
    fn description(&self) -> &str {
        Self::DESCRIPTION
    }
    fn tags(&self) -> &[&str] {
        &["testing"]
    }
    fn compile(
        &self,
        graph: &Graph,
        _: &[ExampleInput],
        ctx: &CompileContext,
    ) -> Result<Box<dyn CompiledFn>, Failure> {
        if let Some((node, op)) = first_relu(graph) {
            return Err(Failure::new(
                Self::NAME,
                Stage::Compile,
                Symptom::Error,
                "ReluCompileError",
            )
            .at(&node, &op));
        }
        Ok(Box::new(EagerFn::new(Self::NAME, graph, ctx)?))
    }
}

impl Backend for ReluRuntimeError {
    fn name(&self) -> &str {
        Self::NAME
    }
    fn description(&self) -> &str {
        Self::DESCRIPTION
    }
    fn tags(&self) -> &[&str] {
        &["testing"]
    }
    fn compile(
        &self,
        graph: &Graph,
        _: &[ExampleInput],
        ctx: &CompileContext,
    ) -> Result<Box<dyn CompiledFn>, Failure> {
        let g = rewrite_relus(graph, |_, _| NodeKind::Call {
            op: OpName::aten("_assert_scalar", "default"),
            args: vec![Value::Bool(false), Value::Str("ReluRuntimeError".into())],
            kwargs: Vec::new(),
        });
        Ok(Box::new(EagerFn::new(Self::NAME, &g, ctx)?))
    }
}

impl Backend for ReluAccuracyError {
    fn name(&self) -> &str {
        Self::NAME
    }
    fn description(&self) -> &str {
        Self::DESCRIPTION
    }
    fn tags(&self) -> &[&str] {
        &["testing"]
    }
    fn compile(
        &self,
        graph: &Graph,
        _: &[ExampleInput],
        ctx: &CompileContext,
    ) -> Result<Box<dyn CompiledFn>, Failure> {
        // An in-place relu_ becomes an in-place add_, so callers still see the mutation.
        let g = rewrite_relus(graph, |op, input| NodeKind::Call {
            op: OpName::aten(if op.name == "relu_" { "add_" } else { "add" }, "Tensor"),
            args: vec![input.clone(), Value::Int(1)],
            kwargs: Vec::new(),
        });
        Ok(Box::new(EagerFn::new(Self::NAME, &g, ctx)?))
    }
}

impl Backend for NonLeafCompileError {
    fn name(&self) -> &str {
        Self::NAME
    }
    fn description(&self) -> &str {
        Self::DESCRIPTION
    }
    fn tags(&self) -> &[&str] {
        &["testing"]
    }
    fn compile(
        &self,
        graph: &Graph,
        example_inputs: &[ExampleInput],
        ctx: &CompileContext,
    ) -> Result<Box<dyn CompiledFn>, Failure> {
        let calls = graph.nodes.iter().any(|n| n.is_call_function());
        if let (true, Some(i)) = (calls, example_inputs.iter().position(|e| !e.is_leaf)) {
            return Err(Failure::new(
                Self::NAME,
                Stage::Compile,
                Symptom::Error,
                format!("TestingOnlyCompileError: example input {i} is not a leaf"),
            ));
        }
        Ok(Box::new(EagerFn::new(Self::NAME, graph, ctx)?))
    }
}

/// `slow:<ms>[+<inner>]`: compiles with `inner` (default eager) after waiting `ms`
/// milliseconds, standing in for a compiler that takes that long (to test tools such as
/// parallel minification against expensive queries).
pub struct Slow {
    name: String,
    wait: std::time::Duration,
    inner: std::sync::Arc<dyn Backend>,
}

impl Slow {
    /// Builds the backend from the text after `slow:`.
    pub fn from_name(rest: &str) -> Result<std::sync::Arc<dyn Backend>, String> {
        let (ms, inner) = rest.split_once('+').unwrap_or((rest, "eager"));
        let ms: u64 = ms
            .trim()
            .parse()
            .map_err(|_| format!("`{ms}` is not a number of milliseconds: slow:<ms>[+<inner>]"))?;
        let inner = crate::registry::resolve(inner).map_err(|e| format!("inner backend: {e}"))?;
        Ok(std::sync::Arc::new(Slow {
            name: format!("slow:{rest}"),
            wait: std::time::Duration::from_millis(ms),
            inner,
        }))
    }
}

impl Backend for Slow {
    fn name(&self) -> &str {
        &self.name
    }
    fn description(&self) -> &str {
        "waits a given time, then compiles with an inner backend"
    }
    fn tags(&self) -> &[&str] {
        &["testing"]
    }
    fn inner(&self) -> Option<&dyn Backend> {
        Some(self.inner.as_ref())
    }
    fn compile(
        &self,
        graph: &Graph,
        example_inputs: &[ExampleInput],
        ctx: &CompileContext,
    ) -> Result<Box<dyn CompiledFn>, Failure> {
        std::thread::sleep(self.wait);
        self.inner.compile(graph, example_inputs, ctx)
    }
}
