//! The CPU stand-in for the `gpu-direct` device side: one host thread per link that
//! follows the kernel's protocol step for step (`device/direct.cu`), on the same queues
//! and counters, so CI runs the whole data path without a GPU: poll the receive CQE, read
//! the message (from the CQE or its buffer), poison what it read, check the request, run
//! the handler, answer with an inline SEND (regular or BlueFlame doorbell) or through the
//! response ring (cpu-assisted), and return the receive in order.
//!
//! It is also a topology of its own: `data_path = gpu-direct` with `topology = cpu` is a
//! host thread serving a NIC's queues directly, with no forwarding loop.
#![forbid(unsafe_code)]

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crate::abi;
use crate::handler::{Handler, MAX_RESULT_LEN};
use crate::idle::{IdlePolicy, IdleWait};
use crate::mlx5::layout::qp_dbrec;
use crate::mlx5::{CqeOpcode, Doorbell};
use crate::queues::direct::{
    check_request, completion, outcome_counter, poll_cqe, CqePoll, CreditWindow, FunctionTable,
    RxCompletion, RxPosition, Verdict, POISON,
};
use crate::queues::host::{RespProducer, SendQueue};
use crate::queues::layout::{NicLayout, SoftNicConfig, QP_DBREC, RX_CQ_DBREC};
use crate::queues::links::LinkSet;
use crate::shm::SharedRegion;
use crate::stats::DropKind;
use crate::wire::{self, HEADER_LEN};
use crate::worker::Worker;
use crate::Result;

/// What a stand-in thread needs for its link.
struct Link {
    queues: SharedRegion,
    /// The whole region (for the counters).
    region: SharedRegion,
    counters_at: usize,
    l: NicLayout,
    table: FunctionTable,
    handlers: Arc<Vec<Handler>>,
    max_request: u32,
    tx: Tx,
}

enum Tx {
    Post(SendQueue),
    Ring(RespProducer),
}

/// Host threads serving the links' queues as the kernel would.
pub struct StandIn {
    workers: Vec<Worker>,
}

impl StandIn {
    /// Starts one thread per link of `set` (in `region`, initialised by
    /// [`LinkSet::init`]), serving `handlers` (by function-table index) and answering
    /// with `config.doorbell`. Threads are pinned to `cores` in turn when given.
    pub fn start(
        set: &LinkSet,
        region: &SharedRegion,
        config: &SoftNicConfig,
        table: &FunctionTable,
        handlers: Vec<Handler>,
        max_request: u32,
        cores: &[usize],
    ) -> Result<StandIn> {
        let handlers = Arc::new(handlers);
        let mut workers = Vec::new();
        for i in 0..set.links {
            let queues = set.link(region, i)?;
            let tx = match config.doorbell {
                Doorbell::CpuAssisted => Tx::Ring(RespProducer::new(&queues, &set.layout)),
                mode => Tx::Post(SendQueue::new(&queues, config, mode)?),
            };
            let mut link = Link {
                queues,
                region: region.clone(),
                counters_at: set.counters_of(i, 0),
                l: set.layout,
                table: table.clone(),
                handlers: Arc::clone(&handlers),
                max_request,
                tx,
            };
            let idle = config.idle;
            let core = (!cores.is_empty()).then(|| cores[i as usize % cores.len()]);
            workers.push(Worker::spawn(
                "qfwd-stand-in",
                config.stop_timeout,
                core,
                move |stop| link.serve(&stop, idle),
            )?);
        }
        Ok(StandIn { workers })
    }

    /// Whether every thread is still running (they end on the stop sentinel).
    pub fn running(&self) -> usize {
        self.workers.iter().filter(|w| w.is_running()).count()
    }

    /// Waits (bounded by each thread's stop timeout) for the threads, which have seen the
    /// stop sentinel, to end.
    pub fn join(mut self) -> Result<()> {
        for w in &mut self.workers {
            w.stop()?;
        }
        Ok(())
    }
}

/// The per-link counters of the stand-in thread, as the kernel's warps keep theirs.
struct Counters([u64; abi::WARP_COUNTERS as usize]);

impl Counters {
    fn bump(&mut self, k: u32) {
        self.0[k as usize] += 1;
    }
}

impl Link {
    fn serve(&mut self, stop: &AtomicBool, policy: IdlePolicy) {
        let mut idle = IdleWait::new(policy);
        let mut pos = RxPosition::new(0, self.l.rx_cqes, self.l.rx_slots);
        let mut credits = CreditWindow::new(self.l.rx_slots);
        let mut c = Counters([0; abi::WARP_COUNTERS as usize]);
        let mut out = vec![0u8; HEADER_LEN + MAX_RESULT_LEN];
        let mut msg = vec![0u8; self.l.rx_slot_bytes];
        loop {
            let at = self.l.rx_cqe(pos.cqe_slot());
            let tail = self.queues.load_chunk(at + 48);
            let mut mid = self.queues.load_chunk(at + 32);
            c.bump(abi::CTR_POLLS);
            let mut state = poll_cqe(&mid, &tail, pos.owner());
            if state == CqePoll::Torn {
                // Read once more: the CQE was written last, so this sees its chunk 2.
                c.bump(abi::CTR_TORN);
                mid = self.queues.load_chunk(at + 32);
                state = CqePoll::Ready(completion(&mid, &tail));
            }
            let rc = match state {
                CqePoll::Stop => break,
                CqePoll::Empty | CqePoll::Torn => {
                    if c.0[abi::CTR_POLLS as usize] % u64::from(abi::HEARTBEAT_POLLS) == 0 {
                        self.flush(&c);
                    }
                    if stop.load(Ordering::Relaxed) {
                        break;
                    }
                    idle.idle();
                    continue;
                }
                CqePoll::Ready(rc) => rc,
            };
            idle.worked();
            c.bump(abi::CTR_RECEIVED);
            let outcome = self.handle(&pos, &rc, &mut msg, &mut out, &mut c);
            c.bump(outcome);
            if credits.complete(pos.seq) {
                self.return_receives(&credits);
            }
            self.flush(&c);
            pos.advance(1);
        }
        self.flush(&c);
    }

