//! `graphbug repro DIR share` of XLA repro directories through the binary, on XLA's CPU
//! plugin: a module of a JAX training loop's dump, which a fault pinned to one instruction
//! breaks, shared without one byte of the weights its snapshot recorded and without its
//! metadata, and still reproducing; a bug that needs a recorded value keeps it and says so. These tests build
//! and pass without libtorch (`cargo test -p graphbug --no-default-features --test
//! xla_share`).

mod common;

use common::{run_in_tmp as graphbug, said as text};
use graphbug::files::HostTensor;
use graphbug::ir::Dtype;
use std::path::{Path, PathBuf};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn s(p: &Path) -> String {
    p.to_str().unwrap().to_string()
}

/// Every file under `dir`, with its bytes.
fn files(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(files(&p));
        } else {
            out.push((p.clone(), std::fs::read(&p).unwrap()));
        }
    }
    out.sort();
    out
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// The values of `attr="..."` in `text`.
fn quoted(text: &str, attr: &str) -> Vec<String> {
    let key = format!("{attr}=\"");
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find(&key) {
        rest = &rest[at + key.len()..];
        let end = rest.find('"').unwrap();
        out.push(rest[..end].to_string());
    }
    out.sort();
    out.dedup();
    out
}

/// The evaluation of the JAX training loop's dump, with a fault pinned to one of its
/// matmuls: its repro directory holds the weights and inputs its HloSnapshot recorded, and
/// the program with JAX's metadata.
const LOSS: &str = "module_0022.jit_loss";

#[test]
fn a_dumped_module_is_shared_without_its_weights_or_metadata_and_still_reproduces() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let dump = root().join("tests/fixtures/xla/dumps/jax_train");
    let o = graphbug(
        &[
            "repro",
            &s(&dump),
            "--backend",
            "fault:accuracy@node:dot_general.11+pjrt:cpu",
            "--out",
            &s(&out),
            "--no-minify",
        ],
        tmp.path(),
    );
    assert!(o.status.success(), "{}", text(&o));
    let dir = out.join(LOSS);
    let o = graphbug(&["repro", &s(&dir), "share", "--seed", "7"], tmp.path());
    let said = text(&o);
    assert!(o.status.success(), "{said}");
    assert!(
        said.contains("instructions' metadata: op names, source files and lines"),
        "{said}"
    );
    let shared = dir.join("shared");
    let record: serde_json::Value =
        serde_json::from_slice(&std::fs::read(shared.join("shared.json")).unwrap()).unwrap();
    let replaced = record["replaced"].as_array().unwrap();
    for k in 0..8 {
        assert!(
            replaced
                .iter()
                .any(|r| r.as_str().unwrap().starts_with(&format!("input arg{k} "))),
            "arg{k}: {record}"
        );
    }
    assert!(
        replaced
            .iter()
            .any(|r| r.as_str().unwrap().starts_with("constant ")),
        "{record}"
    );
    // None of the recorded weights' and inputs' bytes (16-byte pieces of each), and none
    // of the program's metadata strings or names, is in any file of the shared directory.
    let original = std::fs::read_to_string(dir.join("program.hlo")).unwrap();
    let inputs = graphbug::files::read(&dir.join("inputs.safetensors")).unwrap();
    assert_eq!(inputs.len(), 8);
    let shared_files = files(&shared);
    for (name, t) in &inputs {
        for piece in t
            .data
            .chunks_exact(16)
            .filter(|p| p.iter().any(|b| *b != 0))
        {
            for (path, bytes) in &shared_files {
                assert!(
                    !contains(bytes, piece),
                    "{name}'s bytes are in {}",
                    path.display()
                );
            }
        }
    }
    // (Longer than a parameter's own name, `x`, which any text holds.)
    let mut strings: Vec<String> = ["op_name", "source_file"]
        .iter()
        .flat_map(|a| quoted(&original, a))
        .filter(|v| v.len() > 3)
        .collect();
    assert!(strings.len() > 10, "{strings:?}");
    strings.extend(["jit_loss".to_string(), "p__wq__".to_string()]);
    for (path, bytes) in &shared_files {
        let t = String::from_utf8_lossy(bytes);
        for v in &strings {
            assert!(!t.contains(v.as_str()), "`{v}` is in {}", path.display());
        }
    }
    let program = std::fs::read_to_string(shared.join("program.hlo")).unwrap();
    assert!(program.starts_with("HloModule shared"), "{program}");
    assert!(!program.contains("metadata="), "{program}");
    // It reproduces, and a second share writes the same bytes.
    let o = graphbug(&["repro", &s(&shared), "run"], tmp.path());
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("reproduced: accuracy"), "{}", text(&o));
    let first = files(&shared);
    let o = graphbug(&["repro", &s(&dir), "share", "--seed", "7"], tmp.path());
    assert!(o.status.success(), "{}", text(&o));
    assert!(first == files(&shared), "a second share wrote other bytes");
}

