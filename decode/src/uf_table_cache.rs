//! On-disk cache of low-weight syndrome tables ([`UfTable`]), so that a restart does not
//! pay the precompute again: the d = 7 part's K = 4 table (56 M entries) takes 16-27 s on
//! the 16-core H200 host and 60-70 s on the 2-core development VM, where it is written in
//! 0.7 s and read back, checks included, in 0.34 s.
//!
//! # Where
//!
//! `QFWD_UF_TABLE_CACHE`: a folder, or `off` (also `0` or empty) for none. Unset: the
//! user's cache folder, `$XDG_CACHE_HOME/qfwd/uf-tables`, else `$HOME/.cache/qfwd/uf-tables`
//! (none without either). One file per graph content and `K`:
//! `uf-table-v{FORMAT}-{graph hash}-k{K}.bin`. Only tables whose build took at least
//! [`SAVE_MIN_BUILD`] are written; smaller ones build faster than they read. Nothing is
//! ever removed: the files are the user's to delete.
//!
//! # Trust
//!
//! A file is used only when everything checks out; anything else is reported on stderr and
//! the table is built as without a cache (a cache never stops a start):
//! - the header: magic, [`FORMAT`], the graph's hash (FNV-1a 64 over everything the uf
//!   output depends on: detector and observable counts, edges, weights, observable masks,
//!   adjacency), detectors, `K`, entry size and count;
//! - a checksum (FNV-1a 64) over the entries and times: a torn or damaged file;
//! - [`SPOT_CHECKS`] entries spread over the table decoded again with the CPU uf and
//!   compared, result and time: a file written by a qfwd whose uf answered differently.
//!   [`FORMAT`] is raised with any change to the uf specification or the layout, so such a
//!   file is not even opened; the spot check is the guard for when that is forgotten.
//!
//! Writes go to a temporary file in the same folder, renamed into place: a reader sees a
//! whole file or none, and two processes building the same table at once both succeed.
#![forbid(unsafe_code)]

use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::graph::MatchingGraph;
use super::uf::UfScratch;
use super::uf_split::SAT;
use super::uf_table::{entries_upto, UfTable, MAX_ENTRIES};
use crate::{Error, Result};

/// The file layout's and the uf specification's version (module docs).
pub const FORMAT: u32 = 1;
/// Tables whose build took less are not written.
pub const SAVE_MIN_BUILD: Duration = Duration::from_secs(1);
/// Entries decoded again when a file is read.
pub const SPOT_CHECKS: usize = 256;
/// The environment variable naming the folder (or `off`).
pub const ENV: &str = "QFWD_UF_TABLE_CACHE";

const MAGIC: &[u8; 8] = b"QFWDUFT\0";
/// magic, format, K, detectors, entries, entry bytes, graph hash, checksum.
const HEADER_BYTES: usize = 8 + 4 + 4 + 8 + 8 + 4 + 8 + 8;

/// FNV-1a, 64 bits, continued from `h` (start from [`FNV_OFFSET`]).
fn fnv1a(mut h: u64, bytes: &[u8]) -> u64 {
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}
const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;

/// A hash of everything the uf output depends on in `g`, the same on every machine and
/// every build (the cache's key; the process's own cache of tables uses it too).
pub fn graph_hash(g: &MatchingGraph) -> u64 {
    let mut h = FNV_OFFSET;
    let counts = [
        g.num_detectors() as u64,
        g.num_observables() as u64,
        g.num_edges() as u64,
    ];
    for c in counts {
        h = fnv1a(h, &c.to_le_bytes());
    }
    for a in [
        g.edge_u(),
        g.edge_v(),
        g.edge_weight(),
        g.adj_offset(),
        g.adj_edge(),
        g.adj_nbr(),
        g.boundary_edge(),
    ] {
        h = fnv1a(h, &(a.len() as u64).to_le_bytes());
        for &x in a {
            h = fnv1a(h, &x.to_le_bytes());
        }
    }
    for &m in g.edge_obs() {
        h = fnv1a(h, &m.to_le_bytes());
    }
    h
}

/// The cache folder from [`ENV`] and the user's environment (module docs); `None`: off.
pub fn dir_from_env() -> Option<PathBuf> {
    dir_from(
        std::env::var_os(ENV).as_deref(),
        std::env::var_os("XDG_CACHE_HOME").as_deref(),
        std::env::var_os("HOME").as_deref(),
    )
}

