#include "polyhal/bert_training.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <stdexcept>

#include "polyhal/bert_weights.hpp"
#include "polyhal/error.hpp"
#include "polyhal/train_kernels.hpp"

namespace polyhal {
namespace {

/// A tensor of the training program: declared (shape, category) at prepare,
/// allocated at load; `view_of` >= 0 makes it rows of another slot. An
/// activation's dtype is not declared: the ops that read and write it give
/// it (operand_types), and they must agree.
struct Slot {
  std::string name;
  std::string category;  // weights, weights (compute copy), gradients, optimizer state, activations
  DType dtype = DType::f32;
  Shape shape;
  int view_of = -1;
  std::int64_t view_begin = 0;
  bool elsewhere = false;  // optimizer state another replica holds (sharding)
  Tensor tensor;
  bool typed = true;  // false until an op's operand_types gives the dtype
};

/// One step of the program: declared (desc, checked against the device) at
/// construction, its kernel prepared only when the program is allocated, so
/// planning (`--compile-only`) prepares nothing.
struct Op {
  KernelDesc desc;
  std::shared_ptr<Kernel> kernel;
  std::vector<int> inputs, outputs;
  std::vector<Tensor> bound_inputs, bound_outputs;
  std::string name;
  double seconds = 0;
  std::int64_t calls = 0;
};

/// Runs `work` and adds its wall time to `seconds`.
template <class Work>
void timed(double& seconds, Work&& work) {
  const auto start = std::chrono::steady_clock::now();
  work();
  seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

struct Param {
  std::string name;  // Hugging Face name
  int weight, grad, m, v;
  bool decay;     // weight decay and LAMB trust ratio apply
  int owner = 0;  // the replica that updates it when optimizer state is sharded
  int copy = -1;  // its compute copy (or rows of it), written by the update; -1: none
};

/// The update op of an optimizer kind (lamb | adamw | sgd).
OpKind optimizer_op(const std::string& kind) {
  if (kind == "lamb") return OpKind::lamb_update;
  if (kind == "adamw") return OpKind::adamw_update;
  if (kind == "sgd") return OpKind::sgd_update;
  throw ConfigError(fmt::format("optimizer.kind: unknown optimizer '{}' (lamb, adamw, sgd)", kind));
}

bool decays(const std::string& name) {
  return !name.ends_with(".bias") && name.find("LayerNorm") == std::string::npos;
}

}  // namespace

struct BertTraining::State {
  Device& device;
  BertConfig config;
  BertShape shape;
  OptimizerSettings optimizer;
  std::int64_t tokens;
  std::vector<Slot> slots;
  std::vector<Op> forward, backward;
  /// Refreshes the compute copy of the weights (cast to the precision)
  /// after loading and after every optimizer step; empty in f32.
  std::vector<Op> refresh;
  std::map<int, int> compute_copies;  // master weight slot -> its compute copy
  std::vector<Param> params;
  std::vector<KernelDesc> update_descs, norm_descs;  // one per param
  std::vector<std::shared_ptr<Kernel>> updates;      // prepared with the program
  std::vector<std::shared_ptr<Kernel>> norms;        // sum of squares, one per param
  int norm_out = -1;
  std::vector<std::vector<Tensor>> update_inputs, update_outputs;
  int ids, types, mask, mlm_labels, nsp_labels, loss_scale, losses, hyper;
  /// > 0: the MLM head runs on at most this many positions per sequence,
  /// gathered (as the seeds' data does); 0: on every position.
  std::int64_t max_predictions = 0;
  int mlm_positions = -1;  // i32 [batch * max_predictions] rows of the encoder output
  std::int64_t steps = 0;
  bool loaded = false;
  int shard_rank = 0, shard_count = 1;  // optimizer-state sharding (1: every replica holds all)
  Communicator* shards = nullptr;       // the replicas sharing the optimizer state
  std::vector<float> zeros;             // for gradients this replica does not apply

  bool owns(const Param& p) const { return shard_count == 1 || p.owner == shard_rank; }

  DType precision = DType::f32;
  double dropout = 0.0;            // hidden dropout (embeddings, attention and FFN outputs)
  double attention_dropout = 0.0;  // on the attention probabilities
  int rng = -1;                    // i32 [seed, micro-batch index] for the dropout streams
  std::uint64_t seed = 0;
  int dropout_streams = 0;

  /// Y = dropout(X) when dropout is on (returns the slot to use downstream),
  /// X itself when off. `attrs` receives the op's (p, stream), from which
  /// backward regenerates the mask: masks are never stored.
  int dropped(int x, const std::string& name, DropoutAttrs& attrs) {
    if (dropout <= 0.0) return x;
    const int y = act(name + " dropped", slots[static_cast<std::size_t>(x)].shape);
    attrs = {dropout, static_cast<std::uint64_t>(dropout_streams++)};
    fwd(OpKind::dropout, {x, rng}, {y}, attrs);
    return y;
  }
  /// dX = dY * mask when dropout is on; dY itself when off.
  int undropped(int dy, const DropoutAttrs& attrs, const std::string& name) {
    if (dropout <= 0.0) return dy;
    const int dx = act(name, slots[static_cast<std::size_t>(dy)].shape);
    bwd(OpKind::dropout_backward, {dy, rng}, {dx}, attrs);
    return dx;
  }

  State(Device& d, const BertConfig& c, BertShape s, OptimizerSettings o, DType p)
      : device(d),
        config(c),
        shape(s),
        optimizer(std::move(o)),
        tokens(s.batch * s.seq),
        precision(p) {}

