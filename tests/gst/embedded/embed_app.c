/* cudaipc-embed-app: a C application that embeds the elements the way a Python process does
 * (issue #38): libstdc++ is loaded first and privately (as NumPy or torch loads it), then
 * libunwind.so.8 and GStreamer into the global scope (as PyGObject loads libgstreamer, which
 * Debian links with libunwind), and only then the plugin. In such a process a library whose
 * _Unwind_* calls reach the global scope meets another unwinder than the one libstdc++ raises
 * with. The program links neither GStreamer nor libstdc++: it reaches GStreamer through dlsym.
 *
 *   cudaipc-embed-app --pipeline DESC [--count N] [--first-id I] [--fps F] [--timeout-s T]
 *
 * An element named "src" (appsrc) gets N frames (GRAY8 caps of the description), frame i carrying
 * id I+i in its first 8 bytes and tests/common's pattern for that id after them; an element named
 * "check" (fakesink signal-handoffs=true) has every frame checked against its id. Prints one
 * "frame id=ID ok=0|1" per checked frame, then "outcome eos" or "outcome error: TEXT" (or
 * "outcome timeout"), then "frames N bad B"; warnings and infos on the bus as "message KIND: TEXT",
 * cudaipc's element messages as "message element: SOURCE: STRUCTURE".
 * Exit 0 when the pipeline ended (EOS or an error: what a real application sees and handles), 3 on
 * timeout, 1 on a bad argument or a missing library. The driver (embedded.py) judges the outcome; a
 * crash of the process is what it exists to see. */
#include <dlfcn.h>
#include <gst/gst.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static struct {
  gboolean (*init_check)(int*, char***, GError**);
  GstElement* (*parse_launch)(const gchar*, GError**);
  GstStateChangeReturn (*set_state)(GstElement*, GstState);
  GstBus* (*get_bus)(GstElement*);
  GstMessage* (*timed_pop_filtered)(GstBus*, GstClockTime, GstMessageType);
  void (*parse_error)(GstMessage*, GError**, gchar**);
  void (*parse_warning)(GstMessage*, GError**, gchar**);
  void (*parse_info)(GstMessage*, GError**, gchar**);
  void (*mini_object_unref)(GstMiniObject*);
  void (*object_unref)(gpointer);
  GstElement* (*bin_get_by_name)(GstBin*, const gchar*);
  gulong (*signal_connect_data)(gpointer, const gchar*, GCallback, gpointer, GClosureNotify,
                                GConnectFlags);
  void (*signal_emit_by_name)(gpointer, const gchar*, ...);
  GstBuffer* (*buffer_new_allocate)(GstAllocator*, gsize, GstAllocationParams*);
  gboolean (*buffer_map)(GstBuffer*, GstMapInfo*, GstMapFlags);
  void (*buffer_unmap)(GstBuffer*, GstMapInfo*);
  void (*error_free)(GError*);
  const GstStructure* (*get_structure)(GstMessage*);
  gchar* (*structure_to_string)(const GstStructure*);
  gchar* (*object_get_name)(GstObject*);
  void (*g_free)(gpointer);
} gst;

static int resolve(void* lib, const char* name, void* slot) {
  void* f = dlsym(lib, name);
  if (!f) {
    fprintf(stderr, "embed-app: %s not found: %s\n", name, dlerror());
    return 0;
  }
  memcpy(slot, &f, sizeof f);
  return 1;
}

static int load_like_python(void) {
  /* NumPy's extension brings libstdc++ in privately and binds it at once. */
  if (!dlopen("libstdc++.so.6", RTLD_NOW | RTLD_LOCAL)) {
    fprintf(stderr, "embed-app: libstdc++.so.6: %s\n", dlerror());
    return 0;
  }
  /* PyGObject opens its libraries into the global scope; libgstreamer brings libunwind (Debian),
   * opened here by name too for a GStreamer built without it. */
  if (!dlopen("libunwind.so.8", RTLD_NOW | RTLD_GLOBAL))
    fprintf(stderr, "embed-app: no libunwind.so.8 (%s): the global scope has only libgcc_s\n",
            dlerror());
  void* glib = dlopen("libglib-2.0.so.0", RTLD_NOW | RTLD_GLOBAL);
  void* gobj = dlopen("libgobject-2.0.so.0", RTLD_NOW | RTLD_GLOBAL);
  void* g = dlopen("libgstreamer-1.0.so.0", RTLD_NOW | RTLD_GLOBAL);
  if (!glib || !gobj || !g) {
    fprintf(stderr, "embed-app: GStreamer's libraries: %s\n", dlerror());
    return 0;
  }
  return resolve(g, "gst_init_check", &gst.init_check) &&
         resolve(g, "gst_parse_launch", &gst.parse_launch) &&
         resolve(g, "gst_element_set_state", &gst.set_state) &&
         resolve(g, "gst_element_get_bus", &gst.get_bus) &&
         resolve(g, "gst_bus_timed_pop_filtered", &gst.timed_pop_filtered) &&
         resolve(g, "gst_message_parse_error", &gst.parse_error) &&
         resolve(g, "gst_message_parse_warning", &gst.parse_warning) &&
         resolve(g, "gst_message_parse_info", &gst.parse_info) &&
         resolve(g, "gst_mini_object_unref", &gst.mini_object_unref) &&
         resolve(g, "gst_object_unref", &gst.object_unref) &&
         resolve(g, "gst_bin_get_by_name", &gst.bin_get_by_name) &&
         resolve(gobj, "g_signal_connect_data", &gst.signal_connect_data) &&
         resolve(gobj, "g_signal_emit_by_name", &gst.signal_emit_by_name) &&
         resolve(g, "gst_buffer_new_allocate", &gst.buffer_new_allocate) &&
         resolve(g, "gst_buffer_map", &gst.buffer_map) &&
         resolve(g, "gst_buffer_unmap", &gst.buffer_unmap) &&
         resolve(glib, "g_error_free", &gst.error_free) &&
         resolve(g, "gst_message_get_structure", &gst.get_structure) &&
         resolve(g, "gst_structure_to_string", &gst.structure_to_string) &&
         resolve(g, "gst_object_get_name", &gst.object_get_name) &&

         resolve(glib, "g_free", &gst.g_free);
}

