// The OpenCL back-end on the first OpenCL device (PoCL in CI): runtime (devices, copies,
// buffer pool, errors), then the op table enumerated: every op whose kernels exist on OpenCL
// runs each of its cases on OpenCL and on the CPU (forward and backward, float64 and float32)
// and passes gradcheck in float64 on the device; ops without OpenCL kernels are listed. Then
// kernel-level checks (tiled vs naive matmul, Philox streams, optimizer steps) and a whole
// model: the spirals MLP trains 20 steps on OpenCL along the CPU loss curve.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdlib>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "autograd/attention.h"
#include "autograd/conv.h"
#include "autograd/functions.h"
#include "autograd/gradcheck.h"
#include "autograd/grad_mode.h"
#include "autograd/node.h"
#include "autograd/op_table.h"
#include "data/spirals.h"
#include "nn/layers.h"
#include "nn/loss.h"
#include "nn/optim.h"
#include "ops/kernels.h"
#include "ops/opencl/backend_nn.h"
#include "ops/opencl/opencl.h"
#include "ops/opencl/runtime.h"
#include "tests/autograd/op_case_run.h"

using namespace graft;

namespace {

// The device under test: GRAFT_DEVICE=opencl:N picks another than opencl:0.
const Device kDev = [] {
  const char* e = std::getenv("GRAFT_DEVICE");
  const Device d = e ? Device::parse(e) : Device::opencl(0);
  return d.is_cpu() ? Device::opencl(0) : d;
}();

// PoCL: few threads (the CI machine is shared); set before the first OpenCL call.
const bool g_env = [] {
  setenv("POCL_MAX_PTHREAD_COUNT", "2", 0);
  return true;
}();

const Backend& dev_backend() {
  const Backend* b = backend_for(kDev);
  REQUIRE_MESSAGE(b != nullptr, "no OpenCL back-end registered");
  return *b;
}

void require_device() {
  REQUIRE_MESSAGE(!opencl::devices().empty(),
                  "no OpenCL device found; install an ICD such as pocl-opencl-icd");
}

using Run = test::CaseRun;
using test::inputs_on;

Run run_case(const OpCase& c, DType dt, Device d) { return test::run_op_case(c, dt, d); }

// Returns "" when close, else a description of the first mismatch.
std::string compare(const std::vector<double>& a, const std::vector<double>& b, double tol) {
  if (a.size() != b.size()) return fmt::format("sizes differ: {} vs {}", a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(a[i]) && std::isnan(b[i])) continue;
    if (!(std::abs(a[i] - b[i]) <= tol * (1 + std::abs(b[i]))))
      return fmt::format("element {}: opencl {} vs cpu {}", i, a[i], b[i]);
  }
  return "";
}

// fn evaluated on the device: CPU float64 leaves are moved there (differentiably, so that
// gradcheck's analytical gradient is the device's backward) and the result comes back.
TensorFn on_device(const TensorFn& fn) {
  return [fn](const std::vector<Tensor>& in) {
    std::vector<Tensor> d;
    for (const Tensor& t : in) d.push_back(t.to(kDev));
    return fn(d).to(Device::cpu());
  };
}

