//! `graphbug fmt|check|run` of XLA programs through the binary, on XLA's CPU plugin (the
//! `xla-cpu-pjrt` wheel `cargo xtask setup` installs): JAX's outputs matched from HLO text
//! in both styles, HLO protos and StableHLO; wrong references, faults of every kind and
//! bad input failing with the culprit named. These tests build and pass without libtorch
//! (`cargo test -p graphbug --no-default-features --test xla`), where they also check that
//! the binary links no libtorch.

mod common;

use common::Run;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use graphbug::files::{read, write, HostTensor};
use graphbug::ir::Dtype;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn hlo(name: &str) -> PathBuf {
    root().join("tests/fixtures/xla/hlo").join(name)
}

fn stablehlo(name: &str) -> PathBuf {
    root().join("tests/fixtures/xla/stablehlo").join(name)
}

/// Runs the binary; the CPU plugin must be there (`cargo xtask setup`).
fn graphbug(args: &[&str], env: &[(&str, &str)]) -> Output {
    let plugin =
        root().join(".venv/lib/python3.11/site-packages/xla_plugins/xla_cpu_pjrt/xla_cpu_pjrt.so");
    assert!(
        plugin.is_file(),
        "XLA's CPU plugin is not in .venv: run `cargo xtask setup` ({} is missing)",
        plugin.display()
    );
    let mut cmd = common::graphbug();
    cmd.args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.run()
}

fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// A fixture's `io.npz` split into inputs (`arg<k>`) and JAX's outputs (`out<k>`), written
/// to `dir`.
fn split_io(io: &Path, dir: &Path) -> (PathBuf, PathBuf) {
    let (args, outs) = xtask::bundle::split_io(io).unwrap();
    let stem = io
        .file_name()
        .unwrap()
        .to_string_lossy()
        .replace(".io.npz", "");
    let (inputs, outputs) = (
        dir.join(format!("{stem}.in.npz")),
        dir.join(format!("{stem}.out.npz")),
    );
    write(&inputs, &args).unwrap();
    write(&outputs, &outs).unwrap();
    (inputs, outputs)
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn programs_in_every_form_run_on_the_cpu_plugin_and_match_jax() {
    let dir = tempfile::tempdir().unwrap();
    let mut cases = Vec::new();
    for name in [
        "transformer",
        "convnet",
        "scan",
        "train_step",
        "conv_train",
        "gather_scatter_sort",
        "cond",
        "cumsum",
        "argmax",
    ] {
        let (inputs, outputs) = split_io(&hlo(&format!("{name}.io.npz")), dir.path());
        for form in [".hlo", ".old.hlo", ".pb"] {
            cases.push((
                hlo(&format!("{name}{form}")),
                inputs.clone(),
                outputs.clone(),
            ));
        }
    }
    for name in ["mlp", "specials", "train"] {
        let (inputs, outputs) = split_io(&stablehlo(&format!("{name}.io.npz")), dir.path());
        cases.push((stablehlo(&format!("{name}.mlir")), inputs, outputs));
    }
    for (program, inputs, outputs) in &cases {
        let o = graphbug(
            &[
                "run",
                s(program),
                "--inputs",
                s(inputs),
                "--compare",
                s(outputs),
            ],
            &[],
        );
        let (out, err) = text(&o);
        assert!(o.status.success(), "{}:\n{out}\n{err}", program.display());
        assert!(
            out.contains("outputs match"),
            "{}: {out}",
            program.display()
        );
        // The float64 reference ran (no note that it could not).
        assert!(
            !err.contains("float64 reference run failed"),
            "{}: {err}",
            program.display()
        );
    }
}

#[test]
fn a_wrong_reference_fails_whatever_it_is() {
    let dir = tempfile::tempdir().unwrap();
    let (inputs, outputs) = split_io(&hlo("transformer.io.npz"), dir.path());
    let (_, jax) = read(&outputs).unwrap().remove(0);
    let n = jax.numel();
    for (what, value) in [("all 1e6", 1e6f32), ("zeros", 0.0), ("NaN", f32::NAN)] {
        let data: Vec<u8> = std::iter::repeat_n(value.to_le_bytes(), n)
            .flatten()
            .collect();
        let wrong = HostTensor::new(Dtype::Float32, jax.shape.clone(), data).unwrap();
        let file = dir.path().join("wrong.npz");
        write(&file, &[("out0", wrong)]).unwrap();
        let o = graphbug(
            &[
                "run",
                s(&hlo("transformer.hlo")),
                "--inputs",
                s(&inputs),
                "--compare",
                s(&file),
            ],
            &[],
        );
        let (out, err) = text(&o);
        assert_eq!(o.status.code(), Some(1), "{what}: {out}\n{err}");
        assert!(
            out.contains("FAIL") && err.contains("outputs do not match"),
            "{what}: {out}\n{err}"
        );
    }
}

#[test]
fn faults_of_every_kind_fire_in_the_plugin_or_its_run() {
    let dir = tempfile::tempdir().unwrap();
    let (inputs, outputs) = split_io(&hlo("transformer.io.npz"), dir.path());
    let program = hlo("transformer.hlo");
    let run = |backend: &str, env: &[(&str, &str)]| {
        let o = graphbug(
            &[
                "run",
                s(&program),
                "--backend",
                backend,
                "--inputs",
                s(&inputs),
                "--compare",
                s(&outputs),
                "--timeout",
                "20",
            ],
            env,
        );
        let (out, err) = text(&o);
        (o.status.code(), format!("{out}{err}"))
    };
    for (backend, want) in [
        ("fault:accuracy@dot", "outputs do not match"),
        ("fault:nan@dot#2+pjrt:cpu", "non-finite values differ"),
        // The compiler itself fails: the custom call is its error.
        (
            "fault:compile@add",
            "compile error in backend `fault:compile@add+pjrt:cpu`",
        ),
        ("fault:compile@add", "graphbug_injected_compile_fault"),
        (
            "fault:runtime@node:add.8",
            "runtime error in backend `fault:runtime@node:add.8+pjrt:cpu` at node `add.8`",
        ),
        (
            "fault:crash@add",
            "runtime crash in backend `fault:crash@add+pjrt:cpu`",
        ),
    ] {
        let (code, all) = run(backend, &[]);
        assert_eq!(code, Some(1), "{backend}: {all}");
        assert!(all.contains(want), "{backend}: {all}");
    }
    // The environment's fault applies to the plain plugin.
    let (code, all) = run(
        "pjrt:cpu",
        &[("GRAPHBUG_INJECT_FAULT", "accuracy=0.5@node:dot_general.8")],
    );
    assert_eq!(code, Some(1), "{all}");
    assert!(all.contains("outputs do not match"), "{all}");
    // Specs that cannot be: named with the grammar or what the program has.
    for (backend, want) in [
        ("fault:alias@add", "XLA programs have no schemas to break"),
        (
            "fault:runtime@nosuch",
            "names no node: no node of the graph calls `nosuch`",
        ),
        ("fault:runtime@add#99", "so #99 is out of range"),
        ("eager", "`eager` is not a backend for XLA programs"),
        ("pjrt:nosuch", "no PJRT plugin named `nosuch`"),
    ] {
        let (code, all) = run(backend, &[]);
        assert_eq!(code, Some(1), "{backend}: {all}");
        assert!(all.contains(want), "{backend}: {all}");
    }
}

#[test]
fn a_hang_in_the_compiled_code_is_a_timeout() {
    // The loop the hang fault writes runs inside XLA's executable; the supervisor ends it.
    let started = std::time::Instant::now();
    let o = graphbug(
        &[
            "run",
            s(&stablehlo("train.mlir")),
            "--backend",
            "fault:hang@exponential",
            "--timeout",
            "3",
        ],
        &[],
    );
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(1), "{out}{err}");
    assert!(
        err.contains("runtime timeout in backend `fault:hang@exponential+pjrt:cpu`"),
        "{err}"
    );
    assert!(started.elapsed().as_secs() < 60);
}

