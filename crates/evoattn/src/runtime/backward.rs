//! The backward pass's launch (kernels/bwd/bwd.cu): three kernels of one module on one stream,
//! the row dot products, the main kernel, dQ's conversion, sharing one `BwdParams` and the
//! launching stream's scratch (delta and the float32 dQ accumulator).

use crate::buffers::{validate_buffers, BufferSpan};
use crate::config::{KernelConfig, KernelSpec};
use crate::error::{Error, Result};
use crate::kernels::bwd::{scratch as bwd_scratch, AUX_THREADS, DOT_ROWS, DQ_CHUNK};
use crate::problem::{Problem, TensorName};
use crate::runtime::device::{kernel_ints, kernel_strides, Gpu, LoadedKernel};
use crate::runtime::launch::{launch, MAX_GRID_X, MAX_GRID_YZ};
use crate::runtime::scratch::{ScratchNeed, ScratchStore};
use cudarc::driver::{CudaFunction, CudaStream, CudaView, CudaViewMut, DevicePtr, DevicePtrMut, DeviceRepr};
use std::ffi::c_void;

/// Field for field `BwdParams` of kernels/bwd/bwd.cu (pointers as u64, `int` as i32).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
struct BwdParams {
    q: u64,
    k: u64,
    v: u64,
    o: u64,
    dout: u64,
    lse: u64,
    dq: u64,
    dk: u64,
    dv: u64,
    dq_acc: u64,
    delta: u64,
    /// Batch, head and sequence strides of q, k, v, o, dO, dQ, dK, dV, in that order.
    strides: [[i64; 3]; 8],
    /// B, H, Hkv, Sq, Sk, causal, the causal offset (`device::kernel_ints`).
    ints: [i32; 7],
    scale: f32,
    scale_log2: f32,
}

// Safety: `BwdParams` is `repr(C)` plain integers and floats laid out as `BwdParams` in
// kernels/bwd/bwd.cu (eleven 8-byte pointers, 24 `long long` strides, seven `int`s, two
// `float`s), so the driver may copy its bytes.
unsafe impl DeviceRepr for BwdParams {}

/// The tensors of one backward pass, as device views: the forward's inputs, its O and LSE
/// (`[B, H, Sq]` float32, natural log: the forward's `with_lse` output), dO laid out as O, and
/// the gradients, laid out as Q, K and V.
pub struct BackwardTensors<'a> {
    pub q: CudaView<'a, u16>,
    pub k: CudaView<'a, u16>,
    pub v: CudaView<'a, u16>,
    pub o: CudaView<'a, u16>,
    pub lse: CudaView<'a, f32>,
    pub d_o: CudaView<'a, u16>,
    pub dq: CudaViewMut<'a, u16>,
    pub dk: CudaViewMut<'a, u16>,
    pub dv: CudaViewMut<'a, u16>,
}

/// The tensors a backward launch reads and writes, in [`BackwardBuffers`] order.
const BUFFERS: [TensorName; 9] = [
    TensorName::Q,
    TensorName::K,
    TensorName::V,
    TensorName::O,
    TensorName::DO,
    TensorName::Lse,
    TensorName::DQ,
    TensorName::DK,
    TensorName::DV,
];

/// A backward pass's buffers by device address and length in elements, in [`BUFFERS`] order.
#[derive(Clone, Copy, Debug)]
pub struct BackwardBuffers {
    addrs: [u64; 9],
    lens: [usize; 9],
}

impl BackwardBuffers {
    /// Q, K, V, O, dO (laid out as O), LSE (`[B, H, Sq]` float32 dense), dQ, dK, dV (laid out as
    /// Q, K, V) at these device addresses, each taken to hold exactly its extent under
    /// `problem`'s strides; alignment and overlap are checked at the launch.
    ///
    /// # Safety
    ///
    /// Each address must point into device memory of the context the launch runs in that holds
    /// at least [`Problem::extent`] elements of its tensor under `problem`'s strides and stays
    /// allocated until the launch's work on its stream is done, and the caller orders other work
    /// on these buffers with that stream. The launch must use this same `problem`.
    pub unsafe fn new(problem: &Problem, addrs: [u64; 9]) -> Self {
        BackwardBuffers { addrs, lens: BUFFERS.map(|t| problem.extent(t)) }
    }
}

