// load_task_data / make_loader (see task_data.h).
#include "lb/train/task_data.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "lb/core/error.h"
#include "lb/data/image_loader.h"
#include "lb/data/synthetic_text.h"
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
  return glue ? glue_primary_metric(*glue) : "accuracy";
}

nlohmann::json TaskData::score(const std::vector<double>& predictions,
                               const std::vector<double>& gold) const {
  if (glue) return glue_metrics(*glue, predictions, gold);
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
    d.eval_text = encode_texts(tok, s.eval_text, nullptr, max_len, c.data.max_eval_examples);
    for (size_t i = 0; i < d.eval_text->encodings.size(); ++i) {
      d.eval_text->labels.push_back(static_cast<double>(s.eval_labels[i]));
      d.eval_text->indices.push_back(static_cast<int64_t>(i));
    }
    return d;
  }
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
