//! The CUDA side of `gpu-direct` on a ConnectX, on a real GPU: host memory another library
//! allocated mapped for the GPU (`cuMemHostRegister`, page spans merged), device memory a NIC
//! may write (aligned, exported as a dma-buf where the driver can), and the device attributes
//! `qfwd doctor` reports. Skips with a notice where there is no GPU; on a GPU host:
//! `cargo test --release --test gpu_nic_memory -- --nocapture`.
#![forbid(unsafe_code)]

#[path = "gpu_common/mod.rs"]
mod gpu_common;

use std::sync::Arc;

use qfwd::gpu::memory::GPU_PAGE;
use qfwd::gpu::{nic_memory_support, GpuContext, HostRegistrations, NicWritableDeviceMemory};
use qfwd::shm::SharedRegion;

#[test]
fn nic_memory_maps_and_exports_on_a_real_gpu() {
    let Some(_gpu) = gpu_common::gpu_or_skip("nic_memory_maps_and_exports_on_a_real_gpu") else {
        return;
    };
    let index = gpu_common::gpu_index();
    let support = nic_memory_support(index).unwrap();
    println!("GPU {index}: {support:?}");
    let ctx = GpuContext::open(index).unwrap();

    // Two regions of host memory the GPU did not allocate, mapped and looked up.
    let a = SharedRegion::heap(3 * 4096).unwrap();
    let b = SharedRegion::heap(4096).unwrap();
    let ra = HostRegistrations::map(&ctx, Arc::new(a.clone())).unwrap();
    let rb = HostRegistrations::map(&ctx, Arc::new(b.clone())).unwrap();
    assert_eq!((ra.spans(), rb.spans()), (1, 1));
    let da = ra.device_addr(a.host_addr(100), 8, "a").unwrap();
    let db = rb.device_addr(b.host_addr(0), 4096, "b").unwrap();
    assert_eq!(ra.device_addr(a.host_addr(0), 8, "a").unwrap() + 100, da);
    assert_ne!(da, db);
    assert!(ra.device_addr(a.host_addr(3 * 4096 - 4), 8, "a").is_err());
    assert!(ra.device_addr(b.host_addr(0), 8, "b").is_err());
    if support.host_pointer_for_registered {
        assert_eq!(da, a.host_addr(100));
    }
    // A page registered twice is refused, with the page named.
    let again = HostRegistrations::map(&ctx, Arc::new(a.clone()));
    let e = again.err().expect("a page registered twice");
    println!("registering again: {e}");
    drop(ra);
    // Unregistered on drop: it can be registered again.
    HostRegistrations::map(&ctx, Arc::new(a.clone())).unwrap();

    // Device memory for receive buffers.
    let m = NicWritableDeviceMemory::new(&ctx, 100_000).unwrap();
    assert_eq!(m.device_ptr() % GPU_PAGE as u64, 0);
    assert_eq!(m.len(), 2 * GPU_PAGE);
    m.fill(0xff).unwrap();
    match m.export_dma_buf() {
        Ok(fd) => {
            use std::os::fd::AsRawFd;
            println!("dma-buf fd {} for {} bytes", fd.as_raw_fd(), m.len());
            assert!(fd.as_raw_fd() >= 0);
        }
        Err(e) => {
            println!("no dma-buf: {e}");
            assert!(
                !support.dma_buf,
                "DMA_BUF_SUPPORTED but the export failed: {e}"
            );
        }
    }
}
