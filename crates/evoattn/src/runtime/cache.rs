//! The on-disk CUBIN cache: one file per compiled kernel, named by a hash of its key.
//!
//! A file holds a short text header (format tag, the full key, the resource report, payload
//! lengths and a checksum) followed by the log and the CUBIN. `get` checks all of it, so a
//! file-name collision, a truncated or corrupt file, or one from another format is a miss.
//! `put` writes a unique temporary file in the same directory and renames it over the final
//! name, so concurrent writers (threads or processes) never expose a partial file.

use crate::arch::Arch;
use crate::config::KernelSpec;
use crate::error::{Error, Result};
use crate::kernels::{fnv1a_hash, source_hash};
use crate::runtime::resources::ResourceReport;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// Environment variable that moves the cache.
pub const CACHE_DIR_ENV: &str = "EVOATTN_CACHE_DIR";
/// First line of every cache file; bump the version when the layout changes.
const FORMAT_TAG: &str = "evoattn-cubin v1";
const FILE_EXTENSION: &str = "cubin";

/// Everything a CUBIN depends on, as one line of text.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct CacheKey(String);

impl CacheKey {
    /// Kernel name (impl, dtype, head dim, levers), source text, arch, NVRTC version and options.
    pub fn new(spec: &KernelSpec, arch: Arch, nvrtc_version: (i32, i32), options: &[String]) -> Self {
        let options_hash = fnv1a_hash(options.join("\n").as_bytes());
        CacheKey(format!(
            "kernel={} source={:016x} arch={arch} nvrtc={}.{} options={options_hash:016x}",
            spec.name(),
            source_hash(spec.imp()),
            nvrtc_version.0,
            nvrtc_version.1
        ))
    }

    pub fn text(&self) -> &str {
        &self.0
    }

    fn file_name(&self) -> String {
        format!("{:016x}.{FILE_EXTENSION}", fnv1a_hash(self.0.as_bytes()))
    }
}

/// What the cache stores for one kernel.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CachedKernel {
    pub cubin: Vec<u8>,
    pub resources: ResourceReport,
    pub log: String,
}

/// A directory of cached CUBINs.
#[derive(Clone, Debug)]
pub struct CubinCache {
    dir: PathBuf,
}

impl CubinCache {
    /// `$EVOATTN_CACHE_DIR`, else `$XDG_CACHE_HOME/evoattn`, else `$HOME/.cache/evoattn`
    /// (else a directory under the system temp dir).
    pub fn default_dir() -> PathBuf {
        let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty()).map(PathBuf::from);
        var(CACHE_DIR_ENV)
            .or_else(|| var("XDG_CACHE_HOME").map(|d| d.join("evoattn")))
            .or_else(|| var("HOME").map(|d| d.join(".cache").join("evoattn")))
            .unwrap_or_else(|| std::env::temp_dir().join("evoattn-cache"))
    }

    /// Opens (creating if needed) the cache in `dir`.
    pub fn open(dir: PathBuf) -> Result<Self> {
        std::fs::create_dir_all(&dir).map_err(|source| cache_error(&dir, source))?;
        Ok(CubinCache { dir })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The cached kernel for `key`, or `None` when absent or unreadable.
    pub fn get(&self, key: &CacheKey) -> Option<CachedKernel> {
        let bytes = std::fs::read(self.dir.join(key.file_name())).ok()?;
        decode(&bytes, key)
    }

    /// Stores `kernel` under `key`, atomically replacing any previous entry.
    pub fn put(&self, key: &CacheKey, kernel: &CachedKernel) -> Result<()> {
        static WRITES: AtomicU64 = AtomicU64::new(0);
        let name = key.file_name();
        let unique = WRITES.fetch_add(1, Ordering::Relaxed);
        let tmp = self.dir.join(format!(".{name}.{}.{unique}.tmp", std::process::id()));
        let result =
            std::fs::write(&tmp, encode(key, kernel)).and_then(|()| std::fs::rename(&tmp, self.dir.join(&name)));
        if let Err(source) = result {
            // Best effort: the temporary file may not exist if the write itself failed.
            let _ = std::fs::remove_file(&tmp);
            return Err(cache_error(&self.dir, source));
        }
        Ok(())
    }
}

