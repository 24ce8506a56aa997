#include "bench.hpp"

#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>

#include "ctxscore/harness/judge.hpp"

namespace ctxscore::cli {

double bytes_moved(const Case& input) {
  const Case c = input.resolved();
  double rows = 0, slots = 0;
  for (std::int64_t i = 0; i < c.batch(); ++i) {
    const std::int64_t scan = scan_slots(c.seq_lens[static_cast<std::size_t>(i)], c.global(), c.local(), c.rank, c.world);
    if (scan > 0) rows += static_cast<double>(c.query_len);
    slots += static_cast<double>(scan);
  }
  const double H = static_cast<double>(c.heads);
  return rows * H * kHeadDim * 2.0 + slots * kPageElems * 2.0 + slots * 4.0 +
         slots * static_cast<double>(c.query_len) * H * 4.0;
}

BenchReport bench(std::vector<BenchBackend>& backends, const std::vector<Case>& cases, int calls) {
  BenchReport r;
  for (const Case& c : cases) {
    double first_us = 0;
    for (std::size_t k = 0; k < backends.size(); ++k) {
      HostCase host = materialize(c);
      BenchRow row;
      row.case_name = c.name;
      row.label = backends[k].label;
      row.toolchain = backends[k].backend->toolchain();
      row.timing = backends[k].backend->time(host, calls);
      row.bytes = bytes_moved(c);
      if (k == 0) first_us = row.timing.median_us;
      row.vs_first = row.timing.median_us > 0 ? first_us / row.timing.median_us : 0;
      r.rows.push_back(std::move(row));
    }
  }
  return r;
}

namespace {

double gb_per_s(const BenchRow& row) { return row.timing.median_us > 0 ? row.bytes / row.timing.median_us * 1e-3 : 0; }
double copy_fraction(const BenchRow& row) {
  return row.timing.copy_gb_per_s > 0 ? gb_per_s(row) / row.timing.copy_gb_per_s : 0;
}

}  // namespace

std::string BenchReport::table() const {
  std::ostringstream o;
  char line[512];
  std::snprintf(line, sizeof line, "%-34s %-40s %12s %10s %9s %9s\n", "case", "backend", "us per call", "GB/s",
                "of copy", "vs first");
  o << line;
  std::map<std::string, std::string> toolchains;
  for (const BenchRow& row : rows) {
    std::snprintf(line, sizeof line, "%-34s %-40s %12.2f %10.1f %9.3f %9.3f\n", row.case_name.c_str(),
                  harness::printable(row.label).c_str(), row.timing.median_us, gb_per_s(row), copy_fraction(row),
                  row.vs_first);
    o << line;
    toolchains[row.label] = row.toolchain + " (" + row.timing.method + ")";
  }
  for (const auto& [label, t] : toolchains) o << "  " << harness::printable(label) << ": " << harness::printable(t) << "\n";
  for (const std::string& s : slower) o << "SLOWER: " << harness::printable(s) << "\n";
  o << (slower.empty() ? "result: measured\n" : "result: FAILED (slower than the baseline, or a row only one of the two has)\n");
  return o.str();
}

nlohmann::ordered_json BenchReport::json() const {
  nlohmann::ordered_json j = {{"ok", slower.empty()}, {"rows", nlohmann::ordered_json::array()}, {"slower", slower}};
  for (const BenchRow& row : rows)
    j["rows"].push_back({{"case", row.case_name}, {"backend", row.label}, {"median_us", row.timing.median_us},
                         {"calls", row.timing.calls}, {"method", row.timing.method}, {"bytes", row.bytes},
                         {"gb_per_s", gb_per_s(row)}, {"copy_gb_per_s", row.timing.copy_gb_per_s},
                         {"copy_fraction", copy_fraction(row)}, {"vs_first", row.vs_first}, {"toolchain", row.toolchain}});
  return j;
}

void compare_with_baseline(BenchReport& report, const nlohmann::json& baseline, double max_slowdown_pct) {
  if (!baseline.is_object() || !baseline.contains("rows") || !baseline["rows"].is_array())
    throw std::invalid_argument("--baseline: not a `ctxscore bench --json` report (expected an object with \"rows\")");
  if (baseline["rows"].empty())
    throw std::invalid_argument("--baseline: no rows, expected the (case, backend) rows of an earlier run to compare with");
  std::map<std::pair<std::string, std::string>, double> now;
  for (const BenchRow& row : report.rows) now[{row.case_name, row.label}] = row.timing.median_us;
  std::set<std::pair<std::string, std::string>> seen;
  for (const auto& b : baseline["rows"]) {
    if (!b.is_object() || !b.contains("case") || !b.contains("backend") || !b.contains("median_us") ||
        !b["case"].is_string() || !b["backend"].is_string() || !b["median_us"].is_number() ||
        !std::isfinite(b["median_us"].get<double>()) || b["median_us"].get<double>() <= 0)
      throw std::invalid_argument("--baseline: row " + b.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) +
                                  ", expected {\"case\": string, \"backend\": string, \"median_us\": number > 0, ...}");
    const std::string c = b["case"], label = b["backend"];
    if (!seen.insert({c, label}).second)
      throw std::invalid_argument("--baseline: two rows for " + harness::printable(c) + " on " + harness::printable(label) +
                                  ", expected one (case, backend) row each");
    const double was = b["median_us"];
    const auto it = now.find({c, label});
    if (it == now.end()) {
      report.slower.push_back(c + " on " + label + ": in the baseline, not measured now");
      continue;
    }
    const double slowdown = 100.0 * (it->second / was - 1.0);
    if (slowdown > max_slowdown_pct) {
      char s[256];
      std::snprintf(s, sizeof s, ": %.2f us, the baseline %.2f us: %.1f %% slower, more than %.1f %%", it->second, was,
                    slowdown, max_slowdown_pct);
      report.slower.push_back(c + " on " + label + s);
    }
  }
  // What the run measured and the baseline lacks is not gated: a failure
  // too, so that a baseline cut short cannot pass what it leaves out.
  for (const auto& [key, us] : now)
    if (!seen.count(key)) report.slower.push_back(key.first + " on " + key.second + ": measured now, not in the baseline");
}

}  // namespace ctxscore::cli