// Some op-table cases capture CPU tensors (index ids, targets, masks) in their closures, so
// they cannot run on another device. These ops get device-portable cases here, with the
// int64 tensors passed as (non-differentiable) inputs; index_add and scatter_add run as the
// backward of index_select / gather / embedding.
std::vector<OpCase> portable_cases(const std::string& op, Generator& g) {
  auto u = [&](const Shape& s) {
    return uniform(s, -1, 1, DType::f64, &g).requires_grad_(true);
  };
  auto ix = [](std::vector<int64_t> v, const Shape& s) { return from_vector(v, s); };
  std::vector<OpCase> cs;
  auto add = [&](std::string label, std::vector<Tensor> in,
                 std::function<Tensor(const std::vector<Tensor>&)> fn) {
    cs.push_back(OpCase{std::move(label), std::move(in), std::move(fn)});
  };
  if (op == "index_select") {
    add("[4,3] dim 0, ids {2,0,2,3}", {u({4, 3}), ix({2, 0, 2, 3}, {4})},
        [](const auto& in) { return index_select(in[0], 0, in[1]); });
    add("transposed [5,3]^T dim -1, squared", {u({5, 3}), ix({4, 1, 1}, {3})},
        [](const auto& in) {
          Tensor y = index_select(in[0].t(), -1, in[1]);
          return y * y;
        });
  } else if (op == "gather" || op == "scatter_add") {
    add("[3,5] dim 1, index [3,2] repeated", {u({3, 5}), ix({4, 4, 0, 1, 2, 1}, {3, 2})},
        [](const auto& in) { return gather(in[0], 1, in[1]); });
    add("[3,4] dim 0, index [2,4], squared", {u({3, 4}), ix({0, 2, 1, 2, 2, 2, 0, 1}, {2, 4})},
        [](const auto& in) {
          Tensor y = gather(in[0], 0, in[1]);
          return y * y;
        });
  } else if (op == "embedding" || op == "index_add") {
    add("w [5,3], ids [2,3] repeated, squared", {u({5, 3}), ix({1, 3, 1, 0, 4, 3}, {2, 3})},
        [](const auto& in) {
          Tensor e = embedding(in[0], in[1]);
          return e * e;
        });
  } else if (op == "scaled_dot_product_attention" ||
             op == "scaled_dot_product_attention_composite") {
    // The masks are (non-differentiable) inputs here, so they move to the device too.
    const AttentionImpl impl =
        op == "scaled_dot_product_attention" ? AttentionImpl::fused : AttentionImpl::composite;
    auto attn = [impl](bool causal, int64_t off) {
      return [impl, causal, off](const std::vector<Tensor>& in) {
        AttentionOptions o;
        if (in.size() > 3) o.attn_mask = in[3];
        o.is_causal = causal;
        o.causal_offset = off;
        o.impl = impl;
        return scaled_dot_product_attention(in[0], in[1], in[2], o);
      };
    };
    Tensor kpm = ne(from_vector(std::vector<double>{1, 1, 1, 1, 1, 0}, {2, 1, 1, 3}, DType::f64),
                    zeros(Shape{}, DType::f64));
    Tensor dead = ne(from_vector(std::vector<double>{1, 1, 1, 0, 0, 0, 1, 0, 1, 1, 1, 0}, {4, 3},
                                 DType::f64), zeros(Shape{}, DType::f64));
    add("[2,2,4,3] bool key padding [B,1,1,S] + causal",
        {u({2, 2, 4, 3}), u({2, 2, 3, 3}), u({2, 2, 3, 2}), kpm}, attn(true, 0));
    add("[2,1,4,3] additive [T,S] mask, causal offset -1",
        {u({2, 1, 4, 3}), u({2, 1, 3, 3}), u({2, 1, 3, 4}),
         uniform({4, 3}, -1, 1, DType::f64, &g)}, attn(true, -1));
    add("[3,4,2] rank 3, bool mask with a fully masked row",
        {u({3, 4, 2}), u({3, 3, 2}), u({3, 3, 2}), dead}, attn(false, 0));
  } else if (op == "max_pool1d_backward") {
    Pool1dArgs a;
    a.kind = PoolKind::max, a.kernel = 3, a.stride = 2, a.pad_l = a.pad_r = 1;
    add("dy [1,2,4] into L 8, indices as an input", {u({1, 2, 4}), ix({0, 2, 4, 7, 1, 3, 3, 6}, {1, 2, 4})},
        [a](const auto& in) { return max_pool1d_backward(in[0], in[1], 8, a); });
  } else if (op == "cross_entropy") {
    add("[4,5] mean", {u({4, 5}), ix({1, 0, 4, 2}, {4})},
        [](const auto& in) { return cross_entropy(in[0], in[1]); });
    add("[4,5] sum, label_smoothing 0.1, row 1 ignored",
        {u({4, 5}), ix({3, -100, 0, 4}, {4})}, [](const auto& in) {
          return cross_entropy(in[0], in[1], {.label_smoothing = 0.1, .reduction = Reduction::sum});
        });
    add("transposed [5,4]^T none", {u({5, 4}), ix({2, 2, 0, 3}, {4})},
        [](const auto& in) {
          return cross_entropy(in[0].t(), in[1], {.reduction = Reduction::none});
        });
  }
  return cs;
}

