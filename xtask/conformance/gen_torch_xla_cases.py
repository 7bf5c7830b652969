"""Generate graphbug's PyTorch/XLA conformance cases with PyTorch/XLA itself (torch_xla 2.9.0,
PJRT_DEVICE=CPU), in the environment set-up makes for it (.venv-torch-xla).

Models nobody here wrote the HLO of: small torch.nn models (an MLP, a transformer encoder layer,
a conv net with batch norm and pooling, an LSTM, a GRU, attention, embeddings with layer norm,
losses, sort/top-k, gather/scatter, interpolation, a transposed convolution, group norm),
each run by PyTorch/XLA as an evaluation (in eval mode, one module) and as a training step with Adam
synced after the forward, the backward and the optimizer (three modules), captured with
``graphbug_capture.torch_xla.Capture``. Each HLO module PyTorch/XLA compiled is a case
``torch_xla/MODEL/RUN/MODULE`` (source ``torch_xla``, the XLA stages):

    xla.hlo           PyTorch/XLA's HLO text of the module (``_get_xla_tensors_hlo``)
    module.pb         its HloModuleProto (``_get_xla_tensors_hlo_proto``)
    module.pb.hlo     XLA's print of that proto in JAX's style (written by ``--print-protos``,
                      run with JAX's environment: PyTorch/XLA has no printer of its own)
    stablehlo.mlir    its StableHLO text (``_get_stablehlo``)
    inputs.npz        the module's arguments: its device data, in parameter order
    outputs.npz       what PyTorch/XLA computed, out0.. (the synced tensors, in order)
    case.json         the files each stage reads (as gen_xla_cases.py writes them)

Each model's training step is also an XLA dump directory, case
``xla-dump/torch_xla/MODEL/capture`` (source ``xla-dump``): the modules as
``graphbug_capture.torch_xla`` writes them for ``run_hlo_minifier`` (HloModuleProtos with
``xla.HloSnapshot`` arguments); and ``xla-dump/torch_xla/MODEL/xla_flags``: what XLA itself
dumped of the model's whole run with ``XLA_FLAGS=--xla_dump_to --xla_dump_hlo_as_text``
(programs as built, as text; PyTorch/XLA records no arguments).

A model PyTorch/XLA cannot run is written as case.json with "status": "skipped" and the
reason (not counted).

    .venv-torch-xla/bin/python xtask/conformance/gen_torch_xla_cases.py --out CASES
    .venv/bin/python xtask/conformance/gen_torch_xla_cases.py --print-protos CASES
"""

import argparse
import concurrent.futures
import multiprocessing
import os
import re
import shutil
import sys
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from gen_xla_cases import (FORMAT_VERSION, die_with_parent, first_line,  # noqa: E402
                           skip_case, write_case_json, write_inputs_outputs)

#: The models of the CI subset.
CI_MODELS = ["mlp"]

#: Each worker's own XLA dump directory, set before PyTorch/XLA starts.
DUMP_ENV = "GRAPHBUG_TORCH_XLA_DUMP"


# ---------------------------------------------------------------- models


