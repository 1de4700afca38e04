// Checkpoint save/load (see checkpoint.h).
#include "lb/train/checkpoint.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "lb/core/random.h"
#include "lb/nn/layers.h"
#include "lb/io/atomic_file.h"
#include "lb/io/safetensors.h"

namespace lb::train {

namespace {
constexpr const char* kModelFile = "model.safetensors";
constexpr const char* kOptimizerFile = "optimizer.safetensors";
constexpr const char* kStateFile = "trainer_state.json";
constexpr int kFormatVersion = 1;

nlohmann::json rng_to_json(const PhiloxStream::State& s) {
  return {{"seed", s.seed}, {"subsequence", s.subsequence}, {"offset", s.offset},
          {"has_cached_normal", s.has_cached_normal}, {"cached_normal", s.cached_normal}};
}

PhiloxStream::State rng_from_json(const nlohmann::json& j) {
  return {j.at("seed").get<uint64_t>(), j.at("subsequence").get<uint64_t>(),
          j.at("offset").get<uint64_t>(), j.at("has_cached_normal").get<bool>(),
          j.at("cached_normal").get<float>()};
}

// The backward strategy of every Linear/Conv2d that has one, by dotted layer name.
std::vector<std::pair<std::string, std::shared_ptr<nn::backward::Strategy>>> strategies_of(
    nn::Module& model) {
  std::vector<std::pair<std::string, std::shared_ptr<nn::backward::Strategy>>> out;
  for (auto& [name, m] : model.named_modules()) {
    std::shared_ptr<nn::backward::Strategy> s;
    if (auto* lin = dynamic_cast<nn::Linear*>(m)) s = lin->backward_strategy();
    else if (auto* conv = dynamic_cast<nn::Conv2d*>(m)) s = conv->backward_strategy();
    if (s) out.emplace_back(name, s);
  }
  return out;
}

std::map<std::string, Tensor> to_map(const io::SafetensorsFile& f) {
  std::map<std::string, Tensor> m;
  for (const auto& [n, t] : f.tensors) m[n] = t;
  return m;
}
}  // namespace

void save_checkpoint(const std::string& dir, const nn::Module& model,
                     const optim::Optimizer* optimizer, const optim::LrSchedule* schedule,
                     const nlohmann::json& extra) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(dir, ec);
  LB_CHECK(fs::is_directory(dir), "cannot create checkpoint directory ", dir, ": ", ec.message());
  nn::NamedTensors weights;
  for (auto& [n, t] : model.state_dict()) weights.emplace_back(n, t);
  io::save_safetensors((fs::path(dir) / kModelFile).string(), weights,
                       {{"format", "pt"}, {"producer", "leanback"}});
  nlohmann::json state;
  state["format_version"] = kFormatVersion;
  if (optimizer) {
    io::save_safetensors((fs::path(dir) / kOptimizerFile).string(), optimizer->state_tensors());
    state["optimizer"] = optimizer->state_json();
    state["step"] = optimizer->step_count();
  } else {
    state["step"] = 0;
  }
  if (schedule) state["lr_schedule"] = schedule->to_json();
  state["rng"] = rng_to_json(default_generator().state());
  // Learned per-layer strategy state (INSTANT bases, HOT quantiser choices).
  nlohmann::json backward = nlohmann::json::object();
  for (auto& [name, s] : strategies_of(const_cast<nn::Module&>(model)))
  {
    backward[name] = {{"type", s->type()}, {"state", s->state_json()}};
    if (s->fell_back()) backward[name]["fallback_reason"] = s->fallback_reason();
  }
  state["backward"] = backward;
  state["extra"] = extra;
  io::write_text_atomic((fs::path(dir) / kStateFile).string(), state.dump(2) + "\n");
}

LoadedCheckpoint load_checkpoint(const std::string& dir, nn::Module& model,
                                 optim::Optimizer* optimizer) {
  namespace fs = std::filesystem;
  const std::string state_path = (fs::path(dir) / kStateFile).string();
  LB_CHECK(fs::is_directory(dir), "checkpoint directory ", dir, " does not exist");
  LB_CHECK(fs::exists(state_path), "checkpoint ", dir, " has no ", kStateFile,
           " (an interrupted save, or not a leanback checkpoint)");
  LoadedCheckpoint out;
  {
    std::ifstream in(state_path);
    std::stringstream ss;
    ss << in.rdbuf();
    try {
      out.state = nlohmann::json::parse(ss.str());
    } catch (const std::exception& e) {
      LB_FAIL(state_path, ": invalid JSON: ", e.what());
    }
  }
  LB_CHECK(out.state.value("format_version", 0) == kFormatVersion, state_path,
           ": unsupported format_version ", out.state.value("format_version", 0), " (expected ",
           kFormatVersion, ")");
  const std::string model_path = (fs::path(dir) / kModelFile).string();
  const io::SafetensorsFile weights = io::load_safetensors(model_path);
  try {
    out.report = model.load_state_dict(to_map(weights), /*strict=*/true);
  } catch (const Error& e) {
    LB_FAIL(model_path, ": ", e.what());
  }
  try {
    out.step = out.state.at("step").get<int64_t>();
    if (optimizer) {
      LB_CHECK(out.state.contains("optimizer"), state_path, ": no optimizer state in this checkpoint");
      const io::SafetensorsFile opt = io::load_safetensors((fs::path(dir) / kOptimizerFile).string());
      optimizer->load_state(out.state.at("optimizer"), to_map(opt));
    }
    default_generator().set_state(rng_from_json(out.state.at("rng")));
    // Strategy state is restored where the layer runs the same strategy type as when saved;
    // a run resumed with another strategy (e.g. --strategy vanilla) starts that one fresh.
    const nlohmann::json backward = out.state.value("backward", nlohmann::json::object());
    for (auto& [name, s] : strategies_of(model)) {
      if (!backward.contains(name)) continue;
      const auto& entry = backward.at(name);
      if (entry.at("type").get<std::string>() != s->type()) {
        out.notes.push_back("layer " + name + ": checkpoint has " +
                            entry.at("type").get<std::string>() + " state, layer now runs " +
                            s->type() + "; starting it fresh");
        continue;
      }
      s->load_state_json(entry.at("state"));
      if (entry.contains("fallback_reason")) s->fall_back_to_exact(entry.at("fallback_reason").get<std::string>());
    }
  } catch (const nlohmann::json::exception& e) {
    LB_FAIL(state_path, ": malformed entry: ", e.what());
  }
  return out;
}

}  // namespace lb::train
