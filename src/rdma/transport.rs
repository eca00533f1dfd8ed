//! The `rdma` transport (RoCEv2 through ibverbs): the NVQLink data plane.
//!
//! - qfwd ([`RdmaTransport`]): registers a request ring, posts one zero-length receive per
//!   slot, and polls its receive CQ; each request arrives as an RDMA WRITE-with-immediate
//!   into slot `imm` and completes with `IBV_WC_RECV_RDMA_WITH_IMM`. Responses leave as
//!   SENDs, inline when they fit, selectively signaled.
//! - the QPU side ([`RdmaClient`], what the emulator or a test uses in place of the FPGA):
//!   WRITE-with-imm into the next free slot, responses received as SENDs.
//!
//! The control plane ([`super::control`]) exchanges endpoints over UDP first. Completions
//! are spin-polled; every wait has a deadline.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rdma_sys::ibv_wc_opcode;

use super::control::{ControlSocket, Endpoint};
use super::verbs::{Context, Cq, Mr, Pd, Qp, QpKind};
use crate::shm::SharedRegion;
use crate::transport::{Client, Transport};
use crate::{Error, Result};

/// Settings of either side.
#[derive(Debug, Clone)]
pub struct RdmaConfig {
    /// Device name (`mlx5_0`); `None`: the first device.
    pub device: Option<String>,
    pub port: u8,
    /// GID index; `None`: a RoCEv2 IPv4 GID if the kernel lists one, else 0.
    pub gid_index: Option<u8>,
    pub kind: QpKind,
    /// Request ring slots (qfwd side; the QPU side learns them).
    pub slots: u32,
    /// Bytes per slot (and per response buffer).
    pub slot_bytes: u32,
    /// Largest SEND posted inline.
    pub max_inline: u32,
    /// Ask for a send completion every this many WQEs.
    pub signal_every: u32,
    /// Control plane: where qfwd listens / where the QPU side sends.
    pub control: SocketAddr,
    pub handshake_timeout: Duration,
    /// Longest wait for room in the send queue.
    pub send_timeout: Duration,
}

impl Default for RdmaConfig {
    fn default() -> Self {
        RdmaConfig {
            device: None,
            port: 1,
            gid_index: None,
            kind: QpKind::Uc,
            slots: 64,
            slot_bytes: 4160,
            max_inline: 256,
            signal_every: 16,
            control: "0.0.0.0:18515".parse().expect("literal"),
            handshake_timeout: Duration::from_secs(30),
            send_timeout: Duration::from_millis(100),
        }
    }
}

/// Counters of either side.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RdmaCounters {
    pub received: u64,
    pub sent: u64,
    /// Completions with an error status (receive or send).
    pub completion_errors: u64,
    /// Receive completions of an unexpected opcode or slot.
    pub unexpected: u64,
    /// Polls spent waiting for send-queue room.
    pub send_full_polls: u64,
}

/// The verbs objects one side needs.
struct Link {
    ctx: Arc<Context>,
    region: SharedRegion,
    mr: Mr,
    send_cq: Arc<Cq>,
    recv_cq: Arc<Cq>,
    qp: Qp,
    port: u8,
    gid_index: u8,
    ours: Endpoint,
    sq_depth: u32,
    /// Send WQEs posted and not known complete.
    outstanding: u32,
    since_signal: u32,
    cfg: RdmaConfig,
    counters: RdmaCounters,
}

/// An opened device whose port is ready for RoCEv2.
pub(crate) struct OpenPort {
    pub ctx: Arc<Context>,
    pub port: super::verbs::PortInfo,
    pub gid_index: u8,
    pub gid: [u8; 16],
}

impl OpenPort {
    /// Opens `cfg.device`, checks that `cfg.port` is active and Ethernet, picks the GID.
    pub(crate) fn open(cfg: &RdmaConfig) -> Result<OpenPort> {
        let ctx = Context::open(cfg.device.as_deref())?;
        let port = ctx.query_port(cfg.port)?;
        if !port.is_active() {
            return Err(Error::RdmaPort {
                device: ctx.name().to_string(),
                port: cfg.port,
                detail: format!("port state is {} (not ACTIVE): is the link up?", port.state),
            });
        }
        if !port.is_ethernet() {
            return Err(Error::RdmaPort {
                device: ctx.name().to_string(),
                port: cfg.port,
                detail: "link layer is InfiniBand; qfwd speaks RoCEv2 (Ethernet)".into(),
            });
        }
        let gid_index = cfg
            .gid_index
            .unwrap_or_else(|| ctx.default_gid_index(cfg.port));
        let gid = ctx.query_gid(cfg.port, gid_index)?;
        Ok(OpenPort {
            ctx,
            port,
            gid_index,
            gid,
        })
    }

