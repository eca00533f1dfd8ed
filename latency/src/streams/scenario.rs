//! Stream scenario files: which engine serves the streams, what the emulated QPU sends,
//! and what to sweep.
//!
//! ```toml
//! name = "streams-cpu"
//! description = "the CPU pool, 1-50 streams at d=5"
//!
//! [service]              # keys: SERVICE_KEYS
//! engine = "cpu-pool"
//! transport = "inproc"
//!
//! [streams]              # keys: STREAM_KEYS
//! distance = 5
//! rounds = 100000
//!
//! [[sweep]]              # each block: the cartesian product of its lists
//! streams = [1, 10, 50]
//! round_ns = [1000, 10000]
//! ```
//!
//! A file with a `[streams]` table is a stream scenario ([`is_stream_scenario`]);
//! `qfwd-latency sweep` runs either kind.
#![forbid(unsafe_code)]

use std::path::{Path, PathBuf};

use qfwd::forward::IdlePolicy;
use qfwd::transport::TransportKind;
use serde::{Deserialize, Serialize};
use toml::{Table, Value};

use crate::scenario::{point_count, point_indices, Axes};
use crate::{Error, Result};

/// What decodes the streams.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Engine {
    /// The CPU pool: a dispatcher and one decoder thread per core (`qfwd::stream`).
    CpuPool,
    /// Every stream's state on the GPU, served by a persistent kernel; all streams'
    /// rounds handed over in batches (one submission each, two in flight), behind a CPU
    /// dispatcher thread and a batching thread.
    Gpu,
    /// The same with a kernel launch per batch (the baseline the persistent kernel
    /// replaces).
    GpuLaunch,
}

impl Engine {
    pub fn as_str(self) -> &'static str {
        match self {
            Engine::CpuPool => "cpu-pool",
            Engine::Gpu => "gpu",
            Engine::GpuLaunch => "gpu-launch",
        }
    }
}

/// One fully specified stream measurement.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StreamPoint {
    // [service]
    #[serde(default = "d_engine")]
    pub engine: Engine,
    /// `inproc` (the in-process ring) or `udp` (loopback).
    #[serde(default = "d_transport")]
    pub transport: TransportKind,
    /// Decoder threads; 0 = one per core but the dispatcher's.
    #[serde(default)]
    pub workers: usize,
    /// Cores: the dispatcher, then the decoder threads.
    #[serde(default)]
    pub cores: Vec<usize>,
    #[serde(default)]
    pub idle: IdlePolicy,
    /// Requests each decoder thread's queue holds.
    #[serde(default = "d_queue_slots")]
    pub queue_slots: usize,
    /// GPU engines: threads decoding each window (a multiple of 32 up to 1024); 0 = the
    /// engine's default.
    #[serde(default)]
    pub gpu_threads: u32,
    /// Rounds per window; 0 = 2 x distance (docs/streaming.md: 3d decodes no better).
    #[serde(default)]
    pub window: u32,
    /// Rounds each window commits; 0 = distance.
    #[serde(default)]
    pub commit: u32,
    // [streams]
    /// Logical qubits streaming at once.
    #[serde(default = "d_streams")]
    pub streams: u32,
    /// Code distance: picks the shots (`shots`, `{distance}` replaced).
    #[serde(default = "d_distance")]
    pub distance: u32,
    /// Links: requests per cycle, each carrying its share of the streams.
    #[serde(default = "d_links")]
    pub links: u32,
    /// Cycle length, ns: every stream sends one round per cycle.
    #[serde(default = "d_round_ns")]
    pub round_ns: u64,
    /// Cycles sent (every stream sends one round each).
    #[serde(default = "d_rounds")]
    pub rounds: u64,
    /// Cycles before reaction times are kept.
    #[serde(default = "d_warmup_rounds")]
    pub warmup_rounds: u64,
    /// Spread the streams' windows over `commit` phases.
    #[serde(default = "d_true")]
    pub stagger: bool,
    /// Shots: `<shots>.dem`, `.b8`, `.obs.01`, with `{distance}` replaced.
    #[serde(default = "d_shots")]
    pub shots: String,
    /// Kept up = nothing refused or lost, and at the end no window waited longer than this.
    #[serde(default = "d_behind_limit_us")]
    pub behind_limit_us: u64,
    /// After the last cycle, how long to wait for the commits still owed.
    #[serde(default = "d_drain_ms")]
    pub drain_ms: u64,
    /// Pins the emulator's link threads to consecutive cores from this one (link i on
    /// `emulator_core + i`).
    #[serde(default)]
    pub emulator_core: Option<usize>,
    /// Pins link i's emulator thread to `emulator_cores[i]` (at least one core per link).
    #[serde(default)]
    pub emulator_cores: Vec<usize>,
    #[serde(default)]
    pub emulator_idle: IdlePolicy,
}

