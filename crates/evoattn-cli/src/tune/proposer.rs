//! The proposer hook (`--proposer CMD`): each generation, CMD runs under `sh -c` with a
//! prompt on stdin and answers on stdout with config lines (`--config` syntax) or one whole
//! kernel source. What the prompt carries is the run's guidance, the EvoEngineer paper's three
//! modes: I1 the task (problem, levers, gates, fitness, the kernel source) always; I3 the
//! optimisation insights (`--insights`) in `insight` and `full`; I2 the elites' configs,
//! speedups and medians in `full` only. What it proposes goes through the same gates as any
//! child; a proposer that fails or answers nonsense costs a warning, never the run.

use super::evolve::{Candidate, Proposal};
use super::space;
use evoattn::kernels::{main_source, HEADERS};
use evoattn::{Arch, Causal, KernelSpec, Shape};
use std::io::Write;
use std::process::{Command, Stdio};

/// A stdout holding this is a kernel source, not config lines.
const SOURCE_MARKER: &str = "__global__";
/// Fences around the kernel source in the prompt (a proposer may cut it out between them).
pub const SOURCE_FENCE_OPEN: &str = "```cuda";
const SOURCE_FENCE_CLOSE: &str = "```";

/// What a proposer's prompt carries (EvoEngineer's modes); recorded with every evaluation of a
/// run that has a proposer, so runs of different modes can be compared.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Guidance {
    /// The task alone (I1).
    Free,
    /// The task and the optimisation insights (I1, I3).
    Insight,
    /// The task, the insights and the elite history (I1, I2, I3).
    Full,
}

impl Guidance {
    pub fn name(self) -> &'static str {
        match self {
            Guidance::Free => "free",
            Guidance::Insight => "insight",
            Guidance::Full => "full",
        }
    }

    /// A stored name back, as `--guidance` reads it.
    pub fn parse(text: &str) -> Option<Self> {
        <Guidance as clap::ValueEnum>::from_str(text, false).ok()
    }

    fn insights(self) -> bool {
        self != Guidance::Free
    }

    fn elites(self) -> bool {
        self == Guidance::Full
    }
}

/// What the prompt describes besides the elites.
pub struct Task {
    pub gpu: String,
    pub arch: Arch,
    pub baseline: KernelSpec,
    pub causal: Causal,
    pub shapes: Vec<Shape>,
    /// Profile insights (I3), e.g. `evoattn profile` output saved to a file.
    pub insights: Option<String>,
    pub guidance: Guidance,
}

pub struct Proposer {
    command: String,
    task: Task,
}

impl Proposer {
    pub fn new(command: String, task: Task) -> Self {
        Proposer { command, task }
    }

