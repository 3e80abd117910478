//! Kernels as tables show them: a short name, the family and only the levers that differ from
//! its default for the problem (`wgmma`, `wgmma bn=64 pipeline=pingpong`;
//! `KernelConfig::short_name`, from the lever tables). The full symbol name stays in `--json`
//! output and is shown with `-v`.

use crate::stores::record::{CaseRecord, Environment};
use evoattn::{Arch, Causal, Dtype, KernelSpec, Layout, Problem, Shape};

/// The short name of `spec` running `problem` on `arch` with `sm_count` SMs.
pub fn short(spec: &KernelSpec, problem: &Problem, arch: Arch, sm_count: u32) -> String {
    spec.config.short_name(&evoattn::defaults::for_problem(spec.imp(), arch, problem, sm_count))
}

/// The short name of the kernel a bench record names by its symbol, on `case` measured on
/// `env`'s GPU: against the family's default for the problem where the record has the GPU's SM
/// count, else its default for the head dim. The text as it is when it names no kernel of ours.
pub fn in_record(kernel: &str, case: &CaseRecord, env: &Environment) -> String {
    let Some(spec) = KernelSpec::from_name(kernel) else { return kernel.to_string() };
    let arch = Arch::parse(&env.arch).unwrap_or(Arch::Sm90a);
    let default = match (problem_of(case), env.sm_count) {
        (Some(problem), Some(sms)) => evoattn::defaults::for_problem(spec.imp(), arch, &problem, sms),
        _ => evoattn::defaults::config(spec.imp(), arch, spec.dtype, spec.head_dim),
    };
    spec.config.short_name(&default)
}

/// The problem a record's case describes, when its names parse.
fn problem_of(c: &CaseRecord) -> Option<Problem> {
    let shape = Shape { b: c.b, h: c.h, hkv: c.hkv, sq: c.sq, sk: c.sk, d: c.d };
    let layout = Layout::parse(&c.layout)?;
    Some(Problem::dense(shape, Dtype::parse(&c.dtype)?, layout).with_causal(Causal::parse(&c.causal)?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stores::record::tests::gate_case;

    #[test]
    fn a_record_kernel_is_named_against_the_default_of_its_case() {
        let env = Environment { arch: "sm_90a".into(), sm_count: Some(132), ..Environment::default() };
        let case = gate_case();
        let problem = problem_of(&case).unwrap();
        let planned = evoattn::plan::plan(&problem, Arch::Sm90a, 132, evoattn::Request::Auto).spec;
        assert_eq!(in_record(&planned.name(), &case, &env), planned.imp().name());
        let other = KernelSpec { config: planned.config.with_overrides("stages=3").unwrap(), ..planned };
        assert_eq!(in_record(&other.name(), &case, &env), format!("{} s=3", planned.imp()));
        assert_eq!(in_record("sdpa-cudnn", &case, &env), "sdpa-cudnn");
        assert_eq!(short(&other, &problem, Arch::Sm90a, 132), format!("{} s=3", planned.imp()));
    }
}
