"""Generate graphbug's XLA conformance cases with JAX itself (jax/jaxlib 0.10.2, CPU).

Programs nobody here wrote, lowered by JAX on CPU:

- `harness`: JAX's primitive harnesses (`test_harnesses.all_harnesses`, the jax2tf suite),
  those JAX runs on CPU; ids `xla/harness/GROUP/NAME`.
- `export`: JAX's export back-compat data (`export_back_compat_test_data/cpu_*.py`):
  serialized StableHLO modules (LAPACK and BLAS custom calls) with their inputs, called by
  JAX as its back-compat test calls them; ids `xla/export/STEM/DATE/KEY`.
- `sharded`: the same harnesses lowered for 2 CPU devices: `jax.jit` with `in_shardings`
  splitting every argument whose first dimension splits in two over a 1-D mesh (the
  others replicated), XLA choosing the outputs' shardings; ids `xla/sharded/GROUP/NAME`.
  A harness with no such argument is skipped, saying so.
- `model`: the programs of graphbug's HLO corpus (`tests/fixtures/xla/hlo/make_corpus.py`:
  a transformer block, a conv net with reduce_window, a scan, a value_and_grad training
  step, gather/scatter/sort, ...); ids `xla/model/NAME`.

Each case is a directory holding what JAX says about one program:

    jax.hlo           HLO text in JAX's style (`lowered.as_text(dialect="hlo")`)
    xla.hlo           the same module in XLA's `%` style with operand shapes and metadata
                      (make_corpus's `old_style_text`, as torch_xla and --xla_dump_to print)
    module.pb         the HloModuleProto XLA's parser makes of jax.hlo
    module.pb.hlo     XLA's print of that proto (JAX's style)
    jax.pb            JAX's own proto of the program (`compiler_ir("hlo")`, stack frames)
    jax.pb.hlo        XLA's print of that proto
    stablehlo.mlir    StableHLO text (`lowered.as_text()`)
    module.mlirbc     (export) the serialized StableHLO module of the back-compat data
    module.mlirbc.txt (export) that module as JAX reads and prints it (`Exported.mlir_module()`)
    inputs.npz        the inputs, arg0..argN-1 (the flattened arguments, in order)
    outputs.npz       JAX's own outputs of `jax.jit(f)(inputs)`, out0.. (flattened leaves)
    case.json         the files each stage reads, JAX's counts of flattened arguments and
                      outputs, and why a stage has nothing to check

Tensors numpy cannot hold (bfloat16) go to `.safetensors` instead of `.npz`; a case whose
tensors neither holds (float8, int4, bfloat16 beside complex) keeps its text stages and
says why its run stages have nothing to check. A program JAX itself cannot lower or run is
written as case.json with "status": "skipped" and the reason (not counted).

Run with the project venv: .venv/bin/python xtask/conformance/gen_xla_cases.py --help
"""

import argparse
import concurrent.futures
import importlib
import io
import json
import multiprocessing
import os
import pkgutil
import re
import shutil
import signal
import sys
import warnings
import zipfile
import zlib

from safetensors_file import write_safetensors_file

warnings.filterwarnings("ignore")

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
CORPUS = os.path.join(ROOT, "tests", "fixtures", "xla", "hlo")

FORMAT_VERSION = 1
CASE_SECONDS = 120  # JAX's own time limit per case (lower, run, print)

# The fast (`ci`) subset: every third harness group (sorted) with one harness each (the
# smallest crc32 of its name among those JAX runs on CPU), two back-compat modules and the
# corpus's named models.
CI_GROUP_STRIDE = 3
CI_EXPORT = ["cpu_cholesky_lapack_potrf/data_2024_05_31/f32",
             "cpu_triangular_solve_blas_trsm/data_2025_10_20/f64"]
CI_MODELS = ["transformer", "convnet", "scan", "train_step", "gather_scatter_sort"]
#: The CI subset's sharded harnesses: the first of its harnesses that split.
CI_SHARDED = 2
#: The devices the `sharded` cases run on (`jax_num_cpu_devices`).
SHARDED_DEVICES = 2

