//! Output paths checked before the work that fills them: a command that measures for minutes
//! must not find only at the end that its `--json` or `--record` file cannot be written.

use anyhow::{bail, Context};
use std::fs::OpenOptions;
use std::path::Path;

/// Checks that the file `path`, given to `flag`, can be written, before anything is measured:
/// it names a file, not a directory; its directory exists; and the file opens for writing (an
/// existing one is left as it is, a new one is created to try and removed again).
pub fn check_writable(flag: &str, path: &Path) -> anyhow::Result<()> {
    let shown = path.display();
    if path.is_dir() || path.as_os_str().to_string_lossy().ends_with('/') {
        bail!("{flag} {shown} names a directory: {flag} takes a file name, e.g. {}", path.join("run.json").display());
    }
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    if !dir.is_dir() {
        bail!("{flag} {shown}: the directory {} does not exist (nothing was run)", dir.display());
    }
    if path.exists() {
        OpenOptions::new().append(true).open(path).with_context(|| format!("{flag} {shown} cannot be written"))?;
    } else {
        OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(path)
            .with_context(|| format!("{flag} {shown} cannot be written"))?;
        std::fs::remove_file(path).with_context(|| format!("{flag} {shown}: removing the trial file"))?;
    }
    Ok(())
}

/// Creates the directory `dir`, given to `flag`, if absent, before anything is run.
pub fn create_dir(flag: &str, dir: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("{flag} {}: cannot create the directory", dir.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_directories_and_directories_are_refused_and_trial_files_removed() {
        let tmp = tempfile::tempdir().unwrap();
        let missing = tmp.path().join("absent/run.json");
        let err = check_writable("--json", &missing).unwrap_err().to_string();
        assert!(err.contains("does not exist"), "{err}");
        let err = check_writable("--record", tmp.path()).unwrap_err().to_string();
        assert!(err.contains("names a directory"), "{err}");
        let fresh = tmp.path().join("run.json");
        check_writable("--json", &fresh).unwrap();
        assert!(!fresh.exists(), "the trial file is removed");
        std::fs::write(&fresh, "kept").unwrap();
        check_writable("--json", &fresh).unwrap();
        assert_eq!(std::fs::read_to_string(&fresh).unwrap(), "kept", "an existing file is left as it is");
    }
}
