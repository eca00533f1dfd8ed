"""qfwd.Matching as a drop-in for pymatching.Matching: PyMatching scripts run unchanged but
for the import, the graphs have PyMatching's sizes, answers and weights are PyMatching's
(but for ties between corrections of equal weight, and qfwd's rounding of edge weights to
1/256 nat), union-find's are valid corrections never lighter, inputs are checked, and what
is not offered says so."""

import textwrap

import numpy as np
import pymatching
import pytest
import stim
from scipy.sparse import csc_matrix

import qfwd
import qfwd.matching
from qfwd import Matching
from conftest import repetition_circuit, sample, surface_circuit

# A typical PyMatching script: a Stim memory experiment decoded in a batch, then a check
# matrix (a repetition code with noisy measurements, as PyMatching's docs build one).
SCRIPT = textwrap.dedent(
    """
    import numpy as np
    import stim
    from scipy.sparse import csc_matrix
    from pymatching import Matching

    circuit = stim.Circuit.generated(
        "surface_code:rotated_memory_x", distance=5, rounds=5,
        after_clifford_depolarization=0.008, before_measure_flip_probability=0.008)
    matching = Matching.from_stim_circuit(circuit)
    sampler = circuit.compile_detector_sampler(seed=1234)
    syndrome, actual_observables = sampler.sample(shots=20000, separate_observables=True)
    predicted_observables = matching.decode_batch(syndrome)
    num_errors = np.sum(np.any(predicted_observables != actual_observables, axis=1))

    n, rounds, p, q = 9, 9, 0.1, 0.06
    H = csc_matrix(np.eye(n - 1, n, dtype=np.uint8) + np.eye(n - 1, n, 1, dtype=np.uint8))
    rep = Matching(H, weights=np.log((1 - p) / p), repetitions=rounds,
                   timelike_weights=np.log((1 - q) / q), faults_matrix=np.ones((1, n)))
    rng = np.random.default_rng(5)
    rep_errors = 0
    rep_predictions = []
    for shot in range(2000):
        noise = (rng.random((n, rounds)) < p).astype(np.uint8)
        cumulative = np.cumsum(noise, 1) % 2
        syndrome_rounds = H @ cumulative % 2
        syndrome_rounds[:, :-1] ^= (rng.random((n - 1, rounds - 1)) < q).astype(np.uint8)
        syndrome_rounds[:, 1:] = syndrome_rounds[:, :-1] ^ syndrome_rounds[:, 1:]
        correction = rep.decode(syndrome_rounds)
        rep_predictions.append(correction[0])
        rep_errors += int(correction[0] != cumulative[:, -1].sum() % 2)
    """
)


def run_script(module: str) -> dict:
    source = SCRIPT if module == "pymatching" else SCRIPT.replace(
        "from pymatching import Matching", f"from {module} import Matching"
    )
    assert source.count(f"from {module} import Matching") == 1
    namespace: dict = {}
    exec(compile(source, f"<script with {module}>", "exec"), namespace)
    assert namespace["Matching"] is (Matching if module == "qfwd" else pymatching.Matching)
    return namespace


def weight_slack(ours, theirs, shot, weight: float) -> float:
    """How far qfwd's minimum weight may lie from PyMatching's for ``shot``: each edge's
    weight is rounded to 1/256 nat in qfwd (``delta``, in the graph's own units), to about
    1e-7 in PyMatching. The least rounded weight is at most PyMatching's correction's
    rounded (``E*`` edges: ``+E* delta``) and at least qfwd's own correction's true weight
    less its rounding (at most ``weight / (w_min - delta)`` edges)."""
    delta = 0.5 / 256 / ours._scale
    w_min = min((d["weight"] for _, _, d in theirs.edges()), default=1.0)
    their_edges = len(theirs.decode_to_edges_array(shot))
    our_edges = weight / (w_min - delta) + 1
    return max(their_edges, our_edges) * (delta + 1e-6)


def assert_ties(ours, theirs, shots, rows) -> None:
    """Every shot of ``rows`` (where the two answers differ) is a tie: both corrections
    weigh the least weight, to the rounding of ``weight_slack``."""
    for i in rows:
        _, w_ours = ours.decode(shots[i], return_weight=True)
        _, w_theirs = theirs.decode(shots[i], return_weight=True)
        assert abs(w_ours - w_theirs) <= weight_slack(ours, theirs, shots[i], w_ours), (
            i, w_ours, w_theirs)


