//! The persistent stream kernel's submission block: how the host hands a batch of stream
//! work to a device side that keeps every stream's state, and reads the answers back.
//!
//! One shared region holds a control block (submission number, stop, entry count), one
//! done word per device block, the entries ([`StreamServeEntryDesc`]), the events, the
//! commit slots ([`StreamCommitDesc`]) and one count per entry ([`SubmitLayout`]). The host
//! ([`Submissions`]) writes a submission's entries and events, then its number (Release);
//! the device blocks share the jobs out among themselves (a job is one stream's entries,
//! served in order: the kernel's block `b` takes job `b`, then claims the next from a
//! counter; the stand-in's takes `b, b + blocks, ...`), write answers and counts, then
//! each block the number into its done word. The host reads the answers once every done
//! word holds the number. `device/stream.cu` is the GPU's side; [`DeviceSide`] gives the
//! same steps to a CPU stand-in, so the protocol runs in CI without a GPU.
//!
//! Capacities are fixed when the block is laid out; [`SubmitLayout::fits`] says whether a
//! submission fits, and callers split larger ones.

use std::sync::atomic::Ordering;

use crate::abi::{
    StreamCommitDesc, StreamServeEntryDesc, SERVE_CONTROL_BYTES, SERVE_ENTRIES_WORD,
    SERVE_JOBS_WORD, SERVE_NO_NEXT, SERVE_SEQ_WORD, SERVE_STOP_WORD,
};
use crate::shm::SharedRegion;
use crate::{Error, Result};

const ENTRY_BYTES: usize = std::mem::size_of::<StreamServeEntryDesc>();
const COMMIT_BYTES: usize = std::mem::size_of::<StreamCommitDesc>();

/// Where everything sits in the submission block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SubmitLayout {
    /// Device blocks, one done word each.
    pub blocks: u32,
    /// Entries per submission, event bytes, commit slots.
    pub max_entries: u32,
    pub events_bytes: usize,
    pub commit_slots: u32,
}

impl SubmitLayout {
    pub fn done(&self) -> usize {
        SERVE_CONTROL_BYTES as usize
    }
    pub fn entries(&self) -> usize {
        (self.done() + 4 * self.blocks as usize).next_multiple_of(64)
    }
    pub fn events(&self) -> usize {
        (self.entries() + ENTRY_BYTES * self.max_entries as usize).next_multiple_of(64)
    }
    pub fn commits(&self) -> usize {
        // Four spare bytes: the device copies events in whole words.
        (self.events() + self.events_bytes + 4).next_multiple_of(64)
    }
    pub fn counts(&self) -> usize {
        (self.commits() + COMMIT_BYTES * self.commit_slots as usize).next_multiple_of(64)
    }
    pub fn total_bytes(&self) -> usize {
        (self.counts() + 4 * self.max_entries as usize).next_multiple_of(64)
    }

    /// Whether `entries` entries holding `events` event bytes (their 4-byte alignment
    /// included) and `commits` commit slots fit in one submission.
    pub fn fits(&self, entries: usize, events: usize, commits: usize) -> bool {
        entries <= self.max_entries as usize
            && events <= self.events_bytes
            && commits <= self.commit_slots as usize
    }
}

fn layout_error(detail: String) -> Error {
    Error::InvalidSetting {
        key: "stream submissions",
        detail,
    }
}

/// The host's side: submit, wait for, read.
#[derive(Debug)]
pub struct Submissions {
    region: SharedRegion,
    layout: SubmitLayout,
    seq: u32,
    entries: u32,
    /// Where each entry of the last submission was written.
    slot: Vec<u32>,
}

impl Submissions {
    /// The block over `region` (zeroed, at least `layout.total_bytes()` long).
    pub fn new(region: SharedRegion, layout: SubmitLayout) -> Result<Submissions> {
        if region.len() < layout.total_bytes() || layout.blocks == 0 || layout.max_entries == 0 {
            return Err(layout_error(format!(
                "{} bytes for {layout:?}, which needs {} and at least one block and entry",
                region.len(),
                layout.total_bytes()
            )));
        }
        Ok(Submissions {
            region,
            layout,
            seq: 0,
            entries: 0,
            slot: Vec::new(),
        })
    }

