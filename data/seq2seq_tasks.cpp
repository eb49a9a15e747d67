#include "data/seq2seq_tasks.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <unordered_set>

#include <fmt/format.h>

#include "ops/error.h"
#include "ops/file_io.h"
#include "ops/storage.h"

namespace graft::data {

namespace {
const char kAlphabet[] = "0123456789abcdefghijklmnopqrstuvwxyz";
const char* const kMonths[] = {"January", "February", "March",     "April",   "May",      "June",
                               "July",    "August",   "September", "October", "November", "December"};
const char* const kDays[] = {"Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"};

// Uniform integer in [lo, hi] from one draw of gen.
int64_t uniform_int(Generator& gen, int64_t lo, int64_t hi) {
  const double u = philox_uniform(gen.seed, gen.advance(1));
  return lo + std::min(hi - lo, int64_t(u * double(hi - lo + 1)));
}

std::string ordinal(int d) {
  const char* suf = (d % 100 >= 11 && d % 100 <= 13) ? "th"
                    : d % 10 == 1                    ? "st"
                    : d % 10 == 2                    ? "nd"
                    : d % 10 == 3                    ? "rd"
                                                     : "th";
  return fmt::format("{}{}", d, suf);
}

std::string lower(std::string s) {
  for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  return s;
}
std::string upper(std::string s) {
  for (char& c : s) c = char(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

// Days since 1970-01-01 of a civil date (H. Hinnant's days_from_civil).
int64_t days_from_civil(int y, int m, int d) {
  y -= m <= 2;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const int64_t yoe = y - era * 400;
  const int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + doe - 719468;
}

Example make_sequence_example(const std::string& task, const TaskOptions& o, Generator& gen) {
  const int64_t len = uniform_int(gen, o.min_len, o.max_len);
  std::string s;
  for (int64_t i = 0; i < len; ++i) s += kAlphabet[uniform_int(gen, 0, o.num_symbols - 1)];
  std::string t = s;
  if (task == "reverse") std::reverse(t.begin(), t.end());
  if (task == "sort") std::sort(t.begin(), t.end());
  return {s, t};
}

Example make_date_example(Generator& gen) {
  Date d;
  d.year = int(uniform_int(gen, 1950, 2049));
  d.month = int(uniform_int(gen, 1, 12));
  d.day = int(uniform_int(gen, 1, days_in_month(d.year, d.month)));
  const int f = int(uniform_int(gen, 0, date_format_count() - 1));
  return {format_date(d, f), iso_date(d)};
}

void check_options(const std::string& task, const TaskOptions& o) {
  if (task == "date") return;
  GRAFT_CHECK(o.min_len >= 1 && o.min_len <= o.max_len, "make_task({}): need 1 <= min_len <= "
              "max_len, got min_len {} max_len {}", task, o.min_len, o.max_len);
  GRAFT_CHECK(o.max_len <= 100000, "make_task({}): max_len {} is too large (at most 100000)", task,
              o.max_len);
  GRAFT_CHECK(o.num_symbols >= 2 && o.num_symbols <= 36, "make_task({}): num_symbols must be in "
              "[2, 36] (the symbols are 0-9a-z), got {}", task, o.num_symbols);
}
}  // namespace

const std::vector<std::string>& task_names() {
  static const std::vector<std::string> names = {"copy", "reverse", "sort", "date"};
  return names;
}

std::vector<Example> make_task(const std::string& task, int64_t n, const TaskOptions& opt,
                               Generator& gen) {
  const auto& names = task_names();
  GRAFT_CHECK(std::find(names.begin(), names.end(), task) != names.end(),
              "make_task: unknown task '{}'; expected one of {}", task, fmt::join(names, ", "));
  GRAFT_CHECK(n >= 0, "make_task({}): the number of examples must be >= 0, got {}", task, n);
  check_options(task, opt);
  // At least the two strings' headers and a short heap buffer each per example: refuse a count
  // that cannot fit before reserving room for it.
  const double need = double(n) * double(sizeof(Example) + 64);
  GRAFT_CHECK(need <= double(physical_memory_bytes()), "make_task({}): {} examples need at least "
              "{}; this machine has {} of memory; hint: ask for fewer", task, n,
              format_bytes(need), format_bytes(double(physical_memory_bytes())));
  std::vector<Example> out;
  out.reserve(size_t(n));
  for (int64_t i = 0; i < n; ++i)
    out.push_back(task == "date" ? make_date_example(gen) : make_sequence_example(task, opt, gen));
  return out;
}

TaskSplit make_task_split(const std::string& task, int64_t n_train, int64_t n_valid,
                          int64_t n_test, const TaskOptions& train_opt, int64_t test_min_len,
                          int64_t test_max_len, uint64_t seed) {
  TaskSplit s;
  Generator g_train(seed), g_valid(seed + 1), g_test(seed + 2);
  s.train = make_task(task, n_train, train_opt, g_train);
  if (task != "date") {
    s.valid = make_task(task, n_valid, train_opt, g_valid);
    TaskOptions t = train_opt;
    t.min_len = test_min_len;
    t.max_len = test_max_len;
    s.test = make_task(task, n_test, t, g_test);
    return s;
  }
  // Dates: valid and test exclude every source seen before them.
  std::unordered_set<std::string> seen;
  for (const auto& e : s.train) seen.insert(e.source);
  auto fill = [&](std::vector<Example>& out, int64_t n, Generator& g) {
    int64_t tries = 0;
    while (int64_t(out.size()) < n) {
      GRAFT_CHECK(++tries < 100 * (n + 10), "make_task_split(date): cannot find {} unseen dates",
                  n);
      Example e = make_task(task, 1, train_opt, g)[0];
      if (seen.insert(e.source).second) out.push_back(std::move(e));
    }
  };
  fill(s.valid, n_valid, g_valid);
  fill(s.test, n_test, g_test);
  return s;
}

std::string write_date_tsv(const std::string& data_dir, int64_t n_train, int64_t n_valid, int64_t n_test,
                           uint64_t seed) {
  const TaskSplit s = make_task_split("date", n_train, n_valid, n_test, {}, 0, 0, seed);
  const std::string dir = (std::filesystem::path(data_dir) / "date").string();
  std::filesystem::create_directories(dir);
  auto write = [&](const char* name, const std::vector<Example>& ex) {
    std::string text;
    for (const auto& e : ex) text += e.source + "\t" + e.target + "\n";
    atomic_write(dir + "/" + name, text, "write_date_tsv");
  };
  write("train.tsv", s.train);
  write("dev.tsv", s.valid);
  write("test.tsv", s.test);
  return dir;
}

int days_in_month(int year, int month) {
  GRAFT_CHECK(month >= 1 && month <= 12, "days_in_month: month {} is outside 1..12", month);
  static const int days[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  const bool leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
  return month == 2 && leap ? 29 : days[month - 1];
}

int weekday(const Date& d) {
  const int64_t z = days_from_civil(d.year, d.month, d.day);  // 1970-01-01 was a Thursday (3)
  return int(((z % 7) + 7 + 3) % 7);
}

std::string iso_date(const Date& d) { return fmt::format("{:04}-{:02}-{:02}", d.year, d.month, d.day); }

int date_format_count() { return 18; }

std::string format_date(const Date& d, int format) {
  GRAFT_CHECK(d.month >= 1 && d.month <= 12 && d.day >= 1 && d.day <= days_in_month(d.year, d.month),
              "format_date: {}-{}-{} is not a calendar date", d.year, d.month, d.day);
  const std::string M = kMonths[d.month - 1], Mo = M.substr(0, 3);
  const std::string W = kDays[weekday(d)], Wo = W.substr(0, 3);
  const int Y = d.year, yy = d.year % 100, m = d.month, dd = d.day;
  switch (format) {
    case 0: return fmt::format("{} of {} {}", ordinal(dd), M, Y);          // 3rd of March 2021
    case 1: return fmt::format("{} {}, {:02}", Mo, dd, yy);                // Mar 3, 21
    case 2: return fmt::format("{}/{}/{}", Y, m, dd);                      // 2021/3/3
    case 3: return fmt::format("{} {}, {}", M, dd, Y);                     // March 3, 2021
    case 4: return fmt::format("{} {} {}", dd, M, Y);                      // 3 March 2021
    case 5: return fmt::format("{}, {} {}, {}", W, M, dd, Y);              // Wednesday, March 3, 2021
    case 6: return fmt::format("{:02}.{:02}.{}", dd, m, Y);                // 03.03.2021
    case 7: return fmt::format("{}/{}/{}", dd, m, Y);                      // 3/3/2021 (day first)
    case 8: return fmt::format("{}{:02}{:02}", Y, m, dd);                  // 20210303
    case 9: return lower(fmt::format("{} {} {}", Mo, dd, Y));              // mar 3 2021
    case 10: return upper(fmt::format("{} {}, {}", M, ordinal(dd), Y));    // MARCH 3RD, 2021
    case 11: return lower(fmt::format("the {} of {}, {}", ordinal(dd), M, Y));  // the 3rd of march, 2021
    case 12: return fmt::format("{}-{}-{}", dd, Mo, Y);                    // 3-Mar-2021
    case 13: return fmt::format("{} {} {} {:02}", Wo, dd, Mo, yy);         // Wed 3 Mar 21
    case 14: return fmt::format("{}-{}-{}", Y, m, dd);                     // 2021-3-3
    case 15: return fmt::format("{:02}/{:02}/{:02}", dd, m, yy);           // 03/03/21
    case 16: return lower(fmt::format("{} {}. {}", dd, Mo, Y));            // 3 mar. 2021
    case 17: return fmt::format("{} {} {}", Mo, ordinal(dd), Y);           // Mar 3rd 2021
    default:
      throw Error(fmt::format("format_date: format {} is outside [0, {})", format,
                              date_format_count()));
  }
}

}  // namespace graft::data
