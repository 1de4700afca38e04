// Optimizer state stored in 8 or 4 bits: block-wise dynamic quantization, the scheme of
// 8-bit optimizers (Dettmers et al. 2022, "8-bit Optimizers via Block-wise Quantization";
// bitsandbytes, torchao), written here from the paper's description.
//
// A state tensor is cut into blocks of `block` elements (8-bit: 256, 4-bit: 128, as torchao's
// defaults); each block keeps its absolute maximum A (f32) and one code per element, the index
// of the nearest value of a fixed table to x / A. The table is dynamic (non-linear): decade i
// (values in 10^-i · (0.1, 1]) gets 2^(b-1-i) evenly spaced values, so large values keep
// relative precision ~1% and small ones still exist down to 10^-(b-1):
//   signed (Adam's m):     a sign bit and b-1 magnitude bits over {0} ∪ decades 0 .. b-2;
//   unsigned (Adam's v):   b magnitude bits over decades 0 .. b-1, with no zero: v rounds up to
//                          the smallest value rather than to 0, because m / sqrt(v) with v
//                          decoded as 0 would blow up an update (Li et al. 2023's "zero-point
//                          problem"); an exact 0 decodes as that smallest value times A
//                          (a block of zeros, A = 0, decodes as zeros).
// Each decade's top value is 10^-i exactly, so a block's largest element decodes exactly.
// 8-bit codes are the nearest table value (ties to the smaller magnitude), as bitsandbytes
// rounds. 4-bit codes round stochastically between the two table values around x / A (up
// with probability proportional to the distance from the lower one): with nearest rounding
// an exponential average whose step (1-β)(g - m) is below half the spacing never moves, so a
// 4-bit m stopped decaying (on a least-squares test its loss after 30 steps was 1.13 against
// f32's 0.75; with stochastic rounding 0.80). The draws are a hash of (seed, element), so a
// resumed run draws what the uninterrupted one did. 4-bit codes are packed two per byte, the
// lower element in the low nibble.
#pragma once
#include <cstdint>
#include <vector>

namespace lb::optim {

struct StateCodec {
  int bits = 8;          // 8 or 4
  bool is_signed = true;
  int64_t block = 256;
};

// Adam's first moment (signed) and second moment (unsigned, no zero) at `bits` (8 or 4).
StateCodec moment_codec(int bits);
StateCodec second_moment_codec(int bits);

// The table's values in code order (2^bits entries; signed: code = sign << (bits-1) | magnitude
// index, magnitudes ascending).
const std::vector<float>& code_values(const StateCodec& c);

int64_t num_blocks(const StateCodec& c, int64_t n);
int64_t code_bytes(const StateCodec& c, int64_t n);  // bytes of n codes (4-bit: ceil(n / 2))

// One block: x[0..n) (n ≤ c.block) into codes at q (the block's first byte); returns A.
// `seed` keys the 4-bit codes' stochastic rounding (one per block and step).
float encode_block(const StateCodec& c, const float* x, int64_t n, uint8_t* q, uint64_t seed = 0);
// Decodes n codes from q with the block's A into out.
void decode_block(const StateCodec& c, const uint8_t* q, float absmax, int64_t n, float* out);

}  // namespace lb::optim
