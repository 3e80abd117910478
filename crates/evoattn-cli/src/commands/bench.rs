//! `evoattn bench`: ours and the peers in one run on the same inputs; a table per case and,
//! with `--json`, every raw sample and the environment. The run is added to the history (what
//! `gate --against-history` and `report` read) unless `--no-history`.

use crate::lab::backend::HostCostRounds;
use crate::lab::inputs::{Distribution, Draw, Inputs};
use crate::lab::measure::{measure, LabArgs};
use crate::out::outln;
use crate::stores::record::{is_control, BenchRecord, Measurement, ResultRecord};
use crate::verdicts::stats::{summarize, Verdict};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args)]
#[command(after_help = "Each case: our output checked (standard normal and wide-range inputs), each peer's judged
against the same answer, then every side timed in interleaved blocks. Exit 0 when our output was
correct on every case, 1 when it was wrong on one, 2 when nothing could run.

Examples:
  evoattn bench --preset seed --json run.json                                           # keep the record
  evoattn bench --shape 4,16,4096,128 --dtype bf16 --peers sdpa-cudnn,fa4 --mode graph  # kernel time, FA4 too
  evoattn bench --shape 1,32,1,128,8,32768 --dtype bf16 --impl splitkv --host-cost      # a decode step")]
pub struct Args {
    #[command(flatten)]
    lab: LabArgs,
    /// Do not add this run to the history (history.sqlite in the cache dir, EVOATTN_CACHE_DIR).
    #[arg(long)]
    no_history: bool,
    /// Write the record (raw samples of ours and every peer, the environment) to this file (its
    /// directory must exist; checked before measuring); `evoattn gate --samples FILE` re-gates
    /// it with no GPU.
    #[arg(long, value_name = "PATH")]
    json: Option<PathBuf>,
    /// Also measure the host cost of one call: the CPU time of the library's launch path
    /// (`Attention::forward_on`) on each case once it is prepared, in rounds of many calls
    /// spread over a fraction of a second; the figure is the median of the rounds' medians.
    #[arg(long)]
    host_cost: bool,
}

/// Calls per round of the host-cost measurement.
const HOST_COST_CALLS: usize = 400;
/// Rounds of the host-cost measurement, [`HOST_COST_PAUSE`] apart: a passing disturbance of the
/// machine spoils one round, which the median of the rounds passes over.
/// Evidence: docs/decisions/host-cost.md#rounds
const HOST_COST_ROUNDS: usize = 5;
const HOST_COST_PAUSE: std::time::Duration = std::time::Duration::from_millis(50);
/// The issue-5 target for the host cost of one call, in microseconds.
pub const HOST_COST_TARGET_US: f64 = 5.0;

/// The host cost of one call from rounds of samples (µs): the median of the rounds' medians,
/// the lowest and highest round median, and the 90th percentile of every sample.
fn host_cost_figure(rounds: &[Vec<f64>]) -> Option<HostCost> {
    let medians: Vec<f64> = rounds.iter().filter_map(|r| summarize(r).map(|s| s.median)).collect();
    let all: Vec<f64> = rounds.concat();
    let of_medians = summarize(&medians)?;
    let spread = medians.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &m| (lo.min(m), hi.max(m)));
    Some(HostCost { median: of_medians.median, round_min: spread.0, round_max: spread.1, p90: summarize(&all)?.p90 })
}

#[derive(Debug, PartialEq)]
struct HostCost {
    median: f64,
    round_min: f64,
    round_max: f64,
    p90: f64,
}

fn median(m: &Measurement) -> Option<f64> {
    m.is_ok().then(|| summarize(&m.samples_us).map(|s| s.median)).flatten()
}

fn case_shape(c: &crate::stores::record::CaseRecord) -> evoattn::Shape {
    evoattn::Shape { b: c.b, h: c.h, hkv: c.hkv, sq: c.sq, sk: c.sk, d: c.d }
}

fn tflops(flops: f64, us: f64) -> f64 {
    flops / (us * 1e-6) / 1e12
}

/// GB/s of the K and V reads (every key of every KV head read once), the figure that bounds
/// decoding.
fn kv_gbps(c: &crate::stores::record::CaseRecord, us: f64) -> f64 {
    let elem = evoattn::Dtype::parse(&c.dtype).map_or(2, evoattn::Dtype::size_bytes);
    // In floating point: a record's sizes are whatever its JSON says.
    let bytes = 2.0 * [c.b, c.hkv, c.sk, c.d, elem].into_iter().map(|n| n as f64).product::<f64>();
    bytes / (us * 1e-6) / 1e9
}