# dtypes `.npz` holds (numpy's own) and those only `.safetensors` holds.
NPZ_DTYPES = {"bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
              "float16", "float32", "float64", "complex64", "complex128"}
SAFETENSORS_DTYPES = {
    "bool": "BOOL", "int8": "I8", "int16": "I16", "int32": "I32", "int64": "I64",
    "uint8": "U8", "uint16": "U16", "uint32": "U32", "uint64": "U64", "float16": "F16",
    "bfloat16": "BF16", "float32": "F32", "float64": "F64",
}


class Skip(Exception):
    """JAX itself cannot produce this case; the message says why."""


class CaseTimeout(Exception):
    """A case took longer than CASE_SECONDS inside JAX."""


def first_line(err):
    """The first non-empty line of an exception, prefixed with its type."""
    text = [l for l in str(err).strip().splitlines() if l.strip()]
    line = text[0] if text else ""
    return f"{type(err).__name__}: {line}"[:300]


def seed_of(text):
    """A fixed seed derived from a name (independent of generation order)."""
    return zlib.crc32(text.encode()) & 0x7FFFFFFF


def short_name(name, limit=96):
    """A directory name for a harness: its name, or a prefix and a hash when too long."""
    if len(name) <= limit:
        return name
    return f"{name[:limit - 9]}_{zlib.crc32(name.encode()):08x}"


# ---------------------------------------------------------------- JAX (in the workers)

_jax = None


def jax_modules():
    """JAX and friends, imported once per process with float64 enabled (f64 and i64
    harnesses are real only so), on CPU."""
    global _jax
    if _jax is None:
        import jax

        jax.config.update("jax_enable_x64", True)
        jax.config.update("jax_platforms", "cpu")
        # The `sharded` cases' devices; a program of one device runs on the first.
        jax.config.update("jax_num_cpu_devices", SHARDED_DEVICES)
        import numpy as np

        sys.path.insert(0, CORPUS)
        import make_corpus  # noqa: E402  (the HLO corpus: programs and print helpers)

        _jax = {"jax": jax, "np": np, "corpus": make_corpus}
    return _jax


def harnesses():
    """JAX's primitive harnesses, in definition order. The order is not the same from one
    process to the next (some groups are built from sets), so tasks name a harness by its
    id (see `harness_by_id`), never by its index."""
    jax_modules()
    from jax._src.internal_test_util import test_harnesses

    return test_harnesses.all_harnesses


_HARNESS_BY_ID = {}


def harness_by_id(case_id):
    """The harness whose `harness_id` is `case_id`, in this process."""
    if not _HARNESS_BY_ID:
        _HARNESS_BY_ID.update((harness_id(h), h) for h in harnesses())
    return _HARNESS_BY_ID[case_id]


def export_data():
    """(key, data dict) of every CPU back-compat module JAX ships: key STEM/VAR/KEY..."""
    jax_modules()
    from jax._src.internal_test_util import export_back_compat_test_data as pkg

    out = []
    for info in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda m: m.name):
        if not info.name.startswith("cpu_"):
            continue
        mod = importlib.import_module(f"{pkg.__name__}.{info.name}")
        for var in sorted(v for v in vars(mod) if v.startswith("data_")):
            def walk(key, nest):
                if isinstance(nest, dict) and "testdata_version" in nest:
                    if nest.get("platform") == "cpu":
                        out.append((key, nest))
                elif isinstance(nest, dict):
                    for k in sorted(nest):
                        walk(f"{key}/{k}", nest[k])
                elif isinstance(nest, (list, tuple)):
                    for i, e in enumerate(nest):
                        walk(f"{key}/{i}", e)
            walk(f"{info.name}/{var}", getattr(mod, var))
    return out


def harness_meta(h):
    np = jax_modules()["np"]
    dtype = np.dtype(h.dtype).name if h.dtype is not None else None
    return {"source": "xla", "kind": "harness", "op": h.group_name, "name": h.fullname,
            "dtype": dtype}


def harness_id(h):
    return f"xla/harness/{h.group_name}/{short_name(h.name)}"


