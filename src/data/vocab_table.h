// Token -> id lookup for WordPiece: an open-addressing hash table (linear probing, power-of-two
// size, at most half full) over views of strings owned elsewhere. WordPiece probes substrings
// of each word, most of them absent; a flat table answers in about one cache line where
// std::unordered_map walks a node chain. Internal to the tokenizer.
#pragma once
#include <cstdint>
#include <cstring>
#include <string_view>
#include <vector>

namespace lb::data {

class VocabTable {
 public:
  // keys must outlive the table and be distinct.
  void build(const std::vector<std::pair<std::string_view, int32_t>>& entries) {
    size_t cap = 16;
    while (cap < 2 * entries.size()) cap *= 2;
    slots_.assign(cap, Slot{});
    mask_ = cap - 1;
    max_len_ = 0;
    for (const auto& [key, id] : entries) {
      const uint64_t h = hash(key);
      size_t i = h & mask_;
      while (slots_[i].id >= 0) i = (i + 1) & mask_;
      slots_[i] = Slot{key.data(), static_cast<uint32_t>(key.size()), static_cast<uint32_t>(h >> 32), id};
      if (key.size() > max_len_) max_len_ = key.size();
    }
  }

  int32_t find(std::string_view key) const {  // -1 if absent
    const uint64_t h = hash(key);
    const auto tag = static_cast<uint32_t>(h >> 32);
    for (size_t i = h & mask_;; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.id < 0) return -1;
      if (s.tag == tag && s.len == key.size() && std::memcmp(s.data, key.data(), key.size()) == 0)
        return s.id;
    }
  }

  size_t max_len() const { return max_len_; }  // longest key, in bytes

 private:
  struct Slot {
    const char* data = nullptr;
    uint32_t len = 0;
    uint32_t tag = 0;  // the hash's high half, to skip most memcmps
    int32_t id = -1;   // -1: empty
  };

  // 8 bytes at a time, multiply-xorshift mixing (keys are short UTF-8 strings).
  static uint64_t hash(std::string_view s) {
    uint64_t h = 0x9E3779B97F4A7C15ull ^ s.size();
    size_t i = 0;
    for (; i + 8 <= s.size(); i += 8) {
      uint64_t w;
      std::memcpy(&w, s.data() + i, 8);
      h = (h ^ w) * 0xBF58476D1CE4E5B9ull;
      h ^= h >> 31;
    }
    uint64_t tail = 0;
    std::memcpy(&tail, s.data() + i, s.size() - i);
    h = (h ^ tail) * 0x94D049BB133111EBull;
    h ^= h >> 29;
    h *= 0xBF58476D1CE4E5B9ull;
    return h ^ (h >> 32);
  }

  std::vector<Slot> slots_;
  size_t mask_ = 0;
  size_t max_len_ = 0;
};

}  // namespace lb::data
