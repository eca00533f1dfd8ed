//! `qfwd run` settings: defaults, a TOML file (`--config`), then command-line flags,
//! each overriding the one before.
#![forbid(unsafe_code)]

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::backend::Topology;
use crate::decode::DecoderKind;
use crate::direct::DataPath;
use crate::forward::{ForwardConfig, IdlePolicy};
use crate::gpu::GpuOptions;
use crate::handler::{Handler, Registry};
use crate::mailbox::layout::MAX_REQ_SLOT_BYTES;
use crate::mailbox::{Layout, RxCompletion};
use crate::mlx5::Doorbell;
use crate::transport::udp::AllowedPeer;
use crate::transport::TransportKind;
use crate::{limits, Error, Result};

/// Everything `qfwd run` needs. Field names are the TOML keys.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RunConfig {
    /// QPU-facing transport.
    pub transport: TransportKind,
    /// Address to bind (udp).
    pub listen: SocketAddr,
    /// Peers allowed to send requests (`IP` or `IP:port`); empty = everyone, which on a
    /// non-loopback `listen` needs `allow_any`.
    pub allow: Vec<String>,
    /// Accept requests from every peer on a non-loopback `listen` (no allowlist): an
    /// explicit choice, warned about at start.
    pub allow_any: bool,
    /// Handlers to serve: `KIND` (e.g. `parity`) answers to the FNV-1a of its name;
    /// `KIND:NAME` (e.g. `parity:patch0`) serves KIND under NAME, so one kind can be served
    /// under several names (one per logical patch) and routed apart.
    pub handlers: Vec<String>,
    /// Where requests are computed.
    pub topology: Topology,
    /// CPU cores to pin to: the forwarding thread, then (soft NIC transport) the NIC
    /// thread and the cpu-assisted proxy thread.
    pub cores: Vec<usize>,
    /// Stop after this many seconds; absent = until Ctrl-C / SIGTERM.
    pub duration_s: Option<f64>,
    /// Seconds between live status lines on stderr; 0 turns them off.
    pub stats_interval_s: f64,
    /// Largest request argument accepted, in bytes.
    pub max_request_bytes: usize,
    /// Most datagrams taken per poll.
    pub batch: usize,
    /// Most requests in flight toward the backend.
    pub max_in_flight: usize,
    /// Watchdog deadline per request, in microseconds.
    pub watchdog_us: u64,
    /// A request that waited longer than this (microseconds) between reaching the host
    /// and being read is answered `OVERLOAD` without being computed; 0 turns it off.
    pub queue_deadline_us: u64,
    /// What the polling thread does when idle.
    pub idle: IdlePolicy,
    /// GPU topologies: CUDA device index.
    pub gpu_device: usize,
    /// Several GPUs: one backend (for gpu-persistent: its own kernel and mailbox rings)
    /// per listed CUDA device, requests routed by function (see [`crate::route`]);
    /// overrides `gpu_device`. With topology `cpu` the entries only label host shards.
    /// Empty: one backend on `gpu_device`, as without routing.
    pub gpus: Vec<usize>,
    /// gpu-persistent: how the kernel learns of a request (`inline` or `buffer`).
    pub rx_completion: RxCompletion,
    /// gpu-persistent: poller warps, 1 ..= 32.
    pub pollers: u32,
    /// gpu-persistent: warps polling each slot out of phase (must divide `pollers`);
    /// absent = the smaller of 2 and `pollers`.
    pub pollers_per_slot: Option<u32>,
    /// GPU uf: answer syndromes of at most this many defects from a table the CPU uf
    /// fills at start-up (0: off; absent: the largest that fits the build budget).
    pub uf_table_max_defects: Option<u32>,
    /// GPU uf with the table: try the split path only for at most this many defects
    /// (0 ..= 32; absent: where it answers at least half the shots drawn from the model).
    pub uf_split_max_defects: Option<u32>,
    /// GPU topologies: request slots (requests on the GPU at once).
    pub slots: usize,
    /// softnic transport: how responses are announced to the NIC.
    pub doorbell: Doorbell,
    /// A QEC decoder to serve beside the handlers: `uf`, `matching` (topology `cpu` only) or
    /// `lut` (needs `dem`).
    pub decoder: Option<String>,
    /// Stim detector error model the decoder is built from.
    pub dem: Option<PathBuf>,
    /// Decoder request budget: most defects a request may hold (more: status 2,
    /// over_budget); 0 = none; absent = 6 x the model's expected defects + 24.
    pub decoder_max_defects: Option<u32>,
    /// Name the decoder answers to (function_id = FNV-1a of it).
    pub decoder_name: String,
    /// Several names for the decoder (one model, one function_id each, e.g. one per
    /// patch); when not empty it replaces `decoder_name`.
    pub decoder_names: Vec<String>,
    /// With `gpus`: function name -> GPU index that serves it; functions left out are
    /// dealt round-robin over `gpus` in registration order.
    pub route: BTreeMap<String, usize>,
    /// How requests reach the decoder: `cpu-forwarded` (a forwarding thread) or
    /// `gpu-direct` (the device side polls the NIC's queues itself; needs the softnic
    /// transport and topology `gpu-persistent`, or `cpu` for the CPU stand-in).
    pub data_path: DataPath,
    /// gpu-direct: QPU links, one receive queue each (link i listens on `listen`'s port +
    /// i), 1 ..= 64.
    pub links: u32,
    /// gpu-direct over rdma: where the ConnectX links' receive buffers go (`auto`: GPU
    /// memory through dma-buf or `nvidia_peermem`, else pinned host memory; `gpu`; `host`).
    pub rx_memory: crate::direct::RxMemory,
    /// Serve streams instead of single shots (table `[streams]`; `qfwd run --streams N`):
    /// the `stream.*` functions, a sliding-window decoder per stream built from `dem`.
    pub streams: Option<crate::stream::StreamSettings>,
}

