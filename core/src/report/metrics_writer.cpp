#include "polyhal/app/metrics_writer.hpp"

#include <fmt/format.h>

#include <chrono>

namespace polyhal {

MetricsWriter::MetricsWriter(const MetricsTargets& targets) {
  if (!targets.json_lines.empty())
    json_lines_ = std::make_unique<CheckedFile>(targets.json_lines, "--metrics-out");
  if (!targets.csv.empty()) {
    csv_ = std::make_unique<CheckedFile>(targets.csv, "--metrics-csv");
    csv_->append("time,event,step,name,value\n");
  }
  if (!targets.tensorboard_dir.empty())
    tensorboard_ = std::make_unique<TensorBoardWriter>(targets.tensorboard_dir);
}

MetricsWriter::~MetricsWriter() = default;

void MetricsWriter::write(nlohmann::json record) {
  const double now =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  record["time"] = now;
  if (json_lines_)
    json_lines_->append(record.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) +
                        "\n");
  if (!csv_ && !tensorboard_) return;
  const std::string event = record.value("event", "run");
  if (const auto step = record.find("step"); step != record.end() && step->is_number_integer()) {
    last_step_ = step->get<std::int64_t>();
  }
  for (const auto& [name, value] : record.items()) {
    if (!value.is_number() || name == "step" || name == "time" || name == "epoch") continue;
    const double number = value.get<double>();
    if (tensorboard_) tensorboard_->scalar(event + "/" + name, last_step_, number);
    if (csv_)
      csv_->append(fmt::format("{:.3f},{},{},{},{}\n", now, event, last_step_, name, number));
  }
}

void MetricsWriter::write_summary(nlohmann::json summary) {
  summary["event"] = "summary";
  for (const char* key : {"backend", "device", "model", "precision", "seq_len", "global_batch",
                          "sequences_per_second"}) {
    if (!summary.contains(key)) summary[key] = nullptr;
  }
  write(summary);
  if (json_lines_) json_lines_->sync();
  if (csv_) csv_->sync();
  if (tensorboard_) tensorboard_->sync();
}

}  // namespace polyhal
