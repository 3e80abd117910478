//! The driver layer: a GPU (context + stream), loaded kernels, and launches. Above this file
//! nothing is `unsafe` and no raw device pointer is visible.

use crate::arch::Arch;
use crate::config::KernelSpec;
use crate::error::{Error, ProblemError, Result};
use crate::kernels::SourceFile;
use crate::problem::{Causal, Problem, TensorName};
use crate::runtime::compile::CompiledKernel;
use crate::runtime::launch::LaunchBuffers;
use crate::runtime::scratch::ScratchNeed;
use crate::runtime::tma::{self, TensorMapGeometry};
use cudarc::driver::sys::{CUdevice_attribute, CUfunction_attribute};
use cudarc::driver::{
    CudaContext, CudaFunction, CudaModule, CudaStream, CudaView, CudaViewMut, DevicePtrMut, DeviceRepr, LaunchConfig,
    PushKernelArg,
};
use std::sync::Arc;

/// Dynamic shared memory a kernel gets without opting in (CUDA's default per-block limit).
const DEFAULT_DYNAMIC_SMEM: usize = 48 * 1024;

/// One GPU with the stream evoattn launches on.
pub struct Gpu {
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    arch: Arch,
    name: String,
    compute_capability: (i32, i32),
    sm_count: u32,
    l2_bytes: usize,
    driver_version: i32,
    /// The stream-holding kernel, compiled on first use.
    hold: std::sync::OnceLock<CudaFunction>,
    /// The input generator's kernels (`draw`, `fill`), compiled on first use.
    draw: std::sync::OnceLock<[CudaFunction; 2]>,
}

impl Gpu {
    /// CUDA devices the driver lists; an error when there is no driver or no device.
    pub fn count() -> Result<usize> {
        // Safety: only tries to dlopen the driver library by its known names; no driver call.
        if !unsafe { cudarc::driver::sys::is_culib_present() } {
            return Err(Error::NoDriver);
        }
        let count = CudaContext::device_count().map_err(|e| Error::NoGpu(format!("the driver reports: {e}")))?;
        if count <= 0 {
            return Err(Error::NoGpu("the driver lists no CUDA device".into()));
        }
        Ok(count as usize)
    }

    /// Opens GPU `ordinal`. No driver, no GPU, or an unsupported GPU is a typed error with one
    /// sentence, never a panic from the dynamic loader.
    pub fn open(ordinal: usize) -> Result<Self> {
        let count = Gpu::count()?;
        if ordinal >= count {
            return Err(Error::NoGpu(format!("GPU {ordinal} asked for, but only {count} visible")));
        }
        let ctx = CudaContext::new(ordinal).map_err(|e| Error::driver("cuCtxCreate", e))?;
        let name = ctx.name().map_err(|e| Error::driver("cuDeviceGetName", e))?;
        let compute_capability = ctx.compute_capability().map_err(|e| Error::driver("cuDeviceGetAttribute", e))?;
        let arch = Arch::from_compute_capability(compute_capability.0, compute_capability.1).ok_or_else(|| {
            Error::Unsupported {
                imp: "evoattn".into(),
                reason: format!(
                    "{name} has compute capability {}.{}; evoattn needs 8.0, 8.6, 8.9 or 9.0",
                    compute_capability.0, compute_capability.1
                ),
            }
        })?;
        let attr = |a: CUdevice_attribute| ctx.attribute(a).map_err(|e| Error::driver("cuDeviceGetAttribute", e));
        let sm_count = attr(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)? as u32;
        let l2_bytes = attr(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE)? as usize;
        let mut driver_version = 0;
        // Safety: the driver library is loaded (checked above) and the pointer is to a live i32.
        let status = unsafe { cudarc::driver::sys::cuDriverGetVersion(&mut driver_version) };
        if status != cudarc::driver::sys::CUresult::CUDA_SUCCESS {
            return Err(Error::driver("cuDriverGetVersion", format!("{status:?}")));
        }
        // Safety: evoattn launches only on its own stream below and every buffer it creates is
        // used on that stream, so cudarc's cross-stream event bookkeeping is not needed; it also
        // costs events on each launch and breaks CUDA-graph capture. Callers that use evoattn's
        // buffers on other streams synchronise them, the usual CUDA stream contract
        // (documented on `Attention`).
        unsafe { ctx.disable_event_tracking() };
        // A stream of our own (not the legacy default stream) so that launches can be captured
        // into CUDA graphs.
        let stream = ctx.new_stream().map_err(|e| Error::driver("cuStreamCreate", e))?;
        Ok(Gpu {
            ctx,
            stream,
            arch,
            name,
            compute_capability,
            sm_count,
            l2_bytes,
            driver_version,
            hold: std::sync::OnceLock::new(),
            draw: std::sync::OnceLock::new(),
        })
    }

