// The package's compiled binding (issue #39): cudaipc's Python API in C over the core's C API
// (cudaipc.h), in the same shared object as the core itself, and the package's only way into the
// core. The per-frame calls are C objects and METH_FASTCALL functions; the rest (setup, formats,
// metas) are functions that check their arguments and build the core's structs in C.
#pragma once

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <chrono>
#include <cstdint>

#include "cudaipc/cudaipc.h"

// What a frame's next, views, release and a served model's reply run: placed together in
// .text.hot, as the core's are (core/src/hot_path.hpp), so that after each wait for a frame the CPU
// refills fewer pages and cache lines of code (issue #39).
#if defined(__GNUC__)
#define CUDAIPC_PY_HOT __attribute__((hot))
#else
#define CUDAIPC_PY_HOT
#endif

// What a frame's path does not run: a call to a cold function is a branch the compiler lays out
// away from that path (in .text.unlikely), so the path's own code stays in fewer cache lines.
#if defined(__GNUC__)
#define CUDAIPC_PY_COLD __attribute__((cold, noinline))
#define CUDAIPC_PY_LIKELY(x) __builtin_expect(!!(x), 1)
#else
#define CUDAIPC_PY_COLD
#define CUDAIPC_PY_LIKELY(x) (x)
#endif

namespace cudaipc_py {

// An owned reference: the binding's RAII for PyObject*.
class Ref {
 public:
  Ref() = default;
  explicit Ref(PyObject* p) : p_(p) {}
  Ref(const Ref&) = delete;
  Ref& operator=(const Ref&) = delete;
  Ref(Ref&& o) noexcept : p_(o.release()) {}
  Ref& operator=(Ref&& o) noexcept {
    reset(o.release());
    return *this;
  }
  ~Ref() { Py_XDECREF(p_); }
  PyObject* get() const { return p_; }
  PyObject* release() {
    PyObject* p = p_;
    p_ = nullptr;
    return p;
  }
  void reset(PyObject* p = nullptr) {
    PyObject* old = p_;
    p_ = p;
    Py_XDECREF(old);
  }
  explicit operator bool() const { return p_ != nullptr; }

