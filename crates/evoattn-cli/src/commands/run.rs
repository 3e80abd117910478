//! `evoattn run`: attention on tensors q, k, v from a safetensors file; o (and lse) written to
//! another. Every input problem is a typed error naming the tensor, raised before the backend
//! is opened; `main` turns it into one line on stderr and exit 2.

use crate::lab;
use crate::lab::backend::{Forward, Kernel};
use crate::lab::inputs::HostInputs;
use crate::lab::open::open;
use crate::lab::presets::VLayout;
use crate::lab::tensors_io::{le_bytes, safetensors_dtype, QkvFile};
use crate::out::errln;
use anyhow::{anyhow, Context};
use evoattn::plan::plan;
use evoattn::{Arch, Causal, Dtype, Layout, Problem, Request};
use safetensors::tensor::TensorView;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(clap::Args)]
#[command(after_help = "The tensors come from PyTorch with safetensors.torch.save_file({\"q\": q, \"k\": k, \"v\": v},
\"qkv.safetensors\"). Bad input (a wrong rank or shape, mixed or unsupported dtypes, an
unsupported head dim, Hkv not dividing H) exits 2 with a one-line reason, naming the tensor at
fault where one is; nothing is written then.

Examples:
  evoattn run --input qkv.safetensors --output o.safetensors                          # [B, H, S, D], no mask
  evoattn run --input qkv.safetensors --output o.safetensors --causal --layout bshd   # [B, S, H, D], SDPA's mask
  evoattn run --input qkv.safetensors --output o.safetensors --causal bottom-right --lse --scale 0.1")]
pub struct Args {
    /// Safetensors file with tensors q, k, v: rank 4, all f16, all bf16 or all e4m3 (F8_E4M3, then
    /// with q_descale, k_descale, v_descale, f32 [B, Hkv], as `evoattn quantize` writes them),
    /// row-major in --layout order. BHSD: q [B, H, Sq, D], k and v [B, Hkv, Sk, D]; Hkv must
    /// divide H (GQA/MQA), D 64, 128 or 256; Sq and Sk may differ.
    #[arg(long, value_name = "IN.safetensors")]
    input: PathBuf,
    /// File to write: o with q's shape and dtype (for E4M3 inputs, --o-dtype's), plus lse with
    /// --lse.
    #[arg(long, value_name = "OUT.safetensors")]
    output: PathBuf,
    /// Causal mask: top-left, bottom-right or none (no --causal: none). Bare --causal is
    /// top-left, PyTorch SDPA's is_causal=True: query i sees keys 0..=i. bottom-right is
    /// FlashAttention's and KV-cache decoding's: query i sees keys 0..=i+Sk-Sq, so the last
    /// query sees every key. The two agree when Sq = Sk.
    #[arg(long, value_name = "ALIGN", num_args = 0..=1, default_missing_value = "top-left", value_parser = parse_causal)]
    causal: Option<Causal>,
    /// Softmax scale applied to Q·Kᵀ [default: 1/sqrt(D)]: any finite non-zero value, negative
    /// ones included.
    #[arg(long, allow_hyphen_values = true)]
    scale: Option<f32>,
    /// Kernel family: auto (the planner's choice; the EVOATTN_IMPL environment variable
    /// overrides it), reference, mma, wgmma, splitkv, resident, mma8 (E4M3 inputs), cublas
    /// (unfused), hybrid-qk or hybrid-pv (unfused, one GEMM ours; `evoattn info` says which run
    /// here).
    #[arg(long = "impl", value_name = "NAME", default_value = "auto")]
    imp: String,
    /// Memory order of q, k, v and o: bhsd [B, H, S, D] or bshd [B, S, H, D].
    #[arg(long, value_name = "ORDER", default_value = "bhsd", value_parser = crate::lab::presets::parse_layout)]
    layout: Layout,
    /// How the file holds v with E4M3 inputs: rows (as --layout says) or bhds, transposed
    /// [B, Hkv, D, Sk] (keys contiguous; Sk a multiple of 16), which FP8 wgmma reads as it is.
    #[arg(long, value_name = "ORDER", default_value = "rows", value_parser = crate::lab::presets::parse_v_layout)]
    v_layout: VLayout,
    /// Lever overrides for the kernel that runs (with auto, the planner's pick), e.g.
    /// block_m=64,stages=3; `evoattn compile --levers` lists each family's levers.
    #[arg(long, value_name = "KEY=VALUE,...")]
    config: Option<String>,
    /// O's dtype for E4M3 inputs: bf16 (FlashAttention-3's) or f16 (3 more mantissa bits where
    /// O fits f16's range) [default: bf16]; 16-bit inputs write O in their own dtype.
    #[arg(long, value_name = "DTYPE", value_parser = parse_o_dtype)]
    o_dtype: Option<Dtype>,
    /// Also write lse: the natural-log log-sum-exp of each row's scaled scores, f32
    /// [B, H, Sq] in any layout; -inf for a row that sees no key (its o row is 0).
    #[arg(long)]
    lse: bool,
}

