//! Links from a summary to the reports it lists: relative to the folder the linking page is
//! written to, so that the page and its reports can move together (a downloaded CI
//! artifact), and percent-encoded, so that one string is safe as a Markdown link target and
//! an HTML attribute alike.

use std::path::{Component, Path, PathBuf};

/// `target` as a URL relative to the folder `base`, every byte outside the unreserved set
/// and `/` percent-encoded. Paths are resolved (symbolic links, `..`) where they exist;
/// where one does not, it is taken as written.
pub fn link(target: &Path, base: &Path) -> String {
    let resolve = |p: &Path| {
        std::fs::canonicalize(p)
            .or_else(|_| std::path::absolute(p))
            .unwrap_or_else(|_| p.to_path_buf())
    };
    let path = relative(&resolve(target), &resolve(base));
    let text = path.to_string_lossy().replace('\\', "/");
    let mut url = String::with_capacity(text.len());
    for b in text.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' | b'/' => {
                url.push(b as char)
            }
            _ => url.push_str(&format!("%{b:02X}")),
        }
    }
    url
}

/// `target` relative to `base`, both absolute and resolved.
fn relative(target: &Path, base: &Path) -> PathBuf {
    let t: Vec<Component> = target.components().collect();
    let b: Vec<Component> = base.components().collect();
    let common = t.iter().zip(&b).take_while(|(x, y)| x == y).count();
    let mut out = PathBuf::new();
    for _ in common..b.len() {
        out.push("..");
    }
    for c in &t[common..] {
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_are_relative_to_the_linking_page_and_percent_encoded() {
        let dir = tempfile::tempdir().unwrap();
        let reports = dir.path().join("reports");
        std::fs::create_dir_all(reports.join("odd (1)")).unwrap();
        let target = reports.join("odd (1)").join("r<1>.html");
        std::fs::write(&target, "").unwrap();
        assert_eq!(
            link(&target, dir.path()),
            "reports/odd%20%281%29/r%3C1%3E.html"
        );
        let side = dir.path().join("out");
        std::fs::create_dir(&side).unwrap();
        assert_eq!(
            link(&target, &side),
            "../reports/odd%20%281%29/r%3C1%3E.html"
        );
    }
}
