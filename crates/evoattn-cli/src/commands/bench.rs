//! `evoattn bench`: ours and the peers in one run on the same inputs; a table per case and,
//! with `--json`, every raw sample and the environment. The run is added to the history (what
//! `gate --against-history` and `report` read) unless `--no-history`.

use crate::lab::backend::HostCostRounds;
use crate::lab::inputs::{Distribution, Draw, Inputs};
use crate::lab::measure::{measure, CaseConfig, LabArgs};
use crate::out;
use crate::stores::record::{is_control, BenchRecord, CaseRecord, Measurement, ResultRecord};
use crate::text::{self, Column, Table, SHAPE_HEADER};
use crate::verdicts::stats::{summarize, Verdict};
use evoattn::plan::ConfigOrigin;
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
    /// Also print our kernel's full symbol name under each row, and each case's config (the
    /// table names kernels by family and the levers that differ from the family's default for
    /// the problem).
    #[arg(short, long)]
    verbose: bool,
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

fn case_shape(c: &CaseRecord) -> evoattn::Shape {
    evoattn::Shape { b: c.b, h: c.h, hkv: c.hkv, sq: c.sq, sk: c.sk, d: c.d }
}

fn tflops(flops: f64, us: f64) -> f64 {
    flops / (us * 1e-6) / 1e12
}

