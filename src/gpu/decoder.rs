//! GPU decoders, host side: a [`Decoder`]'s model flattened into the arrays
//! `device/decode.cu` reads, uploaded once to device memory when a backend starts, and the
//! parameter block (`qfwd_decoders`, constant memory) that tells the kernels where they are.
//!
//! The kernels dispatch on the handler's device code (lut 2, uf 3) and answer exactly what
//! [`Decoder::run_payload`] answers: bit-packed observable flips, `BAD_ARGUMENT` for a
//! payload that does not match the model. A decoder kind that was not uploaded answers
//! `UNKNOWN_FUNCTION`.
//!
//! **One model per decoder kind per backend**: the constant block holds one `lut` and one
//! `uf` model, so a backend serves at most one of each; [`DeviceDecoders::upload`] refuses
//! two of a kind (register one decoder per appliance, or build one backend per model).
//!
//! **Per-warp state** of `uf` (see [`UfScratchLayout`]): in dynamic shared memory after the
//! kernel's request/response staging when it fits the block's opt-in limit, else in a
//! global buffer with one area per warp ([`ScratchPlacement`]). Each area is zeroed by the
//! kernel at the start of every decode with a defect, so neither needs initializing.
//!
//! **Low-weight syndrome table** of `uf` ([`crate::decode::uf_table`]): the CPU uf's output
//! for every syndrome of at most `K` defects, precomputed at upload and read by the kernel
//! with one load when a request has at most `K` defects.
//! `K` comes from [`super::GpuOptions::uf_table_max_defects`] (`None`: automatic, see
//! [`crate::decode::uf_table::auto_max_defects_here`]; `Some(0)`: no table). The table and
//! the split path below are computed on the CPU by [`UfPrecompute`] (kept per process by
//! the graph's content, so backends started again for one model build them once); this
//! module only packs and uploads them.
//!
//! **Split path** of `uf` ([`crate::decode::uf_split`]): with the table, the boundary-free
//! distance matrix of the model (`n x n` u16, [`Distances`]) and the table's growth times
//! (u16 per entry) are uploaded too, so a request whose defects fall into independent groups
//! of at most `K` each is answered from the table, one entry per group. Off (`uf_dist` 0,
//! the full decoder runs) without a table or for a model above
//! [`uf_split::MAX_SPLIT_DETECTORS`] detectors, whose matrix would be too large.
//!
//! **Limits of the device models** (checked at upload; the CPU decoders have none of
//! them): vertex and edge ids fit 16 bits (at most 65534 detectors and 65535 edges), a
//! detector has at most [`MAX_DEGREE`] incident edges, `lut` at most 24 detectors (as on
//! the CPU).

use std::sync::Arc;

use cudarc::driver::sys;

use super::context::GpuContext;
use super::memory::DeviceBuffer;
use super::module::Module;
use crate::decode::graph::NO_EDGE;
use crate::decode::precompute::UfPrecompute;
use crate::decode::uf_lanes::LANE_SLOTS;
use crate::decode::uf_split::Distances;
use crate::decode::uf_table::UfTable;
use crate::decode::{Decoder, DecoderKind, MatchingGraph};
use crate::handler::{Handler, Registry};
use crate::{Error, Result};

/// The constant-memory symbol of the parameter block in `device/decode.cu`.
pub const PARAMS_SYMBOL: &str = "qfwd_decoders";
/// "No edge" / "no vertex" in the device's 16-bit ids.
pub const NO_ID: u32 = 0xFFFF;
/// "No forest edge" (a tree root) in the device's `tree` array.
pub const NO_TREE: u32 = u32::MAX;
/// Incident edges a lane loads at once.
pub const UNROLL: usize = 12;
/// Most incident edges of a detector on the device (five loads of [`UNROLL`]).
pub const MAX_DEGREE: usize = 60;
/// `DecoderParams::loaded` bit: a `lut` model is loaded.
pub const LOADED_LUT: u32 = 1;
/// `DecoderParams::loaded` bit: a `uf` model is loaded.
pub const LOADED_UF: u32 = 2;
/// Largest result (64 observables; the CPU decoders hold more, the GPU's refuse them).
pub const MAX_RESULT_BYTES: usize = 8;

