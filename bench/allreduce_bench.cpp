// All-reduce bus bandwidth of polyhal's collective engines, 1 KiB to 256 MiB
// of f32, against a plain memcpy of the same size measured in the same run.
//
//   build/bench/polyhal_allreduce_bench --engine local --ranks 2
//   mpirun -np 2 build/bench/polyhal_allreduce_bench --engine mpi
//
// Bus bandwidth follows NCCL's convention: size / time x 2(n-1)/n, the rate
// each rank's link must carry for a ring all-reduce, comparable across rank
// counts. Prints a Markdown table (rank 0 only).
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "polyhal/app/mpi_collective.hpp"
#include "polyhal/collective.hpp"

namespace {

using clock_type = std::chrono::steady_clock;

/// Repetitions so that each size runs for a while but the big ones finish.
int repetitions(std::size_t bytes) {
  return static_cast<int>(
      std::clamp<std::size_t>((256u << 20) / std::max<std::size_t>(bytes, 1), 3, 2000));
}

double seconds_since(clock_type::time_point start) {
  return std::chrono::duration<double>(clock_type::now() - start).count();
}

/// Best-of time of one memcpy of `bytes` (source and destination touched first).
double memcpy_seconds(std::size_t bytes) {
  std::vector<char> a(bytes, 1), b(bytes, 2);
  double best = 1e30;
  const int reps = repetitions(bytes);
  for (int i = 0; i < reps; ++i) {
    const auto start = clock_type::now();
    std::memcpy(b.data(), a.data(), bytes);
    best = std::min(best, seconds_since(start));
  }
  return best;
}

/// Best-of time of one all-reduce of `bytes` of f32 on `comm` (every rank
/// calls with the same size; a barrier before each timed call).
double all_reduce_seconds(polyhal::Communicator& comm, std::size_t bytes) {
  std::vector<float> data(bytes / sizeof(float), 1.0f);
  double best = 1e30;
  const int reps = repetitions(bytes);
  for (int i = 0; i < reps; ++i) {
    comm.barrier();
    const auto start = clock_type::now();
    comm.all_reduce(data.data(), data.size(), polyhal::DType::f32, polyhal::ReduceOp::sum);
    best = std::min(best, seconds_since(start));
  }
  return best;
}

std::vector<std::size_t> sizes() {
  std::vector<std::size_t> out;
  for (std::size_t s = 1024; s <= (256u << 20); s *= 4) out.push_back(s);
  return out;
}

std::string size_text(std::size_t bytes) {
  if (bytes >= (1u << 20)) return fmt::format("{} MiB", bytes >> 20);
  return fmt::format("{} KiB", bytes >> 10);
}

/// Runs the sweep with `comm` of this rank; rank 0 prints.
void sweep(polyhal::Communicator& comm, const std::string& engine) {
  const int n = comm.size();
  const double ring = 2.0 * (n - 1) / n;
  if (comm.rank() == 0) {
    fmt::print("all-reduce f32 sum, engine {}, {} ranks (best of N; GB/s = 1e9 B/s)\n\n", engine,
               n);
    fmt::print("| size | memcpy GB/s | all-reduce bus GB/s | bus / memcpy |\n|---|---|---|---|\n");
  }
  for (std::size_t bytes : sizes()) {
    const double copy = comm.rank() == 0 ? memcpy_seconds(bytes) : 0.0;
    comm.barrier();
    const double reduce = all_reduce_seconds(comm, bytes);
    if (comm.rank() == 0) {
      const double copy_bw = static_cast<double>(bytes) / copy / 1e9;
      const double bus_bw = static_cast<double>(bytes) / reduce / 1e9 * ring;
      fmt::print("| {} | {:.2f} | {:.2f} | {:.0f}% |\n", size_text(bytes), copy_bw, bus_bw,
                 100.0 * bus_bw / copy_bw);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::string engine = "local";
  int ranks = 2;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--engine" && i + 1 < argc)
      engine = argv[++i];
    else if (arg == "--ranks" && i + 1 < argc)
      ranks = std::stoi(argv[++i]);
    else {
      fmt::print(stderr, "usage: {} [--engine local|mpi] [--ranks N]\n", argv[0]);
      return 2;
    }
  }
  if (engine == "mpi") {
    polyhal::MpiRuntime mpi;
    auto comm = polyhal::make_mpi_communicator(mpi, std::chrono::minutes(5));
    sweep(*comm, "mpi (Open MPI)");
    return 0;
  }
  polyhal::InProcessGroup group(ranks);
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r) {
    threads.emplace_back([&, r] {
      auto comm = group.communicator(r);
      sweep(*comm, "local (threads of one process)");
    });
  }
  for (auto& t : threads) t.join();
  return 0;
}
