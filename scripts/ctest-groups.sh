# Sourced by scripts/test.sh and scripts/sanitize.sh: the ctest names that
# run alone (serially) and stay out of the sanitized run. They are the
# package and ABI symbol checks, the formatting and docs checks, the
# out-of-tree build, end-to-end learning runs (squad, glue, parity, the
# real model), runs between network namespaces and under mpirun with
# timeouts (multihost, supervise), the HTTP server under load (serve_http,
# serve_models;
# serve_hardening, which times /health during heavy requests; serving
# BERT-large 64 times over in a plan),
# the HTML report screenshots, the IPU and
# Gaudi conformance sweeps, and five long computations that read no input.
# Everything else has run two at a time for many CI runs (sanitize.sh runs
# it with ctest -j 2), so scripts/test.sh runs it two at a time as well.
# shellcheck disable=SC2034  # used by the scripts that source this file
serial_tests="package|abi_symbols|serve_http|serve_models|serve_hardening|HardeningRound4\\.ServeCheckPlansEveryReplica|clang_formatted|docs_commands|out_of_tree|SquadTask|GlueTask|RealModel|PretrainParity|multihost|supervise|HtmlReport\\.|op_conformance_ipu|op_conformance_gaudi|DType\\.F32ToBf16IsNearestEvenByDefinitionForAll2To32Inputs|Packing\\.NnlshpPacksAsWellAsTheReference|Pretrain\\.KilledRunResumesWithTheIdenticalLossTrajectory|PretrainMixedPrecision\\.Bf16OnGaudiTrainsAndBf16OnIpuIsRefused|PluginCollectives\\.PreTrainingThroughTheEngine"
# The serial tests of what differs between Debian releases, which CI's
# Debian 13 leg runs beside the package build's tests (debian13-test.sh
# --ci): the ABI symbols, the out-of-tree plugin build, SIGTERM under the
# release's Open MPI, two MPI ranks fine-tuning, and pre-training at real
# sizes against transformers (the release's oneDNN).
release_tests="abi_symbols|out_of_tree|supervise|GlueTask\\.TwoMpiRanks|PretrainParity"
