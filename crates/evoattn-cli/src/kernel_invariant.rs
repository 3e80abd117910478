//! The redesign's invariant (issue 33): the planner picks the same kernel for every preset
//! problem, and every recorded kernel compiles to the same CUBIN, byte for byte.
//!
//! `tests/data/kernel-invariant/plans.tsv` holds, per problem of every preset and per arch, the
//! kernel `auto` and each named family plan; `cubins.tsv` holds each of those kernels and a
//! deterministic sample of each family's tuning space, with the SHA-256 of the CUBIN NVRTC
//! produces. Regenerate both (only when a change is meant to alter kernels, and say so in the
//! commit) with `EVOATTN_WRITE_INVARIANT=1 cargo test -p evoattn-cli --release kernel_invariant`.

use crate::lab::presets::{preset, HEAD_DIMS, NAMES};
use evoattn::plan::plan;
use evoattn::runtime::compile::compile_parallel;
use evoattn::runtime::nvrtc::Nvrtc;
use evoattn::{defaults, Arch, Causal, Dtype, Impl, KernelSpec, Layout, Problem, Request, Shape};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::path::PathBuf;

/// The GPUs the plans are recorded for: an H100 SXM and an L4 (the planner reads the SM count).
const TARGETS: [(Arch, u32); 2] = [(Arch::Sm90a, 132), (Arch::Sm89, 58)];
/// Tuning-space samples per family (every valid variant when a family has fewer).
const SPACE_SAMPLES: usize = 300;
use crate::kernel_invariant_env::WRITE_ENV;

fn data_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/kernel-invariant")
}

/// A problem as one line holds it: `shape dtype mask layout`, dense, with LSE (as presets give).
fn describe(p: &Problem, layout: Layout) -> String {
    format!("{} {} {} {}", p.shape, p.dtype.name(), p.causal.name(), layout.name())
}

fn parse_problem(fields: &[&str]) -> Problem {
    let shape = Shape::parse(fields[0]).expect("shape");
    let dtype = Dtype::parse(fields[1]).expect("dtype");
    let causal = Causal::parse(fields[2]).expect("mask");
    let layout = Layout::parse(fields[3]).expect("layout");
    Problem::dense(shape, dtype, layout).with_causal(causal).with_lse(true)
}

/// Every problem of every preset, once, in a stable order.
fn preset_problems() -> BTreeMap<String, Problem> {
    let mut out = BTreeMap::new();
    for name in NAMES {
        let set = preset(name).expect("a preset of NAMES");
        for shape in &set.shapes {
            for &dtype in &set.dtypes {
                for &causal in &set.causal {
                    for &layout in &set.layouts {
                        let p = Problem::dense(*shape, dtype, layout).with_causal(causal).with_lse(true);
                        out.insert(describe(&p, layout), p);
                    }
                }
            }
        }
    }
    out
}

/// A kernel as one line of `cubins.tsv` names it: arch, dtype, head dim, family and every lever.
fn kernel_key(spec: &KernelSpec, arch: Arch) -> String {
    let levers: Vec<String> = spec.config.levers().into_iter().map(|(k, v)| format!("{k}={v}")).collect();
    format!("{} {} {} {} {}", arch.name(), spec.dtype.name(), spec.head_dim, spec.imp().name(), levers.join(","))
}

fn parse_kernel(fields: &[&str]) -> (KernelSpec, Arch) {
    let arch = Arch::parse(fields[0]).expect("arch");
    let dtype = Dtype::parse(fields[1]).expect("dtype");
    let head_dim: usize = fields[2].parse().expect("head dim");
    let imp = Impl::parse(fields[3]).expect("family");
    let config = defaults::config(imp, imp.archs()[0], head_dim).with_overrides(fields[4]).expect("levers");
    (KernelSpec { config, dtype, head_dim }, arch)
}

/// `count` elements spread evenly over `items` (all of them when there are fewer).
fn spread<T: Clone>(items: &[T], count: usize) -> Vec<T> {
    if items.len() <= count {
        return items.to_vec();
    }
    (0..count).map(|i| items[i * items.len() / count].clone()).collect()
}

fn space_samples() -> Vec<(KernelSpec, Arch)> {
    let mut out = Vec::new();
    for imp in Impl::ALL {
        let mut valid = Vec::new();
        for (arch, _) in TARGETS.into_iter().filter(|(a, _)| imp.archs().contains(a)) {
            for dtype in Dtype::ALL {
                for head_dim in HEAD_DIMS {
                    valid.extend(
                        KernelSpec::space(imp, dtype, head_dim).filter(|s| s.validate(arch).is_ok()).map(|s| (s, arch)),
                    );
                }
            }
        }
        out.extend(spread(&valid, SPACE_SAMPLES));
    }
    out
}

fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

fn compile_all(kernels: &[(KernelSpec, Arch)]) -> Vec<String> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    compile_parallel(kernels, None, threads, || {})
        .into_iter()
        .zip(kernels)
        .map(|(compiled, (spec, arch))| {
            let compiled = compiled.unwrap_or_else(|e| panic!("{} for {}: {e}", spec.name(), arch.name()));
            sha256_hex(&compiled.cubin)
        })
        .collect()
}

