//! `gpu-direct` on ConnectX links (feature `rdma`): the same kernel (`device/direct.cu`)
//! serves a real NIC's queues ([`crate::rdma::direct::ConnectxLink`]) instead of the soft
//! NIC's. [`DirectService::start_rdma`] opens one queue set per link, maps the NIC
//! provider's CQ and queue buffers, doorbell records and UAR page for the GPU
//! (`cuMemHostRegister`, `IOMEMORY` for the UAR), places the receive buffers in GPU memory
//! (dma-buf, or `nvidia_peermem`; pinned host memory where neither works: the start-up line
//! says which), describes each link as an `abi::LinkDesc` and launches the kernel. The
//! counters and the `cpu-assisted` response rings stay in the service's mapped region, as
//! with the soft NIC; the `cpu-assisted` proxy posts through verbs.
//!
//! A control-plane thread ([`LinkAcceptor`]) gives each QPU that says HELLO the next free
//! link (its QP connected before HELLO_ACK), acknowledges START and STOP: the QPU side is
//! the `rdma` transport's [`crate::rdma::RdmaClient`], unchanged.
//!
//! Stopping: the host waits until every completion the NIC wrote has been taken (bounded),
//! writes the stop sentinel into the receive CQEs that hold none, waits for the kernel, and
//! counts what the NIC delivered after that as undrained. The lab procedure is in
//! `docs/lab-gpu-direct.md`.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::proxy::{AnswerPoster, Proxy};
use super::{DirectOptions, DirectService, RxMemory};
use crate::abi::LinkDesc;
use crate::decode::Decoder;
use crate::gpu::memory::device_address_of;
use crate::gpu::{self, GpuContext, HostRegistrations, NicWritableDeviceMemory};
use crate::handler::Registry;
use crate::mlx5::Doorbell;
use crate::queues::direct::FunctionTable;
use crate::queues::host::RespConsumer;
use crate::queues::links::LinkSet;
use crate::rdma::control::{kind, ControlSocket, Endpoint, Message, MAX_ERROR_TEXT};
use crate::rdma::direct::{ConnectxLink, InlineSender, RxBuffers, RxPlacement, UarPage};
use crate::rdma::verbs::{Mr, Pd, QpKind};
use crate::rdma::RdmaConfig;
use crate::shm::SharedRegion;
use crate::worker::Worker;
use crate::{Error, Result};

/// How a `gpu-direct` service reaches its ConnectX links.
#[derive(Debug, Clone)]
pub struct ConnectxOptions {
    /// Device, port, GID, UC or RC, and the control plane's address (`control`: link i is
    /// the i-th QPU that says HELLO there) and handshake timeout.
    pub rdma: RdmaConfig,
    pub rx_memory: RxMemory,
}

impl ConnectxOptions {
    /// For `qfwd run`: the control plane on `listen`; the device, port, GID index and QP
    /// kind from `QFWD_RDMA_DEVICE`, `QFWD_RDMA_PORT`, `QFWD_RDMA_GID_INDEX` and
    /// `QFWD_RDMA_QP` (`uc` or `rc`), as the hardware tests read them; unset: the first
    /// device, port 1, a RoCEv2 GID, UC.
    pub fn from_env(listen: SocketAddr, rx_memory: RxMemory) -> Result<ConnectxOptions> {
        let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
        let bad = |key: &'static str, v: &str| Error::InvalidSetting {
            key,
            detail: format!("{v:?} is not a number"),
        };
        let mut rdma = RdmaConfig {
            device: env("QFWD_RDMA_DEVICE"),
            control: listen,
            ..RdmaConfig::default()
        };
        if let Some(p) = env("QFWD_RDMA_PORT") {
            rdma.port = p.parse().map_err(|_| bad("QFWD_RDMA_PORT", &p))?;
        }
        if let Some(g) = env("QFWD_RDMA_GID_INDEX") {
            rdma.gid_index = Some(g.parse().map_err(|_| bad("QFWD_RDMA_GID_INDEX", &g))?);
        }
        rdma.kind = match env("QFWD_RDMA_QP").as_deref() {
            None | Some("uc") => QpKind::Uc,
            Some("rc") => QpKind::Rc,
            Some(other) => {
                return Err(Error::InvalidSetting {
                    key: "QFWD_RDMA_QP",
                    detail: format!("{other:?}: expected uc or rc"),
                })
            }
        };
        Ok(ConnectxOptions { rdma, rx_memory })
    }
}

