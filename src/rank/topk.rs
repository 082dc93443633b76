//! Exact top-k over a score vector: NaN (invalid) scores are skipped, ties go to the lower
//! candidate index, the result is best first.

use std::cmp::Ordering;

use crate::model::ScorePolarity;

/// Indices of the `k` best finite scores, best first; ties broken by index.
///
/// ```
/// use dashrank::model::ScorePolarity;
/// let top = dashrank::rank::top_k_indices(&[3.0, 1.0, f32::NAN, 1.0], 2, ScorePolarity::LowerIsBetter);
/// assert_eq!(top, vec![1, 3]);
/// ```
pub fn top_k_indices(scores: &[f32], k: usize, polarity: ScorePolarity) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..scores.len()).filter(|&i| !scores[i].is_nan()).collect();
    let cmp = |a: &usize, b: &usize| -> Ordering {
        polarity
            .compare(scores[*a], scores[*b])
            .then_with(|| a.cmp(b))
    };
    let k = k.min(idx.len());
    if k == 0 {
        return Vec::new();
    }
    if k < idx.len() {
        idx.select_nth_unstable_by(k - 1, cmp);
        idx.truncate(k);
    }
    idx.sort_unstable_by(cmp);
    idx
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_with_ties_and_polarity() {
        let s = [5.0, 2.0, 2.0, f32::NAN, -1.0, 7.0];
        assert_eq!(
            top_k_indices(&s, 3, ScorePolarity::LowerIsBetter),
            vec![4, 1, 2]
        );
        assert_eq!(
            top_k_indices(&s, 2, ScorePolarity::HigherIsBetter),
            vec![5, 0]
        );
        assert_eq!(
            top_k_indices(&s, 100, ScorePolarity::LowerIsBetter).len(),
            5
        );
        assert!(top_k_indices(&s, 0, ScorePolarity::LowerIsBetter).is_empty());
    }

    #[test]
    fn matches_full_sort_on_random_scores() {
        let mut x = 12345u64;
        let scores: Vec<f32> = (0..1000)
            .map(|_| {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
                ((x >> 40) % 50) as f32
            })
            .collect();
        let mut all: Vec<usize> = (0..scores.len()).collect();
        all.sort_by(|a, b| scores[*a].total_cmp(&scores[*b]).then(a.cmp(b)));
        assert_eq!(
            top_k_indices(&scores, 37, ScorePolarity::LowerIsBetter),
            all[..37].to_vec()
        );
    }
}
