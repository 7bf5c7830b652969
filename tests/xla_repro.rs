//! `graphbug repro` of XLA programs through the binary, on XLA's CPU plugin: the RFC's own
//! example (a BART-like decoder layer whose logits go wrong under a fault pinned to one
//! instruction) minifies to that instruction, and its repro directory reproduces with
//! graphbug and with JAX alone (`repro.py`); a JAX capture (`graphbug_capture.jax.dump`)
//! is a repro directory graphbug runs and minifies; bad directories name the culprit.
//! These tests build and pass without libtorch
//! (`cargo test -p graphbug --no-default-features --test xla_repro`).

mod common;

#[path = "common/browser.rs"]
mod browser;

use common::{run_in_tmp as graphbug, said as text};
use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn bart(name: &str) -> String {
    s(&root().join("tests/fixtures/xla/bart").join(name))
}

fn s(p: &Path) -> String {
    p.to_str().unwrap().to_string()
}

fn python() -> PathBuf {
    root().join(".venv/bin/python")
}

/// Runs `dir`'s `repro.py` with `python`, from `cwd`, with `args`.
fn repro_py(python: &Path, dir: &Path, args: &[&str], cwd: &Path) -> std::process::Output {
    Command::new(python)
        .arg(dir.join("repro.py"))
        .args(args)
        .current_dir(cwd)
        .output()
        .unwrap()
}

/// The instruction the RFC example faults: a multiply in the decoder's feed-forward block.
const FAULTED: &str = "mul.68";

