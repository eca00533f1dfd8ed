//! `qfwd decode`: a decoder's accuracy and per-shot time on Stim data, like
//! `pymatching count_mistakes`.
//!
//! ```text
//! qfwd decode --dem F.dem --dets F.b8 --obs F.obs.01 --decoder uf [--backend cpu] [--format json]
//! ```
//!
//! On the CPU, every shot is decoded back to back [`CPU_BATCH_PASSES`] times over (the
//! throughput figure, `batch_ns_per_shot`: the fastest pass's wall time / shots, comparable
//! to PyMatching's `decode_batch` wall time / shots, which `scripts/bench-pymatching.py`
//! also takes as the best of 3 calls over the same shots), and then once more with a clock
//! read around each decode (the per-shot distribution: mean, p50, p99; it includes the
//! ~20 ns the two clock reads cost). JSON says how many passes in `batch_passes`.
//! Mistakes count the shots whose predicted
//! observable flips differ from the recorded ones in any observable; the logical error
//! rate's 95% confidence interval is Wilson's score interval.
//!
//! `--backend gpu` decodes every shot on the GPU, through the appliance's own path: a
//! `gpu-persistent` mailbox backend serving the decoder (default [`GpuOptions`], one PCIe
//! read per request). The back-to-back pass keeps up to 32 requests in flight
//! (throughput); the timed pass sends one at a time and times each **round trip** (host
//! writes the request, the persistent kernel decodes it, the host sees the response), not
//! the decode alone: the text output says so and the JSON has `"timing": "round_trip"`.
//! Both passes must agree shot for shot.
#![forbid(unsafe_code)]

use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;

use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};

use crate::backend::Backend;
use crate::decode::window::{MatchLimits, StreamDecoder, StreamModel};
use crate::decode::{self, Decoder, DecoderKind, Dem, ShotFormat, Shots};
use crate::gpu::{self, GpuOptions};
use crate::handler::Handler;
use crate::wire::status;
use crate::{Error, Result};

/// Where `qfwd decode` runs the decoder.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum DecodeBackend {
    /// The CPU reference decoder.
    Cpu,
    /// The GPU decoder (bit-identical to the CPU one).
    Gpu,
}

impl DecodeBackend {
    pub fn as_str(&self) -> &'static str {
        match self {
            DecodeBackend::Cpu => "cpu",
            DecodeBackend::Gpu => "gpu",
        }
    }
}

/// How `qfwd decode` prints its result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum OutputFormat {
    /// Lines for a person.
    Text,
    /// One JSON object.
    Json,
}

/// `--decoder`'s values with their help (the decoder crate has no command line).
pub fn decoder_parser() -> impl TypedValueParser<Value = DecoderKind> {
    PossibleValuesParser::new([
        PossibleValue::new("lut").help("Lookup table (at most 24 detectors)"),
        PossibleValue::new("uf").help("Union-find"),
    ])
    .try_map(|name| name.parse::<DecoderKind>())
}

/// `--dets-format` and `--obs-format`'s values with their help.
pub fn shot_format_parser() -> impl TypedValueParser<Value = ShotFormat> {
    PossibleValuesParser::new([
        PossibleValue::new("b8").help("Bit-packed, `ceil(bits/8)` bytes per shot, LSB first"),
        PossibleValue::new("01").help("Text, one line of `0`/`1` characters per shot"),
    ])
    .map(|name| match name.as_str() {
        "b8" => ShotFormat::B8,
        _ => ShotFormat::Zero1,
    })
}

