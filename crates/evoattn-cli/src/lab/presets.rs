//! Named problem sets for `check`, `bench` and `gate` (shapes, plus the dtypes, masks and
//! layouts a preset covers when the command line does not say), and user workload files.

use crate::out::errln;
use anyhow::{bail, Context};
use evoattn::{Causal, Dtype, Layout, Problem, Shape};

/// A named set of shapes and the settings it is meant to be crossed with.
#[derive(Debug)]
pub struct Preset {
    pub name: &'static str,
    pub about: &'static str,
    pub shapes: Vec<Shape>,
    pub dtypes: Vec<Dtype>,
    pub causal: Vec<Causal>,
    pub layouts: Vec<Layout>,
}

/// Sequence lengths the correctness grid covers: 1, primes and near-multiples of the tiles,
/// an exact tile multiple, and one past a power of two.
pub const GRID_LENGTHS: [usize; 7] = [1, 17, 113, 128, 1000, 1023, 4097];
pub const HEAD_DIMS: [usize; 3] = [64, 128, 256];

pub const NAMES: [&str; 10] =
    ["mission", "small", "long", "wide", "stress", "seed", "fa3-grid", "grid", "sanitize", "decode"];

/// The FlashAttention-3 paper's grid: 16k tokens (B·S) and a model width H·D of 2048.
/// docs/anchors.md's `seed` rows: fp16, S=512, D=64, these (B, H).
const SEED_BATCH_HEADS: [(usize, usize); 5] = [(1, 8), (2, 8), (4, 8), (4, 16), (8, 16)];

/// The decode preset's key lengths, query lengths, batches and (H, Hkv): GQA 8:1 and none.
const DECODE_KEYS: [usize; 4] = [1024, 8192, 32768, 131072];
const DECODE_QUERIES: [usize; 2] = [1, 4];
const DECODE_BATCHES: [usize; 2] = [1, 8];
const DECODE_HEADS: [(usize, usize); 2] = [(32, 4), (32, 32)];
const DECODE_HEAD_DIM: usize = 128;

fn gqa(b: usize, h: usize, hkv: usize, sq: usize, sk: usize, d: usize) -> Shape {
    Shape { b, h, hkv, sq, sk, d }
}

