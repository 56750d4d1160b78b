// Op conformance (in the spirit of ggml's test-backend-ops): every (op,
// dtype) a backend registers runs at BERT-base shapes and at odd shapes (1,
// 3, 17, 129) against the core's reference kernels on the same inputs, with a
// tolerance per dtype; every backward op is also checked against finite
// differences of its forward op on the backend itself. An (op, dtype) the
// reference has and the backend lacks, or a shape the backend refuses at
// prepare time, is reported as "not supported", never as a failure.
//
//   polyhal-op-conformance BACKEND|PLUGIN.so [--quick]
//
// Shipped to plugin authors in polyhal-dev (man polyhal-op-conformance).
// Prints one line per case and a summary; exits 0 when every case passed,
// 1 if any failed, 2 on bad usage, 3 when the plugin cannot be loaded.
#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <iostream>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "polyhal/app/plugin_loader.hpp"
#include "polyhal/backend.hpp"
#include "polyhal/error.hpp"
#include "polyhal/reference_kernels.hpp"
#include "polyhal/train_kernels.hpp"

namespace polyhal {
namespace {

/// The core's reference kernels on the host: what every backend is compared with.
class ReferenceDevice final : public Device {
 public:
  ReferenceDevice() : Device(properties()) {
    register_reference_kernels(registry(), {DType::f32, DType::bf16, DType::f16}, MatMulNumerics{});
  }

 private:
  static DeviceProperties properties() {
    DeviceProperties p;
    p.name = "reference";
    p.backend = "reference";
    p.dtypes = {DType::f32, DType::bf16, DType::f16};
    p.memory_capacity_bytes = 1ull << 40;
    return p;
  }
};

/// Model dimensions of one case: tokens = batch x seq.
struct Dims {
  std::string name;
  std::int64_t batch, seq, hidden, heads, intermediate, vocab;
  std::int64_t tokens() const { return batch * seq; }
};

/// A host tensor in its device dtype, as bytes.
struct HostValues {
  DType type = DType::f32;
  Shape shape;
  std::vector<std::byte> bytes;
};

HostValues floats(DType type, Shape shape, const std::vector<float>& values) {
  HostValues h{type, std::move(shape), std::vector<std::byte>(values.size() * dtype_size(type))};
  convert(values.data(), DType::f32, h.bytes.data(), type, values.size());
  return h;
}

template <class Int>
HostValues integers(DType type, Shape shape, const std::vector<Int>& values) {
  HostValues h{type, std::move(shape), std::vector<std::byte>(values.size() * sizeof(Int))};
  std::memcpy(h.bytes.data(), values.data(), h.bytes.size());
  return h;
}

std::vector<float> as_floats(const HostValues& h) {
  std::vector<float> out(static_cast<std::size_t>(element_count(h.shape)));
  if (h.type == DType::i32) {
    for (std::size_t i = 0; i < out.size(); ++i) {
      std::int32_t v = 0;
      std::memcpy(&v, h.bytes.data() + i * 4, 4);
      out[i] = static_cast<float>(v);
    }
  } else {
    convert(h.bytes.data(), h.type, out.data(), DType::f32, out.size());
  }
  return out;
}

/// Seeded values; every case draws from its own generator.
class Values {
 public:
  explicit Values(std::uint64_t seed) : rng_(seed) {}
  std::vector<float> uniform(std::int64_t n, float lo = -1.0f, float hi = 1.0f) {
    std::uniform_real_distribution<float> d(lo, hi);
    std::vector<float> v(static_cast<std::size_t>(n));
    for (auto& x : v) x = d(rng_);
    return v;
  }
  std::vector<std::int32_t> ints(std::int64_t n, std::int32_t lo, std::int32_t hi) {
    std::uniform_int_distribution<std::int32_t> d(lo, hi);
    std::vector<std::int32_t> v(static_cast<std::size_t>(n));
    for (auto& x : v) x = d(rng_);
    return v;
  }

