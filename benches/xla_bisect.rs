//! Benchmark: `graphbug bisect` of XLA programs against what people do by hand today,
//! turning the plugin's passes off one at a time in the order they run until the failure
//! goes away (openxla/xla#42042, the 2026 "outputs diverge after running HLO pass X" series),
//! each trial the same bounded child the bisector runs.
//!
//! - openxla/xla#44705 (atan2 of a converted xor: NaN after compilation on XLA's CPU),
//!   against the plugin with its passes off; guilty: `fusion`.
//! - An elementwise program whose optimized form has a fusion (`contains:fusion`), the
//!   other pass that fuses off in the backend; guilty: `fusion`.
//! - The transformer block (178 invocations), the same check: `layout-assignment` is
//!   needed by the program, so one more binary search finds it.
//!
//! Targets: compiles within 2 x log2(invocations) for one culprit (the first two; the
//! third is printed with its bound: one more search for the needed pass); the bisection's
//! wall time at most 0.5x the one-at-a-time search's; `-j 2` against `-j 1`, printed.
//!
//! Needs the venv (the XLA CPU plugin): `cargo xtask setup`. `cargo bench --bench xla_bisect`

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use graphbug::ir::bench::{Ratio, Targets};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn graphbug() -> Command {
    Command::new(env!("CARGO_BIN_EXE_graphbug"))
}

/// One program and what counts as failing.
struct Case {
    name: &'static str,
    program: PathBuf,
    inputs: Option<PathBuf>,
    backend: &'static str,
    check: &'static str,
    reference: Option<&'static str>,
    /// Within 2 x log2(invocations): one culprit, nothing needed.
    one_culprit: bool,
}

/// A bisection's run: its wall time and its report.
fn bisect(case: &Case, jobs: u16, out: &Path) -> (f64, serde_json::Value) {
    let mut cmd = graphbug();
    cmd.arg("bisect")
        .arg(&case.program)
        .args(["--backend", case.backend, "--check", case.check])
        .arg("-j")
        .arg(jobs.to_string())
        .arg("--out")
        .arg(out);
    if let Some(i) = &case.inputs {
        cmd.arg("--inputs").arg(i);
    }
    if let Some(r) = case.reference {
        cmd.args(["--reference-backend", r]);
    }
    let started = Instant::now();
    let o = cmd.output().unwrap();
    let took = started.elapsed().as_secs_f64();
    assert!(
        o.status.success(),
        "{}: {}{}",
        case.name,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("bisect.json")).unwrap()).unwrap();
    (took, report)
}

/// One pass off: whether the failure is gone, by the bisector's own kind of trial.
fn gone_without(case: &Case, pass: &str, case_dir: &Path, tmp: &Path) -> bool {
    let base = case.backend;
    let joined = if base.contains('?') { '&' } else { '?' };
    let own = base.split_once("xla_disable_hlo_passes=").map(|(_, v)| v);
    let backend = match own {
        // The backend's own list, with this pass added.
        Some(list) => base.replacen(list, &format!("{list},{pass}"), 1),
        None => format!("{base}{joined}xla_disable_hlo_passes={pass}"),
    };
    if let Some(op) = case.check.strip_prefix("contains:") {
        let dump = tmp.join("dump");
        let _ = std::fs::remove_dir_all(&dump);
        let backend = format!(
            "{backend}&xla_dump_to={}&xla_dump_hlo_as_text=true",
            dump.display()
        );
        let o = graphbug()
            .arg("run")
            .arg(&case.program)
            .args(["--backend", &backend])
            .output()
            .unwrap();
        if !o.status.success() {
            return false;
        }
        let optimized = std::fs::read_dir(&dump)
            .unwrap()
            .flatten()
            .find(|e| {
                e.file_name()
                    .to_string_lossy()
                    .ends_with("after_optimizations.txt")
            })
            .map(|e| std::fs::read_to_string(e.path()).unwrap())
            .unwrap_or_default();
        return !optimized.contains(&format!(" {op}("));
    }
    let o = graphbug()
        .args(["repro"])
        .arg(case_dir)
        .args(["run", "--backend", &backend])
        .output()
        .unwrap();
    String::from_utf8_lossy(&o.stdout).starts_with("no failure")
}

