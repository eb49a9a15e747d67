// The Unicode part of the BERT tokenizer (see wordpiece.h for the coverage): UTF-8 decoding and
// encoding, the character classes BERT's BasicTokenizer splits on, lower-casing and the NFD/NFC
// forms used to strip accents. Categories, case mappings and decompositions come from utf8proc
// (the whole code space, Hangul syllables included); only the rules that are BERT's own (ASCII
// symbols count as punctuation, which ideographs are "Chinese") are written out here.
#include <utf8proc.h>

#include <algorithm>
#include <vector>

#include "data/wordpiece.h"
#include "ops/error.h"

namespace graft::data {
namespace {

utf8proc_category_t category(char32_t c) { return utf8proc_category(utf8proc_int32_t(c)); }

// True when nothing in s has a canonical decomposition or a non-zero combining class, so NFD
// and NFC leave it unchanged (every code point below U+00C0 qualifies).
bool plain(std::u32string_view s) {
  return std::all_of(s.begin(), s.end(), [](char32_t c) { return c < 0xC0; });
}

// utf8proc's canonical decomposition (with canonical reordering) of s; with compose, also its
// canonical composition (NFC).
std::u32string normalize(std::u32string_view s, bool compose) {
  const std::string u8 = unicode::encode_utf8(s);
  const utf8proc_option_t opt =
      utf8proc_option_t(UTF8PROC_STABLE | (compose ? UTF8PROC_COMPOSE : UTF8PROC_DECOMPOSE));
  std::vector<utf8proc_int32_t> buf(s.size() + 8);
  utf8proc_ssize_t n = 0;
  for (;;) {  // a too-small buffer gets the needed size back
    n = utf8proc_decompose(reinterpret_cast<const utf8proc_uint8_t*>(u8.data()),
                           utf8proc_ssize_t(u8.size()), buf.data(), utf8proc_ssize_t(buf.size()),
                           opt);
    if (n < 0 || size_t(n) <= buf.size()) break;
    buf.resize(size_t(n));
  }
  if (n >= 0 && compose) n = utf8proc_normalize_utf32(buf.data(), n, opt);
  GRAFT_CHECK(n >= 0, "unicode normalisation of {} code points failed: {}", s.size(),
              utf8proc_errmsg(n));
  return std::u32string(buf.begin(), buf.begin() + n);
}

}  // namespace

// ---------------------------------------------------------------------------------- unicode

namespace unicode {

bool is_mark_nonspacing(char32_t c) { return c >= 0x300 && category(c) == UTF8PROC_CATEGORY_MN; }

std::u32string decode_utf8(std::string_view s) {
  std::u32string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    unsigned char b = static_cast<unsigned char>(s[i]);
    if (b < 0x80) { out.push_back(b); ++i; continue; }
    int n = (b >> 5) == 0x6 ? 1 : (b >> 4) == 0xE ? 2 : (b >> 3) == 0x1E ? 3 : -1;
    char32_t c = n == 1 ? (b & 0x1F) : n == 2 ? (b & 0x0F) : (b & 0x07);
    bool ok = n > 0;
    for (int k = 1; ok && k <= n; ++k) {
      if (i + size_t(k) >= s.size()) { ok = false; break; }
      unsigned char cb = static_cast<unsigned char>(s[i + size_t(k)]);
      if ((cb >> 6) != 0x2) { ok = false; break; }
      c = (c << 6) | (cb & 0x3F);
    }
    // Reject overlong forms, surrogates and values beyond U+10FFFF.
    if (ok && ((n == 1 && c < 0x80) || (n == 2 && c < 0x800) || (n == 3 && c < 0x10000) ||
               (c >= 0xD800 && c < 0xE000) || c > 0x10FFFF))
      ok = false;
    if (!ok) { out.push_back(0xFFFD); ++i; continue; }
    out.push_back(c);
    i += size_t(n) + 1;
  }
  return out;
}

std::string encode_utf8(std::u32string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char32_t c : s) {
    if (c < 0x80) {
      out.push_back(char(c));
    } else if (c < 0x800) {
      out.push_back(char(0xC0 | (c >> 6)));
      out.push_back(char(0x80 | (c & 0x3F)));
    } else if (c < 0x10000) {
      out.push_back(char(0xE0 | (c >> 12)));
      out.push_back(char(0x80 | ((c >> 6) & 0x3F)));
      out.push_back(char(0x80 | (c & 0x3F)));
    } else {
      out.push_back(char(0xF0 | (c >> 18)));
      out.push_back(char(0x80 | ((c >> 12) & 0x3F)));
      out.push_back(char(0x80 | ((c >> 6) & 0x3F)));
      out.push_back(char(0x80 | (c & 0x3F)));
    }
  }
  return out;
}

