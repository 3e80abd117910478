//! Reading a DLPack tensor (the `DLManagedTensor` a `"dltensor"` capsule holds, as PyTorch's
//! `to_dlpack` exports it): address, device, element type, sizes and strides in one read, where
//! the same from a PyTorch tensor's attributes takes five calls into Python per tensor.

use std::ffi::c_void;

/// DLPack's `kDLCUDA`.
pub const DEVICE_CUDA: i32 = 2;
/// DLPack's `kDLCPU`.
pub const DEVICE_CPU: i32 = 1;

#[repr(C)]
struct DLDevice {
    device_type: i32,
    device_id: i32,
}

#[repr(C)]
struct DLDataType {
    code: u8,
    bits: u8,
    lanes: u16,
}

#[repr(C)]
struct DLTensor {
    data: *mut c_void,
    device: DLDevice,
    ndim: i32,
    dtype: DLDataType,
    shape: *const i64,
    strides: *const i64,
    byte_offset: u64,
}

/// The head of `DLManagedTensor` (its manager context and deleter follow, unused here).
#[repr(C)]
struct DLManagedTensor {
    dl_tensor: DLTensor,
}

/// A DLPack tensor's description, copied out of the exporter's memory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DlpackTensor {
    /// Address of the first element (data + byte offset).
    pub addr: u64,
    pub device_type: i32,
    pub device_id: i32,
    /// Type code (0 int, 1 uint, 2 float, 4 bfloat), bits, lanes.
    pub dtype: (u8, u8, u16),
    pub sizes: Vec<usize>,
    /// In elements; DLPack's absent strides (a compact row-major tensor) are filled in.
    pub strides: Vec<usize>,
}

impl DlpackTensor {
    /// The element type as PyTorch names it without `torch.` (`float16`, `bfloat16`, ...),
    /// and evoattn's name for the two it takes (`f16`, `bf16`).
    pub fn dtype_name(&self) -> String {
        match self.dtype {
            (2, 16, 1) => "f16".into(),
            (4, 16, 1) => "bf16".into(),
            (2, bits, 1) => format!("float{bits}"),
            (0, bits, 1) => format!("int{bits}"),
            (1, 8, 1) => "uint8".into(),
            (1, bits, 1) => format!("uint{bits}"),
            (6, 8, 1) => "bool".into(),
            (code, bits, lanes) => format!("dlpack type code {code}, {bits} bits x {lanes}"),
        }
    }
}

/// Copies out the tensor `managed` describes.
///
/// # Safety
///
/// `managed` must point at a live `DLManagedTensor` (DLPack 0.x, unversioned: what a capsule
/// named `"dltensor"` holds), whose `shape` and (when not null) `strides` arrays hold `ndim`
/// elements, for the duration of the call.
pub unsafe fn read(managed: *const c_void) -> Result<DlpackTensor, String> {
    // Safety: the caller's contract: a live DLManagedTensor, whose first member is the DLTensor.
    let t = unsafe { &(*(managed as *const DLManagedTensor)).dl_tensor };
    let ndim = usize::try_from(t.ndim).map_err(|_| format!("a DLPack tensor of rank {}", t.ndim))?;
    let to_usize = |what: &str, x: i64| usize::try_from(x).map_err(|_| format!("{what} {x} is negative"));
    // Safety: `shape` holds `ndim` elements (the caller's contract); a rank-0 tensor may carry
    // a null pointer, which is never read.
    let shape: &[i64] = if ndim == 0 { &[] } else { unsafe { std::slice::from_raw_parts(t.shape, ndim) } };
    let sizes = shape.iter().map(|&s| to_usize("size", s)).collect::<Result<Vec<_>, _>>()?;
    let strides = if t.strides.is_null() || ndim == 0 {
        let mut strides = vec![1usize; ndim];
        for i in (0..ndim.saturating_sub(1)).rev() {
            strides[i] = strides[i + 1].saturating_mul(sizes[i + 1]);
        }
        strides
    } else {
        // Safety: non-null `strides` holds `ndim` elements (the caller's contract).
        let raw = unsafe { std::slice::from_raw_parts(t.strides, ndim) };
        raw.iter().map(|&s| to_usize("stride", s)).collect::<Result<Vec<_>, _>>()?
    };
    Ok(DlpackTensor {
        addr: (t.data as u64).wrapping_add(t.byte_offset),
        device_type: t.device.device_type,
        device_id: t.device.device_id,
        dtype: (t.dtype.code, t.dtype.bits, t.dtype.lanes),
        sizes,
        strides,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn managed(shape: &[i64], strides: Option<&[i64]>, code: u8, bits: u8) -> DLManagedTensor {
        DLManagedTensor {
            dl_tensor: DLTensor {
                data: 0x1000 as *mut c_void,
                device: DLDevice { device_type: DEVICE_CUDA, device_id: 1 },
                ndim: shape.len() as i32,
                dtype: DLDataType { code, bits, lanes: 1 },
                shape: shape.as_ptr(),
                strides: strides.map_or(std::ptr::null(), |s| s.as_ptr()),
                byte_offset: 64,
            },
        }
    }

    #[test]
    fn reads_address_device_type_sizes_and_strides() {
        let (shape, strides) = ([2i64, 3, 4, 64], [768i64, 64, 192, 1]);
        let m = managed(&shape, Some(&strides), 4, 16);
        // Safety: `m` and its arrays live across the call.
        let t = unsafe { read(&m as *const DLManagedTensor as *const c_void) }.unwrap();
        assert_eq!((t.addr, t.device_type, t.device_id), (0x1040, DEVICE_CUDA, 1));
        assert_eq!(t.dtype_name(), "bf16");
        assert_eq!((t.sizes, t.strides), (vec![2, 3, 4, 64], vec![768, 64, 192, 1]));
    }

    #[test]
    fn absent_strides_are_row_major_and_negative_ones_are_refused() {
        let shape = [2i64, 3, 4];
        let m = managed(&shape, None, 2, 16);
        // Safety: as above.
        let t = unsafe { read(&m as *const DLManagedTensor as *const c_void) }.unwrap();
        assert_eq!(t.dtype_name(), "f16");
        assert_eq!(t.strides, vec![12, 4, 1]);
        let strides = [-12i64, 4, 1];
        let m = managed(&shape, Some(&strides), 2, 32);
        // Safety: as above.
        let err = unsafe { read(&m as *const DLManagedTensor as *const c_void) }.unwrap_err();
        assert!(err.contains("stride -12 is negative"), "{err}");
    }

    #[test]
    fn names_the_types_pytorch_has() {
        let t = |code, bits| DlpackTensor {
            addr: 0,
            device_type: DEVICE_CPU,
            device_id: 0,
            dtype: (code, bits, 1),
            sizes: vec![],
            strides: vec![],
        };
        assert_eq!(t(2, 32).dtype_name(), "float32");
        assert_eq!(t(0, 64).dtype_name(), "int64");
        assert_eq!(t(6, 8).dtype_name(), "bool");
    }
}
