//! QEC decoders: Stim detector error models in, observable flips out (docs/decoders.md).
//!
//! Pure Rust, no CUDA, network or command line: the appliance (`qfwd`) serves these
//! decoders, runs their GPU ports, and wraps [`Error`] in its own.
//!
//! - [`dem`]: parses Stim `.dem` text (flattening `repeat` / `shift_detectors`);
//! - [`graph`]: builds the matching graph as PyMatching does, in flat arrays with integer
//!   weights, the form the GPU kernels load;
//! - [`shots`]: Stim's `b8` / `01` shot files;
//! - [`lut`]: syndrome -> observable lookup table (at most 24 detectors);
//! - [`uf`]: union-find decoder (Delfosse–Nickerson), step by step in its module docs;
//! - [`matching`]: exact minimum-weight matching (Edmonds' blossom algorithm grown on the
//!   graph, as sparse blossom does): PyMatching's answers at union-find's speed, CPU only;
//! - [`observable_part`]: the components of the graph that can flip an observable, the
//!   only ones the union-find decoder reads (the same answers, fewer defects);
//! - [`uf_table`]: the uf output of every low-weight syndrome, precomputed (the GPU uf's
//!   fast path), and [`precompute`]: the table and the split path's limit as a GPU
//!   upload needs them, kept per process;
//! - [`sample`]: syndromes drawn from a graph's own error model (load-time tuning);
//! - [`brute`]: brute-force most-likely-error reference for tests;
//! - [`budget`]: the work a request may ask for (its defects), and the default per model.
//! - [`window`]: streaming decoding, one logical qubit's rounds in sliding windows.
//!
//! # Quick start
//!
//! ```no_run
//! use qfwd_decode::{Decoder, DecoderKind};
//! let dec = Decoder::from_dem_path("tests/fixtures/surface_d3_r3_z_p001.dem".as_ref(), DecoderKind::Uf)?;
//! let mut scratch = dec.new_scratch();
//! let syndrome = vec![0u8; dec.detector_bytes()]; // bit-packed, LSB first
//! let flips: u64 = dec.decode(&mut scratch, &syndrome); // bit k = observable Lk
//! # Ok::<(), qfwd_decode::Error>(())
//! ```
//!
//! # In the appliance
//!
//! A [`Decoder`] behind an `Arc` is a handler of the appliance. Payload: the
//! detection events bit-packed LSB first (`ceil(n/8)` bytes) then the number of detectors
//! as a u32 little-endian; result: the observable flips bit-packed LSB first
//! (`ceil(num_observables/8)` bytes). See [`Decoder::run_payload`]. A request with more
//! defects than the decoder's budget ([`budget`], [`Decoder::max_defects`]) is answered
//! [`BadPayload::OverBudget`] without decoding.
//!
//! # Observables
//!
//! A model may use up to [`dem::MAX_OBSERVABLES`] observables. [`Decoder::decode`] returns
//! the first 64 as a `u64`; [`Decoder::decode_to`] and [`Decoder::run_payload`] write all
//! of them. The `lut` decoder (and the GPU decoders) hold at most 64.
//!
//! # Thread safety
//!
//! A [`Decoder`] is immutable and `Send + Sync`; the per-shot working memory is a separate
//! [`Scratch`], one per thread. [`Decoder::run_payload`] keeps one scratch per thread in a
//! thread-local, allocated at the first request a thread serves (and grown only if a
//! larger model arrives), so the steady state allocates nothing and takes no lock.
#![forbid(unsafe_code)]

pub mod brute;
pub mod budget;
pub mod dem;
mod error;
pub mod graph;
pub mod lut;
pub mod matching;
pub mod observable_part;
pub mod precompute;
pub mod sample;
pub mod shots;
pub mod uf;
pub mod uf_lanes;
pub mod uf_potential;
pub mod uf_split;
pub mod uf_table;
pub mod uf_table_cache;
pub mod window;

use std::cell::RefCell;
use std::fmt;
use std::path::Path;
use std::str::FromStr;

pub use dem::Dem;
pub use error::{Error, Result};
pub use graph::MatchingGraph;
pub use lut::Lut;
pub use matching::MatchingScratch;
pub use observable_part::ObservablePart;
pub use shots::{ShotFormat, ShotReader, ShotWriter, Shots};
pub use uf::UfScratch;
pub use uf_table::{UfTable, Workers};

/// Which decoding algorithm. One name, one answer: a decoder of a kind gives the same
/// flips for a syndrome wherever it runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DecoderKind {
    /// Lookup table (at most 24 detectors).
    Lut,
    /// Union-find.
    Uf,
    /// Exact minimum-weight matching ([`matching`]); the CPU only.
    Matching,
}