impl Default for RunConfig {
    fn default() -> Self {
        let f = ForwardConfig::default();
        RunConfig {
            transport: TransportKind::Udp,
            listen: "127.0.0.1:9000".parse().expect("literal address"),
            allow: Vec::new(),
            allow_any: false,
            handlers: vec!["parity".to_string()],
            topology: Topology::Cpu,
            cores: Vec::new(),
            duration_s: None,
            stats_interval_s: 1.0,
            max_request_bytes: f.max_request_bytes,
            batch: f.batch,
            max_in_flight: f.max_in_flight,
            watchdog_us: f.watchdog.as_micros() as u64,
            // The watchdog's default: a request that waited that long before it was read
            // could not be answered within the watchdog anyway.
            queue_deadline_us: 10_000,
            idle: f.idle,
            gpu_device: 0,
            rx_completion: RxCompletion::Inline,
            pollers: GpuOptions::default().pollers,
            pollers_per_slot: None,
            uf_table_max_defects: None,
            uf_split_max_defects: None,
            slots: GpuOptions::default().slots,
            doorbell: Doorbell::BlueFlame,
            decoder: None,
            dem: None,
            decoder_max_defects: None,
            decoder_name: "decode".to_string(),
            decoder_names: Vec::new(),
            gpus: Vec::new(),
            route: BTreeMap::new(),
            data_path: DataPath::CpuForwarded,
            links: 1,
            rx_memory: crate::direct::RxMemory::Auto,
            streams: None,
        }
    }
}

impl RunConfig {
    /// Reads a TOML file; unknown keys and bad values are errors naming the file.
    pub fn from_file(path: &Path) -> Result<RunConfig> {
        let text = std::fs::read_to_string(path).map_err(|e| Error::Config {
            path: path.to_path_buf(),
            detail: e.to_string(),
        })?;
        RunConfig::from_toml(&text, path)
    }

    /// Parses TOML text (`path` names it in errors). Values are checked by
    /// [`RunConfig::validate`], not here.
    pub fn from_toml(text: &str, path: &Path) -> Result<RunConfig> {
        toml::from_str(text).map_err(|e| Error::Config {
            path: path.to_path_buf(),
            detail: e.to_string(),
        })
    }

