"""qfwd.Matching against pymatching.Matching on the same shots, in one run: mistakes and time
per shot of decode_batch on Stim's rotated surface-code memory experiments (X and Z,
rounds = d, circuit noise p), at d = 5, 7, 9 and 11 and p = 0.006 by default, where both
decoders make mistakes.

Each decoder decodes the same bit-packed shots in one call, best of --repeats; wall time /
shots is its time per shot (single-threaded, both). Mistakes are shots whose predicted
observables differ from the sampled ones; "qfwd only" and "pm only" count the shots only
one of them gets wrong, so the gap can be told from sampling noise (a gap much larger than
sqrt(qfwd only + pm only) is real). qfwd's decoder is qfwd.matching.DEFAULT_DECODER unless
--decoder names another; union-find ("uf") is not minimum-weight matching and makes more
mistakes than PyMatching.

    python python/bench.py [--distances 5 7 9 11] [--p 0.006] [--shots 50000] [--basis z x]
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


def circuit(basis: str, d: int, p: float) -> stim.Circuit:
    return stim.Circuit.generated(
        f"surface_code:rotated_memory_{basis}",
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
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("--distances", type=int, nargs="+", default=[5, 7, 9, 11])
    ap.add_argument("--p", type=float, default=0.006, help="circuit noise (default 0.006)")
    ap.add_argument("--shots", type=int, default=50_000)
    ap.add_argument("--basis", nargs="+", choices=["x", "z"], default=["x", "z"])
    ap.add_argument("--repeats", type=int, default=3, help="timed passes, best kept")
    ap.add_argument("--decoder", default=qfwd.matching.DEFAULT_DECODER,
                    help="qfwd's decoder (default: qfwd.Matching's, %(default)s)")
    args = ap.parse_args()
    print(
        f"# host: {cpu_name()}, {os.cpu_count()} cores; python {platform.python_version()}, "
        f"stim {stim.__version__}, pymatching {pymatching.__version__}, qfwd {qfwd.__version__}"
    )
    print(
        f"# qfwd.Matching(decoder={args.decoder!r}) vs pymatching.Matching; "
        f"surface_code:rotated_memory_{{x,z}}, rounds = d, p = {args.p}; the same bit-packed "
        f"shots for both, one decode_batch call per pass, best of {args.repeats}, one thread"
    )
    print(
        f"{'basis':>5} {'d':>3} {'detectors':>9} {'shots':>7} {'qfwd us/shot':>13} "
        f"{'pm us/shot':>11} {'speed-up':>9} {'qfwd mistakes':>14} {'pm mistakes':>12} "
        f"{'ratio':>6} {'qfwd only':>10} {'pm only':>8}"
    )
    for basis in args.basis:
        for d in args.distances:
            c = circuit(basis, d, args.p)
            dem = c.detector_error_model(decompose_errors=True)
            shots = args.shots
            dets, obs = c.compile_detector_sampler(seed=d).sample(
                shots, separate_observables=True, bit_packed=True
            )
            ours = qfwd.Matching.from_detector_error_model(dem, decoder=args.decoder)
            theirs = pymatching.Matching.from_detector_error_model(dem)
            t_ours, p_ours = best_of(
                args.repeats,
                lambda: ours.decode_batch(dets, bit_packed_shots=True, bit_packed_predictions=True),
            )
            t_theirs, p_theirs = best_of(
                args.repeats,
                lambda: theirs.decode_batch(dets, bit_packed_shots=True, bit_packed_predictions=True),
            )
            wrong_ours = np.any(p_ours != obs, axis=1)
            wrong_theirs = np.any(p_theirs != obs, axis=1)
            m_ours, m_theirs = int(wrong_ours.sum()), int(wrong_theirs.sum())
            only_ours = int((wrong_ours & ~wrong_theirs).sum())
            only_theirs = int((wrong_theirs & ~wrong_ours).sum())
            ratio = f"{m_ours / m_theirs:.3f}" if m_theirs else "-"
            us_ours, us_theirs = t_ours / shots * 1e6, t_theirs / shots * 1e6
            print(
                f"{basis:>5} {d:>3} {dem.num_detectors:>9} {shots:>7} {us_ours:>13.2f} "
                f"{us_theirs:>11.2f} {us_theirs / us_ours:>8.2f}x {m_ours:>14} {m_theirs:>12} "
                f"{ratio:>6} {only_ours:>10} {only_theirs:>8}",
                flush=True,
            )


if __name__ == "__main__":
    main()