// The device keeps a row's candidate edges in a u64 mask, a whole number of loads.
const _: () = assert!(MAX_DEGREE % UNROLL == 0 && MAX_DEGREE <= 64);

/// The parameter block of `device/decode.cu`, declared with the other structs the host
/// and the kernels share.
pub use crate::abi::DecoderParams;

/// "No budget" in [`DecoderParams::uf_max_defects`] and `lut_max_defects`.
pub const NO_BUDGET: u32 = u32::MAX;

/// A decoder's budget as the device reads it (0, no budget, is [`NO_BUDGET`]).
fn device_budget(d: &Decoder) -> u32 {
    match d.max_defects() {
        0 => NO_BUDGET,
        m => m,
    }
}

/// Where one warp's `uf` state lives, in bytes from the start of its area. `[0,
/// clear_bytes)` is zeroed at the start of each decode with a defect; the rest is written
/// before it is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UfScratchLayout {
    /// `cl`: u32 per vertex at 0: cluster root + 1 and flags (0: no cluster).
    pub visited: u32,
    pub defect: u32,
    pub vbits: u32,
    pub growth: u32,
    pub clear_bytes: u32,
    pub tree: u32,
    pub verts: u32,
    pub frontier: u32,
    pub order: u32,
    pub levels: u32,
    /// `cand`: u32 per edge, and the lanes' stage (uint2 per listed edge, `LANE_SLOTS`).
    pub cand: u32,
    /// `phi`: u64 per vertex, the cluster vertices' potentials.
    pub phi: u32,
    /// The whole area, a multiple of 16.
    pub bytes: u32,
}

impl UfScratchLayout {
    /// The layout for `num_detectors` detectors (plus the boundary vertex) and `num_edges`.
    pub fn new(num_detectors: usize, num_edges: usize) -> UfScratchLayout {
        let nv = num_detectors + 1;
        let r4 = |x: usize| x.next_multiple_of(4);
        let r16 = |x: usize| x.next_multiple_of(16);
        let visited = 4 * nv;
        let defect = visited + 4 * nv;
        let vbits = defect + 4 * nv;
        let growth = vbits + 4 * nv.div_ceil(32);
        let clear_bytes = r16(growth + 2 * num_edges);
        let tree = clear_bytes;
        let verts = tree + 4 * nv;
        let frontier = verts + r4(2 * nv);
        let order = frontier + r4(2 * nv);
        let levels = order + r4(2 * nv);
        // 8-aligned: the lanes' stage stores uint2.
        let cand = (levels + r4(2 * (nv + 1))).next_multiple_of(8);
        // `cand` is also the stage of the lanes' growth (device step 2'): 8 bytes an entry.
        let cand_bytes = (4 * num_edges.max(1)).max(8 * LANE_SLOTS);
        let phi = (cand + cand_bytes).next_multiple_of(8);
        let bytes = r16(phi + 8 * nv);
        let c = |x: usize| u32::try_from(x).expect("scratch offsets of a 16-bit model fit u32");
        UfScratchLayout {
            visited: c(visited),
            defect: c(defect),
            vbits: c(vbits),
            growth: c(growth),
            clear_bytes: c(clear_bytes),
            tree: c(tree),
            verts: c(verts),
            frontier: c(frontier),
            order: c(order),
            levels: c(levels),
            cand: c(cand),
            phi: c(phi),
            bytes: c(bytes),
        }
    }
}

/// A `uf` model in the device's layout (see `device/decode.cu`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UfDeviceModel {
    pub num_detectors: u32,
    pub result_bytes: u32,
    /// CSR row offsets, `num_detectors + 2` entries.
    pub adj_offset: Vec<u32>,
    /// Per CSR entry `[edge | neighbour << 16, weight]`.
    pub adj: Vec<[u32; 2]>,
    /// Per edge `[u | v << 16, weight]`.
    pub edges: Vec<[u32; 2]>,
    pub edge_obs: Vec<u64>,
    /// Per detector: its boundary edge | that edge's weight << 16 ([`NO_ID`] edge: none).
    pub boundary: Vec<u32>,
    /// Most incident edges of a detector.
    pub max_degree: u32,
    pub layout: UfScratchLayout,
}

