//! The library paths' launch (#38: `cublas`, `hybrid-qk`, `hybrid-pv`): a problem's
//! [`Geometry`] prepared once (the family's module compiled, gated and loaded: the row kernel,
//! and a hybrid's own GEMM; every cuBLASLt GEMM's descriptors and algorithm chosen), then per
//! call and chunk: Q·Kᵀ into S, the row kernel over S, P·V into O, all on the caller's stream,
//! each product by our GEMM or by the library the config's `gemm` names (cuBLASLt or
//! cuTENSOR). S and the library's workspace come from the stream's scratch arena, and each
//! stream gets its own cuBLASLt handle (cuTENSOR's contractions on one handle are thread-safe),
//! so one problem may run on several streams at once (the library's concurrency rule for every
//! path).

use crate::config::KernelSpec;
use crate::config::{LibraryPath, Provider};
use crate::error::{Error, Result};
use crate::kernels::library::geometry::{self, Geometry};
use crate::kernels::library::{OurGemm, Scores, GEMM_THREADS, GEMM_TILE, ROWS_THREADS};
use crate::problem::Problem;
use crate::runtime::cublaslt::{LtGemm, LtHandle};
use crate::runtime::cutensor::{TensorGemm, TensorHandle};
use crate::runtime::device::{DeviceTensors, Gpu, KernelParams, LoadedKernel};
use crate::runtime::launch::{check_buffers, launch, with_buffers, LaunchBuffers};
use crate::runtime::scratch::{ScratchNeed, ScratchStore};
use cudarc::driver::{CudaFunction, CudaStream, DeviceRepr};
use std::ffi::c_void;

/// The workspace a library GEMM may use: cuBLASLt's recommendation for Hopper (cuTENSOR's
/// default preference asks for less).
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

/// `GemmArgs` of kernels/library/gemm.cuh, field for field.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
struct GemmArgs {
    a: u64,
    b: u64,
    c: u64,
    lda: i64,
    ldb: i64,
    ldc: i64,
    a_batch: i64,
    b_batch: i64,
    c_batch: i64,
    m: i32,
    n: i32,
    k: i32,
    batch: i32,
}

// Safety: `GemmArgs` is `repr(C)` plain integers matching `GemmArgs` in
// kernels/library/gemm.cuh (pointers as u64, `long long` as i64, `int` as i32).
unsafe impl DeviceRepr for GemmArgs {}

/// Most blocks in a grid's y and z (the CUDA limit); our GEMM loops z over larger batches.
const GRID_YZ_MAX: usize = 65535;

/// One batched product of a chunk: by cuBLASLt, by cuTENSOR, or by our GEMM (its arguments
/// but the operands' addresses, which are each call's bases plus `offsets` bytes, and its grid).
enum Product {
    Lt(LtGemm),
    Tensor(TensorGemm),
    Ours { args: GemmArgs, offsets: [u64; 3], grid: (u32, u32, u32) },
}

