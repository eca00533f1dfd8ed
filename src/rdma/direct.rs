//! A ConnectX queue set for the `gpu-direct` data path: one QP per QPU link whose receive
//! CQ, send queue, send CQ and doorbells a device side serves itself (as DOCA GPUNetIO and
//! NVSHMEM's IBGDA do); the CPU keeps the control path.
//!
//! [`ConnectxLink::open`] opens the device (a context per link, so that each link has a
//! UAR page and BlueFlame register of its own), creates a PD, a send CQ, a receive CQ and a
//! UC or RC QP (as the `rdma` transport does), moves the QP to INIT, has the caller register
//! the receive buffers (GPU memory through dma-buf, or pinned host memory) and posts every
//! receive WQE once: WQE i points at buffer i, and the device side returns a receive by
//! advancing the doorbell record's receive counter, never by posting again. It reads the
//! mlx5 objects (`mlx5dv_init_obj`), checks what the device side assumes
//! ([`check_queues`]: 64-byte CQEs, one receive WQE per buffer, ...), and poisons every
//! receive CQE's first 48 bytes (the receive protocol of `queues::direct`).
//!
//! Requests are the QPU side's RDMA WRITE-with-immediate ([`super::RdmaClient`], through the
//! same control plane): the payload lands where the sender writes (the advertised ring,
//! buffer `imm`), the receive WQE only yields the completion. A SEND of at most 32 bytes
//! would land in the CQE itself (`MLX5_INLINE_SCATTER_32`); the device side reads each
//! CQE's format bits, so either works. [`ConnectxLink::device_ranges`] lists the memory a
//! device must map, [`ConnectxLink::desc`] describes the queues as an [`abi::LinkDesc`].

use std::fmt;
use std::sync::atomic::{fence, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::control::Endpoint;
use super::transport::{OpenPort, RdmaConfig};
use super::verbs::{Context, Cq, Mr, Pd, Qp, QpKind};
use crate::abi::{self, LinkDesc};
use crate::mlx5::dv::{CqView, QpView};
use crate::mlx5::layout::{cqe, WQEBB};
use crate::mlx5::CqeOpcode;
use crate::queues::direct::{stop_chunk, POISON};
use crate::queues::layout::SoftNicConfig;
use crate::shm::{ForeignMemory, ForeignRange, SharedRegion, REGION_ALIGN};
use crate::{Error, Result};

/// Where a link's receive buffers live.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RxPlacement {
    /// GPU memory registered through a dma-buf (`ibv_reg_dmabuf_mr`).
    GpuDmaBuf,
    /// GPU memory registered through the legacy peer-memory client (`nvidia_peermem`).
    GpuPeerMemory,
    /// Pinned host memory the GPU maps (`ibv_reg_mr`).
    HostPinned,
}

impl fmt::Display for RxPlacement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            RxPlacement::GpuDmaBuf => "GPU memory (dma-buf)",
            RxPlacement::GpuPeerMemory => "GPU memory (nvidia_peermem)",
            RxPlacement::HostPinned => "pinned host memory",
        })
    }
}

/// A link's receive buffers, registered in its PD.
pub struct RxBuffers {
    /// The registration (it keeps the memory alive).
    pub mr: Mr,
    /// Buffer 0 as the NIC addresses it: what receive WQEs and the QPU's writes name.
    pub nic_addr: u64,
    /// Buffer 0 as the device side addresses it.
    pub device_addr: u64,
    pub placement: RxPlacement,
    /// The buffers as the host reads them (pinned host memory only).
    pub host: Option<SharedRegion>,
}

/// A link's queues as mlx5 direct verbs describe them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mlx5Queues {
    pub qp: QpView,
    pub send_cq: CqView,
    pub recv_cq: CqView,
    /// SENDs of at most 32 bytes land in the receive CQE (responder scatter-to-CQE).
    pub scatter_to_cqe: bool,
}

