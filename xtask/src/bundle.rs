//! `cargo xtask gpu-bundle`: what a GPU machine without Rust or network needs to run the XLA
//! fixtures on its CUDA plugin: the stripped libtorch-free `graphbug`, every fixture program
//! with its inputs and the outputs `pjrt:cpu` gave here, and `run.sh`, which runs each
//! fixture on `pjrt:$PLUGIN` (default `cuda`, found through JAX's `jax_plugins.xla_cuda13`),
//! compares it with the CPU's outputs by graphbug's accuracy rules, checks that an injected
//! fault is caught, and prints a table of the figures.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, ensure, Context, Result};

/// The most a bundle may weigh: what the GPU machine takes.
pub const MAX_BUNDLE_BYTES: u64 = 64 << 20;

/// The target directory of the stripped libtorch-free release build.
pub const XLA_TARGET_DIR: &str = "target/xla-release";

/// Builds the stripped release `graphbug` without libtorch (`--no-default-features`, in
/// [`XLA_TARGET_DIR`]); its path.
pub fn build_xla_binary(root: &Path) -> Result<PathBuf> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let status = crate::process::die_with_parent(&mut Command::new(cargo))
        .args([
            "build",
            "--release",
            "--no-default-features",
            "-p",
            "graphbug",
            "--bin",
            "graphbug",
        ])
        .arg("--target-dir")
        .arg(root.join(XLA_TARGET_DIR))
        .env("CARGO_PROFILE_RELEASE_STRIP", "true")
        .current_dir(root)
        .status()
        .context("cannot run cargo build")?;
    ensure!(
        status.success(),
        "the libtorch-free release build failed ({status})"
    );
    Ok(root.join(XLA_TARGET_DIR).join("release/graphbug"))
}

/// One fixture of the bundle: a program and the file of its inputs and JAX's outputs.
#[derive(Clone, Debug)]
pub struct Fixture {
    /// Its name in the bundle (`hlo-convnet`, `stablehlo-mlp`).
    pub name: String,
    /// The program file.
    pub program: PathBuf,
    /// The `.io.npz` beside it: inputs `arg<k>` and JAX's outputs `out<k>`.
    pub io: PathBuf,
}

/// The XLA fixtures that have inputs: the HLO corpus's `NAME.hlo` and the StableHLO
/// fixtures' `NAME.mlir`, in name order.
pub fn fixtures(root: &Path) -> Result<Vec<Fixture>> {
    let mut found = Vec::new();
    for (dir, ext, dialect) in [("hlo", "hlo", "hlo"), ("stablehlo", "mlir", "stablehlo")] {
        let dir = root.join("tests/fixtures/xla").join(dir);
        let mut names: Vec<String> = std::fs::read_dir(&dir)
            .with_context(|| format!("{}", dir.display()))?
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .filter_map(|n| n.strip_suffix(".io.npz").map(str::to_string))
            .collect();
        names.sort();
        for n in names {
            let program = dir.join(format!("{n}.{ext}"));
            ensure!(
                program.is_file(),
                "{} has inputs but no program",
                program.display()
            );
            found.push(Fixture {
                name: format!("{dialect}-{n}"),
                program,
                io: dir.join(format!("{n}.io.npz")),
            });
        }
    }
    Ok(found)
}

/// Named tensors, as tensor files hold them.
pub type Named = Vec<(String, graphbug_files::HostTensor)>;

/// A fixture's `.io.npz` split into its inputs (`arg<k>`, as `graphbug run` reads them) and
/// JAX's outputs (`out<k>`), each in the file's order.
pub fn split_io(io: &Path) -> Result<(Named, Named)> {
    let (inputs, outputs) = graphbug_files::read(io)
        .with_context(|| format!("{}", io.display()))?
        .into_iter()
        .partition(|(k, _)| k.starts_with("arg"));
    Ok((inputs, outputs))
}

