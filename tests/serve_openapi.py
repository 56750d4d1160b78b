"""Real requests and answers against `polyhal serve`'s own /openapi.json
(run by serve_outputs_test.py and serve_heads_test.py with the client venv's
interpreter, scripts/client-venv.sh, for jsonschema): each request body is
valid under its route's requestBody schema and the server answers 200 with
a body valid under the 200 schema; each malformed body is invalid under the
schema and the server answers the 4xx the document lists, in its error
schema. Both ways: the document says no more and no less than the server.

  client-venv/bin/python serve_openapi.py PORT embeddings|classifier|sparse
"""
import importlib.metadata
import sys

import jsonschema
import referencing
import referencing.jsonschema
import requests

port, kind = sys.argv[1], sys.argv[2]
base = f"http://127.0.0.1:{port}"
doc = requests.get(f"{base}/openapi.json", timeout=30).json()
registry = referencing.Registry().with_resource(
    "urn:polyhal", referencing.Resource.from_contents(
        doc, default_specification=referencing.jsonschema.DRAFT202012))


def validator(schema):
    return jsonschema.Draft202012Validator(schema, registry=registry)


def ref(pointer):
    return {"$ref": "urn:polyhal#" + pointer}


def answer_schema(path, method, status):
    response = doc["paths"][path][method]["responses"].get(str(status))
    assert response, f"{method.upper()} {path}: status {status} is not in the document"
    return response["content"]["application/json"]["schema"]["$ref"][1:]


TEXT = "The quick brown fox jumps over the lazy dog."
GOOD = {
    "embeddings": [
        ("/v1/embeddings", {"input": [TEXT, "a"], "model": "m", "encoding_format": "base64"}),
        ("/v1/embeddings", {"input": TEXT, "encoding_format": "int8", "dimensions": 16}),
        ("/embeddings", {"input": TEXT, "encoding_format": "ubinary"}),
        ("/embed", {"inputs": [TEXT], "normalize": False, "truncate": True,
                    "truncation_direction": "Left", "dimensions": 8}),
        ("/embed_all", {"inputs": "short", "truncate": True}),
        ("/similarity", {"inputs": {"source_sentence": TEXT, "sentences": ["a", "b"]}}),
        ("/similarity", {"inputs": {"source_sentence": TEXT, "sentences": ["a"]},
                         "parameters": {"truncate": True, "truncation_direction": "left"}}),
        ("/", {"inputs": [TEXT, "a"], "normalize": True}),
        ("/", {"inputs": {"source_sentence": TEXT, "sentences": ["a"]}}),
        ("/tokenize", {"inputs": [TEXT, "b"], "add_special_tokens": False}),
    ],
    "sparse": [
        ("/embed_sparse", {"inputs": ["the king was at the market .", "water"]}),
        ("/embed_sparse", {"inputs": "the river", "truncate": True,
                           "truncation_direction": "Left"}),
        ("/", {"inputs": "the king"}),
    ],
    "classifier": [
        ("/predict", {"inputs": [["a question", "a passage"]], "raw_scores": True}),
        ("/predict", {"inputs": "one text"}),
        ("/", {"inputs": [["a question", "a passage"]]}),
        ("/", {"query": "q", "texts": ["a", "b"]}),
        ("/rerank", {"query": "q", "texts": ["a", "b"], "return_text": True}),
        ("/rerank", {"query": "q", "documents": ["a", {"text": "b"}], "top_n": 1,
                     "return_documents": True}),
        ("/v2/rerank", {"query": "q", "documents": ["a", "b"], "model": "m"}),
    ],
}
BAD = {
    "embeddings": [
        ("/v1/embeddings", {"input": "a", "encoding_format": "int4"}, 400),
        ("/v1/embeddings", {"input": "a", "colour": "red"}, 400),
        ("/embed", {"inputs": []}, 400),
        ("/embed", {"inputs": "a", "truncation_direction": "Middle"}, 400),
        ("/embed_all", {"inputs": "a", "dimensions": 3}, 400),
        ("/similarity", {"inputs": {"source_sentence": "a"}}, 400),
        ("/tokenize", {"input": "a"}, 400),
    ],
    "sparse": [
        ("/embed_sparse", {"inputs": "a", "dimensions": 3}, 400),
        ("/embed_sparse", {"inputs": []}, 400),
    ],
    "classifier": [
        ("/predict", {"inputs": [["a", "b", "c"]]}, 400),
        ("/rerank", {"query": "q", "texts": ["a"], "truncation_direction": "Left"}, 400),
        ("/rerank", {"query": "q", "documents": ["a"], "texts": ["b"]}, 400),
    ],
}

if kind == "embeddings":  # ids of this model's own vocabulary
    ids = [t["id"] for t in requests.post(f"{base}/tokenize", json={"inputs": TEXT},
                                          timeout=30).json()[0]]
    GOOD[kind].append(("/decode", {"ids": [ids, ids[:2]]}))
    BAD[kind].append(("/decode", {"ids": [ids], "skip_special_tokens": False}, 400))
checked = 0
for path, body in GOOD[kind]:
    schema = doc["paths"][path]["post"]["requestBody"]["content"]["application/json"]["schema"]
    validator(ref(schema["$ref"][1:])).validate(body)
    response = requests.post(base + path, json=body, timeout=60)
    assert response.status_code == 200, f"{path} {body}: {response.status_code} {response.text}"
    validator(ref(answer_schema(path, "post", 200))).validate(response.json())
    checked += 1
for path, body, status in BAD[kind]:
    schema = doc["paths"][path]["post"]["requestBody"]["content"]["application/json"]["schema"]
    assert not validator(ref(schema["$ref"][1:])).is_valid(body), \
        f"{path} {body}: the document accepts a body the server refuses"
    response = requests.post(base + path, json=body, timeout=60)
    assert response.status_code == status, f"{path} {body}: {response.status_code}"
    validator(ref(answer_schema(path, "post", status))).validate(response.json())
    checked += 1
for path in ("/info", "/v1/models", "/health"):
    response = requests.get(base + path, timeout=30)
    assert response.status_code == 200, path
    validator(ref(answer_schema(path, "get", 200))).validate(response.json())
    checked += 1
print(f"ok: {checked} requests and answers ({kind}) valid under /openapi.json as the server "
      f"treats them (jsonschema {importlib.metadata.version('jsonschema')})")
