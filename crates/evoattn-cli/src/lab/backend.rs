//! Where kernels run: the real GPU through the library, or a mock that computes on the CPU so
//! that the CLI's behaviour (tables, exit codes, files) is testable on machines with no GPU.
//! `EVOATTN_BACKEND=mock` selects the mock; it is for tests, and says so in `info`.

use crate::lab::inputs::{HostInputs, Inputs};
use evoattn::runtime::compile::CompiledKernel;
use evoattn::{KernelSpec, Plan, Problem, TensorName};

/// A whole kernel source proposed to the tuner, compiled by the parent process.
#[derive(Clone, Debug)]
pub struct Variant {
    /// The CUDA source (the mock backend reads its planted-fault markers).
    pub source: String,
    pub compiled: CompiledKernel,
}

/// Which kernel a forward pass runs.
#[derive(Clone, Copy, Debug)]
pub enum Kernel<'a> {
    /// A kernel the caller planned for the problem (once, with the tuner's store if any).
    Planned(&'a Plan),
    /// The oracle: the `reference` kernel, planned by the backend for the problem.
    Reference,
    /// A proposed source variant.
    Variant(&'a Variant),
}

impl Kernel<'_> {
    /// The kernel's spec; `None` for the oracle's reference kernel, which the backend plans.
    pub fn spec(&self) -> Option<&KernelSpec> {
        match self {
            Kernel::Planned(plan) => Some(&plan.spec),
            Kernel::Variant(variant) => Some(&variant.compiled.spec),
            Kernel::Reference => None,
        }
    }
}

/// What a backend says about the machine.
#[derive(Clone, Debug)]
pub struct BackendInfo {
    pub gpu: String,
    pub compute_capability: (i32, i32),
    pub arch: String,
    pub sm_count: u32,
    /// L2 cache size: the timer flushes twice this before each sample.
    pub l2_bytes: usize,
    pub driver: String,
    pub nvrtc: String,
    pub mock: bool,
}

/// The result of one forward pass, copied back to the host.
#[derive(Clone, Debug)]
pub struct Forward {
    /// Output bits laid out by `problem.o_strides` (length `problem.extent(O)`).
    pub o: Vec<u16>,
    /// `[B, H, Sq]` natural-log LSE when the problem asked for it.
    pub lse: Option<Vec<f32>>,
    /// The kernel that ran (its symbol name).
    pub kernel: String,
}

/// The result of one backward pass, copied back to the host: the gradients laid out as Q, K
/// and V (NaN-poisoned before the launch).
#[derive(Clone, Debug)]
pub struct Backward {
    pub dq: Vec<u16>,
    pub dk: Vec<u16>,
    pub dv: Vec<u16>,
    /// The backward kernel that ran (its symbol name).
    pub kernel: String,
}

/// How to time a kernel.
#[derive(Clone, Copy, Debug)]
pub struct TimingOptions {
    pub warmup: usize,
    pub samples: usize,
    pub mode: crate::stores::record::Mode,
}

/// Raw per-launch times of one kernel.
#[derive(Clone, Debug)]
pub struct Timing {
    pub samples_us: Vec<f64>,
}

/// How [`Backend::host_cost`] samples: `rounds` rounds of `calls` calls each, `pause` apart, so
/// that a passing disturbance of the machine spoils one round, not the figure.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HostCostRounds {
    pub rounds: usize,
    pub calls: usize,
    pub pause: std::time::Duration,
}

/// The timeline of one launch of a `trace=1` kernel.
#[derive(Clone, Debug)]
pub struct TraceRun {
    /// The kernel that ran (its symbol name).
    pub kernel: String,
    pub warps: Vec<evoattn::trace::WarpTrace>,
}

/// The L2 flush buffer is this many times the L2 size, so nothing of the last launch survives;
/// ours and the peers flush the same amount.
const FLUSH_L2_MULTIPLE: usize = 2;

/// Bytes of the flush buffer on a GPU with `l2_bytes` of L2.
pub fn flush_bytes(l2_bytes: usize) -> usize {
    l2_bytes * FLUSH_L2_MULTIPLE
}

