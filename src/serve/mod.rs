//! Starting a forwarder: pick the transport and backend a [`RunConfig`] names, pin a
//! thread, run the loop, hand back the counters. Used by `qfwd run` and by the
//! latency harness (which runs forwarders in-process).
#![forbid(unsafe_code)]

pub mod wiring;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::backend::{Backend, CpuBackend, Topology};
use crate::config::RunConfig;
use crate::direct::DirectService;
use crate::forward::{Forwarder, StopWhen};
use crate::gpu;
use crate::handler::Registry;
use crate::route::{RouteBackend, RouteCounters, RouteMap};
use crate::softnic::DevicePosting;
use crate::stats::{Interval, Stats};
use crate::transport::inproc::InprocServer;
use crate::transport::udp::UdpTransport;
use crate::transport::Transport;
use crate::{Error, Result};

/// A forwarder running on its own thread.
pub struct Running {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<Result<Stats>>>,
    local_addr: Option<SocketAddr>,
    description: String,
    /// Live interval reports (every `stats_interval_s`), oldest first.
    intervals: mpsc::Receiver<Interval>,
}

impl Running {
    /// The UDP address it listens on (None for inproc).
    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.local_addr
    }

    /// One line saying what is served, where, and how (the start-up line).
    pub fn description(&self) -> &str {
        &self.description
    }

    /// The flag that stops it (signal handlers set it).
    pub fn stop_flag(&self) -> Arc<AtomicBool> {
        self.stop.clone()
    }

    /// The interval reports made since the last call (none when `stats_interval_s` is 0):
    /// the caller prints them, as text or JSON.
    pub fn intervals(&self) -> impl Iterator<Item = Interval> + '_ {
        self.intervals.try_iter()
    }

    /// Whether the loop has ended (duration elapsed, or an error).
    pub fn is_finished(&self) -> bool {
        self.thread.as_ref().is_none_or(|t| t.is_finished())
    }

    /// Asks it to stop; it drains in-flight requests, then exits.
    pub fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
    }

    /// Waits for it to end and returns its counters.
    pub fn join(mut self) -> Result<Stats> {
        let t = self.thread.take().ok_or(Error::ThreadPanicked)?;
        t.join().map_err(|_| Error::ThreadPanicked)?
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(t) = self.thread.take() {
            self.stop.store(true, Ordering::Relaxed);
            let _ = t.join();
        }
    }
}

/// Binds the UDP socket (so the address is known and errors surface here), then
/// starts the loop on its own thread.
pub fn spawn_udp(config: &RunConfig) -> Result<Running> {
    config.validate()?;
    let transport = UdpTransport::bind(config.listen, config.allowlist()?)?;
    let local = transport.local_addr();
    let description = format!("udp {local}; {}", allow_description(transport.allowlist()));
    spawn(transport, config, Some(local), description, None)
}

/// The start-up line's words on who may send requests.
fn allow_description(allowlist: &[crate::transport::udp::AllowedPeer]) -> String {
    if allowlist.is_empty() {
        "no allowlist: accepting requests from every peer".to_string()
    } else {
        let list: Vec<String> = allowlist.iter().map(|a| a.to_string()).collect();
        format!("allowing only {}", list.join(", "))
    }
}

/// Starts a soft NIC whose wire is a UDP socket, and the loop behind it. With
/// `gpu-persistent` and a `regular` or `blueflame` doorbell the kernel rings the NIC
/// itself ([`RunConfig::device_posts`]).
pub fn spawn_softnic_udp(config: &RunConfig) -> Result<Running> {
    config.validate()?;
    let nic = config.softnic_config();
    let region = softnic_region(config, &nic)?;
    let (local, transport) = wiring::softnic_udp_in(
        &nic,
        config.listen,
        config.allowlist()?,
        region,
        config.device_posts(),
    )?;
    let description = format!(
        "soft NIC ({}) on udp {local}; {}; its queue pair connects to the first of them \
         that sends a request",
        softnic_doorbell(config),
        allow_description(&config.allowlist()?)
    );
    let posting = transport.device_posting();
    spawn(transport, config, Some(local), description, posting)
}

/// Starts the loop behind a soft NIC whose wire is an in-process ring; returns the
/// emulator's end of the ring too. Device posting as in [`spawn_softnic_udp`].
pub fn spawn_softnic_inproc(
    config: &RunConfig,
) -> Result<(crate::transport::inproc::InprocClient, Running)> {
    config.validate()?;
    let nic = config.softnic_config();
    let region = softnic_region(config, &nic)?;
    let (client, transport) = wiring::softnic_inproc_in(&nic, region, config.device_posts())?;
    let description = format!("soft NIC ({}) on an inproc ring", softnic_doorbell(config));
    let posting = transport.device_posting();
    Ok((
        client,
        spawn(transport, config, None, description, posting)?,
    ))
}

