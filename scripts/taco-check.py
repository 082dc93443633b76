#!/usr/bin/env python3
"""Every TACO program `dashrank rank --space taco` prints, run through stock TACO and checked.

For each matrix and kernel, the model's top N and the default (TACO's CSR) are taken from
`dashrank rank --format json` and `--format cpp`, and each program is checked three ways:

1. command line: the stock `taco` CLI compiles the printed command line (`-write-source`), and
   dashrank-taco-measure runs that C code on the matrix repacked through the C ABI
   (`--kernel-source`), checked against a CSR reference;
2. C++ snippet: the printed snippets are compiled into one program against libtaco, the
   operands filled with TACO's own `insert` + `pack` (so TACO, not dashrank, lays the matrix
   out), run, and checked against the same reference;
3. the measurer's own build (include/dashrank_taco.hpp: the C ABI's program and repacking
   through TACO's C++ API) is checked by step 1's measurer as well.

Exit status 1 when any program fails a check; the failures are listed.

  python3 scripts/taco-check.py --matrices mhd4800a,cavity24 --kernels spmm,sddmm,spmv --top 5
"""
import argparse
import json
import os
import re
import shlex
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KERNEL_CODES = {"spmm": 0, "sddmm": 1, "spmv": 2}


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


def rank(args, matrix, kernel, fmt):
    out = run([args.dashrank, "rank", "--model", f"{args.models}/waco-{kernel}", "--matrix", matrix,
               "--space", "taco", "--top", str(args.top), "--format", fmt])
    if out.returncode != 0:
        raise SystemExit(f"dashrank rank failed: {out.stderr}")
    return out.stdout


def check_command_line(args, matrix, kernel, entry, workdir):
    """The CLI compiles the command line; the measurer runs its C code on the repacked matrix."""
    words = shlex.split(entry["toolchain"])
    source = os.path.join(workdir, f"cli-{kernel}-{entry['index']}.c")
    words[0] = os.path.join(args.taco, "bin", "taco")
    cli = run(words + [f"-write-source={source}"])
    if cli.returncode != 0:
        return f"taco CLI: {cli.stderr.strip()[-300:]}"
    m = run([args.measure, "--matrix", matrix, "--kernel", kernel, "--repeats", "3", "--warmup", "0",
             "--kernel-source", source, entry["toolchain"]])
    if m.returncode != 0:
        return f"its C code: {m.stderr.strip()[-300:]}"
    m = run([args.measure, "--matrix", matrix, "--kernel", kernel, "--repeats", "3", "--warmup", "0",
             entry["toolchain"]])
    if m.returncode != 0:
        return f"dashrank_taco.hpp build: {m.stderr.strip()[-300:]}"
    return None


VAR_RE = re.compile(r"^([ijk])([01]?)$")


def tensor_vars(command_line):
    """{tensor: [(name, axis, part, dim, inner)]} from a command line's expression and -d flags."""
    words = shlex.split(command_line)
    lhs, rhs = words[1].split("=")
    accesses = [lhs] + rhs.split("*")
    dims = {w[3:].split(":")[0]: [int(x) for x in w[3:].split(":")[1].split(",")]
            for w in words if w.startswith("-d=")}
    out = {}
    for a in accesses:
        name, rest = a.split("(")
        names = rest.rstrip(")").split(",")
        extent = dict(zip(names, dims[name]))
        vs = []
        for n, d in zip(names, dims[name]):
            axis, part = VAR_RE.match(n).groups()
            inner = extent.get(f"{axis}0", d) if part == "1" else d
            vs.append((n, axis, {"": 0, "1": 1, "0": 2}[part], d, inner))
        out[name] = vs
    return out


def cpp_vars(vs):
    return "{" + ", ".join(f"{{'{a}', {p}, {inner}, {d}}}" for (_, a, p, d, inner) in vs) + "}"