    /// Reads, checks, serves and answers one received message; returns its outcome
    /// counter.
    fn handle(
        &mut self,
        pos: &RxPosition,
        rc: &RxCompletion,
        msg: &mut [u8],
        out: &mut [u8],
        c: &mut Counters,
    ) -> u32 {
        let at = self.l.rx_cqe(pos.cqe_slot());
        if rc.opcode == CqeOpcode::RespErr as u8 {
            self.poison(at, None, 0);
            return outcome_counter(Some(DropKind::RxError), 0);
        }
        let (base, cap) = if rc.inline32 {
            (at, crate::queues::direct::CQE_INLINE_BYTES)
        } else {
            let slot = if rc.opcode == CqeOpcode::RespWrImm as u8 {
                rc.imm & (self.l.rx_slots - 1)
            } else {
                pos.rx_slot()
            };
            (self.l.rx_slot(slot), self.l.rx_slot_bytes)
        };
        let len = (rc.byte_cnt as usize).min(cap);
        for k in 0..len.div_ceil(16) {
            let mut chunk = self.queues.load_chunk(base + 16 * k);
            if chunk == POISON {
                c.bump(abi::CTR_TORN);
                chunk = self.queues.load_chunk(base + 16 * k);
            }
            let n = (len - 16 * k).min(16);
            msg[16 * k..16 * k + n].copy_from_slice(&chunk[..n]);
        }
        self.poison(at, (!rc.inline32).then_some(base), len);
        let verdict = check_request(&msg[..len], rc.byte_cnt, self.max_request, &self.table);
        let (n, status) = match verdict {
            Verdict::Drop(kind) => return outcome_counter(Some(kind), 0),
            Verdict::Answer(h, code) => {
                (wire::write_error_response(out, &h, code).unwrap_or(0), code)
            }
            Verdict::Serve(h, index) => {
                let arg = &msg[HEADER_LEN..HEADER_LEN + h.arg_len as usize];
                let (status, result_len) =
                    match self.handlers[index].run(arg, &mut out[HEADER_LEN..]) {
                        Ok(n) => (wire::status::OK, n),
                        Err(code) => (code, 0),
                    };
                let header = wire::ResponseHeader {
                    status,
                    result_len: result_len as u32,
                    request_id: h.request_id,
                    ptp_timestamp: h.ptp_timestamp,
                };
                let _ = wire::write_response_header(out, &header);
                (HEADER_LEN + result_len, status)
            }
        };
        if n == 0 || !self.send(&out[..n]) {
            return outcome_counter(Some(DropKind::SendFailed), 0);
        }
        c.bump(abi::CTR_POSTED);
        outcome_counter(None, status)
    }

    /// Overwrites what was read of receive `at` (the CQE's first three chunks) and of its
    /// buffer (`len` bytes at `buffer`) with poison.
    fn poison(&self, at: usize, buffer: Option<usize>, len: usize) {
        for k in 0..3 {
            self.queues.store_chunk(at + 16 * k, POISON);
        }
        if let Some(b) = buffer {
            for k in 0..len.div_ceil(16) {
                self.queues.store_chunk(b + 16 * k, POISON);
            }
        }
    }

    fn send(&mut self, datagram: &[u8]) -> bool {
        match &mut self.tx {
            Tx::Post(sq) => sq.post_send(datagram).is_ok(),
            Tx::Ring(ring) => {
                let deadline = std::time::Instant::now() + std::time::Duration::from_millis(200);
                loop {
                    match ring.push(datagram) {
                        Ok(true) => return true,
                        Ok(false) if std::time::Instant::now() < deadline => {
                            std::thread::yield_now()
                        }
                        _ => return false,
                    }
                }
            }
        }
    }

    /// Returns completed receives to the NIC: the receive counter and the CQ's consumer
    /// index (both monotonic: written only when the in-order prefix grows).
    fn return_receives(&self, credits: &CreditWindow) {
        self.queues.store_be32(
            RX_CQ_DBREC,
            (credits.consumed() & 0x00ff_ffff) as u32,
            Ordering::Release,
        );
        self.queues.store_be32(
            QP_DBREC + 4 * qp_dbrec::RCV,
            (credits.posted() & 0xffff) as u32,
            Ordering::Release,
        );
    }

    /// Publishes the counters where the host reads them.
    fn flush(&self, c: &Counters) {
        for (k, v) in c.0.iter().enumerate() {
            self.region
                .store_u64(self.counters_at + 8 * k, *v, Ordering::Relaxed);
        }
    }
}
