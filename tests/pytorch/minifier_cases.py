"""The cases of PyTorch's own minifier tests, traced with the project's PyTorch.

For every case of test/functorch/test_minifier.py, test/dynamo/test_minifier.py,
test/inductor/test_minifier.py and test/dynamo/test_after_aot.py that concerns a graph
and what minifying it gives, this writes the function traced with make_fx (aten level,
what graphbug reads) and its inputs, and runs functorch's minifier on it with the same
predicate, so graphbug's result can be held to PyTorch's assertions and to functorch's
size (tests/pytorch_minifier.rs).

  python minifier_cases.py OUT_DIR

OUT_DIR/<case>/graph.py          the traced graph (print_readable)
OUT_DIR/<case>/inputs.safetensors its inputs by placeholder name (and lifted constants)
OUT_DIR/<case>/functorch.json    {"call_nodes": N, "inputs": I} of functorch's result
"""

import contextlib
import io
import json
import logging
import os
import sys
import warnings

warnings.filterwarnings("ignore")
logging.disable(logging.CRITICAL)
import torch  # noqa: E402
from functorch.compile import minifier  # noqa: E402
from torch._functorch.compile_utils import get_outputs, get_placeholders  # noqa: E402
from torch.fx.experimental.proxy_tensor import make_fx  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "../../crates/aten/aten/python"))
from torch_graph import write_safetensors  # noqa: E402

aten = torch.ops.aten


# ---------------------------------------------------------------- predicates

def has(op):
    return lambda gm, inps: op in (n.target for n in gm.graph.nodes)


def has_nans(gm, inps):
    # test_minifier.py: no input computes NaN, output 0 does.
    for i in inps:
        if torch.isnan(i).any():
            return False
    return bool(torch.isnan(gm(*inps)[0]).any())


def inputs_returned(gm, inps):
    return len(set(get_placeholders(gm.graph)) & set(get_outputs(gm.graph))) > 0


def bug(gm, targets):
    """An aten-level stand-in for the TESTING_ONLY backends and inductor's injected bugs:
    every call of `targets` returns its result plus one."""
    gm = torch.fx.GraphModule(gm, gm.graph.__deepcopy__())
    for node in list(gm.graph.nodes):
        if node.op == "call_function" and node.target in targets:
            with gm.graph.inserting_after(node):
                plus = gm.graph.call_function(aten.add.Tensor, (node, 1))
            node.replace_all_uses_with(plus, delete_user_cb=lambda u: u is not plus)
    gm.recompile()
    return gm


def accuracy_fails(targets, strict=False):
    from torch._dynamo.debug_utils import backend_accuracy_fails

    def fails(gm, inps):
        return backend_accuracy_fails(
            gm, inps, lambda g, _: bug(g, targets), require_fp64=True, ignore_non_fp=not strict
        )

    return fails


# ---------------------------------------------------------------- functions

def has_mul_f(x, y):
    y = y / 3
    x = x + 3
    x = x * y
    return x + y


def has_add_mul_f(x):
    x = x * 3
    x = x + 5
    x = x.cos()
    zero = x - x
    result = zero / zero
    result = result + 3
    return (result * 2,)


def input_returned_f(a, b, c):
    a = a.sin()
    c = c.cos()
    d = a * c
    return (a, b, c, d)


def tup_use_f(a, b):
    tup = torch.std_mean(a)
    return (tup[0] + b * tup[1],)


