//! What of a part is drawn: every node, or the neighbourhood of the nodes that matter;
//! runs of repeated layers drawn once, the other copies folded into one box.
//!
//! A repeated layer is found in the graph's node order (the order the program runs): a
//! stretch of nodes followed by copies of itself, where each node of a copy does what its
//! counterpart in the copy before does (the same op, marks and operand count) on the same
//! kind of operands: the counterpart's operand's own next copy, the very value the
//! counterpart reads (one every copy shares, like an attention mask), or a graph input. Each
//! run found is drawn
//! as its first copy, in a box saying how many copies the run has, and one box standing for
//! the others; graph inputs that only the folded copies read are folded with them. A node
//! with a mark of its own (a culprit, a divergence) differs from its copies, so the run
//! breaks around it and it is drawn.

use std::collections::VecDeque;
use std::hash::{Hash, Hasher};

use graphbug_ir::{Graph, NodeId, NodeKind};
#[cfg(test)]
use rustc_hash::FxHashSet;
use rustc_hash::{FxHashMap, FxHasher};

use crate::{op_label, type_label, DrawError, Mark, Part};

/// Graphs with more call nodes than this are drawn with repeated layers collapsed.
pub const COLLAPSE_ABOVE: usize = 150;

/// The fewest nodes a fold must hide to be worth a box.
const MIN_FOLDED: usize = 24;

/// The fewest nodes of a layer worth folding: shorter patterns repeat by chance.
const MIN_LAYER: usize = 6;

/// How a part is cut down before it is drawn.
#[derive(Clone, Debug, Default)]
pub struct ViewOptions {
    /// Collapse repeated layers: `None` when the graph is larger than [`COLLAPSE_ABOVE`]
    /// call nodes, `Some(true)` always, `Some(false)` never.
    pub collapse: Option<bool>,
    /// Draw only these nodes (by name) and their neighbours within `depth` edges.
    pub around: Vec<String>,
    /// How far `around` reaches.
    pub depth: usize,
}

/// One box of a drawing.
#[derive(Clone, Debug, PartialEq)]
pub enum Vertex {
    /// A node of the graph.
    Node {
        /// Its name.
        name: String,
        /// Its op, short (`addmm`, `input`).
        op: String,
        /// Its type (`f32[2, 8]`).
        ty: String,
        /// Its marks.
        marks: Vec<Mark>,
        /// Which of the graph's outputs it is (0-based), if any.
        outputs: Vec<usize>,
        /// The repeat whose first copy it belongs to, if any (index into `View::repeats`).
        repeat: Option<usize>,
    },
    /// The copies of a repeated layer after the first, folded.
    Folded {
        /// The repeat (index into `View::repeats`).
        repeat: usize,
        /// Nodes folded (the copies' nodes and the graph inputs only they read).
        nodes: usize,
        /// Marks of the folded nodes, counted by kind.
        marks: Vec<(String, usize)>,
        /// Saved bytes of the folded nodes.
        saved_bytes: u64,
        /// How many of the graph's outputs the folded nodes are.
        outputs: usize,
    },
}

/// A run of copies of one layer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Repeat {
    /// Nodes in one copy.
    pub length: usize,
    /// Copies in the run.
    pub copies: usize,
    /// The first node of the first copy and the last node of the last copy.
    pub span: (String, String),
}

/// What is drawn of a part.
#[derive(Clone, Debug)]
pub struct View {
    /// The part's name.
    pub name: String,
    /// Its caption.
    pub caption: String,
    /// The boxes, in graph order.
    pub vertices: Vec<Vertex>,
    /// Edges between boxes (`from`, `to`), sorted, each once.
    pub edges: Vec<(usize, usize)>,
    /// The runs of repeated layers collapsed.
    pub repeats: Vec<Repeat>,
    /// Nodes of the graph left out by `around`.
    pub left_out: usize,
    /// Nodes of the graph.
    pub total: usize,
}

