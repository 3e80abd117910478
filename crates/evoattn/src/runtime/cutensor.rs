//! cuTENSOR for the library paths' `gemm=cutensor` lever (#38), the founding documents'
//! CUTENSOR candidate: found at run time like NVRTC and cuBLAS ([`culib`]), called through a
//! table of its entry points resolved from the library found (cudarc's cuTENSOR loader tries
//! plain names that miss the wheels' `libcutensor.so.2`), and each GEMM shape of a plan
//! ([`Gemm`]) prepared once as a contraction plan, then run on device addresses. cuTENSOR 2.8
//! runs these GEMM-shaped contractions with cuBLASLt's own kernels (docs/decisions/cublas.md#cutensor).

use super::culib::{self, CuLib, Vars};
use crate::buffers::BUFFER_ALIGN;
use crate::error::{Error, Result};
use crate::kernels::library::geometry::{Gemm, Operand};
use crate::problem::Dtype;
use libloading::os::unix::Library;
use std::ffi::{c_char, c_void, CStr};
use std::sync::OnceLock;

/// Environment variable naming the directory that holds libcutensor, or the file.
pub const CUTENSOR_ENV: &str = "EVOATTN_CUTENSOR";

/// cuTENSOR for the finder: not part of the toolkit; its wheels put it in `cutensor/lib`.
pub(crate) const CUTENSOR: CuLib = CuLib {
    name: "cuTENSOR",
    cudarc_name: "cutensor",
    file_prefix: "libcutensor.so",
    env_var: CUTENSOR_ENV,
    env_value: "the directory holding libcutensor.so.2",
    env_siblings: &[],
    wheel_lib_dirs: &["cutensor/lib"],
    probe_symbol: "cutensorGetVersion",
    min_major: 2,
    install: "cuTENSOR 2 with `pip install cutensor-cu13` (CUDA 13; `cutensor-cu12` for CUDA 12)",
};

// The C API's opaque handles and enums (cutensor/types.h); enums are C `int`s.
type Status = i32;
type Handle = *mut c_void;
type TensorDesc = *mut c_void;
type OperationDesc = *mut c_void;
type PlanPreference = *mut c_void;
type Plan = *mut c_void;
type ComputeDesc = *mut c_void;

const STATUS_SUCCESS: Status = 0;
/// `cudaDataType_t`, which cuTENSOR's data types are.
const CUDA_R_16F: i32 = 2;
const CUDA_R_16BF: i32 = 14;
const OP_IDENTITY: i32 = 1;
const ALGO_DEFAULT: i32 = -1;
const JIT_MODE_NONE: i32 = 0;
const WORKSPACE_DEFAULT: i32 = 2;

/// The entry points used, resolved once from the library found.
struct Api {
    create: unsafe extern "C" fn(*mut Handle) -> Status,
    destroy: unsafe extern "C" fn(Handle) -> Status,
    create_tensor: unsafe extern "C" fn(Handle, *mut TensorDesc, u32, *const i64, *const i64, i32, u32) -> Status,
    destroy_tensor: unsafe extern "C" fn(TensorDesc) -> Status,
    #[allow(clippy::type_complexity)]
    create_contraction: unsafe extern "C" fn(
        Handle,
        *mut OperationDesc,
        TensorDesc,
        *const i32,
        i32,
        TensorDesc,
        *const i32,
        i32,
        TensorDesc,
        *const i32,
        i32,
        TensorDesc,
        *const i32,
        ComputeDesc,
    ) -> Status,
    destroy_operation: unsafe extern "C" fn(OperationDesc) -> Status,
    create_preference: unsafe extern "C" fn(Handle, *mut PlanPreference, i32, i32) -> Status,
    destroy_preference: unsafe extern "C" fn(PlanPreference) -> Status,
    estimate_workspace: unsafe extern "C" fn(Handle, OperationDesc, PlanPreference, i32, *mut u64) -> Status,
    create_plan: unsafe extern "C" fn(Handle, *mut Plan, OperationDesc, PlanPreference, u64) -> Status,
    destroy_plan: unsafe extern "C" fn(Plan) -> Status,
    #[allow(clippy::type_complexity)]
    contract: unsafe extern "C" fn(
        Handle,
        Plan,
        *const c_void,
        *const c_void,
        *const c_void,
        *const c_void,
        *const c_void,
        *mut c_void,
        *mut c_void,
        u64,
        cudarc::driver::sys::CUstream,
    ) -> Status,
    error_string: unsafe extern "C" fn(Status) -> *const c_char,
    /// `CUTENSOR_COMPUTE_DESC_32F`'s value: fp32 accumulation.
    compute_32f: ComputeDesc,
}

