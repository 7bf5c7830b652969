"""torch.nn.functional against aten, from PyTorch itself (tests/functionals.rs runs this).

    python tests/pytorch/functionals.py signatures
        The Python signature of every public torch.nn.functional function written in Python,
        one a line: the table graphbug's lowering binds calls with
        (crates/generic/ir/src/functional_signatures.txt holds its output).

    python tests/pytorch/functionals.py compare
        Each such function against the schemas of the aten op(s) of its name
        (torch._C._jit_get_schemas_for_operator): `NAME: same` or `NAME: differs: REASONS`,
        one a line. A function differs when a call spelled with its Python signature would
        not bind to an aten overload meaning the same: no aten op of its name, Python-only
        parameters, parameters aten orders otherwise, defaults aten does not share,
        parameters aten requires that Python does not have. Python's `input` is aten's
        `self`, as PyTorch's own argument parser names it.

    python tests/pytorch/functionals.py cases --out DIR [--only NAME,...] [--samples N]
        For each such function (graphbug lowers them all through their Python signature;
        case.json says whether it differs from its aten op) with OpInfo samples (op_db
        entries named or aliased `nn.functional.NAME`, every variant), float32 on the CPU:
        the first sample of each distinct call shape (number of positional arguments,
        keyword names), at most N; and samples of our own (`extra.NAME`) for functions
        without OpInfo samples and for what those never pass. Each is compiled by torch.compile(fullgraph=True) with the
        graphbug_capture backend. Each case is DIR/<opinfo name>/<k>/ with the capture's
        repro directory (dynamo_000: graph.py as dynamo printed it, the sample's real
        inputs, PyTorch's outputs) and case.json (function, sample, whether the function
        is random: two seeds give different outputs). A sample dynamo cannot capture whole
        is written as case.json with "status": "skipped" and the reason.
"""

import argparse
import inspect
import json
import math
import os
import sys
import warnings

warnings.filterwarnings("ignore")

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

REQUIRED = inspect.Parameter.empty


def public_functions():
    """name -> the Python function, for every public function torch.nn.functional
    defines in Python (builtins such as F.linear are aten ops and bind as such). A
    `boolean_dispatch` pair (max_pool2d picks max_pool2d_with_indices by
    `return_indices`) stands for the function both branches share the signature of.
    Helpers that return no tensor (assert_int_or_pair) are not functions of tensors."""
    from torch._jit_internal import boolean_dispatched

    out = {}
    for name in sorted(dir(F)):
        if name.startswith("_"):
            continue
        fn = getattr(F, name)
        if fn in boolean_dispatched:
            fn = boolean_dispatched[fn]["if_false"]
        if not inspect.isfunction(fn) or fn.__module__ != "torch.nn.functional":
            continue
        sig = inspect.signature(fn)
        if sig.return_annotation is None:
            continue
        out[name] = sig
    return out


def default_text(value):
    """A default as graphbug's table spells it (a Python literal)."""
    if isinstance(value, float) and math.isinf(value):
        return "inf" if value > 0 else "-inf"
    if isinstance(value, (bool, int, float, str)) or value is None:
        return repr(value)
    return "<" + type(value).__name__ + ">"


def signature_line(name, sig):
    parts = []
    star = False
    for p in sig.parameters.values():
        if p.kind == p.VAR_POSITIONAL:
            parts.append("*" + p.name)
            star = True
            continue
        if p.kind == p.VAR_KEYWORD:
            parts.append("**" + p.name)
            continue
        if p.kind == p.KEYWORD_ONLY and not star:
            parts.append("*")
            star = True
        parts.append(p.name if p.default is REQUIRED else f"{p.name}={default_text(p.default)}")
    return f"{name}({', '.join(parts)})"


def signatures():
    print("# The Python signatures of torch.nn.functional's functions written in Python, as")
    print(f"# PyTorch {torch.__version__.split('+')[0]} defines them; lowering binds calls with them.")
    print("# Generated: .venv/bin/python tests/pytorch/functionals.py signatures")
    for name, sig in public_functions().items():
        print(signature_line(name, sig))


def aten_name(py_name, schema):
    """The aten argument a Python parameter is, by name (`input` is aten's `self`)."""
    names = [a.name for a in schema.arguments]
    if py_name in names:
        return py_name
    if py_name == "input" and "self" in names:
        return "self"
    return None