def test_a_pymatching_script_runs_with_qfwd_in_its_place():
    theirs, ours = run_script("pymatching"), run_script("qfwd")
    assert ours["matching"].decoder == "matching"
    # The Stim experiment: same shots, same shapes, the same answers but for ties (exact
    # matching both; they break ties differently: 1 shot of the 20 000 here).
    assert ours["predicted_observables"].shape == theirs["predicted_observables"].shape
    assert ours["predicted_observables"].dtype == np.uint8
    differ = np.flatnonzero(
        np.any(ours["predicted_observables"] != theirs["predicted_observables"], axis=1))
    assert len(differ) <= 20, len(differ)
    assert_ties(ours["matching"], theirs["matching"], theirs["syndrome"], differ)
    m_ours, m_theirs = int(ours["num_errors"]), int(theirs["num_errors"])
    assert m_theirs > 100, m_theirs  # a point where matching makes mistakes
    assert abs(m_ours - m_theirs) <= len(differ), (m_ours, m_theirs)
    # The repetition code: 2000 single-shot decodes of 2-D syndromes, the same answers but
    # for ties (none here).
    assert theirs["rep"].num_detectors == ours["rep"].num_detectors == 8 * 9
    differ = np.array(ours["rep_predictions"]) != np.array(theirs["rep_predictions"])
    assert differ.sum() <= 10, differ.sum()
    r_ours, r_theirs = ours["rep_errors"], theirs["rep_errors"]
    assert 50 < r_theirs < 1000, r_theirs
    assert abs(r_ours - r_theirs) <= differ.sum(), (r_ours, r_theirs)


def graphs():
    """Graphs built the same way by both packages."""
    rep = np.eye(4, 5, dtype=np.uint8) + np.eye(4, 5, 1, dtype=np.uint8)
    ring = np.eye(5, dtype=np.uint8) + np.roll(np.eye(5, dtype=np.uint8), 1, axis=1)
    circuit = surface_circuit(3, 0.01)
    return [
        ("circuit", lambda M: M.from_stim_circuit(circuit)),
        ("dem", lambda M: M.from_detector_error_model(circuit.detector_error_model(decompose_errors=True))),
        ("constructor dem", lambda M: M(repetition_circuit(5, 0.02).detector_error_model(decompose_errors=True))),
        ("constructor circuit", lambda M: M(repetition_circuit(3, 0.02))),
        ("rep", lambda M: M.from_check_matrix(rep)),
        ("rep list", lambda M: M([[1, 1, 0], [0, 1, 1]], weights=[1.0, 2.5, 0.5])),
        ("rep virtual", lambda M: M.from_check_matrix(rep, use_virtual_boundary_node=True)),
        ("rep sparse rounds", lambda M: M.from_check_matrix(
            csc_matrix(rep), weights=2.0, repetitions=4, timelike_weights=[1, 2, 3, 4])),
        ("ring", lambda M: M.from_check_matrix(ring, weights=np.arange(1, 6))),
        ("faults", lambda M: M.from_check_matrix(rep, faults_matrix=np.ones((1, 5)))),
        ("empty faults", lambda M: M.from_check_matrix(rep, faults_matrix=np.zeros((70, 5)))),
        ("parallel", lambda M: M.from_check_matrix([[1, 1, 1], [0, 1, 1]], weights=[1, 3, 2])),
        ("independent", lambda M: M.from_check_matrix(
            [[1, 1, 1], [0, 1, 1]], weights=[1, 3, 2], merge_strategy="independent")),
        ("zero row", lambda M: M.from_check_matrix([[1, 1, 0], [0, 1, 1], [0, 0, 0]])),
        ("empty", lambda M: M()),
    ]


@pytest.mark.parametrize("name,build", graphs(), ids=[g[0] for g in graphs()])
def test_graph_sizes_are_pymatching_s(name, build):
    ours, theirs = build(Matching), build(pymatching.Matching)
    got = (ours.num_detectors, ours.num_nodes, ours.num_edges, ours.num_fault_ids, ours.boundary)
    want = (theirs.num_detectors, theirs.num_nodes, theirs.num_edges, theirs.num_fault_ids,
            theirs.boundary)
    assert got == want
    assert repr(ours).startswith(f"<qfwd.Matching object with {ours.num_detectors} detector")


