//! Shared by the NVRTC integration tests.

use evoattn::runtime::nvrtc::Nvrtc;

/// The NVRTC to test with, or `None` (after saying why) when the test should be skipped.
/// Under CI (`CI` set) a missing NVRTC is a failure, never a skip.
pub fn nvrtc_or_skip() -> Option<&'static Nvrtc> {
    match Nvrtc::get() {
        Ok(nvrtc) => Some(nvrtc),
        Err(err) if std::env::var_os("CI").is_some() => panic!("NVRTC is required under CI: {err}"),
        Err(err) => {
            println!("skipped: {err}");
            None
        }
    }
}
