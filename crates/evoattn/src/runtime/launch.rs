//! Prepared launches: everything about a launch that depends only on the problem signature and
//! the kernel (grid, parameters but the buffer and scratch addresses, TMA map geometry) built
//! once, so that a repeated call only checks the buffers, fills in their addresses and calls
//! `cuLaunchKernel`: no allocation, no synchronisation, no compile.

use crate::buffers::{validate_buffers, BufferSpan};
use crate::config::{Impl, KernelSpec};
use crate::error::{Error, Result};
use crate::kernels::wgmma::{VT_BLOCK_KEYS, VT_BLOCK_THREADS};
use crate::problem::{Problem, TensorName};
use crate::runtime::device::{DeviceTensors, Gpu, InputViews, KernelParams, LoadedKernel};
use crate::runtime::library::{scores_budget, LibraryLaunch};
use crate::runtime::scratch::{ScratchNeed, ScratchStore};
use crate::runtime::tma::{self, TensorMap, TensorMapGeometry};
use cudarc::driver::{CudaFunction, CudaStream, DevicePtr, DevicePtrMut, DeviceRepr, SyncOnDrop};
use std::ffi::c_void;

/// CUDA's grid limits: x up to 2^31-1 blocks, y and z up to 65535.
pub(crate) const MAX_GRID_X: usize = i32::MAX as usize;
pub(crate) const MAX_GRID_YZ: usize = 65535;

/// `splitkv`'s extra parameters; field for field `SplitParams` of kernels/splitkv/splitkv_combine.cuh.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
struct SplitParams {
    o_part: u64,
    lse_part: u64,
    counters: u64,
    splits: i32,
    m_blocks: i32,
}

// Safety: `SplitParams` is `repr(C)` plain integers matching `SplitParams` in
// kernels/splitkv/splitkv_combine.cuh (pointers as u64, `int` as i32), so the driver may copy its bytes.
unsafe impl DeviceRepr for SplitParams {}

/// TMA maps of the tensors a kernel moves by TMA (Q, K, V and, with O staged for TMA stores, O for
/// `wgmma`; K and V for `splitkv`), in its parameter order: the geometry is fixed by the
/// problem, and a map is re-encoded only when a call brings its tensor at another address (a
/// caller that allocates a fresh O per call re-encodes O's map alone).
struct MapCache {
    /// Each map's geometry and the index of its tensor in the (Q, K, V, O) addresses.
    geometry: Vec<(TensorMapGeometry, usize)>,
    imp: Impl,
    /// The address each map was encoded for; `None` before the first encode or after a failed one.
    encoded_for: [Option<u64>; 4],
    maps: [TensorMap; 4],
}

impl MapCache {
    /// V's map may be over a transposed copy, whose address the launch passes in V's place.
    fn new(problem: &Problem, spec: &KernelSpec) -> Result<Self> {
        const ORDER: [TensorName; 4] = [TensorName::Q, TensorName::K, TensorName::V, TensorName::O];
        let geometry = tma::kernel_maps(problem, spec)?
            .into_iter()
            .map(|(tensor, g)| (g, ORDER.iter().position(|&t| t == tensor).expect("maps are over Q, K, V or O")))
            .collect();
        let empty = TensorMap(cudarc::driver::sys::CUtensorMap { opaque: [0; 16] });
        Ok(MapCache { geometry, imp: spec.imp(), encoded_for: [None; 4], maps: [empty; 4] })
    }

    /// The maps over tensors at `addrs` (Q, K, V, O), as many as the kernel takes.
    fn maps_for(&mut self, addrs: [u64; 4]) -> Result<&mut [TensorMap]> {
        for ((map, encoded_for), (geometry, tensor)) in
            self.maps.iter_mut().zip(&mut self.encoded_for).zip(&self.geometry)
        {
            let addr = addrs[*tensor];
            if *encoded_for != Some(addr) {
                // Forget the old map first, so a failed encode never leaves a stale one marked valid.
                *encoded_for = None;
                *map = tma::encode(geometry, addr, self.imp)?;
                *encoded_for = Some(addr);
            }
        }
        Ok(&mut self.maps[..self.geometry.len()])
    }
}

