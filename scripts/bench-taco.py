#!/usr/bin/env python3
"""TACO end to end on the real matrices: what the model's picks and the tuning find, measured
through stock TACO against TACO's own CSR program in the same run.

For each kernel and matrix (every kernel has a WACO model; every run checks each kernel's
result against a CSR reference before timing it):

- `dashrank tune --strategy top-k --top 20 --all-programs`: the model's 20 best as ranked,
  then the default (TACO's CSR). Top-1 and the best of the top 5/10/20 are read off it.
- the same with distinct programs (no `--all-programs`).
- `dashrank tune --strategy search --budget B`: the default, 10 seeds, then neighbours of the
  fastest, the last 4 of B measurements a confirmation round (the default and the 3 fastest
  measured again, on three operand instances in a second measurer process; the pick is the fastest of that round that beat the default by 2 % in both
  of its measurements, else the default); the best-so-far curve and the tuning time. With --unconfirmed, also the same search without the confirmation round
  (`--confirm 0`: the pick is the fastest single measurement), and with each --variant
  NAME='FLAGS' the same search with FLAGS added (e.g. --variant ranked='--seeds ranked'), for
  comparison in the same fresh run.
- WACO's FixedCSR (TACO's CSR plus `bound`) with dashrank-taco-measure.
- rank correlation: --sample schedules that stock TACO runs (WACO's measured lines where the
  matrix has them, topped up with random lines of the space; lines TACO refuses are passed
  over) measured, written in WACO's collected format (`<tokens> = <ms>`) and read back by
  `dashrank eval` for Kendall's tau.

The tuning runs only choose: every speedup in the table is TACO CSR time / pick time from one
fresh run per matrix of dashrank-taco-measure with TACO's CSR and every pick interleaved (25
rounds, medians), each program on --instances instances of its operands (default 3; its time
is the median over all of their samples): the same program's time moves by up to a third
between two allocations of its operands (BENCHMARKS.md §4), so one instance is one draw. The search curve is the best-so-far of the tuning run's own ratios (the
median over rounds of CSR time / candidate time, run back to back). Results go to
OUT/<kernel>/<matrix>.*.json, OUT/measured/<KERNEL>/<matrix>.txt and OUT/summary.md.

  python3 scripts/bench-taco.py --kernels spmm --budget 50 --sample 100
  python3 scripts/bench-taco.py --kernels spmm --only-search --unconfirmed --sample 0
"""
import argparse
import json
import math
import os
import random
import subprocess
import sys
import time
import zlib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
UPPER = {"spmm": "SpMM", "sddmm": "SDDMM", "spmv": "SpMV"}
FIXED_CSR = {"spmm": "1 1 1 i1 i0 k1 k0 j1 j0 1 1 0 1 i1 48 32",
             "sddmm": "1 1 1 i1 i0 j1 j0 k1 k0 1 1 0 1 i1 48 32",
             "spmv": "1 1 i1 i0 k1 k0 1 1 0 1 i1 48 128"}


def geomean(xs):
    xs = [x for x in xs if x and x > 0]
    return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else float("nan")


def tune(args, kernel, matrix, extra, path):
    if os.path.exists(path) and not args.fresh:
        with open(path) as f:
            return json.load(f)
    cmd = [args.dashrank, "tune", "--model", f"{args.models}/waco-{kernel}", "--matrix", matrix,
           "--space", "taco", "--measurer", "taco", "--taco-measure", args.measure, "--format", "json",
           "--timeout", "300"] + extra
    start = time.time()
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        print(f"  tune failed: {out.stderr.strip()[-300:]}", file=sys.stderr)
        return None
    report = json.loads(out.stdout)
    report["wall_s"] = time.time() - start
    with open(path, "w") as f:
        json.dump(report, f)
    return report


def speedups(report):
    """Per measurement in order: (is_default, speedup over CSR or None)."""
    out = []
    for m in report["measurements"]:
        s = None
        if m["ms"] is not None and m.get("ratio"):
            s = 1.0 / m["ratio"]  # median over rounds of CSR time / candidate time
        out.append((m["is_default"], s))
    return out


def best_of_first(report, k):
    vals = [s for d, s in speedups(report) if not d][:k]
    vals = [v for v in vals if v]
    return max(vals) if vals else None