fn d_engine() -> Engine {
    Engine::CpuPool
}
fn d_transport() -> TransportKind {
    TransportKind::Inproc
}
fn d_queue_slots() -> usize {
    256
}
fn d_streams() -> u32 {
    1
}
fn d_distance() -> u32 {
    5
}
fn d_links() -> u32 {
    1
}
fn d_round_ns() -> u64 {
    1_000
}
fn d_rounds() -> u64 {
    100_000
}
fn d_warmup_rounds() -> u64 {
    2_000
}
fn d_true() -> bool {
    true
}
fn d_shots() -> String {
    "tests/fixtures/stream/surface_d{distance}_r100_z_p001".into()
}
fn d_behind_limit_us() -> u64 {
    1_000
}
fn d_drain_ms() -> u64 {
    2_000
}

/// Keys allowed in `[service]`.
pub const SERVICE_KEYS: &[&str] = &[
    "engine",
    "transport",
    "workers",
    "cores",
    "idle",
    "queue_slots",
    "gpu_threads",
    "window",
    "commit",
];

/// Keys allowed in `[streams]`.
pub const STREAM_KEYS: &[&str] = &[
    "streams",
    "distance",
    "links",
    "round_ns",
    "rounds",
    "warmup_rounds",
    "stagger",
    "shots",
    "behind_limit_us",
    "drain_ms",
    "emulator_core",
    "emulator_cores",
    "emulator_idle",
];

impl StreamPoint {
    pub fn defaults() -> StreamPoint {
        StreamPoint::deserialize(Value::Table(Table::new())).expect("every field has a default")
    }

    /// W: `window`, or 2 x distance.
    pub fn window_rounds(&self) -> u32 {
        if self.window == 0 {
            2 * self.distance
        } else {
            self.window
        }
    }

    /// C: `commit`, or the distance.
    pub fn commit_rounds(&self) -> u32 {
        if self.commit == 0 {
            self.distance
        } else {
            self.commit
        }
    }

    /// The cores of the emulator's link threads, link i on the i-th (empty: unpinned).
    pub fn emulator_core_list(&self) -> Vec<usize> {
        match self.emulator_core {
            _ if !self.emulator_cores.is_empty() => self.emulator_cores.clone(),
            Some(c) => (c..c + self.links as usize).collect(),
            None => Vec::new(),
        }
    }

    /// The shots' path prefix for this point's distance.
    pub fn shots_base(&self) -> PathBuf {
        PathBuf::from(self.shots.replace("{distance}", &self.distance.to_string()))
    }

    /// Checks what the types cannot.
    pub fn validate(&self) -> std::result::Result<(), String> {
        if !matches!(self.transport, TransportKind::Inproc | TransportKind::Udp) {
            return Err(format!(
                "transport {:?}: streams run over inproc or udp",
                self.transport.as_str()
            ));
        }
        if !(1..=1 << 20).contains(&self.streams) {
            return Err(format!("streams {} is not in 1 ..= 1048576", self.streams));
        }
        if !(3..=25).contains(&self.distance) {
            return Err(format!("distance {} is not in 3 ..= 25", self.distance));
        }
        if self.links == 0 || self.links > self.streams {
            return Err(format!(
                "links {} is not in 1 ..= streams ({})",
                self.links, self.streams
            ));
        }
        if self.emulator_core.is_some() && !self.emulator_cores.is_empty() {
            return Err("emulator_core and emulator_cores: give one of them".into());
        }
        if !self.emulator_cores.is_empty() && self.emulator_cores.len() < self.links as usize {
            return Err(format!(
                "emulator_cores lists {} cores for {} links: one core per link thread",
                self.emulator_cores.len(),
                self.links
            ));
        }
        if !(100..=1_000_000_000).contains(&self.round_ns) {
            return Err(format!("round_ns {} is not in 100 ..= 1e9", self.round_ns));
        }
        if self.rounds == 0 || self.warmup_rounds >= self.rounds {
            return Err(format!(
                "rounds ({}) must be more than warmup_rounds ({})",
                self.rounds, self.warmup_rounds
            ));
        }
        if self.gpu_threads % 32 != 0 || self.gpu_threads > 1024 {
            return Err(format!(
                "gpu_threads {} is not 0 (the engine's default) or a multiple of 32 up to 1024",
                self.gpu_threads
            ));
        }
        let (w, c) = (self.window_rounds(), self.commit_rounds());
        if !(2..=255).contains(&w) || c == 0 || c >= w {
            return Err(format!(
                "window {w} and commit {c}: need 1 <= commit < window <= 255"
            ));
        }
        Ok(())
    }

