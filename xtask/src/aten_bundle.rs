//! `cargo xtask aten-gpu-bundle`: what a GPU machine whose Python has PyTorch 2.11 with
//! CUDA, and no Rust, needs to run graphbug's aten checks on `cuda`: a stripped `graphbug`
//! linked against torch 2.11's libtorch (it loads that machine's libtorch, CUDA included,
//! at run time), the reference models' graphs with PyTorch's inputs and outputs, the
//! gradients graphbug computed on CPU when the bundle was made, and `run.sh`, which runs,
//! compares, trains, minifies and measures the peak memory of a training step against the
//! CUDA caching allocator's own figure, and prints a table.
//!
//! graphbug's `tch`/`torch-sys` 0.26 are written for libtorch 2.13. Built against 2.11,
//! `torch-sys`'s generated C wrappers name a few ops 2.11 lacks; those wrappers are found
//! by compiling the file against 2.11's headers and made to fail by name when called
//! (graphbug reaches ops through the boxed dispatcher, never through them).

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{ensure, Context, Result};

use crate::process::die_with_parent;

/// The PyTorch of the GPU machines the bundle is for.
pub const GPU_TORCH: &str = "2.11.0";

/// Where the bundle's libtorch, patched `torch-sys` and build live.
pub const WORK_DIR: &str = "target/aten-gpu";

/// The reference models whose graphs the bundle runs.
pub const MODELS: [&str; 3] = ["mlp", "cnn", "gpt4"];

/// The node of gpt4's forward an accuracy fault is pinned to for the minify check.
pub const FAULT_NODE: &str = "addmm_4";

/// The venv's Python.
fn python(root: &Path) -> PathBuf {
    root.join(".venv/bin/python")
}

/// Runs `cmd` (killed with xtask), failing with its output when it fails.
fn run(cmd: &mut Command, what: &str) -> Result<std::process::Output> {
    let out = die_with_parent(cmd)
        .output()
        .with_context(|| format!("cannot start {what}"))?;
    ensure!(
        out.status.success(),
        "{what} failed ({}): {}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout).trim(),
        String::from_utf8_lossy(&out.stderr).trim()
    );
    Ok(out)
}

/// torch 2.11's libtorch (`include/`, `lib/`, `share/` of its wheel from PyPI, the
/// CUDA 13 build the GPU machines have), downloaded once into [`WORK_DIR`].
pub fn gpu_libtorch(root: &Path) -> Result<PathBuf> {
    let dir = root.join(WORK_DIR).join(format!("torch-{GPU_TORCH}"));
    let libtorch = dir.join("torch");
    if libtorch.join("lib/libtorch_cpu.so").is_file() {
        return Ok(libtorch);
    }
    let (wheels, unpacking) = (dir.join("wheel"), dir.join("unpacking"));
    for partial in [&wheels, &unpacking] {
        if partial.exists() {
            std::fs::remove_dir_all(partial)?;
        }
    }
    println!(
        "aten-gpu-bundle: downloading torch=={GPU_TORCH}'s wheel (about 530 MB) for its libtorch"
    );
    run(
        Command::new(python(root))
            .args([
                "-m",
                "pip",
                "download",
                "--no-deps",
                "--only-binary=:all:",
                "-q",
            ])
            .arg(format!("torch=={GPU_TORCH}"))
            .arg("-d")
            .arg(&wheels),
        "pip download",
    )?;
    run(
        Command::new(python(root))
            .args([
                "-c",
                "import glob, sys, zipfile\n\
                 [wheel] = glob.glob(sys.argv[1] + '/torch-*.whl')\n\
                 z = zipfile.ZipFile(wheel)\n\
                 for n in z.namelist():\n\
                 \x20   if n.startswith(('torch/include/', 'torch/lib/', 'torch/share/')):\n\
                 \x20       z.extract(n, sys.argv[2])",
            ])
            .arg(&wheels)
            .arg(&unpacking),
        "unpacking the torch wheel",
    )?;
    // Whole or not there: an unpacking cut short is never taken for a libtorch.
    std::fs::rename(unpacking.join("torch"), &libtorch)?;
    std::fs::remove_dir_all(&unpacking)?;
    std::fs::remove_dir_all(&wheels)?;
    Ok(libtorch)
}

