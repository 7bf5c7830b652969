"""Generate graphbug conformance cases from PyTorch itself.

Sources: OpInfo samples (torch.testing's op_db, traced with make_fx), a small model
zoo (torchvision models and torch.nn modules, captured with AOTAutograd), and the same
zoo compiled by torch.compile with the graphbug_capture backend, static and dynamic
(`capture`: the graphs a backend receives, dynamo-level and AOT; a case holds forward.py,
inputs, outputs and the capture's manifest). Each case is a directory holding what
PyTorch says about one graph:

    forward.py            the graph, exactly as PyTorch's print_readable() prints it
    inputs.safetensors    its inputs, keys = placeholder names (constants: their attr name)
    outputs.safetensors   PyTorch's eager outputs, out0..outN
    mutated.safetensors   values of the inputs the graph mutates, after the eager run
    tangents.safetensors  fixed-seed tangents, tangents_1..M (outputs that require grad)
    grads.safetensors     torch.autograd.grad of the outputs w.r.t. the inputs that
                          require grad, with those tangents; keys = placeholder names
    grads_numeric.safetensors
                          float64 central differences of the same, where OpInfo expects
                          PyTorch's gradcheck to fail and the two differ
    joint.py              AOTAutograd's joint graph (where AOTAutograd produced one)
    case.json             everything else: requires_grad mask, layouts, functorch's
                          default / min-cut partition figures, skip reasons

A case PyTorch itself cannot trace or run is written as case.json with
"status": "skipped" and the reason; one whose tensors the case files cannot hold
(complex, sparse) gets "status": "unsupported". Neither is counted.

Run with the project venv: .venv/bin/python xtask/conformance/gen_cases.py --help
"""

import argparse
import concurrent.futures
import contextlib
import copy
import io
import json
import logging
import os
import re
import shutil
import signal
import sys
import unittest
import warnings
import zlib

warnings.filterwarnings("ignore")
logging.disable(logging.CRITICAL)  # PyTorch's fake-tensor tracebacks of ops it then skips

import torch  # noqa: E402
import torch.utils._pytree as pytree  # noqa: E402
from torch.fx.experimental.proxy_tensor import make_fx  # noqa: E402

from safetensors_file import write_safetensors_file  # noqa: E402

FORMAT_VERSION = 1

# Hand-picked OpInfo ops of the CI subset: common ops plus ops graphbug did not
# differentiate before (acos, cumsum, flip, repeat, roll, dot, clamp_min, group_norm).
# as_strided_scatter: PyTorch's own gradient is wrong (OpInfo expects its gradcheck to fail),
# so graphbug's is judged by finite differences.
CI_OPS = [
    "abs", "acos", "add", "addmm", "amax", "as_strided_scatter", "bmm", "cat", "clamp",
    "clamp_min", "cumsum",
    "div.no_rounding_mode", "dot", "exp", "flip", "gather", "index_select", "log_softmax", "matmul",
    "mean", "mul", "nn.functional.gelu", "nn.functional.group_norm",
    "nn.functional.layer_norm", "nn.functional.relu", "permute", "pow", "repeat", "roll",
    "sigmoid", "softmax", "sum", "tanh", "transpose", "where",
]
# embedding_bag's training step holds a storage its CPU kernel makes larger than the result
# it returns: the peak model sees it in its CPU run, and misses it without (CI's wrong answer).
CI_ZOO = ["batch_norm", "embedding_bag", "mlp_small", "multihead_attention"]
# Captured in CI: the CI zoo, plus the modules whose dynamo-level graphs call
# torch.nn.functional functions with their own signatures.
CI_CAPTURE = CI_ZOO + ["instance_norm", "interpolate"]

DTYPES = {"float32": torch.float32, "float64": torch.float64, "bfloat16": torch.bfloat16}
SHORT = {"float32": "f32", "float64": "f64", "bfloat16": "bf16"}

ST_DTYPES = {
    torch.float32: "F32", torch.float64: "F64", torch.float16: "F16", torch.bfloat16: "BF16",
    torch.int64: "I64", torch.int32: "I32", torch.int16: "I16", torch.int8: "I8",
    torch.uint8: "U8", torch.uint16: "U16", torch.uint32: "U32", torch.uint64: "U64",
    torch.bool: "BOOL",
}

CASE_SECONDS = 120  # PyTorch's own time limit per case (trace, run, grad, partitions)
# The most input elements whose gradients are checked by finite differences (two forward
# runs each).
FINITE_DIFFERENCE_LIMIT = 4096
CAPTURE_SECONDS = 600  # per captured model and mode (torch.compile, a training step)


class Skip(Exception):
    """PyTorch itself cannot produce this case; the message says why."""


class Unsupported(Exception):
    """PyTorch produced the case but its files cannot hold it (complex, sparse tensors)."""


class CaseTimeout(Exception):
    """A case took longer than CASE_SECONDS inside PyTorch."""


def first_line(err):
    """The first non-empty line of an exception, prefixed with its type."""
    text = str(err).strip().splitlines()
    line = text[0] if text else ""
    return f"{type(err).__name__}: {line}"[:300]


def seed_of(case_id, salt=""):
    """A fixed seed derived from the case id (independent of generation order)."""
    return zlib.crc32((case_id + salt).encode()) & 0x7FFFFFFF


# ---------------------------------------------------------------- safetensors


def write_safetensors(path, named):
    """Writes [(name, tensor)] as safetensors (keys sorted, 8-byte aligned header)."""
    entries = []
    for name, t in sorted(named, key=lambda kv: kv[0]):
        if t.layout != torch.strided:
            raise Unsupported(f"tensor `{name}` is {t.layout}: case files hold dense tensors")
        if t.dtype not in ST_DTYPES:
            raise Unsupported(f"tensor `{name}` is {t.dtype}, which safetensors cannot hold")
        t = t.detach().to("cpu")
        if t._is_zerotensor():
            t = torch.zeros(t.shape, dtype=t.dtype)
        # A fresh dense copy: contiguous() keeps stride-0 size-1 dims, which view() refuses.
        t = torch.empty(t.shape, dtype=t.dtype).copy_(t.resolve_conj().resolve_neg())
        if t.numel() == 0:
            data = b""
        else:
            data = t.reshape(-1).view(torch.uint8).numpy().tobytes()
        entries.append((name, ST_DTYPES[t.dtype], t.shape, data))
    write_safetensors_file(path, entries)