def models():
    """(name, build) pairs: build() -> (model, inputs, loss_fn), on the CPU; fixed order."""
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    def mlp():
        m = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 4))
        return m, [torch.randn(3, 8)], lambda y: y.pow(2).mean()

    def transformer():
        vocab, width = 32, 16

        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.embed = nn.Embedding(vocab, width)
                self.layer = nn.TransformerEncoderLayer(width, 2, dim_feedforward=32,
                                                        dropout=0.0, batch_first=True)
                self.head = nn.Linear(width, vocab)

            def forward(self, tokens):
                return self.head(self.layer(self.embed(tokens)))

        targets = torch.randint(0, vocab, (2, 6))
        return (Model(), [torch.randint(0, vocab, (2, 6))],
                lambda logits, t=targets: F.cross_entropy(logits.reshape(-1, vocab),
                                                          t.to(logits.device).reshape(-1)))

    def convnet():
        m = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                          nn.MaxPool2d(2), nn.Conv2d(8, 8, 3), nn.AdaptiveAvgPool2d(1),
                          nn.Flatten(), nn.Linear(8, 5))
        return m, [torch.randn(2, 3, 12, 12)], lambda y: y.logsumexp(-1).mean()

    def lstm():
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.rnn = nn.LSTM(6, 8, batch_first=True)

            def forward(self, x):
                return self.rnn(x)[0]

        return Model(), [torch.randn(2, 5, 6)], lambda y: y.sum()

    def gru():
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.rnn = nn.GRU(6, 8, num_layers=2, batch_first=True)

            def forward(self, x):
                return self.rnn(x)[0]

        return Model(), [torch.randn(2, 5, 6)], lambda y: y.pow(2).mean()

    def attention():
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.qkv = nn.Linear(16, 48)

            def forward(self, x):
                q, k, v = self.qkv(x).reshape(2, 7, 3, 4, 4).permute(2, 0, 3, 1, 4)
                return F.scaled_dot_product_attention(q, k, v, is_causal=True)

        return Model(), [torch.randn(2, 7, 16)], lambda y: y.abs().mean()

    def embedding_norm():
        m = nn.Sequential(nn.Embedding(20, 12), nn.LayerNorm(12), nn.Linear(12, 3))
        return m, [torch.randint(0, 20, (4, 5))], lambda y: y.softmax(-1)[..., 0].mean()

    def losses():
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(6, 4)

            def forward(self, x):
                y = self.fc(x)
                t = torch.arange(y.shape[0], device=y.device) % 4
                return (F.cross_entropy(y, t, label_smoothing=0.1) + F.mse_loss(y, y.tanh())
                        + F.smooth_l1_loss(y, y * 0.5) + F.nll_loss(y.log_softmax(-1), t)
                        + F.binary_cross_entropy_with_logits(y, y.sigmoid().detach()))

        return Model(), [torch.randn(5, 6)], None

    def sort_topk():
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(10, 10)

            def forward(self, x):
                y = self.fc(x)
                values, _ = y.sort(-1, descending=True)
                top, _ = y.topk(3, -1)
                return values.cumsum(-1)[..., -1] + top.sum(-1)

        return Model(), [torch.randn(4, 10)], lambda y: y.mean()

    def gather_scatter():
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(6, 6)

            def forward(self, x, index):
                y = self.fc(x)
                g = y.gather(1, index)
                s = torch.zeros_like(y).scatter_add(1, index, g)
                return s.index_put((index[:, 0] % 4,), y[:, :1] * 2.0, accumulate=True)

        index = torch.tensor([[0, 2, 1], [5, 4, 4], [3, 3, 0], [1, 0, 5]])
        return Model(), [torch.randn(4, 6), index], lambda y: y.pow(2).sum()

    def interpolate():
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.conv = nn.Conv2d(2, 3, 1)

            def forward(self, x):
                y = self.conv(x)
                return (F.interpolate(y, scale_factor=2, mode="bilinear", align_corners=False)
                        + F.interpolate(y, scale_factor=2, mode="nearest"))

        return Model(), [torch.randn(1, 2, 5, 5)], lambda y: y.mean()

    def conv_transpose():
        m = nn.Sequential(nn.ConvTranspose2d(4, 2, 3, stride=2, padding=1), nn.Tanh())
        return m, [torch.randn(2, 4, 4, 4)], lambda y: y.pow(2).mean()

    def group_norm():
        m = nn.Sequential(nn.Conv1d(4, 8, 3), nn.GroupNorm(2, 8), nn.SiLU())
        return m, [torch.randn(3, 4, 9)], lambda y: y.mean()

    return [("mlp", mlp), ("transformer", transformer), ("convnet", convnet), ("lstm", lstm),
            ("gru", gru), ("attention", attention), ("embedding_norm", embedding_norm),
            ("losses", losses), ("sort_topk", sort_topk), ("gather_scatter", gather_scatter),
            ("interpolate", interpolate), ("conv_transpose", conv_transpose),
            ("group_norm", group_norm)]


# ---------------------------------------------------------------- capture (in the workers)


def capture_class():
    """graphbug_capture's Capture that also keeps, for each module, its HLO text, its
    StableHLO text and what PyTorch/XLA computed (the synced tensors on the host)."""
    import torch_xla
    from graphbug_capture.torch_xla import Capture, _tensors

    x = torch_xla._XLAC

    class Recording(Capture):
        def __init__(self):
            super().__init__()
            self.extra = []

        def _record(self, kind, tensors):
            name = super()._record(kind, tensors)
            if name is not None:
                self.extra.append({"hlo": x._get_xla_tensors_hlo(tensors),
                                   "stablehlo": x._get_stablehlo(tensors, "", [], False),
                                   "count": len(tensors), "outputs": None})
            return name

        def sync(self, kind, tensors):
            tensors = _tensors(tensors)
            name = super().sync(kind, tensors)
            if name is not None:
                self.extra[-1]["outputs"] = [t.detach().cpu() for t in tensors]
            return name

    return Recording




