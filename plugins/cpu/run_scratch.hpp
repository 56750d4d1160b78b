#pragma once
// Memory a kernel needs only when it runs. Kernels are prepared at plan time
// (validate, --compile-only, the memory plan): preparing must not allocate
// what grows with the batch, or planning a batch that cannot fit would take
// the memory the plan reports missing. Such memory is made here without
// storage; run() calls ensure() first, and bytes() is what it will hold, for
// the kernel's workspace_bytes() and so for the memory plan.
#include <cstdint>
#include <vector>

#include <oneapi/dnnl/dnnl.hpp>

#include "aligned_bytes.hpp"

namespace polyhal::cpu {

class RunScratch {
 public:
  /// A memory of `md` whose storage comes at the first ensure().
  dnnl::memory add(const dnnl::memory::desc& md, const dnnl::engine& engine) {
    dnnl::memory memory(md, engine, DNNL_MEMORY_NONE);
    pending_.push_back(memory);
    bytes_ += md.get_size();
    return memory;
  }
  /// Gives every memory added so far its storage (once each).
  void ensure() {
    for (; done_ < pending_.size(); ++done_) {
      const std::size_t size = pending_[done_].get_desc().get_size();
      if (size == 0) continue;
      storage_.push_back(allocate_aligned(size));
      pending_[done_].set_data_handle(storage_.back().get());
    }
  }
  std::uint64_t bytes() const { return bytes_; }

 private:
  std::vector<dnnl::memory> pending_;
  std::vector<AlignedBytes> storage_;
  std::size_t done_ = 0;
  std::uint64_t bytes_ = 0;
};

}  // namespace polyhal::cpu
