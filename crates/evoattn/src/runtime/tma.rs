//! TMA tensor maps (`cuTensorMapEncodeTiled`) for the `loads=tma` paths of `wgmma` and `splitkv`.
//!
//! Each of Q, K, V (loads) and O (`wgmma`'s TMA stores, `o_staging`) is described as a 4-D tensor over
//! (D, S, H, B), innermost first, with the problem's own strides, so BHSD, BSHD and GQA (K/V
//! over `hkv` heads) need no copies. A box is one swizzled row of D (128 bytes: 64 16-bit
//! elements or 128 E4M3 ones; E4M3 at hd64, the whole 64-byte row in the 64-byte swizzle) by
//! `rows` rows of S, one head, one batch; the kernel moves a tile as D / (box width) such boxes.
//! Rows past S are outside the tensor: loads get zeros, stores drop them, so sequence tails need
//! no masking. E4M3 `wgmma` reads V transposed (`TensorMapGeometry::transposed_v`), from the
//! copy its transpose kernel wrote, or from the caller's where V is given transposed
//! (`vt_given`), unless it transposes V's tiles itself (`vt_producer`: V's own map).
//!
//! [`TensorMapGeometry::new`] is the pure part (unit-tested); [`encode`] hands it to the driver.

use crate::config::{Impl, KernelSpec, SWIZZLE_ROW_BYTES};
use crate::error::{Error, Result};
use crate::problem::{Dtype, Problem, TensorName};
use cudarc::driver::sys::{
    self, CUtensorMap, CUtensorMapDataType, CUtensorMapFloatOOBfill, CUtensorMapInterleave, CUtensorMapL2promotion,
    CUtensorMapSwizzle,
};
use cudarc::driver::DeviceRepr;

/// The driver's limit on a box dimension.
pub const MAX_BOX_ROWS: u32 = 256;
/// Global strides must be multiples of 16 bytes and below 2^40.
const STRIDE_ALIGN: u64 = 16;
const MAX_STRIDE: u64 = 1 << 40;

/// What `cuTensorMapEncodeTiled` is told about one tensor, apart from its address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TensorMapGeometry {
    /// Sizes of (D, S, H, B) in elements.
    pub dims: [u64; 4],
    /// Byte strides of S, H and B (D is contiguous).
    pub strides_bytes: [u64; 3],
    /// Box sizes of (D, S, H, B) in elements.
    pub box_dims: [u32; 4],
    /// The elements' type (the tensor's: O's is the output dtype).
    pub dtype: Dtype,
}

impl TensorMapGeometry {
    /// The geometry of tensor `t` (Q, K, V or O) of a validated problem with boxes of `rows` rows,
    /// for kernel `imp` (named in the errors).
    pub fn new(problem: &Problem, t: TensorName, rows: u32, imp: Impl) -> Result<Self> {
        let unsupported = |reason: String| Error::Unsupported { imp: imp.to_string(), reason };
        let s = problem.shape;
        let (seq, heads) = match t {
            TensorName::Q | TensorName::O => (s.sq, s.h),
            TensorName::K | TensorName::V => (s.sk, s.hkv),
            TensorName::Lse
            | TensorName::Descale
            | TensorName::DO
            | TensorName::DQ
            | TensorName::DK
            | TensorName::DV => {
                return Err(unsupported(format!("no tensor map is made for {t}")));
            }
        };
        if rows == 0 || rows > MAX_BOX_ROWS {
            return Err(unsupported(format!("a TMA box has 1..={MAX_BOX_ROWS} rows, not {rows}")));
        }
        let elem = problem.elem_bytes(t) as u64;
        // The kernels' swizzled row (ptx_sm90.cuh's ROW_BYTES): 128 bytes, or a shorter whole row.
        let row_bytes = (s.d * elem as usize).min(SWIZZLE_ROW_BYTES);
        let box_elems = (row_bytes / elem as usize) as u32;
        if row_bytes < SWIZZLE_ROW_BYTES / 2 || !s.d.is_multiple_of(box_elems as usize) {
            return Err(unsupported(format!(
                "TMA needs a head dim that is a multiple of {} elements",
                SWIZZLE_ROW_BYTES / elem as usize
            )));
        }
        let st = problem.strides(t);
        if st.dim != 1 {
            return Err(unsupported(format!("tensor {t}: TMA needs a contiguous head dim")));
        }
        // A stride of an axis of one element is free, so it may be past counting in bytes:
        // saturated, it is refused as past 2^40 like any other too large.
        let bytes = |stride: usize| (stride as u64).saturating_mul(elem);
        let strides_bytes = [bytes(st.seq), bytes(st.head), bytes(st.batch)];
        for (axis, stride) in ["sequence", "head", "batch"].iter().zip(strides_bytes) {
            if !stride.is_multiple_of(STRIDE_ALIGN) || stride >= MAX_STRIDE {
                return Err(unsupported(format!(
                    "tensor {t}: the {axis} stride of {stride} bytes is not a multiple of {STRIDE_ALIGN} below 2^40, \
                     as TMA needs"
                )));
            }
        }
        let dtype = if t == TensorName::O { problem.dtype.output() } else { problem.dtype.element() };
        Ok(TensorMapGeometry {
            dims: [s.d as u64, seq as u64, heads as u64, s.b as u64],
            strides_bytes,
            box_dims: [box_elems, rows, 1, 1],
            dtype,
        })
    }

