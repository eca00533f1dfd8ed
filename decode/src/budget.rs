//! The work budget of a decoder request: at most `max_defects` detection events.
//!
//! A union-find decode costs about what its defects make it grow, so a peer that sends
//! all-ones or random syndromes can make every request cost ten to twenty typical ones.
//! The budget bounds that: a request ([`crate::Decoder::run_payload`]) with more defects
//! than the decoder's `max_defects` is not decoded; it is answered
//! [`crate::BadPayload::OverBudget`] (the appliance's status `OVER_BUDGET`), after a count
//! that costs what reading the syndrome costs. The GPU decoders count and refuse the same
//! way, so CPU and GPU answers stay identical.
//!
//! The count is of the request's own syndrome: every set bit below the model's detector
//! count (bits past it are ignored, as decoding ignores them), whatever the decoder then
//! reads of it. The default is derived from the model:
//! `max_defects = ceil(6 * expected) + 24`, where `expected` is the mean number of
//! defects of a shot at the model's own noise ([`expected_defects`]). One error mechanism
//! flags up to four detectors (a decomposed one more), so the count's tail is long: six
//! times the mean leaves room for a noise twice the model's, and the constant for the rare
//! shot of many errors where the mean is small. No Stim-sampled shot of the surface codes
//! d = 3..9 goes past it, at the model's noise or at twice it (docs/decoder-budget.md has
//! the tail, and what a request at the budget costs).
//! `lut` has a constant cost (one table read) but counts the same way, so a setting means
//! one thing for both. 0 turns the budget off. docs/decoder-budget.md has the
//! measurements.
#![forbid(unsafe_code)]

use crate::graph::MatchingGraph;

/// The default budget's multiple of the expected defect count.
pub const DEFAULT_MULTIPLE: f64 = 6.0;
/// The default budget's constant (room for a few errors in a model with almost none).
pub const DEFAULT_FLOOR: u32 = 24;

/// The mean number of defects of a shot drawn from `g`'s error model: per detector, the
/// probability that an odd number of its independent edges fire,
/// `(1 - prod(1 - 2 p_e)) / 2`, summed.
pub fn expected_defects(g: &MatchingGraph) -> f64 {
    // Each detector's edges come in increasing index in its CSR row: the product is taken
    // in the order the edges were made, and no array of the (possibly 2^24) detectors.
    let (offset, adj, ep) = (g.adj_offset(), g.adj_edge(), g.edge_p());
    (0..g.num_detectors())
        .map(|v| {
            let edges = &adj[offset[v] as usize..offset[v + 1] as usize];
            let even = edges
                .iter()
                .fold(1.0f64, |even, &e| even * (1.0 - 2.0 * ep[e as usize]));
            (1.0 - even) / 2.0
        })
        .sum()
}

/// The default `max_defects` of `g`: `ceil(6 * expected_defects) + 24`, at most the
/// detector count (where it no longer limits anything).
pub fn default_max_defects(g: &MatchingGraph) -> u32 {
    let b = (DEFAULT_MULTIPLE * expected_defects(g)).ceil() + f64::from(DEFAULT_FLOOR);
    let n = u32::try_from(g.num_detectors()).unwrap_or(u32::MAX);
    if b.is_finite() && b < f64::from(n) {
        b as u32
    } else {
        n
    }
}

/// The defects of a bit-packed syndrome of `n` detectors (LSB first; bits past `n` and
/// bytes past `ceil(n / 8)` ignored, missing bytes read as 0).
#[inline]
pub fn count_defects(dets: &[u8], n: usize) -> u32 {
    let nb = n.div_ceil(8).min(dets.len());
    let whole = nb.min(n / 8);
    let mut count = 0u32;
    let mut chunks = dets[..whole].chunks_exact(8);
    for c in &mut chunks {
        let mut w = [0u8; 8];
        w.copy_from_slice(c);
        count += u64::from_le_bytes(w).count_ones();
    }
    count += chunks
        .remainder()
        .iter()
        .map(|b| b.count_ones())
        .sum::<u32>();
    if whole < nb {
        count += (dets[whole] & ((1u8 << (n % 8)) - 1)).count_ones();
    }
    count
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::EdgeSpec;
    use crate::sample::SyndromeSampler;

    #[test]
    fn counts_only_the_model_s_detectors() {
        assert_eq!(count_defects(&[0xff, 0xff], 10), 10);
        assert_eq!(count_defects(&[0xff, 0xff, 0xff], 16), 16);
        assert_eq!(count_defects(&[0xff], 10), 8);
        assert_eq!(count_defects(&[], 10), 0);
        assert_eq!(count_defects(&[0xff; 20], 129), 129);
        assert_eq!(count_defects(&[0b1010_0101; 3], 21), 4 + 4 + 2);
    }

    #[test]
    fn the_expected_count_matches_sampling() {
        // A chain of 40 detectors at p = 0.05 and a denser graph: the sampler's mean.
        let text = crate::dem::chain_text(40);
        let g = MatchingGraph::from_dem(&crate::Dem::parse(&text, "chain").unwrap()).unwrap();
        let mut e: Vec<EdgeSpec> = (0..30u32)
            .map(|u| EdgeSpec {
                u,
                v: Some((u * 7 + 3) % 30).filter(|&v| v != u),
                p: 0.01 * f64::from(1 + u % 5),
                observables: 0,
            })
            .collect();
        e.push(EdgeSpec {
            u: 0,
            v: None,
            p: 0.2,
            observables: 1,
        });
        let h = MatchingGraph::from_edges(30, 1, &e).unwrap();
        for g in [g, h] {
            let mu = expected_defects(&g);
            let mut s = SyndromeSampler::new(&g, 7);
            let mut dets = vec![0u8; g.num_detectors().div_ceil(8)];
            let shots = 40_000;
            let total: usize = (0..shots).map(|_| s.draw(&mut dets)).sum();
            let mean = total as f64 / shots as f64;
            assert!((mean - mu).abs() < 0.03 * mu + 0.01, "{mean} vs {mu}");
            let b = default_max_defects(&g);
            assert_eq!(
                b,
                ((DEFAULT_MULTIPLE * mu).ceil() as u32 + DEFAULT_FLOOR)
                    .min(g.num_detectors() as u32)
            );
        }
    }
}