bool placement_error(const std::string& msg) {
  return msg.find("different devices") != std::string::npos ||
         msg.find(" is on cpu") != std::string::npos;
}

}  // namespace

TEST_CASE("opencl: devices are listed with their properties") {
  require_device();
  const auto devs = opencl::devices();
  for (const auto& d : devs) {
    MESSAGE(fmt::format("opencl:{}  {} / {}  ({}), {} compute units, {} MiB, fp64 {}", d.index,
                        d.platform, d.name, d.type, d.compute_units, d.global_mem >> 20, d.fp64));
    CHECK(!d.name.empty());
    CHECK(d.compute_units > 0);
    CHECK(d.global_mem > 0);
  }
  CHECK(opencl::built());
  CHECK(Device::parse(kDev.str()) == kDev);
  REQUIRE_MESSAGE(size_t(kDev.index) < devs.size(), "GRAFT_DEVICE names a device that does not exist");
  REQUIRE_MESSAGE(devs[size_t(kDev.index)].fp64, "the test device needs fp64 (PoCL has it)");
}

TEST_CASE("opencl: host <-> device copies, strided views, dtype conversion") {
  require_device();
  Generator g(3);
  Tensor x = uniform({3, 4, 5}, -2, 2, DType::f64, &g);
  Tensor d = x.to(kDev);
  CHECK(d.device() == kDev);
  CHECK(d.to_vector<double>() == x.to_vector<double>());
  // A non-contiguous view goes through the strided copy kernel on the device.
  Tensor t = d.transpose(0, 2).slice(1, 1, 4);
  CHECK(t.contiguous().to_vector<double>() == x.transpose(0, 2).slice(1, 1, 4).to_vector<double>());
  CHECK(d.to(DType::f32).to_vector<float>() == x.to(DType::f32).to_vector<float>());
  Tensor ids = from_vector(std::vector<int64_t>{3, -1, 7}, Shape{3});
  CHECK(ids.to(kDev).to_vector<int64_t>() == ids.to_vector<int64_t>());
  // Device to device (same device) and back, fill_ and copy_ with broadcasting.
  Tensor z = zeros({2, 3}, TensorOptions(DType::f32).device(kDev));
  z.fill_(1.5);
  CHECK(z.to_vector<float>() == std::vector<float>(6, 1.5f));
  z.copy_(tensor({1, 2, 3}).to(kDev));
  CHECK(z.to_vector<float>() == std::vector<float>{1, 2, 3, 1, 2, 3});
  // bool conversion follows C++ (x != 0).
  Tensor b = tensor({0.0, 0.25, -3.0}).to(kDev).to(DType::b8).to(DType::f32);
  CHECK(b.to_vector<float>() == std::vector<float>{0, 1, 1});
  // to(Device) is differentiable: the gradient comes back to the CPU leaf.
  Tensor leaf = tensor({1, 2, 3}, TensorOptions(DType::f64).requires_grad());
  sum(mul(leaf.to(kDev), leaf.to(kDev))).backward();
  CHECK(leaf.grad().to_vector<double>() == std::vector<double>{2, 4, 6});
}

