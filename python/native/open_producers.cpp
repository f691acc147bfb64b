// The producers this process has open, and the calls in each. Publishers may share one producer
// across threads: a close() on one thread must not free the core's producer under a publish()
// that waits for a slot on another (a crash now and then), nor let a call made with a handle read
// just before the close reach the freed producer, or a new producer the allocator put at the same
// address. So the Python side holds an id, never reused, not the pointer; every call looks its id
// up here and counts itself in, and a slot borrowed by frame() counts as a call until it is
// committed or aborted. The free marks the producer closing, wakes its waiting calls and waits
// for them to leave. All of it runs under the GIL, which is what serialises the table.
#include <chrono>
#include <cstdint>
#include <thread>
#include <unordered_map>

#include "native.hpp"

namespace cudaipc_py {

struct ProducerCalls {
  cudaipc_producer* p = nullptr;
  int inside = 0;
  bool closing = false;
  unsigned long borrower = 0;  // the thread whose frame() holds the borrowed slot; 0: none
};

namespace {

// Node-based: an entry stays where it is while others come and go, so a call keeps a pointer to
// its own across the GIL's release.
std::unordered_map<uintptr_t, ProducerCalls>& table() {
  static std::unordered_map<uintptr_t, ProducerCalls> t;
  return t;
}

ProducerCalls* find(const char* fn, PyObject* h, uintptr_t* id) {
  void* raw;
  if (!arg_handle(fn, h, &raw)) return nullptr;
  *id = reinterpret_cast<uintptr_t>(raw);
  auto it = table().find(*id);
  if (it == table().end()) {
    closed("%s: the producer is closed", fn);
    return nullptr;
  }
  return &it->second;
}

void end_borrow(ProducerCalls* c) {
  c->borrower = 0;
  --c->inside;
}

}  // namespace

bool wake_until_left(const int& inside, void (*wake)(void*), void* what,
                     std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (inside > 0) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    Py_BEGIN_ALLOW_THREADS wake(what);
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    Py_END_ALLOW_THREADS
  }
  return true;
}

PyObject* producer_opened(cudaipc_producer* p) {
  static uintptr_t last;
  try {
    const uintptr_t id = ++last;
    table().emplace(id, ProducerCalls{p, 0, false, 0});
    return PyLong_FromVoidPtr(reinterpret_cast<void*>(id));
  } catch (const std::bad_alloc&) {
    return PyErr_NoMemory();
  }
}

bool ProducerCall::enter(const char* fn, PyObject* h, Borrow borrow) {
  uintptr_t id;
  ProducerCalls* c = find(fn, h, &id);
  if (!c) return false;
  if (c->closing && !(borrow == Borrow::end && c->borrower == PyThread_get_thread_ident())) {
    closed("%s: the producer is closed", fn);
    return false;
  }
  p_ = c->p;
  calls_ = c;
  ++calls_->inside;
  return true;
}

ProducerCall::~ProducerCall() {
  if (calls_) --calls_->inside;
}

bool ProducerCall::closing() const {
  return calls_->closing;
}

bool ProducerCall::closed_meanwhile(const char* fn) const {
  if (!calls_->closing) return false;
  closed("%s: the producer was closed by another thread during the call", fn);
  return true;
}

void ProducerCall::borrowed() {
  calls_->borrower = PyThread_get_thread_ident();
  ++calls_->inside;  // until the commit or the abort
}

void ProducerCall::returned() {
  if (calls_->borrower) end_borrow(calls_);
}

PyObject* producer_close(const char* fn, PyObject* h, bool eos) {
  uintptr_t id;
  ProducerCalls* c = find(fn, h, &id);
  if (!c) return nullptr;
  if (c->closing) return closed("%s: the producer is closed", fn);
  cudaipc_producer* p = c->p;
  c->closing = true;
  if (c->borrower == PyThread_get_thread_ident()) {
    // This thread's own frame() is open (a close inside its `with`): nobody writes it now.
    cudaipc_producer_abort(p);
    end_borrow(c);
  }
  const auto wake = [](void* what) {
    cudaipc_producer_interrupt(static_cast<cudaipc_producer*>(what));
  };
  if (!wake_until_left(c->inside, wake, p, kCloseWait)) {
    // Left closing and not freed (a leak, not a crash): a call that never leaves is most likely
    // this very thread's, a close from inside one of the producer's own calls.
    PyErr_Format(PyExc_RuntimeError,
                 "%s: %d call(s) still in the producer after %lld s (a frame() open on another "
                 "thread, or a close from inside one of the producer's own calls); it is closed "
                 "but not freed",
                 fn, c->inside, static_cast<long long>(kCloseWait.count() / 1000));
    return nullptr;
  }
  table().erase(id);
  // The end of stream after the last frame any call published; the free waits (GIL released) for
  // the copies still in flight. A failed end of stream changes nothing: the producer goes anyway,
  // and its consumers see it go.
  Py_BEGIN_ALLOW_THREADS if (eos) cudaipc_producer_end_of_stream(p);
  cudaipc_producer_free(p);
  Py_END_ALLOW_THREADS Py_RETURN_NONE;
}

}  // namespace cudaipc_py
