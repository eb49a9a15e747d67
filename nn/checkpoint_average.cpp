// Checkpoint averaging (nn/checkpoint_average.h).
#include "nn/checkpoint_average.h"

#include <filesystem>
#include <map>

#include "autograd/grad_mode.h"
#include "autograd/tensor.h"
#include "nn/run_files.h"
#include "nn/safetensors.h"
#include "ops/error.h"

namespace graft::nn {

namespace fs = std::filesystem;

std::vector<std::string> run_checkpoint_models(const std::string& run_dir, int64_t last) {
  GRAFT_CHECK(last >= 1, "average: the number of checkpoints must be at least 1, got {}", last);
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& [step, dir] : checkpoint_step_dirs(run_dir)) {
    if (int64_t(out.size()) == last) break;
    const fs::path model = dir / "model.safetensors";
    if (fs::is_regular_file(model, ec)) out.push_back(model.string());
  }
  GRAFT_CHECK(!out.empty(), "average: {} has no checkpoint (no {}/checkpoint/step-*/model.safetensors)",
              run_dir, run_dir);
  return out;
}

NamedTensors average_checkpoints(const std::vector<std::string>& paths) {
  GRAFT_CHECK(!paths.empty(), "average: no checkpoint files given");
  NoGradGuard no_grad;
  NamedTensors first = load_safetensors(paths[0]).tensors;
  std::vector<Tensor> sums;  // float64 running sums of the floating tensors (undefined: not averaged)
  for (const auto& [name, t] : first) sums.push_back(is_floating(t.dtype()) ? t.to(DType::f64) : Tensor());
  for (size_t f = 1; f < paths.size(); ++f) {
    const NamedTensors other = load_safetensors(paths[f]).tensors;
    GRAFT_CHECK(other.size() == first.size(), "average: {} holds {} tensors but {} holds {}", paths[f],
                other.size(), paths[0], first.size());
    std::map<std::string, size_t> index;
    for (size_t i = 0; i < other.size(); ++i) index[other[i].first] = i;
    for (size_t i = 0; i < first.size(); ++i) {
      const auto& [name, t] = first[i];
      const auto it = index.find(name);
      GRAFT_CHECK(it != index.end(), "average: {} has no tensor '{}' (which {} has): not checkpoints of one model",
                  paths[f], name, paths[0]);
      const Tensor& o = other[it->second].second;
      GRAFT_CHECK(o.shape() == t.shape() && o.dtype() == t.dtype(),
                  "average: '{}' is {} {} in {} but {} {} in {}", name, dtype_name(o.dtype()),
                  o.shape().str(), paths[f], dtype_name(t.dtype()), t.shape().str(), paths[0]);
      if (sums[i].defined())
        sums[i].add_(o.to(DType::f64));
      else
        GRAFT_CHECK(o.to_vector<int64_t>() == t.to_vector<int64_t>(),
                    "average: the integer tensor '{}' differs between {} and {}; only floating tensors "
                    "are averaged", name, paths[f], paths[0]);
    }
  }
  // mean = sum / n, back in each tensor's own dtype
  for (size_t i = 0; i < first.size(); ++i)
    if (sums[i].defined()) first[i].second = sums[i].mul_(1.0 / double(paths.size())).to(first[i].second.dtype());
  return first;
}

}  // namespace graft::nn
