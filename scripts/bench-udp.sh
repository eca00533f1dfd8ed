#!/usr/bin/env bash
# Round trip over UDP loopback: qfwd (udp, parity handler) against sockperf's own
# ping-pong server, measured in one run on this machine. Prints p50/p99 of each and
# their ratio, and writes the same to results/cpu-udp-vs-sockperf.txt (plus the qfwd CSV row).
#
# Usage: scripts/bench-udp.sh [seconds-per-sockperf-run] [qfwd-samples]
# Needs: sockperf (Debian package `sockperf`; installed here if apt-get is available).
# Like for like: 56-byte request datagrams (24 B header + 32 B payload), both servers
# pinned to core 0 and both clients to core 1, all round trips (sockperf --full-rtt).
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-10}
samples=${2:-300000}
out=results/cpu-udp-vs-sockperf.txt
port_sp=11911
port_q=11912

if ! command -v sockperf >/dev/null; then
    if command -v apt-get >/dev/null; then
        (apt-get update -qq && apt-get install -y -qq sockperf) >/dev/null
    else
        echo "bench-udp: sockperf not found; install the Debian package sockperf" >&2
        exit 1
    fi
fi
cargo build --release -q -p qfwd -p qfwd-latency
ncores=$(nproc)
srv_core=0
cli_core=$(( ncores > 1 ? 1 : 0 ))

cleanup() { pkill -f "sockperf server" 2>/dev/null || true; [ -n "${qpid:-}" ] && kill "$qpid" 2>/dev/null || true; }
trap cleanup EXIT

# Prints "p50 p99" (µs) from sockperf's output.
# Arguments: "block" (sockperf's defaults: epoll server, blocking recvfrom client) or
# "busy" (non-blocking sockets polled with recvfrom in a loop on both sides, as qfwd does;
# sockperf only takes -F r with a feed file).
sockperf_run() {
    local server_args=(-i 127.0.0.1 -p $port_sp) client_extra=()
    if [ "$1" = busy ]; then
        echo "U:127.0.0.1:$port_sp" > /tmp/qfwd-bench-feed.txt
        server_args=(-f /tmp/qfwd-bench-feed.txt -F r --nonblocked)
        client_extra=(--nonblocked)
    fi
    timeout $((secs + 25)) sockperf server "${server_args[@]}" --cpu-affinity $srv_core >/dev/null 2>&1 &
    local spid=$!
    sleep 1
    local log
    log=$(timeout $((secs + 20)) sockperf ping-pong -i 127.0.0.1 -p $port_sp -m 56 -t "$secs" --full-rtt \
        --sender-affinity $cli_core --receiver-affinity $cli_core "${client_extra[@]}" 2>&1)
    kill $spid 2>/dev/null || true
    wait $spid 2>/dev/null || true
    local p50 p99
    p50=$(sed 's/\x1b\[[0-9;]*m//g' <<<"$log" | awk '/percentile 50.000/ {print $NF}')
    p99=$(sed 's/\x1b\[[0-9;]*m//g' <<<"$log" | awk '/percentile 99.000/ {print $NF}')
    echo "$p50 $p99"
}

read -r sp_block_p50 sp_block_p99 < <(sockperf_run block)
read -r sp_busy_p50 sp_busy_p99 < <(sockperf_run busy)

target/release/qfwd run --listen 127.0.0.1:$port_q --cores $srv_core --stats-interval 0 --duration 300 2>/tmp/qfwd-bench.log &
qpid=$!
for _ in $(seq 50); do grep -q "serving" /tmp/qfwd-bench.log 2>/dev/null && break; sleep 0.1; done
target/release/qfwd-latency emulate --target 127.0.0.1:$port_q --samples "$samples" --warmup 10000 \
    --emulator-core $cli_core --csv results/cpu-udp-vs-sockperf.csv >/tmp/qfwd-emulate.log
kill -TERM $qpid; wait $qpid 2>/dev/null || true; qpid=
# p50_ns and p99_ns are columns 19 and 21 of the summary CSV.
read -r q_p50 q_p99 < <(awk -F, 'NR==2 {printf "%.3f %.3f\n", $19/1000, $21/1000}' results/cpu-udp-vs-sockperf.csv)

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }'; }
{
    echo "# bench-udp: round trip over UDP loopback, 56 B requests, $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "# host: $(hostname), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $ncores cores, kernel $(uname -r)"
    echo "# git: $(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown); sockperf $(sockperf --version 2>&1 | awk '/version/ {print $3; exit}')"
    echo "# servers pinned to core $srv_core, clients to core $cli_core; sockperf ${secs}s per mode; qfwd $samples samples"
    printf "%-34s %10s %10s %12s\n" "what" "p50_us" "p99_us" "qfwd/this"
    printf "%-34s %10s %10s %12s\n" "sockperf (blocking recvfrom)" "$sp_block_p50" "$sp_block_p99" "$(ratio "$q_p50" "$sp_block_p50")"
    printf "%-34s %10s %10s %12s\n" "sockperf (busy-poll, nonblocking)" "$sp_busy_p50" "$sp_busy_p99" "$(ratio "$q_p50" "$sp_busy_p50")"
    printf "%-34s %10s %10s %12s\n" "qfwd run + qfwd-latency emulate" "$q_p50" "$q_p99" "1.00"
    echo "# qfwd/this = qfwd p50 / that p50 (target: <= 1.2 against the busy-poll sockperf, the like-for-like setup)"
} | tee "$out"
