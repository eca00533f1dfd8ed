//! Running measurements: start the forwarder a point describes, drive it with the
//! emulator, stop it, and record one CSV row and one `.hgrm` spectrum per point.
#![forbid(unsafe_code)]

use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};
use qfwd::backend::Topology;
use qfwd::config::RunConfig;
use qfwd::direct::DataPath;
use qfwd::mailbox::RxCompletion;
use qfwd::serve::{QpuEnd, Wiring};
use qfwd::stats::ShardCounts;
use qfwd::transport::inproc;
use qfwd::transport::udp::UdpClient;
use qfwd::transport::{Client, TransportKind};
use qfwd::wire::HEADER_LEN;

use crate::emulator::{self, LoadSpec, Outcome, Workload};
use crate::provenance::{self, Provenance};
use crate::record::{self, CsvSink, Row};
use crate::scenario::{Launch, Point, Scenario};
use crate::{report, spread};
use crate::{Error, Result};

/// What the forwarder itself counted (in-process: its stats; child: its summary lines).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ForwarderCounts {
    pub received: u64,
    pub answered_ok: u64,
    pub answered_error: u64,
    pub dropped: u64,
    /// Its service time (submission to the backend to response handed back), p50 and p99 in ns, over
    /// every request it served (the warm-up too); `None` when it served none or did not say.
    pub service_ns: Option<(u64, u64)>,
    /// Stalls of its loop and requests in service across one (`qfwd::forward` docs);
    /// `None` when it did not say (an older `qfwd`).
    pub stalls: Option<(u64, u64)>,
}

/// One measured point.
pub struct Measured {
    pub row: Row,
    pub outcome: Outcome,
    pub forwarder: Option<ForwarderCounts>,
    /// Per-GPU counters of a routed forwarder (`gpus`); empty otherwise or when unknown.
    pub shards: Vec<ShardCounts>,
}

/// Name a replayed decoder answers to (function_id = FNV-1a of it).
pub const DECODER_NAME: &str = "decode";

/// Distinct payloads cycled through per point.
const WORKLOAD_POOL: usize = 1024;

/// The forwarder's handler list for a point: the handler under each of `functions`
/// (`parity:patch0`, ...), or the handler alone.
fn handler_specs(point: &Point) -> Vec<String> {
    if point.decoder == "-" && !point.functions.is_empty() {
        point
            .functions
            .iter()
            .map(|f| format!("{}:{f}", point.handler))
            .collect()
    } else {
        vec![point.handler.clone()]
    }
}

/// The forwarder settings a point asks for.
pub fn run_config(point: &Point) -> RunConfig {
    let defaults = RunConfig::default();
    RunConfig {
        transport: point.transport,
        listen: point.listen,
        // The harness owns both ends: on a lab host's address, the emulator is the peer.
        allow_any: !point.listen.ip().to_canonical().is_loopback(),
        handlers: handler_specs(point),
        topology: point.topology,
        cores: point.cores.clone(),
        duration_s: None,
        stats_interval_s: 0.0,
        max_request_bytes: (point.payload_bytes as usize).max(4096),
        batch: point.batch,
        max_in_flight: point.max_in_flight,
        watchdog_us: point.watchdog_us,
        queue_deadline_us: point.queue_deadline_us,
        idle: point.idle,
        gpu_device: point.gpu_device,
        rx_completion: point.rx_completion.parse().unwrap_or(RxCompletion::Inline),
        pollers: if point.pollers == 0 {
            defaults.pollers
        } else {
            point.pollers
        },
        pollers_per_slot: point.pollers_per_slot,
        uf_table_max_defects: point.uf_table_max_defects,
        uf_split_max_defects: point.uf_split_max_defects,
        slots: if point.slots == 0 {
            defaults.slots
        } else {
            point.slots
        },
        doorbell: point.doorbell.parse().unwrap_or(defaults.doorbell),
        decoder: (point.decoder != "-").then(|| point.decoder.clone()),
        dem: point.dem.clone(),
        decoder_name: DECODER_NAME.to_string(),
        decoder_names: if point.decoder == "-" {
            Vec::new()
        } else {
            point.functions.clone()
        },
        // Checked when the scenario was parsed.
        gpus: point.gpu_list().unwrap_or_default(),
        route: point.route_map().unwrap_or_default(),
        data_path: point.data_path,
        links: point.links,
        ..defaults
    }
}

fn load_spec(point: &Point) -> LoadSpec {
    LoadSpec {
        mode: point.mode,
        rate_hz: point.rate_hz,
        warmup: point.warmup,
        samples: point.timed_samples(),
        timeout: Duration::from_millis(point.timeout_ms),
        yield_when_idle: point.emulator_idle == qfwd::forward::IdlePolicy::Yield,
        hostile_percent: point.hostile_percent,
    }
}

/// Runs the emulator on a thread of its own, pinned to `core`: the caller's CPU mask stays
/// as it was, so threads the next forwarder starts (the soft NIC's) never inherit the
/// emulator's core.
fn run_emulator<C: Client + Send>(
    core: Option<usize>,
    client: &mut C,
    workload: &Workload,
    load: &LoadSpec,
    progress: &mut (impl FnMut(u64) + Send),
) -> Result<Outcome> {
    std::thread::scope(|scope| {
        scope
            .spawn(move || {
                if let Some(c) = core {
                    if !core_affinity::set_for_current(core_affinity::CoreId { id: c }) {
                        return Err(Error::Emulator {
                            target: "local".into(),
                            detail: format!("cannot pin the emulator to core {c}"),
                        });
                    }
                }
                emulator::run(client, workload, load, progress)
            })
            .join()
            .map_err(|_| Error::Emulator {
                target: "local".into(),
                detail: "the emulator thread panicked".into(),
            })?
    })
}