TEST_CASE("opencl: the buffer pool reuses freed buffers") {
  require_device();
  opencl::reset_pool_stats(kDev.index);
  { Tensor a = empty({1000}, TensorOptions(DType::f32).device(kDev)); }
  const auto s1 = opencl::pool_stats(kDev.index);
  { Tensor b = empty({900}, TensorOptions(DType::f32).device(kDev)); }  // same size class
  const auto s2 = opencl::pool_stats(kDev.index);
  CHECK(s2.hits == s1.hits + 1);
  CHECK(s2.misses == s1.misses);
  CHECK(s2.cached_bytes >= 4096);
  opencl::empty_cache(kDev.index);
  CHECK(opencl::pool_stats(kDev.index).cached_bytes == 0);
}

TEST_CASE("opencl: errors are graft::Error with the op, the call and the CL error name") {
  require_device();
  CHECK_THROWS_WITH_AS(empty({4}, TensorOptions().device(Device::opencl(99))),
                       doctest::Contains("no such OpenCL device"), Error);
  Tensor a = ones({3}).to(kDev), c = ones({3});
  CHECK_THROWS_WITH_AS(add(a, c), doctest::Contains("different devices"), Error);
  // A kernel argument of the wrong size: the call and the CL error are named.
  ocl::Context& ctx = ocl::context(kDev.index);
  CHECK_THROWS_WITH_AS(ocl::check(clFinish(nullptr), "clFinish", "my_op"),
                       doctest::Contains("my_op: OpenCL call clFinish failed with "
                                         "CL_INVALID_COMMAND_QUEUE"),
                       Error);
  // More memory than the device can hold in one buffer.
  CHECK_THROWS_WITH_AS(empty({int64_t(1) << 42}, TensorOptions().device(kDev)),
                       doctest::Contains("clCreateBuffer failed with CL_"), Error);
  CHECK(std::string(ocl::error_name(CL_OUT_OF_RESOURCES)) == "CL_OUT_OF_RESOURCES");
  CHECK_THROWS_WITH_AS(ocl::Launch(ctx, DType::f32, "no_such_kernel", "op2"),
                       doctest::Contains("no OpenCL kernel 'no_such_kernel'"), Error);
  // An op without OpenCL kernels says so (pool1d hidden from the table for this check; the
  // CPU fallback test in test_opencl_models.cpp does the same with conv1d).
  const Backend* real = backend_for(kDev);
  Backend hidden = *real;
  hidden.pool1d = nullptr;
  register_backend(Device::Kind::opencl, &hidden);
  CHECK_THROWS_WITH_AS(max_pool1d(ones({1, 2, 6}).to(kDev), 2),
                       doctest::Contains("no kernel for device opencl:"), Error);
  register_backend(Device::Kind::opencl, real);
  // Bad shapes reaching a kernel directly are errors too, not crashes.
  Tensor x3 = ones({1, 2, 6}).to(kDev), w3 = ones({3, 5, 2}).to(kDev), o3 = empty({1, 3, 5}, TensorOptions().device(kDev));
  CHECK_THROWS_WITH_AS(dev_backend().conv1d(x3.kview(), w3.kview(), TensorView{}, Conv1dArgs{}, o3.kview()),
                       doctest::Contains("conv1d: shapes"), Error);
}