/// Whether rdma-core's mlx5 provider asked for responder scatter-to-CQE: it does unless
/// `MLX5_SCATTER_TO_CQE=0` (`env`), and with 64-byte CQEs the NIC then scatters received
/// SENDs of at most 32 bytes into the CQE. WRITE-with-immediate payloads never are.
pub fn scatter_to_cqe_expected(env: Option<&str>, cqe_size: u32) -> bool {
    cqe_size == cqe::SIZE as u32 && env != Some("0")
}

/// What the device side assumes of a link's queues, checked: `Err` says what differs.
pub fn check_queues(
    q: &Mlx5Queues,
    rx_slots: u32,
    signal_every: u32,
) -> std::result::Result<(), String> {
    for (name, cq) in [("receive", &q.recv_cq), ("send", &q.send_cq)] {
        if cq.cqe_size != cqe::SIZE as u32 {
            return Err(format!(
                "the {name} CQ has {}-byte CQEs; the device side reads 64-byte CQEs (unset \
                 MLX5_CQE_SIZE)",
                cq.cqe_size
            ));
        }
        if !cq.cqe_cnt.is_power_of_two() || cq.buf == 0 || cq.dbrec == 0 {
            return Err(format!("the {name} CQ is not usable directly: {cq:?}"));
        }
    }
    if !rx_slots.is_power_of_two() || rx_slots > abi::MAX_RX_SLOTS {
        return Err(format!(
            "rx_slots = {rx_slots}: a power of two up to {}",
            abi::MAX_RX_SLOTS
        ));
    }
    if q.qp.rq.wqe_cnt != rx_slots {
        return Err(format!(
            "the receive queue has {} WQEs for {rx_slots} receive buffers: WQE i must point at \
             buffer i (mlx5 makes at least 4: use rx_slots >= 4)",
            q.qp.rq.wqe_cnt
        ));
    }
    if q.recv_cq.cqe_cnt < 2 * rx_slots {
        return Err(format!(
            "the receive CQ has {} entries; gpu-direct needs twice the {rx_slots} receives",
            q.recv_cq.cqe_cnt
        ));
    }
    let sq = &q.qp.sq;
    if sq.stride != WQEBB as u32 || !sq.wqe_cnt.is_power_of_two() || sq.wqe_cnt < 8 {
        return Err(format!(
            "the send queue has {} WQEBBs of {} bytes; the device side writes 64-byte WQEBBs \
             into a power-of-two queue of at least 8",
            sq.wqe_cnt, sq.stride
        ));
    }
    if signal_every == 0 || signal_every > sq.wqe_cnt / 2 {
        return Err(format!(
            "signal_every = {signal_every}: must be 1..={} (half the send queue)",
            sq.wqe_cnt / 2
        ));
    }
    if q.send_cq.cqe_cnt as u64 * signal_every as u64 <= sq.wqe_cnt as u64 {
        return Err(format!(
            "the send CQ has {} entries: too few for a {}-WQEBB send queue signaled every {signal_every}",
            q.send_cq.cqe_cnt, sq.wqe_cnt
        ));
    }
    if q.qp.bf_reg == 0 || q.qp.dbrec == 0 || sq.buf == 0 {
        return Err(format!(
            "the QP has no doorbell register or buffer: {:?}",
            q.qp
        ));
    }
    Ok(())
}

/// One QPU link's ConnectX queues, served by a device side.
pub struct ConnectxLink {
    // Drop order: the QP before the receive buffers it points at; everything else is
    // reference counted (each verbs object keeps what it was made from alive).
    qp: Arc<Qp>,
    rx: RxBuffers,
    send_cq: Arc<Cq>,
    recv_cq: Arc<Cq>,
    _pd: Arc<Pd>,
    ctx: Arc<Context>,
    /// The receive CQ as the host reads and writes it.
    rx_cq: SharedRegion,
    queues: Mlx5Queues,
    rx_slots: u32,
    rx_slot_bytes: u32,
    max_send: u32,
    ours: Endpoint,
    port: u8,
    gid_index: u8,
}

