#include "models/decoding.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "data/text_io.h"
#include "nn/module.h"
#include "nn/safetensors.h"
#include "ops/error.h"

namespace graft::models {

namespace {
constexpr double kNegInf = -std::numeric_limits<double>::infinity();

void check_options(const DecodeOptions& o, int64_t batch, const char* op) {
  GRAFT_CHECK(batch >= 1, "{}: batch must be >= 1, got {}", op, batch);
  GRAFT_CHECK(o.beam >= 1, "{}: beam must be >= 1, got {}", op, o.beam);
  GRAFT_CHECK(o.max_len >= 0 && o.max_len <= kMaxDecodeLen, "{}: max_len must be in [0, {}], got "
              "{}", op, kMaxDecodeLen, o.max_len);
  GRAFT_CHECK(std::isfinite(o.length_penalty) && o.length_penalty >= 0,
              "{}: length_penalty must be a finite number >= 0, got {}", op, o.length_penalty);
}

// The step's log-probabilities as doubles, checked to be [N, V].
std::vector<double> step_logp(IncrementalDecoder& dec, const std::vector<int64_t>& prev,
                              int64_t& V, const char* op) {
  const int64_t N = int64_t(prev.size());
  Tensor lp = dec.step(from_vector(prev, {N}));
  GRAFT_CHECK(lp.defined() && lp.dim() == 2 && lp.size(0) == N && lp.size(1) >= 1,
              "{}: the decoder's step must return log-probabilities [N={}, V], got {}", op, N,
              lp.defined() ? lp.shape().str() : "undefined");
  V = lp.size(1);
  std::vector<double> out = lp.to_vector<double>();
  // NaN (from non-finite weights) would break the orderings below (undefined behaviour in
  // the sorts); as -inf such a token is simply never chosen over a finite one.
  for (double& x : out)
    if (std::isnan(x)) x = kNegInf;
  return out;
}
}  // namespace

double normalized_score(double logp, int64_t len, double alpha) {
  if (alpha == 0 || len <= 0) return logp;
  return logp / std::pow(double(len), alpha);
}

// Rows are dropped from the decoder once at most this fraction of them is still needed (so a
// batch whose last sentence runs long does not keep stepping the finished ones; each drop is
// one full reorder, and the fraction bounds how many there are).
constexpr double kCompactBelow = 0.75;

std::vector<Hypothesis> greedy_decode(IncrementalDecoder& dec, int64_t batch,
                                      const DecodeOptions& opt) {
  check_options(opt, batch, "greedy_decode");
  std::vector<Hypothesis> out(static_cast<size_t>(batch));
  std::vector<int64_t> rows(static_cast<size_t>(batch));  // the sentence of each decoder row
  for (int64_t b = 0; b < batch; ++b) rows[size_t(b)] = b;
  std::vector<int64_t> prev(static_cast<size_t>(batch), opt.bos);
  int64_t live = batch;
  for (int64_t t = 0; t < opt.max_len && live > 0; ++t) {
    if (double(live) <= kCompactBelow * double(rows.size())) {  // drop the finished rows
      std::vector<int64_t> keep, kept_rows, kept_prev;
      for (size_t r = 0; r < rows.size(); ++r)
        if (!out[size_t(rows[r])].finished) {
          keep.push_back(int64_t(r));
          kept_rows.push_back(rows[r]);
          kept_prev.push_back(prev[r]);
        }
      dec.reorder(from_vector(keep, {int64_t(keep.size())}));
      rows = std::move(kept_rows);
      prev = std::move(kept_prev);
    }
    int64_t V = 0;
    const std::vector<double> lp = step_logp(dec, prev, V, "greedy_decode");
    for (size_t r = 0; r < rows.size(); ++r) {
      Hypothesis& h = out[size_t(rows[r])];
      if (h.finished) {
        prev[r] = opt.eos;
        continue;
      }
      const double* row = lp.data() + int64_t(r) * V;
      const int64_t best = int64_t(std::max_element(row, row + V) - row);  // first maximum
      h.logp += row[best];
      prev[r] = best;
      if (best == opt.eos) {
        h.finished = true;
        --live;
      } else {
        h.tokens.push_back(best);
      }
    }
  }
  for (Hypothesis& h : out)
    h.score = normalized_score(h.logp, int64_t(h.tokens.size()) + (h.finished ? 1 : 0),
                               opt.length_penalty);
  return out;
}

namespace {
struct Cand {
  double logp;
  int64_t row, token;
};
// The candidates' order: higher log-probability first, ties to the lower row, then token.
bool better(const Cand& a, const Cand& c) {
  if (a.logp != c.logp) return a.logp > c.logp;
  return a.row != c.row ? a.row < c.row : a.token < c.token;
}

// Appends row r's best n extensions (base + lp[v]) in `better` order to `out`. The sentence's
// best n candidates overall are among the union of its rows' best n, so beam search ranks
// K * n candidates instead of K * V.
void best_extensions(const double* lp, int64_t V, double base, int64_t r, size_t n,
                     std::vector<Cand>& top, std::vector<Cand>& out) {
  top.clear();
  for (int64_t v = 0; v < V; ++v) {
    const Cand c{base + lp[v], r, v};
    if (top.size() == n && !(c.logp > top.back().logp)) continue;  // not better than the n-th
    auto at = std::upper_bound(top.begin(), top.end(), c, better);
    if (top.size() == n) top.pop_back();
    top.insert(at, c);
  }
  out.insert(out.end(), top.begin(), top.end());
}
}  // namespace

std::vector<Hypothesis> beam_search(IncrementalDecoder& dec, int64_t batch,
                                    const DecodeOptions& opt) {
  check_options(opt, batch, "beam_search");
  const int64_t K = opt.beam;
  // The decoder holds the sentences in `act`, K rows each: row j*K + k is beam k of act[j].
  std::vector<int64_t> act(static_cast<size_t>(batch));
  for (int64_t b = 0; b < batch; ++b) act[size_t(b)] = b;
  int64_t N = batch * K;
  {  // expand: row b*K + k starts as sentence b
    std::vector<int64_t> idx(static_cast<size_t>(N));
    for (int64_t i = 0; i < N; ++i) idx[size_t(i)] = i / K;
    dec.reorder(from_vector(idx, {N}));
  }
  std::vector<double> score(static_cast<size_t>(N), kNegInf);
  for (int64_t b = 0; b < batch; ++b) score[size_t(b * K)] = 0;  // one live hypothesis at first
  std::vector<std::vector<int64_t>> hist(static_cast<size_t>(N));
  std::vector<int64_t> prev(static_cast<size_t>(N), opt.bos);
  std::vector<std::vector<Hypothesis>> finished(static_cast<size_t>(batch));
  std::vector<bool> done(static_cast<size_t>(batch), false);
  int64_t n_done = 0;

  std::vector<Cand> cands, top;
  for (int64_t t = 0; t < opt.max_len; ++t) {
    int64_t V = 0;
    const std::vector<double> lp = step_logp(dec, prev, V, "beam_search");
    std::vector<int64_t> parent(static_cast<size_t>(N)), token(size_t(N), opt.eos);
    std::vector<double> new_score(static_cast<size_t>(N), kNegInf);
    for (int64_t j = 0; j < int64_t(act.size()); ++j) {
      const int64_t b = act[size_t(j)];
      for (int64_t k = 0; k < K; ++k) parent[size_t(j * K + k)] = j * K;
      if (done[size_t(b)]) continue;
      // the best 2K candidates (enough for K live ones even if K of them end in <eos>)
      cands.clear();
      for (int64_t k = 0; k < K; ++k) {
        const int64_t r = j * K + k;
        if (score[size_t(r)] == kNegInf) continue;
        best_extensions(lp.data() + r * V, V, score[size_t(r)], r, size_t(2 * K), top, cands);
      }
      const size_t keep = std::min(cands.size(), size_t(2 * K));
      std::partial_sort(cands.begin(), cands.begin() + long(keep), cands.end(), better);
      int64_t n_live = 0;
      for (size_t i = 0; i < keep && n_live < K; ++i) {
        const Cand& c = cands[i];
        if (!std::isfinite(c.logp)) break;
        if (c.token == opt.eos) {
          if (int64_t(finished[size_t(b)].size()) < K) {
            Hypothesis h{hist[size_t(c.row)], c.logp, 0, true};
            h.score = normalized_score(h.logp, int64_t(h.tokens.size()) + 1, opt.length_penalty);
            finished[size_t(b)].push_back(std::move(h));
          }
          continue;
        }
        const int64_t r = j * K + n_live++;
        parent[size_t(r)] = c.row;
        token[size_t(r)] = c.token;
        new_score[size_t(r)] = c.logp;
      }
      if (int64_t(finished[size_t(b)].size()) >= K || n_live == 0) {
        done[size_t(b)] = true;
        ++n_done;
      }
    }
    std::vector<std::vector<int64_t>> new_hist(static_cast<size_t>(N));
    for (int64_t r = 0; r < N; ++r) {
      if (new_score[size_t(r)] == kNegInf) continue;
      new_hist[size_t(r)] = hist[size_t(parent[size_t(r)])];
      new_hist[size_t(r)].push_back(token[size_t(r)]);
    }
    hist = std::move(new_hist);
    score = std::move(new_score);
    prev = token;
    if (n_done == batch) break;
    const int64_t n_act = int64_t(act.size()) - std::count_if(act.begin(), act.end(), [&](int64_t b) {
      return bool(done[size_t(b)]);
    });
    if (double(n_act) <= kCompactBelow * double(act.size())) {  // drop the done sentences' rows
      std::vector<int64_t> idx, kept_act, kept_prev;
      std::vector<double> kept_score;
      std::vector<std::vector<int64_t>> kept_hist;
      for (int64_t j = 0; j < int64_t(act.size()); ++j) {
        if (done[size_t(act[size_t(j)])]) continue;
        kept_act.push_back(act[size_t(j)]);
        for (int64_t k = 0; k < K; ++k) {
          const int64_t r = j * K + k;
          idx.push_back(parent[size_t(r)]);  // the beams' reorder and the drop in one
          kept_prev.push_back(prev[size_t(r)]);
          kept_score.push_back(score[size_t(r)]);
          kept_hist.push_back(std::move(hist[size_t(r)]));
        }
      }
      act = std::move(kept_act);
      prev = std::move(kept_prev);
      score = std::move(kept_score);
      hist = std::move(kept_hist);
      N = int64_t(idx.size());
      dec.reorder(from_vector(idx, {N}));
    } else {
      dec.reorder_beams(from_vector(parent, {N}));
    }
  }

  std::vector<Hypothesis> out(static_cast<size_t>(batch));
  for (int64_t j = 0; j < int64_t(act.size()); ++j) {  // max_len reached: live ones compete too
    const int64_t b = act[size_t(j)];
    if (done[size_t(b)]) continue;
    for (int64_t k = 0; k < K; ++k) {
      const int64_t r = j * K + k;
      if (score[size_t(r)] == kNegInf) continue;
      Hypothesis h{hist[size_t(r)], score[size_t(r)], 0, false};
      h.score = normalized_score(h.logp, int64_t(h.tokens.size()), opt.length_penalty);
      finished[size_t(b)].push_back(std::move(h));
    }
  }
  for (int64_t b = 0; b < batch; ++b) {
    const std::vector<Hypothesis>& pool = finished[size_t(b)];
    if (pool.empty()) continue;  // max_len = 0
    out[size_t(b)] = *std::max_element(pool.begin(), pool.end(), [](const Hypothesis& a,
                                                                    const Hypothesis& c) {
      return a.score < c.score;  // first best wins ties
    });
  }
  return out;
}

void load_for_inference(nn::Module& m, const std::string& path) {
  const nn::SafetensorsFile f = nn::load_safetensors(path);
  for (const auto& [name, t] : f.tensors)
    GRAFT_CHECK(nn::all_finite(t), "{}: tensor '{}' holds NaN or infinite values, so the model "
                "cannot decode (its training diverged); hint: use an earlier checkpoint "
                "(checkpoint/step-N/model.safetensors of the run) or train again with a lower "
                "learning rate or --clip-grad-norm", path, data::printable(name));
  try {
    m.load_state_dict(f.tensors);  // validates names, shapes and dtypes before copying
  } catch (const Error& e) {
    throw Error(fmt::format("{}: {}", path, e.what()));
  }
}

}  // namespace graft::models
