// The one exception type of tfm: every failure a caller can cause (a missing file, a bad option, a
// malformed model) is a tfm::Error whose what() is a single line naming the file (and line, where
// there is one) and the problem.
#pragma once

#include <stdexcept>
#include <string>

#include "tfm/export.h"

namespace tfm {

class TFM_API Error : public std::runtime_error {
 public:
  // Control characters in `message` are escaped ("\n", "\x1b") so that it stays one line.
  explicit Error(const std::string& message);
};

}  // namespace tfm
