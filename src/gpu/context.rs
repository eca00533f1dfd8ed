//! The CUDA driver, found at run time, and a device's primary context.
//!
//! cudarc is built with `dynamic-loading`: `libcuda` is opened on first use, and a missing
//! library makes any driver call panic. `driver()` checks for the library first
//! (`is_culib_present`), so a host without a GPU gets an error or `None`, never a panic.

use std::ffi::{c_char, CStr};
use std::sync::{Arc, OnceLock};

use cudarc::driver::{result, sys, DriverError};

use crate::{Error, Result};

/// Why there is no driver to talk to, or `Ok` once `cuInit` succeeded (checked once).
fn driver_state() -> &'static std::result::Result<(), (bool, String)> {
    static STATE: OnceLock<std::result::Result<(), (bool, String)>> = OnceLock::new();
    STATE.get_or_init(|| {
        // SAFETY: only tries to dlopen the candidate library names, and closes them.
        if !unsafe { sys::is_culib_present() } {
            return Err((
                true,
                "libcuda.so not found (no NVIDIA driver on this host)".to_string(),
            ));
        }
        match result::init() {
            Ok(()) => Ok(()),
            Err(e) if e.0 == sys::CUresult::CUDA_ERROR_NO_DEVICE => {
                Err((true, "the NVIDIA driver reports no CUDA device".to_string()))
            }
            Err(e) => Err((false, format!("cuInit failed: {e}"))),
        }
    })
}

/// Ok when the driver is loaded and initialized; `GpuUnavailable` saying why not.
pub(crate) fn driver() -> Result<()> {
    driver_state()
        .clone()
        .map_err(|(_, detail)| Error::GpuUnavailable { detail })
}

/// `Ok(false)` when there is simply no GPU here (no driver library, no device); an error
/// when a driver is there but broken.
pub(crate) fn driver_present() -> Result<bool> {
    match driver_state() {
        Ok(()) => Ok(true),
        Err((true, _)) => Ok(false),
        Err((false, detail)) => Err(Error::GpuUnavailable {
            detail: detail.clone(),
        }),
    }
}

pub(crate) fn device_count() -> Result<usize> {
    driver()?;
    let n = result::device::get_count().map_err(|source| Error::GpuDriver {
        device: 0,
        op: "cuDeviceGetCount",
        source,
    })?;
    Ok(n.max(0) as usize)
}

/// A device handle checked against the device count.
pub(crate) fn device_handle(index: usize) -> Result<sys::CUdevice> {
    let count = device_count()?;
    if index >= count {
        return Err(Error::GpuUnavailable {
            detail: format!("GPU {index} requested but this host has {count}"),
        });
    }
    result::device::get(index as i32).map_err(|source| Error::GpuDriver {
        device: index,
        op: "cuDeviceGet",
        source,
    })
}

pub(crate) fn attribute(
    index: usize,
    device: sys::CUdevice,
    attr: sys::CUdevice_attribute,
) -> Result<i32> {
    // SAFETY: `device` came from cuDeviceGet (device_handle).
    unsafe { result::device::get_attribute(device, attr) }.map_err(|source| Error::GpuDriver {
        device: index,
        op: "cuDeviceGetAttribute",
        source,
    })
}

pub(crate) fn pci_bus_id(index: usize, device: sys::CUdevice) -> Result<String> {
    let mut buf = [0 as c_char; 64];
    // SAFETY: the buffer is writable for its length, which is passed; the driver
    // NUL-terminates what it writes.
    unsafe { sys::cuDeviceGetPCIBusId(buf.as_mut_ptr(), buf.len() as i32, device) }
        .result()
        .map_err(|source| Error::GpuDriver {
            device: index,
            op: "cuDeviceGetPCIBusId",
            source,
        })?;
    // SAFETY: NUL-terminated by the driver within the buffer (zeroed beforehand too).
    let id = unsafe { CStr::from_ptr(buf.as_ptr()) };
    Ok(id.to_string_lossy().into_owned())
}

/// A device's primary context, retained while this lives. Shared (`Arc`) by everything
/// allocated or loaded in it, so it outlives them.
pub struct GpuContext {
    index: usize,
    device: sys::CUdevice,
    ctx: sys::CUcontext,
    compute_capability: (u32, u32),
}

// SAFETY: a CUDA context may be made current on, and used from, any thread; the driver
// API is thread-safe. GpuContext has no interior state besides the handles.
unsafe impl Send for GpuContext {}
// SAFETY: as above.
unsafe impl Sync for GpuContext {}

impl GpuContext {
    /// Retains GPU `index`'s primary context and makes it current on this thread.
    pub fn open(index: usize) -> Result<Arc<GpuContext>> {
        let device = device_handle(index)?;
        let major = attribute(
            index,
            device,
            sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
        )?;
        let minor = attribute(
            index,
            device,
            sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
        )?;
        // SAFETY: `device` came from cuDeviceGet; released in Drop.
        let ctx =
            unsafe { result::primary_ctx::retain(device) }.map_err(|source| Error::GpuDriver {
                device: index,
                op: "cuDevicePrimaryCtxRetain",
                source,
            })?;
        let context = GpuContext {
            index,
            device,
            ctx,
            compute_capability: (major.max(0) as u32, minor.max(0) as u32),
        };
        context.bind()?;
        Ok(Arc::new(context))
    }

    /// Makes this context current on the calling thread (a thread-local store in the
    /// driver: cheap, but not free; done before each group of driver calls).
    #[inline]
    pub fn bind(&self) -> Result<()> {
        // SAFETY: `ctx` is a retained primary context, alive while self is.
        unsafe { result::ctx::set_current(self.ctx) }
            .map_err(|source| self.error("cuCtxSetCurrent", source))
    }

    pub fn index(&self) -> usize {
        self.index
    }

    pub fn compute_capability(&self) -> (u32, u32) {
        self.compute_capability
    }

    /// The NVRTC architecture of this device, e.g. `sm_90`.
    pub fn arch(&self) -> String {
        format!(
            "sm_{}{}",
            self.compute_capability.0, self.compute_capability.1
        )
    }

    pub fn attribute(&self, attr: sys::CUdevice_attribute) -> Result<i32> {
        attribute(self.index, self.device, attr)
    }

    pub(crate) fn error(&self, op: &'static str, source: DriverError) -> Error {
        Error::GpuDriver {
            device: self.index,
            op,
            source,
        }
    }
}

impl Drop for GpuContext {
    fn drop(&mut self) {
        // SAFETY: retained in `open`, released once. Errors cannot be reported from Drop
        // and leave nothing to clean up.
        let _ = unsafe { result::primary_ctx::release(self.device) };
    }
}

impl std::fmt::Debug for GpuContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GpuContext")
            .field("index", &self.index)
            .field("arch", &self.arch())
            .finish()
    }
}
