"""Checks and packing of the arrays the decoders take, shared by ``Decoder`` and
``Matching``.

Detection events are refused unless every value is 0 or 1 (bool, any integer dtype, or
floats that are exactly 0.0 / 1.0): a string, NaN, inf, -1, 2 or 0.5 is a mistake in the
caller's data, not a detection event. Bit-packed rows must be integers in 0..255; floats
and bools are refused rather than cast. ``num_threads`` must be a positive integer and is
capped at the host's CPUs.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np


def _first_bad(arr: np.ndarray, ok: np.ndarray) -> str:
    at = tuple(int(i) for i in np.argwhere(~ok)[0])
    index = at[0] if len(at) == 1 else at
    return f"{arr[at].item()!r} at index {index}"


def as_events(data: Any, what: str) -> np.ndarray:
    """``data`` as a numpy array of 0/1 values (bool or integer dtype), or ``ValueError``
    naming the first value that is not 0 or 1."""
    try:
        arr = np.asarray(data)
    except (ValueError, TypeError) as e:
        raise ValueError(f"{what} must be an array of 0s and 1s; {e}") from None
    if arr.dtype == np.bool_:
        return arr
    kind = arr.dtype.kind
    if kind == "u":
        if arr.size and arr.max() > 1:
            raise ValueError(
                f"{what} must hold only 0s and 1s (detection events); found "
                f"{_first_bad(arr, arr <= 1)}"
            )
        return arr
    if kind in "if":
        ok = (arr == 0) | (arr == 1)
        if not ok.all():
            raise ValueError(
                f"{what} must hold only 0s and 1s (detection events); found "
                f"{_first_bad(arr, ok)}"
            )
        return arr if kind == "i" else arr.astype(np.uint8)
    raise ValueError(
        f"{what} must be an array of 0s and 1s (bool or integers); got dtype {arr.dtype}"
    )


def as_packed(data: Any, what: str) -> np.ndarray:
    """``data`` as a C-contiguous uint8 array, if every value is an integer in 0..255; floats,
    bools and out-of-range values are refused with ``ValueError``, never cast."""
    arr = np.asarray(data)
    kind = arr.dtype.kind
    if kind not in "ui":
        hint = " (did you mean bit_packed_shots=False?)" if kind == "b" else ""
        raise ValueError(
            f"bit-packed {what} must be integers in 0..255 (uint8 bytes); got dtype "
            f"{arr.dtype}{hint}"
        )
    if arr.dtype != np.uint8 and arr.size:
        ok = (arr >= 0) & (arr <= 255)
        if not ok.all():
            raise ValueError(
                f"bit-packed {what} must be bytes in 0..255; found {_first_bad(arr, ok)}"
            )
    return np.ascontiguousarray(arr, dtype=np.uint8)


def pack_rows(events: np.ndarray, num_bits: int) -> np.ndarray:
    """2-D 0/1 ``events`` (checked by ``as_events``), their first ``num_bits`` columns packed
    LSB first into contiguous uint8 rows of ``ceil(num_bits / 8)`` bytes."""
    cols = events[:, :num_bits]
    if cols.dtype != np.bool_ and cols.dtype != np.uint8:
        cols = cols != 0
    return np.ascontiguousarray(np.packbits(cols, axis=1, bitorder="little"))


def check_padding(packed: np.ndarray, num_bits: int, what: str) -> None:
    """Refuses packed rows that set a bit at or past ``num_bits`` (past the graph's nodes)."""
    col = num_bits // 8
    if num_bits % 8 == 0 or packed.shape[1] <= col or packed.shape[0] == 0:
        return
    high = (0xFF << (num_bits % 8)) & 0xFF
    bad = np.nonzero(packed[:, col] & np.uint8(high))[0]
    if bad.size:
        row = int(bad[0])
        low = int(packed[row, col]) & high
        bit = 8 * col + (low & -low).bit_length() - 1
        raise ValueError(
            f"bit-packed {what}: row {row} sets bit {bit}, past the graph's {num_bits} nodes"
        )


def host_cpus() -> int:
    """The CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - non-Linux hosts
        return os.cpu_count() or 1


def thread_count(num_threads: Any) -> int:
    """``num_threads`` checked (a positive integer) and capped at the host's CPUs."""
    if isinstance(num_threads, (bool, np.bool_)) or not isinstance(
        num_threads, (int, np.integer)
    ):
        raise TypeError(f"num_threads must be a positive integer; got {num_threads!r}")
    if num_threads < 1:
        raise ValueError(f"num_threads must be at least 1; got {num_threads}")
    return min(int(num_threads), host_cpus())
