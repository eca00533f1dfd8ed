//! Compiles every `device/*.cu` with NVRTC for sm_90 (the H200) and fails on any error or
//! warning. No GPU needed: NVRTC is a compiler library (the PyPI wheel `nvidia-cuda-nvrtc`
//! ships it; `scripts/check-kernels.sh` installs it and runs this test).
//!
//! Where `libnvrtc` cannot be loaded the test prints a skip notice and passes, unless
//! `QFWD_REQUIRE_NVRTC=1`, in which case it fails (CI sets it). With
//! `QFWD_WRITE_CUBIN_DIR=dir` it also writes the CUBINs there (for `QFWD_KERNEL_DIR`).

use qfwd::gpu::nvrtc::{self, KERNEL_SOURCES};

const ARCH: &str = "sm_90";

fn nvrtc_or_skip() -> bool {
    if nvrtc::nvrtc_available() {
        return true;
    }
    if std::env::var("QFWD_REQUIRE_NVRTC").as_deref() == Ok("1") {
        panic!(
            "QFWD_REQUIRE_NVRTC=1 but libnvrtc cannot be loaded: run scripts/check-kernels.sh, \
             or put the nvidia-cuda-nvrtc wheel's lib folder on LD_LIBRARY_PATH"
        );
    }
    eprintln!(
        "SKIP nvrtc_kernels: libnvrtc not found (set QFWD_REQUIRE_NVRTC=1 to make this a \
         failure; scripts/check-kernels.sh installs it)"
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
    if !nvrtc_or_skip() {
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
    if !nvrtc_or_skip() {
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
    if !nvrtc_or_skip() {
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
    if !nvrtc_or_skip() {
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
