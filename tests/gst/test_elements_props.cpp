// The elements' interface as gst-inspect shows it: GType names, properties (type, default,
// range, flags), enum nicks, pad templates; and what the `stats` properties report after a run.
#include <gst/base/base.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

#include "element_harness.hpp"

namespace cudaipc::testing::gst {
namespace {

constexpr Ms kWait{5000};

Ptr<GstElement> make(const char* factory) {
  GstElement* e = gst_element_factory_make(factory, nullptr);
  if (e) gst_object_ref_sink(e);
  return Ptr<GstElement>(e);
}

GParamSpec* find(GstElement* e, const char* name) {
  return g_object_class_find_property(G_OBJECT_GET_CLASS(e), name);
}

// Readable and writable in NULL and READY, or read-only.
enum class Access { rw, read_only };

void expect_flags(GParamSpec* p, Access access) {
  const bool readable = p->flags & G_PARAM_READABLE;
  const bool writable = p->flags & G_PARAM_WRITABLE;
  EXPECT_TRUE(readable) << p->name;
  EXPECT_EQ(writable, access == Access::rw) << p->name;
  if (access == Access::rw) {
    EXPECT_TRUE(p->flags & (GST_PARAM_MUTABLE_READY | GST_PARAM_MUTABLE_PLAYING))
        << p->name << " says when it may change";
  }
}

void expect_uint(GstElement* e, const char* name, guint min, guint max, guint def) {
  SCOPED_TRACE(name);
  GParamSpec* p = find(e, name);
  ASSERT_NE(p, nullptr);
  ASSERT_TRUE(G_IS_PARAM_SPEC_UINT(p)) << g_type_name(G_PARAM_SPEC_TYPE(p));
  auto* u = G_PARAM_SPEC_UINT(p);
  EXPECT_EQ(u->minimum, min);
  EXPECT_EQ(u->maximum, max);
  EXPECT_EQ(u->default_value, def);
  guint now = 0;
  g_object_get(e, name, &now, nullptr);
  EXPECT_EQ(now, def) << "a new element holds the default";
  expect_flags(p, Access::rw);
}

void expect_int(GstElement* e, const char* name, gint min, gint max, gint def) {
  SCOPED_TRACE(name);
  GParamSpec* p = find(e, name);
  ASSERT_NE(p, nullptr);
  ASSERT_TRUE(G_IS_PARAM_SPEC_INT(p)) << g_type_name(G_PARAM_SPEC_TYPE(p));
  auto* i = G_PARAM_SPEC_INT(p);
  EXPECT_EQ(i->minimum, min);
  EXPECT_EQ(i->maximum, max);
  EXPECT_EQ(i->default_value, def);
  expect_flags(p, Access::rw);
}

void expect_uint64(GstElement* e, const char* name, guint64 min, guint64 max, guint64 def) {
  SCOPED_TRACE(name);
  GParamSpec* p = find(e, name);
  ASSERT_NE(p, nullptr);
  ASSERT_TRUE(G_IS_PARAM_SPEC_UINT64(p)) << g_type_name(G_PARAM_SPEC_TYPE(p));
  auto* u = G_PARAM_SPEC_UINT64(p);
  EXPECT_EQ(u->minimum, min);
  EXPECT_EQ(u->maximum, max);
  EXPECT_EQ(u->default_value, def);
  expect_flags(p, Access::rw);
}

void expect_bool(GstElement* e, const char* name, bool def) {
  SCOPED_TRACE(name);
  GParamSpec* p = find(e, name);
  ASSERT_NE(p, nullptr);
  ASSERT_TRUE(G_IS_PARAM_SPEC_BOOLEAN(p)) << g_type_name(G_PARAM_SPEC_TYPE(p));
  EXPECT_EQ(static_cast<bool>(G_PARAM_SPEC_BOOLEAN(p)->default_value), def);
  expect_flags(p, Access::rw);
}

void expect_string(GstElement* e, const char* name) {
  SCOPED_TRACE(name);
  GParamSpec* p = find(e, name);
  ASSERT_NE(p, nullptr);
  ASSERT_TRUE(G_IS_PARAM_SPEC_STRING(p)) << g_type_name(G_PARAM_SPEC_TYPE(p));
  EXPECT_EQ(G_PARAM_SPEC_STRING(p)->default_value, nullptr);
  expect_flags(p, Access::rw);
  g_object_set(e, name, "/some/where", nullptr);
  gchar* back = nullptr;
  g_object_get(e, name, &back, nullptr);
  Ptr<gchar> owned(back);
  EXPECT_STREQ(back, "/some/where");
}

// An enum of the given GType name, its nicks in value order, and the default's nick.
void expect_enum(GstElement* e, const char* name, const char* type_name,
                 const std::vector<std::string>& nicks, const char* def) {
  SCOPED_TRACE(name);
  GParamSpec* p = find(e, name);
  ASSERT_NE(p, nullptr);
  ASSERT_TRUE(G_IS_PARAM_SPEC_ENUM(p)) << g_type_name(G_PARAM_SPEC_TYPE(p));
  EXPECT_STREQ(g_type_name(G_PARAM_SPEC_VALUE_TYPE(p)), type_name);
  GEnumClass* klass = G_PARAM_SPEC_ENUM(p)->enum_class;
  std::vector<std::string> got;
  for (guint i = 0; i < klass->n_values; ++i) got.push_back(klass->values[i].value_nick);
  EXPECT_EQ(got, nicks);
  GEnumValue* d = g_enum_get_value(klass, G_PARAM_SPEC_ENUM(p)->default_value);
  ASSERT_NE(d, nullptr);
  EXPECT_STREQ(d->value_nick, def);
  expect_flags(p, Access::rw);
  // Every nick can be set by name, as gst-launch does.
  for (const std::string& nick : nicks) {
    gst_util_set_object_arg(G_OBJECT(e), name, nick.c_str());
    gint v = -1;
    g_object_get(e, name, &v, nullptr);
    GEnumValue* back = g_enum_get_value(klass, v);
    ASSERT_NE(back, nullptr);
    EXPECT_EQ(back->value_nick, nick);
  }
}

void expect_stats(GstElement* e) {
  GParamSpec* p = find(e, "stats");
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(G_PARAM_SPEC_VALUE_TYPE(p), GST_TYPE_STRUCTURE);
  expect_flags(p, Access::read_only);
}

// video/x-raw and other/tensors, each with memory:CUDAMemory first and then without.
void expect_template(GstElement* e, const char* name, GstPadDirection direction) {
  SCOPED_TRACE(name);
  GstPadTemplate* t = gst_element_class_get_pad_template(GST_ELEMENT_GET_CLASS(e), name);
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(GST_PAD_TEMPLATE_DIRECTION(t), direction);
  EXPECT_EQ(GST_PAD_TEMPLATE_PRESENCE(t), GST_PAD_ALWAYS);
  Ptr<GstCaps> caps(gst_pad_template_get_caps(t));
  ASSERT_EQ(gst_caps_get_size(caps.get()), 4u) << text_of(caps.get());
  const char* names[] = {"video/x-raw", "video/x-raw", "other/tensors", "other/tensors"};
  for (guint i = 0; i < 4; ++i) {
    const GstStructure* s = gst_caps_get_structure(caps.get(), i);
    EXPECT_STREQ(gst_structure_get_name(s), names[i]);
    const GstCapsFeatures* f = gst_caps_get_features(caps.get(), i);
    const bool cuda = f && gst_caps_features_contains(f, "memory:CUDAMemory");
    EXPECT_EQ(cuda, i % 2 == 0) << "structure " << i << ": " << text_of(caps.get());
  }
  // The thirteen formats, and nothing else.
  const GValue* formats = gst_structure_get_value(gst_caps_get_structure(caps.get(), 1), "format");
  ASSERT_TRUE(formats && GST_VALUE_HOLDS_LIST(formats));
  std::vector<std::string> got;
  for (guint i = 0; i < gst_value_list_get_size(formats); ++i)
    got.push_back(g_value_get_string(gst_value_list_get_value(formats, i)));
  const std::vector<std::string> want = {"RGBA", "BGRA", "RGBx",     "BGRx",  "RGB",
                                         "BGR",  "RGBP", "BGRP",     "GRAY8", "GRAY16_LE",
                                         "NV12", "I420", "P010_10LE"};
  EXPECT_EQ(got, want);
  Ptr<GstCaps> tensors(
      caps_from("other/tensors,format=static,num_tensors=1,types=float32,dimensions=(string)3:4:5,"
                "framerate=30/1"));
  EXPECT_TRUE(gst_caps_can_intersect(caps.get(), tensors.get())) << "any types and dimensions";
}

TEST_F(ElementTest, SinkInterface) {
  Ptr<GstElement> sink = make(sink_factory());
  ASSERT_TRUE(sink);
  EXPECT_STREQ(G_OBJECT_TYPE_NAME(sink.get()), "GstCudaIpcRingSink");
  EXPECT_TRUE(GST_IS_BASE_SINK(sink.get()));
  Ptr<GstElement> alias = make("cudaipcringsink");
  ASSERT_TRUE(alias);
  EXPECT_EQ(G_OBJECT_TYPE(alias.get()), G_OBJECT_TYPE(sink.get()));
  EXPECT_STREQ(
      gst_element_class_get_metadata(GST_ELEMENT_GET_CLASS(sink.get()), GST_ELEMENT_METADATA_KLASS),
      "Sink/Video");

  expect_string(sink.get(), "socket-path");
  expect_uint(sink.get(), "num-slots", 1, 32, 4);  // the core holds 32 slots at most
  expect_int(sink.get(), "cuda-device-id", -1, G_MAXINT, -1);
  expect_enum(sink.get(), "ipc-mode", "GstCudaIpcRingMode", {"auto", "vmm", "legacy", "host"},
              "auto");
  expect_enum(sink.get(), "policy", "GstCudaIpcRingPolicy", {"block", "drop"}, "block");
  expect_uint64(sink.get(), "block-timeout", 0, G_MAXUINT64, GST_SECOND);
  expect_bool(sink.get(), "wait-for-consumer", false);
  expect_uint(sink.get(), "socket-mode", 0, 0770, 0600);
  expect_string(sink.get(), "allowed-group");
  expect_uint(sink.get(), "max-consumers", 1, 32, 16);
  expect_stats(sink.get());
  expect_template(sink.get(), "sink", GST_PAD_SINK);

  // Before start: stats exist and say nothing happened.
  GstStructure* s = nullptr;
  g_object_get(sink.get(), "stats", &s, nullptr);
  Ptr<GstStructure> stats(s);
  ASSERT_TRUE(stats);
  guint64 published = 99, generation = 99;
  guint consumers = 99;
  EXPECT_TRUE(gst_structure_get_uint64(s, "published", &published));
  EXPECT_TRUE(gst_structure_get_uint(s, "consumers", &consumers));
  EXPECT_TRUE(gst_structure_get_uint64(s, "format-generation", &generation));
  EXPECT_EQ(published, 0u);
  EXPECT_EQ(consumers, 0u);
  EXPECT_EQ(generation, 0u);  // no format announced yet
}

TEST_F(ElementTest, SrcInterface) {
  Ptr<GstElement> src = make(src_factory());
  ASSERT_TRUE(src);
  EXPECT_STREQ(G_OBJECT_TYPE_NAME(src.get()), "GstCudaIpcRingSrc");
  EXPECT_TRUE(GST_IS_PUSH_SRC(src.get()));
  Ptr<GstElement> alias = make("cudaipcringsrc");
  ASSERT_TRUE(alias);
  EXPECT_EQ(G_OBJECT_TYPE(alias.get()), G_OBJECT_TYPE(src.get()));
  EXPECT_STREQ(
      gst_element_class_get_metadata(GST_ELEMENT_GET_CLASS(src.get()), GST_ELEMENT_METADATA_KLASS),
      "Source/Video");

  expect_string(src.get(), "socket-path");
  expect_int(src.get(), "cuda-device-id", -1, G_MAXINT, -1);
  expect_enum(src.get(), "mode", "GstCudaIpcRingConsumeMode", {"latest", "every-frame"}, "latest");
  expect_enum(src.get(), "io-mode", "GstCudaIpcRingIOMode", {"auto", "import", "copy"}, "auto");
  expect_uint64(src.get(), "connect-timeout", 0, G_MAXUINT64, 0);
  expect_bool(src.get(), "reconnect", true);
  expect_bool(src.get(), "is-live", true);
  expect_stats(src.get());
  expect_template(src.get(), "src", GST_PAD_SRC);
  EXPECT_TRUE(gst_base_src_is_live(GST_BASE_SRC(src.get())));
  g_object_set(src.get(), "is-live", FALSE, nullptr);
  EXPECT_FALSE(gst_base_src_is_live(GST_BASE_SRC(src.get())));
}

// The names the plugin registers under, as gst-inspect lists them.
TEST_F(ElementTest, PluginFeatures) {
  for (const char* name : {"cudaipcringsink", "cudaipcringsrc"}) {
    Ptr<GstElementFactory> f(gst_element_factory_find(name));
    ASSERT_TRUE(f) << name;
    GstPlugin* plugin = gst_plugin_feature_get_plugin(GST_PLUGIN_FEATURE(f.get()));
    ASSERT_NE(plugin, nullptr);
    EXPECT_STREQ(gst_plugin_get_name(plugin), "cudaipc");
    gst_object_unref(plugin);
  }
  if (std::strcmp(sink_factory(), "cudaipcsink") != 0 ||
      std::strcmp(src_factory(), "cudaipcsrc") != 0)
    std::printf("note: cudaipcsink/cudaipcsrc are another plugin's here\n");
}

guint64 uint64_field(const GstStructure* s, const char* name) {
  guint64 v = 0;
  if (s) gst_structure_get_uint64(s, name, &v);
  return v;
}

// What a sink's consumer-stats say its one consumer was delivered; 0 while it has none.
guint64 delivered_at_sink(const Producer& producer) {
  Ptr<GstStructure> s = producer.stats();
  const GValue* list = s ? gst_structure_get_value(s.get(), "consumer-stats") : nullptr;
  if (!list || gst_value_array_get_size(list) != 1) return 0;
  return uint64_field(gst_value_get_structure(gst_value_array_get_value(list, 0)), "delivered");
}

// After frames through one every-frame consumer, both elements' stats count them, and the sink
// names the consumer (its pid is ours: both ends are in this process).
TEST_F(ElementTest, StatsAfterARun) {
  const TensorFrame frame{all_dtypes()[4], {10, 10}};
  Ptr<GstCaps> caps = frame.caps();
  constexpr guint64 kFrames = 7;
  Producer producer(socket());
  Consumer consumer(socket(), "mode=every-frame");
  producer.set_caps(caps.get());
  ASSERT_TRUE(producer.start());
  ASSERT_TRUE(consumer.start());
  ASSERT_TRUE(producer.wait_consumers(1, kWait));
  for (guint64 i = 0; i < kFrames; ++i)
    ASSERT_EQ(producer.push(frame.buffer(i + 1), i), GST_FLOW_OK);
  ASSERT_TRUE(consumer.collector().wait_frames(kFrames, kWait));
  for (guint64 i = 0; i < kFrames; ++i)
    EXPECT_EQ(frame.check(consumer.collector().frames()[i], i + 1), "");

  // The consumer's delivered count reaches the producer through shared memory: poll for it.
  EXPECT_TRUE(poll_until([&] { return delivered_at_sink(producer) == kFrames; }, kWait))
      << text_of(producer.stats().get());

  Ptr<GstStructure> s = producer.stats();
  std::printf("sink stats: %s\n", text_of(s.get()).c_str());
  EXPECT_STREQ(gst_structure_get_name(s.get()), "cudaipcsink-stats");
  guint64 published = 0, dropped = 99, generation = 0;
  guint consumers = 0;
  EXPECT_TRUE(gst_structure_get_uint64(s.get(), "published", &published));
  EXPECT_TRUE(gst_structure_get_uint64(s.get(), "dropped", &dropped));
  EXPECT_TRUE(gst_structure_get_uint(s.get(), "consumers", &consumers));
  EXPECT_TRUE(gst_structure_get_uint64(s.get(), "format-generation", &generation));
  EXPECT_EQ(published, kFrames);
  EXPECT_EQ(dropped, 0u);
  EXPECT_EQ(consumers, 1u);
  EXPECT_EQ(generation, 1u);  // one caps, one layout
  const GValue* list = gst_structure_get_value(s.get(), "consumer-stats");
  ASSERT_TRUE(list && GST_VALUE_HOLDS_ARRAY(list));
  ASSERT_EQ(gst_value_array_get_size(list), 1u);
  const GstStructure* c = gst_value_get_structure(gst_value_array_get_value(list, 0));
  gint pid = 0;
  guint64 delivered = 0, skipped = 99;
  EXPECT_TRUE(gst_structure_get_int(c, "pid", &pid));
  EXPECT_EQ(pid, static_cast<gint>(getpid()));
  EXPECT_STREQ(gst_structure_get_string(c, "mode"), "every-frame");
  EXPECT_TRUE(gst_structure_get_uint64(c, "delivered", &delivered));
  EXPECT_TRUE(gst_structure_get_uint64(c, "skipped", &skipped));
  EXPECT_EQ(delivered, kFrames);
  EXPECT_EQ(skipped, 0u);

  Ptr<GstStructure> src = consumer.stats();
  std::printf("src stats: %s\n", text_of(src.get()).c_str());
  EXPECT_STREQ(gst_structure_get_name(src.get()), "cudaipcsrc-stats");
  gboolean connected = FALSE;
  guint64 src_delivered = 0, src_skipped = 99, producer_published = 0, producer_dropped = 99;
  EXPECT_TRUE(gst_structure_get_boolean(src.get(), "connected", &connected));
  EXPECT_TRUE(gst_structure_get_uint64(src.get(), "delivered", &src_delivered));
  EXPECT_TRUE(gst_structure_get_uint64(src.get(), "skipped", &src_skipped));
  EXPECT_TRUE(gst_structure_get_uint64(src.get(), "producer-published", &producer_published));
  EXPECT_TRUE(gst_structure_get_uint64(src.get(), "producer-dropped", &producer_dropped));
  EXPECT_TRUE(connected);
  EXPECT_EQ(src_delivered, kFrames);
  EXPECT_EQ(src_skipped, 0u);
  EXPECT_EQ(producer_published, kFrames);
  EXPECT_EQ(producer_dropped, 0u);
  // Host memory: the ordering counters are there and never count.
  guint64 gpu_waits = 99, gpu_releases = 99;
  EXPECT_TRUE(gst_structure_get_uint64(src.get(), "gpu-waits", &gpu_waits));
  EXPECT_TRUE(gst_structure_get_uint64(src.get(), "gpu-releases", &gpu_releases));
  EXPECT_EQ(gpu_waits, 0u);
  EXPECT_EQ(gpu_releases, 0u);
}

// A source that outlives its producer and plays the next one on the path counts that producer's
// frames only: the source's delivered and the new sink's consumer-stats both restart with it
// (issue #34: 193 delivered against 104 published).
TEST_F(ElementTest, StatsRestartWithANewProducer) {
  const TensorFrame frame{all_dtypes()[4], {10, 10}};
  Ptr<GstCaps> caps = frame.caps();
  constexpr guint64 kFirst = 6, kSecond = 4;
  Consumer consumer(socket(), "mode=every-frame");
  ASSERT_TRUE(consumer.start());
  {
    Producer first(socket());
    first.set_caps(caps.get());
    ASSERT_TRUE(first.start());
    ASSERT_TRUE(first.wait_consumers(1, kWait));
    for (guint64 i = 0; i < kFirst; ++i) ASSERT_EQ(first.push(frame.buffer(i + 1), i), GST_FLOW_OK);
    ASSERT_TRUE(consumer.collector().wait_frames(kFirst, kWait));
    EXPECT_TRUE(poll_until([&] { return delivered_at_sink(first) == kFirst; }, kWait));
  }
  Producer second(socket());
  second.set_caps(caps.get());
  ASSERT_TRUE(second.start());
  ASSERT_TRUE(second.wait_consumers(1, kWait));
  for (guint64 i = 0; i < kSecond; ++i)
    ASSERT_EQ(second.push(frame.buffer(100 + i), i), GST_FLOW_OK);
  ASSERT_TRUE(consumer.collector().wait_frames(kFirst + kSecond, kWait))
      << consumer.pipeline().errors();
  const std::vector<Received> got = consumer.collector().frames();
  for (guint64 i = 0; i < kFirst; ++i) EXPECT_EQ(frame.check(got[i], i + 1), "");
  for (guint64 i = 0; i < kSecond; ++i) EXPECT_EQ(frame.check(got[kFirst + i], 100 + i), "");

  EXPECT_TRUE(poll_until([&] { return delivered_at_sink(second) == kSecond; }, kWait))
      << "the new sink's consumer-stats: " << text_of(second.stats().get());
  Ptr<GstStructure> src = consumer.stats();
  std::printf("src stats: %s\n", text_of(src.get()).c_str());
  EXPECT_EQ(uint64_field(src.get(), "delivered"), kSecond) << text_of(src.get());
  EXPECT_EQ(uint64_field(src.get(), "producer-published"), kSecond) << text_of(src.get());
  EXPECT_EQ(uint64_field(src.get(), "skipped"), 0u) << text_of(src.get());
  EXPECT_EQ(consumer.pipeline().errors(), "");
}

}  // namespace
}  // namespace cudaipc::testing::gst