impl DecoderKind {
    /// Every kind, in the order help texts list them.
    pub const ALL: [DecoderKind; 3] = [DecoderKind::Matching, DecoderKind::Uf, DecoderKind::Lut];

    pub fn as_str(&self) -> &'static str {
        match self {
            DecoderKind::Lut => "lut",
            DecoderKind::Uf => "uf",
            DecoderKind::Matching => "matching",
        }
    }

    /// Device-side handler code, as the GPU kernels dispatch on it (parity is 1). No
    /// kernel serves `matching` (4): the GPU topologies refuse it at start
    /// ([`DecoderKind::runs_on_gpu`]).
    pub fn device_code(&self) -> u32 {
        match self {
            DecoderKind::Lut => 2,
            DecoderKind::Uf => 3,
            DecoderKind::Matching => 4,
        }
    }

    /// Whether the GPU decoders serve this kind (`lut` and `uf`; `matching` runs on the
    /// CPU only: docs/matching-specification.md says why).
    pub fn runs_on_gpu(&self) -> bool {
        !matches!(self, DecoderKind::Matching)
    }

    /// The error for a GPU side asked to serve `self` (`what` names the side).
    pub fn gpu_refusal(&self, what: &str) -> Error {
        Error::InvalidSetting {
            key: "decoder",
            detail: format!(
                "{what} cannot serve the {self} decoder: exact matching runs on the CPU only \
                 (topology cpu, or `qfwd decode --backend cpu`); on the GPU use --decoder uf \
                 (union-find: the same answers on CPU and GPU, 1.05-1.2x matching's logical \
                 errors near threshold, docs/decoders.md)"
            ),
        }
    }
}

impl fmt::Display for DecoderKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for DecoderKind {
    type Err = Error;
    fn from_str(s: &str) -> Result<DecoderKind> {
        match s {
            "lut" => Ok(DecoderKind::Lut),
            "uf" => Ok(DecoderKind::Uf),
            "matching" => Ok(DecoderKind::Matching),
            _ => Err(Error::UnknownDecoder {
                name: s.to_string(),
            }),
        }
    }
}

/// Why [`Decoder::run_payload`] refused a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum BadPayload {
    /// The payload is not `ceil(n/8) + 4` bytes for the model's `n` detectors.
    #[error("payload length does not match the model")]
    Length,
    /// The payload's u32 detector count is not the model's.
    #[error("payload's detector count does not match the model")]
    DetectorCount,
    /// The output buffer cannot hold the result.
    #[error("no room for the result")]
    NoRoom,
    /// The syndrome has more defects than the decoder's budget ([`Decoder::max_defects`]):
    /// not decoded.
    #[error("more defects than the decoder's budget")]
    OverBudget,
}

#[derive(Debug)]
enum Engine {
    Lut(Lut),
    /// Union-find, on the graph's observable part where it has one.
    Uf(Option<Box<ObservablePart>>),
    /// Exact matching, on the graph's observable part where it has one.
    Matching(Option<Box<ObservablePart>>),
}

/// A decoder loaded from a detector error model: immutable, shareable across threads.
#[derive(Debug)]
pub struct Decoder {
    kind: DecoderKind,
    graph: MatchingGraph,
    engine: Engine,
    /// Most defects a request may hold ([`budget`]); 0: no limit.
    max_defects: u32,
    /// No edge flips an observable: every answer is 0, and the union-find needs no working
    /// memory (which would be sized by every detector: 2^24 of them for the 21 bytes
    /// `error(0.1) D16777215`).
    flips_nothing: bool,
}

/// Per-thread working memory for [`Decoder::decode`].
#[derive(Debug, Clone)]
pub struct Scratch {
    uf: UfScratch,
    matching: MatchingScratch,
    /// The syndrome on the observable part.
    part: Vec<u8>,
    /// The correction's edges (models of more than 64 observables).
    correction: Vec<u32>,
}

thread_local! {
    static THREAD_SCRATCH: RefCell<Option<Scratch>> = const { RefCell::new(None) };
}

impl Decoder {
    /// Parses `path` (a Stim `.dem`), builds the matching graph and the decoder.
    pub fn from_dem_path(path: &Path, kind: DecoderKind) -> Result<Decoder> {
        let dem = Dem::from_path(path)?;
        Decoder::from_graph(MatchingGraph::from_dem(&dem)?, kind)
    }

    /// Parses `.dem` text (`source` names it in error messages), builds the matching graph
    /// and the decoder.
    pub fn from_dem_text(text: &str, source: &str, kind: DecoderKind) -> Result<Decoder> {
        let dem = Dem::parse(text, source)?;
        Decoder::from_graph(MatchingGraph::from_dem(&dem)?, kind)
    }

