// The port backend: a child process spoken to over fixtures/PROTOCOL.md.
// Whatever the child does (crash, hang, exit mid-message, send garbage), the
// harness gets a BackendError naming it, the child is killed and reaped,
// and the next call starts a fresh one.
#include "ctxscore/harness/port.hpp"

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
#include <chrono>
#include <mutex>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <sstream>

#include "ctxscore/harness/judge.hpp"
#include "ctxscore/harness/phases.hpp"
#include "ctxscore/harness/run_control.hpp"
#include "ctxscore/safetensors.hpp"

extern char** environ;

namespace ctxscore::harness {

namespace {

using Clock = std::chrono::steady_clock;
using Bytes = std::vector<std::uint8_t>;

std::string decimal(double v) {
  char b[40];
  std::snprintf(b, sizeof b, "%.17g", v);
  return b;
}

// When an exchange must be over, and the limit it came from (for messages).
struct Deadline {
  Clock::time_point at;
  double seconds;
  static Deadline in(double seconds) {
    return {Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds)), seconds};
  }
};

// A reply's safetensors header (its JSON, names and metadata) beyond its
// tensors' bytes: a request's reply may announce at most its tensors plus this.
constexpr std::uint64_t kReplyHeaderAllowance = std::uint64_t{1} << 20;

// The most bytes a `scores` reply to a call of `host` in `mode` can hold:
// the out storage it was given (when given) and fresh [H, T, L] fp32 scores.
std::uint64_t scores_reply_bound(const HostCase& host, OutMode mode) {
  const Case& c = host.spec;
  const std::uint64_t fresh = static_cast<std::uint64_t>(c.heads) * static_cast<std::uint64_t>(c.tokens()) *
                              static_cast<std::uint64_t>(std::max<std::int64_t>(c.local(), 0)) * 4;
  const std::uint64_t out = mode == OutMode::absent ? 0 : static_cast<std::uint64_t>(host.out.size()) * 4;
  return out + fresh + kReplyHeaderAllowance;
}

