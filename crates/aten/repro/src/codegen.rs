//! Generated files of a repro directory: a standalone Rust program, a PyTorch script, the
//! README, and the minifier launcher. All output is deterministic.

use std::fmt::Write as _;
use std::path::Path;

use graphbug_ir::Graph;

use crate::save::repro_text;

use crate::manifest::{InputsRecord, Manifest};

/// The graphbug workspace this build comes from (generated programs depend on it).
pub use graphbug_run::workspace_root;

/// A Rust raw string literal holding `text` (enough `#`s that nothing inside ends it).
fn raw_string(text: &str) -> String {
    let mut hashes = 1;
    while text.contains(&format!("\"{}", "#".repeat(hashes))) {
        hashes += 1;
    }
    let h = "#".repeat(hashes);
    format!("r{h}\"{text}\"{h}")
}

fn failure_line(m: &Manifest) -> String {
    match &m.failure {
        Some(f) => format!("a {} {} of backend `{}`", f.stage, f.symptom, m.backend),
        None => format!(
            "a compilation by backend `{}` (dumped before compiling)",
            m.backend
        ),
    }
}

/// `repro.rs`: embeds the graph and reproduces the recorded failure with graphbug.
pub fn repro_rs(graph: &Graph, m: &Manifest) -> String {
    format!(
        r#"//! Reproduces {what}, written by graphbug {version} on libtorch {libtorch}.
//!
//! `cargo run` in this directory exits 1 and prints the failure when it reproduces, and
//! exits 0 saying what differs when it does not. Inputs come from inputs.safetensors (or
//! the seed in manifest.json); the backend, device and fault spec from manifest.json.

use std::path::Path;
use std::process::ExitCode;

/// The graph, in PyTorch's print_readable() text (graph.py holds the same).
const GRAPH: &str = {graph};

fn main() -> ExitCode {{
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    graphbug_repro::actions::reproduce_main(GRAPH, dir)
}}
"#,
        what = failure_line(m),
        version = m.graphbug_version,
        libtorch = m.libtorch_version,
        graph = raw_string(&repro_text(graph)),
    )
}

/// `Cargo.toml` of the standalone program: its own workspace, depending on graphbug-repro.
pub fn cargo_toml() -> String {
    format!(
        r#"[package]
name = "graphbug-repro-case"
version = "0.0.0"
edition = "2021"
publish = false

[[bin]]
name = "repro"
path = "repro.rs"

[dependencies]
# The repro crate, not the graphbug package: building this program must never rebuild
# the graphbug binary that may be running.
graphbug-repro = {{ path = "{root}/crates/aten/repro" }}

# A workspace of its own, wherever this directory is copied to.
[workspace]
"#,
        root = workspace_root().display()
    )
}

/// `.cargo/config.toml`: builds in graphbug's target directory with the same flags, so
/// libtorch and its bindings are not rebuilt, and finds libtorch at run time.
pub fn cargo_config() -> String {
    let root = workspace_root();
    format!(
        r#"# Build like the graphbug workspace this repro came from: same libtorch, same target
# directory and flags (so nothing already built is rebuilt).
[env]
LIBTORCH = {{ value = "{root}/.libtorch" }}
LIBTORCH_CXX11_ABI = "1"

[build]
target-dir = "{root}/target"

[target.x86_64-unknown-linux-gnu]
rustflags = ["-C", "link-arg=-Wl,-rpath,$ORIGIN/../../.libtorch/lib:$ORIGIN/../../../.libtorch/lib"]
"#,
        root = root.display()
    )
}

/// Python's spelling of a string literal for generated code.
fn py_str(s: &str) -> String {
    graphbug_ir::value::python_str_repr(s)
}

/// `bindings` as a Python dict literal.
fn py_bindings(bindings: &graphbug_ir::Bindings) -> String {
    let items: Vec<String> = bindings
        .iter()
        .map(|(k, v)| format!("{}: {v}", py_str(k)))
        .collect();
    format!("{{{}}}", items.join(", "))
}

