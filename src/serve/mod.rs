//! Assembling a service in one place: [`start`] picks the transport, the data path and the
//! backend a [`RunConfig`] names, wires the QPU side as [`Wiring`] says, and hands back one
//! [`Running`] handle, whatever was assembled. Used by `qfwd run` and by the latency
//! harness (which runs services in-process).
//!
//! - Transport x wiring: UDP sockets (`udp`), a soft NIC whose wire is a UDP socket or an
//!   in-process ring (`softnic`), RDMA (`rdma`), or an in-process ring (`inproc`);
//!   [`wiring`] builds the wires, so the soft NIC and the `gpu-direct` service take any.
//! - Data path: `cpu-forwarded` runs the forwarding loop on its own thread over the backend
//!   the topology names ([`forwarder`]); `gpu-direct` starts the device side on the NIC
//!   queues with no thread in between ([`crate::direct::DirectService`]): soft NICs on
//!   UDP or in-process wires, or (transport `rdma`) ConnectX links.
//! - [`Running`]: live interval reports ([`Running::poll`], time passed in), the QPU ends
//!   of in-process wires ([`Running::take_qpu_ends`]), stop, and the final counters
//!   ([`Running::join`]).
//! - [`start_streams`]: the stream service (`qfwd run --streams`), its own handle
//!   ([`RunningStreams`]: stream counters, not the forwarder's).
#![forbid(unsafe_code)]

mod direct;
mod forwarder;
pub mod wiring;

use std::net::SocketAddr;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Instant;

use crate::backend::Topology;
use crate::config::RunConfig;
use crate::direct::{DataPath, DirectReport, DirectService, LinkClient};
use crate::gpu;
use crate::queues::{NicLayout, SoftNicConfig};
use crate::shm::SharedRegion;
use crate::stats::{Interval, Stats};
use crate::stream::{RunningStreams, ServiceOptions};
use crate::transport::inproc::{self, InprocClient, InprocServer};
use crate::transport::udp::{AllowedPeer, UdpTransport};
use crate::transport::{Client, TransportKind};
use crate::wire::HEADER_LEN;
use crate::{Error, Result};

use direct::DirectRun;
use forwarder::ForwarderThread;

/// Where the QPU side reaches the service.
pub enum Wiring {
    /// The network, as `config.transport` says: a UDP socket on `config.listen` (`udp`), a
    /// soft NIC whose wire is that socket (`softnic`; with `gpu-direct`, one socket per link
    /// on consecutive ports), or RDMA (`rdma`). `inproc` has no network side: an error.
    Network,
    /// This process where the transport allows it: an in-process ring (`inproc`), the soft
    /// NIC's in-process wire (`softnic`), or with `gpu-direct` one in-process NIC end per
    /// link; their QPU ends come from [`Running::take_qpu_ends`]. `udp` and `rdma` still
    /// bind their sockets (the QPU side connects to [`Running::local_addrs`]).
    InProcess,
    /// `inproc` over a ring the caller made (its sizes), the caller keeping the QPU end.
    Ring(InprocServer),
}

/// The QPU end of an in-process wire: what the emulator drives.
pub enum QpuEnd {
    /// An in-process ring (`inproc`, or the soft NIC's in-process wire).
    Ring(InprocClient),
    /// One `gpu-direct` link, whose NIC the emulator is.
    Link(Box<LinkClient>),
}

impl Client for QpuEnd {
    fn send(&mut self, bytes: &[u8]) -> Result<bool> {
        match self {
            QpuEnd::Ring(c) => c.send(bytes),
            QpuEnd::Link(c) => c.send(bytes),
        }
    }

    fn try_recv(&mut self, buf: &mut [u8]) -> Result<Option<usize>> {
        match self {
            QpuEnd::Ring(c) => c.try_recv(buf),
            QpuEnd::Link(c) => c.try_recv(buf),
        }
    }

    fn describe(&self) -> String {
        match self {
            QpuEnd::Ring(c) => c.describe(),
            QpuEnd::Link(c) => c.describe(),
        }
    }
}

/// What a stopped service counted.
pub struct Report {
    /// The forwarder's counters (`gpu-direct`: the device side's, in the same terms).
    pub stats: Stats,
    /// `gpu-direct`: per link, the device side's and the NICs' counters.
    pub direct: Option<DirectReport>,
}

