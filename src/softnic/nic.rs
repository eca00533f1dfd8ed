//! The NIC itself: an engine that behaves like a ConnectX for the subset qfwd uses
//! ([`NicEngine`]), and the host thread that runs one between a wire and its queues
//! ([`SoftNic`]).
//!
//! Send side. A doorbell is a write into one half of the UAR page's BlueFlame register:
//! the 8-byte first word of a WQE's control segment (regular), or the whole WQE
//! (BlueFlame). As on a ConnectX, doorbells may come back to back: the engine keeps the
//! last first word it saw in each half and takes any change as a doorbell, so a poster
//! never reads the register back. A doorbell arms the send queue up to the end of the WQE
//! it names (a later doorbell covers an earlier one it overwrote); the engine then
//! executes WQEs from the send queue (a DMA read: the poster's system fence made them
//! visible before the doorbell) up to that point, never past the doorbell record's
//! producer counter. A BlueFlame copy spares a ConnectX that DMA read; this engine reads
//! host memory either way, so here the modes differ only in what the poster writes. Each
//! WQE completes with a CQE when signaled; a malformed one always completes with an error
//! CQE whose syndrome names the fault, and the engine goes on (or flushes, see
//! [`super::ErrorPolicy`]). CQEs carry the owner bit of their lap, are written as four
//! 16-byte chunks with the one holding `op_own` last, and never past the CQ doorbell
//! record's consumer index.
//!
//! Host path. When a device side owns the send queue, the host's own answers go through
//! the tagged response ring, which the engine drains and puts on the wire directly,
//! standing for a second QP that the host owns on a ConnectX.
//!
//! Receive side. A request consumes one receive credit (the QP doorbell record's receive
//! counter, ahead of the engine's own) and lands in the next receive buffer as an RDMA
//! WRITE-with-immediate would (`RESP_WR_IMM`, immediate = the buffer), or, with
//! `cqe_inline_scatter` and at most 32 bytes, inside the CQE (`RESP_SEND`,
//! `MLX5_INLINE_SCATTER_32`). Without credit or CQ room the request stays in the wire.
#![forbid(unsafe_code)]

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::idle::IdleWait;
use crate::mlx5::layout::{cqe as cqel, qp_dbrec, uar, wqebbs_for_ds, WQEBB};
use crate::mlx5::wqe::{self, Payload, WqeOp, MAX_DS, MAX_WQE_BYTES};
use crate::mlx5::{Cqe, CqeOpcode, Syndrome};
use crate::queues::host::RespConsumer;
use crate::queues::layout::{
    ErrorPolicy, NicLayout, SoftNicConfig, BF_HALVES, QP_DBREC, RX_CQ_DBREC, TX_CQ_DBREC,
};
use crate::shm::SharedRegion;
use crate::transport::Transport;
use crate::worker::Worker;
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
    /// Doorbells taken (a changed first word in a BlueFlame half).
    doorbells,
    /// WQEs executed (success or error).
    wqes_executed,
    /// WQEs read from the send queue (DMA reads).
    sq_dma_reads,
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
    /// Requests received (into a buffer or a CQE).
    rx_messages,
    /// Of which scattered into the CQE.
    rx_scattered,
    /// Requests longer than a receive buffer (truncated to it).
    rx_truncated,
    /// Times a request waited for a receive credit or CQ room.
    rx_no_credit,
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

#[inline]
fn bump(c: &AtomicU64) {
    c.fetch_add(1, Ordering::Relaxed);
}

/// One QP's NIC: its receive engine, doorbells, send engine and host path, driven by
/// whoever owns it (the [`SoftNic`] thread, or an emulator thread standing for a link's
/// NIC). Sends go to the sink given to [`NicEngine::poll_send`].
pub struct NicEngine {
    region: SharedRegion,
    l: NicLayout,
    cfg: SoftNicConfig,
    stats: Arc<NicStats>,
    /// SQ consumer counter (WQEBBs, 16 bits as on hardware).
    sq_ci: u16,
    /// The SQ is armed up to here by doorbells.
    rung_upto: u16,
    armed: bool,
    /// The first word last seen in each BlueFlame half.
    last_doorbell: [u64; 2],
    tx_cq_pi: u32,
    rx_cq_pi: u32,
    rq_ci: u16,
    rx_seq: u32,
    qp_error: bool,
    payload: Vec<u8>,
    wqe: [u8; MAX_WQE_BYTES],
    /// The host path (a device side owns the SQ).
    host: Option<RespConsumer>,
}

