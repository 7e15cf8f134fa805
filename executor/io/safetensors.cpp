#include "executor/io/safetensors.hpp"

#include <algorithm>
#include <array>
#include <limits>
#include <nlohmann/json.hpp>
#include <numeric>
#include <set>
#include <utility>

#include "executor/errors.hpp"
#include "simulator/json_fields.hpp"

namespace shardplan::executor::io {
namespace {

using ordered_json = nlohmann::ordered_json;

constexpr uint64_t kMaxHeaderBytes = 100'000'000;  // the reference implementation's limit
constexpr const char* kMetadataKey = "__metadata__";

struct DTypeName {
  DType dtype;
  const char* name;
  size_t size;
};
constexpr std::array<DTypeName, 9> kDTypes{{{DType::F32, "F32", 4},
                                            {DType::F16, "F16", 2},
                                            {DType::BF16, "BF16", 2},
                                            {DType::F64, "F64", 8},
                                            {DType::I64, "I64", 8},
                                            {DType::I32, "I32", 4},
                                            {DType::I8, "I8", 1},
                                            {DType::U8, "U8", 1},
                                            {DType::BOOL, "BOOL", 1}}};

const DTypeName& entry_of(DType dtype) {
  for (const auto& e : kDTypes) {
    if (e.dtype == dtype) return e;
  }
  throw ExecutorError("unknown DType value " + std::to_string(static_cast<int>(dtype)), __FILE__, __LINE__);
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

// numel(shape) * element size, or false if it does not fit in 64 bits. Dims must be >= 0.
bool checked_bytes(const std::vector<int64_t>& shape, size_t element, uint64_t& out) {
  if (std::find(shape.begin(), shape.end(), 0) != shape.end()) {
    out = 0;
    return true;
  }
  uint64_t n = element;
  for (const int64_t d : shape) {
    if (__builtin_mul_overflow(n, static_cast<uint64_t>(d), &n)) return false;
  }
  out = n;
  return true;
}

uint64_t read_le_u64(const unsigned char* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

std::string le_u64(uint64_t v) {
  std::string s(8, '\0');
  for (size_t i = 0; i < 8; ++i) s[i] = static_cast<char>((v >> (8 * i)) & 0xff);
  return s;
}

// Parses the header JSON, rejecting a key repeated inside any one object (nlohmann would keep
// one of them silently). ordered_json keeps the file's tensor order.
ordered_json parse_json_rejecting_duplicates(const std::string& text, const std::string& path) {
  std::vector<std::set<std::string>> keys;  // one set per open object
  std::string top_key, duplicate, duplicate_in;
  auto callback = [&](int /*depth*/, ordered_json::parse_event_t event, ordered_json& parsed) {
    using E = ordered_json::parse_event_t;
    if (event == E::object_start) keys.emplace_back();
    if (event == E::object_end && !keys.empty()) keys.pop_back();
    if (event == E::key && !keys.empty()) {
      const std::string k = parsed.get<std::string>();
      if (keys.size() == 1) top_key = k;
      if (!keys.back().insert(k).second && duplicate.empty()) {
        duplicate = k;
        duplicate_in = keys.size() == 1 ? "" : top_key;
      }
    }
    return true;
  };
  ordered_json j;
  try {
    j = ordered_json::parse(text, callback);
  } catch (const ordered_json::exception& e) {  // parse_error, or out_of_range 406 (number overflow)
    throw InputError(path + ": header is not valid JSON (" + simulator::json_error_text(e) + ")");
  }
  if (!duplicate.empty()) {
    if (duplicate_in.empty()) {
      throw InputError(path + ": tensor '" + duplicate + "': appears more than once in the header");
    }
    throw InputError(path + ": tensor '" + duplicate_in + "': key '" + duplicate + "' appears more than once");
  }
  if (!j.is_object()) throw InputError(path + ": header must be a JSON object, found " + j.type_name());
  return j;
}

std::vector<int64_t> parse_shape(const ordered_json& shape, const std::string& ctx) {
  if (!shape.is_array()) throw InputError(ctx + ": shape: expected an array of integers, found " + shape.dump());
  std::vector<int64_t> out;
  for (const auto& d : shape) {
    if (!d.is_number_integer()) {
      throw InputError(ctx + ": shape: expected an array of integers, found " + shape.dump());
    }
    if (d.is_number_unsigned() && d.get<uint64_t>() > uint64_t(std::numeric_limits<int64_t>::max())) {
      throw InputError(ctx + ": shape: dimension " + d.dump() + " is too large");
    }
    const auto v = d.get<int64_t>();
    if (v < 0) throw InputError(ctx + ": shape: dimension " + std::to_string(v) + " is negative; expected >= 0");
    out.push_back(v);
  }
  return out;
}

TensorInfo parse_entry(const std::string& name, const ordered_json& e, const std::string& path) {
  const std::string ctx = path + ": tensor '" + name + "'";
  if (!e.is_object()) {
    throw InputError(ctx + ": expected an object with dtype, shape and data_offsets, found " + e.dump());
  }
  for (const char* field : {"dtype", "shape", "data_offsets"}) {
    if (!e.contains(field)) throw InputError(ctx + ": missing \"" + field + "\"");
  }
  TensorInfo t;
  t.name = name;
  if (!e["dtype"].is_string()) throw InputError(ctx + ": dtype: expected a string, found " + e["dtype"].dump());
  t.dtype = dtype_from_string(e["dtype"].get<std::string>(), ctx);
  t.shape = parse_shape(e["shape"], ctx);
  const auto& off = e["data_offsets"];
  if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() || !off[1].is_number_unsigned()) {
    throw InputError(ctx + ": data_offsets: expected [begin, end] with two non-negative integers, found " + off.dump());
  }
  t.begin = off[0].get<uint64_t>();
  t.end = off[1].get<uint64_t>();
  if (t.begin > t.end) throw InputError(ctx + ": data_offsets " + off.dump() + ": begin is after end");
  uint64_t need = 0;
  if (!checked_bytes(t.shape, dtype_size(t.dtype), need)) {
    throw InputError(ctx + ": shape " + shape_text(t.shape) + " of " + to_string(t.dtype) + ": size overflows 64 bits");
  }
  if (t.end - t.begin != need) {
    throw InputError(ctx + ": data_offsets " + off.dump() + " hold " + std::to_string(t.end - t.begin) +
                     " bytes, but shape " + shape_text(t.shape) + " of " + to_string(t.dtype) + " needs " +
                     std::to_string(need));
  }
  return t;
}

}  // namespace

size_t dtype_size(DType dtype) { return entry_of(dtype).size; }
const char* to_string(DType dtype) { return entry_of(dtype).name; }

DType dtype_from_string(const std::string& text, const std::string& context) {
  std::string known;
  for (const auto& e : kDTypes) {
    if (text == e.name) return e.dtype;
    known += (known.empty() ? "" : ", ") + std::string(e.name);
  }
  throw InputError(context + ": dtype '" + text + "': expected one of " + known);
}

int64_t TensorInfo::numel() const {
  return std::accumulate(shape.begin(), shape.end(), int64_t{1}, std::multiplies<>());
}

// ---------------------------------------------------------------------------------------------

SafetensorsReader::SafetensorsReader(const std::string& path) : file_(path) {
  const uint64_t size = file_.size();
  if (size < 8) {
    throw InputError(path + ": file is truncated or not safetensors: " + std::to_string(size) +
                     " bytes, expected at least 8 (the header length)");
  }
  unsigned char prefix[8];
  file_.pread_exact(prefix, 8, 0);
  const uint64_t n = read_le_u64(prefix);
  if (n > kMaxHeaderBytes) {
    throw InputError(path + ": header length " + std::to_string(n) + " bytes is implausible (limit " +
                     std::to_string(kMaxHeaderBytes) + "); not a safetensors file?");
  }
  if (8 + n > size) {
    throw InputError(path + ": file is truncated: the header needs " + std::to_string(8 + n) + " bytes, the file has " +
                     std::to_string(size));
  }
  data_start_ = 8 + n;
  data_size_ = size - data_start_;
  std::string header(n, '\0');
  file_.pread_exact(header.data(), n, 8);
  parse_header(header);
  check_layout();
}

void SafetensorsReader::parse_header(const std::string& header) {
  const std::string& p = path();
  const ordered_json j = parse_json_rejecting_duplicates(header, p);
  for (const auto& [key, value] : j.items()) {
    if (key == kMetadataKey) {
      if (!value.is_object()) throw InputError(p + ": __metadata__: expected an object of strings");
      for (const auto& [mk, mv] : value.items()) {
        if (!mv.is_string()) {
          throw InputError(p + ": __metadata__ '" + mk + "': expected a string, found " + mv.dump());
        }
        metadata_[mk] = mv.get<std::string>();
      }
      continue;
    }
    TensorInfo t = parse_entry(key, value, p);
    if (t.end > data_size_) {
      throw InputError(p + ": file is truncated: tensor '" + t.name + "' ends at byte " + std::to_string(t.end) +
                       " of the data, so the file needs at least " + std::to_string(data_start_ + t.end) +
                       " bytes, but it has " + std::to_string(file_.size()));
    }
    index_[t.name] = tensors_.size();
    tensors_.push_back(std::move(t));
  }
}

// Holes between tensors are allowed (some writers align); overlapping byte ranges are not.
void SafetensorsReader::check_layout() const {
  std::vector<const TensorInfo*> order;
  for (const auto& t : tensors_) {
    if (t.end > t.begin) order.push_back(&t);
  }
  std::sort(order.begin(), order.end(), [](const TensorInfo* a, const TensorInfo* b) {
    return std::pair(a->begin, a->end) < std::pair(b->begin, b->end);
  });
  const TensorInfo* reach = nullptr;  // the tensor ending furthest so far
  for (const TensorInfo* t : order) {
    if (reach != nullptr && t->begin < reach->end) {
      throw InputError(path() + ": tensors '" + reach->name + "' [" + std::to_string(reach->begin) + ", " +
                       std::to_string(reach->end) + ") and '" + t->name + "' [" + std::to_string(t->begin) + ", " +
                       std::to_string(t->end) + ") overlap in the data buffer");
    }
    if (reach == nullptr || t->end > reach->end) reach = t;
  }
}

const TensorInfo* SafetensorsReader::find(const std::string& name) const {
  const auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

const TensorInfo& SafetensorsReader::at(const std::string& name) const {
  const TensorInfo* t = find(name);
  if (t == nullptr) throw InputError(path() + ": tensor '" + name + "': not in the file");
  return *t;
}

void SafetensorsReader::read(const std::string& name, void* dst, size_t dst_bytes) const {
  const TensorInfo& t = at(name);
  if (dst_bytes != t.bytes()) {
    throw InputError(path() + ": tensor '" + name + "': has " + std::to_string(t.bytes()) + " bytes (shape " +
                     shape_text(t.shape) + " of " + to_string(t.dtype) + "), expected " + std::to_string(dst_bytes));
  }
  if (dst_bytes > 0) file_.pread_exact(dst, dst_bytes, data_start_ + t.begin);
}

void SafetensorsReader::read_range(const std::string& name, uint64_t byte_offset, void* dst, size_t bytes) const {
  const TensorInfo& t = at(name);
  if (byte_offset > t.bytes() || bytes > t.bytes() - byte_offset) {
    throw InputError(path() + ": tensor '" + name + "': byte range [" + std::to_string(byte_offset) + ", " +
                     std::to_string(byte_offset + bytes) + ") is outside its " + std::to_string(t.bytes()) + " bytes");
  }
  if (bytes > 0) file_.pread_exact(dst, bytes, data_start_ + t.begin + byte_offset);
}

// ---------------------------------------------------------------------------------------------

void SafetensorsWriter::add(const std::string& name, DType dtype, std::vector<int64_t> shape, const void* data,
                            size_t bytes) {
  auto owned = std::make_shared<std::vector<unsigned char>>(bytes);
  if (bytes > 0) {
    EXECUTOR_CHECK(data != nullptr, "SafetensorsWriter::add: null data for tensor '" + name + "'");
    std::copy_n(static_cast<const unsigned char*>(data), bytes, owned->data());
  }
  add_entry({name, dtype, std::move(shape), owned->data(), bytes, owned});
}

void SafetensorsWriter::add_borrowed(const std::string& name, DType dtype, std::vector<int64_t> shape, const void* data,
                                     size_t bytes) {
  EXECUTOR_CHECK(bytes == 0 || data != nullptr, "SafetensorsWriter::add_borrowed: null data for tensor '" + name + "'");
  add_entry({name, dtype, std::move(shape), static_cast<const unsigned char*>(data), bytes, nullptr});
}

void SafetensorsWriter::add_entry(Entry entry) {
  const std::string& name = entry.name;
  EXECUTOR_CHECK(!name.empty() && name != kMetadataKey, "SafetensorsWriter: invalid tensor name '" + name + "'");
  EXECUTOR_CHECK(std::none_of(entries_.begin(), entries_.end(), [&](const Entry& e) { return e.name == name; }),
                 "SafetensorsWriter: tensor '" + name + "' added twice");
  EXECUTOR_CHECK(std::all_of(entry.shape.begin(), entry.shape.end(), [](int64_t d) { return d >= 0; }),
                 "SafetensorsWriter: tensor '" + name + "' has a negative dimension " + shape_text(entry.shape));
  uint64_t need = 0;
  EXECUTOR_CHECK(checked_bytes(entry.shape, dtype_size(entry.dtype), need) && need == entry.bytes,
                 "SafetensorsWriter: tensor '" + name + "': " + std::to_string(entry.bytes) + " bytes given, shape " +
                     shape_text(entry.shape) + " of " + to_string(entry.dtype) + " needs " + std::to_string(need));
  entries_.push_back(std::move(entry));
}

std::string SafetensorsWriter::header_bytes() const {
  ordered_json h = ordered_json::object();
  if (!metadata_.empty()) {
    ordered_json m = ordered_json::object();
    for (const auto& [k, v] : metadata_) m[k] = v;
    h[kMetadataKey] = std::move(m);
  }
  uint64_t offset = 0;
  for (const auto& e : entries_) {
    h[e.name] =
        ordered_json{{"dtype", to_string(e.dtype)}, {"shape", e.shape}, {"data_offsets", {offset, offset + e.bytes}}};
    offset += e.bytes;
  }
  std::string json;
  try {
    json = h.dump();
  } catch (const ordered_json::type_error& e) {
    throw InputError(std::string("safetensors header: tensor names and metadata must be valid UTF-8 (") + e.what() +
                     ")");
  }
  json.append((8 - json.size() % 8) % 8, ' ');
  return le_u64(json.size()) + json;
}

SafetensorsWriter::Written SafetensorsWriter::write(const std::string& path) const {
  const std::string header = header_bytes();
  AtomicFileWriter out(path);
  out.write(header);
  for (const auto& e : entries_) out.write(e.data, e.bytes);
  const FileDigest d = out.commit();
  return {d.bytes, d.crc32};
}

}  // namespace shardplan::executor::io
