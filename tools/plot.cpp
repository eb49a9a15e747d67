// `graft plot`: metrics.jsonl -> loss.png + loss.svg with cairo (see tools/plot.h).
//
// The same drawing code renders onto an image surface (PNG) and an SVG surface. A panel is a
// plot area with a frame, grid lines at "nice" tick values (1, 2, 5 x 10^k, or decades on a
// log axis), tick labels, axis titles, a title and a legend in its top-right corner.
#include "tools/plot.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <numbers>
#include <sstream>

#include <cairo-svg.h>
#include <cairo.h>
#include <fontconfig/fontconfig.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "ops/error.h"
#include "ops/file_io.h"
#include "tools/cairo_bytes.h"

namespace graft::tools {

namespace fs = std::filesystem;

namespace {

using Points = std::vector<std::pair<double, double>>;

// ---------------------------------------------------------------- reading
std::string read_metrics_file(const std::string& path) {
  std::error_code ec;
  GRAFT_CHECK(fs::exists(path, ec), "plot: {} does not exist; hint: train with a run directory "
              "first (graft train mlp --run-dir DIR), then run graft plot DIR", path);
  GRAFT_CHECK(fs::is_regular_file(path, ec), "plot: {} is not a regular file", path);
  return read_file(path, "plot");
}

}  // namespace

MetricsLog read_metrics(const std::string& path) {
  const std::string text = read_metrics_file(path);
  MetricsLog log;
  size_t pos = 0;
  int64_t line_no = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    const bool complete = end != std::string::npos;
    if (!complete) end = text.size();
    std::string line = text.substr(pos, end - pos);
    pos = end + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception& e) {
      if (!complete) {  // the last line, cut short (a run killed while writing it)
        log.warnings.push_back(
            fmt::format("{}:{}: incomplete last line skipped", path, line_no));
        break;
      }
      throw Error(fmt::format("plot: {}:{}: not valid JSON ({}); hint: metrics.jsonl holds one "
                              "JSON object per line, as nn::Trainer writes it",
                              path, line_no, e.what()));
    }
    GRAFT_CHECK(j.is_object() && j.contains("step") && j["step"].is_number_integer(),
                "plot: {}:{}: expected a JSON object with an integer \"step\"", path, line_no);
    const double step = double(j["step"].get<int64_t>());
    for (auto& [k, v] : j.items()) {
      if (k == "step") continue;
      if (v.is_null()) continue;  // NaN or infinity when written
      GRAFT_CHECK(v.is_number(), "plot: {}:{}: \"{}\" is {}, expected a number or null", path,
                  line_no, k, v.dump().substr(0, 40));
      const double x = v.get<double>();
      if (std::isfinite(x)) log.series[k].emplace_back(step, x);
    }
  }
  return log;
}

