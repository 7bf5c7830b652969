"""The caching allocator's peak for a partitioned training step, beside graphbug's figures.

  python peak.py PARTITION.py INPUTS.npz PEAK.json DEVICE

PARTITION.py is what `graphbug partition joint.py` prints (the forward's and the backward's
GraphModules, then `#` comment lines); PEAK.json is `graphbug partition joint.py
--measure-peak --inputs INPUTS.npz --device DEVICE --json`. PyTorch runs the step as
graphbug measures it: the forward on the primals, then the backward on the saved values and
tangents of ones (each laid out like its output), every value freed after its last read
(each graph takes its arguments in one list it empties, as AOTAutograd's boxed calls do).
One warm-up step comes first, so that the libraries' own buffers (cuBLAS's workspace) are
out of the figure. Prints one JSON line: graphbug's modelled and measured peaks and the
allocator's (torch.cuda.max_memory_allocated) above the primals, and the allocator's
rounding bound (512 bytes a block); on a CPU device the allocator's figure is null.
"""

import json
import re
import sys

import numpy as np
import torch

_PARAM = re.compile(r'\s*(\w+)\s*(?::\s*"([^"]*)")?\s*(?:,|$)')
_DTYPES = {"f64": torch.float64, "f32": torch.float32, "f16": torch.float16,
           "bf16": torch.bfloat16, "i64": torch.int64, "i32": torch.int32, "b8": torch.bool}


def meta(annotation):
    """(dtype, shape) of an annotation such as `f32[2, 16]`; None if it is not a tensor's."""
    m = re.fullmatch(r"(\w+)\[([\d, ]*)\]", annotation or "")
    if not m or m.group(1) not in _DTYPES:
        return None
    return _DTYPES[m.group(1)], [int(d) for d in m.group(2).split(",") if d.strip()]


def boxed_modules(path, dev):
    """The forward and backward of a partition's text, each called with one list it empties,
    their device arguments `dev`."""
    text = open(path).read()
    sources = [p for p in re.split(r"(?m)^(?=class )", text) if p.startswith("class ")]
    if len(sources) != 2:
        sys.exit(f"peak.py: {path} holds {len(sources)} graphs, not a forward and a backward")
    modules = []
    for src in sources:
        lines = [line for line in src.splitlines() if not line.startswith("#")]
        for i, line in enumerate(lines):
            m = re.match(r"(\s*)def forward\(self,?(.*)\):\s*$", line)
            if m:
                params = _PARAM.findall(m.group(2))
                names = [n for n, _ in params]
                body = m.group(1) + "    "
                lines[i] = f"{m.group(1)}def forward(self, boxed):"
                unpack = f"{body}{', '.join(names)}{',' if len(names) == 1 else ''} = boxed; boxed.clear()"
                lines.insert(i + 1, unpack if names else f"{body}boxed.clear()")
                break
        src = "\n".join(lines)
        src = re.sub(r"^class [^(]*\(", "class Repro(", src, count=1, flags=re.M)
        # Device arguments in the graph become the measurement's device, as graphbug's
        # --device rewrites them (a mask made on the CPU would not meet a CUDA tensor).
        ns = {"torch": torch, "device": lambda *_, **__: dev, "inf": float("inf"),
              "nan": float("nan")}
        exec(compile(src, path, "exec"), ns)
        modules.append((ns["Repro"](), [meta(a) for _, a in params]))
    return modules


def main():
    partition, inputs, report, device = sys.argv[1:5]
    dev = torch.device(device)
    (fw, _), (bw, bw_params) = boxed_modules(partition, dev)
    figures = json.load(open(report))
    n_saved = len(figures["saved"])
    npz = np.load(inputs)
    keys = sorted(npz.files, key=lambda k: int(re.search(r"(\d+)$", k).group(1)))
    primals = [torch.from_numpy(np.array(npz[k])).to(dev) for k in keys]
    cuda = dev.type == "cuda"

    def tangents(outs):
        """Ones, one per tangent the backward takes, as graphbug's measurement makes them."""
        wanted = bw_params[n_saved:]
        made, next_output = [], 0
        for k, m in enumerate(wanted):
            like = (lambda o: m is not None and o.dtype == m[0] and list(o.shape) == m[1])
            if len(wanted) == len(outs):
                output = outs[k]
            else:
                output = next((o for o in outs[next_output:] if like(o)), None)
                if output is not None:
                    next_output = next(i for i, o in enumerate(outs) if o is output) + 1
            if output is not None and like(output):
                made.append(torch.ones_like(output))
            elif m is not None:
                made.append(torch.ones(m[1], dtype=m[0], device=dev))
            else:
                sys.exit(f"peak.py: tangent {k} has no tensor annotation")
        return made

    def step():
        outs = list(fw.forward(list(primals)))
        n_out = len(outs) - n_saved
        saved = outs[n_out:]
        del outs[n_out:]
        made = tangents(outs)
        # The forward's outputs go before the backward, as graphbug's measurement lets them.
        del outs
        grads = bw.forward(saved + made)
        del saved, made
        return grads

    with torch.no_grad():
        step()
        allocator = None
        if cuda:
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats(dev)
            before = torch.cuda.memory_allocated(dev)
            kept = step()
            torch.cuda.synchronize()
            allocator = torch.cuda.max_memory_allocated(dev) - before
            del kept
    resident = figures["modelled_peak"]["resident"]
    print(json.dumps({
        "modelled": figures["modelled_peak"]["peak"] - resident,
        "measured": figures["measured_peak"]["peak"] - resident,
        "allocator": allocator,
        "rounding": 512 * (figures["fw_ops"] + figures["bw_ops"] + len(primals)),
    }))


if __name__ == "__main__":
    main()
