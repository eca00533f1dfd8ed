//! Scenario files: what forwarder to start, what load to send, and which parameters
//! to sweep.
//!
//! ```toml
//! name = "udp-loopback"
//! description = "qfwd over UDP on loopback"
//!
//! [forwarder]            # how qfwd runs (keys: FORWARDER_KEYS)
//! transport = "udp"
//! cores = [0]
//!
//! [load]                 # what the emulator sends (keys: LOAD_KEYS)
//! mode = "ping-pong"
//! samples = 20000
//!
//! [[sweep]]              # each block: the cartesian product of its lists
//! payload_bytes = [32, 256, 1024]
//! mode = ["ping-pong"]
//!
//! [[sweep]]              # blocks run one after the other
//! mode = ["open-loop"]
//! rate_hz = [10000, 50000]
//! ```
//!
//! Every problem is reported up front, with the file, the key and the reason, before
//! anything runs.
#![forbid(unsafe_code)]

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use qfwd::backend::Topology;
use qfwd::direct::DataPath;
use qfwd::forward::IdlePolicy;
use qfwd::limits;
use qfwd::transport::TransportKind;
use serde::{Deserialize, Serialize};
use toml::{Table, Value};

use crate::emulator::Mode;
use crate::{Error, Result};

/// How the forwarder under test is started.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Launch {
    /// A thread of the harness process (any transport).
    InProcess,
    /// The `qfwd run` binary as a child process on loopback (udp only).
    Child,
    /// Already running elsewhere (a lab host): requests go to `target` over udp.
    External,
}