/// The CUDA runtime libraries torch's wheels depend on (`nvidia/cu13/lib` of the venv's
/// torch): the linker resolves libtorch's own dependencies there.
fn cuda_libraries(root: &Path) -> Result<PathBuf> {
    let out = run(
        Command::new(python(root)).args([
            "-c",
            "import os, torch; print(os.path.join(os.path.dirname(os.path.dirname(torch.__file__)), 'nvidia', 'cu13', 'lib'))",
        ]),
        "finding the venv's CUDA libraries",
    )?;
    let dir = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    ensure!(
        dir.join("libcudart.so.13").exists(),
        "no libcudart.so.13 in {} (the venv's torch must be a CUDA 13 build)",
        dir.display()
    );
    Ok(dir)
}

/// The `torch-sys` crate graphbug builds with, copied into [`WORK_DIR`], with every
/// generated wrapper that does not compile against `libtorch` made to fail by name; the
/// copy's directory and the wrappers changed.
pub fn patched_torch_sys(root: &Path, libtorch: &Path) -> Result<(PathBuf, Vec<String>)> {
    let metadata = run(
        Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
            .args(["metadata", "--format-version", "1", "--locked"])
            .current_dir(root),
        "cargo metadata",
    )?;
    let json: serde_json::Value = serde_json::from_slice(&metadata.stdout)?;
    let manifest = json["packages"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|p| p["name"] == "torch-sys")
        .and_then(|p| p["manifest_path"].as_str())
        .context("cargo metadata names no torch-sys package")?;
    let source = Path::new(manifest)
        .parent()
        .context("torch-sys's manifest")?;
    // The copy is rewritten only where it differs, so a second build compiles nothing again.
    let copy = root.join(WORK_DIR).join("torch-sys");
    let generated = Path::new("libtch/torch_api_generated.cpp");
    copy_dir(source, &copy, &source.join(generated))?;
    let file = copy.join(generated);
    let original = source.join(generated);
    let check = die_with_parent(Command::new("g++").args([
        "-std=c++17",
        "-fsyntax-only",
        "-D_GLIBCXX_USE_CXX11_ABI=1",
    ]))
    .arg(format!("-I{}", libtorch.join("include").display()))
    .arg(format!(
        "-I{}",
        libtorch.join("include/torch/csrc/api/include").display()
    ))
    .arg(&original)
    .output()
    .context("cannot run g++")?;
    let errors = String::from_utf8_lossy(&check.stderr);
    let lines = error_lines(&errors, "torch_api_generated.cpp");
    ensure!(
        check.status.success() || !lines.is_empty(),
        "torch-sys's wrappers do not compile against {}, and not in its generated ops: {}",
        libtorch.display(),
        errors.lines().take(20).collect::<Vec<_>>().join("\n")
    );
    let text = std::fs::read_to_string(&original)?;
    let (patched, stubbed) = stub_functions(&text, &lines, GPU_TORCH)?;
    write_if_changed(&file, patched.as_bytes())?;
    Ok((copy, stubbed))
}

/// Copies the directory `from` to `to` (files and folders) but the file `except`, leaving
/// files already equal.
fn copy_dir(from: &Path, to: &Path, except: &Path) -> Result<()> {
    std::fs::create_dir_all(to)?;
    for e in std::fs::read_dir(from)? {
        let e = e?;
        let target = to.join(e.file_name());
        if e.file_type()?.is_dir() {
            copy_dir(&e.path(), &target, except)?;
        } else if e.path() != except {
            write_if_changed(&target, &std::fs::read(e.path())?)?;
        }
    }
    Ok(())
}

