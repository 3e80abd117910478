//! The lever table: each kernel family declares its levers once (name, short key, what it does,
//! how to read and write it), and everything a lever appears in is derived from that table: the
//! `--config` text and its parsing, the kernel's name, its `-D` defines, the tuner's space and
//! the lever docs.

use super::{Impl, TensorMapRows};
use crate::arch::Arch;
use crate::problem::{Dtype, Shape};

/// How a lever's value is held and written.
pub enum Kind<C> {
    /// A number (`block_n=128`), written as its `EVOATTN_<NAME>` define; `values` are those the
    /// kernel is written for (what the tuner draws from).
    Num { values: &'static [u32], get: fn(&C) -> u32, set: fn(&mut C, u32) },
    /// On or off (`persistent=1`), written as 0 or 1.
    Flag { get: fn(&C) -> bool, set: fn(&mut C, bool) },
    /// One of `names` (`loads=tma`); the preprocessor compares numbers, not names, so its
    /// define is `define` set to the name's index.
    Choice { names: &'static [&'static str], define: &'static str, get: fn(&C) -> usize, set: fn(&mut C, usize) },
    /// One value of a typed axis (`pipeline=pingpong`), which sets several of the kernel's
    /// defines at once: a combination of them that no value sets cannot be written.
    Axis { variants: &'static [Variant], get: fn(&C) -> usize, set: fn(&mut C, usize) },
}

/// One value of a typed axis.
pub struct Variant {
    /// As `--config` writes it.
    pub name: &'static str,
    /// Its key in the kernel's name, after the lever's short key.
    pub key: &'static str,
    /// What it does, in one line.
    pub about: &'static str,
    /// The defines it sets (lower case, without `EVOATTN_`), in order.
    pub defines: &'static [(&'static str, u32)],
}

/// A lever that a typed axis replaced, as older `--config` text writes it (`overlap=1`,
/// `loads=tma`): it sets one define of an axis, to its number or (with `names`) its name's index.
pub struct Retired {
    pub key: &'static str,
    pub define: &'static str,
    pub names: &'static [&'static str],
}

impl Retired {
    /// An on/off or numeric lever that set the define of its own name.
    pub const fn same(key: &'static str) -> Retired {
        Retired { key, define: key, names: &[] }
    }
}

/// When a lever is rendered in `--config` text and the kernel's name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shown {
    /// Always; a tuning lever.
    Always,
    /// Only when on, and out of the tuner's space: instrumentation (`trace`), or a switch added
    /// after the kernels' names were recorded that the planner sets (`vt_producer`), so that
    /// every other kernel keeps its name.
    WhenOn,
    /// Only when not its first value, and a tuning lever: an axis added after the kernels'
    /// names were recorded (`gemm`), so that every kernel of its first value keeps its name.
    WhenNotFirst,
}

/// One lever of a kernel family.
pub struct Lever<C> {
    /// As `--config` takes it.
    pub name: &'static str,
    /// Its key in the kernel's name (`bn128`).
    pub short: &'static str,
    /// What it does, in one line (`--help`, the README's lever tables).
    pub about: &'static str,
    /// When it is rendered (in `--config` text and the name), and whether the tuner draws it.
    pub shown: Shown,
    /// Whether the tuner's space at a head dim (the second argument) holds this lever's value
    /// in the config.
    pub tuned_at: fn(&C, usize) -> bool,
    pub kind: Kind<C>,
}

impl<C> Lever<C> {
    /// The value as `--config` writes it; `None` when it is not rendered.
    pub fn value(&self, c: &C) -> Option<String> {
        match &self.kind {
            Kind::Num { get, .. } => Some(get(c).to_string()),
            Kind::Flag { get, .. } if self.shown == Shown::WhenOn && !get(c) => None,
            Kind::Axis { get, .. } if self.shown == Shown::WhenNotFirst && get(c) == 0 => None,
            Kind::Flag { get, .. } => Some(u32::from(get(c)).to_string()),
            Kind::Choice { names, get, .. } => Some(names[get(c)].to_string()),
            Kind::Axis { variants, get, .. } => Some(variants[get(c)].name.to_string()),
        }
    }

