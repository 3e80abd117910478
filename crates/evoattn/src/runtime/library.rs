//! The `cublas` path's launch (#38): a problem's [`Geometry`] prepared once (the row kernel
//! compiled, gated and loaded; every GEMM's descriptors and algorithm chosen), then per call
//! and chunk: Q·Kᵀ into S, the row kernel over S, P·V into O, all on the caller's stream. S and
//! cuBLASLt's workspace come from the stream's scratch arena, and each stream gets its own
//! cuBLASLt handle, so one problem may run on several streams at once (the library's
//! concurrency rule for every path).

use crate::config::{Impl, KernelConfig, KernelSpec};
use crate::error::{Error, Result};
use crate::kernels::library::geometry::{self, Geometry};
use crate::kernels::library::{Scores, ROWS_THREADS};
use crate::problem::Problem;
use crate::runtime::cublaslt::{LtGemm, LtHandle};
use crate::runtime::device::{DeviceTensors, Gpu, KernelParams, LoadedKernel};
use crate::runtime::launch::{check_buffers, launch, with_buffers, LaunchBuffers};
use crate::runtime::scratch::{ScratchNeed, ScratchStore};
use cudarc::driver::{CudaFunction, CudaStream, DeviceRepr};
use std::ffi::c_void;

/// cuBLASLt's workspace a GEMM may use: its recommendation for Hopper.
pub const WORKSPACE_BYTES: usize = 32 << 20;
/// S's start and the workspace's in the scratch: cuBLASLt wants 256-byte aligned pointers for
/// its fastest kernels.
const SCRATCH_ALIGN: usize = 256;

/// `RowsChunk` of kernels/library/rows.cu, field for field.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
struct RowsChunk {
    s: u64,
    ld: i64,
    first_unit: i32,
    unit_rows: i32,
    unit_heads: i32,
    bk_units: i32,
}

// Safety: `RowsChunk` is `repr(C)` plain integers matching `RowsChunk` in
// kernels/library/rows.cu (the pointer as u64, `long long` as i64, `int` as i32).
unsafe impl DeviceRepr for RowsChunk {}

/// One chunk's prepared GEMMs and row-kernel launch.
struct PreparedChunk {
    qk: Vec<LtGemm>,
    pv: Vec<LtGemm>,
    rows: u32,
    args: RowsChunk,
}

impl PreparedChunk {
    /// Enqueues Q·Kᵀ, the row kernel and P·V of this chunk on `stream`.
    ///
    /// # Safety
    /// `tensors` (Q, K, V, O) hold the problem's extents and `params` their addresses (and
    /// LSE's); `scratch` (S, workspace) holds the chunk's S and the GEMMs' workspace; `handle`
    /// is `stream`'s; all live until the stream has run the work.
    unsafe fn run(
        &mut self,
        handle: &LtHandle,
        rows: &CudaFunction,
        params: &mut KernelParams,
        stream: &CudaStream,
        [q, k, v, o]: [u64; 4],
        [s, workspace]: [u64; 2],
    ) -> Result<()> {
        self.args.s = s;
        for gemm in &self.qk {
            // Safety: K, Q and S as the contract above says.
            unsafe { gemm.run(handle, [k, q, s], workspace, stream.cu_stream())? };
        }
        let mut args: [*mut c_void; 2] =
            [params as *mut KernelParams as *mut c_void, &mut self.args as *mut RowsChunk as *mut c_void];
        // Safety: the row kernel takes (AttnParams, RowsChunk), whose mirrors `args` points at;
        // it reads and writes the chunk's rows of S and its units' LSE rows.
        unsafe { launch(rows, (self.rows, 1, 1), ROWS_THREADS, 0, stream, &mut args)? };
        for gemm in &self.pv {
            // Safety: V, P (over S) and O as the contract above says.
            unsafe { gemm.run(handle, [v, s, o], workspace, stream.cu_stream())? };
        }
        Ok(())
    }
}

