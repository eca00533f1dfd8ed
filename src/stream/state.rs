//! One stream's state machine: what the service does with each round it is given.
//!
//! A [`StreamState`] wraps the sliding-window decoder ([`qfwd_decode::window`]) with the
//! protocol's bookkeeping, in plain integers a GPU kernel keeps per stream just as well:
//! the next round expected, the first round not yet committed, whether the final round
//! came, and the flips committed since the last reset. Every round ends in exactly one of
//! the [`RoundCounts`]: accepted (then committed, discarded by a reset, or pending), or
//! refused with a status; each transition emits the response [`Record`]s it owes
//! (docs/streaming-protocol.md, "The stream state machine").
#![forbid(unsafe_code)]

use std::sync::Arc;

use qfwd_decode::window::{Commit, StreamDecoder, StreamError, StreamModel};

use super::protocol::{refusal, BlockView, Record, RecordKind, EXPECTED_UNKNOWN};

/// Where every round went. Sums add up: `received = accepted + refused()`, and once the
/// service stops, `accepted = committed + discarded + pending`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RoundCounts {
    /// Round entries in well-formed requests.
    pub received: u64,
    /// Taken by their stream's decoder.
    pub accepted: u64,
    /// Refused, per [`refusal`] code (index `code - 1`).
    pub refused: [u64; refusal::ALL.len()],
    /// Covered by a commit sent back.
    pub committed: u64,
    /// Accepted, then dropped uncommitted by a reset the client asked for.
    pub discarded: u64,
    /// Accepted and not yet committed when the service stopped (filled in at stop).
    pub pending: u64,
    /// Windows committed (records of kind commit and commit-final).
    pub windows: u64,
}

impl RoundCounts {
    pub fn refused_total(&self) -> u64 {
        self.refused.iter().sum()
    }

    /// Counts `n` rounds refused with `code`.
    pub fn refuse(&mut self, code: u16, n: u64) {
        self.received += n;
        self.refused[usize::from(code) - 1] += n;
    }

    pub fn add(&mut self, o: &RoundCounts) {
        self.received += o.received;
        self.accepted += o.accepted;
        for (a, b) in self.refused.iter_mut().zip(o.refused) {
            *a += b;
        }
        self.committed += o.committed;
        self.discarded += o.discarded;
        self.pending += o.pending;
        self.windows += o.windows;
    }

    /// Whether both identities hold (after stop, when `pending` is known).
    pub fn adds_up(&self) -> bool {
        self.received == self.accepted + self.refused_total()
            && self.accepted == self.committed + self.discarded + self.pending
    }
}

/// One stream: its decoder and the protocol's view of it.
#[derive(Debug, Clone)]
pub struct StreamState {
    decoder: StreamDecoder,
    /// The round expected next (rounds `0 .. next` were accepted in this run).
    next: u64,
    /// The first round not yet committed.
    committed_through: u64,
    /// The final round was accepted: rounds are refused until a reset.
    finished: bool,
    /// XOR of the flips committed since the last reset (of the stream or of corrections).
    corrections: u64,
}

/// A run of refused rounds of one stream, sent as one record.
struct Refusal {
    status: u16,
    first: u64,
    rounds: u32,
    expected: u64,
}

/// Consecutive rounds of a block refused with one status, answered as one record: what
/// the CPU's [`StreamState`] and the batched engine's ledger both send.
#[derive(Default)]
pub(super) struct RefusalRun(Option<Refusal>);

impl RefusalRun {
    /// Round `round` of stream `id` refused with `status` (`expected`: the round the stream
    /// waits for): counted, and added to the open run or sent after it as a new one.
    pub(super) fn refuse(
        &mut self,
        id: u32,
        status: u16,
        round: u64,
        expected: u64,
        counts: &mut RoundCounts,
        emit: impl FnOnce(Record),
    ) {
        counts.refused[usize::from(status) - 1] += 1;
        match self.0.as_mut() {
            Some(f) if f.status == status => f.rounds += 1,
            _ => {
                if let Some(f) = self.0.take() {
                    emit(refusal_record(id, &f));
                }
                self.0 = Some(Refusal {
                    status,
                    first: round,
                    rounds: 1,
                    expected,
                });
            }
        }
    }

    /// Sends the open run, if any (at the end of the block).
    pub(super) fn close(self, id: u32, emit: impl FnOnce(Record)) {
        if let Some(f) = self.0 {
            emit(refusal_record(id, &f));
        }
    }
}

impl StreamState {
    pub fn new(model: &Arc<StreamModel>) -> StreamState {
        StreamState {
            decoder: StreamDecoder::new(model),
            next: 0,
            committed_through: 0,
            finished: false,
            corrections: 0,
        }
    }

    /// Rounds accepted and not yet committed.
    pub fn pending(&self) -> u64 {
        self.next - self.committed_through
    }

