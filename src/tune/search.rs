//! The tuning loop (module docs of [`crate::tune`]).

use std::collections::{HashMap, HashSet};
use std::time::Instant;

use super::{
    CandidateOps, MeasureRequest, Measurement, Measurer, Skipped, Strategy, TuneOptions, Tuned,
};
use crate::error::Result;
use crate::model::{MatrixEmbedding, Model, ScorePolarity};
use crate::rank::{SpaceCandidates, SpaceConfig};

/// Measures candidates of `candidates` for `matrix` with `measurer`, as `options` say (see the
/// module docs), and returns every measurement and the fastest.
///
/// # Errors
///
/// When the model cannot score the candidates (another model's embedding or candidates, an
/// executor failure); the measurer is not called then. A failing measurement is recorded, not
/// an error.
pub fn tune<C: SpaceConfig>(
    model: &Model,
    matrix: &MatrixEmbedding,
    candidates: &SpaceCandidates<C>,
    ops: &dyn CandidateOps,
    options: &TuneOptions,
    measurer: &mut dyn Measurer,
) -> Result<Tuned> {
    let ranking = Ranking::new(model, matrix, candidates)?;
    let mut run = Run {
        candidates,
        ops,
        options,
        measurer,
        ranking: &ranking,
        measurements: Vec::new(),
        skipped: Vec::new(),
        keys: HashMap::new(),
        tried: HashSet::new(),
        cursor: 0,
        start: Instant::now(),
        reserve: confirmation_size(options),
    };
    match options.strategy {
        Strategy::TopK => {
            run.walk_ranking(options.k, 0);
            run.measure_default();
        }
        Strategy::Search => {
            run.measure_default();
            run.seed(options.k, options.seeds_per_family);
            run.search();
        }
    }
    run.confirm();
    Ok(run.finish())
}

/// Measurements kept for the confirmation round: `confirm` candidates and the default, when
/// the budget holds them beyond the default and `k` candidates.
fn confirmation_size(options: &TuneOptions) -> usize {
    let size = options.confirm.saturating_add(1);
    let fits = options.budget.measurements >= options.k.saturating_add(1).saturating_add(size);
    if options.confirm > 0 && fits {
        size
    } else {
        0
    }
}

/// Every candidate's score and its place in the model's ranking.
struct Ranking {
    scores: Vec<f32>,
    /// Ranked candidates, best first (ties by index).
    order: Vec<usize>,
    /// Per candidate, its position in `order`.
    rank: Vec<Option<usize>>,
    default: usize,
}

impl Ranking {
    fn new<C: SpaceConfig>(
        model: &Model,
        matrix: &MatrixEmbedding,
        c: &SpaceCandidates<C>,
    ) -> Result<Self> {
        let mut scores = vec![0.0f32; c.len()];
        model.score_space_into(matrix, c, &mut scores)?;
        let polarity: ScorePolarity = model.head(c.head())?.info.polarity;
        let mut order: Vec<usize> = (0..c.len())
            .filter(|&i| c.is_ranked(i) && !scores[i].is_nan())
            .collect();
        order.sort_unstable_by(|&a, &b| polarity.compare(scores[a], scores[b]).then(a.cmp(&b)));
        let mut rank = vec![None; c.len()];
        for (r, &i) in order.iter().enumerate() {
            rank[i] = Some(r);
        }
        Ok(Self {
            scores,
            order,
            rank,
            default: c.default_index(),
        })
    }
}

struct Run<'a, C: SpaceConfig> {
    candidates: &'a SpaceCandidates<C>,
    ops: &'a dyn CandidateOps,
    options: &'a TuneOptions,
    measurer: &'a mut dyn Measurer,
    ranking: &'a Ranking,
    measurements: Vec<Measurement>,
    skipped: Vec<Skipped>,
    /// Program keys of measured candidates, with the candidate that has it.
    keys: HashMap<String, usize>,
    tried: HashSet<usize>,
    /// Next position of the ranking walk.
    cursor: usize,
    start: Instant,
    /// Measurements of the budget held back for the confirmation round.
    reserve: usize,
}

