"""Checks ``graphbug_capture.jax.dump`` end to end: ``python jax_dump_check.py OUT_DIR``.

Dumps a small JAX function of three arguments (a bfloat16 array, an int32 array and a dict of
float32 arrays) to ``OUT_DIR/captured``, checks the files and the manifest, runs
``OUT_DIR/captured/repro.py --plugin <the XLA CPU PJRT plugin>`` (exit status 0 wanted), and
checks that ``dump`` refuses non-array arguments with a ValueError naming them. The plugin is
``--plugin PATH``, else ``$GRAPHBUG_CPU_PLUGIN``, else the ``xla-cpu-pjrt`` wheel of this
Python. Exit status 0 on success; otherwise each failure is printed and the status is 1.
"""

import argparse
import glob
import json
import os
import subprocess
import sys
import sysconfig

import numpy as np

FAILURES = []


def check(condition, what):
    """Records a failure (and prints it) when `condition` is false."""
    if not condition:
        FAILURES.append(what)
        print(f"FAILED: {what}")
    return condition


def cpu_plugin(explicit):
    """The path of the XLA CPU PJRT plugin library."""
    if explicit:
        return explicit
    if os.environ.get("GRAPHBUG_CPU_PLUGIN"):
        return os.environ["GRAPHBUG_CPU_PLUGIN"]
    site = sysconfig.get_paths()["purelib"]
    found = sorted(glob.glob(os.path.join(site, "xla_plugins", "xla_cpu_pjrt", "*.so")))
    return found[0] if found else None


