// safetensors checkpoints: round trips of every dtype and shape, the exact bytes of a tiny file,
// one error per kind of corrupt or hostile file, a model left unchanged by a failed load, a save
// killed mid-write that leaves the previous file intact, and PyTorch interop through fixtures
// written by tests/fixtures/make_safetensors_fixtures.py.
//
// Regenerating the graft-written fixture (then rerun the Python script to check it):
//   GRAFT_WRITE_FIXTURES=1 build/tests/test_nn -sf='*safetensors*' -tc='*graft_written*'
#include <doctest/doctest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "autograd/grad_mode.h"
#include "autograd/tensor.h"
#include "nn/module.h"
#include "nn/safetensors.h"
#include "tests/nn/safetensors_fixture.h"

#ifndef GRAFT_FIXTURES
// Normally set by tests/meson.build; this fallback works when run from a build dir in the tree.
#define GRAFT_FIXTURES "../tests/fixtures"
#endif

using namespace graft;
namespace fs = std::filesystem;

namespace {

using namespace safetensors_test;

// The graft::Error message raised by parsing `b` (through memory and through a file), or "".
std::string parse_error(const Bytes& b, const TmpDir& tmp) {
  std::string mem, file;
  try {
    nn::parse_safetensors(b.data(), b.size(), "bad.safetensors");
  } catch (const Error& e) {
    mem = e.what();
  }
  std::string path = tmp / "bad.safetensors";
  write_bytes(path, b);
  try {
    nn::load_safetensors(path);
  } catch (const Error& e) {
    file = e.what();
  }
  // both readers give the same diagnosis (the file one names the full path)
  if (!mem.empty() && !file.empty()) {
    std::string tail = mem.substr(std::string("bad.safetensors").size());
    CHECK_MESSAGE(file.find(tail) != std::string::npos, "memory: ", mem, "\nfile: ", file);
  } else {
    CHECK_MESSAGE(mem.empty() == file.empty(), "memory: ", mem, "\nfile: ", file);
  }
  return mem;
}

#define CHECK_PARSE_ERROR(bytes, needle)                                              \
  do {                                                                                \
    std::string msg_ = parse_error(bytes, tmp);                                       \
    CHECK_MESSAGE(msg_.find(needle) != std::string::npos, "expected an error with '", \
                  needle, "', got '", msg_, "'");                                     \
  } while (0)

// A file a test expects the parser to refuse: its header text, data section, and a piece of
// the message.
struct BadFile {
  std::string header;
  Bytes data;
  std::string needle;
};

// The header of one tensor 'w' with the given dtype name, shape and data_offsets (JSON text).
std::string w_tensor(const std::string& dtype, const std::string& shape,
                     const std::string& offsets) {
  return R"({"w": {"dtype": ")" + dtype + R"(", "shape": )" + shape + R"(, "data_offsets": )" +
         offsets + "}}";
}

void check_bad_files(const TmpDir& tmp, const std::vector<BadFile>& cases) {
  for (const BadFile& c : cases) {
    CAPTURE(c.header.substr(0, 200));
    CHECK_PARSE_ERROR(make_file(c.header, c.data), c.needle);
  }
}

void check_same(const Tensor& a, const Tensor& b) {
  REQUIRE(a.defined());
  REQUIRE(b.defined());
  CHECK(a.dtype() == b.dtype());
  CHECK(a.shape() == b.shape());
  if (a.dtype() == DType::i64)
    CHECK(a.to_vector<int64_t>() == b.to_vector<int64_t>());
  else
    CHECK(a.to_vector<double>() == b.to_vector<double>());
}

// from_vector with double values (brace lists of integer literals are ambiguous otherwise)
Tensor fvec(const std::vector<double>& v, const Shape& s, TensorOptions opt = {}) {
  return from_vector(v, s, opt);
}

Tensor bools(const std::vector<double>& v, const Shape& s) {
  return from_vector(v, s, DType::b8);
}

std::vector<std::string> files_in(const fs::path& dir) {
  std::vector<std::string> out;
  for (auto& e : fs::directory_iterator(dir)) out.push_back(e.path().filename().string());
  return out;
}

struct Tiny : nn::Module {
  Tensor weight, bias;
  Tiny() {
    weight = register_parameter("weight", fvec({1, 2, 3, 4, 5, 6}, {2, 3}));
    bias = register_parameter("bias", fvec({-1, -2, -3}, {3}));
  }
  std::string repr() const override { return "Tiny"; }
};

// ---- the fixture tensors, shared with tests/fixtures/make_safetensors_fixtures.py
nn::NamedTensors fixture_tensors() {
  std::vector<double> m(6), cube(24), w(6), mask(10);
  for (int i = 0; i < 6; ++i) m[i] = static_cast<float>(i) * 0.5f - 1.0f;
  for (int i = 0; i < 24; ++i) cube[i] = static_cast<double>(i) / 3.0;
  for (int i = 0; i < 6; ++i) w[i] = static_cast<float>(i * i) / 7.0f;
  for (int i = 0; i < 10; ++i) mask[i] = i % 3 == 0;
  std::vector<int64_t> v(7);
  for (int i = 0; i < 7; ++i) v[i] = (int64_t{i} - 3) * (int64_t{1} << 40) + 5;
  return {
      {"f32.matrix", from_vector(m, {2, 3})},
      {"f64.cube", from_vector(cube, {2, 3, 4}, DType::f64)},
      {"i64.vector", from_vector(v, {7})},
      {"bool.mask", bools(mask, {10})},
      {"f32.scalar", scalar_tensor(3.25)},
      {"i64.scalar", from_vector(std::vector<int64_t>{-42}, {})},
      {"f64.empty", zeros({0, 4}, DType::f64)},
      {"layer.0.weight", from_vector(w, {3, 2})},
  };
}

}  // namespace

