//! The `gpu-direct` data path: no CPU thread between the QPU's link and the decoder. Each
//! link's NIC writes requests into receive queues that the device side polls itself (the
//! GPU kernel of `device/direct.cu`, or the CPU stand-in); the device side checks each
//! request, runs the handler, and answers with an inline SEND it posts and rings itself
//! (`regular`, `blueflame`) or hands to one proxy thread (`cpu-assisted`). The host sets
//! up queues, memory and the device side, reads the device's counters while it runs,
//! watches its heartbeat, and stops it cleanly.
//!
//! - [`DirectService`]: the host side; [`DirectOptions`] its settings.
//! - [`stand_in`]: the CPU device side; the GPU one is [`crate::gpu::direct`].
//! - [`proxy`]: the `cpu-assisted` proxy.
//! - [`client::LinkClient`]: an in-process link's QPU end (the emulator's, in the harness).
//! - `connectx` (feature `rdma`): the kernel on ConnectX links ([`DirectService::start_rdma`]).
//!
//! The protocol is in [`crate::queues::direct`] and `docs/gpu-direct.md`.
#![forbid(unsafe_code)]

pub mod client;
#[cfg(feature = "rdma")]
pub mod connectx;
pub mod proxy;
pub mod stand_in;

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::abi;
use crate::decode::Decoder;
use crate::gpu::{self, GpuOptions};
use crate::handler::{Handler, Registry};
use crate::mlx5::Doorbell;
use crate::queues::direct::FunctionTable;
use crate::queues::layout::SoftNicConfig;
use crate::queues::links::LinkSet;
use crate::shm::SharedRegion;
use crate::softnic::{NicCounters, NicEngine, NicStats, SoftNic};
use crate::stats::{DropKind, Stats};
use crate::transport::Transport;
use crate::wire::{status, HEADER_LEN};
use crate::{Error, Result};

pub use client::LinkClient;

/// How requests travel from the QPU's link to the decoder and back.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Default, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum DataPath {
    /// A CPU forwarding thread receives every request, hands it to the backend
    /// (`topology`) and sends its answer.
    #[default]
    CpuForwarded,
    /// The device side polls the NIC's receive queues and posts the answers itself.
    GpuDirect,
}

impl DataPath {
    pub const ALL: [DataPath; 2] = [DataPath::CpuForwarded, DataPath::GpuDirect];

    pub fn as_str(&self) -> &'static str {
        match self {
            DataPath::CpuForwarded => "cpu-forwarded",
            DataPath::GpuDirect => "gpu-direct",
        }
    }
}

impl fmt::Display for DataPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for DataPath {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        DataPath::ALL
            .into_iter()
            .find(|d| d.as_str() == s)
            .ok_or_else(|| format!("unknown data path {s:?}; expected cpu-forwarded or gpu-direct"))
    }
}

/// Where a ConnectX link's receive buffers go (`rx_memory`).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Default, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum RxMemory {
    /// GPU memory (dma-buf, else `nvidia_peermem`); pinned host memory when neither works.
    #[default]
    Auto,
    /// GPU memory, or an error saying why not.
    Gpu,
    /// Pinned host memory the GPU maps.
    Host,
}

impl RxMemory {
    pub const ALL: [RxMemory; 3] = [RxMemory::Auto, RxMemory::Gpu, RxMemory::Host];

    pub fn as_str(&self) -> &'static str {
        match self {
            RxMemory::Auto => "auto",
            RxMemory::Gpu => "gpu",
            RxMemory::Host => "host",
        }
    }
}

impl fmt::Display for RxMemory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for RxMemory {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        RxMemory::ALL
            .into_iter()
            .find(|m| m.as_str() == s)
            .ok_or_else(|| format!("unknown receive memory {s:?}; expected auto, gpu or host"))
    }
}