    /// Its part of the kernel's name (`_bn128`); `None` when it is not rendered.
    fn name_part(&self, c: &C) -> Option<String> {
        match &self.kind {
            Kind::Axis { variants, get, .. } => {
                self.value(c).map(|_| format!("_{}{}", self.short, variants[get(c)].key))
            }
            _ => self.value(c).map(|v| format!("_{}{v}", self.short)),
        }
    }

    /// The key a short kernel name writes it by: its short key for a number or a switch; `None`
    /// for a named value, written by the lever's name.
    pub fn short_key(&self) -> Option<&'static str> {
        match &self.kind {
            Kind::Num { .. } | Kind::Flag { .. } => Some(self.short),
            Kind::Choice { .. } | Kind::Axis { .. } => None,
        }
    }

    /// Its item in a short kernel name (`bn=64`, `pipeline=pingpong`), `None` when it is not
    /// rendered: a number or a switch by its short key (the kernel name's), a named value by the
    /// lever's name (the value is a word that says what it is).
    fn short_item(&self, c: &C) -> Option<String> {
        let value = self.value(c)?;
        Some(format!("{}={value}", self.short_key().unwrap_or(self.name)))
    }

    /// Reads its part of a kernel name ([`Self::name_part`]) off the front of `rest` into `c`,
    /// and returns what follows; `None` when `rest` does not start with it. A lever rendered
    /// only when set ([`Shown`]) that has no part reads as unset (off, or its first value).
    fn read_name_part<'a>(&self, c: &mut C, rest: &'a str) -> Option<&'a str> {
        let Some(after) = rest.strip_prefix('_').and_then(|r| r.strip_prefix(self.short)) else {
            return match &self.kind {
                Kind::Flag { set, .. } if self.shown == Shown::WhenOn => {
                    set(c, false);
                    Some(rest)
                }
                Kind::Axis { set, .. } if self.shown == Shown::WhenNotFirst => {
                    set(c, 0);
                    Some(rest)
                }
                _ => None,
            };
        };
        // A named value: the longest name followed by the next part (or the end); names may hold `_`.
        let named = |names: &[&str]| -> Option<(usize, &'a str)> {
            let mut found: Option<(usize, &'a str, usize)> = None;
            for (i, name) in names.iter().enumerate() {
                if let Some(tail) = after.strip_prefix(name) {
                    let whole = tail.is_empty() || tail.starts_with('_');
                    if whole && found.is_none_or(|(_, _, len)| name.len() > len) {
                        found = Some((i, tail, name.len()));
                    }
                }
            }
            found.map(|(i, tail, _)| (i, tail))
        };
        match &self.kind {
            Kind::Num { set, .. } => {
                let digits = after.find(|ch: char| !ch.is_ascii_digit()).unwrap_or(after.len());
                set(c, after[..digits].parse().ok()?);
                Some(&after[digits..])
            }
            Kind::Flag { set, .. } => {
                let on = match after.as_bytes().first()? {
                    b'0' => false,
                    b'1' => true,
                    _ => return None,
                };
                set(c, on);
                Some(&after[1..])
            }
            Kind::Choice { names, set, .. } => {
                let (i, tail) = named(names)?;
                set(c, i);
                Some(tail)
            }
            Kind::Axis { variants, set, .. } => {
                let keys: Vec<&str> = variants.iter().map(|v| v.key).collect();
                let (i, tail) = named(&keys)?;
                set(c, i);
                Some(tail)
            }
        }
    }

    /// The `-D` defines' names (without `EVOATTN_`, lower case) and values.
    pub fn defines(&self, c: &C) -> Vec<(&'static str, String)> {
        match &self.kind {
            Kind::Choice { define, get, .. } => vec![(define, get(c).to_string())],
            Kind::Axis { variants, get, .. } => {
                variants[get(c)].defines.iter().map(|(name, value)| (*name, value.to_string())).collect()
            }
            _ => self.value(c).map(|v| (self.name, v)).into_iter().collect(),
        }
    }

    /// How many values it takes (its tuning values, or its names).
    fn count(&self) -> usize {
        match &self.kind {
            Kind::Num { values, .. } => values.len(),
            Kind::Flag { .. } => 2,
            Kind::Choice { names, .. } => names.len(),
            Kind::Axis { variants, .. } => variants.len(),
        }
    }

    /// Sets its `i`-th value (of [`Self::count`]).
    fn set_index(&self, c: &mut C, i: usize) {
        match &self.kind {
            Kind::Num { values, set, .. } => set(c, values[i]),
            Kind::Flag { set, .. } => set(c, i != 0),
            Kind::Choice { set, .. } | Kind::Axis { set, .. } => set(c, i),
        }
    }

    /// Sets the lever from `--config` text (`item` is the whole `key=value`, for messages).
    fn set(&self, c: &mut C, item: &str, value: &str) -> Result<(), String> {
        match &self.kind {
            Kind::Num { set, .. } => set(c, number(item, value)?),
            Kind::Flag { set, .. } => set(c, number(item, value)? != 0),
            Kind::Choice { names, set, .. } => set(c, name_index(item, self.name, names, value)?),
            Kind::Axis { variants, set, .. } => {
                let names: Vec<&str> = variants.iter().map(|v| v.name).collect();
                set(c, name_index(item, self.name, &names, value)?)
            }
        }
        Ok(())
    }
}

