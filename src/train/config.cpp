// Config parsing, overrides and the resolved form (see config.h; keys in configs/README.md).
#include "lb/train/config.h"

#include "lb/io/json_file.h"

#include <cmath>
#include <filesystem>
#include <regex>
#include <fstream>
#include <cstdlib>
#include <limits>
#include <map>
#include <set>
#include <sstream>

#include "lb/core/error.h"
#include "lb/core/json_reader.h"
#include "lb/data/text_file.h"
#include "lb/nn/backward/policy.h"
#include "lb/train/export/peft_adapter.h"
#include "models/bert.h"
#include "models/resnet.h"
#include "models/vit.h"

namespace lb::train {

namespace {

constexpr int64_t kBig = std::numeric_limits<int32_t>::max();

std::vector<std::string> string_list(JsonReader& r, const std::string& key,
                                     const std::vector<std::string>& def) {
  const auto& v = r.raw(key);
  if (v.is_null()) return def;
  LB_CHECK(v.is_array(), r.path(), ".", key, ": expected a list of strings, got ", v.dump());
  std::vector<std::string> out;
  for (size_t i = 0; i < v.size(); ++i) {
    LB_CHECK(v[i].is_string(), r.path(), ".", key, "[", i, "]: expected a string, got ", v[i].dump());
    out.push_back(v[i].get<std::string>());
  }
  return out;
}

std::vector<double> number_list(JsonReader& r, const std::string& key, size_t n, double lo, double hi) {
  const auto& v = r.raw(key);
  if (v.is_null()) return {};
  LB_CHECK(v.is_array() && v.size() == n, r.path(), ".", key, ": expected a list of ", n,
           " numbers, got ", v.dump());
  std::vector<double> out;
  for (size_t i = 0; i < v.size(); ++i) {
    LB_CHECK(v[i].is_number(), r.path(), ".", key, "[", i, "]: expected a number, got ", v[i].dump());
    const double x = v[i].get<double>();
    LB_CHECK(x >= lo && x <= hi, r.path(), ".", key, "[", i, "]: ", x, " is out of range [", lo,
             ", ", hi, "]");
    out.push_back(x);
  }
  return out;
}

// "~/" and "${VAR}" in paths: HOME and environment variables, with LEANBACK_HOME defaulting
// to ~/.cache/leanback (where tools/fetch_pretrained.sh installs models).
std::string expand_path(const std::string& p, const std::string& where) {
  std::string out;
  const char* home = std::getenv("HOME");
  size_t i = 0;
  if (p.rfind("~/", 0) == 0) {
    LB_CHECK(home, where, ": '", p, "' starts with ~/ but HOME is not set");
    out = home;
    i = 1;
  }
  while (i < p.size()) {
    if (p.compare(i, 2, "${") == 0) {
      const size_t end = p.find('}', i);
      LB_CHECK(end != std::string::npos, where, ": '", p, "' has an unclosed ${");
      const std::string var = p.substr(i + 2, end - i - 2);
      const char* v = std::getenv(var.c_str());
      if (v && *v) out += v;
      else if (var == "LEANBACK_HOME" && home) out += leanback_home();
      else LB_FAIL(where, ": '", p, "' uses ${", var, "}, which is not set");
      i = end + 1;
    } else {
      out += p[i++];
    }
  }
  return out;
}

// The section object at j[key] (absent = empty); anything else is an error.
const nlohmann::json& section(const nlohmann::json& j, const std::string& key) {
  static const nlohmann::json empty = nlohmann::json::object();
  if (!j.contains(key)) return empty;
  LB_CHECK(j.at(key).is_object(), key, ": expected a JSON object, got ", j.at(key).dump());
  return j.at(key);
}

// Architecture keys accepted per model type: the names of its config's to_json().
nlohmann::json default_arch(const std::string& type) {
  nlohmann::json a;
  if (type == "bert") a = models::BertConfig().to_json();
  else if (type == "vit") a = models::ViTConfig().to_json();
  else a = models::ResNetConfig().to_json();
  a.erase("model_type");
  a.erase("num_labels");
  a.erase("num_classes");
  return a;
}

ModelSection parse_model(const nlohmann::json& j) {
  ModelSection m;
  JsonReader r(j, "model");
  m.type = r.choice("type", m.type, {"bert", "vit", "resnet"});
  m.pretrained = expand_path(r.string("pretrained", ""), "model.pretrained");
  m.num_labels = r.integer("num_labels", 0, 0, 100000);
  if (r.has("skip_padding")) {
    const nlohmann::json& v = r.raw("skip_padding");
    LB_CHECK(v.is_boolean() || v == "auto", "model.skip_padding: expected true, false or \"auto\", got ",
             v.dump());
    LB_CHECK(m.type == "bert", "model.skip_padding: applies to bert models (a ", m.type,
             " model has no padding)");
    m.skip_padding = v.is_boolean() ? (v.get<bool>() ? "true" : "false") : "auto";
  }
  LB_CHECK(m.pretrained.empty() || m.type != "resnet",
           "model.pretrained: Hugging Face directories load for bert and vit, not resnet");
  const nlohmann::json valid = default_arch(m.type);
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& k = it.key();
    if (k == "type" || k == "pretrained" || k == "num_labels" || k == "skip_padding") continue;
    if (!valid.contains(k)) {
      std::string names = "type, pretrained, num_labels, skip_padding";
      for (auto v = valid.begin(); v != valid.end(); ++v) names += ", " + v.key();
      LB_FAIL("model: unknown key '", k, "' for a ", m.type, " model; valid keys: ", names);
    }
    // With a pretrained directory only the dropout rates may change (from_pretrained's
    // hidden_dropout_prob=... overrides); the rest of the architecture is the checkpoint's.
    const bool dropout = k == "hidden_dropout_prob" || k == "attention_probs_dropout_prob";
    LB_CHECK(m.pretrained.empty() || dropout, "model.", k,
             ": architecture keys cannot be combined with model.pretrained (the directory's "
             "config.json defines the architecture; only hidden_dropout_prob and "
             "attention_probs_dropout_prob may override it)");
    m.arch[k] = it.value();
    r.allow(k);
  }
  r.finish();
  // Type and range checks of the architecture by the model's own parser (paths model.<key>).
  nlohmann::json full = valid;
  full.update(m.arch);
  if (m.type == "bert") (void)models::BertConfig::from_json(full, "model");
  else if (m.type == "vit") (void)models::ViTConfig::from_json(full, "model");
  else (void)models::ResNetConfig::from_json(full, "model");
  return m;
}

// The keys of a user's own text data (data.task text_classification / text_regression); for
// any other task they would be ignored, so they are refused.
void parse_own_text_keys(JsonReader& r, DataSection& d) {
  const bool own = is_own_text_task(d.task);
  for (const char* k : {"format", "text_columns", "label_column", "labels"})
    LB_CHECK(own || !r.has(k), r.path(), ".", k, ": only for data.task text_classification or text_regression "
             "(a user's own CSV, TSV or JSON Lines files), not '", d.task, "'");
  if (!own) return;
  std::vector<std::string> formats{"auto"};
  for (const auto& f : data::text_format_names()) formats.push_back(f);
  d.format = r.choice("format", d.format, formats);
  if (r.has("text_columns") && r.raw("text_columns").is_string())
    d.text_columns = {r.string("text_columns", "")};
  else
    d.text_columns = string_list(r, "text_columns", d.text_columns);
  LB_CHECK(d.text_columns.size() == 1 || d.text_columns.size() == 2, r.path(), ".text_columns: one column (a text) "
           "or two (a sentence pair), got ", d.text_columns.size());
  LB_CHECK(d.text_columns.size() == 1 || d.text_columns[0] != d.text_columns[1], r.path(),
           ".text_columns: the same column twice");
  for (size_t i = 0; i < d.text_columns.size(); ++i)
    LB_CHECK(!d.text_columns[i].empty(), r.path(), ".text_columns[", i, "]: empty column name");
  d.label_column = r.string("label_column", d.label_column);
  LB_CHECK(!d.label_column.empty(), r.path(), ".label_column: empty column name");
  d.labels = string_list(r, "labels", {});
  const bool regression = d.task == "text_regression";
  LB_CHECK(!regression || d.labels.empty(), r.path(), ".labels: a regression task has no class names");
  LB_CHECK(regression || d.labels.empty() || d.labels.size() >= 2, r.path(),
           ".labels: a classification needs at least two classes, got ", d.labels.size());
  for (size_t i = 0; i < d.labels.size(); ++i)
    for (size_t k = 0; k < i; ++k)
      LB_CHECK(d.labels[i] != d.labels[k], r.path(), ".labels[", i, "]: '", d.labels[i], "' is also labels[", k, "]");
}

DataSection parse_data(const nlohmann::json& j) {
  DataSection d;
  JsonReader r(j, "data");
  d.task = r.string("task", d.task);
  d.dir = expand_path(r.string("dir", ""), "data.dir");
  d.vocab = expand_path(r.string("vocab", ""), "data.vocab");
  d.max_seq_len = r.integer("max_seq_len", d.max_seq_len, 3, 100000);
  d.padding = r.choice("padding", d.padding, {"auto", "dynamic", "max_length"});
  d.batch_size = r.integer("batch_size", d.batch_size, 1, 1 << 20);
  d.eval_batch_size = r.integer("eval_batch_size", 0, 0, 1 << 20);
  d.workers = r.integer("workers", d.workers, 0, 64);
  d.train_split = r.string("train_split", d.train_split);
  d.eval_split = r.string("eval_split", "");
  d.max_train_examples = r.integer("max_train_examples", 0, 0, kBig);
  d.max_eval_examples = r.integer("max_eval_examples", 0, 0, kBig);
  d.random_crop_padding = r.integer("random_crop_padding", 0, 0, 64);
  d.horizontal_flip = r.boolean("horizontal_flip", false);
  d.mean = number_list(r, "mean", 3, 0, 1);
  d.std = number_list(r, "std", 3, 1e-6, 10);
  d.synthetic_train = r.integer("synthetic_train", d.synthetic_train, 1, 10000000);
  d.synthetic_eval = r.integer("synthetic_eval", d.synthetic_eval, 1, 10000000);
  parse_own_text_keys(r, d);
  r.finish();
  const bool image = d.task == "cifar10" || d.task == "cifar100" || d.task == "image_folder";
  LB_CHECK(d.task == "synthetic" || image || !d.dir.empty(), "data.dir: required for task '",
           d.task, "' (the folder holding its train/dev/test ", is_own_text_task(d.task) ? "files)" : "TSV files)");
  LB_CHECK(!image || !d.dir.empty(), "data.dir: required for task '", d.task, "'");
  return d;
}

TrainSection parse_train(const nlohmann::json& j) {
  TrainSection t;
  JsonReader r(j, "train");
  t.epochs = r.number("epochs", t.epochs, 0, 1e6);
  t.max_steps = r.integer("max_steps", 0, 0, int64_t{1} << 40);
  LB_CHECK(t.epochs > 0 || t.max_steps > 0, "train: set epochs > 0 or max_steps > 0");
  t.grad_accum = r.integer("grad_accum", 1, 1, 1 << 20);
  t.max_grad_norm = r.number("max_grad_norm", t.max_grad_norm, 0, 1e12);
  t.log_every = r.integer("log_every", t.log_every, 1, kBig);
  t.eval_every = r.integer("eval_every", 0, 0, kBig);
  t.save_every = r.integer("save_every", 0, 0, kBig);
  t.keep_checkpoints = r.integer("keep_checkpoints", t.keep_checkpoints, 1, 1000);
  t.early_stopping_patience = r.integer("early_stopping_patience", 0, 0, kBig);
  t.grad_probe_every = r.integer("grad_probe_every", 0, 0, kBig);
  t.seed = static_cast<uint64_t>(r.integer("seed", 42, 0, std::numeric_limits<int64_t>::max()));
  t.label_smoothing = r.number("label_smoothing", 0, 0, 0.999);
  t.precision = r.choice("precision", t.precision, {"f32", "bf16", "tf32"});
  t.bucket_cap_mb = r.number("bucket_cap_mb", t.bucket_cap_mb, 0, 1 << 20);
  LB_CHECK(t.bucket_cap_mb > 0, r.path(), ".bucket_cap_mb: must be > 0 MiB, got 0");
  r.finish();
  return t;
}

OptimizerSection parse_optimizer(const nlohmann::json& j) {
  OptimizerSection o;
  JsonReader r(j, "optimizer");
  o.type = r.choice("type", o.type, {"adamw", "adam", "sgd"});
  o.lr = r.number("lr", o.type == "sgd" ? 0.1 : o.lr, 0, 1e300);
  LB_CHECK(o.lr > 0, "optimizer.lr: must be > 0");
  o.weight_decay = r.number("weight_decay", 0, 0, 10);
  o.no_decay = string_list(r, "no_decay", o.no_decay);
  o.beta1 = r.number("beta1", o.beta1, 0, 0.999999);
  o.beta2 = r.number("beta2", o.beta2, 0, 0.999999999);
  o.eps = r.number("eps", o.eps, 0, 1);
  o.momentum = r.number("momentum", 0, 0, 0.999999);
  o.nesterov = r.boolean("nesterov", false);
  o.state_bits = r.integer("state_bits", 32, 4, 32);
  o.in_backward = r.boolean("in_backward", false);
  LB_CHECK(o.state_bits == 32 || o.state_bits == 8 || o.state_bits == 4, "optimizer.state_bits: 32 (f32), 8 or 4, got ",
           o.state_bits);
  r.finish();
  LB_CHECK(o.type != "sgd" || o.state_bits == 32, "optimizer.state_bits: only for adam and adamw");
  LB_CHECK(o.type == "sgd" || (!j.contains("momentum") && !j.contains("nesterov")),
           "optimizer.momentum/nesterov: only for type sgd (", o.type, " uses beta1/beta2)");
  LB_CHECK(o.type != "sgd" || (!j.contains("beta1") && !j.contains("beta2") && !j.contains("eps")),
           "optimizer.beta1/beta2/eps: only for adam and adamw");
  LB_CHECK(!o.nesterov || o.momentum > 0, "optimizer.nesterov: needs momentum > 0");
  return o;
}

ScheduleSection parse_schedule(const nlohmann::json& j) {
  ScheduleSection s;
  JsonReader r(j, "schedule");
  s.type = r.choice("type", s.type, {"constant", "linear", "cosine"});
  s.warmup_ratio = r.number("warmup_ratio", 0, 0, 1);
  s.warmup_steps = r.integer("warmup_steps", 0, 0, int64_t{1} << 40);
  s.min_ratio = r.number("min_ratio", 0, 0, 1);
  r.finish();
  LB_CHECK(!(s.warmup_ratio > 0 && s.warmup_steps > 0),
           "schedule: give warmup_ratio or warmup_steps, not both");
  return s;
}


}  // namespace

