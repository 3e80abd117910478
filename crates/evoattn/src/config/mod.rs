//! Kernel configurations, whichever family: `KernelConfig` holds one family's typed levers
//! (each family's struct, lever table and rules live in its folder under `kernels/`), and
//! `KernelSpec` adds the dtype and head dim. Names, defines, validation, geometry and the
//! tuning space dispatch to the family; what every family shares is written here once.

pub mod lever;

use crate::arch::Arch;
use crate::problem::Dtype;
use lever::Family;
use std::fmt;

pub use crate::kernels::bwd::BwdConfig;
pub use crate::kernels::library::{
    CublasConfig, HybridPvConfig, HybridQkConfig, LibraryPath, OurGemm, Provider, Scores,
};
pub use crate::kernels::mma::{MmaConfig, MMA_K, MMA_ROWS_PER_WARP, SMEM_ROW_PAD};
pub use crate::kernels::mma8::Mma8Config;
pub use crate::kernels::reference::ReferenceConfig;
pub use crate::kernels::resident::ResidentConfig;
pub use crate::kernels::splitkv::{SplitkvCombine, SplitkvConfig};
pub use crate::kernels::wgmma::{
    OStaging, Pipeline, Schedule, WgmmaConfig, EXP2_POLY_MAX_HEAD_DIM, HALF_LAST_BLOCK_N_MULTIPLE,
    MAX_REGISTERS_PER_THREAD, MULTICAST_CLUSTER_BLOCKS, REGISTERS_PER_SM, ROWSUM_MMA_HEAD_DIM, TRACE_BLOCKS,
    TRACE_EVENTS, WGMMA_OPERAND_REGISTERS, WGMMA_ROWS_PER_WARPGROUP,
};

/// `$body` with `$c` bound to the family config inside a `KernelConfig` (each family's type).
macro_rules! each_family {
    ($config:expr, $c:ident => $body:expr) => {
        match $config {
            KernelConfig::Reference($c) => $body,
            KernelConfig::Mma($c) => $body,
            KernelConfig::Wgmma($c) => $body,
            KernelConfig::Splitkv($c) => $body,
            KernelConfig::Resident($c) => $body,
            KernelConfig::Mma8($c) => $body,
            KernelConfig::Cublas($c) => $body,
            KernelConfig::HybridQk($c) => $body,
            KernelConfig::HybridPv($c) => $body,
            KernelConfig::MmaBwd($c) => $body,
        }
    };
}

/// `$body` with `$C` the config type of family `$imp`: the one place an `Impl` names its type.
macro_rules! family_type {
    ($imp:expr, $C:ident => $body:expr) => {
        match $imp {
            Impl::Reference => {
                type $C = ReferenceConfig;
                $body
            }
            Impl::Mma => {
                type $C = MmaConfig;
                $body
            }
            Impl::Wgmma => {
                type $C = WgmmaConfig;
                $body
            }
            Impl::Splitkv => {
                type $C = SplitkvConfig;
                $body
            }
            Impl::Resident => {
                type $C = ResidentConfig;
                $body
            }
            Impl::Mma8 => {
                type $C = Mma8Config;
                $body
            }
            Impl::Cublas => {
                type $C = CublasConfig;
                $body
            }
            Impl::HybridQk => {
                type $C = HybridQkConfig;
                $body
            }
            Impl::HybridPv => {
                type $C = HybridPvConfig;
                $body
            }
            Impl::MmaBwd => {
                type $C = BwdConfig;
                $body
            }
        }
    };
}

/// Which pass of attention a kernel computes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Pass {
    /// O (and LSE) from Q, K, V.
    Forward,
    /// dQ, dK, dV from Q, K, V, O, LSE and dO.
    Backward,
}

impl Pass {
    pub fn name(self) -> &'static str {
        match self {
            Pass::Forward => "forward",
            Pass::Backward => "backward",
        }
    }
}

/// Which kernel family (`--impl`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Impl {
    /// Plain float32-accumulate kernel, independent of the fast paths.
    Reference,
    /// FlashAttention-2 class: `mma.sync`, `ldmatrix`, `cp.async`; sm_80+.
    Mma,
    /// Hopper: `wgmma` from 128-byte-swizzled shared memory; sm_90a only.
    Wgmma,
    /// Keys split across blocks plus a combine step, on the `mma` main loop; sm_80+.
    Splitkv,
    /// Short keys on Hopper: K and V resident in shared memory; sm_90a only.
    Resident,
    /// FP8 E4M3 inputs on `mma.sync` m16n8k32; sm_89+.
    Mma8,
    /// Unfused: cuBLASLt GEMMs around materialised scores and a row kernel (#38); any arch.
    Cublas,
    /// As `Cublas`, with our GEMM for P·V (the founding documents' HYBRID_QKT).
    HybridQk,
    /// As `Cublas`, with our GEMM for Q·Kᵀ (their HYBRID_PV).
    HybridPv,
    /// The backward pass (dQ, dK, dV) on `mma.sync`; sm_80+.
    MmaBwd,
}

impl Impl {
    /// Every family: the forward ones, then the backward pass's.
    pub const ALL: [Impl; 10] = {
        let mut all = [Impl::MmaBwd; 10];
        let mut i = 0;
        while i < Impl::FORWARD.len() {
            all[i] = Impl::FORWARD[i];
            i += 1;
        }
        all
    };
    /// The forward families: what `--impl` and the planner choose among for a forward pass.
    pub const FORWARD: [Impl; 9] = [
        Impl::Reference,
        Impl::Mma,
        Impl::Wgmma,
        Impl::Splitkv,
        Impl::Resident,
        Impl::Mma8,
        Impl::Cublas,
        Impl::HybridQk,
        Impl::HybridPv,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Impl::Reference => "reference",
            Impl::Mma => "mma",
            Impl::Wgmma => "wgmma",
            Impl::Splitkv => "splitkv",
            Impl::Resident => "resident",
            Impl::Mma8 => "mma8",
            Impl::Cublas => "cublas",
            Impl::HybridQk => "hybrid-qk",
            Impl::HybridPv => "hybrid-pv",
            Impl::MmaBwd => "mma-bwd",
        }
    }

    /// The name as kernel symbols carry it (`hybrid-qk` -> `hybrid_qk`).
    pub fn symbol(self) -> String {
        self.name().replace('-', "_")
    }

    /// Which pass the family's kernels compute.
    pub fn pass(self) -> Pass {
        match self {
            Impl::MmaBwd => Pass::Backward,
            _ => Pass::Forward,
        }
    }

    /// The library paths (#38): materialised scores, cuBLASLt, `runtime::library`.
    pub fn is_library(self) -> bool {
        matches!(self, Impl::Cublas | Impl::HybridQk | Impl::HybridPv)
    }

    /// The family whose kernels' names continue with `text` (what follows `evoattn_`): the
    /// longest symbol followed by `_`, since `mma_bwd_…` is not an `mma` kernel.
    pub fn of_symbol(text: &str) -> Option<Self> {
        Impl::ALL
            .into_iter()
            .filter(|i| text.strip_prefix(&i.symbol()).is_some_and(|r| r.starts_with('_')))
            .max_by_key(|i| i.symbol().len())
    }

    pub fn parse(s: &str) -> Option<Self> {
        Impl::ALL.into_iter().find(|i| i.name() == s.to_ascii_lowercase())
    }

    pub fn describe(self) -> &'static str {
        family_type!(self, C => C::ABOUT)
    }

    /// Head dims the kernel is instantiated for.
    pub fn head_dims(self) -> &'static [usize] {
        family_type!(self, C => C::HEAD_DIMS)
    }

    /// Each lever's name (as `--config` takes it) and what it does, in the family's table order,
    /// each axis followed by its values (`pipeline=pingpong`).
    pub fn lever_docs(self) -> Vec<(String, &'static str)> {
        family_type!(self, C => C::LEVERS.iter().flat_map(|l| l.docs()).collect())
    }

    /// The short key of each lever that a short kernel name ([`KernelConfig::short_name`])
    /// writes by its key (`bn` of `bn=64`): numbers and switches; named values go by the lever's
    /// name.
    pub fn short_keys(self) -> Vec<(&'static str, &'static str)> {
        family_type!(self, C => C::LEVERS.iter().filter_map(|l| l.short_key().map(|k| (l.name, k))).collect())
    }

    /// Each tuning lever's name and the values the tuner may give it (as `--config` writes
    /// them), in the family's table order.
    pub fn tuning_levers(self) -> Vec<(&'static str, Vec<String>)> {
        family_type!(self, C => C::LEVERS
            .iter()
            .map(|l| (l.name, l.tuning_values()))
            .filter(|(_, v)| !v.is_empty())
            .collect())
    }

    /// Architectures the kernel compiles for.
    pub fn archs(self) -> &'static [Arch] {
        family_type!(self, C => C::ARCHS)
    }

    /// Input dtypes the kernel is instantiated for.
    pub fn dtypes(self) -> &'static [Dtype] {
        family_type!(self, C => C::DTYPES)
    }

    /// The family's default for inputs of `dtype` at a head dim on an arch.
    pub fn default_config(self, arch: Arch, dtype: Dtype, head_dim: usize) -> KernelConfig {
        family_type!(self, C => C::default_for(arch, dtype, head_dim).into_config())
    }

    /// The family's default adapted to `problem` on a GPU with `sm_count` SMs.
    pub fn config_for_problem(self, arch: Arch, problem: &crate::problem::Problem, sm_count: u32) -> KernelConfig {
        family_type!(self, C => C::for_problem(arch, problem, sm_count).into_config())
    }

    /// The family's translation unit.
    pub fn source(self) -> crate::kernels::SourceFile {
        family_type!(self, C => C::SOURCE)
    }
}