/// The soft NIC's memory: GPU-mapped pinned memory when the kernel posts to it, the heap
/// otherwise.
fn softnic_region(
    config: &RunConfig,
    nic: &crate::softnic::SoftNicConfig,
) -> Result<crate::softnic::SharedRegion> {
    let len = crate::softnic::NicLayout::new(nic)?.len;
    if config.device_posts() {
        // A clear error (no GPU) before anything starts.
        gpu_for(config)?;
        gpu::mapped_nic_region(config.gpu_device, len)
    } else {
        crate::softnic::SharedRegion::heap(len)
    }
}

fn softnic_doorbell(config: &RunConfig) -> String {
    if config.device_posts() {
        format!("{} doorbell rung by the GPU", config.doorbell)
    } else {
        format!("{} doorbell", config.doorbell)
    }
}

/// Waits for the QPU side on the RDMA control plane (`listen`), connects the queue pair,
/// then starts the loop. Needs the `rdma` feature and a RoCE-capable device.
pub fn spawn_rdma(config: &RunConfig) -> Result<Running> {
    config.validate()?;
    #[cfg(feature = "rdma")]
    {
        let cfg = crate::rdma::RdmaConfig {
            control: config.listen,
            slot_bytes: (crate::wire::HEADER_LEN + config.max_request_bytes).next_multiple_of(64)
                as u32,
            ..crate::rdma::RdmaConfig::default()
        };
        let listener = crate::rdma::RdmaListener::bind(&cfg)?;
        tracing::info!(
            "RDMA control plane on udp {}; waiting for the QPU side (handshake timeout {:?})",
            config.listen,
            cfg.handshake_timeout
        );
        let transport = listener.accept()?;
        let description = format!(
            "rdma on {} (peer control {})",
            transport.device(),
            transport.peer().1
        );
        spawn(transport, config, None, description, None)
    }
    #[cfg(not(feature = "rdma"))]
    {
        Err(Error::InvalidSetting {
            key: "transport",
            detail: "rdma needs a build with `--features rdma` (libibverbs-dev, librdmacm-dev, \
                     libclang-dev, pkg-config) and a RoCE-capable NIC; `qfwd doctor` lists what \
                     this host has"
                .to_string(),
        })
    }
}

/// Starts the `gpu-direct` data path behind UDP: the device side (the GPU kernel, or the
/// CPU stand-in with topology `cpu`) on `config.links` links, each with a soft NIC thread
/// whose wire is a UDP socket on `listen`'s port + i. Returns the service and the bound
/// addresses. No forwarding thread runs.
pub fn start_direct_udp(config: &RunConfig) -> Result<(DirectService, Vec<SocketAddr>)> {
    config.validate()?;
    if config.topology == Topology::GpuPersistent {
        // A clear error (no GPU) before anything starts.
        gpu_for(config)?;
    }
    let registry = config.registry()?;
    let mut service = DirectService::start(&config.direct_options(), &registry)?;
    let addrs = wiring::direct_udp(&mut service, config.listen, &config.allowlist()?)?;
    Ok((service, addrs))
}

/// Starts the loop on its own thread, serving the forwarder end of an in-process
/// channel.
pub fn spawn_inproc(config: &RunConfig, server: InprocServer) -> Result<Running> {
    config.validate()?;
    spawn(server, config, None, "inproc ring".to_string(), None)
}

