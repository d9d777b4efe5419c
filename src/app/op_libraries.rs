//! The operator library a refused TorchScript model needs, found where the user has it.
//!
//! A model that calls `torchvision::nms` or `torchvision::deform_conv2d` is refused by
//! libtorch until a library registers that operator. The user has the package that does
//! (torchvision) installed in some Python environment: the active virtual environment, the
//! one `scripts/bootstrap.sh` made, or the one `python3` runs. The library is the shared
//! object in the package named like the operator's namespace whose bytes hold the operator's
//! schema (`torchvision::nms(`), whatever the file is called.
//!
//! Such a library is built against the Python wheel of torch: it needs that wheel's libraries
//! (and the CUDA libraries beside them) on the search path and, when it links
//! libtorch_python, libpython loaded first. The dynamic loader reads those settings only
//! when a process starts, so align-check runs itself again with them and `--torch-ops LIB`,
//! once (`RETRIED` marks the second run). `-v` says which library it loads; with none found
//! the refusal stands, asking for `--torch-ops`.

use crate::torch::errors::UnregisteredOperator;
use anyhow::{Context, Result};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

/// Set in the environment of the run that already carries a found library.
const RETRIED: &str = "ALIGN_CHECK_OPS_RETRIED";

/// How deep into a package the search for its shared objects goes.
const MAX_DEPTH: usize = 3;

/// For an error that is a refusal for an unregistered operator: the exit code of the run
/// again with the library that registers it; `None` when none is found or this run already
/// is that second run.
pub fn retry_with_library(err: &anyhow::Error) -> Option<Result<ExitCode>> {
    let refused = err
        .chain()
        .find_map(|e| e.downcast_ref::<UnregisteredOperator>())?;
    if std::env::var_os(RETRIED).is_some() {
        return None;
    }
    let (namespace, _) = refused.op.split_once("::")?;
    let found = site_packages()
        .into_iter()
        .find_map(|site| Some((library_in(&site, namespace, &refused.op)?, site)))?;
    Some(run_again(&found.0, &found.1))
}

/// The installed package's library that registers `op`, in `site`.
fn library_in(site: &Path, namespace: &str, op: &str) -> Option<PathBuf> {
    let needle = format!("{op}(");
    let mut found = None;
    shared_objects(&site.join(namespace), 0, &mut |path| {
        if found.is_none() && file_holds(path, needle.as_bytes()) {
            found = Some(path.to_path_buf());
        }
    });
    found
}

fn shared_objects(dir: &Path, depth: usize, visit: &mut dyn FnMut(&Path)) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut paths: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
    paths.sort();
    for path in paths {
        if path.is_dir() && depth < MAX_DEPTH {
            shared_objects(&path, depth + 1, visit);
        } else if path.extension().is_some_and(|e| e == "so") {
            visit(&path);
        }
    }
}

fn file_holds(path: &Path, needle: &[u8]) -> bool {
    std::fs::read(path).is_ok_and(|bytes| bytes.windows(needle.len()).any(|w| w == needle))
}

/// Where installed packages are, in the order a user's own choice comes first: the active
/// virtual environment, the environments `scripts/bootstrap.sh` made, then `python3`'s.
fn site_packages() -> Vec<PathBuf> {
    let mut sites = Vec::new();
    if let Some(venv) = std::env::var_os("VIRTUAL_ENV") {
        sites.extend(sites_of_env(Path::new(&venv)));
    }
    let cache = std::env::var_os("ALIGN_CHECK_CACHE")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".cache/align-check")));
    if let Some(Ok(entries)) = cache.map(std::fs::read_dir) {
        let mut envs: Vec<PathBuf> = entries
            .flatten()
            .map(|e| e.path())
            .filter(|p| {
                p.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with("venv-"))
            })
            .collect();
        envs.sort();
        for env in envs {
            sites.extend(sites_of_env(&env));
        }
    }
    if let Some(site) = python_says(
        "python3",
        "import sysconfig; print(sysconfig.get_paths()['purelib'])",
    ) {
        sites.push(PathBuf::from(site));
    }
    sites
}

