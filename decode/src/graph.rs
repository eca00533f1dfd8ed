//! The matching graph, built from a detector error model the way PyMatching builds it, and
//! stored as flat arrays a GPU kernel can take as they are.
//!
//! # Construction (what PyMatching 2.4 `Matching.from_detector_error_model` does)
//!
//! 1. Every `error(p)` is split at `^`; each component becomes its own edge with the
//!    error's probability `p`: one detector = an edge to the boundary, two detectors = an edge
//!    between them. A detector named twice in a component cancels (mod 2). A component with
//!    no detector (an undetectable logical flip) is dropped, as are mechanisms with `p = 0`.
//!    A component with more than two detectors is refused with its line (PyMatching 2.4
//!    silently drops such hyperedges; refusing is safer: export with
//!    `decompose_errors=True`).
//! 2. Parallel edges (same endpoints, boundary counted as one endpoint) merge as independent
//!    mechanisms: `p = p1 (1 - p2) + p2 (1 - p1)`. The merged edge keeps the observable mask of
//!    the *first* edge seen, exactly like PyMatching's `MergeStrategy::Independent` ("keep the
//!    original fault ids"; checked with pymatching 2.4: `error(0.1) D0 D1 L0` then
//!    `error(0.2) D0 D1` gives one edge, p = 0.26, fault_ids {0}). Edges keep the order of
//!    their first appearance, so the arrays are deterministic.
//! 3. Weight `w = ln((1 - p) / p)`, quantized to an integer so every decoder (CPU or GPU)
//!    does exact integer arithmetic and gives bit-identical output:
//!    `weight = clamp(round(w * 2^WEIGHT_FRACTION_BITS), 1, WEIGHT_MAX)` (1/256 nat resolution;
//!    it fits a u16). A merged `p > 0.5` (a negative weight) is refused; `p = 0.5` clamps to 1.
//!
//! # Layout (all little fixed-width integers; a CUDA port copies these arrays verbatim)
//!
//! - Vertices `0..n` are detectors, vertex `n` ([`MatchingGraph::boundary`]) is the boundary.
//! - Edge `e`: `edge_u[e] < edge_v[e]` (u32; `edge_v[e] == n` for a boundary edge),
//!   `edge_weight[e]` (u32, in `1..=WEIGHT_MAX`), `edge_obs[e]` (u64 observable mask, bit k =
//!   `Lk`), `edge_p[e]` (f64, informational only; no decoder reads it).
//! - CSR adjacency over the `n + 1` vertices: the incident edges of `v` are
//!   `adj_edge[adj_offset[v]..adj_offset[v+1]]`, and `adj_nbr[i]` is the other endpoint of
//!   `adj_edge[i]`; within a row edges are in increasing edge index. `adj_pairs` holds the
//!   same CSR interleaved (`[edge, neighbour]` per entry), one cache access per entry for
//!   the CPU decoders. `adj_nbr_weight` holds `[neighbour, edge_weight]` per CSR entry (the
//!   CPU union-find's edge loops read the weight from the same cache line as the
//!   neighbour, and the edge id from `adj_edge` only when they need it).
//! - `boundary_edge[v]` (u32, `NO_EDGE` if none): the one edge between detector `v` and the
//!   boundary (parallel edges are merged, so there is at most one).
//! - A model of more than 64 observables keeps `edge_obs` for `L0..L63` and lists each edge's
//!   others (`L64` and up) in a CSR beside it ([`MatchingGraph::edge_high_observables`]):
//!   the CPU union-find decoder reads them through its correction's edges; the lookup table
//!   and the GPU decoders refuse such models.
#![forbid(unsafe_code)]

use std::collections::HashMap;

use super::dem::{Dem, MAX_DETECTORS, MAX_OBSERVABLES};
use crate::{Error, Result};

/// Fraction bits of the fixed-point weights: weight = round(ln((1-p)/p) * 2^8).
pub const WEIGHT_FRACTION_BITS: u32 = 8;
/// Largest quantized weight (p below about 1e-111 clamps here).
pub const WEIGHT_MAX: u32 = 0xFFFF;
/// "No edge" in u32 edge-index arrays.
pub const NO_EDGE: u32 = u32::MAX;