#[test]
fn random_inputs_follow_the_seed_and_outputs_save() {
    let dir = tempfile::tempdir().unwrap();
    let save = |seed: &str, file: &str| {
        let path = dir.path().join(file);
        let o = graphbug(
            &[
                "run",
                s(&hlo("convnet.hlo")),
                "--seed",
                seed,
                "--save-outputs",
                s(&path),
            ],
            &[],
        );
        assert!(o.status.success(), "{:?}", text(&o));
        std::fs::read(path).unwrap()
    };
    let a = save("1", "a.npz");
    assert_eq!(
        a,
        save("1", "c.npz"),
        "the same seed gives the same outputs"
    );
    assert_ne!(a, save("2", "d.npz"), "another seed, other outputs");
    save("1", "b.safetensors");
    let npz = read(&dir.path().join("a.npz")).unwrap();
    assert_eq!(npz, read(&dir.path().join("b.safetensors")).unwrap());
    assert_eq!(npz[0].0, "out0");
}

#[test]
fn bad_inputs_name_the_culprit() {
    let dir = tempfile::tempdir().unwrap();
    let (inputs, _) = split_io(&hlo("cond.io.npz"), dir.path());
    let mut given = read(&inputs).unwrap();
    let program = hlo("cond.hlo");
    let try_inputs = |tensors: &[(String, HostTensor)], want: &str| {
        let file = dir.path().join("bad.npz");
        write(&file, tensors).unwrap();
        let o = graphbug(&["run", s(&program), "--inputs", s(&file)], &[]);
        let (out, err) = text(&o);
        assert_eq!(o.status.code(), Some(1), "{want}: {out}{err}");
        assert!(err.contains(want), "{want}: {err}");
    };
    // A missing parameter, a wrong dtype, an extra key, one parameter twice.
    try_inputs(&given[..1], "no input for parameter 1");
    let f32_scalar = HostTensor::new(Dtype::Float32, vec![], vec![0; 4]).unwrap();
    try_inputs(
        &[("arg0".into(), f32_scalar), given[1].clone()],
        "input for parameter 0",
    );
    given.push(("extra".into(), given[0].1.clone()));
    try_inputs(&given, "`extra` is no parameter of the program");
    // Options of aten graphs, refused by every command on an XLA program, and the other
    // way round: each option is declared for its dialect where it is defined (its help
    // heading), and named when given to the other.
    let o = graphbug(&["run", s(&program), "--backward", "--device", "cuda"], &[]);
    let (_, err) = text(&o);
    assert!(
        err.contains("these options are for aten graphs: --device") && err.contains("--backward"),
        "{err}"
    );
    let mlp = root().join("tests/fixtures/mlp/forward.py");
    for (args, refused) in [
        (
            vec!["minify", s(&program), "--check", "runtime", "--backend", "pjrt:cpu", "--offload-to-disk"],
            "is an XLA program; these options are for aten graphs: --offload-to-disk (`graphbug minify --help`",
        ),
        (
            vec!["repro", s(&program), "--backend", "pjrt:cpu", "--after", "aot", "--random-inputs"],
            "is an XLA program; these options are for aten graphs: --after, --random-inputs (`graphbug repro --help`",
        ),
        (
            vec!["run", s(&mlp), "--reference-backend", "pjrt:cpu"],
            "forward.py is an aten graph; these options are for XLA programs: --reference-backend (`graphbug run --help`",
        ),
        (
            vec!["minify", s(&mlp), "--check", "runtime", "--backend", "eager", "--reference-backend", "pjrt:cpu"],
            "forward.py is an aten graph; these options are for XLA programs: --reference-backend",
        ),
    ] {
        let o = graphbug(&args, &[]);
        let (_, err) = text(&o);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {err}");
        assert!(err.contains(refused), "{args:?}: {err}");
    }
    let o = graphbug(
        &["run", s(&program), "--compare", "/nonexistent/out.npz"],
        &[],
    );
    assert_eq!(o.status.code(), Some(1));
    assert!(
        text(&o).1.contains("/nonexistent/out.npz"),
        "{:?}",
        text(&o)
    );
}

