// The producers this process has open, and the calls in each. A producer's handle is an int the
// Python side keeps, and publishers may share one producer across threads: a close() on one
// thread must not free the core's producer under a publish() that waits for a slot on another
// (a crash now and then), nor let a call made with a handle read just before the close reach the
// freed producer. Every call looks its handle up here and counts itself in; the free marks the
// producer closing, wakes its waiting calls and waits for them to leave. All of it runs under the
// GIL, which is what serialises the table.
#include <chrono>
#include <thread>
#include <unordered_map>

#include "native.hpp"

namespace cudaipc_py {

struct ProducerCalls {
  int inside = 0;
  bool closing = false;
};

namespace {

// Node-based: an entry stays where it is while others come and go, so a call keeps a pointer to
// its own across the GIL's release.
std::unordered_map<cudaipc_producer*, ProducerCalls>& table() {
  static std::unordered_map<cudaipc_producer*, ProducerCalls> t;
  return t;
}

}  // namespace

bool producer_opened(cudaipc_producer* p) {
  try {
    table().emplace(p, ProducerCalls{});
    return true;
  } catch (const std::bad_alloc&) {
    PyErr_NoMemory();
    return false;
  }
}

bool ProducerCall::enter(const char* fn, PyObject* h) {
  void* p;
  if (!arg_handle(fn, h, &p)) return false;
  auto it = table().find(static_cast<cudaipc_producer*>(p));
  if (it == table().end() || it->second.closing) {
    closed("%s: the producer is closed", fn);
    return false;
  }
  p_ = it->first;
  calls_ = &it->second;
  ++calls_->inside;
  return true;
}

ProducerCall::~ProducerCall() {
  if (calls_) --calls_->inside;
}

bool ProducerCall::closed_meanwhile(const char* fn) const {
  if (!calls_->closing) return false;
  closed("%s: the producer was closed by another thread during the call", fn);
  return true;
}

PyObject* producer_close(const char* fn, PyObject* h) {
  void* raw;
  if (!arg_handle(fn, h, &raw)) return nullptr;
  auto* p = static_cast<cudaipc_producer*>(raw);
  auto it = table().find(p);
  if (it == table().end() || it->second.closing) return closed("%s: the producer is closed", fn);
  ProducerCalls& calls = it->second;
  calls.closing = true;
  while (calls.inside > 0) {
    // Each wake ends a waiting call's wait; the GIL let go so it can leave.
    Py_BEGIN_ALLOW_THREADS cudaipc_producer_interrupt(p);
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    Py_END_ALLOW_THREADS
  }
  table().erase(it);
  // Waits (GIL released) for the copies still in flight.
  Py_BEGIN_ALLOW_THREADS cudaipc_producer_free(p);
  Py_END_ALLOW_THREADS Py_RETURN_NONE;
}

}  // namespace cudaipc_py