/// `qfwd decode` arguments.
#[derive(clap::Args, Debug, Clone)]
#[command(after_help = "Examples:\n  \
qfwd decode --dem tests/fixtures/surface_d5_r5_z_p001.dem --dets tests/fixtures/surface_d5_r5_z_p001.b8 \\\n    \
--obs tests/fixtures/surface_d5_r5_z_p001.obs.01 --decoder uf\n  \
qfwd decode --dem d3.dem --dets d3.b8 --obs d3.obs.01 --decoder lut --format json\n  \
qfwd decode --dem d5_r100.dem --dets d5_r100.b8 --obs d5_r100.obs.01 --decoder uf --window 15,5\n\n\
Make the files with Stim: circuit.detector_error_model(decompose_errors=True, flatten_loops=True),\n\
and sampler.sample_write(shots, filepath=\"F.b8\", format=\"b8\", obs_out_filepath=\"F.obs.01\", obs_out_format=\"01\").")]
pub struct DecodeArgs {
    /// Stim detector error model (exported with decompose_errors=True).
    #[arg(long, value_name = "FILE")]
    pub dem: PathBuf,
    /// Detection events, one shot per row (b8 or 01; from the extension unless --dets-format).
    #[arg(long, value_name = "FILE")]
    pub dets: PathBuf,
    /// Observables that actually flipped, one shot per row (01 or b8; from the extension
    /// unless --obs-format, 01 when the extension says neither).
    #[arg(long, value_name = "FILE")]
    pub obs: PathBuf,
    /// Decoder: lut (at most 24 detectors) or uf (union-find).
    #[arg(long, value_parser = decoder_parser())]
    pub decoder: DecoderKind,
    /// Where to decode.
    #[arg(long, value_enum, default_value_t = DecodeBackend::Cpu)]
    pub backend: DecodeBackend,
    /// Output: text or one JSON object.
    #[arg(long, value_enum, default_value_t = OutputFormat::Text)]
    pub format: OutputFormat,
    /// Format of --dets (default: from the extension, b8 for .b8, else 01).
    #[arg(long, value_parser = shot_format_parser(), value_name = "b8|01")]
    pub dets_format: Option<ShotFormat>,
    /// Format of --obs (default: from the extension, b8 for .b8, else 01).
    #[arg(long, value_parser = shot_format_parser(), value_name = "b8|01")]
    pub obs_format: Option<ShotFormat>,
    /// Decode only the first N shots.
    #[arg(long, value_name = "N")]
    pub shots: Option<usize>,
    /// Also write the predicted observable flips to this file (b8 for .b8, else 01).
    #[arg(long, value_name = "FILE")]
    pub predictions: Option<PathBuf>,
    /// Decode each shot as a stream of rounds (docs/streaming.md): windows of W rounds,
    /// committing the first C of each, e.g. `--window 15,5`. Needs a memory experiment
    /// whose detectors have coordinates (x, y, t); uf on the CPU only. The prediction is
    /// the XOR of a shot's commits.
    #[arg(long, value_name = "W,C", value_parser = parse_window)]
    pub window: Option<(u32, u32)>,
    /// With --window: the window decoder matches regions of at most N defects exactly
    /// (0: union-find alone; at most 16).
    #[arg(long, value_name = "N", default_value_t = MatchLimits::DEFAULT.defects)]
    pub match_defects: u32,
}

/// `--window W,C`.
fn parse_window(s: &str) -> std::result::Result<(u32, u32), String> {
    let bad = || format!("{s:?}: expected W,C (rounds per window, rounds committed), e.g. 15,5");
    let (w, c) = s.split_once(',').ok_or_else(bad)?;
    Ok((
        w.trim().parse().map_err(|_| bad())?,
        c.trim().parse().map_err(|_| bad())?,
    ))
}

/// What `qfwd decode` measured.
#[derive(Debug, Clone, PartialEq)]
pub struct DecodeReport {
    pub dem: PathBuf,
    pub decoder: DecoderKind,
    pub backend: DecodeBackend,
    pub detectors: usize,
    /// Detectors the decoder reads: a `uf` decoder's observable part
    /// ([`super::observable_part`]), else all of them.
    pub decoded_detectors: usize,
    pub observables: usize,
    pub edges: usize,
    pub shots: u64,
    pub mistakes: u64,
    /// mistakes / shots.
    pub ler: f64,
    /// Wilson 95% interval of the logical error rate.
    pub ci_low: f64,
    pub ci_high: f64,
    pub mean_ns: f64,
    pub p50_ns: u64,
    pub p99_ns: u64,
    pub max_ns: u64,
    /// Wall time of the fastest untimed back-to-back pass / shots.
    pub batch_ns_per_shot: f64,
    /// Untimed back-to-back passes `batch_ns_per_shot` is the fastest of.
    pub batch_passes: u32,
    /// Parsing the model and building the decoder.
    pub setup_ms: f64,
    /// Predicted observable flips, one row per shot.
    pub predictions: Shots,
    /// `--window`: (W, C), and the windows a shot took on average (its commits).
    pub window: Option<(u32, u32)>,
    pub windows_per_shot: f64,
}

/// How each shot is decoded: at once, or as a stream of rounds.
enum ShotDecoder {
    Whole {
        dec: Arc<Decoder>,
        scratch: Box<decode::Scratch>,
    },
    Stream {
        /// Each shot split into its rounds, `rounds * round_bytes` bytes a shot.
        split: Vec<Vec<u8>>,
        round_bytes: usize,
        stream: Box<StreamDecoder>,
        commits: u64,
    },
}

