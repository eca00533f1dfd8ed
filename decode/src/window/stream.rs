//! [`StreamDecoder`]: one logical qubit's sliding-window decoder.
#![forbid(unsafe_code)]

use std::sync::Arc;

use super::model::{StreamModel, WindowGraph, WindowKind};
use super::uf::WindowScratch;

/// The logical-observable flips of a run of committed rounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Commit {
    /// The first round it covers (rounds count from 0 after `new` or `reset`).
    pub first_round: u64,
    /// Rounds covered: `C` for a window's commit; the final commit's rounds include the
    /// final round.
    pub rounds: u32,
    /// Bit `k`: the committed correction flips observable `Lk`.
    pub flips: u64,
}

/// Why a stream refused a round (nothing of the round is kept; the stream is unchanged
/// and takes the expected round next).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StreamError {
    /// The events are not [`StreamModel::round_bytes`] long.
    #[error("round of {got} bytes; this stream's rounds are {expected} bytes")]
    WrongLength { expected: usize, got: usize },
    /// A round already received (or older): send the expected one.
    #[error("round {got} was already received; the stream expects round {expected}")]
    RoundRepeated { expected: u64, got: u64 },
    /// Rounds between the expected one and this one never arrived: the stream cannot go
    /// on without them (`reset` starts it again).
    #[error("rounds {expected}..{got} are missing; the stream expects round {expected}")]
    RoundsMissing { expected: u64, got: u64 },
    /// The stream was finished: `reset` starts a new one.
    #[error("the stream is finished; reset it to start another")]
    Finished,
    /// `finish` before the model's fewest rounds.
    #[error("a stream needs at least {min} rounds before its final round, it has {rounds}")]
    TooShort { rounds: u64, min: u64 },
}

/// One logical qubit's decoder state: the rounds not yet committed, with the defects
/// carried into them by earlier commits.
#[derive(Debug, Clone)]
pub struct StreamDecoder {
    model: Arc<StreamModel>,
    scratch: WindowScratch,
    /// Kept-slot events of rounds `window_start..next_round`, one row of `row_words`
    /// words per round (bit `k` of a row: kept slot `k`); the final round takes the row
    /// after the last.
    rows: Vec<u64>,
    row_words: usize,
    next_round: u64,
    window_start: u64,
    finished: bool,
    defects: Vec<u32>,
}

impl StreamDecoder {
    /// A stream at round 0.
    pub fn new(model: &Arc<StreamModel>) -> StreamDecoder {
        let row_words = model.kept_slots().len().div_ceil(64);
        StreamDecoder {
            model: Arc::clone(model),
            scratch: WindowScratch::new(model.match_limits()),
            rows: vec![0; model.rounds_per_window() as usize * row_words],
            row_words,
            next_round: 0,
            window_start: 0,
            finished: false,
            defects: Vec::new(),
        }
    }

    pub fn model(&self) -> &Arc<StreamModel> {
        &self.model
    }

    /// The round the stream expects next.
    pub fn next_round(&self) -> u64 {
        self.next_round
    }

    /// The first round not yet committed.
    pub fn window_start(&self) -> u64 {
        self.window_start
    }

    /// Forgets everything: the next round is round 0.
    pub fn reset(&mut self) {
        self.rows.fill(0);
        self.next_round = 0;
        self.window_start = 0;
        self.finished = false;
    }

    fn check(&self, round: Option<u64>, events: &[u8]) -> Result<(), StreamError> {
        if self.finished {
            return Err(StreamError::Finished);
        }
        let expected = self.model.round_bytes();
        if events.len() != expected {
            return Err(StreamError::WrongLength {
                expected,
                got: events.len(),
            });
        }
        match round {
            Some(got) if got < self.next_round => Err(StreamError::RoundRepeated {
                expected: self.next_round,
                got,
            }),
            Some(got) if got > self.next_round => Err(StreamError::RoundsMissing {
                expected: self.next_round,
                got,
            }),
            _ => Ok(()),
        }
    }

