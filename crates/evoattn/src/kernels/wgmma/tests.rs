//! The typed axes against the boolean levers they replaced (issue 33): the old space's valid
//! kernels are the new space's, define for define, and every old combination reads back as the
//! same kernel or is refused. The old levers, their space and their rules are written out here.

use super::*;
use crate::config::{KernelConfig, KernelSpec};

/// A config as the boolean levers wrote it.
#[derive(Clone, Copy, Debug)]
struct Old {
    block_n: u32,
    stages: u32,
    consumers: u32,
    tma: bool,
    ws: bool,
    ov: bool,
    pp: bool,
    pe: bool,
    dt: bool,
    ts: bool,
    xp: u32,
    lr: bool,
    st: bool,
    rt: bool,
    op: u32,
    oq: bool,
    rs: bool,
    hl: bool,
    mc: bool,
    qr: bool,
}

/// The defines a config sets besides its name, in this order.
const DEFINES: [&str; 24] = [
    "HEAD_DIM",
    "BF16",
    "THREADS",
    "BLOCK_N",
    "STAGES",
    "CONSUMER_WARPGROUPS",
    "LOADS_TMA",
    "WARP_SPECIALIZED",
    "OVERLAP",
    "PINGPONG",
    "PERSISTENT",
    "DYNAMIC_TILES",
    "TMA_STORE",
    "EXP2_POLY",
    "LAZY_RESCALE",
    "SPLIT_TAIL",
    "RING_TEST",
    "O_PASSES",
    "O_IN_Q",
    "ROWSUM_MMA",
    "HALF_LAST",
    "MULTICAST",
    "Q_IN_REGS",
    "DYNAMIC_SMEM",
];

/// A bf16 kernel's defines, values in [`DEFINES`] order.
type Defines = [u32; 24];

impl Old {
    fn threads(&self) -> u32 {
        (self.consumers + u32::from(self.ws)) * 128
    }

    fn smem(&self, head_dim: usize) -> usize {
        let (row, rows) = (head_dim * 2, 64 * self.consumers as usize);
        let own_tile = if self.ts && self.pe && !self.oq { rows * row / self.op as usize } else { 0 };
        let ones = if self.rs { self.block_n as usize * row } else { 0 };
        1024 + (rows + 2 * (self.stages * self.block_n) as usize) * row + own_tile + ones
    }

    /// The old `validate` on sm_90a: its rules, the register cap and shared memory.
    fn valid(&self, head_dim: usize) -> bool {
        let o = self;
        let rules = (!o.ws || o.tma)
            && (!o.ov || o.ws)
            && (!o.pp || (o.ov && o.consumers >= 2))
            && (!o.pe || o.ov)
            && (!o.ts || o.tma)
            && (!o.st || (o.pe && !o.dt))
            && (!o.rt || o.ov)
            && (o.op == 1 || (o.ts && o.pe))
            && (head_dim as u32 / 64).is_multiple_of(o.op)
            && (!o.oq || (o.ts && o.pe && !o.st && o.op == 1))
            && (!o.rs || (head_dim == 64 && o.ws))
            && (!o.hl || (o.ov && o.block_n.is_multiple_of(32)))
            && (!o.mc || (o.ws && !o.dt && !o.st))
            && (!o.qr || o.ov)
            && (!o.dt || o.pe);
        let cap = (65536 / o.threads()).min(255);
        let registers = (head_dim as u32).max(o.block_n) / 2 + 32 <= cap;
        rules && registers && o.smem(head_dim) <= Arch::Sm90a.max_smem_per_block()
    }

    fn defines(&self, head_dim: usize) -> Defines {
        let o = self;
        let b = u32::from;
        [
            head_dim as u32,
            1,
            o.threads(),
            o.block_n,
            o.stages,
            o.consumers,
            b(o.tma),
            b(o.ws),
            b(o.ov),
            b(o.pp),
            b(o.pe),
            b(o.dt),
            b(o.ts),
            o.xp,
            b(o.lr),
            b(o.st),
            b(o.rt),
            o.op,
            b(o.oq),
            b(o.rs),
            b(o.hl),
            b(o.mc),
            b(o.qr),
            o.smem(head_dim) as u32,
        ]
    }

    /// `--config` text as the boolean levers' table wrote it.
    fn text(&self) -> String {
        let o = self;
        let b = u32::from;
        format!(
            "block_n={},stages={},consumer_warpgroups={},loads={},warp_specialized={},overlap={},pingpong={},\
             persistent={},dynamic_tiles={},tma_store={},exp2_poly={},lazy_rescale={},split_tail={},ring_test={},\
             o_passes={},o_in_q={},rowsum_mma={},half_last={},multicast={},q_in_regs={}",
            o.block_n,
            o.stages,
            o.consumers,
            if o.tma { "tma" } else { "cp_async" },
            b(o.ws),
            b(o.ov),
            b(o.pp),
            b(o.pe),
            b(o.dt),
            b(o.ts),
            o.xp,
            b(o.lr),
            b(o.st),
            b(o.rt),
            o.op,
            b(o.oq),
            b(o.rs),
            b(o.hl),
            b(o.mc),
            b(o.qr)
        )
    }

