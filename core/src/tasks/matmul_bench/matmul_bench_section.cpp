// Config section `matmul_bench`: the shapes, dtypes and repetitions.
#include "matmul_bench_section.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "polyhal/app/config_keys.hpp"
#include "polyhal/app/matmul_bench.hpp"

namespace polyhal {
namespace {

ConfigSection matmul_bench_section() {
  using M = MatmulBenchConfig;
  auto section = task_section<M>();
  SectionKeys<M> keys(section, task_section_of<M>);
  keys.custom(
          "shapes", "required: a list of [M, N, K], C[M, N] = A[M, K] x B[K, N]",
          [](const ConfigValue& v, M& m) {
            if (!v.is_list() || v.items().empty()) v.fail("expected a non-empty list of [M, N, K]");
            const auto shapes = v.items();
            for (std::size_t i = 0; i < shapes.size(); ++i) {
              const auto mnk = shapes[i].items();
              if (!shapes[i].is_list() || mnk.size() != 3)
                shapes[i].named(fmt::format("{}[{}]", v.key(), i)).fail("expected [M, N, K]");
              m.shapes.push_back({mnk[0].integer(1), mnk[1].integer(1), mnk[2].integer(1)});
            }
          },
          [](const M& m) {
            std::vector<std::string> shapes;
            for (const auto& s : m.shapes)
              shapes.push_back(fmt::format("[{}, {}, {}]", s[0], s[1], s[2]));
            return fmt::format("[{}]", fmt::join(shapes, ", "));
          })
      .add("dtype", &M::dtype, "f32, f16 or bf16")
      .add("out_dtype", &M::out_dtype, "the output's dtype (default: dtype)", {},
           {.value = [](const M& m) { return config_text(m.out_dtype.value_or(m.dtype)); }})
      .add("iterations", &M::iterations, "measured runs")
      .add("warmup", &M::warmup, "unmeasured runs first", repeats(0));
  section.check = [](const ConfigValue& given, RunConfig& config) {
    if (!given.has("shapes")) config.fail("matmul_bench.shapes", "required: a list of [M, N, K]");
  };
  return section;
}

}  // namespace

const TaskSchema& matmul_bench_schema() {
  static const TaskSchema schema{
      .name = "matmul-bench",
      .sections = {},
      .required = {"matmul_bench"},
      .own = {std::make_shared<const ConfigSection>(matmul_bench_section())}};
  return schema;
}

}  // namespace polyhal
