// safetensors read/write: round trips of every dtype, a file written by Python
// (tools/golden/gen_io.py) read back and reproduced byte for byte, every malformed-file case
// giving lb::Error that names the file (and tensor), and atomic writes that never clobber
// the old file.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "lb/io/safetensors.h"
#include "testing/testing.h"

namespace lb {
namespace {

namespace fs = std::filesystem;
using io::load_safetensors;
using io::save_safetensors;
using Named = std::vector<std::pair<std::string, Tensor>>;

std::string read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::ostringstream os;
  os << f.rdbuf();
  return os.str();
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::string le64(uint64_t v) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[i] = static_cast<char>((v >> (8 * i)) & 0xff);
  return s;
}

// A raw file: header length, header text, data bytes.
std::string file_of(const std::string& header, const std::string& data) {
  return le64(header.size()) + header + data;
}

std::string bytes_of(const Tensor& t) {
  const Tensor c = t.contiguous();
  return std::string(static_cast<const char*>(c.raw_data()), c.nbytes());
}

class Safetensors : public ::testing::Test {
 protected:
  void SetUp() override {
    static int counter = 0;
    dir_ = fs::temp_directory_path() /
           ("lb_safetensors_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ec;
    fs::permissions(dir_, fs::perms::owner_all, fs::perm_options::add, ec);
    fs::remove_all(dir_, ec);
  }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  std::vector<std::string> listing() const {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(dir_)) out.push_back(e.path().filename().string());
    std::sort(out.begin(), out.end());
    return out;
  }
  // Loading `bytes` must throw lb::Error whose message names the file and every `needle`.
  void expect_bad(const std::string& what, const std::string& bytes,
                  const std::vector<std::string>& needles) {
    const std::string p = path("bad.safetensors");
    write_bytes(p, bytes);
    try {
      load_safetensors(p);
      ADD_FAILURE() << what << ": no error";
    } catch (const Error& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find(p), std::string::npos) << what << ": message lacks the path: " << msg;
      for (const auto& n : needles)
        EXPECT_NE(msg.find(n), std::string::npos) << what << ": message lacks '" << n << "': " << msg;
    }
  }
  fs::path dir_;
};

// ---------------------------------------------------------------- round trips

Named every_dtype() {
  Named t;
  t.emplace_back("f32", testing::randn({2, 3}, 1, DType::F32));
  t.emplace_back("f64", testing::randn({4}, 2, DType::F64));
  t.emplace_back("bf16", testing::randn({3, 2}, 3, DType::F32).to(DType::BF16));
  t.emplace_back("f16", testing::randn({5}, 4, DType::F32).to(DType::F16));
  t.emplace_back("i8", Tensor::from_vector<int8_t>({-128, -3, 0, 5, 127}, {5}));
  t.emplace_back("i32", Tensor::from_vector<int32_t>({INT32_MIN, -1, 42, INT32_MAX}, {2, 2}));
  t.emplace_back("i64", Tensor::from_vector<int64_t>({INT64_MIN, (int64_t{1} << 40) + 7, INT64_MAX}, {3}));
  t.emplace_back("u8", Tensor::from_vector<uint8_t>({0, 1, 128, 255}, {1, 4}));
  t.emplace_back("bool", Tensor::from_vector<bool>({true, false, false, true}, {4}));
  t.emplace_back("scalar", Tensor::scalar(-7.25, DType::F64));
  t.emplace_back("scalar_i64", Tensor::scalar(3, DType::I64));
  t.emplace_back("empty", Tensor::zeros({0, 3}, DType::F32));
  t.emplace_back("empty_i32", Tensor::zeros({2, 0}, DType::I32));
  return t;
}

