//! Dynamic-shape graphs made static: bind each size symbol to a value, then rewrite the
//! graph with those values, so every tool that runs static graphs runs it.
//!
//! [`Binder`] collects the values from the inputs' real sizes, the `Sym` inputs and the
//! user's `--bind s0=8`, and reports a contradiction with both sources. [`specialize`]
//! evaluates every symbolic annotation: tensors get static shapes, a `Sym` input becomes a
//! 0-d int64 input, a size computed in the graph (`mul = s0 * 2`, `sym_size.int`) becomes
//! the constant `scalar_tensor(value)`, and arguments that read one get the integer.

use std::collections::BTreeMap;

use crate::graph::{Graph, NodeId, NodeKind};
use crate::sym::{Bindings, SymExpr};
use crate::types::{Dtype, Meta, OpName, TensorMeta};
use crate::value::Value;

/// Symbol values gathered from a graph's inputs, with where each came from.
#[derive(Clone, Debug, Default)]
pub struct Binder {
    values: Bindings,
    sources: BTreeMap<String, String>,
    /// Sizes to check once every symbol is bound: (expression, actual, where).
    checks: Vec<(SymExpr, i64, String)>,
}

impl Binder {
    /// An empty binder.
    pub fn new() -> Binder {
        Binder::default()
    }

    /// Binds `symbol` to `value`, learnt from `source` (`x dim 0`, `--bind`); a different
    /// earlier value is an error naming both sources.
    pub fn bind(&mut self, symbol: &str, value: i64, source: &str) -> Result<(), String> {
        if let Some(&old) = self.values.get(symbol) {
            if old != value {
                return Err(format!(
                    "{symbol} = {old} from {} but {value} from {source}",
                    self.sources[symbol]
                ));
            }
            return Ok(());
        }
        self.values.insert(symbol.to_string(), value);
        self.sources.insert(symbol.to_string(), source.to_string());
        Ok(())
    }

    /// Binds the symbols of input `name` (a placeholder of `graph`) from the real `shape`
    /// of the tensor given for it: a size that is a bare symbol binds it; any other size is
    /// checked when [`Binder::finish`] has every value.
    pub fn bind_tensor(&mut self, graph: &Graph, name: &str, shape: &[i64]) -> Result<(), String> {
        let Some(node) = graph.find(name).map(|id| graph.node(id)) else {
            return Ok(());
        };
        let sizes: Vec<SymExpr> = match &node.meta {
            Meta::SymTensor(t) => t.sizes.clone(),
            Meta::Tensor(t) => t.shape.iter().map(|&d| SymExpr::int(d)).collect(),
            _ => return Ok(()),
        };
        if sizes.len() != shape.len() {
            return Err(format!(
                "input `{name}` has {} dimensions {shape:?}, but its annotation \"{}\" has {}",
                shape.len(),
                node.meta.annotation().unwrap_or_default(),
                sizes.len()
            ));
        }
        for (dim, (size, &actual)) in sizes.iter().zip(shape).enumerate() {
            let source = format!("{name} dim {dim}");
            match size.as_symbol() {
                Some(symbol) => self.bind(symbol, actual, &source)?,
                None => self.checks.push((size.clone(), actual, source)),
            }
        }
        Ok(())
    }

    /// Binds the symbol of a `Sym` input `name` from its value.
    pub fn bind_sym(&mut self, graph: &Graph, name: &str, value: i64) -> Result<(), String> {
        let Some(Meta::Sym(e)) = graph.find(name).map(|id| &graph.node(id).meta) else {
            return Ok(());
        };
        match e.as_symbol() {
            Some(symbol) => self.bind(symbol, value, &format!("input `{name}`")),
            None => {
                self.checks
                    .push((e.clone(), value, format!("input `{name}`")));
                Ok(())
            }
        }
    }

