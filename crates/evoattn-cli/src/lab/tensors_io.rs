//! safetensors helpers shared by `run`, `quantize` and the oracle client: evoattn's dtypes
//! against the file's, 16-bit tensors to and from the little-endian bytes the format stores,
//! and the q, k, v file `run` and `quantize` read.

use crate::lab::presets::VLayout;
use anyhow::{anyhow, Context};
use evoattn::fp8::Descales;
use evoattn::problem::Strides;
use evoattn::{Dtype, Layout, Problem, ProblemError, Shape, TensorName};
use safetensors::tensor::TensorView;
use safetensors::SafeTensors;
use std::path::Path;

/// The safetensors dtype that stores `dtype`.
pub fn safetensors_dtype(dtype: Dtype) -> safetensors::Dtype {
    match dtype {
        Dtype::F16 => safetensors::Dtype::F16,
        Dtype::Bf16 => safetensors::Dtype::BF16,
        Dtype::E4m3 | Dtype::E4m3F16 => safetensors::Dtype::F8_E4M3,
    }
}

/// The evoattn dtype a safetensors dtype holds, if it is one evoattn runs.
pub fn evoattn_dtype(dtype: safetensors::Dtype) -> Option<Dtype> {
    match dtype {
        safetensors::Dtype::F16 => Some(Dtype::F16),
        safetensors::Dtype::BF16 => Some(Dtype::Bf16),
        safetensors::Dtype::F8_E4M3 => Some(Dtype::E4m3),
        _ => None,
    }
}

/// A safetensors dtype in the lower-case spelling evoattn uses (f16, bf16, f32, ...).
pub fn dtype_name(dtype: safetensors::Dtype) -> String {
    dtype.to_string().to_ascii_lowercase()
}

/// A tensor's elements as raw bits: little-endian 16-bit ones, or bytes (E4M3) in the low half.
pub fn bits(view: &TensorView) -> Vec<u16> {
    match view.dtype().bitsize() {
        8 => view.data().iter().map(|&b| u16::from(b)).collect(),
        _ => view.data().chunks_exact(2).map(|b| u16::from_le_bytes([b[0], b[1]])).collect(),
    }
}

