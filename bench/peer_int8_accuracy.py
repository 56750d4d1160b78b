#!/usr/bin/env python3
"""How far the peers' int8 path moves all-MiniLM-L6-v2's sentence
embeddings: sentence-transformers on ONNX Runtime's dynamic int8 graph,
quantised for this CPU as bench/serve_bench.py quantises it for the -int8
servers, against sentence-transformers' f32 embeddings of the 1,464 real
sentences (tests/data/real_model/reference.safetensors, the reference
polyhal's RealModel tests read). Prints the worst and mean cosine, the
figures docs/bert.md gives for polyhal's int8.

  build/serve-bench-venv/bin/python bench/peer_int8_accuracy.py [--model DIR]
"""
import argparse
import os
import sys
import tempfile

import numpy as np
from safetensors.numpy import load_file

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import serve_bench  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default=os.path.join(serve_bench.ROOT, "build", "models",
                                                        "all-MiniLM-L6-v2"))
    args = parser.parse_args()
    data = os.path.join(serve_bench.ROOT, "tests", "data", "real_model")
    with open(os.path.join(data, "sentences.txt")) as f:
        sentences = [line.strip() for line in f if line.strip()]
    reference = load_file(os.path.join(data, "reference.safetensors"))["embeddings"]
    from sentence_transformers import SentenceTransformer

    with tempfile.TemporaryDirectory() as work:
        onnx_model = serve_bench.model_with_onnx(os.path.abspath(args.model), work)
        int8_model = serve_bench.model_with_int8_onnx(onnx_model, work)
        model = SentenceTransformer(int8_model, device="cpu", backend="onnx",
                                    model_kwargs={"file_name": "model_quantized.onnx"})
        got = model.encode(sentences, batch_size=32, normalize_embeddings=True)
    want = reference / np.linalg.norm(reference, axis=1, keepdims=True)
    cosine = np.sum(got * want, axis=1)
    worst = int(np.argmin(cosine))
    print(f"ONNX Runtime dynamic int8 ({serve_bench.onnx_quantization_config()}): "
          f"{len(sentences)} sentences; worst cosine {cosine[worst]:.4f} (sentence {worst + 1}); "
          f"mean {np.mean(cosine):.4f}")


if __name__ == "__main__":
    main()
