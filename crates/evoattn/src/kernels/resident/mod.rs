//! `resident`: the short-sequence Hopper kernel (`resident.cu`). A block owns `q_tiles` query
//! tiles of 64 rows of one (batch, head) and keeps every K and V block they see resident in
//! shared memory: its loads are all issued at the start and each lands once, and its consumer
//! warpgroups sweep the tiles independently (no producer, no ring, no shared tile boundary).
//! For keys that fit (`key_blocks` × `block_n`); sm_90a only.

use crate::arch::Arch;
use crate::config::lever::{flag, num, one_of, product, Family, LaunchNeeds, Lever};
use crate::config::{
    Impl, TensorMapRows, MAX_REGISTERS_PER_THREAD, REGISTERS_PER_SM, SWIZZLE_ATOM_BYTES, WARPGROUP_THREADS,
};
use crate::kernels::SourceFile;
use crate::problem::{Dtype, Problem, Shape};

/// Levers of the `resident` kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ResidentConfig {
    /// Keys per main-loop step: the N of S = Q·Kᵀ and the K of O += P·V.
    pub block_n: u32,
    /// K and V blocks held in shared memory: the longest key range the kernel takes is
    /// `key_blocks` × `block_n`.
    pub key_blocks: u32,
    /// Computing warpgroups; each (each pair, with `key_split` 2) sweeps its own share of the
    /// block's tiles.
    pub consumer_warpgroups: u32,
    /// Query tiles of 64 rows per block (all of their Q is loaded at the start too).
    pub q_tiles: u32,
    /// Consumers per tile, each taking a share of its key blocks (2: pairs, the second's partial
    /// merged by the first through shared memory): a shorter chain a tile where a launch is one
    /// round of tiles.
    pub key_split: u32,
    /// Each consumer issues S(j + 1) with P(j)·V(j) and runs the softmax under P·V (S and P live
    /// together); off, a block's two GEMMs go in series and leave room for four consumers.
    pub overlap: bool,
    /// The consumers take turns at issuing GEMMs (a ring of named barriers), so one's softmax
    /// runs under the others' GEMMs; each pads its turns to the busiest one's.
    pub pingpong: bool,
    /// O is staged in the tile's own Q rows and stored by TMA, instead of from registers.
    pub tma_store: bool,
}

/// Registers a consumer thread takes beyond its S, P and O accumulators (addresses, row state,
/// loop): what ptxas left at hd64, 154 in all pipelined with 128-key blocks, 126 in series.
const OTHER_REGISTERS: u32 = 30;

/// Query rows of one tile: one `wgmma` m64 per consumer warpgroup.
pub const RESIDENT_TILE_ROWS: u32 = 64;

impl ResidentConfig {
    pub const BLOCK_N: [u32; 2] = [64, 128];
    pub const KEY_BLOCKS: [u32; 4] = [1, 2, 3, 4];
    pub const CONSUMER_WARPGROUPS: [u32; 4] = [1, 2, 3, 4];
    pub const Q_TILES: [u32; 8] = [1, 2, 3, 4, 6, 8, 12, 16];
    pub const KEY_SPLIT: [u32; 2] = [1, 2];

    /// Consumers (or pairs, with `key_split` 2) that take tiles.
    fn groups(&self) -> u32 {
        (self.consumer_warpgroups / self.key_split).max(1)
    }

    /// The kernel's static shared memory: one mbarrier per round's group of Q tiles and per K
    /// and V block.
    fn barrier_bytes(&self) -> usize {
        8 * (self.rounds() * self.groups() + 2 * self.key_blocks) as usize
    }

    /// Dynamic and static shared memory together, what the block needs of the SM's.
    fn smem_bytes(&self, dtype: Dtype, head_dim: usize) -> usize {
        self.dynamic_smem_bytes(dtype, head_dim) + self.barrier_bytes()
    }

    /// Rounds of tiles a group takes (the last may leave groups idle).
    fn rounds(&self) -> u32 {
        self.q_tiles.div_ceil(self.groups())
    }

    /// Keys the resident blocks hold.
    pub fn max_keys(&self) -> usize {
        (self.key_blocks * self.block_n) as usize
    }
}

