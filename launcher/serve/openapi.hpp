#pragma once
// `GET /openapi.json`: the OpenAPI 3.1 description of what `polyhal serve`
// accepts and answers, so that a client generator, a gateway or a test can
// check requests against the server's own rules (every request body lists
// its fields and refuses others, as the parsers in serve_api.cpp do).
// tests/serve_openapi.py validates real requests and answers against it.
#include <string>

namespace polyhal::serve {

/// The whole document, as JSON text.
const std::string& openapi_document();

}  // namespace polyhal::serve
