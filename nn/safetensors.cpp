// safetensors reader and writer. See nn/safetensors.h for the format and the guarantees.
//
// Reading happens in two passes: parse_header() checks the whole JSON header against the size
// of the data section and returns a plan (one entry per tensor, already validated); only then
// are tensors allocated and filled. Every number that comes from the file is checked before it
// is used as a size or an offset, so a hostile file can only cause a graft::Error.
#include "nn/safetensors.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <optional>
#include <set>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "ops/file_io.h"

#include "nn/safetensors_json.h"

namespace graft::nn {

static_assert(std::endian::native == std::endian::little,
              "safetensors: graft reads and writes little-endian data in place; a big-endian "
              "host needs byte swapping here");

namespace {

using json = nlohmann::json;

constexpr uint64_t kMaxHeaderBytes = 100'000'000;  // the reference implementation's limit
constexpr size_t kMaxJsonDepth = 16;               // a valid header nests 3 deep

// ---- dtypes

// Layout rank: the reference writer orders tensors by dtype (descending in its enum order:
// I64, F64, F32, ..., BOOL), then by name. We follow it so that files are byte-identical.
int layout_rank(DType t) {
  switch (t) {
    case DType::i64: return 3;
    case DType::f64: return 2;
    case DType::f32: return 1;
    case DType::b8: return 0;
  }
  return 0;
}

const char* st_dtype_name(DType t) {
  switch (t) {
    case DType::f32: return "F32";
    case DType::f64: return "F64";
    case DType::i64: return "I64";
    case DType::b8: return "BOOL";
  }
  return "?";
}

// A dtype as a file stores it, and the graft dtype it is read as (see nn/safetensors.h):
// floating types widen to f32 (F64 stays f64), integer types to i64, BOOL stays b8.
struct StoredDtype {
  const char* name;
  size_t size;  // bytes per element in the file
  DType dtype;  // what graft holds it as
};

constexpr StoredDtype kStoredDtypes[] = {
    {"F32", 4, DType::f32}, {"F64", 8, DType::f64}, {"I64", 8, DType::i64},
    {"BOOL", 1, DType::b8}, {"BF16", 2, DType::f32}, {"F16", 2, DType::f32},
    {"I32", 4, DType::i64}, {"I16", 2, DType::i64}, {"I8", 1, DType::i64},
    {"U8", 1, DType::i64},
};
constexpr const char* kReadable = "F32, F64, BF16, F16, I64, I32, I16, I8, U8, BOOL";

const StoredDtype* parse_dtype(const std::string& s) {
  for (const StoredDtype& d : kStoredDtypes)
    if (s == d.name) return &d;
  return nullptr;
}

bool is_known_unsupported(const std::string& s) {
  static const char* const names[] = {"U16", "U32", "U64", "F8_E4M3", "F8_E5M2", "F8_E8M0",
                                      "F4", "F6_E2M3", "F6_E3M2", "C64"};
  for (const char* n : names)
    if (s == n) return true;
  return false;
}

// Names from a hostile file can be long: keep messages readable.
std::string shown(const std::string& s) {
  constexpr size_t kMax = 200;
  if (s.size() <= kMax) return s;
  size_t cut = kMax;
  while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;  // UTF-8 boundary
  return s.substr(0, cut) + fmt::format("... ({} bytes)", s.size());
}

}  // namespace

std::string detail::shown_name(const std::string& s) { return shown(s); }

namespace {

uint64_t read_u64_le(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

// A non-negative JSON integer, or nullopt (floats, negatives, numbers past uint64, non-numbers).
std::optional<uint64_t> as_uint(const json& v) {
  if (v.is_number_unsigned()) return v.get<uint64_t>();
  if (v.is_number_integer()) {
    int64_t i = v.get<int64_t>();
    if (i >= 0) return static_cast<uint64_t>(i);
  }
  return std::nullopt;
}

// ---- header validation

struct Entry {
  std::string name;
  const StoredDtype* stored = nullptr;  // as the file holds it
  DType dtype = DType::f32;             // as graft reads it
  Shape shape;
  uint64_t begin = 0, end = 0;  // byte offsets into the data section
};

struct Plan {
  std::vector<Entry> entries;  // sorted by data offset
  std::map<std::string, std::string> metadata;
};

}  // namespace

// Parses JSON, rejecting duplicate keys (ambiguous: which one would a reader take?) and
// nesting deeper than kMaxJsonDepth (no valid header needs it; it only costs stack and time).
json detail::parse_json_strict(const char* begin, const char* end, const std::string& what,
                               const char* kind) {
  std::vector<std::optional<std::set<std::string>>> scopes;  // nullopt for arrays
  auto cb = [&](int /*depth*/, json::parse_event_t ev, json& parsed) -> bool {
    switch (ev) {
      case json::parse_event_t::object_start:
      case json::parse_event_t::array_start:
        GRAFT_CHECK(scopes.size() < kMaxJsonDepth,
                    "{}: {} nests deeper than {} levels", what, kind, kMaxJsonDepth);
        if (ev == json::parse_event_t::object_start)
          scopes.emplace_back(std::set<std::string>{});
        else
          scopes.emplace_back(std::nullopt);
        break;
      case json::parse_event_t::object_end:
      case json::parse_event_t::array_end:
        if (!scopes.empty()) scopes.pop_back();
        break;
      case json::parse_event_t::key:
        if (!scopes.empty() && scopes.back() && parsed.is_string()) {
          const auto& k = parsed.get_ref<const std::string&>();
          GRAFT_CHECK(scopes.back()->insert(k).second,
                      "{}: {} has the key '{}' twice in one object", what, kind, shown(k));
        }
        break;
      case json::parse_event_t::value:
        break;
    }
    return true;
  };
  try {
    return json::parse(begin, end, cb, /*allow_exceptions=*/true, /*ignore_comments=*/false);
  } catch (const json::exception& e) {
    throw Error(fmt::format("{}: {} is not valid JSON: {}", what, kind, e.what()));
  }
}

namespace {

// A short JSON rendering of a value for messages (the parser bounds nesting depth).
std::string shn(const json& v) {
  if (v.is_structured() && v.size() > 16)
    return fmt::format("(a JSON {} of {} items)", v.type_name(), v.size());
  try {
    return shown(v.dump());
  } catch (const json::exception&) {
    return fmt::format("(a JSON {})", v.type_name());
  }
}

Entry parse_entry(const std::string& name, const json& v, uint64_t data_size,
                  const std::string& what) {
  const std::string n = shown(name);
  GRAFT_CHECK(v.is_object(), "{}: tensor '{}': header entry is a JSON {}, expected an object "
              "with dtype, shape and data_offsets", what, n, v.type_name());
  Entry e;
  e.name = name;

  auto dt_it = v.find("dtype");
  GRAFT_CHECK(dt_it != v.end(), "{}: tensor '{}' has no dtype", what, n);
  GRAFT_CHECK(dt_it->is_string(), "{}: tensor '{}': dtype is a JSON {}, expected a string", what,
              n, dt_it->type_name());
  const auto& dts = dt_it->get_ref<const std::string&>();
  auto dt = parse_dtype(dts);
  if (!dt) {
    if (is_known_unsupported(dts))
      throw Error(fmt::format("{}: tensor '{}' has dtype {}, which graft does not read "
                              "(readable: {}); hint: convert it before saving, e.g. "
                              "tensor.float() in PyTorch", what, n, dts, kReadable));
    throw Error(fmt::format("{}: tensor '{}' has unknown dtype '{}' (readable: {})", what, n,
                            shown(dts), kReadable));
  }
  e.stored = dt;
  e.dtype = dt->dtype;

  auto sh_it = v.find("shape");
  GRAFT_CHECK(sh_it != v.end(), "{}: tensor '{}' has no shape", what, n);
  GRAFT_CHECK(sh_it->is_array(), "{}: tensor '{}': shape is a JSON {}, expected an array", what,
              n, sh_it->type_name());
  GRAFT_CHECK(sh_it->size() <= static_cast<size_t>(kMaxDims),
              "{}: tensor '{}' has rank {}, graft supports at most {} dims", what, n,
              sh_it->size(), kMaxDims);
  // numel, and the product of the non-zero dims (bounds the strides of an empty tensor too)
  uint64_t numel = 1, nonzero = 1;
  for (const json& d : *sh_it) {
    auto u = as_uint(d);
    GRAFT_CHECK(u.has_value(), "{}: tensor '{}': shape {} must hold non-negative integers", what,
                n, shn(*sh_it));
    uint64_t x = *u;
    bool over = x > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ||
                __builtin_mul_overflow(nonzero, std::max<uint64_t>(x, 1), &nonzero) ||
                nonzero > static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
    GRAFT_CHECK(!over, "{}: tensor '{}': shape {} is too large (its size overflows 64 bits)",
                what, n, shn(*sh_it));
    numel *= x;  // <= nonzero, cannot overflow
    e.shape.push_back(static_cast<int64_t>(x));
  }
  uint64_t nbytes = 0;
  GRAFT_CHECK(!__builtin_mul_overflow(numel, static_cast<uint64_t>(dt->size), &nbytes),
              "{}: tensor '{}': shape {} is too large (its size overflows 64 bits)", what, n,
              shn(*sh_it));

  auto off_it = v.find("data_offsets");
  GRAFT_CHECK(off_it != v.end(), "{}: tensor '{}' has no data_offsets", what, n);
  std::optional<uint64_t> b, en;
  if (off_it->is_array() && off_it->size() == 2) {
    b = as_uint((*off_it)[0]);
    en = as_uint((*off_it)[1]);
  }
  GRAFT_CHECK(b && en, "{}: tensor '{}': data_offsets must be two non-negative integers "
              "[begin, end], got {}", what, n, shn(*off_it));
  e.begin = *b;
  e.end = *en;
  GRAFT_CHECK(e.begin <= e.end, "{}: tensor '{}' data_offsets [{}, {}] end before they begin",
              what, n, e.begin, e.end);
  GRAFT_CHECK(e.end <= data_size, "{}: tensor '{}' data_offsets [{}, {}] exceed the data "
              "section ({} bytes)", what, n, e.begin, e.end, data_size);
  GRAFT_CHECK(e.end - e.begin == nbytes, "{}: tensor '{}' data_offsets [{}, {}] hold {} bytes, "
              "but shape {} of {} needs {} bytes", what, n, e.begin, e.end, e.end - e.begin,
              e.shape.str(), dts, nbytes);
  return e;
}

Plan parse_header(const uint8_t* header, size_t header_len, uint64_t data_size,
                  const std::string& what) {
  const char* b = reinterpret_cast<const char*>(header);
  // nlohmann's lexer takes a NUL byte for the end of input and would ignore what follows;
  // raw NULs are never valid JSON, so refuse them outright.
  if (const void* z = header_len ? std::memchr(b, 0, header_len) : nullptr)
    throw Error(fmt::format("{}: safetensors header is not valid JSON: NUL byte at offset {}",
                            what, static_cast<const char*>(z) - b));
  json root = detail::parse_json_strict(b, b + header_len, what, "safetensors header");
  GRAFT_CHECK(root.is_object(), "{}: safetensors header is a JSON {}, expected an object", what,
              root.type_name());
  Plan plan;
  plan.entries.reserve(root.size());
  for (auto it = root.begin(); it != root.end(); ++it) {
    const std::string& key = it.key();
    if (key == "__metadata__") {
      GRAFT_CHECK(it->is_object(), "{}: __metadata__ is a JSON {}, expected an object of strings",
                  what, it->type_name());
      for (auto m = it->begin(); m != it->end(); ++m) {
        GRAFT_CHECK(m->is_string(), "{}: __metadata__ key '{}' is a JSON {}, expected a string",
                    what, shown(m.key()), m->type_name());
        plan.metadata.emplace(m.key(), m->get<std::string>());
      }
      continue;
    }
    plan.entries.push_back(parse_entry(key, *it, data_size, what));
  }
  // Tensors must tile the data section: no overlaps, no holes, nothing left over (empty tensors
  // take no bytes and may sit at any in-range offset).
  std::sort(plan.entries.begin(), plan.entries.end(), [](const Entry& x, const Entry& y) {
    if (x.begin != y.begin) return x.begin < y.begin;
    if (x.end != y.end) return x.end < y.end;
    return x.name < y.name;
  });
  uint64_t pos = 0;
  const Entry* prev = nullptr;
  for (const Entry& e : plan.entries) {
    if (e.begin == e.end) continue;
    GRAFT_CHECK(e.begin >= pos, "{}: tensor '{}' data_offsets [{}, {}] overlap tensor '{}' "
                "[{}, {}]", what, shown(e.name), e.begin, e.end, shown(prev->name), prev->begin,
                prev->end);
    GRAFT_CHECK(e.begin == pos, "{}: tensor '{}' data_offsets [{}, {}] leave a gap: bytes [{}, "
                "{}) of the data section belong to no tensor", what, shown(e.name), e.begin,
                e.end, pos, e.begin);
    pos = e.end;
    prev = &e;
  }
  GRAFT_CHECK(pos == data_size, "{}: the data section has {} bytes but the tensors cover only {} "
              "(the file has trailing bytes or is not a safetensors file)", what, data_size, pos);
  return plan;
}

void check_bools(const Entry& e, const uint8_t* p, const std::string& what) {
  if (e.stored->dtype != DType::b8) return;
  for (uint64_t i = 0; i < e.end - e.begin; ++i)
    GRAFT_CHECK(p[i] <= 1, "{}: tensor '{}' is BOOL but byte {} holds {} (expected 0 or 1)", what,
                shown(e.name), i, static_cast<int>(p[i]));
}

Tensor make_tensor(const Entry& e) { return Tensor::empty(e.shape, TensorOptions(e.dtype)); }

void* raw(const Tensor& t) {
  return static_cast<char*>(t.storage()->data()) + t.offset() * dtype_size(t.dtype());
}

// Whether the file's bytes are the tensor's bytes (no conversion on load).
bool stored_as_is(const Entry& e) { return dtype_size(e.dtype) == e.stored->size; }

// IEEE binary16 bits -> the float32 of the same value (every half is a float exactly):
// normals rebias the exponent (15 -> 127), subnormals m * 2^-24 are renormalised, infinities
// and NaNs keep their sign and mantissa (a quiet NaN stays quiet, its payload shifted up).
float half_to_float(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1Fu, mant = h & 0x3FFu, bits = 0;
  if (exp == 0x1F) {
    bits = sign | 0x7F800000u | (mant << 13);
  } else if (exp != 0) {
    bits = sign | ((exp + 112) << 23) | (mant << 13);  // 112 = 127 - 15
  } else if (mant == 0) {
    bits = sign;
  } else {  // subnormal: shift the leading 1 up to bit 10, lowering the exponent each step
    int e = 113;  // the exponent field of 2^-14, the subnormals' scale
    while ((mant & 0x400u) == 0) mant <<= 1, --e;
    bits = sign | (uint32_t(e) << 23) | ((mant & 0x3FFu) << 13);
  }
  return std::bit_cast<float>(bits);
}

// bfloat16 is the top half of a float32: shifting it up is exact for every value.
float bf16_to_float(uint16_t b) { return std::bit_cast<float>(uint32_t(b) << 16); }

template <class T> T load_le(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof v);  // little-endian host (asserted above); p may be unaligned
  return v;
}

template <class From> void widen_ints(const uint8_t* src, int64_t* out, uint64_t n) {
  for (uint64_t i = 0; i < n; ++i) out[i] = load_le<From>(src + sizeof(From) * i);
}

// Converts n elements of the file's dtype at src into the tensor's storage at dst.
void convert(const Entry& e, const uint8_t* src, void* dst, uint64_t n) {
  const std::string_view s = e.stored->name;
  auto* f = static_cast<float*>(dst);
  auto* i = static_cast<int64_t*>(dst);
  if (s == "F16") {
    for (uint64_t k = 0; k < n; ++k) f[k] = half_to_float(load_le<uint16_t>(src + 2 * k));
  } else if (s == "BF16") {
    for (uint64_t k = 0; k < n; ++k) f[k] = bf16_to_float(load_le<uint16_t>(src + 2 * k));
  } else if (s == "I32") {
    widen_ints<int32_t>(src, i, n);
  } else if (s == "I16") {
    widen_ints<int16_t>(src, i, n);
  } else if (s == "I8") {
    widen_ints<int8_t>(src, i, n);
  } else if (s == "U8") {
    widen_ints<uint8_t>(src, i, n);
  } else {
    throw InternalError(fmt::format("safetensors: no conversion from {}", s));
  }
}

// Fills t from the entry's bytes in the file.
void fill(const Entry& e, const Tensor& t, const uint8_t* bytes) {
  if (e.end == e.begin) return;
  if (stored_as_is(e)) std::memcpy(raw(t), bytes, e.end - e.begin);
  else convert(e, bytes, raw(t), static_cast<uint64_t>(t.numel()));
}

// A file of `size` bytes holds at least the 8-byte header length.
void check_length_field(uint64_t size, const std::string& what) {
  GRAFT_CHECK(size >= 8, "{}: file is {} bytes, too short for a safetensors file (at least 8 "
              "bytes: the header length)", what, size);
}

// The header length in the first 8 bytes `len8` of a file of `size` (>= 8) bytes: it must fit
// in the file and stay under kMaxHeaderBytes.
uint64_t header_length(const uint8_t* len8, uint64_t size, const std::string& what) {
  const uint64_t n = read_u64_le(len8);
  GRAFT_CHECK(n <= size - 8, "{}: header length {} exceeds the file size ({} bytes after the "
              "length field); the file is truncated or not a safetensors file", what, n,
              size - 8);
  GRAFT_CHECK(n <= kMaxHeaderBytes, "{}: header length {} exceeds the limit of {} bytes", what,
              n, kMaxHeaderBytes);
  return n;
}

}  // namespace

// ------------------------------------------------------------------ reading

SafetensorsFile parse_safetensors(const uint8_t* data, size_t size, const std::string& what) {
  GRAFT_CHECK(data != nullptr || size == 0, "{}: no data", what);
  check_length_field(size, what);
  const uint64_t n = header_length(data, size, what);
  const uint8_t* body = data + 8 + n;
  uint64_t data_size = size - 8 - n;
  Plan plan = parse_header(data + 8, n, data_size, what);
  for (const Entry& e : plan.entries) check_bools(e, body + e.begin, what);
  SafetensorsFile out;
  out.metadata = std::move(plan.metadata);
  out.tensors.reserve(plan.entries.size());
  for (const Entry& e : plan.entries) {
    Tensor t = make_tensor(e);
    fill(e, t, body + e.begin);
    out.tensors.emplace_back(e.name, std::move(t));
    out.stored_dtypes.emplace(e.name, e.stored->name);
  }
  return out;
}

namespace {

struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

// Reads exactly `len` bytes at `off`; false on a short read (the file shrank).
void pread_all(int fd, void* dst, uint64_t len, uint64_t off, const std::string& what) {
  auto* p = static_cast<uint8_t*>(dst);
  while (len > 0) {
    size_t chunk = static_cast<size_t>(std::min<uint64_t>(len, 1u << 30));
    ssize_t r = ::pread(fd, p, chunk, static_cast<off_t>(off));
    if (r < 0 && errno == EINTR) continue;
    GRAFT_CHECK(r >= 0, "{}: read failed: {}", what, std::strerror(errno));
    GRAFT_CHECK(r > 0, "{}: file ended early (was it modified while loading?)", what);
    p += r;
    off += static_cast<uint64_t>(r);
    len -= static_cast<uint64_t>(r);
  }
}

}  // namespace

SafetensorsFile load_safetensors(const std::string& path) {
  Fd f;
  f.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  GRAFT_CHECK(f.fd >= 0, "{}: cannot open: {}", path, std::strerror(errno));
  struct stat st {};
  GRAFT_CHECK(::fstat(f.fd, &st) == 0, "{}: cannot stat: {}", path, std::strerror(errno));
  GRAFT_CHECK(S_ISREG(st.st_mode), "{}: not a regular file", path);
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  check_length_field(size, path);
  uint8_t len8[8];
  pread_all(f.fd, len8, 8, 0, path);
  const uint64_t n = header_length(len8, size, path);
  std::vector<uint8_t> header(static_cast<size_t>(n));
  if (n > 0) pread_all(f.fd, header.data(), n, 8, path);
  const uint64_t base = 8 + n, data_size = size - base;
  Plan plan = parse_header(header.data(), header.size(), data_size, path);
  // Read each tensor straight into its storage (no second copy of the whole file).
  SafetensorsFile out;
  out.metadata = std::move(plan.metadata);
  out.tensors.reserve(plan.entries.size());
  std::vector<uint8_t> buf;  // the file's bytes of a tensor converted on load
  for (const Entry& e : plan.entries) {
    Tensor t = make_tensor(e);
    if (e.end > e.begin && stored_as_is(e)) {
      pread_all(f.fd, raw(t), e.end - e.begin, base + e.begin, path);
      check_bools(e, static_cast<const uint8_t*>(raw(t)), path);
    } else if (e.end > e.begin) {
      buf.resize(static_cast<size_t>(e.end - e.begin));
      pread_all(f.fd, buf.data(), buf.size(), base + e.begin, path);
      fill(e, t, buf.data());
    }
    out.tensors.emplace_back(e.name, std::move(t));
    out.stored_dtypes.emplace(e.name, e.stored->name);
  }
  return out;
}

// ------------------------------------------------------------------ writing

namespace {

std::string json_string(const std::string& s, const std::string& what, const char* role) {
  try {
    return json(s).dump();
  } catch (const json::exception&) {
    throw Error(fmt::format("save_safetensors: {}: {} '{}' is not valid UTF-8", what, role,
                            shown(s)));
  }
}

}  // namespace

void save_safetensors(const std::string& path, const NamedTensors& tensors,
                      const std::map<std::string, std::string>& metadata) {
  // ---- validate and gather everything before creating any file
  struct Item {
    const std::string* name;
    Tensor t;  // contiguous, on the CPU
  };
  std::vector<Item> items;
  items.reserve(tensors.size());
  std::set<std::string> names;
  for (const auto& [name, t] : tensors) {
    GRAFT_CHECK(names.insert(name).second, "save_safetensors: {}: tensor name '{}' appears twice",
                path, shown(name));
    GRAFT_CHECK(name != "__metadata__", "save_safetensors: {}: '__metadata__' is reserved and "
                "cannot name a tensor", path);
    GRAFT_CHECK(t.defined(), "save_safetensors: {}: tensor '{}' is undefined", path, shown(name));
    Tensor c = t.device().is_cpu() ? t : t.to(Device::cpu());
    items.push_back({&name, c.contiguous()});
  }
  std::sort(items.begin(), items.end(), [](const Item& a, const Item& b) {
    int ra = layout_rank(a.t.dtype()), rb = layout_rank(b.t.dtype());
    if (ra != rb) return ra > rb;
    return *a.name < *b.name;
  });

  // ---- header: compact JSON like the reference writer, padded with spaces to 8 bytes
  std::string h = "{";
  bool first = true;
  if (!metadata.empty()) {
    h += "\"__metadata__\":{";
    bool mfirst = true;
    for (const auto& [k, v] : metadata) {
      if (!mfirst) h += ',';
      mfirst = false;
      h += json_string(k, path, "metadata key");
      h += ':';
      h += json_string(v, path, "metadata value");
    }
    h += '}';
    first = false;
  }
  uint64_t offset = 0;
  for (const Item& it : items) {
    uint64_t nbytes = static_cast<uint64_t>(it.t.numel()) * dtype_size(it.t.dtype());
    if (!first) h += ',';
    first = false;
    h += json_string(*it.name, path, "tensor name");
    h += fmt::format(":{{\"dtype\":\"{}\",\"shape\":[", st_dtype_name(it.t.dtype()));
    for (int d = 0; d < it.t.dim(); ++d) h += fmt::format("{}{}", d ? "," : "", it.t.size(d));
    h += fmt::format("],\"data_offsets\":[{},{}]}}", offset, offset + nbytes);
    offset += nbytes;
  }
  h += '}';
  h.append((8 - h.size() % 8) % 8, ' ');

  // ---- the file, atomically (ops/file_io.h): length, header, then each tensor's bytes
  atomic_write(path, [&](std::FILE* f) {
    uint8_t len8[8];
    for (int i = 0; i < 8; ++i) len8[i] = static_cast<uint8_t>(static_cast<uint64_t>(h.size()) >> (8 * i));
    std::fwrite(len8, 1, 8, f);
    std::fwrite(h.data(), 1, h.size(), f);
    std::vector<uint8_t> bools;
    for (const Item& it : items) {
      size_t nbytes = static_cast<size_t>(it.t.numel()) * dtype_size(it.t.dtype());
      if (it.t.dtype() == DType::b8) {  // write canonical 0/1 bytes
        const auto* src = static_cast<const uint8_t*>(raw(it.t));
        bools.assign(src, src + nbytes);
        for (auto& b : bools) b = b != 0;
        std::fwrite(bools.data(), 1, nbytes, f);
      } else if (nbytes > 0) {
        std::fwrite(raw(it.t), 1, nbytes, f);
      }
    }
  }, "save_safetensors");
}

// ------------------------------------------------------------------ loading into a model

void load_into(Module& m, const std::string& path, bool strict) {
  SafetensorsFile f = load_checkpoint(path);
  StateDict mine = m.state_dict();
  std::map<std::string, DType> model_dtype;
  for (const auto& [n, t] : mine) model_dtype.emplace(n, t.dtype());
  for (auto& [n, t] : f.tensors) {
    auto it = model_dtype.find(n);
    if (it == model_dtype.end() || it->second == t.dtype()) continue;
    GRAFT_CHECK(is_floating(it->second) && is_floating(t.dtype()),
                "{}: tensor '{}' is {} in the file but {} in the model", path, shown(n),
                t.dtype(), it->second);
    // floating -> floating: load_state_dict's copy converts to the model's dtype
  }
  try {
    m.load_state_dict(f.tensors, strict);
  } catch (const Error& e) {
    throw Error(fmt::format("{}: {}", path, e.what()));
  }
}

}  // namespace graft::nn
