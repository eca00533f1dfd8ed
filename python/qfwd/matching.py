"""``qfwd.Matching``: a drop-in for ``pymatching.Matching`` (PyMatching 2.4) on qfwd's
decoders, for what PyMatching scripts use: building from a Stim model, circuit or file or
from a check matrix; ``decode`` and ``decode_batch`` with their shapes, dtypes, bit-packed
forms and solution weights; ``num_detectors`` / ``num_edges`` / ``num_fault_ids`` /
``num_nodes`` / ``boundary``. Anything else of PyMatching's raises ``NotImplementedError``
naming it.

Which decoder answers is ``DEFAULT_DECODER``, or the ``decoder=`` keyword of every
constructor. The default is ``"matching"``: exact minimum-weight matching, PyMatching's
answers (on Stim's rotated surface-code memory experiments at p = 0.006, d = 5-11, within
1 % of its mistakes; the shots it answers otherwise are ties between corrections of equal
weight) in less time per shot. ``"uf"`` (union-find) is faster still but not
minimum-weight: 1.06-1.24x PyMatching's mistakes there, growing with distance
(``python/bench.py`` measures both). ``"lut"`` is exact for at most 24 detectors.

Solution weights (``return_weight(s)``) are the sum of ``ln((1 - p) / p)`` over the
correction's edges, as PyMatching's; ``matching`` gives the least one with each edge's
weight rounded to 1/256 nat (its internal resolution; a check matrix's weights are first
scaled so the largest is 200, so there it is 1/51200 of the largest), ``uf`` its own
correction's, unrounded. ``matching`` decodes a model of more than 64 fault ids (a wide
check matrix) in passes, one per 64 fault ids, each finding the same correction.

Inputs are checked as PyMatching checks them, and more strictly: detection events must be
0 or 1 (bool, integers, or floats that are exactly 0.0 / 1.0), bit-packed rows integers in
0..255, never cast; a syndrome of odd parity in a component without a boundary raises
``ValueError`` (no perfect matching exists), as PyMatching does.
"""

from __future__ import annotations

import os
from typing import Any, Optional, Set, Tuple, Union

import numpy as np

from ._arrays import as_events, as_packed, check_padding, pack_rows, thread_count
from ._check_matrix import check_matrix_model
from ._qfwd import NativeDecoder

# The decoder behind Matching when no `decoder=` is given: "matching" (exact minimum-weight
# matching), "uf" (union-find), "lut" (lookup table, at most 24 detectors), or any other
# name qfwd-decode's DecoderKind parses.
DEFAULT_DECODER = "matching"

_PathLike = Union[str, "os.PathLike[str]"]


def _is_stim(obj: Any, name: str) -> bool:
    t = type(obj)
    return t.__name__ == name and t.__module__.split(".")[0] == "stim"


def _no_correlations(enable_correlations: Any, where: str) -> None:
    if enable_correlations:
        raise NotImplementedError(
            f"{where}: enable_correlations=True (PyMatching's correlated matching) is not "
            "offered by qfwd.Matching"
        )


def _no_kwargs(kwargs: dict, where: str) -> None:
    if kwargs:
        raise NotImplementedError(
            f"{where}: keyword argument(s) {', '.join(sorted(kwargs))} are not offered by "
            "qfwd.Matching"
        )