/// Writes the bundle into `out` (emptied first) with the `graphbug` at `binary`, recording
/// each fixture's outputs on `pjrt:cpu` with that binary; the bundle's size in bytes
/// (`cargo xtask gpu-bundle` holds it to [`MAX_BUNDLE_BYTES`]).
pub fn make_bundle(root: &Path, binary: &Path, out: &Path) -> Result<u64> {
    if out.exists() {
        std::fs::remove_dir_all(out).with_context(|| format!("{}", out.display()))?;
    }
    let fixtures_dir = out.join("fixtures");
    std::fs::create_dir_all(&fixtures_dir)?;
    let bin = out.join("graphbug");
    std::fs::copy(binary, &bin).with_context(|| format!("{}", binary.display()))?;
    let mut names = Vec::new();
    let mut excluded = String::new();
    for f in fixtures(root)? {
        let ext = f
            .program
            .extension()
            .and_then(|e| e.to_str())
            .unwrap_or("hlo");
        let program = fixtures_dir.join(format!("{}.{ext}", f.name));
        std::fs::copy(&f.program, &program)?;
        let (inputs, _) = split_io(&f.io)?;
        let input_file = fixtures_dir.join(format!("{}.in.npz", f.name));
        graphbug_files::write(&input_file, &inputs)
            .with_context(|| format!("{}", input_file.display()))?;
        let cpu = fixtures_dir.join(format!("{}.cpu.npz", f.name));
        let run = crate::process::die_with_parent(&mut Command::new(&bin))
            .arg("run")
            .arg(&program)
            .args(["--backend", "pjrt:cpu", "--inputs"])
            .arg(&input_file)
            .arg("--save-outputs")
            .arg(&cpu)
            .output()
            .context("cannot run the bundle's graphbug")?;
        if !run.status.success() {
            let err = String::from_utf8_lossy(&run.stderr);
            if let Some(target) = crate::conformance::xla::missing_ffi_handler(err.trim()) {
                // The CPU plugin's gap (JAX registers LAPACK in its own client): no
                // outputs to compare with, so the fixture stays out, named.
                let why = format!(
                    "{}: pjrt:cpu has no handler for custom call `{target}`\n",
                    f.name
                );
                print!("gpu-bundle: left out {why}");
                excluded.push_str(&why);
                for file in [&program, &input_file] {
                    std::fs::remove_file(file)?;
                }
                continue;
            }
            bail!(
                "fixture {} does not run on pjrt:cpu: {}",
                f.name,
                String::from_utf8_lossy(&run.stderr).trim()
            );
        }
        names.push(f.name);
    }
    if !excluded.is_empty() {
        std::fs::write(out.join("LEFT_OUT.txt"), excluded)?;
    }
    finish(
        out,
        RUN_SH,
        README,
        "gpu-bundle",
        &format!("{} fixtures", names.len()),
    )
}

/// Writes a bundle's executable `run.sh` and its `README.txt` into `out` (which holds its
/// `graphbug`), prints what `command` made (`contents`, the bundle's and the binary's
/// sizes), and returns the bundle's bytes.
pub(crate) fn finish(
    out: &Path,
    run_sh: &str,
    readme: &str,
    command: &str,
    contents: &str,
) -> Result<u64> {
    let script = out.join("run.sh");
    std::fs::write(&script, run_sh)?;
    std::fs::write(out.join("README.txt"), readme)?;
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755))?;
    let size = dir_size(out)?;
    println!(
        "{command}: {} ({contents}, {:.1} MiB; graphbug {:.1} MiB)",
        out.display(),
        size as f64 / (1 << 20) as f64,
        std::fs::metadata(out.join("graphbug"))?.len() as f64 / (1 << 20) as f64
    );
    Ok(size)
}

/// Fails when a bundle of `size` bytes is more than a GPU machine takes.
pub fn within_limit(size: u64) -> Result<()> {
    ensure!(
        size <= MAX_BUNDLE_BYTES,
        "the bundle weighs {:.1} MiB, over the {} MiB a GPU machine takes",
        size as f64 / (1 << 20) as f64,
        MAX_BUNDLE_BYTES >> 20
    );
    Ok(())
}

/// The bytes of the files under `dir`.
fn dir_size(dir: &Path) -> Result<u64> {
    let mut total = 0;
    for e in std::fs::read_dir(dir)? {
        let e = e?;
        let meta = e.metadata()?;
        total += if meta.is_dir() {
            dir_size(&e.path())?
        } else {
            meta.len()
        };
    }
    Ok(total)
}

