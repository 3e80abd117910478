//! The driver layer: a GPU (context + stream), loaded kernels, and launches. Above this file
//! nothing is `unsafe` and no raw device pointer is visible.

use crate::arch::Arch;
use crate::buffers::{validate_buffers, BufferSpan};
use crate::config::KernelSpec;
use crate::error::{Error, Result};
use crate::problem::{Causal, Problem, TensorName};
use crate::runtime::compile::CompiledKernel;
use crate::runtime::tma::{self, TensorMap, TensorMapGeometry};
use cudarc::driver::sys::{CUdevice_attribute, CUfunction_attribute};
use cudarc::driver::{
    CudaContext, CudaFunction, CudaStream, CudaView, CudaViewMut, DevicePtr, DevicePtrMut, DeviceRepr, LaunchConfig,
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

    /// The CUDA version the driver supports, e.g. "13.0".
    pub fn driver_version(&self) -> String {
        format!("{}.{}", self.driver_version / 1000, (self.driver_version % 1000) / 10)
    }

    /// Enqueues a kernel that keeps the stream busy for `duration` on the GPU, so that work the
    /// host enqueues meanwhile runs back to back. The kernel is compiled on first use.
    pub fn hold(&self, duration: std::time::Duration) -> Result<()> {
        let function = match self.hold.get() {
            Some(f) => f,
            None => {
                let nvrtc = crate::runtime::nvrtc::Nvrtc::get()?;
                let options = [self.arch.nvrtc_flag()];
                let compiled = nvrtc
                    .compile_cubin(&crate::kernels::HOLD, &[], crate::kernels::HOLD_KERNEL, self.arch, &options)
                    .map_err(|f| Error::Compile(Box::new(f)))?;
                let module = self
                    .ctx
                    .load_module(cudarc::nvrtc::Ptx::from_binary(compiled.cubin))
                    .map_err(|e| Error::driver("cuModuleLoadData", e))?;
                let f = module
                    .load_function(crate::kernels::HOLD_KERNEL)
                    .map_err(|e| Error::driver("cuModuleGetFunction", e))?;
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

    pub fn stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }

    pub fn context(&self) -> &Arc<CudaContext> {
        &self.ctx
    }

    /// Loads a compiled kernel and raises its dynamic shared-memory limit when it needs more
    /// than the default.
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
        Ok(LoadedKernel { function, spec: kernel.spec, smem })
    }
}

/// Kernel launch parameters; field for field the `AttnParams` struct of `kernels/common.cuh`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
struct KernelParams {
    q: u64,
    k: u64,
    v: u64,
    o: u64,
    lse: u64,
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
}

// Safety: `KernelParams` is `repr(C)`, holds only plain integers and floats, and matches the
// layout of `AttnParams` in kernels/common.cuh (pointers as u64, `long long` as i64, `int` as
// i32), so the driver may copy its bytes as the kernel's parameter.
unsafe impl DeviceRepr for KernelParams {}

/// A kernel loaded into the GPU's context, ready to launch.
pub struct LoadedKernel {
    function: CudaFunction,
    spec: KernelSpec,
    smem: usize,
}

/// The tensors of one forward pass, as device views (whole allocations or sub-slices).
pub struct DeviceTensors<'a> {
    pub q: CudaView<'a, u16>,
    pub k: CudaView<'a, u16>,
    pub v: CudaView<'a, u16>,
    pub o: CudaViewMut<'a, u16>,
    /// `[B, H, Sq]` float32, required when the problem asks for LSE.
    pub lse: Option<CudaViewMut<'a, f32>>,
}

impl LoadedKernel {
    pub fn spec(&self) -> &KernelSpec {
        &self.spec
    }

