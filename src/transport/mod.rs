//! QPU-facing transports: how requests arrive and responses leave.
//!
//! - [`udp`]: kernel UDP sockets, non-blocking, busy-polled, with a peer allowlist;
//! - [`inproc`]: a lock-free single-producer/single-consumer ring pair between an
//!   in-process emulator and the forwarder, standing in for NIC DMA so the GPU path
//!   can be measured without the network stack.
//!
//! The forwarder side implements [`Transport`]; the QPU side (the emulator) uses
//! [`Client`].
#![forbid(unsafe_code)]

use std::fmt;
use std::str::FromStr;

use crate::Result;

pub mod inproc;
pub mod udp;

/// Which transport faces the QPU controller.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TransportKind {
    Udp,
    Inproc,
    /// Requests through the mlx5-faithful soft NIC (UDP toward the QPU in `qfwd run`,
    /// an in-process ring in the harness); responses posted with a chosen doorbell.
    Softnic,
    /// RoCEv2 through ibverbs (feature `rdma`): requests as RDMA WRITE-with-immediate into
    /// a registered ring, responses as inline SENDs; `listen` is the UDP control plane.
    Rdma,
}

impl TransportKind {
    pub fn as_str(&self) -> &'static str {
        match self {
            TransportKind::Udp => "udp",
            TransportKind::Inproc => "inproc",
            TransportKind::Softnic => "softnic",
            TransportKind::Rdma => "rdma",
        }
    }
}

impl fmt::Display for TransportKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for TransportKind {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "udp" => Ok(TransportKind::Udp),
            "inproc" => Ok(TransportKind::Inproc),
            "softnic" => Ok(TransportKind::Softnic),
            "rdma" => Ok(TransportKind::Rdma),
            _ => Err(format!(
                "unknown transport {s:?}; expected udp, inproc, softnic or rdma"
            )),
        }
    }
}

/// Datagrams a transport dropped before it could hand them to the forwarder, counted
/// since it started. The forwarder adds them to its own counters (as received and
/// dropped), so its totals still add up.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TransportDrops {
    /// From a peer outside the allowlist, where the transport itself filters (the soft
    /// NIC; the udp transport leaves the check to the forwarder).
    pub not_allowed: u64,
    /// From an allowed peer other than the one a connected queue pair serves (the soft
    /// NIC's QP, like an RDMA UC QP, answers one peer).
    pub foreign_peer: u64,
    /// Dropped by the kernel at the socket, its receive buffer full (the socket's drop
    /// counter, `SO_RXQ_OVFL` / `SO_MEMINFO`): the forwarder did not keep up.
    pub socket_overflow: u64,
}

/// Now, in nanoseconds of `CLOCK_REALTIME`: the clock of kernel receive timestamps
/// ([`Transport::last_arrival_ns`]).
pub fn realtime_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// A kernel drop counter (32 bits, wrapping) followed as a 64-bit total. Values may come
/// out of order (a datagram queued before a later reading carries an older value): only
/// growth counts.
#[derive(Debug, Clone, Copy, Default)]
pub struct DropCounter {
    last: u32,
    total: u64,
}

impl DropCounter {
    /// Takes a reading of the kernel counter.
    pub fn observe(&mut self, raw: u32) {
        let grew = raw.wrapping_sub(self.last);
        // A "growth" of more than half the range is an older value seen late.
        if grew > 0 && grew < 1 << 31 {
            self.total += u64::from(grew);
            self.last = raw;
        }
    }

    /// Drops since the counter was created.
    pub fn total(&self) -> u64 {
        self.total
    }
}

/// The forwarder's side of a transport.
pub trait Transport {
    /// Who sent a request, so the response goes back there.
    type Peer: Copy + fmt::Debug;

    /// Short name for logs and errors.
    fn name(&self) -> &'static str;

    /// Receives one datagram into `buf` without blocking: `Ok(None)` when none waits.
    /// A datagram longer than `buf` is reported with its full length (> `buf.len()`),
    /// its first `buf.len()` bytes in `buf`, so it can be answered as oversized.
    fn try_recv(&mut self, buf: &mut [u8]) -> Result<Option<(usize, Self::Peer)>>;

    /// Whether requests from `peer` may be answered (allowlist).
    fn is_allowed(&self, peer: &Self::Peer) -> bool;

    /// Sends one response to `peer`.
    fn send(&mut self, peer: Self::Peer, bytes: &[u8]) -> Result<()>;

    /// What this transport dropped before `try_recv` could return it, since it started.
    /// Read between polls (status lines, the end of a run), never per message; it may make
    /// a system call.
    fn drops(&self) -> TransportDrops {
        TransportDrops::default()
    }

    /// When the datagram last returned by `try_recv` reached this host, in ns of
    /// `CLOCK_REALTIME` ([`realtime_ns`]): the kernel's receive timestamp (udp), a NIC's
    /// CQE timestamp (softnic). `None` where the transport cannot tell (inproc: its ring
    /// is the only queue, and a full one pushes back on the sender); no queue deadline
    /// applies then.
    fn last_arrival_ns(&self) -> Option<u64> {
        None
    }
}

/// The QPU controller's side of a transport (the emulator uses it).
pub trait Client {
    /// Sends one request. `Ok(false)` when the transport cannot take it now
    /// (full ring, full socket buffer): the caller decides whether to retry.
    fn send(&mut self, bytes: &[u8]) -> Result<bool>;
    /// Receives one response without blocking.
    fn try_recv(&mut self, buf: &mut [u8]) -> Result<Option<usize>>;
    /// Where the requests go, for messages and CSV rows.
    fn describe(&self) -> String;
    /// Requests sent that the server has not taken yet, where the transport can tell
    /// (inproc); `None` where it cannot (a socket).
    fn unread(&self) -> Option<usize> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_drop_counter_follows_growth_across_the_wrap_and_ignores_old_values() {
        let mut c = DropCounter::default();
        c.observe(5);
        c.observe(3); // older, seen late
        assert_eq!(c.total(), 5);
        for raw in [1 << 30, 1 << 31, 3 << 30, u32::MAX] {
            c.observe(raw);
        }
        assert_eq!(c.total(), u64::from(u32::MAX));
        c.observe(2); // wrapped: 3 more
        assert_eq!(c.total(), u64::from(u32::MAX) + 3);
        c.observe(u32::MAX - 1); // before the wrap, seen late
        assert_eq!(c.total(), u64::from(u32::MAX) + 3);
    }
}
