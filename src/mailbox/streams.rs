//! The persistent stream kernel's submission buffers: how the host hands a batch of
//! stream work to a device side that keeps every stream's state, and reads the answers
//! back.
//!
//! A buffer holds a control block (submission number, stop, entry count), one done word
//! per device block, the entries ([`StreamServeEntryDesc`]), the events, the commit slots
//! ([`StreamCommitDesc`]) and one count per entry ([`SubmitLayout`]). There are two
//! ([`SERVE_BUFFERS`]), filled in turn, so the host writes the next submission while the
//! device serves one. The host ([`Submissions`]) writes a submission's entries and
//! events, then its number n (Release; submission n is in buffer (n - 1) % 2); the device
//! blocks share the jobs out among themselves (a job is one stream's entries, served in
//! order: the kernel's block `b` takes job `b`, then claims the next from a counter; the
//! stand-in's takes `b, b + blocks, ...`), write answers and counts, then each block the
//! number into its done word. No block starts submission n + 1 before every block
//! finished n, so a stream's jobs run in submission order. The host reads the answers
//! once every done word holds the number, then releases the buffer. `device/stream.cu` is
//! the GPU's side; [`DeviceSide`] gives the same steps to a CPU stand-in, so the protocol
//! runs in CI without a GPU.
//!
//! Capacities are fixed when the block is laid out; [`SubmitLayout::fits`] says whether a
//! submission fits, and callers split larger ones.

use std::sync::atomic::Ordering;

use crate::abi::{
    StreamCommitDesc, StreamServeEntryDesc, SERVE_BUFFERS, SERVE_CONTROL_BYTES, SERVE_ENTRIES_WORD,
    SERVE_JOBS_WORD, SERVE_NO_NEXT, SERVE_SEQ_WORD, SERVE_STOP_WORD,
};
use crate::shm::SharedRegion;
use crate::{Error, Result};

const ENTRY_BYTES: usize = std::mem::size_of::<StreamServeEntryDesc>();
const COMMIT_BYTES: usize = std::mem::size_of::<StreamCommitDesc>();

