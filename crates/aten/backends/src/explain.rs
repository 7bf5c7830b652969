//! `explain:<inner>`: records every graph it compiles, as TorchDynamo's
//! `ExplainWithBackend` does, then compiles with the inner backend.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use graphbug_ir::{Graph, NodeKind};
use parking_lot::Mutex;

use crate::backend::{Backend, CompileContext, CompiledFn, ExampleInput};
use crate::failure::Failure;

/// What `explain` found: graphs, ops per graph, and a histogram of ops.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ExplainOutput {
    /// Ops (call_function targets, getitems as `operator.getitem`) of each graph compiled.
    pub ops_per_graph: Vec<Vec<String>>,
}

impl ExplainOutput {
    /// Number of graphs compiled.
    pub fn graph_count(&self) -> usize {
        self.ops_per_graph.len()
    }

    /// Total number of ops over all graphs.
    pub fn op_count(&self) -> usize {
        self.ops_per_graph.iter().map(Vec::len).sum()
    }

    /// How often each op occurs over all graphs, by op name.
    pub fn histogram(&self) -> BTreeMap<String, usize> {
        let mut h = BTreeMap::new();
        for op in self.ops_per_graph.iter().flatten() {
            *h.entry(op.clone()).or_insert(0) += 1;
        }
        h
    }
}

impl fmt::Display for ExplainOutput {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "Graph Count: {}", self.graph_count())?;
        writeln!(
            f,
            "Graph Break Count: {}",
            self.graph_count().saturating_sub(1)
        )?;
        writeln!(f, "Op Count: {}", self.op_count())?;
        writeln!(f, "Ops per Graph:")?;
        for (i, ops) in self.ops_per_graph.iter().enumerate() {
            writeln!(f, "  Ops {}:", i + 1)?;
            for op in ops {
                writeln!(f, "    {op}")?;
            }
        }
        writeln!(f, "Op Histogram:")?;
        let mut by_count: Vec<(String, usize)> = self.histogram().into_iter().collect();
        by_count.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        for (op, n) in by_count {
            writeln!(f, "  {n:>6}  {op}")?;
        }
        Ok(())
    }
}

/// The explain backend: records each graph, then compiles with `inner`.
pub struct Explain {
    inner: Arc<dyn Backend>,
    name: String,
    seen: Mutex<ExplainOutput>,
}

impl Explain {
    /// Wraps `inner`.
    pub fn new(inner: Arc<dyn Backend>) -> Self {
        Explain {
            name: format!("explain:{}", inner.name()),
            inner,
            seen: Mutex::new(ExplainOutput::default()),
        }
    }

    /// Builds the backend for a name after `explain:`.
    pub fn from_name(inner: &str) -> Result<Arc<dyn Backend>, String> {
        let inner = crate::registry::resolve(inner).map_err(|e| format!("inner backend: {e}"))?;
        Ok(Arc::new(Explain::new(inner)))
    }

    /// What was recorded so far.
    pub fn output(&self) -> ExplainOutput {
        self.seen.lock().clone()
    }
}

impl Backend for Explain {
    fn name(&self) -> &str {
        &self.name
    }
    fn description(&self) -> &str {
        "records each graph compiled (ops, histogram), then compiles with an inner backend"
    }
    fn tags(&self) -> &[&str] {
        &["debug"]
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
        let ops = graph
            .nodes
            .iter()
            .filter_map(|n| match &n.kind {
                NodeKind::Call { op, .. } => Some(op.qualified()),
                NodeKind::GetItem { .. } => Some("operator.getitem".to_string()),
                _ => None,
            })
            .collect();
        self.seen.lock().ops_per_graph.push(ops);
        self.inner.compile(graph, example_inputs, ctx)
    }
}
