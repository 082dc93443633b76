"""Sums a `perf report --no-children --sort symbol --stdio` listing (stdin) into kinds of
featurizer work and prints one Markdown table row: see scripts/featurize-profile.sh. Samples
in reading the matrix and building the graph ("input") are left out of the shares.

Usage: perf report ... | python3 scripts/featurize_profile_kinds.py MATRIX GRAPH THREADS
"""
import re
import sys

# First match wins: specific names before the module catch-alls.
KINDS = [
    ("input", r"dashrank::pattern::|read_waco|FeaturizerGraph>::from_spec|featurize_timing::"),
    ("pooling", r"simd::pool|tree_sum|TreeSum|avg_pool|max_pool|sum_rows|step::task_sums"),
    ("maps", r"featurize::(rulebook|masks|coords|jobs|band|window)|simd::scan|Neighbours|KeySink"
             r"|masks_in_blocks|blocks_avx|blocks_in|sink_in_blocks|SparseConv>::tile"),
    ("products", r"simd::(conv|gemm|kernels)|ops::sparse_conv|gemm_"),
    ("buffers", r"mem(move|cpy|set)|malloc|realloc|calloc|\bfree\b|_int_|cfree|__rust_(alloc|dealloc|realloc)"
                r"|raw_vec|clear_page|page_fault|do_anonymous|handle_mm_fault|mmap|munmap|alloc_pages"
                r"|zap_|folio|featurize::memory|BufferPool|rmqueue|lru_|__rdl_"),
    ("threads", r"rayon|crossbeam|futex|sched|syscall|pthread|std::thread|try_to_wake|__schedule"),
]
ROW = re.compile(r"^\s*([0-9.]+)%\s+(?:\S+\s+)?\[[.k]\]\s+(.*)$")


def main() -> None:
    matrix, graph, threads = sys.argv[1:4]
    shares = {k: 0.0 for k, _ in KINDS}
    shares["other"] = 0.0
    samples = "?"
    for line in sys.stdin:
        m = re.search(r"Samples: ([0-9.]+[KM]?)", line)
        if m:
            samples = m.group(1)
        m = ROW.match(line)
        if not m:
            continue
        pct, sym = float(m.group(1)), m.group(2)
        kind = next((k for k, rx in KINDS if re.search(rx, sym)), "other")
        shares[kind] += pct
    # Reading the matrix and building the graph are not featurizing.
    total = sum(v for k, v in shares.items() if k != "input") or 1.0
    cells = " | ".join(f"{100 * shares[k] / total:.0f} %" for k in
                       ["maps", "products", "pooling", "buffers", "threads", "other"])
    print(f"| {matrix} | {graph} | {threads} | {samples} | {cells} |")


if __name__ == "__main__":
    main()
