#include "ctxscore/harness/run_control.hpp"

#include <signal.h>
#include <unistd.h>

#include <cstdio>

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
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

int stop_signal() { return static_cast<int>(g_stop_signal); }

void throw_if_stopped() {
  if (const int sig = stop_signal()) throw Interrupted{sig};
}

TimeBudget::TimeBudget(double seconds) : seconds_(seconds), start_(std::chrono::steady_clock::now()) {}

bool TimeBudget::spent() const { return seconds_ > 0 && seconds_since(start_) >= seconds_; }

Progress::Progress(double period)
    : period_(period), terminal_(isatty(fileno(stderr)) != 0), last_(std::chrono::steady_clock::now()) {}

bool Progress::due() {
  if (terminal_ || seconds_since(last_) < period_) return false;
  last_ = std::chrono::steady_clock::now();
  return true;
}

}  // namespace ctxscore::harness