fn write_baseline() {
    let problems = preset_problems();
    let mut kernels: BTreeMap<String, (KernelSpec, Arch)> = BTreeMap::new();
    let mut plans = String::from("# arch problem(shape dtype mask layout) then per choice the kernel it plans\n");
    for (arch, sms) in TARGETS {
        for (text, p) in &problems {
            let mut line = format!("{} {text}", arch.name());
            let choices = std::iter::once(Request::Auto)
                .chain(Impl::ALL.into_iter().filter(|i| i.archs().contains(&arch)).map(Request::Family));
            for choice in choices {
                let planned = plan(p, arch, sms, choice);
                line.push_str(&format!(" {choice}={}", planned.spec.name()));
                kernels.insert(kernel_key(&planned.spec, arch), (planned.spec, arch));
            }
            plans.push_str(&line);
            plans.push('\n');
        }
    }
    for (spec, arch) in space_samples() {
        kernels.insert(kernel_key(&spec, arch), (spec, arch));
    }
    let list: Vec<(String, (KernelSpec, Arch))> = kernels.into_iter().collect();
    for (key, (spec, arch)) in &list {
        let fields: Vec<&str> = key.split(' ').collect();
        assert_eq!(parse_kernel(&fields), (*spec, *arch), "{key} does not read back");
    }
    let jobs: Vec<(KernelSpec, Arch)> = list.iter().map(|(_, k)| *k).collect();
    let hashes = compile_all(&jobs);
    let mut cubins = format!(
        "# arch dtype head_dim family levers kernel_name sha256(cubin), NVRTC {:?}\n",
        Nvrtc::get().expect("NVRTC").version()
    );
    for ((key, (spec, _)), hash) in list.iter().zip(&hashes) {
        cubins.push_str(&format!("{key} {} {hash}\n", spec.name()));
    }
    std::fs::create_dir_all(data_dir()).expect("data dir");
    std::fs::write(data_dir().join("plans.tsv"), plans).expect("write plans.tsv");
    std::fs::write(data_dir().join("cubins.tsv"), cubins).expect("write cubins.tsv");
}

fn lines(file: &str) -> Vec<String> {
    std::fs::read_to_string(data_dir().join(file))
        .unwrap_or_else(|e| panic!("{file}: {e} (regenerate with {WRITE_ENV}=1)"))
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(String::from)
        .collect()
}

#[test]
fn every_preset_problem_plans_the_recorded_kernels() {
    if std::env::var_os(WRITE_ENV).is_some() {
        return; // the CUBIN test below writes both files
    }
    let mut checked = 0;
    for line in lines("plans.tsv") {
        let fields: Vec<&str> = line.split(' ').collect();
        let (arch, sms) = TARGETS.into_iter().find(|(a, _)| a.name() == fields[0]).expect("a recorded arch");
        let problem = parse_problem(&fields[1..5]);
        for recorded in &fields[5..] {
            let (choice, name) = recorded.split_once('=').expect("choice=kernel");
            let choice = Request::parse(choice).expect("a choice");
            assert_eq!(plan(&problem, arch, sms, choice).spec.name(), name, "{line}: {choice}");
            checked += 1;
        }
    }
    assert!(checked > 1000, "plans.tsv holds only {checked} plans");
}

#[test]
fn every_recorded_kernel_compiles_to_the_recorded_cubin() {
    if let Err(e) = Nvrtc::get() {
        assert!(std::env::var_os("CI").is_none(), "NVRTC is required under CI: {e}");
        println!("skipped: {e}");
        return;
    }
    if std::env::var_os(WRITE_ENV).is_some() {
        write_baseline();
        return;
    }
    let recorded: Vec<(KernelSpec, Arch, String, String)> = lines("cubins.tsv")
        .iter()
        .map(|line| {
            let fields: Vec<&str> = line.split(' ').collect();
            let (spec, arch) = parse_kernel(&fields);
            (spec, arch, fields[5].to_string(), fields[6].to_string())
        })
        .collect();
    for (spec, arch, name, _) in &recorded {
        assert_eq!(&spec.name(), name, "levers of {name} on {}", arch.name());
    }
    let jobs: Vec<(KernelSpec, Arch)> = recorded.iter().map(|(s, a, _, _)| (*s, *a)).collect();
    let hashes = compile_all(&jobs);
    let differing: Vec<&str> = recorded
        .iter()
        .zip(&hashes)
        .filter(|((.., want), got)| want != *got)
        .map(|((_, _, n, _), _)| n.as_str())
        .collect();
    assert!(differing.is_empty(), "{} of {} CUBINs differ: {differing:?}", differing.len(), recorded.len());
}

#[test]
fn spread_takes_evenly_and_everything_when_short() {
    assert_eq!(spread(&[1, 2, 3], 5), vec![1, 2, 3]);
    assert_eq!(spread(&(0..10).collect::<Vec<_>>(), 5), vec![0, 2, 4, 6, 8]);
}
