//! IREE as a backend of XLA programs, through the binary (`--backend iree:llvm-cpu`, with the
//! `iree-base-compiler` and `iree-base-runtime` wheels `cargo xtask setup` installs): HLO
//! fixtures converted and run against JAX's outputs; IREE's own failure to compile one of
//! them minified without a check script; a fault found against XLA CPU's float64 reference,
//! minified, and reproduced by `repro.py` with IREE and JAX; a compiler that crashes or
//! hangs is a verdict, and one killed with graphbug leaves nothing behind; bad names and
//! missing tools name the culprit. These tests build and pass without libtorch
//! (`cargo test -p graphbug --no-default-features --test xla_iree`).

mod common;

use common::{command, said, Run};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn hlo(name: &str) -> String {
    s(&root().join("tests/fixtures/xla/hlo").join(name))
}

fn s(p: &Path) -> String {
    p.to_str().unwrap().to_string()
}

fn python() -> PathBuf {
    root().join(".venv/bin/python")
}

/// Runs graphbug with `env`, its scratch under `tmp`; IREE's compiler must be in .venv.
fn graphbug(args: &[&str], env: &[(&str, &str)], tmp: &Path) -> std::process::Output {
    let compiler =
        root().join(".venv/lib/python3.11/site-packages/iree/compiler/_mlir_libs/iree-compile");
    assert!(
        compiler.is_file(),
        "IREE's compiler is not in .venv: run `cargo xtask setup` ({} is missing)",
        compiler.display()
    );
    command(args, env, tmp).run()
}

#[test]
fn hlo_programs_run_on_iree_and_match_jax() {
    let tmp = tempfile::tempdir().unwrap();
    // A transformer block; argmax (integer results); gather, scatter, sort and top-k (which
    // XLA's translation leaves as mhlo.topk, IREE's chlo.top_k).
    for name in ["transformer", "argmax", "gather_scatter_sort"] {
        let (args, outs) =
            xtask::bundle::split_io(&root().join(format!("tests/fixtures/xla/hlo/{name}.io.npz")))
                .unwrap();
        let (inputs, expected) = (
            tmp.path().join(format!("{name}.in.npz")),
            tmp.path().join(format!("{name}.out.npz")),
        );
        graphbug::files::write(&inputs, &args).unwrap();
        graphbug::files::write(&expected, &outs).unwrap();
        let o = graphbug(
            &[
                "run",
                &hlo(&format!("{name}.hlo")),
                "--backend",
                "iree:llvm-cpu",
                "--inputs",
                &s(&inputs),
                "--compare",
                &s(&expected),
            ],
            &[],
            tmp.path(),
        );
        let text = said(&o);
        assert!(o.status.success(), "{name}: {text}");
        assert!(
            text.contains("converted as XLA converts it"),
            "{name}: {text}"
        );
        assert!(!text.contains("DIFFERS"), "{name}: {text}");
        if name == "gather_scatter_sort" {
            assert!(
                text.contains("`mhlo.topk` (1), which IREE does not read, is its CHLO equivalent `chlo.top_k`"),
                "{text}"
            );
        }
    }
}

#[test]
fn iree_failing_to_compile_a_fixture_minifies_to_two_instructions_without_a_script() {
    // IREE 3.13 cannot compile misc.hlo, which XLA runs ("LLVM Translation failed for
    // operation: builtin.unrealized_conversion_cast"): a bug of IREE's, not an injected one.
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("misc");
    let o = graphbug(
        &[
            "minify",
            &hlo("misc.hlo"),
            "--backend",
            "iree:llvm-cpu",
            "--check",
            "compile",
            "--out",
            &s(&out),
            "-j",
            "2",
        ],
        &[],
        tmp.path(),
    );
    let text = said(&o);
    assert!(o.status.success(), "{text}");
    assert!(
        text.contains(
            "`mhlo.erf` (1), which IREE does not read, is its CHLO equivalent `chlo.erf`"
        ),
        "{text}"
    );
    let n: usize = text
        .split("minified 63 nodes to ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no result: {text}"));
    assert!((1..=2).contains(&n), "{n} instructions left: {text}");
    assert!(
        text.contains("builtin.unrealized_conversion_cast"),
        "{text}"
    );
    let program = std::fs::read_to_string(out.join("minified/program.mlir")).unwrap();
    assert!(!program.contains("mhlo.erf"), "{program}");
    // Only the locations of what is left.
    assert!(program.matches("= loc(").count() <= n + 1, "{program}");
}