    /// Builds a decoder over an existing graph (the lut, or the uf's observable part, is
    /// computed here).
    pub fn from_graph(graph: MatchingGraph, kind: DecoderKind) -> Result<Decoder> {
        let engine = match kind {
            DecoderKind::Lut => Engine::Lut(Lut::build(&graph)?),
            DecoderKind::Uf => Engine::Uf(ObservablePart::of(&graph)?.map(Box::new)),
            DecoderKind::Matching => {
                if graph.is_wide() {
                    return Err(Error::DecoderModel {
                        file: graph.source().to_string(),
                        detail: format!(
                            "the matching decoder holds at most 64 observables; this model has \
                             {}: use --decoder uf",
                            graph.num_observables()
                        ),
                    });
                }
                Engine::Matching(ObservablePart::of(&graph)?.map(Box::new))
            }
        };
        Ok(Decoder {
            kind,
            max_defects: budget::default_max_defects(&graph),
            flips_nothing: (0..graph.num_edges()).all(|e| !graph.edge_flips_any(e)),
            graph,
            engine,
        })
    }

    pub fn kind(&self) -> DecoderKind {
        self.kind
    }

    /// Most defects a request may hold ([`budget`]; 0: no limit). The default is
    /// [`budget::default_max_defects`] of the model.
    pub fn max_defects(&self) -> u32 {
        self.max_defects
    }

    /// Sets the request budget ([`budget`]): `Some(0)` turns it off, `None` restores the
    /// model's default. Refuses more than the model's detectors (past them it limits
    /// nothing: give 0).
    pub fn set_max_defects(&mut self, max_defects: Option<u32>) -> Result<()> {
        let n = self.num_detectors();
        match max_defects {
            None => self.max_defects = budget::default_max_defects(&self.graph),
            Some(m) if m as usize <= n => self.max_defects = m,
            Some(m) => {
                return Err(Error::InvalidSetting {
                    key: "max_defects",
                    detail: format!(
                        "{m} for {} is past its {n} detectors: expected 0 ..= {n} (0: no budget)",
                        self.graph.source()
                    ),
                })
            }
        }
        Ok(())
    }

    /// Whether a bit-packed syndrome holds more defects than the budget allows.
    #[inline]
    pub fn over_budget(&self, dets: &[u8]) -> bool {
        self.max_defects != 0
            && budget::count_defects(dets, self.num_detectors()) > self.max_defects
    }

    /// The model's whole graph (its detectors are the syndromes' on the wire).
    pub fn graph(&self) -> &MatchingGraph {
        &self.graph
    }

    /// The graph the decoder runs on: a `uf` or `matching` decoder's observable part
    /// ([`observable_part`]) where the graph has one, else the whole graph.
    pub fn decode_graph(&self) -> &MatchingGraph {
        self.observable_part()
            .map_or(&self.graph, ObservablePart::graph)
    }

    /// A `uf` or `matching` decoder's observable part, if its graph has components to drop.
    pub fn observable_part(&self) -> Option<&ObservablePart> {
        match &self.engine {
            Engine::Uf(part) | Engine::Matching(part) => part.as_deref(),
            Engine::Lut(_) => None,
        }
    }

    /// `dets` (a syndrome of the whole graph) as [`Decoder::decode_graph`] reads it: compacted
    /// into `buf` for an observable part, else `dets` itself.
    pub fn decode_input<'a>(&self, dets: &'a [u8], buf: &'a mut Vec<u8>) -> &'a [u8] {
        match self.observable_part() {
            Some(part) => {
                part.compact(dets, buf);
                buf
            }
            None => dets,
        }
    }

    /// The lookup table, for a `lut` decoder.
    pub fn lut(&self) -> Option<&Lut> {
        match &self.engine {
            Engine::Lut(l) => Some(l),
            Engine::Uf(_) | Engine::Matching(_) => None,
        }
    }

    pub fn num_detectors(&self) -> usize {
        self.graph.num_detectors()
    }

    pub fn num_observables(&self) -> usize {
        self.graph.num_observables()
    }

    /// Bytes of a bit-packed syndrome: `ceil(num_detectors / 8)`.
    pub fn detector_bytes(&self) -> usize {
        self.num_detectors().div_ceil(8)
    }

    /// Bytes of a result: `ceil(num_observables / 8)`.
    pub fn result_len(&self) -> usize {
        self.num_observables().div_ceil(8)
    }

    /// Bytes of a request payload: syndrome bytes + 4 (u32 LE detector count).
    pub fn payload_len(&self) -> usize {
        self.detector_bytes() + 4
    }

    /// Device-side handler code: 2 for lut, 3 for uf, 4 for matching (which no kernel
    /// serves: [`DecoderKind::runs_on_gpu`]).
    pub fn device_code(&self) -> u32 {
        self.kind.device_code()
    }

