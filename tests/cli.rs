//! The `graphbug` binary: `fmt` and `check` on reference graphs and on bad input.

mod common;

use common::Run;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn fixture(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(rel)
}

fn graphbug(args: &[&str]) -> Output {
    common::graphbug().args(args).run()
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
    let tmp = tmpdir("bad");
    let dir = tmp.path();
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
}

/// A fresh scratch folder, removed when it is dropped.
fn tmpdir(tag: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(&format!("graphbug-cli-{tag}-"))
        .tempdir()
        .unwrap()
}

/// Runs `graph` on `inputs` with `--compare outputs` (fixture paths, `extra` flags first)
/// and asserts the outputs match; returns what it printed.
fn assert_run_matches(graph: &str, inputs: &str, outputs: &str, extra: &[&str]) -> String {
    let (graph, inputs, outputs) = (fixture(graph), fixture(inputs), fixture(outputs));
    let mut args = vec!["run", graph.to_str().unwrap()];
    args.extend_from_slice(extra);
    args.extend(["--inputs", inputs.to_str().unwrap()]);
    args.extend(["--compare", outputs.to_str().unwrap()]);
    let out = graphbug(&args);
    let stdout = text(&out.stdout);
    assert!(
        out.status.success(),
        "{}: {stdout}{}",
        graph.display(),
        text(&out.stderr)
    );
    assert!(
        stdout.contains("outputs match"),
        "{}: {stdout}",
        graph.display()
    );
    stdout
}

/// `--compare` against a wrong reference (the outputs of random inputs made with `random`
/// flags, saved in `dir`) fails with exit 1 for `graph` on `inputs` (fixture paths).
fn assert_wrong_reference_fails(dir: &Path, graph: &str, inputs: &str, random: &[&str]) {
    let (graph, inputs) = (fixture(graph), fixture(inputs));
    let wrong = dir.join("wrong.safetensors");
    let mut args = vec!["run", graph.to_str().unwrap()];
    args.extend_from_slice(random);
    args.extend(["--save-outputs", wrong.to_str().unwrap()]);
    let out = graphbug(&args);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let out = graphbug(&[
        "run",
        graph.to_str().unwrap(),
        "--inputs",
        inputs.to_str().unwrap(),
        "--compare",
        wrong.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stdout));
    assert!(text(&out.stdout).contains("FAIL"), "{}", text(&out.stdout));
}

#[test]
fn run_reproduces_pytorch_reference_outputs() {
    for model in ["mlp", "cnn", "gpt4"] {
        let stdout = assert_run_matches(
            &format!("{model}/forward.py"),
            &format!("{model}/inputs.npz"),
            &format!("{model}/outputs.npz"),
            &["--backend", "eager"],
        );
        // Bit for bit on the exporting machine; other CPUs differ in the last bit.
        assert!(
            stdout.contains("max abs diff 0.000000e0") || stdout.contains("e-7)"),
            "{model}: more than rounding apart:\n{stdout}"
        );
    }
}

