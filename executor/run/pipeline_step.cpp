#include "pipeline_step.hpp"

#include <chrono>
#include <cmath>
#include <map>
#include <memory>
#include <stdexcept>

#include "device.hpp"
#include "executor/errors.hpp"
#include "executor/model/autocast.hpp"
#include "executor/parallel/weight_grad_store.hpp"
#include "executor/seed_hash.hpp"
#include "trainer_state.hpp"

namespace shardplan::executor {

namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

uint64_t mix(uint64_t a, uint64_t b) { return splitmix64_finalize(a * kGoldenGamma + b + 0x632BE59BD9B4E019ULL); }

// A micro-batch's state on one chunk between its forward and its backward.
struct InFlight {
  torch::Tensor input;   // received activation (leaf requiring grad); undefined on the first chunk
  torch::Tensor output;  // activation sent on, or the loss (last chunk)
  int64_t bytes = 0;     // tensor bytes its forward left allocated
};

class StageRunner {
 public:
  StageRunner(TrainerState& s, int64_t step, const std::vector<Batch>& batches, double global_tokens,
              const StepFaults& faults)
      : s_(s),
        step_(step),
        batches_(batches),
        global_tokens_(global_tokens),
        faults_(faults),
        cfg_(s.plan.config),
        p_(cfg_.pp),
        m_(static_cast<int>(batches.size())),
        v_shape_(simulator::v_shaped(cfg_.schedule)),
        split_(simulator::splits_backward(cfg_.schedule)) {
    const int64_t chunks = static_cast<int64_t>(p_) * s.model->chunks().size();
    EXECUTOR_CHECK(2 * chunks * m_ < 32767, "pipeline message tags exceed MPI's guaranteed tag range");
  }

  PipelineStepResult run() {
    const auto& ops = s_.pipeline_ops;
    WeightGradStore& store = WeightGradStore::instance();
    store.clear();
    const auto t0 = Clock::now();
    for (size_t i = 0; i < ops.size(); ++i) {
      if (faults_.throw_at_op == static_cast<int>(i))
        throw std::runtime_error("injected fault: stage " + std::to_string(s_.groups->coords().pp) + " failed at op " +
                                 std::to_string(i) + " of step " + std::to_string(step_ + 1));
      const auto& op = ops[i];
      EXECUTOR_CHECK(!op.full && op.overlap_chunk < 0, "a DualPipe op (trainer.cpp refuses the schedule)");
      const auto start = Clock::now();
      const double waited = result_.figures.bubble_s + send_s_;
      double* phase = &result_.figures.forward_s;
      if (op.weight) {
        weight(op.chunk, op.mb);
        phase = &result_.figures.weight_grad_s;
      } else if (op.backward) {
        backward(op.chunk, op.mb);
        phase = &result_.figures.input_grad_s;
      } else {
        forward(op.chunk, op.mb);
      }
      *phase += std::max(0.0, since(start) - (result_.figures.bubble_s + send_s_ - waited));
      // A completed send's buffer is free again, as in the frameworks (their isend handles).
      std::erase_if(sends_, [](const std::unique_ptr<Work>& w) { return w->completed(); });
    }
    EXECUTOR_CHECK(store.pending() == 0, "weight gradients left queued after the schedule's last W");
    const auto drain = Clock::now();
    for (auto& w : sends_) w->wait();
    sends_.clear();
    send_s_ += since(drain);
    result_.figures.p2p_s = send_s_;
    result_.figures.busy_s = std::max(0.0, since(t0) - send_s_ - result_.figures.bubble_s);
    return result_;
  }

 private:
  // Tag of a message into virtual stage `vs` (activation) or out of it backwards (gradient).
  int tag(bool backward, int vs, int mb) const {
    const int chunks = p_ * static_cast<int>(s_.model->chunks().size());
    return ((backward ? 1 : 0) * chunks + vs) * m_ + mb;
  }
  // The time blocked on a receive is the stage's bubble.
  torch::Tensor receive(PipeKind kind, int tag_value, bool reverse) {
    const Batch& b = batches_.front();
    torch::Tensor t = torch::empty(s_.model->activation_shape(b.ids.size(0), b.ids.size(1)),
                                   torch::TensorOptions().dtype(activation_dtype()).device(s_.device));
    const auto start = Clock::now();
    const PipeEnd from = s_.groups->pipe(kind, false, reverse);
    from.comm->recv_async(t, from.peer, tag_value)->wait();
    result_.figures.bubble_s += since(start);
    return t;
  }