impl Product {
    /// Our GEMM's launch of `gemm`, its operands of `elem_bytes` each (A, B, C), A read
    /// transposed where `a_transposed` (the module's EVOATTN_GEMM_A_T), after checking what
    /// gemm.cuh assumes: 16-byte aligned rows and batches, a grid within CUDA's limits.
    fn ours(gemm: geometry::Gemm, elem_bytes: [usize; 3], a_transposed: bool) -> std::result::Result<Self, String> {
        let (g, [ea, eb, ec]) = (gemm, elem_bytes);
        for (what, elements, elem) in [
            ("A's offset", g.a.offset, ea),
            ("A's row stride", g.a.ld, ea),
            ("A's batch stride", g.a.batch_stride, ea),
            ("B's offset", g.b.offset, eb),
            ("B's row stride", g.b.ld, eb),
            ("B's batch stride", g.b.batch_stride, eb),
            ("C's offset", g.c.offset, ec),
            ("C's row stride", g.c.ld, ec),
            ("C's batch stride", g.c.batch_stride, ec),
        ] {
            if elements * elem % 16 != 0 {
                return Err(format!(
                    "our GEMM reads 16-byte chunks: {what} ({elements} elements) is not a multiple of 16 bytes"
                ));
            }
        }
        // The module's GEMM reads A transposed (K) for Q·Kᵀ, as it is (V) for P·V; B and C never.
        if g.a.transposed != a_transposed || g.b.transposed || g.c.transposed {
            return Err("our GEMM takes the operands as the geometry lays Q, K, V, S and O out".into());
        }
        let (bm, bn) = GEMM_TILE;
        let y = g.n.div_ceil(bm);
        if y > GRID_YZ_MAX {
            return Err(format!("{} rows of C take {y} block rows, past CUDA's {GRID_YZ_MAX}", g.n));
        }
        let int = |x: usize| i32::try_from(x).map_err(|_| format!("a GEMM size ({x}) past 2^31"));
        let args = GemmArgs {
            lda: g.a.ld as i64,
            ldb: g.b.ld as i64,
            ldc: g.c.ld as i64,
            a_batch: g.a.batch_stride as i64,
            b_batch: g.b.batch_stride as i64,
            c_batch: g.c.batch_stride as i64,
            m: int(g.m)?,
            n: int(g.n)?,
            k: int(g.k)?,
            batch: int(g.batch)?,
            ..GemmArgs::default()
        };
        let x = u32::try_from(g.m.div_ceil(bn)).map_err(|_| format!("{} columns of C past a grid's x", g.m))?;
        let grid = (x, y as u32, g.batch.min(GRID_YZ_MAX) as u32);
        let offsets = [g.a.address(0, ea), g.b.address(0, eb), g.c.address(0, ec)];
        Ok(Product::Ours { args, offsets, grid })
    }

    /// Enqueues the product of operands at `[a, b, c]`.
    ///
    /// # Safety
    /// As [`LtGemm::run`]: the operands hold the geometry's extents, `workspace` the library's
    /// bytes, `handle` is the one the product was prepared for (cuBLASLt's: `stream`'s), `ours`
    /// the module's GEMM; all live until the stream has run the work.
    unsafe fn run(
        &mut self,
        handle: ProviderHandle,
        ours: Option<&CudaFunction>,
        operands: [u64; 3],
        workspace: u64,
        stream: &CudaStream,
    ) -> Result<()> {
        match (self, handle) {
            // Safety: the caller's contract.
            (Product::Lt(gemm), ProviderHandle::Lt(h)) => unsafe {
                gemm.run(h, operands, workspace, stream.cu_stream())
            },
            // Safety: the caller's contract.
            (Product::Tensor(gemm), ProviderHandle::Tensor(h)) => unsafe {
                gemm.run(h, operands, workspace, stream.cu_stream())
            },
            (Product::Lt(_) | Product::Tensor(_), _) => {
                Err(Error::driver("library product", "prepared for one library, run with the other's handle"))
            }
            (Product::Ours { args, offsets, grid }, _) => {
                let function = ours.expect("a product of ours comes with the module's GEMM");
                let [a, b, c] = operands;
                (args.a, args.b, args.c) = (a + offsets[0], b + offsets[1], c + offsets[2]);
                let mut params: [*mut c_void; 1] = [args as *mut GemmArgs as *mut c_void];
                // Safety: gemm.cuh's kernel takes one GemmArgs, whose mirror `params` points at;
                // it reads A and B and writes C within the extents the caller vouches for.
                unsafe { launch(function, *grid, GEMM_THREADS, 0, stream, &mut params) }
            }
        }
    }

    fn workspace_bytes(&self) -> usize {
        match self {
            Product::Lt(gemm) => gemm.workspace_bytes,
            Product::Tensor(gemm) => gemm.workspace_bytes,
            Product::Ours { .. } => 0,
        }
    }
}

