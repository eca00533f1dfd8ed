//! `qfwd decode`'s inputs and outputs: files or stdin / stdout (`-`), Stim's six formats,
//! observables from their own file or appended to the detection events, shots decoded in
//! batches sized by bytes, and outputs that appear whole or not at all.
//!
//! **A malformed input writes nothing.** An output file ([`Output`]) is renamed into place
//! only when every shot is decoded and written: an error leaves the old file (or none) and
//! no partial one. stdout and devices cannot be taken back: there, a regular input file is
//! read through once first ([`ShotSource::validate`]), so a malformed one is refused
//! before the first prediction; only input from a pipe into stdout streams as it goes
//! (what a pipeline of PyMatching does too).
//!
//! **Memory.** A batch holds at most [`PREDICT_BATCH`] shots and [`BATCH_BYTES`] of
//! detection events ([`batch_shots`]): a model of 2^24 detectors (2 MiB a shot) decodes 8
//! shots a batch. The report form reads every shot first (its timed passes need them all).
#![forbid(unsafe_code)]

use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub use super::output::Output;
use super::{DecodeArgs, DecodeBackend, DecoderChoice, GpuDecoder};
use crate::decode::shots::ShotLayout;
use crate::decode::{self, Decoder, Dem, ShotFormat, ShotReader, ShotWriter, Shots};
use crate::gpu;
use crate::{Error, Result};

/// Most shots decoded per batch.
pub const PREDICT_BATCH: usize = 4096;
/// Most bytes of detection events per batch (a shot more when one shot is larger).
pub const BATCH_BYTES: usize = 8 << 20;

/// Shots per batch for shots of `row_bytes` bytes: at most [`PREDICT_BATCH`], at most
/// [`BATCH_BYTES`] of them, and at least one.
pub fn batch_shots(row_bytes: usize) -> usize {
    (BATCH_BYTES / row_bytes.max(1)).clamp(1, PREDICT_BATCH)
}

/// Whether `path` names stdin or stdout (`-`).
pub(super) fn is_stdio(path: &Path) -> bool {
    path.as_os_str() == "-"
}

/// `path` as messages show it (`stdin` for `-`).
pub(super) fn shown(path: &Path) -> String {
    if is_stdio(path) {
        "stdin".to_string()
    } else {
        path.display().to_string()
    }
}

/// A shot file's format and how it was chosen (for the hints of its errors).
#[derive(Debug, Clone)]
pub(super) struct Format {
    pub format: ShotFormat,
    /// `--in_format`, `the extension`, or the default's reason.
    pub chosen_by: String,
}

impl Format {
    /// `given` (by `flag`), else the extension's, else `default` (`why` says whose).
    pub fn choose(
        path: &Path,
        given: Option<ShotFormat>,
        flag: &str,
        default: ShotFormat,
        why: &str,
    ) -> Format {
        let (format, chosen_by) = match (given, ShotFormat::from_extension(path)) {
            (Some(f), _) => (f, flag.to_string()),
            (None, Some(f)) => (f, "from the file's extension".to_string()),
            (None, None) => (default, format!("{why}; {flag} names another")),
        };
        Format { format, chosen_by }
    }
}

fn open_input(path: &Path) -> Result<Box<dyn BufRead>> {
    if is_stdio(path) {
        return Ok(Box::new(BufReader::with_capacity(
            1 << 16,
            std::io::stdin(),
        )));
    }
    let cannot = |e| decode::Error::Io {
        what: format!("cannot read shots {}", path.display()),
        source: e,
    };
    if path.is_dir() {
        return Err(cannot(std::io::Error::other("it is a directory")).into());
    }
    let f = File::open(path).map_err(cannot)?;
    Ok(Box::new(BufReader::with_capacity(1 << 16, f)))
}

/// Whether `path` is a regular file (it can be read through twice; a pipe cannot).
fn rereadable(path: &Path) -> bool {
    !is_stdio(path) && std::fs::metadata(path).is_ok_and(|m| m.is_file())
}