    /// Checks values that types alone do not.
    pub fn validate(&self) -> Result<()> {
        self.check_settings()?;
        match (self.decoder_kind()?, &self.dem) {
            (Some(_), Some(p)) => check_model_file(p),
            _ => Ok(()),
        }
    }

    /// [`RunConfig::validate`] without looking at files (the decoder model's path is
    /// checked at start): for settings written on one host and run on another, such as
    /// the harness's scenario files.
    pub fn check_settings(&self) -> Result<()> {
        let bad = |key, detail: &str| {
            Err(Error::InvalidSetting {
                key,
                detail: detail.to_string(),
            })
        };
        if self.handlers.is_empty() {
            return bad("handlers", "at least one handler is needed");
        }
        self.check_ranges()?;
        self.allowlist()?;
        self.check_exposure()?;
        // Names only: building a decoder (reading its model) waits for the start.
        for spec in &self.handlers {
            handler_spec(spec)?;
        }
        if self.decoder_kind()?.is_some() && self.dem.is_none() {
            return bad(
                "dem",
                "a decoder needs --dem FILE (a Stim detector error model)",
            );
        }
        if self.topology.needs_gpu() {
            self.gpu_options().validate()?;
        }
        // The GPU topologies, and gpu-direct's kernel and its CPU stand-in, hold the
        // device's decoders only.
        if let Some(kind) = self.decoder_kind()?.filter(|k| !k.runs_on_gpu()) {
            if self.topology.needs_gpu() || self.data_path == DataPath::GpuDirect {
                let side = format!("topology {} (data path {})", self.topology, self.data_path);
                return Err(kind.gpu_refusal(&side).into());
            }
        }
        self.validate_data_path()?;
        if self.decoder_names.iter().any(|n| n.is_empty()) {
            return bad("decoder_names", "a name cannot be empty");
        }
        if self.routed() && self.device_posts() {
            return bad(
                "gpus",
                "GPU-rung doorbells (softnic with a regular or blueflame doorbell) serve one \
                 GPU; use --doorbell cpu-assisted, or one GPU without --gpus",
            );
        }
        if self.routed() {
            let names = self.function_names()?;
            let names: Vec<&str> = names.iter().map(String::as_str).collect();
            crate::route::RouteMap::from_names(&names, &self.gpus, &self.route)?;
        } else if !self.route.is_empty() {
            return bad(
                "route",
                "a route map needs the GPUs to route over: --gpus 0,1 (TOML gpus = [0, 1])",
            );
        }
        self.check_streams()
    }

    /// The stream service's settings, and what it does not combine with.
    fn check_streams(&self) -> Result<()> {
        let Some(s) = &self.streams else {
            return Ok(());
        };
        s.validate()?;
        let bad = |key, detail: &str| {
            Err(Error::InvalidSetting {
                key,
                detail: detail.to_string(),
            })
        };
        if self.decoder.is_some() {
            return bad(
                "decoder",
                "streams are decoded by the sliding-window decoder built from --dem; \
                 drop --decoder (single shots are served by a qfwd without --streams)",
            );
        }
        match &self.dem {
            None => bad(
                "dem",
                "streams need --dem FILE: a Stim model of a long memory experiment \
                 (detector coordinates (x, y, t))",
            ),
            Some(p) if !p.is_file() => Err(Error::InvalidSetting {
                key: "dem",
                detail: format!("{}: no such file", p.display()),
            }),
            Some(_) if self.transport != TransportKind::Udp => bad(
                "transport",
                "streams are served over udp (the harness drives the in-process ring itself)",
            ),
            Some(_) if self.topology != Topology::Cpu || self.routed() => bad(
                "topology",
                "streams are decoded by the CPU pool for now (the GPU stream engine is not \
                 in this build)",
            ),
            Some(_) => Ok(()),
        }
    }

