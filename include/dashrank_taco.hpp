// dashrank for TACO programs: the stock-TACO program of a schedule dashrank picked, built with
// TACO's C++ API (header-only C++17; needs TACO's headers and libtaco, and libdashrank).
//
//   dashrank::Model model("models/waco-spmm");
//   auto matrix = model.embed_file("m.csr");
//   auto sc     = model.prepare_space(dashrank::Space::from_name("taco-spmm"), matrix);
//   size_t pick = model.top_k(matrix, sc, 1)[0].index;
//   auto program = dashrank::taco::Program::from_candidate(sc, pick);   // or ::csr(...)
//   auto packed  = dashrank::taco::Packed(program, rows, cols, row_ptr, col_idx, values);
//   auto kernel  = dashrank::taco::build(program, packed, fill);  // tensors, IndexStmt, Kernel
//   kernel.compute();                                             // C = A * B, run by TACO
//
// `build` declares TACO tensors with the program's formats and dimensions (the sparse matrix
// from the repacked arrays, the dense operands as row-major arrays padded to the split
// extents), writes the index expression over the program's variables, applies its scheduling
// commands to the concrete statement (`bound`, `reorder`, `assemble`, `parallelize`), and
// compiles it through TACO's code generator into a `taco::Kernel`. `Kernel::compute` sets
// TACO's threads and dynamic chunk (`taco_set_num_threads`, `taco_set_parallel_schedule`)
// and runs the compute function; it may be called repeatedly (timing).
#pragma once

#include <dashrank.hpp>

#include <taco.h>
#include <taco/codegen/module.h>
#include <taco/index_notation/kernel.h>
#include <taco/index_notation/transformations.h>
#include <taco/lower/lower.h>

#include <dlfcn.h>
#include <omp.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

namespace dashrank {
namespace taco {

/// The program of one schedule for one matrix shape (move-only).
class Program {
 public:
  /// A SuperSchedule line of `kernel` (DASHRANK_KERNEL_*) for an nrows x ncols matrix.
  static Program from_line(uint32_t kernel, const std::string &line, size_t nrows, size_t ncols,
                           const dashrank_taco_options *options = nullptr) {
    dashrank_taco_program *p = nullptr;
    dashrank_taco_options o = openmp_threads(options);
    detail::check(dashrank_taco_program_from_line(kernel, line.c_str(), nrows, ncols, &o, &p));
    return Program(p);
  }
  /// The program of a `taco` command line dashrank wrote.
  static Program parse(const std::string &command_line) {
    dashrank_taco_program *p = nullptr;
    detail::check(dashrank_taco_program_parse(command_line.c_str(), &p));
    return Program(p);
  }
  /// TACO's own CSR program (the toolchain default).
  static Program csr(uint32_t kernel, size_t nrows, size_t ncols,
                     const dashrank_taco_options *options = nullptr) {
    dashrank_taco_program *p = nullptr;
    dashrank_taco_options o = openmp_threads(options);
    detail::check(dashrank_taco_program_csr(kernel, nrows, ncols, &o, &p));
    return Program(p);
  }
  /// Candidate `index` of a TACO space prepared for a matrix (its default: TACO's CSR).
  static Program from_candidate(const SpaceCandidates &candidates, size_t index,
                                const dashrank_taco_options *options = nullptr) {
    dashrank_taco_program *p = nullptr;
    dashrank_taco_options o = openmp_threads(options);
    detail::check(dashrank_taco_program_from_candidate(candidates.get(), index, &o, &p));
    return Program(p);
  }
  /// The stock `taco` command line.
  std::string command_line() const {
    return detail::read_string([&](char *b, size_t l, size_t *n) {
      return dashrank_taco_program_command_line(h_.p, b, l, n);
    });
  }
  /// The program in TACO's C++ API.
  std::string cpp() const {
    return detail::read_string(
        [&](char *b, size_t l, size_t *n) { return dashrank_taco_program_cpp(h_.p, b, l, n); });
  }
  dashrank_taco_program_info info() const {
    dashrank_taco_program_info out{};
    detail::check(dashrank_taco_program_summary(h_.p, &out));
    return out;
  }
  dashrank_taco_tensor_info tensor(size_t i) const {
    dashrank_taco_tensor_info out{};
    detail::check(dashrank_taco_program_tensor(h_.p, i, &out));
    return out;
  }
  dashrank_taco_command_info command(size_t i) const {
    dashrank_taco_command_info out{};
    detail::check(dashrank_taco_program_command(h_.p, i, &out));
    return out;
  }
  const dashrank_taco_program *get() const noexcept { return h_.p; }

