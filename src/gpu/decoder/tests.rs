//! The upload's packing against the device source and the CPU decoders.
use super::*;
use crate::decode::graph::EdgeSpec;
use crate::decode::uf_split;

/// The device sees the block as `qfwd_abi.h` declares it (generated from the same
/// struct): the bytes the host writes follow the declaration order.
#[test]
fn params_bytes_follow_the_declared_layout() {
    // The GPU decoders hold 64 observables, fewer than the CPU's (they refuse more).
    assert!(MAX_RESULT_BYTES * 8 <= crate::decode::dem::MAX_OBSERVABLES as usize);
    assert_eq!(DecoderKind::Lut.device_code(), crate::abi::CODE_LUT);
    assert_eq!(DecoderKind::Uf.device_code(), crate::abi::CODE_UF);
    assert_eq!(
        DecoderKind::Matching.device_code(),
        crate::abi::CODE_MATCHING
    );
    assert_eq!(
        DecoderParams::default().to_bytes().len(),
        std::mem::size_of::<DecoderParams>()
    );
    let p = DecoderParams {
        uf_scratch: 0x0102_0304_0506_0708,
        loaded: 0xAABB_CCDD,
        uf_table_times: 0x1112_1314_1516_1718,
        ..DecoderParams::default()
    };
    let b = p.to_bytes();
    assert_eq!(std::mem::offset_of!(DecoderParams, uf_scratch), 48);
    assert_eq!(b[48..56], 0x0102_0304_0506_0708u64.to_le_bytes());
    assert_eq!(b[156..160], 0xAABB_CCDDu32.to_le_bytes());
    assert_eq!(b[168..176], 0x1112_1314_1516_1718u64.to_le_bytes());
}

fn edge(u: u32, v: Option<u32>, p: f64, obs: u64) -> EdgeSpec {
    EdgeSpec {
        u,
        v,
        p,
        observables: obs,
    }
}

#[test]
fn uf_model_packs_ids_weights_and_the_boundary() {
    let g = MatchingGraph::from_edges(
        3,
        2,
        &[
            edge(0, None, 0.1, 1),
            edge(0, Some(1), 0.2, 0),
            edge(1, Some(2), 0.01, 2),
        ],
    )
    .unwrap();
    let m = UfDeviceModel::new(&g).unwrap();
    let w = g.edge_weight();
    assert_eq!(m.edges[0], [3 << 16, w[0]]);
    assert_eq!(m.edges[2], [1 | 2 << 16, w[2]]);
    assert_eq!(m.boundary, vec![w[0] << 16, NO_ID, NO_ID]);
    assert_eq!(m.adj_offset, g.adj_offset());
    // Vertex 1's row: edges 1 (to 0) and 2 (to 2).
    let r = g.adj_offset()[1] as usize;
    assert_eq!(m.adj[r], [1, w[1]]);
    assert_eq!(m.adj[r + 1], [2 | 2 << 16, w[2]]);
    assert_eq!(m.result_bytes, 1);
    let l = m.layout;
    assert_eq!(l.clear_bytes % 16, 0);
    assert_eq!(l.bytes % 16, 0);
    assert!(l.visited < l.defect && l.defect < l.vbits && l.vbits < l.growth);
    assert!(l.growth + 2 * 3 <= l.clear_bytes && l.clear_bytes <= l.tree);
    assert!(l.cand + 4 * 3 <= l.bytes);
    // The lanes' stage (device step 2') before `phi`; `cl` and `visited` contiguous.
    assert!(l.cand as usize + 8 * LANE_SLOTS <= l.phi as usize);
    assert_eq!(l.cand % 8, 0);
    assert_eq!(l.visited, 4 * 4);
}

/// Every size: the uint2 stage and the u64 potentials aligned, the stage before them.
#[test]
fn scratch_layout_aligns_the_stage_for_every_size() {
    for n in 1..70 {
        for e in [1, 2, 3, 7, 50, 255, 256, 257, 600, 2000] {
            let l = UfScratchLayout::new(n, e);
            assert_eq!(l.cand % 8, 0, "n {n} e {e}");
            assert_eq!(l.phi % 8, 0, "n {n} e {e}");
            assert!(l.cand as usize + (4 * e).max(8 * LANE_SLOTS) <= l.phi as usize);
            assert_eq!(l.visited as usize, 4 * (n + 1));
        }
    }
}

