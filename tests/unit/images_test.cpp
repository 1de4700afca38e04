// Image datasets: CIFAR binary batches and image folders the test writes (layouts, order,
// pixel layout, errors naming the file/record), and the real CIFAR-10 folders when present.
#include <gtest/gtest.h>
#include <stb_image_write.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "lb/data/images.h"
#include "testing/testing.h"

namespace lb::data {
namespace {

namespace fs = std::filesystem;

class ImagesTest : public ::testing::Test {
 protected:
  lb::testing::TempDir tmp_{"lb_images"};
  const fs::path& dir_ = tmp_.path();
};

void write_file(const fs::path& p, const std::vector<uint8_t>& bytes) {
  fs::create_directories(p.parent_path());
  std::ofstream out(p, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

// Pixel c of plane position p in record r of a synthetic CIFAR file tagged `file`.
uint8_t cifar_pixel(int file, int r, int c, int p) { return static_cast<uint8_t>(file * 31 + r * 7 + c * 50 + p * 3); }

// A CIFAR file of `labels.size()` records; each label entry is the record's label bytes.
std::vector<uint8_t> cifar_file(int file, const std::vector<std::vector<uint8_t>>& labels) {
  std::vector<uint8_t> bytes;
  for (size_t r = 0; r < labels.size(); ++r) {
    bytes.insert(bytes.end(), labels[r].begin(), labels[r].end());
    for (int c = 0; c < 3; ++c)
      for (int p = 0; p < 1024; ++p) bytes.push_back(cifar_pixel(file, static_cast<int>(r), c, p));
  }
  return bytes;
}

// Expects image i of `set` to be record r of file `file`, in HWC.
void expect_cifar_image(const ImageSet& set, int64_t i, int file, int r) {
  for (int y = 0; y < 32; y += 5)
    for (int x = 0; x < 32; x += 3)
      for (int c = 0; c < 3; ++c)
        ASSERT_EQ(set.image(i)[(y * 32 + x) * 3 + c], cifar_pixel(file, r, c, y * 32 + x))
            << "image " << i << " y " << y << " x " << x << " c " << c;
}

std::string error_of(const std::function<void()>& f) { return lb::testing::error_message(f); }

TEST_F(ImagesTest, Cifar10TrainBatchesInOrderWithClassNames) {
  const int counts[5] = {2, 1, 1, 1, 3};
  std::vector<int64_t> want_labels;
  for (int b = 0; b < 5; ++b) {
    std::vector<std::vector<uint8_t>> labels;
    for (int r = 0; r < counts[b]; ++r) {
      labels.push_back({static_cast<uint8_t>((b * 3 + r) % 10)});
      want_labels.push_back((b * 3 + r) % 10);
    }
    write_file(dir_ / ("data_batch_" + std::to_string(b + 1) + ".bin"), cifar_file(b, labels));
  }
  std::ofstream(dir_ / "batches.meta.txt")
      << "airplane\nautomobile\nbird\ncat\ndeer\ndog\nfrog\nhorse\nship\ntruck\n\n";
  const ImageSet set = read_cifar_binary(dir_.string(), "train", 10);
  EXPECT_EQ(set.size(), 8);
  EXPECT_EQ(set.height, 32);
  EXPECT_EQ(set.width, 32);
  EXPECT_EQ(set.channels, 3);
  EXPECT_EQ(set.pixels.size(), 8u * 3072u);
  EXPECT_EQ(set.labels, want_labels);
  ASSERT_EQ(set.classes.size(), 10u);
  EXPECT_EQ(set.classes[0], "airplane");
  EXPECT_EQ(set.classes[9], "truck");
  expect_cifar_image(set, 0, 0, 0);
  expect_cifar_image(set, 1, 0, 1);
  expect_cifar_image(set, 2, 1, 0);
  expect_cifar_image(set, 7, 4, 2);
}

TEST_F(ImagesTest, Cifar10TestSplitFromParentFolderWithoutMeta) {
  write_file(dir_ / "cifar-10-batches-bin" / "test_batch.bin", cifar_file(9, {{3}, {0}, {9}}));
  const ImageSet set = read_cifar_binary(dir_.string(), "test", 10);
  EXPECT_EQ(set.labels, (std::vector<int64_t>{3, 0, 9}));
  ASSERT_EQ(set.classes.size(), 10u);
  EXPECT_EQ(set.classes[0], "0");
  EXPECT_EQ(set.classes[9], "9");
  expect_cifar_image(set, 2, 9, 2);
}

TEST_F(ImagesTest, Cifar100UsesFineLabels) {
  write_file(dir_ / "train.bin", cifar_file(1, {{1, 57}, {19, 99}, {0, 0}}));
  std::string names;
  for (int c = 0; c < 100; ++c) names += "fine" + std::to_string(c) + "\r\n";
  std::ofstream(dir_ / "fine_label_names.txt") << names;
  const ImageSet set = read_cifar_binary(dir_.string(), "train", 100);
  EXPECT_EQ(set.labels, (std::vector<int64_t>{57, 99, 0}));
  ASSERT_EQ(set.classes.size(), 100u);
  EXPECT_EQ(set.classes[57], "fine57");  // "\r" stripped
  expect_cifar_image(set, 1, 1, 1);
}

TEST_F(ImagesTest, CifarErrorsNameFileAndRecord) {
  std::vector<uint8_t> bytes = cifar_file(0, {{1}, {2}});
  bytes.resize(bytes.size() + 100);
  write_file(dir_ / "test_batch.bin", bytes);
  std::string msg = error_of([&] { read_cifar_binary(dir_.string(), "test", 10); });
  EXPECT_NE(msg.find((dir_ / "test_batch.bin").string()), std::string::npos) << msg;
  EXPECT_NE(msg.find("record 2 is truncated"), std::string::npos) << msg;

  write_file(dir_ / "test_batch.bin", cifar_file(0, {{1}, {2}, {10}}));
  msg = error_of([&] { read_cifar_binary(dir_.string(), "test", 10); });
  EXPECT_NE(msg.find("test_batch.bin: record 2 has label 10"), std::string::npos) << msg;

  // 100-class records are 3074 bytes: a 10-class file is misread and caught as truncated.
  write_file(dir_ / "test.bin", cifar_file(0, {{1}, {2}}));
  msg = error_of([&] { read_cifar_binary(dir_.string(), "test", 100); });
  EXPECT_NE(msg.find("test.bin: record 1 is truncated"), std::string::npos) << msg;

  msg = error_of([&] { read_cifar_binary(dir_.string(), "train", 10); });
  EXPECT_NE(msg.find("data_batch_1.bin not found"), std::string::npos) << msg;
  msg = error_of([&] { read_cifar_binary(dir_.string(), "valid", 10); });
  EXPECT_NE(msg.find("split 'valid'"), std::string::npos) << msg;
  msg = error_of([&] { read_cifar_binary(dir_.string(), "test", 20); });
  EXPECT_NE(msg.find("10 or 100"), std::string::npos) << msg;

  write_file(dir_ / "test_batch.bin", cifar_file(0, {{1}}));
  std::ofstream(dir_ / "batches.meta.txt") << "a\nb\n";
  msg = error_of([&] { read_cifar_binary(dir_.string(), "test", 10); });
  EXPECT_NE(msg.find("batches.meta.txt has 2 class names, expected 10"), std::string::npos) << msg;
}

// A w x h image with `comp` channels whose values encode (tag, x, y, channel).
std::vector<uint8_t> pattern(int w, int h, int comp, int tag) {
  std::vector<uint8_t> px(static_cast<size_t>(w * h * comp));
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x)
      for (int c = 0; c < comp; ++c) px[(y * w + x) * comp + c] = static_cast<uint8_t>(tag * 40 + x * 5 + y * 3 + c * 60);
  return px;
}

void write_png(const fs::path& p, int w, int h, int comp, int tag) {
  fs::create_directories(p.parent_path());
  const auto px = pattern(w, h, comp, tag);
  ASSERT_TRUE(stbi_write_png(p.string().c_str(), w, h, comp, px.data(), w * comp)) << p;
}

// Expects image i to be pattern(tag) converted to RGB (grey replicated, alpha dropped).
void expect_png_image(const ImageSet& set, int64_t i, int comp, int tag) {
  const auto px = pattern(static_cast<int>(set.width), static_cast<int>(set.height), comp, tag);
  for (int64_t p = 0; p < set.height * set.width; ++p)
    for (int c = 0; c < 3; ++c)
      ASSERT_EQ(set.image(i)[p * 3 + c], px[p * comp + (comp >= 3 ? c : 0)])
          << "image " << i << " pixel " << p << " channel " << c;
}

TEST_F(ImagesTest, ImageFolderOrderLabelsAndConversions) {
  // Created out of order; torchvision's order is classes by name, then (directory, file) by name.
  write_png(dir_ / "b_dog" / "2.png", 6, 4, 3, 1);
  write_png(dir_ / "b_dog" / "10.png", 6, 4, 3, 2);
  write_png(dir_ / "b_dog" / "sub" / "0.png", 6, 4, 3, 3);
  std::ofstream(dir_ / "b_dog" / "notes.txt") << "not an image";
  write_png(dir_ / "a_cat" / "grey.png", 6, 4, 1, 4);
  write_png(dir_ / "a_cat" / "rgba.PNG", 6, 4, 4, 5);
  {
    // A flat-colour JPEG decodes to its colour within JPEG's rounding.
    std::vector<uint8_t> flat(6 * 4 * 3);
    for (size_t k = 0; k < flat.size(); ++k) flat[k] = k % 3 == 0 ? 200 : (k % 3 == 1 ? 100 : 30);
    fs::create_directories(dir_ / "c_car");
    ASSERT_TRUE(stbi_write_jpg((dir_ / "c_car" / "x.jpeg").string().c_str(), 6, 4, 3, flat.data(), 100));
  }
  std::ofstream(dir_ / "README") << "a file at the top level is not a class";

  const ImageSet set = read_image_folder(dir_.string(), 1);
  EXPECT_EQ(set.classes, (std::vector<std::string>{"a_cat", "b_dog", "c_car"}));
  EXPECT_EQ(set.labels, (std::vector<int64_t>{0, 0, 1, 1, 1, 2}));
  EXPECT_EQ(set.height, 4);
  EXPECT_EQ(set.width, 6);
  EXPECT_EQ(set.channels, 3);
  ASSERT_EQ(set.pixels.size(), 6u * 4 * 6 * 3);
  expect_png_image(set, 0, 1, 4);  // a_cat/grey.png
  expect_png_image(set, 1, 4, 5);  // a_cat/rgba.PNG
  expect_png_image(set, 2, 3, 2);  // b_dog/10.png
  expect_png_image(set, 3, 3, 1);  // b_dog/2.png
  expect_png_image(set, 4, 3, 3);  // b_dog/sub/0.png
  for (int64_t p = 0; p < 24; ++p) {
    EXPECT_NEAR(set.image(5)[p * 3 + 0], 200, 3);
    EXPECT_NEAR(set.image(5)[p * 3 + 1], 100, 3);
    EXPECT_NEAR(set.image(5)[p * 3 + 2], 30, 3);
  }

  const ImageSet threaded = read_image_folder(dir_.string(), 3);
  EXPECT_EQ(threaded.pixels, set.pixels);
  EXPECT_EQ(threaded.labels, set.labels);
}

TEST_F(ImagesTest, ImageFolderErrorsNameTheFile) {
  for (int i = 0; i < 6; ++i) write_png(dir_ / "a" / (std::to_string(i) + ".png"), 5, 5, 3, i);
  write_png(dir_ / "b" / "small.png", 4, 5, 3, 0);
  std::string msg = error_of([&] { read_image_folder(dir_.string(), 2); });
  EXPECT_NE(msg.find((dir_ / "b" / "small.png").string() + " is 4x5 but the first image"),
            std::string::npos) << msg;

  // Several bad files: always the first in order is reported, whatever the thread count.
  write_file(dir_ / "a" / "3.png", {0x89, 'P', 'N', 'G', 1, 2, 3});
  write_file(dir_ / "a" / "4.png", {});
  for (int threads : {1, 2, 4}) {
    msg = error_of([&] { read_image_folder(dir_.string(), threads); });
    EXPECT_NE(msg.find("cannot decode image " + (dir_ / "a" / "3.png").string()), std::string::npos)
        << threads << " threads: " << msg;
  }
  fs::remove_all(dir_ / "a");
  fs::remove_all(dir_ / "b");

  write_png(dir_ / "a" / "0.png", 5, 5, 3, 0);
  fs::create_directories(dir_ / "empty" / "sub");
  std::ofstream(dir_ / "empty" / "labels.csv") << "x";
  msg = error_of([&] { read_image_folder(dir_.string()); });
  EXPECT_NE(msg.find("class directory " + (dir_ / "empty").string() + " has no images"),
            std::string::npos) << msg;
  fs::remove_all(dir_ / "empty");

  write_file(dir_ / "a" / "1.webp", {1, 2, 3});
  msg = error_of([&] { read_image_folder(dir_.string()); });
  EXPECT_NE(msg.find("1.webp: TIFF/WebP cannot be decoded"), std::string::npos) << msg;

  fs::remove_all(dir_ / "a");
  msg = error_of([&] { read_image_folder(dir_.string()); });
  EXPECT_NE(msg.find("has no class directories"), std::string::npos) << msg;
  msg = error_of([&] { read_image_folder((dir_ / "nowhere").string()); });
  EXPECT_NE(msg.find("nowhere is not a directory"), std::string::npos) << msg;
}

// The real CIFAR-10 folders (/work/shared/data/cifar10/{train,test}/<class>/NNNN.jpg).
void check_real_cifar10(const std::string& split, int64_t per_class) {
  const std::string root = lb::testing::shared_data_dir();
  const fs::path dir = fs::path(root) / "cifar10" / split;
  if (root.empty() || !fs::is_directory(dir)) GTEST_SKIP() << "no " << dir;
  const auto t0 = std::chrono::steady_clock::now();
  const ImageSet set = read_image_folder(dir.string(), 2);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("read_image_folder(cifar10/%s, 2 threads): %lld images in %.2f s\n", split.c_str(),
              static_cast<long long>(set.size()), s);
  EXPECT_EQ(set.size(), 10 * per_class);
  EXPECT_EQ(set.classes, (std::vector<std::string>{"airplane", "automobile", "bird", "cat", "deer",
                                                   "dog", "frog", "horse", "ship", "truck"}));
  EXPECT_EQ(set.height, 32);
  EXPECT_EQ(set.width, 32);
  EXPECT_EQ(set.channels, 3);
  std::vector<int64_t> counts(10, 0);
  for (int64_t l : set.labels) ++counts.at(static_cast<size_t>(l));
  EXPECT_EQ(counts, std::vector<int64_t>(10, per_class));
  // Real photos, not blank decodes: the mean pixel is mid-range and pixels vary.
  double sum = 0.0;
  for (uint8_t v : set.pixels) sum += v;
  const double mean = sum / static_cast<double>(set.pixels.size());
  EXPECT_GT(mean, 90.0);
  EXPECT_LT(mean, 160.0);
}

TEST(ImagesRealData, Cifar10TestFolder) { check_real_cifar10("test", 1000); }
TEST(ImagesRealData, Cifar10TrainFolder) { check_real_cifar10("train", 5000); }

}  // namespace
}  // namespace lb::data
