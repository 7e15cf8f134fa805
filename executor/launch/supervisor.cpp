#include "supervisor.hpp"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <stdexcept>
#include <thread>

namespace shardplan::executor::launch {

namespace {

std::atomic<int> g_signal{0};

extern "C" void on_signal(int sig) { g_signal.store(sig); }

using Clock = std::chrono::steady_clock;
constexpr auto kPoll = std::chrono::milliseconds(20);

}  // namespace

std::string ExitStatus::describe() const {
  if (signal) return "signal " + std::to_string(signal) + " (" + strsignal(signal) + ")";
  return "exit " + std::to_string(code);
}

void install_signal_handlers() {
  struct sigaction sa{};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;  // no SA_RESTART: sleeps and waits notice the interrupt
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

int interrupted_by() { return g_signal.load(); }

void reset_interrupt() { g_signal.store(0); }

ExitStatus run_supervised(const std::vector<std::string>& argv, double grace_s) {
  if (argv.empty()) throw std::runtime_error("run_supervised: empty command");
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  // A close-on-exec pipe tells the parent whether exec succeeded (closed unread) or failed
  // (the child writes errno).
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
  if (pid == 0) {
    ::setpgid(0, 0);
    ::signal(SIGINT, SIG_DFL);
    ::signal(SIGTERM, SIG_DFL);
    ::execvp(args[0], args.data());
    const int err = errno;
    (void)!::write(fds[1], &err, sizeof err);
    ::_exit(127);
  }
  ::setpgid(pid, pid);  // also in the parent: no race with an early signal
  ::close(fds[1]);
  int exec_errno = 0;
  const bool exec_failed = ::read(fds[0], &exec_errno, sizeof exec_errno) == static_cast<ssize_t>(sizeof exec_errno);
  ::close(fds[0]);
  ExitStatus st;
  bool forwarded = false, killed = false;
  Clock::time_point forwarded_at;
  for (;;) {
    int raw = 0;
    const pid_t r = ::waitpid(pid, &raw, WNOHANG);
    if (r == pid) {
      if (WIFEXITED(raw)) st.code = WEXITSTATUS(raw);
      if (WIFSIGNALED(raw)) st.signal = WTERMSIG(raw);
      break;
    }
    if (r < 0 && errno != EINTR) throw std::runtime_error(std::string("waitpid: ") + std::strerror(errno));
    if (const int sig = interrupted_by(); sig && !forwarded) {
      ::kill(-pid, sig);
      forwarded = true;
      forwarded_at = Clock::now();
    }
    if (forwarded && !killed && Clock::now() - forwarded_at > std::chrono::duration<double>(grace_s)) {
      ::kill(-pid, SIGKILL);
      killed = true;
    }
    std::this_thread::sleep_for(kPoll);
  }
  // Leftovers of the group (a rank mpirun did not reap) must not outlive the attempt.
  ::kill(-pid, SIGKILL);
  st.interrupted = forwarded;
  if (exec_failed)
    throw std::runtime_error("cannot start '" + argv[0] + "': " + std::strerror(exec_errno));
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

}  // namespace shardplan::executor::launch
