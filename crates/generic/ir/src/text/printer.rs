//! Printer for the canonical (flat) `print_readable()` form, liveness tails included.

use std::fmt::Write as _;

use crate::graph::{Graph, NodeId, NodeKind};
use crate::types::OpName;
use crate::value::Value;

/// Prints `graph` as PyTorch's `print_readable()` does for a flat graph, including the
/// `;  a = b = None` tails that free each value after its last use.
pub fn print_graph(graph: &Graph) -> String {
    print_graph_as(graph, &graph.name)
}

/// [`print_graph`] with another class name (`class Repro(torch.nn.Module):`, as
/// PyTorch's repro scripts name the module).
pub fn print_graph_as(graph: &Graph, class_name: &str) -> String {
    let names: Vec<&str> = graph.nodes.iter().map(|n| n.name.as_str()).collect();
    let name_of = |id: NodeId| -> String {
        names
            .get(id.index())
            .map_or_else(|| format!("__invalid_node_{}", id.0), |n| n.to_string())
    };
    let frees = liveness_tails(graph);
    let mut out = String::with_capacity(graph.nodes.len() * 96 + 256);
    let _ = writeln!(out, "class {class_name}(torch.nn.Module):");
    out.push_str("    def forward(self");
    let param = |node: &crate::graph::Node| -> Option<&str> {
        graph
            .param_names
            .get(node.name.as_str())
            .map(String::as_str)
    };
    for node in graph.nodes.iter().filter(|n| n.is_placeholder()) {
        out.push_str(", ");
        out.push_str(param(node).unwrap_or(&node.name));
        if let Some(ann) = node.meta.annotation() {
            let _ = write!(out, ": \"{ann}\"");
        }
    }
    out.push_str("):\n");
    // Dynamo's aliases: the placeholder's name for its parameter.
    for node in graph.nodes.iter().filter(|n| n.is_placeholder()) {
        if let Some(p) = param(node) {
            let _ = writeln!(out, "        {} = {p}", node.name);
        }
    }
    for (i, node) in graph.nodes.iter().enumerate() {
        if node.is_placeholder() {
            continue;
        }
        out.push_str("        ");
        // FX prints an in-place operator as `a += b;  out = a`, and `operator.setitem` as
        // `a[i] = b;  out = a`.
        let set_item = is_set_item(&node.kind);
        if let NodeKind::Call { op, args, kwargs } = &node.kind {
            if let (Some(symbol), [a, b], true) = (op.augmented(), &args[..], kwargs.is_empty()) {
                let _ = a.write_python(&mut out, &name_of);
                let _ = write!(out, " {symbol}= ");
                let _ = b.write_python(&mut out, &name_of);
                out.push_str(";  ");
            }
            if let (true, [a, i, b]) = (set_item, &args[..]) {
                let _ = a.write_python(&mut out, &name_of);
                out.push('[');
                let _ = i.write_python(&mut out, &name_of);
                out.push_str("] = ");
                let _ = b.write_python(&mut out, &name_of);
                out.push_str(";  ");
            }
        }
        out.push_str(&node.name);
        if let Some(ann) = node.meta.annotation() {
            let _ = write!(out, ": \"{ann}\"");
        }
        out.push_str(" = ");
        match &node.kind {
            NodeKind::Call { op, args, kwargs }
                if (op.augmented().is_some() && args.len() == 2 && kwargs.is_empty())
                    || set_item =>
            {
                let _ = args[0].write_python(&mut out, &name_of);
            }
            NodeKind::Call { op, args, kwargs }
                if op.prefix().is_some() && args.len() == 1 && kwargs.is_empty() =>
            {
                out.push_str(op.prefix().unwrap_or_default());
                let _ = args[0].write_python(&mut out, &name_of);
            }
            NodeKind::Call { op, args, kwargs }
                if args.len() == 2 && kwargs.is_empty() && op.infix().is_some() =>
            {
                let symbol = op.infix().unwrap_or_default();
                let _ = args[0].write_python(&mut out, &name_of);
                let _ = write!(out, " {symbol} ");
                let _ = args[1].write_python(&mut out, &name_of);
            }
            NodeKind::Call { op, args, kwargs }
                if *op == OpName::python("operator", "getitem")
                    && args.len() == 2
                    && kwargs.is_empty() =>
            {
                let _ = args[0].write_python(&mut out, &name_of);
                out.push('[');
                let _ = args[1].write_python(&mut out, &name_of);
                out.push(']');
            }
            NodeKind::Call { op, args, kwargs } => {
                // A Tensor method reads `self.method(...)`; anything else `path(...)`.
                let args = match args.split_first() {
                    Some((this, rest)) if op.is_method() => {
                        let _ = this.write_python(&mut out, &name_of);
                        out.push('.');
                        out.push_str(&op.name);
                        rest
                    }
                    _ => {
                        out.push_str(&op.torch_path());
                        &args[..]
                    }
                };
                out.push('(');
                let mut first = true;
                for a in args {
                    if !first {
                        out.push_str(", ");
                    }
                    first = false;
                    let _ = a.write_python(&mut out, &name_of);
                }
                for (k, v) in kwargs {
                    if !first {
                        out.push_str(", ");
                    }
                    first = false;
                    out.push_str(k);
                    out.push_str(" = ");
                    let _ = v.write_python(&mut out, &name_of);
                }
                out.push(')');
            }
            NodeKind::GetItem { source, index } => {
                let _ = write!(out, "{}[{index}]", name_of(*source));
            }
            NodeKind::GetAttr { target } => {
                let _ = write!(out, "self.{target}");
            }
            NodeKind::Placeholder => unreachable!("placeholders are skipped above"),
        }
        if !frees[i].is_empty() {
            out.push_str(";  ");
            for id in &frees[i] {
                out.push_str(&name_of(*id));
                out.push_str(" = ");
            }
            out.push_str("None");
        }
        out.push('\n');
    }
    if let Some(outputs) = &graph.output {
        out.push_str("        return ");
        let _ = Value::Tuple(outputs.clone()).write_python(&mut out, &name_of);
        out.push('\n');
    }
    out
}

/// For each node, the values FX frees right after it: inputs whose last use it is (in
/// argument order), then the node itself when nothing reads it. Outputs are never freed.
fn liveness_tails(graph: &Graph) -> Vec<Vec<NodeId>> {
    let n = graph.nodes.len();
    let mut last_use_seen = vec![false; n];
    let mut tails: Vec<Vec<NodeId>> = vec![Vec::new(); n];
    let mut mark = |id: NodeId| -> bool {
        match last_use_seen.get_mut(id.index()) {
            Some(seen) if !*seen => {
                *seen = true;
                true
            }
            _ => false,
        }
    };
    for v in graph.outputs() {
        v.for_each_node(&mut |id| {
            mark(id);
        });
    }
    for user in graph.ids().rev() {
        let node = graph.node(user);
        let mut freed = Vec::new();
        node.for_each_input(|id| {
            if mark(id) {
                freed.push(id);
            }
        });
        tails[user.index()] = freed;
    }
    let users = graph.users();
    for id in graph.ids() {
        if !graph.node(id).is_placeholder() && users.is_unused(id) {
            tails[id.index()].push(id);
        }
    }
    tails
}

/// `operator.setitem(a, i, b)`, which FX prints as `a[i] = b;  out = a`.
fn is_set_item(kind: &NodeKind) -> bool {
    matches!(kind, NodeKind::Call { op, args, kwargs }
        if *op == OpName::python("operator", "setitem") && args.len() == 3 && kwargs.is_empty())
}
