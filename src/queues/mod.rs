//! NIC queue sets in shared memory: the mlx5 send queue, receive queue, completion queues,
//! doorbell records and UAR page of one QP, laid out in a [`crate::shm::SharedRegion`],
//! and the host-side sequences that use them.
//!
//! This layer is neutral: the soft NIC ([`crate::softnic`]) executes these queues as a
//! ConnectX would, the verbs path ([`crate::rdma`]) describes a real ConnectX's queues in
//! the same terms, and the device sides (the GPU kernels in `device/`, the CPU stand-in)
//! produce and consume on them.
//!
//! - [`layout`]: where everything sits ([`NicLayout`]) and the settings that size it.
//! - [`host`]: a host producer on the send queue ([`SendQueue`], every doorbell mode), a
//!   CQ consumer ([`CqConsumer`]), and the tagged response ring of `cpu-assisted`
//!   ([`RespProducer`], [`RespConsumer`]).
//! - [`posting`]: a send queue handed to a device side that posts its own responses.
//! - [`direct`]: the receive protocol of the `gpu-direct` data path (poisoned chunks,
//!   receive credits, request checks), shared by the GPU kernel's host side, the CPU
//!   stand-in and the soft NIC.
//! - [`links`]: several queue sets in one region, one per QPU link, with the device side's
//!   counters beside them.
#![forbid(unsafe_code)]

pub mod direct;
pub mod host;
pub mod layout;
pub mod links;
pub mod posting;

pub use host::{CqConsumer, RespConsumer, RespProducer, SendCounters, SendQueue};
pub use layout::{ErrorPolicy, NicLayout, SoftNicConfig};
pub use posting::{DevicePostCounters, DevicePosting};
