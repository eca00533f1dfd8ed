//! The CPU precompute a GPU upload of a `uf` model needs: its low-weight syndrome table
//! ([`uf_table_for`], [`crate::uf_table`]) and the split path's distance matrix and limit
//! ([`uf_split_limit_for`], [`crate::uf_split`]), bundled as [`UfPrecompute`].
//!
//! Both are kept per process by the graph's content and `K`, so backends started again for
//! one model compute them once; the table is also read from and written to the on-disk
//! cache ([`crate::uf_table_cache`]: `QFWD_UF_TABLE_CACHE`), so the next process need not
//! build it. What was computed, and how long it took, is logged on stderr.
#![forbid(unsafe_code)]

use std::sync::{Arc, Mutex};

use crate::graph::MatchingGraph;
use crate::uf_split::{self, Distances};
use crate::uf_table::{self, UfTable, Workers};
use crate::uf_table_cache;
use crate::{Error, Result};

/// A `uf` model's precompute for the GPU: the table and the split path.
#[derive(Debug, Clone)]
pub struct UfPrecompute {
    /// The low-weight syndrome table, if any ([`uf_table_for`]).
    pub table: Option<Arc<UfTable>>,
    /// The split path, with the table, for a model of at most
    /// [`uf_split::MAX_SPLIT_DETECTORS`] detectors.
    pub split: Option<SplitPath>,
}

/// The split path's precompute: the boundary-free distance matrix and the most defects the
/// path is tried for.
#[derive(Debug, Clone)]
pub struct SplitPath {
    pub dist: Distances,
    /// At most [`uf_split::MAX_SPLIT_DEFECTS`] ([`uf_split_limit_for`]).
    pub max_defects: usize,
}

impl UfPrecompute {
    /// The precompute of `graph` (the decoder's graph: its observable part where it has
    /// one), the table of `table_max_defects` defects (`None`: automatic, `Some(0)`: none;
    /// [`uf_table_for`]) built on `workers`, the split path tried up to
    /// `split_max_defects` defects (`None`: automatic; [`uf_split_limit_for`]).
    pub fn for_graph(
        graph: &MatchingGraph,
        table_max_defects: Option<u32>,
        split_max_defects: Option<u32>,
        workers: &Workers,
    ) -> Result<UfPrecompute> {
        let table = uf_table_for(graph, table_max_defects, workers)?;
        let mut split = None;
        if let Some(t) = &table {
            // No split path for a model too large for its matrix.
            if graph.num_detectors() <= uf_split::MAX_SPLIT_DETECTORS {
                let dist = Distances::build(graph)?;
                let max_defects = uf_split_limit_for(graph, t, &dist, split_max_defects);
                split = Some(SplitPath { dist, max_defects });
            }
        }
        Ok(UfPrecompute { table, split })
    }
}

/// A cached table's key: (graph content, K).
type UfTableKey = (u64, u32);

/// Tables built in this process; the last few are kept.
static UF_TABLES: Mutex<Vec<(UfTableKey, Arc<UfTable>)>> = Mutex::new(Vec::new());
/// Entries each of this process's caches keeps (the oldest goes first).
const UF_TABLES_KEPT: usize = 4;

/// The value `cache` holds for `key`, or `make`'s, kept (the cache's lock is held while it
/// runs, so two callers never make the same value twice); `true` when made here.
fn kept<V: Clone, E>(
    cache: &Mutex<Vec<(UfTableKey, V)>>,
    key: UfTableKey,
    make: impl FnOnce() -> std::result::Result<V, E>,
) -> std::result::Result<(V, bool), E> {
    let mut cache = cache.lock().unwrap_or_else(|p| p.into_inner());
    if let Some((_, v)) = cache.iter().find(|(c, _)| *c == key) {
        return Ok((v.clone(), false));
    }
    let v = make()?;
    if cache.len() == UF_TABLES_KEPT {
        cache.remove(0);
    }
    cache.push((key, v.clone()));
    Ok((v, true))
}

