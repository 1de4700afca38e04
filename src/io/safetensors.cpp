// safetensors read/write (see include/lb/io/safetensors.h and
// https://github.com/huggingface/safetensors#format).
//
// Reading treats the file as untrusted: every number in the header is checked before it is
// used, so a bad file gives an lb::Error naming the file (and the tensor), never a crash or a
// huge allocation. The rules enforced are the reference implementation's:
//   - 8-byte little-endian header length N, N <= 100 MB, 8 + N <= file size;
//   - the header is UTF-8 JSON starting with '{' (trailing spaces allowed as padding),
//     no duplicate keys at any level;
//   - each entry is {"dtype", "shape", "data_offsets"} with a known dtype, non-negative
//     integer dims and offsets [begin, end] relative to the end of the header;
//   - end - begin == numel * dtype size (overflow-checked);
//   - the byte ranges tile the data section exactly: no overlap, no holes, nothing after the
//     last tensor ("the byte buffer needs to be entirely indexed, and cannot contain holes");
//   - "__metadata__" is an object of string -> string.
// Writing matches tools/golden/common.py's save() byte for byte: compact JSON in the given
// tensor order with "__metadata__" (keys sorted, as std::map holds them) last, non-ASCII
// escaped as \uXXXX like json.dumps, spaces padding the header to a multiple of 8.
#include "lb/io/json_file.h"
#include "lb/io/safetensors.h"

#include "lb/io/atomic_file.h"
#include "lb/io/printable.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>
#include <unordered_set>

#include "lb/autograd/grad_mode.h"

namespace lb::io {

static_assert(std::endian::native == std::endian::little,
              "safetensors data is little-endian; this reader copies bytes as they are");

namespace {

using ojson = nlohmann::ordered_json;

// The reference implementation's limit: larger headers are refused to avoid parsing
// (or allocating) absurd amounts of JSON from a corrupt length.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;

struct DTypeCode {
  const char* code;
  DType dtype;
};
constexpr DTypeCode kDTypeCodes[] = {
    {"F32", DType::F32}, {"F64", DType::F64}, {"BF16", DType::BF16},
    {"F16", DType::F16}, {"I8", DType::I8},   {"I32", DType::I32},
    {"I64", DType::I64}, {"U8", DType::U8},   {"BOOL", DType::Bool},
};

const char* dtype_code(DType t) {
  for (const auto& c : kDTypeCodes)
    if (c.dtype == t) return c.code;
  LB_FAIL("safetensors: dtype ", dtype_name(t), " has no safetensors code");
}

std::string errno_str(int e) { return std::strerror(e); }

// Owns a file descriptor.
class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  ~Fd() { reset(); }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  void reset() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  int release() {
    const int f = fd_;
    fd_ = -1;
    return f;
  }

