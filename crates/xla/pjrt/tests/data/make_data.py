"""Writes the HLO module protos the tests compile, with JAX (the project's .venv has it):

    .venv/bin/python crates/xla/pjrt/tests/data/make_data.py
"""
from pathlib import Path

import jax
import jax.numpy as jnp

# Source locations keep only the file name, not where the repository was checked out.
jax.config.update("jax_hlo_source_file_canonicalization_regex", ".*/")
here = Path(__file__).parent
x = jnp.zeros(3, jnp.float32)


def add(a, b):
    return a + b


def add_mul(a, b):  # a tuple result
    return a + b, a * b


for f in (add, add_mul):
    name = f.__name__
    lowered = jax.jit(f).lower(x, x)
    proto = lowered.compiler_ir("hlo").as_serialized_hlo_module_proto()
    (here / f"{name}.hlo.pb").write_bytes(proto)
    print(name, len(proto), "bytes")
