//! `graphbug bisect` of XLA programs through the binary, on XLA's CPU plugin: the passes
//! the plugin runs, read from its dumps; the guilty pass (or set), with the module before
//! and after it and a workaround checked by one more run; passes the program needs kept
//! on; the same answer for any -j; a failure no pass causes said so; `repro --bisect`;
//! bad input named; kill -9 leaves no child and no dump behind. These tests build and pass
//! without libtorch (`cargo test -p graphbug --no-default-features --test xla_bisect`).

mod common;

use common::{command, entries, fixture, said, survivors, Run, LIMIT};
use std::path::Path;
use std::time::{Duration, Instant};

fn s(p: &Path) -> String {
    p.to_str().unwrap().to_string()
}

fn bisect(args: &[&str], tmp: &Path) -> std::process::Output {
    let mut a = vec!["bisect"];
    a.extend_from_slice(args);
    command(&a, &[], tmp).run()
}

fn report(out: &Path) -> serde_json::Value {
    let p = out.join("bisect.json");
    serde_json::from_slice(&std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display())))
        .unwrap()
}

/// Bisects the fixture `program` under `backend` for `contains:fusion` into `tmp/<out>`:
/// what it said (after checking it succeeded), and its report.
fn bisect_fusions(
    program: &str,
    backend: &str,
    out: &str,
    extra: &[&str],
    tmp: &Path,
) -> (String, serde_json::Value) {
    let program = s(&fixture(program));
    let out = s(&tmp.join(out));
    let mut args = vec![
        program.as_str(),
        "--backend",
        backend,
        "--check",
        "contains:fusion",
        "--out",
        &out,
    ];
    args.extend_from_slice(extra);
    let o = bisect(&args, tmp);
    let text = said(&o);
    assert!(o.status.success(), "{text}");
    (text, report(Path::new(&out)))
}

fn names(v: &serde_json::Value) -> Vec<String> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_str().unwrap().to_string())
        .collect()
}

/// One guilty pass: the optimized program has a fusion only where `fusion` runs (the
/// other pass that fuses is off in the backend itself). Compiles within 2 x
/// log2(invocations), the same answer with -j 3.
#[test]
fn one_guilty_pass_in_about_log2_compiles_for_any_jobs() {
    let tmp = tempfile::tempdir().unwrap();
    let backend = "pjrt:cpu?xla_disable_hlo_passes=fusion-wrapper";
    let mut reports = Vec::new();
    for jobs in ["1", "3"] {
        let out = tmp.path().join(format!("out{jobs}"));
        let (text, r) = bisect_fusions(
            "xla/bisect/elementwise.hlo",
            backend,
            &format!("out{jobs}"),
            &["-j", jobs],
            tmp.path(),
        );
        assert!(
            text.contains("guilty: `fusion` (turning it off makes the failure go away)"),
            "{text}"
        );
        assert!(
            text.contains("XLA_FLAGS=--xla_disable_hlo_passes=fusion\n"),
            "{text}"
        );
        assert!(
            text.contains(
                "checked by one more run through the compile option: the failure is gone"
            ),
            "{text}"
        );
        assert_eq!(names(&r["guilty"]), ["fusion"]);
        assert_eq!(r["with"], serde_json::json!([]));
        assert_eq!(r["needed"], serde_json::json!([]));
        assert_eq!(r["workaround"]["checked"], "gone");
        let invocations = r["invocations"].as_u64().unwrap() as f64;
        assert!(invocations > 100.0, "{r}");
        let serial = r["compiles"].as_u64().unwrap() - r["speculative"].as_u64().unwrap();
        assert!(
            serial as f64 <= 2.0 * invocations.log2(),
            "{serial} compiles for {invocations} invocations"
        );
        // The module before and after the pass, and the diff, as the plugin dumped them.
        let run = &r["runs"][0]["written"][0];
        let guilty = out.join("guilty");
        let after = std::fs::read_to_string(guilty.join(run["after"].as_str().unwrap())).unwrap();
        let before = std::fs::read_to_string(guilty.join(run["before"].as_str().unwrap())).unwrap();
        assert!(after.contains(" fusion(") && !before.contains(" fusion("));
        let diff = std::fs::read_to_string(guilty.join(run["diff"].as_str().unwrap())).unwrap();
        assert!(
            diff.lines()
                .any(|l| l.starts_with('+') && l.contains(" fusion(")),
            "{diff}"
        );
        // Every invocation, listed in the order it ran.
        let listing = std::fs::read_to_string(out.join("passes.txt")).unwrap();
        assert_eq!(listing.lines().count() as f64, invocations);
        assert!(listing.contains("/fusion *\n"), "{listing}");
        // The summary the report shows is what was said.
        let summary = std::fs::read_to_string(out.join("summary.txt")).unwrap();
        assert!(summary.contains("guilty: `fusion`"), "{summary}");
        reports.push(r);
    }
    // -j 3 runs trials ahead of the search; the answer and the trials that count are the
    // serial search's.
    let serial = |r: &serde_json::Value| {
        r["compiles"].as_u64().unwrap() - r["speculative"].as_u64().unwrap()
    };
    assert_eq!(reports[0]["guilty"], reports[1]["guilty"]);
    assert_eq!(serial(&reports[0]), serial(&reports[1]));
    assert_eq!(
        entries(&tmp.path().join("graphbug-scratch")),
        Vec::<String>::new()
    );
}

