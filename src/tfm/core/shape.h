// A tensor shape: up to kMaxRank dimensions, stored inline (no heap allocation per op).
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "tfm/core/error.h"

namespace tfm::internal {

class Shape {
 public:
  static constexpr int kMaxRank = 6;

  Shape() = default;
  Shape(std::initializer_list<int64_t> dims) { assign(dims.begin(), dims.end()); }
  explicit Shape(const std::vector<int64_t>& dims) { assign(dims.begin(), dims.end()); }

  int rank() const { return rank_; }
  // Negative indices count from the end, as in Python.
  int64_t operator[](int i) const { return dims_[normalize(i)]; }
  int64_t& operator[](int i) { return dims_[normalize(i)]; }
  int64_t numel() const {
    int64_t n = 1;
    for (int i = 0; i < rank_; ++i) n *= dims_[i];
    return n;
  }
  const int64_t* begin() const { return dims_.data(); }
  const int64_t* end() const { return dims_.data() + rank_; }
  std::vector<int64_t> to_vector() const { return {begin(), end()}; }

  bool operator==(const Shape& other) const {
    if (rank_ != other.rank_) return false;
    for (int i = 0; i < rank_; ++i)
      if (dims_[i] != other.dims_[i]) return false;
    return true;
  }
  bool operator!=(const Shape& other) const { return !(*this == other); }

  std::string str() const {
    std::string s = "[";
    for (int i = 0; i < rank_; ++i) s += (i ? ", " : "") + std::to_string(dims_[i]);
    return s + "]";
  }

 private:
  template <typename It>
  void assign(It first, It last) {
    rank_ = 0;
    for (It it = first; it != last; ++it) {
      TFM_CHECK(rank_ < kMaxRank, "tensor rank above {} is not supported", kMaxRank);
      TFM_CHECK(*it >= 0, "negative dimension {} in a shape", *it);
      dims_[rank_++] = *it;
    }
  }
  int normalize(int i) const {
    int j = i < 0 ? i + rank_ : i;
    TFM_CHECK(j >= 0 && j < rank_, "dimension {} out of range for rank {}", i, rank_);
    return j;
  }

  std::array<int64_t, kMaxRank> dims_{};
  int rank_ = 0;
};

}  // namespace tfm::internal
