"""qfwd's QEC decoders from Python.

- ``Matching``: a drop-in for ``pymatching.Matching`` (``from qfwd import Matching``):
  ``from_detector_error_model``, ``from_stim_circuit``, ``from_check_matrix`` and the
  file forms; ``decode`` / ``decode_batch`` with PyMatching's shapes, dtypes and weights.
  Its decoder is ``qfwd.matching.DEFAULT_DECODER``: ``"matching"``, exact minimum-weight
  matching (PyMatching's answers in less time per shot); ``decoder="uf"`` for union-find
  (faster, with 1.06-1.24x its logical errors on surface codes at d = 5-11; see
  ``qfwd.matching``).
- ``Decoder(dem)`` / ``Decoder.from_detector_error_model(dem)``: the appliance's decoder of
  a Stim detector error model (a ``stim.DetectorErrorModel`` or its text, exported with
  ``decompose_errors=True``): union-find (``"uf"``, the default: it also runs on the GPU),
  exact matching (``"matching"``, CPU only) or lookup table (``"lut"``, at most 24
  detectors), with the appliance's request payloads; ``decode`` and ``decode_batch`` take
  numpy arrays of detection events, 0/1 or bit-packed (Stim's ``b8`` rows), and return the
  predicted observable flips.
- ``sinter_decoders()``: ``{"qfwd-matching": ..., "qfwd-uf": ..., "qfwd-lut": ...}`` for
  ``sinter.collect(custom_decoders=...)``.
- ``Client(host, port)``: the appliance's wire protocol (CUDA-Q Realtime RPC over UDP),
  ``decode(function, payload)``.

The decoding is Rust (the ``qfwd-decode`` crate), with the interpreter's lock released.
"""

from __future__ import annotations

import os
from typing import Any, Optional, Union

import numpy as np

from ._arrays import as_events, as_packed, pack_rows, thread_count
from ._qfwd import NativeDecoder, __version__
from .client import Client, Response, Status, function_id
from .matching import Matching
from .sinter_adapter import QfwdSinterDecoder, sinter_decoders

__all__ = [
    "Client",
    "Decoder",
    "Matching",
    "QfwdSinterDecoder",
    "Response",
    "Status",
    "__version__",
    "function_id",
    "sinter_decoders",
]


def _dem_text(dem: Any) -> str:
    if isinstance(dem, str):
        return dem
    if hasattr(dem, "num_detectors") and hasattr(dem, "flattened"):
        # A stim.DetectorErrorModel: its text is the model (repeat blocks are flattened by
        # the parser either way).
        return str(dem)
    raise TypeError(
        f"expected a stim.DetectorErrorModel or its text, got {type(dem).__name__}"
    )