/// The config `--impl resident` takes for a problem: 128-key blocks, enough of them for every
/// key, and as many tiles per block as fill the SMs in one round, fewer where their Q does not
/// fit beside K and V in `arch`'s shared memory.
/// Evidence: docs/decisions/resident.md#for-problem
pub fn for_problem(arch: Arch, problem: &Problem, sm_count: u32) -> ResidentConfig {
    let s = problem.shape;
    let block_n = 128;
    let most_blocks = *ResidentConfig::KEY_BLOCKS.last().expect("a key block count");
    let key_blocks = (s.sk.div_ceil(block_n as usize) as u32).clamp(1, most_blocks);
    let head_tiles = s.sq.div_ceil(RESIDENT_TILE_ROWS as usize);
    let wanted = (head_tiles * s.b * s.h).div_ceil(sm_count as usize).clamp(1, head_tiles.max(1));
    let config = |q_tiles: u32| {
        let consumer_warpgroups = q_tiles.min(2);
        let pingpong = consumer_warpgroups > 1;
        ResidentConfig {
            block_n,
            key_blocks,
            consumer_warpgroups,
            q_tiles,
            key_split: 1,
            overlap: true,
            pingpong,
            tma_store: true,
        }
    };
    let fits = |c: &ResidentConfig| c.smem_bytes(problem.dtype, s.d) <= arch.max_smem_per_block();
    let first =
        ResidentConfig::Q_TILES.iter().position(|&t| t as usize >= wanted).unwrap_or(ResidentConfig::Q_TILES.len() - 1);
    // Down from the first count that covers `wanted` to the largest that fits; none fitting, the
    // smallest, which `validate` refuses with its shared memory.
    ResidentConfig::Q_TILES[..=first].iter().rev().map(|&t| config(t)).find(fits).unwrap_or(config(1))
}

impl Family for ResidentConfig {
    const IMPL: Impl = Impl::Resident;
    const ABOUT: &'static str =
        "Hopper, short keys: a head's K and V resident in shared memory, every load issued at the start (sm_90a)";
    const HEAD_DIMS: &'static [usize] = &[64, 128];
    const ARCHS: &'static [Arch] = &[Arch::Sm90a];
    const SOURCE: SourceFile = SourceFile { name: "resident.cu", text: include_str!("resident.cu") };

    /// 512 keys at hd64 over eight tiles, 256 keys at hd128 over four (what fits beside them),
    /// in 128-key blocks, two consumers.
    fn default_for(_arch: Arch, _dtype: Dtype, head_dim: usize) -> Self {
        let (key_blocks, q_tiles) = if head_dim <= 64 { (4, 8) } else { (2, 4) };
        ResidentConfig {
            block_n: 128,
            key_blocks,
            consumer_warpgroups: 2,
            q_tiles,
            key_split: 1,
            overlap: true,
            pingpong: true,
            tma_store: true,
        }
    }

    fn for_problem(arch: Arch, problem: &Problem, sm_count: u32) -> Self {
        for_problem(arch, problem, sm_count)
    }

    fn into_config(self) -> crate::config::KernelConfig {
        crate::config::KernelConfig::Resident(self)
    }

