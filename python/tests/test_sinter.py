"""qfwd's decoders through sinter (its Decoder / CompiledDecoder API), beside PyMatching."""

import pickle

import numpy as np
import pytest
import sinter

import qfwd
from conftest import surface_circuit


def test_sinter_collects_with_qfwd_and_pymatching():
    tasks = [
        sinter.Task(circuit=surface_circuit(d, 0.005), json_metadata={"d": d})
        for d in (3, 5)
    ]
    decoders = ("qfwd-matching", "qfwd-uf", "pymatching")
    stats = sinter.collect(
        num_workers=1,
        tasks=tasks,
        decoders=list(decoders),
        custom_decoders=qfwd.sinter_decoders(),
        max_shots=20_000,
        max_errors=10_000,
        print_progress=False,
    )
    got = {(s.decoder, s.json_metadata["d"]): s for s in stats}
    assert set(got) == {(dec, d) for dec in decoders for d in (3, 5)}
    for d in (3, 5):
        exact, uf, theirs = (got[(dec, d)] for dec in decoders)
        assert exact.shots == uf.shots == theirs.shots == 20_000
        # sinter samples each decoder's shots apart: matching's errors are PyMatching's to
        # sampling noise (about 300 at d = 3, 200 at d = 5: 5 sigma is under 90).
        assert abs(exact.errors - theirs.errors) <= 5 * (2 * theirs.errors) ** 0.5 + 5, (
            d, exact.errors, theirs.errors)
        assert uf.errors <= 1.6 * theirs.errors + 12, (d, uf.errors, theirs.errors)
        assert exact.errors > 0 and uf.errors > 0


def test_adapter_is_picklable_and_compiles_bit_packed():
    assert set(qfwd.sinter_decoders()) == {"qfwd-matching", "qfwd-uf", "qfwd-lut"}
    for dec in qfwd.sinter_decoders().values():
        assert isinstance(dec, sinter.Decoder)
        assert pickle.loads(pickle.dumps(dec)) == dec
    assert qfwd.QfwdSinterDecoder() == qfwd.sinter_decoders()["qfwd-matching"]
    with pytest.raises(ValueError, match="available: matching, uf, lut"):
        qfwd.QfwdSinterDecoder("blossom")
    circuit = surface_circuit(3, 0.01)
    dem = circuit.detector_error_model(decompose_errors=True)
    sampler = circuit.compile_detector_sampler(seed=5)
    dets, _ = sampler.sample(500, separate_observables=True, bit_packed=True)
    for name in ("qfwd-matching", "qfwd-uf"):
        compiled = qfwd.sinter_decoders()[name].compile_decoder_for_dem(dem=dem)
        assert isinstance(compiled, sinter.CompiledDecoder)
        out = compiled.decode_shots_bit_packed(bit_packed_detection_event_data=dets)
        assert out.dtype == np.uint8 and out.shape == (500, 1)