// Runs one case on the CPU and OpenCL in f64 and f32 and gradchecks it on the device.
// Returns false (and records the message) if the case cannot run on the device at all.
bool check_case(const OpInfo& op, const OpCase& c, std::vector<std::string>& unportable,
                int& cases_run) {
  for (DType dt : {DType::f64, DType::f32}) {
    const std::string what = fmt::format("{} [{}] {}", op.name, c.label, dt);
    Run cpu, dev;
    try {
      cpu = run_case(c, dt, Device::cpu());
      dev = run_case(c, dt, kDev);
    } catch (const std::exception& e) {
      if (placement_error(e.what())) {
        unportable.push_back(fmt::format("{} [{}]: {}", op.name, c.label, e.what()));
        return false;
      }
      FAIL_CHECK(what << ": " << std::string(e.what()));
      continue;
    }
    const double tol = dt == DType::f64 ? 1e-9 : 2e-4;
    const std::string fw = compare(dev.y, cpu.y, tol);
    CHECK_MESSAGE(fw.empty(), what << " forward: " << fw);
    REQUIRE(dev.grads.size() == cpu.grads.size());
    for (size_t i = 0; i < dev.grads.size(); ++i) {
      const std::string bw = compare(dev.grads[i], cpu.grads[i], tol);
      CHECK_MESSAGE(bw.empty(), what << " grad " << i << ": " << bw);
    }
    ++cases_run;
  }
  if (!op.differentiable) return true;
  const std::string what = fmt::format("{} [{}] gradcheck on opencl", op.name, c.label);
  try {
    GradcheckResult r = gradcheck(on_device(c.fn), c.inputs, c.eps, c.atol);
    CHECK_MESSAGE(r.ok, what << ": " << r.message);
  } catch (const std::exception& e) {
    FAIL_CHECK(what << ": " << std::string(e.what()));
  }
  return true;
}

TEST_CASE("opencl: every op with OpenCL kernels matches the CPU and passes gradcheck") {
  require_device();
  const Backend& be = dev_backend();
  std::vector<std::string> missing, covered, unportable;
  int cases_run = 0;
  for (const OpInfo& op : op_table()) {
    if (!op.has_kernels(be)) {
      missing.push_back(op.name);
      continue;
    }
    covered.push_back(op.name);
    Generator g(11);
    int ran = 0;
    for (const OpCase& c : op.cases(g)) ran += check_case(op, c, unportable, cases_run);
    Generator g2(12);
    for (const OpCase& c : portable_cases(op.name, g2)) ran += check_case(op, c, unportable, cases_run);
    CHECK_MESSAGE(ran > 0, "op '" << op.name << "' claims OpenCL kernels but none of its cases "
                  "can run on the device; add a device-portable case to portable_cases()");
  }
  MESSAGE(fmt::format("ops with OpenCL kernels ({}): {}", covered.size(),
                      fmt::join(covered, ", ")));
  MESSAGE(fmt::format("ops WITHOUT OpenCL kernels yet ({}): {}", missing.size(),
                      fmt::join(missing, ", ")));
  MESSAGE(fmt::format("op-table cases that cannot run on a device ({}; they capture CPU "
                      "tensors):\n  {}", unportable.size(), fmt::join(unportable, "\n  ")));
  CHECK_MESSAGE(missing.empty(), "every op of the op table must have OpenCL kernels");
  CHECK(covered.size() > 40);
  CHECK(cases_run > 100);
}

TEST_CASE("opencl: tiled and naive matmul agree with the CPU (odd sizes, batches, strides)") {
  require_device();
  Generator g(5);
  struct Case {
    Shape a, b;
    bool ta;
  };
  for (const Case& c : {Case{{67, 45}, {45, 130}, false}, Case{{3, 33, 70}, {70, 65}, false},
                        Case{{2, 1, 40, 64}, {3, 64, 17}, true}}) {
    Tensor a = uniform(c.a, -1, 1, DType::f32, &g), b = uniform(c.b, -1, 1, DType::f32, &g);
    if (c.ta) a = a.transpose(-1, -2).contiguous().transpose(-1, -2);  // strided a
    const std::vector<double> want = matmul(a, b).to_vector<double>();
    for (auto k : {opencl::MatmulKernel::naive, opencl::MatmulKernel::tiled,
                   opencl::MatmulKernel::vec}) {
      opencl::set_matmul_kernel(k);
      const std::string d = compare(matmul(a.to(kDev), b.to(kDev)).to_vector<double>(), want, 1e-4);
      CHECK_MESSAGE(d.empty(), "matmul " << c.a.str() << " @ " << c.b.str() << " kernel "
                                         << int(k) << ": " << d);
    }
  }
  opencl::set_matmul_kernel(opencl::MatmulKernel::automatic);
}