pub fn preset(name: &str) -> Result<Preset, String> {
    let all_dtypes = Dtype::SIXTEEN_BIT.to_vec();
    let all_causal = Causal::ALL.to_vec();
    let both_layouts = Layout::ALL.to_vec();
    let p = match name {
        "mission" => Preset {
            name: "mission",
            about: "the founding documents' shape: B=1, H=8, S=512, D=64, fp16",
            shapes: vec![Shape::new(1, 8, 512, 64)],
            dtypes: vec![Dtype::F16],
            causal: vec![Causal::None],
            layouts: vec![Layout::Bhsd],
        },
        "small" => Preset {
            name: "small",
            about: "a handful of small shapes, every head dim, one GQA and one Sq != Sk",
            shapes: vec![
                Shape::new(1, 1, 1, 64),
                Shape::new(2, 4, 17, 64),
                gqa(1, 8, 2, 113, 200, 128),
                Shape::new(1, 2, 128, 256),
            ],
            dtypes: all_dtypes,
            causal: all_causal,
            layouts: vec![Layout::Bhsd],
        },
        "long" => Preset {
            name: "long",
            about: "one long sequence: B=1, H=8, S=8192, D=64, fp16",
            shapes: vec![Shape::new(1, 8, 8192, 64)],
            dtypes: vec![Dtype::F16],
            causal: vec![Causal::None],
            layouts: vec![Layout::Bhsd],
        },
        "wide" => Preset {
            name: "wide",
            about: "the mission shape at head dim 128: B=1, H=8, S=512, D=128, fp16",
            shapes: vec![Shape::new(1, 8, 512, 128)],
            dtypes: vec![Dtype::F16],
            causal: vec![Causal::None],
            layouts: vec![Layout::Bhsd],
        },
        "stress" => Preset {
            name: "stress",
            about: "a large batch that fills the GPU: B=16, H=16, S=2048, D=64, fp16",
            shapes: vec![Shape::new(16, 16, 2048, 64)],
            dtypes: vec![Dtype::F16],
            causal: vec![Causal::None],
            layouts: vec![Layout::Bhsd],
        },
        "seed" => Preset {
            name: "seed",
            about: "the 10 fp16 S=512 D=64 shapes of docs/anchors.md (B,H in 1,8 2,8 4,8 4,16 8,16; causal and not)",
            shapes: SEED_BATCH_HEADS.iter().map(|&(b, h)| Shape::new(b, h, 512, 64)).collect(),
            dtypes: vec![Dtype::F16],
            causal: vec![Causal::None, Causal::TopLeft],
            layouts: vec![Layout::Bhsd],
        },
        "fa3-grid" => {
            let shapes = HEAD_DIMS.into_iter().flat_map(Shape::fa3_grid).collect();
            Preset {
                name: "fa3-grid",
                about: "the 36 large bf16 shapes of docs/anchors.md: B*S = 16k, H*D = 2048, S 512..16k, D 64/128/256, causal and not",
                shapes,
                dtypes: vec![Dtype::Bf16],
                causal: vec![Causal::None, Causal::TopLeft],
                layouts: vec![Layout::Bhsd],
            }
        }
        "grid" => {
            // Per head dim and length L: self-attention (H = Hkv), and GQA 4:1 against the
            // next length in the list, so every length also appears with Sq != Sk.
            let mut shapes = Vec::new();
            for d in HEAD_DIMS {
                for (i, &len) in GRID_LENGTHS.iter().enumerate() {
                    let other = GRID_LENGTHS[(i + 1) % GRID_LENGTHS.len()];
                    shapes.push(gqa(2, 4, 4, len, len, d));
                    shapes.push(gqa(1, 8, 2, len, other, d));
                }
            }
            Preset {
                name: "grid",
                about: "the correctness grid: f16/bf16 x D 64/128/256 x all masks x lengths {1,17,113,128,1000,1023,4097} x Sq!=Sk x GQA 4:1 x both layouts",
                shapes,
                dtypes: all_dtypes,
                causal: all_causal,
                layouts: both_layouts,
            }
        }
        "sanitize" => {
            let mut shapes = Vec::new();
            for d in HEAD_DIMS {
                shapes.push(gqa(1, 2, 2, 17, 17, d));
                shapes.push(gqa(1, 4, 1, 130, 77, d));
            }
            Preset {
                name: "sanitize",
                about: "a small grid for compute-sanitizer (memcheck, racecheck): every head dim, tails, GQA, Sq != Sk",
                shapes,
                dtypes: all_dtypes,
                causal: all_causal,
                layouts: vec![Layout::Bshd],
            }
        }
        "decode" => {
            let mut shapes = Vec::new();
            for sk in DECODE_KEYS {
                for b in DECODE_BATCHES {
                    for (h, hkv) in DECODE_HEADS {
                        for sq in DECODE_QUERIES {
                            let shape = gqa(b, h, hkv, sq, sk, DECODE_HEAD_DIM);
                            // K of B=8 x 32 heads x 128k keys has 2^32 elements: past the
                            // kernels' 32-bit indexing, so that pair is left out.
                            if b * hkv * sk * DECODE_HEAD_DIM <= evoattn::problem::MAX_INDEX {
                                shapes.push(shape);
                            }
                        }
                    }
                }
            }
            Preset {
                name: "decode",
                about: "decoding: bf16, D=128, Sq 1 and 4 against Sk 1k..128k, B 1 and 8, GQA 8:1 (H=32, Hkv=4) and none (H=Hkv=32), no mask; B=8 H=Hkv=32 Sk=128k left out (2^32 elements)",
                shapes,
                dtypes: vec![Dtype::Bf16],
                causal: vec![Causal::None],
                layouts: vec![Layout::Bhsd],
            }
        }
        other => return Err(format!("unknown preset '{other}'; presets: {}", NAMES.join(", "))),
    };
    Ok(p)
}

