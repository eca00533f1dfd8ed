//! The GPU runtime: the CUDA driver and NVRTC through cudarc, found at run time.
//!
//! Three layers (STYLE.md): cudarc's `sys` (raw, dynamically loaded) and `result`
//! (`Result`-returning calls) below; here, safe RAII types: [`GpuContext`] (a device's
//! primary context), [`MappedHostBuffer`] (pinned host memory the GPU addresses),
//! [`DeviceBuffer`], [`Module`]/[`Stream`]/[`Event`]/[`GraphExec`], [`PersistentKernel`],
//! and the two baseline backends in [`LaunchBackend`].
//!
//! # Quick start
//!
//! ```no_run
//! use qfwd::backend::Backend;
//! use qfwd::gpu::{self, GpuOptions};
//! # fn main() -> qfwd::Result<()> {
//! match gpu::probe()? {
//!     None => eprintln!("no GPU: using the cpu topology"),
//!     Some(gpus) => {
//!         println!("{}", gpus[0]);
//!         let mut backend = gpu::persistent_backend(&GpuOptions::default())?;
//!         backend.submit(1, &qfwd::handler::Handler::Parity, &[0b1011]).unwrap();
//!         while backend.poll(|c| assert_eq!(c.result, &[1])) == 0 {}
//!         backend.shutdown(std::time::Duration::from_secs(1))?;
//!     }
//! }
//! # Ok(()) }
//! ```
//!
//! # Runtime dependencies
//!
//! `libcuda.so` (the NVIDIA driver) and `libnvrtc.so*` (a CUDA toolkit, or the PyPI wheel
//! `nvidia-cuda-nvrtc` on `LD_LIBRARY_PATH`), both opened at run time: without them
//! [`probe`] says `None` and constructors return [`crate::Error::GpuUnavailable`] /
//! [`crate::Error::NvrtcUnavailable`].
//!
//! # Threads and cleanup
//!
//! Backends are `Send` (move them to the forwarding thread); each binds its context
//! before driver calls. A persistent kernel is stopped with a sentinel and waited for
//! with a deadline; one that does not stop is reported (`KernelDidNotStop`) and its memory
//! leaked rather than freed under it. Freeing memory may synchronize the whole context:
//! stop persistent kernels before dropping other GPU objects of the same device.

pub mod context;
pub mod decoder;
pub mod direct;
pub mod launch;
pub mod memory;
pub mod module;
pub mod nvrtc;
pub mod persistent;
pub mod stream_server;
pub mod window;

use std::fmt;

pub use context::GpuContext;
pub use launch::{LaunchBackend, LaunchMode};
pub use memory::{
    mapped_nic_region, nic_memory_support, DeviceBuffer, HostMemoryKind, HostRange,
    HostRegistrations, MappedHostBuffer, NicMemorySupport, NicWritableDeviceMemory,
};
pub use module::{Event, Function, GraphExec, Kernel, Module, Stream};
pub use persistent::{PersistentKernel, PreparedKernel};

use cudarc::driver::{result, sys};

use crate::mailbox::{Layout, MailboxBackend, RxCompletion};
use crate::{Error, Result};

/// How the GPU backends are built.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(default, rename_all = "kebab-case")]
pub struct GpuOptions {
    /// CUDA device index.
    pub device: usize,
    /// Request (and response) slots: requests in flight at once.
    pub slots: usize,
    /// Bytes per request slot (rounded up to 64); see [`Layout::req_slot_bytes_for`].
    pub slot_bytes: usize,
    /// Bytes per response slot (rounded up to 64): results up to 12/16 of it, less 8.
    pub result_slot_bytes: usize,
    /// How the kernel learns of a request (gpu-persistent only).
    pub rx_completion: RxCompletion,
    /// Poller warps of the persistent kernel, 1 ..= 32.
    pub pollers: u32,
    /// Warps that poll each slot (out of phase, first one serves), dividing `pollers`: the
    /// kernel runs `pollers / pollers_per_slot` groups, group g serving every G-th request,
    /// so G requests are served in parallel. More per slot: lower latency; more groups:
    /// more throughput (one group serves about one request per PCIe read round trip).
    pub pollers_per_slot: u32,
    /// Warps per thread block (0: all pollers in one block; one warp per block when the
    /// kernel rings NIC doorbells itself). The persistent kernel's register bound
    /// (device/forward.cu) allows 8 warps a block: more pollers go to more blocks.
    pub warps_per_block: u32,
    /// Chunks (16 B) a poll reads at once, 1 ..= 32: requests up to `12 * poll_chunks - 8`
    /// bytes (inline) arrive in one read; larger ones cost a second read.
    pub poll_chunks: u32,
    /// `uf` only: requests of at most this many defects are answered from a table of the
    /// CPU uf's outputs precomputed at start-up (one load; [`crate::decode::uf_table`]).
    /// `None` (default): the largest K within a start-up budget; `Some(0)`: no table.
    pub uf_table_max_defects: Option<u32>,
    /// `uf` with the table only: the split path (independent groups of at most K defects,
    /// [`crate::decode::uf_split`]) is tried for at most this many defects, 0 ..= 32.
    /// `None` (default): where it answers at least half the shots drawn from the model
    /// ([`crate::decode::uf_split::split_limit`]); `Some(0)`: never.
    pub uf_split_max_defects: Option<u32>,
}

