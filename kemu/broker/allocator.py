"""Keep glibc's heap from shrinking and regrowing around every large buffer.

A Fetch answer is built from buffers of about a megabyte (a read from the log, the encoded
response). glibc serves those from fresh mmaps or from the heap top, and returns the memory to
the kernel as soon as they are freed, so every Fetch paid for brk/munmap calls and for the kernel
zeroing the pages again: measured, two to three times the CPU of the whole Fetch. Letting the heap
keep up to ``KEEP_BYTES`` of freed memory makes those buffers reuse warm pages; resident memory
grows by at most that much.
"""

from __future__ import annotations

import ctypes

M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
KEEP_BYTES = 8 << 20


def keep_freed_memory(keep_bytes: int = KEEP_BYTES) -> bool:
    """Tune glibc's malloc; False (and no change) on other C libraries."""
    try:
        mallopt = ctypes.CDLL(None).mallopt  # the running process's C library
    except (OSError, AttributeError):
        return False  # not glibc
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    return bool(mallopt(M_MMAP_THRESHOLD, keep_bytes)) and bool(
        mallopt(M_TRIM_THRESHOLD, keep_bytes)
    )