 private:
  int fd_;
};

// ---------------------------------------------------------------- reading

// Reads exactly n bytes at file offset `off`; a short read means the file shrank under us.
void pread_exact(int fd, void* buf, size_t n, uint64_t off, const std::string& path,
                 const std::string& what) {
  char* p = static_cast<char*>(buf);
  while (n > 0) {
    const ssize_t r = ::pread(fd, p, n, static_cast<off_t>(off));
    if (r < 0) {
      if (errno == EINTR) continue;
      LB_FAIL("safetensors file '", path, "': reading ", what, " failed: ", errno_str(errno));
    }
    LB_CHECK(r != 0, "safetensors file '", path, "': truncated while reading ", what,
             " (unexpected end of file at byte ", off, ")");
    p += r;
    n -= static_cast<size_t>(r);
    off += static_cast<uint64_t>(r);
  }
}

// Parses the header, recording the first duplicated key (nlohmann would silently keep the
// last one; the format forbids duplicates).
ojson parse_header(const std::string& text, const std::string& path) {
  std::vector<std::unordered_set<std::string>> keys;  // one set per open object
  std::string top_key, duplicate;
  bool too_deep = false;
  auto cb = [&](int depth, ojson::parse_event_t ev, ojson& parsed) {
    // The format needs depth 3 (header, entry, shape); deep input must not build a tree that
    // recursive code (copies, dump, destruction) later overflows the stack on.
    if (depth > kMaxJsonDepth) {
      too_deep = true;
      throw std::runtime_error("too deep");
    }
    switch (ev) {
      case ojson::parse_event_t::object_start: keys.emplace_back(); break;
      case ojson::parse_event_t::object_end: keys.pop_back(); break;
      case ojson::parse_event_t::key: {
        const std::string k = parsed.get<std::string>();
        if (keys.size() == 1) top_key = k;
        if (!keys.back().insert(k).second && duplicate.empty())
          duplicate = keys.size() == 1 ? "duplicate tensor name '" + k + "'"
                                       : "duplicate key '" + k + "' in entry '" + top_key + "'";
        break;
      }
      default: break;
    }
    return true;
  };
  ojson h;
  try {
    h = ojson::parse(text, cb);
  } catch (const std::runtime_error&) {
    LB_CHECK(!too_deep, "safetensors file '", path, "': header JSON is nested deeper than ", kMaxJsonDepth, " levels");
    throw;
  } catch (const ojson::exception& e) {
    LB_FAIL("safetensors file '", path, "': header is not valid JSON: ", e.what());
  }
  LB_CHECK(duplicate.empty(), "safetensors file '", path, "': ", duplicate,
           " (the format forbids duplicate keys)");
  LB_CHECK(h.is_object(), "safetensors file '", path, "': header must be a JSON object, got ",
           h.type_name());
  return h;
}

struct Entry {
  std::string name;
  DType dtype;
  Shape shape;
  uint64_t begin, end;
};

Entry parse_entry(const std::string& path, const std::string& name, const ojson& v,
                  uint64_t data_size) {
  const std::string where = "safetensors file '" + path + "': tensor '" + name + "'";
  LB_CHECK(v.is_object(), where, ": entry must be an object {dtype, shape, data_offsets}, got ",
           v.type_name());
  for (const auto& [k, _] : v.items())
    LB_CHECK(k == "dtype" || k == "shape" || k == "data_offsets", where, ": unknown field '", k,
             "' (expected dtype, shape, data_offsets)");
  for (const char* k : {"dtype", "shape", "data_offsets"})
    LB_CHECK(v.contains(k), where, ": missing field '", k, "'");

  Entry e;
  e.name = name;
  const ojson& dt = v["dtype"];
  LB_CHECK(dt.is_string(), where, ": dtype must be a string, got ", dt.dump());
  const std::string code = dt.get<std::string>();
  const DTypeCode* found = nullptr;
  for (const auto& c : kDTypeCodes)
    if (code == c.code) found = &c;
  LB_CHECK(found != nullptr, where, ": unsupported dtype '", code,
           "'; supported: F32 F64 BF16 F16 I8 I32 I64 U8 BOOL");
  e.dtype = found->dtype;

  const ojson& sh = v["shape"];
  LB_CHECK(sh.is_array(), where, ": shape must be an array, got ", sh.dump());
  uint64_t numel = 1;
  bool overflow = false, has_zero = false;
  for (const auto& d : sh) {
    LB_CHECK(d.is_number_unsigned(), where, ": shape ", sh.dump(),
             " must hold non-negative integers, found ", d.dump());
    const uint64_t n = d.get<uint64_t>();
    LB_CHECK(n <= static_cast<uint64_t>(INT64_MAX), where, ": dimension ", n, " too large");
    has_zero = has_zero || n == 0;
    overflow = __builtin_mul_overflow(numel, n, &numel) || overflow;
    e.shape.push_back(static_cast<int64_t>(n));
  }
  uint64_t nbytes = 0;
  overflow = __builtin_mul_overflow(numel, dtype_size(e.dtype), &nbytes) || overflow;
  // A zero dimension makes the tensor empty whatever the other dims; otherwise an overflowed
  // product can never match a real byte range (UINT64_MAX stands for "more than 2^64").
  if (has_zero) nbytes = 0;
  else if (overflow) nbytes = UINT64_MAX;

  const ojson& off = v["data_offsets"];
  LB_CHECK(off.is_array() && off.size() == 2 && off[0].is_number_unsigned() &&
               off[1].is_number_unsigned(),
           where, ": data_offsets must be [begin, end] with non-negative integers, got ",
           off.dump());
  e.begin = off[0].get<uint64_t>();
  e.end = off[1].get<uint64_t>();
  LB_CHECK(e.begin <= e.end, where, ": data_offsets [", e.begin, ", ", e.end,
           "] end before begin");
  LB_CHECK(e.end <= data_size, where, ": data_offsets [", e.begin, ", ", e.end,
           "] run past the data section (", data_size,
           " bytes). HINT: the file may be truncated (incomplete download or copy)");
  LB_CHECK(e.end - e.begin == nbytes, where, ": data_offsets [", e.begin, ", ", e.end, "] hold ",
           e.end - e.begin, " bytes but ", code, " shape ", sh.dump(), " needs ",
           nbytes == UINT64_MAX ? std::string("more than 2^64") : std::to_string(nbytes));
  return e;
}

// The byte ranges must tile [0, data_size) exactly.
void check_coverage(const std::string& path, const std::vector<Entry>& entries,
                    uint64_t data_size) {
  std::vector<size_t> order(entries.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return std::pair(entries[a].begin, entries[a].end) < std::pair(entries[b].begin, entries[b].end);
  });
  uint64_t covered = 0;
  const Entry* prev = nullptr;
  for (size_t i : order) {
    const Entry& e = entries[i];
    LB_CHECK(e.begin >= covered, "safetensors file '", path, "': tensor '", e.name,
             "' bytes [", e.begin, ", ", e.end, ") overlap tensor '", prev ? prev->name : "",
             "' bytes [", prev ? prev->begin : 0, ", ", covered, ")");
    LB_CHECK(e.begin == covered, "safetensors file '", path, "': data bytes [", covered, ", ",
             e.begin, ") before tensor '", e.name,
             "' belong to no tensor (the format requires the data section to be covered "
             "without holes)");
    if (e.end > e.begin) prev = &e;
    covered = e.end;
  }
  LB_CHECK(covered == data_size, "safetensors file '", path, "': data bytes [", covered, ", ",
           data_size, ") after the last tensor belong to no tensor (the format requires the "
           "data section to be covered without holes)");
}

}  // namespace