/* tests/common/pattern.hpp, in C: the word at `index` of frame `seq`. */
static uint64_t pattern_word(uint64_t seq, uint64_t index) {
  uint64_t x = seq * 0x9E3779B97F4A7C15ull + index * 0xBF58476D1CE4E5B9ull + 1;
  return x ^ (x >> 31);
}

static void fill_frame(uint8_t* p, size_t bytes, uint64_t id) {
  memcpy(p, &id, 8);
  for (size_t i = 0; (i + 1) * 8 <= bytes - 8; ++i) {
    uint64_t w = pattern_word(id, i);
    memcpy(p + 8 + i * 8, &w, 8);
  }
  for (size_t i = (bytes - 8) / 8 * 8; i < bytes - 8; ++i)
    p[8 + i] = (uint8_t)(pattern_word(id, i) & 0xff);
}

static int frame_intact(const uint8_t* p, size_t bytes) {
  if (bytes < 8) return 0;
  uint64_t id;
  memcpy(&id, p, 8);
  size_t n = bytes - 8;
  for (size_t i = 0; (i + 1) * 8 <= n; ++i) {
    uint64_t w;
    memcpy(&w, p + 8 + i * 8, 8);
    if (w != pattern_word(id, i)) return 0;
  }
  for (size_t i = n / 8 * 8; i < n; ++i)
    if (p[8 + i] != (uint8_t)(pattern_word(id, i) & 0xff)) return 0;
  return 1;
}

static unsigned long frames_seen, frames_bad;

static void on_handoff(GstElement* sink, GstBuffer* buffer, GstPad* pad, gpointer data) {
  (void)sink, (void)pad, (void)data;
  GstMapInfo map;
  if (!gst.buffer_map(buffer, &map, GST_MAP_READ)) {
    ++frames_bad;
    printf("frame id=? ok=0 (unmappable)\n");
    return;
  }
  uint64_t id = 0;
  if (map.size >= 8) memcpy(&id, map.data, 8);
  int ok = frame_intact(map.data, map.size);
  gst.buffer_unmap(buffer, &map);
  ++frames_seen;
  if (!ok) ++frames_bad;
  printf("frame id=%" PRIu64 " ok=%d\n", id, ok);
  fflush(stdout);
}

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