impl UfDeviceModel {
    /// Flattens `g`; refuses a model outside the device limits (module docs).
    pub fn new(g: &MatchingGraph) -> Result<UfDeviceModel> {
        let refuse = |detail: String| Error::DecoderModel {
            file: g.source().to_string(),
            detail: format!("{detail}; the CPU uf decoder has no such limit (--backend cpu)"),
        };
        let n = g.num_detectors();
        let ne = g.num_edges();
        if g.num_observables() > 8 * MAX_RESULT_BYTES {
            return Err(refuse(format!(
                "{} observables: the GPU uf decoder holds at most {}",
                g.num_observables(),
                8 * MAX_RESULT_BYTES
            )));
        }
        if n + 1 > NO_ID as usize {
            return Err(refuse(format!(
                "{n} detectors: the GPU uf decoder holds at most {} (16-bit vertex ids)",
                NO_ID - 1
            )));
        }
        if ne > NO_ID as usize {
            return Err(refuse(format!(
                "{ne} edges: the GPU uf decoder holds at most {} (16-bit edge ids)",
                NO_ID
            )));
        }
        let off = g.adj_offset();
        let max_degree = (0..n).map(|v| off[v + 1] - off[v]).max().unwrap_or(0);
        if let Some(v) = (0..n).find(|&v| (off[v + 1] - off[v]) as usize > MAX_DEGREE) {
            return Err(refuse(format!(
                "detector D{v} has {} incident edges: the GPU uf decoder handles at most \
                 {MAX_DEGREE}",
                off[v + 1] - off[v]
            )));
        }
        let w = g.edge_weight();
        let adj = g
            .adj_edge()
            .iter()
            .zip(g.adj_nbr())
            .map(|(&e, &y)| [e | y << 16, w[e as usize]])
            .collect();
        let edges = g
            .edge_u()
            .iter()
            .zip(g.edge_v())
            .zip(w)
            .map(|((&u, &v), &wt)| [u | v << 16, wt])
            .collect();
        let boundary = g
            .boundary_edge()
            .iter()
            .map(|&e| {
                if e == NO_EDGE {
                    NO_ID
                } else {
                    e | w[e as usize] << 16
                }
            })
            .collect();
        Ok(UfDeviceModel {
            num_detectors: n as u32,
            result_bytes: g.num_observables().div_ceil(8) as u32,
            adj_offset: off.to_vec(),
            adj,
            edges,
            edge_obs: g.edge_obs().to_vec(),
            boundary,
            max_degree,
            layout: UfScratchLayout::new(n, ne),
        })
    }
}

/// A model ready for upload: its arrays in one blob of u64 words (each array 16-byte
/// aligned) and the parameter block with the arrays' *offsets into the blob* in place of
/// device addresses ([`DeviceModels::params_at`] adds the base).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceModels {
    pub blob: Vec<u64>,
    params: DecoderParams,
    /// Which address fields hold blob offsets.
    lut: bool,
    uf: bool,
    /// The `uf` model's low-weight syndrome table, if any.
    uf_table: Option<Arc<UfTable>>,
    /// Whether the split path's arrays (`uf_dist`, `uf_table_times`) are in the blob.
    uf_split: bool,
    /// Bytes of the graph's region of the blob ([`DecoderParams::uf_graph_bytes`] when
    /// the kernel stages it).
    uf_graph_bytes: u32,
}

struct Blob(Vec<u64>);

/// Most bytes of the split path's arrays the persistent kernel copies into each block's
/// shared memory (d = 5: its 28.8 KB distance matrix, the 2 KB index and the 21 KB of
/// entries of the groups of one or two defects; d = 7's matrix alone is 225 KB).
pub const STAGE_MAX_BYTES: usize = 96 * 1024;

/// The split path's hot arrays in one image, each 16-byte aligned: where a pass loads
/// from shared memory (~30 cycles) what it would load from L1 (~65), L2 (~310) or beyond
/// (results/archive/h200-split-group-sum.txt).
struct StageImage {
    bytes: Vec<u8>,
    index: u32,
    obs: u32,
    times: u32,
    entries: u32,
}