def module_case(out_root, model, run, name, proto, arguments, extra):
    """Writes one module's case; returns (case id, status)."""
    case_id = f"torch_xla/{model}/{run}/{name}"
    out_dir = os.path.join(out_root, case_id)
    meta = {"source": "torch_xla", "kind": run, "op": model, "name": f"{model}/{run}/{name}"}
    os.makedirs(out_dir, exist_ok=True)
    files = {"xla.hlo": extra["hlo"], "stablehlo.mlir": extra["stablehlo"], "module.pb": proto}
    for file, content in files.items():
        with open(os.path.join(out_dir, file), "wb" if isinstance(content, bytes) else "w") as f:
            f.write(content)
    case = dict(meta, id=case_id, status="ok", format_version=FORMAT_VERSION)
    case.update({
        "fmt": [{"file": "xla.hlo"}, {"file": "stablehlo.mlir"}],
        "proto": [{"file": "module.pb", "expected": "module.pb.hlo"}],
        "check": ["xla.hlo", "module.pb", "stablehlo.mlir"],
        "run_hlo": ["xla.hlo", "module.pb"],
        "run_stablehlo": ["stablehlo.mlir"],
        # PyTorch/XLA's counts: the device data it passes, the tensors it synced.
        "num_args": len(arguments),
        "num_outputs": extra["count"],
    })
    write_inputs_outputs(out_dir, case, [a.numpy() for a in arguments],
                         [o.numpy() for o in extra["outputs"]])
    if re.search(r"\brng[-(]", extra["hlo"]):
        case["run_skip"] = "the program uses XLA's rng op: its values differ between compilations"
    write_case_json(out_dir, case)
    return case_id, "ok"


def dump_case(out_root, model, kind, fill):
    """Writes the dump case ``xla-dump/torch_xla/MODEL/KIND`` whose ``dump`` folder `fill`
    fills; returns (case id, status)."""
    case_id = f"xla-dump/torch_xla/{model}/{kind}"
    out_dir = os.path.join(out_root, case_id)
    dump = os.path.join(out_dir, "dump")
    os.makedirs(dump, exist_ok=True)
    fill(dump)
    write_case_json(out_dir, {"source": "xla-dump", "kind": kind, "op": model,
                              "name": f"torch_xla/{model}/{kind}", "id": case_id,
                              "status": "ok", "format_version": FORMAT_VERSION,
                              "dump": "dump"})
    return case_id, "ok"


def model_task(args):
    """Runs one model's evaluation and training step under PyTorch/XLA and writes its cases;
    a run PyTorch/XLA fails is the case ``torch_xla/MODEL/RUN``, skipped with its reason."""
    index, out_root, sources = args
    name, build = models()[index]
    import torch
    import torch_xla
    import graphbug_capture.torch_xla as gx

    device = torch_xla.device()
    recording = capture_class()
    results = []
    for run in ("eval", "train"):
        try:
            torch.manual_seed(index)
            model, inputs, loss_fn = build()
            model = model.to(device).train(run == "train")
            inputs = [i.to(device) for i in inputs]
            step = {} if run == "eval" else {
                "optimizer": torch.optim.Adam(model.parameters(), lr=1e-2),
                "loss_fn": loss_fn, "sync": "phase"}
            original, gx.Capture = gx.Capture, recording
            try:
                capture = gx.capture_step(model, inputs, **step)
            finally:
                gx.Capture = original
        except Exception as e:  # noqa: BLE001 (PyTorch/XLA's own refusal is the reason)
            traceback.print_exc()
            case_id = f"torch_xla/{name}/{run}"
            skip_case(os.path.join(out_root, case_id), case_id,
                      {"source": "torch_xla", "kind": run, "op": name, "name": f"{name}/{run}"},
                      f"PyTorch/XLA fails on it: {first_line(e)}")
            results.append((case_id, "skipped"))
            continue
        for (module, proto, arguments), extra in zip(capture.modules, capture.extra):
            if "torch_xla" in sources:
                results.append(module_case(out_root, name, run, module, proto, arguments,
                                           extra))
        if run == "train" and "xla-dump" in sources:
            results.append(dump_case(out_root, name, "capture",
                                     lambda d, c=capture: c.write_dump(d, "torch_xla CPU")))
    # What XLA itself dumped of the whole run (this worker ran this model alone).
    xla_dump = os.environ[DUMP_ENV]
    programs = sorted(f for f in os.listdir(xla_dump) if f.endswith(".before_optimizations.txt"))
    if programs and "xla-dump" in sources:
        def copy(d):
            for f in programs:
                shutil.copy(os.path.join(xla_dump, f), d)
        results.append(dump_case(out_root, name, "xla_flags", copy))
    return results


def worker_init(parent, dump_root):
    """A worker of its own XLA dump directory, dying with the generator."""
    dump = os.path.join(dump_root, f"worker-{os.getpid()}")
    os.makedirs(dump, exist_ok=True)
    os.environ[DUMP_ENV] = dump
    # PyTorch/XLA records no HloSnapshots: the programs alone, as text.
    flags = f"--xla_dump_to={dump} --xla_dump_hlo_as_text"
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " " + flags).strip()
    os.environ.setdefault("PJRT_DEVICE", "CPU")
    die_with_parent(parent)


