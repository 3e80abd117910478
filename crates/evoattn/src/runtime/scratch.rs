//! Device scratch that some kernels need besides the caller's tensors: counters that must be
//! zero when a launch starts (the persistent `wgmma` schedulers', `splitkv`'s per-tile
//! arrivals; each kernel leaves the ones it used at zero again) and float partials that a
//! launch writes before it reads them (`splitkv`'s splits, the split tail's pieces).
//!
//! Scratch belongs to a stream, not to a problem: launches on one stream run one after another,
//! so they can share one arena whatever their signatures, and launches on two streams never
//! share one, so the same problem may run on several streams (or threads) at once. A launch
//! captured into a CUDA graph gets scratch of its own, allocated and freed by nodes of that
//! graph, so a graph replays safely on any stream beside eager calls and other graphs.

use crate::error::{Error, Result};
use crate::runtime::device::Gpu;
use cudarc::driver::sys::{CUstream, CUstreamCaptureStatus};
use cudarc::driver::{CudaSlice, CudaStream, DevicePtr};
use std::sync::Arc;

/// What one launch needs, in 4-byte words.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ScratchNeed {
    /// `i32` counters, zero when the launch starts and when it ends.
    pub counters: usize,
    /// `f32` words the launch writes before it reads them.
    pub floats: usize,
}

impl ScratchNeed {
    pub fn is_none(&self) -> bool {
        self.counters == 0 && self.floats == 0
    }

    fn covers(&self, other: ScratchNeed) -> bool {
        self.counters >= other.counters && self.floats >= other.floats
    }

    /// Room for `other` and this, grown by half again so that a stream whose problems grow
    /// step by step (a decoding loop's keys) reallocates a logarithmic number of times.
    fn grown_for(&self, other: ScratchNeed) -> ScratchNeed {
        let grow = |have: usize, want: usize| if want <= have { have } else { want.max(have + have / 2) };
        ScratchNeed { counters: grow(self.counters, other.counters), floats: grow(self.floats, other.floats) }
    }
}

/// Device addresses of a launch's scratch (0 where it needs none).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ScratchPtrs {
    pub counters: u64,
    pub floats: u64,
}

/// Scratch handed to one launch: a stream's arena, or memory the capturing graph owns, which
/// [`ScratchStore::release`] frees in the graph after the launch.
#[must_use = "graph-owned scratch must be released after the launch"]
pub struct Lease {
    pub ptrs: ScratchPtrs,
    graph_owned: Option<u64>,
}

/// One stream's arena.
struct Arena {
    stream: StreamKey,
    size: ScratchNeed,
    last_use: u64,
    _counters: CudaSlice<i32>,
    _floats: CudaSlice<f32>,
    ptrs: ScratchPtrs,
}

/// A stream as scratch tells streams apart: its handle, and for CUDA's per-thread default
/// stream (one handle that means a different stream in every thread) the thread too.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct StreamKey {
    handle: usize,
    thread: Option<std::thread::ThreadId>,
}

/// `CU_STREAM_PER_THREAD`.
const PER_THREAD_STREAM: usize = 0x2;

impl StreamKey {
    fn of(stream: CUstream) -> Self {
        let handle = stream as usize;
        StreamKey { handle, thread: (handle == PER_THREAD_STREAM).then(|| std::thread::current().id()) }
    }
}

/// Streams whose arenas are kept; past this the least recently used is freed (after the GPU
/// finishes everything in flight, since its stream may still use it).
pub const MAX_STREAM_ARENAS: usize = 16;

/// Every stream's arena on one GPU.
pub struct ScratchStore {
    ctx: Arc<cudarc::driver::CudaContext>,
    arenas: Vec<Arena>,
    tick: u64,
}

impl ScratchStore {
    pub fn new(gpu: &Gpu) -> Self {
        ScratchStore { ctx: gpu.context().clone(), arenas: Vec::new(), tick: 0 }
    }

    /// Scratch covering `need` for a launch on `stream`. Allocates (and waits for the zeroing)
    /// only when the stream has no arena yet or a smaller one; a stream capturing a graph gets
    /// graph-owned memory instead, which the caller must [`release`](Self::release) after the
    /// launch.
    pub fn lease(&mut self, gpu: &Gpu, stream: &CudaStream, need: ScratchNeed) -> Result<Lease> {
        if need.is_none() {
            return Ok(Lease { ptrs: ScratchPtrs::default(), graph_owned: None });
        }
        if is_capturing(stream)? {
            return graph_owned(stream, need);
        }
        self.tick += 1;
        let key = StreamKey::of(stream.cu_stream());
        if let Some(i) = self.arenas.iter().position(|a| a.stream == key) {
            if self.arenas[i].size.covers(need) {
                self.arenas[i].last_use = self.tick;
                return Ok(Lease { ptrs: self.arenas[i].ptrs, graph_owned: None });
            }
            // The stream's launches so far may still read the smaller arena.
            stream.synchronize().map_err(|e| Error::driver("cuStreamSynchronize", e))?;
            let old = self.arenas.swap_remove(i);
            let arena = Arena::new(gpu, key, old.size.grown_for(need), self.tick)?;
            self.arenas.push(arena);
        } else {
            if self.arenas.len() >= MAX_STREAM_ARENAS {
                // Its stream may have work in flight, and may be gone: wait for the whole GPU.
                self.ctx.synchronize().map_err(|e| Error::driver("cuCtxSynchronize", e))?;
                let lru = (0..self.arenas.len()).min_by_key(|&i| self.arenas[i].last_use).expect("arenas is full");
                self.arenas.swap_remove(lru);
            }
            self.arenas.push(Arena::new(gpu, key, need, self.tick)?);
        }
        Ok(Lease { ptrs: self.arenas.last().expect("just pushed").ptrs, graph_owned: None })
    }

