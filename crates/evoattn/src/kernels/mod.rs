//! The embedded CUDA sources. Each kernel is one `.cu` that composes stage headers
//! (`.cuh`), in the manner of FlashAttention-3's `hopper/`: main loop, softmax and epilogue
//! apart. NVRTC receives the headers by name, so `#include "x.cuh"` works without a file system.

use crate::config::Impl;

/// One embedded source file.
#[derive(Clone, Copy, Debug)]
pub struct SourceFile {
    pub name: &'static str,
    pub text: &'static str,
}

macro_rules! source {
    ($name:literal) => {
        SourceFile { name: $name, text: include_str!($name) }
    };
}

/// Headers any kernel may include.
pub const HEADERS: &[SourceFile] = &[
    source!("common.cuh"),
    source!("ptx.cuh"),
    source!("row_state.cuh"),
    source!("mma_mainloop.cuh"),
    source!("mma_softmax.cuh"),
    source!("mma_epilogue.cuh"),
    source!("splitkv_combine.cuh"),
    source!("ptx_sm90.cuh"),
    source!("wgmma_mainloop.cuh"),
    source!("wgmma_softmax.cuh"),
    source!("wgmma_epilogue.cuh"),
];

/// The stream-holding kernel of the timer (`runtime::device::Gpu::hold`).
pub const HOLD: SourceFile = source!("hold.cu");
/// Its symbol.
pub const HOLD_KERNEL: &str = "evoattn_hold";

/// The translation unit of a kernel family.
pub fn main_source(imp: Impl) -> SourceFile {
    match imp {
        Impl::Reference => source!("reference.cu"),
        Impl::Mma => source!("mma.cu"),
        Impl::Wgmma => source!("wgmma.cu"),
        Impl::Splitkv => source!("splitkv.cu"),
    }
}

/// FNV-1a over the main source and every header: changes whenever any kernel text changes.
pub fn source_hash(imp: Impl) -> u64 {
    let mut hash = FNV_OFFSET;
    for file in std::iter::once(main_source(imp)).chain(HEADERS.iter().copied()) {
        hash = fnv1a(hash, file.name.as_bytes());
        hash = fnv1a(hash, file.text.as_bytes());
    }
    hash
}

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

/// 64-bit FNV-1a, continuing from `hash`.
pub fn fnv1a(mut hash: u64, bytes: &[u8]) -> u64 {
    for &b in bytes {
        hash ^= u64::from(b);
        hash = hash.wrapping_mul(FNV_PRIME);
    }
    hash
}

/// FNV-1a of `bytes` from the standard offset basis.
pub fn fnv1a_hash(bytes: &[u8]) -> u64 {
    fnv1a(FNV_OFFSET, bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv1a_matches_published_vectors() {
        assert_eq!(fnv1a_hash(b""), 0xcbf29ce484222325);
        assert_eq!(fnv1a_hash(b"a"), 0xaf63dc4c8601ec8c);
        assert_eq!(fnv1a_hash(b"foobar"), 0x85944171f73967e8);
    }

    #[test]
    fn every_include_is_embedded() {
        for imp in Impl::ALL {
            let main = main_source(imp);
            for file in std::iter::once(main).chain(HEADERS.iter().copied()) {
                for line in file.text.lines().filter(|l| l.trim_start().starts_with("#include")) {
                    let name =
                        line.split('"').nth(1).unwrap_or_else(|| panic!("{}: use quoted includes: {line}", file.name));
                    assert!(
                        HEADERS.iter().any(|h| h.name == name),
                        "{} includes {name}, which is not embedded",
                        file.name
                    );
                }
            }
        }
    }
}
