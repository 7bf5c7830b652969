//! Fault specs: `fault:<kind>[=<amount>]@<target>[#<k>][%<percent>][+<inner>]`, which
//! node of a graph a testing fault targets, in any dialect (aten graphs through
//! graphbug-backends' `fault:` backend, XLA programs through graphbug-xla's rewrites).

use std::fmt;

use crate::{Graph, Node, NodeId, OpName};

/// The grammar of fault specs, shown with every parse error.
pub const GRAMMAR: &str = "\
fault:<kind>[=<amount>]@<target>[%<percent>][+<inner>]
  <kind>    compile | runtime | accuracy | nan | crash | hang,
            or, breaking the op's schema (to test checkers): alias | mutate | shape
  <amount>  accuracy only: added to the op's output (default 1.0)
  <target>  <op>[#<k>]: every node calling <op>, or only the k-th, in graph order, from 1
              <op> is relu | aten.relu | aten.relu.default | aten::relu.default;
              in XLA programs an HLO opcode or StableHLO op: add | hlo.add | dot_general
            node:<name> (or a bare <name> no node calls as an op): the node of that name
              (an HLO instruction such as add.3, of any computation the entry calls; a
              StableHLO value of main such as 5), which stays the same node, calling the
              same op, while the minifier removes others
  <percent> 1-99: a flaky fault, injected in that share of compiles (a fixed
              pseudo-random sequence in each process)
  <inner>   the backend that compiles the graph (default: eager); for XLA programs
            pjrt:<plugin> (default: pjrt:cpu) or iree:<target>
GRAPHBUG_INJECT_FAULT takes the same spec without `+<inner>`; it applies to any backend.";

/// What an injected fault does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultKind {
    /// Compilation fails.
    Compile,
    /// Running the node raises an error.
    Runtime,
    /// The node's value is off by an amount.
    Accuracy,
    /// The node's value becomes NaN.
    Nan,
    /// The process aborts.
    Crash,
    /// The node never returns.
    Hang,
    /// The value aliases the op's input, which the schema does not declare.
    Alias,
    /// The op's input is changed in place, which the schema does not declare.
    Mutate,
    /// The value has another shape than the op's meta function gives.
    Shape,
}

impl FaultKind {
    /// The kind's name in a spec (`accuracy`).
    pub fn name(self) -> &'static str {
        match self {
            FaultKind::Compile => "compile",
            FaultKind::Runtime => "runtime",
            FaultKind::Accuracy => "accuracy",
            FaultKind::Nan => "nan",
            FaultKind::Crash => "crash",
            FaultKind::Hang => "hang",
            FaultKind::Alias => "alias",
            FaultKind::Mutate => "mutate",
            FaultKind::Shape => "shape",
        }
    }
}

/// Which ops a spec targets: a name, optionally qualified by namespace and overload.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OpPattern {
    /// Namespace, if given (`aten`).
    pub namespace: Option<String>,
    /// Op name (`relu`).
    pub name: String,
    /// Overload, if given (`default`).
    pub overload: Option<String>,
}

impl OpPattern {
    /// Parses `relu`, `aten.relu`, `aten.relu.default`, `aten::relu.default`, or in XLA
    /// programs `add`, `hlo.add`, `stablehlo.dot_general`; also `torch.ops.aten.relu.default`.
    pub fn parse(text: &str) -> Result<OpPattern, String> {
        if let Some(rest) = text.strip_prefix("torch.ops.") {
            return OpPattern::parse(rest);
        }
        let ident = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_alphanumeric() || c == '_');
        let parts: Vec<&str> = match text.split_once("::") {
            Some((ns, rest)) => std::iter::once(ns).chain(rest.split('.')).collect(),
            None => text.split('.').collect(),
        };
        if !parts.iter().all(|p| ident(p)) {
            return Err(format!("bad op `{text}`"));
        }
        Ok(match parts.as_slice() {
            [name] => OpPattern {
                namespace: None,
                name: name.to_string(),
                overload: None,
            },
            [ns, name] => OpPattern {
                namespace: Some(ns.to_string()),
                name: name.to_string(),
                overload: None,
            },
            [ns, name, ov] => OpPattern {
                namespace: Some(ns.to_string()),
                name: name.to_string(),
                overload: Some(ov.to_string()),
            },
            _ => return Err(format!("bad op `{text}`")),
        })
    }

    /// True when `op` is one of the ops the pattern names.
    pub fn matches(&self, op: &OpName) -> bool {
        self.name == op.name
            && self.namespace.as_ref().is_none_or(|ns| *ns == op.namespace)
            && self.overload.as_ref().is_none_or(|ov| *ov == op.overload)
    }
}

