// The passes over a traced kernel list: dead-code elimination, elementwise fusion, in-place
// reuse, liveness and the arena layout; then every view is resolved to its final address.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>

#include "autograd/compile.h"

namespace graft::trace {

namespace {

// Buffers whose contents matter after the call (or come from outside): writes to them are
// effects that dead-code elimination must keep.
bool persistent(const Buffer& b) {
  return b.kind == BufferKind::input || b.kind == BufferKind::state || b.kind == BufferKind::pinned;
}
bool is_random(Kernel k) {
  return k == Kernel::uniform || k == Kernel::normal || k == Kernel::dropout_mask;
}

bool contiguous(const ArgRef& a) {
  int64_t expect = 1;
  for (int i = a.shape.size() - 1; i >= 0; --i) {
    if (a.shape[i] != 1 && a.strides[i] != expect) return false;
    expect *= a.shape[i];
  }
  return true;
}
// Every element reads the same value (a broadcast scalar: all strides 0, or one element).
bool scalar_broadcast(const ArgRef& a) {
  if (a.numel() == 1) return true;
  for (int i = 0; i < a.strides.size(); ++i)
    if (a.strides[i] != 0) return false;
  return true;
}
bool elementwise(Kernel k) {
  switch (k) {
    case Kernel::fill: case Kernel::copy: case Kernel::unary: case Kernel::unary_backward:
    case Kernel::binary: case Kernel::compare: case Kernel::where: return true;
    default: return false;
  }
}

// An elementwise op over n elements whose every argument is either n contiguous elements or a
// broadcast scalar: it can run on any sub-range [s, s + len) of its output.
bool tileable(const Op& op, int64_t& n) {
  if (!elementwise(op.kernel)) return false;
  n = -1;
  for (const ArgRef& a : op.args)
    if (a.role != 'R') n = a.numel();
  if (n <= 0) return false;
  for (const ArgRef& a : op.args) {
    if (a.buffer < 0) return false;
    const bool full = a.numel() == n && contiguous(a);
    if (!full && !(a.role == 'R' && scalar_broadcast(a))) return false;
  }
  return true;
}

// The accesses a fused group makes to one buffer (tiles reorder them: every full view of a
// buffer must start at the same place, and a buffer read as a broadcast scalar must not be
// written inside the group).
struct Access {
  int buffer;
  int64_t offset;  // of the full views (-1: none yet)
  bool scalar_read, written;
};

bool fits_group(std::vector<Access>& acc, const Op& op, int64_t n) {
  std::vector<Access> next = acc;
  for (const ArgRef& a : op.args) {
    auto it = std::find_if(next.begin(), next.end(), [&](const Access& x) { return x.buffer == a.buffer; });
    if (it == next.end()) {
      next.push_back({a.buffer, -1, false, false});
      it = next.end() - 1;
    }
    const bool full = a.numel() == n && contiguous(a);
    if (full) {
      if (it->offset >= 0 && it->offset != a.byte_offset) return false;
      it->offset = a.byte_offset;
    } else {
      it->scalar_read = true;
    }
    if (a.role != 'R') it->written = true;
    if (it->scalar_read && it->written) return false;
  }
  acc = std::move(next);
  return true;
}

int root(std::vector<int>& parent, int b) {
  while (parent[b] != b) b = parent[b] = parent[parent[b]];
  return b;
}

size_t align64(size_t n) { return (n + 63) / 64 * 64; }

// The view is the whole buffer, contiguous from its start.
bool covers(const ArgRef& a, const Buffer& b) {
  return a.byte_offset == 0 && size_t(a.numel()) * dtype_size(a.dtype) == b.nbytes && contiguous(a);
}

}  // namespace

// ------------------------------------------------------------------ dead-code elimination
// Backwards over the kernels: a kernel is live if it writes a buffer that outlives the call or
// that a later live kernel reads. (Writes never "kill" a buffer here: a view may cover only part
// of it, so this stays conservative.) Random kernels, and attention with dropout (an op with a
// generator), always run: they advance their generator.
void eliminate_dead_code(Graph& g) {
  std::vector<char> needed(g.buffers.size(), 0);
  for (size_t i = g.ops.size(); i-- > 0;) {
    Op& op = g.ops[i];
    bool live = is_random(op.kernel) || op.gen != nullptr;
    for (const ArgRef& a : op.args)
      if (a.buffer >= 0 && a.role != 'R' && (needed[a.buffer] || persistent(g.buffers[a.buffer])))
        live = true;
    op.dead = !live;
    if (!live) continue;
    for (const ArgRef& a : op.args)
      if (a.buffer >= 0 && a.role != 'W') needed[a.buffer] = 1;
  }
}

// ------------------------------------------------------------------ elementwise fusion
// Consecutive live tileable ops over the same element count form a group, run tile by tile:
// all ops on elements [0, tile), then all on [tile, 2 tile), ... A group needs two ops and more
// than one tile to pay.
void fuse_elementwise(Graph& g, int64_t tile_bytes) {
  g.groups.clear();
  Group cur;
  std::vector<Access> acc;
  auto close = [&] {
    if (cur.ops.size() >= 2) {
      size_t widest = 1;
      for (int i : cur.ops)
        for (const ArgRef& a : g.ops[i].args) widest = std::max(widest, dtype_size(a.dtype));
      cur.tile = std::max<int64_t>(64, tile_bytes / int64_t(widest));
      if (cur.numel > cur.tile) {
        for (int i : cur.ops) g.ops[i].group = int(g.groups.size());
        g.groups.push_back(cur);
      }
    }
    cur = Group{};
    acc.clear();
  };
  for (size_t i = 0; i < g.ops.size(); ++i) {
    Op& op = g.ops[i];
    if (op.dead) continue;
    int64_t n = 0;
    if (!tileable(op, n)) {
      close();
      continue;
    }
    if (!cur.ops.empty() && (n != cur.numel || !fits_group(acc, op, n))) close();
    if (cur.ops.empty()) {
      cur.numel = n;
      acc.clear();
      if (!fits_group(acc, op, n)) continue;
    }
    cur.ops.push_back(int(i));
  }
  close();
}

// ------------------------------------------------------------------ memory
void plan_memory(Graph& g, bool in_place, bool reuse) {
  // Steps: what replay runs, in order (a fused group is one step).
  g.steps.clear();
  for (size_t i = 0; i < g.ops.size(); ++i) {
    const Op& op = g.ops[i];
    if (op.dead) continue;
    if (op.group < 0) g.steps.push_back(int(i));
    else if (g.groups[op.group].ops.front() == int(i)) g.steps.push_back(-op.group - 1);
  }
  // Liveness: first and last step (and op) touching each internal buffer.
  const size_t nb = g.buffers.size();
  std::vector<int> first_op(nb, -1), last_op(nb, -1);
  std::vector<char> whole(nb, 1);  // every access inside a fused group is the whole buffer
  for (Buffer& b : g.buffers) b.first = b.last = b.slot = -1, b.arena_offset = -1;
  for (size_t s = 0; s < g.steps.size(); ++s) {
    const int st = g.steps[s];
    const std::vector<int> one{st};
    const std::vector<int>& ops = st >= 0 ? one : g.groups[-st - 1].ops;
    for (int i : ops)
      for (const ArgRef& a : g.ops[i].args) {
        if (a.buffer < 0) continue;
        Buffer& b = g.buffers[a.buffer];
        if (b.first < 0) b.first = int(s);
        b.last = int(s);
        if (first_op[a.buffer] < 0) first_op[a.buffer] = i;
        last_op[a.buffer] = i;
        if (st < 0 && !covers(a, b)) whole[a.buffer] = 0;
      }
  }
  auto internal = [&](int b) { return b >= 0 && g.buffers[b].kind == BufferKind::internal; };
  std::vector<int> parent(nb);
  for (size_t b = 0; b < nb; ++b) parent[b] = int(b);
  // In-place: an elementwise op's output takes the buffer of an input that dies at this op (both
  // views whole at this op; inside a fused group, at every access in the group, since tiles
  // interleave the group's ops).
  for (Op& op : g.ops) op.in_place = false;
  if (in_place) {
    for (size_t i = 0; i < g.ops.size(); ++i) {
      Op& op = g.ops[i];
      if (op.dead || !(op.kernel == Kernel::unary || op.kernel == Kernel::unary_backward ||
                       op.kernel == Kernel::binary || op.kernel == Kernel::where ||
                       op.kernel == Kernel::copy))
        continue;
      const ArgRef& out = *std::find_if(op.args.begin(), op.args.end(),
                                        [](const ArgRef& a) { return a.role == 'W'; });
      const int o = out.buffer;
      const bool grouped = op.group >= 0;
      if (!internal(o) || !covers(out, g.buffers[o]) || (grouped && !whole[o]) || first_op[o] != int(i))
        continue;
      for (const ArgRef& a : op.args) {
        const int b = a.buffer;
        if (a.role != 'R' || !internal(b) || b == o || !covers(a, g.buffers[b]) ||
            (grouped && !whole[b]) || last_op[b] != int(i) ||
            a.dtype != out.dtype || g.buffers[b].nbytes != g.buffers[o].nbytes)
          continue;
        int refs = 0;
        for (const ArgRef& x : op.args) refs += x.buffer == b;
        if (refs != 1) continue;
        parent[o] = root(parent, b);
        op.in_place = true;
        break;
      }
    }
  }
  // Slots: one per root, covering the lifetimes of the buffers that share it.
  struct Slot {
    size_t size = 0;
    int first = 1 << 30, last = -1;
    int64_t offset = -1;
  };
  std::vector<Slot> slots;
  std::vector<int> slot_of(nb, -1);
  size_t intermediate = 0;
  for (size_t b = 0; b < nb; ++b) {
    if (!internal(int(b)) || g.buffers[b].first < 0) continue;
    intermediate += g.buffers[b].nbytes;
    const int r = root(parent, int(b));
    if (slot_of[r] < 0) {
      slot_of[r] = int(slots.size());
      slots.emplace_back();
    }
    Slot& sl = slots[slot_of[r]];
    sl.size = std::max(sl.size, align64(std::max<size_t>(g.buffers[b].nbytes, 1)));
    sl.first = std::min(sl.first, g.buffers[b].first);
    sl.last = std::max(sl.last, g.buffers[b].last);
    g.buffers[b].slot = slot_of[r];
  }
  // Layout: largest slots first, each at the best-fitting gap among the placed slots whose
  // lifetimes overlap it (or all placed slots when reuse is off).
  std::vector<int> order(slots.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = int(i);
  std::sort(order.begin(), order.end(), [&](int a, int b) {
    return slots[a].size != slots[b].size ? slots[a].size > slots[b].size : slots[a].first < slots[b].first;
  });
  std::vector<int> placed;
  size_t arena = 0;
  for (int s : order) {
    Slot& sl = slots[s];
    std::vector<std::pair<int64_t, int64_t>> busy;  // [offset, end) of conflicting slots
    for (int p : placed) {
      const Slot& q = slots[p];
      if (!reuse || (q.first <= sl.last && sl.first <= q.last))
        busy.push_back({q.offset, q.offset + int64_t(q.size)});
    }
    std::sort(busy.begin(), busy.end());
    int64_t cursor = 0, best = -1, best_gap = 0;
    for (auto [lo, hi] : busy) {
      const int64_t gap = lo - cursor;
      if (gap >= int64_t(sl.size) && (best < 0 || gap < best_gap)) best = cursor, best_gap = gap;
      cursor = std::max(cursor, hi);
    }
    sl.offset = best >= 0 ? best : cursor;
    arena = std::max(arena, size_t(sl.offset) + sl.size);
    placed.push_back(s);
  }
  for (Buffer& b : g.buffers)
    if (b.slot >= 0) b.arena_offset = slots[b.slot].offset;

  std::free(g.arena);
  g.arena = static_cast<char*>(std::aligned_alloc(64, align64(std::max<size_t>(arena, 64))));
  if (!g.arena) throw std::bad_alloc();

  // Resolve every view of every live op; inputs are patched per call.
  g.views.assign(g.ops.size(), {});
  g.input_patches.clear();
  for (size_t i = 0; i < g.ops.size(); ++i) {
    const Op& op = g.ops[i];
    if (op.dead) continue;
    for (size_t k = 0; k < op.args.size(); ++k) {
      const ArgRef& a = op.args[k];
      TensorView v;
      v.dtype = a.dtype;
      v.shape = a.shape;
      v.strides = a.strides;
      v.device = Device::cpu();
      if (a.buffer >= 0) {
        const Buffer& b = g.buffers[a.buffer];
        if (b.kind == BufferKind::input) {
          g.input_patches.push_back({int(i), int(k), b.input, a.byte_offset});
        } else {
          char* base = b.kind == BufferKind::internal ? g.arena + b.arena_offset : b.fixed;
          GRAFT_ASSERT(base != nullptr);
          v.data = base + a.byte_offset;
        }
      }
      g.views[i].push_back(v);
    }
  }
  // Constants that some kernel modifies are restored before each replay.
  for (Graph::Constant& c : g.constants) {
    c.rewritten = false;
    for (const Op& op : g.ops)
      for (const ArgRef& a : op.args)
        if (!op.dead && a.buffer == c.buffer && a.role != 'R') c.rewritten = true;
  }

  // Statistics.
  GraphStats& st = g.stats;
  st = GraphStats{};
  st.recorded = int(g.ops.size());
  for (const Op& op : g.ops) {
    if (op.dead) {
      ++st.dead;
      continue;
    }
    ++st.live;
    st.in_place += op.in_place;
    st.fused_ops += op.group >= 0;
    ++st.kernel_counts[op.label];
  }
  st.fused_groups = int(g.groups.size());
  st.arena_bytes = arena;
  st.intermediate_bytes = intermediate;
  for (const Buffer& b : g.buffers) {
    if (b.kind == BufferKind::pinned) st.pinned_bytes += b.nbytes;
    if (b.kind == BufferKind::constant) st.constant_bytes += b.nbytes;
  }
}

}  // namespace graft::trace
