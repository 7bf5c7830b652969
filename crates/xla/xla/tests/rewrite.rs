//! graphbug-xla's program rewrites against XLA CPU and JAX: the raise to float64 and faults
//! written into programs.
//!
//! The oracle of the raise is JAX's own float64 run of each program's function (x64 on, the
//! inputs cast to float64, the function's explicit float types made float64): `*.f64.npz`
//! beside the HLO corpus (`tests/fixtures/xla/hlo`, `make_corpus.py --f64`) and the StableHLO
//! fixtures (`tests/fixtures/xla/stablehlo`, `make_fixtures.py`). Each raised program is run
//! by jaxlib's CPU client on the inputs cast to float64 and must give that run, and be closer
//! to it than the float32 program is. Faulted programs run on the float32 inputs and must
//! differ from JAX's outputs by the fault. The live tests need a Python with jax and jaxlib
//! (`GRAPHBUG_PYTHON`, else the checkout's `.venv/bin/python`) and skip, saying so, without
//! one; the rest need nothing but Rust.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use graphbug_ir::fault::FaultSpec;
use graphbug_xla::hlo::check::check;
use graphbug_xla::hlo::proto::to_proto;
use graphbug_xla::hlo::text::{parse_module, print_module, Module, Operands};
use graphbug_xla::rewrite::{inject, raise_to_f64, RewriteError};
use graphbug_xla::stablehlo;
use serde_json::{json, Value};

mod common;
use common::{corpus, corpus_dir, root};

fn mlir_dir() -> PathBuf {
    root().join("tests/fixtures/xla/stablehlo")
}

