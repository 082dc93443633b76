//! The status of a candidate, from the toolchain's space (valid, duplicate, invalid for the
//! matrix) to the model (rejected by the head's schema): one type for every layer and face.

use std::borrow::Cow;

use crate::error::Error;

/// Whether a candidate is ranked, and why not.
///
/// A space yields the first three for a matrix shape
/// ([`ShapeStatuses`](crate::schedule::space::ShapeStatuses), owned as
/// `CandidateStatus<'static>`); a model adds [`CandidateStatus::InvalidSchedule`] for lines
/// its schema rejects ([`SpaceCandidates::status`](crate::SpaceCandidates::status)).
#[derive(Debug, Clone)]
pub enum CandidateStatus<'a> {
    /// Valid and distinct for this matrix: ranked.
    Valid,
    /// Behaves exactly like candidate `of` for this matrix (e.g. a SPADE column panel at least
    /// as wide as the matrix equals `NUM_MATRIX_COLS`); not ranked (`of` is).
    Duplicate {
        /// The candidate it duplicates.
        of: usize,
    },
    /// The toolchain rejects it for this matrix (out of range for this shape, …).
    InvalidForMatrix {
        /// Why (the space's message).
        reason: Cow<'a, str>,
    },
    /// The model's schema rejects its line (parse error, out-of-vocabulary value, …); the
    /// error names the field and value.
    InvalidSchedule(&'a Error),
}

impl PartialEq for CandidateStatus<'_> {
    /// Schema rejections compare by their error's kind.
    fn eq(&self, other: &Self) -> bool {
        use CandidateStatus::{Duplicate, InvalidForMatrix, InvalidSchedule, Valid};
        match (self, other) {
            (Valid, Valid) => true,
            (Duplicate { of: a }, Duplicate { of: b }) => a == b,
            (InvalidForMatrix { reason: a }, InvalidForMatrix { reason: b }) => a == b,
            (InvalidSchedule(a), InvalidSchedule(b)) => a.kind() == b.kind(),
            _ => false,
        }
    }
}

impl CandidateStatus<'_> {
    /// True for [`CandidateStatus::Valid`].
    pub fn is_valid(&self) -> bool {
        matches!(self, CandidateStatus::Valid)
    }

    /// An owned space status: `InvalidSchedule` (which only a model gives) becomes
    /// `InvalidForMatrix` with the error's message.
    pub fn into_owned(self) -> CandidateStatus<'static> {
        match self {
            CandidateStatus::Valid => CandidateStatus::Valid,
            CandidateStatus::Duplicate { of } => CandidateStatus::Duplicate { of },
            CandidateStatus::InvalidForMatrix { reason } => CandidateStatus::InvalidForMatrix {
                reason: Cow::Owned(reason.into_owned()),
            },
            CandidateStatus::InvalidSchedule(e) => CandidateStatus::InvalidForMatrix {
                reason: Cow::Owned(e.to_string()),
            },
        }
    }
}
