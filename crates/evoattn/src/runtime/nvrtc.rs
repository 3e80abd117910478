//! Finding and loading NVRTC, and compiling one translation unit to CUBIN.
//!
//! NVRTC is found and loaded by [`culib`](super::culib), so that cudarc's NVRTC bindings
//! (which panic when their own plain-name search fails) are only called once they resolve to it.

use super::culib::{self, CuLib, CudarcLoader};
use crate::arch::Arch;
use crate::error::{Error, Result};
use crate::kernels::SourceFile;
use cudarc::nvrtc::sys;
use libloading::os::unix::Library;
use std::ffi::{c_char, c_int, CString};
use std::fmt;
use std::path::Path;
use std::sync::OnceLock;

/// Environment variable naming libnvrtc, or a directory holding it.
pub const NVRTC_ENV: &str = "EVOATTN_NVRTC";

/// NVRTC for the finder. 12 is the oldest major that knows every arch in [`Arch::ALL`]
/// (`sm_90a` arrived in CUDA 12.0); the wheel dirs are CUDA 13's, then CUDA 12's.
pub(crate) const NVRTC: CuLib = CuLib {
    name: "NVRTC",
    cudarc_name: "nvrtc",
    file_prefix: "libnvrtc.so",
    env_var: NVRTC_ENV,
    env_value: "the libnvrtc.so file or its directory",
    env_siblings: &[],
    wheel_lib_dirs: &["nvidia/cu13/lib", "nvidia/cuda_nvrtc/lib"],
    probe_symbol: "nvrtcVersion",
    min_major: 12,
    install: "the CUDA 12/13 toolkit or `pip install nvidia-cuda-nvrtc`",
};

/// The loaded NVRTC library, one per process.
pub struct Nvrtc {
    library: String,
    version: (i32, i32),
    /// NVRTC and its builtins, kept open for the life of the process so that cudarc's (and
    /// NVRTC's) plain-name `dlopen` keeps resolving to them.
    _preloaded: Vec<Library>,
}

/// CUBIN and the compiler's log (with `--ptxas-options=-v`, the resource report).
#[derive(Clone, Debug)]
pub struct Compiled {
    pub cubin: Vec<u8>,
    pub log: String,
}

/// A compile that NVRTC rejected: data to report, never a panic.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CompileFailure {
    pub kernel: String,
    pub arch: String,
    pub options: Vec<String>,
    pub log: String,
    pub source_name: String,
}

impl fmt::Display for CompileFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "NVRTC failed to compile {} for {} (source {})", self.kernel, self.arch, self.source_name)?;
        writeln!(f, "options: {}", self.options.join(" "))?;
        write!(f, "log:\n{}", self.log.trim_end())
    }
}

impl std::error::Error for CompileFailure {}

impl Nvrtc {
    /// The process-wide NVRTC, found and loaded on first use.
    pub fn get() -> Result<&'static Nvrtc> {
        static NVRTC: OnceLock<std::result::Result<Nvrtc, String>> = OnceLock::new();
        NVRTC.get_or_init(Nvrtc::load).as_ref().map_err(|reason| Error::NoNvrtc(reason.clone()))
    }

    /// `(major, minor)`, e.g. `(13, 0)`.
    pub fn version(&self) -> (i32, i32) {
        self.version
    }

    /// The path (or loader name) of the library in use.
    pub fn library(&self) -> &str {
        &self.library
    }

    /// Compiles `unit` (which may `#include` any of `headers` by name) to CUBIN.
    pub fn compile_cubin(
        &self,
        unit: &SourceFile,
        headers: &[SourceFile],
        kernel: &str,
        arch: Arch,
        options: &[String],
    ) -> std::result::Result<Compiled, CompileFailure> {
        let fail = |log: String| CompileFailure {
            kernel: kernel.to_string(),
            arch: arch.name().to_string(),
            options: options.to_vec(),
            log,
            source_name: unit.name.to_string(),
        };
        let c = |text: &str, what: &str| CString::new(text).map_err(|_| fail(format!("{what} contains a NUL byte")));
        let src = c(unit.text, unit.name)?;
        let name = c(unit.name, "the source name")?;
        let header_texts = headers.iter().map(|h| c(h.text, h.name)).collect::<std::result::Result<Vec<_>, _>>()?;
        let header_names =
            headers.iter().map(|h| c(h.name, "a header name")).collect::<std::result::Result<Vec<_>, _>>()?;
        let opts = options.iter().map(|o| c(o, "an option")).collect::<std::result::Result<Vec<_>, _>>()?;
        let header_text_ptrs: Vec<*const c_char> = header_texts.iter().map(|s| s.as_ptr()).collect();
        let header_name_ptrs: Vec<*const c_char> = header_names.iter().map(|s| s.as_ptr()).collect();
        let opt_ptrs: Vec<*const c_char> = opts.iter().map(|s| s.as_ptr()).collect();
        let too_many = |_| fail("too many headers or options for NVRTC".to_string());
        let n_headers = c_int::try_from(headers.len()).map_err(too_many)?;
        let n_options = c_int::try_from(options.len()).map_err(too_many)?;

        let program = Program::create(&src, &name, n_headers, &header_text_ptrs, &header_name_ptrs)
            .map_err(|status| fail(format!("nvrtcCreateProgram: {status:?}")))?;
        // Safety: `program` is live; `opt_ptrs` holds `n_options` pointers to NUL-terminated
        // strings owned by `opts`, which outlives the call.
        let status = unsafe { sys::nvrtcCompileProgram(program.0, n_options, opt_ptrs.as_ptr()) };
        let log = program.log();
        if status != sys::nvrtcResult::NVRTC_SUCCESS {
            return Err(fail(match status {
                sys::nvrtcResult::NVRTC_ERROR_COMPILATION => log,
                other => format!("nvrtcCompileProgram: {other:?}\n{log}"),
            }));
        }
        let cubin = program.cubin().map_err(|reason| fail(format!("{reason}\n{log}")))?;
        Ok(Compiled { cubin, log })
    }

    fn load() -> std::result::Result<Nvrtc, String> {
        let cudarc = CudarcLoader { present: sys::is_culib_present, library: sys::culib };
        let (library, lib) = culib::load(&NVRTC, &cudarc, &culib::process_var)?;
        let (mut major, mut minor) = (0, 0);
        // Safety: `culib::load` checked that cudarc's loader succeeds; both pointers are to
        // live stack integers.
        let status = unsafe { sys::nvrtcVersion(&mut major, &mut minor) };
        if status != sys::nvrtcResult::NVRTC_SUCCESS {
            return Err(format!("{library}: nvrtcVersion failed ({status:?})"));
        }
        culib::check_major(&NVRTC, &library, major, minor)?;
        let mut preloaded = vec![lib];
        // NVRTC dlopens its builtins library by plain name when it compiles; beside a copy
        // found by path (or through a symlink) it is outside the loader's search path.
        let builtins = Path::new(&library).parent().map(|d| d.join(format!("libnvrtc-builtins.so.{major}.{minor}")));
        if let Some(lib) = builtins.and_then(|b| culib::open_global(&b).ok()) {
            preloaded.push(lib);
        }
        Ok(Nvrtc { library, version: (major, minor), _preloaded: preloaded })
    }
}

