// tools/heatmap.h: the PNG is written, cairo reads it back, its pixels follow the values.
#include <doctest/doctest.h>

#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include <cairo.h>
#include <fmt/format.h>

#include "ops/error.h"
#include "tools/heatmap.h"
#include "tools/plot.h"

using namespace graft;
namespace fs = std::filesystem;

namespace {

struct ReleaseHeatmapCaches {
  ~ReleaseHeatmapCaches() { tools::release_plot_caches(); }
} release_heatmap_caches;

fs::path temp_png(const std::string& name) {
  return fs::temp_directory_path() / fmt::format("graft_heatmap_{}_{}.png", ::getpid(), name);
}

// The blue channel of the pixel at (x, y) of an ARGB32 image (premultiplied, opaque here).
int blue_at(cairo_surface_t* s, int x, int y) {
  cairo_surface_flush(s);
  const unsigned char* d = cairo_image_surface_get_data(s);
  const int stride = cairo_image_surface_get_stride(s);
  const uint32_t px = *reinterpret_cast<const uint32_t*>(d + y * stride + x * 4);
  return int(px & 0xff);
}
int red_at(cairo_surface_t* s, int x, int y) {
  const unsigned char* d = cairo_image_surface_get_data(s);
  const int stride = cairo_image_surface_get_stride(s);
  const uint32_t px = *reinterpret_cast<const uint32_t*>(d + y * stride + x * 4);
  return int((px >> 16) & 0xff);
}

}  // namespace

TEST_CASE("heatmap: PNG decodes, and darker cells hold larger values") {
  const fs::path p = temp_png("basic");
  // 2 x 3 matrix; the largest value bottom-right, the smallest top-left.
  const std::vector<float> v = {0.0f, 0.2f, 0.4f, 0.6f, 0.8f, 1.0f};
  tools::write_heatmap_png(p.string(), v, 2, 3, {"the", "cat"}, {"a", "cat", "sat"}, "scores");
  cairo_surface_t* s = cairo_image_surface_create_from_png(p.string().c_str());
  REQUIRE(cairo_surface_status(s) == CAIRO_STATUS_SUCCESS);
  const int w = cairo_image_surface_get_width(s), h = cairo_image_surface_get_height(s);
  CHECK(w > 3 * 32);  // 32-pixel cells for a small matrix, plus labels and the colour bar
  CHECK(h > 2 * 32);
  // Find the grid: scan the middle row of the image for the most red-dark pixel (value 1.0 is
  // the darkest cell, bottom right). Instead of assuming the layout, compare pixel redness
  // along the bottom row of cells: the red channel decreases as values grow.
  // Locate the cells by the darkest pixel in the image.
  int best = 256, bx = -1, by = -1;
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x)
      if (red_at(s, x, y) < best && blue_at(s, x, y) > 100) best = red_at(s, x, y), bx = x, by = y;
  REQUIRE(bx >= 0);
  CHECK(best < 40);  // the maximum is drawn dark blue
  // The cell to its left (value 0.8) is lighter, the one above (0.4) lighter still.
  const int left = red_at(s, bx - 32, by), up = red_at(s, bx, by - 32);
  CHECK(left > best);
  CHECK(up > left);
  cairo_surface_destroy(s);
  fs::remove(p);
}

TEST_CASE("heatmap: large matrices and no labels") {
  const fs::path p = temp_png("large");
  std::vector<float> v(200 * 150);
  for (size_t i = 0; i < v.size(); ++i) v[i] = float(i % 17);
  tools::write_heatmap_png(p.string(), v, 200, 150, {}, {}, "big");
  cairo_surface_t* s = cairo_image_surface_create_from_png(p.string().c_str());
  REQUIRE(cairo_surface_status(s) == CAIRO_STATUS_SUCCESS);
  CHECK(cairo_image_surface_get_height(s) >= 200 * 3);
  cairo_surface_destroy(s);
  fs::remove(p);
}

TEST_CASE("heatmap: bad input raises graft::Error") {
  const fs::path p = temp_png("bad");
  CHECK_THROWS_AS(tools::write_heatmap_png(p.string(), {1, 2, 3}, 2, 2, {}, {}, "t"), Error);
  CHECK_THROWS_AS(tools::write_heatmap_png(p.string(), {}, 0, 0, {}, {}, "t"), Error);
  CHECK_THROWS_AS(tools::write_heatmap_png(p.string(), {1, 2}, 1, 2, {"a", "b"}, {}, "t"), Error);
  CHECK_THROWS_AS(tools::write_heatmap_png(p.string(), {1, 2}, 1, 2, {}, {"a"}, "t"), Error);
  CHECK_THROWS_AS(tools::write_heatmap_png(p.string(), {1, NAN}, 1, 2, {}, {}, "t"), Error);
  CHECK_THROWS_AS(
      tools::write_heatmap_png("/nonexistent_dir_graft/x.png", {1, 2}, 1, 2, {}, {}, "t"), Error);
  CHECK_FALSE(fs::exists(p));
}
