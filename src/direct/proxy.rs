//! The `cpu-assisted` doorbell of the `gpu-direct` data path: one host thread takes each
//! response the device side wrote into a link's tagged response ring and posts it on that
//! link's send queue (an inline SEND, rung with a BlueFlame doorbell as libmlx5 does for a
//! single small WQE; on a ConnectX, an inline `ibv_post_send`: [`AnswerPoster`]). The
//! fallback for hosts where the GPU cannot write the NIC's doorbell page; the only CPU
//! thread on the send path.
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

/// Where the proxy posts a link's answers: the soft NIC's send queue ([`SendQueue`]), or a
/// ConnectX's through verbs.
pub trait AnswerPoster: Send + 'static {
    /// Posts one answer; false when it could not (the answer is lost, and counted).
    fn post(&mut self, bytes: &[u8]) -> bool;
    /// Reaps send completions; returns how many.
    fn reap(&mut self) -> usize;
}

impl AnswerPoster for SendQueue {
    fn post(&mut self, bytes: &[u8]) -> bool {
        self.post_send(bytes).is_ok()
    }

    fn reap(&mut self) -> usize {
        SendQueue::reap(self)
    }
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
        Proxy::start_with(links, config)
    }

    /// Starts the proxy over the response rings of `links`, each posting through its
    /// poster.
    pub fn start_with<P: AnswerPoster>(
        mut links: Vec<(RespConsumer, P)>,
        config: &SoftNicConfig,
    ) -> Result<Proxy> {
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

fn run<P: AnswerPoster>(
    stop: &AtomicBool,
    links: &mut [(RespConsumer, P)],
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
                    let counter = if sq.post(&buf[..n]) {
                        &stats.posted
                    } else {
                        &stats.post_failures
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