// ------------------------------------------------------------------ round trips

TEST_CASE("safetensors: round trip of every dtype and shape, with metadata") {
  TmpDir tmp;
  Tensor base = fvec({1, 2, 3, 4, 5, 6}, {2, 3});
  nn::NamedTensors ts = {
      {"f32", fvec({1.5, -2.25, 3e30, -0.0, 1e-40, 7}, {2, 3})},
      {"f64", fvec({1.0 / 3.0, -1e300, 5e-324, 0.1}, {4}, DType::f64)},
      {"i64", from_vector(std::vector<int64_t>{INT64_MIN, INT64_MAX, -1, 0, 1, 42, 1 << 30, 7},
                          {2, 2, 2})},
      {"bool", bools({1, 0, 0, 1, 1}, {5})},
      {"scalar.f32", scalar_tensor(-7.5)},
      {"scalar.i64", from_vector(std::vector<int64_t>{123456789012345}, {})},
      {"scalar.bool", bools({1}, {})},
      {"empty.f32", zeros({0}, DType::f32)},
      {"empty.f64", zeros({3, 0, 2}, DType::f64)},
      {"empty.bool", bools({}, {0, 5})},
      {"rank8", fvec({1, 2, 3, 4, 5, 6, 7, 8}, {1, 2, 1, 2, 1, 1, 2, 1})},
      {"transposed", base.t()},  // non-contiguous: saved in row-major order of the view
      {"sliced", base.slice(1, 1, 3)},
      {"row", base.select(0, 1)},  // contiguous, at a storage offset
      {"unicode.名前", ones({2})},
  };
  std::map<std::string, std::string> meta = {
      {"format", "pt"}, {"note", "h\xC3\xA9llo \"quoted\"\n\ttab \\ slash /"}, {"empty", ""}};
  std::string path = tmp / "round.safetensors";
  nn::save_safetensors(path, ts, meta);

  auto check_file = [&](const nn::SafetensorsFile& f) {
    CHECK(f.metadata == meta);
    REQUIRE(f.tensors.size() == ts.size());
    for (auto& [n, t] : ts) {
      CAPTURE(n);
      check_same(find(f.tensors, n), t);
    }
    CHECK(find(f.tensors, "transposed").to_vector<double>() ==
          std::vector<double>{1, 4, 2, 5, 3, 6});
    CHECK(find(f.tensors, "transposed").is_contiguous());
  };
  check_file(nn::load_safetensors(path));
  Bytes b = read_bytes(path);
  check_file(nn::parse_safetensors(b.data(), b.size(), path));
  // the header length is a multiple of 8 and the header ends in space padding
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | b[i];
  CHECK(n % 8 == 0);
  // only the file itself is left: no temporary files
  CHECK(files_in(tmp.dir) == std::vector<std::string>{"round.safetensors"});

  // saving again replaces the file atomically; no metadata means no __metadata__ entry
  nn::save_safetensors(path, {{"only", ones({1})}});
  auto f2 = nn::load_safetensors(path);
  CHECK(f2.metadata.empty());
  REQUIRE(f2.tensors.size() == 1);
  Bytes b2 = read_bytes(path);
  CHECK(std::string(b2.begin() + 8, b2.end()).find("__metadata__") == std::string::npos);
}

