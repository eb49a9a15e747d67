// Helpers for the text files graft reads (vocabularies, TSV pairs, corpora): opening them with
// a clear error, line endings from any platform (a file saved on Windows ends its lines with
// "\r\n"), and file contents quoted safely inside error messages.
//
//   std::ifstream in = data::open_text_file(path, "Vocab.load", "one token per line");
//   for (std::string line; std::getline(in, line);) {
//     data::strip_cr(line);                                      // "<pad>\r" -> "<pad>"
//     if (first) data::strip_bom(line);                          // a Windows editor's BOM
//     GRAFT_CHECK(ok, "line is '{}'", data::printable(line));    // "\r" shows as \r
//   }
#pragma once
#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

#include <fmt/format.h>

#include "ops/error.h"

namespace graft::data {

// Drops one trailing '\r': what std::getline leaves of a CRLF line ending.
inline void strip_cr(std::string& line) {
  if (!line.empty() && line.back() == '\r') line.pop_back();
}

// Drops a UTF-8 byte order mark (EF BB BF) at the start of s: editors on Windows write one at
// the start of "UTF-8" text files. Call it on a file's first line.
inline void strip_bom(std::string& s) {
  if (s.compare(0, 3, "\xEF\xBB\xBF") == 0) s.erase(0, 3);
}

// s as it can be shown in an error message: backslash, control characters, DEL and the
// invisible U+FEFF escaped (\\ \r \n \t \ufeff, else \xNN), cut to max_chars bytes with "...".
inline std::string printable(std::string_view s, size_t max_chars = 80) {
  std::string out;
  for (size_t i = 0; i < s.size() && i < max_chars; ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (s.compare(i, 3, "\xEF\xBB\xBF") == 0) {  // U+FEFF, invisible in a terminal
      out += "\\ufeff";
      i += 2;
    } else if (c == '\\') out += "\\\\";
    else if (c == '\r') out += "\\r";
    else if (c == '\n') out += "\\n";
    else if (c == '\t') out += "\\t";
    else if (c < 0x20 || c == 0x7F) out += fmt::format("\\x{:02x}", c);
    else out += char(c);
  }
  if (s.size() > max_chars) out += "...";
  return out;
}

// Opens path for reading (binary: line endings are handled by the reader). graft::Error
// "<what>: cannot open <path>: <reason>; hint: <hint>" when it is missing, unreadable or a
// directory (which std::ifstream would open and then read as empty).
inline std::ifstream open_text_file(const std::string& path, const char* what, const char* hint) {
  std::error_code ec;
  GRAFT_CHECK(!std::filesystem::is_directory(path, ec), "{}: cannot open {}: it is a directory, "
              "not a file; hint: {}", what, path, hint);
  std::ifstream in(path, std::ios::binary);
  GRAFT_CHECK(in.good(), "{}: cannot open {}: {}; hint: {}", what, path, std::strerror(errno),
              hint);
  return in;
}

// The standard output of a shell command (`status` gets pclose's status), for the data
// preparation steps that read text through a program such as diatheke.
inline std::string run_command(const std::string& cmd, int& status, const char* what) {
  std::string out;
  std::FILE* p = ::popen(cmd.c_str(), "r");
  GRAFT_CHECK(p != nullptr, "{}: cannot run '{}'", what, cmd);
  std::array<char, 65536> buf;
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
  status = ::pclose(p);
  return out;
}

}  // namespace graft::data