/// The links' queues and their GPU mappings: what the running kernel touches. Shared by
/// the service and the kernel, which keeps (leaks) it if it does not stop.
struct ConnectxQueues {
    // Declared in drop order: the GPU mappings go before the links' memory.
    _regs: Vec<HostRegistrations>,
    links: Vec<Arc<ConnectxLink>>,
    /// The counters and response rings (the service's mapped region).
    _region: SharedRegion,
}

impl gpu::direct::KernelLinks for ConnectxQueues {
    fn write_stop(&self) -> Result<()> {
        for l in &self.links {
            l.write_stop();
        }
        Ok(())
    }
}

/// The NIC side of a `gpu-direct` service on ConnectX links.
pub(super) struct ConnectxNics {
    // Declared in drop order.
    control: Option<Worker>,
    queues: Arc<ConnectxQueues>,
    connected: Arc<AtomicU32>,
    control_addr: SocketAddr,
}

impl ConnectxNics {
    /// Receive completions the NICs wrote that the device side has not taken.
    pub(super) fn pending(&self) -> u64 {
        self.queues.links.iter().map(|l| l.pending()).sum()
    }

    pub(super) fn write_stop(&self) {
        for l in &self.queues.links {
            l.write_stop();
        }
    }

    /// Stops the control-plane thread.
    pub(super) fn stop_control(&mut self) -> Result<()> {
        match self.control.take() {
            Some(mut w) => w.stop(),
            None => Ok(()),
        }
    }
}

/// A link's `cpu-assisted` answers, posted through verbs.
struct VerbsPoster {
    sender: InlineSender,
    timeout: Duration,
}

impl AnswerPoster for VerbsPoster {
    fn post(&mut self, bytes: &[u8]) -> bool {
        match self.sender.post(bytes, self.timeout) {
            Ok(posted) => posted,
            Err(e) => {
                tracing::warn!("gpu-direct proxy: {e}");
                false
            }
        }
    }

    fn reap(&mut self) -> usize {
        self.sender.reap().unwrap_or_else(|e| {
            tracing::warn!("gpu-direct proxy: {e}");
            0
        })
    }
}

/// Registers `bytes` of receive buffers in `pd` where `want` says (see [`RxMemory`]), every
/// byte poisoned (the receive protocol starts from poison).
fn rx_buffers(
    ctx: &Arc<GpuContext>,
    pd: &Arc<Pd>,
    bytes: usize,
    want: RxMemory,
) -> Result<RxBuffers> {
    let mut why = Vec::new();
    if want != RxMemory::Host {
        let memory = Arc::new(NicWritableDeviceMemory::new(ctx, bytes)?);
        memory.fill(0xff)?;
        let at = memory.device_ptr();
        let gpu = |mr: Mr, placement| RxBuffers {
            mr,
            nic_addr: at,
            device_addr: at,
            placement,
            host: None,
        };
        match Arc::clone(&memory).register_dmabuf(pd) {
            Ok(mr) => return Ok(gpu(mr, RxPlacement::GpuDmaBuf)),
            Err(e) => why.push(format!("dma-buf: {e}")),
        }
        match memory.register_peer_memory(pd) {
            Ok(mr) => return Ok(gpu(mr, RxPlacement::GpuPeerMemory)),
            Err(e) => why.push(format!("nvidia_peermem: {e}")),
        }
        if want == RxMemory::Gpu {
            return Err(Error::ConnectxQueues {
                device: pd.context().name().to_string(),
                detail: format!(
                    "receive buffers in GPU memory: {} (`qfwd doctor` says what this host \
                     lacks; --rx-memory host places them in pinned host memory)",
                    why.join("; ")
                ),
            });
        }
        tracing::warn!(
            "gpu-direct: receive buffers in pinned host memory: GPU memory cannot be \
             registered ({})",
            why.join("; ")
        );
    }
    let region = gpu::mapped_nic_region(ctx.index(), bytes)?;
    for at in (0..region.len()).step_by(16) {
        region.store_chunk(at, crate::queues::direct::POISON);
    }
    let mr = Mr::register(pd, &region)?;
    let device_addr = device_address_of(ctx, region.host_addr(0), "the receive buffers")?;
    Ok(RxBuffers {
        mr,
        nic_addr: region.host_addr(0),
        device_addr,
        placement: RxPlacement::HostPinned,
        host: Some(region),
    })
}