TEST_F(Safetensors, RoundTripEveryDtypeWithMetadata) {
  const Named in = every_dtype();
  const std::map<std::string, std::string> meta = {
      {"format", "pt"}, {"quote\"and\\slash", "line\nbreak\ttab"}, {"unicode", "h\xc3\xa9llo \xe2\x9c\x93"}};
  const std::string p = path("rt.safetensors");
  save_safetensors(p, in, meta);
  const io::SafetensorsFile f = load_safetensors(p);
  EXPECT_EQ(f.path, p);
  EXPECT_EQ(f.metadata, meta);
  ASSERT_EQ(f.tensors.size(), in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    SCOPED_TRACE(in[i].first);
    EXPECT_EQ(f.tensors[i].first, in[i].first);  // file order is the order written
    const Tensor& t = f.tensors[i].second;
    EXPECT_EQ(t.dtype(), in[i].second.dtype());
    EXPECT_EQ(t.shape(), in[i].second.shape());
    EXPECT_TRUE(t.is_contiguous());
    EXPECT_EQ(bytes_of(t), bytes_of(in[i].second));
  }
  EXPECT_EQ(f.at("i64").to_double_vector()[1], static_cast<double>((int64_t{1} << 40) + 7));
  EXPECT_EQ(f.at("scalar").dim(), 0);
  EXPECT_EQ(f.at("scalar").item<double>(), -7.25);
  EXPECT_EQ(f.at("empty").numel(), 0);
  EXPECT_EQ(f.find("nope"), nullptr);
  try {
    f.at("nope");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'nope'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
  }
  // Only the file remains: the temp file was renamed, not left behind.
  EXPECT_EQ(listing(), std::vector<std::string>{"rt.safetensors"});
}

TEST_F(Safetensors, EmptyFileListAndNoMetadata) {
  const std::string p = path("none.safetensors");
  save_safetensors(p, {});
  // Header "{}" padded with spaces to 8 bytes, no data.
  EXPECT_EQ(read_bytes(p), le64(8) + "{}      ");
  const auto f = load_safetensors(p);
  EXPECT_TRUE(f.tensors.empty());
  EXPECT_TRUE(f.metadata.empty());
}

