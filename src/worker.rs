//! A named thread with a stop flag, stopped with a deadline.
#![forbid(unsafe_code)]

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::{Error, Result};

/// A thread that runs until its stop flag is set. Dropping it stops it; a thread that does
/// not stop within the deadline is left detached (everything it touches is reference
/// counted, so nothing it uses is freed under it) and reported by [`Worker::stop`].
pub(crate) struct Worker {
    name: &'static str,
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<()>>,
    timeout: Duration,
}

impl Worker {
    /// Starts `body` on a thread named `name`, pinned to `core` when given (a core that
    /// cannot be had is reported once on stderr and the thread runs unpinned).
    pub(crate) fn spawn(
        name: &'static str,
        timeout: Duration,
        core: Option<usize>,
        body: impl FnOnce(Arc<AtomicBool>) + Send + 'static,
    ) -> Result<Worker> {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let handle = std::thread::Builder::new()
            .name(name.to_string())
            .spawn(move || {
                if let Some(c) = core {
                    if !core_affinity::set_for_current(core_affinity::CoreId { id: c }) {
                        eprintln!("qfwd: {name}: cannot pin to core {c}; running unpinned");
                    }
                }
                body(flag)
            })
            .map_err(|source| Error::Io {
                what: format!("cannot start thread {name}"),
                source,
            })?;
        Ok(Worker {
            name,
            stop,
            handle: Some(handle),
            timeout,
        })
    }

    pub(crate) fn is_running(&self) -> bool {
        self.handle.as_ref().is_some_and(|h| !h.is_finished())
    }

    /// Sets the stop flag and waits (at most the timeout) for the thread to end.
    pub(crate) fn stop(&mut self) -> Result<()> {
        self.stop.store(true, Ordering::Release);
        let Some(handle) = self.handle.take() else {
            return Ok(());
        };
        let started = Instant::now();
        let mut polls = 0u64;
        while !handle.is_finished() {
            if started.elapsed() >= self.timeout {
                return Err(Error::SoftNicDidNotStop {
                    thread: self.name,
                    waited_ms: started.elapsed().as_millis() as u64,
                    polls,
                });
            }
            polls += 1;
            std::thread::sleep(Duration::from_micros(200));
        }
        handle.join().map_err(|_| Error::ThreadPanicked)
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        let _ = self.stop();
    }
}
