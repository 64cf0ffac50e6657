"""The query path (puicl_model.passes.query_rows): the model's own forward over the layouts of a
cached context (puicl_model.net.backends.cached_context) agrees with the specification, a row's
probability is the same bytes whatever rows it is scored with, and a fitted classifier reuses its
contexts' caches without ever shipping or saving them."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
import torch

from puicl_model.net.backends import cached_context
from puicl_model.net.backends.cached_context import ContextCells
from puicl_model.net.batch import collate_tasks
from puicl_model.net.config import ModelConfig
from puicl_model.net.specification import PUICLSpecification
from puicl_model.passes import query_rows
from puicl_model.passes.query_rows import (
    QUERY_BLOCK_ROWS,
    ContextCaches,
    context_cache,
    query_block_rows,
    query_probabilities,
)


def specification_of(model) -> PUICLSpecification:
    spec = PUICLSpecification(model.config)
    spec.load_state_dict(model.state_dict())
    return spec.eval()


@pytest.mark.parametrize("written_out", [False, True], ids=["cpu-flash", "written-out"])
@pytest.mark.parametrize(("n_labeled", "n_pool", "n_features", "config"), [
    (12, 30, 3, None),
    (40, 90, 20, None),
    (7, 5, 1, ModelConfig(embed_dim=64, num_layers=4, num_heads=4, ff_dim=128)),
])
def test_query_rows_agree_with_the_specification(model_factory, n_labeled, n_pool, n_features,
                                                 config, written_out, monkeypatch) -> None:
    """Both ways across rows: the CPU's flash kernel, and the products a GPU takes (their
    context axis padded to whole vectors: 42, 130 and 12 context rows are not)."""
    if written_out:
        monkeypatch.setattr(cached_context, "_CPU_FLASH", None)
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


@pytest.mark.parametrize("n_features", [6, 16])
def test_a_row_scores_the_same_bytes_in_any_block_order_and_thread_count(model_factory,
                                                                         n_features) -> None:
    # 16 features: 17 columns, where the fused attention across features rounded a row by its
    # place in the block on a CPU
    model = model_factory()
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(300, n_features, generator=generator)
    cache = context_cache(model, x[:100], 40)
    rows = torch.randn(2 * QUERY_BLOCK_ROWS + 11, n_features, generator=generator)
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


def test_blocks_run_side_by_side_on_a_cpu_with_threads(model_factory, monkeypatch) -> None:
    """With torch on several threads the blocks run on as many threads of their own, each
    with torch on one thread, and torch's count is restored after; on one thread they run in
    the caller's thread. The bytes are those of one thread (the test above)."""
    import threading

    model = model_factory()
    generator = torch.Generator().manual_seed(1)
    cache = context_cache(model, torch.randn(120, 5, generator=generator), 50)
    rows = torch.randn(6 * QUERY_BLOCK_ROWS, 5, generator=generator)
    seen: list[tuple[int, int]] = []
    scored = query_rows._query_logits

    def recording(*args, **kwargs):
        seen.append((threading.get_ident(), torch.get_num_threads()))
        return scored(*args, **kwargs)

    monkeypatch.setattr(query_rows, "_query_logits", recording)
    previous = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        alone = query_probabilities(model, cache, rows)
        assert {ident for ident, _ in seen} == {threading.get_ident()}
        seen.clear()
        torch.set_num_threads(3)
        heard: list[int] = []
        together = query_probabilities(model, cache, rows, advance=heard.append)
        assert torch.get_num_threads() == 3
    finally:
        torch.set_num_threads(previous)
    assert len(seen) == 6 and {threads for _, threads in seen} == {1}
    assert threading.get_ident() not in {ident for ident, _ in seen}
    assert heard == [QUERY_BLOCK_ROWS] * 6
    assert torch.equal(together, alone)


def test_the_block_is_fixed_by_the_device_and_the_contexts_shape(model_factory) -> None:
    """32 rows off CUDA; on CUDA a power of two that keeps the scores within the budget, the
    same for every block next to one context, fewer rows next to a larger context."""
    model = model_factory()
    generator = torch.Generator().manual_seed(3)
    small = context_cache(model, torch.randn(100, 6, generator=generator), 40)
    large = context_cache(model, torch.randn(3000, 6, generator=generator), 40)
    assert query_block_rows(small, "cpu") == query_block_rows(large, "cpu") == QUERY_BLOCK_ROWS
    on_gpu = [query_block_rows(cache, torch.device("cuda", 0)) for cache in (small, large)]
    assert on_gpu[0] == query_rows.MAX_GPU_BLOCK_ROWS > on_gpu[1] > QUERY_BLOCK_ROWS
    assert on_gpu[1] & (on_gpu[1] - 1) == 0  # a power of two
    columns, heads, rows, _ = large.keys[0].shape
    assert 2 * 4 * columns * heads * (rows + 1) * on_gpu[1] <= query_rows.GPU_BLOCK_BYTES


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_a_row_scores_the_same_bytes_in_any_gpu_block(model_factory) -> None:
    """The GPU's large blocks keep the query path's promise: a row's bytes do not depend on
    the rows scored with it; and they are the CPU's to float32 rounding."""
    model = model_factory().to("cuda")
    generator = torch.Generator().manual_seed(5)
    x = torch.randn(400, 6, generator=generator)
    cache = context_cache(model, x[:200].cuda(), 80)
    block = query_block_rows(cache, "cuda")
    rows = torch.randn(block + 37, 6, generator=generator).cuda()
    together = query_probabilities(model, cache, rows)
    order = torch.randperm(len(rows), generator=generator).cuda()
    shuffled = query_probabilities(model, cache, rows[order])
    assert torch.equal(shuffled, together[order])
    for size in (1, 5):
        parts = torch.cat([query_probabilities(model, cache, rows[start:start + size])
                           for start in range(0, 40, size)])
        assert torch.equal(parts, together[:40]), size
    cpu_model = model_factory()
    cpu_cache = context_cache(cpu_model, x[:200], 80)
    torch.testing.assert_close(query_probabilities(cpu_model, cpu_cache, rows.cpu()),
                               together.cpu(), rtol=0, atol=2e-5)