/// A number as `--config` writes it (`true` and `false` are 1 and 0).
fn number(item: &str, value: &str) -> Result<u32, String> {
    match value {
        "true" => Ok(1),
        "false" => Ok(0),
        v => v.parse().map_err(|_| format!("config item '{item}': '{v}' is not a number")),
    }
}

/// The index of `value` among a lever's `names`.
fn name_index(item: &str, lever: &str, names: &[&str], value: &str) -> Result<usize, String> {
    names
        .iter()
        .position(|n| *n == value.to_ascii_lowercase())
        .ok_or_else(|| format!("config item '{item}': {lever} is one of {}, not '{value}'", names.join(", ")))
}

impl<C> Lever<C> {
    /// The values the tuner may give this lever, as `--config` writes them; none for an
    /// instrumentation lever (not a tuning lever).
    pub fn tuning_values(&self) -> Vec<String> {
        match &self.kind {
            _ if self.shown == Shown::WhenOn => Vec::new(),
            Kind::Num { values, .. } => values.iter().map(u32::to_string).collect(),
            Kind::Flag { .. } => vec!["0".into(), "1".into()],
            Kind::Choice { names, .. } => names.iter().map(|n| n.to_string()).collect(),
            Kind::Axis { variants, .. } => variants.iter().map(|v| v.name.to_string()).collect(),
        }
    }

    /// Its name and what it does, then for an axis each value's (`pipeline=pingpong`).
    pub fn docs(&self) -> Vec<(String, &'static str)> {
        let values: &[Variant] = match &self.kind {
            Kind::Axis { variants, .. } => variants,
            _ => &[],
        };
        std::iter::once((self.name.to_string(), self.about))
            .chain(values.iter().map(|v| (format!("{}={}", self.name, v.name), v.about)))
            .collect()
    }
}

