#!/usr/bin/env python3
"""How often a shot has more defects than the default request budget
(decode/src/budget.rs: ceil(6 x expected) + 24), on Stim-sampled shots of the rotated
surface-code memory-Z experiment (rounds = d): at the model's own noise p, and at twice
it (the budget comes from the model at p, the shots from a circuit at 2p).

Needs stim and the qfwd wheel (python/README.md).

    python3 scripts/decoder-budget-tail.py [--shots 10000000]
"""

import argparse

import numpy as np
import stim

import qfwd

POPCOUNT = np.array([bin(i).count("1") for i in range(256)], dtype=np.uint16)


def circuit(d, p):
    return stim.Circuit.generated(
        "surface_code:rotated_memory_z", distance=d, rounds=d,
        after_clifford_depolarization=p, before_round_data_depolarization=p,
        before_measure_flip_probability=p, after_reset_flip_probability=p,
    )


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shots", type=int, default=10_000_000)
    ap.add_argument("--distances", type=int, nargs="+", default=[3, 5, 7, 9])
    ap.add_argument("--p", type=float, nargs="+", default=[0.001, 0.005])
    args = ap.parse_args()
    print(f"# stim {stim.__version__}; {args.shots} shots per row; defects = detection events")
    print(f"{'d':>3} {'model p':>8} {'shots p':>8} {'expected':>9} {'budget':>7} "
          f"{'mean':>7} {'p99.99':>7} {'max':>5} {'over budget':>12}")
    for d in args.distances:
        for p in args.p:
            dec = qfwd.Decoder.from_detector_error_model(
                circuit(d, p).detector_error_model(decompose_errors=True))
            for q in (p, 2 * p):
                sampler = circuit(d, q).compile_detector_sampler(seed=d * 7919 + int(q * 1e6))
                counts = []
                left = args.shots
                while left:
                    n = min(left, 1_000_000)
                    dets, _ = sampler.sample(n, separate_observables=True, bit_packed=True)
                    counts.append(POPCOUNT[dets].sum(axis=1))
                    left -= n
                c = np.concatenate(counts)
                over = int((c > dec.max_defects).sum())
                print(f"{d:>3} {p:>8} {q:>8} {dec.expected_defects:>9.2f} {dec.max_defects:>7} "
                      f"{c.mean():>7.2f} {np.quantile(c, 0.9999):>7.0f} {c.max():>5} {over:>12}",
                      flush=True)


if __name__ == "__main__":
    main()
