//! Finding and loading NVRTC, and compiling one translation unit to CUBIN.
//!
//! cudarc's NVRTC bindings load the library lazily by a fixed list of plain names and panic
//! when none loads. So NVRTC is located here first (also in directories cudarc does not
//! search), opened with `RTLD_GLOBAL` and kept open: glibc then answers cudarc's later
//! `dlopen("libnvrtc.so.13")` with the already-loaded object, matched by its SONAME. cudarc's
//! functions are only called once `is_culib_present()` says its own loader will succeed, and
//! after checking that it resolves to the same library.

use crate::arch::Arch;
use crate::error::{Error, Result};
use crate::kernels::SourceFile;
use cudarc::nvrtc::sys;
use libloading::os::unix::{Library, RTLD_GLOBAL, RTLD_NOW};
use std::ffi::{c_char, c_int, c_void, CString};
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// Environment variable naming libnvrtc, or a directory holding it.
pub const NVRTC_ENV: &str = "EVOATTN_NVRTC";
/// File-name prefix of the NVRTC library (`libnvrtc.so`, `libnvrtc.so.13`, ...).
const LIB_PREFIX: &str = "libnvrtc.so";
/// Oldest NVRTC that knows every arch in [`Arch::ALL`] (`sm_90a` arrived in CUDA 12.0).
const MIN_MAJOR: i32 = 12;
/// A symbol every NVRTC exports; its address tells whether two handles are one library.
const PROBE_SYMBOL: &[u8] = b"nvrtcVersion";
/// Where `pip install --target .nvrtc nvidia-cuda-nvrtc` (scripts/test) puts the library,
/// relative to a repository root.
const REPO_LOCAL_DIR: &str = ".nvrtc";
/// Library directories inside a Python site-packages dir: CUDA 13 wheels, then CUDA 12 ones.
const WHEEL_LIB_DIRS: [&str; 2] = ["nvidia/cu13/lib", "nvidia/cuda_nvrtc/lib"];
/// Site-packages directory names under `<prefix>/lib/python3.X/`.
const SITE_DIRS: [&str; 2] = ["site-packages", "dist-packages"];

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
        let (found, lib) = locate()?;
        let ours = probe(&lib).ok_or_else(|| format!("{found} is not NVRTC: it has no nvrtcVersion"))?;
        // The file itself, symlinks and loader search resolved: for `info`, and to find builtins.
        let library = mapped_file(ours as usize).map_or(found, |p| p.display().to_string());
        // Safety: `is_culib_present` only tries to dlopen cudarc's library names.
        if !unsafe { sys::is_culib_present() } {
            return Err(format!(
                "{library} was loaded, but cudarc could not open it by its SONAME (expected libnvrtc.so.13 or .12); \
                 point {NVRTC_ENV} at an unrenamed NVRTC 12 or 13 library"
            ));
        }
        if probe_cudarc() != Some(ours) {
            return Err(format!(
                "{library} was loaded, but another libnvrtc on the loader path (LD_LIBRARY_PATH or ldconfig) \
                 shadows it; remove that one from the path or unset {NVRTC_ENV}"
            ));
        }
        let (mut major, mut minor) = (0, 0);
        // Safety: cudarc's loader is known to succeed (checked above); both pointers are to
        // live stack integers.
        let status = unsafe { sys::nvrtcVersion(&mut major, &mut minor) };
        if status != sys::nvrtcResult::NVRTC_SUCCESS {
            return Err(format!("{library}: nvrtcVersion failed ({status:?})"));
        }
        if major < MIN_MAJOR {
            return Err(format!(
                "{library} is NVRTC {major}.{minor}, but evoattn needs {MIN_MAJOR}.0 or newer: install CUDA 12/13 \
                 or `pip install nvidia-cuda-nvrtc`, or set {NVRTC_ENV}"
            ));
        }
        let mut preloaded = vec![lib];
        // NVRTC dlopens its builtins library by plain name when it compiles; beside a copy
        // found by path (or through a symlink) it is outside the loader's search path.
        let builtins = Path::new(&library).parent().map(|d| d.join(format!("libnvrtc-builtins.so.{major}.{minor}")));
        if let Some(lib) = builtins.and_then(|b| open_global(&b).ok()) {
            preloaded.push(lib);
        }
        Ok(Nvrtc { library, version: (major, minor), _preloaded: preloaded })
    }
}