impl View {
    /// The view of `part` under `options`.
    pub fn new(part: &Part<'_>, options: &ViewOptions) -> Result<View, DrawError> {
        let graph = part.graph;
        let n = graph.nodes.len();
        let selected = select(graph, &options.around, options.depth)?;
        let (seq, runs) = find_repeats(part, &selected, options.collapse);
        let mut outputs: FxHashMap<NodeId, Vec<usize>> = FxHashMap::default();
        for (k, value) in graph.outputs().iter().enumerate() {
            value.for_each_node(&mut |id: NodeId| outputs.entry(id).or_default().push(k));
        }
        // Where each sequence position goes: its own box (in the first copy, or outside
        // any run), or its run's folded box.
        let mut repeat_of_first: FxHashMap<NodeId, usize> = FxHashMap::default();
        let mut folded_into: FxHashMap<NodeId, usize> = FxHashMap::default();
        let mut repeats = Vec::new();
        for (r, &(start, length, copies)) in runs.iter().enumerate() {
            for &id in &seq[start..start + length] {
                repeat_of_first.insert(id, r);
            }
            for &id in &seq[start + length..start + length * copies] {
                folded_into.insert(id, r);
            }
            repeats.push(Repeat {
                length,
                copies,
                span: (
                    graph.node(seq[start]).name.to_string(),
                    graph
                        .node(seq[start + length * copies - 1])
                        .name
                        .to_string(),
                ),
            });
        }
        // Graph inputs read only by one run's folded copies fold with them.
        let users = graph.users();
        let readers: Vec<&[NodeId]> = users.nodes.iter().collect();
        for id in graph
            .ids()
            .filter(|&id| selected[id.index()] && is_input(graph, id))
        {
            let mut runs_reading = readers[id.index()].iter();
            let first = runs_reading
                .next()
                .and_then(|u| folded_into.get(u).copied());
            if let Some(r) = first {
                let shown = part.marks.get(&id).is_some_and(|marks| {
                    marks
                        .iter()
                        .any(|m| !matches!(m, Mark::Saved(_) | Mark::Recomputed))
                });
                if runs_reading.all(|u| folded_into.get(u) == Some(&r)) && !shown {
                    folded_into.insert(id, r);
                }
            }
        }
        let mut vertices = Vec::new();
        let mut vertex_of: Vec<Option<usize>> = vec![None; n];
        let mut folded_vertex: FxHashMap<usize, usize> = FxHashMap::default();
        for id in graph.ids().filter(|&id| selected[id.index()]) {
            let marks = part.marks.get(&id).cloned().unwrap_or_default();
            if let Some(&r) = folded_into.get(&id) {
                let v = *folded_vertex.entry(r).or_insert_with(|| {
                    vertices.push(Vertex::Folded {
                        repeat: r,
                        nodes: 0,
                        marks: Vec::new(),
                        saved_bytes: 0,
                        outputs: 0,
                    });
                    vertices.len() - 1
                });
                if let Vertex::Folded {
                    nodes,
                    marks: counts,
                    saved_bytes,
                    outputs: folded_outputs,
                    ..
                } = &mut vertices[v]
                {
                    *nodes += 1;
                    *folded_outputs += outputs.get(&id).map_or(0, Vec::len);
                    for m in &marks {
                        if let Mark::Saved(b) = m {
                            *saved_bytes += b;
                        }
                        match counts.iter_mut().find(|(k, _)| k == m.kind()) {
                            Some((_, c)) => *c += 1,
                            None => counts.push((m.kind().to_string(), 1)),
                        }
                    }
                }
                vertex_of[id.index()] = Some(v);
                continue;
            }
            vertices.push(Vertex::Node {
                name: graph.node(id).name.to_string(),
                op: op_label(graph, id),
                ty: type_label(graph, id),
                marks,
                outputs: outputs.get(&id).cloned().unwrap_or_default(),
                repeat: repeat_of_first.get(&id).copied(),
            });
            vertex_of[id.index()] = Some(vertices.len() - 1);
        }
        let mut edges = Vec::new();
        for id in graph.ids() {
            let Some(to) = vertex_of[id.index()] else {
                continue;
            };
            graph.node(id).for_each_input(|input| {
                if let Some(from) = vertex_of[input.index()] {
                    if from != to {
                        edges.push((from, to));
                    }
                }
            });
        }
        edges.sort_unstable();
        edges.dedup();
        Ok(View {
            name: part.name.clone(),
            caption: part.caption.clone(),
            vertices,
            edges,
            repeats,
            left_out: selected.iter().filter(|s| !**s).count(),
            total: n,
        })
    }

