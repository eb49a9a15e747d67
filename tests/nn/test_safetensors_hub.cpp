// safetensors as Hub checkpoints store them: BF16 / F16 (read as float32) and I32 / I16 / I8 / U8
// (read as int64) converted on load, and sharded checkpoints (model.safetensors.index.json).
// Every file is written here byte by byte; the expected values are computed independently of
// the reader: every one of the 65536 f16 and bf16 bit patterns against the formula
// (-1)^s 2^(e - bias) (1 + m / 2^p) (subnormals 2^(1 - bias) m / 2^p) evaluated in double.
#include <doctest/doctest.h>

#include <unistd.h>

#include <bit>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "autograd/tensor.h"
#include "nn/layers.h"
#include "nn/safetensors.h"
#include "tests/nn/safetensors_fixture.h"

using namespace graft;
namespace fs = std::filesystem;

namespace {

using namespace safetensors_test;

void write_text(const std::string& path, const std::string& s) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << s;
  REQUIRE(out.good());
}

// Parses b from memory and from a file; both readers must agree (dtypes, shapes, bytes).
nn::SafetensorsFile parse_both(const Bytes& b, const TmpDir& tmp) {
  nn::SafetensorsFile mem = nn::parse_safetensors(b.data(), b.size(), "mem");
  write_bytes(tmp / "f.safetensors", b);
  nn::SafetensorsFile file = nn::load_safetensors(tmp / "f.safetensors");
  REQUIRE(mem.tensors.size() == file.tensors.size());
  CHECK(mem.stored_dtypes == file.stored_dtypes);
  for (size_t i = 0; i < mem.tensors.size(); ++i) {
    const Tensor &x = mem.tensors[i].second, &y = file.tensors[i].second;
    CHECK(mem.tensors[i].first == file.tensors[i].first);
    REQUIRE(x.dtype() == y.dtype());
    REQUIRE(x.shape() == y.shape());
    CHECK(std::memcmp(x.storage()->data(), y.storage()->data(),
                      size_t(x.numel()) * dtype_size(x.dtype())) == 0);
  }
  return mem;
}

