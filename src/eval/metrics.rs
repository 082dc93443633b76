//! Ranking-quality metrics of a cost model against measured runtimes.
//!
//! The papers judge a cost model by Kendall τ, Spearman ρ, ordered-pair accuracy, and the
//! runtime lost by the chosen candidate against the best measured (APE). All functions take
//! scores already oriented so that **lower predicted = faster** (use [`oriented`]).

use serde::{Deserialize, Serialize};

use crate::model::ScorePolarity;

/// Scores flipped, if needed, so that lower means predicted faster.
pub fn oriented(scores: &[f32], polarity: ScorePolarity) -> Vec<f64> {
    scores
        .iter()
        .map(|&s| match polarity {
            ScorePolarity::LowerIsBetter => f64::from(s),
            ScorePolarity::HigherIsBetter => -f64::from(s),
        })
        .collect()
}

/// Kendall's τ-b between two equally long samples (ties handled); `None` if undefined.
pub fn kendall_tau_b(x: &[f64], y: &[f64]) -> Option<f64> {
    let n = x.len();
    if n != y.len() || n < 2 {
        return None;
    }
    let (mut concordant, mut discordant, mut ties_x, mut ties_y) = (0i64, 0i64, 0i64, 0i64);
    for i in 0..n {
        for j in i + 1..n {
            let dx = x[i].partial_cmp(&x[j])?;
            let dy = y[i].partial_cmp(&y[j])?;
            use std::cmp::Ordering::Equal;
            match (dx, dy) {
                (Equal, Equal) => {}
                (Equal, _) => ties_x += 1,
                (_, Equal) => ties_y += 1,
                (a, b) if a == b => concordant += 1,
                _ => discordant += 1,
            }
        }
    }
    let n1 = (concordant + discordant + ties_x) as f64;
    let n2 = (concordant + discordant + ties_y) as f64;
    if n1 == 0.0 || n2 == 0.0 {
        return None;
    }
    Some((concordant - discordant) as f64 / (n1 * n2).sqrt())
}

/// Average ranks (1-based, ties share the mean rank).
fn ranks(x: &[f64]) -> Vec<f64> {
    let mut idx: Vec<usize> = (0..x.len()).collect();
    idx.sort_by(|&a, &b| x[a].total_cmp(&x[b]));
    let mut r = vec![0.0; x.len()];
    let mut i = 0;
    while i < idx.len() {
        let mut j = i;
        while j + 1 < idx.len() && x[idx[j + 1]] == x[idx[i]] {
            j += 1;
        }
        let mean = (i + j) as f64 / 2.0 + 1.0;
        for &k in &idx[i..=j] {
            r[k] = mean;
        }
        i = j + 1;
    }
    r
}

/// Spearman's ρ (Pearson correlation of average ranks); `None` if undefined.
pub fn spearman_rho(x: &[f64], y: &[f64]) -> Option<f64> {
    if x.len() != y.len() || x.len() < 2 || x.iter().chain(y).any(|v| v.is_nan()) {
        return None;
    }
    let (rx, ry) = (ranks(x), ranks(y));
    let n = rx.len() as f64;
    let (mx, my) = (rx.iter().sum::<f64>() / n, ry.iter().sum::<f64>() / n);
    let (mut sxy, mut sxx, mut syy) = (0.0, 0.0, 0.0);
    for (a, b) in rx.iter().zip(&ry) {
        sxy += (a - mx) * (b - my);
        sxx += (a - mx) * (a - mx);
        syy += (b - my) * (b - my);
    }
    if sxx == 0.0 || syy == 0.0 {
        return None;
    }
    Some(sxy / (sxx * syy).sqrt())
}

/// Fraction of pairs with different measured runtimes whose predicted order is right
/// (predicted ties count as half).
pub fn ordered_pair_accuracy(predicted: &[f64], measured: &[f64]) -> Option<f64> {
    let n = predicted.len();
    if n != measured.len() {
        return None;
    }
    let (mut right, mut total) = (0.0, 0u64);
    for i in 0..n {
        for j in i + 1..n {
            if measured[i] == measured[j] {
                continue;
            }
            total += 1;
            let want = measured[i] < measured[j];
            if predicted[i] == predicted[j] {
                right += 0.5;
            } else if (predicted[i] < predicted[j]) == want {
                right += 1.0;
            }
        }
    }
    (total > 0).then(|| right / total as f64)
}