def random_shots(name: str, n: int) -> np.ndarray:
    """300 shots of ``graphs()``'s ``name``, each with a perfect matching."""
    rng = np.random.default_rng(len(name))
    shots = (rng.random((300, n)) < 0.08).astype(np.uint8)
    if name == "ring":  # no boundary: an even number of detection events per shot
        shots[shots.sum(axis=1) % 2 == 1, 0] ^= 1
    if name == "zero row":  # no edge reaches node 2: it never holds a detection event
        shots[:, 2] = 0
    return shots


# The check matrices of graphs() whose fault ids are their columns, with their weights.
COLUMN_GRAPHS = {
    "rep": (np.eye(4, 5) + np.eye(4, 5, 1), np.ones(5)),
    "rep virtual": (np.eye(4, 5) + np.eye(4, 5, 1), np.ones(5)),
    "ring": (np.eye(5) + np.roll(np.eye(5), 1, axis=1), np.arange(1, 6)),
    "zero row": (np.array([[1, 1, 0], [0, 1, 1], [0, 0, 0]]), np.ones(3)),
}


@pytest.mark.parametrize("name,build", graphs(), ids=[g[0] for g in graphs()])
def test_answers_and_weights_are_pymatching_s(name, build):
    ours, theirs = build(Matching), build(pymatching.Matching)
    assert ours.decoder == "matching"
    shots = random_shots(name, ours.num_detectors)
    want, want_w = theirs.decode_batch(shots, return_weights=True)
    got, got_w = ours.decode_batch(shots, return_weights=True)
    assert got.shape == want.shape and got.dtype == np.uint8 and got_w.dtype == np.float64
    # The least weight: PyMatching's, to the rounding of qfwd's edge weights.
    for i in range(len(shots)):
        slack = weight_slack(ours, theirs, shots[i], got_w[i])
        assert abs(got_w[i] - want_w[i]) <= slack, (i, got_w[i], want_w[i], slack)
    # The same answers but for ties (equal weights make corrections of equal weight: 5 of
    # the 300 shots of "rep sparse rounds", none elsewhere).
    assert np.mean(np.all(got == want, axis=1)) > 0.97
    for i in range(0, 300, 37):
        one, w = ours.decode(shots[i], return_weight=True)
        assert np.array_equal(one, got[i]) and w == pytest.approx(got_w[i])
        assert np.array_equal(ours.decode(shots[i]), one)
    assert np.array_equal(ours.decode_batch(shots), got)
    assert np.array_equal(ours.decode_batch(shots, num_threads=2), got)
    if name in COLUMN_GRAPHS:
        # Fault ids are the columns: the correction reproduces the syndrome and weighs
        # what return_weights says.
        H, w = COLUMN_GRAPHS[name]
        assert np.array_equal(got @ H.T.astype(np.uint8) % 2, shots)
        assert np.allclose(got @ w, got_w, atol=1e-3)


@pytest.mark.parametrize("name,build", graphs(), ids=[g[0] for g in graphs()])
def test_uf_answers_are_corrections_no_lighter_than_matching_s(name, build, monkeypatch):
    monkeypatch.setattr(qfwd.matching, "DEFAULT_DECODER", "uf")
    ours, theirs = build(Matching), build(pymatching.Matching)
    assert ours.decoder == "uf"
    shots = random_shots(name, ours.num_detectors)
    want, want_w = theirs.decode_batch(shots, return_weights=True)
    got, got_w = ours.decode_batch(shots, return_weights=True)
    assert got.shape == want.shape and got.dtype == np.uint8 and got_w.dtype == np.float64
    # Union-find's correction is never lighter than the minimum-weight one...
    assert np.all(got_w >= want_w - 1e-6 * (1 + np.abs(want_w))), (got_w - want_w).min()
    # ...and is the same on most shots of these small graphs.
    assert np.mean(np.isclose(got_w, want_w, rtol=1e-6, atol=1e-6)) > 0.9
    assert np.mean(np.all(got == want, axis=1)) > 0.85
    for i in range(0, 300, 37):
        one, w = ours.decode(shots[i], return_weight=True)
        assert np.array_equal(one, got[i]) and w == pytest.approx(got_w[i])
        assert np.array_equal(ours.decode(shots[i]), one)
    assert np.array_equal(ours.decode_batch(shots), got)
    if name in COLUMN_GRAPHS:
        H, w = COLUMN_GRAPHS[name]
        assert np.array_equal(got @ H.T.astype(np.uint8) % 2, shots)
        assert np.allclose(got @ w, got_w)