impl DirectService {
    /// Starts the `gpu-direct` kernel on `options.links` ConnectX links (`options.gpu` must
    /// name the GPU: the CPU stand-in serves soft NIC queues only) serving `registry`, and
    /// the control-plane thread that connects each QPU link as it says HELLO.
    pub fn start_rdma(
        options: &DirectOptions,
        registry: &Registry,
        nic: &ConnectxOptions,
    ) -> Result<DirectService> {
        let Some(g) = &options.gpu else {
            return Err(Error::InvalidSetting {
                key: "topology",
                detail: "gpu-direct on a ConnectX runs the GPU kernel (topology gpu-persistent); \
                         the CPU stand-in serves soft NIC queues"
                    .to_string(),
            });
        };
        let table = FunctionTable::new(registry)?;
        let set = LinkSet::new(&options.queues, options.links, options.pollers_per_link)?;
        let region = gpu::mapped_nic_region(g.device, set.len)?;
        set.init(&region)?;
        let ctx = GpuContext::open(g.device)?;
        let base = device_address_of(&ctx, region.host_addr(0), "the gpu-direct counters")?;
        let doorbell = options.queues.doorbell;
        let (queues, descs) = ConnectxQueues::open(options, nic, &ctx, &set, base, &region)?;
        let queues = Arc::new(queues);
        let decoders: Vec<Arc<Decoder>> = gpu::decoder::registry_decoders(registry);
        let params = super::gpu_params(options, g, &table);
        let kernel = gpu::direct::DirectKernel::start_on(
            g,
            &descs,
            Arc::clone(&queues) as _,
            params,
            &decoders,
        )?;
        let proxy = match doorbell {
            Doorbell::CpuAssisted => Some(verbs_proxy(options, &queues, &set, &region)?),
            _ => None,
        };
        let connected = Arc::new(AtomicU32::new(0));
        let (control, control_addr) = start_control(&nic.rdma, &queues.links, &connected)?;
        let description = describe(options, nic, &queues, &kernel, &table, control_addr);
        Ok(DirectService {
            proxy,
            nics: Vec::new(),
            device: Some(super::Device::Gpu(Box::new(kernel))),
            connectx: Some(ConnectxNics {
                control: Some(control),
                queues,
                connected,
                control_addr,
            }),
            nic_stats: vec![None; options.links as usize],
            region,
            set,
            options: options.clone(),
            heartbeat: (0, Instant::now()),
            stalls: 0,
            description,
        })
    }

    /// ConnectX links: the control plane's address (where QPU links say HELLO).
    pub fn control_addr(&self) -> Option<SocketAddr> {
        self.connectx.as_ref().map(|c| c.control_addr)
    }

    /// ConnectX links: how many QPU links have connected (HELLO and START).
    pub fn connected_links(&self) -> u32 {
        self.connectx
            .as_ref()
            .map_or(0, |c| c.connected.load(Ordering::Acquire))
    }
}

impl ConnectxQueues {
    /// Opens `options.links` ConnectX queue sets, maps each for the GPU and describes it
    /// (its counters and rings at `base`, the device address of `region`) for the kernel.
    fn open(
        options: &DirectOptions,
        nic: &ConnectxOptions,
        ctx: &Arc<GpuContext>,
        set: &LinkSet,
        base: u64,
        region: &SharedRegion,
    ) -> Result<(ConnectxQueues, Vec<LinkDesc>)> {
        let doorbell = options.queues.doorbell;
        let (mut links, mut regs, mut descs) = (Vec::new(), Vec::new(), Vec::new());
        for i in 0..options.links {
            let link = Arc::new(ConnectxLink::open(
                &nic.rdma,
                &options.queues,
                |pd, bytes| rx_buffers(ctx, pd, bytes, nic.rx_memory),
            )?);
            if doorbell == Doorbell::BlueFlame && link.queues().qp.bf_size == 0 {
                return Err(Error::ConnectxQueues {
                    device: link.device().to_string(),
                    detail: "the QP has no BlueFlame register (bf.size 0): use --doorbell regular"
                        .to_string(),
                });
            }
            let reg = HostRegistrations::map(ctx, Arc::clone(&link) as _)?;
            let soft: LinkDesc = set.desc(i, base, doorbell, options.queues.signal_every);
            descs.push(link.desc(&soft, &|addr, len, what| reg.device_addr(addr, len, what))?);
            regs.push(reg);
            links.push(link);
        }
        let mut bfs: Vec<u64> = links.iter().map(|l| l.queues().qp.bf_reg).collect();
        bfs.sort_unstable();
        bfs.dedup();
        if bfs.len() != links.len() {
            return Err(Error::InvalidSetting {
                key: "links",
                detail: "two links share one doorbell register; each link needs its own"
                    .to_string(),
            });
        }
        let queues = ConnectxQueues {
            _regs: regs,
            links,
            _region: region.clone(),
        };
        Ok((queues, descs))
    }
}

