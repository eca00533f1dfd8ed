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
pub mod matching;
pub mod metric;
mod model;
mod sample;
mod stream;
pub mod uf;

pub use layout::{DetectorPlaces, RoundClass, TemplateEdge, Templates, TO_BOUNDARY};
pub use matching::MatchLimits;
pub use metric::Metric;
pub use model::{Experiment, StreamModel, WindowGraph, WindowKind};
pub use sample::StreamSampler;
pub use stream::{Commit, StreamDecoder, StreamError};
pub use uf::WindowScratch;

#[cfg(test)]
mod tests;

/// `.dem` text of a distance-`d` repetition-code memory experiment with `rounds` syndrome
/// rounds and a final round, phenomenological noise (data flips `p`, measurement flips
/// `q`; round 0's data flips `p / 2`), plus a chain of `d - 1` detectors that no
/// observable sees (dropped by the decoder; absent in round 0). Coordinates `(x, y, t)`
/// with `shift_detectors` between rounds, as Stim writes them. The smallest stream model
/// with a head and a tail: for tests (equal `p` and `q` give many equal-weight choices).
pub fn repetition_text(d: u32, rounds: u32, p: f64, q: f64) -> String {
    repetition(d, rounds, p, q, false)
}

/// [`repetition_text`] with one observable per data qubit (`L{i}` for qubit `i`, `d <= 64`):
/// a stream's commits then say which data qubits its corrections flipped, not only the
/// logical parity, so two decoders that agree on them chose the same corrections.
pub fn repetition_text_per_qubit(d: u32, rounds: u32, p: f64, q: f64) -> String {
    repetition(d, rounds, p, q, true)
}

fn repetition(d: u32, rounds: u32, p: f64, q: f64, per_qubit: bool) -> String {
    let a = d - 1;
    // Round 0 has the Z chain only; later rounds Z then X.
    let base = |r: u32| if r == 0 { 0 } else { a + (r - 1) * 2 * a };
    let z = |r: u32, x: u32| base(r) + x;
    let xd = |r: u32, x: u32| base(r) + a + x;
    let mut t = String::new();
    for r in 0..=rounds {
        if r > 0 {
            t.push_str("shift_detectors(0, 0, 1) 0\n");
        }
        for x in 0..a {
            t.push_str(&format!("detector({}, 0, 0) D{}\n", 2 * x + 1, z(r, x)));
        }
        for x in 0..a {
            if r > 0 {
                t.push_str(&format!("detector({}, 1, 0) D{}\n", 2 * x + 1, xd(r, x)));
            }
        }
    }
    for r in 0..=rounds {
        let pd = if r == 0 { p / 2.0 } else { p };
        // Data qubit i flips ancillas i - 1 and i.
        for i in 0..d {
            let mut targets = Vec::new();
            if i > 0 {
                targets.push(format!("D{}", z(r, i - 1)));
            }
            if i < a {
                targets.push(format!("D{}", z(r, i)));
            }
            if per_qubit {
                targets.push(format!("L{i}"));
            } else if i == 0 {
                targets.push("L0".into());
            }
            t.push_str(&format!("error({pd}) {}\n", targets.join(" ")));
            if r > 0 {
                let mut xs = Vec::new();
                if i > 0 {
                    xs.push(format!("D{}", xd(r, i - 1)));
                }
                if i < a {
                    xs.push(format!("D{}", xd(r, i)));
                }
                t.push_str(&format!("error({pd}) {}\n", xs.join(" ")));
            }
        }
        if r < rounds {
            for x in 0..a {
                t.push_str(&format!("error({q}) D{} D{}\n", z(r, x), z(r + 1, x)));
                if r > 0 {
                    t.push_str(&format!("error({q}) D{} D{}\n", xd(r, x), xd(r + 1, x)));
                }
            }
        }
    }
    t
}
