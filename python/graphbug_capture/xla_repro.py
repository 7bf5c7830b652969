#!/usr/bin/env python3
"""Run a graphbug XLA repro directory: the program on the backend under test and on XLA CPU.

This script is copied verbatim into every XLA repro directory as ``repro.py``. It finds its
files next to itself (``--dir`` names another directory) and needs only the standard library,
numpy and either jax/jaxlib or PyTorch/XLA::

    python repro.py                          # the backend the manifest names
    python repro.py --plugin /path/pjrt.so   # another PJRT plugin library
    python repro.py --platform cuda          # a backend jax has installed (jax[cuda])
    python repro.py --with torch_xla         # PyTorch/XLA's device (PJRT_DEVICE) against its CPU
    python repro.py --with iree              # IREE (iree-base-compiler, iree-base-runtime)

Without jax, it runs with PyTorch/XLA (``--with`` chooses when both are installed): the program
(an HLO proto, as PyTorch/XLA's captures are) runs on the device ``PJRT_DEVICE`` names (else
the manifest's platform), the clean program on PyTorch/XLA's CPU as the reference. A directory
whose backend is IREE's (``iree:llvm-cpu``) runs with IREE's Python packages, the reference
on XLA CPU through jax.

It reads ``manifest.json``, the program (``program.mlir``, ``program.hlo`` or
``program.hlo.pb``; for the backend side ``program.faulted.*`` when the manifest names one)
and ``inputs.safetensors`` (keys ``arg0``, ``arg1``, ... in parameter order), compiles and
runs the program on the backend's device, runs the clean program on XLA CPU (jax's builtin
``cpu`` backend) as the reference, or reads ``reference_outputs.safetensors`` with
``--reference recorded``, and compares every output with the manifest's tolerance (NaN equals
NaN).

Exit status: 0 when every output matches, 1 when the backend fails to compile or run the
program (an error, a crash, or no end within ``--timeout`` seconds) or an output differs, 2 for
bad input (missing or malformed files, a plugin that cannot be loaded, inputs that do not fit
the program, a reference run that fails). The work runs in a child process (this script
again), so that a backend that aborts or hangs is reported rather than taking the script down;
``--in-process`` runs it in this one.
"""

import argparse
import json
import logging
import os
import struct
import sys
import time
import traceback

import numpy as np

#: The name the manifest's plugin library is registered under.
PLUGIN_NAME = "graphbug_repro"

#: Program files by form.
FORMS = {"hlo-text": ".hlo", "hlo-proto": ".hlo.pb", "stablehlo-text": ".mlir"}

DEFAULT_TOLERANCE = {"rtol": 1e-4, "atol": 1e-4}

#: The prefix of IREE's backends in the manifest (``iree:<target backend>``).
IREE_PREFIX = "iree:"

#: What `--no-tf32` sets: XLA's GPU plugin runs small float32 GEMMs with Triton and large ones
#: with cuBLAS, both in TF32 by default (on an H100, a BART layer's logits came out 6.4e-3 from
#: XLA CPU's, 3.8e-6 with both of these).
NO_TF32 = {"XLA_FLAGS": "--xla_gpu_enable_triton_gemm=false", "NVIDIA_TF32_OVERRIDE": "0"}


class BadInput(Exception):
    """The directory, its files or the command line cannot be used (exit status 2)."""


# ---------------------------------------------------------------------------------------------
# safetensors


def _safetensors_dtypes():
    """safetensors dtype names -> numpy dtypes (the ml_dtypes ones when ml_dtypes is present)."""
    table = {
        "F64": np.dtype("<f8"), "F32": np.dtype("<f4"), "F16": np.dtype("<f2"),
        "I64": np.dtype("<i8"), "I32": np.dtype("<i4"), "I16": np.dtype("<i2"),
        "I8": np.dtype("i1"), "U64": np.dtype("<u8"), "U32": np.dtype("<u4"),
        "U16": np.dtype("<u2"), "U8": np.dtype("u1"), "BOOL": np.dtype("bool"),
    }
    try:
        import ml_dtypes  # jax depends on it

        table["BF16"] = np.dtype(ml_dtypes.bfloat16)
        table["F8_E4M3"] = np.dtype(ml_dtypes.float8_e4m3fn)
        table["F8_E5M2"] = np.dtype(ml_dtypes.float8_e5m2)
    except ImportError:
        pass
    return table


def read_tensors(directory, stem):
    """Reads ``stem.safetensors`` of `directory`, or ``stem.npz`` (graphbug writes npz when a
    tensor is complex, which safetensors cannot hold): (path, {name: numpy array})."""
    npz = os.path.join(directory, stem + ".npz")
    if not os.path.exists(os.path.join(directory, stem + ".safetensors")) and os.path.exists(npz):
        try:
            with np.load(npz) as z:
                return npz, {k: z[k] for k in z.files}
        except (OSError, ValueError) as err:
            raise BadInput(f"{npz}: not an npz file: {err}") from err
    path = os.path.join(directory, stem + ".safetensors")
    return path, read_safetensors(path)