enum Service {
    Forwarder(ForwarderThread),
    Direct(Box<DirectRun>),
}

/// A running service: a forwarding thread, or a `gpu-direct` device side.
pub struct Running {
    service: Service,
    local_addrs: Vec<SocketAddr>,
    qpu_ends: Vec<QpuEnd>,
    description: String,
}

impl Running {
    /// The first UDP address it listens on (None for in-process wires and RDMA).
    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.local_addrs.first().copied()
    }

    /// Every UDP address it listens on (`gpu-direct`: one per link).
    pub fn local_addrs(&self) -> &[SocketAddr] {
        &self.local_addrs
    }

    /// The QPU ends of its in-process wires (once; empty for network wiring).
    pub fn take_qpu_ends(&mut self) -> Vec<QpuEnd> {
        std::mem::take(&mut self.qpu_ends)
    }

    /// One line saying what is served, where, and how (the start-up line).
    pub fn description(&self) -> &str {
        &self.description
    }

    /// The `gpu-direct` service, while it runs.
    pub fn direct_service(&self) -> Option<&DirectService> {
        match &self.service {
            Service::Direct(d) => d.service(),
            Service::Forwarder(_) => None,
        }
    }

    /// The flag that stops it (signal handlers set it).
    pub fn stop_flag(&self) -> Arc<AtomicBool> {
        match &self.service {
            Service::Forwarder(f) => f.stop_flag(),
            Service::Direct(d) => d.stop_flag(),
        }
    }

    /// One step at `now`: the interval reports made since the last call (none when
    /// `stats_interval_s` is 0), for the caller to print or serialize. A `gpu-direct`
    /// service also checks its device side's heartbeat here, and ends at its duration.
    pub fn poll(&mut self, now: Instant) -> Vec<Interval> {
        match &mut self.service {
            Service::Forwarder(f) => f.intervals(),
            Service::Direct(d) => d.poll(now),
        }
    }

    /// Whether it has ended (duration elapsed, an error, or asked to stop).
    pub fn is_finished(&self) -> bool {
        match &self.service {
            Service::Forwarder(f) => f.is_finished(),
            Service::Direct(d) => d.is_finished(),
        }
    }

    /// Asks it to stop; [`Running::join`] drains what is in flight, then ends it.
    pub fn stop(&self) {
        match &self.service {
            Service::Forwarder(f) => f.stop(),
            Service::Direct(d) => d.stop(),
        }
    }

    /// Stops it (if it has not stopped), waits for the end, and returns its counters.
    pub fn join(self) -> Result<Report> {
        match self.service {
            Service::Forwarder(f) => {
                f.stop();
                Ok(Report {
                    stats: f.join()?,
                    direct: None,
                })
            }
            Service::Direct(d) => {
                let report = (*d).join()?;
                Ok(Report {
                    stats: report.stats.clone(),
                    direct: Some(report),
                })
            }
        }
    }
}

/// Starts the service `config` describes, its QPU side wired as `wiring` says. Returns
/// once it serves (a GPU start compiles kernels and allocates first); a start that fails
/// is an error here, never a service that silently does not answer.
pub fn start(config: &RunConfig, wiring: Wiring) -> Result<Running> {
    config.validate()?;
    if config.transport == TransportKind::Inproc && matches!(wiring, Wiring::Network) {
        return Err(Error::InvalidSetting {
            key: "transport",
            detail: "inproc connects threads of one process; to measure it, run \
                     `qfwd-latency emulate --inproc` (it starts the forwarder itself)"
                .to_string(),
        });
    }
    if config.transport != TransportKind::Inproc && matches!(wiring, Wiring::Ring(_)) {
        return Err(Error::InvalidSetting {
            key: "transport",
            detail: format!(
                "an in-process ring serves transport inproc, not {}",
                config.transport
            ),
        });
    }
    match config.data_path {
        DataPath::CpuForwarded => start_forwarded(config, wiring),
        DataPath::GpuDirect => start_direct(config, wiring),
    }
}

