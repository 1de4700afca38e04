// CIFAR binary and image-folder readers (see images.h). Image folders decode on a few
// threads; when several files are bad, the error reported is always the one of the first bad
// file in (class, path) order, so a failure reads the same whatever the thread count.
#include "lb/data/images.h"

#include <stb_image.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <climits>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <mutex>
#include <thread>

#include "lb/core/error.h"

namespace lb::data {

namespace fs = std::filesystem;

namespace {

constexpr int64_t kCifarSide = 32, kCifarPlane = kCifarSide * kCifarSide;

std::vector<uint8_t> read_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  LB_CHECK(in.good(), "cannot open ", path.string(), ": ", std::strerror(errno));
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  in.seekg(0, std::ios::beg);
  std::vector<uint8_t> bytes(static_cast<size_t>(size));
  in.read(reinterpret_cast<char*>(bytes.data()), size);
  LB_CHECK(in.good() || size == 0, "cannot read ", path.string(), " (", size, " bytes)");
  return bytes;
}

// Class names, one a line; surrounding whitespace and blank lines ignored.
std::vector<std::string> read_class_names(const fs::path& path, int64_t num_classes) {
  std::ifstream in(path);
  LB_CHECK(in.good(), "cannot open ", path.string());
  std::vector<std::string> names;
  std::string line;
  while (std::getline(in, line)) {
    const size_t b = line.find_first_not_of(" \t\r"), e = line.find_last_not_of(" \t\r");
    if (b != std::string::npos) names.push_back(line.substr(b, e - b + 1));
  }
  LB_CHECK(static_cast<int64_t>(names.size()) == num_classes, path.string(), " has ",
           names.size(), " class names, expected ", num_classes);
  return names;
}

// Appends the records of one CIFAR batch file (CHW planes) to `set` as HWC images.
void append_cifar_file(const fs::path& path, int64_t label_bytes, int64_t num_classes,
                       ImageSet& set) {
  const std::vector<uint8_t> bytes = read_bytes(path);
  const int64_t record = label_bytes + 3 * kCifarPlane;
  const int64_t size = static_cast<int64_t>(bytes.size()), records = size / record;
  LB_CHECK(size % record == 0, path.string(), ": record ", records, " is truncated (",
           size % record, " of ", record, " bytes; the file has ", size,
           " bytes). HINT: re-download or re-extract the CIFAR binary archive");
  LB_CHECK(records > 0, path.string(), " holds no records");
  const size_t base = set.pixels.size();
  set.pixels.resize(base + static_cast<size_t>(records * 3 * kCifarPlane));
  for (int64_t r = 0; r < records; ++r) {
    const uint8_t* rec = bytes.data() + r * record;
    const int64_t label = rec[label_bytes - 1];  // CIFAR-100: the fine label (second byte)
    LB_CHECK(label < num_classes, path.string(), ": record ", r, " has label ", label,
             ", outside [0, ", num_classes, ")");
    set.labels.push_back(label);
    const uint8_t* planes = rec + label_bytes;
    uint8_t* out = set.pixels.data() + base + r * 3 * kCifarPlane;
    for (int64_t p = 0; p < kCifarPlane; ++p)
      for (int64_t c = 0; c < 3; ++c) out[3 * p + c] = planes[c * kCifarPlane + p];
  }
}

bool ends_with_any(const std::string& lower_name, std::initializer_list<const char*> exts) {
  for (const char* e : exts) {
    const size_t n = std::strlen(e);
    if (lower_name.size() >= n && lower_name.compare(lower_name.size() - n, n, e) == 0) return true;
  }
  return false;
}

struct ImageFile {
  fs::path path;
  int64_t label;
};

// A class directory's images in torchvision's order: sorted(os.walk(dir)) then sorted(files),
// i.e. by (parent directory path, file name).
std::vector<ImageFile> list_class_images(const fs::path& class_dir, int64_t label) {
  std::vector<std::pair<std::string, std::string>> found;  // (parent, file name)
  for (const auto& e :
       fs::recursive_directory_iterator(class_dir, fs::directory_options::follow_directory_symlink)) {
    if (!e.is_regular_file()) continue;
    std::string name = e.path().filename().string(), lower = name;
    std::transform(lower.begin(), lower.end(), lower.begin(),
                   [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
    LB_CHECK(!ends_with_any(lower, {".tif", ".tiff", ".webp"}), "image ", e.path().string(),
             ": TIFF/WebP cannot be decoded by stb_image. HINT: convert it to PNG or JPEG");
    if (ends_with_any(lower, {".jpg", ".jpeg", ".png", ".bmp", ".ppm", ".pgm"}))
      found.emplace_back(e.path().parent_path().string(), std::move(name));
  }
  LB_CHECK(!found.empty(), "class directory ", class_dir.string(),
           " has no images (.jpg .jpeg .png .bmp .ppm .pgm)");
  std::sort(found.begin(), found.end());
  std::vector<ImageFile> files;
  for (auto& [parent, name] : found) files.push_back({fs::path(parent) / name, label});
  return files;
}

// Decodes one file to 3-channel uint8 HWC (freed by the caller with stbi_image_free).
struct Decoded {
  uint8_t* data = nullptr;
  int width = 0, height = 0;
};
Decoded decode_rgb(const fs::path& path) {
  const std::vector<uint8_t> bytes = read_bytes(path);
  LB_CHECK(bytes.size() <= static_cast<size_t>(INT_MAX), "image ", path.string(), " is too large (",
           bytes.size(), " bytes)");
  Decoded d;
  int file_channels = 0;
  d.data = stbi_load_from_memory(bytes.data(), static_cast<int>(bytes.size()), &d.width, &d.height,
                                 &file_channels, 3);
  // stb_image's failure reason is thread-local (v2.27), so it is this file's.
  LB_CHECK(d.data != nullptr, "cannot decode image ", path.string(), ": ", stbi_failure_reason(),
           " (", bytes.size(), " bytes)");
  return d;
}

}  // namespace

ImageSet read_cifar_binary(const std::string& dir, const std::string& split, int64_t num_classes) {
  LB_CHECK(num_classes == 10 || num_classes == 100, "read_cifar_binary: num_classes must be 10 or ",
           "100, got ", num_classes);
  LB_CHECK(split == "train" || split == "test", "read_cifar_binary: split '", split,
           "' is not valid; valid: train, test");
  std::vector<std::string> names;
  if (num_classes == 10) {
    if (split == "train")
      for (int b = 1; b <= 5; ++b) names.push_back("data_batch_" + std::to_string(b) + ".bin");
    else
      names.push_back("test_batch.bin");
  } else {
    names.push_back(split + ".bin");
  }
  // Accept the extracted folder itself or the folder it was extracted into.
  fs::path root(dir);
  const char* sub = num_classes == 10 ? "cifar-10-batches-bin" : "cifar-100-binary";
  if (!fs::exists(root / names[0]) && fs::exists(root / sub / names[0])) root /= sub;
  for (const auto& n : names)
    LB_CHECK(fs::is_regular_file(root / n), "CIFAR-", num_classes, " ", split, " file ",
             (root / n).string(), " not found. HINT: pass the folder of the binary version (",
             sub, ")");

  ImageSet set;
  set.height = set.width = kCifarSide;
  set.channels = 3;
  const int64_t label_bytes = num_classes == 10 ? 1 : 2;
  for (const auto& n : names) append_cifar_file(root / n, label_bytes, num_classes, set);

  const fs::path meta = root / (num_classes == 10 ? "batches.meta.txt" : "fine_label_names.txt");
  if (fs::exists(meta)) {
    set.classes = read_class_names(meta, num_classes);
  } else {
    for (int64_t c = 0; c < num_classes; ++c) set.classes.push_back(std::to_string(c));
  }
  return set;
}

ImageSet read_image_folder(const std::string& dir, int threads) {
  LB_CHECK(fs::is_directory(dir), "image folder ", dir, " is not a directory");
  ImageSet set;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_directory()) set.classes.push_back(e.path().filename().string());
  LB_CHECK(!set.classes.empty(), "image folder ", dir,
           " has no class directories. HINT: the layout is <dir>/<class>/<image>");
  std::sort(set.classes.begin(), set.classes.end());
  std::vector<ImageFile> files;
  for (size_t c = 0; c < set.classes.size(); ++c) {
    auto in_class = list_class_images(fs::path(dir) / set.classes[c], static_cast<int64_t>(c));
    files.insert(files.end(), in_class.begin(), in_class.end());
  }
  const int64_t n = static_cast<int64_t>(files.size());

  // The first image fixes the size every other one must have.
  Decoded first = decode_rgb(files[0].path);
  set.height = first.height;
  set.width = first.width;
  set.channels = 3;
  const int64_t image_bytes = set.image_bytes();
  set.pixels.resize(static_cast<size_t>(n * image_bytes));
  std::memcpy(set.pixels.data(), first.data, static_cast<size_t>(image_bytes));
  stbi_image_free(first.data);
  set.labels.resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) set.labels[i] = files[i].label;

