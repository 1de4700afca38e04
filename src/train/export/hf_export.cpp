// export_checkpoint (see hf_export.h).
#include "lb/train/export/hf_export.h"
#include "lb/train/export/model_name.h"

#include <iostream>
#include <set>

#include "lb/core/error.h"
#include "lb/data/glue.h"
#include "lb/data/image_loader.h"
#include "lb/io/atomic_file.h"
#include "lb/io/json_file.h"
#include "lb/io/safetensors.h"
#include "lb/nn/layers.h"
#include "lb/nn/lora.h"
#include "lb/train/run/checkpoint.h"
#include "lb/train/run/output_dir.h"
#include "lb/train/task_data.h"
#include "lb/train/task_model.h"
#include "lb/train/trainer.h"
#include "models/hf_import.h"

namespace lb::train {

namespace fs = std::filesystem;

nlohmann::json TaskLabels::to_json() const {
  return {{"label_names", names}, {"num_labels", num_labels}, {"regression", regression}};
}

TaskLabels TaskLabels::from_json(const nlohmann::json& j, const std::string& path) {
  LB_CHECK(j.is_object(), path, ": expected an object");
  TaskLabels t;
  t.num_labels = io::json_int(j, "num_labels", 1, INT32_MAX, path);
  LB_CHECK(j.contains("regression") && j.at("regression").is_boolean(), path, ".regression: expected true or false");
  t.regression = j.at("regression").get<bool>();
  LB_CHECK(j.contains("label_names") && j.at("label_names").is_array(), path, ".label_names: expected a list");
  for (const auto& n : j.at("label_names")) {
    LB_CHECK(n.is_string(), path, ".label_names: expected strings, got ", n.dump());
    t.names.push_back(n.get<std::string>());
  }
  LB_CHECK(t.names.empty() || static_cast<int64_t>(t.names.size()) == t.num_labels, path, ".label_names: ",
           t.names.size(), " names for ", t.num_labels, " labels");
  return t;
}

namespace {

struct Source {
  std::string checkpoint;
  Config config;
  TaskLabels labels;
  std::unique_ptr<TaskModel> model;
  nlohmann::json model_config;
};

// Checkpoints written before the trainer stored the task's labels: the task tells them
// (image datasets: their evaluation split's classes).
TaskLabels labels_of_task(const Config& c) {
  TaskLabels t;
  if (c.data.task == "synthetic") {
    t.names = {"negative", "positive"};
  } else if (is_own_text_task(c.data.task)) {
    t.names = own_label_names(c);
    t.regression = c.data.task == "text_regression";
    t.num_labels = t.regression ? 1 : static_cast<int64_t>(t.names.size());
  } else if (is_text_task(c)) {
    const data::GlueTask& g = data::glue_task(c.data.task);
    t.names = g.class_names;
    t.regression = g.num_labels == 1;
    t.num_labels = g.num_labels;
  } else {
    TaskDataOptions o;
    o.train = false;
    t.names = load_task_data(c, o).label_names;
  }
  if (t.num_labels == 0) t.num_labels = static_cast<int64_t>(t.names.size());
  if (c.model.num_labels > 0 && c.model.num_labels != t.num_labels) {
    t.num_labels = c.model.num_labels;
    t.names.clear();
  }
  return t;
}

Source load_source(const std::string& path, bool latest) {
  Source s;
  s.checkpoint = latest ? find_checkpoint(path, "export") : find_best_checkpoint(path, "export");
  const std::string state_path = (fs::path(s.checkpoint) / "trainer_state.json").string();
  const nlohmann::json file = io::read_json_file(state_path);
  LB_CHECK(file.is_object() && file.contains("extra") && file.at("extra").is_object() &&
               file.at("extra").contains("config"),
           state_path, ": no \"extra\".\"config\": not a checkpoint written by `leanback train`");
  const nlohmann::json& state = file.at("extra");
  s.config = Config::from_json(state.at("config"), state_path + " (extra.config)");
  s.labels = state.contains("task") ? TaskLabels::from_json(state.at("task"), state_path + ": extra.task")
                                    : labels_of_task(s.config);
  if (state.contains("model")) {
    // The architecture the run built, so neither the pretrained directory nor the data are needed.
    Config c = s.config;
    c.model.pretrained.clear();
    c.model.arch = state.at("model");
    c.model.num_labels = 0;
    s.model = build_task_model(c, s.labels.num_labels, 0);
  } else {
    s.model = build_task_model(s.config, s.labels.num_labels,
                               is_text_task(s.config) ? task_tokenizer(s.config).vocab_size() : 0);
  }
  load_checkpoint(s.checkpoint, s.model->module(), nullptr);
  s.model_config = s.model->model_config();
  return s;
}

std::vector<nn::Linear*> adapted_layers(nn::Module& root) {
  std::vector<nn::Linear*> out;
  for (auto& [name, m] : root.named_modules())
    if (auto* l = dynamic_cast<nn::Linear*>(m); l && l->has_lora()) out.push_back(l);
  return out;
}

std::string label_name(const TaskLabels& t, int64_t i) {
  return i < static_cast<int64_t>(t.names.size()) ? t.names[static_cast<size_t>(i)] : "LABEL_" + std::to_string(i);
}

// id2label / label2id / problem_type, as transformers' PretrainedConfig writes them.
void add_labels(nlohmann::json& j, const TaskLabels& t) {
  nlohmann::json id2label = nlohmann::json::object(), label2id = nlohmann::json::object();
  for (int64_t i = 0; i < t.num_labels; ++i) {
    id2label[std::to_string(i)] = label_name(t, i);
    label2id[label_name(t, i)] = i;
  }
  j["id2label"] = id2label;
  j["label2id"] = label2id;
  j["problem_type"] = t.regression ? "regression" : "single_label_classification";
}

class Writer {
 public:
  Writer(fs::path dir, ExportSummary& summary) : dir_(std::move(dir)), summary_(summary) {}
  // Label names come from folder names too: bytes that are not UTF-8 are replaced, not fatal.
  void json(const std::string& name, const nlohmann::json& j) {
    text(name, j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
  }
  void text(const std::string& name, const std::string& t) {
    record_written(dir_, {name});
    io::write_text_atomic((dir_ / name).string(), t);
    summary_.files.push_back(name);
  }
  void tensors(const std::string& name, const std::vector<std::pair<std::string, Tensor>>& t) {
    // transformers refuses safetensors without a "format" entry in the metadata.
    record_written(dir_, {name});
    io::save_safetensors((dir_ / name).string(), t, {{"format", "pt"}});
    summary_.files.push_back(name);
  }

 private:
  fs::path dir_;
  ExportSummary& summary_;
};

nlohmann::json hf_model_config(const Source& s) {
  nlohmann::json j = s.model_config;
  const bool bert = s.config.model.type == "bert";
  j["architectures"] = {bert ? "BertForSequenceClassification" : "ViTForImageClassification"};
  j.erase("num_labels");  // id2label says it, as transformers writes it
  add_labels(j, s.labels);
  if (bert) {
    j["pad_token_id"] = 0;  // our word embedding's padding row
    j["position_embedding_type"] = "absolute";
  }
  j["torch_dtype"] = "float32";
  return j;
}

void write_tokenizer(Writer& w, const Config& c) {
  const data::WordPieceTokenizer tok = task_tokenizer(c);
  std::string vocab;
  for (int64_t i = 0; i < tok.vocab_size(); ++i) vocab += tok.id_to_token(i) + "\n";
  w.text("vocab.txt", vocab);
  const data::BasicTokenizerOptions& o = tok.options();
  nlohmann::json special = nlohmann::json::object();
  for (const char* t : {"[UNK]", "[SEP]", "[PAD]", "[CLS]", "[MASK]"}) {
    if (tok.token_to_id(t) < 0) continue;
    std::string key = t;
    key = key.substr(1, key.size() - 2);
    for (auto& ch : key) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    special[key + "_token"] = t;
  }
  nlohmann::json cfg = {{"tokenizer_class", "BertTokenizer"},
                        {"do_lower_case", o.lowercase},
                        {"strip_accents", o.strip_accents},
                        {"tokenize_chinese_chars", o.tokenize_chinese_chars},
                        {"model_max_length", c.data.max_seq_len},
                        {"clean_up_tokenization_spaces", true}};
  cfg.update(special);
  w.json("tokenizer_config.json", cfg);
  w.json("special_tokens_map.json", special);
}

void write_image_processor(Writer& w, const Source& s) {
  data::ImageLoaderOptions o;
  std::vector<double> mean(o.mean.begin(), o.mean.end()), std(o.std.begin(), o.std.end());
  if (!s.config.data.mean.empty()) mean = s.config.data.mean;
  if (!s.config.data.std.empty()) std = s.config.data.std;
  const int64_t size = s.model_config.value("image_size", int64_t{224});
  w.json("preprocessor_config.json", {{"image_processor_type", "ViTImageProcessor"},
                                      {"do_resize", true},
                                      {"size", {{"height", size}, {"width", size}}},
                                      {"resample", 2},
                                      {"do_rescale", true},
                                      {"rescale_factor", 1.0 / 255.0},
                                      {"do_normalize", true},
                                      {"image_mean", mean},
                                      {"image_std", std}});
}

void write_preprocessing(Writer& w, const Source& s) {
  if (s.config.model.type == "bert") write_tokenizer(w, s.config);
  else write_image_processor(w, s);
}

std::vector<std::pair<std::string, Tensor>> model_tensors(nn::Module& m) {
  std::vector<std::pair<std::string, Tensor>> out;
  for (auto& [k, t] : m.state_dict())
    if (!nn::is_lora_factor_name(k)) out.emplace_back(k, t);
  return out;
}

// PEFT's adapter: the adapters, what trained besides them (modules_to_save, biases per
// lora.bias) and the base weights the pretrained directory lacks (leanback initialised them;
// a fresh PEFT base would initialise them differently).
bool has_peft_base(const Config& c) { return !c.model.pretrained.empty() && c.model.type != "resnet"; }
const char* no_base_kind(const Config& c) { return c.model.type == "resnet" ? "ResNet" : "randomly initialised model"; }

void check_peft_base(const Source& s) {
  LB_CHECK(has_peft_base(s.config), s.checkpoint, ": a LoRA run on a ", no_base_kind(s.config),
           " has no Hugging Face base for PEFT to load the adapter onto; export it with --merge");
}

// base_model_name_or_path: the name asked for, else the base directory's Hugging Face name,
// else its absolute path here (which opens on this machine only: said on stderr).
std::string portable_base_name(const Config& c, const std::string& asked) {
  if (!asked.empty()) return asked;
  if (std::string hub = hub_name_of(c.model.pretrained); !hub.empty()) return hub;
  const std::string path = fs::absolute(c.model.pretrained).lexically_normal().string();
  std::cerr << "export: adapter_config.json names its base by this machine's path " << path << " (the base has no "
            << kHubNameFile << " naming its Hugging Face model); pass --base-model NAME for an adapter that opens "
            << "elsewhere\n";
  return path;
}

void write_peft(Writer& w, Source& s, ExportSummary& summary, const std::string& base_model) {
  const Config& c = s.config;
  const std::string base_name = portable_base_name(c, base_model);
  models::HfLoadReport report;
  if (c.model.type == "bert") models::load_hf_bert(c.model.pretrained, s.labels.num_labels, &report, c.model.arch);
  else models::load_hf_vit(c.model.pretrained, s.labels.num_labels, &report, c.model.arch);
  const std::set<std::string> fresh(report.initialized.begin(), report.initialized.end());
  std::set<std::string> trainable;
  for (auto& [k, t] : s.model->module().named_parameters())
    if (t.requires_grad()) trainable.insert(k);
  std::vector<std::pair<std::string, Tensor>> adapter;
  for (auto& [k, t] : s.model->module().state_dict())
    if (nn::is_lora_factor_name(k) || trainable.count(k) || fresh.count(k)) adapter.emplace_back("base_model.model." + k, t);
  const nn::LoraTargets targets = lora_targets(c);
  const nn::LoraSettings& ls = c.lora.settings;
  nlohmann::json target_modules = targets.regex ? nlohmann::json(targets.modules.at(0)) : nlohmann::json(targets.modules);
  w.json("adapter_config.json",
         {{"peft_type", "LORA"},
          {"task_type", c.model.type == "bert" ? nlohmann::json("SEQ_CLS") : nlohmann::json(nullptr)},
          {"base_model_name_or_path", base_name},
          {"r", ls.r},
          {"lora_alpha", ls.alpha},
          {"lora_dropout", ls.dropout},
          {"target_modules", target_modules},
          {"modules_to_save", targets.modules_to_save},
          {"bias", targets.bias},
          {"fan_in_fan_out", false},
          {"init_lora_weights", true},
          {"inference_mode", true},
          {"use_rslora", false},
          {"use_dora", false}});
  w.tensors("adapter_model.safetensors", adapter);
  summary.format = "peft";
  const std::string auto_cls =
      c.model.type == "bert" ? "AutoModelForSequenceClassification" : "AutoModelForImageClassification";
  std::string id2label = "{";
  for (int64_t i = 0; i < s.labels.num_labels; ++i)
    id2label += (i ? ", " : "") + std::to_string(i) + ": " + nlohmann::json(label_name(s.labels, i)).dump();
  id2label += "}";
  summary.usage = "from transformers import " + auto_cls + "\nfrom peft import PeftModel\nbase = " + auto_cls +
                  ".from_pretrained(" + nlohmann::json(base_name).dump() +
                  ", num_labels=" + std::to_string(s.labels.num_labels) + ", id2label=" + id2label +
                  (s.labels.regression ? ", problem_type=\"regression\"" : "") + ")\nmodel = PeftModel.from_pretrained(base, DIR)";
}

void write_resnet(Writer& w, Source& s, ExportSummary& summary) {
  const nlohmann::json& m = s.model_config;
  const std::string arch = "resnet" + std::to_string(m.at("depth").get<int64_t>());
  nlohmann::json j = {{"framework", "torchvision"},
                      {"architecture", arch},
                      {"num_classes", m.at("num_classes")},
                      {"cifar_stem", m.at("cifar_stem")},
                      {"base_width", m.at("base_width")}};
  add_labels(j, s.labels);
  j.erase("problem_type");
  w.json("config.json", j);
  w.tensors("model.safetensors", model_tensors(s.model->module()));
  summary.format = "torchvision";
  summary.usage = "import torch, torchvision\nfrom safetensors.torch import load_file\nmodel = torchvision.models." +
                  arch + "(num_classes=" + std::to_string(m.at("num_classes").get<int64_t>()) + ")\n" +
                  (m.at("cifar_stem").get<bool>()
                       ? "model.conv1 = torch.nn.Conv2d(3, 64, 3, 1, 1, bias=False); model.maxpool = torch.nn.Identity()\n"
                       : "") +
                  "model.load_state_dict(load_file(DIR + \"/model.safetensors\"))";
}

// Creates `out` (marked as an export) or clears an earlier export there (overwrite only).
void prepare_out(const fs::path& out, bool overwrite, const std::string& flag) {
  refuse_protected_dir(out, flag);
  if (output_dir_fresh(out, flag)) {
    create_output_dir(out, OutputKind::Export, flag);
    return;
  }
  const auto marker = output_marker(out);
  if (marker != OutputKind::Export)
    throw OutputRefused(flag + " " + out.string() + " is not empty and leanback did not create it for an export (no " +
                        kOutputMarker + " marker of kind export): choose a new or empty directory");
  if (!overwrite)
    throw OutputRefused(flag + " " + out.string() + " holds an earlier export; pass --overwrite to replace it");
  if (const auto kept = remove_owned_entries(out, OutputKind::Export); !kept.empty())
    std::cerr << kept_entries_note(out, kept) << "\n";
}

}  // namespace

void check_export_setting(const Config& c) {
  if (!c.output.export_model) return;
  LB_CHECK(!c.output.export_merged || c.lora.enabled, c.source, ": output.export is \"merged\", which folds LoRA "
           "adapters into the weights, and this config has no lora section; set output.export to true");
  LB_CHECK(!c.lora.enabled || c.output.export_merged || has_peft_base(c), c.source, ": output.export is true, and a "
           "LoRA run on a ", no_base_kind(c), " has no Hugging Face base for PEFT to load the adapter onto; set "
           "output.export to \"merged\"");
}

ExportSummary export_checkpoint(const std::string& run_or_checkpoint, const fs::path& out,
                                const ExportOptions& options, const std::string& flag) {
  Source s = load_source(run_or_checkpoint, options.latest);
  const std::vector<nn::Linear*> adapted = adapted_layers(s.model->module());
  LB_CHECK(!options.merge || !adapted.empty(), s.checkpoint, ": --merge: the model has no LoRA adapters to merge");
  if (!adapted.empty() && !options.merge) check_peft_base(s);  // before anything is created
  prepare_out(out, options.overwrite, flag);
  ExportSummary summary;
  summary.checkpoint = s.checkpoint;
  Writer w(out, summary);
  if (options.merge)
    for (nn::Linear* l : adapted) l->merge_lora();
  if (!adapted.empty() && !options.merge) {
    write_peft(w, s, summary, options.base_model);
    write_preprocessing(w, s);
    return summary;
  }
  if (s.config.model.type == "resnet") {
    write_resnet(w, s, summary);
    return summary;
  }
  w.json("config.json", hf_model_config(s));
  w.tensors("model.safetensors", model_tensors(s.model->module()));
  write_preprocessing(w, s);
  summary.format = "transformers";
  const bool bert = s.config.model.type == "bert";
  summary.usage = std::string("from transformers import ") +
                  (bert ? "AutoModelForSequenceClassification, AutoTokenizer\nmodel = "
                          "AutoModelForSequenceClassification.from_pretrained(DIR)\ntokenizer = "
                          "AutoTokenizer.from_pretrained(DIR)"
                        : "AutoModelForImageClassification, AutoImageProcessor\nmodel = "
                          "AutoModelForImageClassification.from_pretrained(DIR)\nprocessor = "
                          "AutoImageProcessor.from_pretrained(DIR)");
  return summary;
}

}  // namespace lb::train
