//! Reference values and backend checkers on the reference graphs.

use std::collections::HashMap;

use graphbug_aten::io::{order_tensors, read_tensors};
use graphbug_backends::lookup;
use graphbug_ir::{parse_graph, Device, Graph};
use graphbug_minifier::{Checker, Origin, Original, Verdict};
use graphbug_repro::{BackendChecker, CheckKind, ReferenceValues};
use tch::Tensor;

fn model(name: &str) -> (Graph, Vec<Tensor>) {
    let dir = format!(
        "{}/../../../tests/fixtures/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    let graph =
        parse_graph(&std::fs::read_to_string(format!("{dir}/forward.py")).unwrap()).unwrap();
    let names: Vec<String> = (0..graph.placeholders().len())
        .map(|i| format!("arg{i}"))
        .collect();
    let inputs = order_tensors(
        read_tensors(std::path::Path::new(&format!("{dir}/inputs.npz"))).unwrap(),
        &names,
        "inputs",
    )
    .unwrap();
    (graph, inputs)
}

#[test]
fn values_in_memory_and_on_disk_agree_and_are_fresh_copies() {
    let (graph, inputs) = model("cnn");
    let tmp = tempfile::tempdir().unwrap();
    let mem =
        ReferenceValues::record(&graph, &inputs, &HashMap::new(), &Device::cpu(), None).unwrap();
    let disk = ReferenceValues::record(
        &graph,
        &inputs,
        &HashMap::new(),
        &Device::cpu(),
        Some(tmp.path()),
    )
    .unwrap();
    for node in [0u32, 12, 14, 18, 25, 30] {
        if graph.nodes[node as usize].is_placeholder() {
            continue;
        }
        let (a, b) = (mem.get(Origin::Node(node)), disk.get(Origin::Node(node)));
        match (a, b) {
            (Ok(a), Ok(b)) => assert!(a.equal(&b), "node {node}"),
            (Err(_), Err(_)) => {}
            other => panic!("node {node}: {other:?}"),
        }
    }
    // Inputs are the values before the run: the batch-norm counter was not incremented.
    assert!(mem.get(Origin::Input(10)).unwrap().equal(&inputs[10]));
    // Every get is a copy: mutating one does not change the next.
    let t = mem.get(Origin::Input(0)).unwrap();
    let _ = t.shallow_clone().fill_(7.0);
    assert!(mem.get(Origin::Input(0)).unwrap().equal(&inputs[0]));
    assert!(mem.get(Origin::Node(99_999)).is_err());
}

#[test]
fn backend_checkers_see_compile_runtime_and_accuracy_failures() {
    let (graph, inputs) = model("mlp");
    let original = Original::new(graph.clone());
    let values =
        || ReferenceValues::record(&graph, &inputs, &HashMap::new(), &Device::cpu(), None).unwrap();
    let relu = graph.find("relu").unwrap().0;
    let only_relu = original.candidate(&[relu]);
    let only_gelu = original.candidate(&[graph.find("gelu").unwrap().0]);
    let cases = [
        (
            "relu_compile_error_TESTING_ONLY",
            CheckKind::Compile,
            "compile error",
        ),
        (
            "relu_runtime_error_TESTING_ONLY",
            CheckKind::Runtime,
            "runtime error",
        ),
        (
            "relu_accuracy_error_TESTING_ONLY",
            CheckKind::Accuracy,
            "accuracy wrong result",
        ),
    ];
    for (backend, kind, want) in cases {
        let mut c = BackendChecker::new(lookup(backend).unwrap(), kind, values());
        match c.check(&only_relu) {
            Verdict::Fails(sig) => assert_eq!(sig.kind, want, "{backend}"),
            other => panic!("{backend}: {other:?}"),
        }
        assert_eq!(c.check(&only_gelu), Verdict::Passes, "{backend}");
        assert!(matches!(
            c.check(&original.candidate(&original.all())),
            Verdict::Fails(_)
        ));
    }
    // eager passes everything.
    let mut c = BackendChecker::new(lookup("eager").unwrap(), CheckKind::Accuracy, values());
    assert_eq!(
        c.check(&original.candidate(&original.all())),
        Verdict::Passes
    );
}
