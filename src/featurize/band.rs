//! Band-wide sharing of output rows: the jobs of all tasks of a band step, merged so that
//! each distinct shared key is computed once per band.
//!
//! Phase A deduplicates keys within each task. Here the tasks' *keyed* jobs (keys made of
//! shared input rows, see `jobs`) are spread over [`SHARDS`] shards by key hash; each shard
//! deduplicates its keys in parallel, visiting the tasks in order, so every distinct key has
//! an *owner*: the task and job where it first occurs. The band's rows are, task by task,
//! the keys the task owns and then its unique jobs (both in order of first use), so rows
//! follow the coordinates, which keeps the next layer's reads of them local. Which row numbers the points get never
//! changes a value, only how often it is computed.

use rayon::prelude::*;

use super::jobs::{Index, Phase, TaskJobs, KEYED};

/// Number of shards of the band-wide key merge.
const SHARDS: usize = 64;

/// The jobs of a band step, in band-row order, and the band row of every point.
#[derive(Debug, Default)]
pub(crate) struct BandJobs {
    /// The job lists in band-row order: per task, the keys it owns, then its unique jobs.
    pub lists: Vec<TaskJobs>,
    /// Per task: the band row of each of its points, in point order.
    pub point_rows: Vec<Vec<u32>>,
    /// Number of band rows.
    pub rows: usize,
}

impl BandJobs {
    /// Bytes held.
    pub fn bytes(&self) -> usize {
        self.lists.iter().map(TaskJobs::bytes).sum::<usize>()
            + self
                .point_rows
                .iter()
                .map(|p| p.capacity() * 4)
                .sum::<usize>()
    }
}

/// The shard of a key hash.
#[inline]
fn shard(h: u64) -> usize {
    (h >> 58) as usize % SHARDS
}

/// Not numbered yet.
const NONE: u32 = u32::MAX;

/// A shard's distinct keys — owner `(task, job)` and number of points — and the key of each
/// visited job.
type Shard = (Vec<(u32, u32, u32)>, Vec<u32>);

/// A task's owner of each keyed job, the row of each job it owns, and the owned jobs.
type Owned = (Vec<(u32, u32)>, Vec<u32>, TaskJobs);

/// A task's keyed jobs grouped by shard (job numbers), and the group starts (`SHARDS + 1`).
type Grouped = (Vec<u32>, Vec<u32>);

/// Merges the tasks' jobs band-wide (see the module docs); `grain` is the parallel loops'
/// `with_min_len` (see `rulebook::grain`).
pub(crate) fn share(tasks: Vec<Phase>, grain: usize) -> BandJobs {
    let grouped: Vec<Grouped> = tasks
        .par_iter()
        .with_min_len(grain)
        .map(group_by_shard)
        .collect();
    let shards: Vec<Shard> = (0..SHARDS)
        .into_par_iter()
        .with_min_len(grain)
        .map(|s| merge_shard(s, &tasks, &grouped))
        .collect();
    let visit_start = visit_starts(&grouped);
    let owned: Vec<Owned> = tasks
        .par_iter()
        .enumerate()
        .with_min_len(grain)
        .map(|(t, task)| owned_keys(t, task, &grouped[t], &shards, &visit_start[t]))
        .collect();
    drop(shards);
    // Band rows: per task, the keys it owns, then its unique jobs.
    let mut bases = Vec::with_capacity(tasks.len());
    let mut rows = 0;
    for (o, t) in owned.iter().zip(&tasks) {
        bases.push(rows);
        rows += o.2.len() + t.unique.len();
    }
    let point_rows: Vec<Vec<u32>> = tasks
        .par_iter()
        .zip(&owned)
        .zip(&bases)
        .with_min_len(grain)
        .map(|((task, (owner, _, list)), &base)| {
            task_point_rows(task, owner, base + list.len(), &bases, &owned)
        })
        .collect();
    let mut lists = Vec::with_capacity(2 * tasks.len());
    for ((_, _, list), task) in owned.into_iter().zip(tasks) {
        lists.push(list);
        lists.push(task.unique);
    }
    BandJobs {
        lists,
        point_rows,
        rows,
    }
}