fn read(path: PathBuf) -> String {
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn hlo(stem: &str) -> Module {
    parse_module(&read(corpus_dir().join(format!("{stem}.hlo")))).expect("the corpus parses")
}

/// The corpus programs graphbug refuses to raise, with the op and instruction it names.
/// (`sharded`'s `Sharding` custom call, a partitioner annotation, raises: see
/// `rewrite::is_sharding_annotation`.)
const REFUSED: [(&str, &str, &str); 3] = [
    ("attributes", "rng", "r"),
    ("custom_call", "custom-call", "cholesky.9"),
    ("misc", "bitcast-convert", "bitcast_convert_type.1"),
];

/// Corpus programs whose float32 text holds a constant float32 rounds, where JAX's float64
/// run has the exact value: their distance to that run is the rounding (which no rewrite of
/// the float32 program can undo), so it is bounded by this, not by 1e-12.
const ROUNDED_CONSTANTS: [(&str, f64, &str); 2] = [
    (
        "train_step",
        1e-9,
        "constant(0.166666672), float32's 1/6 (the mean's divisor)",
    ),
    (
        "transformer",
        1e-7,
        "constant(0.797884583), float32's sqrt(2/pi) in gelu",
    ),
];

/// The program a corpus stem is (`cumsum.old` is `cumsum`).
fn program(stem: &str) -> &str {
    stem.trim_end_matches(".old")
}

#[test]
fn the_corpus_raises_or_is_refused_by_name() {
    for stem in corpus() {
        let m = hlo(&stem);
        match raise_to_f64(&m) {
            Ok(r) => {
                assert!(
                    !REFUSED.iter().any(|(p, ..)| *p == program(&stem)),
                    "{stem} raised"
                );
                // The text reads back as the module, which checks; raising again changes
                // nothing; no narrow float is left in a shape.
                assert_eq!(print_module(&r.module), r.text, "{stem}");
                assert_eq!(parse_module(&r.text).unwrap(), r.module, "{stem}");
                check(&r.module).unwrap_or_else(|e| panic!("{stem}: {e}"));
                let again = raise_to_f64(&r.module).unwrap();
                assert_eq!(again.text, r.text, "{stem}: raising twice");
                for narrow in ["f32[", "bf16[", "f16[", "c64["] {
                    assert!(
                        !r.text.contains(&format!(" {narrow}"))
                            && !r.text.contains(&format!("({narrow}")),
                        "{stem}: {narrow} left"
                    );
                }
                let before = check(&m).unwrap();
                assert_eq!(check(&r.module).unwrap(), before, "{stem}");
                // Callers hand PJRT a proto of it.
                to_proto(&r.module).unwrap_or_else(|e| panic!("{stem}: {e}"));
            }
            Err(e) => {
                let Some((_, op, name)) = REFUSED.iter().find(|(p, ..)| *p == program(&stem))
                else {
                    panic!("{stem}: {e}");
                };
                let RewriteError::NotRaisable {
                    op: got,
                    value,
                    line,
                    ..
                } = &e
                else {
                    panic!("{stem}: {e:?}");
                };
                assert_eq!((got.as_str(), value.as_deref()), (*op, Some(*name)), "{e}");
                let text = read(corpus_dir().join(format!("{stem}.hlo")));
                let at = text.lines().nth(line - 1).unwrap();
                assert!(
                    at.contains(&format!("{name} = ")),
                    "{e}: line {line} is {at}"
                );
                assert!(
                    e.to_string().starts_with(&format!(
                        "line {line}: `{name}` (`{op}`) cannot be raised to float64: "
                    )),
                    "{e}"
                );
            }
        }
    }
}

#[test]
fn programs_already_in_float64_come_back_byte_for_byte() {
    let text = read(mlir_dir().join("mlp.f64.hlo"));
    let m = parse_module(&text).unwrap();
    assert_eq!(raise_to_f64(&m).unwrap().text, text);
    let text = read(mlir_dir().join("mlp.f64.mlir"));
    let m = stablehlo::parse_module(&text).unwrap();
    assert_eq!(raise_to_f64(&m).unwrap().text, text);
}

/// StableHLO fixtures: (name, its module).
fn mlir_fixtures() -> Vec<(String, stablehlo::Module)> {
    ["mlp", "specials", "train"]
        .iter()
        .map(|n| {
            let text = read(mlir_dir().join(format!("{n}.mlir")));
            (n.to_string(), stablehlo::parse_module(&text).unwrap())
        })
        .collect()
}

#[test]
fn stablehlo_fixtures_raise_and_reread() {
    for (name, m) in mlir_fixtures() {
        let r = raise_to_f64(&m).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(r.module.text, r.text);
        assert_eq!(
            stablehlo::check(&r.module).unwrap(),
            stablehlo::check(&m).unwrap()
        );
        assert_eq!(raise_to_f64(&r.module).unwrap().text, r.text, "{name}");
        for narrow in ["xf32>", "<f32>", "xbf16>", "<bf16>", "f16>"] {
            assert!(!r.text.contains(narrow), "{name}: {narrow} left");
        }
    }
}

/// jaxlib's Python, if there is one.
fn python() -> Option<PathBuf> {
    common::python("the rewrites are not run on XLA (the checks that need no Python are)")
}

/// A fresh scratch folder, removed when the test ends.
fn scratch(tag: &str) -> tempfile::TempDir {
    common::scratch(&format!("rewrite-{tag}"))
}

/// Runs programs on XLA CPU through jaxlib: a JSON list of jobs `{name, program, format
/// (hlo|mlir), inputs (npz with in0..), cast (inputs to float64), refs {label: npz}}`, in
/// order; each job's outputs are saved as `<dir>/<name>.out.npz` (a later job may take them
/// as a reference). Prints one JSON line a job: per output, against each reference, the
/// largest absolute difference (NaN against NaN counting 0, NaN against a number 1e308), the
/// smallest and largest signed one (real parts, where both are numbers), the reference's
/// largest magnitude and whether the output is NaN.
const RUNNER: &str = r#"
import json, os, sys
import numpy as np
import ml_dtypes
import jax, jax.extend
jax.config.update("jax_enable_x64", True)
from jax._src.lib import _jax
from jaxlib import _hlo as h
backend = jax.extend.backend.get_backend("cpu")
device = backend.local_devices()[0]

def wide(a):
    if a.dtype.kind == "V" and a.dtype.itemsize == 2:
        a = a.view(ml_dtypes.bfloat16)  # npz keeps bfloat16 as raw bytes
    return a.astype(np.complex128 if np.iscomplexobj(a) else np.float64)

def stats(g, w):
    g, w = wide(g), wide(w)
    if g.shape != w.shape:
        return {"same_shape": False, "maxabs": 1e308, "lo": 0.0, "hi": 0.0, "scale": 0.0}
    gn, wn = np.isnan(g), np.isnan(w)
    fin = ~gn & ~wn
    d = np.where(g == w, 0, g - w)
    maxabs = 1e308 if (gn != wn).any() else (float(np.max(np.abs(d[fin]))) if fin.any() else 0.0)
    real = np.real(d[fin])
    scale = np.abs(w[fin & np.isfinite(w)])
    return {"same_shape": True, "maxabs": min(maxabs, 1e308),
            "lo": float(real.min()) if real.size else 0.0, "hi": float(real.max()) if real.size else 0.0,
            "scale": float(scale.max()) if scale.size else 0.0}

out_dir = os.path.dirname(sys.argv[1])
for job in json.load(open(sys.argv[1])):
    res = {"name": job["name"]}
    try:
        text = open(job["program"]).read()
        if job["format"] == "hlo":
            code = _jax.mlir.hlo_to_stablehlo(h.hlo_module_from_text(text).as_serialized_hlo_module_proto())
        else:
            code = text
        exe = backend.compile_and_load(code, _jax.DeviceList((device,)), _jax.CompileOptions())
        z = np.load(job["inputs"])
        ins = [z[f"arg{k}"] for k in range(sum(1 for n in z.files if n.startswith("arg")))]
        if job["cast"]:
            ins = [a.astype(np.complex128) if a.dtype.kind == "c" else a.astype(np.float64) if a.dtype.kind == "f" else a for a in ins]
        outs = [np.asarray(o[0]) for o in exe.execute_sharded([jax.device_put(a, device) for a in ins]).disassemble_into_single_device_arrays()]
        np.savez(os.path.join(out_dir, job["name"] + ".out.npz"), **{f"out{k}": o for k, o in enumerate(outs)})
        refs = {label: np.load(p) for label, p in job["refs"].items()}
        res["outputs"] = []
        for k, g in enumerate(outs):
            o = {"dtype": str(g.dtype), "nan": bool(g.size and np.isnan(wide(g)).all()), "vs": {}}
            for label, r in refs.items():
                if f"out{k}" in r.files:
                    o["vs"][label] = stats(g, r[f"out{k}"])
            res["outputs"].append(o)
        res["ref_outputs"] = {label: sum(1 for n in r.files if n.startswith("out")) for label, r in refs.items()}
    except Exception as e:
        res["error"] = f"{type(e).__name__}: {e}"[:3000]
    print(json.dumps(res), flush=True)
"#;

/// One program to run.
struct Job {
    name: String,
    program: PathBuf,
    format: &'static str,
    inputs: PathBuf,
    cast: bool,
    refs: Vec<(&'static str, PathBuf)>,
}

/// Runs the jobs; each job's result by name.
fn run_jobs(python: &Path, dir: &Path, jobs: &[Job]) -> BTreeMap<String, Value> {
    let list: Vec<Value> = jobs
        .iter()
        .map(|j| {
            let refs: serde_json::Map<String, Value> = j
                .refs
                .iter()
                .map(|(l, p)| (l.to_string(), json!(p)))
                .collect();
            json!({"name": j.name, "program": j.program, "format": j.format,
                   "inputs": j.inputs, "cast": j.cast, "refs": refs})
        })
        .collect();
    let manifest = dir.join("jobs.json");
    std::fs::write(&manifest, serde_json::to_string(&list).unwrap()).unwrap();
    let stdout = common::run_python(python, RUNNER, &[&manifest]);
    let results: BTreeMap<String, Value> = stdout
        .lines()
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}"));
            (v["name"].as_str().unwrap().to_string(), v)
        })
        .collect();
    assert_eq!(results.len(), jobs.len(), "{stdout}");
    for (name, r) in &results {
        assert!(r.get("error").is_none(), "{name}: {}", r["error"]);
    }
    results
}