/// The fastest peer that ran (controls excluded), with its median.
fn best_peer(r: &ResultRecord) -> Option<(&Measurement, f64)> {
    r.peers
        .iter()
        .filter(|p| !is_control(&p.name))
        .filter_map(|p| median(p).map(|m| (p, m)))
        .min_by(|a, b| a.1.total_cmp(&b.1))
}

fn print_table(record: &BenchRecord) -> anyhow::Result<()> {
    let env = &record.env;
    let mode = env.mode.map_or("?", |m| m.name());
    outln!(
        "bench: {} ({}, driver CUDA {}), {mode} launches, {} samples per implementation, L2 flush {} MB before each, seed {}",
        env.gpu,
        env.arch,
        env.driver,
        env.samples,
        env.flush_bytes / 1_000_000,
        env.seed
    )?;
    if let Some(peak) = env.matmul_tflops {
        outln!("measured bf16 matmul peak: {peak:.0} TFLOP/s (8192^3, same method)")?;
    }
    let peer_names: Vec<&str> =
        record.results.first().map_or(Vec::new(), |r| r.peers.iter().map(|p| p.name.as_str()).collect());
    let mut header =
        format!("{:<20} {:<5} {:<12} {:>10} {:>7}", "shape B,H,Sq,D[..]", "dtype", "mask", "ours_us", "TF/s");
    if env.matmul_tflops.is_some() {
        header.push_str(&format!(" {:>6}", "%peak"));
    }
    header.push_str(&format!(" {:>7}", "kv_GB/s"));
    if env.copy_gbps.is_some() {
        header.push_str(&format!(" {:>6}", "%copy"));
    }
    for name in &peer_names {
        header.push_str(&format!(" {:>14}", format!("{name}_us")));
    }
    header.push_str(&format!(" {:>8} {:<10} ok", "speedup", "verdict"));
    outln!("{header}")?;
    for r in &record.results {
        let c = &r.case;
        let shape = case_shape(c);
        let ours = median(&r.ours);
        let mut line = format!(
            "{:<20} {:<5} {:<12} {:>10} {:>7}",
            shape.to_string(),
            c.dtype,
            c.causal,
            ours.map_or("-".into(), |m| format!("{m:.2}")),
            ours.map_or("-".into(), |m| format!("{:.1}", tflops(c.flops, m)))
        );
        if let Some(peak) = env.matmul_tflops {
            line.push_str(&format!(
                " {:>6}",
                ours.map_or("-".into(), |m| format!("{:.0}%", 100.0 * tflops(c.flops, m) / peak))
            ));
        }
        line.push_str(&format!(" {:>7}", ours.map_or("-".into(), |m| format!("{:.0}", kv_gbps(c, m)))));
        if let Some(copy) = env.copy_gbps {
            line.push_str(&format!(
                " {:>6}",
                ours.map_or("-".into(), |m| format!("{:.0}%", 100.0 * kv_gbps(c, m) / copy))
            ));
        }
        for p in &r.peers {
            let cell = match median(p) {
                Some(m) => format!("{m:.2}"),
                None => p.status.to_string(),
            };
            line.push_str(&format!(" {cell:>14}"));
        }
        match (ours, best_peer(r)) {
            (Some(o), Some((_, best))) => {
                let speedup = best / o;
                line.push_str(&format!(" {:>7.2}x {:<10}", speedup, Verdict::from_speedup(speedup).name()));
            }
            _ => line.push_str(&format!(" {:>8} {:<10}", "-", "-")),
        }
        let correct = match r.ours.correct {
            Some(true) => "yes",
            Some(false) => "NO",
            None => "?",
        };
        line.push_str(&format!(" {correct}"));
        outln!("{line}")?;
    }
    let skipped: Vec<String> = record
        .results
        .iter()
        .flat_map(|r| r.peers.iter().filter(|p| !p.is_ok()).map(move |p| (r, p)))
        .map(|(r, p)| {
            let c = &r.case;
            format!(
                "{} at {},{},{},{} {} {}: {}",
                p.name,
                c.b,
                c.h,
                c.sq,
                c.d,
                c.dtype,
                c.causal,
                p.reason.clone().unwrap_or_else(|| p.status.to_string())
            )
        })
        .collect();
    for s in skipped {
        outln!("not measured: {s}")?;
    }
    outln!("speedup = best peer median / our median; ok = our output passed the correctness check on these inputs")?;
    outln!(
        "kv_GB/s = K and V bytes / our median (each read once){}",
        if env.copy_gbps.is_some() { "; %copy = of the measured device copy bandwidth (read + write)" } else { "" }
    )?;
    Ok(())
}

