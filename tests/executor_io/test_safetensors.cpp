// safetensors reader/writer: round trips, byte compatibility with a hand-built file, every
// header validation error, ranged reads and atomic writes.
#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "executor/io/safetensors.hpp"
#include "simulator/errors.hpp"
#include "support/temp_dir.hpp"

namespace shardplan::executor::io {
namespace safetensors_test {  // named, not anonymous: the files share a unity-build unit

namespace fs = std::filesystem;
using shardplan::simulator::InputError;
using shardplan::testing::TempDir;

std::string le64(uint64_t v) {
  std::string s;
  for (int i = 0; i < 8; ++i) s.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  return s;
}

// A file laid out by hand per the spec: u64 LE length, header, data.
std::string raw_file(const std::string& header, const std::string& data = "") {
  return le64(header.size()) + header + data;
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void dump_bytes(const std::string& path, const std::string& bytes) { std::ofstream(path, std::ios::binary) << bytes; }

template <typename T>
std::string bytes_of(const std::vector<T>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
}

std::vector<std::string> dir_entries(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

// Opens `path`, expects an InputError whose one-line message names the file and contains
// every string of `parts`.
void expect_reader_error(const std::string& path, const std::vector<std::string>& parts) {
  try {
    SafetensorsReader r(path);
    FAIL() << "no error for " << path;
  } catch (const InputError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(path), std::string::npos) << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
    for (const auto& p : parts) EXPECT_NE(msg.find(p), std::string::npos) << "'" << p << "' not in: " << msg;
  }
}

// A header with one entry for tensor "t" and 8 data bytes.
std::string one_entry(const std::string& entry) { return R"({"t":)" + entry + "}"; }

TEST(DType, SizesNamesAndParsing) {
  EXPECT_EQ(dtype_size(DType::F32), 4u);
  EXPECT_EQ(dtype_size(DType::BF16), 2u);
  EXPECT_EQ(dtype_size(DType::F16), 2u);
  EXPECT_EQ(dtype_size(DType::F64), 8u);
  EXPECT_EQ(dtype_size(DType::I64), 8u);
  EXPECT_EQ(dtype_size(DType::I32), 4u);
  EXPECT_EQ(dtype_size(DType::I8), 1u);
  EXPECT_EQ(dtype_size(DType::U8), 1u);
  EXPECT_EQ(dtype_size(DType::BOOL), 1u);
  for (DType d :
       {DType::F32, DType::F16, DType::BF16, DType::F64, DType::I64, DType::I32, DType::I8, DType::U8, DType::BOOL}) {
    EXPECT_EQ(dtype_from_string(to_string(d), "ctx"), d);
  }
  try {
    (void)dtype_from_string("F8_E4M3", "x.safetensors: tensor 'w'");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("x.safetensors: tensor 'w': dtype 'F8_E4M3': expected one of F32"),
              std::string::npos)
        << e.what();
  }
}

TEST(Safetensors, RoundTripOfSeveralDtypesScalarAndEmpty) {
  TempDir tmp;
  const std::vector<float> f32{1.5f, -2.f, 3.25f, 0.f, 1e-3f, 7.f};
  const std::vector<uint16_t> bf16{0x3f80, 0xc000, 0x7f80, 0x0001};  // raw bits: 1, -2, inf, denormal
  const std::vector<uint16_t> f16{0x3c00, 0x8000};
  const std::vector<double> f64{3.141592653589793};
  const std::vector<int64_t> i64{-1, 1LL << 40, 7};
  const std::vector<int32_t> i32{-5, 6};
  const std::vector<int8_t> i8{-128, 127};
  const std::vector<uint8_t> u8{0, 255, 9};
  const std::vector<uint8_t> boolean{1, 0, 1};
  const float scalar = 42.f;
  SafetensorsWriter w;
  w.add("model.w", DType::F32, {2, 3}, f32.data(), f32.size() * 4);
  w.add("bf16", DType::BF16, {2, 2}, bf16.data(), bf16.size() * 2);
  w.add("f16", DType::F16, {2}, f16.data(), 4);
  w.add("f64", DType::F64, {1}, f64.data(), 8);
  w.add("i64", DType::I64, {3}, i64.data(), 24);
  w.add("i32", DType::I32, {2, 1}, i32.data(), 8);
  w.add("i8", DType::I8, {2}, i8.data(), 2);
  w.add_borrowed("u8", DType::U8, {3}, u8.data(), 3);
  w.add("mask", DType::BOOL, {3}, boolean.data(), 3);
  w.add("scalar", DType::F32, {}, &scalar, 4);
  w.add("empty", DType::F32, {0, 3}, nullptr, 0);
  const auto written = w.write(tmp.file("m.safetensors"));

  const std::string file = slurp(tmp.file("m.safetensors"));
  EXPECT_EQ(written.bytes, file.size());
  EXPECT_EQ(written.crc32, ::crc32(0L, reinterpret_cast<const Bytef*>(file.data()), file.size()));

  SafetensorsReader r(tmp.file("m.safetensors"));
  ASSERT_EQ(r.tensors().size(), 11u);
  EXPECT_EQ(r.tensors()[0].name, "model.w");  // header order = add order
  EXPECT_EQ(r.tensors()[10].name, "empty");
  EXPECT_EQ(r.data_start() % 8, 0u);  // header padded to 8 bytes
  EXPECT_TRUE(r.metadata().empty());
  auto check = [&](const std::string& name, DType dtype, std::vector<int64_t> shape, const std::string& bytes) {
    const TensorInfo& t = r.at(name);
    EXPECT_EQ(t.dtype, dtype) << name;
    EXPECT_EQ(t.shape, shape) << name;
    std::string got(bytes.size(), '\0');
    r.read(name, got.data(), got.size());
    EXPECT_EQ(got, bytes) << name;
  };
  check("model.w", DType::F32, {2, 3}, bytes_of(f32));
  check("bf16", DType::BF16, {2, 2}, bytes_of(bf16));
  check("f16", DType::F16, {2}, bytes_of(f16));
  check("f64", DType::F64, {1}, bytes_of(f64));
  check("i64", DType::I64, {3}, bytes_of(i64));
  check("i32", DType::I32, {2, 1}, bytes_of(i32));
  check("i8", DType::I8, {2}, bytes_of(i8));
  check("u8", DType::U8, {3}, bytes_of(u8));
  check("mask", DType::BOOL, {3}, bytes_of(boolean));
  check("scalar", DType::F32, {}, std::string(reinterpret_cast<const char*>(&scalar), 4));
  EXPECT_EQ(r.at("scalar").numel(), 1);
  EXPECT_EQ(r.at("empty").numel(), 0);
  EXPECT_EQ(r.at("empty").bytes(), 0u);
  r.read("empty", nullptr, 0);
  EXPECT_EQ(r.find("nope"), nullptr);
  EXPECT_EQ(r.path(), tmp.file("m.safetensors"));
}

TEST(Safetensors, MetadataRoundTrip) {
  TempDir tmp;
  const std::vector<float> v{1.f, 2.f};
  SafetensorsWriter w;
  w.add("w", DType::F32, {2}, v.data(), 8);
  w.set_metadata({{"format", "pt"}, {"step", "1200"}, {"unicode", "caf\xc3\xa9"}, {"empty", ""}});
  w.write(tmp.file("a.safetensors"));
  SafetensorsReader r(tmp.file("a.safetensors"));
  const std::map<std::string, std::string> expected{
      {"format", "pt"}, {"step", "1200"}, {"unicode", "caf\xc3\xa9"}, {"empty", ""}};
  EXPECT_EQ(r.metadata(), expected);
  EXPECT_EQ(r.tensors().size(), 1u);
}

TEST(Safetensors, ByteCompatibleWithAHandBuiltFile) {
  TempDir tmp;
  // Per the spec (and the reference writer): compact JSON, __metadata__ first, entries with
  // dtype/shape/data_offsets in that order, header padded with spaces to a multiple of 8.
  std::string header = R"({"__metadata__":{"format":"pt"},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                       R"("b":{"dtype":"I8","shape":[],"data_offsets":[8,9]}})";
  header.append((8 - header.size() % 8) % 8, ' ');
  const float a[2] = {1.0f, -0.5f};
  const std::string data = std::string("\x00\x00\x80\x3f\x00\x00\x00\xbf", 8) + "\x07";
  const std::string expected = raw_file(header, data);
  ASSERT_EQ(std::memcmp(data.data(), a, 8), 0);  // little-endian host

