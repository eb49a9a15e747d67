// Tensor basics: factories, dtypes, views over shared storage, broadcasting, printing, errors.
#include <malloc.h>
#include <sys/resource.h>
#include <unistd.h>

#include <doctest/doctest.h>

#include <cstdlib>
#include <fstream>
#include <functional>
#include <new>

#include "autograd/functions.h"
#include "ops/cpu_blocks.h"
#include "ops/storage.h"
#include "tests/error_of.h"

using namespace graft;

TEST_CASE("factories and dtypes") {
  Tensor z = zeros({2, 3});
  CHECK(z.dtype() == DType::f32);
  CHECK(z.shape() == Shape{2, 3});
  CHECK(z.to_vector<double>() == std::vector<double>(6, 0.0));
  CHECK(full({2}, 7.0, DType::i64).to_vector<int64_t>() == std::vector<int64_t>{7, 7});
  CHECK(arange(4).to_vector<int64_t>() == std::vector<int64_t>{0, 1, 2, 3});
  CHECK(arange(1.0, 2.0, 0.25, DType::f64).to_vector<double>() == std::vector<double>{1, 1.25, 1.5, 1.75});
  Tensor b = gt(arange(4, DType::f32), full({}, 1.5));
  CHECK(b.dtype() == DType::b8);
  CHECK(b.to_vector<double>() == std::vector<double>{0, 0, 1, 1});
  CHECK(ones({2}, DType::f64).to(DType::f32).dtype() == DType::f32);
}

TEST_CASE("seeded generators are reproducible") {
  manual_seed(42);
  auto a = randn({100}).to_vector<double>();
  manual_seed(42);
  auto b = randn({100}).to_vector<double>();
  CHECK(a == b);
  Generator g1(5), g2(5), g3(6);
  CHECK(rand({10}, {}, &g1).to_vector<double>() == rand({10}, {}, &g2).to_vector<double>());
  CHECK(rand({10}, {}, &g1).to_vector<double>() != rand({10}, {}, &g3).to_vector<double>());
  auto r = randint(0, 5, {1000}).to_vector<int64_t>();
  CHECK(*std::min_element(r.begin(), r.end()) == 0);
  CHECK(*std::max_element(r.begin(), r.end()) == 4);
}

TEST_CASE("views share storage") {
  Tensor x = arange(0.0, 12.0, 1.0, DType::f32).reshape({3, 4});
  Tensor t = x.t();
  CHECK(t.shape() == Shape{4, 3});
  CHECK_FALSE(t.is_contiguous());
  CHECK(t.storage() == x.storage());
  CHECK(t.contiguous().to_vector<double>()[1] == 4.0);
  Tensor s = x.slice(1, 1, 4, 2);  // columns 1, 3
  CHECK(s.to_vector<double>() == std::vector<double>{1, 3, 5, 7, 9, 11});
  Tensor n = x.narrow(0, 1, 2);
  n.fill_(0.0);  // writes through the view
  CHECK(x.to_vector<double>()[4] == 0.0);
  CHECK(x.to_vector<double>()[0] == 0.0 + 0.0);
  CHECK(x.unsqueeze(0).shape() == Shape{1, 3, 4});
  CHECK(x.unsqueeze(0).squeeze(0).shape() == Shape{3, 4});
  CHECK(x.permute({1, 0}).shape() == Shape{4, 3});
  CHECK(x.select(1, 2).shape() == Shape{3});
  Tensor e = full({3, 1}, 2.0).expand({2, 3, 5});
  CHECK(e.shape() == Shape{2, 3, 5});
  CHECK(e.strides()[0] == 0);
  CHECK(sum(e).item() == 60.0);
  CHECK(x.reshape({-1}).shape() == Shape{12});
  CHECK_THROWS_AS(x.t().view({12}), Error);  // not contiguous: use reshape
  CHECK(x.t().reshape({12}).shape() == Shape{12});
}

TEST_CASE("broadcasting") {
  Tensor a = ones({3, 1}), b = arange(0.0, 4.0, 1.0, DType::f32);
  Tensor c = a + b;
  CHECK(c.shape() == Shape{3, 4});
  CHECK(c.to_vector<double>()[7] == 4.0);
  CHECK_THROWS_AS(ones({3}) + ones({4}), Error);
}

TEST_CASE("cat, stack, split, chunk") {
  Tensor a = ones({2, 3}), b = zeros({1, 3});
  CHECK(cat({a, b}).shape() == Shape{3, 3});
  CHECK(stack({a, a}, 1).shape() == Shape{2, 2, 3});
  auto p = split(arange(5, DType::f32), 2);
  REQUIRE(p.size() == 3);
  CHECK(p[2].to_vector<double>() == std::vector<double>{4});
  CHECK(chunk(ones({7}), 3).size() == 3);
  CHECK_THROWS_AS(cat({ones({2, 3}), ones({2, 4})}, 0), Error);
}

