// NF4 with double-quantised constants (executor/model/nf4.hpp), in process: the table against
// QLoRA's construction, the nibble order, round trips, the blockwise error bound, the packed size
// the simulator counts, tp slices, and the linear that dequantises per use.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "executor/errors.hpp"
#include "executor/metrics/memory_accounting.hpp"
#include "executor/model/nf4.hpp"
#include "executor/model/parameter.hpp"
#include "executor/parallel/nf4_linear.hpp"
#include "simulator/parallel_config.hpp"

namespace shardplan::executor {
namespace nf4_test {  // named, not anonymous: the files share a unity-build unit

// Inverse of the standard normal CDF, Phi(x) = erfc(-x / sqrt 2) / 2, by bisection (double).
double norm_ppf(double p) {
  double lo = -10, hi = 10;
  for (int i = 0; i < 200; ++i) {
    const double mid = (lo + hi) / 2;
    (0.5 * std::erfc(-mid / std::sqrt(2.0)) < p ? lo : hi) = mid;
  }
  return (lo + hi) / 2;
}

// The largest distance from a point of [-1, 1] to its nearest value of the sorted `code`.
double worst_rounding(const std::vector<float>& code) {
  double worst = std::max(code.front() + 1.0, 1.0 - code.back());
  for (size_t i = 1; i < code.size(); ++i) worst = std::max(worst, (code[i] - double(code[i - 1])) / 2);
  return worst;
}

std::vector<float> values_of(const torch::Tensor& t) {
  const torch::Tensor c = t.to(torch::kFloat).contiguous();
  return {c.data_ptr<float>(), c.data_ptr<float>() + c.numel()};
}

// Weights of `blocks` blocks with very different scales (so the double quantisation matters).
torch::Tensor scaled_normal(int64_t n, uint64_t seed) {
  auto gen = at::detail::createCPUGenerator(seed);
  torch::Tensor w = torch::empty({n}, torch::kFloat).normal_(0, 1, gen);
  const int64_t blocks = (n + 63) / 64;
  torch::Tensor scale = torch::empty({blocks}, torch::kFloat).uniform_(-3, 1, gen).exp();
  return w * scale.repeat_interleave(64).narrow(0, 0, n);
}

TEST(Nf4Table, IsQloraNormalFloatConstruction) {
  // QLoRA Appendix E / bitsandbytes create_normal_map(offset=0.9677083, use_extra_value=True):
  // 8 positive quantiles ppf(linspace(offset, 0.5, 9)[:-1]), 7 negative ones, and 0, over the max.
  const float offset = 0.9677083f;  // torch.linspace runs in fp32
  std::vector<double> v{0.0};
  for (int i = 0; i < 8; ++i) v.push_back(norm_ppf(offset + (0.5f - offset) * float(i) / 8.0f));
  for (int i = 0; i < 7; ++i) v.push_back(-norm_ppf(offset + (0.5f - offset) * float(i) / 7.0f));
  std::sort(v.begin(), v.end());
  const auto& table = nf4_values();
  for (size_t i = 0; i < 16; ++i) EXPECT_NEAR(table[i], v[i] / v.back(), 2e-6) << i;
  EXPECT_EQ(table[kNf4ZeroCode], 0.0f);
  EXPECT_EQ(table.front(), -1.0f);
  EXPECT_EQ(table.back(), 1.0f);
}

TEST(Nf4Table, DynamicMapIsBitsandbytesSigned8Bit) {
  const auto m = values_of(dynamic_map());
  ASSERT_EQ(m.size(), 256u);
  EXPECT_TRUE(std::is_sorted(m.begin(), m.end()));
  EXPECT_EQ(std::adjacent_find(m.begin(), m.end()), m.end());  // 256 distinct values
  EXPECT_EQ(m.back(), 1.0f);
  EXPECT_EQ(std::count(m.begin(), m.end(), 0.0f), 1);
  // The smallest magnitudes are 10^-6 x the midpoint of linspace(0.1, 1, 2); the largest negative
  // is the last midpoint of linspace(0.1, 1, 65).
  EXPECT_FLOAT_EQ(m[128], 0.55e-6f);
  EXPECT_FLOAT_EQ(m[0], -(1.0f - 0.9f / 128));
}

TEST(Nf4, EveryCodeDequantisesToTheTableExactly) {
  // Blocks holding every table value (so each block's absmax is exactly 1): the codes are the
  // table's indices and the dequantised weights are the table's values, bit for bit.
  const auto& table = nf4_values();
  torch::Tensor w = torch::empty({64 * 40}, torch::kFloat);
  std::vector<uint8_t> want;
  for (int64_t i = 0; i < w.numel(); ++i) {
    const int code = static_cast<int>((i + i / 64) % 16);
    w[i] = table[static_cast<size_t>(code)];
    want.push_back(static_cast<uint8_t>(code));
  }
  const Nf4Tensor q = nf4_quantize(w);
  const torch::Tensor codes = nf4_unpack(q.codes, w.numel());
  for (int64_t i = 0; i < w.numel(); ++i) ASSERT_EQ(codes[i].item<int>(), want[static_cast<size_t>(i)]) << i;
  EXPECT_TRUE(torch::equal(nf4_dequantize(q), w));
  EXPECT_TRUE(torch::equal(nf4_dequantize(q, torch::kBFloat16), w.to(torch::kBFloat16)));
}

TEST(Nf4, PacksTheFirstWeightInTheHighNibble) {
  torch::Tensor w = torch::zeros({65});  // odd: the tail byte's low nibble is padding
  w[0] = 1.0f;                           // code 15
  w[1] = -1.0f;                          // code 0
  w[64] = -1.0f;
  const Nf4Tensor q = nf4_quantize(w);
  ASSERT_EQ(q.codes.numel(), 33);
  EXPECT_EQ(q.codes[0].item<int>(), 0xF0);
  EXPECT_EQ(q.codes[1].item<int>(), kNf4ZeroCode * 16 + kNf4ZeroCode);
  EXPECT_EQ(q.codes[32].item<int>(), 0x00 | kNf4ZeroCode);  // -1 high, padding (code of 0.0) low
}

TEST(Nf4, QuantiseOfDequantiseGivesTheCodesBack) {
  // Random codes, each block holding a +-1 code (so its absmax is its constant), random block
  // constants over several 256-constant groups, a partial tail block.
  const int64_t n = 64 * 700 + 37, blocks = (n + 63) / 64;
  auto gen = at::detail::createCPUGenerator(7);
  torch::Tensor codes = torch::randint(0, 16, {n}, gen, torch::kLong);
  for (int64_t b = 0; b < blocks; ++b) codes[b * 64 + (b % 50) % std::min<int64_t>(64, n - b * 64)] = b % 2 ? 15 : 0;
  torch::Tensor scale = torch::empty({blocks}).uniform_(-4, 0, gen).exp();
  const torch::Tensor w = nf4_code().index_select(0, codes) * scale.repeat_interleave(64).narrow(0, 0, n);
  const Nf4Tensor q = nf4_quantize(w);
  EXPECT_TRUE(torch::equal(nf4_unpack(q.codes, n).to(torch::kLong), codes));
  const Nf4Tensor again = nf4_quantize(nf4_dequantize(q));
  EXPECT_TRUE(torch::equal(again.codes, q.codes));

  // The 8-bit blockwise map alike: blocks of 256 each holding the map's 1.0.
  torch::Tensor idx = torch::randint(0, 256, {256 * 5 + 9}, gen, torch::kLong);
  for (int64_t b = 0; b < 6; ++b) idx[b * 256] = 255;
  const torch::Tensor a = torch::empty({6}).uniform_(0.1, 2, gen);
  const torch::Tensor x = dequantize_blockwise(idx.to(torch::kByte), a, dynamic_map(), kNf4ConstantBlock);
  EXPECT_TRUE(torch::equal(quantize_blockwise(x, dynamic_map(), kNf4ConstantBlock).index.to(torch::kLong), idx));
}

TEST(Nf4, BlockErrorIsWithinHalfTheLargestGapTimesAbsmaxPlusTheConstantsError) {
  // |w - w'| <= |w - nf4[q] c| + |nf4[q]| |c - c'| <= c * G4/2 + |c - c'|, with G4/2 the worst
  // rounding to the table over [-1, 1]; and |c - c'| = |e - e'| <= A * Gd, e = c - offset,
  // A = max |e| over its group of 256, Gd the worst rounding to the dynamic map over [-1, 1]
  // (which has no -1: a clamped -1 goes to its smallest value). A few fp32 ulps on top.
  const int64_t n = 64 * 2000 + 17;
  const torch::Tensor w = scaled_normal(n, 11);
  const Nf4Tensor q = nf4_quantize(w);
  const double g4 = worst_rounding(values_of(nf4_code()));
  const double gd = worst_rounding(values_of(dynamic_map()));
  const auto wv = values_of(w), dq = values_of(nf4_dequantize(q)), cq = values_of(nf4_absmax(q));
  const int64_t blocks = (n + 63) / 64;
  std::vector<double> c(static_cast<size_t>(blocks), 0.0);
  for (int64_t i = 0; i < n; ++i) c[size_t(i / 64)] = std::max(c[size_t(i / 64)], std::abs(double(wv[size_t(i)])));
  double used = 0;  // the largest fraction of the 4-bit part of the bound actually reached
  for (int64_t g = 0; g * 256 < blocks; ++g) {
    double A = 0;
    for (int64_t j = g * 256; j < std::min(blocks, (g + 1) * 256); ++j)
      A = std::max(A, std::abs(c[size_t(j)] - q.offset));
    for (int64_t j = g * 256; j < std::min(blocks, (g + 1) * 256); ++j) {
      const double cerr = std::abs(c[size_t(j)] - cq[size_t(j)]);
      ASSERT_LE(cerr, A * gd + 4e-7 * (c[size_t(j)] + std::abs(q.offset))) << "constant " << j;
      double worst = 0;
      for (int64_t i = j * 64; i < std::min(n, (j + 1) * 64); ++i)
        worst = std::max(worst, std::abs(double(wv[size_t(i)]) - dq[size_t(i)]));
      ASSERT_LE(worst, c[size_t(j)] * g4 + A * gd + 1e-6 * c[size_t(j)]) << "block " << j;
      used = std::max(used, (worst - cerr) / (c[size_t(j)] * g4));
    }
  }
  EXPECT_GT(used, 0.8);  // the bound is nearly reached: the test is not vacuous
}

TEST(Nf4, PackedBytesAreWhatTheSimulatorCounts) {
  const int64_t n = 64 * 256 * 12;  // whole blocks and groups
  const Nf4Tensor q = nf4_quantize(scaled_normal(n, 3));
  EXPECT_EQ(q.codes.numel(), n / 2);
  EXPECT_EQ(q.blocks(), n / 64);
  EXPECT_EQ(q.absmax2.numel(), n / 64 / 256);
  // 0.5 + 1/64 + 4/(64*256) bytes per weight (simulator::kNf4BytesPerWeight), plus the offset.
  EXPECT_DOUBLE_EQ(static_cast<double>(q.bytes()), n * simulator::kNf4BytesPerWeight + 4);
}

TEST(Nf4, TensorParallelSlicesDequantiseAsTheFullWeight) {
  // (80, 1024): 1280 blocks in 5 groups; rows with different scales.
  const torch::Tensor full = scaled_normal(80 * 1024, 5).view({80, 1024});
  const Nf4Tensor q = nf4_quantize(full);
  const torch::Tensor dq = nf4_dequantize(q);
  const torch::Tensor index = torch::arange(full.numel(), torch::kLong).view({80, 1024});
  for (const ShardSpec& spec : {ShardSpec{1, {}, 0}, ShardSpec{0, {}, 0}, ShardSpec{0, {48, 16, 16}, 0}}) {
    for (int tp : {2, 4}) {
      for (int r = 0; r < tp; ++r) {
        const Nf4Tensor s = nf4_slice(q, take_shard(index, spec, r, tp), "w");
        EXPECT_TRUE(torch::equal(nf4_dequantize(s), take_shard(dq, spec, r, tp))) << spec.dim << " " << tp << " " << r;
        EXPECT_LT(s.bytes(), q.bytes() / tp + 4 * q.absmax2.numel() + 128);  // its share (+ shared groups, runs)
      }
    }
  }
  // A row-parallel shard of 100 columns would split blocks: refused, naming the weight.
  const Nf4Tensor odd = nf4_quantize(scaled_normal(8 * 200, 1).view({8, 200}));
  const torch::Tensor odd_index = torch::arange(1600, torch::kLong).view({8, 200});
  try {
    (void)nf4_slice(odd, take_shard(odd_index, ShardSpec{1, {}, 0}, 1, 2), "weight 'x.down_proj.weight'");
    FAIL() << "expected an InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("x.down_proj.weight"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("whole blocks"), std::string::npos) << e.what();
  }
}

TEST(Nf4Linear, MatchesTheDequantisedWeightAndKeepsNoWeightForBackward) {
  install_memory_accounting();
  const Nf4Tensor q = nf4_quantize(scaled_normal(512 * 1024, 9).view({512, 1024}));  // (out, in)
  const torch::Tensor wd = nf4_dequantize(q);
  torch::Tensor x = torch::randn({2, 3, 1024}).requires_grad_(true);
  const int64_t before = current_tensor_bytes();
  torch::Tensor y = nf4_linear(x, q);
  const int64_t held = current_tensor_bytes() - before;  // y and the graph: no (out, in) weight
  EXPECT_LT(held, wd.nbytes() / 8) << held;
  // Against a float64 product: any fp32 GEMM (oneDNN or OpenBLAS, cpu_gemm.hpp) is within a few
  // units of the last place of the largest term.
  auto near = [](const torch::Tensor& a, const torch::Tensor& ref) {
    return (a.to(torch::kDouble) - ref).abs().max().item<double>() <= 1e-5 * ref.abs().max().item<double>();
  };
  EXPECT_TRUE(near(y, torch::matmul(x.detach().to(torch::kDouble), wd.t().to(torch::kDouble))));
  const torch::Tensor gy = torch::randn_like(y);
  y.backward(gy);
  EXPECT_TRUE(near(x.grad(), torch::matmul(gy.to(torch::kDouble), wd.to(torch::kDouble))));
}

}  // namespace nf4_test
}  // namespace shardplan::executor
