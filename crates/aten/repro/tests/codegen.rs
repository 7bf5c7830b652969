//! Generated repro programs, snapshotted for a small graph, and written deterministically.

use graphbug_backends::{Failure, Stage, Symptom};
use graphbug_ir::parse_graph;
use graphbug_repro::codegen::{repro_py, repro_rs};
use graphbug_repro::manifest::{FailureRecord, Manifest, ReproAfter};

const GRAPH: &str = r#"class Repro(torch.nn.Module):
    def forward(self, x: "f32[2, 3]", w: "f32[3]"):
        mul: "f32[2, 3]" = torch.ops.aten.mul.Tensor(x, w);  x = w = None
        relu: "f32[2, 3]" = torch.ops.aten.relu.default(mul);  mul = None
        return (relu,)
"#;

fn manifest() -> Manifest {
    let mut m = Manifest::new(
        "relu_runtime_error_TESTING_ONLY",
        ReproAfter::Dynamo,
        2,
        "cpu",
    );
    m.fault_spec = None;
    m.failure = Some(FailureRecord::from(
        &Failure::new(
            "relu_runtime_error_TESTING_ONLY",
            Stage::Runtime,
            Symptom::Error,
            "ReluRuntimeError",
        )
        .at("relu", "aten::_assert_scalar.default"),
    ));
    m
}

#[test]
fn repro_rs_snapshot() {
    let g = parse_graph(GRAPH).unwrap();
    insta::assert_snapshot!(repro_rs(&g, &manifest()));
}

#[test]
fn repro_py_snapshot() {
    let g = parse_graph(GRAPH).unwrap();
    insta::assert_snapshot!(repro_py(&g, &manifest()));
}

#[test]
fn repro_directories_are_written_byte_for_byte_the_same() {
    use graphbug_repro::case::{write_repro_dir, ReproCase};
    let g = parse_graph(GRAPH).unwrap();
    let write = |dir: &std::path::Path| {
        let case = ReproCase {
            graph: g.clone(),
            source: None,
            inputs: vec![
                tch::Tensor::from_slice(&[1.0f32, -2.0, 3.0, -4.0, 5.0, -6.0]).reshape([2, 3]),
                tch::Tensor::from_slice(&[0.5f32, 1.0, 2.0]),
            ],
            constants: Default::default(),
            manifest: manifest(),
        };
        write_repro_dir(&dir.join("r"), &case).unwrap();
    };
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    write(a.path());
    write(b.path());
    let files = [
        "graph.py",
        "inputs.safetensors",
        "manifest.json",
        "repro.rs",
        "repro.py",
        "Cargo.toml",
        "eager_outputs.safetensors",
        "minifier_launcher.sh",
    ];
    for f in files {
        let read = |d: &std::path::Path| {
            std::fs::read(d.join("r").join(f)).unwrap_or_else(|e| panic!("{f}: {e}"))
        };
        let (x, y) = (read(a.path()), read(b.path()));
        if f == "minifier_launcher.sh" || f == "README.md" {
            // They name their own directory.
            assert_eq!(
                x.len() - a.path().as_os_str().len(),
                y.len() - b.path().as_os_str().len(),
                "{f}"
            );
        } else {
            assert_eq!(x, y, "{f}");
        }
    }
}
