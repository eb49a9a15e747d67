// graft::ct — static expression graphs. An expression over placeholders is a C++ value whose
// *type* is its graph:
//
//   ct::Var<0> x; ct::Var<1> y;
//   auto f = sin(x) * y + exp(x / y);
//   auto [v, dx, dy] = ct::value_and_grad(f, 1.5, 2.0);   // reverse mode, no tape
//   fmt::print("{}\n", ct::to_string(ct::grad(f, x)));     // the derived expression
//
// The per-op math and derivative rules are the functors of ops/functors.h (the same ones the
// tape kernels use): nothing is written twice. Two ways to differentiate:
//  * value_and_grad: reverse mode. A "tape" struct mirroring the expression type caches each
//    node's value in the forward sweep; the backward sweep is a template recursion that the
//    compiler inlines into straight-line code. Constant subtrees have no backward at all
//    (`if constexpr`), so they vanish from the generated code.
//  * grad(f, x): symbolic forward derivative as a new expression type, simplified at compile
//    time (d(const) = Zero, Zero * e = Zero, One * e = e, e + Zero = e) — for printing and
//    for static_assert-level tests.
// Works for T = float, double and xsimd batches; graft::fuse (autograd/fuse.h) turns an
// expression into one tape node with one fused forward loop and one fused backward loop.
#pragma once
#include <array>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

#include <fmt/format.h>

#include "ops/functors.h"
#include "ops/kernels.h"