    /// The prompt of one generation.
    pub fn prompt(&self, generation: usize, elites: &[Candidate]) -> String {
        let t = &self.task;
        let imp = t.baseline.imp();
        let shapes: Vec<String> = t.shapes.iter().map(Shape::to_string).collect();
        let levers: Vec<String> =
            space::levers(imp).into_iter().map(|(k, values)| format!("{k}: {}", values.join("|"))).collect();
        let mut p = String::new();
        let parts = match t.guidance {
            Guidance::Free => "the task (I1)",
            Guidance::Insight => "the task (I1) and optimisation insights (I3)",
            Guidance::Full => "the task (I1), the elites so far (I2) and optimisation insights (I3)",
        };
        p.push_str(&format!("# guidance: {} ({parts})\n", t.guidance.name()));
        p.push_str("# I1: task\n");
        p.push_str(&format!(
            "Tune evoattn's `{imp}` attention forward kernel ({} head dim {}, mask {}) on {} ({}), generation {generation}.\n",
            t.baseline.dtype,
            t.baseline.head_dim,
            t.causal.name(),
            t.gpu,
            t.arch
        ));
        p.push_str(&format!("Shapes (B,H,Sq,D[,Hkv,Sk]): {}\n", shapes.join("; ")));
        p.push_str(&format!("Levers and their values: {}\n", levers.join("; ")));
        p.push_str(&format!(
            "Gates, in order: compile (NVRTC) -> resources (no spills or stack, at most {} bytes of shared memory, \
             {} registers a thread) -> correctness (fresh random inputs against float64) -> timing -> integrity \
             (inputs unchanged by the timed launches, correct again on new inputs, no time below 80% of the roofline's).\n",
            t.arch.max_smem_per_block(),
            t.arch.max_registers_per_thread()
        ));
        p.push_str(&format!(
            "Fitness: geometric-mean speedup over the planner's choice ({}); slower by more than 10% on two shapes \
             is discarded.\n",
            t.baseline.config
        ));
        p.push_str(
            "Answer on stdout with config lines in --config syntax (e.g. block_n=128,stages=2), or with one whole \
             kernel source that defines `extern \"C\" __global__ void EVOATTN_KERNEL_NAME(const __grid_constant__ \
             AttnParams p)` and reads the levers from their -D defines as the source below does.\n",
        );
        let unit = main_source(imp);
        let headers: Vec<&str> = HEADERS.iter().map(|h| h.name).collect();
        p.push_str(&format!(
            "Every candidate is this source ({}) compiled with its levers as -D defines; it may #include {}.\n",
            unit.name,
            headers.join(", ")
        ));
        p.push_str(&format!("{SOURCE_FENCE_OPEN}\n{}\n{SOURCE_FENCE_CLOSE}\n", unit.text.trim_end()));
        if t.guidance.elites() {
            p.push_str(
                "\n# I2: elites (best first; speedup = the default's median / the elite's, geometric mean over the \
                 shapes)\n",
            );
            for (i, e) in elites.iter().enumerate() {
                let medians: Vec<String> = e.medians_us.iter().map(|m| format!("{m:.1}")).collect();
                p.push_str(&format!(
                    "{}. {} speedup {:.3}×, medians µs [{}]\n",
                    i + 1,
                    e.spec.config,
                    e.speedup,
                    medians.join(", ")
                ));
            }
        }
        if t.guidance.insights() {
            p.push_str("\n# I3: profile insights\n");
            let counters = elites.first().and_then(|best| best.counters);
            if let Some(c) = counters {
                let show =
                    |v: Option<f64>, unit: &str| v.map_or_else(|| "n/a".to_string(), |v| format!("{v:.1}{unit}"));
                let bound = c.bound.map_or_else(String::new, |b| format!("{}; ", b.name()));
                p.push_str(&format!(
                    "Nsight Compute on the current best (mean over the shapes): {bound}tensor pipe {}, SM busy {}, \
                     DRAM {}, {} warps stalled at barriers per issued instruction, {} registers a thread.\n",
                    show(c.tensor_pct, "%"),
                    show(c.sm_pct, "%"),
                    show(c.dram_pct, "%"),
                    show(c.barrier_stalls, ""),
                    show(c.registers, "")
                ));
            }
            match (&t.insights, counters) {
                (Some(text), _) => p.push_str(text),
                (None, Some(_)) => {}
                (None, None) => p.push_str("none recorded for this run"),
            }
            p.push('\n');
        }
        p
    }

    /// Runs the command for one generation; proposals, and warnings about what was not one.
    pub fn propose(&self, generation: usize, elites: &[Candidate]) -> (Vec<Proposal>, Vec<String>) {
        let output = Command::new("sh")
            .args(["-c", &self.command])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .and_then(|mut child| {
                if let Some(mut stdin) = child.stdin.take() {
                    // A proposer that does not read its prompt closes the pipe early: not an error.
                    let _ = stdin.write_all(self.prompt(generation, elites).as_bytes());
                }
                child.wait_with_output()
            });
        match output {
            Ok(out) if out.status.success() => parse(&String::from_utf8_lossy(&out.stdout), &self.task),
            Ok(out) => (Vec::new(), vec![format!("proposer `{}` exited with {}", self.command, out.status)]),
            Err(e) => (Vec::new(), vec![format!("proposer `{}` could not run: {e}", self.command)]),
        }
    }
}

/// A source when stdout holds a kernel, else one config per non-empty line (lever overrides of
/// the baseline, as `--config` applies them to the default).
fn parse(stdout: &str, task: &Task) -> (Vec<Proposal>, Vec<String>) {
    if stdout.contains(SOURCE_MARKER) {
        return (vec![Proposal::Source(stdout.to_string())], Vec::new());
    }
    let mut proposals = Vec::new();
    let mut warnings = Vec::new();
    for line in stdout.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')) {
        match task.baseline.config.with_overrides(line) {
            Ok(config) => proposals.push(Proposal::Config(config)),
            Err(e) => warnings.push(format!("proposer line '{line}': {e}")),
        }
    }
    (proposals, warnings)
}

#[cfg(test)]
mod tests {
    use super::*;
    use evoattn::{Dtype, Impl, KernelConfig};

    fn task() -> Task {
        let config = evoattn::defaults::config(Impl::Mma, Arch::Sm90a, Dtype::F16, 64);
        Task {
            gpu: "NVIDIA H100".into(),
            arch: Arch::Sm90a,
            baseline: KernelSpec { config, dtype: Dtype::F16, head_dim: 64 },
            causal: Causal::None,
            shapes: vec![Shape::new(1, 8, 1024, 64)],
            insights: Some("tensor pipe 41%, compute-bound".into()),
            guidance: Guidance::Full,
        }
    }

