//! Pictures of graphs: an aten graph or an XLA program (both read as a graphbug
//! [`Graph`]), with what matters marked on it (inputs and outputs, a partition's saved and
//! recomputed values, the first node where two runs diverge and its inputs, a minifier's
//! culprit), written as
//!
//! - Graphviz's DOT text ([`dot::to_dot`]), laid out by Graphviz's `dot` into SVG
//!   ([`dot::render_svg`]; Graphviz from the system, run as a bounded child process);
//! - a self-contained HTML page around that SVG ([`html::page`]);
//! - Google Model Explorer's graph JSON ([`explorer::graph_collection`]).
//!
//! A layered layout of thousands of nodes takes Graphviz minutes, so large graphs are
//! drawn smaller first ([`view::View`]): runs of repeated layers (the same ops wired the
//! same way, copy after copy) are drawn once with the other copies folded into one box,
//! and `--around` keeps only the neighbourhood of the nodes that matter.

pub mod dot;
pub mod explorer;
pub mod html;
pub mod view;

use std::collections::BTreeMap;

use graphbug_ir::{Graph, NodeId};
use graphbug_run::memory::human as human_bytes;

pub use view::{View, ViewOptions};

/// What a picture says about one node.
#[derive(Clone, Debug, PartialEq)]
pub enum Mark {
    /// A value the forward saves for the backward, with its size in bytes.
    Saved(u64),
    /// A node the backward recomputes from saved values.
    Recomputed,
    /// The node a minification ended at, or a fault's target: where the bug is.
    Culprit,
    /// The first node whose value diverges between two runs, and how.
    Diverged(String),
    /// An input of the first divergence, and how the two runs compared on it.
    DivergenceInput(String),
}

impl Mark {
    /// The mark's kind as one word: `saved`, `recomputed`, `culprit`, `diverged`, `input-of-divergence`.
    pub fn kind(&self) -> &'static str {
        match self {
            Mark::Saved(_) => "saved",
            Mark::Recomputed => "recomputed",
            Mark::Culprit => "culprit",
            Mark::Diverged(_) => "diverged",
            Mark::DivergenceInput(_) => "input-of-divergence",
        }
    }

    /// The mark in words, for tooltips and side panels.
    pub fn describe(&self) -> String {
        match self {
            Mark::Saved(bytes) => format!("saved for the backward: {}", human_bytes(*bytes)),
            Mark::Recomputed => "recomputed in the backward".into(),
            Mark::Culprit => "culprit: the failure needs this node".into(),
            Mark::Diverged(why) => format!("first divergence: {why}"),
            Mark::DivergenceInput(how) => format!("input of the first divergence: {how}"),
        }
    }
}

/// The mark a node is drawn as when it has several: the last of [`dot::LEGEND`]'s order
/// (a culprit over a saved value).
pub fn dominant(marks: &[Mark]) -> Option<&'static str> {
    marks
        .iter()
        .map(Mark::kind)
        .max_by_key(|k| dot::LEGEND.iter().position(|(l, _, _)| l == k))
}

/// One graph of a picture (a program, or a partition's forward or backward) and its marks.
#[derive(Clone, Debug)]
pub struct Part<'g> {
    /// Its name (`graph`, `forward`, `backward`, `original`, `minified`).
    pub name: String,
    /// A line under the name (what the part is, sizes).
    pub caption: String,
    /// The graph.
    pub graph: &'g Graph,
    /// Marks by node.
    pub marks: BTreeMap<NodeId, Vec<Mark>>,
}

impl<'g> Part<'g> {
    /// A part with no marks.
    pub fn new(name: &str, graph: &'g Graph) -> Part<'g> {
        Part {
            name: name.into(),
            caption: String::new(),
            graph,
            marks: BTreeMap::new(),
        }
    }

    /// Marks the node named `name`; false when the graph has no such node.
    pub fn mark(&mut self, name: &str, mark: Mark) -> bool {
        match self.graph.find(name) {
            Some(id) => {
                self.marks.entry(id).or_default().push(mark);
                true
            }
            None => false,
        }
    }
}

/// A picture: a title, its parts side by side, and notes shown above them.
#[derive(Clone, Debug)]
pub struct Picture<'g> {
    /// The title (the file drawn).
    pub title: String,
    /// The graphs.
    pub parts: Vec<Part<'g>>,
    /// Lines of summary (saved bytes, the divergence, what was collapsed).
    pub notes: Vec<String>,
}