TEST_CASE("safetensors: an empty file (no tensors) round trips") {
  TmpDir tmp;
  std::string path = tmp / "empty.safetensors";
  nn::save_safetensors(path, {});
  Bytes b = read_bytes(path);
  CHECK(b == make_file("{}      ", {}));
  auto f = nn::load_safetensors(path);
  CHECK(f.tensors.empty());
  CHECK(f.metadata.empty());
}

TEST_CASE("safetensors: exact bytes of a tiny file (layout of the reference writer)") {
  TmpDir tmp;
  std::string path = tmp / "tiny.safetensors";
  // written in an order the writer must change: by dtype (I64, F64, F32, BOOL), then by name
  nn::save_safetensors(path,
                       {{"mask", bools({1, 0, 1}, {3})},
                        {"b", fvec({1, 2}, {2})},
                        {"a", from_vector(std::vector<int64_t>{7}, {})},
                        {"c", fvec({-1, 0.5}, {1, 2})}},
                       {{"zz", "1"}, {"k", "v"}});
  std::string header =
      R"({"__metadata__":{"k":"v","zz":"1"},)"
      R"("a":{"dtype":"I64","shape":[],"data_offsets":[0,8]},)"
      R"("b":{"dtype":"F32","shape":[2],"data_offsets":[8,16]},)"
      R"("c":{"dtype":"F32","shape":[1,2],"data_offsets":[16,24]},)"
      R"("mask":{"dtype":"BOOL","shape":[3],"data_offsets":[24,27]}})";
  REQUIRE(header.size() == 257);
  header += std::string(7, ' ');  // padded to 264 = 33 * 8
  Bytes data = {7, 0, 0, 0, 0, 0, 0, 0,            // a = 7 (I64)
                0, 0, 0x80, 0x3F, 0, 0, 0, 0x40,   // b = 1.0f, 2.0f
                0, 0, 0x80, 0xBF, 0, 0, 0, 0x3F,   // c = -1.0f, 0.5f
                1, 0, 1};                          // mask
  Bytes expected = make_file(header, data);
  CHECK(expected[0] == 264 - 256);
  CHECK(expected[1] == 1);
  CHECK(read_bytes(path) == expected);
  // data-section order on reading
  auto f = nn::load_safetensors(path);
  REQUIRE(f.tensors.size() == 4);
  CHECK(f.tensors[0].first == "a");
  CHECK(f.tensors[3].first == "mask");
}

TEST_CASE("safetensors: a header already a multiple of 8 bytes gets no padding") {
  // The format pads the JSON header with spaces up to the next multiple of 8 bytes, so a
  // header whose length is already a multiple of 8 gets no padding at all. The bytes below
  // are built from that definition, not by our writer.
  TmpDir tmp;
  std::string path = tmp / "aligned.safetensors";
  nn::save_safetensors(path, {{"tab", fvec({1.5}, {1})}});
  const std::string header = R"({"tab":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})";
  REQUIRE(header.size() == 56);  // 7 * 8: aligned as it is
  Bytes expected = {56, 0, 0, 0, 0, 0, 0, 0};  // u64 little-endian header length
  expected.insert(expected.end(), header.begin(), header.end());
  for (uint8_t b : {0x00, 0x00, 0xC0, 0x3F}) expected.push_back(b);  // 1.5f little-endian
  CHECK(read_bytes(path) == expected);
  // every residue of the header length modulo 8 pads to the next multiple, never beyond it
  for (size_t len = 1; len <= 16; ++len) {
    const std::string name(len, 'n');
    nn::save_safetensors(path, {{name, fvec({1.5}, {1})}});
    const Bytes b = read_bytes(path);
    const size_t raw = header.size() - 3 + len;  // the same JSON with a longer name
    const size_t padded = (raw + 7) / 8 * 8;
    CAPTURE(len);
    REQUIRE(b.size() == 8 + padded + 4);
    CHECK(b[0] == padded);
    CHECK(std::string(b.begin() + 8 + raw, b.begin() + 8 + padded) ==
          std::string(padded - raw, ' '));
  }
}