TEST_F(Safetensors, NonContiguousInputsAreWrittenContiguous) {
  const Tensor base = Tensor::from_vector<float>({0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, {3, 4});
  const Tensor tr = base.transpose(0, 1);                 // (4, 3), strides (1, 4)
  const Tensor stepped = base.slice(1, 1, 4, 2);          // (3, 2): columns 1 and 3
  const Tensor bcast = Tensor::from_vector<double>({1.5, -2}, {2, 1}).expand({2, 3});
  const std::string p = path("views.safetensors");
  save_safetensors(p, {{"tr", tr}, {"stepped", stepped}, {"bcast", bcast}});
  const auto f = load_safetensors(p);
  EXPECT_EQ(f.at("tr").shape(), (Shape{4, 3}));
  EXPECT_EQ(f.at("tr").to_double_vector(),
            (std::vector<double>{0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11}));
  EXPECT_EQ(f.at("stepped").to_double_vector(), (std::vector<double>{1, 3, 5, 7, 9, 11}));
  EXPECT_EQ(f.at("bcast").to_double_vector(), (std::vector<double>{1.5, 1.5, 1.5, -2, -2, -2}));
  // The data section holds exactly the packed bytes: 12*4 + 6*4 + 6*8.
  const std::string raw = read_bytes(p);
  uint64_t hl = 0;
  std::memcpy(&hl, raw.data(), 8);
  EXPECT_EQ(raw.size() - 8 - hl, 12u * 4 + 6 * 4 + 6 * 8);
}

TEST_F(Safetensors, SavingTensorsThatRequireGradRecordsNothing) {
  Tensor w = testing::randn({3, 2}, 5);
  w.set_requires_grad(true);
  const std::string p = path("grad.safetensors");
  save_safetensors(p, {{"w", w.transpose(0, 1)}});
  EXPECT_EQ(load_safetensors(p).at("w").to_double_vector(), w.transpose(0, 1).to_double_vector());
}

// ---------------------------------------------------------------- the Python writer

TEST_F(Safetensors, ReadsFileWrittenByPython) {
  const io::SafetensorsFile f = testing::load_fixture("io_python_writer");
  std::vector<std::string> names;
  for (const auto& [n, _] : f.tensors) names.push_back(n);
  EXPECT_EQ(names, (std::vector<std::string>{"f32", "f64", "bf16", "f16", "i8", "i32", "i64",
                                             "u8", "bool", "scalar", "empty"}));
  EXPECT_EQ(f.metadata, (std::map<std::string, std::string>{
                            {"format", "pt"},
                            {"note", "written by tools/golden/gen_io.py"},
                            {"unicode", "h\xc3\xa9llo \xe2\x9c\x93"}}));

  const Tensor& f32 = f.at("f32");
  EXPECT_EQ(f32.dtype(), DType::F32);
  EXPECT_EQ(f32.shape(), (Shape{2, 3}));
  EXPECT_EQ(f32.to_double_vector(), (std::vector<double>{-1, -0.5, 0, 0.5, 1, 1.5}));
  const Tensor& f64 = f.at("f64");
  EXPECT_EQ(f64.dtype(), DType::F64);
  EXPECT_EQ(f64.to_double_vector(), (std::vector<double>{0.1, -1e300, 3.141592653589793}));
  // Half types compared as raw bits (PyTorch's rounding of 0.1 to bf16 is 0x3DCD).
  auto bits16 = [](const Tensor& t) {
    const auto* p = static_cast<const uint16_t*>(t.raw_data());
    return std::vector<uint16_t>(p, p + t.numel());
  };
  EXPECT_EQ(f.at("bf16").dtype(), DType::BF16);
  EXPECT_EQ(bits16(f.at("bf16")), (std::vector<uint16_t>{0x3F80, 0xC020, 0x3E20, 0x3DCD}));
  EXPECT_EQ(f.at("f16").dtype(), DType::F16);
  EXPECT_EQ(bits16(f.at("f16")), (std::vector<uint16_t>{0x3C00, 0xC000, 0x7BFF, 0x0400, 0x0001}));
  EXPECT_EQ(f.at("i8").dtype(), DType::I8);
  EXPECT_EQ(f.at("i8").to_double_vector(), (std::vector<double>{-128, -1, 0, 127}));
  EXPECT_EQ(f.at("i32").dtype(), DType::I32);
  EXPECT_EQ(f.at("i32").to_double_vector(), (std::vector<double>{-2147483648.0, 7, 2147483647.0}));
  const Tensor& i64 = f.at("i64");
  EXPECT_EQ(i64.dtype(), DType::I64);
  EXPECT_EQ(i64.data<int64_t>()[0], -(int64_t{1} << 62));
  EXPECT_EQ(i64.data<int64_t>()[1], 1);
  EXPECT_EQ(i64.data<int64_t>()[2], (int64_t{1} << 40) + 3);
  EXPECT_EQ(f.at("u8").dtype(), DType::U8);
  EXPECT_EQ(f.at("u8").shape(), (Shape{2, 2}));
  EXPECT_EQ(f.at("u8").to_double_vector(), (std::vector<double>{0, 1, 200, 255}));
  EXPECT_EQ(f.at("bool").dtype(), DType::Bool);
  EXPECT_EQ(f.at("bool").to_double_vector(), (std::vector<double>{1, 0, 1}));
  EXPECT_EQ(f.at("scalar").shape(), Shape{});
  EXPECT_EQ(f.at("scalar").item<float>(), 2.5f);
  EXPECT_EQ(f.at("empty").shape(), (Shape{0, 3}));
  EXPECT_EQ(f.at("empty").dtype(), DType::F64);
}

TEST_F(Safetensors, WriterReproducesPythonBytes) {
  const io::SafetensorsFile f = testing::load_fixture("io_python_writer");
  const std::string p = path("again.safetensors");
  save_safetensors(p, f.tensors, f.metadata);
  const std::string ours = read_bytes(p);
  const std::string theirs = read_bytes(testing::fixture_path("io_python_writer.safetensors"));
  ASSERT_EQ(ours.size(), theirs.size());
  EXPECT_EQ(ours.substr(0, 8), theirs.substr(0, 8));          // header length
  uint64_t hl = 0;
  std::memcpy(&hl, theirs.data(), 8);
  EXPECT_EQ(hl % 8, 0u);                                        // padded to 8
  EXPECT_EQ(ours.substr(8, hl), theirs.substr(8, hl));          // JSON text and padding
  EXPECT_TRUE(ours == theirs) << "data sections differ";
}

TEST_F(Safetensors, LoadFixtureMissingGivesHint) {
  try {
    testing::load_fixture("no_such_fixture_xyz");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("gen_golden.py"), std::string::npos) << e.what();
  }
}

// ---------------------------------------------------------------- malformed files

const std::string kEntryA = R"("a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})";
const std::string kData8(8, '\x01');

