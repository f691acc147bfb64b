// cudaipcsrc's buffers, ipc-mode=host, in one process: in import mode each slot has one buffer,
// reused frame after frame once downstream has freed it, whose metas are updated in place (never
// stale, never doubled); a held buffer keeps its frame while the ring goes on; io-mode=copy takes
// its buffers from a pool too. Every frame's bytes are checked against its pattern.
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "element_harness.hpp"

namespace cudaipc::testing::gst {
namespace {

constexpr Ms kWait{5000};

// How many reference timestamp metas of `reference` the buffer has.
int count_references(GstBuffer* buf, const char* reference) {
  Ptr<GstCaps> want = caps_from(reference);
  int n = 0;
  gpointer state = nullptr;
  while (GstMeta* m =
             gst_buffer_iterate_meta_filtered(buf, &state, GST_REFERENCE_TIMESTAMP_META_API_TYPE))
    if (gst_caps_is_equal(reinterpret_cast<GstReferenceTimestampMeta*>(m)->reference, want.get()))
      ++n;
  return n;
}

GstClockTime reference_time(GstBuffer* buf, const char* reference) {
  Ptr<GstCaps> want = caps_from(reference);
  GstReferenceTimestampMeta* m = gst_buffer_get_reference_timestamp_meta(buf, want.get());
  return m ? m->timestamp : GST_CLOCK_TIME_NONE;
}

// The checks every pulled frame passes: its bytes, its tensor meta, one of each reference
// timestamp with values of this frame, and DISCONT on the first frame only.
std::string check_sample(GstSample* sample, const TensorFrame& frame, std::uint64_t seq,
                         GstClockTime* publish) {
  GstBuffer* buf = gst_sample_get_buffer(sample);
  Received r = Collector::copy_out(sample);
  std::string why = frame.check(r, seq);
  if (why.empty()) why = check_tensor_meta(r, frame.expected(), seq);
  for (const char* ref : {"timestamp/x-cudaipc-pts", "timestamp/x-cudaipc-publish",
                          "timestamp/x-cudaipc-sink-chain", "timestamp/x-cudaipc-acquire"})
    if (why.empty() && count_references(buf, ref) != 1)
      why = std::string(ref) + " appears " + std::to_string(count_references(buf, ref)) + " times";
  const GstClockTime pts = reference_time(buf, "timestamp/x-cudaipc-pts");
  if (why.empty() && pts != (seq - 1) * Producer::kFrame)
    why = "producer PTS " + std::to_string(pts) + ", expected frame " + std::to_string(seq - 1);
  *publish = reference_time(buf, "timestamp/x-cudaipc-publish");
  const GstClockTime acquired = reference_time(buf, "timestamp/x-cudaipc-acquire");
  if (why.empty() && !(acquired >= *publish))
    why = "acquired at " + std::to_string(acquired) + " before its publish " +
          std::to_string(*publish);
  if (why.empty() && r.discont() != (seq == 1)) why = "DISCONT on frame " + std::to_string(seq);
  return why;
}

// Import: at most one buffer per slot, each one coming back for later frames of its slot with
// every meta describing the frame it now holds.
TEST_F(ElementTest, ImportedBuffersComeBackForLaterFrames) {
  const TensorFrame frame{all_dtypes()[4], {64, 48}};
  Ptr<GstCaps> caps = frame.caps();
  constexpr int kSlots = 3, kFrames = 30;
  Producer producer(socket(), "num-slots=" + std::to_string(kSlots));
  PullingConsumer consumer(socket(), "io-mode=auto");  // host channels: imported everywhere
  producer.set_caps(caps.get());
  ASSERT_TRUE(producer.start());
  ASSERT_TRUE(consumer.start());
  ASSERT_TRUE(producer.wait_consumers(1, kWait));
  std::set<GstBuffer*> seen;
  GstClockTime last_publish = 0;
  for (int i = 0; i < kFrames; ++i) {
    SCOPED_TRACE("frame " + std::to_string(i + 1));
    ASSERT_EQ(producer.push(frame.buffer(i + 1), i), GST_FLOW_OK);
    Ptr<GstSample> sample = consumer.pull();
    ASSERT_TRUE(sample) << consumer.pipeline().errors();
    GstClockTime publish = 0;
    EXPECT_EQ(check_sample(sample.get(), frame, i + 1, &publish), "");
    EXPECT_GT(publish, last_publish) << "the publish time is this frame's, not a stale one";
    last_publish = publish;
    seen.insert(gst_sample_get_buffer(sample.get()));
  }
  // The appsink keeps its last sample: one more buffer than slots at most.
  EXPECT_LE(seen.size(), static_cast<std::size_t>(kSlots + 1));
  EXPECT_EQ(consumer.pipeline().errors(), "");
}

// A buffer held by the app keeps its frame, bytes and metas, while frames go on through the
// other slots; once freed, its slot (and buffer) serve later frames again.
TEST_F(ElementTest, HeldImportedBufferKeepsItsFrame) {
  const TensorFrame frame{all_dtypes()[5], {40, 30}};
  Ptr<GstCaps> caps = frame.caps();
  constexpr int kFrames = 20;
  Producer producer(socket(), "num-slots=4");
  PullingConsumer consumer(socket(), "io-mode=auto");  // host channels: imported everywhere
  producer.set_caps(caps.get());
  ASSERT_TRUE(producer.start());
  ASSERT_TRUE(consumer.start());
  ASSERT_TRUE(producer.wait_consumers(1, kWait));
  ASSERT_EQ(producer.push(frame.buffer(1), 0), GST_FLOW_OK);
  Ptr<GstSample> held = consumer.pull();
  ASSERT_TRUE(held) << consumer.pipeline().errors();
  GstClockTime publish = 0;
  ASSERT_EQ(check_sample(held.get(), frame, 1, &publish), "");
  GstBuffer* held_buf = gst_sample_get_buffer(held.get());
  for (int i = 1; i < kFrames; ++i) {
    SCOPED_TRACE("frame " + std::to_string(i + 1));
    ASSERT_EQ(producer.push(frame.buffer(i + 1), i), GST_FLOW_OK);
    Ptr<GstSample> sample = consumer.pull();
    ASSERT_TRUE(sample) << consumer.pipeline().errors();
    EXPECT_NE(gst_sample_get_buffer(sample.get()), held_buf) << "the held buffer was handed out";
    GstClockTime p = 0;
    EXPECT_EQ(check_sample(sample.get(), frame, i + 1, &p), "");
  }
  GstClockTime again = 0;
  EXPECT_EQ(check_sample(held.get(), frame, 1, &again), "") << "the held frame changed";
  EXPECT_EQ(again, publish);
  held.reset();
  for (int i = kFrames; i < kFrames + 8; ++i) {
    ASSERT_EQ(producer.push(frame.buffer(i + 1), i), GST_FLOW_OK);
    Ptr<GstSample> sample = consumer.pull();
    ASSERT_TRUE(sample) << consumer.pipeline().errors();
    GstClockTime p = 0;
    EXPECT_EQ(check_sample(sample.get(), frame, i + 1, &p), "");
  }
  EXPECT_EQ(consumer.pipeline().errors(), "");
}

// io-mode=copy: every frame is a copy (the slot goes back at once), from a pool of buffers.
TEST_F(ElementTest, CopiedBuffersComeFromAPool) {
  const TensorFrame frame{all_dtypes()[9], {16, 24}};  // float32
  Ptr<GstCaps> caps = frame.caps();
  constexpr int kFrames = 30;
  Producer producer(socket(), "num-slots=2");
  PullingConsumer consumer(socket(), "io-mode=copy");
  producer.set_caps(caps.get());
  ASSERT_TRUE(producer.start());
  ASSERT_TRUE(consumer.start());
  ASSERT_TRUE(producer.wait_consumers(1, kWait));
  std::vector<Ptr<GstSample>> kept;  // copies own no slot: the app may keep all of them
  std::set<GstBuffer*> seen;
  for (int i = 0; i < kFrames; ++i) {
    ASSERT_EQ(producer.push(frame.buffer(i + 1), i), GST_FLOW_OK);
    Ptr<GstSample> sample = consumer.pull();
    ASSERT_TRUE(sample) << consumer.pipeline().errors();
    seen.insert(gst_sample_get_buffer(sample.get()));
    if (i < 5) kept.push_back(std::move(sample));
  }
  for (int i = 0; i < 5; ++i) {
    GstClockTime p = 0;
    EXPECT_EQ(check_sample(kept[i].get(), frame, i + 1, &p), "") << "kept copy " << i + 1;
  }
  EXPECT_LT(seen.size(), static_cast<std::size_t>(kFrames)) << "copies are pooled";
  EXPECT_EQ(consumer.pipeline().errors(), "");
}

}  // namespace
}  // namespace cudaipc::testing::gst
