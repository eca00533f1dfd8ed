//! The round structure of a memory experiment's detector error model: which round and
//! which slot each detector is, and the edges of each round as a template that windows are
//! built from.
//!
//! A detector's round is its last coordinate (Stim's `t`), counted from the least one; its
//! slot is the rest of its coordinates (its place on the chip). The slots, in the order
//! of the first round that has the most detectors, are the bits of a round on the wire.
//! Each edge of the model's matching graph belongs to its lower round; a round's *class*
//! is the set of its edges, written relative to the round (slots, round step 0 or 1,
//! quantized weight, observables), and which slots have a detector in it. A long memory
//! experiment's classes are the same from some head round `H` to some tail round `T0`;
//! the rounds before are the head, those from `T0` on the tail (the last is the final
//! round, the data qubits' measurement).
#![forbid(unsafe_code)]

use crate::dem::Dem;
use crate::graph::MatchingGraph;
use crate::observable_part::observable_detectors;
use crate::{Error, Result};

/// A template edge's far end when it is the boundary.
pub const TO_BOUNDARY: u32 = u32::MAX;

/// One edge of a round class: from kept slot `a` in the round to kept slot `b` in the
/// round `db` (0 or 1) later, or to the boundary (`b == TO_BOUNDARY`, `db == 0`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TemplateEdge {
    pub a: u32,
    pub b: u32,
    pub db: u32,
    /// Merged probability, as the model's matching graph has it.
    pub p: f64,
    pub weight: u32,
    pub observables: u64,
}

impl TemplateEdge {
    /// What makes two edges the same, the probability left out (its quantized weight
    /// stands for it).
    fn key(&self) -> (u32, u32, u32, u32, u64) {
        (self.db, self.a, self.b, self.weight, self.observables)
    }
}

/// The edges of one round (lower round), and which kept slots have a detector in it.
#[derive(Debug, Clone, PartialEq)]
pub struct RoundClass {
    pub edges: Vec<TemplateEdge>,
    pub present: Vec<bool>,
}

impl RoundClass {
    fn same(&self, other: &RoundClass) -> bool {
        self.present == other.present
            && self.edges.len() == other.edges.len()
            && self
                .edges
                .iter()
                .zip(&other.edges)
                .all(|(x, y)| x.key() == y.key())
    }
}

/// Where each detector of a model sits: round and slot.
#[derive(Debug, Clone)]
pub struct DetectorPlaces {
    /// Per detector: (round, slot).
    pub place: Vec<(u32, u32)>,
    /// Spatial coordinates of each slot, in wire order.
    pub slots: Vec<Vec<f64>>,
    /// The last round (the final round of a memory experiment).
    pub last_round: u32,
}

fn model_error(dem: &Dem, detail: String) -> Error {
    Error::DecoderModel {
        file: dem.source.clone(),
        detail,
    }
}

/// The exact key of a coordinate list (`-0.0` read as `0.0`).
fn coord_key(c: &[f64]) -> Vec<u64> {
    c.iter().map(|x| (x + 0.0).to_bits()).collect()
}

