#!/usr/bin/env python3
"""Summarizes the uf decoder's stage trace (device/decode/common.cuh, "Stage trace").

Run the GPU tests with QFWD_UF_TRACE=1 and feed this their output (a file, a .gz, or
stdin). Per probe row ("probe row N: ..." lines) and per path and pass count, it prints
how many decodes were traced, their median defect count, and the median cycles spent in
each stage: the differences between consecutive stamps, named after what each stamp ends.

    QFWD_UF_TRACE=1 QFWD_PROBE_ROWS=3,6 cargo test --release --test gpu_decoder_latency -- \\
        --ignored --nocapture decoder_latency_probe | tee trace.log
    scripts/uf-trace.py trace.log

With QFWD_UF_TRACE=dispatch the kernel prints "QR" lines instead (device/forward.cu): per
request, the cycles from its tag seen to its response stored, its handler call, and the
same call repeated at once, and the cycles at the request path's marks. This then prints,
per probe row, request kind and defect count (12 and more together), the median handler and
repeat cycles and the cycles outside both (the kernel's own request path) at p10 / median /
p90, and under it the medians of the spans between the marks the path has ("marks").
The traced build's first calls cost more than the served build's: on the H200 the served
d5 paths cost what the traced repeats do (results/archive/h200-decoder-first-call.txt), so compare repeats
across paths, not first calls.
"""

import collections
import gzip
import signal
import statistics
import sys

PATHS = {0: "empty", 1: "table", 2: "isolated", 3: "split", 4: "full", 5: "lanes"}

# What each dispatch-trace mark ends (device/forward.cu, QFWD_TRACE_MARK), and the span after
# the last mark a path has, to the response stored.
MARKS = ["count", "tags", "claim+stage", "handler+repeat"]


def mark_spans(total, marks):
    """The spans between the nonzero marks (a path sets a prefix of them): [(name, cycles)]."""
    set_marks = []
    for m in marks:
        if m == 0:
            break
        set_marks.append(m)
    if not set_marks:
        return []
    spans, last = [], 0
    for name, m in zip(MARKS, set_marks):
        spans.append((name, m - last))
        last = m
    spans.append(("store" if len(set_marks) == len(MARKS) else "rest", total - last))
    return spans


def stage_names(path, passes, stamps):
    """What each stamp ends, in the order decode.cu writes them: the defect count; then the
    table's answer, or the defect list, the split passes (when split ran: passes > 0),
    the isolated step, the lanes' growth, the full decoder."""
    names = ["count"]
    if path == 0:
        return names
    if path == 1:
        return names + ["table"]
    names.append("list")
    tail = []
    if passes > 0:
        tail.append("split end")
    if path != 3:
        tail.append("isolated")
    if path in (4, 5):
        # The lanes' parts, summed over their rounds, then the rest of the step (its answer).
        tail += ["lanes setup", "lanes rebuild", "lanes step", "lanes merge", "lanes"]
    if path == 4:
        tail += ["setup", "growth", "forest", "peel"]
    # A pass that meets a group above K returns right after its start: no look-ups or test.
    full_passes = passes
    if len(names) + 3 * passes + len(tail) != stamps and passes > 0:
        full_passes = passes - 1
    for p in range(1, passes + 1):
        names.append("split setup" if p == 1 else f"p{p - 1} merge")
        if p <= full_passes:
            names += [f"p{p} look-ups", f"p{p} test"]
    return (names + tail)[:stamps]


REQUESTS = {1: "parity", 2: "lut", 3: "uf", 4: "stall"}


def dispatch_summary(rows):
    """The QR lines: {(row, code, defects): [(total, handler, repeat, marks)]}."""
    print("row / request / defects      n | handler  repeat | outside p10 / median / p90 (cycles)")
    print("(the traced build's first calls overstate the served build's cost: compare repeats)")
    order = {}
    for row, _, _ in rows:
        order.setdefault(row, len(order))
    last_row = None
    for (row, code, ndef) in sorted(rows, key=lambda k: (order[k[0]], k[1], k[2])):
        items = rows[(row, code, ndef)]
        if row != last_row:
            print(f"\n== {row}")
            last_row = row
        outside = sorted(t - h - r for t, h, r, _ in items)
        med = lambda xs: int(statistics.median(xs))
        pick = lambda q: outside[min(len(outside) - 1, int(q * len(outside)))]
        kind = REQUESTS.get(code, str(code))
        print(
            f"{kind:7} defects {ndef:2}{'+' if ndef == 12 else ' '} n {len(items):5} | "
            f"{med([h for _, h, _, _ in items]):7} {med([r for _, _, r, _ in items]):7} | "
            f"{pick(0.1):6} / {med(outside):6} / {pick(0.9):6}"
        )
        spans = [mark_spans(t, m) for t, _, _, m in items]
        shapes = collections.Counter(tuple(name for name, _ in sp) for sp in spans if sp)
        if shapes:
            shape = shapes.most_common(1)[0][0]
            same = [sp for sp in spans if tuple(name for name, _ in sp) == shape]
            cols = ", ".join(
                f"{name} {med([sp[i][1] for sp in same])}" for i, name in enumerate(shape)
            )
            print(f"    marks (n {len(same)}): {cols}")


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else "-"
    if path == "-":
        lines = sys.stdin
    elif path.endswith(".gz"):
        lines = gzip.open(path, "rt", errors="replace")
    else:
        lines = open(path, errors="replace")
    row = "(no probe row line)"
    groups = collections.defaultdict(list)
    requests = collections.defaultdict(list)
    bad = 0
    for line in lines:
        if line.startswith("probe row "):
            row = line.strip()[len("probe row "):]
            continue
        if line.startswith("QR "):
            try:
                fields = list(map(int, line.split()[1:]))
                code, total, handler, ndef, repeat = fields[:5]
            except ValueError:
                bad += 1
                continue
            marks = tuple(fields[5:9])
            requests[(row, code, min(ndef, 12))].append((total, handler, repeat, marks))
            continue
        if not line.startswith("QT "):
            continue
        try:
            head, tail = line[3:].split("|")
            p, ndef, passes, n, total = map(int, head.split())
            stamps = list(map(int, tail.split()))[:n]
        except ValueError:
            bad += 1  # a line cut short by a full printf buffer
            continue
        groups[(row, p, passes)].append((ndef, total, stamps))
    if not groups and not requests:
        sys.exit(
            "no QT or QR lines: was the run made with QFWD_UF_TRACE=1 (stages) "
            "or QFWD_UF_TRACE=dispatch (requests)?"
        )
    if requests:
        dispatch_summary(requests)
    last_row = None
    for (row, p, passes), items in groups.items():
        if row != last_row:
            print(f"\n== {row}")
            last_row = row
        med = lambda xs: int(statistics.median(xs)) if xs else 0
        width = min(len(s) for _, _, s in items)
        stamps = max(len(s) for _, _, s in items)
        names = stage_names(p, passes, stamps)[:width]
        stages = []
        for i, name in enumerate(names):
            prev = [s[i - 1] if i else 0 for _, _, s in items]
            stages.append(f"{name} {med([s[i] - q for (_, _, s), q in zip(items, prev)])}")
        print(
            f"{PATHS.get(p, p):8} passes {passes}  n {len(items):5}  defects {med([d for d, _, _ in items]):2}"
            f"  total {med([t for _, t, _ in items]):6} cycles  |  " + ", ".join(stages)
        )
    if bad:
        print(f"\n({bad} lines cut short, skipped)")


if __name__ == "__main__":
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # quiet when piped into head
    main()