TEST_CASE("clear errors for bad shapes, dtypes and arguments") {
  try {
    matmul(ones({2, 3}), ones({4, 5}));
    FAIL("expected an error");
  } catch (const Error& e) {
    CHECK(std::string(e.what()).find("matmul: shapes [2, 3] and [4, 5] cannot be multiplied (3 != 4)") !=
          std::string::npos);
  }
  CHECK_THROWS_AS(ones({2}) + ones({2}, DType::f64), Error);
  CHECK_THROWS_AS(exp(ones({2}, DType::i64)), Error);
  CHECK_THROWS_AS(sum(ones({2}), {3}), Error);
  CHECK_THROWS_AS(ones({2}).slice(0, 0, 1, 0), Error);
  CHECK_THROWS_AS(ones({2, 2}).narrow(1, 1, 5), Error);
  CHECK_THROWS_AS(ones({2}).item(), Error);
  CHECK_THROWS_AS(ones(Shape::filled(8, 1)).unsqueeze(0), Error);  // rank limit
  CHECK_THROWS_AS(ones({2}).to(Device::opencl(99)), Error);  // no such OpenCL device
  CHECK_THROWS_AS(Device::parse("tpu"), Error);
  CHECK_THROWS_AS(gelu(ones({1}), "fast"), Error);
  CHECK_THROWS_AS(ones({2}, DType::i64).requires_grad_(), Error);
}

TEST_CASE("printing") {
  std::string s = fmt::format("{}", tensor({1.0, 2.5}));
  CHECK(s == "tensor([1.0000, 2.5000])");
  CHECK(fmt::format("{}", arange(3)) == "tensor([0, 1, 2], dtype=int64)");
  Tensor x = ones({2}, TensorOptions().requires_grad());
  CHECK(fmt::format("{}", x * 2.0).find("grad_fn=mul_scalar") != std::string::npos);
}

TEST_CASE("reductions and argmax values") {
  Tensor x = from_vector(std::vector<double>{1, 5, 3, 4, 2, 6}, {2, 3});
  CHECK(sum(x).item() == 21.0);
  CHECK(sum(x, {1}).to_vector<double>() == std::vector<double>{9, 12});
  CHECK(mean(x, {0}, true).shape() == Shape{1, 3});
  CHECK(amax(x, {1}).to_vector<double>() == std::vector<double>{5, 6});
  CHECK(amin(x).item() == 1.0);
  CHECK(argmax(x, 1).to_vector<int64_t>() == std::vector<int64_t>{1, 2});
  CHECK(var(x, {1}).to_vector<double>()[0] == doctest::Approx(4.0));
  CHECK(logsumexp(x, {1}).to_vector<double>()[0] == doctest::Approx(std::log(std::exp(1) + std::exp(5) + std::exp(3))));
}

using graft::test::error_of;
using graft::test::has;

TEST_CASE("element counts: overflowing or negative shapes are errors naming the shape") {
  // 4 * (2^62 + 1) wraps to 4 in int64: a 4-element buffer for a "huge" tensor, then a crash.
  const int64_t big = (int64_t(1) << 62) + 1;
  const std::string e = error_of([&] { zeros({4, big}); });
  CHECK(has(e, "shape [4, 4611686018427387905]"));
  CHECK(has(e, "more elements than graft allows"));
  CHECK_THROWS_AS(Shape({4, big}).numel(), Error);
  CHECK_THROWS_AS(Shape({int64_t(1) << 30, int64_t(1) << 30}).numel(), Error);  // 2^60 > 2^59
  CHECK(Shape({int64_t(1) << 29, int64_t(1) << 30}).numel() == int64_t(1) << 59);  // the limit
  CHECK(has(error_of([] { Shape{2, -3}.numel(); }), "shape [2, -3] has a negative dimension"));
  CHECK_THROWS_AS(ones({3, -1}), Error);
  // a zero dim gives 0 elements, but the other dims still bound the strides
  CHECK(Shape{0, 5}.numel() == 0);
  CHECK_THROWS_AS(Shape({0, int64_t(1) << 40, int64_t(1) << 40}).numel(), Error);
  // views: a reshape target whose product wraps to the real count, and a huge expand
  CHECK_THROWS_AS(ones({4}).view({big, 4}), Error);
  CHECK_THROWS_AS(ones({4}).reshape({big, 4}), Error);
  CHECK_THROWS_AS(sum(ones({1, 1}).expand({int64_t(1) << 40, int64_t(1) << 40})), Error);
}