  auto decode_into = [&](int64_t i) {
    Decoded d = decode_rgb(files[i].path);
    const bool same = d.width == set.width && d.height == set.height;
    if (same) std::memcpy(set.pixels.data() + i * image_bytes, d.data, static_cast<size_t>(image_bytes));
    stbi_image_free(d.data);
    LB_CHECK(same, "image ", files[i].path.string(), " is ", d.width, "x", d.height, " but the first ",
             "image ", files[0].path.string(), " is ", set.width, "x", set.height,
             "; every image of a folder must have the same size. HINT: resize them beforehand");
  };

  // Indices are claimed in increasing order and claimed work always finishes, so once the
  // smallest failing index is known, every smaller index has been decoded: the reported
  // error is the first bad file's whatever the interleaving.
  std::atomic<int64_t> next{1}, first_bad{n};
  std::mutex mu;
  std::exception_ptr error;
  auto work = [&] {
    for (int64_t i; (i = next.fetch_add(1)) < std::min(n, first_bad.load());) {
      try {
        decode_into(i);
      } catch (...) {
        std::lock_guard<std::mutex> lock(mu);
        if (i < first_bad.load()) {
          first_bad.store(i);
          error = std::current_exception();
        }
      }
    }
  };
  const int hw = static_cast<int>(std::thread::hardware_concurrency());
  const int64_t nthreads = std::min<int64_t>(threads > 0 ? threads : std::max(hw, 1), n - 1);
  std::vector<std::thread> pool;
  for (int64_t t = 1; t < nthreads; ++t) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();
  if (error) std::rethrow_exception(error);
  return set;
}

}  // namespace lb::data
