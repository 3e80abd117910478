//! Every kernel compiles with NVRTC for every arch it supports (`Impl::archs`; no GPU needed)
//! and passes the resource gate with its default configuration and, for `wgmma`, with every
//! config the planner picks on the fa3 grid; the `mma`, `wgmma`, `splitkv`, `resident` and `mma-bwd`
//! search spaces compile for sm_90a.
//!
//! Without NVRTC these tests print "skipped: <reason>", except under CI (`CI` set), where a
//! missing NVRTC is a failure.

mod common;

use common::nvrtc_or_skip;
use evoattn::kernels::{SourceFile, HEADERS};
use evoattn::runtime::cache::CubinCache;
use evoattn::runtime::compile::{compile, compile_parallel, options, CompiledKernel};
use evoattn::{
    defaults, Arch, Causal, Dtype, Error, Impl, KernelConfig, KernelSpec, Layout, OStaging, Pipeline, Problem,
    Schedule, Shape,
};
use std::time::Instant;

/// SMs of the H100 the planner's configs are taken for.
const H100_SMS: u32 = 132;

fn threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// A cache in a fresh directory, so that every compile below is a cold one.
fn fresh_cache() -> (tempfile::TempDir, CubinCache) {
    let dir = tempfile::tempdir().expect("temp dir");
    let cache = CubinCache::open(dir.path().to_path_buf()).expect("open cache");
    (dir, cache)
}

fn row(k: &CompiledKernel) -> String {
    let r = &k.resources;
    format!(
        "{:7} {:44} {:>3} regs  spill {}/{}  stack {}  smem {}+{}  {:>6.0} ms{}",
        k.arch.name(),
        k.spec.name(),
        r.registers,
        r.spill_store_bytes,
        r.spill_load_bytes,
        r.stack_frame_bytes,
        r.static_smem_bytes,
        r.dynamic_smem_bytes,
        k.elapsed.as_secs_f64() * 1e3,
        if k.from_cache { " (cached)" } else { "" }
    )
}

#[test]
fn every_default_kernel_compiles_for_every_arch_and_passes_the_gate() {
    let Some(nvrtc) = nvrtc_or_skip() else { return };
    let (_dir, cache) = fresh_cache();
    let mut jobs = Vec::new();
    for imp in Impl::ALL {
        for &arch in imp.archs() {
            for &dtype in imp.dtypes() {
                for &head_dim in imp.head_dims() {
                    jobs.push((
                        KernelSpec { config: defaults::config(imp, arch, dtype, head_dim), dtype, head_dim },
                        arch,
                    ));
                }
            }
        }
    }
    // The planner adapts `wgmma` per problem (persistent blocks, key blocks, the split tail; for
    // E4M3 persistent blocks and V transposed in the kernel or given so): every config it picks on the fa3
    // grid's lengths, both masks, 16-bit and E4M3, on an H100's 132 SMs.
    let mut planned = Vec::new();
    for &head_dim in Impl::Wgmma.head_dims() {
        for shape in Shape::fa3_grid(head_dim) {
            for (causal, dtype) in
                [Causal::None, Causal::TopLeft].into_iter().flat_map(|c| [(c, Dtype::Bf16), (c, Dtype::E4m3)])
            {
                let problem = Problem::dense(shape, dtype, Layout::Bhsd).with_causal(causal);
                // E4M3 also with V given transposed (`vt_given`).
                let given = dtype.is_fp8().then(|| problem.clone().with_v_keys_contiguous());
                for problem in std::iter::once(problem).chain(given) {
                    let config = defaults::for_problem(Impl::Wgmma, Arch::Sm90a, &problem, H100_SMS);
                    let spec = KernelSpec { config, dtype, head_dim };
                    if config != defaults::config(Impl::Wgmma, Arch::Sm90a, dtype, head_dim) && !planned.contains(&spec)
                    {
                        planned.push(spec);
                    }
                }
            }
        }
    }
    // `evoattn trace` instruments whatever the planner picks: the marks must fit its registers.
    let traced: Vec<KernelSpec> = planned
        .iter()
        .chain(std::iter::once(&KernelSpec {
            config: defaults::config(Impl::Wgmma, Arch::Sm90a, Dtype::Bf16, 64),
            dtype: Dtype::Bf16,
            head_dim: 64,
        }))
        .map(|spec| KernelSpec { config: spec.config.with_overrides("trace=1").unwrap(), ..*spec })
        .collect();
    jobs.extend(planned.into_iter().chain(traced).map(|spec| (spec, Arch::Sm90a)));
    let start = Instant::now();
    let results = compile_parallel(&jobs, Some(&cache), threads(), || {});
    println!(
        "NVRTC {:?} from {}: {} cold compiles in {:.1?}",
        nvrtc.version(),
        nvrtc.library(),
        jobs.len(),
        start.elapsed()
    );

    let mut failures = Vec::new();
    for ((spec, arch), result) in jobs.iter().zip(results) {
        match result {
            Ok(kernel) => {
                assert!(!kernel.from_cache, "{}: the cache was fresh", spec.name());
                assert!(kernel.cubin.starts_with(b"\x7fELF"), "{}: CUBIN is not an ELF image", spec.name());
                assert_eq!(kernel.resources.dynamic_smem_bytes as usize, spec.dynamic_smem_bytes());
                println!("{}", row(&kernel));
                if let Err(err) = kernel.gate() {
                    failures.push(err.to_string());
                }
            }
            Err(err) => failures.push(format!("{} for {arch}: {err}", spec.name())),
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} default variants failed:\n{}",
        failures.len(),
        jobs.len(),
        failures.join("\n")
    );
}

