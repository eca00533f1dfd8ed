//! Syndromes drawn from a matching graph's own error model: every edge fires on its own
//! with its probability, and a detector is flagged when an odd number of its edges fire.
//! What the load-time tuning ([`super::uf_split::split_limit`]) learns the shots' make-up
//! from, and the emulator's reproducible payloads; deterministic for a seed, no dependency.

use super::graph::MatchingGraph;

/// SplitMix64 (Steele, Lea and Flood 2014): small, fast, and good enough to draw errors
/// and payloads; the same seed gives the same stream on every machine.
#[derive(Debug, Clone)]
pub struct SplitMix64(pub u64);

impl SplitMix64 {
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

/// Draws shots from `g`'s edges (the merged edges' probabilities: the DEM's errors as the
/// decoder sees them, without the correlations of `^`-decomposed errors).
#[derive(Debug, Clone)]
pub struct SyndromeSampler {
    /// Per edge: it fires when a uniform u64 falls below this.
    threshold: Vec<u64>,
    u: Vec<u32>,
    v: Vec<u32>,
    boundary: u32,
    rng: SplitMix64,
}

impl SyndromeSampler {
    pub fn new(g: &MatchingGraph, seed: u64) -> SyndromeSampler {
        SyndromeSampler {
            // p in (0, 0.5] for a matching edge; `as` saturates at the ends.
            threshold: g
                .edge_p()
                .iter()
                .map(|&p| (p * 2f64.powi(64)) as u64)
                .collect(),
            u: g.edge_u().to_vec(),
            v: g.edge_v().to_vec(),
            boundary: g.boundary(),
            rng: SplitMix64(seed),
        }
    }

    /// One shot into `dets` (bit-packed, LSB first, at least `ceil(n / 8)` bytes, cleared
    /// here); returns its number of defects.
    pub fn draw(&mut self, dets: &mut [u8]) -> usize {
        dets.fill(0);
        for (e, &t) in self.threshold.iter().enumerate() {
            if self.rng.next_u64() < t {
                for x in [self.u[e], self.v[e]] {
                    if x != self.boundary {
                        dets[x as usize / 8] ^= 1 << (x % 8);
                    }
                }
            }
        }
        dets.iter().map(|b| b.count_ones() as usize).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::EdgeSpec;

    #[test]
    fn splitmix_matches_the_reference_stream() {
        // The first outputs for seed 0 of the reference C code (Vigna's splitmix64.c).
        let mut r = SplitMix64(0);
        assert_eq!(r.next_u64(), 0xe220_a839_7b1d_cdaf);
        assert_eq!(r.next_u64(), 0x6e78_9e6a_a1b9_65f4);
    }

    /// A chain 0 - 1 - 2 with boundary edges at both ends: each edge's firing rate comes
    /// out near its probability, and a shot's defects are the ends of an odd number of
    /// fired edges.
    #[test]
    fn edges_fire_at_their_rates_and_flag_their_ends() {
        let e = |u, v, p| EdgeSpec {
            u,
            v,
            p,
            observables: 0,
        };
        let g = MatchingGraph::from_edges(
            3,
            1,
            &[
                e(0, None, 0.02),
                e(0, Some(1), 0.1),
                e(1, Some(2), 0.3),
                e(2, None, 0.05),
            ],
        )
        .unwrap();
        let mut s = SyndromeSampler::new(&g, 7);
        let shots = 200_000;
        let mut flagged = [0usize; 3];
        let mut dets = [0u8; 1];
        for _ in 0..shots {
            let nd = s.draw(&mut dets);
            assert_eq!(nd, dets[0].count_ones() as usize);
            assert_eq!(dets[0] >> 3, 0, "only detectors 0..3 can be flagged");
            for (d, f) in flagged.iter_mut().enumerate() {
                *f += usize::from(dets[0] >> d & 1 == 1);
            }
        }
        // P(odd number of independent events) = (1 - prod(1 - 2 p)) / 2.
        let odd = |ps: &[f64]| (1.0 - ps.iter().map(|p| 1.0 - 2.0 * p).product::<f64>()) / 2.0;
        for (d, want) in [odd(&[0.02, 0.1]), odd(&[0.1, 0.3]), odd(&[0.3, 0.05])]
            .into_iter()
            .enumerate()
        {
            let got = flagged[d] as f64 / shots as f64;
            let sigma = (want * (1.0 - want) / shots as f64).sqrt();
            assert!(
                (got - want).abs() < 5.0 * sigma,
                "detector {d}: {got} vs {want}"
            );
        }
    }
}
