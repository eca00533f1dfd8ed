#!/usr/bin/env bash
# Soak: `qfwd run` (cpu topology, uf decoder on the d=5 surface code) over UDP loopback,
# driven open loop by `qfwd-latency emulate` replaying recorded shots with hostile
# datagrams mixed in, for a long time, while the forwarder's resident memory is sampled.
# It passes when every datagram sent is accounted for by the forwarder's counters
# (0 unaccounted), no answer is wrong, and the RSS stays flat after the first minute.
#
# Usage: scripts/soak.sh [RATE_HZ [SECONDS [OUT]]]
#   RATE_HZ   offered requests/s [200000]
#   SECONDS   how long [600]
#   OUT       report file [results/soak-udp-cpu-d5.txt]
# Environment:
#   SOAK_PROBE_RATES="200000 150000 ..."  first run 20 s at each rate, highest first, and
#                      soak at the highest one the host holds (no request lost, none
#                      answered -6, no socket drop, >= 99 % of the rate achieved)
#   SOAK_HOSTILE_PERCENT  hostile datagrams per 100 requests [1]
#   SOAK_IDLE          spin or yield, both sides [spin]; yield on a host shared with others
#   SOAK_CORES="F,E"   pin the forwarder to core F and the emulator to E
#   SOAK_SAMPLE_S      seconds between RSS samples and status lines [10]
set -euo pipefail
cd "$(dirname "$0")/.."
rate=${1:-200000}
secs=${2:-600}
out=${3:-results/soak-udp-cpu-d5.txt}
hostile=${SOAK_HOSTILE_PERCENT:-1}
idle=${SOAK_IDLE:-spin}
every=${SOAK_SAMPLE_S:-10}
dem=tests/fixtures/surface_d5_r5_z_p001.dem
dets=tests/fixtures/surface_d5_r5_z_p001.b8
work=$(mktemp -d)
qpid=
cleanup() {
    if [ -n "$qpid" ]; then kill "$qpid" 2>/dev/null || true; fi
    rm -rf "$work"
}
trap cleanup EXIT

cargo build --release -q -p qfwd -p qfwd-latency
qfwd=target/release/qfwd
harness=target/release/qfwd-latency
fwd_core=()
emu_core=()
if [ -n "${SOAK_CORES:-}" ]; then
    fwd_core=(--cores "${SOAK_CORES%,*}")
    emu_core=(--emulator-core "${SOAK_CORES#*,}")
fi
idle_flag=()
if [ "$idle" = yield ]; then idle_flag=(--yield-when-idle); fi

# Starts qfwd on a free port; sets qpid and port.
start_forwarder() {
    local log=$1
    "$qfwd" run --listen 127.0.0.1:0 --topology cpu --decoder uf --dem "$dem" --name decode \
        --idle "$idle" --stats-interval "$every" --exit-with-parent $$ "${fwd_core[@]}" \
        2>"$log" &
    qpid=$!
    for _ in $(seq 1200); do
        if grep -q '^qfwd: serving' "$log" || ! kill -0 "$qpid" 2>/dev/null; then break; fi
        sleep 0.1
    done
    port=$(sed -n 's/^qfwd: serving.* on udp 127\.0\.0\.1:\([0-9]*\);.*/\1/p' "$log")
    if [ -z "$port" ]; then
        local how="still running after 120 s"
        if ! kill -0 "$qpid" 2>/dev/null; then
            wait "$qpid" && how="exited with status 0" || how="exited with status $?"
        fi
        echo "soak: qfwd did not start ($how):" >&2
        cat "$log" >&2
        exit 1
    fi
}

# SIGTERM (drains), then wait for the summary.
stop_forwarder() {
    kill -TERM "$qpid"
    wait "$qpid" || true
    qpid=
}