fn dir_from(
    set: Option<&std::ffi::OsStr>,
    xdg: Option<&std::ffi::OsStr>,
    home: Option<&std::ffi::OsStr>,
) -> Option<PathBuf> {
    match set {
        Some(v) if v.is_empty() || v == "off" || v == "0" => None,
        Some(v) => Some(PathBuf::from(v)),
        None => xdg
            .filter(|x| !x.is_empty())
            .map(|x| PathBuf::from(x).join("qfwd/uf-tables"))
            .or_else(|| {
                home.filter(|h| !h.is_empty())
                    .map(|h| PathBuf::from(h).join(".cache/qfwd/uf-tables"))
            }),
    }
}

/// The file of `graph`'s table for `K` in `dir`.
pub fn path_for(dir: &Path, graph: &MatchingGraph, max_defects: u32) -> PathBuf {
    dir.join(format!(
        "uf-table-v{FORMAT}-{:016x}-k{max_defects}.bin",
        graph_hash(graph)
    ))
}

fn io_error(what: String) -> impl FnOnce(std::io::Error) -> Error {
    move |source| Error::Io { what, source }
}

fn bad(path: &Path, detail: impl std::fmt::Display) -> Error {
    Error::UfTableCache {
        path: path.to_path_buf(),
        detail: detail.to_string(),
    }
}

/// Writes `table` (of `graph`) to `path`, through a temporary file renamed into place
/// (creating the folder).
pub fn save(path: &Path, graph: &MatchingGraph, table: &UfTable) -> Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(io_error(format!(
        "uf table cache: cannot create {}",
        dir.display()
    )))?;
    let tmp = path.with_extension(format!("tmp.{}", std::process::id()));
    let written = (|| -> std::io::Result<()> {
        let mut w = BufWriter::with_capacity(1 << 20, File::create(&tmp)?);
        let times: Vec<u8> = table.times().iter().flat_map(|t| t.to_le_bytes()).collect();
        let sum = fnv1a(fnv1a(FNV_OFFSET, table.entries()), &times);
        w.write_all(MAGIC)?;
        w.write_all(&FORMAT.to_le_bytes())?;
        w.write_all(&table.max_defects().to_le_bytes())?;
        w.write_all(&(table.num_detectors() as u64).to_le_bytes())?;
        w.write_all(&(table.len() as u64).to_le_bytes())?;
        w.write_all(&(table.entry_bytes() as u32).to_le_bytes())?;
        w.write_all(&graph_hash(graph).to_le_bytes())?;
        w.write_all(&sum.to_le_bytes())?;
        w.write_all(table.entries())?;
        w.write_all(&times)?;
        w.into_inner().map_err(|e| e.into_error())?.sync_all()
    })();
    let renamed = written.and_then(|()| std::fs::rename(&tmp, path));
    if let Err(e) = renamed {
        let _ = std::fs::remove_file(&tmp);
        return Err(io_error(format!(
            "uf table cache: cannot write {}",
            path.display()
        ))(e));
    }
    Ok(())
}

