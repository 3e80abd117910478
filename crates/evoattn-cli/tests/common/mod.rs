//! Helpers shared by the CLI test binaries.

/// False (after saying why) when NVRTC is missing outside CI; panics when missing under CI.
pub fn have_nvrtc() -> bool {
    match evoattn::runtime::nvrtc::Nvrtc::get() {
        Ok(_) => true,
        Err(err) if std::env::var_os("CI").is_some() => panic!("NVRTC is required under CI: {err}"),
        Err(err) => {
            println!("skipped: {err}");
            false
        }
    }
}