MemorySection MemorySection::from_json(const nlohmann::json& j, const std::string& at) {
  MemorySection m;
  JsonReader r(j, at);
  if (const auto& codecs = r.raw("codecs"); !codecs.is_null()) {
    LB_CHECK(codecs.is_array(), at, ".codecs: expected a list of rules ({\"match\", \"op\", \"role\", "
             "\"codec\", ...}), got ", codecs.dump());
    for (size_t i = 0; i < codecs.size(); ++i) {
      const std::string path = at + ".codecs[" + std::to_string(i) + "]";
      LB_CHECK(codecs[i].is_object(), path, ": expected a rule object, got ", codecs[i].dump());
      JsonReader c(codecs[i], path);
      autograd::CodecRule rule;
      rule.match = c.string("match", "*");
      rule.op = c.string("op", "*");
      rule.role = c.string("role", "*");
      LB_CHECK(c.has("codec"), path, ".codec: missing (f32, bf16, int8, int4 or int2)");
      const std::string name = c.choice("codec", "f32", {"f32", "bf16", "int8", "int4", "int2"});
      autograd::parse_codec(name, &rule.spec.codec);
      const auto& g = c.raw("group");
      if (g.is_string()) {
        LB_CHECK(g.get<std::string>() == "row", path, ".group: \"row\" or a number of elements, got ", g.dump());
        rule.spec.group = 0;
      } else if (!g.is_null()) {
        rule.spec.group = c.integer("group", 128, 1, int64_t{1} << 30);
      }
      const bool integer = rule.spec.codec != autograd::Codec::F32 && rule.spec.codec != autograd::Codec::BF16;
      const std::string rounding = c.choice("rounding", integer && rule.spec.codec != autograd::Codec::Int8
                                                            ? "stochastic" : "nearest",
                                            {"nearest", "stochastic"});
      LB_CHECK(integer || rounding == "nearest", path, ".rounding: ", name,
               " rounds to nearest only (stochastic rounding is for int8, int4, int2)");
      LB_CHECK(integer || g.is_null(), path, ".group: ", name, " has no groups (they are for int8, int4, int2)");
      rule.spec.stochastic = rounding == "stochastic";
      c.finish();
      m.codecs.push_back(rule);
    }
  }
  m.recompute = string_list(r, "recompute", {});
  m.recompute_bf16 = string_list(r, "recompute_bf16", {});
  for (const BudgetScope scope : {BudgetScope::Step, BudgetScope::Activation}) {
    const std::string key = scope == BudgetScope::Step ? "budget" : "activation_budget";
    const auto& b = r.raw(key);
    if (b.is_null()) continue;
    LB_CHECK(b.is_string() || (b.is_number() && b.get<double>() > 0), at, ".", key, ": a size such as \"120MB\", "
             "\"1.5GiB\" or \"0.1x\" (a fraction of the exact vanilla ",
             scope == BudgetScope::Step ? "step's" : "activation", " peak), or a number of bytes; got ", b.dump());
    LB_CHECK(!m.budget, at, ".budget and ", at, ".activation_budget: give one (the first bounds the whole step, "
             "the second its activations only)");
    // A number of bytes: whole ones as written; fractions and values past int64 (whose int64
    // conversion would be undefined) in full decimal, so parse names the bound they break.
    const auto number_text = [](double v) {
      return v >= 1 && v < kMaxBudgetBytes && v == std::floor(v) ? std::to_string(static_cast<int64_t>(v))
                                                                  : std::to_string(v);
    };
    m.budget = MemoryBudget::parse(b.is_string() ? b.get<std::string>() : number_text(b.get<double>()),
                                   at + "." + key, scope);
    LB_CHECK(m.planned_settings_given().empty(), at, ".", key, ": the planner chooses memory.codecs, "
             "memory.recompute and memory.recompute_bf16 itself, and the config sets ", m.planned_settings_given(),
             "; give the budget or those, not both");
  }
  m.fidelity_weight = r.number("fidelity_weight", 500, 0, 1e9);
  m.micro_batches = r.boolean("micro_batches", true);
  r.finish();
  return m;
}


