"""The query path (puicl_model.passes.query_rows): new rows scored over a cached context agree with
the
specification, and a row's probability is the same bytes whatever rows it is scored with."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from puicl_model.net.batch import collate_tasks
from puicl_model.net.config import ModelConfig
from puicl_model.net.specification import PUICLSpecification
from puicl_model.passes.query_rows import QUERY_BLOCK_ROWS, context_cache, query_probabilities


def specification_of(model) -> PUICLSpecification:
    spec = PUICLSpecification(model.config)
    spec.load_state_dict(model.state_dict())
    return spec.eval()


@pytest.mark.parametrize(("n_labeled", "n_pool", "n_features", "config"), [
    (12, 30, 3, None),
    (40, 90, 20, None),
    (7, 5, 1, ModelConfig(embed_dim=64, num_layers=4, num_heads=4, ff_dim=128)),
])
def test_query_rows_agree_with_the_specification(model_factory, n_labeled, n_pool, n_features,
                                                 config) -> None:
    model = model_factory() if config is None else model_factory(config)
    generator = torch.Generator().manual_seed(n_pool)
    x = torch.randn(n_labeled + n_pool + 37, n_features, generator=generator)
    x[:n_labeled] += 0.7
    x[-5:] *= 50.0  # far outside the labeled rows: clipped standardized values
    context = n_labeled + n_pool
    with torch.no_grad():
        logits = specification_of(model)(collate_tasks([x], [n_labeled], [context]))
    expected = torch.softmax(logits[0, context:], dim=-1)[:, 1]
    cache = context_cache(model, x[:context], n_labeled)
    got = query_probabilities(model, cache, x[context:], block_rows=16)
    torch.testing.assert_close(got, expected, rtol=0, atol=2e-5)
    assert got.std() > 1e-3  # the rows were told apart: the comparison compares something


def test_a_row_scores_the_same_bytes_in_any_block_order_and_thread_count(model_factory) -> None:
    model = model_factory()
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(300, 6, generator=generator)
    cache = context_cache(model, x[:100], 40)
    rows = torch.randn(2 * QUERY_BLOCK_ROWS + 11, 6, generator=generator)
    alone = torch.cat([query_probabilities(model, cache, row[None]) for row in rows])
    order = torch.randperm(len(rows), generator=generator)
    previous = torch.get_num_threads()
    try:
        for threads in (1, 2, 3):
            torch.set_num_threads(threads)
            for size in (1, 7, QUERY_BLOCK_ROWS, len(rows)):
                shuffled = rows[order]
                parts = [query_probabilities(model, cache, shuffled[start:start + size])
                         for start in range(0, len(rows), size)]
                assert torch.equal(torch.cat(parts), alone[order]), (threads, size)
    finally:
        torch.set_num_threads(previous)
    # and the context's statistics decide: another context gives other scores
    other = context_cache(model, x[100:200], 40)
    assert not torch.equal(query_probabilities(model, other, rows), alone)


def test_classifier_new_rows_are_batch_invariant(small_weights, table, rng) -> None:
    from puicl_model import PUICLClassifier

    X, s = table(rng, 30, 1500, 4)  # a chunked pool: rows join chunks by their values
    clf = PUICLClassifier(weights=small_weights, n_estimators=2, random_state=0).fit(X, s)
    x_new = rng.normal(size=(400, 4))
    whole = clf.predict_proba(x_new)
    order = rng.permutation(len(x_new))
    parts = np.vstack([clf.predict_proba(x_new[order][i:i + 33]) for i in range(0, 400, 33)])
    np.testing.assert_array_equal(parts, whole[order])
