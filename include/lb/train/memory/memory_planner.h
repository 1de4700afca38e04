// The memory planner (config memory.budget, --memory-budget): picks, per recomputable block
// (BERT/ViT encoder layer, ResNet block) and for the rest of the model, how its kept tensors
// are stored — exact, bf16 or int8 codecs (memory.codecs) — whether the block is recomputed
// in backward (memory.recompute) and, where the config leaves every layer vanilla, whether
// the block's Linear/Conv2d layers run HOT (a backward rule per block), so that a step's
// activation peak fits the budget at the least cost.
//
// HOT is a candidate only where it can matter: when the config's strategies cannot reach the
// budget, or when memory.fidelity_weight is low enough that HOT's faster backward could pay
// for its fidelity penalty; otherwise its six settings are not profiled (they would double the
// planner's time for a choice the knapsack cannot take). Where it is profiled only to reach
// the budget, its two int8 settings come first and the other four only where those lower the
// smallest reachable budget. INSTANT is not a candidate: its
// bases are calibrated on the run's data and its ranks adapt per layer, so one profiling step
// does not tell what it will keep.
//
// Recomputation with the second forward's products in bf16 (memory.recompute_bf16), its
// block's input kept in int8, is a candidate where the CPU's bf16 kernel out-runs its f32 one,
// the run is f32, and the plan from the six settings below recomputes some block (or finds
// none that fits): then one more setting is profiled. Its forward costs about two thirds of
// an f32 one on ViT-tiny; it is lossy by bf16 rounding (its prior measured as the codecs').
//
// Profile: one attributed step (memory_report.h) per uniform setting — exact, bf16, int8,
// each with and without every block recomputed — on the config's first batch (text: padded
// to max_seq_len, padding not skipped, so that no batch of the run is larger), plus two
// timed steps each; a batch of 8 or more on two small batches of its shape, extended to its
// size (src/train/memory/scaled_report.h), and, under memory.budget, with the leanest
// optimizer setting, so that profiling holds no more than the budget. Shorter batches' plans
// are profiled untimed and take the longest's times (retime). From them, per block and setting: the bytes it keeps at the end of the
// forward, and the bytes it holds while backward runs through it (a recomputed block: its
// input plus its activations made again); the bytes in flight at the peak (gradients,
// decoded copies, temporaries: the largest seen at any profile's peak); step times.
//
// Peak model: forward ends holding Σ kept; backward, reaching block b (last to first), holds
// the kept bytes of the blocks before b, b's working bytes, and the rest of the model; plus
// what is in flight. Solve: a multiple-choice knapsack by dynamic programming over the blocks
// in order, the state being the kept bytes of the blocks so far (in 1/1024ths of the budget,
// rounded up: never under-counted), each block's choice checked against the budget where
// backward reaches it. Exact: the blocks are few (6-24) and the state small, so the optimum
// of the model is found in milliseconds; an ILP solver would add a dependency for nothing.
// Cost: added step time (profiled) plus a fidelity penalty for lossy codecs, so exact is
// chosen wherever it fits, recomputation (exact, slower) and codecs (lossy, cheap) traded by
// memory.fidelity_weight; HOT's prior (from the same probe) is two orders above int8's, so it
// is taken where nothing exact or coded fits, or where the weight says speed matters more.
// The plan is then measured with one attributed step; if the peak
// exceeds the budget the planner solves again with the budget lowered by the excess (at
// most three times).
//
// Micro-batches: where no plan fits the config's batch (the floor is what backward holds in
// flight, not what is kept: ResNet-18 at batch 128 holds two 32 MiB stage-1 gradients at
// once), the planner splits it, as Hugging Face's auto_find_batch_size halves a batch that
// does not fit but keeping the batch an optimizer step sees: k micro-batches of B/k examples
// with their gradients accumulated (data.batch_size B/k, train.grad_accum × k; the trainer
// weighs each by its share of the step's examples, so the step is the batch's, exact for
// LayerNorm models; BatchNorm normalises each micro-batch on its own, as under data-parallel
// training without SyncBatchNorm). k is the smallest divisor of B at least the batch's
// smallest reachable / budget (what is kept and held scales with the micro-batch at most
// linearly), then larger ones; each is planned as a batch is, with the config's strategies
// (HOT is not a candidate: splitting the batch costs no accuracy where HOT would).
// memory.micro_batches: false forbids it. Errors name the smallest budget reachable.
#pragma once
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "lb/core/error.h"
#include "lb/train/config.h"
#include "lb/train/memory/memory_budget.h"

