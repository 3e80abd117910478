//! Checks on device buffers that only addresses can answer: size, alignment, overlap. Pure
//! logic over (address, length) spans, so it is tested without a GPU.

use crate::error::ProblemError;
use crate::problem::{Problem, TensorName};

/// Alignment the kernels' 16-byte vector accesses need.
pub const BUFFER_ALIGN: u64 = 16;

/// One tensor's device buffer as an address range.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BufferSpan {
    pub tensor: TensorName,
    pub addr: u64,
    /// Elements in the buffer.
    pub len: usize,
    pub elem_bytes: usize,
}

impl BufferSpan {
    /// One past the last byte; `None` when that is past the end of the address space.
    fn end(&self) -> Option<u64> {
        let bytes = u64::try_from(self.len).ok()?.checked_mul(u64::try_from(self.elem_bytes).ok()?)?;
        self.addr.checked_add(bytes)
    }

    /// Both spans end inside the address space (`validate_buffers` checks that first).
    fn overlaps(&self, other: &BufferSpan) -> bool {
        let (Some(end), Some(other_end)) = (self.end(), other.end()) else { return true };
        self.len > 0 && other.len > 0 && self.addr < other_end && other.addr < end
    }
}

/// Every buffer holds its tensor's extent and lies inside the address space, every non-empty
/// one is 16-byte aligned, and no output (O, LSE; the backward's dQ, dK, dV) overlaps an input
/// or another output.
pub fn validate_buffers(problem: &Problem, spans: &[BufferSpan]) -> Result<(), ProblemError> {
    for span in spans {
        let need = problem.extent(span.tensor);
        if span.len < need {
            return Err(ProblemError::BufferTooSmall { tensor: span.tensor, need, have: span.len });
        }
        if need > 0 && span.addr % BUFFER_ALIGN != 0 {
            return Err(ProblemError::Misaligned { tensor: span.tensor, addr: span.addr });
        }
        if span.end().is_none() {
            return Err(ProblemError::PastAddressSpace { tensor: span.tensor, addr: span.addr, len: span.len });
        }
    }
    let is_output =
        |t: TensorName| matches!(t, TensorName::O | TensorName::Lse | TensorName::DQ | TensorName::DK | TensorName::DV);
    for (i, out) in spans.iter().enumerate().filter(|(_, s)| is_output(s.tensor)) {
        for (j, other) in spans.iter().enumerate() {
            if i != j && out.overlaps(other) && (!is_output(other.tensor) || j < i) {
                return Err(ProblemError::Overlap { out: out.tensor, input: other.tensor });
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::problem::{Dtype, Layout, Shape};

    fn spans(problem: &Problem, o_addr: u64) -> Vec<BufferSpan> {
        let mk = |tensor, addr| BufferSpan { tensor, addr, len: problem.extent(tensor), elem_bytes: 2 };
        vec![
            mk(TensorName::Q, 0x1000),
            mk(TensorName::K, 0x10000),
            mk(TensorName::V, 0x20000),
            mk(TensorName::O, o_addr),
        ]
    }

    #[test]
    fn accepts_disjoint_aligned_buffers() {
        // q: 1*2*16*8 = 256 elements = 512 bytes at 0x1000..0x1200
        let p = Problem::dense(Shape::new(1, 2, 16, 8), Dtype::F16, Layout::Bhsd);
        assert_eq!(validate_buffers(&p, &spans(&p, 0x30000)), Ok(()));
        // O may start exactly where Q ends
        assert_eq!(validate_buffers(&p, &spans(&p, 0x1200)), Ok(()));
    }

    #[test]
    fn rejects_overlap_misalignment_and_short_buffers() {
        let p = Problem::dense(Shape::new(1, 2, 16, 8), Dtype::F16, Layout::Bhsd);
        let err = validate_buffers(&p, &spans(&p, 0x11f0)).unwrap_err();
        assert_eq!(err, ProblemError::Overlap { out: TensorName::O, input: TensorName::Q });
        let err = validate_buffers(&p, &spans(&p, 0x30008)).unwrap_err();
        assert_eq!(err, ProblemError::Misaligned { tensor: TensorName::O, addr: 0x30008 });
        let mut s = spans(&p, 0x30000);
        s[1].len = 255;
        let err = validate_buffers(&p, &s).unwrap_err();
        assert_eq!(err, ProblemError::BufferTooSmall { tensor: TensorName::K, need: 256, have: 255 });
    }

    #[test]
    fn a_buffer_that_would_wrap_the_address_space_is_refused() {
        let p = Problem::dense(Shape::new(1, 2, 16, 8), Dtype::F16, Layout::Bhsd);
        let mut s = spans(&p, 0x30000);
        // 256 two-byte elements from 16 bytes below the top of the address space.
        s[0].addr = u64::MAX - 15;
        let err = validate_buffers(&p, &s).unwrap_err();
        assert_eq!(err, ProblemError::PastAddressSpace { tensor: TensorName::Q, addr: u64::MAX - 15, len: 256 });
        s[0].addr = 0x1000;
        s[3].len = usize::MAX;
        assert!(matches!(validate_buffers(&p, &s), Err(ProblemError::PastAddressSpace { tensor: TensorName::O, .. })));
    }

    #[test]
    fn lse_must_not_overlap_o() {
        let p = Problem::dense(Shape::new(1, 2, 16, 8), Dtype::F16, Layout::Bhsd).with_lse(true);
        let mut s = spans(&p, 0x30000);
        s.push(BufferSpan { tensor: TensorName::Lse, addr: 0x30100, len: 32, elem_bytes: 4 });
        let err = validate_buffers(&p, &s).unwrap_err();
        assert_eq!(err, ProblemError::Overlap { out: TensorName::Lse, input: TensorName::O });
    }
}
