//! What `graphbug run` does alike for every dialect: the request, the supervised run, and
//! its outputs printed, saved and compared with a file.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use graphbug_accuracy::{describe, float_values, same, HostTensor, SameOptions};
use graphbug_files::name_list;

/// What a `graphbug run` is asked to do, whatever the dialect. A dialect's own options (an
/// aten graph's device or training step, an XLA program's reference plugin) are the
/// dialect's.
#[derive(Clone, Debug, Default)]
pub struct RunRequest {
    /// The program or graph file.
    pub file: PathBuf,
    /// The backend (default: the dialect's).
    pub backend: Option<String>,
    /// Its inputs; without it, seeded random inputs.
    pub inputs: Option<PathBuf>,
    /// Seed of the random inputs.
    pub seed: u64,
    /// Write the outputs (`out0..`) to this file.
    pub save_outputs: Option<PathBuf>,
    /// Compare the outputs with this file.
    pub compare: Option<PathBuf>,
    /// How long the run may take (`--timeout`).
    pub timeout: Option<Duration>,
    /// Run in this process (`--no-isolate`).
    pub in_process: bool,
}

/// The end of every dialect's `graphbug run`, once the backend has run: `outputs` by name
/// (`out0..`, a training step's `grad0..`; `None` where the program gives nothing) each
/// printed on a line with its statistics, the present ones saved to `--save-outputs`, and
/// compared with `--compare`'s file by TorchDynamo's rules with `fp64` (the float64
/// reference of each present output, in order; without it, allclose only). Exit 1 on a
/// mismatch. `unit`: what the dialect's errors call what ran (`graph`, `program`).
pub fn finish_run(
    req: &RunRequest,
    unit: &str,
    outputs: Vec<(String, Option<HostTensor>)>,
    fp64: Option<Vec<Option<HostTensor>>>,
) -> anyhow::Result<ExitCode> {
    for (name, o) in &outputs {
        println!("{}", summarize(name, o.as_ref()));
    }
    let present: Vec<(String, HostTensor)> = outputs
        .into_iter()
        .filter_map(|(name, o)| Some((name, o?)))
        .collect();
    if let Some(path) = &req.save_outputs {
        graphbug_files::write(path, &present)?;
        println!("saved {} outputs to {}", present.len(), path.display());
    }
    let Some(path) = &req.compare else {
        return Ok(ExitCode::SUCCESS);
    };
    let names: Vec<&str> = present.iter().map(|(n, _)| n.as_str()).collect();
    let expected = expected_outputs(path, unit, &names)?;
    let ours: Vec<Option<HostTensor>> = present.into_iter().map(|(_, t)| Some(t)).collect();
    let report = same(&expected, &ours, fp64.as_deref(), &SameOptions::repro());
    Ok(report_comparison(&report, path))
}

/// `name: f32[2, 3] min=.. max=.. mean=..` (statistics of floating tensors; NaN where
/// any element is NaN, as libtorch's), `name: None` for nothing.
fn summarize(name: &str, t: Option<&HostTensor>) -> String {
    let Some(t) = t else {
        return format!("{name}: None");
    };
    let meta = describe(Some(t));
    match float_values(t) {
        Some(v) if !v.is_empty() => {
            let pick = |f: fn(f64, f64) -> f64| {
                v.iter()
                    .copied()
                    .reduce(|a, b| {
                        if a.is_nan() || b.is_nan() {
                            f64::NAN
                        } else {
                            f(a, b)
                        }
                    })
                    .unwrap_or(f64::NAN)
            };
            let (min, max) = (pick(f64::min), pick(f64::max));
            let mean = v.iter().sum::<f64>() / v.len() as f64;
            format!("{name}: {meta} min={min:.6e} max={max:.6e} mean={mean:.6e}")
        }
        _ => format!("{name}: {meta}"),
    }
}

/// The tensors `names` of the file at `path`, in that order; a file without one of them,
/// or with another, is an error that lists both (`unit`: what ran, `graph`).
fn expected_outputs(
    path: &Path,
    unit: &str,
    names: &[&str],
) -> anyhow::Result<Vec<Option<HostTensor>>> {
    let mut file = graphbug_files::read(path)?;
    let keys: Vec<&str> = file.iter().map(|(k, _)| k.as_str()).collect();
    if keys.len() != names.len() || names.iter().any(|n| !keys.contains(n)) {
        anyhow::bail!(
            "{}: the {unit} has {} outputs ({}), the file has {} tensors ({})",
            path.display(),
            names.len(),
            name_list(names),
            keys.len(),
            name_list(&keys)
        );
    }
    Ok(names
        .iter()
        .map(|&name| {
            let j = file.iter().position(|(k, _)| k == name)?;
            Some(file.swap_remove(j).1)
        })
        .collect())
}

/// Prints the comparison of a run's outputs with the file at `path` (the reference: NaN/Inf
/// must sit where the file has them, and the float64 rule excuses a difference only when
/// the file is close to graphbug's own float64 run) and its verdict; exit 1 on a mismatch.
fn report_comparison(report: &graphbug_accuracy::AccuracyReport, path: &Path) -> ExitCode {
    print!("{report}");
    if !report.passed() {
        eprintln!("outputs do not match {}", path.display());
        return ExitCode::FAILURE;
    }
    println!("outputs match {}", path.display());
    ExitCode::SUCCESS
}

/// Re-runs this run in a child bounded by `req`'s limit (see [`crate::supervise`]), unless
/// it runs in process: a crash or a hang of the child is said as a failure of `backend`.
pub fn supervise_run(req: &RunRequest, backend: &str) -> anyhow::Result<Option<ExitCode>> {
    crate::supervise(req.timeout, req.in_process, |run, limit| {
        run.failure(backend, limit)
            .map(|f| f.to_string())
            .unwrap_or_default()
    })
}
