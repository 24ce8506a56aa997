// The registry: the records of checks/registry.def, and the match of a
// check's needs against a backend's capabilities.
#include <algorithm>
#include <stdexcept>

#include "ctxscore/harness/checks.hpp"

namespace ctxscore::harness {

#define CHECK(name) CheckDef name##_check();
#include "registry.def"
#undef CHECK

const std::vector<CheckDef>& check_registry() {
  static const std::vector<CheckDef> checks = {
#define CHECK(name) name##_check(),
#include "registry.def"
#undef CHECK
  };
  return checks;
}

const std::vector<std::string>& check_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> n;
    for (const CheckDef& d : check_registry()) n.push_back(d.name);
    return n;
  }();
  return names;
}

const CheckDef& check_named(const std::string& name) {
  for (const CheckDef& d : check_registry())
    if (d.name == name) return d;
  std::string known;
  for (const std::string& n : check_names()) known += (known.empty() ? "" : ", ") + n;
  throw std::invalid_argument("no check \"" + printable(name) + "\"; the checks are " + known);
}

std::string unmet_need(const CheckDef& def, Backend& b) {
  for (const Need n : def.needs) {
    const Capabilities& has = b.capabilities();
    const std::string& why = n == Need::refusals ? has.refusals : n == Need::geometry ? has.geometry : has.capture;
    if (!why.empty()) return why;
  }
  return "";
}

std::string redraw_command(const Backend& b, const CheckOptions& o) {
  return shell_quoted(replay_program()) + " gate " + b.replay_flags() + (o.size.empty() ? "" : " --case-size " + o.size) +
         " --compile-keys " + std::to_string(o.compile_keys) + (o.out_mode != "mixed" ? " --out-mode " + o.out_mode : "") +
         " --repeat " + std::to_string(o.repeat);
}

Suite not_run_suite(const CheckDef& def, Backend& b, const std::string& why) {
  Suite s = suite_for(def.name, b, def.oracle.empty() ? oracle_name(b.oracle()) : def.oracle);
  s.not_run = why;
  return s;
}

Suite run_check(const std::string& name, Backend& b, const CheckContext& context) {
  const CheckDef& def = check_named(name);
  if (const std::string why = unmet_need(def, b); !why.empty()) return not_run_suite(def, b, why);
  return def.run(b, context);
}

}  // namespace ctxscore::harness