impl DetectorPlaces {
    /// Rounds and slots of every detector of `dem`; `slots`, when given, fixes the slot
    /// order (another model of the same code), else it is taken from the model itself.
    pub fn of(dem: &Dem, slots: Option<&[Vec<f64>]>) -> Result<DetectorPlaces> {
        let n = dem.num_detectors as usize;
        if n == 0 {
            return Err(model_error(dem, "the model has no detectors".into()));
        }
        let mut t_min = f64::INFINITY;
        for d in 0..n {
            let Some(&t) = dem.coords(d).last() else {
                return Err(model_error(
                    dem,
                    format!(
                        "detector D{d} has no coordinates; streaming needs each detector's \
                         round as its last coordinate (Stim's `detector(x, y, t)`)"
                    ),
                ));
            };
            if t.fract() != 0.0 || !t.is_finite() {
                return Err(model_error(
                    dem,
                    format!("detector D{d}: round coordinate {t} is not an integer"),
                ));
            }
            t_min = t_min.min(t);
        }
        let round_of = |d: usize| (dem.coords(d).last().copied().unwrap_or(0.0) - t_min) as u32;
        let last_round = (0..n).map(round_of).max().unwrap_or(0);
        let spatial = |d: usize| {
            let c = dem.coords(d);
            &c[..c.len() - 1]
        };
        let slots: Vec<Vec<f64>> = match slots {
            Some(s) => s.to_vec(),
            None => {
                // The first round with the most detectors gives the slots' order.
                let mut count = vec![0usize; last_round as usize + 1];
                for d in 0..n {
                    count[round_of(d) as usize] += 1;
                }
                let most = count.iter().copied().max().unwrap_or(0);
                let reference = count.iter().position(|&c| c == most).unwrap_or(0) as u32;
                (0..n)
                    .filter(|&d| round_of(d) == reference)
                    .map(|d| spatial(d).to_vec())
                    .collect()
            }
        };
        let index: std::collections::HashMap<Vec<u64>, u32> = slots
            .iter()
            .enumerate()
            .map(|(i, c)| (coord_key(c), i as u32))
            .collect();
        if index.len() != slots.len() {
            return Err(model_error(
                dem,
                "two detectors of one round share their coordinates".into(),
            ));
        }
        let mut seen = std::collections::HashSet::new();
        let mut place = Vec::with_capacity(n);
        for d in 0..n {
            let r = round_of(d);
            let Some(&s) = index.get(&coord_key(spatial(d))) else {
                return Err(model_error(
                    dem,
                    format!(
                        "detector D{d} at {:?} (round {r}) is at no place of the reference \
                         round's detectors",
                        spatial(d)
                    ),
                ));
            };
            if !seen.insert((r, s)) {
                return Err(model_error(
                    dem,
                    format!(
                        "detector D{d}: round {r} has two detectors at {:?}",
                        spatial(d)
                    ),
                ));
            }
            place.push((r, s));
        }
        Ok(DetectorPlaces {
            place,
            slots,
            last_round,
        })
    }
}

/// The round templates of a long memory experiment.
#[derive(Debug, Clone)]
pub struct Templates {
    pub places: DetectorPlaces,
    /// Kept slots (those whose detectors can flip an observable), ascending.
    pub kept: Vec<u32>,
    /// The classes of rounds `0..H`.
    pub head: Vec<RoundClass>,
    /// The class of every round from `H` to `T0 - 1`.
    pub bulk: RoundClass,
    /// The classes of rounds `T0..=R` (the last is the final round).
    pub tail: Vec<RoundClass>,
    pub num_observables: u32,
}

impl Templates {
    /// Splits `dem` into head, bulk and tail classes (see the module docs).
    pub fn of(dem: &Dem) -> Result<Templates> {
        let places = DetectorPlaces::of(dem, None)?;
        let g = MatchingGraph::from_dem(dem)?;
        let kept = kept_slots(dem, &places, &g)?;
        let mut classes = round_classes(dem, &places, &g, &kept)?;
        let (h, t0) = repeating_rounds(dem, &classes)?;
        let bulk = classes[classes.len() / 2].clone();
        let tail = classes.split_off(t0);
        classes.truncate(h);
        Ok(Templates {
            places,
            kept,
            head: classes,
            bulk,
            tail,
            num_observables: g.num_observables() as u32,
        })
    }
}

/// The slots whose detectors can flip an observable, ascending; refuses a model where
/// there are none.
fn kept_slots(dem: &Dem, places: &DetectorPlaces, g: &MatchingGraph) -> Result<Vec<u32>> {
    let keep = observable_detectors(g);
    let mut kept_slot = vec![false; places.slots.len()];
    for (d, &k) in keep.iter().enumerate() {
        if k {
            kept_slot[places.place[d].1 as usize] = true;
        }
    }
    let kept: Vec<u32> = (0..kept_slot.len() as u32)
        .filter(|&s| kept_slot[s as usize])
        .collect();
    if kept.is_empty() {
        return Err(model_error(
            dem,
            "no edge flips an observable: there is nothing to decode".into(),
        ));
    }
    Ok(kept)
}

