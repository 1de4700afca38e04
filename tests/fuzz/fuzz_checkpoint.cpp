// libFuzzer harness: checkpoint loading (train::load_checkpoint) into a small MLP with Adam.
// Input: [u32 n][n bytes model.safetensors][u32 m][m bytes optimizer.safetensors][rest:
// trainer_state.json] (little-endian lengths; short inputs leave files empty). With
// LB_FUZZ_WRITE_SEED=FILE the harness writes a real checkpoint in that format and exits
// (tools/fuzz.sh makes the seed corpus so).
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <vector>

#include "lb/core/random.h"
#include "lb/nn/layers.h"
#include "lb/optim/lr_schedule.h"
#include "lb/optim/optimizer.h"
#include "lb/train/run/checkpoint.h"
#include "tests/fuzz/fuzz_input.h"

namespace {

class Mlp : public lb::nn::Module {
 public:
  Mlp() {
    register_module("fc1", std::make_shared<lb::nn::Linear>(4, 8));
    register_module("fc2", std::make_shared<lb::nn::Linear>(8, 2));
  }
  std::string type_name() const override { return "Mlp"; }
};

std::vector<uint8_t> slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void put_part(std::vector<uint8_t>& out, const std::vector<uint8_t>& part) {
  const uint32_t n = static_cast<uint32_t>(part.size());
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<uint8_t>(n >> (8 * i)));
  out.insert(out.end(), part.begin(), part.end());
}

// Next length-prefixed part of [p, end), clamped to what is left.
std::pair<const uint8_t*, size_t> take_part(const uint8_t*& p, const uint8_t* end) {
  if (end - p < 4) return {p, 0};
  uint32_t n = 0;
  for (int i = 0; i < 4; ++i) n |= static_cast<uint32_t>(p[i]) << (8 * i);
  p += 4;
  const size_t len = std::min<size_t>(n, static_cast<size_t>(end - p));
  const uint8_t* start = p;
  p += len;
  return {start, len};
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  const char* seed = std::getenv("LB_FUZZ_WRITE_SEED");
  if (!seed) return 0;
  lb::manual_seed(3);
  Mlp m;
  lb::optim::Adam opt(lb::optim::single_group(m.named_parameters(), 1e-2));
  const lb::optim::LrSchedule sched{lb::optim::ScheduleKind::Linear, 1, 10, 0.0};
  const auto dir = lb::fuzz::scratch() / "seed";
  lb::train::save_checkpoint(dir.string(), m, &opt, &sched, {{"step", 3}});
  std::vector<uint8_t> out;
  put_part(out, slurp(dir / "model.safetensors"));
  put_part(out, slurp(dir / "optimizer.safetensors"));
  const auto state = slurp(dir / "trainer_state.json");
  out.insert(out.end(), state.begin(), state.end());
  std::ofstream(seed, std::ios::binary).write(reinterpret_cast<const char*>(out.data()),
                                               static_cast<std::streamsize>(out.size()));
  std::exit(0);
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto dir = lb::fuzz::scratch() / "ckpt";
  const uint8_t* p = data;
  const uint8_t* end = data + size;
  const auto model = take_part(p, end);
  const auto optimizer = take_part(p, end);
  lb::fuzz::write_file(dir / "model.safetensors", model.first, model.second);
  lb::fuzz::write_file(dir / "optimizer.safetensors", optimizer.first, optimizer.second);
  lb::fuzz::write_file(dir / "trainer_state.json", p, static_cast<size_t>(end - p));
  static Mlp m;
  static lb::optim::Adam opt(lb::optim::single_group(m.named_parameters(), 1e-2));
  lb::fuzz::expect_clean([&] { (void)lb::train::load_checkpoint(dir.string(), m, &opt); });
  return 0;
}