/// Finds NVRTC: `EVOATTN_NVRTC`, then cudarc's plain names (LD_LIBRARY_PATH, ldconfig),
/// then well-known directories. Returns the path or name loaded and its handle.
fn locate() -> std::result::Result<(String, Library), String> {
    if let Some(value) = std::env::var_os(NVRTC_ENV).filter(|v| !v.is_empty()) {
        let given = PathBuf::from(value);
        let path = if given.is_dir() { find_in_dir(&given) } else { Some(given.clone()) };
        let path = path.ok_or_else(|| format!("{NVRTC_ENV}={} holds no {LIB_PREFIX}* file", given.display()))?;
        let lib = open_global(&path).map_err(|e| {
            // libloading's own message is just "dlopen failed"; dlerror's text is its source.
            let detail = std::error::Error::source(&e).map_or_else(|| e.to_string(), |s| s.to_string());
            format!("{NVRTC_ENV}={}: cannot load it ({detail})", given.display())
        })?;
        return Ok((path.display().to_string(), lib));
    }
    // cudarc's own loader will find it the same way.
    for name in cudarc::get_lib_name_candidates("nvrtc") {
        if let Ok(lib) = open_global(Path::new(&name)) {
            return Ok((name, lib));
        }
    }
    for dir in well_known_dirs() {
        if let Some(path) = find_in_dir(&dir) {
            if let Ok(lib) = open_global(&path) {
                return Ok((path.display().to_string(), lib));
            }
        }
    }
    Err(format!(
        "NVRTC was not found ({NVRTC_ENV}, LD_LIBRARY_PATH, ldconfig, $CUDA_HOME, /usr/local/cuda*, Python \
         site-packages and ./.nvrtc were searched): install the CUDA 12/13 toolkit or `pip install \
         nvidia-cuda-nvrtc`, or set {NVRTC_ENV} to the libnvrtc.so file or its directory"
    ))
}

fn open_global(path: &Path) -> std::result::Result<Library, libloading::Error> {
    // Safety: loading NVRTC runs only its ELF initialisers, which have no preconditions; a
    // handle is kept for the whole process, or dropped at once when it is not NVRTC.
    unsafe { Library::open(Some(path), RTLD_NOW | RTLD_GLOBAL) }
}

/// The address of NVRTC's probe symbol in `lib`; `None` if `lib` is not NVRTC.
fn probe(lib: &Library) -> Option<*const c_void> {
    // Safety: the symbol's address is only compared, never called or read through.
    unsafe { lib.get::<*const c_void>(PROBE_SYMBOL).ok().map(|s| *s) }
}

/// The address of the probe symbol in the library cudarc's bindings call.
fn probe_cudarc() -> Option<*const c_void> {
    // Safety: as in `probe`; `culib` does not panic once `is_culib_present` returned true.
    unsafe { sys::culib().get::<*const c_void>(PROBE_SYMBOL).ok().map(|s| *s) }
}

/// The file mapped at `addr` in this process, from `/proc/self/maps`: the library holding a symbol.
fn mapped_file(addr: usize) -> Option<PathBuf> {
    let maps = std::fs::read_to_string("/proc/self/maps").ok()?;
    maps.lines().find_map(|line| {
        // "start-end perms offset dev inode path": the path is the only field with a '/'.
        let (start, end) = line.split_whitespace().next()?.split_once('-')?;
        let range = usize::from_str_radix(start, 16).ok()?..usize::from_str_radix(end, 16).ok()?;
        range.contains(&addr).then(|| line.find('/').map(|i| PathBuf::from(&line[i..])))?
    })
}

