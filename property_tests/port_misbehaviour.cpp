// A port must never break the harness: each way a port can misbehave gets a
// verdict naming the case and what the port did, the failing case is
// written as a fixture, and the child is always reaped (label cpu).
#include <gtest/gtest.h>
#include <signal.h>

#include <cerrno>
#include <filesystem>
#include <fstream>

#include "ctxscore/fixture.hpp"
#include "ctxscore/harness/case_builder.hpp"
#include "ctxscore/harness/judge.hpp"
#include "ctxscore/harness/port.hpp"

namespace ctxscore {
namespace {

namespace fs = std::filesystem;

struct Misbehaviour {
  const char* name;
  const char* verdict;  // a phrase the verdict must contain
};

std::string python_port(const std::string& script_args, const fs::path& pidfile) {
  return "CTXSCORE_TEST_PIDFILE=" + pidfile.string() + " PYTHONPATH=" CTXSCORE_SOURCE_DIR "/python exec " + harness::shell_quoted(CTXSCORE_PYTHON) + " " +
         script_args;
}

// The ports' stderr files in the temporary directory ($TMPDIR): each must go with its port.
std::size_t port_stderr_files() {
  std::size_t n = 0;
  for (const auto& e : fs::directory_iterator(fs::temp_directory_path()))
    n += e.path().filename().string().rfind("ctxscore-port-stderr-", 0) == 0;
  return n;
}

// This test's own $TMPDIR for the duration of a scope, so that counting its
// ports' files is not disturbed by other processes.
class OwnTempDir {
 public:
  OwnTempDir() : dir_(fs::temp_directory_path() / ("ctxscore-port-tmp-" + std::to_string(getpid()))) {
    const char* old = std::getenv("TMPDIR");
    old_ = old ? old : "";
    had_ = old != nullptr;
    fs::create_directories(dir_);
    setenv("TMPDIR", dir_.c_str(), 1);
  }
  ~OwnTempDir() {
    if (had_) setenv("TMPDIR", old_.c_str(), 1);
    else unsetenv("TMPDIR");
    fs::remove_all(dir_);
  }

 private:
  fs::path dir_;
  std::string old_;
  bool had_ = false;
};

bool process_gone(const fs::path& pidfile) {
  std::ifstream f(pidfile);
  pid_t pid = 0;
  if (!(f >> pid) || pid <= 0) return false;
  return kill(pid, 0) != 0 && errno == ESRCH;  // a zombie still answers: gone means reaped
}

TEST(PortMisbehaviour, EachGetsAVerdictTheCaseIsKeptAndTheChildIsReaped) {
  const OwnTempDir tmp;
  const std::size_t stderr_files = port_stderr_files();
  const fs::path dir = fs::temp_directory_path() / ("ctxscore-port-test-" + std::to_string(getpid()));
  fs::create_directories(dir);
  harness::set_failure_dir((dir / "failures").string());
  harness::set_port_timeout_seconds(3);
  // Start-up has its own limit, longer under the sanitizers' slower processes.
#ifdef CTXSCORE_SANITIZED
  harness::set_port_startup_timeout_seconds(30);
#else
  harness::set_port_startup_timeout_seconds(10);
#endif
  const Case c = harness::CaseBuilder("port_misbehaviour").heads(2).world(2).rank(1).bound(512).pages(2)
                     .lens({300, 40}).build();
  const Misbehaviour cases[] = {
      {"crash", "killed by signal"},
      {"exit", "exited with status 3"},
      {"hang", "no reply within 3 s"},
      {"truncated", "mid-reply"},
      {"garbage_bytes", "no safetensors document"},
      {"huge_length", "more than the"},
      {"wrong_kind", "replied `geometry` to `score`"},
      {"wrong_shape", "expected F32 ["},
      {"wrong_dtype", "replied with out I32"},
      {"garbage_scores", "MISMATCH"},
      {"raises", "reported an error: RuntimeError: the kernel refused"},
      {"never_reads", "did not read its request within the timeout"},
      {"sleeps_before_reading", "within"},
      {"huge_announced_reply", "announced a reply of 3221225472 bytes, more than the"},
      {"setsid_child", "MISMATCH"},
  };
  for (const Misbehaviour& m : cases) {
    SCOPED_TRACE(m.name);
    const fs::path pidfile = dir / (std::string(m.name) + ".pid");
    {
      auto port = harness::make_backend("port", python_port(CTXSCORE_SOURCE_DIR "/property_tests/ports/broken_port.py " +
                                                                std::string(m.name), pidfile));
      const harness::Verdict v = harness::run_and_judge(*port, c);
      EXPECT_FALSE(v.ok());
      EXPECT_NE(v.str().find(m.verdict), std::string::npos) << v.str();
      EXPECT_EQ(v.spec.str(), c.str());
      const std::string path = v.fixture.path;
      ASSERT_TRUE(fs::exists(path)) << v.fixture.str();
      EXPECT_EQ(read_fixture(path).spec.str(), c.str());
      EXPECT_NE(v.fixture.str().find("--port"), std::string::npos) << v.fixture.str();
    }
    EXPECT_TRUE(process_gone(pidfile)) << "the port's process outlived the harness's use of it";
    if (fs::exists(pidfile.string() + ".child")) {  // a setsid() descendant is ended with its port
      EXPECT_TRUE(process_gone(pidfile.string() + ".child")) << "the port's setsid() child outlived it";
    }
  }
  // A port that never answers hello does not start, and says so.
  const fs::path pidfile = dir / "hang_at_hello.pid";
  try {
    harness::make_backend("port", python_port(CTXSCORE_SOURCE_DIR "/property_tests/ports/broken_port.py hang_at_hello", pidfile));
    ADD_FAILURE() << "a port that never answered hello was accepted";
  } catch (const harness::BackendError& e) {
    EXPECT_NE(std::string(e.what()).find("did not start"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(process_gone(pidfile));
  // Nor does one that answers in another protocol.
  const fs::path other = dir / "other_protocol.pid";
  try {
    harness::make_backend("port", python_port(CTXSCORE_SOURCE_DIR "/property_tests/ports/broken_port.py other_protocol", other));
    ADD_FAILURE() << "a port speaking another protocol was accepted";
  } catch (const harness::BackendError& e) {
    EXPECT_NE(std::string(e.what()).find("speaks protocol \"999\", expected \"" + std::to_string(kProtocolVersion) + "\""),
              std::string::npos) << e.what();
  }
  EXPECT_TRUE(process_gone(other));
  EXPECT_EQ(port_stderr_files(), stderr_files) << "a port's stderr file was left in the temporary directory";
  harness::set_failure_dir("");
  harness::set_port_timeout_seconds(0);
  harness::set_port_startup_timeout_seconds(0);
  fs::remove_all(dir);
}

TEST(PortMisbehaviour, AnUnstartableCommandIsNamed) {
  const OwnTempDir tmp;
  const std::size_t stderr_files = port_stderr_files();
  try {
    harness::make_backend("port", "exec /nonexistent/port-binary");
    ADD_FAILURE() << "accepted";
  } catch (const harness::BackendError& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/port-binary"), std::string::npos) << e.what();
  }
  EXPECT_EQ(port_stderr_files(), stderr_files);
}

}  // namespace
}  // namespace ctxscore