/// A view of provider memory at `addr` as a region (rounded out to [`REGION_ALIGN`]), and
/// the offset of `addr` in it.
///
/// # Safety
/// `addr..addr + len`, rounded out to whole 4 KiB pages, must stay mapped while `owner`
/// lives, and every agent touching it must use aligned accesses of at most 16 bytes (the
/// NIC's DMA, the device side's volatile accesses, [`SharedRegion`]'s atomics).
unsafe fn provider_region(
    addr: u64,
    len: usize,
    owner: Box<dyn std::any::Any + Send + Sync>,
) -> Result<(SharedRegion, usize)> {
    let base = addr - addr % REGION_ALIGN as u64;
    let off = (addr - base) as usize;
    let ptr = std::ptr::NonNull::new(base as *mut u8).ok_or_else(|| Error::SoftNicLayout {
        detail: format!("provider memory at {addr:#x} is null"),
    })?;
    // SAFETY: the caller's contract, for the whole pages.
    let region = unsafe {
        SharedRegion::from_raw_parts(ptr, (off + len).next_multiple_of(REGION_ALIGN), owner)
    }?;
    Ok((region, off))
}

impl ConnectxLink {
    /// Creates the link's queues on `cfg`'s device and port, sized by `sizes` (`rx_slots`
    /// receive buffers of `rx_slot_bytes`, `rx_cqes` receive CQEs, about `sq_wqebbs` send
    /// WQEBBs, `signal_every`); `register` registers `rx_slots x rx_slot_bytes` bytes of
    /// receive buffers in the PD it is given. The QP is left in INIT with every receive
    /// posted; [`connect`](Self::connect) brings it up.
    pub fn open(
        cfg: &RdmaConfig,
        sizes: &SoftNicConfig,
        register: impl FnOnce(&Arc<Pd>, usize) -> Result<RxBuffers>,
    ) -> Result<ConnectxLink> {
        let opened = OpenPort::open(cfg)?;
        let ctx = Arc::clone(&opened.ctx);
        let bad = |detail: String| Error::ConnectxQueues {
            device: ctx.name().to_string(),
            detail,
        };
        let (rx_slots, rx_slot_bytes) = (sizes.rx_slots, sizes.rx_slot_bytes);
        if rx_slot_bytes == 0 || rx_slot_bytes % 64 != 0 || !sizes.rx_cqes.is_power_of_two() {
            return Err(bad(format!(
                "rx_slot_bytes {rx_slot_bytes} (a multiple of 64), rx_cqes {} (a power of two)",
                sizes.rx_cqes
            )));
        }
        let pd = Pd::new(&ctx)?;
        // mlx5 rounds a CQ of n entries up to the power of two above n: ask for one less.
        let recv_cq = Cq::new(&ctx, sizes.rx_cqes.max(2) - 1)?;
        let max_send = (sizes.sq_wqebbs / 2).max(2 * sizes.signal_every).max(8);
        // Every signaled WQE's completion must fit: room for one per WQEBB.
        let send_cq = Cq::new(
            &ctx,
            (4 * sizes.sq_wqebbs).max(sizes.tx_cqes).next_power_of_two() - 1,
        )?;
        let qp = Arc::new(Qp::new(
            &pd,
            &send_cq,
            &recv_cq,
            cfg.kind,
            max_send,
            rx_slots,
            abi::MAX_INLINE,
        )?);
        qp.init(cfg.port)?;
        let (qpv, sendv, recvv) = qp.mlx5_queues(&send_cq, &recv_cq)?;
        let queues = Mlx5Queues {
            qp: qpv,
            send_cq: sendv,
            recv_cq: recvv,
            scatter_to_cqe: scatter_to_cqe_expected(
                std::env::var("MLX5_SCATTER_TO_CQE").ok().as_deref(),
                recvv.cqe_size,
            ),
        };
        check_queues(&queues, rx_slots, sizes.signal_every).map_err(bad)?;
        let rx = register(&pd, rx_slots as usize * rx_slot_bytes as usize)?;
        for i in 0..rx_slots {
            let at = rx.nic_addr + i as u64 * rx_slot_bytes as u64;
            // SAFETY: buffer i is registered under the MR's lkey and stays so while the QP
            // lives (`rx` is dropped after `qp`); only the NIC writes it until the device
            // side reads it, as the receive protocol says.
            unsafe { qp.post_recv(i as u64, at, rx_slot_bytes, rx.mr.lkey()) }?;
        }
        let cq_bytes = (recvv.cqe_cnt * recvv.cqe_size) as usize;
        // SAFETY: the provider's CQ buffer (page-aligned, whole pages) lives as long as the
        // CQ, which the region's owner keeps; the NIC writes whole CQEs, the device side and
        // the host use aligned accesses of at most 16 bytes.
        let (rx_cq, _) =
            unsafe { provider_region(recvv.buf, cq_bytes, Box::new(Arc::clone(&recv_cq))) }?;
        for n in 0..recvv.cqe_cnt as usize {
            for c in 0..3 {
                rx_cq.store_chunk(n * cqe::SIZE + 16 * c, POISON);
            }
        }
        fence(Ordering::SeqCst);
        let mut ours = opened.endpoint(qp.qpn());
        ours.ring_addr = rx.nic_addr;
        ours.rkey = rx.mr.rkey();
        // Half the buffers: a WRITE-with-immediate client cannot see which receives the
        // device side has returned, so it keeps at most half of them in flight.
        ours.slots = (rx_slots / 2).max(1);
        ours.slot_bytes = rx_slot_bytes;
        Ok(ConnectxLink {
            qp,
            rx,
            send_cq,
            recv_cq,
            _pd: pd,
            ctx,
            rx_cq,
            queues,
            rx_slots,
            rx_slot_bytes,
            max_send,
            ours,
            port: cfg.port,
            gid_index: opened.gid_index,
        })
    }