def test_stim_memory_experiment_against_pymatching(tmp_path):
    circuit = surface_circuit(5, 0.006, basis="x")
    dem = circuit.detector_error_model(decompose_errors=True)
    dets, obs = sample(circuit, 20_000, seed=77)
    packed, _ = sample(circuit, 20_000, seed=77, bit_packed=True)
    ours = Matching.from_detector_error_model(dem)
    theirs = pymatching.Matching.from_detector_error_model(dem)
    got = ours.decode_batch(dets)
    want = theirs.decode_batch(dets)
    m_ours = int(np.any(got != obs, axis=1).sum())
    m_theirs = int(np.any(want != obs, axis=1).sum())
    differ = np.flatnonzero(np.any(got != want, axis=1))
    assert m_theirs > 100 and len(differ) <= 20, (m_theirs, len(differ))
    assert abs(m_ours - m_theirs) <= len(differ), (m_ours, m_theirs)
    assert_ties(ours, theirs, dets, differ)
    # Every input form and file gives the same answers.
    bp = ours.decode_batch(packed, bit_packed_shots=True, bit_packed_predictions=True)
    assert bp.shape == theirs.decode_batch(
        packed, bit_packed_shots=True, bit_packed_predictions=True).shape
    assert np.array_equal(np.unpackbits(bp, axis=1, count=1, bitorder="little"), got)
    assert np.array_equal(ours.decode_batch(dets.astype(np.int32)), got)
    assert np.array_equal(ours.decode_batch(dets.astype(np.float64)), got)
    assert np.array_equal(ours.decode_batch(dets, num_threads=2), got)
    dem.to_file(tmp_path / "m.dem")
    circuit.to_file(tmp_path / "c.stim")
    for m in (Matching.from_detector_error_model_file(tmp_path / "m.dem"),
              Matching.from_detector_error_model_file(str(tmp_path / "m.dem")),
              Matching.from_stim_circuit_file(tmp_path / "c.stim"),
              Matching.from_stim_circuit(circuit), Matching(dem), Matching(circuit)):
        assert np.array_equal(m.decode_batch(dets[:2000]), got[:2000])
    # Weights: one pass of the whole graph gives the flips and their weight, PyMatching's
    # to the rounding of qfwd's edge weights (1/256 nat each).
    flips, weights = ours.decode_batch(dets[:3000], return_weights=True)
    assert np.array_equal(flips, got[:3000]) and weights.shape == (3000,)
    _, pm_weights = theirs.decode_batch(dets[:3000], return_weights=True)
    for i in range(0, 3000, 7):
        slack = weight_slack(ours, theirs, dets[i], weights[i])
        assert abs(weights[i] - pm_weights[i]) <= slack, (i, weights[i], pm_weights[i], slack)
    assert np.allclose(weights, pm_weights, rtol=2e-3, atol=1e-6)
    # Results are the caller's to change, as PyMatching's are.
    got[0, 0] ^= 1
    bp[0, 0] ^= 1
    weights[0] = 0


def test_a_model_with_many_fault_ids():
    # A 301-column check matrix: 301 fault ids, past the 64 a decode carries (matching
    # decodes it in 5 passes).
    n = 301
    H = np.eye(n - 1, n, dtype=np.uint8) + np.eye(n - 1, n, 1, dtype=np.uint8)
    ours, theirs = Matching.from_check_matrix(H), pymatching.Matching.from_check_matrix(H)
    assert ours.num_fault_ids == theirs.num_fault_ids == n
    noise = np.zeros((4, n), dtype=np.uint8)
    noise[0, [5, 200]] = 1
    noise[1, [0, 299, 300]] = 1
    noise[3, 150:153] = 1
    shots = noise @ H.T % 2
    got = ours.decode_batch(shots)
    assert np.array_equal(got, noise)
    assert np.array_equal(
        ours.decode_batch(shots, bit_packed_predictions=True),
        np.packbits(noise, axis=1, bitorder="little"),
    )
    assert np.array_equal(got, theirs.decode_batch(shots))
    for kind in ("matching", "uf"):
        m = Matching.from_check_matrix(H, decoder=kind)
        assert m.decoder == kind and np.array_equal(m.decode_batch(shots), noise)