    pub fn layout(&self) -> &SubmitLayout {
        &self.layout
    }

    /// Writes `entries`, the jobs (each job's first entry, ascending from 0: a job is
    /// one stream's entries, served in order) and the `events` the entries point into,
    /// then rings. Everything must lie within the capacities ([`SubmitLayout::fits`]): a
    /// fault otherwise.
    pub fn submit(
        &mut self,
        entries: &[StreamServeEntryDesc],
        jobs: &[u32],
        events: &[u8],
    ) -> Result<u32> {
        let l = self.layout;
        let commits = entries
            .iter()
            .map(|e| e.commit_offset as usize + e.commit_capacity as usize)
            .max()
            .unwrap_or(0);
        let events_in = entries
            .iter()
            .all(|e| e.events_offset % 4 == 0 && (e.events_offset as usize) <= events.len());
        let jobs_in = jobs.first().is_none_or(|&j| j == 0)
            && jobs.windows(2).all(|w| w[0] < w[1])
            && jobs.last().is_none_or(|&j| (j as usize) < entries.len())
            && (jobs.is_empty() == entries.is_empty());
        if !l.fits(entries.len(), events.len(), commits) || !events_in || !jobs_in {
            return Err(layout_error(format!(
                "a submission of {} entries in {} jobs, {} event bytes and {commits} commit \
                 slots does not fit {l:?} (or its events or jobs are misplaced)",
                entries.len(),
                jobs.len(),
                events.len()
            )));
        }
        // Counts are not cleared: the device writes every entry's count.
        // Job heads first (entry j begins job j), the other entries after them, each
        // linked from the one before it in its job.
        self.slot.clear();
        self.slot.resize(entries.len(), u32::MAX);
        for (j, &first) in jobs.iter().enumerate() {
            self.slot[first as usize] = j as u32;
        }
        let rest = self.slot.iter_mut().filter(|s| **s == u32::MAX);
        for (at, s) in (jobs.len() as u32..).zip(rest) {
            *s = at;
        }
        for (i, e) in entries.iter().enumerate() {
            let next = match self.slot.get(i + 1) {
                Some(&s) if s >= jobs.len() as u32 => s,
                _ => SERVE_NO_NEXT,
            };
            let at = l.entries() + self.slot[i] as usize * ENTRY_BYTES;
            write_entry(&self.region, at, &StreamServeEntryDesc { next, ..*e });
        }
        self.region.write(l.events(), events);
        self.seq = self.seq.wrapping_add(1).max(1);
        self.entries = entries.len() as u32;
        self.region.store_u32(
            4 * SERVE_ENTRIES_WORD as usize,
            self.entries,
            Ordering::Relaxed,
        );
        self.region.store_u32(
            4 * SERVE_JOBS_WORD as usize,
            jobs.len() as u32,
            Ordering::Relaxed,
        );
        self.region
            .store_u32(4 * SERVE_SEQ_WORD as usize, self.seq, Ordering::Release);
        Ok(self.seq)
    }

    /// Whether every block has served the last submission.
    pub fn finished(&self) -> bool {
        (0..self.layout.blocks as usize).all(|b| {
            self.region
                .load_u32(self.layout.done() + 4 * b, Ordering::Acquire)
                == self.seq
        })
    }

    /// Answers entry `i` of the last submission gave (read once [`Submissions::finished`]).
    pub fn count(&self, i: usize) -> u32 {
        let slot = self.slot.get(i).copied().unwrap_or(u32::MAX) as usize;
        if slot >= self.layout.max_entries as usize {
            return 0;
        }
        self.region
            .load_u32(self.layout.counts() + 4 * slot, Ordering::Relaxed)
    }

    /// Commit slot `slot`.
    pub fn commit(&self, slot: usize) -> StreamCommitDesc {
        read_commit(&self.region, self.layout.commits() + slot * COMMIT_BYTES)
    }

    /// Asks every block to stop (it does once idle).
    pub fn stop(&self) {
        self.region
            .store_u32(4 * SERVE_STOP_WORD as usize, 1, Ordering::Release);
    }
}