namespace {

// ---------------------------------------------------------------- axes
struct Axis {
  double lo = 0, hi = 1;
  bool log = false;
  // data -> [0, 1]
  double norm(double v) const {
    if (log) return (std::log10(v) - std::log10(lo)) / (std::log10(hi) - std::log10(lo));
    return (v - lo) / (hi - lo);
  }
};

double nice_step(double range, int target) {
  const double raw = range / target;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  const double n = raw / mag;
  return (n < 1.5 ? 1 : n < 3 ? 2 : n < 7 ? 5 : 10) * mag;
}

// Limits and ticks for data in [lo, hi]; `integer` axes (steps) get whole-number ticks.
Axis make_axis(double lo, double hi, bool allow_log, bool pad, bool integer) {
  Axis a;
  if (!(lo <= hi)) lo = 0, hi = 1;
  if (allow_log && lo > 0 && hi / lo >= 100) {
    a.log = true;
    a.lo = std::pow(10.0, std::floor(std::log10(lo)));
    a.hi = std::pow(10.0, std::ceil(std::log10(hi)));
    if (a.hi <= a.lo) a.hi = a.lo * 10;
    return a;
  }
  if (hi - lo <= 1e-9 * std::max(std::abs(lo), std::abs(hi))) {  // (nearly) constant
    const double d = lo == 0 ? 1 : std::abs(lo) * 0.1;
    lo -= d, hi += d;
  } else if (pad) {
    const double d = (hi - lo) * 0.05;
    lo -= d, hi += d;
  }
  if (integer && hi - lo < 2) hi = lo + 2;
  a.lo = lo, a.hi = hi;
  return a;
}

std::vector<double> ticks(const Axis& a, bool integer) {
  std::vector<double> t;
  if (a.log) {
    const int d0 = int(std::lround(std::log10(a.lo))), d1 = int(std::lround(std::log10(a.hi)));
    const bool minor = d1 - d0 <= 2;
    const int every = std::max(1, (d1 - d0 + 7) / 8);  // at most ~8 decades labelled
    for (int d = d0; d <= d1; d += every)
      for (double m : {1.0, 2.0, 5.0}) {
        if (m != 1.0 && !minor) continue;
        const double v = m * std::pow(10.0, d);
        if (v >= a.lo * 0.999 && v <= a.hi * 1.001) t.push_back(v);
      }
    return t;
  }
  double step = nice_step(a.hi - a.lo, 6);
  if (integer) step = std::max(1.0, std::round(step));
  if (!std::isfinite(step) || step <= 0) return t;
  const double first = std::ceil(a.lo / step) * step;
  for (int i = 0; i < 50; ++i) {  // bounded, even where step is below the values' precision
    const double v = first + i * step;
    if (!(v <= a.hi + step * 1e-9)) break;
    if (!t.empty() && v <= t.back()) continue;
    t.push_back(std::abs(v) < step * 1e-9 ? 0.0 : v);
  }
  return t;
}

std::string tick_label(double v, const std::vector<double>& all, bool log) {
  if (log) {
    const double e = std::log10(v);
    if (v >= 1e-3 && v < 1e5) return fmt::format("{:g}", v);
    if (std::abs(e - std::round(e)) < 1e-9) return fmt::format("1e{}", int(std::lround(e)));
    return fmt::format("{:.0e}", v);
  }
  double step = all.size() > 1 ? all[1] - all[0] : 1;
  double big = 0;
  for (double x : all) big = std::max(big, std::abs(x));
  if (big >= 1e6 || (step < 1e-4 && big > 0)) return fmt::format("{:.3g}", v);
  const int decimals = std::max(0, int(std::ceil(-std::log10(step) - 1e-9)));
  return fmt::format("{:.{}f}", v, decimals);
}

// ---------------------------------------------------------------- drawing
struct Color {
  double r, g, b;
};
constexpr Color kPalette[] = {{0.122, 0.467, 0.706}, {1.0, 0.498, 0.055}, {0.173, 0.627, 0.173},
                              {0.839, 0.153, 0.157}, {0.580, 0.404, 0.741}, {0.549, 0.337, 0.294}};

struct Curve {
  std::string label;
  Points pts;
  Color color;
  double width = 1.8;
  double alpha = 1.0;
  bool markers = false;
};

struct Panel {
  std::string title, ylabel;
  std::vector<Curve> curves;
  bool allow_log = false;
  std::string xlabel = "step";
  bool integer_x = true;  // steps; false for seconds
};

void set_color(cairo_t* cr, Color c, double alpha = 1.0) {
  cairo_set_source_rgba(cr, c.r, c.g, c.b, alpha);
}

void text_at(cairo_t* cr, const std::string& s, double x, double y, double size, bool bold,
             double align_x, double align_y) {
  cairo_select_font_face(cr, "sans-serif", CAIRO_FONT_SLANT_NORMAL,
                         bold ? CAIRO_FONT_WEIGHT_BOLD : CAIRO_FONT_WEIGHT_NORMAL);
  cairo_set_font_size(cr, size);
  cairo_text_extents_t e;
  cairo_text_extents(cr, s.c_str(), &e);
  // align_y: 0 puts the cap height's top at y, 0.5 centres it, 1 puts the baseline at y
  const double cap = size * 0.72;
  cairo_move_to(cr, x - e.width * align_x - e.x_bearing, y + cap * (1 - align_y));
  cairo_show_text(cr, s.c_str());
}

double text_width(cairo_t* cr, const std::string& s, double size) {
  cairo_select_font_face(cr, "sans-serif", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);
  cairo_set_font_size(cr, size);
  cairo_text_extents_t e;
  cairo_text_extents(cr, s.c_str(), &e);
  return e.x_advance;
}

// At most ~2 points per pixel column: for each bucket of x, its min and max in x order.
Points decimate(const Points& p, size_t max_points) {
  if (p.size() <= max_points) return p;
  Points out;
  const size_t buckets = max_points / 2, n = p.size();
  for (size_t b = 0; b < buckets; ++b) {
    const size_t i0 = b * n / buckets, i1 = std::max(i0 + 1, (b + 1) * n / buckets);
    size_t lo = i0, hi = i0;
    for (size_t i = i0; i < i1 && i < n; ++i) {
      if (p[i].second < p[lo].second) lo = i;
      if (p[i].second > p[hi].second) hi = i;
    }
    out.push_back(p[std::min(lo, hi)]);
    if (lo != hi) out.push_back(p[std::max(lo, hi)]);
  }
  return out;
}

// Draws one panel in the box (px, py, pw, ph); every panel shares the step range [xmin, xmax].
void draw_panel(cairo_t* cr, const Panel& panel, double px, double py, double pw, double ph,
                double xmin, double xmax) {
  const double left = 78, right = 18, top = 34, bottom = 52;
  const double x0 = px + left, y0 = py + top, w = pw - left - right, h = ph - top - bottom;

  // data ranges
  double ymin = std::numeric_limits<double>::infinity(), ymax = -ymin;
  for (const Curve& c : panel.curves)
    for (auto [x, y] : c.pts) ymin = std::min(ymin, y), ymax = std::max(ymax, y);
  const Axis ax = make_axis(xmin, xmax, false, false, panel.integer_x);
  const Axis ay = make_axis(ymin, ymax, panel.allow_log, true, false);
  auto X = [&](double v) { return x0 + ax.norm(v) * w; };
  auto Y = [&](double v) { return y0 + h - ay.norm(v) * h; };

  // title
  cairo_set_source_rgb(cr, 0.1, 0.1, 0.1);
  text_at(cr, panel.title, x0 + w / 2, py + top / 2, 14, true, 0.5, 0.5);

  // grid and ticks
  cairo_set_line_width(cr, 1.0);
  const auto xt = ticks(ax, panel.integer_x), yt = ticks(ay, false);
  for (double v : xt) {
    cairo_set_source_rgb(cr, 0.9, 0.9, 0.9);
    cairo_move_to(cr, X(v), y0);
    cairo_line_to(cr, X(v), y0 + h);
    cairo_stroke(cr);
    cairo_set_source_rgb(cr, 0.2, 0.2, 0.2);
    cairo_move_to(cr, X(v), y0 + h);
    cairo_line_to(cr, X(v), y0 + h + 5);
    cairo_stroke(cr);
    text_at(cr, tick_label(v, xt, false), X(v), y0 + h + 16, 11, false, 0.5, 0.5);
  }
  for (double v : yt) {
    cairo_set_source_rgb(cr, 0.9, 0.9, 0.9);
    cairo_move_to(cr, x0, Y(v));
    cairo_line_to(cr, x0 + w, Y(v));
    cairo_stroke(cr);
    cairo_set_source_rgb(cr, 0.2, 0.2, 0.2);
    cairo_move_to(cr, x0 - 5, Y(v));
    cairo_line_to(cr, x0, Y(v));
    cairo_stroke(cr);
    text_at(cr, tick_label(v, yt, ay.log), x0 - 8, Y(v), 11, false, 1.0, 0.5);
  }

  // axis titles
  cairo_set_source_rgb(cr, 0.1, 0.1, 0.1);
  text_at(cr, panel.xlabel, x0 + w / 2, y0 + h + 38, 12, false, 0.5, 0.5);
  cairo_save(cr);
  cairo_translate(cr, px + 16, y0 + h / 2);
  cairo_rotate(cr, -std::numbers::pi / 2);
  text_at(cr, panel.ylabel + (ay.log ? " (log scale)" : ""), 0, 0, 12, false, 0.5, 0.5);
  cairo_restore(cr);

  // curves, clipped to the plot area
  cairo_save(cr);
  cairo_rectangle(cr, x0, y0, w, h);
  cairo_clip(cr);
  cairo_set_line_join(cr, CAIRO_LINE_JOIN_ROUND);
  for (const Curve& c : panel.curves) {
    const Points pts = decimate(c.pts, size_t(std::max(2.0, 2 * w)));
    set_color(cr, c.color, c.alpha);
    cairo_set_line_width(cr, c.width);
    bool pen = false;
    for (auto [x, y] : pts) {
      if (ay.log && y <= 0) {
        pen = false;
        continue;
      }
      if (pen)
        cairo_line_to(cr, X(x), Y(y));
      else
        cairo_move_to(cr, X(x), Y(y));
      pen = true;
    }
    if (pts.size() == 1 && !c.markers) {  // a single point: a dot
      cairo_arc(cr, X(pts[0].first), Y(pts[0].second), 2.5, 0, 2 * std::numbers::pi);
      cairo_fill(cr);
    }
    cairo_stroke(cr);
    if (c.markers && pts.size() <= 300)
      for (auto [x, y] : pts) {
        if (ay.log && y <= 0) continue;
        cairo_arc(cr, X(x), Y(y), 3.0, 0, 2 * std::numbers::pi);
        cairo_fill(cr);
      }
  }
  cairo_restore(cr);

  // frame
  cairo_set_source_rgb(cr, 0.2, 0.2, 0.2);
  cairo_set_line_width(cr, 1.2);
  cairo_rectangle(cr, x0, y0, w, h);
  cairo_stroke(cr);

  // legend (top right, inside)
  double lw = 0;
  for (const Curve& c : panel.curves) lw = std::max(lw, text_width(cr, c.label, 11));
  const double row = 17, box_w = lw + 44, box_h = row * double(panel.curves.size()) + 8;
  // the corner that hides the fewest points: top right, bottom right, top left, bottom left
  double bx = x0 + w - box_w - 8, by = y0 + 8;
  size_t fewest = SIZE_MAX;
  for (auto [cx, cy] : {std::pair{x0 + w - box_w - 8, y0 + 8}, {x0 + w - box_w - 8, y0 + h - box_h - 8},
                        {x0 + 8, y0 + 8}, {x0 + 8, y0 + h - box_h - 8}}) {
    size_t hidden = 0;
    for (const Curve& c : panel.curves)
      for (auto [x, y] : c.pts) {
        if (ay.log && y <= 0) continue;
        const double u = X(x), v = Y(y);
        hidden += u >= cx - 4 && u <= cx + box_w + 4 && v >= cy - 4 && v <= cy + box_h + 4;
      }
    if (hidden < fewest) fewest = hidden, bx = cx, by = cy;
  }
  cairo_set_source_rgba(cr, 1, 1, 1, 0.88);
  cairo_rectangle(cr, bx, by, box_w, box_h);
  cairo_fill_preserve(cr);
  cairo_set_source_rgb(cr, 0.75, 0.75, 0.75);
  cairo_set_line_width(cr, 1);
  cairo_stroke(cr);
  for (size_t i = 0; i < panel.curves.size(); ++i) {
    const Curve& c = panel.curves[i];
    const double cy = by + 4 + row * (double(i) + 0.5);
    set_color(cr, c.color, std::max(c.alpha, 0.6));
    cairo_set_line_width(cr, std::max(c.width, 1.5));
    cairo_move_to(cr, bx + 8, cy);
    cairo_line_to(cr, bx + 30, cy);
    cairo_stroke(cr);
    if (c.markers) {
      cairo_arc(cr, bx + 19, cy, 3.0, 0, 2 * std::numbers::pi);
      cairo_fill(cr);
    }
    cairo_set_source_rgb(cr, 0.1, 0.1, 0.1);
    text_at(cr, c.label, bx + 36, cy, 11, false, 0.0, 0.5);
  }
}

// A centred moving average over about 1/50 of the run (no lag, unlike an EMA); the window
// shrinks symmetrically at the ends.
Points smooth(const Points& p) {
  const int64_t n = int64_t(p.size()), half = std::max<int64_t>(1, n / 100);
  std::vector<double> prefix(size_t(n) + 1, 0.0);
  for (int64_t i = 0; i < n; ++i) prefix[size_t(i) + 1] = prefix[size_t(i)] + p[size_t(i)].second;
  Points out;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t h = std::min({half, i, n - 1 - i});
    out.emplace_back(p[size_t(i)].first,
                     (prefix[size_t(i + h + 1)] - prefix[size_t(i - h)]) / double(2 * h + 1));
  }
  return out;
}

