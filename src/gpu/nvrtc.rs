//! NVRTC: the `device/*.cu` sources, embedded in the binary, compiled at run time for the
//! device's own architecture (no nvcc needed to build).
//!
//! `libnvrtc` is found at run time (`libnvrtc.so`, `libnvrtc.so.13`, ... on the library
//! path; the PyPI wheel `nvidia-cuda-nvrtc` ships `libnvrtc.so.13`). Without it compiling
//! is a clear [`Error::NvrtcUnavailable`], never a panic. Compiling for a real architecture
//! (`sm_XX`) also yields a CUBIN, which loads on a driver older than this NVRTC (PTX from a
//! newer NVRTC would not JIT there). Hosts without NVRTC can load prebuilt CUBINs from
//! the folder named by `QFWD_KERNEL_DIR` ([`KERNEL_DIR_ENV`]).

use std::ffi::{c_char, CString};
use std::sync::{Arc, Mutex, OnceLock};

use cudarc::nvrtc::{result, sys};

use crate::{Error, Result};

/// A device source file, embedded at build time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KernelSource {
    /// File name under `device/`.
    pub file: &'static str,
    pub source: &'static str,
}

/// The persistent kernel, the one-request kernel and their handlers.
pub const FORWARD: KernelSource = KernelSource {
    file: "forward.cu",
    source: include_str!("../../device/forward.cu"),
};

/// The persistent kernel with GPU-initiated doorbells (`regular` / `blueflame`,
/// docs/architecture.md): `device/doorbell.cu`'s posting functions and `device/forward.cu`
/// in one program, with `QFWD_DEVICE_DOORBELL` defined. Not a file of its own: [`FORWARD`]
/// stays free of system fences (`tests/nvrtc_kernels.rs` checks it); this one has one per
/// post.
pub const FORWARD_DOORBELL: KernelSource = KernelSource {
    file: "forward-doorbell.cu",
    source: concat!(
        "#define QFWD_DEVICE_DOORBELL 1\n",
        include_str!("../../device/doorbell.cu"),
        "\n",
        include_str!("../../device/forward.cu")
    ),
};

/// The `gpu-direct` kernel: the GPU polls its NIC queues and rings the NIC itself.
pub const DIRECT: KernelSource = KernelSource {
    file: "direct.cu",
    source: include_str!("../../device/direct.cu"),
};

/// The QEC decoders (`lut`, `uf`), `#include`d by `device/forward.cu` (see [`HEADERS`]).
pub const DECODE: KernelSource = KernelSource {
    file: "decode.cu",
    source: include_str!("../../device/decode.cu"),
};

/// The sliding-window stream decoder (`docs/streaming.md`): its group functions, which a
/// persistent kernel may `#include "window.cu"` (see [`HEADERS`]), and the batch kernel.
pub const WINDOW: KernelSource = KernelSource {
    file: "window.cu",
    source: include_str!("../../device/window.cu"),
};

/// The persistent stream kernel: `window.cu`'s group functions serving submissions from
/// mapped host memory (`src/gpu/stream_server.rs`).
pub const STREAM_SERVE: KernelSource = KernelSource {
    file: "stream.cu",
    source: include_str!("../../device/stream.cu"),
};

/// A header of `device/` by its path there, embedded.
macro_rules! device_header {
    ($file:literal) => {
        KernelSource {
            file: $file,
            source: include_str!(concat!("../../device/", $file)),
        }
    };
}

/// The parts of `device/decode.cu`, in the order it includes them.
pub const DECODE_PARTS: &[KernelSource] = &[
    device_header!("decode/common.cuh"),
    device_header!("decode/lut.cuh"),
    device_header!("decode/uf_fast.cuh"),
    device_header!("decode/uf_split.cuh"),
    device_header!("decode/uf_lanes.cuh"),
    device_header!("decode/uf_settle.cuh"),
    device_header!("decode/uf.cuh"),
];

/// The parts of `device/window.cu`.
pub const WINDOW_PARTS: &[KernelSource] = &[device_header!("window/match.cuh")];