    /// Working memory sized for this decoder.
    pub fn new_scratch(&self) -> Scratch {
        Scratch {
            uf: match self.engine {
                Engine::Uf(_) if self.flips_nothing => UfScratch::empty(),
                Engine::Uf(_) => UfScratch::new(self.decode_graph()),
                Engine::Lut(_) | Engine::Matching(_) => UfScratch::empty(),
            },
            matching: match self.engine {
                Engine::Matching(_) if self.flips_nothing => MatchingScratch::default(),
                Engine::Matching(_) => MatchingScratch::new(self.decode_graph()),
                Engine::Lut(_) | Engine::Uf(_) => MatchingScratch::default(),
            },
            part: Vec::new(),
            correction: Vec::new(),
        }
    }

    /// Decodes a bit-packed syndrome (LSB first; bits past `num_detectors` ignored; missing
    /// trailing bytes read as 0) and returns the observable flips, bit k = `Lk` (the first
    /// 64 observables: [`Decoder::decode_to`] writes all of them). No budget applies.
    ///
    /// # Panics
    /// If `scratch` came from a decoder with a smaller model.
    #[inline]
    pub fn decode(&self, scratch: &mut Scratch, dets: &[u8]) -> u64 {
        match &self.engine {
            Engine::Lut(l) => l.decode(dets),
            Engine::Uf(_) | Engine::Matching(_) if self.flips_nothing => 0,
            Engine::Uf(None) => scratch.uf.decode(&self.graph, dets),
            Engine::Uf(Some(part)) => {
                part.compact(dets, &mut scratch.part);
                scratch.uf.decode(part.graph(), &scratch.part)
            }
            Engine::Matching(None) => scratch.matching.decode(&self.graph, dets),
            Engine::Matching(Some(part)) => {
                part.compact(dets, &mut scratch.part);
                scratch.matching.decode(part.graph(), &scratch.part)
            }
        }
    }

    /// [`Decoder::decode`] with the correction's total weight, in the graph's quantized units
    /// (`2^-`[`graph::WEIGHT_FRACTION_BITS`] nat: divide by 256 for the sum of
    /// `ln((1 - p) / p)`, PyMatching's `return_weight`): `matching` gives the least weight of
    /// a correction, `uf` its own correction's; `lut` keeps no weights (`None`). Models of at
    /// most 64 observables (the flips are the first 64). A model none of whose errors flips an
    /// observable answers `(0, None)`: no correction is weighed.
    pub fn decode_with_weight(&self, scratch: &mut Scratch, dets: &[u8]) -> (u64, Option<u64>) {
        let (graph, input) = match &self.engine {
            Engine::Lut(l) => return (l.decode(dets), None),
            // No edge flips an observable: every correction's answer is 0, and no scratch
            // was sized to weigh one.
            Engine::Uf(_) | Engine::Matching(_) if self.flips_nothing => return (0, None),
            Engine::Uf(None) | Engine::Matching(None) => (&self.graph, dets),
            Engine::Uf(Some(part)) | Engine::Matching(Some(part)) => {
                part.compact(dets, &mut scratch.part);
                (part.graph(), &scratch.part[..])
            }
        };
        match &self.engine {
            Engine::Matching(_) => {
                let m = scratch.matching.decode_bits(graph, input);
                (m.obs, Some(m.weight))
            }
            _ => {
                let mask = scratch
                    .uf
                    .decode_correction(graph, input, &mut scratch.correction);
                let w = graph.edge_weight();
                let weight = scratch
                    .correction
                    .iter()
                    .map(|&e| u64::from(w[e as usize]))
                    .sum();
                (mask, Some(weight))
            }
        }
    }

    /// Decodes a bit-packed syndrome (as [`Decoder::decode`]) and writes every observable's
    /// flip into `out[..result_len()]`, bit-packed LSB first. No budget applies.
    ///
    /// # Panics
    /// If `out` is shorter than [`Decoder::result_len`], or `scratch` came from a decoder
    /// with a smaller model.
    pub fn decode_to(&self, scratch: &mut Scratch, dets: &[u8], out: &mut [u8]) {
        let (graph, part) = match &self.engine {
            Engine::Lut(l) => {
                let entry = l.entry(dets);
                out[..entry.len()].copy_from_slice(entry);
                return;
            }
            // Matching keeps the first 64 observables (wider models are refused at build).
            Engine::Matching(_) => {
                let mask = self.decode(scratch, dets);
                self.write_result(mask, out);
                return;
            }
            Engine::Uf(_) if self.flips_nothing || !self.graph.is_wide() => {
                let mask = self.decode(scratch, dets);
                self.write_result(mask, out);
                return;
            }
            Engine::Uf(None) => (&self.graph, None),
            Engine::Uf(Some(part)) => (part.graph(), Some(part)),
        };
        let Scratch {
            uf,
            part: compact,
            correction,
            ..
        } = scratch;
        let input = match part {
            Some(p) => {
                p.compact(dets, compact);
                &compact[..]
            }
            None => dets,
        };
        let mask = uf.decode_correction(graph, input, correction);
        self.write_result(mask, out);
        for &e in correction.iter() {
            for &k in graph.edge_high_observables(e as usize) {
                out[k as usize / 8] ^= 1 << (k % 8);
            }
        }
    }

