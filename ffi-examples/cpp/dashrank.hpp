// Header-only C++17 RAII wrapper over the dashrank C API (include/dashrank.h).
//
//   dashrank::Model model("models/waco-spmm");            // throws dashrank::Error
//   auto matrix = model.embed_file("m.csr");
//   auto cands  = model.prepare(model.head_name(0), lines);
//   for (auto [index, score] : model.top_k(matrix, cands, 10)) ...
//
// Model copies share one reference-counted handle (retain/release); Matrix and Candidates
// are move-only. Every failing call throws dashrank::Error carrying the status and the
// detailed message of the failure. All objects may be used from many threads at once.
#pragma once

#include <dashrank.h>

#include <cstdint>
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

  const dashrank_model *get() const noexcept { return p_; }

 private:
  dashrank_model *p_ = nullptr;
};

}  // namespace dashrank