    /// Every numeric setting against its range ([`crate::limits`]), before anything is
    /// sized by it.
    fn check_ranges(&self) -> Result<()> {
        limits::BATCH.check(self.batch)?;
        limits::MAX_IN_FLIGHT.check(self.max_in_flight)?;
        limits::MAX_REQUEST_BYTES.check(self.max_request_bytes)?;
        limits::WATCHDOG_US.check(self.watchdog_us)?;
        limits::QUEUE_DEADLINE_US.check(self.queue_deadline_us)?;
        limits::STATS_INTERVAL_S.check(self.stats_interval_s)?;
        if let Some(d) = self.duration_s {
            limits::DURATION_S.check(d)?;
        }
        for (i, &c) in self.cores.iter().enumerate() {
            limits::CORE.check_as(&format!("cores[{i}]"), c)?;
        }
        limits::GPU.check(self.gpu_device)?;
        for (i, &g) in self.gpus.iter().enumerate() {
            limits::GPU.check_as(&format!("gpus[{i}]"), g)?;
        }
        for (name, &g) in &self.route {
            limits::GPU.check_as(&format!("route.{name}"), g)?;
        }
        limits::POLLERS.check(self.pollers)?;
        if let Some(p) = self.pollers_per_slot {
            limits::POLLERS_PER_SLOT.check(p)?;
        }
        limits::SLOTS.check(self.slots)?;
        if let Some(k) = self.uf_table_max_defects {
            limits::UF_TABLE_MAX_DEFECTS.check(k)?;
        }
        if let Some(k) = self.uf_split_max_defects {
            limits::UF_SPLIT_MAX_DEFECTS.check(k)?;
        }
        Ok(())
    }

    /// Whether `listen` can be reached from other hosts (not a loopback address; the
    /// unspecified `0.0.0.0` / `[::]` can).
    pub fn listens_beyond_loopback(&self) -> bool {
        !self.listen.ip().to_canonical().is_loopback()
    }

    /// A non-loopback `listen` without an allowlist answers any host that can reach it:
    /// only with `allow_any`, which in turn contradicts an allowlist.
    fn check_exposure(&self) -> Result<()> {
        if self.transport == TransportKind::Rdma && !self.allow.is_empty() {
            return Err(Error::InvalidSetting {
                key: "allow",
                detail: "the rdma transport's control plane does not filter peers (the first \
                         QPU side to connect gets the queue pair): leave --allow out, pass \
                         --allow-any to listen beyond loopback, and firewall the control port"
                    .into(),
            });
        }
        if self.allow_any && !self.allow.is_empty() {
            return Err(Error::InvalidSetting {
                key: "allow_any",
                detail: format!(
                    "--allow-any accepts every peer, --allow only {}: pick one",
                    self.allow.join(", ")
                ),
            });
        }
        if self.listens_beyond_loopback() && self.allow.is_empty() && !self.allow_any {
            return Err(Error::InvalidSetting {
                key: "allow",
                detail: format!(
                    "listening on {} (not loopback) with no allowlist would answer any host \
                     that reaches it; name the QPU controller with --allow IP (repeat for \
                     more; TOML allow = [\"IP\"]), or pass --allow-any (TOML allow_any = true) \
                     to accept every peer",
                    self.listen
                ),
            });
        }
        Ok(())
    }

    /// The warning to print at start when every peer is accepted beyond loopback.
    pub fn exposure_warning(&self) -> Option<String> {
        (self.listens_beyond_loopback() && self.allow.is_empty()).then(|| {
            format!(
                "listening on {} with no allowlist (--allow-any): any host that can reach \
                 it can send requests and receive the answers",
                self.listen
            )
        })
    }

    /// Whether requests are routed over one backend per entry of `gpus`.
    pub fn routed(&self) -> bool {
        !self.gpus.is_empty()
    }

    /// The GPU indices served: `gpus`, or `gpu_device` alone.
    pub fn gpu_list(&self) -> Vec<usize> {
        if self.routed() {
            self.gpus.clone()
        } else {
            vec![self.gpu_device]
        }
    }

    /// [`RunConfig::gpu_options`] for GPU `device`.
    pub fn gpu_options_for(&self, device: usize) -> GpuOptions {
        GpuOptions {
            device,
            ..self.gpu_options()
        }
    }

