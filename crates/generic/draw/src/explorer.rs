//! Google Model Explorer's graph JSON (a `GraphCollection`: its `graphs`, each with
//! `nodes` carrying `incomingEdges`, `attrs`, `outputsMetadata` and `style`), so a graph of
//! any size opens in the tool people already use: Model Explorer lays it out itself. Each
//! part is a graph; each node's marks (saved bytes, recomputed, divergence, culprit) are
//! attributes and a background colour; copies of a repeated layer are namespaces
//! (`layer_3`), which Model Explorer draws as collapsible layers.

use serde::Serialize;

use graphbug_ir::{Graph, NodeId, NodeKind};

use crate::dot::LEGEND;
use crate::view::find_repeats;
use crate::{op_label, type_label, Mark, Part};

/// A collection of graphs (Model Explorer's `GraphCollection`).
#[derive(Serialize)]
pub struct GraphCollection {
    /// Shown beside the file name.
    pub label: String,
    /// The graphs.
    pub graphs: Vec<ExplorerGraph>,
}

/// One graph (Model Explorer's `Graph`).
#[derive(Serialize)]
pub struct ExplorerGraph {
    /// Its id.
    pub id: String,
    /// Its nodes.
    pub nodes: Vec<ExplorerNode>,
}

/// One node (Model Explorer's `GraphNode`).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ExplorerNode {
    /// Unique in its graph: the node's name.
    pub id: String,
    /// Shown on the node: its op.
    pub label: String,
    /// The layer it belongs to (`layer_3`), empty outside repeated layers.
    pub namespace: String,
    /// Shown in the side panel.
    pub attrs: Vec<KeyValue>,
    /// Its operands.
    pub incoming_edges: Vec<IncomingEdge>,
    /// Per output: its type.
    pub outputs_metadata: Vec<MetadataItem>,
    /// A background colour for marked nodes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub style: Option<Style>,
}

/// A key and a value.
#[derive(Serialize)]
pub struct KeyValue {
    /// The key.
    pub key: String,
    /// The value.
    pub value: String,
}

/// An operand edge (Model Explorer's `IncomingEdge`).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct IncomingEdge {
    /// The producer.
    pub source_node_id: String,
    /// Which of the producer's outputs.
    pub source_node_output_id: String,
    /// Which operand of this node.
    pub target_node_input_id: String,
}

/// Attributes of one output.
#[derive(Serialize)]
pub struct MetadataItem {
    /// The output's index.
    pub id: String,
    /// Its attributes.
    pub attrs: Vec<KeyValue>,
}

/// A node's colours.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Style {
    /// Fill.
    pub background_color: String,
}

fn kv(key: &str, value: impl Into<String>) -> KeyValue {
    KeyValue {
        key: key.into(),
        value: value.into(),
    }
}