    /// Ends a lease after its launch: graph-owned memory is freed by a node of the graph.
    pub fn release(&self, stream: &CudaStream, lease: Lease) -> Result<()> {
        if let Some(ptr) = lease.graph_owned {
            // Safety: `ptr` came from `cuMemAllocAsync` on this capturing stream (`graph_owned`),
            // and every use of it (the launch) was enqueued on the same stream before this free.
            unsafe { cudarc::driver::result::free_async(ptr, stream.cu_stream()) }
                .map_err(|e| Error::driver("cuMemFreeAsync", e))?;
        }
        Ok(())
    }

    /// Streams holding an arena now.
    pub fn streams(&self) -> usize {
        self.arenas.len()
    }
}

impl Drop for ScratchStore {
    fn drop(&mut self) {
        if !self.arenas.is_empty() {
            // Kernels on callers' streams may still use the arenas; their memory is freed only
            // after them. An error here has nowhere to go and frees nothing earlier.
            let _ = self.ctx.synchronize();
        }
    }
}

impl Arena {
    fn new(gpu: &Gpu, stream: StreamKey, size: ScratchNeed, tick: u64) -> Result<Self> {
        let own = gpu.stream();
        let alloc_err = |e| Error::driver("cuMemAlloc (scratch)", e);
        let counters = own.alloc_zeros::<i32>(size.counters.max(1)).map_err(alloc_err)?;
        let floats = own.alloc_zeros::<f32>(size.floats.max(1)).map_err(alloc_err)?;
        // Zero before any launch on another stream reads the counters.
        own.synchronize().map_err(|e| Error::driver("cuStreamSynchronize", e))?;
        let ptrs = ScratchPtrs { counters: counters.device_ptr(own).0, floats: floats.device_ptr(own).0 };
        Ok(Arena { stream, size, last_use: tick, _counters: counters, _floats: floats, ptrs })
    }
}

/// Whether `stream` is capturing a CUDA graph now.
pub fn is_capturing(stream: &CudaStream) -> Result<bool> {
    let status = stream.capture_status().map_err(|e| Error::driver("cuStreamIsCapturing", e))?;
    Ok(status != CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE)
}

/// Bytes of the counters in a graph-owned block, rounded up so the floats start 256-aligned.
fn counter_bytes(need: ScratchNeed) -> usize {
    (need.counters * 4).next_multiple_of(256)
}

/// Scratch allocated inside the graph a stream is capturing, counters zeroed by a memset node.
fn graph_owned(stream: &CudaStream, need: ScratchNeed) -> Result<Lease> {
    let counter_bytes = counter_bytes(need);
    let bytes = counter_bytes + need.floats * 4;
    let handle = stream.cu_stream();
    // Safety: `handle` is a live stream of the current context (the caller's, bound by the
    // launch path); the block is used only on this stream (memset, launch, free below and in
    // `release`), and its counters are zeroed before any read.
    let ptr = unsafe { cudarc::driver::result::malloc_async(handle, bytes) }
        .map_err(|e| Error::driver("cuMemAllocAsync (scratch in a graph)", e))?;
    if need.counters > 0 {
        // Safety: `ptr` holds `bytes >= counter_bytes` bytes, allocated on this stream above.
        unsafe { cudarc::driver::result::memset_d8_async(ptr, 0, counter_bytes, handle) }
            .map_err(|e| Error::driver("cuMemsetD8Async (scratch in a graph)", e))?;
    }
    let ptrs = ScratchPtrs {
        counters: if need.counters > 0 { ptr } else { 0 },
        floats: if need.floats > 0 { ptr + counter_bytes as u64 } else { 0 },
    };
    Ok(Lease { ptrs, graph_owned: Some(ptr) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_arena_grows_by_half_again_so_growing_problems_reallocate_rarely() {
        let have = ScratchNeed { counters: 100, floats: 1000 };
        assert!(have.covers(ScratchNeed { counters: 100, floats: 10 }));
        assert!(!have.covers(ScratchNeed { counters: 101, floats: 0 }));
        // One word more than it has: half again. Far more: exactly what is asked.
        assert_eq!(
            have.grown_for(ScratchNeed { counters: 101, floats: 5000 }),
            ScratchNeed { counters: 150, floats: 5000 }
        );
        // A decoding loop whose scratch grows by one word a step reallocates O(log n) times.
        let (mut size, mut reallocations) = (ScratchNeed { counters: 1, floats: 1 }, 0);
        for step in 1..100_000 {
            let need = ScratchNeed { counters: 1, floats: step };
            if !size.covers(need) {
                size = size.grown_for(need);
                reallocations += 1;
            }
        }
        assert!(reallocations <= 30, "{reallocations}");
    }

    #[test]
    fn graph_owned_floats_start_after_aligned_counters() {
        assert_eq!(counter_bytes(ScratchNeed { counters: 2, floats: 10 }), 256);
        assert_eq!(counter_bytes(ScratchNeed { counters: 64, floats: 10 }), 256);
        assert_eq!(counter_bytes(ScratchNeed { counters: 65, floats: 10 }), 512);
        assert_eq!(counter_bytes(ScratchNeed { counters: 0, floats: 10 }), 0);
    }

    #[test]
    fn the_per_thread_stream_is_a_different_stream_in_every_thread() {
        let here = StreamKey::of(PER_THREAD_STREAM as CUstream);
        let there = std::thread::spawn(|| StreamKey::of(PER_THREAD_STREAM as CUstream)).join().unwrap();
        assert_ne!(here, there);
        let a = StreamKey::of(0x1000 as CUstream);
        let b = std::thread::spawn(|| StreamKey::of(0x1000 as CUstream)).join().unwrap();
        assert_eq!(a, b);
    }
}