TEST_F(Safetensors, AcceptsMinimalHandBuiltFile) {
  // Sanity check for the byte builder the bad cases use, with padding spaces after the JSON.
  const std::string p = path("ok.safetensors");
  write_bytes(p, file_of("{" + kEntryA + "}   ", kData8));
  const auto f = load_safetensors(p);
  ASSERT_EQ(f.tensors.size(), 1u);
  EXPECT_EQ(f.at("a").shape(), (Shape{2}));
  // Empty tensors may sit anywhere (zero-length ranges); unordered offsets are fine.
  write_bytes(p, file_of(R"({"b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]},)" + kEntryA +
                             R"(,"e":{"dtype":"I64","shape":[0,5],"data_offsets":[8,8]},)"
                             R"("__metadata__":null})",
                         kData8 + "abcd"));
  const auto g = load_safetensors(p);
  ASSERT_EQ(g.tensors.size(), 3u);
  EXPECT_EQ(g.tensors[0].first, "b");  // header order, not data order
  EXPECT_EQ(bytes_of(g.at("b")), "abcd");
}

TEST_F(Safetensors, ShortOrTruncatedFiles) {
  expect_bad("empty file", "", {"too short"});
  expect_bad("5 bytes", "abcde", {"too short"});
  expect_bad("header past end", le64(1000) + "{}", {"past the end", "1000"});
  expect_bad("absurd header", le64(uint64_t{1} << 62) + "{}", {"100 MB"});
  expect_bad("header 100MB+1", le64(100'000'001) + "{}", {"100 MB"});
  expect_bad("zero header", le64(0), {"too small"});
  expect_bad("data truncated", file_of("{" + kEntryA + "}", "\x01\x02\x03"),
             {"'a'", "truncated"});
}

TEST_F(Safetensors, BadJson) {
  expect_bad("not an object", file_of("[1,2]   ", ""), {"start with '{'"});
  expect_bad("leading space", file_of(" {}", ""), {"start with '{'"});
  expect_bad("cut JSON", file_of("{\"a\":{\"dtype\":", ""), {"not valid JSON"});
  expect_bad("NUL padding", file_of(std::string("{}\0\0\0\0\0\0", 8), ""), {"not valid JSON"});
  expect_bad("bad UTF-8", file_of("{\"\xff\":1}", ""), {"not valid JSON"});
  expect_bad("trailing garbage", file_of("{} x", ""), {"not valid JSON"});
}

TEST_F(Safetensors, BadEntries) {
  expect_bad("number entry", file_of(R"({"w":5})", ""), {"'w'", "must be an object"});
  expect_bad("array entry", file_of(R"({"w":[1]})", ""), {"'w'", "must be an object"});
  expect_bad("missing dtype", file_of(R"({"w":{"shape":[0],"data_offsets":[0,0]}})", ""),
             {"'w'", "missing field 'dtype'"});
  expect_bad("missing offsets", file_of(R"({"w":{"dtype":"F32","shape":[0]}})", ""),
             {"'w'", "missing field 'data_offsets'"});
  expect_bad("extra field",
             file_of(R"({"w":{"dtype":"F32","shape":[0],"data_offsets":[0,0],"x":1}})", ""),
             {"'w'", "unknown field 'x'"});
  expect_bad("metadata not object", file_of(R"({"__metadata__":3})", ""), {"__metadata__"});
  expect_bad("metadata value not string", file_of(R"({"__metadata__":{"k":1}})", ""),
             {"__metadata__", "'k'"});
}

TEST_F(Safetensors, BadDtypes) {
  expect_bad("unknown dtype", file_of(R"({"w":{"dtype":"F8_E4M3","shape":[1],"data_offsets":[0,1]}})", "x"),
             {"'w'", "F8_E4M3", "supported"});
  expect_bad("lowercase dtype", file_of(R"({"w":{"dtype":"f32","shape":[1],"data_offsets":[0,4]}})", "xxxx"),
             {"'w'", "'f32'"});
  expect_bad("dtype number", file_of(R"({"w":{"dtype":4,"shape":[1],"data_offsets":[0,4]}})", "xxxx"),
             {"'w'", "dtype must be a string"});
}