  int slot(const std::string& name, const std::string& category, Shape s, DType type = DType::f32) {
    slots.push_back({name, category, type, std::move(s), -1, 0, false, {}});
    return static_cast<int>(slots.size()) - 1;
  }
  int act(const std::string& name, Shape s) {
    const int index = slot(name, "activations", std::move(s));
    slots.back().typed = false;
    return index;
  }
  /// The weight a GEMM reads: the master itself in f32, else a compute copy
  /// at the precision, cast from the master after every update (so a GEMM
  /// never narrows the weights itself).
  int compute(int master) {
    if (precision == DType::f32) return master;
    if (auto it = compute_copies.find(master); it != compute_copies.end()) return it->second;
    const Slot& m = slots[static_cast<std::size_t>(master)];
    const int copy = slot(m.name + " (compute copy)", "weights (compute copy)", m.shape);
    slots.back().typed = false;
    add(refresh, OpKind::cast, {master}, {copy}, NoAttrs{});
    compute_copies[master] = copy;
    return copy;
  }
  int view(int of, std::int64_t begin, std::int64_t rows, const std::string& name) {
    Slot v = slots[static_cast<std::size_t>(of)];
    v.name = name;
    v.view_of = of;
    v.view_begin = begin;
    v.shape[0] = rows;
    slots.push_back(v);
    return static_cast<int>(slots.size()) - 1;
  }

  /// A parameter with its gradient and two optimizer-state tensors.
  Param& param(const std::string& name, Shape s) {
    const int w = slot(name, "weights", s), g = slot("grad." + name, "gradients", s);
    const int m = slot("m." + name, "optimizer state", s),
              v = slot("v." + name, "optimizer state", s);
    params.push_back({name, w, g, m, v, decays(name)});
    return params.back();
  }

  void add(std::vector<Op>& list, OpKind op, std::vector<int> in, std::vector<int> out,
           OpAttrs attrs) {
    KernelDesc desc{op, DType::f32, {}, std::move(attrs), precision};
    if (op == OpKind::take_rows) {  // an inference op: its dtype is its storage
      desc.dtype = precision;
      desc.round_to = DType::f32;
    }
    for (int i : in) desc.input_shapes.push_back(slots[static_cast<std::size_t>(i)].shape);
    device.check_kernel(desc);
    list.push_back(
        {desc, nullptr, std::move(in), std::move(out), {}, {}, std::string(op_name(op))});
  }
  void fwd(OpKind op, std::vector<int> in, std::vector<int> out, OpAttrs a = NoAttrs{}) {
    add(forward, op, std::move(in), std::move(out), std::move(a));
  }
  void bwd(OpKind op, std::vector<int> in, std::vector<int> out, OpAttrs a = NoAttrs{}) {
    add(backward, op, std::move(in), std::move(out), std::move(a));
  }

