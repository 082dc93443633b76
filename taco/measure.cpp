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
// its median goes to stderr (`baseline csr: <ms> ms`). With --instances N, each schedule runs
// on N instances of its operands (packed and allocated anew, sharing one compiled kernel),
// interleaved, and its median is over all of their samples: where the operands land moves
// some programs' times by a third between two allocations.
//
// OpenMP threads are bound to cores (OMP_PROC_BIND=true, OMP_PLACES=cores) unless OMP_PROC_BIND
// is set: unbound, two threads sometimes shared one core of a 2-core VM and a kernel of tens of
// microseconds took hundreds of times longer (BENCHMARKS.md, "TACO end to end"). Every program,
// TACO's CSR and `taco` command lines alike, gets --threads, else omp_get_num_procs() threads
// (dashrank_taco.hpp counts the cores as OpenMP does: this bound thread itself sees one).
//
// --kernel-source FILE.c runs the C code the stock `taco` CLI wrote for the schedule
// (`taco ... -write-source=FILE.c`, one schedule) instead of compiling it through TACO's C++ API:
// the check of a `dashrank rank --format taco` command line with dashrank's repacked matrix.
//
// --serve answers each stdin line with `ok <ms>` (`ok <ms> <csr_ms> <ratio>` with --baseline,
// the ratio being the median over rounds of the candidate's time over the CSR time of the same
// round) or `error <message>`, so one process (one matrix read, one reference, one compiled CSR) serves
// a whole tuning run. Exit status: 0 when every schedule was measured, 1 when one failed (the
// reason on stderr), 2 on bad arguments.
#include <dashrank_taco.hpp>

#include "support.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <unistd.h>
#include <fstream>
#include <iostream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using namespace dashrank_taco_support;

// Operand instances one schedule may be timed on (each holds a copy of its operands).
constexpr int MAX_INSTANCES = 16;

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
  int instances = 1;
  std::string kernel_source;
  std::vector<std::string> schedules;
};

[[noreturn]] void usage(const std::string &why) {
  std::cerr << "error: " << why << "\n"
            << "usage: dashrank-taco-measure --matrix M.csr|M.mtx --kernel spmm|sddmm|spmv\n"
               "         [--threads N] [--dense N] [--repeats R] [--warmup W] [--max-seconds S]\n"
               "         [--instances N] [--baseline] [--kernel-source FILE.c] (--serve | SCHEDULE...)\n"
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
      else if (a == "--instances") o.instances = std::stoi(value());
      else if (a == "--kernel-source") o.kernel_source = value();
      else if (a.rfind("--", 0) == 0) usage("unknown option " + a);
      else o.schedules.push_back(a);
    } catch (const std::logic_error &) {
      usage("bad value for " + a);
    }
  }
  if (o.matrix.empty()) usage("--matrix is required");
  if (o.repeats < 1 || o.warmup < 0 || !(o.max_seconds > 0)) usage("bad --repeats/--warmup/--max-seconds");
  if (o.instances < 1 || o.instances > MAX_INSTANCES) usage("--instances must be 1 to " + std::to_string(MAX_INSTANCES));
  if (o.serve == !o.schedules.empty()) usage("give schedules or --serve (not both)");
  return o;
}

struct Measured {
  dashrank::taco::Kernel kernel;
  std::vector<double> ms;
  int batch = 1;  // runs per timed sample
};

dashrank_taco_options taco_options(const Options &o) {
  dashrank_taco_options t;
  dashrank::detail::check(dashrank_taco_options_init(&t));
  t.threads = o.threads;
  t.dense_extent = o.dense;
  return t;
}