/// A number of a job's result: `outputs[k].vs[label][key]`.
fn stat(r: &Value, k: usize, label: &str, key: &str) -> f64 {
    r["outputs"][k]["vs"][label][key]
        .as_f64()
        .unwrap_or_else(|| panic!("no {label}.{key} of output {k} in {r}"))
}

/// The largest difference of any output against `label`, and the reference's magnitude.
fn max_diff(r: &Value, label: &str) -> (f64, f64) {
    let n = r["outputs"].as_array().unwrap().len();
    assert_eq!(
        r["ref_outputs"][label].as_u64(),
        Some(n as u64),
        "{label}: {r}"
    );
    (0..n).fold((0.0, 0.0), |(d, s), k| {
        assert!(
            r["outputs"][k]["vs"][label]["same_shape"]
                .as_bool()
                .unwrap(),
            "{r}"
        );
        (
            f64::max(d, stat(r, k, label, "maxabs")),
            f64::max(s, stat(r, k, label, "scale")),
        )
    })
}

/// Checks raised programs against JAX's float64 runs: `(program, raised job, float32 job)`.
fn assert_closer(results: &BTreeMap<String, Value>, cases: &[(String, String, String)]) {
    println!("{:<26} {:>12} {:>12}", "program", "raised-f64", "f32-f64");
    for (program, raised, original) in cases {
        let (d, scale) = max_diff(&results[raised], "f64");
        let (d32, _) = max_diff(&results[original], "f64");
        println!("{raised:<26} {d:>12.3e} {d32:>12.3e}");
        let bound = ROUNDED_CONSTANTS
            .iter()
            .find(|(p, ..)| p == program)
            .map_or(1e-12, |(_, b, _)| *b);
        assert!(
            d <= bound * (1.0 + scale),
            "{raised}: {d:e} from JAX's float64 run (bound {bound:e}, scale {scale})"
        );
        assert!(
            d <= d32,
            "{raised}: {d:e} against the float32 program's {d32:e}"
        );
        if d32 > 0.0 {
            assert!(d < d32, "{raised}: {d:e} against {d32:e}");
        }
    }
}

