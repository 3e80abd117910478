//! GPU tests: the real backend on the machine's GPU. Each test first asks `evoattn info`
//! whether a GPU is usable and, if not, prints why and returns (CI has no GPU). On the GPU
//! machine, which has no Rust toolchain, the prebuilt test binary runs with EVOATTN_BIN
//! pointing at the prebuilt `evoattn`.

mod common;

use common::{assert_resumed, kill_when_stored, stored_rows};
use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

fn bin() -> String {
    std::env::var("EVOATTN_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_evoattn").to_string())
}

/// Runs evoattn on the GPU; `check` with `-v`, whose symbol names under each row the tests read
/// (the table itself names kernels by family and levers).
fn evoattn(args: &[&str]) -> Output {
    let verbose: &[&str] = if args.first() == Some(&"check") { &["-v"] } else { &[] };
    Command::new(bin()).args(args).args(verbose).env_remove("EVOATTN_BACKEND").output().expect("evoattn runs")
}

/// None when a GPU is usable, else the reason to skip.
fn no_gpu() -> Option<String> {
    let out = evoattn(&["info"]);
    if out.status.success() {
        return None;
    }
    let err = String::from_utf8_lossy(&out.stderr);
    Some(err.lines().next().unwrap_or("evoattn info failed").to_string())
}

macro_rules! require_gpu {
    () => {
        if let Some(reason) = no_gpu() {
            println!("skipped: no usable GPU: {reason}");
            return;
        }
    };
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Whether the GPU is a Hopper (sm_90); if not, prints that the test skips because `needs`.
fn hopper_or_skip(needs: &str) -> bool {
    let info = stdout(&evoattn(&["info"]));
    let hopper = info.contains("(sm_90");
    if !hopper {
        println!("skipped: {needs}; this GPU is not one: {}", info.lines().nth(2).unwrap_or(""));
    }
    hopper
}

#[test]
fn mma_passes_the_small_set_against_float64() {
    require_gpu!();
    let out = evoattn(&["check", "--preset", "small", "--impl", "mma"]);
    let text = stdout(&out);
    assert!(out.status.success(), "{text}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(text.contains("0 failed"), "{text}");
    assert!(text.contains("evoattn_mma_"), "{text}");
}

#[test]
fn reference_kernel_matches_float64() {
    require_gpu!();
    let out = evoattn(&["check", "--preset", "small", "--preset", "sanitize", "--impl", "reference", "--seeds", "1"]);
    let text = stdout(&out);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("against the reference kernel") && text.contains(" 0 against"), "{text}");
}

#[test]
fn non_default_mma_levers_are_correct() {
    require_gpu!();
    for config in ["block_m=64,block_n=32,stages=1,q_in_regs=0", "block_m=128,block_n=128,stages=3"] {
        let out = evoattn(&[
            "check",
            "--shape",
            "1,4,300,64,2,517",
            "--dtype",
            "all",
            "--causal",
            "all",
            "--impl",
            "mma",
            "--config",
            config,
        ]);
        assert!(out.status.success(), "{config}: {}", stdout(&out));
    }
}

#[test]
fn large_cases_use_the_reference_kernel_and_pass() {
    require_gpu!();
    let out =
        evoattn(&["check", "--shape", "1,8,4097,128,2", "--dtype", "bf16", "--causal", "bottom-right", "--seeds", "1"]);
    let text = stdout(&out);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("reference-gpu"), "{text}");
}

#[test]
fn an_impossible_config_fails_the_check_without_a_launch() {
    require_gpu!();
    // 1 MiB of shared memory at D=256 fits no GPU: the case must fail with the reason.
    let out =
        evoattn(&["check", "--shape", "1,1,64,256", "--impl", "mma", "--config", "block_m=128,block_n=128,stages=3"]);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    assert!(stdout(&out).contains("shared memory"), "{}", stdout(&out));
}

/// `check --impl IMP` on `shapes` over every dtype, mask and layout, with `extra` arguments.
fn check_all(imp: &str, shapes: &[&str], extra: &[&str]) -> Output {
    let args = ["check", "--impl", imp, "--dtype", "all", "--causal", "all", "--layout", "all"];
    evoattn(&[&args[..], &shape_args(shapes), extra].concat())
}

