// A port's process: the child the harness starts for a port command, its
// pipes, process group and stderr, the keeper that ends what it started
// however the harness dies, and the sweep of what an ended port left
// behind. The port backend (port.cpp) speaks the protocol through it.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "ctxscore/harness/backend.hpp"
#include "ctxscore/harness/text.hpp"
#include "ctxscore/harness/run_control.hpp"
#include "ctxscore/wire_format.hpp"
#include "ctxscore/protocol.hpp"
#include "port_messages.hpp"

namespace ctxscore::harness::port_process {


using Clock = std::chrono::steady_clock;
using Bytes = std::vector<std::uint8_t>;


// When an exchange must be over, and the limit it came from (for messages).
struct Deadline {
  Clock::time_point at;
  double seconds;
  static Deadline in(double seconds) {
    return {Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds)), seconds};
  }
};

// Ports alive in this process: what an orphan sweep must leave running.
std::set<pid_t>& live_ports();
// Held from a port's fork until it is listed live, and through a sweep:
// checks run side by side must not sweep up a port that another just started.
std::mutex& live_ports_mutex();
// The harness becomes the subreaper of what it starts.
void become_subreaper();
// Kills and reaps every child of the harness that is not a live port.
void end_orphans();
namespace keeper {
// The keeper's life (port_process.cpp): start the port's shell, then end
// what it started when it ends or the harness dies.
[[noreturn]] void run(pid_t harness, int life, int in, int out, int err, const char* const* argv);
}  // namespace keeper
// The shell line that runs `command` (port_process.cpp).
std::string shell_line(const std::string& command);

// One child: its pipes, its process group, its stderr in a temporary file.
class Child {
 public:
  explicit Child(const std::string& command) : command_(command) {
    become_subreaper();
    struct sigaction ignore {};
    ignore.sa_handler = SIG_IGN;
    sigaction(SIGPIPE, &ignore, nullptr);  // a dead port's pipe is an error to report, not a signal
    std::string err_template = (std::filesystem::temp_directory_path() / "ctxscore-port-stderr-XXXXXX").string();
    char* err_path = err_template.data();
    const int err = mkstemp(err_path);
    if (err < 0) throw BackendError(std::string("port: cannot make a file for its stderr: ") + std::strerror(errno));
    // Unlinked at once: no way of dying leaves it behind; the harness reads it through its own descriptor.
    err_read_ = open(err_path, O_RDONLY | O_CLOEXEC);
    unlink(err_path);
    int in[2], out[2], life[2];
    if (pipe2(in, O_CLOEXEC) != 0 || pipe2(out, O_CLOEXEC) != 0 || pipe2(life, O_CLOEXEC) != 0) {
      const int e = errno;
      close(err);
      close(err_read_);  // a constructor that throws runs no destructor: nothing may be left behind
      throw BackendError(std::string("port: pipe: ") + std::strerror(e));
    }
    const std::string line = shell_line(command);
    const char* argv[] = {"/bin/sh", "-c", line.c_str(), nullptr};
    const pid_t parent = getpid();
    // The harness's child is the keeper (keeper::run), the port's shell its
    // child: the port and all it starts end with the harness, however the
    // harness ends. The keeper's status is the port's.
    int rc = 0;
    std::unique_lock<std::mutex> listing(live_ports_mutex());
    pid_ = fork();
    if (pid_ == 0) keeper::run(parent, life[0], in[0], out[1], err, argv);
    if (pid_ < 0) rc = errno;
    else setpgid(pid_, pid_);  // also from this side: the group exists before any kill(-pid) below
    close(in[0]);
    close(out[1]);
    close(err);
    close(life[0]);
    life_ = life[1];
    to_ = in[1];
    from_ = out[0];
    // Non-blocking: a port that stops reading or writing can hold a call only
    // until the deadline, never in a write() or read() that poll let through.
    fcntl(to_, F_SETFL, fcntl(to_, F_GETFL) | O_NONBLOCK);
    fcntl(from_, F_SETFL, fcntl(from_, F_GETFL) | O_NONBLOCK);
    if (rc == 0) live_ports().insert(pid_);
    listing.unlock();
    if (rc != 0) {
      pid_ = -1;
      close(to_);
      close(from_);
      close(life_);
      close(err_read_);
      throw BackendError("port: cannot start `" + command + "`: " + std::strerror(rc));
    }
  }
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;

  // Closes its stdin, gives it a moment to leave, then kills its whole
  // process group and whatever of its descendants escaped the group; always
  // reaps them, and removes its stderr file.
  ~Child() {
    if (to_ >= 0) close(to_);
    if (from_ >= 0) close(from_);
    if (pid_ > 0) {
      for (int k = 0; k < 20 && !reaped(); ++k) usleep(5000);
      close(life_);  // the keeper ends what is left of the port
      for (int k = 0; k < 100 && !reaped(); ++k) usleep(5000);
      kill(-pid_, SIGKILL);  // the port, or anything it left behind in its group
      if (!reaped()) {
        int status = 0;
        waitpid(pid_, &status, 0);
      }
      const std::lock_guard<std::mutex> listing(live_ports_mutex());
      live_ports().erase(pid_);
      end_orphans();
    }
    if (err_read_ >= 0) close(err_read_);
  }

