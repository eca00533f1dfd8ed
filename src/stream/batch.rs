//! "Decode a batch of rounds for many streams": the step the batched stream engine
//! ([`super::gpu_engine`]) hands to a decoder, behind [`BatchDecoder`], with two
//! implementations giving the same commits:
//!
//! - [`GpuBatchDecoder`]: every stream's state in GPU memory ([`GpuStreams`]), one
//!   launch of the batch kernel for the rounds of every stream that has some.
//! - [`CpuBatchDecoder`]: a [`StreamDecoder`] per stream on the calling thread; the
//!   stand-in that lets the whole engine run (and be tested) without a GPU.
//!
//! The batch kernel feeds every stream the same rounds `f ..= e`; a stream takes those
//! from the one it expects next, refuses the earlier ones as repeated, and a stream whose
//! state says finished refuses them all. So a launch takes the streams whose next round
//! is at most `e` and whose rounds reach `e`; the others are parked (their state uploaded
//! as finished) and restored before they take part. Streams in lockstep need one launch;
//! streams at `k` different round phases need `k`.
#![forbid(unsafe_code)]

use std::sync::Arc;

use qfwd_decode::window::{Commit, StreamDecoder, StreamError, StreamModel};

use crate::abi::StreamStateDesc;
use crate::gpu::window::{Answer, GpuStreams, Refusal};
use crate::{Error, Result};

/// One stream's share of a batch: a reset first (when `reset`), then `rounds` rounds from
/// `first_round` (the round the stream expects), then its final round (when `finish`).
/// `events` holds `rounds + finish` rounds of the model's `round_bytes`, in order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Work {
    pub stream: u32,
    pub reset: bool,
    pub first_round: u64,
    pub rounds: u32,
    pub finish: bool,
    pub events: Vec<u8>,
}

/// Decodes batches of rounds for many streams. Callers hand each stream's rounds in
/// order, as the stream expects them: a refusal here is a fault, not an answer.
pub trait BatchDecoder: Send {
    /// Streams served (`0 .. streams()`).
    fn streams(&self) -> usize;

    /// Decodes `work` (at most one entry per stream): the commits of entry `i` in order,
    /// `counts[i]` of them, entry after entry, into `commits`. Returns decode calls made
    /// (GPU launches).
    fn decode(
        &mut self,
        work: &[Work],
        commits: &mut Vec<Commit>,
        counts: &mut Vec<u32>,
    ) -> Result<u64>;

    /// Decodes `segments` in order (a stream may have an entry in several: a stream reset
    /// after rounds of its own in the batch goes on in the next): segment `s`'s commits and
    /// counts into `commits[s]` and `counts[s]` as [`BatchDecoder::decode`] gives them
    /// (both cleared first). Returns decode calls made. The default decodes segment after
    /// segment; a decoder that keeps each stream's pieces in order may take them at once.
    fn decode_segments(
        &mut self,
        segments: &[Vec<Work>],
        commits: &mut [Vec<Commit>],
        counts: &mut [Vec<u32>],
    ) -> Result<u64> {
        let mut calls = 0;
        for (s, work) in segments.iter().enumerate() {
            commits[s].clear();
            counts[s].clear();
            if !work.is_empty() {
                calls += self.decode(work, &mut commits[s], &mut counts[s])?;
            }
        }
        Ok(calls)
    }

    /// Batches the decoder holds at once: 1 for one that decodes in
    /// [`BatchDecoder::decode_segments`]; more for one that takes a batch with
    /// [`BatchDecoder::post`] while it decodes the one before.
    fn depth(&self) -> usize {
        1
    }

    /// Starts decoding `segments` (as [`BatchDecoder::decode_segments`] would) without
    /// waiting: their answers come from [`BatchDecoder::collect`], batch after batch in
    /// the order posted. False, with nothing started, where the decoder cannot take it
    /// now (all its depth in flight, a batch too large for one go, or no such mode):
    /// collect what is in flight and decode it with `decode_segments` instead.
    fn post(&mut self, segments: &[Vec<Work>]) -> Result<bool> {
        let _ = segments;
        Ok(false)
    }

    /// Whether the oldest posted batch is decoded (so that `collect` will not wait).
    fn ready(&mut self) -> bool {
        true
    }