TEST_CASE("opencl: Philox uniform/normal reproduce the CPU stream (strided outputs too)") {
  require_device();
  for (DType dt : {DType::f32, DType::f64}) {
    
    Tensor c = empty({5, 37}, dt), d = empty({37, 5}, TensorOptions(dt).device(kDev)).t();
    dev_backend().uniform(d.kview(), 77, 1000);
    cpu_backend().uniform(c.kview(), 77, 1000);
    CHECK(d.to_vector<double>() == c.to_vector<double>());  // bit for bit
    dev_backend().normal(d.kview(), 78, 5);
    cpu_backend().normal(c.kview(), 78, 5);
    CHECK(compare(d.to_vector<double>(), c.to_vector<double>(), 1e-12).empty());
  }
}

TEST_CASE("opencl: adam, sgd and adagrad steps match the CPU") {
  require_device();
  Generator g(9);
  for (DType dt : {DType::f32, DType::f64}) {
    auto mk = [&](double lo, double hi) { return uniform({1000}, lo, hi, dt, &g); };
    Tensor p = mk(-1, 1), gr = mk(-1, 1), m = mk(-0.1, 0.1), v = mk(0, 0.1);
    auto dev = [](const Tensor& t) { return t.to(kDev); };
    Tensor dp = dev(p), dg = dev(gr), dm = dev(m), dv = dev(v);
    for (bool decoupled : {false, true}) {
      AdamStepArgs a{.lr = 0.01, .weight_decay = 0.1, .decoupled = decoupled,
                     .bias_correction1 = 0.1, .bias_correction2 = 0.01};
      cpu_backend().adam_step(p.kview(), gr.kview(), m.kview(), v.kview(), a);
      dev_backend().adam_step(dp.kview(), dg.kview(), dm.kview(), dv.kview(), a);
    }
    for (bool nesterov : {false, true}) {
      SgdStepArgs s{.lr = 0.1, .momentum = 0.9, .dampening = 0.1, .weight_decay = 0.01,
                    .nesterov = nesterov, .first_step = !nesterov};
      cpu_backend().sgd_step(p.kview(), gr.kview(), m.kview(), s);
      dev_backend().sgd_step(dp.kview(), dg.kview(), dm.kview(), s);
    }
    AdagradStepArgs ad{.lr = 0.05, .eps = 1e-10, .weight_decay = 0.01};
    cpu_backend().adagrad_step(p.kview(), gr.kview(), v.kview(), ad);
    dev_backend().adagrad_step(dp.kview(), dg.kview(), dv.kview(), ad);
    const double tol = dt == DType::f64 ? 1e-12 : 1e-5;
    CHECK(compare(dp.to_vector<double>(), p.to_vector<double>(), tol).empty());
    CHECK(compare(dm.to_vector<double>(), m.to_vector<double>(), tol).empty());
    CHECK(compare(dv.to_vector<double>(), v.to_vector<double>(), tol).empty());
  }
}

