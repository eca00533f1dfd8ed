//! The persistent kernel's CPU stand-in ([`CpuServeDevice`]): host threads that follow
//! `device/stream.cu` step for step over the same submission buffers (in heap memory),
//! each stream decoded by its own [`StreamDecoder`], so the protocol and the engine's host
//! side run in CI without a GPU. Like the kernel, no block starts a submission before
//! every block finished the one before (a shared count of finished (block, submission)
//! pairs), so a stream's jobs run in submission order.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use qfwd_decode::window::{StreamDecoder, StreamModel};

use super::super::batch::{fault, feed};
use super::{ServeDevice, SUBMISSION_DEADLINE};
use crate::abi::{
    StreamCommitDesc, StreamServeEntryDesc, SERVE_FINISH, SERVE_RESET, STREAM_COMMIT,
    STREAM_ROUNDS_MISSING,
};
use crate::mailbox::streams::{DeviceSide, Poll, Submissions, SubmitLayout};
use crate::shm::SharedRegion;
use crate::Result;

/// Host threads playing the persistent kernel's part: `blocks` threads, each serving
/// jobs `b, b + blocks, ...` of every submission (a job's entries in order) with a
/// [`StreamDecoder`] per stream.
/// Idle threads yield. Stopped (and joined) on drop.
pub struct CpuServeDevice {
    submissions: Submissions,
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
}

impl CpuServeDevice {
    /// `streams` streams served by `blocks` threads; a submission holds `events_bytes`
    /// of events at most.
    pub fn new(
        model: &Arc<StreamModel>,
        streams: usize,
        blocks: u32,
        events_bytes: usize,
    ) -> Result<CpuServeDevice> {
        let layout = SubmitLayout {
            blocks: blocks.max(1),
            max_entries: (2 * streams).max(1) as u32,
            events_bytes,
            commit_slots: (events_bytes / model.round_bytes().max(1)) as u32 + 4 * streams as u32,
        };
        let region = SharedRegion::heap(layout.region_bytes())?;
        let decoders: Arc<Vec<Mutex<StreamDecoder>>> = Arc::new(
            (0..streams)
                .map(|_| Mutex::new(StreamDecoder::new(model)))
                .collect(),
        );
        let stop = Arc::new(AtomicBool::new(false));
        let finished = Arc::new(AtomicU64::new(0));
        let threads = (0..layout.blocks as usize)
            .map(|b| {
                let dev = DeviceSide::new(region.clone(), layout);
                let decoders = Arc::clone(&decoders);
                let (stop, finished) = (Arc::clone(&stop), Arc::clone(&finished));
                let rb = model.round_bytes();
                std::thread::spawn(move || {
                    let block = StandInBlock {
                        dev: &dev,
                        block: b,
                        blocks: layout.blocks,
                        finished: &finished,
                        stop: &stop,
                    };
                    block.serve(&decoders, rb)
                })
            })
            .collect();
        Ok(CpuServeDevice {
            submissions: Submissions::new(region, layout)?,
            stop,
            threads,
        })
    }
}

/// One stand-in block: its index among `blocks`, and the count of (block, submission)
/// pairs served, shared by all, which gates the next submission as the kernel's does.
struct StandInBlock<'a> {
    dev: &'a DeviceSide,
    block: usize,
    blocks: u32,
    finished: &'a AtomicU64,
    stop: &'a AtomicBool,
}

impl StandInBlock<'_> {
    /// The block's loop (the kernel's, step for step).
    fn serve(&self, decoders: &[Mutex<StreamDecoder>], round_bytes: usize) {
        let dev = self.dev;
        let mut served = 0u64;
        let mut events = Vec::new();
        while !self.stop.load(Ordering::Relaxed) {
            // Every block finished the last submission before any starts the next, so a
            // stream's jobs run in submission order.
            if self.finished.load(Ordering::Acquire) < u64::from(self.blocks) * served {
                std::thread::yield_now();
                continue;
            }
            let (seq, jobs, buffer) = match dev.poll(served as u32) {
                Poll::Stop => return,
                Poll::Idle => {
                    std::thread::yield_now();
                    continue;
                }
                Poll::Work { seq, jobs, buffer } => (seq, jobs, buffer),
            };
            for job in (self.block..jobs as usize).step_by(self.blocks as usize) {
                // A job: its head, then each entry's `next`, in order.
                let mut j = job;
                for _ in 0..dev.max_entries() {
                    let e = dev.entry(buffer, j);
                    let count = decoders.get(e.stream as usize).map_or(0, |d| {
                        serve_entry(dev, buffer, &e, d, round_bytes, &mut events)
                    });
                    dev.set_count(buffer, j, count);
                    if e.next as usize >= dev.max_entries() {
                        break;
                    }
                    j = e.next as usize;
                }
            }
            dev.done(buffer, self.block, seq);
            self.finished.fetch_add(1, Ordering::Release);
            served += 1;
        }
    }
}

/// One entry on the stand-in: its answers written, their number returned.
fn serve_entry(
    dev: &DeviceSide,
    buffer: usize,
    e: &StreamServeEntryDesc,
    decoder: &Mutex<StreamDecoder>,
    round_bytes: usize,
    events: &mut Vec<u8>,
) -> u32 {
    let mut d = decoder.lock().unwrap_or_else(|p| p.into_inner());
    let finish = e.flags & SERVE_FINISH != 0;
    let inputs = e.rounds as usize + usize::from(finish);
    events.resize(inputs * round_bytes, 0);
    dev.events(buffer, e.events_offset as usize, events);
    let piece = (e.flags & SERVE_RESET != 0, e.first_round, e.rounds);
    let mut count = 0u32;
    // The kernel answers a refusal with its status and goes on; so does the stand-in.
    feed(&mut d, piece, finish, events, |a| {
        let desc = match a {
            Ok(c) => StreamCommitDesc {
                first_round: c.first_round,
                flips: c.flips,
                rounds: c.rounds,
                status: STREAM_COMMIT,
            },
            Err(_) => StreamCommitDesc {
                status: STREAM_ROUNDS_MISSING,
                ..Default::default()
            },
        };
        if count < e.commit_capacity {
            dev.write_commit(buffer, e.commit_offset as usize + count as usize, &desc);
        }
        count += 1;
        true
    });
    count
}

impl ServeDevice for CpuServeDevice {
    fn submissions(&mut self) -> &mut Submissions {
        &mut self.submissions
    }
    fn wait(&mut self) -> Result<()> {
        let start = std::time::Instant::now();
        while !self.submissions.finished() {
            if start.elapsed() > SUBMISSION_DEADLINE {
                return Err(fault("the CPU serve device did not answer in time".into()));
            }
            std::thread::yield_now();
        }
        Ok(())
    }
    fn describe(&self) -> String {
        format!(
            "the CPU stand-in of the persistent kernel ({} host threads)",
            self.threads.len()
        )
    }
}

impl Drop for CpuServeDevice {
    fn drop(&mut self) {
        self.submissions.stop();
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}