    /// The oldest posted batch's answers (waiting for them, with a deadline), into
    /// `commits` and `counts` as `decode_segments` fills them. Returns decode calls made.
    fn collect(&mut self, commits: &mut [Vec<Commit>], counts: &mut [Vec<u32>]) -> Result<u64> {
        let _ = (commits, counts);
        Err(fault("no batch was posted".into()))
    }

    /// One line: what decodes (shown by `qfwd run`).
    fn describe(&self) -> String;

    /// Where the decoder's time went, when it keeps count (shown with the counters).
    fn timings(&self) -> Option<String> {
        None
    }
}

pub(super) fn fault(detail: String) -> Error {
    Error::Decode { detail }
}

/// Feeds one piece of a stream's work to its decoder: a reset first when `reset`, then
/// `rounds` rounds from `first_round`, then the final round when `finish`, their events
/// in `events` (the model's `round_bytes` each, in order; missing ones read as empty).
/// Every answer, a commit or why a round was refused, goes to `answer`, in order; feeding
/// stops where `answer` returns false.
pub(super) fn feed(
    d: &mut StreamDecoder,
    (reset, first_round, rounds): (bool, u64, u32),
    finish: bool,
    events: &[u8],
    mut answer: impl FnMut(std::result::Result<Commit, StreamError>) -> bool,
) {
    if reset {
        d.reset();
    }
    let rb = d.model().round_bytes().max(1);
    let mut evs = events.chunks_exact(rb);
    for r in 0..rounds {
        let ev = evs.next().unwrap_or_default();
        let a = match d.push_round(first_round + u64::from(r), ev) {
            Ok(None) => continue,
            Ok(Some(c)) => Ok(c),
            Err(e) => Err(e),
        };
        if !answer(a) {
            return;
        }
    }
    if finish {
        answer(d.finish(evs.next().unwrap_or_default()));
    }
}

/// The CPU stand-in: one [`StreamDecoder`] per stream.
pub struct CpuBatchDecoder {
    decoders: Vec<StreamDecoder>,
}

impl CpuBatchDecoder {
    pub fn new(model: &Arc<StreamModel>, streams: usize) -> CpuBatchDecoder {
        CpuBatchDecoder {
            decoders: (0..streams).map(|_| StreamDecoder::new(model)).collect(),
        }
    }
}

impl BatchDecoder for CpuBatchDecoder {
    fn streams(&self) -> usize {
        self.decoders.len()
    }

    fn decode(
        &mut self,
        work: &[Work],
        commits: &mut Vec<Commit>,
        counts: &mut Vec<u32>,
    ) -> Result<u64> {
        for w in work {
            let d = self
                .decoders
                .get_mut(w.stream as usize)
                .ok_or_else(|| fault(format!("stream {} is not served", w.stream)))?;
            let before = commits.len();
            let mut refused = None;
            let piece = (w.reset, w.first_round, w.rounds);
            feed(d, piece, w.finish, &w.events, |a| match a {
                Ok(c) => {
                    commits.push(c);
                    true
                }
                Err(e) => {
                    refused = Some(e);
                    false
                }
            });
            if let Some(e) = refused {
                return Err(fault(format!("stream {}: {e}", w.stream)));
            }
            counts.push((commits.len() - before) as u32);
        }
        Ok(1)
    }

    fn describe(&self) -> String {
        "the CPU stand-in (a StreamDecoder per stream, on the decoding thread)".into()
    }
}

/// Every stream's state on a GPU ([`GpuStreams`]), and the host's copy of it.
pub struct GpuBatchDecoder {
    gpu: GpuStreams,
    device: usize,
    threads: u32,
    /// What each stream's state on the device is once unparked.
    states: Vec<StreamStateDesc>,
    /// The device holds `states` (no stream parked, none reset since).
    device_current: bool,
    round_bytes: usize,
    commit_rounds: u64,
    /// Per launch: events, the state upload, and each stream's share of the answers.
    events: Vec<u8>,
    upload: Vec<StreamStateDesc>,
}

/// An entry's progress through the launches of one batch.
#[derive(Clone, Copy)]
struct Progress {
    /// Rounds taken so far.
    taken: u32,
    finished: bool,
}

