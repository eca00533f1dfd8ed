#!/usr/bin/env python3
"""Generate the decoder fixtures committed under tests/fixtures/.

Needs exactly stim==1.16.0 and pymatching==2.4.0 (Stim's samplers reproduce a seed only with
the same version on the same kind of CPU, so the fixtures are committed, not regenerated in CI):

    pip install stim==1.16.0 pymatching==2.4.0
    python3 scripts/gen-fixtures.py            # writes tests/fixtures/
    python3 scripts/gen-fixtures.py --only surface_d3_r3_z_p001

Per fixture NAME it writes, in tests/fixtures/:

    NAME.dem      detector error model, decompose_errors=True, flatten_loops=True
    NAME.b8       detection events, Stim's b8 format (ceil(n/8) bytes per shot, LSB first)
    NAME.obs.01   the observables that actually flipped, Stim's 01 format (one line per shot)
    NAME.toml     provenance: circuit, noise, shots, seed, versions, and PyMatching's result on
                  these shots (mistakes, per-shot decode time)

and, for the stream models (STREAM_MODELS), the .dem alone, in tests/fixtures/stream/.

Noise is Stim's circuit-level model with every knob at p: after_clifford_depolarization,
before_round_data_depolarization, before_measure_flip_probability, after_reset_flip_probability.
Rounds = distance except for the two small `lut` models.
"""
import argparse
import os
import platform
import sys
import time
import zlib

import numpy as np

STIM_VERSION = "1.16.0"
PYMATCHING_VERSION = "2.4.0"

# (name, stim task, distance, rounds, p, shots)
# Shot counts keep the whole folder under 8 MiB while leaving mistakes to test against at
# p=0.001: d3 50k shots (~36 expected PyMatching mistakes), d5 20k (~3), d7 10k (~0; the d7
# p=0.001 fixtures check that union-find does not fail where matching does not).
FIXTURES = []
for p, tag in [(0.001, "p001"), (0.005, "p005")]:
    FIXTURES.append((f"rep_d5_r5_{tag}", "repetition_code:memory", 5, 5, p, 50_000))
    for basis in ["z", "x"]:
        task = f"surface_code:rotated_memory_{basis}"
        FIXTURES.append((f"surface_d3_r3_{basis}_{tag}", task, 3, 3, p, 50_000))
        FIXTURES.append((f"surface_d5_r5_{basis}_{tag}", task, 5, 5, p, 20_000))
        FIXTURES.append((f"surface_d7_r7_{basis}_{tag}", task, 7, 7, p, 10_000))
# Small models for the LUT-versus-brute-force tests (few enough edges to enumerate every subset).
FIXTURES.append(("rep_d3_r3_p005", "repetition_code:memory", 3, 3, 0.005, 10_000))
FIXTURES.append(("surface_d3_r1_z_p005", "surface_code:rotated_memory_z", 3, 1, 0.005, 10_000))

# Models only (no shots), in stream/, for the stream decoder at larger distances
# (tests/gpu_window.rs): rotated memory Z with 3 rounds, the fewest whose middle rounds
# repeat (the stream model needs two such rounds; decode/src/window/layout.rs).
STREAM_MODELS = [(f"surface_d{d}_r3_z_p001", d, 3, 0.001) for d in (9, 11, 13, 15)]
# ... and at p = 0.003 for the GPU window decoder's time per window (tests/gpu_window.rs).
STREAM_MODELS += [(f"surface_d{d}_r3_z_p003", d, 3, 0.003) for d in (5, 7, 9, 11)]

# Shots decoded one at a time with Matching.decode() to measure PyMatching's per-shot latency.
PER_SHOT_TIMED = 5_000


def circuit(stim, task, d, rounds, p):
    return stim.Circuit.generated(
        task,
        distance=d,
        rounds=rounds,
        after_clifford_depolarization=p,
        before_round_data_depolarization=p,
        before_measure_flip_probability=p,
        after_reset_flip_probability=p,
    )


def write_01(path, bits):
    with open(path, "w", newline="\n") as f:
        for row in bits:
            f.write("".join("1" if b else "0" for b in row))
            f.write("\n")