# ---------------------------------------------------------------- graph helpers


def graph_text(gm):
    """The graph as print_readable() prints it (no ANSI colors, no source comments)."""
    return gm.print_readable(print_output=False, colored=False)


def placeholders(gm):
    return [n for n in gm.graph.nodes if n.op == "placeholder"]


def get_attrs(gm):
    return [n for n in gm.graph.nodes if n.op == "get_attr"]


UNINITIALIZED = ("empty", "empty_like", "new_empty", "empty_strided", "new_empty_strided",
                 "empty_permuted")


RANDOM_OPS = re.compile(r"^(bernoulli|rand|randn|randint|randperm|normal|uniform|multinomial|"
                        r"exponential|geometric|cauchy|log_normal|random|native_dropout|"
                        r"poisson|rrelu_with_noise|_standard_gamma|_sample_dirichlet|"
                        r"binomial|_fused_dropout)(_like)?_?$")


def graph_randomness(gm):
    """(random ops, other ops tagged nondeterministic_seeded, uninitialized memory)."""
    random = seeded = uninitialized = False
    for n in gm.graph.nodes:
        if n.op != "call_function" or not isinstance(n.target, torch._ops.OpOverload):
            continue
        name = n.target._schema.name.split("::")[-1]
        if RANDOM_OPS.match(name):
            random = True
        elif torch.Tag.nondeterministic_seeded in n.target.tags:
            seeded = True
        if name in UNINITIALIZED:
            # Uninitialized memory that reaches an output (a fill or bernoulli_ of it
            # does not count: those overwrite every element; nor does a dead one).
            if any(u.op == "output" for u in n.users):
                uninitialized = True
    return random, seeded, uninitialized


def same_values(a, b):
    """Whether two flat output tuples are equal (NaN equal to NaN)."""
    return len(a) == len(b) and all(
        x.shape == y.shape and x.dtype == y.dtype and torch.equal(
            torch.nan_to_num(x.detach()) if x.is_floating_point() else x.detach(),
            torch.nan_to_num(y.detach()) if y.is_floating_point() else y.detach())
        for x, y in zip(a, b))


def tensor_bytes(val):
    if isinstance(val, torch.Tensor):
        return val.numel() * val.element_size()
    return 0


def partition_figures(fw_module, num_fwd_outputs):
    """Saved values (names, bytes) of a forward partition, as partition.json reports them."""
    out = next(n for n in fw_module.graph.nodes if n.op == "output")
    outs = out.args[0]
    saved = [n for n in outs[num_fwd_outputs:] if isinstance(n, torch.fx.Node)]
    names = [n.name for n in saved]
    total = sum(tensor_bytes(n.meta.get("val")) for n in saved)
    ops = lambda gm: sum(1 for n in gm.graph.nodes if n.op == "call_function")  # noqa: E731
    return names, total, ops(fw_module)


# ---------------------------------------------------------------- one case


def flat_function(fn, flat, spec, tensor_positions):
    """f(*tensors): puts the tensors back into the flat argument list and calls fn.

    Returns a tuple of the tensor leaves of fn's result (AOTAutograd's flat outputs).
    """

    def f(*tensors):
        leaves = list(flat)
        for i, t in zip(tensor_positions, tensors):
            leaves[i] = t
        args, kwargs = pytree.tree_unflatten(leaves, spec)
        out = fn(*args, **kwargs)
        return tuple(x for x in pytree.tree_leaves(out) if isinstance(x, torch.Tensor))

    return f


def ill_conditioned(f, tensors, requires_grad, want, tangents, grads, grad_names, seed):
    """Why the float32 gradients are no reference, or None. They are computed again in
    float64; where PyTorch's own float32 gradients are not within the accuracy checks' loose
    tolerance (4e-2, relative to the largest) of those, the case is ill-conditioned (train-mode
    batch norm on a small batch: PyTorch's float32 result then depends on its thread count),
    and no float32 result can be judged against it."""
    if not grads or any(g.dtype != torch.float32 for _, g in grads):
        return None
    try:
        wide = [t.detach().double() if t.is_floating_point() else t.detach().clone()
                for t in tensors]
        grad_in = [t.requires_grad_(True) if rg else t for t, rg in zip(wide, requires_grad)]
        torch.manual_seed(seed)
        outs = f(*grad_in)
        wrt = [t for t, rg in zip(grad_in, requires_grad) if rg]
        got = torch.autograd.grad([outs[i] for i in want], wrt,
                                  [t.double() for t in tangents], allow_unused=True)
    except Exception:  # noqa: BLE001
        return None
    by_name = {n: g for n, g in zip(grad_names, got) if g is not None}
    # Gradients that are nearly zero in float64 (a bias before a batch norm) are judged on
    # the scale of all gradients, not on their own.
    overall = max((g.abs().max().item() for g in by_name.values() if g.numel()), default=0.0)
    worst, where = 0.0, None
    for n, g32 in grads:
        g64 = by_name.get(n)
        if g64 is None or g64.shape != g32.shape:
            return None
        if g32.numel() == 0:
            # An empty gradient (a sample with a zero-size dimension) has nothing to judge.
            continue
        own = g64.abs().max().item() if g64.numel() else 0.0
        scale = max(own, 1e-3 * overall) or 1.0
        err = (g32.double() - g64).abs().max().item() / scale
        if err > worst:
            worst, where = err, n
    if worst <= 4e-2:
        return None
    return (f"PyTorch's float32 gradient of `{where}` is {worst:.2e} (relative to its largest "
            "element) from its float64 one")


