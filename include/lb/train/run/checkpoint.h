// Training checkpoints: a directory holding
//   model.safetensors      the model's state_dict (Hugging Face-compatible names)
//   optimizer.safetensors  optimizer buffers ("exp_avg.<param>", ...), when an optimizer is given
//   trainer_state.json     step, optimizer hyperparameters and groups, LR schedule, the
//                          default generator's position, each layer's backward-strategy
//                          state (INSTANT bases, HOT quantiser choices), and the caller's
//                          extra JSON (config)
// A save is all or nothing: the files are written and fsynced into a hidden staging sibling
// (.NAME.saving-ID), which then replaces the directory in one rename (RENAME_EXCHANGE, or
// retire-then-rename where the file system lacks it); the previous checkpoint stays loadable
// until that moment, and the next save clears what a killed one left (restoring a retired
// checkpoint whose replacement never landed). Every file carries the save's id (safetensors
// metadata "save_id", the state's "save_id"): loading refuses files of different saves.
#pragma once
#include <string>

#include <nlohmann/json.hpp>

#include "lb/core/error.h"
#include "lb/nn/module.h"
#include "lb/optim/lr_schedule.h"
#include "lb/optim/optimizer.h"

namespace lb::train {

// A checkpoint refused because a weight or optimizer buffer holds NaN or inf: a diverged run
// is never saved (and never loaded), so its last checkpoint stays the last good one.
class NonFiniteState : public Error {
 public:
  explicit NonFiniteState(const std::string& msg) : Error(msg) {}
};

// The name of the first floating-point tensor holding a NaN or inf ("" when all are finite).
std::string first_non_finite(const optim::NamedTensors& tensors);

// Throws NonFiniteState (nothing written) when the model's weights or the optimizer's state
// are not all finite.
void save_checkpoint(const std::string& dir, const nn::Module& model,
                     const optim::Optimizer* optimizer, const optim::LrSchedule* schedule,
                     const nlohmann::json& extra = nlohmann::json::object());

struct LoadedCheckpoint {
  nlohmann::json state;  // trainer_state.json
  int64_t step = 0;
  nn::LoadReport report;
  std::vector<std::string> notes;  // e.g. strategy state not restored because the type changed
};

// Restores the model (strict: every key must match in name, shape and dtype kind), the
// optimizer (if given) and the default generator. Errors name the file and the key;
// non-finite weights or optimizer state are refused (NonFiniteState).
LoadedCheckpoint load_checkpoint(const std::string& dir, nn::Module& model,
                                 optim::Optimizer* optimizer);

}  // namespace lb::train