/// The loaded cuTENSOR, one per process.
pub struct Cutensor {
    library: String,
    version: (i32, i32, i32),
    api: Api,
    /// Kept open for the life of the process: `api`'s pointers point into it.
    _library: Library,
}

// Safety: `api` holds function pointers and the address of an immutable descriptor that
// cuTENSOR documents as thread-safe to use; the library stays loaded for the process.
unsafe impl Send for Cutensor {}
// Safety: as for `Send`; nothing in it is mutated after loading.
unsafe impl Sync for Cutensor {}

impl Cutensor {
    /// The process-wide cuTENSOR, found and loaded on first use.
    pub fn get() -> Result<&'static Cutensor> {
        static CUTENSOR_LIB: OnceLock<std::result::Result<Cutensor, String>> = OnceLock::new();
        CUTENSOR_LIB
            .get_or_init(|| Cutensor::load(&culib::process_var))
            .as_ref()
            .map_err(|reason| Error::NoCutensor(reason.clone()))
    }

    /// `(major, minor, patch)` from `cutensorGetVersion`, e.g. `(2, 8, 1)`.
    pub fn version(&self) -> (i32, i32, i32) {
        self.version
    }

    /// The path (or loader name) of the library in use.
    pub fn library(&self) -> &str {
        &self.library
    }

    fn load(var: Vars) -> std::result::Result<Cutensor, String> {
        // libcutensor needs cuBLASLt (DT_NEEDED libcublasLt.so.N: its GEMM-shaped contractions
        // run cuBLASLt's kernels). The copy found for the `cublas` paths, loaded globally, is the
        // one the loader then resolves, wherever it lives (a wheel off the loader path); where
        // none is found, opening cuTENSOR says which library is missing.
        let _ = crate::runtime::cublas::Cublas::get();
        let (library, handle) = culib::open(&CUTENSOR, var)?;
        let missing = |symbol: &str, e: libloading::Error| format!("{library} has no {symbol} ({e})");
        /// The value of `symbol` in `handle`, a function pointer of type `T`.
        macro_rules! entry {
            ($symbol:literal) => {
                // Safety: the symbol is cuTENSOR 2's C function of that name, whose prototype
                // (cutensor.h) the field's type restates; the pointer is used while `handle`
                // stays loaded (kept in the returned value).
                unsafe { *handle.get($symbol.as_bytes()).map_err(|e| missing($symbol, e))? }
            };
        }
        let get_version: unsafe extern "C" fn() -> usize = entry!("cutensorGetVersion");
        // Safety: `cutensorGetVersion` takes no arguments and needs no GPU.
        let version = culib::split_version(unsafe { get_version() });
        culib::check_major(&CUTENSOR, &library, version.0, version.1)?;
        // Safety: `CUTENSOR_COMPUTE_DESC_32F` is an exported `const cutensorComputeDescriptor_t`
        // (cutensor/types.h): the symbol's address is that of a pointer-sized constant, read once.
        let compute_32f = unsafe {
            let address: *const ComputeDesc =
                *handle.get(b"CUTENSOR_COMPUTE_DESC_32F").map_err(|e| missing("CUTENSOR_COMPUTE_DESC_32F", e))?;
            *address
        };
        let api = Api {
            create: entry!("cutensorCreate"),
            destroy: entry!("cutensorDestroy"),
            create_tensor: entry!("cutensorCreateTensorDescriptor"),
            destroy_tensor: entry!("cutensorDestroyTensorDescriptor"),
            create_contraction: entry!("cutensorCreateContraction"),
            destroy_operation: entry!("cutensorDestroyOperationDescriptor"),
            create_preference: entry!("cutensorCreatePlanPreference"),
            destroy_preference: entry!("cutensorDestroyPlanPreference"),
            estimate_workspace: entry!("cutensorEstimateWorkspaceSize"),
            create_plan: entry!("cutensorCreatePlan"),
            destroy_plan: entry!("cutensorDestroyPlan"),
            contract: entry!("cutensorContract"),
            error_string: entry!("cutensorGetErrorString"),
            compute_32f,
        };
        Ok(Cutensor { library, version, api, _library: handle })
    }

    /// `status` as a result, the failing call and cuTENSOR's own words for it.
    fn check(&self, call: &'static str, status: Status) -> Result<()> {
        if status == STATUS_SUCCESS {
            return Ok(());
        }
        // Safety: `cutensorGetErrorString` returns a static NUL-terminated string for any status.
        let text = unsafe { CStr::from_ptr((self.api.error_string)(status)) };
        Err(Error::driver(call, format!("{} (status {status})", text.to_string_lossy())))
    }
}

