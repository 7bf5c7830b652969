"""Capture programs as graphbug repro directories.

PyTorch: ``torch.compile(model, backend="graphbug_capture", options={"out": DIR, "inner":
"inductor"})`` writes every graph it receives (with its real inputs) under ``DIR``, then
compiles it with the inner backend. ``python -m graphbug_capture --out DIR script.py ARGS``
does the same for an unmodified script. Then ``graphbug repro DIR/<graph> minify --backend ...``.

JAX: ``graphbug_capture.jax.dump(f, *args, out=DIR)`` writes the program ``jax.jit(f)`` lowers
to and the arguments of one call as an XLA repro directory (see ``graphbug_capture.jax``).

PyTorch/XLA: ``graphbug_capture.torch_xla.run_hlo_minifier(model, inputs, "precision")`` (or
``"compilation"``) captures every HLO module a step compiles, with its arguments, and has
graphbug check each, minify the failing ones and write their repro directories.

``graphbug_capture.graphbug_capture`` (the torch.compile backend) is imported on first use,
so that the JAX side works without PyTorch installed.
"""

__all__ = ["graphbug_capture"]


def __getattr__(name):
    """Imports the torch.compile backend on first use (it needs PyTorch)."""
    if name == "graphbug_capture":
        from .backend import graphbug_capture

        globals()["graphbug_capture"] = graphbug_capture
        return graphbug_capture
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