fn spawn<T>(
    transport: T,
    config: &RunConfig,
    local_addr: Option<SocketAddr>,
    where_: String,
    nic: Option<DevicePosting>,
) -> Result<Running>
where
    T: Transport + Send + 'static,
    T::Peer: Send,
{
    let registry = config.registry()?;
    let handlers: Vec<String> = registry
        .entries()
        .iter()
        .map(|e| format!("{} (function_id {:#010x})", e.name, e.function_id))
        .collect();
    let core = config.cores.first().copied();
    let gpus = gpus_for(config)?;
    let on = gpus
        .iter()
        .map(|g| g.to_string())
        .collect::<Vec<_>>()
        .join(" and ");
    let mut topology = if gpus.is_empty() {
        config.topology.to_string()
    } else if config.topology == Topology::GpuPersistent {
        format!(
            "{} on {on}, rx_completion {}, {} pollers ({} per slot), {} slots{}",
            config.topology,
            config.rx_completion,
            config.pollers,
            config.gpu_options().pollers_per_slot,
            config.slots,
            if gpus.len() > 1 { " per GPU" } else { "" }
        )
    } else {
        format!("{} on {on}", config.topology)
    };
    if config.routed() {
        let map = RouteMap::new(&registry, &config.gpus, &config.route)?;
        topology.push_str(&format!(
            "; {} shard(s), routes {}",
            map.shards(),
            map.describe()
        ));
    }
    let description = format!(
        "serving {} on {}; topology {}; {}",
        handlers.join(", "),
        where_,
        topology,
        match core {
            Some(c) => format!("pinned to core {c}"),
            None => "not pinned".to_string(),
        }
    );
    if let Some(c) = core {
        // The machine's online cores, not this thread's mask: a caller pinned elsewhere
        // (the harness pins its emulator) may still start a forwarder on another core.
        crate::host::check_online(c)?;
    }
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    let config_topology = config.topology;
    let config = config.clone();
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let (intervals_tx, intervals) = mpsc::channel();
    let thread = std::thread::Builder::new()
        .name("qfwd-forward".to_string())
        .spawn(move || -> Result<Stats> {
            READY.with(|r| *r.borrow_mut() = Some(ready_tx));
            INTERVALS.with(|r| *r.borrow_mut() = Some(intervals_tx));
            if let Some(c) = core {
                if !core_affinity::set_for_current(core_affinity::CoreId { id: c }) {
                    return Err(Error::Pin {
                        core: c,
                        detail: "sched_setaffinity refused".to_string(),
                    });
                }
            }
            serve_with_nic(transport, registry, &config, &flag, nic.as_ref())
        })
        .map_err(|source| Error::Io {
            what: "spawning the forwarding thread".to_string(),
            source,
        })?;
    // Return only once the backend runs (a GPU start compiles kernels and allocates), so a
    // failed start is an error here and not a forwarder that silently never answers.
    let deadline = Instant::now() + BACKEND_START_TIMEOUT;
    loop {
        match ready_rx.recv_timeout(Duration::from_millis(20)) {
            Ok(()) => break,
            Err(_) if thread.is_finished() => {
                return Err(thread
                    .join()
                    .map_err(|_| Error::ThreadPanicked)?
                    .err()
                    .unwrap_or(Error::ThreadPanicked));
            }
            Err(_) if Instant::now() > deadline => {
                stop.store(true, Ordering::Relaxed);
                return Err(Error::InvalidSetting {
                    key: "topology",
                    detail: format!(
                        "the {} backend did not start within {BACKEND_START_TIMEOUT:?}",
                        config_topology
                    ),
                });
            }
            Err(_) => {}
        }
    }
    Ok(Running {
        stop,
        thread: Some(thread),
        local_addr,
        description,
        intervals,
    })
}

/// How long a backend may take to start (NVRTC compile, allocations, kernel launch).
const BACKEND_START_TIMEOUT: Duration = Duration::from_secs(60);

thread_local! {
    /// Set on a spawned forwarding thread: told when the loop is about to run.
    static READY: std::cell::RefCell<Option<std::sync::mpsc::Sender<()>>> =
        const { std::cell::RefCell::new(None) };
    /// Set on a spawned forwarding thread: where its live interval reports go.
    static INTERVALS: std::cell::RefCell<Option<mpsc::Sender<Interval>>> =
        const { std::cell::RefCell::new(None) };
}

/// Runs the loop on the calling thread until `stop` or the configured duration.
pub fn serve_on_this_thread<T: Transport>(
    transport: T,
    registry: Registry,
    config: &RunConfig,
    stop: &AtomicBool,
) -> Result<Stats> {
    serve_with_nic(transport, registry, config, stop, None)
}