    /// A line saying what was collapsed and left out, if anything was.
    pub fn summary(&self) -> Option<String> {
        let mut said = Vec::new();
        for r in &self.repeats {
            said.push(format!(
                "{} copies of a {}-node layer ({} to {}) drawn once",
                r.copies, r.length, r.span.0, r.span.1
            ));
        }
        if self.left_out > 0 {
            said.push(format!(
                "{} of {} nodes outside the neighbourhood drawn",
                self.left_out, self.total
            ));
        }
        (!said.is_empty()).then(|| format!("{}: {}", self.name, said.join("; ")))
    }
}

/// The drawn calls and getitems in graph order, and the runs of repeated layers among
/// them (`start`, `length`, `copies`, by position in that order, sorted): none when
/// `collapse` is `Some(false)`, or `None` and the graph is no larger than [`COLLAPSE_ABOVE`].
pub fn find_repeats(
    part: &Part<'_>,
    selected: &[bool],
    collapse: Option<bool>,
) -> (Vec<NodeId>, Vec<(usize, usize, usize)>) {
    let graph = part.graph;
    let seq: Vec<NodeId> = graph
        .ids()
        .filter(|&id| selected[id.index()] && !is_input(graph, id))
        .collect();
    let mut runs = Vec::new();
    if collapse.unwrap_or(seq.len() > COLLAPSE_ABOVE) {
        let signatures = signatures(graph, part, &seq);
        find_runs(&signatures, 0, seq.len(), &mut runs);
        runs.sort_unstable();
    }
    (seq, runs)
}

/// Graph inputs and module constants: they head no layer.
fn is_input(graph: &Graph, id: NodeId) -> bool {
    matches!(
        graph.node(id).kind,
        NodeKind::Placeholder | NodeKind::GetAttr { .. }
    )
}

/// Which nodes are drawn: all, or those within `depth` edges of the named ones.
fn select(graph: &Graph, around: &[String], depth: usize) -> Result<Vec<bool>, DrawError> {
    let n = graph.nodes.len();
    if around.is_empty() {
        return Ok(vec![true; n]);
    }
    let mut neighbours: Vec<Vec<NodeId>> = vec![Vec::new(); n];
    for id in graph.ids() {
        graph.node(id).for_each_input(|input| {
            neighbours[id.index()].push(input);
            neighbours[input.index()].push(id);
        });
    }
    let mut distance: Vec<Option<usize>> = vec![None; n];
    let mut queue = VecDeque::new();
    for name in around {
        let id = graph.find(name).ok_or_else(|| {
            DrawError::Unknown(format!(
                "--around: no node `{name}` in the graph `{}`",
                graph.name
            ))
        })?;
        distance[id.index()] = Some(0);
        queue.push_back(id);
    }
    while let Some(id) = queue.pop_front() {
        let d = distance[id.index()].unwrap_or(0);
        if d == depth {
            continue;
        }
        for &next in &neighbours[id.index()] {
            if distance[next.index()].is_none() {
                distance[next.index()] = Some(d + 1);
                queue.push_back(next);
            }
        }
    }
    Ok(distance.iter().map(Option::is_some).collect())
}

/// What a sequence position reads: a position of the sequence, or a graph input (or a
/// node not drawn).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Read {
    /// A call or getitem, by position.
    At(usize),
    /// A graph input or a node outside the sequence.
    Outside,
}

/// Per sequence position: a hash of what the node does (its op, marks and arity), and
/// what it reads.
struct Signatures {
    what: Vec<u64>,
    reads: Vec<Vec<Read>>,
}