std::string MemorySection::planned_settings_given() const {
  std::string keys;
  const auto add = [&](bool set, const char* key) {
    if (set) keys += (keys.empty() ? "" : ", ") + std::string(key);
  };
  add(!codecs.empty(), "memory.codecs");
  add(!recompute.empty(), "memory.recompute");
  add(!recompute_bf16.empty(), "memory.recompute_bf16");
  return keys;
}

nlohmann::json MemorySection::to_json() const {
  nlohmann::json rules = nlohmann::json::array();
  for (const auto& r : codecs) {
    nlohmann::json j = {{"match", r.match}, {"op", r.op}, {"role", r.role}, {"codec", autograd::codec_name(r.spec.codec)}};
    if (r.spec.codec != autograd::Codec::F32 && r.spec.codec != autograd::Codec::BF16) {
      j["group"] = r.spec.group == 0 ? nlohmann::json("row") : nlohmann::json(r.spec.group);
      j["rounding"] = r.spec.stochastic ? "stochastic" : "nearest";
    }
    rules.push_back(j);
  }
  // With a budget the codecs and recompute lists are the planner's (plan.json of the run), not
  // the config's: the section reads back as it was written.
  if (budget) {
    nlohmann::json out = {{budget->whole_step() ? "budget" : "activation_budget", budget->text},
                          {"fidelity_weight", fidelity_weight}};
    if (!micro_batches) out["micro_batches"] = false;
    return out;
  }
  nlohmann::json out = {{"codecs", rules}, {"recompute", recompute}};
  if (!recompute_bf16.empty()) out["recompute_bf16"] = recompute_bf16;
  return out;
}