int main(int argc, char** argv) {
  const char* desc = NULL;
  long count = 30, fps = 100;
  double timeout_s = 20;
  uint64_t first_id = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--pipeline"))
      desc = argv[i + 1];
    else if (!strcmp(argv[i], "--count"))
      count = atol(argv[i + 1]);
    else if (!strcmp(argv[i], "--first-id"))
      first_id = strtoull(argv[i + 1], NULL, 10);
    else if (!strcmp(argv[i], "--fps"))
      fps = atol(argv[i + 1]);
    else if (!strcmp(argv[i], "--timeout-s"))
      timeout_s = atof(argv[i + 1]);
    else {
      fprintf(stderr, "embed-app: unknown argument %s\n", argv[i]);
      return 1;
    }
  }
  if (!desc || fps <= 0) {
    fprintf(stderr,
            "usage: %s --pipeline DESC [--count N] [--first-id I] [--fps F] [--timeout-s T]\n",
            argv[0]);
    return 1;
  }
  if (!load_like_python()) return 1;
  GError* err = NULL;
  if (!gst.init_check(NULL, NULL, &err)) {
    fprintf(stderr, "embed-app: gst_init: %s\n", err ? err->message : "?");
    return 1;
  }
  GstElement* pipeline = gst.parse_launch(desc, &err);
  if (!pipeline) {
    fprintf(stderr, "embed-app: %s: %s\n", desc, err ? err->message : "?");
    return 1;
  }
  GstElement* src = gst.bin_get_by_name((GstBin*)pipeline, "src");
  GstElement* check = gst.bin_get_by_name((GstBin*)pipeline, "check");
  if (check)
    gst.signal_connect_data(check, "handoff", G_CALLBACK(on_handoff), NULL, NULL, (GConnectFlags)0);
  GstBus* bus = gst.get_bus(pipeline);
  const double asked = now_s();
  gst.set_state(pipeline, GST_STATE_PLAYING);
  /* How long the application's own thread was held: never on a peer. */
  printf("set-state ms=%.0f\n", (now_s() - asked) * 1000.0);
  fflush(stdout);

  const double deadline = now_s() + timeout_s;
  long pushed = 0;
  const char* outcome = "timeout";
  char error_text[512] = "";
  while (now_s() < deadline) {
    if (src && pushed <= count) {
      if (pushed == count) {
        GstFlowReturn r;
        gst.signal_emit_by_name(src, "end-of-stream", &r);
      } else {
        /* 64x48 GRAY8: the caps the driver's descriptions give appsrc. */
        GstBuffer* b = gst.buffer_new_allocate(NULL, 64 * 48, NULL);
        GstMapInfo map;
        if (b && gst.buffer_map(b, &map, GST_MAP_WRITE)) {
          fill_frame(map.data, map.size, first_id + (uint64_t)pushed);
          gst.buffer_unmap(b, &map);
        }
        GST_BUFFER_PTS(b) = (GstClockTime)pushed * GST_SECOND / (GstClockTime)fps;
        GST_BUFFER_DURATION(b) = GST_SECOND / (GstClockTime)fps;
        GstFlowReturn r = GST_FLOW_OK;
        gst.signal_emit_by_name(src, "push-buffer", b, &r);
        if (r != GST_FLOW_OK)
          printf("push-refused id=%" PRIu64 " flow=%d\n", first_id + (uint64_t)pushed, (int)r);
        gst.mini_object_unref(GST_MINI_OBJECT_CAST(b));
      }
      ++pushed;
    }
    GstClockTime wait = src && pushed <= count ? GST_SECOND / (GstClockTime)fps : 50 * GST_MSECOND;
    GstMessage* m =
        gst.timed_pop_filtered(bus, wait,
                               GST_MESSAGE_EOS | GST_MESSAGE_ERROR | GST_MESSAGE_WARNING |
                                   GST_MESSAGE_INFO | GST_MESSAGE_ELEMENT);
    if (!m) continue;
    if (GST_MESSAGE_TYPE(m) == GST_MESSAGE_ELEMENT) {
      const GstStructure* st = gst.get_structure(m);
      gchar* text = st ? gst.structure_to_string(st) : NULL;
      gchar* name = gst.object_get_name(GST_MESSAGE_SRC(m));
      if (text && strncmp(text, "cudaipc", 7) == 0) printf("message element: %s: %s\n", name, text);
      fflush(stdout);
      gst.g_free(text);
      gst.g_free(name);
      gst.mini_object_unref(GST_MINI_OBJECT_CAST(m));
      continue;
    }
    if (GST_MESSAGE_TYPE(m) == GST_MESSAGE_WARNING || GST_MESSAGE_TYPE(m) == GST_MESSAGE_INFO) {
      const int warning = GST_MESSAGE_TYPE(m) == GST_MESSAGE_WARNING;
      GError* e = NULL;
      gchar* dbg = NULL;
      (warning ? gst.parse_warning : gst.parse_info)(m, &e, &dbg);
      printf("message %s: %s\n", warning ? "warning" : "info", e ? e->message : "?");
      fflush(stdout);
      if (e) gst.error_free(e);
      gst.g_free(dbg);
      gst.mini_object_unref(GST_MINI_OBJECT_CAST(m));
      continue;
    }
    if (GST_MESSAGE_TYPE(m) == GST_MESSAGE_EOS) {
      outcome = "eos";
    } else {
      GError* e = NULL;
      gchar* dbg = NULL;
      gst.parse_error(m, &e, &dbg);
      snprintf(error_text, sizeof error_text, "%s", e ? e->message : "?");
      outcome = "error";
      if (e) gst.error_free(e);
      gst.g_free(dbg);
    }
    gst.mini_object_unref(GST_MINI_OBJECT_CAST(m));
    break;
  }
  gst.set_state(pipeline, GST_STATE_NULL);
  if (src) gst.object_unref(src);
  if (check) gst.object_unref(check);
  gst.object_unref(bus);
  gst.object_unref(pipeline);
  if (error_text[0])
    printf("outcome error: %s\n", error_text);
  else
    printf("outcome %s\n", outcome);
  printf("frames %lu bad %lu\n", frames_seen, frames_bad);
  return strcmp(outcome, "timeout") == 0 ? 3 : 0;
}
