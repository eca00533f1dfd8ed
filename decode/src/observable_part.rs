//! The observable part of a matching graph: the connected components (boundary left out)
//! in which some edge flips an observable. The union-find decoder runs on it alone, with
//! every other detector's events dropped, and answers exactly as it does on the whole
//! graph.
//!
//! # Why the answer is the same
//!
//! Two detectors in different components are joined by no path that avoids the boundary,
//! so their boundary-free distance is infinite, and the split theorem
//! (decode/src/uf_split.rs, module docs) applies to the defects grouped by component,
//! whatever their number: the specification's output on all of them is the XOR of its
//! outputs on each component's defects alone. A component without an observable on any of
//! its edges (its boundary edges included) contributes 0: its correction is made of its own
//! edges. And the specification on the kept components' defects gives the same output on
//! the subgraph, renumbered in order ([`MatchingGraph::restricted`]): the dropped vertices
//! never join a cluster, and every choice the specification makes (the least vertex, the
//! first vertex of `verts`, CSR order) follows the order of vertices and edges, which the
//! renumbering keeps. Tested on every fixture shot and on random graphs against the
//! specification on the whole graph.
//!
//! # What it saves
//!
//! Stim's memory experiments hold both kinds of stabilizers: the surface code's
//! `rotated_memory_z` at d = 7 with 7 rounds has 336 detectors, of which the 144 of the X
//! stabilizers see only errors that flip no Z observable. Dropping them takes ~43 % of a
//! shot's defects away before decoding; at p = 0.001 the shots left for the growth of the
//! union-find fall from 27 % to 10 % of the d = 7 fixture's
//! (results/archive/h200-uf-observable-part.txt).
#![forbid(unsafe_code)]

use super::graph::MatchingGraph;
use crate::Result;

/// "Dropped" in [`ObservablePart::index`].
const DROPPED: u32 = u32::MAX;

/// The observable part of a graph ([`ObservablePart::of`]) and how a syndrome of the whole
/// graph maps onto it.
#[derive(Debug, Clone)]
pub struct ObservablePart {
    graph: MatchingGraph,
    /// Per detector of the whole graph: its index in `graph`, or [`DROPPED`].
    index: Vec<u32>,
}

impl ObservablePart {
    /// The observable part of `g`, or `None` when it is all of `g` (no component to drop),
    /// or none of it (no observable: every answer is 0, and nothing is gained).
    pub fn of(g: &MatchingGraph) -> Result<Option<ObservablePart>> {
        let keep = observable_detectors(g);
        let kept = keep.iter().filter(|&&k| k).count();
        if kept == g.num_detectors() || kept == 0 {
            return Ok(None);
        }
        let mut index = vec![DROPPED; g.num_detectors()];
        for (i, v) in (0..keep.len()).filter(|&v| keep[v]).enumerate() {
            index[v] = i as u32;
        }
        Ok(Some(ObservablePart {
            graph: g.restricted(&keep)?,
            index,
        }))
    }

    /// The subgraph the decoder runs on.
    pub fn graph(&self) -> &MatchingGraph {
        &self.graph
    }

    /// Detectors of the whole graph (the syndromes' length on the wire).
    pub fn wire_detectors(&self) -> usize {
        self.index.len()
    }

    /// Per detector of the whole graph: its index in [`ObservablePart::graph`], or `None`
    /// when it is dropped.
    pub fn index(&self, v: usize) -> Option<u32> {
        self.index.get(v).copied().filter(|&i| i != DROPPED)
    }

    /// Writes the part's syndrome (`ceil(graph.num_detectors() / 8)` bytes into `out`,
    /// resized to that) from `dets`, a bit-packed syndrome of the whole graph (LSB first;
    /// bits past it ignored, missing trailing bytes read as 0).
    pub fn compact(&self, dets: &[u8], out: &mut Vec<u8>) {
        out.clear();
        out.resize(self.graph.num_detectors().div_ceil(8), 0);
        let nb = self.wire_detectors().div_ceil(8).min(dets.len());
        for (byte, &d) in dets[..nb].iter().enumerate() {
            let mut bits = d;
            while bits != 0 {
                let v = byte * 8 + bits.trailing_zeros() as usize;
                bits &= bits - 1;
                if let Some(i) = self.index(v) {
                    out[i as usize / 8] |= 1 << (i % 8);
                }
            }
        }
    }

    /// The device's form of the map (device/decode.cu step 0): per 32-detector word `w` of
    /// the whole graph's syndrome, the mask of its kept detectors and the part's index of
    /// its first kept one; then one more pair `{0, part's detectors}`.
    pub fn device_words(&self) -> Vec<[u32; 2]> {
        let words = self.wire_detectors().div_ceil(32);
        let mut out = Vec::with_capacity(words + 1);
        let mut base = 0u32;
        for w in 0..words {
            let mut mask = 0u32;
            for b in 0..32 {
                if self.index(32 * w + b).is_some() {
                    mask |= 1 << b;
                }
            }
            out.push([mask, base]);
            base += mask.count_ones();
        }
        out.push([0, base]);
        out
    }
}

