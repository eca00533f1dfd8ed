//! The union-find decoder's answer from its full edges alone, without the spanning forest
//! and the peel of the specification (docs/uf-specification.md, steps 3 and 4), whenever no cycle
//! of full edges flips an odd set of observables. device/decode.cu computes it during the
//! merges of step 2c (step 3') and builds the forest only when a cycle is odd; at d = 7
//! the forest and the peel were ~14 700 of the full decoder's ~52 000 cycles
//! (results/archive/h200-uf-trace.txt).
//!
//! # The claim
//!
//! Notation: `F` the full edges after growth, `V` the cluster vertices with the boundary
//! `B`; the clusters are the components of `(V, F)` (each fused edge joins its ends' clusters,
//! and a cluster reaches `B` only through a full edge). For a path, `obs` is the XOR of its
//! edges' observable masks.
//!
//! **Peel as a sum.** Step 4 puts a forest edge in the correction iff the subtree below it
//! holds an odd number of defects. So the correction's observables are
//! `XOR over defects d of obs(forest path from d to its tree's root)`: an edge is counted
//! once per defect below it. The roots are `B` for `B`'s component, and the least vertex of
//! each other cluster (step 3b takes the first unvisited vertex of the sorted `verts`).
//!
//! **Theorem.** If every cycle of `(V, F)` has even `obs`, then `obs` of a path between two
//! vertices depends only on its ends, `π(u, v)`, and the specification answers
//! `XOR_C XOR_{d in D_C} π(d, r_C)`, over the clusters `C` with defects `D_C` and roots
//! `r_C`, whatever forest step 3 builds. *Proof.* Two paths with the same ends form a
//! closed walk, a sum of cycles: their `obs` agree. The forest path is one such path. ∎
//!
//! **Potentials.** Give each cluster a reference vertex `ρ_C` (`B` for `B`'s cluster) and
//! each of its vertices the potential `φ(v) = π(v, ρ_C)`. Then `π(d, r_C) = φ(d) ^ φ(r_C)`,
//! and the answer is `XOR_d φ(d)` over all defects, XOR `φ(r_C)` for each cluster with an
//! odd number of defects other than `B`'s (for `B`'s, `r_C = ρ_C = B` and `φ(B) = 0`).
//!
//! **Keeping them during growth.** Take the full edges in any order (the device takes them
//! as they fill); `e = (x, y)`:
//! - `x` in no cluster yet: it joins `y`'s with `φ(x) = φ(y) ^ obs(e)` (and the other way);
//! - `x`, `y` in different clusters: the one without `B` (neither has it: either) shifts
//!   every member's potential by `φ(x) ^ φ(y) ^ obs(e)`, which makes its paths to the other
//!   cluster's reference through `e` what they are;
//! - `x`, `y` in one cluster: `e` closes the cycle `e` + (the path of merge edges from `y`
//!   to `x`), whose `obs` is `φ(x) ^ φ(y) ^ obs(e)`.
//!
//! The merge edges form a spanning forest of `(V, F)`, and every other full edge is met in
//! the third case with its fundamental cycle. The fundamental cycles generate every cycle
//! and `obs` is linear: every cycle is even iff every checked one is. So an odd check means
//! the forest's shape may matter: [`potential_obs`] answers `None`, and the device builds
//! the specification's forest. Surface-code clusters rarely hold one: an odd cycle is a
//! logical operator, at least `d` edges long.
#![forbid(unsafe_code)]

use super::graph::MatchingGraph;