/// `lib/python3.X/site-packages` of a virtual environment.
fn sites_of_env(env: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(env.join("lib")) else {
        return Vec::new();
    };
    entries
        .flatten()
        .map(|e| e.path().join("site-packages"))
        .filter(|p| p.is_dir())
        .collect()
}

/// What `python -c code` prints, trimmed; `None` when it cannot run or fails.
fn python_says(python: impl AsRef<std::ffi::OsStr>, code: &str) -> Option<String> {
    let out = Command::new(python).args(["-c", code]).output().ok()?;
    let text = String::from_utf8(out.stdout).ok()?;
    (out.status.success() && !text.trim().is_empty()).then(|| text.trim().to_string())
}

/// Runs align-check again with the same arguments, `--torch-ops library`, and what the
/// library needs from the environment it was installed in.
fn run_again(library: &Path, site: &Path) -> Result<ExitCode> {
    let verbose = std::env::args().skip(1).any(|a| {
        a == "--verbose" || (a.starts_with('-') && a.len() > 1 && a[1..].chars().all(|c| c == 'v'))
    });
    if verbose {
        eprintln!(
            "align-check: loading the operator library {} (found in {}), then running again",
            library.display(),
            site.display()
        );
    }
    let mut dirs = vec![site.join("torch").join("lib")];
    if let Ok(entries) = std::fs::read_dir(site.join("nvidia")) {
        let mut cuda: Vec<PathBuf> = entries.flatten().map(|e| e.path().join("lib")).collect();
        cuda.sort();
        dirs.extend(cuda.into_iter().filter(|d| d.is_dir()));
    }
    let mut path = std::env::join_paths(&dirs).context("joining library folders")?;
    if let Some(old) = std::env::var_os("LD_LIBRARY_PATH") {
        path.push(":");
        path.push(old);
    }
    let mut command = Command::new(std::env::current_exe().context("finding align-check itself")?);
    command
        .args(std::env::args_os().skip(1))
        .arg("--torch-ops")
        .arg(library)
        .env(RETRIED, "1")
        .env("LD_LIBRARY_PATH", path);
    if file_holds(library, b"libtorch_python.so") {
        if let Some(libpython) = libpython_of(site) {
            command.env("LD_PRELOAD", libpython);
        }
    }
    let status = command.status().context("running align-check again")?;
    Ok(ExitCode::from(
        status.code().unwrap_or(2).clamp(0, 255) as u8
    ))
}

/// The shared libpython of the environment `site` belongs to (libtorch_python expects
/// Python's symbols in the process).
fn libpython_of(site: &Path) -> Option<String> {
    let env = site.parent()?.parent()?.parent()?;
    let python = [env.join("bin/python3"), env.join("bin/python")]
        .into_iter()
        .find(|p| p.exists())?;
    python_says(
        python,
        "import os, sysconfig; print(os.path.join(sysconfig.get_config_var('LIBDIR'), \
         sysconfig.get_config_var('LDLIBRARY')))",
    )
    .filter(|p| Path::new(p).exists())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_library_is_the_shared_object_holding_the_schema() {
        let site = tempfile::tempdir().unwrap();
        let pkg = site.path().join("myops").join("lib");
        std::fs::create_dir_all(&pkg).unwrap();
        std::fs::write(pkg.join("a.so"), b"nothing here").unwrap();
        std::fs::write(pkg.join("b.so"), b"..myops::nms(Tensor dets)..").unwrap();
        std::fs::write(pkg.join("c.txt"), b"myops::nms(").unwrap();
        assert_eq!(
            library_in(site.path(), "myops", "myops::nms"),
            Some(pkg.join("b.so"))
        );
        assert_eq!(library_in(site.path(), "myops", "myops::roi_align"), None);
        assert_eq!(library_in(site.path(), "other", "other::nms"), None);
    }
}
