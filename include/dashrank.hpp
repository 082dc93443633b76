// Header-only C++17 RAII wrapper over the dashrank C API (include/dashrank.h).
//
//   dashrank::Model model("models/waco-spmm");            // throws dashrank::Error
//   auto matrix = model.embed_file("m.csr");
//   auto cands  = model.prepare(model.head_name(0), lines);
//   for (auto [index, score] : model.top_k(matrix, cands, 10)) ...
//
//   // A toolchain's whole space, the default always reported, tuned with a lambda:
//   auto space = dashrank::Space::from_name("taco-spmm");
//   auto sc    = model.prepare_space(space, matrix);          // head chosen by the library
//   for (const dashrank_ranked &e : model.top_k(matrix, sc, 5)) sc.render(e.index, "m") ...
//   auto tuned = model.tune(matrix, sc, 5, [](const dashrank_measure_request &r)
//                           -> std::optional<double> { return time_it(r.toolchain); });
//
// Model copies share one reference-counted handle (retain/release); Matrix, Candidates,
// Space and SpaceCandidates are move-only. Every failing call throws dashrank::Error carrying
// the status and the detailed message of the failure. All objects may be used from many
// threads at once.
#pragma once

#include <dashrank.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <exception>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace dashrank {

class Error : public std::runtime_error {
 public:
  Error(dashrank_status status, const std::string &what)
      : std::runtime_error(what), status_(status) {}
  dashrank_status status() const noexcept { return status_; }

 private:
  dashrank_status status_;
};

namespace detail {
inline std::string last_error() {
  size_t needed = 0;
  dashrank_last_error_message(nullptr, 0, &needed);
  std::string s(needed, '\0');
  dashrank_last_error_message(s.data(), s.size(), nullptr);
  s.resize(needed ? needed - 1 : 0);
  return s;
}
inline void check(dashrank_status status) {
  if (status != DASHRANK_STATUS_OK) throw Error(status, last_error());
}
// Reads a string through the size-query protocol.
template <class F>
std::string read_string(F &&f) {
  size_t needed = 0;
  dashrank_status st = f(nullptr, 0, &needed);
  if (st != DASHRANK_STATUS_INSUFFICIENT_SIZE) check(st);
  std::string s(needed, '\0');
  check(f(s.data(), s.size(), &needed));
  s.resize(needed - 1);
  return s;
}
template <class T, dashrank_status (*Free)(T **)>
struct Owned {
  T *p = nullptr;
  Owned() = default;
  explicit Owned(T *q) : p(q) {}
  Owned(Owned &&o) noexcept : p(std::exchange(o.p, nullptr)) {}
  Owned &operator=(Owned &&o) noexcept {
    if (this != &o) {
      Free(&p);
      p = std::exchange(o.p, nullptr);
    }
    return *this;
  }
  Owned(const Owned &) = delete;
  Owned &operator=(const Owned &) = delete;
  ~Owned() { Free(&p); }
};
}  // namespace detail

inline std::string version() { return dashrank_version(); }

inline std::string status_message(dashrank_status status) {
  return detail::read_string([&](char *b, size_t l, size_t *n) {
    return dashrank_status_message(static_cast<uint32_t>(status), b, l, n);
  });
}

/// The embedding of one matrix (move-only).
class Matrix {
 public:
  /// {rows, columns, stored entries}.
  std::array<size_t, 3> shape() const {
    std::array<size_t, 3> s{};
    detail::check(dashrank_matrix_shape(h_.p, &s[0], &s[1], &s[2]));
    return s;
  }
  const dashrank_matrix *get() const noexcept { return h_.p; }

 private:
  friend class Model;
  explicit Matrix(dashrank_matrix *p) : h_(p) {}
  detail::Owned<dashrank_matrix, dashrank_matrix_free> h_;
};

/// Candidate schedules prepared for one head (move-only).
class Candidates {
 public:
  size_t size() const {
    size_t n = 0;
    detail::check(dashrank_candidates_len(h_.p, &n, nullptr));
    return n;
  }
  size_t valid_count() const {
    size_t n = 0, v = 0;
    detail::check(dashrank_candidates_len(h_.p, &n, &v));
    return v;
  }
  /// DASHRANK_STATUS_OK for a valid candidate, else why it was rejected.
  dashrank_status status(size_t i) const {
    dashrank_status s = DASHRANK_STATUS_OK;
    detail::check(dashrank_candidates_status(h_.p, i, &s));
    return s;
  }
  std::string message(size_t i) const {
    return detail::read_string(
        [&](char *b, size_t l, size_t *n) { return dashrank_candidates_message(h_.p, i, b, l, n); });
  }
  const dashrank_candidates *get() const noexcept { return h_.p; }

 private:
  friend class Model;
  explicit Candidates(dashrank_candidates *p) : h_(p) {}
  detail::Owned<dashrank_candidates, dashrank_candidates_free> h_;
};

