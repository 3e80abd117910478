//! Named problem sets for `check` (and later `bench`): shapes, plus the dtypes, masks and
//! layouts a preset covers when the command line does not say.

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

pub const NAMES: [&str; 4] = ["mission", "small", "grid", "sanitize"];

fn gqa(b: usize, h: usize, hkv: usize, sq: usize, sk: usize, d: usize) -> Shape {
    Shape { b, h, hkv, sq, sk, d }
}

pub fn preset(name: &str) -> Result<Preset, String> {
    let all_dtypes = Dtype::ALL.to_vec();
    let all_causal = Causal::ALL.to_vec();
    let both_layouts = vec![Layout::Bhsd, Layout::Bshd];
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
        other => return Err(format!("unknown preset '{other}'; presets: {}", NAMES.join(", "))),
    };
    Ok(p)
}

/// The problem-selection flags `check` and `bench` share.
#[derive(clap::Args, Debug, Default)]
pub struct ProblemArgs {
    /// A named problem set (repeatable): mission, small, grid (the full correctness grid),
    /// sanitize (a small grid for compute-sanitizer).
    #[arg(long = "preset", value_name = "NAME")]
    pub presets: Vec<String>,
    /// A shape B,H,S,D[,HKV][,SK] (repeatable). HKV divides H (GQA); SK defaults to S.
    #[arg(long = "shape", value_name = "B,H,S,D[,HKV][,SK]")]
    pub shapes: Vec<String>,
    /// Element types, comma-separated: f16, bf16 or all. Default: the preset's, else f16.
    #[arg(long, value_delimiter = ',')]
    pub dtype: Vec<String>,
    /// Masks, comma-separated: none, top-left, bottom-right or all. `--causal` alone means
    /// top-left (PyTorch is_causal=True). Default: the preset's, else none.
    #[arg(long, value_delimiter = ',', num_args = 0..=1, default_missing_value = "top-left")]
    pub causal: Vec<String>,
    /// Layouts, comma-separated: bhsd, bshd or all. Default: the preset's, else bhsd.
    #[arg(long, value_delimiter = ',')]
    pub layout: Vec<String>,
}

fn parse_list<T>(
    values: &[String],
    fallback: &[T],
    all: &[T],
    parse: impl Fn(&str) -> Option<T>,
    what: &str,
) -> anyhow::Result<Vec<T>>
where
    T: Copy + PartialEq,
{
    if values.is_empty() {
        return Ok(fallback.to_vec());
    }
    let mut out = Vec::new();
    for v in values {
        if v.eq_ignore_ascii_case("all") {
            return Ok(all.to_vec());
        }
        let item = parse(v).with_context(|| format!("unknown {what} '{v}'"))?;
        if !out.contains(&item) {
            out.push(item);
        }
    }
    Ok(out)
}

impl ProblemArgs {
    /// Expands presets and shapes into problems (with LSE, for checking), each with its layout.
    pub fn expand(&self) -> anyhow::Result<Vec<(Problem, Layout)>> {
        let args = self;
        let mut sets: Vec<Preset> = Vec::new();
        for name in &args.presets {
            let set = preset(name).map_err(anyhow::Error::msg)?;
            eprintln!("preset {}: {}", set.name, set.about);
            sets.push(set);
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
            bail!("nothing to check: give --preset NAME or --shape B,H,S,D (see `evoattn check --help`)");
        }
        let layouts_all = [Layout::Bhsd, Layout::Bshd];
        let mut out = Vec::new();
        for set in &sets {
            let dtypes = parse_list(&args.dtype, &set.dtypes, &Dtype::ALL, Dtype::parse, "dtype")?;
            let causals = parse_list(&args.causal, &set.causal, &Causal::ALL, Causal::parse, "mask")?;
            let layouts = parse_list(&args.layout, &set.layouts, &layouts_all, Layout::parse, "layout")?;
            for shape in &set.shapes {
                for &dtype in &dtypes {
                    for &causal in &causals {
                        for &layout in &layouts {
                            let problem = Problem::dense(*shape, dtype, layout).with_causal(causal).with_lse(true);
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

#[cfg(test)]
mod tests {
    use super::*;

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
    fn every_named_preset_resolves() {
        for name in NAMES {
            assert_eq!(preset(name).unwrap().name, name);
        }
        assert!(preset("nope").unwrap_err().contains("mission, small, grid, sanitize"));
    }
}