#[test]
fn bad_programs_name_the_line_and_instruction() {
    let dir = tempfile::tempdir().unwrap();
    let good = std::fs::read_to_string(hlo("cond.hlo")).unwrap();
    let cut = good.len() * 2 / 3;
    let cases = [
        ("truncated", good[..cut].to_string(), "error:"),
        (
            "unknown opcode",
            "HloModule m\n\nENTRY e {\n  x = f32[2] parameter(0)\n  ROOT y = f32[2] frobnicate(x)\n}\n".to_string(),
            "5:",
        ),
        (
            "operand before definition",
            "HloModule m\n\nENTRY e {\n  x = f32[2] parameter(0)\n  y = f32[2] add(x, z)\n  ROOT z = f32[2] negate(x)\n}\n".to_string(),
            "`y`",
        ),
        (
            "shape mismatch",
            "HloModule m, entry_computation_layout={(f32[2]{0})->f32[3]{0}}\n\nENTRY e {\n  x = f32[2] parameter(0)\n  ROOT y = f32[2] negate(x)\n}\n".to_string(),
            "f32[3]",
        ),
    ];
    for (what, program, want) in cases {
        let file = dir.path().join("bad.hlo");
        std::fs::write(&file, &program).unwrap();
        for cmd in ["check", "run"] {
            let o = graphbug(&[cmd, s(&file)], &[]);
            let (out, err) = text(&o);
            assert_eq!(o.status.code(), Some(1), "{what} ({cmd}): {out}{err}");
            assert!(
                err.contains("bad.hlo") && err.contains(want),
                "{what} ({cmd}): {err}"
            );
        }
    }
}

#[test]
fn bad_plugins_are_named_and_an_aborting_one_is_a_crash() {
    let dir = tempfile::tempdir().unwrap();
    let program = hlo("cond.hlo");
    let run = |backend: &str| {
        let o = graphbug(
            &["run", s(&program), "--backend", backend, "--timeout", "20"],
            &[],
        );
        let (out, err) = text(&o);
        (o.status.code(), format!("{out}{err}"))
    };
    // Not a shared library; a library without GetPjrtApi.
    let junk = dir.path().join("junk.so");
    std::fs::write(&junk, "not a library").unwrap();
    let (code, all) = run(&format!("pjrt:{}", junk.display()));
    assert_eq!(code, Some(1), "{all}");
    assert!(
        all.contains("junk.so: cannot load as a shared library"),
        "{all}"
    );
    let libm = [
        "/lib/x86_64-linux-gnu/libm.so.6",
        "/usr/lib/x86_64-linux-gnu/libm.so.6",
        "/lib64/libm.so.6",
    ]
    .into_iter()
    .find(|p| Path::new(p).is_file());
    if let Some(libm) = libm {
        let (code, all) = run(&format!("pjrt:{libm}"));
        assert_eq!(code, Some(1), "{all}");
        assert!(
            all.contains("not a PJRT plugin: no GetPjrtApi symbol"),
            "{all}"
        );
    }
    // A plugin that aborts when asked for its API: the run is a classified crash.
    let source = dir.path().join("abort.c");
    std::fs::write(
        &source,
        "#include <stdlib.h>\nvoid *GetPjrtApi(void) { abort(); }\n",
    )
    .unwrap();
    let plugin = dir.path().join("abort_plugin.so");
    let cc = Command::new("cc")
        .args(["-shared", "-fPIC", "-o", s(&plugin), s(&source)])
        .status()
        .expect("a C compiler (cc) builds the aborting plugin");
    assert!(cc.success());
    let (code, all) = run(&format!("pjrt:{}", plugin.display()));
    assert_eq!(code, Some(1), "{all}");
    assert!(
        all.contains("compile crash in backend `pjrt:") && all.contains("SIGABRT"),
        "{all}"
    );
}

