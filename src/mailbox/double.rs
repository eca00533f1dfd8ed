//! The CPU test double of the device side: host threads that follow the persistent
//! kernel's slot protocol exactly, on the same memory layout, so CI tests the protocol
//! (tags, wrap-around, torn writes, claims, stop sentinel, stall control) without a GPU.
//!
//! Each poller thread plays one warp of `qfwd_persistent` (device/forward.cu), step for
//! step. Pollers form `pollers / pollers_per_slot` groups; group g serves sequence numbers
//! g, g + G, ... and keeps a ticket (requests it claimed). A poller reads chunk 0 of its
//! group's next slot; stops on the sentinel; follows the ticket if another poller of the
//! group moved it; in inline mode reads the whole request and accepts it only when every
//! chunk carries the tag, runs a side-effect-free handler, and claims it with a
//! compare-and-swap on the ticket (the kernel overlaps the two), dropping the result if the
//! claim is lost; in buffer mode claims on the flag, then reads the payload and runs the
//! handler; publishes the response as tagged chunks. The tickets live in the double's own
//! memory, as the kernel's live in device memory, not in the region. (The kernel skips the
//! CAS in a group of one warp; the double always does it, uncontended there, so tests can
//! read the tickets.) Idle pollers yield (CI machines have two cores).
//!
//! With a soft NIC's send queue ([`CpuDouble::start_with_nic`], the GPU-initiated doorbell
//! path), requests carry their wire identity (a reply layout) and a poller sends each
//! response itself, as the kernel's `device_answer` does: it builds the CUQS datagram,
//! posts it as a SEND with the configured doorbell (the Rust poster, one poller at a time
//! as the kernel's posting lock makes its warps do), and publishes a one-chunk "already
//! sent" completion; when it cannot (identity unknown, no room in time), it publishes the
//! response for the host to send.
//!
//! With decoders ([`CpuDouble::start_with_decoders`]) the pollers answer the decoder device
//! codes (lut 2, uf 3) with the CPU decoders, which give the GPU decoders' answers: CI
//! exercises the protocol with decoder payloads (`tests/decode_double.rs`).
#![forbid(unsafe_code)]

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_utils::CachePadded;

use super::backend::{MailboxDevice, PollerCounters};
use super::layout::{device_code, tag_for, Layout, HEADER_BYTES, MAX_STALL_US, STOP_TAG};
use super::protocol::{self, RequestRead};
use super::RxCompletion;
use crate::backend::Topology;
use crate::decode::{Decoder, DecoderKind};
use crate::handler;
use crate::queues::{DevicePostCounters, DevicePosting, SendQueue};
use crate::shm::SharedRegion;
use crate::wire::status;
use crate::{Error, Result};

/// Per group, the claim ticket: how many of the group's requests were claimed.
struct Tickets {
    groups: Box<[CachePadded<AtomicU64>]>,
}

/// The soft NIC's send queue, as the double's pollers share it (the kernel's posting
/// block and lock).
struct DoubleNic {
    sq: Mutex<SendQueue>,
    posted: AtomicU64,
    fallbacks: AtomicU64,
}

impl DoubleNic {
    /// Posts `datagram`, running `publish` (the completion) after the WQE and before the
    /// doorbell, as the kernel does; false when it could not (nothing written, `publish`
    /// not run: the caller publishes the response for the host).
    fn send(&self, datagram: &[u8], publish: impl FnOnce()) -> bool {
        let mut sq = self.sq.lock().unwrap_or_else(|p| p.into_inner());
        match sq.post_send_notify(datagram, publish) {
            Ok(()) => {
                self.posted.fetch_add(1, Ordering::Relaxed);
                true
            }
            Err(_) => {
                self.fallbacks.fetch_add(1, Ordering::Relaxed);
                false
            }
        }
    }
}

