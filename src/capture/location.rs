//! Source locations as reports show them. A model records where each op came from as the
//! absolute path on the machine that exported it (`/home/ana/proj/model.py:42`); a report
//! should name the file in the checkout it is read from (`model.py:42`), so that reports do
//! not carry one machine's paths and a CI clone at another path still points at its own copy.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

/// A source location (`/repo/model.py:42`) as reports show it: relative to the working
/// directory when the file is under it (`model.py:42`), or when the file was recorded on
/// another machine or checkout and the working directory holds the same path's tail
/// (`/export/box/repo/model.py` seen from a clone holding `model.py`); as given otherwise.
pub fn display_location(location: &str) -> String {
    let Ok(cwd) = std::env::current_dir() else {
        return location.to_string();
    };
    let (file, line) = split_line(location);
    let shown = shown_path(&cwd, file);
    format!("{shown}{line}")
}

/// `("/a/model.py", ":42")` from `/a/model.py:42`; the whole text as the file when it has
/// no line number.
fn split_line(location: &str) -> (&str, &str) {
    match location.rfind(':') {
        Some(colon)
            if colon + 1 < location.len()
                && location[colon + 1..].bytes().all(|b| b.is_ascii_digit()) =>
        {
            location.split_at(colon)
        }
        _ => (location, ""),
    }
}

/// The file's path as shown from `cwd`, remembered per file: a model records the same few
/// files for thousands of ops, and the tail search asks the file system.
fn shown_path(cwd: &Path, file: &str) -> String {
    static SHOWN: OnceLock<Mutex<HashMap<(PathBuf, String), String>>> = OnceLock::new();
    let cache = SHOWN.get_or_init(Default::default);
    let key = (cwd.to_path_buf(), file.to_string());
    if let Some(shown) = cache.lock().ok().and_then(|c| c.get(&key).cloned()) {
        return shown;
    }
    let shown = relative_to(cwd, file).unwrap_or_else(|| file.to_string());
    if let Ok(mut c) = cache.lock() {
        c.insert(key, shown.clone());
    }
    shown
}

/// `file` relative to `cwd`: by prefix when it lies under it, else the longest tail of its
/// components that names an existing file under `cwd`. Longest first, so that a deep
/// `pkg/models.py` wins over a stray `models.py` at the top of the checkout.
fn relative_to(cwd: &Path, file: &str) -> Option<String> {
    let path = Path::new(file);
    if !path.is_absolute() {
        return None;
    }
    if let Ok(relative) = path.strip_prefix(cwd) {
        let relative = relative.to_string_lossy();
        return (!relative.is_empty()).then(|| relative.into_owned());
    }
    let components: Vec<_> = path.components().skip(1).collect();
    (1..components.len()).find_map(|start| {
        let tail: PathBuf = components[start..].iter().collect();
        cwd.join(&tail)
            .is_file()
            .then(|| tail.to_string_lossy().into_owned())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_numbers_are_split_off_only_when_they_are_numbers() {
        assert_eq!(split_line("/a/m.py:42"), ("/a/m.py", ":42"));
        assert_eq!(split_line("/a/m.py"), ("/a/m.py", ""));
        assert_eq!(split_line("C:/a/m.py"), ("C:/a/m.py", ""));
        assert_eq!(split_line("/a/m.py:"), ("/a/m.py:", ""));
    }

    #[test]
    fn files_under_the_working_directory_are_shown_relative() {
        let cwd = Path::new("/repo");
        assert_eq!(
            relative_to(cwd, "/repo/pkg/m.py").as_deref(),
            Some("pkg/m.py")
        );
        assert_eq!(relative_to(cwd, "pkg/m.py"), None);
    }

    #[test]
    fn a_file_recorded_in_another_checkout_is_found_by_its_longest_existing_tail() {
        let clone = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(clone.path().join("pkg")).unwrap();
        std::fs::write(clone.path().join("pkg/models.py"), "").unwrap();
        std::fs::write(clone.path().join("models.py"), "").unwrap();
        assert_eq!(
            relative_to(clone.path(), "/export/box/repo/pkg/models.py").as_deref(),
            Some("pkg/models.py")
        );
        // Nothing under the clone: the recorded path stays as it was.
        assert_eq!(relative_to(clone.path(), "/usr/lib/python3/x/y.py"), None);
    }
}