/// Whether `a` and `b` name the same existing file.
fn same_file(a: &Path, b: &Path) -> bool {
    match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

/// A shot file that does not fit its format or the model: the file, the reader's detail
/// (line or shot), and `hint` (the format and the model).
fn shots_error(path: &Path, detail: String, hint: &str) -> Error {
    decode::Error::Shots {
        path: PathBuf::from(shown(path)),
        detail: format!("{detail} ({hint})"),
    }
    .into()
}

/// One shot file being read: its reader, and what its errors say.
pub(super) struct ShotFile {
    reader: ShotReader<Box<dyn BufRead>>,
    path: PathBuf,
    layout: ShotLayout,
    format: ShotFormat,
    hint: String,
}

impl ShotFile {
    /// Opens `path` (`-`: stdin) for shots of `layout` in `format`; `model` says what the
    /// model has, for the hints.
    pub fn open(path: &Path, layout: ShotLayout, format: &Format, model: &str) -> Result<ShotFile> {
        Ok(ShotFile {
            reader: ShotReader::with_layout(open_input(path)?, layout, format.format),
            path: path.to_path_buf(),
            layout,
            format: format.format,
            hint: format!(
                "read as {} ({}), {}; {model}",
                format.format,
                format.chosen_by,
                describe(layout)
            ),
        })
    }

    /// The next shot into `row`: `Ok(false)` at the end.
    pub fn next_into(&mut self, row: &mut [u8]) -> Result<bool> {
        self.reader
            .next_into(row)
            .map_err(|d| shots_error(&self.path, d, &self.hint))
    }

    /// Shots read so far.
    pub fn shots(&self) -> usize {
        self.reader.shots()
    }

    /// Reads the file's first `limit` shots once, to refuse a malformed one before any
    /// output.
    pub fn validate(&self, limit: usize) -> Result<()> {
        let mut again = ShotFile {
            reader: ShotReader::with_layout(open_input(&self.path)?, self.layout, self.format),
            path: self.path.clone(),
            layout: self.layout,
            format: self.format,
            hint: self.hint.clone(),
        };
        let mut row = vec![0u8; self.layout.bits().div_ceil(8)];
        while again.shots() < limit && again.next_into(&mut row)? {}
        Ok(())
    }
}

/// `24 detectors and 1 observable a shot`, as hints say it.
fn describe(layout: ShotLayout) -> String {
    let s = |n: usize| if n == 1 { "" } else { "s" };
    match (layout.detectors, layout.observables) {
        (0, o) => format!("{o} observable{} a shot", s(o)),
        (d, 0) => format!("{d} detector{} a shot", s(d)),
        (d, o) => format!(
            "{d} detector{} then {o} appended observable{} a shot",
            s(d),
            s(o)
        ),
    }
}

/// Where shots come from: detection events, and the observables each shot flipped (from
/// their own file, appended to the events, or none).
pub(super) struct ShotSource {
    dets: ShotFile,
    /// Detectors of a shot, and the observables that follow them in `dets`.
    detectors: usize,
    appended: usize,
    obs: Option<ShotFile>,
    /// Bytes of a shot's observables, as [`ShotSource::next_batch`] gives them.
    obs_bytes: usize,
    /// With observables appended: the whole row read.
    row: Vec<u8>,
}

impl ShotSource {
    /// Shots of `detectors` detection events from `dets` (the observables its layout
    /// appends to each are the shot's), or with their observables in `obs`.
    pub fn new(dets: ShotFile, detectors: usize, obs: Option<ShotFile>) -> ShotSource {
        let appended = dets.layout.observables;
        let obs_bytes = match &obs {
            Some(f) => f.layout.bits().div_ceil(8),
            None => appended.div_ceil(8),
        };
        ShotSource {
            row: vec![0u8; dets.layout.bits().div_ceil(8)],
            dets,
            detectors,
            appended,
            obs,
            obs_bytes,
        }
    }

    /// Reads the first `limit` shots of every regular input file once (see the module
    /// docs).
    pub fn validate(&self, limit: usize) -> Result<()> {
        for f in std::iter::once(&self.dets).chain(&self.obs) {
            if rereadable(&f.path) {
                f.validate(limit)?;
            }
        }
        Ok(())
    }

    /// Reads up to `max` shots: their detection events into `dets` (rows of `ceil(n / 8)`
    /// bytes) and, where `obs` is given, the observables they flipped (rows of `ceil(o /
    /// 8)`); returns the shots read. The observables' file must end with the events'.
    pub fn next_batch(
        &mut self,
        max: usize,
        dets: &mut [u8],
        mut obs: Option<&mut [u8]>,
    ) -> Result<usize> {
        let (nb, ob) = (self.detectors.div_ceil(8), self.obs_bytes);
        for i in 0..max {
            let d = &mut dets[i * nb..(i + 1) * nb];
            let more = if self.appended > 0 {
                let more = self.dets.next_into(&mut self.row)?;
                if more {
                    copy_bits(&self.row, 0, self.detectors, d);
                    if let Some(o) = obs.as_deref_mut() {
                        copy_bits(
                            &self.row,
                            self.detectors,
                            self.appended,
                            &mut o[i * ob..(i + 1) * ob],
                        );
                    }
                }
                more
            } else {
                self.dets.next_into(d)?
            };
            if !more {
                self.end_of_events()?;
                return Ok(i);
            }
            if let (Some(f), Some(o)) = (self.obs.as_mut(), obs.as_deref_mut()) {
                if !f.next_into(&mut o[i * ob..(i + 1) * ob])? {
                    return Err(self.mismatch("fewer"));
                }
            }
        }
        Ok(max)
    }

    /// The events ended: so must the observables.
    fn end_of_events(&mut self) -> Result<()> {
        let Some(f) = self.obs.as_mut() else {
            return Ok(());
        };
        let mut row = vec![0u8; f.layout.bits().div_ceil(8)];
        if f.next_into(&mut row)? {
            return Err(self.mismatch("more"));
        }
        Ok(())
    }

    /// The observables' file ends before the events (`fewer`) or goes on after them.
    fn mismatch(&self, fewer_or_more: &str) -> Error {
        let obs = self.obs.as_ref().expect("an observables file");
        let (o, d) = (shown(&obs.path), shown(&self.dets.path));
        let what = if fewer_or_more == "fewer" {
            format!("{o} ends after {} shots while {d} goes on", obs.shots())
        } else {
            format!("{o} holds more shots than the {} of {d}", self.dets.shots())
        };
        Error::Decode {
            detail: format!("{what}: they must come from the same sampling run"),
        }
    }
}

/// Copies bits `from .. from + len` of `row` into `out` (bit 0 onwards; `out` cleared).
fn copy_bits(row: &[u8], from: usize, len: usize, out: &mut [u8]) {
    out.fill(0);
    if from % 8 == 0 {
        let bytes = len.div_ceil(8);
        out.copy_from_slice(&row[from / 8..from / 8 + bytes]);
        if len % 8 != 0 {
            out[bytes - 1] &= (1u8 << (len % 8)) - 1;
        }
        return;
    }
    for k in 0..len {
        let b = from + k;
        out[k / 8] |= (row[b / 8] >> (b % 8) & 1) << (k % 8);
    }
}

/// Decodes batches of shots: on the CPU (`threads` workers a batch) or the GPU.
pub(super) enum BatchDecoder {
    Cpu { dec: Arc<Decoder>, threads: usize },
    Gpu(Box<GpuDecoder>),
}

impl BatchDecoder {
    pub fn start(dec: &Arc<Decoder>, choice: &DecoderChoice) -> Result<BatchDecoder> {
        Ok(match choice.backend {
            DecodeBackend::Cpu => BatchDecoder::Cpu {
                dec: Arc::clone(dec),
                threads: usize::from(choice.threads),
            },
            DecodeBackend::Gpu => BatchDecoder::Gpu(Box::new(GpuDecoder::start(dec)?)),
        })
    }

    /// Decodes the shots of `dets` (rows of `detector_bytes`) into `out` (rows of
    /// `result_len`).
    pub fn decode(&mut self, dets: &[u8], out: &mut [u8]) -> Result<()> {
        match self {
            BatchDecoder::Cpu { dec, threads } => Ok(dec.decode_batch(dets, out, *threads)?),
            BatchDecoder::Gpu(g) => g.decode_pipelined(dets, out),
        }
    }

    pub fn finish(self) -> Result<()> {
        match self {
            BatchDecoder::Cpu { .. } => Ok(()),
            BatchDecoder::Gpu(g) => g.shutdown(),
        }
    }
}

/// Parses the model at `dem` and builds its decoder (no request budget: offline decoding
/// answers every shot).
pub(super) fn load_model(dem: &Path, choice: &DecoderChoice) -> Result<(Dem, Arc<Decoder>)> {
    if choice.backend == DecodeBackend::Gpu {
        if choice.decoder == super::DEFAULT_DECODER && !choice.decoder.runs_on_gpu() {
            // The decoder may not have been named: say which it is and what to add.
            return Err(Error::Decode {
                detail: format!(
                    "--backend gpu cannot run the {} decoder, qfwd decode's default: exact \
                     matching runs on the CPU only. Add --decoder uf to decode on the GPU \
                     (union-find: the same answers on CPU and GPU, 5-20 % more logical \
                     errors near threshold, docs/decoders.md), or leave out --backend gpu",
                    choice.decoder
                ),
            });
        }
        if !choice.decoder.runs_on_gpu() {
            return Err(choice.decoder.gpu_refusal("--backend gpu").into());
        }
        if let Some(why) = gpu::unavailable_reason() {
            return Err(Error::Decode {
                detail: format!("--backend gpu needs an NVIDIA GPU: {why}; use --backend cpu"),
            });
        }
    }
    let model = Dem::from_path(dem)?;
    let mut dec = Decoder::from_graph(decode::MatchingGraph::from_dem(&model)?, choice.decoder)?;
    dec.set_max_defects(Some(0))?;
    Ok((model, Arc::new(dec)))
}

/// `the model F has N detectors and O observables`, for hints; and, where the shots may
/// hold observables the command line does not expect, the flag that says so.
pub(super) fn model_hint(dem: &Path, dec: &Decoder, appended: bool) -> String {
    let (n, o) = (dec.num_detectors(), dec.num_observables());
    let flag = if appended || o == 0 {
        ""
    } else {
        "; shots that end with their observables need --in_includes_appended_observables"
    };
    format!(
        "the model {} has {}{flag}",
        dem.display(),
        counted(n, "detector", o, "observable")
    )
}

/// `24 detectors and 1 observable`.
fn counted(a: usize, a_name: &str, b: usize, b_name: &str) -> String {
    let s = |n: usize| if n == 1 { "" } else { "s" };
    format!("{a} {a_name}{} and {b} {b_name}{}", s(a), s(b))
}

/// Decodes every shot of `src` (at most `limit`) and writes each prediction to `out`;
/// returns the shots decoded. Checks the inputs first where `out` cannot be taken back.
/// A reader of stdout that goes away ends it quietly.
pub(super) fn predict_all(
    src: &mut ShotSource,
    dec: &Arc<Decoder>,
    batch: &mut BatchDecoder,
    out: Output,
    out_format: ShotFormat,
    limit: usize,
) -> Result<usize> {
    if !out.is_atomic() {
        src.validate(limit)?;
    }
    let (nb, rb) = (dec.detector_bytes(), dec.result_len());
    let per = batch_shots(nb);
    let (mut dets, mut results) = (vec![0u8; per * nb], vec![0u8; per * rb]);
    let layout = ShotLayout::observables(dec.num_observables());
    let mut w = ShotWriter::with_layout(out, layout, out_format);
    let mut done = 0usize;
    while done < limit {
        let count = src.next_batch(per.min(limit - done), &mut dets, None)?;
        if count == 0 {
            break;
        }
        let r = &mut results[..count * rb];
        batch.decode(&dets[..count * nb], r)?;
        for i in 0..count {
            match w.write(&r[i * rb..(i + 1) * rb]) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => return Ok(done + i),
                Err(e) => return Err(w_error(&w, e)),
            }
        }
        done += count;
    }
    let out = match w.finish() {
        Ok(out) => out,
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => return Ok(done),
        Err(e) => {
            return Err(Error::Decode {
                detail: format!("predictions: {e}"),
            })
        }
    };
    out.commit()?;
    Ok(done)
}