def unimplemented_on_cpu(h):
    """JAX's own word that it does not run the harness on CPU, or None."""
    if h.filter("cpu", include_jax_unimpl=False):
        return None
    why = [l.description for l in h.jax_unimplemented
           if "cpu" in l.devices and l.filter(device="cpu", dtype=h.dtype)]
    return "JAX does not implement it on CPU: " + "; ".join(why)


def host_leaves(tree):
    """The flattened leaves of `tree` as numpy arrays (typed PRNG keys as their key data)."""
    jax, np = jax_modules()["jax"], jax_modules()["np"]
    out = []
    for leaf in jax.tree_util.tree_leaves(tree):
        if hasattr(leaf, "dtype") and jax.dtypes.issubdtype(leaf.dtype, jax.dtypes.extended):
            leaf = jax.random.key_data(leaf)
        out.append(np.asarray(leaf))
    return out


def program_files(out_dir, lowered):
    """Writes the program's texts and protos; returns the file lists of the stages."""
    corpus = jax_modules()["corpus"]
    jax_text = lowered.as_text(dialect="hlo")
    computation = lowered.compiler_ir("hlo")
    xla_text = corpus.old_style_text(computation.as_hlo_module())
    stablehlo = lowered.as_text()
    module_pb = corpus.proto_of_text(jax_text)
    jax_pb = computation.as_serialized_hlo_module_proto()
    files = {
        "jax.hlo": jax_text,
        "xla.hlo": xla_text,
        "stablehlo.mlir": stablehlo,
        "module.pb": module_pb,
        "module.pb.hlo": corpus.print_proto(module_pb),
        "jax.pb": jax_pb,
        "jax.pb.hlo": corpus.print_proto(jax_pb),
    }
    for name, content in files.items():
        mode = "wb" if isinstance(content, bytes) else "w"
        with open(os.path.join(out_dir, name), mode) as f:
            f.write(content)
    return {
        "fmt": [{"file": "jax.hlo"}, {"file": "xla.hlo"}, {"file": "stablehlo.mlir"}],
        "proto": [{"file": "module.pb", "expected": "module.pb.hlo"},
                  {"file": "jax.pb", "expected": "jax.pb.hlo"}],
        "check": ["jax.hlo", "xla.hlo", "stablehlo.mlir"],
        "run_hlo": ["jax.hlo"],
        "run_stablehlo": ["stablehlo.mlir"],
        "random": " rng(" in jax_text,
    }


def write_case(out_dir, case_id, meta, f, args, extra=None, in_shardings=None):
    """Lowers `f` (jitted, keeping unused arguments, with `in_shardings` where given) on
    `args`, runs it, and writes the case."""
    jax = jax_modules()["jax"]
    jitted = jax.jit(f, keep_unused=True, **({"in_shardings": in_shardings}
                                             if in_shardings is not None else {}))
    try:
        lowered = jitted.lower(*args)
    except Exception as e:  # noqa: BLE001 (JAX's own refusal is the skip reason)
        raise Skip(f"JAX cannot lower it: {first_line(e)}")
    try:
        outs = jitted(*args)
        jax.block_until_ready(outs)
    except Exception as e:  # noqa: BLE001
        raise Skip(f"JAX fails to run it: {first_line(e)}")
    os.makedirs(out_dir, exist_ok=True)
    case = dict(meta, id=case_id, status="ok", format_version=FORMAT_VERSION)
    case.update(program_files(out_dir, lowered))
    ins = host_leaves(args)
    outs = host_leaves(outs)
    # JAX's own counts: the flattened arguments and results of the lowered program.
    case["num_args"] = len(jax.tree_util.tree_leaves(lowered.in_avals))
    case["num_outputs"] = len(jax.tree_util.tree_leaves(lowered.out_info))
    if case["num_args"] != len(ins):
        raise Skip(f"JAX lowered {case['num_args']} arguments for {len(ins)} flattened inputs")
    if extra:
        extra(out_dir, case)
    write_inputs_outputs(out_dir, case, ins, outs)
    if case.pop("random"):
        case["run_skip"] = ("the program uses XLA's rng op: its values differ between "
                            "compilations")
    write_case_json(out_dir, case)
    return case


