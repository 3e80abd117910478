//! Finding a CUDA library that cudarc binds (NVRTC, cuBLAS, cuBLASLt) and loading it so that
//! cudarc's bindings call it.
//!
//! cudarc's loader tries a fixed list of plain names and panics when none loads, so it never
//! sees CUDA wheels in Python site-packages or a toolkit outside the loader path. A library is
//! located here first: its environment variable, then cudarc's plain names (LD_LIBRARY_PATH,
//! ldconfig), then well-known directories. It is opened with `RTLD_GLOBAL` and kept open: glibc
//! then answers cudarc's later plain-name `dlopen` with the already-loaded object, matched by
//! its SONAME. [`load`] checks that cudarc's loader will succeed and resolves to that object
//! before any cudarc function of the library may be called.

use libloading::os::unix::{Library, RTLD_GLOBAL, RTLD_NOW};
use std::ffi::c_void;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// How one library is found and recognised.
pub(crate) struct CuLib {
    /// The library's name in messages: "NVRTC", "cuBLASLt".
    pub name: &'static str,
    /// cudarc's name for it, from which `cudarc::get_lib_name_candidates` makes the plain names.
    pub cudarc_name: &'static str,
    /// File-name prefix: `libnvrtc.so` matches `libnvrtc.so` and `libnvrtc.so.13`.
    pub file_prefix: &'static str,
    /// Environment variable naming the library file or its directory.
    pub env_var: &'static str,
    /// What to set [`Self::env_var`] to, as the not-found sentence says it.
    pub env_value: &'static str,
    /// File-name prefixes of the other libraries sharing [`Self::env_var`]: a file of theirs
    /// named there means "look beside it".
    pub env_siblings: &'static [&'static str],
    /// Library directories inside a Python site-packages directory, in search order.
    pub wheel_lib_dirs: &'static [&'static str],
    /// A symbol every version exports; its address tells whether two handles are one library.
    pub probe_symbol: &'static str,
    /// Oldest major version evoattn accepts.
    pub min_major: i32,
    /// How to install it, as the error sentences say it after "install".
    pub install: &'static str,
}

/// cudarc's loader of one library: whether it will succeed, and the library it loads (which
/// panics unless `present` returned true).
pub(crate) struct CudarcLoader {
    /// `sys::is_culib_present`.
    pub present: unsafe fn() -> bool,
    /// `sys::culib`.
    pub library: unsafe fn() -> &'static libloading::Library,
}

/// An environment variable's value, `None` when unset or empty: how the search reads the
/// process environment (tests pass their own).
pub(crate) type Vars<'a> = &'a dyn Fn(&str) -> Option<PathBuf>;

/// The process environment, as [`Vars`].
pub(crate) fn process_var(name: &str) -> Option<PathBuf> {
    std::env::var_os(name).filter(|v| !v.is_empty()).map(PathBuf::from)
}

/// Where `pip install --target .nvrtc ...` (scripts/nvrtc-env) puts wheels, relative to a
/// repository root.
const REPO_LOCAL_DIR: &str = ".nvrtc";
/// Site-packages directory names under `<prefix>/lib/python3.X/`.
const SITE_DIRS: [&str; 2] = ["site-packages", "dist-packages"];

/// Python site-packages directories the embedding program names (the Python package passes
/// its interpreter's `sys.path`), searched for wheels like the well-known prefixes.
static SITE_DIRS_ADDED: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// Adds Python site-packages directories to the search for NVRTC and cuBLAS (before their
/// first use: each library is found once per process).
pub fn add_site_dirs(dirs: impl IntoIterator<Item = PathBuf>) {
    let mut added = SITE_DIRS_ADDED.lock().unwrap_or_else(|p| p.into_inner());
    for dir in dirs {
        if !added.contains(&dir) {
            added.push(dir);
        }
    }
}

