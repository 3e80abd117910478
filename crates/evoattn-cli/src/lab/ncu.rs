//! Nsight Compute (`ncu`) metrics for `evoattn profile`: which metrics to ask for, parsing
//! ncu's `--csv` output, and the one place that decides what bounds a kernel.

use anyhow::Context;
use serde::Serialize;
use std::collections::BTreeMap;

/// Tensor-pipe busy % of active cycles. On ncu 13.0 / H100 this counts HGMMA (wgmma) too.
const TENSOR_HMMA_PCT: &str = "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active";
/// The wgmma pipe on its own; ncu 13.0 / H100 reports "n/a", other versions may not.
const TENSOR_GMMA_PCT: &str = "sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active";
/// The XU pipe (MUFU: ex2 and the other transcendentals), % of its peak instruction rate.
const XU_PCT: &str = "sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active";
/// Issue slots used, % of active cycles: each SM sub-partition issues one warp instruction a cycle.
const ISSUE_PCT: &str = "smsp__issue_active.avg.pct_of_peak_sustained_active";
const DRAM_PCT: &str = "dram__throughput.avg.pct_of_peak_sustained_elapsed";
const SM_PCT: &str = "sm__throughput.avg.pct_of_peak_sustained_elapsed";
const WARPS_ACTIVE_PCT: &str = "sm__warps_active.avg.pct_of_peak_sustained_active";
const BANK_CONFLICTS: &str = "l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum";
const REGISTERS: &str = "launch__registers_per_thread";
const LOCAL_LOADS: &str = "smsp__sass_inst_executed_op_local_ld.sum";
const LOCAL_STORES: &str = "smsp__sass_inst_executed_op_local_st.sum";
const DURATION: &str = "gpu__time_duration.sum";
/// Warps stalled at a barrier (bar.sync, named barriers) per issued instruction.
const BARRIER_STALLS: &str = "smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio";

/// The metrics `evoattn profile` asks ncu for.
pub const METRICS: &[&str] = &[
    // How busy the tensor cores are: the ceiling of an attention kernel.
    TENSOR_HMMA_PCT,
    // The wgmma share, where ncu can read it separately.
    TENSOR_GMMA_PCT,
    // mma.sync instructions issued: confirms which tensor path ran.
    "sm__inst_executed_pipe_tensor_op_hmma.sum",
    // wgmma instructions issued: non-zero only for the Hopper kernels.
    "sm__inst_executed_pipe_tensor_op_gmma.sum",
    // The softmax's exponentials: at hd64 they need as many cycles as the tensor pipe.
    XU_PCT,
    // Issue slots: with both pipes part-busy, whether instructions themselves are the limit.
    ISSUE_PCT,
    // DRAM bandwidth used: high means K/V streaming is the limit.
    DRAM_PCT,
    // The busiest SM unit: high with a quiet tensor pipe means softmax/ALU work dominates.
    SM_PCT,
    // Achieved occupancy: resident warps per SM, i.e. how much latency can be hidden.
    WARPS_ACTIVE_PCT,
    // Shared-memory bank conflicts: serialised ldmatrix/st.shared wavefronts.
    BANK_CONFLICTS,
    // Registers per thread: what caps occupancy for these kernels.
    REGISTERS,
    // Blocks per SM the register file allows.
    "launch__occupancy_limit_registers",
    // Local-memory loads and stores: register spills.
    LOCAL_LOADS,
    LOCAL_STORES,
    // Kernel time, to tie the counters to the bench figure.
    DURATION,
    // Barrier stalls: the tuner's composite score penalises synchronisation.
    BARRIER_STALLS,
];

/// The counters of one profiled kernel launch. Values are None where ncu printed "n/a" or
/// a non-number; times are converted to nanoseconds.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct KernelProfile {
    pub kernel: String,
    pub launch_id: u32,
    pub metrics: BTreeMap<String, Option<f64>>,
}

impl KernelProfile {
    fn get(&self, name: &str) -> Option<f64> {
        self.metrics.get(name).copied().flatten()
    }