// Children of `parent` (from /proc), for ending what a port left behind.
std::vector<pid_t> children_of(pid_t parent) {
  std::vector<pid_t> kids;
  if (DIR* d = opendir("/proc")) {
    while (const dirent* e = readdir(d)) {
      if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
      std::ifstream f(std::string("/proc/") + e->d_name + "/stat");
      std::string stat((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
      const std::size_t close = stat.rfind(')');  // the command name may hold spaces and parentheses
      if (close == std::string::npos) continue;
      std::istringstream rest(stat.substr(close + 1));
      char state = 0;
      long long ppid = 0;
      if (rest >> state >> ppid && ppid == parent) kids.push_back(static_cast<pid_t>(std::atoll(e->d_name)));
    }
    closedir(d);
  }
  return kids;
}

// Ports alive in this process: what an orphan sweep must leave running.
std::set<pid_t>& live_ports() {
  static std::set<pid_t> pids;
  return pids;
}
// Held from a port's fork until it is listed live, and through a sweep:
// checks run side by side must not sweep up a port that another just started.
std::mutex& live_ports_mutex() {
  static std::mutex m;
  return m;
}

// The harness is the subreaper of what it starts: a port's descendants
// that outlive their parents (a daemon, a setsid() child) become the
// harness's children, so that ending a port can end them too.
void become_subreaper() {
  static const bool done = prctl(PR_SET_CHILD_SUBREAPER, 1) == 0;
  (void)done;
}

// Kills and reaps every child of the harness that is not a live port (the
// descendants an ended port left behind, re-parented here), round after
// round as their own children re-parent in turn.
void end_orphans() {
  for (int round = 0; round < 64; ++round) {
    std::vector<pid_t> orphans;
    for (pid_t p : children_of(getpid()))
      if (live_ports().count(p) == 0) orphans.push_back(p);
    if (orphans.empty()) return;
    for (pid_t p : orphans) kill(p, SIGKILL);
    for (pid_t p : orphans) waitpid(p, nullptr, 0);
  }
}

// The keeper: a process between the harness and the port's shell that
// outlives the harness however it dies, SIGKILL included, and then ends
// every process the port started, whatever the command line (a shell left
// between, `cd ... &&`, forked children, setsid daemons: all are its
// descendants, and as their subreaper it inherits the orphans). It learns
// of the harness's death from `life`, a pipe only the harness writes.
// Forked from a process that may run threads, it calls only
// async-signal-safe functions: no allocation, /proc read into the stack.
namespace keeper {

// Reads this process's children from /proc into `pids`; returns how many.
int children(pid_t self, pid_t* pids, int max) {
  char path[64] = "/proc/";
  char* p = path + 6;
  char digits[16];
  int n = 0;
  for (pid_t v = self; v > 0; v /= 10) digits[n++] = static_cast<char>('0' + v % 10);
  for (int i = 0; i < 2; ++i) {  // /proc/SELF/task/SELF/children
    for (int k = n - 1; k >= 0; --k) *p++ = digits[k];
    const char* part = i == 0 ? "/task/" : "/children";
    while (*part) *p++ = *part++;
  }
  *p = '\0';
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  char buf[4096];
  const ssize_t got = read(fd, buf, sizeof buf);
  close(fd);
  int count = 0;
  pid_t v = 0;
  for (ssize_t i = 0; i < got && count < max; ++i) {
    if (buf[i] >= '0' && buf[i] <= '9') {
      v = v * 10 + (buf[i] - '0');
    } else if (v > 0) {
      pids[count++] = v;
      v = 0;
    }
  }
  if (v > 0 && count < max) pids[count++] = v;
  return count;
}

// The port's stderr file keeps its last kStderrKept bytes on disk: past
// kStderrAllowed the blocks before them are freed (the file keeps its size,
// so the harness reads its tail where it was). A port that floods stderr
// costs a bounded share of the disk.
constexpr off_t kStderrKept = 64 << 10, kStderrAllowed = 1 << 20;
void trim(int err) {
  struct stat st {};
  if (fstat(err, &st) != 0 || st.st_blocks * 512 <= kStderrAllowed) return;
  const off_t end = (st.st_size - kStderrKept) & ~off_t{4095};
  if (end > 0) fallocate(err, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, end);
}

// Kills every descendant, round after round as orphans re-parent here.
void end_all(pid_t self) {
  pid_t kids[512];
  for (int round = 0; round < 256; ++round) {
    const int n = children(self, kids, 512);
    if (n == 0) break;
    for (int k = 0; k < n; ++k) {
      kill(-kids[k], SIGKILL);  // its group, where it leads one
      kill(kids[k], SIGKILL);
    }
    for (int k = 0; k < n; ++k) waitpid(kids[k], nullptr, 0);
  }
  while (waitpid(-1, nullptr, WNOHANG) > 0) {
  }
}

// The keeper's life: start the port's shell, then wait for it to end (end
// its descendants, leave with its status) or the harness to die (end them
// all, leave).
[[noreturn]] void run(pid_t harness, int life, int in, int out, int err, const char* const* argv) {
  prctl(PR_SET_CHILD_SUBREAPER, 1);
  if (getppid() != harness) _exit(127);  // the harness is already gone
  setpgid(0, 0);
  for (int fd = 3; fd < 1024; ++fd)  // nothing of the harness's but its four ends
    if (fd != life && fd != in && fd != out && fd != err) close(fd);
  const pid_t self = getpid();
  const pid_t port = fork();
  if (port == 0) {
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != self) _exit(127);
    if (dup2(in, 0) < 0 || dup2(out, 1) < 0 || dup2(err, 2) < 0) _exit(127);
    for (const int fd : {in, out, err, life})
      if (fd > 2) close(fd);
    execve("/bin/sh", const_cast<char* const*>(argv), environ);
    _exit(127);
  }
  for (const int fd : {in, out}) close(fd);
  if (port < 0) _exit(127);
  int status = 0;
  for (;;) {
    trim(err);
    pollfd pfd{life, POLLIN, 0};
    if (poll(&pfd, 1, 50) > 0 && (pfd.revents & (POLLHUP | POLLERR | POLLIN))) {
      end_all(self);  // the harness died
      _exit(137);
    }
    pid_t done = 0;
    while ((done = waitpid(-1, &status, WNOHANG)) > 0 && done != port) {
    }
    if (done == port) break;
  }
  end_all(self);  // what the port left running
  if (WIFEXITED(status)) _exit(WEXITSTATUS(status));
  const rlimit no_core{0, 0};  // the port dumped its core already, if it did
  setrlimit(RLIMIT_CORE, &no_core);
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigaction(WTERMSIG(status), &dfl, nullptr);
  sigset_t all;
  sigfillset(&all);
  sigprocmask(SIG_UNBLOCK, &all, nullptr);
  kill(self, WTERMSIG(status));  // the port's death, told as the port died
  _exit(128 + WTERMSIG(status));
}

}  // namespace keeper

// The --port-timeout and --port-startup-timeout flags; 0 when not given.
double& timeout_flag() {
  static double t = 0;
  return t;
}
double& startup_flag() {
  static double t = 0;
  return t;
}

std::string join(const std::vector<std::int64_t>& v) {
  std::string s;
  for (std::size_t k = 0; k < v.size(); ++k) s += (k ? "," : "") + std::to_string(v[k]);
  return s;
}

// The shell line that runs `command`: a simple command (words only: no
// shell operator, expansion or leading assignment) is exec'd by the shell,
// so that the port itself is the harness's child and dies with it however
// the harness dies (PR_SET_PDEATHSIG below). A compound line keeps its shell
// between them: its processes are ended with their group instead, unless
// the harness is killed outright.
std::string shell_line(const std::string& command) {
  const std::size_t start = command.find_first_not_of(" \t");
  if (start == std::string::npos || command.find_first_of(";&|<>()`$\\\n*?[]#~{}!", start) != std::string::npos)
    return command;
  const std::string first = command.substr(start, command.find_first_of(" \t", start) - start);
  if (first.find('=') != std::string::npos || first == "exec") return command;
  return "exec " + command.substr(start);
}

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
        throw BackendHung("port: did not read its request within the timeout of " + decimal(deadline.seconds) + " s (hung?); " + state());
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
        throw BackendHung("port: no reply within " + decimal(deadline.seconds) + " s (hung?), waiting for " + what + " (" + std::to_string(got) + " of " + std::to_string(n) +
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

StTensor storage(StDType dtype, const void* data, std::size_t elements) {
  StTensor t;
  t.dtype = dtype;
  t.shape = {static_cast<std::int64_t>(elements)};
  t.bytes.resize(elements * st_dtype_size(dtype));
  if (!t.bytes.empty()) std::memcpy(t.bytes.data(), data, t.bytes.size());
  return t;
}

// The call's scalar arguments, as every request names them (PROTOCOL.md).
void put_scalar_arguments(std::map<std::string, std::string>& m, std::int64_t max_seq_len, std::int64_t rank, std::int64_t world,
                          std::int64_t max_query_len, double sm_scale) {
  m["max_seq_len"] = std::to_string(max_seq_len);
  m["rank"] = std::to_string(rank);
  m["world_size"] = std::to_string(world);
  m["max_query_len"] = std::to_string(max_query_len);
  m["sm_scale"] = decimal(sm_scale);
}

// The `score`-shaped request of a call: storages and arguments.
SafeTensors call_message(const char* kind, const HostCase& host, OutMode mode, std::int64_t max_seq_len) {
  const Case& c = host.spec;
  SafeTensors st;
  st.tensors.emplace_back("idx_q", storage(StDType::bf16, host.q.data(), host.q.size()));
  st.tensors.emplace_back("index_cache", storage(StDType::bf16, host.cache.data(), host.cache.size()));
  st.tensors.emplace_back("block_table", storage(StDType::i32, host.table.data(), host.table.size()));
  st.tensors.emplace_back("seq_lens", storage(StDType::i32, c.seq_lens.data(), c.seq_lens.size()));
  auto& m = st.metadata;
  m["message"] = kind;
  m["idx_q_shape"] = join({c.tokens(), c.heads, kHeadDim});
  m["idx_q_strides"] = join({c.q_token_stride, c.q_head_stride, 1});
  m["index_cache_shape"] = join({c.pages, kBlockTokens, kHeadDim});
  m["block_table_shape"] = join({c.batch(), c.table_width});
  m["block_table_strides"] = join({c.table_row_stride, 1});
  put_scalar_arguments(m, max_seq_len, c.rank, c.world, c.query_len, c.sm_scale);
  if (mode != OutMode::absent) {
    st.tensors.emplace_back("out", storage(StDType::f32, host.out.data(), host.out.size()));
    m["out_shape"] = join({c.heads, c.out_rows, mode == OutMode::too_small ? c.local() - 1 : c.out_slots});
    m["out_strides"] = join({c.out_head_stride, c.out_row_stride, c.out_slot_stride});
  }
  if (c.geometry) {
    m["geometry_chunk"] = std::to_string(c.geometry->chunk);
    m["geometry_grid_y"] = std::to_string(c.geometry->grid_y);
    m["geometry_teams"] = std::to_string(c.geometry->teams);
    m["geometry_ring_pages"] = std::to_string(c.geometry->ring_pages);
  }
  return st;
}

StDType wire_dtype(DType d) {
  switch (d) {
    case DType::bf16: return StDType::bf16;
    case DType::f16: return StDType::f16;
    case DType::f32: return StDType::f32;
    case DType::i32: return StDType::i32;
    case DType::i64: return StDType::i64;
    case DType::u8: return StDType::u8;
    case DType::f8e4m3: break;
  }
  throw std::invalid_argument(std::string("a call in ") + dtype_name(d) + ", a dtype the port protocol has no name for");
}

RawTensor& call_tensor(RawCall& c, int k) {
  RawTensor* all[] = {&c.idx_q, &c.index_cache, &c.block_table, &c.seq_lens, &c.out};
  return *all[k];
}

// Any call, valid or not, as a `score` request: each storage in its own
// dtype, every view's shape and strides.
SafeTensors raw_message(RawCall& c) {
  SafeTensors st;
  auto& m = st.metadata;
  m["message"] = "score";
  for (int k = 0; k < 5; ++k) {
    RawTensor& t = call_tensor(c, k);
    StTensor s;
    s.dtype = wire_dtype(t.view.dtype);
    s.shape = {static_cast<std::int64_t>(t.bytes.size() / st_dtype_size(s.dtype))};
    s.bytes = t.bytes;
    st.tensors.emplace_back(kCallTensors[k], std::move(s));
    const std::vector<std::int64_t> shape(t.view.shape.begin(), t.view.shape.begin() + t.view.ndim);
    const std::vector<std::int64_t> strides(t.view.strides.begin(), t.view.strides.begin() + t.view.ndim);
    m[std::string(kCallTensors[k]) + "_shape"] = join(shape);
    m[std::string(kCallTensors[k]) + "_strides"] = join(strides);
  }
  put_scalar_arguments(m, c.max_seq_len, c.rank, c.world, c.max_query_len, c.sm_scale);
  return st;
}

class PortBackend : public Backend, public PortBackendApi {
 public:
  explicit PortBackend(std::string command) : command_(std::move(command)) {
    port_timeout_seconds();  // a malformed setting is the caller's error, named before any port runs
    port_startup_timeout_seconds();
    start();
  }

  std::string name() const override { return "port"; }
  std::string port_name() override { return port_name_; }
  std::string toolchain() const override {
    return toolchain_.empty() ? "not reported by the port (its hello names no toolchain)" : toolchain_;
  }
  Oracle oracle() const override { return Oracle::reference; }
  gen::CaseLimits fuzz_limits() const override { return gen::named_limits(case_size()); }  // a port launches its own geometry
  // A port on the host would take minutes a case at the GPU's sizes.
  std::string case_size() const override { return device_ == "cpu" ? "small" : "large"; }
  std::string replay_flags() const override { return "--port " + shell_quoted(command_); }
  bool supports(const std::string& what) override {
    ensure_started();
    return supports_.find("," + what + ",") != std::string::npos;
  }

  Scored score(HostCase& host, OutMode mode) override {
    const SafeTensors request = call_message("score", host, mode, host.spec.max_seq_len);
    // An `error` reply carries the call's storages back (PROTOCOL.md): at most what was sent.
    std::uint64_t sent = kReplyHeaderAllowance;
    for (const auto& [name, t] : request.tensors) sent += t.bytes.size();
    const SafeTensors reply = exchange(request, "scores", std::max(scores_reply_bound(host, mode), sent));
    return scores_of(reply, host, mode);
  }

  std::unique_ptr<CapturedScore> capture(HostCase& dummy, std::int64_t captured_bound) override;

  Capabilities state_capabilities() override {
    Capabilities c = Backend::state_capabilities();
    c.places_tensors = false;
    if (!supports("refuse"))
      c.refusals = "the port's hello does not offer `refuse` (PROTOCOL.md): it cannot be handed a call that breaks the contract";
    if (supports("geometry")) c.geometry.clear();
    return c;
  }

  // An `error` reply to a `score` carries the storages as the failed call
  // left them (PROTOCOL.md): what shows that a refusal wrote nothing.
  CallOutcome call(RawCall& c) override {
    std::uint64_t bound = kReplyHeaderAllowance;
    for (int k = 0; k < 5; ++k) bound += call_tensor(c, k).bytes.size();
    const std::int64_t heads = std::max<std::int64_t>(c.idx_q.view.shape[1], 0);
    bound += static_cast<std::uint64_t>(heads * c.idx_q.view.shape[0] * local_slots(global_blocks(std::max<std::int64_t>(c.max_seq_len, 1)), std::max<std::int64_t>(c.world, 1))) * 4;
    const SafeTensors reply = exchange(raw_message(c), "scores", bound, true);
    CallOutcome o;
    o.refused = reply.metadata.at("message") == "error";
    o.fresh = reply.find("fresh") != nullptr;
    if (o.refused) {
      const auto why = reply.metadata.find("reason");
      o.reason = why == reply.metadata.end() ? "(no reason given)" : printable(why->second).substr(0, 1000);
    }
    for (const auto& [name, t] : reply.tensors)
      if (name != "fresh" && std::find(std::begin(kCallTensors), std::end(kCallTensors), name) == std::end(kCallTensors))
        fail("replied with an unexpected tensor `" + name + "`");
    for (int k = 0; k < 5; ++k) {
      if (!o.refused && k < 4) continue;  // a `scores` reply carries out only
      RawTensor& t = call_tensor(c, k);
      const StTensor* got = reply.find(kCallTensors[k]);
      if (!got)
        fail(std::string("answered `") + (o.refused ? "error" : "scores") + "` without the " + kCallTensors[k] +
             " storage (an error to a `score` carries every storage as the call left it)");
      if (got->dtype != wire_dtype(t.view.dtype) || got->bytes.size() != t.bytes.size())
        fail(std::string("replied with ") + kCallTensors[k] + " " + st_dtype_name(got->dtype) + " of " +
             std::to_string(got->bytes.size()) + " bytes, expected " + st_dtype_name(wire_dtype(t.view.dtype)) + " of " +
             std::to_string(t.bytes.size()) + " (the storage it was given)");
      t.bytes = got->bytes;
    }
    return o;
  }

  // The port times itself on its device (PROTOCOL.md, `time`).
  Timing time(HostCase& host, int calls) override {
    if (!supports("time")) fail("does not answer `time` (its hello's `supports` lacks it)");
    SafeTensors req = call_message("time", host, OutMode::given, host.spec.max_seq_len);
    req.metadata["calls"] = std::to_string(calls);
    const auto asked = std::chrono::steady_clock::now();
    const SafeTensors reply = exchange(req, "timing", kReplyHeaderAllowance);
    const double waited_us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - asked).count();
    const auto number = [&](const char* key, double lo, bool above) {
      const auto it = reply.metadata.find(key);
      if (it == reply.metadata.end()) fail(std::string("reply `timing` lacks ") + key);
      char* end = nullptr;
      const double v = std::strtod(it->second.c_str(), &end);
      if (it->second.empty() || *end != '\0' || !std::isfinite(v) || v < lo || (above && v == lo))
        fail(std::string("reply `timing`: ") + key + " = \"" + printable(it->second) + "\", expected a finite number " +
             (above ? "> " : ">= ") + decimal(lo));
      return v;
    };
    Timing t;
    t.median_us = number("median_us", 0.0, true);
    t.calls = static_cast<std::int64_t>(number("calls", calls, false));
    t.copy_gb_per_s = number("copy_gb_per_s", 0.0, true);
    // At least half the timed calls took the median or longer, and all of
    // them ran while the harness waited: figures that do not fit in the
    // wait are not a measurement.
    const double least_us = std::ceil(static_cast<double>(t.calls) / 2) * t.median_us;
    if (least_us > 1.1 * waited_us + 1000.0)
      fail("reply `timing`: " + std::to_string(t.calls) + " calls at a median of " + decimal(t.median_us) +
           " us take at least " + decimal(least_us * 1e-6) + " s, expected no more than the " + decimal(waited_us * 1e-6) +
           " s the reply took");
    const auto method = reply.metadata.find("method");
    t.method = method == reply.metadata.end() ? "not said" : printable(method->second).substr(0, 200);
    return t;
  }

  PortGeometry geometry(std::int64_t batch, std::int64_t max_seq_len, std::int64_t world, std::int64_t heads,
                        std::int64_t query_len) override {
    SafeTensors req;
    req.metadata = {{"message", "geometry"}, {"batch", std::to_string(batch)}, {"max_seq_len", std::to_string(max_seq_len)},
                    {"world_size", std::to_string(world)}, {"heads", std::to_string(heads)},
                    {"max_query_len", std::to_string(query_len)}};
    const SafeTensors reply = exchange(req, "geometry", kReplyHeaderAllowance);
    PortGeometry g;
    const auto field = [&](const char* key) {
      const auto it = reply.metadata.find(key);
      if (it == reply.metadata.end()) fail(std::string("reply `geometry` lacks ") + key);
      try {
        std::size_t used = 0;
        const std::int64_t v = std::stoll(it->second, &used);
        if (used != it->second.size()) throw std::invalid_argument(it->second);
        return v;
      } catch (const std::exception&) {
        fail(std::string("reply `geometry`: ") + key + " = \"" + it->second + "\", expected an integer");
      }
    };
    g.chunk_count = field("chunk_count");
    g.chunk = field("chunk");
    g.grid_x = field("grid_x");
    g.grid_y = field("grid_y");
    return g;
  }

  // Sends one request, returns the reply of kind `want` (an `error` reply
  // becomes a BackendError with the port's message, or is returned when
  // `error_is_reply`). Any failure kills the
  // child; the next request starts a new one.
  SafeTensors exchange(const SafeTensors& request, const std::string& want, std::uint64_t max_reply_bytes,
                       bool error_is_reply = false) {
    ensure_started();
    const PhaseClock clock(Phase::transfer);
    const auto sent = std::chrono::steady_clock::now();
    std::string reported;
    try {
      const Deadline deadline = Deadline::in(port_timeout_seconds());
      child_->send(encode_safetensors(request), deadline);
      const Bytes raw = child_->receive(deadline, max_reply_bytes);
      SafeTensors reply;
      try {
        reply = decode_safetensors(raw.data(), raw.size(), "the port's reply");
      } catch (const FixtureError& e) {
        fail(std::string("sent a reply that is no safetensors document: ") + e.what());
      }
      const auto kind = reply.metadata.find("message");
      if (kind == reply.metadata.end()) fail("sent a reply without a \"message\" kind");
      // The port's own time for the call, inside the wait charged to transfer
      // (PROTOCOL.md); a port that overstates it moves no more than this wait.
      if (const auto call = reply.metadata.find("call_seconds"); call != reply.metadata.end()) {
        char* end = nullptr;
        const double seconds = std::strtod(call->second.c_str(), &end);
        const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - sent).count();
        if (!call->second.empty() && *end == '\0' && std::isfinite(seconds) && seconds >= 0)
          recharge(Phase::transfer, Phase::implementation, std::min(seconds, waited));
      }
      if (kind->second == "error" && error_is_reply) {
        return reply;
      } else if (kind->second == "error") {
        const auto why = reply.metadata.find("reason");
        reported = why != reply.metadata.end() ? why->second : std::string("(no reason given)");
      } else if (kind->second != want) {
        fail("replied `" + kind->second + "` to `" + request.metadata.at("message") + "`, expected `" + want + "`");
      } else {
        return reply;
      }
    } catch (const BackendError&) {
      if (child_) last_state_ = child_->state();
      child_.reset();
      throw;
    }
    // The port is well and said why it could not: it stays.
    throw BackendError("port " + port_name_ + " reported an error: " + reported);
  }

  [[noreturn]] void fail(const std::string& what) {
    throw BackendError("port " + (port_name_.empty() ? shell_quoted(command_) : port_name_) + " " + what);
  }

  Scored scores_of(const SafeTensors& reply, const HostCase& host, OutMode mode) {
    const Case& c = host.spec;
    Scored s;
    for (const auto& [name, t] : reply.tensors)
      if (name != "out" && name != "fresh") fail("replied with an unexpected tensor `" + name + "` (expected out, fresh)");
    const StTensor* out = reply.find("out");
    if (mode != OutMode::absent) {
      if (!out) fail("replied without the out storage it was given");
      if (out->dtype != StDType::f32 || out->shape != std::vector<std::int64_t>{static_cast<std::int64_t>(host.out.size())})
        fail(std::string("replied with out ") + st_dtype_name(out->dtype) + " [" + join(out->shape) + "], expected F32 [" +
             std::to_string(host.out.size()) + "] (the storage it was given)");
      s.out.resize(host.out.size());
      std::memcpy(s.out.data(), out->bytes.data(), out->bytes.size());
    } else if (out) {
      fail("replied with an out storage to a call that passed none");
    }
    if (const StTensor* fresh = reply.find("fresh")) {
      const std::vector<std::int64_t> want{c.heads, c.tokens(), c.local()};
      if (fresh->dtype != StDType::f32 || fresh->shape != want)
        fail(std::string("replied with fresh scores ") + st_dtype_name(fresh->dtype) + " [" + join(fresh->shape) +
             "], expected F32 [" + join(want) + "] = [H, T, L]");
      std::vector<float> v(fresh->bytes.size() / 4);
      if (!v.empty()) std::memcpy(v.data(), fresh->bytes.data(), fresh->bytes.size());
      s.fresh = std::move(v);
    }
    return s;
  }

 private:
  void ensure_started() {
    if (!child_) start();
  }
  void start() {
    child_ = std::make_unique<Child>(command_);
    SafeTensors hello;
    hello.metadata = {{"message", "hello"}, {"protocol", std::to_string(kProtocolVersion)}};
    try {
      const Deadline deadline = Deadline::in(port_startup_timeout_seconds());  // start-up has a limit of its own
      child_->send(encode_safetensors(hello), deadline);
      const Bytes raw = child_->receive(deadline, kReplyHeaderAllowance);
      const SafeTensors reply = decode_safetensors(raw.data(), raw.size(), "the port's hello");
      if (reply.metadata.count("message") == 0 || reply.metadata.at("message") != "hello")
        throw BackendError("port " + shell_quoted(command_) + " did not answer `hello` with `hello`");
      const auto protocol = reply.metadata.find("protocol");
      if (protocol != reply.metadata.end() && protocol->second != std::to_string(kProtocolVersion))
        throw BackendError("port " + shell_quoted(command_) + " speaks protocol \"" + protocol->second +
                           "\", expected \"" + std::to_string(kProtocolVersion) + "\"");
      port_name_ = reply.metadata.count("name") ? reply.metadata.at("name") : command_;
      supports_ = "," + (reply.metadata.count("supports") ? reply.metadata.at("supports") : std::string("score")) + ",";
      toolchain_ = reply.metadata.count("toolchain") ? printable(reply.metadata.at("toolchain")).substr(0, 1000) : "";
      device_ = reply.metadata.count("device") ? reply.metadata.at("device") : "";
    } catch (const FixtureError& e) {
      const std::string state = child_->state();
      child_.reset();
      throw BackendError("port " + shell_quoted(command_) + " sent a hello that is no safetensors document: " + e.what() + "; " + state);
    } catch (const BackendError& e) {
      child_->await_end(2.0);  // its status (69: no device) says more than the broken pipe
      const bool unavailable = child_->exited_with(kDeviceUnavailableExit);
      child_.reset();
      if (unavailable) throw Unavailable{std::string("port ") + shell_quoted(command_) + " cannot open its device: " + e.what()};
      throw BackendError(std::string("port ") + shell_quoted(command_) + " did not start: " + e.what());
    }
  }

  std::string command_, port_name_, supports_, last_state_, toolchain_, device_;
  std::unique_ptr<Child> child_;
  friend class PortCapture;
};

