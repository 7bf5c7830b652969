"""PyTorch/XLA: find, minify and write a repro of every HLO module of a model that fails on
its XLA device, from the trainer script (the HLO minifier of PyTorch/XLA's RFC).

Example::

    import torch, torch_xla
    from graphbug_capture.torch_xla import run_hlo_minifier

    model = MyModel().to(torch_xla.device())
    inputs = [x.to(torch_xla.device())]
    run_hlo_minifier(model, inputs, "precision")               # an evaluation
    run_hlo_minifier(model, inputs, "compilation",             # a training step
                     optimizer=opt, loss_fn=lambda out: out.pow(2).mean())

Every HLO module PyTorch/XLA compiles in the step is captured with the arguments it ran
with (its device data, in parameter order) and written as an XLA dump directory
(``OUT/capture``: ``module_NNNN.NAME.before_optimizations.hlo.pb`` and an ``xla.HloSnapshot``
of its arguments, as ``XLA_FLAGS=--xla_dump_to`` writes them). Then ``graphbug repro
OUT/capture`` checks each module on the backend under test (the PJRT device PyTorch/XLA
uses, unless ``backend=`` names another): ``"compilation"`` looks for failures to compile or
run (repro levels 1-3), ``"precision"`` also compares every output with the module run in
float64 on XLA CPU (level 4). Each failing module gets ``OUT/repros/MODULE`` (minified into
``OUT/repros/MODULE/minified``), whose ``repro.py`` runs with PyTorch/XLA alone
(``--with torch_xla``) or JAX alone (``--with jax``); ``OUT/repros/summary.json`` and
``report.html`` list every module.

A model compiled with ``torch.compile(model, backend=graphbug_capture.torch_xla.openxla)``
(PyTorch/XLA's ``openxla`` backend, recording each forward and backward graph it compiles;
``register_backend()`` names it ``"graphbug_openxla"``) has its TorchDynamo graphs captured
as modules of their own; a model compiled with another backend is run through it.

Only torch, torch_xla and numpy are needed here, and the ``graphbug`` binary (on PATH, in
``$GRAPHBUG``, or ``graphbug=PATH``).
"""

import json
import os
import shutil
import subprocess
import sys
import time

from .xla_repro import child_env, pb_encode, put_varint

__all__ = ["run_hlo_minifier", "openxla", "register_backend", "capture_step",
           "HloMinifierResult"]

#: error_type -> graphbug's repro level.
LEVELS = {"compilation": 3, "precision": 4}

#: torch dtypes -> (xla.PrimitiveType, LiteralProto field, encoding): "raw" for a field whose
#: protobuf encoding is the little-endian bytes themselves (bytes fields and packed fixed-width
#: repeated fields), "varint" for packed varints.
_LITERAL_FIELDS = {
    "torch.bool": (1, 2, "raw"),
    "torch.int8": (2, 15, "raw"),
    "torch.int16": (3, 17, "raw"),
    "torch.int32": (4, 4, "varint"),
    "torch.int64": (5, 5, "varint"),
    "torch.uint8": (6, 3, "raw"),
    "torch.uint16": (7, 16, "raw"),
    "torch.uint32": (8, 6, "varint"),
    "torch.uint64": (9, 7, "varint"),
    "torch.float16": (10, 11, "raw"),
    "torch.float32": (11, 8, "raw"),
    "torch.float64": (12, 9, "raw"),
    "torch.bfloat16": (16, 13, "raw"),
    "torch.complex64": (15, 12, "raw"),
    "torch.complex128": (18, 18, "raw"),
}


# ---------------------------------------------------------------------------------------------
# xla.HloSnapshot, written by hand (the field numbers of xla_data.proto and hlo.proto) so that
# no protobuf package is needed; the encoding is repro.py's.


def _field(number, payload):
    """A length-delimited field."""
    return pb_encode([(number, 2, payload)])


def _literal(tensor):
    """The ``xla.LiteralProto`` of a host tensor, row-major."""
    import torch

    key = str(tensor.dtype)
    if key not in _LITERAL_FIELDS:
        raise ValueError(f"graphbug_capture.torch_xla: an argument has dtype {tensor.dtype}, "
                         "which an XLA literal cannot hold here")
    element, number, encoding = _LITERAL_FIELDS[key]
    tensor = tensor.detach().contiguous()
    rank = tensor.dim()
    layout = _field(1, b"".join(put_varint(d) for d in reversed(range(rank))))
    shape = (put_varint(2 << 3) + put_varint(element)
             + (_field(3, b"".join(put_varint(d) for d in tensor.shape)) if rank else b"")
             + _field(5, layout))
    if encoding == "varint":
        data = b"".join(put_varint(v) for v in tensor.reshape(-1).tolist())
    else:
        # bfloat16 and the unsigned types numpy lacks travel as their bits.
        bits = tensor.reshape(-1)
        if bits.is_complex():
            bits = torch.view_as_real(bits).reshape(-1)
        if bits.dtype == torch.bool:
            bits = bits.to(torch.uint8)
        widths = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}
        data = bits.view(widths[bits.element_size()]).numpy().tobytes()
    return _field(1, shape) + (_field(number, data) if data else b"")


