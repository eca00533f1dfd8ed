//! `qfwd decode`: decodes Stim shot files or streams, like `pymatching predict` (the
//! predicted observable flips, `01` or `b8`, to a file or stdout) and `pymatching
//! count_mistakes` (a decoder's accuracy and per-shot time).
//!
//! ```text
//! qfwd decode --dem F.dem --dets F.b8 --obs F.obs.01 [--decoder uf] [--backend cpu] [--format json]
//! stim sample_dem ... | qfwd decode --dem F.dem --in - --in_format b8 --out - --out_format 01
//! ```
//!
//! With observables (`--obs`, or `--in-includes-appended-observables`) it counts mistakes;
//! without, it predicts. PyMatching's flag names work beside qfwd's (`--in`, `--in_format`,
//! `--obs_in`, `--obs_in_format`, `--out`, `--out_format`, `--in_includes_appended_observables`),
//! `-` is stdin or stdout, and a model may have any number of observables
//! ([`crate::decode::dem::MAX_OBSERVABLES`]; `--backend gpu` holds 64).
//!
//! **Predicting** streams: shots are read, decoded and written in batches of
//! [`PREDICT_BATCH`] (`--threads` workers decode a batch, [`Decoder::decode_batch`]), so a
//! pipeline of any length runs in constant memory.
//!
//! **Counting** reads every shot first. On the CPU, every shot is decoded back to back
//! [`CPU_BATCH_PASSES`] times over (the throughput figure, `batch_ns_per_shot`: the fastest
//! pass's wall time / shots, comparable to PyMatching's `decode_batch` wall time / shots,
//! which `scripts/bench-pymatching.py` also takes as the best of 3 calls over the same
//! shots), and then once more with a clock read around each decode (the per-shot
//! distribution: mean, p50, p99; it includes the ~20 ns the two clock reads cost). JSON
//! says how many passes in `batch_passes`. Mistakes count the shots whose predicted
//! observable flips differ from the recorded ones in any observable; the logical error
//! rate's 95% confidence interval is Wilson's score interval. The report goes to stdout, or
//! to stderr when the predictions do.
//!
//! `--backend gpu` decodes every shot on the GPU, through the appliance's own path: a
//! `gpu-persistent` mailbox backend serving the decoder (default [`GpuOptions`], one PCIe
//! read per request). The back-to-back pass keeps up to 32 requests in flight
//! (throughput); the timed pass sends one at a time and times each **round trip** (host
//! writes the request, the persistent kernel decodes it, the host sees the response), not
//! the decode alone: the text output says so and the JSON has `"timing": "round_trip"`.
//! Both passes must agree shot for shot. Offline decoding has no request budget: the
//! GPU's is turned off too.
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

