//! Compiles every `device/*.cu` with NVRTC for sm_90 (the H200) and fails on any error or
//! warning. No GPU needed: NVRTC is a compiler library (the PyPI wheel `nvidia-cuda-nvrtc`
//! ships it; `scripts/check-kernels.sh` installs it and runs this test).
//!
//! Where `libnvrtc` cannot be loaded each compiling test prints `SKIP <test>: why` where
//! it is seen (straight to stderr: libtest hides a passing test's `eprintln!`) and passes,
//! unless `QFWD_REQUIRE_NVRTC=1`, in which case it fails (CI sets it). With
//! `QFWD_WRITE_CUBIN_DIR=dir` it also writes the CUBINs there (for `QFWD_KERNEL_DIR`).

use std::io::Write;

use qfwd::gpu::nvrtc::{self, KERNEL_SOURCES};

const ARCH: &str = "sm_90";

/// Set (to anything) in a child run of this binary: NVRTC counts as missing, so the skip
/// and the failure paths are tested on hosts that have it too.
const PRETEND_MISSING: &str = "QFWD_NVRTC_TEST_PRETEND_MISSING";

/// Whether `test` can compile: true with NVRTC; without it, a visible skip notice and
/// false, or a failure under `QFWD_REQUIRE_NVRTC=1`.
fn nvrtc_or_skip(test: &str) -> bool {
    if std::env::var_os(PRETEND_MISSING).is_none() && nvrtc::nvrtc_available() {
        return true;
    }
    if std::env::var("QFWD_REQUIRE_NVRTC").as_deref() == Ok("1") {
        panic!(
            "QFWD_REQUIRE_NVRTC=1 but libnvrtc cannot be loaded: run scripts/check-kernels.sh, \
             or put the nvidia-cuda-nvrtc wheel's lib folder on LD_LIBRARY_PATH"
        );
    }
    // Not `eprintln!`: libtest captures it and shows nothing for a passing test, so the
    // run would read `ok` for a test that compiled nothing.
    let _ = writeln!(
        std::io::stderr().lock(),
        "SKIP {test}: libnvrtc not found, nothing compiled (scripts/check-kernels.sh \
         installs it; QFWD_REQUIRE_NVRTC=1 makes this a failure)"
    );
    false
}

/// Every `.cu` file in `device/`, read from disk: files added later are covered without
/// touching this test.
fn device_sources() -> Vec<nvrtc::KernelSource> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("device");
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".cu"))
        .collect();
    names.sort();
    names
        .into_iter()
        .map(|name| {
            let source = std::fs::read_to_string(dir.join(&name)).unwrap();
            // Leaked: a test process compiles each file once.
            nvrtc::KernelSource {
                file: Box::leak(name.into_boxed_str()),
                source: Box::leak(source.into_boxed_str()),
            }
        })
        .collect()
}

/// The sources the binary embeds are the ones on disk (no stale copy).
#[test]
fn embedded_sources_match_the_files() {
    let on_disk = device_sources();
    for embedded in KERNEL_SOURCES {
        let file = on_disk
            .iter()
            .find(|s| s.file == embedded.file)
            .unwrap_or_else(|| panic!("{} is embedded but not in device/", embedded.file));
        assert_eq!(
            file.source, embedded.source,
            "{} changed since the build embedded it",
            embedded.file
        );
    }
}

#[test]
fn every_kernel_compiles_for_sm_90_without_warnings() {
    if !nvrtc_or_skip("every_kernel_compiles_for_sm_90_without_warnings") {
        return;
    }
    let (major, minor) = nvrtc::nvrtc_version().unwrap();
    eprintln!("NVRTC {major}.{minor}");
    let sources = device_sources();
    assert!(!sources.is_empty(), "no device/*.cu found");
    for source in &sources {
        let compiled = nvrtc::compile(source, ARCH).unwrap_or_else(|e| panic!("{e}"));
        assert!(
            !compiled.has_warnings(),
            "{} compiled for {ARCH} with warnings:\n{}",
            source.file,
            compiled.log
        );
        assert!(
            compiled.cubin.as_ref().is_some_and(|c| !c.is_empty()),
            "{}: no CUBIN for {ARCH}",
            source.file
        );
        if let Some(dir) = std::env::var_os("QFWD_WRITE_CUBIN_DIR") {
            let path = std::path::Path::new(&dir).join(nvrtc::cubin_file_name(source, ARCH));
            std::fs::write(&path, compiled.cubin.as_ref().unwrap()).unwrap();
            eprintln!("wrote {}", path.display());
        }
        eprintln!(
            "{}: {} bytes of PTX, {} bytes of CUBIN, log {:?}",
            source.file,
            compiled.ptx.len(),
            compiled.cubin.as_ref().map_or(0, |c| c.len()),
            compiled.log
        );
    }
}

