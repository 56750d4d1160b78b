// SPFHP and NNLSHP (Krell et al., 2021), written from the paper's algorithm
// descriptions and reference code; checked against that reference in
// tests/packing_test.cpp with golden files from tests/golden/make_packing_golden.py.
#include "polyhal/app/packing.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <utility>

#include "polyhal/error.hpp"

namespace polyhal {
namespace {

/// Open packs by the room they have left; each entry (count, lengths).
using OpenPacks =
    std::map<std::int64_t, std::vector<std::pair<std::int64_t, std::vector<std::int64_t>>>>;

void check_histogram(const std::vector<std::int64_t>& histogram, std::int64_t max_len,
                     std::int64_t max_per_pack) {
  if (max_len < 1 || static_cast<std::int64_t>(histogram.size()) != max_len)
    throw ConfigError(fmt::format("packing: a histogram of {} lengths for max_len {}",
                                  histogram.size(), max_len));
  if (max_per_pack < 1)
    throw ConfigError(
        fmt::format("packing: max_sequences_per_pack must be at least 1, got {}", max_per_pack));
  for (const std::int64_t count : histogram)
    if (count < 0) throw ConfigError("packing: a negative count in the length histogram");
}

}  // namespace

std::vector<PackStrategy> spfhp(const std::vector<std::int64_t>& histogram, std::int64_t max_len,
                                std::int64_t max_per_pack) {
  check_histogram(histogram, max_len, max_per_pack);
  OpenPacks open, closed;
  const auto add_pack = [&](std::vector<std::int64_t> pack, std::int64_t count, std::int64_t room) {
    if (static_cast<std::int64_t>(pack.size()) == max_per_pack || room == 0) {
      closed[room].emplace_back(count, std::move(pack));
    } else {
      open[room].emplace_back(count, std::move(pack));
    }
  };
  // i: how far below max_len the length is (the reference's reversed histogram).
  for (std::int64_t i = 0; i < max_len; ++i) {
    std::int64_t to_bin = histogram[static_cast<std::size_t>(max_len - 1 - i)];
    const std::int64_t length = max_len - i;
    std::int64_t offset = i + 1;  // room beyond `length` of the pack tried: largest first
    while (to_bin > 0) {
      const auto it = open.find(length + offset);
      if (it != open.end()) {
        // The most recently opened pack with that much room takes them.
        auto [waiting, pack] = std::move(it->second.back());
        it->second.pop_back();
        std::vector<std::int64_t> grown = pack;
        grown.push_back(length);
        const std::int64_t count = std::min(waiting, to_bin);
        if (waiting > to_bin) {
          it->second.emplace_back(waiting - to_bin, std::move(pack));
          to_bin = 0;
        } else {
          to_bin -= waiting;
        }
        if (it->second.empty()) open.erase(it);
        add_pack(std::move(grown), count, offset);
      } else {
        --offset;
      }
      if (offset < 0) {  // fits nowhere: new packs
        add_pack({length}, to_bin, i);
        to_bin = 0;
      }
    }
  }
  std::vector<PackStrategy> strategies;
  for (auto* packs : {&closed, &open}) {
    for (auto& [room, entries] : *packs) {
      for (auto& [count, lengths] : entries) {
        std::reverse(lengths.begin(), lengths.end());  // shortest first, as the reference
        strategies.push_back({lengths, count});
      }
    }
  }
  return strategies;
}

namespace {

/// Every way to fill exactly `target` tokens with at most `depth` lengths
/// of at least `smallest`, in non-decreasing order (the reference's
/// get_packing_strategies).
void exact_fills(std::int64_t filled, std::int64_t smallest, std::int64_t target,
                 std::int64_t depth, std::vector<std::int64_t>& prefix,
                 std::vector<std::vector<std::int64_t>>& out) {
  const std::int64_t gap = target - filled;
  if (depth == 1) {
    if (gap >= smallest) {
      prefix.push_back(gap);
      out.push_back(prefix);
      prefix.pop_back();
    }
    return;
  }
  for (std::int64_t next = smallest; next <= gap; ++next) {
    prefix.push_back(next);
    if (next == gap) {
      out.push_back(prefix);
    } else {
      exact_fills(filled + next, next, target, depth - 1, prefix, out);
    }
    prefix.pop_back();
  }
}

/// The most strategies nnlshp solves for: its least squares costs about the
/// square of their number (max_len 512 with 3 per pack, the seeds' setting,
/// has 22,102).
constexpr std::int64_t kMaxNnlshpStrategies = 30000;

/// How many ways exact_fills finds: partitions of `target` into at most
/// `depth` (1 to 3) parts, counted without listing them.
std::int64_t fill_count(std::int64_t target, std::int64_t depth) {
  if (depth <= 1) return 1;
  if (depth == 2) return target / 2 + 1;
  return ((target + 3) * (target + 3) + 6) / 12;  // round((n + 3)^2 / 12)
}

/// exact_fills over the lengths in `present` (ascending) only; ConfigError
/// once more than kMaxNnlshpStrategies would be listed.
void present_fills(std::size_t from, std::int64_t filled, std::int64_t target, std::int64_t depth,
                   const std::vector<std::int64_t>& present, std::vector<std::int64_t>& prefix,
                   std::vector<std::vector<std::int64_t>>& out) {
  for (std::size_t i = from; i < present.size() && filled + present[i] <= target; ++i) {
    prefix.push_back(present[i]);
    if (filled + present[i] == target) {
      out.push_back(prefix);
      if (static_cast<std::int64_t>(out.size()) > kMaxNnlshpStrategies)
        throw ConfigError(fmt::format(
            "packing: nnlshp at max_len {} would solve for more than {} strategies (its work "
            "grows as their square); use spfhp, or fewer sequences per pack",
            target, kMaxNnlshpStrategies));
    } else if (depth > 1) {
      present_fills(i, filled + present[i], target, depth - 1, present, prefix, out);
    }
    prefix.pop_back();
  }
}

/// min ||A x - b|| subject to x >= 0 by Lawson and Hanson's active-set
/// method, for a sparse A given by columns (row index, value). The passive
/// set's least squares are solved through its normal equations (Cholesky);
/// the columns here have at most 3 nonzeros, so the Gram entries are cheap.
class Nnls {
 public:
  using Column = std::vector<std::pair<std::int64_t, double>>;

