"""The clients people use against `polyhal serve` (run by serve_test.py with
the interpreter of BUILD_DIR/client-venv, scripts/client-venv.sh): the
official openai client's embeddings.create, unchanged but for base_url and
api_key, in its default base64 encoding and in float; and requests on /embed
and /v1/models. Each answer must equal the reference embeddings given.

  client-venv/bin/python serve_clients.py PORT TOKEN REFERENCE.json
"""
import json
import sys

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
models = client.models.list()
assert len(models.data) == 1, models

headers = {"Authorization": f"Bearer {token}"}
response = requests.post(f"http://127.0.0.1:{port}/embed", json={"inputs": texts},
                         headers=headers, timeout=30)
assert response.status_code == 200, response.text
assert all(close(g, w) for g, w in zip(response.json(), want)), "requests /embed"
response = requests.get(f"http://127.0.0.1:{port}/v1/models", headers=headers, timeout=30)
assert response.json()["data"][0]["object"] == "model", response.text
print(f"ok: openai {openai.__version__} embeddings.create (base64 and float, a list and one "
      f"string), an empty input as BadRequestError, models.list; requests {requests.__version__} "
      f"on /embed and /v1/models: the embeddings polyhal run writes")
