//! `scripts/uf-trace.py`, the summary of the uf stage trace (device/decode/common.cuh, "Stage
//! trace"), on lines in the kernel's format: stage names per path, medians, a pass cut short
//! by a group above K, the request summary of the dispatch trace ("QR" lines), and the clear
//! error when the input has no trace. Skips where there is no `python3`.

use std::io::Write;
use std::process::{Command, Stdio};

fn run_script(input: &str) -> Option<(bool, String, String)> {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/uf-trace.py");
    let mut child = match Command::new("python3")
        .arg(script)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
    {
        Ok(c) => c,
        Err(e) => {
            eprintln!("SKIP uf_trace_script: cannot run python3 ({e})");
            return None;
        }
    };
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    Some((
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    ))
}

/// `QT path defects passes stamps total | 20 stamps`, as decode.cu prints it.
fn qt(path: u32, defects: u32, passes: u32, stamps: &[u32], total: u32) -> String {
    let mut all = stamps.to_vec();
    all.resize(20, 0);
    let cols: Vec<String> = all.iter().map(u32::to_string).collect();
    format!(
        "QT {path} {defects} {passes} {} {total} | {}\n",
        stamps.len(),
        cols.join(" ")
    )
}

#[test]
fn summarizes_stages_per_path_and_pass() {
    let mut input = String::from("probe row 3: uf d5, surface_d5_r5_z_p001\n");
    input += &qt(1, 2, 0, &[200, 1600], 1700);
    input += &qt(1, 2, 0, &[220, 1420], 1500);
    input += &qt(1, 3, 0, &[240, 1740], 1800);
    // A split shot of two passes: count, defect list, then per pass start / look-ups / test.
    input += &qt(
        3,
        6,
        2,
        &[200, 5200, 7000, 8000, 8400, 9200, 14000, 14300, 14400],
        14500,
    );
    // A full shot whose second pass met a group above K right after its start.
    input += &qt(
        4,
        9,
        2,
        &[
            200, 600, 2400, 3400, 3900, 4900, 5400, 11400, 11500, 11600, 11700, 11800, 11900,
            12900, 38900, 52900, 55900,
        ],
        56000,
    );
    // A shot the lanes answered after the split path.
    input += &qt(
        5,
        9,
        1,
        &[
            200, 600, 2400, 3400, 3900, 4400, 4500, 4700, 5700, 7700, 9400, 9500,
        ],
        9600,
    );
    input += "cut short QT line follows\nQT 3 6 2 9 |\n";
    let Some((ok, out, err)) = run_script(&input) else {
        return;
    };
    assert!(ok, "uf-trace.py failed: {err}");
    assert!(out.contains("== 3: uf d5, surface_d5_r5_z_p001"), "{out}");
    // Medians: count 220, table 1400 - 200 / 1200 / 1500 -> 1400.
    let table = out.lines().find(|l| l.starts_with("table")).unwrap();
    assert!(table.contains("n     3"), "{table}");
    assert!(table.contains("count 220, table 1400"), "{table}");
    assert!(table.contains("total   1700"), "{table}");
    let split = out.lines().find(|l| l.starts_with("split")).unwrap();
    assert!(
        split.contains(
            "count 200, list 5000, split setup 1800, p1 look-ups 1000, p1 test 400, \
             p1 merge 800, p2 look-ups 4800, p2 test 300, split end 100"
        ),
        "{split}"
    );
    let full = out.lines().find(|l| l.starts_with("full")).unwrap();
    assert!(
        full.contains(
            "list 400, split setup 1800, p1 look-ups 1000, p1 test 500, p1 merge 1000, \
             split end 500, isolated 6000, lanes setup 100, lanes rebuild 100, lanes step 100, \
             lanes merge 100, lanes 100, setup 1000, growth 26000, forest 14000, peel 3000"
        ),
        "{full}"
    );
    let lanes = out.lines().find(|l| l.starts_with("lanes")).unwrap();
    assert!(
        lanes.contains(
            "list 400, split setup 1800, p1 look-ups 1000, p1 test 500, split end 500, \
             isolated 100, lanes setup 200, lanes rebuild 1000, lanes step 2000, \
             lanes merge 1700, lanes 100"
        ),
        "{lanes}"
    );
    assert!(out.contains("1 lines cut short"), "{out}");
}

#[test]
fn summarizes_requests_of_the_dispatch_trace() {
    // `QR code total handler defects repeat`, as forward.cu prints it.
    let mut input = String::from("probe row 3: uf d5, surface_d5_r5_z_p001\n");
    for (total, handler, repeat) in [(3000, 500, 400), (3200, 520, 420), (3100, 510, 450)] {
        input += &format!("QR 1 {total} {handler} 0 {repeat}\n");
    }
    input += "QR 3 6000 2400 2 1300\n";
    input += "QR 3 9000 5000 14 3000\n"; // 14 defects: counted with "12 and more"
    input += "QR 3 9100 5100 12 3100\n";
    input += "QR 3 90\n"; // cut short
    let Some((ok, out, err)) = run_script(&input) else {
        return;
    };
    assert!(ok, "uf-trace.py failed: {err}");
    assert!(out.contains("== 3: uf d5, surface_d5_r5_z_p001"), "{out}");
    // Outside = total - handler - repeat: 2100, 2260, 2140 -> p10 2100, median 2140, p90 2260.
    let parity = out.lines().find(|l| l.starts_with("parity")).unwrap();
    assert!(
        parity.contains("n     3 |     510     420 |   2100 /   2140 /   2260"),
        "{parity}"
    );
    let two = out.lines().find(|l| l.contains("defects  2")).unwrap();
    assert!(two.starts_with("uf"), "{two}");
    assert!(
        two.contains("2400    1300 |   2300 /   2300 /   2300"),
        "{two}"
    );
    let many = out.lines().find(|l| l.contains("defects 12+")).unwrap();
    assert!(many.contains("n     2"), "{many}");
    assert!(out.contains("1 lines cut short"), "{out}");
}

#[test]
fn dispatch_marks_become_spans() {
    // `QR code total handler defects repeat m0 m1 m2 m3`: the decoder path sets every mark,
    // parity's general path the first two (the rest 0).
    let mut input = String::from("probe row 3: uf d5, surface_d5_r5_z_p001\n");
    input += "QR 3 5000 1000 2 800 100 300 500 2400\n";
    input += "QR 3 5200 1000 2 800 120 340 560 2500\n";
    input += "QR 3 5400 1000 2 800 140 380 620 2600\n";
    input += "QR 1 3000 500 0 400 100 250 0 0\n";
    let Some((ok, out, err)) = run_script(&input) else {
        return;
    };
    assert!(ok, "uf-trace.py failed: {err}");
    // The marks line stands under its request's line.
    let marks_of = |kind: &str| {
        out.lines()
            .skip_while(|l| !l.starts_with(kind))
            .nth(1)
            .unwrap()
    };
    let uf = marks_of("uf");
    assert!(
        uf.contains(
            "marks (n 3): count 120, tags 220, claim+stage 220, handler+repeat 1940, store 2700"
        ),
        "{out}"
    );
    let parity = marks_of("parity");
    assert!(
        parity.contains("marks (n 1): count 100, tags 150, rest 2750"),
        "{out}"
    );
}

#[test]
fn input_without_a_trace_is_a_clear_error() {
    let Some((ok, _, err)) = run_script("running 1 test\ntest result: ok\n") else {
        return;
    };
    assert!(!ok);
    assert!(err.contains("QFWD_UF_TRACE=1"), "{err}");
    assert!(err.contains("QFWD_UF_TRACE=dispatch"), "{err}");
}
