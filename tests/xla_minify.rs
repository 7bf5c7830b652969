//! `graphbug minify` of XLA programs through the binary, on XLA's CPU plugin: faults of
//! every kind minify to the faulted instruction in the input's form (HLO text, HLO proto,
//! StableHLO), with the guarantees aten graphs have (-j byte-identical, --out/--resume,
//! --check-command, crashes and hangs as verdicts); bad input names its culprit. These
//! tests build and pass without libtorch
//! (`cargo test -p graphbug --no-default-features --test xla_minify`).

mod common;

use common::Run;
use std::path::Path;
use std::process::Output;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn hlo(name: &str) -> String {
    s(&root().join("tests/fixtures/xla/hlo").join(name))
}

fn stablehlo(name: &str) -> String {
    s(&root().join("tests/fixtures/xla/stablehlo").join(name))
}

fn s(p: &Path) -> String {
    p.to_str().unwrap().to_string()
}

/// Runs the binary with scratch under `tmp`.
fn graphbug(args: &[&str], tmp: &Path) -> Output {
    common::graphbug().args(args).env("TMPDIR", tmp).run()
}

fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// The `--json` line's counts.
fn counts(stdout: &str) -> serde_json::Value {
    let line = stdout.lines().last().unwrap_or_default();
    serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {stdout}"))
}

/// Minifies `program` under `backend` and `check`, writing `out`; returns stdout.
fn minify(program: &str, backend: &str, check: &str, out: &Path, extra: &[&str]) -> String {
    let tmp = out.parent().unwrap();
    let mut args = vec![
        "minify",
        program,
        "--backend",
        backend,
        "--check",
        check,
        "--json",
    ];
    let out_s = s(out);
    args.extend(["--out", &out_s]);
    args.extend(extra);
    let o = graphbug(&args, tmp);
    let (stdout, stderr) = text(&o);
    assert!(o.status.success(), "{args:?}\n{stdout}\n{stderr}");
    stdout
}

#[test]
fn faults_minify_to_their_instruction_in_the_inputs_form() {
    let tmp = tempfile::tempdir().unwrap();
    let cases = [
        (
            hlo("transformer.hlo"),
            "fault:accuracy@node:dot_general.12+pjrt:cpu",
            "accuracy",
            "program.hlo",
            "ROOT dot_general.12 = f32[2,2,4,4]{3,2,1,0} dot(div.17, transpose.6)",
        ),
        (
            hlo("transformer.pb"),
            "fault:runtime@node:dot_general.12+pjrt:cpu",
            "runtime",
            "program.hlo.pb",
            "ROOT dot_general.12",
        ),
        (
            stablehlo("mlp.mlir"),
            "fault:compile@dot_general+pjrt:cpu",
            "compile",
            "program.mlir",
            "%0 = stablehlo.dot_general %arg0, %cst",
        ),
    ];
    for (k, (program, backend, check, file, says)) in cases.into_iter().enumerate() {
        let out = tmp.path().join(format!("out{k}"));
        let stdout = minify(&program, backend, check, &out, &[]);
        assert!(stdout.contains(says), "{program}: {stdout}");
        assert_eq!(counts(&stdout)["end_nodes"], 1, "{program}: {stdout}");
        // The result is written in the input's form, with its inputs, and reproduces.
        let minified = out.join("minified").join(file);
        assert!(minified.is_file(), "{}", minified.display());
        let inputs = s(&out.join("minified/inputs.safetensors"));
        let run = graphbug(
            &[
                "run",
                &s(&minified),
                "--inputs",
                &inputs,
                "--backend",
                backend,
            ],
            tmp.path(),
        );
        let (_, stderr) = text(&run);
        assert!(!run.status.success() || check == "accuracy", "{stderr}");
        let fine = graphbug(&["run", &s(&minified), "--inputs", &inputs], tmp.path());
        assert!(fine.status.success(), "{:?}", text(&fine));
        // The original is kept as given.
        assert_eq!(
            std::fs::read(out.join("original").join(file)).unwrap(),
            std::fs::read(&program).unwrap()
        );
    }
}