    /// Tensor-pipe busy %: the larger of the hmma and gmma readings that exist.
    pub fn tensor_pct(&self) -> Option<f64> {
        match (self.get(TENSOR_HMMA_PCT), self.get(TENSOR_GMMA_PCT)) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        }
    }
    pub fn xu_pct(&self) -> Option<f64> {
        self.get(XU_PCT)
    }
    pub fn issue_pct(&self) -> Option<f64> {
        self.get(ISSUE_PCT)
    }
    pub fn dram_pct(&self) -> Option<f64> {
        self.get(DRAM_PCT)
    }
    pub fn sm_pct(&self) -> Option<f64> {
        self.get(SM_PCT)
    }
    pub fn warps_active_pct(&self) -> Option<f64> {
        self.get(WARPS_ACTIVE_PCT)
    }
    pub fn bank_conflicts(&self) -> Option<f64> {
        self.get(BANK_CONFLICTS)
    }
    pub fn registers(&self) -> Option<f64> {
        self.get(REGISTERS)
    }
    pub fn local_loads(&self) -> Option<f64> {
        self.get(LOCAL_LOADS)
    }
    pub fn local_stores(&self) -> Option<f64> {
        self.get(LOCAL_STORES)
    }
    pub fn duration_ns(&self) -> Option<f64> {
        self.get(DURATION)
    }
    pub fn barrier_stalls(&self) -> Option<f64> {
        self.get(BARRIER_STALLS)
    }
}

/// Splits one CSV line: fields may be quoted, with `""` for a quote inside.
fn split_csv(line: &str) -> Vec<String> {
    let mut fields = Vec::new();
    let mut field = String::new();
    let mut quoted = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '"' if quoted && chars.peek() == Some(&'"') => {
                field.push('"');
                chars.next();
            }
            '"' => quoted = !quoted,
            ',' if !quoted => fields.push(std::mem::take(&mut field)),
            _ => field.push(c),
        }
    }
    fields.push(field);
    fields
}

/// Nanoseconds per unit for the time units ncu may print; other units pass through.
fn ns_per_unit(unit: &str) -> f64 {
    match unit {
        "us" | "usecond" => 1e3,
        "ms" | "msecond" => 1e6,
        "s" | "second" => 1e9,
        _ => 1.0,
    }
}

/// A metric value: "2,319,296" → 2319296 (ncu's thousands separators); "n/a" → None.
fn parse_value(value: &str, unit: &str) -> Option<f64> {
    let number: f64 = value.replace(',', "").trim().parse().ok()?;
    Some(number * ns_per_unit(unit))
}

/// Parses `ncu --csv` output (long format, one row per launch and metric) into one profile
/// per launch, in launch order. Lines before the header and lines not starting with a quote
/// are the profiled program's output or ncu's `==PROF==` notes, and are skipped.
pub fn parse_metrics_csv(text: &str) -> anyhow::Result<Vec<KernelProfile>> {
    let mut lines = text.lines().skip_while(|l| !l.starts_with("\"ID\","));
    let header = split_csv(lines.next().context("no ncu CSV header (\"ID\",...) in ncu's output")?);
    let column = |name: &str| {
        header.iter().position(|h| h == name).with_context(|| format!("ncu's CSV header has no \"{name}\" column"))
    };
    let (id_col, kernel_col) = (column("ID")?, column("Kernel Name")?);
    let (name_col, unit_col, value_col) = (column("Metric Name")?, column("Metric Unit")?, column("Metric Value")?);
    let mut profiles: Vec<KernelProfile> = Vec::new();
    for line in lines.filter(|l| l.starts_with('"')) {
        let fields = split_csv(line);
        let field = |i: usize| fields.get(i).map_or("", String::as_str);
        // Rule rows of `--section` output carry no metric.
        if field(name_col).is_empty() {
            continue;
        }
        let launch_id: u32 = field(id_col).parse().with_context(|| format!("bad launch ID in ncu row: {line}"))?;
        let kernel = field(kernel_col);
        let index = match profiles.iter().position(|p| p.launch_id == launch_id && p.kernel == kernel) {
            Some(i) => i,
            None => {
                profiles.push(KernelProfile { kernel: kernel.to_string(), launch_id, metrics: BTreeMap::new() });
                profiles.len() - 1
            }
        };
        profiles[index].metrics.insert(field(name_col).to_string(), parse_value(field(value_col), field(unit_col)));
    }
    Ok(profiles)
}

/// What limits a kernel, and so what to change next.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
pub enum Bound {
    #[serde(rename = "compute-bound")]
    Compute,
    #[serde(rename = "memory-bound")]
    Memory,
    #[serde(rename = "latency-bound")]
    Latency,
    #[serde(rename = "under-occupied")]
    UnderOccupied,
}