def f(x, ids, params):
    """The dumped function: a bf16 matmul, a gather by int32 ids, a dict of parameters."""
    import jax.numpy as jnp

    h = jnp.tanh(x.astype(jnp.float32) @ params["w"] + params["b"])
    return {"rows": h[ids], "bf16": h.astype(jnp.bfloat16) * 2}, jnp.sum(h, axis=0)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", help="directory to write into (OUT/captured, OUT/refused)")
    parser.add_argument("--plugin", help="the XLA CPU PJRT plugin library")
    opts = parser.parse_args(argv)

    import graphbug_capture.jax as gj

    check("torch" not in sys.modules, "importing graphbug_capture.jax imports torch")
    import jax
    import jax.numpy as jnp
    import ml_dtypes

    from graphbug_capture import xla_repro

    rng = np.random.RandomState(0)
    x = jnp.asarray(rng.randn(4, 8).astype(ml_dtypes.bfloat16))
    ids = jnp.asarray(np.array([3, 0, 2], dtype=np.int32))
    params = {"w": jnp.asarray(rng.randn(8, 16).astype(np.float32)),
              "b": jnp.asarray(rng.randn(16).astype(np.float32))}

    out = os.path.join(os.path.abspath(opts.out), "captured")
    written = gj.dump(f, x, ids, params, out=out)
    check(written == out, f"dump returned {written!r}, not {out!r}")
    for name in ("program.mlir", "inputs.safetensors", "reference_outputs.safetensors",
                 "manifest.json", "README.md", "repro.py"):
        check(os.path.isfile(os.path.join(out, name)), f"{name} is missing")
    if FAILURES:
        return 1

    with open(os.path.join(out, "manifest.json"), encoding="utf-8") as fh:
        manifest = json.load(fh)
    expected = {
        "graphbug_xla_repro": 1, "program": "program.mlir", "form": "stablehlo-text",
        "faulted_program": None, "backend": f"pjrt:{jax.default_backend()}", "check": None,
        "failure": None, "tolerance": {"rtol": 1e-4, "atol": 1e-4},
    }
    for key, value in expected.items():
        check(manifest.get(key) == value, f"manifest {key} is {manifest.get(key)!r}, not {value!r}")
    for key in ("plugin", "platform", "pjrt_api", "stablehlo_version", "reference_backend",
                "reference_plugin", "captured_by"):
        check(key in manifest, f"manifest has no {key}")
    check(str(manifest.get("captured_by", "")).startswith("graphbug_capture.jax "),
          f"manifest captured_by is {manifest.get('captured_by')!r}")
    if jax.default_backend() == "cpu":
        check(manifest.get("plugin") is None and manifest.get("platform") == "cpu",
              f"jax's builtin CPU: plugin {manifest.get('plugin')!r}, "
              f"platform {manifest.get('platform')!r}")

    with open(os.path.join(out, "program.mlir"), encoding="utf-8") as fh:
        program = fh.read()
    check("func.func public @main(%arg0: tensor<4x8xbf16>" in program,
          "program.mlir's @main does not start with the bf16 argument")
    check("%arg3" in program and "%arg4" not in program,
          "program.mlir does not have 4 parameters (x, ids, params['b'], params['w'])")

    inputs = xla_repro.read_safetensors(os.path.join(out, "inputs.safetensors"))
    wanted = [x, ids, params["b"], params["w"]]  # leaves: dict keys sorted
    check(sorted(inputs) == [f"arg{i}" for i in range(4)], f"inputs keys {sorted(inputs)}")
    for i, want in enumerate(wanted):
        got = inputs.get(f"arg{i}")
        want = np.asarray(want)
        if check(got is not None and got.dtype == want.dtype and got.shape == want.shape,
                 f"arg{i} is {None if got is None else (got.dtype, got.shape)}, "
                 f"not {(want.dtype, want.shape)}"):
            check(np.array_equal(got, want), f"arg{i}'s values differ from the argument's")

    outputs = xla_repro.read_safetensors(os.path.join(out, "reference_outputs.safetensors"))
    expected_outputs = [np.asarray(o) for o in jax.tree_util.tree_leaves(jax.jit(f)(x, ids, params))]
    check(sorted(outputs) == [f"out{i}" for i in range(len(expected_outputs))],
          f"reference output keys {sorted(outputs)}")
    for i, want in enumerate(expected_outputs):
        got = outputs.get(f"out{i}")
        check(got is not None and got.dtype == want.dtype and got.shape == want.shape
              and np.allclose(got.astype(np.float64), want.astype(np.float64)),
              f"out{i} is not jit(f)'s output {i}")

    with open(os.path.join(out, "repro.py"), "rb") as fh, open(xla_repro.__file__, "rb") as src:
        check(fh.read() == src.read(), "repro.py is not a verbatim copy of xla_repro.py")
    with open(os.path.join(out, "README.md"), encoding="utf-8") as fh:
        readme = fh.read()
    for command in ("graphbug repro", "minify", "repro.py"):
        check(command in readme, f"README.md does not mention `{command}`")

    plugin = cpu_plugin(opts.plugin)
    if check(plugin is not None and os.path.isfile(plugin),
             f"no XLA CPU PJRT plugin (found {plugin!r}); pass --plugin"):
        run = subprocess.run([sys.executable, os.path.join(out, "repro.py"), "--plugin", plugin],
                             cwd="/", capture_output=True, text=True, timeout=600)
        check(run.returncode == 0 and "ok: every output matches" in run.stdout,
              f"repro.py --plugin {plugin} exited {run.returncode}:\n{run.stdout}{run.stderr}")
        help_run = subprocess.run([sys.executable, os.path.join(out, "repro.py"), "--help"],
                                  capture_output=True, text=True, timeout=600)
        check(help_run.returncode == 0 and "--plugin" in help_run.stdout,
              f"repro.py --help exited {help_run.returncode}")

    refused = os.path.join(os.path.abspath(opts.out), "refused")
    cases = [
        ("a Python int", lambda: gj.dump(lambda a, n: a * n, x, 3, out=refused), "args[1]"),
        ("a string keyword", lambda: gj.dump(lambda a, mode: a, x, mode="fast", out=refused),
         "kwargs['mode']"),
    ]
    for what, call, name in cases:
        try:
            call()
        except ValueError as err:
            check(name in str(err), f"dump's ValueError for {what} does not name {name}: {err}")
        else:
            check(False, f"dump accepted {what} as an argument")
    check(not os.path.exists(refused), "a refused dump wrote a directory")

    if FAILURES:
        print(f"{len(FAILURES)} check(s) failed")
        return 1
    print(f"ok: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