    /// The names the decoder answers to (none without a decoder).
    pub fn decoder_name_list(&self) -> Vec<String> {
        if self.decoder.is_none() {
            Vec::new()
        } else if self.decoder_names.is_empty() {
            vec![self.decoder_name.clone()]
        } else {
            self.decoder_names.clone()
        }
    }

    /// Every registration name, in registration order (handlers, then decoder names),
    /// without loading any model.
    pub fn function_names(&self) -> Result<Vec<String>> {
        let mut v = Vec::new();
        for spec in &self.handlers {
            v.push(handler_spec(spec)?.1.to_string());
        }
        v.extend(self.decoder_name_list());
        Ok(v)
    }

    /// The GPU backends' options these settings describe. Slots hold the largest
    /// argument that both `max_request_bytes` and the kernel's slot limit allow; larger
    /// arguments are answered `OVERSIZED` by the backend.
    pub fn gpu_options(&self) -> GpuOptions {
        GpuOptions {
            device: self.gpu_device,
            slots: self.slots,
            slot_bytes: Layout::req_slot_bytes_for(
                (1..=self.max_request_bytes)
                    .rev()
                    .find(|&n| {
                        Layout::req_slot_bytes_for(n, self.rx_completion) <= MAX_REQ_SLOT_BYTES
                    })
                    .unwrap_or(1),
                self.rx_completion,
            ),
            rx_completion: self.rx_completion,
            pollers: self.pollers,
            pollers_per_slot: self.pollers_per_slot_or_default(),
            uf_table_max_defects: self.uf_table_max_defects,
            uf_split_max_defects: self.uf_split_max_defects,
            ..GpuOptions::default()
        }
    }

    /// gpu-persistent: warps per slot, the default (the smaller of 2 and `pollers`) filled in.
    pub fn pollers_per_slot_or_default(&self) -> u32 {
        self.pollers_per_slot.unwrap_or(self.pollers.min(2))
    }

    /// The parsed allowlist.
    pub fn allowlist(&self) -> Result<Vec<AllowedPeer>> {
        self.allow
            .iter()
            .map(|s| {
                s.parse().map_err(|detail| Error::InvalidSetting {
                    key: "allow",
                    detail,
                })
            })
            .collect()
    }

    /// The handler registry the names ask for, plus the decoder if one is configured
    /// (loading its model: the first call reads and builds it).
    pub fn registry(&self) -> Result<Registry> {
        let mut r = Registry::default();
        for spec in &self.handlers {
            let (kind, name) = handler_spec(spec)?;
            r.register(name, Handler::by_name(kind)?)?;
        }
        if let Some(kind) = self.decoder_kind()? {
            let dem = self.dem.as_deref().ok_or_else(|| Error::InvalidSetting {
                key: "dem",
                detail: "a decoder needs --dem FILE (a Stim detector error model)".into(),
            })?;
            // One model, shared by every name (a GPU kernel holds one model per kind).
            let handler = Handler::decoder_with_budget(dem, kind, self.decoder_max_defects)?;
            if let Handler::Decoder(d) = &handler {
                self.check_request_fits(dem, d.payload_len(), d.num_detectors())?;
            }
            for name in self.decoder_name_list() {
                r.register(&name, handler.clone())?;
            }
        }
        Ok(r)
    }

    /// A model whose requests are larger than `max_request_bytes` would get `OVERSIZED`
    /// for every request: refused at load, with both numbers.
    fn check_request_fits(&self, dem: &Path, request: usize, detectors: usize) -> Result<()> {
        if request <= self.max_request_bytes {
            return Ok(());
        }
        let fix = if limits::MAX_REQUEST_BYTES.contains(request) {
            format!("raise --max-request-bytes (TOML max_request_bytes) to {request} or more")
        } else {
            format!(
                "more than a request can carry ({}): split the model",
                limits::MAX_REQUEST_BYTES.describe()
            )
        };
        Err(Error::InvalidSetting {
            key: "max_request_bytes",
            detail: format!(
                "{}: a request for this model ({detectors} detectors) carries {request} bytes \
                 (bit-packed events + u32 count), more than max_request_bytes = {}; {fix}",
                dem.display(),
                self.max_request_bytes
            ),
        })
    }