/// A backward launch prepared for one problem signature: grids, block sizes and parameters
/// but the buffer addresses; like a forward launch it holds no device memory.
pub struct BackwardLaunch {
    main: CudaFunction,
    dot: CudaFunction,
    convert: CudaFunction,
    spec: KernelSpec,
    problem: Problem,
    grid: (u32, u32, u32),
    dot_grid: u32,
    convert_grid: u32,
    block: u32,
    smem: u32,
    params: BwdParams,
    need: ScratchNeed,
}

/// The tensors whose strides `BwdParams` carries, in its order.
const BUFFERS_LAID_OUT: [TensorName; 8] = [
    TensorName::Q,
    TensorName::K,
    TensorName::V,
    TensorName::O,
    TensorName::DO,
    TensorName::DQ,
    TensorName::DK,
    TensorName::DV,
];

impl BackwardLaunch {
    /// Prepares `kernel` (a backward family's) for `problem`, which the caller validated.
    pub fn new(kernel: &LoadedKernel, problem: &Problem) -> Result<Self> {
        let spec = *kernel.spec();
        let unsupported = |reason: String| Error::Unsupported { imp: spec.imp().to_string(), reason };
        let KernelConfig::MmaBwd(config) = spec.config else {
            return Err(unsupported(format!("{} is not a backward kernel", spec.name())));
        };
        let [dot, convert] =
            kernel.backward_functions().ok_or_else(|| unsupported("its module lacks the dot and dQ kernels".into()))?;
        if problem.v_keys_contiguous() {
            return Err(unsupported("the backward pass reads V with its head dim contiguous, not transposed".into()));
        }
        let s = problem.shape;
        let rows = s.b * s.h * s.sq;
        let [gx, gy, gz] = crate::config::lever::Family::grid(&config, &s, 1, 0);
        let dot_blocks = rows.div_ceil(DOT_ROWS as usize);
        let convert_blocks = (rows * (s.d / DQ_CHUNK)).div_ceil(AUX_THREADS as usize);
        if gx > MAX_GRID_X || gy > MAX_GRID_YZ || gz > MAX_GRID_YZ || dot_blocks.max(convert_blocks) > MAX_GRID_X {
            return Err(unsupported(format!(
                "the grids ({gx}, {gy}, {gz}) and {convert_blocks} blocks exceed CUDA's limits"
            )));
        }
        let scale = problem.softmax_scale();
        let params = BwdParams {
            strides: BUFFERS_LAID_OUT.map(|t| kernel_strides(problem, t)),
            ints: kernel_ints(problem)?,
            scale,
            scale_log2: scale * std::f32::consts::LOG2_E,
            ..BwdParams::default()
        };
        Ok(BackwardLaunch {
            main: kernel.function().clone(),
            dot,
            convert,
            spec,
            problem: problem.clone(),
            grid: (gx as u32, gy as u32, gz as u32),
            dot_grid: dot_blocks as u32,
            convert_grid: convert_blocks as u32,
            block: spec.threads(),
            smem: spec.dynamic_smem_bytes() as u32,
            params,
            need: bwd_scratch(&s),
        })
    }

    pub fn spec(&self) -> &KernelSpec {
        &self.spec
    }

    /// Runs the three kernels on `stream` with scratch from its arena. Every buffer is checked
    /// (size, alignment, overlap) before anything is launched.
    pub fn run(
        &mut self,
        gpu: &Gpu,
        scratch: &mut ScratchStore,
        stream: &CudaStream,
        tensors: BackwardTensors<'_>,
    ) -> Result<()> {
        let BackwardTensors { q, k, v, o, lse, d_o, mut dq, mut dk, mut dv } = tensors;
        // The sync guards live until the launches are enqueued (stream ordering with the
        // buffers' other uses).
        let mut addrs = [0u64; 9];
        let mut lens = [0usize; 9];
        let mut guards = Vec::with_capacity(9);
        for (i, view) in [&q, &k, &v, &o, &d_o].into_iter().enumerate() {
            let (ptr, sync) = view.device_ptr(stream);
            (addrs[i], lens[i]) = (ptr, view.len());
            guards.push(sync);
        }
        let (ptr, sync) = lse.device_ptr(stream);
        (addrs[5], lens[5]) = (ptr, lse.len());
        guards.push(sync);
        for (i, view) in [&mut dq, &mut dk, &mut dv].into_iter().enumerate() {
            let len = view.len();
            let (ptr, sync) = view.device_ptr_mut(stream);
            (addrs[6 + i], lens[6 + i]) = (ptr, len);
            guards.push(sync);
        }
        let ran = self.run_buffers(gpu, scratch, stream, BackwardBuffers { addrs, lens });
        drop(guards);
        ran
    }