  SafetensorsWriter w;
  w.set_metadata({{"format", "pt"}});
  w.add("a", DType::F32, {2}, a, 8);
  const int8_t b = 7;
  w.add("b", DType::I8, {}, &b, 1);
  w.write(tmp.file("w.safetensors"));
  EXPECT_EQ(slurp(tmp.file("w.safetensors")), expected);
  EXPECT_EQ(w.header_bytes(), expected.substr(0, 8 + header.size()));

  // Another writer's layout: unpadded header, spaces, different key order, a hole of 4
  // bytes before "a" (allowed), tensors out of data order.
  const std::string other_header =
      R"({ "b" : {"data_offsets": [12, 13], "shape": [], "dtype": "I8"},)"
      R"( "a": {"shape": [2], "dtype": "F32", "data_offsets": [4, 12]}, "__metadata__": {"x": "y"} })";
  dump_bytes(tmp.file("h.safetensors"), raw_file(other_header, "HOLE" + data));
  SafetensorsReader r(tmp.file("h.safetensors"));
  ASSERT_EQ(r.tensors().size(), 2u);
  EXPECT_EQ(r.tensors()[0].name, "b");
  EXPECT_EQ(r.at("a").begin, 4u);
  float got[2] = {0, 0};
  r.read("a", got, 8);
  EXPECT_EQ(got[0], 1.0f);
  EXPECT_EQ(got[1], -0.5f);
  int8_t gb = 0;
  r.read("b", &gb, 1);
  EXPECT_EQ(gb, 7);
  EXPECT_EQ(r.metadata().at("x"), "y");
}

TEST(Safetensors, RejectsShortFilesAndBadHeaderLengths) {
  TempDir tmp;
  expect_reader_error(tmp.write("empty.safetensors", ""), {"truncated", "0 bytes", "at least 8"});
  expect_reader_error(tmp.write("five.safetensors", "abcde"), {"truncated", "5 bytes"});
  const std::string h = one_entry(R"({"dtype":"U8","shape":[1],"data_offsets":[0,1]})");
  // The length says 1000 header bytes, the file holds far fewer.
  dump_bytes(tmp.file("short_header.safetensors"), le64(1000) + h + "x");
  expect_reader_error(tmp.file("short_header.safetensors"),
                      {"truncated", "needs 1008 bytes", "has " + std::to_string(8 + h.size() + 1)});
  dump_bytes(tmp.file("absurd.safetensors"), le64(200'000'000) + h);
  expect_reader_error(tmp.file("absurd.safetensors"), {"header length 200000000", "implausible"});
  dump_bytes(tmp.file("huge.safetensors"), le64(~0ULL) + h);
  expect_reader_error(tmp.file("huge.safetensors"), {"implausible"});
}

TEST(Safetensors, RejectsHeadersThatAreNotJsonObjects) {
  TempDir tmp;
  dump_bytes(tmp.file("a.safetensors"), raw_file(R"({"t": {"dtype": "F32",)"));
  expect_reader_error(tmp.file("a.safetensors"), {"header is not valid JSON"});
  dump_bytes(tmp.file("b.safetensors"), raw_file("[1, 2]"));
  expect_reader_error(tmp.file("b.safetensors"), {"header must be a JSON object", "array"});
  dump_bytes(tmp.file("c.safetensors"), raw_file(std::string("{\"t\xff\": 1}")));
  expect_reader_error(tmp.file("c.safetensors"), {"header is not valid JSON"});  // not UTF-8
  dump_bytes(tmp.file("d.safetensors"), raw_file(""));
  expect_reader_error(tmp.file("d.safetensors"), {"header is not valid JSON"});
}

TEST(Safetensors, RejectsMalformedEntries) {
  TempDir tmp;
  int n = 0;
  auto check = [&](const std::string& entry, const std::vector<std::string>& parts) {
    const std::string path = tmp.file("e" + std::to_string(n++) + ".safetensors");
    dump_bytes(path, raw_file(one_entry(entry), std::string(64, '\0')));
    SCOPED_TRACE(entry);
    std::vector<std::string> all{"tensor 't'"};
    all.insert(all.end(), parts.begin(), parts.end());
    expect_reader_error(path, all);
  };
  check(R"([1, 2])", {"expected an object with dtype, shape and data_offsets"});
  check(R"({"shape":[2],"data_offsets":[0,8]})", {"missing \"dtype\""});
  check(R"({"dtype":"F32","data_offsets":[0,8]})", {"missing \"shape\""});
  check(R"({"dtype":"F32","shape":[2]})", {"missing \"data_offsets\""});
  check(R"({"dtype":4,"shape":[2],"data_offsets":[0,8]})", {"dtype: expected a string"});
  check(R"({"dtype":"F32","shape":"2","data_offsets":[0,8]})", {"shape: expected an array of integers"});
  check(R"({"dtype":"F32","shape":[2.0],"data_offsets":[0,8]})", {"shape: expected an array of integers"});
  check(R"({"dtype":"F32","shape":[2],"data_offsets":[0]})", {"data_offsets: expected [begin, end]"});
  check(R"({"dtype":"F32","shape":[2],"data_offsets":["0",8]})", {"data_offsets: expected [begin, end]"});
  check(R"({"dtype":"F32","shape":[2],"data_offsets":[-8,0]})", {"data_offsets: expected [begin, end]"});
  check(R"({"dtype":"Q4","shape":[2],"data_offsets":[0,8]})", {"dtype 'Q4'", "expected one of"});
  check(R"({"dtype":"F32","shape":[-2],"data_offsets":[0,8]})", {"dimension -2 is negative"});
  check(R"({"dtype":"F32","shape":[2],"data_offsets":[8,0]})", {"begin is after end"});
  check(R"({"dtype":"F32","shape":[3],"data_offsets":[0,8]})", {"hold 8 bytes", "needs 12"});
  check(R"({"dtype":"F32","shape":[4611686018427387904,4],"data_offsets":[0,8]})", {"overflows 64 bits"});
  check(R"({"dtype":"F32","shape":[18446744073709551615],"data_offsets":[0,8]})", {"too large"});
}

TEST(Safetensors, TruncatedDataIsReportedWithSizes) {
  TempDir tmp;
  const std::vector<float> v(100, 1.f);
  SafetensorsWriter w;
  w.add("w", DType::F32, {10, 10}, v.data(), 400);
  const auto written = w.write(tmp.file("t.safetensors"));
  fs::resize_file(tmp.file("t.safetensors"), written.bytes - 10);
  expect_reader_error(tmp.file("t.safetensors"),
                      {"truncated", "tensor 'w'", "needs at least " + std::to_string(written.bytes),
                       "has " + std::to_string(written.bytes - 10)});
}

TEST(Safetensors, RejectsOverlapsDuplicatesAndBadMetadata) {
  TempDir tmp;
  const std::string data(16, '\0');
  dump_bytes(tmp.file("o.safetensors"), raw_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                                                 R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                                                 data));
  expect_reader_error(tmp.file("o.safetensors"), {"'a' [0, 8)", "'b' [4, 12)", "overlap"});
  dump_bytes(tmp.file("d.safetensors"), raw_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                                                 R"("a":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})",
                                                 data));
  expect_reader_error(tmp.file("d.safetensors"), {"tensor 'a'", "more than once"});
  dump_bytes(tmp.file("dk.safetensors"),
             raw_file(R"({"a":{"dtype":"F32","dtype":"I32","shape":[2],"data_offsets":[0,8]}})", data));
  expect_reader_error(tmp.file("dk.safetensors"), {"tensor 'a'", "key 'dtype'", "more than once"});
  dump_bytes(tmp.file("m.safetensors"), raw_file(R"({"__metadata__":{"k":1}})"));
  expect_reader_error(tmp.file("m.safetensors"), {"__metadata__ 'k'", "expected a string"});
  dump_bytes(tmp.file("m2.safetensors"), raw_file(R"({"__metadata__":"pt"})"));
  expect_reader_error(tmp.file("m2.safetensors"), {"__metadata__", "expected an object"});
  // Empty tensors may sit anywhere, also inside another tensor's range; holes are fine.
  dump_bytes(tmp.file("ok.safetensors"), raw_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                                                  R"("z":{"dtype":"F32","shape":[0],"data_offsets":[4,4]},)"
                                                  R"("b":{"dtype":"F32","shape":[1],"data_offsets":[12,16]}})",
                                                  data));
  EXPECT_EQ(SafetensorsReader(tmp.file("ok.safetensors")).tensors().size(), 3u);
}

