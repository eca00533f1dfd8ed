#!/usr/bin/env bash
# Redraws the plots committed in results/ from their CSVs (qfwd-latency report --svg) and
# renders a PNG beside each SVG (rsvg-convert, Debian/Ubuntu package librsvg2-bin, installed
# here when missing and this runs as root with apt-get). Run from anywhere:
#
#   scripts/render-plots.sh
#
# Each results/NAME-plots/ folder is replaced. Sweeps with many rows get one folder per view
# (--where picks the rows), so every panel stays readable.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v rsvg-convert >/dev/null; then
    if command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
        apt-get install -y librsvg2-bin >/dev/null
    else
        echo "render-plots: rsvg-convert not found; install it (Debian/Ubuntu: apt-get install librsvg2-bin)" >&2
        exit 1
    fi
fi

cargo build --release -q -p qfwd-latency
report=target/release/qfwd-latency

# plot CSV DIR [report options...]: draws DIR/*.svg and DIR/*.png, prints the notes.
plot() {
    local csv=$1 dir=$2
    shift 2
    rm -rf "$dir"
    "$report" report "$csv" --svg "$dir" "$@" | sed -n "s|^note: |  $dir: |p"
    for svg in "$dir"/*.svg; do
        rsvg-convert "$svg" -o "${svg%.svg}.png"
    done
    echo "$dir: $(cd "$dir" && ls | tr '\n' ' ')"
}

rm -rf results/*-plots
plot results/h200-topologies.csv results/h200-topologies-plots/ping-pong-32B \
    --where payload_bytes=32,mode=ping-pong
plot results/h200-topologies.csv results/h200-topologies-plots/open-loop --where mode=open-loop
plot results/h200-topologies-udp.csv results/h200-topologies-udp-plots/ping-pong-32B \
    --where payload_bytes=32,mode=ping-pong
plot results/h200-topologies-udp.csv results/h200-topologies-udp-plots/open-loop \
    --where mode=open-loop
plot results/h200-poller-layouts.csv results/h200-poller-layouts-plots
plot results/h200-open-loop.csv results/h200-open-loop-plots
plot results/h200-doorbells.csv results/h200-doorbells-plots
plot results/h200-decoders.csv results/h200-decoders-plots
plot results/h200-decoder-pollers.csv results/h200-decoder-pollers-plots
plot results/h200-gpu-direct.csv results/h200-gpu-direct-plots/ping-pong --where mode=ping-pong
plot results/h200-gpu-direct.csv results/h200-gpu-direct-plots/open-loop --where mode=open-loop
plot results/cpu-udp-loopback.csv results/cpu-udp-loopback-plots
plot results/cpu-softnic-doorbells.csv results/cpu-softnic-doorbells-plots

# Stream sweeps: reaction p99 against streams, one line per engine and distance.
for csv in results/*streams*.csv; do
    dir=${csv%.csv}-plots
    mkdir -p "$dir"
    "$report" stream-plot "$csv" --svg "$dir/reaction-p99.svg" >/dev/null
    rsvg-convert "$dir/reaction-p99.svg" -o "$dir/reaction-p99.png"
    echo "$dir: $(cd "$dir" && ls | tr '\n' ' ')"
done