impl GpuBatchDecoder {
    /// `streams` streams on GPU `device`, each window decoded by a block of `threads`.
    pub fn new(
        device: usize,
        model: &Arc<StreamModel>,
        streams: usize,
        threads: u32,
    ) -> Result<GpuBatchDecoder> {
        let gpu = GpuStreams::new(device, model, streams, threads)?;
        Ok(GpuBatchDecoder {
            gpu,
            device,
            threads,
            states: vec![StreamStateDesc::default(); streams],
            device_current: true,
            round_bytes: model.round_bytes(),
            commit_rounds: u64::from(model.commit_rounds()),
            events: Vec::new(),
            upload: Vec::new(),
        })
    }

    /// One launch over the entries still holding rounds: returns false when none do.
    fn launch(
        &mut self,
        work: &[Work],
        progress: &mut [Progress],
        out: &mut [Vec<Commit>],
    ) -> Result<bool> {
        let rounds_left = |i: usize| work[i].rounds - progress[i].taken;
        let nexts: Vec<u64> = work
            .iter()
            .map(|w| self.states[w.stream as usize].next_round)
            .collect();
        let next = |i: usize| nexts[i];
        let with_rounds: Vec<usize> = (0..work.len()).filter(|&i| rounds_left(i) > 0).collect();
        let (first, last, finish, members) = if with_rounds.is_empty() {
            // Only final rounds left: one launch finishes them all.
            let members: Vec<usize> = (0..work.len())
                .filter(|&i| work[i].finish && !progress[i].finished)
                .collect();
            if members.is_empty() {
                return Ok(false);
            }
            (0, None, true, members)
        } else {
            let first = with_rounds.iter().map(|&i| next(i)).min().unwrap_or(0);
            let end = |i: usize| next(i) + u64::from(rounds_left(i)) - 1;
            let last = with_rounds.iter().map(|&i| end(i)).min().unwrap_or(0);
            let members: Vec<usize> = with_rounds
                .into_iter()
                .filter(|&i| next(i) <= last)
                .collect();
            // The final round rides along when every member ends here with one.
            let finish = members.iter().all(|&i| end(i) == last && work[i].finish);
            (first, Some(last), finish, members)
        };
        let rounds = last.map_or(0, |l| (l + 1 - first) as u32);
        let inputs = rounds as usize + usize::from(finish);
        let rb = self.round_bytes;
        let n = self.states.len();
        self.events.clear();
        self.events.resize(n * inputs * rb, 0);
        self.upload.clear();
        self.upload.extend(
            self.states
                .iter()
                .map(|s| StreamStateDesc { finished: 1, ..*s }),
        );
        for &i in &members {
            let w = &work[i];
            let s = w.stream as usize;
            self.upload[s] = self.states[s];
            let skip = last.map_or(0, |_| next(i) - first) as usize;
            let take = (rounds as usize - skip) + usize::from(finish);
            let from = progress[i].taken as usize * rb;
            let at = (s * inputs + skip) * rb;
            self.events[at..at + take * rb].copy_from_slice(&w.events[from..from + take * rb]);
        }
        let parked = members.len() < n;
        if parked || !self.device_current {
            self.gpu.set_states(&self.upload)?;
        }
        let (answers, _) = self.gpu.push(first, &self.events, rounds, finish)?;
        let mut member = vec![false; n];
        for &i in &members {
            member[work[i].stream as usize] = true;
            let s = work[i].stream as usize;
            let skip = last.map_or(0, |_| next(i) - first);
            self.take_answers(&answers[s], skip, &mut out[i], s)?;
            let took = rounds - skip as u32;
            progress[i].taken += took;
            let st = &mut self.states[s];
            st.next_round += u64::from(took);
            if finish {
                st.finished = 1;
                progress[i].finished = true;
            }
        }
        for (s, a) in answers.iter().enumerate() {
            if !member[s] && a.iter().any(|x| matches!(x, Answer::Commit(_))) {
                return Err(fault(format!(
                    "GPU {}: parked stream {s} committed a window",
                    self.device
                )));
            }
        }
        self.device_current = !parked;
        Ok(true)
    }

