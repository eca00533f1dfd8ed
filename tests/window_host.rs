//! The GPU stream decoder's device code (`device/window.cu`), built by g++ for the CPU
//! (`tests/window_host/driver.cpp`: a group of std::threads with a std::barrier stands in
//! for a thread block, a 32-thread barrier for a warp), answers exactly what the CPU's
//! `StreamDecoder` answers: the same commits on sampled surface-code streams at d = 5 to
//! 15 (noisy enough at d = 5 and 7 that clusters pass the exact matching's limit), on a
//! repetition code whose equal weights make ties everywhere, and on two-detector graphs
//! whose weights make the small clusters' choices tie, with the exact matching on, off and
//! limited to small clusters, a warp alone or the first of a larger group, reading the
//! bulk tables from the model or from a block's copy; and the same refusals. Skips where
//! there is no g++ (CI installs it).
//!
//! `window_steps` (ignored: a measurement) counts a window's warp steps and the table
//! reads on its critical path. On a GPU, `tests/gpu_window.rs` checks the kernel itself.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, OnceLock};

use qfwd::decode::window::{
    repetition_text, repetition_text_per_qubit, Commit, MatchLimits, StreamDecoder, StreamError,
    StreamModel, StreamSampler,
};
use qfwd::decode::Dem;
use qfwd::gpu::window::PackedModel;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The driver, built once per test process; `None` (skip) without g++.
fn driver() -> Option<&'static PathBuf> {
    static DRIVER: OnceLock<Option<PathBuf>> = OnceLock::new();
    DRIVER
        .get_or_init(|| {
            let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("window-host-driver");
            let status = Command::new("g++")
                .args(["-std=c++20", "-O2", "-pthread", "-Wall", "-Wextra"])
                .arg("-I")
                .arg(root().join("device"))
                .arg("-o")
                .arg(&out)
                .arg(root().join("tests/window_host/driver.cpp"))
                .status();
            match status {
                Ok(s) if s.success() => Some(out),
                Ok(s) => panic!("g++ failed to build the window host driver: {s}"),
                Err(e) => {
                    eprintln!("SKIP window_host: cannot run g++ ({e})");
                    None
                }
            }
        })
        .as_ref()
}

/// A fixture's model, or (`rep`) a distance-9 repetition code whose edges all weigh the
/// same, so that equal-cost choices abound.
fn model(name: &str, w: u32, c: u32, limits: MatchLimits) -> Arc<StreamModel> {
    let dem = if name == "rep" {
        Dem::parse(&repetition_text(9, 6, 0.03, 0.03), "rep").unwrap()
    } else if name == "rep-qubits" {
        Dem::parse(&repetition_text_per_qubit(9, 6, 0.03, 0.03), "rep-qubits").unwrap()
    } else if name == "rep5-qubits" {
        Dem::parse(&repetition_text_per_qubit(5, 6, 0.08, 0.08), "rep5-qubits").unwrap()
    } else if let Some(weights) = name.strip_prefix("pair-").and_then(pair_weights) {
        Dem::parse(&pair_text(12, weights), name).unwrap()
    } else {
        Dem::from_path(&root().join(format!("tests/fixtures/{name}.dem"))).unwrap()
    };
    Arc::new(StreamModel::from_dem_with(&dem, w, c, limits).unwrap())
}

/// The error probability whose quantized weight is `w` (256 per unit of ln odds).
fn probability(w: u32) -> f64 {
    1.0 / (1.0 + (f64::from(w) / 256.0).exp())
}

/// Weights (edge, boundary of the first detector, of the second, time) by name.
fn pair_weights(name: &str) -> Option<[u32; 4]> {
    match name {
        // Two defects: paired (1024) or both to the boundary (512 + 512), a tie.
        "tie" => Some([1024, 512, 512, 2048]),
        // One defect: its own boundary edge (1024) or across and out (512 + 512), a tie;
        // and a lone defect on the second detector: out across the first (512 + 1024) or
        // through its own (512).
        "lopsided" => Some([512, 1024, 512, 2048]),
        _ => None,
    }
}

