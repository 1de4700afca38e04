// Image datasets decoded once into memory: CIFAR-10/100 binary batches and torchvision-style
// image folders (JPEG/PNG through stb_image). Every image of a set has the same size; pixels
// are uint8, HWC within an image, images one after another (image-major), labels in
// [0, classes.size()). The loader (image_loader.h) crops, flips, normalises and batches them.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace lb::data {

// Decoded images kept in memory, uint8 HWC per image, all the same size.
struct ImageSet {
  int64_t height = 0, width = 0, channels = 3;
  std::vector<uint8_t> pixels;       // n * height * width * channels, image-major, HWC
  std::vector<int64_t> labels;       // n
  std::vector<std::string> classes;  // class names in label order
  int64_t size() const { return static_cast<int64_t>(labels.size()); }
  int64_t image_bytes() const { return height * width * channels; }
  const uint8_t* image(int64_t i) const { return pixels.data() + i * image_bytes(); }
};

// CIFAR-10 / CIFAR-100 "binary version" (the cifar-10-batches-bin / cifar-100-binary folders,
// or their parent). CIFAR-10: data_batch_1..5.bin ("train") or test_batch.bin ("test"), each
// record 1 label byte + 3072 pixel bytes (1024 R, 1024 G, 1024 B, rows of 32). CIFAR-100:
// train.bin / test.bin, records of coarse label, fine label, 3072 pixels; the fine label is
// used. Class names come from batches.meta.txt / fine_label_names.txt (one per line, blank
// lines ignored) when present, else "0".."N-1". Images come out 32x32x3 HWC in file order.
// Errors (missing file, truncated record, label out of range, wrong number of class names)
// name the file and the record.
ImageSet read_cifar_binary(const std::string& dir, const std::string& split,
                           int64_t num_classes /*10 or 100*/);

// An image folder <dir>/<class>/<file>, as torchvision's ImageFolder reads it: class
// directories sorted by name give labels 0..; within a class, files are taken from the
// class directory and its subdirectories in the order of Python's sorted(os.walk(...)) then
// sorted(files), i.e. sorted by (directory path, file name) bytewise. Files with extensions
// .jpg .jpeg .png .bmp .ppm .pgm (any case) are images; .tif .tiff .webp (images to
// torchvision, not decodable by stb_image) are an error; anything else is ignored.
// Decoded once with stb_image on `threads` threads (0: hardware concurrency). Every image
// is converted to 3 channels as PIL's .convert("RGB") does (grey replicated, alpha dropped),
// so channels is always 3; each must have the first image's height and width. Errors name
// the file: unreadable or corrupt image, size mismatch, unsupported format; an empty
// directory or a class without images is an error too.
// Note: stb_image's JPEG decoder is not libjpeg; pixels can differ from PIL's by a few levels.
ImageSet read_image_folder(const std::string& dir, int threads = 0);

}  // namespace lb::data