/// One problem signature's launch of one kernel, ready to repeat. It holds no device memory:
/// the scratch some kernels need comes from the launching stream's arena ([`ScratchStore`]),
/// so one prepared launch may run on several streams at once.
pub struct PreparedLaunch {
    function: CudaFunction,
    spec: KernelSpec,
    problem: Problem,
    grid: (u32, u32, u32),
    block: u32,
    smem: u32,
    params: KernelParams,
    /// `splitkv`'s parameters beside `AttnParams` (scratch addresses filled in per launch) and
    /// where its LSE partials start in the floats, in words.
    split: Option<(SplitParams, usize)>,
    need: ScratchNeed,
    maps: Option<MapCache>,
    /// `splitkv`'s merge kernel (`combine=kernel`) and its grid: one block per tile.
    combine: Option<(CudaFunction, (u32, u32, u32))>,
    /// An FP8 kernel's descales argument (set per launch), after `AttnParams`.
    descale: u64,
    /// The V transpose that runs before an E4M3 `wgmma` kernel.
    transpose: Option<Transpose>,
}

/// The V transpose kernel of an E4M3 `wgmma` launch (kernels/wgmma/wgmma_vt.cuh): it writes V
/// transposed (or, given transposed, permuted) into the launch's scratch floats, from word
/// `offset` on, for the attention kernel's V tensor map.
struct Transpose {
    function: CudaFunction,
    grid: (u32, u32, u32),
    offset: usize,
    /// Its arguments beside `AttnParams`: the transposed V's address (per launch), its padded
    /// key count, and for a V given transposed the bytes between its head-dim rows.
    vt: u64,
    sk_pad: i32,
    v_row: Option<i64>,
}

/// The tensors a launch reads and writes, in [`LaunchBuffers`] order.
const BUFFERS: [TensorName; 6] =
    [TensorName::Q, TensorName::K, TensorName::V, TensorName::O, TensorName::Lse, TensorName::Descale];

/// Device addresses and lengths (in elements) of one launch's tensors: Q, K, V, O, LSE and the
/// descales (address 0 and length 0 for LSE when the problem asks for none, and for the
/// descales of a 16-bit problem).
#[derive(Clone, Copy, Debug)]
pub struct LaunchBuffers {
    pub addrs: [u64; 6],
    pub lens: [usize; 6],
}