TEST_CASE("safetensors: bool bytes are written as 0/1 whatever the memory holds") {
  // Any non-zero byte is `true` in memory, but the format (and our reader) allow only 0 and 1.
  TmpDir tmp;
  Tensor t = zeros({4}, DType::b8);
  auto* p = static_cast<uint8_t*>(t.kview().data);
  p[1] = 2;
  p[2] = 0xFF;
  p[3] = 1;
  std::string path = tmp / "bools.safetensors";
  nn::save_safetensors(path, {{"m", t}});
  const Bytes b = read_bytes(path);
  REQUIRE(b.size() >= 4);
  CHECK(Bytes(b.end() - 4, b.end()) == Bytes{0, 1, 1, 1});
  auto f = nn::load_safetensors(path);  // and it reads back
  REQUIRE(f.tensors.size() == 1);
  CHECK(f.tensors[0].second.to_vector<double>() == std::vector<double>{0, 1, 1, 1});
}

// ------------------------------------------------------------------ errors

TEST_CASE("safetensors: truncated files and bad header lengths") {
  TmpDir tmp;
  CHECK_PARSE_ERROR(Bytes{}, "too short");
  CHECK_PARSE_ERROR(Bytes({1, 0, 0}), "file is 3 bytes, too short");
  std::string path = tmp / "ok.safetensors";
  nn::save_safetensors(path, {{"w", fvec({1, 2, 3, 4}, {4})}});
  Bytes good = read_bytes(path);
  // cut inside the data section: the tensor now runs past its end
  Bytes cut(good.begin(), good.end() - 1);
  CHECK_PARSE_ERROR(cut, "tensor 'w' data_offsets [0, 16] exceed the data section (15 bytes)");
  // cut inside the header
  Bytes cut2(good.begin(), good.begin() + 20);
  CHECK_PARSE_ERROR(cut2, "exceeds the file size");
  // absurd header lengths
  CHECK_PARSE_ERROR(make_file("{}", {}, uint64_t{1} << 63), "header length 9223372036854775808");
  CHECK_PARSE_ERROR(make_file("{}", {}, ~uint64_t{0}), "exceeds the file size");
  CHECK_PARSE_ERROR(make_file("", {}), "not valid JSON");
  // a header over the 100 MB limit, in a (sparse) file big enough to hold it
  {
    std::string big = tmp / "big.safetensors";
    Bytes head = make_file("{", {}, 100'000'008);
    write_bytes(big, head);
    REQUIRE(::truncate(big.c_str(), 100'000'100) == 0);
    std::string msg;
    try {
      nn::load_safetensors(big);
    } catch (const Error& e) {
      msg = e.what();
    }
    CHECK_MESSAGE(msg.find("exceeds the limit of 100000000 bytes") != std::string::npos, msg);
  }
  // missing file: strerror in the message
  std::string msg;
  try {
    nn::load_safetensors(tmp / "nope.safetensors");
  } catch (const Error& e) {
    msg = e.what();
  }
  CHECK(msg.find("No such file or directory") != std::string::npos);
}

TEST_CASE("safetensors: bad JSON and bad header structure") {
  TmpDir tmp;
  check_bad_files(tmp, {
      {R"({"a": )", {}, "not valid JSON"},
      {std::string("{}\0\0", 4), {}, "not valid JSON"},
      {R"([1, 2])", {}, "header is a JSON array, expected an object"},
      {R"({"w": 5})", {}, "tensor 'w': header entry is a JSON number"},
      {R"({"w": {"shape": [1], "data_offsets": [0, 4]}})", Bytes(4), "tensor 'w' has no dtype"},
      {R"({"w": {"dtype": "F32", "data_offsets": [0, 4]}})", Bytes(4), "tensor 'w' has no shape"},
      {R"({"w": {"dtype": "F32", "shape": [1]}})", Bytes(4), "tensor 'w' has no data_offsets"},
      {R"({"w": {"dtype": 3, "shape": [1], "data_offsets": [0, 4]}})", Bytes(4),
       "dtype is a JSON number, expected a string"},
      {R"({"w": {"dtype": "F32", "shape": 1, "data_offsets": [0, 4]}})", Bytes(4),
       "shape is a JSON number, expected an array"},
      {w_tensor("F32", "[1]", "[4]"), Bytes(4),
       "data_offsets must be two non-negative integers"},
      {w_tensor("F32", "[1]", "[0, 4.0]"), Bytes(4),
       "data_offsets must be two non-negative integers"},
      {w_tensor("F32", "[1]", "[-4, 0]"), Bytes(4),
       "data_offsets must be two non-negative integers"},
      {w_tensor("F32", "[1]", "[4, 0]"), Bytes(4), "data_offsets [4, 0] end before they begin"},
      {R"({"__metadata__": ["x"]})", {},
       "__metadata__ is a JSON array, expected an object of strings"},
      {R"({"__metadata__": {"epoch": 3}})", {},
       "__metadata__ key 'epoch' is a JSON number, expected a string"},
      {R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},)"
       R"( "w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}})",
       Bytes(4), "has the key 'w' twice"},
      {std::string(10000, '[') + std::string(10000, ']'), {}, "nests deeper than"},
      {"{\"a\xff\": 1}", {}, "not valid JSON"},
  });
}

