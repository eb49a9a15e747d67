// graft::dist — data-parallel training over MPI (OpenMPI), the way Marian, llm.c and PyTorch's
// DDP do it: every rank holds the whole model, takes its own share of each global batch, and
// the gradients are averaged across ranks before each optimizer step.
//
//   int main(int argc, char** argv) {
//     dist::Session mpi(&argc, &argv);        // MPI_Init when started by mpirun, else 1 rank
//     ...
//     dist::Range mine = dist::shard(batch);   // this rank's rows of a global batch
//   }
//
// A process not started by mpirun (no OMPI_COMM_WORLD_SIZE / PMI_SIZE in its environment) is
// rank 0 of 1 and never touches MPI; so is every process of a build without MPI
// (dist::built() == false). Collectives take CPU tensors (contiguous float32/float64/int64) and
// work in place.
//
// Gradients: GradReducer packs the parameters' gradients into buckets of about bucket_bytes,
// in reverse parameter order (the order backward() finishes them), and starts a non-blocking
// MPI_Iallreduce for a bucket as soon as the last of its gradients is accumulated (a post-
// accumulate hook on each parameter), so communication overlaps the rest of the backward pass.
// finish() waits for every bucket and writes grad = sum over ranks / world_size back into each
// parameter. With overlap = false every bucket is reduced after backward(), for comparison.
// A parameter that got no gradient contributes zeros. The sum is the same on every rank (each
// rank receives the result of one reduction), so the ranks' weights never drift apart.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "autograd/tensor.h"

namespace graft::dist {

// True when graft was built with MPI.
bool built();
// "OpenMPI 4.1.4" or "not built" (for graft version).
std::string mpi_version();

// Initialises MPI for the process's lifetime when it was started by mpirun (and finalizes it);
// otherwise does nothing. One per process, in main().
class Session {
 public:
  Session(int* argc, char*** argv);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;
};

int rank();        // 0 .. world_size() - 1
int world_size();  // 1 without mpirun
inline bool is_main() { return rank() == 0; }

// Ends every rank now with `code` (MPI_Abort): the way out when one rank hits an error that the
// others cannot know about, instead of leaving them waiting in a collective. Without MPI: exit.
[[noreturn]] void abort_all(int code);

void barrier();
// Copies `t` from rank `root` to every rank (in place; same shape and dtype everywhere).
void broadcast(Tensor& t, int root = 0);
// t = the elementwise sum of t over all ranks (in place).
void all_reduce_sum(Tensor& t);
double all_reduce_sum(double v);
// True on every rank when `v` is true on any rank.
bool any(bool v);
// The largest `v` over all ranks.
int64_t all_reduce_max(int64_t v);

// Rows [begin, begin + count) of a global batch of n rows that this rank takes: contiguous,
// equal shares; graft::Error when n is not a multiple of world_size().
struct Range {
  int64_t begin = 0, count = 0;
};
Range shard(int64_t n, const char* what = "the batch");
// The same for batches of any size: shares differ by at most one item, and a rank whose share
// is empty (n < world_size()) gets count 0.
Range split(int64_t n);
// A loss for data parallel training on shares of unequal size: local_mean is the mean over this
// rank's local_count items (tokens, sentences); the result, averaged over the ranks (as the
// gradients and logged losses are), is the mean over all items of the global batch. One rank
// alone: local_mean itself. A rank with local_count 0 contributes nothing (its local_mean,
// computed on any stand-in item, is multiplied by 0).
Tensor global_mean(const Tensor& local_mean, int64_t local_count);

class GradReducer {
 public:
  // The parameters must outlive the reducer; all ranks pass the same list.
  GradReducer(std::vector<Tensor> params, size_t bucket_bytes = size_t(4) << 20,
              bool overlap = true);
  ~GradReducer();
  GradReducer(const GradReducer&) = delete;
  GradReducer& operator=(const GradReducer&) = delete;

  // Arms the hooks for the next backward(): with gradient accumulation, call it before the
  // last micro-batch's backward only, so that buckets leave once their gradients are final.
  void arm();
  // Waits for (or, without overlap, runs) every bucket's reduction and sets each parameter's
  // .grad to the average over ranks.
  void finish();

  size_t num_buckets() const;
  // Buckets whose reduction started inside backward() in the last step (0 without overlap).
  size_t launched_in_backward() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace graft::dist
