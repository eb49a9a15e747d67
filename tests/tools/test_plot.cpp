// `graft plot`: metrics.jsonl parsing (errors name the line) and PNG/SVG output, from a
// hand-written log and from a real nn::Trainer run.
#include <doctest/doctest.h>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include <fmt/format.h>

#include "autograd/functions.h"
#include "nn/layers.h"
#include "nn/loss.h"
#include "nn/optim.h"
#include "nn/trainer.h"
#include "ops/error.h"
#include "tools/plot.h"
#include "tests/temp_dir.h"

using namespace graft;
namespace fs = std::filesystem;

namespace {

struct TempDir : test::TempDir {
  explicit TempDir(const std::string& name) : test::TempDir("plot", name) {}
};

std::string read_all(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// cairo and fontconfig keep font caches for the life of the process: free them at exit (before
// LeakSanitizer's check, which runs after static destructors) so sanitizer runs stay clean.
struct ReleaseCachesAtExit {
  ~ReleaseCachesAtExit() { tools::release_plot_caches(); }
} release_caches_at_exit;

void write(const fs::path& p, const std::string& text) { std::ofstream(p, std::ios::binary) << text; }

// A synthetic run: a decaying loss with noise, a cosine lr, evaluations every 10 steps.
std::string synthetic_log(int steps) {
  std::string s;
  for (int i = 1; i <= steps; ++i) {
    const double loss = 2.0 * std::exp(-i / 30.0) + 0.01 + 0.05 * std::sin(i * 1.7) * std::exp(-i / 60.0);
    s += fmt::format(R"({{"step": {}, "loss": {}, "lr": {}, "elapsed": {}, "throughput": 1000.0}})",
                     i, loss, 0.01 * std::cos(i / double(steps)), i * 0.01) + "\n";
    if (i % 10 == 0)
      s += fmt::format(R"({{"step": {}, "elapsed": {}, "eval_loss": {}, "eval_accuracy": {}}})", i,
                       i * 0.01, 1.8 * std::exp(-i / 30.0) + 0.02, 1 - std::exp(-i / 25.0)) + "\n";
  }
  return s;
}

void check_outputs(const fs::path& dir) {
  const std::string png = read_all(dir / "loss.png"), svg = read_all(dir / "loss.svg");
  REQUIRE(png.size() > 1000);
  CHECK(png.compare(0, 8, std::string("\x89PNG\r\n\x1a\n", 8)) == 0);
  REQUIRE(svg.size() > 1000);
  CHECK(svg.find("<svg") != std::string::npos);
  CHECK(svg.find("</svg>") != std::string::npos);
  // no temporary files left behind
  for (const auto& e : fs::directory_iterator(dir))
    CHECK(e.path().filename().string().find(".tmp.") == std::string::npos);
}

}  // namespace

TEST_CASE("plot: a metrics log with evaluations gives a non-empty PNG and SVG") {
  TempDir tmp("synthetic");
  write(tmp.dir / "metrics.jsonl", synthetic_log(200));
  std::vector<std::string> files = tools::plot_run(tmp.dir.string());
  REQUIRE(files.size() == 2);
  CHECK(files[0] == (tmp.dir / "loss.png").string());
  CHECK(files[1] == (tmp.dir / "loss.svg").string());
  check_outputs(tmp.dir);

  tools::MetricsLog log = tools::read_metrics((tmp.dir / "metrics.jsonl").string());
  CHECK(log.series.at("loss").size() == 200);
  CHECK(log.series.at("eval_accuracy").size() == 20);
  CHECK(log.series.at("eval_loss").front().first == 10);
  CHECK(log.warnings.empty());
}

TEST_CASE("plot: a one-step run, nulls, a constant lr and other panel sizes still draw") {
  TempDir tmp("tiny");
  write(tmp.dir / "metrics.jsonl",
        "{\"step\": 1, \"loss\": 0.5, \"lr\": 0.1, \"grad_norm\": null}\n\n");
  tools::plot_run(tmp.dir.string(), {.panel_width = 300, .panel_height = 200});
  check_outputs(tmp.dir);
}

TEST_CASE("plot: extreme and nearly constant values draw (and terminate)") {
  TempDir tmp("extreme");
  std::string s;
  for (int i = 1; i <= 40; ++i)
    s += fmt::format(R"({{"step": {}, "loss": {}, "lr": {}, "eval_big": {}}})", i,
                     std::pow(10.0, -300 + 15 * i), 1e17 + (i % 3) * 16.0, 1e300 * (i % 2 ? 1 : -1)) + "\n";
  write(tmp.dir / "metrics.jsonl", s);
  tools::plot_run(tmp.dir.string());
  check_outputs(tmp.dir);
}

TEST_CASE("plot: the metrics of a real Trainer run") {
  TempDir tmp("trainer");
  manual_seed(3);
  nn::Linear lin(2, 2);
  optim::SGD opt(lin.parameters(), {.lr = 0.1});
  Tensor x = randn({16, 2}), y = from_vector(std::vector<int64_t>(16, 1), {16});
  nn::TrainerOptions o;
  o.max_steps = 30;
  o.eval_every = 5;
  o.run_dir = tmp.dir.string();
  o.progress = false;
  nn::Trainer t(o, lin, opt, nullptr,
                [&](int64_t, int) -> nn::MicroBatchLoss { return cross_entropy(lin.forward(x), y); },
                [&] { return std::map<std::string, double>{{"loss", cross_entropy(lin.forward(x), y).item()}}; });
  t.fit();
  tools::plot_run(tmp.dir.string());
  check_outputs(tmp.dir);
}

TEST_CASE("plot: missing or corrupt metrics are graft::Error naming the file and line") {
  TempDir tmp("errors");
  CHECK_THROWS_WITH_AS(tools::plot_run(tmp.dir.string()), doctest::Contains("does not exist"), Error);
  CHECK_THROWS_WITH_AS(tools::plot_run((tmp.dir / "nope").string()),
                       doctest::Contains("not a directory"), Error);

  const std::string good = "{\"step\": 1, \"loss\": 0.5}\n{\"step\": 2, \"loss\": 0.4}\n";
  write(tmp.dir / "metrics.jsonl", good + "{\"step\": 3, \"loss\": 0.3\n{\"step\": 4, \"loss\": 0.2}\n");
  CHECK_THROWS_WITH_AS(tools::plot_run(tmp.dir.string()),
                       doctest::Contains("metrics.jsonl:3: not valid JSON"), Error);
  CHECK(!fs::exists(tmp.dir / "loss.png"));  // nothing written

  write(tmp.dir / "metrics.jsonl", good + "[1, 2]\n");
  CHECK_THROWS_WITH_AS(tools::plot_run(tmp.dir.string()), doctest::Contains("metrics.jsonl:3"), Error);
  write(tmp.dir / "metrics.jsonl", good + "{\"loss\": 0.1}\n");
  CHECK_THROWS_WITH_AS(tools::plot_run(tmp.dir.string()), doctest::Contains("integer \"step\""), Error);
  write(tmp.dir / "metrics.jsonl", "{\"step\": 1, \"loss\": \"low\"}\n");
  CHECK_THROWS_WITH_AS(tools::plot_run(tmp.dir.string()),
                       doctest::Contains("metrics.jsonl:1: \"loss\""), Error);
  write(tmp.dir / "metrics.jsonl", "{\"step\": 1, \"eval_loss\": 0.5}\n");
  CHECK_THROWS_WITH_AS(tools::plot_run(tmp.dir.string()), doctest::Contains("no training steps"), Error);
  write(tmp.dir / "metrics.jsonl", "");
  CHECK_THROWS_WITH_AS(tools::plot_run(tmp.dir.string()), doctest::Contains("no training steps"), Error);

  // a last line cut short by a crash (no newline) is skipped with a warning
  write(tmp.dir / "metrics.jsonl", good + "{\"step\": 3, \"lo");
  tools::MetricsLog log = tools::read_metrics((tmp.dir / "metrics.jsonl").string());
  CHECK(log.series.at("loss").size() == 2);
  REQUIRE(log.warnings.size() == 1);
  CHECK(log.warnings[0].find(":3:") != std::string::npos);
  tools::plot_run(tmp.dir.string());
  check_outputs(tmp.dir);
}

TEST_CASE("plot_compare: several runs in one image, by step or by wall time") {
  TempDir tmp("compare");
  for (const char* r : {"a", "b"}) fs::create_directories(tmp.dir / r);
  write(tmp.dir / "a" / "metrics.jsonl", synthetic_log(60));
  write(tmp.dir / "b" / "metrics.jsonl", synthetic_log(90));
  const std::string a = (tmp.dir / "a").string(), b = (tmp.dir / "b").string();
  const std::string out = (tmp.dir / "cmp").string();
  const auto files = tools::plot_compare({a, b}, out, {.labels = {"graft", "PyTorch"}});
  REQUIRE(files.size() == 2);
  CHECK(files[0] == out + ".png");
  const std::string png_step = read_all(out + ".png"), svg_two = read_all(out + ".svg");
  CHECK(png_step.compare(0, 8, std::string("\x89PNG\r\n\x1a\n", 8)) == 0);
  CHECK(svg_two.find("</svg>") != std::string::npos);
  // each run has its own colour: the second run's (kPalette[1], orange) is drawn only with two runs
  const std::string orange = "rgb(100%,49.8%,5.5%)";
  CHECK(svg_two.find(orange) != std::string::npos);
  tools::plot_compare({a}, out, {});
  CHECK(read_all(out + ".svg").find(orange) == std::string::npos);
  // by time, the points sit at their "elapsed" seconds: the same losses logged at other times
  // (step i at about 0.0001 i^2 s instead of 0.01 i s) draw another image
  tools::plot_compare({b}, out, {.x_time = true});
  const std::string png_linear = read_all(out + ".png");
  std::string late = synthetic_log(90);
  for (int i = 90; i >= 1; --i) {
    const std::string from = fmt::format("\"elapsed\": {}", i * 0.01);
    for (size_t at = late.find(from + ","); at != std::string::npos; at = late.find(from + ",", at + 1))
      late.replace(at, from.size(), fmt::format("\"elapsed\": {}", 0.0001 * i * i));
  }
  fs::create_directories(tmp.dir / "c");
  write(tmp.dir / "c" / "metrics.jsonl", late);
  tools::plot_compare({(tmp.dir / "c").string()}, out, {.labels = {"b"}, .x_time = true});
  CHECK(read_all(out + ".png") != png_linear);
  tools::plot_compare({(tmp.dir / "c").string()}, out, {.labels = {"b"}});  // by step: no difference
  const std::string png_c_step = read_all(out + ".png");
  tools::plot_compare({b}, out, {});
  CHECK(read_all(out + ".png") == png_c_step);

  CHECK_THROWS_WITH_AS(tools::plot_compare({a, b}, out, {.labels = {"one"}}),
                       doctest::Contains("1 labels for 2 run directories"), Error);
  CHECK_THROWS_WITH_AS(tools::plot_compare({}, out, {}), doctest::Contains("0 run directories"), Error);
  CHECK_THROWS_WITH_AS(tools::plot_compare({a, (tmp.dir / "none").string()}, out, {}),
                       doctest::Contains("not a directory"), Error);
  write(tmp.dir / "b" / "metrics.jsonl", "{\"step\": 1, \"loss\": 0.5}\n");
  CHECK_THROWS_WITH_AS(tools::plot_compare({a, b}, out, {.x_time = true}),
                       doctest::Contains("no \"elapsed\" values"), Error);
}
