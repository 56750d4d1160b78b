// GLUE's metrics as scikit-learn (accuracy, f1, matthews_corrcoef) and SciPy
// (pearsonr, spearmanr) compute them.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <stdexcept>
#include <string>

#include "polyhal/app/eval_metrics.hpp"

namespace polyhal {
namespace {

template <class A, class B>
void check_sizes(const A& a, const B& b, const char* metric) {
  if (a.size() != b.size())
    throw std::invalid_argument(std::string(metric) + ": predictions and gold differ in length");
  if (a.empty()) throw std::invalid_argument(std::string(metric) + ": no examples");
}

/// Ranks 1..n, ties given the average of the ranks they span.
std::vector<double> average_ranks(const std::vector<double>& values) {
  std::vector<std::size_t> order(values.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return values[a] < values[b]; });
  std::vector<double> ranks(values.size());
  for (std::size_t i = 0; i < order.size();) {
    std::size_t j = i;
    while (j + 1 < order.size() && values[order[j + 1]] == values[order[i]]) ++j;
    const double rank = (static_cast<double>(i) + static_cast<double>(j)) / 2.0 + 1.0;
    for (std::size_t k = i; k <= j; ++k) ranks[order[k]] = rank;
    i = j + 1;
  }
  return ranks;
}

}  // namespace

double accuracy(const std::vector<std::int64_t>& predicted, const std::vector<std::int64_t>& gold) {
  check_sizes(predicted, gold, "accuracy");
  std::int64_t right = 0;
  for (std::size_t i = 0; i < gold.size(); ++i) right += predicted[i] == gold[i];
  return static_cast<double>(right) / static_cast<double>(gold.size());
}

double binary_f1(const std::vector<std::int64_t>& predicted, const std::vector<std::int64_t>& gold,
                 std::int64_t positive) {
  check_sizes(predicted, gold, "f1");
  double tp = 0, fp = 0, fn = 0;
  for (std::size_t i = 0; i < gold.size(); ++i) {
    const bool p = predicted[i] == positive, g = gold[i] == positive;
    tp += p && g;
    fp += p && !g;
    fn += !p && g;
  }
  return tp == 0 ? 0.0 : 2 * tp / (2 * tp + fp + fn);
}

double matthews_correlation(const std::vector<std::int64_t>& predicted,
                            const std::vector<std::int64_t>& gold) {
  check_sizes(predicted, gold, "matthews_correlation");
  double tp = 0, tn = 0, fp = 0, fn = 0;
  for (std::size_t i = 0; i < gold.size(); ++i) {
    const bool p = predicted[i] != 0, g = gold[i] != 0;
    tp += p && g;
    tn += !p && !g;
    fp += p && !g;
    fn += !p && g;
  }
  const double denominator = std::sqrt((tp + fp) * (tp + fn) * (tn + fp) * (tn + fn));
  return denominator == 0 ? 0.0 : (tp * tn - fp * fn) / denominator;
}

double pearson_correlation(const std::vector<double>& x, const std::vector<double>& y) {
  check_sizes(x, y, "pearson_correlation");
  const double n = static_cast<double>(x.size());
  const double mx = std::accumulate(x.begin(), x.end(), 0.0) / n;
  const double my = std::accumulate(y.begin(), y.end(), 0.0) / n;
  double sxy = 0, sxx = 0, syy = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    sxy += (x[i] - mx) * (y[i] - my);
    sxx += (x[i] - mx) * (x[i] - mx);
    syy += (y[i] - my) * (y[i] - my);
  }
  if (sxx == 0 || syy == 0) return std::numeric_limits<double>::quiet_NaN();
  return sxy / std::sqrt(sxx * syy);
}

double spearman_correlation(const std::vector<double>& x, const std::vector<double>& y) {
  check_sizes(x, y, "spearman_correlation");
  return pearson_correlation(average_ranks(x), average_ranks(y));
}

}  // namespace polyhal
