//! The GPU stream decoder (`device/window.cu`, `qfwd::gpu::window`) on an NVIDIA GPU:
//! the same commits as the CPU's `StreamDecoder` on thousands of windows (streams drawn
//! from each model's own error model, fed in batches of C rounds as a stream arrives); the
//! time a window's decode takes from the kernel's own counters (`clock64` around each
//! decode, a warp a window) beside the CPU decoder's on the same windows, d = 5 to 11 at
//! p = 0.001 and 0.003 (`gpu_window_decode_time`, well under a minute); and a throughput
//! / latency benchmark at N = 1, 10, 100 and 1000 concurrent streams: a launch per batch
//! (`GpuStreams`), and a submission per batch to the persistent kernel (`served_*`
//! columns), on the same rounds.
//!
//! ```text
//! cargo test --release --test gpu_window -- --ignored --nocapture --test-threads=1 gpu_window_decode_time
//! cargo test --release --test gpu_window -- --ignored --nocapture --test-threads=1
//! ```
//!
//! Every test prints a notice and passes where there is no GPU. `QFWD_GPU` picks the device
//! (default 0); `QFWD_WINDOW_THREADS` the threads of a block, a window per warp of it
//! (default 256; the identity test also runs 32; the benchmark takes a list, e.g.
//! `32,256,1024`);
//! `QFWD_WINDOW_STREAMS` the streams of the identity test
//! (default 256); `QFWD_WINDOW_LAUNCHES` the timed launches per benchmark row (default 200),
//! `QFWD_WINDOW_PER_LAUNCH` the windows of each stream a launch carries (default 1);
//! `QFWD_WINDOW_CASES` the models to run, by distance (`5,7`; default: all).
//! `tests/window_host.rs` runs the same device code on the CPU (no GPU needed).

mod gpu_common;

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use gpu_common::{gpu_index, gpu_or_skip};
use qfwd::decode::window::{Commit, StreamDecoder, StreamModel, StreamSampler};
use qfwd::decode::Dem;
use qfwd::gpu::window::{Answer, GpuStreams};
use qfwd::stream::batch::{BatchDecoder, Work};
use qfwd::stream::served::ServedBatchDecoder;

/// (fixture, distance, W, C): W = 2d, C = d.
const CASES: &[(&str, u32, u32, u32)] = &[
    ("surface_d5_r5_z_p001", 5, 10, 5),
    ("surface_d5_r5_z_p005", 5, 10, 5),
    ("surface_d7_r7_z_p001", 7, 14, 7),
    ("surface_d7_r7_z_p005", 7, 14, 7),
    ("stream/surface_d9_r3_z_p001", 9, 18, 9),
    ("stream/surface_d11_r3_z_p001", 11, 22, 11),
    ("stream/surface_d13_r3_z_p001", 13, 26, 13),
    ("stream/surface_d15_r3_z_p001", 15, 30, 15),
];

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn cases() -> Vec<(&'static str, u32, u32, u32)> {
    let only: Option<Vec<u32>> = std::env::var("QFWD_WINDOW_CASES")
        .ok()
        .map(|v| v.split(',').filter_map(|d| d.trim().parse().ok()).collect());
    CASES
        .iter()
        .copied()
        .filter(|c| only.as_ref().is_none_or(|o| o.contains(&c.1)))
        .collect()
}

fn model(name: &str, w: u32, c: u32) -> Arc<StreamModel> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/fixtures/{name}.dem"));
    Arc::new(StreamModel::from_dem(&Dem::from_path(&path).unwrap(), w, c).unwrap())
}

/// `streams` streams of `rounds` rounds and a final round, drawn from the model.
fn sampled(m: &Arc<StreamModel>, streams: usize, rounds: u32, seed: u64) -> Vec<Vec<Vec<u8>>> {
    (0..streams)
        .map(|i| {
            let mut s = StreamSampler::new(m, rounds, seed ^ (i as u64) << 20).unwrap();
            std::iter::from_fn(|| s.next_round()).collect()
        })
        .collect()
}

fn cpu_commits(m: &Arc<StreamModel>, rounds: &[Vec<u8>]) -> Vec<Commit> {
    let mut d = StreamDecoder::new(m);
    let (last, body) = rounds.split_last().unwrap();
    let mut out: Vec<Commit> = body
        .iter()
        .enumerate()
        .filter_map(|(r, ev)| d.push_round(r as u64, ev).unwrap())
        .collect();
    out.push(d.finish(last).unwrap());
    out
}