/// The low-weight syndrome table of `graph` for syndromes of at most `max_defects` defects
/// (`None`: [`uf_table::auto_max_defects_here`]; an explicit `K` above the detector count means
/// all of them), built with the CPU uf on `workers`, once per process for a given graph
/// content and `K` (logged on stderr), and read from / written to the on-disk cache
/// ([`uf_table_cache`]: `QFWD_UF_TABLE_CACHE`) so that the next process need not build it.
/// `Ok(None)`: no table (K = 0, or no observables).
pub fn uf_table_for(
    graph: &MatchingGraph,
    max_defects: Option<u32>,
    workers: &Workers,
) -> Result<Option<Arc<UfTable>>> {
    let n = graph.num_detectors();
    let (k, how) = match max_defects {
        None => (
            uf_table::auto_max_defects_here(n, graph.num_edges(), workers),
            "automatic",
        ),
        Some(k) => (k.min(n as u32), "set"),
    };
    if k == 0 || graph.num_observables() == 0 {
        if max_defects.is_none() {
            tracing::info!(
                "uf table for {}: none ({n} detectors, {} edges: over the automatic \
                 budget)",
                graph.source(),
                graph.num_edges()
            );
        }
        return Ok(None);
    }
    let mut origin = String::new();
    let (table, made) = kept(&UF_TABLES, (uf_table_cache::graph_hash(graph), k), || {
        let cache = uf_table_cache::dir_from_env();
        let (t, from) = uf_table_cache::load_or_build(cache.as_deref(), graph, k, || {
            UfTable::build_on(graph, k, workers)
        })?;
        let (took, threads) = t.build_time();
        origin = match from {
            uf_table_cache::Origin::Read(path) => {
                format!(
                    "read from {} in {:.2} s",
                    path.display(),
                    took.as_secs_f64()
                )
            }
            uf_table_cache::Origin::Built(saved) => format!(
                "built (precompute {:.2} s on {threads} threads){}",
                took.as_secs_f64(),
                saved.map_or(String::new(), |p| format!(", saved to {}", p.display()))
            ),
        };
        Ok::<_, Error>(Arc::new(t))
    })?;
    if !made {
        origin = "reused (built or read earlier in this process)".into();
    }
    tracing::info!(
        "uf table for {}: K = {k} ({how}), {} entries x {} B = {} B (+ {} B index), {origin}",
        graph.source(),
        table.len(),
        table.entry_bytes(),
        table.entries().len(),
        4 * (k as usize + 1 + k as usize * n),
    );
    Ok(Some(table))
}

/// Limits found in this process, per (graph content, K); the last few are kept.
static UF_SPLIT_LIMITS: Mutex<Vec<(UfTableKey, usize)>> = Mutex::new(Vec::new());
/// The seed of the shots [`uf_split_limit_for`] draws (fixed: a model gets the same limit
/// in every run).
pub const UF_SPLIT_LIMIT_SEED: u64 = 0x5eed_5b11_7000_0001;

