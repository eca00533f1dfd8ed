"""qfwd.Client against a real `qfwd run` serving a uf decoder over UDP loopback.

Needs the `qfwd` binary: QFWD_BIN, else target/release/qfwd or target/debug/qfwd of the
repository (CI builds it with `cargo test`); skipped with a reason where there is none.
"""

import os
import socket
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest

import qfwd
from conftest import sample, surface_circuit

ROOT = Path(__file__).resolve().parents[2]


def qfwd_binary():
    for candidate in (
        os.environ.get("QFWD_BIN"),
        ROOT / "target" / "release" / "qfwd",
        ROOT / "target" / "debug" / "qfwd",
    ):
        if candidate and Path(candidate).is_file():
            return Path(candidate)
    return None


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture()
def server(tmp_path):
    binary = qfwd_binary()
    if binary is None:
        pytest.skip("no qfwd binary: build it with `cargo build` or set QFWD_BIN")
    circuit = surface_circuit(5, 0.005)
    dem = circuit.detector_error_model(decompose_errors=True)
    path = tmp_path / "d5.dem"
    dem.to_file(path)
    port = free_port()
    proc = subprocess.Popen(
        [str(binary), "run", "--listen", f"127.0.0.1:{port}", "--decoder", "uf", "--dem",
         str(path), "--idle", "yield", "--stats-interval", "0"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    client = qfwd.Client("127.0.0.1", port, timeout=0.2)
    deadline = time.monotonic() + 30
    while True:
        try:
            client.request("probe")
            break
        except TimeoutError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                raise RuntimeError(f"qfwd run did not start: {proc.stderr.read().decode()}")
    client.close()
    try:
        yield port, circuit, qfwd.Decoder.from_dem_file(path)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()


def test_the_appliance_answers_as_the_library_does(server):
    port, circuit, dec = server
    dets, _ = sample(circuit, 300, seed=21)
    want = dec.decode_batch(dets, bit_packed_predictions=True)
    with qfwd.Client("127.0.0.1", port, timeout=2.0) as client:
        for i in range(len(dets)):
            r = client.decode("decode", dec.payload(dets[i]))
            assert r.ok and r.status == qfwd.Status.OK, r
            assert r.result == want[i].tobytes(), i
            assert r.round_trip_ns > 0
        # Past the budget, a wrong length, an unknown function: each its own status.
        r = client.decode("decode", dec.payload(np.ones(dec.num_detectors, dtype=bool)))
        assert (r.status, r.result) == (qfwd.Status.OVER_BUDGET, b"")
        r = client.decode("decode", dec.payload(dets[0])[:-1])
        assert r.status == qfwd.Status.BAD_ARGUMENT
        r = client.decode(qfwd.function_id("nope"), b"")
        assert r.status == qfwd.Status.UNKNOWN_FUNCTION


def test_function_ids_are_fnv1a_and_silence_times_out():
    # FNV-1a's published test vectors.
    assert qfwd.function_id("") == 0x811C9DC5
    assert qfwd.function_id("a") == 0xE40C292C
    assert qfwd.function_id("foobar") == 0xBF9CF968
    with qfwd.Client("127.0.0.1", free_port(), timeout=0.05) as client:
        with pytest.raises(TimeoutError):
            client.decode("decode", b"\x00")
    with pytest.raises(ValueError, match="datagram"):
        qfwd.Client("127.0.0.1", 9).request("x", b"\x00" * 70_000)