/// The library handle a product runs with: the stream's cuBLASLt handle, or the launch's
/// cuTENSOR handle.
#[derive(Clone, Copy)]
enum ProviderHandle<'a> {
    Lt(&'a LtHandle),
    Tensor(&'a TensorHandle),
}

/// The library handles of a launch: cuBLASLt's, one per stream by the stream's driver handle;
/// or cuTENSOR's, one for all streams.
enum Providers {
    Lt(Vec<(usize, LtHandle)>),
    Tensor(TensorHandle),
}

impl Providers {
    /// The handle for work on the stream `key` (cuBLASLt's made on first use).
    fn for_stream(&mut self, key: usize) -> Result<ProviderHandle<'_>> {
        match self {
            Providers::Lt(handles) => {
                let i = match handles.iter().position(|(k, _)| *k == key) {
                    Some(i) => i,
                    None => {
                        handles.push((key, LtHandle::new()?));
                        handles.len() - 1
                    }
                };
                Ok(ProviderHandle::Lt(&handles[i].1))
            }
            Providers::Tensor(handle) => Ok(ProviderHandle::Tensor(handle)),
        }
    }
}

/// The kernels of a library module a chunk launches: the row kernel, and a hybrid's GEMM.
#[derive(Clone, Copy)]
struct Kernels<'a> {
    rows: &'a CudaFunction,
    ours: Option<&'a CudaFunction>,
}

/// One chunk's prepared products and row-kernel launch.
struct PreparedChunk {
    qk: Vec<Product>,
    pv: Vec<Product>,
    rows: u32,
    args: RowsChunk,
}

impl PreparedChunk {
    /// Enqueues Q·Kᵀ, the row kernel and P·V of this chunk on `stream`.
    ///
    /// # Safety
    /// `tensors` (Q, K, V, O) hold the problem's extents and `params` their addresses (and
    /// LSE's); `scratch` (S, workspace) holds the chunk's S and the GEMMs' workspace; `handle`
    /// is the launch's for `stream`; all live until the stream has run the work.
    unsafe fn run(
        &mut self,
        handle: ProviderHandle,
        Kernels { rows, ours }: Kernels,
        params: &mut KernelParams,
        stream: &CudaStream,
        [q, k, v, o]: [u64; 4],
        [s, workspace]: [u64; 2],
    ) -> Result<()> {
        self.args.s = s;
        for gemm in &mut self.qk {
            // Safety: K, Q and S as the contract above says.
            unsafe { gemm.run(handle, ours, [k, q, s], workspace, stream)? };
        }
        let mut args: [*mut c_void; 2] =
            [params as *mut KernelParams as *mut c_void, &mut self.args as *mut RowsChunk as *mut c_void];
        // Safety: the row kernel takes (AttnParams, RowsChunk), whose mirrors `args` points at;
        // it reads and writes the chunk's rows of S and its units' LSE rows.
        unsafe { launch(rows, (self.rows, 1, 1), ROWS_THREADS, 0, stream, &mut args)? };
        for gemm in &mut self.pv {
            // Safety: V, P (over S) and O as the contract above says.
            unsafe { gemm.run(handle, ours, [v, s, o], workspace, stream)? };
        }
        Ok(())
    }
}

/// A problem's library-path launch, prepared.
pub struct LibraryLaunch {
    spec: KernelSpec,
    problem: Problem,
    geometry: Geometry,
    rows: CudaFunction,
    /// A hybrid's own GEMM.
    ours: Option<CudaFunction>,
    params: KernelParams,
    chunks: Vec<PreparedChunk>,
    need: ScratchNeed,
    /// The workspace's offset in the scratch floats' bytes.
    workspace_offset: usize,
    /// The library's handles. Declared after `chunks`: their plans go before the handle.
    providers: Providers,
}

