//! Candidates: the subgraph that keeps a set of the original's nodes and feeds everything
//! else it reads from inputs holding the values the original run computed.
//!
//! Keeping a set of nodes determines a candidate completely, which makes every strategy a
//! move in one space (truncating a suffix keeps a prefix; delta debugging drops windows;
//! a 1-minimal candidate is a set no single removal of which still fails) and makes the
//! kept set a canonical cache key. Nothing kept is ever dead: nodes no kept node reads are
//! the candidate's outputs (multi-output ones still run, but are not returned).
//!
//! Some bugs live in the outputs themselves (an input returned as an output, the output
//! count). For those a candidate also *retains* positions of the original's return: each
//! retained output is returned as in the original, first and in order (a dropped node's
//! value, or an input, as an input), then the kept nodes nothing reads.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::sync::OnceLock;

use graphbug_ir::{Graph, Meta, Node, NodeId, NodeKind, Value};
use serde::{Deserialize, Serialize};

/// Where a candidate's input value comes from, in terms of the original graph.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Origin {
    /// The original graph's k-th input.
    Input(usize),
    /// The value the original node with this id produced in the reference run.
    Node(u32),
}

/// A graph to query, with the origin of each of its inputs.
#[derive(Clone, Debug, PartialEq)]
pub struct Candidate {
    /// The candidate graph (placeholders first, one per entry of `inputs`).
    pub graph: Graph,
    /// Where each placeholder's value comes from.
    pub inputs: Vec<Origin>,
    /// The original node ids kept, ascending.
    pub kept: Vec<u32>,
    /// The positions of the original's outputs it returns as the original does, ascending.
    pub retained: Vec<usize>,
    /// How it was cut, with `kept` and `retained`: what another process holding the same
    /// original needs to cut it again ([`Original::recut`]).
    pub cut: Cut,
}

/// How a candidate's inputs are formed from the values it reads: the modes the minifier's
/// input strategies switch on for the whole search.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize,
)]
pub struct Form {
    /// Inputs holding equal values share one placeholder (see
    /// [`Original::candidate_retaining`]).
    pub consolidate: bool,
    /// Every input is a constant holding its recorded value, printed into the program,
    /// rather than a parameter ([`Candidate::constants`]; hlo_bisect's "every other value a
    /// constant"): a program that needs no inputs, and a compiler that folds constants
    /// sees them.
    pub constants: bool,
}

/// How a candidate was cut from its original, besides its kept nodes and retained outputs.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum Cut {
    /// The original exactly as given (its inputs, outputs and constants).
    #[default]
    AsGiven,
    /// Cut by [`Original::candidate_retaining`]; `merged` pairs each input that reads
    /// another's placeholder (equal values) with that other input.
    Kept {
        /// (input, the input whose placeholder it reads), in input order.
        merged: Vec<(Origin, Origin)>,
        /// Whether its inputs are constants (see [`Form::constants`]).
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        constants: bool,
    },
}

impl Candidate {
    /// Number of call_function nodes (calls and getitems), the size the minifier reduces.
    pub fn size(&self) -> usize {
        self.graph.num_call_function_nodes()
    }

    /// Whether its placeholders stand for constants holding their inputs' recorded values,
    /// to be printed into the program (see [`Form::constants`]), not parameters.
    pub fn constants(&self) -> bool {
        matches!(
            self.cut,
            Cut::Kept {
                constants: true,
                ..
            }
        )
    }

    /// Marks its inputs as constants (a cut candidate; the original as given keeps its
    /// parameters).
    fn set_constants(&mut self, constants: bool) {
        if let Cut::Kept { constants: c, .. } = &mut self.cut {
            *c = constants;
        }
    }

    /// Its parameters: its inputs, unless they are constants.
    pub fn parameters(&self) -> usize {
        if self.constants() {
            0
        } else {
            self.inputs.len()
        }
    }
}