def finite_difference_grads(f, tensors, names, want, tangents, grads, seed):
    """PyTorch's gradients against float64 central differences of f, for an op whose OpInfo
    entry expects autograd's gradcheck to fail: the numeric gradients by input name when
    some differ from PyTorch's beyond the accuracy checks' loose tolerance (4e-2, relative
    to the largest), else None (they agree, or the inputs are too large to perturb one
    element at a time). The runner judges graphbug's gradients by these only where they
    differ from PyTorch's too."""
    if not grads or any(g.dtype != torch.float32 for _, g in grads):
        return None
    by_name = dict(grads)
    if sum(g.numel() for g in by_name.values()) > FINITE_DIFFERENCE_LIMIT:
        return None
    wide = [t.detach().double().contiguous() if t.is_floating_point() else t.detach().clone()
            for t in tensors]
    wide_tangents = [t.double() for t in tangents]

    def outputs():
        torch.manual_seed(seed)
        with torch.no_grad():
            return f(*clones(wide))

    def weighted_sum():
        outs = outputs()
        return sum((outs[i] * t).sum().item() for i, t in zip(want, wide_tangents))

    def central_differences(eps):
        numeric = []
        for name, t in zip(names, wide):
            if name not in by_name:
                continue
            flat = t.view(-1)
            g = torch.zeros_like(flat)
            for j in range(flat.numel()):
                old = flat[j].item()
                flat[j] = old + eps
                up = weighted_sum()
                flat[j] = old - eps
                down = weighted_sum()
                flat[j] = old
                g[j] = (up - down) / (2 * eps)
            numeric.append((name, g.view(t.shape)))
        return numeric

    def largest(gs):
        return max((g.abs().max().item() for g in gs if g.numel()), default=0.0)

    try:
        # Outputs rounded below float64 (a cast to float32 or half) turn small steps into
        # noise: such finite differences judge nothing.
        if any(outputs()[i].dtype != torch.float64 for i in want):
            return None
        numeric = central_differences(1e-6)
        coarse = central_differences(1e-4)
    except Exception:  # noqa: BLE001
        return None
    scale = max(largest(g for _, g in numeric), largest(by_name.values())) or 1.0
    # Differences that change with the step size are no reference either.
    unsteady = max(((g - c).abs().max().item() / scale
                    for (_, g), (_, c) in zip(numeric, coarse) if g.numel()), default=0.0)
    worst = max(((by_name[n].double() - g).abs().max().item() / scale
                 for n, g in numeric if g.numel()), default=0.0)
    if unsteady > 1e-3 or worst <= 4e-2:
        return None
    return [(n, g.to(by_name[n].dtype)) for n, g in numeric]


def clones(tensors, requires_grad=None):
    out = []
    for i, t in enumerate(tensors):
        c = t.detach().clone()
        if requires_grad is not None and requires_grad[i]:
            c.requires_grad_(True)
        out.append(c)
    return out


def functional_mutations(f, tensors, names, seed):
    """The inputs PyTorch's functionalization writes back (`copy_` into a placeholder)."""
    from torch.func import functionalize

    with torch.no_grad():
        torch.manual_seed(seed)
        gm = make_fx(functionalize(f, remove="mutations_and_views"))(*clones(tensors))
    placeholders_ = [n for n in gm.graph.nodes if n.op == "placeholder"]
    written = {n.args[0] for n in gm.graph.nodes
               if n.op == "call_function" and n.target is torch.ops.aten.copy_.default
               and n.args[0].op == "placeholder"}
    return [name for name, p in zip(names, placeholders_) if p in written]


def capture_aot(f, tensors, requires_grad, num_params=0):
    """AOTAutograd's joint graph and functorch's two partitions of it, or an error."""
    from functorch.compile import (
        aot_function,
        default_partition,
        make_boxed_func,
        min_cut_rematerialization_partition,
    )

    record = {}

    def nop(gm, _inputs):
        return make_boxed_func(gm.forward)

    def partition(joint, joint_inputs, **kwargs):
        record["joint"] = graph_text(joint)
        record["num_fwd_outputs"] = kwargs["num_fwd_outputs"]
        record["joint_nodes"] = sum(1 for n in joint.graph.nodes if n.op == "call_function")
        for key, part in (("default", default_partition),
                          ("mincut", min_cut_rematerialization_partition)):
            try:
                fw, bw = part(copy.deepcopy(joint), joint_inputs, **kwargs)
                names, total, fw_ops = partition_figures(fw, kwargs["num_fwd_outputs"])
                record[key] = {"saved": names, "saved_bytes": total, "fw_ops": fw_ops}
            except Exception as e:  # noqa: BLE001
                record[key] = {"error": first_line(e)}
        return default_partition(joint, joint_inputs, **kwargs)

    compiled = aot_function(f, fw_compiler=nop, bw_compiler=nop, partition_fn=partition,
                            num_params_buffers=num_params)
    torch.manual_seed(0)
    compiled(*clones(tensors, requires_grad))
    if "joint" not in record:
        raise Skip("AOTAutograd built no joint graph (the outputs are views of inputs, which "
                   "it regenerates outside the graph, or inputs themselves)")
    return record