#[test]
fn models_outside_the_device_limits_are_refused() {
    // A detector with more than MAX_DEGREE edges.
    let hub: Vec<EdgeSpec> = (1..=MAX_DEGREE as u32 + 1)
        .map(|v| edge(0, Some(v), 0.01, 0))
        .collect();
    let g = MatchingGraph::from_edges(MAX_DEGREE as u32 + 2, 1, &hub).unwrap();
    let e = UfDeviceModel::new(&g).unwrap_err().to_string();
    assert!(
        e.contains("incident edges") && e.contains("--backend cpu"),
        "{e}"
    );
}

#[test]
fn one_model_per_kind_and_blob_offsets_are_aligned() {
    let g = || {
        MatchingGraph::from_edges(2, 1, &[edge(0, None, 0.1, 1), edge(0, Some(1), 0.1, 0)]).unwrap()
    };
    let uf = Arc::new(Decoder::from_graph(g(), DecoderKind::Uf).unwrap());
    let uf2 = Arc::new(Decoder::from_graph(g(), DecoderKind::Uf).unwrap());
    let lut = Arc::new(Decoder::from_graph(g(), DecoderKind::Lut).unwrap());
    assert!(DeviceModels::new(&[], None).unwrap().is_empty());
    let m = DeviceModels::new(
        &[Arc::clone(&uf), Arc::clone(&lut), Arc::clone(&uf)],
        Some(0),
    )
    .unwrap();
    let p = m.params_at(0x1000);
    assert_eq!(p.loaded, LOADED_LUT | LOADED_UF);
    for a in [
        p.lut_table,
        p.uf_adj_offset,
        p.uf_adj,
        p.uf_edges,
        p.uf_edge_obs,
        p.uf_boundary,
    ] {
        assert!(a >= 0x1000 && a % 16 == 0, "{a:#x}");
    }
    assert_eq!(p.uf_detectors, 2);
    assert_eq!(p.lut_entry_bytes, 1);
    assert!(m.uf_table().is_none() && p.uf_table == 0 && p.uf_table_defects == 0);
    let e = DeviceModels::new(&[uf, uf2], None)
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("one model per decoder kind"), "{e}");
    let matching = Arc::new(Decoder::from_graph(g(), DecoderKind::Matching).unwrap());
    let e = DeviceModels::new(&[Arc::clone(&lut), matching], None)
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("CPU only") && e.contains("--decoder uf"), "{e}");
    // 1 + 4 payload bytes after the 8-byte header: two 12-byte pieces.
    assert_eq!(poll_chunks_for(&[lut]), 2);
}

/// The graph's arrays form one region of the blob that the persistent kernel copies
/// whole; the potentials have their aligned place in the per-warp state.
#[test]
fn uf_graph_is_one_region_the_kernel_can_stage() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/surface_d5_r5_z_p001.dem");
    let uf = Arc::new(Decoder::from_dem_path(&path, DecoderKind::Uf).unwrap());
    let m = DeviceModels::new(&[Arc::clone(&uf)], Some(0)).unwrap();
    let d = UfDeviceModel::new(uf.decode_graph()).unwrap();
    let p = m.params_at(0);
    let g = m.uf_graph_bytes as u64;
    // From the row offsets to past the boundary array, 16-byte aligned at both ends
    // (the kernel copies it 16 bytes at a time), inside the blob.
    assert_eq!((p.uf_adj_offset % 16, g % 16), (0, 0));
    let end = p.uf_adj_offset + g;
    assert!(end <= m.blob.len() as u64 * 8);
    for (at, len) in [
        (p.uf_adj_offset, 4 * d.adj_offset.len()),
        (p.uf_adj, 8 * d.adj.len()),
        (p.uf_edges, 8 * d.edges.len()),
        (p.uf_edge_obs, 8 * d.edge_obs.len()),
        (p.uf_boundary, 4 * d.boundary.len()),
    ] {
        assert!(
            at >= p.uf_adj_offset && at + len as u64 <= end,
            "{at} + {len}"
        );
    }
    assert!(end - (p.uf_boundary + 4 * d.boundary.len() as u64) < 16);
    // Not staged until placed (the one-request kernels read global memory).
    assert_eq!((p.uf_graph_bytes, p.uf_graph_offset), (0, 0));
    // The potentials, 8-byte aligned, inside the per-warp area.
    let l = d.layout;
    assert_eq!(l.phi % 8, 0);
    assert!(l.phi as usize + 8 * (uf.decode_graph().num_detectors() + 1) <= l.bytes as usize);
}