/// Raw 16-bit elements as the little-endian bytes a file stores.
pub fn le_bytes(bits: &[u16]) -> Vec<u8> {
    bits.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// q, k, v of a safetensors file, checked and as raw dtype bits in the file's (dense) order.
pub struct QkvFile {
    pub shape: Shape,
    pub dtype: Dtype,
    pub q: Vec<u16>,
    pub k: Vec<u16>,
    pub v: Vec<u16>,
    /// E4M3 inputs' `q_descale`, `k_descale`, `v_descale` (float32 `[B, Hkv]` each).
    pub descales: Option<Descales>,
    /// How the file holds v: in --layout's rows, or (E4M3) transposed `[B, Hkv, D, Sk]`.
    pub v_layout: VLayout,
}

impl QkvFile {
    /// The tensors of a safetensors file's `bytes` (read from `path`, named in errors), as
    /// `evoattn run` takes them: any bytes give these or a typed error.
    pub fn parse(bytes: &[u8], path: &Path, layout: Layout) -> anyhow::Result<Self> {
        Self::parse_with_v(bytes, path, layout, VLayout::Rows)
    }

    /// As [`QkvFile::parse`], with v held as `v_layout` says.
    pub fn parse_with_v(bytes: &[u8], path: &Path, layout: Layout, v_layout: VLayout) -> anyhow::Result<Self> {
        let file = SafeTensors::deserialize(bytes)
            .with_context(|| format!("--input {} is not a safetensors file", path.display()))?;
        Self::read(&file, path, layout, v_layout)
    }

    /// The dense problem these tensors make in `layout` (v transposed and dense where the file
    /// holds it so: its head-dim stride Sk): no mask, default scale, no LSE.
    pub fn problem(&self, layout: Layout) -> Problem {
        let mut problem = Problem::dense(self.shape, self.dtype, layout);
        if self.v_layout == VLayout::Bhds {
            let s = self.shape;
            // The file's rows are Sk long (validation asks Sk to keep them 16-byte aligned).
            problem.v_strides = Strides::keys_contiguous(s.hkv, s.d, s.sk);
        }
        problem
    }

    fn read(file: &SafeTensors, path: &Path, layout: Layout, v_layout: VLayout) -> anyhow::Result<Self> {
        let tensor = |t: TensorName| {
            file.tensor(t.name()).map_err(|_| anyhow!("{} has no tensor '{t}' (expected q, k and v)", path.display()))
        };
        let (q, k, v) = (tensor(TensorName::Q)?, tensor(TensorName::K)?, tensor(TensorName::V)?);

        let dtype = evoattn_dtype(q.dtype())
            .ok_or_else(|| ProblemError::UnsupportedDtype { tensor: TensorName::Q, got: dtype_name(q.dtype()) })?;
        for (t, view) in [(TensorName::K, &k), (TensorName::V, &v)] {
            if view.dtype() != q.dtype() {
                let (expected, got) = (format!("q's {dtype}"), dtype_name(view.dtype()));
                return Err(ProblemError::DtypeMismatch { tensor: t, expected, got }.into());
            }
        }
        for (t, view) in [(TensorName::Q, &q), (TensorName::K, &k), (TensorName::V, &v)] {
            if view.shape().len() != 4 {
                let expected = evoattn::problem::axis_names(layout, t);
                return Err(ProblemError::WrongRank { tensor: t, expected, got: view.shape().to_vec() }.into());
            }
        }

        // (batch, heads, rows, head dim) of a rank-4 shape in `layout` order
        let logical = |dims: &[usize]| match layout {
            Layout::Bhsd => (dims[0], dims[1], dims[2], dims[3]),
            Layout::Bshd => (dims[0], dims[2], dims[1], dims[3]),
        };
        let (b, h, sq, d) = logical(q.shape());
        // v's (batch, heads, rows, head dim): transposed, [B, Hkv, D, Sk] whatever the layout.
        let transposed = v_layout == VLayout::Bhds;
        if transposed && !dtype.is_fp8() {
            anyhow::bail!(
                "--v-layout bhds holds v transposed, which only E4M3 inputs take; {} is {dtype}",
                path.display()
            );
        }
        let v_logical = |dims: &[usize]| if transposed { (dims[0], dims[1], dims[3], dims[2]) } else { logical(dims) };
        // k and v each agree with q on B and D ...
        for (t, view) in [(TensorName::K, &k), (TensorName::V, &v)] {
            let (_, heads, rows, _) = if t == TensorName::V { v_logical(view.shape()) } else { logical(view.shape()) };
            let expected = if t == TensorName::V && transposed {
                vec![b, heads, d, rows]
            } else {
                layout.dims(b, heads, rows, d).to_vec()
            };
            if view.shape() != expected {
                return Err(ProblemError::ShapeMismatch { tensor: t, expected, got: view.shape().to_vec() }.into());
            }
        }
        // ... and with each other on Hkv and Sk.
        let (_, hkv, sk, _) = logical(k.shape());
        let (_, v_hkv, v_sk, _) = v_logical(v.shape());
        if (hkv, sk) != (v_hkv, v_sk) {
            return Err(kv_disagree([(k.shape(), (hkv, sk)), (v.shape(), (v_hkv, v_sk))], (h, sq)));
        }
        let shape = Shape { b, h, hkv, sq, sk, d };
        let descales = if dtype.is_fp8() { Some(read_descales(file, path, shape)?) } else { None };
        Ok(QkvFile { shape, dtype, q: bits(&q), k: bits(&k), v: bits(&v), descales, v_layout })
    }
}

/// The error for k and v that disagree on Hkv or Sk, given each one's shape and its (heads,
/// rows), and q's. The one at fault is the one q does not back: on every axis where k and v
/// differ, the other matches q (q and v with 16 rows, k with 15: k), and it is named with the
/// other's shape expected. Where q backs both or neither, both are named.
fn kv_disagree(
    [(k_dims, k_hs), (v_dims, v_hs)]: [(&[usize], (usize, usize)); 2],
    q_hs: (usize, usize),
) -> anyhow::Error {
    let backed = |(heads, rows): (usize, usize), (other_heads, other_rows): (usize, usize)| {
        (heads == other_heads || heads == q_hs.0) && (rows == other_rows || rows == q_hs.1)
    };
    let mismatch = |tensor, expected: &[usize], got: &[usize]| -> anyhow::Error {
        ProblemError::ShapeMismatch { tensor, expected: expected.to_vec(), got: got.to_vec() }.into()
    };
    match (backed(k_hs, v_hs), backed(v_hs, k_hs)) {
        (false, true) => mismatch(TensorName::K, v_dims, k_dims),
        (true, false) => mismatch(TensorName::V, k_dims, v_dims),
        _ => anyhow!("tensors k and v must have the same shape: k is {k_dims:?}, v is {v_dims:?}"),
    }
}

/// An E4M3 file's `q_descale`, `k_descale` and `v_descale`: float32 `[B, Hkv]`, each finite and
/// positive (what `evoattn quantize` writes).
fn read_descales(file: &SafeTensors, path: &Path, shape: Shape) -> anyhow::Result<Descales> {
    let read = |t: TensorName| -> anyhow::Result<Vec<f32>> {
        let name = format!("{t}_descale");
        let view = file.tensor(&name).map_err(|_| {
            anyhow!(
                "{} holds E4M3 inputs and no tensor '{name}' (float32 [B, Hkv]; evoattn quantize writes it)",
                path.display()
            )
        })?;
        if view.dtype() != safetensors::Dtype::F32 || view.shape() != [shape.b, shape.hkv] {
            anyhow::bail!(
                "{name} must be f32 [B, Hkv] = [{}, {}], not {} {:?}",
                shape.b,
                shape.hkv,
                dtype_name(view.dtype()),
                view.shape()
            );
        }
        Ok(view.data().chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect())
    };
    let descales = Descales { q: read(TensorName::Q)?, k: read(TensorName::K)?, v: read(TensorName::V)? };
    descales.validate(shape.b, shape.hkv)?;
    Ok(descales)
}