impl ShotDecoder {
    fn new(
        dec: &Arc<Decoder>,
        window: Option<(u32, u32)>,
        match_defects: u32,
        dem: &Dem,
        dets: &Shots,
    ) -> Result<ShotDecoder> {
        let Some((w, c)) = window else {
            return Ok(ShotDecoder::Whole {
                dec: Arc::clone(dec),
                scratch: Box::new(dec.new_scratch()),
            });
        };
        if dec.kind() != DecoderKind::Uf {
            return Err(Error::Decode {
                detail: format!(
                    "--window decodes with uf; --decoder {} has no stream form",
                    dec.kind()
                ),
            });
        }
        let limits = MatchLimits {
            defects: match_defects,
            ..MatchLimits::DEFAULT
        };
        let model = Arc::new(StreamModel::from_dem_with(dem, w, c, limits)?);
        let exp = model.experiment(dem)?;
        let split = (0..dets.len())
            .map(|i| exp.split(dets.row(i)).concat())
            .collect();
        Ok(ShotDecoder::Stream {
            split,
            round_bytes: model.round_bytes(),
            stream: Box::new(StreamDecoder::new(&model)),
            commits: 0,
        })
    }

    /// Shot `i`'s observable flips.
    fn decode(&mut self, dets: &Shots, i: usize) -> u64 {
        match self {
            ShotDecoder::Whole { dec, scratch } => dec.decode(scratch, dets.row(i)),
            ShotDecoder::Stream {
                split,
                round_bytes,
                stream,
                commits,
            } => {
                stream.reset();
                let rounds: Vec<&[u8]> = split[i].chunks(*round_bytes).collect();
                let (last, body) = rounds.split_last().expect("a shot has its final round");
                let mut flips = 0;
                for (r, ev) in body.iter().enumerate() {
                    if let Some(c) = stream.push_round(r as u64, ev).expect("rounds in order") {
                        flips ^= c.flips;
                        *commits += 1;
                    }
                }
                *commits += 1;
                flips ^ stream.finish(last).expect("a whole experiment").flips
            }
        }
    }
}

/// What `--backend gpu` measured: predictions, one round trip per shot, throughput.
struct GpuPasses {
    masks: Vec<u64>,
    round_trip_ns: Vec<u64>,
    batch_ns_per_shot: f64,
}

/// Back-to-back passes over all shots on the CPU; `batch_ns_per_shot` is the fastest.
pub const CPU_BATCH_PASSES: u32 = 3;

/// Requests in flight in the back-to-back GPU pass.
const GPU_WINDOW: usize = 32;
/// Longest a GPU round trip may take before the pass gives up on the kernel.
const GPU_DEADLINE: Duration = Duration::from_secs(2);