/// A model with an observable part uploads the part's graph, with the map the kernel
/// compacts each request's syndrome by (step 0) and the wire's detector count for the
/// payload check; a model without one has no map.
#[test]
fn observable_part_is_uploaded_with_its_map() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let uf = Arc::new(
        Decoder::from_dem_path(&dir.join("surface_d5_r5_z_p001.dem"), DecoderKind::Uf).unwrap(),
    );
    let part = uf.observable_part().expect("a memory experiment has one");
    let m = DeviceModels::new(&[Arc::clone(&uf)], Some(0)).unwrap();
    let (p, bytes) = (m.params_at(0x4000), blob_bytes(&m));
    assert_eq!((p.uf_wire_detectors, p.uf_detectors), (120, 72));
    assert_eq!(part.graph().num_detectors(), 72);
    assert!(p.uf_keep >= 0x4000 && p.uf_keep % 16 == 0);
    let words = part.device_words();
    assert_eq!(words.len(), 120usize.div_ceil(32) + 1);
    let at = (p.uf_keep - 0x4000) as usize;
    let got: Vec<[u32; 2]> = bytes[at..at + 8 * words.len()]
        .chunks(8)
        .map(|c| {
            let w = |i: usize| u32::from_le_bytes(c[i..i + 4].try_into().unwrap());
            [w(0), w(4)]
        })
        .collect();
    assert_eq!(got, words);
    assert_eq!(words.last(), Some(&[0, 72]));
    // The uploaded graph is the part's.
    let d = UfDeviceModel::new(part.graph()).unwrap();
    assert_eq!(d.num_detectors, 72);
    // The repetition code's detectors all see the observable: no part, no map.
    let rep =
        Arc::new(Decoder::from_dem_path(&dir.join("rep_d5_r5_p001.dem"), DecoderKind::Uf).unwrap());
    assert!(rep.observable_part().is_none());
    let p = DeviceModels::new(&[Arc::clone(&rep)], Some(0))
        .unwrap()
        .params_at(0x4000);
    assert_eq!(p.uf_keep, 0);
    assert_eq!(p.uf_wire_detectors, p.uf_detectors);
    assert_eq!(p.uf_detectors as usize, rep.num_detectors());
}

/// The request budgets reach the device: the decoder's `max_defects`, or `NO_BUDGET` where
/// it has none; a model of more than 64 observables is refused with the CPU's way out.
#[test]
fn budgets_are_uploaded_and_wide_models_refused() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let load =
        || Decoder::from_dem_path(&dir.join("surface_d5_r5_z_p001.dem"), DecoderKind::Uf).unwrap();
    let mut uf = load();
    let default = uf.max_defects();
    assert!(default > 0 && (default as usize) < uf.num_detectors());
    let mut lut =
        Decoder::from_dem_path(&dir.join("surface_d3_r1_z_p005.dem"), DecoderKind::Lut).unwrap();
    lut.set_max_defects(Some(3)).unwrap();
    let (uf_a, lut_a) = (Arc::new(load()), Arc::new(lut));
    let p = DeviceModels::new(&[Arc::clone(&uf_a), lut_a], Some(0))
        .unwrap()
        .params_at(0);
    assert_eq!((p.uf_max_defects, p.lut_max_defects), (default, 3));
    uf.set_max_defects(Some(0)).unwrap();
    let p = DeviceModels::new(&[Arc::new(uf)], Some(0))
        .unwrap()
        .params_at(0);
    assert_eq!(p.uf_max_defects, NO_BUDGET);
    let wide = Decoder::from_dem_text(
        "error(0.1) D0 L70\nerror(0.1) D0 D1\n",
        "w",
        DecoderKind::Uf,
    )
    .unwrap();
    let e = DeviceModels::new(&[Arc::new(wide)], Some(0))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("71 observables") && e.contains("--backend cpu"),
        "{e}"
    );
}