impl<C: SpaceConfig> Run<'_, C> {
    fn budget_left(&self) -> bool {
        let b = &self.options.budget;
        self.measurements.len() + self.reserve < b.measurements
            && b.time.is_none_or(|t| self.start.elapsed() < t)
    }

    fn measured_ranked(&self) -> usize {
        self.measurements.iter().filter(|m| !m.is_default).count()
    }

    /// The default, whatever the budget says.
    fn measure_default(&mut self) {
        let d = self.ranking.default;
        if !self.tried.contains(&d) {
            self.consider(d, 0);
        }
    }

    /// Walks the ranking until `want` ranked candidates are measured (or the budget ends).
    fn walk_ranking(&mut self, want: usize, round: usize) {
        let target = self.measured_ranked() + want;
        while self.measured_ranked() < target
            && self.budget_left()
            && self.cursor < self.ranking.order.len()
        {
            let i = self.ranking.order[self.cursor];
            self.cursor += 1;
            self.consider(i, round);
        }
    }

    /// Walks the ranking until `want` ranked candidates are measured, at most `per_family`
    /// of one family (0: no limit), passing over candidates of a full family (they stay in
    /// the ranking for later walks).
    fn seed(&mut self, want: usize, per_family: usize) {
        if per_family == 0 {
            return self.walk_ranking(want, 0);
        }
        let target = self.measured_ranked() + want;
        let mut seeded: HashMap<String, usize> = HashMap::new();
        for &i in &self.ranking.order {
            if self.measured_ranked() >= target || !self.budget_left() {
                break;
            }
            let family = self.ops.family(i);
            let full = |f: &String| seeded.get(f).is_some_and(|&n| n >= per_family);
            if family.as_ref().is_some_and(full) {
                continue;
            }
            let measured = self.measurements.len();
            self.consider(i, 0);
            if let Some(f) = family.filter(|_| self.measurements.len() > measured) {
                *seeded.entry(f).or_default() += 1;
            }
        }
    }

    /// Rounds of neighbours of the fastest, ranked by the model; the ranking walk when none
    /// is left.
    fn search(&mut self) {
        let mut round = 1;
        while self.budget_left() {
            let before = (self.measurements.len(), self.tried.len());
            let pool = self.neighbour_pool();
            if pool.is_empty() {
                self.walk_ranking(self.options.per_round.max(1), round);
            } else {
                for i in pool.into_iter().take(self.options.per_round.max(1)) {
                    if !self.budget_left() {
                        break;
                    }
                    self.consider(i, round);
                }
            }
            if (self.measurements.len(), self.tried.len()) == before {
                break; // nothing left to try
            }
            round += 1;
        }
    }

    /// Untried, ranked neighbours of the fastest measured candidates, best ranked first.
    fn neighbour_pool(&self) -> Vec<usize> {
        let mut fastest: Vec<&Measurement> = self
            .measurements
            .iter()
            .filter(|m| m.objective().is_some())
            .collect();
        fastest.sort_by(|a, b| {
            a.objective()
                .partial_cmp(&b.objective())
                .unwrap_or(std::cmp::Ordering::Equal)
        });
        let mut pool: Vec<usize> = fastest
            .iter()
            .take(self.options.parents.max(1))
            .flat_map(|m| self.ops.neighbours(m.index))
            .filter(|i| !self.tried.contains(i) && self.ranking.rank[*i].is_some())
            .collect();
        pool.sort_unstable_by_key(|i| self.ranking.rank[*i]);
        pool.dedup();
        pool
    }

    /// Measures candidate `index` unless it was tried, its program was measured, or it must
    /// not run.
    fn consider(&mut self, index: usize, round: usize) {
        if !self.tried.insert(index) {
            return;
        }
        let key = if self.options.distinct {
            match self.ops.key(index) {
                Ok(k) => match self.keys.get(&k) {
                    Some(&of) => {
                        return self.skip(index, format!("the same program as candidate {of}"))
                    }
                    None => Some(k),
                },
                Err(e) => return self.skip(index, e.to_string()),
            }
        } else {
            None
        };
        if let Some(why) = self.ops.refuse(index) {
            return self.skip(index, why);
        }
        let program = match self.ops.render(index) {
            Ok(p) => p,
            Err(e) => return self.skip(index, e.to_string()),
        };
        self.measure(index, &program, round, false);
        if let Some(k) = key {
            self.keys.insert(k, index);
        }
    }

    /// Runs candidate `index` (as `program`) through the measurer and records it.
    fn measure(&mut self, index: usize, program: &str, round: usize, confirmation: bool) {
        let line = self.candidates.line(index).unwrap_or_default();
        let is_default = index == self.ranking.default;
        let request = MeasureRequest {
            index,
            line: &line,
            program,
            is_default,
            confirmation,
        };
        let result = self
            .measurer
            .measure(&request)
            .and_then(|m| match m.objective() {
                Some(_) => Ok(m),
                None => Err(format!("not a time: {m:?}")),
            });
        self.measurements.push(Measurement {
            index,
            score: self.ranking.scores.get(index).copied().unwrap_or(f32::NAN),
            rank: self.ranking.rank.get(index).copied().flatten(),
            is_default,
            round,
            confirmation,
            result,
            elapsed: self.start.elapsed(),
        });
    }

    /// The confirmation round: the default, then the `confirm` fastest other candidates
    /// (fastest first), measured again in the measurements held back for it. None when no
    /// other candidate was measured successfully.
    fn confirm(&mut self) {
        if self.reserve == 0 {
            return;
        }
        self.reserve = 0;
        let mut fastest: Vec<(f64, usize)> = Vec::new();
        for m in self.measurements.iter().filter(|m| !m.is_default) {
            if let Some(v) = m.objective() {
                if !fastest.iter().any(|&(_, i)| i == m.index) {
                    fastest.push((v, m.index));
                }
            }
        }
        // Stable: ties keep the order measured.
        fastest.sort_by(|a, b| a.0.total_cmp(&b.0));
        fastest.truncate(self.options.confirm);
        if fastest.is_empty() {
            return;
        }
        let round = self.measurements.iter().map(|m| m.round).max().unwrap_or(0) + 1;
        let again = std::iter::once(self.ranking.default).chain(fastest.iter().map(|&(_, i)| i));
        for index in again.collect::<Vec<_>>() {
            if !self.budget_left() {
                break;
            }
            // Measured before, so it renders.
            if let Ok(program) = self.ops.render(index) {
                self.measure(index, &program, round, true);
            }
        }
    }

    fn skip(&mut self, index: usize, reason: String) {
        self.skipped.push(Skipped { index, reason });
    }

    fn finish(self) -> Tuned {
        let best = self.confirmed_pick().or_else(|| self.fastest());
        Tuned {
            measurements: self.measurements,
            skipped: self.skipped,
            best,
            ranked: self.ranking.order.len(),
        }
    }

    /// Position of the fastest measurement (ties: measured first).
    fn fastest(&self) -> Option<usize> {
        let mut best: Option<(usize, f64)> = None;
        for (p, m) in self.measurements.iter().enumerate() {
            if let Some(v) = m.objective() {
                if best.is_none_or(|(_, b)| v < b) {
                    best = Some((p, v));
                }
            }
        }
        best.map(|(p, _)| p)
    }

    /// The pick of the confirmation round: the fastest confirmed candidate that beat the
    /// default's confirmation by [`TuneOptions::margin`] in both of its measurements, else the
    /// default's confirmation. `None` when the round measured nothing successfully.
    fn confirmed_pick(&self) -> Option<usize> {
        let round: Vec<(usize, &Measurement)> = self
            .measurements
            .iter()
            .enumerate()
            .filter(|(_, m)| m.confirmation && m.objective().is_some())
            .collect();
        let default = round.iter().find(|(_, m)| m.is_default);
        let bar = default
            .and_then(|(_, m)| m.objective())
            .map_or(f64::INFINITY, |d| d * (1.0 - self.options.margin));
        let first = |index: usize| {
            let earlier = self.measurements.iter().find(|m| m.index == index);
            earlier.and_then(Measurement::objective)
        };
        let mut best: Option<(usize, f64)> = None;
        for &(p, m) in round.iter().filter(|(_, m)| !m.is_default) {
            let v = m.objective().unwrap_or(f64::INFINITY);
            let worst = v.max(first(m.index).unwrap_or(v));
            if worst <= bar && best.is_none_or(|(_, b)| v < b) {
                best = Some((p, v));
            }
        }
        best.map(|(p, _)| p).or(default.map(|&(p, _)| p))
    }
}
