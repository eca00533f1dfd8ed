//! Tests of the stream model and decoder on a synthetic repetition-code memory experiment
//! (and, in `decode/tests/stream.rs`, on Stim's surface-code models).
use std::sync::Arc;

use super::*;
use crate::dem::Dem;
use crate::graph::MatchingGraph;
use crate::window::repetition_text;

fn rep_dem(d: u32, rounds: u32) -> Dem {
    Dem::parse(&repetition_text(d, rounds, 0.02, 0.01), "rep").unwrap()
}

#[test]
fn templates_find_head_bulk_and_tail() {
    let t = Templates::of(&rep_dem(5, 8)).unwrap();
    assert_eq!(t.places.slots.len(), 8, "4 Z and 4 X slots");
    assert_eq!(t.kept, vec![0, 1, 2, 3], "the Z slots");
    assert_eq!((t.head.len(), t.tail.len()), (1, 1));
    // Bulk: 5 data edges (2 to the boundary), 4 time edges.
    assert_eq!(t.bulk.edges.iter().filter(|e| e.db == 0).count(), 5);
    assert_eq!(t.bulk.edges.iter().filter(|e| e.db == 1).count(), 4);
    assert_eq!(t.tail[0].edges.iter().filter(|e| e.db == 1).count(), 0);
}

#[test]
fn models_refuse_bad_settings_and_short_models() {
    let dem = rep_dem(5, 8);
    for (w, c, needle) in [(4, 4, "1 <= C < W"), (4, 0, "1 <= C < W")] {
        let e = StreamModel::from_dem(&dem, w, c).unwrap_err().to_string();
        assert!(e.contains(needle), "{e}");
    }
    let e = StreamModel::from_dem(&rep_dem(5, 2), 4, 2)
        .unwrap_err()
        .to_string();
    assert!(e.contains("more rounds"), "{e}");
    let no_coords = Dem::parse("error(0.1) D0 L0\nerror(0.1) D0 D1\n", "n").unwrap();
    let e = StreamModel::from_dem(&no_coords, 4, 2)
        .unwrap_err()
        .to_string();
    assert!(e.contains("no coordinates"), "{e}");
}

/// The whole experiment's graph, kept detectors only, renumbered as a window numbers them
/// (round-major, kept slots in order).
fn whole_graph_as_window(dem: &Dem, model: &StreamModel) -> MatchingGraph {
    let g = MatchingGraph::from_dem(dem).unwrap();
    let exp = model.experiment(dem).unwrap();
    let k = model.kept_slots().len() as u32;
    let slot_index = |s: u32| model.kept_slots().iter().position(|&x| x == s);
    let vertex = |d: u32| {
        let (r, s) = exp_places(&exp)[d as usize];
        slot_index(s).map(|i| r * k + i as u32)
    };
    let n = g.num_detectors() as u32;
    let mut edges = Vec::new();
    for e in 0..g.num_edges() {
        let Some(u) = vertex(g.edge_u()[e]) else {
            continue;
        };
        let v = (g.edge_v()[e] != n).then(|| vertex(g.edge_v()[e]).unwrap());
        edges.push(crate::graph::EdgeSpec {
            u,
            v,
            p: g.edge_p()[e],
            observables: g.edge_obs()[e],
        });
    }
    let verts = (exp.rounds() + 1) * k;
    MatchingGraph::from_edges(verts, g.num_observables() as u32, &edges).unwrap()
}

fn exp_places(exp: &Experiment) -> Vec<(u32, u32)> {
    exp.places().to_vec()
}

/// Sorted (u, v, weight, observables) of every edge.
fn edge_set(g: &MatchingGraph) -> Vec<(u32, u32, u32, u64)> {
    let mut v: Vec<_> = (0..g.num_edges())
        .map(|e| {
            (
                g.edge_u()[e],
                g.edge_v()[e],
                g.edge_weight()[e],
                g.edge_obs()[e],
            )
        })
        .collect();
    v.sort_unstable();
    v
}