  void send(const torch::Tensor& t, PipeKind kind, int tag_value, bool reverse) {
    // Never waited on before the step's end: a blocking send could wait on a peer that waits on us.
    const auto start = Clock::now();
    const PipeEnd to = s_.groups->pipe(kind, true, reverse);
    sends_.push_back(to.comm->send_async(t.detach().contiguous(), to.peer, tag_value));
    send_s_ += since(start);
  }

  // bf16 (CPU and CUDA) and fp16 (CUDA) run under autocast; the residual stream, and so the
  // activations passed between stages (and their gradients), are in that dtype.
  bool autocast() const { return s_.precision != simulator::Precision::fp32; }
  at::ScalarType activation_dtype() const {
    if (!autocast()) return at::kFloat;
    return s_.precision == simulator::Precision::fp16 ? at::kHalf : at::kBFloat16;
  }
  void set_autocast(bool on) const {
    AutocastState{s_.device.type(), on, autocast() ? activation_dtype() : at::kBFloat16}.apply();
  }

  // A V's second chunk travels back down the stages (zbv); at the turn, on the last stage, chunk 0
  // hands its activation to chunk 1 (and chunk 1 its input gradient back) without a message.
  bool travels_back(int chunk_index) const { return v_shape_ && chunk_index == 1; }
  // Whether chunk `chunk_index`'s incoming (or outgoing) message of `kind` crosses the turn: an
  // activation comes into chunk 1 and leaves chunk 0 there, a gradient the other way.
  bool at_turn(PipeKind kind, int chunk_index, bool incoming) const {
    if (!v_shape_ || s_.groups->coords().pp != p_ - 1) return false;
    return ((kind == PipeKind::activation) == incoming) == (chunk_index == 1);
  }
  torch::Tensor take(PipeKind kind, int chunk_index, int tag_value) {
    if (!at_turn(kind, chunk_index, true)) return receive(kind, tag_value, travels_back(chunk_index));
    auto it = local_.find(tag_value);
    EXECUTOR_CHECK(it != local_.end(), "a V's turn: chunk message taken before it was handed over");
    torch::Tensor t = std::move(it->second);
    local_.erase(it);
    return t;
  }
  void hand(const torch::Tensor& t, PipeKind kind, int chunk_index, int tag_value) {
    if (at_turn(kind, chunk_index, false)) local_[tag_value] = t.detach();
    else send(t, kind, tag_value, travels_back(chunk_index));
  }

  void forward(int chunk_index, int mb) {
    const ModelChunk& chunk = s_.model->chunks()[static_cast<size_t>(chunk_index)];
    const Batch& b = batches_[static_cast<size_t>(mb)];
    const int64_t before = current_device_bytes(s_.device);
    InFlight f;
    torch::Tensor input = b.ids;
    if (!chunk.first) {
      f.input = take(PipeKind::activation, chunk_index, tag(false, chunk.virtual_stage, mb)).requires_grad_(true);
      input = f.input;
    }
    const auto& c = s_.groups->coords();
    DropoutRng rng;
    rng.key = mix(mix(s_.opt.seed, static_cast<uint64_t>(step_)), static_cast<uint64_t>(mb) * 4096 + c.dp);
    if (c.cp > 0) rng.key = mix(rng.key, static_cast<uint64_t>(c.cp));  // each part of the sequence its own masks
    rng.tp_salt = static_cast<uint64_t>(c.tp);
    rng.device = s_.device;
    TpContext ctx{&s_.groups->tp(), cfg_.sequence_parallel && cfg_.tp > 1, true, &rng};
    set_autocast(autocast());
    ChunkOutput out = s_.model->forward_chunk(chunk_index, input, b.labels, ctx, s_.engine.get());
    set_autocast(false);
    if (chunk.last) {
      result_.loss_sum += out.loss_sum.item<double>();
      f.output = out.loss_sum;
    } else {
      EXECUTOR_CHECK(out.activation.scalar_type() == activation_dtype(), "pipeline activation has an unexpected dtype");
      hand(out.activation, PipeKind::activation, chunk_index, tag(false, chunk.virtual_stage + 1, mb));
      f.output = out.activation;
    }
    f.bytes = current_device_bytes(s_.device) - before;
    held_bytes_ += f.bytes;
    in_flight_[{chunk_index, mb}] = std::move(f);
    result_.figures.peak_in_flight_bytes = std::max(result_.figures.peak_in_flight_bytes, held_bytes_);
    result_.figures.max_in_flight = std::max(result_.figures.max_in_flight, static_cast<int>(in_flight_.size()));
  }