bool is_punctuation(char32_t c) {
  // BERT counts every ASCII non-alphanumeric printable character, symbols such as $ + < = > ^ `
  // | ~ included, as punctuation; elsewhere only the P* categories.
  if ((c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) ||
      (c >= 123 && c <= 126))
    return true;
  if (c < 0x80) return false;
  const utf8proc_category_t k = category(c);
  return k >= UTF8PROC_CATEGORY_PC && k <= UTF8PROC_CATEGORY_PO;
}

bool is_whitespace(char32_t c) {
  if (c == ' ' || c == '\t' || c == '\n' || c == '\r') return true;
  if (c < 0x80) return false;
  const utf8proc_category_t k = category(c);
  return k == UTF8PROC_CATEGORY_ZS || k == UTF8PROC_CATEGORY_ZL || k == UTF8PROC_CATEGORY_ZP;
}

bool is_control(char32_t c) {
  if (c == '\t' || c == '\n' || c == '\r') return false;
  if (c < 0x20 || c == 0x7F) return true;
  if (c < 0x80) return false;
  const utf8proc_category_t k = category(c);
  // Unassigned code points (Cn) are kept, as Hugging Face's Rust BertNormalizer keeps them.
  return k == UTF8PROC_CATEGORY_CC || k == UTF8PROC_CATEGORY_CF || k == UTF8PROC_CATEGORY_CO ||
         k == UTF8PROC_CATEGORY_CS;
}

bool is_cjk(char32_t c) {
  // Not a Unicode property: the blocks Hugging Face's tokenizers (the Rust BertNormalizer) treat
  // as Chinese characters. Its fifth range starts at U+2B920, where the Python BasicTokenizer's
  // starts at U+2B820 (the first 256 code points of CJK Extension E are not split by Rust).
  return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) ||
         (c >= 0x20000 && c <= 0x2A6DF) || (c >= 0x2A700 && c <= 0x2B73F) ||
         (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
         (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

char32_t to_lower(char32_t c) {
  if (c < 0x80) return (c >= 'A' && c <= 'Z') ? c + 32 : c;
  return char32_t(utf8proc_tolower(utf8proc_int32_t(c)));
}

std::u32string lower(std::u32string_view s) {
  std::u32string out;
  out.reserve(s.size());
  for (char32_t c : s) {
    // SpecialCasing.txt's one unconditional one-to-many lower-case mapping (utf8proc has only
    // the simple, one-to-one mappings): U+0130 I WITH DOT ABOVE -> i + U+0307 COMBINING DOT.
    if (c == 0x130) {
      out.push_back(U'i');
      out.push_back(0x307);
    } else {
      out.push_back(to_lower(c));
    }
  }
  return out;
}

std::u32string nfd(std::u32string_view s) {
  return plain(s) ? std::u32string(s) : normalize(s, false);
}

std::u32string nfc(std::u32string_view s) {
  return plain(s) ? std::u32string(s) : normalize(s, true);
}

}  // namespace unicode

}  // namespace graft::data
