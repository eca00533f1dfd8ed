//! The host side of the queues: posting send WQEs with a doorbell (regular or
//! BlueFlame), consuming CQEs, and the cpu-assisted response ring.
//!
//! The same sequences run against a real ConnectX (the SQ, doorbell record and UAR from
//! `mlx5dv_init_obj`) and against the soft NIC (the same things in a [`SharedRegion`]).
#![forbid(unsafe_code)]

use std::sync::atomic::{fence, Ordering};
use std::time::Instant;

use super::layout::{
    NicLayout, SoftNicConfig, BF_HALVES, QP_DBREC, RESP_CHUNK_DATA, RESP_CI, RESP_FIRST_CHUNK_DATA,
    RX_CQ_DBREC, TX_CQ_DBREC,
};
use crate::mlx5::layout::{cqe as cqel, qp_dbrec, uar, WQEBB};
use crate::mlx5::wqe::MAX_SEND_INLINE;
use crate::mlx5::{opcode, CqCursor, Cqe, CqeOpcode, Doorbell, Wqe};
use crate::shm::SharedRegion;
use crate::{Error, Result};

/// Consumes a CQ: owner-bit parity, then the consumer index into the CQ doorbell record.
pub struct CqConsumer {
    region: SharedRegion,
    base: usize,
    dbrec: usize,
    cursor: CqCursor,
}

impl CqConsumer {
    /// The send completion queue of `layout`.
    pub fn tx(region: &SharedRegion, layout: &NicLayout) -> CqConsumer {
        CqConsumer {
            region: region.clone(),
            base: layout.tx_cq,
            dbrec: TX_CQ_DBREC,
            cursor: CqCursor::new(layout.tx_cqes),
        }
    }

    /// The receive completion queue of `layout`.
    pub fn rx(region: &SharedRegion, layout: &NicLayout) -> CqConsumer {
        CqConsumer {
            region: region.clone(),
            base: layout.rx_cq,
            dbrec: RX_CQ_DBREC,
            cursor: CqCursor::new(layout.rx_cqes),
        }
    }

    /// Takes the next CQE if the NIC has written it, and tells the NIC the slot is free.
    #[inline]
    pub fn poll(&mut self) -> Option<Cqe> {
        let c = self.peek()?;
        self.region
            .store_be32(self.dbrec, self.cursor.dbrec_value(), Ordering::Release);
        Some(c)
    }

    /// As [`poll`](Self::poll) but without updating the doorbell record (the NIC then
    /// sees the CQ fill up: for overrun tests).
    pub fn peek(&mut self) -> Option<Cqe> {
        let at = self.base + self.cursor.slot() * cqel::SIZE;
        let last = self
            .region
            .load_u64(at + 56, Ordering::Acquire)
            .to_ne_bytes();
        if !self.cursor.owns(last[7]) {
            return None;
        }
        let mut b = [0u8; cqel::SIZE];
        self.region.read(at, &mut b[..56]);
        b[56..].copy_from_slice(&last);
        self.cursor.take(&b)
    }

    /// Writes the current consumer index to the doorbell record.
    pub fn update_dbrec(&self) {
        self.region
            .store_be32(self.dbrec, self.cursor.dbrec_value(), Ordering::Release);
    }

    /// CQEs consumed so far.
    pub fn consumed(&self) -> u32 {
        self.cursor.ci()
    }
}

/// What a send queue has seen complete.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SendCounters {
    pub posted: u64,
    pub doorbells: u64,
    pub completions: u64,
    pub errors: u64,
    /// The last error CQE's syndrome (0: none).
    pub last_syndrome: u8,
    /// Polls spent waiting for room in the SQ.
    pub full_spins: u64,
}

/// Posts send WQEs and rings the doorbell, the way libmlx5 does (docs/architecture.md,
/// "mlx5"): write the WQE into the SQ; barrier; `dbrec[1] = BE32(pi & 0xffff)`; sfence;
/// then the 8-byte control word (regular) or the whole WQE in 64-byte chunks (BlueFlame)
/// into the current BlueFlame half; sfence; flip the half.
pub struct SendQueue {
    region: SharedRegion,
    l: NicLayout,
    mode: Doorbell,
    cq: CqConsumer,
    /// Producer counter in WQEBBs (16 bits go to the doorbell record).
    pi: u16,
    /// Everything before this has completed.
    done: u16,
    /// WQEBBs of the WQE that starts at each SQ slot.
    bbs_at: Vec<u16>,
    half: usize,
    alternate: bool,
    signal_every: u32,
    since_signal: u32,
    timeout: std::time::Duration,
    counters: SendCounters,
    last_error: Option<Cqe>,
}

