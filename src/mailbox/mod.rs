//! The host <-> device mailbox: request and response rings of fixed-size slots in one
//! shared memory region, and the slot protocol both sides follow (docs/architecture.md).
//!
//! - [`layout`]: where everything sits, the sequence tags, the constants the kernel gets
//!   through [`crate::abi`].
//! - The shared memory is a [`crate::shm::SharedRegion`] (its 16-byte chunk accesses are
//!   what the protocol is made of): a heap region for the CPU double, mapped pinned memory
//!   from [`crate::gpu`] for the kernels.
//! - [`protocol`]: writing requests, reading responses (host side) and the same the other
//!   way round (device side), stop sentinel, stall release.
//! - [`MailboxBackend`]: the host side as a [`crate::backend::Backend`], generic over the
//!   device side ([`MailboxDevice`]): the GPU persistent kernel or the [`CpuDouble`].
//! - [`streams`]: the persistent stream kernel's two submission buffers (host and device
//!   sides).
//! - [`CpuDouble`]: host threads that follow the kernel's protocol exactly, so CI tests
//!   the protocol without a GPU.
//!
//! No `unsafe` here: the one home of the shared-memory accesses is [`crate::shm`].

#![forbid(unsafe_code)]

pub mod backend;
pub mod double;
pub mod layout;
pub mod protocol;
pub(crate) mod ring;
pub mod streams;

use std::fmt;
use std::str::FromStr;

pub use backend::{MailboxBackend, MailboxDevice, PollerCounters};
pub use double::CpuDouble;
pub use layout::Layout;
pub use protocol::ReplyTo;

/// How the consumer of a request learns that it is there (`rx_completion`,
/// docs/architecture.md).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Default, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum RxCompletion {
    /// The payload is written first, then a separate flag word; the device polls the flag,
    /// then reads the payload (two PCIe round trips).
    Buffer,
    /// Every 16-byte chunk carries the slot's sequence tag: one read returns both "is it
    /// there" and the payload.
    #[default]
    Inline,
}

impl RxCompletion {
    pub const ALL: [RxCompletion; 2] = [RxCompletion::Buffer, RxCompletion::Inline];

    pub fn as_str(&self) -> &'static str {
        match self {
            RxCompletion::Buffer => "buffer",
            RxCompletion::Inline => "inline",
        }
    }
}

impl fmt::Display for RxCompletion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for RxCompletion {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        RxCompletion::ALL
            .into_iter()
            .find(|m| m.as_str() == s)
            .ok_or_else(|| format!("unknown rx_completion {s:?}; expected buffer or inline"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rx_completion_names_round_trip() {
        for m in RxCompletion::ALL {
            assert_eq!(m.as_str().parse::<RxCompletion>(), Ok(m));
        }
        assert!("flag"
            .parse::<RxCompletion>()
            .unwrap_err()
            .contains("inline"));
        assert_eq!(RxCompletion::default(), RxCompletion::Inline);
    }
}