/// The decoder models the double serves (at most one per kind, as the kernel's).
#[derive(Default)]
struct DoubleDecoders {
    lut: Option<Arc<Decoder>>,
    uf: Option<Arc<Decoder>>,
}

impl DoubleDecoders {
    fn new(decoders: &[Arc<Decoder>]) -> Result<DoubleDecoders> {
        let mut d = DoubleDecoders::default();
        for dec in decoders {
            let slot = match dec.kind() {
                DecoderKind::Lut => &mut d.lut,
                DecoderKind::Uf => &mut d.uf,
                // The double stands in for the kernel, which has no matching decoder.
                kind @ DecoderKind::Matching => {
                    return Err(kind.gpu_refusal("the GPU kernel's CPU stand-in").into())
                }
            };
            if slot.as_ref().is_some_and(|s| !Arc::ptr_eq(s, dec)) {
                return Err(Error::InvalidSetting {
                    key: "decoders",
                    detail: format!(
                        "two {} decoders for one device side: it holds one model per kind",
                        dec.kind()
                    ),
                });
            }
            *slot = Some(Arc::clone(dec));
        }
        Ok(d)
    }
}

/// Host threads standing in for the persistent kernel.
pub struct CpuDouble {
    memory: SharedRegion,
    layout: Layout,
    tickets: Arc<Tickets>,
    nic: Option<Arc<DoubleNic>>,
    threads: Vec<JoinHandle<PollerCounters>>,
}

impl CpuDouble {
    /// Starts `pollers` poller threads (at least one), all polling the same next slot (one
    /// group), over a zeroed region laid out as `layout`.
    pub fn start(layout: Layout, pollers: usize) -> Result<CpuDouble> {
        let pollers = pollers.max(1);
        CpuDouble::start_grouped(layout, pollers, pollers)
    }

    /// Starts `pollers` poller threads in groups of `pollers_per_slot` (which must divide
    /// `pollers`), as `GpuOptions::pollers_per_slot` arranges the kernel's warps.
    pub fn start_grouped(
        layout: Layout,
        pollers: usize,
        pollers_per_slot: usize,
    ) -> Result<CpuDouble> {
        CpuDouble::start_inner(layout, pollers, pollers_per_slot, None, Default::default())
    }

    /// [`CpuDouble::start_grouped`] serving `decoders` too, by their device codes (lut 2,
    /// uf 3) through the CPU decoders, as the kernel serves them through the GPU ones (same
    /// answers): at most one model per decoder kind, as on the GPU.
    pub fn start_with_decoders(
        layout: Layout,
        pollers: usize,
        pollers_per_slot: usize,
        decoders: &[Arc<Decoder>],
    ) -> Result<CpuDouble> {
        let d = DoubleDecoders::new(decoders)?;
        CpuDouble::start_inner(layout, pollers, pollers_per_slot, None, Arc::new(d))
    }

    /// [`CpuDouble::start_grouped`] for the GPU-initiated doorbell path: the pollers send
    /// every response themselves on `nic`'s send queue (see the module docs). The layout
    /// becomes a reply layout ([`Layout::with_reply`]).
    pub fn start_with_nic(
        layout: Layout,
        pollers: usize,
        pollers_per_slot: usize,
        nic: &DevicePosting,
    ) -> Result<CpuDouble> {
        let nic = DoubleNic {
            sq: Mutex::new(nic.send_queue()?),
            posted: AtomicU64::new(0),
            fallbacks: AtomicU64::new(0),
        };
        CpuDouble::start_inner(
            layout.with_reply(true),
            pollers,
            pollers_per_slot,
            Some(Arc::new(nic)),
            Default::default(),
        )
    }

