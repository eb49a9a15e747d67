// Enumerates the op table: every op must have cases; every differentiable case passes
// gradcheck (and gradgradcheck) in float64; every case gives the same values and gradients
// through the fast CPU kernels and the scalar reference kernels, in float64 and float32.
#include <doctest/doctest.h>

#include <cmath>

#include "autograd/functions.h"
#include "autograd/gradcheck.h"
#include "autograd/node.h"
#include "autograd/op_table.h"
#include "tests/autograd/op_case_run.h"

using namespace graft;

namespace {

struct RefGuard {
  explicit RefGuard(bool on) { set_use_reference_kernels(on); }
  ~RefGuard() { set_use_reference_kernels(false); }
};

using Run = test::CaseRun;

Run run_case(const OpCase& c, DType dt, bool reference) {
  RefGuard guard(reference);
  return test::run_op_case(c, dt);
}

void check_close(const std::vector<double>& a, const std::vector<double>& b, double tol,
                 const std::string& what) {
  REQUIRE_MESSAGE(a.size() == b.size(), what);
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(a[i]) && std::isnan(b[i])) continue;
    if (!(std::abs(a[i] - b[i]) <= tol * (1 + std::abs(b[i])))) {
      FAIL_CHECK(what << " element " << i << ": fast " << a[i] << " vs reference " << b[i]);
      return;
    }
  }
}

}  // namespace

TEST_CASE("op table: every op has at least one test case") {
  REQUIRE(op_table().size() > 50);
  for (const OpInfo& op : op_table()) {
    Generator g(1);
    INFO("op: " << op.name);
    CHECK_MESSAGE(!op.cases(g).empty(), "op '" << op.name << "' has no gradcheck case");
    CHECK_MESSAGE(op.has_kernels(cpu_backend()), "op '" << op.name << "' lacks CPU kernels");
  }
}

TEST_CASE("op table: gradcheck and gradgradcheck (float64) for every differentiable op") {
  int checked = 0;
  for (const OpInfo& op : op_table()) {
    if (!op.differentiable) continue;
    Generator g(7);
    for (const OpCase& c : op.cases(g)) {
      std::string what = std::string(op.name) + " [" + c.label + "]";
      GradcheckResult r = gradcheck(c.fn, c.inputs, c.eps, c.atol);
      CHECK_MESSAGE(r.ok, what << ": " << r.message);
      if (c.double_backward) {
        GradcheckResult r2 = gradgradcheck(c.fn, c.inputs, c.eps, c.atol);
        CHECK_MESSAGE(r2.ok, what << " (double backward): " << r2.message);
      }
      ++checked;
    }
  }
  CHECK(checked > 50);
}

TEST_CASE("op table: fast kernels match the scalar reference kernels (f64 and f32)") {
  for (const OpInfo& op : op_table()) {
    for (DType dt : {DType::f64, DType::f32}) {
      Generator g(11);
      for (const OpCase& c : op.cases(g)) {
        std::string what = fmt::format("{} [{}] {}", op.name, c.label, dt);
        Run fast = run_case(c, dt, false);
        Run ref = run_case(c, dt, true);
        double tol = dt == DType::f64 ? 1e-10 : 2e-4;
        check_close(fast.y, ref.y, tol, what + " forward");
        REQUIRE(fast.grads.size() == ref.grads.size());
        for (size_t i = 0; i < fast.grads.size(); ++i)
          check_close(fast.grads[i], ref.grads[i], tol, what + fmt::format(" grad {}", i));
      }
    }
  }
}
