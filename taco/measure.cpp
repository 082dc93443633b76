// dashrank-taco-measure: times schedules as stock TACO runs them, checked against a CSR
// reference. Built by scripts/taco-tools.sh against libtaco (scripts/taco.sh) and libdashrank;
// documented in docs/taco.md.
//
//   dashrank-taco-measure --matrix M.csr --kernel spmm "16 256 1 k1 k0 i1 i0 j1 j0 1 0 0 0 i1 48 16"
//   dashrank-taco-measure --matrix M.csr --kernel spmm csr            # TACO's own CSR program
//   dashrank-taco-measure --matrix M.csr --kernel spmm --serve        # one request per stdin line
//
// Each schedule (a WACO SuperSchedule line, `csr`, or a `taco` command line dashrank wrote)
// becomes dashrank's TACO program for the matrix (repacked with dashrank_taco_pack_csr_i32), is compiled by TACO's code generator,
// run once and checked against a CSR reference computed here in double precision (an entry
// off by more than 1e-3 of the sum of its terms' magnitudes fails the measurement), then timed:
// warm-up runs, then rounds in which every schedule of the call runs once, interleaved, until
// --repeats rounds or --max-seconds. Printed: the median milliseconds of each schedule, one
// per line, in argument order. With --baseline, TACO's CSR program runs interleaved too and
// its median goes to stderr (`baseline csr: <ms> ms`).
//
// --serve answers each stdin line with `ok <ms>` (`ok <ms> <csr_ms> <ratio>` with --baseline,
// the ratio being the median over rounds of the candidate's time over the CSR time of the same
// round) or `error <message>`, so one process (one matrix read, one reference, one compiled CSR) serves
// a whole tuning run. Exit status: 0 when every schedule was measured, 1 when one failed (the
// reason on stderr), 2 on bad arguments.
#include <dashrank_taco.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

struct Csr {
  size_t rows = 0, cols = 0;
  std::vector<int32_t> row_ptr, col_idx;
  std::vector<float> values;
};

struct Options {
  std::string matrix;
  uint32_t kernel = DASHRANK_KERNEL_SPMM;
  uint32_t threads = 0;
  uint32_t dense = 256;
  int repeats = 25;
  int warmup = 3;
  double max_seconds = 2.0;
  bool baseline = false;
  bool serve = false;
  std::vector<std::string> schedules;
};

[[noreturn]] void usage(const std::string &why) {
  std::cerr << "error: " << why << "\n"
            << "usage: dashrank-taco-measure --matrix M.csr|M.mtx --kernel spmm|sddmm|spmv\n"
               "         [--threads N] [--dense N] [--repeats R] [--warmup W] [--max-seconds S]\n"
               "         [--baseline] (--serve | SCHEDULE...)\n"
               "SCHEDULE: a SuperSchedule line, csr, or a `taco ...` command line from dashrank\n";
  std::exit(2);
}

Options parse_args(int argc, char **argv) {
  Options o;
  for (int i = 1; i < argc; i++) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage(a + " needs a value");
      return argv[++i];
    };
    try {
      if (a == "--matrix") o.matrix = value();
      else if (a == "--kernel") {
        std::string k = value();
        if (k == "spmm") o.kernel = DASHRANK_KERNEL_SPMM;
        else if (k == "sddmm") o.kernel = DASHRANK_KERNEL_SDDMM;
        else if (k == "spmv") o.kernel = DASHRANK_KERNEL_SPMV;
        else usage("unknown kernel '" + k + "' (spmm, sddmm, spmv)");
      } else if (a == "--threads") o.threads = static_cast<uint32_t>(std::stoul(value()));
      else if (a == "--dense") o.dense = static_cast<uint32_t>(std::stoul(value()));
      else if (a == "--repeats") o.repeats = std::stoi(value());
      else if (a == "--warmup") o.warmup = std::stoi(value());
      else if (a == "--max-seconds") o.max_seconds = std::stod(value());
      else if (a == "--baseline") o.baseline = true;
      else if (a == "--serve") o.serve = true;
      else if (a.rfind("--", 0) == 0) usage("unknown option " + a);
      else o.schedules.push_back(a);
    } catch (const std::logic_error &) {
      usage("bad value for " + a);
    }
  }
  if (o.matrix.empty()) usage("--matrix is required");
  if (o.repeats < 1 || o.warmup < 0 || !(o.max_seconds > 0)) usage("bad --repeats/--warmup/--max-seconds");
  if (o.serve == !o.schedules.empty()) usage("give schedules or --serve (not both)");
  return o;
}

