//! The NIC itself: one host thread that behaves like a ConnectX for the subset qfwd uses.
//!
//! Send side. A doorbell is an 8-byte write of a WQE's first control-segment word into
//! one half of the UAR page's BlueFlame register (regular), or a copy of the whole WQE
//! into it (BlueFlame). A write-only MMIO register is modelled with memory: every word of
//! an idle half holds a poison value that no valid control segment has
//! ([`super::layout::BF_POISON`]). The NIC sees a doorbell when the first word is no longer
//! poison, tells a BlueFlame copy from a regular doorbell by the second word, takes each
//! word of a copy by swapping it back to poison (waiting, bounded, for words still in
//! flight: a GPU's 16-byte stores may land in any order), and frees the register by
//! poisoning the first word last. A hardware register queues writes; this one is one deep,
//! so a poster waits until the first word of the half it is about to write is poison again
//! (a load of a line the NIC owns; see `SendQueue::ring`). A doorbell
//! arms the send queue up to the WQE it names; the NIC then executes WQEs up to that point
//! but never past the doorbell record's producer counter. WQEs come from the BlueFlame
//! copy when it holds the next index, otherwise from the send queue (a DMA read). Each
//! completes with a CQE when signaled; a malformed one always completes with an error CQE
//! whose syndrome names the fault, and the NIC goes on (or flushes, see
//! [`super::ErrorPolicy`]). CQEs carry the owner bit of their lap and are published by a
//! Release store of the word holding `op_own`; the NIC never writes past the CQ doorbell
//! record's consumer index.
//!
//! Host path. When a device side owns the send queue (GPU-initiated doorbells), the host's
//! own answers (malformed requests, overload, watchdog) cannot go through that SQ: two
//! producers would race for its producer index. They go through the tagged response ring
//! instead, which the NIC thread drains and puts on the wire directly, standing for a
//! second QP that the host owns on a ConnectX ([`SoftNic::start_with_host_path`]).
//!
//! Receive side. A request from the wire (the emulator-facing transport) consumes one
//! receive WQE (credit from the RQ doorbell record), is written into the next request-ring
//! slot as an RDMA WRITE-with-immediate would, and completes with a `RESP_WR_IMM` CQE whose
//! immediate is the slot index. Without credit or CQ room the NIC leaves requests in the
//! wire (backpressure).
#![forbid(unsafe_code)]

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::layout::{
    ErrorPolicy, NicLayout, SoftNicConfig, BF_HALVES, BF_POISON, BF_POISON_HI, QP_DBREC,
    RX_CQ_DBREC, TX_CQ_DBREC,
};
use super::poster::RespConsumer;
use super::region::NicRegion;
use super::worker::Worker;
use crate::forward::IdlePolicy;
use crate::mlx5::layout::{cqe as cqel, qp_dbrec, uar, wqebbs_for_ds, WQEBB};
use crate::mlx5::wqe::{self, Payload, WqeOp, MAX_DS, MAX_WQE_BYTES};
use crate::mlx5::{Cqe, CqeOpcode, Syndrome};
use crate::transport::Transport;
use crate::Result;