impl Default for GpuOptions {
    /// 64 slots of 1 KiB arguments, inline, 8 pollers in 4 groups of 2. Measured on the
    /// H200 (32 B, ping-pong): 8/2 gave p50 2.88 µs, p99 3.46 µs; one warp 3.38/3.60; more
    /// warps per slot (4-16) no better at p50 and worse at p99; 8 groups of 1 p50 2.78 but
    /// p99 4.04. One group serves about one request per PCIe round trip (~0.45 M/s); 4
    /// groups sustained 1 M/s open loop (p99 8.6 µs) and 1.8 M/s closed loop.
    fn default() -> GpuOptions {
        GpuOptions {
            device: 0,
            slots: 64,
            slot_bytes: Layout::req_slot_bytes_for(1024, RxCompletion::Inline),
            result_slot_bytes: 64,
            rx_completion: RxCompletion::Inline,
            pollers: 8,
            pollers_per_slot: 2,
            warps_per_block: 0,
            poll_chunks: 4,
            uf_table_max_defects: None,
            uf_split_max_defects: None,
        }
    }
}

impl GpuOptions {
    /// Checks the ranges the kernels rely on.
    pub fn validate(&self) -> Result<()> {
        let bad = |key: &'static str, detail: String| Err(Error::InvalidSetting { key, detail });
        if !(1..=32).contains(&self.pollers) {
            return bad("pollers", format!("{}: expected 1 ..= 32", self.pollers));
        }
        if self.pollers_per_slot == 0 || self.pollers % self.pollers_per_slot != 0 {
            return bad(
                "pollers_per_slot",
                format!(
                    "{}: must divide pollers ({})",
                    self.pollers_per_slot, self.pollers
                ),
            );
        }
        if self.warps_per_block > 32 {
            return bad(
                "warps_per_block",
                format!("{}: expected 0 ..= 32", self.warps_per_block),
            );
        }
        if !(1..=32).contains(&self.poll_chunks) {
            return bad(
                "poll_chunks",
                format!("{}: expected 1 ..= 32", self.poll_chunks),
            );
        }
        let most = crate::decode::uf_split::MAX_SPLIT_DEFECTS;
        if let Some(m) = self.uf_split_max_defects.filter(|&m| m as usize > most) {
            return bad(
                "uf_split_max_defects",
                format!("{m}: expected 0 ..= {most} (the split path runs one defect per lane)"),
            );
        }
        self.layout().map(|_| ())
    }

    /// The mailbox layout these options describe.
    pub fn layout(&self) -> Result<Layout> {
        Layout::new(
            self.slots,
            self.slot_bytes,
            self.result_slot_bytes,
            self.rx_completion,
        )
    }
}

/// The `gpu-persistent` backend: a [`MailboxBackend`] over a running [`PersistentKernel`].
pub fn persistent_backend(options: &GpuOptions) -> Result<MailboxBackend<PersistentKernel>> {
    Ok(MailboxBackend::new(PersistentKernel::start(options)?))
}

/// The `gpu-persistent` backend whose kernel sends every response through the soft NIC
/// `nic` itself (GPU-initiated `regular` / `blueflame` doorbells; see
/// [`PersistentKernel::start_with_nic`]). `nic` comes from
/// [`crate::softnic::SoftNicTransport::device_posting`] of a transport whose region was
/// allocated with [`mapped_nic_region`].
pub fn persistent_backend_with_nic(
    options: &GpuOptions,
    nic: &crate::queues::DevicePosting,
) -> Result<MailboxBackend<PersistentKernel>> {
    Ok(MailboxBackend::new(PersistentKernel::start_with_nic(
        options,
        Some(nic),
    )?))
}

