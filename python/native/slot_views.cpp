// The torch tensors and cupy arrays of a format's slots (issue #39): a slot's memory does not move
// while its set is mapped, so its view is made once (a slot view: no lease, the set kept mapped)
// and handed out for every frame the slot carries. A frame's tensor is then an alias of its slot's,
// not an export per frame: no capsule, no tensor made and freed, no release ordered from a deleter.
// A cupy or NumPy alias that nobody holds any more is handed out again (no array made per frame:
// 3-5 us of the GPU machine's CPU right after the wait for a frame, issue #39).
#include <algorithm>
#include <cstring>

#include "native.hpp"
#include "numpy_head.hpp"

#include <structmember.h>

namespace cudaipc_py {

namespace {

// One per _Shared (a format's tensor description) and library, in its `views` (torch) or
// `cupy_views` attribute: the views of the newest slot set it met. A frame of another set (a
// reconnection, new slots) drops them, so an old set is not kept mapped by its views. What an
// alias handed out again is checked against comes first, and a slot's view lies beside its alias:
// the check reads two lines of this object, not six, and not the slot's view (issue #39).
struct SlotViewsObject {
  PyObject_HEAD const void* set;
  // NumPy and cupy views: their type once its C layout agreed with their attributes (NumpyHead;
  // cupy's fields, found at `shape_at` and `dtype_at`), and the slot's layout as that reads it;
  // nullptr where the attributes are read instead.
  PyTypeObject* raw_type;
  // What a slot's view looked like when made: an alias whose shape, strides or dtype differ was
  // changed in place.
  PyObject* dtype;
  int nd;
  int flags;
  Py_ssize_t shape_at;  // cupy: where `_shape` is, `_strides` right after it (0: NumPy's head)
  Py_ssize_t dtype_at;
  Py_ssize_t sizes[2 * CUDAIPC_MAX_RANK];  // the `nd` dims, then the `nd` strides in bytes
  PyObject* shape;
  PyObject* strides;
  // Per slot its view, and the alias last handed out, kept where the maker reuses them, with
  // (NumPy) the first byte it views, which it must still view.
  struct {
    PyObject* view;
    PyObject* lent;
    const char* data;
  } slots[CUDAIPC_MAX_SLOTS];
};

// A C++ std::vector<Py_ssize_t> as a release build of the standard library lays it out, which
// cupy's ndarray holds its shape and strides in (`_shape`, `_strides`: cupy/_core/core.pxd, Cython
// fields in declared order: `__weakref__`, `size`, `_shape`, `_strides`, ..., `dtype`). cupy's
// shape and strides getters build a tuple each per call and run its code, cold after every wait
// for a frame; these are read in place instead, where a slot's first view shows them right after
// its weak-reference list and holding its attributes' values (cupy_raw_layout); else the
// attributes are read.
struct VectorHead {
  uintptr_t begin;
  uintptr_t end;
  uintptr_t capacity_end;
};

SlotViewsObject* as_views(PyObject* o) {
  return reinterpret_cast<SlotViewsObject*>(o);
}

int views_traverse(PyObject* o, visitproc visit, void* arg) {
  SlotViewsObject* v = as_views(o);
  for (auto& slot : v->slots) {
    Py_VISIT(slot.view);
    Py_VISIT(slot.lent);
  }
  Py_VISIT(v->shape);
  Py_VISIT(v->strides);
  Py_VISIT(v->dtype);
  return 0;
}

int views_clear(PyObject* o) {
  SlotViewsObject* v = as_views(o);
  for (auto& slot : v->slots) {
    Py_CLEAR(slot.view);
    Py_CLEAR(slot.lent);
    slot.data = nullptr;
  }
  Py_CLEAR(v->shape);
  Py_CLEAR(v->strides);
  Py_CLEAR(v->dtype);
  v->raw_type = nullptr;
  v->shape_at = v->dtype_at = 0;
  return 0;
}

void views_dealloc(PyObject* o) {
  PyObject_GC_UnTrack(o);
  views_clear(o);
  Py_TYPE(o)->tp_free(o);
}

PyObject* views_count(PyObject* o, void*) {
  long n = 0;
  for (const auto& slot : as_views(o)->slots) n += slot.view != nullptr;
  return PyLong_FromLong(n);
}

PyObject* views_c_layout(PyObject* o, void*) {
  return PyBool_FromLong(as_views(o)->raw_type != nullptr);
}

PyGetSetDef views_getset[] = {
    {"count", views_count, nullptr, "slots whose tensor is made", nullptr},
    {"c_layout", views_c_layout, nullptr,
     "whether the reuse check reads the arrays' C layout (NumPy's head, cupy's fields) rather "
     "than their attributes",
     nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr}};

PyTypeObject SlotViewsType = [] {
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
  PyTypeObject t{PyVarObject_HEAD_INIT(nullptr, 0)};
#pragma GCC diagnostic pop
  t.tp_name = "cudaipc._native.SlotViews";
  t.tp_basicsize = sizeof(SlotViewsObject);
  t.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC;
  t.tp_doc = "The torch tensors or cupy arrays of a format's slots, made once per slot";
  t.tp_traverse = views_traverse;
  t.tp_clear = views_clear;
  t.tp_dealloc = views_dealloc;
  t.tp_getset = views_getset;
  t.tp_alloc = PyType_GenericAlloc;  // zeroed: no set, no tensor
  return t;
}();

// The cache of `shared` in its `field` (one per library), made on first use.
CUDAIPC_PY_HOT SlotViewsObject* views_of(PyObject* shared, PyObject* SharedObject::*field) {
  SharedObject* s = as_shared(shared);
  if (!s) return nullptr;
  PyObject* v = s->*field;
  if (v && Py_TYPE(v) == &SlotViewsType) return as_views(v);  // shared keeps it alive
  if (v && v != Py_None) {
    PyErr_SetString(PyExc_TypeError, "a format's slot views are not a SlotViews");
    return nullptr;
  }
  PyObject* made = PyType_GenericAlloc(&SlotViewsType, 0);
  if (!made) return nullptr;
  Py_XSETREF(s->*field, made);
  return as_views(made);
}

// What a view's shape, strides and dtype are now (new references; false with an exception set).
bool layout_of(PyObject* view, PyObject** shape, PyObject** strides, PyObject** dtype) {
  static PyObject *shape_name, *strides_name, *dtype_name;
  if (!interned(shape_name, "shape") || !interned(strides_name, "strides") ||
      !interned(dtype_name, "dtype"))
    return false;
  *shape = PyObject_GetAttr(view, shape_name);
  *strides = *shape ? PyObject_GetAttr(view, strides_name) : nullptr;
  *dtype = *strides ? PyObject_GetAttr(view, dtype_name) : nullptr;
  if (*dtype) return true;
  Py_CLEAR(*shape);
  Py_CLEAR(*strides);
  return false;
}

// Whether the tuple `t` holds the `n` ints of `values`.
bool same_ints(PyObject* t, const Py_ssize_t* values, int n) {
  if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) != n) return false;
  for (int i = 0; i < n; ++i) {
    const Py_ssize_t x = PyLong_AsSsize_t(PyTuple_GET_ITEM(t, i));
    if (x == -1 && PyErr_Occurred()) {
      PyErr_Clear();
      return false;
    }
    if (x != values[i]) return false;
  }
  return true;
}