class PortCapture : public CapturedScore {
 public:
  PortCapture(PortBackend& port, const HostCase& dummy) : port_(port), spec_(dummy.spec) {}
  Scored replay(HostCase& real) override {
    const SafeTensors reply = port_.exchange(call_message("replay", real, OutMode::given, spec_.max_seq_len), "scores",
                                             scores_reply_bound(real, OutMode::given));
    return port_.scores_of(reply, real, OutMode::given);
  }

 private:
  PortBackend& port_;
  Case spec_;
};

std::unique_ptr<CapturedScore> PortBackend::capture(HostCase& dummy, std::int64_t captured_bound) {
  if (!supports("capture")) return nullptr;
  exchange(call_message("capture", dummy, OutMode::given, captured_bound), "captured", kReplyHeaderAllowance);
  return std::make_unique<PortCapture>(*this, dummy);
}

}  // namespace

namespace {

// The flag, else $env (strictly parsed), else the default.
double seconds_setting(double flag, const char* env_name, double fallback) {
  if (flag > 0) return flag;
  if (const char* env = std::getenv(env_name); env && *env) {
    const std::optional<double> v = positive_seconds(env);
    if (!v)
      throw std::invalid_argument(std::string(env_name) + " = \"" + printable(env) + "\", expected a positive, finite number of seconds");
    return *v;
  }
  return fallback;
}

}  // namespace

double port_timeout_seconds() { return seconds_setting(timeout_flag(), "CTXSCORE_PORT_TIMEOUT", 60); }
void set_port_timeout_seconds(double seconds) { timeout_flag() = seconds; }
double port_startup_timeout_seconds() { return seconds_setting(startup_flag(), "CTXSCORE_PORT_STARTUP_TIMEOUT", 120); }
void set_port_startup_timeout_seconds(double seconds) { startup_flag() = seconds; }

std::unique_ptr<Backend> make_port_backend(const std::string& command) { return std::make_unique<PortBackend>(command); }

PortBackendApi* as_port(Backend& b) { return dynamic_cast<PortBackendApi*>(&b); }

}  // namespace ctxscore::harness