#[test]
fn a_final_window_over_a_whole_experiment_is_its_graph() {
    // A stream as long as the model's experiment, shorter than W: one final window.
    for rounds in [6, 9] {
        let dem = rep_dem(5, rounds);
        let model = StreamModel::from_dem(&dem, 10, 3).unwrap();
        let kind = WindowKind::Final {
            from_start: true,
            rounds,
        };
        let wg = &model.windows()[model.window_index(kind).unwrap()];
        assert_eq!(wg.rounds, rounds + 1);
        assert_eq!(
            edge_set(&wg.graph),
            edge_set(&whole_graph_as_window(&dem, &model))
        );
    }
}

#[test]
fn bulk_windows_end_on_the_boundary_at_the_top() {
    let dem = rep_dem(5, 12);
    let model = StreamModel::from_dem(&dem, 4, 2).unwrap();
    let wg = &model.windows()[model.window_index(WindowKind::Bulk).unwrap()];
    let g = &wg.graph;
    assert_eq!((wg.rounds, wg.commit_rounds, wg.slots), (4, 2, 4));
    // The last round's time edges became boundary edges, merged with the spatial ones at
    // the chain's ends: every vertex of round 3 has a boundary edge.
    for s in 0..4 {
        assert_ne!(
            g.boundary_edge()[(3 * 4 + s) as usize],
            crate::graph::NO_EDGE
        );
    }
    // 5 spatial edges a round, 4 time edges between rounds, and the top's time edges: two
    // new boundary edges, two merged into the chain ends' (round 0 has no edges down).
    assert_eq!(g.num_edges(), 4 * 5 + 3 * 4 + 2);
}

/// One stream over a shot split into rounds; returns the XOR of its commits and checks
/// that the commits tile the rounds.
pub(crate) fn run_stream(stream: &mut StreamDecoder, rounds: &[Vec<u8>]) -> u64 {
    let mut flips = 0;
    let mut next = 0u64;
    let (last, body) = rounds.split_last().unwrap();
    for (r, ev) in body.iter().enumerate() {
        if let Some(c) = stream.push_round(r as u64, ev).unwrap() {
            assert_eq!(c.first_round, next);
            next += u64::from(c.rounds);
            flips ^= c.flips;
        }
    }
    let c = stream.finish(last).unwrap();
    assert_eq!(c.first_round, next);
    assert_eq!(next + u64::from(c.rounds), rounds.len() as u64);
    flips ^ c.flips
}

#[test]
fn single_errors_anywhere_are_corrected() {
    // Every single edge of the experiment flips its detectors; the stream's commits must
    // add up to the edge's observable flip, whatever window the edge falls in.
    let rounds = 13;
    let dem = rep_dem(5, rounds);
    let g = MatchingGraph::from_dem(&dem).unwrap();
    for (w, c) in [(4, 2), (6, 3), (5, 1), (20, 5)] {
        let model = Arc::new(StreamModel::from_dem(&dem, w, c).unwrap());
        let exp = model.experiment(&dem).unwrap();
        let mut stream = StreamDecoder::new(&model);
        for e in 0..g.num_edges() {
            let mut shot = vec![0u8; g.num_detectors().div_ceil(8)];
            for v in [g.edge_u()[e], g.edge_v()[e]] {
                if (v as usize) < g.num_detectors() {
                    shot[v as usize / 8] ^= 1 << (v % 8);
                }
            }
            stream.reset();
            let flips = run_stream(&mut stream, &exp.split(&shot));
            assert_eq!(flips, g.edge_obs()[e], "W={w} C={c} edge {e}");
        }
    }
}

