//! The redesign's invariant (issue 33): the planner picks the same kernel for every preset
//! problem, and every recorded kernel compiles to the same CUBIN, byte for byte.
//!
//! `tests/data/kernel-invariant/plans.tsv` holds, per problem of every preset and per arch, the
//! kernel `auto` and each named family plan, by its symbol; `cubins.tsv` holds each of those
//! kernels and a deterministic sample of each family's tuning space: its levers, its name, the
//! symbol (`EVOATTN_KERNEL_NAME`) its CUBIN was recorded with and that CUBIN's SHA-256. A
//! kernel recorded before a rename (issue 33's typed `wgmma` axes renamed every `wgmma`
//! kernel) keeps its old name as its symbol: the test compiles it under that symbol, so the
//! bytes show that only the name changed, and maps the plans' symbols to today's names.
//! Regenerate both (only when a change is meant to alter kernels, and say so in the commit)
//! with `EVOATTN_WRITE_INVARIANT=1 cargo test -p evoattn-cli --release kernel_invariant`.

use crate::lab::presets::{preset, HEAD_DIMS, NAMES};
use evoattn::kernels::{main_source, HEADERS};
use evoattn::plan::plan;
use evoattn::runtime::compile::options;
use evoattn::runtime::nvrtc::Nvrtc;
use evoattn::{defaults, Arch, Causal, Dtype, Impl, KernelSpec, Layout, Problem, Request, Shape};
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};

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
    let config = defaults::config(imp, imp.archs()[0], dtype, head_dim).with_overrides(fields[4]).expect("levers");
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
    // The forward families: the backward's CUBINs came after the recorded hashes.
    for imp in Impl::FORWARD {
        let mut valid = Vec::new();
        for (arch, _) in TARGETS.into_iter().filter(|(a, _)| imp.archs().contains(a)) {
            // Not e4m3f16: the samples are spread over a fixed list, which it would reshuffle; its
            // kernels differ from e4m3's in O's conversion only.
            for &dtype in imp.dtypes().iter().filter(|&&d| d != Dtype::E4m3F16) {
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

/// The SHA-256 of each kernel's CUBIN, compiled as `compile` does but with its symbol as the
/// kernel's name (the one define a rename changes).
fn compile_all(kernels: &[(KernelSpec, Arch, String)]) -> Vec<String> {
    let nvrtc = Nvrtc::get().expect("NVRTC");
    let next = AtomicUsize::new(0);
    let worker = || {
        let mut done = Vec::new();
        loop {
            let i = next.fetch_add(1, Ordering::Relaxed);
            let Some((spec, arch, symbol)) = kernels.get(i) else { return done };
            let name = format!("-DEVOATTN_KERNEL_NAME={}", spec.name());
            let options: Vec<String> = options(spec, *arch)
                .into_iter()
                .map(|o| if o == name { format!("-DEVOATTN_KERNEL_NAME={symbol}") } else { o })
                .collect();
            let compiled = nvrtc
                .compile_cubin(&main_source(spec.imp()), HEADERS, symbol, *arch, &options)
                .unwrap_or_else(|e| panic!("{symbol} for {}: {}", arch.name(), e.log));
            done.push((i, sha256_hex(&compiled.cubin)));
        }
    };
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut hashes: Vec<(usize, String)> = std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads).map(|_| s.spawn(worker)).collect();
        workers.into_iter().flat_map(|w| w.join().unwrap_or_else(|p| std::panic::resume_unwind(p))).collect()
    });
    hashes.sort();
    hashes.into_iter().map(|(_, hash)| hash).collect()
}