/// `x`, `y` → `select(x == c, y*y, y)` with `c` a constant zero: a fault on `y*y` shows
/// only where `x` equals `c`, as the recorded `x` (zeros) does and no random `x` or `c` does.
const NEEDS_X: &str = "HloModule needs_value

ENTRY main {
  x = f32[4] parameter(0)
  y = f32[4] parameter(1)
  c = f32[4] constant({0, 0, 0, 0})
  eq = pred[4] compare(x, c), direction=EQ
  z = f32[4] multiply(y, y)
  ROOT s = f32[4] select(eq, z, y)
}
";

fn f32s(values: &[f32]) -> HostTensor {
    HostTensor::new(
        Dtype::Float32,
        vec![values.len()],
        values.iter().flat_map(|v| v.to_le_bytes()).collect(),
    )
    .unwrap()
}

#[test]
fn a_value_the_bug_needs_is_kept_and_said() {
    let tmp = tempfile::tempdir().unwrap();
    let program = tmp.path().join("needs_value.hlo");
    std::fs::write(&program, NEEDS_X).unwrap();
    let inputs = tmp.path().join("inputs.safetensors");
    graphbug::files::write(
        &inputs,
        &[
            ("arg0".to_string(), f32s(&[0.0; 4])),
            ("arg1".to_string(), f32s(&[1.0, 2.0, 3.0, 4.0])),
        ],
    )
    .unwrap();
    let out = tmp.path().join("repro");
    let o = graphbug(
        &[
            "repro",
            &s(&program),
            "--inputs",
            &s(&inputs),
            "--backend",
            "fault:accuracy@node:z+pjrt:cpu",
            "--out",
            &s(&out),
            "--no-minify",
        ],
        tmp.path(),
    );
    assert!(o.status.success(), "{}", text(&o));
    let o = graphbug(&["repro", &s(&out), "share"], tmp.path());
    let said = text(&o);
    assert!(o.status.success(), "{said}");
    let why = "the failure does not reproduce with random values in its place";
    assert!(
        said.contains(&format!("kept: input arg0 (f32[4]): {why}")),
        "{said}"
    );
    assert!(
        said.contains(&format!("kept: constant constant.1 (f32[4]): {why}")),
        "{said}"
    );
    let record: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("shared/shared.json")).unwrap()).unwrap();
    assert_eq!(record["kept"].as_array().unwrap().len(), 2, "{record}");
    assert_eq!(
        record["replaced"],
        serde_json::json!(["input arg1 (f32[4])"]),
        "{record}"
    );
    // Scrubbed; all three at once; then arg0 alone, the other two, arg1, the constant.
    assert_eq!(record["queries"], 6, "{record}");
    // The recorded x is kept; y is not.
    let shared = graphbug::files::read(&out.join("shared/inputs.safetensors")).unwrap();
    assert_eq!(shared[0].1, f32s(&[0.0; 4]));
    assert_ne!(shared[1].1, f32s(&[1.0, 2.0, 3.0, 4.0]));
    let program = std::fs::read_to_string(out.join("shared/program.hlo")).unwrap();
    assert!(program.contains("constant({0, 0, 0, 0})"), "{program}");
    let o = graphbug(&["repro", &s(&out.join("shared")), "run"], tmp.path());
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
}

#[test]
fn what_cannot_be_shared_says_why() {
    let tmp = tempfile::tempdir().unwrap();
    // A StableHLO program: not scrubbed yet, said with what to share instead.
    let dir = root().join("tests/fixtures/repro-dirs/stablehlo");
    let o = graphbug(&["repro", &s(&dir), "share"], tmp.path());
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        text(&o).contains("`share` scrubs HLO programs, and this one is stablehlo-text"),
        "{}",
        text(&o)
    );
    assert!(!dir.join("shared").exists());
}
