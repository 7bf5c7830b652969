//! General fault injection: `fault:<kind>[=<amount>]@<op>[#<k>][+<inner>]`.
//!
//! A compile fault fails compilation when the graph calls the op. Every other kind inserts a
//! `graphbug::fault` op (registered with libtorch's dispatcher by graphbug-aten) right after
//! the chosen node and compiles the rewritten graph with the inner backend, so the fault
//! fires inside whatever runs the graph: an error (`runtime`), a perturbed value
//! (`accuracy`), NaNs (`nan`), an aborted process (`crash`) or a call that never returns
//! (`hang`). The spec itself (its grammar, which nodes it targets) is
//! [`graphbug_ir::fault`].

use std::sync::Arc;

use graphbug_aten::trace::alias_of;
pub use graphbug_ir::fault::*;
use graphbug_ir::{Graph, Meta, Namespace, Node, NodeId, NodeKind, OpName, Value};
use tch::Tensor;

use crate::backend::{Backend, CompileContext, CompiledFn, ExampleInput};
use crate::failure::{Failure, Stage, Symptom};

/// The `fault:` backend: injects a fault, then compiles with the inner backend.
pub struct FaultBackend {
    spec: FaultSpec,
    inner: Arc<dyn Backend>,
    name: String,
    /// How the user wrote the fault, for messages (`fault:...` or the environment's).
    source: String,
}

impl FaultBackend {
    /// Wraps `inner` with the fault `spec`.
    pub fn new(spec: FaultSpec, inner: Arc<dyn Backend>) -> Self {
        let name = format!("fault:{spec}+{}", inner.name());
        let source = format!("fault:{spec}");
        FaultBackend {
            spec,
            inner,
            name,
            source,
        }
    }

    /// Says in messages that the fault came from `source` (e.g. an environment variable).
    pub fn with_source(mut self, source: String) -> Self {
        self.source = source;
        self
    }

    /// Builds the backend for a name after `fault:` (`<spec>[+<inner>]`).
    pub fn from_name(rest: &str) -> Result<Arc<dyn Backend>, String> {
        let (spec, inner) = match rest.split_once('+') {
            Some((s, i)) => (s, i),
            None => (rest, "eager"),
        };
        let spec = FaultSpec::parse(spec)?;
        let inner = crate::registry::resolve(inner).map_err(|e| format!("inner backend: {e}"))?;
        Ok(Arc::new(FaultBackend::new(spec, inner)))
    }

    /// The graph with a `graphbug::fault` node after each target, and (fault node, target)
    /// pairs.
    fn rewrite(
        &self,
        graph: &Graph,
        targets: &[NodeId],
    ) -> Result<(Graph, Vec<(String, NodeId)>), Failure> {
        let mut names = Namespace::new();
        for n in &graph.nodes {
            names.reserve(&n.name);
        }
        let users = graph.users();
        // Where each fault goes: after the target, or after the first read of a
        // multi-output target.
        let mut sites = Vec::with_capacity(targets.len());
        for &target in targets {
            let node = graph.node(target);
            let readers = &users.nodes[target.index()];
            let multi = matches!(node.meta, Meta::Multi(_))
                || readers
                    .iter()
                    .any(|u| matches!(graph.node(*u).kind, NodeKind::GetItem { .. }));
            let at = if multi {
                *readers.first().ok_or_else(|| {
                    self.failure(
                        Stage::Compile,
                        graph,
                        target,
                        "cannot inject here: none of this node's outputs is read".into(),
                    )
                })?
            } else {
                target
            };
            sites.push((at, target));
        }
        // Last site first, so earlier ids stay valid while inserting.
        sites.sort_by_key(|s| std::cmp::Reverse(s.0));
        let mut g = graph.clone();
        let mut inserted = Vec::new();
        for (at, target) in sites {
            let node = graph.node(target);
            let op = node.op().map(ToString::to_string).unwrap_or_default();
            let name = names.create_name("fault");
            let fault = Node {
                name: name.clone().into(),
                kind: NodeKind::Call {
                    op: OpName::new("graphbug", "fault", "default"),
                    args: vec![
                        Value::Node(at),
                        Value::Str(self.spec.kind.name().into()),
                        Value::Float(self.spec.amount),
                        Value::Str(format!(
                            "injected {} fault at node `{}` ({op})",
                            self.spec.kind.name(),
                            node.name
                        )),
                    ],
                    kwargs: Vec::new(),
                },
                meta: graph.node(at).meta.clone(),
            };
            g = g.insert_after(at, fault, true).0;
            inserted.push((name, target));
        }
        Ok((g, inserted))
    }

