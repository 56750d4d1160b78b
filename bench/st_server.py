#!/usr/bin/env python3
"""sentence-transformers behind a minimal HTTP server, as a user would put
it up for bench/serve_bench.py: Python's threading HTTP server, one model,
`encode` under a lock for each request (the library batches within a
request, not across them), OpenAI's embeddings shape, GET /health.

  python st_server.py MODEL_DIR PORT THREADS [onnx|torch|openvino] [ONNX_FILE]
"""
import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import torch
from sentence_transformers import SentenceTransformer

MODEL_DIR, PORT, THREADS = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
BACKEND = sys.argv[4] if len(sys.argv) > 4 else "onnx"
torch.set_num_threads(THREADS)
# The ONNX file bench/serve_bench.py exports (or quantises) beside config.json.
ONNX_FILE = sys.argv[5] if len(sys.argv) > 5 else "model.onnx"
extra = {"model_kwargs": {"file_name": ONNX_FILE}} if BACKEND == "onnx" else {}
model = SentenceTransformer(MODEL_DIR, device="cpu", backend=BACKEND, **extra)
lock = threading.Lock()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def answer(self, status, body):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        self.answer(200, {"status": "ok"})

    def do_POST(self):
        request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        texts = request["input"] if isinstance(request["input"], list) else [request["input"]]
        with lock:
            embeddings = model.encode(texts, batch_size=32, normalize_embeddings=True)
        self.answer(200, {"object": "list", "model": request.get("model", ""),
                          "data": [{"object": "embedding", "index": i, "embedding": e.tolist()}
                                   for i, e in enumerate(embeddings)]})

    def log_message(self, *args):
        pass


ThreadingHTTPServer(("127.0.0.1", PORT), Handler).serve_forever()
