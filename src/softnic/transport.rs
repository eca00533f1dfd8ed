//! The forwarder's side of the soft NIC, as a [`Transport`].
//!
//! Requests arrive as the NVQLink data plane delivers them: RDMA WRITE-with-immediate into
//! a request ring, one `RESP_WR_IMM` CQE each (immediate = slot index); `try_recv` polls
//! the receive CQ, copies the slot out and reposts the receive WQE. Responses leave as
//! SENDs with the payload inline, announced by the configured doorbell:
//!
//! - `regular` / `blueflame`: `send` posts the WQE on the forwarder's thread;
//! - `cpu-assisted`: `send` writes the response into the tagged response ring (as a GPU
//!   would) and a proxy thread posts it (with a BlueFlame doorbell when the WQE fits one
//!   half, as libmlx5 does for a single inline WQE);
//! - device-posted ([`SoftNicTransport::start_device_posted`], `regular` / `blueflame`
//!   rung by a GPU kernel): the device side owns the SQ ([`DevicePosting`]); `send`
//!   (the forwarder's own answers: malformed, overload, watchdog) writes into the response
//!   ring, which the NIC thread drains itself (its host path, a second QP on a ConnectX).
//!
//! The QPU side is the NIC's wire, any [`Transport`]: an in-process ring or a UDP socket,
//! chosen where a service is assembled ([`crate::serve::wiring`]); the emulator talks to it
//! with the matching [`crate::transport::Client`].
#![forbid(unsafe_code)]

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::nic::{NicCounters, SoftNic};
use crate::idle::IdlePolicy;
use crate::mlx5::layout::{data, qp_dbrec};
use crate::mlx5::{CqeOpcode, DataSeg, Doorbell};
use crate::queues::host::{CqConsumer, RespConsumer, RespProducer, SendCounters, SendQueue};
use crate::queues::layout::{NicLayout, SoftNicConfig, QP_DBREC};
use crate::queues::posting::DevicePosting;
use crate::shm::SharedRegion;
use crate::transport::{Transport, TransportDrops};
use crate::worker::Worker;
use crate::{Error, Result};

/// Counters of the cpu-assisted proxy thread.
#[derive(Debug, Default)]
struct ProxyStats {
    posted: AtomicU64,
    post_failures: AtomicU64,
    torn: AtomicU64,
    completions: AtomicU64,
    errors: AtomicU64,
}

enum Tx {
    Direct(SendQueue),
    Proxied {
        ring: RespProducer,
        proxy: Worker,
        stats: Arc<ProxyStats>,
    },
    /// A device side owns the SQ; the host's answers take the NIC's host path.
    Device {
        ring: RespProducer,
        posting: DevicePosting,
        pushed: u64,
    },
}

/// What the forwarder side has seen, beside the NIC's own counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TransportCounters {
    /// Requests taken from the receive CQ.
    pub received: u64,
    /// Receive CQEs that were not a write-with-immediate (errors included).
    pub rx_unexpected: u64,
    /// Responses posted (directly, or by the proxy); device-posted: the host's own answers
    /// handed to the NIC's host path (the device's posts are counted by the device).
    pub posted: u64,
    /// Send completions reaped (success).
    pub completions: u64,
    /// Error CQEs on the send side.
    pub send_errors: u64,
    /// Responses the proxy could not post, or found torn.
    pub proxy_failures: u64,
}

/// The forwarder's end of a soft NIC (one QP): a [`Transport`] whose peer is the request
/// slot index. Owns the NIC (and proxy) threads: dropping it stops them.
pub struct SoftNicTransport {
    // Field order is drop order: the proxy (inside `tx`) stops before the NIC.
    tx: Tx,
    nic: SoftNic,
    region: SharedRegion,
    layout: NicLayout,
    doorbell: Doorbell,
    rx_cq: CqConsumer,
    rq_pi: u16,
    send_timeout: Duration,
    received: u64,
    rx_unexpected: u64,
    last_arrival_ns: Option<u64>,
}

impl SoftNicTransport {
    /// Starts a soft NIC in `region` (at least [`NicLayout::len`] bytes; see
    /// [`SharedRegion::heap`]) with `wire` toward the QPU side, and returns the forwarder's end.
    pub fn start<W>(
        config: &SoftNicConfig,
        region: SharedRegion,
        wire: W,
    ) -> Result<SoftNicTransport>
    where
        W: Transport + Send + 'static,
        W::Peer: PartialEq + Send,
    {
        let nic = SoftNic::start(config, region.clone(), wire)?;
        SoftNicTransport::assemble(config, region, nic, None)
    }

