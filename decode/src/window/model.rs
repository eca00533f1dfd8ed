//! [`StreamModel`]: a memory experiment's round templates cut into the window graphs a
//! stream decodes, built once and shared by every stream of that code.
#![forbid(unsafe_code)]

use crate::dem::Dem;
use crate::graph::{EdgeSpec, MatchingGraph};
use crate::{Error, Result};

use super::layout::{DetectorPlaces, RoundClass, Templates, TO_BOUNDARY};
use super::matching::MatchLimits;
use super::metric::Metric;

/// Which part of a stream a window graph covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WindowKind {
    /// Rounds `0..W` of a stream: the head rounds, then bulk ones; the top is open.
    First,
    /// `W` bulk rounds; the top is open.
    Bulk,
    /// The last window of a stream: `rounds` syndrome rounds and the final round, all
    /// committed. `from_start`: the window starts at round 0 (a stream shorter than `W`),
    /// else it starts in the bulk.
    Final { from_start: bool, rounds: u32 },
}

/// One window's matching graph. Vertex `j * slots + k` is kept slot `k` of the window's
/// round `j`; the boundary is [`MatchingGraph::boundary`]. Edges from the window's last
/// round to the round after it (not in the window) end on the boundary instead.
#[derive(Debug, Clone)]
pub struct WindowGraph {
    pub kind: WindowKind,
    /// Rounds in the window, the final round included.
    pub rounds: u32,
    /// Leading rounds whose correction is committed (every round of a final window).
    pub commit_rounds: u32,
    /// Kept slots per round.
    pub slots: u32,
    pub graph: MatchingGraph,
}

impl WindowGraph {
    /// The window round of vertex `v` (not the boundary).
    #[inline]
    pub fn round_of(&self, v: u32) -> u32 {
        v / self.slots
    }
}

/// The stream decoder's model of one code (see the module docs of [`super`]).
#[derive(Debug, Clone)]
pub struct StreamModel {
    source: String,
    places: DetectorPlaces,
    kept: Vec<u32>,
    num_observables: u32,
    rounds_per_window: u32,
    commit_rounds: u32,
    head_rounds: u32,
    tail_rounds: u32,
    min_rounds: u32,
    windows: Vec<WindowGraph>,
    templates: Templates,
    limits: MatchLimits,
    metric: Metric,
    /// Index in `windows` of the first final window from the start (`Final { from_start:
    /// true, rounds: min_rounds }`), and of the first from the bulk.
    first_final_from_start: usize,
    first_final_from_bulk: usize,
}

impl StreamModel {
    /// Builds the model of the code whose long memory experiment `dem` is (Stim's
    /// `detector(x, y, t)` coordinates give each detector's round), decoding windows of
    /// `rounds_per_window` (W) rounds and committing the first `commit_rounds` (C) of each.
    ///
    /// Needs `1 <= C < W`, C at least the model's head rounds (so every window after the
    /// first is a bulk one), and `W - C` at least its tail rounds less one (so a stream's
    /// last window holds every round that differs from the bulk).
    pub fn from_dem(dem: &Dem, rounds_per_window: u32, commit_rounds: u32) -> Result<StreamModel> {
        Self::from_dem_with(dem, rounds_per_window, commit_rounds, MatchLimits::DEFAULT)
    }