    #[test]
    fn full_guidance_carries_the_task_the_elites_and_the_insights() {
        let t = task();
        let elite = Candidate { spec: t.baseline, medians_us: vec![12.5], fitness: 1.0, speedup: 1.0, counters: None };
        let p = Proposer::new("true".into(), t).prompt(3, &[elite]);
        for part in ["# guidance: full", "# I1: task", "# I2: elites", "# I3: profile insights", "generation 3"] {
            assert!(p.contains(part), "{part} missing from:\n{p}");
        }
        assert!(p.contains("block_m: 64|128") && p.contains("tensor pipe 41%"), "{p}");
        assert!(p.contains("1. block_m=128,block_n=64,stages=3,q_in_regs=1 speedup 1.000×, medians µs [12.5]"), "{p}");
        assert!(p.contains(SOURCE_FENCE_OPEN) && p.contains("EVOATTN_KERNEL_NAME"));
    }

    #[test]
    fn free_guidance_is_the_task_alone_and_insight_adds_the_insights() {
        let elite =
            Candidate { spec: task().baseline, medians_us: vec![12.5], fitness: 1.0, speedup: 1.0, counters: None };
        let prompt = |guidance| {
            Proposer::new("true".into(), Task { guidance, ..task() }).prompt(1, std::slice::from_ref(&elite))
        };
        let free = prompt(Guidance::Free);
        assert!(
            free.starts_with("# guidance: free") && free.contains("# I1: task") && free.contains(SOURCE_FENCE_OPEN)
        );
        assert!(!free.contains("# I2") && !free.contains("# I3") && !free.contains("tensor pipe"), "{free}");
        assert!(!free.contains("speedup 1.000×"), "no elite history in free mode");
        let insight = prompt(Guidance::Insight);
        assert!(insight.contains("# I3: profile insights\ntensor pipe 41%") && !insight.contains("# I2"), "{insight}");
        for g in [Guidance::Free, Guidance::Insight, Guidance::Full] {
            assert_eq!(Guidance::parse(g.name()), Some(g));
        }
    }

    #[test]
    fn insights_carry_the_current_best_counters_when_the_run_reads_them() {
        let counters = crate::lab::ncu::NcuTerms {
            tensor_pct: Some(61.5),
            sm_pct: Some(70.0),
            dram_pct: None,
            barrier_stalls: Some(0.42),
            registers: Some(168.0),
            bound: Some(crate::lab::ncu::Bound::Latency),
        };
        let best = Candidate {
            spec: task().baseline,
            medians_us: vec![12.5],
            fitness: 1250.0,
            speedup: 1.1,
            counters: Some(counters),
        };
        let prompt = |guidance, insights| {
            Proposer::new("true".into(), Task { guidance, insights, ..task() }).prompt(1, std::slice::from_ref(&best))
        };
        let p = prompt(Guidance::Insight, None);
        assert!(
            p.contains(
                "# I3: profile insights\nNsight Compute on the current best (mean over the shapes): latency-bound; tensor \
                 pipe 61.5%, SM busy 70.0%, DRAM n/a, 0.4 warps stalled at barriers per issued instruction, 168.0 \
                 registers a thread."
            ),
            "{p}"
        );
        assert!(!p.contains("none recorded"), "{p}");
        // With --insights too, both; the elites list the speedup, not the composite score.
        let full = prompt(Guidance::Full, Some("tensor pipe 41%".into()));
        assert!(full.contains("168.0 registers a thread.\ntensor pipe 41%"), "{full}");
        assert!(full.contains("speedup 1.100×"), "{full}");
        assert!(!prompt(Guidance::Free, None).contains("Nsight Compute"));
    }

    #[test]
    fn parses_configs_sources_and_reports_nonsense() {
        let t = task();
        let (got, warnings) = parse("block_n=128\n\n# a comment\nwarp_size=7\n", &t);
        let want = KernelConfig::Mma(evoattn::MmaConfig { block_m: 128, block_n: 128, stages: 3, q_in_regs: true });
        assert_eq!(got, [Proposal::Config(want)]);
        assert_eq!(warnings.len(), 1);
        assert!(warnings[0].contains("'warp_size' is not a lever of mma"), "{warnings:?}");
        let src = "extern \"C\" __global__ void k() {}\n";
        assert_eq!(parse(src, &t).0, [Proposal::Source(src.to_string())]);
    }

    #[test]
    fn a_failing_command_is_a_warning() {
        let t = task();
        let elite = Candidate { spec: t.baseline, medians_us: vec![1.0], fitness: 1.0, speedup: 1.0, counters: None };
        let (got, warnings) = Proposer::new("exit 3".into(), t).propose(0, std::slice::from_ref(&elite));
        assert!(got.is_empty());
        assert!(warnings[0].contains("exited with"), "{warnings:?}");
        let (got, _) = Proposer::new("echo stages=2".into(), task()).propose(0, &[elite]);
        assert_eq!(got.len(), 1);
    }
}