/// The collection of `parts`, labelled `label`.
pub fn graph_collection(label: &str, parts: &[Part<'_>]) -> GraphCollection {
    GraphCollection {
        label: label.into(),
        graphs: parts.iter().map(graph_of).collect(),
    }
}

/// One part as a Model Explorer graph, with a `GraphOutputs` node reading its outputs.
fn graph_of(part: &Part<'_>) -> ExplorerGraph {
    let graph = part.graph;
    let layer = layers(part);
    let mut nodes: Vec<ExplorerNode> = graph
        .ids()
        .map(|id| node_of(part, id, layer[id.index()]))
        .collect();
    let outputs: Vec<IncomingEdge> = graph
        .outputs()
        .iter()
        .enumerate()
        .flat_map(|(k, v)| {
            // An output may be a list of values: one edge from each.
            let mut sources = Vec::new();
            v.for_each_node(&mut |id: NodeId| sources.push(id));
            sources.into_iter().map(move |id| IncomingEdge {
                source_node_id: graph.node(id).name.to_string(),
                source_node_output_id: "0".into(),
                target_node_input_id: k.to_string(),
            })
        })
        .collect();
    nodes.push(ExplorerNode {
        id: "GraphOutputs".into(),
        label: "GraphOutputs".into(),
        namespace: String::new(),
        attrs: vec![kv("outputs", graph.outputs().len().to_string())],
        incoming_edges: outputs,
        outputs_metadata: Vec::new(),
        style: None,
    });
    ExplorerGraph {
        id: part.name.clone(),
        nodes,
    }
}

/// The layer (1-based copy of a repeated run) of each node, 0 outside runs.
fn layers(part: &Part<'_>) -> Vec<usize> {
    let graph = part.graph;
    let mut layer = vec![0usize; graph.nodes.len()];
    let (seq, runs) = find_repeats(part, &vec![true; graph.nodes.len()], Some(true));
    let mut next = 1;
    for (start, length, copies) in runs {
        for c in 0..copies {
            for &id in &seq[start + c * length..start + (c + 1) * length] {
                layer[id.index()] = next + c;
            }
        }
        next += copies;
    }
    layer
}

fn node_of(part: &Part<'_>, id: NodeId, layer: usize) -> ExplorerNode {
    let graph: &Graph = part.graph;
    let node = graph.node(id);
    let mut incoming_edges = Vec::new();
    let mut k = 0;
    node.for_each_input(|input| {
        // A getitem is a node of its own: every edge leaves its source's one output.
        incoming_edges.push(IncomingEdge {
            source_node_id: graph.node(input).name.to_string(),
            source_node_output_id: "0".into(),
            target_node_input_id: k.to_string(),
        });
        k += 1;
    });
    let ty = type_label(graph, id);
    let mut attrs = vec![
        kv("name", node.name.to_string()),
        kv("op", op_label(graph, id)),
    ];
    if let NodeKind::Call { op, .. } = &node.kind {
        attrs.push(kv("target", op.to_string()));
    }
    let marks = part.marks.get(&id).map(Vec::as_slice).unwrap_or(&[]);
    for m in marks {
        match m {
            Mark::Saved(bytes) => attrs.push(kv("saved_bytes", bytes.to_string())),
            other => attrs.push(kv(other.kind(), other.describe())),
        }
    }
    let style = crate::dominant(marks)
        .and_then(|kind| LEGEND.iter().find(|(l, _, _)| *l == kind))
        .map(|(_, colour, _)| Style {
            background_color: colour.to_string(),
        });
    ExplorerNode {
        id: node.name.to_string(),
        label: op_label(graph, id),
        namespace: if layer > 0 {
            format!("layer_{layer}")
        } else {
            String::new()
        },
        attrs,
        incoming_edges,
        outputs_metadata: vec![MetadataItem {
            id: "0".into(),
            attrs: vec![kv("shape", ty)],
        }],
        style,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use graphbug_ir::models::{gpt_forward, GptConfig};

    #[test]
    fn nodes_edges_marks_and_layers_are_written() {
        let graph = gpt_forward(&GptConfig::gpt4_layers(6));
        let mut part = Part::new("forward", &graph);
        let some_call = graph
            .ids()
            .find(|&id| graph.node(id).is_call_function())
            .unwrap();
        let name = graph.node(some_call).name.to_string();
        part.mark(&name, Mark::Saved(4096));
        let json = serde_json::to_value(graph_collection("gpt", &[part])).unwrap();
        let nodes = json["graphs"][0]["nodes"].as_array().unwrap();
        assert_eq!(nodes.len(), graph.nodes.len() + 1);
        let marked = nodes.iter().find(|n| n["id"] == name.as_str()).unwrap();
        assert!(marked["attrs"]
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a["key"] == "saved_bytes" && a["value"] == "4096"));
        assert_eq!(marked["style"]["backgroundColor"], "#ffd8a8");
        assert!(!marked["incomingEdges"].as_array().unwrap().is_empty());
        // Every edge names a node of the graph.
        let ids: std::collections::HashSet<&str> =
            nodes.iter().map(|n| n["id"].as_str().unwrap()).collect();
        for n in nodes {
            for e in n["incomingEdges"].as_array().unwrap() {
                assert!(ids.contains(e["sourceNodeId"].as_str().unwrap()));
            }
        }
        // Repeated layers become namespaces.
        let layers: std::collections::BTreeSet<&str> = nodes
            .iter()
            .filter_map(|n| n["namespace"].as_str())
            .filter(|s| !s.is_empty())
            .collect();
        assert!(layers.len() >= 5, "{layers:?}");
    }
}