/// Compiles every valid variant of `imp`'s space that `keep` keeps for `dtypes` on sm_90a;
/// compile errors fail, resource-gate failures are listed (the tuner's gate skips those variants).
fn space_compiles_for(
    imp: Impl,
    arch: Arch,
    dtypes: &[Dtype],
    keep: impl Fn(&KernelSpec) -> bool,
) -> (usize, Vec<String>) {
    let (_dir, cache) = fresh_cache();
    let mut jobs = Vec::new();
    let mut rejected = 0;
    for &dtype in dtypes {
        for &head_dim in imp.head_dims() {
            for spec in KernelSpec::space(imp, dtype, head_dim).filter(|s| keep(s)) {
                match spec.validate(arch) {
                    Ok(()) => jobs.push((spec, arch)),
                    Err(_) => rejected += 1,
                }
            }
        }
    }
    let start = Instant::now();
    let results = compile_parallel(&jobs, Some(&cache), threads(), || {});
    let elapsed = start.elapsed();

    let (mut gate_failures, mut compile_failures) = (Vec::new(), Vec::new());
    for ((spec, _), result) in jobs.iter().zip(results) {
        match result {
            Ok(kernel) => {
                println!("{}", row(&kernel));
                if let Err(err) = kernel.gate() {
                    gate_failures.push(err.to_string());
                }
            }
            Err(err) => compile_failures.push(format!("{}: {err}", spec.name())),
        }
    }
    println!(
        "{imp} space on {arch}: {} compiled in {elapsed:.1?}, {rejected} rejected by validate, {} fail the resource gate:",
        jobs.len(),
        gate_failures.len()
    );
    for failure in &gate_failures {
        println!("  {failure}");
    }
    assert!(!jobs.is_empty());
    assert!(
        compile_failures.is_empty(),
        "{} of {} valid {imp} variants failed to compile:\n{}",
        compile_failures.len(),
        jobs.len(),
        compile_failures.join("\n")
    );
    (jobs.len(), gate_failures)
}

#[test]
fn the_mma_space_compiles_for_sm90a() {
    if nvrtc_or_skip().is_none() {
        return;
    }
    space_compiles_for(Impl::Mma, Arch::Sm90a, Impl::Mma.dtypes(), |_| true);
}

#[test]
fn the_backward_space_compiles_for_sm80_and_sm90a() {
    if nvrtc_or_skip().is_none() {
        return;
    }
    // Both dQ reductions: scalar adds on sm_80, `red.v2` on sm_90.
    for arch in [Arch::Sm80, Arch::Sm90a] {
        let (compiled, gate_failures) = space_compiles_for(Impl::MmaBwd, arch, Impl::MmaBwd.dtypes(), |_| true);
        // Every config but those whose dK, dV, S and dP overflow 255 registers at 128 query rows
        // (or 64 at hd128) passes; the defaults are among them (the test above).
        assert!(gate_failures.len() < compiled, "{arch}: every backward variant fails the gate");
    }
}