    /// Launches the kernel for `problem` on `stream`, after checking every buffer's size,
    /// alignment and overlap. The problem itself must already be validated.
    pub fn run(&self, stream: &CudaStream, problem: &Problem, tensors: DeviceTensors<'_>) -> Result<()> {
        let DeviceTensors { q, k, v, mut o, mut lse } = tensors;
        if problem.with_lse != lse.is_some() {
            return Err(Error::Unsupported {
                imp: self.spec.imp().to_string(),
                reason: "an LSE buffer must be given exactly when the problem asks for LSE".into(),
            });
        }
        let (q_ptr, _q_sync) = q.device_ptr(stream);
        let (k_ptr, _k_sync) = k.device_ptr(stream);
        let (v_ptr, _v_sync) = v.device_ptr(stream);
        let o_len = o.len();
        let (o_ptr, _o_sync) = o.device_ptr_mut(stream);
        let lse_len = lse.as_ref().map_or(0, |l| l.len());
        let (lse_ptr, _lse_sync) = match lse.as_mut() {
            Some(l) => {
                let (ptr, sync) = l.device_ptr_mut(stream);
                (ptr, Some(sync))
            }
            None => (0, None),
        };
        let elem = problem.dtype.size_bytes();
        let mut spans = vec![
            BufferSpan { tensor: TensorName::Q, addr: q_ptr, len: q.len(), elem_bytes: elem },
            BufferSpan { tensor: TensorName::K, addr: k_ptr, len: k.len(), elem_bytes: elem },
            BufferSpan { tensor: TensorName::V, addr: v_ptr, len: v.len(), elem_bytes: elem },
            BufferSpan { tensor: TensorName::O, addr: o_ptr, len: o_len, elem_bytes: elem },
        ];
        if problem.with_lse {
            spans.push(BufferSpan { tensor: TensorName::Lse, addr: lse_ptr, len: lse_len, elem_bytes: 4 });
        }
        validate_buffers(problem, &spans)?;
        if problem.is_empty() {
            return Ok(());
        }
        let grid = self.spec.grid(&problem.shape);
        if grid[1] > MAX_GRID_YZ || grid[2] > MAX_GRID_YZ || grid[0] > MAX_GRID_X {
            return Err(Error::Unsupported {
                imp: self.spec.imp().to_string(),
                reason: format!(
                    "launch grid {grid:?} exceeds CUDA's limits (x < 2^31, y and z <= 65535 heads/batches)"
                ),
            });
        }
        let params = KernelParams::new(problem, [q_ptr, k_ptr, v_ptr, o_ptr, lse_ptr]);
        // Kernels with TMA loads take tensor maps of Q, K and V after the parameters; the maps
        // hold the same (checked) addresses.
        let maps = match self.spec.tensor_map_rows() {
            Some((q_rows, kv_rows)) => Some(tensor_maps(problem, [q_ptr, k_ptr, v_ptr], q_rows, kv_rows)?),
            None => None,
        };
        let cfg = LaunchConfig {
            grid_dim: (grid[0] as u32, grid[1] as u32, grid[2] as u32),
            block_dim: (self.spec.threads(), 1, 1),
            shared_mem_bytes: self.smem as u32,
        };
        let mut launch = stream.launch_builder(&self.function);
        launch.arg(&params);
        if let Some(maps) = &maps {
            for map in maps {
                launch.arg(map);
            }
        }
        // Safety: the pointers in `params` (and the maps built from them) come from views
        // borrowed for this call, whose sizes, alignment and disjointness `validate_buffers`
        // checked against the validated problem; each map covers exactly its tensor's logical
        // extent through the problem's strides (TMA writes zeros for boxes past it and never
        // reads outside it); the sync guards (`_q_sync`..) keep stream ordering with their
        // other uses. The argument list matches the kernel's: `AttnParams`, then the three
        // `TmaMap`s when `tensor_map_rows` says the kernel takes them.
        unsafe { launch.launch(cfg) }.map_err(|e| Error::driver("cuLaunchKernel", e))?;
        Ok(())
    }
}

