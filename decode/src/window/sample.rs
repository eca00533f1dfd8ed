//! [`StreamSampler`]: streams drawn from a stream model's own error model, one round at a
//! time: each round's template edges fire on their own with their probabilities (the
//! merged edges of the model's matching graph, so without the correlations of
//! `^`-decomposed errors). For tests and benchmarks of any length, in constant memory;
//! deterministic for a seed. Stim's shots (`StreamModel::experiment`) carry the real
//! noise.
#![forbid(unsafe_code)]

use std::sync::Arc;

use super::layout::TO_BOUNDARY;
use super::model::StreamModel;
use super::stream::StreamError;
use crate::sample::SplitMix64;

/// Draws the rounds of one stream of a fixed length.
#[derive(Debug, Clone)]
pub struct StreamSampler {
    model: Arc<StreamModel>,
    rounds: u32,
    next: u32,
    rng: SplitMix64,
    /// Kept-slot events of the round being drawn and of the next one.
    cur: Vec<u8>,
    nxt: Vec<u8>,
    flips: u64,
}

impl StreamSampler {
    /// A stream of `rounds` syndrome rounds and the final round.
    pub fn new(
        model: &Arc<StreamModel>,
        rounds: u32,
        seed: u64,
    ) -> Result<StreamSampler, StreamError> {
        if rounds < model.min_rounds() {
            return Err(StreamError::TooShort {
                rounds: u64::from(rounds),
                min: u64::from(model.min_rounds()),
            });
        }
        let k = model.kept_slots().len();
        Ok(StreamSampler {
            model: Arc::clone(model),
            rounds,
            next: 0,
            rng: SplitMix64(seed),
            cur: vec![0; k],
            nxt: vec![0; k],
            flips: 0,
        })
    }

    /// The next round's detection events (every slot, [`StreamModel::round_bytes`]):
    /// rounds `0..rounds`, then the final round, then `None`.
    pub fn next_round(&mut self) -> Option<Vec<u8>> {
        if self.next > self.rounds {
            return None;
        }
        let class = self.model.class_of(self.next, self.rounds);
        for e in &class.edges {
            if self.rng.next_u64() >= (e.p * 2f64.powi(64)) as u64 {
                continue;
            }
            self.flips ^= e.observables;
            self.cur[e.a as usize] ^= 1;
            if e.b != TO_BOUNDARY {
                match e.db {
                    0 => self.cur[e.b as usize] ^= 1,
                    _ if self.next < self.rounds => self.nxt[e.b as usize] ^= 1,
                    _ => {}
                }
            }
        }
        let mut out = vec![0u8; self.model.round_bytes()];
        for (k, &s) in self.model.kept_slots().iter().enumerate() {
            if self.cur[k] == 1 {
                out[s as usize / 8] |= 1 << (s % 8);
            }
        }
        std::mem::swap(&mut self.cur, &mut self.nxt);
        self.nxt.fill(0);
        self.next += 1;
        Some(out)
    }

    /// The observables flipped by the errors drawn so far (the truth a stream's commits
    /// should add up to, once the final round is drawn).
    pub fn flips(&self) -> u64 {
        self.flips
    }
}