std::string parse_error(const Bytes& b) {
  try {
    nn::parse_safetensors(b.data(), b.size(), "bad");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// One tensor "x" of dtype `dt` and shape [n] holding `data`.
Bytes one_tensor(const char* dt, size_t n, const Bytes& data) {
  return make_file(fmt::format(R"({{"x":{{"dtype":"{}","shape":[{}],"data_offsets":[0,{}]}}}})",
                               dt, n, data.size()),
                   data);
}

// Every 16-bit pattern, little-endian.
Bytes all_halves() {
  Bytes d;
  for (uint32_t h = 0; h < 65536; ++h) d.push_back(uint8_t(h & 0xFF)), d.push_back(uint8_t(h >> 8));
  return d;
}

// The value of a 16-bit float with `ebits` exponent bits (bias 2^(ebits-1) - 1) and `mbits`
// mantissa bits, by the textbook formula, in double (exact for both formats).
double decode_small_float(uint32_t h, int ebits, int mbits) {
  const int bias = (1 << (ebits - 1)) - 1;
  const uint32_t e = (h >> mbits) & ((1u << ebits) - 1), m = h & ((1u << mbits) - 1);
  const double sign = (h >> 15) ? -1.0 : 1.0;
  const double frac = double(m) / double(1u << mbits);
  if (e == 0) return sign * std::ldexp(frac, 1 - bias);
  return sign * std::ldexp(1.0 + frac, int(e) - bias);
}

void check_all_patterns(const char* dt, int ebits, int mbits) {
  TmpDir tmp;
  nn::SafetensorsFile f = parse_both(one_tensor(dt, 65536, all_halves()), tmp);
  const Tensor& x = find(f.tensors, "x");
  REQUIRE(x.dtype() == DType::f32);
  CHECK(f.stored_dtypes.at("x") == dt);
  const auto* v = static_cast<const float*>(x.storage()->data());
  int64_t mismatches = 0;
  for (uint32_t h = 0; h < 65536; ++h) {
    const uint32_t got = std::bit_cast<uint32_t>(v[h]);
    const uint32_t e = (h >> mbits) & ((1u << ebits) - 1), m = h & ((1u << mbits) - 1);
    uint32_t want;
    if (e == (1u << ebits) - 1) {  // inf / NaN: sign, all-ones exponent, mantissa at the top
      want = ((h >> 15) << 31) | 0x7F800000u | (m << (23 - mbits));
    } else {
      want = std::bit_cast<uint32_t>(float(decode_small_float(h, ebits, mbits)));
    }
    if (got != want && mismatches++ < 5)
      MESSAGE(fmt::format("{} {:#06x}: got {:#010x}, expected {:#010x}", dt, h, got, want));
  }
  CHECK(mismatches == 0);
}

}  // namespace

TEST_CASE("safetensors: every F16 bit pattern reads as the exact float32 (subnormals, inf, NaN)") {
  check_all_patterns("F16", 5, 10);
  // a few by hand: 1.0, -2.0, the smallest subnormal 2^-24, the largest 65504, -inf, a quiet NaN
  TmpDir tmp;
  Bytes d = {0x00, 0x3C, 0x00, 0xC0, 0x01, 0x00, 0xFF, 0x7B, 0x00, 0xFC, 0x01, 0x7E};
  const Tensor x = find(parse_both(one_tensor("F16", 6, d), tmp).tensors, "x");
  const std::vector<float> v = x.to_vector<float>();
  CHECK(v[0] == 1.0f);
  CHECK(v[1] == -2.0f);
  CHECK(v[2] == std::ldexp(1.0f, -24));
  CHECK(v[3] == 65504.0f);
  CHECK((std::isinf(v[4]) && v[4] < 0));
  CHECK(std::bit_cast<uint32_t>(v[5]) == 0x7FC02000u);
}

TEST_CASE("safetensors: every BF16 bit pattern reads as the exact float32 (subnormals, inf, NaN)") {
  check_all_patterns("BF16", 8, 7);
  TmpDir tmp;
  // 3.140625 = 0x4049, -0.0, the smallest subnormal 2^-133, +inf
  Bytes d = {0x49, 0x40, 0x00, 0x80, 0x01, 0x00, 0x80, 0x7F};
  const std::vector<float> v = find(parse_both(one_tensor("BF16", 4, d), tmp).tensors, "x").to_vector<float>();
  CHECK(v[0] == 3.140625f);
  CHECK(std::bit_cast<uint32_t>(v[1]) == 0x80000000u);
  CHECK(v[2] == std::ldexp(1.0f, -133));
  CHECK((std::isinf(v[3]) && v[3] > 0));
}

TEST_CASE("safetensors: I32, I16, I8, U8 read as int64 (sign- and zero-extended), unaligned") {
  TmpDir tmp;
  // Packed back to back so that the I32 and I16 data start at odd offsets: u8 [3] at 0,
  // i32 [3] at 3, i16 [3] at 15, i8 [3] at 21, bool [2] at 24, then an empty I32.
  const std::string h =
      R"({"u":{"dtype":"U8","shape":[3],"data_offsets":[0,3]},)"
      R"("i32":{"dtype":"I32","shape":[3],"data_offsets":[3,15]},)"
      R"("i16":{"dtype":"I16","shape":[3],"data_offsets":[15,21]},)"
      R"("i8":{"dtype":"I8","shape":[3],"data_offsets":[21,24]},)"
      R"("b":{"dtype":"BOOL","shape":[2],"data_offsets":[24,26]},)"
      R"("e":{"dtype":"I32","shape":[0,5],"data_offsets":[26,26]}})";
  const Bytes d = {0x00, 0xC8, 0xFF,                                      // 0, 200, 255
                   0x00, 0x00, 0x00, 0x80, 0xFF, 0xFF, 0xFF, 0xFF,        // INT32_MIN, -1
                   0xFF, 0xFF, 0xFF, 0x7F,                                // INT32_MAX
                   0x00, 0x80, 0xFE, 0xFF, 0x2C, 0x01,                    // -32768, -2, 300
                   0x80, 0xFF, 0x7F,                                      // -128, -1, 127
                   0x01, 0x00};
  nn::SafetensorsFile f = parse_both(make_file(h, d), tmp);
  auto ints = [&](const char* n) {
    const Tensor& t = find(f.tensors, n);
    CHECK(t.dtype() == DType::i64);
    return t.to_vector<int64_t>();
  };
  CHECK(ints("u") == std::vector<int64_t>{0, 200, 255});
  CHECK(ints("i32") == std::vector<int64_t>{INT32_MIN, -1, INT32_MAX});
  CHECK(ints("i16") == std::vector<int64_t>{-32768, -2, 300});
  CHECK(ints("i8") == std::vector<int64_t>{-128, -1, 127});
  CHECK(find(f.tensors, "b").dtype() == DType::b8);
  CHECK(find(f.tensors, "e").shape() == Shape{0, 5});
  CHECK(f.stored_dtypes == std::map<std::string, std::string>{
                               {"u", "U8"}, {"i32", "I32"}, {"i16", "I16"}, {"i8", "I8"},
                               {"b", "BOOL"}, {"e", "I32"}});
}

TEST_CASE("safetensors: byte counts of converted dtypes, and dtypes still refused") {
  // the size check uses the file's element size (2 bytes for BF16), not float32's
  CHECK(parse_error(one_tensor("BF16", 2, Bytes(8))).find("needs 4 bytes") != std::string::npos);
  CHECK(parse_error(one_tensor("I32", 2, Bytes(4))).find("needs 8 bytes") != std::string::npos);
  CHECK(parse_error(one_tensor("U16", 2, Bytes(4))).find("dtype U16, which graft does not read") !=
        std::string::npos);
  CHECK(parse_error(one_tensor("F8_E4M3", 2, Bytes(2))).find("F8_E4M3") != std::string::npos);
  CHECK(parse_error(one_tensor("BOOL", 2, Bytes{1, 2})).find("holds 2") != std::string::npos);
}

TEST_CASE("safetensors: load_into a float32 model from a BF16 file") {
  TmpDir tmp;
  nn::Linear lin(2, 1);
  // weight [1, 2] = {1.5, -0.25}, bias [1] = {2}: 0x3FC0, 0xBE80, 0x4000
  const std::string h = R"({"bias":{"dtype":"BF16","shape":[1],"data_offsets":[0,2]},)"
                        R"("weight":{"dtype":"BF16","shape":[1,2],"data_offsets":[2,6]}})";
  write_bytes(tmp / "m.safetensors", make_file(h, {0x00, 0x40, 0xC0, 0x3F, 0x80, 0xBE}));
  nn::load_into(lin, tmp / "m.safetensors");
  CHECK(lin.weight.dtype() == DType::f32);
  CHECK(lin.weight.to_vector<float>() == std::vector<float>{1.5f, -0.25f});
  CHECK(lin.bias.to_vector<float>() == std::vector<float>{2.0f});
}

// ------------------------------------------------------------------ sharded checkpoints

namespace {

// A shard holding float32 tensors `names` ([2] each: {k, k + 0.5} for the k-th name overall).
Bytes f32_shard(const std::vector<std::pair<std::string, float>>& tensors) {
  std::string h = "{";
  Bytes d;
  for (const auto& [n, k] : tensors) {
    if (h.size() > 1) h += ',';
    h += fmt::format(R"("{}":{{"dtype":"F32","shape":[2],"data_offsets":[{},{}]}})", n, d.size(),
                     d.size() + 8);
    for (float v : {k, k + 0.5f}) {
      uint8_t b[4];
      std::memcpy(b, &v, 4);
      d.insert(d.end(), b, b + 4);
    }
  }
  h += R"(,"__metadata__":{"format":"pt"}})";
  return make_file(h, d);
}

std::string load_error(const std::string& path) {
  try {
    nn::load_checkpoint(path);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

const char* kIndex = R"({"metadata": {"total_size": 32},
  "weight_map": {"a.weight": "model-00001-of-00002.safetensors",
                 "a.bias": "model-00001-of-00002.safetensors",
                 "b.weight": "model-00002-of-00002.safetensors"}})";

}  // namespace

TEST_CASE("safetensors: a sharded checkpoint (index + 2 shards) reads as one") {
  TmpDir tmp;
  write_bytes(tmp / "model-00001-of-00002.safetensors", f32_shard({{"a.weight", 1}, {"a.bias", 2}}));
  write_bytes(tmp / "model-00002-of-00002.safetensors", f32_shard({{"b.weight", 3}}));
  write_text(tmp / "model.safetensors.index.json", kIndex);
  for (const std::string& p : {tmp.dir.string(), tmp / "model.safetensors.index.json"}) {
    nn::SafetensorsFile f = nn::load_checkpoint(p);
    REQUIRE(f.tensors.size() == 3);
    CHECK(find(f.tensors, "a.weight").to_vector<float>() == std::vector<float>{1, 1.5});
    CHECK(find(f.tensors, "a.bias").to_vector<float>() == std::vector<float>{2, 2.5});
    CHECK(find(f.tensors, "b.weight").to_vector<float>() == std::vector<float>{3, 3.5});
    CHECK(f.metadata.at("format") == "pt");
    CHECK(f.stored_dtypes.at("b.weight") == "F32");
  }
  // a model loads from the directory too (load_into takes any checkpoint path)
  struct Vec2 : nn::Module {
    Tensor weight, bias;
    explicit Vec2(bool with_bias) {
      weight = register_parameter("weight", zeros({2}));
      if (with_bias) bias = register_parameter("bias", zeros({2}));
    }
    std::string repr() const override { return "Vec2"; }
  };
  struct Two : nn::Module {
    std::shared_ptr<Vec2> a, b;
    Two() {
      a = register_module("a", std::make_shared<Vec2>(true));
      b = register_module("b", std::make_shared<Vec2>(false));
    }
    std::string repr() const override { return "Two"; }
  };
  Two m;
  nn::load_into(m, tmp.dir.string());
  CHECK(m.a->bias.to_vector<float>() == std::vector<float>{2, 2.5});
  CHECK(m.b->weight.to_vector<float>() == std::vector<float>{3, 3.5});
}

TEST_CASE("safetensors: sharded checkpoints with a missing shard, a tensor twice or not where said") {
  TmpDir tmp;
  const std::string s1 = tmp / "model-00001-of-00002.safetensors";
  const std::string s2 = tmp / "model-00002-of-00002.safetensors";
  const std::string idx = tmp / "model.safetensors.index.json";
  write_text(idx, kIndex);
  write_bytes(s1, f32_shard({{"a.weight", 1}, {"a.bias", 2}}));
  // missing shard: named, with a tensor it should hold
  std::string e = load_error(tmp.dir.string());
  CHECK(e.find("model-00002-of-00002.safetensors is missing") != std::string::npos);
  CHECK(e.find("b.weight") != std::string::npos);
  // a tensor in both shards
  write_bytes(s2, f32_shard({{"b.weight", 3}, {"a.bias", 4}}));
  e = load_error(idx);
  CHECK(e.find("tensor 'a.bias' is in two shards") != std::string::npos);
  // the weight_map names a tensor its shard lacks
  write_bytes(s2, f32_shard({{"c.weight", 3}}));
  write_text(idx, R"({"weight_map": {"a.weight": "model-00001-of-00002.safetensors",
    "a.bias": "model-00001-of-00002.safetensors", "b.weight": "model-00002-of-00002.safetensors",
    "c.weight": "model-00002-of-00002.safetensors"}})");
  e = load_error(idx);
  CHECK(e.find("puts tensor 'b.weight' in model-00002-of-00002.safetensors, which does not hold it") !=
        std::string::npos);
  // a shard holds a tensor the weight_map does not name, or names elsewhere
  write_text(idx, kIndex);
  e = load_error(idx);
  CHECK(e.find("holds tensor 'c.weight', which the weight_map does not name") != std::string::npos);
  write_bytes(s2, f32_shard({{"b.weight", 3}, {"a.bias", 4}}));
  write_bytes(s1, f32_shard({{"a.weight", 1}}));
  e = load_error(idx);
  CHECK(e.find("puts tensor 'a.bias' in model-00001-of-00002.safetensors, but it is in "
               "model-00002-of-00002.safetensors") != std::string::npos);
  // a corrupt shard: the shard's path and the problem
  write_bytes(s1, {1, 2, 3});
  e = load_error(idx);
  CHECK(e.find("model-00001-of-00002.safetensors: file is 3 bytes") != std::string::npos);
}