#[test]
fn the_splitkv_space_compiles_for_sm90a() {
    if nvrtc_or_skip().is_none() {
        return;
    }
    // One dtype, as for wgmma: the main loop is mma's (whose space covers both); what is new is
    // the packed-row Q load, the partial write and both combine kinds. block_m 16 (one warp)
    // and 64 stand for the four: the combine's warp loop is the only place block_m enters.
    // TMA loads change only the K/V ring and its addressing: block_m 16 (the default) alone.
    let keep = |s: &KernelSpec| {
        matches!(s.config, KernelConfig::Splitkv(c)
            if c.block_m == 16 || (c.block_m == 64 && c.loads == evoattn::config::Loads::CpAsync))
    };
    let (compiled, gate_failures) = space_compiles_for(Impl::Splitkv, Arch::Sm90a, &[Dtype::Bf16], keep);
    assert!(gate_failures.len() < compiled / 4, "{gate_failures:?}");
}

#[test]
fn splitkv_with_a_combine_kernel_holds_both_kernels() {
    if nvrtc_or_skip().is_none() {
        return;
    }
    let (_dir, cache) = fresh_cache();
    let config =
        defaults::config(Impl::Splitkv, Arch::Sm80, Dtype::F16, 128).with_overrides("combine=kernel").expect("levers");
    let spec = KernelSpec { config, dtype: Dtype::F16, head_dim: 128 };
    let kernel = compile(&spec, Arch::Sm80, Some(&cache)).expect("compiles");
    kernel.gate().expect("passes the gate");
    let combine = spec.combine_kernel_name().expect("a combine kernel");
    let has = |name: &str| {
        kernel.cubin.windows(name.len() + 1).any(|w| w[..name.len()] == *name.as_bytes() && w[name.len()] == 0)
    };
    assert!(has(&spec.name()) && has(&combine), "the CUBIN's symbols lack {combine}");
    // The fused default has no second kernel.
    let fused = KernelSpec { config: defaults::config(Impl::Splitkv, Arch::Sm80, Dtype::F16, 128), ..spec };
    let fused_kernel = compile(&fused, Arch::Sm80, Some(&cache)).expect("compiles");
    let suffix = b"_combine\0";
    assert!(!fused_kernel.cubin.windows(suffix.len()).any(|w| w == suffix));
}