namespace graft::ct {

// ------------------------------------------------------------------ node types
template <int I> struct Var {
  static constexpr int index = I;
};
struct Const {
  double v;
};
struct Zero {};
struct One {};
template <class F, class A> struct Un {  // F(a; alpha)
  A a;
  double alpha = 0.0;
};
template <class F, class A, class B> struct Bin {  // F(a, b)
  A a;
  B b;
};
template <class F, class A> struct DUn {  // F'(a): derivative of a unary op at a
  A a;
  double alpha = 0.0;
};
template <class F, class A, class B, bool WrtA> struct DBin {  // dF/da or dF/db at (a, b)
  A a;
  B b;
};
// Root reductions (used by fuse over tensors; for scalars they are the identity).
template <class E> struct Sum { E e; };
template <class E> struct Mean { E e; };

template <class E> struct is_expr : std::false_type {};
template <int I> struct is_expr<Var<I>> : std::true_type {};
template <> struct is_expr<Const> : std::true_type {};
template <> struct is_expr<Zero> : std::true_type {};
template <> struct is_expr<One> : std::true_type {};
template <class F, class A> struct is_expr<Un<F, A>> : std::true_type {};
template <class F, class A, class B> struct is_expr<Bin<F, A, B>> : std::true_type {};
template <class F, class A> struct is_expr<DUn<F, A>> : std::true_type {};
template <class F, class A, class B, bool W> struct is_expr<DBin<F, A, B, W>> : std::true_type {};
template <class E>
concept Expr = is_expr<std::remove_cvref_t<E>>::value;

// Whether an expression depends on any variable (constant subtrees get no backward code).
template <class E> struct has_var : std::false_type {};
template <int I> struct has_var<Var<I>> : std::true_type {};
template <class F, class A> struct has_var<Un<F, A>> : has_var<A> {};
template <class F, class A, class B>
struct has_var<Bin<F, A, B>> : std::bool_constant<has_var<A>::value || has_var<B>::value> {};
template <class F, class A> struct has_var<DUn<F, A>> : has_var<A> {};
template <class F, class A, class B, bool W>
struct has_var<DBin<F, A, B, W>> : std::bool_constant<has_var<A>::value || has_var<B>::value> {};

// Number of variables an expression uses: 1 + the largest index.
template <class E> struct arity : std::integral_constant<int, 0> {};
template <int I> struct arity<Var<I>> : std::integral_constant<int, I + 1> {};
template <class F, class A> struct arity<Un<F, A>> : arity<A> {};
template <class F, class A> struct arity<DUn<F, A>> : arity<A> {};
template <class F, class A, class B>
struct arity<Bin<F, A, B>> : std::integral_constant<int, std::max(arity<A>::value, arity<B>::value)> {};
template <class F, class A, class B, bool W>
struct arity<DBin<F, A, B, W>> : std::integral_constant<int, std::max(arity<A>::value, arity<B>::value)> {};

// ------------------------------------------------------------------ building expressions
template <class E> auto lift(E&& e) {
  if constexpr (Expr<E>) return std::remove_cvref_t<E>(e);
  else return Const{double(e)};
}
template <class A, class B>
concept Operands = (Expr<A> || Expr<B>) && (Expr<A> || std::is_arithmetic_v<std::remove_cvref_t<A>>) &&
                   (Expr<B> || std::is_arithmetic_v<std::remove_cvref_t<B>>);

// One function per op of the lists in ops/kernels.h: exp(x), maximum(x, y), pow_scalar(x, 2.5),
// ... A unary op's scalar parameter defaults to the functor's `default_alpha` (0 if it has none).
template <class F> constexpr double default_alpha() {
  if constexpr (requires { F::default_alpha; }) return F::default_alpha;
  else return 0.0;
}
#define GRAFT_CT_UNARY(name, F, ...)                                        \
  template <Expr A> auto name(A&& a, double alpha = default_alpha<fn::F>()) { \
    return Un<fn::F, std::remove_cvref_t<A>>{a, alpha};                     \
  }
GRAFT_UNARY_OPS(GRAFT_CT_UNARY)
#undef GRAFT_CT_UNARY
// pow(x, c) with a number c is pow_scalar; every other pair of operands is a Bin.
template <class F, class A, class B> auto make_bin(A&& a, B&& b) {
  if constexpr (std::is_same_v<F, fn::Pow> && !Expr<B>)
    return Un<fn::PowScalar, decltype(lift(a))>{lift(a), double(b)};
  else return Bin<F, decltype(lift(a)), decltype(lift(b))>{lift(a), lift(b)};
}
#define GRAFT_CT_BINARY(name, F) \
  template <class A, class B>    \
    requires Operands<A, B>      \
  auto name(A&& a, B&& b) { return make_bin<fn::F>(a, b); }
GRAFT_BINARY_OPS(GRAFT_CT_BINARY)
#undef GRAFT_CT_BINARY
template <Expr A> auto operator-(A&& a) { return neg(a); }
template <class A, class B> requires Operands<A, B> auto operator+(A&& a, B&& b) { return add(a, b); }
template <class A, class B> requires Operands<A, B> auto operator-(A&& a, B&& b) { return sub(a, b); }
template <class A, class B> requires Operands<A, B> auto operator*(A&& a, B&& b) { return mul(a, b); }
template <class A, class B> requires Operands<A, B> auto operator/(A&& a, B&& b) { return div(a, b); }
template <Expr A> auto square(A&& a) { return Un<fn::PowScalar, std::remove_cvref_t<A>>{a, 2.0}; }
template <Expr E> Sum<std::remove_cvref_t<E>> sum(E&& e) { return {e}; }
template <Expr E> Mean<std::remove_cvref_t<E>> mean(E&& e) { return {e}; }

// ------------------------------------------------------------------ evaluation
template <class T> inline T splat(double v) {
  if constexpr (std::is_arithmetic_v<T>) return T(v);
  else return T(typename T::value_type(v));
}

// env: the values of the variables (scalars or SIMD batches).
template <class T, size_t N> T eval(const Const& c, const std::array<T, N>&) { return splat<T>(c.v); }
template <class T, size_t N> T eval(const Zero&, const std::array<T, N>&) { return splat<T>(0); }
template <class T, size_t N> T eval(const One&, const std::array<T, N>&) { return splat<T>(1); }
template <class T, size_t N, int I> T eval(const Var<I>&, const std::array<T, N>& env) {
  static_assert(I < int(N), "ct::eval: not enough values for the expression's variables");
  return env[I];
}
template <class T, size_t N, class F, class A> T eval(const Un<F, A>& e, const std::array<T, N>& env) {
  return F::f(eval(e.a, env), e.alpha);
}
template <class T, size_t N, class F, class A, class B>
T eval(const Bin<F, A, B>& e, const std::array<T, N>& env) {
  return F::f(eval(e.a, env), eval(e.b, env));
}
template <class T, size_t N, class F, class A> T eval(const DUn<F, A>& e, const std::array<T, N>& env) {
  T x = eval(e.a, env);
  return F::df(x, F::f(x, e.alpha), splat<T>(1), e.alpha);
}
template <class T, size_t N, class F, class A, class B, bool W>
T eval(const DBin<F, A, B, W>& e, const std::array<T, N>& env) {
  T x = eval(e.a, env), z = eval(e.b, env), y = F::f(x, z);
  if constexpr (W) return F::dx(x, z, y, splat<T>(1));
  else return F::dz(x, z, y, splat<T>(1));
}

// ------------------------------------------------------------------ reverse mode
// Tape<E, T>: the expression's node values, laid out as the expression's own type tree.
// fwd() fills them; bwd(adj, g) pushes the adjoint `adj` of this node down to g[var].
template <class E, class T> struct Tape;

template <int I, class T> struct Tape<Var<I>, T> {
  T v;
  explicit Tape(const Var<I>&) {}
  template <size_t N> void fwd(const std::array<T, N>& env) { v = env[I]; }
  template <size_t N> void bwd(T adj, std::array<T, N>& g) const { g[I] += adj; }  // dx += adj
};
template <class T> struct Tape<Const, T> {
  T v;
  explicit Tape(const Const& c) : v(splat<T>(c.v)) {}
  template <size_t N> void fwd(const std::array<T, N>&) {}
  template <size_t N> void bwd(T, std::array<T, N>&) const {}  // constants have no gradient
};
template <class F, class A, class T> struct Tape<Un<F, A>, T> {
  Tape<A, T> a;
  T v;
  double alpha;
  explicit Tape(const Un<F, A>& e) : a(e.a), alpha(e.alpha) {}
  template <size_t N> void fwd(const std::array<T, N>& env) {
    a.fwd(env);
    v = F::f(a.v, alpha);
  }
  template <size_t N> void bwd(T adj, std::array<T, N>& g) const {
    if constexpr (has_var<A>::value) a.bwd(F::df(a.v, v, adj, alpha), g);  // da += F'(a) adj
  }
};
template <class F, class A, class B, class T> struct Tape<Bin<F, A, B>, T> {
  Tape<A, T> a;
  Tape<B, T> b;
  T v;
  explicit Tape(const Bin<F, A, B>& e) : a(e.a), b(e.b) {}
  template <size_t N> void fwd(const std::array<T, N>& env) {
    a.fwd(env);
    b.fwd(env);
    v = F::f(a.v, b.v);
  }
  template <size_t N> void bwd(T adj, std::array<T, N>& g) const {
    if constexpr (has_var<A>::value) a.bwd(F::dx(a.v, b.v, v, adj), g);  // da += dF/da adj
    if constexpr (has_var<B>::value) b.bwd(F::dz(a.v, b.v, v, adj), g);  // db += dF/db adj
  }
};

// value and gradient of f at `args` (one argument per variable, same type T).
template <Expr E, class T, class... Ts> auto value_and_grad(const E& f, T x0, Ts... xs) {
  constexpr size_t N = 1 + sizeof...(Ts);
  static_assert(arity<E>::value <= int(N), "ct::value_and_grad: too few arguments for the expression");
  std::array<T, N> env{x0, T(xs)...};
  std::array<T, N> g;
  g.fill(splat<T>(0));
  Tape<E, T> tape(f);
  tape.fwd(env);
  tape.bwd(splat<T>(1), g);
  return std::tuple_cat(std::make_tuple(tape.v), std::tuple_cat(g));
}
template <Expr E, class T, class... Ts> T value(const E& f, T x0, Ts... xs) {
  std::array<T, 1 + sizeof...(Ts)> env{x0, T(xs)...};
  return eval(f, env);
}

// ------------------------------------------------------------------ symbolic derivative
// Smart constructors that simplify Zero and One at compile time.
template <class A, class B> auto s_mul(const A& a, const B& b) {
  if constexpr (std::is_same_v<A, Zero> || std::is_same_v<B, Zero>) return Zero{};
  else if constexpr (std::is_same_v<A, One>) return b;
  else if constexpr (std::is_same_v<B, One>) return a;
  else return Bin<fn::Mul, A, B>{a, b};
}
template <class A, class B> auto s_add(const A& a, const B& b) {
  if constexpr (std::is_same_v<A, Zero>) return b;
  else if constexpr (std::is_same_v<B, Zero>) return a;
  else return Bin<fn::Add, A, B>{a, b};
}
template <class A, class B> auto s_sub(const A& a, const B& b) {
  if constexpr (std::is_same_v<B, Zero>) return a;
  else if constexpr (std::is_same_v<A, Zero>) return Un<fn::Neg, B>{b, 0.0};
  else return Bin<fn::Sub, A, B>{a, b};
}

// d(e)/d(Var<I>)
template <int I> Zero d(const Const&, Var<I>) { return {}; }
template <int I> Zero d(const Zero&, Var<I>) { return {}; }
template <int I> Zero d(const One&, Var<I>) { return {}; }
template <int I, int J> auto d(const Var<J>&, Var<I>) {
  if constexpr (I == J) return One{};
  else return Zero{};
}
template <int I, class F, class A> auto d(const Un<F, A>& e, Var<I> x) {
  return s_mul(DUn<F, A>{e.a, e.alpha}, d(e.a, x));  // d F(a) = F'(a) da
}
template <int I, class F, class A, class B> auto d(const Bin<F, A, B>& e, Var<I> x) {
  if constexpr (std::is_same_v<F, fn::Add>) return s_add(d(e.a, x), d(e.b, x));  // da + db
  else if constexpr (std::is_same_v<F, fn::Sub>) return s_sub(d(e.a, x), d(e.b, x));  // da - db
  else if constexpr (std::is_same_v<F, fn::Mul>)  // da b + a db
    return s_add(s_mul(d(e.a, x), e.b), s_mul(e.a, d(e.b, x)));
  else  // dF/da da + dF/db db
    return s_add(s_mul(DBin<F, A, B, true>{e.a, e.b}, d(e.a, x)),
                 s_mul(DBin<F, A, B, false>{e.a, e.b}, d(e.b, x)));
}
template <int I, class F, class A> auto d(const DUn<F, A>&, Var<I>) {
  static_assert(sizeof(F) == 0, "ct::grad: second derivatives of static graphs are not supported");
}
// The derivative expression of f with respect to x.
template <Expr E, int I> auto grad(const E& f, Var<I> x) { return d(f, x); }

// ------------------------------------------------------------------ printing
// The op's name in the lists of ops/kernels.h; the four arithmetic ops print as infix symbols.
template <class F> constexpr const char* op_name() {
#define GRAFT_CT_NAME(name, G, ...) if constexpr (std::is_same_v<F, fn::G>) return #name; else
  GRAFT_UNARY_OPS(GRAFT_CT_NAME) GRAFT_BINARY_OPS(GRAFT_CT_NAME) return "?";
#undef GRAFT_CT_NAME
}
template <class F> constexpr const char* infix() {
  if constexpr (std::is_same_v<F, fn::Add>) return "+";
  else if constexpr (std::is_same_v<F, fn::Sub>) return "-";
  else if constexpr (std::is_same_v<F, fn::Mul>) return "*";
  else if constexpr (std::is_same_v<F, fn::Div>) return "/";
  else return nullptr;
}
template <class F> constexpr bool is_infix() { return infix<F>() != nullptr; }

inline std::string var_name(int i) {
  static const char* names[] = {"x", "y", "z", "w"};
  return i < 4 ? names[i] : fmt::format("x{}", i);
}
template <int I> std::string to_string(const Var<I>&) { return var_name(I); }
inline std::string to_string(const Const& c) { return fmt::format("{:g}", c.v); }
inline std::string to_string(const Zero&) { return "0"; }
inline std::string to_string(const One&) { return "1"; }
template <class F, class A> std::string to_string(const Un<F, A>& e) {
  if constexpr (std::is_same_v<F, fn::Neg>) return "-" + to_string(e.a);
  else if constexpr (std::is_same_v<F, fn::PowScalar>) return fmt::format("pow({}, {:g})", to_string(e.a), e.alpha);
  else return fmt::format("{}({})", op_name<F>(), to_string(e.a));
}
template <class F, class A, class B> std::string to_string(const Bin<F, A, B>& e) {
  if constexpr (is_infix<F>()) return fmt::format("({} {} {})", to_string(e.a), infix<F>(), to_string(e.b));
  else return fmt::format("{}({}, {})", op_name<F>(), to_string(e.a), to_string(e.b));
}
template <class F, class A> std::string to_string(const DUn<F, A>& e) {
  if constexpr (std::is_same_v<F, fn::PowScalar>) return fmt::format("pow'({}, {:g})", to_string(e.a), e.alpha);
  else if constexpr (std::is_same_v<F, fn::Neg>) return "-1";
  else return fmt::format("{}'({})", op_name<F>(), to_string(e.a));
}
template <class F, class A, class B, bool W> std::string to_string(const DBin<F, A, B, W>& e) {
  return fmt::format("d{}/d{}({}, {})", is_infix<F>() ? std::string("(") + infix<F>() + ")" : op_name<F>(),
                     W ? "a" : "b", to_string(e.a), to_string(e.b));
}
template <class E> std::string to_string(const Sum<E>& s) { return "sum(" + to_string(s.e) + ")"; }
template <class E> std::string to_string(const Mean<E>& s) { return "mean(" + to_string(s.e) + ")"; }

}  // namespace graft::ct