    /// Our endpoint for QP `qpn` (a fresh random PSN; no ring).
    pub(crate) fn endpoint(&self, qpn: u32) -> Endpoint {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let psn = (nanos ^ std::process::id().rotate_left(12) ^ qpn) & 0x00ff_ffff;
        Endpoint {
            qpn,
            psn,
            gid: self.gid,
            lid: self.port.lid,
            mtu: self.port.active_mtu as u8,
            gid_index: self.gid_index,
            ..Default::default()
        }
    }
}

impl Link {
    /// Opens the device, checks the port, and creates PD, MR over `bytes` of fresh memory,
    /// CQs and a QP.
    fn open(cfg: &RdmaConfig, bytes: usize, recv_depth: u32) -> Result<Link> {
        let opened = OpenPort::open(cfg)?;
        let (ctx, gid_index) = (Arc::clone(&opened.ctx), opened.gid_index);
        let pd = Pd::new(&ctx)?;
        let region = SharedRegion::heap(bytes)?;
        let mr = Mr::register(&pd, &region)?;
        let sq_depth = (2 * cfg.signal_every).max(64);
        let send_cq = Cq::new(&ctx, sq_depth)?;
        let recv_cq = Cq::new(&ctx, recv_depth)?;
        let qp = Qp::new(
            &pd,
            &send_cq,
            &recv_cq,
            cfg.kind,
            sq_depth,
            recv_depth,
            cfg.max_inline,
        )?;
        let ours = opened.endpoint(qp.qpn());
        Ok(Link {
            ctx,
            region,
            mr,
            send_cq,
            recv_cq,
            qp,
            port: cfg.port,
            gid_index,
            ours,
            sq_depth,
            outstanding: 0,
            since_signal: 0,
            cfg: cfg.clone(),
            counters: RdmaCounters::default(),
        })
    }

    /// Reaps send completions; each signaled WQE's `wr_id` is how many WQEs it covers.
    fn reap_sends(&mut self) -> Result<()> {
        while let Some(c) = self.send_cq.poll_one()? {
            if !c.is_ok() {
                self.counters.completion_errors += 1;
                return Err(Error::RdmaCompletion {
                    device: self.ctx.name().to_string(),
                    op: "send",
                    status: c.status_str(),
                    vendor_err: c.vendor_err,
                });
            }
            self.outstanding = self.outstanding.saturating_sub(c.wr_id as u32);
        }
        Ok(())
    }

    /// Waits (bounded) for room for one more send WQE; returns (wr_id, signaled).
    fn reserve_send(&mut self) -> Result<(u64, bool)> {
        self.reap_sends()?;
        let started = Instant::now();
        let mut polls = 0u64;
        while self.outstanding + 1 >= self.sq_depth {
            polls += 1;
            self.counters.send_full_polls += 1;
            if polls % 64 == 0 && started.elapsed() >= self.cfg.send_timeout {
                return Err(Error::RdmaTimeout {
                    device: self.ctx.name().to_string(),
                    what: "send queue room",
                    waited_us: started.elapsed().as_micros() as u64,
                    polls,
                });
            }
            self.reap_sends()?;
        }
        self.since_signal += 1;
        self.outstanding += 1;
        let signaled =
            self.since_signal >= self.cfg.signal_every || self.outstanding * 2 >= self.sq_depth;
        let covered = self.since_signal as u64;
        if signaled {
            self.since_signal = 0;
        }
        Ok((covered, signaled))
    }
}

/// qfwd's end of the RoCE data plane, bound and waiting for a QPU.
pub struct RdmaListener {
    link: Link,
    control: ControlSocket,
}

impl RdmaListener {
    /// Creates the QP and request ring and binds the control socket.
    pub fn bind(cfg: &RdmaConfig) -> Result<RdmaListener> {
        let ring = cfg.slots as usize * cfg.slot_bytes as usize;
        let tx = (2 * cfg.signal_every).max(64) as usize * cfg.slot_bytes as usize;
        let mut link = Link::open(cfg, ring + tx, cfg.slots)?;
        link.ours.ring_addr = link.region.host_addr(0);
        link.ours.rkey = link.mr.rkey();
        link.ours.slots = cfg.slots;
        link.ours.slot_bytes = cfg.slot_bytes;
        for slot in 0..cfg.slots {
            // SAFETY: a zero-length receive names no buffer.
            unsafe { link.qp.post_recv(slot as u64, 0, 0, 0) }?;
        }
        let control = ControlSocket::bind(cfg.control)?;
        Ok(RdmaListener { link, control })
    }

    pub fn control_addr(&self) -> Result<SocketAddr> {
        self.control.local_addr()
    }

    /// Our endpoint (what HELLO_ACK carries).
    pub fn endpoint(&self) -> Endpoint {
        self.link.ours
    }