LoraSection LoraSection::from_json(const nlohmann::json& j) {
  LoraSection l;
  if (j.is_null()) return l;
  l.enabled = true;
  JsonReader r(j, "lora");
  l.settings.r = r.integer("r", 8, 1, 1 << 20);
  l.settings.alpha = r.number("alpha", 8, 1e-12, 1e12);
  l.settings.dropout = r.number("dropout", 0, 0, 0.999);
  if (const auto& t = r.raw("target_modules"); t.is_string()) {
    LB_CHECK(!t.get<std::string>().empty(), "lora.target_modules: an empty regular expression");
    try {
      std::regex check(t.get<std::string>());
    } catch (const std::regex_error& e) {
      throw Error("lora.target_modules: '" + t.get<std::string>() + "' is not a regular expression (" + e.what() + ")");
    }
    l.targets.modules = {t.get<std::string>()};
    l.targets.regex = true;
  } else {
    l.targets.modules = string_list(r, "target_modules", {});
  }
  l.targets.modules_to_save = string_list(r, "modules_to_save", {});
  l.targets.bias = r.choice("bias", "none", {"none", "all", "lora_only"});
  r.finish();
  return l;
}

nlohmann::json LoraSection::to_json() const {
  return {{"r", settings.r},
          {"alpha", settings.alpha},
          {"dropout", settings.dropout},
          {"target_modules", targets.regex ? nlohmann::json(targets.modules.front()) : nlohmann::json(targets.modules)},
          {"modules_to_save", targets.modules_to_save},
          {"bias", targets.bias}};
}