namespace lb::train {

// One way to keep a block's (or the rest's) tensors.
struct KeepOption {
  std::string codec = "f32";  // f32 (as they are), bf16, int8
  bool recompute = false;
  std::string strategy;  // "" = the config's backward strategies; "hot": the block's layers HOT
  bool bf16_products = false;  // recomputed with the second forward's products in bf16
  // "exact", "int8", "recompute + int8", "recompute in bf16 + int8", "hot + recompute", ...
  std::string name() const;
};

struct PlannedPart {
  std::string part;  // a block's module path, or "(rest)": embeddings, pooler, head
  KeepOption option;
  int64_t kept_bytes = 0;     // at the end of the forward, profiled
  int64_t working_bytes = 0;  // while backward runs through it
  double added_ms = 0;        // over exact, per step
  double fidelity = 0;        // the codec's and strategy's prior (1 - gradient cosine)
  std::string why;
};

// The plan for text batches whose sequences are all at most max_len tokens (profiled at
// data.batch_size × max_len, nothing packed: an upper bound for any such batch). Made for
// BERT where the plan for the longest batch compresses anything and puts no layer on HOT:
// shorter batches keep less, so they get by with less compression (or none).
//
// Where padding is skipped, token-wise layers keep bytes by real tokens while attention runs
// on the padded layout: plans keyed by `max_tokens` serve batches of any length (up to
// max_seq_len) with at most that many real tokens (profiled at batch × max_seq_len with that
// many kept: whole sequences first, the rest padding).
struct LengthPlan {
  int64_t max_len = 0;
  int64_t max_tokens = 0;  // 0: any number (at most batch × max_len)
  MemorySection section;  // memory.codecs and memory.recompute for such batches
  int64_t predicted_peak = 0, measured_peak = 0;
  double predicted_step_ms = 0;
  double exact_step_ms = 0;  // its profile's step with nothing planned (0: a plan from before it)
  std::string summary;  // "exact", "3 recompute, 3 bf16; rest exact", ...
  std::string label() const;  // "96" (max_len), "2048 real tokens" (max_tokens)
  // The batches it serves: "sequences of at most 96 tokens", "at most 2048 real tokens".
  std::string batches() const;
};

// Under memory.budget (the whole step), the optimizer settings the planner chose besides what
// activations keep: the moments' bits (optimizer.state_bits) and the update in backward
// (optimizer.in_backward; src/train/memory/step_levers.h).
struct StepLevers {
  int64_t state_bits = 32;
  bool in_backward = false;
  std::string name() const;  // "f32 optimizer state", "8-bit optimizer state, updated in backward"
  bool operator==(const StepLevers&) const = default;
};
// What a step holds besides activations: each category's peak over a step once the optimizer
// holds its state, measured.
struct FixedBytes {
  int64_t parameters = 0, buffers = 0, gradients = 0, optimizer = 0;
  int64_t total() const { return parameters + buffers + gradients + optimizer; }
  nlohmann::json to_json() const;
  static FixedBytes from_json(const nlohmann::json& j, const std::string& source);
};

struct MemoryPlan {
  std::string budget_text;
  // memory.budget (the whole step: budget, predicted and measured peaks are the allocator's
  // over a step) or memory.activation_budget (activation peaks). Under the first, the levers
  // chosen, what they hold, and the activation bytes left to the codecs and recomputation.
  BudgetScope scope = BudgetScope::Activation;
  StepLevers levers;
  FixedBytes fixed;
  int64_t activation_budget_bytes = 0;
  // Micro-batches per batch of the config (1: none; see above): the plan's other fields are
  // a micro-batch's (its data.batch_size / micro_batches examples), but for the budget and
  // exact_vanilla_peak, which refer to the config's batch, and batch_smallest_reachable.
  int64_t micro_batches = 1;
  int64_t batch_smallest_reachable = 0;  // at the config's batch, where micro_batches > 1
  int64_t budget_bytes = 0;
  int64_t exact_vanilla_peak = 0;  // what "0.1x" refers to
  int64_t exact_peak = 0;          // the config's strategies, nothing planned
  int64_t predicted_peak = 0;
  int64_t measured_peak = 0;        // the planned step's, profiled
  int64_t smallest_reachable = 0;   // predicted for the leanest choice everywhere
  double exact_step_ms = 0, predicted_step_ms = 0;
  double profile_s = 0;  // the planner's own time
  // The most the allocator held while the planner profiled and measured (0: a plan from
  // before it was recorded); a whole-step budget in bytes bounds it but for a fraction's one
  // exact step (scaled_report.h).
  int64_t planner_peak = 0;
  std::vector<PlannedPart> parts;
  MemorySection section;  // the memory.codecs and memory.recompute that carry the plan out
  // The backward rules that do ({"match": "BLOCK.*", "type": "hot"} per HOT block; empty: none).
  nlohmann::json backward_rules = nlohmann::json::array();
  // Plans for shorter batches: by longest sequence, longest first, then by real tokens, most
  // first (empty: this plan serves every batch).
  std::vector<LengthPlan> by_length;
  // plan_inputs() of the config it was made for (null: a plan written before they were
  // recorded); a saved plan serves another run only where they are equal (load_memory_plan).
  nlohmann::json profiled_on;
  // The plan for a batch whose longest sequence has `longest` tokens and whose micro-batches
  // hold at most `tokens` real tokens each (0: not known): an index into by_length, or -1 for
  // this plan. Of the covering plan of the shortest length and that of the fewest tokens, the
  // one that adds the smaller share to its own profile's exact step: what a plan adds to a
  // batch scales with that batch, while the two profiles' shapes differ (32 x 64 against
  // 32 x 128 with fewer tokens kept), so their predicted times do not compare.
  int length_plan_for(int64_t longest, int64_t tokens = 0) const;
  const MemorySection& section_for(int index) const { return index < 0 ? section : by_length.at(index).section; }