/// Drives `clients` (the QPU ends of an in-process service: one, or one per `gpu-direct`
/// link, each of which is also that link's NIC), one emulator thread each (on
/// `emulator_core` + i when pinned), the rate and the samples split evenly; their outcomes
/// merged.
fn run_links<C: Client + Send>(
    point: &Point,
    clients: Vec<C>,
    workload: &Workload,
    load: &LoadSpec,
    progress: &mut (impl FnMut(u64) + Send),
) -> Result<Outcome> {
    let links = clients.len() as u32;
    let share =
        |n: u64, i: u32| n / u64::from(links) + u64::from(u64::from(i) < n % u64::from(links));
    let outcomes: Vec<Result<Outcome>> = std::thread::scope(|scope| {
        let mut handles = Vec::new();
        // Link 0's thread reports progress for all (the links send at the same pace).
        let mut first = Some(progress);
        for (i, mut client) in clients.into_iter().enumerate() {
            let i = i as u32;
            let load = LoadSpec {
                rate_hz: share(load.rate_hz, i),
                warmup: share(load.warmup, i),
                samples: share(load.samples, i).max(1),
                ..load.clone()
            };
            let core = point.emulator_core.map(|c| c + i as usize);
            let report = first.take();
            handles.push(scope.spawn(move || {
                if let Some(c) = core {
                    if !core_affinity::set_for_current(core_affinity::CoreId { id: c }) {
                        return Err(Error::Emulator {
                            target: client.describe(),
                            detail: format!("cannot pin link {i}'s emulator to core {c}"),
                        });
                    }
                }
                match report {
                    Some(p) => {
                        emulator::run(&mut client, workload, &load, |n| p(n * u64::from(links)))
                    }
                    None => emulator::run(&mut client, workload, &load, |_| {}),
                }
            }));
        }
        handles
            .into_iter()
            .map(|h| {
                h.join().unwrap_or_else(|_| {
                    Err(Error::Emulator {
                        target: "local".into(),
                        detail: "an emulator thread panicked".into(),
                    })
                })
            })
            .collect()
    });
    let mut merged: Option<Outcome> = None;
    for o in outcomes {
        let o = o?;
        match merged.as_mut() {
            None => merged = Some(o),
            Some(m) => m.merge(o),
        }
    }
    merged.ok_or_else(|| Error::Emulator {
        target: "local".into(),
        detail: "the service handed back no QPU end".into(),
    })
}

/// The `gpu-direct` device side's own counters, for the log.
fn log_direct(report: &qfwd::direct::DirectReport) {
    let sum = |k: u32| report.per_link.iter().map(|c| c.get(k)).sum::<u64>();
    let per = |a: u32, b: u32| sum(a).checked_div(sum(b)).unwrap_or(0);
    tracing::info!(
        "  gpu-direct device: torn reads {}, lost claims {}, send failures {}, undrained {}, \
         heartbeat stalls {}; cycles per answer {} (staged {}, served {}), per poster fence {} \
         ({} fences), per credit fence {} ({})",
        sum(qfwd::abi::CTR_TORN),
        sum(qfwd::abi::CTR_LOST_CLAIMS),
        sum(qfwd::abi::CTR_SEND_FAILED),
        report.undrained,
        report.stalls,
        per(qfwd::abi::CTR_ANSWER_CYCLES, qfwd::abi::CTR_ANSWERS),
        per(qfwd::abi::CTR_STAGE_CYCLES, qfwd::abi::CTR_ANSWERS),
        per(qfwd::abi::CTR_SERVE_CYCLES, qfwd::abi::CTR_ANSWERS),
        per(qfwd::abi::CTR_FENCE_CYCLES, qfwd::abi::CTR_FENCES),
        sum(qfwd::abi::CTR_FENCES),
        per(qfwd::abi::CTR_CREDIT_CYCLES, qfwd::abi::CTR_CREDIT_FENCES),
        sum(qfwd::abi::CTR_CREDIT_FENCES),
    );
}

/// An in-process point: the service `config` assembles ([`qfwd::serve::start`]), driven
/// through the QPU ends it hands back (or its UDP socket), then stopped.
fn measure_in_process(
    point: &Point,
    config: &qfwd::config::RunConfig,
    workload: &Workload,
    load: &LoadSpec,
    progress: &mut (impl FnMut(u64) + Send),
) -> Result<(Outcome, qfwd::serve::Report)> {
    let mut ring = None;
    let wiring =
        if point.transport == TransportKind::Inproc && point.data_path == DataPath::CpuForwarded {
            // Sized for the point's payloads, so the ring stays small.
            let slot = HEADER_LEN + (point.payload_bytes as usize).max(64) + 64;
            let (client, server) = inproc::channel(4096, slot)?;
            ring = Some(QpuEnd::Ring(client));
            Wiring::Ring(server)
        } else {
            Wiring::InProcess
        };
    let mut running = qfwd::serve::start(config, wiring)?;
    let mut ends = running.take_qpu_ends();
    ends.extend(ring);
    let outcome = if ends.is_empty() {
        // udp: the QPU side is a socket.
        let addr = running.local_addr().ok_or_else(|| Error::Emulator {
            target: "local".into(),
            detail: format!("{}: no QPU end and no address", running.description()),
        })?;
        run_links(
            point,
            vec![UdpClient::connect(addr)?],
            workload,
            load,
            progress,
        )
    } else {
        run_links(point, ends, workload, load, progress)
    };
    running.stop();
    let report = running.join()?;
    if let Some(direct) = &report.direct {
        log_direct(direct);
    }
    Ok((outcome?, report))
}

/// Measures one point. `progress` gets the number of requests sent so far.
pub fn measure(
    point: &Point,
    scenario: &str,
    run_id: &str,
    prov: &Provenance,
    mut progress: impl FnMut(u64) + Send,
) -> Result<Measured> {
    let workload = point_workload(point)?;
    let load = load_spec(point);
    let config = run_config(point);
    let (outcome, forwarder, shards) = drive(point, &config, &workload, &load, &mut progress)?;
    let ids = (scenario, run_id);
    let mut row = point_row(
        point,
        &config,
        &workload,
        ids,
        prov,
        (&outcome, forwarder, &shards),
    );
    row.set_latencies(&outcome.histogram);
    Ok(Measured {
        row,
        outcome,
        forwarder,
        shards,
    })
}

/// The requests a point sends: parity payloads, or shots replayed from its `.dem`.
fn point_workload(point: &Point) -> Result<Workload> {
    let spread = point.functions.len().max(1);
    Ok(match (&point.decoder[..], &point.dem, &point.dets) {
        ("-", _, _) => Workload::parity(
            &point.handler,
            point.payload_bytes as usize,
            // A multiple of the function count: requests go round-robin over them.
            WORKLOAD_POOL.next_multiple_of(spread),
            0x5eed ^ point.payload_bytes as u64,
        ),
        (decoder, Some(dem), Some(dets)) => {
            crate::replay::workload_from_dem(dem, dets, decoder, DECODER_NAME, None)?
        }
        _ => {
            return Err(Error::Emulator {
                target: "local".into(),
                detail: "a decoder point needs dem and dets".into(),
            })
        }
    }
    .spread_over(&point.functions))
}

/// Runs the point's load where its launch says (in process, against an external
/// forwarder, or against a child `qfwd`): the emulator's outcome, the forwarder's counters
/// (where it reports them) and its per-GPU shards.
fn drive(
    point: &Point,
    config: &RunConfig,
    workload: &Workload,
    load: &LoadSpec,
    progress: &mut (impl FnMut(u64) + Send),
) -> Result<(Outcome, Option<ForwarderCounts>, Vec<ShardCounts>)> {
    let mut shards = Vec::new();
    let (outcome, forwarder) = match (point.launch, point.transport) {
        (_, TransportKind::Rdma) => {
            return Err(Error::Emulator {
                target: "rdma".into(),
                detail: "the harness does not drive RDMA; see the README's lab procedure".into(),
            })
        }
        (Launch::InProcess, _) => {
            let (outcome, report) = measure_in_process(point, config, workload, load, progress)?;
            shards = report.stats.shards.clone();
            (outcome, Some(counts(&report.stats)))
        }
        (Launch::External, _) => {
            let target = point.target.ok_or_else(|| Error::Emulator {
                target: "?".into(),
                detail: "launch = external needs a target address".into(),
            })?;
            let mut client = UdpClient::connect(target)?;
            (
                run_emulator(point.emulator_core, &mut client, workload, load, progress)?,
                None,
            )
        }
        (Launch::Child, _) => {
            let child = ChildForwarder::start(point)?;
            let mut client = UdpClient::connect(child.addr)?;
            let outcome = run_emulator(point.emulator_core, &mut client, workload, load, progress);
            let (summary, per_gpu) = child.stop()?;
            shards = per_gpu;
            (outcome?, summary)
        }
    };
    Ok((outcome, forwarder, shards))
}