/// Reads `graph`'s table for `K` from `path` and checks it (module docs). `Ok(None)`: no
/// such file.
pub fn load(path: &Path, graph: &MatchingGraph, max_defects: u32) -> Result<Option<UfTable>> {
    let t0 = Instant::now();
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => {
            return Err(io_error(format!(
                "uf table cache: cannot open {}",
                path.display()
            ))(e))
        }
    };
    let len = file
        .metadata()
        .map_err(io_error(format!("uf table cache: {}", path.display())))?
        .len();
    // A buffer of at most the file (a damaged file is often a small one).
    let mut r = BufReader::with_capacity((len as usize).clamp(HEADER_BYTES, 1 << 20), file);
    let mut h = [0u8; HEADER_BYTES];
    r.read_exact(&mut h)
        .map_err(|_| bad(path, format!("{len} bytes: shorter than its header")))?;
    let u32_at = |o: usize| u32::from_le_bytes(h[o..o + 4].try_into().unwrap());
    let u64_at = |o: usize| u64::from_le_bytes(h[o..o + 8].try_into().unwrap());
    if &h[..8] != MAGIC {
        return Err(bad(path, "not a qfwd uf table (magic)"));
    }
    let (format, k, n, count) = (u32_at(8), u32_at(12), u64_at(16), u64_at(24));
    let (entry_bytes, hash, sum) = (u32_at(32) as usize, u64_at(36), u64_at(44));
    let want_n = graph.num_detectors() as u64;
    let want_count = entries_upto(want_n, max_defects);
    let want_bytes = graph.num_observables().div_ceil(8);
    if format != FORMAT {
        return Err(bad(
            path,
            format!("format {format}, this qfwd reads {FORMAT}"),
        ));
    }
    if hash != graph_hash(graph) || n != want_n || k != max_defects {
        return Err(bad(
            path,
            format!(
                "for another model or K (graph hash {hash:016x}, {n} detectors, K = {k}; \
                 wanted {:016x}, {want_n}, K = {max_defects})",
                graph_hash(graph)
            ),
        ));
    }
    if count != want_count || entry_bytes != want_bytes || count > MAX_ENTRIES {
        return Err(bad(
            path,
            format!("{count} entries of {entry_bytes} B, wanted {want_count} of {want_bytes} B"),
        ));
    }
    let body = count * entry_bytes as u64 + 2 * count;
    if len != HEADER_BYTES as u64 + body {
        return Err(bad(
            path,
            format!(
                "{len} bytes, wanted {} (torn write?)",
                HEADER_BYTES as u64 + body
            ),
        ));
    }
    let mut entries = vec![0u8; count as usize * entry_bytes];
    let mut raw_times = vec![0u8; 2 * count as usize];
    r.read_exact(&mut entries)
        .and_then(|()| r.read_exact(&mut raw_times))
        .map_err(io_error(format!(
            "uf table cache: cannot read {}",
            path.display()
        )))?;
    if fnv1a(fnv1a(FNV_OFFSET, &entries), &raw_times) != sum {
        return Err(bad(path, "checksum mismatch (a damaged file)"));
    }
    let times = raw_times
        .chunks_exact(2)
        .map(|b| u16::from_le_bytes([b[0], b[1]]))
        .collect();
    let table = UfTable::from_arrays(
        graph.num_detectors(),
        max_defects,
        entry_bytes,
        entries,
        times,
        t0.elapsed(),
    )
    .ok_or_else(|| bad(path, "sizes do not fit the model"))?;
    spot_check(&table, graph).map_err(|detail| bad(path, detail))?;
    Ok(Some(table))
}

/// Where a table came from ([`load_or_build`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// Read from this file.
    Read(PathBuf),
    /// Built, and written to this file (`None`: not written: no cache, a quick build, or
    /// the write failed, which was reported).
    Built(Option<PathBuf>),
}

/// `graph`'s table for `K` from the cache folder `dir` (`None`: no cache) if a good file
/// is there, else `build`'s, written there when the build took at least
/// [`SAVE_MIN_BUILD`]. A bad file or a failed write is reported on stderr, not returned:
/// only `build`'s own error is.
pub fn load_or_build(
    dir: Option<&Path>,
    graph: &MatchingGraph,
    max_defects: u32,
    build: impl FnOnce() -> Result<UfTable>,
) -> Result<(UfTable, Origin)> {
    let path = dir.map(|d| path_for(d, graph, max_defects));
    if let Some(path) = &path {
        match load(path, graph, max_defects) {
            Ok(Some(t)) => return Ok((t, Origin::Read(path.clone()))),
            Ok(None) => {}
            Err(e) => tracing::warn!("{e}; building the table instead"),
        }
    }
    let t = build()?;
    let saved = path
        .filter(|_| t.build_time().0 >= SAVE_MIN_BUILD)
        .and_then(|path| match save(&path, graph, &t) {
            Ok(()) => Some(path),
            Err(e) => {
                tracing::warn!("{e}; the next start builds the table again");
                None
            }
        });
    Ok((t, Origin::Built(saved)))
}

