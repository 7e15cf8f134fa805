#include "tensor_io.hpp"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "executor/comm/process_groups.hpp"
#include "executor/engine/zero_engine.hpp"
#include "executor/errors.hpp"
#include "executor/io/fs_util.hpp"
#include "executor/model/transformer.hpp"

namespace shardplan::executor {

namespace {

namespace fs = std::filesystem;

torch::ScalarType torch_dtype(io::DType d, const std::string& context) {
  switch (d) {
    case io::DType::F32:
      return torch::kFloat;
    case io::DType::F16:
      return torch::kHalf;
    case io::DType::BF16:
      return torch::kBFloat16;
    case io::DType::F64:
      return torch::kDouble;
    case io::DType::I64:
      return torch::kLong;
    case io::DType::I32:
      return torch::kInt;
    case io::DType::I8:
      return torch::kChar;
    case io::DType::U8:
      return torch::kByte;
    case io::DType::BOOL:
      return torch::kBool;
  }
  throw InputError(context + ": unsupported dtype");
}

io::DType file_dtype(torch::ScalarType t) {
  switch (t) {
    case torch::kFloat:
      return io::DType::F32;
    case torch::kHalf:
      return io::DType::F16;
    case torch::kBFloat16:
      return io::DType::BF16;
    case torch::kDouble:
      return io::DType::F64;
    case torch::kLong:
      return io::DType::I64;
    case torch::kInt:
      return io::DType::I32;
    default:
      break;
  }
  EXECUTOR_CHECK(false, std::string("no safetensors dtype for ") + c10::toString(t));
}

// Which file of a (possibly sharded) Hugging Face checkpoint holds each tensor.
struct HfCheckpoint {
  std::map<std::string, std::unique_ptr<io::SafetensorsReader>> files;
  std::map<std::string, io::SafetensorsReader*> by_name;