/// Facts about the original graph the candidates are cut from.
#[derive(Clone, Debug)]
pub struct Original<'g> {
    /// The graph, borrowed from the caller (or owned).
    graph: Cow<'g, Graph>,
    /// Index among the placeholders, for each placeholder node.
    input_index: Vec<Option<usize>>,
    /// The placeholder ids, in order.
    placeholders: Vec<NodeId>,
    /// Nodes that can be kept or dropped: calls, getitems and constants.
    removable: Vec<u32>,
    /// Fingerprints of the reference values, for merging inputs that hold equal values.
    value_keys: HashMap<Origin, u64>,
    /// For each size symbol of a dynamic-shape graph, the first input that binds it (a
    /// size that is the bare symbol, or a `Sym` input); empty for a static graph.
    binders: BTreeMap<String, usize>,
    /// The readers of each node of the graph.
    users: graphbug_ir::Users,
    /// Whether the canonical candidate of every node is the graph as given (known once
    /// asked: see [`Original::canonical_is_given`]).
    canonical_given: OnceLock<bool>,
    /// The removable nodes that reach the outputs (see [`Original::all_live`]).
    all_live: OnceLock<Vec<u32>>,
}

impl Original<'static> {
    /// Prepares `graph` (which must verify) for cutting.
    pub fn new(graph: Graph) -> Self {
        Original::prepare(Cow::Owned(graph))
    }
}

impl<'g> Original<'g> {
    /// Prepares `graph` (which must verify) for cutting, without copying it.
    pub fn borrowing(graph: &'g Graph) -> Self {
        Original::prepare(Cow::Borrowed(graph))
    }

    fn prepare(graph: Cow<'g, Graph>) -> Self {
        let mut input_index = vec![None; graph.nodes.len()];
        let placeholders = graph.placeholders();
        for (k, id) in placeholders.iter().enumerate() {
            input_index[id.index()] = Some(k);
        }
        let removable = graph
            .ids()
            .filter(|&i| !graph.node(i).is_placeholder())
            .map(|i| i.0)
            .collect();
        let mut binders = BTreeMap::new();
        for (k, id) in placeholders.iter().enumerate() {
            for symbol in graph.node(*id).meta.bound_symbols() {
                binders.entry(symbol.to_string()).or_insert(k);
            }
        }
        Original {
            users: graph.users(),
            graph,
            input_index,
            placeholders,
            removable,
            value_keys: HashMap::new(),
            binders,
            canonical_given: OnceLock::new(),
            all_live: OnceLock::new(),
        }
    }

    /// Fingerprints of the reference values by origin (equal fingerprints mean equal
    /// values), which lets [`Original::candidate_with`] merge inputs.
    pub fn with_value_keys(mut self, keys: HashMap<Origin, u64>) -> Self {
        self.value_keys = keys;
        self
    }

    /// True when fingerprints of the reference values are known.
    pub fn has_value_keys(&self) -> bool {
        !self.value_keys.is_empty()
    }

    /// The original graph.
    pub fn graph(&self) -> &Graph {
        &self.graph
    }

    /// Whether the canonical candidate of every node (only values nothing else reads
    /// returned, no unused or returned inputs) is the graph exactly as given, so that
    /// minification's preprocessing has nothing to try. Worked out once.
    pub fn canonical_is_given(&self) -> bool {
        *self.canonical_given.get_or_init(|| {
            let canonical = self
                .candidate_retaining(&self.all(), &[], Form::default())
                .graph;
            canonical == *self.graph
                || (canonical.nodes.len() == self.graph.nodes.len()
                    && graphbug_ir::print_graph(&canonical)
                        == graphbug_ir::print_graph(&self.graph))
        })
    }

    /// Every node that can be kept, ascending: the kept set of the whole graph.
    pub fn all(&self) -> Vec<u32> {
        self.removable.clone()
    }

    /// `kept` made consistent: a getitem is kept only with its source (otherwise its value
    /// becomes an input, as any dropped node's does). Sorted and deduplicated.
    pub fn normalize(&self, kept: &[u32]) -> Vec<u32> {
        // (In time of `kept`, not of the graph: candidates late in a search are small.)
        let nodes = &self.graph.nodes;
        let mut sorted: Vec<u32> = kept
            .iter()
            .copied()
            .filter(|&k| nodes.get(k as usize).is_some_and(|n| !n.is_placeholder()))
            .collect();
        sorted.sort_unstable();
        sorted.dedup();
        let mut out: Vec<u32> = Vec::with_capacity(sorted.len());
        for k in sorted {
            // A getitem's source comes before it: `out` already says whether it stays.
            if let NodeKind::GetItem { source, .. } = &nodes[k as usize].kind {
                if out.binary_search(&source.0).is_err() {
                    continue;
                }
            }
            out.push(k);
        }
        out
    }

