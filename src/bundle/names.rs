//! The bundle format's names and versions (`docs/bundle-format.md`): the manifest's file
//! name, the format version window, file roles and the provenance metadata keys. A leaf: the
//! other `bundle` modules import it, it imports only the error type.

use crate::error::{Error, Result};

/// File name of the manifest inside a bundle directory.
pub const MANIFEST_FILE: &str = "manifest.json";

/// Oldest bundle format version this library reads.
pub const MIN_FORMAT_VERSION: u32 = 1;
/// Newest bundle format version this library reads.
pub const MAX_FORMAT_VERSION: u32 = 1;

/// Metadata key of the featurizer's weight hash (provenance, `docs/bundle-format.md` §7).
pub(crate) const FEATURIZER_KEY: &str = "dashrank.featurizer_sha256";
/// Metadata key of the configuration mapper's weight hash.
pub(crate) const MAPPER_KEY: &str = "dashrank.mapper_sha256";
/// Name prefix of a schedule embedder's configuration-mapper initializers.
pub(crate) const MAPPER_PREFIX: &str = "mapper.";

/// Parses a decimal format version and checks it against the supported window.
pub(crate) fn check_format_version(text: &str) -> Result<u32> {
    let found: u32 = text.trim().parse().map_err(|_| {
        Error::bundle(
            "dashrank.format_version",
            format!("not a decimal integer: '{text}'"),
        )
    })?;
    if !(MIN_FORMAT_VERSION..=MAX_FORMAT_VERSION).contains(&found) {
        return Err(crate::ErrorKind::UnsupportedVersion {
            found,
            min: MIN_FORMAT_VERSION,
            max: MAX_FORMAT_VERSION,
        }
        .into());
    }
    Ok(found)
}

/// The role of one bundle file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Role {
    Featurizer,
    MatrixEmbedder,
    ScheduleEmbedder,
    Predictor,
}

impl Role {
    pub(crate) fn parse(text: &str, origin: &str) -> Result<Self> {
        match text {
            "featurizer" => Ok(Role::Featurizer),
            "matrix_embedder" => Ok(Role::MatrixEmbedder),
            "schedule_embedder" => Ok(Role::ScheduleEmbedder),
            "predictor" => Ok(Role::Predictor),
            other => Err(Error::bundle(
                format!("{origin}: dashrank.role"),
                format!(
                    "unknown role '{other}' (expected featurizer, matrix_embedder, schedule_embedder or predictor)"
                ),
            )),
        }
    }

    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Role::Featurizer => "featurizer",
            Role::MatrixEmbedder => "matrix_embedder",
            Role::ScheduleEmbedder => "schedule_embedder",
            Role::Predictor => "predictor",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_window() {
        assert_eq!(check_format_version("1").ok(), Some(1));
        let err = check_format_version("99").unwrap_err();
        assert!(err.to_string().contains("99"), "{err}");
        assert!(check_format_version("one").is_err());
    }
}
