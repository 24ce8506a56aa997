// The failure archive: where failing cases are written (--failures, else
// the variable wire_format.json names, else its default folder), each as a
// fixture, and the line that judges one again.
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>

#include "ctxscore/harness/judge.hpp"

namespace ctxscore::harness {

namespace {

std::string& failure_dir_flag() {
  static std::string dir;
  return dir;
}

std::string& replay_program_setting() {
  static std::string program = "ctxscore";
  return program;
}

}  // namespace

void set_replay_program(const std::string& program) { replay_program_setting() = program; }
const std::string& replay_program() { return replay_program_setting(); }

FailureFile with_replay_line(const std::string& path, const std::string& backend_flags, bool one_call) {
  return {path, replay_program(), backend_flags, one_call, ""};
}

std::string FailureFile::replay() const {
  return path.empty() ? "" : shell_quoted(program) + " fixtures check " + shell_quoted(path) + " " + flags;
}

std::string FailureFile::str() const {
  if (!not_written.empty()) return "not written: " + not_written;
  if (path.empty()) return "";
  return path + (one_call ? " (one call again: " : " (replay: ") + replay() + ")";
}

std::string failure_dir_problem() {
  const std::filesystem::path dir = failure_dir();
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return printable(dir.string()) + ": cannot be made (" + ec.message() + "); expected a folder failing cases can be written into";
  const std::filesystem::path probe = dir / ".ctxscore-write-probe";
  std::FILE* f = std::fopen(probe.c_str(), "wb");
  if (!f) return printable(dir.string()) + ": cannot be written into (" + std::strerror(errno) + "); expected a folder failing cases can be written into";
  std::fclose(f);
  std::filesystem::remove(probe, ec);
  return "";
}

std::string failure_dir() {
  if (!failure_dir_flag().empty()) return failure_dir_flag();
  const char* env = std::getenv(kFailureDirVariable);
  return env && *env ? env : kFailureDirDefault;
}

void set_failure_dir(const std::string& dir) { failure_dir_flag() = dir; }

std::string FailureRecord::file_name() const {
  std::string name = found_by + "_seed" + std::to_string(seed) + (out ? std::string("_out_") + out_mode_name(*out) : "") +
                     (shrunk ? "_shrunk" : "") + ".safetensors";
  std::replace_if(name.begin(), name.end(), [](char ch) { return ch == '/' || ch == ' '; }, '_');
  return name;
}

namespace {

FailureFile write_failure(const std::function<Fixture()>& make, const FailureRecord& record,
                          const std::string& backend_flags) {
  try {
    const std::filesystem::path dir = std::filesystem::absolute(failure_dir());
    std::filesystem::create_directories(dir);
    const std::string path = (dir / record.file_name()).string();
    Fixture f = make();
    f.toolchain = record.toolchain;
    write_fixture(path, f);
    return with_replay_line(path, backend_flags, record.one_call);
  } catch (const std::exception& e) {
    FailureFile none;
    none.not_written = e.what();
    return none;
  }
}

}  // namespace

FailureFile write_failure_fixture(const Case& c, const FailureRecord& record, const std::string& backend_flags) {
  return write_failure([&] { return make_fixture(c); }, record, backend_flags);
}

FailureFile write_failure_fixture(const HostCase& host, const FailureRecord& record, const std::string& backend_flags) {
  return write_failure([&] { return make_fixture(host); }, record, backend_flags);
}

}  // namespace ctxscore::harness