    /// The original exactly as given (every input, output and constant), as a candidate.
    pub fn as_given(&self) -> Candidate {
        Candidate {
            graph: self.graph.clone().into_owned(),
            inputs: (0..self.placeholders.len()).map(Origin::Input).collect(),
            kept: self.removable.clone(),
            retained: self.all_outputs(),
            cut: Cut::AsGiven,
        }
    }

    /// The candidate another process cut as `cut` with `kept` and `retained` (from its
    /// [`Candidate`]), cut again from this original: the same candidate when this original
    /// is the same graph, whatever its value fingerprints.
    pub fn recut(&self, kept: &[u32], retained: &[usize], cut: &Cut) -> Candidate {
        match cut {
            Cut::AsGiven => self.as_given(),
            Cut::Kept { merged, constants } => {
                let mut c = self.cut(kept, retained, |o, _, _| {
                    merged.iter().find(|(m, _)| *m == o).map(|(_, into)| *into)
                });
                c.set_constants(*constants);
                c
            }
        }
    }

    /// The positions of the original's outputs.
    pub fn all_outputs(&self) -> Vec<usize> {
        (0..self.graph.outputs().len()).collect()
    }

    /// The candidate that keeps `kept` (normalized first).
    pub fn candidate(&self, kept: &[u32]) -> Candidate {
        self.candidate_with(kept, Form::default())
    }

    /// The candidate that keeps `kept`, its inputs formed as `form` says: with
    /// `consolidate`, inputs holding equal values (equal fingerprints and metas) share one
    /// placeholder, unless a kept node reading them mutates in place; with `constants`,
    /// they are constants.
    pub fn candidate_with(&self, kept: &[u32], form: Form) -> Candidate {
        self.candidate_retaining(kept, &[], form)
    }

    /// [`Original::candidate_with`], also returning the original's outputs at the
    /// positions `retained` (first, in order; see the module docs).
    pub fn candidate_retaining(&self, kept: &[u32], retained: &[usize], form: Form) -> Candidate {
        let mut c = self.cut_as(kept, retained, form.consolidate);
        c.set_constants(form.constants);
        c
    }

    /// The candidate keeping `kept` and retaining `retained`, inputs holding equal values
    /// merged with `consolidate`.
    fn cut_as(&self, kept: &[u32], retained: &[usize], consolidate: bool) -> Candidate {
        if !consolidate {
            return self.cut(kept, retained, |_, _, _| None);
        }
        let mutated = self.mutated_by(&self.normalize(kept));
        // The first input of each value (fingerprint and meta) takes the placeholder.
        let mut first: HashMap<(u64, Meta), Origin> = HashMap::new();
        self.cut(kept, retained, |o, src, meta| {
            if mutated.contains(&src.0) {
                return None;
            }
            let key = *self.value_keys.get(&o)?;
            match first.entry((key, meta.clone())) {
                std::collections::hash_map::Entry::Occupied(e) => Some(*e.get()),
                std::collections::hash_map::Entry::Vacant(e) => {
                    e.insert(o);
                    None
                }
            }
        })
    }