impl StageImage {
    /// The distance matrix, the index, and the entries of the groups of at most `S`
    /// defects for the largest `S <= K` that fits [`STAGE_MAX_BYTES`]; `None` when not
    /// even the one-defect entries fit with the matrix.
    fn new(dist: &Distances, t: &UfTable) -> Option<StageImage> {
        let al = |x: usize| x.next_multiple_of(16);
        let index = t.device_index();
        let rb = t.entry_bytes();
        let fixed = al(dist.as_slice().len() * 2) + al(index.len() * 4);
        let entries = (1..=t.max_defects())
            .rev()
            .map(|s| {
                if s == t.max_defects() {
                    t.len()
                } else {
                    index[s as usize + 1] as usize
                }
            })
            .find(|&e| fixed + al(e * rb) + al(e * 2) <= STAGE_MAX_BYTES)?;
        let mut bytes = u16_bytes(dist.as_slice());
        bytes.resize(al(bytes.len()), 0);
        let index_at = bytes.len();
        bytes.extend(index.iter().flat_map(|x| x.to_le_bytes()));
        bytes.resize(al(bytes.len()), 0);
        let obs_at = bytes.len();
        bytes.extend_from_slice(&t.entries()[..entries * rb]);
        bytes.resize(al(bytes.len()), 0);
        let times_at = bytes.len();
        bytes.extend(u16_bytes(&t.times()[..entries]));
        bytes.resize(al(bytes.len()), 0);
        Some(StageImage {
            bytes,
            index: index_at as u32,
            obs: obs_at as u32,
            times: times_at as u32,
            entries: entries as u32,
        })
    }
}

fn u16_bytes(xs: &[u16]) -> Vec<u8> {
    xs.iter().flat_map(|x| x.to_le_bytes()).collect()
}

impl Blob {
    /// Appends `bytes` at a 16-byte boundary; returns its byte offset.
    fn push_bytes(&mut self, bytes: &[u8]) -> u64 {
        if self.0.len() % 2 == 1 {
            self.0.push(0);
        }
        let at = self.0.len() as u64 * 8;
        for c in bytes.chunks(8) {
            let mut w = [0u8; 8];
            w[..c.len()].copy_from_slice(c);
            self.0.push(u64::from_le_bytes(w));
        }
        at
    }

    fn push_u32s(&mut self, xs: impl IntoIterator<Item = u32>) -> u64 {
        let bytes: Vec<u8> = xs.into_iter().flat_map(u32::to_le_bytes).collect();
        self.push_bytes(&bytes)
    }
}

/// The one decoder of each kind in `decoders` (the same decoder may come twice).
fn one_per_kind(decoders: &[Arc<Decoder>]) -> Result<(Option<&Decoder>, Option<&Decoder>)> {
    let (mut lut, mut uf) = (None::<&Decoder>, None::<&Decoder>);
    for d in decoders {
        let slot = match d.kind() {
            DecoderKind::Lut => &mut lut,
            DecoderKind::Uf => &mut uf,
            kind @ DecoderKind::Matching => return Err(kind.gpu_refusal("a GPU backend").into()),
        };
        if let Some(first) = slot {
            if !std::ptr::eq(*first, d.as_ref()) {
                return Err(Error::InvalidSetting {
                    key: "decoders",
                    detail: format!(
                        "two {} decoders ({} and {}) for one GPU backend: it holds one model \
                         per decoder kind; register one, or start one backend per model",
                        d.kind(),
                        first.graph().source(),
                        d.graph().source()
                    ),
                });
            }
        }
        *slot = Some(d.as_ref());
    }
    Ok((lut, uf))
}

/// Appends the `lut` model `d`'s table to `blob` and points `p` at it.
fn push_lut(blob: &mut Blob, p: &mut DecoderParams, d: &Decoder) {
    let table = d.lut().expect("a lut decoder has its table");
    p.lut_table = blob.push_bytes(table.table());
    p.lut_detectors = d.num_detectors() as u32;
    p.lut_entry_bytes = table.entry_bytes() as u32;
    p.lut_max_defects = device_budget(d);
    p.loaded |= LOADED_LUT;
}