impl fmt::Display for OpPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(ns) = &self.namespace {
            write!(f, "{ns}.")?;
        }
        f.write_str(&self.name)?;
        if let Some(ov) = &self.overload {
            write!(f, ".{ov}")?;
        }
        Ok(())
    }
}

/// A parsed fault spec.
#[derive(Clone, Debug, PartialEq)]
pub struct FaultSpec {
    /// What the fault does.
    pub kind: FaultKind,
    /// For accuracy faults: how much is added to the value.
    pub amount: f64,
    /// The op whose nodes are faulted.
    pub op: OpPattern,
    /// Only the k-th such node (1-based, graph order), or every one.
    pub occurrence: Option<usize>,
    /// The node faulted, by name (`node:<name>`), instead of the op's nodes.
    pub node: Option<String>,
    /// A flaky fault: injected in this percentage of compiles only.
    pub percent: Option<u32>,
    /// For a fault on a node by name: the op that node calls in the program the fault was
    /// bound to ([`FaultSpec::bound`]). A testing fault models a compiler bug in one
    /// operation, so it fires only while the node of that name still calls that op, never
    /// on a parameter or a constant the minifier put in its place. Not printed: the
    /// program a spec is bound to names the op.
    pub node_op: Option<String>,
}

impl FaultSpec {
    /// Parses `<kind>[=<amount>]@<op>[#<k>]` (the part after `fault:`, without `+inner`).
    pub fn parse(text: &str) -> Result<FaultSpec, String> {
        let bad = |why: String| format!("{why}\nexpected:\n{GRAMMAR}");
        let (kind_part, target) = text
            .split_once('@')
            .ok_or_else(|| bad(format!("`{text}` has no `@<op>`")))?;
        let (target, percent) = match target.split_once('%') {
            Some((t, p)) => {
                let p = p
                    .parse::<u32>()
                    .ok()
                    .filter(|p| (1..=99).contains(p))
                    .ok_or_else(|| bad(format!("bad percentage `%{p}` (1 to 99)")))?;
                (t, Some(p))
            }
            None => (target, None),
        };
        let (kind_text, amount_text) = match kind_part.split_once('=') {
            Some((k, a)) => (k, Some(a)),
            None => (kind_part, None),
        };
        let kind = match kind_text {
            "compile" => FaultKind::Compile,
            "runtime" => FaultKind::Runtime,
            "accuracy" => FaultKind::Accuracy,
            "nan" => FaultKind::Nan,
            "crash" => FaultKind::Crash,
            "hang" => FaultKind::Hang,
            "alias" => FaultKind::Alias,
            "mutate" => FaultKind::Mutate,
            "shape" => FaultKind::Shape,
            other => return Err(bad(format!("unknown fault kind `{other}`"))),
        };
        let amount = match (kind, amount_text) {
            (_, None) => 1.0,
            (FaultKind::Accuracy, Some(a)) => a
                .parse::<f64>()
                .ok()
                .filter(|v| v.is_finite())
                .ok_or_else(|| bad(format!("bad amount `{a}`")))?,
            (_, Some(_)) => {
                return Err(bad(format!(
                    "only accuracy faults take an amount, not {kind_text}"
                )))
            }
        };
        if let Some(name) = target.strip_prefix("node:") {
            // Aten names are identifiers; HLO's have dots and dashes (`add.3`).
            let ident = !name.is_empty()
                && name
                    .chars()
                    .all(|c| c.is_alphanumeric() || matches!(c, '_' | '.' | '-'));
            if !ident {
                return Err(bad(format!("bad node name `{name}`")));
            }
            return Ok(FaultSpec {
                kind,
                amount,
                op: OpPattern {
                    namespace: None,
                    name: name.to_string(),
                    overload: None,
                },
                occurrence: None,
                node: Some(name.to_string()),
                percent,
                node_op: None,
            });
        }
        let (op_text, occurrence) = match target.split_once('#') {
            Some((op, k)) => {
                let k = k
                    .parse::<usize>()
                    .ok()
                    .filter(|k| *k >= 1)
                    .ok_or_else(|| bad(format!("bad occurrence `#{k}` (counts from 1)")))?;
                (op, Some(k))
            }
            None => (target, None),
        };
        let op = OpPattern::parse(op_text).map_err(bad)?;
        Ok(FaultSpec {
            kind,
            amount,
            op,
            occurrence,
            node: None,
            percent,
            node_op: None,
        })
    }