  std::string table() const;  // plan.txt
  std::string summary() const;  // blocks per choice, then the rest: "4 recompute + int8, 2 int8; rest bf16"
  nlohmann::json to_json() const;
  // A saved plan (plan.json), for resume; errors name `source`.
  static MemoryPlan from_json(const nlohmann::json& j, const std::string& source);
};

// What each part keeps and costs under each option, profiled.
struct MemoryProfile {
  std::vector<std::string> blocks;
  std::vector<KeepOption> options;                  // block_options(), then any strategy's
  std::vector<std::vector<int64_t>> kept, working;  // [block][option]
  // [block][option]: whether the block's own module scope (a codec rule matching the block)
  // and its submodules' (matching "block.*") keep anything, in forward or recomputation
  std::vector<std::vector<bool>> keeps_own, keeps_inner;
  std::vector<double> added_ms;                     // [option]: per block, over exact (HOT: may be < 0)
  std::vector<int64_t> in_flight;                   // [option]: at the peak, besides what is kept
  std::vector<int64_t> rest;                        // [rest_codecs() index]: kept outside blocks
  double exact_ms = 0;
  int64_t exact_peak = 0;
  double tokens = 0;  // in the batch profiled (real ones where given; images: examples)
};

// The candidates: per block, exact, bf16, int8, each with and without recomputation (under
// `strategy`: the same six with the block's layers on that backward strategy); for the rest
// of the model, f32 (exact), bf16, int8.
std::vector<KeepOption> block_options(const std::string& strategy = "");
// Recomputation in bf16, the block's input in int8 (see above).
KeepOption bf16_recompute_option();
// Whether it is a candidate for `config` on this CPU: bf16 products faster, an f32 run.
bool bf16_recompute_offered(const Config& config);
const std::vector<std::string>& rest_codecs();

// The batch the planner profiles: text at its largest (every sequence max_seq_len long, no
// padding skipped: an upper bound for any batch of the run); images have one shape.
// Whether the user asked the run to stop (Ctrl-C, SIGTERM: train's stop flag). The planner
// asks before each profiling step set and, asked to stop, throws PlanInterrupted.
using StopCheck = std::function<bool()>;
struct PlanInterrupted : Error {
  using Error::Error;
};
// The planner's line to its caller while it works (minutes on a CPU): before each profiling
// step it asks `stop` (true: PlanInterrupted, nothing written), and after each it says what it
// profiled, k of n, what it measured and the time so far (log lines on stderr, unless quiet).
class PlanWatch {
 public:
  explicit PlanWatch(StopCheck stop = {}, bool quiet = true);
  void check(const Config& config) const;
  // `step_ms` 0: not timed; `what`: the peak measured.
  void profiled(const std::string& setting, size_t k, size_t n, const std::string& batch, int64_t peak_bytes,
                double step_ms, const char* what = "activation peak") const;
  // The most the allocator held while a profile or measurement ran (MemoryReport's
  // run_peak_bytes): the planner's own peak, which a whole-step budget also bounds.
  void held(int64_t bytes) const { most_held_ = std::max(most_held_, bytes); }
  int64_t most_held() const { return most_held_; }

