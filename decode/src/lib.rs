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
//! - [`observable_part`]: the components of the graph that can flip an observable, the
//!   only ones the union-find decoder reads (the same answers, fewer defects);
//! - [`uf_table`]: the uf output of every low-weight syndrome, precomputed (the GPU uf's
//!   fast path), and [`precompute`]: the table and the split path's limit as a GPU
//!   upload needs them, kept per process;
//! - [`sample`]: syndromes drawn from a graph's own error model (load-time tuning);
//! - [`brute`]: brute-force most-likely-error reference for tests;
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
//! (`ceil(num_observables/8)` bytes). See [`Decoder::run_payload`].
//!
//! # Thread safety
//!
//! A [`Decoder`] is immutable and `Send + Sync`; the per-shot working memory is a separate
//! [`Scratch`], one per thread. [`Decoder::run_payload`] keeps one scratch per thread in a
//! thread-local, allocated at the first request a thread serves (and grown only if a
//! larger model arrives), so the steady state allocates nothing and takes no lock.
#![forbid(unsafe_code)]

pub mod brute;
pub mod dem;
mod error;
pub mod graph;
pub mod lut;
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
pub use observable_part::ObservablePart;
pub use shots::{ShotFormat, Shots};
pub use uf::UfScratch;
pub use uf_table::{UfTable, Workers};

/// Which decoding algorithm.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DecoderKind {
    /// Lookup table (at most 24 detectors).
    Lut,
    /// Union-find.
    Uf,
}

impl DecoderKind {
    pub fn as_str(&self) -> &'static str {
        match self {
            DecoderKind::Lut => "lut",
            DecoderKind::Uf => "uf",
        }
    }

    /// Device-side handler code, as the GPU kernels dispatch on it (parity is 1).
    pub fn device_code(&self) -> u32 {
        match self {
            DecoderKind::Lut => 2,
            DecoderKind::Uf => 3,
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
}

#[derive(Debug)]
enum Engine {
    Lut(Lut),
    /// Union-find, on the graph's observable part where it has one.
    Uf(Option<Box<ObservablePart>>),
}

/// A decoder loaded from a detector error model: immutable, shareable across threads.
#[derive(Debug)]
pub struct Decoder {
    kind: DecoderKind,
    graph: MatchingGraph,
    engine: Engine,
}

/// Per-thread working memory for [`Decoder::decode`].
#[derive(Debug, Clone)]
pub struct Scratch {
    uf: UfScratch,
    /// The syndrome on the observable part.
    part: Vec<u8>,
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
        };
        Ok(Decoder {
            kind,
            graph,
            engine,
        })
    }

    pub fn kind(&self) -> DecoderKind {
        self.kind
    }

    /// The model's whole graph (its detectors are the syndromes' on the wire).
    pub fn graph(&self) -> &MatchingGraph {
        &self.graph
    }

    /// The graph the decoder runs on: a `uf` decoder's observable part
    /// ([`observable_part`]) where the graph has one, else the whole graph.
    pub fn decode_graph(&self) -> &MatchingGraph {
        self.observable_part()
            .map_or(&self.graph, ObservablePart::graph)
    }

    /// A `uf` decoder's observable part, if its graph has components to drop.
    pub fn observable_part(&self) -> Option<&ObservablePart> {
        match &self.engine {
            Engine::Uf(part) => part.as_deref(),
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
            Engine::Uf(_) => None,
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

    /// Device-side handler code: 2 for lut, 3 for uf.
    pub fn device_code(&self) -> u32 {
        self.kind.device_code()
    }

    /// Working memory sized for this decoder.
    pub fn new_scratch(&self) -> Scratch {
        Scratch {
            uf: match self.engine {
                Engine::Uf(_) => UfScratch::new(self.decode_graph()),
                Engine::Lut(_) => UfScratch::empty(),
            },
            part: Vec::new(),
        }
    }

    /// Decodes a bit-packed syndrome (LSB first; bits past `num_detectors` ignored; missing
    /// trailing bytes read as 0) and returns the observable flips, bit k = `Lk`.
    ///
    /// # Panics
    /// If `scratch` came from a decoder with a smaller model.
    #[inline]
    pub fn decode(&self, scratch: &mut Scratch, dets: &[u8]) -> u64 {
        match &self.engine {
            Engine::Lut(l) => l.decode(dets),
            Engine::Uf(None) => scratch.uf.decode(&self.graph, dets),
            Engine::Uf(Some(part)) => {
                part.compact(dets, &mut scratch.part);
                scratch.uf.decode(part.graph(), &scratch.part)
            }
        }
    }

    /// Writes `mask` as the wire result (bit-packed, LSB first) into `out`; returns its length.
    #[inline]
    fn write_result(&self, mask: u64, out: &mut [u8]) -> usize {
        let len = self.result_len();
        for (k, byte) in out[..len].iter_mut().enumerate() {
            *byte = (mask >> (8 * k)) as u8;
        }
        len
    }

    /// Runs the decoder on a wire payload (docs/protocol.md): `ceil(n/8)` bytes of detection events
    /// then the u32 LE number of detectors. Writes the bit-packed observable flips into
    /// `out` and returns their length; [`BadPayload`] when the payload length or count does
    /// not match the model, or `out` is too small (the appliance answers `BAD_ARGUMENT`).
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
        let mask = match &self.engine {
            Engine::Lut(l) => {
                let entry = l.entry(dets);
                out[..entry.len()].copy_from_slice(entry);
                return Ok(entry.len());
            }
            Engine::Uf(_) => THREAD_SCRATCH.with(|cell| {
                let mut slot = cell.borrow_mut();
                let s = slot.get_or_insert_with(|| self.new_scratch());
                s.uf.ensure(self.decode_graph());
                self.decode(s, dets)
            }),
        };
        Ok(self.write_result(mask, out))
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
        for kind in [DecoderKind::Lut, DecoderKind::Uf] {
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
        assert_eq!("uf".parse::<DecoderKind>().unwrap(), DecoderKind::Uf);
        assert!("mwpm"
            .parse::<DecoderKind>()
            .unwrap_err()
            .to_string()
            .contains("lut"));
    }
}
