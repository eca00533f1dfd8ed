//! What the GPU decoder test binaries (tests/gpu_decoders.rs, tests/gpu_decoder_latency.rs)
//! share: the committed fixtures' shots as payloads, the `GpuOptions` their tests start
//! from (`QFWD_GPU`, `QFWD_UF_TABLE_K`, `QFWD_UF_SPLIT_MAX`), and each shot's device path
//! as the CPU twin computes it. Not part of `gpu_common/mod.rs` (every GPU test binary
//! includes that one): the two binaries include it with
//! `#[path = "gpu_common/decoders.rs"] mod decoders;`, next to `mod gpu_common;`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::gpu_common::gpu_index;
use qfwd::decode::uf_split::{self, decode_with_path, DecodeGroups, Distances, Path as UfPath};
use qfwd::decode::uf_table::{self, UfTable};
use qfwd::decode::{Decoder, DecoderKind, Shots, UfScratch};
use qfwd::gpu::GpuOptions;

pub fn env_or<T: std::str::FromStr>(key: &str, default: T) -> T {
    std::env::var(key)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

pub fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

/// A fixture's decoder and its shots as request payloads.
pub struct Fixture {
    /// Read by tests/gpu_decoders.rs only (the latency probe names its rows itself).
    #[allow(dead_code)]
    pub name: String,
    pub dec: Arc<Decoder>,
    pub payloads: Vec<Vec<u8>>,
}

pub fn load(name: &str, kind: DecoderKind, limit: usize) -> Fixture {
    let dir = fixtures_dir();
    let dec = Arc::new(Decoder::from_dem_path(&dir.join(format!("{name}.dem")), kind).unwrap());
    let mut shots =
        Shots::read(&dir.join(format!("{name}.b8")), dec.num_detectors(), None).unwrap();
    shots.truncate(limit);
    let payloads = (0..shots.len())
        .map(|i| dec.payload(shots.row(i)))
        .collect();
    Fixture {
        name: name.to_string(),
        dec,
        payloads,
    }
}

pub fn options() -> GpuOptions {
    GpuOptions {
        device: gpu_index(),
        poll_chunks: 8,
        uf_table_max_defects: table_k(),
        uf_split_max_defects: split_max(),
        ..GpuOptions::default()
    }
}

/// The split path's limit: `QFWD_UF_SPLIT_MAX`, or automatic.
fn split_max() -> Option<u32> {
    std::env::var("QFWD_UF_SPLIT_MAX").ok().map(|v| {
        v.parse()
            .expect("QFWD_UF_SPLIT_MAX: a number of defects, 0 ..= 32")
    })
}

/// The uf table setting of the "table" runs: `QFWD_UF_TABLE_K`, or automatic.
pub fn table_k() -> Option<u32> {
    std::env::var("QFWD_UF_TABLE_K")
        .ok()
        .and_then(|v| v.parse().ok())
}

/// The table's K for `dec` under `setting` (0: none), as the upload chooses it.
pub fn table_k_of(dec: &Decoder, setting: Option<u32>) -> u32 {
    let g = dec.decode_graph();
    match setting {
        None => uf_table::auto_max_defects_here(
            g.num_detectors(),
            g.num_edges(),
            &qfwd::host::table_workers(),
        ),
        Some(k) => k.min(g.num_detectors() as u32),
    }
}

/// The device path (empty, table, isolated, split, full) of each of `payloads`, as the CPU
/// twin computes it with the table of `setting` (the one the upload built: cached per
/// process), and whether a split shot is one only the second grouping answers, its first
/// having given up (`uf_split::GROUPINGS`).
pub fn shot_paths(
    dec: &Decoder,
    payloads: &[Vec<u8>],
    setting: Option<u32>,
) -> Vec<(UfPath, bool)> {
    // The graph and syndromes the device decodes: the observable part's, where there is one.
    let g = dec.decode_graph();
    let nb = dec.detector_bytes();
    let mut buf = Vec::new();
    let syndromes: Vec<Vec<u8>> = payloads
        .iter()
        .map(|p| dec.decode_input(&p[..nb], &mut buf).to_vec())
        .collect();
    let table =
        qfwd::decode::precompute::uf_table_for(g, setting, &qfwd::host::table_workers()).unwrap();
    let mut s = UfScratch::new(g);
    match &table {
        Some(t) => {
            let dist = (g.num_detectors() <= uf_split::MAX_SPLIT_DETECTORS)
                .then(|| Distances::build(g).unwrap());
            // The upload's limit (cached per process: the same one).
            let limit = dist.as_ref().map_or(0, |d| {
                qfwd::decode::precompute::uf_split_limit_for(g, t, d, split_max())
            });
            let mut t: &UfTable = t;
            let n = g.num_detectors() as u32;
            syndromes
                .iter()
                .map(|d| {
                    let path = decode_with_path(g, &mut s, dist.as_ref(), limit, &mut t, d).1;
                    let second = path == UfPath::Split && {
                        let defects: Vec<u32> = (0..n)
                            .filter(|&v| d[v as usize / 8] >> (v % 8) & 1 == 1)
                            .collect();
                        let dist = dist.as_ref().expect("the split path has its distances");
                        let first = uf_split::GROUPINGS[0];
                        uf_split::split_grouped(&defects, dist, &mut t, first).is_none()
                    };
                    (path, second)
                })
                .collect()
        }
        None => {
            // No table, no split path: empty, isolated or full.
            let mut none = DecodeGroups::new(g, 0);
            syndromes
                .iter()
                .map(|d| (decode_with_path(g, &mut s, None, 0, &mut none, d).1, false))
                .collect()
        }
    }
}
