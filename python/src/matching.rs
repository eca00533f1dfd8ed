//! What `qfwd.Matching` needs beyond the decoder's flips, kept out of `qfwd-decode` because
//! they follow PyMatching's Python API rather than the appliance's:
//!
//! - [`Whole`]: the decode of the *whole* graph with the weight of its correction
//!   (PyMatching's `return_weight`: the sum of its edges' `ln((1 - p) / p)`). The decoder
//!   itself runs on the graph's observable part, which drops the components no observable
//!   crosses; their corrections weigh too. `uf` weighs its correction's edges exactly;
//!   `matching` gives the least weight in the graph's quantized units (1/256 nat an edge).
//!   A matching model of more than 64 observables (a check matrix's fault ids) is decoded
//!   once per 64 of them, each pass on a copy of the graph carrying those 64: the passes
//!   see the same edges, weights and order, so they find the same correction.
//! - [`ClosedComponents`]: the graph's components with no boundary edge. A syndrome of odd
//!   parity in one has no perfect matching; PyMatching raises `ValueError` for it, and so
//!   does `qfwd.Matching` (the decoders would answer something).
#![forbid(unsafe_code)]

use qfwd_decode::graph::{EdgeSpec, WEIGHT_FRACTION_BITS};
use qfwd_decode::{DecoderKind, MatchingGraph, MatchingScratch, UfScratch};

/// "Not in a closed component".
const OPEN: u32 = u32::MAX;

/// At most this many edges in all the copies of a wide model's graph (about 80 bytes each).
const MAX_COPIED_EDGES: usize = 1 << 22;

/// How `qfwd.Matching` decodes the whole graph, shared by its threads.
pub enum Whole {
    /// Union-find; `ln((1 - p) / p)` of each edge.
    Uf { weights: Vec<f64> },
    /// Exact matching on the model's graph (`chunks` empty), or on one copy per 64
    /// observables, copy `c` carrying `L(64c)..L(64c + 63)` as `L0..L63`.
    Matching { chunks: Vec<MatchingGraph> },
}

/// One thread's working memory of [`Whole::decode`].
pub enum WholeScratch {
    Uf {
        uf: Box<UfScratch>,
        correction: Vec<u32>,
    },
    Matching(Box<MatchingScratch>),
}

impl Whole {
    /// The whole-graph decoder of `kind` on `graph` (`None`: `lut`, which keeps no
    /// correction), or why a wide model is too large for it.
    pub fn of(graph: &MatchingGraph, kind: DecoderKind) -> Result<Option<Whole>, String> {
        Ok(match kind {
            DecoderKind::Uf => Some(Whole::Uf {
                weights: edge_weights(graph),
            }),
            DecoderKind::Matching => Some(Whole::Matching {
                chunks: observable_chunks(graph)?,
            }),
            _ => None,
        })
    }

    /// Whether matching decodes in passes of 64 observables.
    pub fn in_passes(&self) -> bool {
        matches!(self, Whole::Matching { chunks } if !chunks.is_empty())
    }

    pub fn scratch(&self, graph: &MatchingGraph) -> WholeScratch {
        match self {
            Whole::Uf { .. } => WholeScratch::Uf {
                uf: Box::new(UfScratch::new(graph)),
                correction: Vec::new(),
            },
            Whole::Matching { .. } => WholeScratch::Matching(Box::new(MatchingScratch::new(graph))),
        }
    }

    /// Decodes one bit-packed syndrome of `graph`, writes the flips of every observable
    /// into `out` (`ceil(observables / 8)` bytes, LSB first) and returns the correction's
    /// weight in nats.
    pub fn decode(
        &self,
        graph: &MatchingGraph,
        scratch: &mut WholeScratch,
        dets: &[u8],
        out: &mut [u8],
    ) -> f64 {
        match (self, scratch) {
            (Whole::Uf { weights }, WholeScratch::Uf { uf, correction }) => {
                let mask = uf.decode_correction(graph, dets, correction);
                write_mask(mask, out);
                let mut weight = 0.0;
                for &e in correction.iter() {
                    weight += weights[e as usize];
                    for &k in graph.edge_high_observables(e as usize) {
                        out[k as usize / 8] ^= 1 << (k % 8);
                    }
                }
                weight
            }
            (Whole::Matching { chunks }, WholeScratch::Matching(m)) if chunks.is_empty() => {
                let r = m.decode_bits(graph, dets);
                write_mask(r.obs, out);
                nats(r.weight)
            }
            (Whole::Matching { chunks }, WholeScratch::Matching(m)) => {
                let mut weight = 0;
                for (c, g) in chunks.iter().enumerate() {
                    let r = m.decode_bits(g, dets);
                    write_mask(r.obs, out.get_mut(8 * c..).unwrap_or(&mut []));
                    debug_assert!(c == 0 || r.weight == weight, "passes disagree");
                    weight = r.weight;
                }
                nats(weight)
            }
            _ => unreachable!("a scratch of another decoder"),
        }
    }
}

/// A weight in the graph's quantized units, in nats.
fn nats(weight: u64) -> f64 {
    weight as f64 / f64::from(1u32 << WEIGHT_FRACTION_BITS)
}