/// In the transformer block's 178 invocations, `layout-assignment` is needed by the
/// program (its batched dots: without it the plugin refuses to compile): the search keeps
/// it on, says so, and still finds the pass, in one more binary search.
#[test]
fn a_needed_pass_is_kept_on_and_said() {
    let tmp = tempfile::tempdir().unwrap();
    let (text, r) = bisect_fusions(
        "xla/hlo/transformer.hlo",
        "pjrt:cpu?xla_disable_hlo_passes=fusion-wrapper",
        "out",
        &[],
        tmp.path(),
    );
    assert!(
        text.contains("needed by the program: `layout-assignment` (")
            && text.contains("LHS batch dims"),
        "{text}"
    );
    assert_eq!(names(&r["guilty"]), ["fusion"]);
    assert_eq!(r["needed"][0][0], "layout-assignment", "{r}");
    let invocations = r["invocations"].as_f64().unwrap();
    let passes = r["passes"].as_f64().unwrap();
    let compiles = r["compiles"].as_f64().unwrap();
    assert!(
        compiles <= 2.0 * invocations.log2() + passes.log2(),
        "{compiles} compiles for {invocations} invocations"
    );
}

/// Two passes that each make the fusion: both must be off for it to go away.
#[test]
fn passes_that_each_cause_it_are_found_together() {
    let tmp = tempfile::tempdir().unwrap();
    let (_, r) = bisect_fusions(
        "xla/bisect/elementwise.hlo",
        "pjrt:cpu",
        "out",
        &[],
        tmp.path(),
    );
    assert_eq!(names(&r["guilty"]), ["fusion", "fusion-wrapper"]);
    assert_eq!(
        r["workaround"]["xla_flags"],
        "XLA_FLAGS=--xla_disable_hlo_passes=fusion,fusion-wrapper"
    );
    assert_eq!(r["workaround"]["checked"], "gone");
    // Checked as the user applies it: the environment of a fresh process.
    assert_eq!(r["workaround"]["route"], "XLA_FLAGS");
    // The plugin cannot turn off one invocation: said, not pretended.
    assert_eq!(r["invocation_filter"], false);
}

