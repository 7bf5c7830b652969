"""The `graphbug_capture` torch.compile backend."""

import itertools
import json
import os
import threading

from . import safetensors

#: Options the backend reads (``torch.compile(..., options={...})``), with their defaults.
DEFAULTS = {
    # Where repro directories go (GRAPHBUG_CAPTURE_DIR overrides the default).
    "out": "graphbug_captures",
    # The backend that compiles the graph after it is written: a name or a callable.
    "inner": "eager",
    # Options and mode for the inner backend, as torch.compile takes them.
    "inner_options": None,
    "inner_mode": None,
    # Also write AOTAutograd's forward and backward graphs (aten level). The graph then runs
    # as AOTAutograd compiles it for `aot_eager`; `inner` is not used.
    "aot": False,
    # The graphbug backend the repro directories name (`graphbug repro DIR run` uses it;
    # `--backend` overrides it).
    "backend": "eager",
}

_counters = {}
_lock = threading.Lock()


def _options(options):
    opts = dict(DEFAULTS)
    if os.environ.get("GRAPHBUG_CAPTURE_DIR"):
        opts["out"] = os.environ["GRAPHBUG_CAPTURE_DIR"]
    unknown = sorted(set(options or {}) - set(DEFAULTS))
    if unknown:
        raise ValueError(f"graphbug_capture: unknown option(s) {unknown}; known: {sorted(DEFAULTS)}")
    opts.update(options or {})
    return opts


def graphbug_capture(gm, example_inputs, options=None):
    """A torch.compile backend: writes `gm` (and, with ``aot``, its AOT forward and backward
    graphs) with the real inputs of its first call as graphbug repro directories, then hands
    it to the inner backend."""
    import torch

    opts = _options(options)
    with _lock:
        index = next(_counters.setdefault(os.path.abspath(opts["out"]), itertools.count()))
    os.makedirs(opts["out"], exist_ok=True)
    device = _device(example_inputs)
    names = [n.name for n in gm.graph.nodes if n.op == "placeholder"]
    dynamo_dir = _Writer(opts, f"dynamo_{index:03d}", "dynamo", device)
    dynamo_dir.graph(gm)
    if opts["aot"]:
        compiled = _aot(gm, example_inputs, opts, index, device)
    else:
        inner = opts["inner"]
        if isinstance(inner, str):
            wrapper = torch._TorchCompileWrapper(inner, opts["inner_mode"], opts["inner_options"],
                                                 None)
            compiled = wrapper(gm, example_inputs)
        else:
            compiled = inner(gm, example_inputs)
    return _first_call_recorder(compiled, dynamo_dir, names, boxed=False)


def _aot(gm, example_inputs, opts, index, device):
    from functorch.compile import make_boxed_func
    from torch._functorch.aot_autograd import aot_module_simplified

    def recorder(kind):
        def compile_graph(graph, _inputs):
            writer = _Writer(opts, f"aot_{kind}_{index:03d}", "aot", device)
            writer.graph(graph)
            names = [n.name for n in graph.graph.nodes if n.op == "placeholder"]
            return _first_call_recorder(make_boxed_func(graph.forward), writer, names, boxed=True)

        return compile_graph

    return aot_module_simplified(gm, example_inputs, fw_compiler=recorder("fw"),
                                 bw_compiler=recorder("bw"))


def _device(example_inputs):
    for x in example_inputs:
        dev = getattr(x, "device", None)
        if dev is not None and dev.type != "cpu":
            return str(dev)
    return "cpu"


def _first_call_recorder(fn, writer, names, boxed):
    """`fn`, writing the inputs and outputs of its first call next to the graph."""
    state = {"done": False}

    def record(args):
        # The inputs are written before the call (it may change them in place).
        first = not state["done"]
        if first:
            state["done"] = True
            writer.inputs(names, args)
        return first

    if boxed:
        def run(args):
            first = record(list(args))
            outs = fn(args)
            if first:
                writer.outputs(outs)
            return outs

        run._boxed_call = True
        return run

    # Dynamo calls a backend's function with the inputs as arguments, or with one list of
    # them when it flattens the inputs itself; either way they pass through unchanged.
    def run(*args):
        first = record(args[0] if len(args) == 1 and isinstance(args[0], list) else args)
        outs = fn(*args)
        if first:
            writer.outputs(outs)
        return outs

    if getattr(fn, "_boxed_call", False):
        run._boxed_call = True
    return run