HARNESS_HEAD = r"""
#include <taco.h>
#include <taco/index_notation/transformations.h>
#include <cstdio>
#include "support.hpp"
using namespace dashrank_taco_support;
using taco::Tensor;
struct Var { char axis; int part; int inner; int dim; };
static Csr M; static Reference REF; static uint32_t KERNEL; static size_t N;
static int coord(const Var &v, size_t x) { return v.part == 0 ? int(x) : v.part == 1 ? int(x / v.inner) : int(x % v.inner); }
static size_t axis_of(const std::vector<Var> &vs, const std::vector<int> &c, char a) {
  size_t x = 0;
  for (size_t l = 0; l < vs.size(); l++)
    if (vs[l].axis == a) x = vs[l].part == 1 ? size_t(c[l]) * vs[l].inner : x + size_t(c[l]);
  return x;
}
static void fill_sparse(Tensor<float> &A, const std::vector<Var> &vs) {
  for (size_t i = 0; i < M.rows; i++)
    for (int32_t q = M.row_ptr[i]; q < M.row_ptr[i + 1]; q++) {
      std::vector<int> c;
      for (const auto &v : vs) c.push_back(coord(v, v.axis == 'i' ? i : size_t(M.col_idx[q])));
      A.insert(c, M.values[q]);
    }
  A.pack();
}
static void fill_dense(Tensor<float> &T, const std::vector<Var> &vs, const char *name) {
  char row_axis = vs[0].axis, col_axis = 0;
  for (const auto &v : vs) if (v.axis != row_axis) col_axis = v.axis;
  auto extent = [&](char a) { return a == 'i' ? M.rows : a == 'k' && KERNEL != DASHRANK_KERNEL_SDDMM ? M.cols : a == 'j' ? (KERNEL == DASHRANK_KERNEL_SDDMM ? M.cols : N) : N; };
  std::vector<int> c(vs.size(), 0);
  while (true) {
    size_t r = axis_of(vs, c, row_axis), col = col_axis ? axis_of(vs, c, col_axis) : 0;
    if (r < extent(row_axis) && (!col_axis || col < extent(col_axis))) T.insert(c, dense_value(name, r, col));
    size_t l = vs.size();
    while (l > 0 && ++c[l - 1] == vs[l - 1].dim) c[--l] = 0;
    if (l == 0) break;
  }
  T.pack();
}
static bool check_result(const char *what, Tensor<float> &C, const std::vector<Var> &vs) {
  std::vector<std::tuple<size_t, size_t, float>> entries;
  bool matrix = false;
  for (const auto &v : vs) matrix = matrix || v.axis == 'j';
  for (auto &e : taco::iterate<float>(C)) {
    std::vector<int> c = e.first.toVector();
    entries.emplace_back(axis_of(vs, c, 'i'), matrix ? axis_of(vs, c, 'j') : 0, e.second);
  }
  std::string wrong = check(entries, M, REF, KERNEL);
  std::printf("%s %s%s\n", wrong.empty() ? "ok" : "FAIL", what, wrong.empty() ? "" : (": " + wrong).c_str());
  return wrong.empty();
}
"""


def harness(snippets, kernel):
    """One C++ program running every snippet: declarations, fill, computation, check."""
    parts = [HARNESS_HEAD]
    for n, (label, code, command_line) in enumerate(snippets):
        tv = tensor_vars(command_line)
        decls, rest = code.split("// fill:", 1)
        rest = rest.split("\n", 1)[1]
        fill = [f"fill_sparse(A, {cpp_vars(tv['A'])});"]
        for t in ("B", "D"):
            if t in tv:
                fill.append(f'fill_dense({t}, {cpp_vars(tv[t])}, "{t}");')
        parts.append(f"static bool run_{n}() {{\n  try {{\n{decls}\n" + "\n".join(fill) + "\n" + rest +
                     f'  return check_result({json.dumps(label)}, C, {cpp_vars(tv["C"])});\n'
                     f'  }} catch (const std::exception &e) {{ std::printf("FAIL %s: %s\\n", {json.dumps(label)}, e.what()); return false; }}\n}}\n')
    calls = " ".join(f"ok &= run_{n}();" for n in range(len(snippets)))
    parts.append(f"""int main(int argc, char **argv) {{
  (void)argc; M = read_matrix(argv[1]); KERNEL = {KERNEL_CODES[kernel]}; N = 256;
  REF = reference(M, KERNEL, N);
  bool ok = true; {calls}
  return ok ? 0 : 1;
}}
""")
    return "".join(parts)


