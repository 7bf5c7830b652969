"""Write a JAX function's program and one call's arguments as a graphbug XLA repro directory.

Example::

    import jax, jax.numpy as jnp
    from graphbug_capture.jax import dump

    def f(x, params):
        return jnp.tanh(x @ params["w"] + params["b"])

    x = jnp.ones((4, 8), jnp.bfloat16)
    params = {"w": jnp.ones((8, 16), jnp.bfloat16), "b": jnp.zeros((16,), jnp.bfloat16)}
    dump(f, x, params, out="repro_f")

Then::

    graphbug repro repro_f run
    graphbug repro repro_f minify --backend pjrt:/path/to/plugin.so --check accuracy
    python repro_f/repro.py

The directory holds ``program.mlir`` (``jax.jit(f).lower(...).as_text()``, StableHLO),
``inputs.safetensors`` (the flattened arguments, ``arg0``, ``arg1``, ... in the program's
parameter order), ``reference_outputs.safetensors`` (the outputs ``jax.jit(f)`` computed on
jax's default device, ``out0``, ``out1``, ...), ``manifest.json``, a short ``README.md`` and
``repro.py`` (a verbatim copy of ``graphbug_capture/xla_repro.py``, which runs the program on
the backend the manifest names and on XLA CPU and compares the outputs).

Only numpy and jax are needed (PyTorch is not).
"""

import json
import os
import re
import shutil

import numpy as np

from . import safetensors

__all__ = ["dump"]

#: The version written in "captured_by".
VERSION = "0.1.0"

#: MLIR element types -> numpy dtype names (what the checks of the arguments compare).
_MLIR_TYPES = {
    "f64": "float64", "f32": "float32", "f16": "float16", "bf16": "bfloat16",
    "i64": "int64", "i32": "int32", "i16": "int16", "i8": "int8", "i1": "bool",
    "ui64": "uint64", "ui32": "uint32", "ui16": "uint16", "ui8": "uint8",
}

_README = """\
# graphbug XLA repro directory

Written by `graphbug_capture.jax.dump` ({captured_by}).

- `program.mlir`: the program `jax.jit(f).lower(...)` gave (StableHLO text), {nargs} parameter(s)
- `inputs.safetensors`: the arguments of the call, `arg0` .. in parameter order
- `reference_outputs.safetensors`: the outputs jax computed on `{backend}`, `out0` ..
- `manifest.json`: what ran it (backend `{backend}`, plugin {plugin})
- `repro.py`: runs the program on that backend and on XLA CPU, compares the outputs

Go on with:

    graphbug repro {dir} run
    graphbug repro {dir} minify --backend pjrt:<plugin> --check accuracy
    python {dir}/repro.py
"""


def _backend_name(backend):
    """jax's name of `backend` ("cpu", "cuda", the name a plugin was registered under)."""
    from jax._src import xla_bridge

    try:
        for name, candidate in xla_bridge.backends().items():
            if candidate is backend:
                return name
    except Exception:  # noqa: BLE001 - private API; fall back on the platform
        pass
    return backend.platform


def _pjrt_api_version(name):
    """The PJRT C API version of the backend as "major.minor", or None (jax's builtin CPU)."""
    try:
        from jax._src import xla_bridge

        version = xla_bridge.backend_pjrt_c_api_version(name)
    except Exception:  # noqa: BLE001
        return None
    return None if version is None else f"{version[0]}.{version[1]}"


def _plugin_library(name, platform):
    """The path of the PJRT plugin library of backend `name`, or None when not found."""
    for entry in filter(None, os.environ.get("PJRT_NAMES_AND_LIBRARY_PATHS", "").split(",")):
        plugin, _, path = entry.partition(os.pathsep)
        if plugin == name and path.endswith(".so") and os.path.isfile(path):
            return os.path.abspath(path)
    try:
        import jax_plugins
    except ImportError:
        return None
    wanted = {name.lower(), platform.lower()}
    for root in sorted(getattr(jax_plugins, "__path__", [])):
        for package in sorted(os.listdir(root)):
            folder = os.path.join(root, package)
            if not os.path.isdir(folder) or not any(w in package.lower() for w in wanted):
                continue
            for dirpath, dirs, files in os.walk(folder):
                dirs.sort()
                for file_name in sorted(files):
                    if file_name.endswith(".so") and "plugin" in file_name:
                        return os.path.abspath(os.path.join(dirpath, file_name))
    return None


def _stablehlo_version():
    try:
        from jax._src.lib.mlir.dialects import hlo

        return str(hlo.get_current_version())
    except Exception:  # noqa: BLE001
        return None


def _main_signature(text):
    """[(index, numpy dtype name or None, shape)] of @main's parameters in the StableHLO text."""
    match = re.search(r"func\.func\s+(?:public\s+)?@main\((.*?)\)\s*(?:->|attributes|\{)",
                      text, re.S)
    if match is None:
        raise ValueError("graphbug_capture.jax.dump: the lowered program has no @main function")
    params = []
    for index, spec in re.findall(r"%arg(\d+)\s*:\s*tensor<([^>]*)>", match.group(1)):
        parts = spec.split(",")[0].strip().split("x")
        element, dims = parts[-1], parts[:-1]
        shape = tuple(int(d) if d.isdigit() else None for d in dims)
        params.append((int(index), _MLIR_TYPES.get(element), shape))
    count = len(re.findall(r"%arg\d+\s*:", match.group(1)))
    if count != len(params):
        raise ValueError("graphbug_capture.jax.dump: @main has parameters that are not tensors "
                         "(tokens or other types); such programs cannot be written as repro "
                         "directories")
    return params


def _is_array(leaf):
    import jax

    return isinstance(leaf, (np.ndarray, np.generic, jax.Array))


