// `leanback bench codec [--iters N] [--device cpu|cuda[:N]] [--json]`: throughput of the
// kept-tensor codecs (lb/autograd/saved_codec.h) on one GELU input of BERT-base's FFN
// (32 × 128 × 3072 f32, 48 MiB): encode and decode of each codec, in GB/s of bytes read plus
// bytes written, against a plain copy of the same tensor (the memory bandwidth reference).
#include <iomanip>
#include <iostream>

#include "lb/autograd/grad_mode.h"
#include "lb/autograd/saved_codec.h"
#include "lb/core/cuda_runtime_info.h"
#include "lb/core/philox.h"
#include "src/cli/bench_workloads.h"
#include "src/cli/cli_parse.h"
#include "src/cli/commands.h"

namespace lb::cli {

namespace {

template <typename F>
double median_ms(int iters, const Device& d, F&& f) {
  f();  // warm-up: allocator, pages
  std::vector<double> ms;
  for (int i = 0; i < iters; ++i) {
    const auto t0 = BenchClock::now();
    f();
    if (d.is_cuda()) cuda_synchronize(d.index);
    ms.push_back(ms_since(t0, BenchClock::now()));
  }
  return median(ms);
}

}  // namespace

int cmd_bench_codec(const std::vector<std::string>& args) {
  CLI::App app{"Kept-tensor codec throughput: encode and decode against a plain copy.", "leanback bench codec"};
  int iters = 10;
  bool json = false;
  std::string device = "cpu";
  app.add_option("--iters", iters, "timed repetitions")->check(CLI::Range(1, 10000))->capture_default_str();
  add_device_option(app, device);
  app.add_flag("--json", json, "one JSON line");
  if (!parse_cli(app, std::vector<std::string>(args.begin() + 1, args.end()))) return 0;
  const Device dev = parse_device_flag(device);
  NoGradGuard no_grad;
  PhiloxStream rng(1);
  const Tensor x = rand_normal({32, 128, 3072}, rng).to(dev);
  const double in_bytes = 4.0 * static_cast<double>(x.numel());
  const double copy_ms = median_ms(iters, dev, [&] { (void)x.clone(); });
  nlohmann::json rows = nlohmann::json::array();
  struct Case {
    const char* name;
    autograd::CodecSpec spec;
  };
  using autograd::Codec;
  const Case cases[] = {{"bf16", {Codec::BF16, 128, false}},
                        {"int8", {Codec::Int8, 128, false}},
                        {"int8 stochastic", {Codec::Int8, 128, true}},
                        {"int8 per row", {Codec::Int8, 0, false}},
                        {"int4 stochastic", {Codec::Int4, 128, true}},
                        {"int2 stochastic", {Codec::Int2, 128, true}}};
  for (const Case& c : cases) {
    Tensor e;
    const double enc = median_ms(iters, dev, [&] { e = autograd::encode(x, c.spec, 7, 1, 0); });
    const double dec = median_ms(iters, dev, [&] { (void)autograd::decode(e); });
    const double packed = static_cast<double>(e.numel());
    rows.push_back({{"codec", c.name},
                    {"bytes", e.numel()},
                    {"ratio", in_bytes / packed},
                    {"encode_ms", enc},
                    {"decode_ms", dec},
                    {"encode_gb_s", (in_bytes + packed) / enc / 1e6},
                    {"decode_gb_s", (in_bytes + packed) / dec / 1e6}});
  }
  const nlohmann::json r = {{"workload", "codec"},
                            {"shape", x.shape()},
                            {"device", dev.str()},
                            {"copy_ms", copy_ms},
                            {"copy_gb_s", 2 * in_bytes / copy_ms / 1e6},
                            {"codecs", rows},
                            {"iters", iters},
                            {"threads", bench_threads()}};
  if (json) {
    std::cout << r.dump() << std::endl;
    return 0;
  }
  std::cout << std::fixed << std::setprecision(2) << "codec on (32, 128, 3072) f32, " << dev.str()
            << " — copy: " << copy_ms << " ms, " << r["copy_gb_s"].get<double>() << " GB/s\n";
  for (const auto& row : rows)
    std::cout << "  " << std::left << std::setw(16) << row["codec"].get<std::string>() << std::right << " "
              << std::setw(5) << std::setprecision(1) << row["ratio"].get<double>() << "x smaller   encode "
              << std::setw(7) << std::setprecision(2) << row["encode_ms"].get<double>() << " ms ("
              << std::setw(6) << row["encode_gb_s"].get<double>() << " GB/s)   decode " << std::setw(7)
              << row["decode_ms"].get<double>() << " ms (" << std::setw(6) << row["decode_gb_s"].get<double>()
              << " GB/s)\n";
  return 0;
}

}  // namespace lb::cli