/// One fully specified measurement: every key a scenario can set.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Point {
    // [forwarder]
    #[serde(default = "d_launch")]
    pub launch: Launch,
    #[serde(default = "d_topology")]
    pub topology: Topology,
    #[serde(default = "d_transport")]
    pub transport: TransportKind,
    /// UDP address for the forwarder; port 0 picks a free one.
    #[serde(default = "d_listen")]
    pub listen: SocketAddr,
    /// Cores for the forwarder (first = polling thread).
    #[serde(default)]
    pub cores: Vec<usize>,
    #[serde(default)]
    pub idle: IdlePolicy,
    /// Handler name the requests call (function_id = FNV-1a of it).
    #[serde(default = "d_handler")]
    pub handler: String,
    /// Address of an already running forwarder, for `launch = "external"`.
    #[serde(default)]
    pub target: Option<SocketAddr>,
    /// The `qfwd` binary for `launch = "child"` (default: next to this program, then PATH).
    #[serde(default)]
    pub command: Option<PathBuf>,
    /// `buffer` or `inline` (GPU topologies); "-" where it does not apply.
    #[serde(default = "d_dash")]
    pub rx_completion: String,
    /// Poller warps of the persistent kernel; 0 = the forwarder's default (8).
    #[serde(default)]
    pub pollers: u32,
    /// Warps polling each slot (must divide `pollers`); absent = min(2, pollers).
    #[serde(default)]
    pub pollers_per_slot: Option<u32>,
    /// GPU uf: table of low-weight syndromes up to this many defects (0 = off; absent =
    /// automatic).
    #[serde(default)]
    pub uf_table_max_defects: Option<u32>,
    /// GPU uf with the table: the split path is tried up to this many defects (absent =
    /// automatic).
    #[serde(default)]
    pub uf_split_max_defects: Option<u32>,
    /// GPU request slots; 0 = the forwarder's default (64).
    #[serde(default)]
    pub slots: usize,
    /// CUDA device index for GPU topologies.
    #[serde(default)]
    pub gpu_device: usize,
    /// `cpu-assisted`, `regular`, `blueflame`; "-" where it does not apply.
    #[serde(default = "d_dash")]
    pub doorbell: String,
    /// Decoder served and called: `uf` or `lut` (needs `dem` and `dets`); "-" = the
    /// parity handler with random payloads.
    #[serde(default = "d_dash")]
    pub decoder: String,
    /// Stim detector error model for `decoder`.
    #[serde(default)]
    pub dem: Option<PathBuf>,
    /// Recorded detection events (Stim `b8`, or `01`) replayed as requests; each answer is
    /// checked against the CPU reference decoder.
    #[serde(default)]
    pub dets: Option<PathBuf>,
    #[serde(default = "d_batch")]
    pub batch: usize,
    #[serde(default = "d_max_in_flight")]
    pub max_in_flight: usize,
    #[serde(default = "d_watchdog_us")]
    pub watchdog_us: u64,
    /// Requests that waited longer than this (µs) before the forwarder read them are
    /// answered -6 (overload) without being computed; 0 = off (the harness's default:
    /// a measurement shows a stall as latency, and counts it; `qfwd run` itself uses
    /// 10000).
    #[serde(default)]
    pub queue_deadline_us: u64,
    /// Several GPUs to route over, e.g. `"0,1"`: one backend per GPU, requests routed by
    /// function (with topology `cpu`: host shards, no GPU needed); `"-"` = one backend on
    /// `gpu_device`, unrouted.
    #[serde(default = "d_dash")]
    pub gpus: String,
    /// With `gpus`: `"NAME=GPU"` entries pinning functions to GPUs; the others are dealt
    /// round-robin over `gpus` in the order of `functions`.
    #[serde(default)]
    pub route: Vec<String>,
    /// Function names (logical patches) the requests are spread over, round-robin: the
    /// forwarder serves the handler (or the decoder) under each name. Empty = `handler`
    /// alone (or the decoder as `decode`).
    #[serde(default)]
    pub functions: Vec<String>,
    /// `cpu-forwarded` (a forwarding thread between the transport and the backend) or
    /// `gpu-direct` (the device side polls each link's receive queue and answers itself;
    /// transport `inproc` or `softnic`, topology `gpu-persistent` or `cpu` for the CPU
    /// stand-in).
    #[serde(default)]
    pub data_path: DataPath,
    /// gpu-direct: QPU links, each with its own receive queue and its own emulator thread
    /// (on `emulator_core` + i when pinned); the offered rate and the samples are split
    /// evenly over them.
    #[serde(default = "d_links")]
    pub links: u32,
    // [load]
    #[serde(default = "d_mode")]
    pub mode: Mode,
    /// Argument bytes per request (after the 24-byte header).
    #[serde(default = "d_payload")]
    pub payload_bytes: u32,
    /// Offered rate for open loop, requests/s (ignored in ping-pong: recorded as 0).
    #[serde(default)]
    pub rate_hz: u64,
    #[serde(default = "d_warmup")]
    pub warmup: u64,
    #[serde(default = "d_samples")]
    pub samples: u64,
    /// Open loop: run this long (sets samples = rate x duration - warmup).
    #[serde(default)]
    pub duration_s: Option<f64>,
    #[serde(default = "d_timeout_ms")]
    pub timeout_ms: u64,
    /// Core for the emulator thread.
    #[serde(default)]
    pub emulator_core: Option<usize>,
    /// `spin` or `yield` while the emulator waits.
    #[serde(default)]
    pub emulator_idle: IdlePolicy,
    /// Hostile datagrams (truncated, bad magic, wrong lengths, unknown functions, bad
    /// arguments) mixed in, per 100 requests, 0 ..= 50; each is checked to be dropped or
    /// answered as its kind expects.
    #[serde(default)]
    pub hostile_percent: f64,
}

fn d_launch() -> Launch {
    Launch::InProcess
}
fn d_topology() -> Topology {
    Topology::Cpu
}
fn d_transport() -> TransportKind {
    TransportKind::Inproc
}
fn d_listen() -> SocketAddr {
    "127.0.0.1:0".parse().expect("literal address")
}
fn d_handler() -> String {
    "parity".into()
}
fn d_dash() -> String {
    "-".into()
}
fn d_batch() -> usize {
    32
}
fn d_max_in_flight() -> usize {
    1024
}
fn d_watchdog_us() -> u64 {
    10_000
}
fn d_mode() -> Mode {
    Mode::PingPong
}
fn d_payload() -> u32 {
    32
}
fn d_warmup() -> u64 {
    1_000
}
fn d_samples() -> u64 {
    10_000
}

fn d_links() -> u32 {
    1
}

fn d_timeout_ms() -> u64 {
    1_000
}