#[test]
fn streams_refuse_bad_rounds_and_keep_going() {
    let dem = rep_dem(5, 12);
    let model = Arc::new(StreamModel::from_dem(&dem, 4, 2).unwrap());
    let mut s = StreamDecoder::new(&model);
    let ev = vec![0u8; model.round_bytes()];
    assert_eq!(model.round_bytes(), 1);
    assert_eq!(
        s.push_round(0, &[0, 0]),
        Err(StreamError::WrongLength {
            expected: 1,
            got: 2
        })
    );
    assert_eq!(
        s.push_round(1, &ev),
        Err(StreamError::RoundsMissing {
            expected: 0,
            got: 1
        })
    );
    assert_eq!(s.push_round(0, &ev), Ok(None));
    assert_eq!(
        s.push_round(0, &ev),
        Err(StreamError::RoundRepeated {
            expected: 1,
            got: 0
        })
    );
    for r in 1..3 {
        assert_eq!(s.push_round(r, &ev), Ok(None));
    }
    let c = s.push_round(3, &ev).unwrap().unwrap();
    assert_eq!(
        c,
        Commit {
            first_round: 0,
            rounds: 2,
            flips: 0
        }
    );
    assert_eq!((s.next_round(), s.window_start()), (4, 2));
    let last = s.finish(&ev).unwrap();
    assert_eq!((last.first_round, last.rounds), (2, 3));
    assert_eq!(s.push_round(4, &ev), Err(StreamError::Finished));
    assert_eq!(s.finish(&ev), Err(StreamError::Finished));
    s.reset();
    assert_eq!(s.push_round(0, &ev), Ok(None));
}

#[test]
fn short_streams_end_in_one_window() {
    let dem = rep_dem(5, 12);
    let model = Arc::new(StreamModel::from_dem(&dem, 6, 2).unwrap());
    assert_eq!(model.min_rounds(), 1);
    let mut s = StreamDecoder::new(&model);
    let ev = vec![0u8; model.round_bytes()];
    assert_eq!(
        s.finish(&ev),
        Err(StreamError::TooShort { rounds: 0, min: 1 })
    );
    for r in 0..3 {
        assert_eq!(s.push_round(r, &ev), Ok(None));
    }
    assert_eq!(
        s.finish(&ev),
        Ok(Commit {
            first_round: 0,
            rounds: 4,
            flips: 0
        })
    );
}

#[test]
fn stream_graphs_are_the_experiments_graph() {
    let dem = rep_dem(5, 9);
    let model = StreamModel::from_dem(&dem, 4, 2).unwrap();
    assert_eq!(
        edge_set(&model.stream_graph(9).unwrap()),
        edge_set(&whole_graph_as_window(&dem, &model))
    );
}

#[test]
fn sampled_streams_decode_to_their_flips() {
    // Data flips 2 %, measurement flips 1 %: a distance-7 repetition code corrects nearly
    // every stream of 40 rounds; the windows as well as the whole stream at once.
    let dem = Dem::parse(&repetition_text(7, 8, 0.02, 0.01), "rep7").unwrap();
    for (w, c) in [(8, 4), (50, 10)] {
        let model = Arc::new(StreamModel::from_dem(&dem, w, c).unwrap());
        let mut stream = StreamDecoder::new(&model);
        let (mut wrong, mut flipped) = (0, 0);
        for seed in 0..300 {
            let mut sampler = StreamSampler::new(&model, 40, seed).unwrap();
            let rounds: Vec<Vec<u8>> = std::iter::from_fn(|| sampler.next_round()).collect();
            assert_eq!(rounds.len(), 41);
            stream.reset();
            let got = run_stream(&mut stream, &rounds);
            wrong += usize::from(got != sampler.flips());
            flipped += usize::from(sampler.flips() != 0);
        }
        assert!(flipped > 50, "the truth is not trivial: {flipped}");
        assert!(wrong <= 6, "W={w} C={c}: {wrong} of 300 wrong");
    }
}

/// The pair table holds distances of the stream: for a window over a whole short stream,
/// no entry is longer than the window's own shortest path, a pair from the head to the
/// tail (computed on that stream alone) is exactly it, and an entry of that length flips
/// the same observables.
#[test]
fn pair_entries_are_the_streams_distances() {
    let dem = Dem::parse(&repetition_text(5, 8, 0.02, 0.01), "rep").unwrap();
    let model = StreamModel::from_dem(&dem, 6, 3).unwrap();
    let metric = model.metric();
    let rounds = 4;
    let kind = WindowKind::Final {
        from_start: true,
        rounds,
    };
    let index = model.window_index(kind).unwrap();
    let w = &model.windows()[index];
    let at = metric::WindowPlace::of(w);
    let g = &w.graph;
    let k = w.slots;
    let (mut exact, mut checked) = (0, 0);
    for a in 0..g.num_detectors() as u32 {
        let dists = shortest(g, a);
        for b in 0..g.num_detectors() as u32 {
            let e = metric.pair(at, a, b);
            let (d, m) = dists[b as usize];
            // The table's paths may use bulk rounds beyond the window's: never longer.
            assert!(metric::dist(e) <= d, "{a}-{b}: {} > {d}", metric::dist(e));
            let (lo, hi) = (a.min(b) / k, a.max(b) / k);
            if lo < model.head_rounds() && hi + model.tail_rounds() >= w.rounds {
                assert_eq!(metric::dist(e), d, "{a}-{b}");
                exact += 1;
            }
            if metric::dist(e) == d && d != metric::INF {
                assert_eq!(metric.masks()[metric::mask(e) as usize], m, "{a}-{b}");
                checked += 1;
            }
        }
    }
    assert!(
        exact > 0 && checked > exact,
        "{exact} exact, {checked} checked"
    );
}