def test_too_many_passes_are_refused_naming_uf():
    # 32 768 fault ids on 8200 edges: 512 passes of 64 would copy the graph past 2^22 edges.
    n = 8200
    rows, cols = np.arange(n - 1), np.arange(n)
    H = csc_matrix((np.ones(2 * n - 2, dtype=np.uint8),
                    (np.concatenate([rows, rows]), np.concatenate([rows, rows + 1]))),
                   shape=(n - 1, n))
    F = csc_matrix((np.ones(n, dtype=np.uint8), (cols * 4 % 32768, cols)),
                   shape=(32768, n))
    with pytest.raises(ValueError, match=r"512 passes .* use decoder=\"uf\""):
        Matching.from_check_matrix(H, faults_matrix=F)
    assert Matching.from_check_matrix(H, faults_matrix=F, decoder="uf").num_fault_ids == 32768


def toric_check_matrix(L: int) -> np.ndarray:
    """The toric code's X checks (rows: L*L vertices) against its 2*L*L qubits (edges)."""
    H = np.zeros((L * L, 2 * L * L), dtype=np.uint8)
    for r in range(L):
        for c in range(L):
            v = r * L + c
            for q in (r * L + c, r * L + (c - 1) % L, L * L + v, L * L + ((r - 1) % L) * L + c):
                H[v, q] = 1
    return H


def test_a_wide_check_matrix_decodes_as_pymatching_does():
    # The toric code, L = 8: 128 fault ids (2 passes), no boundary, random weights.
    H = toric_check_matrix(8)
    rng = np.random.default_rng(11)
    w = rng.uniform(1.0, 3.0, H.shape[1])
    ours, theirs = Matching.from_check_matrix(H, w), pymatching.Matching.from_check_matrix(H, w)
    assert ours.decoder == "matching" and ours.num_fault_ids == theirs.num_fault_ids == 128
    noise = (rng.random((1000, H.shape[1])) < 0.06).astype(np.uint8)
    shots = noise @ H.T % 2
    got, got_w = ours.decode_batch(shots, return_weights=True)
    want, want_w = theirs.decode_batch(shots, return_weights=True)
    # Every pass found the same correction: it reproduces the syndrome and weighs the
    # least weight (PyMatching's, to qfwd's rounding).
    assert np.array_equal(got @ H.T % 2, shots)
    assert np.allclose(got @ w, got_w, atol=1e-3)
    for i in range(0, 1000, 9):
        slack = weight_slack(ours, theirs, shots[i], got_w[i])
        assert abs(got_w[i] - want_w[i]) <= slack, (i, got_w[i], want_w[i], slack)
    assert np.mean(np.all(got == want, axis=1)) > 0.99
    assert np.array_equal(ours.decode_batch(shots, num_threads=2), got)
    assert np.array_equal(np.array([ours.decode(z) for z in shots[:50]]), got[:50])
    packed = ours.decode_batch(shots, bit_packed_predictions=True)
    assert np.array_equal(np.unpackbits(packed, axis=1, count=128, bitorder="little"), got)
    # qfwd.Decoder is the appliance's, which refuses such a model for matching.
    wide = "error(0.1) D0 L0 L100\nerror(0.1) D0 D1\nerror(0.1) D1 L3\n"
    with pytest.raises(ValueError, match="at most 64 observables"):
        qfwd.Decoder(wide, decoder="matching")
    assert np.array_equal(Matching(stim.DetectorErrorModel(wide)).decode([1, 0])[[0, 3, 100]],
                          [1, 0, 1])


@pytest.mark.parametrize(
    "bad",
    [["0", "1", "0"], [0, 2, 0], [0, -1, 0], [0, 0.5, 0], [0, float("nan"), 0],
     [0, float("inf"), 0], [0, 255, 0], [None, 0, 0]],
)
def test_nonsense_syndromes_are_refused(bad):
    m = Matching([[1, 1, 0, 0], [0, 1, 1, 0], [0, 0, 1, 1]])
    with pytest.raises(ValueError, match="0s and 1s"):
        m.decode(bad)
    with pytest.raises(ValueError, match="0s and 1s"):
        m.decode_batch(np.array([[0, 0, 0], bad]))
    # Floats that are exactly 0 and 1 are detection events.
    assert np.array_equal(m.decode(np.array([0.0, 1.0, 1.0])), m.decode([0, 1, 1]))