def same_default(a, b):
    """Equal defaults: numbers by value (2 is 2.0), a lone int as the list of it that
    PyTorch's argument parser makes of it (padding=0 is [0, 0])."""
    number = lambda v: isinstance(v, (int, float)) and not isinstance(v, bool)  # noqa: E731
    if number(a) and number(b):
        return a == b
    if isinstance(a, int) and not isinstance(a, bool) and isinstance(b, list) and b:
        return all(x == a for x in b)
    return type(a) is type(b) and a == b


def differences(sig, schema):
    """Why a call with Python signature `sig` does not bind to `schema` meaning the same."""
    reasons = []
    params = [p for p in sig.parameters.values()
              if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    args = [a for a in schema.arguments if not a.is_out]
    positional_aten = [a.name for a in args if not a.kwarg_only]
    only = [p.name for p in params if aten_name(p.name, schema) is None]
    if only:
        reasons.append("Python-only " + ", ".join(only))
    positional_py = [p.name for p in params
                     if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    mapped = [aten_name(n, schema) for n in positional_py]
    # Python-only parameters after the last one aten has shift nothing.
    while mapped and mapped[-1] is None:
        mapped.pop()
    if mapped != positional_aten[:len(mapped)]:
        reasons.append(f"positions ({', '.join(positional_py)}) are aten's "
                       f"({', '.join(positional_aten)})")
    for p in params:
        a_name = aten_name(p.name, schema)
        if a_name is None:
            continue
        a = next(a for a in args if a.name == a_name)
        a_def = a.default_value if a.has_default_value() else REQUIRED
        if p.default is REQUIRED and a_def is REQUIRED:
            continue
        if p.default is REQUIRED or a_def is REQUIRED or not same_default(p.default, a_def):
            show = lambda v: "required" if v is REQUIRED else repr(v)  # noqa: E731
            reasons.append(f"`{p.name}` defaults to {show(p.default)}, aten's to {show(a_def)}")
    py_names = {aten_name(p.name, schema) for p in params}
    required = [a.name for a in args if not a.has_default_value() and a.name not in py_names]
    if required:
        reasons.append("aten also requires " + ", ".join(required))
    return reasons


def compare_one(name, sig):
    """(differs, reasons against the closest overload)."""
    schemas = [s for s in torch._C._jit_get_schemas_for_operator("aten::" + name)
               if not any(a.is_out for a in s.arguments)]
    if not schemas:
        return True, [f"no aten op `{name}`"]
    _, reasons, overload = min((len(r), r, s.overload_name)
                               for s in schemas for r in [differences(sig, s)])
    if not reasons:
        return False, []
    return True, [f"against aten::{name}{'.' + overload if overload else ''}: "
                  + "; ".join(reasons)]


def compare():
    for name, sig in public_functions().items():
        differs, reasons = compare_one(name, sig)
        print(f"{name}: differs: {' '.join(reasons)}" if differs else f"{name}: same")


# ---------------------------------------------------------------- cases


def call_shape(sample):
    return (len(sample.args), tuple(sorted(sample.kwargs)))


def first_line(err):
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {text[0] if text else ''}"[:300]


def is_random(fn, tensors):
    """Two seeds give different outputs (the dropout family); in-place changes are undone
    with copies of the inputs."""
    import torch.utils._pytree as pytree

    outs = []
    for seed in (0, 1):
        torch.manual_seed(seed)
        try:
            with torch.no_grad():
                outs.append(pytree.tree_leaves(fn(*[t.clone() for t in tensors])))
        except Exception:  # noqa: BLE001
            return False
    for a, b in zip(*outs):
        if isinstance(a, torch.Tensor) and a.dtype.is_floating_point:
            if not torch.equal(a, b) and not (a.isnan().any() or b.isnan().any()):
                return True
    return False


def capture(fn, tensors, out):
    """torch.compile(fn, fullgraph=True) with the graphbug_capture backend writing its
    repro directory under `out`; PyTorch's (eager) outputs."""
    from graphbug_capture import graphbug_capture

    torch._dynamo.reset()
    backend = lambda gm, ex: graphbug_capture(gm, ex, options={"out": out})  # noqa: E731
    compiled = torch.compile(fn, backend=backend, fullgraph=True)
    with torch.no_grad():
        return compiled(*tensors)


class Sample:
    """A sample of our own, shaped as OpInfo's SampleInput."""

    def __init__(self, input, *args, **kwargs):
        self.input, self.args, self.kwargs = input, args, kwargs


def extra_samples():
    """name -> samples of our own: for functions with no OpInfo entry, and for what OpInfo's
    samples never pass (inplace=True, the legacy size_average and reduce, an implicit
    softmax dim)."""
    r = torch.randn
    return {
        "dropout": [Sample(r(3, 4), 0.0, True, True)],
        "elu": [Sample(r(3, 4), 0.5, True)],
        "relu": [Sample(r(3, 4), inplace=True)],
        "mse_loss": [Sample(r(3, 4), r(3, 4), size_average=False)],
        "nll_loss": [Sample(r(4, 5).log_softmax(1), torch.tensor([0, 3, 1, 4]), reduce=False),
                     Sample(r(4, 5).log_softmax(1), torch.tensor([0, 3, 1, 4]), None, False)],
        "softmax": [Sample(r(2, 3, 4)), Sample(r(2, 3))],
        "adaptive_max_pool1d_with_indices": [Sample(r(1, 2, 7), 3)],
        "adaptive_max_pool2d_with_indices": [Sample(r(1, 2, 5, 6), (2, None))],
        "adaptive_max_pool3d_with_indices": [Sample(r(1, 2, 4, 4, 4), 2)],
        "affine_grid": [Sample(r(2, 2, 3), [2, 3, 4, 5], align_corners=False),
                        Sample(r(1, 3, 4), [1, 1, 2, 3, 4])],
        "dropout1d": [Sample(r(3, 5), p=0.5), Sample(r(2, 3, 5), 0.0)],
        "fold": [Sample(r(1, 12, 12), output_size=(4, 5), kernel_size=2)],
        "fractional_max_pool2d_with_indices": [
            Sample(r(1, 2, 8, 8), 2, output_size=4, _random_samples=torch.rand(1, 2, 2))],
        "fractional_max_pool3d_with_indices": [
            Sample(r(1, 2, 6, 6, 6), 2, output_ratio=0.5, _random_samples=torch.rand(1, 2, 3))],
        "gumbel_softmax": [Sample(r(3, 5), tau=0.5), Sample(r(3, 5), hard=True, dim=0)],
        "lp_pool1d": [Sample(r(1, 2, 7), 2.0, 3, stride=2)],
        "lp_pool2d": [Sample(r(1, 2, 6, 6), 2, 2),
                      Sample(r(1, 2, 6, 6), float("inf"), 2, ceil_mode=True)],
        "lp_pool3d": [Sample(r(1, 2, 4, 4, 4), 1.5, 2)],
        "max_pool1d_with_indices": [Sample(r(1, 2, 7), 3, stride=2)],
        "max_pool2d_with_indices": [Sample(r(1, 2, 6, 6), 2)],
        "max_pool3d_with_indices": [Sample(r(1, 2, 4, 4, 4), 2, padding=1)],
        "upsample": [Sample(r(1, 2, 4), scale_factor=2, mode="linear")],
    }


def cases(out_root, only, samples_per_op):
    import torch.utils._pytree as pytree
    from torch.testing._internal.common_methods_invocations import op_db

    torch.set_num_threads(1)
    functions = public_functions()
    differ = {n for n, s in functions.items() if compare_one(n, s)[0]}
    wanted = set(functions)
    if only:
        unknown = sorted(set(only) - set(functions))
        if unknown:
            sys.exit(f"not torch.nn.functional functions written in Python: {unknown}")
        wanted &= set(only)
    written = 0
    # Entries named nn.functional.NAME, and entries with that alias (softmax, log_softmax):
    # (entry, function name, key, what to call).
    entries = []
    for op in op_db:
        variant = f".{op.variant_test_name}" if op.variant_test_name else ""
        for entry_name, target in [(op.name, op.op)] + [(a.name, a.op) for a in op.aliases]:
            if entry_name.startswith("nn.functional."):
                entries.append((op, entry_name[len("nn.functional."):], entry_name + variant,
                                target))
    torch.manual_seed(0)
    for name, samples in extra_samples().items():
        entries.append((samples, name, f"extra.{name}", getattr(F, name)))
    for op, name, key, target in entries:
        if name not in wanted:
            continue
        try:
            samples = []
            shapes = set()
            if isinstance(op, list):
                samples = op
            elif torch.float32 in op.supported_dtypes("cpu"):
                samples = []
                for s in op.sample_inputs("cpu", torch.float32):
                    if call_shape(s) in shapes:
                        continue
                    shapes.add(call_shape(s))
                    samples.append(s)
                    if len(samples) >= samples_per_op:
                        break
        except Exception as e:  # noqa: BLE001
            write_skip(os.path.join(out_root, key, "0"), name, key, 0,
                       "OpInfo samples fail: " + first_line(e))
            continue
        if not samples:
            write_skip(os.path.join(out_root, key, "0"), name, key, 0,
                       "no float32 CPU sample")
        for k, s in enumerate(samples):
            case_dir = os.path.join(out_root, key, str(k))
            os.makedirs(case_dir, exist_ok=True)
            leaves, spec = pytree.tree_flatten(((s.input,) + tuple(s.args), s.kwargs))
            pos = [i for i, x in enumerate(leaves) if isinstance(x, torch.Tensor)]
            tensors = [leaves[i].detach() for i in pos]

            def call(target, leaves=leaves, spec=spec, pos=pos):
                def f(*ts):
                    values = list(leaves)
                    for i, t in zip(pos, ts):
                        values[i] = t
                    a, kw = pytree.tree_unflatten(values, spec)
                    return target(*a, **kw)

                return f

            # OpInfo's own function first (it may reorder arguments, as embedding's does);
            # the torch.nn.functional function itself where dynamo cannot trace OpInfo's
            # wrapper (the dropout family's seed-freezing wrapper).
            status, reason = "ok", None
            for fn in (target, getattr(F, name)):
                f = call(fn)
                try:
                    random = is_random(f, tensors)
                    capture(f, [t.clone() for t in tensors], case_dir)
                    status, reason = "ok", None
                    break
                except Exception as e:  # noqa: BLE001
                    status, reason = "skipped", "torch.compile(fullgraph=True) fails: " + \
                        first_line(e)
            summary = repr(pytree.tree_map(
                lambda x: f"Tensor{list(x.shape)}:{str(x.dtype)[6:]}"
                if isinstance(x, torch.Tensor) else x, (s.args, s.kwargs)))[:300]
            case = {"function": name, "opinfo": key, "sample": k, "call": summary,
                    "status": status, "differs": name in differ}
            if status == "ok":
                graph = os.path.join(case_dir, "dynamo_000", "graph.py")
                if not os.path.exists(os.path.join(case_dir, "dynamo_000",
                                                   "outputs.safetensors")):
                    case.update(status="skipped",
                                reason="the capture holds no outputs (see CAPTURE_NOTE.txt)")
                else:
                    with open(graph) as fh:
                        text = fh.read()
                    case["random"] = random
                    # Dynamo inlines a few functions (pad, threshold) into the calls they make.
                    case["in_graph"] = f"torch.nn.functional.{name}(" in text
                    written += 1
            else:
                case["reason"] = reason
            with open(os.path.join(case_dir, "case.json"), "w") as fh:
                json.dump(case, fh, indent=1, sort_keys=True)
                fh.write("\n")
    print(f"{written} cases written", file=sys.stderr)


def write_skip(case_dir, name, key, k, reason):
    os.makedirs(case_dir, exist_ok=True)
    with open(os.path.join(case_dir, "case.json"), "w") as fh:
        json.dump({"function": name, "opinfo": key, "sample": k, "status": "skipped",
                   "reason": reason}, fh, indent=1, sort_keys=True)
        fh.write("\n")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("signatures")
    sub.add_parser("compare")
    c = sub.add_parser("cases")
    c.add_argument("--out", required=True)
    c.add_argument("--only", default="", help="comma-separated function names")
    c.add_argument("--samples", type=int, default=8,
                   help="at most this many samples (distinct call shapes) per OpInfo entry")
    a = parser.parse_args(argv)
    if a.command == "signatures":
        signatures()
    elif a.command == "compare":
        compare()
    else:
        only = [n for n in a.only.split(",") if n]
        cases(a.out, only, a.samples)


if __name__ == "__main__":
    main()