 private:
  explicit Program(dashrank_taco_program *p) : h_(p) {}
  detail::Owned<dashrank_taco_program, dashrank_taco_program_free> h_;
  /// `options` (or the defaults) with `threads` 0, "every core", counted as OpenMP counts
  /// them: where OpenMP binds threads (OMP_PROC_BIND), the calling thread is pinned to one
  /// core, and the library, which counts the cores the caller may run on, would count one.
  static dashrank_taco_options openmp_threads(const dashrank_taco_options *options) {
    dashrank_taco_options o;
    if (options)
      o = *options;
    else
      detail::check(dashrank_taco_options_init(&o));
    if (o.threads == 0) o.threads = static_cast<uint32_t>(omp_get_num_procs());
    return o;
  }
};

/// A CSR matrix repacked for a program (move-only): throws dashrank::Error with
/// DASHRANK_STATUS_LAYOUT_TOO_LARGE when the layout exceeds its limit.
class Packed {
 public:
  /// `values` in CSR order, or nullptr for ones.
  Packed(const Program &program, size_t nrows, size_t ncols, const int32_t *row_ptr,
         const int32_t *col_idx, const float *values,
         const dashrank_taco_options *options = nullptr) {
    size_t nnz = static_cast<size_t>(row_ptr[nrows]);
    detail::check(dashrank_taco_pack_csr_i32(program.get(), nrows, ncols, row_ptr, col_idx,
                                             values, nnz, options, &h_.p));
  }
  size_t levels() const {
    size_t n = 0;
    detail::check(dashrank_taco_packed_levels(h_.p, &n));
    return n;
  }
  dashrank_taco_level level(size_t i) const {
    dashrank_taco_level out{};
    detail::check(dashrank_taco_packed_level(h_.p, i, &out));
    return out;
  }
  std::pair<const float *, size_t> values() const {
    const float *v = nullptr;
    size_t n = 0;
    detail::check(dashrank_taco_packed_values(h_.p, &v, &n));
    return {v, n};
  }