/// Tensor maps of Q, K and V at `ptrs` for a kernel loading `q_rows`-row Q boxes and
/// `kv_rows`-row K/V boxes.
fn tensor_maps(problem: &Problem, ptrs: [u64; 3], q_rows: u32, kv_rows: u32) -> Result<[TensorMap; 3]> {
    let bf16 = problem.dtype == crate::problem::Dtype::Bf16;
    let map = |t, addr, rows| tma::encode(&TensorMapGeometry::new(problem, t, rows)?, addr, bf16);
    Ok([
        map(TensorName::Q, ptrs[0], q_rows)?,
        map(TensorName::K, ptrs[1], kv_rows)?,
        map(TensorName::V, ptrs[2], kv_rows)?,
    ])
}

/// Everything needed to launch a planned kernel in another process (the oracle times ours
/// with PyTorch's events to cross-check our timer): the CUBIN, the launch shape, and the packed
/// parameter bytes with the tensor pointers zero, plus where those pointers go.
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
}

impl LaunchImage {
    /// The image of `kernel` for `problem` (validated, without LSE). Kernels that take tensor
    /// maps (`wgmma` with `loads=tma`) have none: a map holds the device address of the
    /// caller's tensor, which only the launching process can encode.
    pub fn new(kernel: &CompiledKernel, problem: &Problem) -> Result<Self> {
        problem.validate()?;
        if kernel.spec.tensor_map_rows().is_some() {
            return Err(Error::Unsupported {
                imp: kernel.spec.imp().to_string(),
                reason: format!(
                    "{} takes TMA tensor maps, which hold the caller's device addresses; a launch image packs \
                     only AttnParams (use loads=cp_async for cross-process timing)",
                    kernel.spec.name()
                ),
            });
        }
        if problem.with_lse {
            return Err(Error::Unsupported {
                imp: kernel.spec.imp().to_string(),
                reason: "a launch image carries no LSE buffer".into(),
            });
        }
        Ok(LaunchImage {
            kernel: kernel.spec.name(),
            cubin: kernel.cubin.clone(),
            grid: kernel.spec.grid(&problem.shape),
            block: kernel.spec.threads(),
            smem: kernel.spec.dynamic_smem_bytes(),
            params: KernelParams::new(problem, [0; 5]).to_bytes(),
            pointer_offsets: [
                (TensorName::Q, std::mem::offset_of!(KernelParams, q)),
                (TensorName::K, std::mem::offset_of!(KernelParams, k)),
                (TensorName::V, std::mem::offset_of!(KernelParams, v)),
                (TensorName::O, std::mem::offset_of!(KernelParams, o)),
            ],
        })
    }
}

