//! Which backend a command gets: the GPU, or the mock (`EVOATTN_BACKEND=mock`, tests only).

use super::backend::Backend;

/// The environment variable that selects the mock backend (tests only).
pub const BACKEND_ENV: &str = "EVOATTN_BACKEND";

/// Opens the backend the environment asks for: the GPU unless `EVOATTN_BACKEND=mock`.
pub fn open() -> anyhow::Result<Box<dyn Backend>> {
    open_on(0)
}

/// GPUs the backend can open: the driver's count, or one for the mock.
pub fn device_count() -> anyhow::Result<usize> {
    match std::env::var(BACKEND_ENV).as_deref() {
        Ok("mock") => Ok(1),
        _ => Ok(evoattn::runtime::device::Gpu::count()?),
    }
}

/// As [`open`], on GPU `ordinal` (the mock has one "GPU" per ordinal, all alike).
pub fn open_on(ordinal: usize) -> anyhow::Result<Box<dyn Backend>> {
    match std::env::var(BACKEND_ENV).as_deref() {
        Ok("mock") => Ok(Box::new(crate::lab::mock::MockBackend::from_env()?)),
        Ok("gpu") | Err(_) => Ok(Box::new(crate::lab::gpu::GpuBackend::new(ordinal)?)),
        Ok(other) => anyhow::bail!("{BACKEND_ENV}={other}: expected 'gpu' or 'mock'"),
    }
}