fn w_error(w: &ShotWriter<Output>, e: std::io::Error) -> Error {
    w.get_ref().error(e)
}

/// Decodes every shot of `src` and counts those whose predicted observable flips differ
/// from the recorded ones (in any observable); returns (mistakes, shots).
pub(super) fn count_all(
    src: &mut ShotSource,
    dec: &Arc<Decoder>,
    batch: &mut BatchDecoder,
) -> Result<(u64, u64)> {
    let (nb, rb) = (dec.detector_bytes(), dec.result_len());
    let per = batch_shots(nb);
    let (mut dets, mut results) = (vec![0u8; per * nb], vec![0u8; per * rb]);
    let mut obs = vec![0u8; per * rb];
    let (mut mistakes, mut shots) = (0u64, 0u64);
    loop {
        let count = src.next_batch(per, &mut dets, Some(&mut obs))?;
        if count == 0 {
            return Ok((mistakes, shots));
        }
        let r = &mut results[..count * rb];
        batch.decode(&dets[..count * nb], r)?;
        if rb > 0 {
            let wrong = r
                .chunks_exact(rb)
                .zip(obs.chunks_exact(rb))
                .filter(|(p, o)| p != o)
                .count();
            mistakes += wrong as u64;
        }
        shots += count as u64;
    }
}

