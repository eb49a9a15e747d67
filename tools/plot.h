// `graft plot RUN_DIR`: draws the curves of a training run's metrics.jsonl (written by
// nn::Trainer) with cairo, into RUN_DIR/loss.png and RUN_DIR/loss.svg.
//
// One image, one panel per quantity: the training loss (raw, smoothed, and eval_loss when the
// run evaluated), then one panel per other eval_ metric (eval_accuracy, ...), then the learning
// rate and, if logged, the gradient norm. Each panel has axes with tick labels, axis titles, a
// title and a legend; a loss spanning two decades or more gets a logarithmic y axis.
#pragma once
#include <map>
#include <string>
#include <vector>

namespace graft::tools {

// The numbers of a metrics.jsonl file: for every key (except "step"), its (step, value) points
// in file order. JSON null values (NaN or infinite numbers) are left out.
struct MetricsLog {
  std::map<std::string, std::vector<std::pair<double, double>>> series;
  std::vector<std::string> warnings;  // e.g. a last line cut short by a crash (skipped)
};

// Reads and checks a metrics.jsonl file. graft::Error when the file is missing or unreadable,
// or for a bad line: not JSON, not an object, no integer "step", or a value that is neither a
// number nor null; the message names the file and the line number. Only the last line may be
// incomplete (no final newline, as when a run is killed mid-write): it is skipped with a
// warning.
MetricsLog read_metrics(const std::string& path);

struct PlotOptions {
  int panel_width = 640;   // pixels (SVG points) per panel
  int panel_height = 400;
};

// Reads run_dir/metrics.jsonl and writes run_dir/loss.png and run_dir/loss.svg (each
// atomically: a temporary file renamed over the old one). Returns the paths written.
// graft::Error as read_metrics, or when the run has no "loss" values, or cairo fails.
std::vector<std::string> plot_run(const std::string& run_dir, const PlotOptions& options = {});

// Several runs in one image, e.g. graft's and a reference trainer's that wrote the same
// metrics.jsonl format: a panel for the smoothed training loss and one per eval_ metric any run
// has, one colour per run (at most 6), labelled `labels` (default: the directory names). The x
// axis is the step or, with x_time, the "elapsed" seconds of each step. Writes OUT.png and
// OUT.svg (atomically) and returns their paths; graft::Error as plot_run, or for bad labels.
struct CompareOptions {
  PlotOptions panel;
  std::vector<std::string> labels;
  bool x_time = false;
};
std::vector<std::string> plot_compare(const std::vector<std::string>& run_dirs, const std::string& out,
                                      const CompareOptions& options = {});

// Frees the font caches that cairo and fontconfig keep for the life of the process (which
// leak checkers report). Call it once, when nothing else in the process uses cairo any more,
// e.g. before exiting.
void release_plot_caches();

}  // namespace graft::tools