impl Signatures {
    /// Whether position `j` repeats position `i` one copy later: it does the same, and each
    /// operand is the same kind of thing: the next copy of `i`'s operand, the very value
    /// `i` reads (one shared by every copy, like an attention mask), or a graph input.
    fn same(&self, i: usize, j: usize) -> bool {
        let period = j - i;
        self.what[i] == self.what[j]
            && self.reads[i]
                .iter()
                .zip(&self.reads[j])
                .all(|(a, b)| match (*a, *b) {
                    (Read::At(a), Read::At(b)) => b == a + period || a == b,
                    (Read::Outside, Read::Outside) => true,
                    _ => false,
                })
    }
}

/// The signatures of the sequence `seq` of `part`.
fn signatures(graph: &Graph, part: &Part<'_>, seq: &[NodeId]) -> Signatures {
    let position: FxHashMap<NodeId, usize> =
        seq.iter().enumerate().map(|(k, &id)| (id, k)).collect();
    let mut what = Vec::with_capacity(seq.len());
    let mut reads = Vec::with_capacity(seq.len());
    for &id in seq {
        let mut h = FxHasher::default();
        op_label(graph, id).hash(&mut h);
        if let Some(marks) = part.marks.get(&id) {
            for m in marks {
                m.kind().hash(&mut h);
            }
        }
        let mut read = Vec::new();
        graph.node(id).for_each_input(|input| {
            read.push(match position.get(&input) {
                Some(&p) => Read::At(p),
                None => Read::Outside,
            })
        });
        read.len().hash(&mut h);
        what.push(h.finish());
        reads.push(read);
    }
    Signatures { what, reads }
}

/// Finds runs of repeated stretches in `lo..hi`, best first (the run hiding the most
/// nodes, then the shortest layer, then the earliest), then in what is left on either
/// side; pushes `(start, length, copies)`.
fn find_runs(s: &Signatures, lo: usize, hi: usize, out: &mut Vec<(usize, usize, usize)>) {
    if hi - lo < 2 * MIN_LAYER {
        return;
    }
    let mut best: Option<(usize, usize, usize)> = None; // (start, length, copies)
    let hidden = |(_, length, copies): (usize, usize, usize)| length * (copies - 1);
    for length in MIN_LAYER..=(hi - lo) / 2 {
        let mut run = 0usize;
        for i in lo..hi - length {
            if s.same(i, i + length) {
                run += 1;
                if run >= length {
                    let start = i + 1 - run;
                    let copies = run / length + 1;
                    let candidate = (start, length, copies);
                    if hidden(candidate) >= MIN_FOLDED
                        && best.is_none_or(|b| hidden(candidate) > hidden(b))
                    {
                        best = Some(candidate);
                    }
                }
            } else {
                run = 0;
            }
        }
    }
    if let Some((start, length, copies)) = best {
        out.push((start, length, copies));
        find_runs(s, lo, start, out);
        find_runs(s, start + length * copies, hi, out);
    }
}

