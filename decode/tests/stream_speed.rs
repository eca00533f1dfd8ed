//! CPU time of the stream decoder per window (a benchmark, not a check: ignored by default).
//!
//! ```text
//! cargo test --release -p qfwd-decode --test stream_speed -- --ignored --nocapture
//! ```
//!
//! Streams drawn from each fixture's own error model (`StreamSampler`), W = 2d, C = d; every
//! round pushed through `StreamDecoder::push_round` on one thread, and each call that
//! completes a window timed on its own (one clock read before and after: ~20-40 ns of the
//! figure). Prints a CSV on stdout: per model and decoder (exact matching of clusters up to
//! 16 defects, or greedy matching alone), windows, mean, p50, p99 and max per window, the
//! mean defects per window (carried ones aside), the CPU and the host.
//! `QFWD_STREAM_SPEED_WINDOWS` sets the windows per row (default 20 000).

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use qfwd_decode::window::{MatchLimits, StreamDecoder, StreamModel, StreamSampler};
use qfwd_decode::Dem;

const FIXTURES: &[(&str, u32)] = &[
    ("surface_d5_r5_z_p001", 5),
    ("surface_d5_r5_z_p005", 5),
    ("surface_d7_r7_z_p001", 7),
    ("surface_d7_r7_z_p005", 7),
];

/// The CPU's model name and the host's name (Linux), for the CSV.
fn cpu_and_host() -> (String, String) {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|s| s.trim().to_string())
        })
        .unwrap_or_else(|| "unknown".into());
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_else(|_| "unknown".into());
    (cpu, host)
}

fn percentile(sorted: &[u64], q: f64) -> u64 {
    sorted[((sorted.len() - 1) as f64 * q).round() as usize]
}

#[test]
#[ignore = "a benchmark: run it in release mode, see the module docs"]
fn cpu_time_per_window() {
    let windows: usize = std::env::var("QFWD_STREAM_SPEED_WINDOWS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20_000);
    let (cpu, host) = cpu_and_host();
    println!(
        "model,d,W,C,decoder,windows,mean_ns,p50_ns,p99_ns,max_ns,defects_per_window,cpu,host"
    );
    for &(name, d) in FIXTURES {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../tests/fixtures")
            .join(format!("{name}.dem"));
        let dem = Dem::from_path(&path).unwrap();
        for (label, limits) in [
            ("match16", MatchLimits::DEFAULT),
            ("greedy", MatchLimits::OFF),
        ] {
            let (w, c) = (2 * d, d);
            let m = Arc::new(StreamModel::from_dem_with(&dem, w, c, limits).unwrap());
            let mut stream = StreamDecoder::new(&m);
            // Long streams: 200 windows each.
            let rounds = 200 * c + w;
            let mut times = Vec::with_capacity(windows);
            let (mut defects, mut seed) = (0usize, 0u64);
            while times.len() < windows {
                let mut s = StreamSampler::new(&m, rounds, seed).unwrap();
                seed += 1;
                stream.reset();
                for r in 0..u64::from(rounds) {
                    let ev = s.next_round().unwrap();
                    defects += ev.iter().map(|b| b.count_ones() as usize).sum::<usize>();
                    let t = Instant::now();
                    let got = stream.push_round(r, &ev).unwrap();
                    let ns = t.elapsed().as_nanos() as u64;
                    if got.is_some() {
                        times.push(ns);
                    }
                }
            }
            times.sort_unstable();
            let mean = times.iter().sum::<u64>() as f64 / times.len() as f64;
            // Defects per window: events per round x W (carried defects aside).
            let per_window = defects as f64 / (seed as f64 * f64::from(rounds)) * f64::from(w);
            println!(
                "{name},{d},{w},{c},{label},{},{mean:.0},{},{},{},{per_window:.1},\"{cpu}\",{host}",
                times.len(),
                percentile(&times, 0.5),
                percentile(&times, 0.99),
                times[times.len() - 1]
            );
        }
    }
}
