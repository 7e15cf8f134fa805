#pragma once
// The QLoRA base as bitsandbytes serialises a Linear4bit (Params4bit + QuantState.as_dict(packed=True),
// bitsandbytes functional.py @ 95f9af30), gathered over tp and pp into one .safetensors file:
//   <name>                                    uint8 (ceil(n/2), 1): packed codes, high nibble first
//   <name>.absmax                             uint8 (nb): the 8-bit block constants
//   <name>.quant_map                          fp32 (16): the NF4 table
//   <name>.nested_absmax                      fp32 (ng): the second-level constants
//   <name>.nested_quant_map                   fp32 (256): the dynamic map
//   <name>.quant_state.bitsandbytes__nf4      uint8: JSON {quant_type, blocksize, dtype, shape,
//                                             nested_blocksize, nested_dtype, nested_offset}
// with <name> the Hugging Face weight name. It is what the run holds, so a reader can check that
// training left the frozen base's bytes untouched. Under ZeRO-3 each block's unit is gathered
// (engine.materialize) while its bases are read, then released. Collective over the world;
// rank 0 writes.
#include <string>

namespace shardplan::executor {

class Transformer;
class ProcessGroups;
class ZeroEngine;

void export_nf4_base(const Transformer& model, ZeroEngine& engine, const ProcessGroups& groups,
                     const std::string& path);

}  // namespace shardplan::executor