 private:
  StopCheck stop_;
  bool quiet_;
  mutable int64_t most_held_ = 0;
  std::chrono::steady_clock::time_point start_;
};
// No plan fits the budget at the batch profiled; `needed` is the least that batch was found
// to need (predicted, or measured where a plan's step overran), `budget` the bound in bytes
// and `exact_vanilla_peak` what a fraction referred to.
// `fixed`: under memory.budget, the least the step holds besides activations (parameters,
// gradients, optimizer state), which micro-batches do not shrink.
struct BudgetUnreachable : Error {
  BudgetUnreachable(const std::string& msg, int64_t needed_, int64_t budget_, int64_t exact_vanilla_peak_,
                    int64_t fixed_ = 0)
      : Error(msg), needed(needed_), budget(budget_), exact_vanilla_peak(exact_vanilla_peak_), fixed(fixed_) {}
  int64_t needed, budget, exact_vanilla_peak, fixed;
};

// The next number of micro-batches to plan a batch of `batch` in, after `k_failed` micro-batches
// (1: the whole batch) were found to need `needed` bytes against `budget`: the smallest divisor
// of `batch` above k_failed and at least k_failed · needed / budget, since a micro-batch's reach
// shrinks no faster than its size (what does not shrink with it, parameters' buffers and the
// like, only slows it); `batch` itself where no smaller divisor qualifies, 0 past it.
int64_t next_micro_batches(int64_t batch, int64_t k_failed, int64_t needed, int64_t budget);

// With `real_tokens` > 0 (BERT): padding skipped, the batch as memory_report keeps it.
Config worst_case_batch(Config c, int64_t real_tokens = 0);
// One attributed and two timed steps per uniform setting (see above), on the worst-case batch
// (with `real_tokens`: that many real tokens).
// timed_steps 0: no time is measured (see retime).
MemoryProfile profile_memory(const Config& config, const std::string& strategy, int64_t real_tokens = 0,
                             const PlanWatch& watch = PlanWatch(), int timed_steps = 2);
// Times from another profile of the same model (the longest batch's, for a shorter one's
// plan): its exact step and each option's added time at the same option, times the share of
// its tokens p's batch has, since what an option adds per block scales with the tokens it
// runs on.
void retime(MemoryProfile& p, const MemoryProfile& from);
// Adds block_options(candidate) to `p`: six more settings, every block's layers on `candidate`
// (backward rules "BLOCK.*"), the rest of the model as the config has it. `leanest`: its two
// int8 settings only (with and without recomputation), which tell whether the candidate
// lowers the smallest reachable budget; then `rest` adds the other four.
enum class StrategyColumns { All, Leanest, Rest };
void profile_strategy(MemoryProfile& p, const Config& config, const std::string& strategy, const std::string& candidate,
                      const PlanWatch& watch = PlanWatch(), StrategyColumns which = StrategyColumns::All);
// Adds bf16_recompute_option() to `p` (profiled on the worst-case batch, as profile_memory).
void profile_bf16_recompute(MemoryProfile& p, const Config& config, const std::string& strategy,
                            int64_t real_tokens = 0, const PlanWatch& watch = PlanWatch(), int timed_steps = 2);

// The knapsack on a profile: the least-cost choice per block (indices into profile.options)
// and for the rest (into rest_codecs()) whose predicted peak fits `budget`; feasible = false
// where none does. Deterministic: the same profile and budget give the same choice.
struct MemoryChoice {
  bool feasible = false;
  double cost = 0;
  int64_t predicted_peak = 0;
  std::vector<int> block;
  int rest = 0;
};
MemoryChoice choose_memory(const MemoryProfile& profile, int64_t budget, double fidelity_weight);
// The smallest budget choose_memory() can meet.
int64_t smallest_reachable_budget(const MemoryProfile& profile);

// Plans `config` (its data, model and strategies; `strategy`: the --strategy override) for
// `budget` (BERT: shorter batches too, for the same bytes: MemoryPlan::by_length, unless
// `shorter_batches` is false), with lossy codecs weighed by `fidelity_weight` (the penalty,
// as a share of the exact step time, of a codec whose prior is 1 - cos = 1 on every block;
// config memory.fidelity_weight). Errors name the config file and the smallest reachable budget.
// `stop`, `quiet`: see PlanWatch.
// `data_parallel`: the run has several ranks (the update in backward is not a lever there).
MemoryPlan plan_memory(const Config& config, const std::string& strategy, const MemoryBudget& budget,
                       bool shorter_batches = true, const StopCheck& stop = {}, bool quiet = true,
                       bool data_parallel = false);

// What a plan rests on: the model, its layers' strategies (and `strategy`, the --strategy
// override), frozen parameters, LoRA, the batch's shape and padding, the precision. Another
// model, batch or precision keeps other bytes; optimizer, schedule, seed and epochs do not.
nlohmann::json plan_inputs(const Config& config, const std::string& strategy);

// A plan saved by `leanback plan --json` or by a run (memory_plan.json), for a run of
// `config` with `strategy` (train --memory-plan: planned once, it serves every seed). Errors
// name `file`: not a plan, made for other inputs (the first that differs, both values), or
// for another budget than config's memory.budget where that is set.
MemoryPlan load_memory_plan(const std::string& file, const Config& config, const std::string& strategy);

// config with the plan's memory.codecs and memory.recompute in place of its own, its
// backward rules (HOT blocks) ahead of the config's, and its micro-batches (data.batch_size
// divided, train.grad_accum multiplied by them).
Config apply_memory_plan(Config config, const MemoryPlan& plan);

}  // namespace lb::train