def measure_lines(args, kernel, matrix, lines, want=None):
    """{line: ms} for lines measured with the measurer server (failures left out), stopping
    after `want` successes."""
    p = subprocess.Popen([args.measure, "--matrix", matrix, "--kernel", kernel, "--serve",
                          "--repeats", "9", "--max-seconds", "0.5"],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    if p.stdout.readline().strip() != "ready":
        return {}
    out = {}
    for line in lines:
        if want is not None and len(out) >= want:
            break
        p.stdin.write(line + "\n")
        p.stdin.flush()
        reply = p.stdout.readline().split()
        if reply and reply[0] == "ok":
            out[line] = float(reply[1])
    p.stdin.close()
    p.wait()
    return out


def runs_on_stock_taco(splits, names):
    """SDDMM lines whose sparse result stock TACO can assemble (TacoProgram::stock_taco_limit):
    i and j unsplit (one dense level over one compressed), the reduction loops innermost.
    The format flags are left to the measurer, which refuses the rest at no cost."""
    return splits[0] == 1 and splits[1] == 1 and {names[-1][0], names[-2][0]} == {"k"}


def random_lines(kernel, n, seed):
    """Random lines of WACO's space (TacoSpace::waco's lists and loop-order rules)."""
    rng = random.Random(seed)
    axes = {"spmm": "ikj", "sddmm": "ijk", "spmv": "ik"}[kernel]
    dense = {"spmm": "j", "sddmm": "k", "spmv": None}[kernel]
    chunks = [2 ** p for p in range(6 if kernel == "sddmm" else 9)]
    out = set()
    while len(out) < n:
        splits = [2 ** rng.randrange(8 if a == dense else 6) for a in axes]
        names = [f"{a}{x}" for a in axes for x in "10"]
        rng.shuffle(names)
        pos = {v: i for i, v in enumerate(names)}
        if any(pos[f"{a}1"] > pos[f"{a}0"] for a in axes):
            continue
        if dense:
            ds = splits[axes.index(dense)]
            last = pos[f"{dense}0"] == len(names) - 1 and (ds >= 8 or pos[f"{dense}1"] == len(names) - 2)
            if not last or (kernel == "spmm" and pos["j1"] < pos["i1"]):
                continue
        flags = [rng.randrange(2) for _ in range(4)]
        if kernel == "sddmm" and not runs_on_stock_taco(splits, names):
            continue
        par = "i1"
        if kernel == "sddmm":
            par = next(v for v in names if v in ("i1", "j1"))
        out.add(" ".join(map(str, splits + names + flags + [par, 48, rng.choice(chunks)])))
    return sorted(out)


def tau_sample(args, kernel, name, matrix):
    """Measures up to args.sample schedules: WACO's measured lines when the matrix has them,
    topped up with random lines of the space (lines stock TACO refuses are passed over)."""
    collected = os.path.join(args.shared, "data/waco/collected", UPPER[kernel], f"{name}.txt")
    lines, source = [], "random lines of the space"
    if os.path.exists(collected):
        with open(collected) as f:
            lines = [l.split("=")[0].strip() for l in f if l.strip()]
        source = "WACO's measured lines"
    outdir = os.path.join(args.out, "measured", UPPER[kernel])
    os.makedirs(outdir, exist_ok=True)
    path = os.path.join(outdir, f"{name}.txt")
    if not os.path.exists(path) or args.fresh or os.path.getsize(path) == 0:
        ms = measure_lines(args, kernel, matrix, lines, args.sample)
        if len(ms) < args.sample:
            extra = random_lines(kernel, 8 * args.sample, zlib.crc32(name.encode()) & 0xFFFF)
            ms.update(measure_lines(args, kernel, matrix, [l for l in extra if l not in ms],
                                    args.sample - len(ms)))
            if lines:
                source += " and random lines"
        with open(path, "w") as f:
            f.writelines(f"{l} = {t}\n" for l, t in ms.items())
    return path, source


def evaluate_tau(args, kernel):
    d = os.path.join(args.out, "measured", UPPER[kernel])
    if not os.path.isdir(d):
        return {}
    report = os.path.join(args.out, f"eval-{kernel}.json")
    subprocess.run([args.dashrank, "eval", "--model", f"{args.models}/waco-{kernel}", "--measured", d,
                    "--matrices", args.matrix_dir, "--json-out", report], capture_output=True, text=True)
    if not os.path.exists(report):
        return {}
    with open(report) as f:
        r = json.load(f)
    return {m["matrix"]: m for m in r.get("matrices", [])}


def confirm(args, kernel, matrix, programs):
    """{program: ms} from one fresh interleaved run of TACO's CSR and every program given, each
    on --instances instances of its operands (allocated anew for each; its time is the median
    over all of their samples)."""
    progs = ["csr"] + [p for p in dict.fromkeys(programs) if p and p != "csr"]
    out = subprocess.run([args.measure, "--matrix", matrix, "--kernel", kernel, "--repeats", "25",
                          "--max-seconds", "2", "--instances", str(args.instances)] + progs,
                         capture_output=True, text=True)
    if out.returncode != 0:
        print(f"  confirmation run failed: {out.stderr.strip()[-300:]}", file=sys.stderr)
        return {}
    return dict(zip(progs, map(float, out.stdout.split())))


def best_program(report, k=None, only_ranked=True):
    """The toolchain text of the fastest (by the run's objective) of the first k measured."""
    ms = [m for m in report["measurements"] if not (only_ranked and m["is_default"])][:k]
    ms = [m for m in ms if m["ms"] is not None and m.get("ratio")]
    return min(ms, key=lambda m: m["ratio"])["toolchain"] if ms else None


def picked_program(report):
    """The toolchain text of the run's own pick (`best_index`; after a confirmation round,
    the fastest of that round)."""
    best = report.get("best_index")
    return next((m["toolchain"] for m in report["measurements"] if m["index"] == best), None)


def bench_matrix(args, kernel, name):
    matrix = os.path.join(args.matrix_dir, f"{name}.csr")
    d = os.path.join(args.out, kernel)
    os.makedirs(d, exist_ok=True)
    plain = distinct = None
    variants = {}
    if not args.only_search:
        plain = tune(args, kernel, matrix, ["--strategy", "top-k", "--top", "20", "--all-programs", "--budget", "21"],
                     f"{d}/{name}.topk.json")
        distinct = tune(args, kernel, matrix, ["--strategy", "top-k", "--top", "20", "--budget", "21"],
                        f"{d}/{name}.distinct.json")
    search = tune(args, kernel, matrix, ["--strategy", "search", "--budget", str(args.budget)],
                  f"{d}/{name}.search.json")
    for label, flags in args.variants:
        variants[label] = tune(args, kernel, matrix, ["--strategy", "search", "--budget", str(args.budget)]
                               + flags, f"{d}/{name}.search-{label}.json")
    picks = {"fixed": FIXED_CSR[kernel]}
    if plain:
        picks["top1"] = best_program(plain, 1)
        for k in (5, 10, 20):
            picks[f"top{k}"] = best_program(plain, k)
    if distinct:
        for k in (5, 10, 20):
            picks[f"dtop{k}"] = best_program(distinct, k)
    if search:
        picks["search"] = picked_program(search)
    for label, report in variants.items():
        if report:
            picks[label] = picked_program(report)
    times = confirm(args, kernel, matrix, list(picks.values()))
    csr = times.get("csr")
    row = {"matrix": name, "csr_ms": csr, "picks": picks, "instances": args.instances}
    for key, prog in picks.items():
        row[key] = csr / times[prog] if csr and prog in times else None
    if search:
        sp = speedups(search)
        row["search_n"] = len(sp)
        row["search_s"] = search.get("wall_s")
        best, curve = 0.0, []
        for _, x in sp:
            best = max(best, x or 0.0)
            curve.append(best)
        row["curve"] = curve
    if args.sample > 0:
        row["tau_file"], row["tau_source"] = tau_sample(args, kernel, name, matrix)
    return row


def fmt(x, digits=2):
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{digits}f}"