/// `repro.py`: the graph as a PyTorch module, run in eager on the same inputs, compared
/// with graphbug's eager outputs.
pub fn repro_py(graph: &Graph, m: &Manifest) -> String {
    let names: Vec<String> = graph
        .placeholders()
        .iter()
        .map(|&i| py_str(&graph.node(i).name))
        .collect();
    let module = repro_text(graph);
    let seed = match m.inputs {
        InputsRecord::Random { seed } => format!("{seed}"),
        InputsRecord::Real => "None".into(),
    };
    let mut out = String::new();
    let _ = write!(
        out,
        r#""""Reproduces {what} in PyTorch.

Written by graphbug {version} (libtorch {libtorch}). The graph runs in PyTorch eager on the
inputs in inputs.safetensors, and its outputs are compared with graphbug's eager outputs
(eager_outputs.safetensors). `--backend NAME` runs it through torch.compile instead.

  python repro.py [--backend inductor]
"""

import argparse
import json
import os
import struct
import sys
import warnings

warnings.filterwarnings("ignore", message="Failed to initialize NumPy")
import torch  # noqa: E402
from torch import device  # noqa: E402

inf = float("inf")
nan = float("nan")

{module}

INPUT_NAMES = [{names}]
RANDOM_SEED = {seed}
# The values of the graph's size symbols (a dynamic-shape graph).
BINDINGS = {bindings}
# A training step (the failure is in its backward): the floating inputs require grad, and
# the backward runs after the forward with ones as every output's gradient.
TRAINING = {training}

_DTYPES = {{
    "F64": torch.float64, "F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16,
    "I64": torch.int64, "I32": torch.int32, "I16": torch.int16, "I8": torch.int8,
    "U8": torch.uint8, "BOOL": torch.bool,
}}


def read_safetensors(path):
    """The tensors of a .safetensors file by name (no dependency beyond torch)."""
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    header.pop("__metadata__", None)
    body = data[8 + n:]
    out = {{}}
    for name, info in header.items():
        start, end = info["data_offsets"]
        raw = bytearray(body[start:end])
        flat = torch.frombuffer(raw, dtype=torch.uint8) if raw else torch.empty(0, dtype=torch.uint8)
        out[name] = flat.view(_DTYPES[info["dtype"]]).reshape(info["shape"]).clone()
    return out


def sizes_of(expr):
    """The value of sizes as annotations spell them (`8`, `[s0, 2*s0]`, `(s1//2)`,
    `Mod(s0, 2)`), with the symbols' values from BINDINGS."""
    names = {{"Mod": lambda a, b: a % b, "Max": max, "Min": min, "__builtins__": {{}}}}
    return eval(expr, names, dict(BINDINGS))


def inputs_for(mod):
    here = os.path.dirname(os.path.abspath(__file__))
    # Each input's annotation, by position (dynamo's parameters are named `L_x_` where
    # its inputs are `l_x_`).
    params = mod.forward.__code__.co_varnames[1:1 + len(INPUT_NAMES)]
    annotations = [str(mod.forward.__annotations__.get(p, "")) for p in params]
    if RANDOM_SEED is None:
        saved = read_safetensors(os.path.join(here, "inputs.safetensors"))
        out = [saved[name] for name in INPUT_NAMES]
    else:
        # Only shapes were kept: draw inputs from the annotations (symbols from BINDINGS),
        # as graphbug does (not the same values: torch's generator is not graphbug's).
        torch.manual_seed(RANDOM_SEED)
        out = []
        for param in annotations:
            if param.startswith("Sym("):
                out.append(torch.tensor(int(sizes_of(param[4:-1]))))
                continue
            dtype, _, dims = param.partition("[")
            shape = [int(d) for d in sizes_of("[" + dims)]
            dt = {{"f32": torch.float32, "f64": torch.float64, "f16": torch.float16, "bf16": torch.bfloat16,
                  "i64": torch.int64, "i32": torch.int32, "b8": torch.bool, "u8": torch.uint8}}[dtype]
            out.append(torch.randn(shape, dtype=dt) if dt.is_floating_point else torch.randint(0, 2, shape).to(dt))
    # Sizes (`Sym` inputs) are saved as 0-d tensors and passed as Python ints.
    return [int(t) if param.startswith("Sym(") else t for param, t in zip(annotations, out)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--backend", help="run through torch.compile(backend=...)")
    args = ap.parse_args()
    mod = Repro()
    inputs = inputs_for(mod)
    fn = torch.compile(mod, backend=args.backend) if args.backend else mod
    if TRAINING:
        inputs = [t.detach().requires_grad_() if isinstance(t, torch.Tensor) and t.is_floating_point() else t for t in inputs]
        outs = fn(*inputs)
        outs = outs if isinstance(outs, (tuple, list)) else (outs,)
        diff = [o for o in outs if isinstance(o, torch.Tensor) and o.requires_grad]
        if diff:
            torch.autograd.backward(diff, [torch.ones_like(o) for o in diff])
        print(f"backward: ran, seeded at {{len(diff)}} outputs")
        outs = [o.detach() if isinstance(o, torch.Tensor) else o for o in outs]
    else:
        with torch.no_grad():
            outs = fn(*inputs)
        outs = outs if isinstance(outs, (tuple, list)) else (outs,)
    for i, t in enumerate(outs):
        print(f"out{{i}}: {{'None' if t is None else (t.dtype, tuple(t.shape))}}")
    here = os.path.dirname(os.path.abspath(__file__))
    expected_file = os.path.join(here, "eager_outputs.safetensors")
    if RANDOM_SEED is not None or not os.path.exists(expected_file):
        return 0
    expected = read_safetensors(expected_file)
    ok = True
    for i, t in enumerate(outs):
        want = expected.get(f"out{{i}}")
        if t is None or want is None:
            continue
        same = t.dtype == want.dtype and t.shape == want.shape and torch.allclose(
            t.double(), want.double(), rtol=1e-5, atol=1e-6, equal_nan=True)
        print(f"out{{i}} matches graphbug's eager output: {{same}}")
        ok = ok and same
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
"#,
        what = failure_line(m),
        version = m.graphbug_version,
        libtorch = m.libtorch_version,
        module = module.trim_end(),
        names = names.join(", "),
        seed = seed,
        bindings = py_bindings(&m.bindings),
        training = if m.training { "True" } else { "False" },
    );
    out
}

/// `README.md`: what the directory holds and the commands to use it.
pub fn readme(m: &Manifest, dir: &Path) -> String {
    let root = workspace_root();
    let failure = match &m.failure {
        Some(f) => format!(
            "The failure: {} {} in backend `{}`{}: {}",
            f.stage,
            f.symptom,
            m.backend,
            f.node
                .as_ref()
                .map(|n| format!(" at node `{n}`"))
                .unwrap_or_default(),
            f.message
        ),
        None => format!(
            "Dumped before compiling with `{}` (level 3): if the process died, this is the graph it was compiling.",
            m.backend
        ),
    };
    format!(
        r#"# graphbug repro

{failure}

| file | what |
|---|---|
| `graph.py` | the graph, in PyTorch's `print_readable()` text |
| `inputs.safetensors` | its inputs, by placeholder name |
| `manifest.json` | backend, level, device, seed, failure, versions, fault spec |
| `repro.rs`, `Cargo.toml` | a standalone Rust program reproducing the failure |
| `repro.py` | the graph in PyTorch eager, compared with graphbug's eager outputs |
| `eager_outputs.safetensors` | graphbug's eager outputs on these inputs |

```sh
cd {root} && cargo xtask repro {dir} run        # reproduce: exit 1 with the failure
cd {root} && cargo xtask repro {dir} minify     # shrink it: writes {dir}/minified/
cd {root} && cargo xtask repro {dir} analyze    # first diverging node, determinism
cargo run                                       # here: the standalone reproduction
python repro.py                                 # here: the graph in PyTorch eager
```
"#,
        root = root.display(),
        dir = dir.display(),
    )
}

/// `minifier_launcher.sh` (levels 2 and up): minifies this directory.
pub fn minifier_launcher(dir: &Path) -> String {
    format!(
        "#!/bin/sh\n# Minifies this repro; the result goes to {dir}/minified/.\ncd {root} && exec cargo xtask repro {dir} minify \"$@\"\n",
        root = workspace_root().display(),
        dir = dir.display()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_strings_survive_their_contents() {
        assert_eq!(raw_string("a"), "r#\"a\"#");
        assert_eq!(raw_string("x\"#y"), "r##\"x\"#y\"##");
    }
}