/// Keys allowed in `[forwarder]`.
pub const FORWARDER_KEYS: &[&str] = &[
    "launch",
    "topology",
    "transport",
    "listen",
    "cores",
    "idle",
    "handler",
    "command",
    "target",
    "rx_completion",
    "pollers",
    "pollers_per_slot",
    "uf_table_max_defects",
    "uf_split_max_defects",
    "slots",
    "gpu_device",
    "doorbell",
    "decoder",
    "dem",
    "dets",
    "batch",
    "max_in_flight",
    "watchdog_us",
    "queue_deadline_us",
    "gpus",
    "route",
    "functions",
    "data_path",
    "links",
];

/// Keys allowed in `[load]`.
pub const LOAD_KEYS: &[&str] = &[
    "mode",
    "payload_bytes",
    "rate_hz",
    "warmup",
    "samples",
    "duration_s",
    "timeout_ms",
    "emulator_core",
    "emulator_idle",
    "hostile_percent",
];

impl Point {
    /// The point built from defaults alone (what `emulate` starts from).
    pub fn defaults() -> Point {
        Point::deserialize(Value::Table(Table::new())).expect("every field has a default")
    }

    /// Requests timed, after applying `duration_s` for open loop.
    pub fn timed_samples(&self) -> u64 {
        match (self.mode, self.duration_s) {
            (Mode::OpenLoop, Some(d)) => ((self.rate_hz as f64 * d) as u64)
                .saturating_sub(self.warmup)
                .max(1),
            _ => self.samples,
        }
    }

    /// The GPUs `gpus` lists (empty for `"-"`: not routed).
    pub fn gpu_list(&self) -> std::result::Result<Vec<usize>, String> {
        let g = self.gpus.trim();
        if g == "-" || g.is_empty() {
            return Ok(Vec::new());
        }
        g.split(',')
            .map(|x| {
                x.trim().parse().map_err(|_| {
                    format!(
                        "gpus {:?}: expected GPU indices like \"0,1\", or \"-\"",
                        self.gpus
                    )
                })
            })
            .collect()
    }

    /// The `route` entries, parsed.
    pub fn route_map(
        &self,
    ) -> std::result::Result<std::collections::BTreeMap<String, usize>, String> {
        self.route
            .iter()
            .map(|r| qfwd::config::parse_route(r).map_err(|e| format!("route {e}")))
            .collect()
    }

    /// Checks combinations the types cannot.
    pub fn validate(&self) -> std::result::Result<(), String> {
        let gpus = self.gpu_list()?;
        self.route_map()?;
        if gpus.is_empty() && !self.route.is_empty() {
            return Err("route needs gpus = \"0,1\" (the GPUs to route over)".into());
        }
        if let Some(f) = self
            .functions
            .iter()
            .find(|f| f.is_empty() || f.contains(':'))
        {
            return Err(format!("functions: {f:?} is not a function name"));
        }
        if self.mode == Mode::OpenLoop && self.rate_hz == 0 {
            return Err("open-loop needs rate_hz > 0".into());
        }
        if self.launch == Launch::Child && self.transport != TransportKind::Udp {
            return Err("launch = \"child\" needs transport = \"udp\" (the in-process ring cannot cross processes)".into());
        }
        if self.launch == Launch::External
            && (self.target.is_none() || self.transport != TransportKind::Udp)
        {
            return Err(
                "launch = \"external\" needs transport = \"udp\" and target = \"IP:port\"".into(),
            );
        }
        self.check_ranges()?;
        if self.decoder != "-" {
            let kind: qfwd::decode::DecoderKind = self
                .decoder
                .parse()
                .map_err(|_| format!("decoder {:?}: expected uf, matching or lut", self.decoder))?;
            if !kind.runs_on_gpu()
                && (self.topology != Topology::Cpu || self.data_path == DataPath::GpuDirect)
            {
                return Err(format!(
                    "decoder {kind} runs on topology cpu only (not {} / {:?}): use decoder = \"uf\" \
                     on the GPU",
                    self.topology, self.data_path
                ));
            }
            if self.dem.is_none() || self.dets.is_none() {
                return Err(
                    "a decoder point needs dem = \"FILE.dem\" and dets = \"FILE.b8\"".into(),
                );
            }
        }
        if self.doorbell != "-" {
            self.doorbell.parse::<qfwd::mlx5::Doorbell>()?;
        }
        if self.transport == TransportKind::Rdma {
            return Err("transport = \"rdma\" needs a RoCE NIC and a QPU-side client: see the README's lab procedure".into());
        }
        if self.transport == TransportKind::Softnic && self.launch != Launch::InProcess {
            return Err("transport = \"softnic\" runs in-process in the harness".into());
        }
        if self.data_path == DataPath::GpuDirect {
            if self.launch != Launch::InProcess
                || !matches!(
                    self.transport,
                    TransportKind::Inproc | TransportKind::Softnic
                )
            {
                return Err("data_path = \"gpu-direct\" runs in-process, transport inproc or softnic (each link's emulator is that link's NIC)".into());
            }
            if !matches!(self.topology, Topology::Cpu | Topology::GpuPersistent) {
                return Err("data_path = \"gpu-direct\" runs on topology gpu-persistent (the kernel) or cpu (the CPU stand-in)".into());
            }
            if !(1..=qfwd::abi::MAX_LINKS).contains(&self.links) {
                return Err(format!(
                    "links = {}: must be 1..={}",
                    self.links,
                    qfwd::abi::MAX_LINKS
                ));
            }
            if self.gpus != "-" {
                return Err(
                    "data_path = \"gpu-direct\" serves one GPU (gpu_device), not gpus".into(),
                );
            }
        } else if self.links != 1 {
            return Err("links > 1 needs data_path = \"gpu-direct\"".into());
        }
        if !matches!(self.rx_completion.as_str(), "-" | "buffer" | "inline") {
            return Err(format!(
                "rx_completion {:?}: expected buffer or inline",
                self.rx_completion
            ));
        }
        // The forwarder's own checks (GPU options, routes, names), up front: a point that
        // would fail at its start must not wait for the points before it to run.
        crate::sweep::run_config(self)
            .check_settings()
            .map_err(|e| e.to_string())
    }

