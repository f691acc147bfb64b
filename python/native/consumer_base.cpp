// Consumer's base: the handle, the reading turn and next() for a frame of the known description,
// in C (issue #39). On the GPU machine's CPU the Python method around the binding's call cost
// 5-7 µs a frame (its frame, the lock's calls, the attribute reads, all cold after the wait for
// the frame), more than the C++ consumer's whole next -> release. Everything else a read meets (a
// format, a timeout, the end of stream, an error) is the Python subclass's _next_slow.
#include <algorithm>
#include <climits>

#include "native.hpp"

#include <pythread.h>
#include <structmember.h>

namespace cudaipc_py {

namespace {

// How long one wait of next() lasts before it looks at its deadline and signals again: the
// Python path's slice (_SLICE_NS).
constexpr int64_t kSliceNs = 200'000'000;

struct ConsumerObject {
  PyObject_HEAD PyObject* handle;  // `_h`: the handle as an int, None when closed
  cudaipc_consumer* c;             // the same, NULL when closed
  PyObject* timeout;               // `timeout`: the default of next(), seconds or None
  PyObject* events;                // `_events`: the Events buffer next() reads into
  PyObject* shared;                // `_shared`: the _Shared of the frames of the last description
  long long tensor_id, device;     // what `shared` was made for (-1, -1: nothing yet)
  PyObject* dict;
  PyObject* weakrefs;
  // The reading turn: one thread at a time in the core's consumer. Re-entrant, because a callback
  // of next() (on_format) may close the consumer, which takes the turn too. Its owner, depth,
  // waiters and ring are read and written under the GIL only, so a turn free for the taking costs
  // no lock call (the lock's calls cost next() ~25 cache lines after each wait for a frame on the
  // GPU machine's CPU, issue #39); `doorbell` is where a thread that found it taken waits, with the
  // GIL let go, for the owner to give it back.
  PyThread_type_lock doorbell;  // held but while rung: its release wakes one waiter
  unsigned long owner;          // the thread holding the turn, 0: none
  long depth;
  long waiters;  // threads waiting for the turn
  bool rung;     // the doorbell was released for them and none has taken it since
};

ConsumerObject* as_consumer(PyObject* o) {
  return reinterpret_cast<ConsumerObject*>(o);
}

// `seconds` (not negative) after `now`; what outlasts the clock is no deadline's reach.
int64_t deadline_after(int64_t now, double seconds) {
  const double ns = seconds * 1e9;
  return ns < double(INT64_MAX / 2) ? now + int64_t(ns) : INT64_MAX / 2;
}

PyObject* consumer_new(PyTypeObject* type, PyObject*, PyObject*) {
  PyObject* o = type->tp_alloc(type, 0);
  if (!o) return nullptr;
  ConsumerObject* c = as_consumer(o);
  c->doorbell = PyThread_allocate_lock();
  if (!c->doorbell) {
    Py_DECREF(o);
    return PyErr_NoMemory();
  }
  PyThread_acquire_lock(c->doorbell, WAIT_LOCK);  // a new lock: taken at once
  c->handle = Py_NewRef(Py_None);
  c->timeout = Py_NewRef(Py_None);
  c->tensor_id = c->device = -1;
  return o;
}

int consumer_traverse(PyObject* o, visitproc visit, void* arg) {
  ConsumerObject* c = as_consumer(o);
  Py_VISIT(c->handle);
  Py_VISIT(c->timeout);
  Py_VISIT(c->events);
  Py_VISIT(c->shared);
  Py_VISIT(c->dict);
  return 0;
}

int consumer_clear(PyObject* o) {
  ConsumerObject* c = as_consumer(o);
  Py_CLEAR(c->handle);
  c->c = nullptr;
  Py_CLEAR(c->timeout);
  Py_CLEAR(c->events);
  Py_CLEAR(c->shared);
  Py_CLEAR(c->dict);
  return 0;
}

void consumer_dealloc(PyObject* o) {
  ConsumerObject* c = as_consumer(o);
  PyObject_GC_UnTrack(o);
  // The handle is the subclass's to free (its __del__, which ran before this).
  if (c->weakrefs) PyObject_ClearWeakRefs(o);
  consumer_clear(o);
  if (c->doorbell) PyThread_free_lock(c->doorbell);
  c->doorbell = nullptr;
  Py_TYPE(o)->tp_free(o);
}

// Wakes one thread waiting for the turn, unless none waits or one was woken and has not taken it.
void ring(ConsumerObject* c) {
  if (c->waiters > 0 && !c->rung) {
    c->rung = true;
    PyThread_release_lock(c->doorbell);
  }
}

// 1: the turn is this thread's at once, 2: after a wait for it; 0: not before `deadline` (-1: no
// deadline; a deadline already past tries once); -1: a signal handler raised meanwhile.
// A free turn nobody waits for is taken at once. Otherwise the thread waits its turn on the
// doorbell: one that gives the turn back and asks again right away (a loop of next() calls) then
// queues behind the waiters, as it did behind the lock's, instead of taking the turn back before
// a woken waiter gets the GIL.
CUDAIPC_PY_HOT int take_turn(ConsumerObject* c, int64_t deadline) {
  const unsigned long me = PyThread_get_thread_ident();
  if (c->owner == me) {
    ++c->depth;
    return 1;
  }
  if (c->owner == 0 && c->waiters == 0) {
    c->owner = me;
    c->depth = 1;
    return 1;
  }
  ++c->waiters;
  int result = 0;
  for (;;) {
    int64_t left = kSliceNs;
    if (deadline >= 0) left = std::min(left, deadline - monotonic_ns());
    PyLockStatus got;
    if (left <= 0) {
      got = PyThread_acquire_lock(c->doorbell, NOWAIT_LOCK) ? PY_LOCK_ACQUIRED : PY_LOCK_FAILURE;
    } else {
      // A signal ends the wait (PY_LOCK_INTR), for its handler to run now.
      Py_BEGIN_ALLOW_THREADS got = PyThread_acquire_lock_timed(c->doorbell, left / 1000 + 1, 1);
      Py_END_ALLOW_THREADS
    }
    if (got == PY_LOCK_ACQUIRED) {
      c->rung = false;  // held again, for the next waiter to wait on
      // Nobody takes a free turn while this thread waits, but a ring left by a waiter that gave
      // up may come while another thread holds it.
      if (c->owner == 0) {
        result = 2;
        break;
      }
    }
    if (left <= 0) break;
    if (got == PY_LOCK_INTR && PyErr_CheckSignals() < 0) {
      result = -1;
      break;
    }
  }
  --c->waiters;
  if (result == 2) {
    c->owner = me;
    c->depth = 1;
  } else if (c->owner == 0) {
    ring(c);  // the ring this thread may have been given passes on to the next waiter
  }
  return result;
}

// Gives back thread `me`'s hold on the turn (a thread that does not hold it gives nothing), and
// wakes a thread waiting for it.
CUDAIPC_PY_HOT inline void give_turn_of(ConsumerObject* c, unsigned long me) {
  if (c->owner != me) return;
  if (--c->depth == 0) {
    c->owner = 0;
    ring(c);
  }
}

// The calling thread's.
CUDAIPC_PY_HOT void give_turn(ConsumerObject* c) {
  give_turn_of(c, PyThread_get_thread_ident());
}

// _h: the handle (an int) while open, None once closed.
PyObject* get_h(PyObject* o, void*) {
  PyObject* h = as_consumer(o)->handle;
  return Py_NewRef(h ? h : Py_None);
}

int set_h(PyObject* o, PyObject* value, void*) {
  ConsumerObject* c = as_consumer(o);
  if (!value) value = Py_None;
  cudaipc_consumer* p = nullptr;
  if (value != Py_None && !arg_handle("Consumer._h", value, &p)) return -1;
  Py_XSETREF(c->handle, Py_NewRef(value));
  c->c = p;
  return 0;
}

// _shared: the _Shared of the frames of one description; its tensor_id and device_id are read
// here, once, for next() to match each frame against.
PyObject* get_shared(PyObject* o, void*) {
  ConsumerObject* c = as_consumer(o);
  return Py_NewRef(c->shared ? c->shared : Py_None);
}

int set_shared(PyObject* o, PyObject* value, void*) {
  ConsumerObject* c = as_consumer(o);
  long long tensor_id = -1, device = -1;
  if (value && value != Py_None) {
    Ref t(PyObject_GetAttrString(value, "tensor_id"));
    Ref d(t ? PyObject_GetAttrString(value, "device_id") : nullptr);
    if (!d) return -1;
    tensor_id = PyLong_AsLongLong(t.get());
    device = PyLong_AsLongLong(d.get());
    if (PyErr_Occurred()) return -1;
  }
  Py_XSETREF(c->shared, value && value != Py_None ? Py_NewRef(value) : nullptr);
  c->tensor_id = tensor_id;
  c->device = device;
  return 0;
}

PyGetSetDef consumer_getset[] = {
    {"_h", get_h, set_h, "the handle while open, None once closed", nullptr},
    {"_shared", get_shared, set_shared, "the _Shared of the last frames' description", nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr}};

PyMemberDef consumer_members[] = {
    {"timeout", T_OBJECT, offsetof(ConsumerObject, timeout), 0,
     "next()'s default timeout in seconds (None: wait for ever)"},
    {"_events", T_OBJECT, offsetof(ConsumerObject, events), 0, "the Events buffer of next()"},
    {nullptr, 0, 0, 0, nullptr}};

// Raises what the Python side says for `why` ("closed", "invalid", "busy") and `timeout`.
PyObject* refuse(PyObject* self, const char* why, PyObject* timeout) {
  return PyObject_CallMethod(self, "_next_refused", "sO", why, timeout);
}

// next() with what its fast path leaves: a timeout, the turn taken or to wait for, a consumer
// closed or not set up, anything but a frame of the description known.
CUDAIPC_PY_COLD PyObject* next_not_frame(PyObject* self, PyObject* rc, PyObject* timeout,
                                         int64_t deadline);

CUDAIPC_PY_COLD PyObject* next_slow(PyObject* self, PyObject* timeout) {
  ConsumerObject* c = as_consumer(self);
  Ref hold_timeout(Py_NewRef(timeout));  // `timeout` may be set to another object meanwhile
  if (!c->c) return refuse(self, "closed", timeout);
  int64_t deadline = -1, wait = kSliceNs;
  if (timeout != Py_None) {
    const double seconds = seconds_of(timeout);
    if (seconds == -1 && PyErr_Occurred()) return nullptr;
    if (!(seconds >= 0)) return refuse(self, "invalid", timeout);  // negative or NaN
    const int64_t now = monotonic_ns();
    deadline = deadline_after(now, seconds);
    wait = std::min(kSliceNs, deadline - now);
  }
  const int took = take_turn(c, deadline);
  if (took < 0) return nullptr;
  if (took == 0) return refuse(self, "busy", timeout);
  PyObject* got = nullptr;
  if (!c->c) {  // closed by another thread while this one waited its turn
    got = refuse(self, "closed", timeout);
  } else if (!c->events || Py_TYPE(c->events) != &EventsType || !c->shared) {
    PyErr_SetString(PyExc_TypeError, "Consumer.next: _events or _shared is not set up");
  } else {
    // Held for the read, which lets the GIL go: another thread may set either meanwhile.
    Ref events(Py_NewRef(c->events)), shared(Py_NewRef(c->shared));
    // A wait for the turn came out of this call's time.
    if (took == 2 && deadline >= 0)
      wait = std::max<int64_t>(0, std::min(kSliceNs, deadline - monotonic_ns()));
    got = read_frame(c->c, uint64_t(wait), events.get(), shared.get(), c->tensor_id, c->device);
    if (got && PyLong_CheckExact(got)) got = next_not_frame(self, got, timeout, deadline);
  }
  give_turn(c);
  return got;
}

// Anything but a frame of the description known: the Python side (_next_slow), still on this
// thread's turn, from the read's status `rc` (taken).
CUDAIPC_PY_COLD PyObject* next_not_frame(PyObject* self, PyObject* rc, PyObject* timeout,
                                         int64_t deadline) {
  static PyObject* slow;
  Ref status(rc);
  Ref when(deadline < 0 ? Py_NewRef(Py_None) : PyLong_FromLongLong(deadline));
  if (!when || !interned(slow, "_next_slow")) return nullptr;
  return PyObject_CallMethodObjArgs(self, slow, rc, timeout, when.get(), nullptr);
}

CUDAIPC_PY_COLD PyObject* next_with_args(PyObject* self, PyObject* const* args, Py_ssize_t nargs,
                                         PyObject* kw) {
  static const char* const names[] = {"timeout"};
  PyObject* timeout;
  if (!parse("next", args, nargs, kw, names, &timeout, 1)) return nullptr;
  ConsumerObject* c = as_consumer(self);
  if (timeout == Py_None && c->timeout) timeout = c->timeout;
  return next_slow(self, timeout);
}

// next(timeout=None): see Consumer.next's docstring (cudaipc/_consumer.py). The call a loop makes
// (the consumer's own timeout, a free turn, a frame of the description known) runs here alone,
// straight through: spread over the whole of next's cases, it touched 12 cache lines of code after
// each wait for a frame (issue #39).
CUDAIPC_PY_HOT PyObject* m_next(PyObject* self, PyObject* const* args, Py_ssize_t nargs,
                                PyObject* kw) {
  if (nargs || kw) return next_with_args(self, args, nargs, kw);
  ConsumerObject* c = as_consumer(self);
  PyObject* timeout = c->timeout ? c->timeout : Py_None;
  PyObject* events = c->events;
  PyObject* shared = c->shared;
  if (!CUDAIPC_PY_LIKELY(c->c && c->owner == 0 && c->waiters == 0 && events &&
                         Py_TYPE(events) == &EventsType && shared))
    return next_slow(self, timeout);
  int64_t deadline = -1, wait = kSliceNs;
  if (timeout != Py_None) {
    // A float, or an int a long holds: else what next_slow says of it.
    double seconds = -1;
    int overflow = 0;
    if (PyFloat_CheckExact(timeout)) {
      seconds = PyFloat_AS_DOUBLE(timeout);
    } else if (PyLong_CheckExact(timeout)) {
      const long whole = PyLong_AsLongAndOverflow(timeout, &overflow);
      if (!overflow) seconds = double(whole);
    }
    if (!CUDAIPC_PY_LIKELY(seconds >= 0)) return next_slow(self, timeout);
    const int64_t now = monotonic_ns();
    deadline = deadline_after(now, seconds);
    wait = std::min(kSliceNs, deadline - now);
  }
  const unsigned long me = PyThread_get_thread_ident();
  c->owner = me;
  c->depth = 1;
  // Held for the read, which lets the GIL go: another thread may set any of them meanwhile.
  Py_INCREF(timeout);
  Py_INCREF(events);
  Py_INCREF(shared);
  PyObject* got = read_frame(c->c, uint64_t(wait), events, shared, c->tensor_id, c->device);
  Py_DECREF(events);
  Py_DECREF(shared);
  if (!CUDAIPC_PY_LIKELY(got && !PyLong_CheckExact(got)))
    got = got ? next_not_frame(self, got, timeout, deadline) : nullptr;
  Py_DECREF(timeout);
  // This thread's turn since it took it above (nobody takes a held turn), unless a callback of
  // next_not_frame gave it back once too often (then nothing to give).
  give_turn_of(c, me);
  return got;
}

// Iterating: next() until the end of stream or close() (from another thread too), which end the
// loop instead of raising, as a server's loop ends (the Python generator it was resumed once a
// frame).
PyObject* consumer_iternext(PyObject* self) {
  PyObject* got = m_next(self, nullptr, 0, nullptr);
  if (got) return got;
  const bool ended = package.end_of_stream && PyErr_ExceptionMatches(package.end_of_stream);
  const bool closed =
      !as_consumer(self)->c && package.closed_error && PyErr_ExceptionMatches(package.closed_error);
  if (ended || closed) PyErr_Clear();
  return nullptr;
}

// _take_turn(timeout): True once this thread holds the reading turn, False when another held it
// for `timeout` seconds (None: wait for ever).
PyObject* m_take_turn(PyObject* self, PyObject* timeout) {
  int64_t deadline = -1;
  if (timeout != Py_None) {
    const double seconds = seconds_of(timeout);
    if (seconds == -1 && PyErr_Occurred()) return nullptr;
    deadline = deadline_after(monotonic_ns(), std::max(0.0, seconds));
  }
  const int took = take_turn(as_consumer(self), deadline);
  if (took < 0) return nullptr;
  return PyBool_FromLong(took > 0);
}

PyObject* m_give_turn(PyObject* self, PyObject*) {
  ConsumerObject* c = as_consumer(self);
  if (c->owner != PyThread_get_thread_ident()) {
    PyErr_SetString(PyExc_RuntimeError, "_give_turn: this thread does not hold the reading turn");
    return nullptr;
  }
  give_turn(c);
  Py_RETURN_NONE;
}

PyMethodDef consumer_methods[] = {
    {"next", CUDAIPC_FASTCALL(m_next), METH_FASTCALL | METH_KEYWORDS,
     "next($self, /, timeout=None)\n--\n\nThe next frame. `timeout` in seconds (default: the "
     "consumer's; None "
     "waits for ever). Raises cudaipc.TimeoutError when nothing came, cudaipc.EndOfStream at the "
     "end of the stream, cudaipc.ConnectionError when the producer went away and reconnect is "
     "off, cudaipc.InterruptedError after interrupt().\n\nWhile this consumer holds "
     "num_slots - 1 frames (see `held`), it waits for one of them to be released; a timeout "
     "then says which frames are held, and a wait without timeout warns (RuntimeWarning) after "
     "10 s."},
    {"_take_turn", m_take_turn, METH_O,
     "_take_turn(timeout): takes the reading turn (re-entrant); False when not within timeout"},
    {"_give_turn", m_give_turn, METH_NOARGS, "_give_turn(): gives the reading turn back"},
    {nullptr, nullptr, 0, nullptr}};

}  // namespace

PyTypeObject ConsumerType = [] {
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
  // CPython's static type head; every other slot is zero until set below.
  PyTypeObject t{PyVarObject_HEAD_INIT(nullptr, 0)};
#pragma GCC diagnostic pop
  t.tp_name = "cudaipc._native.Consumer";
  t.tp_basicsize = sizeof(ConsumerObject);
  t.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC;
  t.tp_doc = "A consumer's handle, reading turn and next() (cudaipc.Consumer's base)";
  t.tp_new = consumer_new;
  t.tp_traverse = consumer_traverse;
  t.tp_clear = consumer_clear;
  t.tp_dealloc = consumer_dealloc;
  t.tp_dictoffset = offsetof(ConsumerObject, dict);
  t.tp_weaklistoffset = offsetof(ConsumerObject, weakrefs);
  t.tp_methods = consumer_methods;
  t.tp_members = consumer_members;
  t.tp_getset = consumer_getset;
  t.tp_iter = PyObject_SelfIter;
  t.tp_iternext = consumer_iternext;
  return t;
}();

}  // namespace cudaipc_py
