//! `qfwd decode predict` and `qfwd decode count_mistakes`: PyMatching's command lines
//! (`pymatching predict`, `pymatching count_mistakes`, PyMatching 2.3's
//! `sparse_blossom/driver/namespaced_main.cc`), so a script swaps the program name and
//! nothing else.
//!
//! The same flags (`--dem`, `--in`, `--in_format`, `--in_includes_appended_observables`,
//! `--out`, `--out_format`, `--obs_in`, `--obs_in_format`, `--time`; each also with dashes),
//! the same defaults (`--in` and `--out` left out read stdin and write stdout; `predict`
//! reads `b8` and writes `01`, `count_mistakes` reads `01`), the same output byte for byte
//! (`count_mistakes` prints `N / M`). Where PyMatching does something else:
//!
//! - a format left out is the file's extension's where it names one (`.b8`, `.01`, ...),
//!   then PyMatching's default; `-` also names stdin and stdout;
//! - `count_mistakes` without `--obs_in` or `--in_includes_appended_observables` is
//!   refused (PyMatching means to refuse it, and instead compares every prediction with 0);
//!   an observables file with more or fewer shots than the events is refused; every
//!   observable is compared (PyMatching: the first 64), and `--out_format` is not taken
//!   (PyMatching lists it and ignores it);
//! - `--enable_correlations` is refused: qfwd has no correlated matching;
//! - `ptb64` predictions can be written (groups of 64 shots; PyMatching refuses the format);
//! - `--decoder`, `--backend` and `--threads` choose the decoder, as in every form.
#![forbid(unsafe_code)]

use std::path::{Path, PathBuf};
use std::time::Instant;

use super::io::{self, BatchDecoder, Format, Output, ShotFile, ShotSource};
use super::{shot_format_parser, DecoderChoice};
use crate::decode::shots::ShotLayout;
use crate::decode::ShotFormat;
use crate::{Error, Result};

/// `qfwd decode predict`.
#[derive(clap::Args, Debug, Clone, PartialEq, Eq)]
#[command(after_help = "Examples:\n  \
qfwd decode predict --dem d5.dem --in d5.b8 --out predictions.01\n  \
stim sample_dem --in d5.dem --shots 1000 --out_format b8 | qfwd decode predict --dem d5.dem > predictions.01\n  \
qfwd decode predict --dem d5.dem --in d5.dets --out predictions.hits --threads 2\n\n\
As `pymatching predict`: the same flags, defaults and output. Formats (Stim's): 01, b8, r8, ptb64, hits, dets.\n\
A malformed input writes nothing (a file output appears only when every shot is written).")]
pub struct PredictArgs {
    /// Stim detector error model (exported with decompose_errors=True).
    #[arg(long, value_name = "FILE")]
    pub dem: PathBuf,
    /// Detection events to decode, one shot each [default: stdin].
    #[arg(long = "in", value_name = "FILE|-")]
    pub input: Option<PathBuf>,
    /// Format of --in [default: the extension's (.01, .b8, ...), else b8].
    #[arg(long = "in_format", alias = "in-format", value_name = "FORMAT", value_parser = shot_format_parser())]
    pub in_format: Option<ShotFormat>,
    /// Each shot of --in ends with the observables' flips (Stim's append_observables):
    /// they are read and left out.
    #[arg(
        long = "in_includes_appended_observables",
        alias = "in-includes-appended-observables"
    )]
    pub appended_observables: bool,
    /// Where to write the predicted observable flips, one shot each [default: stdout].
    #[arg(long, value_name = "FILE|-")]
    pub out: Option<PathBuf>,
    /// Format of --out [default: the extension's, else 01].
    #[arg(long = "out_format", alias = "out-format", value_name = "FORMAT", value_parser = shot_format_parser())]
    pub out_format: Option<ShotFormat>,
    /// PyMatching's correlated matching: not offered (refused, never ignored).
    #[arg(long = "enable_correlations", alias = "enable-correlations")]
    pub enable_correlations: bool,
    #[command(flatten)]
    pub decoder: DecoderChoice,
}

