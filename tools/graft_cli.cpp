// graft — the command-line tool. Every subcommand takes --help.
//
//   graft ops       the op table: devices with kernels, differentiable, gradcheck cases
//   graft devices   the devices this build can run on
//   graft version   version and build configuration
//
// Parse errors (unknown subcommand, bad flag) print a message and exit with status 2.
#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <xsimd/xsimd.hpp>

#include "graft.h"
#include "graft_config.h"
#include "ops/kernels.h"

namespace {

// The OpenCL back-end table, or nullptr when this build or machine has none.
const graft::Backend* opencl_backend() {
  try {
    return graft::backend_for(graft::Device::opencl(0));
  } catch (const std::exception&) {
    return nullptr;
  }
}

// Prints rows as a table whose columns are as wide as their widest cell.
void print_table(const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> width;
  for (const auto& row : rows)
    for (size_t c = 0; c < row.size(); ++c) {
      if (width.size() <= c) width.push_back(0);
      width[c] = std::max(width[c], row[c].size());
    }
  for (size_t r = 0; r < rows.size(); ++r) {
    std::string line;
    for (size_t c = 0; c < rows[r].size(); ++c)
      line += fmt::format("{:<{}}", rows[r][c], c + 1 < rows[r].size() ? width[c] + 2 : 0);
    fmt::print("{}\n", line);
    if (r == 0) {  // rule under the header
      size_t total = 0;
      for (size_t w : width) total += w + 2;
      fmt::print("{}\n", std::string(total - 2, '-'));
    }
  }
}

int cmd_ops(const std::string& filter, bool missing_only) {
  const graft::Backend& cpu = graft::cpu_backend();
  const graft::Backend* ocl = opencl_backend();
  std::vector<std::vector<std::string>> rows = {
      {"op", "devices", "differentiable", "gradcheck cases"}};
  int n_ops = 0, n_diff = 0, n_without = 0;
  for (const graft::OpInfo& op : graft::op_table()) {
    std::string name = op.name;
    if (!filter.empty() && name.find(filter) == std::string::npos) continue;
    std::vector<std::string> devices;
    if (op.has_kernels && op.has_kernels(cpu)) devices.push_back("cpu");
    if (ocl && op.has_kernels && op.has_kernels(*ocl)) devices.push_back("opencl");
    std::string cases;
    size_t n_cases = 0;
    try {
      graft::Generator gen(0);
      n_cases = op.cases ? op.cases(gen).size() : 0;
      cases = n_cases ? fmt::format("yes ({})", n_cases) : "NO";
    } catch (const std::exception& e) {
      cases = fmt::format("error: {}", e.what());
    }
    if (missing_only && n_cases > 0) continue;
    ++n_ops;
    n_diff += op.differentiable;
    n_without += n_cases == 0;
    rows.push_back({name, devices.empty() ? "none" : fmt::format("{}", fmt::join(devices, ", ")),
                    op.differentiable ? "yes" : "no", cases});
  }
  print_table(rows);
  fmt::print("\n{} ops, {} differentiable, {} without gradcheck cases{}\n", n_ops, n_diff,
             n_without, ocl ? "" : " (OpenCL back-end not available in this build)");
  return 0;
}

int cmd_devices() {
  const graft::Backend& cpu = graft::cpu_backend();
  fmt::print("cpu        available    kernels: {}, SIMD: {}, OpenMP threads: {}\n", cpu.name,
             xsimd::default_arch::name(), omp_get_max_threads());
  if (const graft::Backend* ocl = opencl_backend())
    fmt::print("opencl:0   available    kernels: {}\n", ocl->name);
  else
    fmt::print("opencl:0   unavailable  {}\n",
               GRAFT_HAVE_OPENCL ? "no OpenCL back-end is registered yet"
                                 : "this build has no OpenCL support (meson -Dopencl=enabled)");
  return 0;
}

int cmd_version() {
  fmt::print("graft {}\n", GRAFT_VERSION);
  fmt::print("compiler: g++ {}, C++ {}\n", __VERSION__, __cplusplus);
  fmt::print("SIMD: {} (xsimd), OpenMP threads: {}, OpenCL: {}\n", xsimd::default_arch::name(),
             omp_get_max_threads(), GRAFT_HAVE_OPENCL ? "built" : "not built");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"graft: a small C++20 deep-learning framework (autodiff, compile-time graphs)",
               "graft"};
  app.set_version_flag("--version", std::string("graft ") + GRAFT_VERSION);
  app.require_subcommand(0, 1);

  std::string filter;
  bool missing_only = false;
  CLI::App* ops = app.add_subcommand("ops", "List the op table: devices, differentiable, gradcheck cases");
  ops->add_option("filter", filter, "Show only ops whose name contains this text");
  ops->add_flag("--missing", missing_only, "Show only ops without gradcheck cases");
  CLI::App* devices = app.add_subcommand("devices", "List the devices this build can run on");
  CLI::App* version = app.add_subcommand("version", "Print the version and build configuration");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // A first word that is not a subcommand reads better as "unknown subcommand".
    auto known = app.get_subcommands([&](CLI::App* s) { return argc > 1 && s->check_name(argv[1]); });
    if (dynamic_cast<const CLI::ExtrasError*>(&e) && argc > 1 && argv[1][0] != '-' && known.empty()) {
      fmt::print(stderr, "graft: unknown subcommand '{}'; run 'graft --help' for the list\n",
                 argv[1]);
      return 2;
    }
    int rc = app.exit(e);  // prints help/version (rc 0) or the error message
    return rc == 0 ? 0 : 2;
  }

  try {
    if (ops->parsed()) return cmd_ops(filter, missing_only);
    if (devices->parsed()) return cmd_devices();
    if (version->parsed()) return cmd_version();
    fmt::print("{}", app.help());
    return 0;
  } catch (const graft::Error& e) {
    fmt::print(stderr, "graft: error: {}\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    fmt::print(stderr, "graft: internal error: {}\n", e.what());
    return 1;
  }
}
