"""Returning the allocator's free pages to the system (trainer.heap), and the trainer's use
of it."""

from __future__ import annotations

import ctypes

import pytest

from trainer.heap import can_release_freed_memory, release_freed_memory, resident_bytes

from .conftest import SMOKE, run_inprocess


@pytest.mark.skipif(not can_release_freed_memory(), reason="needs glibc's malloc_trim")
def test_release_returns_the_free_pages_inside_the_heap() -> None:
    # 256 MiB in 64 KiB blocks (below glibc's mmap threshold: they live in the heap), each
    # touched; then all but the last are freed. The last one pins the top of the heap, so
    # glibc's own trimming of the top cannot return the freed 256 MiB: only a trim of the
    # heap's interior pages can, which is what the trainer relies on.
    libc = ctypes.CDLL(None)
    libc.malloc.restype = ctypes.c_void_p
    libc.malloc.argtypes = [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    block, count = 64 * 1024, 4096
    pointers = [libc.malloc(block) for _ in range(count)]
    try:
        assert all(pointers)
        for pointer in pointers:
            ctypes.memset(pointer, 1, block)
        for pointer in pointers[:-1]:
            libc.free(pointer)
        held = resident_bytes()
        assert release_freed_memory()
        returned = held - resident_bytes()
        assert returned > 0.75 * (count - 1) * block
    finally:
        libc.free(pointers[-1])


def test_training_releases_memory_above_the_configured_cap(
    smoke_shards, tmp_path, monkeypatch
) -> None:
    calls: list[int] = []
    monkeypatch.setattr("trainer.heap.release_freed_memory", lambda: calls.append(1) or True)
    text = SMOKE.read_text()
    assert "release_memory_above_gb: null" in text

    def run(name: str, cap: str) -> int:
        config = tmp_path / f"{name}.yaml"
        config.write_text(text.replace("release_memory_above_gb: null",
                                       f"release_memory_above_gb: {cap}"))
        before = len(calls)
        assert run_inprocess(tmp_path / name, smoke_shards, config=config, max_steps=3) == 0
        return len(calls) - before

    assert run("always", "0") == 3  # after every step
    assert run("above_the_process", "1000") == 0  # a 1 TB cap is never reached
    assert run("never", "null") == 0
