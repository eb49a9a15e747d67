// Built-in synthetic seq2seq tasks (no download): copy, reverse, sort and date normalisation.
// Every example is drawn from the Generator it is given, so a seed fixes the data.
//
//   data::TaskOptions o{.min_len = 3, .max_len = 30, .num_symbols = 10};
//   Generator gen(1);
//   auto train = data::make_task("reverse", 20000, o, gen);   // {"3x7a", "a7x3"}, ...
//   auto dates = data::make_task("date", 1000, {}, gen);      // {"3rd of March 2021", "2021-03-03"}
//
// copy / reverse / sort: the source is a string of `len` symbols (len uniform in
// [min_len, max_len]) from the first num_symbols of "0-9a-z", one character per token; the
// target is the same string, reversed, or sorted (by character code).
// date: a random calendar date in [1950-01-01, 2049-12-31] written in one of
// date_format_count() human formats (e.g. "3rd of March 2021", "Mar 3, 21", "2021/3/3",
// "Wednesday, March 3, 2021", "03.03.2021", "20210303"); the target is ISO "2021-03-03".
// Two-digit years: 50..99 -> 19yy, 00..49 -> 20yy. Numeric formats with day and month are
// day-first (European), never month-first, so every source has one meaning.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "ops/random.h"

namespace graft::data {

struct Example {
  std::string source, target;
};

struct TaskOptions {
  int64_t min_len = 3;       // copy/reverse/sort source lengths (inclusive)
  int64_t max_len = 10;
  int64_t num_symbols = 10;  // alphabet size, 2..36
};

// The task names make_task knows: copy, reverse, sort, date.
const std::vector<std::string>& task_names();
// n examples of `task`; graft::Error for an unknown task or bad options.
std::vector<Example> make_task(const std::string& task, int64_t n, const TaskOptions& opt,
                               Generator& gen);

// A train/valid/test split. For copy/reverse/sort the test set draws lengths from
// [test_min_len, test_max_len] (held-out longer inputs); for date it holds dates whose source
// string never occurs in train (nor in valid).
struct TaskSplit {
  std::vector<Example> train, valid, test;
};
TaskSplit make_task_split(const std::string& task, int64_t n_train, int64_t n_valid,
                          int64_t n_test, const TaskOptions& train_opt, int64_t test_min_len,
                          int64_t test_max_len, uint64_t seed);

// Writes the date split of make_task_split("date", n_train, n_valid, n_test, {}, 0, 0, seed) as
// DIR/date/{train,dev,test}.tsv (source<TAB>target, one pair a line; `train seq2seq --task tsv
// --tokenizer char` and the PyTorch reference trainers read them) and returns DIR/date. The
// pairs are the ones `--task date --seed SEED` trains on.
std::string write_date_tsv(const std::string& data_dir, int64_t n_train, int64_t n_valid, int64_t n_test,
                           uint64_t seed);

// ---- dates (exposed for tests and the CLI)
struct Date {
  int year, month, day;  // month 1..12, day 1..days_in_month
};
int days_in_month(int year, int month);
// 0 = Monday .. 6 = Sunday (proleptic Gregorian).
int weekday(const Date& d);
std::string iso_date(const Date& d);  // "2021-03-03"
int date_format_count();
// `d` in human format `format` (0 .. date_format_count()-1).
std::string format_date(const Date& d, int format);

}  // namespace graft::data