/// Task `t`'s keyed jobs grouped by shard, in job order within each group.
fn group_by_shard(t: &Phase) -> Grouped {
    let mut counts = vec![0u32; SHARDS + 1];
    for &h in &t.keyed.hash {
        counts[shard(h) + 1] += 1;
    }
    for s in 0..SHARDS {
        counts[s + 1] += counts[s];
    }
    let mut fill = counts.clone();
    let mut order = vec![0u32; counts[SHARDS] as usize];
    for (j, &h) in t.keyed.hash.iter().enumerate() {
        let s = shard(h);
        order[fill[s] as usize] = j as u32;
        fill[s] += 1;
    }
    (order, counts)
}

/// Shard `s`'s distinct keys, each with its owner `(task, job)` and number of points, and
/// per visit (tasks in order, each task's jobs of the shard in order) the visited job's key.
fn merge_shard(s: usize, tasks: &[Phase], grouped: &[Grouped]) -> Shard {
    let visits: usize = grouped
        .iter()
        .map(|(_, c)| (c[s + 1] - c[s]) as usize)
        .sum();
    let mut index = Index::with_capacity(visits);
    let (mut keys, mut hashes): (Vec<(u32, u32, u32)>, Vec<u64>) = (Vec::new(), Vec::new());
    let mut seen = Vec::with_capacity(visits);
    for (t, (task, (order, counts))) in tasks.iter().zip(grouped).enumerate() {
        for &j in &order[counts[s] as usize..counts[s + 1] as usize] {
            let (pairs, h) = (task.keyed.pairs(j as usize), task.keyed.hash[j as usize]);
            let same = |k: usize| {
                let (ot, oj, _) = keys[k];
                tasks[ot as usize].keyed.pairs(oj as usize) == pairs
            };
            let (k, new) = index.find(h, &hashes, same);
            if new {
                keys.push((t as u32, j, 0));
                hashes.push(h);
            }
            keys[k as usize].2 += task.keyed.uses[j as usize];
            seen.push(k);
        }
    }
    (keys, seen)
}

/// Per task and shard, where the task's visits start in the shard's list of visits.
fn visit_starts(grouped: &[Grouped]) -> Vec<Vec<usize>> {
    let mut visit_start = vec![vec![0usize; SHARDS]; grouped.len()];
    for s in 0..SHARDS {
        let mut at = 0;
        for (t, (_, counts)) in grouped.iter().enumerate() {
            visit_start[t][s] = at;
            at += (counts[s + 1] - counts[s]) as usize;
        }
    }
    visit_start
}

/// Task `t`'s owner of each keyed job, and the list of the keys it owns (in job order)
/// with their row within that list; `visit_start` is where its visits start per shard.
fn owned_keys(
    t: usize,
    task: &Phase,
    (order, counts): &Grouped,
    shards: &[Shard],
    visit_start: &[usize],
) -> Owned {
    let mut owner = vec![(0u32, 0u32); task.keyed.len()];
    let mut row = vec![NONE; task.keyed.len()];
    let mut list = TaskJobs::new();
    for s in 0..SHARDS {
        let (keys, seen) = &shards[s];
        let group = &order[counts[s] as usize..counts[s + 1] as usize];
        for (&j, &k) in group.iter().zip(&seen[visit_start[s]..]) {
            let (ot, oj, uses) = keys[k as usize];
            owner[j as usize] = (ot, oj);
            if (ot as usize, oj) == (t, j) {
                row[j as usize] = list.len() as u32;
                list.push_job(task.keyed.pairs(j as usize).iter().copied(), uses);
            }
        }
    }
    (owner, row, list)
}

/// The band row of each of `task`'s points: a keyed job's is its owner's row (`bases` are
/// the tasks' first band rows), a unique job's follows `unique_base`.
fn task_point_rows(
    task: &Phase,
    owner: &[(u32, u32)],
    unique_base: usize,
    bases: &[usize],
    owned: &[Owned],
) -> Vec<u32> {
    // Each keyed job's row once (a task has far fewer jobs than points), then one lookup
    // per point.
    let job_rows: Vec<u32> = owner
        .iter()
        .map(|&(ot, oj)| (bases[ot as usize] + owned[ot as usize].1[oj as usize] as usize) as u32)
        .collect();
    task.point_job
        .iter()
        .map(|&pj| {
            if pj & KEYED != 0 {
                job_rows[(pj & !KEYED) as usize]
            } else {
                (unique_base + pj as usize) as u32
            }
        })
        .collect()
}