/// A kernel family's levers and the geometry and checks that follow from them. One
/// implementation per family, in its folder under `kernels/`.
pub trait Family: Copy + Sized + 'static {
    const IMPL: Impl;
    /// What the family is, in one line (`info`, `compile --levers`).
    const ABOUT: &'static str;
    /// Head dims the kernel is instantiated for.
    const HEAD_DIMS: &'static [usize];
    /// Architectures the kernel compiles for.
    const ARCHS: &'static [Arch];
    /// Input dtypes the kernel is instantiated for.
    const DTYPES: &'static [Dtype] = &Dtype::SIXTEEN_BIT;
    /// The family's translation unit (its headers are `kernels::HEADERS`).
    const SOURCE: crate::kernels::SourceFile;

    /// The family's default for inputs of `dtype` (one of [`Family::DTYPES`]) at a head dim on
    /// an arch.
    fn default_for(arch: Arch, dtype: Dtype, head_dim: usize) -> Self;
    /// The default adapted to `problem` on a GPU with `sm_count` SMs; most families take the
    /// head dim's.
    fn for_problem(arch: Arch, problem: &crate::problem::Problem, sm_count: u32) -> Self {
        let _ = sm_count;
        Self::default_for(arch, problem.dtype, problem.shape.d)
    }
    /// Every lever, in the order names and `--config` text list them.
    const LEVERS: &'static [Lever<Self>];
    /// Levers that typed axes replaced, which older `--config` text still sets.
    const RETIRED: &'static [Retired] = &[];

    /// This config as the family-agnostic [`KernelConfig`](super::KernelConfig).
    fn into_config(self) -> super::KernelConfig;

    /// Threads per block.
    fn threads(&self) -> u32;
    /// Launch grid for `shape` (see [`KernelSpec::grid`](super::KernelSpec::grid)).
    fn grid(&self, shape: &Shape, splits: usize, sm_count: u32) -> [usize; 3];
    /// Dynamic shared memory per block, in bytes.
    fn dynamic_smem_bytes(&self, dtype: Dtype, head_dim: usize) -> usize;
    /// Box rows of the TMA tensor maps the kernel takes, if any.
    fn tensor_map_rows(&self) -> Option<TensorMapRows> {
        None
    }
    /// The family's own rules (its `static_assert`s); the arch, head dim and shared-memory
    /// checks every family shares are `KernelSpec::validate`'s.
    fn validate(&self, dtype: Dtype, head_dim: usize, arch: Arch) -> Result<(), String>;
    /// Defines beyond the levers' own.
    fn extra_defines(&self, _dtype: Dtype, _head_dim: usize) -> Vec<(String, String)> {
        Vec::new()
    }
    /// The kernel reads V given keys-contiguous (`Problem::v_keys_contiguous`); a problem that
    /// holds V otherwise is refused, like one that holds it so and a kernel that does not.
    fn reads_v_keys_contiguous(&self) -> bool {
        false
    }
    /// What a launch on `problem` needs beside its grid and parameters (split count, scratch),
    /// on a GPU with `sm_count` SMs holding `resident_per_sm` blocks of the kernel each; or why
    /// the kernel cannot run this problem (limits that depend on the problem, not the levers).
    fn launch_needs(
        &self,
        problem: &crate::problem::Problem,
        sm_count: u32,
        resident_per_sm: u32,
    ) -> Result<LaunchNeeds, String> {
        let _ = (problem, sm_count, resident_per_sm);
        Ok(LaunchNeeds::default())
    }
    /// Every lever combination (valid or not) for one head dim, lazily: the tuning space.
    fn space(head_dim: usize) -> Box<dyn Iterator<Item = Self>>;
}

/// What a launch of a kernel on one problem needs beside its grid and `AttnParams`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LaunchNeeds {
    /// Blocks the keys are split over (`splitkv`; 1 for every other family).
    pub splits: usize,
    /// Scratch from the launching stream's arena.
    pub scratch: crate::runtime::scratch::ScratchNeed,
    /// `splitkv`'s merge: query tiles per KV head and where the LSE partials start in the
    /// scratch floats.
    pub merge: Option<(usize, usize)>,
}

impl Default for LaunchNeeds {
    fn default() -> Self {
        LaunchNeeds { splits: 1, scratch: crate::runtime::scratch::ScratchNeed::default(), merge: None }
    }
}

/// `key=value` pairs of the levers that are rendered.
pub fn levers<C: Family>(c: &C) -> Vec<(&'static str, String)> {
    C::LEVERS.iter().filter_map(|l| l.value(c).map(|v| (l.name, v))).collect()
}

/// `c` with `key=value[,key=value]` overrides applied. Items of retired levers are applied
/// together, after the others ([`with_retired`]).
pub fn with_overrides<C: Family>(mut c: C, text: &str) -> Result<C, String> {
    let mut retired = Vec::new();
    for item in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let (key, value) = item.split_once('=').ok_or_else(|| format!("config item '{item}' is not key=value"))?;
        let (key, value) = (key.trim(), value.trim());
        if let Some(lever) = C::LEVERS.iter().find(|l| l.name == key) {
            lever.set(&mut c, item, value)?;
        } else if let Some(old) = C::RETIRED.iter().find(|r| r.key == key) {
            let v = match old.names {
                [] => number(item, value)?,
                names => name_index(item, key, names, value)? as u32,
            };
            retired.push((old, v));
        } else {
            let known: Vec<&str> = C::LEVERS.iter().map(|l| l.name).collect();
            return Err(format!("'{key}' is not a lever of {}; levers: {}", C::IMPL, known.join(", ")));
        }
    }
    if !retired.is_empty() {
        with_retired(&mut c, &retired)?;
    }
    Ok(c)
}

