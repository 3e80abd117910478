//! Records the git commit the binary is built from, for the environment of benchmark records
//! (the GPU machine runs a carried binary with no repository beside it).

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn main() {
    if let Some(commit) = git(&["rev-parse", "HEAD"]) {
        let dirty = git(&["status", "--porcelain", "--untracked-files=no"]).is_some_and(|s| !s.is_empty());
        println!("cargo:rustc-env=EVOATTN_GIT_COMMIT={commit}{}", if dirty { "-dirty" } else { "" });
    }
    // Again after a commit, and after any source edit, so that `-dirty` is never stale.
    println!("cargo:rerun-if-changed=../../.git/logs/HEAD");
    println!("cargo:rerun-if-changed=../../.git/index");
    println!("cargo:rerun-if-changed=src");
    println!("cargo:rerun-if-changed=../evoattn/src");
}