    /// Stores `events` (every slot, bit-packed LSB first) as row `row`.
    fn store(&mut self, row: usize, events: &[u8]) {
        let words = &mut self.rows[row * self.row_words..(row + 1) * self.row_words];
        words.fill(0);
        for (k, &s) in self.model.kept_slots().iter().enumerate() {
            if events[s as usize / 8] >> (s % 8) & 1 == 1 {
                words[k / 64] |= 1 << (k % 64);
            }
        }
    }

    /// Takes round `round`'s detection events (bit-packed LSB first, one bit per slot of
    /// [`StreamModel::detectors_per_round`]; bits past the last slot are ignored). Returns
    /// a commit when the round completes a window: its first `C` rounds become final.
    pub fn push_round(
        &mut self,
        round: u64,
        detection_events: &[u8],
    ) -> Result<Option<Commit>, StreamError> {
        self.check(Some(round), detection_events)?;
        let row = (self.next_round - self.window_start) as usize;
        self.store(row, detection_events);
        self.next_round += 1;
        let w = u64::from(self.model.rounds_per_window());
        if self.next_round - self.window_start < w {
            return Ok(None);
        }
        let kind = if self.window_start == 0 {
            WindowKind::First
        } else {
            WindowKind::Bulk
        };
        let commit = self.decode_window(kind);
        // The committed rounds leave; the carried defects are already in the next row.
        let c = self.model.commit_rounds() as usize;
        let rw = self.row_words;
        self.rows.copy_within(c * rw..w as usize * rw, 0);
        self.window_start += c as u64;
        Ok(Some(commit))
    }

    /// Ends the stream with its final round (the data qubits' measurement, as the model's
    /// last round has it; `final_events` laid out like any round): decodes the last window
    /// and commits every round left, the final round included. The stream then refuses
    /// rounds until [`StreamDecoder::reset`].
    pub fn finish(&mut self, final_events: &[u8]) -> Result<Commit, StreamError> {
        self.check(None, final_events)?;
        let min = u64::from(self.model.min_rounds());
        if self.next_round < min {
            return Err(StreamError::TooShort {
                rounds: self.next_round,
                min,
            });
        }
        let row = (self.next_round - self.window_start) as usize;
        self.store(row, final_events);
        let kind = WindowKind::Final {
            from_start: self.window_start == 0,
            rounds: row as u32,
        };
        let commit = self.decode_window(kind);
        self.finished = true;
        Ok(commit)
    }

    /// Decodes the window of `kind` over the stored rows, commits its first rounds, and
    /// carries the committed correction's defects into the row after them.
    fn decode_window(&mut self, kind: WindowKind) -> Commit {
        let model = Arc::clone(&self.model);
        let index = model
            .window_index(kind)
            .expect("the stream only reaches windows the model built");
        let wg: &WindowGraph = &model.windows()[index];
        let g = &wg.graph;
        let off = g.adj_offset();
        let k = wg.slots as usize;
        self.defects.clear();
        for j in 0..wg.rounds as usize {
            let words = &self.rows[j * self.row_words..(j + 1) * self.row_words];
            for (wi, &word) in words.iter().enumerate() {
                let mut bits = word;
                while bits != 0 {
                    let v = j * k + wi * 64 + bits.trailing_zeros() as usize;
                    bits &= bits - 1;
                    // Events where the round has no detector (no edge) are ignored.
                    if off[v] != off[v + 1] {
                        self.defects.push(v as u32);
                    }
                }
            }
        }
        let flips = self
            .scratch
            .decode(model.metric(), index, wg, &self.defects);
        for &v in &self.scratch.carried {
            // The commit round's event at v flips: round j of the rows, kept slot s.
            let (j, s) = ((v / wg.slots) as usize, (v % wg.slots) as usize);
            self.rows[j * self.row_words + s / 64] ^= 1 << (s % 64);
        }
        Commit {
            first_round: self.window_start,
            rounds: wg.commit_rounds,
            flips,
        }
    }
}
