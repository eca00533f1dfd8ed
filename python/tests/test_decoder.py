"""qfwd.Decoder against PyMatching on Stim circuits, and its array shapes and errors."""

import numpy as np
import pymatching
import pytest
import stim

import qfwd
from conftest import repetition_circuit, sample, surface_circuit


def mistakes(predictions: np.ndarray, observables: np.ndarray) -> int:
    return int(np.any(predictions != observables, axis=1).sum())


@pytest.mark.parametrize(
    "distance,p,shots",
    [(3, 0.005, 40_000), (5, 0.005, 20_000), (5, 0.001, 40_000), (7, 0.005, 10_000)],
)
def test_uf_is_within_union_find_s_cost_of_matching(distance, p, shots):
    circuit = surface_circuit(distance, p)
    dem = circuit.detector_error_model(decompose_errors=True)
    dets, obs = sample(circuit, shots, seed=distance * 1000 + int(p * 1e4))
    ours = qfwd.Decoder.from_detector_error_model(dem).decode_batch(dets)
    theirs = pymatching.Matching.from_detector_error_model(dem).decode_batch(dets)
    assert ours.shape == theirs.shape == obs.shape
    m_ours, m_theirs = mistakes(ours, obs), mistakes(theirs, obs)
    # Union-find costs up to ~1.5x matching's logical errors at these points
    # (docs/decoders.md); allow sampling noise on small counts.
    assert m_ours <= 1.6 * m_theirs + 12, (m_ours, m_theirs)
    # And it is a decoder, not a guess: far fewer mistakes than predicting no flip.
    assert m_ours < 0.25 * mistakes(np.zeros_like(obs), obs) + 5
    # Most shots get the same answer as matching.
    assert np.mean(np.all(ours == theirs, axis=1)) > 0.99


def test_lut_matches_minimum_weight_on_a_small_code():
    circuit = repetition_circuit(3, 0.03)
    dem = circuit.detector_error_model(decompose_errors=True)
    dets, obs = sample(circuit, 20_000, seed=7)
    lut = qfwd.Decoder.from_detector_error_model(dem, decoder="lut")
    assert lut.kind == "lut" and lut.num_detectors <= 24
    ours = lut.decode_batch(dets)
    theirs = pymatching.Matching.from_detector_error_model(dem).decode_batch(dets)
    # Both minimum-weight; they differ only where weights tie or quantize differently.
    assert np.mean(np.all(ours == theirs, axis=1)) > 0.995
    assert abs(mistakes(ours, obs) - mistakes(theirs, obs)) <= 0.05 * mistakes(theirs, obs) + 10


def test_matching_is_the_appliance_s_exact_decoder_on_the_cpu():
    circuit = surface_circuit(5, 0.005, basis="x")
    dem = circuit.detector_error_model(decompose_errors=True)
    dets, obs = sample(circuit, 10_000, seed=21)
    dec = qfwd.Decoder(dem, decoder="matching")
    assert dec.kind == "matching"
    ours = dec.decode_batch(dets)
    # qfwd.Matching's default decoder, the same answers; PyMatching's but for ties.
    assert np.array_equal(ours, qfwd.Matching(dem).decode_batch(dets))
    theirs = pymatching.Matching.from_detector_error_model(dem).decode_batch(dets)
    assert np.mean(np.all(ours == theirs, axis=1)) > 0.999
    assert abs(mistakes(ours, obs) - mistakes(theirs, obs)) <= 5
    # The appliance's handler answers the same through its request payloads.
    for i in range(0, 10_000, 997):
        status, result = dec.run_payload(dec.payload(dets[i]))
        assert status == 0 and result[0] & 1 == ours[i, 0]


def test_packed_bool_single_and_threaded_answers_agree():
    circuit = surface_circuit(5, 0.005)
    dem = circuit.detector_error_model(decompose_errors=True)
    dec = qfwd.Decoder.from_detector_error_model(str(dem))
    dets, _ = sample(circuit, 3000, seed=11)
    packed, _ = sample(circuit, 3000, seed=11, bit_packed=True)
    assert dets.dtype == np.bool_ and packed.dtype == np.uint8
    base = dec.decode_batch(dets)
    assert base.dtype == np.uint8 and base.shape == (3000, dem.num_observables)
    assert np.array_equal(dec.decode_batch(dets.astype(np.uint8)), base)
    assert np.array_equal(dec.decode_batch(packed, bit_packed_shots=True), base)
    assert np.array_equal(dec.decode_batch(dets, num_threads=3), base)
    packed_out = dec.decode_batch(packed, bit_packed_shots=True, bit_packed_predictions=True)
    assert packed_out.shape == (3000, 1)
    assert np.array_equal(np.unpackbits(packed_out, axis=1, count=1, bitorder="little"), base)
    for i in range(0, 3000, 97):
        assert np.array_equal(dec.decode(dets[i]), base[i])
        assert np.array_equal(dec.decode(packed[i], bit_packed=True), packed_out[i])
    # The appliance's handler answers the same flips for the same shot.
    status, result = dec.run_payload(dec.payload(dets[5]))
    assert status == 0 and result == packed_out[5].tobytes()


def test_models_past_64_observables():
    circuit = surface_circuit(3, 0.01)
    text = str(circuit.detector_error_model(decompose_errors=True))
    dec = qfwd.Decoder.from_detector_error_model(text.replace(" L0", " L0 L100"))
    assert dec.num_observables == 101
    dets, _ = sample(circuit, 2000, seed=3)
    out = dec.decode_batch(dets)
    assert out.shape == (2000, 101)
    assert np.array_equal(out[:, 100], out[:, 0]) and out[:, 0].any()
    assert not out[:, 1:100].any()


