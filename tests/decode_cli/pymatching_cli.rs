//! `qfwd decode predict` / `count_mistakes` against `pymatching predict` /
//! `count_mistakes` themselves, byte for byte, on the same files: every input format Stim
//! writes (converted by Stim from a fixture), every output format PyMatching writes, the
//! observables in their own file or appended, stdin and stdout.
//!
//! Needs a Python with stim and pymatching: `$QFWD_PYTHON`, else `target/python-venv`
//! (what CI makes), else `python3`; skips with a message where none has them
//! (`python3 -m venv v && v/bin/pip install stim pymatching`, then
//! `QFWD_PYTHON=v/bin/python cargo test -p qfwd --test decode_cli pymatching`).
//!
//! The decoder is `qfwd decode`'s default, `matching` (exact minimum-weight matching), so the
//! command lines are PyMatching's word for word, on the d = 7 surface-code fixture (memory
//! X, p = 0.005, 336 detectors): it agrees with PyMatching on all 10 000 of its shots, so
//! every byte can be compared. (Where two corrections weigh the same, the two programs may
//! break the tie differently: 1 shot of 20 000 on each d = 5, p = 0.005 fixture. `uf`
//! differs from PyMatching on 17 of the 50 000 shots of the d = 3 fixture: a decoder's
//! accuracy is `results/cpu-decoders-vs-pymatching.csv`'s business, not the command line's.)

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use qfwd::decode::DecoderKind;
use qfwd::decode_cli::DEFAULT_DECODER;

use super::{fixture, run_with_stdin, tmp};

const NAME: &str = "surface_d7_r7_x_p005";
const SHOTS: usize = 2048;
const FORMATS: [&str; 6] = ["01", "b8", "r8", "ptb64", "hits", "dets"];

