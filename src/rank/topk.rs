//! Exact top-k over a score vector: NaN (invalid) scores are skipped, ties go to the lower
//! candidate index, the result is best first.

use std::cmp::Ordering;

use crate::model::ScorePolarity;

/// Indices of the `k` best finite scores, best first; ties broken by index.
///
/// Streams over the scores keeping the `k` best seen so far in a sorted buffer, so ranking a
/// whole space allocates nothing per candidate (a full selection is used when `k` is a large
/// fraction of the scores).
///
/// ```
/// use dashrank::model::ScorePolarity;
/// let top = dashrank::rank::top_k_indices(&[3.0, 1.0, f32::NAN, 1.0], 2, ScorePolarity::LowerIsBetter);
/// assert_eq!(top, vec![1, 3]);
/// ```
pub fn top_k_indices(scores: &[f32], k: usize, polarity: ScorePolarity) -> Vec<usize> {
    let cmp = |a: &usize, b: &usize| -> Ordering {
        polarity
            .compare(scores[*a], scores[*b])
            .then_with(|| a.cmp(b))
    };
    if k == 0 {
        return Vec::new();
    }
    if k.saturating_mul(8) >= scores.len() {
        let mut idx: Vec<usize> = (0..scores.len()).filter(|&i| !scores[i].is_nan()).collect();
        let k = k.min(idx.len());
        if k == 0 {
            return Vec::new();
        }
        if k < idx.len() {
            idx.select_nth_unstable_by(k - 1, cmp);
            idx.truncate(k);
        }
        idx.sort_unstable_by(cmp);
        return idx;
    }
    // Bounded, sorted buffer of the best `k` so far; indices arrive in increasing order, so
    // a new index wins a tie only against nothing (strictly better scores are needed).
    let mut best: Vec<usize> = Vec::with_capacity(k + 1);
    for (i, s) in scores.iter().enumerate() {
        if s.is_nan() {
            continue;
        }
        if best.len() == k {
            let worst = best[k - 1];
            if polarity.compare(*s, scores[worst]) != Ordering::Less {
                continue;
            }
        }
        let pos = best.partition_point(|b| cmp(b, &i) == Ordering::Less);
        best.insert(pos, i);
        best.truncate(k);
    }
    best
}

/// The rank of candidate `index` with `score` among `scores`: the number of finite scores
/// strictly better (score, then index); `None` for a NaN score.
pub(crate) fn rank_of(
    scores: &[f32],
    index: usize,
    score: f32,
    polarity: ScorePolarity,
) -> Option<usize> {
    if score.is_nan() {
        return None;
    }
    let before = scores.iter().enumerate().filter(|&(j, &t)| {
        !t.is_nan()
            && j != index
            && polarity
                .compare(t, score)
                .then_with(|| j.cmp(&index))
                .is_lt()
    });
    Some(before.count())
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
        for k in [1, 5, 37, 124, 125, 999, 2000] {
            assert_eq!(
                top_k_indices(&scores, k, ScorePolarity::LowerIsBetter),
                all[..k.min(1000)].to_vec(),
                "k = {k}"
            );
        }
        let mut high = all.clone();
        high.sort_by(|a, b| scores[*b].total_cmp(&scores[*a]).then(a.cmp(b)));
        assert_eq!(
            top_k_indices(&scores, 10, ScorePolarity::HigherIsBetter),
            high[..10].to_vec()
        );
    }
}