  void prepare() {
    const std::int64_t t = tokens, h = config.hidden_size, i = config.intermediate_size,
                       v = config.vocab_size;
    const std::int64_t b = shape.batch, s = shape.seq, heads = config.num_attention_heads;
    const LayerNormAttrs eps{config.layer_norm_eps, false};
    ids = slot("input_ids", "activations", {t}, DType::i32);
    types = slot("token_type_ids", "activations", {t}, DType::i32);
    mask = slot("attention_mask", "activations", {b, s}, DType::i32);
    mlm_labels = slot("mlm_labels", "activations", {max_predictions > 0 ? b * max_predictions : t},
                      DType::i32);
    nsp_labels = slot("nsp_labels", "activations", {b}, DType::i32);
    loss_scale = act("loss scale", {1});
    losses = act("losses", {2});
    hyper = slot("optimizer step", "activations", {kOptimizerStepWords}, DType::i64);
    rng = slot("dropout rng", "activations", {2}, DType::i32);
    norm_out = act("gradient sum of squares", {1});

    auto& word = param("bert.embeddings.word_embeddings.weight", {v, h});
    const int word_w = word.weight, word_g = word.grad;
    const int pos_w =
        param("bert.embeddings.position_embeddings.weight", {config.max_position_embeddings, h})
            .weight;
    const int pos_g = params.back().grad;
    const int type_w =
        param("bert.embeddings.token_type_embeddings.weight", {config.type_vocab_size, h}).weight;
    const int type_g = params.back().grad;
    auto layernorm_params = [&](const std::string& prefix) {
      const Param gamma = param(prefix + ".weight", {h});
      const Param beta = param(prefix + ".bias", {h});
      return std::array{gamma, beta};
    };
    auto dense_params = [&](const std::string& prefix, std::int64_t out, std::int64_t in) {
      const Param w = param(prefix + ".weight", {out, in});
      const Param bias = param(prefix + ".bias", {out});
      return std::array{w, bias};
    };

    // ---- forward -----------------------------------------------------------
    const int embedded = act("embedded", {t, h});
    fwd(OpKind::embedding_train, {ids, types, word_w, pos_w, type_w}, {embedded},
        EmbeddingAttrs{s});
    const auto ln0 = layernorm_params("bert.embeddings.LayerNorm");

    const int x0_pre = act("x0 pre-dropout", {t, h});
    std::vector<int> xs;
    const int mean0 = act("mean0", {t}), rstd0 = act("rstd0", {t});
    fwd(OpKind::layernorm_train, {embedded, ln0[0].weight, ln0[1].weight}, {x0_pre, mean0, rstd0},
        eps);
    DropoutAttrs embedding_dropout;
    xs.push_back(dropped(x0_pre, "x0", embedding_dropout));

    struct LayerSlots {
      int qkv_w, qkv_b, qkv_gw, qkv_gb, o_w, o_gw, o_gb, i_w, i_gw, i_gb, f_w, f_gw, f_gb;
      std::array<Param, 2> ln1, ln2;
      int qkv, ctx, probs, a_out, s1, x1, m1, r1, ip, ia, f_out, s2, m2, r2;
      DropoutAttrs a_dropout, f_dropout;  // of the output dropouts, when on
      AttentionAttrs attention;           // attrs shared by forward and backward
    };
    std::vector<LayerSlots> layers;
    for (std::int64_t l = 0; l < config.num_hidden_layers; ++l) {
      const std::string p = fmt::format("bert.encoder.layer.{}.", l);
      LayerSlots L{};
      // Q, K and V live in one [3H, H] projection; each is a row view with
      // its own optimizer state, so LAMB's per-tensor trust ratio is exact.
      const int fw = slot(p + "qkv.weight", "weights", {3 * h, h}),
                fb = slot(p + "qkv.bias", "weights", {3 * h});
      const int gw = slot(p + "qkv.weight.grad", "gradients", {3 * h, h});
      const int gb = slot(p + "qkv.bias.grad", "gradients", {3 * h});
      const char* parts[3] = {"query", "key", "value"};
      for (std::int64_t q = 0; q < 3; ++q) {
        const std::string name = p + "attention.self." + parts[q];
        params.push_back({name + ".weight", view(fw, q * h, h, name + ".weight"),
                          view(gw, q * h, h, "grad." + name),
                          slot("m." + name + ".weight", "optimizer state", {h, h}),
                          slot("v." + name + ".weight", "optimizer state", {h, h}), true});
        params.push_back({name + ".bias", view(fb, q * h, h, name + ".bias"),
                          view(gb, q * h, h, "grad." + name),
                          slot("m." + name + ".bias", "optimizer state", {h}),
                          slot("v." + name + ".bias", "optimizer state", {h}), false});
      }
      L.qkv_w = compute(fw), L.qkv_b = fb, L.qkv_gw = gw, L.qkv_gb = gb;
      const auto o = dense_params(p + "attention.output.dense", h, h);
      L.ln1 = layernorm_params(p + "attention.output.LayerNorm");
      const auto in = dense_params(p + "intermediate.dense", i, h);
      const auto f = dense_params(p + "output.dense", h, i);
      L.ln2 = layernorm_params(p + "output.LayerNorm");
      L.o_w = compute(o[0].weight), L.o_gw = o[0].grad, L.o_gb = o[1].grad;
      L.i_w = compute(in[0].weight), L.i_gw = in[0].grad, L.i_gb = in[1].grad;
      L.f_w = compute(f[0].weight), L.f_gw = f[0].grad, L.f_gb = f[1].grad;
      const int x = xs.back();
      L.qkv = act(p + "qkv", {t, 3 * h});
      L.ctx = act(p + "context", {t, h});
      L.probs = act(p + "probs", {b, heads, s, s});
      L.a_out = act(p + "attention out", {t, h});
      L.s1 = act(p + "sum1", {t, h});
      L.x1 = act(p + "x1", {t, h});
      L.m1 = act(p + "mean1", {t}), L.r1 = act(p + "rstd1", {t});
      L.ip = act(p + "ffn pre", {t, i}), L.ia = act(p + "ffn act", {t, i});
      L.f_out = act(p + "ffn out", {t, h});
      L.s2 = act(p + "sum2", {t, h});
      L.m2 = act(p + "mean2", {t}), L.r2 = act(p + "rstd2", {t});
      const int next = act(fmt::format("x{}", l + 1), {t, h});
      AttentionAttrs attention{b, s, heads, 0.0, 0};
      std::vector<int> attention_in{L.qkv, mask};
      if (attention_dropout > 0.0) {
        attention.dropout = attention_dropout;
        attention.stream = static_cast<std::uint64_t>(dropout_streams++);
        attention_in.push_back(rng);
      }
      L.attention = attention;
      fwd(OpKind::dense, {x, compute(fw), fb}, {L.qkv});
      fwd(OpKind::attention_train, attention_in, {L.ctx, L.probs}, attention);
      fwd(OpKind::dense, {L.ctx, compute(o[0].weight), o[1].weight}, {L.a_out});
      fwd(OpKind::add, {dropped(L.a_out, p + "attention out", L.a_dropout), x}, {L.s1});
      fwd(OpKind::layernorm_train, {L.s1, L.ln1[0].weight, L.ln1[1].weight}, {L.x1, L.m1, L.r1},
          eps);
      fwd(OpKind::dense, {L.x1, compute(in[0].weight), in[1].weight}, {L.ip});
      fwd(OpKind::gelu, {L.ip}, {L.ia});
      fwd(OpKind::dense, {L.ia, compute(f[0].weight), f[1].weight}, {L.f_out});
      fwd(OpKind::add, {dropped(L.f_out, p + "ffn out", L.f_dropout), L.x1}, {L.s2});
      fwd(OpKind::layernorm_train, {L.s2, L.ln2[0].weight, L.ln2[1].weight}, {next, L.m2, L.r2},
          eps);
      layers.push_back(L);
      xs.push_back(next);
    }
    const int x_last = xs.back();
    const auto pool = dense_params("bert.pooler.dense", h, h);
    const auto transform = dense_params("cls.predictions.transform.dense", h, h);
    const auto ln_t = layernorm_params("cls.predictions.transform.LayerNorm");
    const Param vocab_bias = param("cls.predictions.bias", {v});
    const auto nsp_head = dense_params("cls.seq_relationship", 2, h);
    const int cls = act("cls", {b, h}), pooled_pre = act("pooled pre", {b, h}),
              pooled = act("pooled", {b, h});
    const int nsp = act("nsp logits", {b, 2});
    // The MLM head sees `predicted` rows: every token, or the labelled
    // positions gathered into batch x max_predictions rows (padding rows
    // carry label -100, so they add nothing to the loss or any gradient).
    const std::int64_t predicted = max_predictions > 0 ? b * max_predictions : t;
    const int tp = act("transform pre", {predicted, h}), ta = act("transform act", {predicted, h});
    const int tl = act("transform normed", {predicted, h}), mt = act("mean t", {predicted}),
              rt = act("rstd t", {predicted});
    const int mlm = act("mlm logits", {predicted, v});
    const int dmlm = act("d mlm logits", {predicted, v}), dnsp = act("d nsp logits", {b, 2});
    int head_input = x_last;
    if (max_predictions > 0) {
      mlm_positions = slot("mlm positions", "activations", {predicted}, DType::i32);
      head_input = act("masked rows", {predicted, h});
      fwd(OpKind::gather_rows, {x_last, mlm_positions}, {head_input});
    }
    fwd(OpKind::take_rows, {x_last}, {cls}, RowStrideAttrs{s});
    fwd(OpKind::dense, {cls, compute(pool[0].weight), pool[1].weight}, {pooled_pre});
    fwd(OpKind::tanh, {pooled_pre}, {pooled});
    fwd(OpKind::dense, {pooled, compute(nsp_head[0].weight), nsp_head[1].weight}, {nsp});
    fwd(OpKind::dense, {head_input, compute(transform[0].weight), transform[1].weight}, {tp});
    fwd(OpKind::gelu, {tp}, {ta});
    fwd(OpKind::layernorm_train, {ta, ln_t[0].weight, ln_t[1].weight}, {tl, mt, rt}, eps);
    fwd(OpKind::dense, {tl, compute(word_w), vocab_bias.weight},
        {mlm});  // decoder tied to the word embeddings
    fwd(OpKind::pretraining_loss, {mlm, mlm_labels, nsp, nsp_labels, loss_scale},
        {losses, dmlm, dnsp});

    // ---- backward: the forward list in reverse ------------------------------
    const int dtl = act("d transform normed", {predicted, h}),
              dta = act("d transform act", {predicted, h});
    const int dtp = act("d transform pre", {predicted, h}), dx = act("d x", {t, h});
    const int dpooled = act("d pooled", {b, h}), dpp = act("d pooled pre", {b, h}),
              dcls = act("d cls", {b, h});
    bwd(OpKind::dense_backward, {dmlm, tl, compute(word_w)}, {dtl, word_g, vocab_bias.grad});
    bwd(OpKind::layernorm_backward, {dtl, ta, ln_t[0].weight, mt, rt},
        {dta, ln_t[0].grad, ln_t[1].grad});
    bwd(OpKind::gelu_backward, {dta, tp}, {dtp});
    if (max_predictions > 0) {
      const int dhead = act("d masked rows", {predicted, h});
      bwd(OpKind::dense_backward, {dtp, head_input, compute(transform[0].weight)},
          {dhead, transform[0].grad, transform[1].grad});
      bwd(OpKind::gather_rows_backward, {dhead, mlm_positions}, {dx});
    } else {
      bwd(OpKind::dense_backward, {dtp, x_last, compute(transform[0].weight)},
          {dx, transform[0].grad, transform[1].grad});
    }
    bwd(OpKind::dense_backward, {dnsp, pooled, compute(nsp_head[0].weight)},
        {dpooled, nsp_head[0].grad, nsp_head[1].grad});
    bwd(OpKind::tanh_backward, {dpooled, pooled}, {dpp});
    bwd(OpKind::dense_backward, {dpp, cls, compute(pool[0].weight)},
        {dcls, pool[0].grad, pool[1].grad});
    bwd(OpKind::take_rows_backward, {dcls}, {dx}, RowStrideAttrs{s});
    const int ds2 = act("d sum2", {t, h}), dia = act("d ffn act", {t, i}),
              dip = act("d ffn pre", {t, i});
    const int dx1 = act("d x1", {t, h}), dx1b = act("d x1 via ffn", {t, h}),
              ds1 = act("d sum1", {t, h});
    const int dctx = act("d context", {t, h}), dqkv = act("d qkv", {t, 3 * h}),
              dxb = act("d x via qkv", {t, h});
    for (std::size_t l = layers.size(); l-- > 0;) {
      const auto& L = layers[l];
      const std::string p = fmt::format("bert.encoder.layer.{}.", l);
      bwd(OpKind::layernorm_backward, {dx, L.s2, L.ln2[0].weight, L.m2, L.r2},
          {ds2, L.ln2[0].grad, L.ln2[1].grad});
      const int df = undropped(ds2, L.f_dropout, p + "d ffn out");
      bwd(OpKind::dense_backward, {df, L.ia, L.f_w}, {dia, L.f_gw, L.f_gb});
      bwd(OpKind::gelu_backward, {dia, L.ip}, {dip});
      bwd(OpKind::dense_backward, {dip, L.x1, L.i_w}, {dx1b, L.i_gw, L.i_gb});
      bwd(OpKind::add, {dx1b, ds2}, {dx1});  // x1 feeds both the FFN and the residual
      bwd(OpKind::layernorm_backward, {dx1, L.s1, L.ln1[0].weight, L.m1, L.r1},
          {ds1, L.ln1[0].grad, L.ln1[1].grad});
      const int da = undropped(ds1, L.a_dropout, p + "d attention out");
      bwd(OpKind::dense_backward, {da, L.ctx, L.o_w}, {dctx, L.o_gw, L.o_gb});
      std::vector<int> attention_in{dctx, L.qkv, L.probs};
      if (attention_dropout > 0.0) attention_in.push_back(rng);
      bwd(OpKind::attention_backward, attention_in, {dqkv}, L.attention);
      bwd(OpKind::dense_backward, {dqkv, xs[l], L.qkv_w}, {dxb, L.qkv_gw, L.qkv_gb});
      bwd(OpKind::add, {dxb, ds1}, {dx});  // the layer input feeds QKV and the residual
    }
    const int demb = act("d embedded", {t, h});
    const int dx0 = undropped(dx, embedding_dropout, "d x0 pre-dropout");
    bwd(OpKind::layernorm_backward, {dx0, embedded, ln0[0].weight, mean0, rstd0},
        {demb, ln0[0].grad, ln0[1].grad});
    bwd(OpKind::embedding_backward, {demb, ids, types}, {word_g, pos_g, type_g}, EmbeddingAttrs{s});

    const OpKind update = optimizer_op(optimizer.kind);
    const OptimizerHyperParameters hyper_parameters{optimizer.beta1, optimizer.beta2,
                                                    optimizer.epsilon, optimizer.weight_decay,
                                                    optimizer.momentum};
    for (auto& p : params) {
      // The update also writes the weights' compute copy when the GEMMs
      // read one: no separate cast pass over the weights after each step.
      p.copy = compute_copy_rows(p.weight);
      KernelDesc desc{update,
                      DType::f32,
                      {slots[static_cast<std::size_t>(p.weight)].shape,
                       slots[static_cast<std::size_t>(p.grad)].shape},
                      OptimizerUpdateAttrs{hyper_parameters, p.decay, p.decay},
                      p.copy >= 0 ? precision : DType::f32};
      device.check_kernel(desc);
      update_descs.push_back(std::move(desc));
      KernelDesc norm{OpKind::sum_of_squares,
                      DType::f32,
                      {slots[static_cast<std::size_t>(p.grad)].shape},
                      NoAttrs{}};
      device.check_kernel(norm);
      norm_descs.push_back(std::move(norm));
    }
    assign_storage_types();
  }

