//! Dynamic-shape graphs made static: bind each size symbol to a value, then rewrite the
//! graph with those values, so every tool that runs static graphs runs it.
//!
//! [`Binder`] collects the values from the inputs' real sizes, the `Sym` inputs and the
//! user's `--bind s0=8`, and reports a contradiction with both sources. [`specialize`]
//! evaluates every symbolic annotation: tensors get static shapes, a `Sym` input becomes a
//! 0-d int64 input, a size computed in the graph (`mul = s0 * 2`, `sym_size.int`) becomes
//! the constant `scalar_tensor(value)`, and arguments that read one get the integer.

use std::collections::BTreeMap;

use crate::graph::{Graph, Node, NodeId, NodeKind};
use crate::sym::{Bindings, SymExpr};
use crate::types::{Dtype, Meta, OpName, TensorMeta};
use crate::value::Value;

/// Symbol values gathered from a graph's inputs, with where each came from.
#[derive(Clone, Debug, Default)]
pub struct Binder {
    values: Bindings,
    sources: BTreeMap<String, String>,
    /// Expression sizes to check once every symbol is bound: (expression, actual, where).
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
        self.bind_with(symbol, value, || source.to_string())
    }

    /// [`Binder::bind`], making the source's description only when it is needed.
    fn bind_with(
        &mut self,
        symbol: &str,
        value: i64,
        source: impl FnOnce() -> String,
    ) -> Result<(), String> {
        if let Some(&old) = self.values.get(symbol) {
            if old != value {
                return Err(format!(
                    "{symbol} = {old} from {} but {value} from {}",
                    self.sources[symbol],
                    source()
                ));
            }
            return Ok(());
        }
        self.values.insert(symbol.to_string(), value);
        self.sources.insert(symbol.to_string(), source());
        Ok(())
    }

    /// Binds the symbols of input `node` (a placeholder) from the real `shape` of the
    /// tensor given for it: a size that is a bare symbol binds it, a static size must
    /// equal it, and an expression is checked when [`Binder::finish`] has every value.
    pub fn bind_tensor(&mut self, node: &Node, shape: &[i64]) -> Result<(), String> {
        let name = &node.name;
        let rank_error = |rank: usize| {
            format!(
                "input `{name}` has {} dimensions {shape:?}, but its annotation \"{}\" has {rank}",
                shape.len(),
                node.meta.annotation().unwrap_or_default(),
            )
        };
        match &node.meta {
            Meta::SymTensor(t) => {
                if t.sizes.len() != shape.len() {
                    return Err(rank_error(t.sizes.len()));
                }
                for (dim, (size, &actual)) in t.sizes.iter().zip(shape).enumerate() {
                    if let Some(symbol) = size.as_symbol() {
                        self.bind_with(symbol, actual, || format!("{name} dim {dim}"))?;
                    } else if let Some(want) = size.as_int() {
                        check_size(name, dim, actual, want)?;
                    } else {
                        self.checks
                            .push((size.clone(), actual, format!("{name} dim {dim}")));
                    }
                }
            }
            Meta::Tensor(t) => {
                if t.shape.len() != shape.len() {
                    return Err(rank_error(t.shape.len()));
                }
                for (dim, (&want, &actual)) in t.shape.iter().zip(shape).enumerate() {
                    check_size(name, dim, actual, want)?;
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// Binds the symbol of a `Sym` input `node` from its value.
    pub fn bind_sym(&mut self, node: &Node, value: i64) -> Result<(), String> {
        let Meta::Sym(e) = &node.meta else {
            return Ok(());
        };
        let source = || format!("input `{}`", node.name);
        match e.as_symbol() {
            Some(symbol) => self.bind_with(symbol, value, source),
            None => {
                self.checks.push((e.clone(), value, source()));
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
                return Err(format!(
                    "{source} is {actual}, but its annotation says {size} = {want}"
                ));
            }
        }
        Ok(self.values)
    }
}

/// A static size of input `name` against the tensor's.
fn check_size(name: &str, dim: usize, actual: i64, want: i64) -> Result<(), String> {
    if actual == want {
        return Ok(());
    }
    Err(format!(
        "{name} dim {dim} is {actual}, but its annotation says {want}"
    ))
}

/// The size symbols the graph's inputs mention, in input order.
pub fn input_symbols(graph: &Graph) -> Vec<&str> {
    let mut out: Vec<&str> = Vec::new();
    for id in graph.placeholders() {
        for s in graph.node(id).meta.symbols() {
            if !out.contains(&s) {
                out.push(s);
            }
        }
    }
    out
}

/// The symbols `graph` mentions that none of its inputs binds (by a size, or a `Sym`
/// value, that is the bare symbol), with a node mentioning each: empty when the graph runs
/// from its inputs alone.
pub fn unbound_symbols(graph: &Graph) -> Vec<(&str, &str)> {
    let bound: Vec<&str> = graph
        .placeholders()
        .into_iter()
        .flat_map(|id| graph.node(id).meta.bound_symbols())
        .collect();
    let mut out: Vec<(&str, &str)> = Vec::new();
    for node in &graph.nodes {
        for s in node.meta.symbols() {
            if !bound.contains(&s) && !out.iter().any(|(_, t)| *t == s) {
                out.push((node.name.as_str(), s));
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
    specialize_in_place(&mut out, bindings)?;
    Ok(out)
}

/// [`specialize`] without a copy; on error the graph is left partly specialized.
pub fn specialize_in_place(graph: &mut Graph, bindings: &Bindings) -> Result<(), String> {
    let mut sym_values: Vec<Option<Value>> = vec![None; graph.nodes.len()];
    for (i, node) in graph.nodes.iter_mut().enumerate() {
        let at = |e: String| format!("node `{}`: {e}", node.name);
        match &node.meta {
            Meta::SymTensor(t) => {
                node.meta = Meta::Tensor(t.bind(bindings).map_err(at)?);
            }
            Meta::Sym(e) => {
                // A size, or a SymFloat whose value the annotation spells out.
                let reads_data = matches!(&node.kind, NodeKind::Call { op, .. }
                    if matches!(op.name.as_str(), "item" | "_local_scalar_dense" | "tolist"));
                let (value, dtype) = match e.as_float() {
                    Some(f) => (Value::Float(f), Dtype::Float64),
                    None => match e.eval(bindings) {
                        Ok(v) => (Value::Int(v), Dtype::Int64),
                        Err(_) if reads_data => {
                            return Err(at(format!(
                                "\"Sym({e})\" is read from a tensor's data (an unbacked symbol); \
                                 graphbug binds sizes from the inputs' shapes, not data-dependent values, yet"
                            )))
                        }
                        Err(err) => return Err(at(err)),
                    },
                };
                sym_values[i] = Some(value.clone());
                node.meta = Meta::Tensor(TensorMeta::new(dtype, Vec::new()));
                if !node.is_placeholder() {
                    node.kind = NodeKind::Call {
                        op: OpName::aten("scalar_tensor", "default"),
                        args: vec![value],
                        kwargs: vec![("dtype".into(), Value::Dtype(dtype))],
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
        if let NodeKind::Call { args, kwargs, .. } = &mut node.kind {
            for v in args.iter_mut().chain(kwargs.iter_mut().map(|(_, v)| v)) {
                substitute(v, &sym_values);
            }
        }
    }
    Ok(())
}

/// A call that computes a size: an `operator` function (but `setitem`, a statement), a
/// `sym_*` function (torch's or aten's), or a Tensor method that reads sizes or data
/// (`x.size(0)`, `x.item()`).
fn is_size_call(kind: &NodeKind) -> bool {
    let NodeKind::Call { op, .. } = kind else {
        return false;
    };
    (op.namespace == "operator" && op.name != "setitem")
        || op.name.starts_with("sym_")
        || (op.is_method()
            && matches!(
                op.name.as_str(),
                "size" | "numel" | "dim" | "stride" | "storage_offset" | "item"
            ))
}

/// Replaces references to size nodes in `v` with their values.
fn substitute(v: &mut Value, sym_values: &[Option<Value>]) {
    match v {
        Value::Node(NodeId(id)) => {
            if let Some(Some(value)) = sym_values.get(*id as usize) {
                *v = value.clone();
            }
        }
        Value::List(items) | Value::Tuple(items) | Value::Slice(items) => {
            items.iter_mut().for_each(|i| substitute(i, sym_values));
        }
        _ => {}
    }
}
