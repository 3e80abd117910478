//! Target architectures and the per-architecture limits the resource gate checks.

use std::fmt;

/// A real GPU architecture NVRTC compiles CUBIN for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Arch {
    /// A100.
    Sm80,
    /// RTX 30xx, A10, A40.
    Sm86,
    /// L4, L40, RTX 40xx (the founding documents' GPU).
    Sm89,
    /// Hopper without the arch-specific instructions.
    Sm90,
    /// Hopper with `wgmma`, `setmaxnreg` (what an H100/H200 runs).
    Sm90a,
}

impl Arch {
    pub const ALL: [Arch; 5] = [Arch::Sm80, Arch::Sm86, Arch::Sm89, Arch::Sm90, Arch::Sm90a];

    pub fn name(self) -> &'static str {
        match self {
            Arch::Sm80 => "sm_80",
            Arch::Sm86 => "sm_86",
            Arch::Sm89 => "sm_89",
            Arch::Sm90 => "sm_90",
            Arch::Sm90a => "sm_90a",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        let s = s.trim().to_ascii_lowercase();
        let s = s.strip_prefix("sm_").or_else(|| s.strip_prefix("sm")).unwrap_or(&s);
        match s {
            "80" => Some(Arch::Sm80),
            "86" => Some(Arch::Sm86),
            "89" => Some(Arch::Sm89),
            "90" => Some(Arch::Sm90),
            "90a" => Some(Arch::Sm90a),
            _ => None,
        }
    }

    /// The arch to compile for on a device of compute capability `major.minor`. Hopper
    /// devices get `sm_90a`: the real chip runs the arch-specific instructions.
    pub fn from_compute_capability(major: i32, minor: i32) -> Option<Self> {
        match (major, minor) {
            (8, 0) => Some(Arch::Sm80),
            (8, 6) | (8, 7) => Some(Arch::Sm86),
            (8, 9) => Some(Arch::Sm89),
            (9, 0) => Some(Arch::Sm90a),
            _ => None,
        }
    }

    /// Largest dynamic + static shared memory one block may opt into, in bytes
    /// (CUDA C Programming Guide, "Technical Specifications per Compute Capability").
    pub fn max_smem_per_block(self) -> usize {
        match self {
            Arch::Sm80 => 163 * 1024,
            Arch::Sm86 | Arch::Sm89 => 99 * 1024,
            Arch::Sm90 | Arch::Sm90a => 227 * 1024,
        }
    }

    /// Registers a thread may use on every supported arch.
    pub fn max_registers_per_thread(self) -> u32 {
        255
    }

    /// The value for NVRTC's `--gpu-architecture`.
    pub fn nvrtc_flag(self) -> String {
        format!("--gpu-architecture={}", self.name())
    }
}

impl fmt::Display for Arch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_and_name_round_trip() {
        for a in Arch::ALL {
            assert_eq!(Arch::parse(a.name()), Some(a));
        }
        assert_eq!(Arch::parse("90a"), Some(Arch::Sm90a));
        assert_eq!(Arch::parse("sm_75"), None);
        assert_eq!(Arch::from_compute_capability(9, 0), Some(Arch::Sm90a));
        assert_eq!(Arch::from_compute_capability(8, 9), Some(Arch::Sm89));
        assert_eq!(Arch::from_compute_capability(7, 5), None);
    }
}