    fn start_inner(
        layout: Layout,
        pollers: usize,
        pollers_per_slot: usize,
        nic: Option<Arc<DoubleNic>>,
        decoders: Arc<DoubleDecoders>,
    ) -> Result<CpuDouble> {
        if pollers == 0 || pollers_per_slot == 0 || pollers % pollers_per_slot != 0 {
            return Err(Error::InvalidSetting {
                key: "pollers_per_slot",
                detail: format!("{pollers_per_slot} must divide pollers ({pollers})"),
            });
        }
        let groups = pollers / pollers_per_slot;
        let memory = SharedRegion::heap(layout.total_bytes())?;
        let tickets = Arc::new(Tickets {
            groups: (0..groups)
                .map(|_| CachePadded::new(AtomicU64::new(0)))
                .collect(),
        });
        let mut double = CpuDouble {
            memory,
            layout,
            tickets,
            nic,
            threads: Vec::new(),
        };
        for i in 0..pollers {
            let memory = double.memory.clone();
            let tickets = Arc::clone(&double.tickets);
            let nic = double.nic.clone();
            let decoders = Arc::clone(&decoders);
            let spawned = std::thread::Builder::new()
                .name(format!("qfwd-double-{i}"))
                .spawn(move || {
                    run_poller(
                        &memory,
                        layout,
                        &tickets,
                        i % groups,
                        nic.as_deref(),
                        &decoders,
                    )
                });
            match spawned {
                Ok(t) => double.threads.push(t),
                Err(source) => {
                    return Err(Error::Io {
                        what: format!("cannot start CPU double poller {i}"),
                        source,
                    })
                }
            }
        }
        Ok(double)
    }

    /// What the pollers counted while posting to the NIC (`None` without one): `posted`
    /// and `fallbacks`, the rest as the Rust poster sees it (CQEs it reaped, its waits).
    pub fn nic_counters(&self) -> Option<DevicePostCounters> {
        let nic = self.nic.as_ref()?;
        let sq = nic.sq.lock().unwrap_or_else(|p| p.into_inner()).counters();
        Some(DevicePostCounters {
            posted: nic.posted.load(Ordering::Relaxed),
            fallbacks: nic.fallbacks.load(Ordering::Relaxed),
            room_waits: sq.full_spins,
            cqes: sq.completions + sq.errors,
            error_cqes: sq.errors,
            ..DevicePostCounters::default()
        })
    }

    /// Requests claimed so far, all groups together (with one group: the next sequence
    /// number no poller has taken).
    pub fn claimed(&self) -> u64 {
        self.tickets
            .groups
            .iter()
            .map(|t| t.load(Ordering::Acquire))
            .sum()
    }
}

impl MailboxDevice for CpuDouble {
    fn region(&self) -> &SharedRegion {
        &self.memory
    }

    fn layout(&self) -> Layout {
        self.layout
    }

    /// The double runs the `gpu-persistent` protocol (on host threads).
    fn topology(&self) -> Topology {
        Topology::GpuPersistent
    }

    fn stop(&mut self) {
        let region = &self.memory;
        protocol::write_stop(region, &self.layout);
        protocol::release_stalls(region, &self.layout);
    }

    fn wait(&mut self, deadline: Instant) -> Result<Vec<PollerCounters>> {
        let start = Instant::now();
        while self.threads.iter().any(|t| !t.is_finished()) {
            if Instant::now() >= deadline {
                return Err(Error::MailboxDidNotStop {
                    device_side: format!("CPU double ({} pollers)", self.threads.len()),
                    waited_ms: start.elapsed().as_millis() as u64,
                });
            }
            std::thread::sleep(Duration::from_micros(200));
        }
        Ok(self
            .threads
            .drain(..)
            .map(|t| t.join().unwrap_or_default())
            .collect())
    }
}

impl Drop for CpuDouble {
    fn drop(&mut self) {
        self.stop();
        // Bounded: a poller ends within one poll of the sentinel, a stall on release. If one
        // did not, it keeps its clone of the region: leaked, never freed under it.
        let _ = self.wait(Instant::now() + Duration::from_secs(5));
    }
}