    /// [`StreamModel::from_dem`] with the window decoder's exact matching limited to
    /// regions within `limits` ([`MatchLimits::OFF`]: union-find alone).
    pub fn from_dem_with(
        dem: &Dem,
        rounds_per_window: u32,
        commit_rounds: u32,
        limits: MatchLimits,
    ) -> Result<StreamModel> {
        let (w, c) = (rounds_per_window, commit_rounds);
        if limits.defects > MatchLimits::MAX_DEFECTS {
            return Err(Error::InvalidSetting {
                key: "match_defects",
                detail: format!(
                    "{} defects: regions of at most {} are matched exactly",
                    limits.defects,
                    MatchLimits::MAX_DEFECTS
                ),
            });
        }
        if c == 0 || c >= w {
            return Err(Error::InvalidSetting {
                key: "commit_rounds",
                detail: format!("commit rounds C = {c} with W = {w}: need 1 <= C < W"),
            });
        }
        if w > 4096 {
            return Err(Error::InvalidSetting {
                key: "rounds_per_window",
                detail: format!("W = {w}: at most 4096 rounds per window"),
            });
        }
        let t = Templates::of(dem)?;
        let places = t.places.clone();
        let kept = t.kept.clone();
        let num_observables = t.num_observables;
        let head_rounds = t.head.len() as u32;
        let tail_rounds = t.tail.len() as u32;
        if c < head_rounds {
            return Err(Error::InvalidSetting {
                key: "commit_rounds",
                detail: format!(
                    "C = {c}, but the first {head_rounds} rounds of {} differ from the bulk: \
                     need C >= {head_rounds}",
                    dem.source
                ),
            });
        }
        if w - c + 1 < tail_rounds {
            return Err(Error::InvalidSetting {
                key: "rounds_per_window",
                detail: format!(
                    "W - C = {}, but the last {tail_rounds} rounds of {} (the final round \
                     included) differ from the bulk: need W - C >= {}",
                    w - c,
                    dem.source,
                    tail_rounds - 1
                ),
            });
        }
        let min_rounds = (head_rounds + tail_rounds).saturating_sub(1).max(1);
        let mut m = StreamModel {
            source: dem.source.clone(),
            places,
            kept,
            num_observables,
            rounds_per_window: w,
            commit_rounds: c,
            head_rounds,
            tail_rounds,
            min_rounds,
            windows: Vec::new(),
            first_final_from_start: 0,
            first_final_from_bulk: 0,
            templates: t,
            limits,
            metric: Metric::default(),
        };
        let mut kinds = vec![WindowKind::First, WindowKind::Bulk];
        m.first_final_from_start = kinds.len();
        for n in min_rounds..w {
            kinds.push(WindowKind::Final {
                from_start: true,
                rounds: n,
            });
        }
        m.first_final_from_bulk = kinds.len();
        for n in w - c..w {
            kinds.push(WindowKind::Final {
                from_start: false,
                rounds: n,
            });
        }
        for kind in kinds {
            let g = m.build_window(&m.templates, kind)?;
            m.windows.push(g);
        }
        m.metric = Metric::build(&m)?;
        Ok(m)
    }

    /// The class of round `r` of a stream of `rounds` syndrome rounds (round `rounds` is
    /// the final one); `rounds >= min_rounds()`.
    pub fn class_of(&self, r: u32, rounds: u32) -> &RoundClass {
        let t = &self.templates;
        let from_end = rounds - r;
        if from_end < self.tail_rounds {
            &t.tail[(self.tail_rounds - 1 - from_end) as usize]
        } else if r < self.head_rounds {
            &t.head[r as usize]
        } else {
            &t.bulk
        }
    }

