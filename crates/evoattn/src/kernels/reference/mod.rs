//! `reference`: the plain float32-accumulate kernel (`reference.cu`), one query row a block;
//! the GPU oracle for problems too large for the float64 CPU reference.

use crate::arch::Arch;
use crate::config::lever::{num, Family, Lever};
use crate::config::Impl;
use crate::kernels::SourceFile;
use crate::problem::{Dtype, Shape};

/// Levers of the `reference` kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ReferenceConfig {
    /// Threads per block; each block computes one query row.
    pub threads: u32,
}

/// 128 threads: enough loads in flight per block, at most two output columns a thread.
/// Evidence: docs/decisions/reference.md#threads
pub const DEFAULT: ReferenceConfig = ReferenceConfig { threads: 128 };

impl Family for ReferenceConfig {
    const IMPL: Impl = Impl::Reference;
    const ABOUT: &'static str = "float32-accumulate kernel, deliberately simple; GPU oracle for large shapes";
    const HEAD_DIMS: &'static [usize] = &[64, 128, 256];
    const ARCHS: &'static [Arch] = &Arch::ALL;
    /// E4M3 too: the GPU oracle of FP8 problems too large for the CPU.
    const DTYPES: &'static [Dtype] = &Dtype::ALL;
    const SOURCE: SourceFile = SourceFile { name: "reference.cu", text: include_str!("reference.cu") };

    fn default_for(_arch: Arch, _dtype: Dtype, _head_dim: usize) -> Self {
        DEFAULT
    }

    fn into_config(self) -> crate::config::KernelConfig {
        crate::config::KernelConfig::Reference(self)
    }
    const LEVERS: &'static [Lever<Self>] =
        &[num!("threads", "t", threads, &[DEFAULT.threads], "threads per block (one query row a block)")];

    fn threads(&self) -> u32 {
        self.threads
    }

    fn grid(&self, shape: &Shape, _splits: usize, _sm_count: u32) -> [usize; 3] {
        [shape.sq, shape.h, shape.b]
    }

    /// The query row and one score per thread, in float32.
    fn dynamic_smem_bytes(&self, _dtype: Dtype, head_dim: usize) -> usize {
        4 * (head_dim + self.threads as usize)
    }

    fn validate(&self, _dtype: Dtype, _head_dim: usize, _arch: Arch) -> Result<(), String> {
        if !(32..=1024).contains(&self.threads) || !self.threads.is_multiple_of(32) {
            return Err(format!("threads={} must be a multiple of 32 in 32..=1024", self.threads));
        }
        Ok(())
    }

    fn space(_head_dim: usize) -> Box<dyn Iterator<Item = Self>> {
        Box::new(std::iter::once(DEFAULT))
    }
}
