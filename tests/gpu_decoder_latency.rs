//! The GPU decoders' latency probe, by hand on an NVIDIA GPU (not a benchmark report: the
//! harness in `latency/` writes those): ping-pong round trips, submit -> poll, of committed
//! surface-code fixtures' shots in order (d = 3, 5, 7 at p = 0.001; d = 5, 7 at p = 0.005)
//! through the persistent kernel, one row per decoder / poller layout / uf table setting /
//! placement of the decoder state, with p50/p90/p99/p99.9/max. Each row also prints its
//! transport floor (parity of the same payloads, on a kernel without decoders and on the
//! row's kernel), uf's round trips per device path (empty, table, isolated, split, full;
//! the split shots only the second grouping answers apart; each path's share of the
//! slowest 1 %), the CPU's decode-only time on the same shots, and where it has one,
//! whether its p99 meets the target. Identity of the answers is tests/gpu_decoders.rs's;
//! the mailbox alone, without decoders, is tests/gpu_latency_probe.rs's.
//!
//! ```text
//! cargo test --release --test gpu_decoder_latency -- --ignored --nocapture
//! ```
//!
//! Prints a notice and passes where there is no GPU. `QFWD_GPU` picks the device (default
//! 0); `QFWD_PROBE_SAMPLES` the samples per probe row (default 20000); `QFWD_PROBE_CORE` the
//! core the probe thread is pinned to (default: the last one); `QFWD_PROBE_ROWS` the probe
//! rows to run, by number (`0,3`; each row prints its number; default: all);
//! `QFWD_UF_TABLE_K` the table's K of the rows that say "table" (default: automatic);
//! `QFWD_UF_SPLIT_MAX` the most defects the split path is tried for (default: automatic);
//! `QFWD_ENFORCE_TARGETS=1` fails the test where a row misses its p99 target. With
//! `QFWD_UF_TRACE=1` the kernels print the uf decoder's stage trace
//! (device/decode/common.cuh, "Stage trace"; `scripts/uf-trace.py` summarizes it).

#[path = "gpu_common/decoders.rs"]
mod decoders;
mod gpu_common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use decoders::{env_or, load, options, shot_paths, table_k, table_k_of, Fixture};
use gpu_common::gpu_or_skip;
use qfwd::backend::Backend;
use qfwd::decode::uf_split::Path as UfPath;
use qfwd::decode::Decoder;
use qfwd::decode::DecoderKind::{self, Lut, Uf};
use qfwd::gpu::decoder::ScratchPlacement::{self, Auto, Global};
use qfwd::gpu::{self, GpuOptions, PersistentKernel};
use qfwd::handler::Handler;
use qfwd::mailbox::MailboxBackend;
use qfwd::wire::status;

// The uf table of a probe row: `AUTO` (`QFWD_UF_TABLE_K`, else automatic), `OFF`, or a
// given K.
const AUTO: Option<Option<u32>> = None;
const OFF: Option<Option<u32>> = Some(Some(0));

const D3: &str = "surface_d3_r3_z_p001";
const D5: &str = "surface_d5_r5_z_p001";
const D7: &str = "surface_d7_r7_z_p001";

/// (label, fixture, kind, placement, pollers, pollers per slot, uf table, target p99 µs).
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

/// The probe's rows; `QFWD_PROBE_ROWS` picks them by their index here.
const ROWS: &[Row] = &[
    ("lut d3", D3, Lut, Auto, 8, 2, AUTO, None),
    ("uf d3", D3, Uf, Auto, 8, 2, AUTO, None),
    ("uf d3", D3, Uf, Auto, 8, 2, OFF, None),
    ("uf d5", D5, Uf, Auto, 8, 2, AUTO, Some(6.0)),
    ("uf d5", D5, Uf, Auto, 8, 2, OFF, Some(6.0)),
    ("uf d5", D5, Uf, Auto, 8, 2, Some(Some(4)), Some(6.0)),
    ("uf d7", D7, Uf, Auto, 8, 2, AUTO, Some(10.0)),
    ("uf d7", D7, Uf, Auto, 8, 2, OFF, Some(10.0)),
    // A group's two warps both decode a request (the loser of the claim too) and share
    // an SM sub-partition: one warp per slot, and a single poller, isolate that.
    ("uf d5, 8 pollers 1/slot", D5, Uf, Auto, 8, 1, AUTO, None),
    ("uf d7, 8 pollers 1/slot", D7, Uf, Auto, 8, 1, AUTO, None),
    ("uf d7, 1 poller", D7, Uf, Auto, 1, 1, AUTO, None),
    (
        "uf d5 (state in global memory)",
        D5,
        Uf,
        Global,
        8,
        2,
        AUTO,
        None,
    ),
    (
        "uf d7 (state in global memory)",
        D7,
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
        D5,
        Uf,
        Auto,
        2,
        2,
        AUTO,
        Some(6.0),
    ),
    (
        "uf d7, 2 pollers in one group",
        D7,
        Uf,
        Auto,
        2,
        2,
        AUTO,
        Some(10.0),
    ),
];