impl Bound {
    pub fn name(self) -> &'static str {
        match self {
            Bound::Compute => "compute-bound",
            Bound::Memory => "memory-bound",
            Bound::Latency => "latency-bound",
            Bound::UnderOccupied => "under-occupied",
        }
    }
}

/// DRAM at or above this % of peak: bandwidth is the limit.
const MEMORY_DRAM_PCT: f64 = 60.0;
/// Tensor pipe at or above this %, with DRAM below COMPUTE_MAX_DRAM_PCT: the math is the limit.
const COMPUTE_TENSOR_PCT: f64 = 50.0;
const COMPUTE_MAX_DRAM_PCT: f64 = 50.0;
/// Some SM unit at or above this % while the tensor pipe is not: non-tensor work (softmax
/// exp/FMA, address math) is the limit.
const COMPUTE_SM_PCT: f64 = 60.0;
/// The XU pipe (MUFU) at or above this % while the tensor pipe is not: the exponentials are the
/// limit (ncu's SM throughput, the busiest unit over the kernel, need not show it).
const COMPUTE_XU_PCT: f64 = 60.0;
/// Warps active below this % of the SM's 64 slots is under 6.4 warps per SM: less than one
/// 8-warp CTA resident on average, so SMs sit idle (grid too small, tail, or launch limits).
const UNDER_OCCUPIED_WARPS_PCT: f64 = 10.0;

fn pct(v: Option<f64>) -> String {
    v.map_or_else(|| "n/a".to_string(), |v| format!("{v:.1}%"))
}

/// Classifies a profile. Rules in order; the first that holds decides. A rule whose metric
/// ncu could not read does not fire.
pub fn classify(p: &KernelProfile) -> (Bound, String) {
    let (tensor, dram, sm, warps) = (p.tensor_pct(), p.dram_pct(), p.sm_pct(), p.warps_active_pct());
    let at_least = |v: Option<f64>, t: f64| v.is_some_and(|v| v >= t);
    let below = |v: Option<f64>, t: f64| v.is_some_and(|v| v < t);
    if at_least(dram, MEMORY_DRAM_PCT) {
        return (Bound::Memory, format!("DRAM throughput {} ≥ {MEMORY_DRAM_PCT}% of peak", pct(dram)));
    }
    if at_least(tensor, COMPUTE_TENSOR_PCT) && below(dram, COMPUTE_MAX_DRAM_PCT) {
        return (
            Bound::Compute,
            format!(
                "tensor pipe {} ≥ {COMPUTE_TENSOR_PCT}% with DRAM {} < {COMPUTE_MAX_DRAM_PCT}%",
                pct(tensor),
                pct(dram)
            ),
        );
    }
    let xu = p.xu_pct();
    if at_least(xu, COMPUTE_XU_PCT) {
        return (
            Bound::Compute,
            format!(
                "XU pipe (MUFU) {} ≥ {COMPUTE_XU_PCT}% with tensor pipe {}: the softmax's exponentials are the limit",
                pct(xu),
                pct(tensor)
            ),
        );
    }
    if at_least(sm, COMPUTE_SM_PCT) {
        return (
            Bound::Compute,
            format!(
                "SM throughput {} ≥ {COMPUTE_SM_PCT}% with tensor pipe {}: non-tensor work (softmax, address math) dominates",
                pct(sm),
                pct(tensor)
            ),
        );
    }
    if below(warps, UNDER_OCCUPIED_WARPS_PCT) {
        return (
            Bound::UnderOccupied,
            format!(
                "warps active {} < {UNDER_OCCUPIED_WARPS_PCT}% with tensor {} and DRAM {}: SMs lack resident warps",
                pct(warps),
                pct(tensor),
                pct(dram)
            ),
        );
    }
    (
        Bound::Latency,
        format!(
            "tensor {}, XU {}, DRAM {}, SM {} all below saturation with issue slots {} and warps active {}: stalls \
             on dependencies or barriers",
            pct(tensor),
            pct(xu),
            pct(dram),
            pct(sm),
            pct(p.issue_pct()),
            pct(warps)
        ),
    )
}

/// The counters the tuner scores and gates a candidate with (`tune --fitness composite`,
/// `--ncu-gate`): one launch's, or the mean of one launch per tuning shape.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, serde::Deserialize)]
pub struct NcuTerms {
    pub tensor_pct: Option<f64>,
    pub sm_pct: Option<f64>,
    pub dram_pct: Option<f64>,
    /// Warps stalled at barriers per issued instruction.
    pub barrier_stalls: Option<f64>,
    pub registers: Option<f64>,
    /// What bounds the kernel ([`classify`]): of the longest launch, where several were read.
    #[serde(default)]
    pub bound: Option<Bound>,
}