/// The quantized weight of an edge of probability `p` (0 < p <= 0.5):
/// `clamp(round(ln((1 - p) / p) * 2^WEIGHT_FRACTION_BITS), 1, WEIGHT_MAX)`.
pub fn quantize_weight(p: f64) -> u32 {
    let w = ((1.0 - p) / p).ln() * f64::from(1u32 << WEIGHT_FRACTION_BITS);
    if w.is_nan() {
        return WEIGHT_MAX;
    }
    w.round().clamp(1.0, f64::from(WEIGHT_MAX)) as u32
}

/// One edge, as given to [`MatchingGraph::from_edges`]: `v = None` is the boundary.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EdgeSpec {
    pub u: u32,
    pub v: Option<u32>,
    pub p: f64,
    pub observables: u64,
}

/// The matching graph in flat arrays (see the module docs for the layout).
#[derive(Debug, Clone, PartialEq)]
pub struct MatchingGraph {
    source: String,
    num_detectors: u32,
    num_observables: u32,
    edge_u: Vec<u32>,
    edge_v: Vec<u32>,
    edge_weight: Vec<u32>,
    edge_obs: Vec<u64>,
    edge_p: Vec<f64>,
    adj_offset: Vec<u32>,
    adj_edge: Vec<u32>,
    adj_nbr: Vec<u32>,
    adj_pairs: Vec<[u32; 2]>,
    adj_nbr_weight: Vec<[u32; 2]>,
    boundary_edge: Vec<u32>,
    /// More than 64 observables: edge `e` also flips `high_obs[high_offset[e]..high_offset[e
    /// + 1]]` (each `>= 64`, sorted). Empty otherwise.
    high_offset: Vec<u32>,
    high_obs: Vec<u32>,
}

/// Merges edges as they arrive (build time only; the decoders never hash).
struct Builder {
    n: u32,
    index: HashMap<(u32, u32), usize>,
    ends: Vec<(u32, u32)>,
    p: Vec<f64>,
    obs: Vec<u64>,
    /// Per edge, its observables from `L64` on; kept only for a model of more than 64.
    high: Vec<Vec<u32>>,
    wide: bool,
}

impl Builder {
    fn new(n: u32, num_observables: u32) -> Builder {
        Builder {
            n,
            index: HashMap::new(),
            ends: Vec::new(),
            p: Vec::new(),
            obs: Vec::new(),
            high: Vec::new(),
            wide: num_observables > 64,
        }
    }

    fn add(&mut self, a: u32, b: Option<u32>, p: f64, obs: u64, high: &[u32]) {
        if p <= 0.0 {
            return;
        }
        let b = b.unwrap_or(self.n);
        let key = (a.min(b), a.max(b));
        match self.index.get(&key) {
            Some(&e) => {
                let q = self.p[e];
                self.p[e] = q * (1.0 - p) + p * (1.0 - q);
            }
            None => {
                self.index.insert(key, self.ends.len());
                self.ends.push(key);
                self.p.push(p);
                self.obs.push(obs);
                if self.wide {
                    self.high.push(high.to_vec());
                }
            }
        }
    }
}

impl MatchingGraph {
    /// Builds the graph of a parsed model (see the module docs).
    pub fn from_dem(dem: &Dem) -> Result<MatchingGraph> {
        let mut b = Builder::new(dem.num_detectors, dem.num_observables);
        for err in &dem.errors {
            for c in &err.components {
                let (low, high) = (c.low_mask(), high_part(&c.observables));
                match c.detectors.as_slice() {
                    [] => {}
                    [a] => b.add(*a, None, err.p, low, high),
                    [a, c2] => b.add(*a, Some(*c2), err.p, low, high),
                    more => {
                        return Err(Error::Dem {
                            file: dem.source.clone(),
                            line: err.line,
                            detail: format!(
                                "a component of this error flips {} detectors (D{} D{} D{} ...); \
                                 matching needs at most 2 per `^`-separated component: export with \
                                 `circuit.detector_error_model(decompose_errors=True, flatten_loops=True)`",
                                more.len(),
                                more[0],
                                more[1],
                                more[2]
                            ),
                        })
                    }
                }
            }
        }
        Self::finish(dem.source.clone(), dem.num_observables, b)
    }

