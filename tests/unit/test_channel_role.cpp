// What a channel is for (ChannelRole, in its control block): a producer states it, a consumer that
// reads one role turns another away before it takes a place, and a plain consumer reads any.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <optional>
#include <string>

#include "cudaipc/consumer.hpp"
#include "cudaipc/cudaipc.h"
#include "cudaipc/error.hpp"
#include "cudaipc/producer.hpp"
#include "temp_dir.hpp"

using namespace cudaipc;
using namespace cudaipc::testing;
using namespace std::chrono_literals;

namespace {

std::unique_ptr<Producer> channel(const std::string& path, ChannelRole role) {
  ProducerOptions po;
  po.path = path;
  po.role = role;
  auto p = std::make_unique<Producer>(po);
  Format f;
  f.caps = "test/frames";
  f.tensor = make_tensor(DType::uint8, {8});
  p->set_format(f);
  return p;
}

ConsumerOptions reader(const std::string& path, std::optional<ChannelRole> role) {
  ConsumerOptions co;
  co.path = path;
  co.reconnect = false;
  co.role = role;
  return co;
}

}  // namespace

TEST(ChannelRole, ProducerRefusesAValueNoRoleHas) {
  TempDir dir;
  ProducerOptions po;
  po.path = dir.file("ch");
  for (std::uint32_t bad : {0u, 4u, 99u}) {
    po.role = static_cast<ChannelRole>(bad);
    try {
      Producer p(po);
      ADD_FAILURE() << "role " << bad << " was taken";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Errc::invalid_argument);
      EXPECT_NE(std::string(e.what()).find("role " + std::to_string(bad) + " is no channel role"),
                std::string::npos)
          << e.what();
    }
  }
}

TEST(ChannelRole, ReaderOfOneRoleTurnsAnotherAwayBeforeTakingAPlace) {
  TempDir dir;
  const std::string path = dir.file("cam0");
  auto sink = channel(path, ChannelRole::frames);
  try {
    Consumer c(reader(path, ChannelRole::requests));
    FAIL() << "a request reader took a sink's channel";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("'" + path + "' is a cudaipcsink's channel"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(sink->consumer_count(), 0u);
  // The same reader takes a request channel, and a replies reader turns it away too.
  const std::string req = dir.file("detector");
  auto filter = channel(req, ChannelRole::requests);
  Consumer ok(reader(req, ChannelRole::requests));
  EXPECT_TRUE(ok.connected());
  try {
    Consumer c(reader(req, ChannelRole::replies));
    FAIL() << "a reply reader took a request channel";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("is a cudaipcfilter's request channel, not a model "
                                         "server's reply channel"),
              std::string::npos)
        << e.what();
  }
}

// Watching a filter's frames (cudaipcsrc, a Consumer) is fine: a plain reader takes any role.
TEST(ChannelRole, PlainReaderReadsARequestChannel) {
  TempDir dir;
  const std::string path = dir.file("detector");
  auto filter = channel(path, ChannelRole::requests);
  Consumer c(reader(path, std::nullopt));
  const std::uint8_t bytes[8] = {9, 8, 7, 6, 5, 4, 3, 2};
  ASSERT_EQ(filter->publish(bytes, sizeof bytes, FrameInfo{}), PublishStatus::published);
  Event ev;
  do ev = c.next(5s);
  while (ev.type == EventType::format);
  ASSERT_EQ(ev.type, EventType::frame) << ev.message;
  EXPECT_EQ(std::memcmp(ev.frame.data(), bytes, sizeof bytes), 0);
}

TEST(ChannelRole, CApiStatesTheRoleGiven) {
  TempDir dir;
  const std::string path = dir.file("detector");
  cudaipc_producer_options po;
  cudaipc_producer_options_init(&po);
  EXPECT_EQ(po.role, CUDAIPC_ROLE_FRAMES);
  po.path = path.c_str();
  po.role = CUDAIPC_ROLE_REQUESTS;
  cudaipc_producer* p = nullptr;
  ASSERT_EQ(cudaipc_producer_new(&po, &p), CUDAIPC_OK) << cudaipc_last_error();
  EXPECT_NO_THROW(Consumer c(reader(path, ChannelRole::requests)));
  cudaipc_producer_free(p);

  po.role = static_cast<cudaipc_role>(7);
  EXPECT_EQ(cudaipc_producer_new(&po, &p), CUDAIPC_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(cudaipc_last_error()).find("role 7"), std::string::npos);
}
