//! Benchmark: minifying XLA programs, against the field's own strategies in the same run.
//!
//! - Lowered transformer blocks (the corpus's `transformer`, the RFC's BART-like decoder
//!   layer) with one faulted instruction (compile, runtime and accuracy faults, at
//!   instructions spread over the program): graphbug's minifier must end at that one
//!   instruction, in no more queries than a port of XLA's `hlo_bisect` strategy (outputs
//!   bisection, prefix truncation in post order, every value a constant) and than PyTorch's
//!   own minifier (functorch's `fx_minifier`, run on a mirror of the program's graph, asking
//!   this benchmark for each verdict). Every check is the same: the XLA CPU plugin on the
//!   values one reference run recorded, the original's failure kept.
//! - Every faulted program of the conformance corpus's XLA CI subset (JAX's primitive
//!   harnesses, export modules and models, generated here by `gen_xla_cases.py`), faulted as
//!   its `minify-hlo` stage faults it (a runtime fault on its middle instruction): never
//!   more queries than the `hlo_bisect` port, and fewer on every program where the port
//!   needs more than the least two (the original, and the one instruction with constant
//!   inputs); the worst of each is reported.
//! - Per-query overhead beyond the plugin's compile and execute: at most 10%, in this
//!   process and through `graphbug minify`'s isolated workers.
//! - `-j 4` against `-j 1` through the binary with a check that takes 1 s a query and whose
//!   failure names no instruction (`--check-command`): the search's wall time at most 0.5x
//!   (the whole command's, start-up included, is printed beside it).
//!
//! Needs the venv (the XLA CPU plugin; torch for PyTorch's minifier): `cargo xtask setup`.
//!
//! `cargo bench --bench xla_minify`

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use graphbug::accuracy::AccuracyMode;
use graphbug::files::{random_tensors, HostTensor};
use graphbug::ir::bench::{Ratio, Targets};
use graphbug::ir::{Graph, Meta, NodeKind, TensorMeta};
use graphbug::minifier::{
    minify, BugIdentity, CheckKind, Checker, MinifyOptions, NoSink, Original, Verdict,
};
use graphbug::xla::execute::XlaBackend;
use graphbug::xla::minify::{Printer, Recorded, XlaChecker};
use graphbug::xla::program::{sniff, Program};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A program, its graph printer, and the values the reference recorded.
struct Case {
    name: String,
    path: PathBuf,
    printer: Arc<Printer>,
    recorded: Arc<Recorded>,
}

fn load(name: &str, path: PathBuf, inputs: Option<PathBuf>) -> Case {
    try_load(name, path, inputs).unwrap()
}

/// [`load`], or why the reference plugin cannot record the program's values.
fn try_load(name: &str, path: PathBuf, inputs: Option<PathBuf>) -> Result<Case, String> {
    let bytes = std::fs::read(&path).unwrap();
    let program = Program::read(&bytes, sniff(&bytes, &path).unwrap()).unwrap();
    let printer = Arc::new(Printer::new(&program).unwrap());
    let params = program.parameters().unwrap();
    let inputs: Vec<HostTensor> = match inputs {
        Some(file) => {
            let mut named = graphbug::files::read(&file).unwrap();
            (0..params.len())
                .map(|k| {
                    let j = named
                        .iter()
                        .position(|(n, _)| *n == format!("arg{k}"))
                        .unwrap();
                    named.remove(j).1
                })
                .collect()
        }
        None => {
            let metas: Vec<TensorMeta> = params.into_iter().map(|(_, m)| m).collect();
            random_tensors(&metas, 0).unwrap()
        }
    };
    let reference = XlaBackend::parse("pjrt:cpu").unwrap();
    let recorded = Arc::new(Recorded::record(&printer, inputs, &reference, true)?);
    Ok(Case {
        name: name.to_string(),
        path,
        printer,
        recorded,
    })
}

/// Instructions to fault: `n` spread over the program (arrays computed by a call).
fn positions(g: &Graph, n: usize) -> Vec<String> {
    let skip = [
        "constant",
        "parameter",
        "tuple",
        "get-tuple-element",
        "iota",
    ];
    let calls: Vec<String> = g
        .nodes
        .iter()
        .filter(|node| {
            matches!(node.meta, Meta::Tensor(_))
                && node
                    .op()
                    .is_some_and(|op| !skip.contains(&op.name.as_str()))
        })
        .map(|node| node.name.to_string())
        .collect();
    (0..n)
        .map(|k| calls[(calls.len() * (2 * k + 1)) / (2 * n)].clone())
        .collect()
}