/// [`serve_on_this_thread`]; with `nic` (the soft NIC's send queue, from
/// [`crate::softnic::SoftNicTransport::device_posting`]) the `gpu-persistent` kernel sends
/// every response through it itself.
pub fn serve_with_nic<T: Transport>(
    transport: T,
    registry: Registry,
    config: &RunConfig,
    stop: &AtomicBool,
    nic: Option<&DevicePosting>,
) -> Result<Stats> {
    if nic.is_some() && config.topology != Topology::GpuPersistent {
        return Err(Error::InvalidSetting {
            key: "topology",
            detail: format!(
                "{}: only gpu-persistent rings the NIC from the device",
                config.topology
            ),
        });
    }
    let fc = config.forward_config();
    // Decoder models the GPU topologies upload once, at start.
    let decoders = if config.topology.needs_gpu() {
        gpu::decoder::registry_decoders(&registry)
    } else {
        Vec::new()
    };
    if config.routed() {
        if nic.is_some() {
            return Err(Error::InvalidSetting {
                key: "gpus",
                detail: "GPU-rung doorbells (softnic with a regular or blueflame doorbell) serve \
                         one GPU; use --doorbell cpu-assisted, or one GPU"
                    .to_string(),
            });
        }
        return serve_routed(transport, registry, config, stop, &decoders);
    }
    match config.topology {
        Topology::Cpu => {
            let backend = CpuBackend::new(fc.batch, fc.max_request_bytes);
            run_loop(transport, backend, registry, config, stop, None).map(|(s, _)| s)
        }
        Topology::GpuLaunch => {
            let backend = gpu::launch_backend_with(&config.gpu_options(), &decoders)?;
            run_loop(transport, backend, registry, config, stop, None).map(|(s, _)| s)
        }
        Topology::GpuGraph => {
            let backend = gpu::graph_backend_with(&config.gpu_options(), &decoders)?;
            run_loop(transport, backend, registry, config, stop, None).map(|(s, _)| s)
        }
        Topology::GpuPersistent => {
            let backend = match nic {
                Some(nic) => {
                    let o = gpu::options_for_decoders(&config.gpu_options(), &decoders);
                    crate::mailbox::MailboxBackend::new(gpu::PersistentKernel::start_with(
                        &o,
                        Some(nic),
                        &decoders,
                        gpu::decoder::ScratchPlacement::Auto,
                    )?)
                }
                None => gpu::persistent_backend_with(&config.gpu_options(), &decoders)?,
            };
            let (stats, mut backend) = run_loop(transport, backend, registry, config, stop, None)?;
            // Stop the kernel with its sentinel and wait for it, so a kernel that does
            // not stop is reported rather than left spinning.
            backend.shutdown(KERNEL_STOP_TIMEOUT)?;
            if let Some(c) = backend.device().nic_counters() {
                tracing::info!(
                    "GPU posting: {}",
                    c.pairs()
                        .iter()
                        .map(|(k, v)| format!("{k} {v}"))
                        .collect::<Vec<_>>()
                        .join(", ")
                );
            }
            Ok(stats)
        }
    }
}

/// Several GPUs: one backend per entry of `config.gpus` (each its own kernel, mailbox
/// rings and decoder models on that device), requests routed by function.
fn serve_routed<T: Transport>(
    transport: T,
    registry: Registry,
    config: &RunConfig,
    stop: &AtomicBool,
    decoders: &[Arc<crate::decode::Decoder>],
) -> Result<Stats> {
    let map = RouteMap::new(&registry, &config.gpus, &config.route)?;
    let fc = config.forward_config();
    match config.topology {
        Topology::Cpu => {
            let shards = map
                .gpus()
                .iter()
                .map(|_| CpuBackend::new(fc.batch, fc.max_request_bytes))
                .collect();
            run_routed(
                transport,
                RouteBackend::new(shards, map)?,
                registry,
                config,
                stop,
            )
            .map(|(s, _)| s)
        }
        Topology::GpuLaunch | Topology::GpuGraph => {
            let shards = map
                .gpus()
                .iter()
                .map(|&g| {
                    let o = config.gpu_options_for(g);
                    if config.topology == Topology::GpuLaunch {
                        gpu::launch_backend_with(&o, decoders)
                    } else {
                        gpu::graph_backend_with(&o, decoders)
                    }
                })
                .collect::<Result<Vec<_>>>()?;
            run_routed(
                transport,
                RouteBackend::new(shards, map)?,
                registry,
                config,
                stop,
            )
            .map(|(s, _)| s)
        }
        Topology::GpuPersistent => {
            // A shard that fails to start drops (and so stops) the ones started before it.
            let shards = map
                .gpus()
                .iter()
                .map(|&g| gpu::persistent_backend_with(&config.gpu_options_for(g), decoders))
                .collect::<Result<Vec<_>>>()?;
            let (stats, mut backend) = run_routed(
                transport,
                RouteBackend::new(shards, map)?,
                registry,
                config,
                stop,
            )?;
            // Stop every kernel, then report the first that did not stop.
            let mut first_err = None;
            for shard in backend.shards_mut() {
                if let Err(e) = shard.shutdown(KERNEL_STOP_TIMEOUT) {
                    first_err.get_or_insert(e);
                }
            }
            match first_err {
                Some(e) => Err(e),
                None => Ok(stats),
            }
        }
    }
}