    pub fn arch(&self) -> Arch {
        self.arch
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn compute_capability(&self) -> (i32, i32) {
        self.compute_capability
    }

    pub fn sm_count(&self) -> u32 {
        self.sm_count
    }

    pub fn l2_bytes(&self) -> usize {
        self.l2_bytes
    }

    /// The GPU's PCI bus id as the driver writes it ("0000:19:00.0"): how NVML finds the same GPU.
    pub fn pci_bus_id(&self) -> Result<String> {
        let mut buf = [0 as std::ffi::c_char; 32];
        // Safety: the buffer is live and its length is passed; the device is the context's.
        let status = unsafe {
            cudarc::driver::sys::cuDeviceGetPCIBusId(buf.as_mut_ptr(), buf.len() as i32, self.ctx.cu_device())
        };
        if status != cudarc::driver::sys::CUresult::CUDA_SUCCESS {
            return Err(Error::driver("cuDeviceGetPCIBusId", format!("{status:?}")));
        }
        // Safety: the driver wrote a NUL-terminated string into the buffer (it succeeded).
        Ok(unsafe { std::ffi::CStr::from_ptr(buf.as_ptr()) }.to_string_lossy().into_owned())
    }

    /// The CUDA version the driver supports, e.g. "13.0".
    pub fn driver_version(&self) -> String {
        format!("{}.{}", self.driver_version / 1000, (self.driver_version % 1000) / 10)
    }

    /// Compiles and loads a utility kernel's source (not an attention kernel: no spec, no
    /// defines) and returns its functions by name.
    fn utility<const N: usize>(&self, source: &SourceFile, names: [&str; N]) -> Result<[CudaFunction; N]> {
        let nvrtc = crate::runtime::nvrtc::Nvrtc::get()?;
        let options = [self.arch.nvrtc_flag()];
        let compiled =
            nvrtc.compile_cubin(source, &[], names[0], self.arch, &options).map_err(|f| Error::Compile(Box::new(f)))?;
        let module = self
            .ctx
            .load_module(cudarc::nvrtc::Ptx::from_binary(compiled.cubin))
            .map_err(|e| Error::driver("cuModuleLoadData", e))?;
        let mut functions = Vec::with_capacity(N);
        for name in names {
            functions.push(module.load_function(name).map_err(|e| Error::driver("cuModuleGetFunction", e))?);
        }
        functions.try_into().map_err(|_| Error::driver("cuModuleGetFunction", "function count"))
    }

    /// Enqueues a kernel that keeps the stream busy for `duration` on the GPU, so that work the
    /// host enqueues meanwhile runs back to back. The kernel is compiled on first use.
    pub fn hold(&self, duration: std::time::Duration) -> Result<()> {
        let function = match self.hold.get() {
            Some(f) => f,
            None => {
                let [f] = self.utility(&crate::kernels::HOLD, [crate::kernels::HOLD_KERNEL])?;
                self.hold.get_or_init(|| f)
            }
        };
        let nanoseconds = u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX);
        let cfg = LaunchConfig { grid_dim: (1, 1, 1), block_dim: (1, 1, 1), shared_mem_bytes: 0 };
        let mut launch = self.stream.launch_builder(function);
        launch.arg(&nanoseconds);
        // Safety: the kernel takes one u64 by value and touches no memory.
        unsafe { launch.launch(cfg) }.map_err(|e| Error::driver("cuLaunchKernel", e))?;
        Ok(())
    }