  // The backward (B alone under a split schedule: the linears' weight gradients are queued for W).
  void backward(int chunk_index, int mb) {
    const ModelChunk& chunk = s_.model->chunks()[static_cast<size_t>(chunk_index)];
    auto it = in_flight_.find({chunk_index, mb});
    EXECUTOR_CHECK(it != in_flight_.end(), "pipeline backward before its forward");
    InFlight& f = it->second;
    // Split: the gradients are complete only after the chunk's last W, which reduces them.
    s_.engine->begin_backward(chunk.unit_begin, chunk.unit_end, !split_ && mb == m_ - 1);
    const int64_t before = current_device_bytes(s_.device);
    WeightGradStore& store = WeightGradStore::instance();
    if (split_) store.open(chunk_index, mb);
    if (chunk.last) {
      double multiplier = s_.scaler.loss_multiplier() / global_tokens_;
      if (faults_.overflow) multiplier = INFINITY;
      (f.output * multiplier).backward();
    } else {
      torch::Tensor grad = take(PipeKind::gradient, chunk_index, tag(true, chunk.virtual_stage, mb));
      if (faults_.overflow) grad.fill_(INFINITY);
      torch::autograd::backward({f.output}, {grad});
    }
    if (split_) store.close();
    s_.engine->end_backward(chunk.unit_begin, chunk.unit_end);
    if (!chunk.first) hand(f.input.grad(), PipeKind::gradient, chunk_index, tag(true, chunk.virtual_stage - 1, mb));
    if (split_) {  // until its W, the micro-batch keeps the weight GEMMs' operands (x and gy)
      f.output = torch::Tensor();
      f.input = torch::Tensor();
      const int64_t kept = std::max<int64_t>(0, f.bytes + (current_device_bytes(s_.device) - before));
      held_bytes_ -= f.bytes - kept;
      f.bytes = kept;
      return;
    }
    held_bytes_ -= f.bytes;
    in_flight_.erase(it);
  }

  // W: the queued weight gradients of (chunk, micro-batch); after the chunk's last, its units'
  // gradients are complete and reduced (ZeRO 0/1 all-reduce them once per step).
  void weight(int chunk_index, int mb) {
    const ModelChunk& chunk = s_.model->chunks()[static_cast<size_t>(chunk_index)];
    auto it = in_flight_.find({chunk_index, mb});
    EXECUTOR_CHECK(it != in_flight_.end(), "pipeline W before its B");
    const bool last = ++weights_done_[chunk_index] == m_;
    if (last) s_.engine->begin_backward(chunk.unit_begin, chunk.unit_end, true);
    WeightGradStore::instance().run(chunk_index, mb);
    if (last) s_.engine->end_backward(chunk.unit_begin, chunk.unit_end);
    held_bytes_ -= it->second.bytes;
    in_flight_.erase(it);
  }

  TrainerState& s_;
  int64_t step_;
  const std::vector<Batch>& batches_;
  double global_tokens_;
  StepFaults faults_;
  const simulator::ParallelConfig& cfg_;
  int p_, m_;
  bool v_shape_, split_;
  std::map<int, torch::Tensor> local_;  // a V's turn: messages between the last stage's two chunks
  std::map<int, int> weights_done_;     // W ops run per chunk this step
  double send_s_ = 0;                   // in send calls and the final waits on them
  std::map<std::pair<int, int>, InFlight> in_flight_;
  std::vector<std::unique_ptr<Work>> sends_;
  int64_t held_bytes_ = 0;
  PipelineStepResult result_;
};

}  // namespace

PipelineStepResult run_pipeline_step(TrainerState& s, int64_t step, const std::vector<Batch>& batches,
                                     double global_tokens, const StepFaults& faults) {
  return StageRunner(s, step, batches, global_tokens, faults).run();
}

}  // namespace shardplan::executor