#[test]
fn oracle_raised_corpus_is_jaxs_float64_run() {
    let Some(python) = python() else { return };
    let scratch = scratch("raise-hlo");
    let dir = scratch.path();
    let mut jobs = Vec::new();
    let mut cases = Vec::new();
    for stem in corpus() {
        let p = program(&stem).to_string();
        let f64_ref = corpus_dir().join(format!("{p}.f64.npz"));
        if !f64_ref.exists() {
            continue;
        }
        let io = corpus_dir().join(format!("{p}.io.npz"));
        let raised = raise_to_f64(&hlo(&stem)).unwrap_or_else(|e| panic!("{stem}: {e}"));
        let path = dir.join(format!("{stem}.f64.hlo"));
        std::fs::write(&path, &raised.text).unwrap();
        jobs.push(Job {
            name: format!("{stem}.f64"),
            program: path,
            format: "hlo",
            inputs: io.clone(),
            cast: true,
            refs: vec![("f64", f64_ref.clone())],
        });
        if !stem.ends_with(".old") {
            jobs.push(Job {
                name: stem.clone(),
                program: corpus_dir().join(format!("{stem}.hlo")),
                format: "hlo",
                inputs: io,
                cast: false,
                refs: vec![("f64", f64_ref)],
            });
        }
        cases.push((p.clone(), format!("{stem}.f64"), p));
    }
    assert!(cases.len() >= 19, "{cases:?}");
    let results = run_jobs(&python, dir, &jobs);
    assert_closer(&results, &cases);
}

#[test]
fn oracle_raised_stablehlo_is_jaxs_float64_run() {
    let Some(python) = python() else { return };
    let scratch = scratch("raise-mlir");
    let dir = scratch.path();
    let mut jobs = Vec::new();
    let mut cases = Vec::new();
    for (name, m) in mlir_fixtures() {
        let raised = raise_to_f64(&m).unwrap();
        let path = dir.join(format!("{name}.f64.mlir"));
        std::fs::write(&path, &raised.text).unwrap();
        let io = mlir_dir().join(format!("{name}.io.npz"));
        let f64_ref = mlir_dir().join(format!("{name}.f64.npz"));
        jobs.push(Job {
            name: format!("{name}.f64"),
            program: path,
            format: "mlir",
            inputs: io.clone(),
            cast: true,
            refs: vec![("f64", f64_ref.clone())],
        });
        jobs.push(Job {
            name: name.clone(),
            program: mlir_dir().join(format!("{name}.mlir")),
            format: "mlir",
            inputs: io,
            cast: false,
            refs: vec![("f64", f64_ref)],
        });
        cases.push((name.clone(), format!("{name}.f64"), name));
    }
    let results = run_jobs(&python, dir, &jobs);
    assert_closer(&results, &cases);
}

/// The entry's first output that a fault can target: an instruction of a float32 array (not
/// a parameter, nor an element of a tuple), and its index among the outputs.
fn first_float_output(m: &Module) -> Option<(String, usize)> {
    let e = &m.computations[m.entry().unwrap()];
    let root = e.root().unwrap();
    let is_target = |name: &str| {
        e.instructions.iter().any(|i| {
            i.name == name
                && !matches!(i.operands, Operands::Parameter(_))
                && i.opcode != "get-tuple-element"
                && i.shape.to_string().starts_with("f32[")
        })
    };
    if root.opcode == "tuple" {
        root.operand_names()
            .iter()
            .enumerate()
            .find(|(_, n)| is_target(n))
            .map(|(k, n)| (n.to_string(), k))
    } else {
        is_target(&root.name).then(|| (root.name.clone(), 0))
    }
}