std::vector<Panel> make_panels(const MetricsLog& log, const std::string& path) {
  auto get = [&](const std::string& k) -> const Points* {
    auto it = log.series.find(k);
    return it == log.series.end() || it->second.empty() ? nullptr : &it->second;
  };
  const Points* loss = get("loss");
  GRAFT_CHECK(loss, "plot: {} has no training steps (no \"loss\" values)", path);
  std::vector<Panel> panels;

  Panel p{.title = "Loss", .ylabel = "loss", .curves = {}, .allow_log = true};
  if (loss->size() >= 10) {
    p.curves.push_back({"train loss", *loss, kPalette[0], 1.0, 0.3, false});
    p.curves.push_back({"train loss (smoothed)", smooth(*loss), kPalette[0], 2.0, 1.0, false});
  } else {
    p.curves.push_back({"train loss", *loss, kPalette[0], 2.0, 1.0, true});
  }
  if (const Points* ev = get("eval_loss"))
    p.curves.push_back({"eval loss", *ev, kPalette[1], 2.0, 1.0, true});
  panels.push_back(p);

  size_t color = 2;
  for (auto& [k, pts] : log.series) {
    if (k.rfind("eval_", 0) != 0 || k == "eval_loss" || pts.empty()) continue;
    const std::string name = k.substr(5);
    panels.push_back({.title = "Eval " + name, .ylabel = name,
                      .curves = {{"eval " + name, pts, kPalette[color++ % 6], 2.0, 1.0, true}},
                      .allow_log = false});
  }
  if (const Points* lr = get("lr"))
    panels.push_back({.title = "Learning rate", .ylabel = "lr",
                      .curves = {{"lr", *lr, kPalette[2], 2.0, 1.0, false}}, .allow_log = false});
  if (const Points* gn = get("grad_norm"))
    panels.push_back({.title = "Gradient norm (before clipping)", .ylabel = "grad norm",
                      .curves = {{"grad norm", *gn, kPalette[4], 1.2, 0.8, false}},
                      .allow_log = true});
  return panels;
}