/// A yes/no oracle over kept sets: the checker's verdict on the candidate, held to the
/// original's failure (as graphbug's search holds it).
struct Oracle<'a> {
    original: Original<'a>,
    checker: XlaChecker,
    identity: Option<BugIdentity>,
    queries: usize,
}

impl Oracle<'_> {
    fn fails(&mut self, kept: &[u32]) -> bool {
        self.queries += 1;
        let kept = self.original.normalize(kept);
        if kept.is_empty() {
            return false;
        }
        let candidate = self.original.candidate(&kept);
        match self.checker.check(&candidate) {
            Verdict::Fails(sig) => match &self.identity {
                Some(id) => id.matches(&sig),
                None => {
                    self.identity = Some(BugIdentity::new(sig, None).unwrap());
                    true
                }
            },
            _ => false,
        }
    }
}

/// XLA's `hlo_bisect` strategy, ported to kept sets: check the module; then alternately
/// bisect the ROOT tuple's outputs and truncate the instructions (in post order) to the
/// shortest failing prefix, each success verified by another run, until neither changes
/// anything (at least once each); then replace every value but the root's by a constant
/// (here: an input holding the recorded value). Returns the queries and the result.
fn hlo_bisect(o: &mut Oracle) -> (usize, Vec<u32>) {
    let all = o.original.all();
    if !o.fails(&all) {
        return (o.queries, all);
    }
    let mut s = all;
    let mut outs = o.original.sinks(&s);
    let keep_outputs = |o: &Oracle, s: &[u32], outs: &[u32], keep: &[u32]| {
        let drop: Vec<u32> = outs.iter().copied().filter(|x| !keep.contains(x)).collect();
        o.original.without_outputs(s, &drop)
    };
    let mut changed = false;
    let mut iter = 0;
    while changed || iter < 2 {
        if iter % 2 == 0 {
            // TrimByOutputs.
            changed = false;
            if outs.len() >= 2 {
                let (mut lo, mut hi) = (0usize, outs.len() - 1);
                while lo < hi {
                    let cur = lo + (hi - lo) / 2;
                    let first = keep_outputs(o, &s, &outs, &outs[lo..=cur]);
                    if o.fails(&first) {
                        hi = cur;
                        continue;
                    }
                    let second = keep_outputs(o, &s, &outs, &outs[cur + 1..=hi]);
                    if o.fails(&second) {
                        lo = cur + 1;
                    } else {
                        break;
                    }
                }
                changed = hi - lo < outs.len() - 1;
                if changed {
                    s = keep_outputs(o, &s, &outs, &outs[lo..=hi]);
                    outs = outs[lo..=hi].to_vec();
                    assert!(o.fails(&s), "hlo_bisect lost the bug");
                }
            }
        } else {
            // TrimByInstructions.
            let (mut lo, mut hi) = (0usize, s.len());
            while lo + 1 < hi {
                let cur = lo + (hi - lo) / 2;
                if o.fails(&s[..cur]) {
                    hi = cur;
                } else {
                    lo = cur;
                }
            }
            changed = hi < s.len();
            if changed {
                s.truncate(hi);
                outs = o.original.sinks(&s);
                assert!(o.fails(&s), "hlo_bisect lost the bug");
            }
        }
        iter += 1;
    }
    // TrimByUsingConstants: a tuple root's outputs become constants too, and the module
    // computes nothing; one output alone is the root with constant operands.
    o.queries += 1;
    if let [out] = outs[..] {
        o.queries -= 1;
        if o.fails(&[out]) {
            s = vec![out];
        }
    }
    (o.queries, s)
}

