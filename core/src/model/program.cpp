#include "model/program.hpp"

#include <malloc.h>

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <stdexcept>

#include "polyhal/app/tensor_limit.hpp"
#include "polyhal/error.hpp"
#include "polyhal/train_kernels.hpp"

namespace polyhal {

int Program::tensor(const std::string& name, const std::string& category, Shape shape, DType type) {
  Slot slot;
  slot.name = name;
  slot.category = category;
  slot.dtype = type;
  slot.shape = std::move(shape);
  slots_.push_back(std::move(slot));
  return static_cast<int>(slots_.size()) - 1;
}

int Program::activation(const std::string& name, Shape shape, bool transient) {
  const int t = tensor(name, "activations", std::move(shape), DType::f32);
  at(t).typed = false;
  at(t).transient = transient;
  return t;
}

void Program::set_recomputed(int t) {
  at(t).transient = true;
  at(t).recomputed = true;
}

void Program::repeat_in_backward(std::size_t first, std::size_t last) {
  const auto& forward = list(Phase::forward);
  if (first > last || last > forward.size())
    throw std::logic_error("Program::repeat_in_backward: bad op range");
  auto& backward = list(Phase::backward);
  const std::vector<Op> copies(forward.begin() + static_cast<std::ptrdiff_t>(first),
                               forward.begin() + static_cast<std::ptrdiff_t>(last));
  backward.insert(backward.end(), copies.begin(), copies.end());
}

int Program::view(int of, std::int64_t begin, std::int64_t rows, const std::string& name) {
  Slot v = at(of);
  v.name = name;
  v.view_of = of;
  v.view_begin = begin;
  v.shape[0] = rows;
  v.tensor = {};
  slots_.push_back(std::move(v));
  return static_cast<int>(slots_.size()) - 1;
}

int Program::compute_copy(int master) {
  if (precision_ == DType::f32) return master;
  if (auto it = compute_copies_.find(master); it != compute_copies_.end()) return it->second;
  const int copy =
      tensor(name(master) + " (compute copy)", "weights (compute copy)", shape(master), precision_);
  op(Phase::refresh, OpKind::cast, {master}, {copy});
  compute_copies_[master] = copy;
  return copy;
}

std::optional<int> Program::compute_copy_rows(int weight) {
  const Slot& w = at(weight);
  const int master = w.view_of >= 0 ? w.view_of : weight;
  const auto it = compute_copies_.find(master);
  if (it == compute_copies_.end()) return std::nullopt;
  if (w.view_of < 0) return it->second;
  return view(it->second, w.view_begin, w.shape[0], w.name + " (compute copy)");
}

void Program::set_elsewhere(int t, bool elsewhere) {
  if (allocated_) throw std::logic_error("Program: set_elsewhere after allocate");
  at(t).elsewhere = elsewhere;
}

void Program::op(Phase phase, OpKind kind, std::vector<int> inputs, std::vector<int> outputs,
                 OpAttrs attrs, std::vector<int> constants) {
  KernelDesc desc{kind, DType::f32, {}, std::move(attrs), precision_};
  if (is_inference_op(kind)) {  // computes in its dtype
    desc.dtype = precision_;
    desc.round_to = DType::f32;
  }
  if (kind == OpKind::dense || kind == OpKind::dense_backward) desc.products = products_;
  for (int i : inputs) desc.input_shapes.push_back(shape(i));
  // A linear's desc lists its input rows only (kernel.hpp): the fused
  // residual has the output's shape.
  if (kind == OpKind::linear) desc.input_shapes.resize(1);
  device_.check_kernel(desc);
  list(phase).push_back({std::move(desc),
                         std::move(inputs),
                         std::move(outputs),
                         std::move(constants),
                         nullptr,
                         {},
                         {},
                         0,
                         0});
}

int Program::side_kernel(KernelDesc desc) {
  device_.check_kernel(desc);
  side_kernels_.push_back({std::move(desc), nullptr});
  return static_cast<int>(side_kernels_.size()) - 1;
}

void Program::finish() {
  // Before anything sizes, plans or prepares them. On hardware (the host's
  // oneDNN kernels); a device model plans any size and says if it fits.
  if (device_.properties().mode != DeviceMode::model)
    for (const auto& s : slots_) check_tensor_size(s.name, s.shape);
  const auto give = [&](int index, DType type, const Op& op) {
    Slot& s = at(index);
    if (s.view_of >= 0) return;  // a view has its tensor's dtype
    if (!s.typed) {
      s.dtype = type;
      s.typed = true;
    } else if (s.dtype != type) {
      throw std::logic_error(fmt::format("program: '{}' is {} but {} stores it as {}", s.name,
                                         dtype_name(s.dtype), op_name(op.desc.op),
                                         dtype_name(type)));
    }
  };
  for (const auto& ops : lists_) {
    for (const auto& op : ops) {
      const OperandTypes storage = operand_types(op.desc);
      for (std::size_t k = 0; k < op.inputs.size(); ++k)
        give(op.inputs[k], storage.inputs.at(k), op);
      for (std::size_t k = 0; k < op.outputs.size(); ++k)
        give(op.outputs[k], storage.outputs.at(k), op);
    }
  }
  for (auto& s : slots_) s.typed = true;  // read by no op (a norm's output): f32
  share_transient_memory();
}

void Program::share_transient_memory() {
  // Position of every op in the run order (forward, then backward), and for
  // each transient tensor the spans where it must hold its value: from its
  // first to its last use, or for a recomputed tensor one such span per
  // phase (backward writes it again before reading it).
  using Span = std::pair<std::size_t, std::size_t>;
  std::map<int, std::vector<Span>> live;
  std::size_t position = 0;
  for (const Phase phase : {Phase::forward, Phase::backward}) {
    for (const auto& op : list(phase)) {
      for (const auto* operands : {&op.inputs, &op.outputs}) {
        for (int t : *operands) {
          if (!at(t).transient) continue;
          auto& spans = live[t];
          const bool new_phase = at(t).recomputed && phase == Phase::backward && !spans.empty() &&
                                 spans.back().second < op_count(Phase::forward);
          if (spans.empty() || new_phase) {
            spans.emplace_back(position, position);
          } else {
            spans.back().second = position;
          }
        }
      }
      ++position;
    }
  }
  std::vector<std::pair<std::size_t, int>> by_start;
  for (const auto& [t, spans] : live) by_start.emplace_back(spans.front().first, t);
  std::sort(by_start.begin(), by_start.end());
  struct Shared {
    int slot;
    std::vector<Span> busy;  // the spans of every tensor placed in it
  };
  const auto overlaps = [](const std::vector<Span>& a, const std::vector<Span>& b) {
    for (const auto& x : a)
      for (const auto& y : b)
        if (x.first <= y.second && y.first <= x.second) return true;
    return false;
  };
  std::vector<Shared> buffers;
  for (const auto& [start, t] : by_start) {
    const auto& spans = live.at(t);
    Shared* reuse = nullptr;
    for (auto& b : buffers) {
      if (at(b.slot).shape == at(t).shape && at(b.slot).dtype == at(t).dtype &&
          !overlaps(b.busy, spans)) {
        reuse = &b;
        break;
      }
    }
    if (reuse == nullptr) {
      buffers.push_back({t, spans});
      continue;
    }
    Slot& s = at(t);  // the whole of the buffer: a view of all its rows
    s.view_of = reuse->slot;
    s.view_begin = 0;
    reuse->busy.insert(reuse->busy.end(), spans.begin(), spans.end());
  }
}

std::vector<MemoryItem> Program::memory_items() const {
  std::map<std::pair<std::string, DType>, std::uint64_t> bytes;
  for (const auto& s : slots_) {
    if (s.view_of >= 0 || s.elsewhere) continue;
    bytes[{s.category, s.dtype}] +=
        static_cast<std::uint64_t>(element_count(s.shape)) * dtype_size(s.dtype);
  }
  std::vector<MemoryItem> items;
  for (const auto& [key, total] : bytes)
    items.push_back({key.first, std::string(dtype_name(key.second)), total});
  return items;
}

std::optional<double> Program::estimate_seconds(Phase phase) const {
  double total = 0;
  for (const auto& op : lists_[static_cast<std::size_t>(phase)]) {
    const auto seconds = device_.estimate_seconds(op.desc);
    if (!seconds) return std::nullopt;
    total += *seconds;
  }
  return total;
}

nlohmann::json Program::op_trace_args(const Op& op) const {
  nlohmann::json args = {{"op", op_name(op.desc.op)},
                         {"output", op.outputs.empty() ? "" : name(op.outputs.front())},
                         {"kernel", op.desc.to_string()},
                         {"dtype", dtype_name(op.desc.dtype)}};
  if (op.desc.round_to != DType::f32) args["stored_as"] = dtype_name(op.desc.round_to);
  if (op.kernel) args["implementation"] = op.kernel->implementation();
  return args;
}

std::optional<std::vector<EstimatedSlice>> Program::estimated_ops(Phase phase) const {
  std::vector<EstimatedSlice> ops;
  for (const auto& op : lists_[static_cast<std::size_t>(phase)]) {
    const auto seconds = device_.estimate_seconds(op.desc);
    if (!seconds) return std::nullopt;
    ops.push_back({std::string(op_name(op.desc.op)), op_trace_args(op), *seconds});
  }
  return ops;
}

std::optional<double> Program::estimate_side_seconds() const {
  double total = 0;
  for (const auto& side : side_kernels_) {
    const auto seconds = device_.estimate_seconds(side.desc);
    if (!seconds) return std::nullopt;
    total += *seconds;
  }
  return total;
}

void Program::allocate(const std::map<int, Tensor>& given) {
  if (allocated_) return;
  prepare_kernels();
  for (const auto& [t, tensor] : given)
    if (at(t).view_of >= 0 || tensor.dtype != at(t).dtype || tensor.shape != at(t).shape)
      throw std::logic_error(
          fmt::format("Program: tensor {} given with another dtype or shape", at(t).name));
  for (std::size_t i = 0; i < slots_.size(); ++i) {
    auto& s = slots_[i];
    if (const auto it = given.find(static_cast<int>(i)); it != given.end())
      s.tensor = it->second;
    else if (s.view_of < 0 && !s.elsewhere)
      s.tensor = device_.allocate_tensor(s.dtype, s.shape, s.name);
  }
  for (auto& s : slots_) {
    if (s.view_of >= 0) s.tensor = row_slice(at(s.view_of).tensor, s.view_begin, s.shape[0]);
  }
  for (auto& ops : lists_) {
    for (auto& op : ops) {
      for (int i : op.inputs) op.bound_inputs.push_back(at(i).tensor);
      for (int o : op.outputs) op.bound_outputs.push_back(at(o).tensor);
    }
  }
  allocated_ = true;
}

std::map<int, Tensor> Program::rows_of(const Program& larger) const {
  if (!larger.allocated_) throw std::logic_error("Program::rows_of a program not allocated");
  std::map<int, Tensor> rows;
  for (std::size_t i = 0; i < slots_.size() && i < larger.slots_.size(); ++i) {
    const Slot& mine = slots_[i];
    const Slot& theirs = larger.slots_[i];
    if (mine.category != "activations" && mine.category != "inputs") continue;
    if (mine.view_of >= 0 || mine.elsewhere || theirs.view_of >= 0 || theirs.elsewhere ||
        mine.name != theirs.name || mine.dtype != theirs.dtype || mine.shape.empty() ||
        mine.shape.size() != theirs.shape.size() || mine.shape[0] > theirs.shape[0] ||
        !std::equal(mine.shape.begin() + 1, mine.shape.end(), theirs.shape.begin() + 1))
      continue;
    rows[static_cast<int>(i)] = row_slice(theirs.tensor, 0, mine.shape[0]);
  }
  return rows;
}

void Program::bind_constants() {
  if (!allocated_) throw std::logic_error("Program: bind_constants before allocate");
  for (auto& ops : lists_) {
    for (auto& op : ops) {
      if (op.constants.empty()) continue;
      std::vector<Tensor> constants;
      for (int c : op.constants) constants.push_back(at(c).tensor);
      op.kernel->set_constants(constants);
    }
  }
}

void Program::run(Phase phase, const std::function<void(std::size_t)>& before_op) {
  auto& ops = list(phase);
  static constexpr const char* kPhaseNames[] = {"forward", "backward", "refresh weight copies"};
  TraceTrack* const trace = trace_ && trace_->recording() ? trace_ : nullptr;
  const TraceTrack::Scope phase_slice(trace, kPhaseNames[static_cast<std::size_t>(phase)], "phase");
  for (std::size_t i = 0; i < ops.size(); ++i) {
    auto& op = ops[i];
    if (before_op) before_op(i);
    const auto start = std::chrono::steady_clock::now();
    op.kernel->run(op.bound_inputs, op.bound_outputs);
    const auto end = std::chrono::steady_clock::now();
    op.seconds += std::chrono::duration<double>(end - start).count();
    ++op.calls;
    if (trace)
      trace->slice(std::string(op_name(op.desc.op)), "kernel", start, end, op_trace_args(op));
  }
}

std::map<std::string, OpTime> Program::profile() const {
  std::map<std::string, OpTime> by_op;
  for (const auto& ops : lists_) {
    for (const auto& op : ops) {
      std::string name(op_name(op.desc.op));
      // int8, bf32 and f16-product linears run other kernels than the bf16/f32 ones.
      if (const auto* linear = std::get_if<LinearAttrs>(&op.desc.attrs);
          linear != nullptr && linear->math != LinearMath::native)
        name += fmt::format(" ({})", linear->math == LinearMath::int8            ? "int8"
                                     : linear->math == LinearMath::bf16_products ? "bf32"
                                                                                 : "f16 products");
      auto& t = by_op[name];
      if (t.op.empty()) t = {name, op.kernel ? op.kernel->implementation() : "not prepared", 0, 0};
      t.calls += op.calls;
      t.seconds += op.seconds;
    }
  }
  return by_op;
}

void Program::upload_bytes(int t, const void* data, std::size_t element, std::size_t count) {
  const Slot& s = at(t);
  if (element != dtype_size(s.tensor.dtype)) {
    throw std::logic_error(fmt::format("{}: host values of {} bytes for a {} tensor", s.name,
                                       element, dtype_name(s.tensor.dtype)));
  }
  if (count != static_cast<std::size_t>(s.tensor.numel())) {
    throw RuntimeFailure(
        fmt::format("{}: expected {} values, got {}", s.name, s.tensor.numel(), count));
  }
  device_.copy_from_host(*s.tensor.buffer, data, s.tensor.bytes());
}

void Program::upload_floats(int t, const std::vector<float>& values) {
  const Tensor& tensor = at(t).tensor;
  if (values.size() != static_cast<std::size_t>(tensor.numel())) {
    throw RuntimeFailure(
        fmt::format("{}: expected {} values, got {}", name(t), tensor.numel(), values.size()));
  }
  std::vector<std::byte> staging(tensor.bytes());
  convert(values.data(), DType::f32, staging.data(), tensor.dtype, values.size());
  device_.copy_from_host(*tensor.buffer, staging.data(), staging.size());
}

std::vector<float> Program::read_floats(int t) const {
  const Tensor& tensor = at(t).tensor;
  std::vector<std::byte> staging(tensor.bytes());
  device_.copy_to_host(staging.data(), *tensor.buffer, staging.size());
  std::vector<float> out(static_cast<std::size_t>(tensor.numel()));
  convert(staging.data(), tensor.dtype, out.data(), DType::f32, out.size());
  return out;
}

void Program::prepare_kernels() {
  if (prepared_) return;
  // Ops with equal descs (the same op at the same shapes in every encoder
  // layer) share one kernel: they run one after another, and preparing
  // (oneDNN primitive creation, scratch) once instead of once per layer
  // saves time and memory. An op with constants owns its kernel (the
  // constants are bound into it).
  std::vector<std::pair<KernelDesc, std::shared_ptr<Kernel>>> shared;
  const auto kernel_for = [&](const KernelDesc& desc) {
    for (const auto& [known, kernel] : shared) {
      if (known == desc) return kernel;
    }
    shared.emplace_back(desc, device_.prepare_kernel(desc));
    return shared.back().second;
  };
  for (auto& ops : lists_) {
    for (auto& op : ops) {
      op.kernel = op.constants.empty() ? kernel_for(op.desc) : device_.prepare_kernel(op.desc);
    }
  }
  for (auto& side : side_kernels_) side.kernel = kernel_for(side.desc);
  prepared_ = true;
}

std::vector<MemoryItem> Program::kernel_memory_items() const {
  if (device_.properties().mode == DeviceMode::model) return {};
  // How many kernels allocate() makes per desc: one for the ops that share,
  // plus one per op with constants.
  std::vector<std::pair<KernelDesc, std::uint64_t>> kernels;
  std::vector<KernelDesc> shared;
  const auto count = [&](const KernelDesc& desc, bool owns) {
    if (!owns) {
      if (std::find(shared.begin(), shared.end(), desc) != shared.end()) return;
      shared.push_back(desc);
    }
    for (auto& [known, n] : kernels) {
      if (known == desc) {
        ++n;
        return;
      }
    }
    kernels.emplace_back(desc, 1);
  };
  for (const auto& ops : lists_)
    for (const auto& op : ops) count(op.desc, !op.constants.empty());
  for (const auto& side : side_kernels_) count(side.desc, false);
  // What a kernel holds: what it reports, or what the heap grew by while it
  // was prepared (oneDNN's buffers and a kernel's own vectors, which not
  // every kernel reports), whichever is larger. The host device runs
  // nothing else meanwhile, so the growth is the kernel's.
  const auto heap_in_use = [] {
    const struct mallinfo2 info = ::mallinfo2();
    return static_cast<std::uint64_t>(info.uordblks) + static_cast<std::uint64_t>(info.hblkhd);
  };
  std::map<std::string, std::uint64_t> by_op;
  for (const auto& [desc, n] : kernels) {
    const std::uint64_t before = heap_in_use();
    const auto kernel = device_.prepare_kernel(desc);
    const std::uint64_t grown = heap_in_use() - std::min(before, heap_in_use());
    by_op[std::string(op_name(desc.op))] += std::max(kernel->workspace_bytes(), grown) * n;
  }
  std::vector<MemoryItem> items;
  for (const auto& [op, bytes] : by_op) {
    if (bytes > 0) items.push_back({"kernel memory", op, bytes});
  }
  return items;
}

MemoryReport Program::plan_memory(std::vector<MemoryItem> items) const {
  MemoryReport without_kernels = device_.plan_memory(items);
  if (!without_kernels.fits) {
    without_kernels.notes.push_back(
        "kernel scratch not counted: the tensors alone do not fit (no kernel was prepared)");
    return without_kernels;
  }
  const auto kernels = kernel_memory_items();
  items.insert(items.end(), kernels.begin(), kernels.end());
  return device_.plan_memory(items);
}

namespace {

bool stashed(const std::string& category, bool transient, bool view, bool elsewhere) {
  return (category == "activations" || category == "inputs") && !transient && !view && !elsewhere;
}

}  // namespace

std::vector<std::vector<std::byte>> Program::stash() const {
  std::vector<std::vector<std::byte>> saved;
  for (const auto& s : slots_) {
    if (!stashed(s.category, s.transient, s.view_of >= 0, s.elsewhere)) continue;
    saved.emplace_back(s.tensor.bytes());
    device_.copy_to_host(saved.back().data(), *s.tensor.buffer, saved.back().size());
  }
  return saved;
}

std::uint64_t Program::stash_bytes() const {
  std::uint64_t bytes = 0;
  for (const auto& s : slots_) {
    if (stashed(s.category, s.transient, s.view_of >= 0, s.elsewhere))
      bytes += static_cast<std::uint64_t>(element_count(s.shape)) * dtype_size(s.dtype);
  }
  return bytes;
}

void Program::unstash(const std::vector<std::vector<std::byte>>& saved) {
  std::size_t next = 0;
  for (const auto& s : slots_) {
    if (!stashed(s.category, s.transient, s.view_of >= 0, s.elsewhere)) continue;
    if (next >= saved.size() || saved[next].size() != s.tensor.bytes())
      throw std::logic_error("Program::unstash: not this program's stash");
    device_.copy_from_host(*s.tensor.buffer, saved[next].data(), saved[next].size());
    ++next;
  }
}

std::vector<float> Program::download(int t) const {
  if (!allocated_) throw std::logic_error(fmt::format("{}: download before allocate", name(t)));
  const Tensor& tensor = at(t).tensor;
  if (tensor.dtype != DType::f32)
    throw std::logic_error(
        fmt::format("{}: download of a {} tensor", name(t), dtype_name(tensor.dtype)));
  std::vector<float> out(static_cast<std::size_t>(tensor.numel()));
  device_.copy_to_host(out.data(), *tensor.buffer, tensor.bytes());
  return out;
}

std::optional<std::size_t> Program::last_writer(Phase phase, int t) const {
  const auto& ops = lists_[static_cast<std::size_t>(phase)];
  for (std::size_t i = ops.size(); i-- > 0;) {
    for (const int out : ops[i].outputs)
      if (out == t || at(out).view_of == t) return i;
  }
  return std::nullopt;
}

void Program::zero(int t) {
  upload_floats(t, std::vector<float>(static_cast<std::size_t>(element_count(shape(t)))));
}

}  // namespace polyhal