/// Settings of a `gpu-direct` service.
#[derive(Debug, Clone)]
pub struct DirectOptions {
    /// QPU links: one receive queue (and send queue) each.
    pub links: u32,
    /// GPU: poller warps per link (one thread block each). The stand-in runs one thread
    /// per link.
    pub pollers_per_link: u32,
    /// GPU: warps that poll each receive together (divides `pollers_per_link`).
    pub pollers_per_slot: u32,
    /// Largest request argument; larger ones are answered `OVERSIZED`.
    pub max_request_bytes: u32,
    /// The queues' sizes, doorbell mode, and the host threads' idle policy and cores.
    pub queues: SoftNicConfig,
    /// Where the device side runs: `None` the CPU stand-in, else this GPU.
    pub gpu: Option<GpuOptions>,
    /// Cores for the stand-in's threads, in turn.
    pub stand_in_cores: Vec<usize>,
}

impl DirectOptions {
    /// Defaults for `links` links answering with `doorbell`: 64 receives per link, CQE
    /// scatter for small requests, 4 poller warps per link in 2 groups of 2.
    pub fn new(links: u32, doorbell: Doorbell, max_request_bytes: u32) -> DirectOptions {
        let slot = (HEADER_LEN as u32 + max_request_bytes).next_multiple_of(64);
        DirectOptions {
            links,
            pollers_per_link: 4,
            pollers_per_slot: 2,
            max_request_bytes,
            queues: SoftNicConfig {
                rx_slots: 64,
                rx_cqes: 128,
                rx_slot_bytes: slot,
                sq_wqebbs: 256,
                tx_cqes: 256,
                signal_every: 32,
                cqe_inline_scatter: true,
                ..SoftNicConfig::new(doorbell)
            },
            gpu: None,
            stand_in_cores: Vec::new(),
        }
    }

    /// The argument limit the device side applies (the buffer's room, at most).
    fn effective_max_request(&self) -> u32 {
        self.max_request_bytes
            .min(self.queues.rx_slot_bytes.saturating_sub(HEADER_LEN as u32))
    }
}

enum Device {
    StandIn(stand_in::StandIn),
    Gpu(Box<gpu::direct::DirectKernel>),
}

/// The device side's counters, summed over its warps (or stand-in threads).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeviceCounters(pub [u64; abi::WARP_COUNTERS as usize]);

impl DeviceCounters {
    pub fn get(&self, k: u32) -> u64 {
        self.0[k as usize]
    }

    fn add(&mut self, other: &[u64; abi::WARP_COUNTERS as usize]) {
        for (a, b) in self.0.iter_mut().zip(other) {
            *a += b;
        }
    }

    /// The forwarder's counters from the device's: received = ok + errors + drops.
    pub fn stats(&self) -> Stats {
        let g = |k| self.get(k);
        let mut s = Stats::default();
        s.add_counts(
            g(abi::CTR_RECEIVED),
            g(abi::CTR_OK),
            &[
                (status::BAD_ARGUMENT, g(abi::CTR_BAD_ARGUMENT)),
                (status::LENGTH_MISMATCH, g(abi::CTR_LENGTH_MISMATCH)),
                (status::UNKNOWN_FUNCTION, g(abi::CTR_UNKNOWN_FUNCTION)),
                (status::OVERSIZED, g(abi::CTR_OVERSIZED)),
                (i32::MAX, g(abi::CTR_OTHER_ERROR)),
            ],
            &[
                (DropKind::TruncatedHeader, g(abi::CTR_TRUNCATED_HEADER)),
                (DropKind::BadMagic, g(abi::CTR_BAD_MAGIC)),
                (DropKind::RxError, g(abi::CTR_RX_ERROR)),
                (DropKind::SendFailed, g(abi::CTR_SEND_FAILED)),
            ],
        );
        s
    }
}

/// What a stopped service counted.
#[derive(Clone)]
pub struct DirectReport {
    /// The device side's counters in the forwarder's terms (they add up).
    pub stats: Stats,
    /// Per link, the device side's raw counters.
    pub per_link: Vec<DeviceCounters>,
    /// Per link, the NIC's counters (empty for links whose NIC the caller drove).
    pub nics: Vec<NicCounters>,
    /// Requests the NICs delivered that the device side had not taken when it stopped.
    pub undrained: u64,
    /// Times the heartbeat was found stalled.
    pub stalls: u64,
}