/// The `cpu-assisted` proxy: posts each link's answers from its response ring in
/// `region` through verbs.
fn verbs_proxy(
    options: &DirectOptions,
    queues: &ConnectxQueues,
    set: &LinkSet,
    region: &SharedRegion,
) -> Result<Proxy> {
    let mut posters = Vec::new();
    for (i, link) in queues.links.iter().enumerate() {
        let ring = RespConsumer::new(&set.link(region, i as u32)?, &set.layout);
        let sender = link.inline_sender(options.queues.signal_every);
        let timeout = options.queues.send_timeout;
        posters.push((ring, VerbsPoster { sender, timeout }));
    }
    Proxy::start_with(posters, &options.queues)
}

/// The start-up line of a service on ConnectX links.
fn describe(
    options: &DirectOptions,
    nic: &ConnectxOptions,
    queues: &ConnectxQueues,
    kernel: &gpu::direct::DirectKernel,
    table: &FunctionTable,
    control_addr: SocketAddr,
) -> String {
    let first = &queues.links[0];
    let q = first.queues();
    format!(
        "gpu-direct: {} ConnectX link(s) on {} port {} ({}, receive buffers in {}, \
         {}-byte CQEs{}, {}), device side GPU {} ({} poller warps per link, {} per slot), \
         doorbell {}, {} function(s); QPU links connect through the control plane on udp {}",
        options.links,
        first.device(),
        nic.rdma.port,
        match first.kind() {
            QpKind::Uc => "UC",
            QpKind::Rc => "RC",
        },
        first.rx_placement(),
        q.recv_cq.cqe_size,
        if q.scatter_to_cqe {
            ", SENDs of <= 32 B scattered into them"
        } else {
            ""
        },
        match q.qp.bf_size {
            0 => "no BlueFlame register".to_string(),
            n => format!("BlueFlame {n} B"),
        },
        kernel.device_index(),
        options.pollers_per_link,
        options.pollers_per_slot,
        options.queues.doorbell,
        table.len(),
        control_addr
    )
}

/// What trying showed about a GPU and an RDMA device together (`qfwd doctor`): each
/// `Ok` says what worked, each `Err` why not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GpuNicProbe {
    /// The NIC's UAR page mapped for the GPU (`cuMemHostRegister(IOMEMORY)`).
    pub uar: std::result::Result<String, String>,
    /// GPU memory registered with the NIC through a dma-buf.
    pub dma_buf: std::result::Result<String, String>,
    /// GPU memory registered with the NIC through `nvidia_peermem`.
    pub peer_memory: std::result::Result<String, String>,
}