#[test]
fn backends_lists_the_cpu_plugin() {
    let o = graphbug(&["backends"], &[]);
    let (out, _) = text(&o);
    assert!(o.status.success());
    assert!(
        out.contains("pjrt:cpu") && out.contains("PJRT API 0."),
        "{out}"
    );
}

#[test]
fn fmt_and_check_read_every_form() {
    let o = graphbug(&["fmt", s(&hlo("transformer.old.hlo"))], &[]);
    assert_eq!(o.stdout, std::fs::read(hlo("transformer.old.hlo")).unwrap());
    let o = graphbug(&["fmt", s(&hlo("transformer.pb"))], &[]);
    assert_eq!(o.stdout, std::fs::read(hlo("transformer.pb.hlo")).unwrap());
    let o = graphbug(&["check", s(&stablehlo("mlp.mlir"))], &[]);
    assert_eq!(text(&o).0, "29 statements, 2 parameters, 2 outputs\n");
    // A proto under any name (torch_xla's proto bytes saved as the user likes) is one.
    let dir = tempfile::tempdir().unwrap();
    let renamed = dir.path().join("transformer.bytes");
    std::fs::copy(hlo("transformer.pb"), &renamed).unwrap();
    let o = graphbug(&["fmt", s(&renamed)], &[]);
    assert_eq!(o.stdout, std::fs::read(hlo("transformer.pb.hlo")).unwrap());
    // Bytes that are no program are not taken for one.
    let junk = dir.path().join("junk.bin");
    std::fs::write(&junk, [0xff, 0xfe, 0x00, 0x13, 0x37]).unwrap();
    let o = graphbug(&["check", s(&junk)], &[]);
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o).1.contains("junk.bin"), "{:?}", text(&o));
}

#[test]
fn generic_mlir_and_bare_functions_are_read_through_mlir() {
    // The generic form (MLIR's print_generic_op_form, every op quoted, the module too)
    // and a bare func.func, made by JAX's MLIR from a fixture.
    let dir = tempfile::tempdir().unwrap();
    let (generic, bare) = (
        dir.path().join("generic.mlir"),
        dir.path().join("bare.mlir"),
    );
    let python = root().join(".venv/bin/python");
    let script = r#"
import sys
from jax._src.interpreters import mlir
from jax._src.lib.mlir import ir
with mlir.make_ir_context():
    m = ir.Module.parse(open(sys.argv[1]).read())
    generic = m.operation.get_asm(print_generic_op_form=True, enable_debug_info=True)
    open(sys.argv[2], "w").write(generic)
    open(sys.argv[3], "w").write("\n".join(str(op) for op in m.body.operations))
"#;
    let made = Command::new(&python)
        .args(["-c", script])
        .args([stablehlo("train.mlir"), generic.clone(), bare.clone()])
        .output()
        .expect("the venv's python runs");
    assert!(
        made.status.success(),
        "{}",
        String::from_utf8_lossy(&made.stderr)
    );
    assert!(std::fs::read_to_string(&generic)
        .unwrap()
        .contains("\"builtin.module\"()"));
    let py = [("GRAPHBUG_PYTHON", python.to_str().unwrap())];
    let dir_io = tempfile::tempdir().unwrap();
    let (inputs, outputs) = split_io(&stablehlo("train.io.npz"), dir_io.path());
    for file in [&generic, &bare] {
        let o = graphbug(&["check", s(file)], &py);
        assert_eq!(
            text(&o).0,
            "44 statements, 2 parameters, 2 outputs\n",
            "{:?}",
            text(&o)
        );
        // fmt prints the pretty form, which graphbug reads itself.
        let o = graphbug(&["fmt", s(file)], &py);
        let pretty = String::from_utf8(o.stdout).unwrap();
        assert!(pretty.contains("stablehlo.dot_general %"), "{pretty}");
        let o = graphbug(
            &[
                "run",
                s(file),
                "--inputs",
                s(&inputs),
                "--compare",
                s(&outputs),
            ],
            &py,
        );
        assert!(o.status.success(), "{:?}", text(&o));
    }
    // Without a Python that has JAX, the error says what to do.
    let o = graphbug(
        &["check", s(&generic)],
        &[("GRAPHBUG_PYTHON", "/nonexistent/python")],
    );
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        err.contains("generic.mlir") && err.contains("GRAPHBUG_PYTHON"),
        "{err}"
    );
}

