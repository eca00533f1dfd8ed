//! Streaming decoding: one logical qubit's rounds of syndromes arrive one at a time, and a
//! sliding window turns them into committed logical-observable flips (docs/streaming.md).
//!
//! - [`StreamModel`] (one per code, shared by every stream): built from the detector error
//!   model of a long memory experiment, whose detector coordinates `(x, y, t)` give each
//!   detector's round; it holds the per-round layout (one bit per slot on the wire) and
//!   every window graph a stream can need ([`WindowKind`]): the first window, the bulk
//!   window, and the last windows, which end with the final round.
//! - [`StreamDecoder`] (one per stream): [`StreamDecoder::push_round`] keeps rounds until
//!   a window of W rounds is complete, decodes it, commits the correction of its first C
//!   rounds as a [`Commit`] (observable flips, what CUDA-Q QEC's real-time decoders
//!   return), and carries the committed edges that cross into round C as flipped events
//!   there; [`StreamDecoder::finish`] decodes the last window with the final round.
//! - The window decoder ([`uf`]): union-find specified on sets, so that a thread block
//!   computes the same correction in parallel (the GPU's `device/window.cu`).
//!
//! ```no_run
//! use std::sync::Arc;
//! use qfwd_decode::window::{StreamDecoder, StreamModel};
//! let dem = qfwd_decode::Dem::from_path("memory_d5_r25.dem".as_ref())?;
//! let model = Arc::new(StreamModel::from_dem(&dem, 15, 5)?);
//! let mut stream = StreamDecoder::new(&model);
//! let round = vec![0u8; model.round_bytes()];
//! for r in 0..100 {
//!     if let Some(commit) = stream.push_round(r, &round).expect("in order") {
//!         println!("rounds {}..+{}: flips {:#x}", commit.first_round, commit.rounds, commit.flips);
//!     }
//! }
//! let last = stream.finish(&round).expect("long enough");
//! # let _ = last;
//! # Ok::<(), qfwd_decode::Error>(())
//! ```
#![forbid(unsafe_code)]

mod layout;
mod model;
mod sample;
mod stream;
pub mod uf;

pub use layout::{DetectorPlaces, RoundClass, TemplateEdge, Templates, TO_BOUNDARY};
pub use model::{Experiment, StreamModel, WindowGraph, WindowKind};
pub use sample::StreamSampler;
pub use stream::{Commit, StreamDecoder, StreamError};
pub use uf::WindowScratch;

#[cfg(test)]
mod tests;