/// An NVRTC program, destroyed on drop.
struct Program(sys::nvrtcProgram);

impl Program {
    fn create(
        src: &CString,
        name: &CString,
        n_headers: c_int,
        header_texts: &[*const c_char],
        header_names: &[*const c_char],
    ) -> std::result::Result<Program, sys::nvrtcResult> {
        let mut program: sys::nvrtcProgram = std::ptr::null_mut();
        // Safety: every pointer is to a NUL-terminated string that outlives the call (NVRTC
        // copies the sources); the two header arrays both hold `n_headers` entries.
        let status = unsafe {
            sys::nvrtcCreateProgram(
                &mut program,
                src.as_ptr(),
                name.as_ptr(),
                n_headers,
                header_texts.as_ptr(),
                header_names.as_ptr(),
            )
        };
        match status {
            sys::nvrtcResult::NVRTC_SUCCESS => Ok(Program(program)),
            other => Err(other),
        }
    }

    /// The compiler's log as text (empty if it cannot be read).
    fn log(&self) -> String {
        let mut size = 0usize;
        // Safety: `self.0` is a live program; `size` is a live stack integer.
        if unsafe { sys::nvrtcGetProgramLogSize(self.0, &mut size) } != sys::nvrtcResult::NVRTC_SUCCESS || size == 0 {
            return String::new();
        }
        let mut buf = vec![0u8; size];
        // Safety: `buf` holds the `size` bytes NVRTC said the log needs, terminator included.
        if unsafe { sys::nvrtcGetProgramLog(self.0, buf.as_mut_ptr().cast()) } != sys::nvrtcResult::NVRTC_SUCCESS {
            return String::new();
        }
        let text = buf.split(|&b| b == 0).next().unwrap_or_default();
        String::from_utf8_lossy(text).into_owned()
    }

    fn cubin(&self) -> std::result::Result<Vec<u8>, String> {
        let mut size = 0usize;
        // Safety: `self.0` is a live, compiled program; `size` is a live stack integer.
        let status = unsafe { sys::nvrtcGetCUBINSize(self.0, &mut size) };
        if status != sys::nvrtcResult::NVRTC_SUCCESS {
            return Err(format!("nvrtcGetCUBINSize: {status:?}"));
        }
        if size == 0 {
            return Err("NVRTC produced no CUBIN (the target must be a real sm_XX arch)".to_string());
        }
        let mut cubin = vec![0u8; size];
        // Safety: `cubin` holds the `size` bytes NVRTC said the CUBIN needs.
        match unsafe { sys::nvrtcGetCUBIN(self.0, cubin.as_mut_ptr().cast()) } {
            sys::nvrtcResult::NVRTC_SUCCESS => Ok(cubin),
            other => Err(format!("nvrtcGetCUBIN: {other:?}")),
        }
    }
}

impl Drop for Program {
    fn drop(&mut self) {
        // Safety: `self.0` came from a successful nvrtcCreateProgram and is destroyed once.
        unsafe {
            sys::nvrtcDestroyProgram(&mut self.0);
        }
    }
}