/// Decodes every shot through a `gpu-persistent` backend serving `dec`: pipelined, then one
/// at a time with each round trip timed; the two passes must agree.
fn gpu_passes(dec: &Arc<Decoder>, dets: &Shots) -> Result<GpuPasses> {
    let options = GpuOptions::default();
    let mut backend = gpu::persistent_backend_with(&options, std::slice::from_ref(dec))?;
    let handler = Handler::Decoder(Arc::clone(dec));
    let shots = dets.len();
    let payloads: Vec<Vec<u8>> = (0..shots).map(|i| dec.payload(dets.row(i))).collect();
    let failed = |what: String| Error::Decode {
        detail: format!("GPU decoder: {what}"),
    };
    let mut first: Result<()> = Ok(());
    let mut record = |masks: &mut Vec<u64>, token: u32, st: i32, result: &[u8]| {
        if st != status::OK && first.is_ok() {
            first = Err(failed(format!(
                "shot {token} answered status {st} ({})",
                status::name(st)
            )));
        }
        masks[token as usize] = mask_of(result);
    };

    // Pass 1: up to GPU_WINDOW in flight.
    let mut masks = vec![0u64; shots];
    let t = Instant::now();
    let (mut next, mut done) = (0usize, 0usize);
    let mut last_progress = Instant::now();
    while done < shots {
        // A poller group that falls behind holds its slots, so the ring can refuse
        // (OVERLOAD) before GPU_WINDOW are in flight: then poll and submit again.
        while next < shots && backend.in_flight() < GPU_WINDOW {
            match backend.submit(next as u32, &handler, &payloads[next]) {
                Ok(()) => next += 1,
                Err(st) if st == status::OVERLOAD => break,
                Err(st) => return Err(failed(format!("submit refused with status {st}"))),
            }
        }
        let got = backend.poll(|c| record(&mut masks, c.token, c.status, c.result));
        if got > 0 {
            done += got;
            last_progress = Instant::now();
        } else if last_progress.elapsed() > GPU_DEADLINE {
            return Err(failed(format!(
                "no answer within {GPU_DEADLINE:?} ({done} of {shots} shots done)"
            )));
        }
    }
    let batch_ns_per_shot = t.elapsed().as_nanos() as f64 / shots as f64;

    // Pass 2: one at a time, each round trip timed.
    let mut again = vec![0u64; shots];
    let mut round_trip_ns = Vec::with_capacity(shots);
    for (i, payload) in payloads.iter().enumerate() {
        let t = Instant::now();
        backend
            .submit(i as u32, &handler, payload)
            .map_err(|st| failed(format!("submit refused with status {st}")))?;
        let mut spins = 0u32;
        while backend.poll(|c| record(&mut again, c.token, c.status, c.result)) == 0 {
            spins = spins.wrapping_add(1);
            if spins % 4096 == 0 && t.elapsed() > GPU_DEADLINE {
                return Err(failed(format!(
                    "shot {i}: no answer within {GPU_DEADLINE:?}"
                )));
            }
        }
        round_trip_ns.push(t.elapsed().as_nanos() as u64);
    }
    backend.shutdown(Duration::from_secs(2))?;
    first?;
    if let Some(i) = (0..shots).find(|&i| masks[i] != again[i]) {
        return Err(failed(format!(
            "shot {i} decoded to {:#x} and then to {:#x}",
            masks[i], again[i]
        )));
    }
    Ok(GpuPasses {
        masks,
        round_trip_ns,
        batch_ns_per_shot,
    })
}

/// Wilson score interval for `k` successes in `n` trials at `z` standard deviations.
pub fn wilson_interval(k: u64, n: u64, z: f64) -> (f64, f64) {
    if n == 0 {
        return (0.0, 1.0);
    }
    let n = n as f64;
    let p = k as f64 / n;
    let z2 = z * z;
    let denom = 1.0 + z2 / n;
    let center = (p + z2 / (2.0 * n)) / denom;
    let half = z * (p * (1.0 - p) / n + z2 / (4.0 * n * n)).sqrt() / denom;
    ((center - half).max(0.0), (center + half).min(1.0))
}

fn mask_of(row: &[u8]) -> u64 {
    row.iter()
        .enumerate()
        .fold(0u64, |m, (k, &b)| m | u64::from(b) << (8 * k))
}

