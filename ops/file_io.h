// Whole-file reads and crash-safe writes: the one place graft touches files as a whole.
// atomic_write puts the bytes in a temporary file next to the target, fsyncs it, renames it over
// the target and fsyncs the directory, so a reader (or a crash) sees the old file or the new one,
// never a half-written file.
#pragma once
#include <cstdio>
#include <functional>
#include <string>
#include <string_view>

namespace graft {

// Writes `bytes` to `path` atomically (see above). On failure a graft::Error that starts with
// `who` (when given) and names the file; the target is then left as it was.
void atomic_write(const std::string& path, std::string_view bytes, const char* who = nullptr);
// The same for output that is produced piece by piece: `fill` writes to the open temporary
// file with std::fwrite (its errors are caught when the file is flushed).
void atomic_write(const std::string& path, const std::function<void(std::FILE*)>& fill,
                  const char* who = nullptr);
// The whole file as bytes; graft::Error (starting with `who` when given, ending with `hint`
// when given) when it cannot be read or is a directory.
std::string read_file(const std::string& path, const char* who = nullptr, const char* hint = nullptr);
// fsyncs a directory so that entries created or renamed in it are durable; graft::Error on an
// I/O error (file systems that cannot fsync directories are skipped silently).
void fsync_dir(const std::string& dir);

}  // namespace graft