TEST_F(Safetensors, BadShapes) {
  auto with_shape = [](const std::string& shape) {
    return file_of(R"({"w":{"dtype":"F32","shape":)" + shape + R"(,"data_offsets":[0,8]}})", kData8);
  };
  expect_bad("negative", with_shape("[-2]"), {"'w'", "non-negative integers", "-2"});
  expect_bad("fractional", with_shape("[2.5]"), {"'w'", "non-negative integers", "2.5"});
  expect_bad("float-valued int", with_shape("[2.0]"), {"'w'", "non-negative integers"});
  expect_bad("string dim", with_shape(R"(["2"])"), {"'w'", "non-negative integers"});
  expect_bad("not an array", with_shape("2"), {"'w'", "shape must be an array"});
  expect_bad("overflowing numel", with_shape("[4611686018427387904,4611686018427387904]"),
             {"'w'", "more than 2^64"});
  expect_bad("huge but not overflowing", with_shape("[1099511627776]"), {"'w'", "needs"});
}

TEST_F(Safetensors, BadOffsets) {
  auto with_offsets = [](const std::string& off, const std::string& data) {
    return file_of(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":)" + off + "}}", data);
  };
  expect_bad("out of range", with_offsets("[0,100]", kData8), {"'w'", "past the data section"});
  expect_bad("end before begin", with_offsets("[8,0]", kData8), {"'w'", "end before begin"});
  expect_bad("one offset", with_offsets("[0]", kData8), {"'w'", "[begin, end]"});
  expect_bad("three offsets", with_offsets("[0,4,8]", kData8), {"'w'", "[begin, end]"});
  expect_bad("negative offset", with_offsets("[-8,0]", kData8), {"'w'", "[begin, end]"});
  expect_bad("float offset", with_offsets("[0,8.0]", kData8), {"'w'", "[begin, end]"});
  expect_bad("size mismatch", with_offsets("[0,4]", std::string(4, 'x')), {"'w'", "needs 8"});
}

TEST_F(Safetensors, DataSectionMustBeTiledExactly) {
  const std::string a = R"("a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})";
  expect_bad("overlap",
             file_of("{" + a + R"(,"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                     std::string(12, 'x')),
             {"'b'", "overlap", "'a'"});
  expect_bad("identical ranges",
             file_of("{" + a + R"(,"b":{"dtype":"I64","shape":[1],"data_offsets":[0,8]}})",
                     std::string(8, 'x')),
             {"overlap"});
  expect_bad("empty tensor inside another",
             file_of("{" + a + R"(,"e":{"dtype":"F32","shape":[0],"data_offsets":[4,4]}})",
                     std::string(8, 'x')),
             {"'e'", "overlap"});
  expect_bad("hole between",
             file_of("{" + a + R"(,"b":{"dtype":"F32","shape":[1],"data_offsets":[12,16]}})",
                     std::string(16, 'x')),
             {"'b'", "[8, 12)", "holes"});
  expect_bad("hole at start",
             file_of(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", kData8),
             {"'a'", "[0, 4)", "holes"});
  expect_bad("trailing bytes", file_of("{" + a + "}", std::string(12, 'x')),
             {"[8, 12)", "after the last tensor"});
  expect_bad("no tensors but data", file_of("{}", "xxxx"), {"after the last tensor"});
}

TEST_F(Safetensors, DuplicateKeys) {
  expect_bad("duplicate tensor",
             file_of(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                     R"("a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                     kData8),
             {"duplicate tensor name 'a'"});
  expect_bad("duplicate field",
             file_of(R"({"a":{"dtype":"F32","dtype":"F32","shape":[2],"data_offsets":[0,8]}})", kData8),
             {"duplicate key 'dtype'", "'a'"});
  expect_bad("duplicate metadata", file_of(R"({"__metadata__":{"k":"1","k":"2"}})", ""),
             {"duplicate key 'k'", "__metadata__"});
}

TEST_F(Safetensors, MissingOrNonRegularFile) {
  const std::string p = path("absent.safetensors");
  try {
    load_safetensors(p);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
  }
  EXPECT_THROW(load_safetensors(dir_.string()), Error);
}

// ---------------------------------------------------------------- atomic writes

TEST_F(Safetensors, WriterRejectsBadInput) {
  const std::string p = path("w.safetensors");
  const Tensor x = Tensor::zeros({2});
  EXPECT_THROW(save_safetensors(p, {{"a", x}, {"a", x}}), Error);
  EXPECT_THROW(save_safetensors(p, {{"__metadata__", x}}), Error);
  EXPECT_THROW(save_safetensors(p, {{"", x}}), Error);
  EXPECT_THROW(save_safetensors(p, {{"u", Tensor()}}), Error);
  EXPECT_THROW(save_safetensors(p, {{std::string("bad\xff"), x}}), Error);
  EXPECT_TRUE(listing().empty());
}

