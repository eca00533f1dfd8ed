//! The `inproc` transport: two single-producer/single-consumer rings of fixed-size slots
//! (requests one way, responses the other), shared between threads of one process.
//!
//! It plays the part of NIC DMA: the emulator's writes land directly in the forwarder's
//! receive ring, so measurements isolate the forwarding and GPU path from the network
//! stack. Slots hold their bytes in `AtomicU64` words so the ring needs no `unsafe`.
//!
//! A message costs one cache-line transfer when it fits one line with its stamp (a 32 B
//! request with its 24 B header does): word 0 of a slot is a stamp, `(position + 1) << 16
//! | length`, written last with Release after the payload words (relaxed); the consumer
//! polls the stamp of the slot it expects with Acquire, so it needs no shared tail index
//! (which would be a second line to fetch per message). The stamp carries the absolute
//! position, so a slot left from the previous lap never looks new. The consumer returns
//! slots by a Release store of `head`, on a line of its own, which the producer re-reads
//! only when its cached copy says the ring is full (as rtrb does).
#![forbid(unsafe_code)]

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use crossbeam_utils::CachePadded;

use super::{Client, Transport};
use crate::{Error, Result};

const WORDS_PER_LINE: usize = 8;
/// Messages are at most this long (the stamp holds the length in 16 bits).
const MAX_SLOT_BYTES: usize = u16::MAX as usize;

type Line = CachePadded<[AtomicU64; WORDS_PER_LINE]>;

struct Shared {
    head: CachePadded<AtomicUsize>,
    /// Slot `i` is lines `[i * lines_per_slot, (i + 1) * lines_per_slot)`: its stamp,
    /// then the message.
    lines: Box<[Line]>,
    lines_per_slot: usize,
    slots: usize,
    slot_bytes: usize,
}

impl Shared {
    #[inline]
    fn word(&self, slot: usize, w: usize) -> &AtomicU64 {
        &self.lines[slot * self.lines_per_slot + w / WORDS_PER_LINE][w % WORDS_PER_LINE]
    }
}

#[inline]
fn stamp(position: usize, len: usize) -> u64 {
    ((position as u64).wrapping_add(1) << 16) | len as u64
}

/// The producing end of a slot ring.
pub struct Producer {
    ring: Arc<Shared>,
    tail: usize,
    cached_head: usize,
}

/// The consuming end of a slot ring.
pub struct Consumer {
    ring: Arc<Shared>,
    head: usize,
}

/// A ring of `slots` slots of `slot_bytes` bytes each. `slots` must be >= 1.
pub fn ring(slots: usize, slot_bytes: usize) -> Result<(Producer, Consumer)> {
    if slots == 0 {
        return Err(Error::Inproc("a ring needs at least one slot"));
    }
    if slot_bytes == 0 {
        return Err(Error::Inproc("slots must hold at least one byte"));
    }
    if slot_bytes > MAX_SLOT_BYTES {
        return Err(Error::Inproc("slots hold at most 65535 bytes"));
    }
    let lines_per_slot = (8 + slot_bytes).div_ceil(8 * WORDS_PER_LINE);
    let lines: Box<[Line]> = (0..slots * lines_per_slot)
        .map(|_| CachePadded::new(std::array::from_fn(|_| AtomicU64::new(0))))
        .collect();
    let shared = Arc::new(Shared {
        head: CachePadded::new(AtomicUsize::new(0)),
        lines,
        lines_per_slot,
        slots,
        slot_bytes,
    });
    Ok((
        Producer {
            ring: shared.clone(),
            tail: 0,
            cached_head: 0,
        },
        Consumer {
            ring: shared,
            head: 0,
        },
    ))
}