impl SendQueue {
    /// A poster for the SQ of `layout` in `region`, ringing with `mode` (`regular` or
    /// `blueflame`; `cpu-assisted` is a proxy that uses one of those).
    pub fn new(region: &SharedRegion, config: &SoftNicConfig, mode: Doorbell) -> Result<SendQueue> {
        if mode == Doorbell::CpuAssisted {
            return Err(Error::InvalidSetting {
                key: "doorbell",
                detail: "a send queue rings regular or blueflame; cpu-assisted is a proxy in front of one".into(),
            });
        }
        let l = NicLayout::new(config)?;
        Ok(SendQueue {
            region: region.clone(),
            cq: CqConsumer::tx(region, &l),
            l,
            mode,
            pi: 0,
            done: 0,
            bbs_at: vec![1; l.sq_wqebbs as usize],
            half: 0,
            alternate: true,
            signal_every: config.signal_every,
            since_signal: 0,
            timeout: config.send_timeout,
            counters: SendCounters::default(),
            last_error: None,
        })
    }

    pub fn mode(&self) -> Doorbell {
        self.mode
    }

    /// Producer counter (WQEBBs, wrapping at 2^16).
    pub fn pi(&self) -> u16 {
        self.pi
    }

    pub fn counters(&self) -> SendCounters {
        self.counters
    }

    /// The last error CQE seen, if any.
    pub fn last_error(&self) -> Option<Cqe> {
        self.last_error
    }

    /// Turns BlueFlame half alternation off (to show what the NIC counts when a poster
    /// forgets it). Hardware needs it: consecutive writes to one half may merge.
    pub fn set_half_alternation(&mut self, on: bool) {
        self.alternate = on;
    }

    /// WQEBBs free in the SQ.
    pub fn room(&self) -> u32 {
        self.l.sq_wqebbs - self.pi.wrapping_sub(self.done) as u32
    }

    /// Posts `payload` as one SEND: inline when it fits one BlueFlame half, otherwise
    /// from a TX buffer with a data segment. Signals every `signal_every` WQEs.
    pub fn post_send(&mut self, payload: &[u8]) -> Result<()> {
        let wqe = self.build_send(payload)?;
        self.post(wqe).map(|_| ())
    }

    /// [`post_send`](Self::post_send), running `notify` after the WQE and the doorbell
    /// record are written and before the doorbell: what a poster wants visible no later
    /// than the NIC sends (the GPU-doorbell path publishes its completion there). `Err`
    /// means nothing was written and `notify` did not run; once it ran the WQE goes out.
    pub fn post_send_notify(&mut self, payload: &[u8], notify: impl FnOnce()) -> Result<()> {
        let wqe = self.build_send(payload)?;
        self.wait_for_room(wqe.wqebbs())?;
        let wqe = self.write_wqe(wqe);
        self.publish();
        notify();
        self.ring(&wqe);
        Ok(())
    }

    /// The SEND WQE for `payload` (inline, or a data segment naming a TX buffer it is
    /// copied into), after waiting for room.
    fn build_send(&mut self, payload: &[u8]) -> Result<Wqe> {
        let inline = payload.len() <= MAX_SEND_INLINE;
        let bbs = if inline {
            (16 + 4 + payload.len()).div_ceil(WQEBB) as u16
        } else {
            1
        };
        self.wait_for_room(bbs)?;
        self.since_signal += 1;
        let signaled = self.since_signal >= self.signal_every;
        if signaled {
            self.since_signal = 0;
        }
        if inline {
            return Ok(opcode::SendInline::new(payload)
                .signaled(signaled)
                .build()?);
        }
        if payload.len() > self.l.tx_buf_bytes {
            return Err(Error::SoftNic {
                what: "post_send",
                detail: format!(
                    "response of {} bytes exceeds the {}-byte TX buffer (max_response_bytes)",
                    payload.len(),
                    self.l.tx_buf_bytes
                ),
            });
        }
        let at = self.l.tx_buf(self.pi);
        self.region.write(at, payload);
        Ok(
            opcode::Send::new(self.region.host_addr(at), self.l.mkey, payload.len() as u32)
                .signaled(signaled)
                .build(),
        )
    }

