// graft::dist on MPI: see nn/distributed.h. Without MPI (GRAFT_HAVE_MPI == 0) every function
// is the one-rank case.
#include "nn/distributed.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdlib>

#include <fmt/format.h>

#include "graft_config.h"
#include "autograd/functions.h"
#include "ops/error.h"

#if GRAFT_HAVE_MPI
#include <mpi.h>
#endif

namespace graft::dist {

namespace {

int g_rank = 0;
int g_size = 1;
bool g_mpi = false;  // MPI initialised by this process's Session

// Started by mpirun (OpenMPI) or another PMI launcher?
bool launched_by_mpirun() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"})
    if (std::getenv(v)) return true;
  return false;
}

void check_tensor(const Tensor& t, const char* op) {
  GRAFT_CHECK(t.defined() && t.device().is_cpu() && t.is_contiguous(),
              "dist.{}: needs a defined, contiguous CPU tensor (got {})", op,
              t.defined() ? t.device().str() : std::string("undefined"));
  GRAFT_CHECK(t.dtype() == DType::f32 || t.dtype() == DType::f64 || t.dtype() == DType::i64,
              "dist.{}: supports float32, float64 and int64 tensors, got {}", op, t.dtype());
}

#if GRAFT_HAVE_MPI
MPI_Datatype mpi_type(DType d) {
  switch (d) {
    case DType::f32: return MPI_FLOAT;
    case DType::f64: return MPI_DOUBLE;
    default: return MPI_INT64_T;
  }
}
char* bytes_of(const Tensor& t) { return static_cast<char*>(t.kview().data); }
constexpr int64_t kChunk = int64_t(1) << 30;  // MPI counts are int
#endif

}  // namespace

bool built() { return GRAFT_HAVE_MPI != 0; }

std::string mpi_version() {
#if GRAFT_HAVE_MPI
  char text[MPI_MAX_LIBRARY_VERSION_STRING];
  int len = 0;
  MPI_Get_library_version(text, &len);
  std::string s(text, size_t(std::max(len, 0)));
  const size_t cut = s.find_first_of(",\n");
  return cut == std::string::npos ? s : s.substr(0, cut);
#else
  return "not built";
#endif
}

Session::Session(int* argc, char*** argv) {
#if GRAFT_HAVE_MPI
  int already = 0;
  MPI_Initialized(&already);
  if (already || !launched_by_mpirun()) return;
  int provided = 0;
  MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided);
  g_mpi = true;
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &g_size);
#else
  (void)argc;
  (void)argv;
#endif
}

Session::~Session() {
#if GRAFT_HAVE_MPI
  if (!g_mpi) return;
  int done = 0;
  MPI_Finalized(&done);
  if (!done) MPI_Finalize();
  g_mpi = false;
  g_rank = 0;
  g_size = 1;
#endif
}

int rank() { return g_rank; }
int world_size() { return g_size; }

void abort_all(int code) {
#if GRAFT_HAVE_MPI
  if (g_mpi && g_size > 1) MPI_Abort(MPI_COMM_WORLD, code);
#endif
  std::exit(code);
}

void barrier() {
#if GRAFT_HAVE_MPI
  if (g_size > 1) MPI_Barrier(MPI_COMM_WORLD);
#endif
}

void broadcast(Tensor& t, int root) {
  check_tensor(t, "broadcast");
  GRAFT_CHECK(root >= 0 && root < g_size, "dist.broadcast: root {} is not a rank (world size {})",
              root, g_size);
#if GRAFT_HAVE_MPI
  if (g_size == 1) return;
  const int64_t n = t.numel(), elem = int64_t(dtype_size(t.dtype()));
  for (int64_t i = 0; i < n; i += kChunk)
    MPI_Bcast(bytes_of(t) + i * elem, int(std::min(kChunk, n - i)), mpi_type(t.dtype()), root,
              MPI_COMM_WORLD);
#endif
}

void all_reduce_sum(Tensor& t) {
  check_tensor(t, "all_reduce_sum");
#if GRAFT_HAVE_MPI
  if (g_size == 1) return;
  const int64_t n = t.numel(), elem = int64_t(dtype_size(t.dtype()));
  for (int64_t i = 0; i < n; i += kChunk)
    MPI_Allreduce(MPI_IN_PLACE, bytes_of(t) + i * elem, int(std::min(kChunk, n - i)),
                  mpi_type(t.dtype()), MPI_SUM, MPI_COMM_WORLD);
#endif
}