impl Producer {
    /// Copies `bytes` into the next slot and publishes it. `Ok(false)` when the ring is
    /// full; an error when `bytes` is larger than a slot.
    pub fn push(&mut self, bytes: &[u8]) -> Result<bool> {
        let ring = &*self.ring;
        if bytes.len() > ring.slot_bytes {
            return Err(Error::Inproc("message larger than a ring slot"));
        }
        if self.tail.wrapping_sub(self.cached_head) == ring.slots {
            self.cached_head = ring.head.load(Ordering::Acquire);
            if self.tail.wrapping_sub(self.cached_head) == ring.slots {
                return Ok(false);
            }
        }
        let slot = self.tail % ring.slots;
        let mut chunks = bytes.chunks_exact(8);
        let mut w = 1;
        for c in &mut chunks {
            let mut b = [0u8; 8];
            b.copy_from_slice(c);
            ring.word(slot, w)
                .store(u64::from_le_bytes(b), Ordering::Relaxed);
            w += 1;
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut b = [0u8; 8];
            b[..rest.len()].copy_from_slice(rest);
            ring.word(slot, w)
                .store(u64::from_le_bytes(b), Ordering::Relaxed);
        }
        ring.word(slot, 0)
            .store(stamp(self.tail, bytes.len()), Ordering::Release);
        self.tail = self.tail.wrapping_add(1);
        Ok(true)
    }

    /// Messages pushed that the consumer has not popped yet.
    pub fn pending(&self) -> usize {
        self.tail
            .wrapping_sub(self.ring.head.load(Ordering::Acquire))
    }

    /// Largest message a slot holds.
    pub fn slot_bytes(&self) -> usize {
        self.ring.slot_bytes
    }
}

impl Consumer {
    /// Copies the oldest message into `buf` and frees its slot; returns the message's
    /// length (which may exceed `buf.len()`: then only the first `buf.len()` bytes are
    /// copied). `None` when the ring is empty.
    pub fn pop(&mut self, buf: &mut [u8]) -> Option<usize> {
        let ring = &*self.ring;
        let slot = self.head % ring.slots;
        let word0 = ring.word(slot, 0).load(Ordering::Acquire);
        if word0 >> 16 != (self.head as u64).wrapping_add(1) & (u64::MAX >> 16) {
            return None;
        }
        let len = (word0 & 0xffff) as usize;
        let copy = len.min(buf.len());
        let mut chunks = buf[..copy].chunks_exact_mut(8);
        let mut w = 1;
        for c in &mut chunks {
            c.copy_from_slice(&ring.word(slot, w).load(Ordering::Relaxed).to_le_bytes());
            w += 1;
        }
        let rest = chunks.into_remainder();
        if !rest.is_empty() {
            let b = ring.word(slot, w).load(Ordering::Relaxed).to_le_bytes();
            let n = rest.len();
            rest.copy_from_slice(&b[..n]);
        }
        self.head = self.head.wrapping_add(1);
        ring.head.store(self.head, Ordering::Release);
        Some(len)
    }
}

/// The forwarder's end of an in-process channel.
pub struct InprocServer {
    requests: Consumer,
    responses: Producer,
    /// Responses that found the response ring full: counted, never silently lost.
    pub response_ring_full: u64,
}

/// The emulator's end of an in-process channel.
pub struct InprocClient {
    requests: Producer,
    responses: Consumer,
}

/// A request ring and a response ring of `slots` slots of `slot_bytes` each.
pub fn channel(slots: usize, slot_bytes: usize) -> Result<(InprocClient, InprocServer)> {
    let (req_tx, req_rx) = ring(slots, slot_bytes)?;
    let (resp_tx, resp_rx) = ring(slots, slot_bytes)?;
    Ok((
        InprocClient {
            requests: req_tx,
            responses: resp_rx,
        },
        InprocServer {
            requests: req_rx,
            responses: resp_tx,
            response_ring_full: 0,
        },
    ))
}

impl Transport for InprocServer {
    type Peer = ();

    fn name(&self) -> &'static str {
        "inproc"
    }

    #[inline]
    fn try_recv(&mut self, buf: &mut [u8]) -> Result<Option<(usize, ())>> {
        Ok(self.requests.pop(buf).map(|n| (n, ())))
    }

    fn is_allowed(&self, _peer: &()) -> bool {
        true
    }

    /// The emulator drains responses as fast as it sends requests, so a full response
    /// ring means it stopped reading; the response is refused and the caller counts it.
    #[inline]
    fn send(&mut self, _peer: (), bytes: &[u8]) -> Result<()> {
        if self.responses.push(bytes)? {
            Ok(())
        } else {
            self.response_ring_full += 1;
            Err(Error::Inproc(
                "response ring full: the client is not reading",
            ))
        }
    }
}