 private:
  PyObject* p_ = nullptr;
};

// A frame handed out (Frame's base): the handle and what the frame says, in C.
struct FrameObject {
  PyObject_HEAD cudaipc_frame* h;  // NULL once released
  uint64_t seq, size, pts, dts, duration, publish_time;
  uintptr_t data;
  uint32_t flags, tensor_id;
  int32_t device;  // -1: host memory
  // The stream the frame's slot tensor (torch()) was last handed out on: its release is ordered
  // after that stream's work as well as after the stream it names. 0: none.
  uintptr_t view_stream;
  PyObject* shared;  // the Python _Shared of its format
  PyObject* metas;   // decoded metas, or NULL
  PyObject* weakrefs;
};

// A request of a server (Request's base): its frame, its pipeline and the server.
struct RequestObject {
  PyObject_HEAD PyObject* frame;  // a FrameObject
  uint32_t pipeline;
  PyObject* server;  // a ServerObject
  PyObject* weakrefs;
};

struct ReplyScratch;  // results.cpp

// The server's C side (Server's base): the handle, the batch's views and the reply's scratch.
struct ServerObject {
  PyObject_HEAD cudaipc_server* h;
  cudaipc_request_view* views;  // room for kMaxBatch
  ReplyScratch* scratch;
  PyObject* shared;  // dict: pipeline -> _Shared
  PyObject* dict;    // the Python subclass's attributes
  PyObject* weakrefs;
  // The _Shared the last request matched, with what it was matched on: the next request of that
  // pipeline and format is matched without reading the object's attributes.
  PyObject* last_shared;
  uint32_t last_pipeline;
  uint64_t last_tensor;
  long last_device;
  // Threads inside cudaipc_server_batch (the GIL let go; counted under it): closing waits for
  // them to leave before the handle goes.
  int waiting;
  bool views_taken;  // a call reads into `views` now; another takes a buffer of its own
};

// A timeout in seconds as a double. An int (`timeout=60`) is read as one: PyFloat_AsDouble would
// make a float object of it, every call.
inline double seconds_of(PyObject* timeout) {
  if (PyFloat_CheckExact(timeout)) return PyFloat_AS_DOUBLE(timeout);
  if (PyLong_CheckExact(timeout)) return PyLong_AsDouble(timeout);
  return PyFloat_AsDouble(timeout);
}

// Now on the clock time.monotonic_ns() reads (steady_clock is CLOCK_MONOTONIC on Linux): the
// deadlines the binding computes are compared with the Python side's.
inline int64_t monotonic_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

constexpr uint32_t kMaxBatch = 1024;
constexpr uint64_t kNoTime = ~uint64_t{0};
constexpr uintptr_t kStreamLegacy = 1;  // CU_STREAM_LEGACY

extern PyTypeObject FrameType;
extern PyTypeObject RequestType;
extern PyTypeObject ServerType;
extern PyTypeObject ConsumerType;

// Set by configure(): the Python classes made from the bases, and the package's helpers.
struct Package {
  PyTypeObject* frame = nullptr;        // cudaipc.Frame
  PyTypeObject* request = nullptr;      // cudaipc.Request
  PyObject* from_code = nullptr;        // _errors.from_code(code, message) -> exception
  PyObject* stream_handle = nullptr;    // _cuda.stream_handle(obj) -> int
  PyObject* closed_error = nullptr;     // cudaipc.ClosedError
  PyObject* end_of_stream = nullptr;    // cudaipc.EndOfStream
  PyObject* capsule_failed = nullptr;   // what the core's capsule calls raise
  PyObject* numpy_slot_view = nullptr;  // _consumer._numpy_slot_view(capsule) -> ndarray
};
extern Package package;

// Raises the package's exception for a C API status, with the core's message after `context`.
// Returns NULL for `return fail(...)`.
PyObject* fail(int status, const char* context);
// Raises cudaipc.ClosedError with a message.
PyObject* closed(const char* format, ...);
// A CUstream from a DLPack-style argument: None -> legacy, int (not 0; -1 -> no ordering), or an
// object with cuda_stream/ptr. Returns false with an exception set.
bool stream_of(PyObject* stream, uintptr_t* out, uint32_t* flags);
// A CUevent from an `after=` argument: an int (the raw handle, not 0), a torch.cuda.Event
// (cuda_event) or a cupy.cuda.Event (ptr). Returns false with an exception set.
bool event_of(PyObject* event, uintptr_t* out);

// A frame object of the package's Frame class from a view, sharing `shared`.
PyObject* frame_new(const cudaipc_frame_view& v, PyObject* shared);
// The package's Frame class `type` (configure) ends its objects through the binding's pool of
// spare frame objects, where it adds nothing the generic deallocator ends.
void frame_pool_install(PyTypeObject* type);
// Frees the spare frame objects (the module's end).
void frame_pool_clear();
// consumer.cpp: one cudaipc_consumer_next_frame into `events` (an Events buffer): a Frame sharing
// `shared` when a frame of the description it stands for (tensor_id, device) came, else the call's
// status as an int (the caller reads the event). Lets the GIL go while it waits.
PyObject* read_frame(cudaipc_consumer* c, uint64_t wait, PyObject* events, PyObject* shared,
                     long long tensor_id, long long device);
// frame.release(stream, after) in C (`after`: None, or an event for event_of).
PyObject* frame_release(FrameObject* f, PyObject* stream, PyObject* after = Py_None);
PyObject* frame_dlpack(FrameObject* f, PyObject* stream, uint32_t flags, bool buffer_errors);
PyObject* frame_torch(FrameObject* f, PyObject* stream);
PyObject* frame_cupy(FrameObject* f, PyObject* stream);
PyObject* frame_numpy(FrameObject* f);
PyObject* frame_dlpack_device(FrameObject* f);
// Before the frame's handle goes to the core to be released after `stream`: the reads of its slot
// tensor on another stream are waited for too. False with an exception set.
bool frame_order_views(FrameObject* f, uintptr_t stream);
// Its release, whenever it comes, after `event` (a CUevent from event_of). False with an exception
// set; the frame is kept (its release still follows its views).
bool frame_order_event(FrameObject* f, uintptr_t event);

// open_producers.cpp: the producers open in this process and the calls in each, so a close on
// one thread neither frees the core's producer under a call on another nor lets a stale handle
// reach it (or a new producer at its address). Under the GIL.
// After cudaipc_producer_new: the producer's handle for Python (an id never reused), or NULL with
// MemoryError set.
PyObject* producer_opened(cudaipc_producer* p);
// Frees the producer once the calls in it have left (each waiting one woken, this thread's own
// open frame() aborted), ending its stream first when `eos`; ClosedError when it is not open,
// RuntimeError when calls stay in it.
PyObject* producer_close(const char* fn, PyObject* h, bool eos);
// Until no call is `inside` a closing object: `wake(what)` each millisecond (the GIL let go, so
// the calls it wakes can leave), up to `limit`. False when calls stayed in it that long.
bool wake_until_left(const int& inside, void (*wake)(void*), void* what,
                     std::chrono::milliseconds limit);
// How long a close waits for the calls in its object to leave once woken (a waiting publish or
// next() leaves at once, a frame() written on another thread when that thread commits).
constexpr std::chrono::milliseconds kCloseWait{10'000};
struct ProducerCalls;  // open_producers.cpp
// One call in a producer: enter() checks the handle (ValueError for None or NULL, ClosedError
// when closed) and counts the call in until the object goes.
class ProducerCall {
 public:
  // Borrow::end: the commit or abort of this thread's frame(), let in while the producer closes.
  enum class Borrow { none, end };
  ProducerCall() = default;
  ProducerCall(const ProducerCall&) = delete;
  ProducerCall& operator=(const ProducerCall&) = delete;
  ~ProducerCall();
  bool enter(const char* fn, PyObject* h, Borrow borrow = Borrow::none);
  cudaipc_producer* get() const { return p_; }
  bool closing() const;
  // After a call that let the GIL go: true with ClosedError set when a close came meanwhile.
  bool closed_meanwhile(const char* fn) const;
  // A slot was borrowed (begin): it counts as a call until returned() (commit or abort).
  void borrowed();
  void returned();

 private:
  cudaipc_producer* p_ = nullptr;
  ProducerCalls* calls_ = nullptr;
};

// slot_views.cpp: the frame's slot view for a library (made once per slot, an alias handed out).
bool slot_views_ready();
// What the frames of one format share that the binding reads per frame (cudaipc._consumer._Shared's
// base): each library's slot views, and whether numpy() of a host frame is its slot's view. Read
// as fields, not attributes: two attribute reads cost a host frame's numpy() ~25 cache lines after
// each wait for a frame on the GPU machine's CPU (issue #39).
struct SharedObject {
  PyObject_HEAD PyObject* views;  // torch's SlotViews, or None/NULL before the first
  PyObject* cupy_views;
  PyObject* numpy_views;
  char host_dlpack;
};
extern PyTypeObject SharedType;
// `o` as a SharedObject; nullptr with TypeError set when it is none.
SharedObject* as_shared(PyObject* o);
struct ViewMaker {
  PyObject* SharedObject::*field;  // where the _Shared keeps its views
  PyObject* alias;                 // the method that makes an alias of a view (torch's detach)
  // Whether an alias nobody holds any more is handed out again while its layout is still the
  // slot's: never (torch: more of a tensor changes in place than a check could read), checked
  // through NumPy's C layout, flags too, or through cupy's fields; through the view's shape,
  // strides and dtype attributes where those were not found.
  enum class Reuse { never, numpy_layout, cupy_layout } reuse;
  // The view of a slot from its slot-view capsule (a new reference; NULL with an exception set).
  PyObject* (*make)(PyObject* capsule, int device);
  // The library's current CUstream on a device (the default for the frame's reads); false with an
  // exception set.
  bool (*current)(int device, uintptr_t* out);
};
PyObject* slot_view(FrameObject* f, const ViewMaker& maker);

// results.cpp: a reply's results in C. Returns 1 when answered (or an exception set: -1), 0 when
// the results are not of the forms the binding takes (the Python path answers them).
int reply_fast(ServerObject* s, RequestObject* r, PyObject* stream, PyObject* after,
               PyObject* detections, PyObject* meta, PyObject* label_names, bool* sent);
void scratch_free(ReplyScratch* s);
// How many NumPy result arrays replies read from their heads rather than their buffers.
long numpy_arrays_read_in_place();

// Arguments of the module's functions, checked before any reaches the core: each returns false
// with TypeError or ValueError set, naming the function and the argument. A handle is a nonzero
// int; an address an int or None (NULL); a time an int or None (CUDAIPC_NO_TIME).
bool arity(const char* fn, Py_ssize_t nargs, Py_ssize_t want);
// An interned name kept in `slot` from its first use; made again on a later call if making it
// failed (the exception is then set and nullptr returned).
inline PyObject* interned(PyObject*& slot, const char* text) {
  if (!slot) slot = PyUnicode_InternFromString(text);
  return slot;
}
// Whether the str `key` is `name`. Keyword names and dict keys are ASCII almost always: compared
// in place, most mismatches at their first byte (PyUnicode_CompareWithASCIIString and its
// strlen were a tenth of a served reply's instructions, issue #39).
inline bool key_is(PyObject* key, const char* name) {
  if (PyUnicode_IS_COMPACT_ASCII(key)) {
    const char* text = static_cast<const char*>(PyUnicode_DATA(key));
    const Py_ssize_t n = PyUnicode_GET_LENGTH(key);
    // name[i] is read only while name[0..i) matched and was not its end.
    for (Py_ssize_t i = 0; i < n; ++i)
      if (!name[i] || name[i] != text[i]) return false;
    return name[n] == '\0';
  }
  return PyUnicode_CompareWithASCIIString(key, name) == 0;
}
// The index of the str `key` among `names` (`count` of them), -1 for none. Keyword names at a
// call site and dict keys written as literals are interned strs: matched by address against
// `cache` (each name interned on its first match by text) before any text is compared.
inline int name_index(PyObject* key, const char* const* names, PyObject** cache, int count) {
  for (int i = 0; i < count; ++i)
    if (key == cache[i]) return i;
  for (int i = 0; i < count; ++i) {
    if (key_is(key, names[i])) {
      if (!interned(cache[i], names[i])) PyErr_Clear();  // matched by text until it is made
      return i;
    }
  }
  return -1;
}
// A FASTCALL method's arguments, positional then by keyword, into `out` (Py_None where absent).
bool parse(const char* what, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames,
           const char* const* names, PyObject** out, Py_ssize_t count);
bool arg_int(const char* fn, const char* name, PyObject* o, long long lo, long long hi,
             long long* out);
bool arg_u64(const char* fn, const char* name, PyObject* o, uint64_t* out);
bool arg_time(const char* fn, const char* name, PyObject* o, uint64_t* out);
bool arg_address(const char* fn, const char* name, PyObject* o, void** out);
bool arg_handle(const char* fn, PyObject* o, void** out);
template <class T>
bool arg_handle(const char* fn, PyObject* o, T** out) {
  void* p;
  if (!arg_handle(fn, o, &p)) return false;
  *out = static_cast<T*>(p);
  return true;
}
// UTF-8 of a str argument, valid while `o` lives; NULL with an exception set.
const char* arg_str(const char* fn, const char* name, PyObject* o);
// fail() with a context given as a Python str (or None): made into C text only on failure.
PyObject* fail_in(int status, PyObject* context);
// The package's exception for a failed capsule call (the core set CapsuleFailed); BufferError for
// an argument DLPack cannot take when `buffer_errors`. Returns NULL.
PyObject* capsule_error(bool buffer_errors);
// A tensor description as Python values: (dtype code, shape tuple, byte strides tuple).
PyObject* tensor_tuple(const cudaipc_tensor& t);

// The module's functions, one table per file, added to the module at its init.
extern PyMethodDef producer_functions[];
extern PyMethodDef channel_setup_functions[];
extern PyMethodDef consumer_functions[];
extern PyMethodDef server_admin_functions[];
extern PyMethodDef metas_functions[];
extern PyMethodDef metas_args_functions[];
extern PyMethodDef wrapped_functions[];
extern PyMethodDef gst_results_functions[];
extern PyTypeObject EventsType;
extern PyTypeObject MetasWriterType;
extern PyTypeObject DetectionsArgsType;
extern PyTypeObject AnalyticsArgsType;
extern PyTypeObject ReplyBatchType;
// metas.cpp: a MetasWriter's writer, NULL for another object.
cudaipc_metas_writer* writer_of(PyObject* o);
// metas_args.cpp: MetasWriter.analytics(name, args), the status of the add.
PyObject* writer_analytics(PyObject* self, PyObject* const* args, Py_ssize_t nargs);

#define CUDAIPC_FASTCALL(f) reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(f))

// torch's functions the binding calls, looked up once torch is imported.
struct Torch {
  PyObject* module = nullptr;
  PyObject* from_dlpack = nullptr;  // torch._C._from_dlpack
  PyObject* to_dlpack = nullptr;    // torch._C._to_dlpack
  PyObject* raw_stream = nullptr;   // torch._C._cuda_getCurrentRawStream
  PyObject* get_device = nullptr;   // torch._C._cuda_getDevice
  PyObject* tensor_type = nullptr;  // torch.Tensor
};
// torch's functions, or NULL when torch is not imported (import_it: import it then).
const Torch* torch_api(bool import_it);

// cupy's, looked up (cupy imported) at the first frame.cupy().
struct CuPy {
  PyObject* current_stream = nullptr;  // cupy.cuda.get_current_stream
  PyObject* slot_view = nullptr;       // cudaipc._consumer._cupy_slot_view(capsule, device)
  // cupy_backends.cuda.stream's C function get_stream_ptr(device), the pointer its kernels
  // launch on, where that module exports it with the expected signature (else null: the
  // current_stream call above, a Python call and an attribute read each frame.cupy()).
  intptr_t (*stream_ptr)(int) = nullptr;
};
// NULL with ImportError set when cupy is not installed.
const CuPy* cupy_api();

}  // namespace cudaipc_py