/// A failure that shows with every pass off is in no pass: said in one trial after the
/// first, with no pass blamed. Through `repro --bisect`, on the minified program, the
/// report shows where and which.
#[test]
fn a_failure_no_pass_causes_is_said_so_and_repro_bisects_the_minified() {
    let tmp = tempfile::tempdir().unwrap();
    let program = s(&fixture("xla/bisect/elementwise.hlo"));
    let out = tmp.path().join("repro");
    let o = command(
        &[
            "repro",
            &program,
            "--backend",
            "fault:nan@tanh+pjrt:cpu",
            "--out",
            &s(&out),
            "--bisect",
        ],
        &[],
        tmp.path(),
    )
    .run();
    let text = said(&o);
    assert!(o.status.success(), "{text}");
    assert!(
        text.contains("bisecting the passes on ") && text.contains("/repro/minified"),
        "{text}"
    );
    assert!(
        text.contains("the failure shows with every pass off: it is in no pass"),
        "{text}"
    );
    let r = report(&out.join("bisect"));
    assert_eq!(r["in_no_searched_pass"], true);
    assert_eq!(r["guilty"], serde_json::json!([]));
    // The first run (every pass on, dumped), every pass off: two compiles.
    assert_eq!(r["compiles"], 2, "{r}");
    let page = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(
        page.contains("Which pass") && page.contains("it is in no pass"),
        "{page:.2000}"
    );
    // A repro directory bisects with its own backend and check.
    let again = tmp.path().join("again");
    let o = bisect(
        &[&s(&out.join("minified")), "--out", &s(&again)],
        tmp.path(),
    );
    assert!(o.status.success(), "{}", said(&o));
    let r = report(&again);
    assert!(
        r["backend"].as_str().unwrap().starts_with("fault:nan@"),
        "{r}"
    );
    assert_eq!(r["in_no_searched_pass"], true);
}

/// What the plugin runs, listed; names it does not run, a backend that is no XLA plugin,
/// a check the program does not fail: errors that name the culprit.
#[test]
fn passes_are_listed_and_bad_requests_are_named() {
    let tmp = tempfile::tempdir().unwrap();
    let program = s(&fixture("xla/bisect/elementwise.hlo"));
    let out = s(&tmp.path().join("out"));
    let o = bisect(
        &[
            &program,
            "--backend",
            "pjrt:cpu",
            "--list-passes",
            "--out",
            &out,
        ],
        tmp.path(),
    );
    let text = said(&o);
    assert!(o.status.success(), "{text}");
    assert!(
        text.contains("HLO_passes_after_layout_assignment/fusion *\n"),
        "{text}"
    );
    assert!(text.contains("/layout-assignment"), "{text}");
    for (args, says) in [
        (
            vec![
                "--backend",
                "pjrt:cpu",
                "--check",
                "contains:fusion",
                "--passes",
                "fusoin",
            ],
            "--passes: `fusoin` is no pass `pjrt:cpu` runs on this program",
        ),
        (
            vec!["--backend", "iree:llvm-cpu", "--check", "accuracy"],
            "is IREE, not an XLA plugin",
        ),
        (
            vec!["--backend", "pjrt:cpu", "--check", "contains:dot"],
            "the optimized program does not call what --check lists",
        ),
        (vec!["--check", "accuracy"], "--backend: name the backend"),
        (
            vec!["--backend", "fault:nan@tanh+pjrt:cpu", "--check", "compile"],
            "fails with accuracy wrong result: outputs differ from the reference plugin's beyond the same() tolerance, not the failure --check compile asks for",
        ),
        (
            vec!["--backend", "pjrt:cpu", "--check", "accuracy"],
            "`pjrt:cpu` does not fail on",
        ),
    ] {
        let mut a = vec![program.as_str()];
        a.extend(args.iter());
        a.extend(["--out", &out]);
        let o = bisect(&a, tmp.path());
        let text = said(&o);
        assert!(
            !o.status.success() && text.contains(says),
            "{args:?}: {text}"
        );
        if says.starts_with("--passes") {
            // The names it does run, from the plugin.
            assert!(
                text.contains("it runs: ") && text.contains(", fusion, "),
                "{text}"
            );
        }
    }
}