// For a NumPy view `base` whose layout was just read as attributes into `v`: where its C layout
// says the same, the slot's layout from there, and the type it holds for.
// (Three attribute reads, each made into an object, cost a host frame's numpy() 6 us of the GPU
// machine's CPU after the wait for a frame.)
void raw_layout(SlotViewsObject* v, PyObject* base) {
  if (!may_hold_numpy_head(base)) return;
  const NumpyHead* h = numpy_head(base);
  if (h->nd < 0 || h->nd > CUDAIPC_MAX_RANK || h->descr != v->dtype ||
      !same_ints(v->shape, h->dimensions, h->nd) || !same_ints(v->strides, h->strides, h->nd))
    return;
  v->nd = h->nd;
  v->flags = h->flags;
  std::copy(h->dimensions, h->dimensions + h->nd, v->sizes);
  std::copy(h->strides, h->strides + h->nd, v->sizes + h->nd);
  v->raw_type = Py_TYPE(base);
}

// Whether the vector at `at` in `o` holds the `n` values of `values`. `checked`: a place not yet
// known to hold a vector, whose words must at least look like one's before its memory is read.
bool vector_holds(const PyObject* o, Py_ssize_t at, const Py_ssize_t* values, int n, bool checked) {
  VectorHead v;
  std::memcpy(&v, reinterpret_cast<const char*>(o) + at, sizeof v);
  if (checked && (!v.begin || v.begin % alignof(Py_ssize_t) || v.end < v.begin ||
                  v.capacity_end < v.end || v.capacity_end - v.begin > (1u << 16)))
    return false;
  if (v.end - v.begin != size_t(n) * sizeof(Py_ssize_t)) return false;
  return same_sizes(reinterpret_cast<const Py_ssize_t*>(v.begin), values, n);
}