mod io;
pub use io::{predict, PREDICT_BATCH};

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
--obs tests/fixtures/surface_d5_r5_z_p001.obs.01\n  \
qfwd decode --dem d3.dem --dets d3.b8 --obs d3.obs.01 --decoder lut --format json\n  \
qfwd decode --dem d5.dem --in d5.b8 --out predictions.01          (predict)\n  \
stim sample_dem --in d5.dem --shots 1000 --out_format b8 | qfwd decode --dem d5.dem --in - --in_format b8\n  \
qfwd decode --dem d5_r100.dem --dets d5_r100.b8 --obs d5_r100.obs.01 --decoder uf --window 15,5\n\n\
Make the files with Stim: circuit.detector_error_model(decompose_errors=True, flatten_loops=True),\n\
and sampler.sample_write(shots, filepath=\"F.b8\", format=\"b8\", obs_out_filepath=\"F.obs.01\", obs_out_format=\"01\").\n\
With observables (--obs, or --in-includes-appended-observables) mistakes are counted and reported;\n\
without, the predicted observable flips are written (to --out, default stdout).")]
pub struct DecodeArgs {
    /// Stim detector error model (exported with decompose_errors=True).
    #[arg(long, value_name = "FILE")]
    pub dem: PathBuf,
    /// Detection events, one shot per row; `-` reads stdin. Format: --dets-format, else the
    /// extension (b8 for .b8), else 01.
    #[arg(long, visible_alias = "in", value_name = "FILE|-")]
    pub dets: PathBuf,
    /// Observables that actually flipped, one shot per row (`-`: stdin; format:
    /// --obs-format, else the extension, else 01). Given, mistakes are counted.
    #[arg(
        long,
        visible_alias = "obs_in",
        alias = "obs-in",
        value_name = "FILE|-"
    )]
    pub obs: Option<PathBuf>,
    /// Each shot of --dets ends with the observables' flips (Stim's
    /// `append_observables=True`): mistakes are counted against them.
    #[arg(
        long = "in-includes-appended-observables",
        visible_alias = "in_includes_appended_observables"
    )]
    pub appended_observables: bool,
    /// Decoder: uf (union-find) or lut (at most 24 detectors).
    #[arg(long, value_parser = decoder_parser(), default_value = "uf")]
    pub decoder: DecoderKind,
    /// Where to decode.
    #[arg(long, value_enum, default_value_t = DecodeBackend::Cpu)]
    pub backend: DecodeBackend,
    /// The mistake report: text or one JSON object.
    #[arg(long, value_enum, default_value_t = OutputFormat::Text)]
    pub format: OutputFormat,
    /// Format of --dets (default: from the extension, b8 for .b8, else 01).
    #[arg(long, visible_alias = "in_format", alias = "in-format", value_parser = shot_format_parser(), value_name = "b8|01")]
    pub dets_format: Option<ShotFormat>,
    /// Format of --obs (default: from the extension, b8 for .b8, else 01).
    #[arg(long, visible_alias = "obs_in_format", alias = "obs-in-format", value_parser = shot_format_parser(), value_name = "b8|01")]
    pub obs_format: Option<ShotFormat>,
    /// Decode only the first N shots.
    #[arg(long, value_name = "N")]
    pub shots: Option<usize>,
    /// Write the predicted observable flips here (`-`: stdout). Without observables to
    /// count against, predictions are what `qfwd decode` does, to stdout by default.
    #[arg(long, visible_alias = "out", value_name = "FILE|-")]
    pub predictions: Option<PathBuf>,
    /// Format of the predictions (default: from the extension of --out, b8 for .b8, else 01).
    #[arg(long, visible_alias = "out_format", alias = "predictions-format", value_parser = shot_format_parser(), value_name = "b8|01")]
    pub out_format: Option<ShotFormat>,
    /// Predicting on the CPU: threads decoding each batch of shots.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=1024))]
    pub threads: u16,
    /// Decode each shot as a stream of rounds (docs/streaming.md): windows of W rounds,
    /// committing the first C of each, e.g. `--window 15,5`. Needs a memory experiment
    /// whose detectors have coordinates (x, y, t); uf on the CPU only, counting mistakes.
    /// The prediction is the XOR of a shot's commits.
    #[arg(long, value_name = "W,C", value_parser = parse_window)]
    pub window: Option<(u32, u32)>,
    /// With --window: the window decoder matches clusters of at most N defects exactly,
    /// larger ones greedily (0: greedily everywhere, for comparison; at most 16).
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

impl DecodeArgs {
    /// The arguments for `dem` and `dets` with every other one at its default (predict,
    /// uf, cpu, text).
    pub fn new(dem: impl Into<PathBuf>, dets: impl Into<PathBuf>) -> DecodeArgs {
        DecodeArgs {
            dem: dem.into(),
            dets: dets.into(),
            obs: None,
            appended_observables: false,
            decoder: DecoderKind::Uf,
            backend: DecodeBackend::Cpu,
            format: OutputFormat::Text,
            dets_format: None,
            obs_format: None,
            shots: None,
            predictions: None,
            out_format: None,
            threads: 1,
            window: None,
            match_defects: MatchLimits::DEFAULT.defects,
        }
    }