    /// Waits for a QPU's HELLO and START (bounded by `handshake_timeout`), connecting the
    /// QP in between.
    pub fn accept(mut self) -> Result<RdmaTransport> {
        let ours = self.link.ours;
        let link = &self.link;
        let (peer, peer_control, session) =
            self.control
                .accept(&ours, link.cfg.handshake_timeout, |remote| {
                    link.qp.connect(link.port, link.gid_index, ours.psn, remote)
                })?;
        let ring_bytes = self.link.cfg.slots as usize * self.link.cfg.slot_bytes as usize;
        Ok(RdmaTransport {
            link: self.link,
            control: self.control,
            peer,
            peer_control,
            session,
            tx_base: ring_bytes,
            tx_seq: 0,
        })
    }
}

/// qfwd's end of a connected RoCE data plane: a [`Transport`] whose peer is the slot.
pub struct RdmaTransport {
    link: Link,
    control: ControlSocket,
    peer: Endpoint,
    peer_control: SocketAddr,
    session: u64,
    tx_base: usize,
    tx_seq: u64,
}

impl RdmaTransport {
    /// Binds and accepts in one call.
    pub fn accept(cfg: &RdmaConfig) -> Result<RdmaTransport> {
        RdmaListener::bind(cfg)?.accept()
    }

    pub fn counters(&self) -> RdmaCounters {
        self.link.counters
    }

    pub fn peer(&self) -> (Endpoint, SocketAddr, u64) {
        (self.peer, self.peer_control, self.session)
    }

    pub fn device(&self) -> &str {
        self.link.ctx.name()
    }

    /// Answers a STOP from the QPU if one is waiting; returns whether one was.
    pub fn poll_stop(&mut self) -> Result<bool> {
        Ok(self.control.poll_stop()?.is_some())
    }
}

impl Transport for RdmaTransport {
    type Peer = u32;

    fn name(&self) -> &'static str {
        "rdma"
    }

    #[inline]
    fn try_recv(&mut self, buf: &mut [u8]) -> Result<Option<(usize, u32)>> {
        let l = &mut self.link;
        let Some(c) = l.recv_cq.poll_one()? else {
            return Ok(None);
        };
        let slot = c.wr_id as u32;
        let ok = c.is_ok()
            && c.opcode == ibv_wc_opcode::IBV_WC_RECV_RDMA_WITH_IMM
            && c.imm < l.cfg.slots;
        let len = (c.byte_len as usize).min(l.cfg.slot_bytes as usize);
        if ok {
            let copy = len.min(buf.len());
            l.region
                .read(c.imm as usize * l.cfg.slot_bytes as usize, &mut buf[..copy]);
            l.counters.received += 1;
        } else if !c.is_ok() {
            l.counters.completion_errors += 1;
        } else {
            l.counters.unexpected += 1;
        }
        // SAFETY: a zero-length receive names no buffer.
        unsafe { l.qp.post_recv(slot as u64, 0, 0, 0) }?;
        Ok(ok.then_some((len, c.imm)))
    }

    fn is_allowed(&self, _peer: &u32) -> bool {
        true
    }

    #[inline]
    fn send(&mut self, _peer: u32, bytes: &[u8]) -> Result<()> {
        let (wr_id, signaled) = self.link.reserve_send()?;
        let l = &mut self.link;
        let len = bytes.len() as u32;
        if len <= l.cfg.max_inline {
            // SAFETY: inline: the bytes are copied into the WQE during the call.
            unsafe {
                l.qp.post_send(wr_id, bytes.as_ptr() as u64, len, 0, true, signaled)
            }?;
        } else {
            if bytes.len() > l.cfg.slot_bytes as usize {
                return Err(Error::InvalidSetting {
                    key: "slot_bytes",
                    detail: format!(
                        "response of {} bytes exceeds a {}-byte TX buffer",
                        bytes.len(),
                        l.cfg.slot_bytes
                    ),
                });
            }
            let slot = (self.tx_seq % l.sq_depth as u64) as usize;
            let at = self.tx_base + slot * l.cfg.slot_bytes as usize;
            l.region.write(at, bytes);
            // SAFETY: the TX buffer is registered and not rewritten until `sq_depth` more
            // sends, by which time this one has completed (reserve_send bounds outstanding).
            unsafe {
                l.qp.post_send(
                    wr_id,
                    l.region.host_addr(at),
                    len,
                    l.mr.lkey(),
                    false,
                    signaled,
                )
            }?;
            self.tx_seq += 1;
        }
        l.counters.sent += 1;
        Ok(())
    }
}

/// The QPU side of the data plane (for the emulator, tests, and a lab loopback).
pub struct RdmaClient {
    link: Link,
    control: ControlSocket,
    server: SocketAddr,
    remote: Endpoint,
    session: u64,
    seq: u64,
    /// Requests sent whose response has not arrived (at most the remote's slots).
    in_flight: u32,
    resp_base: usize,
}