/// `qfwd decode count_mistakes`.
#[derive(clap::Args, Debug, Clone, PartialEq, Eq)]
#[command(after_help = "Examples:\n  \
qfwd decode count_mistakes --dem d5.dem --in d5.01 --obs_in d5.obs.01\n  \
qfwd decode count_mistakes --dem d5.dem --in d5.b8 --in_format b8 --obs_in d5.obs.01 --time\n  \
stim sample_dem --in d5.dem --shots 1000 --out d5.b8 --out_format b8 --obs_out d5.obs.01 \\\n    \
&& qfwd decode count_mistakes --dem d5.dem --in d5.b8 --obs_in d5.obs.01\n\n\
As `pymatching count_mistakes`: prints `N / M` (wrong shots / shots). For the logical error rate with\n\
its interval and time per shot, use the report: qfwd decode --dem F.dem --dets F.b8 --obs F.obs.01.")]
pub struct CountMistakesArgs {
    /// Stim detector error model (exported with decompose_errors=True).
    #[arg(long, value_name = "FILE")]
    pub dem: PathBuf,
    /// Detection events to decode, one shot each [default: stdin].
    #[arg(long = "in", value_name = "FILE|-")]
    pub input: Option<PathBuf>,
    /// Format of --in [default: the extension's (.01, .b8, ...), else 01].
    #[arg(long = "in_format", alias = "in-format", value_name = "FORMAT", value_parser = shot_format_parser())]
    pub in_format: Option<ShotFormat>,
    /// Each shot of --in ends with the observables' flips (Stim's append_observables):
    /// mistakes are counted against them.
    #[arg(
        long = "in_includes_appended_observables",
        alias = "in-includes-appended-observables",
        conflicts_with = "obs_in"
    )]
    pub appended_observables: bool,
    /// The observables that flipped, one shot each (`-`: stdin).
    #[arg(long = "obs_in", alias = "obs-in", value_name = "FILE|-")]
    pub obs_in: Option<PathBuf>,
    /// Format of --obs_in [default: the extension's, else 01].
    #[arg(long = "obs_in_format", alias = "obs-in-format", value_name = "FORMAT", value_parser = shot_format_parser())]
    pub obs_in_format: Option<ShotFormat>,
    /// Where to write `N / M` [default: stdout].
    #[arg(long, value_name = "FILE|-")]
    pub out: Option<PathBuf>,
    /// Also print the decoding time, in total and per shot, to stderr.
    #[arg(long)]
    pub time: bool,
    /// PyMatching's correlated matching: not offered (refused, never ignored).
    #[arg(long = "enable_correlations", alias = "enable-correlations")]
    pub enable_correlations: bool,
    #[command(flatten)]
    pub decoder: DecoderChoice,
}

fn refuse_correlations(given: bool) -> Result<()> {
    if given {
        return Err(Error::Decode {
            detail: "--enable_correlations: qfwd has no correlated matching (PyMatching 2.3's); \
                     leave the flag out to decode without it"
                .into(),
        });
    }
    Ok(())
}

/// `-` where a path is left out: stdin or stdout.
fn or_stdio(path: &Option<PathBuf>) -> PathBuf {
    path.clone().unwrap_or_else(|| PathBuf::from("-"))
}