    /// As [`BackwardLaunch::run`], on buffers given by address ([`BackwardBuffers::new`]'s
    /// contract makes them valid).
    pub(crate) fn run_buffers(
        &mut self,
        gpu: &Gpu,
        scratch: &mut ScratchStore,
        stream: &CudaStream,
        buffers: BackwardBuffers,
    ) -> Result<()> {
        let spans: Vec<BufferSpan> = BUFFERS
            .iter()
            .zip(buffers.addrs.iter().zip(&buffers.lens))
            .map(|(&tensor, (&addr, &len))| BufferSpan {
                tensor,
                addr,
                len,
                elem_bytes: self.problem.elem_bytes(tensor),
            })
            .collect();
        validate_buffers(&self.problem, &spans)?;
        let addr = buffers.addrs;
        let s = self.problem.shape;
        if s.b == 0 || s.h == 0 || (s.sq == 0 && s.sk == 0) {
            return Ok(());
        }
        stream.context().bind_to_thread().map_err(|e| Error::driver("cuCtxSetCurrent", e))?;
        let lease = scratch.lease(gpu, stream, self.need)?;
        let p = &mut self.params;
        [p.q, p.k, p.v, p.o, p.dout, p.lse, p.dq, p.dk, p.dv] = addr;
        // The accumulator first: the kernels move it in 16-byte vectors (the arena's base is
        // aligned; B·H·Sq·D floats keep delta's start at a multiple of 64 bytes).
        p.dq_acc = lease.ptrs.floats;
        p.delta = lease.ptrs.floats + 4 * (s.b * s.h * s.sq * s.d) as u64;
        let mut args = [p as *mut BwdParams as *mut c_void];
        let rows = s.b * s.h * s.sq;
        let launched = (|| {
            if rows > 0 {
                // Safety: the dot kernel of this module takes one `BwdParams` (`args`, live in
                // `self`), has no dynamic shared memory, and reads O and dO rows and writes delta
                // and the dQ accumulator of B·H·Sq rows: the buffers' extents were checked against
                // the validated problem above, and both scratch arrays lie in this stream's arena
                // of `need` words (B·H·Sq·D + B·H·Sq), which launches on one stream use in turn.
                unsafe { launch(&self.dot, (self.dot_grid, 1, 1), AUX_THREADS, 0, stream, &mut args) }?;
            }
            if s.sk > 0 {
                // Safety: the main kernel takes the same `BwdParams`; it was loaded with the
                // dynamic shared memory `smem` needs (`Gpu::load`), reads Q, K, V, dO, LSE
                // (checked extents) and the delta written above on this stream, and writes dK,
                // dV (checked, disjoint from the inputs) and the dQ accumulator (scratch).
                unsafe { launch(&self.main, self.grid, self.block, self.smem, stream, &mut args) }?;
            }
            if rows > 0 {
                // Safety: the conversion kernel takes the same `BwdParams`, reads the accumulator
                // (scratch, complete: same stream, after the main kernel) and writes dQ (checked).
                unsafe { launch(&self.convert, (self.convert_grid, 1, 1), AUX_THREADS, 0, stream, &mut args) }?;
            }
            Ok(())
        })();
        let released = scratch.release(stream, lease);
        launched.and(released)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn params_match_the_kernels_struct() {
        // 11 pointers (88) + 24 i64 strides (192) + 7 i32 (28) + 2 f32 (8) = 316, padded to 320
        // (8-aligned): what `struct BwdParams` in kernels/bwd/bwd.cu occupies.
        assert_eq!(std::mem::size_of::<BwdParams>(), 320);
        assert_eq!(std::mem::offset_of!(BwdParams, ints), 280);
        let src = crate::kernels::main_source(crate::config::Impl::MmaBwd).text;
        assert!(src.contains("    i64 dv_batch, dv_head, dv_seq;\n    int b, h, hkv, sq, sk;\n    int causal;"));
    }
}
