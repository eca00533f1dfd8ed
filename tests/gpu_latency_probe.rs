//! Latency probe for validating the GPU path by hand (not a benchmark report: the harness
//! in `latency/` writes those). Prints p50/p90/p99/p99.9/max of submit -> poll round trips
//! (32 B parity requests, one in flight) for every topology / rx_completion / pollers /
//! warps-per-block combination, then an open-loop run at 1 M requests/s.
//!
//! ```text
//! cargo test --release --test gpu_latency_probe -- --ignored --nocapture
//! ```
//!
//! `QFWD_GPU` picks the device; `QFWD_PROBE_SAMPLES` the samples per row (default 20000);
//! `QFWD_PROBE_CORE` the core the probe thread is pinned to (default: the last one).

use std::time::{Duration, Instant};

use qfwd::backend::Backend;
use qfwd::gpu::{self, GpuOptions};
use qfwd::handler::Handler;
use qfwd::mailbox::{PollerCounters, RxCompletion};

fn env_or<T: std::str::FromStr>(key: &str, default: T) -> T {
    std::env::var(key)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn pin() {
    let Some(cores) = core_affinity::get_core_ids() else {
        return;
    };
    let want = env_or("QFWD_PROBE_CORE", cores.len().saturating_sub(1));
    if let Some(core) = cores.into_iter().find(|c| c.id == want) {
        core_affinity::set_for_current(core);
    }
}

struct Summary {
    p50: u64,
    p90: u64,
    p99: u64,
    p999: u64,
    max: u64,
}

fn summarize(mut ns: Vec<u64>) -> Summary {
    ns.sort_unstable();
    let q = |p: f64| ns[((ns.len() as f64 * p) as usize).min(ns.len() - 1)];
    Summary {
        p50: q(0.50),
        p90: q(0.90),
        p99: q(0.99),
        p999: q(0.999),
        max: *ns.last().unwrap(),
    }
}

fn row(label: &str, s: &Summary) {
    println!(
        "{label:<44} p50 {:>6.2} µs  p90 {:>6.2}  p99 {:>6.2}  p99.9 {:>7.2}  max {:>8.2}",
        s.p50 as f64 / 1e3,
        s.p90 as f64 / 1e3,
        s.p99 as f64 / 1e3,
        s.p999 as f64 / 1e3,
        s.max as f64 / 1e3
    );
}

/// Ping-pong: `samples` round trips of a 32 B request after `warmup` unmeasured ones.
fn ping_pong<B: Backend>(b: &mut B, warmup: usize, samples: usize) -> Summary {
    let arg = [0x5au8; 32];
    let mut ns = Vec::with_capacity(samples);
    for i in 0..warmup + samples {
        let t0 = Instant::now();
        b.submit(i as u32, &Handler::Parity, &arg).expect("submit");
        let mut spins = 0u32;
        while b.poll(|c| assert_eq!(c.result, &[0])) == 0 {
            // Reading the clock on every spin would slow the poll loop down.
            spins = spins.wrapping_add(1);
            if spins % 4096 == 0 {
                assert!(t0.elapsed() < Duration::from_secs(1), "request {i} lost");
            }
        }
        if i >= warmup {
            ns.push(t0.elapsed().as_nanos() as u64);
        }
    }
    summarize(ns)
}

/// Open loop at `rate` requests/s for `duration`; latency from each request's intended
/// send time (as wrk2), so queueing is not hidden. Returns (summary, achieved rate, refused).
fn open_loop<B: Backend>(b: &mut B, rate: f64, duration: Duration) -> (Summary, f64, u64) {
    let arg = [0x5au8; 32];
    let n = (rate * duration.as_secs_f64()) as usize;
    let interval = 1e9 / rate;
    let mut intended = vec![0u64; n];
    let mut ns = Vec::with_capacity(n);
    let mut refused = 0u64;
    let start = Instant::now();
    let mut next = 0usize;
    while ns.len() + (refused as usize) < n {
        let now = start.elapsed().as_nanos() as u64;
        while next < n && (next as f64 * interval) as u64 <= now {
            intended[next] = (next as f64 * interval) as u64;
            if b.submit(next as u32, &Handler::Parity, &arg).is_err() {
                refused += 1;
            }
            next += 1;
        }
        b.poll(|c| {
            let t = start.elapsed().as_nanos() as u64;
            ns.push(t - intended[c.token as usize]);
        });
        assert!(start.elapsed() < duration * 20, "open loop stuck");
    }
    let achieved = ns.len() as f64 / start.elapsed().as_secs_f64();
    (summarize(ns), achieved, refused)
}

#[test]
#[ignore = "needs an NVIDIA GPU: cargo test --release --test gpu_latency_probe -- --ignored --nocapture"]
fn latency_probe() {
    let gpus = match gpu::probe() {
        Ok(Some(g)) => g,
        other => {
            eprintln!("SKIP latency_probe: no GPU ({other:?})");
            return;
        }
    };
    let device: usize = env_or("QFWD_GPU", 0);
    let samples: usize = env_or("QFWD_PROBE_SAMPLES", 20_000);
    let warmup = 2_000;
    pin();
    println!("{}", gpus[device]);
    println!("32 B parity, ping-pong, {samples} samples after {warmup} warm-up, submit -> poll");
    let base = GpuOptions {
        device,
        ..GpuOptions::default()
    };
    {
        let mut b = gpu::launch_backend(&base).unwrap();
        row("gpu-launch", &ping_pong(&mut b, warmup, samples));
    }
    {
        let mut b = gpu::graph_backend(&base).unwrap();
        row("gpu-graph", &ping_pong(&mut b, warmup, samples));
    }
    use RxCompletion::{Buffer, Inline};
    let rows: &[(RxCompletion, u32, u32, u32)] = &[
        // (rx, pollers, pollers per slot, warps per block: 0 = one block, phase grid)
        (Inline, 1, 1, 0),
        (Inline, 2, 2, 0),
        (Inline, 4, 4, 0),
        (Inline, 8, 8, 0),
        (Inline, 16, 16, 0),
        (Inline, 4, 1, 0),
        (Inline, 8, 1, 0),
        (Inline, 16, 1, 0),
        (Inline, 4, 2, 0),
        (Inline, 8, 2, 0),
        (Inline, 16, 2, 0),
        (Inline, 8, 4, 0),
        (Inline, 16, 4, 0),
        (Inline, 16, 8, 0),
        (Inline, 4, 4, 1),
        (Inline, 8, 2, 1),
        (Buffer, 1, 1, 0),
        (Buffer, 2, 2, 0),
        (Buffer, 8, 2, 0),
        (Buffer, 8, 4, 0),
    ];
    for &(rx, pollers, pollers_per_slot, warps_per_block) in rows {
        let o = GpuOptions {
            rx_completion: rx,
            pollers,
            pollers_per_slot,
            warps_per_block,
            ..base.clone()
        };
        let mut b = gpu::persistent_backend(&o).unwrap();
        let s = ping_pong(&mut b, warmup, samples);
        let c = PollerCounters::total(&b.shutdown(Duration::from_secs(2)).unwrap());
        // Groups split over blocks keep their claim ticket in device memory.
        let placement = if warps_per_block == 0 || warps_per_block % pollers_per_slot == 0 {
            ""
        } else {
            " spread, L2 ticket"
        };
        row(
            &format!(
                "gpu-persistent {rx} {pollers:>2} pollers, {pollers_per_slot:>2}/slot{placement}"
            ),
            &s,
        );
        println!(
            "{:<44} polls/req {:.1}, torn {}, lost claims {}",
            "",
            c.polls as f64 / c.served.max(1) as f64,
            c.torn,
            c.lost_claims
        );
    }
    println!("open loop, 32 B, latency from intended send time");
    for (rx, pollers, pollers_per_slot) in [
        (Inline, 8u32, 2u32),
        (Inline, 16, 4),
        (Inline, 8, 1),
        (Buffer, 8, 2),
    ] {
        for rate in [1e6, 2e6] {
            let o = GpuOptions {
                rx_completion: rx,
                pollers,
                pollers_per_slot,
                ..base.clone()
            };
            let mut b = gpu::persistent_backend(&o).unwrap();
            let (s, achieved, refused) = open_loop(&mut b, rate, Duration::from_secs(1));
            b.shutdown(Duration::from_secs(2)).unwrap();
            row(
                &format!(
                    "open {:.0} M/s {rx} {pollers} pollers, {pollers_per_slot}/slot",
                    rate / 1e6
                ),
                &s,
            );
            println!(
                "{:<44} achieved {:.3} M req/s, refused (overload) {refused}",
                "",
                achieved / 1e6
            );
        }
    }
}
