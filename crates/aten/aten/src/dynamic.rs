//! Dynamic-shape and dynamo-level graphs meet real tensors: symbols bound from the inputs'
//! sizes, and the static aten graph that runs in their place.
//!
//! Tools that only show or keep a graph (the minifier's candidates, repro directories)
//! work on the graph as written; everything that runs one runs its [`runnable`] form,
//! whose node names (and so values) are the written graph's.

use std::collections::HashMap;

use graphbug_ir::{lower, specialize, Bindings, Graph, Meta, Node};
use tch::Tensor;

/// True when `graph` cannot run as written: it has symbolic sizes or dynamo-level calls.
pub fn needs_runnable_form(graph: &Graph) -> bool {
    specialize::is_dynamic(graph) || lower::needs_lowering(graph)
}

/// The static aten graph that runs `graph`: its symbols replaced by their values in
/// `bindings` (see [`graphbug_ir::specialize`]) and its Python-level calls lowered to aten
/// through libtorch's schemas (see [`graphbug_ir::lower`]). Node names are kept.
pub fn runnable(graph: &Graph, bindings: &Bindings) -> Result<Graph, String> {
    let mut out = graph.clone();
    if specialize::is_dynamic(&out) {
        specialize::specialize_in_place(&mut out, bindings)?;
    }
    lower_in_place(&mut out)?;
    Ok(out)
}

/// Lowers a dynamo-level graph to aten in place through libtorch's schemas (see
/// [`graphbug_ir::lower`]); an aten graph is left alone.
pub fn lower_in_place(graph: &mut Graph) -> Result<(), String> {
    if lower::needs_lowering(graph) {
        *graph = lower::lower_to_aten(graph, &crate::LibtorchSchemas)
            .map_err(|e| format!("lowering the dynamo-level graph to aten: {e}"))?;
    }
    Ok(())
}

/// The bindings of the symbols `graph` mentions anywhere (inputs, nodes), out of `all`.
pub fn bindings_used(graph: &Graph, all: &Bindings) -> Bindings {
    let mut used = Bindings::new();
    for symbol in graph.nodes.iter().flat_map(|n| n.meta.symbols()) {
        if let Some(&v) = all.get(symbol) {
            used.insert(symbol.to_string(), v);
        }
    }
    used
}

/// Binds the size symbols of `graph`'s inputs from `inputs`, given in placeholder order
/// (`Sym` inputs as 0-d integer tensors).
pub fn bind_positional(graph: &Graph, inputs: &[Tensor]) -> Result<Bindings, String> {
    let mut binder = specialize::Binder::new();
    for (id, t) in graph.placeholders().into_iter().zip(inputs) {
        bind_one(&mut binder, graph.node(id), t)?;
    }
    binder.finish(graph)
}

/// One input's contribution to the bindings.
fn bind_one(binder: &mut specialize::Binder, node: &Node, t: &Tensor) -> Result<(), String> {
    match &node.meta {
        Meta::Sym(_) => {
            let value = t
                .f_int64_value(&[])
                .map_err(|e| format!("input `{}` is a size, but {e}", node.name))?;
            binder.bind_sym(node, value)
        }
        _ => binder.bind_tensor(node, &t.size()),
    }
}

/// A dynamic-shape graph's symbols, bound: their values, and the values of its `Sym`
/// inputs by input name.
#[derive(Clone, Debug, Default)]
pub struct Bound {
    /// Every size symbol's value.
    pub bindings: Bindings,
    /// The value of each `Sym` input, by name.
    pub sym_inputs: HashMap<String, i64>,
}

/// Makes a dynamic-shape graph static in place: binds its symbols with [`bind_inputs`],
/// then specializes it (see [`graphbug_ir::specialize`]). A static graph is left alone.
pub fn specialize_with_inputs(
    graph: &mut Graph,
    named: Option<&mut Vec<(String, Tensor)>>,
    binds: &[(String, i64)],
) -> Result<Bound, String> {
    let bound = bind_inputs(graph, named, binds)?;
    if specialize::is_dynamic(graph) {
        specialize::specialize_in_place(graph, &bound.bindings)?;
    }
    Ok(bound)
}

/// Binds a dynamic-shape graph's size symbols from `binds` (`--bind s0=8`) and the sizes
/// (and `Sym` values) of the tensors in `named` (by input name, or `arg0..argN`). The
/// values of `Sym` inputs that `named` lacks are added to it as 0-d int64 tensors. A
/// static graph binds nothing (and `binds` must be empty).
pub fn bind_inputs(
    graph: &Graph,
    named: Option<&mut Vec<(String, Tensor)>>,
    binds: &[(String, i64)],
) -> Result<Bound, String> {
    if !specialize::is_dynamic(graph) {
        if let Some((symbol, _)) = binds.first() {
            return Err(format!(
                "--bind {symbol}=...: the graph has no symbolic sizes"
            ));
        }
        return Ok(Bound::default());
    }
    let placeholders: Vec<&Node> = graph
        .placeholders()
        .into_iter()
        .map(|id| graph.node(id))
        .collect();
    let by_name: HashMap<&str, &Node> =
        placeholders.iter().map(|n| (n.name.as_str(), *n)).collect();
    // Files may name inputs by position (arg0..argN) instead of by placeholder.
    let positional = named
        .as_deref()
        .is_some_and(|n| n.iter().all(|(k, _)| !by_name.contains_key(k.as_str())));
    let node_of = |key: &str| -> Option<&Node> {
        match key
            .strip_prefix("arg")
            .and_then(|k| k.parse::<usize>().ok())
        {
            Some(k) if positional => placeholders.get(k).copied(),
            _ => by_name.get(key).copied(),
        }
    };
    let mut binder = specialize::Binder::new();
    for (symbol, value) in binds {
        binder.bind(symbol, *value, "--bind")?;
    }
    for (key, t) in named.iter().flat_map(|n| n.iter()) {
        if let Some(node) = node_of(key) {
            bind_one(&mut binder, node, t)?;
        }
    }
    let bindings = binder.finish(graph)?;
    let mut sym_inputs = HashMap::new();
    for node in &placeholders {
        if let Meta::Sym(e) = &node.meta {
            sym_inputs.insert(node.name.to_string(), e.eval(&bindings)?);
        }
    }
    if let Some(named) = named {
        for (k, node) in placeholders.iter().enumerate() {
            let key = if positional {
                format!("arg{k}")
            } else {
                node.name.to_string()
            };
            if let Some(value) = sym_inputs.get(node.name.as_str()) {
                if !named.iter().any(|(have, _)| *have == key) {
                    named.push((key, Tensor::from(*value)));
                }
            }
        }
    }
    Ok(Bound {
        bindings,
        sym_inputs,
    })
}
