//! Brute-force most-likely-error reference, for tests of the other decoders.
//!
//! Enumerates every subset of the graph's edges (Gray code order: one edge toggles per
//! step) and records, for every syndrome, the minimum total quantized weight of a subset
//! producing it and the *set* of observable masks reached at that minimum. It shares
//! nothing with the decoders but the graph, so agreement is evidence, not tautology.
//! Exponential: limited to [`MAX_BRUTE_EDGES`] edges, [`MAX_BRUTE_DETECTORS`] detectors and
//! [`MAX_BRUTE_OBSERVABLES`] observables.
#![forbid(unsafe_code)]

use super::graph::MatchingGraph;
use crate::{Error, Result};

/// Most edges enumerated (2^26 subsets).
pub const MAX_BRUTE_EDGES: usize = 26;
/// Most detectors (tables of 2^n entries).
pub const MAX_BRUTE_DETECTORS: usize = 24;
/// Most observables (the masks reached are kept as a 64-bit set over masks).
pub const MAX_BRUTE_OBSERVABLES: usize = 6;

/// Per syndrome: the minimum weight and every observable mask reaching it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BruteForce {
    /// `min_weight[s]`: least total weight of an edge set with syndrome `s`; `u64::MAX` if
    /// none.
    pub min_weight: Vec<u64>,
    /// `masks[s]`: bit `m` set when some minimum-weight edge set flips observable mask `m`.
    pub masks: Vec<u64>,
}

impl BruteForce {
    /// Enumerates every edge subset of `graph`.
    pub fn build(graph: &MatchingGraph) -> Result<BruteForce> {
        let (n, ne, nobs) = (
            graph.num_detectors(),
            graph.num_edges(),
            graph.num_observables(),
        );
        if n > MAX_BRUTE_DETECTORS || ne > MAX_BRUTE_EDGES || nobs > MAX_BRUTE_OBSERVABLES {
            return Err(Error::DecoderModel {
                file: graph.source().to_string(),
                detail: format!(
                    "brute force needs <= {MAX_BRUTE_DETECTORS} detectors, <= {MAX_BRUTE_EDGES} \
                     edges and <= {MAX_BRUTE_OBSERVABLES} observables; this model has {n}, {ne}, {nobs}"
                ),
            });
        }
        let syn: Vec<u32> = (0..ne)
            .map(|e| {
                let mut s = 1u32 << graph.edge_u()[e];
                if (graph.edge_v()[e] as usize) < n {
                    s |= 1u32 << graph.edge_v()[e];
                }
                s
            })
            .collect();
        let mut min_weight = vec![u64::MAX; 1 << n];
        let mut masks = vec![0u64; 1 << n];
        min_weight[0] = 0;
        masks[0] = 1;
        let (mut s, mut w, mut o) = (0u32, 0u64, 0u64);
        let mut on = vec![false; ne];
        for k in 1u64..(1u64 << ne) {
            let e = k.trailing_zeros() as usize;
            on[e] = !on[e];
            s ^= syn[e];
            o ^= graph.edge_obs()[e];
            if on[e] {
                w += u64::from(graph.edge_weight()[e]);
            } else {
                w -= u64::from(graph.edge_weight()[e]);
            }
            let cur = &mut min_weight[s as usize];
            if w < *cur {
                *cur = w;
                masks[s as usize] = 1 << o;
            } else if w == *cur {
                masks[s as usize] |= 1 << o;
            }
        }
        Ok(BruteForce { min_weight, masks })
    }

    /// True when `mask` is the observable mask of some most likely error for syndrome `s`
    /// (or `s` is impossible and `mask` is 0).
    pub fn accepts(&self, s: usize, mask: u64) -> bool {
        if self.min_weight[s] == u64::MAX {
            return mask == 0;
        }
        mask < 64 && self.masks[s] >> mask & 1 == 1
    }
}