    /// Starts a soft NIC in `region` whose send queue a device side owns (GPU-initiated
    /// doorbells, `regular` or `blueflame`): hand [`SoftNicTransport::device_posting`] to
    /// it. The transport still receives; its `send` (the forwarder's own answers) goes
    /// through the NIC's host path. For a GPU, `region` is pinned GPU-mapped memory.
    pub fn start_device_posted<W>(
        config: &SoftNicConfig,
        region: SharedRegion,
        wire: W,
    ) -> Result<SoftNicTransport>
    where
        W: Transport + Send + 'static,
        W::Peer: PartialEq + Send,
    {
        let posting = DevicePosting::new(region.clone(), config)?;
        let nic = SoftNic::start_with_host_path(config, region.clone(), wire)?;
        SoftNicTransport::assemble(config, region, nic, Some(posting))
    }

    fn assemble(
        config: &SoftNicConfig,
        region: SharedRegion,
        nic: SoftNic,
        device: Option<DevicePosting>,
    ) -> Result<SoftNicTransport> {
        let layout = *nic.layout();
        let tx = match (device, config.doorbell) {
            (Some(posting), _) => Tx::Device {
                ring: RespProducer::new(&region, &layout),
                posting,
                pushed: 0,
            },
            (None, Doorbell::Regular | Doorbell::BlueFlame) => {
                Tx::Direct(SendQueue::new(&region, config, config.doorbell)?)
            }
            (None, Doorbell::CpuAssisted) => {
                let ring = RespProducer::new(&region, &layout);
                let stats = Arc::new(ProxyStats::default());
                let mut sq = SendQueue::new(&region, config, Doorbell::BlueFlame)?;
                let mut consumer = RespConsumer::new(&region, &layout);
                let shared = stats.clone();
                let idle = config.idle;
                let wait = config.bf_wait;
                let proxy = Worker::spawn(
                    "qfwd-softnic-proxy",
                    config.stop_timeout,
                    config.proxy_core,
                    move |stop| proxy_loop(&stop, &mut sq, &mut consumer, &shared, idle, wait),
                )?;
                Tx::Proxied { ring, proxy, stats }
            }
        };
        let rx_cq = CqConsumer::rx(&region, &layout);
        let mut t = SoftNicTransport {
            tx,
            nic,
            region,
            layout,
            doorbell: config.doorbell,
            rx_cq,
            rq_pi: 0,
            send_timeout: config.send_timeout,
            received: 0,
            rx_unexpected: 0,
            last_arrival_ns: None,
        };
        for _ in 0..layout.rx_slots {
            t.post_receive();
        }
        Ok(t)
    }

    pub fn doorbell(&self) -> Doorbell {
        self.doorbell
    }

    /// The send queue as a device side posts to it, when this transport was started with
    /// [`SoftNicTransport::start_device_posted`].
    pub fn device_posting(&self) -> Option<DevicePosting> {
        match &self.tx {
            Tx::Device { posting, .. } => Some(posting.clone()),
            _ => None,
        }
    }

    pub fn layout(&self) -> &NicLayout {
        &self.layout
    }

    pub fn region(&self) -> &SharedRegion {
        &self.region
    }

    /// The NIC's counters.
    pub fn nic_counters(&self) -> NicCounters {
        self.nic.counters()
    }

    /// The forwarder side's counters.
    pub fn counters(&self) -> TransportCounters {
        let mut c = TransportCounters {
            received: self.received,
            rx_unexpected: self.rx_unexpected,
            ..Default::default()
        };
        match &self.tx {
            Tx::Direct(sq) => {
                let s: SendCounters = sq.counters();
                c.posted = s.posted;
                c.completions = s.completions;
                c.send_errors = s.errors;
            }
            Tx::Proxied { stats, .. } => {
                c.posted = stats.posted.load(Ordering::Relaxed);
                c.completions = stats.completions.load(Ordering::Relaxed);
                c.send_errors = stats.errors.load(Ordering::Relaxed);
                c.proxy_failures = stats.post_failures.load(Ordering::Relaxed)
                    + stats.torn.load(Ordering::Relaxed);
            }
            Tx::Device { pushed, .. } => c.posted = *pushed,
        }
        c
    }

    /// Whether the NIC thread is running.
    pub fn is_running(&self) -> bool {
        self.nic.is_running()
    }

    /// Posts one receive WQE (a data segment naming its slot) and rings the RQ record.
    fn post_receive(&mut self) {
        let slot = self.rq_pi as u32 & (self.layout.rx_slots - 1);
        let seg = DataSeg {
            byte_count: self.layout.rx_slot_bytes as u32,
            lkey: self.layout.mkey,
            addr: self.region.host_addr(self.layout.rx_slot(slot)),
        };
        self.region
            .write(self.layout.rq + slot as usize * data::SIZE, &seg.encode());
        self.rq_pi = self.rq_pi.wrapping_add(1);
        self.region.store_be32(
            QP_DBREC + 4 * qp_dbrec::RCV,
            self.rq_pi as u32,
            Ordering::Release,
        );
    }
}

impl Drop for SoftNicTransport {
    fn drop(&mut self) {
        if let Tx::Proxied { proxy, .. } = &mut self.tx {
            let _ = proxy.stop();
        }
        // The NIC stops when `self.nic` drops.
    }
}