/// Rounds `from..to` of every stream (and its final round when `finish`), stream-major.
fn batch(data: &[Vec<Vec<u8>>], from: usize, to: usize, finish: bool) -> Vec<u8> {
    let mut out = Vec::new();
    for s in data {
        let last = s.len() - 1;
        for ev in &s[from..to] {
            out.extend_from_slice(ev);
        }
        if finish {
            out.extend_from_slice(&s[last]);
        }
    }
    out
}

/// Feeds every stream through the GPU in batches of C rounds; each stream's commits.
fn gpu_commits(g: &mut GpuStreams, data: &[Vec<Vec<u8>>], c: usize) -> Vec<Vec<Commit>> {
    let rounds = data[0].len() - 1;
    let mut out = vec![Vec::new(); data.len()];
    let mut from = 0;
    loop {
        let to = (from + c).min(rounds);
        let finish = to == rounds;
        let events = batch(data, from, to, finish);
        let (answers, _) = g
            .push(from as u64, &events, (to - from) as u32, finish)
            .unwrap();
        for (i, a) in answers.into_iter().enumerate() {
            for x in a {
                match x {
                    Answer::Commit(c) => out[i].push(c),
                    Answer::Refused(r) => panic!("stream {i} refused a round: {r:?}"),
                }
            }
        }
        if finish {
            return out;
        }
        from = to;
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU; see the module docs"]
fn gpu_stream_commits_match_the_cpu() {
    let Some(_gpu) = gpu_or_skip("gpu_stream_commits_match_the_cpu") else {
        return;
    };
    let streams = env_or("QFWD_WINDOW_STREAMS", 256usize);
    let default_threads = env_or("QFWD_WINDOW_THREADS", 256u32);
    for (name, d, w, c) in cases() {
        let m = model(name, w, c);
        let rounds = 5 * w + c / 2;
        let data = sampled(&m, streams, rounds, 1);
        let want: Vec<Vec<Commit>> = data.iter().map(|s| cpu_commits(&m, s)).collect();
        let windows: usize = want.iter().map(Vec::len).sum();
        let flipping = want.iter().flatten().filter(|c| c.flips != 0).count();
        for threads in [default_threads, 32] {
            let mut g = GpuStreams::new(gpu_index(), &m, streams, threads).unwrap();
            let got = gpu_commits(&mut g, &data, c as usize);
            for (i, (a, b)) in got.iter().zip(&want).enumerate() {
                assert_eq!(a, b, "{name} stream {i}, {threads} threads");
            }
        }
        eprintln!(
            "{name} (d={d}, W={w}, C={c}): {streams} streams x {rounds} rounds, {windows} \
             windows ({flipping} commits flip an observable): GPU == CPU"
        );
    }
}

/// Models of the decode-time table: d = 5 to 11 at p = 0.001 and 0.003.
const TIME_CASES: &[(&str, u32, f64)] = &[
    ("surface_d5_r5_z_p001", 5, 0.001),
    ("stream/surface_d5_r3_z_p003", 5, 0.003),
    ("surface_d7_r7_z_p001", 7, 0.001),
    ("stream/surface_d7_r3_z_p003", 7, 0.003),
    ("stream/surface_d9_r3_z_p001", 9, 0.001),
    ("stream/surface_d9_r3_z_p003", 9, 0.003),
    ("stream/surface_d11_r3_z_p001", 11, 0.001),
    ("stream/surface_d11_r3_z_p003", 11, 0.003),
];

/// The time of one window's decode on the GPU from the kernel's counters (a warp a
/// window, one stream per block so windows do not share a multiprocessor's issue slots,
/// one window of every stream per launch), beside the CPU decoder's time on the same
/// windows (one thread, each completing `push_round` timed), W = 2d, C = d; every GPU
/// commit checked against the CPU's. Prints a CSV.
#[test]
#[ignore = "needs an NVIDIA GPU; see the module docs"]
fn gpu_window_decode_time() {
    let Some(_gpu) = gpu_or_skip("gpu_window_decode_time") else {
        return;
    };
    let streams = env_or("QFWD_WINDOW_STREAMS", 128usize);
    let launches = env_or("QFWD_WINDOW_LAUNCHES", 40usize);
    println!(
        "model,d,p,W,C,streams,windows,defects_per_window,gpu_window_p50_us,gpu_window_p99_us,\
         gpu_window_mean_us,cpu_window_p50_us,cpu_window_mean_us,identical,layout"
    );
    for &(name, d, p) in TIME_CASES {
        let (w, c) = (2 * d, d);
        let m = model(name, w, c);
        let rounds = w + launches as u32 * c;
        let data = sampled(&m, streams, rounds, 3);
        // The CPU on the same windows: commits and the time of each window.
        let mut cpu_times = Vec::new();
        let mut want = Vec::with_capacity(streams);
        let mut defects = 0usize;
        for s in &data {
            let mut dec = StreamDecoder::new(&m);
            let mut commits = Vec::new();
            for (r, ev) in s[..rounds as usize].iter().enumerate() {
                defects += ev.iter().map(|b| b.count_ones() as usize).sum::<usize>();
                let t = Instant::now();
                let got = dec.push_round(r as u64, ev).unwrap();
                let ns = t.elapsed();
                if let Some(commit) = got {
                    cpu_times.push(ns);
                    commits.push(commit);
                }
            }
            want.push(commits);
        }
        let mut g = GpuStreams::new(gpu_index(), &m, streams, 32).unwrap();
        let khz = g.clock_khz().unwrap() as f64;
        let first = batch(&data, 0, w as usize - 1, false);
        g.push(0, &first, w - 1, false).unwrap();
        g.take_window_cycles().unwrap();
        let mut got = vec![Vec::new(); streams];
        let mut gpu_us = Vec::new();
        let mut from = w as usize - 1;
        while from < rounds as usize {
            let to = (from
                + if from == w as usize - 1 {
                    1
                } else {
                    c as usize
                })
            .min(rounds as usize);
            let events = batch(&data, from, to, false);
            let (answers, _) = g
                .push(from as u64, &events, (to - from) as u32, false)
                .unwrap();
            let cycles = g.take_window_cycles().unwrap();
            for (i, a) in answers.into_iter().enumerate() {
                let n = a.len();
                for x in a {
                    match x {
                        Answer::Commit(c) => got[i].push(c),
                        Answer::Refused(r) => panic!("stream {i} refused a round: {r:?}"),
                    }
                }
                if n == 1 {
                    gpu_us.push(cycles[i] as f64 / khz * 1e3);
                }
            }
            from = to;
        }
        let identical = got == want;
        assert!(identical, "{name}: GPU commits differ from the CPU's");
        gpu_us.sort_by(f64::total_cmp);
        cpu_times.sort();
        let pct = |v: &[f64], q: f64| v[((v.len() - 1) as f64 * q).round() as usize];
        let cpu_us: Vec<f64> = cpu_times.iter().map(|t| t.as_secs_f64() * 1e6).collect();
        let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len().max(1) as f64;
        let windows = gpu_us.len();
        println!(
            "{name},{d},{p},{w},{c},{streams},{windows},{:.1},{:.2},{:.2},{:.2},{:.2},{:.2},{identical},\"{}\"",
            defects as f64 / (streams as f64 * f64::from(rounds)) * f64::from(w),
            pct(&gpu_us, 0.5),
            pct(&gpu_us, 0.99),
            mean(&gpu_us),
            pct(&cpu_us, 0.5),
            mean(&cpu_us),
            g.describe()
        );
    }
}

/// The same windows through the persistent kernel (`qfwd::gpu::stream_server`, driven by
/// the engine's `ServedBatchDecoder`): the time of each submission of `per` x C rounds
/// of every stream (`per` windows each), sorted.
fn served_times(
    m: &Arc<StreamModel>,
    data: &[Vec<Vec<u8>>],
    threads: u32,
    launches: usize,
    w: u32,
    (c, per): (u32, usize),
) -> Vec<Duration> {
    let n = data.len();
    let mut served = ServedBatchDecoder::gpu(gpu_index(), m, n, threads).unwrap();
    let work = |from: usize, rounds: usize| -> Vec<Work> {
        (0..n)
            .map(|s| Work {
                stream: s as u32,
                reset: false,
                first_round: from as u64,
                rounds: rounds as u32,
                finish: false,
                events: data[s][from..from + rounds].concat(),
            })
            .collect()
    };
    let (mut commits, mut counts) = (Vec::new(), Vec::new());
    served
        .decode(&work(0, w as usize), &mut commits, &mut counts)
        .unwrap();
    let mut times = Vec::with_capacity(launches);
    let mut from = w as usize;
    for _ in 0..launches {
        let batch = work(from, per * c as usize);
        commits.clear();
        counts.clear();
        let t = Instant::now();
        served.decode(&batch, &mut commits, &mut counts).unwrap();
        times.push(t.elapsed());
        assert!(
            counts.iter().all(|&k| k as usize == per),
            "{per} windows a stream"
        );
        from += per * c as usize;
    }
    times.sort();
    let t = served.times();
    let per = |ns: u64| ns as f64 / 1e3 / t.submissions.max(1) as f64;
    eprintln!(
        "  served {n} streams: {}\n  per submission: write {:.1} µs, wait {:.1} µs, read {:.1} µs\n  {}",
        served.describe(),
        per(t.write_ns),
        per(t.wait_ns),
        per(t.read_ns),
        served.timings().unwrap_or_default()
    );
    times
}

fn percentile(sorted: &[Duration], q: f64) -> f64 {
    let i = ((sorted.len() - 1) as f64 * q).round() as usize;
    sorted[i].as_secs_f64() * 1e6
}

#[test]
#[ignore = "needs an NVIDIA GPU; see the module docs"]
fn gpu_stream_window_throughput() {
    let Some(_gpu) = gpu_or_skip("gpu_stream_window_throughput") else {
        return;
    };
    let thread_list: Vec<u32> = std::env::var("QFWD_WINDOW_THREADS")
        .ok()
        .map(|v| v.split(',').filter_map(|t| t.trim().parse().ok()).collect())
        .filter(|l: &Vec<u32>| !l.is_empty())
        .unwrap_or_else(|| vec![256]);
    let launches = env_or("QFWD_WINDOW_LAUNCHES", 200usize);
    let per = env_or("QFWD_WINDOW_PER_LAUNCH", 1usize).max(1);
    println!(
        "model,d,W,C,threads,streams,launches,kernel_p50_us,kernel_p99_us,call_p50_us,\
         windows_per_s,served_p50_us,served_p99_us,served_windows_per_s,cpu_window_mean_us"
    );
    for (name, d, w, c) in cases() {
        let m = model(name, w, c);
        for (threads, n) in thread_list
            .iter()
            .flat_map(|&t| [1usize, 10, 100, 1000].map(|n| (t, n)))
        {
            // Every launch brings C rounds of every stream: one window each. At most 64
            // distinct streams are drawn (the others repeat them), to keep the host's
            // sampling short.
            let step = per * c as usize;
            let rounds = (launches + 2) as u32 * step as u32 + w;
            let distinct = sampled(&m, n.min(64), rounds, 7);
            let data: Vec<Vec<Vec<u8>>> = (0..n)
                .map(|i| distinct[i % distinct.len()].clone())
                .collect();
            let mut g = GpuStreams::new(gpu_index(), &m, n, threads).unwrap();
            // The first window needs W rounds: fill them, untimed.
            let first = batch(&data, 0, w as usize, false);
            g.push(0, &first, w, false).unwrap();
            let mut kernel = Vec::with_capacity(launches);
            let mut call = Vec::with_capacity(launches);
            let mut from = w as usize;
            for _ in 0..launches {
                let events = batch(&data, from, from + step, false);
                let (answers, t) = g.push(from as u64, &events, step as u32, false).unwrap();
                assert!(
                    answers.iter().all(|a| a.len() == per),
                    "{per} windows a stream"
                );
                kernel.push(t.kernel);
                call.push(t.total);
                from += step;
            }
            kernel.sort();
            call.sort();
            let total: Duration = kernel.iter().sum();
            drop(g);
            let served = served_times(&m, &data, threads, launches, w, (c, per));
            let served_total: Duration = served.iter().sum();
            // The CPU decoder on the same rounds of stream 0, one thread.
            let mut cpu = StreamDecoder::new(&m);
            let t = Instant::now();
            let mut windows = 0;
            for (r, ev) in data[0][..from].iter().enumerate() {
                windows += usize::from(cpu.push_round(r as u64, ev).unwrap().is_some());
            }
            let cpu_us = t.elapsed().as_secs_f64() * 1e6 / windows.max(1) as f64;
            println!(
                "{name},{d},{w},{c},{threads},{n},{launches},{:.1},{:.1},{:.1},{:.0},{:.1},{:.1},\
                 {:.0},{:.2}",
                percentile(&kernel, 0.5),
                percentile(&kernel, 0.99),
                percentile(&call, 0.5),
                (n * launches * per) as f64 / total.as_secs_f64(),
                percentile(&served, 0.5),
                percentile(&served, 0.99),
                (n * launches * per) as f64 / served_total.as_secs_f64(),
                cpu_us
            );
        }
    }
}

/// Runs everywhere: every case's model builds, with one kept slot per Z stabilizer.
#[test]
fn every_case_builds_its_model() {
    for (name, d, w, c) in CASES.iter().copied() {
        let m = model(name, w, c);
        assert_eq!(m.kept_slots().len() as u32, (d * d - 1) / 2, "{name}");
        assert_eq!(m.detectors_per_round() as u32, d * d - 1, "{name}");
        assert_eq!((m.head_rounds(), m.tail_rounds()), (1, 1), "{name}");
    }
}