namespace cudaipc::testing::gst {
namespace {

std::string string_prop(GstElement* e, const char* name) {
  gchar* raw = nullptr;
  g_object_get(e, name, &raw, nullptr);
  const Ptr<gchar> owned(raw);
  return raw ? raw : "";
}

// Issue #38: a property the docs call NULL/READY-only is refused while PLAYING (a GLib warning,
// the value unchanged: the sink used to read back the new socket-path and serve the old one),
// and one marked mutable in PLAYING is taken and applies.
TEST_F(ElementTest, ReadyOnlyPropertiesAreRefusedWhilePlaying) {
  const TensorFrame frame{all_dtypes()[4], {10, 10}};
  Ptr<GstCaps> caps = frame.caps();
  Producer producer(socket());
  Consumer consumer(socket(), "mode=every-frame");
  producer.set_caps(caps.get());
  ASSERT_TRUE(producer.start());
  ASSERT_TRUE(consumer.start());
  ASSERT_TRUE(producer.wait_consumers(1, kWait));
  ASSERT_EQ(producer.push(frame.buffer(1), 0), GST_FLOW_OK);
  ASSERT_TRUE(consumer.collector().wait_frames(1, kWait));

  const std::string other = dir_.file("other");
  for (GstElement* e : {producer.sink(), consumer.src()}) {
    SCOPED_TRACE(GST_ELEMENT_NAME(e));
    const int before = glib_complaints().load();
    g_object_set(e, "socket-path", other.c_str(), nullptr);
    EXPECT_EQ(glib_complaints().load(), before + 1) << "the refusal is said";
    EXPECT_EQ(string_prop(e, "socket-path"), socket()) << "the value is unchanged";
  }
  // Mutable while PLAYING: taken without a word.
  const int before = glib_complaints().load();
  g_object_set(consumer.src(), "connect-timeout", G_GUINT64_CONSTANT(5000000000), "reconnect",
               FALSE, nullptr);
  EXPECT_EQ(glib_complaints().load(), before);
  guint64 timeout = 0;
  gboolean reconnect = TRUE;
  g_object_get(consumer.src(), "connect-timeout", &timeout, "reconnect", &reconnect, nullptr);
  EXPECT_EQ(timeout, G_GUINT64_CONSTANT(5000000000));
  EXPECT_FALSE(reconnect);

  // The stream goes on where it was: the next frame arrives whole through the old path.
  ASSERT_EQ(producer.push(frame.buffer(2), 1), GST_FLOW_OK);
  ASSERT_TRUE(consumer.collector().wait_frames(2, kWait));
  EXPECT_EQ(frame.check(consumer.collector().frames()[1], 2), "");
  complaints_ = glib_complaints().load();  // the two refusals above were this test's to cause
}

// Issue #38: a meta list that cannot parse is refused with its reason, the value unchanged; the
// forms the docs give are taken.
TEST_F(ElementTest, MetaListsThatCannotParseAreRefused) {
  Ptr<GstElement> sink = make(sink_factory()), src = make(src_factory()),
                  filter = make("cudaipcfilter");
  ASSERT_TRUE(sink && src && filter);
  struct Case {
    GstElement* e;
    const char* prop;
  };
  for (const Case& c : {Case{sink.get(), "forward-metas"}, Case{src.get(), "forward-metas"},
                        Case{filter.get(), "forward-metas"}, Case{filter.get(), "reply-metas"}}) {
    SCOPED_TRACE(std::string(GST_ELEMENT_NAME(c.e)) + " " + c.prop);
    const std::string was = string_prop(c.e, c.prop);
    for (const char* bad : {"!!,, ,*x", "GstAnalyticsRelationMetaAPI,,", "9lives", "a b"}) {
      const int before = glib_complaints().load();
      g_object_set(c.e, c.prop, bad, nullptr);
      EXPECT_EQ(glib_complaints().load(), before + 1) << bad;
      EXPECT_EQ(string_prop(c.e, c.prop), was) << bad;
    }
    for (const char* good : {"GstAnalyticsRelationMetaAPI, filter-result", "*", "", " "}) {
      const int before = glib_complaints().load();
      g_object_set(c.e, c.prop, good, nullptr);
      EXPECT_EQ(glib_complaints().load(), before) << good;
      EXPECT_EQ(string_prop(c.e, c.prop), good);
    }
  }
  complaints_ = glib_complaints().load();
}

}  // namespace
}  // namespace cudaipc::testing::gst
