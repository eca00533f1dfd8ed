//! Starting a forwarder: pick the transport and backend a [`RunConfig`] names, pin a
//! thread, run the loop, hand back the counters. Used by `qfwd run` and by the
//! latency harness (which runs forwarders in-process).
#![forbid(unsafe_code)]

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::backend::{Backend, CpuBackend, Topology};
use crate::config::RunConfig;
use crate::forward::{Forwarder, StopWhen};
use crate::gpu;
use crate::handler::Registry;
use crate::stats::Stats;
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
    let allow = if transport.allowlist().is_empty() {
        "no allowlist: accepting requests from every peer".to_string()
    } else {
        let list: Vec<String> = transport
            .allowlist()
            .iter()
            .map(|a| a.to_string())
            .collect();
        format!("allowing only {}", list.join(", "))
    };
    let description = format!("udp {local}; {allow}");
    spawn(transport, config, Some(local), description)
}

/// Starts a soft NIC whose wire is a UDP socket, and the loop behind it.
pub fn spawn_softnic_udp(config: &RunConfig) -> Result<Running> {
    config.validate()?;
    let (local, transport) =
        crate::softnic::udp(&config.softnic_config(), config.listen, config.allowlist()?)?;
    let description = format!("soft NIC ({} doorbell) on udp {local}", config.doorbell);
    spawn(transport, config, Some(local), description)
}

/// Starts the loop behind a soft NIC whose wire is an in-process ring; returns the
/// emulator's end of the ring too.
pub fn spawn_softnic_inproc(config: &RunConfig) -> Result<(crate::transport::inproc::InprocClient, Running)> {
    config.validate()?;
    let (client, transport) = crate::softnic::inproc(&config.softnic_config())?;
    let description = format!("soft NIC ({} doorbell) on an inproc ring", config.doorbell);
    Ok((client, spawn(transport, config, None, description)?))
}

/// Starts the loop on its own thread, serving the forwarder end of an in-process
/// channel.
pub fn spawn_inproc(config: &RunConfig, server: InprocServer) -> Result<Running> {
    config.validate()?;
    spawn(server, config, None, "inproc ring".to_string())
}

fn spawn<T>(
    transport: T,
    config: &RunConfig,
    local_addr: Option<SocketAddr>,
    where_: String,
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
    let topology = match gpu_for(config)? {
        Some(g) if config.topology == Topology::GpuPersistent => format!(
            "{} on {g}, rx_completion {}, {} pollers ({} per slot), {} slots",
            config.topology,
            config.rx_completion,
            config.pollers,
            config.gpu_options().pollers_per_slot,
            config.slots
        ),
        Some(g) => format!("{} on {g}", config.topology),
        None => config.topology.to_string(),
    };
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
        if let Some(online) = online_cores() {
            if !online.contains(&c) {
                return Err(Error::Pin {
                    core: c,
                    detail: format!("this machine has cores {online:?}"),
                });
            }
        }
    }
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    let config = config.clone();
    let thread = std::thread::Builder::new()
        .name("qfwd-forward".to_string())
        .spawn(move || -> Result<Stats> {
            if let Some(c) = core {
                if !core_affinity::set_for_current(core_affinity::CoreId { id: c }) {
                    return Err(Error::Pin {
                        core: c,
                        detail: "sched_setaffinity refused".to_string(),
                    });
                }
            }
            serve_on_this_thread(transport, registry, &config, &flag)
        })
        .map_err(|source| Error::Io {
            what: "spawning the forwarding thread".to_string(),
            source,
        })?;
    Ok(Running {
        stop,
        thread: Some(thread),
        local_addr,
        description,
    })
}

/// Runs the loop on the calling thread until `stop` or the configured duration.
pub fn serve_on_this_thread<T: Transport>(
    transport: T,
    registry: Registry,
    config: &RunConfig,
    stop: &AtomicBool,
) -> Result<Stats> {
    let fc = config.forward_config();
    match config.topology {
        Topology::Cpu => {
            let backend = CpuBackend::new(fc.batch, fc.max_request_bytes);
            run_loop(transport, backend, registry, config, stop).map(|(s, _)| s)
        }
        Topology::GpuLaunch => {
            let backend = gpu::launch_backend(&config.gpu_options())?;
            run_loop(transport, backend, registry, config, stop).map(|(s, _)| s)
        }
        Topology::GpuGraph => {
            let backend = gpu::graph_backend(&config.gpu_options())?;
            run_loop(transport, backend, registry, config, stop).map(|(s, _)| s)
        }
        Topology::GpuPersistent => {
            let backend = gpu::persistent_backend(&config.gpu_options())?;
            let (stats, mut backend) = run_loop(transport, backend, registry, config, stop)?;
            // Stop the kernel with its sentinel and wait for it, so a kernel that does
            // not stop is reported rather than left spinning.
            backend.shutdown(KERNEL_STOP_TIMEOUT)?;
            Ok(stats)
        }
    }
}

/// How long a persistent kernel may take to see its stop sentinel.
const KERNEL_STOP_TIMEOUT: Duration = Duration::from_secs(2);

fn run_loop<T: Transport, B: Backend>(
    transport: T,
    backend: B,
    registry: Registry,
    config: &RunConfig,
    stop: &AtomicBool,
) -> Result<(Stats, B)> {
    let mut fwd = Forwarder::new(transport, backend, registry, config.forward_config());
    let deadline = config.duration().map(|d| Instant::now() + d);
    let stats = fwd.run(
        StopWhen {
            flag: stop,
            deadline,
        },
        config.stats_interval(),
        |stats, elapsed| eprintln!("{}", stats.status_line(elapsed)),
    )?;
    Ok((stats, fwd.into_backend()))
}

/// For GPU topologies: the GPU, described, or a clear error when there is none.
fn gpu_for(config: &RunConfig) -> Result<Option<gpu::GpuInfo>> {
    if !config.topology.needs_gpu() {
        return Ok(None);
    }
    match gpu::probe()? {
        Some(gpus) => gpus
            .into_iter()
            .find(|g| g.index == config.gpu_device)
            .map(Some)
            .ok_or_else(|| Error::GpuUnavailable {
                detail: format!("no GPU with index {}", config.gpu_device),
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

/// Online CPU numbers from `/sys/devices/system/cpu/online` (e.g. `0-3,8`).
fn online_cores() -> Option<Vec<usize>> {
    let text = std::fs::read_to_string("/sys/devices/system/cpu/online").ok()?;
    parse_cpu_list(text.trim())
}

fn parse_cpu_list(list: &str) -> Option<Vec<usize>> {
    let mut cores = Vec::new();
    for part in list.split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => cores.extend(a.parse::<usize>().ok()?..=b.parse::<usize>().ok()?),
            None => cores.push(part.parse().ok()?),
        }
    }
    Some(cores)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists_parse() {
        assert_eq!(parse_cpu_list("0-3,8"), Some(vec![0, 1, 2, 3, 8]));
        assert_eq!(parse_cpu_list("0"), Some(vec![0]));
        assert_eq!(parse_cpu_list("x"), None);
    }

    #[test]
    fn pinning_to_a_missing_core_is_a_clear_error() {
        let cfg = RunConfig {
            cores: vec![100_000],
            ..RunConfig::default()
        };
        let (_c, server) = crate::transport::inproc::channel(4, 64).unwrap();
        let e = spawn_inproc(&cfg, server)
            .err()
            .expect("no such core")
            .to_string();
        assert!(e.contains("core 100000"), "{e}");
    }
}