const README: &str = "\
graphbug GPU bundle (made by `cargo xtask gpu-bundle`)

  ./run.sh                 every fixture on the CUDA PJRT plugin (JAX's jax-cuda13-pjrt)
  PLUGIN=NAME ./run.sh     on pjrt:NAME (PJRT_NAMES_AND_LIBRARY_PATHS=NAME:/path/plugin.so)

Each fixture runs with `graphbug run --backend pjrt:$PLUGIN --inputs X.in.npz --compare
X.cpu.npz` (the outputs pjrt:cpu gave when the bundle was made; TorchDynamo's accuracy rules,
with a float64 reference run on the same plugin), then one fixture again with an accuracy
fault injected, which must be caught. Exit 0 when every fixture matches and the fault is
caught.
";

const RUN_SH: &str = r#"#!/usr/bin/env bash
# Runs every fixture on pjrt:$PLUGIN against the outputs pjrt:cpu gave when the bundle was
# made, then checks that an injected accuracy fault is caught; prints a table of figures.
set -u
here=$(cd "$(dirname "$0")" && pwd)
PLUGIN=${PLUGIN:-cuda}
PYTHON=${PYTHON:-python3}
TIMEOUT=${TIMEOUT:-300}
if [ "$PLUGIN" = cuda ] && [ -z "${PJRT_NAMES_AND_LIBRARY_PATHS:-}" ]; then
  lib=$("$PYTHON" -c 'import os, jax_plugins.xla_cuda13 as p; print(os.path.join(os.path.dirname(p.__file__), "xla_cuda_plugin.so"))' 2>/dev/null) || {
    echo "run.sh: no CUDA PJRT plugin: $PYTHON cannot import jax_plugins.xla_cuda13 (pip jax-cuda13-pjrt); set PJRT_NAMES_AND_LIBRARY_PATHS=cuda:/path/xla_cuda_plugin.so" >&2
    exit 2
  }
  export PJRT_NAMES_AND_LIBRARY_PATHS="cuda:$lib"
  # The CUDA libraries of the nvidia-* wheels beside it, as JAX finds them.
  for d in "$(dirname "$(dirname "$(dirname "$lib")")")"/nvidia/*/lib; do
    [ -d "$d" ] && LD_LIBRARY_PATH="$d${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  done
  export LD_LIBRARY_PATH
fi
now() { date +%s.%N; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", b - a }'; }
echo "graphbug GPU bundle: plugin pjrt:$PLUGIN"
"$here/graphbug" backends | grep -i pjrt || true
printf '%-28s %-10s %9s\n' fixture result seconds
pass=0; total=0
for program in "$here"/fixtures/*.hlo "$here"/fixtures/*.mlir; do
  name=$(basename "${program%.*}")
  total=$((total + 1))
  t0=$(now)
  if "$here/graphbug" run "$program" --backend "pjrt:$PLUGIN" --reference-backend "pjrt:$PLUGIN" \
       --inputs "$here/fixtures/$name.in.npz" --compare "$here/fixtures/$name.cpu.npz" \
       --timeout "$TIMEOUT" > "$here/fixtures/$name.log" 2>&1; then
    result=match; pass=$((pass + 1))
  elif grep -q "outputs do not match" "$here/fixtures/$name.log"; then
    result=MISMATCH
  else
    result=ERROR
  fi
  t1=$(now)
  printf '%-28s %-10s %9s\n' "$name" "$result" "$(secs "$t0" "$t1")"
  [ "$result" = match ] || sed 's/^/    /' "$here/fixtures/$name.log" | tail -5
done
# The checks can fail: an accuracy fault on the plugin must be caught.
fault=hlo-transformer
t0=$(now)
if "$here/graphbug" run "$here/fixtures/$fault.hlo" --backend "fault:accuracy@add+pjrt:$PLUGIN" \
     --reference-backend "pjrt:$PLUGIN" --inputs "$here/fixtures/$fault.in.npz" \
     --compare "$here/fixtures/$fault.cpu.npz" --timeout "$TIMEOUT" > "$here/fixtures/fault.log" 2>&1; then
  caught=NOT-CAUGHT
elif grep -q "outputs do not match" "$here/fixtures/fault.log"; then
  caught=caught
else
  caught=ERROR; sed 's/^/    /' "$here/fixtures/fault.log" | tail -5
fi
t1=$(now)
printf '%-28s %-10s %9s\n' "fault:accuracy@add" "$caught" "$(secs "$t0" "$t1")"
echo "$pass/$total fixtures match pjrt:cpu on pjrt:$PLUGIN; injected fault: $caught"
[ "$pass" = "$total" ] && [ "$caught" = caught ]
"#;
