"""qfwd's decode_batch against pymatching.Matching.decode_batch, in one run, on the same
shots: Stim's rotated surface-code memory-Z experiments, rounds = d, circuit noise p, at
d = 9, 11 and 15 by default.

Each decoder decodes the same bit-packed shots in one call, three times; the fastest
call's wall time / shots is its time per shot (single-threaded, both). Mistakes are counted
against the sampled observables, so the speed is that of a decoder that decodes.

    python python/bench.py [--distances 9 11 15] [--p 0.001] [--shots 100000]
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np
import pymatching
import stim

# This folder holds qfwd's Python sources without their native module: import the
# installed wheel, not them.
_here = Path(__file__).resolve().parent
sys.path = [p for p in sys.path if Path(p or ".").resolve() != _here]
import qfwd  # noqa: E402


def circuit(d: int, p: float) -> stim.Circuit:
    return stim.Circuit.generated(
        "surface_code:rotated_memory_z",
        distance=d,
        rounds=d,
        after_clifford_depolarization=p,
        before_round_data_depolarization=p,
        before_measure_flip_probability=p,
        after_reset_flip_probability=p,
    )


def best_of(n: int, f):
    best, out = float("inf"), None
    for _ in range(n):
        t = time.perf_counter()
        out = f()
        best = min(best, time.perf_counter() - t)
    return best, out


def cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--distances", type=int, nargs="+", default=[9, 11, 15])
    ap.add_argument("--p", type=float, default=0.001)
    ap.add_argument("--shots", type=int, default=100_000)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    print(
        f"# host: {cpu_name()}, {os.cpu_count()} cores; python {platform.python_version()}, "
        f"stim {stim.__version__}, pymatching {pymatching.__version__}, qfwd {qfwd.__version__}"
    )
    print(
        f"# surface_code:rotated_memory_z, rounds = d, p = {args.p}; bit-packed shots, one "
        f"decode_batch call per pass, best of {args.repeats}, one thread"
    )
    print(
        f"{'d':>3} {'detectors':>9} {'shots':>8} {'qfwd uf us/shot':>16} "
        f"{'pymatching us/shot':>19} {'speed-up':>9} {'qfwd mistakes':>14} {'pm mistakes':>12}"
    )
    for d in args.distances:
        c = circuit(d, args.p)
        dem = c.detector_error_model(decompose_errors=True)
        shots = args.shots
        dets, obs = c.compile_detector_sampler(seed=d).sample(
            shots, separate_observables=True, bit_packed=True
        )
        ours = qfwd.Decoder.from_detector_error_model(dem)
        theirs = pymatching.Matching.from_detector_error_model(dem)
        t_ours, p_ours = best_of(
            args.repeats,
            lambda: ours.decode_batch(dets, bit_packed_shots=True, bit_packed_predictions=True),
        )
        t_theirs, p_theirs = best_of(
            args.repeats,
            lambda: theirs.decode_batch(dets, bit_packed_shots=True, bit_packed_predictions=True),
        )
        m_ours = int(np.any(p_ours != obs, axis=1).sum())
        m_theirs = int(np.any(p_theirs != obs, axis=1).sum())
        us_ours, us_theirs = t_ours / shots * 1e6, t_theirs / shots * 1e6
        print(
            f"{d:>3} {dem.num_detectors:>9} {shots:>8} {us_ours:>16.2f} {us_theirs:>19.2f} "
            f"{us_theirs / us_ours:>8.1f}x {m_ours:>14} {m_theirs:>12}",
            flush=True,
        )


if __name__ == "__main__":
    main()