def hlo_snapshot(module_proto, arguments, platform):
    """An ``xla.HloSnapshot``: the module (``hlo.hlo_module``), its arguments as literals and
    the platform they ran on."""
    out = _field(1, _field(1, module_proto))
    for tensor in arguments:
        out += _field(2, _literal(tensor))
    return out + _field(4, platform.encode())


# ---------------------------------------------------------------------------------------------
# Capture


def _xlac():
    import torch_xla

    return torch_xla._XLAC


def _tensors(value):
    """The XLA tensors in `value` (tensors, and lists, tuples and dicts of them), in order."""
    import torch

    if isinstance(value, torch.Tensor):
        return [value] if value.device.type == "xla" else []
    if isinstance(value, dict):
        return [t for v in value.values() for t in _tensors(v)]
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in _tensors(v)]
    return []


def _pending(tensors):
    """Whether `tensors` have computation PyTorch/XLA has not run (a module to compile)."""
    import re

    ops = re.findall(r"\b(?:xla|aten|prim)::(\w+)", _xlac()._get_xla_tensors_text(tensors))
    return any(op != "device_data" for op in ops)


class Capture:
    """The HLO modules one step compiled: (name, HloModuleProto bytes, arguments on the host)."""

    def __init__(self):
        self.modules = []
        self._counts = {}

    def _name(self, kind):
        self._counts[kind] = self._counts.get(kind, 0) + 1
        return f"{kind}{self._counts[kind]}"

    def record(self, kind, value):
        """Records the module that computes the XLA tensors of `value` (nothing when they are
        all computed)."""
        return self._record(kind, _tensors(value))

    def _record(self, kind, tensors):
        if not tensors or not _pending(tensors):
            return None
        x = _xlac()
        proto = x._get_xla_tensors_hlo_proto(tensors)
        _, data = x._get_tensors_xla_device_data_node(tensors)
        arguments = [d.detach().cpu() for d in data]
        name = self._name(kind)
        self.modules.append((name, proto, arguments))
        return name

    def sync(self, kind, tensors):
        """Records the module of `tensors`, then runs it (``torch_xla.sync`` of them alone)."""
        tensors = _tensors(tensors)
        name = self._record(kind, tensors)
        if tensors:
            _xlac()._xla_sync_multi(tensors, devices=[], wait=True)
        return name

    def write_dump(self, directory, platform):
        """Writes the modules as an XLA dump directory; returns their names (`module_NNNN.NAME`)."""
        os.makedirs(directory, exist_ok=True)
        written = []
        for index, (name, proto, arguments) in enumerate(self.modules):
            stem = f"module_{index:04d}.{name}"
            with open(os.path.join(directory, stem + ".before_optimizations.hlo.pb"), "wb") as fh:
                fh.write(proto)
            with open(os.path.join(directory, stem + ".snapshot.0.pb"), "wb") as fh:
                fh.write(hlo_snapshot(proto, arguments, platform))
            written.append(stem)
        return written


#: The capture under way (a TorchDynamo graph compiled by `openxla` records into it).
_ACTIVE = None


def _capturing_compiler(kind):
    """A compiler for aot_autograd: PyTorch/XLA's openxla one, whose compiled function also
    records its graph's module (on the real arguments) into the capture under way."""

    def compiler(gm, example_inputs):
        from torch._dynamo.backends.torchxla import openxla_eval_boxed
        from functorch.compile import make_boxed_func

        inner = openxla_eval_boxed(gm, example_inputs)

        def run(*args):
            if _ACTIVE is not None:
                import torch

                with torch.no_grad():
                    _ACTIVE.record(f"dynamo_{kind}", gm(*args))
            return inner(list(args))

        return make_boxed_func(run)

    return compiler


def _openxla_backend():
    from torch._dynamo.backends.common import aot_autograd

    return aot_autograd(fw_compiler=_capturing_compiler("forward"),
                        bw_compiler=_capturing_compiler("backward"))


def openxla(gm, example_inputs, **kwargs):
    """A TorchDynamo backend: PyTorch/XLA's ``openxla``, with each forward and backward graph
    it compiles captured as a module of its own while ``run_hlo_minifier`` runs the model."""
    return _openxla_backend()(gm, example_inputs, **kwargs)


