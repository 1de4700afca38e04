// StrategySummary to and from its JSON view (see summary.h).
#include "lb/nn/backward/summary.h"

namespace lb::nn::backward {

namespace {

constexpr double kMiB = 1024.0 * 1024.0;

// j[key] when it is an object, else an empty one: reports from older builds lack keys.
const nlohmann::json& object_at(const nlohmann::json& j, const char* key) {
  static const nlohmann::json empty = nlohmann::json::object();
  if (!j.is_object()) return empty;
  const auto it = j.find(key);
  return it != j.end() && it->is_object() ? *it : empty;
}

}  // namespace

nlohmann::json StrategySummary::OperandRank::to_json() const {
  if (!valid) return {{"valid", false}};
  return {{"valid", true},
          {"axis", axis},
          {"n", n},
          {"rank", rank},
          {"k", k},
          {"eta", eta},
          {"energy_fraction", energy_fraction},
          {"degenerate", degenerate}};
}

StrategySummary::OperandRank StrategySummary::OperandRank::from_json(const nlohmann::json& j) {
  OperandRank o;
  if (!j.is_object()) return o;
  o.valid = j.value("valid", false);
  o.axis = j.value("axis", std::string());
  o.n = j.value("n", int64_t{0});
  o.rank = j.value("rank", int64_t{0});
  o.k = j.value("k", int64_t{0});
  o.eta = j.value("eta", 1.0);
  o.energy_fraction = j.value("energy_fraction", 0.0);
  o.degenerate = j.value("degenerate", false);
  return o;
}

nlohmann::json StrategySummary::calibration_json() const {
  if (!calibration) return nullptr;
  return {{"calibrations", calibration->calibrations},
          {"flops", calibration->flops},
          {"statistics_and_eigh_ms", calibration->ms},
          {"backward_calls", measured.calibration_backward_calls},
          {"backward_ms", measured.calibration_backward_ms_total}};
}

nlohmann::json StrategySummary::to_json() const {
  nlohmann::json j;
  j["layer"] = layer;
  j["type"] = type;
  j["conv"] = conv;
  if (fallback_reason) j["fallback_reason"] = *fallback_reason;
  j["geometry"] = {{"B", geometry.B}, {"L", geometry.L}, {"I", geometry.I}, {"O", geometry.O}};
  if (geometry.sequences > 0) {
    j["geometry"]["sequences"] = geometry.sequences;
    j["geometry"]["longest"] = geometry.longest;
  }
  j["paper"] = {{"backward_mflops_per_sample", paper.backward_flops / 1e6},
                {"saved_mib_fp32_per_sample", paper.saved_bytes_fp32 / kMiB}};
  j["measured"] = {{"backward_calls", measured.backward_calls},
                   {"backward_ms_total", measured.backward_ms_total},
                   {"saved_bytes_last_call", measured.saved_bytes_last_call},
                   {"calibration_backward_calls", measured.calibration_backward_calls},
                   {"calibration_backward_ms_total", measured.calibration_backward_ms_total}};
  j["compressing"] = compressing;
  if (ranks) j["ranks"] = {{"x", ranks->x.to_json()}, {"g_y", ranks->g_y.to_json()}};
  if (quantizer) j["quantizer"] = *quantizer;
  if (calibration) j["calibration"] = calibration_json();
  return j;
}

StrategySummary StrategySummary::from_json(const nlohmann::json& r) {
  StrategySummary s;
  if (!r.is_object()) return s;
  s.layer = r.value("layer", std::string());
  s.type = r.value("type", std::string());
  s.conv = r.value("conv", false);
  if (const auto it = r.find("fallback_reason"); it != r.end() && it->is_string()) s.fallback_reason = it->get<std::string>();
  const nlohmann::json& g = object_at(r, "geometry");
  s.geometry = {g.value("B", int64_t{0}), g.value("L", int64_t{0}), g.value("I", int64_t{0}),
                g.value("O", int64_t{0}), g.value("sequences", int64_t{0}), g.value("longest", int64_t{0})};
  const nlohmann::json& p = object_at(r, "paper");
  s.paper = {p.value("backward_mflops_per_sample", 0.0) * 1e6, p.value("saved_mib_fp32_per_sample", 0.0) * kMiB};
  const nlohmann::json& m = object_at(r, "measured");
  s.measured = {m.value("backward_calls", int64_t{0}), m.value("backward_ms_total", 0.0),
                m.value("saved_bytes_last_call", int64_t{0}), m.value("calibration_backward_calls", int64_t{0}),
                m.value("calibration_backward_ms_total", 0.0)};
  // The generic keys; reports without them carry the same facts under their strategy's key.
  const nlohmann::json& instant = object_at(r, "instant");
  const nlohmann::json& hot = object_at(r, "hot");
  const bool old_instant = !instant.empty(), old_hot = !hot.empty();
  if (const nlohmann::json& ranks = r.contains("ranks") ? object_at(r, "ranks") : instant; !ranks.empty())
    s.ranks = Ranks{OperandRank::from_json(object_at(ranks, "x")), OperandRank::from_json(object_at(ranks, "g_y"))};
  if (r.contains("compressing"))
    s.compressing = r.value("compressing", false);
  else if (old_instant)
    s.compressing = instant.value("compressing", false) && !s.fallback_reason;
  else if (old_hot)
    s.compressing = !s.fallback_reason;  // HOT compressed every call until it fell back
  if (const auto it = r.find("quantizer"); it != r.end() && it->is_string())
    s.quantizer = it->get<std::string>();
  else if (old_hot)
    s.quantizer = object_at(hot, "lqs").value("choice", std::string());
  if (const nlohmann::json& c = object_at(r, "calibration"); !c.empty())
    s.calibration = CalibrationCost{c.value("calibrations", instant.value("calibrations", int64_t{0})),
                                    c.value("flops", 0.0), c.value("statistics_and_eigh_ms", 0.0)};
  return s;
}

}  // namespace lb::nn::backward