def read_safetensors(path):
    """Reads a safetensors file into {name: numpy array} (the ``__metadata__`` entry dropped)."""
    try:
        with open(path, "rb") as fh:
            blob = fh.read()
    except OSError as err:
        raise BadInput(f"cannot read {path}: {err}") from None
    if len(blob) < 8:
        raise BadInput(f"{path}: not a safetensors file (too short)")
    (size,) = struct.unpack("<Q", blob[:8])
    if 8 + size > len(blob):
        raise BadInput(f"{path}: not a safetensors file (header length {size} past the end)")
    try:
        header = json.loads(blob[8:8 + size].decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as err:
        raise BadInput(f"{path}: the safetensors header is not JSON: {err}") from None
    if not isinstance(header, dict):
        raise BadInput(f"{path}: the safetensors header is not a JSON object")
    dtypes = _safetensors_dtypes()
    data = memoryview(blob)[8 + size:]
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        try:
            kind, shape, (start, end) = info["dtype"], info["shape"], info["data_offsets"]
        except (KeyError, TypeError, ValueError):
            raise BadInput(f"{path}: tensor `{name}` has a malformed header entry") from None
        if kind not in dtypes:
            raise BadInput(f"{path}: tensor `{name}` has dtype {kind}, which this script "
                           f"cannot read (it reads {', '.join(sorted(dtypes))})")
        dtype = dtypes[kind]
        count = int(np.prod(shape, dtype=np.int64)) if shape else 1
        if not 0 <= start <= end <= len(data) or end - start != count * dtype.itemsize:
            raise BadInput(f"{path}: tensor `{name}` ({kind}{list(shape)}) has data offsets "
                           f"[{start}, {end}] that do not fit it")
        array = np.frombuffer(data[start:end], dtype=dtype, count=count).reshape(shape)
        tensors[name] = array.copy()
    return tensors


def numbered(tensors, prefix, path):
    """The tensors named ``<prefix>0``, ``<prefix>1``, ... in order; refuses gaps and others."""
    indices = {}
    for name in tensors:
        if not (name.startswith(prefix) and name[len(prefix):].isdigit()):
            raise BadInput(f"{path}: unexpected tensor `{name}` (keys are {prefix}0, {prefix}1, ...)")
        indices[int(name[len(prefix):])] = tensors[name]
    if sorted(indices) != list(range(len(indices))):
        raise BadInput(f"{path}: keys must be {prefix}0 .. {prefix}{len(indices) - 1} without gaps, "
                       f"found {sorted(tensors)}")
    return [indices[i] for i in range(len(indices))]


# ---------------------------------------------------------------------------------------------
# The repro directory


def read_manifest(directory):
    """The manifest of an XLA repro directory, checked for its required fields."""
    path = os.path.join(directory, "manifest.json")
    try:
        with open(path, encoding="utf-8") as fh:
            manifest = json.load(fh)
    except OSError as err:
        raise BadInput(f"cannot read {path}: {err}") from None
    except ValueError as err:
        raise BadInput(f"{path} is not JSON: {err}") from None
    if not isinstance(manifest, dict) or manifest.get("graphbug_xla_repro") is None:
        raise BadInput(f"{path} is not the manifest of a graphbug XLA repro directory "
                       "(no \"graphbug_xla_repro\" field)")
    if not isinstance(manifest.get("program"), str):
        raise BadInput(f"{path}: \"program\" must name the program file")
    return manifest


def program_form(manifest, file_name):
    """The program's form: the manifest's, else guessed from the file name."""
    form = manifest.get("form")
    if form is None:
        for candidate, ext in sorted(FORMS.items(), key=lambda kv: -len(kv[1])):
            if file_name.endswith(ext):
                return candidate
    if form not in FORMS:
        raise BadInput(f"manifest: unknown form {form!r} (known: {', '.join(sorted(FORMS))})")
    return form


def read_program(directory, file_name, form):
    """The program file's contents: str for text forms, bytes for the HLO proto."""
    path = os.path.join(directory, file_name)
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except OSError as err:
        raise BadInput(f"cannot read the program {path}: {err}") from None
    if form == "hlo-proto":
        return data
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise BadInput(f"{path} is not UTF-8 text ({form}): {err}") from None


# ---------------------------------------------------------------------------------------------
# JAX (private API kept to these functions; JAX versions differ)


def _jax_lib():
    """jaxlib's extension module (``_jax`` on recent jaxlib, ``xla_extension`` before)."""
    try:
        from jax._src.lib import _jax

        return _jax
    except ImportError:
        pass
    try:
        from jax._src.lib import xla_extension

        return xla_extension
    except ImportError:
        raise BadInput("this jaxlib has neither jax._src.lib._jax nor xla_extension; "
                       "repro.py knows jax 0.10 and 0.11") from None


def _hlo_lib():
    """The module with ``hlo_module_from_text`` and ``XlaComputation`` (``jaxlib._hlo``, or the
    extension module on older jaxlib)."""
    try:
        from jaxlib import _hlo

        return _hlo
    except ImportError:
        return _jax_lib()


def get_backend(name):
    """jax's backend (PJRT client) called `name`."""
    try:
        from jax.extend.backend import get_backend as _get
    except ImportError:
        from jax._src.xla_bridge import get_backend as _get
    return _get(name)


def hlo_text_to_proto(text):
    """HLO text -> serialized HloModuleProto (bytes)."""
    hlo = _hlo_lib()
    parse = getattr(hlo, "hlo_module_from_text", None)
    if parse is None:
        raise BadInput("this jaxlib has no hlo_module_from_text; cannot read HLO text "
                       "(convert the program to StableHLO or an HLO proto)")
    return parse(text).as_serialized_hlo_module_proto()


def hlo_proto_to_stablehlo(proto):
    """Serialized HloModuleProto -> what ``compile_and_load`` takes (StableHLO bytecode)."""
    mlir = getattr(_jax_lib(), "mlir", None)
    if mlir is not None and hasattr(mlir, "hlo_to_stablehlo"):
        return mlir.hlo_to_stablehlo(proto)
    if mlir is not None and hasattr(mlir, "xla_computation_to_mlir_module"):
        return mlir.xla_computation_to_mlir_module(_hlo_lib().XlaComputation(proto))
    raise BadInput("this jaxlib has neither mlir.hlo_to_stablehlo nor "
                   "mlir.xla_computation_to_mlir_module; cannot compile HLO")


def check_stablehlo_text(text, file_name):
    """Parses StableHLO text with jax's MLIR (unregistered dialects allowed), so that a
    malformed file is bad input rather than a backend failure. Skipped when jax's MLIR
    bindings are not where this script looks."""
    try:
        from jax._src.interpreters import mlir as jax_mlir
        from jax._src.lib.mlir import ir

        context = jax_mlir.make_ir_context()
        context.allow_unregistered_dialects = True
    except Exception:  # noqa: BLE001 - only a check
        return
    try:
        with context:
            ir.Module.parse(text)
    except Exception as err:  # noqa: BLE001 - MLIRError
        raise BadInput(f"{file_name} is not valid MLIR: {err}") from None


def to_compilable(program, form):
    """The program as ``compile_and_load`` takes it; HLO parse errors are bad input."""
    if form == "stablehlo-text":
        return program
    try:
        proto = hlo_text_to_proto(program) if form == "hlo-text" else program
        return hlo_proto_to_stablehlo(proto)
    except BadInput:
        raise
    except Exception as err:  # noqa: BLE001 - jaxlib raises its own error types
        raise BadInput(f"cannot read the {form} program: {err}") from None


def device_count(spread):
    """How many devices the manifest's ``devices`` (None: one) says the program runs on."""
    return 1 if not spread else spread["num_replicas"] * spread["num_partitions"]


def compile_program(backend, devices, program, spread=None, overrides=None):
    """Compiles `program` (StableHLO text or bytecode) for `devices` of `backend` (one, or as
    many as the manifest's ``devices`` says, SPMD-partitioned over its partitions), with the
    manifest's ``compile_options`` (XLA's option overrides) where given."""
    lib = _jax_lib()
    device_list_type = getattr(lib, "DeviceList", None)
    if device_list_type is None:
        from jax._src.lib import xla_client

        device_list_type = xla_client.DeviceList
    devices = device_list_type(tuple(devices))
    options = lib.CompileOptions()
    if spread:
        build = options.executable_build_options
        build.num_replicas = spread["num_replicas"]
        build.num_partitions = spread["num_partitions"]
        build.use_spmd_partitioning = spread["num_partitions"] > 1
        build.use_shardy_partitioner = bool(spread.get("shardy"))
    if overrides:
        options.env_option_overrides = list(overrides.items())
    if hasattr(backend, "compile_and_load"):
        return backend.compile_and_load(program, devices, options)
    return backend.compile(program, devices, options)  # jaxlib before compile_and_load


def parameter_shapes(executable):
    """[(numpy dtype, shape)] of the compiled program's parameters, or None when unknown."""
    try:
        module = executable.hlo_modules()[0]
        shape = _hlo_lib().XlaComputation(module.as_serialized_hlo_module_proto()).program_shape()
        return [(s.numpy_dtype(), tuple(s.dimensions())) for s in shape.parameter_shapes()]
    except Exception:  # noqa: BLE001 - only a check before running
        return None


def execute(executable, devices, args, spread=None):
    """Runs `executable` on `devices` with numpy `args`; the outputs as numpy arrays. Over
    several devices, each argument is split by its parameter's sharding and each output put
    together from the devices' pieces; devices whose copies of a piece differ are an error."""
    import jax

    if device_count(spread) > 1:
        return execute_global(executable, args, spread)
    device = devices[0]
    buffers = [jax.device_put(a, device) for a in args]
    if hasattr(executable, "execute_sharded"):
        results = executable.execute_sharded(buffers)
        per_output = results.disassemble_into_single_device_arrays()
        outputs = [shards[0] for shards in per_output]
    elif hasattr(executable, "execute_sharded_on_local_devices"):
        per_output = executable.execute_sharded_on_local_devices([[b] for b in buffers])
        outputs = [shards[0] for shards in per_output]
    else:
        outputs = executable.execute(buffers)
    return [np.asarray(o) for o in outputs]


class DevicesDisagree(Exception):
    """Devices that hold the same piece of an output returned different values."""


def execute_global(executable, args, spread):
    """`execute` over several devices (see there)."""
    import jax
    from jax._src.sharding_impls import GSPMDSharding

    devices = tuple(executable.local_devices())
    replicated = GSPMDSharding.get_replicated(devices)
    params = executable.get_parameter_shardings() if spread["num_partitions"] > 1 else None
    shardings = [GSPMDSharding(devices, s) for s in params] if params else \
        [replicated] * len(args)
    if len(shardings) != len(args):
        raise BadInput(f"the program has {len(shardings)} parameter(s), inputs.safetensors "
                       f"holds {len(args)} tensor(s)")
    buffers = [jax.device_put(a, s) for a, s in zip(args, shardings)]
    per_output = executable.execute_sharded(buffers).disassemble_into_single_device_arrays()
    outs = executable.get_output_shardings() if spread["num_partitions"] > 1 else None
    dims = spread["output_dims"]
    outputs = []
    for k, shards in enumerate(per_output):
        sharding = GSPMDSharding(devices, outs[k]) if outs else replicated
        where = sharding.devices_indices_map(tuple(dims[k]))
        whole, seen = None, None
        for shard in shards:
            (device,) = shard.devices()
            piece = np.asarray(shard)
            index = where[device]
            if whole is None:
                whole = np.zeros(dims[k], piece.dtype)
                seen = np.zeros(dims[k], bool)
            # A tile past the array's end is padding.
            target = whole[index]
            piece = piece[tuple(slice(0, n) for n in target.shape)]
            taken = seen[index]
            differs = piece != target
            if piece.dtype.kind in "fc":
                differs &= ~(np.isnan(piece) & np.isnan(target))
            if (taken & differs).any():
                raise DevicesDisagree(f"output {k}: the copies on the program's devices differ "
                                      f"(device {device} against another)")
            whole[index] = np.where(taken, target, piece)
            seen[index] = True
        outputs.append(whole)
    return outputs


def check_inputs(executable, args):
    """Refuses inputs whose count, dtypes or shapes do not fit the program's parameters."""
    params = parameter_shapes(executable)
    if params is None:
        return
    if len(params) != len(args):
        raise BadInput(f"the program has {len(params)} parameter(s), inputs.safetensors holds "
                       f"{len(args)} tensor(s)")
    for i, ((dtype, shape), arg) in enumerate(zip(params, args)):
        if np.dtype(dtype) != arg.dtype or tuple(shape) != tuple(arg.shape):
            raise BadInput(f"arg{i} is {arg.dtype}{list(arg.shape)}, the program's parameter {i} "
                           f"is {np.dtype(dtype)}{list(shape)}")


# ---------------------------------------------------------------------------------------------
# Plugins


def _installed_plugin_platform(path):
    """The platform name jax registers `path` under when it is the library of an installed
    ``jax_plugins`` package (e.g. jax's CUDA plugin, registered as ``cuda``), else None.
    jax's own registration also registers the plugin's custom calls, so it is preferred."""
    try:
        import jax_plugins
    except ImportError:
        return None
    for root in getattr(jax_plugins, "__path__", []):
        for dirpath, _, files in os.walk(root):
            for name in files:
                candidate = os.path.join(dirpath, name)
                try:
                    same = name.endswith(".so") and os.path.samefile(candidate, path)
                except OSError:
                    same = False
                if same:
                    package = os.path.relpath(dirpath, root).split(os.sep)[0].lower()
                    for platform in ("cuda", "rocm", "tpu"):
                        if platform in package:
                            return platform
    return None


def drop_installed_plugins_from_env():
    """Drops from ``PJRT_NAMES_AND_LIBRARY_PATHS`` (``name:path,...``, read by jax and by
    graphbug) every entry whose library an installed ``jax_plugins`` package registers itself:
    jax would register that library twice and fail (``ALREADY_EXISTS: PJRT_Api already exists
    for device type cuda``). Must run before jax discovers its plugins."""
    value = os.environ.get("PJRT_NAMES_AND_LIBRARY_PATHS")
    if not value:
        return
    kept = [entry for entry in value.split(",")
            if ":" not in entry or _installed_plugin_platform(entry.split(":", 1)[1]) is None]
    if kept:
        os.environ["PJRT_NAMES_AND_LIBRARY_PATHS"] = ",".join(kept)
    else:
        del os.environ["PJRT_NAMES_AND_LIBRARY_PATHS"]


def backend_choice(manifest, plugin_arg, platform_arg):
    """('plugin', path) or ('platform', name): what runs the program under test."""
    if plugin_arg:
        return ("plugin", plugin_arg)
    if platform_arg:
        return ("platform", platform_arg)
    plugin = manifest.get("plugin")
    if plugin:
        return ("plugin", plugin)
    # No plugin: jax's builtin backend of the manifest's platform (normally cpu).
    return ("platform", manifest.get("platform") or "cpu")


def open_backend(choice, devices=1):
    """Sets up jax for the backend under test and returns (backend, the `devices` it runs on,
    a label). Must run before jax initializes its backends."""
    drop_installed_plugins_from_env()
    import jax

    if devices > 1:
        # XLA CPU, the reference and jax's `cpu`, takes its device count when it starts.
        jax.config.update("jax_num_cpu_devices", devices)
    kind, value = choice
    if kind == "plugin":
        path = os.path.abspath(os.path.expanduser(value))
        if not os.path.isfile(path):
            raise BadInput(f"the PJRT plugin library {path} does not exist on this machine; "
                           "name another with --plugin PATH, or a jax backend with --platform NAME")
        installed = _installed_plugin_platform(path)
        if installed is not None:
            name = installed
        else:
            name = PLUGIN_NAME
        jax.config.update("jax_platforms", "cpu" if name == "cpu" else f"cpu,{name}")
        if installed is None:
            from jax._src import xla_bridge

            logging.getLogger(xla_bridge.__name__).setLevel(logging.ERROR)
            try:
                xla_bridge.register_plugin(
                    name, library_path=path,
                    options={"cpu_device_count": devices} if devices > 1 else None)
            except Exception as err:  # noqa: BLE001
                if "already" not in str(err).lower():
                    raise BadInput(f"cannot load the PJRT plugin {path}: {err}") from None
        label = f"plugin {path}"
    else:
        name = value
        jax.config.update("jax_platforms", "cpu" if name == "cpu" else f"cpu,{name}")
        label = f"jax backend `{name}`"
    try:
        backend = get_backend(name)
        have = backend.devices()
    except Exception as err:  # noqa: BLE001
        where = f"the PJRT plugin {value}" if kind == "plugin" else f"jax's `{name}` backend"
        raise BadInput(f"cannot start {where}: {err}") from None
    if len(have) < devices:
        raise BadInput(f"the program runs on {devices} devices, {label} has {len(have)}")
    shown = have[0] if devices == 1 else f"{devices} devices from {have[0]}"
    return backend, have[:devices], f"{label} (platform {backend.platform}, {shown})"


# ---------------------------------------------------------------------------------------------
# PyTorch/XLA (torch_xla._XLAC: an HLO module proto run as a user computation)

#: The manifest's platforms -> PyTorch/XLA's PJRT_DEVICE.
PJRT_DEVICES = {"cpu": "CPU", "cuda": "CUDA", "gpu": "CUDA", "tpu": "TPU", "neuron": "NEURON"}


def torch_xla_device(manifest):
    """The PJRT_DEVICE PyTorch/XLA runs the backend side on: the environment's, else the
    manifest's platform, else CPU."""
    if os.environ.get("PJRT_DEVICE"):
        return os.environ["PJRT_DEVICE"]
    platform = (manifest.get("platform") or "cpu").lower()
    if platform not in PJRT_DEVICES:
        raise BadInput(f"the manifest's platform `{platform}` is no PyTorch/XLA device; set "
                       "PJRT_DEVICE (CPU, CUDA, TPU, NEURON, ...)")
    return PJRT_DEVICES[platform]


def torch_xla_program(program, form, file_name):
    """The HLO module proto PyTorch/XLA runs; other forms are bad input (it parses no text)."""
    if form != "hlo-proto":
        raise BadInput(f"{file_name} is {form}; PyTorch/XLA runs HLO module protos only "
                       "(program.hlo.pb): run this directory with --with jax")
    return program


def _varint(data, i):
    """The varint at `i` of `data`, and where it ends."""
    value = shift = 0
    while True:
        byte = data[i]
        i += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return value, i


def put_varint(value):
    """A protobuf varint (negative values as their 64-bit two's complement)."""
    value &= (1 << 64) - 1
    out = bytearray()
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def pb_fields(data):
    """A protobuf message's fields in order: (number, wire type, int or bytes)."""
    fields, i = [], 0
    while i < len(data):
        key, i = _varint(data, i)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, i = _varint(data, i)
        elif wire == 2:
            size, i = _varint(data, i)
            value, i = bytes(data[i:i + size]), i + size
        elif wire in (1, 5):
            width = 8 if wire == 1 else 4
            value, i = bytes(data[i:i + width]), i + width
        else:
            raise BadInput(f"the HLO proto has a field of wire type {wire}, which protobuf "
                           "no longer writes")
        fields.append((number, wire, value))
    return fields


def pb_encode(fields):
    """A protobuf message of (number, wire type, int or bytes) fields."""
    out = bytearray()
    for number, wire, value in fields:
        out += put_varint(number << 3 | wire)
        if wire == 0:
            out += put_varint(value)
        elif wire == 2:
            out += put_varint(len(value)) + value
        else:
            out += value
    return bytes(out)


def varint_field(fields, number, default=0):
    """The value of the varint field `number` among `fields` (pb_fields), else `default`."""
    return next((v for n, w, v in fields if n == number and w == 0), default)


def instruction_ids(computation):
    """The ids of a computation's instructions (its pb_fields)."""
    return [varint_field(pb_fields(v), 35) for n, w, v in computation if n == 2 and w == 2]


def distinct_computation_ids(proto):
    """The HloModuleProto with its computations' ids above every instruction's (and the ids
    that name them: ``entry_computation_id``, each instruction's ``called_computation_ids``).
    XLA's builder imports a called module through one map of old ids to new ones for both,
    and XLA's text parser numbers computations and instructions from 0 alike, so that
    PyTorch/XLA cannot call what the parser wrote without this."""
    fields = pb_fields(proto)
    computations = [pb_fields(v) for n, w, v in fields if n == 3 and w == 2]
    base = max((i for c in computations for i in instruction_ids(c)), default=0) + 1
    new = {varint_field(c, 5): base + k for k, c in enumerate(computations)}

    def remap(wire, value):
        if wire == 0:
            return new.get(value, value)
        ids, i = [], 0
        while i < len(value):
            v, i = _varint(value, i)
            ids.append(new.get(v, v))
        return b"".join(put_varint(v) for v in ids)

    def instruction(data):
        return pb_encode([(n, w, remap(w, v) if n == 38 else v) for n, w, v in pb_fields(data)])

    out, k = [], 0
    for n, w, v in fields:
        if n == 7:  # a schedule, which names computations too; a program to compile has none
            continue
        if n == 3 and w == 2:
            computation = [(cn, cw, instruction(cv) if cn == 2 and cw == 2 else cv)
                           for cn, cw, cv in computations[k] if cn != 5]
            v = pb_encode(computation + [(5, 0, base + k)])
            k += 1
        elif n == 6 and w == 0:
            v = new.get(v, v)
        out.append((n, w, v))
    if not any(n == 6 for n, _, _ in fields):
        out.append((6, 0, new.get(0, 0)))
    return pb_encode(out)


def with_unused_parameter(proto):
    """The HloModuleProto of a program without parameters given one it does not use (an
    ``s32[]``): PyTorch/XLA takes a user computation's device from its inputs."""
    scalar = pb_encode([(2, 0, 4), (5, 2, b"")])  # ShapeProto: s32[], layout {}
    name = b"graphbug.unused"

    def program_shape(data):
        return pb_encode(pb_fields(data) + [(1, 2, scalar), (3, 2, name)])

    fields = pb_fields(proto)
    entry = varint_field(fields, 6)
    out = []
    for n, w, v in fields:
        if n == 4 and w == 2:
            v = program_shape(v)
        elif n == 3 and w == 2:
            computation = pb_fields(v)
            if varint_field(computation, 5) == entry:
                free = max(instruction_ids(computation), default=0) + 1
                parameter = pb_encode([(1, 2, name), (2, 2, b"parameter"), (3, 2, scalar),
                                        (9, 0, 0), (35, 0, free)])
                computation = [(cn, cw, program_shape(cv) if cn == 4 and cw == 2 else cv)
                               for cn, cw, cv in computation] + [(2, 2, parameter)]
                v = pb_encode(computation)
        out.append((n, w, v))
    return pb_encode(out)


def torch_xla_execute(program, args, name):
    """Runs an HLO module proto on PyTorch/XLA's device (PJRT_DEVICE); the outputs as numpy
    arrays (bfloat16 ones as float32). Compiling happens at the first transfer back."""
    import torch
    import torch_xla

    xlac = torch_xla._XLAC
    device = torch_xla.device()
    op = f"graphbug::{name}"
    tensors = [torch.from_numpy(np.array(a)).to(device) for a in args]  # 0-d stays 0-d
    if not tensors:
        program = with_unused_parameter(program)
        tensors = [torch.zeros((), dtype=torch.int32).to(device)]
    program = distinct_computation_ids(program)
    computation = xlac._xla_op_computation_from_module_proto(op, program)
    outputs = xlac._xla_user_computation(op, tensors, computation)
    host = [o.cpu() for o in outputs]
    return [(o.float() if o.dtype == torch.bfloat16 else o).numpy() for o in host]


#: Names the process a child of repro.py (or graphbug, started by graphbug_capture) must die
#: with: ``subprocess`` cannot set ``PR_SET_PDEATHSIG`` in a child of a threaded Python, so
#: the child sets it on itself (graphbug's GRAPHBUG_DIE_WITH).
DIE_WITH_ENV = "GRAPHBUG_DIE_WITH"


def child_env(**more):
    """This process's environment and `more`, naming this process in DIE_WITH_ENV."""
    return dict(os.environ, **more, **{DIE_WITH_ENV: str(os.getpid())})


def die_with_starter():
    """Where DIE_WITH_ENV names this process's parent: asks the kernel to kill this process
    when the parent dies (``kill -9`` included), and exits (status 2) if it is gone already.
    The variable is removed, so this process's own children do not read it."""
    value = os.environ.pop(DIE_WITH_ENV, None)
    if value is None or not sys.platform.startswith("linux"):
        return
    import ctypes
    import signal

    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
    if str(os.getppid()) != value.strip():
        print(f"repro.py: {DIE_WITH_ENV}={value} names the process that started it, but "
              f"its parent is {os.getppid()}: the starter is gone", file=sys.stderr)
        sys.exit(2)


def torch_xla_reference(directory, timeout):
    """The clean program of `directory` on PyTorch/XLA's CPU, in a child process (a process
    has one PJRT device type), within `timeout` seconds (0: no limit)."""
    import subprocess
    import tempfile

    with tempfile.TemporaryDirectory(prefix="graphbug-repro-") as scratch:
        out = os.path.join(scratch, "reference.npz")
        env = child_env(PJRT_DEVICE="CPU")
        try:
            result = subprocess.run(
                [sys.executable, os.path.abspath(__file__), "--dir", directory, "--with",
                 "torch_xla", "--in-process", "--reference-to", out],
                env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                timeout=timeout or None)
        except subprocess.TimeoutExpired:
            raise BadInput(f"the reference run on PyTorch/XLA's CPU did not finish within "
                           f"{timeout:g} s") from None
        if result.returncode != 0 or not os.path.exists(out):
            raise BadInput("the reference run on PyTorch/XLA's CPU fails:\n" + result.stdout)
        with np.load(out) as z:
            return [z[f"out{i}"] for i in range(len(z.files))]


def run_torch_xla(opts, directory, manifest, form, programs, args):
    """The backend side on PyTorch/XLA's device, the reference on its CPU: (outputs, reference
    thunk, None), or an exit status when the backend fails (or, with --reference-to, 0)."""
    clean, under_test, file_name = programs
    devices = device_count(manifest.get("devices"))
    if devices > 1:
        raise BadInput(f"the program runs on {devices} devices; this script runs programs over "
                       "several devices with jax (--with jax), not PyTorch/XLA")
    device = torch_xla_device(manifest)
    os.environ["PJRT_DEVICE"] = device
    under_test = torch_xla_program(under_test, form, file_name)
    clean = torch_xla_program(clean, form, manifest["program"])
    if opts.reference_to:
        np.savez(opts.reference_to, **{f"out{i}": o for i, o in
                                       enumerate(torch_xla_execute(clean, args, "reference"))})
        return 0
    import torch_xla

    print(f"running on PyTorch/XLA {torch_xla.__version__} (PJRT_DEVICE={device})")
    try:
        start = time.perf_counter()
        outputs = torch_xla_execute(under_test, args, "program")
        ran = time.perf_counter() - start
    except Exception as err:  # noqa: BLE001
        print(f"the backend fails to compile or run the program: {type(err).__name__}: {err}")
        return 1
    print(f"backend: compiled and ran in {ran:.3f} s, {len(outputs)} output(s)")

    def reference():
        if device != "CPU":
            return (torch_xla_reference(directory, opts.timeout),
                    "PyTorch/XLA CPU (a child process)")
        try:
            return torch_xla_execute(clean, args, "reference"), "PyTorch/XLA CPU"
        except Exception as err:  # noqa: BLE001
            raise BadInput(f"the reference run on PyTorch/XLA's CPU fails: "
                           f"{type(err).__name__}: {err}") from None

    return outputs, reference, None


# ---------------------------------------------------------------------------------------------
# Comparison


def compare(name, got, want, rtol, atol):
    """Prints one output's comparison; True when it matches."""
    if got.shape != want.shape or got.dtype != want.dtype:
        print(f"{name}: {got.dtype}{list(got.shape)} where the reference has "
              f"{want.dtype}{list(want.shape)}, DIFFERS")
        return False
    if got.size == 0:
        print(f"{name}: empty, ok")
        return True
    kind = np.dtype(got.dtype).kind
    if kind in "biu":
        wide = np.uint64 if kind == "u" else np.int64
        a, b = got.astype(wide), want.astype(wide)
        bad = a != b
        diff = np.abs(a.astype(np.float64) - b.astype(np.float64))
    else:
        complex_ = kind == "c"
        a = got.astype(np.complex128 if complex_ else np.float64)
        b = want.astype(np.complex128 if complex_ else np.float64)
        both_nan = np.isnan(a) & np.isnan(b)
        equal = (a == b) | both_nan
        with np.errstate(invalid="ignore", over="ignore"):
            diff = np.where(equal, 0.0, np.abs(a - b))
            bad = ~equal & ~(diff <= atol + rtol * np.abs(b))
        diff = np.where(np.isnan(diff), np.inf, diff)
    worst = float(np.max(diff))
    count = int(np.count_nonzero(bad))
    if count:
        index = np.unravel_index(int(np.argmax(np.where(bad, diff, -1.0))), got.shape)
        print(f"{name}: max abs diff {worst:.6g}, {count} of {got.size} element(s) out of "
              f"tolerance (the worst at {list(map(int, index))}: {_scalar(got[index])} vs "
              f"{_scalar(want[index])}), DIFFERS")
        return False
    print(f"{name}: max abs diff {worst:.6g}, ok")
    return True


def _scalar(value):
    """A numpy scalar as plain Python prints it."""
    try:
        return repr(value.item())
    except (AttributeError, ValueError):
        return repr(value)


# ---------------------------------------------------------------------------------------------


def parse_args(argv):
    parser = argparse.ArgumentParser(
        prog="repro.py",
        description="Run a graphbug XLA repro directory: the program on the backend under test "
                    "and on XLA CPU, and compare the outputs. Exit status 0: every output "
                    "matches; 1: the backend fails or an output differs; 2: bad input.")
    parser.add_argument("--dir", default=os.path.dirname(os.path.abspath(__file__)),
                        help="the repro directory (default: the directory of this script)")
    parser.add_argument("--plugin", metavar="PATH",
                        help="PJRT plugin library to run on (overrides the manifest's plugin)")
    parser.add_argument("--platform", metavar="NAME",
                        help="a backend jax has installed, e.g. cpu, cuda (overrides the manifest)")
    parser.add_argument("--reference", choices=("cpu", "recorded"), default="cpu",
                        help="compare with a run on XLA CPU (default) or with "
                             "reference_outputs.safetensors")
    parser.add_argument("--clean", action="store_true",
                        help="run the clean program on the backend even when the manifest "
                             "names a faulted one")
    parser.add_argument("--rtol", type=float, help="relative tolerance (overrides the manifest)")
    parser.add_argument("--atol", type=float, help="absolute tolerance (overrides the manifest)")
    parser.add_argument("--timeout", type=float, default=600.0, metavar="S",
                        help="seconds the whole run may take (default 600; 0: no limit); a "
                             "backend that runs past it hangs (exit status 1)")
    parser.add_argument("--no-tf32", action="store_true",
                        help="XLA's GPU plugin: compute float32 dots at full float32 precision "
                             "(sets " + " and ".join(f"{k}={v}" for k, v in NO_TF32.items()) +
                             "); by default they run in TF32, which differs from XLA CPU by "
                             "about 1e-3")
    parser.add_argument("--in-process", action="store_true",
                        help="run in this process: a crash of the backend then ends this "
                             "script with the signal instead of exit status 1")
    parser.add_argument("--with", dest="runtime", choices=("jax", "torch_xla", "iree"),
                        help="run with jax, PyTorch/XLA or IREE (default: IREE for an iree: "
                             "backend, else jax where installed, else PyTorch/XLA)")
    parser.add_argument("--iree-target", metavar="NAME",
                        help="IREE's target backend, e.g. llvm-cpu, cuda, vulkan-spirv "
                             "(overrides the manifest's iree:<target>)")
    parser.add_argument("--reference-to", help=argparse.SUPPRESS)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def iree_target(manifest):
    """The IREE target backend the manifest's backend names (``fault:...+iree:llvm-cpu``),
    or None when it is no IREE backend."""
    inner = (manifest.get("backend") or "").rsplit("+", 1)[-1]
    return inner[len(IREE_PREFIX):] if inner.startswith(IREE_PREFIX) else None


def choose_runtime(choice, manifest):
    """``jax``, ``torch_xla`` or ``iree``: `choice`, else IREE for an IREE backend, else jax
    where it is installed, else PyTorch/XLA."""
    if choice:
        return choice
    if iree_target(manifest):
        return "iree"
    import importlib.util

    if importlib.util.find_spec("jax") is not None:
        return "jax"
    if importlib.util.find_spec("torch_xla") is not None:
        return "torch_xla"
    raise BadInput("neither jax nor torch_xla is installed; repro.py runs the program with one")


def run_jax(opts, manifest, form, programs, args):
    """The backend side on jax's backend, the reference on XLA CPU: (outputs, reference
    thunk, a note to print when an output differs), or an exit status when the backend
    fails."""
    clean, under_test, file_name = programs
    import jax

    # Before any backend starts: f64 stays f64 when inputs are put on devices.
    jax.config.update("jax_enable_x64", True)
    spread = manifest.get("devices")
    backend, devices, label = open_backend(backend_choice(manifest, opts.plugin, opts.platform),
                                           device_count(spread))
    print(f"running on {label}")
    if form == "stablehlo-text":
        check_stablehlo_text(clean, manifest["program"])
        if under_test is not clean:
            check_stablehlo_text(under_test, file_name)
    compilable = to_compilable(under_test, form)
    clean_compilable = compilable if under_test is clean else None
    try:
        start = time.perf_counter()
        executable = compile_program(backend, devices, compilable, spread,
                                     manifest.get("compile_options"))
        compiled = time.perf_counter() - start
    except Exception as err:  # noqa: BLE001
        print(f"the backend fails to compile the program: {type(err).__name__}: {err}")
        return 1
    if device_count(spread) == 1:
        # Over several devices the compiled parameters are each device's pieces.
        check_inputs(executable, args)
    try:
        start = time.perf_counter()
        outputs = execute(executable, devices, args, spread)
        ran = time.perf_counter() - start
    except Exception as err:  # noqa: BLE001
        print(f"the backend fails to run the program: {type(err).__name__}: {err}")
        return 1
    print(f"backend: compiled in {compiled:.3f} s, ran in {ran:.3f} s, {len(outputs)} output(s)")

    def reference():
        return xla_cpu_reference(clean_compilable or to_compilable(clean, form), args, spread)

    note = None
    if backend.platform == "gpu" and not opts.no_tf32:
        note = ("note: XLA's GPU plugin computes float32 dots in TF32 by default, about 1e-3 "
                "from XLA CPU; --no-tf32 compares at full float32 precision")
    return outputs, reference, note


def xla_cpu_reference(program, args, spread=None):
    """The outputs of `program` (as ``compile_and_load`` takes it) on XLA CPU, jax's builtin
    ``cpu`` backend (on as many devices as the manifest's ``devices`` says), and a label; a
    failure is bad input."""
    try:
        cpu = get_backend("cpu")
        devices = cpu.devices()[:device_count(spread)]
        executable = compile_program(cpu, devices, program, spread)
        shown = devices[0] if len(devices) == 1 else f"{len(devices)} devices"
        return execute(executable, devices, args, spread), f"XLA CPU ({shown})"
    except BadInput:
        raise
    except Exception as err:  # noqa: BLE001
        raise BadInput(f"the reference run on XLA CPU fails: {type(err).__name__}: {err}") \
            from None


def _first_lines(err, n=8):
    """The first `n` lines of an error's message (IREE's compiler says a lot)."""
    lines = str(err).strip().splitlines()
    return "\n".join(lines[:n]) + (f"\n... ({len(lines) - n} more lines)" if len(lines) > n else "")


def entry_function(text):
    """The function the program runs: ``main``, else its one public function."""
    import re

    names = re.findall(r"func\.func\s+(?:public\s+)?@([\w.$]+)\s*\(", text)
    if "main" in names or not names:
        return "main"
    public = re.findall(r"func\.func\s+public\s+@([\w.$]+)\s*\(", text)
    return (public or names)[0]


def run_iree(opts, manifest, form, programs, args):
    """The backend side on IREE (its compiler and runtime, from Python), the reference on XLA
    CPU through jax (or the recorded outputs): (outputs, reference thunk, None), or an exit
    status when the backend fails."""
    clean, under_test, _ = programs
    target = opts.iree_target or iree_target(manifest)
    if not target:
        raise BadInput(f"the manifest's backend {manifest.get('backend')!r} is no IREE backend "
                       "(iree:<target>); name one with --iree-target NAME")
    if form != "stablehlo-text":
        raise BadInput(f"IREE compiles StableHLO; this directory's program is {form} "
                       "(graphbug converts HLO for IREE when its backend is iree:<target>)")
    try:
        import iree.compiler as ireec
        import iree.runtime as ireert
    except ImportError as err:
        raise BadInput(f"IREE's Python packages are not installed ({err}): "
                       "pip install iree-base-compiler iree-base-runtime") from None
    print(f"running on IREE's `{target}` target backend")
    user = os.environ.get("GRAPHBUG_IREE_FLAGS", "").split()
    extra = []
    if target == "llvm-cpu" and not any(f.startswith("--iree-llvmcpu-target-cpu") for f in user):
        extra.append("--iree-llvmcpu-target-cpu=host")
    # IREE computes float64 in float32 unless told not to (as graphbug compiles it).
    if not any(f.startswith("--iree-input-demote-f64-to-f32") for f in user):
        extra.append("--iree-input-demote-f64-to-f32=false")
    extra += user
    try:
        start = time.perf_counter()
        vmfb = ireec.compile_str(under_test, target_backends=[target], extra_args=extra)
        compiled = time.perf_counter() - start
    except Exception as err:  # noqa: BLE001 - the compiler's own error types
        print(f"the backend fails to compile the program: {type(err).__name__}: "
              f"{_first_lines(err)}")
        return 1
    try:
        start = time.perf_counter()
        module = ireert.load_vm_flatbuffer(vmfb, backend=target)
        results = module[entry_function(under_test)](*args)
        results = results if isinstance(results, (tuple, list)) else (results,)
        outputs = [np.asarray(r.to_host() if hasattr(r, "to_host") else r) for r in results]
        ran = time.perf_counter() - start
    except Exception as err:  # noqa: BLE001
        print(f"the backend fails to run the program: {type(err).__name__}: {_first_lines(err)}")
        return 1
    print(f"backend: compiled in {compiled:.3f} s, ran in {ran:.3f} s, {len(outputs)} output(s)")

    def reference():
        try:
            import jax
        except ImportError:
            raise BadInput("the reference runs on XLA CPU through jax, which is not installed; "
                           "use --reference recorded") from None
        jax.config.update("jax_enable_x64", True)
        check_stablehlo_text(clean, manifest["program"])
        return xla_cpu_reference(clean, args)

    return outputs, reference, None


def run(opts):
    """Runs the repro; returns the exit status."""
    directory = os.path.abspath(opts.dir)
    manifest = read_manifest(directory)
    form = program_form(manifest, manifest["program"])
    clean = read_program(directory, manifest["program"], form)
    faulted_name = None if opts.clean else manifest.get("faulted_program")
    under_test = read_program(directory, faulted_name, form) if faulted_name else clean
    programs = (clean, under_test, faulted_name or manifest["program"])
    inputs_path, named = read_tensors(directory, "inputs")
    args = numbered(named, "arg", inputs_path)
    tolerance = dict(DEFAULT_TOLERANCE)
    tolerance.update({k: float(v) for k, v in (manifest.get("tolerance") or {}).items()
                      if k in ("rtol", "atol") and v is not None})
    rtol = tolerance["rtol"] if opts.rtol is None else opts.rtol
    atol = tolerance["atol"] if opts.atol is None else opts.atol
    recorded = None
    if opts.reference == "recorded":
        path, named = read_tensors(directory, "reference_outputs")
        recorded = numbered(named, "out", path)

    runtime = choose_runtime(opts.runtime, manifest)
    if not opts.reference_to:
        print(f"program: {os.path.join(directory, programs[2])} ({form}), "
              f"{len(args)} input(s); backend {manifest.get('backend')!r}")
    if runtime == "torch_xla":
        if opts.plugin or opts.platform:
            raise BadInput("--plugin and --platform choose jax's backend; with PyTorch/XLA, "
                           "set PJRT_DEVICE")
        ran = run_torch_xla(opts, directory, manifest, form, programs, args)
    elif runtime == "iree":
        if opts.plugin or opts.platform:
            raise BadInput("--plugin and --platform choose jax's backend; with IREE, "
                           "--iree-target names its target backend")
        ran = run_iree(opts, manifest, form, programs, args)
    else:
        ran = run_jax(opts, manifest, form, programs, args)
    if isinstance(ran, int):
        return ran
    outputs, reference_of, note = ran

    if recorded is not None:
        reference = recorded
        print("reference: reference_outputs.safetensors")
    else:
        reference, label = reference_of()
        print(f"reference: {label}")
    if len(reference) != len(outputs):
        print(f"the backend gives {len(outputs)} output(s), the reference {len(reference)}: DIFFERS")
        return 1
    print(f"tolerance: rtol {rtol:g}, atol {atol:g}")
    matches = [compare(f"out{i}", got, want, rtol, atol)
               for i, (got, want) in enumerate(zip(outputs, reference))]
    differing = [f"out{i}" for i, ok in enumerate(matches) if not ok]
    if differing:
        print(f"DIFFERS: {', '.join(differing)}")
        if note:
            print(note)
        return 1
    print("ok: every output matches")
    return 0


#: What the child is doing, by the lines it prints: (line prefix, the step it starts).
_STEPS = (("running on ", "backend"), ("backend: compiled", "reference"),
          ("reference: ", "comparison"))


def supervise(argv, timeout):
    """Runs this script again in a child process (its output passed through), so that a
    backend that crashes (a signal) or hangs is exit status 1, not the end of this one."""
    import signal
    import subprocess
    import threading

    command = [sys.executable, os.path.abspath(__file__), *argv, "--child"]
    child = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, bufsize=1,
                             env=child_env())
    step = ["setup"]

    def relay():
        for line in child.stdout:
            sys.stdout.write(line)
            sys.stdout.flush()
            for prefix, name in _STEPS:
                if line.startswith(prefix):
                    step[0] = name

    reader = threading.Thread(target=relay, daemon=True)
    reader.start()
    try:
        status = child.wait(timeout=timeout if timeout and timeout > 0 else None)
    except subprocess.TimeoutExpired:
        child.kill()
        child.wait()
        reader.join(timeout=5)
        if step[0] == "backend":
            print(f"the backend did not finish within {timeout:g} s (killed): it hangs")
            return 1
        print(f"repro.py: the {step[0]} step did not finish within {timeout:g} s", file=sys.stderr)
        return 2
    reader.join(timeout=5)
    if status >= 0:
        return status
    try:
        name = signal.Signals(-status).name
    except ValueError:
        name = f"signal {-status}"
    if step[0] == "backend":
        print(f"the backend crashed: the process was killed by {name}")
        return 1
    print(f"repro.py: the {step[0]} step crashed ({name})", file=sys.stderr)
    return 2


def main(argv=None):
    die_with_starter()
    argv = sys.argv[1:] if argv is None else list(argv)
    opts = parse_args(argv)
    if opts.no_tf32 and not opts.child:
        # Before jax starts a backend (here, or in the child, which inherits them).
        for key, value in NO_TF32.items():
            old = os.environ.get(key, "")
            os.environ[key] = f"{old} {value}".strip() if key == "XLA_FLAGS" else value
        print("precision: full float32 on XLA's GPU plugin ("
              + ", ".join(f"{k}={os.environ[k]}" for k in NO_TF32) + ")")
    if not (opts.child or opts.in_process):
        return supervise(argv, opts.timeout)
    if opts.child:  # each line reaches the parent before a crash can lose it
        sys.stdout.reconfigure(line_buffering=True)
    try:
        return run(opts)
    except BadInput as err:
        print(f"repro.py: {err}", file=sys.stderr)
        return 2
    except ImportError as err:
        print(f"repro.py: {err} (repro.py needs numpy, and jax, torch_xla or IREE)", file=sys.stderr)
        return 2
    except Exception:  # noqa: BLE001 - an unexpected failure is not a reproduction
        traceback.print_exc()
        return 2


if __name__ == "__main__":
    sys.exit(main())