fn parse_o_dtype(text: &str) -> Result<Dtype, String> {
    Dtype::parse(text)
        .filter(|d| Dtype::SIXTEEN_BIT.contains(d))
        .ok_or_else(|| format!("'{text}': expected bf16 or f16"))
}

fn parse_causal(text: &str) -> Result<Causal, String> {
    let names: Vec<&str> = Causal::ALL.iter().map(|c| c.name()).collect();
    Causal::parse(text).ok_or_else(|| format!("'{text}': expected {}", crate::lab::presets::one_of(&names)))
}

pub fn run(args: &Args) -> anyhow::Result<ExitCode> {
    let request =
        Request::parse(&args.imp).map_err(anyhow::Error::msg)?.with_env_override().map_err(anyhow::Error::msg)?;
    let bytes = std::fs::read(&args.input).with_context(|| format!("cannot read --input {}", args.input.display()))?;
    let mut inputs = QkvFile::parse_with_v(&bytes, &args.input, args.layout, args.v_layout)?;
    if let Some(out) = args.o_dtype {
        inputs.dtype = inputs.dtype.with_output(out).map_err(|e| anyhow!("--o-dtype: {e}"))?;
    }
    let problem = inputs
        .problem(args.layout)
        .with_causal(args.causal.unwrap_or(Causal::None))
        .with_scale(args.scale)
        .with_lse(args.lse);
    problem.validate()?;

    let mut backend = open()?;
    let info = backend.info();
    let arch = Arch::parse(&info.arch).with_context(|| format!("backend reports unknown arch {}", info.arch))?;
    if request == Request::Auto {
        evoattn::plan::auto_covers_head_dim(problem.shape.d)?;
    }
    let mut plan = plan(&problem, arch, info.sm_count, request);
    if let Some(text) = &args.config {
        // The levers apply to the planned kernel, whichever family `auto` picked.
        let config = plan.spec.config.with_overrides(text).map_err(|e| anyhow!("--config: {e}"))?;
        plan = evoattn::plan::plan(&problem, arch, info.sm_count, Request::Config(config));
    }
    let tensors = HostInputs { q: inputs.q, k: inputs.k, v: inputs.v, descales: inputs.descales };
    let forward = backend.forward(&problem, Kernel::Planned(&plan), lab::inputs::Inputs::Host(&tensors))?;
    write_output(&args.output, &problem, args.layout, &forward)?;
    errln!(
        "evoattn run: {} on {} {} {}, causal {}, scale {}{} -> {}",
        forward.kernel,
        problem.shape,
        problem.dtype,
        args.layout,
        problem.causal,
        problem.softmax_scale(),
        if problem.with_lse { ", with lse" } else { "" },
        args.output.display()
    );
    Ok(ExitCode::SUCCESS)
}

fn write_output(path: &Path, problem: &Problem, layout: Layout, forward: &Forward) -> anyhow::Result<()> {
    let s = problem.shape;
    let dtype = safetensors_dtype(problem.dtype.output());
    let o_bytes = le_bytes(&forward.o);
    let lse_bytes: Option<Vec<u8>> = match (&forward.lse, problem.with_lse) {
        (Some(lse), true) => Some(lse.iter().flat_map(|x| x.to_le_bytes()).collect()),
        (None, true) => anyhow::bail!("the backend returned no lse"),
        (_, false) => None,
    };
    let mut tensors = vec![("o", TensorView::new(dtype, layout.dims(s.b, s.h, s.sq, s.d).to_vec(), &o_bytes)?)];
    if let Some(lse_bytes) = &lse_bytes {
        tensors.push(("lse", TensorView::new(safetensors::Dtype::F32, vec![s.b, s.h, s.sq], lse_bytes)?));
    }
    let bytes = safetensors::serialize(tensors, None)?;
    std::fs::write(path, bytes).with_context(|| format!("cannot write --output {}", path.display()))
}