// For a cupy view `base` whose layout was just read as attributes into `v`: where its fields say
// the same (`size` right after the weak-reference list, then the shape's and the strides'
// vectors, then the dtype object further on), their places and the type they hold for. Only that
// one place is tried: no other word is ever read as a vector.
void cupy_raw_layout(SlotViewsObject* v, PyObject* base) {
  const int n = PyTuple_Check(v->shape) ? int(PyTuple_GET_SIZE(v->shape)) : -1;
  if (n < 0 || n > CUDAIPC_MAX_RANK || !PyTuple_Check(v->strides) ||
      PyTuple_GET_SIZE(v->strides) != n)
    return;
  Py_ssize_t dims[CUDAIPC_MAX_RANK], steps[CUDAIPC_MAX_RANK], size = 1;
  for (int i = 0; i < n; ++i) {
    dims[i] = PyLong_AsSsize_t(PyTuple_GET_ITEM(v->shape, i));
    steps[i] = PyLong_AsSsize_t(PyTuple_GET_ITEM(v->strides, i));
    if (PyErr_Occurred()) {
      PyErr_Clear();
      return;
    }
    size *= dims[i];
  }
  const Py_ssize_t word = sizeof(void*), end = Py_TYPE(base)->tp_basicsize;
  const char* bytes = reinterpret_cast<const char*>(base);
  const Py_ssize_t vector = sizeof(VectorHead);
  const Py_ssize_t at = Py_TYPE(base)->tp_weaklistoffset + word;  // `size`
  if (at < Py_ssize_t(sizeof(PyObject)) + word || at + word + 2 * vector > end) return;
  Py_ssize_t found;
  std::memcpy(&found, bytes + at, sizeof found);
  if (found != size || !vector_holds(base, at + word, dims, n, true) ||
      !vector_holds(base, at + word + vector, steps, n, true))
    return;
  for (Py_ssize_t d = at + word + 2 * vector; d + word <= end; d += word) {
    PyObject* dtype;
    std::memcpy(&dtype, bytes + d, sizeof dtype);
    if (dtype != v->dtype) continue;
    v->nd = n;
    std::copy(dims, dims + n, v->sizes);
    std::copy(steps, steps + n, v->sizes + n);
    v->shape_at = at + word;
    v->dtype_at = d;
    v->raw_type = Py_TYPE(base);
    return;
  }
}

// reusable() where the layout is read as attributes (views whose C layout was not recognised).
CUDAIPC_PY_COLD bool reusable_by_attributes(SlotViewsObject* v, uint32_t slot, PyObject* alias) {
  // The attribute reads run Python (another thread may clear the cache meanwhile): the alias and
  // the expected layout are held here, and the alias must still be the cache's, held by it alone.
  Ref keep(Py_NewRef(alias));
  Ref want_shape(Py_NewRef(v->shape)), want_strides(Py_NewRef(v->strides));
  Ref want_dtype(Py_NewRef(v->dtype));
  PyObject *shape, *strides, *dtype;
  if (!layout_of(alias, &shape, &strides, &dtype)) {
    PyErr_Clear();
    return false;
  }
  Ref a(shape), b(strides), c(dtype);
  // The same dtype object, not an equal one: a dtype set in place is a new object.
  if (dtype != want_dtype.get()) return false;
  const bool same = PyObject_RichCompareBool(shape, want_shape.get(), Py_EQ) == 1 &&
                    PyObject_RichCompareBool(strides, want_strides.get(), Py_EQ) == 1;
  if (PyErr_Occurred()) PyErr_Clear();
  return same && v->slots[slot].lent == alias && Py_REFCNT(alias) == 2;
}