/// Decodes [`SPOT_CHECKS`] entries spread over `table` again (the last entry among them)
/// and compares result and time.
fn spot_check(table: &UfTable, graph: &MatchingGraph) -> std::result::Result<(), String> {
    let mut scratch = UfScratch::new(graph);
    let mut dets = vec![0u8; graph.num_detectors().div_ceil(8)];
    let len = table.len();
    let picks = (0..SPOT_CHECKS).map(|j| {
        if j + 1 == SPOT_CHECKS {
            len - 1
        } else {
            // A stride coprime-ish to the levels' sizes, so each level is visited.
            ((j as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 11) as usize % len
        }
    });
    for i in picks {
        let defects = table.defects_of(i).ok_or("an entry past the table")?;
        dets.fill(0);
        for &d in &defects {
            dets[d as usize / 8] |= 1 << (d % 8);
        }
        let (obs, t) = scratch.decode_timed(graph, &dets);
        let want = (obs, t.min(SAT));
        let got = table.entry(&defects).ok_or("an entry past the table")?;
        if got != want {
            return Err(format!(
                "entry {i} (defects {defects:?}) holds {got:?}, the uf gives {want:?} \
                 (written by another qfwd?)"
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Dem, ObservablePart};
    use std::ffi::OsStr;

    fn part(name: &str) -> MatchingGraph {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../tests/fixtures")
            .join(format!("{name}.dem"));
        let whole = MatchingGraph::from_dem(&Dem::from_path(&path).unwrap()).unwrap();
        ObservablePart::of(&whole).unwrap().unwrap().graph().clone()
    }

    /// A folder of this test's own, empty.
    fn scratch_dir(test: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("qfwd-uf-cache-{test}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    fn same(a: &UfTable, b: &UfTable) -> bool {
        (a.max_defects(), a.entry_bytes(), a.entries(), a.times())
            == (b.max_defects(), b.entry_bytes(), b.entries(), b.times())
    }

    #[test]
    fn folder_from_the_environment() {
        fn s(x: &str) -> Option<&OsStr> {
            Some(OsStr::new(x))
        }
        assert_eq!(
            dir_from(s("/x/y"), s("/c"), s("/h")),
            Some(PathBuf::from("/x/y"))
        );
        for off in ["off", "0", ""] {
            assert_eq!(dir_from(s(off), s("/c"), s("/h")), None, "{off:?}");
        }
        assert_eq!(
            dir_from(None, s("/c"), s("/h")),
            Some(PathBuf::from("/c/qfwd/uf-tables"))
        );
        assert_eq!(
            dir_from(None, s(""), s("/h")),
            Some(PathBuf::from("/h/.cache/qfwd/uf-tables"))
        );
        assert_eq!(dir_from(None, None, None), None);
    }

    #[test]
    fn graph_hash_follows_the_content() {
        let a = part("surface_d5_r5_z_p001");
        assert_eq!(graph_hash(&a), graph_hash(&part("surface_d5_r5_z_p001")));
        assert_ne!(graph_hash(&a), graph_hash(&part("surface_d5_r5_z_p005")));
        assert_ne!(graph_hash(&a), graph_hash(&part("surface_d5_r5_x_p001")));
    }

    #[test]
    fn a_saved_table_reads_back_equal() {
        let g = part("surface_d5_r5_z_p001");
        let t = UfTable::build(&g, 2, 0).unwrap();
        let dir = scratch_dir("round-trip");
        let path = path_for(&dir, &g, 2);
        assert!(load(&path, &g, 2).unwrap().is_none(), "no file yet");
        save(&path, &g, &t).unwrap();
        let back = load(&path, &g, 2).unwrap().unwrap();
        assert!(same(&t, &back));
        assert_eq!(back.build_time().1, 1);
        // No temporary file is left beside it.
        let names: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names.len(), 1, "{names:?}");
        // Written again over itself (another process, the same table): still whole.
        save(&path, &g, &t).unwrap();
        assert!(same(&t, &load(&path, &g, 2).unwrap().unwrap()));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// Every way a file can be wrong is an error that says what, never a panic and never a
    /// table.
    #[test]
    fn damaged_stale_or_foreign_files_are_refused() {
        let g = part("surface_d5_r5_z_p001");
        let t = UfTable::build(&g, 2, 0).unwrap();
        let dir = scratch_dir("damaged");
        let path = path_for(&dir, &g, 2);
        save(&path, &g, &t).unwrap();
        let good = std::fs::read(&path).unwrap();
        let refused = |bytes: &[u8], graph: &MatchingGraph, k: u32| -> String {
            std::fs::write(&path, bytes).unwrap();
            match load(&path, graph, k) {
                Err(e) => e.to_string(),
                Ok(t) => panic!("accepted: {:?}", t.map(|t| t.len())),
            }
        };
        // A flipped byte in the body.
        let mut b = good.clone();
        b[HEADER_BYTES + 100] ^= 1;
        assert!(refused(&b, &g, 2).contains("checksum"));
        // Torn, empty, or not a table.
        assert!(refused(&good[..good.len() - 1], &g, 2).contains("torn"));
        assert!(refused(&[], &g, 2).contains("header"));
        let mut b = good.clone();
        b[0] = b'X';
        assert!(refused(&b, &g, 2).contains("magic"));
        // Another format, K or model.
        let mut b = good.clone();
        b[8..12].copy_from_slice(&(FORMAT + 1).to_le_bytes());
        assert!(refused(&b, &g, 2).contains("format"));
        assert!(refused(&good, &g, 3).contains("another model or K"));
        let other = part("surface_d5_r5_z_p005");
        assert!(refused(&good, &other, 2).contains("another model or K"));
        // Stale: every result flipped, with a checksum that fits (a qfwd whose uf answered
        // differently): the spot check finds it.
        let mut b = good.clone();
        let n_entries = t.len();
        let body = HEADER_BYTES..HEADER_BYTES + n_entries * t.entry_bytes();
        for x in &mut b[body.clone()] {
            *x ^= 1;
        }
        let sum = fnv1a(FNV_OFFSET, &b[HEADER_BYTES..]);
        b[44..52].copy_from_slice(&sum.to_le_bytes());
        assert!(refused(&b, &g, 2).contains("the uf gives"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// The same table with another build time (what decides whether it is written).
    fn taking(t: &UfTable, took: Duration) -> UfTable {
        UfTable::from_arrays(
            t.num_detectors(),
            t.max_defects(),
            t.entry_bytes(),
            t.entries().to_vec(),
            t.times().to_vec(),
            took,
        )
        .unwrap()
    }

    #[test]
    fn slow_builds_are_written_and_read_by_the_next_start() {
        let g = part("surface_d5_r5_x_p001");
        let t = UfTable::build(&g, 2, 0).unwrap();
        let dir = scratch_dir("load-or-build");
        let path = path_for(&dir, &g, 2);
        let mut builds = 0;
        // A quick build is not written; no cache, nothing written either.
        let (_, from) = load_or_build(Some(&dir), &g, 2, || {
            builds += 1;
            Ok(taking(&t, Duration::from_millis(10)))
        })
        .unwrap();
        assert_eq!(from, Origin::Built(None));
        let (_, from) = load_or_build(None, &g, 2, || {
            builds += 1;
            Ok(taking(&t, Duration::from_secs(5)))
        })
        .unwrap();
        assert_eq!((from, path.exists()), (Origin::Built(None), false));
        // A slow one is; the next start reads it and builds nothing.
        let (_, from) = load_or_build(Some(&dir), &g, 2, || {
            builds += 1;
            Ok(taking(&t, SAVE_MIN_BUILD))
        })
        .unwrap();
        assert_eq!(from, Origin::Built(Some(path.clone())));
        let (read, from) = load_or_build(Some(&dir), &g, 2, || -> Result<UfTable> {
            panic!("built although the file is good")
        })
        .unwrap();
        assert_eq!((from, builds), (Origin::Read(path.clone()), 3));
        assert!(same(&t, &read));
        // A damaged file: built again (and written again), not an error.
        let mut b = std::fs::read(&path).unwrap();
        let last = b.len() - 1;
        b[last] ^= 0x80;
        std::fs::write(&path, &b).unwrap();
        let (again, from) =
            load_or_build(Some(&dir), &g, 2, || Ok(taking(&t, SAVE_MIN_BUILD))).unwrap();
        assert_eq!(from, Origin::Built(Some(path.clone())));
        assert!(same(&t, &again) && load(&path, &g, 2).unwrap().is_some());
        // The build's own error is returned.
        let e = load_or_build(None, &g, 2, || {
            Err(Error::Decode {
                detail: "no".into(),
            })
        });
        assert!(e.is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_folder_that_cannot_be_made_is_an_error() {
        let g = part("surface_d3_r3_z_p001");
        let t = UfTable::build(&g, 2, 0).unwrap();
        let file = scratch_dir("not-a-folder");
        std::fs::write(&file, b"x").unwrap();
        let e = save(&path_for(&file, &g, 2), &g, &t)
            .unwrap_err()
            .to_string();
        assert!(e.contains("cannot create"), "{e}");
        std::fs::remove_file(&file).unwrap();
    }
}