pub fn ncu_terms(p: &KernelProfile) -> NcuTerms {
    NcuTerms {
        tensor_pct: p.tensor_pct(),
        sm_pct: p.sm_pct(),
        dram_pct: p.dram_pct(),
        barrier_stalls: p.barrier_stalls(),
        registers: p.registers(),
        bound: Some(classify(p).0),
    }
}

impl NcuTerms {
    /// The mean of each counter over `launches` (None where any launch lacks it), and the bound
    /// of the longest (`durations_ns`, one per launch; the first launch's without them).
    pub fn mean(launches: &[NcuTerms], durations_ns: &[Option<f64>]) -> NcuTerms {
        let mean = |f: fn(&NcuTerms) -> Option<f64>| {
            let values: Option<Vec<f64>> = launches.iter().map(f).collect();
            values.filter(|v| !v.is_empty()).map(|v| v.iter().sum::<f64>() / v.len() as f64)
        };
        NcuTerms {
            tensor_pct: mean(|t| t.tensor_pct),
            sm_pct: mean(|t| t.sm_pct),
            dram_pct: mean(|t| t.dram_pct),
            barrier_stalls: mean(|t| t.barrier_stalls),
            registers: mean(|t| t.registers),
            bound: launches
                .iter()
                .zip(durations_ns.iter().copied().chain(std::iter::repeat(None)))
                // The first of equals: `max_by` would keep the last.
                .reduce(|best, x| if x.1.unwrap_or(0.0) > best.1.unwrap_or(0.0) { x } else { best })
                .and_then(|(t, _)| t.bound),
        }
    }
}

/// Composite-score points per unit of geomean speedup: the founding documents' weight. The
/// counters' terms add up to 300 points, so they outweigh speed differences up to 30%.
pub const COMPOSITE_SPEEDUP_WEIGHT: f64 = 1000.0;
/// Points per tensor-pipe percent (the founding documents' 2).
pub const COMPOSITE_TENSOR_WEIGHT: f64 = 2.0;
/// Points per SM-busy percent (the founding documents' 1).
pub const COMPOSITE_SM_WEIGHT: f64 = 1.0;
/// Points off per warp stalled at a barrier per issued instruction: at the 0.1-2 that attention
/// kernels read, 1-20 points, a synchronisation-heavy kernel pays up to 2% of speedup.
pub const COMPOSITE_BARRIER_PENALTY: f64 = 10.0;
/// Points off per register a thread: 128 registers cost 12.8 points, 255 cost 25.5, so of two
/// kernels within 1.3% the leaner one ranks first. (Spills, the founding documents' third
/// penalty, never reach the profiler: the resource gate refuses them.)
pub const COMPOSITE_REGISTER_PENALTY: f64 = 0.1;

/// The founding documents' composite score: `1000 × speedup + 2 × tensor % + SM % − penalties`
/// (barrier stalls, registers). A missing counter adds or costs nothing: ncu said "n/a".
pub fn composite(speedup: f64, t: &NcuTerms) -> f64 {
    COMPOSITE_SPEEDUP_WEIGHT * speedup
        + COMPOSITE_TENSOR_WEIGHT * t.tensor_pct.unwrap_or(0.0)
        + COMPOSITE_SM_WEIGHT * t.sm_pct.unwrap_or(0.0)
        - COMPOSITE_BARRIER_PENALTY * t.barrier_stalls.unwrap_or(0.0)
        - COMPOSITE_REGISTER_PENALTY * t.registers.unwrap_or(0.0)
}

/// Tensor-pipe percent from which a kernel counts as using the tensor cores (the founding
/// documents' NCU sanity gate).
pub const SANITY_TENSOR_PCT: f64 = 50.0;
/// DRAM percent below which a kernel is not streaming memory wastefully (the same gate).
pub const SANITY_DRAM_PCT: f64 = 50.0;