// reusable() for views whose C layout is known (no Python runs): false where it is not.
CUDAIPC_PY_HOT inline bool reusable_raw(SlotViewsObject* v, uint32_t slot) {
  PyObject* alias = v->slots[slot].lent;
  if (!alias || Py_REFCNT(alias) != 1 || !v->raw_type || Py_TYPE(alias) != v->raw_type)
    return false;
  const Py_ssize_t* dims = v->sizes;
  const Py_ssize_t* steps = v->sizes + v->nd;
  if (v->shape_at) {
    PyObject* dtype;
    std::memcpy(&dtype, reinterpret_cast<const char*>(alias) + v->dtype_at, sizeof dtype);
    return dtype == v->dtype && vector_holds(alias, v->shape_at, dims, v->nd, false) &&
           vector_holds(alias, v->shape_at + Py_ssize_t(sizeof(VectorHead)), steps, v->nd, false);
  }
  const NumpyHead* h = numpy_head(alias);
  return h->nd == v->nd && h->descr == v->dtype && h->flags == v->flags &&
         h->data == v->slots[slot].data && same_sizes(h->dimensions, dims, v->nd) &&
         same_sizes(h->strides, steps, v->nd);
}

// Whether slot `slot`'s alias can be handed out again: only the cache holds it (nobody can change
// it while it is out) and its layout is still the slot's view's. A failed read says no.
bool reusable(SlotViewsObject* v, uint32_t slot) {
  if (v->raw_type) return reusable_raw(v, slot);
  PyObject* alias = v->slots[slot].lent;
  return alias && Py_REFCNT(alias) == 1 && v->dtype && reusable_by_attributes(v, slot, alias);
}

int shared_traverse(PyObject* o, visitproc visit, void* arg) {
  SharedObject* s = reinterpret_cast<SharedObject*>(o);
  Py_VISIT(s->views);
  Py_VISIT(s->cupy_views);
  Py_VISIT(s->numpy_views);
  return 0;
}

int shared_clear(PyObject* o) {
  SharedObject* s = reinterpret_cast<SharedObject*>(o);
  Py_CLEAR(s->views);
  Py_CLEAR(s->cupy_views);
  Py_CLEAR(s->numpy_views);
  return 0;
}

void shared_dealloc(PyObject* o) {
  PyObject_GC_UnTrack(o);
  shared_clear(o);
  // A static base: the subclass's deallocator (CPython's subtype_dealloc) drops the type's
  // reference, and its traverse visits the type.
  Py_TYPE(o)->tp_free(o);
}

PyMemberDef shared_members[] = {
    {"views", T_OBJECT, offsetof(SharedObject, views), 0, "torch's slot views (None: none yet)"},
    {"cupy_views", T_OBJECT, offsetof(SharedObject, cupy_views), 0,
     "cupy's slot views (None: none yet)"},
    {"numpy_views", T_OBJECT, offsetof(SharedObject, numpy_views), 0,
     "NumPy's slot views of a host format (None: none yet)"},
    {"host_dlpack", T_BOOL, offsetof(SharedObject, host_dlpack), 0,
     "whether numpy() of a host frame is its slot's view (else the package's Python makes it)"},
    {nullptr, 0, 0, 0, nullptr}};

}  // namespace

PyTypeObject SharedType = [] {
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
  PyTypeObject t{PyVarObject_HEAD_INIT(nullptr, 0)};
#pragma GCC diagnostic pop
  t.tp_name = "cudaipc._native.Shared";
  t.tp_basicsize = sizeof(SharedObject);
  t.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC;
  t.tp_doc = "What the frames of one format share that the binding reads per frame";
  t.tp_traverse = shared_traverse;
  t.tp_clear = shared_clear;
  t.tp_dealloc = shared_dealloc;
  t.tp_members = shared_members;
  t.tp_new = PyType_GenericNew;
  return t;
}();

CUDAIPC_PY_HOT SharedObject* as_shared(PyObject* o) {
  PyTypeObject* t = Py_TYPE(o);
  // The package's _Shared first: its base is this type (no walk of its MRO).
  if (t->tp_base == &SharedType || PyType_IsSubtype(t, &SharedType))
    return reinterpret_cast<SharedObject*>(o);
  PyErr_Format(PyExc_TypeError, "a frame's format description is a %.100s, not a Shared",
               t->tp_name);
  return nullptr;
}

bool slot_views_ready() {
  return PyType_Ready(&SlotViewsType) == 0 && PyType_Ready(&SharedType) == 0;
}

