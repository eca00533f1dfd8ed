use super::*;
use crate::graph::EdgeSpec;

pub(crate) fn edge(u: u32, v: Option<u32>, p: f64, obs: u64) -> EdgeSpec {
    EdgeSpec {
        u,
        v,
        p,
        observables: obs,
    }
}

/// Repetition code of 5 data bits: detectors 0..4 between neighbours, boundary at both
/// ends, observable on the left boundary edge.
fn chain() -> MatchingGraph {
    let mut e = vec![edge(0, None, 0.1, 1)];
    for d in 0..3 {
        e.push(edge(d, Some(d + 1), 0.1, 0));
    }
    e.push(edge(3, None, 0.1, 0));
    MatchingGraph::from_edges(4, 1, &e).unwrap()
}

type DecodeFn = fn(&mut UfScratch, &MatchingGraph, &[u8]) -> u64;
const BOTH: [(&str, DecodeFn); 2] = [
    ("event-driven", UfScratch::decode),
    ("reference", UfScratch::decode_reference),
];

#[test]
fn decodes_a_chain_and_resets_between_shots() {
    let g = chain();
    for (name, decode) in BOTH {
        let mut s = UfScratch::new(&g);
        for (syndrome, flips) in [
            // No defect.
            (0b0000, 0),
            // Defect at 0 alone: matched to the left boundary (flips L0).
            (0b0001, 1),
            // Defect at 3 alone: right boundary, no flip.
            (0b1000, 0),
            // Defects 0 and 1: the edge between them.
            (0b0011, 0),
            // Defects 0 and 3: both to their own boundaries.
            (0b1001, 1),
            // Same answers again (state fully reset).
            (0b0001, 1),
            (0b0011, 0),
        ] {
            assert_eq!(
                decode(&mut s, &g, &[syndrome]),
                flips,
                "{name} {syndrome:#b}"
            );
        }
        assert_reset(&s, name);
    }
}

/// Every per-shot array is back at its reset value.
fn assert_reset(s: &UfScratch, name: &str) {
    assert!(s.parent.iter().all(|&p| p == NONE), "{name}");
    assert!(s.flags.iter().all(|&f| f == 0), "{name}");
    assert!(s.growth.iter().all(|&x| x == 0), "{name}");
    assert!(s.defect.iter().all(|&x| x == 0), "{name}");
    assert!(s.visited.iter().all(|&x| x == 0), "{name}");
    assert!(s.vtx.iter().all(|v| *v == Vtx::RESET), "{name}");
    assert!(s.fhead.iter().all(|&x| x == NONE), "{name}");
}

#[test]
fn impossible_syndrome_terminates() {
    // Detector 1 has no edges at all.
    let g = MatchingGraph::from_edges(2, 1, &[edge(0, None, 0.1, 1)]).unwrap();
    for (name, decode) in BOTH {
        let mut s = UfScratch::new(&g);
        assert_eq!(decode(&mut s, &g, &[0b10]), 0, "{name}");
        assert_eq!(decode(&mut s, &g, &[0b01]), 1, "{name}");
    }
}

#[test]
fn three_odd_clusters_merging_stay_odd_and_stop_growing_inside() {
    // 0 - 1 - 2 in a line, all defects, equal weights, plus a far boundary: 0-1 and 1-2
    // fill together, the merged cluster is odd (3 defects) and must not grow its
    // internal edge 0-2 any further; it then reaches the boundary through 2.
    let e = [
        edge(0, Some(1), 0.1, 0),
        edge(1, Some(2), 0.1, 0),
        edge(0, Some(2), 0.01, 0b10),
        edge(2, None, 0.001, 1),
    ];
    // (Were 0-2 grown full, the forest would peel through it and flip L1 too.)
    let g = MatchingGraph::from_edges(3, 2, &e).unwrap();
    let mut s = UfScratch::new(&g);
    let fast = s.decode(&g, &[0b111]);
    assert_eq!(fast, s.decode_reference(&g, &[0b111]));
    assert_eq!(fast, 1);
}