/// Finds `lib` ([`locate`]), loads it for the process and checks that cudarc's bindings will
/// call it. Returns the file loaded (the path or loader name when `/proc/self/maps` does not
/// say) and the handle, which must be kept open.
pub(crate) fn load(lib: &CuLib, cudarc: &CudarcLoader, var: Vars) -> Result<(String, Library), String> {
    let (library, handle) = open(lib, var)?;
    let Some(ours) = probe(&handle, lib.probe_symbol) else {
        return Err(format!("{library} is not {}: it has no {}", lib.name, lib.probe_symbol));
    };
    // Safety: cudarc's `is_culib_present` functions only try to dlopen their library names.
    if !unsafe { (cudarc.present)() } {
        return Err(format!(
            "{library} was loaded, but cudarc could not open it by its SONAME (expected {prefix}.13 or .12); \
             point {env} at an unrenamed {name} 12 or 13 library",
            prefix = lib.file_prefix,
            env = lib.env_var,
            name = lib.name,
        ));
    }
    // Safety: cudarc's loader does not panic once `present` returned true; the symbol's
    // address is only compared, never called or read through.
    let theirs = unsafe { (cudarc.library)().get::<*const c_void>(lib.probe_symbol.as_bytes()).ok().map(|s| *s) };
    if theirs != Some(ours) {
        return Err(format!(
            "{library} was loaded, but another {stem} on the loader path (LD_LIBRARY_PATH or ldconfig) \
             shadows it; remove that one from the path or unset {env}",
            stem = lib.file_prefix.trim_end_matches(".so"),
            env = lib.env_var,
        ));
    }
    Ok((library, handle))
}

/// Finds `lib` ([`locate`]) and loads it for the process, checking that it exports its probe
/// symbol. Returns the file loaded (the path or loader name when `/proc/self/maps` does not
/// say) and the handle, which must be kept open. For a library called through its own symbols
/// (cuTENSOR); [`load`] for those cudarc binds.
pub(crate) fn open(lib: &CuLib, var: Vars) -> Result<(String, Library), String> {
    let (found, handle) = locate(lib, var)?;
    let ours = probe(&handle, lib.probe_symbol)
        .ok_or_else(|| format!("{found} is not {}: it has no {}", lib.name, lib.probe_symbol))?;
    // The file itself, symlinks and loader search resolved.
    let library = mapped_file(ours as usize).map_or(found, |p| p.display().to_string());
    Ok((library, handle))
}

/// `(major, minor, patch)` from a version number `major * 10000 + minor * 100 + patch`, as
/// cuBLAS and cuTENSOR give theirs.
pub(crate) fn split_version(number: usize) -> (i32, i32, i32) {
    let part = |n: usize| i32::try_from(n).unwrap_or(i32::MAX);
    (part(number / 10_000), part(number / 100 % 100), part(number % 100))
}

/// The sentence for a `library` too old for evoattn, if it is.
pub(crate) fn check_major(lib: &CuLib, library: &str, major: i32, minor: i32) -> Result<(), String> {
    if major >= lib.min_major {
        return Ok(());
    }
    Err(format!(
        "{library} is {name} {major}.{minor}, but evoattn needs {min}.0 or newer: install {install}, \
         or set {env}",
        name = lib.name,
        min = lib.min_major,
        install = lib.install,
        env = lib.env_var,
    ))
}

/// Finds `lib`: its environment variable, then cudarc's plain names (LD_LIBRARY_PATH,
/// ldconfig), then [`candidates`]. Returns the path or name loaded and its handle.
pub(crate) fn locate(lib: &CuLib, var: Vars) -> Result<(String, Library), String> {
    if let Some(given) = var(lib.env_var) {
        let path = env_path(lib, &given)?;
        let handle = open_global(&path).map_err(|e| {
            // libloading's own message is just "dlopen failed"; dlerror's text is its source.
            let detail = std::error::Error::source(&e).map_or_else(|| e.to_string(), |s| s.to_string());
            format!("{}={}: cannot load it ({detail})", lib.env_var, given.display())
        })?;
        return Ok((path.display().to_string(), handle));
    }
    // cudarc's own loader will find it the same way.
    for name in cudarc::get_lib_name_candidates(lib.cudarc_name) {
        if let Ok(handle) = open_global(Path::new(&name)) {
            return Ok((name, handle));
        }
    }
    for path in candidates(lib, var) {
        if let Ok(handle) = open_global(&path) {
            return Ok((path.display().to_string(), handle));
        }
    }
    Err(not_found(lib))
}

