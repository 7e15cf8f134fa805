#include "nf4_export.hpp"

#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>

#include "executor/comm/process_groups.hpp"
#include "executor/engine/zero_engine.hpp"
#include "executor/errors.hpp"
#include "executor/io/safetensors.hpp"
#include "executor/model/nf4_base.hpp"
#include "executor/parallel/nf4_linear.hpp"

namespace shardplan::executor {

namespace {

struct Named {
  std::string name;
  torch::Tensor t;  // CPU, uint8 or fp32
};

// The full tensor's quantisation from the tp ranks' slices (each full block, code and group is
// held by at least one rank, and the ranks holding one agree: a max over -1 / -inf fills).
Nf4Tensor gather_full_state(const Nf4Weight& w, Communicator& tp, int tp_rank, int tp_size) {
  if (tp_size == 1) return w.q;
  const Nf4Tensor& q = w.q;
  EXECUTOR_CHECK(!q.runs.empty(), "a tp-sharded NF4 base without a run table");
  int64_t n = 1;
  for (int64_t d : w.full_shape) n *= d;
  const int64_t nb = (n + kNf4Block - 1) / kNf4Block, ng = (nb + kNf4ConstantBlock - 1) / kNf4ConstantBlock;
  const auto f32 = torch::TensorOptions().dtype(torch::kFloat).device(tp.device());
  const torch::Tensor index =
      take_shard(torch::arange(n, torch::kLong).view(w.full_shape), w.shard, tp_rank, tp_size).reshape({-1});
  torch::Tensor codes = torch::full({n}, -1.0, f32);
  codes.index_put_({index.to(tp.device())}, nf4_unpack(q.codes, q.numel()).to(f32));
  const torch::Tensor blocks = nf4_full_blocks(q, tp.device());
  torch::Tensor qabsmax = torch::full({nb}, -1.0, f32);
  qabsmax.index_put_({blocks.to(tp.device())}, q.qabsmax.to(f32));
  torch::Tensor absmax2 = torch::full({ng}, -std::numeric_limits<float>::infinity(), f32);
  absmax2.narrow(0, q.group_begin, q.absmax2.numel()).copy_(q.absmax2);
  for (torch::Tensor* t : {&codes, &qabsmax, &absmax2}) tp.all_reduce(*t, ReduceOp::max);
  Nf4Tensor full;
  full.shape = w.full_shape;
  full.codes = nf4_pack(codes.to(torch::kByte));
  full.qabsmax = qabsmax.to(torch::kByte);
  full.absmax2 = absmax2;
  full.offset = q.offset;
  return full;
}

std::vector<Named> bnb_entries(const Nf4Weight& w, const Nf4Tensor& full) {
  const nlohmann::json state = {{"quant_type", "nf4"},
                                {"blocksize", kNf4Block},
                                {"dtype", "float32"},
                                {"shape", w.full_shape},
                                {"nested_blocksize", kNf4ConstantBlock},
                                {"nested_dtype", "float32"},
                                {"nested_offset", full.offset}};
  const std::string json = state.dump();
  torch::Tensor js = torch::empty({static_cast<int64_t>(json.size())}, torch::kByte);
  std::memcpy(js.data_ptr(), json.data(), json.size());
  return {{w.name, full.codes.cpu().view({-1, 1})},      {w.name + ".absmax", full.qabsmax.cpu()},
          {w.name + ".quant_map", nf4_code()},           {w.name + ".nested_absmax", full.absmax2.cpu()},
          {w.name + ".nested_quant_map", dynamic_map()}, {w.name + ".quant_state.bitsandbytes__nf4", js}};
}

// Stage leads send their entries to stage 0's lead: a header (name length, dtype, rank, dims),
// the name, the bytes.
void send_entry(Communicator& pp, const Named& e) {
  const auto on = [&](torch::ScalarType dt) { return torch::TensorOptions().dtype(dt).device(pp.device()); };
  torch::Tensor header = torch::zeros({6}, torch::kLong);
  header[0] = static_cast<int64_t>(e.name.size());
  header[1] = e.t.scalar_type() == torch::kByte ? 0 : 1;
  header[2] = e.t.dim();
  for (int64_t d = 0; d < e.t.dim(); ++d) header[3 + d] = e.t.size(d);
  pp.send(header.to(pp.device()), 0);
  torch::Tensor name = torch::empty({static_cast<int64_t>(e.name.size())}, torch::kByte);
  std::memcpy(name.data_ptr(), e.name.data(), e.name.size());
  pp.send(name.to(on(torch::kByte)), 0);
  pp.send(e.t.contiguous().to(pp.device()), 0);
}

Named recv_entry(Communicator& pp, int from) {
  const auto on = [&](torch::ScalarType dt) { return torch::TensorOptions().dtype(dt).device(pp.device()); };
  torch::Tensor header = torch::zeros({6}, on(torch::kLong));
  pp.recv(header, from);
  header = header.cpu();
  torch::Tensor name = torch::empty({header[0].item<int64_t>()}, on(torch::kByte));
  pp.recv(name, from);
  name = name.cpu();
  std::vector<int64_t> shape;
  for (int64_t d = 0; d < header[2].item<int64_t>(); ++d) shape.push_back(header[3 + d].item<int64_t>());
  torch::Tensor t = torch::empty(shape, on(header[1].item<int64_t>() == 0 ? torch::kByte : torch::kFloat));
  pp.recv(t, from);
  return {std::string(reinterpret_cast<const char*>(name.data_ptr<uint8_t>()), static_cast<size_t>(name.numel())),
          t.cpu()};
}

}  // namespace

void export_nf4_base(const Transformer& model, ZeroEngine& engine, const ProcessGroups& groups,
                     const std::string& path) {
  torch::NoGradGuard no_grad;
  const auto& c = groups.coords();
  const auto& opt = model.options();
  const bool stage_lead = c.tp == 0 && c.dp == 0 && c.cp == 0;
  std::vector<Named> mine;
  for (const Block& b : model.blocks()) {
    engine.materialize(b.unit);  // ZeRO-3: all-gather the unit's sharded NF4 bytes (a no-op below)
    for (const ParallelLinear* l : block_linears(b)) {
      if (!l->nf4) continue;
      const Nf4Tensor full = gather_full_state(*l->nf4, groups.tp(), opt.tp_rank, opt.tp);
      if (stage_lead)
        for (Named& e : bnb_entries(*l->nf4, full)) mine.push_back(std::move(e));  // keep the bytes alive
    }
    engine.release(b.unit);
  }
  Communicator& pp = groups.pp();
  if (stage_lead && pp.size() > 1) {
    const auto i64 = torch::TensorOptions().dtype(torch::kLong).device(pp.device());
    if (c.pp == 0) {
      for (int from = 1; from < pp.size(); ++from) {
        torch::Tensor count = torch::zeros({1}, i64);
        pp.recv(count, from);
        for (int64_t i = 0, n = count.cpu().item<int64_t>(); i < n; ++i) mine.push_back(recv_entry(pp, from));
      }
    } else {
      pp.send(torch::tensor({static_cast<int64_t>(mine.size())}, torch::kLong).to(pp.device()), 0);
      for (const Named& e : mine) send_entry(pp, e);
    }
  }
  if (c.world == 0) {
    io::SafetensorsWriter writer;
    for (const Named& e : mine) {
      const torch::Tensor t = e.t.contiguous();
      writer.add(e.name, t.scalar_type() == torch::kByte ? io::DType::U8 : io::DType::F32, t.sizes().vec(),
                 t.data_ptr(), t.nbytes());
    }
    writer.set_metadata({{"format", "pt"},
                         {"producer", "shardrun"},
                         {"quantization", "bitsandbytes nf4, blocksize 64, double-quantised absmax (blocks of 256)"}});
    writer.write(path);
  }
  groups.world().barrier();
}

}  // namespace shardplan::executor