    /// The configured decoder's kind, if any.
    pub fn decoder_kind(&self) -> Result<Option<DecoderKind>> {
        match &self.decoder {
            None if self.dem.is_some() && self.streams.is_none() => Err(Error::InvalidSetting {
                key: "decoder",
                detail: "--dem given without --decoder (uf, matching or lut)".into(),
            }),
            None => Ok(None),
            Some(name) => Ok(Some(name.parse()?)),
        }
    }

    /// The soft NIC's settings: request slots hold the largest request accepted.
    pub fn softnic_config(&self) -> crate::softnic::SoftNicConfig {
        crate::softnic::SoftNicConfig {
            rx_slot_bytes: (crate::wire::HEADER_LEN + self.max_request_bytes).next_multiple_of(64)
                as u32,
            idle: self.idle,
            // `cores` = [forwarder, soft NIC, cpu-assisted proxy].
            nic_core: self.cores.get(1).copied(),
            proxy_core: self.cores.get(2).copied(),
            ..crate::softnic::SoftNicConfig::new(self.doorbell)
        }
    }

    /// The `gpu-direct` checks: a NIC whose queues the device side can poll (softnic, or
    /// rdma with the feature: a ConnectX, served by the kernel only), a device side
    /// (gpu-persistent, or cpu for the stand-in), one GPU, 1..=64 links.
    fn validate_data_path(&self) -> Result<()> {
        let bad = |key, detail: String| Err(Error::InvalidSetting { key, detail });
        if self.data_path == DataPath::CpuForwarded {
            if self.links != 1 {
                return bad(
                    "links",
                    format!(
                        "links = {}: several links need data_path = gpu-direct",
                        self.links
                    ),
                );
            }
            return Ok(());
        }
        if !(1..=crate::abi::MAX_LINKS).contains(&self.links) {
            return bad(
                "links",
                format!(
                    "links = {}: must be 1..={}",
                    self.links,
                    crate::abi::MAX_LINKS
                ),
            );
        }
        match self.transport {
            TransportKind::Softnic | TransportKind::Inproc => {}
            TransportKind::Rdma if cfg!(feature = "rdma") => {
                if self.topology != Topology::GpuPersistent {
                    return bad(
                        "topology",
                        format!(
                            "gpu-direct on a ConnectX (transport rdma) runs the GPU kernel: \
                             topology gpu-persistent, not {} (the CPU stand-in serves soft NIC \
                             queues)",
                            self.topology
                        ),
                    );
                }
            }
            TransportKind::Rdma => {
                return bad(
                    "data_path",
                    "gpu-direct on a ConnectX needs a build with `--features rdma` \
                     (docs/lab-gpu-direct.md); without it use transport softnic"
                        .to_string(),
                )
            }
            other => {
                return bad(
                    "data_path",
                    format!(
                        "gpu-direct needs NIC queues the device side polls: transport softnic, \
                         or rdma (a ConnectX, with the rdma feature), not {other}"
                    ),
                )
            }
        }
        if !matches!(self.topology, Topology::Cpu | Topology::GpuPersistent) {
            return bad(
                "data_path",
                format!(
                    "gpu-direct runs on topology gpu-persistent (the kernel) or cpu (the CPU \
                     stand-in), not {}",
                    self.topology
                ),
            );
        }
        if !self.gpus.is_empty() {
            return bad("gpus", "gpu-direct serves one GPU (--gpu)".to_string());
        }
        if self.topology == Topology::GpuPersistent {
            let per_slot = self.pollers_per_slot_or_default();
            if self.pollers > crate::gpu::direct::MAX_WARPS_PER_LINK || self.pollers % per_slot != 0
            {
                return bad(
                    "pollers",
                    format!(
                        "gpu-direct runs 1..={} poller warps per link, in groups that divide \
                         them; got {} pollers, {per_slot} per slot",
                        crate::gpu::direct::MAX_WARPS_PER_LINK,
                        self.pollers
                    ),
                );
            }
        }
        Ok(())
    }

