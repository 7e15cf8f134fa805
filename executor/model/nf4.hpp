#pragma once
// NF4 (4-bit NormalFloat) with double-quantised block constants: how QLoRA stores a frozen base
// (Dettmers et al. 2023, "QLoRA", §3 and Appendix E), as bitsandbytes implements it in
// quantize_4bit(A, blocksize=64, compress_statistics=True, quant_type="nf4").
// Reference read: bitsandbytes-foundation/bitsandbytes @ 95f9af309d4d5793847169c39288dcd3fcbdf564,
// bitsandbytes/functional.py (get_4bit_type, create_dynamic_map, quantize_4bit, quantize_blockwise,
// dequantize_4bit) and bitsandbytes/backends/default/ops.py (the torch reference kernels).
//
// Legend: n weights (flattened row-major), b = 64 weights per block, nb = ceil(n/b) blocks,
// g = 256 constants per second-level block, ng = ceil(nb/g).
//   c_j      fp32 absmax of block j (max |w| over its weights); offset = mean_j c_j
//   q_i      4-bit index into the NF4 table: bucketize(clamp(w_i * (1/c_j), -1, 1), midpoints) —
//            the nearest code, a tie going to the lower one (torch.bucketize, right=False)
//   codes    uint8 (ceil(n/2)): two indices per byte, weight 2i in the HIGH nibble and 2i+1 in the
//            low one ((q[::2] << 4) | q[1::2], ops.py); an odd tail is padded with the code of 0.0
//   qabsmax  uint8 (nb): c_j - offset, blockwise 8-bit (blocks of g) with the signed dynamic map
//            (create_dynamic_map(signed=True, max_exponent_bits=7, total_bits=8))
//   absmax2  fp32 (ng): max |c_j - offset| per block of g constants
//   dequant  c'_j = dyn[qabsmax_j] * absmax2[j / g] + offset;   w'_i = nf4[q_i] * c'_{i / b}  (fp32,
//            then cast to the compute dtype, as dequantize_4bit does)
// Bytes: n/2 + nb + 4 ng + 4 (offset) = 0.5 + 1/64 + 4/(64*256) per weight, the simulator's
// kNf4BytesPerWeight (simulator/parallel_config.hpp), up to rounding and the offset.
//
// Shards: a tensor-parallel rank holds a slice of the quantisation of the FULL weight (so every
// layout dequantises the same values): its weights' codes in its local order, the constants of
// its blocks and the second-level constants they need. Every local block must be a whole block
// of the full tensor (the full tensor's partial last block may end the shard).
#include <torch/torch.h>

#include <array>
#include <cstdint>
#include <vector>

namespace shardplan::executor {

inline constexpr int64_t kNf4Block = 64;           // quantize_4bit's default blocksize
inline constexpr int64_t kNf4ConstantBlock = 256;  // quantize_4bit: quantize_blockwise(absmax, blocksize=256)
inline constexpr uint8_t kNf4ZeroCode = 7;         // nf4[7] == 0.0 (the padding of an odd tail)

// The 16 NF4 values, sorted (bitsandbytes functional.py get_4bit_type("nf4") @ 95f9af30).
const std::array<float, 16>& nf4_values();
// The same as a (16) fp32 tensor on `device`.
torch::Tensor nf4_code(torch::Device device = torch::kCPU);
// bitsandbytes' signed 8-bit dynamic map, (256) fp32 sorted (create_dynamic_map @ 95f9af30).
torch::Tensor dynamic_map(torch::Device device = torch::kCPU);

// Blockwise absmax quantisation against a sorted code (ops.py quantize_blockwise / quantize_4bit):
// x (n) fp32 -> indices uint8 (n) and absmax fp32 (ceil(n / blocksize)).
struct BlockwiseCodes {
  torch::Tensor index;
  torch::Tensor absmax;
};
BlockwiseCodes quantize_blockwise(const torch::Tensor& x, const torch::Tensor& code, int64_t blocksize);
// code[index] * absmax[block] (fp32, n).
torch::Tensor dequantize_blockwise(const torch::Tensor& index, const torch::Tensor& absmax, const torch::Tensor& code,
                                   int64_t blocksize);

// Two 4-bit indices per byte, the first in the high nibble; and back (n indices).
torch::Tensor nf4_pack(const torch::Tensor& index);
torch::Tensor nf4_unpack(const torch::Tensor& codes, int64_t n);

// Runs of a slice's blocks in the full tensor: `count` runs of `blocks` consecutive full blocks,
// the first starting at full block `first`, each next one `stride` blocks on (a row-parallel
// shard: one run per row; a column-parallel one: one run per fused segment).
struct Nf4Runs {
  int64_t count = 1, blocks = 0, first = 0, stride = 0;
};

struct Nf4Tensor {
  std::vector<int64_t> shape;  // of the weight (this rank's shard for a slice)
  torch::Tensor codes;         // uint8 (ceil(n/2))
  torch::Tensor qabsmax;       // uint8 (nb)
  torch::Tensor absmax2;       // fp32: the second-level constants [group_begin, group_begin + size)
  float offset = 0.0f;         // mean of the fp32 block absmax of the full tensor
  // A slice: its blocks are, in order, these runs of the full tensor's blocks; empty for a whole
  // tensor. absmax2[k] is the full tensor's group group_begin + k.
  std::vector<Nf4Runs> runs;
  int64_t group_begin = 0;

  [[nodiscard]] int64_t numel() const;
  [[nodiscard]] int64_t blocks() const { return qabsmax.numel(); }
  // Bytes held: codes, constants, second-level constants, the offset and a slice's run table.
  [[nodiscard]] int64_t bytes() const;
};

// Quantises `w` (any float dtype and device; the math in fp32 on its device). The offset is the
// mean of the block absmax summed in double in index order (deterministic whatever the thread
// count; bitsandbytes takes torch's fp32 mean).
Nf4Tensor nf4_quantize(const torch::Tensor& w);
// The full tensor's block index of each block (int64, nb) on `device`.
torch::Tensor nf4_full_blocks(const Nf4Tensor& q, torch::Device device);
// The dequantised block constants c'_j (fp32, nb), on the codes' device.
torch::Tensor nf4_absmax(const Nf4Tensor& q);
// The weight (shape) in `dtype`: fp32 products nf4[q_i] * c'_j, then cast.
torch::Tensor nf4_dequantize(const Nf4Tensor& q, torch::ScalarType dtype = torch::kFloat);
// This rank's slice of `full` (a whole tensor): `index` holds, in the local shape, the flat
// index in the full tensor of each local weight (take_shard of an arange). Throws InputError
// (naming `what`) if a local block is not a whole block of the full tensor.
Nf4Tensor nf4_slice(const Nf4Tensor& full, const torch::Tensor& index, const std::string& what);

}  // namespace shardplan::executor