  void send(const Bytes& message, const Deadline& deadline) {
    const auto len = frame_length(message.size());
    write_all(len.data(), len.size(), deadline);
    write_all(message.data(), message.size(), deadline);
  }

  // Reads one reply of at most `max_bytes` (what the request implies): a
  // larger announced length is refused before anything is allocated.
  Bytes receive(const Deadline& deadline, std::uint64_t max_bytes) {
    std::uint8_t len[kFrameLengthBytes];
    read_all(len, kFrameLengthBytes, deadline, "the reply's length");
    const std::uint64_t n = frame_length(len);
    if (n > max_bytes)
      throw BackendError("port: announced a reply of " + std::to_string(n) + " bytes, more than the " +
                         std::to_string(max_bytes) + " a reply to this request can hold (garbage on stdout?); " + state());
    Bytes body(static_cast<std::size_t>(n));
    read_all(body.data(), body.size(), deadline, "a reply of " + std::to_string(n) + " bytes");
    return body;
  }

  // Whether the child has ended with exit status `code`.
  bool exited_with(int code) { return reaped() && WIFEXITED(status_) && WEXITSTATUS(status_) == code; }

  // Waits up to `seconds` for the child to end: a port whose pipe broke is
  // leaving, and on a loaded machine its status comes a moment later.
  void await_end(double seconds) {
    for (int k = 0; k < static_cast<int>(seconds * 200) && !reaped(); ++k) usleep(5000);
  }

  // How the child ended, or that it runs; and the end of what it wrote to stderr.
  std::string state() {
    std::string s = reaped() ? describe(status_) : "still running";
    const std::string tail = stderr_tail();
    if (!tail.empty()) s += "; its stderr ends: " + tail;
    return s;
  }

 private:
  bool reaped() {
    if (done_) return true;
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      done_ = true;
      status_ = status;
    }
    return done_;
  }
  static std::string describe(int status) {
    if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
    if (WIFSIGNALED(status)) return std::string("killed by signal ") + strsignal(WTERMSIG(status));
    return "stopped";
  }
  std::string stderr_tail() const {
    std::string all;
    const off_t size = err_read_ >= 0 ? lseek(err_read_, 0, SEEK_END) : 0;
    const off_t from = size > 600 ? size - 600 : 0;
    all.resize(static_cast<std::size_t>(size - from));
    if (!all.empty() && pread(err_read_, all.data(), all.size(), from) != static_cast<ssize_t>(all.size())) all.clear();
    if (from > 0) all = "..." + all;
    while (!all.empty() && (all.back() == '\n' || all.back() == ' ')) all.pop_back();
    return all;
  }
  static int ms_left(const Deadline& deadline) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline.at - Clock::now()).count();
    return left < 0 ? 0 : static_cast<int>(std::min<long long>(left, 1 << 30));
  }
  void write_all(const std::uint8_t* p, std::size_t n, const Deadline& deadline) {
    while (n > 0) {
      pollfd pfd{to_, POLLOUT, 0};
      const int r = poll(&pfd, 1, ms_left(deadline));
      if (r == 0)
        throw BackendHung("port: did not read its request within the timeout of " + protocol::decimal(deadline.seconds) + " s (hung?); " + state());
      if (r < 0 && errno == EINTR) {
        throw_if_stopped();
        continue;
      }
      const ssize_t w = write(to_, p, n);
      if (w < 0) {
        if (errno == EINTR) throw_if_stopped();
        if (errno == EINTR || errno == EAGAIN) continue;
        throw BackendError(std::string("port: closed its stdin before the request was written (") +
                           std::strerror(errno) + "); " + state());
      }
      p += w;
      n -= static_cast<std::size_t>(w);
    }
  }
  void read_all(std::uint8_t* p, std::size_t n, const Deadline& deadline, const std::string& what) {
    std::size_t got = 0;
    while (got < n) {
      pollfd pfd{from_, POLLIN, 0};
      const int r = poll(&pfd, 1, ms_left(deadline));
      if (r == 0)
        throw BackendHung("port: no reply within " + protocol::decimal(deadline.seconds) + " s (hung?), waiting for " + what + " (" + std::to_string(got) + " of " + std::to_string(n) +
                           " bytes came); " + state());
      if (r < 0 && errno == EINTR) {
        throw_if_stopped();
        continue;
      }
      const ssize_t k = read(from_, p + got, n - got);
      if (k < 0) {
        if (errno == EINTR) throw_if_stopped();
        if (errno == EINTR || errno == EAGAIN) continue;
        throw BackendError(std::string("port: reading its stdout: ") + std::strerror(errno) + "; " + state());
      }
      if (k == 0) {
        for (int t = 0; t < 100 && !reaped(); ++t) usleep(2000);  // let it finish dying, so the status is known
        throw BackendError("port: its stdout ended " + std::string(got == 0 && what == "the reply's length" ? "before a reply" : "mid-reply") +
                           ", waiting for " + what + " (" + std::to_string(got) + " of " + std::to_string(n) +
                           " bytes came); " + state());
      }
      got += static_cast<std::size_t>(k);
    }
  }

  std::string command_;
  int err_read_ = -1;  // the port's stderr file, unlinked
  int life_ = -1;      // the write end of the keeper's life pipe: closed, it ends the port
  pid_t pid_ = -1;
  int to_ = -1, from_ = -1;
  bool done_ = false;
  int status_ = 0;
};

}  // namespace ctxscore::harness::port_process
