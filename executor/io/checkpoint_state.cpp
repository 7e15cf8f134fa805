#include "executor/io/checkpoint_state.hpp"

#include <cmath>

#include "executor/errors.hpp"

namespace shardplan::executor::io {

namespace {

using nlohmann::json;

[[noreturn]] void bad(const std::string& dir, const std::string& field, const std::string& expected, const json* got) {
  throw InputError(dir + ": field 'state." + field + "': expected " + expected + ", got " +
                   (got ? got->dump(-1, ' ', false, json::error_handler_t::replace) : std::string("nothing")));
}

int64_t count(const json& st, const char* key, const std::string& dir) {
  const auto it = st.find(key);
  if (it == st.end()) bad(dir, key, "an integer >= 0", nullptr);
  const bool ok = it->is_number_unsigned() ? it->get<uint64_t>() <= static_cast<uint64_t>(INT64_MAX)
                                           : it->is_number_integer() && it->get<int64_t>() >= 0;
  if (!ok) bad(dir, key, "an integer >= 0", &*it);
  return it->get<int64_t>();
}

}  // namespace

json to_json(const CheckpointState& s) {
  return {{"step", s.step},
          {"adam_step", s.adam_step},
          {"loss_scale", s.loss_scale},
          {"good_steps", s.good_steps},
          {"layout", s.layout}};
}

CheckpointState parse_checkpoint_state(const json& manifest, const std::string& dir, const json& expected_layout) {
  const auto it = manifest.is_object() ? manifest.find("state") : manifest.end();
  if (!manifest.is_object() || it == manifest.end() || !it->is_object()) {
    throw InputError(dir +
                     ": field 'state': expected an object with step, adam_step, loss_scale, good_steps and "
                     "layout (manifest.json written by shardrun)");
  }
  const json& st = *it;
  CheckpointState out;
  out.step = count(st, "step", dir);
  out.adam_step = count(st, "adam_step", dir);
  out.good_steps = count(st, "good_steps", dir);
  const auto scale = st.find("loss_scale");
  if (scale == st.end() || !scale->is_number() || !std::isfinite(scale->get<double>()) || scale->get<double>() < 0)
    bad(dir, "loss_scale", "a finite number >= 0", scale == st.end() ? nullptr : &*scale);
  out.loss_scale = scale->get<double>();
  const auto layout = st.find("layout");
  if (layout == st.end()) bad(dir, "layout", "the job's layout", nullptr);
  if (*layout != expected_layout) {
    throw InputError(dir + ": field 'state.layout': the checkpoint was written for " +
                     layout->dump(-1, ' ', false, json::error_handler_t::replace) + ", this run is " +
                     expected_layout.dump() + " (resharding a checkpoint is not supported)");
  }
  out.layout = *layout;
  return out;
}

}  // namespace shardplan::executor::io
