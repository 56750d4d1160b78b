// GroupBERT's ops against PyTorch (tests/golden/make_groupbert_ops_golden.py):
// the grouped dense as torch's grouped Conv1d, the sequence convolution as
// Conv1d over each sequence of plain and packed rows, GLU and swish, forward
// and every gradient, in f32 on every backend.
#include <gtest/gtest.h>

#include <cmath>

#include "polyhal/app/safetensors.hpp"
#include "polyhal/kernel.hpp"
#include "polyhal/train_kernels.hpp"
#include "test_support.hpp"

namespace polyhal {
namespace {

const TensorMap& golden() {
  static const TensorMap values =
      read_safetensors(test::golden_dir().parent_path() / "groupbert/ops.safetensors");
  return values;
}

class GroupBertOps : public ::testing::TestWithParam<std::string> {
 protected:
  Tensor upload(const std::string& name, bool as_ints = false) {
    const HostTensor& h = golden().at(name);
    if (as_ints) {
      const auto ints = test::as_ints(h);
      Tensor t = device_->allocate_tensor(DType::i32, h.shape, name);
      device_->copy_from_host(*t.buffer, ints.data(), t.bytes());
      return t;
    }
    Tensor t = device_->allocate_tensor(DType::f32, h.shape, name);
    device_->copy_from_host(*t.buffer, h.values.data(), t.bytes());
    return t;
  }
  /// A zeroed f32 tensor shaped like golden tensor `like` ("+=" outputs start at 0).
  Tensor zeros(const std::string& like) {
    const HostTensor& h = golden().at(like);
    const std::vector<float> z(h.values.size());
    Tensor t = device_->allocate_tensor(DType::f32, h.shape, like);
    device_->copy_from_host(*t.buffer, z.data(), t.bytes());
    return t;
  }
  void run(OpKind op, OpAttrs attrs, const std::vector<Tensor>& inputs,
           const std::vector<Tensor>& outputs) {
    KernelDesc desc{op, DType::f32, {}, attrs};
    for (const auto& t : inputs) desc.input_shapes.push_back(t.shape);
    device_->prepare_kernel(desc)->run(inputs, outputs);
  }
  void expect_golden(const Tensor& got, const std::string& name) {
    const HostTensor& want = golden().at(name);
    std::vector<float> values(want.values.size());
    device_->copy_to_host(values.data(), *got.buffer, got.bytes());
    float scale = 0;
    for (float v : want.values) scale = std::max(scale, std::fabs(v));
    for (std::size_t i = 0; i < values.size(); ++i)
      ASSERT_NEAR(values[i], want.values[i], 1e-5 * scale)
          << GetParam() << " " << name << "[" << i << "]";
  }
  std::shared_ptr<Device> device_ = test::first_device(GetParam());
};

TEST_P(GroupBertOps, GroupedDenseIsTorchsGroupedConv1d) {
  const GroupedDenseAttrs attrs{4};
  const Tensor y = zeros("grouped_dense.y");
  run(OpKind::grouped_dense, attrs,
      {upload("grouped_dense.x"), upload("grouped_dense.w"), upload("grouped_dense.b")}, {y});
  expect_golden(y, "grouped_dense.y");
  const Tensor dx = zeros("grouped_dense.dx"), dw = zeros("grouped_dense.dw"),
               db = zeros("grouped_dense.db");
  run(OpKind::grouped_dense_backward, attrs,
      {upload("grouped_dense.dy"), upload("grouped_dense.x"), upload("grouped_dense.w")},
      {dx, dw, db});
  expect_golden(dx, "grouped_dense.dx");
  expect_golden(dw, "grouped_dense.dw");
  expect_golden(db, "grouped_dense.db");
}

TEST_P(GroupBertOps, SequenceConvIsTorchsConv1dOverEachSequence) {
  const SequenceConvAttrs attrs{2, 9, 4, 5};
  const Tensor y = zeros("sequence_conv.y");
  const Tensor mask = upload("sequence_conv.mask", true);
  run(OpKind::sequence_conv, attrs, {upload("sequence_conv.x"), upload("sequence_conv.w"), mask},
      {y});
  expect_golden(y, "sequence_conv.y");
  const Tensor dx = zeros("sequence_conv.dx"), dw = zeros("sequence_conv.dw");
  run(OpKind::sequence_conv_backward, attrs,
      {upload("sequence_conv.dy"), upload("sequence_conv.x"), upload("sequence_conv.w"), mask},
      {dx, dw});
  expect_golden(dx, "sequence_conv.dx");
  expect_golden(dw, "sequence_conv.dw");
}

TEST_P(GroupBertOps, GluAndSwishAreTorchs) {
  const Tensor glu = zeros("glu.y"), dglu = zeros("glu.da");
  run(OpKind::glu, NoAttrs{}, {upload("glu.a")}, {glu});
  expect_golden(glu, "glu.y");
  run(OpKind::glu_backward, NoAttrs{}, {upload("glu.dy"), upload("glu.a")}, {dglu});
  expect_golden(dglu, "glu.da");
  const Tensor swish = zeros("swish.y"), dswish = zeros("swish.dx");
  run(OpKind::swish, NoAttrs{}, {upload("swish.x")}, {swish});
  expect_golden(swish, "swish.y");
  run(OpKind::swish_backward, NoAttrs{}, {upload("swish.dy"), upload("swish.x")}, {dswish});
  expect_golden(dswish, "swish.dx");
}

INSTANTIATE_TEST_SUITE_P(EveryBackend, GroupBertOps, ::testing::Values("cpu", "ipu", "gaudi"));

}  // namespace
}  // namespace polyhal