/// A problem's `cublas` launch, prepared.
pub struct LibraryLaunch {
    spec: KernelSpec,
    problem: Problem,
    geometry: Geometry,
    rows: CudaFunction,
    params: KernelParams,
    chunks: Vec<PreparedChunk>,
    need: ScratchNeed,
    /// The workspace's offset in the scratch floats' bytes.
    workspace_offset: usize,
    /// Each stream's cuBLASLt handle, by the stream's driver handle.
    handles: Vec<(usize, LtHandle)>,
}

impl LibraryLaunch {
    /// Prepares `problem` (validated, 16-bit) for the loaded `cublas` row kernel `kernel` (its
    /// config says what S holds), S taking at most `budget_bytes` (see [`scores_budget`]).
    pub fn new(gpu: &Gpu, kernel: &LoadedKernel, problem: &Problem, budget_bytes: usize) -> Result<Self> {
        let unsupported = |reason: String| Error::Unsupported { imp: Impl::Cublas.to_string(), reason };
        let KernelConfig::Cublas(config) = kernel.spec().config else {
            return Err(unsupported(format!("{} is not the cublas path's row kernel", kernel.spec().name())));
        };
        if kernel.spec().dtype != problem.dtype || problem.dtype.is_fp8() {
            return Err(unsupported(format!(
                "{} takes {} inputs, the problem's are {}",
                kernel.spec().name(),
                kernel.spec().dtype,
                problem.dtype
            )));
        }
        let scores = config.scores;
        let geometry = geometry::plan(problem, scores.bytes(), budget_bytes).map_err(unsupported)?;
        // cuBLASLt's heuristic reads the current context's device.
        gpu.context().bind_to_thread().map_err(|e| Error::driver("cuCtxSetCurrent", e))?;
        let handle = LtHandle::new()?;
        let int = |what: &str, x: usize| i32::try_from(x).map_err(|_| unsupported(format!("{what} ({x}) past 2^31")));
        let units = geometry.units;
        let s = problem.shape;
        let mut chunks = Vec::with_capacity(geometry.chunks.len());
        for chunk in &geometry.chunks {
            let prepare = |gemms: &[geometry::Gemm], c_f32: bool| {
                gemms
                    .iter()
                    .map(|g| LtGemm::new(&handle, *g, problem.dtype, c_f32, WORKSPACE_BYTES))
                    .collect::<Result<Vec<_>>>()
            };
            let rows = chunk.units * units.rows;
            chunks.push(PreparedChunk {
                qk: prepare(&chunk.qk, scores == Scores::F32)?,
                pv: prepare(&chunk.pv, false)?,
                rows: u32::try_from(int("rows of a chunk", rows)?).expect("non-negative"),
                args: RowsChunk {
                    s: 0,
                    ld: geometry.scores.ld as i64,
                    first_unit: int("units", chunk.first_unit)?,
                    unit_rows: int("rows of a unit", units.rows)?,
                    unit_heads: int("heads of a unit", units.heads)?,
                    bk_units: int("B x Hkv", s.b * s.hkv)?,
                },
            });
        }
        let workspace = chunks.iter().flat_map(|c| c.qk.iter().chain(&c.pv)).map(|g| g.workspace_bytes).max();
        let workspace_offset = geometry.scratch_bytes.next_multiple_of(SCRATCH_ALIGN);
        let bytes = workspace_offset + workspace.unwrap_or(0);
        Ok(LibraryLaunch {
            spec: *kernel.spec(),
            problem: problem.clone(),
            geometry,
            rows: kernel.function().clone(),
            params: KernelParams::new(problem, [0; 5], gpu.l2_bytes())?,
            chunks,
            need: ScratchNeed { counters: 0, floats: bytes.div_ceil(4) },
            workspace_offset,
            handles: vec![(gpu.stream().cu_stream() as usize, handle)],
        })
    }

    pub fn spec(&self) -> &KernelSpec {
        &self.spec
    }

    pub fn geometry(&self) -> &Geometry {
        &self.geometry
    }