/// Where everything sits in one submission buffer.
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
    /// Bytes of one buffer.
    pub fn total_bytes(&self) -> usize {
        (self.counts() + 4 * self.max_entries as usize).next_multiple_of(64)
    }
    /// Bytes of all [`SERVE_BUFFERS`] buffers, one after the other.
    pub fn region_bytes(&self) -> usize {
        self.total_bytes() * BUFFERS
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

/// The host's side: submit, wait for, read. Two buffers ([`SERVE_BUFFERS`]), filled in
/// turn: a submission may be written while the device serves the one before it. Answers
/// are read oldest first, and [`Submissions::release`] frees the oldest's buffer.
#[derive(Debug)]
pub struct Submissions {
    region: SharedRegion,
    layout: SubmitLayout,
    /// Submissions written and submissions released, counted from 0 (wrapping): those in
    /// flight are the difference, the oldest in buffer `released % SERVE_BUFFERS`.
    posted: u32,
    released: u32,
    /// Per buffer: where each entry of its submission was written.
    slot: [Vec<u32>; BUFFERS],
}

const BUFFERS: usize = SERVE_BUFFERS as usize;

impl Submissions {
    /// The buffers over `region` (zeroed, at least `layout.region_bytes()` long).
    pub fn new(region: SharedRegion, layout: SubmitLayout) -> Result<Submissions> {
        if region.len() < layout.region_bytes() || layout.blocks == 0 || layout.max_entries == 0 {
            return Err(layout_error(format!(
                "{} bytes for {layout:?}, which needs {} and at least one block and entry",
                region.len(),
                layout.region_bytes()
            )));
        }
        Ok(Submissions {
            region,
            layout,
            posted: 0,
            released: 0,
            slot: Default::default(),
        })
    }

    pub fn layout(&self) -> &SubmitLayout {
        &self.layout
    }

    /// Submissions written and not yet released (at most [`SERVE_BUFFERS`]).
    pub fn in_flight(&self) -> u32 {
        self.posted.wrapping_sub(self.released)
    }

    /// Writes `entries`, the jobs (each job's first entry, ascending from 0: a job is
    /// one stream's entries, served in order) and the `events` the entries point into
    /// into the next buffer, then rings. Everything must lie within the capacities
    /// ([`SubmitLayout::fits`]), and a buffer must be free (fewer than
    /// [`SERVE_BUFFERS`] in flight): a fault otherwise.
    pub fn submit(
        &mut self,
        entries: &[StreamServeEntryDesc],
        jobs: &[u32],
        events: &[u8],
    ) -> Result<u32> {
        let l = self.layout;
        check_submission(&l, entries, jobs, events)?;
        if self.in_flight() as usize >= BUFFERS {
            return Err(layout_error(format!(
                "{BUFFERS} submissions in flight: the oldest must be read and released first"
            )));
        }
        let buffer = self.posted as usize % BUFFERS;
        let base = buffer * l.total_bytes();
        // Counts are not cleared: the device writes every entry's count.
        // Job heads first (entry j begins job j), the other entries after them, each
        // linked from the one before it in its job.
        let slot = &mut self.slot[buffer];
        slot.clear();
        slot.resize(entries.len(), u32::MAX);
        for (j, &first) in jobs.iter().enumerate() {
            slot[first as usize] = j as u32;
        }
        let rest = slot.iter_mut().filter(|s| **s == u32::MAX);
        for (at, s) in (jobs.len() as u32..).zip(rest) {
            *s = at;
        }
        for (i, e) in entries.iter().enumerate() {
            let next = match slot.get(i + 1) {
                Some(&s) if s >= jobs.len() as u32 => s,
                _ => SERVE_NO_NEXT,
            };
            let at = base + l.entries() + slot[i] as usize * ENTRY_BYTES;
            write_entry(&self.region, at, &StreamServeEntryDesc { next, ..*e });
        }
        self.region.write(base + l.events(), events);
        self.posted = self.posted.wrapping_add(1);
        let r = &self.region;
        r.store_u32(
            base + 4 * SERVE_ENTRIES_WORD as usize,
            entries.len() as u32,
            Ordering::Relaxed,
        );
        let jobs_word = base + 4 * SERVE_JOBS_WORD as usize;
        r.store_u32(jobs_word, jobs.len() as u32, Ordering::Relaxed);
        r.store_u32(
            base + 4 * SERVE_SEQ_WORD as usize,
            self.posted,
            Ordering::Release,
        );
        Ok(self.posted)
    }

    /// The oldest submission in flight: its buffer's offset, its number.
    fn oldest(&self) -> (usize, u32) {
        let buffer = self.released as usize % BUFFERS;
        (
            buffer * self.layout.total_bytes(),
            self.released.wrapping_add(1),
        )
    }

    /// Whether every block has served the oldest submission in flight (true when none
    /// is).
    pub fn finished(&self) -> bool {
        if self.in_flight() == 0 {
            return true;
        }
        let (base, seq) = self.oldest();
        (0..self.layout.blocks as usize).all(|b| {
            self.region
                .load_u32(base + self.layout.done() + 4 * b, Ordering::Acquire)
                == seq
        })
    }

    /// Answers entry `i` of the oldest submission gave (read once
    /// [`Submissions::finished`]).
    pub fn count(&self, i: usize) -> u32 {
        let (base, _) = self.oldest();
        let buffer = self.released as usize % BUFFERS;
        let slot = self.slot[buffer].get(i).copied().unwrap_or(u32::MAX) as usize;
        if slot >= self.layout.max_entries as usize {
            return 0;
        }
        self.region
            .load_u32(base + self.layout.counts() + 4 * slot, Ordering::Relaxed)
    }

    /// Commit slot `slot` of the oldest submission.
    pub fn commit(&self, slot: usize) -> StreamCommitDesc {
        let (base, _) = self.oldest();
        read_commit(
            &self.region,
            base + self.layout.commits() + slot * COMMIT_BYTES,
        )
    }

    /// Frees the oldest submission's buffer, once its answers are read.
    pub fn release(&mut self) {
        if self.in_flight() > 0 {
            self.released = self.released.wrapping_add(1);
        }
    }

    /// Asks every block to stop (it does once idle).
    pub fn stop(&self) {
        for b in 0..BUFFERS {
            let at = b * self.layout.total_bytes() + 4 * SERVE_STOP_WORD as usize;
            self.region.store_u32(at, 1, Ordering::Release);
        }
    }
}

/// A fault unless `entries`, `jobs` and `events` fit the layout and point within it.
fn check_submission(
    l: &SubmitLayout,
    entries: &[StreamServeEntryDesc],
    jobs: &[u32],
    events: &[u8],
) -> Result<()> {
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
    Ok(())
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

/// What a device block found in the control block of the buffer it serves next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Poll {
    Stop,
    Idle,
    /// Submission `seq`, of `jobs` jobs, in buffer `buffer`.
    Work {
        seq: u32,
        jobs: u32,
        buffer: usize,
    },
}

/// The device's side of the same buffers, for a CPU stand-in.
#[derive(Debug, Clone)]
pub struct DeviceSide {
    region: SharedRegion,
    layout: SubmitLayout,
}

impl DeviceSide {
    pub fn new(region: SharedRegion, layout: SubmitLayout) -> DeviceSide {
        DeviceSide { region, layout }
    }

    /// The control block of the next submission, for a block that served `served`
    /// submissions: submission `served + 1`, in buffer `served % SERVE_BUFFERS`.
    pub fn poll(&self, served: u32) -> Poll {
        let buffer = served as usize % BUFFERS;
        let base = buffer * self.layout.total_bytes();
        let word = |w: u32, o| self.region.load_u32(base + 4 * w as usize, o);
        if word(SERVE_STOP_WORD, Ordering::Acquire) != 0 {
            return Poll::Stop;
        }
        let seq = word(SERVE_SEQ_WORD, Ordering::Acquire);
        if seq != served.wrapping_add(1) {
            return Poll::Idle;
        }
        let jobs = word(SERVE_JOBS_WORD, Ordering::Relaxed).min(self.layout.max_entries);
        Poll::Work { seq, jobs, buffer }
    }

    pub fn max_entries(&self) -> usize {
        self.layout.max_entries as usize
    }

    fn base(&self, buffer: usize) -> usize {
        (buffer % BUFFERS) * self.layout.total_bytes()
    }

    /// Entry `i` of buffer `buffer` (the first `jobs` begin the jobs; each names the
    /// next of its job).
    pub fn entry(&self, buffer: usize, i: usize) -> StreamServeEntryDesc {
        let r = &self.region;
        let at = self.base(buffer) + self.layout.entries() + i * ENTRY_BYTES;
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

    /// `out.len()` event bytes of buffer `buffer` from `offset`.
    pub fn events(&self, buffer: usize, offset: usize, out: &mut [u8]) {
        let end = offset
            .saturating_add(out.len())
            .min(self.layout.events_bytes);
        let len = end.saturating_sub(offset);
        let at = self.base(buffer) + self.layout.events() + offset;
        self.region.read(at, &mut out[..len]);
    }

    pub fn write_commit(&self, buffer: usize, slot: usize, c: &StreamCommitDesc) {
        if slot < self.layout.commit_slots as usize {
            let at = self.base(buffer) + self.layout.commits() + slot * COMMIT_BYTES;
            self.region.write(at, &c.to_bytes());
        }
    }

    pub fn set_count(&self, buffer: usize, i: usize, count: u32) {
        let at = self.base(buffer) + self.layout.counts() + 4 * i;
        self.region.store_u32(at, count, Ordering::Relaxed);
    }

    /// Announces that block `block` served submission `seq` of buffer `buffer`.
    pub fn done(&self, buffer: usize, block: usize, seq: u32) {
        let at = self.base(buffer) + self.layout.done() + 4 * block;
        self.region.store_u32(at, seq, Ordering::Release);
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
        let region = SharedRegion::heap(l.region_bytes()).unwrap();
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
        assert_eq!(
            dev.poll(0),
            Poll::Work {
                seq,
                jobs: 2,
                buffer: 0
            }
        );
        assert_eq!(dev.poll(1), Poll::Idle);
        let linked = |stream, next| StreamServeEntryDesc { next, ..at(stream) };
        assert_eq!(dev.entry(0, 0), linked(1, 2));
        assert_eq!(dev.entry(0, 1), linked(3, 3));
        assert_eq!(dev.entry(0, 2), linked(2, SERVE_NO_NEXT));
        assert_eq!(dev.entry(0, 3), linked(4, SERVE_NO_NEXT));
        let mut raw = vec![0u8; ENTRY_BYTES];
        host.region.read(l.entries() + ENTRY_BYTES, &mut raw);
        assert_eq!(
            raw,
            linked(3, 3).to_bytes(),
            "the entry as the device's struct lays it out"
        );
        let mut ev = [0u8; 6];
        dev.events(0, 4, &mut ev);
        assert_eq!(ev, [4, 5, 6, 7, 8, 9]);
        let c = StreamCommitDesc {
            first_round: 7,
            flips: 0xdead_beef_0000_0001,
            rounds: 5,
            status: -2,
        };
        dev.write_commit(0, 3, &c);
        // Slot 2 holds entry 1.
        dev.set_count(0, 2, 9);
        for b in 0..2 {
            dev.done(0, b, seq);
        }
        assert!(!host.finished(), "block 2 has not answered");
        dev.done(0, 2, seq);
        assert!(host.finished());
        assert_eq!((host.count(0), host.count(1)), (0, 9));
        assert_eq!(host.commit(3), c);
        host.release();
        assert_eq!(host.in_flight(), 0);
        host.stop();
        assert_eq!(dev.poll(1), Poll::Stop);
    }

    #[test]
    fn two_submissions_fly_and_are_read_oldest_first() {
        let l = layout();
        let region = SharedRegion::heap(l.region_bytes()).unwrap();
        let mut host = Submissions::new(region.clone(), l).unwrap();
        let dev = DeviceSide::new(region, l);
        let e = |stream| StreamServeEntryDesc {
            stream,
            commit_capacity: 1,
            ..Default::default()
        };
        let commit = |flips| StreamCommitDesc {
            flips,
            status: 1,
            ..Default::default()
        };
        assert_eq!(host.submit(&[e(5)], &[0], &[]).unwrap(), 1);
        assert_eq!(host.submit(&[e(6)], &[0], &[]).unwrap(), 2);
        assert!(
            host.submit(&[e(7)], &[0], &[]).is_err(),
            "both buffers are in flight"
        );
        // The device serves them in order, each from its own buffer.
        for (served, stream) in [(0u32, 5), (1, 6)] {
            let Poll::Work { seq, buffer, .. } = dev.poll(served) else {
                panic!("submission {} not found", served + 1);
            };
            assert_eq!((seq, buffer), (served + 1, served as usize));
            assert_eq!(dev.entry(buffer, 0).stream, stream);
            dev.write_commit(buffer, 0, &commit(u64::from(stream)));
            dev.set_count(buffer, 0, 1);
            assert_eq!(host.finished(), served == 1, "the oldest is submission 1");
            (0..3).for_each(|b| dev.done(buffer, b, seq));
        }
        assert_eq!(dev.poll(2), Poll::Idle, "submission 3 is not written");
        for stream in [5, 6] {
            assert!(host.finished());
            assert_eq!(host.count(0), 1);
            assert_eq!(host.commit(0).flips, stream);
            host.release();
        }
        assert!(host.finished(), "nothing in flight");
        // Buffer 0 again: submission 3.
        assert_eq!(host.submit(&[e(7)], &[0], &[]).unwrap(), 3);
        assert!(matches!(
            dev.poll(2),
            Poll::Work {
                seq: 3,
                buffer: 0,
                ..
            }
        ));
        assert!(!host.finished());
    }

    #[test]
    fn submissions_beyond_the_capacities_are_refused() {
        let l = layout();
        let mut host = Submissions::new(SharedRegion::heap(l.region_bytes()).unwrap(), l).unwrap();
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
        assert_eq!(host.in_flight(), 1, "the refused ones took no buffer");
        let big = SubmitLayout {
            events_bytes: 1 << 16,
            ..l
        };
        let small = SharedRegion::heap(4096).unwrap();
        assert!(Submissions::new(small, big).is_err(), "a region too small");
    }
}