SafetensorsFile load_safetensors(const std::string& path) {
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  LB_CHECK(fd.get() >= 0, "cannot open safetensors file '", path, "': ", errno_str(errno));
  struct stat st {};
  LB_CHECK(::fstat(fd.get(), &st) == 0, "cannot stat safetensors file '", path, "': ",
           errno_str(errno));
  LB_CHECK(S_ISREG(st.st_mode), "safetensors file '", path, "' is not a regular file");
  const uint64_t file_size = static_cast<uint64_t>(st.st_size);
  LB_CHECK(file_size >= 8, "safetensors file '", path, "' is too short (", file_size,
           " bytes): it must start with an 8-byte header length");

  unsigned char len_bytes[8];
  pread_exact(fd.get(), len_bytes, 8, 0, path, "the header length");
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | len_bytes[i];
  LB_CHECK(header_len <= kMaxHeaderBytes, "safetensors file '", path, "': header length ",
           header_len, " exceeds the 100 MB limit (corrupt file, or not a safetensors file)");
  LB_CHECK(header_len <= file_size - 8, "safetensors file '", path, "': header length ",
           header_len, " runs past the end of the file (", file_size,
           " bytes). HINT: the file may be truncated");
  LB_CHECK(header_len >= 2, "safetensors file '", path, "': header length ", header_len,
           " is too small for a JSON object");

  std::string text(header_len, '\0');
  pread_exact(fd.get(), text.data(), header_len, 8, path, "the header");
  LB_CHECK(text[0] == '{', "safetensors file '", path,
           "': header must start with '{' (not a safetensors file?)");
  // nlohmann stops at a NUL as if at end of input; the format pads with spaces only.
  const size_t nul = text.find('\0');
  LB_CHECK(nul == std::string::npos, "safetensors file '", path,
           "': header is not valid JSON: NUL byte at header offset ", nul,
           " (padding must be spaces)");
  const ojson h = parse_header(text, path);

  const uint64_t data_start = 8 + header_len;
  const uint64_t data_size = file_size - data_start;
  SafetensorsFile out;
  out.path = path;
  std::vector<Entry> entries;
  for (const auto& [name, v] : h.items()) {
    if (name == "__metadata__") {
      if (v.is_null()) continue;
      LB_CHECK(v.is_object(), "safetensors file '", path,
               "': __metadata__ must be an object of strings, got ", v.type_name());
      for (const auto& [k, s] : v.items()) {
        LB_CHECK(s.is_string(), "safetensors file '", path, "': __metadata__ value for '", k,
                 "' must be a string, got ", s.dump());
        out.metadata[k] = s.get<std::string>();
      }
      continue;
    }
    entries.push_back(parse_entry(path, name, v, data_size));
  }
  check_coverage(path, entries, data_size);

  out.tensors.reserve(entries.size());
  for (const Entry& e : entries) {
    Tensor t = Tensor::empty(e.shape, e.dtype);
    if (e.end > e.begin)
      pread_exact(fd.get(), t.raw_data(), e.end - e.begin, data_start + e.begin, path,
                  "tensor '" + e.name + "'");
    out.tensors.emplace_back(e.name, std::move(t));
  }
  return out;
}