def least(xs):
    """The smallest of the values present (None: none is)."""
    xs = [x for x in xs if x is not None]
    return min(xs) if xs else None


def summary(rows, kernel, taus, budget, variants):
    cols = ["top1", "top5", "top10", "top20", "dtop5", "dtop10", "dtop20", "search"] + [v for v, _ in variants]
    lines = [f"### {UPPER[kernel]}", "",
             "| matrix | CSR ms | FixedCSR | top-1 | top-5 | top-10 | top-20 | distinct top-5 | top-10 | top-20 "
             f"| search ({budget}) | " + "".join(f"search, {v} | " for v, _ in variants) + "measured | tuning s | tau |",
             "|---|" + "---:|" * (len(cols) + 5)]
    for r in rows:
        tau = taus.get(r["matrix"], {}).get("kendall_tau")
        lines.append(f"| {r['matrix']} | {fmt(r.get('csr_ms'), 3)} | {fmt(r.get('fixed'))} | "
                     + " | ".join(fmt(r.get(c)) for c in cols)
                     + f" | {r.get('search_n', '-')} | {fmt(r.get('search_s'), 0)} | {fmt(tau)} |")
    lines.append("| **geomean** | | " + fmt(geomean([r.get("fixed") for r in rows])) + " | "
                 + " | ".join(fmt(geomean([r.get(c) for r in rows])) for c in cols) + " | | | "
                 + fmt(sum(t.get("kendall_tau") or 0 for t in taus.values()) / len(taus) if taus else None)
                 + " (mean) |")
    lines.append("| **min** | | " + fmt(least([r.get("fixed") for r in rows])) + " | "
                 + " | ".join(fmt(least([r.get(c) for r in rows])) for c in cols) + " | | | |")
    curves = [r["curve"] for r in rows if r.get("curve")]
    if curves:
        lines += ["", "Search: best speedup over TACO's CSR after n measurements (the default is measurement 1)", "",
                  "| n | " + " | ".join(str(n) for n in (1, 2, 5, 10, 11, 20, 30, 40, 50) if n <= budget) + " |",
                  "|---|" + "---:|" * len([n for n in (1, 2, 5, 10, 11, 20, 30, 40, 50) if n <= budget])]
        for label, agg in (("geomean", geomean), ("min", min)):
            vals = []
            for n in (1, 2, 5, 10, 11, 20, 30, 40, 50):
                if n > budget:
                    continue
                vals.append(fmt(agg([c[min(n, len(c)) - 1] for c in curves])))
            lines.append(f"| {label} | " + " | ".join(vals) + " |")
    return "\n".join(lines)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--dashrank", default=f"{ROOT}/target/release/dashrank")
    p.add_argument("--measure", default=f"{ROOT}/target/taco/dashrank-taco-measure")
    p.add_argument("--models", default=f"{ROOT}/models")
    p.add_argument("--shared", default=f"{ROOT}/../shared")
    p.add_argument("--matrices", default="all")
    p.add_argument("--kernels", default="spmm,sddmm,spmv")
    p.add_argument("--budget", type=int, default=50)
    p.add_argument("--sample", type=int, default=100)
    p.add_argument("--out", default=f"{ROOT}/target/bench-taco")
    p.add_argument("--fresh", action="store_true", help="tune again what OUT already holds (else only the fresh run is redone)")
    p.add_argument("--instances", type=int, default=3,
                   help="operand instances per program in the fresh run (their median is its time)")
    p.add_argument("--only-search", action="store_true", help="skip the two top-k tunes")
    p.add_argument("--unconfirmed", action="store_true",
                   help="also run the search without its confirmation round (--confirm 0)")
    p.add_argument("--variant", action="append", default=[], metavar="NAME='FLAGS'",
                   help="also run the search with FLAGS added, reported as column NAME")
    args = p.parse_args()
    args.variants = [("unconfirmed", ["--confirm", "0"])] if args.unconfirmed else []
    for v in args.variant:
        label, sep, flags = v.partition("=")
        if not sep or not label:
            p.error(f"--variant {v!r}: expected NAME='FLAGS'")
        args.variants.append((label, flags.split()))
    for path, how in [(args.dashrank, "cargo build --release -p dashrank-cli"),
                      (args.measure, "bash scripts/taco-tools.sh")]:
        if not os.access(path, os.X_OK):
            p.error(f"{path} is missing; build it with: {how}")
    args.matrix_dir = os.path.join(args.shared, "data/waco/matrices")
    names = sorted(f[:-4] for f in os.listdir(args.matrix_dir) if f.endswith(".csr"))
    if args.matrices != "all":
        names = args.matrices.split(",")
    os.makedirs(args.out, exist_ok=True)
    parts = []
    for kernel in args.kernels.split(","):
        rows = []
        for name in names:
            print(f"== {kernel} {name}", flush=True)
            rows.append(bench_matrix(args, kernel, name))
            r = rows[-1]
            print(f"   CSR {fmt(r.get('csr_ms'), 3)} ms, FixedCSR {fmt(r.get('fixed'))}x, top-1 {fmt(r.get('top1'))}x, "
                  f"top-20 {fmt(r.get('top20'))}x, search {fmt(r.get('search'))}x"
                  + "".join(f" ({v} {fmt(r.get(v))}x)" for v, _ in args.variants) + f" in {r.get('search_n')} "
                  f"measurements, {fmt(r.get('search_s'), 0)} s", flush=True)
        taus = evaluate_tau(args, kernel) if args.sample > 0 else {}
        parts.append(summary(rows, kernel, taus, args.budget, args.variants))
        with open(os.path.join(args.out, f"rows-{kernel}.json"), "w") as f:
            json.dump(rows, f, indent=1)
    text = "\n\n".join(parts)
    with open(os.path.join(args.out, "summary.md"), "w") as f:
        f.write(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