    /// Builds a graph from explicit edges (merged like DEM components); for tests and tools.
    pub fn from_edges(
        num_detectors: u32,
        num_observables: u32,
        edges: &[EdgeSpec],
    ) -> Result<MatchingGraph> {
        let bad = |detail: String| Error::DecoderModel {
            file: "<edges>".into(),
            detail,
        };
        if num_observables > 64 {
            return Err(bad(format!(
                "{num_observables} observables; explicit edges hold at most 64 (a model of up to \
                 {MAX_OBSERVABLES} comes from a detector error model)"
            )));
        }
        if num_detectors > MAX_DETECTORS {
            return Err(bad(format!(
                "{num_detectors} detectors; at most {MAX_DETECTORS} are supported"
            )));
        }
        let mut b = Builder::new(num_detectors, num_observables);
        for e in edges {
            let out_of_range = |d: u32| d >= num_detectors;
            if out_of_range(e.u) || e.v.is_some_and(out_of_range) || e.v == Some(e.u) {
                return Err(bad(format!(
                    "edge {e:?}: endpoints must be distinct detectors below {num_detectors}"
                )));
            }
            if !(0.0..=1.0).contains(&e.p) {
                return Err(bad(format!("edge {e:?}: probability not in [0, 1]")));
            }
            if num_observables < 64 && e.observables >> num_observables != 0 {
                return Err(bad(format!(
                    "edge {e:?}: observable mask uses more than {num_observables} observables"
                )));
            }
            b.add(e.u, e.v, e.p, e.observables, &[]);
        }
        Self::finish("<edges>".into(), num_observables, b)
    }

    /// The subgraph on the detectors with `keep[v]` (and the boundary), renumbered in
    /// order (the `i`-th kept detector becomes `i`), with the edges among them and their
    /// boundary edges in their order here and with the same probabilities, so the same
    /// weights and the same CSR order. Edges with an end outside `keep` are dropped. For
    /// [`super::observable_part`], which keeps whole components.
    pub fn restricted(&self, keep: &[bool]) -> Result<MatchingGraph> {
        let n = self.num_detectors as usize;
        assert_eq!(keep.len(), n, "one keep flag per detector");
        let mut index = vec![u32::MAX; n + 1];
        let mut m = 0u32;
        for (v, _) in keep.iter().enumerate().filter(|(_, &k)| k) {
            index[v] = m;
            m += 1;
        }
        index[n] = m;
        let mut b = Builder::new(m, self.num_observables);
        for e in 0..self.num_edges() {
            let (u, v) = (
                index[self.edge_u[e] as usize],
                index[self.edge_v[e] as usize],
            );
            if u != u32::MAX && v != u32::MAX {
                let high = self.edge_high_observables(e);
                b.add(
                    u,
                    (v != m).then_some(v),
                    self.edge_p[e],
                    self.edge_obs[e],
                    high,
                );
            }
        }
        Self::finish(self.source.clone(), self.num_observables, b)
    }