/// The problem-selection flags of `check`, `bench`, `gate`, `profile`, `trace` and `tune`.
#[derive(clap::Args, Debug, Default)]
pub struct ProblemArgs {
    /// A named problem set (repeatable): mission, small, long, wide, stress, seed (docs/anchors.md's
    /// 10 fp16 shapes), fa3-grid (its 36 large bf16 shapes), grid (the full correctness grid),
    /// sanitize (a small grid for compute-sanitizer), decode (Sq 1 and 4 against long Sk).
    #[arg(long = "preset", value_name = "NAME")]
    pub presets: Vec<String>,
    /// A TOML file of cases (repeatable), each `[[case]]` with `shape = "B,H,S,D[,HKV][,SK]"`
    /// and optional `dtype`, `causal`, `layout` (a string or a list of strings).
    #[arg(long = "workload", value_name = "FILE.toml")]
    pub workloads: Vec<std::path::PathBuf>,
    /// A shape B,H,S,D[,HKV][,SK] (repeatable). HKV divides H (GQA); SK defaults to S.
    #[arg(long = "shape", value_name = "B,H,S,D[,HKV][,SK]")]
    pub shapes: Vec<String>,
    /// Element types, comma-separated: f16, bf16, e4m3, e4m3f16 or all (all: f16 and bf16; the
    /// E4M3 ones by name, drawn as E4M3 with a descale per batch and KV head, O in bf16, or in
    /// f16 for e4m3f16). Default: each preset's (or workload case's) own, else f16.
    #[arg(long, value_delimiter = ',')]
    pub dtype: Vec<String>,
    /// Masks, comma-separated: none, top-left, bottom-right or all. `--causal` alone means
    /// top-left (PyTorch is_causal=True). Default: each preset's (or workload case's) own, else
    /// none.
    #[arg(long, value_delimiter = ',', num_args = 0..=1, default_missing_value = "top-left")]
    pub causal: Vec<String>,
    /// Layouts, comma-separated: bhsd, bshd or all. Default: each preset's (or workload case's)
    /// own, else bhsd.
    #[arg(long, value_delimiter = ',')]
    pub layout: Vec<String>,
    /// How E4M3 cases hold V: `rows` (as --layout says) or `bhds`, transposed ([B, Hkv, D, Sk],
    /// keys contiguous, Sk padded to 16), which FP8 wgmma reads as it is (no transpose of V).
    /// The answer and the peers take the same V in rows; records name the layout `bhsd/v-bhds`.
    #[arg(long, value_name = "ORDER", default_value = "rows", value_parser = parse_v_layout)]
    pub v_layout: VLayout,
}

/// How a case holds V (`--v-layout`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum VLayout {
    /// In rows, as the case's layout says.
    #[default]
    Rows,
    /// Transposed: [B, Hkv, D, Sk], keys contiguous (E4M3 only).
    Bhds,
}

/// One `--v-layout` value.
pub fn parse_v_layout(text: &str) -> Result<VLayout, String> {
    match text.to_ascii_lowercase().as_str() {
        "rows" => Ok(VLayout::Rows),
        "bhds" => Ok(VLayout::Bhds),
        _ => Err(format!("'{text}': expected rows or bhds")),
    }
}

/// A case's layout as records and tables name it: the layout, and `/v-bhds` where V is given
/// transposed.
pub fn layout_label(problem: &Problem, layout: Layout) -> String {
    if problem.v_keys_contiguous() {
        format!("{layout}/v-bhds")
    } else {
        layout.name().to_string()
    }
}