  explicit HfCheckpoint(const std::string& path) {
    std::vector<std::string> paths;
    if (fs::is_directory(path)) {
      const fs::path index = fs::path(path) / "model.safetensors.index.json";
      if (fs::exists(index)) {
        std::ifstream in(index);
        nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
        if (j.is_discarded() || !j.contains("weight_map") || !j["weight_map"].is_object())
          throw InputError(index.string() + ": field 'weight_map': expected an object of tensor -> file");
        std::set<std::string> unique;
        for (auto& [name, file] : j["weight_map"].items()) unique.insert(file.get<std::string>());
        for (const auto& f : unique) paths.push_back((fs::path(path) / f).string());
      } else {
        paths.push_back((fs::path(path) / "model.safetensors").string());
      }
    } else {
      paths.push_back(path);
    }
    for (const auto& p : paths) {
      if (!fs::exists(p)) throw InputError(p + ": no such file (expected Hugging Face safetensors weights)");
      auto reader = std::make_unique<io::SafetensorsReader>(p);
      for (const auto& t : reader->tensors()) by_name[t.name] = reader.get();
      files[p] = std::move(reader);
    }
  }
  // GPT-2 checkpoints name tensors with or without the "transformer." prefix.
  std::pair<io::SafetensorsReader*, std::string> find(const std::string& name) const {
    if (auto it = by_name.find(name); it != by_name.end()) return {it->second, name};
    const std::string prefix = "transformer.";
    if (name.rfind(prefix, 0) == 0) {
      const std::string bare = name.substr(prefix.size());
      if (auto it = by_name.find(bare); it != by_name.end()) return {it->second, bare};
    }
    return {nullptr, name};
  }
};

std::string shape_text(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

// The full tensor of parameter p, gathered over tp (ZeRO-3 units must be resident).
torch::Tensor gather_full(const Parameter& p, Communicator& tp) {
  torch::Tensor local = p.tensor.detach().contiguous();
  if (p.shard.replicated() || tp.size() == 1) return merge_shards({local}, p.shard, p.full_shape);
  torch::Tensor all = torch::empty({tp.size() * local.numel()}, local.options());
  tp.all_gather(all, local.view({-1}));
  std::vector<torch::Tensor> shards;
  for (int r = 0; r < tp.size(); ++r)
    shards.push_back(all.narrow(0, r * local.numel(), local.numel()).view(local.sizes()));
  return merge_shards(shards, p.shard, p.full_shape);
}

// Pipeline stage leads (tp 0, dp 0; the pp group of world rank 0) send their full tensors to
// stage 0's lead: a header (name length, rank, dims), the name, then the fp32 data.
void send_named(Communicator& pp, const std::string& name, const torch::Tensor& t) {
  EXECUTOR_CHECK(t.dim() <= 8, "tensor " + name + " has more than 8 dims");
  torch::Tensor header = torch::zeros({10}, torch::kLong);
  header[0] = static_cast<int64_t>(name.size());
  header[1] = t.dim();
  for (int64_t d = 0; d < t.dim(); ++d) header[2 + d] = t.size(d);
  pp.send(header.to(pp.device()), 0);
  torch::Tensor bytes =
      torch::from_blob(const_cast<char*>(name.data()), {static_cast<int64_t>(name.size())}, torch::kUInt8).clone();
  pp.send(bytes.to(pp.device()), 0);
  pp.send(t.to(pp.device(), torch::kFloat).contiguous(), 0);
}

std::pair<std::string, torch::Tensor> recv_named(Communicator& pp, int from) {
  const auto on = [&](torch::ScalarType dt) { return torch::TensorOptions().dtype(dt).device(pp.device()); };
  torch::Tensor header = torch::zeros({10}, on(torch::kLong));
  pp.recv(header, from);
  header = header.cpu();
  torch::Tensor bytes = torch::empty({header[0].item<int64_t>()}, on(torch::kUInt8));
  pp.recv(bytes, from);
  bytes = bytes.cpu();
  std::vector<int64_t> shape;
  for (int64_t d = 0; d < header[1].item<int64_t>(); ++d) shape.push_back(header[2 + d].item<int64_t>());
  torch::Tensor t = torch::empty(shape, on(torch::kFloat));
  pp.recv(t, from);
  return {std::string(reinterpret_cast<const char*>(bytes.data_ptr<uint8_t>()), static_cast<size_t>(bytes.numel())), t};
}

void write_gathered(Transformer& model, ZeroEngine& engine, const ProcessGroups& groups, const std::string& path,
                    bool lora, const std::map<std::string, std::string>& metadata) {
  const auto& c = groups.coords();
  const bool stage_lead = c.tp == 0 && c.dp == 0 && c.cp == 0;
  // Expert parallelism: the stage lead is rank 0 of its expert group, whose other ranks (tp 0,
  // expert-data 0) send it the experts they hold.
  // With whole experts (etp = 1) the expert group spans tp ranks: each sends its own.
  const bool expert_lead = (c.tp == 0 || groups.expert_tp() == 1) && c.edp == 0 && groups.expert().size() > 1;
  std::vector<std::pair<std::string, torch::Tensor>> mine;
  for (int u = 0; u < model.num_units(); ++u) {
    engine.materialize(u);
    for (const Parameter& p : model.parameters()) {
      if (p.unit != u || p.lora != lora || p.tied_copy) continue;
      torch::Tensor full = gather_full(p, groups.tp());
      if (p.hf_transposed && !lora) full = full.t().contiguous();
      if (stage_lead || (expert_lead && model.is_expert_unit(u))) mine.emplace_back(p.name, full);
    }
    engine.release(u);
  }
  if (expert_lead) {
    Communicator& ep = groups.expert();
    if (c.ep == 0) {
      for (int from = 1; from < ep.size(); ++from) {
        torch::Tensor count = torch::zeros({1}, torch::TensorOptions().dtype(torch::kLong).device(ep.device()));
        ep.recv(count, from);
        for (int64_t i = 0; i < count.item<int64_t>(); ++i) mine.push_back(recv_named(ep, from));
      }
    } else {
      torch::Tensor count = torch::tensor({static_cast<int64_t>(mine.size())}, torch::kLong).to(ep.device());
      ep.send(count, 0);
      for (const auto& [name, t] : mine) send_named(ep, name, t);
      mine.clear();
    }
  }
  Communicator& pp = groups.pp();
  if (stage_lead && pp.size() > 1) {
    if (c.pp == 0) {
      for (int from = 1; from < pp.size(); ++from) {
        torch::Tensor count = torch::zeros({1}, torch::TensorOptions().dtype(torch::kLong).device(pp.device()));
        pp.recv(count, from);
        for (int64_t i = 0; i < count.item<int64_t>(); ++i) mine.push_back(recv_named(pp, from));
      }
    } else {
      torch::Tensor count = torch::tensor({static_cast<int64_t>(mine.size())}, torch::kLong).to(pp.device());
      pp.send(count, 0);
      for (const auto& [name, t] : mine) send_named(pp, name, t);
    }
  }
  if (c.world == 0) {
    io::SafetensorsWriter writer;
    for (const auto& [name, t] : mine) add_tensor(writer, name, t);
    writer.set_metadata(metadata);
    writer.write(path);
  }
  groups.world().barrier();
}

}  // namespace

torch::Tensor read_tensor(const io::SafetensorsReader& reader, const std::string& name) {
  const io::TensorInfo& info = reader.at(name);
  const auto dtype = torch_dtype(info.dtype, reader.path() + ": tensor '" + name + "'");
  torch::Tensor t = torch::empty(info.shape, torch::TensorOptions().dtype(dtype));
  reader.read(name, t.data_ptr(), t.nbytes());
  if (t.is_floating_point()) return t.to(torch::kFloat);
  return t.to(torch::kLong);
}

void add_tensor(io::SafetensorsWriter& writer, const std::string& name, const torch::Tensor& t) {
  const torch::Tensor c = t.detach().contiguous().cpu();
  writer.add(name, file_dtype(c.scalar_type()), c.sizes().vec(), c.data_ptr(), c.nbytes());
}

void load_hf_weights(Transformer& model, const std::string& path) {
  const HfCheckpoint ckpt(path);
  torch::NoGradGuard no_grad;
  const auto& opt = model.options();
  for (Parameter& p : model.parameters()) {
    if (p.lora) continue;
    auto [reader, name] = ckpt.find(p.name);
    if (!reader)
      throw InputError(path + ": tensor '" + p.name + "': not in the checkpoint (model '" + model.spec().name +
                       "' needs it)");
    std::vector<int64_t> want = p.full_shape;
    if (p.hf_transposed) std::swap(want[0], want[1]);
    const auto& info = reader->at(name);
    if (info.shape != want)
      throw InputError(reader->path() + ": tensor '" + name + "': expected shape " + shape_text(want) + ", found " +
                       shape_text(info.shape));
    torch::Tensor full = read_tensor(*reader, name);
    if (p.hf_transposed) full = full.t().contiguous();
    p.tensor.copy_(take_shard(full, p.shard, opt.tp_rank, opt.tp));
  }
}

void export_full_weights(Transformer& model, ZeroEngine& engine, const ProcessGroups& groups, const std::string& path) {
  write_gathered(model, engine, groups, path, false, {{"format", "pt"}, {"producer", "shardrun"}});
}

void export_lora_adapter(Transformer& model, ZeroEngine& engine, const ProcessGroups& groups, const std::string& dir) {
  const auto& lora = model.options().lora;
  EXECUTOR_CHECK(lora.enabled(), "export_lora_adapter on a model without LoRA");
  if (groups.coords().world == 0) io::make_dirs(dir);
  write_gathered(model, engine, groups, (fs::path(dir) / "adapter_model.safetensors").string(), true,
                 {{"format", "pt"}, {"producer", "shardrun"}});
  if (groups.coords().world != 0) return;
  const nlohmann::json config = {
      {"peft_type", "LORA"},
      {"task_type", "CAUSAL_LM"},
      {"base_model_name_or_path", model.spec().name},
      {"r", lora.rank},
      {"lora_alpha", lora.alpha},
      {"lora_dropout", lora.dropout},
      {"target_modules", lora.targets},
      {"bias", "none"},
      {"fan_in_fan_out", model.spec().family == "gpt2"},  // GPT-2 base layers are Conv1D
      {"inference_mode", true},
  };
  io::atomic_write_file((fs::path(dir) / "adapter_config.json").string(), config.dump(2) + "\n");
}

}  // namespace shardplan::executor