#[test]
fn the_wgmma_space_compiles_for_sm90a() {
    if nvrtc_or_skip().is_none() {
        return;
    }
    // One dtype: f16 and bf16 differ only in the instruction's type suffix, and the space is
    // the slowest compile of the suite. Every wgmma N (block_n 64..192, head dim 64..256) is in it.
    // TMA stores change the epilogue and, on persistent blocks, the layout past the rings: every
    // pipeline, key block, consumer count and head dim with them, at one ring depth (2 stages),
    // which keeps the space's compile time near what it was without them. The lazy rescale
    // changes only the softmax step and the rescale's call sites: every pipeline, consumer count
    // and head dim with it, at 2 stages, 64- and 128-key blocks and MUFU exponentials. The split
    // tail changes the persistent scheduler and adds the merge after the main loop: every
    // persistent pipeline, consumer count and head dim with it, at the same ring depths and key
    // blocks, without the lazy rescale. The ring tests change the pipelined loop's waits: every
    // pipeline, consumer count and head dim with them, at the lazy rescale's ring depth and key
    // blocks, without the lazy rescale and the split tail. O's staging tile in two column
    // passes changes the persistent epilogue: every persistent pipeline, consumer count and head
    // dim over 64 with it, split tail or not, at 2 stages, 64-, 128- and 176-key blocks (the
    // planner's rings), without the lazy rescale and the ring tests. O staged in the Q rows
    // changes Q's barriers and loads: every persistent pipeline (static or claimed), consumer count and head
    // dim with it, at the same ring depth and key blocks (and hd256's 80), without those two.
    // The row sums on the tensor cores (hd64 only) change P·V's width and the softmax's sums:
    // every pipeline and consumer count with them, at the lazy rescale's ring depth and key
    // blocks, without the lazy rescale and O in the Q rows. The half last block changes the
    // pipelined consumer's last steps: every pipeline, consumer count and head dim with it, at
    // the same ring depth and key blocks, without the lazy rescale, the split tail and O's
    // staging passes or Q rows (whose epilogues it does not touch). The K/V multicast changes
    // the producer's loads, the stages' releases and the block's start and end: every pipeline
    // (static tiles), consumer count and head dim with it, at the same ring depth and key
    // blocks, with O staged in its own tile or the Q rows, without the lazy rescale, the ring
    // tests, the row sums, the half block and O's staging passes (which it does not touch). Q in
    // registers changes Q·Kᵀ's A operand and the consumer's tile start: every pipeline it runs
    // in (the pipelined consumer) at one and two consumers and head dims 64 and 128, at the same
    // ring depth and key blocks, without the switches that leave Q·Kᵀ alone; with three
    // consumers and at hd256 every variant spills (no registers left), which the gate refuses.
    let keep = |s: &KernelSpec| match s.config {
        KernelConfig::Wgmma(c) => {
            // Off the 2-stage MUFU ring of these key blocks.
            let off_ring = |blocks: &[u32]| c.stages != 2 || c.exp2_poly != 0 || !blocks.contains(&c.block_n);
            let narrow = off_ring(&[64, 128]);
            let tma_store = c.o_staging.tma_store();
            let split_tail = c.schedule == Schedule::SplitTail;
            let (halves, o_in_q) = (c.o_staging == OStaging::HalfTile, c.o_staging == OStaging::QRows);
            let left_out = (tma_store && c.stages != 2)
                || (c.lazy_rescale && narrow)
                || (split_tail && (narrow || c.lazy_rescale))
                || (c.ring_test && (narrow || c.lazy_rescale || split_tail))
                || (halves && (off_ring(&[64, 128, 176]) || c.lazy_rescale || c.ring_test))
                || (o_in_q && (off_ring(&[64, 80, 128, 176]) || c.lazy_rescale || c.ring_test))
                || (c.rowsum_mma && (narrow || c.lazy_rescale || o_in_q))
                || (c.half_last && (narrow || c.lazy_rescale || split_tail || halves || o_in_q))
                || (c.multicast && (narrow || c.lazy_rescale || c.ring_test || c.rowsum_mma || c.half_last || halves))
                || (c.q_in_regs
                    && (narrow
                        || c.lazy_rescale
                        || c.ring_test
                        || c.rowsum_mma
                        || c.half_last
                        || halves
                        || o_in_q
                        || c.multicast
                        || c.consumer_warpgroups > 2
                        || s.head_dim > 128));
            !left_out
        }
        _ => true,
    };
    let (compiled, gate_failures) = space_compiles_for(Impl::Wgmma, Arch::Sm90a, &[Dtype::Bf16], keep);
    // At least the one-warpgroup and two-warpgroup variants of every head dim pass the gate.
    assert!(compiled >= 2 * Impl::Wgmma.head_dims().len());
    assert!(gate_failures.len() < compiled / 4, "{gate_failures:?}");
}

#[test]
fn the_wgmma_e4m3_space_compiles_for_sm90a() {
    if nvrtc_or_skip().is_none() {
        return;
    }
    // E4M3 takes 128-key blocks, the pipelined consumers and O from registers or a staging tile
    // of its own (validate_fp8): every pipeline, consumer count, schedule, O staging and head
    // dim, at 2 stages with the MUFU
    // exponentials, with at most one of the switches that change the consumer's loop (ring
    // tests, Q in registers), leaving out what spills (session 31): three consumers at hd128
    // (160 registers for S, P and O), Q in registers at hd256. Lazy rescale changes only the
    // softmax step every pipeline shares: sampled with the ping-pong consumers without ring
    // tests (the E4M3 defaults' loop), which keeps the sample's compile time in CI's budget.
    let keep = |s: &KernelSpec| match s.config {
        KernelConfig::Wgmma(c) => {
            let spills = (c.consumer_warpgroups == 3 && s.head_dim == 128) || (c.q_in_regs && s.head_dim == 256);
            let lazy_sampled = !c.lazy_rescale || (c.pipeline == Pipeline::PingPong && !c.ring_test);
            c.stages == 2 && c.exp2_poly == 0 && !(c.ring_test && c.q_in_regs) && !spills && lazy_sampled
        }
        _ => true,
    };
    let (compiled, gate_failures) = space_compiles_for(Impl::Wgmma, Arch::Sm90a, &[Dtype::E4m3], keep);
    assert!(compiled >= 2 * Impl::Wgmma.head_dims().len());
    assert!(gate_failures.is_empty(), "{gate_failures:?}");
}