macro_rules! counters {
    ($( $(#[$m:meta])* $name:ident ),* $(,)?) => {
        /// The soft NIC's counters, live (shared with its threads).
        #[derive(Debug, Default)]
        pub struct NicStats { $( $(#[$m])* pub $name: AtomicU64, )* }

        /// A snapshot of [`NicStats`].
        #[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
        pub struct NicCounters { $( $(#[$m])* pub $name: u64, )* }

        impl NicStats {
            pub fn snapshot(&self) -> NicCounters {
                NicCounters { $( $name: self.$name.load(Ordering::Relaxed), )* }
            }
        }

        impl NicCounters {
            /// `(name, value)` pairs, for logs.
            pub fn pairs(&self) -> Vec<(&'static str, u64)> {
                vec![ $( (stringify!($name), self.$name), )* ]
            }
        }
    };
}

counters! {
    /// UAR doorbell writes taken (regular and BlueFlame).
    doorbells,
    /// Of which 8-byte control-word writes.
    doorbells_regular,
    /// Of which BlueFlame copies.
    doorbells_blueflame,
    /// Doorbells written to the half that was not next (the poster did not alternate).
    bf_half_violations,
    /// BlueFlame copies whose words did not all arrive within `bf_wait` (the WQE was read
    /// from the SQ instead).
    bf_incomplete,
    /// BlueFlame copies for a WQE already executed (read from the SQ earlier).
    bf_stale,
    /// Polls of a BlueFlame word still in flight.
    bf_wait_spins,
    /// WQEs executed (success or error).
    wqes_executed,
    /// WQEs read from the send queue (DMA reads).
    sq_dma_reads,
    /// WQEs taken from a BlueFlame copy.
    bf_wqes,
    /// Doorbell records that claimed more than the SQ holds (clamped).
    dbrec_clamped,
    /// CQEs written to the send CQ (success).
    tx_cqes,
    /// Error CQEs written (send and receive).
    error_cqes,
    /// Syndrome of the last error CQE.
    last_syndrome,
    /// Times the NIC found a CQ full and waited.
    cq_full_stalls,
    /// Payload bytes sent on the wire.
    wire_bytes,
    /// Messages handed to the wire.
    wire_sent,
    /// Messages the wire refused until `send_timeout` (lost, as on a UC QP).
    wire_send_failures,
    /// Retries of a send the wire refused (a full inproc ring, a full socket buffer).
    wire_send_retries,
    /// SENDs executed before any peer connected (lost).
    wire_no_peer,
    /// Requests received into the request ring.
    rx_messages,
    /// Requests longer than a ring slot (truncated to it).
    rx_truncated,
    /// Datagrams from an allowed peer other than the connected one (dropped).
    rx_foreign_drops,
    /// Datagrams from a peer outside the allowlist (dropped).
    rx_not_allowed,
    /// Receive errors reported by the wire.
    wire_recv_errors,
    /// Datagrams the wire dropped before the NIC took them (a UDP wire's socket buffer
    /// overflowed while the NIC had no receive credit); read about every millisecond.
    wire_socket_drops,
    /// Responses taken from the host path (the response ring, when a device side owns the
    /// SQ) and put on the wire.
    host_sends,
    /// Host-path responses found torn or too long (lost).
    host_torn,
    /// Loop iterations that found nothing to do.
    idle_polls,
}

/// A held BlueFlame copy, waiting for its index to come up.
#[derive(Clone, Copy)]
struct Held {
    index: u16,
    bytes: [u8; MAX_WQE_BYTES],
    len: usize,
}

/// The NIC's thread state.
struct Nic<W: Transport> {
    region: NicRegion,
    l: NicLayout,
    cfg: SoftNicConfig,
    wire: W,
    peer: Option<W::Peer>,
    /// `peer` has sent a CUQR request (else it holds the QP only until another peer does).
    peer_confirmed: bool,
    stats: Arc<NicStats>,
    /// When the wire's drop counter was last read.
    wire_drops_read: Instant,
    /// SQ consumer counter (WQEBBs, 16 bits as on hardware).
    sq_ci: u16,
    /// The SQ is armed up to here by doorbells.
    rung_upto: u16,
    armed: bool,
    next_half: usize,
    held: [Option<Held>; 2],
    tx_cq_pi: u32,
    rx_cq_pi: u32,
    rq_ci: u16,
    rx_seq: u32,
    qp_error: bool,
    wire_buf: Vec<u8>,
    payload: Vec<u8>,
    wqe: [u8; MAX_WQE_BYTES],
    /// The host path (a device side owns the SQ).
    host: Option<RespConsumer>,
}

/// A running soft NIC: its thread and counters. Dropping it stops the thread (waiting at
/// most the configured `stop_timeout`).
pub struct SoftNic {
    worker: Worker,
    stats: Arc<NicStats>,
    region: NicRegion,
    layout: NicLayout,
}

impl SoftNic {
    /// Initializes the region for `config` (every CQE invalid, BlueFlame halves idle,
    /// doorbell records zero) and starts the NIC thread, with `wire` as its link toward the
    /// QPU side. The QP "connects" to the first peer whose request arrives.
    pub fn start<W>(config: &SoftNicConfig, region: NicRegion, wire: W) -> Result<SoftNic>
    where
        W: Transport + Send + 'static,
        W::Peer: PartialEq + Send,
    {
        SoftNic::start_inner(config, region, wire, false)
    }

    /// [`SoftNic::start`] for a NIC whose send queue a device side owns: the NIC thread
    /// also drains the response ring (the host path, see the module docs) and sends what
    /// it finds. No cpu-assisted proxy may run on the same region.
    pub fn start_with_host_path<W>(
        config: &SoftNicConfig,
        region: NicRegion,
        wire: W,
    ) -> Result<SoftNic>
    where
        W: Transport + Send + 'static,
        W::Peer: PartialEq + Send,
    {
        SoftNic::start_inner(config, region, wire, true)
    }

    fn start_inner<W>(
        config: &SoftNicConfig,
        region: NicRegion,
        wire: W,
        host_path: bool,
    ) -> Result<SoftNic>
    where
        W: Transport + Send + 'static,
        W::Peer: PartialEq + Send,
    {
        let layout = NicLayout::new(config)?;
        layout.init(&region)?;
        let stats = Arc::new(NicStats::default());
        let mut nic = Nic {
            region: region.clone(),
            l: layout,
            cfg: config.clone(),
            wire,
            peer: None,
            peer_confirmed: false,
            stats: stats.clone(),
            wire_drops_read: Instant::now(),
            sq_ci: 0,
            rung_upto: 0,
            armed: false,
            next_half: 0,
            held: [None, None],
            tx_cq_pi: 0,
            rx_cq_pi: 0,
            rq_ci: 0,
            rx_seq: 0,
            qp_error: false,
            wire_buf: vec![0; crate::transport::udp::MAX_DATAGRAM + 1],
            payload: vec![
                0;
                layout
                    .tx_buf_bytes
                    .max(MAX_WQE_BYTES)
                    .max(layout.resp_slot_bytes)
            ],
            wqe: [0; MAX_WQE_BYTES],
            host: host_path.then(|| RespConsumer::new(&region, &layout)),
        };
        let worker = Worker::spawn(
            "qfwd-softnic",
            config.stop_timeout,
            config.nic_core,
            move |stop| nic.run(&stop),
        )?;
        Ok(SoftNic {
            worker,
            stats,
            region,
            layout,
        })
    }

    pub fn counters(&self) -> NicCounters {
        self.stats.snapshot()
    }

    pub fn stats(&self) -> &Arc<NicStats> {
        &self.stats
    }

    pub fn layout(&self) -> &NicLayout {
        &self.layout
    }

    pub fn region(&self) -> &NicRegion {
        &self.region
    }

    /// Whether the NIC thread is still running.
    pub fn is_running(&self) -> bool {
        self.worker.is_running()
    }

    /// Stops the thread (bounded wait) and returns the final counters.
    pub fn stop(mut self) -> Result<NicCounters> {
        self.worker.stop()?;
        Ok(self.stats.snapshot())
    }
}

#[inline]
fn bump(c: &AtomicU64) {
    c.fetch_add(1, Ordering::Relaxed);
}

impl<W: Transport> Nic<W>
where
    W::Peer: PartialEq,
{
    fn run(&mut self, stop: &AtomicBool) {
        let mut spins = 0u32;
        let mut rounds = 0u32;
        loop {
            let mut worked = self.receive();
            worked |= self.take_doorbells();
            worked |= self.execute();
            worked |= self.host_sends();
            rounds = rounds.wrapping_add(1);
            if rounds % 1024 == 0 {
                self.read_wire_drops(Duration::from_millis(1));
            }
            if stop.load(Ordering::Acquire) {
                self.read_wire_drops(Duration::ZERO);
                break;
            }
            if worked {
                spins = 0;
                continue;
            }
            bump(&self.stats.idle_polls);
            match self.cfg.idle {
                IdlePolicy::Spin => std::hint::spin_loop(),
                IdlePolicy::Yield => {
                    // Yield at once on a busy machine; a short nap after a long idle spell
                    // keeps an idle NIC from burning a core.
                    spins = spins.saturating_add(1);
                    if spins > 20_000 {
                        std::thread::sleep(Duration::from_micros(50));
                    } else {
                        std::thread::yield_now();
                    }
                }
            }
        }
    }

    /// Copies the wire's socket drop counter into the NIC's counters, at most every
    /// `every` (the read is a system call).
    fn read_wire_drops(&mut self, every: Duration) {
        if self.wire_drops_read.elapsed() < every {
            return;
        }
        self.wire_drops_read = Instant::now();
        let d = self.wire.drops().socket_overflow;
        self.stats.wire_socket_drops.store(d, Ordering::Relaxed);
    }

    // ---- receive side ------------------------------------------------------------------

    fn cq_has_room(&self, dbrec: usize, pi: u32, cnt: u32) -> bool {
        let ci = self.region.load_be32(dbrec, Ordering::Acquire) & 0x00ff_ffff;
        (pi.wrapping_sub(ci) & 0x00ff_ffff) < cnt
    }

    fn receive(&mut self) -> bool {
        let mut worked = false;
        for _ in 0..16 {
            let posted = self
                .region
                .load_be32(QP_DBREC + 4 * qp_dbrec::RCV, Ordering::Acquire)
                as u16;
            if posted == self.rq_ci || !self.cq_has_room(RX_CQ_DBREC, self.rx_cq_pi, self.l.rx_cqes)
            {
                return worked;
            }
            let (n, peer) = match self.wire.try_recv(&mut self.wire_buf) {
                Ok(Some(got)) => got,
                Ok(None) => return worked,
                Err(_) => {
                    bump(&self.stats.wire_recv_errors);
                    return worked;
                }
            };
            worked = true;
            if !self.wire.is_allowed(&peer) {
                bump(&self.stats.rx_not_allowed);
                continue;
            }
            // The QP connects to the first allowed peer; a peer that has sent only
            // datagrams that are not CUQR requests holds it tentatively, and the first peer
            // to send a request takes it for good. A stray datagram cannot take the QP from
            // the QPU controller: it goes to the ring, where the forwarder counts it as
            // malformed.
            let request =
                crate::wire::parse_request_header(&self.wire_buf[..n.min(self.wire_buf.len())])
                    .is_ok();
            match &self.peer {
                Some(p) if *p == peer => self.peer_confirmed |= request,
                Some(_) if self.peer_confirmed => {
                    bump(&self.stats.rx_foreign_drops);
                    continue;
                }
                Some(_) if !request => {}
                _ => {
                    self.peer = Some(peer);
                    self.peer_confirmed = request;
                }
            }
            let slot = self.rx_seq & (self.l.rx_slots - 1);
            let copy = n.min(self.l.rx_slot_bytes).min(self.wire_buf.len());
            if copy < n {
                bump(&self.stats.rx_truncated);
            }
            self.region
                .write(self.l.rx_slot(slot), &self.wire_buf[..copy]);
            let mut c = Cqe::new(CqeOpcode::RespWrImm, self.l.qpn, self.rq_ci);
            c.imm = slot;
            c.byte_cnt = n as u32;
            // CLOCK_REALTIME, as a ConnectX in real-time clock mode stamps CQEs: when the
            // request reached the host (the wire's kernel timestamp), else now.
            c.timestamp = self
                .wire
                .last_arrival_ns()
                .unwrap_or_else(crate::transport::realtime_ns);
            let at = self.l.rx_cqe(self.rx_cq_pi);
            publish_cqe(
                &self.region,
                at,
                &c.encode(crate::mlx5::cqe::owner_for(self.rx_cq_pi, self.l.rx_cqes)),
            );
            self.rx_cq_pi = self.rx_cq_pi.wrapping_add(1);
            self.rq_ci = self.rq_ci.wrapping_add(1);
            self.rx_seq = self.rx_seq.wrapping_add(1);
            bump(&self.stats.rx_messages);
        }
        worked
    }

    // ---- host path ---------------------------------------------------------------------

    /// Sends what the host put in the response ring (only when a device side owns the SQ).
    fn host_sends(&mut self) -> bool {
        let Some(mut ring) = self.host.take() else {
            return false;
        };
        let mut worked = false;
        for _ in 0..16 {
            let torn = ring.torn;
            match ring.pop(&mut self.payload, self.cfg.bf_wait) {
                Some(n) => {
                    bump(&self.stats.host_sends);
                    self.transmit(n);
                    worked = true;
                }
                None if ring.torn != torn => {
                    bump(&self.stats.host_torn);
                    worked = true;
                }
                None => break,
            }
        }
        self.host = Some(ring);
        worked
    }

    // ---- doorbells ---------------------------------------------------------------------

    /// Takes the doorbells waiting in the two halves, oldest first.
    fn take_doorbells(&mut self) -> bool {
        let e = self.next_half;
        let o = e ^ 1;
        let mut we = self.region.load_u64(BF_HALVES[e], Ordering::Acquire);
        let wo = self.region.load_u64(BF_HALVES[o], Ordering::Acquire);
        if wo != BF_POISON && we == BF_POISON {
            // A poster that alternates wrote the expected half before the other: having
            // seen the other (Acquire), a second look sees the first if it is there.
            we = self.region.load_u64(BF_HALVES[e], Ordering::Acquire);
        }
        let index = |w: u64| {
            let b = w.to_ne_bytes();
            u16::from_be_bytes([b[1], b[2]])
        };
        match (we != BF_POISON, wo != BF_POISON) {
            (false, false) => false,
            (true, false) => self.take_doorbell(e),
            (false, true) => self.take_doorbell(o),
            (true, true) => {
                if index(wo).wrapping_sub(index(we)) as i16 >= 0 {
                    self.take_doorbell(e);
                    self.take_doorbell(o)
                } else {
                    self.take_doorbell(o);
                    self.take_doorbell(e)
                }
            }
        }
    }

    fn take_doorbell(&mut self, h: usize) -> bool {
        let base = BF_HALVES[h];
        let w0 = self.region.load_u64(base, Ordering::Acquire);
        if w0 == BF_POISON {
            return false;
        }
        bump(&self.stats.doorbells);
        if h != self.next_half {
            bump(&self.stats.bf_half_violations);
        }
        self.next_half = h ^ 1;
        let ctrl0 = w0.to_ne_bytes();
        let index = u16::from_be_bytes([ctrl0[1], ctrl0[2]]);
        let ds = ctrl0[7];
        // Arm the SQ up to the end of the WQE this doorbell names, unless it is stale.
        let bbs = if (1..=MAX_DS).contains(&ds) {
            wqebbs_for_ds(ds)
        } else {
            1
        };
        let end = index.wrapping_add(bbs);
        let ahead = end.wrapping_sub(self.sq_ci);
        if ahead != 0 && ahead as u32 <= self.l.sq_wqebbs {
            let current = self.rung_upto.wrapping_sub(self.sq_ci);
            if !self.armed || ahead > current {
                self.rung_upto = end;
            }
            self.armed = true;
        }
        let w1 = self.region.load_u64(base + 8, Ordering::Acquire);
        if w1 == BF_POISON_HI {
            bump(&self.stats.doorbells_regular);
            // Word 0 back to poison last: the register is free for the next write.
            self.region.store_u64(base, BF_POISON, Ordering::Release);
            return true;
        }
        bump(&self.stats.doorbells_blueflame);
        // A BlueFlame copy: take the body words (swapping each back to poison, waiting
        // for words still in flight), then word 1, then word 0 last.
        let mut held = Held {
            index,
            bytes: [0; MAX_WQE_BYTES],
            len: bbs as usize * WQEBB,
        };
        held.bytes[..8].copy_from_slice(&ctrl0);
        held.bytes[8..16].copy_from_slice(&w1.to_ne_bytes());
        let deadline = Instant::now() + self.cfg.bf_wait;
        let mut complete = true;
        for w in (16..held.len).step_by(8) {
            let mut polls = 0u32;
            let v = loop {
                let v = self.region.swap_u64(base + w, BF_POISON, Ordering::AcqRel);
                if v != BF_POISON {
                    break Some(v);
                }
                bump(&self.stats.bf_wait_spins);
                polls += 1;
                if polls % 64 == 0 && Instant::now() >= deadline {
                    break None;
                }
                std::hint::spin_loop();
            };
            match v {
                Some(v) => held.bytes[w..w + 8].copy_from_slice(&v.to_ne_bytes()),
                None => {
                    complete = false;
                    break;
                }
            }
        }
        self.region
            .store_u64(base + 8, BF_POISON_HI, Ordering::Relaxed);
        self.region.store_u64(base, BF_POISON, Ordering::Release);
        if !complete {
            bump(&self.stats.bf_incomplete);
            return true;
        }
        if index.wrapping_sub(self.sq_ci) as u32 >= self.l.sq_wqebbs {
            bump(&self.stats.bf_stale);
            return true;
        }
        if self.held[h].is_some() {
            // A copy the NIC had not reached yet (CQ full): its WQE will come from the SQ.
            bump(&self.stats.bf_stale);
        }
        if self.held[h ^ 1].is_some_and(|o| o.index == index) {
            // An older copy for the same position (a poster rang it twice): the newer wins.
            self.held[h ^ 1] = None;
            bump(&self.stats.bf_stale);
        }
        self.held[h] = Some(held);
        true
    }

    // ---- send queue --------------------------------------------------------------------

    fn execute(&mut self) -> bool {
        if !self.armed {
            return false;
        }
        let dbrec = self
            .region
            .load_be32(QP_DBREC + 4 * qp_dbrec::SND, Ordering::Acquire) as u16;
        let mut posted = dbrec.wrapping_sub(self.sq_ci) as u32;
        if posted > self.l.sq_wqebbs {
            bump(&self.stats.dbrec_clamped);
            posted = self.l.sq_wqebbs;
        }
        let rung = self.rung_upto.wrapping_sub(self.sq_ci) as u32;
        let mut budget = posted.min(rung);
        let mut worked = false;
        while budget > 0 {
            if !self.cq_has_room(TX_CQ_DBREC, self.tx_cq_pi, self.l.tx_cqes) {
                bump(&self.stats.cq_full_stalls);
                return worked;
            }
            let used = self.execute_one(budget as u16);
            self.sq_ci = self.sq_ci.wrapping_add(used);
            budget = budget.saturating_sub(used as u32);
            worked = true;
        }
        if self.rung_upto.wrapping_sub(self.sq_ci) as u32 == 0
            || self.rung_upto.wrapping_sub(self.sq_ci) as u32 > self.l.sq_wqebbs
        {
            self.armed = false;
        }
        // Copies whose WQE was not reached stay held; ones left behind are dropped.
        for h in 0..2 {
            if let Some(held) = &self.held[h] {
                if held.index.wrapping_sub(self.sq_ci) as u32 >= self.l.sq_wqebbs {
                    self.held[h] = None;
                    bump(&self.stats.bf_stale);
                }
            }
        }
        worked
    }

    /// Executes the WQE at `sq_ci` (at most `room` WQEBBs are posted); returns the WQEBBs
    /// it used.
    fn execute_one(&mut self, room: u16) -> u16 {
        let index = self.sq_ci;
        let mut len = 0;
        for h in 0..2 {
            if let Some(held) = self.held[h].take_if(|held| held.index == index) {
                self.wqe[..held.len].copy_from_slice(&held.bytes[..held.len]);
                len = held.len;
                bump(&self.stats.bf_wqes);
                break;
            }
        }
        if len == 0 {
            // DMA-read the first WQEBB, then as many more as its ds says (wrapping).
            let first = self.l.sq_bb(index);
            self.region.read(first, &mut self.wqe[..WQEBB]);
            let ds = self.wqe[7];
            let bbs = if (1..=MAX_DS).contains(&ds) {
                wqebbs_for_ds(ds).min(room)
            } else {
                1
            };
            for k in 1..bbs {
                let at = self.l.sq_bb(index.wrapping_add(k));
                self.region.read(
                    at,
                    &mut self.wqe[k as usize * WQEBB..(k as usize + 1) * WQEBB],
                );
            }
            len = bbs as usize * WQEBB;
            bump(&self.stats.sq_dma_reads);
        }
        bump(&self.stats.wqes_executed);
        let opcode = self.wqe[3];
        if self.qp_error {
            let ds = self.wqe[7];
            let used = if (1..=MAX_DS).contains(&ds) {
                wqebbs_for_ds(ds).min(room)
            } else {
                1
            };
            self.complete_error(index, opcode, Syndrome::WrFlush);
            return used;
        }
        let parsed = match wqe::parse(&self.wqe[..len], index, self.l.qpn, MAX_DS) {
            Ok(p) if wqebbs_for_ds(p.ctrl.ds) > room => Err(Syndrome::LocalQpOp),
            Ok(p) => Ok(p),
            Err(fault) => Err(fault.syndrome()),
        };
        let p = match parsed {
            Ok(p) => p,
            Err(syndrome) => {
                let ds = self.wqe[7];
                let used = if (1..=MAX_DS).contains(&ds) {
                    wqebbs_for_ds(ds).min(room)
                } else {
                    1
                };
                self.complete_error(index, opcode, syndrome);
                return used;
            }
        };
        let used = wqebbs_for_ds(p.ctrl.ds);
        let result = match p.op {
            WqeOp::Nop => Ok(0),
            WqeOp::Send { payload, .. } => self.gather(&payload).inspect(|&n| self.transmit(n)),
            // The far side (an emulator behind a datagram wire) exposes no memory: a
            // responder would NAK with a remote access error.
            WqeOp::Write { .. } => Err(Syndrome::RemoteAccess),
        };
        match result {
            Ok(bytes) if p.ctrl.signaled() => {
                let mut c = Cqe::new(CqeOpcode::Req, self.l.qpn, index);
                c.sop = p.ctrl.opcode;
                c.byte_cnt = bytes as u32;
                c.timestamp = crate::transport::realtime_ns();
                self.write_tx_cqe(&c);
                bump(&self.stats.tx_cqes);
            }
            Ok(_) => {}
            Err(syndrome) => self.complete_error(index, p.ctrl.opcode, syndrome),
        }
        used
    }

    /// Copies the payload into `self.payload`; returns its length.
    fn gather(&mut self, payload: &Payload) -> std::result::Result<usize, Syndrome> {
        match *payload {
            Payload::Inline { offset, len } => {
                self.payload[..len].copy_from_slice(&self.wqe[offset..offset + len]);
                Ok(len)
            }
            Payload::Gather { segs, count } => {
                let mut at = 0;
                for s in &segs[..count] {
                    let n = s.byte_count as usize;
                    if at + n > self.payload.len() {
                        return Err(Syndrome::LocalLength);
                    }
                    let off = match self.region.offset_of(s.addr, n) {
                        Some(off) if s.lkey == self.l.mkey => off,
                        _ => return Err(Syndrome::LocalProt),
                    };
                    self.region.read(off, &mut self.payload[at..at + n]);
                    at += n;
                }
                Ok(at)
            }
        }
    }

    /// Puts `self.payload[..n]` on the wire to the connected peer.
    fn transmit(&mut self, n: usize) {
        let Some(peer) = self.peer else {
            bump(&self.stats.wire_no_peer);
            return;
        };
        let deadline = Instant::now() + self.cfg.send_timeout;
        loop {
            match self.wire.send(peer, &self.payload[..n]) {
                Ok(()) => {
                    bump(&self.stats.wire_sent);
                    self.stats.wire_bytes.fetch_add(n as u64, Ordering::Relaxed);
                    return;
                }
                Err(_) if Instant::now() < deadline => {
                    bump(&self.stats.wire_send_retries);
                    std::thread::yield_now();
                }
                Err(_) => {
                    bump(&self.stats.wire_send_failures);
                    return;
                }
            }
        }
    }

    fn complete_error(&mut self, index: u16, wqe_opcode: u8, syndrome: Syndrome) {
        let c = Cqe::error(CqeOpcode::ReqErr, self.l.qpn, index, wqe_opcode, syndrome);
        self.write_tx_cqe(&c);
        bump(&self.stats.error_cqes);
        self.stats
            .last_syndrome
            .store(syndrome as u64, Ordering::Relaxed);
        if self.cfg.error_policy == ErrorPolicy::Flush {
            self.qp_error = true;
        }
    }

    fn write_tx_cqe(&mut self, c: &Cqe) {
        let at = self.l.tx_cqe(self.tx_cq_pi);
        let owner = crate::mlx5::cqe::owner_for(self.tx_cq_pi, self.l.tx_cqes);
        publish_cqe(&self.region, at, &c.encode(owner));
        self.tx_cq_pi = self.tx_cq_pi.wrapping_add(1);
    }
}

/// Writes a CQE: the first 56 bytes, then the word holding `op_own` with Release, so a
/// consumer that sees the new owner bit (Acquire) sees the whole CQE.
pub(crate) fn publish_cqe(region: &NicRegion, at: usize, bytes: &[u8; cqel::SIZE]) {
    region.write(at, &bytes[..56]);
    let mut last = [0u8; 8];
    last.copy_from_slice(&bytes[56..]);
    region.store_u64(at + 56, u64::from_ne_bytes(last), Ordering::Release);
}

const _: () = assert!(BF_HALVES[1] + uar::BF_SIZE <= uar::PAGE);