    /// Posts a built WQE as it is (its signaled flag kept): stamps index and QPN, writes
    /// it into the SQ, updates the doorbell record and rings. Returns its index.
    pub fn post(&mut self, wqe: Wqe) -> Result<u16> {
        self.wait_for_room(wqe.wqebbs())?;
        let wqe = self.write_wqe(wqe);
        self.publish();
        self.ring(&wqe);
        Ok(wqe.ctrl().wqe_index)
    }

    /// Step 1 alone: stamps and writes the WQE into the SQ (wrapping per WQEBB) and
    /// advances the producer counter. Nothing tells the NIC yet. No room check.
    pub fn write_wqe(&mut self, wqe: Wqe) -> Wqe {
        let index = self.pi;
        let wqe = wqe.with_index(index).with_qpn(self.l.qpn);
        let bytes = wqe.as_wqebbs();
        for (k, bb) in bytes.chunks_exact(WQEBB).enumerate() {
            self.region
                .write(self.l.sq_bb(index.wrapping_add(k as u16)), bb);
        }
        self.bbs_at[index as usize & (self.l.sq_wqebbs as usize - 1)] = wqe.wqebbs();
        self.pi = self.pi.wrapping_add(wqe.wqebbs());
        self.counters.posted += 1;
        wqe
    }

    /// As [`write_wqe`](Self::write_wqe) but keeps the WQE's own index and QPN (tests of
    /// malformed WQEs).
    pub fn write_unstamped(&mut self, wqe: Wqe) -> Wqe {
        let index = self.pi;
        for (k, bb) in wqe.as_wqebbs().chunks_exact(WQEBB).enumerate() {
            self.region
                .write(self.l.sq_bb(index.wrapping_add(k as u16)), bb);
        }
        self.bbs_at[index as usize & (self.l.sq_wqebbs as usize - 1)] = wqe.wqebbs();
        self.pi = self.pi.wrapping_add(wqe.wqebbs());
        self.counters.posted += 1;
        wqe
    }

    /// Step 2: the doorbell record says the SQ holds WQEs up to the producer counter.
    pub fn publish(&mut self) {
        self.publish_upto(self.pi);
    }

    /// Step 2 with an explicit counter (tests: a record that lags the SQ).
    pub fn publish_upto(&mut self, counter: u16) {
        fence(Ordering::Release);
        self.region.store_be32(
            QP_DBREC + 4 * qp_dbrec::SND,
            counter as u32,
            Ordering::Release,
        );
        fence(Ordering::SeqCst);
    }

    /// Step 3: the doorbell for `wqe` (as returned by `write_wqe`), then flip the half.
    /// Doorbells may follow each other at once: a ConnectX queues them, and the soft NIC
    /// takes a changed first word as a doorbell (a later one covers an earlier one).
    pub fn ring(&mut self, wqe: &Wqe) {
        let half = BF_HALVES[self.half];
        let bytes = wqe.as_wqebbs();
        if self.mode == Doorbell::BlueFlame && bytes.len() <= uar::BF_SIZE {
            // The copy in 8-byte words, the control word last with Release.
            for (i, w) in bytes.chunks_exact(8).enumerate().skip(1) {
                let mut b = [0u8; 8];
                b.copy_from_slice(w);
                self.region
                    .store_u64(half + 8 * i, u64::from_ne_bytes(b), Ordering::Relaxed);
            }
        }
        self.region
            .store_u64(half, wqe.doorbell_word(), Ordering::Release);
        fence(Ordering::SeqCst);
        if self.alternate {
            self.half ^= 1;
        }
        self.counters.doorbells += 1;
    }

    /// Reaps completions: frees SQ space up to each CQE's WQE (unsignaled WQEs before it
    /// completed too). Returns the CQEs taken.
    pub fn reap(&mut self) -> usize {
        let mut n = 0;
        while let Some(c) = self.cq.poll() {
            n += 1;
            let bbs = self.bbs_at[c.wqe_counter as usize & (self.l.sq_wqebbs as usize - 1)];
            self.done = c.wqe_counter.wrapping_add(bbs);
            if c.opcode == CqeOpcode::ReqErr {
                self.counters.errors += 1;
                self.counters.last_syndrome = c.syndrome;
                self.last_error = Some(c);
            } else {
                self.counters.completions += 1;
            }
        }
        n
    }