def build_case(case_id, out_dir, f, tensors, requires_grad, meta, with_aot=True,
               num_params=0, autograd_known_wrong=None):
    """Traces f, runs it eagerly and through autograd, and writes the case directory.
    `autograd_known_wrong`: why PyTorch's own gradients may be wrong (its OpInfo entry
    expects gradcheck to fail); they are then checked against finite differences.

    Raises Skip (or any exception) when PyTorch itself cannot do it.
    """
    seed = seed_of(case_id)
    # 1. The forward graph: make_fx of the plain function (like the reference exports).
    # A training case is traced with its inputs requiring grad, as torch.compile traces a
    # training step: composite ops take their differentiable path (embedding_bag is
    # _embedding_bag, not the non-differentiable _embedding_bag_forward_only).
    training = any(requires_grad)
    with torch.enable_grad() if training else torch.no_grad():
        torch.manual_seed(seed)
        try:
            gm = make_fx(f)(*clones(tensors, requires_grad if training else None))
        except Exception as e:  # noqa: BLE001
            raise Skip("make_fx cannot trace it: " + first_line(e)) from e
    text = graph_text(gm)
    names = [p.name for p in placeholders(gm)]
    if len(names) != len(tensors):
        raise Skip(f"traced graph has {len(names)} placeholders for {len(tensors)} tensors")
    out_node = next(n for n in gm.graph.nodes if n.op == "output")
    if not isinstance(out_node.args[0], (tuple, list)) or not out_node.args[0]:
        raise Skip("no tensor outputs")
    random_ops, seeded, uninitialized = graph_randomness(gm)
    # 2. Eager outputs (and inputs mutated in place).
    eager_in = clones(tensors)
    versions = [t._version for t in eager_in]
    with torch.no_grad():
        torch.manual_seed(seed)
        try:
            outputs = f(*eager_in)
        except Exception as e:  # noqa: BLE001
            raise Skip("eager run fails: " + first_line(e)) from e
    if not outputs:
        raise Skip("no tensor outputs")
    # Mutated: bumped version counter (add_) or changed values (batch norm's running
    # statistics are written inside its kernel, without a version bump).
    mutated = [n for n, t, v, orig in zip(names, eager_in, versions, tensors)
               if t._version != v or not same_values((t,), (orig,))]
    # Random ops (bernoulli_, rand, ...) make values irreproducible; other ops tagged
    # nondeterministic_seeded only when they change the outputs (scaled dot-product
    # attention with dropout_p=0 does not): a second run under another seed tells.
    random = random_ops or uninitialized
    if seeded and not random:
        with torch.no_grad():
            torch.manual_seed(seed + 1)
            random = not same_values(outputs, f(*clones(tensors)))
    # 3. Gradients with fixed-seed tangents.
    grads_info = None
    grads = []
    tangents = []
    numeric = None
    if any(requires_grad):
        grad_in = clones(tensors, requires_grad)
        torch.manual_seed(seed)
        try:
            outs = f(*grad_in)
            want = [i for i, o in enumerate(outs) if o.requires_grad]
            gen = torch.Generator().manual_seed(seed_of(case_id, "tangents"))
            for i in want:
                o = outs[i]
                tangents.append(torch.randn(o.shape, generator=gen, dtype=torch.float64)
                                .to(o.dtype))
            wrt = [t for t, rg in zip(grad_in, requires_grad) if rg]
            if want:
                got = torch.autograd.grad([outs[i] for i in want], wrt, tangents,
                                          allow_unused=True)
                grad_names = [n for n, rg in zip(names, requires_grad) if rg]
                grads = [(n, g) for n, g in zip(grad_names, got) if g is not None]
                grads_info = {"tangent_outputs": want,
                              "grads": [n for n, _ in grads],
                              "unused": [n for n, g in zip(grad_names, got) if g is None]}
                ill = ill_conditioned(f, tensors, requires_grad, want, tangents, grads,
                                      grad_names, seed)
                if ill is not None:
                    grads_info["ill_conditioned"] = ill
                if autograd_known_wrong and ill is None and not random:
                    numeric = finite_difference_grads(f, tensors, names, want, tangents,
                                                      grads, seed)
                    if numeric is not None:
                        grads_info["finite_differences"] = (
                            "PyTorch's gradients differ from float64 central differences, "
                            f"and OpInfo expects its gradcheck to fail ({autograd_known_wrong})")
            else:
                grads_info = {"skip": "no output requires grad"}
        except Exception as e:  # noqa: BLE001
            grads_info = {"skip": "PyTorch cannot differentiate it: " + first_line(e)}
            tangents, grads = [], []
    else:
        grads_info = {"skip": "no input requires grad"}
    # 4. AOTAutograd's joint and functorch's partitions.
    aot = None
    if with_aot and grads_info and "skip" not in grads_info:
        try:
            aot = capture_aot(f, tensors, requires_grad, num_params)
        except Exception as e:  # noqa: BLE001
            aot = {"skip": "AOTAutograd cannot capture it: " + first_line(e)}
    # AOTAutograd counts a write the eager run cannot see (batch norm's running statistics
    # with momentum 0 are written back unchanged, without a version bump): take which inputs
    # from PyTorch's functionalization.
    if aot is not None and "num_fwd_outputs" in aot:
        num_aot_mutated = aot["num_fwd_outputs"] - len(outputs)
        if num_aot_mutated > len(mutated):
            written = set(mutated) | set(functional_mutations(f, tensors, names, seed))
            mutated = [n for n in names if n in written]
    # 5. Write.
    os.makedirs(out_dir, exist_ok=True)
    consts = []
    for node in get_attrs(gm):
        consts.append((node.target, getattr(gm, node.target)))
    write_safetensors(os.path.join(out_dir, "inputs.safetensors"),
                      list(zip(names, tensors)) + consts)
    write_safetensors(os.path.join(out_dir, "outputs.safetensors"),
                      [(f"out{i}", o) for i, o in enumerate(outputs)])
    if mutated:
        write_safetensors(os.path.join(out_dir, "mutated.safetensors"),
                          [(n, t) for n, t in zip(names, eager_in) if n in mutated])
    if grads_info and "skip" not in grads_info:
        write_safetensors(os.path.join(out_dir, "tangents.safetensors"),
                          [(f"tangents_{i + 1}", t) for i, t in enumerate(tangents)])
        write_safetensors(os.path.join(out_dir, "grads.safetensors"), grads)
        if numeric is not None:
            write_safetensors(os.path.join(out_dir, "grads_numeric.safetensors"), numeric)
    with open(os.path.join(out_dir, "forward.py"), "w") as fh:
        fh.write(text)
    case = {
        "version": FORMAT_VERSION,
        "id": case_id,
        "status": "ok",
        **meta,
        "inputs": names,
        "requires_grad": list(requires_grad),
        "num_outputs": len(outputs),
        "mutated_inputs": mutated,
        "random": random,
        "grads": grads_info,
    }
    if aot is not None:
        if "skip" in aot:
            case["aot"] = aot
        else:
            with open(os.path.join(out_dir, "joint.py"), "w") as fh:
                fh.write(aot.pop("joint"))
            case["aot"] = {"joint": "joint.py", **aot}
    write_case_json(out_dir, case)


def write_case_json(out_dir, case):
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "case.json"), "w") as fh:
        json.dump(case, fh, indent=1, sort_keys=True)
        fh.write("\n")