TEST_CASE("storage: a request beyond physical memory is refused before allocating") {
  REQUIRE(physical_memory_bytes() > 0);
  // 2^20 x 2^20 float32 = 4 TiB: refused by the size check, nothing is allocated
  const std::string e = error_of([] { empty({int64_t(1) << 20, int64_t(1) << 20}); });
  CHECK(has(e, "cannot allocate 4.0 TiB for a float32 tensor of shape [1048576, 1048576]"));
  CHECK(has(e, "this machine has"));
  CHECK(has(error_of([] { zeros({int64_t(1) << 28, int64_t(1) << 28}, DType::f64); }),
            "float64 tensor of shape [268435456, 268435456]"));
  CHECK(has(error_of([] { Storage s(size_t(1) << 61, Device::cpu()); }),
            "cannot allocate 2.0 EiB for a buffer of 2305843009213693952 bytes on cpu"));
  CHECK(format_bytes(512) == "512 B");
  CHECK(format_bytes(1536) == "1.5 KiB");
  CHECK(format_bytes(4e10) == "37.3 GiB");  // [100000, 100000] float32
  // small and empty tensors are unaffected
  CHECK(empty({0}).numel() == 0);
  CHECK(zeros({3, 0, 2}).shape() == Shape{3, 0, 2});
}

TEST_CASE("storage: live CPU bytes are counted") {
  const uint64_t before = live_cpu_bytes();
  {
    Tensor a = empty({1024});  // 4 KiB
    CHECK(live_cpu_bytes() == before + 4096);
    Tensor b = a.view({32, 32});  // a view shares the storage
    CHECK(live_cpu_bytes() == before + 4096);
  }
  CHECK(live_cpu_bytes() == before);
}

#if !defined(__SANITIZE_ADDRESS__)
TEST_CASE("storage: tensors that fit one by one but not together are refused") {
  // Quarters of the machine's memory: each passes the size check, and the allocator hands
  // them out without touching a page (overcommit), so only the count of live bytes stops them.
  // MALLOC_PERTURB_ (meson test sets it) makes malloc fill each block, touching every page:
  // switch it off for this test, or the quarters would really take the machine's memory.
  const char* perturb_env = std::getenv("MALLOC_PERTURB_");
  mallopt(M_PERTURB, 0);
  int overcommit = 0;
  std::ifstream("/proc/sys/vm/overcommit_memory") >> overcommit;
  const int64_t quarter = int64_t(physical_memory_bytes() / 4 / 4);  // float32 elements
  std::vector<Tensor> held;
  std::string e;
  for (int i = 0; i < 64 && e.empty(); ++i) {
    try {
      held.push_back(empty({quarter}));
    } catch (const Error& err) {
      e = err.what();
    }
  }
  const size_t n = held.size();
  held.clear();
  // At most four quarters fit (fewer if other tensors are live, or if the allocator refuses
  // first on a busy machine: "out of memory"); without the count all 64 were handed out.
  CHECK(n <= 4);
  CHECK(has(e, "cannot allocate"));
  if (n == 3 && overcommit != 2) CHECK(has(e, "graft's tensors already hold"));
  CHECK_NOTHROW(empty({quarter}));  // the bytes were given back
  mallopt(M_PERTURB, perturb_env ? std::atoi(perturb_env) : 0);
}

TEST_CASE("storage: an allocator out of memory becomes graft::Error, not std::bad_alloc") {
  // Lower this process's address-space limit so that a 2 GiB tensor (less than the machine's
  // memory, so the size check lets it through) fails in the allocator, then restore it. Cached
  // blocks are given back first: the allocator would unmap them and succeed.
  graft::detail::release_cached_blocks();
  rlimit old{};
  REQUIRE(getrlimit(RLIMIT_AS, &old) == 0);
  std::ifstream statm("/proc/self/statm");
  size_t vm_pages = 0;
  statm >> vm_pages;
  const rlim_t limit = rlim_t(vm_pages) * rlim_t(sysconf(_SC_PAGE_SIZE)) + (rlim_t(1) << 30);
  if (physical_memory_bytes() < (uint64_t(3) << 30) || (old.rlim_max != RLIM_INFINITY && old.rlim_max < limit))
    return;  // a machine this small cannot tell the two checks apart
  rlimit low = old;
  low.rlim_cur = limit;
  REQUIRE(setrlimit(RLIMIT_AS, &low) == 0);
  std::string e;
  try {
    empty({int64_t(1) << 29});  // 2 GiB of float32
    e = "(allocated)";
  } catch (const Error& err) {
    e = err.what();
  } catch (const std::bad_alloc&) {
    e = "(std::bad_alloc)";
  }
  setrlimit(RLIMIT_AS, &old);
  CHECK(has(e, "cannot allocate 2.0 GiB for a float32 tensor of shape [536870912] on cpu: out of memory"));
}
#endif
