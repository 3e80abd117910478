//! safetensors helpers shared by `run` and the oracle client: evoattn's dtypes against the
//! file's, and 16-bit tensors to and from the little-endian bytes the format stores.

use evoattn::Dtype;
use safetensors::tensor::TensorView;

/// The safetensors dtype that stores `dtype`.
pub fn safetensors_dtype(dtype: Dtype) -> safetensors::Dtype {
    match dtype {
        Dtype::F16 => safetensors::Dtype::F16,
        Dtype::Bf16 => safetensors::Dtype::BF16,
    }
}

/// The evoattn dtype a safetensors dtype holds, if it is one evoattn runs.
pub fn evoattn_dtype(dtype: safetensors::Dtype) -> Option<Dtype> {
    match dtype {
        safetensors::Dtype::F16 => Some(Dtype::F16),
        safetensors::Dtype::BF16 => Some(Dtype::Bf16),
        _ => None,
    }
}

/// A safetensors dtype in the lower-case spelling evoattn uses (f16, bf16, f32, ...).
pub fn dtype_name(dtype: safetensors::Dtype) -> String {
    dtype.to_string().to_ascii_lowercase()
}

/// Little-endian 16-bit elements as raw bits.
pub fn bits(view: &TensorView) -> Vec<u16> {
    view.data().chunks_exact(2).map(|b| u16::from_le_bytes([b[0], b[1]])).collect()
}

/// Raw 16-bit elements as the little-endian bytes a file stores.
pub fn le_bytes(bits: &[u16]) -> Vec<u8> {
    bits.iter().flat_map(|x| x.to_le_bytes()).collect()
}