TEST_CASE("opencl: the spirals MLP trains 20 steps along the CPU loss curve") {
  require_device();
  auto train = [](Device dev, opencl::PoolStats* stats) {
    Generator data_gen(42);
    const data::Spirals ds = data::make_spirals(100, 0.02, data_gen);
    manual_seed(42);
    auto model = std::make_shared<nn::Sequential>(
        std::make_shared<nn::Linear>(2, 32), std::make_shared<nn::Tanh>(),
        std::make_shared<nn::Linear>(32, 32), std::make_shared<nn::Tanh>(),
        std::make_shared<nn::Linear>(32, 2));
    model->to(dev);
    nn::CrossEntropyLoss ce;
    optim::AdamW opt(model->parameters(), {.lr = 0.01, .weight_decay = 0.01});
    Generator batch_gen(43);
    std::vector<double> losses;
    if (stats) opencl::reset_pool_stats(kDev.index);
    for (int step = 0; step < 20; ++step) {
      data::Batch b = data::sample_batch(ds.x, ds.y, 64, batch_gen);
      Tensor loss = ce(model->forward(b.x.to(dev)), b.y.to(dev));
      opt.zero_grad();
      loss.backward();
      opt.step();
      losses.push_back(loss.item<double>());
    }
    if (stats) *stats = opencl::pool_stats(kDev.index);
    return losses;
  };
  const std::vector<double> cpu = train(Device::cpu(), nullptr);
  opencl::PoolStats st;
  const std::vector<double> dev = train(kDev, &st);
  MESSAGE(fmt::format("MLP losses cpu {:.5f}", fmt::join(cpu, " ")));
  MESSAGE(fmt::format("MLP losses opencl {:.5f}", fmt::join(dev, " ")));
  MESSAGE(fmt::format("buffer pool over 20 steps: {} hits, {} misses, hit rate {:.1f}%", st.hits,
                      st.misses, 100 * st.hit_rate()));
  const std::string d = compare(dev, cpu, 1e-3);
  CHECK_MESSAGE(d.empty(), "loss curves differ: " << d);
  auto avg = [](const std::vector<double>& v, size_t b, size_t e) {
    double s = 0;
    for (size_t i = b; i < e; ++i) s += v[i];
    return s / double(e - b);
  };
  CHECK(avg(cpu, 15, 20) < avg(cpu, 0, 5));  // it learns
  CHECK(st.hit_rate() > 0.9);
}

