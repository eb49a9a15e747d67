// graft::fuse — a static expression graph (autograd/ct.h) as ONE node on the tape.
//
//   ct::Var<0> x; ct::Var<1> y;
//   auto silu_mul = graft::fuse(x * sigmoid(x) * y, "silu_mul");
//   Tensor out = silu_mul(a, b);          // one fused forward loop (xsimd), broadcasting
//   sum(out).backward();                  // one fused backward loop: all input grads at once
//
// Forward evaluates the expression per element; backward re-evaluates it per element (cheap,
// in registers) and runs the compiler-generated reverse sweep (ct::Tape) with dy as the seed,
// writing every input's gradient in the same pass. Roots ct::sum / ct::mean reduce to a scalar.
// Limits: CPU only; double backward through a fused node is not supported (graft::Error).
#pragma once
#include <omp.h>

#include <vector>

#include "autograd/ct.h"
#include "autograd/dispatch.h"
#include "autograd/functions.h"
#include "autograd/node.h"

namespace graft {

namespace ct_detail {

template <class E> struct Root {
  using Elem = E;
  static constexpr int kind = 0;  // elementwise
  static const E& elem(const E& e) { return e; }
};
template <class E> struct Root<ct::Sum<E>> {
  using Elem = E;
  static constexpr int kind = 1;
  static const E& elem(const ct::Sum<E>& s) { return s.e; }
};
template <class E> struct Root<ct::Mean<E>> {
  using Elem = E;
  static constexpr int kind = 2;
  static const E& elem(const ct::Mean<E>& s) { return s.e; }
};

constexpr int64_t kChunk = 4096;

// out[i] = e(x0[i], x1[i], ...) ; returns the sum of out if `reduce`.
template <class T, size_t N, class E>
double forward_loop(const E& e, const std::array<const T*, N>& x, T* out, int64_t n, bool reduce) {
  using B = xsimd::batch<T>;
  constexpr int64_t W = B::size;
  int64_t chunks = (n + kChunk - 1) / kChunk;
  double total = 0;
#pragma omp parallel for reduction(+ : total) if (n >= 65536)
  for (int64_t c = 0; c < chunks; ++c) {
    int64_t lo = c * kChunk, hi = std::min(n, lo + kChunk), i = lo;
    double part = 0;
    for (; i + W <= hi; i += W) {
      std::array<B, N> env;
      for (size_t k = 0; k < N; ++k) env[k] = B::load_unaligned(x[k] + i);
      B v = ct::eval(e, env);
      if (reduce) part += double(xsimd::hadd(v));
      else v.store_unaligned(out + i);
    }
    for (; i < hi; ++i) {
      std::array<T, N> env;
      for (size_t k = 0; k < N; ++k) env[k] = x[k][i];
      T v = ct::eval(e, env);
      if (reduce) part += double(v);
      else out[i] = v;
    }
    total += part;
  }
  return total;
}

// gx_k[i] = d e / d x_k at element i, times dy[i] (or the scalar seed when dy == nullptr).
template <class T, size_t N, class E>
void backward_loop(const E& e, const std::array<const T*, N>& x, const T* dy, T seed,
                   const std::array<T*, N>& gx, int64_t n) {
  using B = xsimd::batch<T>;
  constexpr int64_t W = B::size;
  int64_t chunks = (n + kChunk - 1) / kChunk;
#pragma omp parallel for if (n >= 32768)
  for (int64_t c = 0; c < chunks; ++c) {
    int64_t lo = c * kChunk, hi = std::min(n, lo + kChunk), i = lo;
    for (; i + W <= hi; i += W) {
      std::array<B, N> env, g;
      for (size_t k = 0; k < N; ++k) env[k] = B::load_unaligned(x[k] + i), g[k] = B(T(0));
      ct::Tape<E, B> tape(e);
      tape.fwd(env);
      tape.bwd(dy ? B::load_unaligned(dy + i) : B(seed), g);
      for (size_t k = 0; k < N; ++k)
        if (gx[k]) g[k].store_unaligned(gx[k] + i);
    }
    for (; i < hi; ++i) {
      std::array<T, N> env, g;
      for (size_t k = 0; k < N; ++k) env[k] = x[k][i], g[k] = T(0);
      ct::Tape<E, T> tape(e);
      tape.fwd(env);
      tape.bwd(dy ? dy[i] : seed, g);
      for (size_t k = 0; k < N; ++k)
        if (gx[k]) gx[k][i] = g[k];
    }
  }
}

}  // namespace ct_detail

template <class RootE> class Fused {
 public:
  using R = ct_detail::Root<RootE>;
  using E = typename R::Elem;
  static constexpr size_t N = size_t(ct::arity<E>::value);

  Fused(RootE e, const char* name) : root_(std::move(e)), name_(name) {}

  template <class... Ts> Tensor operator()(const Ts&... xs) const {
    static_assert(sizeof...(Ts) == N, "fuse: pass one tensor per variable of the expression");
    return call(std::vector<Tensor>{xs...});
  }

  Tensor call(const std::vector<Tensor>& in) const {
    GRAFT_CHECK(in.size() == N, "{}: expected {} tensors, got {}", name_, N, in.size());
    if (N > 0 && in[0].defined() && !in[0].device().is_cpu()) {
      // The loops read host memory: on another device the node runs on host copies, moved
      // there and back by the differentiable to() (so gradients return to the device).
      std::vector<Tensor> host;
      for (size_t k = 0; k < N; ++k) {
        check_defined(in[k], name_);
        GRAFT_CHECK(in[k].device() == in[0].device(), "{}: inputs on different devices ({} and {})",
                    name_, in[0].device().str(), in[k].device().str());
        host.push_back(in[k].to(Device::cpu()));
      }
      return call(host).to(in[0].device());
    }
    Shape shape;
    for (size_t k = 0; k < N; ++k) {
      check_defined(in[k], name_);
      detail::check_float(in[k], name_);
      detail::check_same_dtype(in[0], in[k], name_);
      GRAFT_CHECK(in[k].device().is_cpu(), "{}: inputs on different devices (cpu and {})", name_,
                  in[k].device().str());
      shape = k == 0 ? in[k].shape() : broadcast_shapes(shape, in[k].shape(), name_);
    }
    // inputs as contiguous tensors of the broadcast shape (copies only where needed)
    std::vector<Tensor> xs;
    for (const Tensor& t : in) {
      Tensor d = t.detach();
      xs.push_back(d.shape() == shape ? d.contiguous() : d.expand(shape).contiguous());
    }
    const E& e = R::elem(root_);
    Tensor y = GRAFT_DISPATCH_FLOAT(in[0].dtype(), name_, T, [&] {
      std::array<const T*, N> xp;
      for (size_t k = 0; k < N; ++k) xp[k] = xs[k].template data<T>();
      if constexpr (R::kind == 0) {
        Tensor out = Tensor::empty(shape, in[0].dtype());
        ct_detail::forward_loop<T, N>(e, xp, out.template data<T>(), shape.numel(), false);
        return out;
      } else {
        double s = ct_detail::forward_loop<T, N>(e, xp, static_cast<T*>(nullptr), shape.numel(), true);
        if (R::kind == 2) s /= double(std::max<int64_t>(1, shape.numel()));
        return scalar_tensor(s, in[0].dtype());
      }
    });
    std::vector<Shape> in_shapes;
    for (const Tensor& t : in) in_shapes.push_back(t.shape());
    auto node = std::make_shared<FnNode<Backward>>(name_, Backward{e, shape, in_shapes, name_});
    bool any = false;
    for (const Tensor& t : in) any |= t.requires_grad();
    if (GradMode::is_enabled() && any) {
      for (const Tensor& t : in) node->next_edges.push_back(gradient_edge(t));
      for (const Tensor& x : xs) node->saved.push_back(SavedTensor::input(x));
      set_history(y, node);
    }
    return y;
  }

 private:
  struct Backward {
    E e;
    Shape shape;
    std::vector<Shape> in_shapes;
    const char* name;
    std::vector<Tensor> operator()(BackwardCtx& c) const {
      GRAFT_CHECK(!c.create_graph, "{}: double backward through a fused node is not supported; "
                  "hint: compose the expression from tape ops for higher derivatives", name);
      std::vector<Tensor> xs;
      for (size_t k = 0; k < N; ++k) xs.push_back(c.saved_tensor(k));
      Tensor dy = c.grad().contiguous();
      return GRAFT_DISPATCH_FLOAT(xs[0].dtype(), name, T, [&] {
        std::array<const T*, N> xp;
        std::array<T*, N> gp;
        std::vector<Tensor> gx(N);
        for (size_t k = 0; k < N; ++k) {
          xp[k] = xs[k].template data<T>();
          gp[k] = nullptr;
          if (c.needs(k)) {
            gx[k] = Tensor::empty(shape, xs[k].dtype());
            gp[k] = gx[k].template data<T>();
          }
        }
        const int64_t n = shape.numel();
        if constexpr (R::kind == 0) {
          ct_detail::backward_loop<T, N>(e, xp, dy.template data<T>(), T(0), gp, n);  // dx_k = dy df/dx_k
        } else {
          double seed = dy.template item<double>();
          if (R::kind == 2) seed /= double(std::max<int64_t>(1, n));  // mean: dx_k = dy/n df/dx_k
          ct_detail::backward_loop<T, N>(e, xp, static_cast<const T*>(nullptr), T(seed), gp, n);
        }
        for (size_t k = 0; k < N; ++k)
          if (gx[k].defined()) gx[k] = sum_to(gx[k], in_shapes[k]);
        return gx;
      });
    }
  };
  RootE root_;
  const char* name_;
};

// Turns a static expression graph into a tape op: fuse(expr, "name")(tensors...).
template <class RootE> Fused<RootE> fuse(RootE e, const char* name = "fused") {
  return Fused<RootE>(std::move(e), name);
}

}  // namespace graft