  Nnls(std::vector<Column> columns, std::vector<double> b)
      : columns_(std::move(columns)), b_(std::move(b)) {}

  std::vector<double> solve() {
    const std::size_t n = columns_.size();
    std::vector<double> x(n, 0.0);
    std::vector<bool> passive(n, false);
    const double tolerance = 1e-10;
    for (std::size_t iteration = 0; iteration < 3 * n + 100; ++iteration) {
      const auto w = gradient(x);
      std::size_t best = n;
      for (std::size_t j = 0; j < n; ++j)
        if (!passive[j] && w[j] > tolerance && (best == n || w[j] > w[best])) best = j;
      if (best == n) break;  // Kuhn-Tucker conditions hold
      passive[best] = true;
      for (;;) {
        std::vector<std::size_t> set;
        for (std::size_t j = 0; j < n; ++j)
          if (passive[j]) set.push_back(j);
        const auto z = least_squares(set);
        bool feasible = true;
        for (const double v : z) feasible = feasible && v > 0;
        if (feasible) {
          std::fill(x.begin(), x.end(), 0.0);
          for (std::size_t k = 0; k < set.size(); ++k) x[set[k]] = z[k];
          break;
        }
        // Step from x towards z as far as every variable stays >= 0.
        double alpha = 1.0;
        for (std::size_t k = 0; k < set.size(); ++k) {
          if (z[k] <= 0) alpha = std::min(alpha, x[set[k]] / (x[set[k]] - z[k]));
        }
        for (std::size_t k = 0; k < set.size(); ++k) {
          double& v = x[set[k]];
          v += alpha * (z[k] - v);
          if (v <= tolerance) {
            v = 0;
            passive[set[k]] = false;
          }
        }
      }
    }
    return x;
  }

 private:
  std::vector<double> gradient(const std::vector<double>& x) const {  // A^T (b - A x)
    std::vector<double> residual = b_;
    for (std::size_t j = 0; j < columns_.size(); ++j)
      if (x[j] != 0)
        for (const auto& [row, value] : columns_[j])
          residual[static_cast<std::size_t>(row)] -= value * x[j];
    std::vector<double> w(columns_.size());
    for (std::size_t j = 0; j < columns_.size(); ++j) {
      double sum = 0;
      for (const auto& [row, value] : columns_[j])
        sum += value * residual[static_cast<std::size_t>(row)];
      w[j] = sum;
    }
    return w;
  }

