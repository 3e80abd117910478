//! Kernel configurations: each kernel's levers as a typed struct, rendered to `-D` defines by
//! one function (`KernelSpec::defines`), checked by one `validate()` that mirrors the kernel's
//! `static_assert`s, and named by one function (`KernelSpec::name`).

use crate::arch::Arch;
use crate::problem::Dtype;
use std::fmt;

/// Which kernel family (`--impl`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Impl {
    /// Plain float32-accumulate kernel, independent of the fast paths.
    Reference,
    /// FlashAttention-2 class: `mma.sync`, `ldmatrix`, `cp.async`; sm_80+.
    Mma,
}

impl Impl {
    pub const ALL: [Impl; 2] = [Impl::Reference, Impl::Mma];

    pub fn name(self) -> &'static str {
        match self {
            Impl::Reference => "reference",
            Impl::Mma => "mma",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Impl::ALL.into_iter().find(|i| i.name() == s.to_ascii_lowercase())
    }

    pub fn describe(self) -> &'static str {
        match self {
            Impl::Reference => "float32-accumulate kernel, deliberately simple; GPU oracle for large shapes",
            Impl::Mma => "FlashAttention-2 style: mma.sync m16n8k16, ldmatrix, cp.async pipeline (sm_80+)",
        }
    }

    /// Head dims the kernel is instantiated for.
    pub fn head_dims(self) -> &'static [usize] {
        match self {
            Impl::Reference => &[64, 128, 256],
            Impl::Mma => &[64, 128, 256],
        }
    }

    /// Architectures the kernel compiles for.
    pub fn archs(self) -> &'static [Arch] {
        &Arch::ALL
    }
}

impl fmt::Display for Impl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Levers of the `reference` kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ReferenceConfig {
    /// Threads per block; each block computes one query row.
    pub threads: u32,
}

/// Levers of the `mma` kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MmaConfig {
    /// Query rows per block; one warp owns 16 rows, so warps = block_m / 16.
    pub block_m: u32,
    /// Keys per main-loop iteration.
    pub block_n: u32,
    /// K/V shared-memory ring depth (`cp.async` groups in flight + 1).
    pub stages: u32,
    /// Keep the warp's Q fragments in registers for the whole loop (else re-read with
    /// `ldmatrix` every iteration: fewer registers, more shared-memory traffic).
    pub q_in_regs: bool,
}

/// Rows of one `mma.sync` tile: each warp owns this many query rows.
pub const MMA_ROWS_PER_WARP: u32 = 16;
/// Padding, in elements, added to each shared-memory row so that 8 rows read by one
/// `ldmatrix` fall in different banks (16 bytes shift per row).
pub const SMEM_ROW_PAD: usize = 8;

impl MmaConfig {
    pub const BLOCK_M: [u32; 2] = [64, 128];
    pub const BLOCK_N: [u32; 3] = [32, 64, 128];
    pub const STAGES: [u32; 3] = [1, 2, 3];

    pub fn warps(&self) -> u32 {
        self.block_m / MMA_ROWS_PER_WARP
    }
}

/// A kernel's levers, whichever kernel it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum KernelConfig {
    Reference(ReferenceConfig),
    Mma(MmaConfig),
}

impl KernelConfig {
    pub fn imp(&self) -> Impl {
        match self {
            KernelConfig::Reference(_) => Impl::Reference,
            KernelConfig::Mma(_) => Impl::Mma,
        }
    }

    /// `key=value` pairs, the form `--config` takes and `compile` prints.
    pub fn levers(&self) -> Vec<(&'static str, String)> {
        match self {
            KernelConfig::Reference(c) => vec![("threads", c.threads.to_string())],
            KernelConfig::Mma(c) => vec![
                ("block_m", c.block_m.to_string()),
                ("block_n", c.block_n.to_string()),
                ("stages", c.stages.to_string()),
                ("q_in_regs", u32::from(c.q_in_regs).to_string()),
            ],
        }
    }

    /// Applies `key=value[,key=value]` overrides, e.g. `block_m=64,stages=3`.
    pub fn with_overrides(mut self, text: &str) -> Result<Self, String> {
        for item in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let (key, value) = item.split_once('=').ok_or_else(|| format!("config item '{item}' is not key=value"))?;
            let num: u32 = match value.trim() {
                "true" => 1,
                "false" => 0,
                v => v.parse().map_err(|_| format!("config item '{item}': '{v}' is not a number"))?,
            };
            let key = key.trim();
            match &mut self {
                KernelConfig::Reference(c) => match key {
                    "threads" => c.threads = num,
                    _ => return Err(unknown_lever(key, &self)),
                },
                KernelConfig::Mma(c) => match key {
                    "block_m" => c.block_m = num,
                    "block_n" => c.block_n = num,
                    "stages" => c.stages = num,
                    "q_in_regs" => c.q_in_regs = num != 0,
                    _ => return Err(unknown_lever(key, &self)),
                },
            }
        }
        Ok(self)
    }
}