def check_snippets(args, matrix, kernel, entries, workdir):
    text = rank(args, matrix, kernel, "cpp")
    blocks = re.split(r"^// (?=\S+: rank )", text, flags=re.M)[1:]
    snippets = []
    for block, entry in zip(blocks, entries):
        header, code = block.split("\n", 1)
        snippets.append((f"{kernel} candidate {entry['index']}", code, entry["toolchain"]))
    src = os.path.join(workdir, f"snippets-{kernel}.cpp")
    exe = src[:-4]
    with open(src, "w") as f:
        f.write(harness(snippets, kernel))
    cc = run(["g++", "-std=c++17", "-O1", "-isystem", f"{args.taco}/include", f"-I{ROOT}/taco",
              f"-I{ROOT}/include", src, "-L", f"{args.taco}/lib", "-ltaco", "-fopenmp",
              f"-Wl,-rpath,{args.taco}/lib", "-o", exe])
    if cc.returncode != 0:
        return {s[0]: f"snippet program does not compile: {cc.stderr[-400:]}" for s in snippets}
    out = run([exe, matrix], env=dict(os.environ, OMP_PROC_BIND="true", OMP_PLACES="cores"))
    failures = {}
    for s in snippets:
        line = next((l for l in out.stdout.splitlines() if l.split(" ", 1)[1].startswith(s[0])), None)
        if line is None or not line.startswith("ok"):
            failures[s[0]] = line or f"no result (exit {out.returncode}): {out.stderr[-300:]}"
    return failures


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--dashrank", default=f"{ROOT}/target/release/dashrank")
    p.add_argument("--measure", default=f"{ROOT}/target/taco/dashrank-taco-measure")
    p.add_argument("--taco", required=True, help="TACO prefix (bash scripts/taco.sh)")
    p.add_argument("--models", default=f"{ROOT}/models")
    p.add_argument("--matrix-dir", default=f"{ROOT}/../shared/data/waco/matrices")
    p.add_argument("--matrices", default="mhd4800a")
    p.add_argument("--kernels", default="spmm,sddmm,spmv")
    p.add_argument("--top", type=int, default=5)
    p.add_argument("--out", default=f"{ROOT}/target/taco/check")
    args = p.parse_args()
    os.makedirs(args.out, exist_ok=True)
    failures, checked = [], 0
    for name in args.matrices.split(","):
        matrix = os.path.join(args.matrix_dir, f"{name}.csr")
        for kernel in args.kernels.split(","):
            report = json.loads(rank(args, matrix, kernel, "json"))[0]
            entries = report["entries"]
            for e in entries:
                why = check_command_line(args, matrix, kernel, e, args.out)
                checked += 1
                tag = "default" if e["is_default"] else f"rank {e['rank']}"
                print(f"{name} {kernel} {tag:>9} candidate {e['index']:>7}: command line "
                      f"{'ok' if why is None else 'FAIL'}", flush=True)
                if why:
                    failures.append(f"{name} {kernel} candidate {e['index']} command line: {why}")
            snippet_failures = check_snippets(args, matrix, kernel, entries, args.out)
            print(f"{name} {kernel}: {len(entries) - len(snippet_failures)}/{len(entries)} C++ snippets ok",
                  flush=True)
            failures += [f"{name} {label}: {why}" for label, why in snippet_failures.items()]
    print(f"{checked} programs checked, {len(failures)} failures")
    for f in failures:
        print("FAIL", f)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