    /// Fills tensor `t` of `problem` in `out` with the generator's values (`crate::draw`, the
    /// same bits the CPU draws) and every element of the buffer outside the logical tensor with
    /// `gap`, on this GPU's stream. The draw kernels are compiled on first use.
    pub fn draw(
        &self,
        problem: &Problem,
        t: TensorName,
        stream: &crate::draw::Stream,
        gap: u16,
        out: &mut CudaViewMut<'_, u16>,
    ) -> Result<()> {
        problem.validate()?;
        let extent = problem.extent(t);
        if out.len() < extent {
            return Err(Error::Problem(ProblemError::BufferTooSmall { tensor: t, need: extent, have: out.len() }));
        }
        let elements = problem.elements(t);
        if extent == 0 {
            return Ok(());
        }
        let [draw, fill] = match self.draw.get() {
            Some(f) => f,
            None => {
                let functions = self.utility(&crate::kernels::DRAW, crate::kernels::DRAW_KERNELS)?;
                self.draw.get_or_init(|| functions)
            }
        };
        // Validated: extents and element counts are at most MAX_INDEX < 2^31.
        let threads = 256u32;
        let grid = |n: usize| (n.div_ceil(threads as usize) as u32).clamp(1, self.sm_count * 8);
        if elements < extent {
            let cfg = LaunchConfig { grid_dim: (grid(extent), 1, 1), block_dim: (threads, 1, 1), shared_mem_bytes: 0 };
            let mut launch = self.stream.launch_builder(fill);
            let n = extent as u32;
            launch.arg(&mut *out).arg(&n).arg(&gap);
            // Safety: `evoattn_fill(unsigned short*, u32, unsigned short)` writes elements [0, n)
            // of `out`, which holds at least `extent` = n (checked above).
            unsafe { launch.launch(cfg) }.map_err(|e| Error::driver("cuLaunchKernel", e))?;
        }
        let [nb, nh, ns, nd] = problem.dims(t).map(|n| n as u32);
        let st = problem.strides(t);
        let params = DrawParams {
            out: 0,
            strides: [st.batch, st.head, st.seq, st.dim].map(|x| x as i64),
            dims: [nb, nh, ns, nd],
            elements: elements as u32,
            keys: stream.keys,
            scale: stream.scale,
            bf16: u32::from(problem.dtype == crate::problem::Dtype::Bf16),
        };
        let cfg = LaunchConfig { grid_dim: (grid(elements), 1, 1), block_dim: (threads, 1, 1), shared_mem_bytes: 0 };
        let (address, _record) = out.device_ptr_mut(&self.stream);
        let params = DrawParams { out: address, ..params };
        let mut launch = self.stream.launch_builder(draw);
        launch.arg(&params);
        // Safety: `DrawParams` mirrors the kernel's parameter; the kernel writes only the logical
        // elements' offsets under the validated problem's strides, all below `extent`, which
        // `out` holds (checked above) and which stays borrowed until the launch is enqueued.
        unsafe { launch.launch(cfg) }.map_err(|e| Error::driver("cuLaunchKernel", e))?;
        Ok(())
    }

    pub fn stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }

    pub fn context(&self) -> &Arc<CudaContext> {
        &self.ctx
    }

    /// Loads a compiled kernel, raises its dynamic shared-memory limit when it needs more than
    /// the default, and asks the driver how many of its blocks one SM holds at once.
    pub fn load(&self, kernel: &CompiledKernel) -> Result<LoadedKernel> {
        let module = self
            .ctx
            .load_module(cudarc::nvrtc::Ptx::from_binary(kernel.cubin.clone()))
            .map_err(|e| Error::driver("cuModuleLoadData", e))?;
        let name = kernel.spec.name();
        let function = module.load_function(&name).map_err(|e| Error::driver("cuModuleGetFunction", e))?;
        let smem = kernel.spec.dynamic_smem_bytes();
        if smem > DEFAULT_DYNAMIC_SMEM {
            function
                .set_attribute(CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, smem as i32)
                .map_err(|e| Error::driver("cuFuncSetAttribute", e))?;
        }
        // Registers, shared memory and threads together: what `plan::splits` sizes a wave by.
        let resident_per_sm = function
            .occupancy_max_active_blocks_per_multiprocessor(kernel.spec.threads(), smem, None)
            .map_err(|e| Error::driver("cuOccupancyMaxActiveBlocksPerMultiprocessor", e))?;
        let second = |name: Option<String>| match name {
            Some(name) => module.load_function(&name).map(Some).map_err(|e| Error::driver("cuModuleGetFunction", e)),
            None => Ok(None),
        };
        let combine = second(kernel.spec.combine_kernel_name())?;
        let transpose = second(kernel.spec.transpose_kernel_name())?;
        let gemm = second(kernel.spec.gemm_kernel_name())?;
        let backward = match kernel.spec.backward_kernel_names() {
            Some(names) => {
                let [dot, dq] = names.map(|n| module.load_function(&n));
                Some([
                    dot.map_err(|e| Error::driver("cuModuleGetFunction", e))?,
                    dq.map_err(|e| Error::driver("cuModuleGetFunction", e))?,
                ])
            }
            None => None,
        };
        Ok(LoadedKernel {
            module,
            function,
            combine,
            transpose,
            gemm,
            backward,
            spec: kernel.spec,
            smem,
            resident_per_sm,
        })
    }
}

/// The draw kernel's parameter; field for field the `DrawParams` struct of `kernels/draw.cu`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
struct DrawParams {
    out: u64,
    strides: [i64; 4],
    dims: [u32; 4],
    elements: u32,
    keys: [u32; 2],
    scale: f32,
    bf16: u32,
}

