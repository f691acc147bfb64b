// Issue #38, item 4: what an application hears without polling stats. A sink posts an element
// message for each consumer that joins or leaves (evicted, with the producer's reason); the
// evicted source says it was evicted, in those words; a sink with no consumer prints its stats
// without an empty array. An application's view: pipelines in this process, the bus read by the
// test.
#include <unistd.h>

#include <string>

#include "element_harness.hpp"

namespace cudaipc::testing::gst {
namespace {

// The next element message of `type_name` on `p`'s bus within `timeout` (a copy), or null.
Ptr<GstStructure> next_element_message(Pipeline& p, const char* type_name, Ms timeout) {
  const auto end = Clock::now() + timeout;
  while (Clock::now() < end) {
    Ptr<GstMessage> m = p.pop(GST_MESSAGE_ELEMENT, Ms(100));
    const GstStructure* s = m ? gst_message_get_structure(m.get()) : nullptr;
    if (s && gst_structure_has_name(s, type_name)) return Ptr<GstStructure>(gst_structure_copy(s));
  }
  return Ptr<GstStructure>();
}

std::string string_field(const GstStructure* s, const char* name) {
  const gchar* v = s ? gst_structure_get_string(s, name) : nullptr;
  return v ? v : "";
}

guint uint_field(const GstStructure* s, const char* name) {
  guint v = 999;
  if (s) gst_structure_get_uint(s, name, &v);
  return v;
}

constexpr Ms kWait{10000};

TEST_F(ElementTest, ConsumersComingAndGoingAreMessagesAndEvictionIsSaidAsSuch) {
  const TensorFrame frame{all_dtypes()[4], {10, 10}};
  Ptr<GstCaps> caps = frame.caps();
  // Two slots: a consumer holding one holds publishing back, which the lease timeout ends.
  Producer producer(socket(), "num-slots=2");
  producer.set_caps(caps.get());
  ASSERT_TRUE(producer.start());
  const std::string idle = text_of(producer.stats().get());
  EXPECT_EQ(idle.find("consumer-stats"), std::string::npos) << idle;
  EXPECT_EQ(idle.find("(int)<"), std::string::npos) << idle;

  // An application that stops pulling: its source holds its frames past the lease timeout (5 s).
  PullingConsumer consumer(socket(), "");
  ASSERT_TRUE(consumer.start());
  Ptr<GstStructure> joined =
      next_element_message(producer.pipeline(), "cudaipcsink-consumer", kWait);
  ASSERT_TRUE(joined) << "no message when the consumer joined";
  EXPECT_EQ(string_field(joined.get(), "event"), "joined");
  EXPECT_EQ(string_field(joined.get(), "mode"), "every-frame");
  EXPECT_EQ(string_field(joined.get(), "reason"), "");
  EXPECT_EQ(uint_field(joined.get(), "consumers"), 1u);
  gint pid = 0;
  EXPECT_TRUE(gst_structure_get_int(joined.get(), "pid", &pid));
  EXPECT_EQ(pid, ::getpid());
  for (guint64 i = 0; i < 8; ++i) ASSERT_EQ(producer.push(frame.buffer(i + 1), i), GST_FLOW_OK);

  Ptr<GstStructure> evicted =
      next_element_message(producer.pipeline(), "cudaipcsink-consumer", Ms(15000));
  ASSERT_TRUE(evicted) << "no message when the consumer was evicted";
  EXPECT_EQ(string_field(evicted.get(), "event"), "evicted") << text_of(evicted.get());
  EXPECT_NE(string_field(evicted.get(), "reason").find("lease timeout"), std::string::npos)
      << text_of(evicted.get());
  EXPECT_EQ(uint_field(evicted.get(), "consumers"), 0u);

  // The source, reconnecting, says it was evicted and why, not that the producer went away.
  Ptr<GstMessage> w = consumer.pipeline().pop(GST_MESSAGE_WARNING, Ms(5000));
  ASSERT_TRUE(w) << "the source did not say it lost the producer";
  GError* err = nullptr;
  gst_message_parse_warning(w.get(), &err, nullptr);
  Ptr<GError> owned(err);
  const std::string text = err ? err->message : "";
  EXPECT_NE(text.find("the producer evicted this consumer: "), std::string::npos) << text;
  EXPECT_NE(text.find("lease timeout"), std::string::npos) << text;
  EXPECT_EQ(text.find("refused the connection"), std::string::npos) << text;
}

}  // namespace
}  // namespace cudaipc::testing::gst