TEST_CASE("safetensors: bad index files") {
  auto err = [](const std::string& text) {
    try {
      nn::parse_safetensors_index(text, "idx");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  CHECK(err("{").find("not valid JSON") != std::string::npos);
  CHECK(err("[]").find("expected an object") != std::string::npos);
  CHECK(err(R"({"metadata": {}})").find("has no weight_map") != std::string::npos);
  CHECK(err(R"({"weight_map": []})").find("weight_map is a JSON array") != std::string::npos);
  CHECK(err(R"({"weight_map": {"w": 3}})").find("gives tensor 'w' a JSON number") != std::string::npos);
  CHECK(err(R"({"weight_map": {"w": ""}})").find("empty shard name") != std::string::npos);
  CHECK(err(R"({"weight_map": {"w": "/etc/passwd"}})").find("not a relative file name") != std::string::npos);
  CHECK(err(R"({"weight_map": {"w": "../x.safetensors"}})").find("leaves the index's directory") !=
        std::string::npos);
  CHECK(err(R"({"weight_map": {"w": "a.st", "w": "b.st"}})").find("the key 'w' twice") != std::string::npos);
  CHECK(err(R"({"weight_map": {}, "metadata": 5})").find("metadata is a JSON number") != std::string::npos);
  CHECK(err(std::string("{\"weight_map\": {}}\0x", 19)).find("NUL") != std::string::npos);
  // a valid one: shards distinct and sorted
  const nn::SafetensorsIndex ok = nn::parse_safetensors_index(
      R"({"weight_map": {"x": "b.safetensors", "y": "a.safetensors", "z": "b.safetensors"}})", "idx");
  CHECK(ok.shards == std::vector<std::string>{"a.safetensors", "b.safetensors"});
  CHECK(ok.weight_map.at("y") == "a.safetensors");
  // a directory with neither layout
  TmpDir tmp;
  CHECK(load_error(tmp.dir.string()).find("no model.safetensors or model.safetensors.index.json") !=
        std::string::npos);
}