impl Picture<'_> {
    /// What is drawn of each part under `options`. `options.around` names nodes of any
    /// part: each part is drawn around those it has, and a part with none of them is left
    /// out; none in any part is an error naming them.
    pub fn views(&self, options: &ViewOptions) -> Result<Vec<View>, DrawError> {
        let mut views = Vec::new();
        for part in &self.parts {
            let here: Vec<String> = options
                .around
                .iter()
                .filter(|n| part.graph.find(n).is_some())
                .cloned()
                .collect();
            if !options.around.is_empty() && here.is_empty() {
                continue;
            }
            let options = ViewOptions {
                around: here,
                ..options.clone()
            };
            views.push(View::new(part, &options)?);
        }
        if views.is_empty() {
            let names: Vec<String> = options.around.iter().map(|n| format!("`{n}`")).collect();
            return Err(DrawError::Unknown(format!(
                "--around: no node {} in {}",
                names.join(" or "),
                self.title
            )));
        }
        Ok(views)
    }

    /// An HTML section `id` showing the picture laid out by Graphviz within `limit`: its
    /// notes, what was folded, the legend and the figure.
    pub fn section(
        &self,
        id: &str,
        options: &ViewOptions,
        limit: std::time::Duration,
    ) -> Result<html::Section, DrawError> {
        let views = self.views(options)?;
        let svg = dot::render_svg(&views, limit)?;
        let mut lines = self.notes.clone();
        lines.extend(views.iter().filter_map(View::summary));
        let mut body = String::new();
        if !lines.is_empty() {
            body.push_str(&html::list(&lines));
        }
        body.push_str(&html::legend());
        body.push_str(&html::figure(&format!("{id}-figure"), &svg));
        Ok(html::Section::new(id, "The picture", body))
    }
}

/// Why a picture could not be made.
#[derive(Debug, thiserror::Error)]
pub enum DrawError {
    /// Graphviz is not installed.
    #[error("Graphviz's `dot` was not found on PATH (it lays out the picture): install Graphviz (Debian: `apt-get install graphviz`), or write `--format dot` or `--format model-explorer`, which need no layout")]
    NoGraphviz,
    /// Graphviz failed or took too long.
    #[error("Graphviz's `dot` {0}")]
    Graphviz(String),
    /// A node named in the options is not in the graph.
    #[error("{0}")]
    Unknown(String),
    /// Writing or reading a file failed.
    #[error("{0}")]
    Io(String),
}

/// The op of a node as a short label: `addmm` for `aten.addmm.default`, `dot` for HLO's
/// `hlo.dot`, `input`, `getitem[1]`, `self.weight`.
pub fn op_label(graph: &Graph, id: NodeId) -> String {
    use graphbug_ir::NodeKind;
    match &graph.node(id).kind {
        NodeKind::Placeholder => "input".into(),
        NodeKind::Call { op, .. } => {
            if op.namespace == "aten" || op.namespace == "hlo" || op.namespace == "stablehlo" {
                op.name.clone()
            } else {
                format!("{}.{}", op.namespace, op.name)
            }
        }
        NodeKind::GetItem { index, .. } => format!("getitem[{index}]"),
        NodeKind::GetAttr { target } => format!("self.{target}"),
    }
}

/// The type of a node's value as FX annotates it (`f32[2, 8]`), several for a node of
/// several results, empty when unknown.
pub fn type_label(graph: &Graph, id: NodeId) -> String {
    use graphbug_ir::Meta;
    let meta = &graph.node(id).meta;
    match meta {
        Meta::Multi(items) => {
            let items: Vec<String> = items
                .iter()
                .map(|m| {
                    m.as_ref()
                        .map(|t| t.to_string())
                        .unwrap_or_else(|| "?".into())
                })
                .collect();
            format!("({})", items.join(", "))
        }
        _ => meta.annotation().unwrap_or_default(),
    }
}