  double dot(std::size_t a, std::size_t b) const {
    double sum = 0;
    for (const auto& [ra, va] : columns_[a])
      for (const auto& [rb, vb] : columns_[b])
        if (ra == rb) sum += va * vb;
    return sum;
  }

  /// argmin ||A_set z - b|| by the normal equations, Cholesky with a tiny
  /// ridge so that dependent columns do not stop it.
  std::vector<double> least_squares(const std::vector<std::size_t>& set) const {
    const std::size_t m = set.size();
    std::vector<double> g(m * m), rhs(m);
    for (std::size_t i = 0; i < m; ++i) {
      for (std::size_t j = 0; j <= i; ++j) g[i * m + j] = g[j * m + i] = dot(set[i], set[j]);
      g[i * m + i] += 1e-12 * (1 + g[i * m + i]);
      double sum = 0;
      for (const auto& [row, value] : columns_[set[i]])
        sum += value * b_[static_cast<std::size_t>(row)];
      rhs[i] = sum;
    }
    for (std::size_t j = 0; j < m; ++j) {  // in-place Cholesky, lower triangle
      double d = g[j * m + j];
      for (std::size_t k = 0; k < j; ++k) d -= g[j * m + k] * g[j * m + k];
      d = std::sqrt(std::max(d, 1e-300));
      g[j * m + j] = d;
      for (std::size_t i = j + 1; i < m; ++i) {
        double s = g[i * m + j];
        for (std::size_t k = 0; k < j; ++k) s -= g[i * m + k] * g[j * m + k];
        g[i * m + j] = s / d;
      }
    }
    for (std::size_t i = 0; i < m; ++i) {  // L y = rhs
      double s = rhs[i];
      for (std::size_t k = 0; k < i; ++k) s -= g[i * m + k] * rhs[k];
      rhs[i] = s / g[i * m + i];
    }
    for (std::size_t i = m; i-- > 0;) {  // L^T z = y
      double s = rhs[i];
      for (std::size_t k = i + 1; k < m; ++k) s -= g[k * m + i] * rhs[k];
      rhs[i] = s / g[i * m + i];
    }
    return rhs;
  }