/// Per detector of `g`: whether its component (edges between detectors; the boundary left
/// out) has an edge, a boundary edge included, with an observable.
pub fn observable_detectors(g: &MatchingGraph) -> Vec<bool> {
    let n = g.num_detectors();
    let mut parent: Vec<u32> = (0..n as u32).collect();
    let find = |parent: &mut Vec<u32>, mut x: u32| {
        while parent[x as usize] != x {
            let up = parent[parent[x as usize] as usize];
            parent[x as usize] = up;
            x = up;
        }
        x
    };
    let (eu, ev) = (g.edge_u(), g.edge_v());
    for e in 0..g.num_edges() {
        if (ev[e] as usize) < n {
            let (a, b) = (find(&mut parent, eu[e]), find(&mut parent, ev[e]));
            if a != b {
                parent[a.max(b) as usize] = a.min(b);
            }
        }
    }
    let mut flips = vec![false; n];
    for (e, &u) in eu.iter().enumerate() {
        if g.edge_flips_any(e) {
            let root = find(&mut parent, u);
            flips[root as usize] = true;
        }
    }
    (0..n as u32)
        .map(|v| {
            let root = find(&mut parent, v);
            flips[root as usize]
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::EdgeSpec;
    use crate::uf::UfScratch;
    use crate::{Dem, Shots};
    use proptest::prelude::*;

    fn edge(u: u32, v: Option<u32>, p: f64, observables: u64) -> EdgeSpec {
        EdgeSpec {
            u,
            v,
            p,
            observables,
        }
    }

    fn packed(n: usize, defects: &[u32]) -> Vec<u8> {
        let mut d = vec![0u8; n.div_ceil(8)];
        for &v in defects {
            d[v as usize / 8] |= 1 << (v % 8);
        }
        d
    }

    /// Two chains, interleaved: even detectors (with the observable on one boundary edge)
    /// and odd ones (no observable).
    fn interleaved() -> MatchingGraph {
        let edges = [
            edge(0, None, 0.01, 1),
            edge(0, Some(2), 0.02, 0),
            edge(2, Some(4), 0.03, 0),
            edge(4, None, 0.01, 0),
            edge(1, None, 0.01, 0),
            edge(1, Some(3), 0.02, 0),
            edge(3, Some(5), 0.03, 0),
            edge(5, None, 0.04, 0),
            edge(6, Some(7), 0.04, 0),
        ];
        MatchingGraph::from_edges(8, 1, &edges).unwrap()
    }

    #[test]
    fn keeps_the_components_with_an_observable_renumbered_in_order() {
        let g = interleaved();
        assert_eq!(
            observable_detectors(&g),
            [true, false, true, false, true, false, false, false]
        );
        let part = ObservablePart::of(&g).unwrap().unwrap();
        let h = part.graph();
        assert_eq!((h.num_detectors(), part.wire_detectors()), (3, 8));
        assert_eq!(
            (0..8).map(|v| part.index(v)).collect::<Vec<_>>(),
            [Some(0), None, Some(1), None, Some(2), None, None, None]
        );
        assert_eq!(part.index(8), None);
        // The edges of the kept chain, in order, with their weights and observables.
        assert_eq!(h.edge_u(), [0, 0, 1, 2]);
        assert_eq!(h.edge_v(), [3, 1, 2, 3]);
        assert_eq!(h.edge_weight(), &[0, 1, 2, 3].map(|e| g.edge_weight()[e]));
        assert_eq!(h.edge_obs(), [1, 0, 0, 0]);
        assert_eq!(h.source(), g.source());
        // The device's words: one word of 8 detectors, then the total.
        assert_eq!(part.device_words(), [[0b1_0101, 0], [0, 3]]);
    }

    #[test]
    fn compaction_moves_kept_events_and_drops_the_rest() {
        let part = ObservablePart::of(&interleaved()).unwrap().unwrap();
        let mut out = Vec::new();
        part.compact(&packed(8, &[0, 1, 3, 4, 7]), &mut out);
        assert_eq!(out, packed(3, &[0, 2]));
        // Missing bytes read as 0, bits past the model are ignored.
        part.compact(&[], &mut out);
        assert_eq!(out, [0]);
        part.compact(&[0b0000_0100, 0xFF], &mut out);
        assert_eq!(out, packed(3, &[1]));
    }

    #[test]
    fn nothing_to_drop_or_nothing_to_keep_gives_no_part() {
        let all = MatchingGraph::from_edges(2, 1, &[edge(0, Some(1), 0.1, 1)]).unwrap();
        assert!(ObservablePart::of(&all).unwrap().is_none());
        let none = MatchingGraph::from_edges(2, 1, &[edge(0, Some(1), 0.1, 0)]).unwrap();
        assert!(ObservablePart::of(&none).unwrap().is_none());
    }

    #[test]
    fn device_words_cover_every_detector_across_words() {
        // 70 detectors: 35 pairs (2k, 2k+1); every third pair carries the observable.
        let edges: Vec<EdgeSpec> = (0..35u32)
            .flat_map(|k| {
                let obs = u64::from(k % 3 == 0);
                [
                    edge(2 * k, Some(2 * k + 1), 0.01, 0),
                    edge(2 * k, None, 0.02, obs),
                ]
            })
            .collect();
        let g = MatchingGraph::from_edges(70, 1, &edges).unwrap();
        let part = ObservablePart::of(&g).unwrap().unwrap();
        let words = part.device_words();
        assert_eq!(words.len(), 70usize.div_ceil(32) + 1);
        for v in 0..70 {
            let [mask, base] = words[v / 32];
            let kept = mask >> (v % 32) & 1 == 1;
            assert_eq!(kept, part.index(v).is_some(), "detector {v}");
            if kept {
                let below = (mask & ((1u32 << (v % 32)) - 1)).count_ones();
                assert_eq!(part.index(v), Some(base + below), "detector {v}");
            }
        }
        assert_eq!(words[3], [0, part.graph().num_detectors() as u32]);
    }

    /// The specification on the part equals the specification on the whole graph, on every
    /// shot of the surface-code fixtures (both kinds of stabilizers: the part is ~57 % of
    /// the detectors).
    #[test]
    fn the_part_answers_every_fixture_shot_as_the_whole_graph() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures");
        for name in [
            "surface_d3_r3_z_p005",
            "surface_d5_r5_x_p005",
            "surface_d5_r5_z_p001",
            "surface_d7_r7_z_p001",
        ] {
            let dem = Dem::from_path(&root.join(format!("{name}.dem"))).unwrap();
            let g = MatchingGraph::from_dem(&dem).unwrap();
            let part = ObservablePart::of(&g)
                .unwrap()
                .expect("a memory experiment");
            let h = part.graph();
            assert!(h.num_detectors() < g.num_detectors(), "{name}");
            let shots =
                Shots::read(&root.join(format!("{name}.b8")), g.num_detectors(), None).unwrap();
            let (mut whole, mut sub) = (UfScratch::new(&g), UfScratch::new(h));
            let mut out = Vec::new();
            for i in 0..shots.len() {
                part.compact(shots.row(i), &mut out);
                assert_eq!(
                    sub.decode_reference(h, &out),
                    whole.decode_reference(&g, shots.row(i)),
                    "{name} shot {i}"
                );
            }
        }
    }

    /// A random graph of `parts` components (each a random connected graph on its own
    /// detectors, the detectors of all components interleaved), some with observables.
    fn components() -> impl Strategy<Value = (MatchingGraph, Vec<u8>)> {
        (2usize..5, 2usize..7, any::<u64>()).prop_map(|(parts, size, seed)| {
            let mut state = seed | 1;
            let mut next = move |m: u64| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                state % m
            };
            let n = parts * size;
            let det = |part: usize, i: usize| (i * parts + part) as u32;
            let mut edges = Vec::new();
            for part in 0..parts {
                let with_obs = part == 0 || next(2) == 0;
                // First, so a parallel edge added later merges into it and keeps its mask.
                if with_obs {
                    edges.push(edge(det(part, 0), None, 0.02, 1));
                }
                for i in 0..size {
                    let p = 0.005 + next(100) as f64 * 0.002;
                    if i > 0 {
                        let j = next(i as u64) as usize;
                        edges.push(edge(det(part, j), Some(det(part, i)), p, 0));
                    }
                    if next(3) == 0 {
                        let j = next(size as u64) as usize;
                        if j != i {
                            edges.push(edge(det(part, j), Some(det(part, i)), p * 0.7, 0));
                        }
                    }
                    if next(2) == 0 {
                        let obs = if with_obs { next(4) } else { 0 };
                        edges.push(edge(det(part, i), None, p * 1.3, obs));
                    }
                }
            }
            let g = MatchingGraph::from_edges(n as u32, 2, &edges).unwrap();
            let dets: Vec<u8> = (0..n.div_ceil(8)).map(|_| next(256) as u8).collect();
            (g, dets)
        })
    }

    proptest! {
        #[test]
        fn the_part_answers_random_syndromes_as_the_whole_graph((g, dets) in components()) {
            let whole = UfScratch::new(&g).decode_reference(&g, &dets);
            match ObservablePart::of(&g).unwrap() {
                Some(part) => {
                    let mut out = Vec::new();
                    part.compact(&dets, &mut out);
                    let h = part.graph();
                    prop_assert_eq!(UfScratch::new(h).decode_reference(h, &out), whole);
                    prop_assert_eq!(UfScratch::new(h).decode(h, &out), whole);
                }
                None => prop_assert!(observable_detectors(&g).iter().all(|&k| k)),
            }
        }
    }
}