# Datagrams the host dropped before any socket (every CPU's backlog queue, the second
# column of /proc/net/softnet_stat): what the forwarder cannot count.
softnet_drops() {
    local total=0 _a dropped _rest
    while read -r _a dropped _rest; do total=$((total + 16#$dropped)); done </proc/net/softnet_stat
    echo "$total"
}

# Runs the emulator against the forwarder: rate, seconds, output file; returns its status.
emulate() {
    local r=$1 s=$2 o=$3
    backlog0=$(softnet_drops)
    "$harness" emulate --target "127.0.0.1:$port" --mode open-loop --rate "$r" \
        --warmup "$r" --samples "$((r * s))" --timeout-ms 1000 \
        --decoder uf --dem "$dem" --dets "$dets" --hostile-percent "$hostile" \
        "${idle_flag[@]}" "${emu_core[@]}" >"$o" 2>&1 || { backlog=$(($(softnet_drops) - backlog0)); return 1; }
    backlog=$(($(softnet_drops) - backlog0))
}

# The number after TEXT on the first line of FILE that has it.
num_after() { sed -n "s/.*$2 \([0-9][0-9]*\).*/\1/p" "$1" | head -1; }

# Reads one run's counts (emulator output, forwarder stderr, rate) into globals and
# prints them on one line.
account() {
    local emu=$1 fwd=$2 r=$3
    sent=$(num_after "$emu" "emulator: sent")
    nok=$(num_after "$emu" "= ok")
    errs=$(num_after "$emu" "+ error status")
    wrong=$(num_after "$emu" "+ wrong")
    lost=$(num_after "$emu" "+ lost")
    hsent=$(num_after "$emu" "hostile datagrams sent")
    hunexp=$(num_after "$emu" "unexpected answers")
    achieved=$(num_after "$emu" "send retries [0-9]*;")
    rx=$(sed -n 's/^received \([0-9]*\) = .*/\1/p' "$fwd" | tail -1)
    expired=$(sed -n 's/.*of the overload answers, \([0-9]*\) had waited.*/\1/p' "$fwd" | tail -1)
    sockdrop=$(sed -n 's/^  socket_overflow *\([0-9]*\)$/\1/p' "$fwd" | tail -1)
    sent=${sent:-0}; rx=${rx:-0}; wrong=${wrong:-0}; lost=${lost:-0}; errs=${errs:-0}
    hsent=${hsent:-0}; hunexp=${hunexp:-0}; expired=${expired:-0}; sockdrop=${sockdrop:-0}
    achieved=${achieved:-0}
    unacc=$((sent + hsent - rx))
    echo "rate $r req/s: sent $sent + hostile $hsent; forwarder received $rx" \
        "(unaccounted $unacc; the host's backlog queues dropped $backlog datagrams before any" \
        "socket meanwhile); ok $nok, error status $errs (expired $expired), wrong $wrong," \
        "hostile answered unexpectedly $hunexp, lost $lost (socket_overflow $sockdrop);" \
        "achieved $achieved answers/s"
}

# After `account`: every datagram counted by the forwarder, and no wrong answer.
accounted() { [ "$unacc" -eq 0 ] && [ "$wrong" -eq 0 ] && [ "$hunexp" -eq 0 ]; }

# After `account`: and the rate held (nothing lost, refused or dropped; 99 % achieved).
holds() {
    accounted && [ "$lost" -eq 0 ] && [ "$errs" -eq 0 ] && [ "$sockdrop" -eq 0 ] \
        && [ "$((achieved * 100))" -ge "$(($1 * 99))" ]
}

{
    echo "# Soak: qfwd run over UDP loopback, cpu topology, uf decoder (d=5 surface code)"
    echo "command: scripts/soak.sh $rate $secs $out"
    echo "environment: SOAK_PROBE_RATES=\"${SOAK_PROBE_RATES:-}\" SOAK_HOSTILE_PERCENT=$hostile" \
        "SOAK_IDLE=$idle SOAK_CORES=${SOAK_CORES:-} SOAK_SAMPLE_S=$every"
    echo "model: $dem; shots: $dets"
    echo "git: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)" \
        "$(git diff --quiet 2>/dev/null || echo '(with uncommitted changes)')"
    echo "host: $(uname -srm); $(nproc) cores; $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)"
    echo "memory: $(awk '/MemTotal/ {printf "%.1f GiB", $2/1048576}' /proc/meminfo);" \
        "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "started: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
} >"$work/report"

if [ -n "${SOAK_PROBE_RATES:-}" ]; then
    echo >>"$work/report"
    echo "## Highest rate held (20 s at each, highest first)" >>"$work/report"
    held=
    for r in $SOAK_PROBE_RATES; do
        start_forwarder "$work/probe-fwd.log"
        emulate "$r" 20 "$work/probe-emu.log" || true
        stop_forwarder
        account "$work/probe-emu.log" "$work/probe-fwd.log" "$r" >>"$work/report"
        if holds "$r"; then
            echo "  -> holds" >>"$work/report"
            held=$r
            break
        fi
        echo "  -> does not hold" >>"$work/report"
    done
    if [ -z "$held" ]; then
        echo "no probed rate held; soaking at the lowest" >>"$work/report"
        held=${SOAK_PROBE_RATES##* }
    fi
    rate=$held
fi

echo >>"$work/report"
echo "## Soak: $rate req/s for $secs s, $hostile % hostile datagrams" >>"$work/report"
start_forwarder "$work/fwd.log"
(
    t0=$(date +%s)
    while kill -0 "$qpid" 2>/dev/null; do
        rss=$(awk '/^VmRSS/ {print $2}' "/proc/$qpid/status" 2>/dev/null || true)
        if [ -n "$rss" ]; then echo "rss $(( $(date +%s) - t0 )) s: $rss kB"; fi
        sleep "$every"
    done
) >"$work/rss.log" &
sampler=$!
status=0
emulate "$rate" "$secs" "$work/emu.log" || status=$?
stop_forwarder
wait "$sampler" 2>/dev/null || true

{
    echo
    echo "### forwarder start-up and status lines"
    cat "$work/fwd.log"
    echo
    echo "### forwarder resident memory (VmRSS)"
    cat "$work/rss.log"
    echo
    echo "### emulator (exit status $status)"
    cat "$work/emu.log"
    echo
    echo "### verdict"
    pass=0
    account "$work/emu.log" "$work/fwd.log" "$rate"
    accounted || pass=1
    holds "$rate" || echo "(this host did not hold $rate req/s throughout: see lost and error status)"
    # RSS after the first minute against the last sample.
    base=$(awk -F'[ :]+' '$2 >= 60 {print $(NF-1); exit}' "$work/rss.log")
    last=$(tail -1 "$work/rss.log" | awk '{print $(NF-1)}')
    max=$(awk '{print $(NF-1)}' "$work/rss.log" | sort -n | tail -1)
    if [ -n "$base" ] && [ -n "$last" ]; then
        growth=$((last - base))
        echo "RSS after the first minute $base kB, at the end $last kB (growth $growth kB)," \
            "highest $max kB: $([ "$growth" -le 1024 ] && echo flat || echo GROWING)"
        [ "$growth" -le 1024 ] || pass=1
    else
        echo "RSS: too few samples for a verdict (run longer than a minute)"
    fi
    echo "finished: $(date -u +%Y-%m-%dT%H:%M:%SZ); load average: $(cut -d' ' -f1-3 /proc/loadavg)"
    if [ "$pass" -eq 0 ]; then
        echo "PASS: every datagram accounted for, no wrong answer, RSS flat"
    else
        echo "FAIL: see the verdict above"
    fi
} >>"$work/report"
mkdir -p "$(dirname "$out")"
cp "$work/report" "$out"
tail -5 "$out"
grep -q '^PASS' "$out"