#[test]
fn the_rfc_bart_decoder_minifies_to_its_faulted_instruction_and_reproduces_in_jax() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("bart_repro");
    let backend = format!("fault:accuracy@node:{FAULTED}+pjrt:cpu");
    let o = graphbug(
        &[
            "repro",
            &bart("decoder.hlo"),
            "--inputs",
            &bart("inputs.safetensors"),
            "--backend",
            &backend,
            "--out",
            &s(&out),
            "-j",
            "2",
        ],
        tmp.path(),
    );
    let said = text(&o);
    assert!(o.status.success(), "{said}");
    assert!(said.contains("detected: accuracy wrong result"), "{said}");
    assert!(said.contains("minified 410 instructions to 1"), "{said}");
    // The directory: the program as given, the faulted program, inputs, reference outputs,
    // manifest, README, repro.py; the minified one holds the faulted instruction alone.
    for file in [
        "program.hlo",
        "program.faulted.hlo",
        "inputs.safetensors",
        "reference_outputs.safetensors",
        "manifest.json",
        "README.md",
        "repro.py",
    ] {
        assert!(out.join(file).is_file(), "{file}");
        assert!(out.join("minified").join(file).is_file(), "minified/{file}");
    }
    assert_eq!(
        std::fs::read(out.join("program.hlo")).unwrap(),
        std::fs::read(bart("decoder.hlo")).unwrap()
    );
    // Its operands are constants of their recorded values: it needs no inputs.
    let minified = std::fs::read_to_string(out.join("minified/program.hlo")).unwrap();
    let lines = |what: &str| minified.lines().filter(|l| l.contains(what)).count();
    assert_eq!(
        (lines(" parameter("), lines(" constant(")),
        (0, 2),
        "{minified}"
    );
    let instructions: Vec<&str> = minified
        .lines()
        .filter(|l| l.contains(" = ") && !l.contains(" constant(") && !l.starts_with("HloModule"))
        .collect();
    assert_eq!(instructions.len(), 1, "{minified}");
    assert!(
        instructions[0].contains(&format!("ROOT {FAULTED} = ")),
        "{minified}"
    );
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("manifest.json")).unwrap()).unwrap();
    assert_eq!(manifest["backend"], backend.as_str());
    assert_eq!(manifest["check"], "accuracy");
    assert_eq!(manifest["failure"]["culprits"][0], FAULTED);
    assert!(manifest["plugin"].as_str().unwrap().ends_with(".so"));
    assert!(manifest["pjrt_api"].as_str().unwrap().starts_with("0."));
    assert!(manifest["stablehlo_version"].is_string(), "{manifest}");

    // report.html in both directories, as a browser shows it: the failure, the original
    // with the culprit filled red, the minified program, the progress chart, the commands.
    let loaded = browser::load(&out.join("report.html"), tmp.path());
    assert!(loaded.errors.is_empty(), "{:?}", loaded.errors);
    assert!(loaded.load_ms.is_some(), "the page's script ran");
    for id in [
        "failure",
        "original",
        "minified",
        "progress",
        "divergence",
        "commands",
    ] {
        assert!(
            browser::element(&loaded.dom, id, 10).is_some(),
            "no #{id} section"
        );
    }
    let culprit = browser::element(&loaded.dom, &format!("program.hlo:{FAULTED}"), 600)
        .expect("the culprit is drawn in the original");
    assert!(culprit.contains("#ff6b6b"), "{culprit}");
    assert!(loaded
        .dom
        .contains(&format!("id=\"minified/program.hlo:{FAULTED}\"")));
    let chart = browser::element(&loaded.dom, "progress-chart", 100_000).unwrap();
    assert!(
        chart.matches("class=\"point\"").count() >= 2,
        "{chart:.2000}"
    );
    assert!(loaded
        .dom
        .contains(&format!("graphbug repro {}/minified run", s(&out))));
    let png = browser::screenshot(&out.join("report.html"), tmp.path(), (1200, 1600));
    assert!(
        std::fs::metadata(png).unwrap().len() > 30_000,
        "a blank screenshot"
    );
    let minified_report = browser::load(&out.join("minified/report.html"), tmp.path());
    assert!(minified_report.errors.is_empty());
    assert!(minified_report
        .dom
        .contains(&format!("program.hlo:{FAULTED}")));

    // graphbug reproduces both directories, and names the instruction.
    for dir in [out.clone(), out.join("minified")] {
        let o = graphbug(&["repro", &s(&dir), "run"], tmp.path());
        assert_eq!(o.status.code(), Some(1), "{}", text(&o));
        assert!(
            text(&o).contains("reproduced: accuracy wrong result"),
            "{}",
            text(&o)
        );
    }
    let o = graphbug(&["repro", &s(&out), "analyze"], tmp.path());
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        text(&o).contains(&format!("first diverging instruction: `{FAULTED}`")),
        "{}",
        text(&o)
    );
    // Without the fault, nothing reproduces.
    let o = graphbug(
        &["repro", &s(&out), "run", "--backend", "pjrt:cpu"],
        tmp.path(),
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));

    // JAX alone, on the same plugin against XLA CPU: the faulted program differs, the
    // clean one does not.
    for (dir, extra, code) in [
        (out.join("minified"), None, 1),
        (out.clone(), None, 1),
        (out.clone(), Some("--clean"), 0),
        (out.clone(), Some("--no-tf32"), 1),
    ] {
        let o = repro_py(&python(), &dir, extra.as_slice(), tmp.path());
        assert_eq!(
            o.status.code(),
            Some(code),
            "{} {extra:?}: {}",
            dir.display(),
            text(&o)
        );
        if code == 1 {
            assert!(text(&o).contains("DIFFERS"), "{}", text(&o));
        }
        if extra == Some("--no-tf32") {
            assert!(
                text(&o).contains("precision: full float32 on XLA's GPU plugin (XLA_FLAGS=--xla_gpu_enable_triton_gemm=false, NVIDIA_TF32_OVERRIDE=0)"),
                "{}",
                text(&o)
            );
        }
    }
}