struct Ranked {
  uint32_t index;
  float score;
};

/// A toolchain's schedule space (move-only): taco-spmm, taco-sddmm, taco-spmv, spade-spmm,
/// spade-sddmm, sparsetir-spmm, sparsetir-sddmm.
class Space {
 public:
  /// By DASHRANK_TARGET_* and DASHRANK_KERNEL_*; feat_size is SparseTIR's (0: 128).
  Space(uint32_t target, uint32_t kernel, uint32_t feat_size = 0) {
    detail::check(dashrank_space_new(target, kernel, feat_size, &h_.p));
  }
  static Space from_name(const std::string &name, uint32_t feat_size = 0) {
    dashrank_space *p = nullptr;
    detail::check(dashrank_space_from_name(name.c_str(), feat_size, &p));
    return Space(p);
  }
  /// WACO's TACO space with splits and chunks cut at the bounds (0 keeps WACO's).
  static Space taco(uint32_t kernel, uint32_t max_split, uint32_t max_chunk) {
    dashrank_space *p = nullptr;
    detail::check(dashrank_space_new_taco(kernel, max_split, max_chunk, &p));
    return Space(p);
  }
  std::string name() const {
    return detail::read_string(
        [&](char *b, size_t l, size_t *n) { return dashrank_space_name(h_.p, b, l, n); });
  }
  const dashrank_space *get() const noexcept { return h_.p; }

 private:
  explicit Space(dashrank_space *p) : h_(p) {}
  detail::Owned<dashrank_space, dashrank_space_free> h_;
};

/// A space enumerated for one matrix and prepared for one head (move-only).
class SpaceCandidates {
 public:
  size_t size() const {
    size_t n = 0;
    detail::check(dashrank_space_candidates_len(h_.p, &n, nullptr));
    return n;
  }
  size_t ranked_count() const {
    size_t n = 0, r = 0;
    detail::check(dashrank_space_candidates_len(h_.p, &n, &r));
    return r;
  }
  size_t default_index() const {
    size_t i = 0;
    detail::check(dashrank_space_candidates_default(h_.p, &i));
    return i;
  }
  dashrank_candidate_info info(size_t i) const {
    dashrank_candidate_info out{};
    detail::check(dashrank_space_candidates_info(h_.p, i, &out));
    return out;
  }
  /// The status in words ("valid", "duplicate of #N", ...).
  std::string message(size_t i) const {
    return detail::read_string([&](char *b, size_t l, size_t *n) {
      return dashrank_space_candidates_message(h_.p, i, b, l, n);
    });
  }
  /// The line the head's schema parses.
  std::string line(size_t i) const {
    return detail::read_string([&](char *b, size_t l, size_t *n) {
      return dashrank_space_candidates_line(h_.p, i, b, l, n);
    });
  }
  /// The candidate in its toolchain's form (TACO commands, SPADE CSV row, SparseTIR JSON).
  std::string render(size_t i, const std::string &matrix_name = "matrix") const {
    return detail::read_string([&](char *b, size_t l, size_t *n) {
      return dashrank_space_candidates_render(h_.p, i, matrix_name.c_str(), b, l, n);
    });
  }
  const dashrank_space_candidates *get() const noexcept { return h_.p; }

 private:
  friend class Model;
  explicit SpaceCandidates(dashrank_space_candidates *p) : h_(p) {}
  detail::Owned<dashrank_space_candidates, dashrank_space_candidates_free> h_;
};

/// What Model::tune returns.
struct Tuned {
  dashrank_tune_result result;
  std::vector<dashrank_measurement> measurements;
};

/// A measure function: the time in milliseconds, or nullopt when the candidate failed.
using Measure = std::function<std::optional<double>(const dashrank_measure_request &)>;

/// A loaded model. Copies share the handle (reference counted).
class Model {
 public:
  explicit Model(const std::string &dir, const dashrank_load_options *options = nullptr) {
    detail::check(dashrank_model_load(dir.c_str(), options, &p_));
  }
  Model(const Model &o) : p_(dashrank_model_retain(o.p_)) {}
  Model(Model &&o) noexcept : p_(std::exchange(o.p_, nullptr)) {}
  Model &operator=(Model o) noexcept {
    std::swap(p_, o.p_);
    return *this;
  }
  ~Model() { dashrank_model_release(&p_); }

  size_t head_count() const {
    size_t n = 0;
    detail::check(dashrank_model_head_count(p_, &n));
    return n;
  }
  std::string head_name(size_t i) const {
    return detail::read_string(
        [&](char *b, size_t l, size_t *n) { return dashrank_model_head_name(p_, i, b, l, n); });
  }
  std::string describe() const {
    return detail::read_string(
        [&](char *b, size_t l, size_t *n) { return dashrank_model_describe(p_, b, l, n); });
  }