    /// Takes the next send CQE directly (tests that check every CQE), freeing SQ space
    /// as `reap` does.
    pub fn next_cqe(&mut self) -> Option<Cqe> {
        let c = self.cq.poll()?;
        let bbs = self.bbs_at[c.wqe_counter as usize & (self.l.sq_wqebbs as usize - 1)];
        self.done = c.wqe_counter.wrapping_add(bbs);
        Some(c)
    }

    fn wait_for_room(&mut self, bbs: u16) -> Result<()> {
        if self.room() >= bbs as u32 {
            return Ok(());
        }
        let started = Instant::now();
        let mut spins = 0u64;
        loop {
            self.reap();
            if self.room() >= bbs as u32 {
                self.counters.full_spins += spins;
                return Ok(());
            }
            spins += 1;
            if spins % 16 == 0 && started.elapsed() >= self.timeout {
                self.counters.full_spins += spins;
                return Err(Error::SoftNicQueueFull {
                    queue: "send queue",
                    waited_us: started.elapsed().as_micros() as u64,
                    polls: spins,
                });
            }
            std::thread::yield_now();
        }
    }
}

/// The tag every 16-byte chunk of response number `seq` carries: never 0 (an empty slot)
/// and different from the previous lap's.
#[inline]
pub fn resp_tag(seq: u32) -> u32 {
    seq % 0xffff_fffe + 1
}

/// Chunks a response of `len` bytes occupies.
#[inline]
pub fn resp_chunks(len: usize) -> usize {
    1 + len
        .saturating_sub(RESP_FIRST_CHUNK_DATA)
        .div_ceil(RESP_CHUNK_DATA)
}

/// Producer of the cpu-assisted response ring: the forwarder here, a GPU kernel later.
///
/// Slot layout: 16-byte chunks, each `{12 data bytes, u32 tag}`; chunk 0's data is
/// `{u32 len, 8 payload bytes}`. Every chunk carries the tag (docs/architecture.md, "Mailbox
/// rules"), so a consumer needs no fence from the producer: it accepts a response when
/// every chunk's tag matches. The consumer returns slots through a consumer index in the
/// doorbell page.
pub struct RespProducer {
    region: SharedRegion,
    l: NicLayout,
    seq: u32,
    cached_ci: u32,
}

impl RespProducer {
    pub fn new(region: &SharedRegion, layout: &NicLayout) -> RespProducer {
        RespProducer {
            region: region.clone(),
            l: *layout,
            seq: 0,
            cached_ci: 0,
        }
    }

    /// Largest response a slot holds.
    pub fn max_len(&self) -> usize {
        (self.l.resp_slot_bytes / 16 - 1) * RESP_CHUNK_DATA + RESP_FIRST_CHUNK_DATA
    }

    /// Writes one response; `Ok(false)` when the ring is full.
    pub fn push(&mut self, bytes: &[u8]) -> Result<bool> {
        if bytes.len() > self.max_len() {
            return Err(Error::SoftNic {
                what: "response ring",
                detail: format!(
                    "response of {} bytes exceeds a {}-byte slot",
                    bytes.len(),
                    self.max_len()
                ),
            });
        }
        if self.seq.wrapping_sub(self.cached_ci) >= self.l.resp_slots {
            self.cached_ci = self.region.load_u32(RESP_CI, Ordering::Acquire);
            if self.seq.wrapping_sub(self.cached_ci) >= self.l.resp_slots {
                return Ok(false);
            }
        }
        let slot = self.l.resp_slot(self.seq);
        let tag = resp_tag(self.seq);
        let head = bytes.len().min(RESP_FIRST_CHUNK_DATA);
        let mut rest = &bytes[head..];
        let mut c = 1;
        while !rest.is_empty() {
            let n = rest.len().min(RESP_CHUNK_DATA);
            let mut chunk = [0u8; 12];
            chunk[..n].copy_from_slice(&rest[..n]);
            self.store_chunk(slot + 16 * c, &chunk, tag);
            rest = &rest[n..];
            c += 1;
        }
        let mut first = [0u8; 12];
        first[..4].copy_from_slice(&(bytes.len() as u32).to_le_bytes());
        first[4..4 + head].copy_from_slice(&bytes[..head]);
        self.store_chunk(slot, &first, tag);
        self.seq = self.seq.wrapping_add(1);
        Ok(true)
    }

    fn store_chunk(&self, at: usize, data: &[u8; 12], tag: u32) {
        for i in 0..3 {
            let w = u32::from_le_bytes([
                data[4 * i],
                data[4 * i + 1],
                data[4 * i + 2],
                data[4 * i + 3],
            ]);
            self.region.store_u32(at + 4 * i, w, Ordering::Relaxed);
        }
        self.region.store_u32(at + 12, tag, Ordering::Release);
    }
}

