//! The lab: where kernels run and are measured. Backends (the GPU through the library, or the
//! CPU mock for tests), inputs and presets, correctness against float64 (written once), the
//! oracle process that runs the peers, the interleaved measurement, Nsight Compute.

pub mod backend;
pub mod ceilings;
pub mod clock;
pub mod correctness;
pub mod gpu;
pub mod inputs;
pub mod kernel_args;
pub mod kernel_name;
pub mod measure;
pub mod mock;
pub mod ncu;
pub mod open;
pub mod oracle;
pub mod pathology;
pub mod presets;
pub mod roofline;
pub mod scratch;
pub mod tensors_io;
pub mod variant;