namespace {

// slot_view for all but a slot whose alias is handed out again: the first frame of a slot (its
// view made), a new slot set, an alias still held or changed (a new alias made).
PyObject* slot_view_made(FrameObject* f, const ViewMaker& maker, uint32_t slot, const void* set) {
  if (slot >= CUDAIPC_MAX_SLOTS) {
    PyErr_Format(PyExc_ValueError, "slot %u out of range", slot);
    return nullptr;
  }
  SlotViewsObject* views = views_of(f->shared, maker.field);
  if (!views) return nullptr;
  Ref hold(Py_NewRef(reinterpret_cast<PyObject*>(views)));
  if (views->set != set) {
    views_clear(reinterpret_cast<PyObject*>(views));
    views->set = set;
  }
  Ref made;
  PyObject* base = views->slots[slot].view;
  // Held for the call: what runs Python below may drop the cache's reference.
  Ref keep_base(base ? Py_NewRef(base) : nullptr);
  if (!base) {
    Ref capsule(static_cast<PyObject*>(cudaipc_frame_slot_view_capsule(f->h, 0)));
    if (!capsule) return capsule_error(false);
    made.reset(maker.make(capsule.get(), f->device));
    if (!made) return nullptr;
    base = made.get();
    // Making it ran Python (cupy's, torch's first CUDA setup): another thread may have cached
    // this slot's view meanwhile, or met a newer slot set. Kept only where it still belongs.
    if (views->set == set && !views->slots[slot].view) views->slots[slot].view = Py_NewRef(base);
  }
  // An alias, not the cached view itself: what a caller does to its view's shape or strides in
  // place (torch's unsqueeze_, cupy's shape assignment) stays with that frame.
  if (maker.reuse == ViewMaker::Reuse::never) return PyObject_CallMethodNoArgs(base, maker.alias);
  if (reusable(views, slot)) return Py_NewRef(views->slots[slot].lent);
  if (!views->dtype) {
    // Read into locals first: the reads run Python, and the cache is filled only where it still
    // belongs and nobody filled it meanwhile.
    PyObject *shape, *strides, *dtype;
    if (!layout_of(base, &shape, &strides, &dtype)) return nullptr;
    Ref a(shape), b(strides), c(dtype);
    if (views->set == set && !views->dtype) {
      views->shape = a.release();
      views->strides = b.release();
      views->dtype = c.release();
      if (maker.reuse == ViewMaker::Reuse::numpy_layout) raw_layout(views, base);
      if (maker.reuse == ViewMaker::Reuse::cupy_layout) cupy_raw_layout(views, base);
    }
  }
  PyObject* alias = PyObject_CallMethodNoArgs(base, maker.alias);
  // Kept only where the slot's view still belongs (the alias call ran Python).
  if (alias && views->set == set && views->slots[slot].view == base) {
    Py_XSETREF(views->slots[slot].lent, Py_NewRef(alias));
    // The NumPy head is read only for the type whose head agreed with NumPy's own attributes.
    const bool numpy = views->raw_type && !views->shape_at && Py_TYPE(base) == views->raw_type;
    views->slots[slot].data = numpy ? numpy_head(base)->data : nullptr;
  }
  return alias;
}

}  // namespace

// The frame's view of its slot. The call a loop makes (the slot's alias, nobody else holding it,
// handed out again) runs here alone, straight through: spread over every case, it touched 12
// cache lines of code after each wait for a frame (issue #39).
CUDAIPC_PY_HOT PyObject* slot_view(FrameObject* f, const ViewMaker& maker) {
  uint32_t slot = 0;
  const void* set = nullptr;
  if (int rc = cudaipc_frame_slot(f->h, &slot, &set)) return fail(rc, "the frame's slot");
  PyObject* shared = f->shared;
  if (CUDAIPC_PY_LIKELY(slot < CUDAIPC_MAX_SLOTS && maker.reuse != ViewMaker::Reuse::never &&
                        shared && Py_TYPE(shared)->tp_base == &SharedType)) {
    PyObject* cache = reinterpret_cast<SharedObject*>(shared)->*maker.field;
    if (CUDAIPC_PY_LIKELY(cache && Py_TYPE(cache) == &SlotViewsType)) {
      SlotViewsObject* views = as_views(cache);
      if (CUDAIPC_PY_LIKELY(views->set == set && views->slots[slot].view &&
                            reusable_raw(views, slot)))
        return Py_NewRef(views->slots[slot].lent);
    }
  }
  return slot_view_made(f, maker, slot, set);
}

}  // namespace cudaipc_py