/// The detection events and the observables to count mistakes against (`--obs`, or
/// appended to each shot of `--dets`), as many shots each: the report form reads them all.
pub(super) fn read_counting_inputs(args: &DecodeArgs, dec: &Decoder) -> Result<(Shots, Shots)> {
    let (n, o) = (dec.num_detectors(), dec.num_observables());
    let limit = args.shots.unwrap_or(usize::MAX);
    let model = model_hint(&args.dem, dec, args.appended_observables);
    let dets_format = Format::choose(
        &args.dets,
        args.dets_format,
        "--dets-format",
        ShotFormat::Zero1,
        "the default",
    );
    let appended = if args.appended_observables { o } else { 0 };
    let layout = ShotLayout {
        detectors: n,
        observables: appended,
    };
    let obs_file = match (&args.obs, args.appended_observables) {
        (_, true) => None,
        (Some(path), false) => {
            if is_stdio(&args.dets) && is_stdio(path) {
                return Err(Error::Decode {
                    detail: "--dets and --obs cannot both read stdin".into(),
                });
            }
            let f = Format::choose(
                path,
                args.obs_format,
                "--obs-format",
                ShotFormat::Zero1,
                "the default",
            );
            Some(ShotFile::open(
                path,
                ShotLayout::observables(o),
                &f,
                &model,
            )?)
        }
        (None, false) => {
            return Err(Error::Decode {
                detail: "counting mistakes needs --obs FILE or --in-includes-appended-observables"
                    .into(),
            })
        }
    };
    let dets_file = ShotFile::open(&args.dets, layout, &dets_format, &model)?;
    let mut src = ShotSource::new(dets_file, n, obs_file);
    let (mut dets, mut obs) = (Shots::new(n), Shots::new(o));
    let (mut d, mut b) = (vec![0u8; n.div_ceil(8)], vec![0u8; o.div_ceil(8)]);
    while dets.len() < limit && src.next_batch(1, &mut d, Some(&mut b))? == 1 {
        dets.push_row(&d);
        obs.push_row(&b);
    }
    Ok((dets, obs))
}