pub fn run(args: &Args) -> anyhow::Result<ExitCode> {
    if let Some(path) = &args.json {
        crate::stores::output::check_writable("--json", path)?;
    }
    let measured = measure(&args.lab)?;
    let record = measured.record;
    print_table(&record)?;
    for (r, config) in record.results.iter().zip(&measured.configs) {
        let c = &r.case;
        outln!("config of ours for {} {} {}: {config}", case_shape(c), c.dtype, c.causal)?;
    }
    if !args.no_history {
        if let Some(added) = crate::stores::history::save_or_warn(crate::stores::history::Source::Bench, &record) {
            outln!("history: {added} measurements added to {}", crate::stores::history::default_path().display())?;
        }
    }
    if let Some(path) = &args.json {
        record.write(path)?;
        outln!("record written to {}", path.display())?;
    }
    if args.host_cost {
        print_host_cost(&args.lab)?;
    }
    let all_correct = record.results.iter().all(|r| r.ours.correct == Some(true));
    Ok(if all_correct { ExitCode::SUCCESS } else { ExitCode::from(1) })
}

/// Prints, per case, the host cost of one prepared call of the launch path ([`host_cost_figure`]).
fn print_host_cost(lab: &crate::lab::measure::LabArgs) -> anyhow::Result<()> {
    let request = lab.kernel.request()?;
    let mut backend = crate::lab::open::open()?;
    let info = backend.info();
    let arch = evoattn::Arch::parse(&info.arch).ok_or_else(|| anyhow::anyhow!("unknown arch {}", info.arch))?;
    outln!(
        "host cost of one call (Attention::forward_on, prepared problem; median of {HOST_COST_ROUNDS} rounds' medians, \
         {HOST_COST_CALLS} calls a round):"
    )?;
    for (i, (problem, _)) in lab.problems.expand()?.iter().enumerate() {
        let problem = problem.clone().with_lse(false);
        // The planner's kernel, as a library caller gets it (no tuned store).
        let (plan, _) = lab.kernel.plan(request, (arch, info.sm_count), &problem, &evoattn::plan::Untuned)?;
        let inputs = Inputs::Drawn(Draw::new(Distribution::Normal, lab.seed + i as u64));
        let sampling = HostCostRounds { rounds: HOST_COST_ROUNDS, calls: HOST_COST_CALLS, pause: HOST_COST_PAUSE };
        let rounds = backend.host_cost(&plan, inputs, sampling)?;
        let c = host_cost_figure(&rounds).ok_or_else(|| anyhow::anyhow!("no host-cost samples"))?;
        let verdict = if c.median < HOST_COST_TARGET_US { "within" } else { "OVER" };
        outln!(
            "host_cost {} {} {}: median {:.2} us, p90 {:.2} us, round medians {:.2}-{:.2} us ({verdict} the \
             {HOST_COST_TARGET_US} us target)",
            problem.shape,
            problem.dtype,
            problem.causal,
            c.median,
            c.p90,
            c.round_min,
            c.round_max
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_disturbed_round_does_not_move_the_host_cost() {
        // Round medians 2, 3, 20, 4, 2: their median is 3 however high the disturbed round reads.
        let rounds =
            [vec![1.0, 2.0, 3.0], vec![2.0, 3.0, 4.0], vec![10.0, 20.0, 30.0], vec![3.0, 4.0, 5.0], vec![2.0; 3]];
        // p90 of all 15 samples (1, 2 x5, 3 x3, 4 x2, 5, 10, 20, 30): position 12.6, 10 + 0.6 * 10.
        let c = host_cost_figure(&rounds).unwrap();
        assert_eq!((c.median, c.round_min, c.round_max), (3.0, 2.0, 20.0));
        assert!((c.p90 - 16.0).abs() < 1e-9, "{c:?}");
        assert_eq!(host_cost_figure(&[]), None);
    }
}