#[test]
fn jobs_and_resume_end_byte_for_byte_where_one_worker_does() {
    let tmp = tempfile::tempdir().unwrap();
    let program = hlo("transformer.hlo");
    let backend = "fault:accuracy@node:dot_general.12+pjrt:cpu";
    let one = tmp.path().join("one");
    let first = minify(&program, backend, "accuracy", &one, &["-j", "1"]);
    let three = tmp.path().join("three");
    let second = minify(&program, backend, "accuracy", &three, &["-j", "3"]);
    let resumed = tmp.path().join("resumed");
    minify(
        &program,
        backend,
        "accuracy",
        &resumed,
        &["--max-queries", "6"],
    );
    let third = minify(&program, backend, "accuracy", &resumed, &["--resume"]);
    // Workers started through a launcher get the program and inputs on standard input.
    let launched = tmp.path().join("launched");
    let fourth = minify(
        &program,
        backend,
        "accuracy",
        &launched,
        &["-j", "2", "--worker-launcher", "env {cmd}"],
    );
    let program_text = |o: &str| o.split("minified ").next().unwrap().to_string();
    assert_eq!(program_text(&first), program_text(&fourth));
    assert_eq!(program_text(&first), program_text(&second));
    assert_eq!(program_text(&first), program_text(&third));
    assert_eq!(counts(&first)["queries"], counts(&second)["queries"]);
    for file in [
        "minified/program.hlo",
        "minified/inputs.safetensors",
        "state.json",
    ] {
        let read = |d: &Path| std::fs::read(d.join(file)).unwrap();
        let (a, b, c) = (read(&one), read(&three), read(&resumed));
        if file == "state.json" {
            // Counts differ in time only.
            let kept =
                |b: &[u8]| serde_json::from_slice::<serde_json::Value>(b).unwrap()["kept"].clone();
            assert_eq!(kept(&a), kept(&b));
            assert_eq!(kept(&a), kept(&c));
        } else {
            assert!(a == b && a == c, "{file} differs");
        }
    }
}

#[test]
fn an_out_directory_of_another_program_is_refused_and_kept() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    minify(
        &hlo("transformer.hlo"),
        "fault:runtime@node:dot_general.12+pjrt:cpu",
        "runtime",
        &out,
        &[],
    );
    let before = std::fs::read(out.join("minified/program.hlo")).unwrap();
    for (program, op) in [
        (stablehlo("mlp.mlir"), "dot_general"),
        (hlo("transformer.pb"), "dot"),
    ] {
        let backend = format!("fault:runtime@{op}+pjrt:cpu");
        let o = graphbug(
            &[
                "minify",
                &program,
                "--backend",
                &backend,
                "--check",
                "runtime",
                "--out",
                &s(&out),
            ],
            tmp.path(),
        );
        let (_, stderr) = text(&o);
        assert_eq!(o.status.code(), Some(1), "{program}: {stderr}");
        assert!(
            stderr.contains("holds the minification of another program"),
            "{program}: {stderr}"
        );
    }
    assert_eq!(
        std::fs::read(out.join("minified/program.hlo")).unwrap(),
        before
    );
    assert!(out.join("original/program.hlo").is_file());
}