class MockModule(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.relu = torch.nn.ReLU()

    def forward(self, x):
        y = self.relu(x)
        zero = y - y
        result = zero / zero
        result = result + 3
        return result


def after_dynamo_f(x):
    for _ in range(10):
        x = torch.sin(x)
    x = torch.relu(x)
    for _ in range(10):
        x = torch.cos(x)
    return x


def graph_minified_f(x):
    for _ in range(20):
        x = torch.sin(x)
    x = torch.relu(x)
    for _ in range(20):
        x = torch.cos(x)
    return x


def backend_passes_f(x):
    for _ in range(10):
        x = torch.sin(x)
    for _ in range(10):
        x = torch.cos(x)
    return x


class CpuDeviceModule(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.m_x = torch.nn.Linear(20, 20)
        self.m_y = torch.nn.Linear(20, 20)
        self.p_x = torch.nn.Parameter(torch.randn(20, 20))
        self.p_y = torch.nn.Parameter(torch.randn(20, 20))
        self.b_x = torch.nn.Buffer(torch.ones(20, 20))
        self.b_y = torch.nn.Buffer(torch.ones(20, 20))

    def forward(self, x, y):
        return self.m_x(x) + self.p_x + self.b_x, self.m_y(y) + self.p_y + self.b_y


def cpu_device_module_f(x1, y1, mod):
    x2 = torch.randn(20, 20)
    y2 = torch.randn(20, 20)
    x3, y3 = mod(x1 + x2, y1 + y2)
    return torch.relu(x3.cpu() + y3)


def after_aot_f(x):
    x = torch.relu(x)
    x = torch.cos(x)
    return x


def constant_in_graph_f(x):
    return torch.tensor(2) + torch.relu(x)


def strict_accuracy_f(x):
    y = torch.log1p(x)
    b = y > 0
    b = torch.logical_not(b)
    b = torch.logical_not(b)
    x = torch.relu(x)
    return torch.where(b, x, x)


def offload_f(x):
    x = torch.sin(x)
    x = torch.sin(x)
    x = torch.cos(x)
    x = torch.relu(x)
    return x


# ---------------------------------------------------------------- cases

def cases():
    g = torch.Generator().manual_seed(0)

    def randn(*shape):
        return torch.randn(*shape, generator=g)

    mlp = CpuDeviceModule()
    relu = (aten.relu.default,)
    both = (aten.relu.default, aten.log1p.default)
    # name, function, inputs, functorch's predicate (None: no minification)
    return [
        ("has_mul", has_mul_f, [randn(3), randn(3)], has(aten.mul.Tensor)),
        ("has_add_mul", has_add_mul_f, [randn(3)], has_nans),
        ("input_returned", input_returned_f, [randn(3) for _ in range(3)], inputs_returned),
        ("tup_use", tup_use_f, [randn(3), randn(3)], has(aten.add.Tensor)),
        ("module", MockModule(), [randn(3)], has_nans),
        ("after_dynamo", after_dynamo_f, [randn(20, 20)], has(aten.relu.default)),
        ("after_dynamo_accuracy", after_dynamo_f, [randn(20, 20)], accuracy_fails(relu)),
        ("graph_minified", graph_minified_f, [randn(20, 20)], has(aten.relu.default)),
        ("backend_passes", backend_passes_f, [randn(20, 20)], None),
        (
            "cpu_device_module",
            lambda x, y: cpu_device_module_f(x, y, mlp),
            [randn(20, 20), randn(20, 20)],
            has(aten.relu.default),
        ),
        ("after_aot", after_aot_f, [randn(20, 20)], has(aten.relu.default)),
        ("after_aot_accuracy", after_aot_f, [randn(20, 20)], accuracy_fails(relu)),
        ("constant_in_graph", constant_in_graph_f, [randn(2)], accuracy_fails(relu)),
        ("accuracy_vs_strict", strict_accuracy_f, [randn(20)], accuracy_fails(both)),
        (
            "accuracy_vs_strict_strict",
            strict_accuracy_f,
            [randn(20)],
            accuracy_fails(both, strict=True),
        ),
        ("offload_to_disk", offload_f, [randn(20, 20)], accuracy_fails(relu)),
        ("save_graph_repro", lambda x: (x * x,), [randn(4)], None),
    ]


def call_nodes(gm):
    return sum(1 for n in gm.graph.nodes if n.op == "call_function")


def main():
    out = sys.argv[1]
    for name, f, inps, predicate in cases():
        d = os.path.join(out, name)
        os.makedirs(d, exist_ok=True)
        with torch.no_grad():
            gm = make_fx(f)(*inps)
        with open(os.path.join(d, "graph.py"), "w") as fh:
            fh.write(gm.print_readable(print_output=False))
        names = [n.name for n in gm.graph.nodes if n.op == "placeholder"]
        named = list(zip(names, inps))
        named += [
            (n.target, getattr(gm, n.target)) for n in gm.graph.nodes if n.op == "get_attr"
        ]
        write_safetensors(os.path.join(d, "inputs.safetensors"), named)
        result = {"original_call_nodes": call_nodes(gm)}
        if predicate is not None:
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(
                io.StringIO()
            ):
                min_gm, min_inps = minifier(gm, [t.clone() for t in inps], predicate)
            result.update(call_nodes=call_nodes(min_gm), inputs=len(min_inps))
        with open(os.path.join(d, "functorch.json"), "w") as fh:
            json.dump(result, fh)


if __name__ == "__main__":
    main()
