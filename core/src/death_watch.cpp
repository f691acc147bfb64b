#include "death_watch.hpp"

#include <sys/epoll.h>
#include <unistd.h>

#include <cerrno>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <system_error>
#include <thread>
#include <unordered_map>

#include "cudaipc/error.hpp"
#include "cudaipc/log.hpp"
#include "thread_name.hpp"
#include "unique_fd.hpp"

namespace cudaipc {
namespace {

// Every watched pidfd of the process in one epoll set, waited on by one thread. epoll_ctl takes
// effect on an epoll_wait already in progress, so adding or removing a watch needs no wake-up of
// the thread (no eventfd): the table below, under `mu_`, is what decides whether a callback runs.
class Watcher {
 public:
  static Watcher& instance() {
    // Never destroyed: its thread sleeps in epoll_wait until the process exits, and connections
    // held by static objects may end their watches during static destruction.
    static Watcher* const w = std::make_unique<Watcher>().release();
    return *w;
  }

  std::uint64_t add(int pidfd, std::function<void()> on_death) {
    std::lock_guard<std::mutex> lock(mu_);
    const pid_t self = ::getpid();
    // First use, or a child forked from a process that had the thread: threads do not survive
    // fork, and the epoll set is the parent's, shared with it.
    if (owner_ != self) start(self);
    const std::uint64_t id = next_id_++;
    watches_.emplace(id, Watch{pidfd, std::move(on_death)});
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = id;
    if (::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, pidfd, &ev) != 0) {
      const int err = errno;
      watches_.erase(id);
      throw_errno("adding a pidfd to the death watch", err);
    }
    return id;
  }

  void remove(std::uint64_t id) noexcept {
    std::unique_lock<std::mutex> lock(mu_);
    auto it = watches_.find(id);
    if (owner_ != ::getpid()) {
      // A forked child ending a watch it inherited: the epoll set and the thread are the
      // parent's, so it must not touch them, and no callback of its own can be running.
      if (it != watches_.end()) watches_.erase(it);
      return;
    }
    if (it != watches_.end()) {
      // The pidfd is still open (it outlives the watch), so this cannot fail but for a bug.
      if (::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, it->second.pidfd, nullptr) != 0)
        log(LogLevel::error, "death watch: removing a pidfd from the epoll set failed");
      watches_.erase(it);
      return;
    }
    // Fired already, or firing now: wait for the callback to return, unless this is the
    // callback itself ending its own watch.
    if (std::this_thread::get_id() == thread_id_) return;
    idle_.wait(lock, [&] { return running_ != id; });
  }

 private:
  struct Watch {
    int pidfd;
    std::function<void()> on_death;
  };

  void start(pid_t self) {
    UniqueFd ep(::epoll_create1(EPOLL_CLOEXEC));
    if (!ep) throw_errno("epoll_create1 for the death watch");
    std::thread t;
    try {
      t = std::thread([this, fd = ep.get()] { run(fd); });
    } catch (const std::system_error& e) {
      throw Error(Errc::system, std::string("starting the death watch thread: ") + e.what());
    }
    thread_id_ = t.get_id();
    t.detach();              // lives as long as the process, as this object does
    epoll_ = std::move(ep);  // in a forked child this closes only its copy of the parent's set
    watches_.clear();        // a forked child's copies of the parent's watches
    running_ = 0;
    owner_ = self;
  }

  void run(int ep) {
    detail::name_this_thread("cudaipc-deaths");
    epoll_event events[64];
    for (;;) {
      const int n = ::epoll_wait(ep, events, 64, -1);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        log(LogLevel::error,
            "death watch: epoll_wait failed; a producer's death is noticed only on use");
        return;
      }
      for (int i = 0; i < n; ++i) fire(ep, events[i].data.u64);
    }
  }

  void fire(int ep, std::uint64_t id) {
    std::function<void()> on_death;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = watches_.find(id);
      if (it == watches_.end()) return;  // removed after epoll_wait returned it
      // Once: a dead process's pidfd stays readable.
      if (::epoll_ctl(ep, EPOLL_CTL_DEL, it->second.pidfd, nullptr) != 0)
        log(LogLevel::error, "death watch: removing a pidfd from the epoll set failed");
      on_death = std::move(it->second.on_death);
      watches_.erase(it);
      running_ = id;
    }
    try {
      on_death();
    } catch (const std::exception& e) {
      log(LogLevel::error, (std::string("death watch callback: ") + e.what()).c_str());
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      running_ = 0;
    }
    idle_.notify_all();
  }

  std::mutex mu_;
  std::condition_variable idle_;  // running_ changed
  UniqueFd epoll_;
  pid_t owner_ = 0;  // the process whose thread waits on epoll_
  std::thread::id thread_id_;
  std::unordered_map<std::uint64_t, Watch> watches_;
  std::uint64_t next_id_ = 1;
  std::uint64_t running_ = 0;  // the watch whose callback runs now; 0: none
};

}  // namespace

DeathWatch::DeathWatch(int pidfd, std::function<void()> on_death)
    : id_(Watcher::instance().add(pidfd, std::move(on_death))) {}

DeathWatch::~DeathWatch() {
  Watcher::instance().remove(id_);
}

}  // namespace cudaipc