    /// `key=value` for the keys a sweep varied.
    pub fn label(&self, keys: &[String]) -> String {
        let table = Value::try_from(self).ok();
        keys.iter()
            .map(|k| {
                let v = table
                    .as_ref()
                    .and_then(|t| t.get(k))
                    .map(|v| match v {
                        Value::String(s) => s.clone(),
                        o => o.to_string(),
                    })
                    .unwrap_or_else(|| "-".into());
                format!("{k}={v}")
            })
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// A parsed stream scenario.
#[derive(Debug, Clone)]
pub struct StreamScenario {
    pub name: String,
    pub description: String,
    pub path: PathBuf,
    pub points: Vec<StreamPoint>,
    pub swept_keys: Vec<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    name: Option<String>,
    #[serde(default)]
    description: String,
    #[serde(default)]
    service: Table,
    streams: Table,
    #[serde(default)]
    sweep: Option<Sweeps>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum Sweeps {
    One(Table),
    Many(Vec<Table>),
}

/// Whether `text` is a stream scenario (it has a `[streams]` table).
pub fn is_stream_scenario(text: &str) -> bool {
    text.parse::<Table>()
        .is_ok_and(|t| matches!(t.get("streams"), Some(Value::Table(_))))
}

impl StreamScenario {
    pub fn load(path: &Path) -> Result<StreamScenario> {
        let text = std::fs::read_to_string(path).map_err(|source| Error::Io {
            path: path.to_path_buf(),
            source,
        })?;
        StreamScenario::parse(&text, path)
    }

    /// Parses and expands; every problem names the file and the key.
    pub fn parse(text: &str, path: &Path) -> Result<StreamScenario> {
        let err = |key: &str, reason: String| Error::Scenario {
            path: path.to_path_buf(),
            key: key.to_string(),
            reason,
        };
        let file: File = toml::from_str(text).map_err(|e| err("file", e.message().to_string()))?;
        for (section, table, keys) in [
            ("service", &file.service, SERVICE_KEYS),
            ("streams", &file.streams, STREAM_KEYS),
        ] {
            if let Some(k) = table.keys().find(|k| !keys.contains(&k.as_str())) {
                return Err(err(
                    &format!("{section}.{k}"),
                    format!("unknown key; known: {}", keys.join(", ")),
                ));
            }
        }
        let mut base = file.service.clone();
        base.extend(file.streams.clone());
        let blocks = match file.sweep {
            None => vec![Table::new()],
            Some(Sweeps::One(t)) => vec![t],
            Some(Sweeps::Many(v)) if v.is_empty() => vec![Table::new()],
            Some(Sweeps::Many(v)) => v,
        };
        let mut swept_keys = Vec::new();
        let mut points: Vec<StreamPoint> = Vec::new();
        for (b, block) in blocks.iter().enumerate() {
            let mut axes: Axes = Vec::new();
            for (k, v) in block {
                let at = format!("sweep[{}].{k}", b + 1);
                if !SERVICE_KEYS.contains(&k.as_str()) && !STREAM_KEYS.contains(&k.as_str()) {
                    return Err(err(&at, "not a stream scenario key".into()));
                }
                match v {
                    Value::Array(values) if !values.is_empty() => {
                        axes.push((k.clone(), values.clone()))
                    }
                    _ => {
                        return Err(err(
                            &at,
                            "a sweep key takes a non-empty list, e.g. [1, 10]".into(),
                        ))
                    }
                }
                if !swept_keys.contains(k) {
                    swept_keys.push(k.clone());
                }
            }
            let Some(count) = point_count(&axes) else {
                return Err(err(
                    &format!("sweep[{}]", b + 1),
                    "expands to too many points".into(),
                ));
            };
            for i in 0..count {
                let mut t = base.clone();
                for ((k, values), v) in axes.iter().zip(point_indices(&axes, i)) {
                    t.insert(k.clone(), values[v].clone());
                }
                let p = StreamPoint::deserialize(Value::Table(t))
                    .map_err(|e| err("point", e.message().to_string()))?;
                p.validate()
                    .map_err(|reason| err(&format!("point ({})", p.label(&swept_keys)), reason))?;
                if !points.contains(&p) {
                    points.push(p);
                }
            }
        }
        let name = file.name.unwrap_or_else(|| {
            path.file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_else(|| "streams".into())
        });
        Ok(StreamScenario {
            name,
            description: file.description,
            path: path.to_path_buf(),
            points,
            swept_keys,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<StreamScenario> {
        StreamScenario::parse(text, Path::new("s.toml"))
    }

    #[test]
    fn sweeps_expand_and_defaults_follow_the_distance() {
        let s = parse(
            "[service]\nengine = \"cpu-pool\"\n[streams]\nrounds = 5000\n[[sweep]]\nstreams = [1, 10]\ndistance = [5, 7]\n",
        )
        .unwrap();
        assert_eq!(s.points.len(), 4);
        assert_eq!((s.points[0].streams, s.points[0].distance), (1, 5));
        assert_eq!((s.points[1].streams, s.points[1].distance), (1, 7));
        assert_eq!(
            (s.points[1].window_rounds(), s.points[1].commit_rounds()),
            (14, 7)
        );
        assert_eq!(s.points[0].gpu_threads, 0, "the engine's default");
        assert!(s.points[3].shots_base().ends_with("surface_d7_r100_z_p001"));
        assert_eq!(s.swept_keys, vec!["streams", "distance"]);
        let s =
            parse("[service]\nengine = \"gpu\"\n[streams]\n[[sweep]]\ngpu_threads = [64, 256]\n")
                .unwrap();
        let threads: Vec<u32> = s.points.iter().map(|p| p.gpu_threads).collect();
        assert_eq!(threads, [64, 256]);
    }

    #[test]
    fn problems_name_the_key() {
        for (text, key) in [
            ("[streams]\nbogus = 1\n", "streams.bogus"),
            ("[service]\nstreams = 1\n[streams]\n", "service.streams"),
            ("[streams]\n[[sweep]]\nstreams = 3\n", "sweep[1].streams"),
            ("[streams]\nlinks = 5\n", "links"),
            (
                "[streams]\nrounds = 10\nwarmup_rounds = 10\n",
                "warmup_rounds",
            ),
            ("[service]\nwindow = 5\ncommit = 5\n[streams]\n", "commit"),
            ("[service]\ngpu_threads = 48\n[streams]\n", "gpu_threads"),
            ("[service]\nengine = \"fpga\"\n[streams]\n", "point"),
            (
                "[streams]\nstreams = 4\nlinks = 2\nemulator_cores = [3]\n",
                "emulator_cores",
            ),
            (
                "[streams]\nemulator_core = 1\nemulator_cores = [3]\n",
                "emulator_cores",
            ),
        ] {
            let e = parse(text).unwrap_err().to_string();
            assert!(
                e.contains(key) && e.contains("s.toml"),
                "want {key:?} in {e}"
            );
        }
    }

    #[test]
    fn emulator_cores_give_each_link_thread_its_own() {
        let s = parse(
            "[streams]\nstreams = 8\nlinks = 3\nemulator_core = 4\n[[sweep]]\nemulator_cores = [[1, 2, 5]]\n",
        );
        // A sweep key cannot be given twice over: emulator_core from [streams] stays.
        assert!(s.unwrap_err().to_string().contains("emulator_cores"));
        let s = parse("[streams]\nstreams = 8\nlinks = 3\nemulator_core = 4\n").unwrap();
        assert_eq!(s.points[0].emulator_core_list(), vec![4, 5, 6]);
        let s = parse("[streams]\nstreams = 8\nlinks = 2\nemulator_cores = [9, 1, 7]\n").unwrap();
        assert_eq!(s.points[0].emulator_core_list(), vec![9, 1, 7]);
        let s = parse("[streams]\nstreams = 8\nlinks = 2\n").unwrap();
        assert!(s.points[0].emulator_core_list().is_empty());
    }

    #[test]
    fn stream_scenarios_are_told_from_the_others() {
        assert!(is_stream_scenario("[streams]\nstreams = 3\n"));
        assert!(!is_stream_scenario("[forwarder]\ntransport = \"udp\"\n"));
        assert!(!is_stream_scenario("streams = 3\n"));
    }
}
