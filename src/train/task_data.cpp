// load_task_data / make_loader (see task_data.h).
#include "lb/train/task_data.h"

#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "lb/core/error.h"
#include "lb/data/image_loader.h"
#include "lb/data/synthetic_text.h"
#include "lb/data/text_file.h"
#include "lb/io/printable.h"
#include "lb/data/tokenizer.h"
#include "lb/train/report/metrics.h"
#include "lb/train/task_model.h"

namespace lb::train {

namespace fs = std::filesystem;

namespace {

bool is_image_task(const std::string& t) {
  return t == "cifar10" || t == "cifar100" || t == "image_folder";
}

data::WordPieceTokenizer synthetic_tokenizer(const data::SyntheticText& s) {
  // The tokenizer reads vocab files; this one lives only while it is read.
  const fs::path tmp = fs::temp_directory_path() /
                       ("leanback-synthetic-vocab-" + std::to_string(::getpid()) + ".txt");
  {
    std::ofstream out(tmp);
    LB_CHECK(out, "cannot write ", tmp.string());
    for (const auto& w : s.vocab) out << w << "\n";
  }
  auto tok = data::WordPieceTokenizer::from_vocab_file(tmp.string(), true);
  fs::remove(tmp);
  return tok;
}

std::shared_ptr<data::TextDataset> encode_texts(const data::WordPieceTokenizer& tok,
                                                const std::vector<std::string>& a,
                                                const std::vector<std::string>* b,
                                                int64_t max_len, int64_t limit) {
  auto d = std::make_shared<data::TextDataset>();
  const size_t n = limit > 0 ? std::min(a.size(), static_cast<size_t>(limit)) : a.size();
  d->encodings.resize(n);
#pragma omp parallel for schedule(dynamic, 64)
  for (size_t i = 0; i < n; ++i)
    d->encodings[i] = tok.encode(a[i], b ? &(*b)[i] : nullptr, max_len);
  return d;
}

// The texts given as they are, unlabeled, checked against the task's shape (pairs or not).
std::shared_ptr<data::TextDataset> raw_dataset(const Config& c, const RawTexts& raw, bool pairs,
                                               const data::WordPieceTokenizer& tok, bool regression) {
  LB_CHECK(!raw.texts.empty(), "no texts to predict");
  LB_CHECK(!pairs || raw.pairs.size() == raw.texts.size(), c.source, ": data.task ", c.data.task,
           " takes sentence pairs: give each text its second sentence (", raw.texts.size(), " texts, ",
           raw.pairs.size(), " second sentences)");
  LB_CHECK(pairs || raw.pairs.empty(), c.source, ": data.task ", c.data.task,
           " takes single texts, not sentence pairs");
  auto d = encode_texts(tok, raw.texts, pairs ? &raw.pairs : nullptr, c.data.max_seq_len, 0);
  d->regression = regression;
  for (size_t i = 0; i < d->encodings.size(); ++i) d->indices.push_back(static_cast<int64_t>(i));
  return d;
}

std::shared_ptr<data::TextDataset> glue_dataset(const data::GlueTask& task, const data::GlueSplit& s,
                                                const data::WordPieceTokenizer& tok,
                                                int64_t max_len, int64_t limit) {
  std::vector<std::string> a, b;
  for (const auto& e : s.examples) {
    a.push_back(e.text_a);
    b.push_back(e.text_b);
  }
  auto d = encode_texts(tok, a, task.is_pair ? &b : nullptr, max_len, limit);
  d->regression = task.num_labels == 1;
  for (size_t i = 0; i < d->encodings.size(); ++i) {
    const auto& e = s.examples[i];
    d->indices.push_back(e.index);
    if (s.labeled) d->labels.push_back(d->regression ? e.score : static_cast<double>(e.label));
  }
  return d;
}

// A user's own files (data.task text_classification / text_regression): <dir>/<split>.<ext>,
// the extension data.format's, or for "auto" the one that exists.
std::string own_split_path(const Config& c, const std::string& split) {
  const fs::path dir(c.data.dir);
  if (c.data.format != "auto") return (dir / (split + "." + c.data.format)).string();
  std::vector<std::string> found;
  for (const auto& f : data::text_format_names())
    if (fs::is_regular_file(dir / (split + "." + f))) found.push_back((dir / (split + "." + f)).string());
  LB_CHECK(!found.empty(), c.source, ": data.dir ", c.data.dir, " has no ", split, ".csv, ", split, ".tsv or ", split,
           ".jsonl for the '", split, "' split");
  LB_CHECK(found.size() == 1, c.source, ": data.dir ", c.data.dir, " has both ", found[0], " and ", found[1],
           " for the '", split, "' split; say which with data.format");
  return found[0];
}

data::TextFile read_own_split(const Config& c, const std::string& split, bool label_required) {
  const std::string path = own_split_path(c, split);
  LB_CHECK(fs::is_regular_file(path), c.source, ": no file ", path, " for the '", split, "' split (data.dir ",
           c.data.dir, ", data.format ", c.data.format, ")");
  return data::read_text_file(path, data::text_format_of_file(path), {c.data.text_columns, c.data.label_column},
                              label_required);
}

// The eval split when the config names none: "dev", else "validation" (Hugging Face's name).
std::string own_eval_split(const Config& c) {
  for (const char* split : {"dev", "validation"})
    for (const auto& f : data::text_format_names())
      if (fs::is_regular_file(fs::path(c.data.dir) / (std::string(split) + "." + f))) return split;
  LB_FAIL(c.source, ": data.dir ", c.data.dir, " has no dev or validation file (.csv, .tsv, .jsonl) to evaluate on; "
          "name the split with data.eval_split");
}

std::shared_ptr<data::TextDataset> own_dataset(const Config& c, const data::TextFile& f,
                                               const std::vector<std::string>& label_names,
                                               const data::WordPieceTokenizer& tok, int64_t limit) {
  std::vector<std::string> a, b;
  for (const auto& r : f.rows) {
    a.push_back(r.texts[0]);
    if (r.texts.size() > 1) b.push_back(r.texts[1]);
  }
  auto d = encode_texts(tok, a, b.empty() ? nullptr : &b, c.data.max_seq_len, limit);
  d->regression = c.data.task == "text_regression";
  for (size_t i = 0; i < d->encodings.size(); ++i) {
    d->indices.push_back(static_cast<int64_t>(i));
    if (!f.labeled) continue;
    const auto& r = f.rows[i];
    const std::string where = f.path + ":" + std::to_string(r.line);
    if (d->regression) {
      double v = 0;
      const auto [end, ec] = std::from_chars(r.label.data(), r.label.data() + r.label.size(), v);
      LB_CHECK(ec == std::errc() && end == r.label.data() + r.label.size() && std::isfinite(v), where, ": label '",
               io::printable(r.label), "' is not a finite number (data.task text_regression)");
      d->labels.push_back(v);
    } else {
      const auto it = std::find(label_names.begin(), label_names.end(), r.label);
      if (it == label_names.end()) {
        std::string known;
        for (const auto& n : label_names) known += (known.empty() ? "" : ", ") + n;
        LB_FAIL(where, ": label '", io::printable(r.label), "' is not one of the classes (", known, ")",
                c.data.labels.empty() ? " the training file has" : " data.labels names");
      }
      d->labels.push_back(static_cast<double>(it - label_names.begin()));
    }
  }
  return d;
}

std::shared_ptr<data::ImageSet> read_images(const Config& c, const std::string& split) {
  const fs::path dir(c.data.dir);
  const bool cifar10 = c.data.task == "cifar10";
  const bool binary = fs::exists(dir / (cifar10 ? "data_batch_1.bin" : "train.bin")) ||
                      fs::exists(dir / (cifar10 ? "cifar-10-batches-bin" : "cifar-100-binary"));
  if (c.data.task != "image_folder" && binary)
    return std::make_shared<data::ImageSet>(
        data::read_cifar_binary(c.data.dir, split, cifar10 ? 10 : 100));
  // An image folder per split: <dir>/<split>/<class>/<file>.
  LB_CHECK(fs::is_directory(dir / split), c.source, ": data.dir ", c.data.dir, " has no '", split,
           "' folder (expected <dir>/", split, "/<class>/<image>, or CIFAR binary batches)");
  return std::make_shared<data::ImageSet>(data::read_image_folder((dir / split).string()));
}

// The image loader as a BatchSource.
class ImageSource : public data::BatchSource {
 public:
  ImageSource(std::shared_ptr<const data::ImageSet> set, const data::ImageLoaderOptions& o)
      : n_(set->size()), loader_(std::move(set), o) {}
  int64_t num_examples() const override { return n_; }
  int64_t batches_per_epoch() const override { return loader_.batches_per_epoch(); }
  void start_epoch(int64_t epoch, int64_t start_batch) override { loader_.start_epoch(epoch, start_batch); }
  bool next(data::Batch& out) override {
    data::ImageBatch b;
    if (!loader_.next(b)) return false;
    out.inputs = {{"images", b.images}};
    out.labels = b.labels;
    out.indices = std::move(b.indices);
    return true;
  }
  double wait_ms() const override { return loader_.wait_ms(); }