    /// Whether mistakes are counted (observables given), else predictions written.
    pub fn counts_mistakes(&self) -> bool {
        self.obs.is_some() || self.appended_observables
    }
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
        /// Writes the flips as the result row.
        dec: Arc<Decoder>,
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
        dem: Option<&Dem>,
        dets: &Shots,
    ) -> Result<ShotDecoder> {
        let (Some((w, c)), Some(dem)) = (window, dem) else {
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
        };
        let model = Arc::new(StreamModel::from_dem_with(dem, w, c, limits)?);
        let exp = model.experiment(dem)?;
        let split = (0..dets.len())
            .map(|i| exp.split(dets.row(i)).concat())
            .collect();
        Ok(ShotDecoder::Stream {
            dec: Arc::clone(dec),
            split,
            round_bytes: model.round_bytes(),
            stream: Box::new(StreamDecoder::new(&model)),
            commits: 0,
        })
    }

    /// Shot `i`'s observable flips, written to `out` (the decoder's result row).
    fn decode(&mut self, dets: &Shots, i: usize, out: &mut [u8]) {
        match self {
            ShotDecoder::Whole { dec, scratch } => dec.decode_to(scratch, dets.row(i), out),
            ShotDecoder::Stream {
                dec,
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
                flips ^= stream.finish(last).expect("a whole experiment").flips;
                // A stream model has at most 64 observables: its flips are one mask.
                dec.write_result(flips, out);
            }
        }
    }
}

/// What `--backend gpu` measured: predictions (result rows), one round trip per shot,
/// throughput.
struct GpuPasses {
    results: Vec<u8>,
    round_trip_ns: Vec<u64>,
    batch_ns_per_shot: f64,
}

/// Back-to-back passes over all shots on the CPU; `batch_ns_per_shot` is the fastest.
pub const CPU_BATCH_PASSES: u32 = 3;

/// Requests in flight in the back-to-back GPU pass.
const GPU_WINDOW: usize = 32;
/// Longest a GPU round trip may take before the pass gives up on the kernel.
const GPU_DEADLINE: Duration = Duration::from_secs(2);

/// A `gpu-persistent` backend serving one decoder, for offline decoding.
pub(crate) struct GpuDecoder {
    backend: crate::mailbox::MailboxBackend<gpu::PersistentKernel>,
    handler: Handler,
    dec: Arc<Decoder>,
}

fn gpu_failed(what: String) -> Error {
    Error::Decode {
        detail: format!("GPU decoder: {what}"),
    }
}

impl GpuDecoder {
    pub(crate) fn start(dec: &Arc<Decoder>) -> Result<GpuDecoder> {
        let backend =
            gpu::persistent_backend_with(&GpuOptions::default(), std::slice::from_ref(dec))?;
        Ok(GpuDecoder {
            backend,
            handler: Handler::Decoder(Arc::clone(dec)),
            dec: Arc::clone(dec),
        })
    }

    /// Decodes the shots of `dets` (rows of `detector_bytes`) with up to [`GPU_WINDOW`]
    /// in flight, into `out` (rows of `result_len`).
    pub(crate) fn decode_pipelined(&mut self, dets: &[u8], out: &mut [u8]) -> Result<()> {
        let (nb, rb) = (self.dec.detector_bytes(), self.dec.result_len());
        let shots = dets
            .len()
            .checked_div(nb)
            .unwrap_or_else(|| out.len() / rb.max(1));
        let payload = |i: usize| {
            self.dec
                .payload(dets.get(i * nb..(i + 1) * nb).unwrap_or(&[]))
        };
        let mut first: Result<()> = Ok(());
        let (mut next, mut done) = (0usize, 0usize);
        let mut last_progress = Instant::now();
        while done < shots {
            // A poller group that falls behind holds its slots, so the ring can refuse
            // (OVERLOAD) before GPU_WINDOW are in flight: then poll and submit again.
            while next < shots && self.backend.in_flight() < GPU_WINDOW {
                match self
                    .backend
                    .submit(next as u32, &self.handler, &payload(next))
                {
                    Ok(()) => next += 1,
                    Err(st) if st == status::OVERLOAD => break,
                    Err(st) => return Err(gpu_failed(format!("submit refused with status {st}"))),
                }
            }
            let got = self.backend.poll(|c| {
                if c.status != status::OK && first.is_ok() {
                    first = Err(gpu_failed(format!(
                        "shot {} answered status {} ({})",
                        c.token,
                        c.status,
                        status::name(c.status)
                    )));
                }
                let at = c.token as usize * rb;
                let n = c.result.len().min(rb);
                out[at..at + n].copy_from_slice(&c.result[..n]);
            });
            if got > 0 {
                done += got;
                last_progress = Instant::now();
            } else if last_progress.elapsed() > GPU_DEADLINE {
                return Err(gpu_failed(format!(
                    "no answer within {GPU_DEADLINE:?} ({done} of {shots} shots done)"
                )));
            }
        }
        first
    }