    /// The transposed V that the E4M3 `wgmma` kernel reads, as a 4-D tensor over (keys, D, Hkv,
    /// B): the copy its transpose kernel writes (`VMap::Scratch`, kernels/wgmma/wgmma_vt.cuh:
    /// bytes `[B][Hkv][D][sk_pad]`, keys padded to [`VT_KEY_ALIGN`], dense), or the caller's own
    /// where V is given keys-contiguous (`VMap::Given`: its strides, and only its Sk keys, so
    /// the rest of a box loads as zeros). A box is 128 keys (one 128-byte swizzled row) by all
    /// D rows, and a key block of the kernel one or more such boxes.
    pub fn transposed_v(problem: &Problem, imp: Impl, map: VMap) -> Result<Self> {
        let s = problem.shape;
        let unsupported = |reason: String| Error::Unsupported { imp: imp.to_string(), reason };
        if s.d > MAX_BOX_ROWS as usize {
            return Err(unsupported(format!(
                "a transposed V's box holds at most {MAX_BOX_ROWS} head-dim rows, not {}",
                s.d
            )));
        }
        let keys = SWIZZLE_ROW_BYTES as u32;
        let d = s.d as u64;
        let (key_count, strides_bytes) = if map == VMap::Given {
            // E4M3 elements are bytes; `validate` checked the strides are 16-byte multiples.
            let st = problem.strides(TensorName::V);
            (s.sk as u64, [st.dim as u64, st.head as u64, st.batch as u64])
        } else {
            let sk_pad = transposed_v_keys(s.sk) as u64;
            (sk_pad, [sk_pad, d * sk_pad, s.hkv as u64 * d * sk_pad])
        };
        if let Some(&stride) = strides_bytes.iter().find(|&&b| b >= MAX_STRIDE || !b.is_multiple_of(STRIDE_ALIGN)) {
            return Err(unsupported(format!(
                "a transposed V's stride of {stride} bytes is not a multiple of {STRIDE_ALIGN} below 2^40, as TMA needs"
            )));
        }
        Ok(TensorMapGeometry {
            dims: [key_count, d, s.hkv as u64, s.b as u64],
            strides_bytes,
            box_dims: [keys, s.d as u32, 1, 1],
            dtype: problem.dtype,
        })
    }

    /// Bytes one box writes to shared memory (what its mbarrier transaction counts).
    pub fn box_bytes(&self, elem_bytes: usize) -> usize {
        self.box_dims.iter().map(|&d| d as usize).product::<usize>() * elem_bytes
    }
}

/// A tensor map as the kernel receives it: `TmaMap` in kernels/ptx_sm90.cuh (128 opaque bytes),
/// passed by value as a `const __grid_constant__` parameter. It holds the device address of
/// the caller's tensor, so it is only valid while that buffer lives.
#[repr(transparent)]
#[derive(Clone, Copy, Debug)]
pub struct TensorMap(pub CUtensorMap);

// Safety: `CUtensorMap` is `repr(C)` plain data (16 u64s, 64-byte aligned or more), the layout
// of the kernel's `TmaMap`; the driver copies its bytes into the parameter buffer.
unsafe impl DeviceRepr for TensorMap {}

/// What an E4M3 `wgmma` kernel's V tensor map is over.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VMap {
    /// V's rows as the problem holds them (every 16-bit kernel; E4M3 transposing its tiles).
    Rows,
    /// The transposed copy a kernel of its own wrote into the launch's scratch.
    Scratch,
    /// The caller's V, given transposed (`vt_given` with `vt_producer`).
    Given,
}

impl VMap {
    /// What `spec`'s V map is over: a kernel with a V pass of its own before it (the transpose,
    /// or the permute of a V given transposed) reads that pass's copy; else V as the problem
    /// holds it.
    pub fn of(spec: &KernelSpec) -> Self {
        match (spec.transpose_kernel_name().is_some(), spec.reads_v_keys_contiguous()) {
            (true, _) => VMap::Scratch,
            (false, true) => VMap::Given,
            (false, false) => VMap::Rows,
        }
    }
}

