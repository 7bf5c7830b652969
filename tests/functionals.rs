//! `torch.nn.functional` against aten, asked of PyTorch itself (`tests/pytorch/functionals.py`
//! with the project venv's Python).
//!
//! Every public function torch.nn.functional writes in Python is compared with the schemas
//! of the aten op(s) of its name: those whose signature differs (Python-only parameters,
//! another order, other defaults, no aten op of the name) are listed. For each of them,
//! and the few that match (graphbug lowers every one through its Python signature), with
//! OpInfo samples (`op_db` entries named or aliased `nn.functional.<name>`, float32 on the
//! CPU, the first sample of each call shape), torch.compile(fullgraph=True) hands the
//! graphbug_capture backend dynamo's own graph with the sample's inputs and PyTorch's
//! outputs, and `graphbug run GRAPH --inputs IN --compare OUT` must give PyTorch's outputs
//! (random functions, the dropout family: must lower and run). A function graphbug does not
//! lower must be refused by name, with the words [`REFUSED`] records: never a wrong answer,
//! never another error.
//!
//! Samples of our own (`extra.<name>`) cover functions OpInfo has none for and what its
//! samples never pass (`inplace=True`, the legacy `size_average`/`reduce`, an implicit
//! softmax `dim`).
//!
//! CI runs the functions of [`CI_FUNCTIONS`] (each mechanism of the lowering, `embedding`
//! with every sample shape: 57 cases, 30 to 80 s on 2 cores).
//! `GRAPHBUG_FUNCTIONALS=all cargo test --test functionals` runs every function (with
//! PyTorch 2.13, 224 cases: 1.5 to 3 minutes on 2 cores, as busy as they are);
//! `GRAPHBUG_FUNCTIONALS=embedding,dropout` runs those. Without the venv (`cargo xtask
//! setup` makes it) the tests say so and pass.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use common::{output_within, text, Run};

/// The functions CI captures and runs: each shared rule and kind of spelled-out adapter at
/// least once (renamed parameters, `inplace`, `return_indices`, legacy reductions, None
/// for an aten default, aten ops of other names, multi-op functions, random functions).
const CI_FUNCTIONS: &[&str] = &[
    "embedding",
    "embedding_bag",
    "dropout",
    "dropout3d",
    "alpha_dropout",
    "relu",
    "elu",
    "softmax",
    "softmin",
    "nll_loss",
    "hinge_embedding_loss",
    "kl_div",
    "max_pool2d",
    "adaptive_max_pool1d",
    "max_unpool1d",
    "batch_norm",
    "unfold",
    "normalize",
    "upsample_nearest",
];

/// OpInfo entries (or the first part of their name) graphbug refuses, with the words of
/// the refusal. A refusal that no longer happens fails the test, so the list stays true.
const REFUSED: &[(&str, &str)] = &[
    // Masks, bias_k/v, zero attention, separate projections and static k/v of
    // multi_head_attention_forward are not lowered (OpInfo's first sample has bias_k).
    (
        "nn.functional.multi_head_attention_forward",
        "(torch.nn.functional.multi_head_attention_forward): `bias_k` is not lowered yet",
    ),
    // Dynamo inlines linear_cross_entropy into calls of a custom op PyTorch registers from
    // Python (`torch_nn::_linear_cross_entropy_batch_chunked`), which libtorch alone lacks.
    (
        "nn.functional.linear_cross_entropy.chunked",
        "unknown op `torch_nn::_linear_cross_entropy_batch_chunked",
    ),
];

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The venv's Python, or None (with a notice) when there is none with torch.
fn python() -> Option<PathBuf> {
    let python = root().join(".venv/bin/python");
    let works = python.is_file()
        && Command::new(&python)
            .args(["-c", "import torch"])
            .output()
            .is_ok_and(|o| o.status.success());
    if !works {
        eprintln!(
            "notice: {} with torch is missing (`cargo xtask setup` makes it): torch.nn.functional \
             is not compared with aten",
            python.display()
        );
    }
    works.then_some(python)
}

/// `tests/pytorch/functionals.py ARGS` with the worktree's capture package; its stdout.
fn functionals_py(python: &Path, args: &[&str]) -> String {
    let mut cmd = Command::new(python);
    cmd.arg(root().join("tests/pytorch/functionals.py"))
        .args(args)
        .env("PYTHONPATH", root().join("python"))
        .env("OMP_NUM_THREADS", "1");
    let out = output_within(cmd, Duration::from_secs(900));
    assert!(
        out.status.success(),
        "functionals.py {args:?} failed (are numpy and expecttest installed? `cargo xtask setup` \
         installs them):\n{}",
        text(&out.stderr)
    );
    text(&out.stdout)
}