/// A vertex with more neighbours than the 64 positions `scan_vertex` flags in a word.
#[test]
fn a_hub_of_high_degree_decodes_like_the_reference() {
    let n = 100;
    let mut e: Vec<EdgeSpec> = (1..n).map(|v| edge(0, Some(v), 0.05, 0)).collect();
    e.extend((1..n - 1).map(|v| edge(v, Some(v + 1), 0.2, u64::from(v % 2))));
    e.push(edge(n - 1, None, 0.1, 1));
    let g = MatchingGraph::from_edges(n, 1, &e).unwrap();
    let (mut s, mut r) = (UfScratch::new(&g), UfScratch::new(&g));
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    for shot in 0..300 {
        let mut dets = vec![0u8; 13];
        for byte in dets.iter_mut() {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            // Sparse, then dense shots.
            *byte = (x as u8)
                & if shot < 150 {
                    x as u8 >> 3 & x as u8 >> 5
                } else {
                    0xff
                };
        }
        assert_eq!(
            s.decode(&g, &dets),
            r.decode_reference(&g, &dets),
            "shot {shot}"
        );
    }
    assert_reset(&s, "hub");
}

/// Graphs whose edges take few distinct weights (many equal fill times), decoded with one
/// scratch shared with a larger graph, on syndromes with stray bits past the detectors.
fn tied_graph(max_n: u32, max_e: usize) -> impl Strategy<Value = MatchingGraph> {
    (1..=max_n).prop_flat_map(move |n| {
        let e =
            (0..n, proptest::option::of(0..n), 0usize..3, 0u64..4).prop_map(|(u, v, k, obs)| {
                EdgeSpec {
                    u,
                    v: v.filter(|&v| v != u),
                    p: [0.01, 0.1, 0.3][k],
                    observables: obs,
                }
            });
        proptest::collection::vec(e, 0..=max_e)
            .prop_map(move |edges| MatchingGraph::from_edges(n, 2, &edges).unwrap())
    })
}

/// Graphs like a circuit-noise model's: probabilities in a narrow band (so defects of one
/// error usually settle in one step), some boundary edges.
pub(crate) fn narrow_graph(max_n: u32, max_e: usize) -> impl Strategy<Value = MatchingGraph> {
    (2..=max_n).prop_flat_map(move |n| {
        let e =
            (0..n, proptest::option::of(0..n), 0usize..5, 0u64..4).prop_map(|(u, v, k, obs)| {
                EdgeSpec {
                    u,
                    v: v.filter(|&v| v != u),
                    p: [0.001, 0.0015, 0.002, 0.003, 0.004][k],
                    observables: obs,
                }
            });
        proptest::collection::vec(e, 1..=max_e)
            .prop_map(move |edges| MatchingGraph::from_edges(n, 2, &edges).unwrap())
    })
}

/// The syndrome of a few errors, each on one edge of `g` (the index taken modulo the
/// edge count).
pub(crate) fn syndrome_of(g: &MatchingGraph, errors: &[usize]) -> Vec<u8> {
    let mut dets = vec![0u8; g.num_detectors().div_ceil(8)];
    for &i in errors {
        let e = i % g.num_edges();
        for v in [g.edge_u()[e], g.edge_v()[e]] {
            if v != g.boundary() {
                dets[v as usize / 8] ^= 1 << (v % 8);
            }
        }
    }
    dets
}

/// A committed fixture's matching graph and its shots (tests/fixtures/NAME.dem, .b8).
pub(crate) fn fixture_shots(name: &str) -> (MatchingGraph, crate::Shots) {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures");
    let dem = crate::Dem::from_path(&dir.join(format!("{name}.dem"))).unwrap();
    let g = MatchingGraph::from_dem(&dem).unwrap();
    let shots =
        crate::Shots::read(&dir.join(format!("{name}.b8")), g.num_detectors(), None).unwrap();
    (g, shots)
}