/// Writes `bytes` to `file` unless it holds them already (its time stamp then stays, and
/// cargo sees nothing to build again).
fn write_if_changed(file: &Path, bytes: &[u8]) -> Result<()> {
    if std::fs::read(file).ok().as_deref() != Some(bytes) {
        std::fs::write(file, bytes).with_context(|| format!("{}", file.display()))?;
    }
    Ok(())
}

/// The 1-based lines of `file` that g++'s `errors` name.
pub fn error_lines(errors: &str, file: &str) -> Vec<usize> {
    let mut lines: Vec<usize> = errors
        .lines()
        .filter(|l| l.contains(": error:"))
        .filter_map(|l| {
            let at = l.find(&format!("{file}:"))? + file.len() + 1;
            l[at..].split(':').next()?.parse().ok()
        })
        .collect();
    lines.sort_unstable();
    lines.dedup();
    lines
}

/// `text` with the body of every top-level function holding one of the 1-based `lines`
/// replaced by one that fails, naming the function and libtorch `version`; the names of
/// the functions replaced.
pub fn stub_functions(text: &str, lines: &[usize], version: &str) -> Result<(String, Vec<String>)> {
    let lines_of: Vec<&str> = text.lines().collect();
    // (first line, closing line) of each function to replace, in file order.
    let mut spans: Vec<(usize, usize)> = Vec::new();
    for &line in lines {
        let at = line
            .checked_sub(1)
            .filter(|&i| i < lines_of.len())
            .with_context(|| format!("error at line {line}, past the file's end"))?;
        // The function's first line: the last line at or above, in column 0, that opens it.
        let start = (0..=at)
            .rev()
            .find(|&i| {
                !lines_of[i].starts_with([' ', '}']) && lines_of[i].trim_end().ends_with('{')
            })
            .with_context(|| format!("no function holds line {line}"))?;
        let end = (start + 1..lines_of.len())
            .find(|&i| lines_of[i] == "}")
            .with_context(|| format!("the function at line {} does not end", start + 1))?;
        if !spans.contains(&(start, end)) {
            spans.push((start, end));
        }
    }
    spans.sort_unstable();
    let (mut out, mut names, mut next) = (String::new(), Vec::new(), 0);
    for (start, end) in spans {
        let signature = lines_of[start];
        let name = signature
            .split('(')
            .next()
            .and_then(|s| s.split_whitespace().last())
            .unwrap_or("?")
            .trim_start_matches('*');
        for l in &lines_of[next..=start] {
            out.push_str(l);
            out.push('\n');
        }
        out.push_str(&format!(
            "  torch_last_err = strdup(\"{name}: this op is not in libtorch {version}\");\n"
        ));
        if !signature.starts_with("void ") {
            out.push_str("  return {};\n");
        }
        names.push(name.to_string());
        next = end;
    }
    for l in &lines_of[next..] {
        out.push_str(l);
        out.push('\n');
    }
    Ok((out, names))
}

