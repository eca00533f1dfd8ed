use super::*;
use crate::brute::BruteForce;
use crate::graph::EdgeSpec;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

fn edge(u: u32, v: Option<u32>, p: f64, observables: u64) -> EdgeSpec {
    EdgeSpec {
        u,
        v,
        p,
        observables,
    }
}

/// Repetition code of 5 data bits: detectors 0..3, boundary at both ends, `L0` on the left.
fn chain() -> MatchingGraph {
    let mut e = vec![edge(0, None, 0.1, 1)];
    for d in 0..3 {
        e.push(edge(d, Some(d + 1), 0.1, 0));
    }
    e.push(edge(3, None, 0.1, 0));
    MatchingGraph::from_edges(4, 1, &e).unwrap()
}

#[test]
fn decodes_a_chain_and_resets_between_shots() {
    let g = chain();
    let mut s = MatchingScratch::new(&g);
    for (syndrome, flips) in [
        (0b0000, 0),
        (0b0001, 1),
        (0b1000, 0),
        (0b0011, 0),
        (0b1001, 1),
        (0b0001, 1),
    ] {
        assert_eq!(s.decode(&g, &[syndrome]), flips, "{syndrome:#b}");
        assert!(s.is_reset());
    }
}

/// splitmix64, for graphs drawn from a seed.
pub(crate) struct Rng(u64);