void render(cairo_t* cr, const std::vector<Panel>& panels, const std::string& title, int cols,
            const PlotOptions& o) {
  const double head = 40;
  cairo_set_source_rgb(cr, 1, 1, 1);
  cairo_paint(cr);
  const int rows = int((panels.size() + size_t(cols) - 1) / size_t(cols));
  cairo_set_source_rgb(cr, 0.05, 0.05, 0.05);
  text_at(cr, title, cols * o.panel_width / 2.0, head / 2, 16, true, 0.5, 0.5);
  double xmin = std::numeric_limits<double>::infinity(), xmax = -xmin;
  for (const Panel& p : panels)
    for (const Curve& c : p.curves)
      for (auto [x, y] : c.pts) xmin = std::min(xmin, x), xmax = std::max(xmax, x);
  if (xmin >= 0 && xmin <= 0.1 * xmax) xmin = 0;  // start at step 0 unless resumed far in
  for (size_t i = 0; i < panels.size(); ++i) {
    const int r = int(i) / cols, c = int(i) % cols;
    draw_panel(cr, panels[i], c * o.panel_width, head + r * o.panel_height, o.panel_width,
               o.panel_height, xmin, xmax);
  }
  (void)rows;
}

void check_surface(cairo_surface_t* s, const std::string& what) {
  const cairo_status_t st = cairo_surface_status(s);
  if (st != CAIRO_STATUS_SUCCESS) {
    cairo_surface_destroy(s);
    throw Error(fmt::format("plot: cannot write {}: {}", what, cairo_status_to_string(st)));
  }
}