#[test]
fn this_build_has_libtorch_only_with_the_torch_feature() {
    let ldd = Command::new("ldd")
        .arg(env!("CARGO_BIN_EXE_graphbug"))
        .output()
        .expect("ldd runs");
    let libs = String::from_utf8_lossy(&ldd.stdout);
    assert_eq!(
        libs.contains("libtorch"),
        cfg!(feature = "torch"),
        "the torch feature is {}, and the binary links:\n{libs}",
        cfg!(feature = "torch")
    );
    if !cfg!(feature = "torch") {
        let o = graphbug(
            &["run", s(&root().join("tests/fixtures/mlp/forward.py"))],
            &[],
        );
        let (_, err) = text(&o);
        assert!(err.contains("built without libtorch"), "{err}");
    }
}

// The bundle packs the libtorch-free binary (a libtorch build finds libtorch through a
// RUNPATH the copy loses): this test is built without libtorch, as `cargo xtask test` does.
#[cfg(not(feature = "torch"))]
#[test]
fn the_gpu_bundle_runs_every_fixture_and_catches_a_fault() {
    // `cargo xtask gpu-bundle` with this binary, run as on a GPU machine with the CPU
    // plugin standing in for CUDA.
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("bundle");
    xtask::bundle::make_bundle(root(), Path::new(env!("CARGO_BIN_EXE_graphbug")), &out)
        .expect("the bundle is made");
    let fixtures = xtask::bundle::fixtures(root()).unwrap();
    let left_out = std::fs::read_to_string(out.join("LEFT_OUT.txt")).unwrap_or_default();
    assert_eq!(
        left_out.lines().count(),
        1,
        "only custom_call's LAPACK call: {left_out}"
    );
    let run = Command::new(out.join("run.sh"))
        .env("PLUGIN", "cpu")
        .output()
        .expect("run.sh runs");
    let (stdout, stderr) = text(&run);
    assert!(run.status.success(), "{stdout}{stderr}");
    let want = format!(
        "{0}/{0} fixtures match pjrt:cpu on pjrt:cpu; injected fault: caught",
        fixtures.len() - 1
    );
    assert!(stdout.contains(&want), "{stdout}");
    // A recorded output changed: run.sh must say so and fail.
    let cpu = out.join("fixtures/hlo-convnet.cpu.npz");
    let mut outputs = read(&cpu).unwrap();
    let t = &outputs[0].1;
    let bumped = HostTensor::new(t.dtype, t.shape.clone(), vec![0x7f; t.data.len()]).unwrap();
    outputs[0].1 = bumped;
    write(&cpu, &outputs).unwrap();
    let run = Command::new(out.join("run.sh"))
        .env("PLUGIN", "cpu")
        .output()
        .unwrap();
    let (stdout, _) = text(&run);
    assert!(!run.status.success(), "{stdout}");
    assert!(
        stdout
            .lines()
            .any(|l| l.starts_with("hlo-convnet") && l.contains("MISMATCH")),
        "{stdout}"
    );
}

