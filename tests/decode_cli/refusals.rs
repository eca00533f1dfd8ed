//! What `qfwd decode` refuses, and what it leaves behind when it does: a clear message
//! naming the file, the line and the fix, never a panic; a malformed input writes nothing
//! (no partial output file, no temporary file, an old file kept, nothing on stdout); and a
//! 21-byte model of 2^24 detectors decodes in small memory (issue N5).

use std::path::{Path, PathBuf};

use qfwd::decode::{ShotFormat, Shots};

use super::{fixture, qfwd, run_with_stdin, tmp};

/// Runs `qfwd decode ARGS`; returns (success, stdout, stderr), asserting no panic.
fn decode(args: &[&str]) -> (bool, Vec<u8>, String) {
    let (ok, stdout, stderr) = run_with_stdin(args, b"");
    assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
    (ok, stdout, stderr)
}

/// A directory of its own for `name`.
fn dir(name: &str) -> PathBuf {
    let d = tmp(name);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// The fixture's shots as `01` text with line `bad` (1-based) broken.
fn broken_01(name: &str, shots: usize, bad: usize) -> String {
    let mut s = Shots::read(&fixture(&format!("{name}.b8")), 24, None).unwrap();
    s.truncate(shots);
    let mut lines: Vec<String> = s.to_01().lines().map(str::to_string).collect();
    lines[bad - 1].replace_range(3..4, "x");
    lines.join("\n") + "\n"
}

/// The names in `d`, sorted.
fn listing(d: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(d)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn errors_name_the_file_the_line_and_the_fix() {
    let name = "surface_d3_r3_z_p005";
    let d = dir("refusals");
    let dem = fixture(&format!("{name}.dem"));
    let dem = dem.to_str().unwrap();
    let b8 = fixture(&format!("{name}.b8"));
    let b8 = b8.to_str().unwrap();
    let text01 = d.join("shots.dat");
    std::fs::write(&text01, broken_01(name, 10, 10).replace('x', "0")).unwrap();
    let with_l = d.join("with-l.dets");
    std::fs::write(&with_l, "shot D1\nshot D3 L0\n").unwrap();
    let hits = d.join("far.hits");
    std::fs::write(&hits, "1,2\n\n3,24\n").unwrap();
    let short_obs = d.join("short.obs.01");
    std::fs::write(&short_obs, "0\n1\n").unwrap();
    let big = fixture("surface_d5_r5_z_p001.dem");
    let p = |p: &Path| p.to_str().unwrap().to_string();
    let cases: Vec<(Vec<String>, Vec<&str>)> = vec![
        (
            vec!["predict".into(), "--dem".into(), "nope.dem".into()],
            vec!["nope.dem"],
        ),
        (
            vec![
                "predict".into(),
                "--dem".into(),
                dem.into(),
                "--in".into(),
                "nope.b8".into(),
            ],
            vec!["cannot read shots nope.b8"],
        ),
        (
            vec![
                "predict".into(),
                "--dem".into(),
                dem.into(),
                "--in".into(),
                p(&d),
            ],
            vec!["is a directory"],
        ),
        (
            vec![
                "predict".into(),
                "--dem".into(),
                dem.into(),
                "--in".into(),
                p(&text01),
            ],
            vec![
                "shots.dat",
                "read as b8",
                "PyMatching's default; --in_format names another",
                "24 detectors",
            ],
        ),
        (
            vec![
                "predict".into(),
                "--dem".into(),
                dem.into(),
                "--in".into(),
                p(&with_l),
            ],
            vec![
                "with-l.dets",
                "line 2",
                "L0",
                "no observables",
                "--in_includes_appended_observables",
            ],
        ),
        (
            vec![
                "predict".into(),
                "--dem".into(),
                dem.into(),
                "--in".into(),
                p(&hits),
            ],
            vec!["far.hits", "line 3", "index 24 is past the 24 bits"],
        ),
        (
            vec![
                "predict".into(),
                "--dem".into(),
                dem.into(),
                "--enable_correlations".into(),
            ],
            vec!["correlated matching", "leave the flag out"],
        ),
        (
            vec![
                "predict".into(),
                "--dem".into(),
                dem.into(),
                "--in".into(),
                b8.into(),
                "--out".into(),
                b8.into(),
            ],
            vec!["both name", "elsewhere"],
        ),
        (
            vec![
                "count_mistakes".into(),
                "--dem".into(),
                dem.into(),
                "--in".into(),
                b8.into(),
            ],
            vec!["--obs_in FILE", "--in_includes_appended_observables"],
        ),
        (
            vec![
                "count_mistakes".into(),
                "--dem".into(),
                dem.into(),
                "--obs_in".into(),
                "-".into(),
            ],
            vec!["cannot both read stdin"],
        ),
        (
            vec![
                "count_mistakes".into(),
                "--dem".into(),
                dem.into(),
                "--in".into(),
                b8.into(),
                "--obs_in".into(),
                p(&short_obs),
            ],
            vec!["short.obs.01 ends after 2 shots", "same sampling run"],
        ),
        (
            vec![
                "predict".into(),
                "--dem".into(),
                p(&big),
                "--decoder".into(),
                "lut".into(),
            ],
            vec!["at most 24"],
        ),
        (
            vec![
                "predict".into(),
                "--dem".into(),
                dem.into(),
                "--decoder".into(),
                "mwpm".into(),
            ],
            vec!["unknown decoder", "available"],
        ),
    ];
    for (args, needles) in cases {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let (ok, stdout, stderr) = decode(&args);
        assert!(!ok && stdout.is_empty(), "{args:?}");
        for n in needles {
            assert!(stderr.contains(n), "{args:?}: {stderr:?} lacks {n:?}");
        }
    }
    // Nothing at all: the help, with the forms.
    let (ok, _, stderr) = decode(&[]);
    assert!(
        !ok && stderr.contains("predict") && stderr.contains("count_mistakes"),
        "{stderr}"
    );
}

/// A malformed input file writes nothing: no output file (nor temporary one), an old
/// output kept as it was, nothing on stdout; a good run replaces the old output, keeping its
/// permissions and the symbolic link that names it.
#[test]
fn a_malformed_input_writes_nothing() {
    let name = "surface_d3_r3_z_p005";
    let d = dir("atomic");
    let dem = fixture(&format!("{name}.dem"));
    let dem = dem.to_str().unwrap();
    let bad = d.join("bad.01");
    std::fs::write(&bad, broken_01(name, 9000, 8500)).unwrap();
    let bad = bad.to_str().unwrap();
    let out = d.join("p.01");
    let outs = out.to_str().unwrap();
    let obs = fixture(&format!("{name}.obs.01"))
        .to_str()
        .unwrap()
        .to_string();
    let before = listing(&d);
    let forms: [Vec<&str>; 3] = [
        vec![
            "predict",
            "--dem",
            dem,
            "--in",
            bad,
            "--in_format",
            "01",
            "--out",
            outs,
        ],
        vec!["--dem", dem, "--dets", bad, "--predictions", outs],
        vec![
            "count_mistakes",
            "--dem",
            dem,
            "--in",
            bad,
            "--in_format",
            "01",
            "--obs_in",
            &obs,
            "--out",
            outs,
        ],
    ];
    for args in &forms {
        let (ok, stdout, stderr) = decode(args);
        assert!(!ok && stdout.is_empty(), "{args:?}");
        assert!(
            stderr.contains("bad.01") && stderr.contains("line 8500"),
            "{stderr}"
        );
        assert_eq!(listing(&d), before, "{args:?} left something");
    }
    // An old output stays as it was.
    std::fs::write(&out, "old\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&out, std::fs::Permissions::from_mode(0o640)).unwrap();
    let (ok, _, _) = decode(&forms[0]);
    assert!(!ok);
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "old\n");
    // To stdout: the file is read through first, so nothing is printed.
    let (ok, stdout, stderr) = decode(&["predict", "--dem", dem, "--in", bad, "--in_format", "01"]);
    assert!(
        !ok && stdout.is_empty() && stderr.contains("line 8500"),
        "{stderr}"
    );
    // ptb64 takes shots in groups of 64: 1000 shots leave 40 over, and no file.
    let good = d.join("good.01");
    std::fs::write(&good, broken_01(name, 1000, 1).replace('x', "0")).unwrap();
    let good = good.to_str().unwrap();
    let ptb = d.join("p.ptb64");
    let (ok, _, stderr) = decode(&[
        "predict",
        "--dem",
        dem,
        "--in",
        good,
        "--out",
        ptb.to_str().unwrap(),
    ]);
    assert!(
        !ok && stderr.contains("1000 shots leave 40 over"),
        "{stderr}"
    );
    assert!(!ptb.exists());
    // A good run replaces the old file, with its permissions, through a symbolic link.
    let link = d.join("link.01");
    std::os::unix::fs::symlink(&out, &link).unwrap();
    let (ok, _, stderr) = decode(&[
        "predict",
        "--dem",
        dem,
        "--in",
        good,
        "--out",
        link.to_str().unwrap(),
    ]);
    assert!(ok, "{stderr}");
    assert!(std::fs::symlink_metadata(&link)
        .unwrap()
        .file_type()
        .is_symlink());
    assert_eq!(
        Shots::read(&out, 1, Some(ShotFormat::Zero1)).unwrap().len(),
        1000
    );
    assert_eq!(
        std::fs::metadata(&out).unwrap().permissions().mode() & 0o777,
        0o640
    );
    // A device is written as it goes.
    let (ok, _, stderr) = decode(&["predict", "--dem", dem, "--in", good, "--out", "/dev/null"]);
    assert!(ok, "{stderr}");
    let mut names = listing(&d);
    names.retain(|n| n.contains("qfwd-tmp"));
    assert!(names.is_empty(), "{names:?}");
}

/// Issue N5: the model `error(0.1) D16777215 L0` (2^24 detectors, inside the documented
/// limit: shots of 2 MiB) decodes, predicts and counts in every form with at most 1 GiB of
/// address space (the predict form used to ask for 8 GiB at once: a batch of 4096 such
/// shots). So does the 21 bytes `error(0.1) D16777215`, without an observable (the
/// union-find's working memory used to be sized by every detector).
#[test]
fn a_21_byte_model_of_2_pow_24_detectors_decodes_in_small_memory() {
    if !Path::new("/bin/sh").exists() {
        eprintln!("SKIP a_21_byte_model_of_2_pow_24_detectors_decodes_in_small_memory: no /bin/sh for ulimit");
        return;
    }
    let d = dir("n5");
    let row = 1usize << 21;
    let mut shots = vec![0u8; 2 * row];
    shots[row - 1] = 0x80; // D16777215 in the first shot
    std::fs::write(d.join("s.b8"), &shots).unwrap();
    std::fs::write(d.join("obs.01"), "1\n0\n").unwrap();
    std::fs::write(d.join("o.dem"), "error(0.1) D16777215 L0\n").unwrap();
    std::fs::write(d.join("n.dem"), "error(0.1) D16777215\n").unwrap();
    let q = qfwd().get_program().to_str().unwrap().to_string();
    let script = format!(
        "ulimit -v 1048576 && cd {} && \
         {q} decode --dem o.dem --dets s.b8 --predictions p1.01 && \
         {q} decode predict --dem o.dem --in s.b8 --out p2.01 && \
         {q} decode predict --dem o.dem --in s.b8 > p3.01 && \
         {q} decode predict --dem n.dem --in s.b8 > p4.01 && \
         {q} decode count_mistakes --dem o.dem --in s.b8 --in_format b8 --obs_in obs.01",
        d.display()
    );
    let out = std::process::Command::new("/bin/sh")
        .arg("-c")
        .arg(&script)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "0 / 2\n", "{stderr}");
    for (p, predicted) in [
        ("p1.01", "1\n0\n"),
        ("p2.01", "1\n0\n"),
        ("p3.01", "1\n0\n"),
        ("p4.01", "\n\n"),
    ] {
        let got = std::fs::read_to_string(d.join(p)).unwrap();
        assert_eq!(got, predicted, "{p}: {stderr}");
    }
}
