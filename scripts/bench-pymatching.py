#!/usr/bin/env python3
"""Time PyMatching's own per-shot decoding on the committed fixtures; print a CSV.

    pip install stim==1.16.0 pymatching==2.4.0
    python3 scripts/bench-pymatching.py                      # every fixture
    python3 scripts/bench-pymatching.py --fixtures tests/fixtures --only surface_d5_r5_z_p001
    python3 scripts/bench-pymatching.py --qfwd target/release/qfwd   # add qfwd decode rows

Columns: fixture, decoder, shots, mistakes, batch_ns_per_shot (decode_batch over all shots /
shots), p50_ns / p99_ns / mean_ns (decode() called once per shot, on up to --per-shot shots;
includes the Python call overhead, which is most of it for small codes), cpu, host.
With --qfwd, each fixture also gets one row per qfwd decoder (uf, and lut when the model
has at most 24 detectors) from `qfwd decode --format json`, measured in the same run so
the two compare on the same machine under the same load.
"""
import argparse
import glob
import json
import os
import platform
import subprocess
import sys
import time

import numpy as np


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--fixtures", default=os.path.join(here, "..", "tests", "fixtures"))
    ap.add_argument("--only", action="append", help="fixture name (repeatable)")
    ap.add_argument("--per-shot", type=int, default=5000, help="shots timed one decode() at a time")
    ap.add_argument("--repeat", type=int, default=3, help="decode_batch repetitions (best is kept)")
    ap.add_argument("--qfwd", help="path to a qfwd binary: also time `qfwd decode` on each fixture")
    args = ap.parse_args()

    import stim
    import pymatching

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

    print("fixture,decoder,shots,mistakes,batch_ns_per_shot,p50_ns,p99_ns,mean_ns,cpu,host")
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
        shots = packed.shape[0]
        m = pymatching.Matching.from_detector_error_model(dem)
        best = None
        for _ in range(args.repeat):
            t0 = time.perf_counter_ns()
            pred = m.decode_batch(packed, bit_packed_shots=True, bit_packed_predictions=False)
            dt = time.perf_counter_ns() - t0
            best = dt if best is None else min(best, dt)
        mistakes = int(np.any(pred[:, :k].astype(bool) != obs[:, :k], axis=1).sum())
        unpacked = np.unpackbits(packed, axis=1, bitorder="little")[:, :n]
        times = []
        for i in range(min(shots, args.per_shot)):
            row = unpacked[i]
            t = time.perf_counter_ns()
            m.decode(row)
            times.append(time.perf_counter_ns() - t)
        times = np.asarray(times, dtype=np.int64)
        print(
            f"{name},pymatching,{shots},{mistakes},{best / shots:.0f},"
            f"{int(np.percentile(times, 50, method='nearest'))},"
            f"{int(np.percentile(times, 99, method='nearest'))},{times.mean():.0f},\"{cpu}\",{host}",
            flush=True,
        )
        if args.qfwd:
            for decoder in ["uf"] + (["lut"] if n <= 24 else []):
                cmd = [
                    args.qfwd, "decode", "--dem", dem_path, "--dets", base + ".b8",
                    "--obs", base + ".obs.01", "--decoder", decoder, "--format", "json",
                ]
                out = subprocess.run(cmd, capture_output=True, text=True)
                if out.returncode != 0:
                    print(f"# {' '.join(cmd)} failed: {out.stderr.strip()}", file=sys.stderr)
                    continue
                r = json.loads(out.stdout)
                print(
                    f"{name},qfwd-{decoder},{r['shots']},{r['mistakes']},{r['batch_ns_per_shot']:.0f},"
                    f"{r['p50_ns']},{r['p99_ns']},{r['mean_ns']:.0f},\"{cpu}\",{host}",
                    flush=True,
                )


if __name__ == "__main__":
    main()
