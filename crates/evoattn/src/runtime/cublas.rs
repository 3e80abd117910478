//! Finding and loading cuBLASLt and cuBLAS, once per process, as NVRTC is (by
//! [`culib`](super::culib)): cudarc's cuBLAS bindings panic when their own plain-name search
//! fails, so they may only be called after [`Cublas::get`] succeeded.

use super::culib::{self, CuLib, CudarcLoader, Vars};
use crate::error::{Error, Result};
use cudarc::cublas::sys as blas_sys;
use cudarc::cublaslt::sys as lt_sys;
use libloading::os::unix::Library;
use std::ffi::c_int;
use std::sync::OnceLock;

/// Environment variable naming the directory that holds libcublas and libcublasLt, or one of
/// the two files.
pub const CUBLAS_ENV: &str = "EVOATTN_CUBLAS";

/// How to install cuBLAS, as the error sentences say it.
const INSTALL: &str =
    "the CUDA 12/13 toolkit or `pip install nvidia-cublas` (CUDA 13; `nvidia-cublas-cu12` for CUDA 12)";
/// Where cuBLAS wheels put both libraries: CUDA 13's `nvidia-cublas`, then CUDA 12's
/// `nvidia-cublas-cu12`.
const WHEEL_LIB_DIRS: &[&str] = &["nvidia/cu13/lib", "nvidia/cublas/lib"];
/// What [`CUBLAS_ENV`] is set to, as the not-found sentence says it.
const ENV_VALUE: &str = "the directory holding libcublas.so and libcublasLt.so";

/// cuBLASLt for the finder; 12 is the oldest major, as for NVRTC (the crate supports CUDA 12 and 13).
pub(crate) const CUBLASLT: CuLib = CuLib {
    name: "cuBLASLt",
    cudarc_name: "cublasLt",
    file_prefix: "libcublasLt.so",
    env_var: CUBLAS_ENV,
    env_value: ENV_VALUE,
    env_siblings: &["libcublas.so"],
    wheel_lib_dirs: WHEEL_LIB_DIRS,
    probe_symbol: "cublasLtGetVersion",
    min_major: 12,
    install: INSTALL,
};

/// cuBLAS for the finder; its version must be cuBLASLt's.
pub(crate) const CUBLAS: CuLib = CuLib {
    name: "cuBLAS",
    cudarc_name: "cublas",
    file_prefix: "libcublas.so",
    env_var: CUBLAS_ENV,
    env_value: ENV_VALUE,
    env_siblings: &["libcublasLt.so"],
    wheel_lib_dirs: WHEEL_LIB_DIRS,
    probe_symbol: "cublasGetProperty",
    min_major: 12,
    install: INSTALL,
};

/// The loaded cuBLASLt and cuBLAS libraries, one pair per process.
pub struct Cublas {
    lt_library: String,
    library: String,
    version: (i32, i32, i32),
    /// cuBLASLt and cuBLAS, kept open for the life of the process so that cudarc's plain-name
    /// `dlopen` keeps resolving to them.
    _preloaded: [Library; 2],
}