fn write_entry(r: &SharedRegion, at: usize, e: &StreamServeEntryDesc) {
    let o = Ordering::Relaxed;
    r.store_u64(at, e.first_round, o);
    r.store_u64(at + 8, u64::from(e.stream) | u64::from(e.flags) << 32, o);
    r.store_u64(
        at + 16,
        u64::from(e.rounds) | u64::from(e.events_offset) << 32,
        o,
    );
    r.store_u64(
        at + 24,
        u64::from(e.commit_offset) | u64::from(e.commit_capacity) << 32,
        o,
    );
    r.store_u64(at + 32, u64::from(e.next) | u64::from(e.reserved) << 32, o);
}

fn read_commit(r: &SharedRegion, at: usize) -> StreamCommitDesc {
    StreamCommitDesc {
        first_round: r.load_u64(at, Ordering::Relaxed),
        flips: r.load_u64(at + 8, Ordering::Relaxed),
        rounds: r.load_u32(at + 16, Ordering::Relaxed),
        status: r.load_u32(at + 20, Ordering::Relaxed) as i32,
    }
}

/// What a device block found in the control block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Poll {
    Stop,
    Idle,
    /// Submission `seq`, of `jobs` jobs.
    Work {
        seq: u32,
        jobs: u32,
    },
}

/// The device's side of the same block, for a CPU stand-in.
#[derive(Debug, Clone)]
pub struct DeviceSide {
    region: SharedRegion,
    layout: SubmitLayout,
}

impl DeviceSide {
    pub fn new(region: SharedRegion, layout: SubmitLayout) -> DeviceSide {
        DeviceSide { region, layout }
    }

    /// The control block, for a block that served submission `seen` last.
    pub fn poll(&self, seen: u32) -> Poll {
        if self
            .region
            .load_u32(4 * SERVE_STOP_WORD as usize, Ordering::Acquire)
            != 0
        {
            return Poll::Stop;
        }
        let seq = self
            .region
            .load_u32(4 * SERVE_SEQ_WORD as usize, Ordering::Acquire);
        if seq == seen {
            return Poll::Idle;
        }
        let jobs = self
            .region
            .load_u32(4 * SERVE_JOBS_WORD as usize, Ordering::Relaxed)
            .min(self.layout.max_entries);
        Poll::Work { seq, jobs }
    }

    pub fn max_entries(&self) -> usize {
        self.layout.max_entries as usize
    }

    /// Entry `i` (the first `jobs` begin the jobs; each names the next of its job).
    pub fn entry(&self, i: usize) -> StreamServeEntryDesc {
        let r = &self.region;
        let at = self.layout.entries() + i * ENTRY_BYTES;
        let w = |k: usize| r.load_u32(at + 8 + 4 * k, Ordering::Relaxed);
        StreamServeEntryDesc {
            first_round: r.load_u64(at, Ordering::Relaxed),
            stream: w(0),
            flags: w(1),
            rounds: w(2),
            events_offset: w(3),
            commit_offset: w(4),
            commit_capacity: w(5),
            next: w(6),
            reserved: w(7),
        }
    }

    /// `out.len()` event bytes from `offset`.
    pub fn events(&self, offset: usize, out: &mut [u8]) {
        let end = offset
            .saturating_add(out.len())
            .min(self.layout.events_bytes);
        let len = end.saturating_sub(offset);
        self.region
            .read(self.layout.events() + offset, &mut out[..len]);
    }

    pub fn write_commit(&self, slot: usize, c: &StreamCommitDesc) {
        if slot < self.layout.commit_slots as usize {
            let at = self.layout.commits() + slot * COMMIT_BYTES;
            self.region.write(at, &c.to_bytes());
        }
    }

    pub fn set_count(&self, i: usize, count: u32) {
        self.region
            .store_u32(self.layout.counts() + 4 * i, count, Ordering::Relaxed);
    }