/// `mask`'s bytes, LSB first, into `out` (as many as it holds, at most 8).
fn write_mask(mask: u64, out: &mut [u8]) {
    for (byte, m) in out.iter_mut().zip(mask.to_le_bytes()) {
        *byte = m;
    }
}

/// The weight of every edge of a graph, `ln((1 - p) / p)` of its merged probability.
pub fn edge_weights(graph: &MatchingGraph) -> Vec<f64> {
    graph
        .edge_p()
        .iter()
        .map(|&p| ((1.0 - p) / p).ln())
        .collect()
}

/// For a model of more than 64 observables, one copy of `graph` per 64 of them (the same
/// edges in the same order, so the same weights and adjacency), copy `c` carrying
/// `L(64c)..L(64c + 63)`; none for a model of at most 64.
fn observable_chunks(graph: &MatchingGraph) -> Result<Vec<MatchingGraph>, String> {
    if !graph.is_wide() {
        return Ok(Vec::new());
    }
    let k = graph.num_observables();
    let passes = k.div_ceil(64);
    if passes.saturating_mul(graph.num_edges()) > MAX_COPIED_EDGES {
        return Err(format!(
            "the matching decoder decodes a model of {k} observables (fault ids) in {passes} \
             passes of 64, each on a copy of its {} edges: more than {MAX_COPIED_EDGES} edges \
             in all; use decoder=\"uf\"",
            graph.num_edges()
        ));
    }
    let boundary = graph.boundary();
    let n = graph.num_detectors() as u32;
    (0..passes)
        .map(|c| {
            let edges: Vec<EdgeSpec> = (0..graph.num_edges())
                .map(|e| {
                    let observables = if c == 0 {
                        graph.edge_obs()[e]
                    } else {
                        graph
                            .edge_high_observables(e)
                            .iter()
                            .filter(|&&o| o as usize / 64 == c)
                            .fold(0u64, |m, &o| m | 1 << (o % 64))
                    };
                    let v = graph.edge_v()[e];
                    EdgeSpec {
                        u: graph.edge_u()[e],
                        v: (v != boundary).then_some(v),
                        p: graph.edge_p()[e],
                        observables,
                    }
                })
                .collect();
            let width = (k - 64 * c).min(64) as u32;
            MatchingGraph::from_edges(n, width, &edges).map_err(|e| e.to_string())
        })
        .collect()
}

/// The components of a graph that no boundary edge reaches.
pub struct ClosedComponents {
    /// Per detector: its closed component, or `OPEN`.
    of: Vec<u32>,
    count: usize,
}

impl ClosedComponents {
    pub fn of(graph: &MatchingGraph) -> ClosedComponents {
        let n = graph.num_detectors();
        let boundary = graph.boundary();
        let mut parent: Vec<u32> = (0..=n as u32).collect();
        fn find(parent: &mut [u32], mut v: u32) -> u32 {
            while parent[v as usize] != v {
                let up = parent[parent[v as usize] as usize];
                parent[v as usize] = up;
                v = up;
            }
            v
        }
        // The boundary is a vertex like the others here: a component that reaches it is open.
        for (&u, &v) in graph.edge_u().iter().zip(graph.edge_v()) {
            let (a, b) = (find(&mut parent, u), find(&mut parent, v));
            if a != b {
                parent[a.max(b) as usize] = a.min(b);
            }
        }
        let open_root = find(&mut parent, boundary);
        let mut id = vec![OPEN; n + 1];
        let mut of = vec![OPEN; n];
        let mut count = 0;
        for (v, comp) in of.iter_mut().enumerate() {
            let r = find(&mut parent, v as u32);
            if r != open_root {
                if id[r as usize] == OPEN {
                    id[r as usize] = count as u32;
                    count += 1;
                }
                *comp = id[r as usize];
            }
        }
        ClosedComponents { of, count }
    }

    pub fn count(&self) -> usize {
        self.count
    }

    /// The first shot of `shots` (back to back, `shot_bytes` each) with an odd number of
    /// detection events in a closed component, and a detector of that component.
    pub fn first_odd(&self, shots: &[u8], shot_bytes: usize) -> Option<(usize, usize)> {
        if self.count == 0 || shot_bytes == 0 {
            return None;
        }
        let n = self.of.len();
        let mut parity = vec![false; self.count];
        let mut touched: Vec<(u32, usize)> = Vec::new();
        for (s, shot) in shots.chunks(shot_bytes).enumerate() {
            for (i, &byte) in shot.iter().enumerate() {
                let mut bits = byte;
                while bits != 0 {
                    let v = 8 * i + bits.trailing_zeros() as usize;
                    bits &= bits - 1;
                    match self.of.get(v) {
                        Some(&c) if c != OPEN => {
                            parity[c as usize] ^= true;
                            touched.push((c, v));
                        }
                        _ if v >= n => break,
                        _ => {}
                    }
                }
            }
            let odd = touched.iter().find(|&&(c, _)| parity[c as usize]).copied();
            for &(c, _) in &touched {
                parity[c as usize] = false;
            }
            touched.clear();
            if let Some((_, v)) = odd {
                return Some((s, v));
            }
        }
        None
    }
}
