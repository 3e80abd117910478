//! `evoattn quantize`: 16-bit q, k, v from a safetensors file to E4M3 with FlashAttention-3's
//! descales, written to another file; with a table of what the rounding costs each tensor.

use crate::lab::tensors_io::QkvFile;
use crate::out::errln;
use crate::text::{Column, Table};
use anyhow::Context;
use evoattn::fp8::{e4m3_to_f32, input_values, quantize_values, Quantized, Rotation};
use evoattn::reference::logical_offsets;
use evoattn::{Layout, Problem, TensorName};
use safetensors::tensor::TensorView;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args)]
#[command(after_help = "Each (batch, KV head) group of a tensor gets one float32 descale: the group's largest |x|
maps to 448, E4M3's largest value, so descale = max|x| / 448 and x ~ e4m3 * descale. Q's
groups are the query heads that share a KV head (FlashAttention-3's q_descale [B, Hkv]). A
group of zeros gets descale 1.0; a NaN or infinite element exits 2 naming the tensor and its
position, and nothing is written.

The output holds q, k, v as F8_E4M3 in the input's shapes and layout, and q_descale,
k_descale, v_descale as F32 [B, Hkv]. The table (stdout) gives, per tensor, the descales'
range, the share of non-zero elements that became zero, and the relative error of the
dequantized tensor against the input (max per element, and RMS); with --rotate, against the
rotated input (the same norms: the rotation is orthonormal).

Examples:
  evoattn quantize --input qkv.safetensors --output qkv-e4m3.safetensors
  evoattn quantize --input qkv.safetensors --output qkv-e4m3.safetensors --layout bshd
  evoattn quantize --input qkv.safetensors --output qkv-e4m3.safetensors --rotate  # inputs with outliers")]
pub struct Args {
    /// Safetensors file with tensors q, k, v as `evoattn run` takes them: rank 4, all f16 or
    /// all bf16, in --layout order, Hkv dividing H.
    #[arg(long, value_name = "IN.safetensors")]
    input: PathBuf,
    /// File to write: q, k, v in E4M3 and their descales.
    #[arg(long, value_name = "OUT.safetensors")]
    output: PathBuf,
    /// Memory order of q, k and v: bhsd [B, H, S, D] or bshd [B, S, H, D].
    #[arg(long, value_name = "ORDER", default_value = "bhsd", value_parser = crate::lab::presets::parse_layout)]
    layout: Layout,
    /// Rotate each row of q and k by the orthonormal Hadamard matrix before quantizing: the
    /// scores are unchanged (Q·Kᵀ = (QH)(KH)ᵀ), while an outlier no longer sets its group's
    /// scale alone. Measured on inputs with 0.1% outliers x10: attention's rel_l2 against the
    /// bf16 inputs 0.093-0.100 without, 0.049-0.060 with; unchanged on normal inputs
    /// (docs/fp8-error.md). Needs a power-of-two head dim.
    #[arg(long)]
    rotate: bool,
}

pub fn run(args: &Args) -> anyhow::Result<ExitCode> {
    let bytes = std::fs::read(&args.input).with_context(|| format!("cannot read --input {}", args.input.display()))?;
    let file = QkvFile::parse(&bytes, &args.input, args.layout)?;
    let problem = file.problem(args.layout);
    if problem.dtype.is_fp8() {
        anyhow::bail!("--input {} already holds E4M3 tensors; quantize takes f16 or bf16 ones", args.input.display());
    }
    problem.validate()?;
    let inputs = [(TensorName::Q, &file.q), (TensorName::K, &file.k), (TensorName::V, &file.v)];
    let mut quantized = Vec::with_capacity(3);
    for (t, bits) in inputs {
        let rotation = if args.rotate && t != TensorName::V { Rotation::Hadamard } else { Rotation::None };
        let values = input_values(&problem, t, bits, rotation)?;
        quantized.push((t, quantize_values(&problem, t, &values)?, values));
    }

    let s = problem.shape;
    let mut tensors = Vec::new();
    for (t, q, _) in &quantized {
        let [b, h, seq, d] = problem.dims(*t);
        tensors.push((
            t.name().to_string(),
            safetensors::Dtype::F8_E4M3,
            args.layout.dims(b, h, seq, d).to_vec(),
            q.bits.clone(),
        ));
        let descale: Vec<u8> = q.descale.iter().flat_map(|x| x.to_le_bytes()).collect();
        tensors.push((format!("{t}_descale"), safetensors::Dtype::F32, vec![s.b, s.hkv], descale));
    }
    let views = tensors
        .iter()
        .map(|(name, dtype, shape, data)| Ok((name.clone(), TensorView::new(*dtype, shape.clone(), data)?)))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let out = safetensors::serialize(views, None)?;
    std::fs::write(&args.output, out).with_context(|| format!("cannot write --output {}", args.output.display()))?;

    let mut table = Table::new(vec![
        Column::left("tensor"),
        Column::right("descale min..max"),
        Column::right("to zero"),
        Column::right("max rel err"),
        Column::right("rms rel err"),
    ]);
    for (t, q, values) in &quantized {
        let e = rounding_cost(&problem, *t, values, q);
        let (lo, hi) = q.descale.iter().fold((f32::INFINITY, 0f32), |(lo, hi), &d| (lo.min(d), hi.max(d)));
        table.row(vec![
            t.name().to_string(),
            format!("{lo:.3e}..{hi:.3e}"),
            format!("{:.3}%", 100.0 * e.flushed),
            format!("{:.3e}", e.max_rel),
            format!("{:.3e}", e.rms_rel),
        ]);
    }
    crate::out::text(&table.render())?;
    errln!("evoattn quantize: {} {} {} -> {}", s, problem.dtype, args.layout, args.output.display());
    Ok(ExitCode::SUCCESS)
}

/// What rounding to E4M3 did to one tensor.
#[derive(Debug, PartialEq)]
struct RoundingCost {
    /// Share of the non-zero elements that became zero.
    flushed: f64,
    /// Largest |dequantized - x| / |x| over the non-zero elements.
    max_rel: f64,
    /// ‖dequantized - x‖₂ / ‖x‖₂ (0 for a tensor of zeros).
    rms_rel: f64,
}

/// The cost against `values`, what was quantized (in logical order: the input, rotated when
/// it was; a rotation is orthonormal, so the norms are the input's).
fn rounding_cost(problem: &Problem, t: TensorName, values: &[f32], q: &Quantized) -> RoundingCost {
    let (mut nonzero, mut flushed, mut max_rel, mut err2, mut norm2) = (0usize, 0usize, 0f64, 0f64, 0f64);
    for (i, (offset, &x)) in logical_offsets(problem, t).zip(values).enumerate() {
        let group = problem.kv_group(t, i / problem.shape.d);
        let x = f64::from(x);
        let back = f64::from(e4m3_to_f32(q.bits[offset])) * f64::from(q.descale[group]);
        if x != 0.0 {
            nonzero += 1;
            flushed += usize::from(back == 0.0);
            max_rel = max_rel.max((back - x).abs() / x.abs());
        }
        err2 += (back - x).powi(2);
        norm2 += x * x;
    }
    let share = |n: usize| if nonzero == 0 { 0.0 } else { n as f64 / nonzero as f64 };
    RoundingCost { flushed: share(flushed), max_rel, rms_rel: if norm2 == 0.0 { 0.0 } else { (err2 / norm2).sqrt() } }
}

#[cfg(test)]
mod tests {
    use super::*;
    use evoattn::{Dtype, Shape};

    #[test]
    fn the_rounding_cost_counts_flushes_and_relative_errors() {
        let p = Problem::dense(Shape { b: 1, h: 1, hkv: 1, sq: 1, sk: 1, d: 8 }, Dtype::F16, Layout::Bhsd);
        // 448 sets the scale to 1: 1.0625 rounds to 1.0 (error 1/17), 2^-11 flushes to zero.
        let values = [448.0, 1.0625, 2f64.powi(-11), 0.0, 1.0, 2.0, 3.0, 4.0];
        let bits: Vec<u16> = values.iter().map(|&x| Dtype::F16.to_bits(x)).collect();
        let inputs = input_values(&p, TensorName::Q, &bits, Rotation::None).unwrap();
        let q = quantize_values(&p, TensorName::Q, &inputs).unwrap();
        assert_eq!(q.descale, vec![1.0]);
        let cost = rounding_cost(&p, TensorName::Q, &inputs, &q);
        assert_eq!(cost.flushed, 1.0 / 7.0);
        assert_eq!(cost.max_rel, 1.0, "the flushed element errs by all of itself");
        let norm2: f64 = values.iter().map(|x| x * x).sum();
        let err2 = 0.0625f64.powi(2) + 2f64.powi(-22);
        assert!((cost.rms_rel - (err2 / norm2).sqrt()).abs() < 1e-15);
    }
}
