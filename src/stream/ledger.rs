//! The batched engine's book of every stream: the protocol's state machine of
//! [`super::state::StreamState`] without the decoder in it.
//!
//! Whether a round is accepted, refused (and with which status), or completes a window
//! depends only on round indices, never on the decoded flips: a [`Ledger`] decides it as
//! the round arrives, hands the accepted rounds to a [`LedgerSink`] (which batches them
//! for a decoder), and emits every record the CPU's `StreamState` emits, in the same
//! order. Records that need the decoder (a commit's flips; the corrections, which XOR
//! them) go out as placeholders, filled once the batch is decoded.
//! `tests/stream_gpu_engine.rs` checks the answers against the CPU pool's.
#![forbid(unsafe_code)]

use super::protocol::{refusal, BlockView, Record, RecordKind, EXPECTED_UNKNOWN};
use super::state::{RefusalRun, RoundCounts};

/// A record of a response, ready or waiting for the decoder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Item {
    /// Complete as it is (refusals).
    Ready(Record),
    /// A window's commit: `value` (the flips) comes from the decoder's commit `at`.
    Commit { record: Record, at: CommitRef },
    /// A stream reset: its corrections start again from 0.
    Reset(Record),
    /// `get_corrections`: `value` is the stream's flips so far; `clear` zeroes them after.
    Corrections { record: Record, clear: bool },
}

/// Where a commit's flips will be: commit `k` of entry `entry` of segment `segment` of
/// the batch being built (see [`super::batch::Work`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CommitRef {
    pub segment: u32,
    pub entry: u32,
    pub k: u32,
}

/// What the ledger hands on.
pub trait LedgerSink {
    /// Stream `stream` starts again at round 0.
    fn reset(&mut self, stream: u32, record: Record);
    /// Round `round` of `stream` was accepted (its final round when `last`).
    fn accept(&mut self, stream: u32, round: u64, events: &[u8], last: bool);
    /// The round just accepted completes a window, whose record this is.
    fn commit(&mut self, stream: u32, record: Record);
    fn record(&mut self, record: Record);
    fn corrections(&mut self, record: Record, clear: bool);
}

/// One stream's protocol state (rounds only).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Ledger {
    /// The round expected next.
    next: u64,
    /// The first round not yet committed.
    committed_through: u64,
    finished: bool,
}

/// The model's numbers the ledger needs.
#[derive(Debug, Clone, Copy)]
pub struct Windows {
    pub rounds_per_window: u32,
    pub commit_rounds: u32,
    pub min_rounds: u32,
}

impl Ledger {
    /// Rounds accepted and not yet committed.
    pub fn pending(&self) -> u64 {
        self.next - self.committed_through
    }

    /// Stream `s` (0-based) of `block`, which is stream `id`: as `StreamState::apply`.
    pub fn apply(
        &mut self,
        w: Windows,
        id: u32,
        block: &BlockView<'_>,
        s: usize,
        counts: &mut RoundCounts,
        sink: &mut impl LedgerSink,
    ) {
        if block.resets() {
            self.reset(id, counts, sink);
        }
        let mut refused = RefusalRun::default();
        let last = usize::from(block.rounds) - 1;
        for r in 0..=last {
            let round = block.first_round + r as u64;
            counts.received += 1;
            let is_final = block.ends_with_final() && r == last;
            match self.check(w, round, is_final) {
                Ok(()) => {
                    counts.accepted += 1;
                    sink.accept(id, round, block.round(s, r), is_final);
                    self.take(w, id, round, is_final, sink);
                }
                Err(status) => {
                    let expected = self.expected();
                    refused.refuse(id, status, round, expected, counts, |r| sink.record(r));
                }
            }
        }
        refused.close(id, |r| sink.record(r));
    }

    /// The status a round gets, in the order the CPU's stream and decoder check them.
    fn check(&self, w: Windows, round: u64, is_final: bool) -> Result<(), u16> {
        if self.finished {
            return Err(refusal::STREAM_FINISHED);
        }
        if round < self.next {
            return Err(refusal::ROUND_REPEATED);
        }
        if round > self.next {
            return Err(refusal::ROUNDS_MISSING);
        }
        if is_final && self.next < u64::from(w.min_rounds) {
            return Err(refusal::TOO_SHORT);
        }
        Ok(())
    }

    /// An accepted round: the window it completes, if any.
    fn take(
        &mut self,
        w: Windows,
        id: u32,
        round: u64,
        is_final: bool,
        sink: &mut impl LedgerSink,
    ) {
        let start = self.committed_through;
        let rounds = if is_final {
            self.finished = true;
            Some((self.next - start + 1) as u32)
        } else if self.next + 1 - start == u64::from(w.rounds_per_window) {
            Some(w.commit_rounds)
        } else {
            None
        };
        self.next = round + 1;
        if let Some(rounds) = rounds {
            self.committed_through = start + u64::from(rounds);
            sink.commit(
                id,
                Record {
                    stream: id,
                    kind: if self.finished {
                        RecordKind::CommitFinal
                    } else {
                        RecordKind::Commit
                    },
                    status: 0,
                    first_round: start,
                    value: 0,
                    rounds,
                    window_rounds: (round - start + 1) as u32,
                },
            );
        }
    }

    fn expected(&self) -> u64 {
        if self.finished {
            EXPECTED_UNKNOWN
        } else {
            self.next
        }
    }

    /// Starts the stream again at round 0; its uncommitted rounds are discarded (counted).
    pub fn reset(&mut self, id: u32, counts: &mut RoundCounts, sink: &mut impl LedgerSink) {
        let discarded = self.pending();
        counts.discarded += discarded;
        sink.reset(
            id,
            Record {
                stream: id,
                kind: RecordKind::Reset,
                status: 0,
                first_round: self.next,
                value: discarded,
                rounds: 0,
                window_rounds: 0,
            },
        );
        *self = Ledger::default();
    }

    /// Answers `get_corrections` (the value comes from the decoded commits).
    pub fn corrections(&self, id: u32, clear: bool, sink: &mut impl LedgerSink) {
        sink.corrections(
            Record {
                stream: id,
                kind: RecordKind::Corrections,
                status: 0,
                first_round: self.committed_through,
                value: 0,
                rounds: 0,
                window_rounds: 0,
            },
            clear,
        );
    }
}
