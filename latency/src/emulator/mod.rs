//! The QPU-controller emulator: sends requests, checks every answer, times each one.
//!
//! Two modes (docs/measuring.md):
//! - `ping-pong`: one request in flight; each sample is a full round trip.
//! - `open-loop`: requests leave on a fixed schedule whatever the answers do; each
//!   sample is timed from its *intended* send time (as wrk2 does), so a stall in the
//!   forwarder shows up in every request it delayed instead of hiding as one slow one.
//!
//! Every response is checked: request_id and timestamp echoed, status, and the result
//! against the answer the emulator computed itself. Each request ends in exactly one
//! class: ok, error status, wrong answer, or lost; late and duplicate answers are
//! counted beside them.
//!
//! The emulator also watches itself: a gap between two of its clock reads longer than
//! its quickest by [`STALL_NS`] or more is a *stall* (the host ran something else on its
//! core, or did not run it), and every timed sample in flight across one, or in open loop
//! due to be sent during one, is counted in [`Outcome::stalled_samples`]: its latency
//! includes time the emulator did not watch. When a row's slowest 1 % is about as many
//! samples as it has stalled ones, its p99 is the host's, not the system under test's.
//! (The forwarder watches its own loop by the same rule, `qfwd::forward`.)
//!
//! `workload` holds the requests and their answers, `runner` the state and pacing of one
//! run, `outcome` what the run measured.
#![forbid(unsafe_code)]

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use qfwd::transport::Client;
use serde::{Deserialize, Serialize};

use crate::{Error, Result};

mod outcome;
mod runner;
mod workload;

pub use outcome::{percentile_table, HostileCounts, Outcome};
pub use workload::Workload;

use runner::Run;

/// How requests are paced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    PingPong,
    OpenLoop,
}

impl Mode {
    pub fn as_str(&self) -> &'static str {
        match self {
            Mode::PingPong => "ping-pong",
            Mode::OpenLoop => "open-loop",
        }
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Mode {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "ping-pong" => Ok(Mode::PingPong),
            "open-loop" => Ok(Mode::OpenLoop),
            _ => Err(format!(
                "unknown mode {s:?}; expected ping-pong or open-loop"
            )),
        }
    }
}

/// What to send and how.
#[derive(Debug, Clone)]
pub struct LoadSpec {
    pub mode: Mode,
    /// Requests per second (open loop only).
    pub rate_hz: u64,
    /// Requests sent first and checked, but not timed.
    pub warmup: u64,
    /// Requests timed.
    pub samples: u64,
    /// A request not answered within this is lost (a later answer counts as late).
    pub timeout: Duration,
    /// Yield instead of spinning while waiting (for machines short of cores).
    pub yield_when_idle: bool,
    /// Hostile datagrams mixed in, per 100 requests ([`crate::hostile`]); 0 = none.
    pub hostile_percent: f64,
}

impl Default for LoadSpec {
    fn default() -> Self {
        LoadSpec {
            mode: Mode::PingPong,
            rate_hz: 0,
            warmup: 1_000,
            samples: 10_000,
            timeout: Duration::from_secs(1),
            yield_when_idle: false,
            hostile_percent: 0.0,
        }
    }
}

/// The most requests one run may send: request ids are 32 bits, and those from 2^31 up
/// mark hostile datagrams.
pub const MAX_REQUESTS: u64 = crate::hostile::HOSTILE_ID_BASE as u64;

/// The most requests tracked at once (24 B each): a ring, so a long run needs no more
/// memory than a short one. An entry is reused after this many later requests, which
/// must be several timeouts' worth ([`ring_len`]).
pub const MAX_TRACKED: u64 = 1 << 24;

/// Ring entries for a run: four timeouts' worth of requests at the offered rate (at least
/// 64 Ki, at most the run), a power of two. `None` when that is more than
/// [`MAX_TRACKED`].
pub fn ring_len(load: &LoadSpec) -> Option<usize> {
    let total = load.warmup + load.samples;
    let in_flight = match load.mode {
        Mode::PingPong => 1,
        Mode::OpenLoop => (load.rate_hz as f64 * load.timeout.as_secs_f64()).ceil() as u64,
    };
    let want = in_flight.saturating_mul(4).max(1 << 16).min(total.max(1));
    let n = want.checked_next_power_of_two()?;
    (n <= MAX_TRACKED).then_some(n as usize)
}

/// A gap between two of the emulator's clock reads at least this much longer than its
/// quickest is a stall: the forwarder's rule, so the two counts compare.
pub use qfwd::stats::STALL_NS;

/// Drives `client` with `load`, cycling through `workload`. `progress` is called now
/// and then with the number of requests sent so far.
pub fn run<C: Client>(
    client: &mut C,
    workload: &Workload,
    load: &LoadSpec,
    mut progress: impl FnMut(u64),
) -> Result<Outcome> {
    let ring = check(client, workload, load)?;
    let total = load.warmup + load.samples;
    let mut run = Run::new(workload, load, ring);
    let step = (total / 100).max(1);
    match load.mode {
        Mode::PingPong => run.ping_pong(client, workload, load, total, step, &mut progress)?,
        Mode::OpenLoop => run.open_loop(client, workload, load, total, step, &mut progress)?,
    }
    progress(total);
    Ok(run.into_outcome())
}

/// Refuses a load the emulator cannot run; else the ring length it needs ([`ring_len`]).
fn check<C: Client>(client: &C, workload: &Workload, load: &LoadSpec) -> Result<usize> {
    let target = client.describe();
    let fail = |detail: String| Error::Emulator {
        target: target.clone(),
        detail,
    };
    let total = load.warmup + load.samples;
    if total == 0 {
        return Err(fail("nothing to send: warmup + samples is 0".into()));
    }
    if total > MAX_REQUESTS {
        return Err(fail(format!(
            "{total} requests is more than {MAX_REQUESTS} per run"
        )));
    }
    if workload.is_empty() {
        return Err(fail("empty workload".into()));
    }
    if load.mode == Mode::OpenLoop && load.rate_hz == 0 {
        return Err(fail("open-loop needs a rate above 0".into()));
    }
    if !(0.0..=50.0).contains(&load.hostile_percent) {
        return Err(fail(format!(
            "hostile_percent {}: expected 0 ..= 50",
            load.hostile_percent
        )));
    }
    ring_len(load).ok_or_else(|| {
        fail(format!(
            "{} req/s x {:?} timeout is more requests in flight than the {MAX_TRACKED} the \
             emulator tracks; lower the timeout",
            load.rate_hz, load.timeout
        ))
    })
}

#[cfg(test)]
mod tests;