impl Rng {
    pub(crate) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// A random graph of `n` detectors and about `m` edges: a few boundary edges (or none),
/// probabilities from a small set (so equal weights and ties are common), 2 observables.
pub(crate) fn random_graph(rng: &mut Rng, n: u32, m: usize, boundary: bool) -> MatchingGraph {
    let ps = [0.01, 0.03, 0.05, 0.1, 0.2, 0.3];
    let mut e = Vec::new();
    // A spanning path keeps most of it connected.
    for v in 1..n {
        let u = rng.below(u64::from(v)) as u32;
        e.push(edge(u, Some(v), ps[rng.below(6) as usize], rng.below(4)));
    }
    while e.len() < m {
        let u = rng.below(u64::from(n)) as u32;
        let v = if boundary && rng.below(4) == 0 {
            None
        } else {
            let v = rng.below(u64::from(n)) as u32;
            if v == u {
                continue;
            }
            Some(v)
        };
        e.push(edge(u, v, ps[rng.below(6) as usize], rng.below(4)));
    }
    MatchingGraph::from_edges(n, 2, &e).unwrap()
}

/// Every syndrome of random small graphs: the matching's weight is the least weight of an
/// edge set with that syndrome, its observables are those of one such set, and it is
/// complete exactly when such a set exists.
#[test]
fn every_syndrome_of_small_graphs_gets_a_minimum_weight_correction() {
    let mut rng = Rng(7);
    let mut checked = 0;
    let mut seen = MatchStats::default();
    for round in 0..300 {
        let n = 3 + rng.below(8) as u32;
        let m = (n as usize + rng.below(10) as usize).min(24);
        let g = random_graph(&mut rng, n, m, round % 5 != 0);
        let brute = BruteForce::build(&g).unwrap();
        let mut s = MatchingScratch::new(&g);
        for syndrome in 0..1u32 << n {
            let defects: Vec<u32> = (0..n).filter(|&v| syndrome >> v & 1 == 1).collect();
            let got = s.decode_defects(&g, &defects);
            seen.blossoms += s.stats.blossoms;
            seen.shatters += s.stats.shatters;
            seen.implosions += s.stats.implosions;
            let want = brute.min_weight[syndrome as usize];
            if want == u64::MAX {
                assert!(
                    !got.complete,
                    "round {round} syndrome {syndrome:#b}: no correction exists"
                );
                continue;
            }
            assert!(got.complete, "round {round} syndrome {syndrome:#b}");
            assert_eq!(
                got.weight, want,
                "round {round} syndrome {syndrome:#b}: weight"
            );
            assert!(
                brute.masks[syndrome as usize] >> got.obs & 1 == 1,
                "round {round} syndrome {syndrome:#b}: observables {} not of a minimum",
                got.obs
            );
            assert!(s.is_reset());
            checked += 1;
        }
    }
    assert!(checked > 10_000, "{checked}");
    // The tests reach every step of the algorithm.
    assert!(
        seen.blossoms > 100 && seen.shatters > 10 && seen.implosions > 10,
        "{seen:?}"
    );
}

/// The least weight of a perfect matching of `defects` (each to another or to the boundary)
/// by shortest paths and a subset recursion: `None` when there is none.
fn least_matching_weight(g: &MatchingGraph, defects: &[u32]) -> Option<u64> {
    let n = g.num_detectors();
    let (off, adj, w) = (g.adj_offset(), g.adj_pairs(), g.edge_weight());
    let b = g.boundary() as usize;
    let dist_from = |src: u32| {
        let mut d = vec![u64::MAX; n + 1];
        let mut heap = BinaryHeap::new();
        d[src as usize] = 0;
        heap.push(Reverse((0u64, src)));
        while let Some(Reverse((dx, x))) = heap.pop() {
            if dx > d[x as usize] || x as usize == b {
                continue; // paths do not run through the boundary
            }
            for &[e, y] in &adj[off[x as usize] as usize..off[x as usize + 1] as usize] {
                let nd = dx + u64::from(w[e as usize]);
                if nd < d[y as usize] {
                    d[y as usize] = nd;
                    heap.push(Reverse((nd, y)));
                }
            }
        }
        d
    };
    let m = defects.len();
    let rows: Vec<Vec<u64>> = defects.iter().map(|&a| dist_from(a)).collect();
    let mut f = vec![u64::MAX; 1 << m];
    f[0] = 0;
    for set in 1usize..1 << m {
        let i = set.trailing_zeros() as usize;
        let rest = set & !(1 << i);
        let mut best = f[rest].saturating_add(rows[i][b]);
        let mut r = rest;
        while r != 0 {
            let j = r.trailing_zeros() as usize;
            r &= r - 1;
            let d = rows[i][defects[j] as usize];
            best = best.min(f[rest & !(1 << j)].saturating_add(d));
        }
        f[set] = best;
    }
    (f[(1 << m) - 1] != u64::MAX).then_some(f[(1 << m) - 1])
}

/// Graphs of 20 to 80 detectors and up to 14 defects: the matching weighs what a subset
/// recursion over shortest paths finds least, and is complete exactly when one exists.
#[test]
fn larger_graphs_get_the_least_matching_weight() {
    let mut rng = Rng(11);
    let mut seen = MatchStats::default();
    for round in 0..400 {
        let n = 20 + rng.below(61) as u32;
        let m = n as usize + rng.below(2 * u64::from(n)) as usize;
        let g = random_graph(&mut rng, n, m, round % 7 != 0);
        let mut s = MatchingScratch::new(&g);
        for _ in 0..8 {
            let k = 1 + rng.below(14) as usize;
            let mut defects: Vec<u32> = Vec::new();
            while defects.len() < k.min(n as usize) {
                let v = rng.below(u64::from(n)) as u32;
                if !defects.contains(&v) {
                    defects.push(v);
                }
            }
            let got = s.decode_defects(&g, &defects);
            seen.blossoms += s.stats.blossoms;
            seen.shatters += s.stats.shatters;
            match least_matching_weight(&g, &defects) {
                Some(want) => {
                    assert!(got.complete, "round {round} defects {defects:?}");
                    assert_eq!(got.weight, want, "round {round} defects {defects:?}");
                }
                None => assert!(!got.complete, "round {round} defects {defects:?}"),
            }
            assert!(s.is_reset());
        }
    }
    assert!(seen.blossoms > 100 && seen.shatters > 10, "{seen:?}");
}

/// A real model (rotated surface code d = 5, memory X, circuit noise): random syndromes of
/// up to 14 defects, far denser than its shots, weigh what the subset recursion finds least.
#[test]
fn dense_syndromes_of_a_surface_code_get_the_least_matching_weight() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fixtures/surface_d5_r5_x_p005.dem");
    let dem = crate::Dem::from_path(&path).unwrap();
    let g = MatchingGraph::from_dem(&dem).unwrap();
    let n = g.num_detectors() as u64;
    let mut rng = Rng(5);
    let mut s = MatchingScratch::new(&g);
    let mut seen = MatchStats::default();
    for round in 0..300 {
        let k = 1 + rng.below(14) as usize;
        let mut defects: Vec<u32> = Vec::new();
        while defects.len() < k {
            let v = rng.below(n) as u32;
            if !defects.contains(&v) {
                defects.push(v);
            }
        }
        let got = s.decode_defects(&g, &defects);
        seen.blossoms += s.stats.blossoms;
        seen.shatters += s.stats.shatters;
        let want = least_matching_weight(&g, &defects).expect("the boundary takes any defect");
        assert!(got.complete, "round {round}");
        assert_eq!(got.weight, want, "round {round} defects {defects:?}");
    }
    assert!(seen.blossoms > 20, "{seen:?}");
}