/// The specification's answer for the syndrome `dets` whose full edges after growth are
/// `full` (any order; [`super::UfScratch::decode_reference_logged`] lists them), by the
/// potentials of the module docs, or `None` when a cycle of full edges is odd.
pub fn potential_obs(g: &MatchingGraph, dets: &[u8], full: &[u32]) -> Option<u64> {
    const NO_CLUSTER: u32 = u32::MAX;
    let n = g.num_detectors();
    let b = g.boundary() as usize;
    let (eu, ev, eobs) = (g.edge_u(), g.edge_v(), g.edge_obs());
    let is_defect = |v: usize| v < n && dets.get(v / 8).is_some_and(|x| x >> (v % 8) & 1 == 1);
    // Flat labels (every member holds its cluster's label), as on the device.
    let mut label = vec![NO_CLUSTER; n + 1];
    let mut phi = vec![0u64; n + 1];
    for v in (0..n).filter(|&v| is_defect(v)) {
        label[v] = v as u32;
    }
    label[b] = b as u32;
    for &e in full {
        let e = e as usize;
        let (x, y, o) = (eu[e] as usize, ev[e] as usize, eobs[e]);
        match (label[x] == NO_CLUSTER, label[y] == NO_CLUSTER) {
            (true, true) => {
                // Neither end in a cluster: a fresh one (not from growth, which always
                // fills an edge from a cluster; kept total for any edge list).
                label[x] = x as u32;
                label[y] = x as u32;
                phi[x] = 0;
                phi[y] = o;
            }
            (true, false) => {
                label[x] = label[y];
                phi[x] = phi[y] ^ o;
            }
            (false, true) => {
                label[y] = label[x];
                phi[y] = phi[x] ^ o;
            }
            (false, false) if label[x] == label[y] => {
                if phi[x] ^ phi[y] ^ o != 0 {
                    return None;
                }
            }
            (false, false) => {
                let (lx, ly) = (label[x], label[y]);
                let (keep, shift) = if ly == label[b] { (ly, lx) } else { (lx, ly) };
                let by = phi[x] ^ phi[y] ^ o;
                for v in 0..=n {
                    if label[v] == shift {
                        label[v] = keep;
                        phi[v] ^= by;
                    }
                }
            }
        }
    }
    // Per cluster other than B's: its defects' parity and least vertex.
    let mut odd = vec![false; n + 1];
    let mut least = vec![u32::MAX; n + 1];
    let mut obs = 0u64;
    for v in 0..n {
        let l = label[v];
        if l == NO_CLUSTER {
            continue;
        }
        least[l as usize] = least[l as usize].min(v as u32);
        if is_defect(v) {
            obs ^= phi[v];
            odd[l as usize] ^= true;
        }
    }
    for l in 0..n {
        if odd[l] && l as u32 != label[b] {
            obs ^= phi[least[l] as usize];
        }
    }
    Some(obs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::uf::tests::{edge, fixture_shots, narrow_graph, syndrome_of};
    use crate::UfScratch;
    use proptest::prelude::*;

    /// The id of the edge between `u` and `v`.
    fn edge_id(g: &MatchingGraph, u: u32, v: u32) -> u32 {
        (0..g.num_edges())
            .find(|&e| {
                let (a, b) = (g.edge_u()[e], g.edge_v()[e]);
                (a, b) == (u, v) || (a, b) == (v, u)
            })
            .unwrap() as u32
    }

    /// A ring of 4 detectors with one observable edge: clusters that close the ring hold an
    /// odd cycle, and the answer depends on the forest.
    #[test]
    fn an_odd_cycle_is_refused_and_an_even_one_is_not() {
        let e = |u, v, obs| edge(u, v, 0.1, obs);
        let g = MatchingGraph::from_edges(
            4,
            1,
            &[
                e(0, Some(1), 1),
                e(1, Some(2), 0),
                e(2, Some(3), 0),
                e(3, Some(0), 0),
            ],
        )
        .unwrap();
        let id = |u, v| edge_id(&g, u, v);
        let dets = [0b0101u8];
        // All four edges full: the ring 0-1-2-3 has obs 1.
        let ring = [id(0, 1), id(1, 2), id(2, 3), id(3, 0)];
        assert_eq!(potential_obs(&g, &dets, &ring), None);
        // Three of them: a path, no cycle; defects 0 and 2 joined through 3 (obs 0) or
        // through 1 (obs 1).
        assert_eq!(potential_obs(&g, &dets, &ring[1..]), Some(0));
        assert_eq!(potential_obs(&g, &dets, &ring[..3]), Some(1));
    }

    /// An odd cluster away from the boundary (an impossible syndrome) answers relative to
    /// its least vertex, as the specification's tree does.
    #[test]
    fn an_odd_cluster_answers_from_its_least_vertex() {
        let e = |u, v, obs| edge(u, Some(v), 0.1, obs);
        // 0 -(obs 1)- 1 -(obs 0)- 2; defect at 2 only, all edges full.
        let g = MatchingGraph::from_edges(3, 1, &[e(0, 1, 1), e(1, 2, 0)]).unwrap();
        let mut s = UfScratch::new(&g);
        let dets = [0b100u8];
        let mut full = Vec::new();
        let want = s.decode_reference_logged(&g, &dets, &mut full);
        assert_eq!(want, 1);
        assert_eq!(full.len(), 2);
        assert_eq!(potential_obs(&g, &dets, &full), Some(want));
        full.reverse();
        assert_eq!(potential_obs(&g, &dets, &full), Some(want));
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

        /// Whenever no cycle is odd, the potentials give the specification's answer, in
        /// the order the edges filled and in any other.
        #[test]
        fn potentials_answer_like_the_specification(
            g in narrow_graph(30, 60),
            shots in proptest::collection::vec(proptest::collection::vec(any::<usize>(), 1..8), 1..10),
            seed in any::<u64>(),
        ) {
            let mut s = UfScratch::new(&g);
            let mut full = Vec::new();
            for errors in shots {
                let dets = syndrome_of(&g, &errors);
                full.clear();
                let want = s.decode_reference_logged(&g, &dets, &mut full);
                let got = potential_obs(&g, &dets, &full);
                if let Some(obs) = got {
                    prop_assert_eq!(obs, want);
                }
                // Another order: the same verdict and answer.
                let mut x = seed | 1;
                for i in (1..full.len()).rev() {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    full.swap(i, (x % (i as u64 + 1)) as usize);
                }
                prop_assert_eq!(potential_obs(&g, &dets, &full), got);
            }
        }
    }

    /// Every shot of the d = 5 and d = 7 surface-code fixtures: the potentials answer like
    /// the specification, and refuse (an odd cycle) at most a handful of shots.
    #[test]
    fn fixture_shots_answer_by_potentials() {
        for name in [
            "surface_d5_r5_z_p001",
            "surface_d7_r7_z_p001",
            "surface_d5_r5_x_p005",
        ] {
            let (g, shots) = fixture_shots(name);
            let mut s = UfScratch::new(&g);
            let (mut full, mut refused) = (Vec::new(), 0usize);
            for i in 0..shots.len() {
                full.clear();
                let want = s.decode_reference_logged(&g, shots.row(i), &mut full);
                match potential_obs(&g, shots.row(i), &full) {
                    Some(obs) => assert_eq!(obs, want, "{name} shot {i}"),
                    None => refused += 1,
                }
            }
            assert!(refused * 1000 <= shots.len(), "{name}: {refused} refused");
        }
    }
}