/// The CSV row of a measured point (latencies are set from the histogram after).
fn point_row(
    point: &Point,
    config: &RunConfig,
    workload: &Workload,
    (scenario, run_id): (&str, &str),
    prov: &Provenance,
    (outcome, forwarder, shards): (&Outcome, Option<ForwarderCounts>, &[ShardCounts]),
) -> Row {
    // A persistent kernel polls (either data path); the mailbox's rx_completion is the
    // forwarded path's.
    let kernel = point.topology == Topology::GpuPersistent;
    let persistent = kernel && point.data_path == DataPath::CpuForwarded;
    Row {
        run_id: run_id.to_string(),
        scenario: scenario.to_string(),
        topology: point.topology.to_string(),
        transport: point.transport.to_string(),
        rx_completion: if persistent {
            config.rx_completion.to_string()
        } else {
            "-".into()
        },
        doorbell: point.doorbell.clone(),
        pollers: if kernel { config.pollers } else { 0 },
        pollers_per_slot: if kernel {
            config.pollers_per_slot_or_default()
        } else {
            0
        },
        decoder: decoder_label(point),
        payload_bytes: workload.arg_len() as u32,
        mode: point.mode.to_string(),
        offered_rate_hz: point.rate_hz,
        achieved_rate_hz: outcome.achieved_rate_hz(),
        warmup: point.warmup,
        samples: 0,
        errors: outcome.errors(),
        dropped: outcome.lost,
        timeouts: outcome.late,
        emulator_stalls: Some(outcome.stalls),
        stalled_samples: Some(outcome.stalled_samples),
        forwarder_p50_ns: forwarder.and_then(|f| f.service_ns).map(|s| s.0),
        forwarder_p99_ns: forwarder.and_then(|f| f.service_ns).map(|s| s.1),
        forwarder_stalls: forwarder.and_then(|f| f.stalls).map(|s| s.0),
        forwarder_stalled_requests: forwarder.and_then(|f| f.stalls).map(|s| s.1),
        rtt_or_oneway: "rtt".into(),
        clock: "CLOCK_MONOTONIC".into(),
        cpu: prov.cpu.clone(),
        gpu: if point.topology.needs_gpu() {
            // Routed: the first GPU (`gpus` lists them all).
            qfwd::gpu::describe(config.gpu_list()[0])
                .map(|g| g.csv_label())
                .unwrap_or_else(|_| prov.gpu.clone())
        } else {
            "none".into()
        },
        nic: match point.transport {
            TransportKind::Udp if point.target.unwrap_or(point.listen).ip().is_loopback() => {
                "loopback".into()
            }
            TransportKind::Udp => "kernel-udp".into(),
            TransportKind::Inproc => "none".into(),
            TransportKind::Softnic => "softnic".into(),
            TransportKind::Rdma => "rdma".into(),
        },
        pcie_path: "none".into(),
        host: prov.host.clone(),
        git_rev: prov.git_rev.clone(),
        timestamp_utc: provenance::timestamp_utc(),
        gpus: if config.routed() {
            list(&config.gpus)
        } else {
            "-".into()
        },
        functions: point.functions.len().max(1) as u32,
        per_gpu_completed: if shards.is_empty() {
            "-".into()
        } else {
            shards
                .iter()
                .map(|s| format!("{}:{}", s.gpu, s.completed))
                .collect::<Vec<_>>()
                .join(";")
        },
        data_path: point.data_path.to_string(),
        links: Some(point.links),
        ..Row::default()
    }
}

fn list(v: &[usize]) -> String {
    v.iter()
        .map(|g| g.to_string())
        .collect::<Vec<_>>()
        .join(",")
}

fn counts(s: &qfwd::stats::Stats) -> ForwarderCounts {
    let h = &s.service_ns;
    ForwarderCounts {
        received: s.received,
        answered_ok: s.answered_ok,
        answered_error: s.answered_error_total(),
        dropped: s.dropped_total(),
        service_ns: (!h.is_empty()).then(|| (h.value_at_quantile(0.5), h.value_at_quantile(0.99))),
        stalls: Some((s.stalls, s.stalled_requests)),
    }
}

/// `qfwd run` as a child process on loopback.
struct ChildForwarder {
    child: Child,
    addr: SocketAddr,
    lines: mpsc::Receiver<String>,
    command: String,
}

/// Where the `qfwd` binary is: the point's `command`, else beside this program, else PATH.
fn qfwd_binary(point: &Point) -> PathBuf {
    if let Some(c) = &point.command {
        return c.clone();
    }
    if let Ok(exe) = std::env::current_exe() {
        if let Some(dir) = exe.parent() {
            for candidate in [dir.join("qfwd"), dir.join("../qfwd")] {
                if candidate.is_file() {
                    return candidate;
                }
            }
        }
    }
    PathBuf::from("qfwd")
}