/// What appending the `uf` model left beside its parameters.
struct UfUpload {
    /// Bytes of the graph's arrays (one region the kernel may stage whole).
    graph_bytes: u32,
    table: Option<Arc<UfTable>>,
    split: bool,
}

/// Appends the `uf` model `d` (its graph, observable part, syndrome table and split path)
/// to `blob` and points `p` at it.
fn push_uf(
    blob: &mut Blob,
    p: &mut DecoderParams,
    d: &Decoder,
    uf_table_max_defects: Option<u32>,
    uf_split_max_defects: Option<u32>,
) -> Result<UfUpload> {
    // The observable part's graph where the model has one: the kernel compacts each
    // request's syndrome onto it first (device/decode.cu step 0).
    let graph = d.decode_graph();
    let m = UfDeviceModel::new(graph)?;
    p.uf_adj_offset = blob.push_u32s(m.adj_offset.iter().copied());
    p.uf_adj = blob.push_u32s(m.adj.iter().flatten().copied());
    p.uf_edges = blob.push_u32s(m.edges.iter().flatten().copied());
    let obs: Vec<u8> = m.edge_obs.iter().flat_map(|o| o.to_le_bytes()).collect();
    p.uf_edge_obs = blob.push_bytes(&obs);
    p.uf_boundary = blob.push_u32s(m.boundary.iter().copied());
    // The graph's arrays, one region that the persistent kernel may stage whole.
    if blob.0.len() % 2 == 1 {
        blob.0.push(0);
    }
    let graph_bytes = u32::try_from(blob.0.len() as u64 * 8 - p.uf_adj_offset)
        .expect("a 16-bit model's graph is far below 4 GiB");
    p.uf_detectors = m.num_detectors;
    p.uf_wire_detectors = d.num_detectors() as u32;
    p.uf_max_defects = device_budget(d);
    if let Some(part) = d.observable_part() {
        p.uf_keep = blob.push_u32s(part.device_words().into_iter().flatten());
    }
    p.uf_result_bytes = m.result_bytes;
    copy_scratch_layout(p, &m.layout);
    p.uf_max_degree = m.max_degree;
    p.loaded |= LOADED_UF;
    let pre = UfPrecompute::for_graph(
        graph,
        uf_table_max_defects,
        uf_split_max_defects,
        &crate::host::table_workers(),
    )?;
    let split = push_uf_tables(blob, p, &pre);
    Ok(UfUpload {
        graph_bytes,
        table: pre.table,
        split,
    })
}

/// Points `p` at the parts of a warp's `uf` scratch.
fn copy_scratch_layout(p: &mut DecoderParams, l: &UfScratchLayout) {
    p.uf_scratch_bytes = l.bytes;
    p.uf_off_visited = l.visited;
    p.uf_off_defect = l.defect;
    p.uf_off_vbits = l.vbits;
    p.uf_off_growth = l.growth;
    p.uf_clear_bytes = l.clear_bytes;
    p.uf_off_tree = l.tree;
    p.uf_off_verts = l.verts;
    p.uf_off_frontier = l.frontier;
    p.uf_off_order = l.order;
    p.uf_off_levels = l.levels;
    p.uf_off_cand = l.cand;
    p.uf_off_phi = l.phi;
}

/// Appends the `uf` model's syndrome table and split path, if `pre` has them; whether
/// the split path is on.
fn push_uf_tables(blob: &mut Blob, p: &mut DecoderParams, pre: &UfPrecompute) -> bool {
    let mut uf_split = false;
    if let Some(t) = &pre.table {
        p.uf_table = blob.push_bytes(t.entries());
        p.uf_table_index = blob.push_u32s(t.device_index());
        p.uf_table_defects = t.max_defects();
        p.uf_table_entries = u32::try_from(t.len()).expect("a table holds at most 2^30 entries");
        // The split path: off (uf_dist 0) for a model too large for its matrix.
        if let Some(sp) = &pre.split {
            p.uf_split_max_defects = sp.max_defects as u32;
            p.uf_dist = blob.push_bytes(&u16_bytes(sp.dist.as_slice()));
            p.uf_table_times = blob.push_bytes(&u16_bytes(t.times()));
            uf_split = true;
            if let Some(st) = StageImage::new(&sp.dist, t) {
                p.uf_stage = blob.push_bytes(&st.bytes);
                p.uf_stage_bytes = st.bytes.len() as u32;
                p.uf_stage_index = st.index;
                p.uf_stage_obs = st.obs;
                p.uf_stage_times = st.times;
                p.uf_stage_entries = st.entries;
            }
        }
    }
    uf_split
}

