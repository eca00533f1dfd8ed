//! `qfwd decode`: decodes Stim shot files or streams offline, in three forms.
//!
//! ```text
//! qfwd decode predict --dem F.dem [--in F.b8] [--out P.01] [--in_format b8] [--out_format 01]
//! qfwd decode count_mistakes --dem F.dem [--in F.01] --obs_in F.obs.01 [--out stats.txt]
//! qfwd decode --dem F.dem --dets F.b8 --obs F.obs.01 [--decoder NAME] [--backend cpu] [--format json]
//! ```
//!
//! `predict` and `count_mistakes` are PyMatching's command lines ([`pymatching`]): its
//! flags, its defaults (stdin and stdout where `--in` and `--out` are left out; `b8` in and
//! `01` out for `predict`, `01` for `count_mistakes`), its output byte for byte (`N / M`),
//! in any of Stim's six formats. The third form, with qfwd's flags, is the report: mistakes,
//! the logical error rate with its interval, and time per shot ([`report`]); without
//! observables it predicts.
//!
//! Shots stream in batches of at most [`PREDICT_BATCH`] shots and [`BATCH_BYTES`] of
//! detection events ([`batch_shots`]), so memory stays constant whatever the input's
//! length, and a model of 2^24 detectors takes a few shots a batch, not gigabytes. A
//! malformed input writes nothing: an output file is written beside its place and renamed
//! over it only once every shot is decoded; stdout waits until a shot file has been read
//! through once (only a pipeline into a pipeline streams as it goes) ([`io`]).
//!
//! The decoder is any [`DecoderKind`] by name (`--decoder`, default [`DEFAULT_DECODER`]);
//! `--backend gpu` decodes through the appliance's own path ([`gpu`]).
//!
//! **The report** reads every shot first. On the CPU, every shot is decoded back to back
//! [`CPU_BATCH_PASSES`] times over (the throughput figure, `batch_ns_per_shot`: the fastest
//! pass's wall time / shots, comparable to PyMatching's `decode_batch` wall time / shots,
//! which `scripts/bench-pymatching.py` also takes as the best of 3 calls over the same
//! shots), and then once more with a clock read around each decode (the per-shot
//! distribution: mean, p50, p99; it includes the ~20 ns the two clock reads cost). Mistakes
//! count the shots whose predicted observable flips differ from the recorded ones in any
//! observable; the 95% interval is Wilson's. The report goes to stdout, or to stderr when
//! the predictions do. On the GPU the timed pass times each round trip, not the decode
//! alone (`"timing": "round_trip"`), and both passes must agree shot for shot.
#![forbid(unsafe_code)]

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;

use clap::builder::{PossibleValuesParser, TypedValueParser};

use crate::decode::window::{MatchLimits, StreamDecoder, StreamModel};
use crate::decode::{self, Decoder, DecoderKind, Dem, ShotFormat, Shots};
use crate::{Error, Result};

mod gpu;
pub mod io;
mod output;
pub mod pymatching;
pub mod report;

use gpu::{gpu_passes, GpuDecoder};
pub use io::{batch_shots, predict, BATCH_BYTES, PREDICT_BATCH};
pub use pymatching::{CountMistakesArgs, PredictArgs};
pub use report::{wilson_interval, DecodeReport};

/// The decoder `qfwd decode` uses where `--decoder` is not given.
/// Exact minimum-weight matching, PyMatching's answers (CPU only: `--backend gpu` takes
/// `--decoder uf`).
pub const DEFAULT_DECODER: DecoderKind = DecoderKind::Matching;

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

/// How `qfwd decode` prints its report.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum OutputFormat {
    /// Lines for a person.
    Text,
    /// One JSON object.
    Json,
}

/// `--decoder`'s parser: any name the decoder crate knows ([`DecoderKind`]'s `FromStr`), so
/// a decoder added there is selectable here as it is; a wrong name gets the crate's list.
pub fn decoder_parser() -> impl TypedValueParser<Value = DecoderKind> {
    clap::builder::NonEmptyStringValueParser::new()
        .try_map(|name| name.parse::<DecoderKind>().map_err(|e| e.to_string()))
}

