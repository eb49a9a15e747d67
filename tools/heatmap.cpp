// write_heatmap_png: a labelled matrix heatmap with cairo (see tools/heatmap.h).
//
// Layout, left to right: row labels | cells | colour bar; top to bottom: title | column labels
// (rotated 90 degrees, read bottom-up) | cells. The cell size shrinks with the matrix so that
// large matrices stay a reasonable image (4-32 pixels per cell).
#include "tools/heatmap.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <numbers>

#include <cairo.h>
#include <fmt/format.h>

#include "ops/error.h"
#include "ops/file_io.h"
#include "tools/cairo_bytes.h"

namespace graft::tools {

namespace {

// White (t = 0) to dark blue (t = 1), through light blue: readable in print and greyscale.
void shade(cairo_t* cr, double t) {
  t = std::clamp(t, 0.0, 1.0);
  const double r = 1.0 - 0.92 * t, g = 1.0 - 0.75 * t, b = 1.0 - 0.45 * t;
  cairo_set_source_rgb(cr, r, g, b);
}

double text_advance(cairo_t* cr, const std::string& s) {
  cairo_text_extents_t e;
  cairo_text_extents(cr, s.c_str(), &e);
  return e.x_advance;
}

// Long labels are cut to 24 bytes (on a UTF-8 boundary) plus an ellipsis.
std::string clip_label(const std::string& s) {
  if (s.size() <= 24) return s;
  size_t n = 24;
  while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;
  return s.substr(0, n) + "...";
}

std::vector<std::string> labels_or_numbers(const std::vector<std::string>& given, int64_t n) {
  std::vector<std::string> out;
  out.reserve(size_t(n));
  for (int64_t i = 0; i < n; ++i)
    out.push_back(given.empty() ? std::to_string(i) : clip_label(given[size_t(i)]));
  return out;
}

}  // namespace

void write_heatmap_png(const std::string& path, const std::vector<float>& values, int64_t rows,
                       int64_t cols, const std::vector<std::string>& row_labels,
                       const std::vector<std::string>& col_labels, const std::string& title) {
  GRAFT_CHECK(rows >= 1 && cols >= 1 && rows <= 4096 && cols <= 4096,
              "write_heatmap_png: rows x cols = {} x {}, expected each in [1, 4096]", rows, cols);
  GRAFT_CHECK(int64_t(values.size()) == rows * cols,
              "write_heatmap_png: {} values for a {} x {} matrix, expected {} (row-major)",
              values.size(), rows, cols, rows * cols);
  GRAFT_CHECK(row_labels.empty() || int64_t(row_labels.size()) == rows,
              "write_heatmap_png: {} row labels for {} rows; hint: pass none or one per row",
              row_labels.size(), rows);
  GRAFT_CHECK(col_labels.empty() || int64_t(col_labels.size()) == cols,
              "write_heatmap_png: {} column labels for {} columns; hint: pass none or one per "
              "column", col_labels.size(), cols);
  float lo = values[0], hi = values[0];
  for (size_t i = 0; i < values.size(); ++i) {
    GRAFT_CHECK(std::isfinite(values[i]), "write_heatmap_png: value {} (row {}, col {}) is {}",
                i, int64_t(i) / cols, int64_t(i) % cols, values[i]);
    lo = std::min(lo, values[i]);
    hi = std::max(hi, values[i]);
  }
  const std::vector<std::string> rl = labels_or_numbers(row_labels, rows);
  const std::vector<std::string> cl = labels_or_numbers(col_labels, cols);

  const double cell = std::clamp(640.0 / double(std::max(rows, cols)), 4.0, 32.0);
  const double font = std::clamp(cell * 0.6, 6.0, 12.0);
  const bool show_labels = cell >= 8;  // below that the labels would overlap

  // Measure the labels on a scratch surface.
  double row_w = 0, col_h = 0, title_w = 0;
  {
    cairo_surface_t* s = cairo_image_surface_create(CAIRO_FORMAT_ARGB32, 1, 1);
    cairo_t* cr = cairo_create(s);
    cairo_select_font_face(cr, "sans-serif", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);
    cairo_set_font_size(cr, font);
    if (show_labels) {
      for (const auto& l : rl) row_w = std::max(row_w, text_advance(cr, l));
      for (const auto& l : cl) col_h = std::max(col_h, text_advance(cr, l));
    }
    cairo_select_font_face(cr, "sans-serif", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_BOLD);
    cairo_set_font_size(cr, 14);
    title_w = text_advance(cr, title);
    cairo_destroy(cr);
    cairo_surface_destroy(s);
  }
  const double pad = 10, title_h = 30, bar_w = 16, bar_label_w = 60;
  const double x0 = pad + row_w + 6, y0 = title_h + col_h + 6;
  const double gw = cell * double(cols), gh = cell * double(rows);
  const double W = std::max(x0 + gw + pad + bar_w + bar_label_w, title_w + 2 * pad);
  const double H = y0 + std::max(gh, 60.0) + pad;

  cairo_surface_t* s =
      cairo_image_surface_create(CAIRO_FORMAT_ARGB32, int(std::ceil(W)), int(std::ceil(H)));
  if (cairo_surface_status(s) != CAIRO_STATUS_SUCCESS) {
    const char* why = cairo_status_to_string(cairo_surface_status(s));
    cairo_surface_destroy(s);
    throw Error(fmt::format("write_heatmap_png: cannot create a {}x{} image: {}", W, H, why));
  }
  cairo_t* cr = cairo_create(s);
  cairo_set_source_rgb(cr, 1, 1, 1);
  cairo_paint(cr);

  // title
  cairo_set_source_rgb(cr, 0.05, 0.05, 0.05);
  cairo_select_font_face(cr, "sans-serif", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_BOLD);
  cairo_set_font_size(cr, 14);
  cairo_move_to(cr, (W - title_w) / 2, title_h * 0.7);
  cairo_show_text(cr, title.c_str());

  // cells
  const double span = hi > lo ? double(hi) - double(lo) : 1.0;
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) {
      shade(cr, (double(values[size_t(i * cols + j)]) - lo) / span);
      cairo_rectangle(cr, x0 + cell * double(j), y0 + cell * double(i), cell, cell);
      cairo_fill(cr);
    }
  cairo_set_source_rgb(cr, 0.3, 0.3, 0.3);
  cairo_set_line_width(cr, 1);
  cairo_rectangle(cr, x0, y0, gw, gh);
  cairo_stroke(cr);

