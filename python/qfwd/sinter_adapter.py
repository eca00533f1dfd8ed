"""qfwd's decoders as sinter decoders: ``sinter.collect(..., decoders=["qfwd-matching"],
custom_decoders=qfwd.sinter_decoders())``.

sinter gives each task's detector error model (``decompose_errors=True``) to
``compile_decoder_for_dem`` and then bit-packed detection events, ``(shots,
ceil(detectors / 8))`` uint8, to ``decode_shots_bit_packed``, which returns bit-packed
predictions, ``(shots, ceil(observables / 8))`` uint8. The adapter holds only the decoder
kind, so sinter's worker processes can pickle it.
"""

from __future__ import annotations

from typing import Any, Dict

import numpy as np

try:  # sinter is optional: the classes stand alone where it is missing.
    import sinter as _sinter

    _DecoderBase: Any = _sinter.Decoder
    _CompiledBase: Any = _sinter.CompiledDecoder
except ImportError:  # pragma: no cover - exercised only without sinter
    _DecoderBase = object
    _CompiledBase = object


class _CompiledQfwd(_CompiledBase):
    def __init__(self, decoder: Any):
        self._decoder = decoder

    def decode_shots_bit_packed(
        self, *, bit_packed_detection_event_data: np.ndarray
    ) -> np.ndarray:
        return self._decoder.decode_batch(
            bit_packed_detection_event_data,
            bit_packed_shots=True,
            bit_packed_predictions=True,
        )


# The decoders sinter can collect with, by qfwd's names.
KINDS = ("matching", "uf", "lut")


class QfwdSinterDecoder(_DecoderBase):
    """A sinter ``Decoder`` for qfwd's ``"matching"``, ``"uf"`` or ``"lut"`` decoder.
    ``"matching"`` is exact minimum-weight matching: collected beside ``"pymatching"`` it
    shows the same errors, to sampling noise. ``"uf"`` is union-find, not minimum-weight:
    it shows more (1.06-1.24x on surface codes at d = 5-11, growing with distance), in
    less time."""

    def __init__(self, kind: str = "matching"):
        if kind not in KINDS:
            raise ValueError(f"unknown qfwd decoder {kind!r}; available: {', '.join(KINDS)}")
        self.kind = kind

    def compile_decoder_for_dem(self, *, dem: Any) -> _CompiledQfwd:
        from . import Decoder

        return _CompiledQfwd(Decoder.from_detector_error_model(dem, decoder=self.kind))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, QfwdSinterDecoder) and other.kind == self.kind

    def __hash__(self) -> int:
        return hash(("qfwd", self.kind))

    def __repr__(self) -> str:
        return f"qfwd.QfwdSinterDecoder({self.kind!r})"


def sinter_decoders() -> Dict[str, QfwdSinterDecoder]:
    """``{"qfwd-matching": ..., "qfwd-uf": ..., "qfwd-lut": ...}``: pass as
    ``sinter.collect(custom_decoders=...)``."""
    return {f"qfwd-{kind}": QfwdSinterDecoder(kind) for kind in KINDS}