def _output_dir(out):
    out = os.path.abspath(os.fspath(out))
    if os.path.isdir(out) and os.listdir(out):
        manifest = os.path.join(out, "manifest.json")
        try:
            with open(manifest, encoding="utf-8") as fh:
                ours = "graphbug_xla_repro" in json.load(fh)
        except (OSError, ValueError, TypeError):
            ours = False
        if not ours:
            raise ValueError(f"graphbug_capture.jax.dump: {out} exists and is not an XLA repro "
                             "directory; name a new or empty directory")
        for stale in ("reference_outputs.safetensors", "program.faulted.mlir"):
            if os.path.exists(os.path.join(out, stale)):
                os.remove(os.path.join(out, stale))
    os.makedirs(out, exist_ok=True)
    return out


def dump(f, *args, out, backend=None, **kwargs):
    """Writes ``jax.jit(f)``'s program for ``f(*args, **kwargs)`` and these arguments as a
    graphbug XLA repro directory at `out`; returns its path.

    Every leaf of ``(args, kwargs)`` (``jax.tree_util``) must be an array (jax or numpy): they
    become the program's parameters in that order (``keep_unused=True`` keeps the ones `f`
    does not use). Static or other non-array arguments are refused with a ValueError naming
    them: close over them instead (``functools.partial``). `backend` is graphbug's name of the
    backend under test written in the manifest (default ``pjrt:<jax's default backend>``).
    The reference outputs are those ``jax.jit(f)`` computes on jax's default device.
    """
    import jax

    leaves_with_paths, _ = jax.tree_util.tree_flatten_with_path((args, kwargs))
    refused = []
    for path, leaf in leaves_with_paths:
        if not _is_array(leaf):
            where = jax.tree_util.keystr(path)
            where = re.sub(r"^\[0\]", "args", where)
            where = re.sub(r"^\[1\]", "kwargs", where)
            refused.append(f"{where} ({type(leaf).__name__} {leaf!r:.40})")
    if refused:
        raise ValueError("graphbug_capture.jax.dump: the arguments must be arrays (they become "
                         "the program's parameters); not arrays: " + ", ".join(refused) +
                         ". Close over static values instead (functools.partial or a lambda), "
                         "or pass scalars as jnp.asarray(...)")

    jitted = jax.jit(f, keep_unused=True)
    text = jitted.lower(*args, **kwargs).as_text()
    params = _main_signature(text)
    leaves = [leaf for _, leaf in leaves_with_paths]
    if len(params) != len(leaves):
        raise ValueError(f"graphbug_capture.jax.dump: the program has {len(params)} parameter(s) "
                         f"but the arguments have {len(leaves)} array leaves; cannot tell which "
                         "argument is which parameter")
    inputs = []
    for (index, dtype, shape), leaf in zip(params, leaves):
        array = np.asarray(jax.device_get(leaf))
        if dtype is not None and array.dtype.name != dtype:
            # jit canonicalizes dtypes (float64 -> float32 without jax_enable_x64).
            array = array.astype(dtype)
        if None not in shape and tuple(array.shape) != shape:
            raise ValueError(f"graphbug_capture.jax.dump: argument {index} has shape "
                             f"{list(array.shape)}, the program's %arg{index} {list(shape)}")
        inputs.append((f"arg{index}", array))

    results = jax.tree_util.tree_leaves(jitted(*args, **kwargs))
    outputs = [np.asarray(jax.device_get(o)) for o in results]

    try:
        from jax.extend.backend import get_backend
    except ImportError:
        from jax._src.xla_bridge import get_backend
    default = get_backend()
    name = _backend_name(default)
    pjrt_api = _pjrt_api_version(name)
    # jax's builtin CPU backend is no plugin; any other backend is one (PJRT C API).
    plugin = None if pjrt_api is None and name == "cpu" else _plugin_library(name, default.platform)
    backend_label = backend or f"pjrt:{name}"
    captured_by = f"graphbug_capture.jax {VERSION} (jax {jax.__version__})"
    manifest = {
        "graphbug_xla_repro": 1,
        "program": "program.mlir",
        "form": "stablehlo-text",
        "faulted_program": None,
        "backend": backend_label,
        "plugin": plugin,
        "platform": name if name in ("cpu", "cuda", "rocm", "tpu") else default.platform,
        "pjrt_api": pjrt_api,
        "stablehlo_version": _stablehlo_version(),
        "reference_backend": f"pjrt:{name}",
        "reference_plugin": plugin,
        "check": None,
        "tolerance": {"rtol": 1e-4, "atol": 1e-4},
        "failure": None,
        "captured_by": captured_by,
    }

    out = _output_dir(out)
    with open(os.path.join(out, "program.mlir"), "w", encoding="utf-8") as fh:
        fh.write(text)
    safetensors.save_numpy(os.path.join(out, "inputs.safetensors"), inputs)
    safetensors.save_numpy(os.path.join(out, "reference_outputs.safetensors"),
                           [(f"out{i}", o) for i, o in enumerate(outputs)])
    with open(os.path.join(out, "manifest.json"), "w", encoding="utf-8") as fh:
        json.dump(manifest, fh, indent=2)
        fh.write("\n")
    with open(os.path.join(out, "README.md"), "w", encoding="utf-8") as fh:
        fh.write(_README.format(captured_by=captured_by, nargs=len(params), backend=backend_label,
                                plugin=f"`{plugin}`" if plugin else "none (jax's builtin CPU)",
                                dir=out))
    shutil.copyfile(os.path.join(os.path.dirname(os.path.abspath(__file__)), "xla_repro.py"),
                    os.path.join(out, "repro.py"))
    return out
