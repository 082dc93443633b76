// Every toolchain space a model has a head for, through the C++ wrapper: enumerate the space
// for a matrix, print the top k and the toolchain default in the toolchain's own form (TACO
// command lines, SPADE CSV row, SparseTIR JSON), and tune the TACO space with a lambda.
//
//   DASHRANK_TACO_MEASURE=target/taco/dashrank-taco-measure
//     spaces MODEL_DIR MATRIX.csr|MATRIX.mtx [K] [MAX_SPLIT]
//
// MAX_SPLIT cuts the TACO space's split and chunk lists (e.g. 4: 7 776 schedules instead of
// 611 712). The measure lambda runs each candidate's `taco` command line through stock TACO
// with dashrank-taco-measure (compiled, checked against a CSR reference, timed); without
// DASHRANK_TACO_MEASURE the example ranks and prints and does not tune.
#include <dashrank.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

namespace {

// WACO .csr or Matrix Market, as CSR arrays (for the timing kernel).
struct Csr {
  size_t rows = 0, cols = 0;
  std::vector<int64_t> row_ptr, col_idx;
};

Csr read_csr(const std::string &path) {
  Csr m;
  if (path.size() > 4 && path.compare(path.size() - 4, 4, ".csr") == 0) {
    std::ifstream in(path, std::ios::binary);
    int32_t h[3];
    if (!in.read(reinterpret_cast<char *>(h), sizeof h) || h[0] <= 0 || h[1] <= 0 || h[2] < 0)
      throw dashrank::Error(DASHRANK_STATUS_PATTERN, path + ": bad WACO .csr header");
    std::vector<int32_t> rp(static_cast<size_t>(h[0]) + 1), ci(static_cast<size_t>(h[2]));
    in.read(reinterpret_cast<char *>(rp.data()), std::streamsize(rp.size() * 4));
    in.read(reinterpret_cast<char *>(ci.data()), std::streamsize(ci.size() * 4));
    if (!in) throw dashrank::Error(DASHRANK_STATUS_PATTERN, path + ": truncated .csr");
    m.rows = size_t(h[0]), m.cols = size_t(h[1]);
    m.row_ptr.assign(rp.begin(), rp.end());
    m.col_idx.assign(ci.begin(), ci.end());
    return m;
  }
  std::ifstream in(path);
  std::string line;
  bool symmetric = false;
  long r = 0, c = 0, n = 0;
  while (std::getline(in, line)) {
    if (line[0] == '%') {
      symmetric = symmetric || line.find("symmetric") != std::string::npos;
      continue;
    }
    if (std::sscanf(line.c_str(), "%ld %ld %ld", &r, &c, &n) == 3) break;
  }
  if (r <= 0 || c <= 0) throw dashrank::Error(DASHRANK_STATUS_PATTERN, path + ": no size line");
  std::vector<std::vector<int64_t>> rows(static_cast<size_t>(r));
  for (long i, j; std::getline(in, line);)
    if (line[0] != '%' && std::sscanf(line.c_str(), "%ld %ld", &i, &j) == 2) {
      rows[size_t(i - 1)].push_back(j - 1);
      if (symmetric && i != j) rows[size_t(j - 1)].push_back(i - 1);
    }
  m.rows = size_t(r), m.cols = size_t(c);
  m.row_ptr.push_back(0);
  for (auto &row : rows) {
    std::sort(row.begin(), row.end());
    row.erase(std::unique(row.begin(), row.end()), row.end());
    m.col_idx.insert(m.col_idx.end(), row.begin(), row.end());
    m.row_ptr.push_back(int64_t(m.col_idx.size()));
  }
  return m;
}

// Milliseconds of one `taco` command line through stock TACO (dashrank-taco-measure), or none
// when TACO or the result check fails.
std::optional<double> time_with_taco(const char *measurer, const std::string &matrix,
                                     const std::string &command_line) {
  auto quote = [](const std::string &s) {
    std::string q = "'";
    for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return q + "'";
  };
  std::string cmd = quote(measurer) + " --matrix " + quote(matrix) + " --kernel spmm --repeats 5 " +
                    quote(command_line) + " 2>/dev/null";
  std::optional<double> result;
  if (FILE *out = popen(cmd.c_str(), "r")) {
    double ms = -1;
    bool read = std::fscanf(out, "%lf", &ms) == 1;
    if (pclose(out) == 0 && read && ms >= 0) result.emplace(ms);
  }
  return result;
}

uint32_t kernel_of(const std::string &space) {
  auto kernel = space.substr(space.find('-') + 1);
  return kernel == "spmm" ? DASHRANK_KERNEL_SPMM
         : kernel == "sddmm" ? DASHRANK_KERNEL_SDDMM
                             : DASHRANK_KERNEL_SPMV;
}

// The registered space, or, for TACO with a bound, the cut-down WACO space.
dashrank::Space make_space(const std::string &name, uint32_t max_split) {
  if (max_split && name.rfind("taco-", 0) == 0)
    return dashrank::Space::taco(kernel_of(name), max_split, max_split);
  return dashrank::Space::from_name(name, 64);  // SparseTIR feature size 64
}

}  // namespace