/// PyTorch's minifier on a mirror of `g` (see benches/python/fx_minifier_driver.py), each
/// verdict from `o`. `None` when the venv has no torch.
fn fx_minifier(g: &Graph, o: &mut Oracle) -> Option<(usize, Vec<u32>)> {
    let python = root().join(".venv/bin/python");
    let has_torch = Command::new(&python)
        .args(["-c", "import functorch.compile"])
        .output()
        .is_ok_and(|out| out.status.success());
    if !has_torch {
        return None;
    }
    let nodes: Vec<serde_json::Value> = g
        .ids()
        .map(|id| {
            let n = g.node(id);
            let mut args = Vec::new();
            n.for_each_input(|src| args.push(src.0));
            match &n.kind {
                NodeKind::Placeholder => serde_json::json!({"id": id.0, "kind": "input"}),
                NodeKind::GetItem { source, index } => {
                    serde_json::json!({"id": id.0, "kind": "getitem", "args": [source.0], "index": index})
                }
                _ => {
                    let items = match &n.meta {
                        Meta::Multi(items) => items.len(),
                        _ => 0,
                    };
                    serde_json::json!({"id": id.0, "kind": "call", "args": args, "items": items})
                }
            }
        })
        .collect();
    let mut outputs = Vec::new();
    for v in g.outputs() {
        v.for_each_node(&mut |id| outputs.push(id.0));
    }
    let desc = serde_json::json!({"nodes": nodes, "outputs": outputs});
    let dir = tempfile::tempdir().unwrap();
    let mut child = Command::new(&python)
        .arg(root().join("benches/python/fx_minifier_driver.py"))
        .current_dir(dir.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut input = child.stdin.take().unwrap();
    writeln!(input, "{desc}").unwrap();
    let lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut result = None;
    for line in lines {
        let msg: serde_json::Value = serde_json::from_str(&line.unwrap()).unwrap();
        let kept: Vec<u32> = serde_json::from_value(msg["kept"].clone()).unwrap();
        if msg["done"] == true {
            result = Some((msg["queries"].as_u64().unwrap() as usize, kept));
            break;
        }
        let fails = o.fails(&kept);
        writeln!(input, "{}", if fails { 1 } else { 0 }).unwrap();
    }
    drop(input);
    let _ = child.wait();
    result
}

fn checker(case: &Case, backend: &str, kind: CheckKind) -> XlaChecker {
    XlaChecker::new(
        XlaBackend::parse(backend).unwrap(),
        kind,
        case.printer.clone(),
        case.recorded.clone(),
        AccuracyMode::Accuracy,
    )
}

/// The names of a kept set's nodes.
fn names(g: &Graph, kept: &[u32]) -> String {
    kept.iter()
        .map(|&i| g.nodes[i as usize].name.to_string())
        .collect::<Vec<_>>()
        .join(",")
}

/// `graphbug minify ... --json` through the binary; its counts.
fn cli_minify(program: &Path, backend: &str, check: &str, jobs: usize) -> serde_json::Value {
    cli_minify_with(program, &["--backend", backend, "--check", check], jobs)
}

/// `graphbug minify PROGRAM ARGS --json -j JOBS`: its JSON counts.
fn cli_minify_with(program: &Path, args: &[&str], jobs: usize) -> serde_json::Value {
    let out = Command::new(env!("CARGO_BIN_EXE_graphbug"))
        .args(["minify", program.to_str().unwrap()])
        .args(args)
        .args(["--json", "-j", &jobs.to_string()])
        .stderr(Stdio::null())
        .output()
        .unwrap();
    assert!(out.status.success(), "graphbug minify failed");
    let text = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(text.lines().last().unwrap()).unwrap()
}

fn main() {
    if let Some(filter) = std::env::args().skip(1).find(|a| !a.starts_with('-')) {
        if !"xla_minify".contains(&filter) {
            return;
        }
    }
    let mut targets = Targets::new("xla_minify");
    conformance_corpus(&mut targets);
    let fixtures = root().join("tests/fixtures/xla");
    let mut cases = vec![load(
        "transformer",
        fixtures.join("hlo/transformer.hlo"),
        None,
    )];
    let bart = fixtures.join("bart/decoder.hlo");
    if bart.exists() {
        cases.push(load(
            "bart decoder",
            bart,
            Some(fixtures.join("bart/inputs.safetensors")),
        ));
    }
    let (mut ours, mut bisect, mut pytorch) = (0usize, 0usize, 0usize);
    let mut pytorch_ran = true;
    let (mut wall, mut plugin) = (Duration::ZERO, Duration::ZERO);
    let mut exact = 0;
    let mut runs = 0;
    // The run where graphbug's queries come closest to (or beyond) the port's.
    let mut worst: Option<(f64, String)> = None;
    println!(
        "{:<14} {:<22} {:<9} {:>9} {:>11} {:>9}",
        "program", "faulted instruction", "fault", "graphbug", "hlo_bisect", "PyTorch"
    );
    for case in &cases {
        let g = case.printer.graph();
        for at in positions(g, 4) {
            for (fault, kind) in [
                ("compile", CheckKind::Compile),
                ("runtime", CheckKind::Runtime),
                ("accuracy", CheckKind::Accuracy),
            ] {
                let backend = format!("fault:{fault}@node:{at}+pjrt:cpu");
                let original = Original::borrowing(g);
                let mut c = checker(case, &backend, kind);
                if !matches!(c.check(&original.as_given()), Verdict::Fails(_)) {
                    println!(
                        "{:<14} {at:<22} {fault:<9} (masked: the outputs do not show it)",
                        case.name
                    );
                    continue;
                }
                runs += 1;
                let mut c = checker(case, &backend, kind);
                let started = Instant::now();
                let m = minify(g, &mut c, &graphbug_options(), &mut NoSink).unwrap();
                wall += started.elapsed();
                plugin += c.plugin_time();
                let ours_end = names(g, &m.candidate.kept);
                exact += usize::from(ours_end == at);
                let oracle = |_: ()| Oracle {
                    original: Original::borrowing(g),
                    checker: checker(case, &backend, kind),
                    identity: None,
                    queries: 0,
                };
                let (hq, hkept) = hlo_bisect(&mut oracle(()));
                let fx = fx_minifier(g, &mut oracle(()));
                ours += m.stats.queries;
                bisect += hq;
                let ratio = m.stats.queries as f64 / hq as f64;
                if worst.as_ref().is_none_or(|(r, _)| ratio > *r) {
                    worst = Some((
                        ratio,
                        format!("{} {at} {fault}: {} vs {hq}", case.name, m.stats.queries),
                    ));
                }
                let fx_text = match &fx {
                    Some((q, kept)) => {
                        pytorch += q;
                        format!("{q} ({})", kept.len())
                    }
                    None => {
                        pytorch_ran = false;
                        "n/a".into()
                    }
                };
                println!(
                    "{:<14} {at:<22} {fault:<9} {:>9} {:>11} {:>9}",
                    case.name,
                    format!("{} ({})", m.stats.queries, m.candidate.kept.len()),
                    format!("{hq} ({})", hkept.len()),
                    fx_text
                );
                if ours_end != at {
                    println!("  graphbug ended at {ours_end}");
                }
            }
        }
    }
    println!("(queries, and in parentheses the instructions left)");
    targets.at_most(
        &format!("faulted runs not minified to the faulted instruction alone (of {runs})"),
        (runs - exact) as f64,
        0.0,
        "",
    );
    targets.at_most(
        &format!("graphbug's queries against hlo_bisect's port ({ours} vs {bisect}, {runs} runs)"),
        ours as f64 / bisect as f64,
        1.0,
        "x",
    );
    // Fewer on every run, not on average: the worst run's ratio.
    if let Some((ratio, run)) = &worst {
        targets.at_most(
            &format!("graphbug's queries against hlo_bisect's port, the worst run ({run})"),
            *ratio,
            0.99,
            "x",
        );
    }
    if pytorch_ran {
        targets.at_most(
            &format!(
                "graphbug's queries against PyTorch's minifier ({ours} vs {pytorch}, {runs} runs)"
            ),
            ours as f64 / pytorch as f64,
            1.0,
            "x",
        );
    } else {
        println!("PyTorch's minifier: n/a (no torch in .venv)");
    }
    let overhead = (wall.as_secs_f64() - plugin.as_secs_f64()) / plugin.as_secs_f64();
    targets.at_most(
        &format!(
            "per-query overhead beyond the plugin's compile and execute, in process ({:.2} s of {:.2} s)",
            wall.as_secs_f64() - plugin.as_secs_f64(),
            wall.as_secs_f64()
        ),
        overhead,
        0.10,
        "",
    );
    // Through the binary's isolated workers: the same search on the transformer, its
    // plugin time measured in this process on the same candidates.
    let case = &cases[0];
    let at = &positions(case.printer.graph(), 4)[1];
    let backend = format!("fault:runtime@node:{at}+pjrt:cpu");
    let mut c = checker(case, &backend, CheckKind::Runtime);
    let m = minify(
        case.printer.graph(),
        &mut c,
        &graphbug_options(),
        &mut NoSink,
    )
    .unwrap();
    let plugin_each = c.plugin_time().as_secs_f64() / m.stats.queries as f64;
    let mut isolated = Vec::new();
    for _ in 0..3 {
        let counts = cli_minify(&case.path, &backend, "runtime", 1);
        assert_eq!(counts["queries"].as_u64(), Some(m.stats.queries as u64));
        isolated.push(counts["search_seconds"].as_f64().unwrap());
    }
    isolated.sort_by(f64::total_cmp);
    let each = isolated[1] / m.stats.queries as f64;
    targets.at_most(
        &format!(
            "per-query overhead through isolated workers ({:.1} ms a query, the plugin {:.1} ms)",
            each * 1e3,
            plugin_each * 1e3
        ),
        (each - plugin_each) / plugin_each,
        0.10,
        "",
    );
    // -j 4 against -j 1 on a check that takes a second a query and whose failure names no
    // instruction (an injected fault's error names its target, and the search would start
    // there: no search to run side by side): a check command, interesting while the
    // instruction is kept.
    // The search's wall time is the target (start-up, a reference run in one worker while
    // the others start, happens once a run, not once a query); the whole command's is
    // reported beside it.
    let check = format!(
        "f() {{ sleep 1; ! grep -qE '^ *(ROOT )?{}' \"$1/program.hlo\"; }}; f",
        format!("{at} = ").replace('.', "\\.")
    );
    let totals = std::cell::RefCell::new((Vec::new(), Vec::new()));
    let timed = |jobs: usize| {
        let c = cli_minify_with(&case.path, &["--check-command", &check], jobs);
        let mut t = totals.borrow_mut();
        let whole = c["seconds"].as_f64().unwrap();
        if jobs == 4 {
            t.0.push(whole)
        } else {
            t.1.push(whole)
        }
        c["search_seconds"].as_f64().unwrap()
    };
    // Three rounds: whether the truncation point alone goes out a round early is a race
    // between workers (0.41x when it does, 0.50x when not); the median is the typical run.
    let ratio = Ratio::measure(3, || timed(4), || timed(1));
    let (four, one) = totals.into_inner();
    let (four, one): (f64, f64) = (four.iter().sum(), one.iter().sum());
    println!(
        "the whole command, start-up included: -j 4 against -j 1: {:.3}x",
        four / one
    );
    targets.ratio_at_most(
        "-j 4 against -j 1, the search's wall time, 1 s a query (transformer, a check naming no instruction)",
        &ratio,
        0.5,
    );
    targets.finish();
}

/// The options `graphbug minify` searches an XLA program with: every strategy, inputs as
/// constants included.
fn graphbug_options() -> MinifyOptions {
    MinifyOptions {
        constants: true,
        ..MinifyOptions::default()
    }
}

/// graphbug against the `hlo_bisect` port on every faulted program of the conformance
/// corpus's XLA CI subset, faulted as its `minify-hlo` stage faults it: the worst ratio of
/// queries is the target (fewer on every program).
fn conformance_corpus(targets: &mut Targets) {
    let scratch = graphbug::run::scratch::Scratch::new("xla-minify-bench").unwrap();
    let cases_dir = scratch.path().join("cases");
    let generated = Command::new(root().join(".venv/bin/python"))
        .arg(root().join("xtask/conformance/gen_xla_cases.py"))
        .arg("--out")
        .arg(&cases_dir)
        .args(["--subset", "ci", "-j", "2"])
        .output();
    if !generated.as_ref().is_ok_and(|o| o.status.success()) {
        println!("conformance corpus: not generated (JAX in .venv: cargo xtask setup)");
        targets.at_most(
            "graphbug's queries against hlo_bisect's port, the conformance corpus's worst program (not measured)",
            f64::INFINITY,
            0.99,
            "x",
        );
        return;
    }
    let mut case_files: Vec<PathBuf> = Vec::new();
    let mut stack = vec![cases_dir.clone()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap().flatten() {
            let path = e.path();
            if path.is_dir() {
                stack.push(path);
            } else if path.file_name().is_some_and(|n| n == "case.json") {
                case_files.push(path);
            }
        }
    }
    case_files.sort();
    let (mut programs, mut ours, mut bisect, mut not_fewer) = (0, 0, 0, Vec::new());
    // The worst ratio over every program, and over those where fewer queries than the
    // port's are possible: two queries (the original, and the one-instruction program with
    // constant inputs) are the least any minifier needs, and the port's least.
    let mut worst: Option<(f64, String)> = None;
    let mut worst_above_floor: Option<(f64, String)> = None;
    for file in case_files {
        let json: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
        let dir = file.parent().unwrap();
        let (Some(program), Some(inputs)) = (json["run_hlo"][0].as_str(), json["inputs"].as_str())
        else {
            continue;
        };
        if json["run_skip"].is_string() {
            continue;
        }
        let hlo = std::fs::read_to_string(dir.join(program)).unwrap();
        let candidates = xtask::conformance::xla::fault_targets(&hlo);
        let Some(target) = json["minify_target"]
            .as_str()
            .map(str::to_string)
            .or_else(|| candidates.get(candidates.len() / 2).cloned())
        else {
            continue;
        };
        let id = json["id"].as_str().unwrap_or("?").to_string();
        // The CPU plugin's own gap (a LAPACK custom call JAX registers in its client):
        // the stage says so and leaves the program out; so does this.
        let case = match try_load(&id, dir.join(program), Some(dir.join(inputs))) {
            Ok(case) => case,
            Err(e) if xtask::conformance::xla::missing_ffi_handler(&e).is_some() => continue,
            Err(e) => panic!("{id}: {e}"),
        };
        let g = case.printer.graph();
        let backend = format!("fault:runtime@node:{target}+pjrt:cpu");
        let mut c = checker(&case, &backend, CheckKind::Runtime);
        if !matches!(
            c.check(&Original::borrowing(g).as_given()),
            Verdict::Fails(_)
        ) {
            continue;
        }
        let mut c = checker(&case, &backend, CheckKind::Runtime);
        let m = minify(g, &mut c, &graphbug_options(), &mut NoSink).unwrap();
        let (hq, _) = hlo_bisect(&mut Oracle {
            original: Original::borrowing(g),
            checker: checker(&case, &backend, CheckKind::Runtime),
            identity: None,
            queries: 0,
        });
        programs += 1;
        ours += m.stats.queries;
        bisect += hq;
        let run = format!("{id} {target}: {} vs {hq}", m.stats.queries);
        if m.stats.queries >= hq {
            not_fewer.push(run.clone());
        }
        let ratio = m.stats.queries as f64 / hq as f64;
        if hq > 2 && worst_above_floor.as_ref().is_none_or(|(r, _)| ratio > *r) {
            worst_above_floor = Some((ratio, run.clone()));
        }
        if worst.as_ref().is_none_or(|(r, _)| ratio > *r) {
            worst = Some((ratio, run));
        }
    }
    println!(
        "conformance corpus (XLA CI subset): {programs} faulted programs, graphbug {ours} queries, hlo_bisect's port {bisect}; not fewer on {}: {}",
        not_fewer.len(),
        not_fewer.join("; ")
    );
    let (ratio, run) = worst.unwrap_or((f64::INFINITY, "no program".into()));
    targets.at_most(
        &format!(
            "graphbug's queries against hlo_bisect's port, the conformance corpus's worst program of {programs} ({run})"
        ),
        ratio,
        1.0,
        "x",
    );
    let above = not_fewer.len();
    let (ratio, run) = worst_above_floor.unwrap_or((f64::INFINITY, "no program".into()));
    targets.at_most(
        &format!(
            "the same, the worst program where the port needs more than the least two queries ({run}; programs not fewer, all: {above})"
        ),
        ratio,
        0.99,
        "x",
    );
}