/// The `gpu-persistent` backend serving `decoders` too (QEC decoder handlers, device codes
/// 2 and 3; at most one model per decoder kind, see [`decoder`]): their models are uploaded
/// to the GPU once, here. `options.poll_chunks` is raised, if needed, so a decoder's request
/// arrives in one PCIe read ([`decoder::poll_chunks_for`]). Pass
/// [`decoder::registry_decoders`] of the registry the backend serves.
pub fn persistent_backend_with(
    options: &GpuOptions,
    decoders: &[std::sync::Arc<crate::decode::Decoder>],
) -> Result<MailboxBackend<PersistentKernel>> {
    let o = options_for_decoders(options, decoders);
    Ok(MailboxBackend::new(PersistentKernel::start_with(
        &o,
        None,
        decoders,
        decoder::ScratchPlacement::Auto,
    )?))
}

/// The `gpu-launch` backend serving `decoders` too (see [`persistent_backend_with`]).
pub fn launch_backend_with(
    options: &GpuOptions,
    decoders: &[std::sync::Arc<crate::decode::Decoder>],
) -> Result<LaunchBackend> {
    let o = options_for_decoders(options, decoders);
    LaunchBackend::with_decoders(
        &o,
        LaunchMode::Kernel,
        decoders,
        decoder::ScratchPlacement::Auto,
    )
}

/// The `gpu-graph` backend serving `decoders` too (see [`persistent_backend_with`]).
pub fn graph_backend_with(
    options: &GpuOptions,
    decoders: &[std::sync::Arc<crate::decode::Decoder>],
) -> Result<LaunchBackend> {
    let o = options_for_decoders(options, decoders);
    LaunchBackend::with_decoders(
        &o,
        LaunchMode::Graph,
        decoders,
        decoder::ScratchPlacement::Auto,
    )
}

/// `options` with `poll_chunks` raised, if needed, so a request of any of `decoders`
/// arrives in one PCIe read.
pub fn options_for_decoders(
    options: &GpuOptions,
    decoders: &[std::sync::Arc<crate::decode::Decoder>],
) -> GpuOptions {
    let mut o = options.clone();
    o.poll_chunks = o.poll_chunks.max(decoder::poll_chunks_for(decoders));
    o
}

/// The `gpu-launch` backend (one kernel launch per request).
pub fn launch_backend(options: &GpuOptions) -> Result<LaunchBackend> {
    LaunchBackend::new(options, LaunchMode::Kernel)
}

/// The `gpu-graph` backend (one CUDA graph replay per request).
pub fn graph_backend(options: &GpuOptions) -> Result<LaunchBackend> {
    LaunchBackend::new(options, LaunchMode::Graph)
}

/// A GPU as CSV rows and logs name it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GpuInfo {
    pub index: usize,
    pub name: String,
    pub compute_capability: (u32, u32),
    /// `domain:bus:device.function`, as `nvidia-smi` prints it.
    pub pci_bus_id: String,
    pub total_memory_bytes: usize,
    pub multiprocessors: u32,
    pub can_map_host_memory: bool,
    /// The driver's CUDA version, e.g. `(13, 0)`.
    pub driver_cuda_version: (u32, u32),
}

impl GpuInfo {
    /// `sm_XX`: the architecture NVRTC compiles for.
    pub fn arch(&self) -> String {
        format!(
            "sm_{}{}",
            self.compute_capability.0, self.compute_capability.1
        )
    }

    /// One CSV-safe field: `NVIDIA H200 sm_90 0000:19:00.0` (no commas).
    pub fn csv_label(&self) -> String {
        format!("{} {} {}", self.name, self.arch(), self.pci_bus_id).replace(',', ";")
    }
}

impl fmt::Display for GpuInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "GPU {}: {} ({}, {} SMs, {} MiB, PCI {}, driver CUDA {}.{})",
            self.index,
            self.name,
            self.arch(),
            self.multiprocessors,
            self.total_memory_bytes >> 20,
            self.pci_bus_id,
            self.driver_cuda_version.0,
            self.driver_cuda_version.1
        )
    }
}

/// The GPUs of this host: `Ok(None)` when there is none (no driver library, or the driver
/// sees no device), an error when a driver is there but does not work. Never panics.
pub fn probe() -> Result<Option<Vec<GpuInfo>>> {
    if !context::driver_present()? {
        return Ok(None);
    }
    let count = context::device_count()?;
    if count == 0 {
        return Ok(None);
    }
    (0..count)
        .map(describe)
        .collect::<Result<Vec<_>>>()
        .map(Some)
}