impl PreparedLaunch {
    /// Prepares `kernel` for a validated `problem`; `splitkv` gets the split count
    /// `plan::splits` chooses on this GPU. Allocates nothing on the device.
    pub fn new(gpu: &Gpu, kernel: &LoadedKernel, problem: &Problem) -> Result<Self> {
        let spec = *kernel.spec();
        let unsupported = |reason: String| Error::Unsupported { imp: spec.imp().to_string(), reason };
        if spec.dtype != problem.dtype {
            return Err(unsupported(format!(
                "{} takes {} inputs, the problem's are {}",
                spec.name(),
                spec.dtype,
                problem.dtype
            )));
        }
        let needs = spec.launch_needs(problem, gpu.sm_count(), kernel.resident_per_sm()).map_err(unsupported)?;
        let splits = needs.splits;
        let grid = spec.grid(&problem.shape, splits, gpu.sm_count());
        if grid[1] > MAX_GRID_YZ || grid[2] > MAX_GRID_YZ || grid[0] > MAX_GRID_X {
            return Err(unsupported(format!(
                "launch grid {grid:?} exceeds CUDA's limits (x < 2^31, y and z <= 65535 heads/batches)"
            )));
        }
        let empty = problem.is_empty();
        // An empty problem launches nothing that touches scratch.
        let (need, split) = match needs.merge {
            _ if empty => (ScratchNeed::default(), None),
            Some((m_blocks, lse_offset)) => {
                let params = SplitParams {
                    splits: i32::try_from(splits).map_err(|_| unsupported(format!("{splits} splits")))?,
                    m_blocks: i32::try_from(m_blocks).map_err(|_| unsupported(format!("{m_blocks} row tiles")))?,
                    ..SplitParams::default()
                };
                (needs.scratch, Some((params, lse_offset)))
            }
            None => (needs.scratch, None),
        };
        // The transposed V goes after the family's own scratch floats, 16-byte aligned.
        let (need, transpose) = match kernel.transpose_function() {
            Some(function) if !empty => {
                let s = problem.shape;
                let sk_pad = tma::transposed_v_keys(s.sk);
                let bytes = s.b * s.hkv * s.d * sk_pad;
                let offset = need.floats.next_multiple_of(4);
                let too_large = || unsupported(format!("a transposed V of {} keys does not fit the scratch", s.sk));
                let floats = offset.checked_add(bytes / 4).ok_or_else(too_large)?;
                let transpose = Transpose {
                    function: function.clone(),
                    grid: (sk_pad.div_ceil(VT_BLOCK_KEYS) as u32, s.hkv as u32, s.b as u32),
                    offset,
                    vt: 0,
                    sk_pad: i32::try_from(sk_pad).map_err(|_| too_large())?,
                    // E4M3 strides are bytes; `validate` bounded them by 2^31.
                    v_row: problem.v_keys_contiguous().then_some(problem.strides(TensorName::V).dim as i64),
                };
                (ScratchNeed { floats, ..need }, Some(transpose))
            }
            _ => (need, None),
        };
        let maps = match spec.tensor_map_rows() {
            Some(_) if !empty => Some(MapCache::new(problem, &spec)?),
            _ => None,
        };
        let combine = kernel
            .combine_function()
            .map(|f| (f.clone(), (grid[0] as u32 / splits as u32, grid[1] as u32, grid[2] as u32)));
        Ok(PreparedLaunch {
            function: kernel.function().clone(),
            spec,
            problem: problem.clone(),
            grid: (grid[0] as u32, grid[1] as u32, grid[2] as u32),
            block: spec.threads(),
            smem: kernel.smem() as u32,
            params: KernelParams::new(problem, [0; 5], gpu.l2_bytes())?,
            split,
            need,
            maps,
            combine,
            descale: 0,
            transpose,
        })
    }

    pub fn spec(&self) -> &KernelSpec {
        &self.spec
    }

    /// Launches on `stream` after checking every buffer's size, alignment and overlap against
    /// the prepared problem; scratch comes from `stream`'s arena in `scratch`.
    pub fn run(
        &mut self,
        gpu: &Gpu,
        scratch: &mut ScratchStore,
        stream: &CudaStream,
        tensors: DeviceTensors<'_>,
    ) -> Result<()> {
        with_buffers(tensors, stream, |buffers, has_lse| self.run_buffers(gpu, scratch, stream, buffers, has_lse))
    }