def register_backend(name="graphbug_openxla"):
    """Registers `openxla` with TorchDynamo under `name`, for ``torch.compile(model,
    backend="graphbug_openxla")``; returns the name."""
    from torch._dynamo.backends.registry import register_backend as register

    register(compiler_fn=openxla, name=name)
    return name


def _unwrap_compiled(model):
    """A model ``torch.compile``d with another backend is run through `openxla` (the same
    graphs, recorded); a plain module as it is (its step traced lazily)."""
    original = getattr(model, "_orig_mod", None)
    if original is None:
        return model
    import torch

    return torch.compile(original, backend=openxla)


def capture_step(model, inputs, *, optimizer=None, loss_fn=None, steps=1, sync="step"):
    """Runs `model` on `inputs` (an evaluation; with `optimizer`, `steps` training steps:
    forward, ``loss_fn(outputs)`` or the output itself when it is a scalar, backward, the
    optimizer's step) and returns the `Capture` of every module it compiled. ``sync="step"``
    runs each step as one module, as a loop with ``torch_xla.sync()`` at the end of the step
    compiles it; ``sync="phase"`` syncs after the forward, the backward and the optimizer
    (three smaller modules a step)."""
    global _ACTIVE
    import torch

    if sync not in ("step", "phase"):
        raise ValueError(f"graphbug_capture.torch_xla: sync={sync!r}; expected 'step' or 'phase'")
    if not isinstance(inputs, (list, tuple)):
        inputs = [inputs]
    model = _unwrap_compiled(model)
    capture = Capture()
    previous, _ACTIVE = _ACTIVE, capture
    try:
        if optimizer is None:
            with torch.no_grad():
                capture.sync("eval", model(*inputs))
            return capture
        params = [p for group in optimizer.param_groups for p in group["params"]]
        for _ in range(steps):
            optimizer.zero_grad()
            outputs = model(*inputs)
            if loss_fn is not None:
                loss = loss_fn(outputs)
            elif isinstance(outputs, torch.Tensor) and outputs.dim() == 0:
                loss = outputs
            else:
                raise ValueError("graphbug_capture.torch_xla: the model's output is no scalar "
                                 "loss; pass loss_fn=, which turns the outputs into one")
            if sync == "phase":
                capture.sync("forward", [loss, outputs])
            loss.backward()
            grads = [p.grad for p in params if p.grad is not None]
            if sync == "phase":
                capture.sync("backward", grads)
            optimizer.step()
            state = [t for s in optimizer.state.values() for t in _tensors(s)]
            kept = params + state + list(getattr(model, "buffers", lambda: [])())
            if sync == "phase":
                capture.sync("optimizer", kept)
            else:
                capture.sync("step", [loss, outputs] + grads + kept)
        return capture
    finally:
        _ACTIVE = previous


# ---------------------------------------------------------------------------------------------
# The minifier


def device_backend():
    """graphbug's name of the PJRT device PyTorch/XLA runs on: a registered plugin's library
    (``pjrt:/path/plugin.so``: Neuron, TPU), else ``pjrt:cpu``, ``pjrt:cuda`` as graphbug
    resolves names."""
    import torch_xla.runtime as xr

    kind = (xr.device_type() or "CPU").upper()
    try:
        from torch_xla.experimental import plugins

        plugin = plugins._plugin_registry.get(kind)
        if plugin is not None:
            return f"pjrt:{plugin.library_path()}"
    except Exception:  # noqa: BLE001 - private registry; fall back on the name
        pass
    if kind == "TPU":
        path = os.getenv("TPU_LIBRARY_PATH") or os.getenv("PTXLA_TPU_LIBRARY_PATH")
        if path:
            return f"pjrt:{path}"
    return f"pjrt:{kind.lower()}"


def _graphbug_binary(graphbug):
    path = graphbug or os.environ.get("GRAPHBUG") or shutil.which("graphbug")
    if not path or not os.path.isfile(path):
        raise FileNotFoundError(
            "graphbug_capture.torch_xla: no graphbug binary "
            f"({'not a file: ' + path if path else 'none on PATH and $GRAPHBUG unset'}); "
            "pass graphbug=PATH")
    return path


class HloMinifierResult:
    """What ``run_hlo_minifier`` found: every module's row of the summary, the failing ones'
    repro directories, and where the time went."""

    def __init__(self, out, modules, failing, times, status, queries):
        #: The output directory: ``capture`` (the dump), ``repros`` (graphbug's output).
        self.out = out
        #: The summary's rows (``module``, ``result``, ``failure``, ``repro``, ``minified``).
        self.modules = modules
        #: The repro directories of the failing modules.
        self.failing = failing
        #: Seconds: ``step`` (the model's step, PyTorch/XLA's compile and run included),
        #: ``write`` (the dump), ``graphbug`` (all of it), of which ``check`` (each module's
        #: run on the backend and the reference) and ``minify`` (the failing ones' queries).
        self.times = times
        #: The minifier's queries, by failing module.
        self.queries = queries
        #: graphbug's exit status (0: every module was judged).
        self.status = status

    def __repr__(self):
        return (f"HloMinifierResult({len(self.modules)} modules, {len(self.failing)} failing, "
                f"out={self.out!r})")