def _not_offered(name: str, hint: str = ""):
    message = f"Matching.{name} is a PyMatching feature that qfwd.Matching does not offer"
    message += f"; {hint}" if hint else ""

    def method(*args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(message)

    method.__name__ = name
    method.__doc__ = f"Not offered: raises ``NotImplementedError``. {hint}"
    return method


class Matching:
    """A decoder of one matching graph, with ``pymatching.Matching``'s interface (see the
    module docs for what differs)."""

    def __init__(
        self,
        graph: Any = None,
        weights: Any = None,
        error_probabilities: Any = None,
        repetitions: Optional[int] = None,
        timelike_weights: Any = None,
        measurement_error_probabilities: Any = None,
        *,
        enable_correlations: bool = False,
        decoder: Optional[str] = None,
        **kwargs: Any,
    ):
        """As ``pymatching.Matching(graph, ...)``: ``graph`` a ``stim.DetectorErrorModel``,
        a ``stim.Circuit`` or a check matrix (then the other arguments as
        ``from_check_matrix``'s); no graph gives an empty one. ``decoder`` picks qfwd's
        decoder (default ``DEFAULT_DECODER``)."""
        _no_correlations(enable_correlations, "Matching")
        self._kind = DEFAULT_DECODER if decoder is None else decoder
        if graph is None:
            graph = kwargs.pop("H", None)
        if graph is None:
            self._load_text("", "<empty graph>")
            return
        if _is_stim(graph, "DetectorErrorModel") or _is_stim(graph, "Circuit"):
            _no_kwargs(kwargs, "Matching")
            if _is_stim(graph, "Circuit"):
                graph = graph.detector_error_model(decompose_errors=True)
            self._load_text(str(graph), "<detector error model>")
            return
        module = type(graph).__module__.split(".")[0]
        if module in ("networkx", "rustworkx", "retworkx"):
            raise NotImplementedError(
                f"Matching({module} graph) is a PyMatching feature that qfwd.Matching does not "
                "offer; build from a stim.DetectorErrorModel or a check matrix"
            )
        self.load_from_check_matrix(
            graph, weights, error_probabilities, repetitions, timelike_weights,
            measurement_error_probabilities, **kwargs,
        )

    def _load_text(self, text: str, source: str, *, scale: float = 1.0,
                   boundary_node: Optional[int] = None) -> None:
        self._native = NativeDecoder(text, self._kind, source, None, wide_matching=True)
        self._scale = scale
        self._boundary_node = boundary_node

    # Constructors.

    @classmethod
    def from_detector_error_model(
        cls, model: Any, *, enable_correlations: bool = False, decoder: Optional[str] = None
    ) -> "Matching":
        """The graph of a ``stim.DetectorErrorModel``: its graphlike errors (or the
        components of decomposed ones) become edges, parallel edges merge as independent
        mechanisms. A component of more than two detectors is refused with its line (export
        with ``decompose_errors=True``), where PyMatching drops it silently."""
        _no_correlations(enable_correlations, "from_detector_error_model")
        if not _is_stim(model, "DetectorErrorModel"):
            raise TypeError(
                f"'model' must be `stim.DetectorErrorModel`. Instead, got: {type(model)} "
                "(a path: from_detector_error_model_file)"
            )
        m = cls.__new__(cls)
        m._kind = DEFAULT_DECODER if decoder is None else decoder
        m._load_text(str(model), "<detector error model>")
        return m

    @classmethod
    def from_detector_error_model_file(
        cls, dem_path: _PathLike, *, enable_correlations: bool = False,
        decoder: Optional[str] = None,
    ) -> "Matching":
        """The graph of the ``.dem`` file at ``dem_path`` (errors name the file and line)."""
        _no_correlations(enable_correlations, "from_detector_error_model_file")
        with open(dem_path, encoding="utf-8") as f:
            text = f.read()
        m = cls.__new__(cls)
        m._kind = DEFAULT_DECODER if decoder is None else decoder
        m._load_text(text, os.fspath(dem_path))
        return m

    @classmethod
    def from_stim_circuit(
        cls, circuit: Any, *, enable_correlations: bool = False, decoder: Optional[str] = None
    ) -> "Matching":
        """The graph of ``circuit.detector_error_model(decompose_errors=True)``."""
        _no_correlations(enable_correlations, "from_stim_circuit")
        if not _is_stim(circuit, "Circuit"):
            raise TypeError(f"`circuit` must be a `stim.Circuit`. Instead, got {type(circuit)}")
        return cls.from_detector_error_model(
            circuit.detector_error_model(decompose_errors=True), decoder=decoder
        )

    @classmethod
    def from_stim_circuit_file(
        cls, stim_circuit_path: _PathLike, *, enable_correlations: bool = False,
        decoder: Optional[str] = None,
    ) -> "Matching":
        """The graph of the Stim circuit file at ``stim_circuit_path`` (needs ``stim``)."""
        _no_correlations(enable_correlations, "from_stim_circuit_file")
        try:
            import stim
        except ImportError:  # pragma: no cover - stim is installed wherever tests run
            raise ImportError(
                "from_stim_circuit_file needs the `stim` package: pip install stim"
            ) from None
        circuit = stim.Circuit.from_file(os.fspath(stim_circuit_path))
        return cls.from_stim_circuit(circuit, decoder=decoder)

    @classmethod
    def from_check_matrix(
        cls,
        check_matrix: Any,
        weights: Any = None,
        error_probabilities: Any = None,
        repetitions: Optional[int] = None,
        timelike_weights: Any = None,
        measurement_error_probabilities: Any = None,
        *,
        faults_matrix: Any = None,
        merge_strategy: str = "smallest-weight",
        use_virtual_boundary_node: bool = False,
        decoder: Optional[str] = None,
        **kwargs: Any,
    ) -> "Matching":
        """The graph of a check matrix (numpy array, list of lists or scipy.sparse; a 1
        where check ``i`` sees fault ``j``), as PyMatching builds it: each column an edge of
        weight ``weights[j]`` (default 1.0) with fault ids ``{j}``, or the rows of
        ``faults_matrix`` that column ``j`` flips; ``repetitions`` rounds joined by
        timelike edges of ``timelike_weights``; parallel edges merged by ``merge_strategy``.
        Negative weights raise ``NotImplementedError``."""
        m = cls.__new__(cls)
        m._kind = DEFAULT_DECODER if decoder is None else decoder
        m.load_from_check_matrix(
            check_matrix, weights, error_probabilities, repetitions, timelike_weights,
            measurement_error_probabilities, faults_matrix=faults_matrix,
            merge_strategy=merge_strategy, use_virtual_boundary_node=use_virtual_boundary_node,
            **kwargs,
        )
        return m

    def load_from_check_matrix(
        self,
        check_matrix: Any = None,
        weights: Any = None,
        error_probabilities: Any = None,
        repetitions: Optional[int] = None,
        timelike_weights: Any = None,
        measurement_error_probabilities: Any = None,
        *,
        faults_matrix: Any = None,
        merge_strategy: str = "smallest-weight",
        use_virtual_boundary_node: bool = False,
        **kwargs: Any,
    ) -> None:
        """Replaces the graph with that of a check matrix (see ``from_check_matrix``)."""
        if not hasattr(self, "_kind"):
            self._kind = DEFAULT_DECODER
        model = check_matrix_model(
            check_matrix, weights, error_probabilities, repetitions, timelike_weights,
            measurement_error_probabilities, faults_matrix, merge_strategy,
            use_virtual_boundary_node, dict(kwargs),
        )
        self._load_text(model.text, "<check matrix>", scale=model.scale,
                        boundary_node=model.boundary_node)
        if self._native.num_observables != model.num_fault_ids:  # pragma: no cover
            raise AssertionError("check-matrix model lost fault ids")

    # Sizes.

    @property
    def num_detectors(self) -> int:
        """Nodes that can hold a detection event (boundary nodes excluded)."""
        return self._native.num_detectors

    @property
    def num_nodes(self) -> int:
        """Detectors plus boundary nodes."""
        return self.num_detectors + (self._boundary_node is not None)

    @property
    def num_edges(self) -> int:
        """Edges of the graph, parallel edges merged, boundary edges included."""
        return self._native.num_edges

    @property
    def num_fault_ids(self) -> int:
        """Length of a prediction: the model's observables, or the fault ids of a check
        matrix (its columns, or the rows of ``faults_matrix``)."""
        return self._native.num_observables

    @property
    def boundary(self) -> Set[int]:
        """The boundary nodes: ``{num_detectors}`` for a check matrix with boundary edges
        and ``use_virtual_boundary_node=False``, else none."""
        return set() if self._boundary_node is None else {self._boundary_node}

    @property
    def decoder(self) -> str:
        """qfwd's decoder behind this graph (``"matching"``, ``"uf"``, ``"lut"``, ...)."""
        return self._native.kind

    def __repr__(self) -> str:
        nb = len(self.boundary)
        return (
            f"<qfwd.Matching object with {self.num_detectors} detector"
            f"{'' if self.num_detectors == 1 else 's'}, {nb} boundary node"
            f"{'' if nb == 1 else 's'}, and {self.num_edges} edge"
            f"{'' if self.num_edges == 1 else 's'}; decoder {self.decoder}>"
        )

    # Decoding.

    def _unpack(self, raw: bytes) -> np.ndarray:
        return np.unpackbits(
            np.frombuffer(raw, dtype=np.uint8), count=self.num_fault_ids, bitorder="little"
        )

    def _check_matchable(self, packed: bytes, one_shot: bool) -> None:
        if not self._native.closed_components:
            return
        hit = self._native.first_unmatchable(packed)
        if hit is not None:
            shot, node = hit
            where = "" if one_shot else f" (shot {shot})"
            raise ValueError(
                f"No perfect matching could be found{where}: the syndrome has odd parity in "
                f"the connected component of node {node}, which has no boundary."
            )

    def decode(
        self, z: Any, *, return_weight: bool = False, enable_correlations: bool = False,
        **kwargs: Any,
    ) -> Union[np.ndarray, Tuple[np.ndarray, float]]:
        """The correction of one syndrome: uint8 0/1 of ``num_fault_ids`` (and its weight,
        the sum of its edges' weights, with ``return_weight``; ``matching``: its edges' weights as
        it rounds them, see the module docs). ``z`` holds 0s and 1s: 1-D
        of ``num_detectors`` (up to ``num_nodes``; boundary nodes' entries are ignored), or
        2-D ``(checks, rounds)`` for a check matrix with repetitions (``z[i, t]`` is node
        ``t * checks + i``)."""
        _no_correlations(enable_correlations, "decode")
        _no_kwargs(kwargs, "decode")
        arr = as_events(z, "syndrome z")
        nd = self.num_detectors
        if arr.ndim == 1 and nd <= arr.shape[0] <= self.num_nodes:
            row = arr
        elif arr.ndim == 2 and arr.shape[0] * arr.shape[1] == nd:
            row = arr.T.reshape(-1)
        else:
            raise ValueError(
                f"The shape ({arr.shape}) of the syndrome vector z is not valid: a 1-D "
                f"syndrome has {nd} entries (up to {self.num_nodes} with boundary nodes), a "
                f"2-D one (checks, rounds) {nd} in all"
            )
        packed = pack_rows(row[np.newaxis, :], nd).tobytes()
        self._check_matchable(packed, one_shot=True)
        if return_weight:
            raw, weight = self._native.decode_weighted(packed)
            return self._unpack(raw), weight / self._scale
        return self._unpack(self._native.decode(packed))

    def _batch_rows(self, shots: Any, bit_packed: bool) -> np.ndarray:
        """``shots`` checked and packed: contiguous uint8 rows of ``ceil(num_detectors / 8)``."""
        nd, nn = self.num_detectors, self.num_nodes
        arr = as_packed(shots, "shots") if bit_packed else as_events(shots, "shots")
        if arr.ndim != 2:
            raise ValueError(f"`shots` array should have two dimensions, not {arr.ndim}")
        if bit_packed:
            lo, hi = (nd + 7) // 8, (nn + 7) // 8
            if not lo <= arr.shape[1] <= hi:
                raise ValueError(
                    f"bit_packed `shots` array should have at least {lo} columns "
                    f"(ceil(num_detectors/8)) and at most {hi} (ceil(num_nodes/8)); it has "
                    f"{arr.shape[1]}"
                )
            check_padding(arr, nn, "shots")
            return np.ascontiguousarray(arr[:, :lo])
        if not nd <= arr.shape[1] <= nn:
            raise ValueError(
                f"`shots` array should have at least {nd} columns (the number of detectors) "
                f"and no more than {nn} (the number of nodes); it has {arr.shape[1]}"
            )
        return pack_rows(arr, nd)

    def decode_batch(
        self,
        shots: Any,
        *,
        return_weights: bool = False,
        bit_packed_shots: bool = False,
        bit_packed_predictions: bool = False,
        enable_correlations: bool = False,
        num_threads: int = 1,
    ) -> Union[np.ndarray, Tuple[np.ndarray, np.ndarray]]:
        """Decodes every row of ``shots``, ``(num_shots, num_detectors)`` of 0/1 (up to
        ``num_nodes`` columns), or ``(num_shots, ceil(num_detectors / 8))`` uint8 with
        ``bit_packed_shots`` (LSB first, Stim's ``b8``). Returns ``(num_shots,
        num_fault_ids)`` uint8, or ``(num_shots, ceil(num_fault_ids / 8))`` with
        ``bit_packed_predictions``; and the solutions' weights (float64) with
        ``return_weights``. ``num_threads`` (qfwd's; at most the host's CPUs) share the
        shots."""
        _no_correlations(enable_correlations, "decode_batch")
        threads = thread_count(num_threads)
        rows = self._batch_rows(shots, bit_packed_shots)
        num_shots, nf = rows.shape[0], self.num_fault_ids
        if self.num_detectors == 0:
            raw, weights = bytes(num_shots * ((nf + 7) // 8)), np.zeros(num_shots)
        else:
            packed = rows.tobytes()
            self._check_matchable(packed, one_shot=False)
            if return_weights:
                raw, wb = self._native.decode_batch_weighted(packed, threads)
                weights = np.frombuffer(wb, dtype="<f8") / self._scale
            else:
                raw, weights = self._native.decode_batch(packed, threads), None
        out = np.frombuffer(raw, dtype=np.uint8).reshape(num_shots, (nf + 7) // 8)
        if bit_packed_predictions:
            out = out.copy()
        else:
            out = np.unpackbits(out, axis=1, count=nf, bitorder="little")
        return (out, weights) if return_weights else out

    # PyMatching features not offered (each raises NotImplementedError naming itself).

    _graph_hint = "build the graph with from_check_matrix or from a stim model or circuit"
    add_edge = _not_offered("add_edge", _graph_hint)
    add_boundary_edge = _not_offered("add_boundary_edge", _graph_hint)
    set_boundary_nodes = _not_offered("set_boundary_nodes", _graph_hint)
    ensure_num_fault_ids = _not_offered("ensure_num_fault_ids", "give a faults_matrix")
    add_noise = _not_offered("add_noise", "sample with stim")
    edges = _not_offered("edges")
    has_edge = _not_offered("has_edge")
    has_boundary_edge = _not_offered("has_boundary_edge")
    get_edge_data = _not_offered("get_edge_data")
    get_boundary_edge_data = _not_offered("get_boundary_edge_data")
    draw = _not_offered("draw")
    decode_to_edges_array = _not_offered("decode_to_edges_array")
    decode_to_matched_dets_array = _not_offered("decode_to_matched_dets_array")
    decode_to_matched_dets_dict = _not_offered("decode_to_matched_dets_dict")
    from_networkx = staticmethod(_not_offered("from_networkx", _graph_hint))
    from_retworkx = staticmethod(_not_offered("from_retworkx", _graph_hint))
    from_rustworkx = staticmethod(_not_offered("from_rustworkx", _graph_hint))
    load_from_networkx = _not_offered("load_from_networkx", _graph_hint)
    load_from_retworkx = _not_offered("load_from_retworkx", _graph_hint)
    load_from_rustworkx = _not_offered("load_from_rustworkx", _graph_hint)
    to_networkx = _not_offered("to_networkx")
    to_retworkx = _not_offered("to_retworkx")
    to_rustworkx = _not_offered("to_rustworkx")
    del _graph_hint
