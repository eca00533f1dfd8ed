//! The `cpu-assisted` doorbell of the `gpu-direct` data path: one host thread takes each
//! response the device side wrote into a link's tagged response ring and posts it on that
//! link's send queue (an inline SEND, rung with a BlueFlame doorbell as libmlx5 does for a
//! single small WQE). The fallback for hosts where the GPU cannot write the NIC's doorbell
//! page; the only CPU thread on the send path.
#![forbid(unsafe_code)]

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use crate::idle::IdleWait;
use crate::mlx5::Doorbell;
use crate::queues::host::{RespConsumer, SendQueue};
use crate::queues::layout::SoftNicConfig;
use crate::queues::links::LinkSet;
use crate::shm::SharedRegion;
use crate::worker::Worker;
use crate::Result;

/// What the proxy counted, all links together.
#[derive(Debug, Default)]
pub struct ProxyStats {
    /// Responses posted.
    pub posted: AtomicU64,
    /// Responses found torn or too long in a ring (lost).
    pub torn: AtomicU64,
    /// Responses the send queue refused (no room in time; lost).
    pub post_failures: AtomicU64,
}

/// A running proxy thread.
pub struct Proxy {
    worker: Worker,
    stats: Arc<ProxyStats>,
}

impl Proxy {
    /// Starts the proxy over every link of `set` in `region`.
    pub fn start(set: &LinkSet, region: &SharedRegion, config: &SoftNicConfig) -> Result<Proxy> {
        let mut links = Vec::new();
        for i in 0..set.links {
            let queues = set.link(region, i)?;
            links.push((
                RespConsumer::new(&queues, &set.layout),
                SendQueue::new(&queues, config, Doorbell::BlueFlame)?,
            ));
        }
        let stats = Arc::new(ProxyStats::default());
        let shared = Arc::clone(&stats);
        let (idle, wait) = (config.idle, config.bf_wait);
        let worker = Worker::spawn(
            "qfwd-direct-proxy",
            config.stop_timeout,
            config.proxy_core,
            move |stop| run(&stop, &mut links, &shared, IdleWait::new(idle), wait),
        )?;
        Ok(Proxy { worker, stats })
    }

    pub fn stats(&self) -> &Arc<ProxyStats> {
        &self.stats
    }

    /// Stops the thread (after it emptied the rings it saw) and returns its counts.
    pub fn stop(mut self) -> Result<Arc<ProxyStats>> {
        self.worker.stop()?;
        Ok(self.stats)
    }
}

fn run(
    stop: &AtomicBool,
    links: &mut [(RespConsumer, SendQueue)],
    stats: &ProxyStats,
    mut idle: IdleWait,
    wait: std::time::Duration,
) {
    let mut buf = vec![0u8; crate::wire::MAX_DATAGRAM + 1];
    loop {
        let mut worked = false;
        for (ring, sq) in links.iter_mut() {
            let torn = ring.torn;
            match ring.pop(&mut buf, wait) {
                Some(n) => {
                    worked = true;
                    let counter = match sq.post_send(&buf[..n]) {
                        Ok(()) => &stats.posted,
                        Err(_) => &stats.post_failures,
                    };
                    counter.fetch_add(1, Ordering::Relaxed);
                }
                None if ring.torn != torn => {
                    worked = true;
                    stats.torn.fetch_add(1, Ordering::Relaxed);
                }
                None => worked |= sq.reap() > 0,
            }
        }
        if worked {
            idle.worked();
        } else if stop.load(Ordering::Acquire) {
            break;
        } else {
            idle.idle();
        }
    }
}