// The panels in a grid of two columns (one for a single panel) under `title`, as PNG and SVG.
std::vector<std::string> write_images(const std::vector<Panel>& panels, const std::string& title,
                                      const std::string& png, const std::string& svg, const PlotOptions& o) {
  const int cols = panels.size() == 1 ? 1 : 2;
  const int rows = int((panels.size() + size_t(cols) - 1) / size_t(cols));
  const int W = cols * o.panel_width, H = 40 + rows * o.panel_height;

  {  // PNG
    cairo_surface_t* s = cairo_image_surface_create(CAIRO_FORMAT_ARGB32, W, H);
    check_surface(s, png);
    cairo_t* cr = cairo_create(s);
    render(cr, panels, title, cols, o);
    cairo_destroy(cr);
    std::string bytes;
    const cairo_status_t st = cairo_surface_write_to_png_stream(s, append_bytes, &bytes);
    cairo_surface_destroy(s);
    GRAFT_CHECK(st == CAIRO_STATUS_SUCCESS, "plot: cannot encode {}: {}", png, cairo_status_to_string(st));
    atomic_write(png, bytes, "plot");
  }
  {  // SVG
    std::string bytes;
    cairo_surface_t* s = cairo_svg_surface_create_for_stream(append_bytes, &bytes, W, H);
    check_surface(s, svg);
    cairo_t* cr = cairo_create(s);
    render(cr, panels, title, cols, o);
    cairo_destroy(cr);
    cairo_surface_finish(s);
    const cairo_status_t st = cairo_surface_status(s);
    cairo_surface_destroy(s);
    GRAFT_CHECK(st == CAIRO_STATUS_SUCCESS, "plot: cannot encode {}: {}", svg, cairo_status_to_string(st));
    atomic_write(svg, bytes, "plot");
  }
  return {png, svg};
}

