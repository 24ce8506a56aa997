// A port's process (port_process.hpp): the orphan sweep, the keeper and
// the shell line.
#include "port_process.hpp"

#include <fstream>
#include <iterator>
#include <map>
#include <sstream>

extern char** environ;

namespace ctxscore::harness::port_process {

namespace {

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

}  // namespace

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

namespace {

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

}  // namespace


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


}  // namespace ctxscore::harness::port_process