def write_inputs_outputs(out_dir, case, ins, outs):
    """Writes the inputs (arg0..) and the outputs (out0..) and names their files in `case`,
    or says in its ``run_skip`` why no case file holds them; records their dtypes."""
    case["dtypes"] = sorted({a.dtype.name for a in ins + outs})
    files = [write_tensors(out_dir, "inputs", [(f"arg{k}", a) for k, a in enumerate(ins)]),
             write_tensors(out_dir, "outputs", [(f"out{k}", a) for k, a in enumerate(outs)])]
    refused = [f["reason"] for f in files if not isinstance(f, str)]
    if refused:
        case["run_skip"] = refused[0]
    else:
        case["inputs"], case["outputs"] = files


def write_case_json(out_dir, case):
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "case.json"), "w") as f:
        json.dump(case, f, indent=1, sort_keys=True)
        f.write("\n")


def skip_case(out_dir, case_id, meta, reason):
    shutil.rmtree(out_dir, ignore_errors=True)
    write_case_json(out_dir, dict(meta, id=case_id, status="skipped", reason=reason,
                                  format_version=FORMAT_VERSION))


# ---------------------------------------------------------------- tensor files


def write_tensors(out_dir, stem, named):
    """Writes [(name, array)] as STEM.npz, or STEM.safetensors where numpy has no such
    dtype (bfloat16); returns the file name, or {"reason": ...} where neither holds them."""
    names = {a.dtype.name for _, a in named}
    if names <= NPZ_DTYPES:
        name = f"{stem}.npz"
        write_npz(os.path.join(out_dir, name), named)
        return name
    if names <= set(SAFETENSORS_DTYPES):
        name = f"{stem}.safetensors"
        write_safetensors(os.path.join(out_dir, name), named)
        return name
    held_by_neither = sorted(names - set(SAFETENSORS_DTYPES) - NPZ_DTYPES)
    if held_by_neither:
        return {"reason": f"the case files cannot hold {', '.join(held_by_neither)}"}
    return {"reason": "the case files cannot hold bfloat16 beside complex (.npz has no "
                      "bfloat16, .safetensors no complex)"}


def write_npz(path, named):
    """np.savez's layout (one .npy per entry, in the given order), with a fixed timestamp so
    that two generations write the same bytes."""
    import numpy as np

    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as z:
        for name, a in named:
            buf = io.BytesIO()
            # np.ascontiguousarray makes a 0-d array 1-d: asarray keeps scalars scalars.
            np.lib.format.write_array(buf, np.asarray(a, order="C"), allow_pickle=False)
            z.writestr(zipfile.ZipInfo(f"{name}.npy", date_time=(1980, 1, 1, 0, 0, 0)),
                       buf.getvalue())


def write_safetensors(path, named):
    """safetensors (keys sorted, 8-byte aligned header), as gen_cases.py writes them."""
    import numpy as np

    write_safetensors_file(path, [
        (name, SAFETENSORS_DTYPES[a.dtype.name], a.shape, np.ascontiguousarray(a).tobytes())
        for name, a in named])


# ---------------------------------------------------------------- tasks


def time_limit(seconds):
    def on_alarm(_signum, _frame):
        raise CaseTimeout(f"JAX took more than {seconds} s")

    class Limit:
        def __enter__(self):
            self.old = signal.signal(signal.SIGALRM, on_alarm)
            signal.alarm(seconds)

        def __exit__(self, *exc):
            signal.alarm(0)
            signal.signal(signal.SIGALRM, self.old)

    return Limit()


def guarded(case_id, out_dir, meta, body):
    """Runs `body()` under the time limit; JAX's refusals become skipped cases."""
    try:
        with time_limit(CASE_SECONDS):
            body()
        return [(case_id, "ok")]
    except Skip as e:
        skip_case(out_dir, case_id, meta, str(e))
    except CaseTimeout as e:
        skip_case(out_dir, case_id, meta, f"JAX timed out: {e}")
    except Exception as e:  # noqa: BLE001 (anything JAX raises while writing the case)
        skip_case(out_dir, case_id, meta, f"JAX fails on it: {first_line(e)}")
    finally:
        jax_modules()["jax"].clear_caches()
    return [(case_id, "skipped")]