  Matrix embed_csr(size_t nrows, size_t ncols, const std::vector<int32_t> &row_ptr,
                   const std::vector<int32_t> &col_idx) const {
    if (row_ptr.size() != nrows + 1)
      throw Error(DASHRANK_STATUS_INVALID_ARGUMENT, "row_ptr must have nrows + 1 entries");
    dashrank_matrix *m = nullptr;
    detail::check(dashrank_matrix_embed_csr_i32(p_, nrows, ncols, row_ptr.data(), col_idx.data(),
                                                col_idx.size(), &m));
    return Matrix(m);
  }
  Matrix embed_csr(size_t nrows, size_t ncols, const std::vector<int64_t> &row_ptr,
                   const std::vector<int64_t> &col_idx) const {
    if (row_ptr.size() != nrows + 1)
      throw Error(DASHRANK_STATUS_INVALID_ARGUMENT, "row_ptr must have nrows + 1 entries");
    dashrank_matrix *m = nullptr;
    detail::check(dashrank_matrix_embed_csr_i64(p_, nrows, ncols, row_ptr.data(), col_idx.data(),
                                                col_idx.size(), &m));
    return Matrix(m);
  }
  Matrix embed_file(const std::string &path) const {
    dashrank_matrix *m = nullptr;
    detail::check(dashrank_matrix_embed_file(p_, path.c_str(), &m));
    return Matrix(m);
  }

  Candidates prepare(const std::string &head, const std::vector<std::string> &lines) const {
    std::vector<const char *> ptrs;
    ptrs.reserve(lines.size());
    for (const auto &l : lines) ptrs.push_back(l.c_str());
    dashrank_candidates *c = nullptr;
    detail::check(dashrank_candidates_prepare(p_, head.c_str(), ptrs.data(), ptrs.size(), &c));
    return Candidates(c);
  }

  /// One score per candidate, in order; NaN for invalid candidates.
  std::vector<float> score(const Matrix &m, const Candidates &c) const {
    std::vector<float> s(c.size());
    detail::check(dashrank_score(p_, m.get(), c.get(), s.data(), s.size(), nullptr));
    return s;
  }

  /// The k best valid candidates, best first.
  std::vector<Ranked> top_k(const Matrix &m, const Candidates &c, size_t k) const {
    std::vector<uint32_t> idx(k);
    std::vector<float> sc(k);
    size_t w = 0;
    detail::check(dashrank_top_k(p_, m.get(), c.get(), k, idx.data(), sc.data(), k, &w));
    std::vector<Ranked> out(w);
    for (size_t i = 0; i < w; i++) out[i] = {idx[i], sc[i]};
    return out;
  }

  /// Enumerates `space` for `matrix` and prepares it for `head` ("" = the model's one head
  /// for the space's target and kernel).
  SpaceCandidates prepare_space(const Space &space, const Matrix &matrix,
                                const std::string &head = "") const {
    dashrank_space_candidates *c = nullptr;
    detail::check(dashrank_space_prepare(p_, head.empty() ? nullptr : head.c_str(), space.get(),
                                         matrix.get(), &c));
    return SpaceCandidates(c);
  }

  /// The k best candidates, best first, then the default if it is not among them.
  std::vector<dashrank_ranked> top_k(const Matrix &m, const SpaceCandidates &c, size_t k) const {
    std::vector<dashrank_ranked> out(std::min(k, c.ranked_count()) + 1);
    size_t n = 0;
    detail::check(dashrank_space_top_k(p_, m.get(), c.get(), k, out.data(), out.size(), &n));
    out.resize(n);
    return out;
  }

  /// Measures the top k and the default with `measure` (nullopt or an exception = a failed
  /// measurement; the first exception is rethrown after tuning) and keeps the fastest.
  Tuned tune(const Matrix &m, const SpaceCandidates &c, size_t k, const Measure &measure,
             const std::string &matrix_name = "matrix") const {
    struct Ctx {
      const Measure *f;
      std::exception_ptr error;
    } ctx{&measure, nullptr};
    auto trampoline = [](void *user, const dashrank_measure_request *r, double *ms) -> bool {
      auto *x = static_cast<Ctx *>(user);
      try {
        std::optional<double> t = (*x->f)(*r);
        if (!t) return false;
        *ms = *t;
        return true;
      } catch (...) {
        if (!x->error) x->error = std::current_exception();
        return false;
      }
    };
    Tuned out{};
    out.measurements.resize(std::min(k, c.ranked_count()) + 1);
    size_t n = 0;
    detail::check(dashrank_space_tune(p_, m.get(), c.get(), k, matrix_name.c_str(), trampoline,
                                      &ctx, &out.result, out.measurements.data(),
                                      out.measurements.size(), &n));
    if (ctx.error) std::rethrow_exception(ctx.error);
    out.measurements.resize(n);
    return out;
  }

  const dashrank_model *get() const noexcept { return p_; }

 private:
  dashrank_model *p_ = nullptr;
};

}  // namespace dashrank
