//! The `gpu-direct` data path as a running service: no forwarding thread, only the device
//! side on the NIC queues ([`DirectService`]). The caller's polls read the device's counters
//! for the live intervals, watch its heartbeat and end it at the configured duration.
#![forbid(unsafe_code)]

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::config::RunConfig;
use crate::direct::{DirectReport, DirectService};
use crate::stats::Interval;
use crate::Result;

/// How long stopping waits for the device side to take what the NICs delivered.
const DRAIN: Duration = Duration::from_secs(2);

/// A running `gpu-direct` service, driven by its owner's polls.
pub(super) struct DirectRun {
    /// `None` once stopped.
    service: Option<DirectService>,
    stop: Arc<AtomicBool>,
    /// When the configured duration ends.
    deadline: Option<Instant>,
    /// Live intervals: their length, and when the next is due (`None`: no intervals).
    interval: Option<(Duration, Instant)>,
    /// Requests received at the last interval.
    last_received: u64,
}

impl DirectRun {
    pub(super) fn new(service: DirectService, config: &RunConfig, now: Instant) -> DirectRun {
        let interval = config.stats_interval().map(|every| (every, now + every));
        DirectRun {
            service: Some(service),
            stop: Arc::new(AtomicBool::new(false)),
            deadline: config.duration().map(|d| now + d),
            interval,
            last_received: 0,
        }
    }

    pub(super) fn service(&self) -> Option<&DirectService> {
        self.service.as_ref()
    }

    pub(super) fn stop_flag(&self) -> Arc<AtomicBool> {
        self.stop.clone()
    }

    pub(super) fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
    }

    /// Whether it should end: asked to stop, or its duration is over (as of the last poll).
    pub(super) fn is_finished(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    /// One step at `now`: ends the run when its duration is over, checks the heartbeat, and
    /// returns the interval report when one is due.
    pub(super) fn poll(&mut self, now: Instant) -> Vec<Interval> {
        if self.deadline.is_some_and(|d| now >= d) {
            self.stop();
        }
        let Some(service) = self.service.as_mut() else {
            return Vec::new();
        };
        let Some((every, due)) = self.interval else {
            service.heartbeat_ok(now);
            return Vec::new();
        };
        if now < due {
            service.heartbeat_ok(now);
            return Vec::new();
        }
        self.interval = Some((every, due + every));
        service.heartbeat_ok(now);
        let mut stats = service.counters().stats();
        stats.interval_received = stats.received.saturating_sub(self.last_received);
        stats.stalls = service.stalls();
        self.last_received = stats.received;
        vec![stats.interval(every)]
    }

    /// Stops the NICs, lets the device side take what they delivered, stops it; the final
    /// counters.
    pub(super) fn join(mut self) -> Result<DirectReport> {
        self.stop();
        let service = self.service.take().expect("a running service until joined");
        service.stop(DRAIN)
    }
}

impl Drop for DirectRun {
    fn drop(&mut self) {
        if let Some(service) = self.service.take() {
            if let Err(e) = service.stop(DRAIN) {
                tracing::warn!("gpu-direct did not stop cleanly: {e}");
            }
        }
    }
}