def harness_inputs(h):
    """The harness's inputs, seeded by its name; Skip where JAX does not run it on CPU or
    cannot make them."""
    why = unimplemented_on_cpu(h)
    if why:
        raise Skip(why)
    rng = jax_modules()["np"].random.RandomState(seed_of(h.fullname))
    try:
        return h.dyn_args_maker(rng)
    except Exception as e:  # noqa: BLE001
        raise Skip(f"JAX cannot make its inputs: {first_line(e)}")


def harness_task(args):
    case_id, out_root = args
    h = harness_by_id(case_id)
    meta = harness_meta(h)
    out_dir = os.path.join(out_root, case_id)

    def body():
        write_case(out_dir, case_id, meta, h.dyn_fun, harness_inputs(h))

    return guarded(case_id, out_dir, meta, body)


def sharded_id(h):
    return f"xla/sharded/{h.group_name}/{short_name(h.name)}"


def split_in_two(args):
    """`in_shardings` for `args` over a 1-D mesh of SHARDED_DEVICES devices: an array
    whose first dimension splits evenly is split on it, anything else replicated; None
    when nothing splits."""
    m = jax_modules()
    jax, np = m["jax"], m["np"]
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    mesh = Mesh(np.array(jax.devices()[:SHARDED_DEVICES]), ("x",))

    def splits(a):
        shape = getattr(a, "shape", ())
        return len(shape) >= 1 and shape[0] >= SHARDED_DEVICES and \
            shape[0] % SHARDED_DEVICES == 0

    if not any(splits(a) for a in jax.tree_util.tree_leaves(args)):
        return None
    return tuple(jax.tree_util.tree_map(
        lambda a: NamedSharding(mesh, PartitionSpec("x") if splits(a) else PartitionSpec()),
        a) for a in args)


def sharded_task(args):
    case_id, out_root = args
    h = harness_by_id(harness_id_of_sharded(case_id))
    meta = dict(harness_meta(h), kind="sharded")
    out_dir = os.path.join(out_root, case_id)

    def body():
        dyn = harness_inputs(h)
        shardings = split_in_two(dyn)
        if shardings is None:
            raise Skip(f"no argument's first dimension splits over {SHARDED_DEVICES} devices")
        write_case(out_dir, case_id, meta, h.dyn_fun, dyn, in_shardings=shardings)

    return guarded(case_id, out_dir, meta, body)


def harness_id_of_sharded(case_id):
    """The harness id a sharded case id stands for."""
    return "xla/harness/" + case_id[len("xla/sharded/"):]


def export_id(key):
    stem, var, rest = key.split("/", 2)
    return f"xla/export/{stem[len('cpu_'):]}/{var[len('data_'):]}/{rest}"