def _symbolic_sizes(node):
    """A placeholder's sizes as text (`s0`, `2*s0`, `8`), its value's for a SymInt input,
    from the fake value dynamo or AOTAutograd traced it with; None when unknown."""
    value = node.meta.get("example_value", node.meta.get("val"))
    if type(value).__name__ == "SymInt":
        return str(value)
    shape = getattr(value, "shape", None)
    return None if shape is None else [str(s) for s in shape]


def _bindings(sizes, args):
    """The size symbols the inputs bind (sizes and SymInt values that are one symbol), by
    name, sorted: what graphbug's manifest records as `bindings`."""
    out = {}
    for spec, a in zip(sizes, args):
        if isinstance(spec, str):
            if spec.isidentifier():
                out[spec] = int(a)
        elif spec is not None and hasattr(a, "shape"):
            for s, real in zip(spec, a.shape):
                if s.isidentifier():
                    out[s] = int(real)
    return dict(sorted(out.items()))


class _Writer:
    """One repro directory: graph.py, inputs.safetensors, manifest.json."""

    def __init__(self, opts, name, after, device):
        self.dir = os.path.join(opts["out"], name)
        self.after = after
        self.device = device
        self.backend = opts["backend"]
        os.makedirs(self.dir, exist_ok=True)

    def graph(self, gm):
        self.sizes = [_symbolic_sizes(n) for n in gm.graph.nodes if n.op == "placeholder"]
        text = gm.print_readable(print_output=False)
        with open(os.path.join(self.dir, "graph.py"), "w") as fh:
            fh.write(text if text.endswith("\n") else text + "\n")
        consts = []
        for node in gm.graph.nodes:
            if node.op == "get_attr":
                value = _attr(gm, node.target)
                if hasattr(value, "dtype"):
                    consts.append((node.target, value))
        if consts:
            # torch.compile calls backends with its fake tensor mode active; the constants
            # are real tensors, written outside it.
            from torch._subclasses.fake_tensor import unset_fake_temporarily

            with unset_fake_temporarily():
                safetensors.save(os.path.join(self.dir, "constants.safetensors"), consts)

    def outputs(self, outs):
        """PyTorch's outputs of the first call, out0..outN (sizes as 0-d tensors, None
        left out), for `graphbug run --compare`."""
        import torch

        outs = outs if isinstance(outs, (tuple, list)) else (outs,)
        named = []
        for i, o in enumerate(outs):
            if isinstance(o, torch.Tensor):
                named.append((f"out{i}", o.detach()))
            elif isinstance(o, (int, bool)) or type(o).__name__ == "SymInt":
                named.append((f"out{i}", torch.tensor(int(o))))
        try:
            safetensors.save(os.path.join(self.dir, "outputs.safetensors"), named)
        except ValueError as e:
            _note(self.dir, f"outputs not written: {e}")

    def inputs(self, names, args):
        import torch

        named = []
        for name, a in zip(names, args):
            if isinstance(a, torch.Tensor):
                named.append((name, a))
            elif isinstance(a, (int, bool)) or type(a).__name__ == "SymInt":
                named.append((name, torch.tensor(int(a))))
        try:
            safetensors.save(os.path.join(self.dir, "inputs.safetensors"), named)
        except ValueError as e:
            _note(self.dir, f"inputs not written: {e}")
            return
        manifest = {
            "graphbug_version": "0.1.0",
            "libtorch_version": torch.__version__.split("+")[0],
            "backend": self.backend,
            "after": self.after,
            "level": 1,
            "device": self.device,
            "inputs": {"kind": "real"},
            "fault_spec": None,
            "plugins": [],
            "failure": None,
        }
        bindings = _bindings(getattr(self, "sizes", []), args)
        if bindings:
            manifest["bindings"] = bindings
        with open(os.path.join(self.dir, "manifest.json"), "w") as fh:
            json.dump(manifest, fh, indent=2)
            fh.write("\n")


def _attr(gm, target):
    value = gm
    for part in target.split("."):
        value = getattr(value, part)
    return value


def _note(directory, message):
    with open(os.path.join(directory, "CAPTURE_NOTE.txt"), "a") as fh:
        fh.write(message + "\n")
