#include "text/sentence_pooling.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace polyhal {

std::vector<float> pool_sentence(std::span<const float> hidden, std::span<const std::int32_t> mask,
                                 std::int64_t hidden_size, const SentencePooling& pooling) {
  const auto h = static_cast<std::size_t>(hidden_size);
  std::vector<double> sum(h, 0.0);
  std::vector<float> out(h, 0.0f);
  if (pooling.mode == "cls") {
    std::copy(hidden.begin(), hidden.begin() + static_cast<std::ptrdiff_t>(h), out.begin());
  } else {
    // Over the real tokens ([CLS] and [SEP] included), as sentence-transformers.
    std::size_t tokens = 0;
    std::vector<float> most(h, -std::numeric_limits<float>::infinity());
    for (std::size_t t = 0; t < mask.size(); ++t) {
      if (mask[t] == 0) continue;
      ++tokens;
      for (std::size_t i = 0; i < h; ++i) {
        const float x = hidden[t * h + i];
        sum[i] += x;
        most[i] = std::max(most[i], x);
      }
    }
    for (std::size_t i = 0; i < h; ++i)
      out[i] =
          pooling.mode == "max"
              ? most[i]
              : static_cast<float>(sum[i] / static_cast<double>(std::max<std::size_t>(tokens, 1)));
  }
  if (pooling.normalize) {
    double norm = 0.0;
    for (const float x : out) norm += static_cast<double>(x) * x;
    // torch.nn.functional.normalize's eps: a zero vector stays zero.
    const double scale = 1.0 / std::max(std::sqrt(norm), 1e-12);
    for (float& x : out) x = static_cast<float>(x * scale);
  }
  return out;
}

}  // namespace polyhal