/// GB/s of the K and V reads (every key of every KV head read once), the figure that bounds
/// decoding.
fn kv_gbps(c: &CaseRecord, us: f64) -> f64 {
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

/// A case as notes name it: `1,8,512,64 f16 none bhsd`.
fn case_label(c: &CaseRecord) -> String {
    format!("{} {} {} {}", case_shape(c), c.dtype, c.causal, c.layout)
}

/// The cells that say which case a row is: shape, dtype, mask, layout.
fn case_columns() -> Vec<Column> {
    vec![Column::left(SHAPE_HEADER), Column::left("dtype"), Column::left("mask"), Column::left("layout")]
}

fn case_cells(c: &CaseRecord) -> Vec<String> {
    vec![case_shape(c).to_string(), c.dtype.clone(), c.causal.clone(), c.layout.clone()]
}

fn peer_cell(p: &Measurement) -> String {
    median(p).map_or_else(|| p.status.to_string(), |m| format!("{m:.2}"))
}

/// The table of ours against the peers: every peer's median in a column of its own (`inline`),
/// or, where those do not fit, the fastest peer's name and median (the peers' own table follows).
fn results_table(record: &BenchRecord, configs: &[CaseConfig], verbose: bool, inline: bool) -> Table {
    let env = &record.env;
    let peer_names: Vec<&str> =
        record.results.first().map_or(Vec::new(), |r| r.peers.iter().map(|p| p.name.as_str()).collect());
    let mut columns = case_columns();
    columns.extend([Column::left("kernel").wraps(), Column::right("ours\nµs"), Column::right("TF/s")]);
    if env.matmul_tflops.is_some() {
        columns.push(Column::right("%peak"));
    }
    columns.push(Column::right("kv\nGB/s"));
    if env.copy_gbps.is_some() {
        columns.push(Column::right("%copy"));
    }
    if inline {
        columns.extend(peer_names.iter().map(|name| Column::right(&format!("{name}\nµs"))));
    } else {
        columns.extend([Column::left("best\npeer"), Column::right("peer\nµs")]);
    }
    columns.extend([Column::right("speedup\npeer/ours"), Column::left("verdict"), Column::left("ok")]);
    let mut table = Table::new(columns);
    for (i, r) in record.results.iter().enumerate() {
        let c = &r.case;
        let ours = median(&r.ours);
        let config = configs.get(i);
        let mut row = case_cells(c);
        row.push(config.map_or_else(|| r.ours.name.clone(), |k| k.short.clone()));
        row.push(ours.map_or("-".into(), |m| format!("{m:.2}")));
        row.push(ours.map_or("-".into(), |m| format!("{:.1}", tflops(c.flops, m))));
        if let Some(peak) = env.matmul_tflops {
            row.push(ours.map_or("-".into(), |m| format!("{:.0}%", 100.0 * tflops(c.flops, m) / peak)));
        }
        row.push(ours.map_or("-".into(), |m| format!("{:.0}", kv_gbps(c, m))));
        if let Some(copy) = env.copy_gbps {
            row.push(ours.map_or("-".into(), |m| format!("{:.0}%", 100.0 * kv_gbps(c, m) / copy)));
        }
        let best = best_peer(r);
        if inline {
            row.extend(r.peers.iter().map(peer_cell));
        } else {
            row.push(best.map_or("-".into(), |(p, _)| p.name.clone()));
            row.push(best.map_or("-".into(), |(_, m)| format!("{m:.2}")));
        }
        match (ours, best) {
            (Some(o), Some((_, best))) => {
                let speedup = best / o;
                row.push(format!("{speedup:.2}×"));
                row.push(Verdict::from_speedup(speedup).name().to_string());
            }
            _ => row.extend(["-".to_string(), "-".to_string()]),
        }
        row.push(
            match r.ours.correct {
                Some(true) => "yes",
                Some(false) => "NO",
                None => "?",
            }
            .to_string(),
        );
        table.row(row);
        if verbose {
            table.line(r.ours.name.clone());
        }
    }
    table
}

/// Every peer's median per case, in as many tables (peers side by side) as it takes to fit.
fn peers_tables(record: &BenchRecord) -> Vec<Table> {
    let count = record.results.first().map_or(0, |r| r.peers.len());
    let build = |peers: std::ops::Range<usize>| {
        let mut columns = case_columns();
        let names = record.results.first().map(|r| &r.peers[peers.clone()]).unwrap_or_default();
        columns.extend(names.iter().map(|p| Column::right(&format!("{}\nµs", p.name))));
        let mut table = Table::new(columns);
        for r in &record.results {
            let mut row = case_cells(&r.case);
            row.extend(r.peers[peers.clone()].iter().map(peer_cell));
            table.row(row);
        }
        table
    };
    let mut tables = Vec::new();
    let mut start = 0;
    while start < count {
        let mut end = start + 1;
        while end < count && build(start..end + 1).fits() {
            end += 1;
        }
        tables.push(build(start..end));
        start = end;
    }
    tables
}

/// The range of SM clocks NVML read while the timed blocks ran: a GPU at its power cap shows a
/// range here, and block medians that move with it (the timer controls' medians then differ by
/// chance more often; docs/perf-log.md, session 35).
fn clock_range(record: &BenchRecord) -> Option<String> {
    let clocks = record.results.iter().flat_map(|r| std::iter::once(&r.ours).chain(&r.peers));
    let (lo, hi) = clocks
        .flat_map(|m| m.sm_clock_mhz.iter().copied())
        .fold(None, |range: Option<(f64, f64)>, c| Some(range.map_or((c, c), |(lo, hi)| (lo.min(c), hi.max(c)))))?;
    Some(format!("SM clock while the blocks ran (NVML, read every ms): {lo:.0}-{hi:.0} MHz"))
}

/// A peer and the cases (their indices in the record) it did not run.
type Missed = (String, Vec<usize>);

/// The peers that did not run, said once per reason: which peers, in which cases.
fn not_measured(record: &BenchRecord) -> Vec<String> {
    let total = record.results.len();
    // By reason, in order of first coming: each peer and the cases it missed for that reason.
    let mut by_reason: Vec<(String, Vec<Missed>)> = Vec::new();
    for (i, r) in record.results.iter().enumerate() {
        for p in r.peers.iter().filter(|p| !p.is_ok()) {
            let reason = p.reason.clone().unwrap_or_else(|| p.status.to_string());
            let group = match by_reason.iter_mut().position(|(t, _)| *t == reason) {
                Some(g) => &mut by_reason[g].1,
                None => {
                    by_reason.push((reason, Vec::new()));
                    &mut by_reason.last_mut().expect("just pushed").1
                }
            };
            match group.iter_mut().find(|(name, _)| *name == p.name) {
                Some((_, cases)) => cases.push(i),
                None => group.push((p.name.clone(), vec![i])),
            }
        }
    }
    let mut lines = Vec::new();
    for (reason, peers) in by_reason {
        // Peers that missed the same cases are named together.
        let mut sets: Vec<(Vec<String>, Vec<usize>)> = Vec::new();
        for (name, cases) in peers {
            match sets.iter_mut().find(|(_, c)| *c == cases) {
                Some((names, _)) => names.push(name),
                None => sets.push((vec![name], cases)),
            }
        }
        for (names, cases) in sets {
            let first = case_label(&record.results[cases[0]].case);
            let which = match cases.len() {
                1 => format!("at {first}"),
                n if n == total => format!("in all {n} cases"),
                n => format!("in {n} of {total} cases ({first} and {} more)", n - 1),
            };
            lines.push(format!("not measured: {} {which}: {reason}", names.join(", ")));
        }
    }
    lines
}

/// Where our configs came from, said once: `default in all 10 cases`, or the count of each.
fn config_origins(configs: &[CaseConfig]) -> String {
    let mut counts: Vec<(ConfigOrigin, usize)> = Vec::new();
    for c in configs {
        match counts.iter_mut().find(|(o, _)| *o == c.origin) {
            Some((_, n)) => *n += 1,
            None => counts.push((c.origin, 1)),
        }
    }
    let parts: Vec<String> = counts
        .iter()
        .map(|&(origin, n)| match n {
            n if n == configs.len() && n > 1 => format!("{} in all {n} cases", origin.name()),
            n => format!("{} in {}", origin.name(), text::count(n, "case", "cases")),
        })
        .collect();
    parts.join(", ")
}

fn print_table(record: &BenchRecord, configs: &[CaseConfig], verbose: bool) -> anyhow::Result<()> {
    let env = &record.env;
    let mode = env.mode.map_or("?", |m| m.name());
    let mut out = text::paragraph(&format!(
        "bench: {} ({}, driver CUDA {}), {mode} launches, {} samples per implementation, L2 flush {} MB before each, seed {}",
        env.gpu,
        env.arch,
        env.driver,
        env.samples,
        env.flush_bytes / 1_000_000,
        env.seed
    ));
    if let Some(peak) = env.matmul_tflops {
        out.push_str(&text::paragraph(&format!("measured bf16 matmul peak: {peak:.0} TFLOP/s (8192^3, same method)")));
    }
    let inline = results_table(record, configs, verbose, true);
    let split = !inline.fits();
    let table = if split { results_table(record, configs, verbose, false) } else { inline };
    out.push_str(&table.render());
    let mut legend = vec![
        "speedup = median of the fastest peer that ran (controls excepted) / our median: above 1 ours is faster; \
         ok = our output passed the correctness check on these inputs"
            .to_string(),
        format!(
            "kv GB/s = K and V bytes / our median (each read once){}",
            if env.copy_gbps.is_some() { "; %copy = of the measured device copy bandwidth (read + write)" } else { "" }
        ),
        format!(
            "kernel = our kernel's family and the levers that differ from its default for the case{}; config: {}",
            if verbose { " (its symbol under the row)" } else { " (-v: its symbol name)" },
            config_origins(configs)
        ),
    ];
    if split {
        legend.push("every peer's median, in µs:".to_string());
    }
    for line in legend {
        out.push_str(&text::paragraph(&line));
    }
    if split {
        for table in peers_tables(record) {
            out.push_str(&table.render());
        }
    }
    for line in not_measured(record) {
        out.push_str(&text::paragraph(&line));
    }
    if let Some(line) = clock_range(record) {
        out.push_str(&text::paragraph(&line));
    }
    for r in &record.results {
        for why in crate::verdicts::gate::timer_disagreements(r) {
            out.push_str(&text::paragraph(&format!("flagged {}: {why}", case_label(&r.case))));
        }
    }
    if verbose {
        for (r, config) in record.results.iter().zip(configs) {
            let what = match config.origin {
                ConfigOrigin::Default => config.origin.name().to_string(),
                origin => format!("{} ({})", origin.name(), config.config),
            };
            out.push_str(&text::paragraph(&format!("config of ours for {}: {what}", case_label(&r.case))));
        }
    }
    out::text(&out)
}

pub fn run(args: &Args) -> anyhow::Result<ExitCode> {
    if let Some(path) = &args.json {
        crate::stores::output::check_writable("--json", path)?;
    }
    let measured = measure(&args.lab)?;
    let record = measured.record;
    print_table(&record, &measured.configs, args.verbose)?;
    if !args.no_history {
        if let Some(added) = crate::stores::history::save_or_warn(crate::stores::history::Source::Bench, &record) {
            out::text(&text::paragraph(&format!(
                "history: {added} measurements added to {}",
                crate::stores::history::default_path().display()
            )))?;
        }
    }
    if let Some(path) = &args.json {
        record.write(path)?;
        out::text(&text::paragraph(&format!("record written to {}", path.display())))?;
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
    out::text(&text::paragraph(&format!(
        "host cost of one call (Attention::forward_on, prepared problem; median of {HOST_COST_ROUNDS} rounds' medians, \
         {HOST_COST_CALLS} calls a round; target {HOST_COST_TARGET_US} µs):"
    )))?;
    let mut columns = case_columns();
    columns.extend([
        Column::right("median\nµs"),
        Column::right("p90\nµs"),
        Column::right("round medians\nµs"),
        Column::left("target"),
    ]);
    let mut table = Table::new(columns);
    for (i, (problem, layout)) in lab.problems.expand()?.iter().enumerate() {
        let problem = problem.clone().with_lse(false);
        // The planner's kernel, as a library caller gets it (no tuned store).
        let (plan, _) = lab.kernel.plan(request, (arch, info.sm_count), &problem, &evoattn::plan::Untuned)?;
        let inputs = Inputs::Drawn(Draw::new(Distribution::Normal, lab.seed + i as u64));
        let sampling = HostCostRounds { rounds: HOST_COST_ROUNDS, calls: HOST_COST_CALLS, pause: HOST_COST_PAUSE };
        let rounds = backend.host_cost(&plan, inputs, sampling)?;
        let c = host_cost_figure(&rounds).ok_or_else(|| anyhow::anyhow!("no host-cost samples"))?;
        let verdict = if c.median < HOST_COST_TARGET_US { "within" } else { "OVER" };
        table.row(vec![
            problem.shape.to_string(),
            problem.dtype.name().to_string(),
            problem.causal.name().to_string(),
            crate::lab::presets::layout_label(&problem, *layout),
            format!("{:.2}", c.median),
            format!("{:.2}", c.p90),
            format!("{:.2}-{:.2}", c.round_min, c.round_max),
            verdict.to_string(),
        ]);
    }
    out::text(&table.render())?;
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

    #[test]
    fn the_clock_range_spans_every_sides_blocks_and_is_absent_without_clocks() {
        let mut record = crate::exporters::tests::record().record;
        assert_eq!(clock_range(&record), None);
        record.results[0].ours.sm_clock_mhz = vec![1980.0, 1755.0, 1980.0];
        record.results[2].peers[1].sm_clock_mhz = vec![1155.0; 3];
        assert_eq!(
            clock_range(&record).as_deref(),
            Some("SM clock while the blocks ran (NVML, read every ms): 1155-1980 MHz")
        );
    }
}
