// Atomic writes and whole-file reads for run directories: see nn/run_files.h.
#include "nn/run_files.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "ops/error.h"

namespace graft::nn {

namespace fs = std::filesystem;

namespace {
[[noreturn]] void io_error(const std::string& what, const std::string& path, int err) {
  throw Error(fmt::format("{} {}: {}", what, path, std::strerror(err)));
}
}  // namespace

void fsync_dir(const std::string& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  while (::fsync(fd) != 0) {
    if (errno == EINTR) continue;
    if (errno == EINVAL || errno == EROFS || errno == ENOTSUP) break;
    int err = errno;
    ::close(fd);
    io_error("cannot fsync the directory", dir, err);
  }
  ::close(fd);
}

void write_text_atomic(const std::string& path, const std::string& text) {
  const std::string tmp = fmt::format("{}.tmp.{}", path, ::getpid());
  std::FILE* f = std::fopen(tmp.c_str(), "wbe");
  if (!f) io_error("cannot create", tmp, errno);
  bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size() && std::fflush(f) == 0;
  while (ok && ::fsync(::fileno(f)) != 0)
    if (errno != EINTR) ok = false;
  int err = errno;
  if (std::fclose(f) != 0 && ok) ok = false, err = errno;
  if (!ok) {
    std::remove(tmp.c_str());
    io_error("cannot write", tmp, err);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    err = errno;
    std::remove(tmp.c_str());
    io_error("cannot rename a temporary file over", path, err);
  }
  const fs::path parent = fs::path(path).parent_path();
  fsync_dir(parent.empty() ? "." : parent.string());
}

std::string read_text_file(const std::string& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) throw Error(fmt::format("cannot read {}: it is a directory", path));
  std::ifstream in(path, std::ios::binary);
  if (!in) io_error("cannot read", path, errno ? errno : ENOENT);
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) io_error("cannot read", path, errno ? errno : EIO);
  return ss.str();
}

double monotonic_seconds() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

}  // namespace graft::nn
