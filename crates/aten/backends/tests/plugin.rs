//! Plugin backends: build the example plugin, load it, run a graph through it by name.

use std::path::PathBuf;
use std::process::Command;

use graphbug_aten::io::{order_tensors, read_tensors};
use graphbug_backends::plugin::{load_plugin, PluginError};
use graphbug_backends::{lookup, CompileContext};
use graphbug_ir::parse_graph;

/// Builds `examples/plugin_backend` with the cargo running the tests; returns the library.
fn build_example_plugin() -> PathBuf {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args([
            "build",
            "-p",
            "graphbug-plugin-example",
            "--message-format=json",
        ])
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/../../.."))
        .output()
        .expect("cargo runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    stdout
        .lines()
        .filter(|l| {
            l.contains("\"reason\":\"compiler-artifact\"") && l.contains("graphbug-plugin-example")
        })
        .find_map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).ok()?;
            v["filenames"].as_array()?.iter().find_map(|f| {
                let f = f.as_str()?;
                f.ends_with(".so").then(|| PathBuf::from(f))
            })
        })
        .expect("cargo reports the plugin library")
}

#[test]
fn the_example_plugin_loads_and_runs_by_name() {
    let lib = build_example_plugin();
    let names = load_plugin(&lib).unwrap();
    assert_eq!(names, ["plugin_cse_eager"]);
    // Loading it again offers the same name: refused, nothing replaced.
    let err = load_plugin(&lib).unwrap_err();
    assert!(matches!(err, PluginError::Register { .. }), "{err}");

    let fixtures = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../tests/fixtures/gpt4");
    let graph =
        parse_graph(&std::fs::read_to_string(fixtures.join("forward.py")).unwrap()).unwrap();
    let names: Vec<String> = (0..graph.placeholders().len())
        .map(|i| format!("arg{i}"))
        .collect();
    let inputs = order_tensors(
        read_tensors(&fixtures.join("inputs.npz")).unwrap(),
        &names,
        "inputs",
    )
    .unwrap();
    let expected = lookup("eager")
        .unwrap()
        .compile(&graph, &[], &CompileContext::default())
        .unwrap()
        .run(&inputs.iter().map(tch::Tensor::copy).collect::<Vec<_>>())
        .unwrap();
    let backend = lookup("plugin_cse_eager").unwrap();
    let mut f = backend
        .compile(&graph, &[], &CompileContext::default())
        .unwrap();
    let out = f.run(&inputs).unwrap();
    // CSE merged gpt4's repeated causal masks; the result is still eager's, bit for bit.
    assert!(out[0]
        .as_ref()
        .unwrap()
        .equal(expected[0].as_ref().unwrap()));
}

#[test]
fn missing_corrupt_and_foreign_libraries_are_clean_errors() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nope.so");
    let err = load_plugin(&missing).unwrap_err();
    assert!(matches!(err, PluginError::Load { .. }), "{err}");
    assert!(err.to_string().contains("nope.so"));

    let corrupt = dir.path().join("corrupt.so");
    std::fs::write(&corrupt, b"\x7fELF this is not a shared library").unwrap();
    let err = load_plugin(&corrupt).unwrap_err();
    assert!(matches!(err, PluginError::Load { .. }), "{err}");
    assert!(err
        .to_string()
        .starts_with(&format!("cannot load plugin {}", corrupt.display())));

    // A real shared library that is not a plugin.
    let c10 = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../.libtorch/lib/libc10.so");
    let err = load_plugin(&c10).unwrap_err();
    assert!(matches!(err, PluginError::NotAPlugin { .. }), "{err}");
    assert!(
        err.to_string()
            .ends_with("it exports no GRAPHBUG_PLUGIN symbol"),
        "{err}"
    );
}