#[test]
fn the_signature_table_is_pytorchs() {
    let Some(python) = python() else { return };
    let table = root().join("crates/generic/ir/src/lower/functional_signatures.txt");
    let want = functionals_py(&python, &["signatures"]);
    let have = std::fs::read_to_string(&table).unwrap();
    if have != want {
        let diff: Vec<String> = want
            .lines()
            .filter(|l| !have.lines().any(|h| h == *l))
            .map(|l| format!("+ {l}"))
            .chain(
                have.lines()
                    .filter(|l| !want.lines().any(|w| w == *l))
                    .map(|l| format!("- {l}")),
            )
            .collect();
        panic!(
            "{} is not this PyTorch's: regenerate it with `.venv/bin/python \
             tests/pytorch/functionals.py signatures > {}`\n{}",
            table.display(),
            table.display(),
            diff.join("\n")
        );
    }
}

/// How one case ended.
#[derive(Debug)]
enum Outcome {
    Pass,
    /// Refused by name, with the words REFUSED records.
    Refused,
    /// Anything else: a wrong answer, a runtime error, a crash, a hang.
    Failed(String),
}

struct Case {
    /// `<opinfo name>/<sample>`.
    id: String,
    /// The function's signature differs from its aten op's.
    differs: bool,
    dir: PathBuf,
    function: String,
    random: bool,
    call: String,
}

/// The captured cases under `root`, and those PyTorch could not capture (id, reason).
fn read_cases(cases: &Path) -> (Vec<Case>, Vec<(String, String)>) {
    let mut ok = Vec::new();
    let mut skipped = Vec::new();
    let mut entries: Vec<PathBuf> = std::fs::read_dir(cases)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for entry in entries {
        let mut samples: Vec<PathBuf> = std::fs::read_dir(&entry)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        samples.sort();
        for dir in samples {
            let json: serde_json::Value =
                serde_json::from_str(&std::fs::read_to_string(dir.join("case.json")).unwrap())
                    .unwrap();
            let field = |k: &str| json[k].as_str().unwrap_or_default().to_string();
            let id = format!("{}/{}", field("opinfo"), json["sample"]);
            if field("status") != "ok" {
                skipped.push((id, field("reason")));
                continue;
            }
            ok.push(Case {
                id,
                differs: json["differs"].as_bool().unwrap_or(false),
                dir: dir.join("dynamo_000"),
                function: field("function"),
                random: json["random"].as_bool().unwrap_or(false),
                call: field("call"),
            });
        }
    }
    (ok, skipped)
}

/// `graphbug run` on one case: PyTorch's outputs, or (random) just a run.
fn run_case(case: &Case) -> Outcome {
    let d = &case.dir;
    let mut cmd = common::graphbug();
    // Isolation would cost a worker process per case; this test process is isolation
    // enough (a crash fails the case).
    cmd.args(["run", "--no-isolate"])
        .arg(d.join("graph.py"))
        .arg("--inputs")
        .arg(d.join("inputs.safetensors"));
    if !case.random {
        cmd.arg("--compare").arg(d.join("outputs.safetensors"));
    }
    let out = cmd.run();
    let all = format!("{}{}", text(&out.stdout), text(&out.stderr));
    if out.status.success() {
        return Outcome::Pass;
    }
    let named = format!(
        "lowering the dynamo-level graph to aten: node `{}` (torch.nn.functional.{})",
        case.function, case.function
    );
    let refusal = REFUSED.iter().find(|(key, _)| case.id.starts_with(key));
    match refusal {
        Some((_, words)) if all.contains(words) => Outcome::Refused,
        _ if all.contains("error: lowering the dynamo-level graph to aten: node `") => {
            if all.contains(&named) {
                Outcome::Failed(format!("refused, but not listed in REFUSED:\n{all}"))
            } else {
                Outcome::Failed(format!("refused without naming the function:\n{all}"))
            }
        }
        _ => Outcome::Failed(all),
    }
}

