"""``python -m graphbug_capture [--out DIR] [--aot] [--backend NAME] script.py ARGS``: runs an
unmodified script with every ``torch.compile`` wrapped by the capture backend, which defers
to whatever backend the script names."""

import argparse
import functools
import runpy
import sys


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m graphbug_capture", description=__doc__)
    parser.add_argument("--out", default="graphbug_captures", help="where repro directories go")
    parser.add_argument("--aot", action="store_true",
                        help="also write AOTAutograd's forward and backward graphs")
    parser.add_argument("--backend", default="eager",
                        help="the graphbug backend the repro directories name")
    parser.add_argument("script")
    parser.add_argument("args", nargs=argparse.REMAINDER)
    a = parser.parse_args(argv)

    import torch

    from .backend import graphbug_capture

    original = torch.compile

    @functools.wraps(original)
    def compile_with_capture(model=None, *, backend="inductor", mode=None, options=None, **kw):
        capture = functools.partial(graphbug_capture, options={
            "out": a.out, "inner": backend, "inner_mode": mode, "inner_options": options,
            "aot": a.aot, "backend": a.backend,
        })
        capture.__name__ = "graphbug_capture"
        return original(model, backend=capture, **kw) if model is not None else \
            original(backend=capture, **kw)

    torch.compile = compile_with_capture
    sys.argv = [a.script] + a.args
    runpy.run_path(a.script, run_name="__main__")
    return 0


if __name__ == "__main__":
    sys.exit(main())
