"""The matrix work of polyhal's BERT and GroupBERT programs, counted from the
model dimensions as bench/*'s GEMM ceilings need it: every 2-D GEMM as
(m, n, k, count), plus the FLOPs of attention's batched GEMMs and of
GroupBERT's grouped convolution, which matmul-bench does not measure.

Shapes follow core/src/model/bert_program.cpp: BERT's fused QKV, attention
output, FFN up and down; GroupBERT's fused GLU (values and gates in one
[2N, N] linear), the convolution's post projection, two FFNs of up
projection, grouped down-projection (G GEMMs of [t, I/G] x [I/G, N/G]) and
mixer, and attention; the heads (pooler, NSP, MLM transform and decoder on
the `predictions` gathered rows). Training counts each linear three times
(output, data gradient, weight gradient) and attention and the convolution
three times their forward work."""

VOCAB = 30522
# layers, hidden, heads; GroupBERT adds ffn groups G, conv group size C, kernel K.
PRESETS = {"tiny": (2, 128, 2), "mini": (4, 256, 4), "small": (4, 512, 8), "medium": (8, 512, 8),
           "base": (12, 768, 12), "large": (24, 1024, 16)}
GROUPBERT = {"groups": 4, "conv_group_size": 16, "kernel": 7}


def dims(preset):
    """(layers, hidden, heads, is_groupbert) of a polyhal preset name."""
    groupbert = preset.startswith("groupbert-")
    layers, hidden, heads = PRESETS[preset[len("groupbert-"):] if groupbert else preset]
    return layers, hidden, heads, groupbert


def layer_linears(hidden, groupbert):
    """(out, in, count) of one encoder layer's linears at one token each."""
    h, i = hidden, 4 * hidden
    if not groupbert:
        return [(3 * h, h, 1), (h, h, 1), (i, h, 1), (h, i, 1)]
    g = GROUPBERT["groups"]
    ffn = [(i, h, 2), (h // g, i // g, 2 * g), (h, h, 2)]  # up, grouped down, mixer; two FFNs
    return [(2 * h, h, 1), (h, h, 1)] + ffn + [(3 * h, h, 1), (h, h, 1)]  # GLU, post; ffn; QKV, out


def model_work(preset, seq, batch, predictions, training):
    """(gemms [(m, n, k, count)], other_flops) of one batch: forward only,
    or forward + backward when `training`. other_flops is attention's
    batched GEMMs plus GroupBERT's convolution."""
    layers, h, heads, groupbert = dims(preset)
    t = batch * seq
    passes = 3 if training else 1
    gemms = []
    for out, inp, count in layer_linears(h, groupbert):
        gemms.append((t, out, inp, layers * count))
        if training:
            gemms += [(t, inp, out, layers * count), (out, inp, t, layers * count)]  # dX, dW
    if training:  # the pre-training heads
        for m, out, inp in ((batch, h, h), (batch, 2, h), (batch * predictions, h, h),
                            (batch * predictions, VOCAB, h)):
            gemms += [(m, out, inp, 1), (m, inp, out, 1), (out, inp, m, 1)]
    other = layers * passes * 2 * batch * heads * 2.0 * seq * seq * (h // heads)
    if groupbert:
        other += layers * passes * 2.0 * t * h * GROUPBERT["conv_group_size"] * GROUPBERT["kernel"]
    return gemms, other


def flops(gemms, other):
    return sum(2.0 * m * n * k * c for m, n, k, c in gemms) + other