// Every path of the row and tree-reduction kernels (reduce.cl, norm.cl, loss.cl, the wg_sum and
// wg_max trees of common.cl) against the CPU, forward and backward, in f64 and f32. The host
// picks reduce_seq (one item per output) for R <= 32 or for >= 1024 outputs of R <= 1024, and
// reduce_wg otherwise: 64 items per output, each striding over R, then a tree. The sizes reach
// items with no element (R < 64), exact multiples of the group, one-element tails, many strides
// (4097, 70000), several groups (rows), strided and multi-dim reduced dims, and both host paths.
TEST_CASE("opencl: reductions, softmax, layer norm and cross-entropy on every kernel path") {
  require_device();
  Generator g(21);
  auto u = [&](const Shape& s) { return uniform(s, -2, 2, DType::f64, &g).requires_grad_(true); };
  int checked = 0;
  auto check = [&](const std::string& what, std::vector<Tensor> in, TensorFn fn) {
    const OpCase c{what, std::move(in), std::move(fn)};
    for (DType dt : {DType::f64, DType::f32}) {
      const std::string dts = fmt::format("{}", dt);
      const Run cpu = run_case(c, dt, Device::cpu()), dev = run_case(c, dt, kDev);
      const double tol = dt == DType::f64 ? 1e-9 : 2e-4;
      const std::string fw = compare(dev.y, cpu.y, tol);
      CHECK_MESSAGE(fw.empty(), what << " " << dts << " forward: " << fw);
      REQUIRE(dev.grads.size() == cpu.grads.size());
      for (size_t i = 0; i < dev.grads.size(); ++i) {
        const std::string bw = compare(dev.grads[i], cpu.grads[i], tol);
        CHECK_MESSAGE(bw.empty(), what << " " << dts << " grad " << i << ": " << bw);
      }
    }
    ++checked;
  };
  const std::vector<int64_t> lengths = {1, 31, 32, 33, 63, 64, 65, 255, 256, 257, 4097, 70000};
  for (int64_t R : lengths) {
    for (int64_t rows : {1, 3}) {
      const std::string s = fmt::format("[{},{}]", rows, R);
      check("sum " + s, {u({rows, R})}, [](const auto& in) { return sum(in[0], {1}); });
      check("amax " + s, {u({rows, R})}, [](const auto& in) { return amax(in[0], {1}); });
      check("amin " + s, {u({rows, R})}, [](const auto& in) { return amin(in[0], {1}); });
      check("softmax " + s, {u({rows, R})}, [](const auto& in) { return softmax(in[0], 1); });
      check("log_softmax " + s, {u({rows, R})},
            [](const auto& in) { return log_softmax(in[0], 1); });
      check("layer_norm gamma beta " + s, {u({rows, R}), u({R}), u({R})},
            [](const auto& in) { return layer_norm(in[0], in[1], in[2]); });
      check("layer_norm " + s, {u({rows, R})}, [](const auto& in) { return layer_norm(in[0]); });
      std::vector<int64_t> t = {R - 1, 0, R / 2};
      t.resize(size_t(rows));
      check("cross_entropy smoothed " + s, {u({rows, R}), from_vector(t, {rows})},
            [](const auto& in) {
              return cross_entropy(in[0], in[1], {.label_smoothing = 0.1,
                                                  .reduction = Reduction::none});
            });
    }
  }
  // the whole tensor, strided and multi-dim reduced dims, both host paths with many outputs
  check("sum all [70000]", {u({70000})}, [](const auto& in) { return sum(in[0]); });
  check("sum dim 0 [257,5]", {u({257, 5})}, [](const auto& in) { return sum(in[0], {0}); });
  check("amax dim 0 of a transpose [3,4097]^T", {u({3, 4097})},
        [](const auto& in) { return amax(in[0].t(), {0}); });
  check("sum dims 0,2 [33,3,65]", {u({33, 3, 65})},
        [](const auto& in) { return sum(in[0], {0, 2}); });
  check("amin dims 0,2 [33,3,65]", {u({33, 3, 65})},
        [](const auto& in) { return amin(in[0], {0, 2}); });
  check("sum [1100,40] (seq, many outputs)", {u({1100, 40})},
        [](const auto& in) { return sum(in[0], {1}); });
  check("amax dim 0 [40,1100] (seq, strided)", {u({40, 1100})},
        [](const auto& in) { return amax(in[0], {0}); });
  check("sum [1100,1025] (work-group, many outputs)", {u({1100, 1025})},
        [](const auto& in) { return sum(in[0], {1}); });
  check("softmax dim 0 [257,3]", {u({257, 3})}, [](const auto& in) { return softmax(in[0], 0); });
  // layer norm's parameter gradients sum over rows: one item per column, many rows
  check("layer_norm gamma beta [300,65]", {u({300, 65}), u({65}), u({65})},
        [](const auto& in) { return layer_norm(in[0], in[1], in[2]); });
  check("cross_entropy mean, row 1 ignored [3,4097]",
        {u({3, 4097}), from_vector(std::vector<int64_t>{5, -100, 4096}, {3})},
        [](const auto& in) { return cross_entropy(in[0], in[1]); });
  CHECK(checked == 12 * 2 * 8 + 11);
}

// The OpenCL table and its CPU fallback are generated from ops/kernel_list.h: the table has
// exactly the kernels marked cpu_opencl, and the fallback fills every entry of an empty table.
TEST_CASE("opencl: the kernel table and the CPU fallback cover every kernel of the list") {
  const bool was = opencl::cpu_fallback();
  opencl::set_cpu_fallback(false);
  const Backend* table = backend_for(kDev);
  opencl::set_cpu_fallback(was);
  REQUIRE(table != nullptr);
  const Backend none{.name = "none"};
  const Backend filled = ocl::with_cpu_fallback(none);
  int kernels = 0;
#define GRAFT_ON_OPENCL_cpu_opencl true
#define GRAFT_ON_OPENCL_cpu false
#define GRAFT_KERNEL(k, roles, devices, params)                           \
  ++kernels;                                                              \
  CHECK_MESSAGE(bool(filled.k), #k ": no CPU fallback");                  \
  CHECK_MESSAGE(bool(table->k) == GRAFT_ON_OPENCL_##devices, #k ": " #devices);
#include "ops/kernel_list.h"
#undef GRAFT_ON_OPENCL_cpu_opencl
#undef GRAFT_ON_OPENCL_cpu
  CHECK(kernels > 0);
}
