"""The safetensors layout both case generators write (gen_cases.py from torch tensors,
gen_xla_cases.py from numpy arrays): keys sorted, an 8-byte aligned JSON header, the
tensors' bytes in key order. Imports nothing but the standard library."""

import json


def write_safetensors_file(path, entries):
    """Writes [(name, safetensors dtype, shape, bytes)] to `path`."""
    header, blobs, offset = {}, [], 0
    for name, dtype, shape, data in sorted(entries, key=lambda e: e[0]):
        header[name] = {"dtype": dtype, "shape": list(shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(len(text).to_bytes(8, "little"))
        f.write(text)
        for b in blobs:
            f.write(b)