#[test]
fn dynamic_shape_graphs_run_equal_to_pytorch() {
    // AOTAutograd's forward graphs of torch.compile(dynamic=True): symbols bind from the
    // inputs' sizes, `Sym` inputs and size arithmetic specialize, outputs match PyTorch's.
    for model in ["mlp", "reshape", "conv", "attention", "interpolate"] {
        assert_run_matches(
            &format!("dynamic/{model}/fw.py"),
            &format!("dynamic/{model}/fw_inputs.safetensors"),
            &format!("dynamic/{model}/fw_outputs.safetensors"),
            &[],
        );
    }
    // Random inputs take their sizes from --bind; a missing or contradicting size is named.
    let mlp = fixture("dynamic/mlp/fw.py");
    let out = graphbug(&["run", mlp.to_str().unwrap(), "--bind", "s33=3"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("f32[3, 4]"),
        "{}",
        text(&out.stdout)
    );
    let out = graphbug(&["run", mlp.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr)
            .contains("no value for size symbol s33: give the inputs, or --bind s33=N"),
        "{}",
        text(&out.stderr)
    );
    let out = graphbug(&[
        "run",
        mlp.to_str().unwrap(),
        "--inputs",
        fixture("dynamic/mlp/fw_inputs.safetensors")
            .to_str()
            .unwrap(),
        "--bind",
        "s33=4",
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("s33 = 4 from --bind but 5 from input `primals_3`"),
        "{}",
        text(&out.stderr)
    );
    let out = graphbug(&["run", mlp.to_str().unwrap(), "--bind", "s33"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("is not SYMBOL=N"),
        "{}",
        text(&out.stderr)
    );
    // A wrong reference fails: outputs of random inputs of the same sizes.
    let tmp = tmpdir("dynamic");
    let dir = tmp.path();
    assert_wrong_reference_fails(
        dir,
        "dynamic/mlp/fw.py",
        "dynamic/mlp/fw_inputs.safetensors",
        &["--bind", "s33=5"],
    );
    // Commands that need static shapes say so, and `specialize` makes the graph static.
    let reshape = fixture("dynamic/reshape/fw.py");
    for args in [&["joint"][..], &["functionalize"]] {
        let mut argv = args.to_vec();
        argv.push(reshape.to_str().unwrap());
        let out = graphbug(&argv);
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        assert!(
            text(&out.stderr)
                .contains("does not handle dynamic-shape graphs yet (`primals_1` is \"Sym(s97)\")"),
            "{args:?}: {}",
            text(&out.stderr)
        );
    }
    // check --meta takes the symbols' values from the inputs (or --bind), and still finds a
    // wrong symbolic annotation.
    let inputs = fixture("dynamic/reshape/fw_inputs.safetensors");
    let inputs = inputs.to_str().unwrap();
    let out = graphbug(&[
        "check",
        "--meta",
        reshape.to_str().unwrap(),
        "--inputs",
        inputs,
    ]);
    assert!(
        out.status.success(),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    let out = graphbug(&["check", "--meta", reshape.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("no value for size symbols s97, s98, s52"),
        "{}",
        text(&out.stderr)
    );
    let wrong = dir.join("reshape_wrong.py");
    let text_fw = std::fs::read_to_string(&reshape).unwrap();
    let bad = text_fw.replacen("sum_1: \"f32[2*s97]\"", "sum_1: \"f32[3*s97]\"", 1);
    assert_ne!(bad, text_fw);
    std::fs::write(&wrong, bad).unwrap();
    let out = graphbug(&[
        "check",
        "--meta",
        wrong.to_str().unwrap(),
        "--inputs",
        inputs,
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stdout));
    assert!(
        text(&out.stdout).contains("meta mismatch"),
        "{}",
        text(&out.stdout)
    );
    let out = graphbug(&[
        "specialize",
        reshape.to_str().unwrap(),
        "--inputs",
        fixture("dynamic/reshape/fw_inputs.safetensors")
            .to_str()
            .unwrap(),
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let fixed = dir.join("reshape_static.py");
    std::fs::write(&fixed, &out.stdout).unwrap();
    assert!(
        text(&out.stdout).contains("view: \"f32[12, 2]\""),
        "{}",
        text(&out.stdout)
    );
    let out = graphbug(&["check", "--meta", fixed.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    let out = graphbug(&["joint", fixed.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    // --bind on a static graph is a mistake worth saying.
    let static_mlp = fixture("mlp/forward.py");
    let out = graphbug(&["run", static_mlp.to_str().unwrap(), "--bind", "s0=2"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("the graph has no symbolic sizes"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn dynamo_level_graphs_run_equal_to_pytorch() {
    // The graphs TorchDynamo hands a backend: torch functions, Tensor methods, operators and
    // indexing lowered to aten through the schemas, static and dynamic, on PyTorch's inputs.
    for case in [
        "mlp",
        "conv",
        "tensor_code",
        "loss",
        "mlp_dynamic",
        "conv_dynamic",
        "tensor_code_dynamic",
        "loss_dynamic",
        "residual",
        "residual_dynamic",
        "attention",
        "indexing",
        "indexing_dynamic",
        "embedding",
    ] {
        assert_run_matches(
            &format!("dynamo/{case}.py"),
            &format!("dynamo/{case}_inputs.safetensors"),
            &format!("dynamo/{case}_outputs.safetensors"),
            &[],
        );
    }
    // It prints back as written, aliases included.
    let mlp = fixture("dynamo/mlp.py");
    let out = graphbug(&["fmt", mlp.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("l_args_0_ = L_args_0_"),
        "{}",
        text(&out.stdout)
    );
    // A wrong reference fails: outputs of random inputs.
    let tmp = tmpdir("dynamo");
    assert_wrong_reference_fails(
        tmp.path(),
        "dynamo/mlp.py",
        "dynamo/mlp_inputs.safetensors",
        &[],
    );
    // A value read from data (dynamic=True lifts the module's dropout float to a tensor,
    // which the graph reads with `.item()`) is named, not guessed.
    let out = graphbug(&[
        "run",
        fixture("dynamo/attention_dynamic.py").to_str().unwrap(),
        "--inputs",
        fixture("dynamo/attention_dynamic_inputs.safetensors")
            .to_str()
            .unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains(
            "node `item`: \"Sym(zf6)\" is read from a tensor's data (an unbacked symbol)"
        ),
        "{}",
        text(&out.stderr)
    );
    // F.embedding binds by its own signature (GPT-2's nn.Embedding passes every argument
    // by position): a padding row counted from the end is aten's row index, and max_norm
    // renormalizes the rows read, in place, before the lookup.
    let out = graphbug(&[
        "specialize",
        "--aten",
        fixture("dynamo/embedding.py").to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    for want in [
        "torch.ops.aten.embedding.default(l_self_modules_wte_parameters_weight_, l_idx_, -1, False, False)",
        "torch.ops.aten.embedding.default(l_table_, mod, 4, False, False)",
        "torch.ops.aten.embedding_renorm_.default(l_self_modules_normed_parameters_weight_, mod_1, 1.0, 2.0)",
    ] {
        assert!(text(&out.stdout).contains(want), "{want}\n{}", text(&out.stdout));
    }
    // With dynamic=True, dynamo lifts nn.Embedding's norm_type (a float) into a tensor the
    // graph reads with `.item()`: named, as above.
    let out = graphbug(&[
        "run",
        fixture("dynamo/embedding_dynamic.py").to_str().unwrap(),
        "--inputs",
        fixture("dynamo/embedding_dynamic_inputs.safetensors")
            .to_str()
            .unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("node `item`: ")
            && text(&out.stderr).contains("unbacked symbol"),
        "{}",
        text(&out.stderr)
    );
    // `input=` names aten's `self`, as PyTorch's argument parser reads it.
    let keyword_dir = tmpdir("dynamo-input");
    let keyword = keyword_dir.path().join("input.py");
    std::fs::write(
        &keyword,
        "class GraphModule(torch.nn.Module):\n\
         \x20   def forward(self, L_x_: \"f32[3]\"):\n\
         \x20       l_x_ = L_x_\n\
         \x20       relu: \"f32[3]\" = torch.relu(input = l_x_);  l_x_ = None\n\
         \x20       sm: \"f32[3]\" = torch.nn.functional.softmax(input = relu, dim = 0);  relu = None\n\
         \x20       return (sm,)\n",
    )
    .unwrap();
    let out = graphbug(&["specialize", "--aten", keyword.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("torch.ops.aten.relu.default(self = l_x_)")
            && text(&out.stdout).contains("torch.ops.aten.softmax.int(relu, 0, None)"),
        "{}",
        text(&out.stdout)
    );
    // A form of a Python-level function that is not lowered is named, not run on guesses.
    let attention = std::fs::read_to_string(fixture("dynamo/attention.py")).unwrap();
    let masked_dir = tmpdir("dynamo-mask");
    let masked = masked_dir.path().join("attention.py");
    std::fs::write(
        &masked,
        attention.replace("key_padding_mask = None", "key_padding_mask = query"),
    )
    .unwrap();
    let out = graphbug(&["run", masked.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains(
            "node `multi_head_attention_forward` (torch.nn.functional.multi_head_attention_forward): `key_padding_mask` is not lowered yet"
        ),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn run_with_random_inputs_is_deterministic_and_saves_outputs() {
    let tmp = tmpdir("random");
    let dir = tmp.path();
    let graph = fixture("gpt4/forward.py");
    let save = |name: &str, seed: &str| {
        let path = dir.join(name);
        let out = graphbug(&[
            "run",
            graph.to_str().unwrap(),
            "--seed",
            seed,
            "--save-outputs",
            path.to_str().unwrap(),
        ]);
        assert!(out.status.success(), "{}", text(&out.stderr));
        (std::fs::read(&path).unwrap(), text(&out.stdout))
    };
    let (a, summary_a) = save("a.safetensors", "7");
    let (b, summary_b) = save("b.safetensors", "7");
    let (c, _) = save("c.safetensors", "8");
    assert_eq!(a, b, "same seed, same bytes");
    assert_eq!(
        summary_a.replace("a.safetensors", "X"),
        summary_b.replace("b.safetensors", "X")
    );
    assert_ne!(a, c, "another seed, other inputs");
    assert!(
        summary_a.starts_with("out0: f32[2, 16, 128] min="),
        "{summary_a}"
    );
}

#[test]
fn run_reports_mismatches_and_bad_input_with_exit_1() {
    let gpt4 = fixture("gpt4/forward.py");
    let gpt4_inputs = fixture("gpt4/inputs.npz");
    let mlp_outputs = fixture("mlp/outputs.npz");
    let mlp_inputs = fixture("mlp/inputs.npz");
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec![
                "--inputs",
                gpt4_inputs.to_str().unwrap(),
                "--compare",
                mlp_outputs.to_str().unwrap(),
            ],
            "shape mismatch",
        ),
        (
            vec!["--inputs", mlp_inputs.to_str().unwrap()],
            "graph has 55 inputs",
        ),
        (
            vec!["--backend", "nope"],
            "unknown backend `nope`; known backends: aot_eager, ",
        ),
        (vec!["--inputs", "/no/such/file.npz"], "/no/such/file.npz"),
        (vec!["--device", "tpu"], "unknown device type `tpu`"),
    ];
    for (extra, want) in cases {
        let mut args = vec!["run", gpt4.to_str().unwrap()];
        args.extend(extra.iter().copied());
        let out = graphbug(&args);
        assert_eq!(out.status.code(), Some(1), "{extra:?}");
        let all = format!("{}{}", text(&out.stdout), text(&out.stderr));
        assert!(all.contains(want), "{extra:?}: {all}");
    }
}

#[test]
fn run_on_cuda_or_a_clear_error() {
    let out = graphbug(&[
        "run",
        fixture("mlp/forward.py").to_str().unwrap(),
        "--device",
        "cuda:0",
    ]);
    if graphbug::aten::device::cuda_device_count() == 0 {
        eprintln!("notice: no CUDA device; checking that --device cuda:0 fails cleanly");
        assert_eq!(out.status.code(), Some(1));
        assert!(
            text(&out.stderr).contains("cuda:0 requested"),
            "{}",
            text(&out.stderr)
        );
    } else {
        assert!(out.status.success(), "{}", text(&out.stderr));
    }
}

#[test]
fn check_meta_agrees_on_references_and_reports_bad_annotations() {
    let out = graphbug(&[
        "check",
        "--meta",
        fixture("gpt4/joint.py").to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stdout),
        "613 nodes, 56 inputs, 56 outputs\nmeta: every annotation agrees with libtorch\n"
    );
    let tmp = tmpdir("meta");
    let dir = tmp.path();
    let bad = dir.join("bad.py");
    let original = std::fs::read_to_string(fixture("mlp/forward.py")).unwrap();
    std::fs::write(
        &bad,
        original.replace("gelu: \"f32[8, 64]\"", "gelu: \"f32[8, 65]\""),
    )
    .unwrap();
    let out = graphbug(&["check", "--meta", bad.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stdout)
        .contains("meta mismatch: node `gelu`: annotated f32[8, 65], libtorch infers f32[8, 64]"));
}

fn graphbug_env(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = common::graphbug();
    cmd.args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.run()
}

#[test]
fn backends_lists_names_tags_and_descriptions() {
    let out = graphbug(&["backends"]);
    assert!(out.status.success());
    let shown = text(&out.stdout);
    assert!(shown.starts_with("eager "), "{shown}");
    assert!(
        !shown.contains("TESTING_ONLY") && !shown.contains("eager_debug"),
        "{shown}"
    );
    let out = graphbug(&["backends", "--all"]);
    let all = text(&out.stdout);
    for (name, rest) in [
        ("eager_debug", "[debug] "),
        (
            "relu_accuracy_error_TESTING_ONLY",
            "[testing] relu(x) becomes x + 1: wrong results",
        ),
        (
            "fault:<kind>[=<amount>]@<op>[#<k>][%<percent>][+<inner>]",
            "[testing] ",
        ),
        ("limit:<pass>=<n>,...+<inner>", "[debug] "),
        ("explain:<inner>", "[debug] "),
        ("aot_eager", "min-cut"),
        ("aot_eager_default_partitioner", "default partition"),
        ("aot_eager_decomp_partition", "decompose"),
    ] {
        let line = all
            .lines()
            .find(|l| l.split_whitespace().next() == Some(name));
        assert!(
            line.is_some_and(|l| l.contains(rest)),
            "missing {name} ... {rest:?} in\n{all}"
        );
    }
}

#[test]
fn run_exits_1_with_the_classified_failure() {
    let cnn = fixture("cnn/forward.py");
    let cnn_inputs = fixture("cnn/inputs.npz");
    let cnn_outputs = fixture("cnn/outputs.npz");
    let cases = [
        ("relu_compile_error_TESTING_ONLY", "compile error in backend `relu_compile_error_TESTING_ONLY` at node `relu` (aten::relu.default): ReluCompileError"),
        ("relu_runtime_error_TESTING_ONLY", "runtime error in backend `relu_runtime_error_TESTING_ONLY` at node `relu`"),
        ("relu_accuracy_error_TESTING_ONLY", "outputs do not match"),
        ("fault:runtime@convolution#2", "runtime error in backend `fault:runtime@convolution#2+eager` at node `convolution_1` (aten::convolution.default)"),
    ];
    for (backend, want) in cases {
        let out = graphbug(&[
            "run",
            cnn.to_str().unwrap(),
            "--backend",
            backend,
            "--inputs",
            cnn_inputs.to_str().unwrap(),
            "--compare",
            cnn_outputs.to_str().unwrap(),
        ]);
        assert_eq!(out.status.code(), Some(1), "{backend}");
        assert!(
            text(&out.stderr).contains(want),
            "{backend}: {}",
            text(&out.stderr)
        );
    }
}

#[test]
fn inject_fault_env_applies_to_any_backend() {
    let gpt4 = fixture("gpt4/forward.py");
    let out = graphbug_env(
        &["run", gpt4.to_str().unwrap(), "--backend", "eager_noexcept"],
        &[("GRAPHBUG_INJECT_FAULT", "runtime@aten.gelu.default#3")],
    );
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert!(
        err.contains("at node `gelu_2` (aten::gelu.default)"),
        "{err}"
    );
    assert!(
        err.contains("unexpected exception when running the compiled graph"),
        "{err}"
    );
    let out = graphbug_env(
        &["run", gpt4.to_str().unwrap()],
        &[("GRAPHBUG_INJECT_FAULT", "runtime-gelu")],
    );
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert!(
        err.contains("GRAPHBUG_INJECT_FAULT=runtime-gelu")
            && err.contains("expected:\nfault:<kind>"),
        "{err}"
    );
    // A crash fault really aborts the process running the backend; graphbug survives it
    // and reports a classified crash.
    let out = graphbug_env(
        &["run", gpt4.to_str().unwrap()],
        &[("GRAPHBUG_INJECT_FAULT", "crash@_softmax#2")],
    );
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert!(
        err.contains("runtime crash in backend `fault:crash@_softmax#2+eager`: injected crash fault at node `_softmax_1` (aten::_softmax.default): aborting the process (killed by signal 6 (SIGABRT))"),
        "{err}"
    );
    // In-process, it takes graphbug down with it.
    let out = graphbug_env(
        &["run", gpt4.to_str().unwrap(), "--no-isolate"],
        &[("GRAPHBUG_INJECT_FAULT", "crash@_softmax#2")],
    );
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(out.status.signal(), Some(6));
}

#[test]
fn explain_prints_counts_and_histogram() {
    let out = graphbug(&[
        "explain",
        fixture("cnn/forward.py").to_str().unwrap(),
        "--backend",
        "eager",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let shown = text(&out.stdout);
    assert!(shown.starts_with("Graph Count: 1\nGraph Break Count: 0\nOp Count: 19\nOps per Graph:\n  Ops 1:\n    aten.convolution.default\n"), "{shown}");
    assert!(
        shown.contains(
            "Op Histogram:\n       7  operator.getitem\n       2  aten.convolution.default\n"
        ),
        "{shown}"
    );
    let out = graphbug(&[
        "explain",
        fixture("cnn/forward.py").to_str().unwrap(),
        "--backend",
        "relu_compile_error_TESTING_ONLY",
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stdout).starts_with("Graph Count: 1\n"));
    assert!(text(&out.stderr).contains("ReluCompileError"));
}

#[test]
fn plugins_load_from_the_flag_and_the_environment() {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let status = Command::new(cargo)
        .args(["build", "-q", "-p", "graphbug-plugin-example"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .status()
        .unwrap();
    assert!(status.success());
    // Where cargo just built it: CARGO_TARGET_DIR when set, else the workspace's target/.
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target"));
    let lib = target.join("debug/libgraphbug_plugin_example.so");
    let mlp = fixture("mlp/forward.py");
    let args = [
        "--plugin",
        lib.to_str().unwrap(),
        "run",
        mlp.to_str().unwrap(),
        "--backend",
        "plugin_cse_eager",
    ];
    let out = graphbug(&args);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let out = graphbug_env(
        &[
            "run",
            mlp.to_str().unwrap(),
            "--backend",
            "plugin_cse_eager",
        ],
        &[("GRAPHBUG_PLUGINS", lib.to_str().unwrap())],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let out = graphbug(&["--plugin", "/no/such/plugin.so", "backends"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("cannot load plugin /no/such/plugin.so"),
        "{}",
        text(&out.stderr)
    );
}

/// `check --meta --inputs`: OpInfo's `masked_select` and `nonzero` samples, whose output
/// shapes depend on the values, are checked on the given inputs like any other node; a
/// wrong annotation is a mismatch. Without inputs they stay unchecked, and said so.
#[test]
fn check_meta_checks_data_dependent_shapes_on_the_inputs() {
    for (op, annotation) in [("masked_select", "f32[49]"), ("nonzero", "i64[0, 0]")] {
        let dir = fixture(&format!("opinfo_{op}"));
        let forward = dir.join("forward.py");
        let inputs = dir.join("inputs.safetensors");
        let out = graphbug(&["check", "--meta", forward.to_str().unwrap()]);
        assert!(out.status.success(), "{op}: {}", text(&out.stderr));
        assert!(
            text(&out.stdout).contains(&format!("meta: node `{op}` not checked")),
            "{op}: {}",
            text(&out.stdout)
        );
        let out = graphbug(&[
            "check",
            "--meta",
            forward.to_str().unwrap(),
            "--inputs",
            inputs.to_str().unwrap(),
        ]);
        let shown = text(&out.stdout);
        assert!(out.status.success(), "{op}: {shown}{}", text(&out.stderr));
        assert!(
            shown.contains(&format!("meta: node `{op}` checked on the given inputs")),
            "{op}: {shown}"
        );
        assert!(
            shown.contains("meta: every annotation agrees with libtorch"),
            "{op}: {shown}"
        );
        // A wrong annotation is caught.
        let tmp = tmpdir(&format!("check-data-{op}"));
        let wrong = tmp.path().join("forward.py");
        let original = std::fs::read_to_string(&forward).unwrap();
        let bad = if op == "nonzero" {
            "i64[1, 0]"
        } else {
            "f32[48]"
        };
        std::fs::write(&wrong, original.replace(annotation, bad)).unwrap();
        let out = graphbug(&[
            "check",
            "--meta",
            wrong.to_str().unwrap(),
            "--inputs",
            inputs.to_str().unwrap(),
        ]);
        let shown = text(&out.stdout);
        assert_eq!(out.status.code(), Some(1), "{op}: {shown}");
        assert!(
            shown.contains(&format!(
                "meta mismatch: node `{op}`: annotated {bad}, libtorch gives on the inputs {annotation}"
            )),
            "{op}: {shown}"
        );
    }
}

/// OpInfo's first float32 sample of `nn.functional.multi_head_attention_forward`, dropout
/// on, as `make_fx` traces it: `bernoulli_.float(empty_like)` leaves `p` at its default,
/// which `bernoulli.p` (its functional form) requires. The joint graph is valid: it binds
/// to every schema, its shapes infer, and it partitions.
#[test]
fn joint_of_attention_with_dropout_traced_by_make_fx() {
    let tmp = tmpdir("joint-mha");
    let dir = tmp.path();
    let forward = fixture("opinfo_mha_dropout/forward.py");
    let out = graphbug(&["joint", forward.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let joint = text(&out.stdout);
    assert!(
        joint.contains("torch.ops.aten.bernoulli.p(empty_like, 0.5)"),
        "{joint}"
    );
    assert!(text(&out.stderr).contains("num_fwd_outputs = 2"));
    let path = dir.join("joint.py");
    std::fs::write(&path, &out.stdout).unwrap();
    let out = graphbug(&["check", "--meta", path.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let out = graphbug(&["partition", path.to_str().unwrap(), "--json"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
}

#[test]
fn joint_and_partition_reproduce_aotautograd() {
    let tmp = tmpdir("joint");
    let dir = tmp.path();
    // The MLP's joint, differentiating the parameters but not the data (input 8), is
    // PyTorch's joint.py.
    let out = graphbug(&[
        "joint",
        fixture("mlp/forward.py").to_str().unwrap(),
        "--requires-grad",
        "0,1,2,3,4,5,6,7",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("num_fwd_outputs = 1"));
    let body = |s: &str| s.split_once('\n').unwrap().1.to_string();
    let theirs = graphbug(&["fmt", fixture("mlp/joint.py").to_str().unwrap()]);
    assert_eq!(body(&text(&out.stdout)), body(&text(&theirs.stdout)));
    let joint = dir.join("joint.py");
    std::fs::write(&joint, &out.stdout).unwrap();
    // Partitioning it, and PyTorch's own joints, saves what functorch's default saves.
    let mut joints = vec![("mlp", joint)];
    for m in ["mlp", "cnn", "gpt4"] {
        joints.push((m, fixture(&format!("{m}/joint.py"))));
    }
    for (model, file) in joints {
        let out = graphbug(&["partition", file.to_str().unwrap(), "--json"]);
        assert!(out.status.success(), "{model}: {}", text(&out.stderr));
        let ours: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let reference: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(fixture(&format!("{model}/partition.json"))).unwrap(),
        )
        .unwrap();
        for key in ["saved", "saved_bytes", "fw_ops", "bw_ops"] {
            assert_eq!(ours[key], reference["default"][key], "{model}: {key}");
        }
        assert!(ours["seconds"].as_f64().is_some_and(|s| s >= 0.0), "{ours}");
    }
    // The min-cut partitioner saves no more than functorch's.
    for m in ["mlp", "cnn", "gpt4"] {
        let joint = fixture(&format!("{m}/joint.py"));
        let out = graphbug(&[
            "partition",
            joint.to_str().unwrap(),
            "--partitioner",
            "min-cut",
            "--json",
        ]);
        assert!(out.status.success(), "{m}: {}", text(&out.stderr));
        let ours: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let reference: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(fixture(&format!("{m}/partition.json"))).unwrap(),
        )
        .unwrap();
        let (saved, bound) = (
            ours["saved_bytes"].as_u64().unwrap(),
            reference["mincut"]["saved_bytes"].as_u64().unwrap(),
        );
        assert!(saved <= bound, "{m}: {saved} > {bound}");
        assert!(
            ours["recomputed"].is_object() && ours["seconds"].is_f64(),
            "{ours}"
        );
    }
    // Without --json: both graphs, then the summary.
    let out = graphbug(&["partition", fixture("mlp/joint.py").to_str().unwrap()]);
    let shown = text(&out.stdout);
    assert_eq!(shown.matches("(torch.nn.Module):").count(), 2, "{shown}");
    assert!(shown.contains("# saved 12 values, 30784 bytes"), "{shown}");
    // A memory budget: the achieved bytes and the recomputation paid for them.
    let cnn = fixture("cnn/joint.py");
    let cnn = cnn.to_str().unwrap();
    let out = graphbug(&[
        "partition",
        cnn,
        "--partitioner",
        "min-cut",
        "--saved-budget",
        "0.3",
    ]);
    let shown = text(&out.stdout);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let budget_line = shown
        .lines()
        .find(|l| l.starts_with("# saved budget 0.3: saved "))
        .unwrap_or_else(|| panic!("{shown}"));
    let numbers: Vec<u64> = budget_line
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|w| w.parse().ok())
        .collect();
    // "# memory budget 0.3: saved S bytes of at most L ..."
    assert!(numbers[2] <= numbers[3], "{budget_line}");
    assert!(
        shown.contains("# recomputed in the backward: aten."),
        "{shown}"
    );
    // The pareto curve: 0, 0.25, ..., 1.
    let out = graphbug(&[
        "partition",
        cnn,
        "--partitioner",
        "min-cut",
        "--pareto",
        "4",
        "--json",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let curve: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(curve.len(), 5);
    let bytes: Vec<u64> = curve
        .iter()
        .map(|p| p["saved_bytes"].as_u64().unwrap())
        .collect();
    assert!(
        bytes.windows(2).all(|w| w[0] <= w[1]) && bytes[0] < bytes[4],
        "{bytes:?}"
    );
    let out = graphbug(&["partition", cnn, "--partitioner", "min-cut", "--pareto"]);
    assert_eq!(
        text(&out.stdout).lines().count(),
        12,
        "{}",
        text(&out.stdout)
    );
    // Bad input names the culprit.
    let (fw, jt) = (fixture("mlp/forward.py"), fixture("mlp/joint.py"));
    let (fw, jt) = (fw.to_str().unwrap(), jt.to_str().unwrap());
    let bad = [
        (
            vec!["joint", fw, "--requires-grad", "9"],
            "input 9 does not exist",
        ),
        (
            vec!["joint", fw, "--requires-grad", "w"],
            "no input named `w`",
        ),
        (
            vec!["partition", jt, "--partitioner", "best"],
            "unknown partitioner `best`",
        ),
        (vec!["partition", fw], "pass --num-fwd-outputs"),
        (
            vec!["partition", jt, "--memory-budget", "0.5"],
            "need --partitioner min-cut",
        ),
        (
            vec![
                "partition",
                jt,
                "--partitioner",
                "min-cut",
                "--saved-budget",
                "2",
            ],
            "activation memory budget 2 is outside 0..=1",
        ),
        (
            vec![
                "partition",
                jt,
                "--partitioner",
                "min-cut",
                "--memory-budget",
                "1.5",
            ],
            "fraction 1.5 is outside 0..=1",
        ),
        (
            vec![
                "partition",
                jt,
                "--partitioner",
                "min-cut",
                "--op-classes",
                "tpu",
            ],
            "unknown op classes `tpu`",
        ),
    ];
    for (args, want) in bad {
        let out = graphbug(&args);
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        assert!(
            text(&out.stderr).contains(want),
            "{args:?}: {}",
            text(&out.stderr)
        );
    }
}

/// `run --backward` is a training step through any backend: its outputs and gradients
/// match PyTorch's (tests/fixtures/make_train_step.py), and a wrong gradient in the file
/// fails the comparison.
#[test]
fn run_backward_is_a_training_step_checked_against_pytorch() {
    use graphbug::aten::io::{read_tensors, write_tensors};
    let tmp = tmpdir("train");
    let dir = tmp.path();
    let graph = fixture("mlp/forward.py");
    let inputs = fixture("mlp/inputs.npz");
    let expected = fixture("mlp/train_step.npz");
    for backend in ["eager", "aot_eager", "aot_eager_decomp_partition"] {
        let out = graphbug(&[
            "run",
            graph.to_str().unwrap(),
            "--inputs",
            inputs.to_str().unwrap(),
            "--backend",
            backend,
            "--backward",
            "--compare",
            expected.to_str().unwrap(),
        ]);
        let stdout = text(&out.stdout);
        assert!(
            out.status.success(),
            "{backend}: {stdout}{}",
            text(&out.stderr)
        );
        assert!(stdout.contains("grad8: f32[8, 32]"), "{backend}: {stdout}");
        assert!(
            stdout.contains("all 10 outputs match"),
            "{backend}: {stdout}"
        );
    }
    // One gradient element off: the step no longer matches.
    let mut wrong = read_tensors(&expected).unwrap();
    let (_, g) = wrong.iter_mut().find(|(k, _)| k == "grad4").unwrap();
    let _ = g.get(3).get(7).fill_(10.0);
    let file = dir.join("wrong.safetensors");
    write_tensors(&file, &wrong).unwrap();
    let out = graphbug(&[
        "run",
        graph.to_str().unwrap(),
        "--inputs",
        inputs.to_str().unwrap(),
        "--backward",
        "--compare",
        file.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stdout));
    assert!(text(&out.stdout).contains("worst element at [3, 7]"));
    // Only the inputs asked for get gradients; tangents come from a file.
    let tangents = dir.join("tangents.safetensors");
    let ones = tch::Tensor::ones([8, 10], (tch::Kind::Float, tch::Device::Cpu));
    write_tensors(&tangents, &[("tangent0".to_string(), ones * 2.0)]).unwrap();
    let out = graphbug(&[
        "run",
        graph.to_str().unwrap(),
        "--inputs",
        inputs.to_str().unwrap(),
        "--backward",
        "--requires-grad",
        "7",
        "--tangents",
        tangents.to_str().unwrap(),
    ]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", text(&out.stderr));
    // The last bias's gradient is the tangents summed over the batch: 8 * 2.
    assert!(
        stdout.contains("grad7: f32[10] min=1.600000e1 max=1.600000e1"),
        "{stdout}"
    );
    assert!(stdout.contains("grad0: None"), "{stdout}");
    // A tangents file naming no output is an error naming the key.
    write_tensors(
        &tangents,
        &[(
            "tangent5".to_string(),
            tch::Tensor::ones([1], (tch::Kind::Float, tch::Device::Cpu)),
        )],
    )
    .unwrap();
    let out = graphbug(&[
        "run",
        graph.to_str().unwrap(),
        "--backward",
        "--tangents",
        tangents.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("`tangent5` is not a tangent of this graph"),
        "{}",
        text(&out.stderr)
    );
}

/// `--compare` must fail whenever the values differ from the file, however wrong the file:
/// the float64 rule cannot be excused by a reference that is far from graphbug's float64 run.
#[test]
fn compare_fails_against_wrong_reference_files() {
    use graphbug::aten::io::{order_tensors, read_tensors, write_tensors};
    use tch::Tensor;
    let tmp = tmpdir("compare");
    let dir = tmp.path();
    let graph = fixture("mlp/forward.py");
    let inputs = fixture("mlp/inputs.npz");
    let good = order_tensors(
        read_tensors(&fixture("mlp/outputs.npz")).unwrap(),
        &["out0".to_string()],
        "outputs",
    )
    .unwrap()
    .remove(0);
    let one_off = good.copy();
    let _ = one_off.get(2).get(5).fill_(0.75);
    let inf_at = good.copy();
    let _ = inf_at.get(7).get(9).fill_(f64::INFINITY);
    let cases: Vec<(&str, Tensor, &str)> = vec![
        (
            "1e6",
            good.full_like(1e6),
            "worst element at [1, 3]: reference 1e6",
        ),
        (
            "zeros",
            good.zeros_like(),
            "the reference itself is not within 0.04",
        ),
        (
            "nan",
            good.full_like(f64::NAN),
            "non-finite values differ at 80 of 80",
        ),
        ("inf", inf_at, "worst element at [7, 9]: reference inf"),
        ("negated", -&good, "worst element"),
        (
            "one element off",
            one_off,
            "worst element at [2, 5]: reference 7.5e-1",
        ),
    ];
    for (name, wrong, want) in cases {
        let file = dir.join(format!("{}.safetensors", name.replace(' ', "_")));
        write_tensors(&file, &[("out0".to_string(), wrong)]).unwrap();
        let out = graphbug(&[
            "run",
            graph.to_str().unwrap(),
            "--inputs",
            inputs.to_str().unwrap(),
            "--compare",
            file.to_str().unwrap(),
        ]);
        let stdout = text(&out.stdout);
        assert_eq!(out.status.code(), Some(1), "{name}: {stdout}");
        assert!(
            stdout.contains("output 0 f32[8, 10]: FAIL"),
            "{name}: {stdout}"
        );
        assert!(stdout.contains(want), "{name}: {stdout}");
        assert!(text(&out.stderr).contains("outputs do not match"), "{name}");
    }
}

/// `functionalize` prints the graph without mutation (batch norm's running statistics and
/// counter become outputs) and names the mutated inputs; the printed graph parses and has
/// no in-place op left.
#[test]
fn functionalize_prints_the_functional_graph_and_its_mutated_inputs() {
    let out = graphbug(&["functionalize", fixture("cnn/forward.py").to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("mutated inputs: 3 (arg8_1, arg9_1, arg10_1)"),
        "{}",
        text(&out.stderr)
    );
    let printed = text(&out.stdout);
    let g = graphbug::ir::parse_graph(&printed).expect("the printed graph parses");
    for node in &g.nodes {
        if let Some(op) = node.op() {
            assert!(!op.is_inplace_by_name(), "{op} left in\n{printed}");
        }
    }
    assert_eq!(g.outputs().len(), 3 + 1);
    let out = graphbug(&["functionalize", "missing.py"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("missing.py"));
}

#[test]
fn partition_splits_pytorch_dynamic_joints_as_functorch_does() {
    let joint = fixture("dynamic/reshape/joint.py");
    let joint = joint.to_str().unwrap();
    let out = graphbug(&[
        "partition",
        joint,
        "--bind",
        "s52=3",
        "--bind",
        "s97=6",
        "--bind",
        "s98=4",
    ]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        stdout.contains("return (mul_6, mul_10, detach, primals_1, primals_2, primals_4, mul, sym_size_int, add_15)"),
        "{stdout}"
    );
    assert!(
        stdout.contains("# saved 7 values, 4*s52 = 12 bytes at the size hints: detach, primals_1"),
        "{stdout}"
    );
    // The min-cut weighs the tensors at the same hints, and saves functorch's bytes.
    let out = graphbug(&[
        "partition",
        joint,
        "--partitioner",
        "min-cut",
        "--bind",
        "s52=3",
        "--bind",
        "s97=6",
        "--bind",
        "s98=4",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("4*s52 = 12 bytes at the size hints"),
        "{}",
        text(&out.stdout)
    );
    // Without the symbols' values the bytes are unknown: an error naming the symbol.
    let out = graphbug(&["partition", joint]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains(
            "value `detach` is f32[s52]: its size needs a hint for s52 (give the symbols' values: --bind s52=N)"
        ),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn traces_find_the_first_diverging_node_across_backends() {
    let gpt4 = fixture("gpt4/forward.py");
    let g = gpt4.to_str().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = |name: &str| dir.path().join(name).to_str().unwrap().to_string();
    let run = |backend: &str, trace: &str, env: &[(&str, &str)], extra: &[&str]| {
        let mut args = vec!["run", g, "--backend", backend, "--trace", trace];
        args.extend_from_slice(extra);
        graphbug_env(&args, env)
    };
    let trace_diff = |a: &str, b: &str| graphbug(&["trace-diff", a, b]);
    // The same run twice: byte-identical traces, and no divergence.
    let (a, a2) = (path("a.jsonl"), path("a2.jsonl"));
    for t in [&a, &a2] {
        let out = run("eager", t, &[], &[]);
        assert!(out.status.success(), "{}", text(&out.stderr));
    }
    assert_eq!(std::fs::read(&a).unwrap(), std::fs::read(&a2).unwrap());
    let out = trace_diff(&a, &a2);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stdout));
    assert!(text(&out.stdout).contains("no divergence"));
    // A wrong gelu: the diff names it, and says its input agreed.
    let b = path("b.jsonl");
    let out = run("fault:accuracy=0.5@node:gelu_2", &b, &[], &[]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let out = trace_diff(&a, &b);
    assert_eq!(out.status.code(), Some(1));
    let said = text(&out.stdout);
    assert!(
        said.contains("first divergence: graph node `gelu_2` (aten::gelu.default)"),
        "{said}"
    );
    assert!(said.contains("input `view_36`: identical"), "{said}");
    // A run that fails: the trace keeps what ran and how it ended; the diff says the runs
    // end differently even where every value agrees.
    let e = path("e.jsonl");
    let out = run("fault:runtime@node:gelu_2", &e, &[], &[]);
    assert_eq!(out.status.code(), Some(1));
    let out = trace_diff(&a, &e);
    assert_eq!(out.status.code(), Some(1));
    let said = text(&out.stdout);
    assert!(
        said.contains("no value diverges, but the runs end differently")
            && said.contains("injected runtime fault at node `gelu_2`"),
        "{said}"
    );
    // An AOT pipeline traces both halves of a training step; a fault injected into its
    // inner compilers (here in the forward only) shows in the forward graph.
    let (c, d) = (path("c.jsonl"), path("d.jsonl"));
    let out = run("aot_eager", &c, &[], &["--backward"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let traced = std::fs::read_to_string(&c).unwrap();
    for part in ["inputs", "forward", "backward", "outputs"] {
        assert!(traced.contains(&format!("\"part\":\"{part}\"")), "{part}");
    }
    assert!(traced.contains("\"node\":\"grad0\""));
    let fault = [("GRAPHBUG_INJECT_FAULT", "accuracy=0.5@aten.gelu.default#2")];
    let out = run("aot_eager", &d, &fault, &["--backward"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let out = trace_diff(&c, &d);
    assert_eq!(out.status.code(), Some(1));
    let said = text(&out.stdout);
    assert!(
        said.contains("first divergence: forward node `gelu_1` (aten::gelu.default)"),
        "{said}"
    );
    // Eager against aot_eager: the graph as given is matched with the AOT forward by node
    // name, op and inputs (placeholders by position), so a clean pipeline agrees with eager
    // and the faulty one is caught at its gelu, named as in the graph given.
    let out = trace_diff(&a, &c);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stdout));
    let said = text(&out.stdout);
    let compared: usize = said
        .strip_prefix("compared ")
        .and_then(|s| s.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    assert!(compared > 300, "{said}");
    assert!(
        said.contains("trace B's `forward` (the AOT pipeline's forward graph)"),
        "{said}"
    );
    let out = trace_diff(&a, &d);
    assert_eq!(out.status.code(), Some(1));
    let said = text(&out.stdout);
    assert!(
        said.contains("first divergence: graph node `gelu_1` (aten::gelu.default)"),
        "{said}"
    );
    assert!(said.contains(": identical"), "{said}");
    // Without a backward the backward graph is empty; the fault still finds the forward's
    // gelu, and one no half has is an error naming both.
    let out = run("aot_eager", &d, &fault, &[]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let out = run(
        "aot_eager",
        &d,
        &[("GRAPHBUG_INJECT_FAULT", "accuracy@aten.erf")],
        &["--backward"],
    );
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert!(
        err.contains("in the forward graph of `aot_eager`")
            && err.contains("in the backward graph of `aot_eager`"),
        "{err}"
    );
    // Bad input: exit 2, naming the file.
    let out = trace_diff(&a, &path("missing.jsonl"));
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("missing.jsonl"));
    let out = graphbug(&["trace-diff", &a, g]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("forward.py:1: not a trace line"));
    // Traces of different graphs share nothing.
    let mlp = fixture("mlp/forward.py");
    let m = path("m.jsonl");
    let out = graphbug(&["run", mlp.to_str().unwrap(), "--trace", &m]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let out = trace_diff(&a, &m);
    assert_eq!(out.status.code(), Some(1));
    let said = text(&out.stdout);
    assert!(
        said.contains("first divergence: inputs node `arg0_1`")
            && said.contains("note: the traces are of different graph files"),
        "{said}"
    );
}

#[test]
fn bisect_finds_the_pass_and_the_application_that_fail() {
    let dir = tempfile::tempdir().unwrap();
    // The first relu's value is multiplied by zero: a fault there is masked; the second
    // relu's reaches the output.
    let graph = dir.path().join("g.py");
    std::fs::write(
        &graph,
        r#"class G(torch.nn.Module):
    def forward(self, x: "f32[8]"):
        relu: "f32[8]" = torch.ops.aten.relu.default(x)
        mul: "f32[8]" = torch.ops.aten.mul.Tensor(relu, 0)
        relu_1: "f32[8]" = torch.ops.aten.relu.default(x)
        add: "f32[8]" = torch.ops.aten.add.Tensor(mul, relu_1)
        return (add,)
"#,
    )
    .unwrap();
    let g = graph.to_str().unwrap();
    let bisect = |backend: &str, check: &str, out: &str, jobs: &str| {
        let out = dir.path().join(out);
        graphbug(&[
            "bisect",
            g,
            "--backend",
            backend,
            "--check",
            check,
            "--out",
            out.to_str().unwrap(),
            "-j",
            jobs,
        ])
    };
    let mut reports = Vec::new();
    for (out, jobs) in [("one", "1"), ("three", "3")] {
        let run = bisect("fault:accuracy@aten.relu.default", "accuracy", out, jobs);
        let said = text(&run.stdout);
        assert!(run.status.success(), "{said}{}", text(&run.stderr));
        assert!(
            said.contains("passes, in order: fault (2 applications)"),
            "{said}"
        );
        assert!(
            said.contains("guilty: application 2 of 2 of `fault`, on node `relu_1`"),
            "{said}"
        );
        let guilty = dir.path().join(out).join("guilty");
        // The repro reproduces, and before/ and after/ differ by the guilty fault.
        let again = graphbug(&["repro", guilty.to_str().unwrap(), "run"]);
        assert_eq!(again.status.code(), Some(1), "{}", text(&again.stdout));
        let read = |p: &str| std::fs::read_to_string(guilty.join(p)).unwrap();
        assert_eq!(read("before/fault.py").matches("graphbug.fault").count(), 1);
        assert_eq!(read("after/fault.py").matches("graphbug.fault").count(), 2);
        let report: serde_json::Value = serde_json::from_str(&read("bisect.json")).unwrap();
        assert_eq!(
            (report["application"].as_u64(), report["node"].as_str()),
            (Some(2), Some("relu_1"))
        );
        reports.push(report["probes"].clone());
    }
    // A backend without passes is one stage, and says so.
    let run = bisect("relu_accuracy_error_TESTING_ONLY", "accuracy", "none", "1");
    let said = text(&run.stdout);
    assert!(run.status.success(), "{said}{}", text(&run.stderr));
    assert!(
        said.contains("declares no passes: it is bisected as one stage"),
        "{said}"
    );
    // With every pass off it still fails: the failure is not in a pass.
    let run = bisect(
        "fault:accuracy@aten.relu.default+relu_accuracy_error_TESTING_ONLY",
        "accuracy",
        "base",
        "1",
    );
    let said = text(&run.stdout);
    assert!(run.status.success(), "{said}{}", text(&run.stderr));
    assert!(
        said.contains("the failure shows with every pass off"),
        "{said}"
    );
    // The wrong --check, a backend that does not fail: clear errors.
    let run = bisect("fault:runtime@aten.relu.default", "accuracy", "wrong", "1");
    assert_eq!(run.status.code(), Some(1));
    assert!(
        text(&run.stderr).contains("fails with a runtime error")
            && text(&run.stderr).contains("not the accuracy failure --check asks for"),
        "{}",
        text(&run.stderr)
    );
    let run = bisect("eager", "runtime", "fine", "1");
    assert_eq!(run.status.code(), Some(1));
    assert!(
        text(&run.stderr).contains("does not fail"),
        "{}",
        text(&run.stderr)
    );
}

#[test]
fn bisect_blames_a_recomputation_for_a_failure_in_the_backward() {
    // relu and sin are cheap to recompute from x: the min-cut partition recomputes them in
    // the backward instead of saving them, and a backward compiler that fails on relu
    // fails only when relu ends up in the backward.
    let dir = tempfile::tempdir().unwrap();
    let graph = dir.path().join("g.py");
    std::fs::write(
        &graph,
        r#"class G(torch.nn.Module):
    def forward(self, x: "f32[8]", w: "f32[8]"):
        relu: "f32[8]" = torch.ops.aten.relu.default(x)
        sin: "f32[8]" = torch.ops.aten.sin.default(relu)
        mul: "f32[8]" = torch.ops.aten.mul.Tensor(sin, w)
        return (mul,)
"#,
    )
    .unwrap();
    let backend = "aot_eager:partitioner=min-cut,bw=relu_runtime_error_TESTING_ONLY";
    let out = dir.path().join("out");
    let run = graphbug(&[
        "bisect",
        graph.to_str().unwrap(),
        "--backend",
        backend,
        "--check",
        "runtime",
        "--out",
        out.to_str().unwrap(),
    ]);
    let said = text(&run.stdout);
    assert!(run.status.success(), "{said}{}", text(&run.stderr));
    assert!(
        said.contains("the failure is in the backward: every probe runs a training step"),
        "{said}"
    );
    assert!(said.contains("first failing pass: `recompute`"), "{said}");
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("guilty/bisect.json")).unwrap())
            .unwrap();
    // Recomputing relu alone changes nothing (only sin reads it, and sin is saved); the
    // decision to recompute sin brings relu into the backward with it.
    assert_eq!(
        (report["pass"].as_str(), report["node"].as_str()),
        (Some("recompute"), Some("sin")),
        "{said}"
    );
    assert_eq!(report["application"].as_u64(), Some(2), "{said}");
    // The case and the guilty repro run the training step, and reproduce.
    for repro in ["case", "guilty"] {
        let manifest = std::fs::read_to_string(out.join(repro).join("manifest.json")).unwrap();
        assert!(manifest.contains("\"training\": true"), "{manifest}");
        let again = graphbug(&["repro", out.join(repro).to_str().unwrap(), "run"]);
        assert_eq!(again.status.code(), Some(1), "{}", text(&again.stdout));
    }
    // With the recomputation refused (relu saved), the training step passes.
    let refused = graphbug(&[
        "repro",
        out.join("case").to_str().unwrap(),
        "run",
        "--backend",
        &format!("limit:recompute=0+{backend}"),
    ]);
    assert_eq!(refused.status.code(), Some(0), "{}", text(&refused.stdout));
}

#[test]
fn pass_limits_bound_each_pass_and_log_what_they_touched() {
    let dir = tempfile::tempdir().unwrap();
    let gpt4 = fixture("gpt4/forward.py");
    let log = dir.path().join("passes.jsonl");
    let graphs = dir.path().join("graphs");
    let run = |backend: &str| {
        let _ = std::fs::remove_file(&log);
        let _ = std::fs::remove_dir_all(&graphs);
        graphbug_env(
            &[
                "run",
                gpt4.to_str().unwrap(),
                "--backend",
                backend,
                "--backward",
            ],
            &[
                ("GRAPHBUG_PASS_LOG", log.to_str().unwrap()),
                ("GRAPHBUG_PASS_GRAPHS", graphs.to_str().unwrap()),
            ],
        )
    };
    let applications = || -> Vec<serde_json::Value> {
        std::fs::read_to_string(&log)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    };
    // Unlimited: every decomposition and recomputation applies, and is logged.
    let out = run("limit:+aot_eager_decomp_partition");
    assert!(out.status.success(), "{}", text(&out.stderr));
    let all = applications();
    let of = |pass: &str| all.iter().filter(|a| a["pass"] == pass).count();
    let (decomposed, recomputed) = (of("decompose"), of("recompute"));
    assert!(
        decomposed > 3 && recomputed > 0,
        "{decomposed} {recomputed}"
    );
    assert!(all.iter().all(|a| a["applied"] == true));
    // Three decompositions, no recomputation: the rest are refused, and the graphs show it.
    let out = run("limit:decompose=3,recompute=0+aot_eager_decomp_partition");
    assert!(out.status.success(), "{}", text(&out.stderr));
    let limited = applications();
    let applied = |pass: &str| {
        limited
            .iter()
            .filter(|a| a["pass"] == pass && a["applied"] == true)
            .count()
    };
    assert_eq!((applied("decompose"), applied("recompute")), (3, 0));
    let backward = std::fs::read_to_string(graphs.join("recompute_backward.py")).unwrap();
    let forward = std::fs::read_to_string(graphs.join("recompute_forward.py")).unwrap();
    assert!(!backward.is_empty() && !forward.is_empty());
    // A pass the backend does not have is an error naming its passes.
    let out = run("limit:inline=2+aot_eager");
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("has no pass `inline`; its passes: recompute"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn partition_models_the_peak_and_bounds_it() {
    let joint = fixture("gpt4/joint.py");
    let j = joint.to_str().unwrap();
    let out = graphbug(&["partition", j, "--partitioner", "min-cut", "--json"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let report: serde_json::Value = serde_json::from_str(&text(&out.stdout)).unwrap();
    let peak = report["modelled_peak"]["peak"].as_u64().unwrap();
    assert!(peak > report["modelled_peak"]["resident"].as_u64().unwrap());
    // The least peak any cut reaches, and a budget of it: the peak stays within.
    let out = graphbug(&[
        "partition",
        j,
        "--partitioner",
        "min-cut",
        "--memory-budget",
        "0.0",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let said = text(&out.stdout);
    let line = said
        .lines()
        .find(|l| l.starts_with("# memory budget:"))
        .unwrap();
    let least: u64 = line
        .split("least of any cut ")
        .nth(1)
        .and_then(|r| r.split(',').next())
        .and_then(|n| n.parse().ok())
        .unwrap();
    assert!(
        line.contains(&format!("modelled peak {least} bytes of at most {least}")),
        "{line}"
    );
    let out = graphbug(&[
        "partition",
        j,
        "--partitioner",
        "min-cut",
        "--memory-budget",
        &(least - 1).to_string(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains(&format!("below the least peak of graphbug's cuts (at saved-bytes budgets from 0 to 1, and the peak search's): {least} bytes")),
        "{}",
        text(&out.stderr)
    );
    // Where no budget's cut reaches the least peak, the peak search's cut is taken, and said.
    let zoo = fixture("zoo_transformer/joint.py");
    let out = graphbug(&[
        "partition",
        zoo.to_str().unwrap(),
        "--partitioner",
        "min-cut",
        "--num-fwd-outputs",
        "1",
        "--memory-budget",
        "0.0",
        "--json",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let report: serde_json::Value = serde_json::from_str(&text(&out.stdout)).unwrap();
    let chosen = &report["memory_budget"];
    assert!(
        chosen["peak_search_moves"].as_u64().unwrap() > 0,
        "{chosen}"
    );
    assert_eq!(
        report["modelled_peak"]["peak"], chosen["least_peak"],
        "{report}"
    );
    // The Pareto curve shows the modelled peak beside the saved bytes.
    let out = graphbug(&["partition", j, "--partitioner", "min-cut", "--pareto", "4"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).starts_with("budget  saved bytes  modelled peak"));
    // aot_eager bounds the peak the same way (`peak=`), and the gradients do not change.
    let cnn = fixture("cnn/forward.py");
    let step = |backend: &str| {
        graphbug(&[
            "run",
            cnn.to_str().unwrap(),
            "--backend",
            backend,
            "--backward",
        ])
    };
    let (plain, bounded) = (step("aot_eager"), step("aot_eager:peak=0.0"));
    assert!(bounded.status.success(), "{}", text(&bounded.stderr));
    assert_eq!(text(&plain.stdout), text(&bounded.stdout));
    let out = step("aot_eager:peak=1000");
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("below the least peak of graphbug's cuts"));
    // Only the min-cut partitioner takes a budget.
    let out = graphbug(&["partition", j, "--memory-budget", "0.5"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("need --partitioner min-cut"));
}

#[test]
fn minify_prints_no_escape_codes_when_stderr_is_piped() {
    // The progress display would show at once on a terminal; piped, it writes nothing,
    // and the log lines come through as they are.
    let dir = tempfile::tempdir().unwrap();
    let out = graphbug_env(
        &[
            "minify",
            fixture("mlp/forward.py").to_str().unwrap(),
            "--inputs",
            fixture("mlp/inputs.npz").to_str().unwrap(),
            "--backend",
            "relu_accuracy_error_TESTING_ONLY",
            "--check",
            "accuracy",
            "--out",
            dir.path().join("out").to_str().unwrap(),
        ],
        &[("GRAPHBUG_PROGRESS_DELAY", "0")],
    );
    let err = text(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        !out.stderr.contains(&0x1b),
        "an escape code in the piped stderr:\n{err:?}"
    );
    assert!(
        err.contains("Started with 12 nodes") && err.contains("Made "),
        "{err}"
    );
    assert!(text(&out.stdout).contains("minified 12 nodes to 1"));
}

/// The example commands of `graphbug <command> --help` for that command.
fn help_examples(command: &str) -> Vec<Vec<String>> {
    let out = graphbug(&[command, "--help"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let help = text(&out.stdout);
    assert!(help.contains("Examples:"), "{help}");
    help.lines()
        .filter_map(|l| l.trim().strip_prefix(&format!("graphbug {command} ")))
        .map(|l| l.split_whitespace().map(str::to_string).collect())
        .collect()
}

#[test]
fn the_help_examples_of_check_and_fmt_run_on_a_fixture() {
    // Their graph file is tests/fixtures/mlp/forward.py.
    let mlp = fixture("mlp/forward.py");
    let on_fixture = |args: &[String]| -> Vec<String> {
        args.iter()
            .map(|a| match a.ends_with(".py") {
                true => mlp.to_str().unwrap().to_string(),
                false => a.clone(),
            })
            .collect()
    };
    let check = help_examples("check");
    let first = on_fixture(&check[0]);
    let mut args = vec!["check".to_string()];
    args.extend(first);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = graphbug(&args);
    assert!(out.status.success(), "{args:?}: {}", text(&out.stderr));
    assert_eq!(
        text(&out.stdout),
        "12 nodes, 9 inputs, 1 outputs\n",
        "{args:?}"
    );
    // `--meta` too.
    let meta = check
        .iter()
        .find(|e| e.iter().any(|a| a == "--meta") && e.len() == 2)
        .expect("an example of check --meta");
    let mut args = vec!["check".to_string()];
    args.extend(on_fixture(meta));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = graphbug(&args);
    assert!(out.status.success(), "{args:?}: {}", text(&out.stderr));
    let fmt = help_examples("fmt");
    let mut args = vec!["fmt".to_string()];
    args.extend(on_fixture(&fmt[0]));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = graphbug(&args);
    assert!(out.status.success(), "{args:?}: {}", text(&out.stderr));
    assert!(
        text(&out.stdout).starts_with("class "),
        "{}",
        text(&out.stdout)
    );
}

#[test]
fn the_aten_gpu_bundle_runs_its_checks_and_fails_on_a_wrong_gradient() {
    // `cargo xtask aten-gpu-bundle` with this binary (linked against the project's
    // libtorch, which its copy finds through the library path), run as on a GPU machine
    // with the CPU standing in for CUDA and the venv's torch for the machine's.
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = tmpdir("aten-bundle");
    let out = dir.path().join("bundle");
    xtask::aten_bundle::make_aten_bundle(
        root,
        Path::new(env!("CARGO_BIN_EXE_graphbug")),
        &[root.join(".libtorch/lib")],
        &out,
    )
    .expect("the bundle is made");
    let run_sh = || {
        Command::new(out.join("run.sh"))
            .env("DEVICE", "cpu")
            .env("PYTHON", root.join(".venv/bin/python"))
            .output()
            .expect("run.sh runs")
    };
    let run = run_sh();
    let (stdout, stderr) = (text(&run.stdout), text(&run.stderr));
    assert!(run.status.success(), "{stdout}{stderr}");
    let checks = 3 * xtask::aten_bundle::MODELS.len() + 3;
    assert!(
        stdout.contains(&format!("{checks}/{checks} checks pass on cpu")),
        "{stdout}"
    );
    assert!(
        stdout.contains("minified to the faulted node addmm_4 alone"),
        "{stdout}"
    );
    // graphbug's modelled peak beyond the primals is its measured one, on every model.
    let peaks: Vec<&str> = stdout.lines().filter(|l| l.contains(" peak ")).collect();
    assert_eq!(peaks.len(), 3, "{stdout}");
    assert!(
        peaks
            .iter()
            .all(|l| l.contains("pass") && l.contains("\"allocator\": null")),
        "{stdout}"
    );
    // A recorded gradient changed: run.sh must say so and fail.
    let train = out.join("mlp/train.cpu.safetensors");
    let mut values = graphbug_files::read(&train).unwrap();
    let at = values
        .iter()
        .position(|(k, _)| k.starts_with("grad"))
        .unwrap();
    let t = &values[at].1;
    values[at].1 =
        graphbug_files::HostTensor::new(t.dtype, t.shape.clone(), vec![0x3f; t.data.len()])
            .unwrap();
    graphbug_files::write(&train, &values).unwrap();
    let run = run_sh();
    let stdout = text(&run.stdout);
    assert!(!run.status.success(), "{stdout}");
    assert!(
        stdout
            .lines()
            .any(|l| l.starts_with("mlp train") && l.contains("FAIL(1)")),
        "{stdout}"
    );
}