int main(int argc, char **argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s MODEL_DIR MATRIX [K] [MAX_SPLIT]\n", argv[0]);
    return 2;
  }
  size_t k = argc > 3 ? std::strtoul(argv[3], nullptr, 10) : 3;
  uint32_t max_split = argc > 4 ? uint32_t(std::strtoul(argv[4], nullptr, 10)) : 0;
  try {
    dashrank::Model model(argv[1]);
    Csr csr = read_csr(argv[2]);
    std::string name = argv[2];
    name = name.substr(name.find_last_of('/') + 1);
    dashrank::Matrix matrix = model.embed_csr(csr.rows, csr.cols, csr.row_ptr, csr.col_idx);
    auto shape = matrix.shape();
    std::printf("model %s; matrix %s: %zu x %zu, %zu nonzeros\n", model.describe().c_str(),
                name.c_str(), shape[0], shape[1], shape[2]);
    int ranked_spaces = 0;
    for (const char *space_name : {"taco-spmm", "taco-sddmm", "taco-spmv", "spade-spmm",
                                   "spade-sddmm", "sparsetir-spmm", "sparsetir-sddmm"}) {
      dashrank::Space space = make_space(space_name, max_split);
      std::optional<dashrank::SpaceCandidates> cands;
      try {
        cands.emplace(model.prepare_space(space, matrix));
      } catch (const dashrank::Error &e) {
        if (e.status() != DASHRANK_STATUS_INVALID_ARGUMENT) throw;
        std::printf("%s: skipped (%s)\n", space_name, e.what());
        continue;
      }
      ranked_spaces++;
      std::printf("%s (%s): %zu candidates, %zu ranked; default #%zu is %s\n", space_name,
                  space.name().c_str(), cands->size(), cands->ranked_count(),
                  cands->default_index(), cands->message(cands->default_index()).c_str());
      for (const dashrank_ranked &e : model.top_k(matrix, *cands, k)) {
        std::printf("  %s%-3zu score %9.5f  %s\n", e.is_default ? "default " : "#",
                    e.rank, e.score, cands->render(e.index, name).c_str());
        std::printf("       line: %s\n", cands->line(e.index).c_str());
      }
      if (std::strncmp(space_name, "taco-spmm", 9) != 0) continue;
      const char *measurer = std::getenv("DASHRANK_TACO_MEASURE");
      if (!measurer) {
        std::printf("  not tuned: set DASHRANK_TACO_MEASURE to dashrank-taco-measure\n");
        continue;
      }
      int calls = 0;
      dashrank::Tuned tuned =
          model.tune(matrix, *cands, k, [&](const dashrank_measure_request &r) {
            calls++;
            return time_with_taco(measurer, argv[2], r.toolchain);
          }, name);
      std::printf("  tuned: %zu measured, %zu failed (%d lambda calls)", tuned.result.measured,
                  tuned.result.failed, calls);
      if (tuned.result.has_best)
        std::printf("; fastest #%zu %.3f ms, %.2fx the default", tuned.result.best_index,
                    tuned.result.best_ms, tuned.result.speedup_over_default);
      std::printf("\n");
      if (size_t(calls) != tuned.measurements.size()) return 1;
    }
    return ranked_spaces > 0 ? 0 : 1;
  } catch (const dashrank::Error &e) {
    std::fprintf(stderr, "error: status %u: %s\n", unsigned(e.status()), e.what());
    return 1;
  }
}