/// The table and its index land in the blob where the parameters say, with the
/// device's `K` and size; cached per graph content; `Some(0)` turns it off.
#[test]
fn uf_table_is_uploaded_with_its_index() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/surface_d3_r1_z_p005.dem");
    let uf = Arc::new(Decoder::from_dem_path(&path, DecoderKind::Uf).unwrap());
    let n = uf.num_detectors();
    let m = DeviceModels::new(&[Arc::clone(&uf)], Some(3)).unwrap();
    let t = m.uf_table().expect("a table").clone();
    let p = m.params_at(0);
    assert_eq!((p.uf_table_defects, p.uf_table_entries), (3, 93));
    assert_eq!(p.uf_table % 16, 0);
    assert_eq!(p.uf_table_index % 16, 0);
    let bytes: Vec<u8> = m.blob.iter().flat_map(|w| w.to_le_bytes()).collect();
    let at = p.uf_table as usize;
    assert_eq!(&bytes[at..at + t.entries().len()], t.entries());
    let ix = t.device_index();
    let at = p.uf_table_index as usize;
    let got: Vec<u32> = bytes[at..at + 4 * ix.len()]
        .chunks(4)
        .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    assert_eq!(got, ix);
    assert_eq!(ix.len(), 3 + 1 + 3 * n);
    // Built once per graph content (a second decoder over the same model shares it).
    let again = Arc::new(Decoder::from_dem_path(&path, DecoderKind::Uf).unwrap());
    let m2 = DeviceModels::new(&[again], Some(3)).unwrap();
    assert!(Arc::ptr_eq(m2.uf_table().unwrap(), &t));
    // Automatic: all 8 detectors; an explicit K above that means all of them too.
    let auto = DeviceModels::new(&[Arc::clone(&uf)], None).unwrap();
    assert_eq!(auto.params_at(0).uf_table_defects, 8);
    assert_eq!(auto.params_at(0).uf_table_entries, 256);
    let big = DeviceModels::new(&[Arc::clone(&uf)], Some(12)).unwrap();
    assert_eq!(big.params_at(0).uf_table_defects, 8);
    let off = DeviceModels::new(&[uf], Some(0)).unwrap();
    assert!(off.uf_table().is_none() && !off.uf_split());
    assert_eq!(off.params_at(0x1000).uf_table, 0);
    assert_eq!(off.params_at(0x1000).uf_dist, 0);
    assert_eq!(off.params_at(0x1000).uf_table_times, 0);
}

fn blob_bytes(m: &DeviceModels) -> Vec<u8> {
    m.blob.iter().flat_map(|w| w.to_le_bytes()).collect()
}

/// The image the persistent kernel copies into shared memory holds, at the offsets
/// the parameters give, the same bytes as the global arrays the split path reads
/// otherwise: the whole distance matrix and index, and the entries and times of the
/// groups of at most `S` defects, `S` the largest that fits (d = 5: K = 2 whole; with
/// K = 3 the three-defect entries do not fit, so S = 2).
#[test]
fn stage_image_holds_the_split_arrays() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let dec = Arc::new(
        Decoder::from_dem_path(&dir.join("surface_d5_r5_z_p001.dem"), DecoderKind::Uf).unwrap(),
    );
    let n = dec.decode_graph().num_detectors();
    for (k, want_entries) in [
        (2u32, 1 + n + n * (n - 1) / 2),
        (3, 1 + n + n * (n - 1) / 2),
    ] {
        let m = DeviceModels::new(&[Arc::clone(&dec)], Some(k)).unwrap();
        let (p, bytes) = (m.params_at(0), blob_bytes(&m));
        let t = m.uf_table().unwrap();
        assert_eq!(p.uf_stage_entries as usize, want_entries, "K={k}");
        assert!(p.uf_stage_bytes as usize <= STAGE_MAX_BYTES);
        assert_eq!(p.uf_stage_bytes % 16, 0);
        let img = &bytes[p.uf_stage as usize..][..p.uf_stage_bytes as usize];
        let dist_len = n * n * 2;
        assert_eq!(img[..dist_len], bytes[p.uf_dist as usize..][..dist_len]);
        let ix_len = t.device_index().len() * 4;
        assert_eq!(
            img[p.uf_stage_index as usize..][..ix_len],
            bytes[p.uf_table_index as usize..][..ix_len]
        );
        let e = want_entries;
        let rb = p.uf_result_bytes as usize;
        assert_eq!(
            img[p.uf_stage_obs as usize..][..e * rb],
            bytes[p.uf_table as usize..][..e * rb]
        );
        assert_eq!(
            img[p.uf_stage_times as usize..][..e * 2],
            bytes[p.uf_table_times as usize..][..e * 2]
        );
        for off in [p.uf_stage_index, p.uf_stage_obs, p.uf_stage_times] {
            assert_eq!(off % 16, 0);
        }
    }
    // No table, no image.
    let m = DeviceModels::new(&[dec], Some(0)).unwrap();
    assert_eq!(
        (m.params_at(0).uf_stage, m.params_at(0).uf_stage_bytes),
        (0, 0)
    );
}

