// Shared by dashrank-taco-measure and the C++ snippet check (scripts/taco-check.py): the
// matrix reader, the operands' values, and the CSR reference a result is checked against.
#pragma once

#include <dashrank.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

namespace dashrank_taco_support {

struct Csr {
  size_t rows = 0, cols = 0;
  std::vector<int32_t> row_ptr, col_idx;
  std::vector<float> values;
};

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

Reference reference(const Csr &m, uint32_t kernel, size_t n) {
  Reference ref;
  auto b = [&](size_t r, size_t c) { return static_cast<double>(dense_value("B", r, c)); };
  if (kernel == DASHRANK_KERNEL_SDDMM) {
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
  ref.cols = kernel == DASHRANK_KERNEL_SPMV ? 1 : n;
  ref.value.assign(m.rows * ref.cols, 0), ref.scale.assign(m.rows * ref.cols, 0);
  for (size_t i = 0; i < m.rows; i++)
    for (int32_t q = m.row_ptr[i]; q < m.row_ptr[i + 1]; q++)
      for (size_t j = 0; j < ref.cols; j++) {
        double t = m.values[q] * b(static_cast<size_t>(m.col_idx[q]), j);
        ref.value[i * ref.cols + j] += t, ref.scale[i * ref.cols + j] += std::fabs(t);
      }
  return ref;
}

// Empty when the result's stored entries `(row, col, value)` (SpMV: col 0) match the
// reference, else what differs.
std::string check(const std::vector<std::tuple<size_t, size_t, float>> &entries, const Csr &m,
                  const Reference &ref, uint32_t kernel) {
  size_t checked = 0;
  for (const auto &[row, col, got] : entries) {
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

}  // namespace dashrank_taco_support