/// Writes `predictions` to `path` (`-`: stdout) in `format` (default: the extension's, else
/// `01`), whole or not at all.
pub(super) fn write_predictions(
    path: &Path,
    format: Option<ShotFormat>,
    predictions: &Shots,
) -> Result<()> {
    let format = Format::choose(
        path,
        format,
        "--out-format",
        ShotFormat::Zero1,
        "the default",
    );
    let out = Output::create(path, "predictions")?;
    let layout = ShotLayout::observables(predictions.bits());
    let mut w = ShotWriter::with_layout(out, layout, format.format);
    for i in 0..predictions.len() {
        match w.write(predictions.row(i)) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => return Ok(()),
            Err(e) => return Err(w_error(&w, e)),
        }
    }
    match w.finish() {
        Ok(out) => out.commit(),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        Err(e) => Err(Error::Decode {
            detail: format!("predictions: {e}"),
        }),
    }
}

/// The report form without observables: predicts (see [`predict_all`]); returns the shots
/// decoded.
pub fn predict(args: &DecodeArgs) -> Result<usize> {
    let choice = args.choice();
    let (_, dec) = load_model(&args.dem, &choice)?;
    let model = model_hint(&args.dem, &dec, false);
    let out_path = args
        .predictions
        .clone()
        .unwrap_or_else(|| PathBuf::from("-"));
    check_distinct(&args.dets, &out_path)?;
    let dets_format = Format::choose(
        &args.dets,
        args.dets_format,
        "--dets-format",
        ShotFormat::Zero1,
        "the default",
    );
    let dets = ShotFile::open(
        &args.dets,
        ShotLayout::detectors(dec.num_detectors()),
        &dets_format,
        &model,
    )?;
    let mut src = ShotSource::new(dets, dec.num_detectors(), None);
    let out_format = Format::choose(
        &out_path,
        args.out_format,
        "--out-format",
        ShotFormat::Zero1,
        "the default",
    );
    let out = Output::create(&out_path, "predictions")?;
    let mut batch = BatchDecoder::start(&dec, &choice)?;
    let done = predict_all(
        &mut src,
        &dec,
        &mut batch,
        out,
        out_format.format,
        args.shots.unwrap_or(usize::MAX),
    )?;
    batch.finish()?;
    Ok(done)
}