/// A starter that cannot make graphbug die with it (Python's `subprocess` with threads
/// running) names itself in GRAPHBUG_DIE_WITH: killed by kill -9 while graphbug runs a
/// hanging program, it takes graphbug and graphbug's worker with it. A graphbug whose
/// starter is not its parent, or a variable that names no process, is an error naming it.
#[test]
fn graphbug_dies_with_the_starter_it_is_told_of() {
    let program = stablehlo("train.mlir");
    let mut starter = Command::new("sh")
        .arg("-c")
        .arg("GRAPHBUG_DIE_WITH=$$ \"$0\" run \"$1\" --backend fault:hang@exponential --timeout 900 & wait")
        .arg(env!("CARGO_BIN_EXE_graphbug"))
        .arg(&program)
        .spawn()
        .unwrap();
    // graphbug (the starter's child), once its worker runs the program.
    let deadline = std::time::Instant::now() + common::LIMIT;
    let (started, workers) = loop {
        if let Some(&pid) = common::children_of(starter.id()).first() {
            let workers = common::children_of(pid);
            if !workers.is_empty() {
                break (pid, workers);
            }
        }
        assert!(
            std::time::Instant::now() < deadline,
            "graphbug's worker never started"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    starter.kill().unwrap(); // SIGKILL
    starter.wait().unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !(common::ended(started) && workers.iter().all(|&w| common::ended(w))) {
        assert!(
            std::time::Instant::now() < deadline,
            "graphbug ({started}) or its workers ({workers:?}) outlived their starter"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    // Not the parent (the test is), and not a process id.
    let fmt = program.display().to_string();
    let o = graphbug(&["fmt", &fmt], &[("GRAPHBUG_DIE_WITH", "1")]);
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("GRAPHBUG_DIE_WITH=1 names the process that started graphbug"),
        "{err}"
    );
    let o = graphbug(&["fmt", &fmt], &[("GRAPHBUG_DIE_WITH", "me")]);
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("is not a process id"), "{err}");
}

/// A program over replicas (`replica_count`): every replica takes the same inputs and
/// returns the whole output; an all-reduce over them sums each replica's copy, and a
/// program whose replicas return different values (`replica-id`) is a wrong result that
/// names the devices.
#[test]
fn replicas_take_the_same_inputs_and_their_outputs_must_agree() {
    let dir = tempfile::tempdir().unwrap();
    let program = |name: &str, text: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        path
    };
    let sum = program(
        "sum.hlo",
        "HloModule replicas, replica_count=2\n\nsum {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT s = f32[] add(a, b)\n}\n\nENTRY e {\n  x = f32[3] parameter(0)\n  ROOT total = f32[3] all-reduce(x), replica_groups={{0,1}}, to_apply=sum\n}\n",
    );
    let f32s = |v: [f32; 3]| {
        let data = v.iter().flat_map(|x| x.to_le_bytes()).collect();
        HostTensor::new(Dtype::Float32, vec![3], data).unwrap()
    };
    let (inputs, expected) = (dir.path().join("in.npz"), dir.path().join("out.npz"));
    write(&inputs, &[("arg0".to_string(), f32s([1.0, -2.0, 0.5]))]).unwrap();
    write(&expected, &[("out0".to_string(), f32s([2.0, -4.0, 1.0]))]).unwrap();
    let o = graphbug(
        &[
            "run",
            s(&sum),
            "--inputs",
            s(&inputs),
            "--compare",
            s(&expected),
        ],
        &[],
    );
    let (out, err) = text(&o);
    assert!(o.status.success(), "{out}\n{err}");
    assert!(
        err.contains("runs on 2 devices (2 replicas x 1 partition)"),
        "{err}"
    );
    let ids = program(
        "ids.hlo",
        "HloModule replica_ids, replica_count=2\n\nENTRY e {\n  x = f32[3] parameter(0)\n  id = u32[] replica-id()\n  f = f32[] convert(id)\n  b = f32[3] broadcast(f), dimensions={}\n  ROOT y = f32[3] add(x, b)\n}\n",
    );
    let o = graphbug(&["run", s(&ids), "--inputs", s(&inputs)], &[]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(1), "{out}\n{err}");
    assert!(
        err.contains(
            "the devices disagree: output 0's copies on device 0 and device 1 differ in 3 elements"
        ) && err.contains("every replica takes the same inputs"),
        "{err}"
    );
}
