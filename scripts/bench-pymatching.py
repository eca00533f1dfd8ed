#!/usr/bin/env python3
"""Time PyMatching's own per-shot decoding on the committed fixtures; print a CSV.

    pip install stim==1.16.0 pymatching==2.4.0
    python3 scripts/bench-pymatching.py                      # every fixture
    python3 scripts/bench-pymatching.py --fixtures tests/fixtures --only surface_d5_r5_z_p001
    python3 scripts/bench-pymatching.py --qfwd target/release/qfwd   # add qfwd decode rows

Columns: fixture, decoder, shots, mistakes, batch_ns_per_shot, p50_ns / p99_ns / mean_ns,
cpu, host.

- batch_ns_per_shot: the throughput figure, measured the same way on both sides: the wall
  time of one back-to-back pass over every shot of the fixture / shots, the fastest of
  --repeat passes (3). PyMatching: `decode_batch` on the bit-packed shots (numpy in,
  predictions out); qfwd: `qfwd decode`'s back-to-back passes (it runs 3 and reports the
  fastest, `batch_passes` in its JSON), decoding the same shots from the same files.
  Neither includes loading the model or the shots.
- p50_ns / p99_ns / mean_ns: one clock read around each decode. PyMatching: `decode()`
  called from Python once per shot, on up to --per-shot shots (so mostly Python call
  overhead for small codes); qfwd: every shot, in Rust (includes ~20 ns of clock reads).
  These two are not comparable; the batch column is.

With --qfwd, each fixture also gets one row per qfwd decoder (matching, uf, and lut when
the model has at most 24 detectors) from `qfwd decode --format json`. (The d = 5-11
comparison on fresh Stim shots, with paired intervals: scripts/bench-matching.py.) The machine is shared, so the
whole measurement runs --runs times (3), PyMatching and qfwd interleaved fixture by
fixture, and each number printed is the median over the runs. The CSV on stdout starts
with its header line; a `#` line on stderr gives the host, its load average before and
after, and this method.
"""
import argparse
import glob
import json
import os
import platform
import statistics
import subprocess
import sys
import time

import numpy as np


def load_avg():
    try:
        return "%.2f %.2f %.2f" % os.getloadavg()
    except OSError:
        return "unknown"


def time_pymatching(dem_path, n, k, packed, obs, repeat, per_shot):
    import pymatching
    import stim

    dem = stim.DetectorErrorModel.from_file(dem_path)
    m = pymatching.Matching.from_detector_error_model(dem)
    shots = packed.shape[0]
    best = None
    for _ in range(repeat):
        t0 = time.perf_counter_ns()
        pred = m.decode_batch(packed, bit_packed_shots=True, bit_packed_predictions=False)
        dt = time.perf_counter_ns() - t0
        best = dt if best is None else min(best, dt)
    mistakes = int(np.any(pred[:, :k].astype(bool) != obs[:, :k], axis=1).sum())
    unpacked = np.unpackbits(packed, axis=1, bitorder="little")[:, :n]
    times = []
    for i in range(min(shots, per_shot)):
        row = unpacked[i]
        t = time.perf_counter_ns()
        m.decode(row)
        times.append(time.perf_counter_ns() - t)
    times = np.asarray(times, dtype=np.int64)
    return {
        "shots": shots,
        "mistakes": mistakes,
        "batch": best / shots,
        "p50": int(np.percentile(times, 50, method="nearest")),
        "p99": int(np.percentile(times, 99, method="nearest")),
        "mean": float(times.mean()),
    }