fn u16_at(bytes: &[u8], at: usize, i: usize) -> u16 {
    u16::from_le_bytes([bytes[at + 2 * i], bytes[at + 2 * i + 1]])
}

/// With the table, the distance matrix and the table's times are uploaded where the
/// parameters say; a model too large for the matrix gets the table without the split
/// path (never an error).
#[test]
fn split_arrays_are_uploaded_with_the_table() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/surface_d3_r3_z_p001.dem");
    let uf = Arc::new(Decoder::from_dem_path(&path, DecoderKind::Uf).unwrap());
    let n = uf.decode_graph().num_detectors();
    let m = DeviceModels::new(&[Arc::clone(&uf)], Some(2)).unwrap();
    assert!(m.uf_split());
    let p = m.params_at(0x2000);
    assert!(p.uf_dist >= 0x2000 && p.uf_dist % 16 == 0);
    assert!(p.uf_table_times >= 0x2000 && p.uf_table_times % 16 == 0);
    let (p, bytes) = (m.params_at(0), blob_bytes(&m));
    let dist = Distances::build(uf.decode_graph()).unwrap();
    let got: Vec<u16> = (0..n * n)
        .map(|i| u16_at(&bytes, p.uf_dist as usize, i))
        .collect();
    assert_eq!(got, dist.as_slice());
    let t = m.uf_table().unwrap();
    let got: Vec<u16> = (0..t.len())
        .map(|i| u16_at(&bytes, p.uf_table_times as usize, i))
        .collect();
    assert_eq!(got, t.times());
    // The split path's limit: the automatic one (the d = 3 model's shots split well:
    // no limit), or the one set, at most 32.
    let want = uf_split::split_limit(
        uf.decode_graph(),
        &dist,
        &mut t.as_ref(),
        uf_split::SPLIT_LIMIT_SHOTS,
        crate::decode::precompute::UF_SPLIT_LIMIT_SEED,
    );
    assert_eq!(p.uf_split_max_defects as usize, want.max_defects);
    for (set, got) in [(0, 0), (5, 5), (32, 32), (40, 32)] {
        let m = DeviceModels::with_split_limit(&[Arc::clone(&uf)], Some(2), Some(set));
        assert_eq!(m.unwrap().params_at(0).uf_split_max_defects, got);
    }

    let big = uf_split::MAX_SPLIT_DETECTORS as u32 + 1;
    // One chain, so every detector is in the observable part.
    let chain: Vec<EdgeSpec> = std::iter::once(edge(0, None, 0.01, 1))
        .chain((1..big).map(|v| edge(v - 1, Some(v), 0.01, 0)))
        .collect();
    let g = MatchingGraph::from_edges(big, 1, &chain).unwrap();
    let d = Arc::new(Decoder::from_graph(g, DecoderKind::Uf).unwrap());
    let m = DeviceModels::new(&[d], Some(1)).unwrap();
    assert!(m.uf_table().is_some() && !m.uf_split());
    let p = m.params_at(0x1000);
    assert_eq!((p.uf_table_defects, p.uf_dist, p.uf_table_times), (1, 0, 0));
    assert_eq!(p.uf_split_max_defects, 0);
}