Config Config::from_json(const nlohmann::json& j, const std::string& source) {
  LB_CHECK(j.is_object(), source, ": a config is a JSON object with sections model, data, train, "
           "optimizer, schedule, backward, freeze, memory, lora, output");
  try {
    Config c;
    c.source = source;
    JsonReader top(j, "config");
    for (const char* k : {"model", "data", "train", "optimizer", "schedule", "backward", "freeze",
                          "memory", "lora", "output", "comment"})
      top.allow(k);
    top.finish();
    c.model = parse_model(section(j, "model"));
    c.data = parse_data(section(j, "data"));
    c.train = parse_train(section(j, "train"));
    c.optimizer = parse_optimizer(section(j, "optimizer"));
    c.schedule = parse_schedule(section(j, "schedule"));
    c.backward = nn::backward::Policy::from_json(section(j, "backward"), "backward");
    if (j.contains("freeze")) {
      const auto& f = j.at("freeze");
      LB_CHECK(f.is_array(), "freeze: expected a list of parameter-name globs, got ", f.dump());
      for (size_t i = 0; i < f.size(); ++i) {
        LB_CHECK(f[i].is_string(), "freeze[", i, "]: expected a string, got ", f[i].dump());
        c.freeze.push_back(f[i].get<std::string>());
      }
    }
    c.memory = MemorySection::from_json(section(j, "memory"));
    if (j.contains("lora")) {
      LB_CHECK(j.at("lora").is_object(), "lora: expected an object (r, alpha, dropout, target_modules, "
               "modules_to_save, bias), got ", j.at("lora").dump());
      c.lora = LoraSection::from_json(j.at("lora"));
    }
    resolve_peft_adapter(c);  // model.pretrained a PEFT adapter: its base, its lora settings
    {
      JsonReader r(section(j, "output"), "output");
      c.output.dir = expand_path(r.string("dir", ""), "output.dir");
      if (r.has("export")) {
        const nlohmann::json& e = r.raw("export");
        LB_CHECK(e.is_boolean() || e == "merged", "output.export: expected true, false or \"merged\", got ", e.dump());
        c.output.export_model = e != false;
        c.output.export_merged = e == "merged";
      }
      r.finish();
    }
    return c;
  } catch (const Error& e) {
    // Prefix the file so the message reads "configs/x.json: optimizer.lr: ...".
    throw Error(source + ": " + e.what());
  }
}

