#pragma once
// torchtitan (pytorch/torchtitan): a plan as its job config, and a job config read back.
// Written for and checked against torchtitan v0.2.2 (73a0e697, 2026-02-20), the last release with
// TOML job configs (torchtitan/config/job_config.py, run_train.sh; names and citations in
// torchtitan_flags.hpp). torchtitan HEAD (since 9810191b, 2026-02-23) reads no TOML: a run is
// `-m torchtitan.train --module <model> --config <recipe>` (a Python config registry) with
// `--section.key value` overrides, which torchtitan calls frozen; the notes say so.
#include <string>
#include <string_view>
#include <vector>

#include "config_import.hpp"
#include "formats/plan.hpp"

namespace shardplan::interop {

// The job config (TOML, built and printed with toml++), its notes as leading `# shardplan note:`
// comment lines. Sections: [job], [model] (name/flavor: the card's torchtitan flavor, else the
// nearest with a note), [training] (batch sizes, seq_len, steps, dtypes, CPU offload),
// [parallelism] (FSDP2/HSDP degrees and reshard policy from dp and the ZeRO group, tp, async TP,
// pp with schedule, micro-batch size and the layer split, cp, ep/etp), [activation_checkpoint],
// and [compile] / [quantize.linear.float8] when async TP or FP8 need them.
// InputError (naming what) when torchtitan cannot run the plan: a device other than a CUDA/ROCm
// GPU, an encoder, LoRA, fp16, activation offload, optimizer offload without FSDP, a sequence
// length not divisible by tp x 2 x cp, expert tensor parallelism other than 1 or tp, or ep x etp
// not dividing data_parallel_shard_degree x cp x tp.
std::string torchtitan_toml(const formats::Plan& plan);
// What the config approximates or cannot express, one line each; the first line always says which
// torchtitan version it is for and what replaced TOML after it. InputError as torchtitan_toml.
std::vector<std::string> torchtitan_notes(const formats::Plan& plan);
// The launch line, as torchtitan's run_train.sh (one node) or multinode_trainer.slurm (run on every
// node, rendezvous at $MASTER_ADDR:29500): `PYTORCH_ALLOC_CONF=expandable_segments:True torchrun
// --nnodes N --nproc_per_node D ... -m torchtitan.train --job.config_file <config_path>`, every word
// from the caller shell-quoted. InputError as torchtitan_toml.
std::string torchtitan_command_line(const formats::Plan& plan, const std::string& config_path);

// A torchtitan v0.2.2 job config (TOML text) into a configuration; `source` names it in errors
// (with the line). Absent keys take torchtitan's defaults; data_parallel_shard_degree -1 is the
// rest of the devices; dp = replicate x shard, checked against devices / (tp x pp x cp). FSDP
// reads back as ZeRO-3 (reshard after forward) or ZeRO-2, HSDP's shard degree as the sharding
// degree. Unknown keys of the sections read, and unknown sections, are warnings; the rest of
// torchtitan's settings (optimizer, checkpoint, metrics, ...) are accepted silently.
ImportResult import_torchtitan(std::string_view toml, const ImportContext& ctx, const std::string& source);

}  // namespace shardplan::interop
