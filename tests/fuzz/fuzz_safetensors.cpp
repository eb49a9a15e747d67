// libFuzzer target for the safetensors reader (nn::parse_safetensors, with the dtypes converted
// on load: BF16, F16, I32, I16, I8, U8) and for the sharded index (nn::parse_safetensors_index,
// then nn::merge_safetensors_shards against shards that hold nothing, which must refuse any
// weight_map entry). Any input must either parse or raise graft::Error; a crash, a sanitizer report, a hang or any other exception
// (std::bad_alloc, graft::InternalError, nlohmann's exceptions) is a bug.
//
//   tests/fuzz/run.sh 60        # build with clang (ASan + UBSan) and fuzz for 60 s
//
// or by hand (see tests/fuzz/meson.build for the setup line):
//   build-fuzz/tests/fuzz/fuzz_safetensors -dict=tests/fuzz/safetensors.dict \
//       -max_total_time=60 /tmp/corpus tests/fuzz/corpus
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "nn/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    graft::nn::SafetensorsFile f = graft::nn::parse_safetensors(data, size, "fuzz");
    // Read every byte of every tensor, so that a storage smaller than its shape says shows up
    // under ASan, and check that the tensors' bytes fit in the input.
    size_t total = 0;
    unsigned sum = 0;
    for (const auto& [name, t] : f.tensors) {
      size_t nbytes = static_cast<size_t>(t.numel()) * graft::dtype_size(t.dtype());
      const auto* p = static_cast<const uint8_t*>(t.storage()->data());
      for (size_t i = 0; i < nbytes; ++i) sum += p[i];
      total += nbytes;
    }
    if (total > size) __builtin_trap();
    volatile unsigned sink = sum;
    (void)sink;
  } catch (const graft::Error&) {
  }
  try {
    const graft::nn::SafetensorsIndex idx = graft::nn::parse_safetensors_index(
        std::string(reinterpret_cast<const char*>(data), size), "fuzz");
    std::vector<graft::nn::SafetensorsFile> empty(idx.shards.size());
    graft::nn::SafetensorsFile f = graft::nn::merge_safetensors_shards(idx, std::move(empty), "fuzz");
    if (!idx.weight_map.empty() || !f.tensors.empty()) __builtin_trap();  // must have refused
  } catch (const graft::Error&) {
  }
  return 0;
}