def export_task(args):
    key, out_root = args
    data = dict(export_data())[key]
    case_id = export_id(key)
    meta = {"source": "xla", "kind": "export", "op": key.split("/")[0], "name": key,
            "custom_call_targets": list(data.get("custom_call_targets", []))}
    out_dir = os.path.join(out_root, case_id)

    def body():
        jax, np = jax_modules()["jax"], jax_modules()["np"]
        from jax._src import core
        from jax._src.export import _export
        from jax._src.internal_test_util import export_back_compat_test_util as bctu

        d = bctu.CompatTestData(**data)
        # As JAX's back-compat test calls the module (CompatTestBase.run_serialized).
        in_avals, in_tree = jax.tree_util.tree_flatten(
            (tuple(core.ShapedArray(a.shape, a.dtype) for a in d.inputs), {}))
        out_avals, out_tree = jax.tree_util.tree_flatten(
            tuple(core.ShapedArray(a.shape, a.dtype) for a in d.expected_outputs))

        def no_vjp(_):
            raise AssertionError("no VJP")

        exported = _export.Exported(
            fun_name="run_serialized", in_tree=in_tree, in_avals=tuple(in_avals),
            out_tree=out_tree, out_avals=tuple(out_avals), _has_named_shardings=True,
            _in_named_shardings=(None,) * len(in_avals),
            _out_named_shardings=(None,) * len(out_avals),
            in_shardings_hlo=(None,) * len(in_avals), out_shardings_hlo=(None,) * len(out_avals),
            platforms=(d.platform,), ordered_effects=(), unordered_effects=(),
            disabled_safety_checks=(), mlir_module_serialized=d.mlir_module_serialized,
            calling_convention_version=d.xla_call_module_version, nr_devices=d.nr_devices,
            module_kept_var_idx=tuple(range(len(in_avals))), uses_global_constants=False,
            _get_vjp=no_vjp)

        def extra(out_dir, case):
            with open(os.path.join(out_dir, "module.mlirbc"), "wb") as f:
                f.write(d.mlir_module_serialized)
            with open(os.path.join(out_dir, "module.mlirbc.txt"), "w") as f:
                # JAX's reading of the portable artifact (StableHLO, upgraded from VHLO).
                f.write(exported.mlir_module())
            case["fmt"].append({"file": "module.mlirbc", "expected": "module.mlirbc.txt"})
            case["check"].append("module.mlirbc")
            case["run_stablehlo"].append("module.mlirbc")

        case = write_case(out_dir, case_id, meta, exported.call, tuple(d.inputs), extra)
        # Whether JAX today gives the outputs pasted when the data was made (eigenvectors
        # and other non-unique results may differ; JAX's test compares those its own way).
        outs = np.load(os.path.join(out_dir, case["outputs"])) if "outputs" in case else None
        if outs is not None:
            case["pasted_outputs_equal"] = all(
                np.allclose(outs[f"out{k}"], w, rtol=1e-4, atol=1e-5, equal_nan=True)
                for k, w in enumerate(d.expected_outputs))
            write_case_json(out_dir, case)

    return guarded(case_id, out_dir, meta, body)


def model_task(args):
    index, out_root = args
    name, f, fargs = jax_modules()["corpus"].programs()[index]
    case_id = f"xla/model/{name}"
    meta = {"source": "xla", "kind": "model", "op": name, "name": name}
    out_dir = os.path.join(out_root, case_id)
    return guarded(case_id, out_dir, meta, lambda: write_case(out_dir, case_id, meta, f, fargs))


def task_case(fn, args):
    """(case id, out dir, meta) standing for a task whose worker died."""
    if fn is harness_task:
        case_id, out_root = args
        return case_id, os.path.join(out_root, case_id), harness_meta(harness_by_id(case_id))
    if fn is sharded_task:
        case_id, out_root = args
        meta = dict(harness_meta(harness_by_id(harness_id_of_sharded(case_id))), kind="sharded")
        return case_id, os.path.join(out_root, case_id), meta
    if fn is export_task:
        key, out_root = args
        case_id = export_id(key)
        return case_id, os.path.join(out_root, case_id), {
            "source": "xla", "kind": "export", "op": key.split("/")[0], "name": key}
    index, out_root = args
    name = jax_modules()["corpus"].programs()[index][0]
    case_id = f"xla/model/{name}"
    return case_id, os.path.join(out_root, case_id), {
        "source": "xla", "kind": "model", "op": name, "name": name}


# ---------------------------------------------------------------- main