    /// As [`PreparedLaunch::run`], on buffers given by address (an [`ExternalTensors`]'s, whose
    /// constructor's contract makes them valid), `has_lse` saying whether an LSE buffer came.
    ///
    /// [`ExternalTensors`]: crate::runtime::device::ExternalTensors
    pub(crate) fn run_buffers(
        &mut self,
        gpu: &Gpu,
        scratch: &mut ScratchStore,
        stream: &CudaStream,
        buffers: LaunchBuffers,
        has_lse: bool,
    ) -> Result<()> {
        let problem = &self.problem;
        check_buffers(problem, self.spec.imp(), &buffers, has_lse)?;
        let fp8 = problem.dtype.is_fp8();
        if problem.is_empty() {
            return Ok(());
        }
        stream.context().bind_to_thread().map_err(|e| Error::driver("cuCtxSetCurrent", e))?;
        let lease = scratch.lease(gpu, stream, self.need)?;
        let [q_ptr, k_ptr, v_ptr, o_ptr, lse_ptr, descale_ptr] = buffers.addrs;
        let params = &mut self.params;
        (params.q, params.k, params.v, params.o, params.lse) = (q_ptr, k_ptr, v_ptr, o_ptr, lse_ptr);
        // The kernel's argument list: `AttnParams`, then `SplitParams` (splitkv), then the
        // `TmaMap`s (TMA loads and stores); argument pointers on the stack, no heap.
        let mut args: [*mut c_void; 6] = [std::ptr::null_mut(); 6];
        let mut n_args = 1;
        if let Some((split, lse_offset)) = self.split.as_mut() {
            split.counters = lease.ptrs.counters;
            split.o_part = lease.ptrs.floats;
            split.lse_part = lease.ptrs.floats + 4 * *lse_offset as u64;
            args[1] = split as *mut SplitParams as *mut c_void;
            n_args = 2;
        } else {
            params.tile_counter = lease.ptrs.counters;
            params.split_work = lease.ptrs.floats;
        }
        args[0] = params as *mut KernelParams as *mut c_void;
        if fp8 {
            self.descale = descale_ptr;
            args[n_args] = &mut self.descale as *mut u64 as *mut c_void;
            n_args += 1;
        }
        // E4M3 `wgmma`: V's tensor map is over the transposed V in the scratch, or over the
        // caller's V where it is given transposed.
        let v_map_ptr = match self.transpose.as_mut() {
            Some(t) => {
                t.vt = lease.ptrs.floats + 4 * t.offset as u64;
                t.vt
            }
            None => v_ptr,
        };
        let launched = self.launch_all(stream, &mut args, n_args, [q_ptr, k_ptr, v_map_ptr, o_ptr]);
        // A graph-owned lease is freed in the graph even when the launch failed to enqueue.
        let released = scratch.release(stream, lease);
        launched.and(released)
    }

    fn launch_all(
        &mut self,
        stream: &CudaStream,
        args: &mut [*mut c_void; 6],
        mut n_args: usize,
        addrs: [u64; 4],
    ) -> Result<()> {
        if let Some(cache) = self.maps.as_mut() {
            for map in cache.maps_for(addrs)?.iter_mut() {
                args[n_args] = map as *mut TensorMap as *mut c_void;
                n_args += 1;
            }
        }
        if let Some(t) = self.transpose.as_mut() {
            let v_row = t.v_row.as_mut().map(|r| r as *mut i64 as *mut c_void);
            let mut vt_args: [*mut c_void; 4] = [
                args[0],
                &mut t.vt as *mut u64 as *mut c_void,
                &mut t.sk_pad as *mut i32 as *mut c_void,
                v_row.unwrap_or(std::ptr::null_mut()),
            ];
            let n = if v_row.is_some() { 4 } else { 3 };
            // Safety: the transpose kernel of the same module takes `AttnParams` (the first
            // argument above, still live: it reads V through its pointer and strides, which
            // `validate_buffers` checked), the transposed V's address, its padded key count and,
            // compiled for a V given transposed (`vt_given`, whose launches set `v_row`), the
            // bytes between V's head-dim rows: the first `n` arguments; it writes B·Hkv·D·sk_pad
            // bytes from that address, which lies inside this launch's scratch (`need` counts
            // them past the family's own words), and has no dynamic shared memory. The attention
            // kernel runs after it on the same stream.
            unsafe { launch(&t.function, t.grid, VT_BLOCK_THREADS, 0, stream, &mut vt_args[..n]) }?;
        }
        // Safety: the function was loaded into this stream's context (bound to this thread by
        // `run_buffers`) with the dynamic shared memory limit `smem` needs (`Gpu::load`); the
        // argument list matches the kernel's parameters (`AttnParams`, then `SplitParams` for
        // splitkv, the descales' address for an FP8 kernel (the only kernels E4M3 problems
        // validate for), then a `TmaMap` per tensor `tensor_map_rows` names), each pointer to a
        // live `repr(C)` value owned by `self`. The tensor addresses come from buffers whose sizes,
        // alignment and disjointness `validate_buffers` checked against the validated problem
        // (views borrowed for the call, or external buffers under `ExternalTensors::new`'s
        // contract); the maps cover exactly their tensors' extents (TMA never reads or writes
        // outside them). The scratch addresses are this stream's arena (or graph-owned memory)
        // of at least `need` words, counters zero at the start (`ScratchStore`): launches on
        // one stream are ordered, so no other launch uses them meanwhile, and for `splitkv` it
        // holds every split's rows of every tile (sized from the same problem and split count
        // as the grid).
        unsafe { launch(&self.function, self.grid, self.block, self.smem, stream, &mut args[..n_args]) }?;
        if let Some((function, grid)) = &self.combine {
            // Safety: the merge kernel of the same module takes the same `AttnParams` and
            // `SplitParams` (the first two arguments above, still live), has no dynamic shared
            // memory, and runs after the split grid on the same stream, so it reads complete
            // partials; its grid has one block per tile of the scratch.
            unsafe { launch(function, *grid, self.block, 0, stream, &mut args[..2]) }?;
        }
        Ok(())
    }
}