impl DeviceModels {
    /// Flattens `decoders` (at most one per kind; none is fine), with the `uf` model's
    /// low-weight syndrome table of `uf_table_max_defects` defects (`None`: automatic,
    /// `Some(0)`: none; see [`UfPrecompute`]), the split path tried up to the automatic
    /// limit.
    pub fn new(
        decoders: &[Arc<Decoder>],
        uf_table_max_defects: Option<u32>,
    ) -> Result<DeviceModels> {
        DeviceModels::with_split_limit(decoders, uf_table_max_defects, None)
    }

    /// [`DeviceModels::new`], the split path tried up to `uf_split_max_defects` defects
    /// (`None`: automatic; see [`UfPrecompute`]).
    pub fn with_split_limit(
        decoders: &[Arc<Decoder>],
        uf_table_max_defects: Option<u32>,
        uf_split_max_defects: Option<u32>,
    ) -> Result<DeviceModels> {
        let mut blob = Blob(Vec::new());
        let mut p = DecoderParams::default();
        let (lut, uf) = one_per_kind(decoders)?;
        if let Some(d) = lut {
            push_lut(&mut blob, &mut p, d);
        }
        let mut uf_table = None;
        let mut uf_split = false;
        let mut uf_graph_bytes = 0u32;
        if let Some(d) = uf {
            let upload = push_uf(
                &mut blob,
                &mut p,
                d,
                uf_table_max_defects,
                uf_split_max_defects,
            )?;
            uf_graph_bytes = upload.graph_bytes;
            uf_table = upload.table;
            uf_split = upload.split;
        }
        if blob.0.is_empty() {
            blob.0.push(0);
        }
        Ok(DeviceModels {
            blob: blob.0,
            params: p,
            lut: lut.is_some(),
            uf: uf.is_some(),
            uf_table,
            uf_split,
            uf_graph_bytes,
        })
    }

    /// The `uf` model's low-weight syndrome table, if it has one.
    pub fn uf_table(&self) -> Option<&Arc<UfTable>> {
        self.uf_table.as_ref()
    }

    /// Whether the `uf` model has the split path (its table, times and distance matrix).
    pub fn uf_split(&self) -> bool {
        self.uf_split
    }

    /// Nothing to upload.
    pub fn is_empty(&self) -> bool {
        !self.lut && !self.uf
    }

    /// Bytes of one warp's `uf` state (0 without a `uf` model).
    pub fn uf_scratch_bytes(&self) -> u32 {
        self.params.uf_scratch_bytes
    }

    /// The parameter block with the blob uploaded at device address `base` (the scratch
    /// fields as they are: see [`DeviceDecoders::place`]).
    pub fn params_at(&self, base: u64) -> DecoderParams {
        let mut p = self.params;
        if self.lut {
            p.lut_table += base;
        }
        if self.uf {
            for a in [
                &mut p.uf_adj_offset,
                &mut p.uf_adj,
                &mut p.uf_edges,
                &mut p.uf_edge_obs,
                &mut p.uf_boundary,
            ] {
                *a += base;
            }
            if self.uf_table.is_some() {
                p.uf_table += base;
                p.uf_table_index += base;
            }
            if self.uf_split {
                p.uf_dist += base;
                p.uf_table_times += base;
            }
            if p.uf_stage_bytes != 0 {
                p.uf_stage += base;
            }
            if p.uf_keep != 0 {
                p.uf_keep += base;
            }
        }
        p
    }
}

