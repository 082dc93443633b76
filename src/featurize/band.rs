//! Band-wide sharing of output rows: the jobs of all tasks of a band step, merged so that
//! each distinct shared key is computed once per band.
//!
//! Phase A deduplicates keys within each task. Here the tasks' *keyed* jobs (keys made of
//! shared input rows, see `jobs`) are spread over [`SHARDS`] shards by key hash; each shard
//! deduplicates its keys in parallel, visiting the tasks in order. The band's output rows
//! are then laid out as the shards' distinct keys (shard by shard) followed by every task's
//! unkeyed (unique) jobs, and each point gets the band row of its job. Which row numbers
//! the points get never changes a value, only how often it is computed.

use rayon::prelude::*;

use super::jobs::{Index, Phase, TaskJobs, KEYED};

/// Number of shards of the band-wide key merge.
const SHARDS: usize = 64;

/// The jobs of a band step, in band-row order, and the band row of every point.
#[derive(Debug, Default)]
pub(crate) struct BandJobs {
    /// Lists of jobs computed one after the other into consecutive band rows: the shards'
    /// distinct keys, then each task's unique jobs.
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

/// Merges the tasks' jobs band-wide (see the module docs).
pub(crate) fn share(tasks: Vec<Phase>) -> BandJobs {
    // Per task: its keyed jobs grouped by shard, and the group starts.
    let grouped: Vec<(Vec<u32>, Vec<u32>)> = tasks
        .par_iter()
        .map(|t| {
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
        })
        .collect();
    // Per shard: its distinct keys (as a job list) and, in visiting order (tasks in order,
    // each task's jobs of the shard in order), the index of each visited job's key.
    let shards: Vec<(TaskJobs, Vec<u32>)> = (0..SHARDS)
        .into_par_iter()
        .map(|s| {
            let visits: usize = grouped
                .iter()
                .map(|(_, c)| (c[s + 1] - c[s]) as usize)
                .sum();
            let mut index = Index::with_capacity(visits);
            let mut list = TaskJobs::new();
            let mut seen = Vec::with_capacity(visits);
            for (t, (order, counts)) in tasks.iter().zip(&grouped) {
                for &j in &order[counts[s] as usize..counts[s + 1] as usize] {
                    let (pairs, h) = (t.keyed.pairs(j as usize), t.keyed.hash[j as usize]);
                    let (k, new) = index.find(h, &list.hash, |k| list.pairs(k) == pairs);
                    if new {
                        list.push_job(pairs.iter().copied(), 0);
                        list.hash.push(h);
                    }
                    list.uses[k as usize] += t.keyed.uses[j as usize];
                    seen.push(k);
                }
            }
            (list, seen)
        })
        .collect();
    // Layout: shard rows, then each task's unique rows.
    let mut bases = Vec::with_capacity(SHARDS);
    let mut rows = 0;
    for (list, _) in &shards {
        bases.push(rows);
        rows += list.len();
    }
    let mut unique_base = Vec::with_capacity(tasks.len());
    for t in &tasks {
        unique_base.push(rows);
        rows += t.unique.len();
    }
    // Where each task's visits start in each shard's list.
    let mut visit_start = vec![vec![0usize; SHARDS]; tasks.len()];
    for s in 0..SHARDS {
        let mut at = 0;
        for (t, (_, counts)) in grouped.iter().enumerate() {
            visit_start[t][s] = at;
            at += (counts[s + 1] - counts[s]) as usize;
        }
    }
    // Per task: the band row of each keyed job, then of each point.
    let point_rows: Vec<Vec<u32>> = tasks
        .par_iter()
        .zip(&grouped)
        .zip(&visit_start)
        .zip(&unique_base)
        .map(|(((t, (order, counts)), starts), &ubase)| {
            let mut keyed_row = vec![0u32; t.keyed.len()];
            for s in 0..SHARDS {
                let seen = &shards[s].1[starts[s]..];
                let group = &order[counts[s] as usize..counts[s + 1] as usize];
                for (n, &j) in group.iter().enumerate() {
                    keyed_row[j as usize] = (bases[s] + seen[n] as usize) as u32;
                }
            }
            t.point_job
                .iter()
                .map(|&j| {
                    if j & KEYED != 0 {
                        keyed_row[(j & !KEYED) as usize]
                    } else {
                        (ubase + j as usize) as u32
                    }
                })
                .collect()
        })
        .collect();
    let mut lists: Vec<TaskJobs> = shards.into_iter().map(|(l, _)| l).collect();
    lists.extend(tasks.into_iter().map(|t| t.unique));
    BandJobs {
        lists,
        point_rows,
        rows,
    }
}
