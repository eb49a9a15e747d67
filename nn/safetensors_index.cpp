// Sharded safetensors checkpoints: model.safetensors.index.json and its shards, read as one
// checkpoint (nn/safetensors.h). The index is validated before any shard is opened, and the
// shards against the index before anything is returned.
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "nn/safetensors.h"
#include "nn/safetensors_json.h"

namespace graft::nn {

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using detail::shown_name;

constexpr size_t kMaxIndexBytes = 100'000'000;  // a 100k-tensor index is a few MB

// A shard name must stay inside the index's directory: relative, no "..", no NUL.
void check_shard_name(const std::string& tensor, const std::string& shard,
                      const std::string& what) {
  GRAFT_CHECK(!shard.empty(), "{}: weight_map gives tensor '{}' an empty shard name", what,
              shown_name(tensor));
  GRAFT_CHECK(shard.find('\0') == std::string::npos && shard.front() != '/',
              "{}: weight_map gives tensor '{}' the shard '{}', which is not a relative file "
              "name", what, shown_name(tensor), shown_name(shard));
  for (const auto& part : fs::path(shard))
    GRAFT_CHECK(part != "..", "{}: weight_map gives tensor '{}' the shard '{}', which leaves "
                "the index's directory", what, shown_name(tensor), shown_name(shard));
}

}  // namespace

SafetensorsIndex parse_safetensors_index(const std::string& text, const std::string& what) {
  GRAFT_CHECK(text.find('\0') == std::string::npos,
              "{}: safetensors index is not valid JSON: it holds a NUL byte", what);
  const json root =
      detail::parse_json_strict(text.data(), text.data() + text.size(), what, "safetensors index");
  GRAFT_CHECK(root.is_object(), "{}: safetensors index is a JSON {}, expected an object with a "
              "weight_map", what, root.type_name());
  auto wm = root.find("weight_map");
  GRAFT_CHECK(wm != root.end(), "{}: safetensors index has no weight_map; hint: it is the "
              "model.safetensors.index.json that save_pretrained writes next to the shards", what);
  GRAFT_CHECK(wm->is_object(), "{}: weight_map is a JSON {}, expected an object of tensor name "
              "-> shard file", what, wm->type_name());
  if (auto md = root.find("metadata"); md != root.end())
    GRAFT_CHECK(md->is_object() || md->is_null(), "{}: metadata is a JSON {}, expected an "
                "object", what, md->type_name());
  SafetensorsIndex idx;
  std::set<std::string> shards;
  for (auto it = wm->begin(); it != wm->end(); ++it) {
    GRAFT_CHECK(it->is_string(), "{}: weight_map gives tensor '{}' a JSON {}, expected a shard "
                "file name", what, shown_name(it.key()), it->type_name());
    const std::string& shard = it->get_ref<const std::string&>();
    check_shard_name(it.key(), shard, what);
    idx.weight_map.emplace(it.key(), shard);
    shards.insert(shard);
  }
  idx.shards.assign(shards.begin(), shards.end());
  return idx;
}

SafetensorsFile merge_safetensors_shards(const SafetensorsIndex& index,
                                         std::vector<SafetensorsFile> shards,
                                         const std::string& what) {
  GRAFT_CHECK(shards.size() == index.shards.size(), "{}: {} shards given for an index of {}",
              what, shards.size(), index.shards.size());
  std::map<std::string, std::string> found;  // tensor -> the shard that holds it
  for (size_t s = 0; s < shards.size(); ++s) {
    const std::string& shard = index.shards[s];
    for (const auto& [name, t] : shards[s].tensors) {
      auto [at, fresh] = found.emplace(name, shard);
      GRAFT_CHECK(fresh, "{}: tensor '{}' is in two shards, {} and {}", what, shown_name(name),
                  at->second, shard);
      auto w = index.weight_map.find(name);
      GRAFT_CHECK(w != index.weight_map.end(), "{}: shard {} holds tensor '{}', which the "
                  "weight_map does not name", what, shard, shown_name(name));
      GRAFT_CHECK(w->second == shard, "{}: the weight_map puts tensor '{}' in {}, but it is in "
                  "{}", what, shown_name(name), w->second, shard);
    }
  }
  for (const auto& [name, shard] : index.weight_map)
    GRAFT_CHECK(found.count(name), "{}: the weight_map puts tensor '{}' in {}, which does not "
                "hold it", what, shown_name(name), shard);
  SafetensorsFile out;
  for (SafetensorsFile& f : shards) {
    for (auto& nt : f.tensors) out.tensors.push_back(std::move(nt));
    for (auto& [k, v] : f.metadata) out.metadata.emplace(k, v);
    out.stored_dtypes.merge(f.stored_dtypes);
  }
  return out;
}

SafetensorsFile load_safetensors_index(const std::string& index_path) {
  std::ifstream in(index_path, std::ios::binary);
  GRAFT_CHECK(bool(in), "{}: cannot open the safetensors index", index_path);
  in.seekg(0, std::ios::end);
  const auto size = in.tellg();
  GRAFT_CHECK(size >= 0 && size_t(size) <= kMaxIndexBytes, "{}: safetensors index is {} bytes, "
              "more than the limit of {}", index_path, static_cast<long long>(size),
              kMaxIndexBytes);
  in.seekg(0);
  std::ostringstream text;
  text << in.rdbuf();
  const SafetensorsIndex idx = parse_safetensors_index(text.str(), index_path);
  const fs::path dir = fs::path(index_path).parent_path();
  std::vector<SafetensorsFile> shards;
  shards.reserve(idx.shards.size());
  for (const std::string& shard : idx.shards) {
    const fs::path p = dir / shard;
    std::error_code ec;
    if (!fs::exists(p, ec)) {
      size_t n = 0;
      std::string example;
      for (const auto& [name, s] : idx.weight_map)
        if (s == shard && n++ == 0) example = name;
      throw Error(fmt::format("{}: shard {} is missing (the weight_map puts {} tensor(s) there, "
                              "e.g. '{}'); hint: download every file the index names",
                              index_path, p.string(), n, shown_name(example)));
    }
    shards.push_back(load_safetensors(p.string()));
  }
  return merge_safetensors_shards(idx, std::move(shards), index_path);
}

SafetensorsFile load_checkpoint(const std::string& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    const fs::path single = fs::path(path) / "model.safetensors";
    const fs::path index = fs::path(path) / "model.safetensors.index.json";
    if (fs::exists(single, ec)) return load_safetensors(single.string());
    if (fs::exists(index, ec)) return load_safetensors_index(index.string());
    throw Error(fmt::format("{}: no model.safetensors or model.safetensors.index.json in this "
                            "directory", path));
  }
  const std::string suffix = ".index.json";
  if (path.size() >= suffix.size() &&
      path.compare(path.size() - suffix.size(), suffix.size(), suffix) == 0)
    return load_safetensors_index(path);
  return load_safetensors(path);
}

}  // namespace graft::nn