/// The host side of a running `gpu-direct` data path.
pub struct DirectService {
    // Field order is drop order: the proxy and NIC threads stop before the device side,
    // which stops before the memory goes.
    proxy: Option<proxy::Proxy>,
    nics: Vec<SoftNic>,
    device: Option<Device>,
    /// ConnectX links (instead of soft NICs), stopped after the device side.
    #[cfg(feature = "rdma")]
    connectx: Option<connectx::ConnectxNics>,
    region: SharedRegion,
    set: LinkSet,
    options: DirectOptions,
    /// Every link's NIC counters, whoever drives it.
    nic_stats: Vec<Option<Arc<NicStats>>>,
    heartbeat: (u64, Instant),
    stalls: u64,
    description: String,
}

/// The `gpu-direct` kernel's parameters for `options` (its link table is filled in at
/// launch).
fn gpu_params(options: &DirectOptions, g: &GpuOptions, table: &FunctionTable) -> abi::DirectParams {
    let mut params = abi::DirectParams {
        nlinks: options.links,
        warps_per_link: options.pollers_per_link,
        pollers_per_slot: options.pollers_per_slot,
        max_request_bytes: options.effective_max_request(),
        poll_chunks: g.poll_chunks,
        ..Default::default()
    };
    table.fill(&mut params);
    params
}

impl DirectService {
    /// ConnectX links: writes their stop sentinel; false for soft NIC links.
    #[cfg(feature = "rdma")]
    fn connectx_write_stop(&self) -> bool {
        self.connectx.as_ref().map(|c| c.write_stop()).is_some()
    }

    #[cfg(not(feature = "rdma"))]
    fn connectx_write_stop(&self) -> bool {
        false
    }

    /// ConnectX links, after the device side stopped: stops the control plane and returns
    /// the completions left untaken.
    #[cfg(feature = "rdma")]
    fn connectx_stop(&mut self) -> Result<Option<u64>> {
        match self.connectx.as_mut() {
            Some(c) => {
                c.stop_control()?;
                Ok(Some(c.pending()))
            }
            None => Ok(None),
        }
    }

    #[cfg(not(feature = "rdma"))]
    fn connectx_stop(&mut self) -> Result<Option<u64>> {
        Ok(None)
    }
}

/// The longest a device side may leave its heartbeat (poll counters) unchanged while
/// running before the host says it stalled.
pub const HEARTBEAT_TIMEOUT: Duration = Duration::from_secs(1);

impl DirectService {
    /// Sets up `options.links` links' queues, starts the device side serving `registry`
    /// on them, and the cpu-assisted proxy when that is the doorbell. The NICs are
    /// started by [`DirectService::link_client`] (in-process) or
    /// [`DirectService::attach_wire`].
    pub fn start(options: &DirectOptions, registry: &Registry) -> Result<DirectService> {
        let table = FunctionTable::new(registry)?;
        let warps = if options.gpu.is_some() {
            options.pollers_per_link
        } else {
            1
        };
        let set = LinkSet::new(&options.queues, options.links, warps)?;
        let region = match &options.gpu {
            Some(g) => gpu::mapped_nic_region(g.device, set.len)?,
            None => SharedRegion::heap(set.len)?,
        };
        set.init(&region)?;
        let max_request = options.effective_max_request();
        let handlers: Vec<Handler> = registry
            .entries()
            .iter()
            .map(|r| r.handler.clone())
            .collect();
        let device = match &options.gpu {
            Some(g) => {
                let decoders: Vec<Arc<Decoder>> = gpu::decoder::registry_decoders(registry);
                Device::Gpu(Box::new(gpu::direct::DirectKernel::start(
                    g,
                    &set,
                    &region,
                    &options.queues,
                    gpu_params(options, g, &table),
                    &decoders,
                )?))
            }
            None => Device::StandIn(stand_in::StandIn::start(
                &set,
                &region,
                &options.queues,
                &table,
                handlers,
                max_request,
                &options.stand_in_cores,
            )?),
        };
        let proxy = match options.queues.doorbell {
            Doorbell::CpuAssisted => Some(proxy::Proxy::start(&set, &region, &options.queues)?),
            _ => None,
        };
        let description = format!(
            "gpu-direct: {} link(s), device side {}, doorbell {}, {} function(s)",
            options.links,
            match &device {
                Device::StandIn(_) => "cpu stand-in (one thread per link)".to_string(),
                Device::Gpu(k) => format!(
                    "GPU {} ({} poller warps per link, {} per slot)",
                    k.device_index(),
                    options.pollers_per_link,
                    options.pollers_per_slot
                ),
            },
            options.queues.doorbell,
            table.len()
        );
        Ok(DirectService {
            proxy,
            nics: Vec::new(),
            device: Some(device),
            #[cfg(feature = "rdma")]
            connectx: None,
            nic_stats: vec![None; options.links as usize],
            region,
            set,
            options: options.clone(),
            heartbeat: (0, Instant::now()),
            stalls: 0,
            description,
        })
    }