    /// Runs the prepared problem on `stream` over `tensors`, after checking their sizes,
    /// alignment and overlap as every launch does; S and the workspace come from `stream`'s
    /// arena in `scratch`.
    pub fn run(
        &mut self,
        gpu: &Gpu,
        scratch: &mut ScratchStore,
        stream: &CudaStream,
        tensors: DeviceTensors<'_>,
    ) -> Result<()> {
        with_buffers(tensors, stream, |buffers, has_lse| {
            // Safety: the views are live device allocations of their lengths, ordered on
            // `stream` by their guards while `with_buffers` holds them.
            unsafe { self.run_buffers(gpu, scratch, stream, buffers, has_lse) }
        })
    }

    /// As [`LibraryLaunch::run`], on buffers given by address.
    ///
    /// # Safety
    /// The addresses are device memory of the lengths given (as an
    /// [`ExternalTensors`](crate::runtime::device::ExternalTensors)' constructor requires),
    /// live until the stream has run the launch.
    pub(crate) unsafe fn run_buffers(
        &mut self,
        gpu: &Gpu,
        scratch: &mut ScratchStore,
        stream: &CudaStream,
        buffers: LaunchBuffers,
        has_lse: bool,
    ) -> Result<()> {
        let problem = &self.problem;
        check_buffers(problem, self.spec.imp(), &buffers, has_lse)?;
        if problem.is_empty() {
            return Ok(());
        }
        stream.context().bind_to_thread().map_err(|e| Error::driver("cuCtxSetCurrent", e))?;
        let key = stream.cu_stream() as usize;
        let i = match self.handles.iter().position(|(k, _)| *k == key) {
            Some(i) => i,
            None => {
                self.handles.push((key, LtHandle::new()?));
                self.handles.len() - 1
            }
        };
        let handle = &self.handles[i].1;
        let lease = scratch.lease(gpu, stream, self.need)?;
        let (s_ptr, workspace) = (lease.ptrs.floats, lease.ptrs.floats + self.workspace_offset as u64);
        let [q, k, v, o, lse, _] = buffers.addrs;
        (self.params.q, self.params.k, self.params.v, self.params.o, self.params.lse) = (q, k, v, o, lse);
        let (rows, params) = (&self.rows, &mut self.params);
        let result = self.chunks.iter_mut().try_for_each(|chunk| {
            // Safety: the caller's contract and the checks above (every buffer holds the
            // problem's extent; the lease covers S and the workspace; the handle is the stream's).
            unsafe { chunk.run(handle, rows, params, stream, [q, k, v, o], [s_ptr, workspace]) }
        });
        scratch.release(stream, lease)?;
        result
    }
}

/// The bytes of S a plan may take on `gpu`: three quarters of the free device memory, less
/// cuBLASLt's workspace, leaving the caller room for its own allocations.
pub fn scores_budget(gpu: &Gpu) -> Result<usize> {
    gpu.context().bind_to_thread().map_err(|e| Error::driver("cuCtxSetCurrent", e))?;
    let (free, _total) = cudarc::driver::result::mem_get_info().map_err(|e| Error::driver("cuMemGetInfo", e))?;
    Ok((free / 4 * 3).saturating_sub(WORKSPACE_BYTES))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_chunk_layout_matches_the_kernels_struct() {
        // A pointer and an i64 (16 bytes), then four ints (16): what `struct RowsChunk` in
        // kernels/library/rows.cu occupies, its fields in this order.
        assert_eq!(std::mem::size_of::<RowsChunk>(), 32);
        assert_eq!(std::mem::offset_of!(RowsChunk, first_unit), 16);
        assert_eq!(std::mem::offset_of!(RowsChunk, bk_units), 28);
        let rows = crate::kernels::main_source(crate::config::Impl::Cublas).text;
        let fields: Vec<&str> = rows
            .split("struct RowsChunk {")
            .nth(1)
            .unwrap()
            .split("};")
            .next()
            .unwrap()
            .lines()
            .filter_map(|l| l.trim().split(';').next().filter(|f| !f.is_empty() && !f.starts_with("//")))
            .collect();
        assert_eq!(fields, ["void* s", "i64 ld", "int first_unit, unit_rows, unit_heads", "int bk_units"]);
        // The kernel takes `AttnParams` (mirrored by `KernelParams`), then the chunk.
        assert!(rows.contains("(const AttnParams p, const RowsChunk c)"));
    }
}