// Safety: `DrawParams` is `repr(C)`, holds only plain integers and floats, and matches the
// layout of `DrawParams` in kernels/draw.cu (the pointer as u64, `long long` as i64).
unsafe impl DeviceRepr for DrawParams {}

/// Kernel launch parameters; field for field the `AttnParams` struct of `kernels/common.cuh`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct KernelParams {
    pub(crate) q: u64,
    pub(crate) k: u64,
    pub(crate) v: u64,
    pub(crate) o: u64,
    pub(crate) lse: u64,
    q_strides: [i64; 3],
    k_strides: [i64; 3],
    v_strides: [i64; 3],
    o_strides: [i64; 3],
    b: i32,
    h: i32,
    hkv: i32,
    sq: i32,
    sk: i32,
    causal: i32,
    causal_offset: i32,
    scale_log2: f32,
    head_group: i32,
    /// Zeroed counters of the persistent `wgmma` schedulers (the dynamic one's two, the split
    /// tail's one per tail tile and consumer warpgroup), or 0 (`PreparedLaunch` sets it).
    pub(crate) tile_counter: u64,
    /// The split tail's partials (two slots per block), or 0 (`PreparedLaunch` sets it).
    pub(crate) split_work: u64,
}

// Safety: `KernelParams` is `repr(C)`, holds only plain integers and floats, and matches the
// layout of `AttnParams` in kernels/common.cuh (pointers as u64, `long long` as i64, `int` as
// i32), so the driver may copy its bytes as the kernel's parameter.
unsafe impl DeviceRepr for KernelParams {}

/// A kernel loaded into the GPU's context, ready to launch.
pub struct LoadedKernel {
    /// Its module, for the module globals an instrumented kernel writes (`trace=1`).
    module: Arc<CudaModule>,
    function: CudaFunction,
    /// `splitkv`'s separate merge kernel (`combine=kernel`), from the same module.
    combine: Option<CudaFunction>,
    /// The V transpose an E4M3 `wgmma` kernel runs first, from the same module.
    transpose: Option<CudaFunction>,
    /// A hybrid's own GEMM (kernels/library/gemm.cuh), from the same module.
    gemm: Option<CudaFunction>,
    /// A backward module's dot and dQ-conversion kernels (kernels/bwd/bwd.cu).
    backward: Option<[CudaFunction; 2]>,
    spec: KernelSpec,
    smem: usize,
    resident_per_sm: u32,
}

/// The inputs of one forward pass, as device views (whole allocations or sub-slices).
pub enum InputViews<'a> {
    /// q, k and v of an f16 or bf16 problem.
    Sixteen { q: CudaView<'a, u16>, k: CudaView<'a, u16>, v: CudaView<'a, u16> },
    /// q, k and v of an E4M3 problem as bytes, with their descales as float32 `[3, B, Hkv]`
    /// (q's, k's, then v's: [`crate::fp8::Descales`] in that order). The descales are read on
    /// the GPU as given: the launch does not copy them back to check them, so a zero, negative
    /// or non-finite descale gives zero, sign-flipped or non-finite outputs
    /// ([`crate::fp8::Descales::validate`] checks host values).
    Fp8 { q: CudaView<'a, u8>, k: CudaView<'a, u8>, v: CudaView<'a, u8>, descale: CudaView<'a, f32> },
}

/// The tensors of one forward pass, as device views: the inputs, O in the problem's output
/// dtype (bf16 for E4M3 inputs) and the optional LSE.
pub struct DeviceTensors<'a> {
    pub inputs: InputViews<'a>,
    pub o: CudaViewMut<'a, u16>,
    /// `[B, H, Sq]` float32, required when the problem asks for LSE.
    pub lse: Option<CudaViewMut<'a, f32>>,
}

/// The tensors of one forward pass given by device address: memory evoattn did not allocate
/// (a PyTorch tensor's, through the Python package). Each buffer is taken to hold exactly its
/// tensor's extent under the problem's strides; alignment and overlap are still checked at the
/// launch.
#[derive(Clone, Copy, Debug)]
pub struct ExternalTensors {
    pub(crate) buffers: LaunchBuffers,
    pub(crate) has_lse: bool,
}