/// By hand: each searched pass off alone, in run order, until the failure goes away;
/// the wall time and the compiles.
fn one_at_a_time(
    case: &Case,
    searched: &[String],
    case_dir: &Path,
    tmp: &Path,
) -> (f64, usize, String) {
    let started = Instant::now();
    for (k, pass) in searched.iter().enumerate() {
        if gone_without(case, pass, case_dir, tmp) {
            return (started.elapsed().as_secs_f64(), k + 1, pass.clone());
        }
    }
    (
        started.elapsed().as_secs_f64(),
        searched.len(),
        String::new(),
    )
}

fn main() {
    if let Some(filter) = std::env::args().skip(1).find(|a| !a.starts_with('-')) {
        if !"xla_bisect".contains(&filter) {
            return;
        }
    }
    let mut targets = Targets::new("xla_bisect");
    let fixtures = root().join("tests/fixtures/xla");
    let cases = [
        Case {
            name: "openxla/xla#44705",
            program: fixtures.join("bisect/atan2_xor.hlo"),
            inputs: Some(fixtures.join("bisect/atan2_xor.npz")),
            backend: "pjrt:cpu",
            check: "accuracy",
            reference: Some("pjrt:cpu?xla_enable_hlo_passes_only=layout-assignment"),
            one_culprit: true,
        },
        Case {
            name: "elementwise",
            program: fixtures.join("bisect/elementwise.hlo"),
            inputs: None,
            backend: "pjrt:cpu?xla_disable_hlo_passes=fusion-wrapper",
            check: "contains:fusion",
            reference: None,
            one_culprit: true,
        },
        Case {
            name: "transformer",
            program: fixtures.join("hlo/transformer.hlo"),
            inputs: None,
            backend: "pjrt:cpu?xla_disable_hlo_passes=fusion-wrapper",
            check: "contains:fusion",
            reference: None,
            one_culprit: false,
        },
    ];
    let tmp = tempfile::tempdir().unwrap();
    println!(
        "{:<18} {:>11} {:>8} {:>8} {:>9} {:>9} {:>9} {:>12}",
        "program", "invocations", "guilty", "compiles", "bisect s", "-j2 s", "by hand", "by hand s"
    );
    for case in &cases {
        let out = tmp.path().join(case.name.replace('/', "_"));
        let (serial_s, report) = bisect(case, 1, &out);
        let (parallel_s, parallel) = bisect(case, 2, &tmp.path().join("j2"));
        assert_eq!(report["guilty"], parallel["guilty"], "{}", case.name);
        let guilty: Vec<String> = serde_json::from_value(report["guilty"].clone()).unwrap();
        let searched: Vec<String> = serde_json::from_value(report["searched"].clone()).unwrap();
        let invocations = report["invocations"].as_f64().unwrap();
        let compiles = report["compiles"].as_f64().unwrap();
        let (hand_s, hand_compiles, hand_found) =
            one_at_a_time(case, &searched, &out.join("case"), tmp.path());
        println!(
            "{:<18} {:>11} {:>8} {:>8} {:>9.1} {:>9.1} {:>9} {:>12.1}",
            case.name,
            invocations,
            guilty.join(","),
            compiles,
            serial_s,
            parallel_s,
            hand_compiles,
            hand_s
        );
        assert!(
            guilty == [hand_found.as_str()],
            "{}: by hand found {hand_found}, the bisection {guilty:?}",
            case.name
        );
        let bound = 2.0 * invocations.log2();
        if case.one_culprit {
            targets.at_most(
                &format!(
                    "{}: compiles over 2 x log2(invocations) = {bound:.1}",
                    case.name
                ),
                compiles / bound,
                1.0,
                "x",
            );
        } else {
            let passes = report["passes"].as_f64().unwrap();
            println!(
                "{}: {compiles} compiles, with a pass the program needs found on the way (bound 2 x log2(invocations) + log2(passes) = {:.1})",
                case.name,
                bound + passes.log2()
            );
        }
        let ratio = Ratio::of(&mut [serial_s / hand_s]);
        targets.ratio_at_most(
            &format!(
                "{}: bisection's wall time over one pass off at a time's ({compiles} against {hand_compiles} compiles)",
                case.name
            ),
            &ratio,
            0.5,
        );
        println!(
            "{}: -j 2 over -j 1 wall time: {:.3}x ({} trials run ahead)",
            case.name,
            parallel_s / serial_s,
            parallel["speculative"]
        );
    }
    targets.finish();
}