/// Applies retired levers' values: each axis they touch takes the value whose defines are
/// the config's with theirs over them, or the text is refused (no value of the axis sets them).
fn with_retired<C: Family>(c: &mut C, items: &[(&Retired, u32)]) -> Result<(), String> {
    let ours = |define: &str| items.iter().rev().find(|(r, _)| r.define == define).map(|&(_, v)| v);
    for lever in C::LEVERS {
        let Kind::Axis { variants, get, set } = &lever.kind else { continue };
        let now = variants[get(c)].defines;
        if now.iter().all(|(define, _)| ours(define).is_none()) {
            continue;
        }
        let wanted: Vec<(&str, u32)> = now.iter().map(|&(define, v)| (define, ours(define).unwrap_or(v))).collect();
        let Some(index) = variants.iter().position(|v| v.defines == wanted.as_slice()) else {
            // In the old form, so that the message names what the text said.
            let old = |defines: &[(&str, u32)]| {
                let items: Vec<String> = defines.iter().map(|&(d, v)| retired_item::<C>(d, v)).collect();
                items.join(",")
            };
            let values: Vec<String> = variants.iter().map(|v| format!("{} ({})", v.name, old(v.defines))).collect();
            return Err(format!(
                "{} is no {} of {}: {} is one of {}",
                old(&wanted),
                lever.name,
                C::IMPL,
                lever.name,
                values.join(", ")
            ));
        };
        set(c, index);
    }
    Ok(())
}

/// `key=value` of the retired lever that sets `define` to `value`.
fn retired_item<C: Family>(define: &str, value: u32) -> String {
    match C::RETIRED.iter().find(|r| r.define == define) {
        Some(Retired { key, names: [], .. }) => format!("{key}={value}"),
        Some(Retired { key, names, .. }) => format!("{key}={}", names.get(value as usize).unwrap_or(&"?")),
        None => format!("{define}={value}"),
    }
}

/// `_<short><value>` for every rendered lever: the part of the kernel's name its levers make.
pub fn name_suffix<C: Family>(c: &C) -> String {
    C::LEVERS.iter().filter_map(|l| l.name_part(c)).collect()
}

/// `base` with every lever read back from `suffix`, the part of a kernel's name its levers
/// make ([`name_suffix`]); `None` when `suffix` is not one.
pub fn from_name_suffix<C: Family>(mut base: C, suffix: &str) -> Option<C> {
    let mut rest = suffix;
    for lever in C::LEVERS {
        rest = lever.read_name_part(&mut base, rest)?;
    }
    rest.is_empty().then_some(base)
}

/// The levers of `c` that differ from `base`, each as a short name writes it (`bn=64`,
/// `pipeline=pingpong`), in table order: what a short kernel name adds to its family.
pub fn changed<C: Family>(c: &C, base: &C) -> Vec<String> {
    C::LEVERS.iter().filter(|l| l.value(c) != l.value(base)).filter_map(|l| l.short_item(c)).collect()
}

/// Every rendered lever of `c` as a short name writes it.
pub fn short_items<C: Family>(c: &C) -> Vec<String> {
    C::LEVERS.iter().filter_map(|l| l.short_item(c)).collect()
}

/// The levers' `-D` defines, in table order.
pub fn defines<C: Family>(c: &C) -> Vec<(String, String)> {
    C::LEVERS
        .iter()
        .flat_map(|l| l.defines(c))
        .map(|(name, value)| (format!("EVOATTN_{}", name.to_ascii_uppercase()), value))
        .collect()
}