/// `qfwd decode predict`: writes each shot's predicted observable flips; returns the
/// shots decoded.
pub fn predict(args: &PredictArgs) -> Result<usize> {
    refuse_correlations(args.enable_correlations)?;
    let (input, out_path) = (or_stdio(&args.input), or_stdio(&args.out));
    io::check_distinct(&input, &out_path)?;
    let (_, dec) = io::load_model(&args.dem, &args.decoder)?;
    let (n, o) = (dec.num_detectors(), dec.num_observables());
    let model = io::model_hint(&args.dem, &dec, args.appended_observables);
    let in_format = Format::choose(
        &input,
        args.in_format,
        "--in_format",
        ShotFormat::B8,
        "PyMatching's default",
    );
    let layout = ShotLayout {
        detectors: n,
        observables: if args.appended_observables { o } else { 0 },
    };
    let mut src = ShotSource::new(ShotFile::open(&input, layout, &in_format, &model)?, n, None);
    let out_format = Format::choose(
        &out_path,
        args.out_format,
        "--out_format",
        ShotFormat::Zero1,
        "PyMatching's default",
    );
    let out = Output::create(&out_path, "predictions")?;
    let mut batch = BatchDecoder::start(&dec, &args.decoder)?;
    let done = io::predict_all(
        &mut src,
        &dec,
        &mut batch,
        out,
        out_format.format,
        usize::MAX,
    )?;
    batch.finish()?;
    Ok(done)
}

/// `qfwd decode count_mistakes`: prints `N / M`, the shots whose prediction differs from
/// the recorded observables and the shots decoded; returns them.
pub fn count_mistakes(args: &CountMistakesArgs) -> Result<(u64, u64)> {
    refuse_correlations(args.enable_correlations)?;
    let (input, out_path) = (or_stdio(&args.input), or_stdio(&args.out));
    io::check_distinct(&input, &out_path)?;
    if args.obs_in.is_none() && !args.appended_observables {
        return Err(Error::Decode {
            detail: "count_mistakes needs the observables that flipped: --obs_in FILE, or \
                     --in_includes_appended_observables when each shot of --in ends with them"
                .into(),
        });
    }
    if let Some(obs) = &args.obs_in {
        io::check_distinct(obs, &out_path)?;
        if io::is_stdio(obs) && io::is_stdio(&input) {
            return Err(Error::Decode {
                detail: "--in and --obs_in cannot both read stdin: give --in FILE (or --obs_in \
                         FILE)"
                    .into(),
            });
        }
    }
    let (_, dec) = io::load_model(&args.dem, &args.decoder)?;
    let (n, o) = (dec.num_detectors(), dec.num_observables());
    let model = io::model_hint(&args.dem, &dec, args.appended_observables);
    let in_format = Format::choose(
        &input,
        args.in_format,
        "--in_format",
        ShotFormat::Zero1,
        "PyMatching's default",
    );
    let layout = ShotLayout {
        detectors: n,
        observables: if args.appended_observables { o } else { 0 },
    };
    let dets = ShotFile::open(&input, layout, &in_format, &model)?;
    let obs = match &args.obs_in {
        Some(path) if !args.appended_observables => {
            let f = Format::choose(
                path,
                args.obs_in_format,
                "--obs_in_format",
                ShotFormat::Zero1,
                "PyMatching's default",
            );
            Some(ShotFile::open(
                path,
                ShotLayout::observables(o),
                &f,
                &model,
            )?)
        }
        _ => None,
    };
    let mut src = ShotSource::new(dets, n, obs);
    let mut batch = BatchDecoder::start(&dec, &args.decoder)?;
    let t = Instant::now();
    let (mistakes, shots) = io::count_all(&mut src, &dec, &mut batch)?;
    let elapsed = t.elapsed();
    batch.finish()?;
    write_count(&out_path, mistakes, shots)?;
    if args.time {
        let us = elapsed.as_secs_f64() * 1e6;
        eprintln!("Total decoding time: {}us", us as u64);
        eprintln!("Decoding time per shot: {:.4}us", us / shots.max(1) as f64);
    }
    Ok((mistakes, shots))
}

/// `N / M\n` to `path` (`-`: stdout), whole or not at all.
fn write_count(path: &Path, mistakes: u64, shots: u64) -> Result<()> {
    use std::io::Write;
    let mut out = Output::create(path, "the count")?;
    match writeln!(out, "{mistakes} / {shots}") {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(out.error(e)),
        _ => out.commit(),
    }
}