/// A cuTENSOR handle (its plan cache and device state), created on the current context.
pub struct TensorHandle {
    lib: &'static Cutensor,
    raw: Handle,
}

// Safety: a cuTENSOR handle is host state; cuTENSOR's contractions on one handle are
// thread-safe, and the launch that owns it moves with its `Attention`.
unsafe impl Send for TensorHandle {}

impl TensorHandle {
    pub fn new() -> Result<Self> {
        let lib = Cutensor::get()?;
        let mut raw: Handle = std::ptr::null_mut();
        // Safety: `raw` is a live out-pointer; the caller bound the device's context.
        lib.check("cutensorCreate", unsafe { (lib.api.create)(&mut raw) })?;
        Ok(TensorHandle { lib, raw })
    }
}

impl Drop for TensorHandle {
    fn drop(&mut self) {
        // Safety: created by `new`, destroyed once, here (after every plan made with it: the
        // launch drops its products first).
        let _ = unsafe { (self.lib.api.destroy)(self.raw) };
    }
}

/// One GEMM shape ready to run as a contraction: D[m,n,b] = A[m,k,b] · B[k,n,b] over the
/// geometry's column-major operands, fp32 accumulation, inputs and output of one 16-bit dtype.
pub struct TensorGemm {
    gemm: Gemm,
    plan: Plan,
    lib: &'static Cutensor,
    /// Workspace the plan may use.
    pub workspace_bytes: usize,
    elem_bytes: usize,
}

// Safety: the plan is host state cuTENSOR only reads during a contraction; it moves with the
// launch that owns it, used by one thread at a time.
unsafe impl Send for TensorGemm {}

/// Mode names of the contraction (any distinct integers; letters read well in logs).
const M: i32 = b'm' as i32;
const N: i32 = b'n' as i32;
const K: i32 = b'k' as i32;
const BATCH: i32 = b'b' as i32;

/// One operand as cuTENSOR describes it: its modes, their extents and strides.
#[derive(Debug, PartialEq, Eq)]
struct Modes {
    modes: Vec<i32>,
    extents: Vec<i64>,
    strides: Vec<i64>,
}

/// The modes of a column-major operand whose op(X) is `rows` (mode `row`) by `cols` (mode
/// `col`): stored transposed, rows step by `ld` and columns by 1; else the other way. A batch
/// of more than one adds the batch mode.
fn modes(operand: &Operand, (row, rows): (i32, usize), (col, cols): (i32, usize), batch: usize) -> Modes {
    let ld = operand.ld as i64;
    let (row_stride, col_stride) = if operand.transposed { (ld, 1) } else { (1, ld) };
    let mut m =
        Modes { modes: vec![row, col], extents: vec![rows as i64, cols as i64], strides: vec![row_stride, col_stride] };
    if batch > 1 {
        m.modes.push(BATCH);
        m.extents.push(batch as i64);
        m.strides.push(operand.batch_stride as i64);
    }
    m
}

/// The contraction's three operands: A (m × k), B (k × n), C (m × n).
fn contraction_modes(g: &Gemm) -> [Modes; 3] {
    [
        modes(&g.a, (M, g.m), (K, g.k), g.batch),
        modes(&g.b, (K, g.k), (N, g.n), g.batch),
        modes(&g.c, (M, g.m), (N, g.n), g.batch),
    ]
}

/// The alignment (bytes) cuTENSOR may assume of an operand's first element: the buffers'
/// (every tensor and the scratch start [`BUFFER_ALIGN`]-aligned) less what its offset breaks.
fn alignment(offset_bytes: usize) -> u32 {
    let align = BUFFER_ALIGN as usize;
    1 << (offset_bytes | align).trailing_zeros().min(align.trailing_zeros())
}