/// Whether two views draw the same boxes (for tests).
#[cfg(test)]
fn names(view: &View) -> FxHashSet<String> {
    view.vertices
        .iter()
        .filter_map(|v| match v {
            Vertex::Node { name, .. } => Some(name.clone()),
            Vertex::Folded { .. } => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use graphbug_ir::models::{gpt_forward, GptConfig};
    use graphbug_ir::parse_graph;

    #[test]
    fn runs_are_found_best_first() {
        // a b c, then six copies of a six-node layer, each reading the one before and
        // the shared `c`, then q.
        let what: Vec<u64> = [1, 2, 3]
            .into_iter()
            .chain([7, 8, 9, 10, 11, 12].repeat(6))
            .chain([5])
            .collect();
        let reads: Vec<Vec<Read>> = (0..what.len())
            .map(|k| match k {
                0 => vec![Read::Outside],
                3..=38 => vec![Read::At(k - 1), Read::At(2)],
                _ => vec![Read::At(k - 1)],
            })
            .collect();
        let s = Signatures { what, reads };
        let mut runs = Vec::new();
        find_runs(&s, 0, s.what.len(), &mut runs);
        assert_eq!(runs, vec![(3, 6, 6)]);
        // Same ops wired otherwise (each copy reading the previous copy's `x` at a
        // growing distance) do not repeat.
        let wired: Vec<Vec<Read>> = (0..s.what.len())
            .map(|k| match k {
                3..=38 => vec![Read::At(k / 2)],
                _ => vec![Read::Outside],
            })
            .collect();
        let mut none = Vec::new();
        let s = Signatures {
            what: s.what.clone(),
            reads: wired,
        };
        find_runs(&s, 0, s.what.len(), &mut none);
        assert!(none.is_empty(), "{none:?}");
    }

    #[test]
    fn gpt_layers_fold_and_the_first_layer_is_drawn() {
        let graph = gpt_forward(&GptConfig::gpt4_layers(12));
        let part = Part::new("graph", &graph);
        let full = View::new(
            &part,
            &ViewOptions {
                collapse: Some(false),
                ..Default::default()
            },
        )
        .unwrap();
        let folded = View::new(&part, &ViewOptions::default()).unwrap();
        assert_eq!(full.vertices.len(), graph.nodes.len());
        assert_eq!(folded.repeats.len(), 1, "{:?}", folded.repeats);
        let r = &folded.repeats[0];
        assert!(r.copies >= 11, "{r:?}");
        assert!(
            folded.vertices.len() < graph.nodes.len() / 5,
            "{} boxes for {} nodes",
            folded.vertices.len(),
            graph.nodes.len()
        );
        // The folded box stands in the flow: something feeds it and it feeds something.
        let folded_box = folded
            .vertices
            .iter()
            .position(|v| matches!(v, Vertex::Folded { .. }))
            .unwrap();
        assert!(folded.edges.iter().any(|&(_, to)| to == folded_box));
        assert!(folded.edges.iter().any(|&(from, _)| from == folded_box));
    }

    #[test]
    fn a_marked_node_breaks_the_run_and_is_drawn() {
        let graph = gpt_forward(&GptConfig::gpt4_layers(12));
        // A node in the middle of the stack (by graph order).
        let calls: Vec<NodeId> = graph.ids().filter(|&id| !is_input(&graph, id)).collect();
        let target = graph.node(calls[calls.len() / 2]).name.to_string();
        let mut part = Part::new("graph", &graph);
        let unmarked = names(&View::new(&part, &ViewOptions::default()).unwrap());
        assert!(!unmarked.contains(&target), "{target} is drawn unmarked");
        assert!(part.mark(&target, Mark::Culprit));
        let marked = View::new(&part, &ViewOptions::default()).unwrap();
        assert!(names(&marked).contains(&target));
        assert!(marked.vertices.iter().any(
            |v| matches!(v, Vertex::Node { name, marks, .. } if *name == target && marks == &[Mark::Culprit])
        ));
    }

    #[test]
    fn around_keeps_the_neighbourhood_and_names_an_unknown_node() {
        let graph = parse_graph(
            "class M(torch.nn.Module):\n    def forward(self, x: \"f32[4]\"):\n        a: \"f32[4]\" = torch.ops.aten.relu.default(x)\n        b: \"f32[4]\" = torch.ops.aten.neg.default(a)\n        c: \"f32[4]\" = torch.ops.aten.exp.default(b)\n        d: \"f32[4]\" = torch.ops.aten.sin.default(c)\n        return (d,)\n",
        )
        .unwrap();
        let part = Part::new("graph", &graph);
        let view = View::new(
            &part,
            &ViewOptions {
                around: vec!["b".into()],
                depth: 1,
                ..Default::default()
            },
        )
        .unwrap();
        let drawn = names(&view);
        assert_eq!(
            drawn,
            ["a", "b", "c"].map(String::from).into_iter().collect()
        );
        assert_eq!(view.left_out, 2);
        assert_eq!(view.edges, vec![(0, 1), (1, 2)]);
        let err = View::new(
            &part,
            &ViewOptions {
                around: vec!["nope".into()],
                depth: 1,
                ..Default::default()
            },
        )
        .unwrap_err();
        assert!(err.to_string().contains("`nope`"), "{err}");
    }
}