std::string leanback_home() {
  const char* env = std::getenv("LEANBACK_HOME");
  if (env && *env) return env;
  const char* home = std::getenv("HOME");
  return home && *home ? std::string(home) + "/.cache/leanback" : std::string();
}

nlohmann::json Config::to_json() const {
  nlohmann::json model_j = {{"type", model.type}, {"num_labels", model.num_labels}};
  if (model.type == "bert")
    model_j["skip_padding"] = model.skip_padding == "auto" ? nlohmann::json("auto")
                                                            : nlohmann::json(model.skip_padding == "true");
  // An adapter reads back as given: its directory, whose adapter_config.json is the lora section.
  if (!model.pretrained.empty()) model_j["pretrained"] = model.pretrained_as_given();
  else {
    nlohmann::json a = default_arch(model.type);
    // A BERT's vocabulary is its tokenizer's unless given: the default's would not round-trip.
    if (model.type == "bert" && !model.arch.contains("vocab_size")) a.erase("vocab_size");
    a.update(model.arch);
    model_j.update(a);
  }
  nlohmann::json data_j = {{"task", data.task},
                           {"dir", data.dir},
                           {"vocab", data.vocab},
                           {"max_seq_len", data.max_seq_len},
                           {"padding", data.padding},
                           {"batch_size", data.batch_size},
                           {"eval_batch_size", data.eval_batch_size},
                           {"workers", data.workers},
                           {"train_split", data.train_split},
                           {"eval_split", data.eval_split},
                           {"max_train_examples", data.max_train_examples},
                           {"max_eval_examples", data.max_eval_examples},
                           {"random_crop_padding", data.random_crop_padding},
                           {"horizontal_flip", data.horizontal_flip},
                           {"synthetic_train", data.synthetic_train},
                           {"synthetic_eval", data.synthetic_eval}};
  if (is_own_text_task(data.task)) {
    data_j["format"] = data.format;
    data_j["text_columns"] = data.text_columns;
    data_j["label_column"] = data.label_column;
    if (!data.labels.empty()) data_j["labels"] = data.labels;
  }
  if (!data.mean.empty()) data_j["mean"] = data.mean;
  if (!data.std.empty()) data_j["std"] = data.std;
  nlohmann::json opt_j = {{"type", optimizer.type}, {"lr", optimizer.lr},
                          {"weight_decay", optimizer.weight_decay}, {"no_decay", optimizer.no_decay}};
  if (optimizer.in_backward) opt_j["in_backward"] = true;
  if (optimizer.type == "sgd") {
    opt_j["momentum"] = optimizer.momentum;
    opt_j["nesterov"] = optimizer.nesterov;
  } else {
    opt_j["beta1"] = optimizer.beta1;
    opt_j["beta2"] = optimizer.beta2;
    opt_j["eps"] = optimizer.eps;
    if (optimizer.state_bits != 32) opt_j["state_bits"] = optimizer.state_bits;
  }
  nlohmann::json out = {{"model", model_j},
          {"data", data_j},
          {"train",
           {{"epochs", train.epochs},
            {"max_steps", train.max_steps},
            {"grad_accum", train.grad_accum},
            {"max_grad_norm", train.max_grad_norm},
            {"log_every", train.log_every},
            {"eval_every", train.eval_every},
            {"save_every", train.save_every},
            {"keep_checkpoints", train.keep_checkpoints},
            {"early_stopping_patience", train.early_stopping_patience},
            {"grad_probe_every", train.grad_probe_every},
            {"seed", train.seed},
            {"label_smoothing", train.label_smoothing},
            {"precision", train.precision},
            {"bucket_cap_mb", train.bucket_cap_mb}}},
          {"optimizer", opt_j},
          {"schedule",
           {{"type", schedule.type},
            {"warmup_ratio", schedule.warmup_ratio},
            {"warmup_steps", schedule.warmup_steps},
            {"min_ratio", schedule.min_ratio}}},
          {"backward", backward.source_json()},
          {"freeze", freeze},
          {"output", {{"dir", output.dir},
                      {"export", output.export_merged ? nlohmann::json("merged") : nlohmann::json(output.export_model)}}}};
  // Written only when set, so the config of a run without codecs reads as before.
  if (!memory.codecs.empty() || !memory.recompute.empty() || !memory.recompute_bf16.empty() || memory.budget)
    out["memory"] = memory.to_json();
  if (lora.enabled && model.adapter.empty()) out["lora"] = lora.to_json();
  return out;
}

