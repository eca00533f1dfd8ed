//! Starting a forwarder: pick the transport and backend a [`RunConfig`] names, pin a
//! thread, run the loop, hand back the counters. Used by `qfwd run` and by the
//! latency harness (which runs forwarders in-process).
#![forbid(unsafe_code)]

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Instant;

use crate::backend::{Backend, CpuBackend, Topology};
use crate::config::RunConfig;
use crate::forward::{Forwarder, StopWhen};
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
        let list: Vec<String> = transport.allowlist().iter().map(|a| a.to_string()).collect();
        format!("allowing only {}", list.join(", "))
    };
    let description = format!("udp {local}; {allow}");
    spawn(transport, config, Some(local), description)
}

/// Starts the loop on its own thread, serving the forwarder end of an in-process
/// channel.
pub fn spawn_inproc(config: &RunConfig, server: InprocServer) -> Result<Running> {
    config.validate()?;
    spawn(server, config, None, "inproc ring".to_string())
}

fn spawn<T>(transport: T, config: &RunConfig, local_addr: Option<SocketAddr>, where_: String) -> Result<Running>
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
    let description = format!(
        "serving {} on {}; topology {}; {}",
        handlers.join(", "),
        where_,
        config.topology,
        match core {
            Some(c) => format!("pinned to core {c}"),
            None => "not pinned".to_string(),
        }
    );
    if let Some(c) = core {
        let available = core_affinity::get_core_ids().unwrap_or_default();
        if !available.iter().any(|id| id.id == c) {
            return Err(Error::Pin {
                core: c,
                detail: format!(
                    "this process may use cores {:?}",
                    available.iter().map(|i| i.id).collect::<Vec<_>>()
                ),
            });
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
            run_loop(transport, backend, registry, config, stop)
        }
        other => Err(Error::InvalidSetting {
            key: "topology",
            detail: format!("{other} is not available in this build yet"),
        }),
    }
}

fn run_loop<T: Transport, B: Backend>(
    transport: T,
    backend: B,
    registry: Registry,
    config: &RunConfig,
    stop: &AtomicBool,
) -> Result<Stats> {
    let mut fwd = Forwarder::new(transport, backend, registry, config.forward_config());
    let deadline = config.duration().map(|d| Instant::now() + d);
    fwd.run(
        StopWhen {
            flag: stop,
            deadline,
        },
        config.stats_interval(),
        |stats, elapsed| eprintln!("{}", stats.status_line(elapsed)),
    )
}