#[test]
fn isolated_pairs_take_the_fast_path() {
    // The chain, with boundary edges lighter than the inner ones (no ties).
    let mut e = vec![edge(0, None, 0.1, 1)];
    for d in 0..3 {
        e.push(edge(d, Some(d + 1), 0.05, 0));
    }
    e.push(edge(3, None, 0.1, 0));
    let g = MatchingGraph::from_edges(4, 1, &e).unwrap();
    let mut s = UfScratch::new(&g);
    let w = g.edge_weight();
    let (w_pair, w_bnd) = (w[g.adj_edge()[g.adj_offset()[1] as usize] as usize], w[0]);
    assert!(w_pair.div_ceil(2) < w_bnd && w_bnd < w_pair);
    // A pair, a boundary defect, both; three defects in a row do not qualify. Growth
    // stops when the last partner edge fills.
    assert_eq!(s.isolated(&g, &[0b0011]), Some((0, w_pair.div_ceil(2))));
    assert_eq!(s.isolated(&g, &[0b0001]), Some((1, w_bnd)));
    assert_eq!(s.isolated(&g, &[0b1001]), Some((1, w_bnd)));
    assert_eq!(s.isolated(&g, &[0b0111]), None);
    assert_reset(&s, "isolated");
}

use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    /// Whenever the isolated-pairs fast path answers, it answers like the specification;
    /// and `decode` (which tries it first) always does.
    #[test]
    fn isolated_fast_path_equals_reference(
        g in narrow_graph(30, 80),
        shots in proptest::collection::vec(proptest::collection::vec(any::<usize>(), 1..5), 1..20),
    ) {
        let (mut s, mut r) = (UfScratch::new(&g), UfScratch::new(&g));
        for errors in shots {
            let dets = syndrome_of(&g, &errors);
            let want = r.decode_reference_timed(&g, &dets);
            if let Some(got) = s.isolated(&g, &dets) {
                prop_assert_eq!(got, want, "{:?}", dets);
            }
            prop_assert_eq!(s.decode_timed(&g, &dets), want, "{:?}", dets);
        }
        assert_reset(&s, "isolated");
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    /// The correction `decode_correction` lists is the decoder's: its edges flip the
    /// observables `decode` returns, and its boundary is the syndrome (which the errors
    /// it was made from can produce).
    #[test]
    fn the_listed_correction_flips_the_answer_and_makes_the_syndrome(
        g in narrow_graph(30, 80),
        shots in proptest::collection::vec(proptest::collection::vec(any::<usize>(), 1..8), 1..20),
    ) {
        let mut s = UfScratch::new(&g);
        let mut edges = Vec::new();
        for errors in shots {
            let dets = syndrome_of(&g, &errors);
            let obs = s.decode_correction(&g, &dets, &mut edges);
            prop_assert_eq!(obs, s.decode(&g, &dets));
            let mut made = vec![0u8; dets.len()];
            let mut flips = 0u64;
            for &e in &edges {
                flips ^= g.edge_obs()[e as usize];
                for v in [g.edge_u()[e as usize], g.edge_v()[e as usize]] {
                    if v != g.boundary() {
                        made[v as usize / 8] ^= 1 << (v % 8);
                    }
                }
            }
            prop_assert_eq!(flips, obs);
            prop_assert_eq!(&made, &dets);
        }
        assert_reset(&s, "correction");
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn fast_equals_reference_with_ties_and_a_shared_scratch(
        small in tied_graph(20, 50),
        big in tied_graph(40, 120),
        shots in proptest::collection::vec((any::<bool>(), any::<[u8; 6]>()), 1..30),
    ) {
        // One scratch for both graphs (sized for the larger), one reference each.
        let mut shared = UfScratch::new(&small);
        shared.ensure(&big);
        let (mut ref_small, mut ref_big) = (UfScratch::new(&small), UfScratch::new(&big));
        for (on_big, dets) in shots {
            let (g, r) = if on_big { (&big, &mut ref_big) } else { (&small, &mut ref_small) };
            // The output and the time growth stopped.
            let (fast, t) = shared.decode_timed(g, &dets);
            prop_assert_eq!((fast, t), r.decode_reference_timed(g, &dets), "{:?} on_big {}", dets, on_big);
            // Bits past the detectors are ignored: the same answer with them cleared.
            let n = g.num_detectors();
            let mut clean = dets;
            for (i, byte) in clean.iter_mut().enumerate() {
                let keep = n.saturating_sub(8 * i).min(8);
                *byte &= ((1u16 << keep) - 1) as u8;
            }
            prop_assert_eq!(shared.decode(g, &clean), fast);
        }
        assert_reset(&shared, "shared");
    }
}
