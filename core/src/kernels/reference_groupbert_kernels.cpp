// Reference kernels (f32) of GroupBERT's training ops (docs/groupbert.md):
// the grouped dense of the FFN's down-projection, the grouped convolution
// along the sequence, the gated linear unit and swish, each with its
// backward. Contracts in polyhal/train_kernels.hpp.
#include "kernels/reference_groupbert_kernels.hpp"

#include <fmt/format.h>

#include <cmath>
#include <vector>

#include "kernels/function_kernel.hpp"
#include "polyhal/error.hpp"
#include "polyhal/train_kernels.hpp"

namespace polyhal::detail {
namespace {

/// sum + term, rounded to f16 with f16 partials (the IPU's half accumulation).
inline float accumulate(bool f16_partials, float sum, float term) {
  const float s = sum + term;
  return f16_partials ? round_through(DType::f16, s) : s;
}

inline float sigmoid(float x) {
  return 1.0f / (1.0f + std::exp(-x));
}

std::int64_t dim(const KernelDesc& d, std::size_t input, std::size_t axis) {
  const auto& shapes = d.input_shapes;
  if (input >= shapes.size() || axis >= shapes[input].size())
    throw RuntimeFailure(
        fmt::format("{}: input {} has no dimension {}", op_name(d.op), input, axis));
  return shapes[input][axis];
}

void require(bool ok, const KernelDesc& d, const std::string& what) {
  if (!ok) throw RuntimeFailure(fmt::format("{}: {}", op_name(d.op), what));
}

/// The dimensions of a grouped dense: X[M,K], W[N,K/G].
struct GroupedDims {
  std::int64_t m, k, out, groups, k_group, out_group;
};

GroupedDims grouped_dims(const KernelDesc& d, std::size_t x_input, std::size_t w_input) {
  GroupedDims g{dim(d, x_input, 0), dim(d, x_input, 1),
                dim(d, w_input, 0), d.attrs_as<GroupedDenseAttrs>().groups,
                dim(d, w_input, 1), 0};
  require(g.groups > 0 && g.out % g.groups == 0 && g.k_group * g.groups == g.k, d,
          fmt::format("W[{},{}] is not X's {} columns in {} groups over {} outputs", g.out,
                      g.k_group, g.k, g.groups, g.out));
  g.out_group = g.out / g.groups;
  return g;
}

/// The dimensions of a sequence convolution: X[B*S,N], W[N,C,K].
struct ConvDims {
  std::int64_t batch, seq, channels, group, taps, left;
};

ConvDims conv_dims(const KernelDesc& d, std::size_t x_input, std::size_t w_input) {
  const auto& a = d.attrs_as<SequenceConvAttrs>();
  ConvDims c{a.batch, a.seq, dim(d, x_input, 1), a.group_size, a.kernel, (a.kernel - 1) / 2};
  require(c.batch > 0 && c.seq > 0 && dim(d, x_input, 0) == c.batch * c.seq, d,
          "X's rows are not batch x seq");
  require(c.group > 0 && c.channels % c.group == 0 && c.taps > 0, d,
          "channels not divisible by the group size, or no taps");
  require(dim(d, w_input, 0) == c.channels && dim(d, w_input, 1) == c.group &&
              dim(d, w_input, 2) == c.taps,
          d, "W is not [channels, group_size, kernel]");
  return c;
}

/// Whether output position t of row b sums input position src: both in the
/// same sequence (the mask's sequence numbers; 0 is padding, which sees
/// nothing and is seen by nothing).
inline bool connected(const std::int32_t* mask, std::size_t row, std::size_t t, std::size_t src) {
  return mask[row + t] != 0 && mask[row + src] == mask[row + t];
}

}  // namespace

std::unique_ptr<Kernel> grouped_dense(const KernelDesc& d, const ParallelFor& par,
                                      bool f16_partials) {
  const GroupedDims g = grouped_dims(d, 0, 1);
  return std::make_unique<FunctionKernel>(
      "grouped_dense", 2.0 * static_cast<double>(g.m * g.out * g.k_group), [=](auto in, auto o) {
        const float *x = f(in[0]), *w = f(in[1]), *b = f(in[2]);
        float* y = f(o[0]);
        rows(par, g.m, [&](std::size_t r) {
          for (std::size_t j = 0; j < n(g.out); ++j) {
            const float* xs = x + r * n(g.k) + (j / n(g.out_group)) * n(g.k_group);
            const float* ws = w + j * n(g.k_group);
            float sum = 0;
            for (std::size_t i = 0; i < n(g.k_group); ++i)
              sum = accumulate(f16_partials, sum, xs[i] * ws[i]);
            y[r * n(g.out) + j] = sum + b[j];
          }
        });
      });
}

std::unique_ptr<Kernel> grouped_dense_backward(const KernelDesc& d, const ParallelFor& par,
                                               bool f16_partials) {
  const GroupedDims g = grouped_dims(d, 1, 2);
  require(dim(d, 0, 0) == g.m && dim(d, 0, 1) == g.out, d, "dY is not [M, outputs]");
  return std::make_unique<FunctionKernel>(
      "grouped_dense_backward", 4.0 * static_cast<double>(g.m * g.out * g.k_group),
      [=](auto in, auto o) {
        const float *dy = f(in[0]), *x = f(in[1]), *w = f(in[2]);
        float *dx = f(o[0]), *dw = f(o[1]), *db = f(o[2]);
        // dX[m, group j's columns] = sum over the group's outputs of dY W.
        rows(par, g.m, [&](std::size_t r) {
          for (std::size_t c = 0; c < n(g.k); ++c) {
            const std::size_t group = c / n(g.k_group), i = c % n(g.k_group);
            float sum = 0;
            for (std::size_t j = group * n(g.out_group); j < (group + 1) * n(g.out_group); ++j)
              sum = accumulate(f16_partials, sum, dy[r * n(g.out) + j] * w[j * n(g.k_group) + i]);
            dx[r * n(g.k) + c] = sum;
          }
        });
        // dW[j, i] += sum over rows of dY[m, j] X[m, group(j) columns + i]; db += dY's rows.
        rows(par, g.out, [&](std::size_t j) {
          const std::size_t first = (j / n(g.out_group)) * n(g.k_group);
          for (std::size_t i = 0; i < n(g.k_group); ++i) {
            float sum = 0;
            for (std::size_t r = 0; r < n(g.m); ++r)
              sum = accumulate(f16_partials, sum, dy[r * n(g.out) + j] * x[r * n(g.k) + first + i]);
            dw[j * n(g.k_group) + i] += sum;
          }
          double bias = 0;
          for (std::size_t r = 0; r < n(g.m); ++r) bias += dy[r * n(g.out) + j];
          db[j] += static_cast<float>(bias);
        });
      });
}

std::unique_ptr<Kernel> sequence_conv(const KernelDesc& d, const ParallelFor& par,
                                      bool f16_partials) {
  const ConvDims c = conv_dims(d, 0, 1);
  return std::make_unique<FunctionKernel>(
      "sequence_conv", 2.0 * static_cast<double>(c.batch * c.seq * c.channels * c.group * c.taps),
      [=](auto in, auto o) {
        const float *x = f(in[0]), *w = f(in[1]);
        const std::int32_t* mask = ints(in[2]);
        float* y = f(o[0]);
        rows(par, c.batch * c.seq, [&](std::size_t token) {
          const std::size_t row = token / n(c.seq) * n(c.seq), t = token % n(c.seq);
          for (std::size_t out = 0; out < n(c.channels); ++out) {
            const std::size_t first = out / n(c.group) * n(c.group);
            float sum = 0;
            for (std::size_t k = 0; k < n(c.taps); ++k) {
              const auto src = static_cast<std::int64_t>(t + k) - c.left;
              if (src < 0 || src >= c.seq || !connected(mask, row, t, n(src))) continue;
              const float* xs = x + (row + n(src)) * n(c.channels) + first;
              for (std::size_t i = 0; i < n(c.group); ++i)
                sum = accumulate(f16_partials, sum,
                                 w[(out * n(c.group) + i) * n(c.taps) + k] * xs[i]);
            }
            y[token * n(c.channels) + out] = sum;
          }
        });
      });
}

std::unique_ptr<Kernel> sequence_conv_backward(const KernelDesc& d, const ParallelFor& par,
                                               bool f16_partials) {
  const ConvDims c = conv_dims(d, 1, 2);
  return std::make_unique<FunctionKernel>(
      "sequence_conv_backward",
      4.0 * static_cast<double>(c.batch * c.seq * c.channels * c.group * c.taps),
      [=](auto in, auto o) {
        const float *dy = f(in[0]), *x = f(in[1]), *w = f(in[2]);
        const std::int32_t* mask = ints(in[3]);
        float *dx = f(o[0]), *dw = f(o[1]);
        // dX at input position src: every output t that summed it, tap k = src - t + left.
        rows(par, c.batch * c.seq, [&](std::size_t token) {
          const std::size_t row = token / n(c.seq) * n(c.seq), src = token % n(c.seq);
          for (std::size_t ch = 0; ch < n(c.channels); ++ch) {
            const std::size_t first = ch / n(c.group) * n(c.group), i = ch % n(c.group);
            float sum = 0;
            for (std::size_t k = 0; k < n(c.taps); ++k) {
              const auto t = static_cast<std::int64_t>(src) - static_cast<std::int64_t>(k) + c.left;
              if (t < 0 || t >= c.seq || !connected(mask, row, n(t), src)) continue;
              const float* dys = dy + (row + n(t)) * n(c.channels);
              for (std::size_t out = first; out < first + n(c.group); ++out)
                sum = accumulate(f16_partials, sum,
                                 dys[out] * w[(out * n(c.group) + i) * n(c.taps) + k]);
            }
            dx[token * n(c.channels) + ch] = sum;
          }
        });
        // dW[out, i, k] += sum over tokens t of dY[t, out] X[t + k - left, group + i].
        rows(par, c.channels, [&](std::size_t out) {
          const std::size_t first = out / n(c.group) * n(c.group);
          for (std::size_t i = 0; i < n(c.group); ++i) {
            for (std::size_t k = 0; k < n(c.taps); ++k) {
              float sum = 0;
              for (std::size_t token = 0; token < n(c.batch * c.seq); ++token) {
                const std::size_t row = token / n(c.seq) * n(c.seq), t = token % n(c.seq);
                const auto src = static_cast<std::int64_t>(t + k) - c.left;
                if (src < 0 || src >= c.seq || !connected(mask, row, t, n(src))) continue;
                sum = accumulate(f16_partials, sum,
                                 dy[token * n(c.channels) + out] *
                                     x[(row + n(src)) * n(c.channels) + first + i]);
              }
              dw[(out * n(c.group) + i) * n(c.taps) + k] += sum;
            }
          }
        });
      });
}

std::unique_ptr<Kernel> gated_elementwise(const KernelDesc& d, const ParallelFor& par) {
  const OpKind op = d.op;
  const bool glu = op == OpKind::glu || op == OpKind::glu_backward;
  const std::size_t a_input = op == OpKind::glu_backward ? 1 : 0;
  const std::int64_t m = dim(d, a_input, 0);
  const std::int64_t width =
      element_count(d.input_shapes.at(a_input)) / std::max<std::int64_t>(m, 1);
  require(!glu || width % 2 == 0, d, "the input's width is not even (values, then gates)");
  const std::int64_t half = glu ? width / 2 : width;
  return std::make_unique<FunctionKernel>(std::string(op_name(op)), 0.0, [=](auto in, auto o) {
    float* y = f(o[0]);
    if (op == OpKind::swish || op == OpKind::swish_backward) {
      const float* x = f(in[op == OpKind::swish ? 0 : 1]);
      const float* dy = op == OpKind::swish ? nullptr : f(in[0]);
      par(m * width, [=](std::int64_t begin, std::int64_t end) {
        for (std::int64_t e = begin; e < end; ++e) {
          const float s = sigmoid(x[e]);
          y[e] = dy ? dy[e] * (s + x[e] * s * (1.0f - s)) : x[e] * s;
        }
      });
      return;
    }
    const float* a = f(in[a_input]);
    const float* dy = op == OpKind::glu ? nullptr : f(in[0]);
    rows(par, m, [&](std::size_t r) {
      const float* values = a + r * n(width);
      const float* gates = values + half;
      for (std::size_t j = 0; j < n(half); ++j) {
        const float s = sigmoid(gates[j]);
        if (!dy) {
          y[r * n(half) + j] = values[j] * s;
        } else {
          const float g = dy[r * n(half) + j];
          y[r * n(width) + j] = g * s;
          y[r * n(width) + n(half) + j] = g * values[j] * s * (1.0f - s);
        }
      }
    });
  });
}

}  // namespace polyhal::detail