impl fmt::Display for Impl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// How a kernel fills its shared-memory K/V tiles (`wgmma`: and its Q tile).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Loads {
    /// Every thread issues 16-byte `cp.async` copies (`wgmma`: step 1).
    CpAsync,
    /// One thread issues `cp.async.bulk.tensor` (TMA) boxes into 128-byte-swizzled tiles that
    /// complete on per-stage mbarriers; the kernel takes tensor maps besides its `AttnParams`
    /// (`wgmma`: Q, K and V; `splitkv`: K and V). sm_90 and later.
    Tma,
}

impl Loads {
    pub const ALL: [Loads; 2] = [Loads::CpAsync, Loads::Tma];
    pub(crate) const NAMES: [&'static str; 2] = ["cp_async", "tma"];

    pub fn name(self) -> &'static str {
        Self::NAMES[self as usize]
    }

    pub fn parse(s: &str) -> Option<Self> {
        Loads::ALL.into_iter().find(|l| l.name() == s.to_ascii_lowercase())
    }
}

/// Threads of one warp.
pub const WARP_THREADS: u32 = 32;
/// Threads of one warpgroup (4 consecutive warps).
pub const WARPGROUP_THREADS: u32 = 4 * WARP_THREADS;
/// Alignment of the 128-byte swizzle pattern (8 rows of 128 bytes) that TMA writes and `wgmma`
/// reads; the kernel rounds its dynamic shared memory base up to it, so the host reserves it.
pub const SWIZZLE_ATOM_BYTES: usize = 1024;
/// Elements of one 128-byte swizzled row of 16-bit elements: a tile is D / this column blocks.
pub const SWIZZLE_ROW_ELEMS: u32 = 64;
/// Bytes of one swizzled row at most (the 128-byte swizzle); a shorter head-dim row (E4M3 at
/// hd64: 64 bytes) is one row of the 64-byte swizzle.
pub const SWIZZLE_ROW_BYTES: usize = 128;

/// Box rows of a kernel's TMA tensor maps, which it takes in the order Q, K, V, O (those it has).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TensorMapRows {
    /// Q's box, `None` when Q is not loaded by TMA (`splitkv` packs the query heads of a KV head
    /// into its rows).
    pub q: Option<u32>,
    /// K's and V's box.
    pub kv: u32,
    /// O's box when O is stored by TMA (`wgmma`'s staged `o_staging`): one consumer warpgroup's rows.
    pub o: Option<u32>,
}

/// A kernel's levers, whichever kernel it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum KernelConfig {
    Reference(ReferenceConfig),
    Mma(MmaConfig),
    Wgmma(WgmmaConfig),
    Splitkv(SplitkvConfig),
    Resident(ResidentConfig),
    Mma8(Mma8Config),
    Cublas(CublasConfig),
    HybridQk(HybridQkConfig),
    HybridPv(HybridPvConfig),
    MmaBwd(BwdConfig),
}

impl KernelConfig {
    pub fn imp(&self) -> Impl {
        match self {
            KernelConfig::Reference(_) => Impl::Reference,
            KernelConfig::Mma(_) => Impl::Mma,
            KernelConfig::Wgmma(_) => Impl::Wgmma,
            KernelConfig::Splitkv(_) => Impl::Splitkv,
            KernelConfig::Resident(_) => Impl::Resident,
            KernelConfig::Mma8(_) => Impl::Mma8,
            KernelConfig::Cublas(_) => Impl::Cublas,
            KernelConfig::HybridQk(_) => Impl::HybridQk,
            KernelConfig::HybridPv(_) => Impl::HybridPv,
            KernelConfig::MmaBwd(_) => Impl::MmaBwd,
        }
    }

    /// The dtype the kernel rounds the scores to before the softmax, if it rounds them at all
    /// (the fused kernels keep them in fp32 registers).
    pub fn rounds_scores_to(&self, dtype: Dtype) -> Option<Dtype> {
        self.library().and_then(|path| (path.scores == Scores::Input).then_some(dtype))
    }

    /// What a library path's config says of its steps (what S holds, which product our GEMM
    /// computes, which library the others); `None` for the fused kernels.
    pub fn library(&self) -> Option<LibraryPath> {
        match self {
            KernelConfig::Cublas(c) => Some(c.path()),
            KernelConfig::HybridQk(c) => Some(c.path()),
            KernelConfig::HybridPv(c) => Some(c.path()),
            _ => None,
        }
    }

    /// `key=value` pairs, the form `--config` takes and `compile` prints.
    pub fn levers(&self) -> Vec<(&'static str, String)> {
        each_family!(self, c => lever::levers(c))
    }

    /// Applies `key=value[,key=value]` overrides, e.g. `block_m=64,stages=3`.
    pub fn with_overrides(self, text: &str) -> Result<Self, String> {
        Ok(each_family!(self, c => lever::with_overrides(c, text)?.into_config()))
    }
}