double all_reduce_sum(double v) {
#if GRAFT_HAVE_MPI
  if (g_size > 1) MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
#endif
  return v;
}

bool any(bool v) {
#if GRAFT_HAVE_MPI
  if (g_size > 1) {
    int x = v ? 1 : 0;
    MPI_Allreduce(MPI_IN_PLACE, &x, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    return x != 0;
  }
#endif
  return v;
}

int64_t all_reduce_max(int64_t v) {
#if GRAFT_HAVE_MPI
  if (g_size > 1) MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_INT64_T, MPI_MAX, MPI_COMM_WORLD);
#endif
  return v;
}

Range shard(int64_t n, const char* what) {
  GRAFT_CHECK(n >= 0 && n % g_size == 0,
              "data parallel: {} of {} must be a multiple of the number of ranks ({}); each rank "
              "takes an equal share",
              what, n, g_size);
  const int64_t per = n / g_size;
  return {int64_t(g_rank) * per, per};
}

Range split(int64_t n) {
  GRAFT_CHECK(n >= 0, "dist.split: negative size {}", n);
  const int64_t base = n / g_size, extra = n % g_size, r = g_rank;
  return {r * base + std::min<int64_t>(r, extra), base + (r < extra ? 1 : 0)};
}

Tensor global_mean(const Tensor& local_mean, int64_t local_count) {
  if (g_size == 1) return local_mean;
  const double total = all_reduce_sum(double(local_count));
  GRAFT_CHECK(total > 0, "data parallel: a global batch with no items");
  // a mean over no items is NaN, and NaN * 0 is NaN: such a rank contributes a plain zero
  if (local_count == 0 && !std::isfinite(local_mean.item<double>())) return zeros_like(local_mean);
  return local_mean * (double(g_size) * double(local_count) / total);
}

// ---------------------------------------------------------------- GradReducer
struct GradReducer::Impl {
  struct Bucket {
    DType dtype = DType::f32;
    std::vector<size_t> params;    // indices into Impl::params
    std::vector<int64_t> offsets;  // element offset of each in `flat`
    Tensor flat;                   // [numel] of dtype
    size_t pending = 0;            // gradients still to come in this backward
    bool launched = false;
#if GRAFT_HAVE_MPI
    MPI_Request request = MPI_REQUEST_NULL;
#endif
  };
  std::vector<Tensor> params;
  std::vector<Bucket> buckets;
  std::vector<size_t> bucket_of;  // parameter -> bucket
  std::vector<char> ready;        // parameter's gradient final in this backward
  std::vector<uint64_t> hooks;
  bool overlap = true;
  bool armed = false;
  size_t launched_in_backward = 0;

  // Copies the bucket's gradients (zeros where a parameter has none) into flat and starts
  // the reduction.
  void launch(Bucket& b) {
    char* dst = static_cast<char*>(b.flat.kview().data);
    const size_t elem = dtype_size(b.dtype);
    for (size_t j = 0; j < b.params.size(); ++j) {
      const Tensor& p = params[b.params[j]];
      const Tensor g = p.grad();
      char* at = dst + size_t(b.offsets[j]) * elem;
      const size_t nbytes = size_t(p.numel()) * elem;
      if (!g.defined()) {
        std::fill(at, at + nbytes, char(0));
        continue;
      }
      const Tensor gc = g.is_contiguous() ? g : g.contiguous();
      const char* src = static_cast<const char*>(gc.kview().data);
      std::copy(src, src + nbytes, at);
    }
    b.launched = true;
#if GRAFT_HAVE_MPI
    MPI_Iallreduce(MPI_IN_PLACE, dst, int(b.flat.numel()), mpi_type(b.dtype), MPI_SUM,
                   MPI_COMM_WORLD, &b.request);
#endif
  }

  // Lets MPI move the reductions in flight along (progress happens inside MPI calls).
  void progress() {
#if GRAFT_HAVE_MPI
    for (Bucket& b : buckets)
      if (b.launched && b.request != MPI_REQUEST_NULL) {
        int done = 0;
        MPI_Test(&b.request, &done, MPI_STATUS_IGNORE);
      }
#endif
  }

  void on_grad(size_t i) {
    if (!armed || ready[i]) return;
    ready[i] = 1;
    Bucket& b = buckets[bucket_of[i]];
    if (--b.pending == 0) {
      launch(b);
      ++launched_in_backward;
    }
    progress();
  }
};