nlohmann::json read_config_json(const std::string& path) {
  LB_CHECK(std::filesystem::is_regular_file(path), path, ": no such config file");
  return io::read_json_file(path);
}

void apply_override(nlohmann::json& j, const std::string& assignment) {
  const size_t eq = assignment.find('=');
  LB_CHECK(eq != std::string::npos && eq > 0, "--set '", assignment,
           "': expected KEY=VALUE with a dotted key, e.g. optimizer.lr=3e-5");
  const std::string key = assignment.substr(0, eq);
  const std::string value = assignment.substr(eq + 1);
  nlohmann::json v;
  try {
    v = io::parse_json(value, "--set " + key);
  } catch (const Error&) {
    v = value;  // bare words are strings: data.task=sst2
  }
  LB_CHECK(j.is_object(), "--set ", key, ": the config is not a JSON object");
  nlohmann::json* node = &j;
  size_t start = 0;
  std::string walked;
  while (true) {
    const size_t dot = key.find('.', start);
    const std::string part = key.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    LB_CHECK(!part.empty(), "--set ", key, ": empty key component");
    walked += (walked.empty() ? "" : ".") + part;
    if (dot == std::string::npos) {
      (*node)[part] = v;
      return;
    }
    if (!node->contains(part)) (*node)[part] = nlohmann::json::object();
    node = &(*node)[part];
    LB_CHECK(node->is_object(), "--set ", key, ": ", walked, " is not an object in the config");
    start = dot + 1;
  }
}