#[test]
fn faulted_corpus_programs_check_and_make_protos() {
    for stem in corpus() {
        let m = hlo(&stem);
        let Some((target, _)) = first_float_output(&m) else {
            continue;
        };
        for spec in [
            format!("accuracy=0.5@node:{target}"),
            format!("nan@node:{target}"),
        ] {
            let r = inject(&m, &FaultSpec::parse(&spec).unwrap())
                .unwrap_or_else(|e| panic!("{stem}: {spec}: {e}"));
            to_proto(&r.module).unwrap_or_else(|e| panic!("{stem}: {spec}: {e}"));
            // (attributes.hlo repeats names across computations, as XLA reads but graphbug's
            // check refuses.)
            if let Ok(before) = check(&m) {
                let after = check(&r.module).unwrap();
                assert_eq!(after.outputs, before.outputs, "{stem}");
                assert!(after.instructions > before.instructions, "{stem}");
            }
        }
    }
}

/// A small program over `f32[3,5]` (cumsum's inputs): `exp(x * x)` in HLO and StableHLO, and
/// what a fault of +0.5 on the multiply makes of it, written by hand.
const SMALL_HLO: &str = "HloModule small, entry_computation_layout={(f32[3,5]{1,0})->f32[3,5]{1,0}}

ENTRY main {
  x = f32[3,5]{1,0} parameter(0)
  m = f32[3,5]{1,0} multiply(x, x)
  ROOT e = f32[3,5]{1,0} exponential(m)
}
";
const SMALL_HLO_EXPECTED: &str =
    "HloModule small, entry_computation_layout={(f32[3,5]{1,0})->f32[3,5]{1,0}}

ENTRY main {
  x = f32[3,5]{1,0} parameter(0)
  m = f32[3,5]{1,0} multiply(x, x)
  c = f32[] constant(0.5)
  b = f32[3,5]{1,0} broadcast(c), dimensions={}
  a = f32[3,5]{1,0} add(m, b)
  ROOT e = f32[3,5]{1,0} exponential(a)
}
";
const SMALL_MLIR: &str = "module @small {
  func.func public @main(%arg0: tensor<3x5xf32>) -> tensor<3x5xf32> {
    %0 = stablehlo.multiply %arg0, %arg0 : tensor<3x5xf32>
    %1 = stablehlo.exponential %0 : tensor<3x5xf32>
    return %1 : tensor<3x5xf32>
  }
}
";

