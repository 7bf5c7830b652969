"""Runs a graph file (PyTorch's print_readable() text, flat form) in PyTorch eager.

graphbug's tests and benchmarks use it as the reference: the same graph, run by PyTorch
as a torch.fx.GraphModule. Tensors travel as .safetensors, read and written here without
any dependency beyond torch (no numpy, no safetensors package).

  python torch_graph.py GRAPH.py --inputs IN.safetensors [--outputs OUT.safetensors]
                        [--mutated-inputs M.safetensors] [--time N] [--threads T] [--serve]

Input keys are arg0..argN (or any prefix + index); outputs are written as out0..outN and
the inputs after the run (in-place updates visible) as arg0..argN. With --time N it prints
{"seconds_per_call": median} over N calls. With --serve it prints "ready", then for each
line N on its input the median seconds per call over N calls, one line each, so that a
benchmark can time PyTorch in rounds interleaved with its own.
"""

import argparse
import ctypes
import json
import re
import struct
import sys
import time
import warnings

warnings.filterwarnings("ignore", message="Failed to initialize NumPy")
import torch  # noqa: E402

_DTYPES = {
    "F64": torch.float64, "F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16,
    "I64": torch.int64, "I32": torch.int32, "I16": torch.int16, "I8": torch.int8,
    "U8": torch.uint8, "BOOL": torch.bool, "C64": torch.complex64,
}
_NAMES = {v: k for k, v in _DTYPES.items()}


def _index(key):
    m = re.search(r"(\d+)$", key)
    return int(m.group(1)) if m else -1


def read_safetensors(path):
    """Tensors of a .safetensors file, ordered by the numeric suffix of their names."""
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    header.pop("__metadata__", None)
    body = data[8 + n:]
    out = []
    for key in sorted(header, key=_index):
        info = header[key]
        start, end = info["data_offsets"]
        dtype = _DTYPES[info["dtype"]]
        raw = bytearray(body[start:end])
        t = torch.frombuffer(raw, dtype=torch.uint8) if raw else torch.empty(0, dtype=torch.uint8)
        out.append(t.view(dtype).reshape(info["shape"]).clone())
    return out


def write_safetensors(path, named):
    """Writes (name, tensor) pairs as a .safetensors file."""
    header, chunks, offset = {}, [], 0
    for name, t in named:
        t = t.detach().cpu().contiguous()
        nbytes = t.numel() * t.element_size()
        raw = ctypes.string_at(t.data_ptr(), nbytes) if nbytes else b""
        header[name] = {"dtype": _NAMES[t.dtype], "shape": list(t.shape),
                        "data_offsets": [offset, offset + nbytes]}
        chunks.append(raw)
        offset += nbytes
    blob = json.dumps(header, separators=(",", ":")).encode()
    blob += b" " * (-len(blob) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(blob)) + blob + b"".join(chunks))


def load_graph_module(path):
    """The graph file's module, traced into a torch.fx.GraphModule."""
    src = open(path).read()
    src = re.sub(r"^class [^(]*\(", "class Repro(", src, count=1, flags=re.M)
    ns = {"torch": torch, "device": torch.device, "inf": float("inf"), "nan": float("nan")}
    exec(compile(src, path, "exec"), ns)
    return torch.fx.symbolic_trace(ns["Repro"]())


def median_call(gm, inputs, n):
    """The median seconds of `n` calls of `gm`, after a warm-up of a tenth of them."""
    for _ in range(max(3, n // 10)):
        gm(*inputs)
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        gm(*inputs)
        times.append(time.perf_counter() - t0)
    times.sort()
    return times[len(times) // 2]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("graph")
    ap.add_argument("--inputs", required=True)
    ap.add_argument("--outputs")
    ap.add_argument("--mutated-inputs")
    ap.add_argument("--time", type=int, default=0)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--serve", action="store_true")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    gm = load_graph_module(args.graph)
    inputs = read_safetensors(args.inputs)
    with torch.no_grad():
        if args.serve:
            clones = [t.clone() for t in inputs]
            gm(*clones)
            print("ready", flush=True)
            for line in sys.stdin:
                print(median_call(gm, clones, int(line)), flush=True)
            return
        if args.time:
            clones = [t.clone() for t in inputs]
            print(json.dumps({"seconds_per_call": median_call(gm, clones, args.time)}))
            return
        outs = gm(*inputs)
    if not isinstance(outs, (tuple, list)):
        outs = (outs,)
    if args.outputs:
        write_safetensors(args.outputs, [(f"out{i}", t) for i, t in enumerate(outs)])
    if args.mutated_inputs:
        write_safetensors(args.mutated_inputs, [(f"arg{i}", t) for i, t in enumerate(inputs)])


if __name__ == "__main__":
    sys.exit(main())