/// Where each warp's `uf` state goes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ScratchPlacement {
    /// Shared memory when the block's total fits the device's opt-in limit, else global.
    #[default]
    Auto,
    /// Dynamic shared memory (an error when it does not fit).
    Shared,
    /// Device global memory, one area per warp (L1/L2-cached).
    Global,
}

/// Decoder models uploaded to one device for one kernel module. Owns the device memory;
/// the owner keeps it until the kernels that read it have stopped.
pub struct DeviceDecoders {
    models: DeviceModels,
    params: DecoderParams,
    _blob: DeviceBuffer,
    scratch: Option<DeviceBuffer>,
    placed: Option<ScratchPlacement>,
}

impl DeviceDecoders {
    /// Flattens and uploads `decoders` (synchronous; off the hot path), with the `uf`
    /// table and split path `options` set (`uf_table_max_defects`, `uf_split_max_defects`:
    /// [`DeviceModels::with_split_limit`]). `Ok(None)` when there are none.
    pub fn upload(
        ctx: &Arc<GpuContext>,
        decoders: &[Arc<Decoder>],
        options: &super::GpuOptions,
    ) -> Result<Option<DeviceDecoders>> {
        let models = DeviceModels::with_split_limit(
            decoders,
            options.uf_table_max_defects,
            options.uf_split_max_defects,
        )?;
        if models.is_empty() {
            return Ok(None);
        }
        let blob = DeviceBuffer::zeroed(ctx, models.blob.len() * 8)?;
        blob.write_u64s(&models.blob)?;
        let params = models.params_at(blob.device_ptr());
        Ok(Some(DeviceDecoders {
            models,
            params,
            _blob: blob,
            scratch: None,
            placed: None,
        }))
    }

    /// The parameter block as the kernels will see it.
    pub fn params(&self) -> &DecoderParams {
        &self.params
    }

    /// The `uf` model's low-weight syndrome table on the device, if any.
    pub fn uf_table(&self) -> Option<&Arc<UfTable>> {
        self.models.uf_table()
    }

    /// Where the `uf` state went (`None` before [`DeviceDecoders::place`], or without uf).
    pub fn placement(&self) -> Option<ScratchPlacement> {
        self.placed
    }

    /// Places the per-warp `uf` state for a kernel launched with `warps_per_block`-warp
    /// blocks, `total_warps` warps in all, whose blocks already use `staging_bytes` of
    /// dynamic shared memory (the decoder's areas follow it), and, for a kernel that
    /// copies them at start (`stage`: the persistent kernel), the split path's image
    /// ([`DecoderParams::uf_stage`]) and then the graph
    /// ([`DecoderParams::uf_graph_bytes`]) after them, each when it fits. Returns the
    /// dynamic shared bytes to add per block (0 with the state in global memory and
    /// nothing staged, or without a `uf` model).
    pub fn place(
        &mut self,
        ctx: &Arc<GpuContext>,
        placement: ScratchPlacement,
        staging_bytes: u32,
        warps_per_block: u32,
        total_warps: u32,
        stage: bool,
    ) -> Result<u32> {
        let per_warp = self.models.uf_scratch_bytes();
        if per_warp == 0 {
            return Ok(0);
        }
        let limit = ctx.attribute(
            sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
        )?;
        let scratch = self.place_scratch(
            ctx,
            placement,
            staging_bytes,
            warps_per_block,
            total_warps,
            limit,
        )?;
        let limit = limit.max(0) as u64;
        let mut used = staging_bytes + scratch;
        let image = self.params.uf_stage_bytes;
        if stage && image != 0 && u64::from(used) + u64::from(image) <= limit {
            self.params.uf_stage_offset = used;
            used += image;
        } else {
            self.params.uf_stage_bytes = 0;
            self.params.uf_stage_offset = 0;
        }
        // The graph after it: what the growth rounds, the isolated step and the forest load
        // in chains (d = 7: 52 KB; its split image does not fit, the graph does).
        let graph = self.models.uf_graph_bytes;
        if stage && graph != 0 && u64::from(used) + u64::from(graph) <= limit {
            self.params.uf_graph_bytes = graph;
            self.params.uf_graph_offset = used;
            used += graph;
        } else {
            self.params.uf_graph_bytes = 0;
            self.params.uf_graph_offset = 0;
        }
        Ok(used - staging_bytes)
    }