#[test]
fn oracle_faulted_programs_compute_the_fault() {
    let Some(python) = python() else { return };
    let scratch = scratch("inject");
    let dir = scratch.path();
    let mut jobs = Vec::new();
    // (job, output index, kind)
    let mut expect: Vec<(String, usize, &str)> = Vec::new();
    let write = |name: &str, text: &str, ext: &str| {
        let path = dir.join(format!("{name}.{ext}"));
        std::fs::write(&path, text).unwrap();
        path
    };
    // Every runnable corpus program, both styles: its first float output faulted.
    for stem in corpus() {
        let p = program(&stem);
        let io = corpus_dir().join(format!("{p}.io.npz"));
        if !io.exists() || REFUSED.iter().any(|(r, ..)| *r == p) {
            continue;
        }
        let m = hlo(&stem);
        let Some((target, k)) = first_float_output(&m) else {
            continue;
        };
        for (kind, spec) in [
            ("accuracy", format!("accuracy=0.5@node:{target}")),
            ("nan", format!("nan@node:{target}")),
        ] {
            let spec = FaultSpec::parse(&spec).unwrap();
            let r = inject(&m, &spec).unwrap_or_else(|e| panic!("{stem}: {e}"));
            let name = format!("{stem}.{kind}");
            jobs.push(Job {
                name: name.clone(),
                program: write(&name, &r.text, "hlo"),
                format: "hlo",
                inputs: io.clone(),
                cast: false,
                refs: vec![("jax", io.clone())],
            });
            expect.push((name, k, kind));
        }
    }
    assert!(expect.len() >= 30, "{expect:?}");
    // StableHLO fixtures: the first returned value faulted.
    for (name, m) in mlir_fixtures() {
        let io = mlir_dir().join(format!("{name}.io.npz"));
        let main = m.main().unwrap();
        let ret = main.body.last().unwrap();
        let first = &ret.uses[0];
        let target = match first.index {
            Some(i) => format!("{}#{i}", first.name),
            None => first.name.clone(),
        };
        if target.contains('#') || target.starts_with("arg") {
            continue;
        }
        for (kind, spec) in [
            ("accuracy", format!("accuracy=0.5@node:{target}")),
            ("nan", format!("nan@node:{target}")),
        ] {
            let r = inject(&m, &FaultSpec::parse(&spec).unwrap())
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            let job = format!("{name}.{kind}");
            jobs.push(Job {
                name: job.clone(),
                program: write(&job, &r.text, "mlir"),
                format: "mlir",
                inputs: io.clone(),
                cast: false,
                refs: vec![("jax", io.clone())],
            });
            expect.push((job, 0, kind));
        }
    }
    // A fault inside a program: +0.5 on the multiply of exp(x * x) is exp(x * x + 0.5).
    let cumsum_io = corpus_dir().join("cumsum.io.npz");
    jobs.push(Job {
        name: "small.expected".into(),
        program: write("small.expected", SMALL_HLO_EXPECTED, "hlo"),
        format: "hlo",
        inputs: cumsum_io.clone(),
        cast: false,
        refs: vec![],
    });
    let spec = FaultSpec::parse("accuracy=0.5@multiply").unwrap();
    let small = inject(&parse_module(SMALL_HLO).unwrap(), &spec).unwrap();
    let small_mlir = inject(&stablehlo::parse_module(SMALL_MLIR).unwrap(), &spec).unwrap();
    for (name, text, format) in [
        ("small.hlo", small.text.as_str(), "hlo"),
        ("small.mlir", small_mlir.text.as_str(), "mlir"),
    ] {
        jobs.push(Job {
            name: name.into(),
            program: write(name, text, format),
            format,
            inputs: cumsum_io.clone(),
            cast: false,
            refs: vec![("expected", dir.join("small.expected.out.npz"))],
        });
    }
    // A tuple-valued target: top-k's (values, indices), whose first read element (the
    // values, output 3) is faulted; the indices (output 4) and the rest stay.
    let gss = corpus_dir().join("gather_scatter_sort.io.npz");
    for stem in ["gather_scatter_sort", "gather_scatter_sort.old"] {
        let r = inject(&hlo(stem), &FaultSpec::parse("accuracy=0.5@topk").unwrap()).unwrap();
        let name = format!("{stem}.topk");
        jobs.push(Job {
            name: name.clone(),
            program: write(&name, &r.text, "hlo"),
            format: "hlo",
            inputs: gss.clone(),
            cast: false,
            refs: vec![("jax", gss.clone())],
        });
        expect.push((name, 3, "accuracy"));
    }
    let results = run_jobs(&python, dir, &jobs);
    for (job, k, kind) in &expect {
        let r = &results[job];
        let (lo, hi, scale) = (
            stat(r, *k, "jax", "lo"),
            stat(r, *k, "jax", "hi"),
            stat(r, *k, "jax", "scale"),
        );
        match *kind {
            "accuracy" => {
                // x + 0.5 in float32: 0.5 within float32's rounding of the output.
                let tol = 1e-5 * (1.0 + scale);
                assert!(
                    (lo - 0.5).abs() <= tol && (hi - 0.5).abs() <= tol,
                    "{job}: output {k} differs from JAX's by {lo}..{hi}, not 0.5"
                );
                println!("{job:<32} output {k} - JAX's: {lo:.9} .. {hi:.9}");
            }
            _ => assert!(
                r["outputs"][*k]["nan"].as_bool().unwrap(),
                "{job}: output {k} is not NaN: {r}"
            ),
        }
    }
    for name in ["small.hlo", "small.mlir"] {
        let d = stat(&results[name], 0, "expected", "maxabs");
        let scale = stat(&results[name], 0, "expected", "scale");
        println!("{name:<32} against exp(x*x + 0.5): {d:e}");
        assert!(d <= 1e-6 * scale, "{name}: {d:e} from exp(x*x + 0.5)");
    }
    for stem in ["gather_scatter_sort", "gather_scatter_sort.old"] {
        let r = &results[&format!("{stem}.topk")];
        for k in [0, 1, 2, 4, 5, 6] {
            let (d, scale) = (stat(r, k, "jax", "maxabs"), stat(r, k, "jax", "scale"));
            assert!(
                d <= 1e-5 * (1.0 + scale),
                "{stem}: output {k} changed by {d}"
            );
        }
    }
}