impl Transport for SoftNicTransport {
    /// The request ring slot (the write's immediate).
    type Peer = u32;

    fn name(&self) -> &'static str {
        "softnic"
    }

    /// A request longer than a ring slot was truncated by the NIC: its length is reported
    /// as the slot size, so the forwarder answers it as malformed (length mismatch or
    /// oversized).
    #[inline]
    fn try_recv(&mut self, buf: &mut [u8]) -> Result<Option<(usize, u32)>> {
        let Some(c) = self.rx_cq.poll() else {
            return Ok(None);
        };
        if c.opcode != CqeOpcode::RespWrImm {
            self.rx_unexpected += 1;
            self.post_receive();
            return Ok(None);
        }
        let slot = c.imm & (self.layout.rx_slots - 1);
        let len = (c.byte_cnt as usize).min(self.layout.rx_slot_bytes);
        let copy = len.min(buf.len());
        self.region
            .read(self.layout.rx_slot(slot), &mut buf[..copy]);
        self.post_receive();
        self.received += 1;
        self.last_arrival_ns = (c.timestamp != 0).then_some(c.timestamp);
        Ok(Some((len, slot)))
    }

    /// The NIC checked the allowlist (and its queue pair's peer) on the wire.
    fn is_allowed(&self, _peer: &u32) -> bool {
        true
    }

    fn drops(&self) -> TransportDrops {
        let c = self.nic.counters();
        TransportDrops {
            not_allowed: c.rx_not_allowed,
            foreign_peer: c.rx_foreign_drops,
            socket_overflow: c.wire_socket_drops,
        }
    }

    /// The receive CQE's timestamp: when the request reached the host (the NIC stamps
    /// `CLOCK_REALTIME`).
    #[inline]
    fn last_arrival_ns(&self) -> Option<u64> {
        self.last_arrival_ns
    }

    #[inline]
    fn send(&mut self, _peer: u32, bytes: &[u8]) -> Result<()> {
        match &mut self.tx {
            Tx::Direct(sq) => sq.post_send(bytes),
            Tx::Proxied { ring, .. } => push_waiting(ring, bytes, self.send_timeout),
            Tx::Device { ring, pushed, .. } => {
                push_waiting(ring, bytes, self.send_timeout)?;
                *pushed += 1;
                Ok(())
            }
        }
    }
}

/// Pushes into the response ring, waiting (bounded) for room.
fn push_waiting(ring: &mut RespProducer, bytes: &[u8], timeout: Duration) -> Result<()> {
    if ring.push(bytes)? {
        return Ok(());
    }
    let started = Instant::now();
    let mut polls = 0u64;
    loop {
        std::thread::yield_now();
        polls += 1;
        if ring.push(bytes)? {
            return Ok(());
        }
        if started.elapsed() >= timeout {
            return Err(Error::SoftNicQueueFull {
                queue: "response ring",
                waited_us: started.elapsed().as_micros() as u64,
                polls,
            });
        }
    }
}

fn proxy_loop(
    stop: &std::sync::atomic::AtomicBool,
    sq: &mut SendQueue,
    ring: &mut RespConsumer,
    stats: &ProxyStats,
    idle: IdlePolicy,
    wait: Duration,
) {
    let mut buf = vec![0u8; ring_capacity(ring)];
    let mut idle_spins = 0u32;
    while !stop.load(Ordering::Acquire) {
        let before = ring.torn;
        match ring.pop(&mut buf, wait) {
            Some(n) => {
                idle_spins = 0;
                match sq.post_send(&buf[..n]) {
                    Ok(()) => stats.posted.fetch_add(1, Ordering::Relaxed),
                    Err(_) => stats.post_failures.fetch_add(1, Ordering::Relaxed),
                };
            }
            None => {
                if ring.torn != before {
                    stats.torn.fetch_add(1, Ordering::Relaxed);
                    continue;
                }
                if sq.reap() > 0 {
                    let s = sq.counters();
                    stats.completions.store(s.completions, Ordering::Relaxed);
                    stats.errors.store(s.errors, Ordering::Relaxed);
                    continue;
                }
                match idle {
                    IdlePolicy::Spin => std::hint::spin_loop(),
                    IdlePolicy::Yield => {
                        idle_spins = idle_spins.saturating_add(1);
                        if idle_spins > 20_000 {
                            std::thread::sleep(Duration::from_micros(50));
                        } else {
                            std::thread::yield_now();
                        }
                    }
                }
            }
        }
    }
    sq.reap();
    let s = sq.counters();
    stats.completions.store(s.completions, Ordering::Relaxed);
    stats.errors.store(s.errors, Ordering::Relaxed);
}

fn ring_capacity(_ring: &RespConsumer) -> usize {
    crate::wire::MAX_DATAGRAM + 1
}
