// safetensors checkpoints: read and write the format that PyTorch and Hugging Face use.
//
// A file is: an 8-byte little-endian u64 N, then N bytes of UTF-8 JSON (padded with spaces),
// then the data section, all tensors packed back to back in little-endian order:
//
//   {"__metadata__": {"format": "pt"},
//    "fc1.weight": {"dtype": "F32", "shape": [64, 2], "data_offsets": [0, 512]}, ...}
//
// data_offsets are [begin, end) byte offsets into the data section. graft reads and writes
// F32, F64, I64 and BOOL; other dtypes (F16, BF16, I32, ...) are rejected with an error that
// names them.
//
// Writes are atomic: the file is written to `path.tmp.<pid>`, flushed to disk, then renamed
// over `path`, so a crash leaves either the old file or the new one, never a mix.
// Reads validate the whole header (dtypes, shapes, offsets, sizes, overlaps) before creating
// any tensor; a bad file raises graft::Error naming the file, the tensor and the problem.
//
//   nn::save_safetensors("model.safetensors", model.state_dict(), {{"format", "pt"}});
//   nn::load_into(model, "model.safetensors");            // validates, then copies
//   auto f = nn::load_safetensors("model.safetensors");   // f.tensors, f.metadata
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>

#include "nn/module.h"

namespace graft::nn {

struct SafetensorsFile {
  NamedTensors tensors;  // in data-section order (the order the writer laid them out)
  std::map<std::string, std::string> metadata;
};

// Writes `tensors` (unique names; any device, any strides) and string `metadata` to `path`,
// atomically. Layout matches the reference writer (the `safetensors` Python/Rust library):
// tensors sorted by dtype (I64, F64, F32, BOOL) then by name, metadata first and sorted by key,
// header padded with spaces to a multiple of 8 bytes. Throws graft::Error on any failure, and
// then leaves `path` as it was.
void save_safetensors(const std::string& path, const NamedTensors& tensors,
                      const std::map<std::string, std::string>& metadata = {});

// Reads and validates a whole file (see parse_safetensors).
SafetensorsFile load_safetensors(const std::string& path);

// Parses a safetensors image held in memory. `what` names it in error messages (the path).
// Validates everything before creating tensors; never reads outside [data, data + size).
SafetensorsFile parse_safetensors(const uint8_t* data, size_t size, const std::string& what);

// Loads `path` fully, then m.load_state_dict(tensors, strict) (which validates before changing
// anything). Floating tensors are converted to the model's floating dtype (a float64
// checkpoint loads into a float32 model); other dtype mismatches are errors. On any error the
// model is unchanged.
void load_into(Module& m, const std::string& path, bool strict = true);

}  // namespace graft::nn
