"""Runs functorch's partitioners on a joint graph file: the reference of graphbug's
partition benchmark, measured in the same run on the same graph.

The graph is graphbug's flat text (placeholders primals_N / tangents_N, the forward
outputs then one gradient per primal). Shapes come from the annotations through fake
tensors, as AOTAutograd traces them. Prints one JSON object:
{"mincut": {"seconds": best, "saved_bytes": N, "fw_ops": N, "bw_ops": N}, "joint_nodes": N}

The graph is rebuilt node for node (tracing would fold calls without tensor inputs into
constants); on PyTorch's own joint.py files (through `graphbug fmt`) the min-cut figures
equal those in tests/fixtures/*/partition.json. (functorch's default_partition is not
measured: in 2.13 it relies on tags AOTAutograd's tracer sets, which a graph rebuilt from
text lacks.)

  python functorch_partition.py JOINT.py --num-fwd-outputs N [--repeat 3]

With `--budgets 0.05,0.1,... --export DIR`, also partitions at each activation memory
budget and writes functorch's forward and backward graphs as DIR/fw_<budget>.py and
DIR/bw_<budget>.py (print_readable), for graphbug to model and measure their peaks.
"""

import argparse
import copy
import json
import operator
import re
import time
import warnings

warnings.filterwarnings("ignore")
import torch  # noqa: E402
from torch._functorch.partitioners import min_cut_rematerialization_partition  # noqa: E402
from torch._subclasses.fake_tensor import FakeTensorMode  # noqa: E402
from torch.fx.passes.fake_tensor_prop import FakeTensorProp  # noqa: E402
from torch.fx.passes.shape_prop import _extract_tensor_metadata  # noqa: E402

DTYPES = {
    "f32": torch.float32,
    "f64": torch.float64,
    "f16": torch.float16,
    "bf16": torch.bfloat16,
    "i64": torch.int64,
    "i32": torch.int32,
    "b8": torch.bool,
    "u8": torch.uint8,
}


def load(path):
    """Builds the FX graph node for node from the text (no tracing, which would fold the
    calls that take no tensor inputs into constants)."""
    src = open(path).read()
    graph = torch.fx.Graph()
    root = torch.nn.Module()
    env = {"torch": torch, "device": torch.device, "inf": float("inf"), "nan": float("nan")}
    sig = re.search(r"def forward\(self, (.*)\):", src).group(1)
    for m in re.finditer(r'(\w+): "[^"]*"', sig):
        env[m.group(1)] = graph.placeholder(m.group(1))
    capture = "(lambda *a, **k: (a, k))"
    body = src[src.index("def forward"):].splitlines()[1:]
    for line in body:
        line = line.split(";  ")[0].strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("return "):
            graph.output(eval(line[len("return "):], env))
            break
        m = re.match(r'(\w+)(?:: "([^"]*)")? = (.*)$', line)
        name, annotation, rhs = m.group(1), m.group(2), m.group(3)
        item = re.match(r"(\w+)\[(\d+)\]$", rhs)
        attr = re.match(r"self\.(\w+)$", rhs)
        if attr:
            # A constant (`self.<attr>`): its annotation's shape and dtype are all a
            # partitioner reads.
            root.register_buffer(attr.group(1), tensor_of(annotation))
            node = graph.create_node("get_attr", attr.group(1), name=name)
        elif item:
            node = graph.create_node(
                "call_function", operator.getitem, (env[item.group(1)], int(item.group(2))), name=name
            )
        else:
            call = re.match(r"(torch\.ops\.[\w.]+)\((.*)\)$", rhs)
            target = eval(call.group(1), env)
            args, kwargs = eval(f"{capture}({call.group(2)})", env)
            node = graph.create_node("call_function", target, args, kwargs, name=name)
        env[name] = node
    return torch.fx.GraphModule(root, graph), src


def tensor_of(annotation):
    """Zeros of an annotation's dtype and shape (`i64[4]`)."""
    m = re.match(r"(\w+)\[([^\]]*)\]$", annotation or "")
    if m is None:
        raise SystemExit(f"a constant's annotation `{annotation}` has no dtype and shape")
    shape = [int(d) for d in m.group(2).split(",") if d.strip()]
    return torch.zeros(shape, dtype=DTYPES[m.group(1)])


def fake_inputs(src, mode):
    sig = re.search(r"def forward\(self, (.*)\):", src).group(1)
    out = []
    for m in re.finditer(r'(\w+): "(\w+\[[^\]]*\])"', sig):
        with mode:
            out.append(mode.from_tensor(tensor_of(m.group(2))))
    return out


def nbytes(node):
    val = node.meta.get("val")
    return val.numel() * val.element_size() if isinstance(val, torch.Tensor) else 0


def calls(gm):
    return sum(1 for n in gm.graph.nodes if n.op == "call_function")


def measure(partition, gm, num_fwd_outputs, repeat):
    best = float("inf")
    for _ in range(repeat):
        g = copy.deepcopy(gm)
        start = time.perf_counter()
        fw, bw = partition(g, None, num_fwd_outputs=num_fwd_outputs)
        best = min(best, time.perf_counter() - start)
    outs = next(n for n in fw.graph.nodes if n.op == "output").args[0]
    saved = [o for o in outs[num_fwd_outputs:] if isinstance(o, torch.fx.Node)]
    return {
        "saved": [n.name for n in saved],
        "seconds": best,
        "saved_bytes": sum(nbytes(n) for n in saved),
        "fw_ops": calls(fw),
        "bw_ops": calls(bw),
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("joint")
    ap.add_argument("--num-fwd-outputs", type=int, required=True)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--budgets", default="")
    ap.add_argument("--export", default=".")
    args = ap.parse_args()
    gm, src = load(args.joint)
    mode = FakeTensorMode(allow_non_fake_inputs=True)
    FakeTensorProp(gm, mode).propagate(*fake_inputs(src, mode))
    for node in gm.graph.nodes:
        if isinstance(node.meta.get("val"), torch.Tensor):
            node.meta["tensor_meta"] = _extract_tensor_metadata(node.meta["val"])
    result = {"joint_nodes": calls(gm)}
    result["mincut"] = measure(
        min_cut_rematerialization_partition, gm, args.num_fwd_outputs, args.repeat
    )
    if args.budgets:
        import torch._functorch.config as fconfig

        result["budgets"] = {}
        for text in args.budgets.split(","):
            b = float(text)
            fconfig.activation_memory_budget = b
            fw, bw = min_cut_rematerialization_partition(
                copy.deepcopy(gm), None, num_fwd_outputs=args.num_fwd_outputs
            )
            for part, g in (("fw", fw), ("bw", bw)):
                with open(f"{args.export}/{part}_{text}.py", "w") as f:
                    f.write(g.print_readable(print_output=False))
            outs = next(n for n in fw.graph.nodes if n.op == "output").args[0]
            saved = [o for o in outs[args.num_fwd_outputs:] if isinstance(o, torch.fx.Node)]
            result["budgets"][text] = {"saved_bytes": sum(nbytes(n) for n in saved)}
        fconfig.activation_memory_budget = 1.0
    print(json.dumps(result))


if __name__ == "__main__":
    main()