 private:
  detail::Owned<dashrank_taco_packed, dashrank_taco_packed_free> h_;
};

/// Values of a dense operand: `fill(tensor, row, col)` for the operand's first and second axis
/// coordinates (SpMV's vector: col 0). Rows and columns run over the padded extents (a split's
/// outer x inner extent); return 0 past the real matrix.
using DenseFill = std::function<float(const std::string &tensor, size_t row, size_t col)>;

namespace detail {
inline ::taco::Format format_of(const dashrank_taco_tensor_info &t) {
  std::vector<::taco::ModeFormatPack> levels;
  for (size_t l = 0; l < t.order; l++)
    levels.push_back(t.formats[l] == DASHRANK_TACO_COMPRESSED ? ::taco::Sparse : ::taco::Dense);
  return ::taco::Format(levels);
}

inline std::vector<int> dims_of(const dashrank_taco_tensor_info &t) {
  return std::vector<int>(t.dims, t.dims + t.order);
}

/// Extent of each axis of a dense tensor (outer x inner when split), in mode order.
inline std::vector<std::pair<char, size_t>> axis_extents(const dashrank_taco_tensor_info &t) {
  std::vector<std::pair<char, size_t>> axes;
  for (size_t l = 0; l < t.order; l++) {
    char axis = t.vars[l][0];
    if (!axes.empty() && axes.back().first == axis)
      axes.back().second *= t.dims[l];
    else
      axes.push_back({axis, t.dims[l]});
  }
  return axes;
}

inline ::taco::TensorBase sparse_tensor(const dashrank_taco_tensor_info &t, const Packed &packed) {
  ::taco::Format format = format_of(t);
  ::taco::TensorBase tensor(t.name, ::taco::Float32, dims_of(t), format);
  std::vector<::taco::ModeIndex> modes;
  for (size_t l = 0; l < t.order; l++) {
    dashrank_taco_level level = packed.level(l);
    if (level.format == DASHRANK_TACO_DENSE) {
      modes.push_back(::taco::ModeIndex({::taco::makeArray({static_cast<int>(level.dimension)})}));
    } else {
      std::vector<int> pos(level.pos, level.pos + level.pos_len);
      std::vector<int> crd(level.crd, level.crd + level.crd_len);
      modes.push_back(::taco::ModeIndex({::taco::makeArray(pos), ::taco::makeArray(crd)}));
    }
  }
  auto values = packed.values();
  ::taco::TensorStorage storage = tensor.getStorage();
  storage.setIndex(::taco::Index(format, modes));
  storage.setValues(::taco::makeArray(std::vector<float>(values.first, values.first + values.second)));
  tensor.setStorage(storage);
  return tensor;
}

inline ::taco::TensorBase dense_tensor(const dashrank_taco_tensor_info &t, const DenseFill &fill,
                                       bool result) {
  ::taco::Format format = format_of(t);
  ::taco::TensorBase tensor(t.name, ::taco::Float32, dims_of(t), format);
  if (result) return tensor;  // the kernel's assemble allocates it
  auto axes = axis_extents(t);
  size_t rows = axes[0].second, cols = axes.size() > 1 ? axes[1].second : 1;
  std::vector<float> values(rows * cols);
  for (size_t r = 0; r < rows; r++)
    for (size_t c = 0; c < cols; c++) values[r * cols + c] = fill(t.name, r, axes.size() > 1 ? c : 0);
  std::vector<::taco::ModeIndex> modes;
  for (size_t l = 0; l < t.order; l++)
    modes.push_back(::taco::ModeIndex({::taco::makeArray({static_cast<int>(t.dims[l])})}));
  ::taco::TensorStorage storage = tensor.getStorage();
  storage.setIndex(::taco::Index(format, modes));
  storage.setValues(::taco::makeArray(values));
  tensor.setStorage(storage);
  return tensor;
}

inline ::taco::IndexStmt apply(::taco::IndexStmt stmt, const dashrank_taco_command_info &c,
                               std::map<std::string, ::taco::IndexVar> &vars,
                               const std::map<std::string, ::taco::TensorBase> &tensors) {
  auto var = [&](const char *name) {
    auto it = vars.find(name);
    if (it == vars.end()) it = vars.emplace(name, ::taco::IndexVar(name)).first;
    return it->second;
  };
  switch (c.kind) {
    case DASHRANK_TACO_BOUND:
      return stmt.bound(var(c.args[0]), var(c.args[1]), std::stoull(c.args[2]),
                        ::taco::BoundType::MaxExact);
    case DASHRANK_TACO_REORDER: {
      std::vector<::taco::IndexVar> order;
      for (size_t i = 0; i < c.n_args; i++) order.push_back(var(c.args[i]));
      return stmt.reorder(order);
    }
    case DASHRANK_TACO_PARALLELIZE: {
      std::string races = c.args[2];
      auto strategy = races == "Atomics" ? ::taco::OutputRaceStrategy::Atomics
                                         : ::taco::OutputRaceStrategy::NoRaces;
      return stmt.parallelize(var(c.args[0]), ::taco::ParallelUnit::CPUThread, strategy);
    }
    case DASHRANK_TACO_ASSEMBLE:
      return stmt.assemble(tensors.at(c.args[0]).getTensorVar(), ::taco::AssembleStrategy::Insert);
    default:
      throw Error(DASHRANK_STATUS_INVALID_ARGUMENT, "unknown TACO command kind");
  }
}
}  // namespace detail

/// A program built with TACO: its tensors, scheduled statement and compiled kernel.
struct Kernel {
  /// The result first, then the operands in expression order (A second).
  std::vector<::taco::TensorBase> tensors;
  /// The scheduled concrete index statement.
  ::taco::IndexStmt stmt;
  /// TACO's compiled kernel (compute and assemble functions).
  ::taco::Kernel compiled;
  int threads = 1;
  int chunk = 1;
  /// The result's index variables, by level.
  std::vector<std::string> result_vars;