/// One poller: the CPU rendering of one warp of `qfwd_persistent`.
fn run_poller(
    memory: &SharedRegion,
    layout: Layout,
    tickets: &Tickets,
    group: usize,
    nic: Option<&DoubleNic>,
    decoders: &DoubleDecoders,
) -> PollerCounters {
    let region = memory;
    let mut datagram = vec![0u8; crate::wire::HEADER_LEN + layout.max_result_len()];
    let slots = layout.slots();
    let groups = tickets.groups.len();
    let ticket = &*tickets.groups[group];
    let seq_of = |k: u64| group as u64 + k * groups as u64;
    let mut stage = vec![0u8; layout.req_slot_bytes()];
    let mut result = vec![0u8; layout.max_result_len()];
    let mut counters = PollerCounters::default();
    let mut cursor = ticket.load(Ordering::Acquire);
    loop {
        counters.polls += 1;
        let seq = seq_of(cursor);
        let slot = (seq % slots as u64) as usize;
        let want = tag_for(seq, slots);
        let tag0 = protocol::poll_request_tag(region, &layout, slot);
        let now = ticket.load(Ordering::Acquire);
        if tag0 == STOP_TAG {
            break;
        }
        if now != cursor {
            cursor = now;
            continue;
        }
        if tag0 != want {
            std::thread::yield_now();
            continue;
        }
        let respond = |read: RequestRead, stage: &[u8], result: &mut [u8]| {
            serve(read, stage, result, region, &layout, decoders)
        };
        let (status, len, to) = match layout.rx() {
            RxCompletion::Inline => {
                let read = protocol::read_inline_request(region, &layout, slot, want, &mut stage);
                if read == RequestRead::Torn {
                    counters.torn += 1;
                    std::thread::yield_now();
                    continue;
                }
                // As the kernel: a side-effect-free handler runs before the claim is known
                // (the kernel overlaps it with the CAS) and its result is dropped if the
                // claim is lost; the stall waits for the claim.
                let early = is_pure(read).then(|| respond(read, &stage, &mut result));
                if let Err(actual) = claim(ticket, cursor) {
                    counters.lost_claims += 1;
                    cursor = actual;
                    continue;
                }
                let (status, len) = match early {
                    Some(response) => response,
                    None => respond(read, &stage, &mut result),
                };
                (status, len, reply_to(&layout, read, &stage))
            }
            RxCompletion::Buffer => {
                // Flag seen: claim first, so only the winner reads the payload.
                if let Err(actual) = claim(ticket, cursor) {
                    counters.lost_claims += 1;
                    cursor = actual;
                    continue;
                }
                let read = protocol::read_buffer_request(region, &layout, slot, &mut stage);
                let (status, len) = respond(read, &stage, &mut result);
                (status, len, reply_to(&layout, read, &stage))
            }
        };
        answer(
            region,
            &layout,
            slot,
            want,
            status,
            &result[..len],
            to,
            nic,
            &mut datagram,
        );
        counters.served += 1;
        cursor += 1;
    }
    counters
}

/// Runs the request `read` found staged in `stage`: its status and result length.
#[inline]
fn serve(
    read: RequestRead,
    stage: &[u8],
    result: &mut [u8],
    region: &SharedRegion,
    layout: &Layout,
    decoders: &DoubleDecoders,
) -> (i32, usize) {
    match read {
        RequestRead::Ready { code, arg_len } => dispatch(
            code,
            &stage[HEADER_BYTES..HEADER_BYTES + arg_len],
            result,
            region,
            layout,
            decoders,
        ),
        RequestRead::Oversized { .. } => (status::OVERSIZED, 0),
        RequestRead::Torn => unreachable!("torn requests are read again"),
    }
}