    /// The eleven switches of the old space's bit loop (and `tma`, `op`) set from `bits`.
    fn with_bits(self, bits: u32) -> Old {
        let [ws, ov, pp, pe, dt, ts, st, rt, oq, mc, qr] =
            [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10].map(|b| bits & (1 << b) != 0);
        Old { ws, ov, pp, pe, dt, ts, st, rt, oq, mc, qr, ..self }
    }
}

/// The old space at a head dim (valid or not): the levers' values, every combination of the
/// eleven switches, the polynomial exponential and the row sums at hd64, O's passes above it.
fn old_space(head_dim: usize) -> impl Iterator<Item = Old> {
    let polys: &[u32] = if head_dim <= 64 { &[0, 4, 6, 8] } else { &[0] };
    let passes: &[u32] = if head_dim > 64 { &[1, 2] } else { &[1] };
    let rowsums: &[bool] = if head_dim == 64 { &[false, true] } else { &[false] };
    let mut out = Vec::new();
    for block_n in WgmmaConfig::BLOCK_N {
        for stages in WgmmaConfig::STAGES {
            for consumers in WgmmaConfig::CONSUMER_WARPGROUPS {
                for tma in [false, true] {
                    for &xp in polys {
                        for lr in [false, true] {
                            for &op in passes {
                                for &rs in rowsums {
                                    for hl in [false, true] {
                                        let o = Old { block_n, stages, consumers, tma, xp, lr, op, rs, hl, ..OFF };
                                        out.push(o);
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
    out.into_iter().flat_map(|o| (0..2048).map(move |bits| o.with_bits(bits)))
}

const OFF: Old = Old {
    block_n: 64,
    stages: 1,
    consumers: 1,
    tma: false,
    ws: false,
    ov: false,
    pp: false,
    pe: false,
    dt: false,
    ts: false,
    xp: 0,
    lr: false,
    st: false,
    rt: false,
    op: 1,
    oq: false,
    rs: false,
    hl: false,
    mc: false,
    qr: false,
};

/// A kernel's defines in [`DEFINES`] order (each exactly once, besides the name).
fn defines_of(spec: &KernelSpec) -> Defines {
    let all = spec.defines();
    assert_eq!(all.len(), DEFINES.len() + 1, "{}", spec.name());
    DEFINES.map(|d| {
        let (_, v) = all.iter().find(|(n, _)| *n == format!("EVOATTN_{d}")).unwrap_or_else(|| panic!("no {d}"));
        v.parse().expect("a number")
    })
}

fn spec(c: WgmmaConfig, head_dim: usize) -> KernelSpec {
    KernelSpec { config: KernelConfig::Wgmma(c), dtype: crate::problem::Dtype::Bf16, head_dim }
}

#[test]
fn the_typed_space_holds_exactly_the_boolean_spaces_valid_kernels() {
    for head_dim in [64, 128, 256] {
        let mut old: Vec<Defines> =
            old_space(head_dim).filter(|o| o.valid(head_dim)).map(|o| o.defines(head_dim)).collect();
        let mut new: Vec<Defines> = WgmmaConfig::space(head_dim)
            .map(|c| spec(c, head_dim))
            .filter(|s| s.validate(Arch::Sm90a).is_ok())
            .map(|s| defines_of(&s))
            .collect();
        old.sort_unstable();
        new.sort_unstable();
        // Distinct kernels on both sides, and the same ones.
        let len = new.len();
        new.dedup();
        assert_eq!(new.len(), len, "hd{head_dim}: two configs with the same defines");
        assert_eq!((old.len(), head_dim), (new.len(), head_dim));
        assert!(old == new, "hd{head_dim}: the valid kernels differ");
        println!("hd{head_dim}: {} valid kernels of {} configs", new.len(), WgmmaConfig::space(head_dim).count());
    }
}

#[test]
fn every_old_combination_reads_as_its_kernel_or_is_refused() {
    let (mut read, mut refused) = (0, 0);
    for head_dim in [64, 128, 256] {
        for consumers in WgmmaConfig::CONSUMER_WARPGROUPS {
            for block_n in [64, 80] {
                for tma in [false, true] {
                    for op in [1, 2] {
                        for bits in 0..2048 {
                            for [rs, hl] in [[false, false], [true, false], [false, true]] {
                                let o = Old { block_n, stages: 2, consumers, tma, op, rs, hl, ..OFF }.with_bits(bits);
                                let parsed = crate::config::lever::with_overrides(WgmmaConfig::BASE, &o.text());
                                let valid =
                                    parsed.as_ref().is_ok_and(|c| spec(*c, head_dim).validate(Arch::Sm90a).is_ok());
                                assert_eq!(valid, o.valid(head_dim), "hd{head_dim} {}: {parsed:?}", o.text());
                                if let (true, Ok(c)) = (valid, parsed) {
                                    assert_eq!(defines_of(&spec(c, head_dim)), o.defines(head_dim), "{}", o.text());
                                    read += 1;
                                } else {
                                    refused += 1;
                                }
                            }
                        }
                    }
                }
            }
        }
    }
    assert!(read > 1000 && refused > read, "{read} read, {refused} refused");
}

#[test]
fn each_axis_value_sets_the_switches_its_methods_read() {
    for p in Pipeline::ALL {
        let on = |d: &str| Pipeline::VARIANTS[p as usize].defines.iter().find(|(n, _)| *n == d).map(|(_, v)| *v);
        assert_eq!(on("loads_tma"), Some(u32::from(p.loads() == Loads::Tma)), "{p:?}");
        assert_eq!(on("warp_specialized"), Some(u32::from(p.warp_specialized())), "{p:?}");
        assert_eq!(on("overlap"), Some(u32::from(p.overlap())), "{p:?}");
        assert_eq!(on("pingpong"), Some(u32::from(p == Pipeline::PingPong)), "{p:?}");
    }
    for s in Schedule::ALL {
        let on = |d: &str| Schedule::VARIANTS[s as usize].defines.iter().find(|(n, _)| *n == d).map(|(_, v)| *v);
        assert_eq!(on("persistent"), Some(u32::from(s.persistent())), "{s:?}");
        assert_eq!(on("dynamic_tiles"), Some(u32::from(s == Schedule::Claimed)), "{s:?}");
        assert_eq!(on("split_tail"), Some(u32::from(s == Schedule::SplitTail)), "{s:?}");
    }
    for o in OStaging::ALL {
        let on = |d: &str| OStaging::VARIANTS[o as usize].defines.iter().find(|(n, _)| *n == d).map(|(_, v)| *v);
        assert_eq!(on("tma_store"), Some(u32::from(o.tma_store())), "{o:?}");
        assert_eq!(on("o_passes"), Some(o.passes()), "{o:?}");
        assert_eq!(on("o_in_q"), Some(u32::from(o == OStaging::QRows)), "{o:?}");
    }
}

#[test]
fn e4m3_takes_128_key_blocks_the_pipelined_consumers_and_o_from_registers_or_its_own_tile() {
    let fp8 = |text: &str, d: usize| {
        let config = KernelConfig::Wgmma(plan::fp8_default(d)).with_overrides(text).expect("levers");
        KernelSpec { config, dtype: Dtype::E4m3, head_dim: d }.validate(Arch::Sm90a)
    };
    for d in [64, 128, 256] {
        assert_eq!(fp8("", d), Ok(()));
        assert_eq!(fp8("schedule=claimed,ring_test=1", d), Ok(()));
    }
    let refused = |text: &str, says: &str| {
        let err = fp8(text, 128).expect_err(text);
        assert!(err.contains("E4M3") && err.contains(says), "{text}: {err}");
    };
    refused("block_n=176", "block_n");
    refused("block_n=64", "block_n");
    refused("pipeline=specialized", "pipeline");
    // O leaves from registers or through a staging tile of its own (16-bit rows), never through
    // the Q rows, which hold E4M3 bytes.
    for d in [64, 128, 256] {
        assert_eq!(fp8("o_staging=tile", d), Ok(()));
        assert_eq!(fp8("o_staging=tile,schedule=persistent", d), Ok(()));
    }
    assert_eq!(fp8("o_staging=half-tile,schedule=persistent", 128), Ok(()));
    refused("o_staging=q-rows,schedule=persistent", "o_staging");
    // E4M3's lazy rescale keeps a slack of its own (P already scaled by 2^8).
    assert_eq!(fp8("lazy_rescale=1", 128), Ok(()));
    refused("multicast=1", "multicast");
    refused("half_last=1", "half_last");
    // 256-key blocks are E4M3's alone (whole Vᵀ rows); 16-bit inputs refuse them.
    assert_eq!(fp8("block_n=256,consumer_warpgroups=2", 64), Ok(()));
    let sixteen = KernelConfig::Wgmma(plan::default(128)).with_overrides("block_n=256").expect("levers");
    assert!(KernelSpec { config: sixteen, dtype: Dtype::Bf16, head_dim: 128 }.validate(Arch::Sm90a).is_err());
}
