//! The GPU decoders (device/decode.cu) against the CPU references, on an NVIDIA GPU: the
//! same bytes for every shot of every committed fixture (lut on the models of at most 24
//! detectors, uf on all), through the persistent kernel; the launch/graph baselines and the
//! global-memory placement of the decoder state on a sample; `qfwd decode --backend gpu`;
//! and a latency probe (round trips of real shots, p=0.001). `uf` runs with its low-weight
//! syndrome table (`GpuOptions::uf_table_max_defects`, automatic K; with the table comes
//! the split path, step 1d of device/decode.cu) and without it (no table, no split path);
//! the d = 5 surface-code fixtures also with K = 4 where the automatic K is another (it is
//! 4 on hosts of 14 cores and more). The identity test prints, per run, how many shots take
//! each path on the device (empty, table, isolated, split, full), counted on the CPU with
//! the device's order of steps and the same table (`uf_split::decode_with_path`; the
//! device's grouping is the CPU's, so the counts are the device's); the probe times each
//! path, and apart the split shots that only the second grouping answers
//! (`uf_split::GROUPINGS`).
//!
//! ```text
//! cargo test --release --test gpu_decoders -- --ignored --nocapture --test-threads=1
//! ```
//!
//! Every test prints a notice and passes where there is no GPU. `QFWD_GPU` picks the device
//! (default 0); `QFWD_DECODER_SHOTS` caps the shots per fixture of the identity test
//! (default: all); `QFWD_UF_TABLE_K` the table's K where a test says "table" (default:
//! automatic); `QFWD_PROBE_SAMPLES` the samples per probe row (default 20000);
//! `QFWD_PROBE_CORE` the core the probe thread is pinned to (default: the last one);
//! `QFWD_PROBE_ROWS` the probe rows to run, by number (`0,3`; each row prints its number;
//! default: all); `QFWD_UF_SPLIT_MAX` the most defects the split path is tried for
//! (`GpuOptions::uf_split_max_defects`; default: automatic). With `QFWD_UF_TRACE=1` the
//! kernels print the uf decoder's stage trace (device/decode/common.cuh, "Stage trace";
//! `scripts/uf-trace.py` summarizes it).

mod gpu_common;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use gpu_common::{gpu_index, gpu_or_skip};
use qfwd::backend::Backend;
use qfwd::decode::dem::chain_text;
use qfwd::decode::uf_split::{self, decode_with_path, DecodeGroups, Distances, Path as UfPath};
use qfwd::decode::uf_table::{self, UfTable};
use qfwd::decode::{Decoder, DecoderKind, Shots, UfScratch};
use qfwd::decode_cli::{evaluate, DecodeArgs, DecodeBackend, OutputFormat};
use qfwd::gpu::decoder::ScratchPlacement;
use qfwd::gpu::{self, GpuOptions, PersistentKernel};
use qfwd::handler::Handler;
use qfwd::mailbox::MailboxBackend;
use qfwd::wire::status;

fn env_or<T: std::str::FromStr>(key: &str, default: T) -> T {
    std::env::var(key)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

/// Every fixture name, sorted.
fn fixtures() -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(fixtures_dir())
        .unwrap()
        .filter_map(|e| {
            let p = e.ok()?.path();
            (p.extension()? == "dem").then(|| p.file_stem().unwrap().to_str().unwrap().into())
        })
        .collect();
    v.sort();
    assert!(v.len() >= 16, "expected the committed fixtures");
    v
}

struct Fixture {
    name: String,
    dec: Arc<Decoder>,
    payloads: Vec<Vec<u8>>,
}

fn load(name: &str, kind: DecoderKind, limit: usize) -> Fixture {
    let dir = fixtures_dir();
    let dec = Arc::new(Decoder::from_dem_path(&dir.join(format!("{name}.dem")), kind).unwrap());
    let mut shots =
        Shots::read(&dir.join(format!("{name}.b8")), dec.num_detectors(), None).unwrap();
    shots.truncate(limit);
    let payloads = (0..shots.len())
        .map(|i| dec.payload(shots.row(i)))
        .collect();
    Fixture {
        name: name.to_string(),
        dec,
        payloads,
    }
}

fn options() -> GpuOptions {
    GpuOptions {
        device: gpu_index(),
        poll_chunks: 8,
        uf_table_max_defects: table_k(),
        uf_split_max_defects: split_max(),
        ..GpuOptions::default()
    }
}

/// The split path's limit: `QFWD_UF_SPLIT_MAX`, or automatic.
fn split_max() -> Option<u32> {
    std::env::var("QFWD_UF_SPLIT_MAX").ok().map(|v| {
        v.parse()
            .expect("QFWD_UF_SPLIT_MAX: a number of defects, 0 ..= 32")
    })
}

/// The uf table setting of the "table" runs: `QFWD_UF_TABLE_K`, or automatic.
fn table_k() -> Option<u32> {
    std::env::var("QFWD_UF_TABLE_K")
        .ok()
        .and_then(|v| v.parse().ok())
}