    fn finish(source: String, num_observables: u32, b: Builder) -> Result<MatchingGraph> {
        let n = b.n;
        let nv = n as usize + 1;
        let mut g = MatchingGraph {
            source,
            num_detectors: n,
            num_observables,
            edge_u: Vec::with_capacity(b.ends.len()),
            edge_v: Vec::with_capacity(b.ends.len()),
            edge_weight: Vec::with_capacity(b.ends.len()),
            edge_obs: b.obs,
            edge_p: b.p,
            adj_offset: vec![0; nv + 1],
            adj_edge: vec![0; 2 * b.ends.len()],
            adj_nbr: vec![0; 2 * b.ends.len()],
            adj_pairs: Vec::new(),
            adj_nbr_weight: Vec::new(),
            boundary_edge: vec![NO_EDGE; n as usize],
            high_offset: Vec::new(),
            high_obs: Vec::new(),
        };
        if b.wide {
            g.high_offset.reserve(b.high.len() + 1);
            g.high_offset.push(0);
            for h in &b.high {
                g.high_obs.extend_from_slice(h);
                g.high_offset.push(g.high_obs.len() as u32);
            }
        }
        if b.ends.len() >= (u32::MAX / 2) as usize {
            return Err(Error::DecoderModel {
                file: g.source,
                detail: "too many edges for u32 indices".into(),
            });
        }
        for (e, &(u, v)) in b.ends.iter().enumerate() {
            let p = g.edge_p[e];
            if p > 0.5 {
                let other = if v == n {
                    "the boundary".to_string()
                } else {
                    format!("D{v}")
                };
                return Err(Error::DecoderModel {
                    file: g.source,
                    detail: format!(
                        "edge D{u} - {other} has probability {p} > 0.5 (a negative weight); \
                         negative weights are not supported"
                    ),
                });
            }
            g.edge_u.push(u);
            g.edge_v.push(v);
            g.edge_weight.push(quantize_weight(p));
            g.adj_offset[u as usize + 1] += 1;
            g.adj_offset[v as usize + 1] += 1;
            if v == n {
                g.boundary_edge[u as usize] = e as u32;
            }
        }
        for i in 0..nv {
            g.adj_offset[i + 1] += g.adj_offset[i];
        }
        let mut fill: Vec<u32> = g.adj_offset[..nv].to_vec();
        for e in 0..g.edge_u.len() {
            let (u, v) = (g.edge_u[e], g.edge_v[e]);
            for (a, b) in [(u, v), (v, u)] {
                let at = fill[a as usize] as usize;
                g.adj_edge[at] = e as u32;
                g.adj_nbr[at] = b;
                fill[a as usize] += 1;
            }
        }
        g.adj_pairs = g
            .adj_edge
            .iter()
            .zip(&g.adj_nbr)
            .map(|(&e, &v)| [e, v])
            .collect();
        g.adj_nbr_weight = g
            .adj_edge
            .iter()
            .zip(&g.adj_nbr)
            .map(|(&e, &v)| [v, g.edge_weight[e as usize]])
            .collect();
        Ok(g)
    }

    /// Where the model came from (for messages).
    pub fn source(&self) -> &str {
        &self.source
    }
    pub fn num_detectors(&self) -> usize {
        self.num_detectors as usize
    }
    pub fn num_observables(&self) -> usize {
        self.num_observables as usize
    }
    /// The boundary vertex: `num_detectors()`.
    pub fn boundary(&self) -> u32 {
        self.num_detectors
    }
    pub fn num_edges(&self) -> usize {
        self.edge_u.len()
    }
    /// Lower endpoint of each edge (always a detector).
    pub fn edge_u(&self) -> &[u32] {
        &self.edge_u
    }
    /// Upper endpoint of each edge (`boundary()` for a boundary edge).
    pub fn edge_v(&self) -> &[u32] {
        &self.edge_v
    }
    /// Quantized weights, `1..=WEIGHT_MAX`.
    pub fn edge_weight(&self) -> &[u32] {
        &self.edge_weight
    }
    /// Observable masks (bit k = Lk).
    pub fn edge_obs(&self) -> &[u64] {
        &self.edge_obs
    }
    /// Merged probabilities (informational).
    pub fn edge_p(&self) -> &[f64] {
        &self.edge_p
    }
    /// CSR row offsets, `num_detectors() + 2` entries.
    pub fn adj_offset(&self) -> &[u32] {
        &self.adj_offset
    }
    /// CSR incident edge ids.
    pub fn adj_edge(&self) -> &[u32] {
        &self.adj_edge
    }
    /// CSR neighbours, parallel to `adj_edge`.
    pub fn adj_nbr(&self) -> &[u32] {
        &self.adj_nbr
    }
    /// `adj_edge` and `adj_nbr` interleaved: `[edge, neighbour]` per CSR entry.
    pub fn adj_pairs(&self) -> &[[u32; 2]] {
        &self.adj_pairs
    }
    /// `[neighbour, weight]` per CSR entry: `[adj_nbr[i], edge_weight[adj_edge[i]]]`.
    pub fn adj_nbr_weight(&self) -> &[[u32; 2]] {
        &self.adj_nbr_weight
    }
    /// The boundary edge of each detector, or `NO_EDGE`.
    pub fn boundary_edge(&self) -> &[u32] {
        &self.boundary_edge
    }
    /// Whether the model has more than 64 observables: [`MatchingGraph::edge_obs`] then holds
    /// `L0..L63` only, and [`MatchingGraph::edge_high_observables`] the rest.
    pub fn is_wide(&self) -> bool {
        self.num_observables > 64
    }
    /// The observables from `L64` on that edge `e` flips (sorted; empty for a model of at
    /// most 64 observables).
    pub fn edge_high_observables(&self, e: usize) -> &[u32] {
        match self.high_offset.get(e..e + 2) {
            Some(&[lo, hi]) => &self.high_obs[lo as usize..hi as usize],
            _ => &[],
        }
    }
    /// Whether edge `e` flips any observable.
    pub fn edge_flips_any(&self, e: usize) -> bool {
        self.edge_obs[e] != 0 || !self.edge_high_observables(e).is_empty()
    }
}

