"""A check matrix as PyMatching 2.4's ``Matching.from_check_matrix`` reads it, turned into a
detector error model that ``qfwd``'s decoders build their graph from.

What PyMatching does, and so this: column ``j`` of ``check_matrix`` (rows = checks) is an
edge between its two rows, or from its one row to the boundary (a column of no 1 is
skipped, of three or more refused); its fault ids are the rows ``i`` with ``faults[i, j] =
1`` (by default ``{j}``); its weight is ``weights[j]`` (default 1.0). With ``repetitions =
T > 1`` the checks are measured ``T`` times: detector ``t * rows + i`` is check ``i`` in
round ``t``, every column is an edge in every round, and a timelike edge of weight
``timelike_weights[i]`` (no fault id) joins check ``i`` of round ``t`` to round ``t + 1``.
Parallel edges merge by ``merge_strategy``. ``use_virtual_boundary_node=False`` (the
default) names the boundary as node ``rows * T`` when some column has one 1.

The model holds probabilities, the decoders weights ``ln((1 - p) / p)``: weights are scaled
so the largest is ``_TOP_WEIGHT`` (matching is unchanged by a common factor; the quantized
weights keep their resolution), written as ``p = 1 / (1 + exp(w))``, and solution weights
are scaled back. ``error_probabilities`` and ``measurement_error_probabilities`` serve
PyMatching's ``add_noise`` only; they are checked and otherwise unused.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

# The largest weight after scaling, in nats: inside the decoders' quantized range (256 nats
# at 1/256 nat resolution) with room to spare.
_TOP_WEIGHT = 200.0
# Most fault ids (observables) the decoders hold.
_MAX_FAULT_IDS = 1 << 15

MERGE_STRATEGIES = ("disallow", "independent", "smallest-weight", "keep-original", "replace")


@dataclass
class CheckMatrixModel:
    text: str
    num_detectors: int
    num_fault_ids: int
    boundary_node: Optional[int]
    # Decoder weights = user weights * scale.
    scale: float


def _columns(matrix: Any, name: str) -> Tuple[int, int, np.ndarray, np.ndarray]:
    """``(rows, cols, indptr, indices)``: the matrix's 1s by column (CSC), every nonzero
    entry checked to be 1."""
    if hasattr(matrix, "tocsc"):  # a scipy.sparse matrix or array
        csc = matrix.tocsc(copy=True)
        csc.eliminate_zeros()
        csc.sort_indices()
        data = np.asarray(csc.data)
        if data.size and not np.all(data == 1):
            bad = data[data != 1][0].item()
            raise ValueError(f"`{name}` must hold only 0s and 1s; found {bad!r}")
        rows, cols = csc.shape
        return rows, cols, np.asarray(csc.indptr, dtype=np.int64), np.asarray(csc.indices)
    try:
        dense = np.asarray(matrix)
    except (ValueError, TypeError) as e:
        raise TypeError(f"`{name}` must be a 2-D 0/1 array or scipy.sparse matrix; {e}") from None
    if dense.ndim != 2:
        raise ValueError(f"`{name}` must be 2-D; got shape {dense.shape}")
    if dense.dtype.kind not in "biuf":
        raise TypeError(f"`{name}` must hold 0s and 1s; got dtype {dense.dtype}")
    ok = (dense == 0) | (dense == 1)
    if not ok.all():
        at = tuple(int(i) for i in np.argwhere(~ok)[0])
        raise ValueError(f"`{name}` must hold only 0s and 1s; found {dense[at].item()!r} at {at}")
    cols_of, rows_of = np.nonzero(dense.T)
    indptr = np.zeros(dense.shape[1] + 1, dtype=np.int64)
    np.cumsum(np.bincount(cols_of, minlength=dense.shape[1]), out=indptr[1:])
    return dense.shape[0], dense.shape[1], indptr, rows_of


def _per_item(value: Any, n: int, default: float, name: str, what: str) -> np.ndarray:
    """A float or a 1-D array of ``n`` floats (one per ``what``), as ``n`` finite floats."""
    if value is None:
        value = default
    if isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool):
        arr = np.full(n, float(value))
    else:
        try:
            arr = np.asarray(value, dtype=float)
        except (ValueError, TypeError):
            raise TypeError(f"`{name}` must be a float or a 1-D array of floats") from None
        if arr.shape != (n,):
            raise ValueError(
                f"`{name}` must be a float or have one entry per {what} ({n}); got shape "
                f"{arr.shape}"
            )
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"`{name}` must be finite; got {arr[~np.isfinite(arr)][0]}")
    return arr


def _merged(old: Tuple[float, Any], new: Tuple[float, Any], strategy: str, key) -> Tuple[float, Any]:
    if strategy == "disallow":
        a, b = key
        other = "the boundary" if b is None else f"node {b}"
        raise ValueError(
            f"an edge between node {a} and {other} is already in the graph "
            f'(merge_strategy="disallow")'
        )
    if strategy == "independent":
        # Independent mechanisms, p = p1 (1 - p2) + p2 (1 - p1), in weights (both >= 0);
        # the original's fault ids.
        a, b = old[0], new[0]
        w = min(a, b) + math.log1p(math.exp(-(a + b))) - math.log1p(math.exp(-abs(a - b)))
        return (w, old[1])
    if strategy == "smallest-weight":
        return new if new[0] < old[0] else old
    if strategy == "keep-original":
        return old
    return new  # replace


def check_matrix_model(
    check_matrix: Any,
    weights: Any,
    error_probabilities: Any,
    repetitions: Any,
    timelike_weights: Any,
    measurement_error_probabilities: Any,
    faults_matrix: Any,
    merge_strategy: str,
    use_virtual_boundary_node: bool,
    kwargs: Dict[str, Any],
) -> CheckMatrixModel:
    """The model of a check matrix (see the module docs); arguments as PyMatching's."""
    if check_matrix is None:
        check_matrix = kwargs.pop("H", None)
        if check_matrix is None:
            raise ValueError("No check_matrix provided")
    slw = kwargs.pop("spacelike_weights", None)
    if slw is not None and weights is not None:
        raise ValueError("give `weights` or `spacelike_weights` (its old name), not both")
    weights = slw if weights is None else weights
    mep = kwargs.pop("measurement_error_probability", None)
    if mep is not None and measurement_error_probabilities is not None:
        raise ValueError(
            "give `measurement_error_probabilities` or `measurement_error_probability` "
            "(its old name), not both"
        )
    if kwargs:
        raise NotImplementedError(
            f"from_check_matrix: keyword argument(s) {', '.join(sorted(kwargs))} are not "
            "offered by qfwd.Matching"
        )
    if merge_strategy not in MERGE_STRATEGIES:
        raise ValueError(
            f'Merge strategy "{merge_strategy}" not recognised; one of {", ".join(MERGE_STRATEGIES)}'
        )
    rows, cols, indptr, indices = _columns(check_matrix, "check_matrix")
    if faults_matrix is None:
        num_fault_ids = cols
        f_indptr, f_indices = np.arange(cols + 1, dtype=np.int64), np.arange(cols)
    else:
        num_fault_ids, f_cols, f_indptr, f_indices = _columns(faults_matrix, "faults_matrix")
        if f_cols != cols:
            raise ValueError(
                f"`faults_matrix` has {f_cols} columns; it needs one per column of the check "
                f"matrix ({cols})"
            )
    if num_fault_ids > _MAX_FAULT_IDS:
        raise ValueError(
            f"{num_fault_ids} fault ids; qfwd's decoders hold at most {_MAX_FAULT_IDS} (give a "
            "faults_matrix with a row per logical observable)"
        )
    w = _per_item(weights, cols, 1.0, "weights", "column")
    _per_item(None if error_probabilities is None else error_probabilities, cols, -1.0,
              "error_probabilities", "column")
    if repetitions is None:
        repetitions = 1
    if isinstance(repetitions, bool) or not isinstance(repetitions, (int, np.integer)) or repetitions < 1:
        raise ValueError(f"`repetitions` must be a positive integer; got {repetitions!r}")
    reps = int(repetitions)
    tw = np.zeros(rows)
    if reps > 1:
        tw = _per_item(timelike_weights, rows, 1.0, "timelike_weights", "row")
        mep = measurement_error_probabilities if mep is None else mep
        _per_item(mep, rows, -1.0, "measurement_error_probabilities", "row")
    counts = np.diff(indptr)
    if counts.size and counts.max() > 2:
        c = int(np.argmax(counts > 2))
        raise ValueError(
            f"`check_matrix` must contain at most two ones per column, but column {c} has "
            f"{int(counts[c])} ones."
        )
    if np.any(w < 0) or np.any(tw < 0):
        raise NotImplementedError(
            "negative edge weights (error probabilities above 0.5) are not offered by qfwd's "
            "decoders"
        )
    edges: Dict[Tuple[int, Optional[int]], Tuple[float, Any]] = {}

    def add(a: int, b: Optional[int], weight: float, faults: Any) -> None:
        key = (a, b) if b is None else (min(a, b), max(a, b))
        old = edges.get(key)
        edges[key] = (weight, faults) if old is None else _merged(old, (weight, faults), merge_strategy, key)

    col_rows: List[np.ndarray] = [indices[indptr[c]:indptr[c + 1]] for c in range(cols)]
    col_faults = [tuple(int(f) for f in f_indices[f_indptr[c]:f_indptr[c + 1]]) for c in range(cols)]
    for t in range(reps):
        shift = t * rows
        for c in range(cols):
            r = col_rows[c]
            if len(r) == 2:
                add(int(r[0]) + shift, int(r[1]) + shift, float(w[c]), col_faults[c])
            elif len(r) == 1:
                add(int(r[0]) + shift, None, float(w[c]), col_faults[c])
    for t in range(reps - 1):
        for i in range(rows):
            add(i + t * rows, i + (t + 1) * rows, float(tw[i]), ())
    num_detectors = rows * reps
    top = max((e[0] for e in edges.values()), default=0.0)
    scale = _TOP_WEIGHT / top if top > 0 else 1.0
    lines = []
    if num_detectors:
        lines.append(f"detector D{num_detectors - 1}")
    if num_fault_ids:
        lines.append(f"logical_observable L{num_fault_ids - 1}")
    has_boundary = False
    for (a, b), (weight, faults) in edges.items():
        p = 1.0 / (1.0 + math.exp(float(weight) * scale))
        ends = f"D{a}" if b is None else f"D{a} D{b}"
        has_boundary |= b is None
        obs = "".join(f" L{f}" for f in faults)
        lines.append(f"error({p!r}) {ends}{obs}")
    boundary = num_detectors if has_boundary and not use_virtual_boundary_node else None
    return CheckMatrixModel("\n".join(lines) + "\n", num_detectors, num_fault_ids, boundary, scale)