/// The request's identity, when the device side answers the QPU itself.
#[inline]
fn reply_to(layout: &Layout, read: RequestRead, stage: &[u8]) -> Option<protocol::ReplyTo> {
    match read {
        RequestRead::Ready { arg_len, .. } if layout.reply() => {
            Some(protocol::staged_reply_to(stage, arg_len))
        }
        _ => None,
    }
}

/// Whether serving `read` has no side effects (every handler but the stall).
#[inline]
fn is_pure(read: RequestRead) -> bool {
    !matches!(
        read,
        RequestRead::Ready {
            code: device_code::STALL,
            ..
        }
    )
}

/// Publishes the answer to the request in `slot`: sent to the QPU through the soft NIC
/// when the device side answers it itself (`to`), else, or when that send fails, written
/// to the response ring.
#[inline]
#[allow(clippy::too_many_arguments)]
fn answer(
    region: &SharedRegion,
    layout: &Layout,
    slot: usize,
    want: u32,
    status: i32,
    response: &[u8],
    to: Option<protocol::ReplyTo>,
    nic: Option<&DoubleNic>,
    datagram: &mut [u8],
) {
    let len = response.len();
    let sent = match (nic, to) {
        (Some(nic), Some(to)) => {
            let result = if status == status::OK {
                response
            } else {
                &[][..]
            };
            match crate::wire::write_response(
                datagram,
                status,
                to.request_id,
                to.ptp_timestamp,
                result,
            ) {
                Ok(n) => nic.send(&datagram[..n], || {
                    protocol::write_sent_completion(region, layout, slot, want, status, len)
                }),
                Err(_) => false,
            }
        }
        _ => false,
    };
    if !sent {
        protocol::write_response(region, layout, slot, want, status, response);
    }
}

/// Takes the group's request `cursor`, or returns the ticket's current value.
#[inline]
fn claim(ticket: &AtomicU64, cursor: u64) -> std::result::Result<u64, u64> {
    ticket.compare_exchange(cursor, cursor + 1, Ordering::AcqRel, Ordering::Acquire)
}

/// The double's `qfwd_dispatch`: the same handlers, by the same device codes.
fn dispatch(
    code: u32,
    arg: &[u8],
    out: &mut [u8],
    region: &SharedRegion,
    layout: &Layout,
    decoders: &DoubleDecoders,
) -> (i32, usize) {
    match code {
        c if c == DecoderKind::Lut.device_code() || c == DecoderKind::Uf.device_code() => {
            let d = if c == DecoderKind::Lut.device_code() {
                &decoders.lut
            } else {
                &decoders.uf
            };
            match d.as_ref().map(|d| d.run_payload(arg, out)) {
                Some(Ok(n)) => (status::OK, n),
                Some(Err(why)) => (handler::payload_status(why), 0),
                None => (status::UNKNOWN_FUNCTION, 0),
            }
        }
        device_code::PARITY => {
            if out.is_empty() {
                return (status::BAD_ARGUMENT, 0);
            }
            out[0] = handler::parity(arg);
            (status::OK, 1)
        }
        device_code::STALL => {
            let word = |i: usize| {
                arg.get(4 * i..4 * i + 4)
                    .map(|w| u32::from_le_bytes([w[0], w[1], w[2], w[3]]))
            };
            let Some(micros) = word(0) else {
                return (status::BAD_ARGUMENT, 0);
            };
            let budget = Duration::from_micros(micros.min(MAX_STALL_US) as u64);
            let release = layout.release_word_offset();
            let target = word(1)
                .unwrap_or_else(|| region.load_u32(release, Ordering::Acquire).wrapping_add(1));
            let released = || {
                region
                    .load_u32(release, Ordering::Acquire)
                    .wrapping_sub(target) as i32
                    >= 0
            };
            let start = Instant::now();
            // Bounded by MAX_STALL_US; ends early on release.
            while start.elapsed() < budget && !released() {
                std::thread::yield_now();
            }
            (status::OK, 0)
        }
        _ => (status::UNKNOWN_FUNCTION, 0),
    }
}