/// Runtime quality of the model's choice among its top `k` predictions.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct TopKOutcome {
    /// Best measured runtime of all candidates.
    pub best_ms: f64,
    /// Best measured runtime among the model's top `k`.
    pub chosen_ms: f64,
    /// Absolute percentage error of the choice: `(chosen − best) / best · 100`.
    pub ape_percent: f64,
}

/// Measured outcome of taking the best (by measurement) of the model's `k` best predictions.
pub fn top_k_outcome(predicted: &[f64], measured: &[f64], k: usize) -> Option<TopKOutcome> {
    if predicted.len() != measured.len() || predicted.is_empty() || k == 0 {
        return None;
    }
    let mut idx: Vec<usize> = (0..predicted.len()).collect();
    idx.sort_by(|&a, &b| predicted[a].total_cmp(&predicted[b]).then(a.cmp(&b)));
    let chosen_ms = idx
        .iter()
        .take(k)
        .map(|&i| measured[i])
        .fold(f64::INFINITY, f64::min);
    let best_ms = measured.iter().copied().fold(f64::INFINITY, f64::min);
    Some(TopKOutcome {
        best_ms,
        chosen_ms,
        ape_percent: (chosen_ms - best_ms) / best_ms * 100.0,
    })
}

/// Every ranking metric of one matrix: the model's scores against the measured runtimes.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct RankingMetrics {
    /// Number of measured candidates compared.
    pub candidates: usize,
    /// Kendall's τ-b between predicted and measured order.
    pub kendall_tau: Option<f64>,
    /// Spearman's ρ between predicted and measured order.
    pub spearman_rho: Option<f64>,
    /// Ordered-pair accuracy.
    pub pair_accuracy: Option<f64>,
    /// Outcome of the model's top-1 pick.
    pub top1: Option<TopKOutcome>,
    /// Outcome of the best (by measurement) of the model's top 5.
    pub top5: Option<TopKOutcome>,
    /// Measured runtime of the default configuration, when it is among the candidates.
    pub default_ms: Option<f64>,
    /// `default_ms / top1.chosen_ms` (above 1 means the model's pick beats the default).
    pub top1_speedup_over_default: Option<f64>,
    /// `default_ms / top5.chosen_ms`.
    pub top5_speedup_over_default: Option<f64>,
}

/// Computes [`RankingMetrics`] from oriented scores (lower = predicted faster, see
/// [`oriented`]) and measured runtimes; `default` is the index of the default configuration
/// among them, if it was measured.
///
/// # Example
/// ```
/// use dashrank::eval::ranking_metrics;
///
/// let predicted = [0.1, 0.2, 0.3];
/// let measured = [2.0, 1.0, 4.0];
/// let m = ranking_metrics(&predicted, &measured, Some(2));
/// assert_eq!(m.top1.unwrap().ape_percent, 100.0);
/// assert_eq!(m.top1_speedup_over_default, Some(2.0));
/// assert_eq!(m.top5_speedup_over_default, Some(4.0));
/// ```
pub fn ranking_metrics(
    predicted: &[f64],
    measured: &[f64],
    default: Option<usize>,
) -> RankingMetrics {
    let top1 = top_k_outcome(predicted, measured, 1);
    let top5 = top_k_outcome(predicted, measured, 5);
    let default_ms = default.and_then(|i| measured.get(i).copied());
    let speedup = |o: Option<TopKOutcome>| {
        default_ms
            .zip(o)
            .filter(|(_, o)| o.chosen_ms > 0.0)
            .map(|(d, o)| d / o.chosen_ms)
    };
    RankingMetrics {
        candidates: predicted.len().min(measured.len()),
        kendall_tau: kendall_tau_b(predicted, measured),
        spearman_rho: spearman_rho(predicted, measured),
        pair_accuracy: ordered_pair_accuracy(predicted, measured),
        top1,
        top5,
        default_ms,
        top1_speedup_over_default: speedup(top1),
        top5_speedup_over_default: speedup(top5),
    }
}

