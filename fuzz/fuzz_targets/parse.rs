//! Fuzz target: the parser never panics, and whatever it accepts prints to text that
//! parses back and prints identically.
#![no_main]

use graphbug_ir::{parse_graph, print_graph};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(graph) = parse_graph(text) {
        let printed = print_graph(&graph);
        let again = parse_graph(&printed)
            .unwrap_or_else(|e| panic!("printed graph does not parse: {e}\n{printed}"));
        assert_eq!(print_graph(&again), printed, "printing is not stable");
        let json = graph.to_json().expect("a parsed graph serializes");
        let back = graphbug_ir::Graph::from_json(&json).expect("its JSON reads back");
        assert_eq!(back, graph, "JSON round trip changed the graph");
    }
});