/// One `--layout` value (clap's parser for the commands that take a single layout).
pub fn parse_layout(text: &str) -> Result<Layout, String> {
    let names: Vec<&str> = Layout::ALL.iter().map(|l| l.name()).collect();
    Layout::parse(text).ok_or_else(|| format!("'{text}': expected {}", one_of(&names)))
}

/// `names` as a sentence's list: `a, b or c`.
pub fn one_of(names: &[&str]) -> String {
    match names {
        [] => String::new(),
        [one] => one.to_string(),
        [init @ .., last] => format!("{} or {last}", init.join(", ")),
    }
}

/// The error for a value no parser takes: what it is not, and what there is.
fn unknown(what: &str, value: &str, names: &[&str]) -> anyhow::Error {
    anyhow::anyhow!("{what} '{value}' is not supported: expected {}", one_of(names))
}

/// `--dtype`'s values: any dtype by name; `all` is the 16-bit ones (which every family takes),
/// and E4M3 comes only by name.
fn parse_dtypes(values: &[String]) -> anyhow::Result<Option<Vec<Dtype>>> {
    let Some(mut listed) = parse_list(values, &Dtype::ALL, Dtype::parse, Dtype::name, "dtype")? else {
        return Ok(None);
    };
    if values.iter().any(|v| v.eq_ignore_ascii_case("all")) {
        let named: Vec<Dtype> = values.iter().filter_map(|v| Dtype::parse(v)).collect();
        listed.retain(|d| Dtype::SIXTEEN_BIT.contains(d) || named.contains(d));
    }
    Ok(Some(listed))
}

/// A comma-separated flag's values (`--dtype`, `--causal`, `--layout`), or `None` when the flag
/// is not given; `all` is every value in `all`.
fn parse_list<T>(
    values: &[String],
    all: &[T],
    parse: impl Fn(&str) -> Option<T>,
    name: impl Fn(T) -> &'static str,
    what: &str,
) -> anyhow::Result<Option<Vec<T>>>
where
    T: Copy + PartialEq,
{
    if values.is_empty() {
        return Ok(None);
    }
    let mut out = Vec::new();
    let mut every = false;
    for v in values {
        // `all` takes every value, but what else the list says must still be one.
        if v.eq_ignore_ascii_case("all") {
            every = true;
            continue;
        }
        let names: Vec<&str> = all.iter().map(|&x| name(x)).chain(["all"]).collect();
        let item = parse(v).ok_or_else(|| unknown(what, v, &names))?;
        if !out.contains(&item) {
            out.push(item);
        }
    }
    Ok(Some(if every { all.to_vec() } else { out }))
}

impl ProblemArgs {
    /// Expands presets and shapes into problems (with LSE, for checking), each with its layout.
    pub fn expand(&self) -> anyhow::Result<Vec<(Problem, Layout)>> {
        let args = self;
        // The flags' lists first: a value no kernel has is named as such, problems given or not.
        let dtypes = parse_dtypes(&args.dtype)?;
        let causals = parse_list(&args.causal, &Causal::ALL, Causal::parse, Causal::name, "mask")?;
        let layouts = parse_list(&args.layout, &Layout::ALL, Layout::parse, Layout::name, "layout")?;
        let mut sets: Vec<Preset> = Vec::new();
        for name in &args.presets {
            let set = preset(name).map_err(anyhow::Error::msg)?;
            errln!("preset {}: {}", set.name, set.about);
            sets.push(set);
        }
        for path in &args.workloads {
            sets.extend(read_workload(path)?);
        }
        if !args.shapes.is_empty() {
            let shapes = args
                .shapes
                .iter()
                .map(|s| Shape::parse(s))
                .collect::<Result<Vec<_>, _>>()
                .map_err(anyhow::Error::msg)?;
            sets.push(Preset {
                name: "shapes",
                about: "",
                shapes,
                dtypes: vec![Dtype::F16],
                causal: vec![Causal::None],
                layouts: vec![Layout::Bhsd],
            });
        }
        if sets.is_empty() {
            bail!("no problems given: use --preset NAME, --shape B,H,S,D or --workload FILE.toml (see --help)");
        }
        let mut out = Vec::new();
        for set in &sets {
            for shape in &set.shapes {
                for &dtype in dtypes.as_deref().unwrap_or(&set.dtypes) {
                    for &causal in causals.as_deref().unwrap_or(&set.causal) {
                        for &layout in layouts.as_deref().unwrap_or(&set.layouts) {
                            let mut problem = Problem::dense(*shape, dtype, layout).with_causal(causal).with_lse(true);
                            if args.v_layout == VLayout::Bhds {
                                if !dtype.is_fp8() {
                                    bail!(
                                        "--v-layout bhds holds V transposed, which only E4M3 inputs take; case {shape} \
                                         is {dtype}"
                                    );
                                }
                                problem = problem.with_v_keys_contiguous();
                            }
                            problem.validate().with_context(|| format!("shape {shape}"))?;
                            out.push((problem, layout));
                        }
                    }
                }
            }
        }
        Ok(out)
    }
}