#[test]
fn a_fault_on_iree_is_found_against_xla_and_its_repro_runs_with_iree_and_jax() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("repro");
    let backend = "fault:accuracy@stablehlo.dot_general#1+iree:llvm-cpu";
    let o = graphbug(
        &[
            "repro",
            &hlo("train_step.hlo"),
            "--backend",
            backend,
            "--out",
            &s(&out),
        ],
        &[],
        tmp.path(),
    );
    let text = said(&o);
    assert!(o.status.success(), "{text}");
    assert!(text.contains("detected: accuracy wrong result"), "{text}");
    assert!(text.contains("to 1 in"), "{text}");
    let manifest = std::fs::read_to_string(out.join("manifest.json")).unwrap();
    assert!(manifest.contains("\"iree_version\""), "{manifest}");
    // IREE and JAX alone: the faulted instruction differs on IREE from XLA CPU, and the
    // clean program agrees with it.
    let repro = |dir: &Path, extra: &[&str]| {
        let mut cmd = std::process::Command::new(python());
        cmd.arg(dir.join("repro.py")).args(extra);
        common::output_within(cmd, Duration::from_secs(600))
    };
    let minified = repro(&out.join("minified"), &[]);
    let shown = said(&minified);
    assert_eq!(minified.status.code(), Some(1), "{shown}");
    assert!(
        shown.contains("running on IREE's `llvm-cpu` target backend"),
        "{shown}"
    );
    assert!(shown.contains("DIFFERS"), "{shown}");
    let clean = repro(&out, &["--clean"]);
    let shown = said(&clean);
    assert_eq!(clean.status.code(), Some(0), "{shown}");
    assert!(shown.contains("ok: every output matches"), "{shown}");
}