    /// Parses the value of `GRAPHBUG_INJECT_FAULT` (an optional `fault:` prefix allowed).
    pub fn parse_env(text: &str) -> Result<FaultSpec, String> {
        let text = text.trim();
        let body = text.strip_prefix("fault:").unwrap_or(text);
        if body.contains('+') {
            return Err(format!(
                "`+<inner>` has no meaning in GRAPHBUG_INJECT_FAULT: the fault applies to whichever backend runs\nexpected:\n{GRAMMAR}"
            ));
        }
        FaultSpec::parse(body)
    }

    /// Why this spec faults no node of `graph` (`source` is how the user wrote it), with
    /// what the graph has instead; `None` when it names at least one node.
    pub fn why_no_target(&self, graph: &Graph, source: &str) -> Option<String> {
        if !self.targets(graph).is_empty() {
            return None;
        }
        if let Some(name) = &self.node {
            let now = graph
                .find(name)
                .and_then(|id| graph.node(id).op())
                .map(ToString::to_string);
            if let (Some(now), Some(was)) = (now, &self.node_op) {
                return Some(format!(
                    "`{source}` names no node: `{name}` calls `{now}` here, but `{was}` in the program the fault was pinned on (a fault stays on the operation it models a bug of)"
                ));
            }
            return Some(format!(
                "`{source}` names no node: the graph has no node `{name}` that calls an op; {}",
                closest_names(graph, name)
            ));
        }
        let matching: Vec<&Node> = graph
            .nodes
            .iter()
            .filter(|n| n.op().is_some_and(|op| self.op.matches(op)))
            .collect();
        match (self.occurrence, matching.len()) {
            (_, 0) => Some(format!(
                "`{source}` names no node: no node of the graph calls `{}`, and none is named so; {}; {}",
                self.op,
                closest_ops(graph, &self.op),
                closest_names(graph, &self.op.name)
            )),
            (Some(k), n) if k > n => Some(format!(
                "`{source}` names no node: the graph has {n} node{} calling `{}` ({}), so #{k} is out of range (#1 to #{n})",
                if n == 1 { "" } else { "s" },
                self.op,
                name_list(matching.iter().map(|n| n.name.as_str()))
            )),
            _ => None,
        }
    }

    /// The nodes this spec faults in `graph`, in graph order. A bare name no node calls
    /// as an op names the node of that name.
    pub fn targets(&self, graph: &Graph) -> Vec<NodeId> {
        // A named node is faulted when it calls an op (not an input or a constant), the op
        // it was bound to if it was.
        let call_named = |name: &str| -> Vec<NodeId> {
            graph
                .find(name)
                .filter(|&id| {
                    graph.node(id).op().is_some_and(|op| {
                        self.node_op
                            .as_ref()
                            .is_none_or(|was| op.to_string() == *was)
                    })
                })
                .into_iter()
                .collect()
        };
        if let Some(name) = &self.node {
            return call_named(name);
        }
        let all: Vec<NodeId> = graph
            .ids()
            .filter(|&i| graph.node(i).op().is_some_and(|op| self.op.matches(op)))
            .collect();
        let bare = self.op.namespace.is_none() && self.op.overload.is_none();
        if all.is_empty() && bare && self.occurrence.is_none() {
            return call_named(&self.op.name);
        }
        match self.occurrence {
            Some(k) => all.get(k - 1).copied().into_iter().collect(),
            None => all,
        }
    }

    /// The spec pinned to the node it faults in `graph` (`node:<name>`), when it names
    /// one node by position (`<op>#<k>`) or by a bare name: the fault then stays on that
    /// node while the minifier removes others (`#k` would count again in every candidate).
    pub fn pinned(&self, graph: &Graph) -> Option<FaultSpec> {
        let bare_name = self.occurrence.is_none()
            && self.node.is_none()
            && self.op.namespace.is_none()
            && !graph
                .nodes
                .iter()
                .any(|n| n.op().is_some_and(|op| self.op.matches(op)));
        if self.occurrence.is_none() && !bare_name {
            return None;
        }
        let [id] = self.targets(graph)[..] else {
            return None;
        };
        Some(FaultSpec {
            occurrence: None,
            node: Some(graph.node(id).name.to_string()),
            ..self.clone()
        })
    }

