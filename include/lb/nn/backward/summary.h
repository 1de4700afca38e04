// What a backward strategy reports about one layer, typed (Strategy::summary()): the fields
// generic code (accounting, the calibration log, compare, bench) reads, so none of it needs
// to know a strategy's own report keys. Strategy::report() is to_json() plus the strategy's
// own details (HOT's quantisation errors, INSTANT's rank history) under their own keys.
//
// Standalone (no strategy.h) so strategy.h can include it for the virtual's return type.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace lb::nn::backward {

struct StrategySummary {
  // The last call that saved for backward (LayerGeometry's reported part).
  struct Geometry {
    int64_t B = 0, L = 0, I = 0, O = 0;
    int64_t sequences = 0, longest = 0;  // a padding-free call; 0: not packed
  };
  // Per sample, at that geometry (docs/algorithms.md "Accounting").
  struct Paper {
    double backward_flops = 0;       // a multiply-add = 2
    double saved_bytes_fp32 = 0;
  };
  struct Measured {
    int64_t backward_calls = 0;
    double backward_ms_total = 0;
    int64_t saved_bytes_last_call = 0;
    // Backward calls made while calibrating: calibration cost, not training's.
    int64_t calibration_backward_calls = 0;
    double calibration_backward_ms_total = 0;
  };
  // One operand's low-rank basis (x's or g_y's).
  struct OperandRank {
    bool valid = false;   // a calibration has produced it; the rest is meaningful only then
    std::string axis;     // "token" | "channel"
    int64_t n = 0;        // the projected dimension
    int64_t rank = 0;     // kept basis size R
    int64_t k = 0;        // the energy rule's index (0 when degenerate)
    double eta = 1.0;     // compensation factor used
    double energy_fraction = 0.0;
    bool degenerate = false;
    // {"valid": false}, or every field.
    nlohmann::json to_json() const;
    static OperandRank from_json(const nlohmann::json& j);
  };
  struct Ranks {
    OperandRank x, g_y;
  };
  // The strategy's own calibration work (statistics, eigendecompositions), apart from the
  // calibration passes' backward calls (Measured).
  struct CalibrationCost {
    int64_t calibrations = 0;
    double flops = 0;
    double ms = 0;
  };

  std::string layer, type;
  bool conv = false;
  std::optional<std::string> fallback_reason;  // set once the layer fell back to exact
  Geometry geometry;
  Paper paper;
  Measured measured;
  bool compressing = false;  // whether a call at `geometry` runs the compressed backward
  std::optional<Ranks> ranks;               // low-rank strategies
  std::optional<std::string> quantizer;     // e.g. HOT's LQS choice
  std::optional<CalibrationCost> calibration;

  // The report's generic keys: layer, type, conv, fallback_reason, geometry, paper
  // (MFLOPs, MiB), measured, compressing, and when set ranks {"x", "g_y"}, quantizer,
  // calibration (its cost with the calibration passes' backward calls).
  nlohmann::json to_json() const;
  // {"flops", "statistics_and_eigh_ms", "backward_calls", "backward_ms", "calibrations"};
  // null without calibration.
  nlohmann::json calibration_json() const;
  // Back from a report (Strategy::report(), as eval_results.json keeps it). Reports written
  // before the generic keys existed are read through their strategy keys ("instant", "hot").
  static StrategySummary from_json(const nlohmann::json& report);
};

}  // namespace lb::nn::backward