impl ChildForwarder {
    fn start(point: &Point) -> Result<ChildForwarder> {
        let addr = if point.listen.port() == 0 {
            // Ask the kernel for a free port, then hand it to the child.
            let probe = UdpSocket::bind(point.listen).map_err(|source| Error::Io {
                path: PathBuf::from(point.listen.to_string()),
                source,
            })?;
            probe.local_addr().map_err(|source| Error::Io {
                path: PathBuf::from(point.listen.to_string()),
                source,
            })?
        } else {
            point.listen
        };
        let bin = qfwd_binary(point);
        let mut cmd = Command::new(&bin);
        cmd.args(["run", "--transport", "udp", "--stats-interval", "0"])
            .arg("--listen")
            .arg(addr.to_string())
            .arg("--topology")
            .arg(point.topology.to_string())
            .args(
                handler_specs(point)
                    .iter()
                    .flat_map(|h| ["--handler", h.as_str()]),
            )
            .arg("--idle")
            .arg(match point.idle {
                qfwd::forward::IdlePolicy::Spin => "spin",
                qfwd::forward::IdlePolicy::Yield => "yield",
            })
            .arg("--batch")
            .arg(point.batch.to_string())
            .arg("--max-in-flight")
            .arg(point.max_in_flight.to_string())
            .arg("--watchdog-us")
            .arg(point.watchdog_us.to_string())
            .arg("--queue-deadline-us")
            .arg(point.queue_deadline_us.to_string())
            .arg("--max-request-bytes")
            .arg((point.payload_bytes as usize).max(4096).to_string());
        if let (d, Some(dem)) = (&point.decoder, &point.dem) {
            if d != "-" {
                cmd.args(["--decoder", d]).arg("--dem").arg(dem);
                if point.functions.is_empty() {
                    cmd.args(["--name", DECODER_NAME]);
                }
                for f in &point.functions {
                    cmd.args(["--name", f]);
                }
            }
        }
        let gpus = point.gpu_list().unwrap_or_default();
        if !gpus.is_empty() {
            cmd.arg("--gpus").arg(list(&gpus));
            for r in &point.route {
                cmd.arg("--route").arg(r);
            }
        } else if point.topology.needs_gpu() {
            cmd.arg("--gpu").arg(point.gpu_device.to_string());
        }
        if !point.cores.is_empty() {
            let list: Vec<String> = point.cores.iter().map(|c| c.to_string()).collect();
            cmd.arg("--cores").arg(list.join(","));
        }
        if run_config(point).allow_any {
            cmd.arg("--allow-any");
        }
        // The child ends with this process, even if it is killed (SIGKILL leaves no chance
        // to stop it): an orphan forwarder would spin and hold the port.
        cmd.arg("--exit-with-parent")
            .arg(std::process::id().to_string());
        let command = format!("{cmd:?}");
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| Error::Child {
                command: command.clone(),
                detail: format!("cannot start {}: {e} (build it with `cargo build --release`, or set command = \"...\" in [forwarder])", bin.display()),
            })?;
        let stderr = child.stderr.take().expect("stderr was piped");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(|l| l.ok()) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut me = ChildForwarder {
            child,
            addr,
            lines,
            command,
        };
        let deadline = Instant::now() + Duration::from_secs(15);
        let mut seen = Vec::new();
        loop {
            match me.lines.recv_timeout(Duration::from_millis(50)) {
                Ok(line) => {
                    let ready = line.starts_with("qfwd: serving");
                    seen.push(line);
                    if ready {
                        return Ok(me);
                    }
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    let _ = me.child.wait();
                    return Err(Error::Child {
                        command: me.command.clone(),
                        detail: format!("exited before serving: {}", seen.join(" | ")),
                    });
                }
            }
            if Instant::now() > deadline {
                let _ = me.child.kill();
                let _ = me.child.wait();
                return Err(Error::Child {
                    command: me.command.clone(),
                    detail: format!("not serving after 15 s: {}", seen.join(" | ")),
                });
            }
        }
    }

    /// SIGTERM, wait for the summary (5 s), then parse its counters (and per-GPU ones).
    fn stop(mut self) -> Result<(Option<ForwarderCounts>, Vec<ShardCounts>)> {
        let pid = self.child.id().to_string();
        let _ = Command::new("kill").args(["-TERM", &pid]).status();
        let deadline = Instant::now() + Duration::from_secs(5);
        let mut status = None;
        while Instant::now() < deadline {
            if let Ok(Some(s)) = self.child.try_wait() {
                status = Some(s);
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        if status.is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
            return Err(Error::Child {
                command: std::mem::take(&mut self.command),
                detail: "did not exit within 5 s of SIGTERM; killed".into(),
            });
        }
        let mut summary: Option<ForwarderCounts> = None;
        let mut service = None;
        let mut stalls = None;
        let mut shards = Vec::new();
        while let Ok(line) = self.lines.recv_timeout(Duration::from_millis(500)) {
            if let Some(c) = parse_summary(&line) {
                summary = Some(c);
            }
            if let Some(s) = parse_service_line(&line) {
                service = Some(s);
            }
            if let Some(s) = parse_stalls_line(&line) {
                stalls = Some(s);
            }
            if let Some(s) = parse_shard_line(&line) {
                shards.push(s);
            }
        }
        if let Some(c) = summary.as_mut() {
            c.service_ns = service;
            c.stalls = stalls;
        }
        Ok((summary, shards))
    }
}

impl Drop for ChildForwarder {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Parses `received N = answered ok A + answered with error E + dropped D`.
pub fn parse_summary(line: &str) -> Option<ForwarderCounts> {
    let nums: Vec<u64> = line
        .strip_prefix("received ")?
        .split(|c: char| !c.is_ascii_digit())
        .filter(|s| !s.is_empty())
        .filter_map(|s| s.parse().ok())
        .collect();
    match nums[..] {
        [received, answered_ok, answered_error, dropped, ..] => Some(ForwarderCounts {
            received,
            answered_ok,
            answered_error,
            dropped,
            service_ns: None,
            stalls: None,
        }),
        _ => None,
    }
}

/// Parses the p50 and p99 (ns) of a summary's `service time: min Aus p50 Bus p99 Cus ...`.
pub fn parse_service_line(line: &str) -> Option<(u64, u64)> {
    let rest = line.trim().strip_prefix("service time:")?;
    let after = |key: &str| -> Option<u64> {
        let v = rest.split(key).nth(1)?.split_whitespace().next()?;
        let us: f64 = v.strip_suffix("us")?.parse().ok()?;
        (us.is_finite() && us >= 0.0).then(|| (us * 1000.0).round() as u64)
    };
    Some((after(" p50 ")?, after(" p99 ")?))
}

/// Parses a summary's `forwarder stalls: S, requests in service across one: R`.
pub fn parse_stalls_line(line: &str) -> Option<(u64, u64)> {
    let rest = line.trim().strip_prefix("forwarder stalls: ")?;
    let (stalls, requests) = rest.split_once(", requests in service across one: ")?;
    Some((stalls.parse().ok()?, requests.parse().ok()?))
}

/// Parses a summary's per-GPU line, `  gpu 1: submitted S, completed C, rejected R`.
pub fn parse_shard_line(line: &str) -> Option<ShardCounts> {
    let rest = line.trim().strip_prefix("gpu ")?;
    let nums: Vec<u64> = rest
        .split(|c: char| !c.is_ascii_digit())
        .filter(|s| !s.is_empty())
        .filter_map(|s| s.parse().ok())
        .collect();
    if !rest.contains("submitted") {
        return None;
    }
    match nums[..] {
        [gpu, submitted, completed, rejected] => Some(ShardCounts {
            gpu: gpu as usize,
            submitted,
            completed,
            rejected,
        }),
        _ => None,
    }
}

/// Where a CSV's spectra go: a folder beside it named `<stem>-hgrm`.
pub fn spectrum_dir(csv: &Path) -> (PathBuf, String) {
    let stem = csv
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "run".into());
    let name = format!("{stem}-hgrm");
    let dir = csv
        .parent()
        .map(|p| p.join(&name))
        .unwrap_or_else(|| PathBuf::from(&name));
    (dir, name)
}

