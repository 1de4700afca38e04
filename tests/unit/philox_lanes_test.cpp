// The CPU's lane-parallel Philox (src/cpu/philox_lanes.h: AVX-512 intrinsics where the build
// has them, a vectorized loop otherwise) against the scalar round function, the dropout keep
// decisions against the stream's single draws, and the keep-bit packing both ways, at offsets
// that cross blocks, bytes and the 32-bit counter word.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "lb/core/philox.h"
#include "src/cpu/philox_lanes.h"

namespace lb {
namespace {

TEST(PhiloxLanes, BlocksEqualTheScalarRoundFunction) {
  const uint32_t key0 = 0x9abcdef0u, key1 = 0x12345678u;
  // The low counter word wraps within the 16 lanes at 2^32 - 3, and the whole 64-bit counter
  // at 2^64 - 5.
  for (uint64_t b0 : {uint64_t{0}, uint64_t{5}, (uint64_t{1} << 32) - 3, (uint64_t{7} << 32) + 11, ~uint64_t{0} - 4})
    for (uint64_t sub : {uint64_t{0}, uint64_t{0x1'0000'0007ull}}) {
      uint32_t lanes[4 * detail::kPhiloxLanes];
      detail::philox_blocks(b0, sub, key0, key1, lanes);
      for (int l = 0; l < detail::kPhiloxLanes; ++l) {
        const uint64_t b = b0 + static_cast<uint64_t>(l);
        const uint32_t ctr[4] = {static_cast<uint32_t>(b), static_cast<uint32_t>(b >> 32),
                                 static_cast<uint32_t>(sub), static_cast<uint32_t>(sub >> 32)};
        uint32_t want[4];
        philox4x32_10(ctr, key0, key1, want);
        for (int w = 0; w < 4; ++w) EXPECT_EQ(lanes[4 * l + w], want[w]) << "block " << b << " word " << w;
      }
    }
}

TEST(PhiloxLanes, KeepBytesAreTheStreamsDraws) {
  const uint64_t seed = 0x0123'4567'89ab'cdefull, sub = 3;
  const uint32_t key0 = static_cast<uint32_t>(seed), key1 = static_cast<uint32_t>(seed >> 32);
  for (uint64_t o0 : {uint64_t{0}, uint64_t{3}, uint64_t{61}, (uint64_t{1} << 34) - 5})
    for (int64_t n : {1, 7, 64, 130}) {
      std::vector<uint8_t> keep(static_cast<size_t>(n));
      detail::dropout_keep_bytes(seed, sub, o0, n, 0.3f, keep.data());
      for (int64_t k = 0; k < n; ++k)
        EXPECT_EQ(keep[k], philox_uniform(philox_draw(o0 + k, sub, key0, key1)) > 0.3f ? 1 : 0)
            << "draw " << o0 + k;
    }
}

TEST(PhiloxLanes, KeepBitsPackAndUnpackAtAnyBitOffset) {
  PhiloxStream st(7, 0, 0);
  for (int64_t e0 = 0; e0 < 17; ++e0)
    for (int64_t n = 0; n < 70; n += 3) {
      std::vector<uint8_t> keep(static_cast<size_t>(n)), back(static_cast<size_t>(n), 9);
      for (auto& k : keep) k = st.next_u32() & 1;
      std::vector<uint8_t> bits(static_cast<size_t>(std::max<int64_t>(1, (e0 + n + 7) / 8)), 0), want = bits;  // exactly
      bits[0] = want[0] = static_cast<uint8_t>((1u << (e0 & 7)) - 1);  // bits before e0 stay
      for (int64_t j = 0; j < n; ++j) want[(e0 + j) >> 3] |= static_cast<uint8_t>(keep[j] << ((e0 + j) & 7));
      if (e0 >= 8) bits[0] = want[0] = 0;
      detail::or_keep_bits(bits.data(), e0, keep.data(), n);
      EXPECT_EQ(bits, want) << "e0 " << e0 << " n " << n;
      detail::unpack_keep_bits(bits.data(), e0, n, back.data());
      EXPECT_EQ(back, keep) << "e0 " << e0 << " n " << n;
    }
}

}  // namespace
}  // namespace lb