Config load_config(const std::string& path, const std::vector<std::string>& overrides) {
  nlohmann::json j = read_config_json(path);
  LB_CHECK(j.is_object(), path, ": a config is a JSON object, got ", j.type_name());
  for (const auto& o : overrides) {
    try {
      apply_override(j, o);
    } catch (const Error& e) {
      throw Error(path + ": " + e.what());
    }
  }
  return Config::from_json(j, path);
}

namespace {
// The leaves of a JSON object by dotted path.
void flatten(const nlohmann::json& j, const std::string& path, std::map<std::string, nlohmann::json>& out) {
  if (!j.is_object()) {
    out[path] = j;
    return;
  }
  for (auto it = j.begin(); it != j.end(); ++it) flatten(it.value(), path + "." + it.key(), out);
}

// Settings that do not change what a trained network computes from its weights.
bool maths_neutral(const std::string& path) {
  return path == "model.pretrained" || path == "model.initializer_range" || path == "model.skip_padding" ||
         path.find("dropout") != std::string::npos;
}
}  // namespace

std::vector<std::string> maths_differences(const Config& c, const nlohmann::json& saved) {
  const nlohmann::json now = c.to_json();
  std::map<std::string, nlohmann::json> a, b;
  for (const char* section : {"model", "lora"}) {
    if (now.contains(section)) flatten(now.at(section), section, a);
    if (saved.is_object() && saved.contains(section)) flatten(saved.at(section), section, b);
  }
  std::set<std::string> keys;
  for (const auto& [k, v] : a) keys.insert(k);
  for (const auto& [k, v] : b) keys.insert(k);
  std::vector<std::string> out;
  for (const auto& k : keys) {
    if (maths_neutral(k)) continue;
    const auto ia = a.find(k), ib = b.find(k);
    const std::string here = ia == a.end() ? "unset" : ia->second.dump();
    const std::string there = ib == b.end() ? "unset" : ib->second.dump();
    if (here != there) out.push_back(k + ": " + here + " here, " + there + " in the checkpoint");
  }
  return out;
}

}  // namespace lb::train