/// Consumer of the cpu-assisted response ring (the proxy thread).
pub struct RespConsumer {
    region: SharedRegion,
    l: NicLayout,
    seq: u32,
    /// Polls spent waiting for chunks still in flight.
    pub chunk_wait_spins: u64,
    /// Responses given up on (chunks that never arrived, or a corrupt length).
    pub torn: u64,
}

impl RespConsumer {
    pub fn new(region: &SharedRegion, layout: &NicLayout) -> RespConsumer {
        RespConsumer {
            region: region.clone(),
            l: *layout,
            seq: 0,
            chunk_wait_spins: 0,
            torn: 0,
        }
    }

    /// Copies the next response into `buf` if it is complete; returns its length.
    /// Chunks still in flight are waited for up to `wait`.
    pub fn pop(&mut self, buf: &mut [u8], wait: std::time::Duration) -> Option<usize> {
        let slot = self.l.resp_slot(self.seq);
        let tag = resp_tag(self.seq);
        if self.region.load_u32(slot + 12, Ordering::Acquire) != tag {
            return None;
        }
        let len = self.region.load_u32(slot, Ordering::Relaxed) as usize;
        let max = (self.l.resp_slot_bytes / 16 - 1) * RESP_CHUNK_DATA + RESP_FIRST_CHUNK_DATA;
        let ok = len <= max && len <= buf.len() && self.collect(slot, tag, len, buf, wait);
        if !ok {
            self.torn += 1;
        }
        self.seq = self.seq.wrapping_add(1);
        self.region.store_u32(RESP_CI, self.seq, Ordering::Release);
        ok.then_some(len)
    }

    fn collect(
        &mut self,
        slot: usize,
        tag: u32,
        len: usize,
        buf: &mut [u8],
        wait: std::time::Duration,
    ) -> bool {
        let head = len.min(RESP_FIRST_CHUNK_DATA);
        self.region.read(slot + 4, &mut buf[..head]);
        let mut deadline = None;
        for c in 1..resp_chunks(len) {
            let at = slot + 16 * c;
            let mut polls = 0u64;
            while self.region.load_u32(at + 12, Ordering::Acquire) != tag {
                polls += 1;
                self.chunk_wait_spins += 1;
                if polls % 64 == 0
                    && Instant::now() >= *deadline.get_or_insert_with(|| Instant::now() + wait)
                {
                    return false;
                }
                std::hint::spin_loop();
            }
            let from = RESP_FIRST_CHUNK_DATA + (c - 1) * RESP_CHUNK_DATA;
            let n = (len - from).min(RESP_CHUNK_DATA);
            self.region.read(at, &mut buf[from..from + n]);
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn response_ring_round_trips_and_reports_full() {
        let cfg = SoftNicConfig {
            resp_slots: 2,
            max_response_bytes: 100,
            ..Default::default()
        };
        let l = NicLayout::new(&cfg).unwrap();
        let r = SharedRegion::heap(l.len).unwrap();
        l.init(&r).unwrap();
        let mut p = RespProducer::new(&r, &l);
        let mut c = RespConsumer::new(&r, &l);
        let mut buf = [0u8; 200];
        let wait = std::time::Duration::from_millis(1);
        assert_eq!(c.pop(&mut buf, wait), None);
        for round in 0..10u8 {
            let a: Vec<u8> = (0..(round as usize * 9) % 101)
                .map(|i| i as u8 ^ round)
                .collect();
            assert!(p.push(&a).unwrap());
            assert!(p.push(b"x").unwrap());
            assert!(!p.push(b"y").unwrap(), "two slots");
            assert_eq!(c.pop(&mut buf, wait), Some(a.len()));
            assert_eq!(&buf[..a.len()], &a[..]);
            assert_eq!(c.pop(&mut buf, wait), Some(1));
            assert_eq!(buf[0], b'x');
            assert_eq!(c.pop(&mut buf, wait), None);
        }
        assert_eq!(p.max_len(), 104, "9 chunks: 8 + 8 x 12 bytes");
        assert!(p.push(&[0; 105]).is_err());
        assert_eq!(resp_chunks(8), 1);
        assert_eq!(resp_chunks(9), 2);
        assert_eq!(resp_chunks(20), 2);
        assert_eq!(resp_chunks(21), 3);
    }
}