/// kill -9 of a bisection mid-trial leaves no child process; its scratch, with the
/// plugin's dumps, goes with the next start.
#[test]
fn killed_bisection_leaves_no_child_and_no_dump() {
    let tmp = tempfile::tempdir().unwrap();
    let marker = tmp.path().display().to_string();
    let program = s(&fixture("xla/hlo/transformer.hlo"));
    let out = s(&tmp.path().join("out"));
    let scratch = tmp.path().join("graphbug-scratch");
    let mut child = command(
        &[
            "bisect",
            &program,
            "--backend",
            "pjrt:cpu",
            "--check",
            "contains:fusion",
            "-j",
            "2",
            "--out",
            &out,
        ],
        &[],
        tmp.path(),
    )
    .stdout(std::process::Stdio::null())
    .stderr(std::process::Stdio::null())
    .spawn()
    .unwrap();
    // Until a trial past the first has started (its dump directory exists).
    let deadline = Instant::now() + LIMIT;
    let trial_started = || {
        entries(&scratch)
            .iter()
            .any(|d| scratch.join(d).join("trial2").exists())
    };
    while !trial_started() && Instant::now() < deadline && child.try_wait().unwrap().is_none() {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(trial_started(), "no trial started");
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let left = survivors(&marker);
    assert!(left.is_empty(), "processes outlived the kill: {left:?}");
    // The next start sweeps what the killed one left.
    let o = bisect(
        &[
            &program,
            "--backend",
            "pjrt:cpu",
            "--list-passes",
            "--out",
            &out,
        ],
        tmp.path(),
    );
    assert!(o.status.success(), "{}", said(&o));
    assert_eq!(entries(&scratch), Vec::<String>::new());
}

/// openxla/xla#44705 (jax-ml/jax#38681), as JAX lowers the report's function: atan2(0, 0)
/// of a converted xor is NaN after compilation on XLA's CPU, 0 as it should be with the
/// plugin's passes off. The float64 program is wrong the same way, so the reference is the
/// plugin with its passes off; from the program alone the bisection names `fusion` (the
/// fusion's emitter folds the atan2 to NaN), with a workaround that works.
#[test]
fn a_public_xla_bug_is_bisected_to_its_pass() {
    let tmp = tempfile::tempdir().unwrap();
    let program = s(&fixture("xla/bisect/atan2_xor.hlo"));
    let inputs = s(&fixture("xla/bisect/atan2_xor.npz"));
    let out = tmp.path().join("out");
    let args = |reference: &str| {
        let mut a = vec![
            program.clone(),
            "--inputs".into(),
            inputs.clone(),
            "--backend".into(),
            "pjrt:cpu".into(),
            "--check".into(),
            "accuracy".into(),
            "--out".into(),
            s(&out),
        ];
        if !reference.is_empty() {
            a.extend(["--reference-backend".into(), reference.to_string()]);
        }
        a
    };
    // Against the float64 program on the same plugin the bug does not show: it is wrong too.
    let a = args("");
    let o = bisect(
        &a.iter().map(String::as_str).collect::<Vec<_>>(),
        tmp.path(),
    );
    assert!(
        !o.status.success() && said(&o).contains("does not fail"),
        "{}",
        said(&o)
    );
    let a = args("pjrt:cpu?xla_enable_hlo_passes_only=layout-assignment");
    let o = bisect(
        &a.iter().map(String::as_str).collect::<Vec<_>>(),
        tmp.path(),
    );
    let text = said(&o);
    assert!(o.status.success(), "{text}");
    let r = report(&out);
    assert_eq!(names(&r["guilty"]), ["fusion"], "{text}");
    assert_eq!(r["with"], serde_json::json!([]));
    assert_eq!(r["workaround"]["checked"], "gone", "{r}");
    // The reference sets its passes itself: XLA_FLAGS would reach it too, so the workaround
    // is checked through the compile option.
    assert_eq!(r["workaround"]["route"], "the compile option");
    let invocations = r["invocations"].as_f64().unwrap();
    assert!(
        r["compiles"].as_f64().unwrap() <= 2.0 * invocations.log2(),
        "{r}"
    );
    let run = &r["runs"][0]["written"][0];
    let diff =
        std::fs::read_to_string(out.join("guilty").join(run["diff"].as_str().unwrap())).unwrap();
    assert!(
        diff.lines()
            .any(|l| l.starts_with('+') && l.contains("atan2(")),
        "{diff}"
    );
}
