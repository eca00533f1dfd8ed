//! The CSV row of a measured point.

use qfwd::backend::Topology;
use qfwd::config::RunConfig;
use qfwd::direct::DataPath;
use qfwd::stats::ShardCounts;
use qfwd::transport::TransportKind;

use crate::emulator::{Outcome, Workload};
use crate::provenance::{self, Provenance};
use crate::record::Row;
use crate::scenario::Point;

use super::ForwarderCounts;

/// The CSV row of a measured point (latencies are set from the histogram after).
pub(super) fn point_row(
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

pub(super) fn list(v: &[usize]) -> String {
    v.iter()
        .map(|g| g.to_string())
        .collect::<Vec<_>>()
        .join(",")
}

/// The CSV's decoder column: the decoder and its model's file stem (the model names the
/// code and distance; the decoder alone would not), and for the GPU uf the settings that
/// change its speed, not its answers: the low-weight table (`+table`, `+no-table`,
/// `+table<=K`) and a split path limit set by hand (`+split<=N`).
pub(super) fn decoder_label(point: &Point) -> String {
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
