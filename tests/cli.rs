//! The `graphbug` binary: `fmt` and `check` on reference graphs and on bad input.

use std::path::PathBuf;
use std::process::{Command, Output};

fn fixture(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(rel)
}

fn graphbug(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_graphbug"))
        .args(args)
        .output()
        .expect("the graphbug binary runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn check_counts_nodes_inputs_outputs() {
    let cases = [
        ("mlp/forward.py", "12 nodes, 9 inputs, 1 outputs\n"),
        ("cnn/joint.py", "48 nodes, 13 inputs, 16 outputs\n"),
        ("gpt4/joint.py", "613 nodes, 56 inputs, 56 outputs\n"),
        ("gpt4/forward.py", "259 nodes, 55 inputs, 1 outputs\n"),
    ];
    for (file, want) in cases {
        let out = graphbug(&["check", fixture(file).to_str().unwrap()]);
        assert!(out.status.success(), "{file}: {}", text(&out.stderr));
        assert_eq!(text(&out.stdout), want, "{file}");
    }
}

#[test]
fn fmt_prints_canonical_text() {
    let path = fixture("mlp/fw_default.py");
    let out = graphbug(&["fmt", path.to_str().unwrap()]);
    assert!(out.status.success());
    let original = std::fs::read_to_string(&path).unwrap();
    let without_comments: String = original
        .lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .map(|l| format!("{l}\n"))
        .collect();
    assert_eq!(text(&out.stdout), without_comments);
    // The pytree form prints flat.
    let out = graphbug(&["fmt", fixture("mlp/joint.py").to_str().unwrap()]);
    assert!(out.status.success());
    assert!(text(&out.stdout).contains("def forward(self, primals_1: \"f32[64, 32]\""));
}

#[test]
fn bad_input_exits_1_with_the_error() {
    let dir = std::env::temp_dir().join(format!("graphbug-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bad = dir.join("bad.py");
    std::fs::write(
        &bad,
        "def forward(self, x):\n    y = torch.ops.aten.relu.default(q)\n    return (y,)\n",
    )
    .unwrap();
    for cmd in ["fmt", "check"] {
        let out = graphbug(&[cmd, bad.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(1));
        assert!(out.stdout.is_empty());
        let err = text(&out.stderr);
        assert!(err.contains("bad.py: 2:37: unknown name `q`"), "{err}");
        assert!(err.contains("relu.default(q)"), "{err}");
    }
    let out = graphbug(&["check", dir.join("missing.py").to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("missing.py"));
    std::fs::remove_dir_all(&dir).unwrap();
}