    /// Every numeric key against its range (`qfwd::limits`), before anything is sized by
    /// it; the forwarder's keys share the ranges of `qfwd run`.
    fn check_ranges(&self) -> std::result::Result<(), String> {
        fn check<T: PartialOrd + Copy + std::fmt::Display>(
            limit: limits::Limit<T>,
            value: T,
        ) -> std::result::Result<(), String> {
            limit.check(value).map(drop).map_err(|e| e.to_string())
        }
        fn check_as<T: PartialOrd + Copy + std::fmt::Display>(
            limit: limits::Limit<T>,
            key: &str,
            value: T,
        ) -> std::result::Result<(), String> {
            limit
                .check_as(key, value)
                .map(drop)
                .map_err(|e| e.to_string())
        }
        check(limits::PAYLOAD_BYTES, self.payload_bytes)?;
        check(limits::WARMUP, self.warmup)?;
        check(limits::TIMEOUT_MS, self.timeout_ms)?;
        match self.duration_s {
            Some(d) => check(limits::LOAD_DURATION_S, d)?,
            None => check(limits::SAMPLES, self.samples)?,
        }
        if self.mode == Mode::OpenLoop {
            check(limits::RATE_HZ, self.rate_hz)?;
            // rate x duration, when it sets the count.
            check(limits::SAMPLES, self.timed_samples())?;
        }
        check(limits::HOSTILE_PERCENT, self.hostile_percent)?;
        check(limits::BATCH, self.batch)?;
        check(limits::MAX_IN_FLIGHT, self.max_in_flight)?;
        check(limits::WATCHDOG_US, self.watchdog_us)?;
        check(limits::QUEUE_DEADLINE_US, self.queue_deadline_us)?;
        check(limits::GPU, self.gpu_device)?;
        if self.pollers != 0 {
            check(limits::POLLERS, self.pollers)?;
        }
        if let Some(p) = self.pollers_per_slot {
            check(limits::POLLERS_PER_SLOT, p)?;
        }
        if self.slots != 0 {
            check(limits::SLOTS, self.slots)?;
        }
        if let Some(k) = self.uf_table_max_defects {
            check(limits::UF_TABLE_MAX_DEFECTS, k)?;
        }
        if let Some(k) = self.uf_split_max_defects {
            check(limits::UF_SPLIT_MAX_DEFECTS, k)?;
        }
        for (i, &c) in self.cores.iter().enumerate() {
            check_as(limits::CORE, &format!("cores[{i}]"), c)?;
        }
        if let Some(c) = self.emulator_core {
            check_as(limits::CORE, "emulator_core", c)?;
        }
        for (i, g) in self.gpu_list()?.into_iter().enumerate() {
            check_as(limits::GPU, &format!("gpus[{i}]"), g)?;
        }
        Ok(())
    }