// Builds, runs once and checks one instance of a schedule; throws with the reason when it
// fails. An instance after the first (`first` given) reuses the first's compiled kernel.
Measured prepare(const std::string &schedule, const Csr &m, const Reference &ref, const Options &o,
                 const Measured *first = nullptr) {
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
  Measured out{dashrank::taco::declare(program, packed, fill), {}};
  bool by_taco = o.kernel_source.empty() || schedule == "csr";
  if (first && by_taco)
    out.kernel.compiled = first->kernel.compiled;
  else if (by_taco)
    out.kernel.compile();
  else
    out.kernel.compile_source(o.kernel_source);
  out.kernel.assemble();
  out.kernel.compute();
  std::string wrong = check(out.kernel.result_entries(), m, ref, o.kernel);
  if (!wrong.empty()) throw std::runtime_error(wrong);
  return out;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// One schedule on --instances instances: its operands packed and allocated anew for each, so
// that its time is not one draw of where they landed (which moves some programs' times by a
// third; BENCHMARKS.md §4).
struct Instances {
  std::vector<std::unique_ptr<Measured>> all;

  Instances(const std::string &schedule, const Csr &m, const Reference &ref, const Options &o) {
    for (int i = 0; i < o.instances; i++)
      all.push_back(std::make_unique<Measured>(prepare(schedule, m, ref, o, i ? all[0].get() : nullptr)));
  }
  void add_to(std::vector<Measured *> &set) const {
    for (const auto &x : all) set.push_back(x.get());
  }
  // The median over every instance's samples.
  double ms() const {
    std::vector<double> v;
    for (const auto &x : all) v.insert(v.end(), x->ms.begin(), x->ms.end());
    return median(v);
  }
  // The median over rounds of this schedule's mean time over its instances, over `base`'s
  // mean in the same round (both means over placements, the pairing against the machine's
  // drift).
  double ratio(const Instances &base) const {
    auto mean_of_round = [](const Instances &x, size_t r) {
      double sum = 0;
      for (const auto &i : x.all) sum += i->ms[r];
      return sum / static_cast<double>(x.all.size());
    };
    std::vector<double> v;
    for (size_t r = 0; r < all[0]->ms.size() && r < base.all[0]->ms.size(); r++) {
      double b = mean_of_round(base, r);
      v.push_back(b > 0 ? mean_of_round(*this, r) / b : 0);
    }
    return median(v);
  }
  void clear() {
    for (auto &x : all) x->ms.clear();
  }
};

// A timed sample runs a kernel this long at least, back to back (a kernel of tens of
// microseconds is timed over several runs, as an iterative solver calls it).
constexpr double MIN_SAMPLE_MS = 2.0;

// Warm-up (which sets each kernel's batch), then interleaved rounds until --repeats or
// --max-seconds (at least 3 rounds). A sample's time is per run.
void time_interleaved(std::vector<Measured *> &set, const Options &o) {
  using clock = std::chrono::steady_clock;
  auto timed = [](Measured *m) {
    auto t0 = clock::now();
    for (int b = 0; b < m->batch; b++) m->kernel.compute();
    return std::chrono::duration<double, std::milli>(clock::now() - t0).count() / m->batch;
  };
  for (auto *m : set) {
    double t = timed(m);
    m->batch = t > 0 ? std::max(1, std::min(10000, static_cast<int>(std::ceil(MIN_SAMPLE_MS / t)))) : 1;
  }
  for (int w = 0; w < o.warmup; w++)
    for (auto *m : set) timed(m);
  auto start = clock::now();
  for (int r = 0; r < o.repeats; r++) {
    for (auto *m : set) m->ms.push_back(timed(m));
    double elapsed = std::chrono::duration<double>(clock::now() - start).count();
    if (r >= 2 && elapsed > o.max_seconds * static_cast<double>(set.size())) break;
  }
}

int serve(const Csr &m, const Reference &ref, const Options &o) {
  std::unique_ptr<Instances> csr;
  if (o.baseline) csr = std::make_unique<Instances>("csr", m, ref, o);
  std::cout << "ready" << std::endl;
  std::string line;
  while (std::getline(std::cin, line)) {
    try {
      Instances cand(line, m, ref, o);
      std::vector<Measured *> set;
      cand.add_to(set);
      if (csr) csr->clear(), csr->add_to(set);
      time_interleaved(set, o);
      std::cout << "ok " << cand.ms();
      if (csr) std::cout << " " << csr->ms() << " " << cand.ratio(*csr);
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

// OpenMP reads its environment when it loads, so binding is set by re-running this program.
void bind_threads_to_cores(char **argv) {
  if (std::getenv("OMP_PROC_BIND") || std::getenv("DASHRANK_TACO_NO_BIND")) return;
  setenv("OMP_PROC_BIND", "true", 1);
  setenv("OMP_PLACES", "cores", 1);
  execv("/proc/self/exe", argv);
}

int main(int argc, char **argv) {
  bind_threads_to_cores(argv);
  Options o = parse_args(argc, argv);
  try {
    Csr m = read_matrix(o.matrix);
    Reference ref = reference(m, o.kernel, o.dense);
    if (o.serve) return serve(m, ref, o);
    std::vector<std::unique_ptr<Instances>> owned;
    for (const auto &s : o.schedules) owned.push_back(std::make_unique<Instances>(s, m, ref, o));
    if (o.baseline) owned.push_back(std::make_unique<Instances>("csr", m, ref, o));
    std::vector<Measured *> set;
    for (auto &p : owned) p->add_to(set);
    time_interleaved(set, o);
    for (size_t i = 0; i < o.schedules.size(); i++) std::printf("%.6f\n", owned[i]->ms());
    if (o.baseline) std::fprintf(stderr, "baseline csr: %.6f ms\n", owned.back()->ms());
    return 0;
  } catch (const std::exception &e) {
    std::cerr << "error: " << e.what() << std::endl;
    return 1;
  }
}