    /// Whether the kernel copies the split path's image into shared memory (after
    /// [`DeviceDecoders::place`]).
    pub fn staged(&self) -> bool {
        self.params.uf_stage_bytes != 0
    }

    /// Whether the kernel copies the graph into shared memory (after
    /// [`DeviceDecoders::place`]).
    pub fn graph_staged(&self) -> bool {
        self.params.uf_graph_bytes != 0
    }

    /// [`DeviceDecoders::place`]'s per-warp state (`limit`: the shared memory a block may
    /// use on this device).
    fn place_scratch(
        &mut self,
        ctx: &Arc<GpuContext>,
        placement: ScratchPlacement,
        staging_bytes: u32,
        warps_per_block: u32,
        total_warps: u32,
        limit: i32,
    ) -> Result<u32> {
        let per_warp = self.models.uf_scratch_bytes();
        let extra = u64::from(per_warp) * u64::from(warps_per_block);
        let fits = u64::from(staging_bytes) + extra <= limit.max(0) as u64;
        let shared = match placement {
            ScratchPlacement::Auto => fits,
            ScratchPlacement::Shared if fits => true,
            ScratchPlacement::Shared => {
                return Err(Error::InvalidSetting {
                    key: "decoder scratch",
                    detail: format!(
                        "{warps_per_block} warps x {per_warp} B of uf state + {staging_bytes} B \
                         of staging exceed the {limit} B of shared memory a block may use: use \
                         fewer warps per block, or global scratch"
                    ),
                })
            }
            ScratchPlacement::Global => false,
        };
        if shared {
            self.params.uf_scratch = 0;
            self.params.uf_scratch_warps = 0;
            self.params.uf_smem_offset = staging_bytes;
            self.placed = Some(ScratchPlacement::Shared);
            Ok(extra as u32)
        } else {
            let buf = DeviceBuffer::zeroed(ctx, per_warp as usize * total_warps.max(1) as usize)?;
            self.params.uf_scratch = buf.device_ptr();
            self.params.uf_scratch_warps = total_warps;
            self.params.uf_smem_offset = 0;
            self.scratch = Some(buf);
            self.placed = Some(ScratchPlacement::Global);
            Ok(0)
        }
    }

    /// Writes the parameter block into `module`'s constant memory (before any launch).
    pub fn install(&self, module: &Module) -> Result<()> {
        module.write_global(PARAMS_SYMBOL, &self.params.to_bytes())
    }
}

/// Writes "no decoder loaded" into `module`'s parameter block: a module whose backend was
/// given no decoders answers decoder requests with `UNKNOWN_FUNCTION`, whatever the block
/// held before (constant memory starts zeroed, but say so explicitly).
pub fn install_none(module: &Module) -> Result<()> {
    module.write_global(PARAMS_SYMBOL, &DecoderParams::default().to_bytes())
}

/// The distinct decoders of `registry`, in registration order: what a GPU backend serving
/// it must upload.
pub fn registry_decoders(registry: &Registry) -> Vec<Arc<Decoder>> {
    let mut out: Vec<Arc<Decoder>> = Vec::new();
    for r in registry.entries() {
        if let Handler::Decoder(d) = &r.handler {
            if !out.iter().any(|o| Arc::ptr_eq(o, d)) {
                out.push(Arc::clone(d));
            }
        }
    }
    out
}

/// Chunks (16 B) a poll must read for `decoders`' payloads to arrive in one PCIe read
/// (inline layout: 12 data bytes per chunk after the 8-byte header): a lower bound for
/// [`super::GpuOptions::poll_chunks`].
pub fn poll_chunks_for(decoders: &[Arc<Decoder>]) -> u32 {
    decoders
        .iter()
        .map(|d| (8 + d.payload_len()).div_ceil(12) as u32)
        .max()
        .unwrap_or(1)
        .clamp(1, 32)
}

#[cfg(test)]
mod tests;