impl Client for InprocClient {
    #[inline]
    fn send(&mut self, bytes: &[u8]) -> Result<bool> {
        self.requests.push(bytes)
    }

    #[inline]
    fn try_recv(&mut self, buf: &mut [u8]) -> Result<Option<usize>> {
        Ok(self.responses.pop(buf))
    }

    fn describe(&self) -> String {
        "inproc".to_string()
    }

    fn unread(&self) -> Option<usize> {
        Some(self.requests.pending())
    }
}

/// A link of [`InprocLinks`]: which ring pair a request came in on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Link(pub u32);

/// The server's end of several in-process channels, one per link (an emulator thread
/// each): requests are taken from the links in turn, so none starves another, and each
/// response goes back on the link its request came in on.
pub struct InprocLinks {
    links: Vec<InprocServer>,
    /// The link polled first next time.
    next: usize,
}

/// `links` channels ([`channel`]) served as one transport: the clients (link `i` at
/// index `i`) and the server end.
pub fn links(
    links: usize,
    slots: usize,
    slot_bytes: usize,
) -> Result<(Vec<InprocClient>, InprocLinks)> {
    if links == 0 {
        return Err(Error::Inproc("a set of links needs at least one"));
    }
    let mut clients = Vec::with_capacity(links);
    let mut servers = Vec::with_capacity(links);
    for _ in 0..links {
        let (c, s) = channel(slots, slot_bytes)?;
        clients.push(c);
        servers.push(s);
    }
    Ok((
        clients,
        InprocLinks {
            links: servers,
            next: 0,
        },
    ))
}

impl InprocLinks {
    pub fn len(&self) -> usize {
        self.links.len()
    }

    pub fn is_empty(&self) -> bool {
        self.links.is_empty()
    }

    /// Responses refused because their link's response ring was full, all links together.
    pub fn response_ring_full(&self) -> u64 {
        self.links.iter().map(|l| l.response_ring_full).sum()
    }
}

impl Transport for InprocLinks {
    type Peer = Link;

