// Frames of several tensors (other/tensors, num_tensors 2..16) through cudaipcsink ipc-mode=host
// and cudaipcsrc in one process: one slot holds every tensor; the source's buffer has one memory
// per tensor, as NNStreamer's elements expect, and a GstCudaIpcTensorMeta for each; every
// tensor's bytes are checked (a pattern with the frame's index), in both io-modes, from a buffer
// of one memory per tensor and from one packed memory.
#include <string>
#include <vector>

#include "element_harness.hpp"

namespace cudaipc::testing::gst {
namespace {

constexpr Ms kWait{5000};

struct Spec {
  const char* type;
  const char* dims;  // NNStreamer order, innermost first
  gsize bytes;
};

std::string caps_text(const std::vector<Spec>& specs) {
  std::string types, dims;
  for (std::size_t i = 0; i < specs.size(); ++i) {
    types += std::string(i ? "," : "") + specs[i].type;
    dims += std::string(i ? "," : "") + specs[i].dims;
  }
  return "other/tensors,format=static,num_tensors=" + std::to_string(specs.size()) + ",types=\"" +
         types + "\",dimensions=\"" + dims + "\",framerate=30/1";
}

guint8 byte_of(int frame, std::size_t tensor, gsize k) {
  return static_cast<guint8>(frame * 31 + tensor * 7 + k);
}

GstBuffer* frame_buffer(const std::vector<Spec>& specs, int frame, bool packed) {
  GstBuffer* buf = gst_buffer_new();
  std::vector<guint8> all;
  for (std::size_t t = 0; t < specs.size(); ++t) {
    std::vector<guint8> bytes(specs[t].bytes);
    for (gsize k = 0; k < bytes.size(); ++k) bytes[k] = byte_of(frame, t, k);
    if (packed) {
      all.insert(all.end(), bytes.begin(), bytes.end());
    } else {
      gst_buffer_append_memory(
          buf,
          gst_memory_new_wrapped(GST_MEMORY_FLAG_READONLY, g_memdup2(bytes.data(), bytes.size()),
                                 bytes.size(), 0, bytes.size(), nullptr, nullptr));
    }
  }
  if (packed) {
    gst_buffer_append_memory(
        buf, gst_memory_new_wrapped(GST_MEMORY_FLAG_READONLY, g_memdup2(all.data(), all.size()),
                                    all.size(), 0, all.size(), nullptr, nullptr));
  }
  return buf;
}

// "" when the buffer holds frame `frame` of `specs` as one memory per tensor, with a tensor meta
// per tensor in order.
std::string check(GstBuffer* buf, const std::vector<Spec>& specs, int frame) {
  if (gst_buffer_n_memory(buf) != specs.size())
    return std::to_string(gst_buffer_n_memory(buf)) + " memories";
  for (std::size_t t = 0; t < specs.size(); ++t) {
    GstMemory* mem = gst_buffer_peek_memory(buf, static_cast<guint>(t));
    GstMapInfo map;
    if (!gst_memory_map(mem, &map, GST_MAP_READ)) return "map";
    std::string why = map.size == specs[t].bytes ? "" : "tensor " + std::to_string(t) + " size";
    for (gsize k = 0; k < map.size && why.empty(); ++k)
      if (map.data[k] != byte_of(frame, t, k)) why = "tensor " + std::to_string(t) + " byte";
    gst_memory_unmap(mem, &map);
    if (!why.empty()) return why;
  }
  GType api = g_type_from_name(GST_CUDA_IPC_TENSOR_META_API_NAME);
  gpointer state = nullptr;
  std::size_t n = 0;
  while (GstMeta* m = gst_buffer_iterate_meta_filtered(buf, &state, api)) {
    auto* tm = reinterpret_cast<GstCudaIpcTensorMeta*>(m);
    if (n >= specs.size() || tm->size != specs[n].bytes || tm->seq != static_cast<guint64>(frame))
      return "tensor meta " + std::to_string(n);
    ++n;
  }
  return n == specs.size() ? "" : std::to_string(n) + " tensor metas";
}

void run(const std::string& socket, const std::vector<Spec>& specs, const char* io_mode,
         bool packed) {
  Ptr<GstCaps> caps = caps_from(caps_text(specs));
  Producer producer(socket);
  PullingConsumer consumer(socket, std::string("io-mode=") + io_mode);
  producer.set_caps(caps.get());
  ASSERT_TRUE(producer.start());
  ASSERT_TRUE(consumer.start());
  ASSERT_TRUE(producer.wait_consumers(1, kWait));
  for (int i = 1; i <= 10; ++i) {
    SCOPED_TRACE("frame " + std::to_string(i));
    ASSERT_EQ(producer.push(frame_buffer(specs, i, packed), i - 1), GST_FLOW_OK);
    Ptr<GstSample> sample = consumer.pull();
    ASSERT_TRUE(sample) << consumer.pipeline().errors() << producer.pipeline().errors();
    EXPECT_EQ(check(gst_sample_get_buffer(sample.get()), specs, i), "");
    if (i == 1) {
      Ptr<GstCaps> want = caps_from(caps_text(specs));
      EXPECT_TRUE(gst_caps_is_equal(gst_sample_get_caps(sample.get()), want.get()))
          << text_of(gst_sample_get_caps(sample.get()));
    }
  }
  EXPECT_EQ(consumer.pipeline().errors(), "");
  EXPECT_EQ(producer.pipeline().errors(), "");
}

const std::vector<Spec>& three() {
  static const std::vector<Spec> s = {
      {"uint8", "3:2", 6}, {"float32", "4:100", 1600}, {"int64", "1", 8}};
  return s;
}

TEST_F(ElementTest, ThreeTensorsImportedOneMemoryEach) {
  run(socket(), three(), "auto", false);
}

TEST_F(ElementTest, ThreeTensorsCopiedOneMemoryEach) {
  run(socket(), three(), "copy", false);
}

TEST_F(ElementTest, ThreeTensorsFromOnePackedMemory) {
  run(socket(), three(), "auto", true);
}

TEST_F(ElementTest, SixteenTensors) {
  std::vector<Spec> specs;
  static std::vector<std::string> dims;
  dims.clear();
  for (int i = 0; i < 16; ++i) dims.push_back(std::to_string(i + 1));
  for (int i = 0; i < 16; ++i) specs.push_back({"uint8", dims[i].c_str(), gsize(i + 1)});
  run(socket(), specs, "auto", false);
}

}  // namespace
}  // namespace cudaipc::testing::gst
