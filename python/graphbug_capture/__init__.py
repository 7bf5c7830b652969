"""Capture the graphs torch.compile hands a backend, as graphbug repro directories.

``torch.compile(model, backend="graphbug_capture", options={"out": DIR, "inner": "inductor"})``
writes every graph it receives (with its real inputs) under ``DIR``, then compiles it with
the inner backend. ``python -m graphbug_capture --out DIR script.py ARGS`` does the same for
an unmodified script. Then ``graphbug repro DIR/<graph> minify --backend ...``.
"""

from .backend import graphbug_capture  # noqa: F401

__all__ = ["graphbug_capture"]
