//! What a point asks of the forwarder it runs and of the emulator that drives it.

use std::time::Duration;

use qfwd::config::RunConfig;
use qfwd::mailbox::RxCompletion;

use crate::emulator::{LoadSpec, Workload};
use crate::scenario::Point;
use crate::{Error, Result};

use super::DECODER_NAME;

/// Distinct payloads cycled through per point.
const WORKLOAD_POOL: usize = 1024;

/// The forwarder's handler list for a point: the handler under each of `functions`
/// (`parity:patch0`, ...), or the handler alone.
pub(super) fn handler_specs(point: &Point) -> Vec<String> {
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

pub(super) fn load_spec(point: &Point) -> LoadSpec {
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

/// The requests a point sends: parity payloads, or shots replayed from its `.dem`.
pub(super) fn point_workload(point: &Point) -> Result<Workload> {
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