/// Keys of the transposed V are padded to a multiple of this (16-byte rows, and each 16 keys
/// one group of P's k order).
pub const VT_KEY_ALIGN: usize = 16;

/// Keys of a row of the transposed V for `sk` keys.
pub fn transposed_v_keys(sk: usize) -> usize {
    sk.div_ceil(VT_KEY_ALIGN) * VT_KEY_ALIGN
}

/// What `cuTensorMapEncodeTiled` is told about a geometry beyond its sizes: the driver's
/// enums, so the one choice of swizzle, fill and promotion is made here for both our launches
/// and a [`crate::runtime::device::LaunchImage`] another process encodes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TiledEncoding {
    pub data_type: CUtensorMapDataType,
    pub element_strides: [u32; 4],
    pub interleave: CUtensorMapInterleave,
    pub swizzle: CUtensorMapSwizzle,
    pub l2_promotion: CUtensorMapL2promotion,
    pub oob_fill: CUtensorMapFloatOOBfill,
}

impl TensorMapGeometry {
    /// The encoding of this geometry: the swizzle of the box's row (128 bytes, or 64), dense
    /// elements, zero fill outside the tensor, 256-byte L2 promotion.
    pub fn encoding(&self) -> TiledEncoding {
        let data_type = match self.dtype {
            Dtype::Bf16 => CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_BFLOAT16,
            Dtype::F16 => CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
            Dtype::E4m3 | Dtype::E4m3F16 => CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_UINT8,
        };
        let swizzle = if self.box_dims[0] as usize * self.dtype.size_bytes() == SWIZZLE_ROW_BYTES {
            CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_128B
        } else {
            CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_64B
        };
        TiledEncoding {
            data_type,
            element_strides: [1; 4],
            interleave: CUtensorMapInterleave::CU_TENSOR_MAP_INTERLEAVE_NONE,
            swizzle,
            l2_promotion: CUtensorMapL2promotion::CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
            oob_fill: CUtensorMapFloatOOBfill::CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE,
        }
    }
}

/// The tensor maps `spec`'s kernel takes, in its parameter order (Q, K, V, O, each where its
/// `tensor_map_rows` names it; none for a kernel without TMA), with their geometries (V's over
/// what [`VMap::of`] says).
pub fn kernel_maps(problem: &Problem, spec: &KernelSpec) -> Result<Vec<(TensorName, TensorMapGeometry)>> {
    let Some(rows) = spec.tensor_map_rows() else { return Ok(Vec::new()) };
    let v_map = VMap::of(spec);
    let imp = spec.imp();
    if problem.shape.sk == 0 {
        return Err(Error::Unsupported {
            imp: imp.to_string(),
            reason: format!(
                "{} loads K and V by TMA, and a tensor map cannot describe 0 keys (impl=auto runs Sk = 0)",
                spec.name()
            ),
        });
    }
    let tensors = [
        (TensorName::Q, rows.q),
        (TensorName::K, Some(rows.kv)),
        (TensorName::V, Some(rows.kv)),
        (TensorName::O, rows.o),
    ];
    let mut maps = Vec::with_capacity(tensors.len());
    for (tensor, rows) in tensors {
        let Some(rows) = rows else { continue };
        let geometry = if tensor == TensorName::V && v_map != VMap::Rows {
            TensorMapGeometry::transposed_v(problem, imp, v_map)?
        } else {
            TensorMapGeometry::new(problem, tensor, rows, imp)?
        };
        maps.push((tensor, geometry));
    }
    Ok(maps)
}