/// The functions `GRAPHBUG_FUNCTIONALS` asks for (`all`: every one), or CI's.
fn selected() -> Option<Vec<String>> {
    match std::env::var("GRAPHBUG_FUNCTIONALS") {
        Ok(v) if v == "all" => None,
        Ok(v) if !v.is_empty() => Some(v.split(',').map(str::to_string).collect()),
        _ => Some(CI_FUNCTIONS.iter().map(|s| s.to_string()).collect()),
    }
}

#[test]
fn functionals_that_differ_from_aten_run_as_pytorch_runs_them() {
    let Some(python) = python() else { return };
    let started = Instant::now();
    // Which functions differ, and why, from PyTorch's signatures and aten's schemas.
    let compare = functionals_py(&python, &["compare"]);
    let differ: Vec<&str> = compare
        .lines()
        .filter(|l| l.contains(": differs: "))
        .collect();
    let no_aten = differ.iter().filter(|l| l.contains("no aten op")).count();
    eprintln!(
        "{} of {} torch.nn.functional functions written in Python differ from their aten op \
         ({no_aten} have none of their name):\n{}",
        differ.len(),
        compare.lines().count(),
        differ.join("\n")
    );
    let differs = |name: &str| differ.iter().any(|l| l.starts_with(&format!("{name}: ")));
    assert!(differs("embedding") && differs("dropout") && differs("nll_loss"));
    assert!(
        compare.lines().any(|l| l == "layer_norm: same"),
        "{compare}"
    );

    // Dynamo's graphs of their OpInfo samples, with PyTorch's inputs and outputs.
    let scratch = tempfile::tempdir().unwrap();
    let cases_dir = scratch.path().join("cases");
    let only = selected().map(|names| names.join(","));
    let mut args = vec!["cases", "--out", cases_dir.to_str().unwrap()];
    if let Some(only) = &only {
        args.extend(["--only", only.as_str()]);
    }
    functionals_py(&python, &args);
    let captured = started.elapsed();
    let (cases, skipped) = read_cases(&cases_dir);
    assert!(!cases.is_empty(), "no case was captured");
    if only.as_deref().is_some_and(|o| o.contains("embedding")) {
        let embedding = cases
            .iter()
            .filter(|c| c.function == "embedding")
            .map(|c| c.call.as_str())
            .collect::<Vec<_>>();
        for kw in ["padding_idx", "max_norm", "norm_type", "sparse"] {
            assert!(
                embedding.iter().any(|c| c.contains(kw)),
                "no embedding sample passes {kw}: {embedding:?}"
            );
        }
    }

    // graphbug runs each, two at a time.
    let next = AtomicUsize::new(0);
    let outcomes: Mutex<Vec<(usize, Outcome)>> = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::SeqCst);
                let Some(case) = cases.get(i) else { break };
                let outcome = run_case(case);
                outcomes.lock().unwrap().push((i, outcome));
            });
        }
    });
    let mut outcomes = outcomes.into_inner().unwrap();
    outcomes.sort_by_key(|(i, _)| *i);

    let mut failed = Vec::new();
    let (mut passed, mut refused) = (0, Vec::new());
    for (i, outcome) in &outcomes {
        let case = &cases[*i];
        match outcome {
            Outcome::Pass => passed += 1,
            Outcome::Refused => refused.push(case.id.clone()),
            Outcome::Failed(why) => failed.push(format!(
                "{} ({}{}): {}",
                case.id,
                case.call,
                if case.random { ", random" } else { "" },
                why.trim()
            )),
        }
    }
    eprintln!(
        "{} cases ({} of functions that differ; {} s capturing, {} s in all): {passed} run as \
         PyTorch runs them, {} refused by name ({}), {} failed; {} samples PyTorch could not \
         capture whole:",
        cases.len(),
        cases.iter().filter(|c| c.differs).count(),
        captured.as_secs(),
        started.elapsed().as_secs(),
        refused.len(),
        refused.join(", "),
        failed.len(),
        skipped.len()
    );
    for (id, reason) in &skipped {
        eprintln!("  {id}: {reason}");
    }
    // A listed refusal that no longer happens is news: the list must say so.
    for (key, _) in REFUSED {
        let run_here = cases.iter().any(|c| c.id.starts_with(key));
        let still = refused.iter().any(|id| id.starts_with(key));
        assert!(
            !run_here || still,
            "{key} is no longer refused: take it off REFUSED"
        );
    }
    assert!(
        failed.is_empty(),
        "{} of {} cases failed:\n\n{}",
        failed.len(),
        cases.len(),
        failed.join("\n\n")
    );
}