/// Device files another one may `#include "file"`: every compilation gets them as NVRTC
/// named headers (NVRTC reads no files), so `forward.cu` and `decode.cu` (with its parts,
/// [`DECODE_PARTS`]) are one program.
pub const HEADERS: &[KernelSource] = &[
    DECODE,
    WINDOW,
    DECODE_PARTS[0],
    DECODE_PARTS[1],
    DECODE_PARTS[2],
    DECODE_PARTS[3],
    DECODE_PARTS[4],
    DECODE_PARTS[5],
    DECODE_PARTS[6],
    WINDOW_PARTS[0],
];

/// The `device/*.cu` files `src/gpu` loads (CI compiles every `device/*.cu` anyway; the
/// combined [`FORWARD_DOORBELL`] is compiled by `tests/gpu_doorbells.rs`).
pub const KERNEL_SOURCES: &[KernelSource] = &[FORWARD, DECODE, DIRECT, WINDOW, STREAM_SERVE];

/// The header generated from `src/abi.rs` ([`crate::abi::header`]), made once per process:
/// every compilation gets it as the named header `qfwd_abi.h`, so a kernel sees exactly the
/// host's constants and struct layouts.
fn abi_header() -> &'static str {
    static HEADER: OnceLock<String> = OnceLock::new();
    HEADER.get_or_init(crate::abi::header)
}

/// Options every compilation uses, besides the architecture.
const COMPILE_OPTIONS: &[&str] = &["--std=c++17", "--fmad=true", "--extra-device-vectorization"];

/// What NVRTC produced.
#[derive(Debug, Clone)]
pub struct Compiled {
    pub file: &'static str,
    pub arch: String,
    /// The PTX text.
    pub ptx: String,
    /// Machine code, when `arch` names a real architecture (`sm_XX`).
    pub cubin: Option<Vec<u8>>,
    /// NVRTC's log: empty for a clean compile; warnings otherwise.
    pub log: String,
}

impl Compiled {
    /// The image to hand to `cuModuleLoadData`: the CUBIN, or NUL-terminated PTX.
    pub fn module_image(&self) -> Vec<u8> {
        match &self.cubin {
            Some(cubin) => cubin.clone(),
            None => {
                let mut ptx = self.ptx.clone().into_bytes();
                ptx.push(0);
                ptx
            }
        }
    }

    /// True when the log mentions a warning (CI fails on those).
    pub fn has_warnings(&self) -> bool {
        self.log.to_ascii_lowercase().contains("warning")
    }
}

/// True when `libnvrtc` can be loaded.
pub fn nvrtc_available() -> bool {
    // SAFETY: only tries to dlopen the candidate library names, and closes them.
    unsafe { sys::is_culib_present() }
}

fn unavailable() -> Error {
    Error::NvrtcUnavailable {
        detail: "libnvrtc.so not found on the library path (install the PyPI wheel \
                 nvidia-cuda-nvrtc and put its lib folder on LD_LIBRARY_PATH, or a CUDA toolkit)"
            .to_string(),
    }
}

/// NVRTC's version, `(major, minor)`.
pub fn nvrtc_version() -> Result<(i32, i32)> {
    if !nvrtc_available() {
        return Err(unavailable());
    }
    let (mut major, mut minor) = (0, 0);
    // SAFETY: two valid out-pointers.
    unsafe { sys::nvrtcVersion(&mut major, &mut minor) }
        .result()
        .map_err(|e| Error::NvrtcUnavailable {
            detail: format!("nvrtcVersion failed: {e}"),
        })?;
    Ok((major, minor))
}

/// An NVRTC program, destroyed on drop. Keeps its source, name and headers alive as NVRTC
/// requires.
struct Program {
    prog: sys::nvrtcProgram,
    _source: CString,
    _name: CString,
    _headers: Vec<(CString, CString)>,
}

impl Drop for Program {
    fn drop(&mut self) {
        // SAFETY: created by create_program, destroyed once. Nothing to do on failure.
        let _ = unsafe { result::destroy_program(self.prog) };
    }
}

