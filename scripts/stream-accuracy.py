#!/usr/bin/env python3
"""Sliding-window stream decoding (qfwd) against PyMatching on whole experiments; a CSV.

Needs exactly stim==1.16.0 and pymatching==2.4.0 (Stim reproduces a seed only with the same
version on the same kind of CPU), numpy, and a release build of qfwd:

    python3 -m venv /tmp/sv && /tmp/sv/bin/pip install stim==1.16.0 pymatching==2.4.0 numpy
    cargo build --release
    /tmp/sv/bin/python scripts/stream-accuracy.py --qfwd target/release/qfwd \\
        > results/cpu-stream-accuracy.csv

For each distance d it makes Stim's `surface_code:rotated_memory_z` with --rounds rounds and
circuit-level noise p (every knob at p, as scripts/gen-fixtures.py), exports the model
(decompose_errors=True, flatten_loops=True), samples --shots shots with --seed, and decodes
every shot
- with PyMatching 2.4, the whole experiment at once (`decode_batch`): the reference;
- with qfwd's union-find on the whole experiment (`qfwd decode --decoder uf`);
- as a stream, for each window setting W,C of --windows and each --match limit
  (`qfwd decode --window W,C --match-defects N`: the window decoder matches clusters of at
  most N defects exactly, 0 greedily).
Model, shots and predictions go to --work (a temporary folder unless given).

Each row compares one decoder with PyMatching on the same shots: `ratio` = its mistakes /
PyMatching's, with a 95% interval for shots drawn again from the same distribution (paired:
the delta method on log(ratio) over the four outcomes of a shot, both wrong / only one /
neither), and the windows a shot took. Speed on the same shots, in the same run: the
decoder's time per stream round (`qfwd decode`'s fastest of 3 back-to-back passes over
every shot / shots / rounds) beside PyMatching's (the fastest of 3 `decode_batch` passes
over the same shots, bit-packed, each whole experiment at once / shots / rounds); one
thread each.
`--self-test` checks the statistics on known counts and needs neither Stim nor qfwd
(tests/stream_accuracy_script.rs runs it).
"""
import argparse
import json
import math
import os
import platform
import subprocess
import sys
import tempfile
import time

STIM_VERSION = "1.16.0"
PYMATCHING_VERSION = "2.4.0"
Z95 = 1.959963984540054

COLUMNS = [
    "distance", "rounds", "p", "shots", "seed", "decoder", "W", "C",
    "mistakes", "pymatching_mistakes", "only_decoder", "only_pymatching",
    "ratio", "ratio_ci_low", "ratio_ci_high", "windows_per_shot",
    "ns_per_round", "pymatching_ns_per_round", "cpu", "host",
]


def paired_ratio(ours, theirs):
    """Mistake ratio of two decoders on the same shots (sequences of 0/1) and its 95%
    interval: delta method on log(X / Y), X and Y the two mistake counts, with the
    multinomial covariance of the four joint outcomes."""
    n = len(ours)
    assert n == len(theirs) and n > 0
    both = sum(1 for a, b in zip(ours, theirs) if a and b)
    x = sum(1 for a in ours if a)
    y = sum(1 for b in theirs if b)
    if x == 0 or y == 0:
        return (float("nan"),) * 3
    px, py, pxy = x / n, y / n, both / n
    var = ((1 - px) / (n * px)) + ((1 - py) / (n * py)) - 2 * (pxy - px * py) / (n * px * py)
    se = math.sqrt(max(var, 0.0))
    r = x / y
    return r, r * math.exp(-Z95 * se), r * math.exp(Z95 * se)


def self_test():
    # Identical decoders: ratio 1, zero width.
    a = [1, 0, 0, 1, 0] * 200
    r, lo, hi = paired_ratio(a, a)
    assert r == 1.0 and abs(lo - 1.0) < 1e-12 and abs(hi - 1.0) < 1e-12, (r, lo, hi)
    # 110 against 100 mistakes, 90 shared, on 10 000 shots: ratio 1.1.
    ours = [1] * 90 + [1] * 20 + [0] * 10 + [0] * 9880
    theirs = [1] * 90 + [0] * 20 + [1] * 10 + [0] * 9880
    r, lo, hi = paired_ratio(ours, theirs)
    assert abs(r - 1.1) < 1e-12, r
    # Var(log R) ~ (a + b) / (x y) for rare events: 30 / 11000.
    se = math.sqrt((1 - 0.011) / 110 + (1 - 0.01) / 100 - 2 * (0.009 - 0.011 * 0.01) / (10000 * 0.011 * 0.01))
    assert abs(math.log(hi / r) / Z95 - se) < 1e-12
    assert lo < 1.1 < hi and 1.0 < hi and lo > 0.99, (lo, hi)
    # Unpaired shots widen it.
    ours2 = [1] * 110 + [0] * 9890
    theirs2 = [0] * 110 + [1] * 100 + [0] * 9790
    _, lo2, hi2 = paired_ratio(ours2, theirs2)
    assert hi2 - lo2 > 2 * (hi - lo), (lo2, hi2, lo, hi)
    print("stream-accuracy self-test: ok")


def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def window_list(spec, d):
    """`2d,d;3d,d;24,8` -> [(10, 5), (15, 5), (24, 8)] at d = 5."""
    out = []
    for item in spec.split(";"):
        w, c = item.split(",")
        val = lambda s: int(s[:-1] or 1) * d if s.endswith("d") else int(s)
        out.append((val(w.strip()), val(c.strip())))
    return out


def per_distance(spec, what):
    """`5:0.003,7:0.004` -> {5: 0.003, 7: 0.004}."""
    out = {}
    for item in spec.split(","):
        d, v = item.split(":")
        out[int(d)] = what(v)
    return out


