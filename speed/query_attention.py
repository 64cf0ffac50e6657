"""The query rows' attention across features, both ways side by side: PyTorch's fused kernel
(``scaled_dot_product_attention``) and the written-out batched products that the query path
takes on a CPU (``QueryCells._attend_columns``, where a row's bytes must not depend on its
place in the block). Seconds of ``query_probabilities`` of ``--rows`` new rows next to a
cached context of the bundled model, the two taking turns, best of ``--repeats``.

    python -m speed.query_attention --features 10,50 --threads 1
"""

from __future__ import annotations

import argparse
import time
from unittest.mock import patch

import torch
import torch.nn.functional as F

from puicl_model.net.backends import cached_context
from puicl_model.net.weights import bundled_weights_path, load_weights
from puicl_model.passes.query_rows import context_cache, query_probabilities


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m speed.query_attention",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--features", default="10,50")
    parser.add_argument("--context", type=int, default=1300, help="context rows (300 labeled)")
    parser.add_argument("--rows", type=int, default=4096)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    model = load_weights(bundled_weights_path()).eval()
    ways = {"fused kernel": F.scaled_dot_product_attention,
            "written-out products": cached_context.short_attention}
    print("| features | " + " | ".join(f"{way}, s" for way in ways) + " |")
    print("|---:|" + "---:|" * len(ways))
    for features in map(int, args.features.split(",")):
        generator = torch.Generator().manual_seed(features)
        cache = context_cache(model, torch.randn(args.context, features, generator=generator),
                              300)
        rows = torch.randn(args.rows, features, generator=generator)
        best = dict.fromkeys(ways, float("inf"))
        for _ in range(args.repeats):
            for way, attend in ways.items():
                with patch.object(cached_context.QueryCells, "_attend_columns",
                                  staticmethod(attend)):
                    began = time.perf_counter()
                    query_probabilities(model, cache, rows)
                    best[way] = min(best[way], time.perf_counter() - began)
        print(f"| {features} | " + " | ".join(f"{best[way]:.3f}" for way in ways) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
