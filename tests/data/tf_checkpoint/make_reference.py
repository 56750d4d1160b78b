"""Writes reference.safetensors: what transformers computes from the TensorFlow
checkpoint google/model.ckpt-7 (make_tf_checkpoint.py), loaded by
transformers' own TensorFlow-to-PyTorch loader (load_tf_weights_in_bert, the
name mapping Hugging Face's convert_bert_original_tf_checkpoint_to_pytorch
uses), so polyhal's reading of Google's names is checked against an
independent one.

The loader asks TensorFlow for each variable (tf.train.list_variables and
tf.train.load_variable). TensorFlow 2.21 and Debian's torch 1.13 need
different numpy versions, so make_tf_checkpoint.py saves every variable as
TensorFlow read it back (variables.npz) and a stand-in "tensorflow" module
serves those arrays to the loader here.

Run (scripts/check-with-reference-libraries.sh's environment):
    build/ref-venv/bin/python tests/data/tf_checkpoint/make_reference.py NPZ_DIR
"""
import json
import os
import sys
import types

import numpy as np
import torch
from safetensors.torch import save_file
from transformers import BertConfig, BertForPreTraining
from transformers.models.bert.modeling_bert import load_tf_weights_in_bert

HERE = os.path.dirname(os.path.abspath(__file__))
BATCH, SEQ = 2, 9


def tensorflow_stand_in(npz):
    arrays = dict(np.load(npz))
    train = types.SimpleNamespace(
        list_variables=lambda path: [(n, list(a.shape)) for n, a in sorted(arrays.items())],
        load_variable=lambda path, name: arrays[name])
    return types.SimpleNamespace(train=train)


def main():
    npz = os.path.join(sys.argv[1] if len(sys.argv) > 1 else HERE, "variables.npz")
    sys.modules["tensorflow"] = tensorflow_stand_in(npz)
    with open(os.path.join(HERE, "google", "bert_config.json")) as f:
        google = json.load(f)
    # Google's modeling.py computes "gelu" with the tanh approximation;
    # transformers (and polyhal) read the name as exact erf GELU, as Hugging
    # Face's converted Google models do (docs/bert.md, "TensorFlow checkpoints").
    config = BertConfig(**google)
    model = BertForPreTraining(config)
    load_tf_weights_in_bert(model, config, os.path.join(HERE, "google", "model.ckpt-7"))
    model.eval()
    generator = torch.Generator().manual_seed(7)
    ids = torch.randint(5, config.vocab_size, (BATCH, SEQ), generator=generator)
    types_ = torch.zeros_like(ids)
    types_[:, 5:] = 1
    mask = torch.ones_like(ids)
    mask[1, 7:] = 0
    with torch.no_grad():
        out = model(input_ids=ids, token_type_ids=types_, attention_mask=mask,
                    output_hidden_states=True)
    tensors = {
        "input_ids": ids.to(torch.int64), "token_type_ids": types_.to(torch.int64),
        "attention_mask": mask.to(torch.int64),
        "last_hidden_state": out.hidden_states[-1].contiguous(),
        "mlm_logits": out.prediction_logits.contiguous(),
        "nsp_logits": out.seq_relationship_logits.contiguous(),
        "word_embeddings": model.bert.embeddings.word_embeddings.weight.detach().contiguous(),
        "layer0_query_weight":
            model.bert.encoder.layer[0].attention.self.query.weight.detach().contiguous(),
    }
    save_file(tensors, os.path.join(HERE, "reference.safetensors"))
    print("wrote", os.path.join(HERE, "reference.safetensors"))


if __name__ == "__main__":
    main()