def skip_case(out_dir, case_id, meta, reason, status="skipped"):
    """A case PyTorch cannot produce ("skipped") or our files cannot hold ("unsupported")."""
    if os.path.isdir(out_dir):
        shutil.rmtree(out_dir)
    write_case_json(out_dir, {"version": FORMAT_VERSION, "id": case_id, "status": status,
                              "reason": reason, **meta})


@contextlib.contextmanager
def time_limit(seconds):
    def on_alarm(_sig, _frame):
        raise CaseTimeout(f"PyTorch took more than {seconds} s")

    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def guarded(case_id, out_dir, meta, body, seconds=CASE_SECONDS):
    """Runs body() within `seconds`; a failure inside PyTorch becomes a skipped case.
    Returns the status."""
    try:
        with time_limit(seconds), contextlib.redirect_stdout(io.StringIO()):
            body()
        return "ok"
    except Unsupported as e:
        skip_case(out_dir, case_id, meta, str(e), status="unsupported")
        return "unsupported"
    except (Skip, CaseTimeout) as e:
        skip_case(out_dir, case_id, meta, str(e))
    except Exception as e:  # noqa: BLE001
        skip_case(out_dir, case_id, meta, "PyTorch fails: " + first_line(e))
    return "skipped"


# ---------------------------------------------------------------- OpInfo


def opinfo_key(op):
    return op.name + (f".{op.variant_test_name}" if op.variant_test_name else "")


def opinfo_ops():
    from torch.testing._internal.common_methods_invocations import op_db

    ops = {}
    for op in op_db:
        ops.setdefault(opinfo_key(op), op)
    return ops


def gradcheck_expected_to_fail(op):
    """`TestBwdGradients.test_fn_grad expected to fail` when the op's OpInfo entry says its
    analytical gradients (autograd's) disagree with numerical ones on CPU, else None.
    Skips say nothing of which is wrong (fmod's finite differences jump), so only expected
    failures count."""
    for info in op.decorators:
        if not hasattr(info, "is_active") or not info.is_active(
                "TestBwdGradients", "test_fn_grad", "cpu", torch.float64, {}):
            continue
        decorators = info.decorators if isinstance(info.decorators, (list, tuple)) \
            else [info.decorators]
        if any(d is unittest.expectedFailure for d in decorators):
            return "TestBwdGradients.test_fn_grad expected to fail"
    return None


def opinfo_task(args):
    """Generates the cases of one (op, dtype): its first `samples` CPU samples."""
    key, dtype_name, samples, out_root = args
    torch.set_num_threads(1)
    op = opinfo_ops()[key]
    dtype = DTYPES[dtype_name]
    results = []
    base = f"opinfo/{key}/{SHORT[dtype_name]}"
    grad_ok = op.supports_autograd and dtype.is_floating_point
    torch.manual_seed(seed_of(base))
    try:
        with time_limit(CASE_SECONDS):
            it = op.sample_inputs("cpu", dtype, requires_grad=grad_ok)
            sample_list = []
            for s in it:
                sample_list.append(s)
                if len(sample_list) >= samples:
                    break
    except Exception as e:  # noqa: BLE001
        case_id = f"{base}/0"
        meta = {"source": "opinfo", "op": key, "dtype": dtype_name, "sample": 0}
        skip_case(os.path.join(out_root, case_id), case_id, meta,
                  "OpInfo sample generation fails: " + first_line(e))
        return [(case_id, "skipped")]
    for k, s in enumerate(sample_list):
        case_id = f"{base}/{k}"
        out_dir = os.path.join(out_root, case_id)
        meta = {"source": "opinfo", "op": key, "dtype": dtype_name, "sample": k,
                "sample_repr": summarize_sample(s)}

        def body(s=s, case_id=case_id, out_dir=out_dir, meta=meta):
            leaves, spec = pytree.tree_flatten(((s.input,) + tuple(s.args), s.kwargs))
            positions = [i for i, x in enumerate(leaves) if isinstance(x, torch.Tensor)]
            tensors = [leaves[i] for i in positions]
            rg = [bool(t.requires_grad) and t.dtype.is_floating_point for t in tensors]
            plain = [t.detach() for t in tensors]

            def call(*a, **kw):
                return op.op(*a, **kw)

            f = flat_function(call, leaves, spec, positions)
            build_case(case_id, out_dir, f, plain, rg, meta,
                       autograd_known_wrong=gradcheck_expected_to_fail(op))

        results.append((case_id, guarded(case_id, out_dir, meta, body)))
    return results


def summarize_sample(s):
    def short(x):
        if isinstance(x, torch.Tensor):
            return f"Tensor{list(x.shape)}:{str(x.dtype).replace('torch.', '')}"
        return x

    try:
        leaves = pytree.tree_map(short, ((s.input,) + tuple(s.args), s.kwargs))
        return repr(leaves)[:300]
    except Exception:  # noqa: BLE001
        return "?"


# ---------------------------------------------------------------- zoo