/// One string or a list of them, as a workload file may give either.
#[derive(serde::Deserialize)]
#[serde(untagged)]
enum OneOrMany {
    One(String),
    Many(Vec<String>),
}

impl OneOrMany {
    fn items(&self) -> Vec<&str> {
        match self {
            OneOrMany::One(s) => vec![s.as_str()],
            OneOrMany::Many(v) => v.iter().map(String::as_str).collect(),
        }
    }
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct WorkloadCase {
    shape: String,
    dtype: Option<OneOrMany>,
    causal: Option<OneOrMany>,
    layout: Option<OneOrMany>,
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct WorkloadFile {
    case: Vec<WorkloadCase>,
}

fn parse_items<T: Copy>(
    items: Option<&OneOrMany>,
    (default, all): (T, &[T]),
    parse: impl Fn(&str) -> Option<T>,
    name: impl Fn(T) -> &'static str,
    what: &str,
) -> anyhow::Result<Vec<T>> {
    let names: Vec<&str> = all.iter().map(|&x| name(x)).collect();
    match items {
        None => Ok(vec![default]),
        // An empty list would drop the case without a word.
        Some(list) if list.items().is_empty() => bail!("an empty {what} list (leave the key out for the default)"),
        Some(list) => list.items().into_iter().map(|v| parse(v).ok_or_else(|| unknown(what, v, &names))).collect(),
    }
}

/// Reads a workload file into one set per case.
fn read_workload(path: &std::path::Path) -> anyhow::Result<Vec<Preset>> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading workload {}", path.display()))?;
    let file: WorkloadFile = toml::from_str(&text).with_context(|| format!("workload {}", path.display()))?;
    file.case
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let context = || format!("workload {} case {}", path.display(), i + 1);
            Ok(Preset {
                name: "workload",
                about: "",
                shapes: vec![Shape::parse(&c.shape).map_err(anyhow::Error::msg).with_context(context)?],
                dtypes: parse_items(
                    c.dtype.as_ref(),
                    (Dtype::F16, &Dtype::SIXTEEN_BIT),
                    Dtype::parse,
                    Dtype::name,
                    "dtype",
                )
                .with_context(context)?,
                causal: parse_items(
                    c.causal.as_ref(),
                    (Causal::None, &Causal::ALL),
                    Causal::parse,
                    Causal::name,
                    "mask",
                )
                .with_context(context)?,
                layouts: parse_items(
                    c.layout.as_ref(),
                    (Layout::Bhsd, &Layout::ALL),
                    Layout::parse,
                    Layout::name,
                    "layout",
                )
                .with_context(context)?,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use evoattn::problem::{FA3_TOKENS, FA3_WIDTH};

    #[test]
    fn grid_covers_every_length_head_dim_and_a_gqa_pair() {
        let g = preset("grid").unwrap();
        assert_eq!(g.shapes.len(), HEAD_DIMS.len() * GRID_LENGTHS.len() * 2);
        for d in HEAD_DIMS {
            for len in GRID_LENGTHS {
                assert!(g.shapes.iter().any(|s| s.d == d && s.sq == len && s.sk == len && s.h == s.hkv));
                assert!(g.shapes.iter().any(|s| s.d == d && s.sq == len && s.sk != len && s.h == 4 * s.hkv));
            }
        }
        assert_eq!((g.dtypes.len(), g.causal.len(), g.layouts.len()), (2, 3, 2));
    }

    #[test]
    fn decode_covers_the_issue_grid_within_32_bit_indexing() {
        let d = preset("decode").unwrap();
        // 4 Sk x 2 B x 2 head settings x 2 Sq, less B=8 H=Hkv=32 Sk=128k at both Sq.
        assert_eq!(d.shapes.len(), 4 * 2 * 2 * 2 - 2);
        assert!(d.shapes.iter().all(|s| s.d == 128 && s.h == 32 && s.sq <= 4));
        assert!(d.shapes.contains(&gqa(8, 32, 4, 1, 131072, 128)));
        assert!(d.shapes.contains(&gqa(1, 32, 32, 4, 131072, 128)));
        assert!(!d.shapes.contains(&gqa(8, 32, 32, 1, 131072, 128)));
        assert_eq!((d.dtypes.as_slice(), d.causal.as_slice()), (&[Dtype::Bf16][..], &[Causal::None][..]));
        for s in &d.shapes {
            Problem::dense(*s, Dtype::Bf16, Layout::Bhsd).validate().unwrap();
        }
    }

    #[test]
    fn workload_files_expand_to_cases() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("w.toml");
        std::fs::write(
            &path,
            "[[case]]\nshape = \"2,8,300,64,2,500\"\ndtype = \"bf16\"\ncausal = [\"none\", \"bottom-right\"]\n\n[[case]]\nshape = \"1,4,17,128\"\nlayout = \"bshd\"\n",
        )
        .unwrap();
        let args = ProblemArgs { workloads: vec![path.clone()], ..Default::default() };
        let cases = args.expand().unwrap();
        assert_eq!(cases.len(), 3);
        assert_eq!(cases[0].0.shape, Shape { b: 2, h: 8, hkv: 2, sq: 300, sk: 500, d: 64 });
        assert_eq!((cases[1].0.dtype, cases[1].0.causal), (Dtype::Bf16, Causal::BottomRight));
        assert_eq!((cases[2].0.dtype, cases[2].1), (Dtype::F16, Layout::Bshd));
        std::fs::write(&path, "[[case]]\nshape = \"1,4,17,128\"\ndtpye = \"bf16\"\n").unwrap();
        let err = format!("{:#}", args.expand().unwrap_err());
        assert!(err.contains("dtpye"), "{err}");
    }

    #[test]
    fn anchor_presets_match_anchors_md() {
        let seed = preset("seed").unwrap();
        assert_eq!(seed.shapes.len() * seed.causal.len(), 10);
        let fa3 = preset("fa3-grid").unwrap();
        assert_eq!(fa3.shapes.len() * fa3.causal.len(), 36);
        // e.g. the hd128 16k row: B=1, H=16
        assert!(fa3.shapes.contains(&Shape::new(1, 16, 16384, 128)));
        assert!(fa3.shapes.contains(&Shape::new(32, 32, 512, 64)));
        assert!(fa3.shapes.iter().all(|s| s.b * s.sq == FA3_TOKENS && s.h * s.d == FA3_WIDTH));
    }

    #[test]
    fn every_named_preset_resolves() {
        for name in NAMES {
            assert_eq!(preset(name).unwrap().name, name);
        }
        assert!(preset("nope").unwrap_err().contains("mission, small, long"));
    }
}