def test_classifier_new_rows_are_batch_invariant(small_weights, table, rng) -> None:
    from puicl_model import PUICLClassifier

    X, s = table(rng, 30, 1500, 4)  # a chunked pool: rows join chunks by their values
    clf = PUICLClassifier(weights=small_weights, n_estimators=2, random_state=0).fit(X, s)
    x_new = rng.normal(size=(400, 4))
    whole = clf.predict_proba(x_new)
    order = rng.permutation(len(x_new))
    parts = np.vstack([clf.predict_proba(x_new[order][i:i + 33]) for i in range(0, 400, 33)])
    np.testing.assert_array_equal(parts, whole[order])


def test_the_context_forward_is_a_transductive_pass(model_factory) -> None:
    # the recording layout is a layout of the whole task: the model's forward over it gives
    # the specification's logits of the context's unlabeled rows
    model = model_factory()
    generator = torch.Generator().manual_seed(3)
    x = torch.randn(70, 5, generator=generator)
    x[:20] += 0.5
    cells = ContextCells(20)
    with torch.no_grad():
        got = model.cell_logits(model.embed(query_rows._task(x, 20), cells), cells)[0]
        expected = specification_of(model)(collate_tasks([x], [20]))[0]
    torch.testing.assert_close(got[20:], expected[20:], rtol=0, atol=2e-5)
    cache = cells.cache()
    # one record per block, the last one at the label column only
    assert len(cache.keys) == model.config.num_layers
    assert cache.keys[0].shape[:3] == (6, model.config.num_heads, 70)
    assert cache.keys[-1].shape[0] == 1
    assert cache.nbytes == sum(t.numel() * 4 for t in (cache.mean, cache.scale, *cache.keys,
                                                       *cache.values))


def test_context_caches_keep_to_their_budget_and_copies_start_empty(model_factory) -> None:
    model = model_factory()
    x = torch.randn(40, 3, generator=torch.Generator().manual_seed(1))
    cache = context_cache(model, x, 10)
    caches = ContextCaches(max_bytes=2 * cache.nbytes)
    for key in ("a", "b", "c"):
        caches.keep(key, cache)
    assert caches.get("a") is cache and caches.get("b") is cache and caches.get("c") is None
    assert caches.nbytes == 2 * cache.nbytes
    copy = pickle.loads(pickle.dumps(caches))
    assert len(copy) == 0 and copy.max_bytes == caches.max_bytes
    none = ContextCaches(max_bytes=0)
    none.keep("a", cache)
    assert len(none) == 0


def test_the_classifier_reuses_its_context_caches(small_weights, table, rng, monkeypatch,
                                                  tmp_path) -> None:
    from sklearn.base import clone

    from puicl_model import PUICLClassifier

    X, s = table(rng, 30, 1500, 4)  # a chunked pool: several contexts
    clf = PUICLClassifier(weights=small_weights, n_estimators=2, large_pool="chunks",
                          random_state=0).fit(X, s)
    x_new = rng.normal(size=(300, 4))
    built: list[int] = []
    original = query_rows.context_cache

    def counted(model, x, n_labeled):
        built.append(len(x))
        return original(model, x, n_labeled)

    monkeypatch.setattr(query_rows, "context_cache", counted)
    first = clf.predict_proba(x_new)
    n_contexts = len(built)
    assert n_contexts > 2 and len(clf.fitted_.contexts) == n_contexts
    # later calls, and other batches, build no context again: the same bytes
    np.testing.assert_array_equal(clf.predict_proba(x_new), first)
    np.testing.assert_array_equal(clf.predict_proba(x_new[::-1][:50]), first[::-1][:50])
    assert len(built) == n_contexts
    # without caches every call builds its contexts, to the same bytes
    clf.set_params(context_cache_bytes=0)
    np.testing.assert_array_equal(clf.predict_proba(x_new), first)
    assert len(built) == 2 * n_contexts
    # a budget for the largest context keeps one or a few, and scores the same bytes
    clf.set_params(context_cache_bytes=1 << 30)
    np.testing.assert_array_equal(clf.predict_proba(x_new), first)
    largest = max(cache.nbytes for cache in clf.fitted_.contexts._caches.values())
    clf.set_params(context_cache_bytes=largest)
    np.testing.assert_array_equal(clf.predict_proba(x_new), first)
    assert 1 <= len(clf.fitted_.contexts) < n_contexts
    # pickled (dask), cloned and saved copies carry no cache, and score the same bytes
    clf.set_params(context_cache_bytes=1 << 30)
    clf.predict_proba(x_new)
    sent = pickle.loads(pickle.dumps(clf))
    assert len(sent.fitted_.contexts) == 0
    np.testing.assert_array_equal(sent.predict_proba(x_new), first)
    assert clone(clf).get_params()["context_cache_bytes"] == 1 << 30
    clf.save(tmp_path / "saved")
    loaded = PUICLClassifier.load(tmp_path / "saved")
    assert not loaded.fitted_.contexts  # no store yet: made as rows are scored
    np.testing.assert_array_equal(loaded.predict_proba(x_new), first)
    # a new fit drops the caches of the old one (its chunked passes keep none)
    old = clf.fitted_.contexts
    clf.fit(X[::-1], s[::-1])
    assert clf.fitted_.contexts is not old and not clf.fitted_.contexts