const Tensor* SafetensorsFile::find(const std::string& name) const {
  for (const auto& [n, t] : tensors)
    if (n == name) return &t;
  return nullptr;
}

const Tensor& SafetensorsFile::at(const std::string& name) const {
  if (const Tensor* t = find(name)) return *t;
  std::string some;
  for (size_t i = 0; i < tensors.size() && i < 8; ++i) some += (i ? ", " : "") + tensors[i].first;
  if (tensors.size() > 8) some += ", ...";
  LB_FAIL("tensor '", name, "' not found in safetensors file '", path, "' (", tensors.size(),
          " tensors: ", some, ")");
}

// ---------------------------------------------------------------- writing

void save_safetensors(const std::string& path,
                      const std::vector<std::pair<std::string, Tensor>>& tensors,
                      const std::map<std::string, std::string>& metadata) {
  // Validate and build the header before touching the file system.
  ojson header = ojson::object();
  std::set<std::string> names;
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    LB_CHECK(t.defined(), "save_safetensors '", path, "': tensor '", name, "' is undefined");
    LB_CHECK(name != "__metadata__", "save_safetensors '", path,
             "': '__metadata__' is reserved and cannot name a tensor");
    LB_CHECK(!name.empty(), "save_safetensors '", path, "': empty tensor name");
    LB_CHECK(names.insert(name).second, "save_safetensors '", path,
             "': duplicate tensor name '", name, "'");
    const uint64_t n = t.nbytes();
    header[name] = {{"dtype", dtype_code(t.dtype())},
                    {"shape", t.shape()},
                    {"data_offsets", {offset, offset + n}}};
    offset += n;
  }
  if (!metadata.empty()) {
    ojson m = ojson::object();
    for (const auto& [k, v] : metadata) m[k] = v;
    header["__metadata__"] = std::move(m);
  }
  std::string text;
  try {
    text = header.dump(-1, ' ', /*ensure_ascii=*/true);
  } catch (const ojson::exception& e) {
    LB_FAIL("save_safetensors '", path, "': a tensor name or metadata string is not valid UTF-8: ",
            e.what());
  }
  text.append((8 - text.size() % 8) % 8, ' ');

  LB_CHECK(!std::filesystem::path(path).filename().empty(), "save_safetensors: '", path,
           "' names no file");
  write_atomic(path, [&](int fd) {
    unsigned char len_bytes[8];
    for (int i = 0; i < 8; ++i) len_bytes[i] = static_cast<unsigned char>(text.size() >> (8 * i));
    write_all(fd, len_bytes, 8, path);
    write_all(fd, text.data(), text.size(), path);
    NoGradGuard no_grad;
    for (const auto& [name, t0] : tensors) {
      if (t0.numel() == 0) continue;
      // Convert one tensor at a time, so a strided or device tensor costs at most one copy.
      Tensor t = t0.detach();
      if (!t.device().is_cpu()) t = t.to(Device::cpu());
      if (!t.is_contiguous()) t = t.contiguous();
      write_all(fd, t.raw_data(), t.nbytes(), path);
    }
  });
}

namespace {
// The first NaN or inf of n values, by their exponent bits (bf16, f16) or std::isfinite; -1: none.
template <typename T>
int64_t first_non_finite_float(const T* p, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    if (!std::isfinite(p[i])) return i;
  return -1;
}
int64_t first_non_finite_half(const uint16_t* p, int64_t n, uint16_t exponent) {
  for (int64_t i = 0; i < n; ++i)
    if ((p[i] & exponent) == exponent) return i;
  return -1;
}
}  // namespace

void check_finite(const SafetensorsFile& f) {
  for (const auto& [name, t] : f.tensors) {
    const int64_t n = t.numel();
    int64_t bad = -1;
    switch (t.dtype()) {
      case DType::F32: bad = first_non_finite_float(t.data<float>(), n); break;
      case DType::F64: bad = first_non_finite_float(t.data<double>(), n); break;
      case DType::BF16: bad = first_non_finite_half(reinterpret_cast<const uint16_t*>(t.raw_data()), n, 0x7f80); break;
      case DType::F16: bad = first_non_finite_half(reinterpret_cast<const uint16_t*>(t.raw_data()), n, 0x7c00); break;
      default: break;
    }
    LB_CHECK(bad < 0, f.path, ": tensor '", printable(name), "' holds NaN or inf (element ", bad,
             "); leanback loads only finite weights");
  }
}

}  // namespace lb::io
