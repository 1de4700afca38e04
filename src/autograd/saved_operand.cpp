// bf16 storage of saved product operands (contract in lb/autograd/saved_operand.h).
#include "lb/autograd/saved_operand.h"

#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>

#include "lb/core/precision.h"
#include "src/backend/copy.h"

namespace lb::autograd {

namespace {

// The last conversion: its source view and the bf16 storage made from it. A hit needs both
// still alive (the source storage the same object, the copy still held by a tape node), so a
// freed and reused address or a copy already released never matches.
struct LastCopy {
  std::weak_ptr<Storage> source;
  int64_t offset = 0;
  Shape shape, strides;
  std::weak_ptr<Storage> copy;
};

std::mutex g_mutex;
LastCopy g_last;
std::atomic<bool> g_bf16_saving{true};

// Round-to-nearest-even as f32_to_bf16 (lb/core/dtype.h), written without branches so the
// loops vectorise; the conversions run over the threads of the products they feed.
void to_bf16(const float* x, uint16_t* y, int64_t n) {
#pragma omp parallel for simd schedule(static) if (n > (1 << 16))
  for (int64_t i = 0; i < n; ++i) {
    uint32_t u;
    std::memcpy(&u, x + i, 4);
    const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    const uint32_t quiet_nan = (u >> 16) | 0x40u;
    y[i] = static_cast<uint16_t>((u & 0x7fffffffu) > 0x7f800000u ? quiet_nan : rounded);
  }
}

void to_f32(const uint16_t* x, float* y, int64_t n) {
#pragma omp parallel for simd schedule(static) if (n > (1 << 16))
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t u = static_cast<uint32_t>(x[i]) << 16;
    std::memcpy(y + i, &u, 4);
  }
}

Tensor bf16_view(const std::shared_ptr<Storage>& storage, const Shape& shape) {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = storage;
  impl->shape = shape;
  impl->strides = contiguous_strides(shape);
  impl->dtype = DType::BF16;
  return Tensor(std::move(impl));
}

}  // namespace

bool bf16_saving() { return g_bf16_saving.load(std::memory_order_relaxed); }
void set_bf16_saving(bool on) { g_bf16_saving.store(on, std::memory_order_relaxed); }

Tensor keep_product_operand(const Tensor& x) {
  if (!x.defined() || x.dtype() != DType::F32 || !x.device().is_cpu() ||
      matmul_precision() != MatmulPrecision::BF16 || !bf16_saving())
    return x;
  // Parameters and buffers stay resident anyway: a copy would add bytes, not save them.
  if (const MemTag tag = x.storage()->tag(); tag == MemTag::Parameter || tag == MemTag::Buffer)
    return x;
  std::lock_guard<std::mutex> lock(g_mutex);
  if (auto src = g_last.source.lock(); src && src == x.storage() && g_last.offset == x.offset() &&
                                       g_last.shape == x.shape() && g_last.strides == x.strides()) {
    if (auto copy = g_last.copy.lock()) return bf16_view(copy, x.shape());
  }
  const Tensor xc = backend::contiguous(x);
  Tensor copy = Tensor::empty(x.shape(), DType::BF16, x.device());
  to_bf16(xc.data<float>(), static_cast<uint16_t*>(copy.raw_data()), x.numel());
  g_last = {x.storage(), x.offset(), x.shape(), x.strides(), copy.storage()};
  return copy;
}

Tensor keep_rounded_activation(const Tensor& x) { return keep_product_operand(x); }

Tensor saved_f32(const Tensor& saved) {
  if (!saved.defined() || saved.dtype() != DType::BF16 || !saved.device().is_cpu()) return saved;
  const Tensor sc = backend::contiguous(saved);
  Tensor out = Tensor::empty(saved.shape(), DType::F32, saved.device());
  to_f32(static_cast<const uint16_t*>(sc.raw_data()), out.data<float>(), saved.numel());
  return out;
}

}  // namespace lb::autograd