// A value in [-1, 1) from a 64-bit key (splitmix64), so runs are reproducible.
float hash_value(uint64_t key) {
  key += 0x9e3779b97f4a7c15ULL;
  key = (key ^ (key >> 30)) * 0xbf58476d1ce4e5b9ULL;
  key = (key ^ (key >> 27)) * 0x94d049bb133111ebULL;
  key ^= key >> 31;
  return static_cast<float>(key >> 40) / static_cast<float>(1 << 23) - 1.0f;
}

// WACO's binary .csr (int32 rows, cols, nnz, row_ptr, col_idx) or a coordinate Matrix Market
// file (general or symmetric, values ignored).
Csr read_matrix(const std::string &path) {
  Csr m;
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + path);
  if (path.size() > 4 && path.substr(path.size() - 4) == ".mtx") {
    std::string line, banner;
    std::getline(in, banner);
    bool symmetric = banner.find("symmetric") != std::string::npos;
    while (std::getline(in, line) && (line.empty() || line[0] == '%')) {
    }
    size_t entries = 0;
    std::istringstream(line) >> m.rows >> m.cols >> entries;
    std::vector<std::pair<int32_t, int32_t>> coo;
    for (size_t e = 0; e < entries && std::getline(in, line); e++) {
      long r = 0, c = 0;
      std::istringstream(line) >> r >> c;
      coo.push_back({static_cast<int32_t>(r - 1), static_cast<int32_t>(c - 1)});
      if (symmetric && r != c) coo.push_back({static_cast<int32_t>(c - 1), static_cast<int32_t>(r - 1)});
    }
    std::sort(coo.begin(), coo.end());
    coo.erase(std::unique(coo.begin(), coo.end()), coo.end());
    m.row_ptr.assign(m.rows + 1, 0);
    for (auto &rc : coo) m.row_ptr[rc.first + 1]++, m.col_idx.push_back(rc.second);
    for (size_t r = 0; r < m.rows; r++) m.row_ptr[r + 1] += m.row_ptr[r];
  } else {
    int32_t header[3];
    if (!in.read(reinterpret_cast<char *>(header), sizeof header)) throw std::runtime_error(path + ": no header");
    m.rows = static_cast<size_t>(header[0]);
    m.cols = static_cast<size_t>(header[1]);
    m.row_ptr.resize(m.rows + 1);
    m.col_idx.resize(static_cast<size_t>(header[2]));
    in.read(reinterpret_cast<char *>(m.row_ptr.data()), static_cast<std::streamsize>(m.row_ptr.size() * 4));
    in.read(reinterpret_cast<char *>(m.col_idx.data()), static_cast<std::streamsize>(m.col_idx.size() * 4));
    if (!in) throw std::runtime_error(path + ": truncated");
  }
  m.values.resize(m.col_idx.size());
  for (size_t n = 0; n < m.values.size(); n++) m.values[n] = hash_value(n);
  return m;
}

float dense_value(const std::string &tensor, size_t row, size_t col) {
  return hash_value((static_cast<uint64_t>(tensor[0]) << 56) ^ (static_cast<uint64_t>(row) << 24) ^ col);
}

// The reference result in double precision and, per entry, the sum of its terms' magnitudes
// (the scale of the floating-point error any summation order may make).
struct Reference {
  size_t cols = 0;  // of the dense result (SpMM: N, SpMV: 1); SDDMM: per nonzero
  std::vector<double> value, scale;
};

