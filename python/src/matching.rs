//! What `qfwd.Matching` needs beyond the decoder's flips, kept out of `qfwd-decode` because
//! they follow PyMatching's Python API rather than the appliance's:
//!
//! - [`Weighted`]: the union-find decode on the *whole* graph with its correction's edges,
//!   so `return_weight` gets the solution's weight (the sum of its edges' `ln((1 - p) / p)`,
//!   PyMatching's definition). The decoder itself runs on the graph's observable part,
//!   which drops the components no observable crosses; their corrections weigh too.
//! - [`ClosedComponents`]: the graph's components with no boundary edge. A syndrome of odd
//!   parity in one has no perfect matching; PyMatching raises `ValueError` for it, and so
//!   does `qfwd.Matching` (union-find would answer something).
#![forbid(unsafe_code)]

use qfwd_decode::{MatchingGraph, UfScratch};

/// "Not in a closed component".
const OPEN: u32 = u32::MAX;

/// The weight of every edge of a graph, `ln((1 - p) / p)` of its merged probability.
pub fn edge_weights(graph: &MatchingGraph) -> Vec<f64> {
    graph
        .edge_p()
        .iter()
        .map(|&p| ((1.0 - p) / p).ln())
        .collect()
}

/// Working memory of one thread's weighted decodes.
pub struct Weighted {
    uf: UfScratch,
    correction: Vec<u32>,
}

impl Weighted {
    pub fn new(graph: &MatchingGraph) -> Weighted {
        Weighted {
            uf: UfScratch::new(graph),
            correction: Vec::new(),
        }
    }

    /// Decodes one bit-packed syndrome on `graph` (whose edge weights are `weights`), writes
    /// the flips of every observable into `out` (`ceil(observables / 8)` bytes, LSB first)
    /// and returns the correction's weight.
    pub fn decode(
        &mut self,
        graph: &MatchingGraph,
        weights: &[f64],
        dets: &[u8],
        out: &mut [u8],
    ) -> f64 {
        let mask = self.uf.decode_correction(graph, dets, &mut self.correction);
        for (k, byte) in out.iter_mut().enumerate() {
            *byte = mask.checked_shr(8 * k as u32).unwrap_or(0) as u8;
        }
        let mut weight = 0.0;
        for &e in &self.correction {
            weight += weights[e as usize];
            for &k in graph.edge_high_observables(e as usize) {
                out[k as usize / 8] ^= 1 << (k % 8);
            }
        }
        weight
    }
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