impl LibraryLaunch {
    /// Prepares `problem` (validated, 16-bit) for the loaded module `kernel` of a library
    /// family (its config says what S holds and which product is ours), S taking at most
    /// `budget_bytes` (see [`scores_budget`]).
    pub fn new(gpu: &Gpu, kernel: &LoadedKernel, problem: &Problem, budget_bytes: usize) -> Result<Self> {
        let unsupported = |reason: String| Error::Unsupported { imp: kernel.spec().imp().to_string(), reason };
        let Some(LibraryPath { scores, ours, gemm: provider }) = kernel.spec().config.library() else {
            return Err(unsupported(format!("{} is no library path's module", kernel.spec().name())));
        };
        let our_gemm = kernel.gemm_function().cloned();
        if (ours == OurGemm::Neither) != our_gemm.is_none() {
            return Err(unsupported(format!("{}'s module and its family disagree on our GEMM", kernel.spec().name())));
        }
        if kernel.spec().dtype != problem.dtype || problem.dtype.is_fp8() {
            return Err(unsupported(format!(
                "{} takes {} inputs, the problem's are {}",
                kernel.spec().name(),
                kernel.spec().dtype,
                problem.dtype
            )));
        }
        let geometry = geometry::plan(problem, scores.bytes(), budget_bytes).map_err(unsupported)?;
        // cuBLASLt's heuristic reads the current context's device.
        gpu.context().bind_to_thread().map_err(|e| Error::driver("cuCtxSetCurrent", e))?;
        let mut providers = match provider {
            Provider::CublasLt => Providers::Lt(vec![(gpu.stream().cu_stream() as usize, LtHandle::new()?)]),
            Provider::Cutensor => Providers::Tensor(TensorHandle::new()?),
        };
        let handle = providers.for_stream(gpu.stream().cu_stream() as usize)?;
        let int = |what: &str, x: usize| i32::try_from(x).map_err(|_| unsupported(format!("{what} ({x}) past 2^31")));
        let units = geometry.units;
        let s = problem.shape;
        let mut chunks = Vec::with_capacity(geometry.chunks.len());
        for chunk in &geometry.chunks {
            // Each product by our GEMM or the library; C in f32 only for f32 scores; Q·Kᵀ reads
            // K transposed.
            let prepare = |gemms: &[geometry::Gemm], ours: bool, c_f32: bool, qk: bool| {
                gemms
                    .iter()
                    .map(|g| {
                        if ours {
                            let c_bytes = if c_f32 { 4 } else { 2 };
                            Product::ours(*g, [2, 2, c_bytes], qk).map_err(unsupported)
                        } else {
                            match handle {
                                ProviderHandle::Lt(h) => {
                                    LtGemm::new(h, *g, problem.dtype, c_f32, WORKSPACE_BYTES).map(Product::Lt)
                                }
                                ProviderHandle::Tensor(h) => {
                                    TensorGemm::new(h, *g, problem.dtype, c_f32, WORKSPACE_BYTES).map(Product::Tensor)
                                }
                            }
                        }
                    })
                    .collect::<Result<Vec<_>>>()
            };
            let rows = chunk.units * units.rows;
            chunks.push(PreparedChunk {
                qk: prepare(&chunk.qk, ours == OurGemm::Qk, scores == Scores::F32, true)?,
                pv: prepare(&chunk.pv, ours == OurGemm::Pv, false, false)?,
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
        let workspace = chunks.iter().flat_map(|c| c.qk.iter().chain(&c.pv)).map(Product::workspace_bytes).max();
        let workspace_offset = geometry.scratch_bytes.next_multiple_of(SCRATCH_ALIGN);
        let bytes = workspace_offset + workspace.unwrap_or(0);
        Ok(LibraryLaunch {
            spec: *kernel.spec(),
            problem: problem.clone(),
            geometry,
            rows: kernel.function().clone(),
            ours: our_gemm,
            params: KernelParams::new(problem, [0; 5], gpu.l2_bytes())?,
            chunks,
            need: ScratchNeed { counters: 0, floats: bytes.div_ceil(4) },
            workspace_offset,
            providers,
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
        let handle = self.providers.for_stream(stream.cu_stream() as usize)?;
        let lease = scratch.lease(gpu, stream, self.need)?;
        let (s_ptr, workspace) = (lease.ptrs.floats, lease.ptrs.floats + self.workspace_offset as u64);
        let [q, k, v, o, lse, _] = buffers.addrs;
        (self.params.q, self.params.k, self.params.v, self.params.o, self.params.lse) = (q, k, v, o, lse);
        let (kernels, params) = (Kernels { rows: &self.rows, ours: self.ours.as_ref() }, &mut self.params);
        let result = self.chunks.iter_mut().try_for_each(|chunk| {
            // Safety: the caller's contract and the checks above (every buffer holds the
            // problem's extent; the lease covers S and the workspace; the handle is the stream's).
            unsafe { chunk.run(handle, kernels, params, stream, [q, k, v, o], [s_ptr, workspace]) }
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

    /// The field declarations of `struct NAME { ... };` in a CUDA source, comments left out.
    fn struct_fields<'a>(source: &'a str, name: &str) -> Vec<&'a str> {
        let body = source.split(&format!("struct {name} {{")).nth(1).expect("the struct").split("};").next().unwrap();
        body.lines()
            .filter_map(|l| l.trim().split(';').next().filter(|f| !f.is_empty() && !f.starts_with("//")))
            .collect()
    }

    #[test]
    fn rows_chunk_layout_matches_the_kernels_struct() {
        // A pointer and an i64 (16 bytes), then four ints (16): what `struct RowsChunk` in
        // kernels/library/rows.cu occupies, its fields in this order.
        assert_eq!(std::mem::size_of::<RowsChunk>(), 32);
        assert_eq!(std::mem::offset_of!(RowsChunk, first_unit), 16);
        assert_eq!(std::mem::offset_of!(RowsChunk, bk_units), 28);
        let rows = crate::kernels::main_source(crate::config::Impl::Cublas).text;
        assert_eq!(
            struct_fields(rows, "RowsChunk"),
            ["void* s", "i64 ld", "int first_unit, unit_rows, unit_heads", "int bk_units"]
        );
        // The kernel takes `AttnParams` (mirrored by `KernelParams`), then the chunk.
        assert!(rows.contains("(const AttnParams p, const RowsChunk c)"));
    }

    #[test]
    fn gemm_args_layout_matches_the_kernels_struct() {
        // Three pointers, six i64 (72 bytes), then four ints (16): `struct GemmArgs` of
        // kernels/library/gemm.cuh, its fields in this order.
        assert_eq!(std::mem::size_of::<GemmArgs>(), 88);
        assert_eq!(std::mem::offset_of!(GemmArgs, lda), 24);
        assert_eq!(std::mem::offset_of!(GemmArgs, m), 72);
        assert_eq!(std::mem::offset_of!(GemmArgs, batch), 84);
        let gemm = crate::kernels::HEADERS.iter().find(|h| h.name == "gemm.cuh").expect("gemm.cuh embedded").text;
        assert_eq!(
            struct_fields(gemm, "GemmArgs"),
            [
                "const elem_t* a",
                "const elem_t* b",
                "void* c",
                "i64 lda, ldb, ldc",
                "i64 a_batch, b_batch, c_batch",
                "int m, n, k, batch"
            ]
        );
        assert!(gemm.contains("EVOATTN_GEMM_NAME(const GemmArgs g)"));
    }

    #[test]
    fn our_gemm_refuses_what_gemm_cuh_does_not_read() {
        use crate::kernels::library::geometry::{Gemm, Operand};
        let op = |offset, ld, transposed| Operand { offset, ld, batch_stride: 0, transposed };
        // Q·Kᵀ of 300 keys, 2 x 1024 query rows, hd64: K transposed, S in f32.
        let qk =
            Gemm { m: 300, n: 2048, k: 64, batch: 1, a: op(0, 64, true), b: op(0, 64, false), c: op(0, 300, false) };
        let Ok(Product::Ours { grid, args, .. }) = Product::ours(qk, [2, 2, 4], true) else { panic!("refused") };
        assert_eq!(grid, (5, 16, 1));
        assert_eq!((args.m, args.n, args.k, args.ldc), (300, 2048, 64, 300));
        // The other side's reading of A, a row that is not 16 bytes, and a grid past 65535 rows.
        assert!(Product::ours(qk, [2, 2, 4], false).is_err());
        let odd = Gemm { c: op(0, 301, false), ..qk };
        let refusal = |g| Product::ours(g, [2, 2, 4], true).err().unwrap_or_default();
        assert!(refusal(odd).contains("C's row stride"), "{}", refusal(odd));
        let tall = Gemm { n: 65536 * 128, ..qk };
        assert!(refusal(tall).contains("65535"), "{}", refusal(tall));
    }
}
