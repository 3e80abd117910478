//! The lever table: each kernel family declares its levers once (name, short key, what it does,
//! how to read and write it), and everything a lever appears in is derived from that table: the
//! `--config` text and its parsing, the kernel's name, its `-D` defines and the lever docs.

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
}

/// One lever of a kernel family.
pub struct Lever<C> {
    /// As `--config` takes it.
    pub name: &'static str,
    /// Its key in the kernel's name (`bn128`).
    pub short: &'static str,
    /// What it does, in one line (`--help`, the README's lever tables).
    pub about: &'static str,
    /// Rendered (in `--config` text and the name) only when on: instrumentation, not tuning,
    /// so that every other kernel keeps its name.
    pub shown_only_when_on: bool,
    pub kind: Kind<C>,
}

impl<C> Lever<C> {
    /// The value as `--config` writes it; `None` when it is not rendered.
    pub fn value(&self, c: &C) -> Option<String> {
        match &self.kind {
            Kind::Num { get, .. } => Some(get(c).to_string()),
            Kind::Flag { get, .. } if self.shown_only_when_on && !get(c) => None,
            Kind::Flag { get, .. } => Some(u32::from(get(c)).to_string()),
            Kind::Choice { names, get, .. } => Some(names[get(c)].to_string()),
        }
    }

    /// The `-D` define's name (without `EVOATTN_`, lower case) and value.
    pub fn define(&self, c: &C) -> Option<(&'static str, String)> {
        match &self.kind {
            Kind::Choice { define, get, .. } => Some((define, get(c).to_string())),
            _ => self.value(c).map(|v| (self.name, v)),
        }
    }

    /// Sets the lever from `--config` text (`item` is the whole `key=value`, for messages).
    fn set(&self, c: &mut C, item: &str, value: &str) -> Result<(), String> {
        let number = || -> Result<u32, String> {
            match value {
                "true" => Ok(1),
                "false" => Ok(0),
                v => v.parse().map_err(|_| format!("config item '{item}': '{v}' is not a number")),
            }
        };
        match &self.kind {
            Kind::Num { set, .. } => set(c, number()?),
            Kind::Flag { set, .. } => set(c, number()? != 0),
            Kind::Choice { names, set, .. } => {
                let index = names.iter().position(|n| *n == value.to_ascii_lowercase()).ok_or_else(|| {
                    format!("config item '{item}': {} is one of {}, not '{value}'", self.name, names.join(", "))
                })?;
                set(c, index);
            }
        }
        Ok(())
    }
}

impl<C> Lever<C> {
    /// The values the tuner may give this lever, as `--config` writes them; none for an
    /// instrumentation lever (not a tuning lever).
    pub fn tuning_values(&self) -> Vec<String> {
        match &self.kind {
            _ if self.shown_only_when_on => Vec::new(),
            Kind::Num { values, .. } => values.iter().map(u32::to_string).collect(),
            Kind::Flag { .. } => vec!["0".into(), "1".into()],
            Kind::Choice { names, .. } => names.iter().map(|n| n.to_string()).collect(),
        }
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
    /// The family's translation unit (its headers are `kernels::HEADERS`).
    const SOURCE: crate::kernels::SourceFile;

    /// The family's default for a head dim on an arch.
    fn default_for(arch: Arch, head_dim: usize) -> Self;
    /// The default adapted to `problem` on a GPU with `sm_count` SMs; most families take the
    /// head dim's.
    fn for_problem(arch: Arch, problem: &crate::problem::Problem, sm_count: u32) -> Self {
        let _ = sm_count;
        Self::default_for(arch, problem.shape.d)
    }
    /// Every lever, in the order names and `--config` text list them.
    const LEVERS: &'static [Lever<Self>];

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
    /// Every lever combination (valid or not) for one head dim, lazily: the tuning space.
    fn space(head_dim: usize) -> Box<dyn Iterator<Item = Self>>;
}

/// `key=value` pairs of the levers that are rendered.
pub fn levers<C: Family>(c: &C) -> Vec<(&'static str, String)> {
    C::LEVERS.iter().filter_map(|l| l.value(c).map(|v| (l.name, v))).collect()
}

/// `c` with `key=value[,key=value]` overrides applied.
pub fn with_overrides<C: Family>(mut c: C, text: &str) -> Result<C, String> {
    for item in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let (key, value) = item.split_once('=').ok_or_else(|| format!("config item '{item}' is not key=value"))?;
        let key = key.trim();
        let lever = C::LEVERS.iter().find(|l| l.name == key).ok_or_else(|| {
            let known: Vec<&str> = C::LEVERS.iter().map(|l| l.name).collect();
            format!("'{key}' is not a lever of {}; levers: {}", C::IMPL, known.join(", "))
        })?;
        lever.set(&mut c, item, value.trim())?;
    }
    Ok(c)
}

/// `_<short><value>` for every rendered lever: the part of the kernel's name its levers make.
pub fn name_suffix<C: Family>(c: &C) -> String {
    C::LEVERS.iter().filter_map(|l| l.value(c).map(|v| format!("_{}{v}", l.short))).collect()
}

/// The levers' `-D` defines, in table order.
pub fn defines<C: Family>(c: &C) -> Vec<(String, String)> {
    C::LEVERS
        .iter()
        .filter_map(|l| l.define(c))
        .map(|(name, value)| (format!("EVOATTN_{}", name.to_ascii_uppercase()), value))
        .collect()
}

/// A lever's value must be one its kernel is written for.
pub fn one_of(lever: &str, value: u32, allowed: &[u32]) -> Result<(), String> {
    if allowed.contains(&value) {
        Ok(())
    } else {
        Err(format!("{lever}={value} must be one of {allowed:?}"))
    }
}

/// Table entries, one line each: `num!(name, short, field, &VALUES, "about")`, `flag!(..)`.
macro_rules! num {
    ($name:literal, $short:literal, $field:ident, $values:expr, $about:literal) => {
        $crate::config::lever::Lever {
            name: $name,
            short: $short,
            about: $about,
            shown_only_when_on: false,
            kind: $crate::config::lever::Kind::Num { values: $values, get: |c| c.$field, set: |c, v| c.$field = v },
        }
    };
}

macro_rules! flag {
    ($name:literal, $short:literal, $field:ident, $about:literal) => {
        $crate::config::lever::Lever {
            name: $name,
            short: $short,
            about: $about,
            shown_only_when_on: false,
            kind: $crate::config::lever::Kind::Flag { get: |c| c.$field, set: |c, v| c.$field = v },
        }
    };
}

/// A lever that is one of an enum's values: `$ty` has `ALL` and `NAMES` in its discriminants' order.
macro_rules! choice {
    ($name:literal, $short:literal, $field:ident, $ty:ty, $define:literal, $about:literal) => {
        $crate::config::lever::Lever {
            name: $name,
            short: $short,
            about: $about,
            shown_only_when_on: false,
            kind: $crate::config::lever::Kind::Choice {
                names: &<$ty>::NAMES,
                define: $define,
                get: |c| c.$field as usize,
                set: |c, i| c.$field = <$ty>::ALL[i],
            },
        }
    };
}

pub(crate) use {choice, flag, num};
