"""PyTorch's own minifier strategy (functorch's fx_minifier) on a graph graphbug describes.

graphbug's XLA minifier benchmark compares query counts on the same program and checker:
this script builds an FX graph mirroring the program's graph (one opaque call per
instruction, getitems for tuple elements), runs `functorch.compile.minifier` on it, and asks
the benchmark whether each candidate fails: it writes {"kept": [node ids]} (the calls the
candidate keeps; everything else it reads is an input) on its standard output and reads
"1" (fails) or "0" on its standard input. At the end it writes {"done": true, "queries": n,
"kept": [...]}.

  python fx_minifier_driver.py < graph.json   (the first line: {"nodes": [...]})
"""

import json
import operator
import os
import sys
import warnings

warnings.filterwarnings("ignore")
import torch  # noqa: E402
import torch.fx as fx  # noqa: E402
from functorch.compile import minifier  # noqa: E402

# The protocol uses the real standard output; whatever the minifier prints goes to stderr.
protocol = os.fdopen(os.dup(sys.stdout.fileno()), "w", buffering=1)
sys.stdout = sys.stderr


def op(*args):
    """One instruction: its value does not matter, only which instructions a candidate keeps."""
    return torch.zeros(1)


def op_tuple(n):
    def f(*args):
        return tuple(torch.zeros(1) for _ in range(n))

    f.__name__ = f"op_tuple{n}"
    return f


def build(desc):
    g = fx.Graph()
    env = {}
    ids = {}
    for n in desc["nodes"]:
        name = f"n{n['id']}"
        if n["kind"] == "input":
            node = g.placeholder(name)
        elif n["kind"] == "getitem":
            node = g.call_function(operator.getitem, (env[n["args"][0]], n["index"]))
            node.name = name
        else:
            target = op_tuple(n["items"]) if n.get("items") else op
            node = g.call_function(target, tuple(env[a] for a in n["args"]))
            node.name = name
        env[n["id"]] = node
        ids[name] = n["id"]
    outs = [env[o] for o in desc["outputs"]]
    g.output(outs[0] if len(outs) == 1 else tuple(outs))
    return fx.GraphModule(torch.nn.Module(), g), ids


def kept_of(gm, ids):
    return sorted(
        ids[n.name]
        for n in gm.graph.nodes
        if n.op == "call_function" and n.target is not operator.getitem and n.name in ids
    )


def main():
    desc = json.loads(sys.stdin.readline())
    gm, ids = build(desc)
    inps = [torch.zeros(1) for n in desc["nodes"] if n["kind"] == "input"]
    queries = 0

    def fails(candidate, _inps):
        nonlocal queries
        queries += 1
        protocol.write(json.dumps({"kept": kept_of(candidate, ids)}) + "\n")
        answer = sys.stdin.readline().strip()
        if answer not in ("0", "1"):
            sys.exit(f"bad answer {answer!r}")
        return answer == "1"

    result, _ = minifier(gm, inps, fails, dump_state=lambda *a: None)
    protocol.write(json.dumps({"done": True, "queries": queries, "kept": kept_of(result, ids)}) + "\n")


if __name__ == "__main__":
    main()
