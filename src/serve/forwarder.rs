//! The `cpu-forwarded` data path: the forwarding loop on its own (pinned) thread, over the
//! backend the topology names (cpu, gpu-launch, gpu-graph, gpu-persistent, several GPUs
//! routed by function); the thread reports live intervals and returns the final counters.
#![forbid(unsafe_code)]

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::backend::{Backend, CpuBackend, Topology};
use crate::config::RunConfig;
use crate::forward::{Forwarder, StopWhen};
use crate::gpu;
use crate::handler::Registry;
use crate::queues::DevicePosting;
use crate::route::{RouteBackend, RouteCounters, RouteMap};
use crate::stats::{Interval, Stats};
use crate::transport::Transport;
use crate::{Error, Result};

/// A forwarding loop running on its own thread.
pub(super) struct ForwarderThread {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<Result<Stats>>>,
    /// Live interval reports (every `stats_interval_s`), oldest first.
    intervals: mpsc::Receiver<Interval>,
}

impl ForwarderThread {
    pub(super) fn stop_flag(&self) -> Arc<AtomicBool> {
        self.stop.clone()
    }

    /// The interval reports made since the last call.
    pub(super) fn intervals(&self) -> Vec<Interval> {
        self.intervals.try_iter().collect()
    }

    /// Whether the loop has ended (duration elapsed, or an error).
    pub(super) fn is_finished(&self) -> bool {
        self.thread.as_ref().is_none_or(|t| t.is_finished())
    }

    /// Asks it to stop; it drains in-flight requests, then exits.
    pub(super) fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
    }

    /// Waits for it to end and returns its counters.
    pub(super) fn join(mut self) -> Result<Stats> {
        let t = self.thread.take().ok_or(Error::ThreadPanicked)?;
        t.join().map_err(|_| Error::ThreadPanicked)?
    }
}

impl Drop for ForwarderThread {
    fn drop(&mut self) {
        if let Some(t) = self.thread.take() {
            self.stop.store(true, Ordering::Relaxed);
            let _ = t.join();
        }
    }
}

/// The start-up line of a forwarder serving on `where_`: handlers, topology, GPUs, routes
/// and the core it is pinned to.
pub(super) fn describe(config: &RunConfig, where_: &str) -> Result<String> {
    // Names only: loading the decoder's model again would build it, and log it, twice.
    let names = config.function_names()?;
    let handlers: Vec<String> = names
        .iter()
        .map(|n| format!("{n} (function_id {:#010x})", crate::wire::function_id(n)))
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
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        let map = RouteMap::from_names(&names, &config.gpus, &config.route)?;
        topology.push_str(&format!(
            "; {} shard(s), routes {}",
            map.shards(),
            map.describe()
        ));
    }
    Ok(format!(
        "serving {} on {}; topology {}; {}",
        handlers.join(", "),
        where_,
        topology,
        match core {
            Some(c) => format!("pinned to core {c}"),
            None => "not pinned".to_string(),
        }
    ))
}

/// Starts the forwarding loop on its own thread over `transport` (with `nic`, the soft
/// NIC's send queue a `gpu-persistent` kernel rings itself); returns once the backend runs.
pub(super) fn spawn<T>(
    transport: T,
    config: &RunConfig,
    nic: Option<DevicePosting>,
) -> Result<ForwarderThread>
where
    T: Transport + Send + 'static,
    T::Peer: Send,
{
    let registry = config.registry()?;
    let core = config.cores.first().copied();
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
            serve(transport, registry, &config, &flag, nic.as_ref())
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
    Ok(ForwarderThread {
        stop,
        thread: Some(thread),
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

/// Runs the loop on the calling thread until `stop` or the configured duration, over the
/// backend the topology names; with `nic` (the soft NIC's send queue, from
/// [`crate::softnic::SoftNicTransport::device_posting`]) the `gpu-persistent` kernel sends
/// every response through it itself.
fn serve<T: Transport>(
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
pub(super) fn gpu_for(config: &RunConfig) -> Result<Option<gpu::GpuInfo>> {
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
