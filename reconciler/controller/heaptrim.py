"""Give the C heap's free pages back to the system after each cycle of `migplan run` (glibc's `malloc_trim`).

A cycle allocates and frees as much as the fleet's size: LIST pages, decoded JSON, the report's pages and packs.
CPython frees its small objects into its own arenas, but every buffer over 512 bytes (page bytes, big dicts and
lists, libgit2's buffers) comes from glibc's malloc, which keeps freed memory inside its heap: measured on
`migplan run` at 1,000 nodes x 8 GPUs, 16-22 MB of the heap was free between cycles and still resident
(docs/explanation/scale.md, "Where `migplan run`'s RSS is"). `malloc_trim(0)` returns the free pages of every
arena (glibc >= 2.8 releases whole free pages inside the heap too, not only its top), so what the process holds
between cycles is what it uses. It changes no value, only what stays resident; it costs a few milliseconds.

Linux with glibc only: elsewhere (macOS, musl, which has no `malloc_trim`, or a Python built without ctypes) the
release is a no-op. The pure core knows nothing of it; it is a process policy of the controller's shell, as the
collector's (gcpolicy.py).
"""

from __future__ import annotations

import sys
from collections.abc import Callable


def _glibc_malloc_trim() -> Callable[[int], int] | None:
    """glibc's `malloc_trim`, or None where the process has none (or no ctypes: an interpreter built without
    libffi, where the controller still runs, its heap left as malloc keeps it)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes
    except ImportError:
        return None
    try:
        trim = ctypes.CDLL(None).malloc_trim  # the process's own symbols: the C library it runs on
    except (OSError, AttributeError):
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return trim


_TRIM = _glibc_malloc_trim()


def trim_available() -> bool:
    """Whether this process can give free heap pages back (Linux with glibc)."""
    return _TRIM is not None


def release_free_heap() -> bool:
    """Return the C heap's free pages to the system; True when some memory was released."""
    if _TRIM is None:
        return False
    return bool(_TRIM(0))
