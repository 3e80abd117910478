//! The fastest any kernel can run a problem on a GPU with measured [`Ceilings`]: its FLOPs at the
//! matmul peak, or its compulsory bytes at the copy bandwidth, whichever takes longer. A median
//! well below it ([`IMPOSSIBLE_SHARE`]) did not measure the work (it ran elsewhere, or not at
//! all): the tuner's integrity gate excludes such a candidate.

use crate::lab::ceilings::Ceilings;
use evoattn::{Problem, TensorName};

/// The tensor-core rate of a dtype relative to bf16's, which the matmul peak measures: E4M3
/// runs at twice it on Hopper (1979 against 989 dense TFLOP/s, datasheet), 16-bit types at it.
fn tensor_rate(problem: &Problem) -> f64 {
    if problem.dtype.is_fp8() {
        2.0
    } else {
        1.0
    }
}

/// Bytes no kernel avoids: every input element read once, O (and LSE) written once.
pub fn compulsory_bytes(problem: &Problem) -> f64 {
    let mut tensors = vec![TensorName::Q, TensorName::K, TensorName::V, TensorName::O, TensorName::Descale];
    if problem.with_lse {
        tensors.push(TensorName::Lse);
    }
    tensors.into_iter().map(|t| problem.elements(t) as f64 * problem.elem_bytes(t) as f64).sum()
}

/// The roofline's time of `problem` in µs. `copy_gbps` counts read and write traffic, as the
/// compulsory bytes do.
pub fn floor_us(problem: &Problem, ceilings: Ceilings) -> f64 {
    let compute = problem.flops() / (ceilings.matmul_tflops * tensor_rate(problem) * 1e6);
    let memory = compulsory_bytes(problem) / (ceilings.copy_gbps * 1e3);
    compute.max(memory)
}

/// The share of the roofline's time below which a median is impossible rather than merely
/// excellent: measured ceilings move 5-10% between machine-days at the power cap (perf-log
/// sessions 18-26), FlashAttention-class kernels reach 0.9-0.95 of the 8192³ matmul at hd256,
/// and read-mostly traffic (decoding) outruns a copy's even mix of reads and writes by up to
/// about 15%. A cheat that skips work is 2× or more below it.
pub const IMPOSSIBLE_SHARE: f64 = 0.8;

/// The time (µs) under which a median of `problem` cannot have measured its work.
pub fn impossible_below_us(problem: &Problem, ceilings: Ceilings) -> f64 {
    IMPOSSIBLE_SHARE * floor_us(problem, ceilings)
}

#[cfg(test)]
mod tests {
    use super::*;
    use evoattn::{Causal, Dtype, Layout, Shape};

    const H100: Ceilings = Ceilings { matmul_tflops: 800.0, copy_gbps: 3000.0 };

    fn problem(shape: Shape, dtype: Dtype) -> Problem {
        Problem::dense(shape, dtype, Layout::Bhsd)
    }

    #[test]
    fn a_long_row_is_bound_by_its_flops_at_the_matmul_peak() {
        // hd128 16k: 4·16·16384²·128 FLOPs = 2.2 TFLOP, 2749 µs at 800 TFLOP/s.
        let p = problem(Shape::new(1, 16, 16384, 128), Dtype::Bf16);
        assert!((floor_us(&p, H100) - p.flops() / 800e6).abs() < 1e-9);
        assert!((floor_us(&p, H100) - 2748.8).abs() < 0.1);
        // Causal: half the pairs, half the floor (up to the diagonal's own).
        let causal = p.clone().with_causal(Causal::TopLeft);
        assert!((floor_us(&causal, H100) / floor_us(&p, H100) - 0.5).abs() < 1e-3);
    }

    #[test]
    fn impossible_is_a_fifth_below_the_roofline() {
        let p = problem(Shape::new(1, 16, 16384, 128), Dtype::Bf16);
        assert!((impossible_below_us(&p, H100) - 0.8 * floor_us(&p, H100)).abs() < 1e-9);
    }

    #[test]
    fn e4m3_runs_at_twice_the_bf16_peak() {
        let shape = Shape::new(1, 16, 16384, 128);
        let (bf16, e4m3) = (problem(shape, Dtype::Bf16), problem(shape, Dtype::E4m3));
        assert!((floor_us(&e4m3, H100) * 2.0 - floor_us(&bf16, H100)).abs() < 1e-6);
    }

    #[test]
    fn a_decode_row_is_bound_by_its_bytes_at_the_copy_rate() {
        // One query per head over 8192 keys: K and V dominate, 2·8·8·8192·128·2 bytes = 268 MB.
        let p = problem(Shape { sk: 8192, ..Shape::new(8, 8, 1, 128) }, Dtype::Bf16);
        let bytes = compulsory_bytes(&p);
        let kv = 2.0 * 8.0 * 8.0 * 8192.0 * 128.0 * 2.0;
        assert!(bytes > kv && bytes < kv * 1.001, "Q and O are tiny: {bytes}");
        assert!((floor_us(&p, H100) - bytes / 3000e3).abs() < 1e-9);
        // The LSE counts when asked for.
        assert!(compulsory_bytes(&p.clone().with_lse(true)) - bytes == 8.0 * 8.0 * 4.0);
    }
}
