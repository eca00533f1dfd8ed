//! Running a point's load: in process, against an external forwarder, or a child one.

use qfwd::config::RunConfig;
use qfwd::direct::DataPath;
use qfwd::serve::{QpuEnd, Wiring};
use qfwd::stats::ShardCounts;
use qfwd::transport::inproc;
use qfwd::transport::udp::UdpClient;
use qfwd::transport::{Client, TransportKind};
use qfwd::wire::HEADER_LEN;

use crate::emulator::{self, LoadSpec, Outcome, Workload};
use crate::scenario::{Launch, Point};
use crate::{Error, Result};

use super::child::ChildForwarder;
use super::ForwarderCounts;

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

/// Runs the point's load where its launch says (in process, against an external
/// forwarder, or against a child `qfwd`): the emulator's outcome, the forwarder's counters
/// (where it reports them) and its per-GPU shards.
pub(super) fn drive(
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