fn c_chars_to_string(chars: &[c_char]) -> String {
    let bytes: Vec<u8> = chars
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8)
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// Environment variable that builds the kernels with the uf decoder's stage trace
/// (`QFWD_UF_TRACE=1`): each decode of the persistent kernel's shared-state copy prints the
/// clock cycles at its stage boundaries (device `printf`, flushed when the kernel stops).
/// A measuring tool for kernel work, not for serving: see device/decode/common.cuh, "Stage trace".
/// `QFWD_UF_TRACE=dispatch` instead times each request in the persistent kernel from its
/// tag seen to its response stored, and its handler call within that ("QR" lines,
/// device/forward.cu), without the stage stamps; parity then takes the general path too.
pub const UF_TRACE_ENV: &str = "QFWD_UF_TRACE";

/// The preprocessor definitions this process compiles with (`QFWD_DEC_TRACE`, or
/// `QFWD_DEC_TRACE_DISPATCH` for `dispatch`, under [`UF_TRACE_ENV`]).
pub fn defines_from_env() -> Vec<&'static str> {
    defines_for(std::env::var(UF_TRACE_ENV).ok().as_deref())
}

fn defines_for(value: Option<&str>) -> Vec<&'static str> {
    match value {
        Some("dispatch") => vec!["QFWD_DEC_TRACE_DISPATCH"],
        Some(v) if !v.is_empty() && v != "0" => vec!["QFWD_DEC_TRACE"],
        _ => Vec::new(),
    }
}

/// Compiles `source` for `arch` (`sm_90`, `compute_90`, ...), with the definitions of
/// [`defines_from_env`]. Errors carry NVRTC's log.
pub fn compile(source: &KernelSource, arch: &str) -> Result<Compiled> {
    compile_with(source, arch, &defines_from_env())
}

/// Compiles `source` for `arch` with the preprocessor names in `defines` defined.
pub fn compile_with(source: &KernelSource, arch: &str, defines: &[&str]) -> Result<Compiled> {
    if !nvrtc_available() {
        return Err(unavailable());
    }
    let failed = |detail: String, log: String| Error::NvrtcCompile {
        file: source.file,
        arch: arch.to_string(),
        detail,
        log,
    };
    let src = CString::new(source.source)
        .map_err(|_| failed("the source contains a NUL byte".into(), String::new()))?;
    let name = CString::new(source.file).expect("file names have no NUL");
    let abi = KernelSource {
        file: crate::abi::HEADER_NAME,
        source: abi_header(),
    };
    let headers: Vec<(CString, CString)> = HEADERS
        .iter()
        .chain(std::iter::once(&abi))
        .map(|h| {
            let text = CString::new(h.source).expect("device sources have no NUL");
            (text, CString::new(h.file).expect("file names have no NUL"))
        })
        .collect();
    let texts: Vec<*const c_char> = headers.iter().map(|(t, _)| t.as_ptr()).collect();
    let names: Vec<*const c_char> = headers.iter().map(|(_, n)| n.as_ptr()).collect();
    let mut prog: sys::nvrtcProgram = std::ptr::null_mut();
    // SAFETY: valid out-pointer; `src`, `name` and the header strings are NUL-terminated and
    // outlive the program (moved into `Program` below); the two arrays hold `len` pointers.
    unsafe {
        sys::nvrtcCreateProgram(
            &mut prog,
            src.as_ptr(),
            name.as_ptr(),
            headers.len() as i32,
            texts.as_ptr(),
            names.as_ptr(),
        )
    }
    .result()
    .map_err(|e| failed(format!("nvrtcCreateProgram: {e}"), String::new()))?;
    let program = Program {
        prog,
        _source: src,
        _name: name,
        _headers: headers,
    };
    let mut options: Vec<String> = vec![format!("--gpu-architecture={arch}")];
    options.extend(COMPILE_OPTIONS.iter().map(|o| o.to_string()));
    options.extend(defines.iter().map(|d| format!("-D{d}")));
    // SAFETY: `program.prog` is a live program; options are valid strings.
    let compiled = unsafe { result::compile_program(program.prog, &options) };
    // SAFETY: as above.
    let log = unsafe { result::get_program_log(program.prog) }
        .map(|l| c_chars_to_string(&l))
        .unwrap_or_default();
    if let Err(e) = compiled {
        return Err(failed(format!("{e} (options {options:?})"), log));
    }
    // SAFETY: the program compiled.
    let ptx = unsafe { result::get_ptx(program.prog) }
        .map(|p| c_chars_to_string(&p))
        .map_err(|e| failed(format!("nvrtcGetPTX: {e}"), log.clone()))?;
    let cubin = if arch.starts_with("sm_") {
        Some(cubin_of(&program).map_err(|e| failed(format!("nvrtcGetCUBIN: {e}"), log.clone()))?)
    } else {
        None
    };
    Ok(Compiled {
        file: source.file,
        arch: arch.to_string(),
        ptx,
        cubin,
        log: log.trim().to_string(),
    })
}

