//! The host side of the mailbox as a [`Backend`]: requests go into the next slot of the
//! request ring, completions are reaped from the response ring, whoever the device side is.
#![forbid(unsafe_code)]

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::layout::{device_code, Layout};
use super::protocol::{self, ReplyTo};
use super::ring::SlotRing;
use crate::backend::{Backend, Completion, Topology};
use crate::handler::Handler;
use crate::shm::SharedRegion;
use crate::wire::{status, RequestHeader};
use crate::Result;

/// What a poller (a kernel warp, or a CPU double thread) counted while it ran.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PollerCounters {
    /// Reads of a request slot (or flag).
    pub polls: u64,
    /// Requests served.
    pub served: u64,
    /// Requests seen half-written (some chunk's tag not there yet) and read again.
    pub torn: u64,
    /// Complete requests another poller claimed first.
    pub lost_claims: u64,
}

impl PollerCounters {
    /// The sum over pollers.
    pub fn total(all: &[PollerCounters]) -> PollerCounters {
        all.iter()
            .fold(PollerCounters::default(), |a, c| PollerCounters {
                polls: a.polls + c.polls,
                served: a.served + c.served,
                torn: a.torn + c.torn,
                lost_claims: a.lost_claims + c.lost_claims,
            })
    }
}

/// The device side of a mailbox: owns the shared memory and whatever serves it.
pub trait MailboxDevice {
    /// The shared memory, laid out as [`MailboxDevice::layout`] says.
    fn region(&self) -> &SharedRegion;

    fn layout(&self) -> Layout;

    /// The topology this device side stands for (for logs and CSV rows).
    fn topology(&self) -> Topology;

    /// Writes the stop sentinel where the pollers look and releases any stall; returns at
    /// once. Idempotent.
    fn stop(&mut self);

    /// Waits until every poller has exited, at most until `deadline`; returns each
    /// poller's counters. An error names what did not stop.
    fn wait(&mut self, deadline: Instant) -> Result<Vec<PollerCounters>>;
}

/// The host side of a mailbox over device side `D`.
pub struct MailboxBackend<D: MailboxDevice> {
    device: D,
    layout: Layout,
    ring: SlotRing,
    /// Scratch for one result, so `poll` hands out a slice without allocating.
    result: Box<[u8]>,
    stopped: bool,
}

impl<D: MailboxDevice> MailboxBackend<D> {
    pub fn new(device: D) -> MailboxBackend<D> {
        let layout = device.layout();
        MailboxBackend {
            ring: SlotRing::new(layout.slots()),
            result: vec![0; layout.max_result_len()].into_boxed_slice(),
            layout,
            device,
            stopped: false,
        }
    }

    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    pub fn device(&self) -> &D {
        &self.device
    }

    pub fn device_mut(&mut self) -> &mut D {
        &mut self.device
    }

    /// Submits a request for a raw device handler code (see [`device_code`]).
    #[inline]
    pub fn submit_code(
        &mut self,
        token: u32,
        code: u32,
        arg: &[u8],
    ) -> std::result::Result<(), i32> {
        self.submit_code_to(token, code, arg, ReplyTo::default())
    }

    /// [`MailboxBackend::submit_code`] with the request's wire identity, which a reply
    /// layout carries to the device side (it answers the QPU itself).
    #[inline]
    pub fn submit_code_to(
        &mut self,
        token: u32,
        code: u32,
        arg: &[u8],
        reply: ReplyTo,
    ) -> std::result::Result<(), i32> {
        if self.stopped {
            return Err(status::SHUTTING_DOWN);
        }
        if arg.len() > self.layout.max_arg_len() {
            return Err(status::OVERSIZED);
        }
        let Some((slot, tag)) = self.ring.reserve(token) else {
            return Err(status::OVERLOAD);
        };
        protocol::write_request_to(
            self.device.region(),
            &self.layout,
            slot,
            tag,
            code,
            arg,
            reply,
        );
        Ok(())
    }

    /// Debug: a request that makes the device side spin for `micros` microseconds (at most
    /// [`super::layout::MAX_STALL_US`]) or until [`MailboxBackend::release_stalls`].
    pub fn submit_stall(&mut self, token: u32, micros: u32) -> std::result::Result<(), i32> {
        let release = self
            .device
            .region()
            .load_u32(self.layout.release_word_offset(), Ordering::Acquire);
        let mut arg = [0u8; 8];
        arg[..4].copy_from_slice(&micros.to_le_bytes());
        arg[4..].copy_from_slice(&release.wrapping_add(1).to_le_bytes());
        self.submit_code(token, device_code::STALL, &arg)
    }

    /// Ends every stall submitted so far (in progress or not started yet).
    pub fn release_stalls(&self) {
        protocol::release_stalls(self.device.region(), &self.layout);
    }

    /// Polls until nothing is in flight or `timeout` passes; returns completions seen.
    pub fn drain<F: FnMut(Completion<'_>)>(&mut self, timeout: Duration, mut done: F) -> usize {
        let deadline = Instant::now() + timeout;
        let mut n = 0;
        while self.ring.pending() > 0 && Instant::now() < deadline {
            let got = self.poll(&mut done);
            n += got;
            if got == 0 {
                std::thread::yield_now();
            }
        }
        n
    }

    /// Stops the device side (sentinel), waits for it until `timeout`, and returns each
    /// poller's counters. Later submissions get `SHUTTING_DOWN`; requests still in flight
    /// are abandoned (poll them first, or [`MailboxBackend::drain`]).
    pub fn shutdown(&mut self, timeout: Duration) -> Result<Vec<PollerCounters>> {
        self.stopped = true;
        self.device.stop();
        self.device.wait(Instant::now() + timeout)
    }
}

impl<D: MailboxDevice> Backend for MailboxBackend<D> {
    fn topology(&self) -> Topology {
        self.device.topology()
    }

    #[inline]
    fn submit(
        &mut self,
        token: u32,
        handler: &Handler,
        arg: &[u8],
    ) -> std::result::Result<(), i32> {
        self.submit_code(token, handler.device_code(), arg)
    }

    #[inline]
    fn submit_request(
        &mut self,
        token: u32,
        header: &RequestHeader,
        handler: &Handler,
        arg: &[u8],
    ) -> std::result::Result<(), i32> {
        let reply = ReplyTo {
            request_id: header.request_id,
            ptp_timestamp: header.ptp_timestamp,
        };
        self.submit_code_to(token, handler.device_code(), arg, reply)
    }

    #[inline]
    fn poll<F: FnMut(Completion<'_>)>(&mut self, mut done: F) -> usize {
        let region = self.device.region();
        let mut reaped = 0;
        for i in 0..self.ring.span() {
            let (slot, entry) = self.ring.nth(i);
            if !entry.pending {
                continue;
            }
            if let Some(c) =
                protocol::read_completion(region, &self.layout, slot, entry.tag, &mut self.result)
            {
                self.ring.complete(slot);
                reaped += 1;
                let result = if c.status == status::OK {
                    &self.result[..c.result_len]
                } else {
                    &[][..]
                };
                done(Completion {
                    token: entry.token,
                    status: c.status,
                    result,
                    sent_by_device: c.sent_by_device,
                });
            }
        }
        self.ring.advance();
        reaped
    }

    fn in_flight(&self) -> usize {
        self.ring.pending()
    }

    fn max_arg_len(&self) -> usize {
        self.layout.max_arg_len()
    }
}
