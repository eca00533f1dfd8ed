//! Lookup-table decoder: syndrome -> observable flips of a minimum-weight correction.
//!
//! # Definition
//!
//! For a graph with `n <= MAX_LUT_DETECTORS` detectors, entry `s` (the syndrome read as an
//! `n`-bit little-endian integer: detector `k` is bit `k`) holds the observable mask of an
//! edge set `C` of minimum total quantized weight whose boundary is `s` (every detector in
//! `s` touches an odd number of edges of `C`, every other detector an even number; the
//! boundary vertex is free). With independent edges of probability `p_e` and
//! `weight ~ ln((1-p)/p)`, that is the most likely error given the syndrome, on the
//! quantized weights. When several minimum-weight sets flip different observables, the one
//! the construction below meets first is kept. A syndrome no edge set produces maps to 0.
//!
//! # Construction (host only; the table is what a GPU loads)
//!
//! 1. All-pairs shortest paths over the `n + 1` vertices (boundary = vertex `n`),
//!    Floyd–Warshall in u32 with a saturating infinity, keeping the observable mask of each
//!    path (replaced only on a strictly shorter path).
//! 2. Dynamic programme over syndromes in increasing order: `cost[0] = 0`; for `s != 0`,
//!    with `i` the lowest set bit and `t = s - {i}`: `cost[s] = min(dist(i, B) + cost[t],
//!    min over j in t of dist(i, j) + cost[t - {j}])`, boundary first, then `j` increasing,
//!    ties keep the earlier; the entry is the chosen path's mask xor the sub-entry's.
//!    A minimum-weight edge set splits into edge-disjoint paths pairing the defects (or
//!    joining them to the boundary), and with positive weights overlapping paths would
//!    cancel to a lighter set, so `cost[s]` is exactly the minimum weight and the entry's
//!    mask is the mask of a minimum-weight set. Tests check both against brute force.
//!
//! # Layout
//!
//! `table`: `2^n` entries of `entry_bytes = ceil(num_observables / 8)` bytes each, every
//! entry already in the wire's response format (bit-packed observable flips, LSB first):
//! decoding is `table[s * entry_bytes .. (s + 1) * entry_bytes]`.
#![forbid(unsafe_code)]

use super::graph::MatchingGraph;
use crate::{Error, Result};

/// Most detectors a lookup table is built for (`2^24` entries, 16 MiB per observable byte).
pub const MAX_LUT_DETECTORS: usize = 24;

/// Saturating infinity for costs.
pub const INF: u32 = u32::MAX;

/// Syndrome -> observable flips (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lut {
    num_detectors: usize,
    entry_bytes: usize,
    table: Vec<u8>,
}

impl Lut {
    /// Builds the table; refuses models with more than [`MAX_LUT_DETECTORS`] detectors.
    pub fn build(graph: &MatchingGraph) -> Result<Lut> {
        Self::build_with_costs(graph).map(|(lut, _)| lut)
    }

    /// Builds the table and also returns `cost[s]`, the minimum weight of an edge set whose
    /// boundary is `s` (`INF` if none): for tests and diagnostics.
    pub fn build_with_costs(graph: &MatchingGraph) -> Result<(Lut, Vec<u32>)> {
        check_size(graph)?;
        let n = graph.num_detectors();
        let entry_bytes = graph.num_observables().div_ceil(8);
        // 1. All-pairs shortest paths with observable masks.
        let paths = ShortestPaths::of(graph);
        // 2. DP over syndromes.
        let (cost, table) = paths.syndrome_programme(entry_bytes);
        Ok((
            Lut {
                num_detectors: n,
                entry_bytes,
                table,
            },
            cost,
        ))
    }

    pub fn num_detectors(&self) -> usize {
        self.num_detectors
    }

    /// Bytes per entry: `ceil(num_observables / 8)`, the response length.
    pub fn entry_bytes(&self) -> usize {
        self.entry_bytes
    }

    /// The whole table (`2^n * entry_bytes` bytes), for upload to a device.
    pub fn table(&self) -> &[u8] {
        &self.table
    }

    /// The table index of a bit-packed syndrome (bits past `n` ignored).
    #[inline]
    pub fn index(&self, dets: &[u8]) -> usize {
        let mut s = 0usize;
        for (k, &byte) in dets.iter().take(self.num_detectors.div_ceil(8)).enumerate() {
            s |= usize::from(byte) << (8 * k);
        }
        s & ((1usize << self.num_detectors) - 1)
    }

    /// The response bytes for a bit-packed syndrome.
    #[inline]
    pub fn entry(&self, dets: &[u8]) -> &[u8] {
        let s = self.index(dets);
        &self.table[s * self.entry_bytes..(s + 1) * self.entry_bytes]
    }

    /// The observable mask for a bit-packed syndrome.
    #[inline]
    pub fn decode(&self, dets: &[u8]) -> u64 {
        let mut m = 0u64;
        for (k, &byte) in self.entry(dets).iter().enumerate() {
            m |= u64::from(byte) << (8 * k);
        }
        m
    }
}