#[test]
fn a_jax_capture_is_a_repro_directory() {
    let tmp = tempfile::tempdir().unwrap();
    let o = Command::new(python())
        .arg(root().join("tests/python/jax_dump_check.py"))
        .arg(tmp.path())
        .current_dir(tmp.path())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let captured = tmp.path().join("captured");
    // The capture runs as JAX ran it.
    let o = graphbug(&["repro", &s(&captured), "run"], tmp.path());
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    // It minifies for any failure of a backend (none is recorded), here a runtime fault
    // on its first multiply.
    let o = graphbug(
        &[
            "repro",
            &s(&captured),
            "minify",
            "--backend",
            "fault:runtime@multiply+pjrt:cpu",
        ],
        tmp.path(),
    );
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("to 1 in"), "{}", text(&o));
    let minified = std::fs::read_to_string(captured.join("minified/program.mlir")).unwrap();
    assert!(minified.contains("stablehlo.multiply"), "{minified}");
}

#[test]
fn bad_repro_directories_name_the_culprit() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("r");
    let o = graphbug(
        &[
            "repro",
            &s(&root().join("tests/fixtures/xla/hlo/transformer.hlo")),
            "--backend",
            "fault:runtime@node:dot_general.12+pjrt:cpu",
            "--level",
            "2",
            "--no-minify",
            "--out",
            &s(&out),
        ],
        tmp.path(),
    );
    assert!(o.status.success(), "{}", text(&o));
    let manifest = std::fs::read_to_string(out.join("manifest.json")).unwrap();
    assert!(manifest.contains("\"check\": \"runtime\""), "{manifest}");
    assert!(!out.join("minified").exists());
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["dance"], "unknown action `dance`"),
        (vec![], "say what to do with"),
        (
            vec!["run", "--check", "accuracy"],
            "--check says what `minify` looks for",
        ),
        (
            vec!["run", "--device", "cuda"],
            "these options are for aten graphs: --device",
        ),
        (
            vec!["run", "--backend", "eager"],
            "`eager` is not a backend for XLA programs",
        ),
    ];
    for (extra, says) in cases {
        let mut args = vec!["repro", out.to_str().unwrap()];
        args.extend(extra.iter().copied());
        let o = graphbug(&args, tmp.path());
        assert_ne!(o.status.code(), Some(0), "{args:?}");
        assert!(text(&o).contains(says), "{args:?}: {}", text(&o));
    }
    // A missing or mismatched file is named.
    std::fs::rename(out.join("inputs.safetensors"), tmp.path().join("moved")).unwrap();
    let o = graphbug(&["repro", out.to_str().unwrap(), "run"], tmp.path());
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o).contains("inputs.safetensors"), "{}", text(&o));
    std::fs::write(out.join("inputs.safetensors"), b"junk").unwrap();
    let o = graphbug(&["repro", out.to_str().unwrap(), "run"], tmp.path());
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o).contains("inputs.safetensors"), "{}", text(&o));
    // A program that passes is no repro.
    let o = graphbug(
        &[
            "repro",
            &s(&root().join("tests/fixtures/xla/hlo/transformer.hlo")),
            "--backend",
            "pjrt:cpu",
            "--out",
            &s(&tmp.path().join("none")),
        ],
        tmp.path(),
    );
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("no failure"), "{}", text(&o));
    assert!(!tmp.path().join("none").exists());
}

#[test]
fn repro_py_leaves_an_installed_jax_plugin_to_jax() {
    // jax registers each `name:path` of PJRT_NAMES_AND_LIBRARY_PATHS and each installed
    // `jax_plugins` package registers its own library: a library in both is registered twice
    // and jax fails (`ALREADY_EXISTS`, seen with jax-cuda13-pjrt). repro.py drops such entries.
    let tmp = tempfile::tempdir().unwrap();
    let package = tmp.path().join("site/jax_plugins/xla_cuda13");
    std::fs::create_dir_all(&package).unwrap();
    let library = package.join("xla_cuda_plugin.so");
    std::fs::write(&library, b"").unwrap();
    let script = format!(
        "import os, sys\nsys.path[:0] = [{site:?}, {python:?}]\nimport xla_repro\n\
         os.environ['PJRT_NAMES_AND_LIBRARY_PATHS'] = 'cuda:{lib},mine:/opt/mine.so'\n\
         xla_repro.drop_installed_plugins_from_env()\n\
         print(os.environ.get('PJRT_NAMES_AND_LIBRARY_PATHS'))",
        site = s(&tmp.path().join("site")),
        python = s(&root().join("python/graphbug_capture")),
        lib = s(&library),
    );
    let o = Command::new(python())
        .args(["-c", &script])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(
        String::from_utf8_lossy(&o.stdout).trim(),
        "mine:/opt/mine.so"
    );
}