    /// Announces that block `block` served submission `seq`.
    pub fn done(&self, block: usize, seq: u32) {
        self.region
            .store_u32(self.layout.done() + 4 * block, seq, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout() -> SubmitLayout {
        SubmitLayout {
            blocks: 3,
            max_entries: 4,
            events_bytes: 100,
            commit_slots: 10,
        }
    }

    #[test]
    fn areas_follow_each_other_aligned() {
        let l = layout();
        let areas = [l.done(), l.entries(), l.events(), l.commits(), l.counts()];
        assert!(areas.windows(2).all(|w| w[0] < w[1]));
        assert!(areas[1..].iter().all(|a| a % 64 == 0));
        assert!(l.total_bytes() >= l.counts() + 16);
    }

    #[test]
    fn a_submission_reaches_the_device_side_and_back() {
        let l = layout();
        let region = SharedRegion::heap(l.total_bytes()).unwrap();
        let mut host = Submissions::new(region.clone(), l).unwrap();
        let dev = DeviceSide::new(region, l);
        assert_eq!(dev.poll(0), Poll::Idle);
        let e = StreamServeEntryDesc {
            first_round: 7,
            stream: 2,
            // Every field distinct: a swapped pair would show.
            flags: 3,
            rounds: 5,
            events_offset: 4,
            commit_offset: 1,
            commit_capacity: 6,
            next: 0,
            reserved: 0,
        };
        let events: Vec<u8> = (0..20).collect();
        // Two jobs of two entries: the heads go first, each linked to its second.
        let at = |stream| StreamServeEntryDesc { stream, ..e };
        let seq = host
            .submit(&[at(1), at(2), at(3), at(4)], &[0, 2], &events)
            .unwrap();
        assert_eq!(dev.poll(0), Poll::Work { seq, jobs: 2 });
        assert_eq!(dev.poll(seq), Poll::Idle);
        let linked = |stream, next| StreamServeEntryDesc { next, ..at(stream) };
        assert_eq!(dev.entry(0), linked(1, 2));
        assert_eq!(dev.entry(1), linked(3, 3));
        assert_eq!(dev.entry(2), linked(2, SERVE_NO_NEXT));
        assert_eq!(dev.entry(3), linked(4, SERVE_NO_NEXT));
        let mut raw = vec![0u8; ENTRY_BYTES];
        host.region.read(l.entries() + ENTRY_BYTES, &mut raw);
        assert_eq!(
            raw,
            linked(3, 3).to_bytes(),
            "the entry as the device's struct lays it out"
        );
        let mut ev = [0u8; 6];
        dev.events(4, &mut ev);
        assert_eq!(ev, [4, 5, 6, 7, 8, 9]);
        let c = StreamCommitDesc {
            first_round: 7,
            flips: 0xdead_beef_0000_0001,
            rounds: 5,
            status: -2,
        };
        dev.write_commit(3, &c);
        // Slot 2 holds entry 1.
        dev.set_count(2, 9);
        for b in 0..2 {
            dev.done(b, seq);
        }
        assert!(!host.finished(), "block 2 has not answered");
        dev.done(2, seq);
        assert!(host.finished());
        assert_eq!((host.count(0), host.count(1)), (0, 9));
        assert_eq!(host.commit(3), c);
        host.stop();
        assert_eq!(dev.poll(seq), Poll::Stop);
    }

    #[test]
    fn submissions_beyond_the_capacities_are_refused() {
        let l = layout();
        let mut host = Submissions::new(SharedRegion::heap(l.total_bytes()).unwrap(), l).unwrap();
        let e = StreamServeEntryDesc {
            commit_capacity: 11,
            ..Default::default()
        };
        assert!(host.submit(&[e], &[0], &[]).is_err());
        let e = StreamServeEntryDesc::default();
        assert!(host.submit(&[e; 5], &[0], &[]).is_err());
        assert!(host.submit(&[e], &[0], &[0; 101]).is_err());
        let odd = StreamServeEntryDesc {
            events_offset: 2,
            ..Default::default()
        };
        assert!(host.submit(&[odd], &[0], &[0; 8]).is_err());
        for jobs in [&[][..], &[1], &[0, 0], &[0, 4], &[0, 2, 1]] {
            assert!(host.submit(&[e; 4], jobs, &[]).is_err(), "{jobs:?}");
        }
        assert!(host.submit(&[e; 4], &[0, 1, 3], &[0; 100]).is_ok());
        let big = SubmitLayout {
            events_bytes: 1 << 16,
            ..l
        };
        let small = SharedRegion::heap(4096).unwrap();
        assert!(Submissions::new(small, big).is_err(), "a region too small");
    }
}