    /// `key=value` for the keys a sweep varied, for progress lines and errors.
    pub fn label(&self, keys: &[String]) -> String {
        let table = Value::try_from(self).ok();
        keys.iter()
            .map(|k| {
                let v = table
                    .as_ref()
                    .and_then(|t| t.get(k))
                    .map(short_value)
                    .unwrap_or_else(|| "-".into());
                format!("{k}={v}")
            })
            .collect::<Vec<_>>()
            .join(" ")
    }
}

fn short_value(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// A parsed scenario: its points in run order.
#[derive(Debug, Clone)]
pub struct Scenario {
    pub name: String,
    pub description: String,
    pub path: PathBuf,
    pub points: Vec<Point>,
    /// The keys any sweep block varies (for labels).
    pub swept_keys: Vec<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ScenarioFile {
    name: Option<String>,
    #[serde(default)]
    description: String,
    #[serde(default)]
    forwarder: Table,
    #[serde(default)]
    load: Table,
    #[serde(default)]
    sweep: Option<SweepBlocks>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum SweepBlocks {
    One(Table),
    Many(Vec<Table>),
}

/// The most points one scenario may expand to (a typo guard).
pub const MAX_POINTS: usize = 10_000;

impl Scenario {
    /// Reads and expands a scenario file.
    pub fn load(path: &Path) -> Result<Scenario> {
        let text = std::fs::read_to_string(path).map_err(|source| Error::Io {
            path: path.to_path_buf(),
            source,
        })?;
        Scenario::parse(&text, path)
    }

    /// Parses scenario text; `path` names it in errors.
    pub fn parse(text: &str, path: &Path) -> Result<Scenario> {
        let err = |key: &str, reason: String| Error::Scenario {
            path: path.to_path_buf(),
            key: key.to_string(),
            reason,
        };
        let file: ScenarioFile = toml::from_str(text).map_err(|e| {
            let span = e
                .span()
                .map(|s| {
                    format!(
                        "line {}",
                        text[..s.start.min(text.len())].lines().count().max(1)
                    )
                })
                .unwrap_or_else(|| "file".into());
            err(&span, e.message().to_string())
        })?;
        let name = file.name.clone().unwrap_or_else(|| {
            path.file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_else(|| "scenario".into())
        });
        check_keys(&file.forwarder, FORWARDER_KEYS, "forwarder", &err)?;
        check_keys(&file.load, LOAD_KEYS, "load", &err)?;
        let mut base = file.forwarder.clone();
        base.extend(file.load.clone());

        let blocks = match file.sweep {
            None => vec![Table::new()],
            Some(SweepBlocks::One(t)) => vec![t],
            Some(SweepBlocks::Many(v)) if v.is_empty() => vec![Table::new()],
            Some(SweepBlocks::Many(v)) => v,
        };
        let mut swept_keys: Vec<String> = Vec::new();
        let mut points: Vec<Point> = Vec::new();
        for (b, block) in blocks.iter().enumerate() {
            let at = |k: &str| {
                if blocks.len() > 1 {
                    format!("sweep[{}].{k}", b + 1)
                } else {
                    format!("sweep.{k}")
                }
            };
            let axes = sweep_axes(block, &at, &err, &mut swept_keys)?;
            expand(&base, &axes, &at, &err, &mut points)?;
        }
        Ok(Scenario {
            name,
            description: file.description,
            path: path.to_path_buf(),
            points,
            swept_keys,
        })
    }
}

/// A sweep block's axes, each key checked to be sweepable and to list at least one value;
/// `swept_keys` gains the keys it had not seen. `at` names a key in errors.
fn sweep_axes(
    block: &Table,
    at: &impl Fn(&str) -> String,
    err: &impl Fn(&str, String) -> Error,
    swept_keys: &mut Vec<String>,
) -> Result<Axes> {
    let mut axes: Axes = Vec::new();
    for (k, v) in block {
        if !FORWARDER_KEYS.contains(&k.as_str()) && !LOAD_KEYS.contains(&k.as_str()) {
            return Err(err(
                &at(k),
                format!(
                    "not a sweepable key; known: {}, {}",
                    FORWARDER_KEYS.join(", "),
                    LOAD_KEYS.join(", ")
                ),
            ));
        }
        let Value::Array(values) = v else {
            return Err(err(
                &at(k),
                "a sweep key takes a list of values, e.g. [32, 64]".into(),
            ));
        };
        if values.is_empty() {
            return Err(err(
                &at(k),
                "empty list: the sweep would have no points".into(),
            ));
        }
        if !swept_keys.contains(k) {
            swept_keys.push(k.clone());
        }
        axes.push((k.clone(), values.clone()));
    }
    Ok(axes)
}

/// Adds the points of one sweep block (`base` with every combination of `axes`) to
/// `points`, each validated; a point already there is not added twice.
fn expand(
    base: &Table,
    axes: &Axes,
    at: &impl Fn(&str) -> String,
    err: &impl Fn(&str, String) -> Error,
    points: &mut Vec<Point>,
) -> Result<()> {
    let Some(count) = point_count(axes) else {
        return Err(err(
            &at("*"),
            format!("expands to more than {MAX_POINTS} points"),
        ));
    };
    for n in 0..count {
        let index = point_indices(axes, n);
        let mut t = base.clone();
        for (i, (k, values)) in axes.iter().enumerate() {
            t.insert(k.clone(), values[index[i]].clone());
        }
        let label = axes
            .iter()
            .enumerate()
            .map(|(i, (k, v))| format!("{k}={}", short_value(&v[index[i]])))
            .collect::<Vec<_>>()
            .join(" ");
        let where_ = if label.is_empty() {
            "point".to_string()
        } else {
            format!("point ({label})")
        };
        let mut p = Point::deserialize(Value::Table(t.clone())).map_err(|e| {
            let key = culprit(&t).unwrap_or_default();
            err(
                format!("{where_} {key}").trim_end(),
                e.message().to_string(),
            )
        })?;
        p.validate().map_err(|reason| err(&where_, reason))?;
        if p.mode == Mode::PingPong {
            p.rate_hz = 0; // ping-pong is paced by the answers
            p.duration_s = None;
        }
        if !points.contains(&p) {
            points.push(p);
        }
    }
    Ok(())
}

/// A sweep block's keys and their lists of values, in the order the block lists them.
pub(crate) type Axes = Vec<(String, Vec<Value>)>;

/// The points `axes` expand to (the product of their lengths), or `None` past
/// [`MAX_POINTS`].
pub(crate) fn point_count(axes: &Axes) -> Option<usize> {
    axes.iter()
        .try_fold(1usize, |acc, (_, v)| acc.checked_mul(v.len()))
        .filter(|&c| c <= MAX_POINTS)
}

/// Point `n` of `axes`: the index of each axis's value, the mixed-radix digits of `n`
/// (the first key listed varies slowest).
pub(crate) fn point_indices(axes: &Axes, n: usize) -> Vec<usize> {
    let mut index = vec![0usize; axes.len()];
    let mut rest = n;
    for (i, (_, values)) in axes.iter().enumerate().rev() {
        index[i] = rest % values.len();
        rest /= values.len();
    }
    index
}

/// The key whose value does not fit its type: every field has a default, so each key
/// can be tried alone.
fn culprit(t: &Table) -> Option<String> {
    t.iter().find_map(|(k, v)| {
        let mut one = Table::new();
        one.insert(k.clone(), v.clone());
        Point::deserialize(Value::Table(one))
            .is_err()
            .then(|| k.clone())
    })
}

fn check_keys(
    t: &Table,
    allowed: &[&str],
    section: &str,
    err: &impl Fn(&str, String) -> Error,
) -> Result<()> {
    for k in t.keys() {
        if !allowed.contains(&k.as_str()) {
            let hint = if FORWARDER_KEYS.contains(&k.as_str()) {
                " (it belongs in [forwarder])".to_string()
            } else if LOAD_KEYS.contains(&k.as_str()) {
                " (it belongs in [load])".to_string()
            } else {
                format!("; known keys: {}", allowed.join(", "))
            };
            return Err(err(&format!("{section}.{k}"), format!("unknown key{hint}")));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