/// A prepared launch of any family: one kernel (with its transpose or merge), or the `cublas`
/// path's GEMMs around its row kernel.
pub enum Launch {
    // Boxed, both: a prepared launch holds its parameters and tensor maps inline (~1.3 KB).
    Kernel(Box<PreparedLaunch>),
    Library(Box<LibraryLaunch>),
}

impl Launch {
    /// Prepares the loaded `kernel` for a validated `problem`: the library paths with S given
    /// its share of the free device memory ([`scores_budget`]), every other family as
    /// [`PreparedLaunch::new`] does.
    pub fn new(gpu: &Gpu, kernel: &LoadedKernel, problem: &Problem) -> Result<Self> {
        if kernel.spec().imp().is_library() {
            Ok(Launch::Library(Box::new(LibraryLaunch::new(gpu, kernel, problem, scores_budget(gpu)?)?)))
        } else {
            Ok(Launch::Kernel(Box::new(PreparedLaunch::new(gpu, kernel, problem)?)))
        }
    }

    pub fn spec(&self) -> &KernelSpec {
        match self {
            Launch::Kernel(l) => l.spec(),
            Launch::Library(l) => l.spec(),
        }
    }

    /// Launches on `stream` after checking every buffer against the prepared problem.
    pub fn run(
        &mut self,
        gpu: &Gpu,
        scratch: &mut ScratchStore,
        stream: &CudaStream,
        tensors: DeviceTensors<'_>,
    ) -> Result<()> {
        match self {
            Launch::Kernel(l) => l.run(gpu, scratch, stream, tensors),
            Launch::Library(l) => l.run(gpu, scratch, stream, tensors),
        }
    }

    /// As [`Launch::run`], on an [`ExternalTensors`]' buffers (whose constructor's contract
    /// makes them valid).
    ///
    /// [`ExternalTensors`]: crate::runtime::device::ExternalTensors
    pub(crate) fn run_buffers(
        &mut self,
        gpu: &Gpu,
        scratch: &mut ScratchStore,
        stream: &CudaStream,
        buffers: LaunchBuffers,
        has_lse: bool,
    ) -> Result<()> {
        match self {
            Launch::Kernel(l) => l.run_buffers(gpu, scratch, stream, buffers, has_lse),
            // Safety: an `ExternalTensors`' buffers are device memory of their lengths, live
            // until the stream has run the launch (its constructor's contract).
            Launch::Library(l) => unsafe { l.run_buffers(gpu, scratch, stream, buffers, has_lse) },
        }
    }
}