impl ExternalTensors {
    /// Q, K, V, O (and LSE, `[B, H, Sq]` float32 dense, when given) at these device addresses,
    /// laid out by `problem`'s strides; for E4M3 inputs, their descales, float32 `[3, B, Hkv]`
    /// dense (q's, k's, then v's), without which the launch is refused.
    ///
    /// # Safety
    ///
    /// Each address must point into device memory of the context the launch runs in (the
    /// `Attention`'s GPU) that holds at least [`Problem::extent`] elements of its tensor under
    /// `problem`'s strides and stays allocated until the launch's work on its stream is done,
    /// and the caller orders other work on these buffers with that stream (the usual CUDA
    /// stream contract). The launch must use this same `problem` (`Attention` checks it).
    pub unsafe fn new(
        problem: &Problem,
        q: u64,
        k: u64,
        v: u64,
        o: u64,
        lse: Option<u64>,
        descale: Option<u64>,
    ) -> Self {
        let len = |t| problem.extent(t);
        let lse_len = if lse.is_some() { len(TensorName::Lse) } else { 0 };
        let descale_len = if descale.is_some() { len(TensorName::Descale) } else { 0 };
        ExternalTensors {
            buffers: LaunchBuffers {
                addrs: [q, k, v, o, lse.unwrap_or(0), descale.unwrap_or(0)],
                lens: [
                    len(TensorName::Q),
                    len(TensorName::K),
                    len(TensorName::V),
                    len(TensorName::O),
                    lse_len,
                    descale_len,
                ],
            },
            has_lse: lse.is_some(),
        }
    }
}

impl Gpu {
    /// A stream created by another library (PyTorch's current stream) in this GPU's context,
    /// for `Attention::forward_on`; dropping it leaves the stream alone.
    ///
    /// # Safety
    ///
    /// `handle` must be a stream of this GPU's context (the primary context, which PyTorch uses)
    /// or one of CUDA's default-stream handles (0, 1, 2), and stay alive while the returned
    /// value, or a launch enqueued through it, is in use.
    pub unsafe fn borrow_stream(&self, handle: usize) -> Arc<CudaStream> {
        // Safety: the caller's contract above is cudarc's for a borrowed stream.
        unsafe { self.ctx.wrap_borrowed_stream(handle as cudarc::driver::sys::CUstream) }
    }
}

impl LoadedKernel {
    pub fn spec(&self) -> &KernelSpec {
        &self.spec
    }

    pub(crate) fn function(&self) -> &CudaFunction {
        &self.function
    }

    pub(crate) fn combine_function(&self) -> Option<&CudaFunction> {
        self.combine.as_ref()
    }

    /// A backward module's dot and dQ-conversion kernels.
    pub(crate) fn backward_functions(&self) -> Option<[CudaFunction; 2]> {
        self.backward.clone()
    }

    pub(crate) fn gemm_function(&self) -> Option<&CudaFunction> {
        self.gemm.as_ref()
    }

    pub(crate) fn transpose_function(&self) -> Option<&CudaFunction> {
        self.transpose.as_ref()
    }

    /// Dynamic shared memory the kernel is launched with.
    pub fn smem(&self) -> usize {
        self.smem
    }

    /// Blocks of this kernel one SM holds at once (the driver's occupancy calculator).
    pub fn resident_per_sm(&self) -> u32 {
        self.resident_per_sm
    }

    /// Zeroes the module global `name` on `stream` (asynchronously).
    pub(crate) fn zero_global(&self, name: &str, stream: &Arc<CudaStream>) -> Result<()> {
        let mut global = self.module.get_global(name, stream).map_err(|e| Error::driver("cuModuleGetGlobal", e))?;
        stream.memset_zeros(&mut global).map_err(|e| Error::driver("cuMemsetD8", e))
    }

    /// The bytes of the module global `name`, once `stream`'s work before the call is done.
    pub(crate) fn read_global(&self, name: &str, stream: &Arc<CudaStream>) -> Result<Vec<u8>> {
        let global = self.module.get_global(name, stream).map_err(|e| Error::driver("cuModuleGetGlobal", e))?;
        stream.clone_dtoh(&global).map_err(|e| Error::driver("cuMemcpyDtoH", e))
    }
}

/// Everything needed to launch a planned kernel in another process (the oracle times ours
/// with outside timers to cross-check our timer): the CUBIN, the launch shape, the packed
/// parameter bytes with the tensor pointers zero, where those pointers go, and the tensor maps
/// the kernel takes after them, which the launching process encodes over its own tensors.
#[derive(Clone, Debug)]
pub struct LaunchImage {
    pub kernel: String,
    pub cubin: Vec<u8>,
    pub grid: [usize; 3],
    pub block: u32,
    pub smem: usize,
    pub params: Vec<u8>,
    /// Byte offsets of the q, k, v and o pointers in `params`.
    pub pointer_offsets: [(TensorName, usize); 4],
    /// The kernel's `TmaMap` parameters after `params`, in order: each over its tensor's address
    /// (`tma::TensorMapGeometry::encoding` says how to encode it).
    pub tensor_maps: Vec<(TensorName, TensorMapGeometry)>,
    /// The scratch the launching process allocates (counters zeroed once: each launch leaves
    /// them at zero again), and the byte offsets in `params` of its counters' and floats'
    /// addresses.
    pub scratch: ScratchNeed,
    pub scratch_offsets: [usize; 2],
}