/// The one sentence saying what was searched and how to install `lib`.
pub(crate) fn not_found(lib: &CuLib) -> String {
    format!(
        "{name} was not found ({env}, LD_LIBRARY_PATH, ldconfig, $CUDA_HOME, /usr/local/cuda*, Python \
         site-packages and ./{REPO_LOCAL_DIR} were searched): install {install}, or set \
         {env} to {value}",
        name = lib.name,
        env = lib.env_var,
        install = lib.install,
        value = lib.env_value,
    )
}

/// The file that `lib`'s environment variable, set to `given`, stands for: the library in
/// `given` when it is a directory, the library beside `given` when that is a sibling library's
/// file, else `given` itself (loading it says whether it is a library).
fn env_path(lib: &CuLib, given: &Path) -> Result<PathBuf, String> {
    let var = lib.env_var;
    if given.is_dir() {
        return find_in_dir(given, lib.file_prefix)
            .ok_or_else(|| format!("{var}={} holds no {}* file", given.display(), lib.file_prefix));
    }
    let file_name = given.file_name().and_then(|n| n.to_str()).unwrap_or_default();
    if !lib.env_siblings.iter().any(|s| has_prefix(file_name, s)) {
        return Ok(given.to_path_buf());
    }
    given
        .parent()
        .and_then(|dir| find_in_dir(dir, lib.file_prefix))
        .ok_or_else(|| format!("{var}={}: no {}* file beside it", given.display(), lib.file_prefix))
}

/// `lib`'s file in each well-known directory that holds one, in search order.
fn candidates(lib: &CuLib, var: Vars) -> Vec<PathBuf> {
    well_known_dirs(lib, var).iter().filter_map(|dir| find_in_dir(dir, lib.file_prefix)).collect()
}

/// Opens `path` for the process: later plain-name `dlopen`s of its SONAME resolve to it.
pub(crate) fn open_global(path: &Path) -> Result<Library, libloading::Error> {
    // Safety: loading a CUDA library runs only its ELF initialisers, which have no
    // preconditions; a handle is kept for the whole process, or dropped at once when it is
    // not the library looked for.
    unsafe { Library::open(Some(path), RTLD_NOW | RTLD_GLOBAL) }
}

/// The address of `symbol` in `lib`; `None` if `lib` does not export it.
fn probe(lib: &Library, symbol: &str) -> Option<*const c_void> {
    // Safety: the symbol's address is only compared, never called or read through.
    unsafe { lib.get::<*const c_void>(symbol.as_bytes()).ok().map(|s| *s) }
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

/// Whether `file_name` is `prefix` or `prefix` with a version suffix (`libnvrtc.so.13`).
fn has_prefix(file_name: &str, prefix: &str) -> bool {
    file_name.strip_prefix(prefix).is_some_and(|rest| rest.is_empty() || rest.starts_with('.'))
}

/// The library named by `prefix` in `dir`: the shortest matching name (`libnvrtc.so`, else the
/// SONAME-style `libnvrtc.so.13`), which in a toolkit are symlinks to one file.
fn find_in_dir(dir: &Path, prefix: &str) -> Option<PathBuf> {
    let entries = std::fs::read_dir(dir).ok()?;
    entries
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| has_prefix(n, prefix))
        .min_by_key(|n| (n.len(), n.clone()))
        .map(|n| dir.join(n))
}