void check_panel_size(const PlotOptions& o) {
  GRAFT_CHECK(o.panel_width >= 200 && o.panel_width <= 4000 && o.panel_height >= 150 &&
                  o.panel_height <= 4000,
              "plot: panel size {}x{} is out of range (200-4000 x 150-4000)", o.panel_width,
              o.panel_height);
}

// A run directory's metrics (warnings printed) and its name (the directory's last component).
struct Run {
  MetricsLog log;
  std::string name, metrics_path;
};
Run read_run(const std::string& run_dir) {
  std::error_code ec;
  GRAFT_CHECK(fs::is_directory(run_dir, ec), "plot: {} is not a directory (expected a run "
              "directory with a metrics.jsonl)", run_dir);
  Run r;
  r.metrics_path = (fs::path(run_dir) / "metrics.jsonl").string();
  r.log = read_metrics(r.metrics_path);
  for (const std::string& w : r.log.warnings) std::fprintf(stderr, "plot: warning: %s\n", w.c_str());
  r.name = fs::weakly_canonical(run_dir, ec).filename().string();
  if (r.name.empty()) r.name = run_dir;
  return r;
}

// points (step, v) -> (seconds since the start, v) by the "elapsed" of the same step (the last
// line of that step: an evaluation's point gets the time after the evaluation).
Points by_time(const Points& pts, const std::map<double, double>& elapsed) {
  Points out;
  for (auto [step, v] : pts)
    if (auto it = elapsed.find(step); it != elapsed.end()) out.emplace_back(it->second, v);
  return out;
}

}  // namespace