TEST_CASE("safetensors: offsets out of range, overlapping, gaps, wrong byte size") {
  TmpDir tmp;
  check_bad_files(tmp, {
      {R"({"fc1.weight": {"dtype": "F32", "shape": [25], "data_offsets": [0, 100]}})", Bytes(64),
       "bad.safetensors: tensor 'fc1.weight' data_offsets [0, 100] exceed the data section (64 "
       "bytes)"},
      {R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},)"
       R"( "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}})",
       Bytes(12), "tensor 'b' data_offsets [4, 12] overlap tensor 'a' [0, 8]"},
      {R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},)"
       R"( "b": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}})",
       Bytes(8), "overlap"},
      {R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},)"
       R"( "b": {"dtype": "F32", "shape": [1], "data_offsets": [8, 12]}})",
       Bytes(12), "tensor 'b' data_offsets [8, 12] leave a gap: bytes [4, 8)"},
      {R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}})", Bytes(9),
       "the data section has 9 bytes but the tensors cover only 4"},
      {w_tensor("F32", "[2, 3]", "[0, 20]"), Bytes(20),
       "tensor 'w' data_offsets [0, 20] hold 20 bytes, but shape [2, 3] of F32 needs 24 bytes"},
      {w_tensor("BOOL", "[3]", "[0, 3]"), Bytes{1, 2, 0}, "tensor 'w' is BOOL but byte 1 holds 2"},
  });
  // empty tensors take no bytes and may sit anywhere in range
  Bytes ok = make_file(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},)"
                       R"( "e": {"dtype": "F64", "shape": [0, 3], "data_offsets": [2, 2]}})",
                       Bytes(4));
  auto f = nn::parse_safetensors(ok.data(), ok.size(), "ok");
  CHECK(f.tensors.size() == 2);
}

TEST_CASE("safetensors: unknown and unsupported dtypes, huge and bad shapes") {
  TmpDir tmp;
  // (BF16, F16 and the narrow integers are converted on load: tests/nn/test_safetensors_hub.cpp)
  check_bad_files(tmp, {
      {w_tensor("Q8", "[1]", "[0, 1]"), Bytes(1), "tensor 'w' has unknown dtype 'Q8'"},
      {w_tensor("U16", "[2]", "[0, 4]"), Bytes(4),
       "tensor 'w' has dtype U16, which graft does not read"},
      {w_tensor("F8_E5M2", "[2]", "[0, 2]"), Bytes(2), "dtype F8_E5M2"},
      {w_tensor("F32", "[1,1,1,1,1,1,1,1,1]", "[0, 4]"), Bytes(4),
       "tensor 'w' has rank 9, graft supports at most 8 dims"},
      {w_tensor("F32", "[4294967296, 4294967296, 16]", "[0, 0]"), {}, "is too large"},
      {w_tensor("F64", "[4611686018427387904]", "[0, 0]"), {}, "is too large"},
      // an empty tensor with absurd other dims would overflow its strides: also too large
      {w_tensor("F32", "[0, 4611686018427387904, 4]", "[0, 0]"), {}, "is too large"},
      {w_tensor("F32", "[18446744073709551615]", "[0, 0]"), {}, "is too large"},
      {w_tensor("F32", "[1e30]", "[0, 0]"), {}, "must hold non-negative integers"},
      {w_tensor("F32", "[2, -1]", "[0, 0]"), {}, "shape [2,-1] must hold non-negative integers"},
  });
}

