"""Sums the call stacks of a `perf script -F tid,ip,sym` listing (stdin) into kinds of
featurizer work and prints one Markdown table row: see scripts/featurize-profile.sh.

Each sample counts for the first frame, from the leaf up, that names a kind: a `memmove`
called by the neighbour search counts as buffers, a closure inside `jobs::task_jobs` as
maps. Rayon's plumbing (its iterators, `join`, its jobs) sits between a parallel loop and
the closure it runs, so it never names a kind: a closure run by a parallel loop in
`Coords::strided` counts as maps. Only waiting does (rayon's idle loop, stealing, futexes,
the scheduler), and only below every featurizer frame: a worker thread's stack always ends
in rayon's idle loop. Samples under reading the matrix or building the graph ("input") are left
out.

Usage: perf script ... | python3 scripts/featurize_profile_kinds.py MATRIX GRAPH THREADS
       (DASHRANK_PROFILE_OTHER=N also prints the N most frequent leaf frames of "other")
"""
import collections
import os
import re
import sys

INPUT = re.compile(r"dashrank::pattern::|read_waco|FeaturizerGraph>::from_spec|featurize_timing::(main|csr_files)$")
# Checked in this order on each frame.
KINDS = [
    ("buffers", r"mem(move|cpy|set)|malloc|realloc|calloc|\bfree\b|_int_|cfree|unlink_chunk|__rust_(alloc|dealloc|realloc)"
                r"|raw_vec|page_fault|clear_page|do_anonymous|handle_mm_fault|mmap|munmap|alloc_pages"
                r"|featurize::memory|BufferPool|Vec<T.*>::(extend|reserve|with_capacity)|spec_extend|from_iter"),
    ("pooling", r"simd::pool|tree_sum|TreeSum|avg_pool|max_pool|sum_rows|step::task_sums|pooled_sums"),
    # `step::band_coords` is where the compiler inlines `Coords::strided` (a band's output
    # coordinates); `lone` certifies points without a search.
    ("maps", r"featurize::(rulebook|masks|coords|jobs|band|window|lone)|step::band_coords|simd::scan"
             r"|Neighbours|KeySink"
             r"|SparseConv>::tile|SparseConv::tile|band_jobs|compute_lists"),
    ("products", r"simd::(conv|gemm|kernels)|ops::sparse_conv|gemm_|shared_products|hot_products"),
    ("threads", r"rayon_core::(registry|sleep|latch)|crossbeam|futex|sched|finish_task_switch"
                r"|std::thread|pthread|try_to_wake"),
]
# Frames that are passed over: rayon's plumbing between a parallel loop and its closure.
PLUMBING = re.compile(r"^<?rayon(_core)?::")
ORDER = ["maps", "products", "pooling", "buffers", "threads", "other"]


def samples(stream):
    """Yields each sample's frames' symbols, leaf first."""
    frames = []
    for line in stream:
        # Frames are tab-indented; a sample's header line (its thread id, right-aligned) may
        # start with spaces.
        if line.startswith("\t"):
            parts = line.strip().split(None, 1)
            if len(parts) == 2:
                frames.append(parts[1])
        elif line.strip():
            if frames:
                yield frames
            frames = []
    if frames:
        yield frames


def kind_of(frames):
    if any(INPUT.search(f) for f in frames):
        return "input"
    waiting = KINDS[-1][1]
    for f in frames:
        if re.search(waiting, f):
            return "threads"
        if PLUMBING.search(f):
            continue
        for kind, rx in KINDS[:-1]:
            if re.search(rx, f):
                return kind
        if "dashrank::" in f:
            # Featurizer code of no kind: what lies below it is how it was called.
            return "other"
    return "other"


def main() -> None:
    matrix, graph, threads = sys.argv[1:4]
    counts = collections.Counter()
    other = collections.Counter()
    for frames in samples(sys.stdin):
        kind = kind_of(frames)
        counts[kind] += 1
        if kind == "other":
            other[frames[0][:100]] += 1
    total = sum(v for k, v in counts.items() if k != "input") or 1
    cells = " | ".join(f"{100 * counts[k] / total:.0f} %" for k in ORDER)
    share = 100 * (counts["maps"] + counts["buffers"]) / total
    print(f"| {matrix} | {graph} | {threads} | {total} | {cells} | {share:.0f} % |")
    for sym, n in other.most_common(int(os.environ.get("DASHRANK_PROFILE_OTHER", "0"))):
        print(f"  other: {100 * n / total:.1f} % {sym}", file=sys.stderr)


if __name__ == "__main__":
    main()
