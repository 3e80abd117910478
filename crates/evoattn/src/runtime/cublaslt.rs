//! cuBLASLt for the library paths (#38): one handle per stream, and each GEMM shape of a plan
//! ([`crate::kernels::library::geometry::Gemm`]) prepared once (descriptor, layouts, the
//! heuristic's algorithm) and then run on device addresses. Over cudarc's `cublaslt::result`,
//! not its safe API, whose `Matmul<T>` types A, B and C alike (f32 scores from 16-bit inputs
//! need C's type apart) and rebuilds every descriptor per call. [`Cublas::get`] must have
//! loaded the library first (cudarc's own loader panics where it finds none).

use crate::error::{Error, Result};
use crate::kernels::library::geometry::{Gemm, Operand};
use crate::problem::Dtype;
use crate::runtime::cublas::Cublas;
use cudarc::cublas::sys::cublasOperation_t;
use cudarc::cublaslt::result::{self as lt, CublasError};
use cudarc::cublaslt::sys;
use std::ffi::c_void;

fn failed(call: &'static str, e: CublasError) -> Error {
    Error::driver(call, format!("{:?}", e.0))
}

fn data_type(dtype: Dtype) -> Result<sys::cudaDataType> {
    match dtype {
        Dtype::F16 => Ok(sys::cudaDataType::CUDA_R_16F),
        Dtype::Bf16 => Ok(sys::cudaDataType::CUDA_R_16BF),
        other => Err(Error::Unsupported {
            imp: crate::config::Impl::Cublas.to_string(),
            reason: format!("the library paths take f16 or bf16 inputs, not {other}"),
        }),
    }
}

/// A cuBLASLt handle, for the one stream whose work it enqueues (workspaces are per stream).
pub struct LtHandle(sys::cublasLtHandle_t);

// Safety: a cuBLASLt handle is host state bound to no thread; it moves with the launch that
// owns it (an `Attention` is `Send`), whose `&mut` runs keep two threads from using it at once.
unsafe impl Send for LtHandle {}

impl LtHandle {
    pub fn new() -> Result<Self> {
        Cublas::get()?;
        lt::create_handle().map(LtHandle).map_err(|e| failed("cublasLtCreate", e))
    }
}

impl Drop for LtHandle {
    fn drop(&mut self) {
        // Safety: the handle was created by `new` and is destroyed once, here.
        let _ = unsafe { lt::destroy_handle(self.0) };
    }
}

/// One GEMM shape ready to run: C = op(A)·op(B) (cuBLASLt's D, written over C), fp32
/// accumulation and scale, A and B of the input dtype, C float32 or the input dtype.
pub struct LtGemm {
    gemm: Gemm,
    desc: sys::cublasLtMatmulDesc_t,
    layouts: [sys::cublasLtMatrixLayout_t; 3],
    algo: sys::cublasLtMatmulAlgo_t,
    /// Workspace the algorithm needs (at most the cap it was chosen under).
    pub workspace_bytes: usize,
    elem_bytes: [usize; 3],
}

// Safety: the descriptor, layouts and algorithm are host memory that cuBLASLt only reads
// during a call; they move with the launch that owns them, used by one thread at a time.
unsafe impl Send for LtGemm {}

impl LtGemm {
    /// Prepares `gemm` for inputs of `dtype` and C in float32 (`c_f32`: f32 scores) or in
    /// `dtype`, choosing cuBLASLt's best algorithm for at most `workspace_cap` bytes of workspace.
    pub fn new(handle: &LtHandle, gemm: Gemm, dtype: Dtype, c_f32: bool, workspace_cap: usize) -> Result<Self> {
        let ab = data_type(dtype)?;
        let c = if c_f32 { sys::cudaDataType::CUDA_R_32F } else { ab };
        let desc = lt::create_matmul_desc(sys::cublasComputeType_t::CUBLAS_COMPUTE_32F, sys::cudaDataType::CUDA_R_32F)
            .map_err(|e| failed("cublasLtMatmulDescCreate", e))?;
        let mut prepared = LtGemm {
            gemm,
            desc,
            layouts: [std::ptr::null_mut(); 3],
            algo: sys::cublasLtMatmulAlgo_t { data: [0; 8] },
            workspace_bytes: 0,
            elem_bytes: [dtype.size_bytes(), dtype.size_bytes(), if c_f32 { 4 } else { dtype.size_bytes() }],
        };
        for (attr, op) in [
            (sys::cublasLtMatmulDescAttributes_t::CUBLASLT_MATMUL_DESC_TRANSA, gemm.a.transposed),
            (sys::cublasLtMatmulDescAttributes_t::CUBLASLT_MATMUL_DESC_TRANSB, gemm.b.transposed),
        ] {
            let op = if op { cublasOperation_t::CUBLAS_OP_T } else { cublasOperation_t::CUBLAS_OP_N };
            // Safety: `desc` is live; the attribute takes a cublasOperation_t, passed by address
            // with its size.
            unsafe {
                lt::set_matmul_desc_attribute(desc, attr, &op as *const _ as *const c_void, size_of_val(&op))
                    .map_err(|e| failed("cublasLtMatmulDescSetAttribute", e))?;
            }
        }
        // Stored shapes (before op): A is k x m transposed or m x k; B is n x k or k x n; C m x n.
        let stored = |o: &Operand, rows: usize, cols: usize| if o.transposed { (cols, rows) } else { (rows, cols) };
        let shapes = [
            (gemm.a, stored(&gemm.a, gemm.m, gemm.k), ab),
            (gemm.b, stored(&gemm.b, gemm.k, gemm.n), ab),
            (gemm.c, (gemm.m, gemm.n), c),
        ];
        for (i, (operand, (rows, cols), dtype)) in shapes.into_iter().enumerate() {
            prepared.layouts[i] = layout(dtype, rows, cols, &operand, gemm.batch)?;
        }
        let pref = lt::create_matmul_pref().map_err(|e| failed("cublasLtMatmulPreferenceCreate", e))?;
        let cap = workspace_cap as u64;
        let [a, b, c] = prepared.layouts;
        // Safety: `pref` is live and destroyed below; the attribute takes a u64 by address. The
        // handle, descriptor and layouts are live for the heuristic call.
        let heuristic = unsafe {
            let set = lt::set_matmul_pref_attribute(
                pref,
                sys::cublasLtMatmulPreferenceAttributes_t::CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                &cap as *const u64 as *const c_void,
                size_of::<u64>(),
            );
            let found = set.and_then(|()| lt::get_matmul_algo_heuristic(handle.0, desc, a, b, c, c, pref));
            let _ = lt::destroy_matmul_pref(pref);
            found
        };
        let heuristic = heuristic.map_err(|e| {
            Error::driver("cublasLtMatmulAlgoGetHeuristic", format!("{:?} for {:?}", e.0, prepared.gemm))
        })?;
        prepared.algo = heuristic.algo;
        prepared.workspace_bytes = heuristic.workspaceSize;
        Ok(prepared)
    }

