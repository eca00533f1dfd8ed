"""qfwd's decoders through sinter (its Decoder / CompiledDecoder API), beside PyMatching."""

import pickle

import numpy as np
import sinter

import qfwd
from conftest import surface_circuit


def test_sinter_collects_with_qfwd_and_pymatching():
    tasks = [
        sinter.Task(circuit=surface_circuit(d, 0.005), json_metadata={"d": d})
        for d in (3, 5)
    ]
    stats = sinter.collect(
        num_workers=1,
        tasks=tasks,
        decoders=["qfwd-uf", "pymatching"],
        custom_decoders=qfwd.sinter_decoders(),
        max_shots=20_000,
        max_errors=10_000,
        print_progress=False,
    )
    got = {(s.decoder, s.json_metadata["d"]): s for s in stats}
    assert set(got) == {(dec, d) for dec in ("qfwd-uf", "pymatching") for d in (3, 5)}
    for d in (3, 5):
        ours, theirs = got[("qfwd-uf", d)], got[("pymatching", d)]
        assert ours.shots == theirs.shots == 20_000
        assert ours.errors <= 1.6 * theirs.errors + 12, (d, ours.errors, theirs.errors)
        assert ours.errors > 0


def test_adapter_is_picklable_and_compiles_bit_packed():
    dec = qfwd.sinter_decoders()["qfwd-lut"]
    assert isinstance(dec, sinter.Decoder)
    assert pickle.loads(pickle.dumps(dec)) == dec
    circuit = surface_circuit(3, 0.01)
    dem = circuit.detector_error_model(decompose_errors=True)
    compiled = qfwd.sinter_decoders()["qfwd-uf"].compile_decoder_for_dem(dem=dem)
    assert isinstance(compiled, sinter.CompiledDecoder)
    sampler = circuit.compile_detector_sampler(seed=5)
    dets, _ = sampler.sample(500, separate_observables=True, bit_packed=True)
    out = compiled.decode_shots_bit_packed(bit_packed_detection_event_data=dets)
    assert out.dtype == np.uint8 and out.shape == (500, 1)