  // labels
  if (show_labels) {
    cairo_select_font_face(cr, "sans-serif", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);
    cairo_set_font_size(cr, font);
    cairo_set_source_rgb(cr, 0.1, 0.1, 0.1);
    for (int64_t i = 0; i < rows; ++i) {
      const std::string& l = rl[size_t(i)];
      cairo_move_to(cr, x0 - 4 - text_advance(cr, l), y0 + cell * (double(i) + 0.5) + font * 0.36);
      cairo_show_text(cr, l.c_str());
    }
    for (int64_t j = 0; j < cols; ++j) {
      cairo_save(cr);
      cairo_translate(cr, x0 + cell * (double(j) + 0.5) + font * 0.36, y0 - 4);
      cairo_rotate(cr, -std::numbers::pi / 2);
      cairo_move_to(cr, 0, 0);
      cairo_show_text(cr, cl[size_t(j)].c_str());
      cairo_restore(cr);
    }
  }

  // colour bar: hi at the top, lo at the bottom
  const double bx = x0 + gw + pad, bh = std::max(gh, 60.0);
  for (int k = 0; k < 64; ++k) {
    shade(cr, 1.0 - k / 63.0);
    cairo_rectangle(cr, bx, y0 + bh * k / 64.0, bar_w, bh / 64.0 + 0.5);
    cairo_fill(cr);
  }
  cairo_set_source_rgb(cr, 0.3, 0.3, 0.3);
  cairo_rectangle(cr, bx, y0, bar_w, bh);
  cairo_stroke(cr);
  cairo_select_font_face(cr, "sans-serif", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);
  cairo_set_font_size(cr, 10);
  cairo_set_source_rgb(cr, 0.1, 0.1, 0.1);
  const std::string hs = fmt::format("{:.3g}", hi), ls = fmt::format("{:.3g}", lo);
  cairo_move_to(cr, bx + bar_w + 4, y0 + 8);
  cairo_show_text(cr, hs.c_str());
  cairo_move_to(cr, bx + bar_w + 4, y0 + bh);
  cairo_show_text(cr, ls.c_str());
  cairo_destroy(cr);

  std::string png;
  const cairo_status_t st = cairo_surface_write_to_png_stream(s, append_bytes, &png);
  cairo_surface_destroy(s);
  GRAFT_CHECK(st == CAIRO_STATUS_SUCCESS, "write_heatmap_png: cannot encode {}: {}", path,
              cairo_status_to_string(st));
  atomic_write(path, png, "write_heatmap_png");
}

}  // namespace graft::tools
