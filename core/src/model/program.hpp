#pragma once
// A model as a program: a table of tensors and lists of ops over them,
// declared once and then planned (memory_items, estimate_seconds: nothing
// prepared or allocated), allocated (kernels prepared, tensors allocated,
// ops bound) and run list by list. BERT's inference and training are both
// programs (bert_program.hpp declares them); the memory plan and the
// allocation come from the same table.
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "polyhal/app/op_time.hpp"
#include "polyhal/app/step_trace.hpp"
#include "polyhal/device.hpp"
#include "polyhal/kernel.hpp"

namespace polyhal {

/// The op lists of a program, run separately.
enum class Phase : std::uint8_t {
  forward,
  backward,
  refresh,  ///< the compute copies of the weights, from the f32 masters
};

class Program {
 public:
  /// `precision`: the compute precision; training ops store activations at
  /// it (KernelDesc::round_to), inference ops compute in it (KernelDesc::dtype).
  Program(Device& device, DType precision) : device_(device), precision_(precision) {}

  Device& device() const { return device_; }
  DType precision() const { return precision_; }
  /// Training: the type dense and dense_backward round their operands to
  /// before the products (KernelDesc::products; bf16 for bf32). Set before
  /// the ops are declared.
  void set_products(DType products) { products_ = products; }

  /// A tensor of a known dtype, counted under `category` in the memory plan
  /// ("weights", "gradients", "optimizer state", "activations", "inputs").
  int tensor(const std::string& name, const std::string& category, Shape shape, DType type);
  /// An activation whose dtype its ops give (operand_types), checked to
  /// agree. A `transient` one (a gradient of an activation) shares memory
  /// with other transient tensors of its shape whose uses are over
  /// (finish() assigns them by a linear scan over the op lists).
  int activation(const std::string& name, Shape shape, bool transient = false);
  /// Recomputation: `t` (an activation) need not survive from forward to
  /// backward, because backward writes it again before reading it
  /// (repeat_in_backward). It then shares memory like a transient tensor,
  /// live only while each phase uses it.
  void set_recomputed(int t);
  /// `t` keeps memory of its own (a transient tensor the caller reads after
  /// the run, such as a pipeline stage's input gradient).
  void set_kept(int t) { at(t).transient = false; }
  /// Number of ops declared so far in `phase` (to mark a range of them).
  std::size_t op_count(Phase phase) const { return lists_[static_cast<std::size_t>(phase)].size(); }
  /// Appends copies of forward ops [first, last) to the backward list: the
  /// same kernels on the same tensors, so the same values (dropout masks are
  /// keyed by their stream, not by when they run).
  void repeat_in_backward(std::size_t first, std::size_t last);
  /// Rows [begin, begin + rows) of tensor `of`, sharing its memory.
  int view(int of, std::int64_t begin, std::int64_t rows, const std::string& name);
  /// The weight a training GEMM reads: `master` itself in f32, else its
  /// compute copy at the precision (one per master), refreshed by the
  /// Phase::refresh ops and by the optimizer's update.
  int compute_copy(int master);
  /// The compute copy of `weight` (or the same rows of its master's copy
  /// when `weight` is a view); nullopt when no GEMM reads a copy of it.
  std::optional<int> compute_copy_rows(int weight);
  /// Excluded from the plan and never allocated (optimizer state another
  /// replica holds).
  void set_elsewhere(int t, bool elsewhere);

  const std::string& name(int t) const { return at(t).name; }
  const Shape& shape(int t) const { return at(t).shape; }
  const std::string& category(int t) const { return at(t).category; }
  bool is_view(int t) const { return at(t).view_of >= 0; }
  /// The tensor a view is rows of.
  int view_base(int t) const { return at(t).view_of; }
  /// The allocated tensor (after allocate()).
  const Tensor& bound(int t) const { return at(t).tensor; }

  /// Declares an op in `phase`: checked against the device now (plan time),
  /// prepared at allocate(). Training ops (OpKind::dense and later) take
  /// dtype f32 and round_to = the precision; `constants` are tensors bound
  /// with Kernel::set_constants (inference weights).
  void op(Phase phase, OpKind op, std::vector<int> inputs, std::vector<int> outputs,
          OpAttrs attrs = NoAttrs{}, std::vector<int> constants = {});
  /// A kernel outside the op lists (optimizer updates, norms): checked now,
  /// prepared at allocate() from the same pool.
  int side_kernel(KernelDesc desc);
  /// The device's estimate of running every side kernel once, or nullopt
  /// when it gives none for one of them.
  std::optional<double> estimate_side_seconds() const;
  const std::shared_ptr<Kernel>& side(int index) const {
    return side_kernels_[static_cast<std::size_t>(index)].kernel;
  }