#[test]
#[ignore = "needs an NVIDIA GPU: cargo test --release --test gpu_decoder_latency -- --ignored --nocapture"]
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
    let mut missed = Vec::new();
    let only = selected_rows();
    for (number, r) in ROWS.iter().enumerate() {
        if only.as_ref().is_some_and(|o| !o.contains(&number)) {
            continue;
        }
        missed.extend(probe_row(number, r, warmup, samples));
    }
    if std::env::var("QFWD_ENFORCE_TARGETS").as_deref() == Ok("1") {
        assert!(missed.is_empty(), "targets missed: {missed:?}");
    }
}

/// The rows `QFWD_PROBE_ROWS` picks (`0,3`), or `None`: all.
fn selected_rows() -> Option<Vec<usize>> {
    std::env::var("QFWD_PROBE_ROWS").ok().map(|v| {
        v.split(',')
            .map(|r| {
                r.trim()
                    .parse()
                    .unwrap_or_else(|_| panic!("QFWD_PROBE_ROWS: {r:?} is not a row number"))
            })
            .collect()
    })
}

/// Runs probe row `number` and prints its lines; its label where it misses its p99 target.
fn probe_row(number: usize, r: &Row, warmup: usize, samples: usize) -> Option<String> {
    let &(label, name, kind, placement, pollers, pollers_per_slot, table, target) = r;
    println!("probe row {number}: {label}, {name}");
    let f = load(name, kind, usize::MAX);
    let decs = [Arc::clone(&f.dec)];
    let table = table.unwrap_or_else(table_k);
    let label = table_label(label, &f, kind, table);
    let mut o = GpuOptions {
        pollers,
        pollers_per_slot,
        uf_table_max_defects: table,
        ..options()
    };
    o.poll_chunks = gpu::decoder::poll_chunks_for(&decs);
    parity_floor(&o, &f, &label, warmup, samples);
    let (timed, ns, p99) = decoder_round_trips(&o, &decs, placement, &f, &label, warmup, samples);
    if kind == DecoderKind::Uf {
        per_path_rows(&shot_paths(&f.dec, &f.payloads, table), &timed, &ns);
    }
    cpu_decode_row(&f, kind, samples);
    let t = target?;
    let verdict = if p99 <= t { "meets" } else { "MISSES" };
    println!("  target p99 <= {t} µs: {verdict} ({p99:.2} µs)");
    (p99 > t).then_some(label)
}

/// `label` with the row's uf table (`table`, as the upload chooses its K): none, or its K
/// and the shares of the shots it answers and of the empty ones.
fn table_label(label: &str, f: &Fixture, kind: DecoderKind, table: Option<u32>) -> String {
    let k = table_k_of(&f.dec, table);
    match kind {
        DecoderKind::Uf if k == 0 => format!("{label}, no table"),
        DecoderKind::Uf => {
            let (hit, zero) = table_share(&f.dec, &f.payloads, k);
            format!(
                "{label}, table K={k} ({:.1}% of shots, {:.1}% empty)",
                100.0 * hit,
                100.0 * zero
            )
        }
        DecoderKind::Lut | DecoderKind::Matching => label.to_string(),
    }
}

/// The transport floor for the same request size: parity of the same payloads, on a
/// kernel without decoders.
fn parity_floor(o: &GpuOptions, f: &Fixture, label: &str, warmup: usize, samples: usize) {
    let mut b = gpu::persistent_backend(o).unwrap();
    let ns = ping_pong(&mut b, &Handler::Parity, &f.payloads, warmup, samples);
    row(
        &format!("parity, {} B (floor for {label})", f.payloads[0].len()),
        &ns,
    );
    b.shutdown(Duration::from_secs(2)).unwrap();
}

/// The decoder's round trips on a persistent kernel with `decs` (their state placed by
/// `placement`), then the parity floor again on that kernel. Returns the round trips
/// ([`ping_pong_each`]), the same sorted, and their p99 in µs.
fn decoder_round_trips(
    o: &GpuOptions,
    decs: &[Arc<Decoder>],
    placement: ScratchPlacement,
    f: &Fixture,
    label: &str,
    warmup: usize,
    samples: usize,
) -> (Vec<(usize, u64)>, Vec<u64>, f64) {
    let k = PersistentKernel::start_with(o, None, decs, placement).unwrap();
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
    (timed, ns, p99)
}

/// The CPU reference on the same shots, for scale (decode only, no transport).
fn cpu_decode_row(f: &Fixture, kind: DecoderKind, samples: usize) {
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
