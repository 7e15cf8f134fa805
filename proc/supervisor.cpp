#include "supervisor.hpp"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <optional>
#include <thread>

namespace shardplan::proc {

namespace {

std::atomic<int> g_signal{0};

extern "C" void on_signal(int sig) { g_signal.store(sig); }

using Clock = std::chrono::steady_clock;
constexpr auto kPoll = std::chrono::milliseconds(20);

std::string errno_text(const char* what, int err) { return std::string(what) + ": " + std::strerror(err); }

// In the child, between fork and exec: its own group, default signals, the redirections. On any
// failure the errno goes down `report` (close-on-exec: closed unread when exec succeeds).
[[noreturn]] void exec_child(std::vector<char*>& args, const ChildOptions& o, int report) {
  ::setpgid(0, 0);
  ::signal(SIGINT, SIG_DFL);
  ::signal(SIGTERM, SIG_DFL);
  bool ok = true;
  if (o.stdin_null) {
    const int in = ::open("/dev/null", O_RDONLY);
    ok = in >= 0 && ::dup2(in, STDIN_FILENO) >= 0;
  }
  if (ok && !o.output_path.empty()) {
    const int out = ::open(o.output_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ok = out >= 0 && ::dup2(out, STDOUT_FILENO) >= 0 && ::dup2(out, STDERR_FILENO) >= 0;
  }
  if (ok) ::execvp(args[0], args.data());
  const int err = errno;
  (void)!::write(report, &err, sizeof err);
  ::_exit(127);
}

// What to send now, if anything: a received interrupt (forwarded to the group), else SIGTERM
// once the cancel flag is set or the deadline has passed.
struct StopRequest {
  int signal = 0;
  bool group = true;
};

std::optional<StopRequest> stop_request(const ChildOptions& o, Clock::time_point start, ExitStatus& st) {
  if (const int sig = interrupted_by()) {
    st.interrupted = true;
    return StopRequest{sig, true};
  }
  if (o.cancel != nullptr && o.cancel->load()) {
    st.cancelled = true;
    return StopRequest{SIGTERM, o.terminate_group};
  }
  if (o.timeout_s > 0 && std::chrono::duration<double>(Clock::now() - start).count() > o.timeout_s) {
    st.timed_out = true;
    return StopRequest{SIGTERM, o.terminate_group};
  }
  return std::nullopt;
}

// Polls the child to its end: one stop when asked for, SIGKILL to the group a grace later.
void wait_child(pid_t pid, const ChildOptions& o, ExitStatus& st) {
  const auto start = Clock::now();
  std::optional<Clock::time_point> stopped_at;
  bool killed = false;
  for (;;) {
    int raw = 0;
    const pid_t r = ::waitpid(pid, &raw, WNOHANG);
    if (r == pid) {
      if (WIFEXITED(raw)) st.code = WEXITSTATUS(raw);
      if (WIFSIGNALED(raw)) st.signal = WTERMSIG(raw);
      return;
    }
    if (r < 0 && errno != EINTR) throw std::runtime_error(errno_text("waitpid", errno));
    if (!stopped_at) {
      if (const auto stop = stop_request(o, start, st)) {
        ::kill(stop->group ? -pid : pid, stop->signal);
        stopped_at = Clock::now();
      }
    } else if (!killed && Clock::now() - *stopped_at > std::chrono::duration<double>(o.grace_s)) {
      ::kill(-pid, SIGKILL);
      killed = true;
    }
    std::this_thread::sleep_for(kPoll);
  }
}

}  // namespace

std::string ExitStatus::describe() const {
  if (signal) return "signal " + std::to_string(signal) + " (" + strsignal(signal) + ")";
  return "exit " + std::to_string(code);
}

void install_signal_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;  // no SA_RESTART: sleeps and waits notice the interrupt
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

int interrupted_by() { return g_signal.load(); }

void reset_interrupt() { g_signal.store(0); }

ExitStatus run(const std::vector<std::string>& argv, const ChildOptions& o) {
  if (argv.empty()) throw StartError("cannot start an empty command");
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) throw std::runtime_error(errno_text("pipe", errno));
  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error(errno_text("fork", errno));
  if (pid == 0) exec_child(args, o, fds[1]);
  ::setpgid(pid, pid);  // also in the parent: no race with an early signal
  ::close(fds[1]);
  int exec_errno = 0;
  const bool exec_failed = ::read(fds[0], &exec_errno, sizeof exec_errno) == static_cast<ssize_t>(sizeof exec_errno);
  ::close(fds[0]);
  ExitStatus st;
  wait_child(pid, o, st);
  // Leftovers of the group (a rank mpirun did not reap) must not outlive the run.
  ::kill(-pid, SIGKILL);
  if (exec_failed) {
    const std::string what = !o.output_path.empty() && exec_errno != ENOENT && exec_errno != EACCES
                                 ? " (or its output file '" + o.output_path + "')"
                                 : "";
    throw StartError("cannot start '" + argv[0] + "'" + what + ": " + std::strerror(exec_errno));
  }
  return st;
}

bool sleep_unless_interrupted(double seconds) {
  const auto end = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  while (Clock::now() < end) {
    if (interrupted_by()) return false;
    std::this_thread::sleep_for(std::min<Clock::duration>(kPoll, end - Clock::now()));
  }
  return interrupted_by() == 0;
}

}  // namespace shardplan::proc
