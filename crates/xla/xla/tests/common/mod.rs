//! Helpers the graphbug-xla integration tests share: the corpus, jaxlib's Python, scratch.
#![allow(dead_code)] // each test binary uses some of the helpers

use std::path::{Path, PathBuf};
use std::process::Command;

use graphbug_xla::stablehlo;

/// The workspace root.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../..")
}

/// The HLO corpus JAX lowered (`tests/fixtures/xla/hlo`).
pub fn corpus_dir() -> PathBuf {
    root().join("tests/fixtures/xla/hlo")
}

/// The corpus's programs: file stems of `*.hlo` (not `*.pb.hlo`).
pub fn corpus() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(corpus_dir())
        .expect("the corpus folder")
        .filter_map(|e| {
            let name = e.ok()?.file_name().into_string().ok()?;
            let stem = name.strip_suffix(".hlo")?;
            (!stem.ends_with(".pb")).then(|| stem.to_string())
        })
        .collect();
    names.sort();
    assert!(names.len() >= 25, "corpus: {names:?}");
    names
}

/// jaxlib's Python (`GRAPHBUG_PYTHON`, else the venv's), if it has jax, jaxlib and
/// ml_dtypes; otherwise `None`, after saying which checks do not run (`skipped`).
pub fn python(skipped: &str) -> Option<PathBuf> {
    let python = std::env::var_os(stablehlo::PYTHON_ENV)
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join(".venv/bin/python"));
    let ok = Command::new(&python)
        .args(["-c", "import jax, jaxlib._hlo, ml_dtypes"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        graphbug_run::not_run_here(
            skipped,
            &format!(
                "{} is no Python with jax and jaxlib (set {} to one)",
                python.display(),
                stablehlo::PYTHON_ENV
            ),
        );
    }
    ok.then_some(python)
}

/// A fresh scratch folder named `graphbug-<tag>-...`, removed when it is dropped.
pub fn scratch(tag: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(&format!("graphbug-{tag}-"))
        .tempdir()
        .unwrap()
}

/// Runs a Python script with arguments; its standard output (a failure is the test's).
pub fn run_python(python: &Path, script: &str, args: &[&Path]) -> String {
    let out = Command::new(python)
        .arg("-c")
        .arg(script)
        .args(args)
        .output()
        .expect("python runs");
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "python failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}
