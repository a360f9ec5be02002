"""Keep freed memory in the process: an allocator setting that halves a DEQ step's time.

A training step allocates and frees many large tensors (tens of MB each for the TINY model at
batch 128). glibc's ``malloc`` serves such blocks with ``mmap`` and returns them with ``munmap``,
so every step pays the kernel to map and zero fresh pages again: on the 2-core CPU of this project
that was about half of a TINY step's time, spent in the kernel. Where memory comes from changes
no number, so this module is outside every job's cache key (:data:`i2o.compute.results.INERT`).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools

_M_TRIM_THRESHOLD = -1
_M_MMAP_MAX = -4


@functools.cache
def keep_freed_memory() -> bool:
    """Ask glibc (``mallopt``) to serve every block from the heap (``M_MMAP_MAX = 0``) and never
    give the heap back (``M_TRIM_THRESHOLD`` = 1 TiB), so that freed blocks are reused: the
    allocator setting that halves a DEQ step's time. The process's resident size then stays at
    its peak; peak memory itself is unchanged up to fragmentation. Applied once per process;
    ``False`` where the C library is not glibc."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    return bool(mallopt(_M_MMAP_MAX, 0)) and bool(mallopt(_M_TRIM_THRESHOLD, 2**30 - 1))