    fn failure(&self, stage: Stage, graph: &Graph, target: NodeId, message: String) -> Failure {
        let node = graph.node(target);
        Failure::new(&self.name, stage, Symptom::Error, message).at(
            &node.name,
            &node.op().map(ToString::to_string).unwrap_or_default(),
        )
    }
}

impl Backend for FaultBackend {
    fn name(&self) -> &str {
        &self.name
    }

    fn description(&self) -> &str {
        "injects a fault at an op, then compiles with an inner backend"
    }

    fn tags(&self) -> &[&str] {
        &["testing"]
    }

    fn inner(&self) -> Option<&dyn Backend> {
        Some(self.inner.as_ref())
    }

    fn passes(&self) -> Vec<String> {
        crate::passes::with_passes(&["fault"], &[self.inner.as_ref()])
    }

    fn validate(&self, graph: &Graph, example_inputs: &[ExampleInput]) -> Result<(), String> {
        if let Some(why) = self.spec.why_no_target(graph, &self.source) {
            return Err(why);
        }
        self.inner.validate(graph, example_inputs)
    }

    fn compile(
        &self,
        graph: &Graph,
        example_inputs: &[ExampleInput],
        ctx: &CompileContext,
    ) -> Result<Box<dyn CompiledFn>, Failure> {
        // Each target is one application of the `fault` pass (`graphbug bisect`).
        let targets: Vec<NodeId> = self
            .spec
            .targets(graph)
            .into_iter()
            .filter(|&t| ctx.allow("fault", &graph.node(t).name))
            .collect();
        if targets.is_empty() || self.spec.percent.is_some_and(|p| !flaky_fires(p)) {
            if let Some(limits) = &ctx.passes {
                limits.dump_graph("fault", graph);
            }
            return self.inner.compile(graph, example_inputs, ctx);
        }
        if self.spec.kind == FaultKind::Compile {
            let node = &graph.node(targets[0]).name;
            return Err(self.failure(
                Stage::Compile,
                graph,
                targets[0],
                format!(
                    "injected compile fault at node `{node}` (fault:{})",
                    self.spec
                ),
            ));
        }
        let (rewritten, inserted) = self.rewrite(graph, &targets)?;
        if let Some(limits) = &ctx.passes {
            limits.dump_graph("fault", &rewritten);
        }
        let names: Vec<(String, String, String)> = inserted
            .iter()
            .map(|(fault, t)| {
                let n = graph.node(*t);
                (
                    fault.clone(),
                    n.name.to_string(),
                    n.op().map(ToString::to_string).unwrap_or_default(),
                )
            })
            .collect();
        let backend = self.name.clone();
        let relabel = move |mut f: Failure| {
            if let Some((_, node, op)) = names
                .iter()
                .find(|(fault, _, _)| f.node.as_deref() == Some(fault))
            {
                f = f.at(node, op);
            }
            f.backend = backend.clone();
            f
        };
        // A trace records each fault node's value as the value it replaces.
        let traced = ctx.trace.as_ref().map(|sink| {
            sink.with_aliases(inserted.iter().filter_map(|(fault, _)| {
                let id = rewritten.find(fault)?;
                let NodeKind::Call { args, .. } = &rewritten.node(id).kind else {
                    return None;
                };
                let Some(Value::Node(at)) = args.first() else {
                    return None;
                };
                Some((fault.clone(), alias_of(&rewritten, *at)))
            }))
        });
        let inner = self
            .inner
            .compile(
                &rewritten,
                example_inputs,
                &CompileContext {
                    trace: traced,
                    ..ctx.share()
                },
            )
            .map_err(&relabel)?;
        Ok(Box::new(Faulted {
            inner,
            relabel: Box::new(relabel),
        }))
    }
}

/// A compiled function whose failures at inserted fault nodes name the faulted node.
struct Faulted {
    inner: Box<dyn CompiledFn>,
    relabel: Box<dyn Fn(Failure) -> Failure + Send>,
}

impl CompiledFn for Faulted {
    fn run(&mut self, inputs: &[Tensor]) -> Result<Vec<Option<Tensor>>, Failure> {
        self.inner.run(inputs).map_err(&self.relabel)
    }
}
