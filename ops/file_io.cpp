// Whole-file reads and atomic writes: see ops/file_io.h.
#include "ops/file_io.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>

#include "ops/error.h"

namespace graft {

namespace {

[[noreturn]] void io_error(const char* who, const std::string& what, const std::string& path,
                           int err, const char* hint = nullptr) {
  throw Error(fmt::format("{}{}{} {}: {}{}{}", who ? who : "", who ? ": " : "", what, path,
                          std::strerror(err), hint ? "; hint: " : "", hint ? hint : ""));
}

std::string parent_dir(const std::string& path) {
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  return parent.empty() ? "." : parent.string();
}

}  // namespace

void fsync_dir(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  while (::fsync(fd) != 0) {
    if (errno == EINTR) continue;
    if (errno == EINVAL || errno == EROFS || errno == ENOTSUP) break;
    const int err = errno;
    ::close(fd);
    io_error(nullptr, "cannot fsync the directory", dir, err);
  }
  ::close(fd);
}

void atomic_write(const std::string& path, const std::function<void(std::FILE*)>& fill,
                  const char* who) {
  const std::string tmp = fmt::format("{}.tmp.{}", path, ::getpid());
  std::FILE* f = std::fopen(tmp.c_str(), "wbe");  // 'e': O_CLOEXEC
  if (!f) io_error(who, "cannot create", tmp, errno);
  try {
    fill(f);
  } catch (...) {
    std::fclose(f);
    std::remove(tmp.c_str());
    throw;
  }
  bool ok = !std::ferror(f) && std::fflush(f) == 0;
  int err = ok ? 0 : (errno ? errno : EIO);
  while (ok && ::fsync(::fileno(f)) != 0)
    if (errno != EINTR) ok = false, err = errno;
  if (std::fclose(f) != 0 && ok) ok = false, err = errno;
  if (!ok) {
    std::remove(tmp.c_str());
    io_error(who, "cannot write", tmp, err);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    err = errno;
    std::remove(tmp.c_str());
    io_error(who, "cannot rename a temporary file over", path, err);
  }
  fsync_dir(parent_dir(path));
}

void atomic_write(const std::string& path, std::string_view bytes, const char* who) {
  atomic_write(path, [&](std::FILE* f) { std::fwrite(bytes.data(), 1, bytes.size(), f); }, who);
}

std::string read_file(const std::string& path, const char* who, const char* hint) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw Error(fmt::format("{}{}cannot read {}: it is a directory{}{}", who ? who : "",
                            who ? ": " : "", path, hint ? "; hint: " : "", hint ? hint : ""));
  std::FILE* f = std::fopen(path.c_str(), "rbe");
  if (!f) io_error(who, "cannot read", path, errno, hint);
  std::string out;
  char buf[65536];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
  const bool bad = std::ferror(f);
  const int err = errno ? errno : EIO;
  std::fclose(f);
  if (bad) io_error(who, "cannot read", path, err, hint);
  return out;
}

}  // namespace graft
