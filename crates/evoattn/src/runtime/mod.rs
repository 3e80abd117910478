//! The run-time layer: NVRTC (find, load, compile to CUBIN), the compiler's resource report
//! and the gate on it, the on-disk CUBIN cache, and the driver (context, module, launch).
//! All `unsafe` in the crate lives here, each block with a `# Safety` note.

pub mod cache;
pub mod compile;
pub mod cubin;
pub mod device;
pub mod dlpack;
pub mod launch;
pub mod nvml;
pub mod nvrtc;
pub mod resources;
pub mod scratch;
pub mod tma;
