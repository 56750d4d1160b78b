// `polyhal serve MODEL_DIR --port P ...`: text-embeddings-inference's one
// command, as overrides of a config that may not exist (docs/serving.md,
// "One command").
#pragma once

#include <boost/program_options.hpp>

#include "cli.hpp"

namespace polyhal {

/// serve's own flags (--port, --host, --precision, --api-key-file,
/// --max-batch-tokens).
boost::program_options::options_description serve_flag_options();

/// Turns serve's flags into config overrides; a MODEL_DIR in place of the
/// config (or MODEL_ID in the environment) makes the whole config:
/// backend cpu, task inference, model.dir, then the TEI environment
/// variables (PORT, MAX_BATCH_TOKENS), then the flags, then --set. The
/// flags also apply over a config file; the environment only without one.
void add_serve_overrides(const boost::program_options::variables_map& vm, CommandLine& cl);

}  // namespace polyhal