/// Records a measured row: writes its spectrum, fills `spectrum`, appends to the CSV.
pub fn record(
    m: &mut Measured,
    index: usize,
    run: u32,
    csv_path: &Path,
    sink: &mut CsvSink,
) -> Result<()> {
    let (dir, rel) = spectrum_dir(csv_path);
    std::fs::create_dir_all(&dir).map_err(|source| Error::Io {
        path: dir.clone(),
        source,
    })?;
    let file = spectrum_name(index, run);
    record::write_hgrm(&dir.join(&file), &m.outcome.histogram)?;
    m.row.spectrum = format!("{rel}/{file}");
    sink.write(&m.row)
}

/// A warning when at least 1 % of a row's samples were in flight across an emulator
/// stall: then its p99 may be the host's, not the system under test's.
pub fn stall_note(stalled: u64, samples: u64) -> Option<String> {
    one_percent_note(
        stalled,
        samples,
        "samples",
        "were in flight while the emulator's thread stalled",
    )
}

/// The same warning when at least 1 % of the requests the forwarder served (the warm-up's
/// too) were in service across a stall of its loop.
pub fn forwarder_stall_note(stalled: u64, served: u64) -> Option<String> {
    one_percent_note(
        stalled,
        served,
        "requests",
        "were in the forwarder while its loop stalled",
    )
}

fn one_percent_note(stalled: u64, of: u64, what: &str, how: &str) -> Option<String> {
    (of > 0 && stalled * 100 >= of).then(|| {
        format!(
            "note: {stalled} of {of} {what} ({:.1} %) {how}: this row's p99 may be the host's; \
             run it again or on quieter cores (qfwd doctor --jitter)",
            stalled as f64 * 100.0 / of as f64
        )
    })
}

/// Point `index`'s spectrum in run `run` (both from 0): `001.hgrm`, and from the second
/// run of a `--repeat` on `001-r2.hgrm`, so no run overwrites another's.
pub fn spectrum_name(index: usize, run: u32) -> String {
    if run == 0 {
        format!("{:03}.hgrm", index + 1)
    } else {
        format!("{:03}-r{}.hgrm", index + 1, run + 1)
    }
}

/// One line comparing what the emulator saw with what the forwarder counted.
pub fn accounting_line(m: &Measured) -> String {
    let mut s = format!("emulator: {}", m.outcome);
    if let Some(f) = m.forwarder {
        let agrees = f.received == m.outcome.sent;
        s.push_str(&format!(
            "\nforwarder: received {} = ok {} + error {} + dropped {}{}",
            f.received,
            f.answered_ok,
            f.answered_error,
            f.dropped,
            if agrees {
                ""
            } else {
                "  (differs from requests sent: datagrams lost before the forwarder)"
            }
        ));
    }
    for sh in &m.shards {
        s.push_str(&format!("\nforwarder {sh}"));
    }
    s
}

/// `qfwd-latency sweep`: run every point of a scenario.
#[derive(clap::Args, Debug, Clone)]
#[command(after_help = "Examples:\n  \
qfwd-latency sweep scenarios/quickstart.toml\n  \
qfwd-latency sweep scenarios/udp-loopback.toml --out udp-loopback.csv\n  \
qfwd-latency sweep scenarios/udp-loopback.toml --out results/cpu-udp-loopback.csv --force\n\n\
Each point writes one CSV row and one .hgrm spectrum (in a folder named <csv stem>-hgrm \
beside the CSV). Rows are flushed as they are measured, so an interrupted sweep keeps them. \
An existing CSV or spectrum folder is never overwritten without --force. Before measuring, \
the sweep checks that this host has the GPUs the scenario's points need.")]
pub struct SweepArgs {
    /// Scenario file (TOML).
    pub scenario: PathBuf,
    /// Summary CSV to write [default: results/NAME.csv, NAME the scenario's name].
    #[arg(long, value_name = "CSV")]
    pub out: Option<PathBuf>,
    /// Overwrite the CSV and the spectra of an earlier sweep at the same place (without
    /// it, an existing CSV or `<csv stem>-hgrm` folder stops the sweep before it starts).
    #[arg(long)]
    pub force: bool,
    /// List the points and exit without measuring.
    #[arg(long)]
    pub dry_run: bool,
    /// Override samples for every point (quick checks), 1 ..= 2147483647.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=qfwd::limits::SAMPLES.max))]
    pub samples: Option<u64>,
    /// Run every point with this topology instead, e.g. `cpu` to run a GPU scenario's shape
    /// on a host without GPUs (`gpus` then labels host shards).
    #[arg(long)]
    pub topology: Option<Topology>,
    /// Stream scenarios: run only the points of this engine (`cpu-pool` or `gpu`).
    #[arg(long, value_name = "ENGINE")]
    pub engine: Option<crate::streams::scenario::Engine>,
    /// Drop the scenario's pinning (`cores`, `emulator_core`) and let idle threads yield:
    /// for machines with fewer cores than the scenario pins (CI).
    #[arg(long)]
    pub unpinned: bool,
    /// Pin the forwarder to FWD and the emulator to EMU instead of the scenario's cores
    /// (`qfwd doctor --jitter 5` ranks this host's cores, quietest first).
    #[arg(long, value_name = "FWD,EMU", value_parser = parse_core_pair, conflicts_with = "unpinned")]
    pub cores: Option<(usize, usize)>,
    /// Sweep the whole scenario N times into the one CSV (every point once, then again, so
    /// each point's runs are spread over the whole sweep), then print the spread of each
    /// point over its runs (`report --spread`): a p99 from one run is the host's moment as
    /// much as the code's.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub repeat: u32,
}

/// `--cores FWD,EMU`: two different core numbers.
fn parse_core_pair(s: &str) -> std::result::Result<(usize, usize), String> {
    let parse = |v: &str| {
        v.trim()
            .parse::<usize>()
            .map_err(|_| format!("`{v}` is not a core number (expected FWD,EMU, e.g. 4,5)"))
    };
    match s.split(',').collect::<Vec<_>>()[..] {
        [fwd, emu] => {
            let (fwd, emu) = (parse(fwd)?, parse(emu)?);
            if fwd == emu {
                return Err(format!(
                    "forwarder and emulator both on core {fwd}: two spinning threads on one core \
                     measure the scheduler, not the forwarder"
                ));
            }
            Ok((fwd, emu))
        }
        _ => Err(format!("`{s}`: expected two cores FWD,EMU, e.g. 4,5")),
    }
}

/// Applies the command-line overrides of [`SweepArgs`] to every point. `cores` =
/// (forwarder, emulator).
pub fn adapt(
    points: &mut [Point],
    samples: Option<u64>,
    topology: Option<Topology>,
    unpinned: bool,
    cores: Option<(usize, usize)>,
) {
    for p in points {
        if let Some((fwd, emu)) = cores {
            match p.cores.first_mut() {
                Some(c) => *c = fwd,
                None => p.cores.push(fwd),
            }
            p.emulator_core = Some(emu);
        }
        if let Some(n) = samples {
            p.samples = n;
            p.duration_s = None;
        }
        if let Some(t) = topology {
            p.topology = t;
        }
        if unpinned {
            p.cores.clear();
            p.emulator_core = None;
            p.idle = qfwd::forward::IdlePolicy::Yield;
            p.emulator_idle = qfwd::forward::IdlePolicy::Yield;
        }
    }
}