/// The founding documents' fourth gate (`tune --ncu-gate`): the tensor pipe at least 50% busy,
/// or DRAM under 50%: a kernel that does neither moves bytes instead of doing math. Unreadable
/// counters fail it: the gate cannot vouch for what it cannot see.
pub fn sanity(t: &NcuTerms) -> Result<(), String> {
    match (t.tensor_pct, t.dram_pct) {
        (Some(tensor), _) if tensor >= SANITY_TENSOR_PCT => Ok(()),
        (_, Some(dram)) if dram < SANITY_DRAM_PCT => Ok(()),
        (Some(tensor), Some(dram)) => Err(format!(
            "tensor pipe {tensor:.1}% (< {SANITY_TENSOR_PCT}%) with DRAM {dram:.1}% (>= {SANITY_DRAM_PCT}%): \
             the kernel streams memory instead of using the tensor cores"
        )),
        _ => Err("ncu reported no tensor-pipe or DRAM reading, so the sanity gate cannot pass".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MMA: &str = include_str!("../../tests/fixtures/ncu/h100-ncu-mma-metrics.csv");
    const WGMMA: &str = include_str!("../../tests/fixtures/ncu/h100-ncu-wgmma-metrics.csv");
    const SECTIONS: &str = include_str!("../../tests/fixtures/ncu/h100-ncu-mma-sections.csv");

    fn profile(metrics: &[(&str, f64)]) -> KernelProfile {
        KernelProfile {
            kernel: "evoattn_test".into(),
            launch_id: 0,
            metrics: metrics.iter().map(|(k, v)| (k.to_string(), Some(*v))).collect(),
        }
    }

    #[test]
    fn parses_the_h100_mma_capture() {
        let profiles = parse_metrics_csv(MMA).unwrap();
        assert_eq!(profiles.len(), 2);
        let p = &profiles[0];
        assert_eq!((p.kernel.as_str(), p.launch_id), ("evoattn_mma_bf16_d128_bm128_bn64_s2_qr1", 0));
        // A capture from before the XU, issue and barrier metrics joined the list: every other
        // one is there.
        let added = [XU_PCT, ISSUE_PCT, BARRIER_STALLS];
        assert_eq!(p.metrics.len(), METRICS.len() - added.len());
        assert!(METRICS.iter().filter(|m| !added.contains(m)).all(|m| p.metrics.contains_key(*m)));
        assert_eq!((p.xu_pct(), p.issue_pct()), (None, None));
        assert_eq!(p.tensor_pct(), Some(37.56));
        assert_eq!(p.dram_pct(), Some(3.37));
        assert_eq!(p.sm_pct(), Some(43.58));
        assert_eq!(p.warps_active_pct(), Some(12.5));
        assert_eq!(p.bank_conflicts(), Some(19602.0));
        assert_eq!(p.registers(), Some(210.0));
        assert_eq!((p.local_loads(), p.local_stores()), (Some(0.0), Some(0.0)));
        assert_eq!(p.duration_ns(), Some(2_319_296.0));
        assert_eq!(p.metrics[TENSOR_GMMA_PCT], None);
        assert_eq!(p.metrics["sm__inst_executed_pipe_tensor_op_hmma.sum"], Some(134_217_728.0));
        assert_eq!(profiles[1].launch_id, 1);
        assert_eq!(profiles[1].duration_ns(), Some(2_301_440.0));
        assert_eq!(classify(p).0, Bound::Latency);
        let terms = ncu_terms(p);
        assert_eq!((terms.tensor_pct, terms.sm_pct, terms.registers), (Some(37.56), Some(43.58), Some(210.0)));
        // The capture predates the barrier-stall metric.
        assert_eq!(terms.barrier_stalls, None);
    }

    #[test]
    fn parses_the_h100_wgmma_capture() {
        let profiles = parse_metrics_csv(WGMMA).unwrap();
        assert_eq!(profiles.len(), 2);
        let p = &profiles[0];
        assert_eq!(p.kernel, "evoattn_wgmma_bf16_d128_bn128_s2_wg2_ldcp_async");
        assert_eq!(p.tensor_pct(), Some(30.54));
        assert_eq!(p.dram_pct(), Some(4.06));
        assert_eq!(p.warps_active_pct(), Some(12.5));
        assert_eq!(p.registers(), Some(203.0));
        assert_eq!(p.duration_ns(), Some(1_922_176.0));
        assert_eq!(p.metrics["sm__inst_executed_pipe_tensor_op_gmma.sum"], Some(8_388_608.0));
        let (bound, reason) = classify(p);
        assert_eq!(bound, Bound::Latency);
        assert!(reason.contains("tensor 30.5%") && reason.contains("DRAM 4.1%"), "{reason}");
    }

    #[test]
    fn parses_section_output_and_skips_rule_rows() {
        let profiles = parse_metrics_csv(SECTIONS).unwrap();
        assert_eq!(profiles.len(), 1);
        assert_eq!(profiles[0].metrics["Duration"], Some(2_299_744.0));
        assert_eq!(profiles[0].metrics["DRAM Throughput"], Some(3.41));
        assert!(!profiles[0].metrics.contains_key(""));
    }

    #[test]
    fn csv_edge_cases() {
        assert_eq!(split_csv(r#""a,b","say ""hi""",,x"#), ["a,b", r#"say "hi""#, "", "x"]);
        assert_eq!(parse_value("n/a", "%"), None);
        assert_eq!(parse_value("1,234.5", "ns"), Some(1234.5));
        assert_eq!(parse_value("2.5", "usecond"), Some(2500.0));
        assert_eq!(parse_value("3", "ms"), Some(3e6));
        assert!(parse_metrics_csv("==PROF== nothing profiled\n").is_err());
        let no_value = "\"ID\",\"Kernel Name\",\"Metric Name\",\"Metric Unit\"\n";
        assert!(parse_metrics_csv(no_value).unwrap_err().to_string().contains("Metric Value"));
        let bad_id =
            "\"ID\",\"Kernel Name\",\"Metric Name\",\"Metric Unit\",\"Metric Value\"\n\"x\",\"k\",\"m\",\"\",\"1\"";
        assert!(parse_metrics_csv(bad_id).is_err());
    }

    #[test]
    fn classification_rules() {
        let memory = profile(&[(DRAM_PCT, 85.0), (TENSOR_HMMA_PCT, 70.0), (WARPS_ACTIVE_PCT, 5.0)]);
        assert_eq!(classify(&memory).0, Bound::Memory);
        let tensor = profile(&[(DRAM_PCT, 10.0), (TENSOR_HMMA_PCT, 72.0), (SM_PCT, 75.0)]);
        assert_eq!(classify(&tensor).0, Bound::Compute);
        assert!(classify(&tensor).1.starts_with("tensor pipe 72.0%"));
        // wgmma readings count where ncu can read them separately.
        let gmma = profile(&[(DRAM_PCT, 10.0), (TENSOR_HMMA_PCT, 20.0), (TENSOR_GMMA_PCT, 65.0)]);
        assert_eq!((gmma.tensor_pct(), classify(&gmma).0), (Some(65.0), Bound::Compute));
        let alu = profile(&[(DRAM_PCT, 10.0), (TENSOR_HMMA_PCT, 30.0), (SM_PCT, 80.0)]);
        assert_eq!(classify(&alu).0, Bound::Compute);
        assert!(classify(&alu).1.contains("non-tensor"));
        let idle = profile(&[(DRAM_PCT, 5.0), (TENSOR_HMMA_PCT, 8.0), (SM_PCT, 10.0), (WARPS_ACTIVE_PCT, 6.25)]);
        assert_eq!(classify(&idle).0, Bound::UnderOccupied);
        // Thresholds are inclusive on the saturated side.
        let edge = profile(&[(DRAM_PCT, MEMORY_DRAM_PCT)]);
        assert_eq!(classify(&edge).0, Bound::Memory);
        let edge = profile(&[(DRAM_PCT, 49.9), (TENSOR_HMMA_PCT, COMPUTE_TENSOR_PCT)]);
        assert_eq!(classify(&edge).0, Bound::Compute);
        // The XU pipe (MUFU) saturated under a part-busy tensor pipe.
        let mufu = profile(&[(DRAM_PCT, 5.0), (TENSOR_HMMA_PCT, 45.0), (XU_PCT, COMPUTE_XU_PCT), (SM_PCT, 50.0)]);
        assert_eq!(classify(&mufu).0, Bound::Compute);
        assert!(classify(&mufu).1.contains("exponentials"), "{}", classify(&mufu).1);
        // hd64 S=512 on the H100 (perf log, sessions 10 and 12: pipe and stall counters of the same
        // kernel sources), warps 12 of 64
        // (one 384-thread block an SM). Every pipe near 40%: stalls, and the reason says which
        // pipes it read.
        let hd64 = profile(&[
            (DRAM_PCT, 41.9),
            (TENSOR_HMMA_PCT, 40.3),
            (XU_PCT, 42.9),
            (ISSUE_PCT, 44.1),
            (SM_PCT, 42.3),
            (WARPS_ACTIVE_PCT, 18.75),
        ]);
        let (bound, reason) = classify(&hd64);
        assert_eq!(bound, Bound::Latency);
        assert!(reason.contains("XU 42.9%") && reason.contains("issue slots 44.1%"), "{reason}");
        // Nothing readable: no rule fires, and the reason says so.
        let empty = profile(&[]);
        let (bound, reason) = classify(&empty);
        assert_eq!(bound, Bound::Latency);
        assert!(reason.contains("tensor n/a"), "{reason}");
        let none = NcuTerms {
            tensor_pct: None,
            sm_pct: None,
            dram_pct: None,
            barrier_stalls: None,
            registers: None,
            bound: Some(Bound::Latency),
        };
        assert_eq!(ncu_terms(&empty), none);
    }

    fn terms(tensor: f64, sm: f64, dram: f64, barrier: f64, registers: f64) -> NcuTerms {
        NcuTerms {
            tensor_pct: Some(tensor),
            sm_pct: Some(sm),
            dram_pct: Some(dram),
            barrier_stalls: Some(barrier),
            registers: Some(registers),
            bound: None,
        }
    }

    #[test]
    fn composite_is_speedup_first_then_tensor_and_sm_busy_less_syncs_and_registers() {
        // 1000 × 1.1 + 2 × 60 + 70 − 10 × 0.5 − 0.1 × 128 = 1100 + 120 + 70 − 5 − 12.8.
        assert!((composite(1.1, &terms(60.0, 70.0, 10.0, 0.5, 128.0)) - 1272.2).abs() < 1e-9);
        // The counters weigh up to 300 points, 30% of speedup: a kernel 10% faster with idle
        // pipes ranks below one with the tensor pipe 60% busy. That trade is what a composite
        // run is compared with a geomean run for.
        let (fast, busy) =
            (composite(1.1, &terms(0.0, 0.0, 0.0, 0.0, 0.0)), composite(1.0, &terms(60.0, 0.0, 0.0, 0.0, 0.0)));
        assert!(busy > fast, "{fast} {busy}");
        // At equal speed the busier tensor pipe and the leaner kernel rank first.
        assert!(
            composite(1.0, &terms(60.0, 50.0, 0.0, 0.5, 128.0)) > composite(1.0, &terms(50.0, 50.0, 0.0, 0.5, 128.0))
        );
        assert!(
            composite(1.0, &terms(50.0, 50.0, 0.0, 0.2, 96.0)) > composite(1.0, &terms(50.0, 50.0, 0.0, 0.5, 128.0))
        );
    }

    #[test]
    fn sanity_needs_a_busy_tensor_pipe_or_quiet_dram() {
        assert!(sanity(&terms(55.0, 0.0, 90.0, 0.0, 0.0)).is_ok(), "tensor-bound");
        assert!(sanity(&terms(20.0, 0.0, 30.0, 0.0, 0.0)).is_ok(), "latency-bound, not streaming");
        let err = sanity(&terms(20.0, 0.0, 80.0, 0.0, 0.0)).unwrap_err();
        assert!(err.contains("tensor pipe 20.0%") && err.contains("DRAM 80.0%"), "{err}");
        assert!(sanity(&NcuTerms { dram_pct: None, tensor_pct: None, ..terms(0.0, 0.0, 0.0, 0.0, 0.0) }).is_err());
    }

    #[test]
    fn the_mean_over_shapes_needs_every_launch_and_takes_the_longest_ones_bound() {
        let short = NcuTerms { bound: Some(Bound::Latency), ..terms(40.0, 50.0, 10.0, 1.0, 128.0) };
        let long = NcuTerms { bound: Some(Bound::Compute), ..terms(60.0, 70.0, 30.0, 0.0, 128.0) };
        let m = NcuTerms::mean(&[short, long], &[Some(50e3), Some(2e6)]);
        assert_eq!(m, NcuTerms { bound: Some(Bound::Compute), ..terms(50.0, 60.0, 20.0, 0.5, 128.0) });
        assert_eq!(NcuTerms::mean(&[short, long], &[]).bound, Some(Bound::Latency), "no durations: the first");
        let partial = NcuTerms { barrier_stalls: None, ..long };
        assert_eq!(NcuTerms::mean(&[short, partial], &[None, None]).barrier_stalls, None);
    }
}