/// Builds the stripped release `graphbug` against [`gpu_libtorch`] (in [`WORK_DIR`], with
/// the [`patched_torch_sys`]); its path and the directories it loads its libraries from
/// here (the libtorch's `lib` and the CUDA runtime's).
pub fn build_aten_binary(root: &Path) -> Result<(PathBuf, Vec<PathBuf>)> {
    let libtorch = gpu_libtorch(root)?;
    let (torch_sys, stubbed) = patched_torch_sys(root, &libtorch)?;
    if !stubbed.is_empty() {
        println!(
            "aten-gpu-bundle: {} torch-sys wrappers name ops libtorch {GPU_TORCH} lacks; they fail by name: {}",
            stubbed.len(),
            stubbed.join(", ")
        );
    }
    let cuda = cuda_libraries(root)?;
    let target = root.join(WORK_DIR).join("build");
    // The patch changes Cargo.lock's source of torch-sys: the project's lock file is put
    // back however the build ends.
    struct Restore(PathBuf, Vec<u8>);
    impl Drop for Restore {
        fn drop(&mut self) {
            let _ = std::fs::write(&self.0, &self.1);
        }
    }
    let lock = root.join("Cargo.lock");
    let _restore = Restore(lock.clone(), std::fs::read(&lock)?);
    let status = die_with_parent(&mut Command::new(
        std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()),
    ))
    .args(["build", "--release", "-p", "graphbug", "--bin", "graphbug"])
    .arg("--target-dir")
    .arg(&target)
    .arg("--config")
    .arg(format!(
        "patch.crates-io.torch-sys.path={:?}",
        torch_sys.display().to_string()
    ))
    .env("LIBTORCH", &libtorch)
    .env("LIBTORCH_BYPASS_VERSION_CHECK", "1")
    .env("LIBTORCH_CXX11_ABI", "1")
    .env("CARGO_PROFILE_RELEASE_STRIP", "true")
    .env("CARGO_PROFILE_RELEASE_DEBUG", "false")
    .env(
        "RUSTFLAGS",
        format!("-C link-arg=-Wl,-rpath-link,{}", cuda.display()),
    )
    .current_dir(root)
    .status()
    .context("cannot run cargo build")?;
    ensure!(
        status.success(),
        "the release build against libtorch {GPU_TORCH} failed ({status})"
    );
    Ok((
        target.join("release/graphbug"),
        vec![libtorch.join("lib"), cuda],
    ))
}

/// Writes the bundle into `out` (emptied first) with the `graphbug` at `binary`, which
/// runs here with `libs` first on the library path (its libtorch's, if not the project's),
/// recording each model's training step on CPU; the bundle's size in bytes (`cargo xtask
/// aten-gpu-bundle` holds it to [`crate::bundle::MAX_BUNDLE_BYTES`]).
pub fn make_aten_bundle(root: &Path, binary: &Path, libs: &[PathBuf], out: &Path) -> Result<u64> {
    if out.exists() {
        std::fs::remove_dir_all(out).with_context(|| format!("{}", out.display()))?;
    }
    std::fs::create_dir_all(out)?;
    let bin = out.join("graphbug");
    std::fs::copy(binary, &bin).with_context(|| format!("{}", binary.display()))?;
    let library_path = std::env::join_paths(libs.iter().cloned().chain(std::env::split_paths(
        &std::env::var_os("LD_LIBRARY_PATH").unwrap_or_default(),
    )))?;
    for model in MODELS {
        let from = root.join("tests/fixtures").join(model);
        let dir = out.join(model);
        std::fs::create_dir_all(&dir)?;
        for f in ["forward.py", "joint.py", "inputs.npz", "outputs.npz"] {
            std::fs::copy(from.join(f), dir.join(f))
                .with_context(|| format!("{}", from.join(f).display()))?;
        }
        run(
            Command::new(&bin)
                .arg("run")
                .arg(dir.join("forward.py"))
                .args(["--backward", "--inputs"])
                .arg(dir.join("inputs.npz"))
                .arg("--save-outputs")
                .arg(dir.join("train.cpu.safetensors"))
                .env("LD_LIBRARY_PATH", &library_path),
            &format!("the training step of {model} on CPU"),
        )?;
    }
    let forward = std::fs::read_to_string(out.join("gpt4/forward.py"))?;
    ensure!(
        forward.contains(&format!("        {FAULT_NODE}: ")),
        "gpt4's forward has no node `{FAULT_NODE}` to pin the fault to"
    );
    std::fs::copy(
        root.join("crates/aten/aten/python/torch_graph.py"),
        out.join("torch_graph.py"),
    )?;
    std::fs::copy(root.join("xtask/python/peak.py"), out.join("peak.py"))?;
    std::fs::write(out.join("TORCH_VERSION"), format!("{GPU_TORCH}\n"))?;
    crate::bundle::finish(
        out,
        &RUN_SH.replace("@FAULT_NODE@", FAULT_NODE),
        README,
        "aten-gpu-bundle",
        &format!("{} models", MODELS.len()),
    )
}