fn unknown_lever(key: &str, config: &KernelConfig) -> String {
    let known: Vec<&str> = config.levers().iter().map(|(k, _)| *k).collect();
    format!("'{key}' is not a lever of {}; levers: {}", config.imp(), known.join(", "))
}

impl fmt::Display for KernelConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self.levers().into_iter().map(|(k, v)| format!("{k}={v}")).collect();
        f.write_str(&parts.join(","))
    }
}

/// Everything that selects one compiled kernel: levers plus the compile-time problem traits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct KernelSpec {
    pub config: KernelConfig,
    pub dtype: Dtype,
    pub head_dim: usize,
}

impl KernelSpec {
    pub fn imp(&self) -> Impl {
        self.config.imp()
    }

    /// The kernel's symbol name; the only place names are built.
    pub fn name(&self) -> String {
        let mut name = format!("evoattn_{}_{}_d{}", self.imp().name(), self.dtype.name(), self.head_dim);
        for (key, value) in self.config.levers() {
            name.push_str(&format!("_{}{}", short_key(key), value));
        }
        name
    }

    /// Threads per block.
    pub fn threads(&self) -> u32 {
        match self.config {
            KernelConfig::Reference(c) => c.threads,
            KernelConfig::Mma(c) => c.warps() * 32,
        }
    }

    /// Launch grid for a problem: x walks query tiles (or rows), y heads, z batches.
    pub fn grid(&self, shape: &crate::problem::Shape) -> [usize; 3] {
        let rows_per_block = match self.config {
            KernelConfig::Reference(_) => 1,
            KernelConfig::Mma(c) => c.block_m as usize,
        };
        [shape.sq.div_ceil(rows_per_block), shape.h, shape.b]
    }

    /// Dynamic shared memory per block, in bytes.
    pub fn dynamic_smem_bytes(&self) -> usize {
        let elem = self.dtype.size_bytes();
        match self.config {
            // q row (float) + one score per thread (float)
            KernelConfig::Reference(c) => 4 * (self.head_dim + c.threads as usize),
            KernelConfig::Mma(c) => {
                let row = (self.head_dim + SMEM_ROW_PAD) * elem;
                (c.block_m as usize + 2 * (c.stages * c.block_n) as usize) * row
            }
        }
    }

    /// The `-D` defines the kernel source reads; the only place a config becomes source.
    pub fn defines(&self) -> Vec<(String, String)> {
        let mut d = vec![
            ("EVOATTN_KERNEL_NAME".to_string(), self.name()),
            ("EVOATTN_HEAD_DIM".to_string(), self.head_dim.to_string()),
            ("EVOATTN_BF16".to_string(), u32::from(self.dtype == Dtype::Bf16).to_string()),
            ("EVOATTN_THREADS".to_string(), self.threads().to_string()),
        ];
        for (key, value) in self.config.levers() {
            let name = format!("EVOATTN_{}", key.to_ascii_uppercase());
            // A lever may be one of the derived values above (the reference kernel's threads).
            if !d.iter().any(|(n, _)| *n == name) {
                d.push((name, value));
            }
        }
        d
    }

    /// Rejects impossible combinations before compiling; mirrors the kernels' `static_assert`s.
    pub fn validate(&self, arch: Arch) -> Result<(), String> {
        if !self.imp().head_dims().contains(&self.head_dim) {
            return Err(format!(
                "{} supports head dims {:?}, not {}",
                self.imp(),
                self.imp().head_dims(),
                self.head_dim
            ));
        }
        match self.config {
            KernelConfig::Reference(c) => {
                if !(32..=1024).contains(&c.threads) || c.threads % 32 != 0 {
                    return Err(format!("threads={} must be a multiple of 32 in 32..=1024", c.threads));
                }
            }
            KernelConfig::Mma(c) => {
                if !MmaConfig::BLOCK_M.contains(&c.block_m) {
                    return Err(format!("block_m={} must be one of {:?}", c.block_m, MmaConfig::BLOCK_M));
                }
                if !MmaConfig::BLOCK_N.contains(&c.block_n) {
                    return Err(format!("block_n={} must be one of {:?}", c.block_n, MmaConfig::BLOCK_N));
                }
                if !MmaConfig::STAGES.contains(&c.stages) {
                    return Err(format!("stages={} must be one of {:?}", c.stages, MmaConfig::STAGES));
                }
            }
        }
        let smem = self.dynamic_smem_bytes();
        if smem > arch.max_smem_per_block() {
            return Err(format!(
                "needs {smem} bytes of shared memory, over {arch}'s {} per block",
                arch.max_smem_per_block()
            ));
        }
        Ok(())
    }