/// [`run_loop`] over a [`RouteBackend`], with its per-GPU counters in the status lines and
/// the final stats.
fn run_routed<T: Transport, B: Backend>(
    transport: T,
    backend: RouteBackend<B>,
    registry: Registry,
    config: &RunConfig,
    stop: &AtomicBool,
) -> Result<(Stats, RouteBackend<B>)> {
    let counters = backend.counters();
    let (mut stats, backend) =
        run_loop(transport, backend, registry, config, stop, Some(&counters))?;
    stats.shards = counters.snapshot();
    Ok((stats, backend))
}

/// How long a persistent kernel may take to see its stop sentinel.
const KERNEL_STOP_TIMEOUT: Duration = Duration::from_secs(2);

fn run_loop<T: Transport, B: Backend>(
    transport: T,
    backend: B,
    registry: Registry,
    config: &RunConfig,
    stop: &AtomicBool,
    shards: Option<&RouteCounters>,
) -> Result<(Stats, B)> {
    let mut fwd = Forwarder::new(transport, backend, registry, config.forward_config());
    READY.with(|r| {
        if let Some(tx) = r.borrow_mut().take() {
            let _ = tx.send(());
        }
    });
    let deadline = config.duration().map(|d| Instant::now() + d);
    let stats = fwd.run(
        StopWhen {
            flag: stop,
            deadline,
        },
        config.stats_interval(),
        |stats, elapsed| {
            if let Some(c) = shards {
                c.snapshot_into(&mut stats.shards);
            }
            let report = stats.interval(elapsed);
            // To the caller of `spawn` when there is one (it prints or serializes it).
            let unsent = INTERVALS.with(|tx| match &*tx.borrow() {
                Some(tx) => tx.send(report).err().map(|e| e.0),
                None => Some(report),
            });
            if let Some(report) = unsent {
                tracing::info!("{report}");
            }
        },
    )?;
    Ok((stats, fwd.into_backend()))
}

/// For GPU topologies: the GPU, described, or a clear error when there is none.
fn gpu_for(config: &RunConfig) -> Result<Option<gpu::GpuInfo>> {
    Ok(gpus_for(config)?.into_iter().next())
}

/// For GPU topologies: every GPU served (`gpus`, or `gpu_device`), described, or a clear
/// error naming how many this host has. Empty for the cpu topology.
fn gpus_for(config: &RunConfig) -> Result<Vec<gpu::GpuInfo>> {
    if !config.topology.needs_gpu() {
        return Ok(Vec::new());
    }
    let wanted = config.gpu_list();
    match gpu::probe()? {
        Some(found) => {
            let missing = wanted.iter().any(|w| !found.iter().any(|g| g.index == *w));
            if missing && config.routed() {
                return Err(Error::NotEnoughGpus {
                    asked: wanted
                        .iter()
                        .map(|g| g.to_string())
                        .collect::<Vec<_>>()
                        .join(","),
                    found: found.len(),
                    which: format!(
                        " (indices {})",
                        found
                            .iter()
                            .map(|g| g.index.to_string())
                            .collect::<Vec<_>>()
                            .join(",")
                    ),
                });
            }
            wanted
                .iter()
                .map(|w| {
                    found
                        .iter()
                        .find(|g| g.index == *w)
                        .cloned()
                        .ok_or_else(|| Error::GpuUnavailable {
                            detail: format!("no GPU with index {w}"),
                        })
                })
                .collect()
        }
        None if config.routed() => Err(Error::NotEnoughGpus {
            asked: config
                .gpus
                .iter()
                .map(|g| g.to_string())
                .collect::<Vec<_>>()
                .join(","),
            found: 0,
            which: format!(
                " ({}); use --topology cpu",
                gpu::unavailable_reason().unwrap_or_else(|| "none found".into())
            ),
        }),
        None => Err(Error::GpuUnavailable {
            detail: format!(
                "topology {} needs a GPU ({}); use --topology cpu",
                config.topology,
                gpu::unavailable_reason().unwrap_or_else(|| "none found".into())
            ),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pinning_to_a_missing_core_is_a_clear_error() {
        let cfg = RunConfig {
            cores: vec![1000],
            ..RunConfig::default()
        };
        let (_c, server) = crate::transport::inproc::channel(4, 64).unwrap();
        let e = spawn_inproc(&cfg, server)
            .err()
            .expect("no such core")
            .to_string();
        assert!(e.contains("core 1000"), "{e}");
    }
}