  /// Ends the declaration: every activation gets its storage dtype.
  void finish();
  /// The plan: one item per (category, dtype), from the table.
  std::vector<MemoryItem> memory_items() const;
  /// Sum of the device's estimates over the ops of `phase`; nullopt if any is unknown.
  std::optional<double> estimate_seconds(Phase phase) const;
  /// The ops of `phase` in order with the device's estimate of each;
  /// nullopt if any is unknown.
  std::optional<std::vector<EstimatedSlice>> estimated_ops(Phase phase) const;
  /// Prepares every kernel (ops with equal descs and no constants share
  /// one) without allocating a tensor. Once; allocate() calls it.
  void prepare_kernels();
  /// What the kernels will hold once prepared (oneDNN scratch, packed weight
  /// copies, attention scores), one item per op kind, counted as
  /// allocate() shares them: a kernel shared by equal ops once, a kernel
  /// with constants once per op. Measured by preparing each distinct kernel
  /// once and dropping it, so it costs time but keeps nothing. Empty on a
  /// device model: its plan_memory models the device's own memory, where
  /// the host's kernels do not live.
  std::vector<MemoryItem> kernel_memory_items() const;
  /// The device's plan of `items` (the tensors and the caller's own) plus
  /// kernel_memory_items(). When `items` alone do not fit, that plan, with
  /// no kernel prepared: a plan that cannot fit allocates nothing and
  /// answers at once, however large the batch.
  MemoryReport plan_memory(std::vector<MemoryItem> items) const;
  /// Prepares kernels, allocates every tensor, binds every op. Once.
  /// `given` slots are bound to those tensors instead of new ones (the
  /// weights of another program on the same device: one copy for several
  /// shapes); each must have the slot's dtype and shape.
  void allocate(const std::map<int, Tensor>& given = {});
  /// For each activation and input of this program (views excluded: they
  /// follow their base) whose slot in `larger` has the same name, dtype and
  /// trailing dimensions and at least as many rows: the first rows of
  /// larger's tensor. `larger` is the same declaration for more tokens,
  /// allocated. Given to allocate(), the two share their activations, so
  /// they must never run at the same time.
  std::map<int, Tensor> rows_of(const Program& larger) const;
  bool allocated() const { return allocated_; }
  /// Hands every op its constants (Kernel::set_constants), after their
  /// values were uploaded: kernels may pack them.
  void bind_constants();
  /// Runs the ops of `phase` in order, timing each; `before_op(i)`, when
  /// given, is called before op i runs (calibration reads its inputs).
  void run(Phase phase, const std::function<void(std::size_t)>& before_op = {});
  /// Time per op kind over every run so far, all phases.
  std::map<std::string, OpTime> profile() const;
  /// While `track` records (a --profile window), run() puts each phase and
  /// each op on it with the op's shapes, dtype and implementation; nullptr
  /// stops. The track must outlive the runs.
  void set_trace(TraceTrack* track) noexcept { trace_ = track; }
  TraceTrack* trace() const noexcept { return trace_; }

  /// Host values into a tensor (T's size must match its dtype).
  template <class T>
  void upload(int t, const std::vector<T>& values) {
    upload_bytes(t, values.data(), sizeof(T), values.size());
  }
  /// f32 values of an f32 tensor.
  std::vector<float> download(int t) const;
  /// f32 values converted into a tensor of any float dtype (round to nearest even).
  void upload_floats(int t, const std::vector<float>& values);
  /// A float tensor's values as f32.
  std::vector<float> read_floats(int t) const;
  /// Pipelining: the values one micro-batch's backward needs from its
  /// forward (every activation and input that is not transient, views
  /// excluded), copied to the host, so another micro-batch can run forward
  /// before this one's backward; unstash() puts them back.
  std::vector<std::vector<std::byte>> stash() const;
  void unstash(const std::vector<std::vector<std::byte>>& saved);
  /// Bytes stash() copies (from the plan: no allocation needed).
  std::uint64_t stash_bytes() const;
  /// Zeroes an f32 tensor.
  void zero(int t);
  /// The index in `phase` of the last op that writes tensor `t` or a view
  /// of it, or nullopt when none does.
  std::optional<std::size_t> last_writer(Phase phase, int t) const;

 private:
  struct Slot {
    std::string name;
    std::string category;
    DType dtype = DType::f32;
    Shape shape;
    int view_of = -1;
    std::int64_t view_begin = 0;
    bool elsewhere = false;
    bool typed = true;  // false until an op's operand_types gives the dtype
    bool transient = false;
    bool recomputed = false;  // live in forward and again in backward, not between
    Tensor tensor;
  };
  struct Op {
    KernelDesc desc;
    std::vector<int> inputs, outputs, constants;
    std::shared_ptr<Kernel> kernel;
    std::vector<Tensor> bound_inputs, bound_outputs;
    double seconds = 0;
    std::int64_t calls = 0;
  };
  struct SideKernel {
    KernelDesc desc;
    std::shared_ptr<Kernel> kernel;
  };

  const Slot& at(int t) const { return slots_.at(static_cast<std::size_t>(t)); }
  Slot& at(int t) { return slots_.at(static_cast<std::size_t>(t)); }
  std::vector<Op>& list(Phase phase) { return lists_[static_cast<std::size_t>(phase)]; }
  void upload_bytes(int t, const void* data, std::size_t element, std::size_t count);
  void share_transient_memory();
  /// What a trace says of `op`: its output, shapes, dtype, rounding and,
  /// once prepared, the implementation that runs.
  nlohmann::json op_trace_args(const Op& op) const;

  Device& device_;
  DType precision_;
  DType products_ = DType::f32;
  std::vector<Slot> slots_;
  std::vector<Op> lists_[3];
  std::vector<SideKernel> side_kernels_;
  std::map<int, int> compute_copies_;  // master weight -> its compute copy
  bool prepared_ = false, allocated_ = false;
  TraceTrack* trace_ = nullptr;
};

}  // namespace polyhal