#[test]
fn the_resident_space_compiles_for_sm90a() {
    if nvrtc_or_skip().is_none() {
        return;
    }
    // One dtype, as for wgmma (the same headers). 64-key blocks only with one and four resident
    // blocks: block_n enters the GEMM widths and the softmax, key_blocks only the layout.
    let keep = |s: &KernelSpec| matches!(s.config, KernelConfig::Resident(c) if c.block_n == 128 || c.key_blocks == 1 || c.key_blocks == 4);
    let (compiled, gate_failures) = space_compiles_for(Impl::Resident, Arch::Sm90a, &[Dtype::Bf16], keep);
    // Every valid variant fits the registers: the resource gate passes them all.
    assert!(compiled >= Impl::Resident.head_dims().len());
    assert!(gate_failures.is_empty(), "{gate_failures:?}");
}

#[test]
fn a_second_compile_is_served_from_the_cache() {
    if nvrtc_or_skip().is_none() {
        return;
    }
    let (_dir, cache) = fresh_cache();
    let spec = KernelSpec {
        config: defaults::config(Impl::Reference, Arch::Sm80, Dtype::F16, 64),
        dtype: Dtype::F16,
        head_dim: 64,
    };
    let cold = compile(&spec, Arch::Sm80, Some(&cache)).expect("cold compile");
    let warm = compile(&spec, Arch::Sm80, Some(&cache)).expect("cached compile");
    assert!(!cold.from_cache);
    assert!(warm.from_cache);
    assert_eq!(warm.cubin, cold.cubin);
    assert_eq!(warm.resources, cold.resources);
    assert_eq!(warm.log, cold.log);
    // Another arch is another entry.
    assert!(!compile(&spec, Arch::Sm86, Some(&cache)).expect("sm_86").from_cache);
    // Without a cache nothing is read.
    assert!(!compile(&spec, Arch::Sm80, None).expect("uncached").from_cache);
}

#[test]
fn an_invalid_config_is_rejected_before_compiling() {
    // validate runs first, so this needs no NVRTC.
    let config = defaults::config(Impl::Mma, Arch::Sm89, Dtype::F16, 64)
        .with_overrides("block_m=128,block_n=128,stages=3")
        .expect("levers");
    let spec = KernelSpec { config, dtype: Dtype::F16, head_dim: 64 };
    match compile(&spec, Arch::Sm89, None) {
        Err(Error::Unsupported { imp, reason }) => {
            assert_eq!(imp, "mma");
            assert!(reason.contains("shared memory"), "{reason}");
        }
        other => panic!("expected Unsupported, got {other:?}"),
    }
}

#[test]
fn a_broken_source_is_a_compile_failure_with_the_log() {
    let Some(nvrtc) = nvrtc_or_skip() else { return };
    let unit = SourceFile {
        name: "broken.cu",
        text: "#include \"common.cuh\"\nextern \"C\" __global__ void broken() { undeclared_name = 1; }\n",
    };
    let spec = KernelSpec {
        config: defaults::config(Impl::Reference, Arch::Sm80, Dtype::F16, 64),
        dtype: Dtype::F16,
        head_dim: 64,
    };
    let opts = options(&spec, Arch::Sm80);
    let failure = nvrtc.compile_cubin(&unit, HEADERS, "broken", Arch::Sm80, &opts).expect_err("must not compile");
    assert_eq!(failure.kernel, "broken");
    assert_eq!(failure.arch, "sm_80");
    assert_eq!(failure.source_name, "broken.cu");
    assert_eq!(failure.options, opts);
    assert!(failure.log.contains("broken.cu(2)") && failure.log.contains("undeclared_name"), "{}", failure.log);
    let text = Error::Compile(Box::new(failure)).to_string();
    assert_eq!(text.lines().next(), Some("NVRTC failed to compile broken for sm_80 (source broken.cu)"));
    assert!(text.contains("-DEVOATTN_HEAD_DIM=64"), "{text}");
}

#[test]
fn the_mma8_space_compiles_for_sm89_and_sm90a() {
    if nvrtc_or_skip().is_none() {
        return;
    }
    // The portable FP8 path: native FP8 mma.sync on sm_89, emulated by ptxas on Hopper, where
    // hd256 spills unless two warps split O (docs/decisions/mma8.md); every default passes.
    for arch in [Arch::Sm89, Arch::Sm90a] {
        // E4M3 with bf16 O: e4m3f16 differs in O's conversion only, compiled with each default.
        let (compiled, _) = space_compiles_for(Impl::Mma8, arch, &[Dtype::E4m3], |_| true);
        assert!(compiled >= Impl::Mma8.head_dims().len());
    }
}