/// `--shape S` for each of `shapes`.
fn shape_args<'a>(shapes: &[&'a str]) -> Vec<&'a str> {
    shapes.iter().flat_map(|&shape| ["--shape", shape]).collect()
}

/// `check --impl wgmma` on unmasked `shapes` (the split tail refuses causal ones), every dtype,
/// two seeds, with `extra` arguments.
fn check_unmasked(shapes: &[&str], extra: &[&str]) -> Output {
    let args = ["check", "--impl", "wgmma", "--dtype", "all", "--seeds", "2"];
    evoattn(&[&args[..], &shape_args(shapes), extra].concat())
}

/// `check --impl wgmma` on `shapes` with the planner's own configs, every mask.
fn check_planned(shapes: &[&str]) -> Output {
    evoattn(&[&["check", "--impl", "wgmma", "--causal", "all"][..], &shape_args(shapes)].concat())
}

/// Asserts that the `check` run `out` passed and ran a kernel whose name holds `tag` (the lever
/// under test); `what` names the run in the failure message.
fn assert_passed_with(out: &Output, tag: &str, what: &str) {
    let text = stdout(out);
    assert!(out.status.success(), "{what}: {text}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(text.contains(tag), "{what}: {text}");
}

#[test]
fn resident_passes_short_keys_with_each_consumer_arrangement() {
    require_gpu!();
    // Odd lengths, GQA, Sq > Sk (rows that see no key under bottom-right) and both head dims on
    // the configs `--impl resident` plans; then three consumers over uneven rounds (padded
    // ping-pong turns), O stored from registers without turns, and each tile's keys split over a
    // pair of consumers (a part with no key block at 64 keys; the fewer part's padded turns).
    let out = check_all("resident", &["2,4,300,64", "2,8,200,64,2,450", "1,2,700,64,1,64", "2,4,100,128,4,250"], &[]);
    assert_passed_with(&out, "0 failed", "resident, planned configs");
    let cases: [(&[&str], &str); 4] = [
        (&["8,16,512,64", "4,16,500,64"], "consumer_warpgroups=3"),
        (&["4,8,512,64", "2,4,256,128"], "tma_store=0,pingpong=0"),
        (&["2,4,300,64", "1,2,700,64,1,64", "2,4,100,128,4,250"], "consumer_warpgroups=2,key_split=2,pingpong=1"),
        (&["4,8,500,64,8,300"], "consumer_warpgroups=4,key_split=2,overlap=0"),
    ];
    for (shapes, config) in cases {
        let out = check_all("resident", shapes, &["--seeds", "1", "--config-on-plan", "--config", config]);
        assert_passed_with(&out, "0 failed", config);
    }
}

#[test]
fn splitkv_passes_decode_and_tail_shapes() {
    require_gpu!();
    // Sq = 1 and 4 with GQA 8:1 and MQA, Sk not a multiple of any tile, Sq > Sk (rows that see
    // no key under bottom-right), and every head dim.
    let shapes = ["2,8,1,128,1,1000", "1,32,4,128,4,4097", "1,4,17,64,2,113", "2,2,130,256,1,77", "1,8,1,64,8,1"];
    let out = check_all("splitkv", &shapes, &["--seeds", "1"]);
    let text = stdout(&out);
    assert!(out.status.success(), "{text}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(text.contains("0 failed") && text.contains("evoattn_splitkv_"), "{text}");
}

#[test]
fn splitkv_levers_and_forced_split_counts_are_correct() {
    require_gpu!();
    for config in [
        "splits=3",
        "splits=1",
        "block_m=16,block_n=32,stages=2,key_warps=2,splits=7",
        "block_n=64,stages=6,key_warps=4,splits=5",
        "block_m=128,block_n=64,key_warps=1,q_in_regs=0,splits=128",
    ] {
        let out = check_all("splitkv", &["1,8,5,128,2,1023"], &["--seeds", "1", "--config", config]);
        assert!(out.status.success(), "{config}: {}", stdout(&out));
    }
}

#[test]
fn splitkv_tma_loads_are_correct_on_hopper() {
    require_gpu!();
    if !hopper_or_skip("loads=tma needs sm_90") {
        return;
    }
    // Every head dim with the default tiles and the narrowest (two key warps of 16 keys); up
    // to hd128 (where they fit) 6 stages, 64-row tiles and the combine kernel.
    let all = ["2,8,1,128,1,1000", "1,32,4,128,4,4097", "1,4,17,64,2,113", "2,2,130,256,1,77", "1,8,1,64,8,1"];
    for (config, shapes) in [
        ("loads=tma", &all[..]),
        ("loads=tma,block_n=32,key_warps=2,splits=7", &all[..]),
        ("loads=tma,block_n=64,stages=6,splits=5", &all[..3]),
        ("loads=tma,block_m=64,key_warps=1,q_in_regs=0,combine=kernel", &all[..3]),
    ] {
        let out = check_all("splitkv", shapes, &["--seeds", "1", "--config", config]);
        assert_passed_with(&out, "_ldtma", config);
    }
}

#[test]
fn wgmma_lazy_rescale_is_correct_on_hopper() {
    require_gpu!();
    if !hopper_or_skip("wgmma needs sm_90a") {
        return;
    }
    // Tails, GQA, Sq != Sk and both layouts, on the planner's configs (persistent, dynamic and
    // small-grid ones among them) and on the loop without warp specialisation. The odd seed's
    // wide inputs move a row's max by more than the slack after its first block, a negative
    // scale flips the reductions, and causal masks leave rows whose first keys come late.
    let shapes = ["2,4,333,64,2,900", "1,8,1000,128,2", "2,2,130,256,1,77", "4,16,1000,64,4,300"];
    for (config, extra) in [
        ("lazy_rescale=1", &["--config-on-plan"][..]),
        ("lazy_rescale=1", &["--config-on-plan", "--scale", "-0.3"][..]),
        ("lazy_rescale=1,pipeline=tma,schedule=grid,o_staging=registers", &[][..]),
    ] {
        let out = check_all("wgmma", &shapes, &[&["--config", config][..], extra].concat());
        assert_passed_with(&out, "_lr1", &format!("{config} {extra:?}"));
    }
}

#[test]
fn wgmma_rowsum_mma_is_correct_on_hopper() {
    require_gpu!();
    if !hopper_or_skip("wgmma needs sm_90a") {
        return;
    }
    // The row sums come from P·V's extra columns: on the planner's hd64 configs (one tile per
    // block, persistent two- and three-consumer ones, claimed causal tiles, the small grid's
    // one consumer) with tiles of one key block and of none (bottom-right rows before any key:
    // l = 0, O = 0), key tails, GQA, both layouts; the split tail's merge; the non-pipelined
    // consumer; then the planner's own choices, which are on (unmasked 1k, causal 2k).
    let shapes = ["8,16,1000,64,4,1023", "16,8,129,64", "8,8,700,64,8,300", "1,4,77,64,2,1500", "2,32,512,64"];
    let out = check_all("wgmma", &shapes, &["--config", "rowsum_mma=1", "--config-on-plan"]);
    assert_passed_with(&out, "_rs1", "rowsum_mma=1 on the planner's configs");
    let split = ["1,8,4000,64", "3,3,2100,64,1,1500"];
    let config = ["--config", "schedule=split-tail,block_n=128,rowsum_mma=1"];
    assert_passed_with(&check_unmasked(&split, &config), "_scst_ostl_xp0_lr0_rt0_rs1", "split tail");
    let plain = ["--config", "rowsum_mma=1,pipeline=specialized"];
    assert_passed_with(&check_unmasked(&split, &plain), "_rs1", "no overlap");
    let out = check_planned(&["16,32,1024,64", "4,8,2048,64"]);
    assert_passed_with(&out, "_rs1", "the planner's hd64 three-consumer configs");
}

#[test]
fn wgmma_half_last_is_correct_on_hopper() {
    require_gpu!();
    if !hopper_or_skip("wgmma needs sm_90a") {
        return;
    }
    // A consumer computes the first half of its last key block where its rows see none of the
    // rest: on the planner's configs that pass the resource gate with it (hd64's one, two and
    // three consumers, static and claimed tiles; hd128's short static ones), with key tails of
    // under half a block (1040, 129, 77: every consumer halves), tiles of one key block,
    // bottom-right rows before any key, GQA and both layouts; then the planner's own choice,
    // which is on (hd64 causal on claimed tiles).
    let shapes = ["8,16,1000,64,4,1040", "16,8,129,64", "8,8,700,64,8,300", "1,4,77,64,2,1500", "32,16,512,128"];
    let out = check_all("wgmma", &shapes, &["--config", "half_last=1", "--config-on-plan"]);
    assert_passed_with(&out, "_hl1", "half_last=1 on the planner's configs");
    let out = evoattn(&["check", "--impl", "wgmma", "--causal", "top-left,bottom-right", "--shape", "4,8,2048,64"]);
    assert_passed_with(&out, "_wg3_plpp_sccl_ostl_xp0_lr0_rt1_rs1_hl1_mc0_qr0", "the planner's hd64 causal 2k config");
}

#[test]
fn wgmma_ring_test_is_correct_on_hopper() {
    require_gpu!();
    if !hopper_or_skip("wgmma needs sm_90a") {
        return;
    }
    // The tested stages are the ones the turn then reads: on the planner's configs (persistent
    // two-consumer ones with rings that wrap across tiles, dynamic causal tiles, one tile per
    // block), tiles of one key block and of none (bottom-right causal rows before any key),
    // key tails, GQA and both layouts; then the planner's own hd64 choices, which are on: the
    // short problems' two consumers, and causal 2k's three on claimed tiles.
    let shapes = ["8,16,1000,64,4,1023", "4,16,300,128,16,517", "16,8,129,64", "8,8,700,64,8,300", "2,2,130,256,1,77"];
    let out = check_all("wgmma", &shapes, &["--config", "ring_test=1", "--config-on-plan"]);
    assert_passed_with(&out, "_rt1", "ring_test=1 on the planner's configs");
    let out = check_planned(&["32,8,512,64", "16,8,1024,64"]);
    assert_passed_with(&out, "_rt1", "the planner's hd64 short configs test the ring");
    let out = evoattn(&["check", "--impl", "wgmma", "--causal", "top-left,bottom-right", "--shape", "4,8,2048,64"]);
    assert_passed_with(&out, "_wg3_plpp_sccl_ostl_xp0_lr0_rt1", "the planner's hd64 causal 2k config");
}

#[test]
fn wgmma_o_passes_are_correct_on_hopper() {
    require_gpu!();
    if !hopper_or_skip("wgmma needs sm_90a") {
        return;
    }
    // O staged and stored in two column passes on persistent blocks: static, dynamic and split
    // tails, hd128 and hd256, rings that wrap across tiles, tiles of one key block and of none
    // (bottom-right rows before any key), key tails, GQA and both layouts; then the planner's
    // own choices that take it (hd256 short problems, both masks).
    let both = ["4,16,300,128,16,517", "1,4,700,128,1,300", "2,8,1000,256,2,1100", "2,2,130,256,1,77"];
    for (config, shapes) in [
        ("schedule=persistent,block_n=64,o_staging=half-tile", &both[..]),
        ("schedule=claimed,block_n=64,o_staging=half-tile", &both[..]),
        // One consumer's 128-key ring fits only at hd128.
        ("schedule=persistent,block_n=128,o_staging=half-tile,consumer_warpgroups=1,pipeline=overlap", &both[..2]),
    ] {
        let out = check_all("wgmma", shapes, &["--config", config]);
        assert_passed_with(&out, "_osht", config);
    }
    let config = ["--config", "schedule=split-tail,block_n=64,o_staging=half-tile"];
    let out = check_unmasked(&["1,8,4000,128", "3,3,700,256,1,1500"], &config);
    assert_passed_with(&out, "_scst_osht", "split tail");
    let out = check_planned(&["16,8,512,256", "4,8,1024,256"]);
    assert_passed_with(&out, "_osht", "the planner's hd256 short configs");
}

#[test]
fn wgmma_o_in_q_is_correct_on_hopper() {
    require_gpu!();
    if !hopper_or_skip("wgmma needs sm_90a") {
        return;
    }
    // O staged in each consumer's Q rows, which then load the next tile's rows on their own
    // barriers, from the static round robin and from claimed tiles (published per Q slot):
    // every head dim (hd64's three consumers among them), rings that wrap across tiles, tiles
    // of one key block and of none, key tails, GQA and both layouts; then the planner's own
    // choice (hd256 unmasked from 1k keys).
    let shapes =
        ["2,8,1000,256,2,1100", "4,4,600,256", "1,2,129,256,1,300", "4,16,300,128,16,517", "8,16,1000,64,4,1023"];
    for levers in ["schedule=persistent,o_staging=q-rows", "schedule=claimed,o_staging=q-rows"] {
        let out = check_all("wgmma", &shapes, &["--config", levers]);
        let tag = if levers.contains("claimed") { "_sccl_osqr_" } else { "_scpe_osqr_" };
        assert_passed_with(&out, tag, levers);
    }
    let out = evoattn(&["check", "--impl", "wgmma", "--shape", "16,8,1024,256", "--dtype", "all"]);
    assert_passed_with(&out, "_osqr", "the planner's hd256 1k unmasked config");
}

#[test]
fn wgmma_split_tail_is_correct_on_hopper() {
    require_gpu!();
    if !hopper_or_skip("wgmma needs sm_90a") {
        return;
    }
    // On 132 SMs: fewer tiles than blocks (every tile cut into pieces), a whole round and a
    // tail, runs that start inside a tile and end in the next, a run holding a whole tile,
    // one tile per block and no tail; key tails, GQA and Sq != Sk. Two seeds run every kernel
    // twice, so the second launch meets the counters the first one's last pieces reset.
    let small_heads = ["3,5,1000,64", "2,8,2000,64,2,1500", "1,4,130,64,1,77", "4,16,1000,128,4,300", "1,2,4000,128"];
    let hd256 = ["2,2,130,256,1,77", "1,16,2048,256", "3,3,700,256,1,1500"];
    for (config, shapes) in [
        ("schedule=split-tail,block_n=128", &small_heads[..]),
        ("schedule=split-tail,block_n=64,consumer_warpgroups=2", &small_heads[..]),
        (
            "schedule=split-tail,block_n=128,consumer_warpgroups=1,pipeline=overlap,o_staging=registers",
            &small_heads[..],
        ),
        ("schedule=split-tail,o_staging=registers", &hd256[..]),
    ] {
        assert_passed_with(&check_unmasked(shapes, &["--layout", "all", "--config", config]), "_scst", config);
    }
    // Causal tiles differ in length: refused, not run unbalanced.
    let out = evoattn(&[
        "check",
        "--impl",
        "wgmma",
        "--shape",
        "1,4,1000,64",
        "--causal",
        "top-left",
        "--config",
        "schedule=split-tail",
    ]);
    let text = format!("{}{}", stdout(&out), String::from_utf8_lossy(&out.stderr));
    assert!(!out.status.success() && text.contains("causal tiles differ in length"), "{text}");
}

#[test]
fn wgmma_q_in_regs_is_correct_on_hopper() {
    require_gpu!();
    if !hopper_or_skip("wgmma needs sm_90a") {
        return;
    }
    // Q's fragments loaded once a tile, Q·Kᵀ from registers: the planner's hd128 configs with it
    // (static tiles, the split tail) and its causal ones (claimed tiles), hd64 with one and two
    // consumers (tiles of one key block, rings that wrap across tiles), key tails, GQA, both
    // masks' alignments and layouts.
    let shapes = ["2,4,512,128", "1,8,1000,128,2,1100", "4,8,2048,128", "1,4,130,64,1,77", "2,4,512,64"];
    let out = check_all("wgmma", &shapes, &["--config", "q_in_regs=1", "--config-on-plan"]);
    assert_passed_with(&out, "_qr1", "q_in_regs=1 on the planner's configs");
    let config = "schedule=persistent,block_n=64,consumer_warpgroups=1,pipeline=overlap,q_in_regs=1";
    assert_passed_with(&check_all("wgmma", &["1,8,384,64,2,500"], &["--config", config]), "_qr1", config);
    // The planner's own hd128 pick up to 4k keys unmasked.
    let out = evoattn(&["check", "--impl", "wgmma", "--shape", "8,16,2048,128", "--dtype", "bf16"]);
    assert_passed_with(&out, "_hl0_mc0_qr1", "the planner's hd128 2k config");
}

#[test]
fn wgmma_multicast_is_correct_on_hopper() {
    require_gpu!();
    if !hopper_or_skip("wgmma needs sm_90a") {
        return;
    }
    // Clusters of two blocks, each loading half of every K and V block for both: static
    // persistent tiles of one, two and three consumers (rings that wrap across tiles, rounds
    // with fewer tiles than blocks), hd256 with O in the Q rows, and one tile a block (the grid
    // scheduler); key tails of under and over half a block, GQA, Sq != Sk, both layouts. Every
    // shape has an even count of query tiles a head at its consumer count.
    let shapes = ["2,8,1000,64,2,1100", "4,4,512,128,4,77", "1,8,256,128,2,1500"];
    let with_hd256 = [&shapes[..], &["3,2,512,256,1,300"]].concat();
    for (config, shapes) in [
        ("schedule=persistent,block_n=128,consumer_warpgroups=2,multicast=1", &shapes[..]),
        ("schedule=persistent,block_n=64,consumer_warpgroups=1,pipeline=overlap,multicast=1", &shapes[..]),
        ("schedule=grid,multicast=1", &with_hd256[..]),
    ] {
        assert_passed_with(&check_unmasked(shapes, &["--layout", "all", "--config", config]), "_mc1", config);
    }
    let wide = ["3,4,768,64,2,1000", "2,2,384,64"];
    let config = "schedule=persistent,block_n=128,consumer_warpgroups=3,rowsum_mma=1,multicast=1";
    assert_passed_with(&check_unmasked(&wide, &["--config", config]), "_mc1", config);
    let config = "schedule=persistent,block_n=80,o_staging=q-rows,multicast=1";
    assert_passed_with(&check_unmasked(&["2,8,1024,256", "1,4,256,256,2,300"], &["--config", config]), "_mc1", config);
    // A cluster's tiles must see the same key blocks, and pair up within a head: refused, with
    // the reason, not run.
    for (shape, causal, reason) in [
        ("1,4,512,64", "top-left", "causal tiles see different key blocks"),
        ("1,4,640,64", "none", "640 query rows make an odd count"),
    ] {
        let out = evoattn(&[
            "check",
            "--impl",
            "wgmma",
            "--shape",
            shape,
            "--causal",
            causal,
            "--config",
            "schedule=persistent,block_n=128,consumer_warpgroups=2,multicast=1",
        ]);
        let text = format!("{}{}", stdout(&out), String::from_utf8_lossy(&out.stderr));
        assert!(!out.status.success() && text.contains(reason), "{shape} {causal}: {text}");
    }
}

#[test]
fn wgmma_trace_marks_every_key_block_on_hopper() {
    require_gpu!();
    if !hopper_or_skip("wgmma needs sm_90a") {
        return;
    }
    // The instrumented kernels compute what the others do.
    let out = evoattn(&[
        "check",
        "--impl",
        "wgmma",
        "--config-on-plan",
        "--config",
        "trace=1",
        "--shape",
        "2,4,1024,64",
        "--shape",
        "3,5,1000,128",
        "--causal",
        "all",
    ]);
    assert!(out.status.success(), "{}\n{}", stdout(&out), String::from_utf8_lossy(&out.stderr));
    // The head-dim default with three consumers (one tile per block; the planner would take one
    // consumer for so few heads): 1024 keys are 8 blocks of 128, so each consumer warp marks 9
    // turns (the last P·V has one of its own), in the pipeline's order, on a clock that never
    // goes back.
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("trace.json");
    let out = evoattn(&[
        "trace",
        "--impl",
        "wgmma",
        "--config",
        "consumer_warpgroups=3",
        "--shape",
        "2,4,1024,64",
        "--out",
        json.to_str().unwrap(),
    ]);
    let text = stdout(&out);
    assert!(out.status.success(), "{text}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(text.contains("consumer key block (turn to turn): median"), "{text}");
    let records: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let order = ["KvReady", "Turn", "Issued", "SDone", "SoftmaxDone", "PvDone", "Packed"];
    let mut consumers = 0;
    for w in records[0]["warps"].as_array().unwrap() {
        let events: Vec<(&str, u64)> =
            w["events"].as_array().unwrap().iter().map(|e| (e[0].as_str().unwrap(), e[1].as_u64().unwrap())).collect();
        assert!(events.windows(2).all(|p| p[0].1 <= p[1].1), "the clock went back: {w}");
        if events.first().map(|e| e.0) != Some("Tile") {
            continue;
        }
        consumers += 1;
        assert_eq!(events.iter().filter(|e| e.0 == "Turn").count(), 9, "{w}");
        // Block 0 has no P·V to wait for; the last block's P·V has its own turn.
        let body: Vec<&str> = events[1..].iter().map(|e| e.0).collect();
        let mut want: Vec<&str> = order.iter().copied().filter(|t| *t != "PvDone").collect();
        for _ in 1..8 {
            want.extend(order);
        }
        want.extend(["KvReady", "Turn", "Issued", "PvDone", "Epilogue", "EpilogueDone"]);
        assert_eq!(body, want, "{w}");
    }
    // 16 traced blocks of 3 consumer warpgroups.
    assert_eq!(consumers, 16 * 12, "{text}");
}

#[test]
fn auto_runs_decoding_with_splitkv() {
    require_gpu!();
    let out = evoattn(&["check", "--shape", "1,32,1,128,4,16384", "--dtype", "bf16", "--seeds", "1"]);
    let text = stdout(&out);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("evoattn_splitkv_"), "{text}");
}

#[test]
fn a_prepared_call_costs_the_host_under_five_microseconds() {
    require_gpu!();
    for imp in ["auto", "splitkv", "mma"] {
        let out = evoattn(&[
            "bench",
            "--shape",
            "1,8,512,64",
            "--peers",
            "none",
            "--reps",
            "5",
            "--impl",
            imp,
            "--host-cost",
        ]);
        let text = stdout(&out);
        assert!(out.status.success(), "{text}\n{}", String::from_utf8_lossy(&out.stderr));
        // The host-cost table's row: shape, dtype, mask, layout, median µs, ...
        let line = text
            .lines()
            .skip_while(|l| !l.starts_with("host cost of one call"))
            .find(|l| l.starts_with("1,8,512,64 "))
            .unwrap_or_else(|| panic!("{text}"));
        let median: f64 =
            line.split_whitespace().nth(4).and_then(|v| v.parse().ok()).unwrap_or_else(|| panic!("{line}"));
        println!("{imp}: {line}");
        assert!(median < 5.0, "{imp}: {line}");
    }
}

/// Two D=64 shapes in two buckets: quick to check against float64 and to time.
const TUNE_SHAPES: [&str; 4] = ["--shape", "1,8,512,64", "--shape", "2,8,1024,64"];
/// A planted hang is cut off after this long without progress.
const TUNE_TIMEOUT: &str = "15s";

/// `evoattn ARGS` on the GPU with the kernel cache (and the tuner's store) in `cache`.
fn tune_command(cache: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new(bin());
    cmd.args(args).env_remove("EVOATTN_BACKEND").env_remove("EVOATTN_NO_TUNED").env("EVOATTN_CACHE_DIR", cache);
    cmd
}

/// The stored evaluations, one line each ([`stored_rows`]).
fn tune_rows(cache: &Path) -> Vec<String> {
    stored_rows(tune_command(cache, &["tune", "--show"]), cache)
}

#[test]
fn tuning_records_planted_faults_on_the_gpu_and_completes() {
    require_gpu!();
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/planted-faults-proposer.sh");
    let script = std::env::var("EVOATTN_PROPOSER_FIXTURE").unwrap_or_else(|_| script.display().to_string());
    let proposer = format!("sh {script} {}", cache.join("calls").display());
    let mut args = vec!["tune", "--impl", "mma", "--gpus", "0", "--generations", "3", "--timeout", TUNE_TIMEOUT];
    args.extend(TUNE_SHAPES);
    args.extend(["--proposer", &proposer]);
    let out = tune_command(cache, &args).output().unwrap();
    assert!(out.status.success(), "{}\n{}", stdout(&out), String::from_utf8_lossy(&out.stderr));
    let rows = tune_rows(cache);
    let variants: Vec<&String> = rows.iter().filter(|r| r.contains("[proposed source]")).collect();
    println!("{}", variants.iter().map(|r| r.chars().take(300).collect::<String>()).collect::<Vec<_>>().join("\n"));
    assert_eq!(variants.len(), 6, "three sources under two buckets: {rows:#?}");
    // The out-of-bounds write faults in the correctness gate (the driver's illegal address).
    assert_eq!(variants.iter().filter(|r| r.contains("failed correctness")).count(), 4, "{variants:#?}");
    assert!(variants.iter().any(|r| r.contains("no answer within 15 s: killed")), "the loop: {variants:#?}");
    assert!(variants.iter().any(|r| r.contains("failed compile")), "{variants:#?}");
    // The restarted workers went on timing configs.
    assert!(rows.iter().filter(|r| r.contains("| fitness ") && !r.contains("proposed")).count() > 10, "{rows:#?}");
}

#[test]
fn kill_9_mid_tuning_then_resume_loses_nothing_on_the_gpu() {
    require_gpu!();
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path();
    let mut args = vec!["tune", "--impl", "mma", "--gpus", "0", "--generations", "50"];
    args.extend(TUNE_SHAPES);
    kill_when_stored(tune_command(cache, &args), || tune_rows(cache).len(), 12, Duration::from_secs(240));
    let before = tune_rows(cache);
    let mut resume = args.clone();
    resume.splice(5..7, ["--generations", "2", "--resume"]);
    let out = tune_command(cache, &resume).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_resumed(&before, &tune_rows(cache));
}

/// The input generator's GPU twin writes, bit for bit, what the CPU draws (`evoattn::draw`):
/// large cases are drawn on the GPU and small ones on the CPU, and both must be the same case.
#[test]
fn the_gpu_draws_the_bits_the_cpu_draws() {
    require_gpu!();
    use evoattn::draw::{host_tensor, Stream};
    use evoattn::{Dtype, Layout, Problem, Shape, TensorName};
    let gpu = evoattn::runtime::device::Gpu::open(0).expect("the GPU opens");
    let stream = gpu.stream().clone();
    let shape = Shape { b: 3, h: 4, hkv: 2, sq: 77, sk: 1000, d: 128 };
    for (dtype, layout) in [(Dtype::Bf16, Layout::Bhsd), (Dtype::F16, Layout::Bshd)] {
        let mut problem = Problem::dense(shape, dtype, layout);
        // Padded rows: the gaps must hold the gap value, the logical elements the draw.
        problem.q_strides.seq += 8;
        problem.q_strides.batch = problem.q_strides.seq * shape.sq * shape.h + 64;
        problem.q_strides.head = if layout == Layout::Bhsd { problem.q_strides.seq * shape.sq } else { 128 };
        problem.validate().expect("a valid strided problem");
        for (t, seed) in [(TensorName::Q, 5), (TensorName::K, 6), (TensorName::V, u64::MAX)] {
            let generator = Stream::new(seed, 1, 3.0);
            let want = host_tensor(&problem, t, &generator, 0x7fc0);
            let mut buf = stream.alloc_zeros::<u16>(want.len()).unwrap();
            gpu.draw(&problem, t, &generator, 0x7fc0, &mut buf.as_view_mut()).expect("draws");
            let got = stream.clone_dtoh(&buf).unwrap();
            let differ = got.iter().zip(&want).filter(|(a, b)| a != b).count();
            assert_eq!(differ, 0, "{dtype} {layout} {t}: {differ} of {} elements differ", want.len());
        }
    }
}