/// Starts the stream service `config.streams` describes (`qfwd run --streams`): the model
/// of `config.dem` cut into windows, decoded by the CPU pool, on a UDP socket at `listen`.
pub fn start_streams(config: &RunConfig) -> Result<RunningStreams> {
    config.validate()?;
    let (Some(settings), Some(dem)) = (config.streams.clone(), config.dem.as_deref()) else {
        return Err(Error::InvalidSetting {
            key: "streams",
            detail: "streams need --streams N and --dem FILE".to_string(),
        });
    };
    let model = crate::stream::load_model(dem, &settings)?;
    let opts = ServiceOptions {
        settings,
        cores: config.cores.clone(),
        idle: config.idle,
        batch: config.batch,
    };
    wiring::streams_udp(&opts, model, config.listen, config.allowlist()?)
}

/// Requests an in-process ring made here holds at once.
const RING_DEPTH: usize = 4096;

/// The `cpu-forwarded` data path on the transport `config` names.
fn start_forwarded(config: &RunConfig, wiring: Wiring) -> Result<Running> {
    let mut local_addrs = Vec::new();
    let mut qpu_ends = Vec::new();
    let (thread, description) = match (config.transport, wiring) {
        (TransportKind::Inproc, wiring) => {
            let server = match wiring {
                Wiring::Ring(server) => server,
                _ => {
                    let slot = HEADER_LEN + config.max_request_bytes.max(64) + 64;
                    let (client, server) = inproc::channel(RING_DEPTH, slot)?;
                    qpu_ends.push(QpuEnd::Ring(client));
                    server
                }
            };
            let where_ = "inproc ring".to_string();
            let description = forwarder::describe(config, &where_)?;
            (forwarder::spawn(server, config, None)?, description)
        }
        (TransportKind::Udp, _) => {
            let transport = UdpTransport::bind(config.listen, config.allowlist()?)?;
            let local = transport.local_addr();
            local_addrs.push(local);
            let where_ = format!("udp {local}; {}", allow_description(transport.allowlist()));
            let description = forwarder::describe(config, &where_)?;
            (forwarder::spawn(transport, config, None)?, description)
        }
        (TransportKind::Softnic, wiring) => {
            let nic = config.softnic_config();
            let region = softnic_region(config, &nic)?;
            let device_posted = config.device_posts();
            let (transport, where_) = if matches!(wiring, Wiring::InProcess) {
                let (client, transport) = wiring::softnic_inproc_in(&nic, region, device_posted)?;
                qpu_ends.push(QpuEnd::Ring(client));
                let where_ = format!("soft NIC ({}) on an inproc ring", softnic_doorbell(config));
                (transport, where_)
            } else {
                let allow = config.allowlist()?;
                let (local, transport) = wiring::softnic_udp_in(
                    &nic,
                    config.listen,
                    allow.clone(),
                    region,
                    device_posted,
                )?;
                local_addrs.push(local);
                let where_ = format!(
                    "soft NIC ({}) on udp {local}; {}; its queue pair connects to the first of \
                     them that sends a request",
                    softnic_doorbell(config),
                    allow_description(&allow)
                );
                (transport, where_)
            };
            let description = forwarder::describe(config, &where_)?;
            let posting = transport.device_posting();
            (forwarder::spawn(transport, config, posting)?, description)
        }
        (TransportKind::Rdma, _) => start_rdma(config)?,
    };
    Ok(Running {
        service: Service::Forwarder(thread),
        local_addrs,
        qpu_ends,
        description,
    })
}

/// Waits for the QPU side on the RDMA control plane (`listen`), connects the queue pair,
/// then starts the loop. Needs the `rdma` feature and a RoCE-capable device.
fn start_rdma(config: &RunConfig) -> Result<(ForwarderThread, String)> {
    #[cfg(feature = "rdma")]
    {
        let cfg = crate::rdma::RdmaConfig {
            control: config.listen,
            slot_bytes: (HEADER_LEN + config.max_request_bytes).next_multiple_of(64) as u32,
            ..crate::rdma::RdmaConfig::default()
        };
        let listener = crate::rdma::RdmaListener::bind(&cfg)?;
        tracing::info!(
            "RDMA control plane on udp {}; waiting for the QPU side (handshake timeout {:?})",
            config.listen,
            cfg.handshake_timeout
        );
        let transport = listener.accept()?;
        let where_ = format!(
            "rdma on {} (peer control {})",
            transport.device(),
            transport.peer().1
        );
        let description = forwarder::describe(config, &where_)?;
        Ok((forwarder::spawn(transport, config, None)?, description))
    }
    #[cfg(not(feature = "rdma"))]
    {
        let _ = config;
        Err(Error::InvalidSetting {
            key: "transport",
            detail: "rdma needs a build with `--features rdma` (libibverbs-dev, librdmacm-dev, \
                     libclang-dev, pkg-config) and a RoCE-capable NIC; `qfwd doctor` lists what \
                     this host has"
                .to_string(),
        })
    }
}