    /// The candidate keeping `kept` (normalized first) and returning the outputs
    /// `retained`, whose inputs are asked in order whether they read the placeholder of an
    /// earlier input (`merge_into(input, its node, its meta)`).
    fn cut(
        &self,
        kept: &[u32],
        retained: &[usize],
        mut merge_into: impl FnMut(Origin, NodeId, &Meta) -> Option<Origin>,
    ) -> Candidate {
        let kept = self.normalize(kept);
        let original_outputs = self.graph.outputs();
        let mut retained: Vec<usize> = retained
            .iter()
            .copied()
            .filter(|&r| r < original_outputs.len())
            .collect();
        retained.sort_unstable();
        retained.dedup();
        let g = &self.graph;
        let n = g.nodes.len();
        let mut is_kept = vec![false; n];
        for &k in &kept {
            is_kept[k as usize] = true;
        }
        // Inputs: every value a kept node reads, or a retained output returns, that is not
        // kept; ordered by origin.
        let mut origins: Vec<Origin> = Vec::new();
        let mut seen = vec![false; n];
        let mut need = |src: NodeId, origins: &mut Vec<Origin>| {
            if !is_kept[src.index()] && !seen[src.index()] {
                seen[src.index()] = true;
                origins.push(match self.input_index[src.index()] {
                    Some(i) => Origin::Input(i),
                    None => Origin::Node(src.0),
                });
            }
        };
        for &k in &kept {
            g.nodes[k as usize].for_each_input(|src| need(src, &mut origins));
        }
        for &r in &retained {
            original_outputs[r].for_each_node(&mut |src| need(src, &mut origins));
        }
        // A dynamic-shape candidate keeps an input that binds each symbol it mentions.
        // (An input added may mention further symbols: repeat until every one is bound.)
        if !self.binders.is_empty() {
            loop {
                let missing = self.unbound_symbol_inputs(&kept, &origins);
                if missing.is_empty() {
                    break;
                }
                for k in missing {
                    need(self.placeholders[k], &mut origins);
                }
            }
        }
        origins.sort();
        let src_of = |o: Origin| match o {
            Origin::Input(i) => self.placeholders[i],
            Origin::Node(id) => NodeId(id),
        };
        // The candidate's id of each original node it has (`NONE` for the others).
        const NONE: NodeId = NodeId(u32::MAX);
        let mut new_id: Vec<NodeId> = vec![NONE; n];
        let mapped =
            |new_id: &[NodeId], src: NodeId| Some(new_id[src.index()]).filter(|&m| m != NONE);
        let mut nodes: Vec<Node> = Vec::with_capacity(origins.len() + kept.len());
        // Merged inputs: a later origin with the same value reads the first one's placeholder.
        let mut merged = Vec::new();
        let mut distinct = Vec::with_capacity(origins.len());
        for &o in &origins {
            let src = src_of(o);
            let node = g.node(src);
            if let Some(into) = merge_into(o, src, &node.meta) {
                if let Some(existing) = mapped(&new_id, src_of(into)) {
                    new_id[src.index()] = existing;
                    merged.push((o, into));
                    continue;
                }
            }
            distinct.push(o);
            new_id[src.index()] = NodeId(nodes.len() as u32);
            nodes.push(Node {
                name: node.name.clone(),
                kind: NodeKind::Placeholder,
                meta: match &node.meta {
                    m @ (Meta::Tensor(_) | Meta::SymTensor(_) | Meta::Sym(_)) => m.clone(),
                    _ => Meta::Unknown,
                },
            });
        }
        for &k in &kept {
            let node = &g.nodes[k as usize];
            let kind = node
                .try_remap_kind::<()>(&mut |src| mapped(&new_id, src).ok_or(()))
                .expect("every input of a kept node is kept or an input");
            new_id[k as usize] = NodeId(nodes.len() as u32);
            nodes.push(Node {
                name: node.name.clone(),
                kind,
                meta: node.meta.clone(),
            });
        }
        // Outputs: the retained ones as the original returns them, then the kept
        // single-tensor values nothing kept reads.
        let users = &self.users;
        let mut output: Vec<Value> = retained
            .iter()
            .map(|&r| {
                original_outputs[r]
                    .try_remap::<()>(&mut |src| mapped(&new_id, src).ok_or(()))
                    .expect("every node a retained output names is kept or an input")
            })
            .collect();
        let returned: Vec<Value> = output.clone();
        output.extend(
            kept.iter()
                .filter(|&&k| {
                    let multi = matches!(g.nodes[k as usize].meta, Meta::Multi(_))
                        || users.nodes[k as usize]
                            .iter()
                            .any(|u| matches!(g.node(*u).kind, NodeKind::GetItem { .. }));
                    !multi && !kept_reader(&users.nodes[k as usize], &is_kept)
                })
                .map(|&k| Value::Node(new_id[k as usize]))
                .filter(|v| !returned.contains(v)),
        );
        Candidate {
            graph: Graph {
                dialect: g.dialect,
                param_names: g.param_names.clone(),
                name: g.name.clone(),
                nodes,
                output: Some(output),
            },
            inputs: distinct,
            kept,
            retained,
            cut: Cut::Kept {
                merged,
                constants: false,
            },
        }
    }

