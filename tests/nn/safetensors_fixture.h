// Shared by tests/nn/test_safetensors.cpp and test_safetensors_hub.cpp: safetensors images
// built byte by byte, file reads and writes, and a tensor looked up by name.
#pragma once
#include <doctest/doctest.h>

#include <cstdint>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "autograd/tensor.h"
#include "nn/safetensors.h"
#include "tests/temp_dir.h"

namespace safetensors_test {

using Bytes = std::vector<uint8_t>;

struct TmpDir : graft::test::TempDir {
  TmpDir() : graft::test::TempDir("safetensors") {}
};

inline Bytes read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE_MESSAGE(in.good(), "cannot open ", path);
  return Bytes(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

inline void write_bytes(const std::string& path, const Bytes& b) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
  REQUIRE(out.good());
}

// The image: u64 little-endian header length (the header's own, or `header_len_override` when
// not 0), the header text (unpadded), the data section.
inline Bytes make_file(const std::string& header, const Bytes& data,
                       uint64_t header_len_override = 0) {
  uint64_t n = header_len_override ? header_len_override : header.size();
  Bytes b(8);
  for (size_t i = 0; i < 8; ++i) b[i] = static_cast<uint8_t>(n >> (8 * i));
  b.insert(b.end(), header.begin(), header.end());
  b.insert(b.end(), data.begin(), data.end());
  return b;
}

inline const graft::Tensor& find(const graft::nn::NamedTensors& ts, const std::string& name) {
  for (auto& [n, t] : ts)
    if (n == name) return t;
  FAIL("no tensor named ", name);
  static graft::Tensor none;
  return none;
}

}  // namespace safetensors_test