/// Runs a sweep; returns the rows written (none for a stream scenario, whose rows are
/// [`crate::streams::record::StreamRow`]s, written by [`crate::streams::sweep::run`]).
pub fn run(args: &SweepArgs) -> Result<Vec<Row>> {
    if is_stream_file(&args.scenario) {
        return crate::streams::sweep::run(args).map(|_| Vec::new());
    }
    let mut scenario = Scenario::load(&args.scenario)?;
    adapt(
        &mut scenario.points,
        args.samples,
        args.topology,
        args.unpinned,
        args.cores,
    );
    // The overrides may make a point invalid (a topology its other keys do not fit).
    for p in &scenario.points {
        p.validate().map_err(|reason| Error::Scenario {
            path: scenario.path.clone(),
            key: format!(
                "point ({}) after the command-line overrides",
                p.label(&scenario.swept_keys)
            ),
            reason,
        })?;
    }
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from("results").join(format!("{}.csv", scenario.name)));
    tracing::info!(
        "{}: {} points -> {}",
        scenario.path.display(),
        scenario.points.len(),
        out.display()
    );
    if args.dry_run {
        for (i, p) in scenario.points.iter().enumerate() {
            println!("{:3}  {}", i + 1, p.label(&scenario.swept_keys));
        }
        return Ok(Vec::new());
    }
    check_gpus(&scenario, gpus_here())?;
    claim_output(&out, args.force)?;
    let rows = run_scenario_repeated(&scenario, &out, args.repeat)?;
    if args.repeat > 1 {
        let entries: Vec<report::Entry> = rows
            .iter()
            .map(|row| report::Entry {
                source: out.clone(),
                row: row.clone(),
            })
            .collect();
        print!(
            "{}",
            spread::render_text(&entries, &spread::default_key(), None)
        );
    }
    Ok(rows)
}

/// Whether the file at `path` is a stream scenario (read errors are left to the loader).
fn is_stream_file(path: &Path) -> bool {
    std::fs::read_to_string(path).is_ok_and(|t| crate::streams::scenario::is_stream_scenario(&t))
}

/// How many GPUs this host's driver sees (0 without a driver or a device).
fn gpus_here() -> usize {
    match qfwd::gpu::probe() {
        Ok(Some(gpus)) => gpus.len(),
        _ => 0,
    }
}

/// Fails before anything is measured when a point that runs its forwarder on this host
/// needs a GPU index this host lacks (`gpus_here` GPUs, numbered from 0). Points with an
/// external forwarder are measured wherever it runs, so they need nothing here.
pub fn check_gpus(scenario: &Scenario, gpus_here: usize) -> Result<()> {
    let mut short = Vec::new();
    let mut highest = 0;
    for (i, p) in scenario.points.iter().enumerate() {
        if p.launch == Launch::External || !p.topology.needs_gpu() {
            continue;
        }
        let need = run_config(p).gpu_list().into_iter().max().unwrap_or(0);
        if need >= gpus_here {
            short.push((i + 1).to_string());
            highest = highest.max(need);
        }
    }
    if short.is_empty() {
        return Ok(());
    }
    let here = match gpus_here {
        0 => match qfwd::gpu::unavailable_reason() {
            Some(why) => format!("this host has none ({why})"),
            None => "this host has none".to_string(),
        },
        n => format!("this host has {n}"),
    };
    Err(Error::NoGpu {
        scenario: scenario.path.clone(),
        detail: format!(
            "point{} {} of {} need{} GPU {highest} and {here}: run the scenario on a GPU host, \
             or its shape on the CPU with --topology cpu",
            if short.len() == 1 { "" } else { "s" },
            short.join(", "),
            scenario.points.len(),
            if short.len() == 1 { "s" } else { "" },
        ),
    })
}

/// Makes sure the sweep writes over nothing unless `force`: neither the CSV nor its
/// spectrum folder may exist. With `force`, the old spectra go first, so that the folder
/// holds only the new sweep's.
pub fn claim_output(csv: &Path, force: bool) -> Result<()> {
    let (dir, _) = spectrum_dir(csv);
    if !force {
        return match [csv, dir.as_path()].into_iter().find(|p| p.exists()) {
            Some(p) => Err(Error::OutputExists {
                path: p.to_path_buf(),
            }),
            None => Ok(()),
        };
    }
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return Ok(());
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.extension().is_some_and(|e| e == "hgrm") {
            std::fs::remove_file(&path).map_err(|source| Error::Io { path, source })?;
        }
    }
    Ok(())
}

/// Measures every point of `scenario` into `out` (CSV + spectra).
pub fn run_scenario(scenario: &Scenario, out: &Path) -> Result<Vec<Row>> {
    run_scenario_repeated(scenario, out, 1)
}

/// Measures every point of `scenario` `repeat` times, the whole scenario once per run,
/// into `out`; each run has its own `run_id`, and its spectra their own names.
pub fn run_scenario_repeated(scenario: &Scenario, out: &Path, repeat: u32) -> Result<Vec<Row>> {
    let prov = Provenance::detect();
    let mut sink = CsvSink::create(out)?;
    let points = scenario.points.len();
    let bar = ProgressBar::new((points * repeat as usize) as u64);
    bar.set_style(
        ProgressStyle::with_template("{bar:30} {pos}/{len} points  {elapsed_precise}  {msg}")
            .expect("static template"),
    );
    let mut rows = Vec::new();
    for run in 0..repeat {
        let run_id = provenance::run_id();
        let of_runs = if repeat > 1 {
            format!(" run {}/{repeat}", run + 1)
        } else {
            String::new()
        };
        for (i, point) in scenario.points.iter().enumerate() {
            let label = point.label(&scenario.swept_keys);
            let total = point.warmup + point.timed_samples();
            bar.set_message(format!("{label}  0%"));
            let mut m = measure(point, &scenario.name, &run_id, &prov, |done| {
                bar.set_message(format!("{label}  {}%", done * 100 / total.max(1)));
            })?;
            record(&mut m, i, run, out, &mut sink)?;
            bar.suspend(|| tracing::info!("{}", point_report(&m, i, points, &of_runs, &label)));
            bar.inc(1);
            rows.push(m.row);
        }
    }
    bar.finish_and_clear();
    tracing::info!("wrote {} rows to {}", rows.len(), out.display());
    Ok(rows)
}