/// CUDA's grid limits: x up to 2^31-1 blocks, y and z up to 65535.
const MAX_GRID_X: usize = i32::MAX as usize;
const MAX_GRID_YZ: usize = 65535;

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
        out.resize(std::mem::size_of::<Self>(), 0);
        out
    }

    /// Packs a validated problem and its buffers' addresses ([q, k, v, o, lse]).
    fn new(problem: &Problem, ptrs: [u64; 5]) -> Self {
        let s = problem.shape;
        let strides = |t| {
            let st = problem.strides(t);
            [st.batch as i64, st.head as i64, st.seq as i64]
        };
        KernelParams {
            q: ptrs[0],
            k: ptrs[1],
            v: ptrs[2],
            o: ptrs[3],
            lse: ptrs[4],
            q_strides: strides(TensorName::Q),
            k_strides: strides(TensorName::K),
            v_strides: strides(TensorName::V),
            o_strides: strides(TensorName::O),
            b: s.b as i32,
            h: s.h as i32,
            hkv: s.hkv as i32,
            sq: s.sq as i32,
            sk: s.sk as i32,
            causal: i32::from(problem.causal != Causal::None),
            causal_offset: problem.causal.offset(s.sq, s.sk).unwrap_or(0) as i32,
            scale_log2: problem.softmax_scale() * std::f32::consts::LOG2_E,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn params_layout_matches_attn_params() {
        // 5 pointers (40) + 12 i64 strides (96) + 7 i32 + 1 f32 (32) = 168 bytes, 8-aligned:
        // what `struct AttnParams` in kernels/common.cuh occupies.
        assert_eq!(std::mem::size_of::<KernelParams>(), 168);
        assert_eq!(std::mem::align_of::<KernelParams>(), 8);
    }

    #[test]
    fn tensor_map_params_match_tma_map() {
        // After `AttnParams` (168 bytes) a TMA kernel takes three `TmaMap`s: 128 bytes each,
        // `__align__(64)` in kernels/ptx_sm90.cuh; each is its own parameter, so the driver
        // places it by the kernel's parameter layout and the host value only needs its size.
        assert_eq!(std::mem::size_of::<TensorMap>(), 128);
        assert_eq!(std::mem::align_of::<TensorMap>() % 64, 0);
        let src = crate::kernels::HEADERS.iter().find(|f| f.name == "ptx_sm90.cuh").unwrap().text;
        assert!(src.contains("struct __align__(64) TmaMap {\n    u64 opaque[16];\n};"));
        let wgmma = crate::kernels::main_source(crate::config::Impl::Wgmma).text;
        assert!(wgmma.contains("const __grid_constant__ TmaMap q_map, const __grid_constant__ TmaMap k_map,"));
    }

    #[test]
    fn launch_images_refuse_kernels_that_take_tensor_maps() {
        let p = Problem::dense(
            crate::problem::Shape::new(1, 2, 130, 128),
            crate::problem::Dtype::Bf16,
            crate::problem::Layout::Bhsd,
        );
        let kernel = |overrides: &str| CompiledKernel {
            spec: KernelSpec {
                config: crate::defaults::config(crate::config::Impl::Wgmma, Arch::Sm90a, 128)
                    .with_overrides(overrides)
                    .unwrap(),
                dtype: crate::problem::Dtype::Bf16,
                head_dim: 128,
            },
            arch: Arch::Sm90a,
            cubin: Vec::new(),
            resources: Default::default(),
            log: String::new(),
            from_cache: false,
            elapsed: std::time::Duration::ZERO,
        };
        assert!(LaunchImage::new(&kernel("loads=cp_async"), &p).is_ok());
        let err = LaunchImage::new(&kernel("loads=tma"), &p).unwrap_err().to_string();
        assert!(err.contains("takes TMA tensor maps") && err.contains("only AttnParams"), "{err}");
    }

    #[test]
    fn params_bytes_follow_the_repr_c_layout() {
        let p = Problem::dense(
            crate::problem::Shape::new(2, 3, 5, 64),
            crate::problem::Dtype::F16,
            crate::problem::Layout::Bhsd,
        );
        let k = KernelParams::new(&p, [0x11, 0x22, 0x33, 0x44, 0x55]);
        let bytes = k.to_bytes();
        assert_eq!(bytes.len(), std::mem::size_of::<KernelParams>());
        let at = |off: usize, n: usize| &bytes[off..off + n];
        assert_eq!(at(std::mem::offset_of!(KernelParams, v), 8), &0x33u64.to_le_bytes());
        assert_eq!(at(std::mem::offset_of!(KernelParams, o_strides) + 8, 8), &(5i64 * 64).to_le_bytes());
        assert_eq!(at(std::mem::offset_of!(KernelParams, sk), 4), &5i32.to_le_bytes());
        assert_eq!(at(std::mem::offset_of!(KernelParams, scale_log2), 4), &k.scale_log2.to_le_bytes());
    }

    #[test]
    fn params_encode_the_causal_offset_and_log2_scale() {
        let shape = crate::problem::Shape { b: 2, h: 4, hkv: 2, sq: 3, sk: 10, d: 64 };
        let p = Problem::dense(shape, crate::problem::Dtype::F16, crate::problem::Layout::Bshd)
            .with_causal(Causal::BottomRight);
        let k = KernelParams::new(&p, [1, 2, 3, 4, 0]);
        assert_eq!((k.causal, k.causal_offset), (1, 7));
        assert_eq!(k.k_strides, [10 * 2 * 64, 64, 2 * 64]);
        assert_eq!(k.scale_log2, 0.125 * std::f32::consts::LOG2_E);
    }
}
