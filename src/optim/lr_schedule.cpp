// LR schedules: linear warm-up, then constant / linear decay to 0 / cosine to min_ratio.
#include "lb/optim/lr_schedule.h"

#include <algorithm>
#include <cmath>

#include "lb/core/error.h"

namespace lb::optim {

double LrSchedule::factor(int64_t step) const {
  if (warmup_steps > 0 && step < warmup_steps)
    return static_cast<double>(step) / static_cast<double>(warmup_steps);
  if (kind == ScheduleKind::Constant) return 1.0;
  const double span = static_cast<double>(std::max<int64_t>(1, total_steps - warmup_steps));
  const double progress = std::clamp(static_cast<double>(step - warmup_steps) / span, 0.0, 1.0);
  if (kind == ScheduleKind::Linear) return 1.0 - progress;
  return min_ratio + (1.0 - min_ratio) * 0.5 * (1.0 + std::cos(M_PI * progress));
}

nlohmann::json LrSchedule::to_json() const {
  const char* names[] = {"constant", "linear", "cosine"};
  return {{"type", names[static_cast<int>(kind)]}, {"warmup_steps", warmup_steps},
          {"total_steps", total_steps}, {"min_ratio", min_ratio}};
}

LrSchedule LrSchedule::from_json(const nlohmann::json& j, const std::string& path) {
  LB_CHECK(j.is_object(), path, ": expected an object like {\"type\": \"linear\", ...}");
  LrSchedule s;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& k = it.key();
    const auto& v = it.value();
    if (k == "type") {
      LB_CHECK(v.is_string(), path, ".type: expected a string");
      const std::string t = v.get<std::string>();
      if (t == "constant") s.kind = ScheduleKind::Constant;
      else if (t == "linear") s.kind = ScheduleKind::Linear;
      else if (t == "cosine") s.kind = ScheduleKind::Cosine;
      else LB_FAIL(path, ".type: unknown schedule '", t, "'; valid: constant, linear, cosine");
    } else if (k == "warmup_steps" || k == "total_steps") {
      LB_CHECK(v.is_number_integer() && v.get<int64_t>() >= 0, path, ".", k,
               ": expected a non-negative integer");
      (k == "warmup_steps" ? s.warmup_steps : s.total_steps) = v.get<int64_t>();
    } else if (k == "min_ratio") {
      LB_CHECK(v.is_number() && v.get<double>() >= 0 && v.get<double>() <= 1, path,
               ".min_ratio: expected a number in [0, 1]");
      s.min_ratio = v.get<double>();
    } else {
      LB_FAIL(path, ": unknown key '", k, "'; valid: type, warmup_steps, total_steps, min_ratio");
    }
  }
  LB_CHECK(s.kind == ScheduleKind::Constant || s.total_steps > s.warmup_steps, path,
           ": total_steps must exceed warmup_steps for a decaying schedule");
  return s;
}

}  // namespace lb::optim
