"""Runs functorch's minifier on a graph file with a "contains these ops" predicate.

The reference for graphbug's minifier benchmark: same graph, same predicate, measured in
the same run. Prints {"seconds": ..., "queries": ..., "end_nodes": ...} as JSON.

  python functorch_minify.py GRAPH.py --ops aten.gelu.default[,aten...]
"""

import argparse
import contextlib
import io
import json
import re
import time
import warnings

warnings.filterwarnings("ignore")
import torch  # noqa: E402
from functorch.compile import minifier  # noqa: E402


def load(path):
    src = open(path).read()
    src = re.sub(r"^class [^(]*\(", "class Repro(", src, count=1, flags=re.M)
    ns = {"torch": torch, "device": torch.device, "inf": float("inf"), "nan": float("nan")}
    exec(compile(src, path, "exec"), ns)
    return torch.fx.symbolic_trace(ns["Repro"]())


def inputs_from_annotations(path):
    sig = re.search(r"def forward\(self, (.*)\):", open(path).read()).group(1)
    dtypes = {"f32": torch.float32, "i64": torch.int64, "b8": torch.bool}
    inps = []
    for m in re.finditer(r'(\w+): "(\w+)\[([^\]]*)\]"', sig):
        dt = dtypes[m.group(2)]
        shape = [int(d) for d in m.group(3).split(",") if d.strip()]
        if dt.is_floating_point:
            inps.append(torch.randn(shape, dtype=dt))
        else:
            inps.append(torch.randint(0, 2, shape, dtype=dt))
    return inps


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("graph")
    ap.add_argument("--ops", required=True)
    args = ap.parse_args()
    torch.manual_seed(0)
    gm = load(args.graph)
    inps = inputs_from_annotations(args.graph)
    wanted = set(args.ops.split(","))
    queries = 0

    def fails(fx_g, _inps):
        nonlocal queries
        queries += 1
        present = {str(n.target) for n in fx_g.graph.nodes if n.op == "call_function"}
        return wanted <= present

    start = time.perf_counter()
    with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
        result, _ = minifier(gm, inps, fails, dump_state=lambda *a, **k: None)
    seconds = time.perf_counter() - start
    nodes = sum(1 for n in result.graph.nodes if n.op == "call_function")
    print(json.dumps({"seconds": seconds, "queries": queries, "end_nodes": nodes}))


if __name__ == "__main__":
    main()