def run_models(tasks, jobs, dump_root):
    """Each model in a fresh worker process of its own (one task per worker, so that the XLA
    dump it leaves is that model's); a worker PyTorch/XLA kills is that model's skip."""
    counts = {"ok": 0, "skipped": 0}
    spawn = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(max_workers=jobs, mp_context=spawn,
                                                max_tasks_per_child=1,
                                                initializer=worker_init,
                                                initargs=(os.getpid(), dump_root)) as pool:
        futures = {pool.submit(model_task, t): t for t in tasks}
        for fut in concurrent.futures.as_completed(futures):
            index, out_root, _ = futures[fut]
            try:
                results = fut.result()
            except concurrent.futures.process.BrokenProcessPool:
                name = models()[index][0]
                case_id = f"torch_xla/{name}"
                # What the worker wrote before it died goes: the model is one skip.
                shutil.rmtree(os.path.join(out_root, "xla-dump", "torch_xla", name),
                              ignore_errors=True)
                skip_case(os.path.join(out_root, case_id), case_id,
                          {"source": "torch_xla", "kind": "model", "op": name, "name": name},
                          "PyTorch/XLA crashed (its process died)")
                results = [(case_id, "skipped")]
            for case_id, status in results:
                counts[status] += 1
                print(f"gen_torch_xla_cases: {case_id}: {status}", file=sys.stderr, flush=True)
    return counts


def print_protos(cases):
    """Writes module.pb.hlo, XLA's print of module.pb in JAX's style, for every PyTorch/XLA
    case under `cases` (run with JAX's environment)."""
    from gen_xla_cases import jax_modules

    corpus = jax_modules()["corpus"]
    n = 0
    for root, _dirs, files in os.walk(os.path.join(cases, "torch_xla")):
        if "module.pb" in files:
            with open(os.path.join(root, "module.pb"), "rb") as f:
                printed = corpus.print_proto(f.read())
            with open(os.path.join(root, "module.pb.hlo"), "w") as f:
                f.write(printed)
            n += 1
    print(f"gen_torch_xla_cases: {n} protos printed by XLA", file=sys.stderr)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default="target/conformance/cases")
    p.add_argument("--subset", choices=["ci", "full"], default="full",
                   help=f"ci: {', '.join(CI_MODELS)}; full: every model")
    p.add_argument("--filter", default=None,
                   help="regex over case ids (re.search): a model is run when it matches "
                   "one of its cases' ids (torch_xla/MODEL/eval/eval1, ..., "
                   "xla-dump/torch_xla/MODEL/xla_flags)")
    p.add_argument("--sources", default="torch_xla,xla-dump",
                   help="the cases to write: torch_xla (each module), xla-dump (each "
                   "model's dumps), or both")
    p.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 1)
    p.add_argument("--print-protos", metavar="CASES",
                   help="only write module.pb.hlo for the cases under CASES (with JAX)")
    a = p.parse_args(argv)
    if a.print_protos:
        print_protos(a.print_protos)
        return 0
    pattern = re.compile(a.filter) if a.filter else None
    sources = set(a.sources.split(","))
    unknown = sources - {"torch_xla", "xla-dump"}
    if unknown:
        p.error(f"unknown --sources {', '.join(sorted(unknown))} (known: torch_xla, xla-dump)")

    def wanted(name):
        # The ids a model's cases get (a step syncs its forward, backward and optimizer).
        ids = [f"torch_xla/{name}/{run}" for run in
               ("eval/eval1", "train/forward1", "train/backward1", "train/optimizer1")]
        ids += [f"xla-dump/torch_xla/{name}/{kind}" for kind in ("capture", "xla_flags")]
        return pattern is None or any(pattern.search(i) for i in ids)

    tasks = [(i, a.out, sorted(sources)) for i, (name, _) in enumerate(models())
             if (a.subset == "full" or name in CI_MODELS) and wanted(name)]
    for source, sub in (("torch_xla", "torch_xla"),
                        ("xla-dump", os.path.join("xla-dump", "torch_xla"))):
        if source in sources:
            shutil.rmtree(os.path.join(a.out, sub), ignore_errors=True)
    dump_root = os.path.join(a.out, ".torch_xla_dumps")
    shutil.rmtree(dump_root, ignore_errors=True)
    try:
        counts = run_models(tasks, max(1, a.jobs), dump_root)
    finally:
        shutil.rmtree(dump_root, ignore_errors=True)
    print(f"gen_torch_xla_cases: {counts['ok']} cases, {counts['skipped']} skipped by "
          f"PyTorch/XLA", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