  std::vector<::taco::TensorStorage> storages() const {
    std::vector<::taco::TensorStorage> s;
    for (const auto &t : tensors) s.push_back(t.getStorage());
    return s;
  }
  /// Compiles the statement with TACO's code generator (what `build` does).
  void compile() {
    ::taco::IndexStmt lowered = ::taco::scalarPromote(stmt.concretize());
    auto module = std::make_shared<::taco::ir::Module>();
    module->addFunction(::taco::lower(lowered, "compute", false, true));
    module->addFunction(::taco::lower(lowered, "assemble", true, false));
    module->addFunction(::taco::lower(lowered, "evaluate", true, true));
    module->compile();
    if (const char *dir = std::getenv("DASHRANK_TACO_SOURCE_DIR")) {
      // The C code TACO generated, for reading: one file per compiled program.
      static int serial = 0;
      std::ofstream(std::string(dir) + "/kernel-" + std::to_string(serial++) + ".c") << module->getSource();
    }
    compiled = ::taco::Kernel(lowered, module, module->getFuncPtr("evaluate"),
                              module->getFuncPtr("assemble"), module->getFuncPtr("compute"));
  }
  /// Uses the C code the stock `taco` CLI wrote for the program (`-write-source=FILE`)
  /// instead, compiled as TACO compiles (cc, TACO_CFLAGS or `-O3 -ffast-math -std=c99`,
  /// OpenMP) and called directly.
  void compile_source(const std::string &c_file) {
    std::string so = c_file + ".so";
    const char *flags = std::getenv("TACO_CFLAGS");
    std::string cmd = std::string("cc ") + (flags ? flags : "-O3 -ffast-math -std=c99") +
                      " -fopenmp -shared -fPIC " + c_file + " -o " + so + " -lm";
    if (std::system(cmd.c_str()) != 0) throw Error(DASHRANK_STATUS_INVALID_ARGUMENT, "compiling failed: " + cmd);
    void *lib = dlopen(so.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!lib) throw Error(DASHRANK_STATUS_INVALID_ARGUMENT, std::string("dlopen: ") + dlerror());
    source_compute = dlsym(lib, "compute");
    source_assemble = dlsym(lib, "assemble");
    if (!source_compute || !source_assemble) throw Error(DASHRANK_STATUS_INVALID_ARGUMENT, c_file + " has no compute/assemble");
    // Converted once: a conversion rewrites the struct from the storage, which never sees
    // what the directly called functions allocate.
    for (const auto &x : tensors) source_args.push_back(static_cast<taco_tensor_t *>(x.getStorage()));
  }
  /// Allocates and assembles the result; call once before compute().
  void assemble() {
    set_runtime();
    bool ok = source_assemble ? call(source_assemble) == 0 : compiled.assemble(storages());
    if (!ok) throw Error(DASHRANK_STATUS_INVALID_ARGUMENT, "TACO assemble failed");
  }
  /// Computes the result's values.
  void compute() {
    set_runtime();
    bool ok = source_compute ? call(source_compute) == 0 : compiled.compute(storages());
    if (!ok) throw Error(DASHRANK_STATUS_INVALID_ARGUMENT, "TACO compute failed");
  }
  /// The result's stored entries as (row, col, value) in the original matrix coordinates
  /// (SpMV: col 0), walking its levels.
  std::vector<std::tuple<size_t, size_t, float>> result_entries() const;