/// The `gpu-direct` data path: the device side (the GPU kernel, or the CPU stand-in with
/// topology `cpu`) on `config.links` links, each link's NIC a soft NIC thread on a UDP
/// socket (`listen`'s port + i) or, in-process, the emulator itself. No forwarding thread.
fn start_direct(config: &RunConfig, wiring: Wiring) -> Result<Running> {
    if matches!(wiring, Wiring::Ring(_)) {
        return Err(Error::InvalidSetting {
            key: "data_path",
            detail: "gpu-direct links are NIC queues, not an in-process ring: wire them \
                     in-process (each link's QPU end) or over the network"
                .to_string(),
        });
    }
    if config.transport == TransportKind::Rdma {
        let service = start_direct_rdma(config)?;
        let description = format!(
            "{}; waiting for {} QPU link(s) on the RDMA control plane at {}",
            service.description(),
            config.links,
            config.listen
        );
        return Ok(Running {
            service: Service::Direct(Box::new(DirectRun::new(service, config, Instant::now()))),
            local_addrs: Vec::new(),
            qpu_ends: Vec::new(),
            description,
        });
    }
    if config.topology == Topology::GpuPersistent {
        // A clear error (no GPU) before anything starts.
        forwarder::gpu_for(config)?;
    }
    let registry = config.registry()?;
    let mut service = DirectService::start(&config.direct_options(), &registry)?;
    let mut local_addrs = Vec::new();
    let mut qpu_ends = Vec::new();
    let links = match wiring {
        Wiring::InProcess => {
            for i in 0..service.links() {
                qpu_ends.push(QpuEnd::Link(Box::new(service.link_client(i)?)));
            }
            "in-process links".to_string()
        }
        _ => {
            local_addrs = wiring::direct_udp(&mut service, config.listen, &config.allowlist()?)?;
            let addrs: Vec<String> = local_addrs.iter().map(|a| a.to_string()).collect();
            format!("soft NIC links on udp {}", addrs.join(", "))
        }
    };
    let description = format!("{}; {links}", service.description());
    Ok(Running {
        service: Service::Direct(Box::new(DirectRun::new(service, config, Instant::now()))),
        local_addrs,
        qpu_ends,
        description,
    })
}

/// The `gpu-direct` kernel on ConnectX links: `config.links` queue sets on the RDMA device
/// (`QFWD_RDMA_DEVICE` etc.: [`crate::direct::connectx::ConnectxOptions::from_env`]), each
/// connected to the QPU side that says HELLO on the control plane at `listen`. Needs the
/// `rdma` feature, a ConnectX and a GPU.
fn start_direct_rdma(config: &RunConfig) -> Result<DirectService> {
    #[cfg(feature = "rdma")]
    {
        // A clear error (no GPU) before anything starts.
        if let Some(why) = gpu::unavailable_reason() {
            return Err(Error::GpuUnavailable {
                detail: format!(
                    "gpu-direct on a ConnectX runs the GPU kernel ({})",
                    why.trim_start_matches("no usable GPU: ")
                ),
            });
        }
        let registry = config.registry()?;
        let nic =
            crate::direct::connectx::ConnectxOptions::from_env(config.listen, config.rx_memory)?;
        DirectService::start_rdma(&config.direct_options(), &registry, &nic)
    }
    #[cfg(not(feature = "rdma"))]
    {
        let _ = config;
        Err(Error::InvalidSetting {
            key: "transport",
            detail: "gpu-direct over rdma needs a build with `--features rdma`, a ConnectX and \
                     a GPU (docs/lab-gpu-direct.md)"
                .to_string(),
        })
    }
}