def zoo_models():
    """name -> (builder, input maker, random_variant_drop). Small inputs, train mode."""
    import torch.nn as nn
    import torch.nn.functional as F

    def tv(name, size, **kw):
        def build():
            import torchvision

            return getattr(torchvision.models, name)(weights=None, **kw)

        return build, lambda: (torch.randn(2, 3, size, size),)

    class Fn(nn.Module):
        def __init__(self, fn, params=()):
            super().__init__()
            self.fn = fn
            for i, p in enumerate(params):
                self.register_parameter(f"w{i}", nn.Parameter(p))

        def forward(self, *xs):
            return self.fn(self, *xs)

    def small(build_fn, *inputs):
        return build_fn, lambda: tuple(t() for t in inputs)

    def rn(*shape):
        return lambda: torch.randn(*shape)

    # Image sizes keep train-mode batch norm well conditioned: at 32x32 the last stages of
    # most of these nets normalize 2 values per channel, and float32 rounding alone moves
    # the outputs by up to 2.0 (PyTorch with 1 vs 2 threads).
    models = {
        "resnet18": tv("resnet18", 64, num_classes=10),
        "mobilenet_v2": tv("mobilenet_v2", 64, num_classes=10),
        "mobilenet_v3_small": tv("mobilenet_v3_small", 64, num_classes=10),
        "efficientnet_b0": tv("efficientnet_b0", 96, num_classes=10),
        "regnet_x_400mf": tv("regnet_x_400mf", 64, num_classes=10),
        "densenet121": tv("densenet121", 64, num_classes=10),
        "squeezenet1_0": tv("squeezenet1_0", 64, num_classes=10),
        "shufflenet_v2_x0_5": tv("shufflenet_v2_x0_5", 64, num_classes=10),
        "convnext_tiny": tv("convnext_tiny", 32, num_classes=10),
        "swin_t": tv("swin_t", 32, num_classes=10),
        # vit_b_16's architecture (VisionTransformer) at a small size: 86M parameters of
        # the full model would make a 700 MB case.
        "vit_small": (lambda: __import__("torchvision").models.VisionTransformer(
            image_size=32, patch_size=8, num_layers=2, num_heads=4, hidden_dim=64,
            mlp_dim=128, num_classes=10, dropout=0.1), lambda: (torch.randn(2, 3, 32, 32),)),
        "mlp_small": small(lambda: nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Dropout(0.1),
                                                 nn.LayerNorm(16), nn.Linear(16, 4)), rn(3, 8)),
        "transformer": small(lambda: nn.Transformer(d_model=16, nhead=2, num_encoder_layers=1,
                                                    num_decoder_layers=1, dim_feedforward=32,
                                                    dropout=0.1, batch_first=True),
                             rn(2, 5, 16), rn(2, 4, 16)),
        "multihead_attention": small(
            lambda: with_child(Fn(lambda m, x: m.attn(x, x, x, need_weights=False)[0]),
                               "attn", nn.MultiheadAttention(16, 2, batch_first=True)),
            rn(2, 5, 16)),
        "lstm": small(lambda: nn.LSTM(8, 12, num_layers=2, batch_first=True, dropout=0.1),
                      rn(2, 5, 8)),
        "gru": small(lambda: nn.GRU(8, 12, num_layers=1, batch_first=True), rn(2, 5, 8)),
        "sdpa": small(lambda: Fn(lambda m, q, k, v: F.scaled_dot_product_attention(
            q, k, v, is_causal=True)), rn(2, 2, 5, 8), rn(2, 2, 5, 8), rn(2, 2, 5, 8)),
        "batch_norm": small(lambda: nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4),
                                                  nn.ReLU()), rn(4, 3, 6, 6)),
        "group_norm": small(lambda: nn.GroupNorm(2, 6), rn(2, 6, 4, 4)),
        "instance_norm": small(lambda: nn.InstanceNorm2d(6, affine=True,
                                                         track_running_stats=True),
                               rn(2, 6, 4, 4)),
        "interpolate": small(lambda: Fn(lambda m, x: F.interpolate(
            x, scale_factor=2, mode="bilinear", align_corners=False) + F.interpolate(
            x, size=(8, 8), mode="nearest")), rn(2, 3, 4, 4)),
        "conv_transpose2d": small(lambda: nn.ConvTranspose2d(4, 3, 3, stride=2, padding=1,
                                                             output_padding=1),
                                  rn(2, 4, 5, 5)),
        "embedding_bag": small(lambda: with_child(Fn(lambda m, idx, off: m.bag(idx, off)),
                                                  "bag", nn.EmbeddingBag(10, 6, mode="mean")),
            lambda: torch.tensor([1, 2, 4, 5, 4, 3, 2, 9]), lambda: torch.tensor([0, 4])),
        "cumsum": small(lambda: Fn(lambda m, x: torch.cumsum(x * m.w0, 1),
                                   [torch.randn(5)]), rn(3, 5)),
        "sort_topk": small(lambda: Fn(lambda m, x: (torch.sort(x * m.w0, dim=1)[0],
                                                    torch.topk(x * m.w0, 2, dim=1)[0]),
                                      [torch.randn(6)]), rn(3, 6)),
        "scatter_gather_index_put": small(lambda: Fn(_scatter_gather, [torch.randn(4, 5)]),
                                          rn(4, 5)),
        "losses": small(lambda: Fn(_losses, [torch.randn(4, 5)]), rn(4, 5)),
    }
    return models


def _scatter_gather(m, x):
    y = x * m.w0
    idx = torch.tensor([[0, 1, 2, 3, 4], [4, 3, 2, 1, 0], [1, 1, 1, 1, 1], [0, 0, 0, 0, 0]])
    g = torch.gather(y, 1, idx)
    s = torch.zeros(4, 5).scatter_add(1, idx, y)
    s2 = torch.scatter(y, 1, idx[:, :2], 1.5)
    ip = y.index_put((torch.tensor([0, 2]), torch.tensor([1, 3])), torch.tensor([7.0, 8.0]),
                     accumulate=True)
    return g + s + s2 + ip


def _losses(m, x):
    import torch.nn.functional as F

    y = x * m.w0
    target = torch.tensor([1, 0, 4, 2])
    soft = torch.softmax(torch.arange(20.0).reshape(4, 5) / 7, 1)
    return (F.cross_entropy(y, target), F.mse_loss(y, soft), F.smooth_l1_loss(y, soft),
            F.binary_cross_entropy_with_logits(y, soft), F.nll_loss(F.log_softmax(y, 1), target),
            F.kl_div(F.log_softmax(y, 1), soft, reduction="batchmean"))


def with_child(parent, name, child):
    """`parent` with `child` registered as its submodule `name`."""
    parent.add_module(name, child)
    return parent


def without_dropout(model):
    """The same model with every dropout and stochastic depth probability set to 0."""
    changed = False
    for mod in model.modules():
        for attr in ("p", "dropout", "attention_dropout"):
            v = getattr(mod, attr, None)
            if isinstance(v, float) and v > 0 and not isinstance(mod, torch.nn.Parameter):
                setattr(mod, attr, 0.0)
                changed = True
    return changed