    pub fn device(&self) -> &str {
        self.ctx.name()
    }

    pub fn kind(&self) -> QpKind {
        self.qp.kind()
    }

    /// What HELLO_ACK carries: the QP, and the receive buffers as the request ring.
    pub fn endpoint(&self) -> Endpoint {
        self.ours
    }

    pub fn queues(&self) -> &Mlx5Queues {
        &self.queues
    }

    pub fn rx_placement(&self) -> RxPlacement {
        self.rx.placement
    }

    /// INIT -> RTR -> RTS toward the QPU side's endpoint.
    pub fn connect(&self, remote: &Endpoint) -> Result<()> {
        self.qp
            .ready(self.port, self.gid_index, self.ours.psn, remote)
    }

    /// The memory a device side addresses besides the receive buffers: the provider's
    /// CQ buffers, send queue and doorbell records (RAM), and the BlueFlame register's
    /// UAR page (MMIO).
    pub fn device_ranges(&self) -> Vec<ForeignRange> {
        let q = &self.queues;
        let ram = |addr, len, what| ForeignRange {
            addr,
            len,
            mmio: false,
            what,
        };
        vec![
            ram(
                q.recv_cq.buf,
                (q.recv_cq.cqe_cnt * q.recv_cq.cqe_size) as usize,
                "receive CQ",
            ),
            ram(
                q.send_cq.buf,
                (q.send_cq.cqe_cnt * q.send_cq.cqe_size) as usize,
                "send CQ",
            ),
            ram(
                q.qp.sq.buf,
                (q.qp.sq.wqe_cnt * q.qp.sq.stride) as usize,
                "send queue",
            ),
            ram(q.qp.dbrec, 8, "QP doorbell record"),
            ram(q.recv_cq.dbrec, 8, "receive CQ doorbell record"),
            ram(q.send_cq.dbrec, 8, "send CQ doorbell record"),
            ForeignRange {
                addr: q.qp.bf_reg,
                len: self.bf_span(),
                mmio: true,
                what: "UAR page (BlueFlame register)",
            },
        ]
    }

    /// Bytes of the doorbell register a poster writes: both BlueFlame halves, or the
    /// 8-byte doorbell alone.
    fn bf_span(&self) -> usize {
        (2 * self.queues.qp.bf_size as usize).max(8)
    }