/// Two detectors a round over `rounds` rounds: an edge between them, a boundary edge on
/// each, time edges; each edge flips an observable of its own (L0 the first boundary,
/// L1 the pair, L2 the second boundary, L3 the time edges), so the commits show every
/// choice the matching makes in the two-member regions such a graph is made of.
fn pair_text(rounds: u32, [edge, first, second, time]: [u32; 4]) -> String {
    let mut t = String::new();
    for r in 0..rounds {
        t += &format!("detector(0, 0, {r}) D{}\n", 2 * r);
        t += &format!("detector(1, 0, {r}) D{}\n", 2 * r + 1);
    }
    for r in 0..rounds {
        let (a, b) = (2 * r, 2 * r + 1);
        t += &format!("error({}) D{a} D{b} L1\n", probability(edge));
        t += &format!("error({}) D{a} L0\n", probability(first));
        t += &format!("error({}) D{b} L2\n", probability(second));
        if r + 1 < rounds {
            t += &format!("error({}) D{a} D{} L3\n", probability(time), a + 2);
            t += &format!("error({}) D{b} D{} L3\n", probability(time), b + 2);
        }
    }
    t
}

/// Exact matching of the smallest clusters only: the lanes' exact matching and the
/// warp's greedy one both run.
const SMALL: MatchLimits = MatchLimits { defects: 3 };

/// One answer: a commit, or a refusal's device status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Answer {
    Commit(Commit),
    Refused(i32),
}

fn status_of(e: StreamError) -> i32 {
    match e {
        StreamError::RoundRepeated { .. } => -1,
        StreamError::RoundsMissing { .. } => -2,
        StreamError::Finished => -3,
        StreamError::TooShort { .. } => -4,
        other => panic!("no device status for {other:?}"),
    }
}

/// One run of the driver: `streams` streams of `rounds` rounds from `first_round`, then a
/// final round each, groups of `threads`, the bulk tables read from a block's copy when
/// `cached`.
#[derive(Clone, Copy)]
struct Run {
    streams: usize,
    rounds: u32,
    threads: u32,
    first_round: u64,
    cached: bool,
}

impl Run {
    fn new(streams: usize, rounds: u32, threads: u32, first_round: u64) -> Run {
        Run {
            streams,
            rounds,
            threads,
            first_round,
            cached: threads == 32,
        }
    }
}