/// FNV-1a over `bytes` taken eight at a time: the digest [`Backend::input_digests`] reports.
/// Not cryptographic: it tells a kernel's stray write apart from none (any one changed byte
/// changes it), at a few GB/s, so a gigabyte of inputs costs a fraction of a second.
pub fn digest(bytes: &[u8]) -> u64 {
    const PRIME: u64 = 0x0100_0000_01b3;
    let words = bytes.chunks_exact(8);
    let tail = words.remainder();
    let h = words.fold(0xcbf2_9ce4_8422_2325u64, |h, w| {
        (h ^ u64::from_le_bytes(w.try_into().expect("eight bytes"))).wrapping_mul(PRIME)
    });
    // The length too, so that trailing zero bytes are not free.
    tail.iter().fold(h ^ bytes.len() as u64, |h, &b| (h ^ u64::from(b)).wrapping_mul(PRIME))
}

/// A place to run attention forward passes.
pub trait Backend {
    fn info(&self) -> BackendInfo;

    /// Runs `kernel` on `inputs`, laid out by the problem's strides, and copies its output back.
    /// The output buffer is filled with NaN before the launch so that unwritten elements are
    /// caught.
    fn forward(&mut self, problem: &Problem, kernel: Kernel, inputs: Inputs) -> evoattn::Result<Forward>;

    /// The backward pass `plan` (a backward family's) on `inputs` with the loss's gradient `d_o`
    /// (laid out as O), after the planner's forward with LSE on the same inputs, as a training
    /// step runs them. Backends without one say so.
    fn backward(&mut self, plan: &Plan, inputs: &HostInputs, d_o: &[u16]) -> evoattn::Result<Backward> {
        let _ = (plan, inputs, d_o);
        Err(evoattn::Error::NoGpu(format!("the {} backend cannot run the backward pass", self.info().gpu)))
    }

    /// Times `samples` launches of `kernel` with device events, each after overwriting a buffer
    /// larger than L2 so no launch reads another's cache. Backends that cannot time say so.
    fn time(
        &mut self,
        problem: &Problem,
        kernel: Kernel,
        inputs: Inputs,
        options: TimingOptions,
    ) -> evoattn::Result<Timing> {
        let _ = (problem, inputs, options);
        let what = match kernel {
            Kernel::Planned(_) | Kernel::Reference => "time kernels",
            Kernel::Variant(_) => "run source variants",
        };
        Err(evoattn::Error::NoGpu(format!("the {} backend cannot {what}", self.info().gpu)))
    }

    /// A reader of the GPU's SM clock, for the lab to note the clock each timed block ran at
    /// (`crate::lab::clock`); `None` where there is none (the mock; NVML missing, said once).
    fn sm_clock(&mut self) -> Option<std::sync::Arc<dyn crate::lab::clock::ClockSource>> {
        None
    }

    /// Host (CPU) time in microseconds of each call of the library's launch path
    /// (`Attention::forward_on`) of `plan`, in `rounds` (inputs uploaded and the launch
    /// prepared once): what a caller's thread pays per call, GPU time excluded. One vector of
    /// samples per round. Backends without a launch path say so.
    fn host_cost(&mut self, plan: &Plan, inputs: Inputs, rounds: HostCostRounds) -> evoattn::Result<Vec<Vec<f64>>> {
        let _ = (plan, inputs, rounds);
        Err(evoattn::Error::NoGpu(format!("the {} backend has no launch path to time", self.info().gpu)))
    }

    /// Launches `plan` (a `trace=1` kernel) `warmup` times, then once more with its timeline
    /// cleared, and returns that launch's timeline. Backends that cannot say so.
    fn trace(&mut self, plan: &Plan, inputs: Inputs, warmup: usize) -> evoattn::Result<TraceRun> {
        let _ = (plan, inputs, warmup);
        Err(evoattn::Error::NoGpu(format!("the {} backend cannot trace kernels", self.info().gpu)))
    }

    /// A digest of each input tensor (Q, K, V, and an E4M3 problem's descales) as the backend
    /// holds `inputs` for `problem` now: the same memory a later `time` or `forward` on the same
    /// drawn inputs reads. Two digests around the timed launches show whether a kernel wrote its
    /// inputs. Backends that hold no inputs say so.
    fn input_digests(&mut self, problem: &Problem, inputs: Inputs) -> evoattn::Result<Vec<(TensorName, u64)>> {
        let _ = (problem, inputs);
        Err(evoattn::Error::NoGpu(format!("the {} backend holds no inputs", self.info().gpu)))
    }

    /// The planned kernel packed for a launch by another process (the oracle's cross-check of
    /// our timer). Backends without compiled kernels say so.
    fn launch_image(&mut self, plan: &Plan) -> evoattn::Result<evoattn::runtime::device::LaunchImage> {
        let _ = plan;
        Err(evoattn::Error::NoGpu(format!("the {} backend has no compiled kernels", self.info().gpu)))
    }
}