  /// The compute copy of a weight slot, or the same rows of the compute copy
  /// of the fused tensor it is a view of; -1 when GEMMs read no copy of it.
  int compute_copy_rows(int weight) {
    const Slot& w = slots[static_cast<std::size_t>(weight)];
    const int master = w.view_of >= 0 ? w.view_of : weight;
    const auto it = compute_copies.find(master);
    if (it == compute_copies.end()) return -1;
    if (w.view_of < 0) return it->second;
    const int rows = view(it->second, w.view_begin, w.shape[0], w.name + " (compute copy)");
    slots[static_cast<std::size_t>(rows)].dtype = precision;
    return rows;
  }

  /// Gives every activation (and compute copy) the dtype its ops store it
  /// at (operand_types), and checks that every op agrees with every
  /// declared dtype: a disagreement is a bug in the program above.
  void assign_storage_types() {
    const auto give = [&](int index, DType type, const Op& op) {
      Slot& s = slots[static_cast<std::size_t>(index)];
      if (!s.typed) {
        s.dtype = type;
        s.typed = true;
      } else if (s.dtype != type) {
        throw std::logic_error(fmt::format("training program: '{}' is {} but {} stores it as {}",
                                           s.name, dtype_name(s.dtype), op.name, dtype_name(type)));
      }
    };
    for (const auto* list : {&forward, &backward, &refresh}) {
      for (const auto& op : *list) {
        const OperandTypes storage = operand_types(op.desc);
        for (std::size_t k = 0; k < op.inputs.size(); ++k)
          give(op.inputs[k], storage.inputs.at(k), op);
        for (std::size_t k = 0; k < op.outputs.size(); ++k)
          give(op.outputs[k], storage.outputs.at(k), op);
      }
    }
    for (auto& s : slots) s.typed = true;  // read by no op (the norm's output): f32
  }