/// Loads the model and shots, decodes every shot, and measures.
pub fn evaluate(args: &DecodeArgs) -> Result<DecodeReport> {
    if args.backend == DecodeBackend::Gpu {
        if let Some(why) = gpu::unavailable_reason() {
            return Err(Error::Decode {
                detail: format!("--backend gpu needs an NVIDIA GPU: {why}; use --backend cpu"),
            });
        }
    }
    if args.window.is_some() && args.backend == DecodeBackend::Gpu {
        return Err(Error::Decode {
            detail: "--window runs on the CPU (the GPU stream decoder has its own tests: \
                     docs/streaming.md); use --backend cpu"
                .into(),
        });
    }
    let t0 = Instant::now();
    let dem = Dem::from_path(&args.dem)?;
    let dec = Arc::new(Decoder::from_graph(
        decode::MatchingGraph::from_dem(&dem)?,
        args.decoder,
    )?);
    let setup_ms = t0.elapsed().as_secs_f64() * 1e3;
    let mut dets =
        Shots::read(&args.dets, dec.num_detectors(), args.dets_format).map_err(|e| match e {
            decode::Error::Shots { path, detail } => decode::Error::Shots {
                path,
                detail: format!(
                    "{detail} (the model {} has {} detectors)",
                    args.dem.display(),
                    dec.num_detectors()
                ),
            },
            other => other,
        })?;
    let mut obs = Shots::read(&args.obs, dec.num_observables(), args.obs_format)?;
    if dets.len() != obs.len() {
        return Err(Error::Decode {
            detail: format!(
                "{} holds {} shots but {} holds {}: they must come from the same sampling run",
                args.dets.display(),
                dets.len(),
                args.obs.display(),
                obs.len()
            ),
        });
    }
    if let Some(n) = args.shots {
        dets.truncate(n);
        obs.truncate(n);
    }
    let shots = dets.len();
    if shots == 0 {
        return Err(Error::Decode {
            detail: format!("{} holds no shots", args.dets.display()),
        });
    }
    let mut hist =
        Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 3).expect("valid histogram bounds");
    let mut total_ns: u128 = 0;
    let mut predicted = Vec::with_capacity(shots);
    let (batch_ns_per_shot, batch_passes);
    let mut windows_per_shot = 0.0;
    match args.backend {
        DecodeBackend::Cpu => {
            let mut shot_decoder =
                ShotDecoder::new(&dec, args.window, args.match_defects, &dem, &dets)?;
            // Passes 1..=CPU_BATCH_PASSES: back to back, the fastest counts.
            let mut masks = vec![0u64; shots];
            let mut best = Duration::MAX;
            for _ in 0..CPU_BATCH_PASSES {
                let t = Instant::now();
                for (i, m) in masks.iter_mut().enumerate() {
                    *m = shot_decoder.decode(&dets, i);
                }
                best = best.min(t.elapsed());
            }
            batch_ns_per_shot = best.as_nanos() as f64 / shots as f64;
            batch_passes = CPU_BATCH_PASSES;
            if let ShotDecoder::Stream { commits, .. } = &shot_decoder {
                windows_per_shot = *commits as f64 / (CPU_BATCH_PASSES as usize * shots) as f64;
            }
            // Last pass: each shot timed.
            for (i, &first) in masks.iter().enumerate() {
                let t = Instant::now();
                let m = shot_decoder.decode(&dets, i);
                let ns = t.elapsed().as_nanos();
                total_ns += ns;
                hist.saturating_record(ns.max(1) as u64);
                debug_assert_eq!(m, first, "decoding is deterministic");
                predicted.push(m);
            }
        }
        DecodeBackend::Gpu => {
            let gpu = gpu_passes(&dec, &dets)?;
            batch_ns_per_shot = gpu.batch_ns_per_shot;
            batch_passes = 1;
            for (&m, &ns) in gpu.masks.iter().zip(&gpu.round_trip_ns) {
                total_ns += u128::from(ns);
                hist.saturating_record(ns.max(1));
                predicted.push(m);
            }
        }
    }

    let mut predictions = Shots::new(dec.num_observables());
    let mut out = vec![0u8; dec.result_len()];
    let mut mistakes = 0u64;
    for (i, &m) in predicted.iter().enumerate() {
        if m != mask_of(obs.row(i)) {
            mistakes += 1;
        }
        for (k, b) in out.iter_mut().enumerate() {
            *b = (m >> (8 * k)) as u8;
        }
        predictions.push_row(&out);
    }
    if let Some(path) = &args.predictions {
        let f = ShotFormat::from_extension(path).unwrap_or(ShotFormat::Zero1);
        predictions.write(path, f)?;
    }
    let (ci_low, ci_high) = wilson_interval(mistakes, shots as u64, 1.959_963_984_540_054);
    Ok(DecodeReport {
        dem: args.dem.clone(),
        decoder: args.decoder,
        backend: args.backend,
        detectors: dec.num_detectors(),
        decoded_detectors: dec.decode_graph().num_detectors(),
        observables: dec.num_observables(),
        edges: dec.graph().num_edges(),
        shots: shots as u64,
        mistakes,
        ler: mistakes as f64 / shots as f64,
        ci_low,
        ci_high,
        mean_ns: total_ns as f64 / shots as f64,
        p50_ns: hist.value_at_quantile(0.5),
        p99_ns: hist.value_at_quantile(0.99),
        max_ns: hist.max(),
        batch_ns_per_shot,
        batch_passes,
        setup_ms,
        predictions,
        window: args.window,
        windows_per_shot,
    })
}

fn json_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn json_f64(x: f64) -> String {
    if x.is_finite() {
        format!("{x}")
    } else {
        "null".into()
    }
}

fn time(ns: f64) -> String {
    if ns < 1e3 {
        format!("{ns:.0} ns")
    } else if ns < 1e6 {
        format!("{:.2} µs", ns / 1e3)
    } else {
        format!("{:.2} ms", ns / 1e6)
    }
}

