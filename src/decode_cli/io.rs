//! `qfwd decode`'s inputs and outputs: files or stdin / stdout (`-`), Stim's `b8` and `01`,
//! observables from their own file or appended to the detection events; and the streaming
//! predict mode.
#![forbid(unsafe_code)]

use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::{DecodeArgs, DecodeBackend, GpuDecoder};
use crate::decode::{self, Decoder, Dem, ShotFormat, ShotReader, ShotWriter, Shots};
use crate::gpu;
use crate::{Error, Result};

/// Shots read, decoded and written at a time when predicting.
pub const PREDICT_BATCH: usize = 4096;

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

fn format_of(path: &Path, given: Option<ShotFormat>) -> ShotFormat {
    given
        .or_else(|| ShotFormat::from_extension(path))
        .unwrap_or(ShotFormat::Zero1)
}

fn open_input(path: &Path) -> Result<Box<dyn BufRead>> {
    if is_stdio(path) {
        return Ok(Box::new(std::io::stdin().lock()));
    }
    let f = File::open(path).map_err(|e| decode::Error::Io {
        what: format!("cannot read shots {}", path.display()),
        source: e,
    })?;
    Ok(Box::new(BufReader::with_capacity(1 << 16, f)))
}

fn open_output(path: &Path) -> Result<Box<dyn Write>> {
    if is_stdio(path) {
        return Ok(Box::new(BufWriter::with_capacity(
            1 << 16,
            std::io::stdout().lock(),
        )));
    }
    let f = File::create(path).map_err(|e| decode::Error::Io {
        what: format!("cannot write predictions {}", path.display()),
        source: e,
    })?;
    Ok(Box::new(BufWriter::with_capacity(1 << 16, f)))
}

fn shots_error(path: &Path, detail: String) -> Error {
    decode::Error::Shots {
        path: PathBuf::from(shown(path)),
        detail,
    }
    .into()
}

fn write_error(path: &Path, e: std::io::Error) -> Error {
    decode::Error::Io {
        what: format!("cannot write predictions {}", shown(path)),
        source: e,
    }
    .into()
}

/// The model of `args` and its decoder (no request budget: offline decoding answers every
/// shot). The model is parsed once; `--window` builds its stream model from it too.
pub(super) fn load_decoder(args: &DecodeArgs) -> Result<(Dem, Arc<Decoder>)> {
    if args.backend == DecodeBackend::Gpu {
        if !args.decoder.runs_on_gpu() {
            return Err(args.decoder.gpu_refusal("--backend gpu").into());
        }
        if let Some(why) = gpu::unavailable_reason() {
            return Err(Error::Decode {
                detail: format!("--backend gpu needs an NVIDIA GPU: {why}; use --backend cpu"),
            });
        }
    }
    let dem = Dem::from_path(&args.dem)?;
    let mut dec = Decoder::from_graph(decode::MatchingGraph::from_dem(&dem)?, args.decoder)?;
    dec.set_max_defects(Some(0))?;
    Ok((dem, Arc::new(dec)))
}

/// Every shot of `path` (`bits` each), at most `limit`.
fn read_all(path: &Path, bits: usize, format: ShotFormat, limit: usize) -> Result<Shots> {
    let mut r = ShotReader::new(open_input(path)?, bits, format);
    let mut shots = Shots::new(bits);
    let mut row = vec![0u8; bits.div_ceil(8)];
    while shots.len() < limit && r.next_into(&mut row).map_err(|d| shots_error(path, d))? {
        shots.push_row(&row);
    }
    Ok(shots)
}

/// Copies bits `from .. from + len` of `row` into `out` (bit 0 onwards; `out` cleared).
fn copy_bits(row: &[u8], from: usize, len: usize, out: &mut [u8]) {
    out.fill(0);
    for k in 0..len {
        let b = from + k;
        out[k / 8] |= (row[b / 8] >> (b % 8) & 1) << (k % 8);
    }
}