/// The table's K for `dec` under `setting` (0: none), as the upload chooses it.
fn table_k_of(dec: &Decoder, setting: Option<u32>) -> u32 {
    let g = dec.decode_graph();
    match setting {
        None => uf_table::auto_max_defects_here(
            g.num_detectors(),
            g.num_edges(),
            &qfwd::host::table_workers(),
        ),
        Some(k) => k.min(g.num_detectors() as u32),
    }
}

/// The device path (empty, table, isolated, split, full) of each of `payloads`, as the CPU
/// twin computes it with the table of `setting` (the one the upload built: cached per
/// process), and whether a split shot is one only the second grouping answers, its first
/// having given up (`uf_split::GROUPINGS`).
fn shot_paths(dec: &Decoder, payloads: &[Vec<u8>], setting: Option<u32>) -> Vec<(UfPath, bool)> {
    // The graph and syndromes the device decodes: the observable part's, where there is one.
    let g = dec.decode_graph();
    let nb = dec.detector_bytes();
    let mut buf = Vec::new();
    let syndromes: Vec<Vec<u8>> = payloads
        .iter()
        .map(|p| dec.decode_input(&p[..nb], &mut buf).to_vec())
        .collect();
    let table =
        qfwd::decode::precompute::uf_table_for(g, setting, &qfwd::host::table_workers()).unwrap();
    let mut s = UfScratch::new(g);
    match &table {
        Some(t) => {
            let dist = (g.num_detectors() <= uf_split::MAX_SPLIT_DETECTORS)
                .then(|| Distances::build(g).unwrap());
            // The upload's limit (cached per process: the same one).
            let limit = dist.as_ref().map_or(0, |d| {
                qfwd::decode::precompute::uf_split_limit_for(g, t, d, split_max())
            });
            let mut t: &UfTable = t;
            let n = g.num_detectors() as u32;
            syndromes
                .iter()
                .map(|d| {
                    let path = decode_with_path(g, &mut s, dist.as_ref(), limit, &mut t, d).1;
                    let second = path == UfPath::Split && {
                        let defects: Vec<u32> = (0..n)
                            .filter(|&v| d[v as usize / 8] >> (v % 8) & 1 == 1)
                            .collect();
                        let dist = dist.as_ref().expect("the split path has its distances");
                        let first = uf_split::GROUPINGS[0];
                        uf_split::split_grouped(&defects, dist, &mut t, first).is_none()
                    };
                    (path, second)
                })
                .collect()
        }
        None => {
            // No table, no split path: empty, isolated or full.
            let mut none = DecodeGroups::new(g, 0);
            syndromes
                .iter()
                .map(|d| (decode_with_path(g, &mut s, None, 0, &mut none, d).1, false))
                .collect()
        }
    }
}