    /// The link as a device side sees it: `base` gives the fields that are not the NIC's
    /// (counters, response ring, doorbell mode, signaling), `device` translates a host
    /// address of `len` bytes (naming it) into the device's view.
    pub fn desc(
        &self,
        base: &LinkDesc,
        device: &dyn Fn(u64, usize, &str) -> Result<u64>,
    ) -> Result<LinkDesc> {
        let q = &self.queues;
        let r = self.device_ranges();
        let at = |i: usize| device(r[i].addr, r[i].len, r[i].what);
        Ok(LinkDesc {
            rx_cq: at(0)?,
            tx_cq: at(1)?,
            sq: at(2)?,
            qp_dbrec: at(3)?,
            rx_cq_dbrec: at(4)?,
            tx_cq_dbrec: at(5)?,
            bf: at(6)?,
            rx_ring: self.rx.device_addr,
            rx_cqes: q.recv_cq.cqe_cnt,
            rx_slots: self.rx_slots,
            rx_slot_bytes: self.rx_slot_bytes,
            sq_wqebbs: q.qp.sq.wqe_cnt,
            tx_cqes: q.send_cq.cqe_cnt,
            qpn: q.qp.qpn,
            bf_size: q.qp.bf_size,
            ..*base
        })
    }

    /// Receive CQEs the NIC wrote that no device side has consumed yet (valid opcode,
    /// chunk 2 not poison, not the stop sentinel).
    pub fn pending(&self) -> u64 {
        let stop = stop_chunk();
        (0..self.queues.recv_cq.cqe_cnt as usize)
            .filter(|&n| {
                let at = n * cqe::SIZE;
                let tail = self.rx_cq.load_chunk(at + 48);
                let mid = self.rx_cq.load_chunk(at + 32);
                tail[15] >> 4 != CqeOpcode::Invalid as u8 && tail != stop && mid != POISON
            })
            .count() as u64
    }

    /// Writes the stop sentinel into every receive CQE that holds no unconsumed
    /// completion: the device side serves those first, then finds the sentinel.
    pub fn write_stop(&self) {
        let stop = stop_chunk();
        for n in 0..self.queues.recv_cq.cqe_cnt as usize {
            let at = n * cqe::SIZE;
            let tail = self.rx_cq.load_chunk(at + 48);
            let mid = self.rx_cq.load_chunk(at + 32);
            if tail[15] >> 4 == CqeOpcode::Invalid as u8 || mid == POISON {
                self.rx_cq.store_chunk(at + 48, stop);
            }
        }
        fence(Ordering::SeqCst);
    }

    /// A host poster of inline SENDs through verbs (the `cpu-assisted` proxy), signaled
    /// every `signal_every`. Only for a link whose device side does not post itself.
    pub fn inline_sender(&self, signal_every: u32) -> InlineSender {
        InlineSender {
            qp: Arc::clone(&self.qp),
            cq: Arc::clone(&self.send_cq),
            device: self.ctx.name().to_string(),
            max_send: self.max_send,
            signal_every: signal_every.clamp(1, self.max_send / 2),
            outstanding: 0,
            since_signal: 0,
        }
    }

    /// The queues as the host addresses them, for a host thread that plays the device
    /// side (the hardware test without a GPU): each area as a region and its offset.
    pub fn host_queues(&self) -> Result<HostQueues> {
        let keep = || -> Box<dyn std::any::Any + Send + Sync> {
            Box::new((
                Arc::clone(&self.qp),
                Arc::clone(&self.send_cq),
                Arc::clone(&self.recv_cq),
                Arc::clone(&self.ctx),
            ))
        };
        let r = self.device_ranges();
        // SAFETY: every range is the provider's memory of this link's QP, CQs and context
        // (whole pages: buffers are page-allocated, doorbell records sit in page-sized
        // pools, the UAR is a mapped page), all kept alive by `keep`; the host side that
        // uses these regions writes with aligned stores of at most 16 bytes, as the NIC
        // and the device side do.
        let view = |i: usize| unsafe { provider_region(r[i].addr, r[i].len, keep()) };
        Ok(HostQueues {
            rx_cq: view(0)?,
            tx_cq: view(1)?,
            sq: view(2)?,
            qp_dbrec: view(3)?,
            rx_cq_dbrec: view(4)?,
            tx_cq_dbrec: view(5)?,
            bf: view(6)?,
            rx_ring: self.rx.host.clone(),
        })
    }
}

