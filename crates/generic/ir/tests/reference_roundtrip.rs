//! Round trips of PyTorch's exported reference graphs (tests/fixtures, from PyTorch 2.13).

mod common;

use graphbug_ir::{parse_graph, print_graph, Graph, Meta, NodeKind};

const MODELS: [&str; 3] = ["mlp", "cnn", "gpt4"];
const FLAT_FILES: [&str; 5] = [
    "forward.py",
    "fw_default.py",
    "bw_default.py",
    "fw_mincut.py",
    "bw_mincut.py",
];

fn fixture(model: &str, file: &str) -> String {
    common::fixture_text(&format!("{model}/{file}"))
}

/// The file with its comment lines removed.
fn without_comments(text: &str) -> String {
    text.lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .map(|l| format!("{l}\n"))
        .collect()
}

#[test]
fn flat_reference_files_print_back_byte_for_byte() {
    for model in MODELS {
        for file in FLAT_FILES {
            let text = fixture(model, file);
            let graph = parse_graph(&text).unwrap_or_else(|e| panic!("{model}/{file}: {e}"));
            let printed = print_graph(&graph);
            let expected = without_comments(&text);
            common::assert_same_text(&format!("{model}/{file}"), &printed, &expected);
        }
    }
}

#[test]
fn joint_pytree_form_parses_like_its_flat_print() {
    for model in MODELS {
        let text = fixture(model, "joint.py");
        let joint = parse_graph(&text).unwrap_or_else(|e| panic!("{model}/joint.py: {e}"));
        let printed = print_graph(&joint);
        assert!(printed.contains("def forward(self, primals_1: "));
        assert!(!printed.contains("tree_flatten_spec"));
        let again = parse_graph(&printed).unwrap_or_else(|e| panic!("{model} reprint: {e}"));
        assert_eq!(
            again, joint,
            "{model}: joint graph changed through its flat print"
        );
        assert_eq!(print_graph(&again), printed);

        // Same nodes as the pytree file: every node line of joint.py appears unchanged.
        let node_lines = text.lines().filter(|l| {
            l.starts_with("        ")
                && l.contains(" = ")
                && !l.contains("tree_flatten_spec")
                && !l.trim_start().starts_with("return")
        });
        let mut count = 0;
        for line in node_lines {
            assert!(
                printed.contains(&format!("{line}\n")),
                "{model}: line missing from flat print: {line}"
            );
            count += 1;
        }
        assert_eq!(count, joint.num_call_function_nodes(), "{model}");
    }
}

#[test]
fn joint_graph_shapes_match_partition_json() {
    for model in MODELS {
        let joint = parse_graph(&fixture(model, "joint.py")).unwrap();
        let info: serde_json::Value =
            serde_json::from_str(&fixture(model, "partition.json")).unwrap();
        assert_eq!(
            joint.num_call_function_nodes() as u64,
            info["joint_nodes"].as_u64().unwrap(),
            "{model}"
        );
        let fwd = parse_graph(&fixture(model, "forward.py")).unwrap();
        assert_eq!(
            fwd.num_call_function_nodes() as u64,
            info["forward_nodes"].as_u64().unwrap(),
            "{model}"
        );
        // Multi-output nodes learn their output metas from their getitems.
        for node in &joint.nodes {
            if let NodeKind::GetItem { source, index } = &node.kind {
                assert_eq!(joint.node(*source).meta.item(*index), node.meta.tensor());
            }
        }
        assert!(joint.nodes.iter().any(|n| matches!(n.meta, Meta::Multi(_))));
    }
}

#[test]
fn reference_graphs_round_trip_through_json() {
    for model in MODELS {
        for file in ["joint.py", "forward.py"] {
            let g = parse_graph(&fixture(model, file)).unwrap();
            let json = g.to_json().unwrap();
            let back = Graph::from_json(&json).unwrap();
            assert_eq!(back, g, "{model}/{file}");
        }
    }
}