/// The class of every round: its kept slots with a detector, and its edges between kept
/// slots, sorted.
fn round_classes(
    dem: &Dem,
    places: &DetectorPlaces,
    g: &MatchingGraph,
    kept: &[u32],
) -> Result<Vec<RoundClass>> {
    let mut kept_index = vec![u32::MAX; places.slots.len()];
    for (i, &s) in kept.iter().enumerate() {
        kept_index[s as usize] = i as u32;
    }
    let rounds = places.last_round as usize + 1;
    let mut classes: Vec<RoundClass> = (0..rounds)
        .map(|_| RoundClass {
            edges: Vec::new(),
            present: vec![false; kept.len()],
        })
        .collect();
    for &(r, s) in &places.place {
        if kept_index[s as usize] != u32::MAX {
            classes[r as usize].present[kept_index[s as usize] as usize] = true;
        }
    }
    for e in 0..g.num_edges() {
        if let Some((lo, edge)) = template_edge(dem, places, g, &kept_index, e)? {
            classes[lo as usize].edges.push(edge);
        }
    }
    for c in &mut classes {
        c.edges
            .sort_by(|x, y| x.key().cmp(&y.key()).then(x.p.total_cmp(&y.p)));
    }
    Ok(classes)
}

/// Edge `e` of `g` as its lower round's template edge, with that round; `None` for an
/// edge between dropped slots. Refuses an edge from a kept slot to a dropped one, or
/// across more than one round.
fn template_edge(
    dem: &Dem,
    places: &DetectorPlaces,
    g: &MatchingGraph,
    kept_index: &[u32],
    e: usize,
) -> Result<Option<(u32, TemplateEdge)>> {
    let n = g.num_detectors() as u32;
    let (u, v) = (g.edge_u()[e], g.edge_v()[e]);
    let (ru, su) = places.place[u as usize];
    let ku = kept_index[su as usize];
    let far = (v != n).then(|| places.place[v as usize]);
    let v_kept = far.map(|(_, sv)| kept_index[sv as usize] != u32::MAX);
    match (ku != u32::MAX, v_kept) {
        (false, None | Some(false)) => return Ok(None),
        (true, None | Some(true)) => {}
        _ => {
            return Err(model_error(
                dem,
                format!("edge D{u} - D{v} joins a kept detector to a dropped one"),
            ))
        }
    }
    let kv = far.map_or(TO_BOUNDARY, |(_, sv)| kept_index[sv as usize]);
    let (lo, a, b, db) = match far {
        None => (ru, ku, TO_BOUNDARY, 0),
        Some((rv, _)) => {
            if ru.abs_diff(rv) > 1 {
                return Err(model_error(
                    dem,
                    format!(
                        "edge D{u} (round {ru}) - D{v} (round {rv}) spans more than \
                         one round; windows need edges within a round or to the next"
                    ),
                ));
            }
            // Lower round first; within a round, the lower slot first.
            if (ru, ku) <= (rv, kv) {
                (ru, ku, kv, rv - ru)
            } else {
                (rv, kv, ku, ru - rv)
            }
        }
    };
    let edge = TemplateEdge {
        a,
        b,
        db,
        p: g.edge_p()[e],
        weight: g.edge_weight()[e],
        observables: g.edge_obs()[e],
    };
    Ok(Some((lo, edge)))
}

/// The rounds `h..t0` whose class is the middle round's, around it; refuses fewer than 2.
fn repeating_rounds(dem: &Dem, classes: &[RoundClass]) -> Result<(usize, usize)> {
    let rounds = classes.len();
    let mid = rounds / 2;
    let mut h = mid;
    while h > 0 && classes[h - 1].same(&classes[mid]) {
        h -= 1;
    }
    let mut t0 = mid + 1;
    while t0 < rounds && classes[t0].same(&classes[mid]) {
        t0 += 1;
    }
    if t0 - h < 2 {
        return Err(model_error(
            dem,
            format!(
                "rounds {h}..{t0} repeat, fewer than 2 of {rounds}: a stream model needs \
                 a memory experiment whose middle rounds repeat (generate it with more \
                 rounds, e.g. 3 x distance)"
            ),
        ));
    }
    Ok((h, t0))
}