    /// One line saying what runs (the start-up line).
    pub fn description(&self) -> &str {
        &self.description
    }

    pub fn links(&self) -> u32 {
        self.set.links
    }

    /// The QPU end of link `i`, for an in-process emulator that is also the link's NIC.
    /// Each link has one NIC: a second call for the same link is an error.
    pub fn link_client(&mut self, i: u32) -> Result<LinkClient> {
        self.check_free(i)?;
        let engine = NicEngine::new(&self.options.queues, self.set.link(&self.region, i)?, false)?;
        self.nic_stats[i as usize] = Some(Arc::clone(engine.stats()));
        Ok(LinkClient::new(engine, i))
    }

    /// Starts link `i`'s soft NIC thread on `wire` (toward the QPU side: a UDP socket for
    /// `qfwd run`, [`crate::serve::wiring::direct_udp`]). With `nic_core` set, link i's NIC
    /// thread runs on that core + i.
    pub fn attach_wire<W>(&mut self, i: u32, wire: W) -> Result<()>
    where
        W: Transport + Send + 'static,
        W::Peer: PartialEq + Send,
    {
        self.check_free(i)?;
        let mut queues = self.options.queues.clone();
        if let Some(core) = self.options.queues.nic_core {
            queues.nic_core = Some(core + i as usize);
        }
        let nic = SoftNic::start_prepared(&queues, self.set.link(&self.region, i)?, wire, false)?;
        self.nic_stats[i as usize] = Some(Arc::clone(nic.stats()));
        self.nics.push(nic);
        Ok(())
    }

    fn check_free(&self, i: u32) -> Result<()> {
        #[cfg(feature = "rdma")]
        if self.connectx.is_some() {
            return Err(Error::InvalidSetting {
                key: "links",
                detail: format!("link {i} is a ConnectX's: its QPU connects over RDMA"),
            });
        }
        match self.nic_stats.get(i as usize) {
            None => Err(Error::InvalidSetting {
                key: "links",
                detail: format!("link {i} does not exist ({} links)", self.set.links),
            }),
            Some(Some(_)) => Err(Error::InvalidSetting {
                key: "links",
                detail: format!("link {i} already has its NIC"),
            }),
            Some(None) => Ok(()),
        }
    }

    /// The device side's counters, per link (live: read while it runs).
    pub fn per_link(&self) -> Vec<DeviceCounters> {
        (0..self.set.links)
            .map(|i| DeviceCounters(self.set.read_counters(&self.region, i)))
            .collect()
    }

    /// The device side's counters, all links.
    pub fn counters(&self) -> DeviceCounters {
        let mut sum = DeviceCounters([0; abi::WARP_COUNTERS as usize]);
        for c in self.per_link() {
            sum.add(&c.0);
        }
        sum
    }

    /// Requests the NICs have delivered into the queues (ConnectX links: those the device
    /// side took, and those waiting for it).
    pub fn delivered(&self) -> u64 {
        self.nic_stats
            .iter()
            .flatten()
            .map(|s| s.rx_messages.load(std::sync::atomic::Ordering::Relaxed))
            .sum::<u64>()
            + self.connectx_delivered()
    }

    #[cfg(feature = "rdma")]
    fn connectx_delivered(&self) -> u64 {
        self.connectx
            .as_ref()
            .map_or(0, |c| self.counters().get(abi::CTR_RECEIVED) + c.pending())
    }

    #[cfg(not(feature = "rdma"))]
    fn connectx_delivered(&self) -> u64 {
        0
    }