/// The start-up line's words on who may send requests.
fn allow_description(allowlist: &[AllowedPeer]) -> String {
    if allowlist.is_empty() {
        "no allowlist: accepting requests from every peer".to_string()
    } else {
        let list: Vec<String> = allowlist.iter().map(|a| a.to_string()).collect();
        format!("allowing only {}", list.join(", "))
    }
}

/// The soft NIC's memory: GPU-mapped pinned memory when the kernel posts to it, the heap
/// otherwise.
fn softnic_region(config: &RunConfig, nic: &SoftNicConfig) -> Result<SharedRegion> {
    let len = NicLayout::new(nic)?.len;
    if config.device_posts() {
        // A clear error (no GPU) before anything starts.
        forwarder::gpu_for(config)?;
        gpu::mapped_nic_region(config.gpu_device, len)
    } else {
        SharedRegion::heap(len)
    }
}

fn softnic_doorbell(config: &RunConfig) -> String {
    if config.device_posts() {
        format!("{} doorbell rung by the GPU", config.doorbell)
    } else {
        format!("{} doorbell", config.doorbell)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::idle::IdlePolicy;
    use crate::mlx5::Doorbell;

    fn in_process(transport: TransportKind) -> RunConfig {
        RunConfig {
            transport,
            idle: IdlePolicy::Yield,
            stats_interval_s: 0.0,
            ..RunConfig::default()
        }
    }

    #[test]
    fn pinning_to_a_missing_core_is_a_clear_error() {
        let cfg = RunConfig {
            cores: vec![1000],
            ..in_process(TransportKind::Inproc)
        };
        let (_c, server) = inproc::channel(4, 64).unwrap();
        let e = start(&cfg, Wiring::Ring(server))
            .err()
            .expect("no such core")
            .to_string();
        assert!(e.contains("core 1000"), "{e}");
    }

    #[test]
    fn wirings_that_cannot_be_are_refused() {
        let e = start(&in_process(TransportKind::Inproc), Wiring::Network)
            .err()
            .expect("inproc has no network side")
            .to_string();
        assert!(e.contains("qfwd-latency emulate --inproc"), "{e}");
        let (_c, server) = inproc::channel(4, 64).unwrap();
        let e = start(&in_process(TransportKind::Udp), Wiring::Ring(server))
            .err()
            .expect("a ring is inproc's")
            .to_string();
        assert!(e.contains("transport inproc"), "{e}");
    }

    /// Every in-process assembly answers through the QPU ends it hands back, and its
    /// counters come back from `join`.
    #[test]
    fn in_process_assemblies_answer_through_their_qpu_ends() {
        let direct = RunConfig {
            data_path: DataPath::GpuDirect,
            links: 2,
            doorbell: Doorbell::Regular,
            ..in_process(TransportKind::Softnic)
        };
        for (config, ends) in [
            (in_process(TransportKind::Inproc), 1),
            (in_process(TransportKind::Softnic), 1),
            (direct, 2),
        ] {
            let mut running = start(&config, Wiring::InProcess).unwrap();
            let mut qpu = running.take_qpu_ends();
            assert_eq!(qpu.len(), ends, "{}", running.description());
            assert!(running.take_qpu_ends().is_empty());
            let mut buf = vec![0u8; 256];
            for (i, end) in qpu.iter_mut().enumerate() {
                let id = crate::wire::function_id("parity");
                let n = crate::wire::write_request(&mut buf, id, i as u32, 0, &[7]).unwrap();
                assert!(end.send(&buf[..n]).unwrap());
                let deadline = Instant::now() + std::time::Duration::from_secs(10);
                let got = loop {
                    if let Some(n) = end.try_recv(&mut buf).unwrap() {
                        break n;
                    }
                    assert!(Instant::now() < deadline, "{}", running.description());
                    std::thread::yield_now();
                };
                let r = crate::wire::parse_response(&buf[..got]).unwrap();
                assert_eq!((r.header.request_id, r.result), (i as u32, &[1u8][..]));
            }
            assert!(running.poll(Instant::now()).is_empty());
            let report = running.join().unwrap();
            assert_eq!(report.stats.answered_ok, ends as u64);
            assert!(report.stats.adds_up());
            assert_eq!(
                report.direct.is_some(),
                config.data_path == DataPath::GpuDirect
            );
        }
    }
}