    /// Decodes many shots: `dets` holds them back to back, [`Decoder::detector_bytes`] each
    /// (bit-packed, LSB first), and `out` receives each one's flips, [`Decoder::result_len`]
    /// bytes a shot, as [`Decoder::decode_to`] writes them. `threads` workers (at least 1)
    /// take equal runs of shots, each with its own scratch. No budget applies.
    ///
    /// # Errors
    /// [`Error::Decode`] when `dets` is not a whole number of shots or `out` has not room
    /// for exactly as many results.
    pub fn decode_batch(&self, dets: &[u8], out: &mut [u8], threads: usize) -> Result<()> {
        let (nb, rb) = (self.detector_bytes(), self.result_len());
        let shots = dets
            .len()
            .checked_div(nb)
            .unwrap_or_else(|| out.len().checked_div(rb).unwrap_or(0));
        if (nb != 0 && dets.len() % nb != 0) || out.len() != shots * rb {
            return Err(Error::Decode {
                detail: format!(
                    "decode_batch: {} bytes of detection events ({nb} a shot) and {} bytes of \
                     results ({rb} a shot) are not the same number of shots",
                    dets.len(),
                    out.len()
                ),
            });
        }
        let run = |dets: &[u8], out: &mut [u8]| {
            let mut scratch = self.new_scratch();
            let shots = out.len().checked_div(rb).unwrap_or(0);
            for i in 0..shots {
                let row = dets.get(i * nb..(i + 1) * nb).unwrap_or(&[]);
                self.decode_to(&mut scratch, row, &mut out[i * rb..(i + 1) * rb]);
            }
        };
        let threads = threads.clamp(1, shots.max(1));
        if threads == 1 || rb == 0 {
            run(dets, out);
            return Ok(());
        }
        let per = shots.div_ceil(threads);
        std::thread::scope(|scope| {
            let mut rest_out = out;
            let mut first = 0;
            while first < shots {
                let take = per.min(shots - first);
                let (mine, later) = rest_out.split_at_mut(take * rb);
                rest_out = later;
                let d = &dets[(first * nb).min(dets.len())..((first + take) * nb).min(dets.len())];
                scope.spawn(move || run(d, mine));
                first += take;
            }
        });
        Ok(())
    }

    /// Writes `mask` as the wire result (bit-packed, LSB first) into `out`: its 64 bits,
    /// then zeros up to the result's length. Returns the length.
    #[inline]
    pub fn write_result(&self, mask: u64, out: &mut [u8]) -> usize {
        let len = self.result_len();
        for (k, byte) in out[..len].iter_mut().enumerate() {
            *byte = mask.checked_shr(8 * k as u32).unwrap_or(0) as u8;
        }
        len
    }

    /// Runs the decoder on a wire payload (docs/protocol.md): `ceil(n/8)` bytes of detection events
    /// then the u32 LE number of detectors. Writes the bit-packed observable flips into
    /// `out` and returns their length; [`BadPayload`] when the payload length or count does
    /// not match the model, or `out` is too small (the appliance answers `BAD_ARGUMENT`);
    /// [`BadPayload::OverBudget`] without decoding when the syndrome holds more than
    /// [`Decoder::max_defects`] defects (the appliance answers `OVER_BUDGET`).
    /// Uses a thread-local scratch (no lock; allocated on a thread's first call).
    #[inline]
    pub fn run_payload(
        &self,
        arg: &[u8],
        out: &mut [u8],
    ) -> std::result::Result<usize, BadPayload> {
        let nb = self.detector_bytes();
        if arg.len() != nb + 4 {
            return Err(BadPayload::Length);
        }
        if out.len() < self.result_len() {
            return Err(BadPayload::NoRoom);
        }
        let count = u32::from_le_bytes([arg[nb], arg[nb + 1], arg[nb + 2], arg[nb + 3]]);
        if count as usize != self.num_detectors() {
            return Err(BadPayload::DetectorCount);
        }
        let dets = &arg[..nb];
        if self.over_budget(dets) {
            return Err(BadPayload::OverBudget);
        }
        let mask = match &self.engine {
            Engine::Lut(l) => {
                let entry = l.entry(dets);
                out[..entry.len()].copy_from_slice(entry);
                return Ok(entry.len());
            }
            Engine::Uf(_) | Engine::Matching(_) => THREAD_SCRATCH.with(|cell| {
                let mut slot = cell.borrow_mut();
                let s = slot.get_or_insert_with(|| self.new_scratch());
                match self.engine {
                    Engine::Matching(_) => s.matching.ensure(self.decode_graph()),
                    _ => s.uf.ensure(self.decode_graph()),
                }
                if self.graph.is_wide() {
                    self.decode_to(s, dets, out);
                    None
                } else {
                    Some(self.decode(s, dets))
                }
            }),
        };
        Ok(match mask {
            Some(mask) => self.write_result(mask, out),
            None => self.result_len(),
        })
    }