impl Cublas {
    /// The process-wide cuBLASLt and cuBLAS, found and loaded on first use.
    pub fn get() -> Result<&'static Cublas> {
        static CUBLAS_LIBS: OnceLock<std::result::Result<Cublas, String>> = OnceLock::new();
        CUBLAS_LIBS
            .get_or_init(|| Cublas::load(&culib::process_var))
            .as_ref()
            .map_err(|reason| Error::NoCublas(reason.clone()))
    }

    /// cuBLASLt's `(major, minor, patch)` from `cublasLtGetVersion`, e.g. `(13, 0, 2)`; cuBLAS's
    /// major and minor are the same.
    pub fn version(&self) -> (i32, i32, i32) {
        self.version
    }

    /// The path (or loader name) of the cuBLASLt library in use.
    pub fn lt_library(&self) -> &str {
        &self.lt_library
    }

    /// The path (or loader name) of the cuBLAS library in use.
    pub fn library(&self) -> &str {
        &self.library
    }

    /// cuBLASLt first: cuBLAS needs it (`DT_NEEDED libcublasLt.so.N`), and then resolves that
    /// to the copy already loaded.
    fn load(var: Vars) -> std::result::Result<Cublas, String> {
        let lt_cudarc = CudarcLoader { present: lt_sys::is_culib_present, library: lt_sys::culib };
        let (lt_library, lt) = culib::load(&CUBLASLT, &lt_cudarc, var)?;
        // Safety: `culib::load` checked that cudarc's cuBLASLt loader succeeds; the call takes
        // no arguments and needs no GPU.
        let version = culib::split_version(unsafe { lt_sys::cublasLtGetVersion() });
        culib::check_major(&CUBLASLT, &lt_library, version.0, version.1)?;

        let blas_cudarc = CudarcLoader { present: blas_sys::is_culib_present, library: blas_sys::culib };
        let (library, blas) = culib::load(&CUBLAS, &blas_cudarc, var)?;
        let property = |which| {
            let mut value: c_int = 0;
            // Safety: `culib::load` checked that cudarc's cuBLAS loader succeeds; `value` is a
            // live stack integer; the call needs no GPU.
            let status = unsafe { blas_sys::cublasGetProperty(which, &mut value) };
            match status {
                blas_sys::cublasStatus_t::CUBLAS_STATUS_SUCCESS => Ok(value),
                other => Err(format!("{library}: cublasGetProperty failed ({other:?})")),
            }
        };
        let blas_version = (
            property(blas_sys::libraryPropertyType::MAJOR_VERSION)?,
            property(blas_sys::libraryPropertyType::MINOR_VERSION)?,
        );
        if blas_version != (version.0, version.1) {
            return Err(format!(
                "{library} is cuBLAS {}.{}, but {lt_library} is cuBLASLt {}.{}: set {CUBLAS_ENV} to one \
                 directory holding both",
                blas_version.0, blas_version.1, version.0, version.1
            ));
        }
        Ok(Cublas { lt_library, library, version, _preloaded: [lt, blas] })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::{Path, PathBuf};

    #[test]
    fn an_env_var_naming_a_missing_directory_is_a_no_cublas_sentence_not_a_panic() {
        let tmp = tempfile::tempdir().unwrap();
        let missing = tmp.path().join("no-such-dir");
        let var = |name: &str| (name == CUBLAS_ENV).then(|| missing.clone());
        let Err(reason) = Cublas::load(&var) else { panic!("a missing directory loaded") };
        let err = Error::NoCublas(reason);
        assert!(err.is_environment());
        let text = err.to_string();
        assert!(text.starts_with(&format!("{CUBLAS_ENV}={}: cannot load it (", missing.display())), "{text}");
        assert_eq!(text.lines().count(), 1, "{text}");
    }

    #[test]
    fn an_env_var_naming_a_directory_of_fakes_is_a_no_cublas_sentence_not_a_panic() {
        let tmp = tempfile::tempdir().unwrap();
        for name in ["libcublas.so.13", "libcublasLt.so.13"] {
            std::fs::write(tmp.path().join(name), b"").unwrap();
        }
        let dir: PathBuf = tmp.path().into();
        let var = |name: &str| (name == CUBLAS_ENV).then(|| dir.clone());
        let Err(reason) = Cublas::load(&var) else { panic!("a fake library loaded") };
        assert!(reason.starts_with(&format!("{CUBLAS_ENV}={}: cannot load it (", dir.display())), "{reason}");
    }

    /// Needs a real cuBLAS (no GPU): where it is missing the test says why and passes.
    #[test]
    fn an_installed_cublas_loads_with_its_version_and_paths() {
        let cublas = match Cublas::get() {
            Ok(cublas) => cublas,
            Err(err) => {
                println!("skipped: {err}");
                return;
            }
        };
        let (major, minor, patch) = cublas.version();
        println!("cuBLAS {major}.{minor}.{patch}: {} and {}", cublas.lt_library(), cublas.library());
        assert!(major >= 12, "{major}.{minor}");
        let name = |path: &str| Path::new(path).file_name().unwrap().to_string_lossy().into_owned();
        assert!(name(cublas.lt_library()).starts_with("libcublasLt.so"), "{}", cublas.lt_library());
        assert!(name(cublas.library()).starts_with("libcublas.so"), "{}", cublas.library());
    }
}
