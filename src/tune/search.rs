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
    };
    match options.strategy {
        Strategy::TopK => {
            run.walk_ranking(options.k, 0);
            run.measure_default();
        }
        Strategy::Search => {
            run.measure_default();
            run.walk_ranking(options.k, 0);
            run.search();
        }
    }
    Ok(run.finish())
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
}

impl<C: SpaceConfig> Run<'_, C> {
    fn budget_left(&self) -> bool {
        let b = &self.options.budget;
        self.measurements.len() < b.measurements && b.time.is_none_or(|t| self.start.elapsed() < t)
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
        let line = self.candidates.line(index).unwrap_or_default();
        let is_default = index == self.ranking.default;
        let request = MeasureRequest {
            index,
            line: &line,
            program: &program,
            is_default,
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
            result,
            elapsed: self.start.elapsed(),
        });
        if let Some(k) = key {
            self.keys.insert(k, index);
        }
    }

    fn skip(&mut self, index: usize, reason: String) {
        self.skipped.push(Skipped { index, reason });
    }

    fn finish(self) -> Tuned {
        let mut best: Option<(usize, f64)> = None;
        for (p, m) in self.measurements.iter().enumerate() {
            if let Some(v) = m.objective() {
                if best.is_none_or(|(_, b)| v < b) {
                    best = Some((p, v));
                }
            }
        }
        Tuned {
            measurements: self.measurements,
            skipped: self.skipped,
            best: best.map(|(p, _)| p),
            ranked: self.ranking.order.len(),
        }
    }
}