/// The uf stage trace (`QFWD_UF_TRACE=1`) is a build of the same sources: it must compile
/// cleanly too, and leave the untraced build without a single `printf` (`vprintf` call).
#[test]
fn uf_stage_trace_compiles_and_stays_out_of_the_normal_build() {
    if !nvrtc_or_skip("uf_stage_trace_compiles_and_stays_out_of_the_normal_build") {
        return;
    }
    for define in ["QFWD_DEC_TRACE", "QFWD_DEC_TRACE_DISPATCH"] {
        let traced =
            nvrtc::compile_with(&nvrtc::FORWARD, ARCH, &[define]).unwrap_or_else(|e| panic!("{e}"));
        assert!(
            !traced.has_warnings(),
            "forward.cu with {define} compiled with warnings:\n{}",
            traced.log
        );
        assert!(
            traced.ptx.contains("vprintf"),
            "the {define} build prints nothing"
        );
    }
    let plain = nvrtc::compile_with(&nvrtc::FORWARD, ARCH, &[]).unwrap();
    assert!(
        !plain.ptx.contains("vprintf"),
        "the normal build calls printf"
    );
}

/// The mailbox rules (docs/architecture.md): no system-scope fence in the hot path of a
/// kernel whose warps poll host memory, and the polling/publishing idioms they name are the
/// ones emitted.
#[test]
fn forward_kernels_keep_system_fences_out_of_the_hot_path() {
    if !nvrtc_or_skip("forward_kernels_keep_system_fences_out_of_the_hot_path") {
        return;
    }
    let ptx = nvrtc::compile(&nvrtc::FORWARD, ARCH).unwrap().ptx;
    for entry in ["qfwd_persistent", "qfwd_serve_once"] {
        assert!(
            ptx.contains(&format!(".entry {entry}")),
            "{entry} missing from the PTX"
        );
    }
    for forbidden in [
        "fence.sc.sys",
        "fence.acq_rel.sys",
        "membar.sys",
        ".release.sys",
    ] {
        assert!(!ptx.contains(forbidden), "PTX contains {forbidden}");
    }
    assert!(ptx.contains("ld.volatile.global.v4.u32"));
    assert!(ptx.contains("st.volatile.global.v4.u32"));
    // The claim CAS (generic or global addressing, as the compiler infers).
    assert!(ptx.contains("atom.global.cas.b64") || ptx.contains("atom.cas.b64"));
}

#[test]
fn compile_errors_carry_the_nvrtc_log() {
    if !nvrtc_or_skip("compile_errors_carry_the_nvrtc_log") {
        return;
    }
    let broken = nvrtc::KernelSource {
        file: "broken.cu",
        source: "extern \"C\" __global__ void k() { undeclared_thing(); }",
    };
    let err = nvrtc::compile(&broken, ARCH).unwrap_err().to_string();
    assert!(
        err.contains("broken.cu") && err.contains("undeclared_thing"),
        "{err}"
    );
}

/// Runs one test of this binary in a child process, NVRTC hidden, output captured as
/// `cargo test` captures it; returns whether it passed and what it printed.
fn run_without_nvrtc(test: &str, require: bool) -> (bool, String) {
    let mut child = std::process::Command::new(std::env::current_exe().unwrap());
    child
        .args(["--exact", test, "--test-threads=1"])
        .env(PRETEND_MISSING, "1")
        .env_remove("QFWD_WRITE_CUBIN_DIR");
    if require {
        child.env("QFWD_REQUIRE_NVRTC", "1");
    } else {
        child.env_remove("QFWD_REQUIRE_NVRTC");
    }
    let out = child.output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

/// Without NVRTC a compiling test says SKIP and why, where a plain `cargo test` shows it,
/// instead of a bare `ok`; under QFWD_REQUIRE_NVRTC=1 it fails and says what to install.
#[test]
fn a_missing_nvrtc_is_a_visible_skip_or_a_failure() {
    let test = "every_kernel_compiles_for_sm_90_without_warnings";
    let (passed, text) = run_without_nvrtc(test, false);
    assert!(passed, "{text}");
    assert!(
        text.contains(&format!(
            "SKIP {test}: libnvrtc not found, nothing compiled"
        )),
        "the skip is not shown:\n{text}"
    );
    assert!(text.contains("1 passed"), "{text}");
    let (passed, text) = run_without_nvrtc(test, true);
    assert!(!passed, "{text}");
    assert!(
        text.contains("QFWD_REQUIRE_NVRTC=1 but libnvrtc cannot be loaded"),
        "{text}"
    );
}