  /// Prepares every kernel of the program. Ops with equal descs (the same
  /// op at the same shapes in every encoder layer) share one kernel: they
  /// run one after another, and preparing (oneDNN primitive creation,
  /// scratch) once instead of once per layer saves time and memory.
  void prepare_kernels() {
    std::vector<std::pair<KernelDesc, std::shared_ptr<Kernel>>> prepared;
    const auto kernel_for = [&](const KernelDesc& desc) {
      for (const auto& [known, kernel] : prepared) {
        if (known == desc) return kernel;
      }
      prepared.emplace_back(desc, device.prepare_kernel(desc));
      return prepared.back().second;
    };
    for (auto* list : {&forward, &backward, &refresh}) {
      for (auto& op : *list) op.kernel = kernel_for(op.desc);
    }
    for (const auto& desc : update_descs) updates.push_back(kernel_for(desc));
    for (const auto& desc : norm_descs) norms.push_back(kernel_for(desc));
  }

  /// What allocate() takes, from the same slots: f32 master weights,
  /// gradients and optimizer state; with mixed precision the activations
  /// and the GEMMs' compute copy of the weights at the precision, LayerNorm
  /// statistics and losses in f32, inputs in i32. One item per (category,
  /// dtype).
  std::vector<MemoryItem> memory_items() const {
    std::map<std::pair<std::string, DType>, std::uint64_t> bytes;
    for (const auto& s : slots) {
      if (s.view_of >= 0 || s.elsewhere) continue;
      bytes[{s.category, s.dtype}] +=
          static_cast<std::uint64_t>(element_count(s.shape)) * dtype_size(s.dtype);
    }
    std::vector<MemoryItem> items;
    for (const auto& [key, total] : bytes)
      items.push_back({key.first, std::string(dtype_name(key.second)), total});
    return items;
  }