    /// Enqueues the GEMM on `stream` over tensors at device addresses `a`, `b`, `c` (each the
    /// base its operand's offset counts from), with `workspace` of [`Self::workspace_bytes`].
    ///
    /// # Safety
    /// Each address must hold its operand's whole extent (offset, batch strides, leading
    /// dimension and shape, in its dtype) on the device, live until the stream has run the
    /// GEMM; `c` must not overlap `a` or `b`; `workspace` must hold `workspace_bytes` and be
    /// used by no other work on another stream meanwhile; `handle` and `stream` belong to one
    /// another (the stream's own handle).
    pub unsafe fn run(
        &self,
        handle: &LtHandle,
        [a, b, c]: [u64; 3],
        workspace: u64,
        stream: cudarc::driver::sys::CUstream,
    ) -> Result<()> {
        let (alpha, beta) = (1f32, 0f32);
        let at = |base: u64, operand: &Operand, elem: usize| operand.address(base, elem) as *mut c_void;
        let (pa, pb, pc) = (
            at(a, &self.gemm.a, self.elem_bytes[0]),
            at(b, &self.gemm.b, self.elem_bytes[1]),
            at(c, &self.gemm.c, self.elem_bytes[2]),
        );
        let [la, lb, lc] = self.layouts;
        lt::matmul(
            handle.0,
            self.desc,
            &alpha as *const f32 as *const c_void,
            &beta as *const f32 as *const c_void,
            pa,
            la,
            pb,
            lb,
            pc,
            lc,
            pc,
            lc,
            &self.algo,
            workspace as *mut c_void,
            self.workspace_bytes,
            stream as sys::cudaStream_t,
        )
        .map_err(|e| failed("cublasLtMatmul", e))
    }
}

impl Drop for LtGemm {
    fn drop(&mut self) {
        // Safety: the layouts (those created) and the descriptor belong to this value and are
        // destroyed once, here.
        unsafe {
            for layout in self.layouts.into_iter().filter(|l| !l.is_null()) {
                let _ = lt::destroy_matrix_layout(layout);
            }
            let _ = lt::destroy_matmul_desc(self.desc);
        }
    }
}

/// A column-major layout of `rows` x `cols` at `operand.ld`, batched by its stride.
fn layout(
    dtype: sys::cudaDataType,
    rows: usize,
    cols: usize,
    operand: &Operand,
    batch: usize,
) -> Result<sys::cublasLtMatrixLayout_t> {
    let layout = lt::create_matrix_layout(dtype, rows as u64, cols as u64, operand.ld as i64)
        .map_err(|e| failed("cublasLtMatrixLayoutCreate", e))?;
    let count = batch as i32;
    let stride = operand.batch_stride as i64;
    // Safety: `layout` is live; the two attributes take an i32 and an i64, passed by address.
    let set = unsafe {
        lt::set_matrix_layout_attribute(
            layout,
            sys::cublasLtMatrixLayoutAttribute_t::CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT,
            &count as *const i32 as *const c_void,
            size_of::<i32>(),
        )
        .and_then(|()| {
            lt::set_matrix_layout_attribute(
                layout,
                sys::cublasLtMatrixLayoutAttribute_t::CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                &stride as *const i64 as *const c_void,
                size_of::<i64>(),
            )
        })
    };
    if let Err(e) = set {
        // Safety: created above, not yet handed out.
        let _ = unsafe { lt::destroy_matrix_layout(layout) };
        return Err(failed("cublasLtMatrixLayoutSetAttribute", e));
    }
    Ok(layout)
}
