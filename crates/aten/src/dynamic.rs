//! Dynamic-shape graphs meet real tensors: symbols bound from the inputs' sizes.

use std::collections::HashMap;

use graphbug_ir::{specialize, Graph, Meta};
use tch::Tensor;

/// Whether an inputs file names the inputs by position (`arg0..argN`) rather than by
/// placeholder name.
pub fn is_positional(graph: &Graph, named: Option<&[(String, Tensor)]>) -> bool {
    named.is_some_and(|n| n.iter().all(|(k, _)| graph.find(k).is_none()))
}

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
    let placeholder_names = graph.placeholder_names();
    let positional = is_positional(graph, named.as_deref().map(Vec::as_slice));
    let input_name = |key: &str| -> String {
        key.strip_prefix("arg")
            .and_then(|k| k.parse::<usize>().ok())
            .filter(|_| positional)
            .and_then(|k| placeholder_names.get(k).cloned())
            .unwrap_or_else(|| key.to_string())
    };
    let mut binder = specialize::Binder::new();
    for (symbol, value) in binds {
        binder.bind(symbol, *value, "--bind")?;
    }
    for (key, t) in named.iter().flat_map(|n| n.iter()) {
        let name = &input_name(key);
        match graph.find(name).map(|id| &graph.node(id).meta) {
            Some(Meta::Sym(_)) => {
                let value = t
                    .f_int64_value(&[])
                    .map_err(|e| format!("input `{name}` is a size, but {e}"))?;
                binder.bind_sym(graph, name, value)
            }
            _ => binder.bind_tensor(graph, name, &t.size()),
        }?;
    }
    let bindings = binder.finish(graph)?;
    let mut sym_inputs = HashMap::new();
    for id in graph.placeholders() {
        if let Meta::Sym(e) = &graph.node(id).meta {
            let value = e.eval(&bindings)?;
            sym_inputs.insert(graph.node(id).name.clone(), value);
        }
    }
    if let Some(named) = named {
        for (k, name) in placeholder_names.iter().enumerate() {
            let key = if positional {
                format!("arg{k}")
            } else {
                name.clone()
            };
            if let Some(value) = sym_inputs.get(name) {
                if !named.iter().any(|(have, _)| *have == key) {
                    named.push((key, Tensor::from(*value)));
                }
            }
        }
    }
    *graph = specialize::specialize(graph, &bindings)?;
    Ok(sym_inputs)
}