def zoo_task(args):
    name, variant, out_root = args
    torch.set_num_threads(1)
    case_id = f"zoo/{name}/{variant}"
    out_dir = os.path.join(out_root, case_id)
    meta = {"source": "zoo", "op": name, "dtype": "float32", "variant": variant}

    def body():
        build, make_inputs = zoo_models()[name]
        torch.manual_seed(seed_of(name))
        model = build()
        if variant == "train-nodrop":
            without_dropout(model)
        model.train()
        xs = make_inputs()
        params = dict(model.named_parameters())
        buffers = dict(model.named_buffers())
        pnames, bnames = list(params), list(buffers)
        tensors = [p.detach() for p in params.values()] + [b.detach() for b in buffers.values()]
        tensors += [x.detach() for x in xs]
        # Models: parameters require grad. Modules without parameters: the float inputs.
        rg = [True] * len(pnames) + [False] * len(bnames)
        rg += [x.is_floating_point() and not pnames for x in xs]

        def f(*flat):
            ps = dict(zip(pnames, flat[:len(pnames)]))
            bs = dict(zip(bnames, flat[len(pnames):len(pnames) + len(bnames)]))
            out = torch.func.functional_call(model, {**ps, **bs},
                                             tuple(flat[len(pnames) + len(bnames):]))
            return tuple(x for x in pytree.tree_leaves(out) if isinstance(x, torch.Tensor))

        meta["parameters"] = sum(t.numel() for t in params.values())
        build_case(case_id, out_dir, f, tensors, rg, meta, num_params=len(pnames) + len(bnames))

    return [(case_id, guarded(case_id, out_dir, meta, body))]


def zoo_variants(name):
    """train, plus train-nodrop when the model has dropout (its values are random)."""
    build, _ = zoo_models()[name]
    torch.manual_seed(0)
    m = build()
    return ["train", "train-nodrop"] if without_dropout(m) else ["train"]


# ---------------------------------------------------------------- capture


def capture_task(args):
    """A zoo model (dropout off, train mode) compiled with the graphbug_capture backend,
    with static shapes or dynamic=True, and one training step: each graph the backend
    received (dynamo-level) and each AOT forward and backward graph becomes a case,
    `capture/<model>/<static|dynamic>/<dynamo_000|aot_fw_000|aot_bw_000|...>`, holding the
    graph as PyTorch printed it, its real inputs and PyTorch's outputs."""
    import tempfile

    name, mode, out_root = args
    scratch_root = scratch_dir(out_root)
    torch.set_num_threads(1)
    group = f"capture/{name}/{mode}"
    meta = {"source": "capture", "op": name, "dtype": "float32", "variant": mode}
    results = []

    def body():
        build, make_inputs = zoo_models()[name]
        torch.manual_seed(seed_of(name))
        model = build()
        without_dropout(model)
        model.train()
        xs = make_inputs()
        torch._dynamo.reset()
        # Captures go to a scratch directory beside the cases (see scratch_dir), not the
        # system temp dir: a worker killed with its parent (kill -9) leaves nothing there
        # that the next generation does not sweep.
        os.makedirs(scratch_root, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=scratch_root) as tmp:
            compiled = torch.compile(model, backend="graphbug_capture",
                                     options={"out": tmp, "aot": True},
                                     dynamic=(mode == "dynamic"))
            try:
                out = compiled(*xs)
            except torch._dynamo.exc.BackendCompilerFailed as e:
                # The cause, not the wrapper (a time limit hit inside the backend).
                raise e.inner_exception from None
            floats = [o for o in pytree.tree_leaves(out)
                      if isinstance(o, torch.Tensor) and o.requires_grad]
            if floats:
                sum(o.float().sum() for o in floats).backward()
            dirs = sorted(d for d in os.listdir(tmp) if os.path.isdir(os.path.join(tmp, d)))
            if not dirs:
                raise Skip("torch.compile handed the backend no graph")
            for d in dirs:
                src = os.path.join(tmp, d)
                case_id = f"{group}/{d}"
                out_dir = os.path.join(out_root, case_id)
                files = {"graph.py": "forward.py", "inputs.safetensors": "inputs.safetensors",
                         "outputs.safetensors": "outputs.safetensors",
                         "manifest.json": "manifest.json"}
                missing = [f for f in files if not os.path.exists(os.path.join(src, f))]
                note = os.path.join(src, "CAPTURE_NOTE.txt")
                if missing and os.path.exists(note):
                    # The files cannot hold a value (complex, sparse): the capture says which.
                    with open(note) as fh:
                        reason = fh.read().strip()
                    skip_case(out_dir, case_id, meta, reason, status="unsupported")
                    results.append((case_id, "unsupported"))
                    continue
                if missing:
                    skip_case(out_dir, case_id, meta, "torch.compile compiled this graph but "
                              "never called it (it recompiled first)")
                    results.append((case_id, "skipped"))
                    continue
                os.makedirs(out_dir, exist_ok=True)
                if os.path.exists(os.path.join(src, "constants.safetensors")):
                    files["constants.safetensors"] = "constants.safetensors"
                for f, to in files.items():
                    shutil.copyfile(os.path.join(src, f), os.path.join(out_dir, to))
                kind = d.rsplit("_", 1)[0]
                write_case_json(out_dir, {"version": FORMAT_VERSION, "id": case_id,
                                          "status": "ok", "kind": kind, **meta})
                results.append((case_id, "ok"))

    status = guarded(group, os.path.join(out_root, group, "all"), meta, body,
                     seconds=CAPTURE_SECONDS)
    if status != "ok":
        # Cases of the group written before the failure go: the group is one skip.
        group_dir = os.path.join(out_root, group)
        for d in os.listdir(group_dir):
            if d != "all":
                shutil.rmtree(os.path.join(group_dir, d))
        return [(f"{group}/all", status)]
    return results