/// A fault pinned to an instruction stays on that operation: the minifier may make the
/// instruction's value an input or a constant of its recorded value in a candidate, and
/// the fault then does not follow the name onto it (it did, and the result lost the
/// faulted dot: a directory its own command could not reproduce). The result keeps the
/// dot, and the minified directory reproduces with the command the run printed for it.
#[test]
fn a_pinned_fault_stays_on_its_operation_and_the_minified_directory_reproduces() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("dot_repro");
    let backend = "fault:accuracy@node:dot_general.15+pjrt:cpu";
    let o = graphbug(
        &[
            "repro",
            &bart("decoder.hlo"),
            "--inputs",
            &bart("inputs.safetensors"),
            "--backend",
            backend,
            "--out",
            &s(&out),
        ],
        tmp.path(),
    );
    let said = text(&o);
    assert!(o.status.success(), "{said}");
    let minified = std::fs::read_to_string(out.join("minified/program.hlo")).unwrap();
    assert!(
        minified
            .lines()
            .any(|l| l.trim_start().starts_with("dot_general.15 = ") && l.contains(" dot(")),
        "the faulted dot is gone from the result:\n{minified}"
    );
    let command = said
        .lines()
        .find_map(|l| {
            // `graphbug`, or its full path where no `graphbug` on PATH is this binary.
            let c = l.split('#').next()?.trim();
            let (exe, rest) = c.split_once(' ')?;
            (exe.ends_with("graphbug") && rest.ends_with("/minified run")).then(|| rest.to_string())
        })
        .unwrap_or_else(|| panic!("no `graphbug repro DIR/minified run` printed:\n{said}"));
    let args: Vec<&str> = command.split_whitespace().collect();
    let again = graphbug(&args, tmp.path());
    assert_eq!(again.status.code(), Some(1), "{}", text(&again));
    assert!(
        text(&again).contains("reproduced: accuracy"),
        "{}",
        text(&again)
    );
}