/// The detection events and the observables to count mistakes against (`--obs`, or
/// appended to each shot of `--dets`), as many shots each.
pub(super) fn read_counting_inputs(args: &DecodeArgs, dec: &Decoder) -> Result<(Shots, Shots)> {
    let (n, o) = (dec.num_detectors(), dec.num_observables());
    let limit = args.shots.unwrap_or(usize::MAX);
    let dets_format = format_of(&args.dets, args.dets_format);
    let model_hint = |e: Error| match e {
        Error::Decoder(decode::Error::Shots { path, detail }) => decode::Error::Shots {
            path,
            detail: format!(
                "{detail} (the model {} has {n} detectors{})",
                args.dem.display(),
                if args.appended_observables {
                    format!(" and {o} observables appended")
                } else {
                    String::new()
                }
            ),
        }
        .into(),
        other => other,
    };
    if args.appended_observables {
        let both = read_all(&args.dets, n + o, dets_format, limit).map_err(model_hint)?;
        let (mut dets, mut obs) = (Shots::new(n), Shots::new(o));
        let (mut d, mut b) = (vec![0u8; n.div_ceil(8)], vec![0u8; o.div_ceil(8)]);
        for i in 0..both.len() {
            copy_bits(both.row(i), 0, n, &mut d);
            copy_bits(both.row(i), n, o, &mut b);
            dets.push_row(&d);
            obs.push_row(&b);
        }
        return Ok((dets, obs));
    }
    let obs_path = args.obs.as_deref().ok_or_else(|| Error::Decode {
        detail: "counting mistakes needs --obs FILE or --in-includes-appended-observables".into(),
    })?;
    if is_stdio(&args.dets) && is_stdio(obs_path) {
        return Err(Error::Decode {
            detail: "--dets and --obs cannot both read stdin".into(),
        });
    }
    let dets = read_all(&args.dets, n, dets_format, limit).map_err(model_hint)?;
    let obs = read_all(obs_path, o, format_of(obs_path, args.obs_format), limit)?;
    if dets.len() != obs.len() {
        return Err(Error::Decode {
            detail: format!(
                "{} holds {} shots but {} holds {}: they must come from the same sampling run",
                shown(&args.dets),
                dets.len(),
                shown(obs_path),
                obs.len()
            ),
        });
    }
    Ok((dets, obs))
}

/// Writes `predictions` to `path` (`-`: stdout) in `format` (default: the extension's, else
/// `01`).
pub(super) fn write_predictions(
    path: &Path,
    format: Option<ShotFormat>,
    predictions: &Shots,
) -> Result<()> {
    let mut w = ShotWriter::new(
        open_output(path)?,
        predictions.bits(),
        format_of(path, format),
    );
    let written = (0..predictions.len())
        .try_for_each(|i| w.write(predictions.row(i)))
        .and_then(|()| w.finish().map(drop));
    match written {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        r => r.map_err(|e| write_error(path, e)),
    }
}

/// Predict mode: reads the detection events (a file or stdin), decodes them in batches of
/// [`PREDICT_BATCH`] (`--threads` workers on the CPU; the GPU pipelined) and writes each
/// batch's predicted observable flips (to `--out`, default stdout), so memory stays
/// constant whatever the stream's length. Returns the shots decoded. A reader that goes
/// away (a closed pipe) ends it quietly.
pub fn predict(args: &DecodeArgs) -> Result<usize> {
    let (_, dec) = load_decoder(args)?;
    let (n, nb, rb) = (dec.num_detectors(), dec.detector_bytes(), dec.result_len());
    let dets_format = format_of(&args.dets, args.dets_format);
    let mut reader = ShotReader::new(open_input(&args.dets)?, n, dets_format);
    let out_path = args
        .predictions
        .clone()
        .unwrap_or_else(|| PathBuf::from("-"));
    let out_format = format_of(&out_path, args.out_format);
    let mut writer = ShotWriter::new(open_output(&out_path)?, dec.num_observables(), out_format);
    let mut gpu = match args.backend {
        DecodeBackend::Gpu => Some(GpuDecoder::start(&dec)?),
        DecodeBackend::Cpu => None,
    };
    let limit = args.shots.unwrap_or(usize::MAX);
    let (mut dets, mut results) = (vec![0u8; PREDICT_BATCH * nb], vec![0u8; PREDICT_BATCH * rb]);
    let mut done = 0usize;
    let hint = |d: String| {
        shots_error(
            &args.dets,
            format!("{d} (the model {} has {n} detectors)", args.dem.display()),
        )
    };
    loop {
        let mut count = 0;
        while count < PREDICT_BATCH
            && done + count < limit
            && reader
                .next_into(&mut dets[count * nb..(count + 1) * nb])
                .map_err(hint)?
        {
            count += 1;
        }
        if count == 0 {
            break;
        }
        let (d, r) = (&dets[..count * nb], &mut results[..count * rb]);
        match gpu.as_mut() {
            Some(g) => g.decode_pipelined(d, r)?,
            None => dec.decode_batch(d, r, usize::from(args.threads))?,
        }
        for row in r
            .chunks_exact(rb.max(1))
            .take(if rb == 0 { 0 } else { count })
        {
            match writer.write(row) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => return Ok(done),
                Err(e) => return Err(write_error(&out_path, e)),
            }
        }
        if rb == 0 {
            for _ in 0..count {
                writer.write(&[]).map_err(|e| write_error(&out_path, e))?;
            }
        }
        done += count;
    }
    match writer.finish() {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            return Err(write_error(&out_path, e))
        }
        _ => {}
    }
    if let Some(g) = gpu {
        g.shutdown()?;
    }
    Ok(done)
}