Reference reference(const Csr &m, const Options &o) {
  Reference ref;
  size_t n = o.dense;
  auto b = [&](size_t r, size_t c) { return static_cast<double>(dense_value("B", r, c)); };
  if (o.kernel == DASHRANK_KERNEL_SDDMM) {
    ref.value.assign(m.col_idx.size(), 0), ref.scale.assign(m.col_idx.size(), 0);
    for (size_t i = 0; i < m.rows; i++)
      for (int32_t q = m.row_ptr[i]; q < m.row_ptr[i + 1]; q++) {
        size_t j = static_cast<size_t>(m.col_idx[q]);
        double a = m.values[q], sum = 0, abs = 0;
        for (size_t k = 0; k < n; k++) {
          double t = a * b(i, k) * dense_value("D", j, k);
          sum += t, abs += std::fabs(t);
        }
        ref.value[q] = sum, ref.scale[q] = abs;
      }
    return ref;
  }
  ref.cols = o.kernel == DASHRANK_KERNEL_SPMV ? 1 : n;
  ref.value.assign(m.rows * ref.cols, 0), ref.scale.assign(m.rows * ref.cols, 0);
  for (size_t i = 0; i < m.rows; i++)
    for (int32_t q = m.row_ptr[i]; q < m.row_ptr[i + 1]; q++)
      for (size_t j = 0; j < ref.cols; j++) {
        double t = m.values[q] * b(static_cast<size_t>(m.col_idx[q]), j);
        ref.value[i * ref.cols + j] += t, ref.scale[i * ref.cols + j] += std::fabs(t);
      }
  return ref;
}

// Empty when the result matches the reference, else what differs.
std::string check(const dashrank::taco::Kernel &k, const Csr &m, const Reference &ref, uint32_t kernel) {
  size_t checked = 0;
  for (const auto &[row, col, got] : k.result_entries()) {
    double want = 0, scale = 0;
    if (row >= m.rows) continue;  // padding of a split
    if (kernel == DASHRANK_KERNEL_SDDMM) {
      auto first = m.col_idx.begin() + m.row_ptr[row], last = m.col_idx.begin() + m.row_ptr[row + 1];
      auto it = std::lower_bound(first, last, static_cast<int32_t>(col));
      if (it != last && *it == static_cast<int32_t>(col)) {
        size_t q = static_cast<size_t>(it - m.col_idx.begin());
        want = ref.value[q], scale = ref.scale[q], checked++;
      }
    } else {
      if (col >= ref.cols) continue;
      want = ref.value[row * ref.cols + col], scale = ref.scale[row * ref.cols + col], checked++;
    }
    if (std::fabs(got - want) > 1e-3 * scale + 1e-5) {
      std::ostringstream s;
      s << "wrong result at (" << row << ", " << col << "): " << got << ", want " << want;
      return s.str();
    }
  }
  size_t expected = kernel == DASHRANK_KERNEL_SDDMM ? m.col_idx.size() : m.rows * ref.cols;
  if (checked != expected) {
    std::ostringstream s;
    s << "the result holds " << checked << " of the " << expected << " entries it should";
    return s.str();
  }
  return "";
}

struct Measured {
  dashrank::taco::Kernel kernel;
  std::vector<double> ms;
};

dashrank_taco_options taco_options(const Options &o) {
  dashrank_taco_options t;
  dashrank::detail::check(dashrank_taco_options_init(&t));
  t.threads = o.threads;
  t.dense_extent = o.dense;
  return t;
}