// SAFETY: the ranges are the provider's buffers of this link's CQs and QP, its doorbell
// records and its context's UAR page: allocated in whole pages (buffers page-aligned,
// doorbell records in page-sized pools, the UAR a mapped page) and kept until the QP, the
// CQs and the context are destroyed, which happens only when this link is dropped. The
// NIC, the device side and the host access them with aligned accesses of at most 16 bytes.
unsafe impl ForeignMemory for ConnectxLink {
    fn ranges(&self) -> Vec<ForeignRange> {
        self.device_ranges()
    }
}

/// A throwaway QP's UAR page on an RDMA device (no active port needed): for checking, as
/// `qfwd doctor` does, that a GPU can map a NIC's doorbell register, and that the device
/// takes GPU memory registrations (its PD).
pub struct UarPage {
    qp: Qp,
    pd: Arc<Pd>,
    bf_reg: u64,
    bf_size: u32,
}

impl UarPage {
    /// Opens `device` and creates a small UC QP on it.
    pub fn open(device: &str) -> Result<UarPage> {
        let ctx = Context::open(Some(device))?;
        let pd = Pd::new(&ctx)?;
        let cq = Cq::new(&ctx, 15)?;
        let qp = Qp::new(&pd, &cq, &cq, QpKind::Uc, 16, 16, 64)?;
        let (view, _, _) = qp.mlx5_queues(&cq, &cq)?;
        Ok(UarPage {
            qp,
            pd,
            bf_reg: view.bf_reg,
            bf_size: view.bf_size,
        })
    }

    pub fn pd(&self) -> &Arc<Pd> {
        &self.pd
    }

    pub fn qpn(&self) -> u32 {
        self.qp.qpn()
    }

    /// BlueFlame half size (0: none).
    pub fn bf_size(&self) -> u32 {
        self.bf_size
    }
}

// SAFETY: the range is the doorbell register of the QP's UAR page, mapped by the provider
// for the device context (whole page), which the QP (owned here) keeps open; nothing is
// read or written through it by the probe.
unsafe impl ForeignMemory for UarPage {
    fn ranges(&self) -> Vec<ForeignRange> {
        vec![ForeignRange {
            addr: self.bf_reg,
            len: (2 * self.bf_size as usize).max(8),
            mmio: true,
            what: "UAR page (BlueFlame register)",
        }]
    }
}

/// A link's queues as the host addresses them: each a region and the area's offset in it.
pub struct HostQueues {
    pub rx_cq: (SharedRegion, usize),
    pub tx_cq: (SharedRegion, usize),
    pub sq: (SharedRegion, usize),
    pub qp_dbrec: (SharedRegion, usize),
    pub rx_cq_dbrec: (SharedRegion, usize),
    pub tx_cq_dbrec: (SharedRegion, usize),
    /// The BlueFlame register (half 0 at the offset).
    pub bf: (SharedRegion, usize),
    /// The receive buffers, when they are in host memory.
    pub rx_ring: Option<SharedRegion>,
}

/// Posts inline SENDs through `ibv_post_send` on a link whose device side hands its
/// answers to a host thread (`cpu-assisted`).
pub struct InlineSender {
    qp: Arc<Qp>,
    cq: Arc<Cq>,
    device: String,
    max_send: u32,
    signal_every: u32,
    /// WQEs posted and not known complete.
    outstanding: u32,
    since_signal: u32,
}

impl InlineSender {
    /// Reaps send completions; each signaled WQE's `wr_id` is how many WQEs it covers.
    /// Returns how many were reaped.
    pub fn reap(&mut self) -> Result<usize> {
        let mut n = 0;
        while let Some(c) = self.cq.poll_one()? {
            if !c.is_ok() {
                return Err(Error::RdmaCompletion {
                    device: self.device.clone(),
                    op: "send",
                    status: c.status_str(),
                    vendor_err: c.vendor_err,
                });
            }
            self.outstanding = self.outstanding.saturating_sub(c.wr_id as u32);
            n += 1;
        }
        Ok(n)
    }