/// The 1-based predicted rank of each candidate (rank 1 = lowest oriented score), ties broken
/// by index as in [`top_k_outcome`].
pub fn predicted_ranks(predicted: &[f64]) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..predicted.len()).collect();
    idx.sort_by(|&a, &b| predicted[a].total_cmp(&predicted[b]).then(a.cmp(&b)));
    let mut rank = vec![0; predicted.len()];
    for (r, &i) in idx.iter().enumerate() {
        rank[i] = r + 1;
    }
    rank
}

/// Arithmetic mean; `None` for an empty slice.
pub fn mean(values: &[f64]) -> Option<f64> {
    (!values.is_empty()).then(|| values.iter().sum::<f64>() / values.len() as f64)
}

/// Median (mean of the two middle values for an even count); `None` for an empty slice.
pub fn median(values: &[f64]) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let mid = v.len() / 2;
    Some(if v.len().is_multiple_of(2) {
        (v[mid - 1] + v[mid]) / 2.0
    } else {
        v[mid]
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    // Expected values worked by hand with the tau-b and average-rank definitions
    // (the same values scipy.stats.kendalltau / spearmanr give):
    // x = [1, 2, 3, 4, 5], y = [2, 1, 4, 3, 5] -> tau 0.6, rho 0.8
    // x = [1, 1, 2, 3],    y = [1, 2, 2, 3]    -> tau-b 0.8, rho 0.8333333333
    #[test]
    fn tau_and_rho_match_scipy() {
        let x = [1.0, 2.0, 3.0, 4.0, 5.0];
        let y = [2.0, 1.0, 4.0, 3.0, 5.0];
        assert!((kendall_tau_b(&x, &y).unwrap() - 0.6).abs() < 1e-12);
        assert!((spearman_rho(&x, &y).unwrap() - 0.8).abs() < 1e-12);
        let x = [1.0, 1.0, 2.0, 3.0];
        let y = [1.0, 2.0, 2.0, 3.0];
        assert!((kendall_tau_b(&x, &y).unwrap() - 0.8).abs() < 1e-9);
        assert!((spearman_rho(&x, &y).unwrap() - 0.833_333_333_3).abs() < 1e-9);
        assert_eq!(kendall_tau_b(&[1.0], &[1.0]), None);
        assert_eq!(kendall_tau_b(&[1.0, 1.0], &[1.0, 2.0]), None);
    }

    #[test]
    fn pairs_and_top_k() {
        let pred = [0.1, 0.2, 0.3];
        let meas = [3.0, 2.0, 1.0];
        assert_eq!(ordered_pair_accuracy(&pred, &meas), Some(0.0));
        assert_eq!(ordered_pair_accuracy(&meas, &meas), Some(1.0));
        let o = top_k_outcome(&pred, &meas, 1).unwrap();
        assert_eq!((o.best_ms, o.chosen_ms), (1.0, 3.0));
        assert!((o.ape_percent - 200.0).abs() < 1e-12);
        assert_eq!(top_k_outcome(&pred, &meas, 3).unwrap().ape_percent, 0.0);
    }

    #[test]
    fn ranks_and_summaries() {
        assert_eq!(predicted_ranks(&[0.3, 0.1, 0.3, 0.2]), [3, 1, 4, 2]);
        assert_eq!(mean(&[1.0, 2.0, 6.0]), Some(3.0));
        assert_eq!(median(&[6.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), Some(2.5));
        assert_eq!((mean(&[]), median(&[])), (None, None));
        let m = ranking_metrics(&[0.1, 0.2, 0.3], &[3.0, 2.0, 1.0], None);
        assert_eq!(m.kendall_tau, Some(-1.0));
        assert_eq!(m.pair_accuracy, Some(0.0));
        assert_eq!((m.default_ms, m.top1_speedup_over_default), (None, None));
    }
}