/// Step 1d of device/decode.cu, lane for lane, on the uploaded bytes (`verts` = the
/// sorted defects, one per lane): the first pass's one-defect entries at `base[1] + x`,
/// then `match_any` groups and the per-group sum of the rank terms, the leaders'
/// look-ups, the batched test, and the merge as closed lane masks.
/// Both groupings, in the device's order (`Chains`, then the returned links).
/// The answer and the grouping that passed (each defect's label, its least lane).
fn device_split(p: &DecoderParams, bytes: &[u8], defects: &[u32]) -> Option<(u64, Vec<usize>)> {
    device_split_grouped(p, bytes, defects, false)
        .or_else(|| device_split_grouped(p, bytes, defects, true))
}

fn device_split_grouped(
    p: &DecoderParams,
    bytes: &[u8],
    defects: &[u32],
    mutual: bool,
) -> Option<(u64, Vec<usize>)> {
    let nd = defects.len();
    let (n, kmax) = (p.uf_detectors as usize, p.uf_table_defects as usize);
    if p.uf_dist == 0 || nd == 0 || nd > 32 {
        return None;
    }
    let ix = |i: usize| {
        let at = p.uf_table_index as usize + 4 * i;
        u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap())
    };
    let mut label: Vec<usize> = (0..32).collect();
    for pass in 0..nd {
        let gm = |lane: usize| -> u32 {
            (0..32)
                .filter(|&l| label[l] == label[lane])
                .fold(0, |m, l| m | 1 << l)
        };
        if (0..nd).any(|l| gm(l).count_ones() as usize > kmax) {
            return None;
        }
        let c: Vec<u32> = (0..nd)
            .map(|l| {
                let pos = (gm(l) & ((1u32 << l) - 1)).count_ones() as usize;
                ix(kmax + 1 + pos * n + defects[l] as usize)
            })
            .collect();
        let (mut obs, mut t) = (0u64, [0u32; 32]);
        for l in (0..nd).filter(|&l| label[l] == l) {
            let r = (0..nd)
                .filter(|&j| label[j] == l)
                .fold(0u32, |a, j| a.wrapping_add(c[j]));
            let at = if pass == 0 {
                ix(1) + defects[l]
            } else {
                ix(gm(l).count_ones() as usize).wrapping_add(r)
            };
            assert!(at < p.uf_table_entries);
            let e = p.uf_table as usize + at as usize * p.uf_result_bytes as usize;
            for (k, &b) in bytes[e..e + p.uf_result_bytes as usize].iter().enumerate() {
                obs ^= u64::from(b) << (8 * k);
            }
            t[l] = u32::from(u16_at(bytes, p.uf_table_times as usize, at as usize));
        }
        let t: Vec<u32> = (0..32).map(|l| t[label[l]]).collect();
        let mut link = [None; 32];
        for a in 0..nd {
            let mut best = u32::MAX;
            for b in (0..nd).filter(|&b| label[b] != label[a]) {
                let d = u32::from(u16_at(
                    bytes,
                    p.uf_dist as usize,
                    defects[a] as usize * n + defects[b] as usize,
                ));
                if d <= t[a] + t[b] && d < best {
                    best = d;
                    link[a] = Some(b);
                }
            }
        }
        if link.iter().all(Option::is_none) {
            return Some((obs, label[..nd].to_vec()));
        }
        let returned: Vec<bool> = (0..32)
            .map(|a| link[a].is_some_and(|b| link[b] == Some(a)))
            .collect();
        if mutual {
            for (l, r) in link.iter_mut().zip(&returned) {
                if !r {
                    *l = None;
                }
            }
        }
        // The closed lane masks: the groups and the links, both directions.
        let close = |link: &[Option<usize>; 32]| -> Vec<u32> {
            let mut mask: Vec<u32> = (0..32)
                .map(|l| {
                    let mut m = gm(l);
                    if let Some(j) = link[l] {
                        m |= 1 << j;
                    }
                    (0..nd)
                        .filter(|&i| link[i] == Some(l))
                        .fold(m, |m, i| m | 1 << i)
                })
                .collect();
            loop {
                let next: Vec<u32> = (0..32)
                    .map(|l| {
                        (0..nd)
                            .filter(|&u| mask[l] >> u & 1 == 1)
                            .fold(mask[l], |m, u| m | mask[u])
                    })
                    .collect();
                if next == mask {
                    return mask;
                }
                mask = next;
            }
        };
        let mut mask = close(&link);
        if !mutual && mask.iter().any(|m| m.count_ones() as usize > kmax) {
            // `Chains`: components above K again, along their returned links only.
            for l in 0..32 {
                if mask[l].count_ones() as usize > kmax && !returned[l] {
                    link[l] = None;
                }
            }
            mask = close(&link);
        }
        for (l, m) in label.iter_mut().zip(&mask) {
            *l = m.trailing_zeros() as usize;
        }
    }
    None
}

