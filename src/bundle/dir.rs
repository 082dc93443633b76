//! Reading a bundle directory as untrusted input: which entries count, the symlink rule,
//! and the size limits checked before and while reading.
//!
//! Names come from the directory listing, never from file contents or metadata, and no file
//! outside the bundle directory is ever opened for reading (see [`list_bundle_files`]).

use std::path::{Path, PathBuf};

use super::limits::BundleLimits;
use super::names::MANIFEST_FILE;
use crate::error::{Error, Result};

/// One `.onnx` entry of a bundle directory, as listed by [`list_bundle_files`].
#[derive(Debug)]
pub(crate) struct DirEntry {
    /// File name inside the bundle directory (from the listing, never from metadata).
    pub(crate) name: String,
    /// The path opened.
    path: PathBuf,
    /// The regular file it must turn out to be: `(device, inode)` and length, taken from the
    /// link target for a symlink.
    identity: FileIdentity,
}

/// What identifies a file across `stat` calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct FileIdentity {
    dev: u64,
    ino: u64,
}

impl FileIdentity {
    #[cfg(unix)]
    fn of(m: &std::fs::Metadata) -> Self {
        use std::os::unix::fs::MetadataExt;
        Self {
            dev: m.dev(),
            ino: m.ino(),
        }
    }

    #[cfg(not(unix))]
    fn of(_: &std::fs::Metadata) -> Self {
        Self { dev: 0, ino: 0 }
    }
}

/// Lists the bundle files of `dir`: every entry whose name ends in `.onnx`, and the
/// manifest (`manifest.json`) when there is one, sorted by name.
///
/// The rules (`docs/reliability.md`, "Model files"): only the directory's own entries are
/// read, under the names the listing gives; such an entry must be a regular file, or a
/// symbolic link whose fully resolved target is a regular file inside the (resolved) bundle
/// directory, so a bundle may alias its own files but never reach outside it. Any other
/// such entry (directory, device, FIFO, socket, dangling link, link leaving the directory)
/// is an error naming it; entries with other names are ignored.
pub(crate) fn list_bundle_files(dir: &Path, limits: &BundleLimits) -> Result<Vec<DirEntry>> {
    let io = |p: &Path| {
        let p = p.to_path_buf();
        move |e| Error::io(Some(p), e)
    };
    let root = dir.canonicalize().map_err(io(dir))?;
    let mut out = Vec::new();
    for entry in std::fs::read_dir(&root).map_err(io(dir))? {
        let entry = entry.map_err(io(dir))?;
        let path = entry.path();
        let is_manifest = path.file_name().is_some_and(|n| n == MANIFEST_FILE);
        if path.extension().is_none_or(|e| e != "onnx") && !is_manifest {
            continue;
        }
        let name = entry.file_name().to_string_lossy().into_owned();
        let reject = |reason: String| Err(Error::bundle(name.clone(), reason));
        if out.len() >= limits.max_files {
            return reject(format!(
                "more than BundleLimits::max_files = {} .onnx files in the bundle directory",
                limits.max_files
            ));
        }
        let meta = std::fs::symlink_metadata(&path).map_err(io(&path))?;
        let target = if meta.file_type().is_symlink() {
            let Ok(resolved) = path.canonicalize() else {
                return reject("symbolic link whose target does not exist".into());
            };
            if resolved.parent() != Some(root.as_path()) {
                let where_ = if resolved.starts_with(&root) {
                    "in a subdirectory of"
                } else {
                    "outside"
                };
                return reject(format!(
                    "symbolic link to {}, {where_} the bundle directory {} (links may only \
                     point at files directly inside it)",
                    resolved.display(),
                    root.display()
                ));
            }
            std::fs::metadata(&resolved).map_err(io(&resolved))?
        } else {
            meta
        };
        if !target.is_file() {
            return reject(format!(
                "not a regular file ({}): a bundle file must be a regular file",
                describe_type(&target.file_type())
            ));
        }
        out.push(DirEntry {
            name,
            path,
            identity: FileIdentity::of(&target),
        });
    }
    if out.iter().all(|e| e.name == MANIFEST_FILE) {
        return Err(Error::bundle(
            dir.display().to_string(),
            "no .onnx files found: a bundle is a directory of ONNX files",
        ));
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}

fn describe_type(t: &std::fs::FileType) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if t.is_fifo() {
            return "a FIFO";
        }
        if t.is_socket() {
            return "a socket";
        }
        if t.is_block_device() || t.is_char_device() {
            return "a device";
        }
    }
    if t.is_dir() {
        "a directory"
    } else {
        "not a file"
    }
}

/// Reads one listed file: it must still be the file that was listed (same device and
/// inode, so a swap between listing and reading is caught) and at most
/// `limits.max_file_bytes` long; never more than that is read.
pub(crate) fn read_bundle_file(entry: &DirEntry, limits: &BundleLimits) -> Result<Vec<u8>> {
    use std::io::Read;
    let io = |e| Error::io(Some(entry.path.clone()), e);
    let file = std::fs::File::open(&entry.path).map_err(io)?;
    let meta = file.metadata().map_err(io)?;
    if !meta.is_file() || FileIdentity::of(&meta) != entry.identity {
        return Err(Error::bundle(
            entry.name.clone(),
            "the file changed between listing and reading the bundle directory",
        ));
    }
    if meta.len() > limits.max_file_bytes {
        return Err(too_big(&entry.name, meta.len(), limits));
    }
    let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
    file.take(limits.max_file_bytes.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(io)?;
    if bytes.len() as u64 > limits.max_file_bytes {
        return Err(too_big(&entry.name, bytes.len() as u64, limits));
    }
    Ok(bytes)
}

fn too_big(name: &str, len: u64, limits: &BundleLimits) -> Error {
    Error::bundle(
        name.to_string(),
        format!(
            "{len} bytes exceed BundleLimits::max_file_bytes = {}",
            limits.max_file_bytes
        ),
    )
}

/// The size limits for files given in memory (`Bundle::from_files`).
pub(crate) fn check_in_memory_sizes(
    files: &[(String, Vec<u8>)],
    limits: &BundleLimits,
) -> Result<()> {
    if files.len() > limits.max_files {
        return Err(Error::bundle(
            "bundle",
            format!(
                "{} files exceed BundleLimits::max_files = {}",
                files.len(),
                limits.max_files
            ),
        ));
    }
    let mut total = 0u64;
    for (name, bytes) in files {
        if bytes.len() as u64 > limits.max_file_bytes {
            return Err(too_big(name, bytes.len() as u64, limits));
        }
        total = total.saturating_add(bytes.len() as u64);
        if total > limits.max_bundle_bytes {
            return Err(Error::bundle(
                name.clone(),
                format!(
                    "the bundle's files exceed BundleLimits::max_bundle_bytes = {} bytes",
                    limits.max_bundle_bytes
                ),
            ));
        }
    }
    Ok(())
}
