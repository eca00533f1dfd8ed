"""qfwd.Matching against pymatching.Matching on the same shots, in one run: mistakes and time
per shot of decode_batch on Stim's rotated surface-code memory experiments (X and Z,
rounds = d, circuit noise p), at d = 5, 7, 9 and 11 and p = 0.006 by default, where every
decoder makes mistakes; one row per qfwd decoder (exact matching, qfwd.Matching's default,
and union-find by default), each beside PyMatching.

Every decoder decodes the same bit-packed shots in one call per pass; the passes interleave
the decoders and each keeps its fastest (--repeats); wall time / shots is its time per shot
(single-threaded, all). Mistakes are shots whose predicted observables differ from the
sampled ones; "qfwd only" and "pm only" count the shots only one of the two gets wrong, so a
gap can be told from sampling noise (a gap much larger than sqrt(qfwd only + pm only) is
real). "matching" is minimum-weight matching, as PyMatching: the shots it answers otherwise
are ties. "uf" (union-find) is not, and makes more mistakes.

    python python/bench.py [--distances 5 7 9 11] [--p 0.006] [--shots 50000] [--basis x z]
        [--decoders matching uf]
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


def best_of_interleaved(n: int, calls: dict) -> dict:
    """``{name: (fastest wall time, result)}`` of ``n`` passes, each pass calling every one
    of ``calls`` in turn (so a change of the machine's load hits them all alike)."""
    best = {name: (float("inf"), None) for name in calls}
    for _ in range(n):
        for name, f in calls.items():
            t = time.perf_counter()
            out = f()
            elapsed = time.perf_counter() - t
            best[name] = (min(best[name][0], elapsed), out)
    return best


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
    ap.add_argument("--decoders", nargs="+", default=[qfwd.matching.DEFAULT_DECODER, "uf"],
                    help="qfwd's decoders, a row each (default: %(default)s)")
    args = ap.parse_args()
    print(
        f"# host: {cpu_name()}, {os.cpu_count()} cores; python {platform.python_version()}, "
        f"stim {stim.__version__}, pymatching {pymatching.__version__}, qfwd {qfwd.__version__}"
    )
    print(
        f"# qfwd.Matching(decoder=...) vs pymatching.Matching; "
        f"surface_code:rotated_memory_{{x,z}}, rounds = d, p = {args.p}; the same bit-packed "
        f"shots for all, one decode_batch call per pass, passes interleaved, best of "
        f"{args.repeats}, one thread"
    )
    print(
        f"{'basis':>5} {'d':>3} {'detectors':>9} {'shots':>7} {'decoder':>8} "
        f"{'qfwd us/shot':>13} {'pm us/shot':>11} {'time ratio':>11} {'qfwd mistakes':>14} "
        f"{'pm mistakes':>12} {'ratio':>6} {'qfwd only':>10} {'pm only':>8}"
    )
    for basis in args.basis:
        for d in args.distances:
            c = circuit(basis, d, args.p)
            dem = c.detector_error_model(decompose_errors=True)
            shots = args.shots
            dets, obs = c.compile_detector_sampler(seed=d).sample(
                shots, separate_observables=True, bit_packed=True
            )
            decoders = {
                "pymatching": pymatching.Matching.from_detector_error_model(dem),
                **{k: qfwd.Matching.from_detector_error_model(dem, decoder=k)
                   for k in args.decoders},
            }
            best = best_of_interleaved(args.repeats, {
                name: (lambda m=m: m.decode_batch(
                    dets, bit_packed_shots=True, bit_packed_predictions=True))
                for name, m in decoders.items()
            })
            t_theirs, p_theirs = best["pymatching"]
            wrong_theirs = np.any(p_theirs != obs, axis=1)
            m_theirs = int(wrong_theirs.sum())
            us_theirs = t_theirs / shots * 1e6
            for kind in args.decoders:
                t_ours, p_ours = best[kind]
                wrong_ours = np.any(p_ours != obs, axis=1)
                m_ours = int(wrong_ours.sum())
                only_ours = int((wrong_ours & ~wrong_theirs).sum())
                only_theirs = int((wrong_theirs & ~wrong_ours).sum())
                ratio = f"{m_ours / m_theirs:.3f}" if m_theirs else "-"
                us_ours = t_ours / shots * 1e6
                print(
                    f"{basis:>5} {d:>3} {dem.num_detectors:>9} {shots:>7} {kind:>8} "
                    f"{us_ours:>13.2f} {us_theirs:>11.2f} {us_ours / us_theirs:>11.2f} "
                    f"{m_ours:>14} {m_theirs:>12} {ratio:>6} {only_ours:>10} {only_theirs:>8}",
                    flush=True,
                )

if __name__ == "__main__":
    main()