class Decoder:
    """A decoder of one detector error model: the appliance's, with its request payloads.

    ``"uf"`` (the default, as on the GPU) is union-find, not minimum-weight matching:
    faster than PyMatching, with 1.06-1.24x its logical errors on surface codes at d = 5-11
    (more at larger distances; ``python/bench.py`` measures it). ``"matching"`` is exact
    minimum-weight matching, PyMatching's answers, on the CPU only (at most 64
    observables). ``"lut"`` is exact, for at most 24 detectors.

    Detection events are ``num_detectors`` bits per shot; predictions are
    ``num_observables`` bits per shot (any number of observables). Bit-packed arrays are
    little-endian within each byte (bit ``k`` of a shot is bit ``k % 8`` of byte
    ``k // 8``), as Stim's ``b8`` format and ``bit_packed=True`` samplers give them.
    """

    def __init__(
        self,
        dem: Union[str, Any],
        *,
        decoder: str = "uf",
        max_defects: Optional[int] = None,
        source: str = "<detector error model>",
    ):
        """Builds a decoder (``"uf"``, ``"matching"`` or ``"lut"``) of ``dem``, a
        ``stim.DetectorErrorModel`` or its text (``source`` names it in errors).
        ``max_defects`` is the appliance's request budget (``run_payload`` only; ``decode``
        and ``decode_batch`` decode every shot)."""
        if isinstance(dem, NativeDecoder):
            self._native = dem
        else:
            self._native = NativeDecoder(_dem_text(dem), decoder, source, max_defects)

    @classmethod
    def from_detector_error_model(
        cls,
        dem: Union[str, Any],
        *,
        decoder: str = "uf",
        max_defects: int | None = None,
    ) -> "Decoder":
        """Builds a decoder (``"uf"``, ``"matching"`` or ``"lut"``) of ``dem``, a
        ``stim.DetectorErrorModel`` or its text. ``max_defects`` is the appliance's request budget (``run_payload``
        only; ``decode`` and ``decode_batch`` decode every shot)."""
        return cls(dem, decoder=decoder, max_defects=max_defects)

    @classmethod
    def from_dem_file(cls, path: Union[str, os.PathLike], *, decoder: str = "uf") -> "Decoder":
        """Builds a decoder of the ``.dem`` file at ``path`` (errors name the file)."""
        with open(path, encoding="utf-8") as f:
            text = f.read()
        return cls(text, decoder=decoder, source=os.fspath(path))

    @property
    def num_detectors(self) -> int:
        return self._native.num_detectors

    @property
    def num_observables(self) -> int:
        return self._native.num_observables

    @property
    def num_edges(self) -> int:
        return self._native.num_edges

    @property
    def kind(self) -> str:
        return self._native.kind

    @property
    def max_defects(self) -> int:
        """The appliance's request budget for this model (0: none)."""
        return self._native.max_defects

    @property
    def expected_defects(self) -> float:
        """Mean detection events of a shot at the model's own noise."""
        return self._native.expected_defects

    def __repr__(self) -> str:
        return (
            f"qfwd.Decoder({self.kind}, {self.num_detectors} detectors, "
            f"{self.num_observables} observables, {self.num_edges} edges)"
        )

    def _pack(self, shots: Any, bit_packed: bool) -> np.ndarray:
        """``shots`` (2-D), checked, as contiguous uint8 rows of ``ceil(num_detectors / 8)``
        bytes."""
        nb = (self.num_detectors + 7) // 8
        if bit_packed:
            packed = as_packed(shots, "shots")
            if packed.ndim != 2 or packed.shape[1] != nb:
                raise ValueError(
                    f"bit-packed shots must have shape (num_shots, {nb}) for "
                    f"{self.num_detectors} detectors; got {packed.shape}"
                )
            return packed
        arr = as_events(shots, "shots")
        if arr.ndim != 2 or arr.shape[1] != self.num_detectors:
            raise ValueError(
                f"shots must have shape (num_shots, {self.num_detectors}); got {arr.shape}"
            )
        return pack_rows(arr, self.num_detectors)

    def _unpack(self, packed: np.ndarray, bit_packed: bool) -> np.ndarray:
        if bit_packed:
            return packed.copy()
        return np.unpackbits(
            packed, axis=1, count=self.num_observables, bitorder="little"
        )

    def _one(self, syndrome: Any, bit_packed: bool) -> np.ndarray:
        arr = as_packed(syndrome, "syndrome") if bit_packed else as_events(syndrome, "syndrome")
        if arr.ndim != 1:
            raise ValueError(f"one shot is a 1-D array; got shape {arr.shape}")
        return self._pack(arr[np.newaxis, :], bit_packed)[0]

    def decode(self, syndrome: Any, *, bit_packed: bool = False) -> np.ndarray:
        """The predicted observable flips of one shot: uint8 0/1 of ``num_observables``
        (``bit_packed``: the syndrome and the answer packed, ``ceil(n / 8)`` bytes each)."""
        packed = self._one(syndrome, bit_packed)
        out = np.frombuffer(self._native.decode(packed.tobytes()), dtype=np.uint8)
        return self._unpack(out[np.newaxis, :], bit_packed)[0]

    def decode_batch(
        self,
        shots: Any,
        *,
        bit_packed_shots: bool = False,
        bit_packed_predictions: bool = False,
        num_threads: int = 1,
    ) -> np.ndarray:
        """Decodes every row of ``shots``: ``(num_shots, num_detectors)`` of 0/1, or
        ``(num_shots, ceil(num_detectors / 8))`` uint8 with ``bit_packed_shots``. Returns
        ``(num_shots, num_observables)`` uint8 0/1, or ``(num_shots, ceil(num_observables /
        8))`` bit-packed with ``bit_packed_predictions`` (``pymatching.Matching.decode_batch``'s
        shapes). ``num_threads`` workers (at most the host's CPUs) share the shots."""
        threads = thread_count(num_threads)
        packed = self._pack(shots, bit_packed_shots)
        num_shots = packed.shape[0]
        raw = self._native.decode_batch(packed.tobytes(), threads)
        rb = (self.num_observables + 7) // 8
        out = np.frombuffer(raw, dtype=np.uint8).reshape(num_shots, rb)
        return self._unpack(out, bit_packed_predictions)

    def payload(self, syndrome: np.ndarray, *, bit_packed: bool = False) -> bytes:
        """The appliance's request argument for one shot: the packed syndrome, then the
        detector count (u32 little-endian)."""
        return self._native.payload(self._one(syndrome, bit_packed).tobytes())

    def run_payload(self, payload: bytes) -> tuple[int, bytes]:
        """What the appliance's decoder handler answers to ``payload``: ``(status,
        result)`` (status 0 ok, 1 bad argument, 2 over budget)."""
        return self._native.run_payload(payload)