/// Refuses a model past the table's limits: [`MAX_LUT_DETECTORS`] detectors, 64
/// observables.
fn check_size(graph: &MatchingGraph) -> Result<()> {
    let n = graph.num_detectors();
    if n > MAX_LUT_DETECTORS {
        return Err(Error::DecoderModel {
            file: graph.source().to_string(),
            detail: format!(
                "the lut decoder holds 2^n entries and supports at most {MAX_LUT_DETECTORS} \
                 detectors; this model has {n}: use the uf decoder"
            ),
        });
    }
    let nobs = graph.num_observables();
    if nobs > 64 {
        return Err(Error::DecoderModel {
            file: graph.source().to_string(),
            detail: format!(
                "the lut decoder holds at most 64 observables; this model has {nobs}: use \
                 the uf decoder"
            ),
        });
    }
    Ok(())
}

/// Step 1 of the construction: distances between the `nv = n + 1` vertices (the boundary
/// last), row-major, and the observable mask of each path.
struct ShortestPaths {
    nv: usize,
    dist: Vec<u32>,
    pobs: Vec<u64>,
}

impl ShortestPaths {
    /// Floyd–Warshall from the edges, a mask replaced only on a strictly shorter path.
    fn of(graph: &MatchingGraph) -> ShortestPaths {
        let nv = graph.num_detectors() + 1;
        let mut dist = vec![INF; nv * nv];
        let mut pobs = vec![0u64; nv * nv];
        for v in 0..nv {
            dist[v * nv + v] = 0;
        }
        let (eu, ev, ew, eo) = (
            graph.edge_u(),
            graph.edge_v(),
            graph.edge_weight(),
            graph.edge_obs(),
        );
        for e in 0..graph.num_edges() {
            let (u, v) = (eu[e] as usize, ev[e] as usize);
            if ew[e] < dist[u * nv + v] {
                for (a, b) in [(u, v), (v, u)] {
                    dist[a * nv + b] = ew[e];
                    pobs[a * nv + b] = eo[e];
                }
            }
        }
        for k in 0..nv {
            for i in 0..nv {
                let dik = dist[i * nv + k];
                if dik == INF {
                    continue;
                }
                for j in 0..nv {
                    let c = dik.saturating_add(dist[k * nv + j]);
                    if c < dist[i * nv + j] {
                        dist[i * nv + j] = c;
                        pobs[i * nv + j] = pobs[i * nv + k] ^ pobs[k * nv + j];
                    }
                }
            }
        }
        ShortestPaths { nv, dist, pobs }
    }

    /// Step 2 of the construction: `cost[s]` and the table of `entry_bytes`-byte entries,
    /// over the syndromes in increasing order.
    fn syndrome_programme(&self, entry_bytes: usize) -> (Vec<u32>, Vec<u8>) {
        let (nv, dist, pobs) = (self.nv, &self.dist, &self.pobs);
        let n = nv - 1;
        let entries = 1usize << n;
        let mut cost = vec![INF; entries];
        let mut table = vec![0u8; entries * entry_bytes];
        cost[0] = 0;
        let read = |table: &[u8], s: usize| -> u64 {
            let mut m = 0u64;
            for (k, &byte) in table[s * entry_bytes..(s + 1) * entry_bytes]
                .iter()
                .enumerate()
            {
                m |= u64::from(byte) << (8 * k);
            }
            m
        };
        let b = n;
        for s in 1..entries {
            let i = s.trailing_zeros() as usize;
            let t = s & (s - 1);
            let mut best = dist[i * nv + b].saturating_add(cost[t]);
            let mut best_obs = if best == INF {
                0
            } else {
                pobs[i * nv + b] ^ read(&table, t)
            };
            let mut rest = t;
            while rest != 0 {
                let j = rest.trailing_zeros() as usize;
                rest &= rest - 1;
                let sub = t & !(1 << j);
                let c = dist[i * nv + j].saturating_add(cost[sub]);
                if c < best {
                    best = c;
                    best_obs = pobs[i * nv + j] ^ read(&table, sub);
                }
            }
            cost[s] = best;
            for k in 0..entry_bytes {
                table[s * entry_bytes + k] = (best_obs >> (8 * k)) as u8;
            }
        }
        (cost, table)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::EdgeSpec;

    #[test]
    fn refuses_large_models() {
        let e: Vec<EdgeSpec> = (0..25)
            .map(|u| EdgeSpec {
                u,
                v: None,
                p: 0.1,
                observables: 0,
            })
            .collect();
        let g = MatchingGraph::from_edges(25, 1, &e).unwrap();
        let err = Lut::build(&g).unwrap_err().to_string();
        assert!(err.contains("at most 24") && err.contains("uf"), "{err}");
    }

    #[test]
    fn prefers_the_lighter_correction() {
        // 0 -(0.1, L0)- B, 0 -(0.2)- 1 -(0.3)- B: defect {0} goes to B directly (L0);
        // defects {0,1} pair up (no flip); defect {1} goes to B through its own edge.
        let e = [
            EdgeSpec {
                u: 0,
                v: None,
                p: 0.1,
                observables: 1,
            },
            EdgeSpec {
                u: 0,
                v: Some(1),
                p: 0.2,
                observables: 0,
            },
            EdgeSpec {
                u: 1,
                v: None,
                p: 0.3,
                observables: 0,
            },
        ];
        let g = MatchingGraph::from_edges(2, 1, &e).unwrap();
        let (lut, cost) = Lut::build_with_costs(&g).unwrap();
        assert_eq!(lut.table(), &[0, 1, 0, 0]);
        assert_eq!(cost[3], g.edge_weight()[1]);
        assert_eq!(lut.decode(&[0b01]), 1);
        assert_eq!(lut.entry(&[0b11]), &[0]);
    }
}