/// The NVRTC library in `dir`: the shortest `libnvrtc.so*` name (`libnvrtc.so`, else the
/// SONAME-style `libnvrtc.so.13`), which in a toolkit are symlinks to one file.
fn find_in_dir(dir: &Path) -> Option<PathBuf> {
    let entries = std::fs::read_dir(dir).ok()?;
    entries
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n == LIB_PREFIX || n.strip_prefix(LIB_PREFIX).is_some_and(|rest| rest.starts_with('.')))
        .min_by_key(|n| (n.len(), n.clone()))
        .map(|n| dir.join(n))
}

/// CUDA toolkit directories, then Python wheel directories, in search order.
/// Python site-packages directories the embedding program names (the Python package passes
/// its interpreter's `sys.path`), searched for NVRTC wheels like the well-known prefixes.
static SITE_DIRS_ADDED: std::sync::Mutex<Vec<PathBuf>> = std::sync::Mutex::new(Vec::new());

/// Adds Python site-packages directories to NVRTC's search (before the first compile: the
/// library is found once per process).
pub fn add_site_dirs(dirs: impl IntoIterator<Item = PathBuf>) {
    let mut added = SITE_DIRS_ADDED.lock().unwrap_or_else(|p| p.into_inner());
    for dir in dirs {
        if !added.contains(&dir) {
            added.push(dir);
        }
    }
}

fn well_known_dirs() -> Vec<PathBuf> {
    let env_dir = |var: &str| std::env::var_os(var).filter(|v| !v.is_empty()).map(PathBuf::from);
    let mut dirs: Vec<PathBuf> =
        ["CUDA_HOME", "CUDA_PATH"].iter().filter_map(|v| env_dir(v)).map(|p| p.join("lib64")).collect();
    dirs.push(PathBuf::from("/usr/local/cuda/lib64"));
    for major in ["cuda-13", "cuda-12"] {
        let mut versioned = children(Path::new("/usr/local"), major);
        versioned.sort_by(|a, b| b.cmp(a));
        dirs.extend(versioned.into_iter().map(|p| p.join("lib64")));
    }

    let home = env_dir("HOME");
    let mut prefixes: Vec<PathBuf> = vec![PathBuf::from("/usr"), PathBuf::from("/usr/local")];
    prefixes.extend(home.iter().map(|h| h.join(".local")));
    prefixes.extend(["VIRTUAL_ENV", "CONDA_PREFIX"].iter().filter_map(|v| env_dir(v)));
    if let Some(h) = &home {
        prefixes.extend(children(&h.join(".pyenv/versions"), ""));
    }
    let mut roots: Vec<PathBuf> = SITE_DIRS_ADDED.lock().unwrap_or_else(|p| p.into_inner()).clone();
    for repo in repo_candidates() {
        roots.push(repo.join(REPO_LOCAL_DIR));
    }
    for prefix in prefixes {
        for python in children(&prefix.join("lib"), "python3") {
            roots.extend(SITE_DIRS.iter().map(|s| python.join(s)));
        }
    }
    for root in roots {
        dirs.extend(WHEEL_LIB_DIRS.iter().map(|d| root.join(d)));
    }
    dirs
}

/// The current directory and the executable's directory, with all their ancestors: where a
/// repository-local `.nvrtc` may be (tests run from the crate dir, binaries from `target/`).
fn repo_candidates() -> Vec<PathBuf> {
    let starts =
        [std::env::current_dir().ok(), std::env::current_exe().ok().and_then(|e| e.parent().map(Path::to_path_buf))];
    let mut out: Vec<PathBuf> = Vec::new();
    for start in starts.into_iter().flatten() {
        for dir in start.ancestors() {
            if !out.iter().any(|d| d == dir) {
                out.push(dir.to_path_buf());
            }
        }
    }
    out
}

/// Subdirectories of `dir` whose names start with `prefix`.
fn children(dir: &Path, prefix: &str) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_str().is_some_and(|n| n.starts_with(prefix)))
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect()
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
