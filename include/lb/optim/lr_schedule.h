// Learning-rate schedules as a multiplicative factor of each group's initial lr, evaluated
// at the number of optimizer steps taken (Hugging Face's get_*_schedule_with_warmup).
#pragma once
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

namespace lb::optim {

enum class ScheduleKind { Constant, Linear, Cosine };

struct LrSchedule {
  ScheduleKind kind = ScheduleKind::Constant;
  int64_t warmup_steps = 0;
  int64_t total_steps = 0;  // Linear/Cosine: where the decay ends
  double min_ratio = 0.0;   // Cosine: floor as a fraction of the initial lr
  double factor(int64_t step) const;
  nlohmann::json to_json() const;
  static LrSchedule from_json(const nlohmann::json& j, const std::string& path);
};

}  // namespace lb::optim