    /// The classes of a window's rounds, oldest first.
    fn window_classes<'t>(&self, t: &'t Templates, kind: WindowKind) -> Vec<&'t RoundClass> {
        let w = self.rounds_per_window;
        let (from_start, syndrome_rounds, fin) = match kind {
            WindowKind::First => (true, w, false),
            WindowKind::Bulk => (false, w, false),
            WindowKind::Final { from_start, rounds } => (from_start, rounds, true),
        };
        let total = syndrome_rounds + u32::from(fin);
        (0..total)
            .map(|j| {
                // Distance from the final round (the tail's last class), for final windows.
                let from_end = total - 1 - j;
                if fin && from_end < self.tail_rounds {
                    &t.tail[(self.tail_rounds - 1 - from_end) as usize]
                } else if from_start && j < self.head_rounds {
                    &t.head[j as usize]
                } else {
                    &t.bulk
                }
            })
            .collect()
    }

    fn build_window(&self, t: &Templates, kind: WindowKind) -> Result<WindowGraph> {
        let classes = self.window_classes(t, kind);
        self.window_graph(kind, &classes)
    }

    /// The matching graph of a whole stream of `rounds` syndrome rounds and the final
    /// round, numbered as windows are (vertex `j * K + k`): what the stream's windows
    /// approximate. `rounds >= min_rounds()`.
    pub fn stream_graph(&self, rounds: u32) -> Result<MatchingGraph> {
        let classes: Vec<&RoundClass> = (0..=rounds).map(|r| self.class_of(r, rounds)).collect();
        let kind = WindowKind::Final {
            from_start: true,
            rounds,
        };
        Ok(self.window_graph(kind, &classes)?.graph)
    }

    fn window_graph(&self, kind: WindowKind, classes: &[&RoundClass]) -> Result<WindowGraph> {
        let k = self.kept.len() as u32;
        let rounds = classes.len() as u32;
        let n = rounds * k;
        let mut edges = Vec::new();
        for (j, class) in classes.iter().enumerate() {
            let j = j as u32;
            for e in &class.edges {
                let u = j * k + e.a;
                let v = if e.b == TO_BOUNDARY || j + e.db >= rounds {
                    None
                } else {
                    Some((j + e.db) * k + e.b)
                };
                edges.push(EdgeSpec {
                    u,
                    v,
                    p: e.p,
                    observables: e.observables,
                });
            }
        }
        let graph = MatchingGraph::from_edges(n, self.num_observables, &edges).map_err(|e| {
            Error::DecoderModel {
                file: self.source.clone(),
                detail: format!("window {kind:?}: {e}"),
            }
        })?;
        let commit_rounds = match kind {
            WindowKind::Final { .. } => rounds,
            _ => self.commit_rounds,
        };
        Ok(WindowGraph {
            kind,
            rounds,
            commit_rounds,
            slots: k,
            graph,
        })
    }

    /// The clusters the window decoder matches exactly.
    pub fn match_limits(&self) -> MatchLimits {
        self.limits
    }

    /// The window decoder's distance tables.
    pub fn metric(&self) -> &Metric {
        &self.metric
    }

    /// Where the model came from (for messages).
    pub fn source(&self) -> &str {
        &self.source
    }
    /// W: rounds per window.
    pub fn rounds_per_window(&self) -> u32 {
        self.rounds_per_window
    }
    /// C: rounds committed per window.
    pub fn commit_rounds(&self) -> u32 {
        self.commit_rounds
    }
    /// Detectors per round on the wire: every slot, in the model's slot order.
    pub fn detectors_per_round(&self) -> usize {
        self.places.slots.len()
    }
    /// Bytes of one round's detection events: `ceil(detectors_per_round / 8)`.
    pub fn round_bytes(&self) -> usize {
        self.detectors_per_round().div_ceil(8)
    }
    /// Spatial coordinates of each slot (a round's bit `i` is slot `i`).
    pub fn slot_coords(&self) -> &[Vec<f64>] {
        &self.places.slots
    }
    /// The slots the decoder reads (their detectors can flip an observable), ascending;
    /// events on the others are ignored.
    pub fn kept_slots(&self) -> &[u32] {
        &self.kept
    }
    pub fn num_observables(&self) -> usize {
        self.num_observables as usize
    }
    /// Rounds at a stream's start whose edges differ from the bulk.
    pub fn head_rounds(&self) -> u32 {
        self.head_rounds
    }
    /// Rounds at a stream's end (the final round included) whose edges differ from the bulk.
    pub fn tail_rounds(&self) -> u32 {
        self.tail_rounds
    }
    /// The fewest syndrome rounds a stream may have before its final round.
    pub fn min_rounds(&self) -> u32 {
        self.min_rounds
    }
    /// Every window graph, in the order [`StreamModel::window_index`] numbers them.
    pub fn windows(&self) -> &[WindowGraph] {
        &self.windows
    }

    /// The index in [`StreamModel::windows`] of a kind of window; `None` for a final
    /// window of a length no stream reaches (see [`StreamModel::min_rounds`]).
    pub fn window_index(&self, kind: WindowKind) -> Option<usize> {
        let w = self.rounds_per_window;
        match kind {
            WindowKind::First => Some(0),
            WindowKind::Bulk => Some(1),
            WindowKind::Final {
                from_start: true,
                rounds,
            } if (self.min_rounds..w).contains(&rounds) => {
                Some(self.first_final_from_start + (rounds - self.min_rounds) as usize)
            }
            WindowKind::Final {
                from_start: false,
                rounds,
            } if (w - self.commit_rounds..w).contains(&rounds) => {
                Some(self.first_final_from_bulk + (rounds - (w - self.commit_rounds)) as usize)
            }
            WindowKind::Final { .. } => None,
        }
    }

    /// How the detectors of `dem` (a memory experiment of this code, of any length) map
    /// to rounds: for splitting its shots into per-round events ([`Experiment::split`]).
    pub fn experiment(&self, dem: &Dem) -> Result<Experiment> {
        let places = DetectorPlaces::of(dem, Some(&self.places.slots))?;
        Ok(Experiment {
            round_bytes: self.round_bytes(),
            places,
        })
    }
}

/// A memory experiment's detectors by round and slot ([`StreamModel::experiment`]).
#[derive(Debug, Clone)]
pub struct Experiment {
    round_bytes: usize,
    places: DetectorPlaces,
}

impl Experiment {
    /// Syndrome rounds before the final round.
    pub fn rounds(&self) -> u32 {
        self.places.last_round
    }

    /// Per detector of the experiment's model: (round, slot).
    pub fn places(&self) -> &[(u32, u32)] {
        &self.places.place
    }

    /// One shot (bit-packed, LSB first, the model's detectors) as the stream sends it:
    /// `rounds() + 1` rounds of [`StreamModel::round_bytes`] each, the final round last.
    pub fn split(&self, shot: &[u8]) -> Vec<Vec<u8>> {
        let mut out = vec![vec![0u8; self.round_bytes]; self.places.last_round as usize + 1];
        for (d, &(r, s)) in self.places.place.iter().enumerate() {
            if shot.get(d / 8).is_some_and(|b| b >> (d % 8) & 1 == 1) {
                out[r as usize][s as usize / 8] |= 1 << (s % 8);
            }
        }
        out
    }
}