/// CUDA toolkit directories, then Python wheel directories, in search order.
fn well_known_dirs(lib: &CuLib, var: Vars) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> =
        ["CUDA_HOME", "CUDA_PATH"].iter().filter_map(|v| var(v)).map(|p| p.join("lib64")).collect();
    dirs.push(PathBuf::from("/usr/local/cuda/lib64"));
    for major in ["cuda-13", "cuda-12"] {
        let mut versioned = children(Path::new("/usr/local"), major);
        versioned.sort_by(|a, b| b.cmp(a));
        dirs.extend(versioned.into_iter().map(|p| p.join("lib64")));
    }

    let home = var("HOME");
    let mut prefixes: Vec<PathBuf> = vec![PathBuf::from("/usr"), PathBuf::from("/usr/local")];
    prefixes.extend(home.iter().map(|h| h.join(".local")));
    prefixes.extend(["VIRTUAL_ENV", "CONDA_PREFIX"].iter().filter_map(|v| var(v)));
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
        dirs.extend(lib.wheel_lib_dirs.iter().map(|d| root.join(d)));
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::cublas::{CUBLAS, CUBLASLT};
    use crate::runtime::nvrtc::NVRTC;

    /// An environment holding only `pairs`.
    fn vars<'a>(pairs: &'a [(&str, &Path)]) -> impl Fn(&str) -> Option<PathBuf> + 'a {
        move |name| pairs.iter().find(|(n, _)| *n == name).map(|(_, p)| p.to_path_buf())
    }

    /// Empty files named `names` in `dir` (created with its parents): fakes no loader accepts.
    fn fake_libs(dir: &Path, names: &[&str]) {
        std::fs::create_dir_all(dir).unwrap();
        for name in names {
            std::fs::write(dir.join(name), b"").unwrap();
        }
    }

    #[test]
    fn a_directory_yields_the_shortest_name_of_that_library_and_no_other() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let names = ["libcublasLt.so.13.0.2.14", "libcublasLt.so.13", "libcublas.so.13", "libcublasLt_static.a"];
        fake_libs(dir, &names);
        fake_libs(dir, &["libcublasLt.sox", "libnvrtc-builtins.so.13.0", "libnvrtc.so.13.0.88"]);
        assert_eq!(find_in_dir(dir, CUBLASLT.file_prefix), Some(dir.join("libcublasLt.so.13")));
        assert_eq!(find_in_dir(dir, CUBLAS.file_prefix), Some(dir.join("libcublas.so.13")));
        assert_eq!(find_in_dir(dir, NVRTC.file_prefix), Some(dir.join("libnvrtc.so.13.0.88")));
        fake_libs(dir, &["libcublasLt.so"]);
        assert_eq!(find_in_dir(dir, CUBLASLT.file_prefix), Some(dir.join("libcublasLt.so")));
        assert_eq!(find_in_dir(&dir.join("missing"), CUBLASLT.file_prefix), None);
    }

    #[test]
    fn the_env_var_naming_a_directory_means_each_library_in_it() {
        let tmp = tempfile::tempdir().unwrap();
        fake_libs(tmp.path(), &["libcublas.so.13", "libcublasLt.so.13", "libnvrtc.so.13"]);
        assert_eq!(env_path(&CUBLASLT, tmp.path()), Ok(tmp.path().join("libcublasLt.so.13")));
        assert_eq!(env_path(&CUBLAS, tmp.path()), Ok(tmp.path().join("libcublas.so.13")));
        assert_eq!(env_path(&NVRTC, tmp.path()), Ok(tmp.path().join("libnvrtc.so.13")));
    }

    #[test]
    fn the_cublas_env_var_naming_one_file_finds_the_other_beside_it() {
        let tmp = tempfile::tempdir().unwrap();
        fake_libs(tmp.path(), &["libcublas.so.13", "libcublasLt.so.13"]);
        let blas = tmp.path().join("libcublas.so.13");
        assert_eq!(env_path(&CUBLASLT, &blas), Ok(tmp.path().join("libcublasLt.so.13")));
        assert_eq!(env_path(&CUBLAS, &blas), Ok(blas.clone()));
        let lt = tmp.path().join("libcublasLt.so.13");
        assert_eq!(env_path(&CUBLAS, &lt), Ok(blas));
    }

    #[test]
    fn a_file_named_by_the_env_var_is_loaded_as_it_is_whatever_its_name() {
        let tmp = tempfile::tempdir().unwrap();
        fake_libs(tmp.path(), &["libcublasLt.so.13", "libnvrtc.so.13"]);
        let renamed = tmp.path().join("my-nvrtc.so");
        assert_eq!(env_path(&NVRTC, &renamed), Ok(renamed));
        let renamed = tmp.path().join("lt-copy.so");
        assert_eq!(env_path(&CUBLASLT, &renamed), Ok(renamed));
    }

    #[test]
    fn a_directory_without_the_library_is_a_sentence_naming_the_variable_and_the_file() {
        let tmp = tempfile::tempdir().unwrap();
        fake_libs(tmp.path(), &["libcublas.so.13"]);
        let shown = tmp.path().display();
        assert_eq!(
            env_path(&CUBLASLT, tmp.path()),
            Err(format!("EVOATTN_CUBLAS={shown} holds no libcublasLt.so* file"))
        );
        let blas = tmp.path().join("libcublas.so.13");
        let expected = format!("EVOATTN_CUBLAS={}: no libcublasLt.so* file beside it", blas.display());
        assert_eq!(env_path(&CUBLASLT, &blas), Err(expected));
    }

    /// `locate`'s error for `lib` with its variable set to `value` (and a toolkit holding a fake
    /// library in `CUDA_HOME`, which a set variable must leave unsearched).
    fn env_error(lib: &CuLib, value: &Path, cuda_home: &Path) -> String {
        let pairs = [(lib.env_var, value), ("CUDA_HOME", cuda_home)];
        let var = vars(&pairs);
        match locate(lib, &var) {
            Ok((found, _)) => panic!("{found} loaded"),
            Err(sentence) => sentence,
        }
    }

    #[test]
    fn the_env_var_naming_a_missing_path_is_a_cannot_load_sentence_and_nothing_else_is_searched() {
        let tmp = tempfile::tempdir().unwrap();
        let home = tmp.path().join("cuda");
        fake_libs(&home.join("lib64"), &["libcublasLt.so.13", "libnvrtc.so.13"]);
        for lib in [&CUBLASLT, &NVRTC] {
            let missing = tmp.path().join("no-such-dir");
            let sentence = env_error(lib, &missing, &home);
            let start = format!("{}={}: cannot load it (", lib.env_var, missing.display());
            assert!(sentence.starts_with(&start) && sentence.contains("No such file"), "{sentence}");
            assert_eq!(sentence.lines().count(), 1, "{sentence}");
        }
    }

    #[test]
    fn the_env_var_naming_a_file_that_is_no_library_is_a_cannot_load_sentence() {
        let tmp = tempfile::tempdir().unwrap();
        let notes = tmp.path().join("notes.txt");
        std::fs::write(&notes, "not an ELF file\n").unwrap();
        let sentence = env_error(&CUBLASLT, &notes, tmp.path());
        assert!(sentence.starts_with(&format!("EVOATTN_CUBLAS={}: cannot load it (", notes.display())), "{sentence}");
        // A directory whose library file is a fake fails the same way, naming the directory.
        fake_libs(tmp.path(), &["libcublasLt.so.13"]);
        let sentence = env_error(&CUBLASLT, tmp.path(), tmp.path());
        assert!(sentence.starts_with(&format!("EVOATTN_CUBLAS={}: cannot load it (", tmp.path().display())));
    }

    #[test]
    fn well_known_dirs_go_toolkit_then_added_site_dirs_then_prefixes_and_cuda_13_wheels_before_12() {
        let tmp = tempfile::tempdir().unwrap();
        let at = |rel: &str| tmp.path().join(rel);
        let lt = "libcublasLt.so.13";
        let added = at("added-site");
        let expected = [
            at("cuda/lib64"),
            added.join("nvidia/cublas/lib"),
            at("home/.local/lib/python3.12/site-packages/nvidia/cu13/lib"),
            at("venv/lib/python3.11/site-packages/nvidia/cu13/lib"),
            at("venv/lib/python3.11/site-packages/nvidia/cublas/lib"),
            at("venv/lib/python3.11/dist-packages/nvidia/cu13/lib"),
        ];
        for dir in &expected {
            fake_libs(dir, &[lt]);
        }
        // Wheels of other libraries and prefixes not in the environment are not searched.
        fake_libs(&at("venv/lib/python3.11/site-packages/nvidia/cuda_nvrtc/lib"), &[lt]);
        fake_libs(&at("elsewhere/lib/python3.11/site-packages/nvidia/cu13/lib"), &[lt]);
        add_site_dirs([added]);
        let pairs = [("CUDA_HOME", &*at("cuda")), ("HOME", &*at("home")), ("VIRTUAL_ENV", &*at("venv"))];
        let found: Vec<PathBuf> =
            candidates(&CUBLASLT, &vars(&pairs)).into_iter().filter(|p| p.starts_with(tmp.path())).collect();
        let expected: Vec<PathBuf> = expected.iter().map(|d| d.join(lt)).collect();
        assert_eq!(found, expected);
    }

    #[test]
    fn each_library_is_looked_for_in_its_own_wheel_dirs() {
        let tmp = tempfile::tempdir().unwrap();
        let site = tmp.path().join("venv/lib/python3.12/site-packages");
        fake_libs(&site.join("nvidia/cuda_nvrtc/lib"), &["libnvrtc.so.12", "libcublasLt.so.12"]);
        fake_libs(&site.join("nvidia/cublas/lib"), &["libnvrtc.so.12", "libcublasLt.so.12", "libcublas.so.12"]);
        let pairs = [("VIRTUAL_ENV", &*tmp.path().join("venv"))];
        let found = |lib: &CuLib| -> Vec<String> {
            let mut paths = candidates(lib, &vars(&pairs));
            paths.retain(|p| p.starts_with(tmp.path()));
            paths.iter().map(|p| p.strip_prefix(&site).unwrap().display().to_string()).collect()
        };
        assert_eq!(found(&NVRTC), ["nvidia/cuda_nvrtc/lib/libnvrtc.so.12"]);
        assert_eq!(found(&CUBLASLT), ["nvidia/cublas/lib/libcublasLt.so.12"]);
        assert_eq!(found(&CUBLAS), ["nvidia/cublas/lib/libcublas.so.12"]);
    }

    #[test]
    fn not_found_is_one_sentence_saying_what_was_searched_and_how_to_install() {
        assert_eq!(
            not_found(&NVRTC),
            "NVRTC was not found (EVOATTN_NVRTC, LD_LIBRARY_PATH, ldconfig, $CUDA_HOME, /usr/local/cuda*, Python \
             site-packages and ./.nvrtc were searched): install the CUDA 12/13 toolkit or `pip install \
             nvidia-cuda-nvrtc`, or set EVOATTN_NVRTC to the libnvrtc.so file or its directory"
        );
        assert_eq!(
            not_found(&CUBLASLT),
            "cuBLASLt was not found (EVOATTN_CUBLAS, LD_LIBRARY_PATH, ldconfig, $CUDA_HOME, /usr/local/cuda*, \
             Python site-packages and ./.nvrtc were searched): install the CUDA 12/13 toolkit or `pip install \
             nvidia-cublas` (CUDA 13; `nvidia-cublas-cu12` for CUDA 12), or set EVOATTN_CUBLAS to the directory \
             holding libcublas.so and libcublasLt.so"
        );
    }

    #[test]
    fn the_version_number_splits_into_major_minor_patch() {
        assert_eq!(split_version(130_002), (13, 0, 2));
        assert_eq!(split_version(120_405), (12, 4, 5));
        assert_eq!(split_version(20_801), (2, 8, 1));
    }

    #[test]
    fn a_library_older_than_its_minimum_major_is_a_sentence_saying_what_to_install() {
        assert_eq!(check_major(&NVRTC, "/x/libnvrtc.so.12", 12, 0), Ok(()));
        assert_eq!(
            check_major(&NVRTC, "/x/libnvrtc.so.11.2", 11, 8),
            Err("/x/libnvrtc.so.11.2 is NVRTC 11.8, but evoattn needs 12.0 or newer: install the CUDA 12/13 \
                 toolkit or `pip install nvidia-cuda-nvrtc`, or set EVOATTN_NVRTC"
                .to_string())
        );
        let sentence = check_major(&CUBLASLT, "/x/libcublasLt.so.11", 11, 11).unwrap_err();
        assert!(sentence.contains("cuBLASLt 11.11") && sentence.contains("nvidia-cublas-cu12"), "{sentence}");
    }
}