def percentile_ns(samples, q):
    return int(np.percentile(np.asarray(samples, dtype=np.int64), q, method="nearest"))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "tests", "fixtures"))
    ap.add_argument("--only", action="append", help="generate only this fixture (repeatable)")
    args = ap.parse_args()

    import stim
    import pymatching

    if stim.__version__ != STIM_VERSION or pymatching.__version__ != PYMATCHING_VERSION:
        sys.exit(
            f"need stim=={STIM_VERSION} and pymatching=={PYMATCHING_VERSION}, found "
            f"stim {stim.__version__} and pymatching {pymatching.__version__}: "
            f"pip install stim=={STIM_VERSION} pymatching=={PYMATCHING_VERSION}"
        )
    os.makedirs(os.path.join(args.out, "stream"), exist_ok=True)
    for name, d, rounds, p in STREAM_MODELS:
        if args.only and name not in args.only:
            continue
        c = circuit(stim, "surface_code:rotated_memory_z", d, rounds, p)
        dem = c.detector_error_model(decompose_errors=True, flatten_loops=True)
        with open(os.path.join(args.out, "stream", name + ".dem"), "w", newline="\n") as f:
            f.write(str(dem))
            f.write("\n")
        print(f"{name}: {dem.num_detectors} detectors (model only)")
    for name, task, d, rounds, p, shots in FIXTURES:
        if args.only and name not in args.only:
            continue
        seed = zlib.crc32(name.encode()) & 0x7FFF_FFFF
        c = circuit(stim, task, d, rounds, p)
        dem = c.detector_error_model(decompose_errors=True, flatten_loops=True)
        dets, obs = c.compile_detector_sampler(seed=seed).sample(
            shots, separate_observables=True, bit_packed=True
        )
        obs_bits = np.unpackbits(obs, axis=1, bitorder="little")[:, : dem.num_observables]
        base = os.path.join(args.out, name)
        with open(base + ".dem", "w", newline="\n") as f:
            f.write(str(dem))
            f.write("\n")
        with open(base + ".b8", "wb") as f:
            f.write(np.ascontiguousarray(dets, dtype=np.uint8).tobytes())
        write_01(base + ".obs.01", obs_bits)

        m = pymatching.Matching.from_detector_error_model(dem)
        t0 = time.perf_counter_ns()
        pred = m.decode_batch(dets, bit_packed_shots=True, bit_packed_predictions=False)
        batch_ns = time.perf_counter_ns() - t0
        mistakes = int(np.any(pred[:, : dem.num_observables] != obs_bits, axis=1).sum())
        unpacked = np.unpackbits(dets, axis=1, bitorder="little")[:, : dem.num_detectors]
        n = min(shots, PER_SHOT_TIMED)
        times = []
        for i in range(n):
            row = unpacked[i]
            t = time.perf_counter_ns()
            m.decode(row)
            times.append(time.perf_counter_ns() - t)

        with open(base + ".toml", "w", newline="\n") as f:
            f.write(f"# Generated by scripts/gen-fixtures.py; do not edit.\n")
            f.write(f'name = "{name}"\n')
            f.write(f'task = "{task}"\n')
            f.write(f"distance = {d}\n")
            f.write(f"rounds = {rounds}\n")
            f.write(f"p = {p}\n")
            f.write(
                'noise = "after_clifford_depolarization, before_round_data_depolarization, '
                'before_measure_flip_probability, after_reset_flip_probability = p"\n'
            )
            f.write(f"shots = {shots}\n")
            f.write(f"seed = {seed}\n")
            f.write(f"num_detectors = {dem.num_detectors}\n")
            f.write(f"num_observables = {dem.num_observables}\n")
            f.write(f"pymatching_edges = {m.num_edges}\n")
            f.write(f'stim_version = "{stim.__version__}"\n')
            f.write(f'pymatching_version = "{pymatching.__version__}"\n')
            f.write(f"pymatching_mistakes = {mistakes}\n")
            f.write(f"pymatching_batch_ns_per_shot = {batch_ns // shots}\n")
            f.write(f"pymatching_decode_shots_timed = {n}\n")
            f.write(f"pymatching_decode_p50_ns = {percentile_ns(times, 50)}\n")
            f.write(f"pymatching_decode_p99_ns = {percentile_ns(times, 99)}\n")
            f.write(f'timing_host = "{platform.machine()} {platform.processor() or platform.platform()}"\n')
        print(
            f"{name}: {dem.num_detectors} detectors, {shots} shots, seed {seed}, "
            f"pymatching {mistakes} mistakes ({mistakes / shots:.2e}/shot), "
            f"{batch_ns / shots:.0f} ns/shot batch, p50 {percentile_ns(times, 50)} ns per decode()"
        )


if __name__ == "__main__":
    main()