impl LaunchImage {
    /// The image of `kernel` for `problem` (validated, without LSE, 16-bit).
    pub fn new(kernel: &CompiledKernel, problem: &Problem, sm_count: u32, l2_bytes: usize) -> Result<Self> {
        problem.validate()?;
        let unsupported = |reason: String| Error::Unsupported { imp: kernel.spec.imp().to_string(), reason };
        if kernel.spec.imp().is_library() {
            return Err(unsupported(
                "the library paths are cuBLASLt GEMMs around a row kernel; a launch image holds one kernel".into(),
            ));
        }
        if problem.dtype.is_fp8() {
            return Err(unsupported(
                "an E4M3 launch takes descales (and wgmma's a V transpose first), which a launch image does not \
                 carry"
                    .into(),
            ));
        }
        // splitkv is two launches (its splits, then their merge) with parameters beside AttnParams.
        let needs = kernel.spec.launch_needs(problem, sm_count, 1).map_err(unsupported)?;
        if needs.merge.is_some() || needs.splits > 1 {
            return Err(unsupported(format!(
                "{} splits the keys and merges the splits in a second launch; a launch image holds one",
                kernel.spec.name()
            )));
        }
        if problem.with_lse {
            return Err(unsupported("a launch image carries no LSE buffer".into()));
        }
        let tensor_maps = tma::kernel_maps(problem, &kernel.spec)?;
        Ok(LaunchImage {
            kernel: kernel.spec.name(),
            cubin: kernel.cubin.clone(),
            grid: kernel.spec.grid(&problem.shape, 1, sm_count),
            block: kernel.spec.threads(),
            smem: kernel.spec.dynamic_smem_bytes(),
            params: KernelParams::new(problem, [0; 5], l2_bytes)?.to_bytes(),
            pointer_offsets: [
                (TensorName::Q, std::mem::offset_of!(KernelParams, q)),
                (TensorName::K, std::mem::offset_of!(KernelParams, k)),
                (TensorName::V, std::mem::offset_of!(KernelParams, v)),
                (TensorName::O, std::mem::offset_of!(KernelParams, o)),
            ],
            tensor_maps,
            scratch: needs.scratch,
            scratch_offsets: [
                std::mem::offset_of!(KernelParams, tile_counter),
                std::mem::offset_of!(KernelParams, split_work),
            ],
        })
    }
}

impl KernelParams {
    /// The struct's bytes as the device sees them (little-endian, `repr(C)` order and padding),
    /// built field by field so no `unsafe` reinterpretation is needed.
    fn to_bytes(self) -> Vec<u8> {
        let mut out = Vec::with_capacity(std::mem::size_of::<Self>());
        for ptr in [self.q, self.k, self.v, self.o, self.lse] {
            out.extend_from_slice(&ptr.to_le_bytes());
        }
        for strides in [self.q_strides, self.k_strides, self.v_strides, self.o_strides] {
            for s in strides {
                out.extend_from_slice(&s.to_le_bytes());
            }
        }
        for n in [self.b, self.h, self.hkv, self.sq, self.sk, self.causal, self.causal_offset] {
            out.extend_from_slice(&n.to_le_bytes());
        }
        out.extend_from_slice(&self.scale_log2.to_le_bytes());
        out.extend_from_slice(&self.head_group.to_le_bytes());
        out.resize(std::mem::offset_of!(KernelParams, tile_counter), 0);
        out.extend_from_slice(&self.tile_counter.to_le_bytes());
        out.extend_from_slice(&self.split_work.to_le_bytes());
        out.resize(std::mem::size_of::<Self>(), 0);
        out
    }