 private:
  int64_t n_;
  data::ImageLoader loader_;
};

void limit_images(data::ImageSet& s, int64_t limit) {
  if (limit <= 0 || limit >= s.size()) return;
  s.labels.resize(static_cast<size_t>(limit));
  s.pixels.resize(static_cast<size_t>(limit * s.height * s.width * s.channels));
}

}  // namespace

std::vector<std::string> own_label_names(const Config& c) {
  if (c.data.task == "text_regression" || !c.data.labels.empty()) return c.data.labels;
  const data::TextFile train = read_own_split(c, c.data.train_split, true);
  std::vector<std::string> names = data::sorted_label_names(train);
  LB_CHECK(names.size() >= 2, train.path, ": every row has the label '", names.at(0),
           "': a classification needs at least two classes (or name them with data.labels)");
  return names;
}

namespace {

TaskData load_own_text(const Config& c, const TaskDataOptions& opt, TaskData d) {
  d.regression = c.data.task == "text_regression";
  d.label_names = own_label_names(c);
  d.num_labels = d.regression ? 1 : static_cast<int64_t>(d.label_names.size());
  if (d.eval_split.empty()) d.eval_split = own_eval_split(c);
  const auto tok = task_tokenizer(c);
  d.vocab_size = tok.vocab_size();
  d.pad_id = tok.pad_id();
  if (opt.train) {
    const data::TextFile f = read_own_split(c, d.train_split, true);
    d.train_text = own_dataset(c, f, d.label_names, tok, c.data.max_train_examples);
  }
  if (opt.texts) {
    d.eval_split = "texts";
    d.eval_text = raw_dataset(c, *opt.texts, c.data.text_columns.size() == 2, tok, d.regression);
    return d;
  }
  d.eval_text = own_dataset(c, read_own_split(c, d.eval_split, false), d.label_names, tok, c.data.max_eval_examples);
  return d;
}

}  // namespace

int64_t TaskData::train_size() const {
  return text ? (train_text ? train_text->size() : 0) : (train_images ? train_images->size() : 0);
}
int64_t TaskData::eval_size() const {
  return text ? (eval_text ? eval_text->size() : 0) : (eval_images ? eval_images->size() : 0);
}
bool TaskData::eval_labeled() const {
  return text ? (eval_text && eval_text->labeled()) : (eval_images != nullptr);
}

std::string TaskData::primary_metric() const {
  if (glue) return glue_primary_metric(*glue);
  return regression ? "pearson" : "accuracy";
}

nlohmann::json TaskData::score(const std::vector<double>& predictions,
                               const std::vector<double>& gold) const {
  if (glue) return glue_metrics(*glue, predictions, gold);
  if (regression) {
    double se = 0;
    for (size_t i = 0; i < gold.size(); ++i) se += (predictions[i] - gold[i]) * (predictions[i] - gold[i]);
    nlohmann::json m = {{"mse", gold.empty() ? 0.0 : se / static_cast<double>(gold.size())}};
    if (gold.size() >= 2) {
      m["pearson"] = pearson(predictions, gold);
      m["spearmanr"] = spearman(predictions, gold);
    }
    return m;
  }
  std::vector<int64_t> p(predictions.begin(), predictions.end()), g(gold.begin(), gold.end());
  return {{"accuracy", accuracy(p, g)}};
}

data::WordPieceTokenizer task_tokenizer(const Config& c) {
  if (c.data.task == "synthetic")
    return synthetic_tokenizer(data::make_synthetic_text(c.data.synthetic_train, c.data.synthetic_eval));
  LB_CHECK(!is_image_task(c.data.task), c.source, ": data.task ", c.data.task, " is an image task: it has no tokenizer");
  if (c.data.vocab.empty()) check_pretrained_present(c);  // the vocabulary is the model's
  const std::string vocab = !c.data.vocab.empty() ? c.data.vocab : c.model.pretrained;
  LB_CHECK(!vocab.empty(), c.source, ": data.vocab: a text task needs a tokenizer vocabulary (a "
           "directory with vocab.txt, or the file); none given and model.pretrained is not set");
  return fs::is_directory(vocab) ? data::WordPieceTokenizer::from_dir(vocab)
                                 : data::WordPieceTokenizer::from_vocab_file(vocab, true);
}

bool is_text_task(const Config& c) { return !is_image_task(c.data.task); }

TaskData load_task_data(const Config& c, const TaskDataOptions& opt) {
  TaskData d;
  d.task = c.data.task;
  d.train_split = c.data.train_split;
  d.eval_split = !opt.eval_split.empty() ? opt.eval_split : c.data.eval_split;
  const int64_t max_len = c.data.max_seq_len;
  LB_CHECK(!opt.texts || !is_image_task(d.task), c.source, ": data.task ", d.task,
           " is an image task: it predicts images, not texts");
  if (is_image_task(d.task)) {
    d.text = false;
    if (d.eval_split.empty()) d.eval_split = "test";
    if (opt.train) {
      d.train_images = read_images(c, d.train_split);
      limit_images(*d.train_images, c.data.max_train_examples);
    }
    d.eval_images = read_images(c, d.eval_split);
    limit_images(*d.eval_images, c.data.max_eval_examples);
    const auto& ref = d.train_images ? *d.train_images : *d.eval_images;
    d.label_names = ref.classes;
    d.num_labels = static_cast<int64_t>(ref.classes.size());
    LB_CHECK(!d.train_images || d.train_images->classes == d.eval_images->classes, c.source,
             ": the ", d.train_split, " and ", d.eval_split, " splits of ", c.data.dir,
             " have different classes");
    return d;
  }
  if (d.task == "synthetic") {
    const auto s = data::make_synthetic_text(c.data.synthetic_train, c.data.synthetic_eval);
    const auto tok = synthetic_tokenizer(s);
    d.vocab_size = tok.vocab_size();
    d.pad_id = tok.pad_id();
    d.num_labels = 2;
    d.label_names = {"negative", "positive"};
    if (d.eval_split.empty()) d.eval_split = "dev";
    LB_CHECK(d.eval_split == "dev", c.source, ": data.eval_split: the synthetic task has only "
             "'train' and 'dev' splits, got '", d.eval_split, "'");
    if (opt.train) {
      d.train_text = encode_texts(tok, s.train_text, nullptr, max_len, c.data.max_train_examples);
      for (size_t i = 0; i < d.train_text->encodings.size(); ++i) {
        d.train_text->labels.push_back(static_cast<double>(s.train_labels[i]));
        d.train_text->indices.push_back(static_cast<int64_t>(i));
      }
    }
    if (opt.texts) {
      d.eval_split = "texts";
      d.eval_text = raw_dataset(c, *opt.texts, false, tok, false);
      return d;
    }
    d.eval_text = encode_texts(tok, s.eval_text, nullptr, max_len, c.data.max_eval_examples);
    for (size_t i = 0; i < d.eval_text->encodings.size(); ++i) {
      d.eval_text->labels.push_back(static_cast<double>(s.eval_labels[i]));
      d.eval_text->indices.push_back(static_cast<int64_t>(i));
    }
    return d;
  }
  if (is_own_text_task(d.task)) return load_own_text(c, opt, std::move(d));
  // GLUE
  const data::GlueTask& task = data::glue_task(d.task);
  d.glue = &task;
  d.num_labels = task.num_labels;
  d.regression = task.num_labels == 1;
  d.label_names = task.label_names;
  if (d.eval_split.empty()) d.eval_split = task.dev_splits.at(0);
  const auto tok = task_tokenizer(c);
  d.vocab_size = tok.vocab_size();
  d.pad_id = tok.pad_id();
  if (opt.train) {
    const auto split = data::read_glue(task, c.data.dir, d.train_split);
    LB_CHECK(split.labeled, split.path, ": the '", d.train_split, "' split has no labels to train on");
    d.train_text = glue_dataset(task, split, tok, max_len, c.data.max_train_examples);
  }
  if (opt.texts) {
    d.eval_split = "texts";
    d.eval_text = raw_dataset(c, *opt.texts, task.is_pair, tok, d.regression);
    return d;
  }
  d.eval_text = glue_dataset(task, data::read_glue(task, c.data.dir, d.eval_split), tok, max_len,
                             c.data.max_eval_examples);
  return d;
}

std::unique_ptr<data::BatchSource> make_loader(const TaskData& d, const Config& c, bool train_split,
                                               uint64_t seed, int64_t shard_rank, int64_t shard_count) {
  const int64_t eval_batch = c.data.eval_batch_size > 0 ? c.data.eval_batch_size : c.data.batch_size;
  if (d.text) {
    data::TextLoaderOptions o;
    o.batch_size = train_split ? c.data.batch_size : eval_batch;
    o.shuffle = train_split;
    o.seed = seed;
    o.pad_to = c.data.padding == "max_length" ? c.data.max_seq_len : 0;  // "auto" is resolved by train()
    o.pad_id = d.pad_id;
    o.shard_rank = shard_rank;
    o.shard_count = shard_count;
    return std::make_unique<data::TextLoader>(train_split ? d.train_text : d.eval_text, o);
  }
  data::ImageLoaderOptions o;
  o.batch_size = train_split ? c.data.batch_size : eval_batch;
  o.shuffle = train_split;
  o.seed = seed;
  o.workers = static_cast<int>(c.data.workers);
  o.shard_rank = shard_rank;
  o.shard_count = shard_count;
  if (train_split) {
    o.augment.random_crop_padding = c.data.random_crop_padding;
    o.augment.horizontal_flip = c.data.horizontal_flip;
  }
  if (!c.data.mean.empty()) o.mean.assign(c.data.mean.begin(), c.data.mean.end());
  if (!c.data.std.empty()) o.std.assign(c.data.std.begin(), c.data.std.end());
  return std::make_unique<ImageSource>(train_split ? d.train_images : d.eval_images, o);
}

}  // namespace lb::train
