// The data a config names, loaded into memory and ready to batch: a GLUE task or the
// synthetic quickstart task (tokenized once), or an image dataset (decoded once). Also the
// task's facts the trainer needs: number of labels, regression or not, label names, and how
// to score predictions (the official GLUE metric, else accuracy).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "lb/data/batch.h"
#include "lb/data/glue.h"
#include "lb/data/images.h"
#include "lb/data/text_dataset.h"
#include "lb/data/tokenizer.h"
#include "lb/train/config.h"

namespace lb::train {

struct TaskData {
  std::string task;
  bool text = true;
  bool regression = false;
  int64_t num_labels = 0;
  int64_t vocab_size = 0;                 // the tokenizer's, for text tasks
  int64_t pad_id = 0;
  std::vector<std::string> label_names;   // may be empty
  const data::GlueTask* glue = nullptr;   // GLUE tasks only
  std::string train_split, eval_split;
  std::shared_ptr<data::TextDataset> train_text, eval_text;
  std::shared_ptr<data::ImageSet> train_images, eval_images;

  int64_t train_size() const;
  int64_t eval_size() const;
  bool eval_labeled() const;
  // The metric the best checkpoint is chosen by (higher is better), without "eval_".
  std::string primary_metric() const;
  // Metrics of predictions (class ids, or regression values) against gold, with Hugging
  // Face's names without the "eval_" prefix.
  nlohmann::json score(const std::vector<double>& predictions, const std::vector<double>& gold) const;
};

// Texts given as they are (predict --text / --input), one example each; `pairs` is empty or
// holds each text's second sentence (tasks on sentence pairs).
struct RawTexts {
  std::vector<std::string> texts, pairs;
};

struct TaskDataOptions {
  bool train = true;        // load the training split
  std::string eval_split;   // "" = config.data.eval_split or the task's first dev split
  // Text tasks: evaluate these (unlabeled) in place of a split; eval_split is then "texts".
  const RawTexts* texts = nullptr;
};

TaskData load_task_data(const Config& config, const TaskDataOptions& opt = {});

// Whether data.task is a text task (GLUE or synthetic), and its tokenizer (GLUE: data.vocab,
// else model.pretrained's; synthetic: its own vocabulary) without loading any split.
bool is_text_task(const Config& config);
// data.task text_classification: the class names in id order (data.labels, else the training
// file's distinct labels sorted, as Hugging Face's run_glue.py does); text_regression: none.
std::vector<std::string> own_label_names(const Config& config);
data::WordPieceTokenizer task_tokenizer(const Config& config);

// A loader over the training split (shuffled with `seed`, augmented for images) or the
// evaluation split (in order, no augmentation). shard_rank / shard_count: this rank's part of
// every global batch of batch_size · shard_count (data-parallel training).
std::unique_ptr<data::BatchSource> make_loader(const TaskData& d, const Config& config, bool train_split,
                                               uint64_t seed, int64_t shard_rank = 0,
                                               int64_t shard_count = 1);

}  // namespace lb::train