fn cache_error(dir: &Path, source: std::io::Error) -> Error {
    Error::Cache { path: dir.display().to_string(), source }
}

fn encode(key: &CacheKey, kernel: &CachedKernel) -> Vec<u8> {
    let r = &kernel.resources;
    let mut payload = kernel.log.as_bytes().to_vec();
    payload.extend_from_slice(&kernel.cubin);
    let header = format!(
        "{FORMAT_TAG}\nkey {}\nresources {} {} {} {} {} {} {}\nlog {}\ncubin {}\nchecksum {:016x}\n",
        key.text(),
        r.registers,
        r.spill_store_bytes,
        r.spill_load_bytes,
        r.stack_frame_bytes,
        r.static_smem_bytes,
        r.dynamic_smem_bytes,
        r.constant_bytes,
        kernel.log.len(),
        kernel.cubin.len(),
        fnv1a_hash(&payload)
    );
    let mut out = header.into_bytes();
    out.extend_from_slice(&payload);
    out
}

/// Header lines before the payload: tag, key, resources, log length, cubin length, checksum.
const HEADER_LINES: usize = 6;

fn decode(bytes: &[u8], key: &CacheKey) -> Option<CachedKernel> {
    let mut lines = Vec::with_capacity(HEADER_LINES);
    let mut rest = bytes;
    for _ in 0..HEADER_LINES {
        let end = rest.iter().position(|&b| b == b'\n')?;
        lines.push(std::str::from_utf8(&rest[..end]).ok()?);
        rest = &rest[end + 1..];
    }
    let field = |i: usize, name: &str| lines[i].strip_prefix(name)?.strip_prefix(' ');
    if lines[0] != FORMAT_TAG || field(1, "key")? != key.text() {
        return None;
    }
    let numbers: Vec<u32> =
        field(2, "resources")?.split(' ').map(str::parse).collect::<std::result::Result<_, _>>().ok()?;
    let [registers, spill_store_bytes, spill_load_bytes, stack_frame_bytes, static_smem_bytes, dynamic_smem_bytes, constant_bytes] =
        numbers[..]
    else {
        return None;
    };
    let log_len: usize = field(3, "log")?.parse().ok()?;
    let cubin_len: usize = field(4, "cubin")?.parse().ok()?;
    let checksum = u64::from_str_radix(field(5, "checksum")?, 16).ok()?;
    if rest.len() != log_len.checked_add(cubin_len)? || fnv1a_hash(rest) != checksum {
        return None;
    }
    let (log, cubin) = rest.split_at(log_len);
    Some(CachedKernel {
        cubin: cubin.to_vec(),
        resources: ResourceReport {
            registers,
            spill_store_bytes,
            spill_load_bytes,
            stack_frame_bytes,
            static_smem_bytes,
            dynamic_smem_bytes,
            constant_bytes,
        },
        log: String::from_utf8(log.to_vec()).ok()?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Impl, KernelSpec};
    use crate::problem::Dtype;

    fn spec(head_dim: usize) -> KernelSpec {
        KernelSpec {
            config: crate::defaults::config(Impl::Reference, Arch::Sm80, Dtype::F16, head_dim),
            dtype: Dtype::F16,
            head_dim,
        }
    }

    fn kernel() -> CachedKernel {
        CachedKernel {
            // Bytes that look like text separators must survive.
            cubin: b"\x7fELF\n\nkey x\n\0\xff".to_vec(),
            resources: ResourceReport {
                registers: 36,
                spill_store_bytes: 1,
                spill_load_bytes: 2,
                stack_frame_bytes: 3,
                static_smem_bytes: 128,
                dynamic_smem_bytes: 1024,
                constant_bytes: 528,
            },
            log: "ptxas info    : Used 36 registers\n".to_string(),
        }
    }

    fn options() -> Vec<String> {
        vec!["--gpu-architecture=sm_80".to_string(), "-DEVOATTN_HEAD_DIM=64".to_string()]
    }

    #[test]
    fn key_names_every_input() {
        let key = CacheKey::new(&spec(64), Arch::Sm80, (13, 0), &options());
        let text = key.text();
        assert!(text.starts_with("kernel=evoattn_reference_f16_d64_t128 source="), "{text}");
        assert!(text.contains(" arch=sm_80 nvrtc=13.0 options="), "{text}");
        let others = [
            CacheKey::new(&spec(128), Arch::Sm80, (13, 0), &options()),
            CacheKey::new(&spec(64), Arch::Sm86, (13, 0), &options()),
            CacheKey::new(&spec(64), Arch::Sm80, (12, 8), &options()),
            CacheKey::new(&spec(64), Arch::Sm80, (13, 0), &options()[..1]),
        ];
        for other in &others {
            assert_ne!(other, &key);
            assert_ne!(other.file_name(), key.file_name());
        }
    }

    #[test]
    fn round_trip_miss_and_overwrite() {
        let dir = tempfile::tempdir().expect("temp dir");
        let cache = CubinCache::open(dir.path().join("nested/cache")).expect("open");
        let key = CacheKey::new(&spec(64), Arch::Sm80, (13, 0), &options());
        assert_eq!(cache.get(&key), None);
        cache.put(&key, &kernel()).expect("put");
        assert_eq!(cache.get(&key), Some(kernel()));
        let other = CacheKey::new(&spec(64), Arch::Sm90a, (13, 0), &options());
        assert_eq!(cache.get(&other), None);

        let mut newer = kernel();
        newer.cubin.push(7);
        cache.put(&key, &newer).expect("overwrite");
        assert_eq!(cache.get(&key), Some(newer));
        // Only the entry remains: no temporary files are left behind.
        let files: Vec<_> = std::fs::read_dir(cache.dir()).expect("list").collect();
        assert_eq!(files.len(), 1);
    }

    #[test]
    fn collision_truncation_and_corruption_are_misses() {
        let dir = tempfile::tempdir().expect("temp dir");
        let cache = CubinCache::open(dir.path().to_path_buf()).expect("open");
        let key = CacheKey::new(&spec(64), Arch::Sm80, (13, 0), &options());
        let path = cache.dir().join(key.file_name());
        let good = encode(&key, &kernel());

        // Another key's entry stored under this key's file name (a hash collision).
        let other = CacheKey::new(&spec(256), Arch::Sm80, (13, 0), &options());
        std::fs::write(&path, encode(&other, &kernel())).expect("write");
        assert_eq!(cache.get(&key), None);

        for cut in [0, 10, good.len() / 2, good.len() - 1] {
            std::fs::write(&path, &good[..cut]).expect("write");
            assert_eq!(cache.get(&key), None, "truncated to {cut} bytes");
        }
        let mut flipped = good.clone();
        let last = flipped.len() - 1;
        flipped[last] ^= 1;
        std::fs::write(&path, &flipped).expect("write");
        assert_eq!(cache.get(&key), None);
        let mut longer = good.clone();
        longer.push(0);
        std::fs::write(&path, &longer).expect("write");
        assert_eq!(cache.get(&key), None);

        std::fs::write(&path, &good).expect("write");
        assert_eq!(cache.get(&key), Some(kernel()));
    }

    #[test]
    fn concurrent_writers_leave_a_whole_entry() {
        let dir = tempfile::tempdir().expect("temp dir");
        let cache = CubinCache::open(dir.path().to_path_buf()).expect("open");
        let key = CacheKey::new(&spec(64), Arch::Sm80, (13, 0), &options());
        std::thread::scope(|s| {
            for _ in 0..8 {
                s.spawn(|| {
                    for _ in 0..20 {
                        cache.put(&key, &kernel()).expect("put");
                        assert_eq!(cache.get(&key), Some(kernel()));
                    }
                });
            }
        });
        assert_eq!(std::fs::read_dir(cache.dir()).expect("list").count(), 1);
    }

    #[test]
    fn open_fails_with_the_path_when_the_dir_cannot_be_made() {
        let dir = tempfile::tempdir().expect("temp dir");
        let file = dir.path().join("a-file");
        std::fs::write(&file, b"x").expect("write");
        let err = CubinCache::open(file.join("cache")).unwrap_err();
        assert!(matches!(err, Error::Cache { .. }), "{err}");
        assert!(err.to_string().contains("a-file"), "{err}");
    }
}