    /// The `gpu-direct` service's settings: `links` links, the GPU's poller warps per link
    /// (`pollers`, `pollers_per_slot`), the doorbell, and cores: `cores` = [first soft NIC
    /// thread (link i's on that core + i), cpu-assisted proxy, then the CPU stand-in's
    /// threads in turn].
    pub fn direct_options(&self) -> crate::direct::DirectOptions {
        let mut o = crate::direct::DirectOptions::new(
            self.links,
            self.doorbell,
            self.max_request_bytes as u32,
        );
        o.pollers_per_link = self.pollers;
        o.pollers_per_slot = self.pollers_per_slot_or_default();
        o.queues.idle = self.idle;
        o.queues.nic_core = self.cores.first().copied();
        o.queues.proxy_core = self.cores.get(1).copied();
        o.stand_in_cores = self.cores.get(2..).unwrap_or_default().to_vec();
        if self.topology == Topology::GpuPersistent {
            o.gpu = Some(self.gpu_options());
        }
        o
    }

    /// Whether the GPU sends the responses itself: `gpu-persistent` behind the soft NIC
    /// with a `regular` or `blueflame` doorbell (the kernel rings it). With `cpu-assisted`,
    /// or any other topology, the forwarding thread hands responses to the NIC.
    pub fn device_posts(&self) -> bool {
        self.transport == TransportKind::Softnic
            && self.topology == Topology::GpuPersistent
            && self.doorbell != Doorbell::CpuAssisted
    }

    /// The loop's tunables.
    pub fn forward_config(&self) -> ForwardConfig {
        ForwardConfig {
            max_request_bytes: self.max_request_bytes,
            batch: self.batch,
            max_in_flight: self.max_in_flight,
            watchdog: Duration::from_micros(self.watchdog_us),
            queue_deadline: (self.queue_deadline_us > 0)
                .then(|| Duration::from_micros(self.queue_deadline_us)),
            idle: self.idle,
            ..ForwardConfig::default()
        }
    }

    pub fn duration(&self) -> Option<Duration> {
        self.duration_s.map(Duration::from_secs_f64)
    }

    pub fn stats_interval(&self) -> Option<Duration> {
        (self.stats_interval_s > 0.0).then(|| Duration::from_secs_f64(self.stats_interval_s))
    }
}

/// A decoder model path that can be read: a clear error for a missing file, a directory,
/// or one that cannot be opened.
fn check_model_file(path: &Path) -> Result<()> {
    let detail = match std::fs::metadata(path) {
        Ok(m) if m.is_file() => return Ok(()),
        Ok(m) if m.is_dir() => "is a directory; expected a Stim detector error model file".into(),
        Ok(_) => "is not a regular file; expected a Stim detector error model file".into(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => "no such file".into(),
        Err(e) => e.to_string(),
    };
    Err(Error::InvalidSetting {
        key: "dem",
        detail: format!("{}: {detail}", path.display()),
    })
}

/// `KIND` or `KIND:NAME` (see [`RunConfig::handlers`]) as (kind, registration name);
/// the kind must be a built-in handler.
pub fn handler_spec(spec: &str) -> Result<(&str, &str)> {
    let (kind, name) = spec.split_once(':').unwrap_or((spec, spec));
    if name.is_empty() {
        return Err(Error::InvalidSetting {
            key: "handlers",
            detail: format!("{spec:?}: expected KIND or KIND:NAME, e.g. parity:patch0"),
        });
    }
    Handler::by_name(kind)?;
    Ok((kind, name))
}

/// Parses `NAME=GPU` (a `--route` flag).
pub fn parse_route(s: &str) -> std::result::Result<(String, usize), String> {
    let (name, gpu) = s
        .split_once('=')
        .ok_or_else(|| format!("{s:?}: expected NAME=GPU, e.g. patch0=1"))?;
    let gpu = gpu
        .trim()
        .parse()
        .map_err(|_| format!("{s:?}: GPU index {gpu:?} is not a number"))?;
    let name = name.trim();
    if name.is_empty() {
        return Err(format!("{s:?}: empty function name"));
    }
    Ok((name.to_string(), gpu))
}

#[cfg(test)]
mod tests;