    /// The spec bound to `graph`, the program it is to test: a fault on a node by name
    /// (`node:<name>`) keeps the op that node calls there ([`FaultSpec::node_op`]), so that
    /// in a candidate cut from that program it fires only while the node still calls it.
    /// Other specs, and a name `graph` lacks, come back as they are.
    pub fn bound(&self, graph: &Graph) -> FaultSpec {
        let mut spec = self.clone();
        if let (Some(name), None) = (&self.node, &self.node_op) {
            spec.node_op = graph
                .find(name)
                .and_then(|id| graph.node(id).op())
                .map(ToString::to_string);
        }
        spec
    }
}

impl fmt::Display for FaultSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.kind.name())?;
        if self.kind == FaultKind::Accuracy && self.amount != 1.0 {
            write!(f, "={}", self.amount)?;
        }
        match &self.node {
            Some(name) => write!(f, "@node:{name}")?,
            None => write!(f, "@{}", self.op)?,
        }
        if let Some(k) = self.occurrence {
            write!(f, "#{k}")?;
        }
        if let Some(p) = self.percent {
            write!(f, "%{p}")?;
        }
        Ok(())
    }
}

/// Whether a flaky fault of `percent` fires in this compile: the next draw of a fixed
/// pseudo-random sequence (splitmix64 of a per-process count), so a process that compiles
/// the same graphs in the same order sees the same faults.
pub fn flaky_fires(percent: u32) -> bool {
    static DRAWS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = DRAWS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let mut z = n.wrapping_add(1).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    ((z ^ (z >> 31)) % 100) < u64::from(percent)
}

/// Up to five names, then how many more.
fn name_list<'a>(names: impl Iterator<Item = &'a str>) -> String {
    let names: Vec<&str> = names.collect();
    let shown: Vec<String> = names.iter().take(5).map(|n| format!("`{n}`")).collect();
    match names.len() {
        0..=5 => shown.join(", "),
        n => format!("{}, and {} more", shown.join(", "), n - 5),
    }
}

/// The ops of `graph` closest in name to `wanted` (at most five, nearest first, each with
/// its nodes), for an error that says what the graph has instead.
fn closest_ops(graph: &Graph, wanted: &OpPattern) -> String {
    let mut by_op: std::collections::BTreeMap<String, Vec<&str>> = Default::default();
    for n in &graph.nodes {
        if let Some(op) = n.op() {
            by_op
                .entry(format!("{}.{}.{}", op.namespace, op.name, op.overload))
                .or_default()
                .push(&n.name);
        }
    }
    if by_op.is_empty() {
        return "the graph calls no ops".into();
    }
    let mut ranked: Vec<(f64, &String)> = by_op
        .keys()
        .map(|op| {
            let name = op.split('.').nth(1).unwrap_or(op);
            let score = strsim::normalized_damerau_levenshtein(&wanted.name, name);
            (score, op)
        })
        .collect();
    ranked.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(b.1)));
    let shown: Vec<String> = ranked
        .iter()
        .take(5)
        .map(|(_, op)| format!("{op} ({})", name_list(by_op[*op].iter().copied())))
        .collect();
    format!("the closest ops in the graph: {}", shown.join("; "))
}

/// The node names of `graph` closest to `wanted` (at most five, nearest first).
fn closest_names(graph: &Graph, wanted: &str) -> String {
    let mut ranked: Vec<(f64, &str)> = graph
        .nodes
        .iter()
        .filter(|n| n.op().is_some())
        .map(|n| {
            (
                strsim::normalized_damerau_levenshtein(wanted, &n.name),
                n.name.as_str(),
            )
        })
        .collect();
    if ranked.is_empty() {
        return "the graph has no nodes to fault".into();
    }
    ranked.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(b.1)));
    let shown: Vec<String> = ranked
        .iter()
        .take(5)
        .map(|(_, n)| format!("`{n}`"))
        .collect();
    format!("the closest node names: {}", shown.join(", "))
}