def run_hlo_minifier(model, inputs, error_type="precision", *, optimizer=None, loss_fn=None,
                     steps=1, sync="step", out="hlo_minifier", backend=None, graphbug=None,
                     jobs=1, timeout=None, extra_args=()):
    """Captures every HLO module `model`'s step compiles on `inputs` (see `capture_step`),
    checks each on `backend` (default: the PJRT device PyTorch/XLA uses) for `error_type`
    (``"compilation"`` or ``"precision"``), minifies each failing one and writes its repro
    directory under ``OUT/repros``. Returns a `HloMinifierResult`; its summary is printed."""
    if error_type not in LEVELS:
        raise ValueError(f"graphbug_capture.torch_xla: error_type={error_type!r}; expected "
                         "'precision' or 'compilation'")
    binary = _graphbug_binary(graphbug)
    out = os.path.abspath(os.fspath(out))
    capture_dir, repros = os.path.join(out, "capture"), os.path.join(out, "repros")
    for stale in (capture_dir, repros):
        if os.path.isdir(stale):
            shutil.rmtree(stale)
    started = time.perf_counter()
    capture = capture_step(model, inputs, optimizer=optimizer, loss_fn=loss_fn, steps=steps,
                           sync=sync)
    stepped = time.perf_counter()
    if not capture.modules:
        raise RuntimeError("graphbug_capture.torch_xla: the step compiled no module (every "
                           "output was already computed)")
    import torch_xla.runtime as xr

    platform = f"torch_xla {xr.device_type() or 'CPU'}"
    capture.write_dump(capture_dir, platform)
    written = time.perf_counter()
    backend = backend or device_backend()
    command = [binary, "repro", capture_dir, "--backend", backend,
               "--level", str(LEVELS[error_type]), "--out", repros, "-j", str(jobs)]
    if timeout is not None:
        command += ["--timeout", str(timeout)]
    command += list(extra_args)
    print(f"graphbug_capture.torch_xla: {len(capture.modules)} module(s) captured in "
          f"{stepped - started:.1f} s; {' '.join(command)}", flush=True)
    status, minify_times, queries = _run_graphbug(command)
    done = time.perf_counter()
    summary_path = os.path.join(repros, "summary.json")
    if not os.path.exists(summary_path):
        raise RuntimeError(f"graphbug_capture.torch_xla: graphbug exited with {status} and "
                           f"wrote no {summary_path} (its output above says why)")
    with open(summary_path, encoding="utf-8") as fh:
        modules = json.load(fh)["modules"]
    failing = [os.path.join(repros, m["repro"]) for m in modules if m.get("repro")]
    minify = sum(minify_times.values())
    times = {"step": stepped - started, "write": written - stepped,
             "graphbug": done - written, "check": done - written - minify, "minify": minify}
    print(f"graphbug_capture.torch_xla: the step (PyTorch/XLA's compile and run, captured) "
          f"{times['step']:.1f} s; writing the modules {times['write']:.1f} s; graphbug "
          f"{times['graphbug']:.1f} s: checking {len(modules)} module(s) {times['check']:.1f} s, "
          f"minifying {minify:.1f} s ({sum(queries.values())} queries); "
          f"{len(failing)} failing module(s)" + "".join(f"\n  {f}" for f in failing),
          file=sys.stderr if status else sys.stdout, flush=True)
    return HloMinifierResult(out, modules, failing, times, status, queries)


def _run_graphbug(command):
    """Runs graphbug, its output passed through as it comes; (exit status, seconds each
    module's minification took, its queries), read from what graphbug says of each."""
    import re

    # graphbug dies with this process, even by kill -9 (GRAPHBUG_DIE_WITH), and its
    # workers with it.
    child = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True, bufsize=1, env=child_env())
    minify_times, queries, module = {}, {}, None
    for line in child.stdout:
        sys.stdout.write(line)
        sys.stdout.flush()
        if (m := re.match(r"== minifying (\S+)", line)) is not None:
            module = m.group(1)
        elif module and (m := re.match(r"minified .* in (\d+) queries", line)):
            queries[module] = int(m.group(1))
        elif module and (m := re.match(r"done in ([\d.]+) s", line)):
            minify_times[module] = float(m.group(1))
    return child.wait(), minify_times, queries