fn cubin_of(program: &Program) -> std::result::Result<Vec<u8>, result::NvrtcError> {
    let mut size = 0usize;
    // SAFETY: compiled program, valid out-pointer.
    unsafe { sys::nvrtcGetCUBINSize(program.prog, &mut size) }.result()?;
    let mut cubin = vec![0u8; size];
    // SAFETY: the buffer holds the `size` bytes NVRTC reported.
    unsafe { sys::nvrtcGetCUBIN(program.prog, cubin.as_mut_ptr() as *mut c_char) }.result()?;
    Ok(cubin)
}

/// Environment variable naming a folder of prebuilt CUBINs (`forward.sm_90.cubin`, ...)
/// to load instead of compiling: for hosts without libnvrtc. The files must come from the
/// same `device/*.cu` (`tests/nvrtc_kernels.rs` writes them when `QFWD_WRITE_CUBIN_DIR` is
/// set).
pub const KERNEL_DIR_ENV: &str = "QFWD_KERNEL_DIR";

/// The prebuilt CUBIN file name of `source` for `arch`.
pub fn cubin_file_name(source: &KernelSource, arch: &str) -> String {
    let stem = source.file.strip_suffix(".cu").unwrap_or(source.file);
    format!("{stem}.{arch}.cubin")
}

fn prebuilt_image(source: &KernelSource, arch: &str) -> Result<Option<Vec<u8>>> {
    let Some(dir) = std::env::var_os(KERNEL_DIR_ENV) else {
        return Ok(None);
    };
    let path = std::path::Path::new(&dir).join(cubin_file_name(source, arch));
    match std::fs::read(&path) {
        Ok(image) => Ok(Some(image)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(Error::Io {
            what: format!("cannot read prebuilt kernel {}", path.display()),
            source,
        }),
    }
}

/// The module image of `source` for `arch`: a prebuilt CUBIN from `QFWD_KERNEL_DIR` if
/// there is one, else compiled by NVRTC, once per process (NVRTC takes a fraction of a
/// second; backends are built more than once in tests and sweeps).
pub(crate) fn module_image(source: &KernelSource, arch: &str) -> Result<Arc<Vec<u8>>> {
    type Cache = Mutex<Vec<(&'static str, String, Arc<Vec<u8>>)>>;
    static CACHE: OnceLock<Cache> = OnceLock::new();
    let cache = CACHE.get_or_init(|| Mutex::new(Vec::new()));
    let mut cache = cache.lock().unwrap_or_else(|p| p.into_inner());
    if let Some((_, _, image)) = cache
        .iter()
        .find(|(f, a, _)| *f == source.file && a == arch)
    {
        return Ok(Arc::clone(image));
    }
    // A prebuilt CUBIN has no trace in it: a traced run compiles.
    let prebuilt = if defines_from_env().is_empty() {
        prebuilt_image(source, arch)?
    } else {
        None
    };
    let image = match prebuilt {
        Some(image) => Arc::new(image),
        None => Arc::new(compile(source, arch)?.module_image()),
    };
    cache.push((source.file, arch.to_string(), Arc::clone(&image)));
    Ok(image)
}

/// `CStr` of a kernel name for `cuModuleGetFunction`.
pub(crate) fn kernel_name(name: &'static str) -> CString {
    CString::new(name).expect("kernel names have no NUL")
}

#[cfg(test)]
mod trace_env_tests {
    use super::defines_for;

    #[test]
    fn trace_values_pick_their_definitions() {
        assert!(defines_for(None).is_empty());
        assert!(defines_for(Some("")).is_empty());
        assert!(defines_for(Some("0")).is_empty());
        assert_eq!(defines_for(Some("1")), ["QFWD_DEC_TRACE"]);
        assert_eq!(defines_for(Some("dispatch")), ["QFWD_DEC_TRACE_DISPATCH"]);
    }
}
