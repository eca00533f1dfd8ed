//! What the GPU test binaries share: the device they run on and a lock that keeps their
//! tests off the GPU one at a time, skipping with a notice where there is no GPU.

use std::sync::{Mutex, MutexGuard};

use qfwd::gpu;

static GPU_LOCK: Mutex<()> = Mutex::new(());

/// The CUDA device the tests use: `QFWD_GPU`, default 0.
pub fn gpu_index() -> usize {
    std::env::var("QFWD_GPU")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// The lock, or `None` (after a notice) where there is no GPU. A driver that is present
/// but broken fails the test.
pub fn gpu_or_skip(test: &str) -> Option<MutexGuard<'static, ()>> {
    let guard = GPU_LOCK.lock().unwrap_or_else(|p| p.into_inner());
    match gpu::probe() {
        Ok(Some(gpus)) => {
            eprintln!("{test}: {}", gpus[gpu_index().min(gpus.len() - 1)]);
            Some(guard)
        }
        Ok(None) => {
            eprintln!(
                "SKIP {test}: no GPU ({})",
                gpu::unavailable_reason().unwrap_or_default()
            );
            None
        }
        Err(e) => panic!("{test}: the GPU driver is present but broken: {e}"),
    }
}