def test_shapes_are_checked_as_pymatching_checks_them():
    m = Matching([[1, 1, 0, 0], [0, 1, 1, 0], [0, 0, 1, 1]])
    assert m.num_detectors == 3 and m.num_nodes == 4
    # The boundary node's entry may be given, and is ignored.
    assert np.array_equal(m.decode([0, 0, 1, 1]), m.decode([0, 0, 1]))
    assert np.array_equal(m.decode_batch([[0, 0, 1, 1]]), m.decode_batch([[0, 0, 1]]))
    for z in ([0, 1], [0, 1, 0, 0, 0], np.zeros((2, 2))):
        with pytest.raises(ValueError, match="not valid"):
            m.decode(z)
    for shots, match in [(np.zeros(3, np.uint8), "two dimensions"),
                         (np.zeros((2, 2), np.uint8), "at least 3 columns"),
                         (np.zeros((2, 5), np.uint8), "no more than 4")]:
        with pytest.raises(ValueError, match=match):
            m.decode_batch(shots)
    with pytest.raises(ValueError, match="at most 1"):
        m.decode_batch(np.zeros((2, 2), np.uint8), bit_packed_shots=True)
    # Bits past the nodes are refused; the boundary node's bit is ignored.
    with pytest.raises(ValueError, match="sets bit 4, past the graph's 4 nodes"):
        m.decode_batch(np.array([[0b10000]], np.uint8), bit_packed_shots=True)
    assert np.array_equal(m.decode_batch(np.array([[0b1100]], np.uint8), bit_packed_shots=True),
                          m.decode_batch([[0, 0, 1]]))
    for bad, match in [(np.array([[1.0]]), "float64"), (np.array([[300]]), "found 300"),
                       (np.array([[True]]), "bit_packed_shots=False")]:
        with pytest.raises(ValueError, match=match):
            m.decode_batch(bad, bit_packed_shots=True)
    for threads, err in [(0, ValueError), (1.5, TypeError), (None, TypeError)]:
        with pytest.raises(err, match="num_threads"):
            m.decode_batch(np.zeros((1, 3), np.uint8), num_threads=threads)
    assert m.decode_batch(np.zeros((1, 3), np.uint8), num_threads=10_000).shape == (1, 4)


def test_a_syndrome_with_no_perfect_matching_raises_as_pymatching_does():
    ring = [[1, 0, 1], [1, 1, 0], [0, 1, 1]]
    ours, theirs = Matching(ring), pymatching.Matching(ring)
    for m in (ours, theirs):
        with pytest.raises(ValueError, match="No perfect matching"):
            m.decode([1, 0, 0])
    with pytest.raises(ValueError, match=r"\(shot 1\)"):
        ours.decode_batch(np.array([[1, 1, 0], [0, 0, 1]]))
    assert np.array_equal(ours.decode([1, 1, 0]), theirs.decode([1, 1, 0]))


def test_check_matrices_are_checked():
    with pytest.raises(ValueError, match="at most two ones per column, but column 2 has 3"):
        Matching.from_check_matrix([[1, 1, 1], [0, 1, 1], [1, 0, 1]])
    with pytest.raises(ValueError, match="only 0s and 1s; found 2"):
        Matching.from_check_matrix([[2, 1, 0], [0, 1, 1]])
    with pytest.raises(ValueError, match="only 0s and 1s; found 2"):
        Matching.from_check_matrix(csc_matrix([[2, 1, 0], [0, 1, 1]]))
    with pytest.raises(ValueError, match="one entry per column"):
        Matching.from_check_matrix([[1, 1, 0], [0, 1, 1]], weights=[1, 2])
    with pytest.raises(ValueError, match="finite"):
        Matching.from_check_matrix([[1, 1, 0], [0, 1, 1]], weights=[1, np.nan, 1])
    with pytest.raises(ValueError, match="same number of columns|one per column"):
        Matching.from_check_matrix([[1, 1, 0], [0, 1, 1]], faults_matrix=np.eye(2))
    with pytest.raises(ValueError, match="already in the graph"):
        Matching.from_check_matrix([[1, 1, 1], [0, 1, 1]], merge_strategy="disallow")
    with pytest.raises(ValueError, match="not recognised"):
        Matching.from_check_matrix([[1, 1]], merge_strategy="best")
    with pytest.raises(NotImplementedError, match="negative edge weights"):
        Matching.from_check_matrix([[1, 1, 0], [0, 1, 1]], weights=[-1, 2, 1])
    with pytest.raises(NotImplementedError, match="frobnicate"):
        Matching.from_check_matrix([[1, 1]], frobnicate=True)
    # A common factor of the weights changes nothing but the solution's weight.
    H = np.eye(6, 7) + np.eye(6, 7, 1)
    w = np.array([1.0, 2, 3, 1, 2, 3, 1])
    a, b = Matching.from_check_matrix(H, w), Matching.from_check_matrix(H, 1000 * w)
    shots = (np.random.default_rng(3).random((200, 6)) < 0.3).astype(np.uint8)
    (pa, wa), (pb, wb) = (m.decode_batch(shots, return_weights=True) for m in (a, b))
    assert np.array_equal(pa, pb) and np.allclose(wb, 1000 * wa)