const README: &str = "\
graphbug aten GPU bundle (made by `cargo xtask aten-gpu-bundle`)

  ./run.sh                   the checks on cuda, with python3's PyTorch (2.11, CUDA)
  DEVICE=cuda:1 ./run.sh     on another GPU; DEVICE=cpu runs them on the CPU
  PYTHON=/path/python ./run.sh

graphbug was linked against libtorch 2.11 (TORCH_VERSION) and loads the libtorch of
$PYTHON's torch at run time, CUDA included. For each of mlp, cnn and gpt4 (PyTorch's
graphs, inputs and outputs): run on $DEVICE and compare with PyTorch's outputs; a training
step (forward and gradients) compared with graphbug's CPU step made with the bundle; the
partitioned step's peak memory, graphbug's modelled and measured figures against the CUDA
caching allocator's when PyTorch runs the same two graphs (peak.py). Then on gpt4: an
injected accuracy fault must be caught, and minified to the faulted node. Exit 0 when every
check passes.
";

const RUN_SH: &str = r#"#!/usr/bin/env bash
# graphbug's aten checks on $DEVICE with $PYTHON's libtorch; prints a table of figures.
set -u
here=$(cd "$(dirname "$0")" && pwd)
DEVICE=${DEVICE:-cuda}
PYTHON=${PYTHON:-python3}
TIMEOUT=${TIMEOUT:-600}
lib=$("$PYTHON" -c 'import os, torch; print(os.path.join(os.path.dirname(torch.__file__), "lib"))') || {
  echo "run.sh: $PYTHON cannot import torch" >&2
  exit 2
}
have=$("$PYTHON" -c 'import torch; print(torch.__version__.split("+")[0])')
want=$(cat "$here/TORCH_VERSION")
[ "$have" = "$want" ] || echo "run.sh: graphbug was linked against libtorch $want; $PYTHON has torch $have" >&2
export LD_LIBRARY_PATH="$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
gb="$here/graphbug"
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
now() { date +%s.%N; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", b - a }'; }
pass=0; total=0
# check NAME WANT CMD...: runs CMD, passes when its exit status is WANT (0, or 1 for a
# mismatch that must be found); prints a row.
check() {
  local name=$1 want=$2; shift 2
  total=$((total + 1))
  local t0 t1 rc result
  t0=$(now)
  "$@" > "$logs/$name.log" 2>&1; rc=$?
  t1=$(now)
  if [ "$rc" = "$want" ]; then result=pass; pass=$((pass + 1)); else result="FAIL($rc)"; fi
  printf '%-22s %-9s %9s  %s\n' "$name" "$result" "$(secs "$t0" "$t1")" "${note:-}"
  [ "$result" = pass ] || sed 's/^/    /' "$logs/$name.log" | tail -8
  note=
}
echo "graphbug aten bundle on $DEVICE: torch $have from $lib"
printf '%-22s %-9s %9s  %s\n' check result seconds figures
for m in mlp cnn gpt4; do
  d="$here/$m"
  check "$m run" 0 "$gb" run "$d/forward.py" --device "$DEVICE" --inputs "$d/inputs.npz" \
    --compare "$d/outputs.npz" --timeout "$TIMEOUT"
  check "$m train" 0 "$gb" run "$d/forward.py" --device "$DEVICE" --backward \
    --inputs "$d/inputs.npz" --compare "$d/train.cpu.safetensors" --timeout "$TIMEOUT"
  "$gb" partition "$d/joint.py" > "$logs/$m.partition.py" 2>&1
  if "$gb" partition "$d/joint.py" --measure-peak --device "$DEVICE" --inputs "$d/inputs.npz" \
       --json > "$logs/$m.peak.json" 2> "$logs/$m.peak.err" &&
     "$PYTHON" "$here/peak.py" "$logs/$m.partition.py" "$d/inputs.npz" "$logs/$m.peak.json" \
       "$DEVICE" > "$logs/$m.peak.out" 2>&1; then
    note=$(cat "$logs/$m.peak.out")
  else
    note="$(cat "$logs/$m.peak.err" "$logs/$m.peak.out" 2>/dev/null | tail -3)"
  fi
  # graphbug's model equals its measurement; the allocator's peak is the model's, up to
  # its rounding of each block to 512 bytes (and no less).
  check "$m peak" 0 "$PYTHON" -c '
import json, sys
f = json.loads(sys.argv[1])
ok = f["modelled"] == f["measured"]
if f["allocator"] is not None:
    ok = ok and f["modelled"] <= f["allocator"] <= f["modelled"] + f["rounding"]
sys.exit(0 if ok else 1)' "$note"
done
d="$here/gpt4"
check "gpt4 fault caught" 1 "$gb" run "$d/forward.py" --device "$DEVICE" \
  --backend "fault:accuracy@node:@FAULT_NODE@" --inputs "$d/inputs.npz" \
  --compare "$d/outputs.npz" --timeout "$TIMEOUT"
check "gpt4 minify" 0 "$gb" minify "$d/forward.py" --device "$DEVICE" --inputs "$d/inputs.npz" \
  --backend "fault:accuracy@node:@FAULT_NODE@" --check accuracy --json --timeout "$TIMEOUT"
end=$(grep -o '"end_nodes":[0-9]*' "$logs/gpt4 minify.log" | cut -d: -f2)
total=$((total + 1))
if [ "${end:-}" = 1 ] && grep -q '@FAULT_NODE@: ' "$logs/gpt4 minify.log"; then
  pass=$((pass + 1)); echo "gpt4 minified to the faulted node @FAULT_NODE@ alone"
else
  echo "gpt4 minify ended at ${end:-?} nodes, not at @FAULT_NODE@ alone"
fi
echo "$pass/$total checks pass on $DEVICE"
[ "$pass" = "$total" ]
"#;

#[cfg(test)]
mod tests {
    use super::*;

    const GENERATED: &str = "\
void atg_abs(tensor *out__, tensor self) {
  PROTECT(
    auto outputs__ = torch::abs(*self);
    out__[0] = new torch::Tensor(outputs__);
  )
}

void atg__philox_key_split(tensor *out__, tensor key, int64_t num_splits) {
  PROTECT(
    auto outputs__ = torch::_philox_key_split(*key, num_splits);
    out__[0] = new torch::Tensor(outputs__);
  )
}

int64_t atg__new_count(tensor self) {
  PROTECT(
    return torch::_new_count(*self);
  )
  return 0;
}
";

    #[test]
    fn the_wrappers_g_plus_plus_refuses_fail_by_name_and_the_rest_stay() {
        let errors = "\
libtch/torch_api_generated.cpp: In function 'void atg__philox_key_split(...)':
libtch/torch_api_generated.cpp:10:29: error: '_philox_key_split' is not a member of 'torch'
libtch/torch_api_generated.cpp:10:29: error: again
libtch/torch_api_generated.cpp:16:12: error: '_new_count' is not a member of 'torch'
/usr/include/c++/12/bits/stl_vector.h:3:1: note: not an error of the file
";
        let lines = error_lines(errors, "torch_api_generated.cpp");
        assert_eq!(lines, [10, 16]);
        let (patched, names) = stub_functions(GENERATED, &lines, "2.11.0").unwrap();
        assert_eq!(names, ["atg__philox_key_split", "atg__new_count"]);
        // The op that compiles keeps its body; the others fail with their names.
        assert!(patched.contains("torch::abs(*self)"));
        assert!(!patched.contains("torch::_philox_key_split"));
        assert!(!patched.contains("torch::_new_count"));
        assert!(patched.contains(
            "torch_last_err = strdup(\"atg__philox_key_split: this op is not in libtorch 2.11.0\");\n}"
        ));
        // A function that returns a value still returns one.
        assert!(patched.contains("2.11.0\");\n  return {};\n}\n"));
        assert_eq!(patched.matches('{').count(), patched.matches('}').count());
        // A line outside every function is an error, not a guess.
        assert!(stub_functions(GENERATED, &[99], "2.11.0").is_err());
    }
}
