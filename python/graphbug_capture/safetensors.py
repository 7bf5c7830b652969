"""A dependency-free safetensors writer (graphbug reads the files with the Rust crate)."""

import json
import struct

_DTYPES = {
    "float32": "F32", "float64": "F64", "float16": "F16", "bfloat16": "BF16",
    "int64": "I64", "int32": "I32", "int16": "I16", "int8": "I8", "uint8": "U8",
    "uint16": "U16", "uint32": "U32", "uint64": "U64", "bool": "BOOL",
}


def dtype_name(tensor):
    """The safetensors name of the tensor's dtype, or None when the format cannot hold it."""
    return _DTYPES.get(str(tensor.dtype).replace("torch.", ""))


def save(path, named):
    """Writes [(name, tensor)] to `path`: keys sorted, dense little-endian data."""
    import torch

    header, blobs, offset, strides = {}, [], 0, {}
    for name, t in sorted(named, key=lambda kv: kv[0]):
        kind = dtype_name(t)
        if kind is None or t.layout != torch.strided:
            raise ValueError(f"tensor `{name}` ({t.dtype}, {t.layout}) cannot be written as safetensors")
        if not t.is_contiguous() and t.numel() > 1:
            # The layout rides along (graphbug lays the tensor out again when reading):
            # AOT graphs `view` their inputs as they were laid out.
            strides[name] = list(t.stride())
        t = t.detach().to("cpu")
        dense = torch.empty(t.shape, dtype=t.dtype)
        dense.copy_(t.resolve_conj().resolve_neg())
        data = _bytes(dense.reshape(-1).view(torch.uint8)) if dense.numel() else b""
        header[name] = {"dtype": kind, "shape": list(dense.shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    if strides:
        header["__metadata__"] = {"strides": json.dumps(strides, separators=(",", ":"))}
    _write(path, header, blobs)


def _write(path, header, blobs):
    """Writes a safetensors file: the header (8-byte aligned), then the data blobs."""
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as fh:
        fh.write(struct.pack("<Q", len(text)))
        fh.write(text)
        for blob in blobs:
            fh.write(blob)


def _bytes(flat_u8):
    """The bytes of a 1-d uint8 CPU tensor (numpy when present, which PyTorch does not require)."""
    try:
        return flat_u8.numpy().tobytes()
    except (ImportError, RuntimeError):
        return bytes(flat_u8.tolist())


#: numpy dtype names the numpy writer stores (bfloat16 is ml_dtypes', which jax ships).
_NUMPY_DTYPES = dict(_DTYPES)


def save_numpy(path, named):
    """Writes [(name, numpy array)] to `path` with numpy alone (no torch): keys sorted, dense
    little-endian data, bfloat16 as BF16. Refuses dtypes safetensors cannot hold."""
    import numpy as np

    header, blobs, offset = {}, [], 0
    for name, array in sorted(named, key=lambda kv: kv[0]):
        array = np.asarray(array)
        kind = _NUMPY_DTYPES.get(array.dtype.name)
        if kind is None:
            raise ValueError(f"array `{name}` ({array.dtype}) cannot be written as safetensors")
        if array.dtype.byteorder == ">":
            array = array.astype(array.dtype.newbyteorder("<"))
        data = np.ascontiguousarray(array).tobytes()
        header[name] = {"dtype": kind, "shape": [int(d) for d in array.shape],
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    _write(path, header, blobs)
