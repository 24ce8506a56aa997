// Reports read back from JSON, and the shards of one campaign merged into
// one report (`ctxscore merge`).
#include <algorithm>
#include <map>
#include <set>
#include <stdexcept>

#include "ctxscore/harness/report.hpp"

namespace ctxscore::harness {

namespace {

using nlohmann::json;

const json& field(const json& j, const std::string& key, json::value_t type, const std::string& where) {
  const auto it = j.find(key);
  if (it == j.end()) throw std::invalid_argument(where + ": no \"" + key + "\"; expected a ctxscore JSON report (--json)");
  const bool number = type == json::value_t::number_integer || type == json::value_t::number_float;
  if (number ? !it->is_number() : it->type() != type)
    throw std::invalid_argument(where + ": \"" + key + "\" is " + printable(it->dump()) + ", expected a " +
                                (number ? "number" : json(type).type_name()));
  return *it;
}

std::string text(const json& j, const std::string& key, const std::string& where) {
  return field(j, key, json::value_t::string, where).get<std::string>();
}
std::int64_t count(const json& j, const std::string& key, const std::string& where) {
  return field(j, key, json::value_t::number_integer, where).get<std::int64_t>();
}
double number(const json& j, const std::string& key, const std::string& where) {
  return field(j, key, json::value_t::number_float, where).get<double>();
}
bool flag(const json& j, const std::string& key, const std::string& where) {
  return field(j, key, json::value_t::boolean, where).get<bool>();
}

std::map<std::string, std::int64_t> counts_of(const json& j, const std::string& key, const std::string& where) {
  std::map<std::string, std::int64_t> m;
  for (const auto& [k, v] : field(j, key, json::value_t::object, where).items()) {
    if (!v.is_number_integer()) throw std::invalid_argument(where + ": \"" + key + "\"." + k + " is not a count");
    m[k] = v.get<std::int64_t>();
  }
  return m;
}

Suite suite_from_json(const json& j, const std::string& where) {
  Suite s;
  s.name = text(j, "suite", where);
  const std::string at = where + ", suite " + s.name;
  s.backend = text(j, "backend", at);
  s.oracle = text(j, "oracle", at);
  s.toolchain = text(j, "toolchain", at);
  s.errors = count(j, "errors", at);
  s.stats.cases = count(j, "calls", at) - s.errors;
  s.stats.failures = count(j, "failures", at);
  s.stats.worst_ratio = number(j, "worst_ratio", at);
  s.stats.written = count(j, "written", at);
  s.stats.out_modes = counts_of(j, "out_modes", at);
  s.stats.shapes = counts_of(j, "shapes", at);
  s.seconds = number(j, "seconds", at);
  const json& phases = field(j, "seconds_by_phase", json::value_t::object, at);
  for (std::size_t k = 0; k < kPhases; ++k) s.phases[k] = number(phases, phase_name(static_cast<Phase>(k)), at);
  s.stopped = text(j, "stopped", at);
  s.not_run = text(j, "not_run", at);
  s.required = flag(j, "required", at);
  s.min_cases = count(j, "min_cases", at);
  s.seed = text(j, "seed", at);
  for (const json& k : field(j, "compile_keys", json::value_t::array, at)) {
    if (!k.is_string()) throw std::invalid_argument(at + ": a \"compile_keys\" entry " + printable(k.dump()) + ", expected a string");
    s.compile_keys.push_back(k.get<std::string>());
  }
  s.coverage = text(j, "coverage", at);
  s.same_mismatch_as = text(j, "same_mismatch_as", at);
  for (const json& f : field(j, "failing", json::value_t::array, at)) {
    Row r;
    r.ok = false;
    r.name = text(f, "name", at);
    r.message = text(f, "message", at);
    r.where.path = text(f, "fixture", at);
    r.where.program = text(f, "replay_program", at);
    r.where.flags = text(f, "replay_flags", at);
    r.where.one_call = !r.where.path.empty() && !flag(f, "replay_reproduces", at);
    r.where.not_written = text(f, "not_written", at);
    r.spec = text(f, "case", at);
    r.kind = text(f, "kind", at);
    for (const auto& [name, value] : field(f, "details", json::value_t::object, at).items()) {
      if (!value.is_string())
        throw std::invalid_argument(at + ": the detail \"" + printable(name) + "\" is " + printable(value.dump()) + ", expected a string");
      r.details[name] = value.get<std::string>();
    }
    r.error = flag(f, "error", at);
    r.off_the_oracle = flag(f, "off_the_oracle", at);
    s.rows.push_back(std::move(r));
  }
  for (const json& row : field(j, "judged", json::value_t::array, at)) {
    if (!row.is_array() || row.size() != 2 || !row[0].is_string() || !row[1].is_number_unsigned())
      throw std::invalid_argument(at + ": a \"judged\" entry " + printable(row.dump()) + ", expected [name, fingerprint]");
    s.judged.emplace_back(row[0].get<std::string>(), row[1].get<std::uint64_t>());
  }
  return s;
}

std::pair<std::int64_t, std::int64_t> shard_of(const json& run, const std::string& where) {
  const std::string shard = text(run, "shard", where + ", \"run\"");
  const auto slash = shard.find('/');
  try {
    if (slash != std::string::npos) {
      const std::int64_t k = std::stoll(shard.substr(0, slash)), n = std::stoll(shard.substr(slash + 1));
      if (1 <= k && k <= n) return {k, n};
    }
  } catch (const std::exception&) {
  }
  throw std::invalid_argument(where + ": \"run\".shard is \"" + printable(shard) + "\", expected K/N");
}

std::string shard_name(std::int64_t k, std::int64_t n) { return std::to_string(k) + "/" + std::to_string(n); }

}  // namespace

Report report_from_json(const json& j, const std::string& source) {
  if (!j.is_object()) throw std::invalid_argument(source + ": not a JSON object; expected a ctxscore JSON report (--json)");
  Report r;
  for (const json& s : field(j, "suites", json::value_t::array, source)) r.suites.push_back(suite_from_json(s, source));
  r.interrupted_by = static_cast<int>(count(j, "interrupted_by", source));
  for (const json& a : field(j, "not_available", json::value_t::array, source)) r.absent.push_back(a.get<std::string>());
  for (const json& a : field(j, "required_not_available", json::value_t::array, source))
    r.required_absent.push_back(a.get<std::string>());
  if (const auto run = j.find("run"); run != j.end() && run->is_object()) r.run = *run;
  return r;
}

Report merge_shards(const std::vector<std::pair<std::string, json>>& shards) {
  if (shards.empty()) throw std::invalid_argument("no shard reports given; expected the N JSON reports of one campaign");
  struct Shard {
    std::string file;
    std::int64_t k = 0, n = 0;
    Report report;
  };
  std::vector<Shard> given;
  for (const auto& [file, j] : shards) {
    Shard s{file, 0, 0, report_from_json(j, file)};
    if (s.report.run.empty())
      throw std::invalid_argument(file + ": no \"run\"; expected the JSON report of `ctxscore gate` or `fuzz` (--json)");
    std::tie(s.k, s.n) = shard_of(s.report.run, file);
    given.push_back(std::move(s));
  }
  // One campaign: every setting of the run but the shard alike.
  const Shard& first = given.front();
  for (const Shard& s : given) {
    const std::string name = "shard " + shard_name(s.k, s.n) + " (" + s.file + ")";
    const std::string other = "shard " + shard_name(first.k, first.n) + " (" + first.file + ")";
    if (s.n != first.n)
      throw std::invalid_argument(name + " is of " + std::to_string(s.n) + " shards, " + other + " of " + std::to_string(first.n) +
                                  "; expected the shards of one campaign");
    std::set<std::string> keys;
    for (const auto& [k, v] : first.report.run.items()) keys.insert(k);
    for (const auto& [k, v] : s.report.run.items()) keys.insert(k);
    for (const std::string& key : keys) {
      if (key == "shard") continue;
      const json a = s.report.run.contains(key) ? json(s.report.run[key]) : json(), b = first.report.run.contains(key) ? json(first.report.run[key]) : json();
      if (a != b)
        throw std::invalid_argument(name + " has " + key + " " + printable(a.dump()) + ", " + other + " " + printable(b.dump()) +
                                    "; expected one campaign's shards: the same " + key);
    }
    if (s.report.suites.size() != first.report.suites.size())
      throw std::invalid_argument(name + " reports " + std::to_string(s.report.suites.size()) + " checks, " + other + " " +
                                  std::to_string(first.report.suites.size()) + "; expected the same checks");
    for (std::size_t i = 0; i < s.report.suites.size(); ++i) {
      const Suite &x = s.report.suites[i], &y = first.report.suites[i];
      if (x.name != y.name)
        throw std::invalid_argument(name + " has check " + x.name + " where " + other + " has " + y.name + "; expected the same checks");
      if (x.toolchain != y.toolchain)
        throw std::invalid_argument(name + " ran " + x.name + " on toolchain \"" + printable(x.toolchain) + "\", " + other + " on \"" +
                                    printable(y.toolchain) + "\"; expected one implementation, built and run alike");
      if (x.seed != y.seed)
        throw std::invalid_argument(name + " drew " + x.name + " from seed " + x.seed + ", " + other + " from " + y.seed +
                                    "; expected one campaign's shards: the same seed");
    }
  }
  // Every shard once.
  std::map<std::int64_t, std::string> seen;
  for (const Shard& s : given) {
    if (const auto it = seen.find(s.k); it != seen.end())
      throw std::invalid_argument("shard " + shard_name(s.k, s.n) + " given twice: " + it->second + " and " + s.file +
                                  "; expected each shard once");
    seen[s.k] = s.file;
  }
  std::string missing;
  for (std::int64_t k = 1; k <= first.n; ++k)
    if (!seen.count(k)) missing += (missing.empty() ? "" : ", ") + shard_name(k, first.n);
  if (!missing.empty())
    throw std::invalid_argument("shard" + std::string(missing.find(',') != std::string::npos ? "s " : " ") + missing + " missing (" +
                                std::to_string(given.size()) + " of " + std::to_string(first.n) + " given); expected every shard once");

  Report merged;
  merged.run = first.report.run;
  merged.run["shard"] = "1/1";
  merged.run["merged_shards"] = first.n;
  for (std::size_t i = 0; i < first.report.suites.size(); ++i) {
    Suite m = first.report.suites[i];
    m.stats = JudgeStats{};
    m.rows.clear();
    m.judged.clear();
    m.errors = 0;
    m.seconds = 0;
    m.phases = PhaseSeconds{};
    m.stopped.clear();
    m.coverage.clear();
    m.min_cases = 0;
    m.same_mismatch_as.clear();
    // A check that is not drawn (the corpus, large batches and offsets) runs
    // whole in every shard: the same rows everywhere. It counts once, as the
    // shard that failed it (else the first) reports it.
    const auto names_of = [&](const Suite& x) {
      std::set<std::string> n;
      for (const auto& row : x.judged) n.insert(row.first);
      return n;
    };
    const std::set<std::string> first_names = names_of(first.report.suites[i]);
    const bool whole_everywhere =
        given.size() > 1 && !first_names.empty() &&
        std::all_of(given.begin(), given.end(), [&](const Shard& s) { return names_of(s.report.suites[i]) == first_names; });
    if (whole_everywhere) {
      const auto failed = std::find_if(given.begin(), given.end(), [&](const Shard& s) { return !s.report.suites[i].ok(); });
      Suite whole = (failed != given.end() ? *failed : given.front()).report.suites[i];
      whole.seconds = 0;
      whole.phases = PhaseSeconds{};
      for (const Shard& s : given) {
        whole.seconds += s.report.suites[i].seconds;
        for (std::size_t p = 0; p < kPhases; ++p) whole.phases[p] += s.report.suites[i].phases[p];
      }
      merged.suites.push_back(std::move(whole));
      continue;
    }
    std::set<std::string> judged_names;
    std::int64_t not_run = 0;
    for (const Shard& s : given) {
      const Suite& x = s.report.suites[i];
      const std::string tag = "shard " + shard_name(s.k, s.n);
      if (!x.not_run.empty()) {
        ++not_run;
        continue;
      }
      m.stats.cases += x.stats.cases;
      m.stats.failures += x.stats.failures;
      m.stats.written += x.stats.written;
      m.stats.worst_ratio = std::max(m.stats.worst_ratio, x.stats.worst_ratio);
      for (const auto& [k, v] : x.stats.out_modes) m.stats.out_modes[k] += v;
      for (const auto& [k, v] : x.stats.shapes) m.stats.shapes[k] += v;
      m.errors += x.errors;
      m.seconds += x.seconds;
      for (std::size_t p = 0; p < kPhases; ++p) m.phases[p] += x.phases[p];
      m.min_cases += x.min_cases;
      m.required = m.required || x.required;
      if (!x.stopped.empty()) m.stopped += (m.stopped.empty() ? "" : "; ") + tag + ": " + x.stopped;
      if (!x.coverage.empty()) m.coverage += (m.coverage.empty() ? "" : "; ") + tag + ": " + x.coverage;
      if (m.same_mismatch_as.empty()) m.same_mismatch_as = x.same_mismatch_as;
      m.rows.insert(m.rows.end(), x.rows.begin(), x.rows.end());
      for (const auto& row : x.judged)
        if (!judged_names.insert(row.first).second)
          throw std::invalid_argument(tag + " (" + s.file + ") judged " + m.name + "'s " + row.first +
                                      " again; expected shards that split the cases");
      m.judged.insert(m.judged.end(), x.judged.begin(), x.judged.end());
    }
    if (not_run == static_cast<std::int64_t>(given.size())) {
      m.not_run = first.report.suites[i].not_run;
    } else {
      m.not_run.clear();
      // Ran in some shards only: the cases of the others were never judged.
      for (const Shard& s : given)
        if (const Suite& x = s.report.suites[i]; !x.not_run.empty())
          m.add_error("shard " + shard_name(s.k, s.n), "not run there (" + x.not_run + "), so its share of the cases was not judged");
    }
    merged.suites.push_back(std::move(m));
  }
  for (const Shard& s : given) {
    merged.interrupted_by = std::max(merged.interrupted_by, s.report.interrupted_by);
    for (const std::string& a : s.report.absent)
      if (std::find(merged.absent.begin(), merged.absent.end(), a) == merged.absent.end()) merged.absent.push_back(a);
    for (const std::string& a : s.report.required_absent)
      if (std::find(merged.required_absent.begin(), merged.required_absent.end(), a) == merged.required_absent.end())
        merged.required_absent.push_back(a);
  }
  return merged;
}

}  // namespace ctxscore::harness