    /// The original inputs (by index) that bind the symbols a candidate keeping `kept`,
    /// with inputs from `origins`, mentions but none of those inputs binds.
    fn unbound_symbol_inputs(&self, kept: &[u32], origins: &[Origin]) -> Vec<usize> {
        let g = &self.graph;
        let src_meta = |o: &Origin| match *o {
            Origin::Input(i) => &g.node(self.placeholders[i]).meta,
            Origin::Node(id) => &g.nodes[id as usize].meta,
        };
        let mut bound: Vec<&str> = origins
            .iter()
            .flat_map(|o| src_meta(o).bound_symbols())
            .collect();
        bound.sort_unstable();
        let mut out = Vec::new();
        let mentioned = origins
            .iter()
            .map(src_meta)
            .chain(kept.iter().map(|&k| &g.nodes[k as usize].meta))
            .flat_map(Meta::symbols);
        for symbol in mentioned {
            if bound.binary_search(&symbol).is_ok() {
                continue;
            }
            if let Some(&k) = self.binders.get(symbol) {
                if !out.contains(&k) {
                    out.push(k);
                }
            }
        }
        out
    }

    /// Values that kept nodes may change in place (read by an in-place op, by name).
    fn mutated_by(&self, kept: &[u32]) -> Vec<u32> {
        let mut out = Vec::new();
        for &k in kept {
            let node = &self.graph.nodes[k as usize];
            if node.op().is_some_and(|op| op.is_inplace_by_name()) {
                node.for_each_input(|src| out.push(src.0));
            }
        }
        out
    }

    /// `live(all())`, worked out once.
    pub fn all_live(&self) -> &[u32] {
        self.all_live.get_or_init(|| self.live(&self.all()))
    }

    /// Kept nodes that reach the original graph's outputs (the rest is dead code there).
    pub fn live(&self, kept: &[u32]) -> Vec<u32> {
        let g = &self.graph;
        let mut live = vec![false; g.nodes.len()];
        for v in g.outputs() {
            v.for_each_node(&mut |id| live[id.index()] = true);
        }
        for id in g.ids().rev() {
            if live[id.index()] {
                g.node(id).for_each_input(|src| live[src.index()] = true);
            }
        }
        kept.iter().copied().filter(|&k| live[k as usize]).collect()
    }

    /// The kept nodes of `kept` with no kept reader: the candidate's sinks.
    pub fn sinks(&self, kept: &[u32]) -> Vec<u32> {
        let users = &self.users;
        let mut is_kept = vec![false; self.graph.nodes.len()];
        for &k in kept {
            is_kept[k as usize] = true;
        }
        kept.iter()
            .copied()
            .filter(|&k| !kept_reader(&users.nodes[k as usize], &is_kept))
            .collect()
    }

    /// `kept` without `sink` and every kept node that only serves it (its exclusive
    /// ancestors), as removing an output and the code behind it does.
    pub fn without_output(&self, kept: &[u32], sink: u32) -> Vec<u32> {
        self.without_outputs(kept, &[sink])
    }

    /// `kept` without the sinks `remove` and every kept node that only serves them, in
    /// one pass over `kept` (as removing them one by one does).
    pub fn without_outputs(&self, kept: &[u32], remove: &[u32]) -> Vec<u32> {
        let n = self.graph.nodes.len();
        let mut is_kept = vec![false; n];
        for &k in kept {
            is_kept[k as usize] = true;
        }
        // The sinks that stay: kept nodes no kept node reads, but those removed.
        let mut stays = vec![false; n];
        for &k in kept {
            stays[k as usize] = !kept_reader(&self.users.nodes[k as usize], &is_kept);
        }
        for &r in remove {
            stays[r as usize] = false;
            is_kept[r as usize] = false;
        }
        // Walk backwards: a kept node stays if some other kept node reads it or it is a sink
        // that stays.
        for &k in kept.iter().rev() {
            if is_kept[k as usize]
                && !stays[k as usize]
                && !kept_reader(&self.users.nodes[k as usize], &is_kept)
            {
                is_kept[k as usize] = false;
            }
        }
        kept.iter()
            .copied()
            .filter(|&k| is_kept[k as usize])
            .collect()
    }
}

fn kept_reader(readers: &[NodeId], is_kept: &[bool]) -> bool {
    readers.iter().any(|r| is_kept[r.index()])
}