#[test]
fn crashes_and_hangs_of_the_plugin_are_verdicts() {
    let tmp = tempfile::tempdir().unwrap();
    let program = stablehlo("mlp.mlir");
    for (k, (backend, kind)) in [
        ("fault:crash@dot_general+pjrt:cpu", "runtime crash"),
        ("fault:hang@dot_general+pjrt:cpu", "runtime timeout"),
    ]
    .into_iter()
    .enumerate()
    {
        let out = tmp.path().join(format!("out{k}"));
        let stdout = minify(&program, backend, "runtime", &out, &["--timeout", "2"]);
        assert!(stdout.contains(&format!("failure: {kind}")), "{stdout}");
        assert_eq!(counts(&stdout)["end_nodes"], 1, "{stdout}");
    }
    // Nothing is left in the scratch root.
    let scratch = tmp.path().join("graphbug-scratch");
    let left: Vec<_> = std::fs::read_dir(&scratch)
        .map(|d| d.filter_map(|e| e.ok()).map(|e| e.file_name()).collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn a_check_command_gets_each_candidate_in_the_inputs_form() {
    let tmp = tempfile::tempdir().unwrap();
    // Interesting: a candidate still holding the batched dot with contracting dims {2}.
    let cmd = r#"f() { test -f "$1/inputs.safetensors" && ! grep -q "rhs_contracting_dims={2}" "$1/program.hlo"; }; f"#;
    let o = graphbug(
        &[
            "minify",
            &hlo("transformer.hlo"),
            "--check-command",
            cmd,
            "--json",
        ],
        tmp.path(),
    );
    let (stdout, stderr) = text(&o);
    assert!(o.status.success(), "{stderr}");
    assert!(stdout.contains("ROOT dot_general.12"), "{stdout}");
    assert_eq!(counts(&stdout)["end_nodes"], 1);
    // Its operands became constants of their recorded values: the bug survived that.
    assert!(
        stdout.contains(" constant(") && !stdout.contains(" parameter("),
        "{stdout}"
    );
    assert!(stderr.contains("inputs constants ("), "{stderr}");
    // A bug that needs parameters (a compiler's constant folding would hide it) keeps them.
    let cmd = r#"f() { ! { grep -q "rhs_contracting_dims={2}" "$1/program.hlo" && grep -q " parameter(" "$1/program.hlo"; }; }; f"#;
    let o = graphbug(
        &[
            "minify",
            &hlo("transformer.hlo"),
            "--check-command",
            cmd,
            "--json",
        ],
        tmp.path(),
    );
    let (stdout, stderr) = text(&o);
    assert!(o.status.success(), "{stderr}");
    assert_eq!(counts(&stdout)["end_nodes"], 1);
    assert!(
        stdout.contains(" parameter(") && !stdout.contains(" constant("),
        "{stdout}"
    );
    assert!(
        stderr.contains("FAIL: The failure needs them as parameters"),
        "{stderr}"
    );
    // A structural check runs nothing at all.
    let o = graphbug(
        &[
            "minify",
            &hlo("transformer.hlo"),
            "--check",
            "contains:hlo.dot,hlo.exponential",
            "--json",
        ],
        tmp.path(),
    );
    let (stdout, stderr) = text(&o);
    assert!(o.status.success(), "{stderr}");
    assert_eq!(counts(&stdout)["end_nodes"], 2, "{stdout}");
}

#[test]
fn bad_minify_input_names_the_culprit() {
    let tmp = tempfile::tempdir().unwrap();
    let program = hlo("transformer.hlo");
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec![],
            "say what fails: --check compile|runtime|accuracy|contains:OPS or --check-command CMD",
        ),
        (
            vec!["--check", "accuracy"],
            "--check accuracy needs --backend pjrt:<plugin>",
        ),
        (
            vec!["--check", "accuracy", "--backend", "eager"],
            "`eager` is not a backend for XLA programs",
        ),
        (
            vec!["--check", "wrong", "--backend", "pjrt:cpu"],
            "unknown check `wrong`",
        ),
        (
            vec![
                "--check",
                "runtime",
                "--backend",
                "fault:runtime@node:nosuch.1+pjrt:cpu",
            ],
            "nosuch.1",
        ),
        (
            vec!["--check", "runtime", "--backend", "pjrt:nosuch"],
            "nosuch",
        ),
        (
            vec![
                "--check",
                "runtime",
                "--backend",
                "pjrt:cpu",
                "--device",
                "cuda",
            ],
            "these options are for aten graphs: --device",
        ),
        (
            vec!["--check", "runtime", "--backend", "pjrt:cpu"],
            "does not fail",
        ),
        (
            vec![
                "--check",
                "runtime",
                "--backend",
                "pjrt:cpu",
                "--reference-backend",
                "fault:nan@add+pjrt:cpu",
            ],
            "the reference runs without faults",
        ),
    ];
    for (extra, says) in cases {
        let mut args = vec!["minify", program.as_str()];
        args.extend(extra.iter().copied());
        let o = graphbug(&args, tmp.path());
        let (_, stderr) = text(&o);
        // A value --check cannot take is a usage error, as clap reports every bad value.
        let code = if says.starts_with("unknown check") {
            2
        } else {
            1
        };
        assert_eq!(o.status.code(), Some(code), "{args:?}: {stderr}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
    }
}

#[test]
fn a_bug_inside_a_called_computation_is_minified_there() {
    // The loop of a JAX scan: `tanh` is in a computation its body calls. The entry shrinks
    // to the while; its body alone (on the loop state it starts with) keeps the call; the
    // called computation alone shrinks to `tanh`. The condition, tried first, does not fail
    // and leaves nothing behind.
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let cmd = r#"f() { ! grep -q " tanh(" "$1/program.hlo"; }; f"#;
    let o = graphbug(
        &[
            "minify",
            &hlo("scan.hlo"),
            "--check-command",
            cmd,
            "--out",
            &out.display().to_string(),
        ],
        tmp.path(),
    );
    let (stdout, stderr) = text(&o);
    assert!(o.status.success(), "{stderr}");
    assert!(
        stderr.contains(
            "Strategy: Inside `region_0.5` (called by `while.6`): the computation alone, on the values it received\n"
        ),
        "{stderr}"
    );
    let last = stdout.rsplit("HloModule").next().unwrap();
    assert!(
        last.contains("ENTRY closed_call.3") && last.contains("ROOT tanh.1 = "),
        "{stdout}"
    );
    let deepest = out.join("inside-region_0.5/inside-closed_call.3/minified/program.hlo");
    let program = std::fs::read_to_string(&deepest).unwrap();
    let instructions = program
        .lines()
        .filter(|l| l.contains(" = ") && !l.contains(" constant("))
        .count();
    assert_eq!(instructions, 1, "{program}");
    assert!(!out.join("inside-region_2.6").exists());

    // StableHLO: a function main calls (`call @_take`), on the operands main passed it.
    let bart = root().join("tests/fixtures/xla/bart");
    stablehlo_minifies_inside(
        &bart.join("decoder.mlir"),
        &[
            "--inputs",
            &bart.join("inputs.safetensors").display().to_string(),
        ],
        r#"f() { ! grep -q "compare  *GE" "$1/program.mlir"; }; f"#,
        ("_take", "3"),
        "stablehlo.compare GE",
        tmp.path(),
    );
    // StableHLO: the body of a `stablehlo.while` (a region of the op), on the loop's first
    // state; the condition, tried first, does not fail.
    stablehlo_minifies_inside(
        &root().join("tests/fixtures/xla/stablehlo/train.mlir"),
        &[],
        r#"f() { ! grep -qE "stablehlo.subtract .* : tensor<i64>" "$1/program.mlir"; }; f"#,
        ("23:9.body", "23:9"),
        "stablehlo.subtract",
        tmp.path(),
    );
    // StableHLO: regions of other ops, in MLIR's generic form (a case's second branch, a
    // scatter's update computation, a sort's comparator) and a variadic reduce's
    // `reducer(...)` body; their block arguments get seeded random values.
    let regions = root().join("tests/fixtures/xla/stablehlo/regions.mlir");
    for (cmd, inside, op) in [
        (
            r#"f() { ! grep -q "stablehlo.sine" "$1/program.mlir"; }; f"#,
            ("2.region1", "2"),
            "stablehlo.sine",
        ),
        (
            r#"f() { ! grep -qE "stablehlo.add .* : tensor<f32>$" "$1/program.mlir"; }; f"#,
            ("11.region0", "11"),
            "stablehlo.add",
        ),
        (
            r#"f() { ! grep -q "stablehlo.or" "$1/program.mlir"; }; f"#,
            ("1:2.region0", "1:2"),
            "stablehlo.or",
        ),
        (
            r#"f() { ! grep -q "compare  *LT.*TOTALORDER" "$1/program.mlir"; }; f"#,
            ("0.region0", "0"),
            "stablehlo.compare LT",
        ),
    ] {
        stablehlo_minifies_inside(&regions, &[], cmd, inside, op, tmp.path());
    }
}

/// Minifies the StableHLO `program` (with `extra` arguments) for `cmd`, and checks that the
/// search went inside the computation `inside` (called by `caller`) and ended at one op
/// that is `op`.
fn stablehlo_minifies_inside(
    program: &Path,
    extra: &[&str],
    cmd: &str,
    (inside, caller): (&str, &str),
    op: &str,
    tmp: &Path,
) {
    let program = program.display().to_string();
    let mut args = vec!["minify", &program, "--check-command", cmd];
    args.extend_from_slice(extra);
    let o = graphbug(&args, tmp);
    let (stdout, stderr) = text(&o);
    assert!(o.status.success(), "{stderr}");
    // On the values it received, or (a region's block arguments) seeded random ones.
    let strategy = format!(
        "Strategy: Inside `{inside}` (called by `{caller}`): the computation alone, on the values it received"
    );
    assert!(stderr.contains(&strategy), "{stderr}");
    let last = stdout.rsplit("module @").next().unwrap();
    let ops: Vec<&str> = last
        .lines()
        .filter(|l| l.contains(" = stablehlo.") && !l.contains("stablehlo.constant"))
        .collect();
    assert_eq!(ops.len(), 1, "{stdout}");
    assert!(ops[0].contains(op), "{stdout}");
}

#[test]
fn minify_prints_no_escape_codes_when_stderr_is_piped() {
    // The progress display would show at once on a terminal; piped, it writes nothing,
    // and the log lines come through as they are.
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let o = common::graphbug()
        .args([
            "minify",
            &hlo("transformer.hlo"),
            "--backend",
            "fault:accuracy@node:dot_general.12+pjrt:cpu",
            "--check",
            "accuracy",
            "--out",
            &s(&out),
        ])
        .env("TMPDIR", tmp.path())
        .env("GRAPHBUG_PROGRESS_DELAY", "0")
        .run();
    let (stdout, stderr) = text(&o);
    assert!(o.status.success(), "{stdout}\n{stderr}");
    assert!(
        !o.stderr.contains(&0x1b),
        "an escape code in the piped stderr:\n{stderr:?}"
    );
    assert!(
        stderr.contains("Started with") && stderr.contains("Made "),
        "{stderr}"
    );
}

/// A fault can name an instruction of any computation, not only the entry's: a `tanh` in a
/// computation a while body calls, a reducer's `add`, the while's condition, a scatter's
/// combiner. The minifier keeps the instruction that calls it, goes inside, and ends at the
/// faulted instruction alone on the values it receives (recorded where the run recorded
/// them). A name no computation has is still an error naming the closest ones.
#[test]
fn a_fault_inside_a_called_computation_is_minified_to_its_instruction() {
    let tmp = tempfile::tempdir().unwrap();
    for (program, target, check, deepest) in [
        (
            "scan.hlo",
            "tanh.1",
            "runtime",
            "inside-region_0.5/inside-closed_call.3",
        ),
        (
            "scan.hlo",
            "tanh.1",
            "accuracy",
            "inside-region_0.5/inside-closed_call.3",
        ),
        (
            "scan.hlo",
            "reduce_sum.5",
            "accuracy",
            "inside-region_0.5/inside-closed_call.3/inside-region_1.2",
        ),
        // The condition's output is a pred: it counts (strict accuracy) in there.
        ("scan.hlo", "lt.1", "accuracy", "inside-region_2.6"),
        (
            "gather_scatter_sort.hlo",
            "add.3",
            "accuracy",
            "inside-region_2.5",
        ),
    ] {
        let what = format!("{program} {target} {check}");
        let out = tmp.path().join(format!("{program}-{target}-{check}"));
        let backend = format!("fault:{check}@node:{target}+pjrt:cpu");
        let o = graphbug(
            &[
                "minify",
                &hlo(program),
                "--backend",
                &backend,
                "--check",
                check,
                "--out",
                &out.display().to_string(),
            ],
            tmp.path(),
        );
        let (_, stderr) = text(&o);
        assert!(o.status.success(), "{what}: {stderr}");
        let file = out.join(deepest).join("minified/program.hlo");
        let minified = std::fs::read_to_string(&file)
            .unwrap_or_else(|e| panic!("{what}: {}: {e}\n{stderr}", file.display()));
        let instructions: Vec<&str> = minified
            .lines()
            .skip_while(|l| !l.starts_with("ENTRY"))
            .filter(|l| {
                l.contains(" = ") && !l.contains(" constant(") && !l.contains(" parameter(")
            })
            .collect();
        assert_eq!(instructions.len(), 1, "{what}: {minified}");
        assert!(
            instructions[0].contains(&format!("ROOT {target} = ")),
            "{what}: {minified}"
        );
    }
    let o = graphbug(
        &[
            "minify",
            &hlo("scan.hlo"),
            "--backend",
            "fault:runtime@node:tanh.9+pjrt:cpu",
            "--check",
            "runtime",
        ],
        tmp.path(),
    );
    let (_, stderr) = text(&o);
    assert_eq!(o.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("`fault:runtime@node:tanh.9` names no node") && stderr.contains("`tanh.1`"),
        "{stderr}"
    );
}

/// A bug a loop body shows only at a later iteration: the body alone does not fail on the
/// loop's first state, so the search follows the states the loop goes through on the
/// reference plugin and minifies the body on the first one where it fails (here the
/// check fails once the body's iteration counter is 3), keeping one state at a time.
#[test]
fn a_bug_in_a_later_iteration_is_minified_on_the_state_of_that_iteration() {
    let tmp = tempfile::tempdir().unwrap();
    let check = tmp.path().join("check.py");
    // Interesting: the whole program while it computes tanh; a part of it only while an
    // s64 scalar input (the loop's counter) holds 3.
    std::fs::write(
        &check,
        r#"import json, struct, sys, os
d = sys.argv[1]
prog = open(os.path.join(d, "program.hlo")).read()
if " tanh(" not in prog:
    sys.exit(0)
if "ENTRY main.7" in prog:
    sys.exit(1)
path = os.path.join(d, "inputs.safetensors")
if not os.path.exists(path):
    sys.exit(0)
raw = open(path, "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
for k, v in json.loads(raw[8:8 + n]).items():
    if k != "__metadata__" and v["dtype"] == "I64" and v["shape"] == []:
        a, b = v["data_offsets"]
        if struct.unpack("<q", raw[8 + n + a:8 + n + b])[0] == 3:
            sys.exit(1)
sys.exit(0)
"#,
    )
    .unwrap();
    let out = tmp.path().join("out");
    let cmd = format!(
        "{} {}",
        root().join(".venv/bin/python").display(),
        check.display()
    );
    let o = graphbug(
        &[
            "minify",
            &hlo("scan.hlo"),
            "--check-command",
            &cmd,
            "--out",
            &out.display().to_string(),
        ],
        tmp.path(),
    );
    let (_, stderr) = text(&o);
    assert!(o.status.success(), "{stderr}");
    for said in [
        "Strategy: Inside `region_0.5` (called by `while.6`): the computation alone, on the values it received\n",
        "Strategy: Inside `region_0.5` at later iterations",
        "Strategy: Inside `region_0.5` at iteration 3: the body alone",
    ] {
        assert!(stderr.contains(said), "{said}: {stderr}");
    }
    assert!(!stderr.contains("at iteration 4"), "{stderr}");
    let body = std::fs::read_to_string(out.join("inside-region_0.5/minified/program.hlo")).unwrap();
    assert!(body.contains("ENTRY region_0.5"), "{body}");
    // The loop ends after 5 iterations: a bug it never shows ends the search there.
    let never = tmp.path().join("never.py");
    std::fs::write(
        &never,
        std::fs::read_to_string(&check)
            .unwrap()
            .replace("== 3:", "== 7:"),
    )
    .unwrap();
    let cmd = format!(
        "{} {}",
        root().join(".venv/bin/python").display(),
        never.display()
    );
    let o = graphbug(
        &["minify", &hlo("scan.hlo"), "--check-command", &cmd],
        tmp.path(),
    );
    let (_, stderr) = text(&o);
    assert!(o.status.success(), "{stderr}");
    assert!(
        stderr.contains(
            "FAIL: the loop ends after 5 iterations; the body fails alone on none of its states"
        ),
        "{stderr}"
    );
    // StableHLO: a `stablehlo.while`'s `do` region, whose other parameters (the values of
    // main it reads) keep what they received while its loop-carried values go on.
    let mlir = tmp.path().join("check_mlir.py");
    std::fs::write(
        &mlir,
        std::fs::read_to_string(&check)
            .unwrap()
            .replace("program.hlo", "program.mlir")
            .replace("\" tanh(\" not in prog", "\"stablehlo.tanh\" not in prog")
            .replace("\"ENTRY main.7\" in prog", "\"stablehlo.while\" in prog"),
    )
    .unwrap();
    let cmd = format!(
        "{} {}",
        root().join(".venv/bin/python").display(),
        mlir.display()
    );
    let train = root().join("tests/fixtures/xla/stablehlo/train.mlir");
    let o = graphbug(
        &[
            "minify",
            &train.display().to_string(),
            "--check-command",
            &cmd,
        ],
        tmp.path(),
    );
    let (stdout, stderr) = text(&o);
    assert!(o.status.success(), "{stderr}");
    assert!(
        stderr.contains("Strategy: Inside `6:9.body` at iteration 3: the body alone"),
        "{stderr}"
    );
    assert!(!stderr.contains("at iteration 4"), "{stderr}");
    let last = stdout.rsplit("module @").next().unwrap();
    assert!(last.contains("stablehlo.tanh"), "{stdout}");
}

fn sharded(name: &str) -> String {
    s(&root().join("tests/fixtures/xla/sharded").join(name))
}

/// A sharded fixture's `io.npz` split into its inputs (`arg<k>`) and JAX's outputs
/// (`out<k>`), written under `dir`.
fn sharded_io(name: &str, dir: &Path) -> (String, String) {
    let all = graphbug::files::read(Path::new(&sharded(&format!("{name}.io.npz")))).unwrap();
    let (args, outs): (Vec<_>, Vec<_>) = all.into_iter().partition(|(k, _)| k.starts_with("arg"));
    let (inputs, outputs) = (
        dir.join(format!("{name}.in.npz")),
        dir.join(format!("{name}.out.npz")),
    );
    graphbug::files::write(&inputs, &args).unwrap();
    graphbug::files::write(&outputs, &outs).unwrap();
    (s(&inputs), s(&outputs))
}

/// The instructions of a minified program's entry, constants and parameters aside.
fn entry_instructions(program: &str) -> Vec<String> {
    program
        .lines()
        .skip_while(|l| !l.starts_with("ENTRY"))
        .filter(|l| l.contains(" = ") && !l.contains(" constant(") && !l.contains(" parameter("))
        .map(str::to_string)
        .collect()
}

/// A training step over 4 CPU devices, data and tensor parallel (a 2 x 2 mesh), as JAX
/// lowers it with shardings (XLA inserts the collectives) and with shard_map (its
/// collectives written out): it runs on 4 devices and matches JAX in every form, a wrong
/// result is caught, and a fault minifies to its instruction, keeping a collective only
/// where the fault is on it.
#[test]
fn a_sharded_training_step_runs_on_four_devices_and_minifies_to_its_fault() {
    let tmp = tempfile::tempdir().unwrap();
    // JAX's (Shardy) and PyTorch/XLA's SPMD (GSPMD, device lists written out), each run
    // as it is and with a dot computed wrong on every device, which fails the comparison
    // (a shard_map's StableHLO keeps its body in one op, which no fault names).
    let shardy = ", partitioned by Shardy";
    for (program, partitioner, fault) in [
        ("train_step.hlo", shardy, Some("fault:accuracy@dot#1")),
        (
            "train_step.mlir",
            shardy,
            Some("fault:accuracy@stablehlo.dot_general#1"),
        ),
        (
            "shard_map.hlo",
            shardy,
            Some("fault:accuracy@node:dot_general.6"),
        ),
        ("shard_map.mlir", shardy, None),
        (
            "torch_xla_spmd.hlo",
            "; inputs",
            Some("fault:accuracy@dot#2"),
        ),
    ] {
        let name = program.split('.').next().unwrap();
        let (inputs, outputs) = sharded_io(name, tmp.path());
        let run = [
            "run",
            &sharded(program),
            "--inputs",
            &inputs,
            "--compare",
            &outputs,
        ];
        let o = graphbug(&run, tmp.path());
        let (stdout, stderr) = text(&o);
        assert!(o.status.success(), "{program}: {stdout}\n{stderr}");
        assert!(stdout.contains("outputs match"), "{program}: {stdout}");
        let devices = format!("runs on 4 devices (1 replica x 4 partitions){partitioner}");
        assert!(stderr.contains(&devices), "{program}: {stderr}");
        assert!(
            !stderr.contains("float64 reference run failed"),
            "{program}: {stderr}"
        );
        let Some(fault) = fault else { continue };
        let o = graphbug(&[&run[..], &["--backend", fault]].concat(), tmp.path());
        let (stdout, stderr) = text(&o);
        assert_eq!(o.status.code(), Some(1), "{program}: {stdout}\n{stderr}");
        assert!(
            stdout.contains("outputs differ (first") && stderr.contains("outputs do not match"),
            "{program}: {stdout}\n{stderr}"
        );
    }
    // jax.jit with shardings, PyTorch/XLA's SPMD: the faulted dot alone.
    for (name, target) in [("train_step", "dot_general.6"), ("torch_xla_spmd", "dot.9")] {
        let (inputs, _) = sharded_io(name, tmp.path());
        let out = tmp.path().join(format!("{name}-minified"));
        let stdout = minify(
            &sharded(&format!("{name}.hlo")),
            &format!("fault:accuracy@node:{target}"),
            "accuracy",
            &out,
            &["--inputs", &inputs],
        );
        assert_eq!(counts(&stdout)["end_nodes"], 1, "{name}: {stdout}");
        let minified = std::fs::read_to_string(out.join("minified/program.hlo")).unwrap();
        let kept = entry_instructions(&minified);
        let root = kept.first().map(|l| l.replace('%', "")).unwrap_or_default();
        assert!(
            kept.len() == 1 && root.contains(&format!("ROOT {target} = ")),
            "{name}: {minified}"
        );
    }
    let (inputs, _) = sharded_io("train_step", tmp.path());
    // shard_map: the faulted instruction inside the manual computation, alone; an
    // all-reduce stays only where the fault is on it.
    for (target, keeps_collective) in [("dot_general.6", false), ("psum_invariant.30", true)] {
        let out = tmp.path().join(format!("shard_map-{target}"));
        minify(
            &sharded("shard_map.hlo"),
            &format!("fault:accuracy@node:{target}"),
            "accuracy",
            &out,
            &["--inputs", &inputs],
        );
        let file = out.join("inside-xla.sdy.manual_computation_body.8/minified/program.hlo");
        let minified = std::fs::read_to_string(&file)
            .unwrap_or_else(|e| panic!("{target}: {}: {e}", file.display()));
        let kept = entry_instructions(&minified);
        assert!(
            kept.len() == 1 && kept[0].contains(&format!("ROOT {target} = ")),
            "{target}: {minified}"
        );
        assert_eq!(
            minified.contains("all-reduce("),
            keeps_collective,
            "{target}: {minified}"
        );
        if keeps_collective {
            assert!(
                minified.contains("replica_groups={{0,1},{2,3}}"),
                "{minified}"
            );
        }
    }
}