/// The tuning space at `head_dim`: every combination of the tuning levers' values that
/// `tuned_at` keeps, the other levers as in `base`; lazily, the first lever varying slowest.
pub fn product<C: Family>(base: C, head_dim: usize) -> impl Iterator<Item = C> + Clone {
    let levers: Vec<(&'static Lever<C>, Vec<usize>)> = C::LEVERS
        .iter()
        .filter(|l| l.shown != Shown::WhenOn)
        .map(|l| {
            let kept = (0..l.count()).filter(|&i| {
                let mut c = base;
                l.set_index(&mut c, i);
                (l.tuned_at)(&c, head_dim)
            });
            (l, kept.collect())
        })
        .collect();
    let total: usize = levers.iter().map(|(_, kept)| kept.len()).product();
    (0..total).map(move |mut i| {
        let mut c = base;
        for (lever, kept) in levers.iter().rev() {
            lever.set_index(&mut c, kept[i % kept.len()]);
            i /= kept.len();
        }
        c
    })
}

/// A lever's value must be one its kernel is written for.
pub fn one_of(lever: &str, value: u32, allowed: &[u32]) -> Result<(), String> {
    if allowed.contains(&value) {
        Ok(())
    } else {
        Err(format!("{lever}={value} must be one of {allowed:?}"))
    }
}

/// Table entries, one line each: `num!(name, short, field, &VALUES, "about")`, `flag!(..)`; a
/// trailing `tuned_at: |c, head_dim| ..` keeps some values out of a head dim's tuning space.
macro_rules! num {
    ($name:literal, $short:literal, $field:ident, $values:expr, $about:literal $(, tuned_at: $tuned:expr)?) => {
        $crate::config::lever::Lever {
            name: $name,
            short: $short,
            about: $about,
            shown: $crate::config::lever::Shown::Always,
            tuned_at: $crate::config::lever::tuned_at!($($tuned)?),
            kind: $crate::config::lever::Kind::Num { values: $values, get: |c| c.$field, set: |c, v| c.$field = v },
        }
    };
}

/// `flag!(.., shown_only_when_on)`: a switch rendered (name, `--config` text) only when on, and
/// out of the tuner's space.
macro_rules! flag {
    ($name:literal, $short:literal, $field:ident, $about:literal, shown_only_when_on) => {
        $crate::config::lever::Lever {
            name: $name,
            short: $short,
            about: $about,
            shown: $crate::config::lever::Shown::WhenOn,
            tuned_at: |_, _| true,
            kind: $crate::config::lever::Kind::Flag { get: |c| c.$field, set: |c, v| c.$field = v },
        }
    };
    ($name:literal, $short:literal, $field:ident, $about:literal $(, tuned_at: $tuned:expr)?) => {
        $crate::config::lever::Lever {
            name: $name,
            short: $short,
            about: $about,
            shown: $crate::config::lever::Shown::Always,
            tuned_at: $crate::config::lever::tuned_at!($($tuned)?),
            kind: $crate::config::lever::Kind::Flag { get: |c| c.$field, set: |c, v| c.$field = v },
        }
    };
}

/// A typed axis: `$ty` has `ALL` and `VARIANTS` (its [`Variant`]s) in its discriminants' order.
/// `axis!(.., shown_when_not_first)`: rendered only when not its first value ([`Shown`]).
macro_rules! axis {
    ($name:literal, $short:literal, $field:ident, $ty:ty, $about:literal, shown_when_not_first) => {
        $crate::config::lever::Lever {
            shown: $crate::config::lever::Shown::WhenNotFirst,
            ..$crate::config::lever::axis!($name, $short, $field, $ty, $about)
        }
    };
    ($name:literal, $short:literal, $field:ident, $ty:ty, $about:literal $(, tuned_at: $tuned:expr)?) => {
        $crate::config::lever::Lever {
            name: $name,
            short: $short,
            about: $about,
            shown: $crate::config::lever::Shown::Always,
            tuned_at: $crate::config::lever::tuned_at!($($tuned)?),
            kind: $crate::config::lever::Kind::Axis {
                variants: &<$ty>::VARIANTS,
                get: |c| c.$field as usize,
                set: |c, i| c.$field = <$ty>::ALL[i],
            },
        }
    };
}

/// The `tuned_at` of a table entry: the given one, or every value at every head dim.
macro_rules! tuned_at {
    () => {
        |_, _| true
    };
    ($tuned:expr) => {
        $tuned
    };
}

/// A lever that is one of an enum's values: `$ty` has `ALL` and `NAMES` in its discriminants' order.
macro_rules! choice {
    ($name:literal, $short:literal, $field:ident, $ty:ty, $define:literal, $about:literal) => {
        $crate::config::lever::Lever {
            name: $name,
            short: $short,
            about: $about,
            shown: $crate::config::lever::Shown::Always,
            tuned_at: |_, _| true,
            kind: $crate::config::lever::Kind::Choice {
                names: &<$ty>::NAMES,
                define: $define,
                get: |c| c.$field as usize,
                set: |c, i| c.$field = <$ty>::ALL[i],
            },
        }
    };
}

pub(crate) use {axis, choice, flag, num, tuned_at};