// Builds, runs once and checks one schedule; throws with the reason when it fails.
Measured prepare(const std::string &schedule, const Csr &m, const Reference &ref, const Options &o) {
  dashrank_taco_options t = taco_options(o);
  auto program = schedule == "csr" ? dashrank::taco::Program::csr(o.kernel, m.rows, m.cols, &t)
                 : schedule.rfind("taco ", 0) == 0
                     ? dashrank::taco::Program::parse(schedule)
                     : dashrank::taco::Program::from_line(o.kernel, schedule, m.rows, m.cols, &t);
  dashrank::taco::Packed packed(program, m.rows, m.cols, m.row_ptr.data(), m.col_idx.data(), m.values.data(), &t);
  auto fill = [&](const std::string &tensor, size_t row, size_t col) -> float {
    size_t rows = tensor == "D" ? m.cols : (tensor == "B" && o.kernel != DASHRANK_KERNEL_SDDMM ? m.cols : m.rows);
    size_t cols = o.kernel == DASHRANK_KERNEL_SPMV ? 1 : o.dense;
    return row < rows && col < cols ? dense_value(tensor, row, col) : 0.0f;
  };
  Measured out{dashrank::taco::build(program, packed, fill), {}};
  out.kernel.assemble();
  out.kernel.compute();
  std::string wrong = check(out.kernel, m, ref, o.kernel);
  if (!wrong.empty()) throw std::runtime_error(wrong);
  return out;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// The candidate's time over the baseline's, round by round (the two ran back to back).
std::vector<double> ratios(const std::vector<double> &a, const std::vector<double> &b) {
  std::vector<double> r;
  for (size_t i = 0; i < a.size() && i < b.size(); i++) r.push_back(b[i] > 0 ? a[i] / b[i] : 0);
  return r;
}

// Warm-up, then interleaved rounds until --repeats or --max-seconds (at least 3 rounds).
void time_interleaved(std::vector<Measured *> &set, const Options &o) {
  using clock = std::chrono::steady_clock;
  for (int w = 0; w < o.warmup; w++)
    for (auto *m : set) m->kernel.compute();
  auto start = clock::now();
  for (int r = 0; r < o.repeats; r++) {
    for (auto *m : set) {
      auto t0 = clock::now();
      m->kernel.compute();
      m->ms.push_back(std::chrono::duration<double, std::milli>(clock::now() - t0).count());
    }
    double elapsed = std::chrono::duration<double>(clock::now() - start).count();
    if (r >= 2 && elapsed > o.max_seconds * static_cast<double>(set.size())) break;
  }
}

int serve(const Csr &m, const Reference &ref, const Options &o) {
  std::unique_ptr<Measured> csr;
  if (o.baseline) csr = std::make_unique<Measured>(prepare("csr", m, ref, o));
  std::cout << "ready" << std::endl;
  std::string line;
  while (std::getline(std::cin, line)) {
    try {
      Measured cand = prepare(line, m, ref, o);
      std::vector<Measured *> set{&cand};
      if (csr) csr->ms.clear(), set.push_back(csr.get());
      time_interleaved(set, o);
      std::cout << "ok " << median(cand.ms);
      if (csr) std::cout << " " << median(csr->ms) << " " << median(ratios(cand.ms, csr->ms));
      std::cout << std::endl;
    } catch (const std::exception &e) {
      std::string why = e.what();
      std::replace(why.begin(), why.end(), '\n', ' ');
      std::cout << "error " << why << std::endl;
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char **argv) {
  Options o = parse_args(argc, argv);
  try {
    Csr m = read_matrix(o.matrix);
    Reference ref = reference(m, o);
    if (o.serve) return serve(m, ref, o);
    std::vector<std::unique_ptr<Measured>> owned;
    for (const auto &s : o.schedules) owned.push_back(std::make_unique<Measured>(prepare(s, m, ref, o)));
    if (o.baseline) owned.push_back(std::make_unique<Measured>(prepare("csr", m, ref, o)));
    std::vector<Measured *> set;
    for (auto &p : owned) set.push_back(p.get());
    time_interleaved(set, o);
    for (size_t i = 0; i < o.schedules.size(); i++) std::printf("%.6f\n", median(owned[i]->ms));
    if (o.baseline) std::fprintf(stderr, "baseline csr: %.6f ms\n", median(owned.back()->ms));
    return 0;
  } catch (const std::exception &e) {
    std::cerr << "error: " << e.what() << std::endl;
    return 1;
  }
}
