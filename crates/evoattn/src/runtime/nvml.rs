//! The SM clock through NVML (the driver's management library, loaded at run time as the driver
//! is): what the lab reads while each block of timed samples runs, so that two timers' medians
//! taken while the clock moved (a GPU at its power cap) can be compared at equal clocks.

use libloading::Library;
use std::ffi::{c_char, c_int, c_uint, c_void, CString};

/// NVML's `nvmlClockType_t` for the SM clock.
const NVML_CLOCK_SM: c_uint = 1;
/// NVML's success status.
const NVML_SUCCESS: c_int = 0;

type DeviceHandle = *mut c_void;
type GetClockInfo = unsafe extern "C" fn(DeviceHandle, c_uint, *mut c_uint) -> c_int;

/// A reader of one GPU's current SM clock.
pub struct SmClock {
    /// Keeps the library (and so `get_clock`) loaded.
    _lib: Library,
    device: DeviceHandle,
    get_clock: GetClockInfo,
}

// Safety: NVML's API is thread-safe (its reference manual: "all NVML functions are
// thread-safe"); the handle is an opaque token NVML owns for the process's lifetime and the
// struct holds nothing else that is tied to a thread.
unsafe impl Send for SmClock {}
// Safety: as for `Send`; `mhz` only passes the handle to NVML.
unsafe impl Sync for SmClock {}

impl SmClock {
    /// Opens the GPU at `pci_bus_id` (as the CUDA driver names it, e.g. "0000:19:00.0"): an error
    /// sentence when NVML is missing or does not know the GPU.
    pub fn open(pci_bus_id: &str) -> Result<Self, String> {
        // Safety: loading the driver's own NVML library runs its initialisers, which have no
        // preconditions.
        let lib = unsafe { Library::new("libnvidia-ml.so.1") }.map_err(|e| format!("NVML does not load: {e}"))?;
        let bus = CString::new(pci_bus_id).map_err(|_| format!("PCI bus id {pci_bus_id:?} holds a NUL"))?;
        // Safety: each symbol is looked up with the signature NVML's header (nvml.h) declares.
        unsafe {
            let init = *lib
                .get::<unsafe extern "C" fn() -> c_int>(b"nvmlInit_v2\0")
                .map_err(|e| format!("NVML lacks nvmlInit_v2: {e}"))?;
            let by_bus = *lib
                .get::<unsafe extern "C" fn(*const c_char, *mut DeviceHandle) -> c_int>(
                    b"nvmlDeviceGetHandleByPciBusId_v2\0",
                )
                .map_err(|e| format!("NVML lacks nvmlDeviceGetHandleByPciBusId_v2: {e}"))?;
            let get_clock = *lib
                .get::<GetClockInfo>(b"nvmlDeviceGetClockInfo\0")
                .map_err(|e| format!("NVML lacks nvmlDeviceGetClockInfo: {e}"))?;
            let status = init();
            if status != NVML_SUCCESS {
                return Err(format!("nvmlInit_v2 failed (NVML status {status})"));
            }
            let mut device: DeviceHandle = std::ptr::null_mut();
            let status = by_bus(bus.as_ptr(), &mut device);
            if status != NVML_SUCCESS {
                return Err(format!("NVML does not know the GPU at {pci_bus_id} (NVML status {status})"));
            }
            Ok(SmClock { _lib: lib, device, get_clock })
        }
    }

    /// The SM clock now, in MHz; `None` when NVML cannot say.
    pub fn mhz(&self) -> Option<u32> {
        let mut mhz: c_uint = 0;
        // Safety: `device` came from NVML for this process and `mhz` is a live c_uint.
        let status = unsafe { (self.get_clock)(self.device, NVML_CLOCK_SM, &mut mhz) };
        (status == NVML_SUCCESS && mhz > 0).then_some(mhz)
    }
}