impl RdmaClient {
    /// Connects to qfwd's control plane at `server`: HELLO, connect the QP, START.
    pub fn connect(cfg: &RdmaConfig, server: SocketAddr) -> Result<RdmaClient> {
        let slots = cfg.slots;
        let bytes = 2 * slots as usize * cfg.slot_bytes as usize;
        let link = Link::open(cfg, bytes, slots)?;
        let resp_base = slots as usize * cfg.slot_bytes as usize;
        for i in 0..slots {
            let at = resp_base + i as usize * cfg.slot_bytes as usize;
            // SAFETY: the buffer is registered and only read after its completion.
            unsafe {
                link.qp.post_recv(
                    i as u64,
                    link.region.host_addr(at),
                    cfg.slot_bytes,
                    link.mr.lkey(),
                )
            }?;
        }
        let mut control = ControlSocket::bind(match server {
            SocketAddr::V4(_) => "0.0.0.0:0".parse().expect("literal"),
            SocketAddr::V6(_) => "[::]:0".parse().expect("literal"),
        })?;
        let retry = Duration::from_millis(100);
        let remote = control.hello(server, &link.ours, cfg.handshake_timeout, retry)?;
        if remote.slots == 0 || remote.slot_bytes == 0 || remote.ring_addr == 0 {
            return Err(Error::ControlPlane {
                detail: format!("{server} offered no request ring: {remote:?}"),
            });
        }
        link.qp
            .connect(link.port, link.gid_index, link.ours.psn, &remote)?;
        let session = (remote.qpn as u64) << 32 | link.ours.qpn as u64;
        control.start(server, session, cfg.handshake_timeout, retry)?;
        Ok(RdmaClient {
            link,
            control,
            server,
            remote,
            session,
            seq: 0,
            in_flight: 0,
            resp_base,
        })
    }

    pub fn counters(&self) -> RdmaCounters {
        self.link.counters
    }

    /// Sends STOP and waits for its acknowledgement.
    pub fn stop(&mut self) -> Result<()> {
        self.control.stop(
            self.server,
            self.session,
            Duration::from_secs(2),
            Duration::from_millis(100),
        )
    }
}

impl Client for RdmaClient {
    fn send(&mut self, bytes: &[u8]) -> Result<bool> {
        if self.in_flight >= self.remote.slots {
            return Ok(false);
        }
        if bytes.len() > self.remote.slot_bytes as usize
            || bytes.len() > self.link.cfg.slot_bytes as usize
        {
            return Err(Error::InvalidSetting {
                key: "slot_bytes",
                detail: format!(
                    "request of {} bytes exceeds a {}-byte slot",
                    bytes.len(),
                    self.remote.slot_bytes
                ),
            });
        }
        let (wr_id, signaled) = self.link.reserve_send()?;
        let l = &mut self.link;
        let slot = (self.seq % self.remote.slots as u64) as u32;
        let staging = (self.seq % l.cfg.slots as u64) as usize * l.cfg.slot_bytes as usize;
        l.region.write(staging, bytes);
        let raddr = self.remote.ring_addr + slot as u64 * self.remote.slot_bytes as u64;
        // SAFETY: the staging slot is registered and not rewritten before `slots` more
        // requests, which in_flight bounds.
        unsafe {
            l.qp.post_write_imm(
                wr_id,
                l.region.host_addr(staging),
                bytes.len() as u32,
                l.mr.lkey(),
                raddr,
                self.remote.rkey,
                slot,
                signaled,
            )
        }?;
        self.seq += 1;
        self.in_flight += 1;
        l.counters.sent += 1;
        Ok(true)
    }

    fn try_recv(&mut self, buf: &mut [u8]) -> Result<Option<usize>> {
        let l = &mut self.link;
        l.reap_sends()?;
        let Some(c) = l.recv_cq.poll_one()? else {
            return Ok(None);
        };
        let i = c.wr_id as usize;
        let at = self.resp_base + i * l.cfg.slot_bytes as usize;
        let result = if c.is_ok() && c.opcode == ibv_wc_opcode::IBV_WC_RECV {
            let n = c.byte_len as usize;
            let copy = n.min(buf.len());
            l.region.read(at, &mut buf[..copy]);
            l.counters.received += 1;
            self.in_flight = self.in_flight.saturating_sub(1);
            Some(n)
        } else {
            l.counters.completion_errors += 1;
            None
        };
        // SAFETY: as in connect.
        unsafe {
            l.qp.post_recv(
                i as u64,
                l.region.host_addr(at),
                l.cfg.slot_bytes,
                l.mr.lkey(),
            )
        }?;
        Ok(result)
    }

    fn describe(&self) -> String {
        format!(
            "rdma://{}/qpn{:#x}@{}",
            self.link.ctx.name(),
            self.remote.qpn,
            self.server
        )
    }
}