/// The most defects for which the device tries the split path on `graph` with `table`
/// ([`uf_split::split_limit`], [`uf_split::SPLIT_LIMIT_SHOTS`] shots drawn from the model,
/// once per process for a given graph content and `K`; logged on stderr). `set`: the
/// user's limit instead (at most [`uf_split::MAX_SPLIT_DEFECTS`]).
pub fn uf_split_limit_for(
    graph: &MatchingGraph,
    table: &UfTable,
    dist: &Distances,
    set: Option<u32>,
) -> usize {
    if let Some(m) = set {
        let m = (m as usize).min(uf_split::MAX_SPLIT_DEFECTS);
        tracing::info!(
            "uf split path for {}: tried up to {m} defects (set)",
            graph.source()
        );
        return m;
    }
    let key = (uf_table_cache::graph_hash(graph), table.max_defects());
    let Ok((limit, _)) = kept(&UF_SPLIT_LIMITS, key, || {
        let t0 = std::time::Instant::now();
        let lim = uf_split::split_limit(
            graph,
            dist,
            &mut &*table,
            uf_split::SPLIT_LIMIT_SHOTS,
            UF_SPLIT_LIMIT_SEED,
        );
        let tried: u32 = lim.tried.iter().sum();
        let answered: u32 = lim.answered.iter().sum();
        tracing::info!(
            "uf split path for {}: tried up to {} defects (automatic: of {} shots drawn \
             from the model, {tried} had more than K = {} defects, the split path answered \
             {answered}; {:.2} s)",
            graph.source(),
            lim.max_defects,
            uf_split::SPLIT_LIMIT_SHOTS,
            table.max_defects(),
            t0.elapsed().as_secs_f64()
        );
        Ok::<_, std::convert::Infallible>(lim.max_defects)
    });
    limit
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::EdgeSpec;
    use crate::{Decoder, DecoderKind};

    fn fixture(name: &str) -> Decoder {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../tests/fixtures")
            .join(format!("{name}.dem"));
        Decoder::from_dem_path(&path, DecoderKind::Uf).unwrap()
    }

    /// The table of `K` (clamped to the detectors; automatic: all 8 of this model's), kept
    /// per graph content; `Some(0)` is none.
    #[test]
    fn tables_are_kept_per_graph_content() {
        let w = Workers::available();
        let dec = fixture("surface_d3_r1_z_p005");
        let g = dec.decode_graph();
        let t = uf_table_for(g, Some(3), &w).unwrap().unwrap();
        assert_eq!((t.max_defects(), t.len()), (3, 93));
        let again = fixture("surface_d3_r1_z_p005");
        let t2 = uf_table_for(again.decode_graph(), Some(3), &w)
            .unwrap()
            .unwrap();
        assert!(Arc::ptr_eq(&t, &t2));
        let auto = uf_table_for(g, None, &w).unwrap().unwrap();
        assert_eq!((auto.max_defects(), auto.len()), (8, 256));
        let big = uf_table_for(g, Some(12), &w).unwrap().unwrap();
        assert_eq!(big.max_defects(), 8);
        assert!(uf_table_for(g, Some(0), &w).unwrap().is_none());
        let off = UfPrecompute::for_graph(g, Some(0), None, &w).unwrap();
        assert!(off.table.is_none() && off.split.is_none());
    }

    /// The split path's limit: the automatic one, or the one set (at most
    /// [`uf_split::MAX_SPLIT_DEFECTS`]); no split path for a model too large for its matrix.
    #[test]
    fn split_limits_are_automatic_or_set() {
        let w = Workers::available();
        let dec = fixture("surface_d3_r3_z_p001");
        let g = dec.decode_graph();
        let pre = UfPrecompute::for_graph(g, Some(2), None, &w).unwrap();
        let (t, sp) = (pre.table.unwrap(), pre.split.unwrap());
        assert_eq!(sp.dist.as_slice(), Distances::build(g).unwrap().as_slice());
        let want = uf_split::split_limit(
            g,
            &sp.dist,
            &mut t.as_ref(),
            uf_split::SPLIT_LIMIT_SHOTS,
            UF_SPLIT_LIMIT_SEED,
        );
        assert_eq!(sp.max_defects, want.max_defects);
        for (set, got) in [(0, 0), (5, 5), (32, 32), (40, 32)] {
            let pre = UfPrecompute::for_graph(g, Some(2), Some(set), &w).unwrap();
            assert_eq!(pre.split.unwrap().max_defects, got);
        }

        let big = uf_split::MAX_SPLIT_DETECTORS as u32 + 1;
        let edge = |u, v, obs| EdgeSpec {
            u,
            v,
            p: 0.01,
            observables: obs,
        };
        let chain: Vec<EdgeSpec> = std::iter::once(edge(0, None, 1))
            .chain((1..big).map(|v| edge(v - 1, Some(v), 0)))
            .collect();
        let g = MatchingGraph::from_edges(big, 1, &chain).unwrap();
        let pre = UfPrecompute::for_graph(&g, Some(1), None, &w).unwrap();
        assert_eq!(pre.table.unwrap().max_defects(), 1);
        assert!(pre.split.is_none());
    }
}