    /// Posts `bytes` (at most [`abi::MAX_INLINE`]) as an inline SEND, waiting at most
    /// `timeout` for room in the send queue: `Ok(false)` when none came.
    pub fn post(&mut self, bytes: &[u8], timeout: Duration) -> Result<bool> {
        if bytes.len() > abi::MAX_INLINE as usize {
            return Err(Error::InvalidSetting {
                key: "max_request_bytes",
                detail: format!(
                    "an answer of {} bytes does not fit an inline SEND ({} at most)",
                    bytes.len(),
                    abi::MAX_INLINE
                ),
            });
        }
        let started = Instant::now();
        self.reap()?;
        while self.outstanding + 1 >= self.max_send {
            if started.elapsed() >= timeout {
                return Ok(false);
            }
            std::thread::yield_now();
            self.reap()?;
        }
        self.since_signal += 1;
        let signaled =
            self.since_signal >= self.signal_every || 2 * (self.outstanding + 1) >= self.max_send;
        let covered = self.since_signal as u64;
        // SAFETY: inline: the bytes are copied into the WQE during the call.
        unsafe {
            self.qp.post_send(
                covered,
                bytes.as_ptr() as u64,
                bytes.len() as u32,
                0,
                true,
                signaled,
            )
        }?;
        self.outstanding += 1;
        if signaled {
            self.since_signal = 0;
        }
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mlx5::dv::WqView;

    fn queues() -> Mlx5Queues {
        let cq = |cqe_cnt| CqView {
            cqn: 7,
            buf: 0x7f00_0000_0000,
            dbrec: 0x7f00_1000_0040,
            cqe_cnt,
            cqe_size: 64,
        };
        Mlx5Queues {
            qp: QpView {
                qpn: 0x1c0,
                dbrec: 0x7f00_1000_0000,
                sq: WqView {
                    buf: 0x7f00_2000_0000,
                    wqe_cnt: 256,
                    stride: 64,
                },
                rq: WqView {
                    buf: 0x7f00_2000_4000,
                    wqe_cnt: 64,
                    stride: 16,
                },
                bf_reg: 0x7f00_3000_0800,
                bf_size: 256,
            },
            send_cq: cq(1024),
            recv_cq: cq(128),
            scatter_to_cqe: true,
        }
    }

    #[test]
    fn queues_as_the_device_side_needs_them_pass() {
        assert_eq!(check_queues(&queues(), 64, 32), Ok(()));
    }

    #[test]
    fn what_the_device_side_cannot_serve_is_named() {
        let why = |q: Mlx5Queues, slots, every| check_queues(&q, slots, every).unwrap_err();
        let mut q = queues();
        q.recv_cq.cqe_size = 128;
        assert!(why(q, 64, 32).contains("MLX5_CQE_SIZE"));
        let mut q = queues();
        q.qp.rq.wqe_cnt = 4;
        assert!(why(q, 2, 32).contains("4 WQEs for 2"));
        let mut q = queues();
        q.recv_cq.cqe_cnt = 64;
        assert!(why(q, 64, 32).contains("twice"));
        assert!(why(queues(), 64, 200).contains("half the send queue"));
        let mut q = queues();
        q.send_cq.cqe_cnt = 4;
        assert!(why(q, 64, 32).contains("too few"));
        let mut q = queues();
        q.qp.bf_reg = 0;
        assert!(why(q, 64, 32).contains("doorbell register"));
        let mut q = queues();
        q.qp.sq.stride = 128;
        assert!(why(q, 64, 32).contains("64-byte WQEBBs"));
    }

    #[test]
    fn scatter_to_cqe_follows_the_provider_default() {
        assert!(scatter_to_cqe_expected(None, 64));
        assert!(scatter_to_cqe_expected(Some("1"), 64));
        assert!(!scatter_to_cqe_expected(Some("0"), 64));
        assert!(!scatter_to_cqe_expected(None, 128));
    }
}
