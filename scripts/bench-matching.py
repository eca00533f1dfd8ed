#!/usr/bin/env python3
"""qfwd's decoders (matching, uf) against PyMatching on fresh Stim shots: mistakes with a
paired interval, and time per shot, on the same shots in the same run; a CSV.

Needs stim==1.16.0, pymatching==2.4.0, numpy, and a release build of qfwd:

    python3 -m venv target/venv && target/venv/bin/pip install stim==1.16.0 pymatching==2.4.0 numpy
    cargo build --release -p qfwd --bin qfwd
    target/venv/bin/python scripts/bench-matching.py --qfwd target/release/qfwd \\
        > results/cpu-matching-vs-pymatching.csv

For each distance d of --distances and each basis (rotated surface code memory X and Z,
rounds = d, circuit-level noise p with every knob at p, as scripts/gen-fixtures.py), it
exports the model (decompose_errors=True, flatten_loops=True), samples --shots shots with
--seed, and decodes every shot
- with PyMatching 2.4, `decode_batch` on the bit-packed shots: the reference;
- with `qfwd decode --decoder D` for each D of --decoders.
Model and shots go to --work (a temporary folder unless given).

Columns: `mistakes` (shots whose predicted observables differ from the recorded ones),
`ratio` = mistakes / PyMatching's with its 95% interval, paired over the same shots (the
delta method on log(ratio) over the four joint outcomes of a shot, as
scripts/stream-accuracy.py computes it; `only_decoder` / `only_pymatching` count the shots
only one of the two got wrong); `ns_per_shot` and `pymatching_ns_per_shot`: the wall time
of one back-to-back pass over all the shots / shots, the fastest of 3 passes (PyMatching:
`decode_batch`, bit-packed in and out; qfwd: the fastest of `qfwd decode`'s 3 passes), each
the median over --runs runs that interleave the decoders point by point (the machine may be
shared); `time_ratio` = ns_per_shot / pymatching_ns_per_shot. Neither time includes loading
the model or the shots; both run one thread. A `#` line on stderr gives the host and its
load average before and after.
"""
import argparse
import importlib.util
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
STIM_VERSION = "1.16.0"
PYMATCHING_VERSION = "2.4.0"

COLUMNS = [
    "distance", "basis", "rounds", "p", "shots", "seed", "decoder", "mistakes",
    "pymatching_mistakes", "only_decoder", "only_pymatching", "ratio", "ratio_ci_low",
    "ratio_ci_high", "ns_per_shot", "pymatching_ns_per_shot", "time_ratio", "cpu", "host",
]