  void allocate() {
    prepare_kernels();
    for (auto& s : slots) {
      if (s.view_of < 0 && !s.elsewhere)
        s.tensor = device.allocate_tensor(s.dtype, s.shape, s.name);
    }
    for (auto& s : slots) {
      if (s.view_of >= 0)
        s.tensor =
            row_slice(slots[static_cast<std::size_t>(s.view_of)].tensor, s.view_begin, s.shape[0]);
    }
    auto bind = [&](std::vector<Op>& list) {
      for (auto& op : list) {
        for (int i : op.inputs)
          op.bound_inputs.push_back(slots[static_cast<std::size_t>(i)].tensor);
        for (int o : op.outputs)
          op.bound_outputs.push_back(slots[static_cast<std::size_t>(o)].tensor);
      }
    };
    bind(forward);
    bind(backward);
    bind(refresh);
    for (const auto& p : params) {
      const auto& w = slots[static_cast<std::size_t>(p.weight)].tensor;
      const auto& g = slots[static_cast<std::size_t>(p.grad)].tensor;
      const auto& m = slots[static_cast<std::size_t>(p.m)].tensor;
      const auto& v = slots[static_cast<std::size_t>(p.v)].tensor;
      update_inputs.push_back({w, g, m, v, slots[static_cast<std::size_t>(hyper)].tensor});
      update_outputs.push_back({w, m, v, g});
      if (p.copy >= 0)
        update_outputs.back().push_back(slots[static_cast<std::size_t>(p.copy)].tensor);
    }
  }

  /// Host values (f32 or i32, matching the slot) into a slot's tensor.
  template <class T>
  void upload(int index, const std::vector<T>& values) {
    const auto& t = slots[static_cast<std::size_t>(index)].tensor;
    if (sizeof(T) != dtype_size(t.dtype)) {
      throw std::logic_error(fmt::format("{}: host values of {} bytes for a {} tensor",
                                         slots[static_cast<std::size_t>(index)].name, sizeof(T),
                                         dtype_name(t.dtype)));
    }
    if (values.size() != static_cast<std::size_t>(t.numel())) {
      throw RuntimeFailure(fmt::format("{}: expected {} values, got {}",
                                       slots[static_cast<std::size_t>(index)].name, t.numel(),
                                       values.size()));
    }
    device.copy_from_host(*t.buffer, values.data(), t.bytes());
  }
  std::vector<float> download(int index) const {
    const auto& t = slots[static_cast<std::size_t>(index)].tensor;
    std::vector<float> out(static_cast<std::size_t>(t.numel()));
    device.copy_to_host(out.data(), *t.buffer, t.bytes());
    return out;
  }
  void zero(int index) {
    upload(index, std::vector<float>(static_cast<std::size_t>(
                      element_count(slots[static_cast<std::size_t>(index)].shape))));
  }

  /// The labelled positions of each sequence (row indices into the batch's
  /// tokens) and their labels, padded to max_predictions per sequence with
  /// the sequence's first row and label -100.
  std::pair<std::vector<std::int32_t>, std::vector<std::int32_t>> gather_labels(
      const std::vector<std::int32_t>& labels) const {
    const std::int64_t b = shape.batch, s = shape.seq;
    if (labels.size() != static_cast<std::size_t>(b * s)) {
      throw RuntimeFailure(
          fmt::format("mlm_labels: expected {} values, got {}", b * s, labels.size()));
    }
    std::vector<std::int32_t> positions, gathered;
    for (std::int64_t k = 0; k < b; ++k) {
      std::int64_t found = 0;
      for (std::int64_t p = 0; p < s; ++p) {
        const std::int32_t label = labels[static_cast<std::size_t>(k * s + p)];
        if (label == -100) continue;
        if (++found > max_predictions) {
          throw RuntimeFailure(fmt::format(
              "sequence {} of the micro-batch has more than max_predictions = {} labelled "
              "positions; raise data.max_predictions",
              k, max_predictions));
        }
        positions.push_back(static_cast<std::int32_t>(k * s + p));
        gathered.push_back(label);
      }
      for (; found < max_predictions; ++found) {
        positions.push_back(static_cast<std::int32_t>(k * s));
        gathered.push_back(-100);
      }
    }
    return {positions, gathered};
  }

  void zero_gradients() {
    for (const auto& p : params) zero(p.grad);
  }

  double optimizer_seconds = 0, all_reduce_seconds = 0;
  std::int64_t optimizer_calls = 0, all_reduce_calls = 0;