impl TensorGemm {
    /// Prepares `gemm` for inputs and output of `dtype` (cuTENSOR has no 16-bit-in, f32-out
    /// contraction: `c_f32` is refused), choosing cuTENSOR's default algorithm for at most
    /// `workspace_cap` bytes of workspace.
    pub fn new(handle: &TensorHandle, gemm: Gemm, dtype: Dtype, c_f32: bool, workspace_cap: usize) -> Result<Self> {
        let unsupported = |reason: String| Error::Unsupported { imp: "gemm=cutensor".into(), reason };
        let data_type = match dtype {
            Dtype::F16 => CUDA_R_16F,
            Dtype::Bf16 => CUDA_R_16BF,
            other => return Err(unsupported(format!("cuTENSOR's path takes f16 or bf16 inputs, not {other}"))),
        };
        if c_f32 {
            return Err(unsupported(crate::kernels::library::CUTENSOR_NO_F32_SCORES.into()));
        }
        let (lib, api) = (handle.lib, &handle.lib.api);
        let elem = dtype.size_bytes();
        let operands = [gemm.a, gemm.b, gemm.c];
        let all = contraction_modes(&gemm);
        let mut descs: [TensorDesc; 3] = [std::ptr::null_mut(); 3];
        let mut op: OperationDesc = std::ptr::null_mut();
        let mut pref: PlanPreference = std::ptr::null_mut();
        let mut plan: Plan = std::ptr::null_mut();
        let mut estimate = 0u64;
        // Safety: every out-pointer is a live local; the mode, extent and stride arrays live for
        // each call and hold as many entries as the mode count passed; the handle is live. What
        // is created here is destroyed below, but the plan, which the returned value owns.
        let made = unsafe {
            let mut made = Ok(());
            for (i, (m, operand)) in all.iter().zip(&operands).enumerate() {
                made = made.and_then(|()| {
                    lib.check(
                        "cutensorCreateTensorDescriptor",
                        (api.create_tensor)(
                            handle.raw,
                            &mut descs[i],
                            m.modes.len() as u32,
                            m.extents.as_ptr(),
                            m.strides.as_ptr(),
                            data_type,
                            alignment(operand.offset_bytes(elem)),
                        ),
                    )
                });
            }
            let [a, b, c] = descs;
            let [ma, mb, mc] = &all;
            made.and_then(|()| {
                lib.check(
                    "cutensorCreateContraction",
                    (api.create_contraction)(
                        handle.raw,
                        &mut op,
                        a,
                        ma.modes.as_ptr(),
                        OP_IDENTITY,
                        b,
                        mb.modes.as_ptr(),
                        OP_IDENTITY,
                        c,
                        mc.modes.as_ptr(),
                        OP_IDENTITY,
                        c,
                        mc.modes.as_ptr(),
                        api.compute_32f,
                    ),
                )
            })
            .and_then(|()| {
                lib.check(
                    "cutensorCreatePlanPreference",
                    (api.create_preference)(handle.raw, &mut pref, ALGO_DEFAULT, JIT_MODE_NONE),
                )
            })
            .and_then(|()| {
                lib.check(
                    "cutensorEstimateWorkspaceSize",
                    (api.estimate_workspace)(handle.raw, op, pref, WORKSPACE_DEFAULT, &mut estimate),
                )
            })
            .and_then(|()| {
                let limit = estimate.min(workspace_cap as u64);
                lib.check("cutensorCreatePlan", (api.create_plan)(handle.raw, &mut plan, op, pref, limit))
                    .map(|()| limit)
            })
        };
        // Safety: each was created above (or is null, never created) and is destroyed once; the
        // plan does not need them after its creation.
        unsafe {
            if !pref.is_null() {
                (api.destroy_preference)(pref);
            }
            if !op.is_null() {
                (api.destroy_operation)(op);
            }
            for desc in descs.into_iter().filter(|d| !d.is_null()) {
                (api.destroy_tensor)(desc);
            }
        }
        let limit = made.map_err(|e| match e {
            Error::Driver { call, detail } => Error::driver(call, format!("{detail} for {gemm:?}")),
            other => other,
        })?;
        Ok(TensorGemm { gemm, plan, lib, workspace_bytes: limit as usize, elem_bytes: elem })
    }