/// repro.py's children (the supervised run, the reference on PyTorch/XLA's CPU) and the
/// graphbug `run_hlo_minifier` starts are named GRAPHBUG_DIE_WITH by their Python starter,
/// which `subprocess` cannot make die with it: a child told so dies with the starter's
/// kill -9, and one whose starter is already gone does not run.
#[test]
fn repro_py_children_die_with_their_starter() {
    let tmp = tempfile::tempdir().unwrap();
    let marker = tmp.path().join("die-with-its-starter");
    let child = format!(
        "import sys; sys.path.insert(0, {:?}); import xla_repro, time; xla_repro.die_with_starter(); print('ready', flush=True); time.sleep(900)",
        root().join("python/graphbug_capture").display().to_string()
    );
    let mut starter = Command::new("sh")
        .arg("-c")
        .arg("GRAPHBUG_DIE_WITH=$$ \"$0\" -c \"$1\" \"$2\" & wait")
        .arg(python())
        .arg(&child)
        .arg(&marker)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // The child has asked to die with the starter once it says it is ready.
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(starter.stdout.take().unwrap()),
        &mut line,
    )
    .unwrap();
    assert_eq!(line, "ready\n");
    let pid = common::children_of(starter.id())[0];
    assert!(
        common::processes_mentioning(&marker.display().to_string())
            .iter()
            .any(|(p, _)| *p == pid),
        "the child is not the starter's"
    );
    starter.kill().unwrap(); // SIGKILL
    starter.wait().unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !common::ended(pid) {
        assert!(
            std::time::Instant::now() < deadline,
            "the child ({pid}) outlived its starter"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    // A starter that is not the parent: the child says so and does not run.
    let o = Command::new(python())
        .arg("-c")
        .arg(child.replace(
            "print('ready', flush=True); time.sleep(900)",
            "print('ran')",
        ))
        .env("GRAPHBUG_DIE_WITH", "1")
        .output()
        .unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(o.status.code(), Some(2), "{said}");
    assert!(
        said.contains("GRAPHBUG_DIE_WITH=1 names the process that started it"),
        "{said}"
    );
    assert!(!said.contains("ran"), "{said}");
}

/// A training step over 4 CPU devices (JAX's jit with shardings): its repro directory says
/// the devices, `graphbug repro DIR run` and `repro.py` (JAX, on as many devices) reproduce
/// the fault, and the clean program matches.
#[test]
fn a_sharded_program_reproduces_on_as_many_devices_in_jax() {
    let tmp = tempfile::tempdir().unwrap();
    let fixtures = root().join("tests/fixtures/xla/sharded");
    let io = graphbug::files::read(&fixtures.join("train_step.io.npz")).unwrap();
    let args: Vec<_> = io
        .into_iter()
        .filter(|(k, _)| k.starts_with("arg"))
        .collect();
    let inputs = tmp.path().join("inputs.npz");
    graphbug::files::write(&inputs, &args).unwrap();
    let out = tmp.path().join("sharded");
    let o = graphbug(
        &[
            "repro",
            &s(&fixtures.join("train_step.hlo")),
            "--inputs",
            &s(&inputs),
            "--backend",
            "fault:accuracy@node:dot_general.6+pjrt:cpu",
            "--out",
            &s(&out),
        ],
        tmp.path(),
    );
    let said = text(&o);
    assert!(o.status.success(), "{said}");
    assert!(said.contains("minified 40 instructions to 1"), "{said}");
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("manifest.json")).unwrap()).unwrap();
    assert_eq!(manifest["devices"]["num_partitions"], 4, "{manifest}");
    assert_eq!(manifest["devices"]["shardy"], true, "{manifest}");
    assert_eq!(
        manifest["devices"]["output_dims"][1],
        serde_json::json!([8, 16])
    );
    let o = graphbug(&["repro", &s(&out), "run"], tmp.path());
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    for (extra, code) in [(None, 1), (Some("--clean"), 0)] {
        let o = repro_py(&python(), &out, extra.as_slice(), tmp.path());
        let said = text(&o);
        assert_eq!(o.status.code(), Some(code), "{extra:?}: {said}");
        assert!(said.contains("4 devices"), "{said}");
        if code == 1 {
            assert!(said.contains("DIFFERS: out0, out1, out2"), "{said}");
        }
    }
    // Under PyTorch/XLA (its environment, which set-up makes for the tests, has no jax),
    // which runs one device: refused.
    let torch_xla = root().join(".venv-torch-xla/bin/python");
    assert!(
        torch_xla.is_file(),
        "no {}: run `cargo xtask setup`",
        torch_xla.display()
    );
    let o = repro_py(&torch_xla, &out, &[], tmp.path());
    let said = text(&o);
    assert_eq!(o.status.code(), Some(2), "{said}");
    assert!(
        said.contains("runs on 4 devices; this script runs programs over several devices with jax"),
        "{said}"
    );
}

