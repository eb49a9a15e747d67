// safetensors checkpoints: read and write the format that PyTorch and Hugging Face use.
//
// A file is: an 8-byte little-endian u64 N, then N bytes of UTF-8 JSON (padded with spaces),
// then the data section, all tensors packed back to back in little-endian order:
//
//   {"__metadata__": {"format": "pt"},
//    "fc1.weight": {"dtype": "F32", "shape": [64, 2], "data_offsets": [0, 512]}, ...}
//
// data_offsets are [begin, end) byte offsets into the data section. graft writes F32, F64, I64
// and BOOL. It reads those as they are and converts, on load, the dtypes Hub checkpoints use
// that graft has no tensor type for:
//   BF16, F16            -> f32 (exact: every bf16 and f16 value, subnormals, infinities and
//                           NaNs included, is a float32; the bits are widened, not rounded)
//   I32, I16, I8, U8     -> i64 (sign- or zero-extended; graft's one integer dtype)
//   BOOL                 -> b8 (each byte must be 0 or 1)
// SafetensorsFile::stored_dtypes says what each tensor was in the file. Other dtypes (U16, U32,
// U64, the F8/F6/F4 formats, C64) are refused with an error that names them.
//
// Sharded checkpoints (transformers' save_pretrained above its shard size) are a JSON index,
// model.safetensors.index.json, plus the shards it names, in the same directory:
//   {"metadata": {"total_size": 123}, "weight_map": {"fc1.weight": "model-00001-of-00002.safetensors", ...}}
// load_safetensors_index reads them as one checkpoint; load_checkpoint takes a directory (either
// layout), an index or a single file.
//
// Writes are atomic: the file is written to `path.tmp.<pid>`, flushed to disk, then renamed
// over `path`, so a crash leaves either the old file or the new one, never a mix.
// Reads validate the whole header (dtypes, shapes, offsets, sizes, overlaps) before creating
// any tensor; a bad file raises graft::Error naming the file, the tensor and the problem.
//
//   nn::save_safetensors("model.safetensors", model.state_dict(), {{"format", "pt"}});
//   nn::load_into(model, "model.safetensors");            // validates, then copies
//   auto f = nn::load_safetensors("model.safetensors");   // f.tensors, f.metadata
//   auto g = nn::load_checkpoint("hf-model-dir/");        // one file or the sharded index
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "nn/module.h"

namespace graft::nn {

struct SafetensorsFile {
  NamedTensors tensors;  // in data-section order (the order the writer laid them out)
  std::map<std::string, std::string> metadata;
  std::map<std::string, std::string> stored_dtypes;  // tensor name -> dtype in the file ("BF16")
};

// A parsed model.safetensors.index.json.
struct SafetensorsIndex {
  std::map<std::string, std::string> weight_map;  // tensor name -> shard file name
  std::vector<std::string> shards;                // the distinct shard names, sorted
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

// Parses the text of an index file. graft::Error (naming `what`) for invalid JSON, a missing or
// non-object weight_map, a shard name that is not a string, is empty, absolute or climbs out of
// the directory (".."), or a tensor named twice.
SafetensorsIndex parse_safetensors_index(const std::string& json_text, const std::string& what);

// Joins loaded shards (shards[i] is the file index.shards[i]) into one checkpoint, checking that
// each tensor the weight_map names is in the shard it names, in no other shard, and that no
// shard holds a tensor the weight_map does not name. Tensors come shard by shard, each shard's
// in its data order; metadata is the union of the shards' (the first shard's value wins).
SafetensorsFile merge_safetensors_shards(const SafetensorsIndex& index,
                                         std::vector<SafetensorsFile> shards,
                                         const std::string& what);

// Reads an index file and every shard it names (paths relative to the index's directory).
// graft::Error naming the shard when one is missing or unreadable, and as merge_safetensors_shards.
SafetensorsFile load_safetensors_index(const std::string& index_path);

// A checkpoint at `path`: a directory holding model.safetensors or (else)
// model.safetensors.index.json, a path ending in ".index.json", or a single safetensors file.
SafetensorsFile load_checkpoint(const std::string& path);

}  // namespace graft::nn