    /// Decodes one shot at a time, timing each round trip; returns the times.
    fn decode_timed(&mut self, dets: &Shots, out: &mut [u8]) -> Result<Vec<u64>> {
        let rb = self.dec.result_len();
        let mut round_trip_ns = Vec::with_capacity(dets.len());
        let mut first: Result<()> = Ok(());
        for i in 0..dets.len() {
            let payload = self.dec.payload(dets.row(i));
            let t = Instant::now();
            self.backend
                .submit(i as u32, &self.handler, &payload)
                .map_err(|st| gpu_failed(format!("submit refused with status {st}")))?;
            let mut spins = 0u32;
            while self.backend.poll(|c| {
                if c.status != status::OK && first.is_ok() {
                    first = Err(gpu_failed(format!("shot {i} answered status {}", c.status)));
                }
                let n = c.result.len().min(rb);
                out[i * rb..i * rb + n].copy_from_slice(&c.result[..n]);
            }) == 0
            {
                spins = spins.wrapping_add(1);
                if spins % 4096 == 0 && t.elapsed() > GPU_DEADLINE {
                    return Err(gpu_failed(format!(
                        "shot {i}: no answer within {GPU_DEADLINE:?}"
                    )));
                }
            }
            round_trip_ns.push(t.elapsed().as_nanos() as u64);
        }
        first.map(|()| round_trip_ns)
    }

    pub(crate) fn shutdown(mut self) -> Result<()> {
        self.backend.shutdown(Duration::from_secs(2)).map(drop)
    }
}