/// What the sweep prints for a measured point: its line (latencies, counts, stalled
/// samples, the forwarder's service time), then a note on stalls, the per-GPU counts and
/// the accounting where they say something.
fn point_report(m: &Measured, i: usize, points: usize, of_runs: &str, label: &str) -> String {
    let us = |ns: u64| ns as f64 / 1e3;
    let r = &m.row;
    let mut s = format!(
        "[{}/{points}{of_runs}] {label}: p50 {:.2}us p99 {:.2}us max {:.2}us, {} samples, \
         errors {}, lost {}, stalled {}",
        i + 1,
        us(r.p50_ns),
        us(r.p99_ns),
        us(r.max_ns),
        r.samples,
        r.errors,
        r.dropped,
        m.outcome.stalled_samples,
    );
    if let (Some(p50), Some(p99)) = (r.forwarder_p50_ns, r.forwarder_p99_ns) {
        s.push_str(&format!(
            "; forwarder p50 {:.2}us p99 {:.2}us",
            us(p50),
            us(p99)
        ));
    }
    if let (Some(stalls), Some(requests)) = (r.forwarder_stalls, r.forwarder_stalled_requests) {
        s.push_str(&format!(", stalls {stalls} ({requests} requests)"));
    }
    if let Some(why) = crate::plot::trouble(r) {
        // A queue, not the host, sets these latencies: say so instead of a stall note.
        s.push_str(&format!(
            "\n  {why}: these latencies measure a queue, not the service (plots mark the \
             point off the latency scale)"
        ));
    } else {
        if let Some(note) = stall_note(m.outcome.stalled_samples, r.samples) {
            s.push_str(&format!("\n  {note}"));
        }
        if let (Some(stalled), Some(f)) = (r.forwarder_stalled_requests, m.forwarder) {
            if let Some(note) = forwarder_stall_note(stalled, f.received) {
                s.push_str(&format!("\n  {note}"));
            }
        }
    }
    if !m.shards.is_empty() {
        s.push_str(&format!(
            "\n  completed per GPU (GPU:count): {}",
            r.per_gpu_completed
        ));
    }
    let forwarder_missed = m.forwarder.is_some_and(|f| f.received != m.outcome.sent);
    if r.errors > 0 || r.dropped > 0 || forwarder_missed {
        s.push_str(&format!("\n  {}", accounting_line(m).replace('\n', "\n  ")));
    }
    s
}