#[cfg(test)]
mod tests {
    use super::*;
    use graphbug_ir::{parse_graph, print_graph};

    const G: &str = r#"
class G(torch.nn.Module):
    def forward(self, x: "f32[4, 8]", w: "f32[8]"):
        ln = torch.ops.aten.native_layer_norm.default(x, [8], w, None, 1e-05)
        getitem: "f32[4, 8]" = ln[0]
        relu: "f32[4, 8]" = torch.ops.aten.relu.default(getitem)
        sin: "f32[4, 8]" = torch.ops.aten.sin.default(relu)
        cos: "f32[4, 8]" = torch.ops.aten.cos.default(x)
        add: "f32[4, 8]" = torch.ops.aten.add.Tensor(sin, cos)
        return (add,)
"#;

    fn original() -> Original<'static> {
        Original::new(parse_graph(G).unwrap())
    }

    #[test]
    fn the_whole_set_is_the_original() {
        let o = original();
        let c = o.candidate(&o.all());
        assert_eq!(print_graph(&c.graph), print_graph(o.graph()));
        assert_eq!(c.inputs, [Origin::Input(0), Origin::Input(1)]);
    }

    #[test]
    fn dropped_nodes_become_inputs_with_their_names() {
        let o = original();
        // Keep sin and add: relu and cos become inputs.
        let c = o.candidate(&[5, 7]);
        assert_eq!(c.inputs, [Origin::Node(4), Origin::Node(6)]);
        let text = print_graph(&c.graph);
        assert!(
            text.contains("def forward(self, relu: \"f32[4, 8]\", cos: \"f32[4, 8]\"):"),
            "{text}"
        );
        assert!(text.contains("return (add,)"), "{text}");
        c.graph.verify().unwrap();
    }

    #[test]
    fn getitems_need_their_source_and_multi_outputs_are_not_returned() {
        let o = original();
        assert_eq!(o.normalize(&[3, 4]), [4]);
        // Sorted and deduplicated; placeholders and ids past the graph dropped.
        assert_eq!(o.normalize(&[4, 3, 0, 99, 4, 2]), [2, 3, 4]);
        let c = o.candidate(&[2]);
        // native_layer_norm alone: it runs, but returns nothing.
        assert_eq!(c.size(), 1);
        assert!(c.graph.outputs().is_empty());
        let c = o.candidate(&[2, 3]);
        assert_eq!(c.graph.outputs().len(), 1);
    }

    #[test]
    fn a_candidate_cut_again_from_its_recipe_is_the_same() {
        // relu's and cos's values are equal (same fingerprint): consolidated, cos reads
        // relu's placeholder.
        let keys = HashMap::from([(Origin::Node(4), 7), (Origin::Node(6), 7)]);
        let o = original().with_value_keys(keys);
        let consolidated = Form {
            consolidate: true,
            constants: false,
        };
        let merged = o.candidate_retaining(&[5, 7], &[], consolidated);
        assert_eq!(merged.inputs, [Origin::Node(4)]);
        assert_eq!(
            merged.cut,
            Cut::Kept {
                merged: vec![(Origin::Node(6), Origin::Node(4))],
                constants: false,
            }
        );
        let constants = o.candidate_retaining(
            &[5, 7],
            &[],
            Form {
                consolidate: true,
                constants: true,
            },
        );
        assert!(constants.constants() && !merged.constants());
        assert_eq!((constants.parameters(), merged.parameters()), (0, 1));
        // Another process holding the same graph, without the fingerprints, cuts the same
        // candidates again from (kept, retained, cut).
        let elsewhere = original();
        for c in [
            merged,
            constants,
            o.as_given(),
            o.candidate_retaining(&[5, 7], &[0], Form::default()),
            o.candidate(&[2, 3]),
        ] {
            assert_eq!(elsewhere.recut(&c.kept, &c.retained, &c.cut), c);
        }
    }

    #[test]
    fn live_sinks_and_removing_an_output() {
        let o = original();
        let all = o.all();
        assert_eq!(o.sinks(&all), [7]);
        assert_eq!(o.sinks(&[5, 6]), [5, 6]);
        // Removing sink `sin` from {relu, sin, cos} also drops relu, which only served it.
        assert_eq!(o.without_output(&[4, 5, 6], 5), [6]);
        assert_eq!(o.live(&all), all);
    }
}
