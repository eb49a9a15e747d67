// OpenCL C for the elementwise ops, generated from the functors of ops/functors.h, so that the
// math is written once for the CPU, the compile-time graphs and OpenCL.
//
// How: each functor is a template on its value type T. Instantiated with `Sym`, a value that
// records instead of computing, every operation appends one SSA line (`T t3 = t1 * t2;`) to the
// function being emitted. The scalar parameter `a` (pow_scalar's exponent, ...) is a plain
// double in the functor signature, so a sentinel value stands for it and literals equal to the
// sentinel (or sentinel - 1) print as `a` (or `a - 1`).
#include <string>

#include <fmt/format.h>

#include "ops/functors.h"
#include "ops/kernels.h"
#include "ops/opencl/runtime.h"

namespace graft::ocl {
namespace gen {

constexpr double kAlpha = 1234.5;  // stands for the op's scalar `a`

struct Emitter {
  std::string body;
  int n = 0;
  bool f32 = true;
};
thread_local Emitter* g_em = nullptr;

struct Sym {
  std::string v;
  Sym() = default;
  explicit Sym(std::string s) : v(std::move(s)) {}
  Sym(double c) {  // NOLINT: implicit, as T(0.5) in the functors
    if (c == kAlpha) {
      v = "a";
    } else if (c == kAlpha - 1) {
      v = "(a - (T)1)";
    } else {
      std::string s = fmt::format("{:.17g}", c);
      if (s.find_first_of(".en") == std::string::npos) s += ".0";
      v = "(" + s + (g_em->f32 ? "f" : "") + ")";
    }
  }
};
struct SymBool {
  std::string v;
};

inline std::string fresh(const char* type, const std::string& expr) {
  std::string name = fmt::format("t{}", g_em->n++);
  g_em->body += fmt::format("  {} {} = {};\n", type, name, expr);
  return name;
}
inline Sym tmp(const std::string& e) { return Sym(fresh("T", e)); }
inline SymBool tmpb(const std::string& e) { return SymBool{fresh("int", e)}; }

inline Sym operator+(const Sym& a, const Sym& b) { return tmp(a.v + " + " + b.v); }
inline Sym operator-(const Sym& a, const Sym& b) { return tmp(a.v + " - " + b.v); }
inline Sym operator*(const Sym& a, const Sym& b) { return tmp(a.v + " * " + b.v); }
inline Sym operator/(const Sym& a, const Sym& b) { return tmp(a.v + " / " + b.v); }
inline Sym operator-(const Sym& a) { return tmp("-" + a.v); }
inline Sym& operator*=(Sym& a, const Sym& b) { return a = a * b; }
inline Sym& operator+=(Sym& a, const Sym& b) { return a = a + b; }
inline SymBool operator>(const Sym& a, const Sym& b) { return tmpb(a.v + " > " + b.v); }
inline SymBool operator<(const Sym& a, const Sym& b) { return tmpb(a.v + " < " + b.v); }
inline SymBool operator>=(const Sym& a, const Sym& b) { return tmpb(a.v + " >= " + b.v); }
inline SymBool operator<=(const Sym& a, const Sym& b) { return tmpb(a.v + " <= " + b.v); }

#define GRAFT_SYM_FN(name, cl) \
  inline Sym name(const Sym& x) { return tmp(std::string(cl) + "(" + x.v + ")"); }
GRAFT_SYM_FN(exp, "exp") GRAFT_SYM_FN(log, "log") GRAFT_SYM_FN(log1p, "log1p") GRAFT_SYM_FN(sqrt, "sqrt")
GRAFT_SYM_FN(abs, "fabs") GRAFT_SYM_FN(tanh, "tanh") GRAFT_SYM_FN(sin, "sin")
GRAFT_SYM_FN(cos, "cos") GRAFT_SYM_FN(erf, "erf")
#undef GRAFT_SYM_FN
inline Sym pow(const Sym& x, const Sym& y) { return tmp("pow(" + x.v + ", " + y.v + ")"); }
// std::max / std::min semantics: max(a, b) = a < b ? b : a, min(a, b) = b < a ? b : a
inline Sym max(const Sym& a, const Sym& b) { return tmp(a.v + " < " + b.v + " ? " + b.v + " : " + a.v); }
inline Sym min(const Sym& a, const Sym& b) { return tmp(b.v + " < " + a.v + " ? " + b.v + " : " + a.v); }
inline Sym sel(const SymBool& c, const Sym& a, const Sym& b) {
  return tmp(c.v + " ? " + a.v + " : " + b.v);
}

// One OpenCL C function `T <name>(params) { ... return <result>; }` from a recording lambda.
template <class F> std::string function(bool f32, const std::string& sig, F&& body) {
  Emitter em;
  em.f32 = f32;
  g_em = &em;
  Sym r = body();
  g_em = nullptr;
  return fmt::format("inline T {} {{\n{}  return {};\n}}\n", sig, em.body, r.v);
}

}  // namespace gen

std::string generate_elementwise(DType t) {
  using gen::Sym;
  const bool f32 = t == DType::f32;
  std::string out = "// ---- generated from ops/functors.h (ops/opencl/codegen.cpp)\n";
#define GRAFT_GEN_UNARY(name, F, ...)                                                       \
  out += gen::function(f32, "unf_" #name "(T x, T a)",                                     \
                       [] { return fn::F::f<Sym>(Sym("x"), gen::kAlpha); });               \
  out += gen::function(f32, "undf_" #name "(T x, T y, T dy, T a)", [] {                    \
    return fn::F::df<Sym>(Sym("x"), Sym("y"), Sym("dy"), gen::kAlpha);                     \
  });                                                                                       \
  out += "UNARY_KERNELS(" #name ")\n";
  GRAFT_UNARY_OPS(GRAFT_GEN_UNARY)
#undef GRAFT_GEN_UNARY
#define GRAFT_GEN_BINARY(name, F)                                                           \
  out += gen::function(f32, "binf_" #name "(T x, T z)",                                    \
                       [] { return fn::F::f<Sym>(Sym("x"), Sym("z")); });                  \
  out += "BINARY_KERNEL(" #name ")\n";
  GRAFT_BINARY_OPS(GRAFT_GEN_BINARY)
#undef GRAFT_GEN_BINARY
  return out;
}

std::string generate_compare() {
  std::string out;
#define GRAFT_GEN_COMPARE(name, op) out += "COMPARE_KERNEL(" #name ", " #op ")\n";
  GRAFT_COMPARE_OPS(GRAFT_GEN_COMPARE)
#undef GRAFT_GEN_COMPARE
  return out;
}

}  // namespace graft::ocl
