"""The clients people use against `polyhal serve` (run by serve_test.py with
the interpreter of BUILD_DIR/client-venv, scripts/client-venv.sh): the
official openai client's embeddings.create, unchanged but for base_url and
api_key, in its default base64 encoding, in float, the quantised encodings
and with dimensions; huggingface_hub's InferenceClient on the server's URL
(TEI's POST /: feature_extraction, sentence_similarity); LangChain's
OpenAIEmbeddings as its docs configure it for an OpenAI-compatible server
that tokenizes itself (check_embedding_ctx_length=False); and requests on
/embed and /v1/models. Each answer must equal the reference embeddings given.

  client-venv/bin/python serve_clients.py PORT TOKEN REFERENCE.json
"""
import json
import sys

import huggingface_hub
import langchain_openai
import numpy
import openai
import requests

port, token, reference = sys.argv[1], sys.argv[2], sys.argv[3]
texts, want = json.load(open(reference))


def close(a, b):
    return len(a) == len(b) and max(abs(x - y) for x, y in zip(a, b)) <= 1e-5


client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key=token, max_retries=0)
for encoding in (openai.NOT_GIVEN, "float"):
    answer = client.embeddings.create(model="all-MiniLM-L6-v2", input=texts,
                                      encoding_format=encoding)
    got = [item.embedding for item in sorted(answer.data, key=lambda d: d.index)]
    assert all(close(g, w) for g, w in zip(got, want)), f"openai client ({encoding})"
    assert answer.usage.prompt_tokens > 0, answer.usage
single = client.embeddings.create(model="m", input=texts[0]).data[0].embedding
assert close(single, want[0])
try:
    client.embeddings.create(model="m", input="")
    raise AssertionError("an empty input was accepted")
except openai.BadRequestError as e:
    assert "empty string" in str(e), e
for encoding in ("int8", "uint8", "binary", "ubinary"):
    packed = client.embeddings.create(model="m", input=texts[0], encoding_format=encoding,
                                      dimensions=64).data[0].embedding
    assert len(packed) == (64 if "int8" in encoding else 8), (encoding, len(packed))
    assert all(float(v).is_integer() for v in packed), (encoding, packed[:4])
short = client.embeddings.create(model="m", input=texts[0], dimensions=64).data[0].embedding
norm = sum(x * x for x in want[0][:64]) ** 0.5
assert close(short, [x / norm for x in want[0][:64]]), "openai client dimensions=64"
models = client.models.list()
assert len(models.data) == 1, models

hub = huggingface_hub.InferenceClient(model=f"http://127.0.0.1:{port}", token=token)
array = hub.feature_extraction(texts)
assert array.shape == (len(texts), len(want[0])), array.shape
assert all(close(list(map(float, g)), w) for g, w in zip(array, want)), "InferenceClient"
similar = hub.sentence_similarity(texts[0], other_sentences=texts[1:])
cosines = [float(numpy.dot(want[0], w)) for w in want[1:]]  # the references are normalised
assert close(similar, cosines), (similar, cosines)

lang = langchain_openai.OpenAIEmbeddings(model="all-MiniLM-L6-v2", api_key=token,
                                         base_url=f"http://127.0.0.1:{port}/v1",
                                         check_embedding_ctx_length=False)
assert all(close(g, w) for g, w in zip(lang.embed_documents(texts), want)), "LangChain"
assert close(lang.embed_query(texts[0]), want[0]), "LangChain embed_query"

headers = {"Authorization": f"Bearer {token}"}
response = requests.post(f"http://127.0.0.1:{port}/embed", json={"inputs": texts},
                         headers=headers, timeout=30)
assert response.status_code == 200, response.text
assert all(close(g, w) for g, w in zip(response.json(), want)), "requests /embed"
response = requests.get(f"http://127.0.0.1:{port}/v1/models", headers=headers, timeout=30)
assert response.json()["data"][0]["object"] == "model", response.text
print(f"ok: openai {openai.__version__} embeddings.create (base64, float, int8, uint8, binary, "
      f"ubinary, dimensions; a list and one string), an empty input as BadRequestError, "
      f"models.list; huggingface_hub {huggingface_hub.__version__} InferenceClient "
      f"feature_extraction and sentence_similarity; LangChain OpenAIEmbeddings "
      f"(check_embedding_ctx_length=False); requests {requests.__version__} on /embed and "
      f"/v1/models: the embeddings polyhal run writes")