    /// Builds a wire payload for a bit-packed syndrome (for clients and tests).
    pub fn payload(&self, dets: &[u8]) -> Vec<u8> {
        let nb = self.detector_bytes();
        let mut p = Vec::with_capacity(nb + 4);
        p.extend_from_slice(&dets[..nb.min(dets.len())]);
        p.resize(nb, 0);
        p.extend_from_slice(&(self.num_detectors() as u32).to_le_bytes());
        p
    }

    /// The wire result for an observable mask.
    pub fn result_bytes(&self, mask: u64) -> Vec<u8> {
        let mut out = vec![0u8; self.result_len()];
        self.write_result(mask, &mut out);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::EdgeSpec;

    fn chain(kind: DecoderKind) -> Decoder {
        let e = [
            EdgeSpec {
                u: 0,
                v: None,
                p: 0.1,
                observables: 1,
            },
            EdgeSpec {
                u: 0,
                v: Some(1),
                p: 0.1,
                observables: 0,
            },
            EdgeSpec {
                u: 1,
                v: None,
                p: 0.1,
                observables: 0,
            },
        ];
        Decoder::from_graph(MatchingGraph::from_edges(2, 1, &e).unwrap(), kind).unwrap()
    }

    #[test]
    fn payloads_are_checked_and_answered() {
        for kind in DecoderKind::ALL {
            let d = chain(kind);
            let mut out = [0u8; 4];
            assert_eq!(d.run_payload(&[0b01, 2, 0, 0, 0], &mut out), Ok(1));
            assert_eq!(out[0], 1);
            assert_eq!(d.run_payload(&[0b10, 2, 0, 0, 0], &mut out), Ok(1));
            assert_eq!(out[0], 0);
            assert_eq!(d.run_payload(&d.payload(&[0b11]), &mut out), Ok(1));
            assert_eq!(out[0], 0);
            // Wrong count, wrong length, no room.
            for (bad, why) in [
                (&[0b01, 3, 0, 0, 0][..], BadPayload::DetectorCount),
                (&[0b01, 2, 0, 0], BadPayload::Length),
                (&[0b01, 0, 2, 0, 0, 0], BadPayload::Length),
            ] {
                assert_eq!(d.run_payload(bad, &mut out), Err(why), "{kind}");
            }
            assert_eq!(
                d.run_payload(&[1, 2, 0, 0, 0], &mut []),
                Err(BadPayload::NoRoom)
            );
            assert_eq!(d.result_bytes(1), vec![1]);
        }
        for kind in DecoderKind::ALL {
            assert_eq!(kind.as_str().parse::<DecoderKind>().unwrap(), kind);
        }
        assert!(!DecoderKind::Matching.runs_on_gpu() && DecoderKind::Uf.runs_on_gpu());
        let e = DecoderKind::Matching
            .gpu_refusal("gpu-persistent")
            .to_string();
        assert!(
            e.contains("gpu-persistent") && e.contains("--decoder uf"),
            "{e}"
        );
        assert!("mwpm"
            .parse::<DecoderKind>()
            .unwrap_err()
            .to_string()
            .contains("lut"));
    }

    fn fixture(name: &str) -> (String, Shots) {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures");
        let text = std::fs::read_to_string(dir.join(format!("{name}.dem"))).unwrap();
        let n = Dem::parse(&text, name).unwrap().num_detectors as usize;
        let shots = Shots::read(&dir.join(format!("{name}.b8")), n, None).unwrap();
        (text, shots)
    }

    /// Past 64 observables: a fixture whose `L0` is also `L100` and `L300` answers bit 100
    /// and bit 300 as bit 0 on every shot, through the isolated fast path and the growth,
    /// on the observable part; `run_payload` writes the same bytes.
    #[test]
    fn observables_past_64_follow_the_correction() {
        for name in ["surface_d5_r5_z_p005", "surface_d3_r3_x_p005"] {
            let (text, shots) = fixture(name);
            let wide_text = text.replace(" L0", " L0 L100 L300");
            let narrow = Decoder::from_dem_text(&text, name, DecoderKind::Uf).unwrap();
            let mut wide = Decoder::from_dem_text(&wide_text, name, DecoderKind::Uf).unwrap();
            wide.set_max_defects(Some(0)).unwrap();
            assert_eq!((wide.num_observables(), wide.result_len()), (301, 38));
            let (mut s1, mut s2) = (narrow.new_scratch(), wide.new_scratch());
            let mut out = vec![0u8; wide.result_len()];
            let mut payload_out = vec![0u8; wide.result_len()];
            let mut flips = 0;
            for i in 0..shots.len() {
                let dets = shots.row(i);
                let bit = narrow.decode(&mut s1, dets) & 1;
                flips += bit;
                wide.decode_to(&mut s2, dets, &mut out);
                let get = |k: usize| u64::from(out[k / 8] >> (k % 8) & 1);
                assert_eq!(
                    (get(0), get(100), get(300)),
                    (bit, bit, bit),
                    "{name} shot {i}"
                );
                assert_eq!(
                    out.iter().map(|b| b.count_ones()).sum::<u32>() as u64,
                    3 * bit
                );
                assert_eq!(wide.decode(&mut s2, dets), bit, "{name} shot {i}");
                let n = wide.run_payload(&wide.payload(dets), &mut payload_out);
                assert_eq!((n, &payload_out), (Ok(38), &out), "{name} shot {i}");
            }
            assert!(flips > 0, "{name}: some shot flips L0");
        }
        for kind in [DecoderKind::Lut, DecoderKind::Matching] {
            let e = Decoder::from_dem_text("error(0.1) D0 L64\n", "w", kind)
                .unwrap_err()
                .to_string();
            assert!(
                e.contains("at most 64 observables") && e.contains("uf"),
                "{e}"
            );
        }
    }

    /// The budget: a request of more defects than `max_defects` is refused with
    /// `OverBudget` before decoding, one at the budget is decoded; the setting's range.
    #[test]
    fn requests_past_the_budget_are_refused() {
        let (text, shots) = fixture("surface_d5_r5_z_p001");
        for kind in [DecoderKind::Uf, DecoderKind::Matching] {
            let mut d = Decoder::from_dem_text(&text, "d5", kind).unwrap();
            let n = d.num_detectors();
            let mu = budget::expected_defects(d.graph());
            assert_eq!(d.max_defects(), (6.0 * mu).ceil() as u32 + 24);
            assert!(d.max_defects() < n as u32 / 2, "{} of {n}", d.max_defects());
            let mut out = [0u8; 1];
            let mut scratch = d.new_scratch();
            // Every fixture shot is within the default budget, and answered as decode().
            for i in 0..shots.len() {
                let got = d.run_payload(&d.payload(shots.row(i)), &mut out);
                assert_eq!(got, Ok(1));
                assert_eq!(u64::from(out[0]), d.decode(&mut scratch, shots.row(i)));
            }
            // k defects on the first k detectors, with every padding bit set too.
            let syndrome = |k: usize| {
                let mut dets = vec![0u8; n.div_ceil(8)];
                for v in 0..k {
                    dets[v / 8] |= 1 << (v % 8);
                }
                for v in n..8 * dets.len() {
                    dets[v / 8] |= 1 << (v % 8);
                }
                dets.extend_from_slice(&(n as u32).to_le_bytes());
                dets
            };
            let m = d.max_defects() as usize;
            assert_eq!(d.run_payload(&syndrome(m), &mut out), Ok(1));
            assert_eq!(
                d.run_payload(&syndrome(m + 1), &mut out),
                Err(BadPayload::OverBudget)
            );
            assert_eq!(
                d.run_payload(&syndrome(n), &mut out),
                Err(BadPayload::OverBudget)
            );
            d.set_max_defects(Some(0)).unwrap();
            assert_eq!(d.run_payload(&syndrome(n), &mut out), Ok(1));
            d.set_max_defects(Some(3)).unwrap();
            assert_eq!(
                d.run_payload(&syndrome(4), &mut out),
                Err(BadPayload::OverBudget)
            );
            let e = d
                .set_max_defects(Some(n as u32 + 1))
                .unwrap_err()
                .to_string();
            assert!(
                e.contains("max_defects") && e.contains(&format!("0 ..= {n}")),
                "{e}"
            );
            d.set_max_defects(None).unwrap();
            assert_eq!(d.max_defects(), m as u32);
        }
    }

    /// `decode_with_weight`: matching's weight is the table's least cost on every syndrome
    /// of a small model and at most uf's on every fixture shot; the flips are `decode`'s.
    #[test]
    fn matching_weighs_the_least_and_uf_at_least_as_much() {
        let (text, shots) = fixture("surface_d3_r1_z_p005");
        let m = Decoder::from_dem_text(&text, "d3", DecoderKind::Matching).unwrap();
        let u = Decoder::from_dem_text(&text, "d3", DecoderKind::Uf).unwrap();
        let l = Decoder::from_dem_text(&text, "d3", DecoderKind::Lut).unwrap();
        let (_, cost) = Lut::build_with_costs(m.graph()).unwrap();
        let (mut sm, mut su, mut sl) = (m.new_scratch(), u.new_scratch(), l.new_scratch());
        for (syndrome, &c) in cost.iter().enumerate() {
            let dets = (syndrome as u32).to_le_bytes();
            let (flips, weight) = m.decode_with_weight(&mut sm, &dets);
            if c != u32::MAX {
                assert_eq!(weight, Some(u64::from(c)), "syndrome {syndrome:#b}");
            }
            assert_eq!(flips, m.decode(&mut sm, &dets));
            assert_eq!(l.decode_with_weight(&mut sl, &dets).1, None);
        }
        let mut heavier = 0;
        for i in 0..shots.len() {
            let (fm, wm) = m.decode_with_weight(&mut sm, shots.row(i));
            let (fu, wu) = u.decode_with_weight(&mut su, shots.row(i));
            assert_eq!(
                (fm, fu),
                (
                    m.decode(&mut sm, shots.row(i)),
                    u.decode(&mut su, shots.row(i))
                )
            );
            assert!(wm <= wu, "shot {i}: matching {wm:?}, uf {wu:?}");
            heavier += usize::from(wm < wu);
        }
        assert!(heavier > 0, "uf's correction is heavier on some shot");
    }

    #[test]
    fn batches_decode_as_shots_do_on_any_number_of_threads() {
        let (text, shots) = fixture("surface_d3_r3_x_p005");
        for kind in [DecoderKind::Uf, DecoderKind::Matching] {
            let d = Decoder::from_dem_text(&text, "d3", kind).unwrap();
            let mut scratch = d.new_scratch();
            let rb = d.result_len();
            let mut want = vec![0u8; shots.len() * rb];
            for i in 0..shots.len() {
                d.decode_to(&mut scratch, shots.row(i), &mut want[i * rb..(i + 1) * rb]);
            }
            for threads in [1, 2, 3, 64] {
                let mut got = vec![0u8; want.len()];
                d.decode_batch(shots.as_b8(), &mut got, threads).unwrap();
                assert_eq!(got, want, "{kind} {threads} threads");
            }
        }
        let d = Decoder::from_dem_text(&text, "d3", DecoderKind::Uf).unwrap();
        let rb = d.result_len();
        let want = vec![0u8; shots.len() * rb];
        let mut short = vec![0u8; want.len() - 1];
        let e = d.decode_batch(shots.as_b8(), &mut short, 1).unwrap_err();
        assert!(e.to_string().contains("same number of shots"), "{e}");
        d.decode_batch(&[], &mut [], 2).unwrap();
    }

    /// A model whose edges flip no observable answers 0 without working memory: the 21
    /// bytes `error(0.1) D16777215` once made every scratch 2^24 detectors deep.
    #[test]
    fn a_model_that_flips_nothing_needs_no_scratch() {
        for text in [
            "error(0.1) D16777215\n",
            "error(0.1) D16777215\nerror(0.2) L0\n",
        ] {
            for kind in [DecoderKind::Uf, DecoderKind::Matching] {
                let d = Decoder::from_dem_text(text, "t.dem", kind).unwrap();
                assert_eq!(d.num_detectors(), 1 << 24);
                let mut scratch = d.new_scratch();
                let empty = format!("{:?}", UfScratch::empty());
                assert_eq!(
                    format!("{:?}", scratch.uf),
                    empty,
                    "{kind}: no working memory"
                );
                let none = format!("{:?}", MatchingScratch::default());
                assert_eq!(
                    format!("{:?}", scratch.matching),
                    none,
                    "{kind}: none either"
                );
                let mut dets = vec![0u8; d.detector_bytes()];
                dets[(1 << 21) - 1] = 0x80;
                assert_eq!(d.decode(&mut scratch, &dets), 0);
                assert_eq!(d.decode_with_weight(&mut scratch, &dets), (0, None));
                let mut out = vec![0xffu8; d.result_len()];
                d.decode_to(&mut scratch, &dets, &mut out);
                assert!(out.iter().all(|&b| b == 0));
            }
        }
    }
}
