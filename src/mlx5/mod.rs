//! ConnectX (mlx5) data-path formats: work queue entries, completion queue entries and the
//! doorbell sequence, exactly as `infiniband/mlx5dv.h` lays them out (docs/architecture.md,
//! "mlx5").
//!
//! - [`layout`]: sizes and byte offsets of every field we touch (checked against the C
//!   header by `tests/mlx5_layout.rs`, which compiles a probe against `mlx5dv.h`).
//! - [`wqe`]: segment codecs and one typed builder per operation ([`wqe::opcode`]), in the
//!   spirit of io-uring's `opcode!`: raw layout never leaks to callers. The parser the soft
//!   NIC uses to execute WQEs lives beside it, so both directions share the constants.
//! - [`cqe`]: the 64-byte CQE, its parser and writer, and the owner-bit parity of a CQ.
//! - [`Doorbell`]: how a response is announced to the NIC (`cpu-assisted`, `regular`,
//!   `blueflame`).
//! - `dv` (feature `rdma`): our own small FFI for `mlx5dv_init_obj`, which `rdma-sys` does
//!   not bind.
//!
//! Everything here except `dv` is plain byte arithmetic, shared by the host poster, the
//! soft NIC, the real verbs path and (through the constants of [`crate::abi`]) the kernels.
#![cfg_attr(not(feature = "rdma"), forbid(unsafe_code))]

use std::fmt;
use std::str::FromStr;

pub mod cqe;
#[cfg(feature = "rdma")]
pub mod dv;
pub mod layout;
pub mod wqe;

pub use cqe::{CqCursor, Cqe, CqeOpcode, Syndrome};
pub use wqe::{opcode, CtrlSeg, DataSeg, ParsedWqe, RaddrSeg, Wqe, WqeError, WqeFault, WqeOp};

/// How the producer of a response tells the NIC to send it (`doorbell`,
/// docs/architecture.md).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Default, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum Doorbell {
    /// The response producer writes the response and a producer index to host memory; a
    /// CPU proxy thread builds the WQE and rings the NIC.
    CpuAssisted,
    /// The producer writes the WQE into the send queue, updates the doorbell record, then
    /// makes one 8-byte write of the control segment to the UAR doorbell register; the NIC
    /// reads the WQE from the send queue (a DMA read).
    #[default]
    Regular,
    /// As `regular`, but the whole WQE (payload inline) is copied into the BlueFlame
    /// register in 64-byte chunks, alternating its two halves: the NIC does not read the
    /// send queue.
    #[serde(rename = "blueflame")]
    BlueFlame,
}

impl Doorbell {
    pub const ALL: [Doorbell; 3] = [
        Doorbell::CpuAssisted,
        Doorbell::Regular,
        Doorbell::BlueFlame,
    ];

    /// The code the kernels use for this mode (`QFWD_DB_MODE_*` of `qfwd_abi.h`).
    pub fn device_code(&self) -> u32 {
        match self {
            Doorbell::CpuAssisted => crate::abi::DB_MODE_CPU_ASSISTED,
            Doorbell::Regular => crate::abi::DB_MODE_REGULAR,
            Doorbell::BlueFlame => crate::abi::DB_MODE_BLUEFLAME,
        }
    }

    pub fn as_str(&self) -> &'static str {
        match self {
            Doorbell::CpuAssisted => "cpu-assisted",
            Doorbell::Regular => "regular",
            Doorbell::BlueFlame => "blueflame",
        }
    }
}

impl fmt::Display for Doorbell {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Doorbell {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Doorbell::ALL
            .into_iter()
            .find(|d| d.as_str() == s)
            .ok_or_else(|| {
                format!("unknown doorbell {s:?}; expected cpu-assisted, regular or blueflame")
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doorbell_names_round_trip_through_str_and_serde() {
        for d in Doorbell::ALL {
            assert_eq!(d.as_str().parse::<Doorbell>(), Ok(d));
            assert_eq!(d.to_string(), d.as_str());
            #[derive(serde::Serialize, serde::Deserialize, PartialEq, Debug)]
            struct Row {
                doorbell: Doorbell,
            }
            let text = toml::to_string(&Row { doorbell: d }).unwrap();
            assert_eq!(text.trim(), format!("doorbell = \"{}\"", d.as_str()));
            assert_eq!(toml::from_str::<Row>(&text).unwrap(), Row { doorbell: d });
        }
        assert!("blue-flame"
            .parse::<Doorbell>()
            .unwrap_err()
            .contains("blueflame"));
    }
}