impl NicEngine {
    /// An engine over `region`, which must already be initialised for `config` (the NIC's
    /// power-on state: [`NicLayout::init`], or a link set's init). With `host_path`, it
    /// also drains the response ring (a device side owns the SQ).
    pub fn new(config: &SoftNicConfig, region: SharedRegion, host_path: bool) -> Result<NicEngine> {
        let l = NicLayout::new(config)?;
        let host = host_path.then(|| RespConsumer::new(&region, &l));
        Ok(NicEngine {
            last_doorbell: [
                region.load_u64(BF_HALVES[0], Ordering::Acquire),
                region.load_u64(BF_HALVES[1], Ordering::Acquire),
            ],
            region,
            l,
            cfg: config.clone(),
            stats: Arc::new(NicStats::default()),
            sq_ci: 0,
            rung_upto: 0,
            armed: false,
            tx_cq_pi: 0,
            rx_cq_pi: 0,
            rq_ci: 0,
            rx_seq: 0,
            qp_error: false,
            payload: vec![0; l.tx_buf_bytes.max(MAX_WQE_BYTES).max(l.resp_slot_bytes)],
            wqe: [0; MAX_WQE_BYTES],
            host,
        })
    }

    pub fn stats(&self) -> &Arc<NicStats> {
        &self.stats
    }

    pub fn layout(&self) -> &NicLayout {
        &self.l
    }

    fn cq_has_room(&self, dbrec: usize, pi: u32, cnt: u32) -> bool {
        let ci = self.region.load_be32(dbrec, Ordering::Acquire) & 0x00ff_ffff;
        (pi.wrapping_sub(ci) & 0x00ff_ffff) < cnt
    }

    /// Whether a request could land now: a receive credit and CQ room.
    pub fn can_receive(&self) -> bool {
        let posted = self
            .region
            .load_be32(QP_DBREC + 4 * qp_dbrec::RCV, Ordering::Acquire) as u16;
        let credit = posted.wrapping_sub(self.rq_ci) as i16 > 0;
        credit && self.cq_has_room(RX_CQ_DBREC, self.rx_cq_pi, self.l.rx_cqes)
    }

    /// Lands one request from the wire (see the module docs), its CQE stamped now
    /// (CLOCK_REALTIME); `false` when it cannot now (no receive credit or CQ room: the
    /// caller keeps it and tries again).
    pub fn receive(&mut self, msg: &[u8]) -> bool {
        self.receive_at(msg, crate::transport::realtime_ns())
    }

    /// [`NicEngine::receive`] with the CQE's timestamp given: when the request reached the
    /// host (CLOCK_REALTIME ns), as a ConnectX in real-time clock mode stamps CQEs.
    pub fn receive_at(&mut self, msg: &[u8], timestamp_ns: u64) -> bool {
        if !self.can_receive() {
            bump(&self.stats.rx_no_credit);
            return false;
        }
        let n = msg.len();
        let slot = self.rx_seq & (self.l.rx_slots - 1);
        let scatter = self.cfg.cqe_inline_scatter && n <= crate::queues::direct::CQE_INLINE_BYTES;
        let mut c = if scatter {
            Cqe::new(CqeOpcode::RespSend, self.l.qpn, self.rq_ci)
        } else {
            let mut c = Cqe::new(CqeOpcode::RespWrImm, self.l.qpn, self.rq_ci);
            c.imm = slot;
            c
        };
        c.byte_cnt = n as u32;
        c.timestamp = timestamp_ns;
        let mut bytes = c.encode(crate::mlx5::cqe::owner_for(self.rx_cq_pi, self.l.rx_cqes));
        if scatter {
            bytes[..n].copy_from_slice(msg);
            bytes[cqel::OP_OWN] |= (crate::abi::CQE_FORMAT_INLINE_32 as u8) << 2;
            bump(&self.stats.rx_scattered);
        } else {
            let copy = n.min(self.l.rx_slot_bytes);
            if copy < n {
                bump(&self.stats.rx_truncated);
            }
            write_chunks(&self.region, self.l.rx_slot(slot), &msg[..copy]);
        }
        publish_cqe(&self.region, self.l.rx_cqe(self.rx_cq_pi), &bytes);
        self.rx_cq_pi = self.rx_cq_pi.wrapping_add(1);
        self.rq_ci = self.rq_ci.wrapping_add(1);
        self.rx_seq = self.rx_seq.wrapping_add(1);
        bump(&self.stats.rx_messages);
        true
    }