/// Tries, on RDMA device `device` and GPU `gpu`, what `gpu-direct` over ConnectX needs:
/// mapping a QP's UAR page for the GPU, and registering 64 KiB of GPU memory with the NIC
/// (dma-buf, then peer memory). `Err` when the device or the GPU cannot be opened at all.
pub fn probe_gpu_nic(device: &str, gpu: usize) -> Result<GpuNicProbe> {
    let ctx = GpuContext::open(gpu)?;
    let uar = Arc::new(UarPage::open(device)?);
    let mapped = HostRegistrations::map(&ctx, Arc::clone(&uar) as _).map(|r| {
        format!(
            "{device}'s UAR page (QPN {:#x}, BlueFlame {} B) is mapped for GPU {gpu} ({} span)",
            uar.qpn(),
            uar.bf_size(),
            r.spans()
        )
    });
    let register = |how: &str| -> Result<String> {
        let memory = Arc::new(NicWritableDeviceMemory::new(&ctx, gpu::memory::GPU_PAGE)?);
        let mr = match how {
            "dma-buf" => Arc::clone(&memory).register_dmabuf(uar.pd())?,
            _ => memory.register_peer_memory(uar.pd())?,
        };
        Ok(format!(
            "{device} registered 64 KiB of GPU {gpu} memory through {how} (rkey {:#x})",
            mr.rkey()
        ))
    };
    Ok(GpuNicProbe {
        uar: mapped.map_err(|e| e.to_string()),
        dma_buf: register("dma-buf").map_err(|e| e.to_string()),
        peer_memory: register("nvidia_peermem").map_err(|e| e.to_string()),
    })
}

/// Binds the control plane and starts its thread; returns it and the bound address.
fn start_control(
    rdma: &RdmaConfig,
    links: &[Arc<ConnectxLink>],
    connected: &Arc<AtomicU32>,
) -> Result<(Worker, SocketAddr)> {
    let mut socket = ControlSocket::bind(rdma.control)?;
    let addr = socket.local_addr()?;
    let mut acceptor = LinkAcceptor::new(links.iter().map(|l| l.endpoint()).collect());
    let links: Vec<Arc<ConnectxLink>> = links.to_vec();
    let connected = Arc::clone(connected);
    let worker = Worker::spawn(
        "qfwd-rdma-control",
        Duration::from_secs(1),
        None,
        move |stop: Arc<AtomicBool>| {
            let mut skipped = 0u64;
            while !stop.load(Ordering::Acquire) {
                let until = Instant::now() + Duration::from_millis(50);
                let (msg, from) = match socket.recv_until(until, &mut skipped) {
                    Ok(Some(m)) => m,
                    Ok(None) => continue,
                    Err(e) => {
                        tracing::warn!("gpu-direct control plane: {e}");
                        std::thread::sleep(Duration::from_millis(50));
                        continue;
                    }
                };
                let reply = acceptor.on_message(msg, from, |link, remote| {
                    links[link].connect(remote)?;
                    tracing::info!(
                        "gpu-direct: link {link} connected to QPN {:#x} at {from}",
                        remote.qpn
                    );
                    Ok(())
                });
                connected.store(acceptor.started(), Ordering::Release);
                if let Some(reply) = reply {
                    if let Err(e) = socket.send(from, &reply) {
                        tracing::warn!("gpu-direct control plane: {e}");
                    }
                }
            }
        },
    )?;
    Ok((worker, addr))
}

/// One link's QPU, as the control plane knows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Peer {
    remote: Endpoint,
    addr: SocketAddr,
    session: Option<u64>,
}

/// The qfwd side of the control plane for several links: each QPU that says HELLO gets
/// the next free link (connected before the answer), a repeated HELLO the same answer;
/// START and STOP are acknowledged for the QPU's own link.
pub struct LinkAcceptor {
    ours: Vec<Endpoint>,
    peers: Vec<Option<Peer>>,
}

impl LinkAcceptor {
    /// One link per endpoint (what HELLO_ACK carries for it).
    pub fn new(ours: Vec<Endpoint>) -> LinkAcceptor {
        let peers = vec![None; ours.len()];
        LinkAcceptor { ours, peers }
    }

    /// Links whose QPU has sent START.
    pub fn started(&self) -> u32 {
        self.peers
            .iter()
            .filter(|p| p.is_some_and(|p| p.session.is_some()))
            .count() as u32
    }

