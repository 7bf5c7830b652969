//! Dynamic-shape graphs meet real tensors: symbols bound from the inputs' sizes.

use std::collections::HashMap;

use graphbug_ir::{specialize, Graph, Meta, Node};
use tch::Tensor;

/// Makes a dynamic-shape graph static in place: binds its size symbols from `binds`
/// (`--bind s0=8`) and the sizes (and `Sym` values) of the tensors in `named`, then
/// specializes it (see [`graphbug_ir::specialize`]). The values of `Sym` inputs that
/// `named` lacks are added to it as 0-d int64 tensors; they are also returned by input
/// name. A static graph is left alone (and `binds` must be empty).
pub fn specialize_with_inputs(
    graph: &mut Graph,
    named: Option<&mut Vec<(String, Tensor)>>,
    binds: &[(String, i64)],
) -> Result<HashMap<String, i64>, String> {
    if !specialize::is_dynamic(graph) {
        if let Some((symbol, _)) = binds.first() {
            return Err(format!(
                "--bind {symbol}=...: the graph has no symbolic sizes"
            ));
        }
        return Ok(HashMap::new());
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
        let Some(node) = node_of(key) else {
            continue;
        };
        match &node.meta {
            Meta::Sym(_) => {
                let value = t
                    .f_int64_value(&[])
                    .map_err(|e| format!("input `{}` is a size, but {e}", node.name))?;
                binder.bind_sym(node, value)
            }
            _ => binder.bind_tensor(node, &t.size()),
        }?;
    }
    let bindings = binder.finish(graph)?;
    let mut sym_inputs = HashMap::new();
    for node in &placeholders {
        if let Meta::Sym(e) = &node.meta {
            sym_inputs.insert(node.name.clone(), e.eval(&bindings)?);
        }
    }
    if let Some(named) = named {
        for (k, node) in placeholders.iter().enumerate() {
            let key = if positional {
                format!("arg{k}")
            } else {
                node.name.clone()
            };
            if let Some(value) = sym_inputs.get(&node.name) {
                if !named.iter().any(|(have, _)| *have == key) {
                    named.push((key, Tensor::from(*value)));
                }
            }
        }
    }
    specialize::specialize_in_place(graph, &bindings)?;
    Ok(sym_inputs)
}