/// Shots of `payloads` per device path, as "path n, ...".
fn path_counts(dec: &Decoder, payloads: &[Vec<u8>], setting: Option<u32>) -> String {
    let mut counts = [0usize; UfPath::ALL.len()];
    for (path, _) in shot_paths(dec, payloads, setting) {
        counts[path as usize] += 1;
    }
    UfPath::ALL
        .iter()
        .map(|p| format!("{} {}", p.as_str(), counts[*p as usize]))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Where the tail comes from: the round trips of `timed` ((payload index, ns), as
/// [`ping_pong_each`] returns them; `sorted`: the same, sorted) split by each shot's device
/// path ([`shot_paths`]), with each path's share of the slowest 1 %; after the split path,
/// its shots that only the second grouping answers.
fn per_path_rows(paths: &[(UfPath, bool)], timed: &[(usize, u64)], sorted: &[u64]) {
    let p99 = quantile_ns(sorted, 0.99);
    let slow_total = timed.iter().filter(|&&(_, ns)| ns >= p99).count().max(1);
    let rows = UfPath::ALL.iter().flat_map(|&path| {
        let all = (path.as_str(), path, false);
        let sub = (path == UfPath::Split).then_some(("2nd", path, true));
        std::iter::once(all).chain(sub)
    });
    for (label, path, only_second) in rows {
        let mut ns: Vec<u64> = timed
            .iter()
            .filter(|&&(i, _)| paths[i].0 == path && (!only_second || paths[i].1))
            .map(|&(_, ns)| ns)
            .collect();
        if ns.is_empty() {
            continue;
        }
        let slow = ns.iter().filter(|&&v| v >= p99).count();
        ns.sort_unstable();
        let indent = if only_second {
            "      of which "
        } else {
            "    path "
        };
        row(
            &format!(
                "{indent}{label:<8} {:>5.1}% of shots, {:>5.1}% of the slowest 1%",
                100.0 * ns.len() as f64 / timed.len() as f64,
                100.0 * slow as f64 / slow_total as f64
            ),
            &ns,
        );
    }
}

/// Share of `payloads` with 1 ..= k defects (the table's), and with none, counted as the
/// decoder sees them (on the observable part, where the model has one).
fn table_share(dec: &Decoder, payloads: &[Vec<u8>], k: u32) -> (f64, f64) {
    let (mut hit, mut zero) = (0usize, 0usize);
    let mut buf = Vec::new();
    for p in payloads {
        let d: u32 = dec
            .decode_input(&p[..dec.detector_bytes()], &mut buf)
            .iter()
            .map(|b| b.count_ones())
            .sum();
        if d == 0 {
            zero += 1;
        } else if d <= k {
            hit += 1;
        }
    }
    let n = payloads.len().max(1) as f64;
    (hit as f64 / n, zero as f64 / n)
}

/// What the CPU answers for `payload`: (status, result bytes).
fn cpu_answer(dec: &Decoder, payload: &[u8]) -> (i32, Vec<u8>) {
    let mut out = [0u8; 64];
    match dec.run_payload(payload, &mut out) {
        Ok(n) => (status::OK, out[..n].to_vec()),
        Err(why) => (qfwd::handler::payload_status(why), Vec::new()),
    }
}

/// Sends every payload (up to `window` in flight) and returns the answers by index.
fn answers<B: Backend>(
    b: &mut B,
    handler: &Handler,
    payloads: &[Vec<u8>],
    window: usize,
) -> Vec<(i32, Vec<u8>)> {
    let mut got: Vec<Option<(i32, Vec<u8>)>> = vec![None; payloads.len()];
    let (mut next, mut done) = (0usize, 0usize);
    let mut progress = Instant::now();
    while done < payloads.len() {
        // A poller group that falls behind holds its slots: the ring refuses (OVERLOAD)
        // before `window` requests are in flight. Then poll, and submit again.
        while next < payloads.len() && b.in_flight() < window {
            match b.submit(next as u32, handler, &payloads[next]) {
                Ok(()) => next += 1,
                Err(st) if st == status::OVERLOAD => break,
                Err(st) => panic!("submit {next}: status {st}"),
            }
        }
        let n = b.poll(|c| {
            got[c.token as usize] = Some((c.status, c.result.to_vec()));
        });
        if n > 0 {
            done += n;
            progress = Instant::now();
        }
        assert!(
            progress.elapsed() < Duration::from_secs(5),
            "no answer for 5 s ({done} of {} done)",
            payloads.len()
        );
    }
    got.into_iter().map(Option::unwrap).collect()
}

/// Compares the backend's answers for `f` with the CPU's; returns the mismatches (printing
/// the first few).
fn compare<B: Backend>(b: &mut B, f: &Fixture, label: &str) -> usize {
    let handler = Handler::Decoder(Arc::clone(&f.dec));
    let t = Instant::now();
    let gpu = answers(b, &handler, &f.payloads, 32);
    let secs = t.elapsed().as_secs_f64();
    let mut bad = 0;
    let mut nonzero = 0;
    for (i, (p, g)) in f.payloads.iter().zip(&gpu).enumerate() {
        if p[..f.dec.detector_bytes()].iter().any(|&x| x != 0) {
            nonzero += 1;
        }
        let want = cpu_answer(&f.dec, p);
        if *g != want {
            if bad < 5 {
                eprintln!("  {label} {} shot {i}: GPU {g:?}, CPU {want:?}", f.name);
            }
            bad += 1;
        }
    }
    println!(
        "{label:<28} {:<22} {:>6} shots ({:>6} with defects): {} mismatches  [{:.2} M shots/s, 32 in flight]",
        f.name,
        f.payloads.len(),
        nonzero,
        bad,
        f.payloads.len() as f64 / secs / 1e6
    );
    bad
}

/// Payloads the model must refuse (BAD_ARGUMENT), as the CPU does.
fn check_bad_payloads<B: Backend>(b: &mut B, f: &Fixture) -> usize {
    let handler = Handler::Decoder(Arc::clone(&f.dec));
    let good = &f.payloads[0];
    let nb = f.dec.detector_bytes();
    let mut wrong_count = good.clone();
    wrong_count[nb] ^= 1;
    let mut bad = Vec::new();
    for p in [
        wrong_count,
        good[..good.len() - 1].to_vec(),
        [good.as_slice(), &[0]].concat(),
    ] {
        let g = answers(b, &handler, std::slice::from_ref(&p), 1).remove(0);
        let want = cpu_answer(&f.dec, &p);
        assert_eq!(want.0, status::BAD_ARGUMENT);
        if g != want {
            eprintln!(
                "  {}: bad payload of {} bytes: GPU {g:?}, CPU {want:?}",
                f.name,
                p.len()
            );
            bad.push(p.len());
        }
    }
    bad.len()
}

fn kinds_for(dec_detectors: usize) -> Vec<DecoderKind> {
    if dec_detectors <= 24 {
        vec![DecoderKind::Uf, DecoderKind::Lut]
    } else {
        vec![DecoderKind::Uf]
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU: cargo test --release --test gpu_decoders -- --ignored --nocapture --test-threads=1"]
fn gpu_output_equals_cpu_output_on_every_fixture_shot() {
    let Some(_gpu) = gpu_or_skip("gpu_output_equals_cpu_output_on_every_fixture_shot") else {
        return;
    };
    let limit = env_or("QFWD_DECODER_SHOTS", usize::MAX);
    let mut bad = 0;
    for name in fixtures() {
        let n = load(&name, DecoderKind::Uf, 1).dec.num_detectors();
        for kind in kinds_for(n) {
            let f = load(&name, kind, limit);
            // uf: with its low-weight syndrome table and without it, and the d5 surface
            // models with K = 4 too (the split path's K) where the automatic K is another
            // (lut: the setting is ignored, one run).
            let mut tables = match kind {
                DecoderKind::Uf => vec![table_k(), Some(0)],
                DecoderKind::Lut => vec![None],
            };
            if kind == DecoderKind::Uf
                && name.starts_with("surface_d5")
                && table_k_of(&f.dec, table_k()) != 4
            {
                tables.push(Some(4));
            }
            for table in tables {
                let o = GpuOptions {
                    uf_table_max_defects: table,
                    ..options()
                };
                let label = match kind {
                    DecoderKind::Uf => format!("gpu-persistent uf K={}", table_k_of(&f.dec, table)),
                    DecoderKind::Lut => "gpu-persistent lut".to_string(),
                };
                let mut b = gpu::persistent_backend_with(&o, &[Arc::clone(&f.dec)]).unwrap();
                bad += compare(&mut b, &f, &label);
                if kind == DecoderKind::Uf {
                    println!(
                        "{:<28} device paths: {}",
                        "",
                        path_counts(&f.dec, &f.payloads, table)
                    );
                }
                bad += check_bad_payloads(&mut b, &f);
                b.shutdown(Duration::from_secs(2)).unwrap();
            }
        }
    }
    assert_eq!(bad, 0, "GPU and CPU decoders disagree");
}

/// Chains of 5 and 37 detectors (lut and uf, uf only above 24), each with 512 payloads
/// that set bits past the last detector: the syndrome's last byte has bits no detector
/// owns, and the device's 32-bit words hold them and the count's bytes. Most payloads have
/// few defects (table, split, growth), every fourth many.
fn padded_chains() -> Vec<Fixture> {
    let mut out = Vec::new();
    for n in [5usize, 37] {
        for kind in kinds_for(n) {
            let dec = Arc::new(Decoder::from_dem_text(&chain_text(n), "chain", kind).unwrap());
            let nb = dec.detector_bytes();
            let pad = !((1u8 << (n % 8)) - 1);
            let mut rng = qfwd::decode::sample::SplitMix64(n as u64);
            let payloads = (0..512)
                .map(|i| {
                    let mut p: Vec<u8> = (0..nb).map(|_| rng.next_u64() as u8).collect();
                    if i % 4 != 0 {
                        for b in p.iter_mut() {
                            *b &= rng.next_u64() as u8 & rng.next_u64() as u8;
                        }
                    }
                    p[nb - 1] |= pad & (rng.next_u64() as u8 | 1 << 7);
                    p.extend_from_slice(&(n as u32).to_le_bytes());
                    p
                })
                .collect();
            out.push(Fixture {
                name: format!("chain{n}"),
                dec,
                payloads,
            });
        }
    }
    out
}

#[test]
fn padded_chain_payloads_decode_as_their_detectors_alone_on_the_cpu() {
    // The CPU half of the device test below: what the device's answers are compared with.
    for f in padded_chains() {
        let nb = f.dec.detector_bytes();
        let n = f.dec.num_detectors();
        let mut flips = 0;
        for p in &f.payloads {
            let mut clean = p.clone();
            clean[nb - 1] &= (1u8 << (n % 8)) - 1;
            assert_ne!(&clean, p, "every payload sets a padding bit");
            let (st, answer) = cpu_answer(&f.dec, p);
            assert_eq!((st, &answer), (status::OK, &cpu_answer(&f.dec, &clean).1));
            flips += usize::from(answer.iter().any(|&b| b != 0));
        }
        assert!(
            flips > 0 && flips < f.payloads.len(),
            "{} {}",
            f.name,
            f.dec.kind()
        );
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU: cargo test --release --test gpu_decoders -- --ignored --nocapture --test-threads=1"]
fn bits_past_the_last_detector_are_ignored_on_the_device() {
    let Some(_gpu) = gpu_or_skip("bits_past_the_last_detector_are_ignored_on_the_device") else {
        return;
    };
    // Every payload sets bits past the last detector (`padded_chains`); the CPU ignores
    // them (tests/decode_handler.rs, and the test above), and so must the device.
    let mut bad = 0;
    for f in padded_chains() {
        let tables = match f.dec.kind() {
            DecoderKind::Uf => vec![table_k(), Some(0)],
            DecoderKind::Lut => vec![None],
        };
        for table in tables {
            let o = GpuOptions {
                uf_table_max_defects: table,
                ..options()
            };
            let mut b = gpu::persistent_backend_with(&o, &[Arc::clone(&f.dec)]).unwrap();
            let label = match f.dec.kind() {
                DecoderKind::Uf => format!("padding uf K={}", table_k_of(&f.dec, table)),
                DecoderKind::Lut => "padding lut".to_string(),
            };
            bad += compare(&mut b, &f, &label);
            b.shutdown(Duration::from_secs(2)).unwrap();
        }
    }
    assert_eq!(bad, 0, "the device read bits past the last detector");
}

/// Budget payloads (decode/src/budget.rs) for the d5 and d7 surface codes (uf) and the
/// d3 one-round code (lut, 8 detectors, budget 3), each decoder with its default budget,
/// a small one and none: no defect, every detector (and every padding bit), random halves,
/// `max - 1 ..= max + 1` defects at random places, and the first fixture shots.
fn budget_fixtures() -> Vec<(Fixture, bool)> {
    let mut out = Vec::new();
    for (name, kind) in [
        ("surface_d5_r5_z_p001", DecoderKind::Uf),
        ("surface_d7_r7_z_p001", DecoderKind::Uf),
        ("surface_d3_r1_z_p005", DecoderKind::Lut),
    ] {
        for (budget, label) in [(None, "default"), (Some(3), "3"), (Some(0), "off")] {
            let base = load(name, kind, 64);
            let mut dec =
                Decoder::from_dem_path(&fixtures_dir().join(format!("{name}.dem")), kind).unwrap();
            dec.set_max_defects(budget).unwrap();
            let (n, nb) = (dec.num_detectors(), dec.detector_bytes());
            let max = match dec.max_defects() {
                0 => n,
                m => m as usize,
            };
            let mut rng = qfwd::decode::sample::SplitMix64(n as u64 ^ max as u64);
            let mut payloads = vec![dec.payload(&vec![0; nb]), dec.payload(&vec![0xff; nb])];
            let mut all = vec![0xff; nb];
            all.extend_from_slice(&(n as u32).to_le_bytes());
            payloads.push(all);
            for _ in 0..64 {
                let p: Vec<u8> = (0..nb).map(|_| rng.next_u64() as u8).collect();
                payloads.push(dec.payload(&p));
            }
            for k in [max.saturating_sub(1), max, max + 1] {
                for _ in 0..32 {
                    let mut p = vec![0u8; nb];
                    let mut set = 0;
                    while set < k.min(n) {
                        let v = (rng.next_u64() % n as u64) as usize;
                        if p[v / 8] & 1 << (v % 8) == 0 {
                            p[v / 8] |= 1 << (v % 8);
                            set += 1;
                        }
                    }
                    payloads.push(dec.payload(&p));
                }
            }
            payloads.extend(base.payloads);
            out.push((
                Fixture {
                    name: format!("{name} budget {label}"),
                    dec: Arc::new(dec),
                    payloads,
                },
                max < n,
            ));
        }
    }
    out
}

#[test]
fn budget_payloads_are_refused_and_answered_on_the_cpu() {
    // The CPU half of the device test below: each budget that binds (below the detector
    // count) refuses some payloads, every one answers others, the default refuses no
    // fixture shot.
    for (f, binds) in budget_fixtures() {
        let answers: Vec<i32> = f.payloads.iter().map(|p| cpu_answer(&f.dec, p).0).collect();
        let over = answers
            .iter()
            .filter(|&&s| s == status::OVER_BUDGET)
            .count();
        let ok = answers.iter().filter(|&&s| s == status::OK).count();
        assert_eq!(over + ok, f.payloads.len(), "{}", f.name);
        assert_eq!(over > 0, binds, "{}: {over} over budget", f.name);
        assert!(ok > 64, "{}: {ok} answered", f.name);
        if f.name.ends_with("default") {
            let shots = &answers[f.payloads.len() - 64..];
            assert!(shots.iter().all(|&s| s == status::OK), "{}", f.name);
        }
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU: cargo test --release --test gpu_decoders -- --ignored --nocapture --test-threads=1"]
fn over_budget_requests_are_refused_on_the_device_as_on_the_cpu() {
    let Some(_gpu) = gpu_or_skip("over_budget_requests_are_refused_on_the_device_as_on_the_cpu")
    else {
        return;
    };
    // Statuses and results identical to the CPU's: OVER_BUDGET past the budget, the same
    // flips within it (with the table and split paths, and without them).
    let mut bad = 0;
    for (f, _) in budget_fixtures() {
        let tables = match f.dec.kind() {
            DecoderKind::Uf => vec![table_k(), Some(0)],
            DecoderKind::Lut => vec![None],
        };
        for table in tables {
            let o = GpuOptions {
                uf_table_max_defects: table,
                ..options()
            };
            let mut b = gpu::persistent_backend_with(&o, &[Arc::clone(&f.dec)]).unwrap();
            bad += compare(
                &mut b,
                &f,
                &format!("budget {} K={:?}", f.dec.kind(), table),
            );
            b.shutdown(Duration::from_secs(2)).unwrap();
        }
        // The launch baseline's kernel calls the same decoders.
        let mut l = gpu::launch_backend_with(&options(), &[Arc::clone(&f.dec)]).unwrap();
        bad += compare(&mut l, &f, &format!("budget gpu-launch {}", f.dec.kind()));
        drop(l);
    }
    assert_eq!(bad, 0, "the device and the CPU disagree on a budget");
}

#[test]
#[ignore = "needs an NVIDIA GPU: cargo test --release --test gpu_decoders -- --ignored --nocapture --test-threads=1"]
fn baselines_and_global_state_decode_identically() {
    let Some(_gpu) = gpu_or_skip("baselines_and_global_state_decode_identically") else {
        return;
    };
    let mut bad = 0;
    // The launch and graph baselines, on a sample.
    for (name, kind) in [
        ("surface_d3_r3_z_p005", DecoderKind::Lut),
        ("surface_d3_r3_z_p005", DecoderKind::Uf),
        ("surface_d7_r7_z_p005", DecoderKind::Uf),
    ] {
        let f = load(name, kind, 400);
        let decs = [Arc::clone(&f.dec)];
        let mut l = gpu::launch_backend_with(&options(), &decs).unwrap();
        bad += compare(&mut l, &f, &format!("gpu-launch {kind}"));
        drop(l);
        let mut g = gpu::graph_backend_with(&options(), &decs).unwrap();
        bad += compare(&mut g, &f, &format!("gpu-graph {kind}"));
        bad += check_bad_payloads(&mut g, &f);
    }
    // The uf state in global memory (the fallback when shared memory is too small), and
    // 16 pollers spread one warp per block (both with the graph in shared memory); without
    // the table, so every shot takes the full decoder.
    for name in [
        "surface_d5_r5_z_p005",
        "surface_d7_r7_z_p005",
        "surface_d7_r7_x_p001",
    ] {
        let f = load(name, DecoderKind::Uf, usize::MAX);
        let decs = [Arc::clone(&f.dec)];
        let no_table = GpuOptions {
            uf_table_max_defects: Some(0),
            ..options()
        };
        // The graph read from global memory (one-request kernels do not stage it), every
        // shot through the full decoder.
        let mut l = gpu::launch_backend_with(&no_table, &decs).unwrap();
        bad += compare(&mut l, &f, "gpu-launch uf K=0, graph in global memory");
        drop(l);
        for (placement, o) in [
            (ScratchPlacement::Global, no_table.clone()),
            (
                ScratchPlacement::Shared,
                GpuOptions {
                    pollers: 16,
                    pollers_per_slot: 2,
                    warps_per_block: 1,
                    ..no_table
                },
            ),
        ] {
            let k = PersistentKernel::start_with(&o, None, &decs, placement).unwrap();
            assert_eq!(k.decoder_placement(), Some(placement));
            let mut b = MailboxBackend::new(k);
            bad += compare(
                &mut b,
                &f,
                &format!("persistent {placement:?} {}w", o.pollers),
            );
            b.shutdown(Duration::from_secs(2)).unwrap();
        }
    }
    // A backend without the requested decoder kind answers UNKNOWN_FUNCTION.
    let f = load("surface_d3_r3_z_p001", DecoderKind::Uf, 10);
    let lut = load("surface_d3_r3_z_p001", DecoderKind::Lut, 10);
    let mut b = gpu::persistent_backend_with(&options(), &[Arc::clone(&lut.dec)]).unwrap();
    let handler = Handler::Decoder(Arc::clone(&f.dec));
    let got = answers(&mut b, &handler, &f.payloads[..1], 1);
    assert_eq!(got[0].0, status::UNKNOWN_FUNCTION);
    b.shutdown(Duration::from_secs(2)).unwrap();
    assert_eq!(bad, 0, "GPU and CPU decoders disagree");
}

#[test]
#[ignore = "needs an NVIDIA GPU: cargo test --release --test gpu_decoders -- --ignored --nocapture --test-threads=1"]
fn qfwd_decode_backend_gpu_matches_cpu() {
    let Some(_gpu) = gpu_or_skip("qfwd_decode_backend_gpu_matches_cpu") else {
        return;
    };
    for (name, kind) in [
        ("surface_d5_r5_z_p005", DecoderKind::Uf),
        ("surface_d3_r3_x_p005", DecoderKind::Lut),
    ] {
        let dir = fixtures_dir();
        let args = |backend| DecodeArgs {
            obs: Some(dir.join(format!("{name}.obs.01"))),
            decoder: kind,
            backend,
            format: OutputFormat::Text,
            shots: Some(5000),
            ..DecodeArgs::new(
                dir.join(format!("{name}.dem")),
                dir.join(format!("{name}.b8")),
            )
        };
        let cpu = evaluate(&args(DecodeBackend::Cpu)).unwrap();
        let gpu = evaluate(&args(DecodeBackend::Gpu)).unwrap();
        print!("{}", gpu.to_text());
        println!("{}", gpu.to_json());
        assert_eq!(gpu.predictions, cpu.predictions, "{name} {kind}");
        assert_eq!(gpu.mistakes, cpu.mistakes);
        assert!(gpu.to_json().contains("\"timing\":\"round_trip\""));
        // Predict mode (no observables) streams its batches through the GPU too, and the
        // offline decoders have no budget: all 5000 shots answered as on the CPU.
        let out = std::env::temp_dir().join(format!("qfwd-gpu-predict-{}.b8", std::process::id()));
        let predict_args = DecodeArgs {
            obs: None,
            predictions: Some(out.clone()),
            ..args(DecodeBackend::Gpu)
        };
        assert_eq!(qfwd::decode_cli::predict(&predict_args).unwrap(), 5000);
        let got = Shots::read(&out, cpu.predictions.bits(), None).unwrap();
        assert_eq!(got, cpu.predictions, "{name} {kind} predict");
        let _ = std::fs::remove_file(&out);
    }
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

fn quantile_ns(sorted: &[u64], q: f64) -> u64 {
    sorted[((sorted.len() as f64 * q) as usize).min(sorted.len() - 1)]
}

fn quantile(sorted: &[u64], q: f64) -> f64 {
    quantile_ns(sorted, q) as f64 / 1e3
}

/// The round trips of `timed` ((payload index, ns)), sorted.
fn sorted_ns(timed: &[(usize, u64)]) -> Vec<u64> {
    let mut ns: Vec<u64> = timed.iter().map(|&(_, ns)| ns).collect();
    ns.sort_unstable();
    ns
}

/// Ping-pong round trips of `payloads` (cycled) after `warmup` unmeasured ones; sorted ns.
fn ping_pong<B: Backend>(
    b: &mut B,
    handler: &Handler,
    payloads: &[Vec<u8>],
    warmup: usize,
    samples: usize,
) -> Vec<u64> {
    sorted_ns(&ping_pong_each(b, handler, payloads, warmup, samples))
}

/// [`ping_pong`], unsorted, each round trip with the index of its payload.
fn ping_pong_each<B: Backend>(
    b: &mut B,
    handler: &Handler,
    payloads: &[Vec<u8>],
    warmup: usize,
    samples: usize,
) -> Vec<(usize, u64)> {
    let mut ns = Vec::with_capacity(samples);
    for i in 0..warmup + samples {
        let at = i % payloads.len();
        let p = &payloads[at];
        let t0 = Instant::now();
        b.submit(i as u32, handler, p).expect("submit");
        let mut spins = 0u32;
        while b.poll(|c| assert_eq!(c.status, status::OK)) == 0 {
            spins = spins.wrapping_add(1);
            if spins % 4096 == 0 {
                assert!(t0.elapsed() < Duration::from_secs(1), "request {i} lost");
            }
        }
        if i >= warmup {
            ns.push((at, t0.elapsed().as_nanos() as u64));
        }
    }
    ns
}

fn row(label: &str, ns: &[u64]) -> (f64, f64) {
    let (p50, p99) = (quantile(ns, 0.5), quantile(ns, 0.99));
    println!(
        "{label:<50} p50 {p50:>6.2} µs  p90 {:>6.2}  p99 {p99:>6.2}  p99.9 {:>7.2}  max {:>8.2}",
        quantile(ns, 0.9),
        quantile(ns, 0.999),
        *ns.last().unwrap() as f64 / 1e3
    );
    (p50, p99)
}

#[test]
#[ignore = "needs an NVIDIA GPU: cargo test --release --test gpu_decoders -- --ignored --nocapture --test-threads=1"]
fn decoder_latency_probe() {
    let Some(_gpu) = gpu_or_skip("decoder_latency_probe") else {
        return;
    };
    pin();
    let samples: usize = env_or("QFWD_PROBE_SAMPLES", 20_000);
    let warmup = 2_000;
    println!(
        "round trip submit -> poll, ping-pong, {samples} samples after {warmup} warm-up, the \
         fixture's shots in order; default GpuOptions unless the row says (8 pollers, 2 per \
         slot), poll_chunks raised to one read per request"
    );
    // (label, fixture, kind, placement, pollers, pollers per slot, uf table, target p99 µs);
    // the uf table: AUTO (QFWD_UF_TABLE_K, else automatic), OFF, or a given K.
    use DecoderKind::{Lut, Uf};
    use ScratchPlacement::{Auto, Global};
    const AUTO: Option<Option<u32>> = None;
    const OFF: Option<Option<u32>> = Some(Some(0));
    let (d3, d5, d7) = (
        "surface_d3_r3_z_p001",
        "surface_d5_r5_z_p001",
        "surface_d7_r7_z_p001",
    );
    type Row = (
        &'static str,
        &'static str,
        DecoderKind,
        ScratchPlacement,
        u32,
        u32,
        Option<Option<u32>>,
        Option<f64>,
    );
    let rows: &[Row] = &[
        ("lut d3", d3, Lut, Auto, 8, 2, AUTO, None),
        ("uf d3", d3, Uf, Auto, 8, 2, AUTO, None),
        ("uf d3", d3, Uf, Auto, 8, 2, OFF, None),
        ("uf d5", d5, Uf, Auto, 8, 2, AUTO, Some(6.0)),
        ("uf d5", d5, Uf, Auto, 8, 2, OFF, Some(6.0)),
        ("uf d5", d5, Uf, Auto, 8, 2, Some(Some(4)), Some(6.0)),
        ("uf d7", d7, Uf, Auto, 8, 2, AUTO, Some(10.0)),
        ("uf d7", d7, Uf, Auto, 8, 2, OFF, Some(10.0)),
        // A group's two warps both decode a request (the loser of the claim too) and share
        // an SM sub-partition: one warp per slot, and a single poller, isolate that.
        ("uf d5, 8 pollers 1/slot", d5, Uf, Auto, 8, 1, AUTO, None),
        ("uf d7, 8 pollers 1/slot", d7, Uf, Auto, 8, 1, AUTO, None),
        ("uf d7, 1 poller", d7, Uf, Auto, 1, 1, AUTO, None),
        (
            "uf d5 (state in global memory)",
            d5,
            Uf,
            Global,
            8,
            2,
            AUTO,
            None,
        ),
        (
            "uf d7 (state in global memory)",
            d7,
            Uf,
            Global,
            8,
            2,
            AUTO,
            None,
        ),
        (
            "uf d5 p=0.005",
            "surface_d5_r5_z_p005",
            Uf,
            Auto,
            8,
            2,
            AUTO,
            None,
        ),
        (
            "uf d7 p=0.005",
            "surface_d7_r7_z_p005",
            Uf,
            Auto,
            8,
            2,
            AUTO,
            None,
        ),
        // One group of two warps, the layout scenarios/gpu-decoders.toml times ping-pong
        // with: the other groups' reads of their own slots are gone.
        (
            "uf d5, 2 pollers in one group",
            d5,
            Uf,
            Auto,
            2,
            2,
            AUTO,
            Some(6.0),
        ),
        (
            "uf d7, 2 pollers in one group",
            d7,
            Uf,
            Auto,
            2,
            2,
            AUTO,
            Some(10.0),
        ),
    ];
    let mut missed = Vec::new();
    let only: Option<Vec<usize>> = std::env::var("QFWD_PROBE_ROWS").ok().map(|v| {
        v.split(',')
            .map(|r| {
                r.trim()
                    .parse()
                    .unwrap_or_else(|_| panic!("QFWD_PROBE_ROWS: {r:?} is not a row number"))
            })
            .collect()
    });
    for (number, &(label, name, kind, placement, pollers, pollers_per_slot, table, target)) in
        rows.iter().enumerate()
    {
        if only.as_ref().is_some_and(|o| !o.contains(&number)) {
            continue;
        }
        println!("probe row {number}: {label}, {name}");
        let f = load(name, kind, usize::MAX);
        let decs = [Arc::clone(&f.dec)];
        let table = table.unwrap_or_else(table_k);
        let k = table_k_of(&f.dec, table);
        let label = match kind {
            DecoderKind::Uf if k == 0 => format!("{label}, no table"),
            DecoderKind::Uf => {
                let (hit, zero) = table_share(&f.dec, &f.payloads, k);
                format!(
                    "{label}, table K={k} ({:.1}% of shots, {:.1}% empty)",
                    100.0 * hit,
                    100.0 * zero
                )
            }
            DecoderKind::Lut => label.to_string(),
        };
        let mut o = GpuOptions {
            pollers,
            pollers_per_slot,
            uf_table_max_defects: table,
            ..options()
        };
        o.poll_chunks = gpu::decoder::poll_chunks_for(&decs);
        // The transport floor for the same request size: parity of the same payloads.
        {
            let mut b = gpu::persistent_backend(&o).unwrap();
            let ns = ping_pong(&mut b, &Handler::Parity, &f.payloads, warmup, samples);
            row(
                &format!("parity, {} B (floor for {label})", f.payloads[0].len()),
                &ns,
            );
            b.shutdown(Duration::from_secs(2)).unwrap();
        }
        let k = PersistentKernel::start_with(&o, None, &decs, placement).unwrap();
        let placed = k.decoder_placement();
        let staged = match (k.decoder_staged(), k.decoder_graph_staged()) {
            (true, true) => ", split arrays and graph in shared memory",
            (true, false) => ", split arrays in shared memory",
            (false, true) => ", graph in shared memory",
            (false, false) => "",
        };
        let mut b = MailboxBackend::new(k);
        let handler = Handler::Decoder(Arc::clone(&f.dec));
        let timed = ping_pong_each(&mut b, &handler, &f.payloads, warmup, samples);
        let ns = sorted_ns(&timed);
        let (_, p99) = row(
            &format!(
                "{label} ({} B, state {placed:?}{staged})",
                f.payloads[0].len()
            ),
            &ns,
        );
        // The parity floor again, on this kernel (decoders loaded, their state and arrays
        // in shared memory): tells a cost of the decoder's request path from one of the
        // kernel's configuration.
        let same = ping_pong(&mut b, &Handler::Parity, &f.payloads, warmup, samples);
        row(
            &format!(
                "  parity, {} B, on this decoder kernel",
                f.payloads[0].len()
            ),
            &same,
        );
        b.shutdown(Duration::from_secs(2)).unwrap();
        if kind == DecoderKind::Uf {
            per_path_rows(&shot_paths(&f.dec, &f.payloads, table), &timed, &ns);
        }
        // The CPU reference on the same shots, for scale (decode only, no transport).
        let mut scratch = f.dec.new_scratch();
        let dets: Vec<&[u8]> = f
            .payloads
            .iter()
            .map(|p| &p[..f.dec.detector_bytes()])
            .collect();
        let mut cpu: Vec<u64> = dets
            .iter()
            .take(samples)
            .map(|d| {
                let t = Instant::now();
                std::hint::black_box(f.dec.decode(&mut scratch, d));
                t.elapsed().as_nanos() as u64
            })
            .collect();
        cpu.sort_unstable();
        row(&format!("  cpu {kind} decode only, same shots"), &cpu);
        if let Some(t) = target {
            let verdict = if p99 <= t { "meets" } else { "MISSES" };
            println!("  target p99 <= {t} µs: {verdict} ({p99:.2} µs)");
            if p99 > t {
                missed.push(label.clone());
            }
        }
    }
    if std::env::var("QFWD_ENFORCE_TARGETS").as_deref() == Ok("1") {
        assert!(missed.is_empty(), "targets missed: {missed:?}");
    }
}
