"""Whether a query row's score depends on its place in the block, on a device; and if it does,
the first operation whose output does.

The query path promises that a row's bytes do not depend on the rows scored with it: blocks are
fixed in shape (``puicl_model.passes.query_rows``). A kernel can still round a row differently
by where the row sits in the block (a reduction split by the tile's place, say). For each
context shape, a full block of random rows is scored, then the same rows rolled by ``k``
places; the rolled scores must equal the first ones rolled. Where they do not, every operation
of the two forwards is recorded (a ``TorchDispatchMode``) and the first output that differs,
aligned along its block axis, is named with its inputs' shapes.

    python -m speed.row_invariance --device cuda
    python -m speed.row_invariance --device cuda --block-rows 32   # the CPU's block on the GPU
"""

from __future__ import annotations

import argparse

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from puicl_model.net.config import ModelConfig
from puicl_model.net.model import PUICLModel
from puicl_model.passes.query_rows import _query_logits, context_cache, query_block_rows

SMALL = ModelConfig(embed_dim=32, num_layers=2, num_heads=4, ff_dim=48)  # the tests' model
# (labeled rows, context rows, features)
CONTEXTS = ((80, 200, 6), (30, 530, 4), (30, 1030, 4), (300, 1300, 16))


class _Recorder(TorchDispatchMode):
    """Every operation's name, its inputs' shapes and its first tensor output, in call order."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[str, list[tuple[int, ...]], torch.Tensor]] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        first = out[0] if isinstance(out, (tuple, list)) and out else out
        if isinstance(first, torch.Tensor) and first.is_floating_point():
            shapes = [tuple(a.shape) for a in args if isinstance(a, torch.Tensor)]
            self.calls.append((str(func), shapes, first.detach().clone()))
        return out


def _rolled(t: torch.Tensor, rows: int, k: int) -> torch.Tensor | None:
    """``t`` rolled by ``k`` along its first axis of ``rows`` entries (None: it has none)."""
    for dim, size in enumerate(t.shape):
        if size == rows:
            return t.roll(k, dims=dim)
    return None


def first_difference(model: PUICLModel, cache, x: torch.Tensor, k: int) -> str:
    """The first operation whose output, aligned along the block axis, differs after the roll."""
    records = []
    for rows in (x, x.roll(k, dims=0)):
        with _Recorder() as recorder:
            _query_logits(model, cache, rows)
        records.append(recorder.calls)
    for index, ((name, shapes, a), (_, _, b)) in enumerate(zip(*records, strict=True)):
        if a.shape == b.shape and torch.equal(a, b):
            continue  # not a function of the rows (a weight's view, say)
        aligned = _rolled(a, len(x), k)
        if aligned is not None and aligned.shape == b.shape and not torch.equal(aligned, b):
            diff = (aligned.double() - b.double()).abs().max().item()
            return f"op {index} {name} inputs {shapes}: max abs diff {diff:.2e}"
    return "no operation's aligned output differs"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m speed.row_invariance",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--block-rows", type=int, default=None,
                        help="rows a block (default: the device's, query_block_rows)")
    parser.add_argument("--shifts", default="1,37")
    args = parser.parse_args(argv)
    torch.manual_seed(0)
    models = {"small": PUICLModel(SMALL).eval().to(args.device),
              "default": PUICLModel(ModelConfig()).eval().to(args.device)}
    for labeled, rows, features in CONTEXTS:
        for name, model in models.items():
            generator = torch.Generator().manual_seed(rows)
            context = torch.randn(rows, features, generator=generator).to(args.device)
            cache = context_cache(model, context, labeled)
            block = args.block_rows or query_block_rows(cache, args.device)
            x = torch.randn(block, features, generator=generator).to(args.device)
            with torch.inference_mode():
                base = _query_logits(model, cache, x)
                for k in map(int, args.shifts.split(",")):
                    moved = _query_logits(model, cache, x.roll(k, dims=0))
                    same = torch.equal(moved, base.roll(k, dims=0))
                    line = (f"{name} model, context {rows} rows ({labeled} labeled) x "
                            f"{features}, block {block}, shift {k}: "
                            f"{'INVARIANT' if same else 'DEPENDS ON PLACE'}")
                    if not same:
                        line += "; " + first_difference(model, cache, x, k)
                    print(line, flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