/// Differential testing of a plugin against itself at another option set: XLA CPU with
/// fast math that assumes no NaN (`pjrt:cpu?xla_cpu_enable_fast_math=true&...`) against
/// XLA CPU as it is, over a corpus: a maximum over NaN is classified (NaN where the
/// reference is finite, or the reverse) and minified, a cumulative sum agrees; the
/// directory's manifest types the options for `repro.py`, which compiles with them; an
/// option the plugin does not know is a compile failure that names it.
#[test]
fn a_plugin_is_compared_with_itself_at_another_option_set() {
    let tmp = tempfile::tempdir().unwrap();
    let corpus = tmp.path().join("corpus");
    std::fs::create_dir_all(&corpus).unwrap();
    std::fs::write(
        corpus.join("nans.hlo"),
        "HloModule nans\n\nENTRY e {\n  x = f32[4] parameter(0)\n  y = f32[4] parameter(1)\n  ROOT m = f32[4] maximum(x, y)\n}\n",
    )
    .unwrap();
    let f32s = |v: [f32; 4]| {
        let data = v.iter().flat_map(|x| x.to_le_bytes()).collect();
        graphbug::files::HostTensor::new(graphbug::ir::Dtype::Float32, vec![4], data).unwrap()
    };
    graphbug::files::write(
        &corpus.join("nans.inputs.npz"),
        &[
            ("arg0".to_string(), f32s([1.0, f32::NAN, 3.0, -100.0])),
            (
                "arg1".to_string(),
                f32s([f32::NAN, 2.0, f32::INFINITY, 0.5]),
            ),
        ],
    )
    .unwrap();
    std::fs::copy(
        root().join("tests/fixtures/xla/hlo/cumsum.hlo"),
        corpus.join("cumsum.hlo"),
    )
    .unwrap();
    let fast = "pjrt:cpu?xla_cpu_enable_fast_math=true&xla_cpu_fast_math_honor_nans=false&xla_cpu_fast_math_honor_infs=false";
    let out = tmp.path().join("diff");
    let o = graphbug(
        &["repro", &s(&corpus), "--backend", fast, "--out", &s(&out)],
        tmp.path(),
    );
    let said = text(&o);
    assert!(
        said.contains("1 pass, 1 fail")
            && said.contains("failures by class: NaN or infinity where the reference is finite 1"),
        "{said}"
    );
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("nans.hlo/manifest.json")).unwrap())
            .unwrap();
    assert_eq!(manifest["backend"], fast);
    assert_eq!(
        manifest["compile_options"],
        serde_json::json!({
            "xla_cpu_enable_fast_math": true,
            "xla_cpu_fast_math_honor_infs": false,
            "xla_cpu_fast_math_honor_nans": false
        })
    );
    assert!(out.join("nans.hlo/report.html").is_file(), "{said}");
    // repro.py compiles with the options: with them the maximum differs, without them
    // (the same directory, its manifest's options taken out) it matches.
    let dir = out.join("nans.hlo");
    let run = |dir: &Path| {
        let o = repro_py(&python(), dir, &[], tmp.path());
        (o.status.code(), text(&o))
    };
    let (code, said) = run(&dir);
    assert!(code == Some(1) && said.contains("DIFFERS: out0"), "{said}");
    let plain = tmp.path().join("plain");
    std::fs::create_dir_all(&plain).unwrap();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_file() {
            std::fs::copy(&path, plain.join(path.file_name().unwrap())).unwrap();
        }
    }
    let mut m = manifest.clone();
    m.as_object_mut().unwrap().remove("compile_options");
    std::fs::write(plain.join("manifest.json"), m.to_string()).unwrap();
    let (code, said) = run(&plain);
    assert_eq!(code, Some(0), "{said}");
    for (backend, says) in [
        (
            "pjrt:cpu?no_such_option_xyz=1",
            "No such compile option: 'no_such_option_xyz'",
        ),
        ("pjrt:cpu?fast", "`fast` is no compile option"),
    ] {
        let cumsum = s(&corpus.join("cumsum.hlo"));
        let o = graphbug(&["run", &cumsum, "--backend", backend], tmp.path());
        assert_eq!(o.status.code(), Some(1), "{backend}: {}", text(&o));
        assert!(text(&o).contains(says), "{backend}: {}", text(&o));
    }
}