TEST(Safetensors, LookupAndReadSizeErrors) {
  TempDir tmp;
  const std::vector<float> v{1, 2, 3};
  SafetensorsWriter w;
  w.add("w", DType::F32, {3}, v.data(), 12);
  w.write(tmp.file("x.safetensors"));
  SafetensorsReader r(tmp.file("x.safetensors"));
  try {
    (void)r.at("missing");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()), tmp.file("x.safetensors") + ": tensor 'missing': not in the file");
  }
  float buf[4];
  EXPECT_THROW(r.read("w", buf, 16), InputError);
  EXPECT_THROW(r.read("w", buf, 8), InputError);
  EXPECT_THROW(SafetensorsReader(tmp.file("absent.safetensors")), InputError);
  EXPECT_THROW(SafetensorsReader(tmp.path().string()), InputError);  // a directory
}

TEST(Safetensors, ReadRangeReadsARowBlock) {
  TempDir tmp;
  std::vector<float> m(4 * 3);
  for (size_t i = 0; i < m.size(); ++i) m[i] = static_cast<float>(i);
  SafetensorsWriter w;
  w.add("pad", DType::U8, {5}, "abcde", 5);  // misaligns the matrix: offsets still work
  w.add("m", DType::F32, {4, 3}, m.data(), m.size() * 4);
  w.write(tmp.file("r.safetensors"));
  SafetensorsReader r(tmp.file("r.safetensors"));
  std::vector<float> rows(6);
  r.read_range("m", 1 * 3 * 4, rows.data(), 6 * 4);  // rows 1 and 2
  EXPECT_EQ(rows, (std::vector<float>{3, 4, 5, 6, 7, 8}));
  float last = 0;
  r.read_range("m", 11 * 4, &last, 4);
  EXPECT_EQ(last, 11.f);
  r.read_range("m", 48, nullptr, 0);  // empty range at the end
  EXPECT_THROW(r.read_range("m", 44, rows.data(), 8), InputError);
  EXPECT_THROW(r.read_range("m", 49, nullptr, 0), InputError);
  EXPECT_THROW(r.read_range("m", ~0ULL, rows.data(), 8), InputError);  // no overflow wrap
  EXPECT_THROW(r.read_range("absent", 0, rows.data(), 4), InputError);
}

