// ParallelConfig from an Optimum-Habana command: `[ENV=...] python3 ../gaudi_spawn.py [--world_size N |
// --hostfile H] [--use_deepspeed] run_lora_clm.py|run_clm.py <args>` (names and sources in
// habana_flags.hpp) and the DeepSpeed JSON its --deepspeed names. The command gives the batch,
// sequence, precision, recompute, attention, LoRA and context parallelism; the JSON the ZeRO stage,
// sharding and offload, read by import_deepspeed with the Hugging Face "auto" values filled from
// the command, as the Trainer's DeepSpeed integration fills them (a number there must agree with
// the command: the integration refuses a mismatch).
#include <algorithm>
#include <cctype>

#include "command_args.hpp"
#include "config_import_detail.hpp"
#include "habana.hpp"
#include "habana_flags.hpp"
#include "simulator/errors.hpp"

namespace shardplan::interop {

namespace sim = shardplan::simulator;
namespace hf = habana_flags;
using nlohmann::json;

namespace {

bool names(const std::string& word, std::string_view file) {
  const auto slash = word.rfind('/');
  return std::string_view(word).substr(slash == std::string::npos ? 0 : slash + 1) == file;
}

bool is_operator(const std::string& w) {
  return w == "|" || w == "|&" || w == "&&" || w == "||" || w == "&" || w.rfind(">", 0) == 0 || w.rfind("2>", 0) == 0 ||
         w.rfind("&>", 0) == 0 || w.rfind("<", 0) == 0;
}

struct Command {
  bool lora = true;
  std::vector<std::string> spawn;  // gaudi_spawn.py's own arguments (empty without it)
  bool has_spawn = false;
  std::vector<std::string> args;  // the training script's
  std::vector<std::string> lora_targets;
  bool has_targets = false;
};

bool is_script(const std::string& w) { return names(w, hf::kLoraScript) || names(w, hf::kClmScript); }

// --lora_target_modules takes several values (nargs), which CommandArgs does not: taken out first.
void take_targets(Command& cmd) {
  std::vector<std::string> rest;
  for (std::size_t i = 0; i < cmd.args.size(); ++i) {
    const std::string& w = cmd.args[i];
    if (w.rfind(std::string(hf::kLoraTargets) + "=", 0) == 0) {
      cmd.has_targets = true;
      cmd.lora_targets = {w.substr(hf::kLoraTargets.size() + 1)};
    } else if (w == hf::kLoraTargets) {
      cmd.has_targets = true;
      cmd.lora_targets.clear();
      while (i + 1 < cmd.args.size() && cmd.args[i + 1].rfind("--", 0) != 0) cmd.lora_targets.push_back(cmd.args[++i]);
    } else {
      rest.push_back(w);
    }
  }
  cmd.args = std::move(rest);
}

// What the training script receives from gaudi_spawn.py: its arguments joined into one string
// (one with a space and no surrounding double quotes wrapped in them, gaudi_spawn.py main()) and
// split again by the shell DistributedRunner.run starts.
std::vector<std::string> respawn(const std::vector<std::string>& args, const std::string& source) {
  std::string joined;
  for (const auto& a : args) {
    const bool wrap = a.find(' ') != std::string::npos && a.front() != '"' && a.back() != '"';
    joined += (joined.empty() ? "" : " ") + (wrap ? "\"" + a + "\"" : a);
  }
  return shell_words(joined, source + " (as gaudi_spawn.py passes it on)");
}

// The last line that runs run_lora_clm.py or run_clm.py; without one, the whole text as the
// script's arguments (LoRA when it has --lora_ flags or a --max_seq_length).
Command find_command(std::string_view text, const std::string& source) {
  std::vector<std::string> found, all;
  for (const auto& line : logical_lines(text)) {
    std::vector<std::string> words;
    try {
      words = shell_words(line, source);
    } catch (const sim::InputError&) {  // only the command itself must split
      if (line.find(hf::kLoraScript) != std::string::npos || line.find(hf::kClmScript) != std::string::npos) throw;
      continue;
    }
    all.insert(all.end(), words.begin(), words.end());
    if (std::any_of(words.begin(), words.end(), is_script)) found = words;
  }
  Command cmd;
  if (found.empty()) {
    const auto has = [&](std::string_view p) {
      return std::any_of(all.begin(), all.end(), [&](const std::string& w) { return w.rfind(p, 0) == 0; });
    };
    if (!has("--lora_") && !has(hf::kMaxSeqLenPrefix) && !has(hf::kBlockSize))
      throw sim::InputError(source + ": no " + std::string(hf::kLoraScript) + " or " + std::string(hf::kClmScript) +
                            " command (nor their flags) found");
    cmd.lora = !has(hf::kBlockSize);
    cmd.args = all;
  } else {
    // The simple command holding the script: from after the last shell operator before it to
    // the first one after it (`cd x && python3 ../gaudi_spawn.py ... run_lora_clm.py ... | tee log`).
    const auto first_script = std::find_if(found.begin(), found.end(), is_script);
    found.erase(std::find_if(first_script, found.end(), is_operator), found.end());
    found.erase(found.begin(),
                std::find_if(std::make_reverse_iterator(first_script), found.rend(), is_operator).base());
    const auto script = std::find_if(found.begin(), found.end(), is_script);
    cmd.lora = names(*script, hf::kLoraScript);
    const auto spawn =
        std::find_if(found.begin(), script, [](const std::string& w) { return names(w, hf::kSpawnScript); });
    cmd.has_spawn = spawn != script;
    if (cmd.has_spawn) cmd.spawn.assign(spawn + 1, script);
    cmd.args.assign(script + 1, found.end());
    if (cmd.has_spawn) cmd.args = respawn(cmd.args, source);
  }
  take_targets(cmd);
  return cmd;
}

// gaudi_spawn.py: --world_size is the cluster on one node; with --hostfile the file decides.
void check_spawn(const Command& cmd, const ImportContext& ctx, const std::string& source,
                 std::vector<std::string>& warnings) {
  if (!cmd.has_spawn) return;
  const CommandArgs s(cmd.spawn, source);
  const bool hostfile = s.has(hf::kHostfile);
  const auto world = s.integer(hf::kWorldSize, 1);
  if (world && !hostfile && *world != ctx.devices)
    throw sim::InputError(source + ": " + std::string(hf::kWorldSize) + ": expected the cluster's " +
                          std::to_string(ctx.devices) + " devices, got " + std::to_string(*world));
  if (!world && !hostfile && ctx.devices != 1)
    warnings.push_back(source + ": gaudi_spawn.py without " + std::string(hf::kWorldSize) + " or " +
                       std::string(hf::kHostfile) + " runs on one card; imported for the cluster's " +
                       std::to_string(ctx.devices) + " devices");
  (void)s.has(hf::kMasterPort);
  (void)s.has(hf::kUseMpi);
  (void)s.has(hf::kUseDeepspeed);
  for (const auto& f : s.unread_flags())
    warnings.push_back(source + ": gaudi_spawn.py " + f + " is not a setting shardplan models; ignored");
}

long long int_flag(const CommandArgs& a, std::string_view flag, long long min, long long fallback) {
  return a.integer(flag, min).value_or(fallback);
}

void read_lora(const Command& cmd, const CommandArgs& a, const std::string& source, sim::ParallelConfig& cfg,
               std::vector<std::string>& w) {
  if (!cmd.lora) return;
  if (const auto peft = a.value(hf::kPeftType); peft && *peft != hf::kPeftLora)
    throw sim::InputError(source + ": " + std::string(hf::kPeftType) +
                          ": expected lora (shardplan models LoRA), got '" + *peft + "'");
  cfg.lora.rank = static_cast<int>(int_flag(a, hf::kLoraRank, 1, hf::kDefaultLoraRank));
  cfg.lora.alpha = static_cast<double>(int_flag(a, hf::kLoraAlpha, 1, hf::kDefaultLoraAlpha));
  cfg.lora.dropout = a.number(hf::kLoraDropout).value_or(hf::kDefaultLoraDropout);
  if (cfg.lora.dropout < 0 || cfg.lora.dropout >= 1)
    throw sim::InputError(source + ": " + std::string(hf::kLoraDropout) + ": expected a probability in [0, 1)");
  if (cmd.has_targets && cmd.lora_targets.empty())
    throw sim::InputError(source + ": " + std::string(hf::kLoraTargets) + ": expected at least one module name");
  cfg.lora.targets = cmd.lora_targets;
  if (!cmd.has_targets) {
    cfg.lora.targets.assign(std::begin(hf::kPeftLlamaDefaultTargets), std::end(hf::kPeftLlamaDefaultTargets));
    w.push_back(source + ": " + std::string(hf::kLoraTargets) +
                " not given: PEFT's default for Llama (q_proj, "
                "v_proj) assumed");
  }
}

int read_seq_len(const Command& cmd, const CommandArgs& a, const ImportContext& ctx, const std::string& source,
                 std::vector<std::string>& w) {
  if (!cmd.lora) {
    if (const auto b = a.integer(hf::kBlockSize, 1)) return static_cast<int>(*b);
    w.push_back(source + ": " + std::string(hf::kBlockSize) +
                " not given: run_clm.py takes the tokenizer's length "
                "(at most 1024); the import's sequence length " +
                std::to_string(ctx.seq_len) + " used");
    return ctx.seq_len;
  }
  const auto full = a.integer(hf::kMaxSeqLength, 1);
  const auto prefix = a.integer(hf::kMaxSeqLenPrefix, 1);
  if (full && prefix && *full != *prefix)
    throw sim::InputError(source + ": " + std::string(hf::kMaxSeqLenPrefix) + ": the same option as " +
                          std::string(hf::kMaxSeqLength) + " (an argparse prefix), given " + std::to_string(*prefix) +
                          " and " + std::to_string(*full));
  if (full || prefix) return static_cast<int>(full ? *full : *prefix);
  w.push_back(source + ": " + std::string(hf::kMaxSeqLength) + " not given: run_lora_clm.py's default " +
              std::to_string(hf::kDefaultMaxSeqLength));
  return hf::kDefaultMaxSeqLength;
}

sim::AttentionKind read_attention(const CommandArgs& a, const std::string& source, std::vector<std::string>& w) {
  const std::string impl = a.value(hf::kAttnImplementation).value_or(std::string(hf::kAttnEager));
  if (impl == hf::kAttnFused) return sim::AttentionKind::flash;
  if (impl == hf::kAttnSdpa)
    w.push_back(source + ": " + std::string(hf::kAttnImplementation) +
                " sdpa: the Gaudi models run their fused "
                "kernel only with gaudi_fused_sdpa; modelled as eager");
  else if (impl != hf::kAttnEager)
    throw sim::InputError(source + ": " + std::string(hf::kAttnImplementation) +
                          ": expected eager, sdpa or gaudi_fused_sdpa, got '" + impl + "'");
  return sim::AttentionKind::eager;
}

void read_command(const Command& cmd, const CommandArgs& a, const ImportContext& ctx, const std::string& source,
                  ImportResult& r) {
  auto& cfg = r.config;
  if (a.boolean(hf::kFp16).value_or(false))
    throw sim::InputError(source + ": " + std::string(hf::kFp16) + ": optimum-habana refuses fp16 (use --bf16)");
  cfg.cp = static_cast<int>(int_flag(a, hf::kContextParallel, 1, 1));
  cfg.cp_kind = sim::CpKind::all_to_all;
  if (ctx.devices % cfg.cp != 0)
    throw sim::InputError(source + ": " + std::string(hf::kContextParallel) + ": expected a divisor of the cluster's " +
                          std::to_string(ctx.devices) + " devices, got " + std::to_string(cfg.cp));
  cfg.dp = ctx.devices / cfg.cp;
  if (!a.has(hf::kPerDeviceBatch))
    r.warnings.push_back(source + ": " + std::string(hf::kPerDeviceBatch) + " not given: the Trainer's default 8");
  cfg.micro_batch_size = static_cast<int>(int_flag(a, hf::kPerDeviceBatch, 1, hf::kDefaultPerDeviceBatch));
  if (ctx.micro_batch_size > 0 && ctx.micro_batch_size != cfg.micro_batch_size)
    throw sim::InputError(source + ": " + std::string(hf::kPerDeviceBatch) +
                          ": expected the micro-batch size given "
                          "to the import (" +
                          std::to_string(ctx.micro_batch_size) + "), got " + std::to_string(cfg.micro_batch_size));
  const long long accum = int_flag(a, hf::kGradAccum, 1, 1);
  cfg.global_batch_size = static_cast<int>(cfg.micro_batch_size * accum * cfg.dp);
  cfg.seq_len = read_seq_len(cmd, a, ctx, source, r.warnings);
  cfg.precision = a.boolean(hf::kBf16).value_or(false) ? sim::Precision::bf16 : sim::Precision::fp32;
  if (a.boolean(hf::kFp8).value_or(false)) cfg.fp8 = sim::Fp8Recipe::delayed;
  cfg.recompute = a.boolean(hf::kGradientCheckpointing).value_or(false) ? sim::Recompute::full : sim::Recompute::none;
  cfg.attention = read_attention(a, source, r.warnings);
  read_lora(cmd, a, source, cfg, r.warnings);
  for (const auto f : {hf::kFsdp, hf::kFsdpConfig})
    if (a.has(f))
      r.warnings.push_back(source + ": " + std::string(f) +
                           " (FSDP) is not read: import the sharding with a "
                           "DeepSpeed config or --zero");
}

// "auto" batch values filled from the command; a number must agree with it.
json fill_auto(json ds, const sim::ParallelConfig& cfg, long long accum, const std::string& ds_source) {
  const auto is_auto = [&](std::string_view key) {
    const auto it = ds.find(std::string(key));
    return it != ds.end() && it->is_string() && *it == hf::kDsAuto;
  };
  if (is_auto(hf::kDsGradAccum)) ds[std::string(hf::kDsGradAccum)] = accum;
  else if (const auto it = ds.find(std::string(hf::kDsGradAccum));
           it != ds.end() && it->is_number_integer() && *it != accum)
    throw sim::InputError(ds_source + ": field '" + std::string(hf::kDsGradAccum) + "': expected the command's " +
                          std::string(hf::kGradAccum) + " (" + std::to_string(accum) + "), got " + it->dump());
  if (is_auto(hf::kDsTrainBatch)) ds[std::string(hf::kDsTrainBatch)] = cfg.global_batch_size;
  if (is_auto(hf::kDsMicroBatch)) ds[std::string(hf::kDsMicroBatch)] = cfg.micro_batch_size;
  for (const auto key : {hf::kDsTimers, hf::kDsDataTypes}) ds.erase(std::string(key));  // read here, or silent
  return ds;
}

sim::GradAccumDtype read_grad_accum(const json& ds, const sim::ParallelConfig& cfg, const std::string& ds_source) {
  const auto dt = ds.find(std::string(hf::kDsDataTypes));
  if (dt == ds.end() || !dt->is_object() || !dt->contains(std::string(hf::kDsGradAccumDtype)))
    return sim::GradAccumDtype::param;
  const json& v = (*dt)[std::string(hf::kDsGradAccumDtype)];
  const std::string s = v.is_string() ? v.get<std::string>() : "";
  if (s == "fp32" || s == "float32" || s == "float" || s == "torch.float32")
    return cfg.precision == sim::Precision::bf16 && cfg.zero_stage == 1 && !cfg.offload_optimizer
               ? sim::GradAccumDtype::fp32
               : sim::GradAccumDtype::param;
  if (s == "bf16" || s == "bfloat16" || s == "fp16" || s == "float16" || s == "half" || v.is_null())
    return sim::GradAccumDtype::param;
  throw sim::InputError(ds_source + ": field 'data_types.grad_accum_dtype': expected fp32 or bf16, got " + v.dump());
}

void read_deepspeed(const json& ds, const CommandArgs& a, const std::string& source, ImportResult& r) {
  auto& cfg = r.config;
  const auto path = a.value(hf::kDeepspeed);
  if (!path && ds.is_null()) return;
  if (!path) {
    r.warnings.push_back(source + ": a DeepSpeed config was given but the command has no " +
                         std::string(hf::kDeepspeed) + ": ignored (the run is data parallel without ZeRO)");
    return;
  }
  if (ds.is_null())
    throw sim::InputError(source + ": " + std::string(hf::kDeepspeed) + " " + *path +
                          ": the DeepSpeed config it names was not given to the import");
  const std::string ds_source = *path;
  if (!ds.is_object()) throw sim::InputError(ds_source + ": expected a JSON object (a DeepSpeed config)");
  ImportContext dctx;
  dctx.devices = cfg.dp;  // DeepSpeed's data-parallel world: the Gaudi trainer divides by the Ulysses size
  dctx.seq_len = cfg.seq_len;
  dctx.micro_batch_size = cfg.micro_batch_size;
  dctx.precision = cfg.precision;
  const long long accum = cfg.global_batch_size / (static_cast<long long>(cfg.micro_batch_size) * cfg.dp);
  const ImportResult d = import_deepspeed(fill_auto(ds, cfg, accum, ds_source), dctx, ds_source);
  if (d.config.tp > 1 || d.config.pp > 1)
    throw sim::InputError(ds_source + ": tensor_parallel / pipeline: the Optimum-Habana examples run neither");
  const bool names_precision = ds.contains("bf16") || ds.contains("bfloat16") || ds.contains("fp16");
  if (names_precision && d.config.precision != cfg.precision)
    throw sim::InputError(ds_source + ": field 'bf16.enabled': expected " +
                          (cfg.precision == sim::Precision::bf16 ? "true (the command has --bf16 True)"
                                                                 : "false (the command has no --bf16 True)") +
                          "; the Trainer refuses the mismatch");
  cfg.zero_stage = d.config.zero_stage;
  cfg.sharding_degree = d.config.sharding_degree;
  cfg.offload_optimizer = d.config.offload_optimizer;
  cfg.grad_accum_dtype = read_grad_accum(ds, cfg, ds_source);
  if (ds.contains(std::string(hf::kDsActivationCheckpointing)))
    r.warnings.push_back(ds_source + ": '" + std::string(hf::kDsActivationCheckpointing) +
                         "' configures "
                         "deepspeed.checkpointing, which the Trainer does not call; recompute follows " +
                         std::string(hf::kGradientCheckpointing));
  r.warnings.insert(r.warnings.end(), d.warnings.begin(), d.warnings.end());
}

}  // namespace

ImportResult import_habana(std::string_view script, const nlohmann::json& ds_config, const ImportContext& ctx,
                           const std::string& source) {
  import_detail::check_context(ctx, source);
  if ((ctx.tp > 1) || (ctx.pp > 1))
    throw sim::InputError(source + ": the Optimum-Habana examples run no tensor or pipeline parallelism (tp " +
                          std::to_string(ctx.tp) + ", pp " + std::to_string(ctx.pp) + " given to the import)");
  const Command cmd = find_command(script, source);
  ImportResult r;
  r.config.tp = r.config.pp = 1;
  check_spawn(cmd, ctx, source, r.warnings);
  const CommandArgs a(cmd.args, source);
  read_command(cmd, a, ctx, source, r);
  read_deepspeed(ds_config, a, source, r);
  r.config.mixed_precision = sim::MixedPrecision::master_weights;
  for (const auto s : hf::kSilent) (void)a.has(s);
  for (const auto& f : a.unread_flags())
    r.warnings.push_back(source + ": " + f + " is not a setting shardplan models; ignored");
  return r;
}

}  // namespace shardplan::interop