def time_qfwd(qfwd, decoder, dem_path, base):
    cmd = [
        qfwd, "decode", "--dem", dem_path, "--dets", base + ".b8",
        "--obs", base + ".obs.01", "--decoder", decoder, "--format", "json",
    ]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        print(f"# {' '.join(cmd)} failed: {out.stderr.strip()}", file=sys.stderr)
        return None
    r = json.loads(out.stdout)
    return {
        "shots": r["shots"],
        "mistakes": r["mistakes"],
        "batch": r["batch_ns_per_shot"],
        "passes": r.get("batch_passes", 1),
        "p50": r["p50_ns"],
        "p99": r["p99_ns"],
        "mean": r["mean_ns"],
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--fixtures", default=os.path.join(here, "..", "tests", "fixtures"))
    ap.add_argument("--only", action="append", help="fixture name (repeatable)")
    ap.add_argument("--per-shot", type=int, default=5000, help="shots timed one decode() at a time")
    ap.add_argument("--repeat", type=int, default=3,
                    help="decode_batch passes per run, the fastest counts (qfwd decode runs 3)")
    ap.add_argument("--runs", type=int, default=3, help="interleaved runs; medians are printed")
    ap.add_argument("--qfwd", help="path to a qfwd binary: also time `qfwd decode` on each fixture")
    args = ap.parse_args()

    import pymatching
    import stim

    host = platform.node()
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass

    fixtures = []
    for dem_path in sorted(glob.glob(os.path.join(args.fixtures, "*.dem"))):
        name = os.path.basename(dem_path)[: -len(".dem")]
        if args.only and name not in args.only:
            continue
        base = dem_path[: -len(".dem")]
        dem = stim.DetectorErrorModel.from_file(dem_path)
        n, k = dem.num_detectors, dem.num_observables
        raw = np.fromfile(base + ".b8", dtype=np.uint8)
        packed = raw.reshape(-1, (n + 7) // 8)
        with open(base + ".obs.01") as f:
            obs = np.array([[c == "1" for c in line.strip()] for line in f if line.strip()], dtype=bool)
        decoders = ["pymatching"]
        if args.qfwd:
            decoders += ["qfwd-matching", "qfwd-uf"] + (["qfwd-lut"] if n <= 24 else [])
        fixtures.append((name, dem_path, base, n, k, packed, obs, decoders))

    load_before = load_avg()
    results = {}  # (fixture, decoder) -> list of result dicts, one per run
    qfwd_passes = set()
    for run in range(args.runs):
        for name, dem_path, base, n, k, packed, obs, decoders in fixtures:
            for decoder in decoders:
                if decoder == "pymatching":
                    r = time_pymatching(dem_path, n, k, packed, obs, args.repeat, args.per_shot)
                else:
                    r = time_qfwd(args.qfwd, decoder[len("qfwd-"):], dem_path, base)
                    if r is None:
                        continue
                    qfwd_passes.add(r["passes"])
                results.setdefault((name, decoder), []).append(r)
            print(f"# run {run + 1}/{args.runs}: {name} done", file=sys.stderr, flush=True)
    load_after = load_avg()

    passes = ",".join(str(p) for p in sorted(qfwd_passes)) or "-"
    print(
        f"# host {host}, cpu \"{cpu}\", {os.cpu_count()} cpus; load average (1/5/15 min) "
        f"{load_before} before, {load_after} after; pymatching {pymatching.__version__}, "
        f"stim {stim.__version__}; method: {args.runs} runs interleaving pymatching and qfwd "
        f"fixture by fixture, each column the median over the runs; batch_ns_per_shot = fastest "
        f"of {args.repeat} back-to-back passes over all shots / shots (pymatching decode_batch, "
        f"bit-packed in; qfwd decode: fastest of {passes} passes); p50/p99/mean: one clock read "
        f"per decode (pymatching: Python decode() on {args.per_shot} shots; qfwd: every shot)",
        file=sys.stderr,
    )
    print("fixture,decoder,shots,mistakes,batch_ns_per_shot,p50_ns,p99_ns,mean_ns,cpu,host")
    for name, _, _, _, _, _, _, decoders in fixtures:
        for decoder in decoders:
            rs = results.get((name, decoder))
            if not rs:
                continue
            mistakes = {r["mistakes"] for r in rs}
            if len(mistakes) != 1:
                print(f"# {name} {decoder}: mistakes differ between runs: {sorted(mistakes)}", file=sys.stderr)
            med = {key: statistics.median(r[key] for r in rs) for key in ("batch", "p50", "p99", "mean")}
            print(
                f"{name},{decoder},{rs[0]['shots']},{rs[0]['mistakes']},{med['batch']:.0f},"
                f"{med['p50']:.0f},{med['p99']:.0f},{med['mean']:.0f},\"{cpu}\",{host}",
                flush=True,
            )


if __name__ == "__main__":
    main()