/// Dijkstra from `a` over the detectors of `g`: each one's distance and observables.
fn shortest(g: &MatchingGraph, a: u32) -> Vec<(u32, u64)> {
    let n = g.num_detectors();
    let mut out = vec![(metric::INF, 0u64); n];
    let mut heap = std::collections::BinaryHeap::new();
    out[a as usize] = (0, 0);
    heap.push(std::cmp::Reverse((0u32, a)));
    while let Some(std::cmp::Reverse((d, x))) = heap.pop() {
        if d > out[x as usize].0 {
            continue;
        }
        let (off, adj) = (g.adj_offset(), g.adj_pairs());
        for &[e, y] in &adj[off[x as usize] as usize..off[x as usize + 1] as usize] {
            if y == g.boundary() {
                continue;
            }
            let nd = d + g.edge_weight()[e as usize];
            if nd < out[y as usize].0 {
                out[y as usize] = (nd, out[x as usize].1 ^ g.edge_obs()[e as usize]);
                heap.push(std::cmp::Reverse((nd, y)));
            }
        }
    }
    out
}

/// Exact matching inside clusters weighs no more than greedy matching, and is lighter on
/// some windows; both match every defect.
#[test]
fn exact_matching_is_no_heavier_than_greedy() {
    let dem = Dem::parse(&repetition_text(7, 12, 0.06, 0.06), "rep").unwrap();
    let model = Arc::new(StreamModel::from_dem(&dem, 8, 4).unwrap());
    let metric = model.metric();
    let index = model.window_index(WindowKind::Bulk).unwrap();
    let w = &model.windows()[index];
    let at = metric::WindowPlace::of(w);
    let mut rng = crate::sample::SplitMix64(5);
    let weight = |defects: &[u32], s: &WindowScratch| -> u64 {
        s.picks()
            .iter()
            .map(|p| {
                let a = defects[p.a as usize];
                let e = if p.b == uf::NONE {
                    metric.boundary(index, a)
                } else {
                    metric.pair(at, a, defects[p.b as usize])
                };
                u64::from(metric::dist(e))
            })
            .sum()
    };
    let (mut exact, mut greedy) = (
        WindowScratch::new(MatchLimits::DEFAULT),
        WindowScratch::new(MatchLimits::OFF),
    );
    let (mut lighter, mut clusters) = (0, 0);
    for _ in 0..400 {
        let defects: Vec<u32> = (0..w.graph.num_detectors() as u32)
            .filter(|_| rng.next_u64() % 8 == 0)
            .collect();
        exact.decode(metric, index, w, &defects);
        greedy.decode(metric, index, w, &defects);
        for s in [&exact, &greedy] {
            let mut seen = vec![0u32; defects.len()];
            for p in s.picks() {
                seen[p.a as usize] += 1;
                if p.b != uf::NONE {
                    seen[p.b as usize] += 1;
                }
            }
            assert!(seen.iter().all(|&c| c == 1), "every defect matched once");
        }
        let (a, b) = (weight(&defects, &exact), weight(&defects, &greedy));
        assert!(a <= b, "{a} > {b}");
        lighter += usize::from(a < b);
        clusters += exact.exact as usize;
    }
    assert!(
        lighter > 20 && clusters > 400,
        "{lighter} lighter, {clusters} clusters"
    );
}
