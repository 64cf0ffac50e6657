"""Hand the memory allocator's free pages back to the operating system between steps.

A CPU training step allocates and frees gigabytes of activations. glibc's malloc keeps freed
blocks in its heap for reuse, and since steps differ in size, the holes left by one step do
not always fit the next: the resident set of a process keeps growing for many steps past the
peak of its heaviest one (paper model, stage 100: 2.2 GB for the heaviest step of a fresh
process, 3.6 GB after 20 steps). ``malloc_trim(0)`` returns every whole free page of the heap
(``madvise(MADV_DONTNEED)``); the price is that the next step faults those pages in afresh.
On the development machine that cost 6 % of the step time when done after every step, and
2 % when done only after a step that left the process above a cap
(``training.release_memory_above_gb``; docs/performance.md, Trainer).

Only glibc has ``malloc_trim``; elsewhere (macOS, musl) this is a no-op. CUDA memory is
PyTorch's caching allocator's business and is not touched.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import os
import sys


@functools.lru_cache(maxsize=1)
def _malloc_trim():  # -> the C function, or None where the C library has none
    if not sys.platform.startswith("linux"):
        return None
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        trim = ctypes.CDLL(name).malloc_trim
    except (OSError, AttributeError):  # musl and other C libraries without it
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return trim


def can_release_freed_memory() -> bool:
    """Whether this platform's allocator can return freed heap pages (glibc)."""
    return _malloc_trim() is not None


def release_freed_memory() -> bool:
    """Return the heap's whole free pages to the system; True if any memory was returned.

    Cost: one walk over the heap's free lists (milliseconds), plus the page faults that the
    next allocations of those pages take.
    """
    trim = _malloc_trim()
    return bool(trim(0)) if trim is not None else False


def resident_bytes() -> int:
    """This process's resident set now (Linux ``/proc/self/statm``; 0 where unavailable)."""
    try:
        with open("/proc/self/statm") as handle:
            return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def peak_resident_bytes() -> int:
    """The peak resident set of this process so far (0 where the platform does not say)."""
    try:
        import resource
    except ImportError:  # Windows
        return 0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024  # bytes on macOS, KiB on Linux


def release_if_above(limit_gb: float | None) -> bool:
    """Return freed memory to the system if this process holds more than ``limit_gb`` GB
    (10^9 bytes; 0 = always, None = never); True if it did."""
    if limit_gb is None or resident_bytes() <= limit_gb * 1e9:
        return False
    return release_freed_memory()