 private:
  std::mt19937_64 rng_;
};

/// One run of one op: its desc, inputs, constants and outputs (initial
/// values matter for "+=" outputs; `aliases[j]` >= 0 makes output j the same
/// tensor as that input, as the in-place optimizer updates need).
struct OpCase {
  KernelDesc desc;
  std::vector<HostValues> inputs, constants, outputs;
  std::vector<int> aliases;
};

constexpr std::int32_t kIgnore = -100;

/// Inputs of a forward op (or a backward op whose inputs need no forward run).
std::optional<OpCase> make_case(OpKind op, DType type, const Dims& d, Values& v,
                                double dropout = 0.0) {
  const std::int64_t t = d.tokens(), h = d.hidden, i = d.intermediate, b = d.batch, s = d.seq;
  const auto f32 = [&](Shape shape, float lo = -1.0f, float hi = 1.0f) {
    return floats(DType::f32, shape, v.uniform(element_count(shape), lo, hi));
  };
  const auto act = [&](Shape shape) {
    return floats(type, shape, v.uniform(element_count(shape)));
  };
  const auto ids = [&](std::int64_t n, std::int32_t limit) {
    return integers(DType::i32, {n}, v.ints(n, 0, limit - 1));
  };
  const auto mask = [&] {  // some keys masked, never a whole row
    auto m = v.ints(b * s, 0, 3);
    for (std::int64_t r = 0; r < b; ++r) {
      for (std::int64_t c = 0; c < s; ++c)
        m[static_cast<std::size_t>(r * s + c)] =
            c == 0 || m[static_cast<std::size_t>(r * s + c)] != 0;
    }
    return integers(DType::i32, {b, s}, m);
  };
  const auto rng = [&] { return integers(DType::i32, {2}, std::vector<std::int32_t>{12345, 7}); };
  const auto zeros = [&](Shape shape) {
    return floats(DType::f32, shape,
                  std::vector<float>(static_cast<std::size_t>(element_count(shape))));
  };
  OpCase c;
  c.desc.op = op;
  c.desc.dtype = type;
  switch (op) {
    case OpKind::matmul:
      c.desc.attrs = MatmulAttrs{};
      c.inputs = {act({t, h}), act({h, i})};
      c.outputs = {act({t, i})};
      break;
    case OpKind::linear: {
      c.desc.attrs = LinearAttrs{i, Activation::gelu, true};
      c.inputs = {act({t, h}), act({t, i})};
      c.constants = {act({i, h}), f32({i})};
      c.outputs = {act({t, i})};
      break;
    }
    case OpKind::layernorm:
      c.desc.attrs = LayerNormAttrs{1e-12, true};
      c.inputs = {act({t, h}), act({t, h})};
      c.constants = {f32({h}, 0.5f, 1.5f), f32({h})};
      c.outputs = {act({t, h})};
      break;
    case OpKind::attention:
      if (h % d.heads != 0) return std::nullopt;
      c.desc.attrs = AttentionAttrs{b, s, d.heads};
      c.inputs = {act({t, 3 * h}), mask()};
      c.outputs = {act({t, h})};
      break;
    case OpKind::relative_attention:  // 32 buckets, as MPNet's
      if (h % d.heads != 0) return std::nullopt;
      c.desc.attrs = AttentionAttrs{b, s, d.heads};
      c.inputs = {act({t, 3 * h}), mask(),
                  integers(DType::i32, {b, s, s}, v.ints(b * s * s, 0, 31))};
      c.constants = {f32({32, d.heads})};
      c.outputs = {act({t, h})};
      break;
    case OpKind::embedding:
      c.desc.attrs = EmbeddingAttrs{s};
      c.inputs = {ids(t, static_cast<std::int32_t>(d.vocab)), ids(t, 2)};
      c.constants = {act({d.vocab, h}), act({s + 3, h}), act({2, h})};
      c.outputs = {act({t, h})};
      break;
    case OpKind::take_rows:
      c.desc.attrs = RowStrideAttrs{s};
      c.inputs = {act({t, h})};
      c.outputs = {act({b, h})};
      break;
    case OpKind::dense:
      c.inputs = {f32({t, h}), f32({i, h}), f32({i})};
      c.outputs = {f32({t, i})};
      break;
    case OpKind::gelu:
    case OpKind::tanh:
    case OpKind::relu:
      c.inputs = {f32({t, i}, -3.0f, 3.0f)};
      c.outputs = {f32({t, i})};
      break;
    case OpKind::add:
      c.inputs = {f32({t, h}), f32({t, h})};
      c.outputs = {f32({t, h})};
      break;
    case OpKind::layernorm_train:
      c.desc.attrs = LayerNormAttrs{1e-12, false};
      c.inputs = {f32({t, h}, -2.0f, 2.0f), f32({h}, 0.5f, 1.5f), f32({h})};
      c.outputs = {f32({t, h}), f32({t}), f32({t})};
      break;
    case OpKind::attention_train:
      if (h % d.heads != 0) return std::nullopt;
      c.desc.attrs = AttentionAttrs{b, s, d.heads, dropout, dropout > 0 ? 3u : 0u};
      c.inputs = {f32({t, 3 * h}, -2.0f, 2.0f), mask()};
      if (dropout > 0) c.inputs.push_back(rng());
      c.outputs = {f32({t, h}), f32({b, d.heads, s, s})};
      break;
    case OpKind::relative_attention_train:  // 32 buckets, as MPNet's
      if (h % d.heads != 0) return std::nullopt;
      c.desc.attrs = AttentionAttrs{b, s, d.heads, dropout, dropout > 0 ? 3u : 0u};
      c.inputs = {f32({t, 3 * h}, -2.0f, 2.0f), mask(),
                  integers(DType::i32, {b, s, s}, v.ints(b * s * s, 0, 31)), f32({32, d.heads})};
      if (dropout > 0) c.inputs.push_back(rng());
      c.outputs = {f32({t, h}), f32({b, d.heads, s, s})};
      break;
    case OpKind::rotary:  // ModernBERT's local base
      if (h % d.heads != 0 || (h / d.heads) % 2 != 0) return std::nullopt;
      c.desc.attrs = RotaryAttrs{s, d.heads, 10000.0};
      c.inputs = {f32({t, 3 * h}, -2.0f, 2.0f)};
      c.outputs = {f32({t, 3 * h})};
      break;
    case OpKind::geglu:
      c.inputs = {f32({t, 2 * i}, -3.0f, 3.0f)};
      c.outputs = {f32({t, i})};
      break;
    case OpKind::mean_pool:
      c.inputs = {f32({t, h}), mask()};
      c.outputs = {f32({b, h})};
      break;
    case OpKind::embedding_train:
      c.desc.attrs = EmbeddingAttrs{s};
      c.inputs = {ids(t, static_cast<std::int32_t>(d.vocab)), ids(t, 2), f32({d.vocab, h}),
                  f32({s + 3, h}), f32({2, h})};
      c.outputs = {f32({t, h})};
      break;
    case OpKind::gather_rows:
      c.inputs = {f32({t, h}), ids(b * 2, static_cast<std::int32_t>(t))};
      c.outputs = {f32({b * 2, h})};
      break;
    case OpKind::pretraining_loss: {
      auto labels = v.ints(t, 0, static_cast<std::int32_t>(d.vocab) - 1);
      for (std::size_t k = 1; k < labels.size(); k += 3) labels[k] = kIgnore;
      c.inputs = {f32({t, d.vocab}, -3.0f, 3.0f), integers(DType::i32, {t}, labels),
                  f32({b, 2}, -3.0f, 3.0f), ids(b, 2), floats(DType::f32, {1}, {1.0f})};
      c.outputs = {zeros({2}), f32({t, d.vocab}), f32({b, 2})};
      break;
    }
    case OpKind::dropout:
      c.desc.attrs = DropoutAttrs{0.1, 5};
      c.inputs = {f32({t, h}), rng()};
      c.outputs = {f32({t, h})};
      break;
    case OpKind::sum_of_squares:
      c.inputs = {f32({t, h})};
      c.outputs = {zeros({1})};
      break;
    case OpKind::cast:
      c.inputs = {f32({t, h}, -3.0f, 3.0f)};
      c.outputs = {f32({t, h})};
      break;
    case OpKind::span_loss: {  // one position past the sequence: ignored; one negative: clamped
      auto positions = v.ints(b * 2, 0, static_cast<std::int32_t>(s) - 1);
      positions[0] = static_cast<std::int32_t>(s);
      if (positions.size() > 3) positions[3] = -4;
      c.inputs = {f32({t, 2}, -3.0f, 3.0f), integers(DType::i32, {b, 2}, positions),
                  floats(DType::f32, {1}, {1.0f})};
      c.outputs = {zeros({1}), f32({t, 2})};
      break;
    }
    case OpKind::classification_loss: {
      auto labels = v.ints(t, 0, 2);
      labels[0] = kIgnore;
      c.inputs = {f32({t, 3}, -3.0f, 3.0f), integers(DType::i32, {t}, labels),
                  floats(DType::f32, {1}, {1.0f})};
      c.outputs = {zeros({1}), f32({t, 3})};
      break;
    }
    case OpKind::regression_loss:
      c.inputs = {f32({t, 1}, 0.0f, 5.0f), f32({t}, 0.0f, 5.0f), floats(DType::f32, {1}, {1.0f})};
      c.outputs = {zeros({1}), f32({t, 1})};
      break;
    case OpKind::adamw_update:
    case OpKind::lamb_update:
    case OpKind::sgd_update: {
      c.desc.attrs = OptimizerUpdateAttrs{{0.9, 0.999, 1e-6, 0.01, 0.9}, true, true};
      const auto step = optimizer_step_words({1e-3, 0.5, 3, 0});
      c.inputs = {f32({i, h}), f32({i, h}), f32({i, h}, -0.1f, 0.1f), f32({i, h}, 0.0f, 0.1f),
                  integers(DType::i64, {kOptimizerStepWords},
                           std::vector<std::int64_t>(step.begin(), step.end()))};
      // The fifth output is the weights' compute copy (at round_to).
      c.outputs = {c.inputs[0], c.inputs[2], c.inputs[3], c.inputs[1], zeros({i, h})};
      c.aliases = {0, 2, 3, 1, -1};
      break;
    }
    case OpKind::grouped_dense: {  // GroupBERT's 4 groups, or a divisor of an odd width
      const std::int64_t groups = h % 4 == 0 ? 4 : h % 3 == 0 ? 3 : h;
      const std::int64_t k = i % groups == 0 ? i : 2 * h;
      c.desc.attrs = GroupedDenseAttrs{groups};
      c.inputs = {f32({t, k}), f32({h, k / groups}), f32({h})};
      c.outputs = {f32({t, h})};
      break;
    }
    case OpKind::sequence_conv: {  // one sequence and padding; at n=17 packed sequences of 5
      const std::int64_t group = h % 16 == 0 ? 16 : h <= 17 ? h : h % 3 == 0 ? 3 : 1;
      const bool packed = s == 17;
      std::vector<std::int32_t> sequences(static_cast<std::size_t>(b * s));
      for (std::int64_t k = 0; k < b * s; ++k) {
        const std::int64_t pos = k % s;
        sequences[static_cast<std::size_t>(k)] =
            s >= 4 && pos >= s - 1 - k / s ? 0
                                           : static_cast<std::int32_t>(packed ? 1 + pos / 5 : 1);
      }
      c.desc.attrs = SequenceConvAttrs{b, s, group, 7};
      c.inputs = {f32({t, h}), f32({h, group, 7}, -0.5f, 0.5f),
                  integers(DType::i32, {b, s}, sequences)};
      c.outputs = {f32({t, h})};
      break;
    }
    case OpKind::glu:
      c.inputs = {f32({t, 2 * h}, -3.0f, 3.0f)};
      c.outputs = {f32({t, h})};
      break;
    case OpKind::swish:
      c.inputs = {f32({t, i}, -3.0f, 3.0f)};
      c.outputs = {f32({t, i})};
      break;
    default:
      return std::nullopt;  // backward ops: built from their forward run
  }
  for (const auto& in : c.inputs) c.desc.input_shapes.push_back(in.shape);
  return c;
}

/// Where a backward op's inputs come from.
struct Source {
  enum Kind { dy, forward_input, forward_output } kind;
  int index;
};

/// A backward op, the forward op it differentiates, and how they connect:
/// the backward op's inputs, and for each backward output the forward input
/// it is the gradient of (-1: none), given dY for forward output `dy_of`.
struct GradPair {
  OpKind backward, forward;
  std::vector<Source> inputs;
  std::vector<int> gradient_of;
  int dy_of = 0;
};

const std::vector<GradPair>& grad_pairs() {
  using S = Source;
  static const std::vector<GradPair> pairs{
      {OpKind::dense_backward,
       OpKind::dense,
       {{S::dy, 0}, {S::forward_input, 0}, {S::forward_input, 1}},
       {0, 1, 2}},
      {OpKind::gelu_backward, OpKind::gelu, {{S::dy, 0}, {S::forward_input, 0}}, {0}},
      {OpKind::tanh_backward, OpKind::tanh, {{S::dy, 0}, {S::forward_output, 0}}, {0}},
      {OpKind::relu_backward, OpKind::relu, {{S::dy, 0}, {S::forward_output, 0}}, {0}},
      {OpKind::layernorm_backward,
       OpKind::layernorm_train,
       {{S::dy, 0},
        {S::forward_input, 0},
        {S::forward_input, 1},
        {S::forward_output, 1},
        {S::forward_output, 2}},
       {0, 1, 2}},
      {OpKind::attention_backward,
       OpKind::attention_train,
       {{S::dy, 0}, {S::forward_input, 0}, {S::forward_output, 1}},
       {0}},
      {OpKind::embedding_backward,
       OpKind::embedding_train,
       {{S::dy, 0}, {S::forward_input, 0}, {S::forward_input, 1}},
       {2, 3, 4}},
      {OpKind::take_rows_backward, OpKind::take_rows, {{S::dy, 0}}, {0}},
      {OpKind::gather_rows_backward, OpKind::gather_rows, {{S::dy, 0}, {S::forward_input, 1}}, {0}},
      {OpKind::dropout_backward, OpKind::dropout, {{S::dy, 0}, {S::forward_input, 1}}, {0}},
      {OpKind::grouped_dense_backward,
       OpKind::grouped_dense,
       {{S::dy, 0}, {S::forward_input, 0}, {S::forward_input, 1}},
       {0, 1, 2}},
      {OpKind::sequence_conv_backward,
       OpKind::sequence_conv,
       {{S::dy, 0}, {S::forward_input, 0}, {S::forward_input, 1}, {S::forward_input, 2}},
       {0, 1}},
      {OpKind::glu_backward, OpKind::glu, {{S::dy, 0}, {S::forward_input, 0}}, {0}},
      {OpKind::swish_backward, OpKind::swish, {{S::dy, 0}, {S::forward_input, 0}}, {0}},
      {OpKind::relative_attention_backward,
       OpKind::relative_attention_train,
       {{S::dy, 0}, {S::forward_input, 0}, {S::forward_output, 1}, {S::forward_input, 2}},
       {0, 3}},
      {OpKind::rotary_backward, OpKind::rotary, {{S::dy, 0}}, {0}},
      {OpKind::geglu_backward, OpKind::geglu, {{S::dy, 0}, {S::forward_input, 0}}, {0}},
      {OpKind::mean_pool_backward, OpKind::mean_pool, {{S::dy, 0}, {S::forward_input, 1}}, {0}},
  };
  return pairs;
}

const GradPair* pair_of_backward(OpKind op) {
  for (const auto& p : grad_pairs()) {
    if (p.backward == op) return &p;
  }
  return nullptr;
}

bool is_float(DType type) {
  return type == DType::f32 || type == DType::bf16 || type == DType::f16;
}

/// Re-encodes a training op's tensors in the dtypes the op stores them at
/// under its round_to (operand_types), as a training program allocates them.
void store_as_operand_types(OpCase& c) {
  if (is_inference_op(c.desc.op)) return;  // inference ops: everything at desc.dtype
  const OperandTypes types = operand_types(c.desc);
  const auto recode = [](HostValues& h, DType type) {
    if (h.type != type && is_float(h.type) && is_float(type))
      h = floats(type, h.shape, as_floats(h));
  };
  for (std::size_t k = 0; k < c.inputs.size(); ++k) recode(c.inputs[k], types.inputs.at(k));
  for (std::size_t k = 0; k < c.outputs.size(); ++k) recode(c.outputs[k], types.outputs.at(k));
}

/// Runs a case on `device`; returns the outputs.
std::vector<HostValues> run_case(Device& device, const OpCase& c) {
  const auto kernel = device.prepare_kernel(c.desc);
  const auto upload = [&](const HostValues& h) {
    Tensor tensor = device.allocate_tensor(h.type, h.shape, "conformance");
    device.copy_from_host(*tensor.buffer, h.bytes.data(), h.bytes.size());
    return tensor;
  };
  std::vector<Tensor> inputs, constants, outputs;
  for (const auto& h : c.inputs) inputs.push_back(upload(h));
  for (const auto& h : c.constants) constants.push_back(upload(h));
  for (std::size_t j = 0; j < c.outputs.size(); ++j) {
    const int alias = j < c.aliases.size() ? c.aliases[j] : -1;
    outputs.push_back(alias >= 0 ? inputs[static_cast<std::size_t>(alias)] : upload(c.outputs[j]));
  }
  if (!constants.empty()) kernel->set_constants(constants);
  kernel->run(inputs, outputs);
  std::vector<HostValues> result;
  for (std::size_t j = 0; j < outputs.size(); ++j) {
    HostValues h = c.outputs[j];
    device.copy_to_host(h.bytes.data(), *outputs[j].buffer, h.bytes.size());
    result.push_back(std::move(h));
  }
  return result;
}

/// The backward case of `pair` from a forward case and its outputs.
OpCase backward_case(const GradPair& pair, const OpCase& forward,
                     const std::vector<HostValues>& forward_out, const HostValues& dy,
                     bool zero_accumulators) {
  OpCase c;
  c.desc.op = pair.backward;
  c.desc.dtype = forward.desc.dtype;
  c.desc.round_to = forward.desc.round_to;
  if (op_attrs_index(pair.backward) == forward.desc.attrs.index())
    c.desc.attrs = forward.desc.attrs;
  for (const auto& src : pair.inputs) {
    const auto k = static_cast<std::size_t>(src.index);
    c.inputs.push_back(src.kind == Source::dy              ? dy
                       : src.kind == Source::forward_input ? forward.inputs[k]
                                                           : forward_out[k]);
  }
  if (forward.desc.op == OpKind::attention_train && forward.inputs.size() > 2) {
    c.inputs.push_back(forward.inputs[2]);  // the dropout rng
  }
  if (forward.desc.op == OpKind::relative_attention_train && forward.inputs.size() > 4) {
    c.inputs.push_back(forward.inputs[4]);  // the dropout rng
  }
  for (const auto& in : c.inputs) c.desc.input_shapes.push_back(in.shape);
  Values garbage(99);
  for (const int of : pair.gradient_of) {
    const HostValues& like = forward.inputs[static_cast<std::size_t>(of)];
    const std::int64_t n = element_count(like.shape);
    c.outputs.push_back(floats(
        DType::f32, like.shape,
        zero_accumulators ? std::vector<float>(static_cast<std::size_t>(n)) : garbage.uniform(n)));
  }
  return c;
}

/// max |a - b| over max |b| (0 when both are 0): one number per output.
double relative_error(const std::vector<float>& a, const std::vector<float>& b) {
  double diff = 0, scale = 0;
  for (std::size_t k = 0; k < a.size(); ++k) {
    if (!std::isfinite(a[k]) || !std::isfinite(b[k])) {
      if (!(std::isinf(a[k]) && a[k] == b[k])) return INFINITY;
      continue;
    }
    diff = std::max(diff, std::abs(static_cast<double>(a[k]) - b[k]));
    scale = std::max(scale, std::abs(static_cast<double>(b[k])));
  }
  return scale == 0 ? diff : diff / scale;
}

double tolerance(DType compute) {
  switch (compute) {
    case DType::bf16:
      return 3e-2;  // a few bf16 ulps (2^-8 relative) after rounding and reordering
    case DType::f16:
      return 5e-3;
    default:
      return 2e-4;  // f32: summation order of long reductions
  }
}

struct Tally {
  int passed = 0, failed = 0, unsupported = 0;
};

void report(Tally& tally, const std::string& what, const std::string& status,
            const std::string& detail) {
  if (status == "ok") ++tally.passed;
  if (status == "FAIL") ++tally.failed;
  if (status == "not supported") ++tally.unsupported;
  std::cout << fmt::format("{:<58} {:<14} {}\n", what, status, detail);
}

/// The backend against the reference on one (op, dtype, round_to, dims).
void compare(Device& device, Device& reference, OpKind op, DType type, DType round_to,
             const Dims& dims, Tally& tally) {
  const std::string what = fmt::format(
      "{} {}{} {}", op_name(op), dtype_name(type),
      round_to != DType::f32 ? fmt::format(" round_to {}", dtype_name(round_to)) : "", dims.name);
  Values values(static_cast<std::uint64_t>(op) * 1000 + static_cast<std::uint64_t>(dims.seq));
  std::optional<OpCase> c;
  if (const GradPair* pair = pair_of_backward(op)) {
    auto forward = make_case(pair->forward, type, dims, values, 0.1);
    if (!forward) return;
    forward->desc.round_to = round_to;
    store_as_operand_types(*forward);
    const auto out = run_case(reference, *forward);
    const auto& y = out[static_cast<std::size_t>(pair->dy_of)];
    const HostValues dy = floats(DType::f32, y.shape, values.uniform(element_count(y.shape)));
    c = backward_case(*pair, *forward, out, dy, false);
  } else {
    c = make_case(op, type, dims, values, 0.1);
    if (!c) return;
    c->desc.round_to = round_to;
  }
  store_as_operand_types(*c);
  std::vector<HostValues> got, want;
  try {
    got = run_case(device, *c);
  } catch (const KernelNotFoundError& e) {
    report(tally, what, "not supported", e.what());
    return;
  }
  want = run_case(reference, *c);
  const DType compute = round_to != DType::f32 ? round_to : type;
  double worst = 0;
  for (std::size_t j = 0; j < got.size(); ++j) {
    worst = std::max(worst, relative_error(as_floats(got[j]), as_floats(want[j])));
  }
  const double tol = tolerance(compute);
  report(tally, what, worst <= tol ? "ok" : "FAIL",
         fmt::format("max rel err {:.2e} (tol {:.0e})", worst, tol));
}

/// A backward op on the backend against central differences of its forward
/// op on the backend: L = sum(dY * Y), dL/dx for a few elements of each
/// input it differentiates. f32, small shapes.
void finite_differences(Device& device, const GradPair& pair, const Dims& dims, Tally& tally) {
  const std::string what =
      fmt::format("{} f32 {} vs finite differences", op_name(pair.backward), dims.name);
  Values values(77 + static_cast<std::uint64_t>(pair.backward));
  auto forward = make_case(pair.forward, DType::f32, dims, values, 0.25);
  if (!forward) return;
  std::vector<HostValues> out, grads;
  std::vector<float> dy_values;
  try {
    out = run_case(device, *forward);
    const auto& y = out[static_cast<std::size_t>(pair.dy_of)];
    dy_values = values.uniform(element_count(y.shape));
    const HostValues dy = floats(DType::f32, y.shape, dy_values);
    grads = run_case(device, backward_case(pair, *forward, out, dy, true));
  } catch (const KernelNotFoundError& e) {
    report(tally, what, "not supported", e.what());
    return;
  }
  const auto loss = [&](const OpCase& c) {
    const auto yv = as_floats(run_case(device, c)[static_cast<std::size_t>(pair.dy_of)]);
    double sum = 0;
    for (std::size_t k = 0; k < yv.size(); ++k) sum += static_cast<double>(yv[k]) * dy_values[k];
    return sum;
  };
  double worst = 0;
  for (std::size_t g = 0; g < pair.gradient_of.size(); ++g) {
    const auto input = static_cast<std::size_t>(pair.gradient_of[g]);
    const auto analytic = as_floats(grads[g]);
    double scale = 0;
    for (float a : analytic) scale = std::max(scale, std::abs(static_cast<double>(a)));
    const Shape shape = forward->inputs[input].shape;
    const auto base = as_floats(forward->inputs[input]);
    const std::size_t n = base.size();
    for (std::size_t probe = 0; probe < 6 && probe < n; ++probe) {
      const std::size_t k = (probe * 7919 + 13) % n;
      const float eps = 1e-2f * std::max(1.0f, std::abs(base[k]));
      OpCase plus = *forward, minus = *forward;
      auto up = base, down = base;
      up[k] += eps;
      down[k] -= eps;
      plus.inputs[input] = floats(DType::f32, shape, up);
      minus.inputs[input] = floats(DType::f32, shape, down);
      const double numeric = (loss(plus) - loss(minus)) / (2.0 * eps);
      worst = std::max(worst, std::abs(numeric - analytic[k]) / std::max(scale, 1e-3));
    }
  }
  constexpr double kTolerance = 2e-2;  // central differences in f32 with eps 1e-2
  report(tally, what, worst <= kTolerance ? "ok" : "FAIL",
         fmt::format("max err {:.2e} of the gradient's scale (tol {:.0e})", worst, kTolerance));
}

/// The backend a plugin file gives, or the one called `name` where polyhal
/// finds plugins (docs/plugin-authors.md): POLYHAL_PLUGIN_PATH, then the
/// install directory beside this program, then /usr/local's.
std::shared_ptr<Backend> load_backend(const std::string& name_or_file) {
  if (name_or_file.ends_with(".so") || name_or_file.find('/') != std::string::npos)
    return PluginLoader::load_file(std::filesystem::absolute(name_or_file), false, nullptr);
  PluginSearchOptions search;
  search.executable_dir = std::filesystem::read_symlink("/proc/self/exe").parent_path();
  search.only_backend = name_or_file;
  return PluginLoader(search).backend(name_or_file);
}

int run(const std::string& plugin, bool quick) {
  const auto backend_owner = load_backend(plugin);
  auto device =
      backend_owner->open_devices(resolve_device_options(backend_owner->device_options(), {}))
          .front();
  const std::string backend = backend_owner->name();
  ReferenceDevice reference;
  // BERT-base at seq 128 (batch 2), then odd sizes: n tokens of hidden n.
  std::vector<Dims> shapes{{"bert-base b2 s128", 2, 128, 768, 12, 3072, 30522}};
  for (std::int64_t n : {1, 3, 17, 129}) {
    shapes.push_back({fmt::format("n={}", n), 1, n, n, 1, n + 2, n + 5});
  }
  if (quick) shapes.erase(shapes.begin());
  Tally tally;
  std::cout << fmt::format("op conformance: {} ({}) against the reference kernels\n",
                           device->name(), device->properties().product);
  for (const OpKind op : all_op_kinds()) {
    // Cost model only: no kernel runs them.
    if (is_cost_only(op)) continue;
    for (const DType type : reference.kernels().dtypes_for(op)) {
      if (device->kernels().find(op, type) == nullptr) {
        report(tally, fmt::format("{} {}", op_name(op), dtype_name(type)), "not supported",
               "the backend registers no such kernel");
        continue;
      }
      std::vector<DType> roundings{DType::f32};
      // Training ops are f32 tensors with mixed precision as rounding.
      if (type == DType::f32 && !is_inference_op(op)) {
        for (const DType low : {DType::bf16, DType::f16}) {
          if (device->supports(low)) roundings.push_back(low);
        }
      }
      for (const DType round_to : roundings) {
        for (const auto& dims : shapes) {
          try {
            compare(*device, reference, op, type, round_to, dims, tally);
          } catch (const std::exception& e) {
            report(tally, fmt::format("{} {} {}", op_name(op), dtype_name(type), dims.name), "FAIL",
                   e.what());
          }
        }
      }
    }
  }
  for (const auto& pair : grad_pairs()) {
    for (const auto& dims : {shapes[shapes.size() - 3], shapes[shapes.size() - 2]}) {
      try {
        finite_differences(*device, pair, dims, tally);
      } catch (const std::exception& e) {
        report(tally, fmt::format("{} finite differences {}", op_name(pair.backward), dims.name),
               "FAIL", e.what());
      }
    }
  }
  std::cout << fmt::format("{}: {} ok, {} failed, {} not supported\n", backend, tally.passed,
                           tally.failed, tally.unsupported);
  return tally.failed == 0 ? 0 : 1;
}

}  // namespace
}  // namespace polyhal

int main(int argc, char** argv) {
  const std::string usage =
      "usage: polyhal-op-conformance BACKEND|PLUGIN.so [--quick]\n"
      "Runs every (op, dtype) the backend registers against polyhal's reference kernels, and\n"
      "every backward op against finite differences. --quick leaves out the BERT-base shapes.\n"
      "Exit codes: 0 every case passed, 1 a case failed, 2 bad usage, 3 no such plugin.\n";
  const bool help = argc == 2 && (std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h");
  if (help) {
    std::cout << usage;
    return 0;
  }
  const bool quick = argc == 3 && std::string(argv[2]) == "--quick";
  if (argc < 2 || argc > 3 || (argc == 3 && !quick) || std::string(argv[1]).starts_with("-")) {
    std::cerr << usage;
    return 2;
  }
  try {
    return polyhal::run(argv[1], quick);
  } catch (const polyhal::Error& e) {
    std::cerr << "polyhal-op-conformance: " << e.what() << "\n";
    return static_cast<int>(e.exit_code());
  } catch (const std::exception& e) {
    std::cerr << "polyhal-op-conformance: " << e.what() << "\n";
    return 1;
  }
}