TEST(Safetensors, WriterRejectsMisuse) {
  const std::vector<float> v{1, 2};
  SafetensorsWriter w;
  EXPECT_THROW(w.add("w", DType::F32, {3}, v.data(), 8), std::logic_error);
  EXPECT_THROW(w.add("w", DType::F32, {-2}, v.data(), 8), std::logic_error);
  EXPECT_THROW(w.add("", DType::F32, {2}, v.data(), 8), std::logic_error);
  EXPECT_THROW(w.add("__metadata__", DType::F32, {2}, v.data(), 8), std::logic_error);
  EXPECT_THROW(w.add("w", DType::F32, {2}, nullptr, 8), std::logic_error);
  w.add("w", DType::F32, {2}, v.data(), 8);
  EXPECT_THROW(w.add("w", DType::F32, {2}, v.data(), 8), std::logic_error);
  EXPECT_THROW(w.add("big", DType::F32, {1LL << 62, 1LL << 62}, v.data(), 8), std::logic_error);
  EXPECT_EQ(w.size(), 1u);
}

TEST(Safetensors, AtomicWriteReplacesAndLeavesNoTempFiles) {
  TempDir tmp;
  const std::vector<float> v{1, 2};
  SafetensorsWriter w;
  w.add("w", DType::F32, {2}, v.data(), 8);
  const std::string target = tmp.file("x.safetensors");
  dump_bytes(target, "old contents");
  w.write(target);
  EXPECT_EQ(dir_entries(tmp.path()), (std::vector<std::string>{"x.safetensors"}));
  EXPECT_EQ(SafetensorsReader(target).tensors().size(), 1u);

  // Directory missing: an error naming the path, nothing created.
  const std::string missing = tmp.file("no/such/dir/y.safetensors");
  try {
    w.write(missing);
    FAIL();
  } catch (const InputError& e) { EXPECT_NE(std::string(e.what()).find(missing), std::string::npos) << e.what(); }
  EXPECT_FALSE(fs::exists(tmp.file("no")));

  // The target is a directory: the rename fails, the temp file is removed.
  fs::create_directory(tmp.file("adir"));
  EXPECT_THROW(w.write(tmp.file("adir")), InputError);
  EXPECT_EQ(dir_entries(tmp.path()), (std::vector<std::string>{"adir", "x.safetensors"}));
  EXPECT_TRUE(fs::is_empty(tmp.file("adir")));
}

TEST(Safetensors, AtomicWriteIntoAReadOnlyDirectoryFailsCleanly) {
  if (::geteuid() == 0) GTEST_SKIP() << "root ignores directory permissions";
  TempDir tmp;
  fs::create_directory(tmp.file("ro"));
  fs::permissions(tmp.file("ro"), fs::perms::owner_read | fs::perms::owner_exec);
  const std::vector<float> v{1, 2};
  SafetensorsWriter w;
  w.add("w", DType::F32, {2}, v.data(), 8);
  EXPECT_THROW(w.write(tmp.file("ro/x.safetensors")), InputError);
  fs::permissions(tmp.file("ro"), fs::perms::owner_all);
  EXPECT_TRUE(fs::is_empty(tmp.file("ro")));
}

}  // namespace safetensors_test
}  // namespace shardplan::executor::io