/// The driver's run over `events` (streams x inputs rounds), checked to succeed; with
/// `count_steps`, its stderr says how many windows, warp steps and critical table reads
/// inside them it ran.
fn driver_output(
    model: &StreamModel,
    events: &[u8],
    run: Run,
    count_steps: bool,
) -> std::process::Output {
    let driver = driver().expect("checked by the caller");
    let packed = PackedModel::of(model).unwrap();
    let dir = tempdir();
    let (blob, desc, ev) = (dir.join("blob"), dir.join("model"), dir.join("events"));
    std::fs::write(&blob, packed.blob_bytes()).unwrap();
    std::fs::write(&desc, packed.desc.to_bytes()).unwrap();
    std::fs::write(&ev, events).unwrap();
    let mut cmd = Command::new(driver);
    cmd.arg(&blob).arg(&desc).arg(&ev).args([
        run.streams.to_string(),
        run.rounds.to_string(),
        // FINISH: every run ends with its streams' final rounds.
        "1".to_string(),
        run.threads.to_string(),
        run.first_round.to_string(),
        u32::from(run.cached).to_string(),
    ]);
    if count_steps {
        cmd.env("QFWD_WINDOW_STEPS", "1");
    }
    // Output to files, so the driver never blocks on a pipe while it is waited for.
    let (stdout, stderr) = (dir.join("stdout"), dir.join("stderr"));
    cmd.stdout(std::fs::File::create(&stdout).unwrap());
    cmd.stderr(std::fs::File::create(&stderr).unwrap());
    let mut child = cmd.spawn().unwrap();
    let pid = child.id().to_string();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait());
    });
    let Ok(status) = rx.recv_timeout(DRIVER_DEADLINE) else {
        let _ = Command::new("kill").args(["-9", &pid]).status();
        panic!(
            "the driver ran past {DRIVER_DEADLINE:?}: threads of a group that disagree on \
             the barriers they meet wait forever"
        );
    };
    let status = status.unwrap();
    let out = std::process::Output {
        status,
        stdout: std::fs::read(&stdout).unwrap(),
        stderr: std::fs::read(&stderr).unwrap(),
    };
    assert!(
        out.status.success(),
        "driver: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// How long one driver run may take (the slowest takes about a second).
const DRIVER_DEADLINE: std::time::Duration = std::time::Duration::from_secs(120);

/// Runs the driver over `events` (streams x inputs rounds); each stream's answers.
fn run_device(model: &StreamModel, events: &[u8], run: Run) -> Vec<Vec<Answer>> {
    let streams = run.streams;
    let out = driver_output(model, events, run, false);
    let mut answers = vec![Vec::new(); streams];
    for line in String::from_utf8(out.stdout).unwrap().lines() {
        let f: Vec<u64> = line
            .split_whitespace()
            .map(|x| x.parse::<i64>().unwrap() as u64)
            .collect();
        let status = f[1] as i64 as i32;
        answers[f[0] as usize].push(if status == 1 {
            Answer::Commit(Commit {
                first_round: f[2],
                rounds: f[3] as u32,
                flips: f[4],
            })
        } else {
            Answer::Refused(status)
        });
    }
    answers
}

fn tempdir() -> PathBuf {
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!(
        "window-host-{}-{}",
        std::process::id(),
        N.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Sampled streams of `rounds` rounds and their final round, stream by stream.
fn sampled(model: &Arc<StreamModel>, streams: usize, rounds: u32, seed: u64) -> Vec<Vec<Vec<u8>>> {
    (0..streams)
        .map(|i| {
            let mut s = StreamSampler::new(model, rounds, seed + i as u64).unwrap();
            std::iter::from_fn(|| s.next_round()).collect()
        })
        .collect()
}

fn cpu_answers(
    model: &Arc<StreamModel>,
    stream_rounds: &[Vec<Vec<u8>>],
    first_round: u64,
    finish: bool,
) -> Vec<Vec<Answer>> {
    stream_rounds
        .iter()
        .map(|rounds| {
            let mut d = StreamDecoder::new(model);
            let (last, body) = rounds.split_last().unwrap();
            let mut out = Vec::new();
            for (r, ev) in body.iter().enumerate() {
                match d.push_round(first_round + r as u64, ev) {
                    Ok(Some(c)) => out.push(Answer::Commit(c)),
                    Ok(None) => {}
                    Err(e) => out.push(Answer::Refused(status_of(e))),
                }
            }
            if finish {
                out.push(match d.finish(last) {
                    Ok(c) => Answer::Commit(c),
                    Err(e) => Answer::Refused(status_of(e)),
                });
            }
            out
        })
        .collect()
}

fn check(
    name: &str,
    (w, c): (u32, u32),
    limits: MatchLimits,
    streams: usize,
    rounds: u32,
    threads: &[u32],
) {
    if driver().is_none() {
        return;
    }
    let m = model(name, w, c, limits);
    let data = sampled(&m, streams, rounds, 11);
    let events: Vec<u8> = data.iter().flatten().flatten().copied().collect();
    let want = cpu_answers(&m, &data, 0, true);
    let commits: usize = want.iter().map(Vec::len).sum();
    let nonzero = want
        .iter()
        .flatten()
        .filter(|a| matches!(a, Answer::Commit(c) if c.flips != 0))
        .count();
    assert!(nonzero > 0, "{name}: some commits flip an observable");
    for &t in threads {
        let got = run_device(&m, &events, Run::new(streams, rounds, t, 0));
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert_eq!(g, w, "{name} {limits:?} stream {i}, {t} threads");
        }
    }
    eprintln!("{name} W={w} C={c} {limits:?}: {commits} commits ({nonzero} flipping) identical");
}

#[test]
fn device_code_commits_what_the_cpu_commits_d5() {
    let d5 = "surface_d5_r5_z_p005";
    check(d5, (10, 5), MatchLimits::DEFAULT, 16, 40, &[32, 96]);
    check(d5, (10, 5), MatchLimits::OFF, 12, 40, &[32]);
    check(d5, (10, 5), SMALL, 12, 40, &[64]);
    check(d5, (4, 1), MatchLimits::DEFAULT, 8, 17, &[32]);
}

#[test]
fn device_code_breaks_ties_as_the_cpu_does() {
    check("rep", (8, 4), MatchLimits::DEFAULT, 24, 30, &[32, 64]);
    check("rep", (8, 4), MatchLimits::OFF, 24, 30, &[32]);
    // An observable per data qubit: the commits show which qubits each correction flips,
    // so equal commits mean equal choices (boundary or pair, which boundary, which path).
    check(
        "rep-qubits",
        (8, 4),
        MatchLimits::DEFAULT,
        24,
        30,
        &[32, 64],
    );
    check("rep5-qubits", (8, 4), MatchLimits::DEFAULT, 24, 30, &[32]);
}

/// Clusters of two defects whose matchings tie: pair or both to the boundary, and which
/// way a lone defect leaves.
#[test]
fn device_code_breaks_ties_in_two_defect_clusters_as_the_cpu_does() {
    for name in ["pair-tie", "pair-lopsided"] {
        check(name, (4, 2), MatchLimits::DEFAULT, 24, 11, &[32, 64]);
    }
}

#[test]
fn device_code_commits_what_the_cpu_commits_d7() {
    let d7 = "surface_d7_r7_z_p005";
    check(d7, (14, 7), MatchLimits::DEFAULT, 12, 35, &[32, 64]);
    check(d7, (14, 7), MatchLimits::OFF, 8, 35, &[32]);
    // More than 32 defects a window: every step loops over the lanes' defects.
    check(
        "surface_d7_r7_z_p005",
        (21, 7),
        MatchLimits { defects: 14 },
        6,
        42,
        &[32],
    );
}

/// Larger codes at p = 0.001: the pair tables of 9 to 15 (read from the model; at d >= 13
/// no block's copy would fit in shared memory, the driver reads them either way).
#[test]
fn device_code_commits_what_the_cpu_commits_d9_to_d15() {
    for d in [9, 11, 13, 15] {
        let name = format!("stream/surface_d{d}_r3_z_p001");
        check(&name, (2 * d, d), MatchLimits::DEFAULT, 8, 10 * d, &[32]);
    }
}

#[test]
fn device_code_refuses_what_the_cpu_refuses() {
    if driver().is_none() {
        return;
    }
    let m = model("surface_d5_r5_z_p001", 6, 3, MatchLimits::DEFAULT);
    // Streams that start at round 1: every round is refused (rounds missing), and the
    // final round comes too early.
    let data = sampled(&m, 3, 4, 5);
    let events: Vec<u8> = data.iter().flatten().flatten().copied().collect();
    let want = cpu_answers(&m, &data, 1, true);
    assert!(want[0].iter().all(|a| matches!(a, Answer::Refused(_))));
    assert_eq!(run_device(&m, &events, Run::new(3, 4, 64, 1)), want);
    // Short streams (shorter than W) end in one final window.
    let want = cpu_answers(&m, &data, 0, true);
    assert_eq!(want[0].len(), 1);
    assert_eq!(run_device(&m, &events, Run::new(3, 4, 64, 0)), want);
}

/// Measures (prints) a window's cost on the device, counted on any host: the decoding
/// warp's steps (each `__syncwarp` or warp collective) and the table reads on its critical
/// path (between two steps, the most any lane made), at p = 0.001 and 0.005 (d = 5, 7) and
/// 0.001 (d = 9, 11), W = 2d, C = d. A lone warp issues about one dependent instruction
/// per 7 cycles, so these counts, not a host's timing, say how a window fares on a GPU.
/// `cargo test --release --test window_host -- --ignored --nocapture window_steps`
#[test]
#[ignore = "a measurement: run with --ignored --nocapture"]
fn window_steps() {
    if driver().is_none() {
        return;
    }
    println!("model,d,W,C,streams,rounds,windows,steps_per_window,critical_reads_per_window");
    for (name, d) in [
        ("surface_d5_r5_z_p001", 5),
        ("surface_d5_r5_z_p005", 5),
        ("surface_d7_r7_z_p001", 7),
        ("surface_d7_r7_z_p005", 7),
        ("stream/surface_d9_r3_z_p001", 9),
        ("stream/surface_d11_r3_z_p001", 11),
    ] {
        let (w, c) = (2 * d, d);
        let m = model(name, w, c, MatchLimits::DEFAULT);
        let (streams, rounds) = (16, 30 * c);
        let data = sampled(&m, streams, rounds, 11);
        let events: Vec<u8> = data.iter().flatten().flatten().copied().collect();
        let out = driver_output(&m, &events, Run::new(streams, rounds, 32, 0), true);
        let stderr = String::from_utf8_lossy(&out.stderr);
        let counts: Vec<u64> = stderr
            .split_whitespace()
            .filter_map(|t| t.parse().ok())
            .collect();
        let [windows, steps, reads] = counts[..] else {
            panic!("the driver did not count: {stderr}");
        };
        let per = |x: u64| x as f64 / windows.max(1) as f64;
        println!(
            "{name},{d},{w},{c},{streams},{rounds},{windows},{:.1},{:.1}",
            per(steps),
            per(reads)
        );
    }
}