    /// Packs a validated problem and its buffers' addresses ([q, k, v, o, lse]) for a GPU with
    /// `l2_bytes` of L2 (the causal `wgmma` grid order's sections, `plan::head_group`). Every
    /// size goes in as a 32-bit int by checked conversion: `validate` bounds them, and a
    /// problem that skipped it is refused here rather than truncated.
    pub(crate) fn new(problem: &Problem, ptrs: [u64; 5], l2_bytes: usize) -> Result<Self, ProblemError> {
        let [b, h, hkv, sq, sk, causal, causal_offset] = kernel_ints(problem)?;
        let head_group = crate::plan::head_group(problem, l2_bytes);
        Ok(KernelParams {
            q: ptrs[0],
            k: ptrs[1],
            v: ptrs[2],
            o: ptrs[3],
            lse: ptrs[4],
            q_strides: kernel_strides(problem, TensorName::Q),
            k_strides: kernel_strides(problem, TensorName::K),
            v_strides: kernel_strides(problem, TensorName::V),
            o_strides: kernel_strides(problem, TensorName::O),
            b,
            h,
            hkv,
            sq,
            sk,
            causal,
            causal_offset,
            scale_log2: problem.softmax_scale() * std::f32::consts::LOG2_E,
            head_group: i32::try_from(head_group)
                .map_err(|_| ProblemError::SizeTooLarge { axis: "head group", size: head_group })?,
            tile_counter: 0,
            split_work: 0,
        })
    }
}

/// A problem's sizes as the kernels' 32-bit ints, in their parameter order: B, H, Hkv, Sq, Sk,
/// causal (0 or 1), the causal offset. Checked conversions: `validate` bounds them, and a
/// problem that skipped it is refused here rather than truncated.
pub(crate) fn kernel_ints(problem: &Problem) -> Result<[i32; 7], ProblemError> {
    let s = problem.shape;
    let int =
        |axis: &'static str, size: usize| i32::try_from(size).map_err(|_| ProblemError::SizeTooLarge { axis, size });
    let offset = problem.causal.offset(s.sq, s.sk).unwrap_or(0);
    let causal_offset = i32::try_from(offset)
        .map_err(|_| ProblemError::SizeTooLarge { axis: "Sk-Sq", size: offset.unsigned_abs() as usize })?;
    Ok([
        int("B", s.b)?,
        int("H", s.h)?,
        int("Hkv", s.hkv)?,
        int("Sq", s.sq)?,
        int("Sk", s.sk)?,
        i32::from(problem.causal != Causal::None),
        causal_offset,
    ])
}