  std::vector<Column> columns_;
  std::vector<double> b_;
};

}  // namespace

std::vector<PackStrategy> nnlshp(const std::vector<std::int64_t>& histogram, std::int64_t max_len,
                                 std::int64_t max_per_pack) {
  check_histogram(histogram, max_len, max_per_pack);
  if (max_per_pack > 3) {
    throw ConfigError(fmt::format(
        "packing: nnlshp takes at most 3 sequences per pack (its strategies grow as max_len^{}); "
        "use spfhp for {}",
        max_per_pack - 1, max_per_pack));
  }
  std::vector<std::vector<std::int64_t>> fills;
  std::vector<std::int64_t> prefix;
  if (fill_count(max_len, max_per_pack) <= kMaxNnlshpStrategies) {
    exact_fills(0, 1, max_len, max_per_pack, prefix, fills);
  } else {
    // Every length up to max_len would make too many strategies for the
    // least squares (quadratic in their number): only the lengths the data
    // has, whose fills are all that can be used; bounded by the input.
    std::vector<std::int64_t> present;
    for (std::int64_t l = 1; l <= max_len; ++l)
      if (histogram[static_cast<std::size_t>(l - 1)] > 0) present.push_back(l);
    present_fills(0, 0, max_len, max_per_pack, present, prefix, fills);
  }
  // The paper weights lengths below 8 by 0.09: a short sequence left over
  // costs little padding.
  const auto weight = [](std::int64_t length) { return length <= 8 ? 0.09 : 1.0; };
  std::vector<Nnls::Column> columns;
  for (const auto& fill : fills) {
    Nnls::Column column;
    for (const std::int64_t length : fill) {
      if (!column.empty() && column.back().first == length - 1) {
        column.back().second += weight(length);
      } else {
        column.emplace_back(length - 1, weight(length));
      }
    }
    columns.push_back(std::move(column));
  }
  std::vector<double> b(static_cast<std::size_t>(max_len));
  for (std::int64_t l = 1; l <= max_len; ++l)
    b[static_cast<std::size_t>(l - 1)] =
        weight(l) * static_cast<double>(histogram[static_cast<std::size_t>(l - 1)]);
  const auto mixture = Nnls(std::move(columns), std::move(b)).solve();
  // Rounded down, so no strategy asks for sequences that do not exist; what
  // is left is packed by SPFHP.
  std::vector<PackStrategy> strategies;
  std::vector<std::int64_t> left = histogram;
  for (std::size_t j = 0; j < fills.size(); ++j) {
    auto count = static_cast<std::int64_t>(std::floor(mixture[j] + 1e-9));
    if (count <= 0) continue;
    for (const std::int64_t length : fills[j]) {
      // Several lengths in one fill may be equal: count each use.
      const auto uses = std::count(fills[j].begin(), fills[j].end(), length);
      count = std::min(count, left[static_cast<std::size_t>(length - 1)] / uses);
    }
    if (count <= 0) continue;
    for (const std::int64_t length : fills[j]) left[static_cast<std::size_t>(length - 1)] -= count;
    strategies.push_back({fills[j], count});
  }
  for (auto& rest : spfhp(left, max_len, max_per_pack))
    if (rest.count > 0) strategies.push_back(std::move(rest));
  return strategies;
}

double PackingStats::efficiency() const {
  return packs == 0 ? 0.0 : static_cast<double>(tokens) / static_cast<double>(packs * max_len);
}

double PackingStats::unpacked_efficiency() const {
  return sequences == 0 ? 0.0
                        : static_cast<double>(tokens) / static_cast<double>(sequences * max_len);
}

double PackingStats::speedup() const {
  return packs == 0 ? 0.0 : static_cast<double>(sequences) / static_cast<double>(packs);
}

std::vector<std::vector<std::int64_t>> assign_packs(const std::vector<std::int64_t>& lengths,
                                                    const std::vector<PackStrategy>& strategies) {
  std::map<std::int64_t, std::vector<std::int64_t>> by_length;  // indices, last = next taken
  for (std::size_t i = lengths.size(); i-- > 0;)
    by_length[lengths[i]].push_back(static_cast<std::int64_t>(i));
  std::vector<std::vector<std::int64_t>> packs;
  for (const auto& strategy : strategies) {
    for (std::int64_t r = 0; r < strategy.count; ++r) {
      std::vector<std::int64_t> pack;
      for (const std::int64_t length : strategy.lengths) {
        auto& waiting = by_length[length];
        if (waiting.empty()) continue;
        pack.push_back(waiting.back());
        waiting.pop_back();
      }
      if (!pack.empty()) packs.push_back(std::move(pack));
    }
  }
  for (auto& [length, waiting] : by_length) {  // none should be left; never lose one
    while (!waiting.empty()) {
      packs.push_back({waiting.back()});
      waiting.pop_back();
    }
  }
  return packs;
}

std::vector<std::vector<std::int64_t>> pack_sequences(const std::vector<std::int64_t>& lengths,
                                                      std::int64_t max_len,
                                                      std::int64_t max_per_pack,
                                                      const std::string& algorithm,
                                                      PackingStats* stats) {
  if (algorithm != "spfhp" && algorithm != "nnlshp")
    throw ConfigError(
        fmt::format("packing: algorithm must be spfhp or nnlshp, got \"{}\"", algorithm));
  if (max_len < 1) throw ConfigError(fmt::format("packing: max_len {} is not positive", max_len));
  std::vector<std::int64_t> histogram(static_cast<std::size_t>(max_len), 0);
  std::int64_t tokens = 0;
  for (std::size_t i = 0; i < lengths.size(); ++i) {
    if (lengths[i] < 1 || lengths[i] > max_len)
      throw ConfigError(
          fmt::format("packing: sample {} has {} tokens, outside 1..{}", i, lengths[i], max_len));
    ++histogram[static_cast<std::size_t>(lengths[i] - 1)];
    tokens += lengths[i];
  }
  const auto strategies = algorithm == "spfhp" ? spfhp(histogram, max_len, max_per_pack)
                                               : nnlshp(histogram, max_len, max_per_pack);
  auto packs = assign_packs(lengths, strategies);
  if (stats) {
    stats->sequences = static_cast<std::int64_t>(lengths.size());
    stats->packs = static_cast<std::int64_t>(packs.size());
    stats->tokens = tokens;
    stats->max_len = max_len;
  }
  return packs;
}

}  // namespace polyhal