/// The CSV's decoder column: the decoder and its model's file stem (the model names the
/// code and distance; the decoder alone would not), and for the GPU uf the settings that
/// change its speed, not its answers: the low-weight table (`+table`, `+no-table`,
/// `+table<=K`) and a split path limit set by hand (`+split<=N`).
fn decoder_label(point: &Point) -> String {
    let Some(dem) = point.dem.as_ref().filter(|_| point.decoder != "-") else {
        return point.decoder.clone();
    };
    let gpu_uf = point.topology.needs_gpu() && point.decoder == "uf";
    let table = match (gpu_uf, point.uf_table_max_defects) {
        (false, _) => String::new(),
        (true, None) => "+table".to_string(),
        (true, Some(0)) => "+no-table".to_string(),
        (true, Some(k)) => format!("+table<={k}"),
    };
    let split = match (gpu_uf, point.uf_split_max_defects) {
        (true, Some(m)) => format!("+split<={m}"),
        _ => String::new(),
    };
    format!(
        "{}:{}{table}{split}",
        point.decoder,
        dem.file_stem()
            .map(|s| s.to_string_lossy())
            .unwrap_or_default()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_line_parses() {
        let c = parse_summary("received 10 = answered ok 7 + answered with error 2 + dropped 1")
            .unwrap();
        assert_eq!(
            c,
            ForwarderCounts {
                received: 10,
                answered_ok: 7,
                answered_error: 2,
                dropped: 1,
                service_ns: None,
                stalls: None,
            }
        );
        assert!(parse_summary("service time: p50").is_none());
    }

    #[test]
    fn stall_note_from_one_percent() {
        assert_eq!(stall_note(199, 20_000), None);
        assert!(stall_note(200, 20_000)
            .unwrap()
            .contains("200 of 20000 samples (1.0 %)"));
        assert_eq!(stall_note(0, 0), None);
        assert_eq!(forwarder_stall_note(99, 10_000), None);
        assert!(forwarder_stall_note(100, 10_000)
            .unwrap()
            .contains("100 of 10000 requests (1.0 %) were in the forwarder"));
        assert_eq!(forwarder_stall_note(0, 0), None);
    }

    #[test]
    fn stalls_line_parses() {
        assert_eq!(
            parse_stalls_line("forwarder stalls: 12, requests in service across one: 3"),
            Some((12, 3))
        );
        for bad in [
            "forwarder stalls: 12",
            "forwarder stalls: x, requests in service across one: 3",
            "forwarder stalls: 1, requests in service across one: -3",
            "service time: min 0.40us p50 1.23us",
        ] {
            assert_eq!(parse_stalls_line(bad), None, "{bad}");
        }
        // What the forwarder prints is what the harness reads.
        let mut s = qfwd::stats::Stats::default();
        (s.stalls, s.stalled_requests) = (7, 2);
        let text = s.to_string();
        assert_eq!(
            text.lines().find_map(parse_stalls_line),
            Some((7, 2)),
            "{text}"
        );
    }

    #[test]
    fn service_line_parses() {
        assert_eq!(
            parse_service_line(
                "service time: min 0.40us p50 1.23us p99 14.56us p99.9 20.00us max 99.10us"
            ),
            Some((1230, 14560))
        );
        for bad in [
            "service time: min 0.40us p50 1.23us",
            "service time: p50 xus p99 1us",
            "service time: p50 -1.00us p99 1.00us",
            "received 10 = answered ok 10",
        ] {
            assert_eq!(parse_service_line(bad), None, "{bad}");
        }
    }

    #[test]
    fn per_gpu_summary_lines_parse() {
        let s = ShardCounts {
            gpu: 1,
            submitted: 7,
            completed: 6,
            rejected: 2,
        };
        // The line `qfwd run` prints at exit.
        assert_eq!(parse_shard_line(&format!("  {s}")), Some(s));
        assert!(parse_shard_line("gpu 0 sub 3").is_none());
    }

    #[test]
    fn routed_points_spread_requests_over_functions_and_gpus() {
        let s = Scenario::parse(
            r#"
            [forwarder]
            topology = "cpu"
            idle = "yield"
            functions = ["patch0", "patch1", "patch2"]
            [load]
            mode = "ping-pong"
            warmup = 30
            samples = 300
            emulator_idle = "yield"
            [[sweep]]
            gpus = ["-", "0", "0,1"]
            "#,
            Path::new("t.toml"),
        )
        .unwrap();
        let prov = Provenance::detect();
        let mut rows = vec![];
        for p in &s.points {
            let c = run_config(p);
            assert_eq!(
                c.handlers,
                vec!["parity:patch0", "parity:patch1", "parity:patch2"]
            );
            let m = measure(p, "t", "r", &prov, |_| {}).unwrap();
            assert_eq!(m.outcome.ok, 330, "{}", m.outcome);
            assert_eq!(m.row.functions, 3);
            rows.push((m.row.gpus.clone(), m.row.per_gpu_completed.clone()));
        }
        // Round-robin over 3 functions, dealt over 2 GPUs: patch0, patch2 -> 0; patch1 -> 1.
        assert_eq!(
            rows,
            vec![
                ("-".to_string(), "-".to_string()),
                ("0".to_string(), "0:330".to_string()),
                ("0,1".to_string(), "0:220;1:110".to_string()),
            ]
        );
    }

    #[test]
    fn gpu_points_need_the_gpus_they_name_on_this_host() {
        let s = Scenario::parse(
            r#"
            [[sweep]]
            topology = ["cpu", "gpu-persistent"]
            [[sweep]]
            topology = ["gpu-persistent"]
            gpus = ["0,1"]
            [[sweep]]
            launch = ["external"]
            transport = ["udp"]
            target = ["192.0.2.1:5000"]
            topology = ["gpu-persistent"]
            "#,
            Path::new("g.toml"),
        )
        .unwrap();
        assert_eq!(s.points.len(), 4);
        assert!(check_gpus(&s, 2).is_ok());
        let one = check_gpus(&s, 1).unwrap_err().to_string();
        assert!(
            one.contains("g.toml: point 3 of 4 needs GPU 1 and this host has 1"),
            "{one}"
        );
        let none = check_gpus(&s, 0).unwrap_err().to_string();
        assert!(none.contains("points 2, 3 of 4 need GPU 1"), "{none}");
        assert!(none.contains("--topology cpu") && none.contains("nothing was measured"));
    }

    #[test]
    fn output_is_claimed_only_when_free_or_forced() {
        let dir = tempfile::tempdir().unwrap();
        let csv = dir.path().join("run.csv");
        assert!(claim_output(&csv, false).is_ok());
        let hgrm = dir.path().join("run-hgrm");
        std::fs::create_dir(&hgrm).unwrap();
        std::fs::write(hgrm.join("001.hgrm"), "old").unwrap();
        std::fs::write(hgrm.join("notes.txt"), "mine").unwrap();
        let err = claim_output(&csv, false).unwrap_err().to_string();
        assert!(err.contains("run-hgrm") && err.contains("--force"), "{err}");
        std::fs::write(&csv, "old").unwrap();
        let err = claim_output(&csv, false).unwrap_err().to_string();
        assert!(
            err.contains("run.csv already exists") && err.contains("--force"),
            "{err}"
        );
        claim_output(&csv, true).unwrap();
        assert!(
            !hgrm.join("001.hgrm").exists(),
            "old spectra go with --force"
        );
        assert!(hgrm.join("notes.txt").exists(), "only spectra are removed");
    }

    #[test]
    fn decoder_labels_name_the_model_and_the_gpu_uf_settings() {
        let s = Scenario::parse(
            r#"
            [forwarder]
            topology = "gpu-persistent"
            [load]
            mode = "ping-pong"
            [[sweep]]
            decoder = ["uf"]
            dem = ["tests/fixtures/surface_d7_r7_z_p001.dem"]
            dets = ["tests/fixtures/surface_d7_r7_z_p001.b8"]
            uf_table_max_defects = [0, 3]
            uf_split_max_defects = [8]
            [[sweep]]
            topology = ["cpu", "gpu-persistent"]
            decoder = ["uf", "lut"]
            dem = ["tests/fixtures/surface_d3_r3_z_p001.dem"]
            dets = ["tests/fixtures/surface_d3_r3_z_p001.b8"]
            "#,
            Path::new("t.toml"),
        )
        .unwrap();
        let labels: Vec<String> = s.points.iter().map(decoder_label).collect();
        assert_eq!(
            labels,
            vec![
                "uf:surface_d7_r7_z_p001+no-table+split<=8",
                "uf:surface_d7_r7_z_p001+table<=3+split<=8",
                "uf:surface_d3_r3_z_p001",
                "lut:surface_d3_r3_z_p001",
                "uf:surface_d3_r3_z_p001+table",
                "lut:surface_d3_r3_z_p001",
            ]
        );
    }

    #[test]
    fn core_pairs_parse_and_bad_ones_are_explained() {
        assert_eq!(parse_core_pair("4,5"), Ok((4, 5)));
        assert_eq!(parse_core_pair(" 12, 3"), Ok((12, 3)));
        assert!(parse_core_pair("4")
            .unwrap_err()
            .contains("expected two cores"));
        assert!(parse_core_pair("4,5,6")
            .unwrap_err()
            .contains("expected two cores"));
        assert!(parse_core_pair("4,x")
            .unwrap_err()
            .contains("`x` is not a core number"));
        assert!(parse_core_pair("3,3")
            .unwrap_err()
            .contains("both on core 3"));
    }

    #[test]
    fn the_cores_override_replaces_the_forwarder_and_emulator_cores() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scenarios/gpu-topologies.toml");
        let mut s = Scenario::load(&path).unwrap();
        assert_eq!(s.points[0].cores, vec![2]);
        adapt(&mut s.points, None, None, false, Some((7, 9)));
        for p in &s.points {
            assert_eq!((p.cores.clone(), p.emulator_core), (vec![7], Some(9)));
        }
    }

    /// The shipped multi-GPU scenario's shape on the host (topology cpu, host shards), as
    /// `qfwd-latency sweep scenarios/multi-gpu.toml --topology cpu --unpinned` runs it: one
    /// low-rate point per `gpus` value, so CI exercises routing through the harness.
    #[test]
    fn the_multi_gpu_scenario_runs_on_the_cpu_topology() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scenarios/multi-gpu.toml");
        let mut s = Scenario::load(&path).unwrap();
        adapt(&mut s.points, Some(500), Some(Topology::Cpu), true, None);
        let prov = Provenance::detect();
        let mut seen = Vec::new();
        for p in s.points.iter_mut() {
            if seen.contains(&p.gpus) {
                continue;
            }
            seen.push(p.gpus.clone());
            p.rate_hz = 20_000;
            p.warmup = 100;
            let m = measure(p, &s.name, "r", &prov, |_| {}).unwrap();
            assert_eq!(m.outcome.ok, 600, "{}", accounting_line(&m));
            let gpus = p.gpu_list().unwrap();
            assert_eq!(m.shards.len(), gpus.len());
            // Patches dealt evenly: every GPU completes its share.
            for sh in &m.shards {
                assert_eq!(
                    sh.completed,
                    600 / gpus.len() as u64,
                    "{}",
                    accounting_line(&m)
                );
            }
        }
        assert_eq!(seen, vec!["0".to_string(), "0,1".to_string()]);
    }

    #[test]
    fn spectra_live_beside_the_csv() {
        let (dir, rel) = spectrum_dir(Path::new("results/cpu-udp.csv"));
        assert_eq!(dir, PathBuf::from("results/cpu-udp-hgrm"));
        assert_eq!(rel, "cpu-udp-hgrm");
    }
}
