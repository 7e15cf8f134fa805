#pragma once
// LibTorch tensors <-> safetensors (executor/io), and the model's weights in Hugging Face
// form: load a GPT-2 / Llama checkpoint into this rank's shards, export the full weights or
// the LoRA adapter (PEFT naming: adapter_model.safetensors + adapter_config.json).
#include <torch/torch.h>

#include <string>

#include "executor/io/safetensors.hpp"

namespace shardplan::executor {

class Transformer;
class ZeroEngine;
class ProcessGroups;

// A tensor of the file as a CPU fp32 (float types) or int64 (integer types) tensor.
torch::Tensor read_tensor(const io::SafetensorsReader& reader, const std::string& name);
// Adds `t` (contiguous CPU; float32/bf16/f16/int64) to the writer, copying its bytes.
void add_tensor(io::SafetensorsWriter& writer, const std::string& name, const torch::Tensor& t);

// Loads Hugging Face weights (a .safetensors file, or a directory with model.safetensors or
// model.safetensors.index.json) into the model's shards, before the ZeRO engine is built.
// Every parameter must be present with the card's shape (InputError names file, tensor,
// expected and found shapes). LoRA adapters are not in base checkpoints and keep their init.
void load_hf_weights(Transformer& model, const std::string& path);

// Collective over the world: gathers every parameter (ZeRO-3 units and tp shards) and rank 0
// writes them in Hugging Face naming and layout. `lora_only` writes the PEFT adapter instead
// (path is a directory then).
void export_full_weights(Transformer& model, ZeroEngine& engine, const ProcessGroups& groups, const std::string& path);
void export_lora_adapter(Transformer& model, ZeroEngine& engine, const ProcessGroups& groups, const std::string& dir);

}  // namespace shardplan::executor