    pub fn next_round(&self) -> u64 {
        self.next
    }

    pub fn is_finished(&self) -> bool {
        self.finished
    }

    /// Stream `s` (0-based) of `block`, which is stream `id`: the reset flag, then each
    /// round in order.
    pub fn apply(
        &mut self,
        id: u32,
        block: &BlockView<'_>,
        s: usize,
        counts: &mut RoundCounts,
        emit: &mut impl FnMut(Record),
    ) {
        if block.resets() {
            self.reset(id, counts, emit);
        }
        let mut refused = RefusalRun::default();
        let last = usize::from(block.rounds) - 1;
        for r in 0..=last {
            let round = block.first_round + r as u64;
            counts.received += 1;
            let outcome = if block.ends_with_final() && r == last {
                self.finish(round, block.round(s, r)).map(Some)
            } else {
                self.decoder
                    .push_round(round, block.round(s, r))
                    .map_err(|e| self.status_of(e))
            };
            match outcome {
                Ok(commit) => {
                    counts.accepted += 1;
                    self.next = round + 1;
                    if let Some(c) = commit {
                        self.commit(id, c, round, counts, emit);
                    }
                }
                Err(status) => {
                    let expected = self.expected();
                    refused.refuse(id, status, round, expected, counts, &mut *emit);
                }
            }
        }
        refused.close(id, emit);
    }

    /// The final round `round`: checked for its index here (the decoder's `finish` takes
    /// the round that comes next, whatever its number).
    fn finish(&mut self, round: u64, events: &[u8]) -> Result<Commit, u16> {
        if self.finished {
            return Err(refusal::STREAM_FINISHED);
        }
        if round < self.next {
            return Err(refusal::ROUND_REPEATED);
        }
        if round > self.next {
            return Err(refusal::ROUNDS_MISSING);
        }
        let commit = self.decoder.finish(events).map_err(|e| self.status_of(e))?;
        self.finished = true;
        Ok(commit)
    }

    fn status_of(&self, e: StreamError) -> u16 {
        match e {
            StreamError::RoundRepeated { .. } => refusal::ROUND_REPEATED,
            StreamError::RoundsMissing { .. } => refusal::ROUNDS_MISSING,
            StreamError::Finished => refusal::STREAM_FINISHED,
            StreamError::TooShort { .. } => refusal::TOO_SHORT,
            // The batch's round size was checked against the model's; anything else the
            // decoder refuses, the stream cannot take either.
            _ => refusal::ROUNDS_MISSING,
        }
    }

    fn expected(&self) -> u64 {
        if self.finished {
            EXPECTED_UNKNOWN
        } else {
            self.next
        }
    }

    fn commit(
        &mut self,
        id: u32,
        c: Commit,
        completed_by: u64,
        counts: &mut RoundCounts,
        emit: &mut impl FnMut(Record),
    ) {
        counts.committed += u64::from(c.rounds);
        counts.windows += 1;
        self.committed_through = c.first_round + u64::from(c.rounds);
        self.corrections ^= c.flips;
        emit(Record {
            stream: id,
            kind: if self.finished {
                RecordKind::CommitFinal
            } else {
                RecordKind::Commit
            },
            status: 0,
            first_round: c.first_round,
            value: c.flips,
            rounds: c.rounds,
            window_rounds: (completed_by - c.first_round + 1) as u32,
        });
    }

    /// Starts the stream again at round 0; its uncommitted rounds are discarded (counted).
    pub fn reset(&mut self, id: u32, counts: &mut RoundCounts, emit: &mut impl FnMut(Record)) {
        let discarded = self.pending();
        counts.discarded += discarded;
        emit(Record {
            stream: id,
            kind: RecordKind::Reset,
            status: 0,
            first_round: self.next,
            value: discarded,
            rounds: 0,
            window_rounds: 0,
        });
        self.decoder.reset();
        self.next = 0;
        self.committed_through = 0;
        self.finished = false;
        self.corrections = 0;
    }

    /// Answers `get_corrections`; with `clear`, the accumulated flips start again from 0.
    pub fn corrections(&mut self, id: u32, clear: bool, emit: &mut impl FnMut(Record)) {
        emit(Record {
            stream: id,
            kind: RecordKind::Corrections,
            status: 0,
            first_round: self.committed_through,
            value: self.corrections,
            rounds: 0,
            window_rounds: 0,
        });
        if clear {
            self.corrections = 0;
        }
    }
}

fn refusal_record(id: u32, f: &Refusal) -> Record {
    Record {
        stream: id,
        kind: RecordKind::Refused,
        status: f.status,
        first_round: f.first,
        value: f.expected,
        rounds: f.rounds,
        window_rounds: 0,
    }
}

#[cfg(test)]
mod tests;