 private:
  void *source_compute = nullptr;
  void *source_assemble = nullptr;
  std::vector<taco_tensor_t *> source_args;
  void set_runtime() const {
    ::taco::taco_set_num_threads(threads);
    ::taco::taco_set_parallel_schedule(::taco::ParallelSchedule::Dynamic, chunk);
    // A function called directly (compile_source) does not pass TACO's shim, which sets these.
    omp_set_num_threads(threads);
    omp_set_schedule(omp_sched_dynamic, chunk);
  }
  int call(void *fn) const {
    const std::vector<taco_tensor_t *> &t = source_args;
    if (t.size() == 3)
      return reinterpret_cast<int (*)(taco_tensor_t *, taco_tensor_t *, taco_tensor_t *)>(fn)(t[0], t[1], t[2]);
    return reinterpret_cast<int (*)(taco_tensor_t *, taco_tensor_t *, taco_tensor_t *, taco_tensor_t *)>(fn)(
        t[0], t[1], t[2], t[3]);
  }
};

/// Declares a program's tensors and writes its scheduled statement, without compiling it.
inline Kernel declare(const Program &program, const Packed &packed, const DenseFill &fill) {
  dashrank_taco_program_info info = program.info();
  Kernel k;
  k.threads = static_cast<int>(info.threads);
  k.chunk = static_cast<int>(info.chunk);
  std::map<std::string, ::taco::IndexVar> vars;
  std::map<std::string, ::taco::TensorBase> by_name;
  std::vector<dashrank_taco_tensor_info> infos;
  for (size_t i = 0; i < info.tensors; i++) {
    infos.push_back(program.tensor(i));
    const auto &t = infos.back();
    bool sparse_operand = i == 1;
    bool sparse_result = i == 0 && info.kernel == DASHRANK_KERNEL_SDDMM;
    ::taco::TensorBase tensor = sparse_operand ? detail::sparse_tensor(t, packed)
                                : sparse_result ? ::taco::TensorBase(t.name, ::taco::Float32, detail::dims_of(t), detail::format_of(t))
                                                : detail::dense_tensor(t, fill, i == 0);
    k.tensors.push_back(tensor);
    by_name.emplace(t.name, tensor);
    for (size_t l = 0; l < t.order; l++)
      if (!vars.count(t.vars[l])) vars.emplace(t.vars[l], ::taco::IndexVar(t.vars[l]));
  }
  auto indices = [&](size_t i) {
    std::vector<::taco::IndexVar> idx;
    for (size_t l = 0; l < infos[i].order; l++) idx.push_back(vars.at(infos[i].vars[l]));
    return idx;
  };
  // Accesses of the tensors' variables, not of the tensors: an assignment made through
  // `tensor(i, j) = ...` is kept by the result tensor and holds the result itself, a cycle
  // that would keep every tensor of every program alive.
  auto access = [&](size_t i) { return ::taco::Access(k.tensors[i].getTensorVar(), indices(i)); };
  ::taco::IndexExpr rhs = access(1);
  for (size_t i = 2; i < k.tensors.size(); i++) rhs = rhs * access(i);
  ::taco::Assignment assignment(k.tensors[0].getTensorVar(), indices(0), rhs);
  for (const auto &v : indices(0)) k.result_vars.push_back(v.getName());
  // TACO's own loop order first (`reorderLoopsTopologically`, as the `taco` CLI and
  // `Tensor::compile()` do), then the program's commands.
  ::taco::IndexStmt stmt = ::taco::reorderLoopsTopologically(assignment.concretize());
  for (size_t c = 0; c < info.commands; c++) stmt = detail::apply(stmt, program.command(c), vars, by_name);
  k.stmt = stmt;
  return k;
}

/// Builds and compiles a program with TACO (see the file comment). TACO's errors (a schedule
/// its compiler refuses, generated code that does not compile) surface as taco::TacoException.
inline Kernel build(const Program &program, const Packed &packed, const DenseFill &fill) {
  Kernel k = declare(program, packed, fill);
  k.compile();
  return k;
}

inline std::vector<std::tuple<size_t, size_t, float>> Kernel::result_entries() const {
  // The kernel writes the result's arrays into its taco_tensor_t: walk that.
  const taco_tensor_t *t =
      source_args.empty() ? static_cast<taco_tensor_t *>(tensors[0].getStorage()) : source_args[0];
  const float *vals = reinterpret_cast<const float *>(t->vals);
  const std::vector<std::string> &names = result_vars;
  std::vector<size_t> dims(t->dimensions, t->dimensions + t->order);
  std::vector<std::tuple<size_t, size_t, float>> out;
  std::vector<size_t> coords(dims.size());
  // Axis coordinate of the level coordinates: an outer part times the inner extent, plus it.
  auto axis = [&](char a) {
    size_t x = 0;
    for (size_t l = 0; l < names.size(); l++) {
      if (names[l][0] != a) continue;
      bool outer = names[l].size() > 1 && names[l][1] == '1';
      size_t inner = 1;
      if (outer)
        for (size_t m = 0; m < names.size(); m++)
          if (names[m][0] == a && names[m].size() > 1 && names[m][1] == '0') inner = dims[m];
      x = outer ? coords[l] * inner : x + coords[l];
    }
    return x;
  };
  bool matrix = false;
  for (const auto &n : names) matrix = matrix || n[0] == 'j';
  std::function<void(size_t, size_t)> walk = [&](size_t level, size_t parent) {
    if (level == dims.size()) {
      out.emplace_back(axis('i'), matrix ? axis('j') : 0, vals[parent]);
      return;
    }
    if (t->mode_types[level] == taco_mode_dense) {
      for (size_t c = 0; c < dims[level]; c++) {
        coords[level] = c;
        walk(level + 1, parent * dims[level] + c);
      }
    } else {
      const int *pos = reinterpret_cast<const int *>(t->indices[level][0]);
      const int *crd = reinterpret_cast<const int *>(t->indices[level][1]);
      for (int q = pos[parent]; q < pos[parent + 1]; q++) {
        coords[level] = static_cast<size_t>(crd[q]);
        walk(level + 1, static_cast<size_t>(q));
      }
    }
  };
  walk(0, 0);
  return out;
}

}  // namespace taco
}  // namespace dashrank