    /// Every lever combination of `imp` (valid or not) for one dtype and head dim: the
    /// search space the tuner and the compile test walk.
    pub fn space(imp: Impl, dtype: Dtype, head_dim: usize) -> Vec<KernelSpec> {
        let configs: Vec<KernelConfig> = match imp {
            Impl::Reference => vec![KernelConfig::Reference(crate::defaults::REFERENCE)],
            Impl::Mma => {
                let mut v = Vec::new();
                for block_m in MmaConfig::BLOCK_M {
                    for block_n in MmaConfig::BLOCK_N {
                        for stages in MmaConfig::STAGES {
                            for q_in_regs in [true, false] {
                                v.push(KernelConfig::Mma(MmaConfig { block_m, block_n, stages, q_in_regs }));
                            }
                        }
                    }
                }
                v
            }
        };
        configs.into_iter().map(|config| KernelSpec { config, dtype, head_dim }).collect()
    }
}

fn short_key(key: &str) -> &str {
    match key {
        "block_m" => "bm",
        "block_n" => "bn",
        "stages" => "s",
        "q_in_regs" => "qr",
        "threads" => "t",
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mma(block_m: u32, block_n: u32, stages: u32, q_in_regs: bool) -> KernelSpec {
        KernelSpec {
            config: KernelConfig::Mma(MmaConfig { block_m, block_n, stages, q_in_regs }),
            dtype: Dtype::Bf16,
            head_dim: 128,
        }
    }

    #[test]
    fn name_and_defines_render_every_lever() {
        let spec = mma(128, 64, 2, true);
        assert_eq!(spec.name(), "evoattn_mma_bf16_d128_bm128_bn64_s2_qr1");
        let defines = spec.defines();
        let get = |k: &str| defines.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
        assert_eq!(get("EVOATTN_KERNEL_NAME").unwrap(), spec.name());
        assert_eq!(get("EVOATTN_BF16").unwrap(), "1");
        assert_eq!(get("EVOATTN_BLOCK_N").unwrap(), "64");
        assert_eq!(get("EVOATTN_THREADS").unwrap(), "256");
        assert_eq!(get("EVOATTN_Q_IN_REGS").unwrap(), "1");
    }

    #[test]
    fn smem_accounts_for_padding_and_stages() {
        // (128 Q rows + 2 tensors * 2 stages * 64 rows) * (128 + 8) * 2 bytes
        assert_eq!(mma(128, 64, 2, true).dynamic_smem_bytes(), (128 + 256) * 136 * 2);
        // fits an H100 (227 KiB) but not an L4 (99 KiB)
        assert!(mma(128, 64, 2, true).validate(Arch::Sm90a).is_ok());
        let err = mma(128, 64, 2, true).validate(Arch::Sm89).unwrap_err();
        assert!(err.contains("shared memory"), "{err}");
    }

    #[test]
    fn validate_rejects_values_outside_the_space() {
        assert!(mma(96, 64, 2, true).validate(Arch::Sm90a).unwrap_err().contains("block_m"));
        assert!(mma(64, 48, 2, true).validate(Arch::Sm90a).unwrap_err().contains("block_n"));
        assert!(mma(64, 64, 4, true).validate(Arch::Sm90a).unwrap_err().contains("stages"));
        let mut spec = mma(64, 64, 2, true);
        spec.head_dim = 96;
        assert!(spec.validate(Arch::Sm90a).unwrap_err().contains("head dims"));
    }

    #[test]
    fn overrides_change_one_lever_and_reject_unknown_ones() {
        let base = mma(128, 64, 2, true).config;
        let changed = base.with_overrides("stages=3, q_in_regs=false").unwrap();
        assert_eq!(changed, KernelConfig::Mma(MmaConfig { block_m: 128, block_n: 64, stages: 3, q_in_regs: false }));
        assert!(base.with_overrides("warps=4").unwrap_err().contains("levers: block_m"));
        assert!(base.with_overrides("stages").is_err());
        assert_eq!(changed.to_string(), "block_m=128,block_n=64,stages=3,q_in_regs=0");
    }

    #[test]
    fn space_covers_every_combination() {
        assert_eq!(KernelSpec::space(Impl::Mma, Dtype::F16, 64).len(), 2 * 3 * 3 * 2);
        assert_eq!(KernelSpec::space(Impl::Reference, Dtype::F16, 64).len(), 1);
    }
}