class AtomicWrite : public Safetensors {
 protected:
  void SetUp() override {
    Safetensors::SetUp();
    target_ = path("model.safetensors");
    save_safetensors(target_, {{"old", Tensor::full({3}, 7.0)}}, {{"v", "1"}});
    old_bytes_ = read_bytes(target_);
  }
  void expect_untouched() {
    EXPECT_EQ(read_bytes(target_), old_bytes_);
    EXPECT_EQ(listing(), std::vector<std::string>{"model.safetensors"}) << "temp file left behind";
    EXPECT_EQ(load_safetensors(target_).at("old").to_double_vector(), (std::vector<double>{7, 7, 7}));
  }
  std::string target_, old_bytes_;
};

TEST_F(AtomicWrite, TensorThatThrowsLeavesOldFile) {
  EXPECT_THROW(save_safetensors(target_, {{"new", Tensor::ones({4})}, {"bad", Tensor()}}), Error);
  expect_untouched();
}

TEST_F(AtomicWrite, FailureWhileWritingRemovesTempFile) {
  // A file-size limit makes write() fail with EFBIG after the temp file exists and part of
  // it is written: the error path must remove the temp file and keep the old one.
  struct rlimit old_lim {};
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &old_lim), 0);
  auto old_handler = signal(SIGXFSZ, SIG_IGN);
  struct rlimit lim = old_lim;
  lim.rlim_cur = 4096;
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &lim), 0);
  bool threw = false;
  try {
    save_safetensors(target_, {{"big", Tensor::ones({100000})}});
  } catch (const Error& e) {
    threw = true;
    EXPECT_NE(std::string(e.what()).find("File too large"), std::string::npos) << e.what();
  }
  setrlimit(RLIMIT_FSIZE, &old_lim);
  signal(SIGXFSZ, old_handler);
  EXPECT_TRUE(threw);
  expect_untouched();
}

TEST_F(AtomicWrite, RenameFailureRemovesTempFile) {
  // The target is a directory: everything succeeds up to rename(), which fails.
  const std::string d = path("model.safetensors.d");
  fs::create_directories(d + "/inner");
  EXPECT_THROW(save_safetensors(d, {{"x", Tensor::ones({2})}}), Error);
  EXPECT_TRUE(fs::is_directory(d + "/inner"));
  fs::remove_all(d);
  expect_untouched();
}

TEST_F(AtomicWrite, MissingDirectory) {
  try {
    save_safetensors(path("no/such/dir/m.safetensors"), {{"x", Tensor::ones({2})}});
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no/such/dir"), std::string::npos) << e.what();
  }
  expect_untouched();
}

TEST_F(AtomicWrite, ReadOnlyDirectory) {
  if (::geteuid() == 0) GTEST_SKIP() << "root ignores directory permissions";
  fs::permissions(dir_, fs::perms::owner_read | fs::perms::owner_exec, fs::perm_options::replace);
  try {
    save_safetensors(target_, {{"x", Tensor::ones({2})}});
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(target_), std::string::npos) << e.what();
  }
  fs::permissions(dir_, fs::perms::owner_all, fs::perm_options::replace);
  expect_untouched();
}

TEST_F(AtomicWrite, SuccessfulOverwriteReplacesFile) {
  save_safetensors(target_, {{"new", Tensor::ones({4}, DType::F64)}});
  const auto f = load_safetensors(target_);
  EXPECT_EQ(f.find("old"), nullptr);
  EXPECT_EQ(f.at("new").to_double_vector(), (std::vector<double>{1, 1, 1, 1}));
  EXPECT_TRUE(f.metadata.empty());
  EXPECT_EQ(listing(), std::vector<std::string>{"model.safetensors"});
  // Permissions follow the umask like a plain open(), not mkstemp's 0600.
  const mode_t mask = ::umask(0);
  ::umask(mask);
  EXPECT_EQ(static_cast<mode_t>(fs::status(target_).permissions()) & 0777, 0666 & ~mask);
}

}  // namespace
}  // namespace lb