    /// Takes doorbells, executes what they armed and drains the host path; every message
    /// to send goes to `sink`. Returns whether anything happened.
    pub fn poll_send(&mut self, sink: &mut dyn FnMut(&[u8])) -> bool {
        let mut worked = self.take_doorbells();
        worked |= self.execute(sink);
        worked |= self.host_sends(sink);
        worked
    }

    /// Sends what the host put in the response ring (only when a device side owns the SQ).
    fn host_sends(&mut self, sink: &mut dyn FnMut(&[u8])) -> bool {
        let Some(mut ring) = self.host.take() else {
            return false;
        };
        let mut worked = false;
        for _ in 0..16 {
            let torn = ring.torn;
            match ring.pop(&mut self.payload, self.cfg.bf_wait) {
                Some(n) => {
                    bump(&self.stats.host_sends);
                    sink(&self.payload[..n]);
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

    /// Takes a doorbell from each half whose first word changed, older index first.
    fn take_doorbells(&mut self) -> bool {
        let words = [
            self.region.load_u64(BF_HALVES[0], Ordering::Acquire),
            self.region.load_u64(BF_HALVES[1], Ordering::Acquire),
        ];
        let index = |w: u64| {
            let b = w.to_ne_bytes();
            u16::from_be_bytes([b[1], b[2]])
        };
        let new = [
            words[0] != self.last_doorbell[0],
            words[1] != self.last_doorbell[1],
        ];
        let order =
            if new[0] && new[1] && (index(words[0]).wrapping_sub(index(words[1])) as i16) > 0 {
                [1, 0]
            } else {
                [0, 1]
            };
        let mut worked = false;
        for h in order {
            if new[h] {
                self.last_doorbell[h] = words[h];
                self.arm(words[h]);
                worked = true;
            }
        }
        worked
    }

    /// Arms the SQ up to the end of the WQE whose first control word is `w0`, unless it
    /// names a WQE already executed (a stale or repeated doorbell).
    fn arm(&mut self, w0: u64) {
        bump(&self.stats.doorbells);
        let b = w0.to_ne_bytes();
        let index = u16::from_be_bytes([b[1], b[2]]);
        let ds = b[7];
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
    }

    // ---- send queue --------------------------------------------------------------------

    fn execute(&mut self, sink: &mut dyn FnMut(&[u8])) -> bool {
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
            let used = self.execute_one(budget as u16, sink);
            self.sq_ci = self.sq_ci.wrapping_add(used);
            budget = budget.saturating_sub(used as u32);
            worked = true;
        }
        let left = self.rung_upto.wrapping_sub(self.sq_ci) as u32;
        if left == 0 || left > self.l.sq_wqebbs {
            self.armed = false;
        }
        worked
    }

    /// WQEBBs a WQE whose control segment says `ds` occupies, at most `room`.
    fn used_bbs(ds: u8, room: u16) -> u16 {
        if (1..=MAX_DS).contains(&ds) {
            wqebbs_for_ds(ds).min(room)
        } else {
            1
        }
    }

    /// Executes the WQE at `sq_ci` (at most `room` WQEBBs are posted); returns the WQEBBs
    /// it used.
    fn execute_one(&mut self, room: u16, sink: &mut dyn FnMut(&[u8])) -> u16 {
        let index = self.sq_ci;
        // DMA-read the first WQEBB, then as many more as its ds says (wrapping).
        self.region
            .read(self.l.sq_bb(index), &mut self.wqe[..WQEBB]);
        let bbs = Self::used_bbs(self.wqe[7], room);
        for k in 1..bbs {
            let at = self.l.sq_bb(index.wrapping_add(k));
            self.region.read(
                at,
                &mut self.wqe[k as usize * WQEBB..(k as usize + 1) * WQEBB],
            );
        }
        let len = bbs as usize * WQEBB;
        bump(&self.stats.sq_dma_reads);
        bump(&self.stats.wqes_executed);
        let opcode = self.wqe[3];
        if self.qp_error {
            self.complete_error(index, opcode, Syndrome::WrFlush);
            return bbs;
        }
        let parsed = match wqe::parse(&self.wqe[..len], index, self.l.qpn, MAX_DS) {
            Ok(p) if wqebbs_for_ds(p.ctrl.ds) > room => Err(Syndrome::LocalQpOp),
            Ok(p) => Ok(p),
            Err(fault) => Err(fault.syndrome()),
        };
        let p = match parsed {
            Ok(p) => p,
            Err(syndrome) => {
                self.complete_error(index, opcode, syndrome);
                return bbs;
            }
        };
        let used = wqebbs_for_ds(p.ctrl.ds);
        let result = match p.op {
            WqeOp::Nop => Ok(0),
            WqeOp::Send { payload, .. } => {
                self.gather(&payload).inspect(|&n| sink(&self.payload[..n]))
            }
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

/// Writes `bytes` at `at` (16-aligned) as whole 16-byte chunks, the last one zero-padded.
fn write_chunks(region: &SharedRegion, at: usize, bytes: &[u8]) {
    for (k, part) in bytes.chunks(16).enumerate() {
        let mut c = [0u8; 16];
        c[..part.len()].copy_from_slice(part);
        region.store_chunk(at + 16 * k, c);
    }
}

/// Writes a CQE as four 16-byte chunks, the one holding `op_own` last: a consumer that sees
/// the new owner bit (Acquire, or a later read) sees the whole CQE.
pub(crate) fn publish_cqe(region: &SharedRegion, at: usize, bytes: &[u8; cqel::SIZE]) {
    for k in 0..4 {
        let mut c = [0u8; 16];
        c.copy_from_slice(&bytes[16 * k..16 * k + 16]);
        region.store_chunk(at + 16 * k, c);
    }
}

/// The soft NIC's thread: an engine between a wire and its queues.
struct NicThread<W: Transport> {
    engine: NicEngine,
    wire: W,
    peer: Option<W::Peer>,
    /// `peer` has sent a CUQR request (else it holds the QP only until another peer does).
    peer_confirmed: bool,
    /// When the wire's drop counter was last read.
    wire_drops_read: Instant,
    wire_buf: Vec<u8>,
    /// A request taken from the wire that found no credit yet.
    pending: Option<usize>,
}

/// A running soft NIC: its thread and counters. Dropping it stops the thread (waiting at
/// most the configured `stop_timeout`).
pub struct SoftNic {
    worker: Worker,
    stats: Arc<NicStats>,
    region: SharedRegion,
    layout: NicLayout,
}

impl SoftNic {
    /// Initializes the region for `config` (every CQE invalid, BlueFlame halves idle,
    /// doorbell records zero) and starts the NIC thread, with `wire` as its link toward the
    /// QPU side. The QP "connects" to the first peer whose request arrives.
    pub fn start<W>(config: &SoftNicConfig, region: SharedRegion, wire: W) -> Result<SoftNic>
    where
        W: Transport + Send + 'static,
        W::Peer: PartialEq + Send,
    {
        NicLayout::new(config)?.init(&region)?;
        SoftNic::start_prepared(config, region, wire, false)
    }

    /// [`SoftNic::start`] for a NIC whose send queue a device side owns: the NIC thread
    /// also drains the response ring (the host path, see the module docs) and sends what
    /// it finds. No cpu-assisted proxy may run on the same region.
    pub fn start_with_host_path<W>(
        config: &SoftNicConfig,
        region: SharedRegion,
        wire: W,
    ) -> Result<SoftNic>
    where
        W: Transport + Send + 'static,
        W::Peer: PartialEq + Send,
    {
        NicLayout::new(config)?.init(&region)?;
        SoftNic::start_prepared(config, region, wire, true)
    }

    /// Starts the NIC thread on a region its owner has already initialised (a link of a
    /// [`crate::queues::links::LinkSet`]).
    pub fn start_prepared<W>(
        config: &SoftNicConfig,
        region: SharedRegion,
        wire: W,
        host_path: bool,
    ) -> Result<SoftNic>
    where
        W: Transport + Send + 'static,
        W::Peer: PartialEq + Send,
    {
        let engine = NicEngine::new(config, region.clone(), host_path)?;
        let stats = engine.stats().clone();
        let layout = *engine.layout();
        let mut nic = NicThread {
            engine,
            wire,
            peer: None,
            peer_confirmed: false,
            wire_drops_read: Instant::now(),
            wire_buf: vec![0; crate::wire::MAX_DATAGRAM + 1],
            pending: None,
        };
        let (idle, timeout) = (config.idle, config.send_timeout);
        let worker = Worker::spawn(
            "qfwd-softnic",
            config.stop_timeout,
            config.nic_core,
            move |stop| nic.run(&stop, IdleWait::new(idle), timeout),
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

    pub fn region(&self) -> &SharedRegion {
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

impl<W: Transport> NicThread<W>
where
    W::Peer: PartialEq,
{
    fn run(&mut self, stop: &AtomicBool, mut idle: IdleWait, send_timeout: Duration) {
        let mut rounds = 0u32;
        loop {
            let mut worked = self.receive();
            let NicThread {
                engine, wire, peer, ..
            } = self;
            let stats = engine.stats().clone();
            worked |=
                engine.poll_send(&mut |bytes| transmit(wire, *peer, bytes, &stats, send_timeout));
            rounds = rounds.wrapping_add(1);
            if rounds % 1024 == 0 {
                self.read_wire_drops(Duration::from_millis(1));
            }
            if stop.load(Ordering::Acquire) {
                self.read_wire_drops(Duration::ZERO);
                break;
            }
            if worked {
                idle.worked();
                continue;
            }
            bump(&self.engine.stats().idle_polls);
            idle.idle();
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
        self.engine
            .stats()
            .wire_socket_drops
            .store(d, Ordering::Relaxed);
    }

    /// Moves up to 16 requests from the wire into the queues.
    fn receive(&mut self) -> bool {
        let mut worked = false;
        for _ in 0..16 {
            let n = match self.pending.take() {
                Some(n) => n,
                None => {
                    if !self.engine.can_receive() {
                        return worked;
                    }
                    match self.wire.try_recv(&mut self.wire_buf) {
                        Ok(Some((n, peer))) => {
                            worked = true;
                            if !self.accept(peer, n) {
                                continue;
                            }
                            n
                        }
                        Ok(None) => return worked,
                        Err(_) => {
                            bump(&self.engine.stats().wire_recv_errors);
                            return worked;
                        }
                    }
                }
            };
            let n = n.min(self.wire_buf.len());
            // When the request reached the host (the wire's kernel timestamp), else now.
            let at = self
                .wire
                .last_arrival_ns()
                .unwrap_or_else(crate::transport::realtime_ns);
            if !self.engine.receive_at(&self.wire_buf[..n], at) {
                self.pending = Some(n);
                return worked;
            }
            worked = true;
        }
        worked
    }

    /// Whether the `n`-byte datagram from `peer` (in the wire buffer) is for this QP. The QP
    /// connects to the first allowed peer; a peer that has sent only datagrams that are not
    /// CUQR requests holds it tentatively, and the first peer to send a request takes it
    /// for good. A stray datagram cannot take the QP from the QPU controller: it goes to
    /// the queues, where the device side counts it as malformed.
    fn accept(&mut self, peer: W::Peer, n: usize) -> bool {
        if !self.wire.is_allowed(&peer) {
            bump(&self.engine.stats().rx_not_allowed);
            return false;
        }
        let request =
            crate::wire::parse_request_header(&self.wire_buf[..n.min(self.wire_buf.len())]).is_ok();
        match &self.peer {
            Some(p) if *p == peer => self.peer_confirmed |= request,
            Some(_) if self.peer_confirmed => {
                bump(&self.engine.stats().rx_foreign_drops);
                return false;
            }
            Some(_) if !request => {}
            _ => {
                self.peer = Some(peer);
                self.peer_confirmed = request;
            }
        }
        true
    }
}

/// Puts `bytes` on the wire to the connected peer, retrying a refused send until
/// `timeout`.
fn transmit<W: Transport>(
    wire: &mut W,
    peer: Option<W::Peer>,
    bytes: &[u8],
    stats: &NicStats,
    timeout: Duration,
) {
    let Some(peer) = peer else {
        bump(&stats.wire_no_peer);
        return;
    };
    let deadline = Instant::now() + timeout;
    loop {
        match wire.send(peer, bytes) {
            Ok(()) => {
                bump(&stats.wire_sent);
                stats
                    .wire_bytes
                    .fetch_add(bytes.len() as u64, Ordering::Relaxed);
                return;
            }
            Err(_) if Instant::now() < deadline => {
                bump(&stats.wire_send_retries);
                std::thread::yield_now();
            }
            Err(_) => {
                bump(&stats.wire_send_failures);
                return;
            }
        }
    }
}

const _: () = assert!(BF_HALVES[1] + uar::BF_SIZE <= uar::PAGE);