/// Decodes every shot through a `gpu-persistent` backend serving `dec`: pipelined, then one
/// at a time with each round trip timed; the two passes must agree.
fn gpu_passes(dec: &Arc<Decoder>, dets: &Shots) -> Result<GpuPasses> {
    let mut g = GpuDecoder::start(dec)?;
    let rb = dec.result_len();
    let mut results = vec![0u8; dets.len() * rb];
    let t = Instant::now();
    g.decode_pipelined(dets.as_b8(), &mut results)?;
    let batch_ns_per_shot = t.elapsed().as_nanos() as f64 / dets.len() as f64;
    let mut again = vec![0u8; results.len()];
    let round_trip_ns = g.decode_timed(dets, &mut again)?;
    g.shutdown()?;
    if let Some(i) =
        (0..dets.len()).find(|&i| results[i * rb..(i + 1) * rb] != again[i * rb..(i + 1) * rb])
    {
        return Err(gpu_failed(format!(
            "shot {i} decoded to {:?} and then to {:?}",
            &results[i * rb..(i + 1) * rb],
            &again[i * rb..(i + 1) * rb]
        )));
    }
    Ok(GpuPasses {
        results,
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

/// What the timed passes over every shot measured.
struct Timed {
    /// Every shot's result bytes, shot after shot.
    results: Vec<u8>,
    /// Per-shot times (ns).
    hist: Histogram<u64>,
    total_ns: u128,
    batch_ns_per_shot: f64,
    batch_passes: u32,
    windows_per_shot: f64,
}

/// Decodes every shot of `dets` (at least one) on `args.backend`: the back-to-back
/// passes, then the pass that times each shot.
fn time_shots(
    args: &DecodeArgs,
    dec: &Arc<Decoder>,
    dem: Option<&Dem>,
    dets: &Shots,
) -> Result<Timed> {
    let shots = dets.len();
    let rb = dec.result_len();
    let mut hist =
        Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 3).expect("valid histogram bounds");
    let mut total_ns: u128 = 0;
    let mut results = vec![0u8; shots * rb];
    let (batch_ns_per_shot, batch_passes);
    let mut windows_per_shot = 0.0;
    match args.backend {
        DecodeBackend::Cpu => {
            let mut shot_decoder =
                ShotDecoder::new(dec, args.window, args.match_defects, dem, dets)?;
            // Passes 1..=CPU_BATCH_PASSES: back to back, the fastest counts.
            let mut best = Duration::MAX;
            for _ in 0..CPU_BATCH_PASSES {
                let t = Instant::now();
                for (i, r) in results.chunks_exact_mut(rb.max(1)).enumerate().take(shots) {
                    shot_decoder.decode(dets, i, r);
                }
                best = best.min(t.elapsed());
            }
            batch_ns_per_shot = best.as_nanos() as f64 / shots as f64;
            batch_passes = CPU_BATCH_PASSES;
            if let ShotDecoder::Stream { commits, .. } = &shot_decoder {
                windows_per_shot = *commits as f64 / (CPU_BATCH_PASSES as usize * shots) as f64;
            }
            // Last pass: each shot timed.
            let mut again = vec![0u8; rb];
            for i in 0..shots {
                let t = Instant::now();
                shot_decoder.decode(dets, i, &mut again);
                let ns = t.elapsed().as_nanos();
                total_ns += ns;
                hist.saturating_record(ns.max(1) as u64);
                debug_assert_eq!(again, results[i * rb..(i + 1) * rb], "deterministic");
            }
        }
        DecodeBackend::Gpu => {
            let gpu = gpu_passes(dec, dets)?;
            batch_ns_per_shot = gpu.batch_ns_per_shot;
            batch_passes = 1;
            for &ns in &gpu.round_trip_ns {
                total_ns += u128::from(ns);
                hist.saturating_record(ns.max(1));
            }
            results = gpu.results;
        }
    }
    Ok(Timed {
        results,
        hist,
        total_ns,
        batch_ns_per_shot,
        batch_passes,
        windows_per_shot,
    })
}

/// Loads the model and shots, decodes every shot, and measures (counting mistakes: the
/// observables come from `--obs` or are appended to the detection events).
pub fn evaluate(args: &DecodeArgs) -> Result<DecodeReport> {
    if args.window.is_some() && args.backend == DecodeBackend::Gpu {
        return Err(Error::Decode {
            detail: "--window runs on the CPU (the GPU stream decoder has its own tests: \
                     docs/streaming.md); use --backend cpu"
                .into(),
        });
    }
    let t0 = Instant::now();
    let (dem, dec) = io::load_decoder(args)?;
    // Only the stream model needs the model itself (its detector coordinates).
    let dem = args.window.map(|_| dem);
    let setup_ms = t0.elapsed().as_secs_f64() * 1e3;
    let (mut dets, mut obs) = io::read_counting_inputs(args, &dec)?;
    if let Some(n) = args.shots {
        dets.truncate(n);
        obs.truncate(n);
    }
    let shots = dets.len();
    if shots == 0 {
        return Err(Error::Decode {
            detail: format!("{} holds no shots", io::shown(&args.dets)),
        });
    }
    let rb = dec.result_len();
    let Timed {
        results,
        hist,
        total_ns,
        batch_ns_per_shot,
        batch_passes,
        windows_per_shot,
    } = time_shots(args, &dec, dem.as_ref(), &dets)?;

    let mut predictions = Shots::new(dec.num_observables());
    let mut mistakes = 0u64;
    for i in 0..shots {
        let row = &results[i * rb..(i + 1) * rb];
        predictions.push_row(row);
        if predictions.row(i) != obs.row(i) {
            mistakes += 1;
        }
    }
    if let Some(path) = &args.predictions {
        io::write_predictions(path, args.out_format, &predictions)?;
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

/// `qfwd decode`: counts mistakes and prints the report (to stdout, or to stderr when the
/// predictions go to stdout), or predicts ([`predict`]).
pub fn run(args: &DecodeArgs) -> Result<()> {
    if !args.counts_mistakes() {
        if args.window.is_some() {
            return Err(Error::Decode {
                detail:
                    "--window counts mistakes: give --obs (or --in-includes-appended-observables)"
                        .into(),
            });
        }
        return predict(args).map(|_| ());
    }
    let report = evaluate(args)?;
    let text = match args.format {
        OutputFormat::Text => report.to_text(),
        OutputFormat::Json => format!("{}\n", report.to_json()),
    };
    if args.predictions.as_deref().is_some_and(io::is_stdio) {
        eprint!("{text}");
    } else {
        print!("{text}");
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