/// A stand-in for IREE's compiler that lists IREE's targets and then does `then` (a shell
/// command) instead of compiling; its path contains `marker`.
fn fake_compiler(dir: &Path, marker: &str, then: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join(format!("{marker}-iree-compile"));
    std::fs::write(
        &path,
        format!(
            "#!/bin/sh\ncase \"$1\" in --iree-hal-list-target-backends) printf 'Registered target backends:\\n  llvm-cpu\\n'; exit 0;; --version) echo 'IREE compiler version fake'; exit 0;; esac\n{then}\n"
        ),
    )
    .unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

#[test]
fn a_compiler_that_crashes_or_hangs_is_a_verdict_and_dies_with_graphbug() {
    let tmp = tempfile::tempdir().unwrap();
    let program = root().join("tests/fixtures/xla/stablehlo/mlp.mlir");
    let program = if program.is_file() {
        s(&program)
    } else {
        hlo("transformer.hlo")
    };
    // A crash (SIGSEGV) of the compiler: a compile crash of the backend, graphbug goes on.
    let crash = fake_compiler(tmp.path(), "graphbug-crash", "kill -SEGV $$");
    let o = graphbug(
        &["run", &program, "--backend", "iree:llvm-cpu"],
        &[("GRAPHBUG_IREE_COMPILE", &s(&crash))],
        tmp.path(),
    );
    let text = said(&o);
    assert_eq!(o.status.code(), Some(1), "{text}");
    assert!(
        text.contains("iree-compile crashed") && text.contains("SIGSEGV"),
        "{text}"
    );

    // A hang, bounded by --timeout: the run is a timeout, and the compiler is gone after it.
    let marker = format!("graphbug-hang-{}", std::process::id());
    let hang = fake_compiler(tmp.path(), &marker, "exec tail -f \"$0\"");
    let o = graphbug(
        &[
            "run",
            &program,
            "--backend",
            "iree:llvm-cpu",
            "--timeout",
            "5",
        ],
        &[("GRAPHBUG_IREE_COMPILE", &s(&hang))],
        tmp.path(),
    );
    let text = said(&o);
    assert_eq!(o.status.code(), Some(1), "{text}");
    assert!(
        text.contains("timeout") || text.contains("did not finish"),
        "{text}"
    );
    assert!(
        common::survivors(&marker).is_empty(),
        "{:?}",
        common::survivors(&marker)
    );

    // graphbug killed (-9) while the compiler hangs: the compiler dies with it.
    let mut child = command(
        &["run", &program, "--backend", "iree:llvm-cpu"],
        &[("GRAPHBUG_IREE_COMPILE", &s(&hang))],
        tmp.path(),
    )
    .stdout(std::process::Stdio::null())
    .stderr(std::process::Stdio::null())
    .spawn()
    .unwrap();
    let deadline = Instant::now() + Duration::from_secs(120);
    while common::processes_mentioning(&format!("{marker}-iree-compile")).is_empty() {
        assert!(Instant::now() < deadline, "the compiler never started");
        std::thread::sleep(Duration::from_millis(50));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(
        common::survivors(&marker).is_empty(),
        "{:?}",
        common::survivors(&marker)
    );
}

#[test]
fn bad_targets_missing_tools_and_unreadable_ops_are_named() {
    let tmp = tempfile::tempdir().unwrap();
    let o = graphbug(
        &[
            "run",
            &hlo("argmax.hlo"),
            "--backend",
            "iree:no-such-target",
        ],
        &[],
        tmp.path(),
    );
    let text = said(&o);
    assert_eq!(o.status.code(), Some(1), "{text}");
    assert!(
        !text.contains("converted"),
        "named before any conversion: {text}"
    );
    assert!(
        text.contains("error: `iree:no-such-target`: IREE's compiler")
            && text.contains("no target backend `no-such-target`")
            && text.contains("iree:llvm-cpu"),
        "{text}"
    );
    let o = graphbug(
        &["run", &hlo("argmax.hlo"), "--backend", "iree:llvm-cpu"],
        &[("GRAPHBUG_IREE_COMPILE", "/no/such/iree-compile")],
        tmp.path(),
    );
    let text = said(&o);
    assert_eq!(o.status.code(), Some(1), "{text}");
    assert!(
        text.contains("error: GRAPHBUG_IREE_COMPILE=/no/such/iree-compile: no such file"),
        "{text}"
    );
    // A custom call IREE has no equivalent of (LAPACK's Cholesky): IREE refuses it, and says
    // which.
    let o = graphbug(
        &["run", &hlo("custom_call.hlo"), "--backend", "iree:llvm-cpu"],
        &[],
        tmp.path(),
    );
    let text = said(&o);
    assert_eq!(o.status.code(), Some(1), "{text}");
    assert!(
        text.contains("compile error in backend `iree:llvm-cpu`")
            && text.contains("lapack_spotrf_ffi"),
        "{text}"
    );
}

#[test]
fn differential_testing_over_a_corpus_classifies_and_minifies_each_disagreement() {
    let tmp = tempfile::tempdir().unwrap();
    let corpus = tmp.path().join("corpus");
    std::fs::create_dir_all(&corpus).unwrap();
    let fixtures = root().join("tests/fixtures/xla");
    for (from, to) in [
        ("hlo/argmax.hlo", "argmax.hlo"),
        ("hlo/argmax.io.npz", "argmax.io.npz"),
        ("stablehlo/mlp.mlir", "mlp.mlir"),
        ("stablehlo/mlp.io.npz", "mlp.io.npz"),
    ] {
        std::fs::copy(fixtures.join(from), corpus.join(to)).unwrap();
    }
    // Out-of-range float-to-int conversion: XLA saturates, IREE does not (StableHLO leaves
    // it to the implementation).
    std::fs::write(
        corpus.join("f2i.mlir"),
        "module @f2i {\n  func.func public @main(%arg0: tensor<4xf32>) -> tensor<4xi32> {\n    %0 = stablehlo.convert %arg0 : (tensor<4xf32>) -> tensor<4xi32>\n    return %0 : tensor<4xi32>\n  }\n}\n",
    )
    .unwrap();
    let values: Vec<u8> = [1.5f32, 3e9, -3e9, 7.0]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    let arg =
        graphbug::files::HostTensor::new(graphbug::ir::Dtype::Float32, vec![4], values).unwrap();
    graphbug::files::write(&corpus.join("f2i.inputs.safetensors"), &[("arg0", arg)]).unwrap();
    // A NaN where XLA's value is finite, at the MLP's first dot (the only module with one).
    let out = tmp.path().join("diff");
    let o = graphbug(
        &[
            "repro",
            &s(&corpus),
            "--backend",
            "fault:nan@stablehlo.dot_general#1+iree:llvm-cpu",
            "--strict-accuracy",
            "--out",
            &s(&out),
        ],
        &[],
        tmp.path(),
    );
    let text = said(&o);
    assert!(o.status.success(), "{text}");
    assert!(
        text.contains("a corpus of XLA programs (3 modules)"),
        "{text}"
    );
    assert!(
        text.contains("summary: 3 modules on `fault:nan@stablehlo.dot_general#1+iree:llvm-cpu` at level 4: 1 pass, 2 fail"),
        "{text}"
    );
    assert!(
        text.contains("failures by class: NaN or infinity where the reference is finite 1, implementation-defined behaviour 1"),
        "{text}"
    );
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    assert_eq!(
        summary["classes"],
        serde_json::json!({"non_finite": 1, "implementation_defined": 1})
    );
    for module in summary["modules"].as_array().unwrap() {
        if module["result"] == "fails" {
            assert_eq!(module["minified"]["end"], 1, "{module}");
        }
    }
    assert!(out.join("f2i.mlir/minified/program.mlir").is_file());
}
