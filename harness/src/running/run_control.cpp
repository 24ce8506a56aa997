#include "ctxscore/harness/run_control.hpp"

#include <signal.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

namespace ctxscore::harness {

namespace {

volatile sig_atomic_t g_stop_signal = 0;

extern "C" void on_stop_signal(int sig) { g_stop_signal = sig; }

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace

void install_stop_signals() {
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;  // no SA_RESTART: a blocking poll returns EINTR and sees the flag
  // SIGHUP (a closed terminal, a CI runner's hang-up) and SIGQUIT too: every
  // way of asking a run to stop gets its report and its ports reaped.
  for (const int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT}) sigaction(sig, &sa, nullptr);
}

int stop_signal() { return static_cast<int>(g_stop_signal); }

void throw_if_stopped() {
  if (const int sig = stop_signal()) throw Interrupted{sig};
}

std::optional<double> positive_seconds(const std::string& text) {
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || !std::isfinite(v) || v <= 0) return std::nullopt;
  return v;
}

TimeBudget::TimeBudget(double seconds, const std::atomic<bool>* abandoned)
    : seconds_(seconds), start_(std::chrono::steady_clock::now()), abandoned_(abandoned) {}

bool TimeBudget::spent() const {
  return (abandoned_ && abandoned_->load()) || (seconds_ > 0 && seconds_since(start_) >= seconds_);
}

Progress::Progress(double period)
    : period_(period), terminal_(isatty(fileno(stderr)) != 0), last_(std::chrono::steady_clock::now()) {}

bool Progress::due() {
  if (terminal_ || seconds_since(last_) < period_) return false;
  last_ = std::chrono::steady_clock::now();
  return true;
}

}  // namespace ctxscore::harness

namespace ctxscore::harness {

namespace {

std::string env_or_empty(const std::string& name) {
  const char* v = std::getenv(name.c_str());
  return v ? v : "";
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> parts;
  std::size_t start = 0;
  for (std::size_t at; (at = s.find(sep, start)) != std::string::npos; start = at + 1) parts.push_back(s.substr(start, at - start));
  parts.push_back(s.substr(start));
  return parts;
}

}  // namespace

std::string apply_ctest_gpu_assignment() {
  const std::string count = env_or_empty("CTEST_RESOURCE_GROUP_COUNT");
  if (count.empty()) return "";
  std::string id;
  for (int g = 0; g < std::atoi(count.c_str()); ++g) {
    const std::string group = "CTEST_RESOURCE_GROUP_" + std::to_string(g);
    if (env_or_empty(group) != "gpus") continue;
    const std::string alloc = env_or_empty(group + "_GPUS");  // "id:2,slots:1"
    for (const std::string& field : split(alloc, ','))
      if (field.rfind("id:", 0) == 0) id = field.substr(3);
    if (id.empty() || id.find_first_not_of("0123456789") != std::string::npos)
      throw std::runtime_error(group + "_GPUS = \"" + alloc + "\", expected id:N,slots:K with a numeric id");
  }
  if (id.empty()) return "";
  std::string device = id;
  if (const std::string visible = env_or_empty("CUDA_VISIBLE_DEVICES"); !visible.empty()) {
    const std::vector<std::string> list = split(visible, ',');
    const std::size_t k = std::stoul(id);
    if (k >= list.size())
      throw std::runtime_error("CTest assigned GPU id " + id + " but CUDA_VISIBLE_DEVICES=" + visible + " lists " +
                               std::to_string(list.size()));
    device = list[k];
  }
  setenv("CUDA_VISIBLE_DEVICES", device.c_str(), 1);
  setenv("HIP_VISIBLE_DEVICES", device.c_str(), 1);
  unsetenv("CTEST_RESOURCE_GROUP_COUNT");  // applied once: a port started from here inherits the device
  return "GPU " + id;
}

}  // namespace ctxscore::harness
