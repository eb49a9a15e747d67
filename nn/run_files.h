// Small file helpers for run directories: atomic text writes, whole-file reads, directory fsync.
// Every write that must survive a crash goes through write_text_atomic: a temporary file in the
// same directory, fsync, rename over the target, fsync of the directory.
#pragma once
#include <string>

namespace graft::nn {

// Writes `text` to `path` atomically (see above); graft::Error naming the path on failure
// (the target is then left as it was).
void write_text_atomic(const std::string& path, const std::string& text);
// The whole file; graft::Error when it cannot be read or is not a regular file.
std::string read_text_file(const std::string& path);
// fsyncs a directory so that entries created or renamed in it are durable; graft::Error on an
// I/O error (file systems that cannot fsync directories are skipped silently).
void fsync_dir(const std::string& dir);
// Seconds on the monotonic clock (for elapsed times).
double monotonic_seconds();

}  // namespace graft::nn