# ---------------------------------------------------------------- main


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default="target/conformance/cases")
    p.add_argument("--subset", choices=["ci", "full"], default="full")
    p.add_argument("--samples", type=int, default=None,
                   help="OpInfo samples per op (default: 1 for ci, 3 for full)")
    p.add_argument("--dtypes", default=None,
                   help="comma-separated OpInfo dtypes: float32 (every sample) and float64 /"
                   " bfloat16 (first sample only); default: float32 for ci, all for full")
    p.add_argument("--sources", default="opinfo,zoo,capture")
    p.add_argument("--filter", default=None, help="regex over case ids (re.search)")
    p.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 1)
    a = p.parse_args(argv)
    samples = a.samples if a.samples is not None else (1 if a.subset == "ci" else 3)
    dtypes = (a.dtypes or ("float32" if a.subset == "ci" else "float32,float64,bfloat16"))
    dtypes = [d.strip() for d in dtypes.split(",") if d.strip()]
    for d in dtypes:
        if d not in DTYPES:
            p.error(f"unknown dtype `{d}` (known: {', '.join(DTYPES)})")
    sources = [s.strip() for s in a.sources.split(",") if s.strip()]
    pattern = re.compile(a.filter) if a.filter else None

    def wanted(prefix, n):
        # An (op, dtype) task runs when one of its case ids matches the filter.
        return pattern is None or any(pattern.search(f"{prefix}/{k}") for k in range(n))

    tasks = []
    if "opinfo" in sources:
        ops = opinfo_ops()
        keys = sorted(ops) if a.subset == "full" else [k for k in CI_OPS if k in ops]
        missing = sorted(set(CI_OPS) - set(ops)) if a.subset == "ci" else []
        if missing:
            print(f"gen_cases: CI ops not in op_db: {', '.join(missing)}", file=sys.stderr)
            return 2
        for dname in dtypes:
            for key in keys:
                if DTYPES[dname] not in ops[key].supported_dtypes("cpu"):
                    continue
                n = samples if dname == "float32" else 1
                if wanted(f"opinfo/{key}/{SHORT[dname]}", n):
                    tasks.append((opinfo_task, (key, dname, n, a.out)))
    if "zoo" in sources:
        names = sorted(zoo_models()) if a.subset == "full" else CI_ZOO
        for name in names:
            if pattern is None or pattern.search(f"zoo/{name}/train") \
                    or pattern.search(f"zoo/{name}/train-nodrop"):
                for variant in zoo_variants(name):
                    if pattern is None or pattern.search(f"zoo/{name}/{variant}"):
                        tasks.append((zoo_task, (name, variant, a.out)))

    if "capture" in sources:
        names = sorted(zoo_models()) if a.subset == "full" else CI_CAPTURE
        for name in names:
            for mode in ("static", "dynamic"):
                if pattern is None or pattern.search(f"capture/{name}/{mode}/"):
                    tasks.append((capture_task, (name, mode, a.out)))

    os.makedirs(a.out, exist_ok=True)
    shutil.rmtree(scratch_dir(a.out), ignore_errors=True)
    counts = {"ok": 0, "skipped": 0, "unsupported": 0}
    try:
        run_tasks(tasks, max(1, a.jobs), counts)
    finally:
        shutil.rmtree(scratch_dir(a.out), ignore_errors=True)
    return 0


def scratch_dir(out_root):
    """Scratch space of a generation into `out_root`, beside it (the runner reads every
    directory under `out_root`); swept when a generation starts and ends."""
    return os.path.abspath(out_root).rstrip(os.sep) + ".scratch"


def task_case(fn, args):
    """(case id, out dir, meta) standing for a task whose worker died."""
    if fn is capture_task:
        name, mode, out_root = args
        case_id = f"capture/{name}/{mode}/all"
        meta = {"source": "capture", "op": name, "dtype": "float32", "variant": mode}
    elif fn is opinfo_task:
        key, dname, _n, out_root = args
        case_id = f"opinfo/{key}/{SHORT[dname]}/0"
        meta = {"source": "opinfo", "op": key, "dtype": dname, "sample": 0}
    else:
        name, variant, out_root = args
        case_id = f"zoo/{name}/{variant}"
        meta = {"source": "zoo", "op": name, "dtype": "float32", "variant": variant}
    return case_id, os.path.join(out_root, case_id), meta


def die_with_parent(parent):
    """Worker initializer: the worker gets SIGKILL when the generator dies (even by kill -9),
    as the generator does when xtask dies; Linux only, a no-op elsewhere."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    pr_set_pdeathsig = 1
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(pr_set_pdeathsig, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:  # the generator died before prctl took effect
        os._exit(1)


def run_tasks(tasks, jobs, counts):
    """Runs the tasks in worker processes. When PyTorch kills a worker (a segfault), the
    pool breaks: the unfinished tasks run again one by one, each in a pool of its own, and
    a task that kills its worker again is recorded as skipped by PyTorch."""
    done = 0
    total = len(tasks)
    unfinished = []

    def report():
        if done % 25 == 0 or done == total:
            print(f"gen_cases: {done}/{total} tasks, {counts['ok']} cases, "
                  f"{counts['skipped']} skipped by PyTorch, {counts['unsupported']} "
                  "unsupported by the case files", file=sys.stderr, flush=True)

    with concurrent.futures.ProcessPoolExecutor(max_workers=jobs, initializer=die_with_parent,
                                                initargs=(os.getpid(),)) as pool:
        futures = {pool.submit(fn, args): (fn, args) for fn, args in tasks}
        for fut in concurrent.futures.as_completed(futures):
            try:
                results = fut.result()
            except concurrent.futures.process.BrokenProcessPool:
                unfinished.append(futures[fut])
                continue
            for _case_id, status in results:
                counts[status] += 1
            done += 1
            report()
    for fn, args in sorted(unfinished, key=lambda t: repr(t[1])):
        with concurrent.futures.ProcessPoolExecutor(max_workers=1, initializer=die_with_parent,
                                                initargs=(os.getpid(),)) as pool:
            try:
                results = pool.submit(fn, args).result()
            except concurrent.futures.process.BrokenProcessPool:
                case_id, out_dir, meta = task_case(fn, args)
                print(f"gen_cases: {case_id}: PyTorch crashed", file=sys.stderr)
                skip_case(out_dir, case_id, meta, "PyTorch crashed (its process died)")
                results = [(case_id, "skipped")]
        for _case_id, status in results:
            counts[status] += 1
        done += 1
        report()


if __name__ == "__main__":
    sys.exit(main())