/// Why [`probe`] finds no GPU, for a one-line notice (`None` when there is one).
pub fn unavailable_reason() -> Option<String> {
    match probe() {
        Ok(Some(_)) => None,
        Ok(None) => Some(
            context::driver()
                .err()
                .map(|e| e.to_string())
                .unwrap_or_else(|| "no CUDA device".to_string()),
        ),
        Err(e) => Some(e.to_string()),
    }
}

/// Describes GPU `index` (no context needed).
pub fn describe(index: usize) -> Result<GpuInfo> {
    let device = context::device_handle(index)?;
    let attr = |a| context::attribute(index, device, a);
    use sys::CUdevice_attribute as A;
    let name = result::device::get_name(device).map_err(|source| Error::GpuDriver {
        device: index,
        op: "cuDeviceGetName",
        source,
    })?;
    // SAFETY: `device` came from cuDeviceGet.
    let total =
        unsafe { result::device::total_mem(device) }.map_err(|source| Error::GpuDriver {
            device: index,
            op: "cuDeviceTotalMem",
            source,
        })?;
    let mut version = 0i32;
    // SAFETY: a valid out-pointer.
    unsafe { sys::cuDriverGetVersion(&mut version) }
        .result()
        .map_err(|source| Error::GpuDriver {
            device: index,
            op: "cuDriverGetVersion",
            source,
        })?;
    Ok(GpuInfo {
        index,
        name,
        compute_capability: (
            attr(A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?.max(0) as u32,
            attr(A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?.max(0) as u32,
        ),
        pci_bus_id: context::pci_bus_id(index, device)?,
        total_memory_bytes: total,
        multiprocessors: attr(A::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?.max(0) as u32,
        can_map_host_memory: attr(A::CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY)? != 0,
        driver_cuda_version: (
            version.max(0) as u32 / 1000,
            (version.max(0) as u32 % 1000) / 10,
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_options_are_valid_and_hold_one_kib() {
        let o = GpuOptions::default();
        o.validate().unwrap();
        assert!(o.layout().unwrap().max_arg_len() >= 1024);
        let mut b = o.clone();
        b.rx_completion = RxCompletion::Buffer;
        assert!(b.layout().unwrap().max_arg_len() >= 1024);
    }

    #[test]
    fn options_out_of_range_are_refused() {
        for o in [
            GpuOptions {
                pollers: 0,
                ..GpuOptions::default()
            },
            GpuOptions {
                pollers: 33,
                ..GpuOptions::default()
            },
            GpuOptions {
                poll_chunks: 0,
                ..GpuOptions::default()
            },
            GpuOptions {
                warps_per_block: 64,
                ..GpuOptions::default()
            },
            GpuOptions {
                pollers: 8,
                pollers_per_slot: 3,
                ..GpuOptions::default()
            },
            GpuOptions {
                pollers_per_slot: 0,
                ..GpuOptions::default()
            },
            GpuOptions {
                slots: 0,
                ..GpuOptions::default()
            },
            GpuOptions {
                slot_bytes: 1 << 20,
                ..GpuOptions::default()
            },
            GpuOptions {
                uf_split_max_defects: Some(33),
                ..GpuOptions::default()
            },
        ] {
            assert!(o.validate().is_err(), "{o:?}");
        }
        // The split path's limit: 0 ..= 32 (0: never tried).
        for m in [0, 8, 32] {
            let o = GpuOptions {
                uf_split_max_defects: Some(m),
                ..GpuOptions::default()
            };
            o.validate().unwrap();
        }
    }

    #[test]
    fn options_parse_from_kebab_case_toml() {
        let o: GpuOptions = toml::from_str("rx-completion = \"buffer\"\npollers = 8\n").unwrap();
        assert_eq!(o.rx_completion, RxCompletion::Buffer);
        assert_eq!(o.pollers, 8);
        assert_eq!(o.slots, 64);
    }

    #[test]
    fn probe_never_panics() {
        // On a host without a GPU this is Ok(None); with one, a list.
        match probe() {
            Ok(None) => assert!(unavailable_reason().is_some()),
            Ok(Some(gpus)) => assert!(!gpus.is_empty()),
            Err(e) => assert!(!e.to_string().is_empty()),
        }
    }

    #[test]
    fn info_labels_are_csv_safe() {
        let info = GpuInfo {
            index: 0,
            name: "NVIDIA H200, SXM".into(),
            compute_capability: (9, 0),
            pci_bus_id: "00000000:19:00.0".into(),
            total_memory_bytes: 1 << 30,
            multiprocessors: 132,
            can_map_host_memory: true,
            driver_cuda_version: (13, 0),
        };
        assert_eq!(info.arch(), "sm_90");
        assert!(!info.csv_label().contains(','));
        assert!(info.to_string().contains("sm_90"));
    }
}