/// The device's step 1d (emulated above on the uploaded arrays) answers exactly the
/// fixture shots that the CPU model of the paths sends down the split path, with the
/// same output; every other shot it leaves to the isolated step and the full decoder.
#[test]
fn device_split_step_matches_the_cpu_split_on_fixture_shots() {
    use crate::decode::uf_split::{decode_with_path, split_grouping, Path};
    use crate::decode::{Shots, UfScratch};
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    // The automatic limit, and none (32: every shot of up to 32 defects is tried).
    for (name, k, shots_max, limit) in [
        ("surface_d5_r5_z_p001", 2, 20_000, None),
        ("surface_d5_r5_x_p005", 2, 3_000, None),
        ("surface_d5_r5_x_p005", 2, 3_000, Some(32)),
        ("surface_d3_r3_z_p005", 3, 20_000, Some(32)),
        // K = 3: where `Chains` and `Mutual` group differently (at K = 2 they agree).
        ("surface_d5_r5_x_p005", 3, 3_000, Some(32)),
    ] {
        let dec = Arc::new(
            Decoder::from_dem_path(&dir.join(format!("{name}.dem")), DecoderKind::Uf).unwrap(),
        );
        // The graph and syndromes the device decodes: the observable part's.
        let g = dec.decode_graph();
        let n = g.num_detectors();
        let m = DeviceModels::with_split_limit(&[Arc::clone(&dec)], Some(k), limit).unwrap();
        let (p, bytes) = (m.params_at(0), blob_bytes(&m));
        let table = m.uf_table().unwrap();
        let dist = Distances::build(g).unwrap();
        let shots =
            Shots::read(&dir.join(format!("{name}.b8")), dec.num_detectors(), None).unwrap();
        let mut s = UfScratch::new(g);
        let mut split = 0;
        let mut buf = Vec::new();
        for i in 0..shots.len().min(shots_max) {
            let dets = dec.decode_input(shots.row(i), &mut buf);
            let limit = p.uf_split_max_defects as usize;
            let (want, path) =
                decode_with_path(g, &mut s, Some(&dist), limit, &mut table.as_ref(), dets);
            if matches!(path, Path::Empty | Path::Table) {
                continue;
            }
            let defects: Vec<u32> = (0..n as u32)
                .filter(|&v| dets[v as usize / 8] >> (v % 8) & 1 == 1)
                .collect();
            if defects.len() > limit {
                // Step 1d is not tried (qfwd_uf_run's condition).
                assert_ne!(path, Path::Split, "{name} shot {i}");
                continue;
            }
            let got = device_split(&p, &bytes, &defects);
            if path == Path::Split {
                // The same answer, through the same grouping as the CPU's.
                let grouping = uf_split::GROUPINGS
                    .into_iter()
                    .find_map(|rule| split_grouping(&defects, &dist, &mut table.as_ref(), rule));
                let cpu = grouping.map(|((obs, _), labels)| (obs, labels));
                assert_eq!(got.as_ref().map(|g| g.0), Some(want), "{name} shot {i}");
                assert_eq!(got, cpu, "{name} shot {i}");
                split += 1;
            } else {
                assert_eq!(got, None, "{name} shot {i}");
            }
        }
        println!(
            "{name} K={k} limit {}: {split} split",
            p.uf_split_max_defects
        );
        assert!(
            split > 0 || p.uf_split_max_defects <= k,
            "{name}: no shot took the split path"
        );
    }
}