    /// The bindings, once every symbol of `graph`'s inputs has a value and every size
    /// agrees with its annotation.
    pub fn finish(self, graph: &Graph) -> Result<Bindings, String> {
        let missing: Vec<&str> = input_symbols(graph)
            .into_iter()
            .filter(|s| !self.values.contains_key(*s))
            .collect();
        if !missing.is_empty() {
            return Err(format!(
                "no value for size symbol{} {}: give the inputs, or --bind {}=N",
                if missing.len() > 1 { "s" } else { "" },
                missing.join(", "),
                missing[0]
            ));
        }
        for (size, actual, source) in &self.checks {
            let want = size.eval(&self.values)?;
            if want != *actual {
                let says = match size.as_int() {
                    Some(_) => want.to_string(),
                    None => format!("{size} = {want}"),
                };
                return Err(format!(
                    "{source} is {actual}, but its annotation says {says}"
                ));
            }
        }
        Ok(self.values)
    }
}

/// The size symbols the graph's inputs mention, in input order.
pub fn input_symbols(graph: &Graph) -> Vec<&str> {
    let mut out: Vec<&str> = Vec::new();
    for id in graph.placeholders() {
        let exprs: Vec<&SymExpr> = match &graph.node(id).meta {
            Meta::SymTensor(t) => t.sizes.iter().collect(),
            Meta::Sym(e) => vec![e],
            _ => continue,
        };
        for s in exprs.into_iter().flat_map(SymExpr::symbols) {
            if !out.contains(&s) {
                out.push(s);
            }
        }
    }
    out
}

/// True when any node of `graph` has a symbolic annotation.
pub fn is_dynamic(graph: &Graph) -> bool {
    graph.nodes.iter().any(|n| n.meta.is_symbolic())
}

/// `graph` with every symbol replaced by its value in `bindings` (see the module docs).
pub fn specialize(graph: &Graph, bindings: &Bindings) -> Result<Graph, String> {
    let mut out = graph.clone();
    let mut sym_values: Vec<Option<i64>> = vec![None; graph.nodes.len()];
    for (i, node) in graph.nodes.iter().enumerate() {
        let at = |e: String| format!("node `{}`: {e}", node.name);
        match &node.meta {
            Meta::SymTensor(t) => {
                out.nodes[i].meta = Meta::Tensor(t.bind(bindings).map_err(at)?);
            }
            Meta::Sym(e) => {
                let value = e.eval(bindings).map_err(at)?;
                sym_values[i] = Some(value);
                out.nodes[i].meta = Meta::Tensor(TensorMeta::new(Dtype::Int64, Vec::new()));
                if !node.is_placeholder() {
                    out.nodes[i].kind = NodeKind::Call {
                        op: OpName::aten("scalar_tensor", "default"),
                        args: vec![Value::Int(value)],
                        kwargs: vec![("dtype".into(), Value::Dtype(Dtype::Int64))],
                    };
                    continue;
                }
            }
            Meta::Unknown if is_size_call(&node.kind) => {
                return Err(at(
                    "a size computed in the graph needs its \"Sym(...)\" annotation to be specialized"
                        .into(),
                ));
            }
            _ => {}
        }
        if let NodeKind::Call { args, kwargs, .. } = &mut out.nodes[i].kind {
            for v in args.iter_mut().chain(kwargs.iter_mut().map(|(_, v)| v)) {
                substitute(v, &sym_values);
            }
        }
    }
    Ok(out)
}

/// A call that computes a size: an `operator`/`torch.sym_*` function or `aten.sym_*`.
fn is_size_call(kind: &NodeKind) -> bool {
    matches!(kind, NodeKind::Call { op, .. }
        if op.is_python() || (op.namespace == "aten" && op.name.starts_with("sym_")))
}

/// Replaces references to size nodes in `v` with their values.
fn substitute(v: &mut Value, sym_values: &[Option<i64>]) {
    match v {
        Value::Node(NodeId(id)) => {
            if let Some(Some(value)) = sym_values.get(*id as usize) {
                *v = Value::Int(*value);
            }
        }
        Value::List(items) | Value::Tuple(items) => {
            items.iter_mut().for_each(|i| substitute(i, sym_values));
        }
        _ => {}
    }
}