GradReducer::GradReducer(std::vector<Tensor> params, size_t bucket_bytes, bool overlap)
    : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.params = std::move(params);
  m.overlap = overlap;
  if (g_size == 1) return;  // nothing to reduce
  GRAFT_CHECK(bucket_bytes >= 1, "dist.GradReducer: bucket_bytes must be >= 1");
  m.bucket_of.assign(m.params.size(), 0);
  m.ready.assign(m.params.size(), 0);
  // reverse parameter order: backward() finishes the last layers first
  for (size_t k = m.params.size(); k-- > 0;) {
    const Tensor& p = m.params[k];
    GRAFT_CHECK(p.device().is_cpu() && (p.dtype() == DType::f32 || p.dtype() == DType::f64),
                "data parallel: parameters must be float32/float64 CPU tensors, got {} on {}",
                p.dtype(), p.device().str());
    const size_t bytes = size_t(p.numel()) * dtype_size(p.dtype());
    bool fresh = m.buckets.empty() || m.buckets.back().dtype != p.dtype();
    if (!fresh) {
      const Impl::Bucket& last = m.buckets.back();
      const size_t have = size_t(last.offsets.back() + m.params[last.params.back()].numel()) *
                          dtype_size(last.dtype);
      fresh = have + bytes > bucket_bytes;
    }
    if (fresh) {
      m.buckets.emplace_back();
      m.buckets.back().dtype = p.dtype();
    }
    Impl::Bucket& b = m.buckets.back();
    const int64_t off =
        b.params.empty() ? 0 : b.offsets.back() + m.params[b.params.back()].numel();
    b.params.push_back(k);
    b.offsets.push_back(off);
    m.bucket_of[k] = m.buckets.size() - 1;
  }
  for (Impl::Bucket& b : m.buckets) {
    const int64_t n = b.offsets.back() + m.params[b.params.back()].numel();
    GRAFT_CHECK(n < int64_t(INT_MAX), "dist.GradReducer: a bucket of {} elements is too large", n);
    b.flat = zeros({n}, TensorOptions{}.dtype(b.dtype));
  }
  if (overlap)
    for (size_t i = 0; i < m.params.size(); ++i)
      m.hooks.push_back(m.params[i].register_post_accumulate_grad_hook(
          [impl = impl_.get(), i](const Tensor&) { impl->on_grad(i); }));
}

GradReducer::~GradReducer() {
  if (!impl_) return;
  for (size_t i = 0; i < impl_->hooks.size(); ++i)
    impl_->params[i].remove_post_accumulate_grad_hook(impl_->hooks[i]);
#if GRAFT_HAVE_MPI
  for (Impl::Bucket& b : impl_->buckets)
    if (b.request != MPI_REQUEST_NULL) MPI_Wait(&b.request, MPI_STATUS_IGNORE);
#endif
}

void GradReducer::arm() {
  Impl& m = *impl_;
  if (g_size == 1) return;
  m.armed = m.overlap;
  m.launched_in_backward = 0;
  std::fill(m.ready.begin(), m.ready.end(), char(0));
  for (Impl::Bucket& b : m.buckets) {
    b.pending = b.params.size();
    b.launched = false;
  }
}

void GradReducer::finish() {
  Impl& m = *impl_;
  if (g_size == 1) return;
  m.armed = false;
  for (Impl::Bucket& b : m.buckets)
    if (!b.launched) m.launch(b);
  const double inv = 1.0 / double(g_size);
  for (Impl::Bucket& b : m.buckets) {
#if GRAFT_HAVE_MPI
    MPI_Wait(&b.request, MPI_STATUS_IGNORE);
#endif
    b.launched = false;
    for (size_t j = 0; j < b.params.size(); ++j) {
      Tensor& p = m.params[b.params[j]];
      // grad = sum over ranks / world_size, as a fresh contiguous tensor
      Tensor g = Tensor::empty(p.shape(), TensorOptions{}.dtype(b.dtype));
      const int64_t n = p.numel(), off = b.offsets[j];
      if (b.dtype == DType::f32) {
        const float* s = b.flat.data<float>() + off;
        float* d = g.data<float>();
        for (int64_t e = 0; e < n; ++e) d[e] = float(double(s[e]) * inv);
      } else {
        const double* s = b.flat.data<double>() + off;
        double* d = g.data<double>();
        for (int64_t e = 0; e < n; ++e) d[e] = s[e] * inv;
      }
      p.set_grad(g);
    }
  }
}

size_t GradReducer::num_buckets() const { return impl_->buckets.size(); }
size_t GradReducer::launched_in_backward() const { return impl_->launched_in_backward; }

}  // namespace graft::dist