impl KernelConfig {
    /// A name for people: the family, then only the levers that differ from `default` (the
    /// family's default for the problem at hand), e.g. `wgmma` or `wgmma bn=64 pipeline=pingpong`.
    /// Numbers and switches go by their short key (the kernel name's), named values by the
    /// lever's name. Against a default of another family every lever is listed.
    pub fn short_name(&self, default: &KernelConfig) -> String {
        let changed = match (self, default) {
            (KernelConfig::Reference(c), KernelConfig::Reference(d)) => lever::changed(c, d),
            (KernelConfig::Mma(c), KernelConfig::Mma(d)) => lever::changed(c, d),
            (KernelConfig::Wgmma(c), KernelConfig::Wgmma(d)) => lever::changed(c, d),
            (KernelConfig::Splitkv(c), KernelConfig::Splitkv(d)) => lever::changed(c, d),
            (KernelConfig::Resident(c), KernelConfig::Resident(d)) => lever::changed(c, d),
            (KernelConfig::Mma8(c), KernelConfig::Mma8(d)) => lever::changed(c, d),
            (KernelConfig::Cublas(c), KernelConfig::Cublas(d)) => lever::changed(c, d),
            (KernelConfig::HybridQk(c), KernelConfig::HybridQk(d)) => lever::changed(c, d),
            (KernelConfig::HybridPv(c), KernelConfig::HybridPv(d)) => lever::changed(c, d),
            (KernelConfig::MmaBwd(c), KernelConfig::MmaBwd(d)) => lever::changed(c, d),
            _ => each_family!(self, c => lever::short_items(c)),
        };
        std::iter::once(self.imp().name().to_string()).chain(changed).collect::<Vec<_>>().join(" ")
    }
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
        let levers = each_family!(&self.config, c => lever::name_suffix(c));
        format!("evoattn_{}_{}_d{}{levers}", self.imp().symbol(), self.dtype.name(), self.head_dim)
    }

    /// The spec whose [`KernelSpec::name`] is `name`, read back through the families' lever
    /// tables (what a bench record or the history keeps of a kernel is its name); `None` for
    /// any other text, a peer's name for one.
    pub fn from_name(name: &str) -> Option<KernelSpec> {
        let rest = name.strip_prefix("evoattn_")?;
        let imp = Impl::of_symbol(rest)?;
        let rest = &rest[imp.symbol().len() + 1..];
        let dtype =
            Dtype::ALL.into_iter().find(|d| rest.strip_prefix(d.name()).is_some_and(|r| r.starts_with("_d")))?;
        let rest = &rest[dtype.name().len() + 2..];
        let digits = rest.find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len());
        let head_dim: usize = rest[..digits].parse().ok()?;
        let levers = &rest[digits..];
        let config = family_type!(imp, C => {
            let base = C::default_for(*C::ARCHS.last()?, dtype, head_dim);
            lever::from_name_suffix(base, levers)?.into_config()
        });
        let spec = KernelSpec { config, dtype, head_dim };
        (spec.name() == name).then_some(spec)
    }

    /// The symbols of a backward module's dot and dQ-conversion kernels (kernels/bwd/bwd.cu),
    /// derived from [`KernelSpec::name`]; `None` for every forward kernel.
    pub fn backward_kernel_names(&self) -> Option<[String; 2]> {
        match self.config {
            KernelConfig::MmaBwd(_) => Some([format!("{}_dot", self.name()), format!("{}_dq", self.name())]),
            _ => None,
        }
    }

    /// The symbol of the second kernel of a `splitkv` variant that merges in a separate
    /// launch (`combine=kernel`), derived from [`KernelSpec::name`]; `None` for every other.
    pub fn combine_kernel_name(&self) -> Option<String> {
        match self.config {
            KernelConfig::Splitkv(c) if c.combine == SplitkvCombine::Kernel => Some(format!("{}_combine", self.name())),
            _ => None,
        }
    }

    /// The symbol of the V transpose kernel that runs before an E4M3 `wgmma` kernel
    /// (kernels/wgmma/wgmma_vt.cuh: FP8 `wgmma` reads V transposed), derived from
    /// [`KernelSpec::name`] (with `vt_given`, the permute of a V given transposed); `None` for
    /// every other, and with `vt_producer` (the kernel does either itself).
    pub fn transpose_kernel_name(&self) -> Option<String> {
        match self.config {
            KernelConfig::Wgmma(c) if self.dtype.is_fp8() && !c.vt_producer => Some(format!("{}_vt", self.name())),
            _ => None,
        }
    }

    /// The symbol of our GEMM in a hybrid's module (kernels/library/gemm.cuh), derived from
    /// [`KernelSpec::name`]; `None` for every other kernel.
    pub fn gemm_kernel_name(&self) -> Option<String> {
        match self.config.library() {
            Some(LibraryPath { ours: OurGemm::Pv | OurGemm::Qk, .. }) => Some(format!("{}_gemm", self.name())),
            _ => None,
        }
    }

    /// Box rows of the TMA tensor maps the kernel takes after its other parameters; `None`
    /// for kernels that take no tensor maps.
    pub fn tensor_map_rows(&self) -> Option<TensorMapRows> {
        each_family!(&self.config, c => c.tensor_map_rows())
    }

    /// Threads per block.
    pub fn threads(&self) -> u32 {
        each_family!(&self.config, c => Family::threads(c))
    }

    /// Launch grid for a problem: x walks query tiles (or rows), y heads, z batches. For
    /// `splitkv`, x walks (packed-row tile, split) pairs for `splits` splits and y KV heads;
    /// other kernels take `splits` = 1. A persistent kernel takes one block per SM
    /// (`sm_count`), or one per tile when there are fewer tiles, in x alone.
    pub fn grid(&self, shape: &crate::problem::Shape, splits: usize, sm_count: u32) -> [usize; 3] {
        each_family!(&self.config, c => c.grid(shape, splits, sm_count))
    }

    /// The kernel reads V given keys-contiguous (see [`Family::reads_v_keys_contiguous`]).
    pub fn reads_v_keys_contiguous(&self) -> bool {
        each_family!(&self.config, c => c.reads_v_keys_contiguous())
    }

    /// What a launch on `problem` needs beside its grid (see [`Family::launch_needs`]), after
    /// the one rule every family shares: the kernel reads V the way the problem holds it.
    pub fn launch_needs(
        &self,
        problem: &crate::problem::Problem,
        sm_count: u32,
        resident_per_sm: u32,
    ) -> Result<lever::LaunchNeeds, String> {
        match (problem.v_keys_contiguous(), self.reads_v_keys_contiguous()) {
            (true, false) if self.imp() == Impl::Wgmma && self.dtype.is_fp8() => {
                return Err("V is given keys-contiguous ([B, Hkv, D, Sk]): set vt_given=1 (the planner does)".into());
            }
            (true, false) => {
                return Err(format!(
                    "V is given keys-contiguous ([B, Hkv, D, Sk]), which only wgmma reads, with E4M3 inputs; {} {} \
                     reads V's rows (head dim contiguous)",
                    self.imp(),
                    self.dtype
                ));
            }
            (false, true) => {
                return Err("vt_given=1 reads V given keys-contiguous ([B, Hkv, D, Sk]); this V's head dim is \
                            contiguous: set vt_given=0"
                    .into());
            }
            _ => {}
        }
        each_family!(&self.config, c => c.launch_needs(problem, sm_count, resident_per_sm))
    }

    /// Dynamic shared memory per block, in bytes.
    pub fn dynamic_smem_bytes(&self) -> usize {
        each_family!(&self.config, c => c.dynamic_smem_bytes(self.dtype, self.head_dim))
    }

    /// The `-D` defines the kernel source reads; the only place a config becomes source.
    pub fn defines(&self) -> Vec<(String, String)> {
        let mut d = vec![
            ("EVOATTN_KERNEL_NAME".to_string(), self.name()),
            ("EVOATTN_HEAD_DIM".to_string(), self.head_dim.to_string()),
            // O's 16-bit type (the inputs' for 16-bit dtypes).
            ("EVOATTN_BF16".to_string(), u32::from(self.dtype.output() == Dtype::Bf16).to_string()),
            ("EVOATTN_THREADS".to_string(), self.threads().to_string()),
        ];
        // E4M3 inputs (absent for 16-bit kernels, whose sources and CUBINs stay as they were).
        if self.dtype.is_fp8() {
            d.push(("EVOATTN_FP8".to_string(), "1".to_string()));
        }
        for (name, value) in each_family!(&self.config, c => lever::defines(c)) {
            // A lever may be one of the derived values above (the reference kernel's threads).
            if !d.iter().any(|(n, _)| *n == name) {
                d.push((name, value));
            }
        }
        if let Some(name) = self.combine_kernel_name() {
            d.push(("EVOATTN_COMBINE_NAME".to_string(), name));
        }
        if let Some(name) = self.transpose_kernel_name() {
            d.push(("EVOATTN_VT_NAME".to_string(), name));
        }
        if let Some(name) = self.gemm_kernel_name() {
            d.push(("EVOATTN_GEMM_NAME".to_string(), name));
        }
        if let Some([dot, dq]) = self.backward_kernel_names() {
            d.push(("EVOATTN_BWD_DOT_NAME".to_string(), dot));
            d.push(("EVOATTN_BWD_DQ_NAME".to_string(), dq));
        }
        d.extend(each_family!(&self.config, c => c.extra_defines(self.dtype, self.head_dim)));
        d
    }

    /// Rejects impossible combinations before compiling; mirrors the kernels' `static_assert`s.
    pub fn validate(&self, arch: Arch) -> Result<(), String> {
        if !self.imp().archs().contains(&arch) {
            let archs: Vec<&str> = self.imp().archs().iter().map(|a| a.name()).collect();
            return Err(format!("{} runs on {}, not {arch}", self.imp(), archs.join(", ")));
        }
        if !self.imp().dtypes().contains(&self.dtype) {
            let dtypes: Vec<&str> = self.imp().dtypes().iter().map(|d| d.name()).collect();
            return Err(format!("{} takes {} inputs, not {}", self.imp(), dtypes.join(" or "), self.dtype));
        }
        if !self.imp().head_dims().contains(&self.head_dim) {
            return Err(format!(
                "{} supports head dims {:?}, not {}",
                self.imp(),
                self.imp().head_dims(),
                self.head_dim
            ));
        }
        each_family!(&self.config, c => c.validate(self.dtype, self.head_dim, arch))?;
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
    /// search space the tuner and the compile test walk, produced lazily (wgmma's has millions).
    pub fn space(imp: Impl, dtype: Dtype, head_dim: usize) -> impl Iterator<Item = KernelSpec> {
        let configs: Box<dyn Iterator<Item = KernelConfig>> =
            family_type!(imp, C => Box::new(C::space(head_dim).map(Family::into_config)));
        configs.map(move |config| KernelSpec { config, dtype, head_dim })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The README's lever table of `imp`: (lever, what it does) of each row.
    fn readme_levers(imp: Impl) -> Vec<(String, String)> {
        let readme = include_str!("../../../../README.md");
        let section = &readme[readme.find("### Levers").expect("a Levers section")..];
        let table = &section[section.find(&format!("\n`{imp}`\n")).unwrap_or_else(|| panic!("no table for {imp}"))..];
        table
            .lines()
            .skip_while(|l| !l.starts_with("| `"))
            .take_while(|l| l.starts_with("| `"))
            .map(|row| {
                let cells: Vec<&str> = row.split(" | ").collect();
                (cells[0].trim_start_matches("| ").trim_matches('`').to_string(), cells[1].to_string())
            })
            .collect()
    }

    #[test]
    fn the_readme_lists_every_lever_as_its_family_declares_it() {
        for imp in Impl::ALL {
            let declared: Vec<(String, String)> =
                imp.lever_docs().into_iter().map(|(n, a)| (n, a.to_string())).collect();
            assert_eq!(readme_levers(imp), declared, "README's {imp} lever table");
        }
    }

    fn mma(block_m: u32, block_n: u32, stages: u32, q_in_regs: bool) -> KernelSpec {
        KernelSpec {
            config: KernelConfig::Mma(MmaConfig { block_m, block_n, stages, q_in_regs }),
            dtype: Dtype::Bf16,
            head_dim: 128,
        }
    }

    #[test]
    fn names_read_back_into_their_specs() {
        for imp in Impl::ALL {
            for &dtype in imp.dtypes() {
                for &head_dim in imp.head_dims() {
                    // Every default, and a spread of each space (wgmma's has millions).
                    let defaults = imp.archs().iter().map(|&arch| KernelSpec {
                        config: imp.default_config(arch, dtype, head_dim),
                        dtype,
                        head_dim,
                    });
                    let space = KernelSpec::space(imp, dtype, head_dim).step_by(997).take(300);
                    for spec in defaults.chain(space) {
                        assert_eq!(KernelSpec::from_name(&spec.name()), Some(spec), "{}", spec.name());
                    }
                }
            }
        }
        let traced = default_wgmma_with("trace=1", 64);
        assert!(traced.name().ends_with("_tr1"), "{}", traced.name());
        assert_eq!(KernelSpec::from_name(&traced.name()), Some(traced));
        for other in
            ["sdpa-cudnn", "mma", "evoattn_k", "evoattn_mma_f16_d64_bm128", "evoattn_mma_f16_d64_bm128_bn64_s3_qr1x"]
        {
            assert_eq!(KernelSpec::from_name(other), None, "{other}");
        }
        let two = splitkv(64, 64, 2, 0, 128);
        let two = KernelSpec { config: two.config.with_overrides("combine=kernel").unwrap(), ..two };
        assert_eq!(KernelSpec::from_name(&two.combine_kernel_name().unwrap()), None);
    }

    #[test]
    fn short_names_list_the_levers_that_differ_from_the_default() {
        let default = crate::defaults::wgmma(128);
        let config = |text: &str| KernelConfig::Wgmma(default).with_overrides(text).unwrap();
        let d = KernelConfig::Wgmma(default);
        assert_eq!(d.short_name(&d), "wgmma");
        assert_eq!(config("block_n=64,pipeline=overlap").short_name(&d), "wgmma bn=64 pipeline=overlap");
        assert_eq!(config("stages=3,q_in_regs=1,trace=1").short_name(&d), "wgmma s=3 qr=1 tr=1");
        let splitkv = KernelConfig::Splitkv(crate::defaults::splitkv(Arch::Sm90a, 128));
        let cp = splitkv.with_overrides("loads=cp_async,splits=8").unwrap();
        assert_eq!(cp.short_name(&splitkv), "splitkv sp=8 loads=cp_async");
        // Against another family's default: every lever.
        let mma = KernelConfig::Mma(MmaConfig { block_m: 64, block_n: 32, stages: 2, q_in_regs: false });
        assert_eq!(mma.short_name(&d), "mma bm=64 bn=32 s=2 qr=0");
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
        assert_eq!(KernelSpec::space(Impl::Mma, Dtype::F16, 64).count(), 2 * 3 * 3 * 2);
        assert_eq!(KernelSpec::space(Impl::Reference, Dtype::F16, 64).count(), 1);
        let wgmma: Vec<_> = KernelSpec::space(Impl::Wgmma, Dtype::Bf16, 128).collect();
        // block_n, stages, consumers, the three axes (pipeline, schedule, O staging), and the
        // five switches; at hd64 exp2_poly and rowsum_mma too, and no half-tile O staging.
        assert_eq!(wgmma.len(), 6 * 4 * 3 * (5 * 4 * 4) * 2 * 2 * 2 * 2 * 2);
        assert_eq!(
            KernelSpec::space(Impl::Wgmma, Dtype::Bf16, 64).count(),
            6 * 4 * 3 * (5 * 4 * 3) * 4 * 2 * 2 * 2 * 2 * 2 * 2
        );
        let valid: Vec<WgmmaConfig> = wgmma
            .iter()
            .filter(|s| s.validate(Arch::Sm90a).is_ok())
            .map(|s| match s.config {
                KernelConfig::Wgmma(c) => c,
                _ => unreachable!("the wgmma space"),
            })
            .collect();
        // Every pipeline runs on grid blocks, and the persistent schedules on the pipelined
        // consumer only.
        for pipeline in Pipeline::ALL {
            for schedule in Schedule::ALL {
                let runs = valid.iter().any(|c| (c.pipeline, c.schedule) == (pipeline, schedule));
                assert_eq!(runs, schedule == Schedule::Grid || pipeline.overlap(), "{pipeline:?} {schedule:?}");
            }
        }
        // O is staged for TMA stores with every pipeline on TMA loads, none on cp.async.
        for pipeline in Pipeline::ALL {
            let staged = valid.iter().any(|c| c.pipeline == pipeline && c.o_staging.tma_store());
            assert_eq!(staged, pipeline != Pipeline::CpAsync, "{pipeline:?}");
        }
        for o_staging in OStaging::ALL {
            assert!(valid.iter().any(|c| c.o_staging == o_staging), "{o_staging:?}");
        }
    }

    fn wgmma(block_n: u32, stages: u32, consumer_warpgroups: u32, head_dim: usize) -> KernelSpec {
        KernelSpec {
            config: KernelConfig::Wgmma(WgmmaConfig { block_n, stages, consumer_warpgroups, ..WgmmaConfig::BASE }),
            dtype: Dtype::F16,
            head_dim,
        }
    }

    /// The hand default `wgmma` config of a head dim with `levers` on it, in bf16.
    fn default_wgmma_with(levers: &str, head_dim: usize) -> KernelSpec {
        KernelSpec {
            config: KernelConfig::Wgmma(crate::defaults::wgmma(head_dim)).with_overrides(levers).expect("levers"),
            dtype: Dtype::Bf16,
            head_dim,
        }
    }

    fn with_tma(mut spec: KernelSpec) -> KernelSpec {
        if let KernelConfig::Wgmma(c) = &mut spec.config {
            c.pipeline = Pipeline::Tma;
        }
        spec
    }

    #[test]
    fn exp2_poly_takes_its_listed_values_and_enters_the_space_at_hd64_only() {
        let spec = |text: &str, head_dim| KernelSpec {
            config: wgmma(128, 2, 2, head_dim).config.with_overrides(text).unwrap(),
            ..wgmma(128, 2, 2, head_dim)
        };
        assert!(spec("exp2_poly=6", 64).name().ends_with("_osrg_xp6_lr0_rt0_rs0_hl0_mc0_qr0"));
        assert!(spec("exp2_poly=6", 64).validate(Arch::Sm90a).is_ok());
        assert!(spec("exp2_poly=5", 64)
            .validate(Arch::Sm90a)
            .unwrap_err()
            .contains("exp2_poly=5 must be one of [0, 4, 6, 8]"));
        let polys = |head_dim| {
            let mut p: Vec<u32> = KernelSpec::space(Impl::Wgmma, Dtype::Bf16, head_dim)
                .map(|s| match s.config {
                    KernelConfig::Wgmma(c) => c.exp2_poly,
                    _ => unreachable!(),
                })
                .collect();
            p.sort_unstable();
            p.dedup();
            p
        };
        assert_eq!(polys(64), WgmmaConfig::EXP2_POLY);
        assert_eq!((polys(128), polys(256)), (vec![0], vec![0]));
    }

    #[test]
    fn wgmma_name_defines_and_threads() {
        let spec = wgmma(128, 2, 2, 128);
        assert_eq!(spec.name(), "evoattn_wgmma_f16_d128_bn128_s2_wg2_plcp_scgr_osrg_xp0_lr0_rt0_rs0_hl0_mc0_qr0");
        assert_eq!(
            with_tma(spec).name(),
            "evoattn_wgmma_f16_d128_bn128_s2_wg2_pltma_scgr_osrg_xp0_lr0_rt0_rs0_hl0_mc0_qr0"
        );
        assert_eq!(spec.threads(), 256);
        // The producer warpgroup adds 128 threads, not rows.
        let ws = KernelSpec { config: spec.config.with_overrides("pipeline=specialized").unwrap(), ..spec };
        assert_eq!((ws.threads(), ws.grid(&crate::problem::Shape::new(1, 1, 256, 128), 1, 132)[0]), (384, 2));
        let defines = spec.defines();
        let get = |k: &str| defines.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
        assert_eq!(get("EVOATTN_BF16").unwrap(), "0");
        assert_eq!(get("EVOATTN_BLOCK_M"), None, "block_m is derived in the kernel");
        assert_eq!(get("EVOATTN_BLOCK_N").unwrap(), "128");
        assert_eq!(get("EVOATTN_STAGES").unwrap(), "2");
        assert_eq!(get("EVOATTN_CONSUMER_WARPGROUPS").unwrap(), "2");
        assert_eq!(get("EVOATTN_THREADS").unwrap(), "256");
        assert_eq!(get("EVOATTN_EXP2_POLY").unwrap(), "0");
        assert_eq!(get("EVOATTN_DYNAMIC_SMEM").unwrap(), spec.dynamic_smem_bytes().to_string());
        // Each axis sets the kernel's switches, none of its own name.
        for (define, value) in [
            ("LOADS_TMA", "0"),
            ("WARP_SPECIALIZED", "0"),
            ("OVERLAP", "0"),
            ("PINGPONG", "0"),
            ("PERSISTENT", "0"),
            ("DYNAMIC_TILES", "0"),
            ("SPLIT_TAIL", "0"),
            ("TMA_STORE", "0"),
            ("O_PASSES", "1"),
            ("O_IN_Q", "0"),
        ] {
            assert_eq!(get(&format!("EVOATTN_{define}")).as_deref(), Some(value), "{define}");
        }
        assert!(["EVOATTN_LOADS", "EVOATTN_PIPELINE", "EVOATTN_SCHEDULE", "EVOATTN_O_STAGING"]
            .iter()
            .all(|k| get(k).is_none()));
        let tma = with_tma(spec).defines();
        assert!(tma.contains(&("EVOATTN_LOADS_TMA".to_string(), "1".to_string())));
        assert_eq!(spec.tensor_map_rows(), None);
        let rows = |q, kv, o| Some(TensorMapRows { q, kv, o });
        assert_eq!(with_tma(spec).tensor_map_rows(), rows(Some(128), 128, None));
        assert_eq!(with_tma(wgmma(96, 2, 1, 64)).tensor_map_rows(), rows(Some(64), 96, None));
        // O's box is one consumer warpgroup's rows, whatever the block's.
        let store = with_tma(spec).config.with_overrides("o_staging=tile").unwrap();
        assert_eq!(KernelSpec { config: store, ..spec }.tensor_map_rows(), rows(Some(128), 128, Some(64)));
        assert_eq!(mma(128, 64, 2, true).tensor_map_rows(), None);
        // Each define appears once.
        let mut names: Vec<&String> = defines.iter().map(|(n, _)| n).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), defines.len());
        // The mma kernel's defines are unchanged by the wgmma extras.
        assert!(!mma(128, 64, 2, true).defines().iter().any(|(n, _)| n == "EVOATTN_DYNAMIC_SMEM"));
        // Grid: 64 rows per warpgroup.
        let shape = crate::problem::Shape { b: 3, h: 5, hkv: 1, sq: 129, sk: 7, d: 128 };
        assert_eq!(spec.grid(&shape, 1, 132), [2, 5, 3]);
        assert_eq!(wgmma(64, 2, 1, 128).grid(&shape, 1, 132), [3, 5, 3]);
        // Persistent: 2 x 5 x 3 = 30 tiles take 30 blocks on 132 SMs, 8 on 8.
        let persistent =
            KernelSpec { config: spec.config.with_overrides("pipeline=overlap,schedule=persistent").unwrap(), ..spec };
        assert_eq!((persistent.grid(&shape, 1, 132), persistent.grid(&shape, 1, 8)), ([30, 1, 1], [8, 1, 1]));
        // A split tail cuts tiles into runs of key blocks: 30 tiles of 1 key block (7 keys)
        // still take 30 blocks; with 1000 keys (8 blocks of 128) 240 runs fill the 132 SMs.
        let split = KernelSpec { config: persistent.config.with_overrides("schedule=split-tail").unwrap(), ..spec };
        assert_eq!(split.grid(&shape, 1, 132), [30, 1, 1]);
        assert_eq!(split.grid(&crate::problem::Shape { sk: 1000, ..shape }, 1, 132), [132, 1, 1]);
    }

    #[test]
    fn split_tail_piece_arithmetic_fits_32_bits() {
        let c = WgmmaConfig { block_n: 128, ..crate::defaults::wgmma(64) };
        // 123,248 key blocks (15.78M keys) times 132² is 2,147,473,152: fits; one more block does not.
        assert!(c.split_tail_fits(123_248 * 128, 132));
        assert!(!c.split_tail_fits(123_249 * 128, 132));
        assert!(c.split_tail_fits(1 << 24, 8));
    }

    #[test]
    fn split_tail_is_a_persistent_schedule_of_the_pipelined_consumer() {
        let base = with_tma(wgmma(128, 2, 2, 128)).config.with_overrides("pipeline=overlap").unwrap();
        let spec = |text: &str| KernelSpec { config: base.with_overrides(text).unwrap(), ..wgmma(128, 2, 2, 128) };
        let split = spec("schedule=split-tail");
        assert!(split.validate(Arch::Sm90a).is_ok());
        assert!(split.name().ends_with("_plov_scst_osrg_xp0_lr0_rt0_rs0_hl0_mc0_qr0"), "{}", split.name());
        for define in [("EVOATTN_PERSISTENT", "1"), ("EVOATTN_DYNAMIC_TILES", "0"), ("EVOATTN_SPLIT_TAIL", "1")] {
            assert!(split.defines().contains(&(define.0.to_string(), define.1.to_string())), "{define:?}");
        }
        let err = spec("pipeline=specialized,schedule=split-tail").validate(Arch::Sm90a).unwrap_err();
        assert!(err.contains("schedule=split-tail needs pipeline=overlap or pingpong"), "{err}");
        // The old switches' combinations that no schedule is: refused as they are read.
        for refused in ["split_tail=1", "persistent=1,dynamic_tiles=1,split_tail=1", "dynamic_tiles=1"] {
            let err = base.with_overrides(refused).unwrap_err();
            assert!(err.contains("is no schedule of wgmma: schedule is one of grid (persistent=0"), "{refused}: {err}");
        }
    }

    #[test]
    fn ring_test_needs_the_pipelined_consumer() {
        let base = wgmma(128, 2, 2, 64).config.with_overrides("pipeline=specialized").unwrap();
        let spec = |text: &str| KernelSpec { config: base.with_overrides(text).unwrap(), ..wgmma(128, 2, 2, 64) };
        let err = spec("ring_test=1").validate(Arch::Sm90a).unwrap_err();
        assert!(err.contains("ring_test=1 needs pipeline=overlap or pingpong"), "{err}");
        let tested = spec("pipeline=overlap,ring_test=1");
        assert!(tested.validate(Arch::Sm90a).is_ok());
        assert!(tested.name().ends_with("_rt1_rs0_hl0_mc0_qr0"));
        assert!(tested.defines().contains(&("EVOATTN_RING_TEST".to_string(), "1".to_string())));
        // The tests add no shared memory.
        assert_eq!(tested.dynamic_smem_bytes(), spec("pipeline=overlap").dynamic_smem_bytes());
    }

    #[test]
    fn wgmma_smem_is_unpadded_tiles_plus_the_alignment_slack() {
        // 1024 + (128 Q rows + 2 tensors * 2 stages * 128 rows) * 128 elements * 2 bytes
        assert_eq!(wgmma(128, 2, 2, 128).dynamic_smem_bytes(), 1024 + (128 + 512) * 256);
        // The load path does not change the tiles.
        assert_eq!(with_tma(wgmma(128, 2, 2, 128)).dynamic_smem_bytes(), 1024 + (128 + 512) * 256);
        // D=64, one warpgroup, 3 stages of 64 keys: 1024 + (64 + 384) * 128
        assert_eq!(wgmma(64, 3, 1, 64).dynamic_smem_bytes(), 1024 + 448 * 128);
        // D=128 with 3 stages of 128 keys: 1024 + 896 * 256 = 230400, just under 227 KiB.
        assert!(wgmma(128, 3, 2, 128).validate(Arch::Sm90a).is_ok());
        // D=256 with 2 stages of 128 keys: 1024 + 640 * 512 = 328704: too much.
        let err = wgmma(128, 2, 2, 256).validate(Arch::Sm90a).unwrap_err();
        assert!(err.contains("needs 328704 bytes of shared memory"), "{err}");
        // O staged in a tile for TMA stores: the Q tile, except on persistent blocks: one more
        // 128-row tile, 1024 + (128 + 512 + 128) * 256 = 197632.
        let store = |text: &str| KernelSpec {
            config: with_tma(wgmma(128, 2, 2, 128)).config.with_overrides(text).unwrap(),
            ..wgmma(128, 2, 2, 128)
        };
        assert_eq!(store("o_staging=tile").dynamic_smem_bytes(), 1024 + (128 + 512) * 256);
        assert_eq!(store("o_staging=tile,schedule=persistent").dynamic_smem_bytes(), 1024 + (128 + 512 + 128) * 256);
        // hd128's 176-key default ring leaves no room for it: 1024 + (128 + 704 + 128) * 256.
        let wide = KernelSpec {
            config: store("o_staging=tile,pipeline=overlap,schedule=persistent,block_n=176").config,
            ..wgmma(128, 2, 2, 128)
        };
        assert!(wide.validate(Arch::Sm90a).unwrap_err().contains("needs 246784 bytes"));
    }

    #[test]
    fn half_tile_staging_halves_the_persistent_staging_tile() {
        let persistent = "pipeline=overlap,schedule=persistent,block_n=64";
        let spec = |d: usize, text: &str| KernelSpec {
            config: wgmma(64, 2, 2, d).config.with_overrides(&format!("{persistent},{text}")).unwrap(),
            ..wgmma(64, 2, 2, d)
        };
        // hd256, 64-key ring: 1024 + (128 + 256) * 512 + 128 * 512 = 263168 does not fit; half
        // the staging tile, 1024 + 384 * 512 + 32768 = 230400, does.
        assert!(spec(256, "o_staging=tile").validate(Arch::Sm90a).unwrap_err().contains("needs 263168 bytes"));
        let halved = spec(256, "o_staging=half-tile");
        assert_eq!(halved.dynamic_smem_bytes(), 230400);
        assert!(halved.validate(Arch::Sm90a).is_ok());
        assert!(halved.name().ends_with("_scpe_osht_xp0_lr0_rt0_rs0_hl0_mc0_qr0"), "{}", halved.name());
        assert!(halved.defines().contains(&("EVOATTN_O_PASSES".to_string(), "2".to_string())));
        // hd64 is one column block.
        let err = spec(64, "o_staging=half-tile").validate(Arch::Sm90a).unwrap_err();
        assert!(err.contains("needs a head dim of two or more 64-column blocks, not 64"), "{err}");
        // Only the persistent blocks' own staging tile is cut.
        let grid = KernelSpec { config: halved.config.with_overrides("schedule=grid").unwrap(), ..halved };
        assert!(grid.validate(Arch::Sm90a).unwrap_err().contains("o_staging=half-tile needs a persistent schedule"));
        let err = wgmma(64, 2, 2, 128).config.with_overrides("o_passes=3").unwrap_err();
        assert!(err.contains("o_passes=3,o_in_q=0 is no o_staging of wgmma"), "{err}");
    }

    #[test]
    fn multicast_clusters_pair_static_tiles_and_halve_the_kv_box() {
        let spec = |levers: &str| default_wgmma_with(levers, 128);
        let on = spec("schedule=persistent,block_n=128,multicast=1");
        assert!(on.validate(Arch::Sm90a).is_ok());
        assert!(on.name().ends_with("_hl0_mc1_qr0"), "{}", on.name());
        assert!(on.defines().contains(&("EVOATTN_MULTICAST".to_string(), "1".to_string())));
        // Each block of the pair loads 64 of a key block's 128 rows; Q's and O's boxes stay.
        let rows = on.tensor_map_rows().expect("tma");
        assert_eq!((rows.q, rows.kv, rows.o), (Some(128), 64, Some(64)));
        assert_eq!(spec("schedule=persistent,block_n=128").tensor_map_rows().expect("tma").kv, 128);
        assert_eq!(on.dynamic_smem_bytes(), spec("schedule=persistent,block_n=128").dynamic_smem_bytes());
        // 4 tiles a head pair up; 5 do not. 1000 rows are 8 tiles of 128 (the last one partial).
        let KernelConfig::Wgmma(c) = on.config else { unreachable!() };
        assert!(c.clusters_fit(512) && c.clusters_fit(1000) && !c.clusters_fit(640) && !c.clusters_fit(128));
        // Persistent grids are whole clusters: 132 SMs, or fewer tiles.
        let grid = |sq, sm| on.grid(&crate::problem::Shape::new(1, 2, sq, 128), 1, sm)[0];
        assert_eq!((grid(16384, 132), grid(16384, 131), grid(512, 132)), (132, 130, 8));
        // Without it nothing changes: one block a cluster, any tile count.
        let KernelConfig::Wgmma(off) = spec("schedule=persistent,block_n=128").config else { unreachable!() };
        assert!(off.clusters_fit(640) && off.cluster_blocks() == 1);
        for refused in ["pipeline=tma,multicast=1", "schedule=claimed,multicast=1", "schedule=split-tail,multicast=1"] {
            let err = spec(refused).validate(Arch::Sm90a).unwrap_err();
            assert!(err.contains("multicast=1 needs a warp-specialised pipeline"), "{refused}: {err}");
            assert!(err.contains("schedule=grid or persistent"), "{refused}: {err}");
        }
    }

    #[test]
    fn q_in_regs_needs_the_pipelined_consumer_and_changes_only_the_define() {
        let spec = default_wgmma_with;
        let on = spec("schedule=persistent,block_n=128,q_in_regs=1", 128);
        assert!(on.validate(Arch::Sm90a).is_ok());
        assert!(on.name().ends_with("_mc0_qr1"), "{}", on.name());
        assert!(on.defines().contains(&("EVOATTN_Q_IN_REGS".to_string(), "1".to_string())));
        // Registers, not shared memory: the layout and the threads are those without it.
        let off = spec("schedule=persistent,block_n=128", 128);
        assert_eq!((on.dynamic_smem_bytes(), on.threads()), (off.dynamic_smem_bytes(), off.threads()));
        assert!(off.defines().contains(&("EVOATTN_Q_IN_REGS".to_string(), "0".to_string())));
        let err = spec("pipeline=specialized,q_in_regs=1", 64).validate(Arch::Sm90a).unwrap_err();
        assert!(err.contains("q_in_regs=1 needs pipeline=overlap or pingpong"), "{err}");
    }

    #[test]
    fn half_last_needs_the_pipelined_consumer_and_whole_k16_halves() {
        let spec = |levers: &str| default_wgmma_with(levers, 128);
        // 128 keys: two halves of 64, four k16 steps each.
        let on = spec("half_last=1,block_n=128");
        assert!(on.validate(Arch::Sm90a).is_ok());
        assert!(on.name().ends_with("_rs0_hl1_mc0_qr0"), "{}", on.name());
        assert!(on.defines().contains(&("EVOATTN_HALF_LAST".to_string(), "1".to_string())));
        // No shared memory: the half is of the same stage.
        assert_eq!(on.dynamic_smem_bytes(), spec("half_last=0,block_n=128").dynamic_smem_bytes());
        assert!(spec("half_last=1,block_n=192").validate(Arch::Sm90a).is_ok());
        // 176 keys halve into 88, not whole k16 steps; 80 into 40.
        for levers in ["half_last=1,block_n=176", "half_last=1,block_n=80"] {
            let err = spec(levers).validate(Arch::Sm90a).unwrap_err();
            assert!(err.contains("a multiple of 32"), "{levers}: {err}");
        }
        let err = spec("half_last=1,block_n=128,pipeline=specialized").validate(Arch::Sm90a).unwrap_err();
        assert!(err.contains("half_last=1 needs pipeline=overlap or pingpong"), "{err}");
    }

    #[test]
    fn rowsum_mma_is_hd64_warp_specialised_with_a_ones_tile() {
        let spec = default_wgmma_with;
        let on = spec("rowsum_mma=1", 64);
        assert!(on.validate(Arch::Sm90a).is_ok());
        assert!(on.name().ends_with("_rt0_rs1_hl0_mc0_qr0"), "{}", on.name());
        assert!(on.defines().contains(&("EVOATTN_ROWSUM_MMA".to_string(), "1".to_string())));
        // The ones tile is one V stage: 128 keys x 64 columns x 2 bytes.
        assert_eq!(on.dynamic_smem_bytes() - spec("rowsum_mma=0", 64).dynamic_smem_bytes(), 128 * 64 * 2);
        for (levers, d) in [("rowsum_mma=1", 128), ("rowsum_mma=1", 256), ("rowsum_mma=1,pipeline=tma", 64)] {
            let err = spec(levers, d).validate(Arch::Sm90a).unwrap_err();
            assert!(err.contains("rowsum_mma=1 needs head dim 64"), "{levers} hd{d}: {err}");
        }
    }

    #[test]
    fn q_rows_staging_is_for_whole_persistent_tiles() {
        let persistent = "pipeline=overlap,schedule=persistent,block_n=80";
        let spec = |text: &str| KernelSpec {
            config: wgmma(80, 2, 2, 256).config.with_overrides(&format!("{persistent},{text}")).unwrap(),
            ..wgmma(80, 2, 2, 256)
        };
        // hd256, 80-key ring: no staging tile, 1024 + (128 + 320) * 512 = 230400; Q's box is one
        // consumer's 64 rows.
        let in_q = spec("o_staging=q-rows");
        assert_eq!(in_q.dynamic_smem_bytes(), 230400);
        assert!(in_q.validate(Arch::Sm90a).is_ok());
        assert!(in_q.name().ends_with("_scpe_osqr_xp0_lr0_rt0_rs0_hl0_mc0_qr0"), "{}", in_q.name());
        assert_eq!(in_q.tensor_map_rows().unwrap().q, Some(64));
        assert_eq!(spec("o_staging=tile").tensor_map_rows().unwrap().q, Some(128));
        assert!(in_q.defines().contains(&("EVOATTN_O_IN_Q".to_string(), "1".to_string())));
        // Whole tiles of persistent blocks only, static or claimed.
        assert!(spec("o_staging=q-rows,schedule=claimed").validate(Arch::Sm90a).is_ok());
        for refused in ["schedule=split-tail", "schedule=grid"] {
            let err = spec(&format!("o_staging=q-rows,{refused}")).validate(Arch::Sm90a).unwrap_err();
            assert!(err.contains("o_staging=q-rows needs schedule=persistent or claimed"), "{refused}: {err}");
        }
    }

    #[test]
    fn wgmma_validate_mirrors_the_kernel_asserts() {
        assert!(wgmma(128, 2, 2, 64).validate(Arch::Sm90a).is_ok());
        assert!(with_tma(wgmma(128, 2, 2, 64)).validate(Arch::Sm90a).is_ok());
        assert!(wgmma(96, 4, 1, 64).validate(Arch::Sm90a).is_ok());
        // Hopper's arch-specific target only.
        for arch in [Arch::Sm80, Arch::Sm86, Arch::Sm89, Arch::Sm90] {
            let err = wgmma(128, 2, 2, 64).validate(arch).unwrap_err();
            assert_eq!(err, format!("wgmma runs on sm_90a, not {arch}"));
        }
        assert!(wgmma(72, 2, 2, 64).validate(Arch::Sm90a).unwrap_err().contains("block_n=72"));
        assert!(wgmma(64, 5, 2, 64).validate(Arch::Sm90a).unwrap_err().contains("stages=5"));
        assert!(wgmma(64, 2, 4, 64).validate(Arch::Sm90a).unwrap_err().contains("consumer_warpgroups=4"));
        assert!(wgmma(64, 2, 2, 96).validate(Arch::Sm90a).unwrap_err().contains("head dims"));
        // 512 threads (three consumers and the producer) leave 128 registers: no room for hd256's
        // 128 accumulators; 384 leave 168.
        let three = |d| KernelSpec {
            config: wgmma(64, 1, 3, d).config.with_overrides("pipeline=specialized").unwrap(),
            ..wgmma(64, 1, 3, d)
        };
        assert!(three(256).validate(Arch::Sm90a).unwrap_err().contains("128 accumulator registers"));
        assert!(three(128).validate(Arch::Sm90a).is_ok());
        assert!(wgmma(64, 1, 3, 256).validate(Arch::Sm90a).is_ok());
    }

    fn splitkv(block_m: u32, block_n: u32, stages: u32, splits: u32, head_dim: usize) -> KernelSpec {
        let c = SplitkvConfig {
            block_m,
            block_n,
            stages,
            q_in_regs: true,
            key_warps: 1,
            splits,
            combine: SplitkvCombine::Fused,
            loads: Loads::CpAsync,
        };
        KernelSpec { config: KernelConfig::Splitkv(c), dtype: Dtype::Bf16, head_dim }
    }

    #[test]
    fn splitkv_name_grid_smem_and_validate() {
        let spec = splitkv(64, 64, 2, 0, 128);
        assert_eq!(spec.name(), "evoattn_splitkv_bf16_d128_bm64_bn64_s2_qr1_kw1_sp0_cbfused_ldcp_async");
        assert_eq!(spec.combine_kernel_name(), None);
        assert_eq!(spec.threads(), 128);
        // The mma tile layout: (64 + 2 * 2 * 64) rows of (128 + 8) elements.
        assert_eq!(spec.dynamic_smem_bytes(), (64 + 256) * 136 * 2);
        // GQA 8:1, Sq = 3: 24 packed rows per KV head -> 1 tile of 64; x = tiles * splits.
        let shape = crate::problem::Shape { b: 2, h: 16, hkv: 2, sq: 3, sk: 1000, d: 128 };
        assert_eq!(spec.grid(&shape, 5, 132), [5, 2, 2]);
        assert_eq!(splitkv(16, 64, 2, 0, 128).grid(&shape, 5, 132), [10, 2, 2]);
        assert_eq!(splitkv(16, 64, 2, 0, 128).threads(), 32);
        for arch in Arch::ALL {
            assert!(spec.validate(arch).is_ok(), "{arch}");
        }
        assert!(splitkv(48, 64, 2, 0, 128).validate(Arch::Sm80).unwrap_err().contains("block_m=48"));
        assert!(splitkv(64, 96, 2, 0, 128).validate(Arch::Sm80).unwrap_err().contains("block_n=96"));
        assert!(splitkv(64, 64, 5, 0, 128).validate(Arch::Sm80).unwrap_err().contains("stages=5"));
        // Key warps: each warp's slice of a tile is whole k16 steps, and the merge fits the ring.
        let key_warps = |spec: KernelSpec, kw: u32| KernelSpec {
            config: spec.config.with_overrides(&format!("key_warps={kw}")).unwrap(),
            ..spec
        };
        let kw4 = key_warps(splitkv(16, 64, 4, 0, 128), 4);
        assert_eq!(kw4.threads(), 128);
        assert!(kw4.validate(Arch::Sm90a).is_ok());
        assert!(key_warps(splitkv(16, 32, 4, 0, 128), 4).validate(Arch::Sm90a).unwrap_err().contains("8 keys a tile"));
        assert!(key_warps(splitkv(16, 64, 2, 0, 128), 3).validate(Arch::Sm90a).unwrap_err().contains("key_warps=3"));
        // 128 rows of D=128 state (8 x 132 x 32 floats, 135 KiB) against a 2 x 2 x 32-row ring (35 KiB).
        assert!(key_warps(splitkv(128, 32, 2, 0, 128), 2)
            .validate(Arch::Sm90a)
            .unwrap_err()
            .contains("through a 34816-byte K/V ring"));
        assert!(splitkv(64, 64, 2, 129, 128).validate(Arch::Sm80).unwrap_err().contains("splits=129"));
        assert!(splitkv(128, 128, 3, 0, 256).validate(Arch::Sm90a).unwrap_err().contains("shared memory"));
        let changed = spec.config.with_overrides("splits=8,block_m=16").unwrap();
        assert_eq!(changed, splitkv(16, 64, 2, 8, 128).config);
        assert_eq!(
            changed.to_string(),
            "block_m=16,block_n=64,stages=2,q_in_regs=1,key_warps=1,splits=8,combine=fused,loads=cp_async"
        );
        assert!(spec.config.with_overrides("loads=bulk").unwrap_err().contains("loads is one of cp_async, tma"));
        assert!(spec.config.with_overrides("combine=atomic").unwrap_err().contains("combine is one of fused, kernel"));
        assert_eq!(KernelSpec::space(Impl::Splitkv, Dtype::F16, 64).count(), 4 * 3 * 4 * 2 * 2 * 3 * 2);
        // The second kernel's name and the defines that select it.
        let two = KernelSpec { config: spec.config.with_overrides("combine=kernel").unwrap(), ..spec };
        let name = "evoattn_splitkv_bf16_d128_bm64_bn64_s2_qr1_kw1_sp0_cbkernel_ldcp_async";
        assert_eq!(two.combine_kernel_name().as_deref(), Some(&*format!("{name}_combine")));
        let defines = two.defines();
        let get = |k: &str| defines.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
        assert_eq!(get("EVOATTN_COMBINE_KERNEL").as_deref(), Some("1"));
        assert_eq!(get("EVOATTN_COMBINE_NAME"), Some(format!("{name}_combine")));
        assert_eq!(get("EVOATTN_COMBINE"), None);
        assert!(spec.defines().contains(&("EVOATTN_COMBINE_KERNEL".to_string(), "0".to_string())));
    }

    #[test]
    fn splitkv_tma_loads_take_swizzled_tiles_and_two_maps_on_hopper_only() {
        let cp = splitkv(16, 128, 2, 0, 128);
        let tma = KernelSpec { config: cp.config.with_overrides("loads=tma").unwrap(), ..cp };
        assert!(tma.name().ends_with("_cbfused_ldtma"), "{}", tma.name());
        // K and V by TMA, Q not (its rows are packed query heads).
        assert_eq!(tma.tensor_map_rows(), Some(TensorMapRows { q: None, kv: 128, o: None }));
        assert_eq!(cp.tensor_map_rows(), None);
        // Q: 16 padded rows; the ring: 2 stages x (K, V) x 128 unpadded rows of 256 bytes, plus
        // the swizzle atom's alignment slack. cp.async pads the ring's rows too.
        assert_eq!(tma.dynamic_smem_bytes(), 16 * 136 * 2 + 4 * 128 * 256 + 1024);
        assert_eq!(cp.dynamic_smem_bytes(), (16 + 4 * 128) * 136 * 2);
        let defines = tma.defines();
        let get = |k: &str| defines.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
        assert_eq!(get("EVOATTN_LOADS_TMA").as_deref(), Some("1"));
        assert_eq!(get("EVOATTN_DYNAMIC_SMEM"), Some(tma.dynamic_smem_bytes().to_string()));
        assert_eq!(cp.defines().iter().find(|(n, _)| n == "EVOATTN_DYNAMIC_SMEM"), None);
        for arch in [Arch::Sm80, Arch::Sm86, Arch::Sm89] {
            assert!(tma.validate(arch).unwrap_err().contains("loads=tma needs"), "{arch}");
        }
        assert!(tma.validate(Arch::Sm90).is_ok() && tma.validate(Arch::Sm90a).is_ok());
    }

    #[test]
    fn wgmma_overrides_and_display() {
        let base = wgmma(128, 2, 2, 128).config;
        let one = base.with_overrides("consumer_warpgroups=1,stages=3,pipeline=tma").unwrap();
        assert_eq!(
            one,
            KernelConfig::Wgmma(WgmmaConfig {
                block_n: 128,
                stages: 3,
                consumer_warpgroups: 1,
                pipeline: Pipeline::Tma,
                ..WgmmaConfig::BASE
            })
        );
        assert_eq!(
            one.to_string(),
            "block_n=128,stages=3,consumer_warpgroups=1,pipeline=tma,schedule=grid,o_staging=registers,exp2_poly=0,\
             lazy_rescale=0,ring_test=0,rowsum_mma=0,half_last=0,multicast=0,q_in_regs=0"
        );
        assert_eq!(
            one.with_overrides("pipeline=cp-async").unwrap(),
            base.with_overrides("consumer_warpgroups=1,stages=3").unwrap()
        );
        assert!(base.with_overrides("key_warps=1").unwrap_err().contains("not a lever of wgmma"));
        // What the axes cannot say, validate refuses with the rule.
        let spec =
            |text: &str| KernelSpec { config: base.with_overrides(text).unwrap(), dtype: Dtype::F16, head_dim: 128 };
        let err = |text: &str| spec(text).validate(Arch::Sm90a).unwrap_err();
        assert!(err("pipeline=pingpong,consumer_warpgroups=1").contains("2 or more"));
        assert!(err("pipeline=specialized,schedule=persistent").contains("needs pipeline=overlap or pingpong"));
        assert!(err("o_staging=tile").contains("o_staging=tile needs TMA loads"));
        assert!(spec("pipeline=pingpong,schedule=persistent").validate(Arch::Sm90a).is_ok());
        assert!(base.with_overrides("block_m=64").unwrap_err().contains("not a lever of wgmma"));
        let err = base.with_overrides("pipeline=bulk").unwrap_err();
        assert!(err.contains("pipeline is one of cp-async, tma, specialized, overlap, pingpong, not 'bulk'"), "{err}");
    }

    #[test]
    fn wgmma_reads_the_old_switches_onto_the_axes() {
        let base = wgmma(128, 2, 2, 128).config;
        let read = |old: &str, new: &str| assert_eq!(base.with_overrides(old), base.with_overrides(new), "{old}");
        read("loads=tma", "pipeline=tma");
        read("loads=tma,warp_specialized=1,overlap=1,pingpong=1,persistent=1", "pipeline=pingpong,schedule=persistent");
        read(
            "loads=tma,warp_specialized=1,overlap=1,persistent=1,dynamic_tiles=1,tma_store=1",
            "pipeline=overlap,schedule=claimed,o_staging=tile",
        );
        read(
            "loads=tma,warp_specialized=1,overlap=1,persistent=1,split_tail=1,tma_store=1,o_passes=2",
            "pipeline=overlap,schedule=split-tail,o_staging=half-tile",
        );
        read("loads=tma,tma_store=1,o_in_q=1", "pipeline=tma,o_staging=q-rows");
        // Applied to the config's axes, as the switches were: persistent blocks of the default.
        let default = KernelConfig::Wgmma(crate::defaults::wgmma(128));
        assert_eq!(default.with_overrides("persistent=1"), default.with_overrides("schedule=persistent"));
        assert_eq!(default.with_overrides("pingpong=0"), default.with_overrides("pipeline=overlap"));
        // A combination no axis value has is refused, in the old form, with the values there are.
        let err = base.with_overrides("warp_specialized=1").unwrap_err();
        assert_eq!(
            err,
            "loads=cp_async,warp_specialized=1,overlap=0,pingpong=0 is no pipeline of wgmma: pipeline is one of \
             cp-async (loads=cp_async,warp_specialized=0,overlap=0,pingpong=0), \
             tma (loads=tma,warp_specialized=0,overlap=0,pingpong=0), \
             specialized (loads=tma,warp_specialized=1,overlap=0,pingpong=0), \
             overlap (loads=tma,warp_specialized=1,overlap=1,pingpong=0), \
             pingpong (loads=tma,warp_specialized=1,overlap=1,pingpong=1)"
        );
        for refused in ["o_in_q=1,o_passes=2", "tma_store=0,o_in_q=1", "o_passes=3"] {
            assert!(base.with_overrides(refused).unwrap_err().contains("is no o_staging of wgmma"), "{refused}");
        }
        assert!(base.with_overrides("loads=ldg").unwrap_err().contains("loads is one of cp_async, tma"));
    }
}