/// Encodes the tensor map of `geometry` over the tensor at device address `addr` (16-byte
/// aligned) for kernel `imp`, as [`TensorMapGeometry::encoding`] says.
pub fn encode(geometry: &TensorMapGeometry, addr: u64, imp: Impl) -> Result<TensorMap> {
    if !addr.is_multiple_of(STRIDE_ALIGN) {
        return Err(Error::Unsupported {
            imp: imp.to_string(),
            reason: format!("TMA needs 16-byte aligned tensors, not {addr:#x}"),
        });
    }
    let mut map = CUtensorMap { opaque: [0; 16] };
    let e = geometry.encoding();
    // Safety: the driver library is loaded (a context exists before any launch), `map` is a
    // live, suitably aligned CUtensorMap that the call writes; the dims (4), strides (3), box
    // and element-stride arrays have the lengths the rank (4) implies and outlive the call;
    // the address is only recorded in the map, not dereferenced.
    let status = unsafe {
        sys::cuTensorMapEncodeTiled(
            &mut map,
            e.data_type,
            4,
            addr as *mut std::ffi::c_void,
            geometry.dims.as_ptr(),
            geometry.strides_bytes.as_ptr(),
            geometry.box_dims.as_ptr(),
            e.element_strides.as_ptr(),
            e.interleave,
            e.swizzle,
            e.l2_promotion,
            e.oob_fill,
        )
    };
    if status != sys::CUresult::CUDA_SUCCESS {
        return Err(Error::driver(
            "cuTensorMapEncodeTiled",
            format!(
                "{status:?} for dims {:?}, strides {:?} B, box {:?}",
                geometry.dims, geometry.strides_bytes, geometry.box_dims
            ),
        ));
    }
    Ok(TensorMap(map))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::problem::{Dtype, Layout, Shape};

    #[test]
    fn bhsd_maps_walk_d_then_s_then_h_then_b() {
        let shape = Shape { b: 2, h: 3, hkv: 3, sq: 100, sk: 70, d: 128 };
        let p = Problem::dense(shape, Dtype::Bf16, Layout::Bhsd);
        let q = TensorMapGeometry::new(&p, TensorName::Q, 128, Impl::Wgmma).unwrap();
        assert_eq!(q.dims, [128, 100, 3, 2]);
        assert_eq!(q.strides_bytes, [128 * 2, 100 * 128 * 2, 3 * 100 * 128 * 2]);
        assert_eq!(q.box_dims, [64, 128, 1, 1]);
        assert_eq!(q.box_bytes(2), 64 * 128 * 2);
        let k = TensorMapGeometry::new(&p, TensorName::K, 96, Impl::Wgmma).unwrap();
        assert_eq!(k.dims, [128, 70, 3, 2]);
        assert_eq!(k.strides_bytes, [256, 70 * 256, 3 * 70 * 256]);
        assert_eq!(k.box_dims, [64, 96, 1, 1]);
        // O has Q's extent, with its own strides (here the same layout).
        let o = TensorMapGeometry::new(&p, TensorName::O, 64, Impl::Wgmma).unwrap();
        assert_eq!((o.dims, o.strides_bytes, o.box_dims), (q.dims, q.strides_bytes, [64, 64, 1, 1]));
    }

    #[test]
    fn bshd_and_gqa_use_the_problem_strides() {
        let shape = Shape { b: 2, h: 8, hkv: 2, sq: 33, sk: 65, d: 64 };
        let p = Problem::dense(shape, Dtype::F16, Layout::Bshd);
        let q = TensorMapGeometry::new(&p, TensorName::Q, 64, Impl::Wgmma).unwrap();
        assert_eq!(q.dims, [64, 33, 8, 2]);
        // seq steps over all heads, head over one row of D, batch over the whole sequence.
        assert_eq!(q.strides_bytes, [8 * 64 * 2, 64 * 2, 33 * 8 * 64 * 2]);
        let v = TensorMapGeometry::new(&p, TensorName::V, 128, Impl::Splitkv).unwrap();
        assert_eq!(v.dims, [64, 65, 2, 2]);
        assert_eq!(v.strides_bytes, [2 * 64 * 2, 64 * 2, 65 * 2 * 64 * 2]);
    }

    #[test]
    fn impossible_maps_are_typed_errors() {
        let shape = Shape { b: 1, h: 1, hkv: 1, sq: 8, sk: 8, d: 64 };
        let p = Problem::dense(shape, Dtype::F16, Layout::Bhsd);
        let err = |t, rows| TensorMapGeometry::new(&p, t, rows, Impl::Wgmma).unwrap_err().to_string();
        assert!(err(TensorName::Q, 512).contains("1..=256 rows"));
        assert!(err(TensorName::Q, 0).contains("1..=256 rows"));
        assert!(err(TensorName::Lse, 64).contains("no tensor map"));
        let odd = Problem::dense(Shape { d: 96, ..shape }, Dtype::F16, Layout::Bhsd);
        let odd_err = TensorMapGeometry::new(&odd, TensorName::K, 64, Impl::Splitkv).unwrap_err().to_string();
        assert!(odd_err.contains("multiple of 64") && odd_err.contains("splitkv"), "{odd_err}");
        let misaligned =
            encode(&TensorMapGeometry::new(&p, TensorName::Q, 64, Impl::Wgmma).unwrap(), 0x1008, Impl::Wgmma);
        assert!(misaligned.unwrap_err().to_string().contains("16-byte aligned"));
    }

    #[test]
    fn e4m3_boxes_are_a_swizzled_row_of_bytes_and_v_is_read_transposed() {
        let shape = Shape { b: 2, h: 4, hkv: 2, sq: 100, sk: 70, d: 128 };
        let p = Problem::dense(shape, Dtype::E4m3, Layout::Bhsd);
        let q = TensorMapGeometry::new(&p, TensorName::Q, 128, Impl::Wgmma).unwrap();
        assert_eq!((q.box_dims, q.strides_bytes[0], q.dtype), ([128, 128, 1, 1], 128, Dtype::E4m3));
        // hd64: the whole 64-byte row, in the 64-byte swizzle.
        let narrow = Problem::dense(Shape { d: 64, ..shape }, Dtype::E4m3, Layout::Bhsd);
        assert_eq!(TensorMapGeometry::new(&narrow, TensorName::K, 128, Impl::Wgmma).unwrap().box_dims[0], 64);
        // O is the output dtype's.
        assert_eq!(TensorMapGeometry::new(&p, TensorName::O, 64, Impl::Wgmma).unwrap().dtype, Dtype::Bf16);
        // Vᵀ: keys padded to 16 (70 -> 80), [B][Hkv][D][keys], boxes of 128 keys by D rows.
        assert_eq!(transposed_v_keys(70), 80);
        assert_eq!(transposed_v_keys(0), 0);
        let vt = TensorMapGeometry::transposed_v(&p, Impl::Wgmma, VMap::Scratch).unwrap();
        assert_eq!(vt.dims, [80, 128, 2, 2]);
        assert_eq!(vt.strides_bytes, [80, 128 * 80, 2 * 128 * 80]);
        assert_eq!(vt.box_dims, [128, 128, 1, 1]);
        // A V the caller holds transposed: its own strides, and only its 70 keys (the rest of
        // each box loads as zeros); or the permuted copy, as above.
        let mut given = p.clone().with_v_keys_contiguous();
        given.v_strides.head *= 3;
        let scratch = TensorMapGeometry::transposed_v(&given, Impl::Wgmma, VMap::Scratch).unwrap();
        assert_eq!((scratch.dims, scratch.strides_bytes), ([80, 128, 2, 2], [80, 128 * 80, 2 * 128 * 80]));
        let vt = TensorMapGeometry::transposed_v(&given, Impl::Wgmma, VMap::Given).unwrap();
        assert_eq!((vt.dims, vt.strides_bytes), ([70, 128, 2, 2], [80, 3 * 128 * 80, 2 * 128 * 80]));
        assert_eq!(vt.box_dims, [128, 128, 1, 1]);
    }

    #[test]
    fn v_is_mapped_over_what_the_kernel_reads() {
        let spec = |dtype: Dtype, overrides: &str| {
            let config =
                crate::defaults::config(Impl::Wgmma, crate::Arch::Sm90a, dtype, 128).with_overrides(overrides).unwrap();
            KernelSpec { config, dtype, head_dim: 128 }
        };
        let e4m3 = |overrides: &str| VMap::of(&spec(Dtype::E4m3, overrides));
        // A kernel with a V pass before it reads the pass's copy; else V as the problem holds it.
        assert_eq!(e4m3("vt_producer=0,vt_given=0"), VMap::Scratch);
        assert_eq!(e4m3("vt_producer=0,vt_given=1"), VMap::Scratch);
        assert_eq!(e4m3("vt_producer=1,vt_given=0"), VMap::Rows);
        assert_eq!(e4m3("vt_producer=1,vt_given=1"), VMap::Given);
        assert_eq!(VMap::of(&spec(Dtype::Bf16, "")), VMap::Rows);
        // And `kernel_maps` builds V's map over it: the caller's Sk keys at its strides.
        let shape = Shape { b: 2, h: 4, hkv: 2, sq: 100, sk: 70, d: 128 };
        let given = Problem::dense(shape, Dtype::E4m3, Layout::Bhsd).with_v_keys_contiguous();
        let maps = kernel_maps(&given, &spec(Dtype::E4m3, "vt_producer=1,vt_given=1")).unwrap();
        let v = maps.iter().find(|(t, _)| *t == TensorName::V).unwrap().1;
        assert_eq!(v, TensorMapGeometry::transposed_v(&given, Impl::Wgmma, VMap::Given).unwrap());
        assert_eq!(v.dims[0], 70);
    }

    #[test]
    fn the_map_is_the_kernels_128_byte_blob() {
        assert_eq!(std::mem::size_of::<TensorMap>(), 128);
        assert_eq!(std::mem::align_of::<TensorMap>() % 64, 0);
    }
}