  static void run(std::vector<Op>& list) {
    for (auto& op : list) {
      timed(op.seconds, [&] { op.kernel->run(op.bound_inputs, op.bound_outputs); });
      ++op.calls;
    }
  }
};

BertTraining::BertTraining(Device& device, const BertConfig& config, BertShape micro_batch,
                           OptimizerSettings optimizer, DType precision, DropoutSettings dropout,
                           std::uint64_t seed, std::int64_t max_predictions)
    : state_(
          std::make_unique<State>(device, config, micro_batch, std::move(optimizer), precision)) {
  for (const double p : {dropout.hidden, dropout.attention}) {
    if (p < 0.0 || p >= 1.0) throw ConfigError(fmt::format("dropout must be in [0, 1), got {}", p));
  }
  state_->dropout = dropout.hidden;
  state_->attention_dropout = dropout.attention;
  state_->seed = seed;
  if (max_predictions < 0) {
    throw ConfigError(fmt::format("max_predictions must be >= 0, got {}", max_predictions));
  }
  state_->max_predictions = std::min(max_predictions, micro_batch.seq);
  config.validate("model");
  if (precision != DType::f32 && precision != DType::bf16 && precision != DType::f16) {
    throw ConfigError(
        fmt::format("training precision must be f32, bf16 or f16, got {}", dtype_name(precision)));
  }
  if (state_->optimizer.kind != "lamb" && state_->optimizer.kind != "adamw" &&
      state_->optimizer.kind != "sgd") {
    throw ConfigError(
        fmt::format("optimizer '{}': expected lamb, adamw or sgd", state_->optimizer.kind));
  }
  if (micro_batch.seq > config.max_position_embeddings) {
    throw ConfigError(fmt::format("sequence length {} exceeds max_position_embeddings {}",
                                  micro_batch.seq, config.max_position_embeddings));
  }
  state_->prepare();
}

BertTraining::~BertTraining() = default;

MemoryReport BertTraining::plan_memory() const {
  return state_->device.plan_memory(state_->memory_items());
}

void BertTraining::load_weights(const TensorMap& weights) {
  auto& s = *state_;
  if (!s.loaded) s.allocate();
  for (const auto& p : s.params) {
    auto it = weights.find(p.name);
    if (it == weights.end()) throw ConfigError(fmt::format("weights: missing tensor '{}'", p.name));
    s.upload(p.weight, it->second.values);
    s.zero(p.grad);
    if (!s.owns(p)) continue;
    s.zero(p.m);
    s.zero(p.v);
  }
  State::run(s.refresh);
  s.steps = 0;
  s.loaded = true;
}

StepLosses BertTraining::forward_backward(const TrainingBatch& batch, int accumulation_steps,
                                          double loss_scale) {
  auto& s = *state_;
  if (!s.loaded) throw RuntimeFailure("BertTraining: load_weights before training");
  s.upload(s.ids, batch.inputs.input_ids);
  s.upload(s.types, batch.inputs.token_type_ids);
  s.upload(s.mask, batch.inputs.attention_mask);
  if (s.max_predictions > 0) {
    const auto [positions, labels] = s.gather_labels(batch.mlm_labels);
    s.upload(s.mlm_positions, positions);
    s.upload(s.mlm_labels, labels);
  } else {
    s.upload(s.mlm_labels, batch.mlm_labels);
  }
  s.upload(s.nsp_labels, batch.nsp_labels);
  s.upload(s.rng, std::vector<std::int32_t>{static_cast<std::int32_t>(s.seed & 0x7fffffff),
                                            static_cast<std::int32_t>(batch.index & 0x7fffffff)});
  s.upload(s.loss_scale, std::vector<float>{static_cast<float>(loss_scale / accumulation_steps)});
  State::run(s.forward);
  State::run(s.backward);
  const auto losses = s.download(s.losses);
  return {losses[0], losses[1]};
}

std::optional<double> BertTraining::optimizer_step(double learning_rate, double loss_scale) {
  std::optional<double> norm;
  timed(state_->optimizer_seconds, [&] { norm = apply_optimizer(learning_rate, loss_scale); });
  ++state_->optimizer_calls;
  return norm;
}

void BertTraining::all_reduce_gradients(Communicator& replicas) {
  if (replicas.size() == 1) return;
  timed(state_->all_reduce_seconds, [&] {
    for (const auto& slot : state_->slots) {
      if (slot.category != "gradients" || slot.view_of >= 0) continue;
      replicas.all_reduce(slot.tensor.buffer->data(), static_cast<std::size_t>(slot.tensor.numel()),
                          DType::f32, ReduceOp::mean);
    }
  });
  ++state_->all_reduce_calls;
}

std::vector<OpTime> BertTraining::profile() const {
  std::map<std::string, OpTime> by_op;
  for (const auto* list : {&state_->forward, &state_->backward, &state_->refresh}) {
    for (const auto& op : *list) {
      auto& t = by_op[op.name];
      if (t.op.empty())
        t = {op.name, op.kernel ? op.kernel->implementation() : "not prepared", 0, 0};
      t.calls += op.calls;
      t.seconds += op.seconds;
    }
  }
  by_op["optimizer"] = {"optimizer",
                        state_->optimizer.kind + " (sum of squares + update per tensor)",
                        state_->optimizer_calls, state_->optimizer_seconds};
  if (state_->all_reduce_calls > 0) {
    by_op["gradient all-reduce"] = {"gradient all-reduce", "mean over replicas, per tensor",
                                    state_->all_reduce_calls, state_->all_reduce_seconds};
  }
  std::vector<OpTime> out;
  for (auto& [name, t] : by_op) out.push_back(std::move(t));
  std::sort(out.begin(), out.end(),
            [](const OpTime& a, const OpTime& b) { return a.seconds > b.seconds; });
  return out;
}

std::optional<double> BertTraining::apply_optimizer(double learning_rate, double loss_scale) {
  auto& s = *state_;
  const auto& o = s.optimizer;
  // Global gradient norm over every parameter (views included once: q, k and
  // v are disjoint rows of the fused projection).
  double sum = 0;
  for (std::size_t i = 0; i < s.params.size(); ++i) {
    const std::array in{s.slots[static_cast<std::size_t>(s.params[i].grad)].tensor};
    const std::array out{s.slots[static_cast<std::size_t>(s.norm_out)].tensor};
    s.norms[i]->run(in, out);
    sum += s.download(s.norm_out)[0];
  }
  if (!std::isfinite(sum)) {  // overflow under loss scaling: skip, as the seeds' scalers do
    s.zero_gradients();
    return std::nullopt;
  }
  ++s.steps;
  const double norm = std::sqrt(sum) / loss_scale;
  const double clip = o.max_grad_norm > 0 && norm > o.max_grad_norm ? o.max_grad_norm / norm : 1.0;
  const double scale = clip / loss_scale;
  const auto words = optimizer_step_words({learning_rate, scale, s.steps, 0});
  s.upload(s.hyper, std::vector<std::int64_t>(words.begin(), words.end()));
  for (std::size_t i = 0; i < s.params.size(); ++i) {
    if (s.owns(s.params[i])) {
      s.updates[i]->run(s.update_inputs[i], s.update_outputs[i]);  // also zeroes the gradient
    } else {
      s.zero(s.params[i].grad);  // its owner applies it
    }
  }
  if (s.shard_count > 1) {  // every replica takes each tensor from the replica that updated it
    for (const auto& p : s.params) {
      const auto& w = s.slots[static_cast<std::size_t>(p.weight)].tensor;
      s.shards->broadcast(w.buffer->data(), static_cast<std::size_t>(w.numel()), DType::f32,
                          p.owner);
    }
  }
  // The updates wrote the compute copies of the weights they changed; with
  // sharding the other replicas' tensors arrived by broadcast, in f32 only.
  if (s.shard_count > 1) State::run(s.refresh);
  return norm;
}

TensorMap BertTraining::weights() const {
  TensorMap out;
  for (const auto& p : state_->params) {
    out[p.name] = {state_->slots[static_cast<std::size_t>(p.weight)].shape,
                   state_->download(p.weight)};
  }
  return out;
}

TensorMap BertTraining::gradients() const {
  TensorMap out;
  for (const auto& p : state_->params) {
    out[p.name] = {state_->slots[static_cast<std::size_t>(p.grad)].shape, state_->download(p.grad)};
  }
  return out;
}

std::int64_t BertTraining::steps_taken() const {
  return state_->steps;
}

std::int64_t BertTraining::parameter_count() const {
  std::int64_t count = 0;
  for (const auto& slot : state_->slots)
    if (slot.category == "gradients" && slot.view_of < 0) count += element_count(slot.shape);
  return count;
}

TensorMap BertTraining::state() const {
  const auto& s = *state_;
  TensorMap out = weights();
  for (const auto& p : s.params) {
    const auto& shape = s.slots[static_cast<std::size_t>(p.weight)].shape;
    for (const auto& [prefix, slot] :
         {std::pair{"optimizer.m.", p.m}, std::pair{"optimizer.v.", p.v}}) {
      std::vector<float> values =
          s.owns(p) ? s.download(slot)
                    : std::vector<float>(static_cast<std::size_t>(element_count(shape)));
      if (s.shard_count > 1)  // the owner's copy, to every replica
        s.shards->broadcast(values.data(), values.size(), DType::f32, p.owner);
      out[prefix + p.name] = {shape, std::move(values)};
    }
  }
  return out;
}

void BertTraining::shard_optimizer_state(Communicator& replicas) {
  auto& s = *state_;
  if (s.loaded) throw RuntimeFailure("shard_optimizer_state: call before load_weights");
  s.shards = &replicas;
  s.shard_rank = replicas.rank();
  s.shard_count = replicas.size();
  // Largest tensors first, each to the replica holding the least so far: the
  // same assignment on every replica, and shards within one tensor of equal.
  std::vector<std::size_t> order(s.params.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  const auto size_of = [&](std::size_t i) {
    return element_count(s.slots[static_cast<std::size_t>(s.params[i].m)].shape);
  };
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return size_of(a) > size_of(b); });
  std::vector<std::int64_t> held(static_cast<std::size_t>(s.shard_count));
  for (std::size_t i : order) {
    const auto lightest =
        static_cast<int>(std::min_element(held.begin(), held.end()) - held.begin());
    auto& p = s.params[i];
    p.owner = lightest;
    held[static_cast<std::size_t>(lightest)] += size_of(i);
    for (int slot : {p.m, p.v}) s.slots[static_cast<std::size_t>(slot)].elsewhere = !s.owns(p);
  }
}

void BertTraining::load_state(const TensorMap& state, std::int64_t steps) {
  load_weights(state);
  auto& s = *state_;
  for (const auto& p : s.params) {
    for (const auto& [prefix, slot] :
         {std::pair{"optimizer.m.", p.m}, std::pair{"optimizer.v.", p.v}}) {
      if (!s.owns(p)) break;  // another replica's shard
      auto it = state.find(prefix + p.name);
      if (it == state.end()) {
        throw ConfigError(fmt::format("checkpoint: missing tensor '{}{}'", prefix, p.name));
      }
      s.upload(slot, it->second.values);
    }
  }
  s.steps = steps;
}

}  // namespace polyhal