    /// Whether the device side's heartbeat (its poll counters) moved within
    /// [`HEARTBEAT_TIMEOUT`] up to `now`; counts each stall found once.
    pub fn heartbeat_ok(&mut self, now: Instant) -> bool {
        let polls = self.counters().get(abi::CTR_POLLS);
        if polls != self.heartbeat.0 {
            self.heartbeat = (polls, now);
            return true;
        }
        let ok = now.duration_since(self.heartbeat.1) < HEARTBEAT_TIMEOUT;
        if !ok {
            self.stalls += 1;
            self.heartbeat.1 = now;
            tracing::warn!(
                "gpu-direct: the device side's heartbeat has not moved for {:?} ({} polls)",
                HEARTBEAT_TIMEOUT,
                polls
            );
        }
        ok
    }

    /// Times the heartbeat was found stalled.
    pub fn stalls(&self) -> u64 {
        self.stalls
    }

    /// The live status line.
    pub fn status_line(&mut self, interval: Duration, last: &mut u64) -> String {
        let c = self.counters();
        let s = c.stats();
        let rate = (s.received - *last) as f64 / interval.as_secs_f64().max(1e-9);
        *last = s.received;
        let beat = if self.heartbeat_ok(Instant::now()) {
            "alive"
        } else {
            "STALLED"
        };
        format!(
            "qfwd: gpu-direct rx {} | ok {} | err {} | drop {} | {:.0} req/s | device {} ({} polls)",
            s.received,
            s.answered_ok,
            s.answered_error_total(),
            s.dropped_total(),
            rate,
            beat,
            c.get(abi::CTR_POLLS)
        )
    }

    /// Stops cleanly: the NIC threads stop taking requests, the device side takes what
    /// they delivered (waiting at most `drain`), then finds the stop sentinel and ends; the
    /// proxy sends what it was given. Returns the final counters.
    pub fn stop(mut self, drain: Duration) -> Result<DirectReport> {
        let nics: Vec<NicCounters> = std::mem::take(&mut self.nics)
            .into_iter()
            .map(|n| n.stop())
            .collect::<Result<_>>()?;
        let deadline = Instant::now() + drain;
        while self.counters().get(abi::CTR_RECEIVED) < self.delivered() && Instant::now() < deadline
        {
            std::thread::sleep(Duration::from_micros(200));
        }
        let mut undrained = self
            .delivered()
            .saturating_sub(self.counters().get(abi::CTR_RECEIVED));
        match self.connectx_write_stop() {
            true => {}
            false => self.set.write_stop(&self.region)?,
        }
        match self.device.take() {
            Some(Device::StandIn(s)) => s.join()?,
            Some(Device::Gpu(mut k)) => {
                k.wait(Instant::now() + Duration::from_secs(2))?;
                if std::env::var_os("QFWD_DIRECT_DUMP").is_some() {
                    for (i, c) in k.poster_counters()?.iter().enumerate() {
                        tracing::warn!("gpu-direct poster {i} counters in device memory: {c:?}");
                    }
                }
            }
            None => {}
        }
        if let Some(p) = self.proxy.take() {
            p.stop()?;
        }
        if let Some(after) = self.connectx_stop()? {
            // What the NICs delivered after the sentinel, which no one took.
            undrained = after;
        }
        if std::env::var_os("QFWD_DIRECT_DUMP").is_some() {
            for link in 0..self.set.links {
                for block in 0..crate::queues::links::COUNTER_BLOCKS_PER_LINK {
                    let at = self.set.counters_of(link, block);
                    let words: Vec<u64> = (0..abi::WARP_COUNTERS as usize)
                        .map(|k| {
                            self.region
                                .load_u64(at + 8 * k, std::sync::atomic::Ordering::Relaxed)
                        })
                        .collect();
                    tracing::warn!(
                        "gpu-direct counters link {link} block {block} @{at}: {words:?}"
                    );
                }
            }
        }
        let per_link = self.per_link();
        let mut sum = DeviceCounters([0; abi::WARP_COUNTERS as usize]);
        for c in &per_link {
            sum.add(&c.0);
        }
        Ok(DirectReport {
            stats: sum.stats(),
            per_link,
            nics,
            undrained,
            stalls: self.stalls,
        })
    }
}