def test_errors_are_clear():
    circuit = surface_circuit(3, 0.01)
    undecomposed = circuit.detector_error_model()
    with pytest.raises(ValueError, match="decompose_errors=True"):
        qfwd.Decoder.from_detector_error_model(undecomposed)
    with pytest.raises(ValueError, match=r"D4000000000 is past the largest supported"):
        qfwd.Decoder.from_detector_error_model("error(0.1) D4000000000 L0")
    with pytest.raises(ValueError, match="unknown decoder"):
        qfwd.Decoder.from_detector_error_model("error(0.1) D0 L0", decoder="mwpm")
    with pytest.raises(TypeError):
        qfwd.Decoder.from_detector_error_model(42)
    dec = qfwd.Decoder.from_detector_error_model(circuit.detector_error_model(decompose_errors=True))
    with pytest.raises(ValueError, match="shape"):
        dec.decode_batch(np.zeros((4, dec.num_detectors + 1), dtype=bool))
    with pytest.raises(ValueError, match="shape"):
        dec.decode_batch(np.zeros((4, 1), dtype=np.uint8), bit_packed_shots=True)
    assert "qfwd.Decoder(uf" in repr(dec)


def test_a_dem_file_and_its_budget(tmp_path):
    circuit = surface_circuit(5, 0.001)
    dem = circuit.detector_error_model(decompose_errors=True)
    path = tmp_path / "d5.dem"
    dem.to_file(path)
    dec = qfwd.Decoder.from_dem_file(path)
    assert dec.num_detectors == dem.num_detectors
    # The request budget: 6 x the expected defects + 24, the whole syndrome refused past it.
    assert dec.max_defects == int(np.ceil(6 * dec.expected_defects)) + 24
    everything = np.ones(dec.num_detectors, dtype=bool)
    assert dec.run_payload(dec.payload(everything)) == (2, b"")
    assert dec.decode(everything).shape == (1,)  # decode itself has no budget
    bad = dec.payload(everything)[:-1]
    assert dec.run_payload(bad)[0] == 1


def test_the_constructor_builds_a_working_decoder():
    circuit = surface_circuit(3, 0.01)
    dem = circuit.detector_error_model(decompose_errors=True)
    dets, _ = sample(circuit, 500, seed=9)
    want = qfwd.Decoder.from_detector_error_model(dem).decode_batch(dets)
    for dec in (qfwd.Decoder(dem), qfwd.Decoder(str(dem)), qfwd.Decoder(dem, decoder="uf")):
        assert dec.num_detectors == dem.num_detectors
        assert np.array_equal(dec.decode_batch(dets), want)
    with pytest.raises(TypeError, match="stim.DetectorErrorModel or its text"):
        qfwd.Decoder(42)
    with pytest.raises(ValueError, match="unknown decoder"):
        qfwd.Decoder(dem, decoder="nope")


def test_native_decode_refuses_a_syndrome_of_the_wrong_length():
    native = qfwd.NativeDecoder("error(0.1) D0 D20 L0\n", "uf")
    assert native.detector_bytes == 3
    assert native.decode(bytes(3)) == b"\x00"
    for wrong in (b"", b"\x00", bytes(4), bytes(1000)):
        with pytest.raises(ValueError, match=r"21 detectors is 3 bytes bit-packed; got"):
            native.decode(wrong)
    with pytest.raises(ValueError, match="whole number"):
        native.decode_batch(bytes(4))


@pytest.mark.parametrize(
    "bad",
    [["0", "1", "0"], [0, 2, 0], [0, -1, 0], [0, 0.5, 0], [0, float("nan"), 0],
     [0, float("inf"), 0], [None, 1, 0], [0j, 1, 0]],
)
def test_nonsense_detection_events_are_refused(bad):
    dec = qfwd.Decoder("error(0.1) D0 D1\nerror(0.1) D1 D2 L0\nerror(0.1) D2\n")
    with pytest.raises(ValueError, match="0s and 1s"):
        dec.decode(np.array(bad))
    with pytest.raises(ValueError, match="0s and 1s"):
        dec.decode_batch(np.array([bad, [0, 0, 0]]))


def test_packed_input_is_bytes_never_cast():
    dec = qfwd.Decoder("error(0.1) D0 D1\nerror(0.1) D1 D2 L0\nerror(0.1) D2\n")
    assert dec.decode_batch(np.array([[0b110]], dtype=np.int64), bit_packed_shots=True)[0, 0] == 1
    for bad, match in [
        (np.array([[6.0]]), "dtype float64"),
        (np.array([[True]]), "bit_packed_shots=False"),
        (np.array([[262]]), "0..255; found 262"),
        (np.array([[-1]]), "0..255; found -1"),
    ]:
        with pytest.raises(ValueError, match=match):
            dec.decode_batch(bad, bit_packed_shots=True)
    with pytest.raises(ValueError, match="dtype float64"):
        dec.decode(np.array([6.0]), bit_packed=True)


def test_threads_are_checked_and_capped_by_the_cores():
    from qfwd._arrays import host_cpus, thread_count

    assert thread_count(10_000) == host_cpus() and thread_count(1) == 1
    for bad, err in [(0, ValueError), (-3, ValueError), (2.5, TypeError), (True, TypeError),
                     ("4", TypeError)]:
        with pytest.raises(err, match="num_threads"):
            thread_count(bad)
    circuit = surface_circuit(3, 0.01)
    dec = qfwd.Decoder(circuit.detector_error_model(decompose_errors=True))
    dets, _ = sample(circuit, 200, seed=2)
    # 10 000 asked: as many workers as the host has CPUs, the same answers.
    assert np.array_equal(dec.decode_batch(dets, num_threads=10_000), dec.decode_batch(dets))