/// Refuses `--in` and `--out` naming one file (the output would replace its own input).
pub(super) fn check_distinct(input: &Path, output: &Path) -> Result<()> {
    if same_file(input, output) {
        return Err(Error::Decode {
            detail: format!(
                "--in and --out both name {}: write the output elsewhere",
                input.display()
            ),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batches_are_sized_by_bytes() {
        assert_eq!(batch_shots(0), PREDICT_BATCH);
        assert_eq!(batch_shots(3), PREDICT_BATCH);
        assert_eq!(batch_shots(BATCH_BYTES / PREDICT_BATCH), PREDICT_BATCH);
        // 2^24 detectors: 2 MiB a shot, 4 a batch, not 4096 (8 GiB).
        assert_eq!(batch_shots(1 << 21), 4);
        assert_eq!(batch_shots(BATCH_BYTES + 1), 1);
        assert_eq!(batch_shots(usize::MAX), 1);
    }

    #[test]
    fn bits_are_copied_from_any_offset() {
        let row = [0b1011_0110u8, 0b0000_0001, 0xff];
        let mut out = [0xffu8; 2];
        copy_bits(&row, 0, 9, &mut out);
        assert_eq!(out, [0b1011_0110, 0b1]);
        copy_bits(&row, 8, 3, &mut out[..1]);
        assert_eq!(out[0], 0b001);
        copy_bits(&row, 1, 8, &mut out[..1]);
        assert_eq!(out[0], 0b1101_1011);
        copy_bits(&row, 7, 0, &mut out[..0]);
    }

    #[test]
    fn a_format_is_the_flag_s_then_the_extension_s_then_the_default() {
        let f = Format::choose(
            Path::new("a.r8"),
            Some(ShotFormat::Hits),
            "--in_format",
            ShotFormat::B8,
            "PyMatching's default",
        );
        assert_eq!(
            (f.format, f.chosen_by.as_str()),
            (ShotFormat::Hits, "--in_format")
        );
        let f = Format::choose(
            Path::new("a.r8"),
            None,
            "--in_format",
            ShotFormat::B8,
            "PyMatching's default",
        );
        assert_eq!(f.format, ShotFormat::R8);
        assert!(f.chosen_by.contains("extension"));
        for path in ["-", "a.dat", "noext"] {
            let f = Format::choose(
                Path::new(path),
                None,
                "--in_format",
                ShotFormat::B8,
                "PyMatching's default",
            );
            assert_eq!(f.format, ShotFormat::B8);
            assert_eq!(
                f.chosen_by,
                "PyMatching's default; --in_format names another"
            );
        }
    }
}
