// Where a tensor's storage lives: the CPU or OpenCL device number `index`.
#pragma once
#include <cstdint>
#include <string>

#include <fmt/format.h>

namespace graft {

struct Device {
  enum class Kind : uint8_t { cpu, opencl };
  Kind kind = Kind::cpu;
  int index = 0;

  static constexpr Device cpu() { return {Kind::cpu, 0}; }
  static constexpr Device opencl(int i = 0) { return {Kind::opencl, i}; }
  constexpr bool is_cpu() const { return kind == Kind::cpu; }
  constexpr bool operator==(const Device&) const = default;
  std::string str() const { return is_cpu() ? "cpu" : fmt::format("opencl:{}", index); }
  // Parses "cpu", "opencl", "opencl:1"; throws graft::Error otherwise.
  static Device parse(const std::string& s);
};

}  // namespace graft

template <> struct fmt::formatter<graft::Device> : fmt::formatter<std::string> {
  auto format(const graft::Device& d, format_context& ctx) const {
    return fmt::formatter<std::string>::format(d.str(), ctx);
  }
};