    /// Handles one message from `from`; `connect(link, remote)` brings a link's QP up.
    /// Returns the answer to send back, if any.
    pub fn on_message(
        &mut self,
        msg: Message,
        from: SocketAddr,
        connect: impl FnOnce(usize, &Endpoint) -> Result<()>,
    ) -> Option<Message> {
        let known = self
            .peers
            .iter()
            .position(|p| p.is_some_and(|p| p.addr == from));
        let error = |code, text: String| Message::Error {
            code,
            text: text.chars().take(MAX_ERROR_TEXT).collect(),
        };
        match (msg, known) {
            (Message::Hello(e), Some(i)) => Some(match self.peers[i] {
                Some(p) if p.remote == e => Message::HelloAck(self.ours[i]),
                _ => error(
                    2,
                    format!("{from} already holds link {i} with another queue pair"),
                ),
            }),
            (Message::Hello(e), None) => {
                let Some(i) = self.peers.iter().position(Option::is_none) else {
                    return Some(error(
                        2,
                        format!("all {} links are connected", self.ours.len()),
                    ));
                };
                if let Err(err) = connect(i, &e) {
                    return Some(error(3, err.to_string()));
                }
                self.peers[i] = Some(Peer {
                    remote: e,
                    addr: from,
                    session: None,
                });
                Some(Message::HelloAck(self.ours[i]))
            }
            (Message::Start { session }, Some(i)) => {
                if let Some(p) = self.peers[i].as_mut() {
                    p.session = Some(session);
                }
                Some(Message::Ack {
                    session,
                    kind: kind::START,
                })
            }
            (Message::Start { .. }, None) => Some(error(1, "START before HELLO".into())),
            (Message::Stop { session }, Some(i)) => {
                tracing::info!("gpu-direct: the QPU of link {i} sent STOP");
                Some(Message::Ack {
                    session,
                    kind: kind::STOP,
                })
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ep(qpn: u32) -> Endpoint {
        Endpoint {
            qpn,
            ..Default::default()
        }
    }

    #[test]
    fn each_qpu_gets_the_next_link_and_keeps_it() {
        let mut a = LinkAcceptor::new(vec![ep(100), ep(200)]);
        let (q1, q2, q3): (SocketAddr, SocketAddr, SocketAddr) = (
            "10.0.0.1:5000".parse().unwrap(),
            "10.0.0.2:5000".parse().unwrap(),
            "10.0.0.3:5000".parse().unwrap(),
        );
        let mut connected = Vec::new();
        let mut hello = |a: &mut LinkAcceptor, from, qpn| {
            a.on_message(Message::Hello(ep(qpn)), from, |i, e| {
                connected.push((i, e.qpn));
                Ok(())
            })
        };
        assert_eq!(hello(&mut a, q1, 1), Some(Message::HelloAck(ep(100))));
        // A repeated HELLO (the answer was lost) gets the same answer, no second connect.
        assert_eq!(hello(&mut a, q1, 1), Some(Message::HelloAck(ep(100))));
        assert_eq!(hello(&mut a, q2, 2), Some(Message::HelloAck(ep(200))));
        assert!(matches!(
            hello(&mut a, q3, 3),
            Some(Message::Error { code: 2, .. })
        ));
        assert!(matches!(
            hello(&mut a, q1, 9),
            Some(Message::Error { code: 2, .. })
        ));
        assert_eq!(connected, vec![(0, 1), (1, 2)]);
        assert_eq!(a.started(), 0);
        let start = |s| Message::Start { session: s };
        assert_eq!(
            a.on_message(start(7), q2, |_, _| unreachable!()),
            Some(Message::Ack {
                session: 7,
                kind: kind::START
            })
        );
        assert_eq!(a.started(), 1);
        assert!(matches!(
            a.on_message(start(8), q3, |_, _| unreachable!()),
            Some(Message::Error { code: 1, .. })
        ));
        assert_eq!(
            a.on_message(Message::Stop { session: 7 }, q2, |_, _| unreachable!()),
            Some(Message::Ack {
                session: 7,
                kind: kind::STOP
            })
        );
        assert_eq!(
            a.on_message(Message::Stop { session: 7 }, q3, |_, _| unreachable!()),
            None
        );
    }

    #[test]
    fn a_link_that_cannot_connect_stays_free() {
        let mut a = LinkAcceptor::new(vec![ep(100)]);
        let from: SocketAddr = "10.0.0.1:5000".parse().unwrap();
        let r = a.on_message(Message::Hello(ep(1)), from, |_, _| {
            Err(Error::ControlPlane {
                detail: "RTR refused".into(),
            })
        });
        assert!(
            matches!(r, Some(Message::Error { code: 3, ref text }) if text.contains("RTR refused"))
        );
        let r = a.on_message(Message::Hello(ep(1)), from, |_, _| Ok(()));
        assert_eq!(r, Some(Message::HelloAck(ep(100))));
    }
}