/// A backend name with its `fault:` spec pinned to the node it faults in `graph` (see
/// [`FaultSpec::pinned`]), and that node's name; `None` for any other backend name.
pub fn pin_backend_name(backend: &str, graph: &Graph) -> Option<(String, String)> {
    let body = backend.strip_prefix("fault:")?;
    let (spec_text, inner) = match body.split_once('+') {
        Some((s, i)) => (s, Some(i)),
        None => (body, None),
    };
    let pinned = FaultSpec::parse(spec_text).ok()?.pinned(graph)?;
    let node = pinned.node.clone()?;
    let name = match inner {
        Some(i) => format!("fault:{pinned}+{i}"),
        None => format!("fault:{pinned}"),
    };
    Some((name, node))
}

/// [`pin_backend_name`] for the value of `GRAPHBUG_INJECT_FAULT`: the pinned spec and
/// its node; `None` when the spec is not pinned by it.
pub fn pin_env_spec(text: &str, graph: &Graph) -> Option<(String, String)> {
    let pinned = FaultSpec::parse_env(text).ok()?.pinned(graph)?;
    let node = pinned.node.clone()?;
    Some((pinned.to_string(), node))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_parse_and_print() {
        let s = FaultSpec::parse("accuracy=0.5@aten.gelu.default#2").unwrap();
        assert_eq!(s.kind, FaultKind::Accuracy);
        assert_eq!(s.amount, 0.5);
        assert_eq!(s.occurrence, Some(2));
        assert!(s.op.matches(&OpName::aten("gelu", "default")));
        assert!(!s.op.matches(&OpName::aten("gelu", "out")));
        assert_eq!(s.to_string(), "accuracy=0.5@aten.gelu.default#2");
        let r = FaultSpec::parse("runtime@relu").unwrap();
        assert!(
            r.op.matches(&OpName::aten("relu", "default"))
                && r.op.matches(&OpName::new("prims", "relu", "x"))
        );
        assert!(FaultSpec::parse("crash@aten::mm.default")
            .unwrap()
            .op
            .matches(&OpName::aten("mm", "default")));
        assert_eq!(
            FaultSpec::parse_env("fault:nan@mm#1").unwrap().kind,
            FaultKind::Nan
        );
        // A flaky fault keeps its percentage through printing and pinning.
        let flaky = FaultSpec::parse("runtime@gelu#2%30").unwrap();
        assert_eq!(flaky.percent, Some(30));
        assert_eq!(flaky.to_string(), "runtime@gelu#2%30");
        assert_eq!(
            FaultSpec::parse("accuracy=0.5@node:gelu_1%5")
                .unwrap()
                .to_string(),
            "accuracy=0.5@node:gelu_1%5"
        );
        for bad in ["runtime@gelu%0", "runtime@gelu%100", "runtime@gelu%x"] {
            assert!(FaultSpec::parse(bad)
                .unwrap_err()
                .contains("bad percentage"));
        }
    }

    #[test]
    fn a_bound_fault_fires_only_on_the_op_it_was_bound_to() {
        let g = crate::parse_graph(
            "class G(torch.nn.Module):
    def forward(self, x: \"f32[4]\"):
        gelu: \"f32[4]\" = torch.ops.aten.gelu.default(x)
        relu: \"f32[4]\" = torch.ops.aten.relu.default(gelu)
        return (relu,)
",
        )
        .unwrap();
        let spec = FaultSpec::parse("accuracy@node:gelu").unwrap().bound(&g);
        assert_eq!(spec.node_op.as_deref(), Some("aten::gelu.default"));
        // Printed as written: a directory's command names the node alone.
        assert_eq!(spec.to_string(), "accuracy@node:gelu");
        assert_eq!(spec.targets(&g), [g.find("gelu").unwrap()]);
        // A cut where another op took the name (as a constant takes a value's name in an
        // XLA candidate): the fault does not follow it, and says why.
        let other = crate::parse_graph(
            "class G(torch.nn.Module):
    def forward(self, x: \"f32[4]\"):
        gelu: \"f32[4]\" = torch.ops.aten.sigmoid.default(x)
        relu: \"f32[4]\" = torch.ops.aten.relu.default(gelu)
        return (relu,)
",
        )
        .unwrap();
        assert!(spec.targets(&other).is_empty());
        let why = spec
            .why_no_target(&other, "fault:accuracy@node:gelu")
            .unwrap();
        assert!(
            why.contains("`gelu` calls `aten::sigmoid.default` here, but `aten::gelu.default`"),
            "{why}"
        );
        // Unbound, the name alone decides; binding twice keeps the first program's op.
        let unbound = FaultSpec::parse("accuracy@node:gelu").unwrap();
        assert_eq!(unbound.targets(&other).len(), 1);
        assert_eq!(spec.bound(&other), spec);
        // An input that took the name is never faulted, bound or not.
        let input = crate::parse_graph(
            "class G(torch.nn.Module):
    def forward(self, gelu: \"f32[4]\"):
        relu: \"f32[4]\" = torch.ops.aten.relu.default(gelu)
        return (relu,)
",
        )
        .unwrap();
        assert!(spec.targets(&input).is_empty() && unbound.targets(&input).is_empty());
    }

    #[test]
    fn faults_pinned_to_a_node_stay_on_it() {
        let g = crate::parse_graph(
            "class G(torch.nn.Module):
    def forward(self, x: \"f32[4]\"):
        gelu: \"f32[4]\" = torch.ops.aten.gelu.default(x)
        gelu_1: \"f32[4]\" = torch.ops.aten.gelu.default(gelu)
        relu: \"f32[4]\" = torch.ops.aten.relu.default(gelu_1)
        return (relu,)
",
        )
        .unwrap();
        let s = FaultSpec::parse("accuracy=0.5@node:gelu_1").unwrap();
        assert_eq!(s.to_string(), "accuracy=0.5@node:gelu_1");
        assert_eq!(s.targets(&g), [g.find("gelu_1").unwrap()]);
        // `#k` and a bare node name pin to the node they name now.
        let k = FaultSpec::parse("accuracy=0.5@gelu#2")
            .unwrap()
            .pinned(&g)
            .unwrap();
        assert_eq!(k.to_string(), "accuracy=0.5@node:gelu_1");
        let bare = FaultSpec::parse("runtime@gelu_1").unwrap();
        assert_eq!(bare.targets(&g), [g.find("gelu_1").unwrap()]);
        assert_eq!(bare.pinned(&g).unwrap().to_string(), "runtime@node:gelu_1");
        // An op name is every node calling it, and is not pinned.
        let op = FaultSpec::parse("runtime@gelu").unwrap();
        assert_eq!(op.targets(&g).len(), 2);
        assert!(op.pinned(&g).is_none());
        // Once the minifier dropped `gelu`, the pinned fault is still on `gelu_1`, where
        // `#2` would name no node.
        let cut = crate::parse_graph(
            "class G(torch.nn.Module):
    def forward(self, gelu: \"f32[4]\"):
        gelu_1: \"f32[4]\" = torch.ops.aten.gelu.default(gelu)
        return (gelu_1,)
",
        )
        .unwrap();
        assert_eq!(k.targets(&cut), [cut.find("gelu_1").unwrap()]);
        let unpinned = FaultSpec::parse("accuracy=0.5@gelu#2").unwrap();
        assert!(unpinned.targets(&cut).is_empty());
        // An input is not a node to fault; a missing name lists the closest ones.
        let e = FaultSpec::parse("runtime@node:gelu")
            .unwrap()
            .why_no_target(&cut, "f")
            .unwrap();
        assert!(
            e.contains(
                "the graph has no node `gelu` that calls an op; the closest node names: `gelu_1`"
            ),
            "{e}"
        );
        assert_eq!(
            pin_backend_name("fault:runtime@aten.gelu.default#2+eager", &g),
            Some((
                "fault:runtime@node:gelu_1+eager".to_string(),
                "gelu_1".to_string()
            ))
        );
        assert_eq!(pin_backend_name("eager", &g), None);
    }

    #[test]
    fn malformed_specs_show_the_grammar() {
        for bad in [
            "oops",
            "explode@relu",
            "runtime=2@relu",
            "accuracy=x@relu",
            "runtime@relu#0",
            "runtime@a.b.c.d",
            "runtime@",
            "runtime@node:",
            "runtime@node:a b",
            "runtime@node:a%b",
        ] {
            let e = FaultSpec::parse(bad).unwrap_err();
            assert!(
                e.contains("expected:\nfault:<kind>[=<amount>]@<target>[%<percent>][+<inner>]"),
                "{bad}: {e}"
            );
        }
        assert!(FaultSpec::parse_env("runtime@relu+eager")
            .unwrap_err()
            .contains("+<inner>"));
    }
}
