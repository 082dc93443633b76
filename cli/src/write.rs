//! Writing report files so that a reader sees the previous file or the new one, never a part
//! of one: even when the write fails or the process is killed in the middle.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

/// Replaces `path` with `bytes`: they are written to a temporary file in the same directory
/// (`.NAME.tmp-PID`), synced to disk and renamed over `path`, then the directory is synced.
/// A symbolic link at `path` is followed (its target is replaced). A run killed before the
/// rename leaves `path` as it was (and the temporary file behind).
pub fn write_atomically(path: &Path, bytes: &[u8]) -> Result<()> {
    let target = match fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_symlink() => fs::canonicalize(path)
            .with_context(|| format!("resolving the link {}", path.display()))?,
        _ => path.to_path_buf(),
    };
    let tmp = temporary(&target);
    let written = write_synced(&tmp, bytes, &target).and_then(|()| {
        fs::rename(&tmp, &target)
            .with_context(|| format!("renaming {} to {}", tmp.display(), target.display()))
    });
    if written.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    written?;
    sync_dir(&target);
    Ok(())
}

/// `.NAME.tmp-PID` next to `target`.
fn temporary(target: &Path) -> PathBuf {
    let name = target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    target.with_file_name(format!(".{name}.tmp-{}", std::process::id()))
}

/// Writes `bytes` to a new file `tmp` (with `target`'s permissions when it exists) and syncs
/// it.
fn write_synced(tmp: &Path, bytes: &[u8], target: &Path) -> Result<()> {
    let what = || format!("writing {}", tmp.display());
    let mut file = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(tmp)
        .with_context(what)?;
    if let Ok(meta) = fs::metadata(target) {
        let _ = file.set_permissions(meta.permissions());
    }
    file.write_all(bytes).with_context(what)?;
    file.sync_all().with_context(what)
}

/// Syncs the directory holding `path`, so that the rename itself is on disk (best effort: not
/// every platform can open a directory).
fn sync_dir(path: &Path) {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
}