/// The shot formats' parser (Stim's names, each with its help).
pub fn shot_format_parser() -> impl TypedValueParser<Value = ShotFormat> {
    PossibleValuesParser::new(
        ShotFormat::ALL.map(|f| clap::builder::PossibleValue::new(f.name()).help(f.description())),
    )
    .map(|name| name.parse::<ShotFormat>().expect("a possible value"))
}

/// `--decoder`, `--backend` and `--threads`, as every form of `qfwd decode` takes them.
#[derive(clap::Args, Debug, Clone, PartialEq, Eq)]
pub struct DecoderChoice {
    /// Decoder, by name: matching (exact minimum-weight matching, CPU only), uf (union-find,
    /// CPU and GPU), lut (lookup table, at most 24 detectors), or any other the decoder
    /// crate offers (a wrong name lists them all).
    #[arg(long, value_name = "NAME", value_parser = decoder_parser(), default_value_t = DEFAULT_DECODER)]
    pub decoder: DecoderKind,
    /// Where to decode.
    #[arg(long, value_enum, default_value_t = DecodeBackend::Cpu)]
    pub backend: DecodeBackend,
    /// On the CPU: threads decoding each batch of shots.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=1024))]
    pub threads: u16,
}

impl Default for DecoderChoice {
    fn default() -> DecoderChoice {
        DecoderChoice {
            decoder: DEFAULT_DECODER,
            backend: DecodeBackend::Cpu,
            threads: 1,
        }
    }
}

/// `qfwd decode`: PyMatching's `predict` and `count_mistakes`, or qfwd's report (the flags
/// without a subcommand).
#[derive(clap::Args, Debug, Clone)]
#[command(
    args_conflicts_with_subcommands = true,
    arg_required_else_help = true,
    subcommand_negates_reqs = true,
    after_help = "Examples:\n  \
qfwd decode predict --dem d5.dem --in d5.b8 --out predictions.01\n  \
stim sample_dem --in d5.dem --shots 1000 --out_format b8 | qfwd decode predict --dem d5.dem > predictions.01\n  \
qfwd decode count_mistakes --dem d5.dem --in d5.b8 --in_format b8 --obs_in d5.obs.01      (prints N / M)\n  \
qfwd decode --dem tests/fixtures/surface_d5_r5_z_p001.dem --dets tests/fixtures/surface_d5_r5_z_p001.b8 \\\n    \
--obs tests/fixtures/surface_d5_r5_z_p001.obs.01                                 (the report)\n  \
qfwd decode --dem d3.dem --dets d3.b8 --obs d3.obs.01 --decoder lut --format json\n  \
qfwd decode --dem d5_r100.dem --dets d5_r100.b8 --obs d5_r100.obs.01 --decoder uf --window 15,5\n\n\
Make the files with Stim: circuit.detector_error_model(decompose_errors=True, flatten_loops=True),\n\
and sampler.sample_write(shots, filepath=\"F.b8\", format=\"b8\", obs_out_filepath=\"F.obs.01\", obs_out_format=\"01\").\n\
Shot formats (Stim's): 01, b8, r8, ptb64, hits, dets. A malformed input writes nothing.\n\
The report form: with observables (--obs, or --in-includes-appended-observables) mistakes are counted\n\
and reported; without, the predicted observable flips are written (to --out, default stdout)."
)]
pub struct DecodeCli {
    #[command(subcommand)]
    pub command: Option<DecodeCommand>,
    #[command(flatten, next_help_heading = "The report (no subcommand)")]
    pub report: Option<DecodeArgs>,
}

/// PyMatching's command lines.
#[derive(clap::Subcommand, Debug, Clone)]
pub enum DecodeCommand {
    /// Predict the observable flips of each shot, as `pymatching predict` does.
    Predict(PredictArgs),
    /// Count the shots whose prediction is wrong and print `N / M`, as `pymatching
    /// count_mistakes` does.
    #[command(name = "count_mistakes", alias = "count-mistakes")]
    CountMistakes(CountMistakesArgs),
}