def test_what_pymatching_has_and_qfwd_does_not_raises_not_implemented():
    m = Matching.from_stim_circuit(surface_circuit(3, 0.01))
    offered = {
        "decode", "decode_batch", "from_check_matrix", "load_from_check_matrix",
        "from_detector_error_model", "from_detector_error_model_file", "from_stim_circuit",
        "from_stim_circuit_file", "num_detectors", "num_edges", "num_fault_ids", "num_nodes",
        "boundary",
    }
    names = {n for n in dir(pymatching.Matching) if not n.startswith("_")}
    assert offered <= names
    for name in sorted(names - offered):
        assert hasattr(Matching, name), name
        with pytest.raises(NotImplementedError, match=f"Matching.{name} is a PyMatching feature"):
            getattr(m, name)(0, 1)
    for call in (lambda: m.decode(np.zeros(m.num_detectors), enable_correlations=True),
                 lambda: m.decode_batch(np.zeros((1, m.num_detectors)), enable_correlations=True),
                 lambda: Matching.from_stim_circuit(surface_circuit(3, 0.01), enable_correlations=True)):
        with pytest.raises(NotImplementedError, match="enable_correlations"):
            call()
    with pytest.raises(NotImplementedError, match="_legacy_num_neighbours"):
        m.decode(np.zeros(m.num_detectors), _legacy_num_neighbours=20)
    import networkx

    with pytest.raises(NotImplementedError, match="networkx graph"):
        Matching(networkx.Graph())
    with pytest.raises(TypeError, match="stim.DetectorErrorModel"):
        Matching.from_detector_error_model("error(0.1) D0")
    with pytest.raises(TypeError, match="stim.Circuit"):
        Matching.from_stim_circuit("H 0")


def test_the_decoder_is_one_keyword_and_one_constant(monkeypatch):
    circuit = repetition_circuit(3, 0.03)
    dets, _ = sample(circuit, 2000, seed=4)
    assert Matching.from_stim_circuit(circuit).decoder == qfwd.matching.DEFAULT_DECODER
    assert qfwd.matching.DEFAULT_DECODER == "matching"
    lut = Matching.from_stim_circuit(circuit, decoder="lut")
    assert lut.decoder == "lut"
    for build in (lambda k: Matching(circuit, decoder=k),
                  lambda k: Matching.from_detector_error_model(
                      circuit.detector_error_model(decompose_errors=True), decoder=k),
                  lambda k: Matching.from_check_matrix([[1, 1]], decoder=k)):
        assert build("lut").decoder == "lut" and build("uf").decoder == "uf"
        assert build(None).decoder == "matching"
    theirs = pymatching.Matching.from_stim_circuit(circuit).decode_batch(dets)
    assert np.mean(np.all(lut.decode_batch(dets) == theirs, axis=1)) > 0.995
    # Both exact: matching and the lookup table agree but for ties.
    assert np.mean(np.all(Matching(circuit).decode_batch(dets) == lut.decode_batch(dets),
                          axis=1)) > 0.995
    with pytest.raises(NotImplementedError, match="lut decoder"):
        lut.decode(dets[0], return_weight=True)
    with pytest.raises(ValueError, match="unknown decoder"):
        Matching.from_stim_circuit(circuit, decoder="blossom")
    monkeypatch.setattr(qfwd.matching, "DEFAULT_DECODER", "lut")
    assert Matching.from_stim_circuit(circuit).decoder == "lut"
    assert Matching(stim.Circuit()).decoder == "lut"
