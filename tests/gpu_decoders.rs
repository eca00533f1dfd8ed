//! The GPU decoders (device/decode.cu) against the CPU references, on an NVIDIA GPU: the
//! same bytes for every shot of every committed fixture (lut on the models of at most 24
//! detectors, uf on all), through the persistent kernel; the launch/graph baselines and the
//! global-memory placement of the decoder state on a sample; and `qfwd decode --backend
//! gpu`. `uf` runs with its low-weight syndrome table (`GpuOptions::uf_table_max_defects`,
//! automatic K; with the table comes the split path, step 1d of device/decode.cu) and
//! without it (no table, no split path); the d = 5 surface-code fixtures also with K = 4
//! where the automatic K is another (it is 4 on hosts of 14 cores and more). The identity
//! test prints, per run, how many shots take each path on the device (empty, table,
//! isolated, split, full), counted on the CPU with the device's order of steps and the same
//! table (`uf_split::decode_with_path`; the device's grouping is the CPU's, so the counts
//! are the device's); the latency probe, tests/gpu_decoder_latency.rs, times each path.
//!
//! ```text
//! cargo test --release --test gpu_decoders -- --ignored --nocapture --test-threads=1
//! ```
//!
//! Every test prints a notice and passes where there is no GPU. `QFWD_GPU` picks the device
//! (default 0); `QFWD_DECODER_SHOTS` caps the shots per fixture of the identity test
//! (default: all); `QFWD_UF_TABLE_K` the table's K where a test says "table" (default:
//! automatic); `QFWD_UF_SPLIT_MAX` the most defects the split path is tried for
//! (`GpuOptions::uf_split_max_defects`; default: automatic). With `QFWD_UF_TRACE=1` the
//! kernels print the uf decoder's stage trace (device/decode/common.cuh, "Stage trace";
//! `scripts/uf-trace.py` summarizes it).

#[path = "gpu_common/decoders.rs"]
mod decoders;
mod gpu_common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use decoders::{env_or, fixtures_dir, load, options, shot_paths, table_k, table_k_of, Fixture};
use gpu_common::gpu_or_skip;
use qfwd::backend::Backend;
use qfwd::decode::dem::chain_text;
use qfwd::decode::uf_split::Path as UfPath;
use qfwd::decode::{Decoder, DecoderKind, Shots};
use qfwd::decode_cli::{evaluate, DecodeArgs, DecodeBackend, OutputFormat};
use qfwd::gpu::decoder::ScratchPlacement;
use qfwd::gpu::{self, GpuOptions, PersistentKernel};
use qfwd::handler::Handler;
use qfwd::mailbox::MailboxBackend;
use qfwd::wire::status;

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
                DecoderKind::Matching => unreachable!("kinds_for lists the GPU's kinds"),
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
                    DecoderKind::Matching => unreachable!("kinds_for lists the GPU's kinds"),
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
            DecoderKind::Matching => unreachable!("these fixtures are lut and uf"),
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
                DecoderKind::Matching => unreachable!("the padded chains are lut and uf"),
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
            DecoderKind::Matching => unreachable!("these fixtures are lut and uf"),
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

/// The matching decoder runs on the CPU only: on a GPU host too, every GPU backend and
/// `qfwd decode --backend gpu` refuse it at start, naming uf.
#[test]
#[ignore = "needs an NVIDIA GPU: cargo test --release --test gpu_decoders -- --ignored --nocapture --test-threads=1"]
fn gpu_backends_refuse_the_matching_decoder() {
    let Some(_gpu) = gpu_or_skip("gpu_backends_refuse_the_matching_decoder") else {
        return;
    };
    let dir = fixtures_dir();
    let dem = dir.join("surface_d3_r3_z_p005.dem");
    let dec = Arc::new(Decoder::from_dem_path(&dem, DecoderKind::Matching).unwrap());
    let refused = |e: String| assert!(e.contains("CPU only") && e.contains("--decoder uf"), "{e}");
    refused(
        gpu::persistent_backend_with(&options(), &[Arc::clone(&dec)])
            .err()
            .expect("refused")
            .to_string(),
    );
    refused(
        gpu::launch_backend_with(&options(), &[Arc::clone(&dec)])
            .err()
            .expect("refused")
            .to_string(),
    );
    let args = DecodeArgs {
        decoder: DecoderKind::Matching,
        backend: DecodeBackend::Gpu,
        ..DecodeArgs::new(dem, dir.join("surface_d3_r3_z_p005.b8"))
    };
    refused(evaluate(&args).unwrap_err().to_string());
}