fn write_baseline() {
    let problems = preset_problems();
    let mut kernels: BTreeMap<String, (KernelSpec, Arch)> = BTreeMap::new();
    let mut plans = String::from("# arch problem(shape dtype mask layout) then per choice the kernel it plans\n");
    for (arch, sms) in TARGETS {
        for (text, p) in &problems {
            let mut line = format!("{} {text}", arch.name());
            let choices = std::iter::once(Request::Auto)
                .chain(Impl::FORWARD.into_iter().filter(|i| i.archs().contains(&arch)).map(Request::Family));
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
    let jobs: Vec<(KernelSpec, Arch, String)> = list.iter().map(|(_, (s, a))| (*s, *a, s.name())).collect();
    let hashes = compile_all(&jobs);
    let mut cubins = format!(
        "# arch dtype head_dim family levers kernel_name symbol sha256(cubin), NVRTC {:?}\n",
        Nvrtc::get().expect("NVRTC").version()
    );
    for ((key, (spec, _)), hash) in list.iter().zip(&hashes) {
        cubins.push_str(&format!("{key} {} {} {hash}\n", spec.name(), spec.name()));
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

/// One line of `cubins.tsv`.
struct Recorded {
    spec: KernelSpec,
    arch: Arch,
    name: String,
    /// The kernel's name when its CUBIN was recorded.
    symbol: String,
    sha256: String,
}

fn recorded_kernels() -> Vec<Recorded> {
    lines("cubins.tsv")
        .iter()
        .map(|line| {
            let fields: Vec<&str> = line.split(' ').collect();
            let (spec, arch) = parse_kernel(&fields);
            let [name, symbol, sha256] = [5, 6, 7].map(|i| fields[i].to_string());
            Recorded { spec, arch, name, symbol, sha256 }
        })
        .collect()
}

#[test]
fn every_preset_problem_plans_the_recorded_kernels() {
    if std::env::var_os(WRITE_ENV).is_some() {
        return; // the CUBIN test below writes both files
    }
    // plans.tsv names each kernel by its symbol; cubins.tsv gives its name now.
    let renamed: HashMap<(String, String), String> =
        recorded_kernels().into_iter().map(|k| ((k.arch.name().to_string(), k.symbol), k.name)).collect();
    let mut checked = 0;
    for line in lines("plans.tsv") {
        let fields: Vec<&str> = line.split(' ').collect();
        let (arch, sms) = TARGETS.into_iter().find(|(a, _)| a.name() == fields[0]).expect("a recorded arch");
        let problem = parse_problem(&fields[1..5]);
        for recorded in &fields[5..] {
            let (choice, symbol) = recorded.split_once('=').expect("choice=kernel");
            let choice = Request::parse(choice).expect("a choice");
            let name = renamed
                .get(&(fields[0].to_string(), symbol.to_string()))
                .unwrap_or_else(|| panic!("{symbol} on {} is not in cubins.tsv", fields[0]));
            assert_eq!(&plan(&problem, arch, sms, choice).spec.name(), name, "{line}: {choice}");
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
    let recorded = recorded_kernels();
    for k in &recorded {
        assert_eq!(k.spec.name(), k.name, "levers of {} on {}", k.name, k.arch.name());
        assert_eq!(parse_kernel(&kernel_key(&k.spec, k.arch).split(' ').collect::<Vec<_>>()), (k.spec, k.arch));
    }
    let start = std::time::Instant::now();
    let jobs: Vec<(KernelSpec, Arch, String)> = recorded.iter().map(|k| (k.spec, k.arch, k.symbol.clone())).collect();
    let hashes = compile_all(&jobs);
    let differing: Vec<&str> =
        recorded.iter().zip(&hashes).filter(|(k, got)| k.sha256 != **got).map(|(k, _)| k.name.as_str()).collect();
    let renamed = recorded.iter().filter(|k| k.symbol != k.name).count();
    println!("{} CUBINs ({renamed} under their old names) in {:.0?}", recorded.len(), start.elapsed());
    assert!(differing.is_empty(), "{} of {} CUBINs differ: {differing:?}", differing.len(), recorded.len());
}

#[test]
fn spread_takes_evenly_and_everything_when_short() {
    assert_eq!(spread(&[1, 2, 3], 5), vec![1, 2, 3]);
    assert_eq!(spread(&(0..10).collect::<Vec<_>>(), 5), vec![0, 2, 4, 6, 8]);
}