impl DecodeReport {
    /// What the per-shot times measure: `decode` (cpu) or `round_trip` (gpu: host to the
    /// persistent kernel and back, decode included).
    pub fn timing(&self) -> &'static str {
        match self.backend {
            DecodeBackend::Cpu => "decode",
            DecodeBackend::Gpu => "round_trip",
        }
    }

    /// One JSON object on one line.
    pub fn to_json(&self) -> String {
        format!(
            "{{\"dem\":{},\"decoder\":\"{}\",\"backend\":\"{}\",\"detectors\":{},\"decoded_detectors\":{},\
             \"observables\":{},\"edges\":{},\"shots\":{},\"mistakes\":{},\"ler\":{},\"ci_low\":{},\"ci_high\":{},\
             \"mean_ns\":{},\"p50_ns\":{},\"p99_ns\":{},\"max_ns\":{},\"batch_ns_per_shot\":{},\
             \"batch_passes\":{},\"setup_ms\":{},\"timing\":\"{}\",\"window\":{},\"windows_per_shot\":{}}}",
            json_string(&self.dem.display().to_string()),
            self.decoder,
            self.backend.as_str(),
            self.detectors,
            self.decoded_detectors,
            self.observables,
            self.edges,
            self.shots,
            self.mistakes,
            json_f64(self.ler),
            json_f64(self.ci_low),
            json_f64(self.ci_high),
            json_f64((self.mean_ns * 10.0).round() / 10.0),
            self.p50_ns,
            self.p99_ns,
            self.max_ns,
            json_f64((self.batch_ns_per_shot * 10.0).round() / 10.0),
            self.batch_passes,
            json_f64((self.setup_ms * 1000.0).round() / 1000.0),
            self.timing(),
            self.window
                .map_or("null".to_string(), |(w, c)| format!("[{w},{c}]")),
            json_f64((self.windows_per_shot * 1000.0).round() / 1000.0),
        )
    }

    /// Lines for a person.
    pub fn to_text(&self) -> String {
        let stream = match self.window {
            Some((w, c)) => format!(
                "stream    windows of {w} rounds committing {c}: {:.1} windows per shot, \
                 {} per window (mean)\n",
                self.windows_per_shot,
                time(self.mean_ns / self.windows_per_shot.max(1.0))
            ),
            None => String::new(),
        };
        format!(
            "model     {}: {} detectors{}, {} observables, {} edges (loaded in {:.1} ms)\n\
             decoder   {} on {}\n\
             shots     {}\n\
             mistakes  {}\n\
             LER       {:.3e} per shot (95% CI {:.3e} .. {:.3e}, Wilson)\n\
             time      {}: mean {}, p50 {}, p99 {}, max {} per shot; {} per shot back to back \
             (fastest of {} passes)\n",
            self.dem.display(),
            self.detectors,
            if self.decoded_detectors < self.detectors {
                format!(
                    " ({} decoded: those whose components can flip an observable)",
                    self.decoded_detectors
                )
            } else {
                String::new()
            },
            self.observables,
            self.edges,
            self.setup_ms,
            self.decoder,
            self.backend.as_str(),
            self.shots,
            self.mistakes,
            self.ler,
            self.ci_low,
            self.ci_high,
            match self.backend {
                DecodeBackend::Cpu => "decode",
                DecodeBackend::Gpu => "round trip (host -> GPU -> host)",
            },
            time(self.mean_ns),
            time(self.p50_ns as f64),
            time(self.p99_ns as f64),
            time(self.max_ns as f64),
            time(self.batch_ns_per_shot),
            self.batch_passes,
        ) + &stream
    }
}

/// `qfwd decode`: evaluates and prints the report to stdout.
pub fn run(args: &DecodeArgs) -> Result<()> {
    let report = evaluate(args)?;
    match args.format {
        OutputFormat::Text => print!("{}", report.to_text()),
        OutputFormat::Json => println!("{}", report.to_json()),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wilson_matches_known_values() {
        // 10 of 100 at 95%: (0.0552, 0.1744).
        let (lo, hi) = wilson_interval(10, 100, 1.959_963_984_540_054);
        assert!(
            (lo - 0.0552).abs() < 1e-4 && (hi - 0.1744).abs() < 1e-4,
            "{lo} {hi}"
        );
        let (lo, hi) = wilson_interval(0, 1000, 1.96);
        assert_eq!(lo, 0.0);
        assert!(hi > 0.003 && hi < 0.004, "{hi}");
    }

    #[test]
    fn json_strings_are_escaped() {
        assert_eq!(json_string("a\"b\\c\n"), "\"a\\\"b\\\\c\\u000a\"");
    }
}
