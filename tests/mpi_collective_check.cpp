// Run under mpirun (tests/mpi_test.cpp does): every collective of the MPI
// engine, for f32, bf16 and f16, checked on every rank against closed-form
// results. Prints "ok" on rank 0 and exits 0, or one line per mismatch and 1.
#include <fmt/format.h>

#include <chrono>
#include <vector>

#include "polyhal/app/mpi_collective.hpp"
#include "polyhal/collective.hpp"

namespace {

using polyhal::DType;
using polyhal::ReduceOp;

int failures = 0;

void expect(bool ok, int rank, const std::string& what) {
  if (ok) return;
  ++failures;
  fmt::print("rank {}: FAIL {}\n", rank, what);
}

std::uint16_t narrow(DType type, float v) {
  return type == DType::bf16 ? polyhal::f32_to_bf16_bits(v) : polyhal::f32_to_f16_bits(v);
}
float widen(DType type, std::uint16_t b) {
  return type == DType::bf16 ? polyhal::bf16_bits_to_f32(b) : polyhal::f16_bits_to_f32(b);
}

}  // namespace

int main() {
  polyhal::MpiRuntime mpi;
  auto comm = polyhal::make_mpi_communicator(mpi, std::chrono::seconds(60));
  const int r = comm->rank(), n = comm->size();
  const auto fr = static_cast<float>(r), fn = static_cast<float>(n);
  constexpr std::size_t kCount = 1001;
  // all_reduce f32: values (r+1) * (i % 7)
  for (ReduceOp op : {ReduceOp::sum, ReduceOp::mean, ReduceOp::max}) {
    std::vector<float> data(kCount);
    for (std::size_t i = 0; i < kCount; ++i) data[i] = (fr + 1) * static_cast<float>(i % 7);
    comm->all_reduce(data.data(), kCount, DType::f32, op);
    const float ranks_sum = fn * (fn + 1) / 2;
    for (std::size_t i = 0; i < kCount; ++i) {
      const auto base = static_cast<float>(i % 7);
      const float want = op == ReduceOp::sum    ? ranks_sum * base
                         : op == ReduceOp::mean ? ranks_sum / fn * base
                                                : fn * base;
      expect(data[i] == want, r,
             fmt::format("all_reduce f32 {} [{}] = {}, want {}", polyhal::reduce_op_name(op), i,
                         data[i], want));
    }
  }
  // bf16/f16 reduced in f32, rounded once: 256 + 1 + 1 + ... exact in f32.
  for (DType type : {DType::bf16, DType::f16}) {
    std::uint16_t bits = narrow(type, r == 0 ? 256.0f : 1.0f);
    comm->all_reduce(&bits, 1, type, ReduceOp::sum);
    expect(widen(type, bits) == 256.0f + fn - 1, r,
           fmt::format("all_reduce {} sum = {}, want {}", polyhal::dtype_name(type),
                       widen(type, bits), 256.0f + fn - 1));
  }
  // reduce_scatter: block b of every rank's send is b*10 + rank.
  constexpr std::size_t kBlock = 4;
  std::vector<float> send(kBlock * static_cast<std::size_t>(n)), mine(kBlock);
  for (std::size_t i = 0; i < send.size(); ++i) send[i] = static_cast<float>(i / kBlock * 10) + fr;
  comm->reduce_scatter(send.data(), mine.data(), kBlock, DType::f32, ReduceOp::sum);
  for (float v : mine)
    expect(v == fn * fr * 10 + fn * (fn - 1) / 2, r, fmt::format("reduce_scatter = {}", v));
  // all_gather of bf16: block q is rank q's value.
  std::vector<std::uint16_t> gathered(static_cast<std::size_t>(n));
  const std::uint16_t own = narrow(DType::bf16, fr + 0.5f);
  comm->all_gather(&own, gathered.data(), 1, DType::bf16);
  for (int q = 0; q < n; ++q)
    expect(
        widen(DType::bf16, gathered[static_cast<std::size_t>(q)]) == static_cast<float>(q) + 0.5f,
        r, fmt::format("all_gather block {}", q));
  // broadcast from the last rank.
  std::vector<float> value{fr};
  comm->broadcast(value.data(), 1, DType::f32, n - 1);
  expect(value[0] == fn - 1, r, fmt::format("broadcast = {}", value[0]));
  comm->barrier();
  std::vector<float> count{static_cast<float>(failures)};
  comm->all_reduce(count.data(), 1, DType::f32, ReduceOp::sum);
  if (r == 0 && count[0] == 0) fmt::print("ok: {} ranks\n", n);
  return count[0] == 0 ? 0 : 1;
}