/// `qfwd decode`'s report form: its arguments.
#[derive(clap::Args, Debug, Clone)]
pub struct DecodeArgs {
    /// Stim detector error model (exported with decompose_errors=True).
    #[arg(long, value_name = "FILE")]
    pub dem: PathBuf,
    /// Detection events, one shot per row; `-` reads stdin. Format: --dets-format, else the
    /// extension (.01, .b8, .r8, .ptb64, .hits, .dets), else 01.
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
    /// Decoder, by name: matching (exact minimum-weight matching, CPU only), uf (union-find,
    /// CPU and GPU), lut (lookup table, at most 24 detectors), or any other the decoder
    /// crate offers (a wrong name lists them all).
    #[arg(long, value_name = "NAME", value_parser = decoder_parser(), default_value_t = DEFAULT_DECODER)]
    pub decoder: DecoderKind,
    /// Where to decode.
    #[arg(long, value_enum, default_value_t = DecodeBackend::Cpu)]
    pub backend: DecodeBackend,
    /// The mistake report: text or one JSON object.
    #[arg(long, value_enum, default_value_t = OutputFormat::Text)]
    pub format: OutputFormat,
    /// Format of --dets (default: from the extension, else 01).
    #[arg(long, visible_alias = "in_format", alias = "in-format", value_parser = shot_format_parser(), value_name = "FORMAT")]
    pub dets_format: Option<ShotFormat>,
    /// Format of --obs (default: from the extension, else 01).
    #[arg(long, visible_alias = "obs_in_format", alias = "obs-in-format", value_parser = shot_format_parser(), value_name = "FORMAT")]
    pub obs_format: Option<ShotFormat>,
    /// Decode only the first N shots.
    #[arg(long, value_name = "N")]
    pub shots: Option<usize>,
    /// Write the predicted observable flips here (`-`: stdout). Without observables to
    /// count against, predictions are what `qfwd decode` does, to stdout by default.
    #[arg(long, visible_alias = "out", value_name = "FILE|-")]
    pub predictions: Option<PathBuf>,
    /// Format of the predictions (default: from the extension of --out, else 01).
    #[arg(long, visible_alias = "out_format", alias = "predictions-format", value_parser = shot_format_parser(), value_name = "FORMAT")]
    pub out_format: Option<ShotFormat>,
    /// On the CPU: threads decoding each batch of shots when predicting.
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
    /// the default decoder, cpu, text).
    pub fn new(dem: impl Into<PathBuf>, dets: impl Into<PathBuf>) -> DecodeArgs {
        DecodeArgs {
            dem: dem.into(),
            dets: dets.into(),
            obs: None,
            appended_observables: false,
            decoder: DEFAULT_DECODER,
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

    /// The decoder, backend and threads.
    pub fn choice(&self) -> DecoderChoice {
        DecoderChoice {
            decoder: self.decoder,
            backend: self.backend,
            threads: self.threads,
        }
    }
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
                    "--window decodes with uf only: add --decoder uf (the {} decoder has no \
                     stream form)",
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

/// Back-to-back passes over all shots on the CPU; `batch_ns_per_shot` is the fastest.
pub const CPU_BATCH_PASSES: u32 = 3;

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
    let (dem, dec) = io::load_model(&args.dem, &args.choice())?;
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

/// `qfwd decode`: the form its command line names.
pub fn run(cli: &DecodeCli) -> Result<()> {
    match (&cli.command, &cli.report) {
        (Some(DecodeCommand::Predict(a)), _) => pymatching::predict(a).map(drop),
        (Some(DecodeCommand::CountMistakes(a)), _) => pymatching::count_mistakes(a).map(drop),
        (None, Some(a)) => run_report(a),
        (None, None) => Err(Error::Decode {
            detail: "give a form: `qfwd decode predict ...`, `qfwd decode count_mistakes ...`,                      or the report's flags (`qfwd decode --dem F.dem --dets F.b8 --obs F.obs.01`);                      `qfwd decode --help` shows them"
                .into(),
        }),
    }
}

/// The report form: counts mistakes and prints the report (to stdout, or to stderr when
/// the predictions go to stdout), or, without observables, predicts ([`predict`]).
pub fn run_report(args: &DecodeArgs) -> Result<()> {
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