std::vector<std::string> plot_run(const std::string& run_dir, const PlotOptions& o) {
  check_panel_size(o);
  const Run r = read_run(run_dir);
  const std::vector<Panel> panels = make_panels(r.log, r.metrics_path);
  const Points& loss = r.log.series.at("loss");
  const std::string title = fmt::format("graft run {}: {} steps, last train loss {:.4g}", r.name,
                                        int64_t(loss.back().first), loss.back().second);
  const fs::path dir(run_dir);
  return write_images(panels, title, (dir / "loss.png").string(), (dir / "loss.svg").string(), o);
}

std::vector<std::string> plot_compare(const std::vector<std::string>& run_dirs, const std::string& out,
                                      const CompareOptions& o) {
  check_panel_size(o.panel);
  constexpr size_t kMaxRuns = std::size(kPalette);
  GRAFT_CHECK(!run_dirs.empty() && run_dirs.size() <= kMaxRuns, "plot: {} run directories given; "
              "compare 1 to {}", run_dirs.size(), kMaxRuns);
  GRAFT_CHECK(o.labels.empty() || o.labels.size() == run_dirs.size(), "plot: {} labels for {} run "
              "directories; give one label per run (or none)", o.labels.size(), run_dirs.size());
  GRAFT_CHECK(!out.empty(), "plot: the output name is empty");
  Panel loss{.title = "Train loss (smoothed)", .ylabel = "loss", .curves = {}, .allow_log = true};
  std::map<std::string, Panel> evals;  // eval_ metric -> its panel
  std::vector<std::string> names;
  for (size_t i = 0; i < run_dirs.size(); ++i) {
    const Run r = read_run(run_dirs[i]);
    const std::string label = o.labels.empty() ? r.name : o.labels[i];
    names.push_back(label);
    std::map<double, double> elapsed;
    if (o.x_time) {
      auto it = r.log.series.find("elapsed");
      GRAFT_CHECK(it != r.log.series.end() && !it->second.empty(), "plot: {} has no \"elapsed\" "
                  "values, needed for the time axis", r.metrics_path);
      for (auto [step, t] : it->second) elapsed[step] = t;
    }
    auto x = [&](const Points& p) { return o.x_time ? by_time(p, elapsed) : p; };
    const Color c = kPalette[i];
    auto it = r.log.series.find("loss");
    GRAFT_CHECK(it != r.log.series.end() && !it->second.empty(), "plot: {} has no training steps "
                "(no \"loss\" values)", r.metrics_path);
    const Points& l = it->second;
    loss.curves.push_back({label, x(l.size() >= 10 ? smooth(l) : l), c, 2.0, 1.0, l.size() < 10});
    for (const auto& [k, pts] : r.log.series) {
      if (k.rfind("eval_", 0) != 0 || pts.empty()) continue;
      Panel& p = evals[k];
      p.title = "Eval " + k.substr(5), p.ylabel = k.substr(5), p.allow_log = k == "eval_loss";
      p.curves.push_back({label, x(pts), c, 2.0, 1.0, true});
    }
  }
  std::vector<Panel> panels{loss};
  for (auto& [k, p] : evals) panels.push_back(p);
  for (Panel& p : panels) p.xlabel = o.x_time ? "seconds" : "step", p.integer_x = !o.x_time;
  const std::string title = fmt::format("{}, by {}", fmt::join(names, " vs "), o.x_time ? "wall time" : "step");
  return write_images(panels, title, out + ".png", out + ".svg", o.panel);
}

void release_plot_caches() {
  cairo_debug_reset_static_data();
  FcFini();
}

}  // namespace graft::tools