/// Calls `f` with the addresses and lengths of `tensors`' views on `stream` and whether an LSE
/// buffer came, while the views' stream-ordering guards live (until `f` has enqueued its work).
pub(crate) fn with_buffers<R>(
    tensors: DeviceTensors<'_>,
    stream: &CudaStream,
    f: impl FnOnce(LaunchBuffers, bool) -> Result<R>,
) -> Result<R> {
    let DeviceTensors { inputs, mut o, mut lse } = tensors;
    // The sync guards (`_syncs`) live until the launch is enqueued, keeping stream ordering
    // with the buffers' other uses.
    let (addrs, lens, _syncs) = match &inputs {
        InputViews::Sixteen { q, k, v } => {
            let [(q_ptr, q_sync), (k_ptr, k_sync), (v_ptr, v_sync)] = [q, k, v].map(|x| x.device_ptr(stream));
            ([q_ptr, k_ptr, v_ptr, 0], [q.len(), k.len(), v.len(), 0], [q_sync, k_sync, v_sync, SyncOnDrop::Sync(None)])
        }
        InputViews::Fp8 { q, k, v, descale } => {
            let [(q_ptr, q_sync), (k_ptr, k_sync), (v_ptr, v_sync)] = [q, k, v].map(|x| x.device_ptr(stream));
            let (d_ptr, d_sync) = descale.device_ptr(stream);
            ([q_ptr, k_ptr, v_ptr, d_ptr], [q.len(), k.len(), v.len(), descale.len()], [q_sync, k_sync, v_sync, d_sync])
        }
    };
    let o_len = o.len();
    let (o_ptr, _o_sync) = o.device_ptr_mut(stream);
    let lse_len = lse.as_ref().map_or(0, |l| l.len());
    let has_lse = lse.is_some();
    let (lse_ptr, _lse_sync) = match lse.as_mut() {
        Some(l) => {
            let (ptr, sync) = l.device_ptr_mut(stream);
            (ptr, Some(sync))
        }
        None => (0, None),
    };
    let buffers = LaunchBuffers {
        addrs: [addrs[0], addrs[1], addrs[2], o_ptr, lse_ptr, addrs[3]],
        lens: [lens[0], lens[1], lens[2], o_len, lse_len, lens[3]],
    };
    f(buffers, has_lse)
}

/// Checks a launch's buffers against `problem` (for family `imp`'s errors): an LSE buffer
/// exactly when it asks for LSE, descales only with E4M3, and every buffer's size, alignment and
/// overlap.
pub(crate) fn check_buffers(problem: &Problem, imp: Impl, buffers: &LaunchBuffers, has_lse: bool) -> Result<()> {
    if problem.with_lse != has_lse {
        return Err(Error::Unsupported {
            imp: imp.to_string(),
            reason: "an LSE buffer must be given exactly when the problem asks for LSE".into(),
        });
    }
    let fp8 = problem.dtype.is_fp8();
    if !fp8 && buffers.lens[5] > 0 {
        return Err(Error::Unsupported {
            imp: imp.to_string(),
            reason: format!("descales come with E4M3 inputs only, and this problem's are {}", problem.dtype),
        });
    }
    let spans: Vec<BufferSpan> = BUFFERS
        .iter()
        .enumerate()
        .filter(|&(_, &t)| (t != TensorName::Lse || problem.with_lse) && (t != TensorName::Descale || fp8))
        .map(|(i, &tensor)| BufferSpan {
            tensor,
            addr: buffers.addrs[i],
            len: buffers.lens[i],
            elem_bytes: problem.elem_bytes(tensor),
        })
        .collect();
    Ok(validate_buffers(problem, &spans)?)
}

/// `cuLaunchKernel` of `function` with `block` threads per block and `smem` bytes of dynamic
/// shared memory on `stream`, with the parameters `args` points at.
///
/// # Safety
///
/// `function` must belong to `stream`'s context (bound to this thread) and allow `smem`;
/// `args` must point at live values whose types and order match the kernel's parameters, and
/// every device address in them must be valid for what the kernel reads and writes over the
/// whole grid.
pub(crate) unsafe fn launch(
    function: &CudaFunction,
    grid: (u32, u32, u32),
    block: u32,
    smem: u32,
    stream: &CudaStream,
    args: &mut [*mut c_void],
) -> Result<()> {
    // Safety: the caller's contract above is the driver's for cuLaunchKernel.
    unsafe {
        cudarc::driver::result::launch_kernel(
            function.cu_function(),
            grid,
            (block, 1, 1),
            smem,
            stream.cu_stream(),
            args,
        )
    }
    .map_err(|e| Error::driver("cuLaunchKernel", e))
}