    /// A member's answers: `skip` rounds refused as repeated (before its next round),
    /// then its commits.
    fn take_answers(
        &mut self,
        answers: &[Answer],
        skip: u64,
        out: &mut Vec<Commit>,
        s: usize,
    ) -> Result<()> {
        for (j, a) in answers.iter().enumerate() {
            match *a {
                Answer::Refused(Refusal::RoundRepeated) if (j as u64) < skip => {}
                Answer::Commit(c) if (j as u64) >= skip => {
                    if c.rounds as u64 == self.commit_rounds
                        && c.first_round == self.states[s].window_start
                    {
                        self.states[s].window_start += self.commit_rounds;
                    }
                    out.push(c);
                }
                other => {
                    return Err(fault(format!(
                        "GPU {}: stream {s} answered {other:?} to a round it expects",
                        self.device
                    )))
                }
            }
        }
        Ok(())
    }
}

impl BatchDecoder for GpuBatchDecoder {
    fn streams(&self) -> usize {
        self.states.len()
    }

    fn decode(
        &mut self,
        work: &[Work],
        commits: &mut Vec<Commit>,
        counts: &mut Vec<u32>,
    ) -> Result<u64> {
        for w in work {
            let Some(st) = self.states.get_mut(w.stream as usize) else {
                return Err(fault(format!("stream {} is not served", w.stream)));
            };
            if w.reset {
                *st = StreamStateDesc::default();
                self.device_current = false;
            }
            if st.next_round != w.first_round && w.rounds > 0 {
                return Err(fault(format!(
                    "stream {} expects round {}, handed round {}",
                    w.stream, st.next_round, w.first_round
                )));
            }
        }
        let mut progress = vec![
            Progress {
                taken: 0,
                finished: false
            };
            work.len()
        ];
        let mut out = vec![Vec::new(); work.len()];
        let mut launches = 0;
        while self.launch(work, &mut progress, &mut out)? {
            launches += 1;
        }
        if !self.device_current && launches == 0 && work.iter().any(|w| w.reset) {
            // Resets alone: write them now, so the device never lags the host.
            self.gpu.set_states(&self.states)?;
            self.device_current = true;
        }
        for c in out {
            counts.push(c.len() as u32);
            commits.extend(c);
        }
        Ok(launches)
    }

    fn describe(&self) -> String {
        format!(
            "GPU {} (every stream's state in device memory; one block of {} threads per \
             stream and launch)",
            self.device, self.threads
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use qfwd_decode::window::StreamSampler;
    use qfwd_decode::Dem;

    fn model() -> Arc<StreamModel> {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/surface_d5_r5_z_p001.dem"
        );
        Arc::new(StreamModel::from_dem(&Dem::from_path(path.as_ref()).unwrap(), 10, 5).unwrap())
    }

    /// Fed in pieces, with a reset between, the stand-in commits what one decoder does.
    #[test]
    fn the_stand_in_commits_what_a_stream_decoder_does() {
        let m = model();
        let mut s = StreamSampler::new(&m, 23, 5).unwrap();
        let rounds: Vec<Vec<u8>> = std::iter::from_fn(|| s.next_round()).collect();
        let mut want = Vec::new();
        let mut d = StreamDecoder::new(&m);
        for (r, ev) in rounds[..23].iter().enumerate() {
            want.extend(d.push_round(r as u64, ev).unwrap());
        }
        want.push(d.finish(&rounds[23]).unwrap());
        let mut b = CpuBatchDecoder::new(&m, 3);
        let (mut got, mut counts) = (Vec::new(), Vec::new());
        let piece = |from: usize, to: usize, finish: bool| Work {
            stream: 2,
            reset: from == 0,
            first_round: from as u64,
            rounds: (to - from) as u32,
            finish,
            events: rounds[from..to + usize::from(finish)].concat(),
        };
        for (from, to, finish) in [(0, 4, false), (0, 12, false), (12, 23, true)] {
            got.clear();
            counts.clear();
            b.decode(&[piece(from, to, finish)], &mut got, &mut counts)
                .unwrap();
            if from == 12 {
                assert_eq!(got, want[1..], "the second half's commits");
                assert_eq!(counts, [want.len() as u32 - 1]);
            }
        }
        let wrong = Work {
            rounds: 1,
            first_round: 7,
            ..piece(0, 1, false)
        };
        let (mut c, mut n) = (Vec::new(), Vec::new());
        assert!(
            b.decode(
                &[Work {
                    reset: false,
                    ..wrong
                }],
                &mut c,
                &mut n
            )
            .is_err(),
            "a round the stream does not expect is a fault"
        );
    }
}
