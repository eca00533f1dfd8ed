//! The soft NIC: an mlx5-faithful NIC model in host memory (`transport = softnic`,
//! docs/architecture.md), so the doorbell paths (host and GPU) can be built and tested
//! without a ConnectX.
//!
//! - [`SharedRegion`]: the memory (base + length, allocated by the caller: a page-aligned
//!   heap allocation for CPU tests, pinned GPU-mapped host memory on a GPU host). It holds
//!   the UAR page, doorbell records, SQ, RQ, CQs and rings at the offsets of
//!   [`NicLayout`].
//! - [`SoftNic`]: the NIC thread (honours doorbell records and UAR doorbell writes,
//!   executes BlueFlame copies, DMA-reads WQEs in regular mode, writes CQEs with owner
//!   parity, error CQEs with a syndrome for malformed WQEs), bridging to a wire toward the
//!   QPU side.
//! - [`SendQueue`], [`CqConsumer`], [`RespProducer`]/[`RespConsumer`]: the host side of
//!   the queues, the same sequences libmlx5 runs against hardware.
//! - [`SoftNicTransport`]: the forwarder's end, a [`crate::transport::Transport`], over a
//!   NIC whose QPU-facing wire is any transport ([`crate::serve::wiring`] builds the
//!   in-process and UDP ones).
//! - [`DevicePosting`]: the send queue handed to a device side that posts its own
//!   responses (GPU-initiated doorbells); the host then answers through the NIC's host
//!   path.
//!
//! Threads yield when idle and stop (bounded wait) when their owner is dropped. No `unsafe`
//! here: the memory accesses are [`crate::shm`]'s.

mod nic;
mod transport;

pub use crate::queues::host::{CqConsumer, RespConsumer, RespProducer, SendCounters, SendQueue};
pub use crate::queues::layout::{device_params, ErrorPolicy, NicLayout, SoftNicConfig};
pub use crate::queues::posting::{DevicePostCounters, DevicePosting};
pub use crate::shm::SharedRegion;
pub use nic::{NicCounters, NicEngine, NicStats, SoftNic};
pub use transport::{SoftNicTransport, TransportCounters};