/// Tensor `t`'s batch, head and sequence strides as the kernels' 64-bit ints (its head-dim
/// stride is 1). A stride past i64 can only be an axis of one element (on any longer axis it is
/// at most the extent, below 2^31), which the kernel multiplies by index 0: any value serves.
pub(crate) fn kernel_strides(problem: &Problem, t: TensorName) -> [i64; 3] {
    let stride = |x: usize| i64::try_from(x).unwrap_or(i64::MAX);
    let st = problem.strides(t);
    [stride(st.batch), stride(st.head), stride(st.seq)]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::tma::TensorMap;

    /// An H100 SXM's L2 cache.
    const H100_L2: usize = 50 * 1024 * 1024;

    #[test]
    fn params_layout_matches_attn_params() {
        // 5 pointers (40) + 12 i64 strides (96) + 8 i32 + 1 f32 (36, padded to 40) + the
        // counter and split-work pointers (16) = 192 bytes, 8-aligned: what `struct AttnParams`
        // in kernels/common.cuh occupies.
        assert_eq!(std::mem::size_of::<KernelParams>(), 192);
        assert_eq!(std::mem::offset_of!(KernelParams, tile_counter), 176);
        assert_eq!(std::mem::offset_of!(KernelParams, split_work), 184);
        assert_eq!(std::mem::align_of::<KernelParams>(), 8);
    }

    #[test]
    fn tensor_map_params_match_tma_map() {
        // After `AttnParams` (192 bytes) a TMA kernel takes three `TmaMap`s (four with
        // `o_staging`): 128 bytes each, `__align__(64)` in kernels/ptx_sm90.cuh; each is its own
        // parameter, so the driver places it by the kernel's parameter layout and the host value
        // only needs its size.
        assert_eq!(std::mem::size_of::<TensorMap>(), 128);
        assert_eq!(std::mem::align_of::<TensorMap>() % 64, 0);
        let src = crate::kernels::HEADERS.iter().find(|f| f.name == "ptx_sm90.cuh").unwrap().text;
        assert!(src.contains("struct __align__(64) TmaMap {\n    u64 opaque[16];\n};"));
        let wgmma = crate::kernels::main_source(crate::config::Impl::Wgmma).text;
        assert!(wgmma.contains("const __grid_constant__ TmaMap q_map, const __grid_constant__ TmaMap k_map,"));
    }

    #[test]
    fn launch_images_carry_the_tensor_maps_a_kernel_takes_after_its_params() {
        let p = Problem::dense(
            crate::problem::Shape::new(1, 2, 130, 128),
            crate::problem::Dtype::Bf16,
            crate::problem::Layout::Bhsd,
        );
        let kernel = |overrides: &str| {
            let config =
                crate::defaults::config(crate::config::Impl::Wgmma, Arch::Sm90a, crate::problem::Dtype::Bf16, 128)
                    .with_overrides(overrides)
                    .unwrap();
            let spec = KernelSpec { config, dtype: crate::problem::Dtype::Bf16, head_dim: 128 };
            CompiledKernel::from_cubin(spec, Arch::Sm90a, Vec::new())
        };
        let plain = LaunchImage::new(&kernel("pipeline=cp-async,o_staging=registers"), &p, 132, H100_L2).unwrap();
        assert!(plain.tensor_maps.is_empty());
        // As the kernel's parameters: K's and V's maps (and O's with its tile store), each the
        // geometry our own launch encodes.
        let tile_store = kernel("pipeline=tma,schedule=grid,o_staging=tile");
        let image = LaunchImage::new(&tile_store, &p, 132, H100_L2).unwrap();
        let names: Vec<TensorName> = image.tensor_maps.iter().map(|(t, _)| *t).collect();
        let want = tma::kernel_maps(&p, &tile_store.spec).unwrap();
        assert_eq!(image.tensor_maps, want);
        assert_eq!(names, [TensorName::Q, TensorName::K, TensorName::V, TensorName::O]);
        assert!(image.scratch.is_none());
        // A claimed schedule's counters: the launching process allocates them, zeroed once.
        let claimed = LaunchImage::new(&kernel("pipeline=tma,schedule=claimed"), &p, 132, H100_L2).unwrap();
        assert!(claimed.scratch.counters > 0);
        assert_eq!(claimed.scratch_offsets, [176, 184]);
        // What only the launching process holds is refused, with why.
        let fp8 = Problem { dtype: crate::problem::Dtype::E4m3, ..p.clone() };
        let err = LaunchImage::new(&kernel("pipeline=tma"), &fp8, 132, H100_L2).unwrap_err().to_string();
        assert!(err.contains("descales"), "{err}");
        let err =
            LaunchImage::new(&kernel("pipeline=tma"), &p.clone().with_lse(true), 132, H100_L2).unwrap_err().to_string();
        assert!(err.contains("no LSE buffer"), "{err}");
    }

    #[test]
    fn params_bytes_follow_the_repr_c_layout() {
        let p = Problem::dense(
            crate::problem::Shape::new(2, 3, 5, 64),
            crate::problem::Dtype::F16,
            crate::problem::Layout::Bhsd,
        );
        let k = KernelParams {
            tile_counter: 0x66,
            split_work: 0x77,
            ..KernelParams::new(&p, [0x11, 0x22, 0x33, 0x44, 0x55], H100_L2).unwrap()
        };
        let bytes = k.to_bytes();
        assert_eq!(bytes.len(), std::mem::size_of::<KernelParams>());
        let at = |off: usize, n: usize| &bytes[off..off + n];
        assert_eq!(at(std::mem::offset_of!(KernelParams, v), 8), &0x33u64.to_le_bytes());
        assert_eq!(at(std::mem::offset_of!(KernelParams, o_strides) + 8, 8), &(5i64 * 64).to_le_bytes());
        assert_eq!(at(std::mem::offset_of!(KernelParams, sk), 4), &5i32.to_le_bytes());
        assert_eq!(at(std::mem::offset_of!(KernelParams, scale_log2), 4), &k.scale_log2.to_le_bytes());
        assert_eq!(at(std::mem::offset_of!(KernelParams, head_group), 4), &k.head_group.to_le_bytes());
        assert_eq!(at(std::mem::offset_of!(KernelParams, tile_counter), 8), &0x66u64.to_le_bytes());
        assert_eq!(at(std::mem::offset_of!(KernelParams, split_work), 8), &0x77u64.to_le_bytes());
    }

    #[test]
    fn params_encode_the_causal_offset_and_log2_scale() {
        let shape = crate::problem::Shape { b: 2, h: 4, hkv: 2, sq: 3, sk: 10, d: 64 };
        let p = Problem::dense(shape, crate::problem::Dtype::F16, crate::problem::Layout::Bshd)
            .with_causal(Causal::BottomRight);
        let k = KernelParams::new(&p, [1, 2, 3, 4, 0], H100_L2).unwrap();
        assert_eq!((k.causal, k.causal_offset), (1, 7));
        assert_eq!(k.k_strides, [10 * 2 * 64, 64, 2 * 64]);
        assert_eq!(k.scale_log2, 0.125 * std::f32::consts::LOG2_E);
        // K and V are 2560 bytes a KV head: 4096 KV heads (a power of two) fit 16 MiB, times 2
        // query heads per KV head.
        assert_eq!(k.head_group, 8192);
    }
}