def select(subset, pattern, out_root, samples=None):
    """The tasks of a subset, in a fixed order; `samples` caps the harnesses of each group
    in the full subset (those with the smallest crc32 of their names among the ones JAX
    runs on CPU)."""
    tasks = []
    hs = harnesses()
    if subset == "full" and samples is None:
        chosen = range(len(hs))
    elif subset == "full":
        chosen = []
        for g in sorted({h.group_name for h in hs}):
            members = [i for i, h in enumerate(hs) if h.group_name == g
                       and unimplemented_on_cpu(h) is None]
            members.sort(key=lambda i: zlib.crc32(hs[i].fullname.encode()))
            chosen.extend(sorted(members[:samples]))
    else:
        groups = sorted({h.group_name for h in hs})[::CI_GROUP_STRIDE]
        chosen = []
        for g in groups:
            members = [i for i, h in enumerate(hs) if h.group_name == g
                       and unimplemented_on_cpu(h) is None]
            if members:
                chosen.append(min(members, key=lambda i: zlib.crc32(hs[i].fullname.encode())))
    for i in chosen:
        if pattern is None or pattern.search(harness_id(hs[i])):
            tasks.append((harness_task, (harness_id(hs[i]), out_root)))
    # The same harnesses over two devices (the CI subset's first that split).
    def splits(h):
        try:
            return split_in_two(harness_inputs(h)) is not None
        except Exception:  # noqa: BLE001 (its task says why, where it is chosen)
            return False

    sharded = [i for i in chosen if subset == "full" or splits(hs[i])]
    if subset == "ci":
        sharded = sharded[:CI_SHARDED]
    for i in sharded:
        if pattern is None or pattern.search(sharded_id(hs[i])):
            tasks.append((sharded_task, (sharded_id(hs[i]), out_root)))
    for key, _ in export_data():
        if subset == "ci" and key not in CI_EXPORT:
            continue
        if pattern is None or pattern.search(export_id(key)):
            tasks.append((export_task, (key, out_root)))
    for i, (name, _, _) in enumerate(jax_modules()["corpus"].programs()):
        if subset == "ci" and name not in CI_MODELS:
            continue
        if pattern is None or pattern.search(f"xla/model/{name}"):
            tasks.append((model_task, (i, out_root)))
    return tasks


def die_with_parent(parent):
    """The calling worker gets SIGKILL when the generator (`parent`) dies."""
    if sys.platform.startswith("linux"):
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
        if os.getppid() != parent:
            os._exit(1)


def worker_init(parent):
    """Worker initializer: dies with the generator; then JAX's harnesses."""
    die_with_parent(parent)
    harnesses()


# Workers are started afresh, not forked: the generator has JAX's threads running.
SPAWN = multiprocessing.get_context("spawn")


def run_tasks(tasks, jobs, counts):
    """Runs the tasks in worker processes. When XLA kills a worker (a CHECK failure), the pool
    breaks: the unfinished tasks run again one by one, each in a pool of its own, and a task
    that kills its worker again is recorded as skipped by JAX."""
    done, total, unfinished = 0, len(tasks), []

    def report():
        if done % 100 == 0 or done == total:
            print(f"gen_xla_cases: {done}/{total} tasks, {counts['ok']} cases, "
                  f"{counts['skipped']} skipped by JAX", file=sys.stderr, flush=True)

    with concurrent.futures.ProcessPoolExecutor(max_workers=jobs, initializer=worker_init,
                                                mp_context=SPAWN,
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
        with concurrent.futures.ProcessPoolExecutor(max_workers=1, initializer=worker_init,
                                                    mp_context=SPAWN,
                                                    initargs=(os.getpid(),)) as pool:
            try:
                results = pool.submit(fn, args).result()
            except concurrent.futures.process.BrokenProcessPool:
                case_id, out_dir, meta = task_case(fn, args)
                print(f"gen_xla_cases: {case_id}: JAX crashed", file=sys.stderr)
                skip_case(out_dir, case_id, meta, "JAX crashed (its process died)")
                results = [(case_id, "skipped")]
        for _case_id, status in results:
            counts[status] += 1
        done += 1
        report()


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default="target/conformance/cases")
    p.add_argument("--subset", choices=["ci", "full"], default="full",
                   help="ci: one harness of every third group, two of them over two devices, "
                   "two back-compat modules and five models (about 50 cases); full: every "
                   "harness (and each over two devices), module and model")
    p.add_argument("--samples", type=int, default=None,
                   help="full: at most this many harnesses of each group")
    p.add_argument("--filter", default=None, help="regex over case ids (re.search)")
    p.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 1)
    a = p.parse_args(argv)
    pattern = re.compile(a.filter) if a.filter else None
    tasks = select(a.subset, pattern, a.out, a.samples)
    os.makedirs(a.out, exist_ok=True)
    shutil.rmtree(os.path.join(a.out, "xla"), ignore_errors=True)
    counts = {"ok": 0, "skipped": 0}
    run_tasks(tasks, max(1, a.jobs), counts)
    return 0


if __name__ == "__main__":
    sys.exit(main())