def read_01(path):
    with open(path) as f:
        return [line.strip() for line in f if line.strip()]


def run_qfwd(qfwd, base, window, match, predictions):
    cmd = [qfwd, "decode", "--dem", base + ".dem", "--dets", base + ".b8",
           "--obs", base + ".obs.01", "--decoder", "uf", "--format", "json",
           "--predictions", predictions]
    if window:
        cmd += ["--window", f"{window[0]},{window[1]}", "--match-defects", str(match)]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--qfwd", help="qfwd binary (release build)")
    ap.add_argument("--distances", default="5,7")
    ap.add_argument("--rounds", type=int, default=100)
    ap.add_argument("--p", default="5:0.003,7:0.004", help="noise per distance, d:p,...")
    ap.add_argument("--shots", default="5:20000,7:20000", help="shots per distance, d:n,...")
    ap.add_argument("--seed", type=int, default=20240517)
    ap.add_argument("--windows", default="2d,d;3d,d", help="W,C settings (`d` = distance), `;`-separated")
    ap.add_argument("--match", default="16", help="the window decoder's exact-matching limits (defects; 0: greedy matching alone), comma-separated")
    ap.add_argument("--work", help="folder for models, shots and predictions (default: a temporary one)")
    ap.add_argument("--self-test", action="store_true", help="check the statistics and exit")
    args = ap.parse_args()
    if args.self_test:
        self_test()
        return
    if not args.qfwd:
        ap.error("--qfwd is needed (or --self-test)")
    import numpy as np
    import pymatching
    import stim
    if stim.__version__ != STIM_VERSION or pymatching.__version__ != PYMATCHING_VERSION:
        sys.exit(f"need stim=={STIM_VERSION} and pymatching=={PYMATCHING_VERSION}, "
                 f"found {stim.__version__} and {pymatching.__version__}")
    work = args.work or tempfile.mkdtemp(prefix="stream-accuracy-")
    os.makedirs(work, exist_ok=True)
    ps = per_distance(args.p, float)
    shots_of = per_distance(args.shots, int)
    cpu, host = cpu_name(), platform.node()
    print(",".join(COLUMNS))
    for d in [int(x) for x in args.distances.split(",")]:
        p, shots = ps[d], shots_of[d]
        base = os.path.join(work, f"surface_d{d}_r{args.rounds}_z_p{p}")
        circuit = stim.Circuit.generated(
            "surface_code:rotated_memory_z", distance=d, rounds=args.rounds,
            after_clifford_depolarization=p, before_round_data_depolarization=p,
            before_measure_flip_probability=p, after_reset_flip_probability=p)
        dem = circuit.detector_error_model(decompose_errors=True, flatten_loops=True)
        with open(base + ".dem", "w") as f:
            f.write(str(dem))
        circuit.compile_detector_sampler(seed=args.seed).sample_write(
            shots, filepath=base + ".b8", format="b8",
            obs_out_filepath=base + ".obs.01", obs_out_format="01")
        dets = stim.read_shot_data_file(path=base + ".b8", format="b8",
                                        num_detectors=dem.num_detectors)
        obs = np.array([[c == "1" for c in row] for row in read_01(base + ".obs.01")])
        matching = pymatching.Matching.from_detector_error_model(dem)
        # Bit-packed shots in, PyMatching's fastest path.
        packed = np.packbits(dets, axis=1, bitorder="little")
        pm_best = None
        for _ in range(3):
            t = time.perf_counter()
            pm = matching.decode_batch(packed, bit_packed_shots=True)
            dt = time.perf_counter() - t
            pm_best = dt if pm_best is None else min(pm_best, dt)
        pm_ns_round = pm_best * 1e9 / shots / args.rounds
        pm_wrong = list(np.any(pm != obs, axis=1).astype(int))
        print(f"# d={d}: {shots} shots, PyMatching {sum(pm_wrong)} mistakes "
              f"({pm_ns_round:.0f} ns a round)", file=sys.stderr, flush=True)
        settings = [(None, 0)] + [(w, int(mt)) for w in window_list(args.windows, d)
                                  for mt in args.match.split(",")]
        for window, match in settings:
            label = f"window-match{match}" if window and match else ("window-greedy" if window else "uf-whole")
            pred_path = base + (f".w{window[0]}c{window[1]}m{match}" if window else ".whole") + ".pred.01"
            t = time.time()
            rep = run_qfwd(args.qfwd, base, window, match, pred_path)
            pred = read_01(pred_path)
            wrong = [int(pr != "".join("1" if b else "0" for b in o)) for pr, o in zip(pred, obs)]
            assert sum(wrong) == rep["mistakes"], (sum(wrong), rep["mistakes"])
            r, lo, hi = paired_ratio(wrong, pm_wrong)
            both = sum(1 for a, b in zip(wrong, pm_wrong) if a and b)
            wps = rep["windows_per_shot"] if window else 1
            ns_round = rep["batch_ns_per_shot"] / args.rounds
            row = [d, args.rounds, p, shots, args.seed, label,
                   window[0] if window else "", window[1] if window else "",
                   sum(wrong), sum(pm_wrong), sum(wrong) - both, sum(pm_wrong) - both,
                   f"{r:.4f}", f"{lo:.4f}", f"{hi:.4f}", wps,
                   f"{ns_round:.0f}", f"{pm_ns_round:.0f}", f'"{cpu}"', host]
            print(",".join(str(x) for x in row), flush=True)
            print(f"# d={d} {label} W,C={window}: {sum(wrong)} mistakes, ratio {r:.3f} "
                  f"[{lo:.3f}, {hi:.3f}] ({time.time() - t:.1f} s)", file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()
