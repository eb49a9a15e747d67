// A cairo write function that appends to a std::string: a PNG or SVG is rendered into memory
// and then written with atomic_write (ops/file_io.h), so a crash leaves the old image or the new.
#pragma once
#include <string>

#include <cairo.h>

namespace graft::tools {

// cairo_write_func_t: `out` is the std::string* passed as the closure.
inline cairo_status_t append_bytes(void* out, const unsigned char* data, unsigned int length) {
  static_cast<std::string*>(out)->append(reinterpret_cast<const char*>(data), length);
  return CAIRO_STATUS_SUCCESS;
}

}  // namespace graft::tools