/// A Python that imports stim and pymatching, or why there is none.
fn python() -> Result<PathBuf, String> {
    let venv = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/python-venv/bin/python");
    let candidates: Vec<PathBuf> = std::env::var_os("QFWD_PYTHON")
        .map(PathBuf::from)
        .into_iter()
        .chain([venv, PathBuf::from("python3")])
        .collect();
    for py in &candidates {
        let ok = Command::new(py)
            .args(["-c", "import stim, pymatching"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if ok {
            return Ok(py.clone());
        }
    }
    Err(format!(
        "none of {candidates:?} imports stim and pymatching"
    ))
}

/// Runs Python `code` with `args`; panics with its stderr on failure.
fn run_python(py: &Path, code: &str, args: &[String]) {
    let out = Command::new(py)
        .arg("-c")
        .arg(code)
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "python failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Stim writes the fixture's first SHOTS shots in every format: `dets.F`, `obs.F`,
/// `both.F` (observables appended).
const CONVERT: &str = r#"
import sys, numpy as np, stim
dem, b8, obs01, out, shots = sys.argv[1:5] + [int(sys.argv[5])]
n = stim.DetectorErrorModel.from_file(dem).num_detectors
dets = stim.read_shot_data_file(path=b8, format="b8", num_detectors=n)[:shots]
obs = stim.read_shot_data_file(path=obs01, format="01", num_observables=1)[:shots]
both = np.concatenate([dets, obs], axis=1)
for f in ["01", "b8", "r8", "ptb64", "hits", "dets"]:
    stim.write_shot_data_file(data=dets, path=f"{out}/dets.{f}", format=f, num_detectors=n)
    stim.write_shot_data_file(data=obs, path=f"{out}/obs.{f}", format=f, num_observables=1)
    stim.write_shot_data_file(data=both, path=f"{out}/both.{f}", format=f, num_detectors=n, num_observables=1)
"#;

/// Runs `pymatching` once per argument list (arguments joined by `\x1f`, lists by `\x1e`).
const PYMATCHING: &str = r#"
import sys, pymatching
for argv in sys.argv[1].split("\x1e"):
    rc = pymatching.cli(command_line_args=argv.split("\x1f"))
    if rc != 0:
        sys.exit(f"pymatching {argv!r} returned {rc}")
"#;

/// Stim rewrites `src` (one observable a shot, `01`) as `dst` in `format`.
const REWRITE: &str = r#"
import sys, stim
src, dst, f = sys.argv[1:4]
data = stim.read_shot_data_file(path=src, format="01", num_observables=1)
stim.write_shot_data_file(data=data, path=dst, format=f, num_observables=1)
"#;

/// The same command for both programs: `pymatching ARGS` writes `pm/OUT`, `qfwd decode
/// ARGS` writes `q/OUT` (or prints it).
struct Case {
    args: Vec<String>,
    out: String,
}

#[test]
fn pymatching_s_command_lines_give_the_same_bytes() {
    let py = match python() {
        Ok(py) => py,
        Err(why) => {
            eprintln!(
                "SKIP pymatching_s_command_lines_give_the_same_bytes: {why} (set QFWD_PYTHON to a \
                 Python with `pip install stim pymatching`)"
            );
            return;
        }
    };
    assert_eq!(DEFAULT_DECODER, DecoderKind::Matching);
    let dir = tmp("pymatching-cli");
    let _ = std::fs::remove_dir_all(&dir);
    for d in ["in", "pm", "q"] {
        std::fs::create_dir_all(dir.join(d)).unwrap();
    }
    let at = |p: &str| dir.join(p).to_str().unwrap().to_string();
    run_python(
        &py,
        CONVERT,
        &[
            fixture(&format!("{NAME}.dem")).to_str().unwrap().into(),
            fixture(&format!("{NAME}.b8")).to_str().unwrap().into(),
            fixture(&format!("{NAME}.obs.01")).to_str().unwrap().into(),
            at("in"),
            SHOTS.to_string(),
        ],
    );
    let dem = fixture(&format!("{NAME}.dem"))
        .to_str()
        .unwrap()
        .to_string();
    let mut cases = Vec::new();
    for fin in FORMATS {
        // ptb64 predictions: PyMatching refuses the format (checked below through Stim).
        for fout in FORMATS.iter().filter(|&&f| f != "ptb64") {
            let out = format!("predict-{fin}.{fout}");
            let args = [
                "predict",
                "--dem",
                &dem,
                "--in",
                &at(&format!("in/dets.{fin}")),
                "--in_format",
                fin,
                "--out_format",
                fout,
            ];
            cases.push(Case {
                args: args.map(String::from).to_vec(),
                out,
            });
        }
        let out = format!("predict-both-{fin}.01");
        let args = [
            "predict",
            "--dem",
            &dem,
            "--in",
            &at(&format!("in/both.{fin}")),
            "--in_format",
            fin,
            "--in_includes_appended_observables",
        ];
        cases.push(Case {
            args: args.map(String::from).to_vec(),
            out,
        });
        for fobs in FORMATS {
            let out = format!("count-{fin}-{fobs}.txt");
            let args = [
                "count_mistakes",
                "--dem",
                &dem,
                "--in",
                &at(&format!("in/dets.{fin}")),
                "--in_format",
                fin,
                "--obs_in",
                &at(&format!("in/obs.{fobs}")),
                "--obs_in_format",
                fobs,
            ];
            cases.push(Case {
                args: args.map(String::from).to_vec(),
                out,
            });
        }
        let out = format!("count-both-{fin}.txt");
        let args = [
            "count_mistakes",
            "--dem",
            &dem,
            "--in",
            &at(&format!("in/both.{fin}")),
            "--in_format",
            fin,
            "--in_includes_appended_observables",
        ];
        cases.push(Case {
            args: args.map(String::from).to_vec(),
            out,
        });
    }
    let runs: Vec<String> = cases
        .iter()
        .map(|c| {
            let mut a = c.args.clone();
            a.extend(["--out".to_string(), at(&format!("pm/{}", c.out))]);
            a.join("\x1f")
        })
        .collect();
    run_python(&py, PYMATCHING, &[runs.join("\x1e")]);
    for c in &cases {
        let args: Vec<&str> = c.args.iter().map(String::as_str).collect();
        let (ok, stdout, stderr) = run_with_stdin(&args, b"");
        assert!(ok, "qfwd decode {args:?}: {stderr}");
        let want = std::fs::read(dir.join("pm").join(&c.out)).unwrap();
        assert!(!want.is_empty() || c.out.ends_with(".b8"), "{}", c.out);
        assert!(stdout == want, "{}: qfwd and pymatching differ", c.out);
    }
    let mistakes = std::fs::read_to_string(dir.join("pm/count-b8-01.txt")).unwrap();
    assert!(
        mistakes.ends_with(&format!(" / {SHOTS}\n")) && !mistakes.starts_with("0 "),
        "{mistakes}"
    );

    // stdin and stdout where --in and --out are left out: b8 in, 01 out (predict); 01 in
    // (count_mistakes).
    let b8 = std::fs::read(dir.join("in/dets.b8")).unwrap();
    let (ok, stdout, stderr) = run_with_stdin(&["predict", "--dem", &dem], &b8);
    assert!(ok, "{stderr}");
    assert!(
        stdout == std::fs::read(dir.join("pm/predict-b8.01")).unwrap(),
        "predict from stdin"
    );
    let text = std::fs::read(dir.join("in/dets.01")).unwrap();
    let obs = at("in/obs.01");
    let (ok, stdout, stderr) =
        run_with_stdin(&["count_mistakes", "--dem", &dem, "--obs_in", &obs], &text);
    assert!(ok, "{stderr}");
    assert_eq!(
        String::from_utf8(stdout).unwrap(),
        mistakes,
        "count_mistakes from stdin"
    );

    // ptb64 predictions: what Stim writes for PyMatching's predictions.
    run_python(
        &py,
        REWRITE,
        &[
            at("pm/predict-b8.01"),
            at("pm/predict-b8.ptb64"),
            "ptb64".into(),
        ],
    );
    let (ok, stdout, stderr) = run_with_stdin(
        &[
            "predict",
            "--dem",
            &dem,
            "--in",
            &at("in/dets.b8"),
            "--out_format",
            "ptb64",
        ],
        b"",
    );
    assert!(ok, "{stderr}");
    assert!(
        stdout == std::fs::read(dir.join("pm/predict-b8.ptb64")).unwrap(),
        "ptb64 predictions"
    );
}
