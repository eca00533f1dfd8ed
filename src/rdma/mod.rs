//! RoCEv2 through ibverbs: the NVQLink data plane (`transport = rdma`, docs/architecture.md).
//!
//! - [`control`]: the UDP control plane (endpoint exchange, START/STOP) and its codec;
//!   built everywhere, unit-tested and fuzzed.
//! - [`sysfs`]: RDMA devices, ports and GIDs as the kernel lists them; built everywhere
//!   (`qfwd doctor` uses it without the feature).
//! - with the `rdma` feature: [`verbs`] (device, PD, MR, CQ, QP in RAII types over
//!   `rdma-sys`) and the transport: [`RdmaTransport`] (qfwd: requests as RDMA
//!   WRITE-with-immediate into a registered ring, immediate = slot; responses as SENDs,
//!   inline when they fit) and [`RdmaClient`] (the QPU side); [`direct`]: a ConnectX queue
//!   set whose queues a device side serves itself (the `gpu-direct` data path), reached
//!   through the same control plane by the same [`RdmaClient`].
//!
//! Runtime: libibverbs (and the provider, libmlx5 on ConnectX) are linked when the feature
//! is on. A host without an RDMA device gets [`crate::Error::NoRdmaDevice`], naming what
//! was found under `/sys/class/infiniband`.

pub mod control;
#[cfg(feature = "rdma")]
pub mod direct;
pub mod sysfs;
#[cfg(feature = "rdma")]
mod transport;
#[cfg(feature = "rdma")]
pub mod verbs;

#[cfg(feature = "rdma")]
pub use transport::{RdmaClient, RdmaConfig, RdmaCounters, RdmaListener, RdmaTransport};