TEST_CASE("safetensors: save errors leave no file behind") {
  TmpDir tmp;
  std::string path = tmp / "s.safetensors";
  auto msg_of = [](auto&& fn) {
    try {
      fn();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  CHECK(msg_of([&] { nn::save_safetensors(path, {{"a", ones({1})}, {"a", ones({2})}}); })
            .find("tensor name 'a' appears twice") != std::string::npos);
  CHECK(msg_of([&] { nn::save_safetensors(path, {{"__metadata__", ones({1})}}); })
            .find("reserved") != std::string::npos);
  CHECK(msg_of([&] { nn::save_safetensors(path, {{"a", Tensor()}}); }).find("undefined") !=
        std::string::npos);
  CHECK(msg_of([&] { nn::save_safetensors(path, {{"bad\xff", ones({1})}}); })
            .find("not valid UTF-8") != std::string::npos);
  CHECK(msg_of([&] { nn::save_safetensors(tmp / "no/such/dir/x.safetensors", {}); })
            .find("No such file or directory") != std::string::npos);
  CHECK(files_in(tmp.dir).empty());
}

// ------------------------------------------------------------------ models

TEST_CASE("safetensors: load_into copies values, and a failed load leaves the model unchanged") {
  TmpDir tmp;
  Tiny src;
  {
    NoGradGuard ng;
    src.weight.mul_(10.0);
    src.bias.fill_(0.5);
  }
  std::string good = tmp / "good.safetensors";
  nn::save_safetensors(good, src.state_dict());

  Tiny m;
  const auto w0 = m.weight.to_vector<float>(), b0 = m.bias.to_vector<float>();
  auto unchanged = [&] {
    CHECK(m.weight.to_vector<float>() == w0);
    CHECK(m.bias.to_vector<float>() == b0);
  };
  auto fails = [&](const std::string& path, const std::string& needle, bool strict = true) {
    std::string msg;
    try {
      nn::load_into(m, path, strict);
    } catch (const Error& e) {
      msg = e.what();
    }
    CHECK_MESSAGE(msg.find(needle) != std::string::npos, "expected '", needle, "' in '", msg, "'");
    unchanged();
  };

  // a corrupt data section in the second tensor: nothing is copied, not even the first
  Bytes b = read_bytes(good);
  std::string corrupt = tmp / "corrupt.safetensors";
  write_bytes(corrupt, Bytes(b.begin(), b.end() - 2));
  fails(corrupt, "exceed the data section");
  // a shape mismatch for one key
  std::string wrong_shape = tmp / "shape.safetensors";
  nn::save_safetensors(wrong_shape, {{"weight", ones({2, 3})}, {"bias", ones({4})}});
  fails(wrong_shape, "'bias' has shape [4] in the checkpoint but [3] in the model");
  // a missing key (strict) and an unexpected one
  std::string missing = tmp / "missing.safetensors";
  nn::save_safetensors(missing, {{"weight", ones({2, 3})}});
  fails(missing, "missing keys [bias]");
  // int64 into a float parameter
  std::string ints = tmp / "ints.safetensors";
  nn::save_safetensors(ints, {{"weight", ones({2, 3}, DType::i64)}, {"bias", ones({3})}});
  fails(ints, "tensor 'weight' is int64 in the file but float32 in the model");
  fails(tmp / "absent.safetensors", "No such file or directory");

  // non-strict: only the keys present are loaded
  nn::load_into(m, missing, /*strict=*/false);
  CHECK(m.weight.to_vector<float>() == std::vector<float>(6, 1.0f));
  CHECK(m.bias.to_vector<float>() == b0);

  // the good file loads; a float64 checkpoint converts to the model's float32
  Tensor w_handle = m.weight;
  nn::load_into(m, good);
  CHECK(m.weight.to_vector<float>() == src.weight.to_vector<float>());
  CHECK(m.bias.to_vector<float>() == src.bias.to_vector<float>());
  CHECK(m.weight.same(w_handle));
  std::string f64 = tmp / "f64.safetensors";
  nn::save_safetensors(f64, {{"weight", fvec({.5, 1.5, 2.5, 3.5, 4.5, 5.5}, {2, 3},
                                                    DType::f64)},
                             {"bias", fvec({1, 2, 3}, {3}, DType::f64)}});
  nn::load_into(m, f64);
  CHECK(m.weight.dtype() == DType::f32);
  CHECK(m.weight.to_vector<float>() == std::vector<float>{.5f, 1.5f, 2.5f, 3.5f, 4.5f, 5.5f});
}

// ------------------------------------------------------------------ atomic writes

TEST_CASE("safetensors: a save killed mid-write leaves the previous file intact") {
  TmpDir tmp;
  std::string path = tmp / "ckpt.safetensors";
  nn::NamedTensors original = {{"w", fvec({1, 2, 3}, {3})}, {"step", scalar_tensor(7)}};
  nn::save_safetensors(path, original, {{"epoch", "1"}});
  const Bytes original_bytes = read_bytes(path);
  // 64 MB of state, made before the fork so the child starts writing at once
  nn::NamedTensors big = {{"w", zeros({16 * 1024 * 1024})}, {"step", scalar_tensor(8)}};

  bool killed_mid_write = false;
  for (int attempt = 0; attempt < 5 && !killed_mid_write; ++attempt) {
    pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      try {
        nn::save_safetensors(path, big, {{"epoch", "2"}});
      } catch (...) {
      }
      ::_exit(0);
    }
    // wait until the child has written at least 1 MB of its temporary file, then kill it
    std::string tmp_path = fmt::format("{}.tmp.{}", path, pid);
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (std::chrono::steady_clock::now() < deadline) {
      struct stat st {};
      if (::stat(tmp_path.c_str(), &st) == 0 && st.st_size >= (1 << 20)) break;
      int status = 0;
      if (::waitpid(pid, &status, WNOHANG) == pid) break;  // finished before we saw it
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
    ::kill(pid, SIGKILL);
    int status = 0;
    ::waitpid(pid, &status, 0);
    // The temporary file still exists iff the writer died before its rename.
    if (WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL && fs::exists(tmp_path)) {
      killed_mid_write = true;
      CHECK(read_bytes(path) == original_bytes);
      auto f = nn::load_safetensors(path);
      CHECK(f.metadata.at("epoch") == "1");
      check_same(find(f.tensors, "w"), original[0].second);
      check_same(find(f.tensors, "step"), original[1].second);
      fs::remove(tmp_path);
    } else {
      MESSAGE("the writer finished before it could be killed; retrying");
      write_bytes(path, original_bytes);
    }
  }
  CHECK(killed_mid_write);
  // a later save still works and replaces the file whole
  nn::save_safetensors(path, big, {{"epoch", "2"}});
  auto f = nn::load_safetensors(path);
  CHECK(f.metadata.at("epoch") == "2");
  CHECK(find(f.tensors, "w").numel() == 16 * 1024 * 1024);
}

// ------------------------------------------------------------------ PyTorch interop

TEST_CASE("safetensors: reads a file written by PyTorch (torch_written fixture)") {
  std::string path = std::string(GRAFT_FIXTURES) + "/torch_written.safetensors";
  auto f = nn::load_safetensors(path);
  CHECK(f.metadata.at("format") == "pt");
  CHECK(f.metadata.at("producer") == "make_safetensors_fixtures.py");
  auto want = fixture_tensors();
  CHECK(f.tensors.size() == want.size());
  for (auto& [n, t] : want) {
    CAPTURE(n);
    check_same(find(f.tensors, n), t);
  }
  // spot checks of the formulas, independent of fixture_tensors()
  CHECK(find(f.tensors, "i64.vector").to_vector<int64_t>()[0] == -3 * (int64_t{1} << 40) + 5);
  CHECK(find(f.tensors, "f32.matrix").to_vector<float>()[5] == 1.5f);
  CHECK(find(f.tensors, "bool.mask").to_vector<double>()[3] == 1.0);
  CHECK(find(f.tensors, "f64.empty").shape() == Shape{0, 4});
  CHECK(find(f.tensors, "f32.scalar").dim() == 0);
}

TEST_CASE("safetensors: graft's bytes match the graft_written fixture (checked by PyTorch)") {
  std::string fixture = std::string(GRAFT_FIXTURES) + "/graft_written.safetensors";
  if (const char* w = std::getenv("GRAFT_WRITE_FIXTURES"); w && *w) {
    nn::save_safetensors(fixture, fixture_tensors(), {{"format", "pt"}});
    MESSAGE("wrote ", fixture);
  }
  TmpDir tmp;
  std::string path = tmp / "graft_written.safetensors";
  nn::save_safetensors(path, fixture_tensors(), {{"format", "pt"}});
  CHECK(read_bytes(path) == read_bytes(fixture));
}