/// The observables from `L64` on of a sorted list.
fn high_part(observables: &[u32]) -> &[u32] {
    let at = observables.partition_point(|&k| k < 64);
    &observables[at..]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_components_merges_parallel_edges_like_pymatching() {
        let dem = Dem::parse(
            "error(0.1) D0 D1 L0\n\
             error(0.2) D0 D1\n\
             error(0.05) D0\n\
             error(0.03) D0 L1\n\
             error(0.01) D0 D1 ^ D2\n\
             error(0.01) D2 D1\n\
             error(0.4) L0\n\
             error(0) D2\n",
            "m.dem",
        )
        .unwrap();
        let g = MatchingGraph::from_dem(&dem).unwrap();
        // Same edges and probabilities as pymatching 2.4 gives for this model.
        assert_eq!(g.num_edges(), 4);
        assert_eq!(g.edge_u(), &[0, 0, 2, 1]);
        assert_eq!(g.edge_v(), &[1, 3, 3, 2]);
        assert_eq!(g.edge_obs(), &[1, 0, 0, 0]);
        let want = [0.2648, 0.077, 0.01, 0.01];
        for (p, w) in g.edge_p().iter().zip(want) {
            assert!((p - w).abs() < 1e-12, "{p} vs {w}");
        }
        assert_eq!(g.edge_weight()[2], quantize_weight(0.01));
        assert_eq!(g.boundary_edge(), &[1, NO_EDGE, 2]);
        // CSR: vertex 0 touches edges 0 and 1; the boundary (3) touches 1 and 2.
        let off = g.adj_offset();
        assert_eq!(&g.adj_edge()[off[0] as usize..off[1] as usize], &[0, 1]);
        assert_eq!(&g.adj_nbr()[off[0] as usize..off[1] as usize], &[1, 3]);
        assert_eq!(&g.adj_edge()[off[3] as usize..off[4] as usize], &[1, 2]);
        for (i, &[y, w]) in g.adj_nbr_weight().iter().enumerate() {
            assert_eq!(y, g.adj_nbr()[i]);
            assert_eq!(w, g.edge_weight()[g.adj_edge()[i] as usize]);
        }
        assert_eq!(g.adj_nbr_weight().len(), g.adj_edge().len());
    }

    #[test]
    fn weights_are_quantized_ln_odds() {
        assert_eq!(quantize_weight(0.5), 1);
        assert_eq!(quantize_weight(0.1), (9f64.ln() * 256.0).round() as u32);
        assert_eq!(quantize_weight(1e-300), WEIGHT_MAX);
        assert_eq!(quantize_weight(0.001), 1768);
    }

    #[test]
    fn hyperedges_and_negative_weights_are_refused() {
        let dem = Dem::parse("error(0.1) D0 D1\nerror(0.1) D0 D1 D2\n", "h.dem").unwrap();
        let e = MatchingGraph::from_dem(&dem).unwrap_err().to_string();
        assert!(
            e.starts_with("h.dem:2:") && e.contains("decompose_errors=True"),
            "{e}"
        );
        let dem = Dem::parse("error(0.6) D0 D1\n", "n.dem").unwrap();
        let e = MatchingGraph::from_dem(&dem).unwrap_err().to_string();
        assert!(e.contains("negative"), "{e}");
    }
}
