//! Any bytes as a uf table cache file (decode/src/uf_table_cache.rs), as a start of the
//! appliance reads it from `~/.cache/qfwd/uf-tables`: `load` never panics, never
//! allocates past what the model's own table needs, and either refuses the file with a
//! message naming it or returns exactly the table that was saved. The first byte picks
//! the input: the bytes as they are, or a good file (the 12-detector repetition code's
//! table of K = 2) with bytes overwritten at the positions the input gives, or cut short.
#![no_main]

use std::path::PathBuf;
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use qfwd::decode::uf_table::UfTable;
use qfwd::decode::{uf_table_cache, Dem, MatchingGraph};

struct Setup {
    graph: MatchingGraph,
    table: UfTable,
    good: Vec<u8>,
    path: PathBuf,
}

const K: u32 = 2;

fn setup() -> &'static Setup {
    static SETUP: OnceLock<Setup> = OnceLock::new();
    SETUP.get_or_init(|| {
        let text = include_str!("../../tests/fixtures/rep_d3_r3_p005.dem");
        let dem = Dem::parse(text, "rep_d3_r3_p005").expect("a shipped model parses");
        let graph = MatchingGraph::from_dem(&dem).expect("a shipped model builds");
        let table = UfTable::build(&graph, K, 1).expect("a small table builds");
        // Memory-backed where there is one: a file is written per input.
        let shm = std::path::Path::new("/dev/shm");
        let tmp = if shm.is_dir() {
            shm.to_path_buf()
        } else {
            std::env::temp_dir()
        };
        let dir = tmp.join(format!("qfwd-fuzz-uf-table-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a temporary folder");
        let path = dir.join("table.bin");
        uf_table_cache::save(&path, &graph, &table).expect("the good file is written");
        let good = std::fs::read(&path).expect("the good file reads back");
        Setup {
            graph,
            table,
            good,
            path,
        }
    })
}

fuzz_target!(|data: &[u8]| {
    let s = setup();
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let bytes = match mode % 3 {
        0 => rest.to_vec(),
        1 => {
            // (position u16, value) triples over the good file.
            let mut b = s.good.clone();
            for c in rest.chunks_exact(3) {
                let at = usize::from(u16::from_le_bytes([c[0], c[1]])) % b.len();
                b[at] = c[2];
            }
            b
        }
        _ => {
            let cut = rest
                .first()
                .map_or(0, |&c| usize::from(c) * s.good.len() / 256);
            s.good[..cut].to_vec()
        }
    };
    std::fs::write(&s.path, &bytes).expect("the temporary file is written");
    match uf_table_cache::load(&s.path, &s.graph, K) {
        Ok(Some(t)) => {
            assert_eq!(bytes, s.good, "only the good file loads");
            assert_eq!(t.entries(), s.table.entries());
            assert_eq!(t.times(), s.table.times());
        }
        Ok(None) => panic!("the file is there"),
        Err(e) => {
            let m = e.to_string();
            assert!(
                m.contains("uf table cache") && m.contains("table.bin"),
                "{m}"
            );
        }
    }
});