def stream_accuracy():
    """scripts/stream-accuracy.py as a module (its paired ratio is the one used here)."""
    spec = importlib.util.spec_from_file_location("stream_accuracy", os.path.join(HERE, "stream-accuracy.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def load_avg():
    try:
        return "%.2f %.2f %.2f" % os.getloadavg()
    except OSError:
        return "unknown"


def make_point(stim, np, work, d, basis, p, shots, seed):
    """Writes the model, the shots (b8) and the observables (01); returns their base path."""
    c = stim.Circuit.generated(
        f"surface_code:rotated_memory_{basis}",
        distance=d,
        rounds=d,
        after_clifford_depolarization=p,
        before_round_data_depolarization=p,
        before_measure_flip_probability=p,
        after_reset_flip_probability=p,
    )
    base = os.path.join(work, f"surface_d{d}_r{d}_{basis}_p{p}")
    dem = c.detector_error_model(decompose_errors=True, flatten_loops=True)
    dem.to_file(base + ".dem")
    dets, obs = c.compile_detector_sampler(seed=seed).sample(shots, separate_observables=True, bit_packed=True)
    dets.tofile(base + ".b8")
    bits = np.unpackbits(obs, axis=1, bitorder="little")[:, : dem.num_observables]
    with open(base + ".obs.01", "w") as f:
        f.write("\n".join("".join("1" if b else "0" for b in row) for row in bits) + "\n")
    return base, dem.num_detectors, dem.num_observables, obs


def run_pymatching(pymatching, stim, np, base, n, k, obs, passes=3):
    """Per-shot mistakes (bools) and the fastest pass's ns per shot."""
    m = pymatching.Matching.from_detector_error_model(stim.DetectorErrorModel.from_file(base + ".dem"))
    packed = np.fromfile(base + ".b8", dtype=np.uint8).reshape(-1, (n + 7) // 8)
    best = None
    for _ in range(passes):
        t0 = time.perf_counter_ns()
        pred = m.decode_batch(packed, bit_packed_shots=True, bit_packed_predictions=True)
        dt = time.perf_counter_ns() - t0
        best = dt if best is None else min(best, dt)
    wrong = np.any(pred[:, : (k + 7) // 8] != obs[:, : (k + 7) // 8], axis=1)
    return [bool(x) for x in wrong], best / packed.shape[0]


def run_qfwd(qfwd, decoder, base, np, obs):
    """Per-shot mistakes and `qfwd decode`'s fastest pass's ns per shot."""
    pred_path = f"{base}.{decoder}.pred.b8"
    cmd = [
        qfwd, "decode", "--dem", base + ".dem", "--dets", base + ".b8", "--obs", base + ".obs.01",
        "--decoder", decoder, "--format", "json", "--predictions", pred_path, "--out-format", "b8",
    ]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed: {out.stderr.strip()}")
    r = json.loads(out.stdout)
    pred = np.fromfile(pred_path, dtype=np.uint8).reshape(obs.shape[0], -1)
    wrong = np.any(pred != obs[:, : pred.shape[1]], axis=1)
    assert int(wrong.sum()) == r["mistakes"], (int(wrong.sum()), r["mistakes"])
    return [bool(x) for x in wrong], r["batch_ns_per_shot"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--qfwd", required=True, help="path to a release qfwd binary")
    ap.add_argument("--distances", default="5,7,9,11")
    ap.add_argument("--bases", default="x,z")
    ap.add_argument("--p", type=float, default=0.006, help="circuit-level noise (every knob)")
    ap.add_argument("--shots", type=int, default=50_000)
    ap.add_argument("--seed", type=int, default=20_250_601)
    ap.add_argument("--decoders", default="matching,uf", help="qfwd decoders, comma-separated")
    ap.add_argument("--runs", type=int, default=3, help="interleaved timing runs; medians are printed")
    ap.add_argument("--work", help="folder for the models and shots (default: a temporary one)")
    args = ap.parse_args()

    import numpy as np
    import pymatching
    import stim

    for name, mod, want in [("stim", stim, STIM_VERSION), ("pymatching", pymatching, PYMATCHING_VERSION)]:
        if mod.__version__ != want:
            print(f"# note: {name} {mod.__version__}, not {want}: the shots differ from the committed run's",
                  file=sys.stderr)
    paired_ratio = stream_accuracy().paired_ratio
    cpu = stream_accuracy().cpu_name()
    host = platform.node()
    decoders = [d.strip() for d in args.decoders.split(",") if d.strip()]
    work = args.work or tempfile.mkdtemp(prefix="qfwd-bench-matching-")
    os.makedirs(work, exist_ok=True)

    points = []
    for d in [int(x) for x in args.distances.split(",")]:
        for basis in args.bases.split(","):
            seed = args.seed + 1000 * d + (0 if basis == "x" else 1)
            base, n, k, obs = make_point(stim, np, work, d, basis, args.p, args.shots, seed)
            points.append((d, basis, seed, base, n, k, obs))
            print(f"# sampled d={d} {basis}: {args.shots} shots", file=sys.stderr, flush=True)

    load_before = load_avg()
    times = {}  # (point index, decoder) -> [ns per shot, one per run]
    wrong = {}  # (point index, decoder) -> per-shot mistakes (the same every run)
    for run in range(args.runs):
        for i, (d, basis, seed, base, n, k, obs) in enumerate(points):
            w, t = run_pymatching(pymatching, stim, np, base, n, k, obs)
            wrong[(i, "pymatching")] = w
            times.setdefault((i, "pymatching"), []).append(t)
            for dec in decoders:
                w, t = run_qfwd(args.qfwd, dec, base, np, obs)
                if (i, dec) in wrong and wrong[(i, dec)] != w:
                    sys.exit(f"qfwd {dec} answered d={d} {basis} differently in two runs")
                wrong[(i, dec)] = w
                times.setdefault((i, dec), []).append(t)
            print(f"# run {run + 1}/{args.runs}: d={d} {basis} done", file=sys.stderr, flush=True)
    load_after = load_avg()

    print(
        f"# host {host}, cpu \"{cpu}\", {os.cpu_count()} cpus; load average (1/5/15 min) {load_before} before, "
        f"{load_after} after; stim {stim.__version__}, pymatching {pymatching.__version__}; {args.runs} runs "
        f"interleaving the decoders point by point, times the median over the runs of the fastest of 3 passes",
        file=sys.stderr,
    )
    print(",".join(COLUMNS))
    for i, (d, basis, seed, base, n, k, obs) in enumerate(points):
        theirs = wrong[(i, "pymatching")]
        t_pm = statistics.median(times[(i, "pymatching")])
        for dec in decoders:
            ours = wrong[(i, dec)]
            r, lo, hi = paired_ratio(ours, theirs)
            t = statistics.median(times[(i, dec)])
            row = [
                d, basis, d, args.p, args.shots, seed, dec, sum(ours), sum(theirs),
                sum(1 for a, b in zip(ours, theirs) if a and not b),
                sum(1 for a, b in zip(ours, theirs) if b and not a),
                f"{r:.4f}", f"{lo:.4f}", f"{hi:.4f}", f"{t:.0f}", f"{t_pm:.0f}", f"{t / t_pm:.2f}",
                f"\"{cpu}\"", host,
            ]
            print(",".join(str(x) for x in row), flush=True)


if __name__ == "__main__":
    main()
