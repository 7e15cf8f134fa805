#pragma once
// The builders registry.cpp lists, one file each. `version` is one of the entry's versions.
#include <string_view>

#include "framework_model.hpp"

namespace shardplan::frameworks {

FrameworkModel megatron_model(std::string_view version);
FrameworkModel nemo_model(std::string_view version);
FrameworkModel deepspeed_model(std::string_view version);
FrameworkModel megatron_deepspeed_model(std::string_view version);
FrameworkModel torchtitan_model(std::string_view version);
FrameworkModel accelerate_fsdp_model(std::string_view version);
FrameworkModel llm_foundry_model(std::string_view version);
FrameworkModel fms_fsdp_model(std::string_view version);
FrameworkModel hf_peft_model(std::string_view version);
FrameworkModel neuronx_distributed_model(std::string_view version);
FrameworkModel optimum_habana_model(std::string_view version);
FrameworkModel smp_v2_model(std::string_view version);
FrameworkModel shardrun_model(std::string_view version);

// Knob lists several frameworks share.
namespace knobs {
using sim::AttentionKind;
using sim::PipelineSchedule;
using sim::Precision;
using sim::Recompute;
inline const std::vector<Precision> k16bit{Precision::bf16, Precision::fp16};
inline const std::vector<Precision> kAllPrecisions{Precision::bf16, Precision::fp16, Precision::fp32};
inline const std::vector<sim::DeviceRuntime> kCuda{sim::DeviceRuntime::cuda};
// PyTorch's CUDA caching allocator, reserved over allocated at the peak: GMLake (Guo et al.,
// ASPLOS'24; A100-80GB, 8 LLMs with recompute, offload, ZeRO and LoRA) measures 15 % fragmentation
// on average (up to 33 %), read as the reserved share not allocated: 0.15 / 0.85.
inline constexpr double kCachingAllocatorSlack = 0.15 / 0.85;
}  // namespace knobs

}  // namespace shardplan::frameworks
