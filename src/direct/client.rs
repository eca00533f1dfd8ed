//! The QPU side of one in-process link: the emulator's [`Client`] that is also the link's
//! NIC. Sending a request lands it in the link's receive queue as the NIC's DMA would
//! ([`NicEngine::receive`]); receiving polls the link's doorbells and executes the send
//! queue ([`NicEngine::poll_send`]). No other thread sits between the emulator and the
//! device side.
#![forbid(unsafe_code)]

use std::sync::Arc;

use crate::softnic::{NicEngine, NicStats};
use crate::transport::Client;
use crate::Result;

/// Responses executed but not yet taken by the caller (one poll executes at most what the
/// doorbells armed: the send queue's size).
const HELD: usize = 512;
/// Largest response a link client holds (inline SENDs are at most 236 bytes; gathered
/// ones at most the configured `max_response_bytes`).
const HELD_BYTES: usize = 4096 + 64;

/// The emulator's end of one link.
pub struct LinkClient {
    engine: NicEngine,
    link: u32,
    held: Vec<u8>,
    lens: Vec<usize>,
    head: usize,
    count: usize,
    /// Responses that did not fit [`HELD`] (never expected; counted, not lost silently).
    overflow: u64,
}

impl LinkClient {
    pub(crate) fn new(engine: NicEngine, link: u32) -> LinkClient {
        LinkClient {
            engine,
            link,
            held: vec![0; HELD * HELD_BYTES],
            lens: vec![0; HELD],
            head: 0,
            count: 0,
            overflow: 0,
        }
    }

    /// The link's NIC counters (shared: they stay readable after the client is gone).
    pub fn nic_stats(&self) -> Arc<NicStats> {
        Arc::clone(self.engine.stats())
    }

    /// Responses the client could not hold (should stay 0).
    pub fn overflow(&self) -> u64 {
        self.overflow
    }

    fn take(&mut self, buf: &mut [u8]) -> Option<usize> {
        if self.count == 0 {
            return None;
        }
        let n = self.lens[self.head];
        let at = self.head * HELD_BYTES;
        let copy = n.min(buf.len());
        buf[..copy].copy_from_slice(&self.held[at..at + copy]);
        self.head = (self.head + 1) % HELD;
        self.count -= 1;
        Some(n)
    }
}

impl Client for LinkClient {
    fn send(&mut self, bytes: &[u8]) -> Result<bool> {
        Ok(self.engine.receive(bytes))
    }

    fn try_recv(&mut self, buf: &mut [u8]) -> Result<Option<usize>> {
        if let Some(n) = self.take(buf) {
            return Ok(Some(n));
        }
        let LinkClient {
            engine,
            held,
            lens,
            head,
            count,
            overflow,
            ..
        } = self;
        engine.poll_send(&mut |bytes| {
            if *count == HELD || bytes.len() > HELD_BYTES {
                *overflow += 1;
                return;
            }
            let slot = (*head + *count) % HELD;
            held[slot * HELD_BYTES..slot * HELD_BYTES + bytes.len()].copy_from_slice(bytes);
            lens[slot] = bytes.len();
            *count += 1;
        });
        Ok(self.take(buf))
    }

    fn describe(&self) -> String {
        format!("gpu-direct link {}", self.link)
    }
}