    /// Enqueues the contraction on `stream` over tensors at device addresses `a`, `b`, `c`
    /// (each the base its operand's offset counts from), with `workspace` of
    /// [`Self::workspace_bytes`].
    ///
    /// # Safety
    /// Each address must hold its operand's whole extent on the device, live until the stream
    /// has run the work; `c` must not overlap `a` or `b`; `workspace` must hold
    /// `workspace_bytes` and be used by no other work meanwhile; `handle` made this plan.
    pub unsafe fn run(
        &self,
        handle: &TensorHandle,
        [a, b, c]: [u64; 3],
        workspace: u64,
        stream: cudarc::driver::sys::CUstream,
    ) -> Result<()> {
        let (alpha, beta) = (1f32, 0f32);
        let at = |base: u64, operand: &Operand| operand.address(base, self.elem_bytes) as *mut c_void;
        let (pa, pb, pc) = (at(a, &self.gemm.a), at(b, &self.gemm.b), at(c, &self.gemm.c));
        // Safety: the caller's contract; alpha and beta are host floats (fp32 compute's scalars).
        let status = unsafe {
            (self.lib.api.contract)(
                handle.raw,
                self.plan,
                &alpha as *const f32 as *const c_void,
                pa,
                pb,
                &beta as *const f32 as *const c_void,
                pc,
                pc,
                workspace as *mut c_void,
                self.workspace_bytes as u64,
                stream,
            )
        };
        self.lib.check("cutensorContract", status)
    }
}

impl Drop for TensorGemm {
    fn drop(&mut self) {
        // Safety: the plan belongs to this value and is destroyed once, here.
        let _ = unsafe { (self.lib.api.destroy_plan)(self.plan) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(ld: usize, batch_stride: usize, transposed: bool) -> Operand {
        Operand { offset: 0, ld, batch_stride, transposed }
    }

    #[test]
    fn a_gemm_is_a_contraction_over_m_n_k_and_the_batch() {
        // Sᵀ = K·Qᵀ for 3 units of 300 keys by 1024 query rows at hd64: A (K) read transposed.
        let qk = Gemm {
            m: 300,
            n: 1024,
            k: 64,
            batch: 3,
            a: op(64, 19_200, true),
            b: op(64, 65_536, false),
            c: op(304, 311_296, false),
        };
        let [a, b, c] = contraction_modes(&qk);
        // A[m,k,b]: stored k x m, so m steps by the row stride and k by one element.
        assert_eq!(a, Modes { modes: vec![M, K, BATCH], extents: vec![300, 64, 3], strides: vec![64, 1, 19_200] });
        // B[k,n,b]: stored k x n as it is.
        assert_eq!(b, Modes { modes: vec![K, N, BATCH], extents: vec![64, 1024, 3], strides: vec![1, 64, 65_536] });
        // C[m,n,b]: m contiguous, n by S's row stride.
        assert_eq!(c, Modes { modes: vec![M, N, BATCH], extents: vec![300, 1024, 3], strides: vec![1, 304, 311_296] });
        // One GEMM: no batch mode.
        let one = Gemm { batch: 1, ..qk };
        assert!(contraction_modes(&one).iter().all(|m| !m.modes.contains(&BATCH) && m.modes.len() == 2));
        // A transposed B reads n contiguous.
        let bt = modes(&op(128, 0, true), (K, 64), (N, 128), 1);
        assert_eq!(bt.strides, vec![128, 1]);
    }

    #[test]
    fn alignment_is_the_buffers_unless_the_offset_breaks_it() {
        assert_eq!(alignment(0), 16);
        assert_eq!(alignment(128 * 64 * 2), 16);
        assert_eq!(alignment(8), 8);
        assert_eq!(alignment(2), 2);
    }

    #[test]
    fn a_missing_cutensor_is_one_sentence_saying_how_to_install_it() {
        let tmp = tempfile::tempdir().unwrap();
        let dir: std::path::PathBuf = tmp.path().into();
        let var = |name: &str| (name == CUTENSOR_ENV).then(|| dir.clone());
        let Err(reason) = Cutensor::load(&var) else { panic!("an empty directory loaded") };
        assert_eq!(reason, format!("{CUTENSOR_ENV}={} holds no libcutensor.so* file", dir.display()));
        let err = Error::NoCutensor(reason);
        assert!(err.is_environment());
        // Searched everywhere and found nowhere: the sentence names the wheel.
        let sentence = culib::not_found(&CUTENSOR);
        assert!(sentence.starts_with("cuTENSOR was not found"), "{sentence}");
        assert!(
            sentence.contains("install cuTENSOR 2 with `pip install cutensor-cu13`") && !sentence.contains("toolkit"),
            "{sentence}"
        );
    }

    /// Needs a real cuTENSOR (no GPU): where it is missing the test says why and passes.
    #[test]
    fn an_installed_cutensor_loads_with_its_version() {
        match Cutensor::get() {
            Ok(lib) => {
                println!("cuTENSOR {:?}: {}", lib.version(), lib.library());
                assert!(lib.version().0 >= 2);
            }
            Err(err) => println!("skipped: {err}"),
        }
    }
}
