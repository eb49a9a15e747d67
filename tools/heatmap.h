// A heatmap of a rows x cols matrix as a PNG (cairo): attention weights of a seq2seq decoder
// (rows = target tokens, cols = source tokens) or the match-score matrix of an ABCNN pair
// (rows = sentence-0 words, cols = sentence-1 words).
//
// Each cell is a square shaded from white (the matrix's minimum) to dark blue (its maximum);
// row labels go on the left, column labels on top (rotated), a colour bar with the value range
// on the right, the title above. The file is written atomically (a temporary file renamed
// over the old one).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace graft::tools {

// values: rows*cols numbers, row-major. row_labels / col_labels: either empty (the cells are
// numbered from 0) or exactly rows / cols strings. graft::Error for a bad size (rows or cols
// < 1 or > 4096, values.size() != rows*cols, a label list of the wrong length), a non-finite
// value, or when cairo cannot write the file. Call release_plot_caches() (tools/plot.h) once
// before exiting to keep leak checkers quiet.
void write_heatmap_png(const std::string& path, const std::vector<float>& values /*rows*cols row-major*/,
                       int64_t rows, int64_t cols, const std::vector<std::string>& row_labels,
                       const std::vector<std::string>& col_labels, const std::string& title);

}  // namespace graft::tools