    const LEVERS: &'static [Lever<Self>] = &[
        num!("block_n", "bn", block_n, &ResidentConfig::BLOCK_N, "keys per main-loop step (the N of Q·Kᵀ)"),
        num!("key_blocks", "kb", key_blocks, &ResidentConfig::KEY_BLOCKS, "K/V blocks resident in shared memory"),
        num!(
            "consumer_warpgroups",
            "wg",
            consumer_warpgroups,
            &ResidentConfig::CONSUMER_WARPGROUPS,
            "computing warpgroups, each sweeping its own 64-row tiles"
        ),
        num!("q_tiles", "qt", q_tiles, &ResidentConfig::Q_TILES, "64-row query tiles per block"),
        num!(
            "key_split",
            "ks",
            key_split,
            &ResidentConfig::KEY_SPLIT,
            "consumers per tile, each on a share of its keys"
        ),
        flag!("overlap", "ov", overlap, "S(j + 1) issued with P(j)·V(j), the softmax under P·V"),
        flag!("pingpong", "pp", pingpong, "consumers take turns at issuing GEMMs"),
        flag!("tma_store", "ts", tma_store, "O staged in the tile's Q rows and stored by TMA"),
    ];

    fn threads(&self) -> u32 {
        self.consumer_warpgroups * WARPGROUP_THREADS
    }

    fn grid(&self, shape: &Shape, _splits: usize, _sm_count: u32) -> [usize; 3] {
        [shape.sq.div_ceil((self.q_tiles * RESIDENT_TILE_ROWS) as usize), shape.h, shape.b]
    }

    /// The key blocks (K and V), the Q tiles in groups of one per consumer, and the slack that
    /// lets the kernel align its base to the swizzle atom. The mbarriers are static.
    fn dynamic_smem_bytes(&self, dtype: Dtype, head_dim: usize) -> usize {
        let row = head_dim * dtype.size_bytes();
        let q_rows = (self.rounds() * self.consumer_warpgroups * RESIDENT_TILE_ROWS) as usize;
        // key_split=2: each pair's partial, O's fp32 accumulators and four row-state floats a
        // thread of a warpgroup.
        let partials = if self.key_split == 2 {
            self.groups() as usize * (head_dim / 2 + 4) * WARPGROUP_THREADS as usize * 4
        } else {
            0
        };
        SWIZZLE_ATOM_BYTES + (2 * self.max_keys() + q_rows) * row + partials
    }

    fn tensor_map_rows(&self) -> Option<TensorMapRows> {
        let o = self.tma_store.then_some(RESIDENT_TILE_ROWS);
        Some(TensorMapRows { q: Some(RESIDENT_TILE_ROWS), kv: self.block_n, o })
    }

    fn validate(&self, dtype: Dtype, head_dim: usize, arch: Arch) -> Result<(), String> {
        one_of("block_n", self.block_n, &ResidentConfig::BLOCK_N)?;
        one_of("key_blocks", self.key_blocks, &ResidentConfig::KEY_BLOCKS)?;
        one_of("consumer_warpgroups", self.consumer_warpgroups, &ResidentConfig::CONSUMER_WARPGROUPS)?;
        one_of("q_tiles", self.q_tiles, &ResidentConfig::Q_TILES)?;
        if self.pingpong && self.consumer_warpgroups < 2 {
            return Err("pingpong=1 needs consumer_warpgroups of 2 or more (they take turns)".into());
        }
        one_of("key_split", self.key_split, &ResidentConfig::KEY_SPLIT)?;
        if !self.consumer_warpgroups.is_multiple_of(self.key_split) {
            return Err(format!(
                "key_split={} needs consumer_warpgroups in whole groups of {0}, not {}",
                self.key_split, self.consumer_warpgroups
            ));
        }
        if self.groups() > self.q_tiles {
            return Err(format!(
                "consumer_warpgroups={} in groups of key_split={} is more groups than the block's q_tiles={} (a \
                 group would have no tile)",
                self.consumer_warpgroups, self.key_split, self.q_tiles
            ));
        }
        // A consumer thread holds S (block_n / 2 fp32), O (head dim / 2) and, pipelined, P beside
        // S (block_n / 4 pairs); more than the block's share of registers spills.
        let cap = (REGISTERS_PER_SM / self.threads()).min(MAX_REGISTERS_PER_THREAD);
        let p = if self.overlap { self.block_n / 4 } else { 0 };
        let need = self.block_n / 2 + head_dim as u32 / 2 + p + OTHER_REGISTERS;
        if need > cap {
            return Err(format!(
                "{} consumers at head dim {head_dim} need about {need} registers a thread (S, O{}), over the {cap} \
                 that {} threads allow; fewer consumers{}",
                self.consumer_warpgroups,
                if self.overlap { ", P" } else { "" },
                self.threads(),
                if self.overlap { " or overlap=0" } else { "" }
            ));
        }
        // The shared check counts the dynamic bytes; the barriers come on top.
        let smem = self.smem_bytes(dtype, head_dim);
        if smem > arch.max_smem_per_block() {
            return Err(format!(
                "needs {smem} bytes of shared memory with its barriers, over {arch}'s {} per block",
                arch.max_smem_per_block()
            ));
        }
        Ok(())
    }

    fn extra_defines(&self, dtype: Dtype, head_dim: usize) -> Vec<(String, String)> {
        // The kernel checks its own shared-memory layout against what the host reserves.
        vec![("EVOATTN_DYNAMIC_SMEM".to_string(), self.dynamic_smem_bytes(dtype, head_dim).to_string())]
    }

    /// Keys past the resident blocks cannot be taken.
    fn launch_needs(&self, problem: &Problem, _sm_count: u32, _resident_per_sm: u32) -> Result<LaunchNeeds, String> {
        if problem.shape.sk > self.max_keys() {
            return Err(format!(
                "holds key_blocks × block_n = {} keys in shared memory, and this problem has {} (wgmma streams any \
                 length)",
                self.max_keys(),
                problem.shape.sk
            ));
        }
        Ok(LaunchNeeds::default())
    }

    fn space(head_dim: usize) -> Box<dyn Iterator<Item = Self>> {
        Box::new(product(Self::default_for(Arch::Sm90a, Dtype::F16, head_dim), head_dim))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::problem::Layout;

    const H100_SMS: u32 = 132;

    fn seed(b: usize, h: usize) -> Problem {
        Problem::dense(Shape::new(b, h, 512, 64), Dtype::F16, Layout::Bhsd)
    }

    #[test]
    fn the_seed_shapes_take_as_many_tiles_a_block_as_fill_the_sms_once() {
        // B·H heads of eight 64-row tiles: 64 or 128 blocks of 1, 2, 4 or 8 tiles.
        let planned: Vec<(u32, u32, u32)> = [(1, 8), (2, 8), (4, 8), (4, 16), (8, 16)]
            .map(|(b, h)| for_problem(Arch::Sm90a, &seed(b, h), H100_SMS))
            .iter()
            .map(|c| (c.q_tiles, c.consumer_warpgroups, c.key_blocks))
            .collect();
        assert_eq!(planned, [(1, 1, 4), (1, 1, 4), (2, 2, 4), (4, 2, 4), (8, 2, 4)]);
        let c = for_problem(Arch::Sm90a, &seed(8, 16), H100_SMS);
        assert_eq!(c.grid(&seed(8, 16).shape, 1, H100_SMS), [1, 16, 8]);
        assert!(c.pingpong && c.tma_store && c.overlap && c.key_split == 1);
    }

    #[test]
    fn fewer_tiles_a_block_where_their_q_does_not_fit_beside_k_and_v() {
        // hd128, 256 keys: 128 KiB of K and V; eight 16 KiB Q tiles would not fit, six do.
        let shape = Shape { sk: 256, ..Shape::new(8, 16, 512, 128) };
        let p = Problem::dense(shape, Dtype::Bf16, Layout::Bhsd);
        let c = for_problem(Arch::Sm90a, &p, H100_SMS);
        assert_eq!((c.key_blocks, c.q_tiles), (2, 6));
        assert!(c.smem_bytes(Dtype::Bf16, 128) <= Arch::Sm90a.max_smem_per_block());
        assert!(c.validate(Dtype::Bf16, 128, Arch::Sm90a).is_ok());
    }

    #[test]
    fn keys_past_the_resident_blocks_are_refused_naming_the_kernel_that_takes_them() {
        let p = Problem::dense(Shape::new(1, 8, 1024, 64), Dtype::F16, Layout::Bhsd);
        let c = for_problem(Arch::Sm90a, &p, H100_SMS);
        let err = c.launch_needs(&p, H100_SMS, 1).unwrap_err();
        assert!(err.contains("512 keys") && err.contains("1024") && err.contains("wgmma"), "{err}");
    }

    #[test]
    fn validate_refuses_what_the_registers_or_the_pairs_cannot_hold() {
        let base = ResidentConfig::default_for(Arch::Sm90a, Dtype::F16, 64);
        let four = ResidentConfig { consumer_warpgroups: 4, ..base };
        let err = four.validate(Dtype::F16, 64, Arch::Sm90a).unwrap_err();
        assert!(err.contains("registers") && err.contains("overlap=0"), "{err}");
        assert!(ResidentConfig { overlap: false, ..four }.validate(Dtype::F16, 64, Arch::Sm90a).is_ok());
        let odd = ResidentConfig { consumer_warpgroups: 3, key_split: 2, ..base };
        assert!(odd.validate(Dtype::F16, 64, Arch::Sm90a).unwrap_err().contains("whole groups of 2"));
        let idle = ResidentConfig { q_tiles: 1, ..base };
        assert!(idle.validate(Dtype::F16, 64, Arch::Sm90a).unwrap_err().contains("no tile"));
        let alone = ResidentConfig { consumer_warpgroups: 1, q_tiles: 1, ..base };
        assert!(alone.validate(Dtype::F16, 64, Arch::Sm90a).unwrap_err().contains("take turns"));
    }
}