    fn name(&self) -> &'static str {
        "inproc"
    }

    #[inline]
    fn try_recv(&mut self, buf: &mut [u8]) -> Result<Option<(usize, Link)>> {
        let n = self.links.len();
        for k in 0..n {
            let i = (self.next + k) % n;
            if let Some(len) = self.links[i].requests.pop(buf) {
                self.next = (i + 1) % n;
                return Ok(Some((len, Link(i as u32))));
            }
        }
        Ok(None)
    }

    fn is_allowed(&self, peer: &Link) -> bool {
        (peer.0 as usize) < self.links.len()
    }

    #[inline]
    fn send(&mut self, peer: Link, bytes: &[u8]) -> Result<()> {
        match self.links.get_mut(peer.0 as usize) {
            Some(l) => l.send((), bytes),
            None => Err(Error::Inproc("response for a link that does not exist")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn full_and_empty() {
        let (mut p, mut c) = ring(2, 16).unwrap();
        let mut buf = [0u8; 16];
        assert_eq!(c.pop(&mut buf), None);
        assert!(p.push(b"a").unwrap());
        assert!(p.push(b"bc").unwrap());
        assert_eq!(p.pending(), 2);
        assert!(
            !p.push(b"d").unwrap(),
            "third push into two slots must fail"
        );
        assert_eq!(c.pop(&mut buf), Some(1));
        assert_eq!(&buf[..1], b"a");
        assert_eq!(p.pending(), 1);
        assert!(p.push(b"d").unwrap());
        assert_eq!(c.pop(&mut buf), Some(2));
        assert_eq!(&buf[..2], b"bc");
        assert_eq!(c.pop(&mut buf), Some(1));
        assert_eq!(&buf[..1], b"d");
        assert_eq!(c.pop(&mut buf), None);
    }

    #[test]
    fn oversized_push_is_an_error_and_short_buffer_reports_length() {
        let (mut p, mut c) = ring(1, 10).unwrap();
        assert!(p.push(&[0; 11]).is_err());
        assert!(p.push(&[7; 10]).unwrap());
        let mut small = [0u8; 3];
        assert_eq!(c.pop(&mut small), Some(10));
        assert_eq!(small, [7; 3]);
        assert!(ring(0, 8).is_err());
    }

    #[test]
    fn wraps_around_many_times_across_threads() {
        let (mut p, mut c) = ring(4, 64).unwrap();
        const N: u32 = 20_000;
        let producer = std::thread::spawn(move || {
            for i in 0..N {
                let len = (i % 61) as usize + 1;
                let msg: Vec<u8> = (0..len).map(|k| (i as usize + k) as u8).collect();
                let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
                while !p.push(&msg).unwrap() {
                    assert!(std::time::Instant::now() < deadline, "consumer stalled");
                    std::thread::yield_now();
                }
            }
        });
        let mut buf = [0u8; 64];
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        for i in 0..N {
            let n = loop {
                if let Some(n) = c.pop(&mut buf) {
                    break n;
                }
                assert!(std::time::Instant::now() < deadline, "producer stalled");
                std::thread::yield_now();
            };
            let len = (i % 61) as usize + 1;
            assert_eq!(n, len, "message {i}");
            for (k, &b) in buf[..n].iter().enumerate() {
                assert_eq!(b, (i as usize + k) as u8, "message {i} byte {k}");
            }
        }
        producer.join().unwrap();
        assert_eq!(c.pop(&mut buf), None);
    }

    #[test]
    fn links_take_turns_and_answer_on_the_link_asked() {
        let (mut clients, mut server) = links(3, 4, 16).unwrap();
        assert!(links(0, 4, 16).is_err());
        assert_eq!(server.len(), 3);
        // Link 0 has two requests waiting, link 2 one: link 0, link 2, then link 0 again.
        assert!(clients[0].send(b"a0").unwrap());
        assert!(clients[0].send(b"a1").unwrap());
        assert!(clients[2].send(b"c0").unwrap());
        let mut buf = [0u8; 16];
        let mut order = Vec::new();
        while let Some((n, peer)) = server.try_recv(&mut buf).unwrap() {
            assert!(server.is_allowed(&peer));
            order.push((peer, buf[..n].to_vec()));
            server.send(peer, &buf[..n]).unwrap();
        }
        assert_eq!(
            order,
            vec![
                (Link(0), b"a0".to_vec()),
                (Link(2), b"c0".to_vec()),
                (Link(0), b"a1".to_vec())
            ]
        );
        assert_eq!(clients[0].try_recv(&mut buf).unwrap(), Some(2));
        assert_eq!(&buf[..2], b"a0");
        assert_eq!(clients[0].try_recv(&mut buf).unwrap(), Some(2));
        assert_eq!(clients[1].try_recv(&mut buf).unwrap(), None);
        assert_eq!(clients[2].try_recv(&mut buf).unwrap(), Some(2));
        assert_eq!(&buf[..2], b"c0");
        assert!(!server.is_allowed(&Link(3)));
        assert!(server.send(Link(3), b"x").is_err());
        assert_eq!(server.response_ring_full(), 0);
    }

    proptest! {
        /// Any interleaving of pushes and pops behaves like a bounded FIFO queue.
        #[test]
        fn behaves_like_a_bounded_queue(slots in 1usize..6, ops in proptest::collection::vec((any::<bool>(), proptest::collection::vec(any::<u8>(), 0..24)), 0..200)) {
            let (mut p, mut c) = ring(slots, 24).unwrap();
            let mut model = std::collections::VecDeque::new();
            let mut buf = [0u8; 24];
            for (is_push, msg) in ops {
                if is_push {
                    let ok = p.push(&msg).unwrap();
                    prop_assert_eq!(ok, model.len() < slots);
                    if ok { model.push_back(msg); }
                } else {
                    let got = c.pop(&mut buf).map(|n| buf[..n].to_vec());
                    prop_assert_eq!(got, model.pop_front());
                }
            }
        }
    }
}
